/* mm_gb.c — store=ggml's integer path: the activations' quantization and layout, and the
 * scalar kernel whose bits every level gives (mm_gb.h). */
#include "mm_gb.h"

/* c->xq: each row's quantized activations block by block in the weights' plane order;
 * c->xs: each block's scale; c->xc: each block's per-16 sums (K types) or its sum. */
qtk_status qtk__mm_gb_prepare(qtk__mm *c) {
    const qtk__gb_fmt *F = c->w.gb;
    const size_t M = c->M, K = c->K, nb = K / F->qk, per = F->qk == 256 ? 16 : 1;
    c->kq = K;
    c->xs_ld = nb;
    c->xc_ld = nb * per;
    c->ws_floats = 0;
    c->xq = qtk__malloc(M * K + 1);
    c->xs = qtk__malloc((M * nb + 1) * sizeof(float));
    c->xc = qtk__malloc((M * c->xc_ld + 1) * sizeof(int32_t));
    int8_t *q = qtk__malloc(K ? K : 1);
    if (!c->xq || !c->xs || !c->xc || !q) {
        qtk__free(q);
        return qtk__err(QTK_E_NOMEM, "out of memory for the quantized activations");
    }
    unsigned pos[QTK__GB_QK_MAX];
    for (unsigned e = 0; e < F->qk; e++) pos[e] = qtk__gb_pos(F, e);
    for (size_t m = 0; m < M; m++) {
        qtk__mm_quantize_row(c->x + m * K, K, F->qk, q, c->xs + m * nb);
        int8_t *dst = c->xq + m * K;
        int32_t *xc = c->xc + m * c->xc_ld;
        for (size_t b = 0; b < nb; b++) {
            const int8_t *qb = q + b * F->qk;
            int8_t *db = dst + b * F->qk;
            for (unsigned e = 0; e < F->qk; e++) db[pos[e]] = qb[e];
            for (size_t g = 0; g < per; g++) {
                int32_t s = 0;
                for (unsigned e = 0; e < F->qk / per; e++) s += qb[g * (F->qk / per) + e];
                xc[b * per + g] = s;
            }
        }
    }
    qtk__free(q);
    return QTK_OK;
}

void qtk__mm_gb_ref_range(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    (void)ws;
    const qtk__gb_fmt *F = c->w.gb;
    const size_t nb = c->K / F->qk, per = F->qk == 256 ? 16 : 1;
    unsigned pos[QTK__GB_QK_MAX];
    for (unsigned e = 0; e < F->qk; e++) pos[e] = qtk__gb_pos(F, e);
    qtk__gb_unpacked u;
    for (size_t n = n0; n < n1; n++) {
        const uint8_t *row = c->w.vals + n * c->w.row_bytes;
        for (size_t m = 0; m < c->M; m++) {
            const int8_t *xq = c->xq + m * c->kq;
            const float *xs = c->xs + m * c->xs_ld;
            const int32_t *xc = c->xc + m * c->xc_ld;
            float acc = 0.0f;
            for (size_t b = 0; b < nb; b++) {
                qtk__gb_unpack(F, row + b * F->bytes, &u);
                const int8_t *qb = xq + b * F->qk;
                int32_t isum = 0, msum = 0;
                if (F->super) {
                    for (unsigned g = 0; g < F->groups; g++) {
                        int32_t s = 0;
                        for (unsigned e = g * F->sub; e < (g + 1) * F->sub; e++) s += (int32_t)u.q[e] * qb[pos[e]];
                        isum += (int32_t)u.sc[g] * s;
                    }
                    int32_t corr;
                    if (F->affine) qtk__gb_k_sums(F, u.sc, u.mn, xc + b * per, &corr, &msum);
                } else {
                    for (unsigned e = 0; e < F->qk; e++) isum += (int32_t)u.q[e] * qb[e];
                    msum = xc[b];
                }
                float t = qtk__gb_term(F, u.d, u.m, xs[b], isum, msum);
                acc = acc + t;
            }
            c->y[m * c->N + n] = c->bias ? acc + c->bias[n] : acc;
        }
    }
}
