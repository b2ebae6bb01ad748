/* mm_ref.c — the reference matmul and the generic element decoder (portable C).
 *
 * The reference defines the exact path: each weight is the value qtk_dequantize gives
 * (value(field) * effective scale, one f32 rounding), and each output is
 *     acc = 0; for k = 0..K-1: acc = acc + x[m][k] * w'[k]  (product rounded, then sum rounded)
 *     y = acc + bias
 * in that order, in f32, for both layouts. Products and sums are separate statements so
 * that no compiler contracts them into FMAs: the reference gives the same bits everywhere. */
#include "mm.h"

/* store=ggml: the blocks holding columns [c0, c0 + nc) of row r, decoded whole (by the kernels'
 * block decoder: the same values at every level) */
static void decode_gb(const qtk__mmw *w, size_t r, size_t c0, size_t nc, float *dst) {
    const qtk__gb_fmt *F = w->gb;
    const qtk__kernels *k = qtk__kernels_active();
    void (*dq)(const qtk__gb_fmt *, const uint8_t *, size_t, float *) = k->gb_dequant ? k->gb_dequant : qtk__gb_dequant_ref;
    const uint8_t *row = w->vals + r * w->row_bytes;
    size_t b0 = c0 / F->qk, b1 = qtk__ceil_div(c0 + nc, F->qk);
    if (c0 % F->qk == 0 && nc % F->qk == 0) {
        dq(F, row + b0 * F->bytes, b1 - b0, dst);
        return;
    }
    float tmp[QTK__GB_QK_MAX];
    for (size_t b = b0; b < b1; b++) {
        dq(F, row + b * F->bytes, 1, tmp);
        size_t lo = b * F->qk, from = lo > c0 ? lo : c0, to = lo + F->qk < c0 + nc ? lo + F->qk : c0 + nc;
        memcpy(dst + (from - c0), tmp + (from - lo), (to - from) * sizeof(float));
    }
}

void qtk__mm_decode_elems(const qtk__mmw *w, size_t r, size_t c0, size_t nc, float *dst) {
    const qtk__plan *p = w->p;
    if (w->gb) {
        decode_gb(w, r, c0, nc, dst);
        return;
    }
    if (!p) { /* dense f32 weights */
        memcpy(dst, w->vals + (r * w->C + c0) * sizeof(float), nc * sizeof(float));
        return;
    }
    qtk__row ri;
    qtk__plan_row(p, r, &ri);
    if (p->affine && p->pack_last && p->unit_bytes == 4 && p->fpu > 1 && c0 % p->fpu == 0 && p->blk_last % p->fpu == 0) {
        /* the affine mode's word stores (GPTQ/AWQ's u4/u2/u8): a word's fields share a group,
         * decoded a word at a time */
        const unsigned fpu = p->fpu, bits = p->bits;
        const uint32_t mask = p->mask;
        const uint8_t *u = w->vals + ri.unit_base * 4;
        size_t j = 0;
        for (; j + fpu <= nc; j += fpu) {
            size_t c = c0 + j, g = ri.scale_base + c / p->blk_last;
            uint32_t v = qtk__ld32(u + 4 * (c / fpu));
            float s = w->eff[g], o = w->off[g];
            for (unsigned i = 0; i < fpu; i++) dst[j + i] = qtk__decode_affine(p, (v >> (bits * i)) & mask, s, o);
        }
        for (; j < nc; j++) {
            size_t c = c0 + j;
            uint32_t code = qtk__field_get(p, w->vals, ri.unit_base + c / fpu, (unsigned)(c % fpu));
            dst[j] = qtk__decode_affine(p, code, w->eff[ri.scale_base + c / p->blk_last], w->off[ri.scale_base + c / p->blk_last]);
        }
        return;
    }
    for (size_t j = 0; j < nc; j++) {
        size_t c = c0 + j;
        uint32_t code = p->pack_last ? qtk__field_get(p, w->vals, ri.unit_base + c / p->fpu, (unsigned)(c % p->fpu))
                                     : qtk__field_get(p, w->vals, ri.unit_base + c, ri.slot);
        size_t g = ri.scale_base + c / p->blk_last;
        dst[j] = p->affine ? qtk__decode_affine(p, code, w->eff[g], w->off[g]) : qtk__decode_elem(p, code) * w->eff[g];
    }
}

void qtk__mm_decode_generic(const qtk__mm *c, size_t r0, size_t nr, size_t c0, size_t nc, bool chunked, float *dst,
                            size_t ld) {
    (void)chunked; /* the generic decoder has no chunks: callers ask for the natural order */
    size_t have = c0 < c->w.C ? c->w.C - c0 : 0;
    if (have > nc) have = nc;
    for (size_t i = 0; i < nr; i++) {
        float *d = dst + i * ld;
        qtk__mm_decode_elems(&c->w, r0 + i, c0, have, d);
        for (size_t j = have; j < nc; j++) d[j] = 0.0f;
    }
}

/* Columns of y the kn reference accumulates at once (bounds its scratch). */
#define REF_KN_COLS 256u

void qtk__mm_ref_range(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    const size_t M = c->M, N = c->N, K = c->K;
    const float *x = c->x;
    if (c->layout == QTK_MM_NK) {
        float *wrow = ws; /* K floats */
        for (size_t n = n0; n < n1; n++) {
            qtk__mm_decode_elems(&c->w, n, 0, K, wrow);
            for (size_t m = 0; m < M; m++) {
                const float *xm = x + m * K;
                float acc = 0.0f;
                for (size_t k = 0; k < K; k++) {
                    float prod = xm[k] * wrow[k];
                    acc = acc + prod;
                }
                c->y[m * N + n] = c->bias ? acc + c->bias[n] : acc;
            }
        }
        return;
    }
    /* kn: tensor row k holds W[k][n]; the same per-output order as nk */
    for (size_t b0 = n0; b0 < n1; b0 += REF_KN_COLS) {
        size_t nn = n1 - b0 < REF_KN_COLS ? n1 - b0 : REF_KN_COLS;
        float *acc = ws, *wrow = ws + M * nn;
        for (size_t i = 0; i < M * nn; i++) acc[i] = 0.0f;
        for (size_t k = 0; k < K; k++) {
            qtk__mm_decode_elems(&c->w, k, b0, nn, wrow);
            for (size_t m = 0; m < M; m++) {
                float xv = x[m * K + k], *am = acc + m * nn;
                for (size_t j = 0; j < nn; j++) {
                    float prod = xv * wrow[j];
                    am[j] = am[j] + prod;
                }
            }
        }
        for (size_t m = 0; m < M; m++)
            for (size_t j = 0; j < nn; j++)
                c->y[m * N + b0 + j] = c->bias ? acc[m * nn + j] + c->bias[b0 + j] : acc[m * nn + j];
    }
}

size_t qtk__mm_ref_ws(const qtk__mm *c) {
    size_t kn = c->M * REF_KN_COLS + REF_KN_COLS;
    return c->K > kn ? c->K : kn;
}

static const char *ref_int_name(const qtk__mm *c) {
    (void)c;
    return "scalar integer: int32 sums per block of x, in order of k";
}

const qtk__mm_isa qtk__mm_isa_ref = {
    .name = "scalar",
    .generic_name = "scalar reference: element codecs, f32 sums in order of k",
    .fused_name = "scalar reference: element codecs, f32 sums in order of k",
    .tiled_name = "scalar reference: element codecs, f32 sums in order of k",
    .int_name = ref_int_name,
    .gb_int_name = "scalar integer: ggml's blocks, int32 sums per block, in order of k",
    .gb_lat_int_name = "scalar integer: lattice blocks unpacked, int32 sums per block, in order of k",
    .lanes = 1,
    .ir = 1,
    .jr = 1,
    .fused_max_m = 0,
    .int_max_m = {QTK__MM_INT_MAX_M, QTK__MM_INT_MAX_M, QTK__MM_INT_MAX_M},
    .nk_fused = NULL,
    .kn_fused = NULL,
    .decode = NULL,
    .ukr = NULL,
    .int_prepare = qtk__mm_int_prepare_ref,
    .nk_int = qtk__mm_int_ref_range,
    .gb_int = qtk__mm_gb_ref_range,
    .gb_lat_int = qtk__mm_gb_ref_range,
    .gb_int_max_m = QTK__MM_GB_MAX_M,
    .step = NULL,
    .order = NULL,
    .stream_mode = NULL,
    .row_ws = NULL,
};

