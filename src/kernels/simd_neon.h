/* simd_neon.h — the vector vocabulary of simd_body.h on AArch64: the portable vocabulary's
 * 4 lanes (simd_portable.h, whose operators GCC and Clang already compile to NEON), with the
 * operations that are lane loops there written as NEON instructions:
 *   vf_fma     fmla (fused, as fmaf)            vf_trunc  frintz (as truncf)
 *   vi_srlv    ushl by the negated count        vi_sllv   ushl; counts above 31 give 0, as
 *                                                         x86's vpsrlvd/vpsllvd
 *   vf_lut16   tbl over the 64 bytes of a 16-entry f32 table: the lanes' indices spread to
 *              byte offsets 4i..4i+3, one four-register tbl
 *   vi_load_codes4/2, vi_load_codes4x2_lut   the packed codes' bytes spread to their lanes by
 *              one tbl, then ushl by each lane's position in its byte and a mask
 * Each computes the IEEE result of its portable counterpart, so the bits are the same. */
#ifndef QTK_SIMD_NEON_H
#define QTK_SIMD_NEON_H

#include <arm_neon.h>

#define SIMD_NAME "neon"
#define SIMD_TABLE qtk__kernels_neon
#define SIMD_NATIVE_OPS 1
#include "simd_portable.h"

/* the portable vectors and NEON's are GCC/Clang vectors of 16 bytes: a cast reinterprets */
#define vf_neon(a) ((float32x4_t)(a))
#define vf_of_neon(a) ((vf)(a))
#define vi_neon(a) ((uint32x4_t)(a))
#define vi_of_neon(a) ((vi)(a))

static inline vf vf_fma(vf a, vf b, vf c) { return vf_of_neon(vfmaq_f32(vf_neon(c), vf_neon(a), vf_neon(b))); }
static inline vf vf_trunc(vf a) { return vf_of_neon(vrndq_f32(vf_neon(a))); }

/* ushl shifts left by the count in each lane's low byte, right by its negation; a count of
 * 32 either way gives 0 (the count is first limited to 32: larger ones would wrap in a byte) */
static inline vi vi_srlv(vi a, vi s) {
    int32x4_t n = vnegq_s32(vreinterpretq_s32_u32(vminq_u32(vi_neon(s), vdupq_n_u32(32))));
    return vi_of_neon(vshlq_u32(vi_neon(a), n));
}
static inline vi vi_sllv(vi a, vi s) {
    int32x4_t n = vreinterpretq_s32_u32(vminq_u32(vi_neon(s), vdupq_n_u32(32)));
    return vi_of_neon(vshlq_u32(vi_neon(a), n));
}

/* byte k of the 16 bytes at the index vector's lanes: lane l <- byte idx[l] (255: 0) */
static const uint8_t nib_spread[2][16] = {{0, 255, 255, 255, 0, 255, 255, 255, 1, 255, 255, 255, 1, 255, 255, 255},
                                          {2, 255, 255, 255, 2, 255, 255, 255, 3, 255, 255, 255, 3, 255, 255, 255}};
static const int32_t nib_shift[4] = {0, -4, 0, -4}, crumb_shift[4] = {0, -2, -4, -6};
/* VW nibbles from VW/2 bytes, element 2k in the low nibble of byte k */
static inline vi vi_load_codes4(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    uint8x16_t b = vqtbl1q_u8(vreinterpretq_u8_u16(vdupq_n_u16(h)), vld1q_u8(nib_spread[0]));
    return vi_of_neon(vandq_u32(vshlq_u32(vreinterpretq_u32_u8(b), vld1q_s32(nib_shift)), vdupq_n_u32(15)));
}
static inline vi vi_load_codes2(const uint8_t *p) {
    return vi_of_neon(vandq_u32(vshlq_u32(vdupq_n_u32(p[0]), vld1q_s32(crumb_shift)), vdupq_n_u32(3)));
}
/* 2 x VW nibbles for vf_lut16 only (bits above the low 4 left as they fall) */
static inline void vi_load_codes4x2_lut(const uint8_t *p, vi *c0, vi *c1) {
    uint32_t w;
    memcpy(&w, p, 4);
    uint8x16_t b = vreinterpretq_u8_u32(vdupq_n_u32(w));
    int32x4_t sh = vld1q_s32(nib_shift);
    *c0 = vi_of_neon(vshlq_u32(vreinterpretq_u32_u8(vqtbl1q_u8(b, vld1q_u8(nib_spread[0]))), sh));
    *c1 = vi_of_neon(vshlq_u32(vreinterpretq_u32_u8(vqtbl1q_u8(b, vld1q_u8(nib_spread[1]))), sh));
}

/* 16 f32 entries as 64 table bytes */
typedef struct {
    uint8x16x4_t b;
} lut16;
static inline lut16 lut16_load(const float *t) {
    lut16 l;
    l.b.val[0] = vreinterpretq_u8_f32(vld1q_f32(t));
    l.b.val[1] = vreinterpretq_u8_f32(vld1q_f32(t + 4));
    l.b.val[2] = vreinterpretq_u8_f32(vld1q_f32(t + 8));
    l.b.val[3] = vreinterpretq_u8_f32(vld1q_f32(t + 12));
    return l;
}
static inline lut16 lut16_scale(lut16 l, vf s) {
    const float32x4_t m = vdupq_n_f32(s[0]);
    for (int i = 0; i < 4; i++) l.b.val[i] = vreinterpretq_u8_f32(vmulq_f32(vreinterpretq_f32_u8(l.b.val[i]), m));
    return l;
}
static inline vf vf_lut16(lut16 l, vi idx) {
    /* byte 4l + j of the index vector: 4 (idx_l & 15) + j */
    uint32x4_t off = vshlq_n_u32(vandq_u32(vi_neon(idx), vdupq_n_u32(15)), 2);
    static const uint8_t spread[16] = {0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12};
    static const uint8_t within[16] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3};
    uint8x16_t bi = vaddq_u8(vqtbl1q_u8(vreinterpretq_u8_u32(off), vld1q_u8(spread)), vld1q_u8(within));
    return vf_of_neon(vreinterpretq_f32_u8(vqtbl4q_u8(l.b, bi)));
}

#endif
