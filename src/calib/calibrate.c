/* calibrate.c — ranges, raw scales, the two-level split, and the round-up to the scale
 * dtype (SPEC §2 steps 1-5). */
#include "calibrate.h"

#include "../exec/exec.h"

#include <stdio.h>

void qtk__scales_free(qtk__scales *sc) {
    qtk__free(sc->stored);
    qtk__free(sc->codes);
    qtk__free(sc->eff);
    memset(sc, 0, sizeof *sc);
}

const char *qtk__index_str(const qtk__plan *p, size_t i, char *buf, size_t cap) {
    size_t c[QTK_MAX_RANK], rem = i;
    for (int d = p->erank - 1; d >= 0; d--) {
        c[d] = p->eshape[d] ? rem % p->eshape[d] : 0;
        rem = p->eshape[d] ? rem / p->eshape[d] : 0;
    }
    char cs[200];
    qtk__shape_str(c, p->L.rank, cs, sizeof cs);
    snprintf(buf, cap, "index %zu (coordinates %s)", i, cs);
    return buf;
}

static qtk_status nonfinite_error(const qtk__plan *p, const float *x, size_t bad) {
    char ib[256];
    float v = x[bad];
    return qtk__err(QTK_E_VALUE, "input value at %s is %s; qtk quantizes finite values only",
                    qtk__index_str(p, bad, ib, sizeof ib), v != v ? "NaN" : v > 0 ? "+inf" : "-inf");
}

void qtk__scales_from_alpha(const qtk__plan *p, const float *alpha, float *raw, float *global) {
    size_t n = p->L.n_scales;
    float div;
    if (p->lookup) {
        float a = fabsf(p->tmin), b = fabsf(p->tmax);
        div = a > b ? a : b;
    } else {
        div = p->vi->half_range; /* (b - a) / 2, exact: alpha / div == 2 alpha / (b - a) */
    }
    for (size_t i = 0; i < n; i++) raw[i] = alpha[i] / div;
    *global = 1.0f;
    if (p->two_level) {
        float dmax = qtk_fmt_max(p->s.block_dtype), m = 0.0f;
        for (size_t i = 0; i < n; i++)
            if (raw[i] > m) m = raw[i];
        float g = m / dmax;
        const float tiny = 0x1p-126f;
        if (g < tiny) g = tiny;
        for (size_t i = 0; i < n; i++) raw[i] = raw[i] / g;
        *global = g;
    }
}

qtk_status qtk__scales_finish(const qtk__plan *p, const float *raw, float global, qtk__scales *out) {
    size_t n = p->L.n_scales;
    memset(out, 0, sizeof *out);
    out->n = n;
    out->global = global;
    out->stored = qtk__malloc(n * sizeof(float));
    out->eff = qtk__malloc(n * sizeof(float));
    out->codes = qtk__malloc(n * sizeof(uint32_t));
    if (!out->stored || !out->eff || !out->codes) {
        qtk__scales_free(out);
        return qtk__err(QTK_E_NOMEM, "out of memory for %zu scales", n);
    }
    qtk_dtype d = p->L.scale_dtype;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = qtk_fmt_round_up(d, raw[i]);
        out->codes[i] = c;
        out->stored[i] = qtk_fmt_decode(d, c);
        float e = p->two_level ? global * out->stored[i] : out->stored[i];
        if (!qtk__isfinite(e)) {
            qtk__scales_free(out);
            return qtk__err(QTK_E_VALUE,
                            "effective scale of group %zu overflows f32 (global %g x scale %g); no field can be encoded",
                            i, (double)global, (double)qtk_fmt_decode(d, c));
        }
        out->eff[i] = e;
    }
    return QTK_OK;
}

qtk_status qtk__scales_calibrate(const qtk__plan *p, const float *x, qtk_calibration cal, int threads,
                                 qtk__scales *out) {
    size_t n = p->L.n_scales;
    if (cal != QTK_CALIB_MINMAX && cal != QTK_CALIB_ABSMEAN)
        return qtk__err(QTK_E_ARG, "calibration %d is not a qtk_calibration", (int)cal);
    if (cal == QTK_CALIB_ABSMEAN && p->two_level)
        return qtk__err(QTK_E_SCHEME, "absmean calibration is not defined for two-level schemes (use minmax)");
    if (p->lookup && p->tmin == 0.0f && p->tmax == 0.0f)
        return qtk__err(QTK_E_SCHEME, "table '%s' has no non-zero entry: no scale can map values onto it", p->s.table);
    float *alpha = qtk__calloc(n ? n : 1, sizeof(float));
    float *raw = qtk__malloc((n ? n : 1) * sizeof(float));
    if (!alpha || !raw) {
        qtk__free(alpha);
        qtk__free(raw);
        return qtk__err(QTK_E_NOMEM, "out of memory for %zu scales", n);
    }
    qtk_status st = QTK_OK;
    qtk__stats stats = {.amax = alpha, .bad = SIZE_MAX};
    if (cal == QTK_CALIB_MINMAX) {
        st = qtk__exec_amax(p, x, &stats, threads);
    } else {
        stats.sum = qtk__calloc(n ? n : 1, sizeof(double));
        stats.run = qtk__calloc(n ? n : 1, sizeof(double));
        stats.count = qtk__calloc(n ? n : 1, sizeof(size_t));
        if (!stats.sum || !stats.run || !stats.count) {
            st = qtk__err(QTK_E_NOMEM, "out of memory for %zu scale groups", n);
        } else {
            qtk__ref_absmean_rows(p, x, &stats, 0, p->rows);
            for (size_t i = 0; i < n; i++)
                alpha[i] = stats.count[i] ? (float)((stats.sum[i] + stats.run[i]) / (double)stats.count[i]) : 0.0f;
        }
        qtk__free(stats.sum);
        qtk__free(stats.run);
        qtk__free(stats.count);
    }
    if (!st && stats.bad != SIZE_MAX) st = nonfinite_error(p, x, stats.bad);
    float global = 1.0f;
    if (!st) {
        qtk__scales_from_alpha(p, alpha, raw, &global);
        st = qtk__scales_finish(p, raw, global, out);
    }
    qtk__free(alpha);
    qtk__free(raw);
    return st;
}

qtk_status qtk__scales_given(const qtk__plan *p, const float *scales, size_t n, const float *global,
                             qtk__scales *out) {
    if (!scales) return qtk__err(QTK_E_ARG, "given scales are NULL");
    if (n != p->L.n_scales)
        return qtk__err(QTK_E_LENGTH, "%zu scales given; the scheme and shape have %zu scale groups", n,
                        p->L.n_scales);
    if (p->two_level && !global)
        return qtk__err(QTK_E_ARG, "two-level scheme: given scales need a global scale too");
    if (!p->two_level && global)
        return qtk__err(QTK_E_ARG, "a global scale was given but the scheme is not two-level");
    qtk_dtype d = p->L.scale_dtype;
    bool unsigned_dt = d == QTK_DTYPE_UE8M0 || d == QTK_DTYPE_UE4M3;
    for (size_t i = 0; i < n; i++) {
        if (!qtk__isfinite(scales[i]))
            return qtk__err(QTK_E_VALUE, "given scale %zu is %s; scales must be finite", i,
                            scales[i] != scales[i] ? "NaN" : "infinite");
        if (unsigned_dt && scales[i] < 0.0f)
            return qtk__err(QTK_E_VALUE, "given scale %zu is %g but %s scales are unsigned", i, (double)scales[i],
                            qtk_dtype_name(d));
    }
    float g = 1.0f;
    if (global) {
        if (!qtk__isfinite(*global))
            return qtk__err(QTK_E_VALUE, "given global scale is %s; it must be finite",
                            *global != *global ? "NaN" : "infinite");
        g = *global;
    }
    return qtk__scales_finish(p, scales, g, out);
}
