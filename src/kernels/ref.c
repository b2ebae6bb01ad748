/* ref.c — the reference kernels: plain C, one element at a time. These define qtk's bits. */
#include "kernels.h"

#define QTK_ABSMEAN_RUN 65536u

static bool ref_amax_rows(const qtk__plan *p, const float *x, qtk__stats *st, size_t gbase, size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; r++) {
        qtk__row ri;
        qtk__plan_row(p, r, &ri);
        const float *xr = x + (r - r0) * p->inner;
        for (size_t j = 0; j < p->inner; j++) {
            float a = fabsf(xr[j]);
            if (QTK_UNLIKELY(!qtk__isfinite(a))) {
                size_t idx = r * p->inner + j;
                if (idx < st->bad) st->bad = idx;
                continue;
            }
            float *m = &st->amax[ri.scale_base - gbase + j / p->blk_last];
            if (a > *m) *m = a;
        }
    }
    return true;
}

void qtk__ref_absmean_rows(const qtk__plan *p, const float *x, qtk__stats *st, size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; r++) {
        qtk__row ri;
        qtk__plan_row(p, r, &ri);
        const float *xr = x + (r - r0) * p->inner;
        for (size_t j = 0; j < p->inner; j++) {
            float a = fabsf(xr[j]);
            if (QTK_UNLIKELY(!qtk__isfinite(a))) {
                size_t idx = r * p->inner + j;
                if (idx < st->bad) st->bad = idx;
                continue;
            }
            size_t g = ri.scale_base + j / p->blk_last;
            st->run[g] += (double)a;
            if (++st->count[g] % QTK_ABSMEAN_RUN == 0) {
                st->sum[g] += st->run[g];
                st->run[g] = 0.0;
            }
        }
    }
}

size_t qtk__ref_first_nonfinite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!qtk__isfinite(x[i])) return i;
    return SIZE_MAX;
}

static bool ref_finish_scales(const qtk__plan *p, const float *alpha, size_t n, float g, uint8_t *codes, float *eff) {
    qtk_dtype d = p->L.scale_dtype;
    unsigned sz = qtk__scale_size(d);
    for (size_t i = 0; i < n; i++) {
        float s = alpha[i] / p->div;
        if (p->two_level) s = s / g;
        uint32_t c = qtk_fmt_round_up(d, s);
        qtk__scale_store(d, codes + i * sz, c);
        float v = qtk_fmt_decode(d, c);
        eff[i] = p->two_level ? g * v : v;
    }
    return true;
}

static bool ref_encode_rows(const qtk__plan *p, const float *x, const float *eff, size_t gbase, uint8_t *vals,
                            size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; r++) {
        qtk__row ri;
        qtk__plan_row(p, r, &ri);
        const float *xr = x + (r - r0) * p->inner;
        for (size_t j = 0; j < p->inner; j++) {
            uint32_t code = qtk__encode_elem(p, xr[j], eff[ri.scale_base - gbase + j / p->blk_last]);
            if (p->pack_last)
                qtk__field_put(p, vals, ri.unit_base + j / p->fpu, (unsigned)(j % p->fpu), code);
            else
                qtk__field_put(p, vals, ri.unit_base + j, ri.slot, code);
        }
    }
    return true;
}

static bool ref_decode_rows(const qtk__plan *p, const uint8_t *vals, const float *eff, size_t gbase, qtk_dtype dtype,
                            void *out, size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; r++) {
        qtk__row ri;
        qtk__plan_row(p, r, &ri);
        size_t base = (r - r0) * p->inner;
        for (size_t j = 0; j < p->inner; j++) {
            uint32_t code = p->pack_last ? qtk__field_get(p, vals, ri.unit_base + j / p->fpu, (unsigned)(j % p->fpu))
                                         : qtk__field_get(p, vals, ri.unit_base + j, ri.slot);
            float v = qtk__decode_elem(p, code) * eff[ri.scale_base - gbase + j / p->blk_last];
            switch (dtype) {
            case QTK_DTYPE_F16: ((uint16_t *)out)[base + j] = qtk__f32_to_f16(v); break;
            case QTK_DTYPE_BF16: ((uint16_t *)out)[base + j] = qtk__f32_to_bf16(v); break;
            default: ((float *)out)[base + j] = v; break;
            }
        }
    }
    return true;
}

static bool ref_mse_groups(const qtk__mse_cfg *c, const qtk__mse_src *src, size_t n, float g, uint8_t *codes,
                           float *eff, double *err) {
    qtk__ref_mse_groups(c, src, n, g, codes, eff, err);
    return true;
}

const qtk__kernels qtk__kernels_ref = {
    .name = "scalar",
    .amax_rows = ref_amax_rows,
    .finish_scales = ref_finish_scales,
    .encode_rows = ref_encode_rows,
    .decode_rows = ref_decode_rows,
    .mse_groups = ref_mse_groups,
};
