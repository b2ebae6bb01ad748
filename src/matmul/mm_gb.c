/* mm_gb.c — store=ggml's integer path: the activations' quantization and layout, and the
 * scalar kernel whose bits every level gives (mm_gb.h). */
#include "mm_gb.h"

#include <math.h>

/* c->xq: each row's quantized activations block by block in the weights' plane order;
 * c->xs: each block's scale; c->xb: each block's per-sub-block sums (K types; IQ1_M: per 8) or
 * its sum (mm_gb.h's qtk__gb_sum_groups). */
qtk_status qtk__mm_gb_prepare(qtk__mm *c) {
    const qtk__gb_fmt *F = c->w.gb;
    const size_t M = c->M, K = c->K, nb = K / F->qk, G = qtk__gb_sum_groups(F), gl = F->qk / G;
    c->kq = K;
    c->xs_ld = nb;
    c->xb_ld = nb * G;
    c->ws_floats = 0;
    c->xq = qtk__malloc(M * K + 1);
    c->xs = qtk__malloc((M * nb + 1) * sizeof(float));
    c->xb = qtk__malloc((M * c->xb_ld + 1) * sizeof(int16_t));
    int8_t *q = qtk__malloc(K + 1);
    const bool lanes = !F->super; /* the 32 types' block sums as f32 (Q4_1, Q5_1) or int32 (Q5_0), + 8 of padding */
    if (lanes && F->affine) c->xlf = qtk__malloc((M * nb + 8) * sizeof(float));
    if (lanes && !F->affine) c->xli = qtk__calloc(M * nb + 8, sizeof(int32_t));
    if (!c->xq || !c->xs || !c->xb || !q || (lanes && !c->xlf && !c->xli)) {
        qtk__free(q);
        return qtk__err(QTK_E_NOMEM, "out of memory for the quantized activations");
    }
    unsigned pos[QTK__GB_QK_MAX];
    for (unsigned e = 0; e < F->qk; e++) pos[e] = qtk__gb_pos(F, e);
    for (size_t m = 0; m < M; m++) {
        qtk__mm_quantize_row(c->x + m * K, K, F->qk, q, c->xs + m * nb);
        int8_t *dst = c->xq + m * K;
        int16_t *xb = c->xb + m * c->xb_ld;
        for (size_t b = 0; b < nb; b++) {
            const int8_t *qb = q + b * F->qk;
            int8_t *db = dst + b * F->qk;
            for (unsigned e = 0; e < F->qk; e++) db[pos[e]] = qb[e];
            for (size_t g = 0; g < G; g++) {
                int32_t s = 0; /* |s| <= 32 x 127: an int16 */
                for (size_t e = 0; e < gl; e++) s += qb[g * gl + e];
                xb[b * G + g] = (int16_t)s;
            }
        }
        for (size_t b = 0; lanes && b < nb; b++) {
            if (c->xlf) c->xlf[m * nb + b] = (float)xb[b];
            else c->xli[m * nb + b] = xb[b];
        }
    }
    qtk__free(q);
    float mx = 0.0f;
    for (size_t i = 0; i < M * nb; i++) {
        float a = fabsf(c->xs[i]);
        mx = a > mx ? a : mx; /* NaN: a NaN output whatever is done */
    }
    c->xs_max = mx;
    return QTK_OK;
}

void qtk__mm_gb_ref_range(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    (void)ws;
    const qtk__gb_fmt *F = c->w.gb;
    const size_t nb = c->K / F->qk, G = qtk__gb_sum_groups(F);
    unsigned pos[QTK__GB_QK_MAX];
    for (unsigned e = 0; e < F->qk; e++) pos[e] = qtk__gb_pos(F, e);
    qtk__gb_unpacked u;
    for (size_t n = n0; n < n1; n++) {
        const uint8_t *row = c->w.vals + n * c->w.row_bytes;
        for (size_t m = 0; m < c->M; m++) {
            const int8_t *xq = c->xq + m * c->kq;
            const float *xs = c->xs + m * c->xs_ld;
            const int16_t *xb = c->xb + m * c->xb_ld;
            float A[8] = {0};
            for (size_t b = 0; b < nb; b++) {
                qtk__gb_unpack(F, row + b * F->bytes, &u);
                const int8_t *qb = xq + b * F->qk;
                int32_t isum = 0, msum = 0;
                if (F->super) {
                    for (unsigned g = 0; g < F->groups; g++) {
                        int32_t s = 0;
                        for (unsigned e = g * F->sub; e < (g + 1) * F->sub; e++) s += (int32_t)u.q[e] * qb[pos[e]];
                        isum += (int32_t)u.sc[g] * s;
                        if (F->affine) msum += (int32_t)u.mn[g] * xb[b * G + g];
                    }
                } else {
                    for (unsigned e = 0; e < F->qk; e++) isum += (int32_t)u.q[e] * qb[e];
                    msum = xb[b];
                }
                /* block b into lane b mod 8 */
                float t = qtk__gb_term(F, qtk__f16_to_f32(u.d) * F->dmul, qtk__f16_to_f32(u.m), xs[b], isum, msum);
                A[b % 8] = A[b % 8] + t;
            }
            for (size_t l = nb % 8 ? nb % 8 : 8; l < 8; l++) A[l] = A[l] + 0.0f; /* the lanes past the last block */
            float acc = qtk__gb_lanes_sum(A);
            c->y[m * c->N + n] = c->bias ? acc + c->bias[n] : acc;
        }
    }
}
