/* gb_lattice_quant.c — making ggml's lattice types (docs/lattice.md, "Making them").
 *
 * A lattice block is x = S_g q with S_g = d x sc_g x dmul per group (16 or 32 values), sc_g
 * odd, and q, per 8 values, one codebook point (or two 4-wide ones) with signs (IQ2, IQ3) or
 * a shared delta (IQ1). Quantizing is a search, in three steps, every one scored by the exact
 * weighted squared error sum w (x - S q)^2 of the codes it picks:
 *
 *  1. the codes at a given scale: per point, each coordinate rounded to its nearest level (a
 *     cell of the level lattice); a cell on the codebook is the weighted optimum; otherwise the
 *     codebook points near the cell (a neighbour list, built once per codebook) are scored.
 *     Where the signs must be even in number (IQ2_XXS, IQ2_XS, IQ3_XXS), the best single sign
 *     to give up is searched (its coordinate then aims at -|x|); IQ1 tries both deltas;
 *  2. per group, the continuous scale: trial scales over a wide range, each refitted by least
 *     squares on its codes, the best refined by re-rounding (Lloyd steps);
 *  3. per block, the f16 d and the integer sub-scales: d candidates from a proxy search over
 *     the groups' scales, and per group the odd sub-scales around its target, each scored with
 *     its codes searched again at that exact scale; then d refitted on the chosen codes.
 *
 * Deterministic scalar C, one block at a time: the same bytes on every kernel level and
 * thread count. */
#include "gblock.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

/* ---- the codebooks as the search sees them ---- */

typedef struct {
    unsigned W, base, npts;   /* coordinates per point, levels, points */
    unsigned margin;          /* a cell's neighbours: the points within squared index distance Dmin + margin */
    float lev[8], mid[7];     /* the levels in q units (IQ1: 8 x -1 0 1), and the midpoints */
    const uint16_t *codes;    /* gb_grids.c */
    /* built once (lg_ready) */
    float *g;                 /* npts x W coordinates in q units */
    int16_t *inv;             /* cell -> point, or -1 */
    uint32_t *off;            /* cell -> its neighbour list nb[off[c] .. off[c + 1]) */
    uint16_t *nb;
    bool ok;
} lgrid;

enum { G2XXS, G2XS, G2S, G1S, G3XXS, G3S, NGRIDS };

static lgrid lgrids[NGRIDS] = {
    [G2XXS] = {8, 3, 256, 1, {8, 25, 43}, {0}, qtk__grid_iq2xxs, NULL, NULL, NULL, NULL, false},
    [G2XS] = {8, 3, 512, 1, {8, 25, 43}, {0}, qtk__grid_iq2xs, NULL, NULL, NULL, NULL, false},
    [G2S] = {8, 3, 1024, 1, {8, 25, 43}, {0}, qtk__grid_iq2s, NULL, NULL, NULL, NULL, false},
    [G1S] = {8, 3, 2048, 1, {-8, 0, 8}, {0}, qtk__grid_iq1s, NULL, NULL, NULL, NULL, false},
    [G3XXS] = {4, 8, 256, 3, {4, 12, 20, 28, 36, 44, 52, 62}, {0}, qtk__grid_iq3xxs, NULL, NULL, NULL, NULL, false},
    [G3S] = {4, 8, 512, 3, {1, 3, 5, 7, 9, 11, 13, 15}, {0}, qtk__grid_iq3s, NULL, NULL, NULL, NULL, false},
};

static unsigned cells_of(const lgrid *L) {
    unsigned c = 1;
    for (unsigned j = 0; j < L->W; j++) c *= L->base;
    return c;
}

static unsigned idx_dist(const lgrid *L, unsigned a, unsigned b) {
    unsigned D = 0;
    for (unsigned j = 0; j < L->W; j++, a /= L->base, b /= L->base) {
        int t = (int)(a % L->base) - (int)(b % L->base);
        D += (unsigned)(t * t);
    }
    return D;
}

static void lg_build(lgrid *L) {
    const unsigned C = cells_of(L), n = L->npts, W = L->W;
    for (unsigned k = 0; k + 1 < L->base; k++) L->mid[k] = 0.5f * (L->lev[k] + L->lev[k + 1]);
    L->g = malloc((size_t)n * W * sizeof *L->g);
    L->inv = malloc((size_t)C * sizeof *L->inv);
    L->off = malloc(((size_t)C + 1) * sizeof *L->off);
    unsigned *dmin = malloc((size_t)C * sizeof *dmin);
    if (!L->g || !L->inv || !L->off || !dmin) goto fail;
    for (unsigned i = 0; i < n; i++)
        for (unsigned j = 0, c = L->codes[i]; j < W; j++, c /= L->base) L->g[i * W + j] = L->lev[c % L->base];
    for (unsigned c = 0; c < C; c++) L->inv[c] = -1;
    for (unsigned i = 0; i < n; i++) L->inv[L->codes[i]] = (int16_t)i;
    /* two passes: count, then fill */
    size_t total = 0;
    for (unsigned c = 0; c < C; c++) {
        L->off[c] = (uint32_t)total;
        if (L->inv[c] >= 0) continue;
        unsigned m = UINT32_MAX, cnt = 0;
        for (unsigned i = 0; i < n; i++) {
            unsigned D = idx_dist(L, c, L->codes[i]);
            m = D < m ? D : m;
        }
        for (unsigned i = 0; i < n; i++) cnt += idx_dist(L, c, L->codes[i]) <= m + L->margin;
        dmin[c] = m, total += cnt;
    }
    L->off[C] = (uint32_t)total;
    L->nb = malloc(total * sizeof *L->nb);
    if (!L->nb) goto fail;
    for (unsigned c = 0; c < C; c++) {
        if (L->inv[c] >= 0) continue;
        size_t o = L->off[c];
        for (unsigned i = 0; i < n; i++)
            if (idx_dist(L, c, L->codes[i]) <= dmin[c] + L->margin) L->nb[o++] = (uint16_t)i;
    }
    free(dmin);
    L->ok = true;
    return;
fail:
    free(dmin);
    free(L->g), free(L->inv), free(L->off);
    L->g = NULL, L->inv = NULL, L->off = NULL;
}

#define ONCE(k)                                                                                                        \
    static pthread_once_t once_##k = PTHREAD_ONCE_INIT;                                                               \
    static void build_##k(void) { lg_build(&lgrids[k]); }
ONCE(G2XXS)
ONCE(G2XS)
ONCE(G2S)
ONCE(G1S)
ONCE(G3XXS)
ONCE(G3S)
#undef ONCE

static int grid_of(qtk__gfmt f) {
    switch (f) {
    case QTK__GF_IQ2_XXS: return G2XXS;
    case QTK__GF_IQ2_XS: return G2XS;
    case QTK__GF_IQ2_S: return G2S;
    case QTK__GF_IQ3_XXS: return G3XXS;
    case QTK__GF_IQ3_S: return G3S;
    default: return G1S;
    }
}

bool qtk__gb_lattice_quant_ready(const qtk__gb_fmt *F) {
    switch (grid_of(F->f)) {
    case G2XXS: pthread_once(&once_G2XXS, build_G2XXS); break;
    case G2XS: pthread_once(&once_G2XS, build_G2XS); break;
    case G2S: pthread_once(&once_G2S, build_G2S); break;
    case G1S: pthread_once(&once_G1S, build_G1S); break;
    case G3XXS: pthread_once(&once_G3XXS, build_G3XXS); break;
    default: pthread_once(&once_G3S, build_G3S); break;
    }
    return lgrids[grid_of(F->f)].ok;
}

/* ---- step 1: the codes at a scale ---- */

static inline float dist(const float *g, const float *u, const float *w, unsigned W) {
    float e = 0.0f;
    for (unsigned j = 0; j < W; j++) {
        float t = u[j] - g[j];
        e += w[j] * t * t;
    }
    return e;
}

/* The point of least sum w (u - g)^2 for targets u (q units): the rounded cell, or the best
 * of its neighbour list. */
static unsigned nearest(const lgrid *L, const float *u, const float *w, float *err) {
    unsigned c = 0, m = 1;
    for (unsigned j = 0; j < L->W; j++, m *= L->base) {
        unsigned k = 0;
        while (k + 1 < L->base && u[j] > L->mid[k]) k++;
        c += k * m;
    }
    int i = L->inv[c];
    if (i >= 0) {
        *err = dist(L->g + (unsigned)i * L->W, u, w, L->W);
        return (unsigned)i;
    }
    float best = FLT_MAX;
    unsigned bi = L->nb[L->off[c]];
    for (uint32_t o = L->off[c]; o < L->off[c + 1]; o++) {
        float e = dist(L->g + (unsigned)L->nb[o] * L->W, u, w, L->W);
        if (e < best) best = e, bi = L->nb[o];
    }
    *err = best;
    return bi;
}

typedef struct {
    const qtk__gb_fmt *F;
    const lgrid *L;
    bool even;          /* the 8 signs of a vector are even in number */
} ltype;

/* IQ1: q = 8 g + delta, delta +-1 (the other types: q = g) */
static inline bool is_iq1(const ltype *T) { return T->F->f == QTK__GF_IQ1_S || T->F->f == QTK__GF_IQ1_M; }

typedef struct {
    double e, sxq, sqq; /* sum w (x - S q)^2, sum w x q, sum w q^2 */
} gres;

static void tally(gres *r, const float *x, const float *w, const int8_t *q, unsigned n, float S) {
    for (unsigned i = 0; i < n; i++) {
        double t = (double)x[i] - (double)(S * (float)q[i]); /* S q exact; the decoder's value */
        r->e += (double)w[i] * t * t;
        r->sxq += (double)w[i] * x[i] * q[i];
        r->sqq += (double)w[i] * q[i] * q[i];
    }
}

/* 8 values with signs (IQ2, IQ3): magnitudes onto the codebook, signs from x (even in number
 * where the format wants it: the cheapest sign given up). */
static void vec_signed(const ltype *T, const float *x, const float *w, float inv, int8_t *q) {
    const lgrid *L = T->L;
    const unsigned W = L->W, P = 8 / W;
    float u[8], e[2];
    unsigned neg = 0, idx[2];
    for (unsigned j = 0; j < 8; j++) {
        u[j] = fabsf(x[j]) * inv;
        neg |= (x[j] < 0.0f ? 1u : 0u) << j;
    }
    for (unsigned h = 0; h < P; h++) idx[h] = nearest(L, u + h * W, w + h * W, &e[h]);
    if (T->even && (__builtin_popcount(neg) & 1)) {
        /* give up one sign: coordinate j then aims at -|u_j|, costing at least w (u_j + lev0)^2 */
        float best = FLT_MAX;
        unsigned bj = 0, bi = 0;
        float be = 0.0f;
        for (unsigned j = 0; j < 8; j++) {
            unsigned h = j / W;
            float other = P == 2 ? e[1 - h] : 0.0f, lb = u[j] + L->lev[0];
            if (other + w[j] * lb * lb >= best) continue;
            float t[4 * 2];
            memcpy(t, u + h * W, W * sizeof *t);
            t[j % W] = -u[j];
            float ej;
            unsigned ij = nearest(L, t, w + h * W, &ej);
            if (other + ej < best) best = other + ej, bj = j, bi = ij, be = ej;
        }
        neg ^= 1u << bj;
        idx[bj / W] = bi, e[bj / W] = be;
    }
    for (unsigned j = 0; j < 8; j++) {
        int g = (int)L->g[idx[j / W] * W + j % W];
        q[j] = (int8_t)((neg >> j) & 1u ? -g : g);
    }
}

/* 8 values of IQ1 with delta dl (+-1): q = 8 g + dl; returns sum w (u - q)^2 in q units */
static float vec_iq1(const lgrid *L, const float *x, const float *w, float inv, int dl, int8_t *q) {
    float u[8], e;
    for (unsigned j = 0; j < 8; j++) u[j] = x[j] * inv - (float)dl;
    unsigned i = nearest(L, u, w, &e);
    for (unsigned j = 0; j < 8; j++) q[j] = (int8_t)((int)L->g[i * 8 + j] + dl);
    return e;
}

/* A valid code of value 0 at S = 0: any point, no signs (IQ1: delta +). */
static void zero_codes(const ltype *T, unsigned n, int8_t *q) {
    const lgrid *L = T->L;
    for (unsigned i = 0; i < n; i++) q[i] = (int8_t)((int)L->g[i % L->W] + is_iq1(T));
}

/* The codes of group x (n values) at scale S > 0 into q, with their sums. */
static gres group_at(const ltype *T, const float *x, const float *w, unsigned n, float S, int8_t *q) {
    gres r = {0, 0, 0};
    if (!(S > 0.0f)) {
        zero_codes(T, n, q);
        tally(&r, x, w, q, n, 0.0f);
        return r;
    }
    float inv = 1.0f / S;
    switch (T->F->f) {
    case QTK__GF_IQ1_S: { /* one delta per group: the better of the two */
        int8_t t[32];
        float e[2] = {0.0f, 0.0f};
        for (int k = 0; k < 2; k++)
            for (unsigned v = 0; v < n; v += 8) e[k] += vec_iq1(T->L, x + v, w + v, inv, k ? -1 : 1, k ? t + v : q + v);
        if (e[1] < e[0]) memcpy(q, t, n);
        break;
    }
    case QTK__GF_IQ1_M: /* a delta per 8 */
        for (unsigned v = 0; v < n; v += 8) {
            int8_t t[8];
            float a = vec_iq1(T->L, x + v, w + v, inv, 1, q + v), b = vec_iq1(T->L, x + v, w + v, inv, -1, t);
            if (b < a) memcpy(q + v, t, 8);
        }
        break;
    default:
        for (unsigned v = 0; v < n; v += 8) vec_signed(T, x + v, w + v, inv, q + v);
        break;
    }
    tally(&r, x, w, q, n, S);
    return r;
}

/* ---- step 2: a group's continuous scale ---- */

#define TRIALS 16
#define LLOYD 2

static float qtop(const ltype *T) {
    const lgrid *L = T->L;
    return L->lev[L->base - 1] + (is_iq1(T) ? 1.0f : 0.0f);
}

/* The scale a of least error for group x, and the curvature sum w q^2 there (0: a == 0). */
static float group_fit(const ltype *T, const float *x, const float *w, unsigned n, double *curv) {
    float amax = 0.0f;
    double sxx = 0.0;
    for (unsigned i = 0; i < n; i++) {
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        sxx += (double)w[i] * x[i] * x[i];
    }
    *curv = 0.0;
    if (!(amax > 0.0f) || !(sxx > 0.0)) return 0.0f;
    int8_t q[32];
    double best = DBL_MAX;
    float a = 0.0f;
    /* amax at 0.5 .. 2 times the top level, in steps of 2^(2/15) (products, not exp2f: the
     * same scales on every libm) */
    float f = 0.5f;
    for (int k = 0; k < TRIALS; k++, f *= 1.0968249f) {
        float S = amax / (qtop(T) * f);
        gres r = group_at(T, x, w, n, S, q);
        if (!(r.sqq > 0.0) || !(r.sxq > 0.0)) continue;
        double e = sxx - r.sxq * r.sxq / r.sqq;
        if (e < best) best = e, a = (float)(r.sxq / r.sqq), *curv = r.sqq;
    }
    for (int it = 0; it < LLOYD && a > 0.0f; it++) {
        gres r = group_at(T, x, w, n, a, q);
        if (!(r.sqq > 0.0) || !(r.sxq > 0.0)) break;
        double e = sxx - r.sxq * r.sxq / r.sqq;
        if (!(e < best)) break;
        best = e, a = (float)(r.sxq / r.sqq), *curv = r.sqq;
    }
    return a;
}

/* ---- step 3: the block ---- */

static inline float rne(float t) {
    float r = t + 12582912.0f;
    return r - 12582912.0f;
}

/* the odd sub-scale 2s + 1 nearest r, s in [0, smax] */
static int odd_near(float r, int smax) {
    float s = rne((r - 1.0f) * 0.5f);
    return s < 0.0f ? 0 : s > (float)smax ? smax : (int)s;
}

#define DCAND 3

/* The d candidates (f16 bits, distinct, best first by the proxy sum_g C_g (a_g - S_g)^2). */
static int d_candidates(const float *a, const double *C, unsigned G, float amax, float dmul, int smax, uint16_t *out) {
    double err[DCAND];
    int n = 0;
    float top = (float)(2 * smax + 1) * dmul;
    for (int k = 0; k <= 60; k++) {
        uint16_t h = qtk__f32_to_f16(amax / top * (0.5f + 0.01f * (float)k));
        float d = qtk__f16_to_f32(h);
        if (!(d > 0.0f) || !isfinite(d)) continue;
        bool dup = false;
        for (int j = 0; j < n && !dup; j++) dup = out[j] == h;
        if (dup) continue;
        double e = 0.0;
        for (unsigned g = 0; g < G; g++) {
            double dv = (double)a[g] - (double)d * dmul * (float)(2 * odd_near(a[g] / (d * dmul), smax) + 1);
            e += C[g] * dv * dv;
        }
        int at = n < DCAND ? n : DCAND;
        while (at > 0 && err[at - 1] > e) at--;
        if (at >= DCAND) continue;
        int last = n < DCAND ? n : DCAND - 1;
        for (int j = last; j > at; j--) err[j] = err[j - 1], out[j] = out[j - 1];
        err[at] = e, out[at] = h;
        if (n < DCAND) n++;
    }
    return n;
}

/* The block's codes under f16 d: per group the best odd sub-scale near its target (all of
 * them when `all`); returns the error, or stops past `bound`. */
static double block_at(const ltype *T, const float *x, const float *w, const float *a, uint16_t dh, double bound,
                       qtk__gb_unpacked *u, double *sxq, double *sqq) {
    const qtk__gb_fmt *F = T->F;
    const unsigned n = F->sub;
    const int smax = (F->schi - 1) / 2;
    const float d = qtk__f16_to_f32(dh);
    int8_t t[32];
    double E = 0.0;
    u->d = dh;
    for (unsigned g = 0; g < F->groups && E < bound; g++) {
        const float *xg = x + g * n, *wg = w + g * n;
        int s0 = d > 0.0f ? odd_near(a[g] / (d * F->dmul), smax) : 0;
        double best = DBL_MAX;
        for (int s = s0 - 1; s <= s0 + 1; s++) {
            if (s < 0 || s > smax) continue;
            float S = d * F->dmul * (float)(2 * s + 1); /* exact: d has 11 bits, 2s+1 5, dmul a power of 2 */
            gres r = group_at(T, xg, wg, n, S, t);
            if (r.e < best) {
                best = r.e, u->sc[g] = (int8_t)(2 * s + 1);
                memcpy(u->q + g * n, t, n);
                sxq[g] = r.sxq, sqq[g] = r.sqq;
            }
        }
        E += best;
    }
    return E;
}

void qtk__gb_lattice_quantize(const qtk__gb_fmt *F, const float *x, const float *w, bool mse, uint8_t *blk) {
    const ltype T = {F, &lgrids[grid_of(F->f)],
                     F->f == QTK__GF_IQ2_XXS || F->f == QTK__GF_IQ2_XS || F->f == QTK__GF_IQ3_XXS};
    const unsigned G = F->groups, n = F->sub;
    const int smax = (F->schi - 1) / 2;
    qtk__gb_unpacked u, t;
    memset(&u, 0, sizeof u);
    float a[QTK__GB_GROUPS_MAX], amax = 0.0f;
    double C[QTK__GB_GROUPS_MAX], sxq[QTK__GB_GROUPS_MAX], sqq[QTK__GB_GROUPS_MAX];
    /* no weights: all 1 */
    float wb[QTK__GB_QK_MAX];
    if (!w) {
        for (unsigned i = 0; i < F->qk; i++) wb[i] = 1.0f;
        w = wb;
    }
    for (unsigned g = 0; g < G; g++) {
        const float *xg = x + g * n, *wg = w + g * n;
        if (mse) {
            a[g] = group_fit(&T, xg, wg, n, &C[g]);
        } else { /* minmax: the group's largest magnitude on the top level */
            float m = 0.0f;
            for (unsigned i = 0; i < n; i++) m = fabsf(xg[i]) > m ? fabsf(xg[i]) : m;
            a[g] = m / qtop(&T), C[g] = 1.0;
        }
        amax = a[g] > amax ? a[g] : amax;
    }
    /* d = 0: every value 0 (a zero block, or one too small for f16) */
    double best = block_at(&T, x, w, a, 0, DBL_MAX, &u, sxq, sqq);
    if (amax > 0.0f) {
        uint16_t dc[DCAND + 1];
        int nd = 0;
        if (mse) {
            nd = d_candidates(a, C, G, amax, F->dmul, smax, dc);
        } else {
            dc[0] = qtk__f32_to_f16(amax / ((float)F->schi * F->dmul));
            nd = isfinite(qtk__f16_to_f32(dc[0])) ? 1 : 0;
        }
        if (nd == 0) dc[nd++] = 0x7bffu; /* beyond f16: the largest d */
        t = u;
        for (int i = 0; i < nd; i++) {
            double sx[QTK__GB_GROUPS_MAX], sq[QTK__GB_GROUPS_MAX];
            double e = block_at(&T, x, w, a, dc[i], best, &t, sx, sq);
            if (e < best) {
                best = e, u = t;
                memcpy(sxq, sx, sizeof sx), memcpy(sqq, sq, sizeof sq);
            }
        }
        if (mse) { /* d refitted on the chosen codes and sub-scales, the codes searched again */
            double num = 0.0, den = 0.0;
            for (unsigned g = 0; g < G; g++) {
                double k = (double)u.sc[g] * F->dmul;
                num += k * sxq[g], den += k * k * sqq[g];
            }
            uint16_t h = den > 0.0 && num > 0.0 ? qtk__f32_to_f16((float)(num / den)) : 0;
            if (h != u.d && isfinite(qtk__f16_to_f32(h))) {
                for (unsigned g = 0; g < G; g++) a[g] = qtk__f16_to_f32(h) * F->dmul * (float)u.sc[g];
                t = u;
                double sx[QTK__GB_GROUPS_MAX], sq[QTK__GB_GROUPS_MAX];
                double e = block_at(&T, x, w, a, h, best, &t, sx, sq);
                if (e < best) best = e, u = t;
            }
        }
    }
    qtk__gb_lattice_pack(F, &u, blk);
}
