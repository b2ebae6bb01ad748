/* mmv_portable.h — the vocabulary of mm_body.h in portable C: GCC/Clang vector extensions,
 * MV_L lanes of 32 bits (4 by default: one 128-bit register, SSE2 on any x86-64, NEON on ARM;
 * the tests also build the body at 8 and 16 lanes with it, so that the logic the AVX2 and
 * AVX-512 vocabularies run is exercised at their widths on any machine). Operations without
 * an operator are lane loops the compiler may vectorize; each one has the semantics of the
 * x86 instruction the other vocabularies map it to (pshufb, pmaddubsw with saturation,
 * vpdpbusd, psadbw, ...), so the body computes the same bits at every level.
 *
 * mmv_neon.h reuses this vocabulary with MV_NATIVE_OPS defined, and then supplies the
 * operations in the #ifndef MV_NATIVE_OPS blocks itself.
 *
 * Products and sums are separate operations here (C11 does not contract a * b + c unless
 * asked): the exact path's bound counts both roundings. */
#ifndef QTK_MMV_PORTABLE_H
#define QTK_MMV_PORTABLE_H

#include "../numfmt/scalar.h"

#include <float.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#ifndef MV_L
#  define MV_L 4
#endif
#define MV_B (4 * MV_L) /* bytes of an integer vector */
#ifndef MV_NAME
#  define MV_NAME "portable"
#endif
#ifndef MV_TABLE
#  define MV_TABLE qtk__mm_isa_portable
#endif
#define MV_HAS_DP 1   /* mvi_dp is one operation here (a lane loop) */
#define MV_TERN 0     /* the dot product is as cheap as the ternary kernel */
#define MV_JV 4       /* vectors across in the f32 microkernel */

typedef float mvf __attribute__((vector_size(4 * MV_L)));
typedef int32_t mvi __attribute__((vector_size(4 * MV_L)));
typedef uint32_t mvu_ __attribute__((vector_size(4 * MV_L)));
typedef int8_t mvb_ __attribute__((vector_size(4 * MV_L)));
typedef uint8_t mvub_ __attribute__((vector_size(4 * MV_L)));
typedef int16_t mvh_ __attribute__((vector_size(4 * MV_L)));
typedef mvi mvm8; /* byte masks: bytes of 0 or -1 */

#define MV_AI static inline __attribute__((always_inline))
/* the body's small loops stay loops here: the compiler vectorizes lane loops, and fully
 * unrolled bodies of lane loops are large for no gain */
#define MV_UNROLL
#define MV_LANES for (int l_ = 0; l_ < MV_L; l_++)
#define MV_BYTES for (int b_ = 0; b_ < MV_B; b_++)

MV_AI mvb_ mv_b(mvi v) {
    mvb_ r = {0};
    memcpy(&r, &v, sizeof r);
    return r;
}
MV_AI mvi mv_i(mvb_ v) {
    mvi r = {0};
    memcpy(&r, &v, sizeof r);
    return r;
}
MV_AI mvh_ mv_h(mvi v) {
    mvh_ r = {0};
    memcpy(&r, &v, sizeof r);
    return r;
}
MV_AI mvi mv_ih(mvh_ v) {
    mvi r = {0};
    memcpy(&r, &v, sizeof r);
    return r;
}

/* ---- f32 ---- */

MV_AI mvf mvf_zero(void) { return (mvf){0}; }
MV_AI mvf mvf_set1(float v) {
    mvf r = {0};
    MV_LANES r[l_] = v;
    return r;
}
MV_AI mvf mvf_loadu(const float *p) {
    mvf r = {0};
    memcpy(&r, p, sizeof r);
    return r;
}
/* the first n lanes (n <= MV_L) from p, the rest 0; reads only n floats */
MV_AI mvf mvf_load_n(const float *p, size_t n) {
    mvf r = mvf_zero();
    memcpy(&r, p, n * sizeof(float));
    return r;
}
MV_AI void mvf_storeu(float *p, mvf v) { memcpy(p, &v, sizeof v); }
MV_AI mvf mvf_bcast(const float *p) { return mvf_set1(*p); }
MV_AI mvf mvf_add(mvf a, mvf b) { return a + b; }
MV_AI mvf mvf_mul(mvf a, mvf b) { return a * b; }
MV_AI mvf mvf_fma(mvf a, mvf b, mvf c) { return a * b + c; }
MV_AI float mvf_hsum(mvf v) {
    /* pairwise, as the x86 vocabularies add their halves */
    float t[MV_L];
    memcpy(t, &v, sizeof t);
    for (int w = MV_L / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) t[l] = t[l] + t[l + w];
    return t[0];
}
/* the largest lane (no lane NaN) */
MV_AI float mvf_hmax(mvf v) {
    float m = v[0];
    for (int l = 1; l < MV_L; l++) m = v[l] > m ? v[l] : m;
    return m;
}
MV_AI mvf mvf_from_i(mvi v) { return __builtin_convertvector(v, mvf); }
/* the MV_L int8 at p as f32 */
MV_AI mvf mvf_from_s8x(const int8_t *p) {
    mvf r = {0};
    MV_LANES r[l_] = (float)p[l_];
    return r;
}
/* lane l of the result is v[idx[l] & (MV_L - 1)] */
MV_AI mvf mvf_perm(mvf v, mvi idx) {
    mvf r = {0};
    MV_LANES r[l_] = v[idx[l_] & (MV_L - 1)];
    return r;
}
MV_AI mvf mvf_bits(mvi v) {
    mvf r = {0};
    memcpy(&r, &v, sizeof r);
    return r;
}
MV_AI mvi mvi_bits(mvf v) {
    mvi r = {0};
    memcpy(&r, &v, sizeof r);
    return r;
}
/* lanes below n kept, the others 0 (n <= MV_L) */
MV_AI mvf mvf_first(mvf v, size_t n) {
    MV_LANES if ((size_t)l_ >= n) v[l_] = 0.0f;
    return v;
}

/* 16-entry table lookup by the low 4 bits of each lane */
#ifndef MV_NATIVE_OPS
typedef struct {
    float t[16];
} mv_lut16;
MV_AI mv_lut16 mv_lut16_load(const float *t) {
    mv_lut16 l;
    memcpy(l.t, t, sizeof l.t);
    return l;
}
MV_AI mvf mvf_lut16(const mv_lut16 *l, mvi idx) {
    mvf r = {0};
    MV_LANES r[l_] = l->t[idx[l_] & 15];
    return r;
}
#endif

/* MV_L stored scales -> f32 (the body multiplies in the global) */
MV_AI mvf mvf_from_f16x(const uint8_t *p) {
    mvf r = {0};
    MV_LANES r[l_] = qtk__f16_to_f32(qtk__ld16(p + 2 * l_));
    return r;
}
MV_AI mvi mvi_load_u8x(const uint8_t *p) {
    mvi r = {0};
    MV_LANES r[l_] = p[l_];
    return r;
}
MV_AI mvi mvi_load_u16x(const uint8_t *p) {
    mvi r = {0};
    MV_LANES r[l_] = qtk__ld16(p + 2 * l_);
    return r;
}
/* MV_L fp8 codes (natural order) -> their exact values */
MV_AI mvf mvf_from_e4m3(const uint8_t *p) {
    mvf r = {0};
    MV_LANES r[l_] = qtk__e4m3_to_f32(p[l_]);
    return r;
}
MV_AI mvf mvf_from_e5m2(const uint8_t *p) {
    mvf r = {0};
    MV_LANES r[l_] = qtk__e5m2_to_f32(p[l_]);
    return r;
}

/* ---- integers: MV_L int32 lanes, or MV_B bytes ---- */

MV_AI mvi mvi_zero(void) { return (mvi){0}; }
MV_AI mvi mvi_set1(int32_t v) {
    mvi r = {0};
    MV_LANES r[l_] = v;
    return r;
}
MV_AI mvi mvi_set1_8(int8_t v) {
    mvb_ r = {0};
    MV_BYTES r[b_] = v;
    return mv_i(r);
}
MV_AI mvi mvi_loadu(const void *p) {
    mvi r = {0};
    memcpy(&r, p, sizeof r);
    return r;
}
/* the first n bytes (n <= MV_B) from p, the rest 0; reads only n bytes */
MV_AI mvi mvi_load_n(const void *p, size_t n) {
    mvi r = mvi_zero();
    memcpy(&r, p, n);
    return r;
}
MV_AI void mvi_storeu(void *p, mvi v) { memcpy(p, &v, sizeof v); }
MV_AI mvi mvi_and(mvi a, mvi b) { return a & b; }
MV_AI mvi mvi_or(mvi a, mvi b) { return a | b; }
/* v clamped to +-FLT_MAX, NaN kept (a NaN compares false both ways) */
MV_AI mvf mvf_clamp_finite(mvf v) {
    const mvf hi = mvf_set1(FLT_MAX), lo = mvf_set1(-FLT_MAX);
    mvi up = (mvi)(v > hi), dn = (mvi)(v < lo);
    return mvf_bits((mvi_bits(v) & ~(up | dn)) | (mvi_bits(hi) & up) | (mvi_bits(lo) & dn));
}
/* a > b ? a : b lane by lane (b where either is NaN), as x86's maxps */
MV_AI mvf mvf_max(mvf a, mvf b) {
    mvi gt = (mvi)(a > b);
    return mvf_bits((mvi_bits(a) & gt) | (mvi_bits(b) & ~gt));
}
MV_AI mvi mvi_xor(mvi a, mvi b) { return a ^ b; }
MV_AI mvi mvi_add(mvi a, mvi b) { return (mvi)((mvu_)a + (mvu_)b); }
MV_AI mvi mvi_sub(mvi a, mvi b) { return (mvi)((mvu_)a - (mvu_)b); }
/* Results built lane by lane start from {0}: GCC 12 for aarch64 otherwise warns that they
 * may be used uninitialized (they are not; the zeroing folds away). */
/* bytewise a - b, wrapping */
MV_AI mvi mvi_sub8(mvi a, mvi b) {
    mvb_ x = mv_b(a), y = mv_b(b), r = {0};
    MV_BYTES r[b_] = (int8_t)(uint8_t)((uint8_t)x[b_] - (uint8_t)y[b_]);
    return mv_i(r);
}
MV_AI mvi mvi_add16(mvi a, mvi b) {
    mvh_ x = mv_h(a), y = mv_h(b), r = {0};
    for (int i = 0; i < 2 * MV_L; i++) r[i] = (int16_t)(uint16_t)((uint16_t)x[i] + (uint16_t)y[i]);
    return mv_ih(r);
}
#define mvi_slli(v, n) ((mvi)((mvu_)(v) << (n)))
#define mvi_srli(v, n) ((mvi)((mvu_)(v) >> (n)))
#define mvi_srai(v, n) ((v) >> (n)) /* GCC and Clang shift signed lanes arithmetically */

#ifndef MV_NATIVE_OPS
/* byte b of the result is t[c & 15] for c = byte b of codes (pshufb on a 16-entry table) */
MV_AI mvi mvi_lookup16(mvi t, mvi codes) {
    mvb_ tb = mv_b(t), cb = mv_b(codes), r = {0};
    MV_BYTES r[b_] = tb[cb[b_] & 15];
    return mv_i(r);
}
#endif
/* placement q: 32-bit lane l = 4h + i gets byte 16h + 4q + i of v in its top byte (place)
 * or its low byte (place_lo), the other bytes 0 */
MV_AI mvi mvi_place(mvi v, unsigned q) {
    mvub_ b;
    memcpy(&b, &v, sizeof b);
    mvi r = {0};
    MV_LANES r[l_] = (int32_t)((uint32_t)b[16 * (l_ / 4) + 4 * q + (l_ % 4)] << 24);
    return r;
}
MV_AI mvi mvi_place_lo(mvi v, unsigned q) {
    mvub_ b;
    memcpy(&b, &v, sizeof b);
    mvi r = {0};
    MV_LANES r[l_] = b[16 * (l_ / 4) + 4 * q + (l_ % 4)];
    return r;
}
/* 16 bytes repeated in every 16-byte lane */
MV_AI mvi mvi_table16(const int8_t *t) {
    mvb_ r = {0};
    MV_BYTES r[b_] = t[b_ & 15];
    return mv_i(r);
}
#ifndef MV_NATIVE_OPS
/* vpdpbusd: each int32 lane plus the 4 products of its unsigned bytes of u and signed bytes of s */
MV_AI mvi mvi_dp(mvi acc, mvi u, mvi s) {
    mvub_ ub;
    mvb_ sb = mv_b(s);
    memcpy(&ub, &u, sizeof ub);
    MV_LANES {
        int32_t d = 0;
        for (int j = 0; j < 4; j++) d += (int32_t)ub[4 * l_ + j] * (int32_t)sb[4 * l_ + j];
        acc[l_] = (int32_t)((uint32_t)acc[l_] + (uint32_t)d);
    }
    return acc;
}
#endif
/* pmaddubsw: int16 pairs of (unsigned u) x (signed s), saturated */
MV_AI mvi mvi_maddubs(mvi u, mvi s) {
    mvub_ ub;
    mvb_ sb = mv_b(s);
    memcpy(&ub, &u, sizeof ub);
    mvh_ r = {0};
    for (int i = 0; i < 2 * MV_L; i++) {
        int32_t v = (int32_t)ub[2 * i] * sb[2 * i] + (int32_t)ub[2 * i + 1] * sb[2 * i + 1];
        r[i] = (int16_t)(v > 32767 ? 32767 : v < -32768 ? -32768 : v);
    }
    return mv_ih(r);
}
/* pmaddwd by ones: int32 lanes, the sums of their two int16 */
MV_AI mvi mvi_madd1(mvi v) {
    mvh_ h = mv_h(v);
    mvi r = {0};
    MV_LANES r[l_] = (int32_t)h[2 * l_] + (int32_t)h[2 * l_ + 1];
    return r;
}
MV_AI mvi mvi_abs8(mvi v) {
    mvb_ b = mv_b(v), r = {0};
    MV_BYTES r[b_] = (int8_t)(uint8_t)(b[b_] < 0 ? -(int)b[b_] : b[b_]);
    return mv_i(r);
}
/* psignb: a negated where b < 0, zeroed where b == 0 */
MV_AI mvi mvi_sign8(mvi a, mvi b) {
    mvb_ x = mv_b(a), y = mv_b(b), r = {0};
    MV_BYTES r[b_] = y[b_] < 0 ? (int8_t)(uint8_t)(-(int)x[b_]) : y[b_] == 0 ? 0 : x[b_];
    return mv_i(r);
}
/* bytes of w with any bit of c set */
MV_AI mvm8 mvi_test8(mvi w, int8_t c) {
    mvb_ b = mv_b(w), r = {0};
    MV_BYTES r[b_] = (b[b_] & c) ? -1 : 0;
    return mv_i(r);
}
MV_AI mvi mvi_blend8(mvm8 m, mvi a, mvi b) { return (a & ~m) | (b & m); }
/* psadbw against 0: the sum of each 8 bytes in the low 32 bits of its 64-bit lane (high 0) */
MV_AI mvi mvi_sad(mvi v) {
    mvub_ b;
    memcpy(&b, &v, sizeof b);
    mvi r = mvi_zero();
    for (int q = 0; q < MV_B / 8; q++) {
        int32_t s = 0;
        for (int j = 0; j < 8; j++) s += b[8 * q + j];
        r[2 * q] = s;
    }
    return r;
}

/* pmaddwd: int32 lanes, the sums of the products of their two int16 in a and b */
MV_AI mvi mvi_madd16(mvi a, mvi b) {
    mvh_ x = mv_h(a), y = mv_h(b);
    mvi r = {0};
    MV_LANES r[l_] = (int32_t)x[2 * l_] * y[2 * l_] + (int32_t)x[2 * l_ + 1] * y[2 * l_ + 1];
    return r;
}
/* the MV_B / 8 u64 at w, in order (little-endian bytes) */
MV_AI mvi mvi_from_u64(const uint64_t *w) {
    mvi r;
    memcpy(&r, w, sizeof r);
    return r;
}
/* the sum of the int32 lanes (wrapping) */
MV_AI int32_t mvi_hsum(mvi v) {
    uint32_t s = 0;
    MV_LANES s += (uint32_t)v[l_];
    return (int32_t)s;
}
/* 16-byte lane k gets s[k] in its eight int16 */
MV_AI mvi mvi_bcast16x(const int16_t *s) {
    mvh_ r = {0};
    for (int i = 0; i < 2 * MV_L; i++) r[i] = s[i / 8];
    return mv_ih(r);
}
/* the 16 bytes at p in every 16-byte lane (reads 16 bytes) */
MV_AI mvi mvi_load16x2(const uint8_t *p) {
    mvb_ r = {0};
    MV_BYTES r[b_] = (int8_t)p[b_ & 15];
    return mv_i(r);
}
/* the first half of a's bytes, then the second half of b's */
MV_AI mvi mvi_half_blend(mvi a, mvi b) {
    mvb_ x = mv_b(a), y = mv_b(b), r = {0};
    MV_BYTES r[b_] = b_ < MV_B / 2 ? x[b_] : y[b_];
    return mv_i(r);
}
/* byte j is 0xff when bit j of m is set, else 0 (bytes from 32 on: 0) */
MV_AI mvi mvi_bitmask_bytes(uint32_t m) {
    mvb_ r = {0};
    MV_BYTES r[b_] = b_ < 32 && ((m >> (b_ & 31)) & 1u) ? -1 : 0;
    return mv_i(r);
}

/* out[n] = lo[n] | (nibble n of nib, low 3 bits) << 8 for n < 32 (nibble 2 j the low one of byte j) */
MV_AI void mv_idx_nib3(const uint8_t *lo, const uint8_t *nib, uint16_t *out) {
    for (unsigned n = 0; n < 32; n++) out[n] = (uint16_t)(lo[n] | ((nib[n / 2] >> (4 * (n % 2))) & 7u) << 8);
}

/* Vector i's sub-scales from s (mvi_from_u64x2's 16 bytes: one per 16 elements, the first 16 of
 * 32-group k at byte k, the second at byte 8 + k), as bytes: each byte that of its 16 elements */
MV_AI mvi mvi_pick_sc8(mvi s, unsigned i) {
    mvub_ b, r;
    memcpy(&b, &s, sizeof b);
    MV_BYTES {
        const unsigned g = i * (MV_B / 16) + (unsigned)b_ / 16;
        r[b_] = b[8 * (g % 2) + g / 2];
    }
    mvi v;
    memcpy(&v, &r, sizeof v);
    return v;
}

/* the vector of MV_B / 4 u32 w[0..] */
MV_AI mvi mvi_from_u32(const uint32_t *w) {
    mvi v;
    memcpy(&v, w, sizeof v);
    return v;
}

/* out[n] = the low 9 bits of the n-th u16 at p, n < 32 */
MV_AI void mv_idx_m9(const uint8_t *p, uint16_t *out) {
    for (unsigned n = 0; n < 32; n++) out[n] = (uint16_t)(qtk__ld16(p + 2 * n) & 511u);
}

/* out[n] = lo[n] | (2-bit field n % 4 of byte n / 4 of w) << 8 for n < 32 */
MV_AI void mv_idx_f2x4(const uint8_t *lo, const uint8_t *w, uint16_t *out) {
    for (unsigned n = 0; n < 32; n++) out[n] = (uint16_t)(lo[n] | ((w[n / 4] >> (2 * (n % 4))) & 3u) << 8);
}

/* out[n] = lo[n] | (bit n % 8 of byte n / 8 of w) << 8 for n < 64 */
MV_AI void mv_idx_b1x8(const uint8_t *lo, const uint8_t *w, uint16_t *out) {
    for (unsigned n = 0; n < 64; n++) out[n] = (uint16_t)(lo[n] | ((w[n / 8] >> (n % 8)) & 1u) << 8);
}

/* Σ_j δ_j s_j X_j over a block's 32 groups of 8 (IQ1_M's delta terms), in lane 0: δ_j = -1 where bit
 * 3 of nibble j of the 16 bytes qh is set, else +1; s_j its 16's sub-scale, byte j / 4 + 8 (j / 2 mod 2)
 * of sc (lat_scales's layout); X the groups' activation sums */
MV_AI mvi mvi_q1m_delta(const uint8_t *qh, mvi sc, const int16_t *X) {
    mvub_ b;
    memcpy(&b, &sc, sizeof b);
    int32_t r[MV_B / 4] = {0};
    for (unsigned j = 0; j < 32; j++) {
        const int32_t s = b[j / 4 + 8 * (j / 2 % 2)];
        r[0] += ((qh[j / 2] >> (4 * (j % 2) + 3)) & 1u ? -s : s) * X[j];
    }
    mvi v;
    memcpy(&v, r, sizeof v);
    return v;
}

/* out[n] = lo[n] | (3-bit field n % 4 of u16 n / 4 of w) << 8 for n < 32 */
MV_AI void mv_idx_f3x4(const uint8_t *lo, const uint8_t *w, uint16_t *out) {
    for (unsigned n = 0; n < 32; n++) out[n] = (uint16_t)(lo[n] | ((qtk__ld16(w + 2 * (n / 4)) >> (3 * (n % 4))) & 7u) << 8);
}

/* the 16 bytes lo, hi (little-endian) in every 16-byte lane */
MV_AI mvi mvi_from_u64x2(uint64_t lo, uint64_t hi) {
    mvub_ r = {0};
    MV_BYTES r[b_] = (uint8_t)((b_ & 8 ? hi : lo) >> (8 * (b_ & 7)));
    mvi v;
    memcpy(&v, &r, sizeof v);
    return v;
}
/* Vector i's sub-scales from s (mvi_from_u64x2's 16 bytes: one per 16 elements, the first 16 of
 * 32-group k at byte k, the second at byte 8 + k), as int16: each word that of its 16 elements */
MV_AI mvi mvi_pick_sc16(mvi s, unsigned i) {
    mvub_ b;
    memcpy(&b, &s, sizeof b);
    mvh_ r = {0};
    for (unsigned w = 0; w < 2 * MV_L; w++) {
        const unsigned g = i * (MV_B / 16) + w / 8; /* its 16 within the block */
        r[w] = b[8 * (g % 2) + g / 2];
    }
    return mv_ih(r);
}

/* A block's 32 sign bytes of 7 stored bits (bits 9-15 of the u16 codes at p) and their parity as
 * bit 7 (ggml's ksigns_iq2xs), group g's at byte g */
typedef struct {
    uint8_t b[32];
} mvsg;
MV_AI mvsg mvsg_signs7(const uint8_t *p) {
    mvsg r;
    for (unsigned g = 0; g < 32; g++) {
        const unsigned s = (unsigned)(p[2 * g + 1] >> 1);
        r.b[g] = (uint8_t)(s | (unsigned)__builtin_parity(s) << 7);
    }
    return r;
}
/* The same from the 8 u32 words at p (IQ3_XXS), word k holding groups 4 k .. 4 k + 3 as 7-bit
 * fields from bit 0 */
MV_AI mvsg mvsg_signs7w(const uint8_t *p) {
    mvsg r;
    for (unsigned g = 0; g < 32; g++) {
        const unsigned s = (unsigned)(qtk__ld32(p + 4 * (g / 4)) >> (7 * (g % 4))) & 127u;
        r.b[g] = (uint8_t)(s | (unsigned)__builtin_parity(s) << 7);
    }
    return r;
}
/* vector i's sign mask from s: byte j -1 where bit j % 8 of group g's byte is set, else 0 (g = i MV_B / 8 + j / 8) */
MV_AI mvi mvsg_mask(mvsg s, unsigned i) {
    mvb_ r = {0};
    MV_BYTES r[b_] = (s.b[(i * MV_B + b_) / 8 % 32] >> (b_ % 8)) & 1u ? -1 : 0;
    return mv_i(r);
}

/* 8 bytes as int16 (unsigned or signed), the 8 repeated in every 16-byte lane */
MV_AI mvi mvi_set16x8u(const uint8_t *p) {
    mvh_ r = {0};
    for (int i = 0; i < 2 * MV_L; i++) r[i] = p[i % 8];
    return mv_ih(r);
}
MV_AI mvi mvi_set16x8s(const int8_t *p) {
    mvh_ r = {0};
    for (int i = 0; i < 2 * MV_L; i++) r[i] = p[i % 8];
    return mv_ih(r);
}
/* 16-byte lane 0 gets int16 element i0 of its lane of set in all 8 slots, lane 1 element i1
 * (lanes from 2 on: i1) */
MV_AI mvi mvi_pick16(mvi set, unsigned i0, unsigned i1) {
    mvh_ h = mv_h(set), r = {0};
    for (int i = 0; i < 2 * MV_L; i++) r[i] = h[8 * (i / 8) + (i < 8 ? i0 : i1)];
    return mv_ih(r);
}
/* the 8 bytes of v (first in the low bits) as int16, repeated in every 16-byte lane */
MV_AI mvi mvi_set16x8_u64(uint64_t v) {
    mvh_ r = {0};
    for (int i = 0; i < 2 * MV_L; i++) r[i] = (int16_t)((v >> (8 * (i % 8))) & 0xffu);
    return mv_ih(r);
}
/* the 16 bytes at p, each shifted right by shift and masked to its low 4 bits: elements 0-7 as an
 * int16 set (repeated per 16-byte lane) in *s0, 8-15 in *s1 */
MV_AI void mvi_sets16_nib(const uint8_t *p, unsigned shift, mvi *s0, mvi *s1) {
    mvh_ a = {0}, b = {0};
    for (int i = 0; i < 2 * MV_L; i++) a[i] = (int16_t)((p[i % 8] >> shift) & 15), b[i] = (int16_t)((p[8 + i % 8] >> shift) & 15);
    *s0 = mv_ih(a), *s1 = mv_ih(b);
}
/* int32 lanes that sum to the dot product of the 16 nibbles (p[i] >> shift) & 15 with x[0..15] */
MV_AI mvi mvi_dot_nib16(const uint8_t *p, unsigned shift, const int16_t *x) {
    mvi r = {0};
    for (int i = 0; i < 16; i++) r[i % MV_L] += ((p[i] >> shift) & 15) * (int32_t)x[i];
    return r;
}
MV_AI mvi mvi_set1_16(int16_t v) {
    mvh_ r = {0};
    for (int i = 0; i < 2 * MV_L; i++) r[i] = v;
    return mv_ih(r);
}
/* out[i] = the sum of the int32 lanes of a[i], i < 8 */
MV_AI void mvi_hsum8(const mvi *a, int32_t *out) {
    for (int i = 0; i < 8; i++) out[i] = mvi_hsum(a[i]);
}
/* 16 bytes at p, the rest 0 */
MV_AI mvi mvi_load16z(const void *p) { return mvi_load_n(p, 16); }
/* the two f16 of w (d low, m high) times sx, each broadcast: *a = d sx, *b = m sx (one rounding each) */
MV_AI void mvf_pair_f16(uint32_t w, float sx, mvf *a, mvf *b) {
    float d = qtk__f16_to_f32((uint16_t)w), m = qtk__f16_to_f32((uint16_t)(w >> 16));
    float x = d * sx, y = m * sx;
    *a = mvf_set1(x), *b = mvf_set1(y);
}
/* the first n int32 lanes from p, the rest 0 (not read) */
MV_AI mvi mvi_load32_n(const int32_t *p, size_t n) {
    mvi r = {0};
    MV_LANES r[l_] = (size_t)l_ < n ? p[l_] : 0;
    return r;
}
/* lanes i < n: the u32 at base + i stride, the others 0 (not read) */
MV_AI mvi mvi_gather32s(const uint8_t *base, int stride, size_t n) {
    mvi r = {0};
    MV_LANES r[l_] = (size_t)l_ < n ? (int32_t)qtk__ld32(base + (ptrdiff_t)l_ * stride) : 0;
    return r;
}
/* the same (AVX2's loads where the gather would cost more) */
MV_AI mvi mvi_gather32s_st(const uint8_t *base, int stride, size_t n) { return mvi_gather32s(base, stride, n); }
/* the f16 in the low (hi: high) 16 bits of each 32-bit lane, as f32 */
MV_AI mvf mvf_f16_lo(mvi w) {
    mvf r = {0};
    MV_LANES r[l_] = qtk__f16_to_f32((uint16_t)w[l_]);
    return r;
}
MV_AI mvf mvf_f16_hi(mvi w) {
    mvf r = {0};
    MV_LANES r[l_] = qtk__f16_to_f32((uint16_t)((uint32_t)w[l_] >> 16));
    return r;
}
/* an f16 decoded */
MV_AI float mv_f16(uint16_t h) { return qtk__f16_to_f32(h); }

#define mv_prefetch(p) __builtin_prefetch((const void *)(p), 0, 3)

#endif
