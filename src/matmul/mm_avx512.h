/* mm_avx512.h — helpers shared by the AVX-512 matmul files (included only by files built
 * with the AVX-512 flags). */
#ifndef QTK_MM_AVX512_H
#define QTK_MM_AVX512_H

#include "mm_x86.h"

#include <math.h>

/* ---- scales ---- */

/* 16 e4m3 codes -> f16 bits of value / 256: sign-extended to 16 bits and shifted left by 7,
 * the magnitude lands on bits 7..13 and copies of the sign on 14 and 15; clearing bit 14
 * leaves the f16 whose exponent is the e4m3 exponent (bias 15 instead of 7: a factor 2^-8). */
QTK_AI __m256i e4m3_to_h(__m128i b) {
    return _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(b), 7), _mm256_set1_epi16((short)0xBF80));
}

/* 16 e4m3 codes -> f32 values (NaN for S.1111.111). */
QTK_AI __m512 e4m3_16(__m128i b) {
    __m512 v = _mm512_mul_ps(_mm512_cvtph_ps(e4m3_to_h(b)), _mm512_set1_ps(256.0f));
    __mmask16 nan = _mm_cmpeq_epi8_mask(_mm_or_si128(b, _mm_set1_epi8((char)0x80)), _mm_set1_epi8((char)0xff));
    return _mm512_mask_mov_ps(v, nan, _mm512_set1_ps(NAN));
}

/* Effective scales of groups [g, g+n) of W into dst (multiple of 16 written; dst has room). */
static inline void load_scales(const qtk__mmw *w, size_t g, size_t n, float *dst) {
    const uint8_t *s = w->sb + g * w->ssz;
    const __m512 glob = _mm512_set1_ps(w->global);
    for (size_t i = 0; i < n; i += 16) {
        unsigned cnt = n - i < 16 ? (unsigned)(n - i) : 16u;
        __mmask16 k = (__mmask16)((1u << cnt) - 1u);
        const uint8_t *p = s + i * w->ssz;
        __m512 v;
        switch (w->sdt) {
        case QTK_DTYPE_F16: v = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, p)); break;
        case QTK_DTYPE_BF16:
            v = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, p)), 16));
            break;
        case QTK_DTYPE_UE8M0: {
            __m512i e = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, p));
            __mmask16 z = _mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512());
            /* 2^(e-127); e = 0 is 2^-127, an f32 subnormal */
            v = _mm512_castsi512_ps(_mm512_mask_mov_epi32(_mm512_slli_epi32(e, 23), z, _mm512_set1_epi32(0x00400000)));
            break;
        }
        case QTK_DTYPE_UE4M3: v = e4m3_16(_mm_maskz_loadu_epi8(k, p)); break;
        default: v = _mm512_maskz_loadu_ps(k, p); break;
        }
        if (w->two_level) v = _mm512_mul_ps(glob, v);
        _mm512_storeu_ps(dst + i, v);
    }
}

#endif
