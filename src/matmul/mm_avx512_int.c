/* mm_avx512_int.c — the integer path (precision fast) with AVX-512: activations quantized
 * to int8 per block (mm_int.c defines the bits), integer dot products with AVX512-VNNI
 * where the CPU has it and AVX-512BW otherwise (see mm_avx512_int_body.h), scales applied
 * once per 64-byte step of a weight row. */
#include <float.h>
#include "mm_avx512.h"

#include "../kernels/cpu.h"

#define QTK__INT_VNNI 1
#define QTK__INT_VBMI 1
#include "mm_avx512_int_body.h"
#undef QTK__INT_VBMI
#define QTK__INT_VBMI 0
#include "mm_avx512_int_body.h"
#undef QTK__INT_VNNI
#define QTK__INT_VNNI 0
#include "mm_avx512_int_body.h"
#undef QTK__INT_VNNI
#undef QTK__INT_VBMI

/* qtk__mm_quantize_row with vectors, the same bits: blocks that are all finite, not all zero
 * and whose 127 / max|x| is finite take the vector path; the rest the portable one. */
static void quantize_row(const float *x, size_t k, size_t bx, int8_t *q, float *s) {
    const __m512 inf = _mm512_set1_ps(INFINITY);
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    for (size_t b0 = 0, b = 0; b0 < k; b0 += bx, b++) {
        size_t n = k - b0 < bx ? k - b0 : bx;
        __mmask16 m0 = (__mmask16)(n >= 16 ? 0xffffu : (1u << n) - 1u);
        __mmask16 m1 = (__mmask16)(n >= 32 ? 0xffffu : n > 16 ? (1u << (n - 16)) - 1u : 0u);
        __m512 v0 = _mm512_maskz_loadu_ps(m0, x + b0), v1 = _mm512_maskz_loadu_ps(m1, x + b0 + 16);
        __m512 a0 = _mm512_abs_ps(v0), a1 = _mm512_abs_ps(v1);
        /* not below inf, or unordered: inf or NaN */
        __mmask16 bad = _mm512_cmp_ps_mask(a0, inf, _CMP_NLT_UQ) | _mm512_cmp_ps_mask(a1, inf, _CMP_NLT_UQ);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
        float inv = 127.0f / amax;
        if (bad || amax == 0.0f || !qtk__isfinite(inv)) {
            qtk__mm_quantize_row(x + b0, n, bx, q + b0, s + b);
            continue;
        }
        s[b] = amax / 127.0f;
        const __m512 iv = _mm512_set1_ps(inv);
        __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, iv)), q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, iv));
        q0 = _mm512_min_epi32(_mm512_max_epi32(q0, lo), hi);
        q1 = _mm512_min_epi32(_mm512_max_epi32(q1, lo), hi);
        _mm_mask_storeu_epi8(q + b0, m0, _mm512_cvtepi32_epi8(q0));
        if (m1) _mm_mask_storeu_epi8(q + b0 + 16, m1, _mm512_cvtepi32_epi8(q1));
    }
}

qtk_status qtk__mm_int_prepare_avx512(qtk__mm *c) {
    return qtk__mm_int_prepare_simd(c, 64, (qtk__mm_features() & QTK_CPU_AVX512VNNI) != 0, quantize_row);
}

void qtk__mm_int_avx512(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    /* 2-bit integer weights (ternary q2s above all), few rows of x: selection and addition
     * only. With many rows the dot-product kernel is faster (vpsadbw sums 8 bytes per lane on
     * one port; vpdpbusd does 64 multiply-adds per instruction). */
    if (c->w.kind == QTK__MMK_T2 && !c->w.p->lookup && c->bx == 32 && c->M <= 8 &&
        !(qtk__mm_hooks() & QTK__MM_HOOK_NO_TERN)) {
        qtk__mm_tern_avx512(c, n0, n1, ws);
        return;
    }
    if (c->vnni && (qtk__mm_features() & QTK_CPU_AVX512VBMI)) int_range_vbmi(c, n0, n1);
    else if (c->vnni) int_range_vnni(c, n0, n1);
    else int_range_bw(c, n0, n1);
}
