/* mm_gemm.c — the tiled drivers: decode a small tile of W, multiply it by many rows of x
 * with the ISA's f32 microkernel. Each weight is decoded once per pass over the rows of x
 * (all M rows at once), never the whole W at a time.
 *
 * nk: the microkernel's broadcast side is the decoded tile of ir weight rows (ir x KC, in
 * chunk order for the streamed decoders) and its vector side is x transposed (xt, [kp][mp]),
 * so a C tile is ir outputs n by jr rows m. The loops keep one KC-slab of xt hot while every
 * weight row of a block of NB rows passes by; partial sums live in a [NB][mp] buffer.
 *
 * kn: the decoded tile is a [KC][NC] panel of W (step order for the streamed decoders,
 * natural for the generic one): the vector side; the broadcast side is x itself. Partial
 * sums live in an [M][NC] buffer, in the panel's order, put back when written to y.
 *
 * Every output's sum runs over the same k-slabs in the same order whatever tile or thread
 * range it falls in, so results do not depend on the thread count. */
#include "mm.h"

typedef void (*decode_fn)(const qtk__mm *c, size_t r0, size_t nr, size_t c0, size_t nc, bool chunked, float *dst,
                          size_t ld);

static decode_fn decoder(const qtk__mm *c) {
    return c->path == QTK_MM_PATH_EXACT ? c->isa->decode : qtk__mm_decode_generic;
}

size_t qtk__mm_gemm_ws(const qtk__mm *c, size_t n_range) {
    (void)n_range;
    if (c->layout == QTK_MM_NK) return (size_t)c->isa->ir * QTK__MM_KC + (size_t)QTK__MM_NB * c->mp;
    return (size_t)QTK__MM_KC * QTK__MM_NC + c->M * QTK__MM_NC;
}

void qtk__mm_gemm_nk(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    const qtk__mm_isa *isa = c->isa;
    const bool chunked = c->path == QTK_MM_PATH_EXACT;
    const decode_fn decode = decoder(c);
    const size_t mp = c->mp, kp = c->kp, M = c->M, N = c->N;
    float *A = ws, *CT = ws + (size_t)isa->ir * QTK__MM_KC;
    for (size_t nb0 = n0; nb0 < n1; nb0 += QTK__MM_NB) {
        size_t nb1 = n1 - nb0 < QTK__MM_NB ? n1 : nb0 + QTK__MM_NB;
        for (size_t k0 = 0; k0 < kp; k0 += QTK__MM_KC) {
            size_t kc = kp - k0 < QTK__MM_KC ? kp - k0 : QTK__MM_KC;
            for (size_t t = nb0; t < nb1; t += isa->ir) {
                unsigned ir = nb1 - t < isa->ir ? (unsigned)(nb1 - t) : isa->ir;
                decode(c, t, ir, k0, kc, chunked, A, QTK__MM_KC);
                for (size_t j0 = 0; j0 < mp; j0 += isa->jr) {
                    unsigned jr = mp - j0 < isa->jr ? (unsigned)(mp - j0) : isa->jr;
                    isa->ukr(kc, A, QTK__MM_KC, c->xt + k0 * mp + j0, mp, CT + (t - nb0) * mp + j0, mp, ir, jr,
                             k0 > 0);
                }
            }
        }
        /* y[m][n] = CT[n][m] + bias, 16 outputs n at a time so that y is written in runs
         * (one float per row of y, N apart, touches a page per write) */
        for (size_t g = nb0; g < nb1; g += 16) {
            size_t ge = nb1 - g < 16 ? nb1 : g + 16;
            for (size_t m = 0; m < M; m++) {
                float *yr = c->y + m * N;
                for (size_t n = g; n < ge; n++) {
                    float v = CT[(n - nb0) * mp + m];
                    yr[n] = c->bias ? v + c->bias[n] : v;
                }
            }
        }
    }
}

void qtk__mm_gemm_kn(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    const qtk__mm_isa *isa = c->isa;
    const decode_fn decode = decoder(c);
    const size_t M = c->M, N = c->N, K = c->K, L = c->sf ? c->sf : isa->lanes;
    float *P = ws, *Cb = ws + (size_t)QTK__MM_KC * QTK__MM_NC;
    for (size_t nc0 = n0; nc0 < n1; nc0 += QTK__MM_NC) {
        size_t nc = n1 - nc0 < QTK__MM_NC ? n1 - nc0 : QTK__MM_NC;
        size_t ncp = qtk__ceil_div(nc, L) * L;
        for (size_t k0 = 0; k0 < K; k0 += QTK__MM_KC) {
            size_t kc = K - k0 < QTK__MM_KC ? K - k0 : QTK__MM_KC;
            decode(c, k0, kc, nc0, ncp, false, P, QTK__MM_NC);
            for (size_t m0 = 0; m0 < M; m0 += isa->ir) {
                unsigned ir = M - m0 < isa->ir ? (unsigned)(M - m0) : isa->ir;
                for (size_t j0 = 0; j0 < ncp; j0 += isa->jr) {
                    unsigned jr = ncp - j0 < isa->jr ? (unsigned)(ncp - j0) : isa->jr;
                    isa->ukr(kc, c->x + m0 * K + k0, K, P + j0, QTK__MM_NC, Cb + m0 * QTK__MM_NC + j0, QTK__MM_NC,
                             ir, jr, k0 > 0);
                }
            }
        }
        for (size_t m = 0; m < M; m++)
            for (size_t j = 0; j < ncp; j++) {
                size_t col = c->sf ? j / c->sf * c->sf + c->perm[j % c->sf] : j; /* step order -> natural */
                if (col >= nc) continue;
                float v = Cb[m * QTK__MM_NC + j];
                c->y[m * N + nc0 + col] = c->bias ? v + c->bias[nc0 + col] : v;
            }
    }
}
