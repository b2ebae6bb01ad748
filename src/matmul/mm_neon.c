/* mm_neon.c — the matmul kernels on AArch64 (NEON, 4 lanes): the body over mmv_neon.h, the
 * integer path twice — sdot where the CPU has the dot product (HWCAP_ASIMDDP), smull +
 * sadalp otherwise — chosen per call; both give the same exact integer sums. */
#include "mmv_neon.h"

#define MV_ONLY_DP 1
#include "mm_body.h"

#define MV_IT
#define MV_DP 1
#define SFX(x) x##_mull
#define mvi_dp mvi_dp_mull
#include "mm_body_int.h"
#undef mvi_dp
#undef SFX
#undef MV_IT
#define MV_IT MV_DP_TARGET
#define SFX(x) x##_sdot
#define mvi_dp mvi_dp_sdot
#include "mm_body_int.h"
#undef mvi_dp
#undef SFX
#undef MV_IT
#undef MV_DP

static void nk_int(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    if (MV_NEON_SDOT()) nk_int_sdot(c, n0, n1, ws);
    else nk_int_mull(c, n0, n1, ws);
}

#include "mm_body_gb.h"
#include "mm_body_lat.h"

#include "mm_isa.h"
