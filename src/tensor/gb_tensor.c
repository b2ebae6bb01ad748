/* gb_tensor.c — whole store=ggml tensors (docs/affine.md §3): checking their bytes,
 * dequantizing them (split across threads by blocks: each value is computed the same way on
 * any thread and kernel level), their scales and offsets. */
#include "tensor_internal.h"

#include "../common/parallel.h"

#include <stdio.h>

static size_t n_blocks(const qtk__gb_fmt *F, const qtk_layout *L) { return L->numel / F->qk; }

qtk_status qtk__gb_check(const qtk__gb_fmt *F, const uint8_t *bytes, const qtk_layout *L) {
    const size_t nb = n_blocks(F, L), per_row = L->rank ? L->shape[L->rank - 1] / F->qk : 0;
    for (size_t b = 0; b < nb; b++) {
        const char *what;
        if (!qtk__gb_block_ok(F, bytes + b * F->bytes, &what)) {
            const qtk__gfmt_info *I = qtk__gfmt_info_of(F->f);
            return qtk__err(QTK_E_VALUE, "%s block %zu (row %zu, block %zu of the row; byte %zu): %s is not finite",
                            I->ggml, b, b / per_row, b % per_row, b * F->bytes, what);
        }
    }
    return QTK_OK;
}

typedef struct {
    const qtk__gb_fmt *F;
    const uint8_t *src;
    qtk_dtype dtype;
    void *out;
} deq_job;

#define DEQ_RUN 64u /* blocks decoded at a time into f32 before the output conversion */

static void deq_range(void *ctx, size_t b0, size_t b1, int worker) {
    (void)worker;
    const deq_job *j = ctx;
    const qtk__gb_fmt *F = j->F;
    const qtk__kernels *k = qtk__kernels_active();
    void (*dequant)(const qtk__gb_fmt *, const uint8_t *, size_t, float *) = k->gb_dequant ? k->gb_dequant : qtk__gb_dequant_ref;
    float buf[DEQ_RUN * QTK__GB_QK_MAX];
    for (size_t b = b0; b < b1; b += DEQ_RUN) {
        size_t nb = b1 - b < DEQ_RUN ? b1 - b : DEQ_RUN, n = nb * F->qk, at = b * F->qk;
        const uint8_t *src = j->src + b * F->bytes;
        if (j->dtype == QTK_DTYPE_F32) {
            dequant(F, src, nb, (float *)j->out + at);
            continue;
        }
        dequant(F, src, nb, buf);
        uint16_t *o = (uint16_t *)j->out + at;
        if (j->dtype == QTK_DTYPE_F16)
            for (size_t i = 0; i < n; i++) o[i] = qtk__f32_to_f16(buf[i]);
        else
            for (size_t i = 0; i < n; i++) o[i] = qtk__f32_to_bf16(buf[i]);
    }
}

void qtk__gb_dequantize(const qtk__gb_fmt *F, const uint8_t *bytes, const qtk_layout *L, qtk_dtype dtype, void *out,
                        int threads) {
    size_t nb = n_blocks(F, L);
    deq_job j = {F, bytes, dtype, out};
    qtk__parallel_for(qtk__threads_for(threads, L->numel), nb, deq_range, &j);
}

qtk_status qtk__gb_scales(const qtk__gb_fmt *F, const uint8_t *bytes, const qtk_layout *L, bool offsets, float *out) {
    qtk__gb_unpacked u;
    float S[QTK__GB_GROUPS_MAX], O[QTK__GB_GROUPS_MAX];
    for (size_t b = 0, nb = n_blocks(F, L); b < nb; b++) {
        qtk__gb_unpack(F, bytes + b * F->bytes, &u);
        qtk__gb_params(F, &u, S, O);
        for (unsigned g = 0; g < F->groups; g++)
            out[b * F->groups + g] = offsets ? qtk__gb_stored_offset(F, &u, g) : S[g];
    }
    return QTK_OK;
}


/* ---- quantizing ---- */

typedef struct {
    const qtk__gb_fmt *F;
    const float *x;
    uint8_t *dst;
    bool mse;
    /* importance weights of row r start at w + (r / row_div) * inner (row_div 0: w) */
    const float *w;
    size_t row_div, inner, blocks_per_row;
} q_job;

static void q_range(void *ctx, size_t b0, size_t b1, int worker) {
    (void)worker;
    const q_job *j = ctx;
    const qtk__gb_fmt *F = j->F;
    for (size_t b = b0; b < b1; b++) {
        size_t r = b / j->blocks_per_row, c0 = (b % j->blocks_per_row) * F->qk;
        const float *w = !j->w ? NULL : (j->row_div ? j->w + (r / j->row_div) * j->inner : j->w) + c0;
        qtk__gb_quantize_block(F, j->x + b * F->qk, w, j->mse, j->dst + b * F->bytes);
    }
}

qtk_status qtk__gb_quantize(const qtk__gb_fmt *F, const float *x, const qtk_layout *L, const qtk_quantize_options *o,
                            uint8_t *dst) {
    const qtk__gfmt_info *I = qtk__gfmt_info_of(F->f);
    if (o->scales || o->global || o->offsets)
        return qtk__err(QTK_E_UNSUPPORTED,
                        "%s (ggml %s) takes no caller-given scales: its scales are integers under a computed f16 "
                        "(quantize with a calibration)",
                        I->preset, I->ggml);
    if (o->calibration == QTK_CALIB_ABSMEAN)
        return qtk__err(QTK_E_SCHEME, "absmean calibration is not defined for %s (use minmax or mse)", I->preset);
    if (o->calibration != QTK_CALIB_MINMAX && o->calibration != QTK_CALIB_MSE)
        return qtk__err(QTK_E_ARG, "calibration %d is not a qtk_calibration", (int)o->calibration);
    if ((o->weights || o->n_weights) && o->calibration != QTK_CALIB_MSE)
        return qtk__err(QTK_E_ARG, "importance weights are used by calibration mse only: minmax would ignore them");
    /* ggml refuses these without an importance matrix (ggml_quantize_requires_imatrix) */
    if (F->lattice && !o->weights &&
        (F->f == QTK__GF_IQ2_XXS || F->f == QTK__GF_IQ2_XS || F->f == QTK__GF_IQ1_S))
        return qtk__err(QTK_E_ARG,
                        "quantizing to %s (ggml %s) needs an importance matrix, as ggml's quantizer does: give "
                        "weights with calibration mse (the CLI's --imatrix or --weights)",
                        I->preset, I->ggml);
    if (F->lattice && !qtk__gb_lattice_quant_ready(F))
        return qtk__err(QTK_E_NOMEM, "out of memory building the %s codebook's search tables", I->preset);
    if (!x && L->numel) return qtk__err(QTK_E_ARG, "input values are NULL");
    size_t bad = qtk__ref_first_nonfinite(x, L->numel);
    if (bad != SIZE_MAX)
        return qtk__err(QTK_E_VALUE, "input value %zu is not finite (%g)", bad, (double)x[bad]);
    size_t inner = L->shape[L->rank - 1], rows = inner ? L->numel / inner : 0;
    q_job j = {F, x, dst, o->calibration == QTK_CALIB_MSE, NULL, 0, inner, inner / F->qk};
    if (o->weights) {
        size_t lead = L->rank >= 3 ? L->shape[0] : 0;
        if (o->n_weights == L->numel) j.row_div = 1;
        else if (o->n_weights == inner) j.row_div = 0;
        else if (lead && o->n_weights == lead * inner) j.row_div = rows / lead;
        else {
            char sb[256];
            return qtk__err(QTK_E_LENGTH,
                            "%zu importance weights given for a tensor of shape %s: give one per element (%zu) or one "
                            "per column of the last dimension (%zu)",
                            o->n_weights, qtk_shape_format(L->shape, L->rank, sb, sizeof sb), L->numel, inner);
        }
        for (size_t i = 0; i < o->n_weights; i++)
            if (!qtk__isfinite(o->weights[i]) || o->weights[i] < 0.0f)
                return qtk__err(QTK_E_VALUE, "importance weight %zu is %g; weights must be finite and >= 0", i,
                                (double)o->weights[i]);
        j.w = o->weights;
    } else if (o->n_weights) {
        return qtk__err(QTK_E_ARG, "n_weights is %zu but weights is NULL", o->n_weights);
    }
    size_t nb = L->numel / F->qk;
    /* the mse search costs about 100x minmax per element (the lattice search more): split finely */
    qtk__parallel_for(qtk__threads_for(o->threads, j.mse || F->lattice ? L->numel * 64 : L->numel), nb, q_range, &j);
    return QTK_OK;
}
