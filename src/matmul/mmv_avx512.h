/* mmv_avx512.h — the vocabulary of mm_body.h at 16 lanes (AVX-512 F/BW/DQ/VL). An integer
 * vector is 64 bytes; pshufb works within each 16-byte quarter. Byte masks are mask
 * registers. The dot product is pmaddubsw + pmaddwd, or AVX512-VNNI's vpdpbusd in the
 * functions the body builds with MV_DP_TARGET; 2-bit weights take the multiply-free kernel
 * (vptestmb + vpsadbw) for few rows of x (MV_TERN). */
#ifndef QTK_MMV_AVX512_H
#define QTK_MMV_AVX512_H

#include <immintrin.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define MV_L 16
#define MV_B 64
#define MV_NAME "avx512"
#define MV_TABLE qtk__mm_isa_avx512
#define MV_HAS_DP 0
#define MV_TERN 1
#define MV_JV 4
#define MV_DP_TARGET __attribute__((target("avx512vnni")))
#define MV_DP_INSN "vpdpbusd (AVX512-VNNI)"
#define MV_MAD_INSN "vpmaddubsw + vpmaddwd"
#define MV_TERN_INSN "vptestmb + vpsadbw"
#define MV_GB_INSN "vpmaddubsw + vpmaddwd at 32 bytes (vpdpbusd for Q4_1, Q5_0, Q5_1 where the CPU has AVX512-VNNI)"
#define MV_DP_FEATURE QTK_CPU_AVX512VNNI

typedef __m512 mvf;
typedef __m512i mvi;
typedef __mmask64 mvm8;

#define MV_AI static inline __attribute__((always_inline))

/* ---- f32 ---- */

MV_AI __mmask16 mv_first_mask(size_t n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u); }
MV_AI mvf mvf_zero(void) { return _mm512_setzero_ps(); }
MV_AI mvf mvf_set1(float v) { return _mm512_set1_ps(v); }
MV_AI mvf mvf_loadu(const float *p) { return _mm512_loadu_ps(p); }
MV_AI mvf mvf_load_n(const float *p, size_t n) { return _mm512_maskz_loadu_ps(mv_first_mask(n), p); }
MV_AI void mvf_storeu(float *p, mvf v) { _mm512_storeu_ps(p, v); }
MV_AI mvf mvf_bcast(const float *p) { return _mm512_set1_ps(*p); }
MV_AI mvf mvf_add(mvf a, mvf b) { return _mm512_add_ps(a, b); }
MV_AI mvf mvf_mul(mvf a, mvf b) { return _mm512_mul_ps(a, b); }
/* a > b ? a : b lane by lane (b where either is NaN) */
MV_AI mvf mvf_max(mvf a, mvf b) { return _mm512_max_ps(a, b); }
MV_AI mvf mvf_fma(mvf a, mvf b, mvf c) { return _mm512_fmadd_ps(a, b, c); }
/* v clamped to +-FLT_MAX, NaN kept (min/max return their second operand on NaN) */
MV_AI mvf mvf_clamp_finite(mvf v) { return _mm512_max_ps(_mm512_set1_ps(-FLT_MAX), _mm512_min_ps(_mm512_set1_ps(FLT_MAX), v)); }
MV_AI float mvf_hsum(mvf v) {
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
/* the largest lane (no lane NaN) */
MV_AI float mvf_hmax(mvf v) { return _mm512_reduce_max_ps(v); }
MV_AI mvf mvf_from_i(mvi v) { return _mm512_cvtepi32_ps(v); }
MV_AI mvf mvf_perm(mvf v, mvi idx) { return _mm512_permutexvar_ps(idx, v); }
MV_AI mvf mvf_bits(mvi v) { return _mm512_castsi512_ps(v); }
MV_AI mvi mvi_bits(mvf v) { return _mm512_castps_si512(v); }
MV_AI mvf mvf_first(mvf v, size_t n) { return _mm512_maskz_mov_ps(mv_first_mask(n), v); }

typedef struct {
    __m512 t;
} mv_lut16;
MV_AI mv_lut16 mv_lut16_load(const float *t) { return (mv_lut16){_mm512_loadu_ps(t)}; }
MV_AI mvf mvf_lut16(const mv_lut16 *l, mvi idx) { return _mm512_permutexvar_ps(idx, l->t); }

MV_AI mvf mvf_from_f16x(const uint8_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p)); }
MV_AI mvi mvi_load_u8x(const uint8_t *p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)); }
MV_AI mvi mvi_load_u16x(const uint8_t *p) { return _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)p)); }
/* e4m3 moved into the bits of an f16 is its value / 256 (subnormals included); S.1111.111 is NaN */
MV_AI mvf mvf_from_e4m3(const uint8_t *p) {
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(b), 7), _mm256_set1_epi16((short)0xBF80));
    __m512 v = _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f));
    __mmask16 nan = _mm_cmpeq_epi8_mask(_mm_or_si128(b, _mm_set1_epi8((char)0x80)), _mm_set1_epi8((char)0xff));
    return _mm512_mask_mov_ps(v, nan, _mm512_set1_ps(NAN));
}
MV_AI mvf mvf_from_e5m2(const uint8_t *p) {
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)p);
    return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(b), 8));
}

/* ---- integers ---- */

MV_AI mvi mvi_zero(void) { return _mm512_setzero_si512(); }
MV_AI mvi mvi_set1(int32_t v) { return _mm512_set1_epi32(v); }
MV_AI mvi mvi_set1_8(int8_t v) { return _mm512_set1_epi8(v); }
MV_AI mvi mvi_loadu(const void *p) { return _mm512_loadu_si512(p); }
MV_AI mvi mvi_load_n(const void *p, size_t n) {
    return n >= 64 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(((__mmask64)1 << n) - 1, p);
}
MV_AI void mvi_storeu(void *p, mvi v) { _mm512_storeu_si512(p, v); }
MV_AI mvi mvi_and(mvi a, mvi b) { return _mm512_and_si512(a, b); }
MV_AI mvi mvi_or(mvi a, mvi b) { return _mm512_or_si512(a, b); }
MV_AI mvi mvi_xor(mvi a, mvi b) { return _mm512_xor_si512(a, b); }
MV_AI mvi mvi_add(mvi a, mvi b) { return _mm512_add_epi32(a, b); }
MV_AI mvi mvi_sub(mvi a, mvi b) { return _mm512_sub_epi32(a, b); }
MV_AI mvi mvi_add16(mvi a, mvi b) { return _mm512_add_epi16(a, b); }
MV_AI mvi mvi_sub8(mvi a, mvi b) { return _mm512_sub_epi8(a, b); }
#define mvi_slli(v, n) _mm512_slli_epi32((v), (n))
#define mvi_srli(v, n) _mm512_srli_epi32((v), (n))
#define mvi_srai(v, n) _mm512_srai_epi32((v), (n))
/* byte b of the result is t[c & 15] for c = byte b of codes (codes are 0..15) */
MV_AI mvi mvi_lookup16(mvi t, mvi codes) { return _mm512_shuffle_epi8(t, codes); }
/* placement q: 32-bit lane l = 4h + i gets byte 16h + 4q + i of v in its top byte (place)
 * or its low byte (place_lo), the other bytes 0 (q a constant): the same pattern in every
 * 128-bit quarter */
MV_AI mvi mvi_place(mvi v, unsigned q) {
    const int c = (int)(4 * q);
    const __m128i m = _mm_setr_epi8(-1, -1, -1, (char)c, -1, -1, -1, (char)(c + 1), -1, -1, -1, (char)(c + 2), -1, -1, -1,
                                    (char)(c + 3));
    return _mm512_shuffle_epi8(v, _mm512_broadcast_i32x4(m));
}
MV_AI mvi mvi_place_lo(mvi v, unsigned q) {
    const int c = (int)(4 * q);
    const __m128i m = _mm_setr_epi8((char)c, -1, -1, -1, (char)(c + 1), -1, -1, -1, (char)(c + 2), -1, -1, -1, (char)(c + 3),
                                    -1, -1, -1);
    return _mm512_shuffle_epi8(v, _mm512_broadcast_i32x4(m));
}
MV_AI mvi mvi_table16(const int8_t *t) { return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)t)); }
MV_AI mvi mvi_maddubs(mvi u, mvi s) { return _mm512_maddubs_epi16(u, s); }
MV_AI mvi mvi_madd1(mvi v) { return _mm512_madd_epi16(v, _mm512_set1_epi16(1)); }
MV_AI mvi mvi_abs8(mvi v) { return _mm512_abs_epi8(v); }
/* psignb (AVX-512 has none): a negated where b < 0, zeroed where b == 0 */
MV_AI mvi mvi_sign8(mvi a, mvi b) {
    __mmask64 neg = _mm512_movepi8_mask(b), nz = _mm512_test_epi8_mask(b, b);
    return _mm512_maskz_mov_epi8(nz, _mm512_mask_sub_epi8(a, neg, _mm512_setzero_si512(), a));
}
#define mvi_dp(acc, u, s) _mm512_dpbusd_epi32((acc), (u), (s)) /* only in MV_DP_TARGET functions */
MV_AI mvm8 mvi_test8(mvi w, int8_t c) { return _mm512_test_epi8_mask(w, _mm512_set1_epi8(c)); }
MV_AI mvi mvi_blend8(mvm8 m, mvi a, mvi b) { return _mm512_mask_blend_epi8(m, a, b); }
MV_AI mvi mvi_sad(mvi v) { return _mm512_sad_epu8(v, _mm512_setzero_si512()); }

#define mv_prefetch(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)

#endif
