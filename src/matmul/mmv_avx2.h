/* mmv_avx2.h — the vocabulary of mm_body.h at 8 lanes (AVX2 + FMA + F16C). An integer
 * vector is 32 bytes; pshufb (table lookups, placements) works within each 16-byte half. The integer
 * path's dot product is pmaddubsw + pmaddwd (MV_HAS_DP 0), or AVX-VNNI's vpdpbusd in the
 * functions the body builds with MV_DP_TARGET. */
#ifndef QTK_MMV_AVX2_H
#define QTK_MMV_AVX2_H

#include <immintrin.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define MV_L 8
#define MV_B 32
#define MV_NAME "avx2"
#define MV_TABLE qtk__mm_isa_avx2
#define MV_HAS_DP 0
#define MV_TERN 0
#define MV_JV 2
/* precision fast: the integer path up to M = 16 for 8-bit weights, 32 for 4-bit, any M for
 * 2-bit (measured on Zen 3, 4096x4096, integer time / exact tiled time: 8-bit 0.86 at M = 16,
 * 1.09 at 32; 4-bit 0.53 at 16, 0.82 at 32, 1.03 at 64; 2-bit 0.33 at 16, 0.5-0.7 at 64,
 * 0.87 at 256) */
#define MV_INT_MAX_M {16, 32, SIZE_MAX}
/* the VNNI twin of the integer kernel: AVX-VNNI (checked at run time) */
#define MV_DP_TARGET __attribute__((target("avxvnni")))
#define MV_DP_INSN "vpdpbusd (AVX-VNNI)"
#define MV_MAD_INSN "vpmaddubsw + vpmaddwd"
#define MV_TERN_INSN "vpsadbw"
#define MV_GB_INSN "vpmaddubsw + vpmaddwd"
#define MV_DP_FEATURE QTK_CPU_AVXVNNI

typedef __m256 mvf;
typedef __m256i mvi;
typedef __m256i mvm8;

#define MV_AI static inline __attribute__((always_inline))

/* ---- f32 ---- */

MV_AI mvf mvf_zero(void) { return _mm256_setzero_ps(); }
MV_AI mvf mvf_set1(float v) { return _mm256_set1_ps(v); }
MV_AI mvf mvf_loadu(const float *p) { return _mm256_loadu_ps(p); }
MV_AI __m256i mv_first_mask(size_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n > 8 ? 8 : n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
MV_AI mvf mvf_load_n(const float *p, size_t n) { return _mm256_maskload_ps(p, mv_first_mask(n)); }
MV_AI void mvf_storeu(float *p, mvf v) { _mm256_storeu_ps(p, v); }
MV_AI mvf mvf_bcast(const float *p) { return _mm256_broadcast_ss(p); }
MV_AI mvf mvf_add(mvf a, mvf b) { return _mm256_add_ps(a, b); }
MV_AI mvf mvf_mul(mvf a, mvf b) { return _mm256_mul_ps(a, b); }
/* v clamped to +-FLT_MAX, NaN kept (min/max return their second operand on NaN) */
MV_AI mvf mvf_clamp_finite(mvf v) { return _mm256_max_ps(_mm256_set1_ps(-FLT_MAX), _mm256_min_ps(_mm256_set1_ps(FLT_MAX), v)); }
/* a > b ? a : b lane by lane (b where either is NaN) */
MV_AI mvf mvf_max(mvf a, mvf b) { return _mm256_max_ps(a, b); }
MV_AI mvf mvf_fma(mvf a, mvf b, mvf c) { return _mm256_fmadd_ps(a, b, c); }
MV_AI float mvf_hsum(mvf v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
/* the largest lane (no lane NaN) */
MV_AI float mvf_hmax(mvf v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
MV_AI mvf mvf_from_i(mvi v) { return _mm256_cvtepi32_ps(v); }
/* the 8 int8 at p as f32 */
MV_AI mvf mvf_from_s8x(const int8_t *p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p)));
}
MV_AI mvf mvf_perm(mvf v, mvi idx) { return _mm256_permutevar8x32_ps(v, idx); }
MV_AI mvf mvf_bits(mvi v) { return _mm256_castsi256_ps(v); }
MV_AI mvi mvi_bits(mvf v) { return _mm256_castps_si256(v); }
MV_AI mvf mvf_first(mvf v, size_t n) { return _mm256_and_ps(v, _mm256_castsi256_ps(mv_first_mask(n))); }

typedef struct {
    __m256 lo, hi;
} mv_lut16;
MV_AI mv_lut16 mv_lut16_load(const float *t) { return (mv_lut16){_mm256_loadu_ps(t), _mm256_loadu_ps(t + 8)}; }
MV_AI mvf mvf_lut16(const mv_lut16 *l, mvi idx) {
    __m256 a = _mm256_permutevar8x32_ps(l->lo, idx), b = _mm256_permutevar8x32_ps(l->hi, idx);
    return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28))); /* bit 3 to the sign */
}

MV_AI mvf mvf_from_f16x(const uint8_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p)); }
MV_AI mvi mvi_load_u8x(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p)); }
MV_AI mvi mvi_load_u16x(const uint8_t *p) { return _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)); }
/* e4m3 moved into the bits of an f16 is its value / 256 (subnormals included); S.1111.111 is NaN */
MV_AI mvf mvf_from_e4m3(const uint8_t *p) {
    __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)p);
    __m128i h = _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(b), 7), _mm_set1_epi16((short)0xBF80));
    __m256 v = _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
    __m128i nan8 = _mm_cmpeq_epi8(_mm_or_si128(b, _mm_set1_epi8((char)0x80)), _mm_set1_epi8((char)0xff));
    return _mm256_blendv_ps(v, _mm256_set1_ps(NAN), _mm256_castsi256_ps(_mm256_cvtepi8_epi32(nan8)));
}
/* e5m2 is the top byte of an f16 */
MV_AI mvf mvf_from_e5m2(const uint8_t *p) {
    __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)p);
    return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(b), 8));
}

/* ---- integers ---- */

MV_AI mvi mvi_zero(void) { return _mm256_setzero_si256(); }
MV_AI mvi mvi_set1(int32_t v) { return _mm256_set1_epi32(v); }
MV_AI mvi mvi_set1_8(int8_t v) { return _mm256_set1_epi8(v); }
MV_AI mvi mvi_loadu(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
MV_AI mvi mvi_load_n(const void *p, size_t n) {
    if (n >= 32) return mvi_loadu(p);
    uint8_t buf[32] = {0};
    memcpy(buf, p, n);
    return mvi_loadu(buf);
}
MV_AI void mvi_storeu(void *p, mvi v) { _mm256_storeu_si256((__m256i *)p, v); }
MV_AI mvi mvi_and(mvi a, mvi b) { return _mm256_and_si256(a, b); }
MV_AI mvi mvi_or(mvi a, mvi b) { return _mm256_or_si256(a, b); }
MV_AI mvi mvi_xor(mvi a, mvi b) { return _mm256_xor_si256(a, b); }
MV_AI mvi mvi_add(mvi a, mvi b) { return _mm256_add_epi32(a, b); }
MV_AI mvi mvi_sub(mvi a, mvi b) { return _mm256_sub_epi32(a, b); }
MV_AI mvi mvi_add16(mvi a, mvi b) { return _mm256_add_epi16(a, b); }
MV_AI mvi mvi_sub8(mvi a, mvi b) { return _mm256_sub_epi8(a, b); }
#define mvi_slli(v, n) _mm256_slli_epi32((v), (n))
#define mvi_srli(v, n) _mm256_srli_epi32((v), (n))
#define mvi_srai(v, n) _mm256_srai_epi32((v), (n))
/* byte b of the result is t[c & 15] for c = byte b of codes (codes are 0..15) */
MV_AI mvi mvi_lookup16(mvi t, mvi codes) { return _mm256_shuffle_epi8(t, codes); }
/* placement q: 32-bit lane l = 4h + i gets byte 16h + 4q + i of v in its top byte (place)
 * or its low byte (place_lo), the other bytes 0 (q a constant) */
#define MV_PLACE_MASK(q)                                                                                               \
    _mm256_setr_epi8(-1, -1, -1, (char)(4 * (q)), -1, -1, -1, (char)(4 * (q) + 1), -1, -1, -1, (char)(4 * (q) + 2), -1, \
                     -1, -1, (char)(4 * (q) + 3), -1, -1, -1, (char)(4 * (q)), -1, -1, -1, (char)(4 * (q) + 1), -1, -1, \
                     -1, (char)(4 * (q) + 2), -1, -1, -1, (char)(4 * (q) + 3))
#define MV_PLACE_LO_MASK(q)                                                                                            \
    _mm256_setr_epi8((char)(4 * (q)), -1, -1, -1, (char)(4 * (q) + 1), -1, -1, -1, (char)(4 * (q) + 2), -1, -1, -1,     \
                     (char)(4 * (q) + 3), -1, -1, -1, (char)(4 * (q)), -1, -1, -1, (char)(4 * (q) + 1), -1, -1, -1,      \
                     (char)(4 * (q) + 2), -1, -1, -1, (char)(4 * (q) + 3), -1, -1, -1)
MV_AI mvi mvi_place(mvi v, unsigned q) { return _mm256_shuffle_epi8(v, MV_PLACE_MASK(q)); }
MV_AI mvi mvi_place_lo(mvi v, unsigned q) { return _mm256_shuffle_epi8(v, MV_PLACE_LO_MASK(q)); }
MV_AI mvi mvi_table16(const int8_t *t) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)t));
}
MV_AI mvi mvi_maddubs(mvi u, mvi s) { return _mm256_maddubs_epi16(u, s); }
MV_AI mvi mvi_madd1(mvi v) { return _mm256_madd_epi16(v, _mm256_set1_epi16(1)); }
MV_AI mvi mvi_abs8(mvi v) { return _mm256_abs_epi8(v); }
MV_AI mvi mvi_sign8(mvi a, mvi b) { return _mm256_sign_epi8(a, b); }
#define mvi_dp(acc, u, s) _mm256_dpbusd_avx_epi32((acc), (u), (s)) /* only in MV_DP_TARGET functions */
MV_AI mvm8 mvi_test8(mvi w, int8_t c) {
    const __m256i m = _mm256_set1_epi8(c);
    return _mm256_cmpeq_epi8(_mm256_and_si256(w, m), m); /* c is one bit */
}
MV_AI mvi mvi_blend8(mvm8 m, mvi a, mvi b) { return _mm256_blendv_epi8(a, b, m); }
MV_AI mvi mvi_sad(mvi v) { return _mm256_sad_epu8(v, _mm256_setzero_si256()); }

MV_AI mvi mvi_madd16(mvi a, mvi b) { return _mm256_madd_epi16(a, b); }
/* the 4 u64 at w, in order */
MV_AI mvi mvi_from_u64(const uint64_t *w) { return _mm256_set_epi64x((long long)w[3], (long long)w[2], (long long)w[1], (long long)w[0]); }
MV_AI mvi mvi_from_u32(const uint32_t *w) {
    return _mm256_setr_epi32((int)w[0], (int)w[1], (int)w[2], (int)w[3], (int)w[4], (int)w[5], (int)w[6], (int)w[7]);
}
MV_AI int32_t mvi_hsum(mvi v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}
/* 16-byte lane k gets s[k] in its eight int16 */
MV_AI mvi mvi_bcast16x(const int16_t *s) { return _mm256_set_m128i(_mm_set1_epi16(s[1]), _mm_set1_epi16(s[0])); }
/* the 16 bytes at p in both halves (reads 16 bytes) */
MV_AI mvi mvi_load16x2(const uint8_t *p) { return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)p)); }
/* the low half of a, the high half of b */
MV_AI mvi mvi_half_blend(mvi a, mvi b) { return _mm256_permute2x128_si256(a, b, 0x30); }
/* byte j is 0xff when bit j of m is set, else 0, for v whose every 32-bit lane holds m: byte j / 8
 * of m into byte j, tested against bit j % 8 (mvi_bitmask_bytes, mvsg_mask) */
MV_AI mvi mv_bitmask_bytes_v(__m256i v) {
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3,
                                          3, 3, 3, 3);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    v = _mm256_shuffle_epi8(v, shuf);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bits), bits);
}
/* the same of m */
MV_AI mvi mvi_bitmask_bytes(uint32_t m) { return mv_bitmask_bytes_v(_mm256_set1_epi32((int)m)); }

/* out[n] = lo[n] | (nibble n of nib, low 3 bits) << 8 for n < 32 (nibble 2 j the low one of byte j) */
MV_AI void mv_idx_nib3(const uint8_t *lo, const uint8_t *nib, uint16_t *out) {
    const __m128i m7 = _mm_set1_epi8(7), h = _mm_loadu_si128((const __m128i *)(const void *)nib);
    const __m128i a = _mm_and_si128(h, m7), c = _mm_and_si128(_mm_srli_epi16(h, 4), m7);
    const __m128i n0 = _mm_unpacklo_epi8(a, c), n1 = _mm_unpackhi_epi8(a, c);
    const __m128i l0 = _mm_loadu_si128((const __m128i *)(const void *)lo), l1 = _mm_loadu_si128((const __m128i *)(const void *)(lo + 16));
    _mm_storeu_si128((__m128i *)(void *)out, _mm_unpacklo_epi8(l0, n0));
    _mm_storeu_si128((__m128i *)(void *)(out + 8), _mm_unpackhi_epi8(l0, n0));
    _mm_storeu_si128((__m128i *)(void *)(out + 16), _mm_unpacklo_epi8(l1, n1));
    _mm_storeu_si128((__m128i *)(void *)(out + 24), _mm_unpackhi_epi8(l1, n1));
}

/* out[n] = lo[n] | fields[n] for n < 16 (the mv_idx_* ops' last step: the low bytes widened) */
MV_AI void mv_idx_or16(const uint8_t *lo, __m256i fields, uint16_t *out) {
    const __m256i q = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)lo));
    _mm256_storeu_si256((__m256i *)(void *)out, _mm256_or_si256(fields, q));
}

/* out[n] = lo[n] | (3-bit field n % 4 of u16 n / 4 of w) << 8 for n < 32: each u16 put in its 4
 * lanes by a byte shuffle, its fields brought to bits 8..10 by a multiply (x 2^8, 2^5, 2^2: low
 * half; x 2^15: high half, a shift right by 1) */
MV_AI void mv_idx_f3x4(const uint8_t *lo, const uint8_t *w, uint16_t *out) {
    const __m256i W = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)w));
    const __m256i ml = _mm256_setr_epi16(256, 32, 4, 0, 256, 32, 4, 0, 256, 32, 4, 0, 256, 32, 4, 0);
    const __m256i mh = _mm256_setr_epi16(0, 0, 0, -32768, 0, 0, 0, -32768, 0, 0, 0, -32768, 0, 0, 0, -32768);
    const __m256i m = _mm256_set1_epi16(0x700);
    for (unsigned h = 0; h < 2; h++) {
        const char a = (char)(8 * h), b = (char)(8 * h + 1), c = (char)(8 * h + 2), d = (char)(8 * h + 3);
        const char e = (char)(8 * h + 4), f = (char)(8 * h + 5), g = (char)(8 * h + 6), i = (char)(8 * h + 7);
        const __m256i r = _mm256_shuffle_epi8(W, _mm256_setr_epi8(a, b, a, b, a, b, a, b, c, d, c, d, c, d, c, d, e, f, e, f, e,
                                                                   f, e, f, g, i, g, i, g, i, g, i));
        const __m256i fl = _mm256_and_si256(_mm256_or_si256(_mm256_mullo_epi16(r, ml), _mm256_mulhi_epu16(r, mh)), m);
        mv_idx_or16(lo + 16 * h, fl, out + 16 * h);
    }
}

/* out[n] = the low 9 bits of the n-th u16 at p, n < 32 (two loads, a mask, two stores) */
MV_AI void mv_idx_m9(const uint8_t *p, uint16_t *out) {
    const __m256i m = _mm256_set1_epi16(511);
    for (unsigned h = 0; h < 2; h++)
        _mm256_storeu_si256((__m256i *)(void *)(out + 16 * h),
                            _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(p + 32 * h)), m));
}

/* out[n] = lo[n] | (2-bit field n % 4 of byte n / 4 of w) << 8 for n < 32: each byte put in its 4
 * lanes by a byte shuffle, its fields brought to bits 8..9 by a multiply (x 2^8, 2^6, 2^4, 2^2) */
MV_AI void mv_idx_f2x4(const uint8_t *lo, const uint8_t *w, uint16_t *out) {
    const __m256i W = _mm256_broadcastsi128_si256(_mm_loadl_epi64((const __m128i *)(const void *)w));
    const __m256i ml = _mm256_setr_epi16(256, 64, 16, 4, 256, 64, 16, 4, 256, 64, 16, 4, 256, 64, 16, 4);
    const __m256i m = _mm256_set1_epi16(0x300);
    for (unsigned h = 0; h < 2; h++) {
        const char a = (char)(4 * h), b = (char)(4 * h + 1), c = (char)(4 * h + 2), d = (char)(4 * h + 3), z = (char)0x80;
        const __m256i r = _mm256_shuffle_epi8(W, _mm256_setr_epi8(a, z, a, z, a, z, a, z, b, z, b, z, b, z, b, z, c, z, c, z, c,
                                                                   z, c, z, d, z, d, z, d, z, d, z));
        const __m256i fl = _mm256_and_si256(_mm256_mullo_epi16(r, ml), m);
        mv_idx_or16(lo + 16 * h, fl, out + 16 * h);
    }
}

/* out[n] = lo[n] | (bit n % 8 of byte n / 8 of w) << 8 for n < 64: each byte put in its 8 lanes by
 * a byte shuffle, its bits brought to bit 8 by a multiply (x 2^8 .. 2^1) */
MV_AI void mv_idx_b1x8(const uint8_t *lo, const uint8_t *w, uint16_t *out) {
    const __m256i W = _mm256_broadcastsi128_si256(_mm_loadl_epi64((const __m128i *)(const void *)w));
    const __m256i ml = _mm256_setr_epi16(256, 128, 64, 32, 16, 8, 4, 2, 256, 128, 64, 32, 16, 8, 4, 2);
    const __m256i m = _mm256_set1_epi16(0x100);
    for (unsigned h = 0; h < 4; h++) {
        const char a = (char)(2 * h), b = (char)(2 * h + 1), z = (char)0x80;
        const __m256i r = _mm256_shuffle_epi8(W, _mm256_setr_epi8(a, z, a, z, a, z, a, z, a, z, a, z, a, z, a, z, b, z, b, z, b,
                                                                   z, b, z, b, z, b, z, b, z, b, z));
        const __m256i fl = _mm256_and_si256(_mm256_mullo_epi16(r, ml), m);
        mv_idx_or16(lo + 16 * h, fl, out + 16 * h);
    }
}

/* Σ_j δ_j s_j X_j over a block's 32 groups of 8 (IQ1_M's delta terms), as int32 lanes to be summed:
 * δ_j = -1 where bit 3 of nibble j of the 16 bytes qh is set, else +1; s_j its 16's sub-scale, byte
 * j / 4 + 8 (j / 2 mod 2) of sc (lat_scales's layout); X the groups' activation sums. 16 groups a
 * vector: the sub-scales and qh's bytes put in words by byte shuffles, the bits tested, the
 * sub-scales negated where set, one pmaddwd. */
MV_AI mvi mvi_q1m_delta(const uint8_t *qh, mvi sc, const int16_t *X) {
    static const uint8_t ps[2][32] __attribute__((aligned(32))) = {
        {0, 128, 0, 128, 8, 128, 8, 128, 1, 128, 1, 128, 9, 128, 9, 128,
         2, 128, 2, 128, 10, 128, 10, 128, 3, 128, 3, 128, 11, 128, 11, 128},
        {4, 128, 4, 128, 12, 128, 12, 128, 5, 128, 5, 128, 13, 128, 13, 128,
         6, 128, 6, 128, 14, 128, 14, 128, 7, 128, 7, 128, 15, 128, 15, 128},
    };
    static const uint8_t pq[2][32] __attribute__((aligned(32))) = {
        {0, 128, 0, 128, 1, 128, 1, 128, 2, 128, 2, 128, 3, 128, 3, 128,
         4, 128, 4, 128, 5, 128, 5, 128, 6, 128, 6, 128, 7, 128, 7, 128},
        {8, 128, 8, 128, 9, 128, 9, 128, 10, 128, 10, 128, 11, 128, 11, 128,
         12, 128, 12, 128, 13, 128, 13, 128, 14, 128, 14, 128, 15, 128, 15, 128},
    };
    /* the bit of each group's nibble */
    static const uint16_t tb[16] __attribute__((aligned(32))) = {8, 128, 8, 128, 8, 128, 8, 128, 8, 128, 8, 128, 8, 128, 8, 128};
    const __m256i Q = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)qh));
    const __m256i t = _mm256_load_si256((const __m256i *)(const void *)tb);
    __m256i acc = _mm256_setzero_si256();
    for (unsigned h = 0; h < 2; h++) {
        const __m256i s = _mm256_shuffle_epi8(sc, _mm256_load_si256((const __m256i *)(const void *)ps[h]));
        const __m256i q = _mm256_shuffle_epi8(Q, _mm256_load_si256((const __m256i *)(const void *)pq[h]));
        const __m256i m = _mm256_cmpeq_epi16(_mm256_and_si256(q, t), t);
        const __m256i sd = _mm256_sub_epi16(_mm256_xor_si256(s, m), m);
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(sd, _mm256_loadu_si256((const __m256i *)(const void *)(X + 16 * h))));
    }
    return acc;
}

/* the 16 bytes lo, hi (little-endian) in both 16-byte lanes */
MV_AI mvi mvi_from_u64x2(uint64_t lo, uint64_t hi) {
    return _mm256_broadcastsi128_si256(_mm_set_epi64x((long long)hi, (long long)lo));
}
/* Vector i's sub-scales from s, 16 bytes (mvi_from_u64x2) holding one per 16 elements, the
 * first 16 of 32-group k at byte k, the second at byte 8 + k: as int16, byte i in the low lane's
 * eight words and byte 8 + i in the high lane's (i < 8; one vpshufb, its pattern from a table) */
MV_AI mvi mvi_pick_sc16(mvi s, unsigned i) {
#define MV_W8_(x) x, 0x80, x, 0x80, x, 0x80, x, 0x80, x, 0x80, x, 0x80, x, 0x80, x, 0x80
#define MV_SCP_(i) {MV_W8_(i), MV_W8_(8 + i)}
    static const uint8_t pat[8][32] __attribute__((aligned(32))) = {MV_SCP_(0), MV_SCP_(1), MV_SCP_(2), MV_SCP_(3),
                                                                    MV_SCP_(4), MV_SCP_(5), MV_SCP_(6), MV_SCP_(7)};
#undef MV_SCP_
#undef MV_W8_
    return _mm256_shuffle_epi8(s, _mm256_load_si256((const __m256i *)(const void *)pat[i]));
}

/* mvi_pick_sc16's sub-scales as bytes: byte i in the low lane's 16 bytes and byte 8 + i in the
 * high lane's */
MV_AI mvi mvi_pick_sc8(mvi s, unsigned i) {
#define MV_B16_(x) x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x
#define MV_SCP_(i) {MV_B16_(i), MV_B16_(8 + i)}
    static const uint8_t pat[8][32] __attribute__((aligned(32))) = {MV_SCP_(0), MV_SCP_(1), MV_SCP_(2), MV_SCP_(3),
                                                                    MV_SCP_(4), MV_SCP_(5), MV_SCP_(6), MV_SCP_(7)};
#undef MV_SCP_
#undef MV_B16_
    return _mm256_shuffle_epi8(s, _mm256_load_si256((const __m256i *)(const void *)pat[i]));
}

/* per byte: 0x80 where the low nibble of nib has odd parity, else 0 (bytes whose bit 7 is set give 0) */
MV_AI __m256i mv_parity_bit7(__m256i nib) {
    const __m256i par = _mm256_setr_epi8(0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0, 0, -128,
                                         -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0);
    return _mm256_shuffle_epi8(par, nib);
}

/* A block's 32 sign bytes of 7 stored bits (bits 9-15 of the u16 codes at p) and their parity as
 * bit 7 (ggml's ksigns_iq2xs), group g's at byte g: the parity of the nibble s ^ s >> 4 by one
 * byte shuffle, 16 codes at a time */
typedef __m256i mvsg;
MV_AI mvsg mvsg_signs7(const uint8_t *p) {
    const __m256i c0 = _mm256_loadu_si256((const __m256i *)(const void *)p);
    const __m256i c1 = _mm256_loadu_si256((const __m256i *)(const void *)(p + 32));
    __m256i s0 = _mm256_srli_epi16(c0, 9), s1 = _mm256_srli_epi16(c1, 9);
    s0 = _mm256_or_si256(s0, mv_parity_bit7(_mm256_xor_si256(s0, _mm256_srli_epi16(c0, 13))));
    s1 = _mm256_or_si256(s1, mv_parity_bit7(_mm256_xor_si256(s1, _mm256_srli_epi16(c1, 13))));
    return _mm256_permute4x64_epi64(_mm256_packus_epi16(s0, s1), 0xd8);
}
/* The same from the 8 u32 words at p (IQ3_XXS), word k holding groups 4 k .. 4 k + 3 as 7-bit
 * fields from bit 0 (its top nibble not read): each field moved into its byte by a shift and a
 * mask, the parity as above */
MV_AI mvsg mvsg_signs7w(const uint8_t *p) {
    const __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)p);
    __m256i s = _mm256_and_si256(a, _mm256_set1_epi32(0x7f));
    s = _mm256_or_si256(s, _mm256_and_si256(_mm256_slli_epi32(a, 1), _mm256_set1_epi32(0x7f00)));
    s = _mm256_or_si256(s, _mm256_and_si256(_mm256_slli_epi32(a, 2), _mm256_set1_epi32(0x7f0000)));
    s = _mm256_or_si256(s, _mm256_and_si256(_mm256_slli_epi32(a, 3), _mm256_set1_epi32(0x7f000000)));
    const __m256i nib = _mm256_and_si256(_mm256_xor_si256(s, _mm256_srli_epi16(s, 4)), _mm256_set1_epi8(0x0f));
    return _mm256_or_si256(s, mv_parity_bit7(nib));
}
/* vector i's sign mask from s: byte j -1 where bit j % 8 of group g's byte is set, else 0 (g = 4 i + j / 8) */
MV_AI mvi mvsg_mask(mvsg s, unsigned i) { return mv_bitmask_bytes_v(_mm256_permutevar8x32_epi32(s, _mm256_set1_epi32((int)i))); }

/* 8 bytes as int16 (unsigned or signed), the 8 repeated in both 16-byte lanes */
MV_AI mvi mvi_set16x8u(const uint8_t *p) {
    return _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(const void *)p)));
}
MV_AI mvi mvi_set16x8s(const int8_t *p) {
    return _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(const void *)p)));
}
/* lane 0 gets int16 element i0 of set in all 8 slots, lane 1 element i1 (constants: one pshufb) */
MV_AI mvi mvi_pick16(mvi set, unsigned i0, unsigned i1) {
    const char a = (char)(2 * i0), b = (char)(2 * i0 + 1), c = (char)(2 * i1), d = (char)(2 * i1 + 1);
    return _mm256_shuffle_epi8(set, _mm256_setr_epi8(a, b, a, b, a, b, a, b, a, b, a, b, a, b, a, b, c, d, c, d, c, d, c,
                                                     d, c, d, c, d, c, d, c, d));
}
MV_AI mvi mvi_set1_16(int16_t v) { return _mm256_set1_epi16(v); }
/* the 8 bytes of v (first in the low bits) as int16, repeated in both 16-byte lanes */
MV_AI mvi mvi_set16x8_u64(uint64_t v) {
    return _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)v)));
}
/* the 16 bytes at p, each shifted right by shift and masked to its low 4 bits: elements 0-7 as an
 * int16 set (repeated per 16-byte lane) in *s0, 8-15 in *s1 */
MV_AI void mvi_sets16_nib(const uint8_t *p, unsigned shift, mvi *s0, mvi *s1) {
    __m128i v = _mm_and_si128(_mm_srli_epi16(_mm_loadu_si128((const __m128i *)(const void *)p), (int)shift), _mm_set1_epi8(0x0f));
    *s0 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(v));
    *s1 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_srli_si128(v, 8)));
}
/* out[i] = the sum of the int32 lanes of a[i], i < 8: two rounds of phaddd within the 16-byte
 * lanes, then the lanes added */
MV_AI void mvi_hsum8(const mvi *a, int32_t *out) {
    __m256i h01 = _mm256_hadd_epi32(a[0], a[1]), h23 = _mm256_hadd_epi32(a[2], a[3]);
    __m256i h45 = _mm256_hadd_epi32(a[4], a[5]), h67 = _mm256_hadd_epi32(a[6], a[7]);
    __m256i q0 = _mm256_hadd_epi32(h01, h23), q1 = _mm256_hadd_epi32(h45, h67); /* [a0..a3 per lane] */
    __m256i lo = _mm256_permute2x128_si256(q0, q1, 0x20), hi = _mm256_permute2x128_si256(q0, q1, 0x31);
    _mm256_storeu_si256((__m256i *)(void *)out, _mm256_add_epi32(lo, hi));
}
/* int32 lanes that sum to the dot product of the 16 nibbles (p[i] >> shift) & 15 with x[0..15] */
MV_AI mvi mvi_dot_nib16(const uint8_t *p, unsigned shift, const int16_t *x) {
    __m128i v = _mm_and_si128(_mm_srli_epi16(_mm_loadu_si128((const __m128i *)(const void *)p), (int)shift), _mm_set1_epi8(0x0f));
    return _mm256_madd_epi16(_mm256_cvtepu8_epi16(v), _mm256_loadu_si256((const __m256i *)(const void *)x));
}
/* 16 bytes at p, the rest 0 */
MV_AI mvi mvi_load16z(const void *p) { return _mm256_set_m128i(_mm_setzero_si128(), _mm_loadu_si128((const __m128i *)p)); }
/* the two f16 of w (d low, m high) times sx, each broadcast: *a = d sx, *b = m sx (one rounding each) */
MV_AI void mvf_pair_f16(uint32_t w, float sx, mvf *a, mvf *b) {
    __m128 dm = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)w)), _mm_set1_ps(sx));
    *a = _mm256_broadcastss_ps(dm);
    *b = _mm256_broadcastss_ps(_mm_movehdup_ps(dm));
}
/* the first n int32 lanes (n <= 8) from p, the rest 0 (not read) */
MV_AI mvi mvi_load32_n(const int32_t *p, size_t n) { return _mm256_maskload_epi32((const int *)p, mv_first_mask(n)); }
/* lanes i < n: the u32 at base + i stride (i < 8), the others 0 (not read) */
MV_AI mvi mvi_gather32s(const uint8_t *base, int stride, size_t n) {
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(stride));
    return _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), (const int *)(const void *)base, idx, mv_first_mask(n), 1);
}
/* the same by eight scalar loads through the stack: Zen 3's vpgatherdd takes longer where
 * gathers come once per 8 blocks of 32 (the 32-element types: Q4_1 GEMV 0.84x the time),
 * not where they come once per 8 blocks of 256 (the K types: Q3_K 1.05x, so they gather) */
MV_AI mvi mvi_gather32s_st(const uint8_t *base, int stride, size_t n) {
    if (n < 8) return mvi_gather32s(base, stride, n);
    int32_t v[8];
    for (int l = 0; l < 8; l++) memcpy(&v[l], base + l * stride, 4);
    return _mm256_loadu_si256((const __m256i *)(const void *)v);
}
/* the f16 in the low (hi: high) 16 bits of each 32-bit lane, as f32 */
MV_AI mvf mvf_f16_lo(mvi w) {
    __m256i p = _mm256_packus_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0xffff)), _mm256_setzero_si256());
    return _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08)));
}
MV_AI mvf mvf_f16_hi(mvi w) {
    __m256i p = _mm256_packus_epi32(_mm256_srli_epi32(w, 16), _mm256_setzero_si256());
    return _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08)));
}
/* an f16 decoded (F16C) */
MV_AI float mv_f16(uint16_t h) { return _cvtsh_ss(h); }

/* a macro: GCC deletes a wrapper function around a prefetch as side-effect free */
#define mv_prefetch(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)

#endif
