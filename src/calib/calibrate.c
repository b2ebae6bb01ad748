/* calibrate.c — ranges, raw scales, the two-level split, and the round-up to the scale
 * dtype (SPEC §2 steps 1-5). The per-group arithmetic lives in the kernels'
 * finish_scales (ref.c defines it); this file decides which groups and which global. */
#include "calibrate.h"

#include "../exec/exec.h"

#include <stdio.h>

qtk_status qtk__scales_alloc(const qtk__plan *p, qtk__scales *sc) {
    memset(sc, 0, sizeof *sc);
    sc->n = p->L.n_scales;
    sc->global = 1.0f;
    sc->eff = qtk__malloc((sc->n ? sc->n : 1) * sizeof(float));
    if (!sc->eff) return qtk__err(QTK_E_NOMEM, "out of memory for %zu scales", sc->n);
    return QTK_OK;
}

void qtk__scales_free(qtk__scales *sc) {
    qtk__free(sc->eff);
    memset(sc, 0, sizeof *sc);
}

const char *qtk__index_str(const qtk__plan *p, size_t i, char *buf, size_t cap) {
    size_t c[QTK_MAX_RANK], rem = i;
    for (int d = p->erank - 1; d >= 0; d--) {
        c[d] = p->eshape[d] ? rem % p->eshape[d] : 0;
        rem = p->eshape[d] ? rem / p->eshape[d] : 0;
    }
    /* a position, not a shape: written as a tuple */
    int n = snprintf(buf, cap, "index %zu (coordinates [", i);
    size_t used = n > 0 ? (size_t)n : 0;
    for (int d = 0; d < p->L.rank && used < cap; d++) {
        n = snprintf(buf + used, cap - used, d ? ", %zu" : "%zu", c[d]);
        used += n > 0 ? (size_t)n : 0;
    }
    if (used < cap) snprintf(buf + used, cap - used, "])");
    return buf;
}

qtk_status qtk__nonfinite_error(const qtk__plan *p, float v, size_t bad, const char *what) {
    char ib[256];
    return qtk__err(QTK_E_VALUE, "%s at %s is %s; qtk quantizes finite values only", what,
                    qtk__index_str(p, bad, ib, sizeof ib), v != v ? "NaN" : v > 0 ? "+inf" : "-inf");
}

float qtk__scales_global(const qtk__plan *p, const float *alpha, size_t n) {
    if (!p->two_level) return 1.0f;
    /* division by a positive constant is monotone, so max_i(alpha_i / div) = max_i(alpha_i) / div */
    float m = 0.0f;
    for (size_t i = 0; i < n; i++)
        if (alpha[i] > m) m = alpha[i];
    float g = (m / p->div) / p->dmax;
    const float tiny = 0x1p-126f;
    return g < tiny ? tiny : g;
}

static qtk_status check_eff(const qtk__plan *p, const qtk__scales *sc) {
    if (!p->two_level) return QTK_OK; /* one level: eff is a stored value, finite by construction */
    for (size_t i = 0; i < sc->n; i++)
        if (!qtk__isfinite(sc->eff[i]))
            return qtk__err(QTK_E_VALUE, "effective scale of group %zu overflows f32 (global %g x its block scale)", i,
                            (double)sc->global);
    return QTK_OK;
}

qtk_status qtk__scales_from_alpha(const qtk__plan *p, const float *alpha, uint8_t *dst, qtk__scales *sc) {
    sc->global = qtk__scales_global(p, alpha, sc->n);
    qtk__exec_finish_scales(p, alpha, 0, sc->n, sc->global, dst, sc->eff);
    return check_eff(p, sc);
}

void qtk__absmean_alpha(const qtk__plan *p, const qtk__stats *st, float *alpha) {
    for (size_t i = 0; i < p->L.n_scales; i++)
        alpha[i] = st->count[i] ? (float)((st->sum[i] + st->run[i]) / (double)st->count[i]) : 0.0f;
}

qtk_status qtk__calibrate_alpha(const qtk__plan *p, const float *x, qtk_calibration cal, int threads, float *alpha) {
    size_t n = p->L.n_scales, n1 = n ? n : 1;
    qtk_status st = QTK_OK;
    qtk__stats stats = {.amax = alpha, .bad = SIZE_MAX};
    if (cal == QTK_CALIB_MINMAX) {
        st = qtk__exec_amax(p, x, &stats, threads);
    } else {
        stats.sum = qtk__calloc(n1, sizeof(double));
        stats.run = qtk__calloc(n1, sizeof(double));
        stats.count = qtk__calloc(n1, sizeof(size_t));
        if (!stats.sum || !stats.run || !stats.count) st = qtk__err(QTK_E_NOMEM, "out of memory for %zu scale groups", n);
        if (!st) st = qtk__exec_absmean(p, x, &stats, threads);
        if (!st) qtk__absmean_alpha(p, &stats, alpha);
        qtk__free(stats.sum);
        qtk__free(stats.run);
        qtk__free(stats.count);
    }
    if (!st && stats.bad != SIZE_MAX) st = qtk__nonfinite_error(p, x[stats.bad], stats.bad, "input value");
    return st;
}

qtk_status qtk__scales_calibrate(const qtk__plan *p, const float *x, qtk_calibration cal, int threads, uint8_t *dst,
                                 qtk__scales *sc) {
    size_t n = p->L.n_scales;
    float *alpha = qtk__calloc(n ? n : 1, sizeof(float));
    if (!alpha) return qtk__err(QTK_E_NOMEM, "out of memory for %zu scales", n);
    qtk_status st = qtk__calibrate_alpha(p, x, cal, threads, alpha);
    if (!st) st = qtk__scales_from_alpha(p, alpha, dst, sc);
    qtk__free(alpha);
    return st;
}

qtk_status qtk__scales_given(const qtk__plan *p, const float *scales, size_t n, const float *global, uint8_t *dst,
                             qtk__scales *sc) {
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
    sc->global = g;
    /* given scales start at step 4: round up (away from zero for negative ones) and store */
    unsigned sz = qtk__scale_size(d);
    for (size_t i = 0; i < n; i++) {
        uint32_t c = qtk_fmt_round_up(d, scales[i]);
        qtk__scale_store(d, dst + p->L.scales_offset + i * sz, c);
        float v = qtk_fmt_decode(d, c);
        sc->eff[i] = p->two_level ? g * v : v;
        if (!qtk__isfinite(sc->eff[i]))
            return qtk__err(QTK_E_VALUE,
                            "effective scale of group %zu overflows f32 (global %g x scale %g); no field can be encoded",
                            i, (double)g, (double)v);
    }
    return QTK_OK;
}
