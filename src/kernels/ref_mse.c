/* ref_mse.c — the reference of calibration mse's per-group search (mse.h defines the
 * steps): plain C, one group and one element at a time. These define qtk's bits; the vector
 * levels (simd_mse.h) compute the same. */
#include "mse.h"

#include <stdlib.h>

/* ---- configuration ---- */

/* Trial scale multipliers (of amax / extent), by field width. */
static const float trials8[] = {0.88f, 0.92f, 0.96f, 1.0f};
static const float trials4[] = {0.80f, 0.84f, 0.88f, 0.92f, 0.96f, 1.00f, 1.04f, 1.08f, 1.12f, 1.16f};
static const float trials2[] = {0.55f, 0.65f, 0.75f, 0.85f, 0.95f, 1.05f, 1.15f, 1.25f, 1.35f, 1.5f};
static const float trials_lut[] = {0.84f, 0.92f, 1.00f, 1.08f, 1.16f};
/* e2m1's grid thins out towards 6: mapping a group's largest value near 4 is often better */
static const float trials_e2m1[] = {0.84f, 0.96f, 1.08f, 1.20f, 1.35f, 1.50f};

void qtk__mse_cfg_init(qtk__mse_cfg *c, const qtk__plan *p) {
    memset(c, 0, sizeof *c);
    c->p = p;
    c->dt = p->L.scale_dtype;
    c->sz = qtk__scale_size(c->dt);
    c->signed_dt = c->dt == QTK_DTYPE_F32 || c->dt == QTK_DTYPE_F16 || c->dt == QTK_DTYPE_BF16;
    c->kind = p->lookup ? QTK__MSE_LUT : p->kind == QTK__KIND_INT ? QTK__MSE_INT : QTK__MSE_MF;
    c->lloyd = true;
    c->ls_pair = p->bits == 8; /* 8-bit fields resolve the scale finer than f16's grid step */
    if (c->kind == QTK__MSE_LUT) {
        c->ext_pos = p->tmax > 0.0f ? p->tmax : 0.0f;
        c->ext_neg = p->tmin < 0.0f ? -p->tmin : 0.0f;
        c->zero_value = p->table[p->zero_code];
    } else if (c->kind == QTK__MSE_INT) {
        c->ext_pos = p->hi;
        c->ext_neg = -p->lo;
    } else {
        c->ext_pos = c->ext_neg = p->fmax;
    }
    /* a side with no values: trials on it use the other side's extent */
    if (c->ext_pos == 0.0f) c->ext_pos = c->ext_neg;
    if (c->ext_neg == 0.0f) c->ext_neg = c->ext_pos;
    /* Signs: a value set that is not symmetric (q4f's -8..7, most tables) is used better
     * with the scale's sign chosen per group; unsigned scale dtypes only have +. */
    bool symmetric = c->ext_pos == c->ext_neg;
    if (c->kind == QTK__MSE_LUT && symmetric) {
        for (size_t i = 0; i < p->table_n && symmetric; i++) {
            bool found = false;
            for (size_t k = 0; k < p->table_n && !found; k++) found = p->table[k] == -p->table[i];
            symmetric = found;
        }
    }
    if (!c->signed_dt || symmetric) c->sign = QTK__MSE_SIGN_POS;
    else if (c->kind == QTK__MSE_LUT) c->sign = QTK__MSE_SIGN_BOTH;
    else {
        c->sign = QTK__MSE_SIGN_MAX;
        c->sign_max = c->ext_neg > c->ext_pos ? -1.0f : 1.0f;
    }
    c->grid = c->dt == QTK_DTYPE_UE8M0 || c->dt == QTK_DTYPE_UE4M3;
    if (c->dt == QTK_DTYPE_UE8M0) {
        c->n_grid = 1; /* MX: the exponent rounded up, or one down */
        c->grid_off[0] = -1;
        c->grid_max = 254;
    } else {
        /* ue4m3, 8 codes an octave: the codes at these offsets from c0 hold the best code for
         * nearly every group of Gaussian, heavy-tailed and trained weights (docs/quantizers.md).
         * e2m1's grid thins out towards 6, so mapping a group's largest value near 4 (+3..+5)
         * is often better. Below 2^-5 (codes < 16, subnormals near) the codes are sparser:
         * there the candidates are the codes nearest to c0's raw scale x 2^(offset / 8). */
        static const int off_e2m1[] = {-1, -2, 3, 4, 5};
        static const int off_4[] = {-1, -2, 1, -3, 2};
        static const int off_8[] = {-1, 1};
        const int *off = p->bits == 8 ? off_8 : c->kind == QTK__MSE_MF ? off_e2m1 : off_4;
        c->n_grid = p->bits == 8 ? 2 : 5;
        memcpy(c->grid_off, off, (size_t)c->n_grid * sizeof *off);
        /* 2^(k/8), k = -3..5, as literals: no libm function decides a bit */
        static const float pow8[] = {0.77110541f, 0.84089642f, 0.91700404f, 1.0f,       1.09050773f,
                                     1.18920712f, 1.29683955f, 1.41421356f, 1.54221083f};
        for (int i = 0; i < c->n_grid; i++) c->grid_f[i] = pow8[off[i] + 3];
        c->grid_max = 0x7e;
    }
    const float *t = trials4;
    size_t nt = sizeof trials4 / sizeof *t;
    if (p->bits == 8) t = trials8, nt = sizeof trials8 / sizeof *t;
    else if (p->bits == 2) t = trials2, nt = sizeof trials2 / sizeof *t;
    else if (c->kind == QTK__MSE_MF) t = trials_e2m1, nt = sizeof trials_e2m1 / sizeof *t;
    else if (c->kind == QTK__MSE_LUT) t = trials_lut, nt = sizeof trials_lut / sizeof *t; /* x 2 signs */
    c->n_trials = (int)nt;
    memcpy(c->trial, t, nt * sizeof *t);
    c->ternary = !p->lookup && p->s.value == QTK_VALUE_Q2S;
    if (c->ternary) c->ls_pair = true; /* the exact scale: both neighbours */
}

/* ---- one group ---- */

typedef struct {
    float err, sxv, svv;
} score;


/* The exact error (and least-squares sums) of scale en over normalised values. */
static score exact(const qtk__mse_cfg *c, const float *xn, const float *w, size_t n, float en) {
    score s = {0, 0, 0};
    if (!qtk__isfinite(en)) {
        s.err = INFINITY;
        return s;
    }
    for (size_t j = 0; j < n; j++) {
        float v, d;
        if (en == 0.0f) {
            v = c->zero_value;
            d = xn[j];
        } else {
            v = qtk__mse_value_exact(c, xn[j] / en);
            d = xn[j] - v * en;
        }
        float t = d * d;
        if (w) {
            s.err = fmaf(w[j], t, s.err);
            s.sxv = fmaf(w[j] * xn[j], v, s.sxv);
            s.svv = fmaf(w[j] * v, v, s.svv);
        } else {
            s.err += t;
            s.sxv = fmaf(xn[j], v, s.sxv);
            s.svv = fmaf(v, v, s.svv);
        }
    }
    return s;
}

typedef struct {
    uint32_t code;
    float eff, adj;
    score sc;
} choice;

/* Scores code; takes it if it beats the current choice (see mse.h step 4). */
static void consider(const qtk__mse_cfg *c, const float *xn, const float *w, size_t n, float g, float m,
                     uint32_t code, choice *best) {
    float eff = qtk__mse_eff(c, code, g);
    score s = exact(c, xn, w, n, eff * m);
    float adj = s.err * (1.0f + QTK__MSE_MARGIN);
    if (adj < best->adj) {
        best->code = code;
        best->eff = eff;
        best->adj = adj;
        best->sc = s;
    }
}

static void consider_ls(const qtk__mse_cfg *c, const float *xn, const float *w, size_t n, float g, float m, float r,
                        choice *best) {
    float s = r / m;
    if (c->p->two_level) s = s / g;
    s = qtk__mse_clamp(s);
    if (!c->ls_pair) {
        consider(c, xn, w, n, g, m, qtk__mse_code_nearest(c, s), best);
        return;
    }
    uint32_t lo = qtk__mse_code_floor(c, s), hi = qtk__mse_code_ceil(c, s);
    consider(c, xn, w, n, g, m, lo, best);
    consider(c, xn, w, n, g, m, hi, best);
}

/* A group holding a non-finite value: effective scale NaN (the caller reports the input). */
static void nonfinite(const qtk__mse_cfg *c, uint32_t *code, float *eff, double *err) {
    *code = qtk_fmt_round_up(c->dt, 0.0f);
    *eff = qtk__bits_f32(0x7fc00000u);
    if (err) *err = 0.0;
}

static void search_group(const qtk__mse_cfg *c, const float *x, const float *w, size_t n, float g, float *xn,
                         float *wx, uint32_t *code, float *eff, double *err) {
    const qtk__plan *p = c->p;
    float amax = 0.0f, smax = 1.0f;
    for (size_t j = 0; j < n; j++) {
        float a = fabsf(x[j]);
        if (!qtk__isfinite(a)) {
            nonfinite(c, code, eff, err);
            return;
        }
        if (a > amax) {
            amax = a;
            smax = x[j] < 0.0f ? -1.0f : 1.0f;
        }
    }
    float raw = amax / p->div;
    if (p->two_level) raw = raw / g;
    choice best;
    best.code = qtk_fmt_round_up(c->dt, raw);
    best.eff = qtk__mse_eff(c, best.code, g);
    if (amax == 0.0f) {
        *code = best.code;
        *eff = best.eff;
        if (err) *err = 0.0;
        return;
    }
    float m = qtk__mse_norm(amax), an = amax * m;
    for (size_t j = 0; j < n; j++) {
        xn[j] = x[j] * m;
        if (w) wx[j] = w[j] * xn[j];
    }
    best.sc = exact(c, xn, w, n, best.eff * m);
    best.adj = best.sc.err;
    uint32_t c0 = best.code;
    if (c->grid) {
        for (int i = 0; i < c->n_grid; i++) {
            uint32_t ci;
            if (c->dt == QTK_DTYPE_UE8M0 || c0 >= 16) {
                int64_t k = (int64_t)c0 + c->grid_off[i];
                ci = (uint32_t)(k < 0 ? 0 : k > c->grid_max ? c->grid_max : k);
            } else {
                ci = qtk__mse_code_nearest(c, qtk__mse_clamp(raw * c->grid_f[i]));
            }
            consider(c, xn, w, n, g, m, ci, &best);
        }
    } else {
        float best_score = 0.0f, best_r = 0.0f;
        int nsign = c->sign == QTK__MSE_SIGN_BOTH ? 2 : 1;
        for (int si = 0; si < nsign; si++) {
            float sg = c->sign == QTK__MSE_SIGN_POS ? 1.0f : c->sign == QTK__MSE_SIGN_MAX ? c->sign_max * smax
                                                                                          : si == 0 ? 1.0f : -1.0f;
            float ext = sg * smax > 0.0f ? c->ext_pos : c->ext_neg;
            for (int t = 0; t < c->n_trials; t++) {
                float inv = (sg * ext) / (an * c->trial[t]);
                float sxv = 0.0f, svv = 0.0f;
                for (size_t j = 0; j < n; j++) {
                    float v = qtk__mse_value_trial(c, xn[j] * inv);
                    if (w) {
                        sxv = fmaf(wx[j], v, sxv);
                        svv = fmaf(w[j] * v, v, svv);
                    } else {
                        sxv = fmaf(xn[j], v, sxv);
                        svv = fmaf(v, v, svv);
                    }
                }
                float r = 0.0f, sc = 0.0f;
                if (svv > 0.0f) {
                    r = sxv / svv;
                    sc = sxv * r;
                }
                if (sc > best_score) {
                    best_score = sc;
                    best_r = r;
                }
            }
        }
        consider_ls(c, xn, w, n, g, m, best_r, &best);
        if (c->lloyd) {
            float r2 = best.sc.svv > 0.0f ? best.sc.sxv / best.sc.svv : 0.0f;
            consider_ls(c, xn, w, n, g, m, r2, &best);
        }
    }
    *code = best.code;
    *eff = best.eff;
    if (err) *err = (double)best.sc.err / ((double)m * (double)m);
}

/* ---- ternary: the exact search ---- */

typedef struct {
    float a, w;
    uint32_t i;
} tern_item;
_Static_assert(sizeof(tern_item) == QTK__MSE_TERN_ITEM, "ternary scratch item");

static int tern_cmp(const void *pa, const void *pb) {
    const tern_item *a = pa, *b = pb;
    if (a->a != b->a) return a->a > b->a ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

double qtk__mse_ternary_scale(const float *x, const float *w, size_t wperiod, size_t n, void *scratch) {
    tern_item *it = scratch;
    for (size_t j = 0; j < n; j++) {
        it[j].a = fabsf(x[j]);
        it[j].w = w ? w[j % wperiod] : 1.0f;
        it[j].i = (uint32_t)j;
    }
    qsort(it, n, sizeof *it, tern_cmp);
    double S = 0, W = 0, best = -1, s = 0;
    for (size_t k = 0; k < n; k++) {
        S += (double)it[k].w * it[k].a;
        W += it[k].w;
        if (W > 0 && S * S / W > best) {
            best = S * S / W;
            s = S / W;
        }
    }
    return s;
}

static void search_ternary(const qtk__mse_cfg *c, const float *x, const float *w, size_t n, float g, float *xn,
                           uint32_t *code, float *eff, double *err) {
    const qtk__plan *p = c->p;
    float amax = 0.0f;
    for (size_t j = 0; j < n; j++) {
        if (!qtk__isfinite(x[j])) {
            nonfinite(c, code, eff, err);
            return;
        }
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]);
    }
    float raw = amax / p->div;
    if (p->two_level) raw = raw / g;
    choice best;
    best.code = qtk_fmt_round_up(c->dt, raw);
    best.eff = qtk__mse_eff(c, best.code, g);
    if (amax == 0.0f) {
        *code = best.code;
        *eff = best.eff;
        if (err) *err = 0.0;
        return;
    }
    float m = qtk__mse_norm(amax);
    for (size_t j = 0; j < n; j++) xn[j] = x[j] * m;
    best.sc = exact(c, xn, w, n, best.eff * m);
    best.adj = best.sc.err;
    tern_item items[QTK__MSE_LANE_MAX];
    float s = (float)qtk__mse_ternary_scale(xn, w, n, n, items);
    consider_ls(c, xn, w, n, g, m, s, &best);
    *code = best.code;
    *eff = best.eff;
    if (err) *err = (double)best.sc.err / ((double)m * (double)m);
}

void qtk__ref_mse_groups(const qtk__mse_cfg *c, const qtk__mse_src *src, size_t n, float g, uint8_t *codes,
                         float *eff, double *err) {
    float xn[QTK__MSE_LANE_MAX], wx[QTK__MSE_LANE_MAX];
    for (size_t i = 0; i < n; i++) {
        uint32_t code;
        if (c->ternary) search_ternary(c, src[i].x, src[i].w, src[i].len, g, xn, &code, eff + i, err ? err + i : NULL);
        else search_group(c, src[i].x, src[i].w, src[i].len, g, xn, wx, &code, eff + i, err ? err + i : NULL);
        qtk__scale_store(c->dt, codes + i * c->sz, code);
    }
}
