/* convert.c — re-quantizing a tensor under another scheme, one slab of rows at a time.
 *
 * The result is defined as quantize(dequantize(t)). Materializing dequantize(t) would
 * cost 4 bytes per element; instead the source is dequantized twice, a slab at a time:
 * once to calibrate the target's scales, once to encode its fields. Both passes visit
 * rows in order, so every statistic (max, and absmean's ordered sums) is exactly what a
 * whole-tensor pass computes. */
#include "tensor_internal.h"

#include "../exec/exec.h"

#include <stdio.h>

#define SLAB_ELEMS (1u << 16)

qtk_status qtk_convert(const qtk_tensor *t, const qtk_scheme *s, const qtk_quantize_options *opts, qtk_tensor **out) {
    if (!t || !out) return qtk__err(QTK_E_ARG, "qtk_convert: NULL argument");
    *out = NULL;
    const qtk_layout *sl = qtk_tensor_layout(t);
    size_t len;
    const uint8_t *sb = qtk_tensor_bytes(t, &len);
    qtk_quantize_options o = opts ? *opts : (qtk_quantize_options){0};

    qtk__plan *src = qtk__malloc(sizeof *src), *dst = qtk__malloc(sizeof *dst);
    float *seff = NULL, *buf = NULL, *alpha = NULL, *raw = NULL;
    qtk__stats stats = {.bad = SIZE_MAX};
    qtk__scales sc = {0};
    qtk_tensor *res = NULL;
    qtk_status st = (!src || !dst) ? qtk__err(QTK_E_NOMEM, "out of memory") : QTK_OK;
    if (!st) st = qtk__bytes_plan(sb, len, sl->shape, sl->rank, qtk_tensor_scheme(t), src);
    if (!st) st = qtk__plan_init(dst, s, sl->shape, sl->rank, NULL);
    if (!st && o.calibration == QTK_CALIB_ABSMEAN && dst->two_level)
        st = qtk__err(QTK_E_SCHEME, "absmean calibration is not defined for two-level schemes (use minmax)");
    if (!st && o.calibration != QTK_CALIB_MINMAX && o.calibration != QTK_CALIB_ABSMEAN)
        st = qtk__err(QTK_E_ARG, "calibration %d is not a qtk_calibration", (int)o.calibration);
    if (!st && o.global && !o.scales) st = qtk__err(QTK_E_ARG, "a global scale was given without block scales");
    if (!st && dst->lookup && dst->tmin == 0.0f && dst->tmax == 0.0f)
        st = qtk__err(QTK_E_SCHEME, "table '%s' has no non-zero entry", dst->s.table);
    size_t slab_rows = 1, ns = 1;
    if (!st) {
        slab_rows = src->inner && SLAB_ELEMS / src->inner ? SLAB_ELEMS / src->inner : 1;
        ns = dst->L.n_scales ? dst->L.n_scales : 1;
        seff = qtk__malloc((src->L.n_scales ? src->L.n_scales : 1) * sizeof(float));
        size_t slab_elems = slab_rows * src->inner;
        buf = qtk__malloc((slab_elems > 0 ? slab_elems : 1) * sizeof(float));
        if (!seff || !buf) st = qtk__err(QTK_E_NOMEM, "out of memory for a %zu-row slab", slab_rows);
    }
    if (!st) st = qtk__bytes_scales(src, sb, seff, NULL);

    /* pass 1: target scales */
    if (!st && o.scales) {
        st = qtk__scales_given(dst, o.scales, o.n_scales, o.global, &sc);
    } else if (!st) {
        alpha = qtk__calloc(ns, sizeof(float));
        raw = qtk__malloc(ns * sizeof(float));
        stats.amax = alpha;
        if (o.calibration == QTK_CALIB_ABSMEAN) {
            stats.sum = qtk__calloc(ns, sizeof(double));
            stats.run = qtk__calloc(ns, sizeof(double));
            stats.count = qtk__calloc(ns, sizeof(size_t));
        }
        if (!alpha || !raw || (o.calibration == QTK_CALIB_ABSMEAN && (!stats.sum || !stats.run || !stats.count)))
            st = qtk__err(QTK_E_NOMEM, "out of memory for %zu scale groups", ns);
        for (size_t r0 = 0; !st && r0 < src->rows; r0 += slab_rows) {
            size_t r1 = r0 + slab_rows < src->rows ? r0 + slab_rows : src->rows;
            st = qtk__exec_decode_rows(src, sb, seff, buf, r0, r1);
            if (st) break;
            if (o.calibration == QTK_CALIB_ABSMEAN)
                qtk__ref_absmean_rows(dst, buf, &stats, r0, r1);
            else
                qtk__exec_amax_rows(dst, buf, &stats, r0, r1);
        }
        if (!st && stats.bad != SIZE_MAX) {
            char ib[256];
            st = qtk__err(QTK_E_VALUE, "source element at %s dequantizes to a non-finite value",
                          qtk__index_str(dst, stats.bad, ib, sizeof ib));
        }
        if (!st) {
            if (o.calibration == QTK_CALIB_ABSMEAN)
                for (size_t i = 0; i < dst->L.n_scales; i++)
                    alpha[i] = stats.count[i] ? (float)((stats.sum[i] + stats.run[i]) / (double)stats.count[i]) : 0.0f;
            float g;
            qtk__scales_from_alpha(dst, alpha, raw, &g);
            st = qtk__scales_finish(dst, raw, g, &sc);
        }
    }

    /* pass 2: fields */
    if (!st) {
        st = qtk__tensor_new(&dst->s, &dst->L, &res);
    }
    if (!st) {
        uint8_t *db = qtk__tensor_mutable_bytes(res);
        memset(db, 0, dst->L.value_bytes);
        for (size_t r0 = 0; !st && r0 < src->rows; r0 += slab_rows) {
            size_t r1 = r0 + slab_rows < src->rows ? r0 + slab_rows : src->rows;
            st = qtk__exec_decode_rows(src, sb, seff, buf, r0, r1);
            if (!st && o.scales) {
                size_t bad = qtk__ref_first_nonfinite(buf, (r1 - r0) * src->inner);
                if (bad != SIZE_MAX) {
                    char ib[256];
                    st = qtk__err(QTK_E_VALUE, "source element at %s dequantizes to a non-finite value",
                                  qtk__index_str(dst, r0 * src->inner + bad, ib, sizeof ib));
                }
            }
            if (!st) st = qtk__exec_encode_rows(dst, buf, sc.eff, db, r0, r1);
        }
        if (!st) qtk__write_tail(dst, &sc, db);
    }
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
    qtk__free(raw);
    qtk__free(seff);
    qtk__free(buf);
    qtk__free(src);
    qtk__free(dst);
    return st;
}
