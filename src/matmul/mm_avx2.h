/* mm_avx2.h — helpers shared by the AVX2 matmul files (included only by files built with
 * the AVX2 flags). */
#ifndef QTK_MM_AVX2_H
#define QTK_MM_AVX2_H

#include "mm_x86.h"

#include <math.h>

static inline size_t group0_fast(const qtk__mmw *w, size_t r) { return (w->br == 1 ? r : r / w->br) * w->gc; }

/* ---- scales ---- */

/* 8 e4m3 codes (low 8 bytes of b) -> f32 values, NaN for S.1111.111 (see mm_avx512.h). */
QTK_AI __m256 e4m3_8(__m128i b) {
    __m128i h = _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(b), 7), _mm_set1_epi16((short)0xBF80));
    __m256 v = _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
    __m128i nan8 = _mm_cmpeq_epi8(_mm_or_si128(b, _mm_set1_epi8((char)0x80)), _mm_set1_epi8((char)0xff));
    return _mm256_blendv_ps(v, _mm256_set1_ps(NAN), _mm256_castsi256_ps(_mm256_cvtepi8_epi32(nan8)));
}

/* Effective scales of groups [g, g+n) into dst (a multiple of 8 written; dst has room). */
static inline void load_scales(const qtk__mmw *w, size_t g, size_t n, float *dst) {
    const uint8_t *s = w->sb + g * w->ssz;
    const __m256 glob = _mm256_set1_ps(w->global);
    for (size_t i = 0; i < n; i += 8) {
        const uint8_t *p = s + i * w->ssz;
        alignas(32) uint8_t buf[32] = {0};
        if (n - i < 8) { /* never read past the last scale */
            memcpy(buf, p, (n - i) * w->ssz);
            p = buf;
        }
        __m256 v;
        switch (w->sdt) {
        case QTK_DTYPE_F16: v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p)); break;
        case QTK_DTYPE_BF16:
            v = _mm256_castsi256_ps(
                _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)), 16));
            break;
        case QTK_DTYPE_UE8M0: {
            __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
            __m256i z = _mm256_cmpeq_epi32(e, _mm256_setzero_si256());
            /* 2^(e-127); e = 0 is 2^-127, an f32 subnormal */
            v = _mm256_castsi256_ps(_mm256_blendv_epi8(_mm256_slli_epi32(e, 23), _mm256_set1_epi32(0x00400000), z));
            break;
        }
        case QTK_DTYPE_UE4M3: v = e4m3_8(_mm_loadl_epi64((const __m128i *)(const void *)p)); break;
        default: v = _mm256_loadu_ps((const float *)(const void *)p); break;
        }
        if (w->two_level) v = _mm256_mul_ps(glob, v);
        _mm256_storeu_ps(dst + i, v);
    }
}

QTK_AI float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#endif
