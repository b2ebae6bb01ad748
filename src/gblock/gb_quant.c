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
    size_t n;
} grp;

static inline float wt(const grp *g, size_t i) { return g->w ? g->w[i] : 1.0f; }

/* t rounded to the nearest integer, ties to even, for |t| < 2^22: adding 1.5 x 2^23 rounds
 * it in the default rounding mode (lrintf is a library call on baseline x86-64). */
static inline float rne(float t) {
    float r = t + 12582912.0f;
    return r - 12582912.0f;
}

/* ---- errors of candidate parameters (the decoder's values) ----
 *
 * The fields are the nearest by the quotient (x - O) / S, computed with a reciprocal: on a
 * near tie that may pick the other neighbour, whose error is then what is counted (every
 * error here is the exact error of the fields chosen, so a candidate is never credited with
 * less error than its bytes have). */

/* Affine: value fl(S q + O), q in [0, Q] (S >= 0; S == 0: every field 0). */
static double eval_affine(const grp *g, float S, float O, int Q, int8_t *q) {
    float inv = S > 0.0f ? 1.0f / S : 0.0f, fq = (float)Q, e = 0.0f;
    for (size_t i = 0; i < g->n; i++) {
        float x = g->x[i], t = (x - O) * inv;
        t = t < 0.0f ? 0.0f : t > fq ? fq : t;
        int c = (int)(t + 0.5f);
        float v = S * (float)c + O, d = x - v; /* S c is exact */
        e += wt(g, i) * d * d;
        if (q) q[i] = (int8_t)c;
    }
    return (double)e;
}

/* Symmetric: value S q with q in [lo, hi] (S of either sign). */
static double eval_sym(const grp *g, float S, int lo, int hi, int8_t *q) {
    float inv = S != 0.0f ? 1.0f / S : 0.0f, flo = (float)lo, fhi = (float)hi, e = 0.0f;
    for (size_t i = 0; i < g->n; i++) {
        float x = g->x[i], t = x * inv;
        t = t < flo ? flo : t > fhi ? fhi : t;
        int c = (int)rne(t);
        float d = x - S * (float)c;
        e += wt(g, i) * d * d;
        if (q) q[i] = (int8_t)c;
    }
    return (double)e;
}

/* ---- continuous fits of one group ----
 *
 * Each trial rounds the group at a trial scale, then solves weighted least squares for the
 * scale (and offset) of those fields; its error at that solution comes from the sums, without
 * another pass. The best trial is refined by re-rounding at its solution (Lloyd steps). */

#define LLOYD_STEPS 3
#define QTK__GB_SUPER_CAND 4

typedef struct {
    double sw, sx, sxx; /* sum w, sum w x, sum w x^2 */
} moments;

/* Error e at scale magnitude a beats (best, at b): less error, or the same (to rounding) at a
 * smaller scale. Many scales give one group the same fields (a group whose other values round
 * to 0 around an outlier): the smallest of them leaves the super-block's scale, which the
 * largest group's sets, the finest grid for the others. */
static bool better(double e, float a, double best, float b) {
    if (best == DBL_MAX) return true;
    double tol = 1e-6 * best;
    return e < best - tol || (e <= best + tol && a < b);
}

static moments moments_of(const grp *g) {
    moments m = {0, 0, 0};
    for (size_t i = 0; i < g->n; i++) {
        double w = wt(g, i), x = g->x[i];
        m.sw += w, m.sx += w * x, m.sxx += w * x * x;
    }
    return m;
}

/* One pass at (a, c): the fields nearest (q in [0, Q]), their error (exact up to the sums'
 * rounding: the fields are nearest at (a, c)), and the least-squares (a', c') for them, c' <= 0
 * when `neg` (false when the fields fix no positive scale); *curv: sum w q^2. */
static double affine_pass(const grp *g, const moments *m, int Q, bool neg, float a, float c, float *ao, float *co,
                          bool *next, double *curv) {
    float inv = 1.0f / a, fq = (float)Q;
    double sq = 0, sqq = 0, sqx = 0;
    for (size_t i = 0; i < g->n; i++) {
        float t = (g->x[i] - c) * inv;
        t = t < 0.0f ? 0.0f : t > fq ? fq : t;
        double q = (double)(int)(t + 0.5f), w = wt(g, i);
        sq += w * q, sqq += w * q * q, sqx += w * q * g->x[i];
    }
    double A = a, C = c;
    /* sum w (x - A q - C)^2 expanded */
    double e = m->sxx - 2.0 * A * sqx - 2.0 * C * m->sx + A * A * sqq + 2.0 * A * C * sq + C * C * m->sw;
    *curv = sqq;
    double D = m->sw * sqq - sq * sq;
    *next = false;
    if (D > 0.0) {
        A = (m->sw * sqx - sq * m->sx) / D, C = (sqq * m->sx - sq * sqx) / D;
        if (neg && C > 0.0) C = 0.0, A = sqx / sqq;
        if (A > 0.0 && isfinite(A) && isfinite(C)) *ao = (float)A, *co = (float)C, *next = true;
    }
    return e;
}

/* The continuous (a > 0, c) of least error for x ~ a q + c, q in [0, Q] (c <= 0 when `neg`):
 * trial scales around the range's, each followed by Lloyd steps (the least-squares solution for
 * its fields, re-rounded); every point is scored by the error of its own nearest fields.
 * *curv (optional): sum w q^2 of the best's fields, how fast the error grows as a moves. */
static void fit_affine(const grp *g, int Q, bool neg, float *a_out, float *c_out, double *curv) {
    if (curv) *curv = 0.0;
    float lo = g->x[0], hi = g->x[0];
    for (size_t i = 1; i < g->n; i++) lo = g->x[i] < lo ? g->x[i] : lo, hi = g->x[i] > hi ? g->x[i] : hi;
    if (neg && lo > 0.0f) lo = 0.0f;
    *a_out = hi > lo ? (hi - lo) / (float)Q : 0.0f, *c_out = lo;
    if (!(hi > lo)) return;
    moments m = moments_of(g);
    double best = DBL_MAX;
    for (int t = 0; t <= 15; t++) {
        float f = -0.75f + 0.1f * (float)t, a = (hi - lo) / ((float)Q + f), c = lo;
        double prev = DBL_MAX;
        for (int it = 0; it <= LLOYD_STEPS; it++) {
            float a2 = a, c2 = c;
            bool next;
            double cv, e = affine_pass(g, &m, Q, neg, a, c, &a2, &c2, &next, &cv);
            if (better(e, a, best, *a_out)) {
                best = e, *a_out = a, *c_out = c;
                if (curv) *curv = cv;
            }
            if (!next || !(e < prev) || (a2 == a && c2 == c)) break;
            prev = e, a = a2, c = c2;
        }
    }
}

/* The continuous scale s (either sign when the range is not symmetric) of least error for
 * x ~ s q, q in [lo, hi], scored the same way; *curv: sum w q^2 of its fields. */
static void fit_sym(const grp *g, int lo, int hi, float *s_out, double *curv) {
    *curv = 0.0;
    float amax = 0.0f, xm = 0.0f;
    for (size_t i = 0; i < g->n; i++)
        if (fabsf(g->x[i]) > amax) amax = fabsf(g->x[i]), xm = g->x[i];
    *s_out = amax / (float)hi;
    if (amax == 0.0f) return;
    moments m = moments_of(g);
    double best = DBL_MAX;
    float flo = (float)lo, fhi = (float)hi;
    for (int sgn = 0; sgn < 2; sgn++) {
        /* sgn 1: the largest magnitude on the longer, negative side */
        if (sgn && lo == -hi) break;
        float ext = sgn ? (float)-lo : (float)hi;
        /* trials over [ext - 1, ext + 1]: 21 for narrow ranges, 11 for 5- and 6-bit ones */
        const int T = hi - lo >= 31 ? 10 : 20;
        for (int t = 0; t <= T; t++) {
            float s = amax / (ext - 1.0f + 2.0f * (float)t / (float)T);
            if (!(s > 0.0f)) continue;
            s = (sgn ? xm > 0.0f : xm < 0.0f) ? -s : s;
            for (int it = 0; it <= LLOYD_STEPS; it++) {
                float inv = 1.0f / s;
                double sqx = 0, sqq = 0;
                for (size_t i = 0; i < g->n; i++) {
                    float u = g->x[i] * inv;
                    u = u < flo ? flo : u > fhi ? fhi : u;
                    double q = (double)rne(u), w = wt(g, i);
                    sqx += w * q * g->x[i], sqq += w * q * q;
                }
                double e = m.sxx - 2.0 * (double)s * sqx + (double)s * (double)s * sqq;
                if (better(e, fabsf(s), best, fabsf(*s_out))) best = e, *s_out = s, *curv = sqq;
                if (!(sqq > 0.0)) break;
                float s2 = (float)(sqx / sqq);
                if (s2 == s || s2 == 0.0f) break;
                s = s2;
            }
        }
    }
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
            grp g = {x, NULL, n};
            eval_affine(&g, f16v(u->d), m, Q, u->q);
        } else { /* Q5_0: d = 2 amax / 31 rounded up */
            float amax = 0.0f;
            for (unsigned i = 0; i < n; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
            u->d = f16_up(2.0f * amax / (float)(F->qhi - F->qlo));
            grp g = {x, NULL, n};
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
        grp g = {x + s * n, NULL, n};
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
    grp g = {x, w, F->qk};
    int8_t q[QTK__GB_QK_MAX];
    double best = block_error(F, x, w, u); /* the minmax block, already in u */
    if (F->affine) {
        float a, c;
        fit_affine(&g, F->qhi, false, &a, &c, NULL);
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
        double cv;
        fit_sym(&g, F->qlo, F->qhi, &s, &cv);
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
    int s0 = d != 0.0f ? (int)rne(a / d) : 0, m0 = F->affine && dm > 0.0f ? (int)rne(b / dm) : 0;
    /* symmetric fields of an asymmetric range (q3f -4..3, q6f): the scale of the other sign
     * too, which puts the group's largest value on the other end */
    int s1 = d != 0.0f && !F->affine ? (int)rne(a * (float)F->qhi / ((float)F->qlo * d)) : s0;
    int bs = s0, bm = m0;
#define TRY(si, mi)                                                                                                    \
    do {                                                                                                               \
        int si_ = (si), mi_ = (mi);                                                                                    \
        if (si_ >= F->sclo && si_ <= F->schi && mi_ >= 0 && mi_ <= F->mnhi) {                                          \
            float S_ = d * (float)si_;                                                                                 \
            /* S == 0: every field 0, the value -B */                                                                  \
            double e_ = F->affine ? eval_affine(g, S_, -(dm * (float)mi_), F->qhi, tq) : eval_sym(g, S_, F->qlo, F->qhi, tq); \
            if (e_ < best) {                                                                                           \
                best = e_, bs = si_, bm = mi_;                                                                         \
                memcpy(q, tq, g->n);                                                                           \
            }                                                                                                          \
        }                                                                                                              \
    } while (0)
    /* the sub-scale around its target (both sides for the symmetric ones), then the sub-min
     * around its target at the best sub-scale */
    for (int ds = -1; ds <= 1; ds++) TRY(s0 + ds, m0);
    if (s1 != s0)
        for (int ds = -1; ds <= 1; ds++) TRY(s1 + ds, m0);
    if (F->affine) {
        int s = bs;
        TRY(s, m0 - 1);
        TRY(s, m0 + 1);
    }
#undef TRY
    *sc = (int8_t)bs, *mn = (uint8_t)bm;
    return best;
}

/* The super-scale candidates: vmax / ext (the largest group on the end of the integer range),
 * then the f16 values d of least proxy error
 *     sum_g W_g (v_g - d round(v_g / d))^2   (round clamped to [lo, hi])
 * over d = vmax / ext x f on a fine grid of f — the error each group's integer costs it, by
 * its curvature W_g — best first, distinct; returns how many (<= cap). */
static int super_candidates(const float *v, const double *W, unsigned G, float vmax, float ext, int lo, int hi,
                            uint16_t *out, int cap) {
    double err[QTK__GB_SUPER_CAND];
    int n = 0;
    out[0] = vmax > 0.0f ? f16_near(vmax / ext) : 0;
    if (!(vmax > 0.0f) || !isfinite(f16v(out[0]))) return 1;
    out++, cap--;
    for (int k = 0; k <= 60; k++) {
        uint16_t h = f16_near(vmax / ext * (0.5f + 0.01f * (float)k));
        float d = f16v(h);
        if (!(d > 0.0f) || !isfinite(d)) continue;
        bool dup = h == out[-1];
        for (int j = 0; j < n && !dup; j++) dup = out[j] == h;
        if (dup) continue;
        double e = 0.0;
        for (unsigned g = 0; g < G; g++) {
            float r = v[g] / d;
            r = r < (float)lo ? (float)lo : r > (float)hi ? (float)hi : rne(r);
            double dv = (double)v[g] - (double)d * r;
            e += W[g] * dv * dv;
        }
        /* insert, keeping the cap best */
        int at = n < cap ? n : cap;
        while (at > 0 && err[at - 1] > e) at--;
        if (at >= cap) continue;
        int last = n < cap ? n : cap - 1;
        for (int j = last; j > at; j--) err[j] = err[j - 1], out[j] = out[j - 1];
        err[at] = e, out[at] = h;
        if (n < cap) n++;
    }
    return n + 1;
}

/* K formats: per group the continuous fit; the super-scales from a proxy search over them;
 * then the groups' integers on the final grid, for the best few super-scales. */
static void mse_block_k(const qtk__gb_fmt *F, const float *x, const float *w, qtk__gb_unpacked *u) {
    const unsigned G = F->groups, n = F->sub;
    float a[QTK__GB_GROUPS_MAX], b[QTK__GB_GROUPS_MAX], amax = 0.0f, bmax = 0.0f, asgn = 0.0f;
    double Wa[QTK__GB_GROUPS_MAX], Wb[QTK__GB_GROUPS_MAX];
    for (unsigned s = 0; s < G; s++) {
        grp g = {x + s * n, w ? w + s * n : NULL, n};
        if (F->affine) {
            float c;
            fit_affine(&g, F->qhi, true, &a[s], &c, &Wa[s]);
            b[s] = -c;
            Wb[s] = moments_of(&g).sw;
        } else {
            fit_sym(&g, F->qlo, F->qhi, &a[s], &Wa[s]);
            b[s] = 0.0f, Wb[s] = 0.0;
        }
        if (fabsf(a[s]) > amax) amax = fabsf(a[s]), asgn = a[s];
        bmax = b[s] > bmax ? b[s] : bmax;
    }
    double best = block_error(F, x, w, u); /* minmax's */
    qtk__gb_unpacked t = *u;
    /* the largest sub-scale onto the end of the integer range it reaches furthest */
    float ext = F->affine ? (float)F->schi : asgn < 0.0f ? (float)-F->sclo : (float)F->schi;
    uint16_t dc[QTK__GB_SUPER_CAND], mc[QTK__GB_SUPER_CAND];
    int nd = super_candidates(a, Wa, G, amax, ext, F->sclo, F->schi, dc, 3);
    int nm = F->affine ? super_candidates(b, Wb, G, bmax, (float)F->mnhi, 0, F->mnhi, mc, 2) : 1;
    if (!F->affine) mc[0] = 0;
    for (int i = 0; i < nd; i++)
        for (int j = 0; j < nm; j++) {
            t.d = dc[i], t.m = mc[j];
            float d = f16v(t.d), dm = f16v(t.m);
            double e = 0.0;
            for (unsigned s = 0; s < G && e < best; s++) {
                grp g = {x + s * n, w ? w + s * n : NULL, n};
                e += best_ints(F, &g, a[s], b[s], d, dm, &t.sc[s], &t.mn[s], t.q + s * n);
            }
            if (e < best) best = e, *u = t;
        }
}

void qtk__gb_quantize_block(const qtk__gb_fmt *F, const float *x, const float *w, bool mse, uint8_t *blk) {
    if (F->lattice) {
        qtk__gb_lattice_quantize(F, x, w, mse, blk);
        return;
    }
    qtk__gb_unpacked u;
    minmax_block(F, x, &u);
    if (mse) {
        if (F->super) mse_block_k(F, x, w, &u);
        else mse_block32(F, x, w, &u);
    }
    qtk__gb_pack(F, &u, blk);
}

/* ---- for the affine mode over qtk's layouts (calib/affine.c) ---- */

void qtk__fit_affine(const float *x, const float *w, size_t n, int Q, float *a, float *c) {
    grp g = {x, w, n};
    fit_affine(&g, Q, false, a, c, NULL);
}
