/* simd_avx2.h — the vector vocabulary of simd_body.h at 8 lanes (AVX2 + FMA + F16C). Masks
 * are vectors of all-ones / all-zero lanes. */
#ifndef QTK_SIMD_AVX2_H
#define QTK_SIMD_AVX2_H

#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define VW 8
#define VALIGN 32
#define SIMD_NAME "avx2"
#define SIMD_TABLE qtk__kernels_avx2

typedef __m256 vf;
typedef __m256i vi;
typedef __m256i vm;

static inline vm vm_first(size_t n) {
    __m256i idx = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n > 8 ? 8 : n)), idx);
}
static inline bool vm_any(vm m) { return !_mm256_testz_si256(m, m); }
static inline vm vm_or(vm a, vm b) { return _mm256_or_si256(a, b); }
static inline vm vm_and(vm a, vm b) { return _mm256_and_si256(a, b); }
static inline vm vm_not(vm a) { return _mm256_xor_si256(a, _mm256_set1_epi32(-1)); }

static inline vf vf_set1(float v) { return _mm256_set1_ps(v); }
static inline vf vf_zero(void) { return _mm256_setzero_ps(); }
static inline vf vf_loadu(const float *p) { return _mm256_loadu_ps(p); }
static inline vf vf_load_n(const float *p, size_t n) { return _mm256_maskload_ps(p, vm_first(n)); }
static inline void vf_storeu(float *p, vf v) { _mm256_storeu_ps(p, v); }
static inline void vf_store_n(float *p, vf v, size_t n) { _mm256_maskstore_ps(p, vm_first(n), v); }
static inline void vf_stream(float *p, vf v) { _mm256_stream_ps(p, v); }
static inline vf vf_abs(vf a) { return _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); }
static inline vf vf_max(vf a, vf b) { return _mm256_max_ps(a, b); }
static inline vf vf_min(vf a, vf b) { return _mm256_min_ps(a, b); }
static inline vf vf_add(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf vf_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
static inline vf vf_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf vf_div(vf a, vf b) { return _mm256_div_ps(a, b); }
static inline vf vf_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); } /* a b + c, rounded once */
static inline vf vf_trunc(vf a) { return _mm256_round_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC); }
static inline vf vf_blend(vm m, vf a, vf b) { return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(m)); }
static inline vm vf_ge(vf a, vf b) { return _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_GE_OQ)); }
static inline vm vf_gt(vf a, vf b) { return _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_GT_OQ)); }
static inline vm vf_eq(vf a, vf b) { return _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_EQ_OQ)); }
static inline float vf_hmax(vf a) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}
static inline int vi_hmax(vi a) {
    __m128i m = _mm_max_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0x4e));
    m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0xb1));
    return _mm_cvtsi128_si32(m);
}
static inline vf vf_from_i(vi a) { return _mm256_cvtepi32_ps(a); }
static inline vi vi_from_f(vf a) { return _mm256_cvttps_epi32(a); }
static inline vi vf_bits(vf a) { return _mm256_castps_si256(a); }
static inline vf vi_bits(vi a) { return _mm256_castsi256_ps(a); }

static inline vi vi_set1(int v) { return _mm256_set1_epi32(v); }
static inline vi vi_zero(void) { return _mm256_setzero_si256(); }
static inline vi vi_add(vi a, vi b) { return _mm256_add_epi32(a, b); }
static inline vi vi_sub(vi a, vi b) { return _mm256_sub_epi32(a, b); }
static inline vi vi_and(vi a, vi b) { return _mm256_and_si256(a, b); }
static inline vi vi_or(vi a, vi b) { return _mm256_or_si256(a, b); }
static inline vi vi_srlv(vi a, vi s) { return _mm256_srlv_epi32(a, s); }
static inline vi vi_sllv(vi a, vi s) { return _mm256_sllv_epi32(a, s); }
#define vi_srl(a, n) _mm256_srli_epi32((a), (n))
#define vi_sll(a, n) _mm256_slli_epi32((a), (n))
static inline vi vi_max(vi a, vi b) { return _mm256_max_epi32(a, b); }
static inline vi vi_min(vi a, vi b) { return _mm256_min_epi32(a, b); }
static inline vi vi_minu(vi a, vi b) { return _mm256_min_epu32(a, b); }
static inline vm vi_gt(vi a, vi b) { return _mm256_cmpgt_epi32(a, b); }
static inline vm vi_eq(vi a, vi b) { return _mm256_cmpeq_epi32(a, b); }
static inline vm vi_ne(vi a, vi b) { return vm_not(_mm256_cmpeq_epi32(a, b)); }
static inline vi vi_blend(vm m, vi a, vi b) { return _mm256_blendv_epi8(a, b, m); }
static inline vi vi_count(vi c, vm m) { return _mm256_sub_epi32(c, m); /* mask lanes are -1 */ }
static inline vi vi_iota(void) { return _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0); }

static inline vi vi_load_u8(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }
static inline vi vi_load_i8(const uint8_t *p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)); }
static inline vi vi_load_u16(const uint8_t *p) { return _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)); }
static inline vi vi_load_u32(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline vi vi_load_codes4(const uint8_t *p) {
    uint32_t w;
    memcpy(&w, p, 4);
    __m128i b = _mm_cvtsi32_si128((int)w);
    __m128i lo = _mm_and_si128(b, _mm_set1_epi8(0x0f));
    __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0x0f));
    return _mm256_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi));
}
static inline vi vi_load_codes2(const uint8_t *p) {
    uint16_t w;
    memcpy(&w, p, 2);
    vi s = _mm256_set_epi32(14, 12, 10, 8, 6, 4, 2, 0);
    return _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)w), s), _mm256_set1_epi32(3));
}

/* low byte of each of the 8 lanes -> 8 bytes */
static inline __m128i pack_bytes8(vi a) {
    const __m256i sh = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1,
                                        -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256i t = _mm256_shuffle_epi8(a, sh);
    return _mm_unpacklo_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
}
static inline void vi_store_u8(uint8_t *p, vi a) { _mm_storel_epi64((__m128i *)p, pack_bytes8(a)); }
static inline __m128i pack_u16(vi a) {
    const __m256i sh = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4, 5, 8, 9, 12,
                                        13, -1, -1, -1, -1, -1, -1, -1, -1);
    __m256i t = _mm256_shuffle_epi8(a, sh);
    return _mm_unpacklo_epi64(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
}
static inline void vi_store_u16(uint8_t *p, vi a) { _mm_storeu_si128((__m128i *)p, pack_u16(a)); }
static inline void vi_store_u32(uint8_t *p, vi a) { _mm256_storeu_si256((__m256i *)p, a); }
static inline void vi_store_codes4(uint8_t *p, vi a) {
    __m128i b = pack_bytes8(a);                                  /* 8 codes */
    __m128i pr = _mm_maddubs_epi16(b, _mm_set1_epi16(0x1001));  /* c0 + 16 c1 */
    __m128i by = _mm_packus_epi16(pr, pr);
    uint32_t w = (uint32_t)_mm_cvtsi128_si32(by);
    memcpy(p, &w, 4);
}
static inline void vi_store_codes2(uint8_t *p, vi a) {
    __m128i b = pack_bytes8(a);
    __m128i pr = _mm_maddubs_epi16(b, _mm_set1_epi16(0x0401));  /* c0 + 4 c1 */
    __m128i q = _mm_madd_epi16(pr, _mm_set1_epi32(0x00100001));  /* (c0 + 4 c1) + 16 (c2 + 4 c3) */
    uint32_t w0 = (uint32_t)_mm_cvtsi128_si32(q), w1 = (uint32_t)_mm_extract_epi32(q, 1);
    p[0] = (uint8_t)w0;
    p[1] = (uint8_t)w1;
}

typedef struct {
    __m256 lo, hi;
} lut16;
static inline lut16 lut16_load(const float *t) { return (lut16){_mm256_loadu_ps(t), _mm256_loadu_ps(t + 8)}; }
static inline vf vf_lut16(lut16 l, vi idx) {
    __m256 a = _mm256_permutevar8x32_ps(l.lo, idx), b = _mm256_permutevar8x32_ps(l.hi, idx);
    __m256i hi = _mm256_slli_epi32(idx, 28); /* bit 3 to the sign bit */
    return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(hi));
}
static inline vf vf_gather(const float *base, vi idx) { return _mm256_i32gather_ps(base, idx, 4); }
/* out[j * 8 + l] = base[l * stride + j] for j, l < 8: an 8 x 8 block transposed */
static inline void vf_transpose_block(const float *b, ptrdiff_t st, float *out) {
    __m256 r0 = _mm256_loadu_ps(b), r1 = _mm256_loadu_ps(b + st), r2 = _mm256_loadu_ps(b + 2 * st),
           r3 = _mm256_loadu_ps(b + 3 * st), r4 = _mm256_loadu_ps(b + 4 * st), r5 = _mm256_loadu_ps(b + 5 * st),
           r6 = _mm256_loadu_ps(b + 6 * st), r7 = _mm256_loadu_ps(b + 7 * st);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
           t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
           t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee),
           u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee),
           u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee),
           u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
    _mm256_storeu_ps(out, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(out + 8, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(out + 16, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(out + 24, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(out + 32, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(out + 40, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(out + 48, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(out + 56, _mm256_permute2f128_ps(u3, u7, 0x31));
}
static inline lut16 lut16_scale(lut16 l, vf s) { return (lut16){_mm256_mul_ps(l.lo, s), _mm256_mul_ps(l.hi, s)}; }
static inline vf fp8_nan_fix(__m128i isnan16, vf v) {
    __m256i m = _mm256_cvtepi16_epi32(isnan16);
    __m256i q = _mm256_or_si256(_mm256_set1_epi32(0x7fc00000),
                                _mm256_slli_epi32(_mm256_srli_epi32(_mm256_castps_si256(v), 31), 31));
    return _mm256_blendv_ps(v, _mm256_castsi256_ps(q), _mm256_castsi256_ps(m));
}
static inline vf vf_from_e5m2_bytes(const uint8_t *p) {
    __m128i w = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)p));
    vf v = _mm256_cvtph_ps(_mm_slli_epi16(w, 8));
    __m128i mag = _mm_and_si128(w, _mm_set1_epi16(0x7f));
    return fp8_nan_fix(_mm_cmpgt_epi16(mag, _mm_set1_epi16(0x7c)), v);
}
/* 2 x VW nibble codes for vf_lut16 only (bits above the low 4 left as they fall) */
static inline void vi_load_codes4x2_lut(const uint8_t *p, vi *c0, vi *c1) {
    __m128i b = _mm_loadl_epi64((const __m128i *)p);
    __m128i c = _mm_unpacklo_epi8(b, _mm_srli_epi16(b, 4));
    *c0 = _mm256_cvtepu8_epi32(c);
    *c1 = _mm256_cvtepu8_epi32(_mm_srli_si128(c, 8));
}

static inline void vf_store_f16(uint16_t *p, vf a) {
    _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
static inline void vf_store_f16_n(uint16_t *p, vf a, size_t n) {
    uint16_t tmp[8];
    vf_store_f16(tmp, a);
    memcpy(p, tmp, n * 2);
}
static inline void vi_store_u16_n(uint16_t *p, vi a, size_t n) {
    uint16_t tmp[8];
    _mm_storeu_si128((__m128i *)tmp, pack_u16(a));
    memcpy(p, tmp, n * 2);
}
static inline void vi_store_u16_full(uint16_t *p, vi a) { _mm_storeu_si128((__m128i *)p, pack_u16(a)); }
static inline vf vf_from_f16_codes(vi codes) { return _mm256_cvtph_ps(pack_u16(codes)); }

static inline vf vf_perm2(vf a, vi idx, vf b) {
    __m256 x = _mm256_permutevar8x32_ps(a, idx), y = _mm256_permutevar8x32_ps(b, idx);
    return _mm256_blendv_ps(x, y, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}
/* a macro: GCC deletes a wrapper function around a prefetch as side-effect free */
#define simd_prefetch(p) _mm_prefetch((const char *)(p), _MM_HINT_T1)

static inline void simd_fence(void) { _mm_sfence(); }

#endif
