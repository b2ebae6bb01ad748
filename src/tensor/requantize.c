/* convert.c — re-quantizing a tensor under another scheme, one slab of rows at a time.
 *
 * The result is defined as quantize(dequantize(t)). Materializing dequantize(t) would
 * cost 4 bytes per element; instead the source is dequantized a slab at a time, twice when
 * the target's scales need the whole tensor first (per-tensor, cross-row blocks, two-level,
 * absmean) and once when its scale groups lie within rows (each slab is then calibrated and
 * encoded while it is in cache). Rows are visited in order, so every statistic (max, and
 * absmean's ordered sums) is exactly what a whole-tensor pass computes. Calibration mse and
 * fitted tables dequantize the source in full instead (4 bytes per element). */
#include "tensor_internal.h"

#include "../exec/exec.h"

#include <stdio.h>

#define SLAB_ELEMS (1u << 16)

typedef struct {
    const qtk__plan *src, *dst;
    const uint8_t *sb;
    const float *seff;
    float *buf;
    size_t slab_rows;
} converter;

/* Dequantizes rows [r0, r1) of the source into c->buf. */
static void load_slab(const converter *c, size_t r0, size_t r1) {
    qtk__exec_decode_rows(c->src, c->sb, c->seff, 0, QTK_DTYPE_F32, c->buf, r0, r1);
}

static size_t slab_end(const converter *c, size_t r0) {
    size_t want = r0 + c->slab_rows < c->dst->rows ? r0 + c->slab_rows : c->dst->rows;
    return qtk__exec_unit_align(c->dst, want);
}

/* Pass 1 of the two-pass form: per-group statistics of the dequantized source. */
static qtk_status gather_stats(const converter *c, qtk_calibration cal, qtk__stats *stats) {
    for (size_t r0 = 0; r0 < c->dst->rows;) {
        size_t r1 = slab_end(c, r0);
        load_slab(c, r0, r1);
        if (cal == QTK_CALIB_ABSMEAN) qtk__ref_absmean_rows(c->dst, c->buf, stats, r0, r1);
        else qtk__exec_amax_rows(c->dst, c->buf, stats, 0, r0, r1);
        r0 = r1;
    }
    if (stats->bad != SIZE_MAX) {
        char ib[256];
        return qtk__err(QTK_E_VALUE, "source element at %s dequantizes to a non-finite value",
                        qtk__index_str(c->dst, stats->bad, ib, sizeof ib));
    }
    return QTK_OK;
}

static qtk_status nonfinite_slab(const converter *c, size_t r0, size_t r1) {
    size_t bad = qtk__ref_first_nonfinite(c->buf, (r1 - r0) * c->src->inner);
    if (bad == SIZE_MAX) return QTK_OK;
    char ib[256];
    return qtk__err(QTK_E_VALUE, "source element at %s dequantizes to a non-finite value",
                    qtk__index_str(c->dst, r0 * c->src->inner + bad, ib, sizeof ib));
}

static qtk_status convert(const qtk_tensor *t, const qtk_scheme *s, const qtk_quantize_options *opts, qtk_tensor **out);

qtk_status qtk_convert(const qtk_tensor *t, const qtk_scheme *s, const qtk_quantize_options *opts, qtk_tensor **out) {
    qtk__fpenv fe;
    qtk__fpenv_enter(&fe);
    qtk_status st = convert(t, s, opts, out);
    qtk__fpenv_leave(&fe);
    return st;
}

/* quantize(dequantize(t)) with the source dequantized in full (4 bytes per element). */
static qtk_status convert_whole(const qtk_tensor *t, const qtk_scheme *s, const qtk_quantize_options *o, qtk_tensor **out) {
    const qtk_layout *sl = qtk_tensor_layout(t);
    float *xf = qtk__malloc((sl->numel ? sl->numel : 1) * sizeof(float));
    qtk_status st = xf ? QTK_OK : qtk__err(QTK_E_NOMEM, "out of memory for %zu f32 values", sl->numel);
    if (!st) st = qtk_dequantize(t, QTK_DTYPE_F32, xf, sl->numel);
    if (!st) {
        size_t bad = qtk__ref_first_nonfinite(xf, sl->numel);
        if (bad != SIZE_MAX) st = qtk__err(QTK_E_VALUE, "source element %zu dequantizes to a non-finite value", bad);
    }
    if (!st) st = qtk_quantize(xf, sl->shape, sl->rank, s, o, out);
    qtk__free(xf);
    return st;
}

/* The extension's schemes (docs/affine.md) have no slab path: ggml's blocks and offsets. */
static bool extension_scheme(const qtk_scheme *s) { return s->store == QTK_STORE_GGML || s->mode == QTK_MODE_AFFINE; }

static qtk_status convert(const qtk_tensor *t, const qtk_scheme *s, const qtk_quantize_options *opts, qtk_tensor **out) {
    if (!t || !out) return qtk__err(QTK_E_ARG, "qtk_convert: NULL argument");
    *out = NULL;
    if (!s) return qtk__err(QTK_E_ARG, "qtk_convert: NULL scheme");
    if (extension_scheme(qtk_tensor_scheme(t)) || extension_scheme(s)) {
        qtk_status st = qtk_scheme_validate(s);
        return st ? st : convert_whole(t, s, opts, out);
    }
    const qtk_layout *sl = qtk_tensor_layout(t);
    size_t len;
    const uint8_t *sb = qtk_tensor_bytes(t, &len);
    qtk_quantize_options o = opts ? *opts : (qtk_quantize_options){0};

    qtk__plan *src = qtk__malloc(sizeof *src), *dst = qtk__malloc(sizeof *dst);
    float *seff = NULL, *buf = NULL, *alpha = NULL;
    qtk__stats stats = {.bad = SIZE_MAX};
    qtk__scales sc = {0};
    qtk_tensor *res = NULL;
    uint8_t *db = NULL;
    qtk_status st = (!src || !dst) ? qtk__err(QTK_E_NOMEM, "out of memory") : QTK_OK;
    if (!st) st = qtk__bytes_plan(sb, len, sl->shape, sl->rank, qtk_tensor_scheme(t), src);
    if (!st) st = qtk__plan_init(dst, s, sl->shape, sl->rank, NULL);
    if (!st) st = qtk__check_calibration(dst, &o);
    if (!st && !o.scales && (o.calibration == QTK_CALIB_MSE || dst->fit)) {
        /* the search and the fit look at the whole tensor (and several times): the source
         * is dequantized once, in full, and quantized as such */
        float *xf = qtk__malloc((sl->numel ? sl->numel : 1) * sizeof(float));
        if (!xf) st = qtk__err(QTK_E_NOMEM, "out of memory for %zu f32 values", sl->numel);
        if (!st) st = qtk_dequantize(t, QTK_DTYPE_F32, xf, sl->numel);
        if (!st) {
            size_t bad = qtk__ref_first_nonfinite(xf, sl->numel);
            if (bad != SIZE_MAX) {
                char ib[256];
                st = qtk__err(QTK_E_VALUE, "source element at %s dequantizes to a non-finite value",
                              qtk__index_str(dst, bad, ib, sizeof ib));
            }
        }
        if (!st) st = qtk_quantize(xf, sl->shape, sl->rank, s, &o, out);
        qtk__free(xf);
        qtk__free(src);
        qtk__free(dst);
        return st;
    }
    converter c = {.src = src, .dst = dst, .sb = sb};
    size_t ns = 1;
    if (!st) {
        c.slab_rows = src->inner && SLAB_ELEMS / src->inner ? SLAB_ELEMS / src->inner : 1;
        ns = dst->L.n_scales ? dst->L.n_scales : 1;
        /* a slab may grow to the next encode-unit boundary: at most fpu rows along an axis */
        size_t slab_elems = (c.slab_rows + qtk__exec_unit_rows(dst)) * src->inner;
        if (slab_elems > src->L.numel) slab_elems = src->L.numel;
        seff = qtk__malloc((src->L.n_scales ? src->L.n_scales : 1) * sizeof(float));
        buf = qtk__malloc((slab_elems > 0 ? slab_elems : 1) * sizeof(float));
        if (!seff || !buf) st = qtk__err(QTK_E_NOMEM, "out of memory for a %zu-element slab", slab_elems);
        c.seff = seff;
        c.buf = buf;
    }
    if (!st) st = qtk__bytes_scales(src, sb, seff, NULL);
    if (!st) st = qtk__tensor_new(&dst->s, &dst->L, &res);
    if (!st) st = qtk__scales_alloc(dst, &sc);
    if (!st) db = qtk__tensor_mutable_bytes(res);

    bool fused = !st && !o.scales && o.calibration == QTK_CALIB_MINMAX && !dst->two_level && qtk__exec_chunkable(dst);
    if (!st && fused) {
        /* one pass: each slab is calibrated and encoded while it is in cache */
        alpha = qtk__calloc(ns, sizeof(float));
        if (!alpha) st = qtk__err(QTK_E_NOMEM, "out of memory for %zu scales", ns);
        for (size_t r0 = 0; !st && r0 < dst->rows;) {
            size_t r1 = slab_end(&c, r0);
            load_slab(&c, r0, r1);
            stats.amax = alpha;
            qtk__exec_amax_rows(dst, buf, &stats, 0, r0, r1);
            if (stats.bad != SIZE_MAX) {
                char ib[256];
                st = qtk__err(QTK_E_VALUE, "source element at %s dequantizes to a non-finite value",
                              qtk__index_str(dst, stats.bad, ib, sizeof ib));
                break;
            }
            qtk__row a, b;
            qtk__plan_row(dst, r0, &a);
            size_t g1 = dst->L.n_scales;
            if (r1 < dst->rows) {
                qtk__plan_row(dst, r1, &b);
                g1 = b.scale_base;
            }
            qtk__exec_finish_scales(dst, alpha + a.scale_base, a.scale_base, g1 - a.scale_base, 1.0f, db,
                                    sc.eff + a.scale_base);
            qtk__exec_encode_rows(dst, buf, sc.eff, 0, db, r0, r1);
            r0 = r1;
        }
    } else if (!st) {
        /* pass 1: the target's scales */
        if (o.scales) {
            st = qtk__scales_given(dst, o.scales, o.n_scales, o.global, db, &sc);
        } else {
            alpha = qtk__calloc(ns, sizeof(float));
            stats.amax = alpha;
            if (o.calibration == QTK_CALIB_ABSMEAN) {
                stats.sum = qtk__calloc(ns, sizeof(double));
                stats.run = qtk__calloc(ns, sizeof(double));
                stats.count = qtk__calloc(ns, sizeof(size_t));
            }
            if (!alpha || (o.calibration == QTK_CALIB_ABSMEAN && (!stats.sum || !stats.run || !stats.count)))
                st = qtk__err(QTK_E_NOMEM, "out of memory for %zu scale groups", ns);
            if (!st) st = gather_stats(&c, o.calibration, &stats);
            if (!st && o.calibration == QTK_CALIB_ABSMEAN) qtk__absmean_alpha(dst, &stats, alpha);
            if (!st) st = qtk__scales_from_alpha(dst, alpha, db, &sc);
        }
        /* pass 2: the fields */
        for (size_t r0 = 0; !st && r0 < dst->rows;) {
            size_t r1 = slab_end(&c, r0);
            load_slab(&c, r0, r1);
            if (o.scales) st = nonfinite_slab(&c, r0, r1);
            if (!st) qtk__exec_encode_rows(dst, buf, sc.eff, 0, db, r0, r1);
            r0 = r1;
        }
    }
    if (!st && dst->rows == 0) memset(db, 0, dst->L.value_bytes);
    if (!st) qtk__write_tail(dst, sc.global, db);
    if (st) {
        qtk_tensor_free(res);
        res = NULL;
    }
    *out = res;
    qtk__scales_free(&sc);
    qtk__free(stats.sum);
    qtk__free(stats.run);
    qtk__free(stats.count);
    qtk__free(alpha);
    qtk__free(seff);
    qtk__free(buf);
    qtk__free(src);
    qtk__free(dst);
    return st;
}
