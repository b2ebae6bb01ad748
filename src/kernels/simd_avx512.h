/* simd_avx512.h — the vector vocabulary of simd_body.h at 16 lanes (AVX-512 F/BW/DQ/VL). */
#ifndef QTK_SIMD_AVX512_H
#define QTK_SIMD_AVX512_H

#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define VW 16
#define VALIGN 64
#define SIMD_NAME "avx512"
#define SIMD_TABLE qtk__kernels_avx512

typedef __m512 vf;
typedef __m512i vi;
typedef __mmask16 vm;

static inline vm vm_first(size_t n) { return (vm)(n >= 16 ? 0xffffu : ((1u << n) - 1u)); }
static inline bool vm_any(vm m) { return m != 0; }
static inline vm vm_or(vm a, vm b) { return (vm)(a | b); }
static inline vm vm_and(vm a, vm b) { return (vm)(a & b); }
static inline vm vm_not(vm a) { return (vm)~a; }

static inline vf vf_set1(float v) { return _mm512_set1_ps(v); }
static inline vf vf_zero(void) { return _mm512_setzero_ps(); }
static inline vf vf_loadu(const float *p) { return _mm512_loadu_ps(p); }
static inline vf vf_load_n(const float *p, size_t n) { return _mm512_maskz_loadu_ps(vm_first(n), p); }
static inline void vf_storeu(float *p, vf v) { _mm512_storeu_ps(p, v); }
static inline void vf_store_n(float *p, vf v, size_t n) { _mm512_mask_storeu_ps(p, vm_first(n), v); }
static inline void vf_stream(float *p, vf v) { _mm512_stream_ps(p, v); }
static inline vf vf_abs(vf a) { return _mm512_abs_ps(a); }
static inline vf vf_max(vf a, vf b) { return _mm512_max_ps(a, b); }
static inline vf vf_min(vf a, vf b) { return _mm512_min_ps(a, b); }
static inline vf vf_add(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf vf_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
static inline vf vf_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf vf_div(vf a, vf b) { return _mm512_div_ps(a, b); }
static inline vf vf_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); } /* a b + c, rounded once */
static inline vf vf_trunc(vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC); }
static inline vf vf_blend(vm m, vf a, vf b) { return _mm512_mask_blend_ps(m, a, b); }
static inline vm vf_ge(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
static inline vm vf_gt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
static inline vm vf_eq(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
static inline float vf_hmax(vf a) { return _mm512_reduce_max_ps(a); }
static inline int vi_hmax(vi a) { return _mm512_reduce_max_epi32(a); }
static inline vf vf_from_i(vi a) { return _mm512_cvtepi32_ps(a); }
static inline vi vi_from_f(vf a) { return _mm512_cvttps_epi32(a); }
static inline vi vf_bits(vf a) { return _mm512_castps_si512(a); }
static inline vf vi_bits(vi a) { return _mm512_castsi512_ps(a); }

static inline vi vi_set1(int v) { return _mm512_set1_epi32(v); }
static inline vi vi_zero(void) { return _mm512_setzero_si512(); }
static inline vi vi_add(vi a, vi b) { return _mm512_add_epi32(a, b); }
static inline vi vi_sub(vi a, vi b) { return _mm512_sub_epi32(a, b); }
static inline vi vi_and(vi a, vi b) { return _mm512_and_si512(a, b); }
static inline vi vi_or(vi a, vi b) { return _mm512_or_si512(a, b); }
static inline vi vi_srlv(vi a, vi s) { return _mm512_srlv_epi32(a, s); }
static inline vi vi_sllv(vi a, vi s) { return _mm512_sllv_epi32(a, s); }
#define vi_srl(a, n) _mm512_srli_epi32((a), (n))
#define vi_sll(a, n) _mm512_slli_epi32((a), (n))
static inline vi vi_max(vi a, vi b) { return _mm512_max_epi32(a, b); }
static inline vi vi_min(vi a, vi b) { return _mm512_min_epi32(a, b); }
static inline vi vi_minu(vi a, vi b) { return _mm512_min_epu32(a, b); }
static inline vm vi_gt(vi a, vi b) { return _mm512_cmpgt_epi32_mask(a, b); }
static inline vm vi_eq(vi a, vi b) { return _mm512_cmpeq_epi32_mask(a, b); }
static inline vm vi_ne(vi a, vi b) { return _mm512_cmpneq_epi32_mask(a, b); }
static inline vi vi_blend(vm m, vi a, vi b) { return _mm512_mask_blend_epi32(m, a, b); }
static inline vi vi_count(vi c, vm m) { return _mm512_mask_add_epi32(c, m, c, _mm512_set1_epi32(1)); }
static inline vi vi_iota(void) { return _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0); }

/* VW bytes, zero- or sign-extended to lanes */
static inline vi vi_load_u8(const uint8_t *p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)); }
static inline vi vi_load_i8(const uint8_t *p) { return _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)); }
static inline vi vi_load_u16(const uint8_t *p) { return _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)); }
static inline vi vi_load_u32(const uint8_t *p) { return _mm512_loadu_si512((const void *)p); }
/* VW nibbles from VW/2 bytes: element 2k in the low nibble of byte k, 2k+1 in the high */
static inline vi vi_load_codes4(const uint8_t *p) {
    __m128i b = _mm_loadl_epi64((const __m128i *)p);
    __m128i lo = _mm_and_si128(b, _mm_set1_epi8(0x0f));
    __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0x0f));
    return _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi));
}
/* VW 2-bit codes from VW/4 bytes, element 4k+i at bits 2i of byte k */
static inline vi vi_load_codes2(const uint8_t *p) {
    uint32_t w;
    memcpy(&w, p, 4);
    vi s = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    return _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32((int)w), s), _mm512_set1_epi32(3));
}

/* Low byte of each lane to VW bytes */
static inline void vi_store_u8(uint8_t *p, vi a) { _mm_storeu_si128((__m128i *)p, _mm512_cvtepi32_epi8(a)); }
static inline void vi_store_u16(uint8_t *p, vi a) { _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(a)); }
static inline void vi_store_u32(uint8_t *p, vi a) { _mm512_storeu_si512((void *)p, a); }
/* VW codes (< 16) to VW/2 bytes, element 2k low nibble */
static inline void vi_store_codes4(uint8_t *p, vi a) {
    /* each 64-bit lane holds codes (2k, 2k+1) in its dwords: fold the high one down by 28 */
    __m512i t = _mm512_or_si512(a, _mm512_srli_epi64(a, 28));
    _mm_storel_epi64((__m128i *)p, _mm512_cvtepi64_epi8(t));
}
/* VW codes (< 4) to VW/4 bytes */
static inline void vi_store_codes2(uint8_t *p, vi a) {
    __m512i t = _mm512_or_si512(a, _mm512_srli_epi64(a, 30));        /* pairs in 64-bit lanes: c0 | c1<<2 */
    __m128i b = _mm512_cvtepi64_epi8(t);                              /* 8 bytes, each 4 bits */
    __m128i pr = _mm_maddubs_epi16(b, _mm_set1_epi16(0x1001));        /* b0 + 16 b1 per 16-bit lane */
    __m128i by = _mm_packus_epi16(pr, pr);
    uint32_t w = (uint32_t)_mm_cvtsi128_si32(by);
    memcpy(p, &w, 4);
}

/* 16-entry table lookup by the low 4 bits of each index */
typedef struct {
    vf t;
} lut16;
static inline lut16 lut16_load(const float *t) { return (lut16){_mm512_loadu_ps(t)}; }
static inline vf vf_lut16(lut16 l, vi idx) { return _mm512_permutexvar_ps(idx, l.t); }
static inline lut16 lut16_scale(lut16 l, vf s) { return (lut16){_mm512_mul_ps(l.t, s)}; }
/* VW e5m2 codes (bytes) to f32 through the hardware f16 conversion (e5m2 is the top byte of
 * an f16); NaN codes give the reference's quiet NaN (0x7fc00000 with the sign). */
static inline vf vf_from_e5m2_bytes(const uint8_t *p) {
    __m128i b = _mm_loadu_si128((const __m128i *)p);
    __m256i h = _mm256_slli_epi16(_mm256_cvtepu8_epi16(b), 8);
    __m512 v = _mm512_cvtph_ps(h);
    __mmask16 nan = _mm_cmpgt_epu8_mask(_mm_and_si128(b, _mm_set1_epi8(0x7f)), _mm_set1_epi8(0x7c));
    __m512i q = _mm512_or_si512(_mm512_set1_epi32(0x7fc00000),
                                _mm512_slli_epi32(_mm512_srli_epi32(_mm512_castps_si512(v), 31), 31));
    return _mm512_mask_blend_ps(nan, v, _mm512_castsi512_ps(q));
}
/* 2 x VW nibble codes from VW bytes (element 2k low nibble of byte k), for vf_lut16 only:
 * each lane's low 4 bits are the code, the bits above are left as they fall (the table
 * lookup reads only the low 4) */
static inline void vi_load_codes4x2_lut(const uint8_t *p, vi *c0, vi *c1) {
    __m128i b = _mm_loadu_si128((const __m128i *)p);
    __m128i hi = _mm_srli_epi16(b, 4);
    *c0 = _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(b, hi));
    *c1 = _mm512_cvtepu8_epi32(_mm_unpackhi_epi8(b, hi));
}
static inline vf vf_gather(const float *base, vi idx) { return _mm512_i32gather_ps(idx, base, 4); }
/* out[j * 16 + l] = base[l * stride + j] for j, l < 16: a 16 x 16 block transposed (by
 * gathers, which AVX-512 machines run fast) */
static inline void vf_transpose_block(const float *b, ptrdiff_t st, float *out) {
    __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                     _mm512_set1_epi32((int)st));
    for (int j = 0; j < 16; j++) _mm512_storeu_ps(out + 16 * j, _mm512_i32gather_ps(idx, b + j, 4));
}

/* f32 -> f16, round to nearest even (hardware conversion matches SPEC's rule exactly) */
static inline void vf_store_f16(uint16_t *p, vf a) {
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
static inline void vf_store_f16_n(uint16_t *p, vf a, size_t n) {
    _mm256_mask_storeu_epi16(p, vm_first(n), _mm512_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
static inline void vi_store_u16_n(uint16_t *p, vi a, size_t n) {
    _mm256_mask_storeu_epi16(p, vm_first(n), _mm512_cvtepi32_epi16(a));
}
static inline void vi_store_u16_full(uint16_t *p, vi a) {
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(a));
}
static inline vf vf_from_f16_codes(vi codes) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(codes)); }

/* lanes of a (idx < 16) or b (idx >= 16) */
static inline vf vf_perm2(vf a, vi idx, vf b) { return _mm512_permutex2var_ps(a, idx, b); }
/* a macro: GCC deletes a wrapper function around a prefetch as side-effect free */
#define simd_prefetch(p) _mm_prefetch((const char *)(p), _MM_HINT_T1)

/* 2 x VW e4m3 codes (bytes) to f32. An e4m3 value's f32 pattern has its low 16 bits zero,
 * so a 128-entry table of the top halves by magnitude (two vpermi2w over 64-entry halves)
 * gives it, NaN code included (0x7fc0); the sign bit goes on top. */
#define QTK_SIMD_HAS_E4M3X2 1
typedef struct {
    __m512i t0, t1, t2, t3; /* entries 0-31, 32-63, 64-95, 96-127 */
} e4m3_table;
static inline e4m3_table e4m3_table_load(const uint16_t *hi) {
    return (e4m3_table){_mm512_loadu_si512((const void *)hi), _mm512_loadu_si512((const void *)(hi + 32)),
                        _mm512_loadu_si512((const void *)(hi + 64)), _mm512_loadu_si512((const void *)(hi + 96))};
}
static inline void vf_from_e4m3_bytes_x2(const e4m3_table *t, const uint8_t *p, vf *v0, vf *v1) {
    __m512i w = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)p));
    __m512i lo = _mm512_permutex2var_epi16(t->t0, w, t->t1); /* index bits 0-5 */
    __m512i hi = _mm512_permutex2var_epi16(t->t2, w, t->t3);
    __mmask32 up = _mm512_test_epi16_mask(w, _mm512_set1_epi16(0x40));
    __m512i h = _mm512_mask_blend_epi16(up, lo, hi);
    h = _mm512_or_si512(h, _mm512_and_si512(_mm512_slli_epi16(w, 8), _mm512_set1_epi16((short)0x8000)));
    *v0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16));
    *v1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1)), 16));
}

static inline void simd_fence(void) { _mm_sfence(); }

#endif
