/* mm_portable.c — the matmul kernels in portable C (GCC/Clang vector extensions, 4 lanes):
 * the level for CPUs without AVX2, ARM included. */
#include "mmv_portable.h"

#ifndef MV_ALL_FLAVOURS
#  define MV_ONLY_DP 1
#endif
#include "mm_body.h"

#define MV_IT
#define MV_DP 1
#define SFX(x) x##_dp
#include "mm_body_int.h"
#undef MV_DP
#undef SFX

/* The dot product is a lane loop here, so the library takes IV_DP only; the tests' builds
 * of this file at other widths (MV_ALL_FLAVOURS) also have the others, which test hooks
 * select, so that they run at AVX2's and AVX-512's widths on any machine. */
#ifdef MV_ALL_FLAVOURS
#  define MV_DP 0
#  define SFX(x) x##_mad
#  include "mm_body_int.h"
#  undef MV_DP
#  undef SFX
static void nk_int(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    if (c->ivar == IV_DP) nk_int_dp(c, n0, n1, ws);
    else nk_int_mad(c, n0, n1, ws);
}
#else
static void nk_int(const qtk__mm *c, size_t n0, size_t n1, float *ws) { nk_int_dp(c, n0, n1, ws); }
#endif
#undef MV_IT

#include "mm_body_gb.h"
#include "mm_body_lat.h"

#include "mm_isa.h"
