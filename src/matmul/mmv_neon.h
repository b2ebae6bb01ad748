/* mmv_neon.h — the vocabulary of mm_body.h on AArch64: the portable vocabulary's 4 lanes
 * (mmv_portable.h: GCC and Clang compile its operators to NEON), with the operations that are
 * byte loops there written as NEON instructions:
 *   mvi_lookup16   tbl (the codes' low 4 bits index a 16-byte table)
 *   mvf_lut16      tbl over the 64 bytes of a 16-entry f32 table
 *   mvi_dp_sdot    sdot: each int32 lane plus the 4 products of its signed bytes (the CPUs
 *                  with the dot product, HWCAP_ASIMDDP; functions built with MV_DP_TARGET)
 *   mvi_dp_mull    the same sums without it: smull/smull2 to int16 products, addp of
 *                  neighbours (|w x q| <= 128 x 127, so a pair fits int16), sadalp into the
 *                  int32 lanes
 * Both dot products take the weights as signed bytes (MV_DP_BIAS 0: no +128 and no
 * correction of the sums), so IV_DP's integer sums are exact and equal to every other
 * flavour's; mm_neon.c builds the integer body once with each. */
#ifndef QTK_MMV_NEON_H
#define QTK_MMV_NEON_H

#include <arm_neon.h>

#define MV_NAME "neon"
#define MV_TABLE qtk__mm_isa_neon
#define MV_NATIVE_OPS 1
#define MV_DP_BIAS 0
/* arm_neon.h defines vdotq_s32 for armv8.2-a+dotprod; every CPU with the dot product is v8.2 or later */
#define MV_DP_TARGET __attribute__((target("arch=armv8.2-a+dotprod")))
/* whether the integer path runs on sdot (mm_neon.c's nk_int), and its name */
#define MV_NEON_SDOT() ((qtk__mm_features() & QTK_CPU_DOTPROD) && !(qtk__mm_hooks() & QTK__MM_HOOK_INT_MAD))
#define MV_DP_NAME (MV_NEON_SDOT() ? "neon integer: sdot" : "neon integer: smull + sadalp (no dot product)")
#define MV_GB_INSN "lane loops, tbl lookups"
#include "mmv_portable.h"

MV_AI int8x16_t mv_s8(mvi v) { return (int8x16_t)v; }
MV_AI uint8x16_t mv_u8(mvi v) { return (uint8x16_t)v; }

/* byte b of the result is t[c & 15] for c = byte b of codes */
MV_AI mvi mvi_lookup16(mvi t, mvi codes) { return (mvi)vqtbl1q_u8(mv_u8(t), vandq_u8(mv_u8(codes), vdupq_n_u8(15))); }

typedef struct {
    uint8x16x4_t b;
} mv_lut16;
MV_AI mv_lut16 mv_lut16_load(const float *t) {
    mv_lut16 l;
    for (int i = 0; i < 4; i++) l.b.val[i] = vreinterpretq_u8_f32(vld1q_f32(t + 4 * i));
    return l;
}
MV_AI mvf mvf_lut16(const mv_lut16 *l, mvi idx) {
    /* byte 4l + j of the index vector: 4 (idx_l & 15) + j */
    static const uint8_t spread[16] = {0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12};
    static const uint8_t within[16] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3};
    uint32x4_t off = vshlq_n_u32(vandq_u32((uint32x4_t)idx, vdupq_n_u32(15)), 2);
    uint8x16_t bi = vaddq_u8(vqtbl1q_u8(vreinterpretq_u8_u32(off), vld1q_u8(spread)), vld1q_u8(within));
    return (mvf)vreinterpretq_f32_u8(vqtbl4q_u8(l->b, bi));
}

/* acc + the 4 products of each lane's signed bytes of w and x */
MV_AI MV_DP_TARGET mvi mvi_dp_sdot(mvi acc, mvi w, mvi x) { return (mvi)vdotq_s32((int32x4_t)acc, mv_s8(w), mv_s8(x)); }
MV_AI mvi mvi_dp_mull(mvi acc, mvi w, mvi x) {
    int16x8_t lo = vmull_s8(vget_low_s8(mv_s8(w)), vget_low_s8(mv_s8(x)));
    int16x8_t hi = vmull_high_s8(mv_s8(w), mv_s8(x));
    return (mvi)vpadalq_s16((int32x4_t)acc, vpaddq_s16(lo, hi));
}

#endif
