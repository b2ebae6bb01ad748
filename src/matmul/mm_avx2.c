/* mm_avx2.c — the exact path with AVX2 + FMA + F16C. */
#include "mm_x86.h"

/* ---- the f32 microkernel: 6 broadcast rows x up to 2 vectors of 8 ---- */

#define IR 6u

QTK_AI void ukr_t(const unsigned JV, size_t kc, const float *a, size_t lda, const float *b, size_t ldb, float *cc,
                  size_t ldc, unsigned ir, bool acc) {
    const float *ap[IR];
    for (unsigned i = 0; i < IR; i++) ap[i] = a + (i < ir ? i : 0) * lda;
    __m256 c[IR][2];
    for (unsigned i = 0; i < IR; i++)
        for (unsigned v = 0; v < JV; v++)
            c[i][v] = acc && i < ir ? _mm256_loadu_ps(cc + i * ldc + 8 * v) : _mm256_setzero_ps();
    for (size_t k = 0; k < kc; k++) {
        __m256 bv[2];
        for (unsigned v = 0; v < JV; v++) bv[v] = _mm256_loadu_ps(b + k * ldb + 8 * v);
        for (unsigned i = 0; i < IR; i++) {
            __m256 av = _mm256_broadcast_ss(ap[i] + k);
            for (unsigned v = 0; v < JV; v++) c[i][v] = _mm256_fmadd_ps(av, bv[v], c[i][v]);
        }
    }
    for (unsigned i = 0; i < ir; i++)
        for (unsigned v = 0; v < JV; v++) _mm256_storeu_ps(cc + i * ldc + 8 * v, c[i][v]);
}

static void ukr(size_t kc, const float *a, size_t lda, const float *b, size_t ldb, float *cc, size_t ldc, unsigned ir,
                unsigned jr, bool acc) {
    if (jr >= 16) ukr_t(2, kc, a, lda, b, ldb, cc, ldc, ir, acc);
    else ukr_t(1, kc, a, lda, b, ldb, cc, ldc, ir, acc);
}

const qtk__mm_isa qtk__mm_isa_avx2 = {
    .name = "avx2",
    .lanes = 8,
    .ir = IR,
    .jr = 16,
    .fused_max_m = 8,
    .nk_fused = NULL,
    .decode = NULL,
    .ukr = ukr,
    .int_prepare = qtk__mm_int_prepare_ref, /* portable integer kernel until the SIMD one lands */
    .nk_int = qtk__mm_int_ref_range,
};
