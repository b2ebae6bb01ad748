/* mm_simd.h — what mm_avx2.c and mm_avx512.c share after choosing their vocabulary: the
 * exact kernels, the integer kernels twice (pmaddubsw and the VNNI dot product, chosen per
 * call), and the ISA table. Included once per x86 width. */
#include "mm_body.h"

#define MV_IT
#define MV_DP 0
#define SFX(x) x##_mad
#include "mm_body_int.h"
#undef MV_DP
#undef SFX
#undef MV_IT
#define MV_IT MV_DP_TARGET
#define MV_DP 1
#define SFX(x) x##_vnni
#include "mm_body_int.h"
#undef MV_DP
#undef SFX
#undef MV_IT

static void nk_int(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    if (c->ivar == IV_DP || c->ivar == IV_XDP) nk_int_vnni(c, n0, n1, ws);
    else nk_int_mad(c, n0, n1, ws);
}

#include "mm_body_gb.h"
#include "mm_body_lat.h"

#include "mm_isa.h"
