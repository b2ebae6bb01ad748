/* gb_quant.c — quantizers for ggml's block structs (docs/quantizers.md, "Affine and ggml's
 * formats"). One block at a time, in plain scalar C: the bytes depend on nothing but the
 * block's values and weights, so they are the same on every kernel level and thread count.
 *
 * minmax: the closed form — per group the range [min(x, 0), max x] (symmetric formats:
 *   max |x|) onto the field range, the f16 scales rounded up so that every range is covered.
 * mse: per group, a search for the continuous scale (and min) of least weighted squared
 *   error (trial scales, each refined by least squares and re-rounded); then the block's f16
 *   scales from those, and each group's integer sub-scale (and sub-min) searched on the final
 *   grid with the fields nearest; a few f16 super-scales are tried and the best kept. Every
 *   candidate is scored by the exact error of the values the decoder gives. The minmax block
 *   is always a candidate, so mse is never worse than minmax on any block. */
#include "gblock.h"

#include <float.h>
#include <math.h>

typedef struct {
    const float *x, *w; /* w: NULL = all 1 */
    int n;
} grp;

static inline float wt(const grp *g, int i) { return g->w ? g->w[i] : 1.0f; }

/* ---- exact errors of candidate parameters (the decoder's values) ---- */

/* Affine: value fl(S q + O) with q in [0, Q] nearest (S > 0); 0 codes when S == 0. */
static double eval_affine(const grp *g, float S, float O, int Q, int8_t *q) {
    double e = 0.0;
    float inv = S > 0.0f ? 1.0f / S : 0.0f;
    for (int i = 0; i < g->n; i++) {
        float x = g->x[i];
        int c = 0;
        if (S > 0.0f) {
            float t = (x - O) * inv;
            c = t <= 0.0f ? 0 : t >= (float)Q ? Q : (int)(t + 0.5f);
            /* the nearest of c - 1, c, c + 1 by the decoder's value (the reciprocal may be off
             * by one on a near tie) */
            float v = S * (float)c + O, best = fabsf(x - v);
            if (c > 0) {
                float v1 = S * (float)(c - 1) + O;
                if (fabsf(x - v1) < best) best = fabsf(x - v1), c = c - 1;
            }
            if (c < Q) {
                float v1 = S * (float)(c + 1) + O;
                if (fabsf(x - v1) < best) c = c + 1;
            }
        }
        float t = S * (float)c, v = t + O, d = x - v;
        e += (double)wt(g, i) * (double)d * (double)d;
        if (q) q[i] = (int8_t)c;
    }
    return e;
}

/* Symmetric: value S q with q in [lo, hi] nearest (S of either sign). */
static double eval_sym(const grp *g, float S, int lo, int hi, int8_t *q) {
    double e = 0.0;
    float inv = S != 0.0f ? 1.0f / S : 0.0f;
    for (int i = 0; i < g->n; i++) {
        float x = g->x[i];
        int c = 0;
        if (S != 0.0f) {
            float t = x * inv;
            c = t <= (float)lo ? lo : t >= (float)hi ? hi : (int)lrintf(t);
            float best = fabsf(x - S * (float)c);
            if (c > lo && fabsf(x - S * (float)(c - 1)) < best) best = fabsf(x - S * (float)(c - 1)), c = c - 1;
            if (c < hi && fabsf(x - S * (float)(c + 1)) < best) c = c + 1;
        }
        float d = x - S * (float)c;
        e += (double)wt(g, i) * (double)d * (double)d;
        if (q) q[i] = (int8_t)c;
    }
    return e;
}

/* ---- continuous fits of one group ---- */

/* Weighted least squares of x ~ a q + c over fixed codes; c <= 0 when `neg` (the K-quants'
 * min is stored as a non-negative dmin x mn). Returns false when the codes do not determine a
 * positive scale. */
static bool lsq_affine(const grp *g, const int8_t *q, bool neg, float *a, float *c) {
    double sw = 0, sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int i = 0; i < g->n; i++) {
        double w = wt(g, i), qi = q[i], x = g->x[i];
        sw += w, sq += w * qi, sqq += w * qi * qi, sx += w * x, sqx += w * qi * x;
    }
    double D = sw * sqq - sq * sq;
    if (!(D > 0.0)) return false;
    double A = (sw * sqx - sq * sx) / D, C = (sqq * sx - sq * sqx) / D;
    if (neg && C > 0.0) {
        C = 0.0;
        A = sqq > 0.0 ? sqx / sqq : 0.0;
    }
    if (!(A > 0.0) || !isfinite(A) || !isfinite(C)) return false;
    *a = (float)A, *c = (float)C;
    return true;
}

/* The continuous (a > 0, c) of least error for x ~ a q + c, q in [0, Q]: trial scales
 * (Q + f) / (hi - lo) around the range's, each with up to three rounds of least squares and
 * re-rounding. */
static double fit_affine(const grp *g, int Q, bool neg, float *a_out, float *c_out) {
    float lo = g->x[0], hi = g->x[0];
    for (int i = 1; i < g->n; i++) lo = g->x[i] < lo ? g->x[i] : lo, hi = g->x[i] > hi ? g->x[i] : hi;
    if (neg && lo > 0.0f) lo = 0.0f;
    if (!(hi > lo)) {
        *a_out = 0.0f, *c_out = lo;
        return 0.0;
    }
    int8_t q[QTK__GB_QK_MAX];
    float ba = (hi - lo) / (float)Q, bc = lo;
    double best = eval_affine(g, ba, bc, Q, NULL);
    for (int t = 0; t <= 24; t++) {
        float f = -1.2f + 0.1f * (float)t;
        float a = (hi - lo) / ((float)Q + f), c = lo;
        if (!(a > 0.0f)) continue;
        for (int it = 0; it < 3; it++) {
            double e = eval_affine(g, a, c, Q, q);
            if (e < best) best = e, ba = a, bc = c;
            float a2, c2;
            if (!lsq_affine(g, q, neg, &a2, &c2) || (a2 == a && c2 == c)) break;
            a = a2, c = c2;
        }
        double e = eval_affine(g, a, c, Q, NULL);
        if (e < best) best = e, ba = a, bc = c;
    }
    *a_out = ba, *c_out = bc;
    return best;
}

/* The continuous scale s (either sign when the range is not symmetric) of least error for
 * x ~ s q, q in [lo, hi]. */
static double fit_sym(const grp *g, int lo, int hi, float *s_out) {
    float amax = 0.0f, xm = 0.0f;
    for (int i = 0; i < g->n; i++)
        if (fabsf(g->x[i]) > amax) amax = fabsf(g->x[i]), xm = g->x[i];
    if (amax == 0.0f) {
        *s_out = 0.0f;
        return 0.0;
    }
    int8_t q[QTK__GB_QK_MAX];
    float bs = amax / (float)hi;
    double best = eval_sym(g, bs, lo, hi, NULL);
    for (int sgn = 0; sgn < 2; sgn++) {
        /* sgn 1: the largest magnitude on the longer, negative side (scale sign opposite to it) */
        float ext = sgn ? (float)-lo : (float)hi;
        if (sgn && lo == -hi) break;
        for (int t = 0; t <= 20; t++) {
            float f = -1.0f + 0.1f * (float)t;
            float s = amax / (ext + f);
            if (!(s > 0.0f)) continue;
            if (sgn) s = xm > 0.0f ? -s : s;
            else s = xm < 0.0f ? -s : s;
            for (int it = 0; it < 3; it++) {
                double e = eval_sym(g, s, lo, hi, q);
                if (e < best) best = e, bs = s;
                double sqx = 0, sqq = 0;
                for (int i = 0; i < g->n; i++) {
                    double w = wt(g, i);
                    sqx += w * q[i] * g->x[i], sqq += w * q[i] * q[i];
                }
                if (!(sqq > 0.0)) break;
                float s2 = (float)(sqx / sqq);
                if (s2 == s || s2 == 0.0f) break;
                s = s2;
            }
        }
    }
    *s_out = bs;
    return best;
}

/* ---- f16 helpers ---- */

static uint16_t f16_up(float v) { return (uint16_t)qtk_fmt_round_up(QTK_DTYPE_F16, v); }
static uint16_t f16_near(float v) { return qtk__f32_to_f16(v); }
static float f16v(uint16_t h) { return qtk__f16_to_f32(h); }

/* ---- minmax ---- */

static void minmax_block(const qtk__gb_fmt *F, const float *x, qtk__gb_unpacked *u) {
    const unsigned G = F->groups, n = F->sub;
    const int Q = F->qhi;
    memset(u, 0, sizeof *u);
    if (!F->super) {
        if (F->affine) { /* Q4_1, Q5_1: m = min, d = (max - m) / Q rounded up */
            float lo = x[0], hi = x[0];
            for (unsigned i = 1; i < n; i++) lo = x[i] < lo ? x[i] : lo, hi = x[i] > hi ? x[i] : hi;
            u->m = f16_near(lo);
            float m = f16v(u->m), r = (hi - m) / (float)Q;
            u->d = f16_up(r > 0.0f ? r : 0.0f);
            grp g = {x, NULL, (int)n};
            eval_affine(&g, f16v(u->d), m, Q, u->q);
        } else { /* Q5_0: d = 2 amax / 31 rounded up */
            float amax = 0.0f;
            for (unsigned i = 0; i < n; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
            u->d = f16_up(2.0f * amax / (float)(F->qhi - F->qlo));
            grp g = {x, NULL, (int)n};
            eval_sym(&g, f16v(u->d), F->qlo, F->qhi, u->q);
        }
        return;
    }
    float r[QTK__GB_GROUPS_MAX], mneed[QTK__GB_GROUPS_MAX], rmax = 0.0f, mmax = 0.0f;
    for (unsigned s = 0; s < G; s++) {
        const float *xs = x + s * n;
        float lo = 0.0f, hi = xs[0], amax = 0.0f;
        for (unsigned i = 0; i < n; i++) {
            lo = xs[i] < lo ? xs[i] : lo, hi = xs[i] > hi ? xs[i] : hi;
            amax = fabsf(xs[i]) > amax ? fabsf(xs[i]) : amax;
        }
        if (F->affine) r[s] = (hi - lo) / (float)Q, mneed[s] = -lo;
        else r[s] = 2.0f * amax / (float)(F->qhi - F->qlo), mneed[s] = 0.0f;
        rmax = r[s] > rmax ? r[s] : rmax;
        mmax = mneed[s] > mmax ? mneed[s] : mmax;
    }
    u->d = f16_up(rmax / (float)F->schi);
    u->m = F->affine ? f16_up(mmax / (float)F->mnhi) : 0;
    float d = f16v(u->d), dm = f16v(u->m);
    for (unsigned s = 0; s < G; s++) {
        grp g = {x + s * n, NULL, (int)n};
        if (F->affine) {
            float mq = dm > 0.0f ? ceilf(mneed[s] / dm) : 0.0f;
            u->mn[s] = (uint8_t)(mq > (float)F->mnhi ? F->mnhi : mq);
            float B = dm * (float)u->mn[s];
            float need = d > 0.0f ? ceilf((r[s] * (float)Q - mneed[s] + B) / ((float)Q * d)) : 0.0f;
            u->sc[s] = (int8_t)(need > (float)F->schi ? F->schi : need < 0.0f ? 0.0f : need);
            eval_affine(&g, d * (float)u->sc[s], -B, Q, u->q + s * n);
        } else {
            float need = d > 0.0f ? ceilf(r[s] / d) : 0.0f;
            u->sc[s] = (int8_t)(need > (float)F->schi ? F->schi : need);
            eval_sym(&g, d * (float)u->sc[s], F->qlo, F->qhi, u->q + s * n);
        }
    }
}

/* ---- mse ---- */

/* The exact error of an unpacked block. */
static double block_error(const qtk__gb_fmt *F, const float *x, const float *w, const qtk__gb_unpacked *u) {
    float S[QTK__GB_GROUPS_MAX], O[QTK__GB_GROUPS_MAX];
    qtk__gb_params(F, u, S, O);
    double e = 0.0;
    for (unsigned i = 0; i < F->qk; i++) {
        float d = x[i] - qtk__gb_value(F, S[i / F->sub], O[i / F->sub], u->q[i]);
        e += (double)(w ? w[i] : 1.0f) * (double)d * (double)d;
    }
    return e;
}

/* 32-element formats: the continuous fit, its f16 neighbours, fields nearest. */
static void mse_block32(const qtk__gb_fmt *F, const float *x, const float *w, qtk__gb_unpacked *u) {
    grp g = {x, w, (int)F->qk};
    int8_t q[QTK__GB_QK_MAX];
    double best = block_error(F, x, w, u); /* the minmax block, already in u */
    if (F->affine) {
        float a, c;
        fit_affine(&g, F->qhi, false, &a, &c);
        uint16_t d0 = f16_near(a), m0 = f16_near(c);
        for (int dd = -1; dd <= 1; dd++)
            for (int dm = -1; dm <= 1; dm++) {
                uint16_t dh = (uint16_t)(d0 + dd), mh = (uint16_t)(m0 + dm);
                float d = f16v(dh), m = f16v(mh);
                if (!(d > 0.0f) || !isfinite(d) || !isfinite(m) || (d0 == 0 && dd < 0)) continue;
                double e = eval_affine(&g, d, m, F->qhi, q);
                if (e < best) {
                    best = e, u->d = dh, u->m = mh;
                    memcpy(u->q, q, F->qk);
                }
            }
    } else {
        float s;
        fit_sym(&g, F->qlo, F->qhi, &s);
        uint16_t d0 = f16_near(s);
        for (int dd = -1; dd <= 1; dd++) {
            uint16_t dh = (uint16_t)(d0 + dd);
            float d = f16v(dh);
            if (!isfinite(d) || (d0 & 0x7fffu) == 0) continue;
            double e = eval_sym(&g, d, F->qlo, F->qhi, q);
            if (e < best) {
                best = e, u->d = dh;
                memcpy(u->q, q, F->qk);
            }
        }
    }
}

/* The best integer sub-scale (and sub-min) of group s near its continuous (a, b) under the
 * f16 super-scales d, dm; the group's fields into q. Returns its error. */
static double best_ints(const qtk__gb_fmt *F, const grp *g, float a, float b, float d, float dm, int8_t *sc,
                        uint8_t *mn, int8_t *q) {
    int8_t tq[QTK__GB_QK_MAX];
    double best = DBL_MAX;
    int s0 = d != 0.0f ? (int)lrintf(a / d) : 0, m0 = F->affine && dm > 0.0f ? (int)lrintf(b / dm) : 0;
    for (int ds = -1; ds <= 1; ds++)
        for (int dmn = F->affine ? -1 : 0; dmn <= (F->affine ? 1 : 0); dmn++) {
            int si = s0 + ds, mi = m0 + dmn;
            if (si < F->sclo || si > F->schi || mi < 0 || mi > F->mnhi) continue;
            float S = d * (float)si;
            double e;
            if (F->affine) {
                float B = dm * (float)mi;
                e = eval_affine(g, S, -B, F->qhi, tq); /* S == 0: every field 0, the value -B */
            } else {
                e = eval_sym(g, S, F->qlo, F->qhi, tq);
            }
            if (e < best) {
                best = e, *sc = (int8_t)si, *mn = (uint8_t)mi;
                memcpy(q, tq, (size_t)g->n);
            }
        }
    return best;
}

/* K formats: per group the continuous fit; super-scales from their largest; then the groups'
 * integers on the final grid, for a few super-scales. */
static void mse_block_k(const qtk__gb_fmt *F, const float *x, const float *w, qtk__gb_unpacked *u) {
    const unsigned G = F->groups, n = F->sub;
    float a[QTK__GB_GROUPS_MAX], b[QTK__GB_GROUPS_MAX], amax = 0.0f, bmax = 0.0f, asgn = 0.0f;
    for (unsigned s = 0; s < G; s++) {
        grp g = {x + s * n, w ? w + s * n : NULL, (int)n};
        if (F->affine) {
            float c;
            fit_affine(&g, F->qhi, true, &a[s], &c);
            b[s] = -c;
        } else {
            fit_sym(&g, F->qlo, F->qhi, &a[s]);
            b[s] = 0.0f;
        }
        if (fabsf(a[s]) > amax) amax = fabsf(a[s]), asgn = a[s];
        bmax = b[s] > bmax ? b[s] : bmax;
    }
    double best = block_error(F, x, w, u); /* minmax's */
    qtk__gb_unpacked t = *u;
    /* the largest sub-scale onto the end of the integer range it reaches furthest */
    float ext = F->affine ? (float)F->schi : asgn < 0.0f ? (float)-F->sclo : (float)F->schi;
    static const float dfac[] = {1.0f, 0.985f, 1.015f, 0.97f};
    static const float mfac[] = {1.0f, 1.02f};
    for (unsigned i = 0; i < sizeof dfac / sizeof dfac[0]; i++)
        for (unsigned j = 0; j < (F->affine ? sizeof mfac / sizeof mfac[0] : 1u); j++) {
            t.d = f16_near(amax / ext * dfac[i]);
            t.m = F->affine ? f16_near(bmax / (float)F->mnhi * mfac[j]) : 0;
            float d = f16v(t.d), dm = f16v(t.m);
            if (!isfinite(d) || !isfinite(dm)) continue;
            double e = 0.0;
            for (unsigned s = 0; s < G && e < best; s++) {
                grp g = {x + s * n, w ? w + s * n : NULL, (int)n};
                e += best_ints(F, &g, a[s], b[s], d, dm, &t.sc[s], &t.mn[s], t.q + s * n);
            }
            if (e < best) best = e, *u = t;
        }
}

void qtk__gb_quantize_block(const qtk__gb_fmt *F, const float *x, const float *w, bool mse, uint8_t *blk) {
    qtk__gb_unpacked u;
    minmax_block(F, x, &u);
    if (mse) {
        if (F->super) mse_block_k(F, x, w, &u);
        else mse_block32(F, x, w, &u);
    }
    qtk__gb_pack(F, &u, blk);
}
