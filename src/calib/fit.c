/* fit.c — table=fit: a lookup table fitted to the tensor it quantizes.
 *
 * The 2^bits entries are a weighted k-means (Lloyd's algorithm) of the scale-normalised
 * values u = x / s_g, each weighing w * s_g^2 so that the error minimized is the error of x
 * itself. The values are first binned into a fine histogram (per bin: sum of weights and of
 * weighted u, in double) in a fixed number of parts merged in order, so the fit does not
 * depend on the thread count; Lloyd's iterations then run on the bins.
 *
 *   minmax: s_g = max |x| of the group; the end entries stay at -1 and +1 (minmax maps
 *           the group's largest magnitude onto the table's largest), the others move;
 *   mse:    s_g = that max, with the sign of its element (so every group's largest value
 *           is +1 and a skewed distribution shows as one); every entry moves; then the
 *           scales are searched with that table, the values re-binned under the scales
 *           found, and the table refitted from where it was;
 *   given scales: s_g = the given effective scale.
 * The entries are finally rounded to f32 and made strictly increasing. */
#include "mse.h"

#include "../common/parallel.h"
#include "../exec/exec.h"
#include "calibrate.h"

#include <math.h>

#define FIT_PARTS 16
#define FIT_MAX_ITER 200

typedef struct {
    const qtk__plan *p;
    const float *x;
    const qtk__weights *w;
    const float *scale; /* per group: s_g (0: skip the group) */
    double lo, inv_width;
    size_t bins;
    double *hist; /* FIT_PARTS x bins x 2 */
} hist_job;

static void hist_parts(void *ctx, size_t b, size_t e, int worker) {
    (void)worker;
    const hist_job *H = ctx;
    const qtk__plan *p = H->p;
    for (size_t part = b; part < e; part++) {
        double *h = H->hist + part * H->bins * 2;
        size_t r0 = p->rows * part / FIT_PARTS, r1 = p->rows * (part + 1) / FIT_PARTS;
        for (size_t r = r0; r < r1; r++) {
            qtk__row ri;
            qtk__plan_row(p, r, &ri);
            const float *xr = H->x + r * p->inner, *wr = qtk__weights_row(H->w, r);
            for (size_t j = 0; j < p->inner; j++) {
                size_t gi = ri.scale_base + j / p->blk_last;
                double s = H->scale[gi];
                if (s == 0.0) continue;
                double u = (double)xr[j] / s;
                double wt = s * s;
                if (wr) wt *= wr[j];
                double fb = (u - H->lo) * H->inv_width;
                size_t bin = fb <= 0.0 ? 0 : fb >= (double)H->bins ? H->bins - 1 : (size_t)fb;
                h[2 * bin] += wt;
                h[2 * bin + 1] += wt * u;
            }
        }
    }
}

/* Lloyd's iterations on the histogram over [-R, R]: t (k sorted entries) in, fitted out. */
static void lloyd(const double *hist, size_t bins, double R, double *t, size_t k, bool pinned) {
    double *sw = qtk__calloc(k, sizeof(double)), *su = qtk__calloc(k, sizeof(double));
    if (!sw || !su) {
        qtk__free(sw);
        qtk__free(su);
        return; /* keep the seed: the fit is a refinement */
    }
    double width = 2.0 * R / (double)bins;
    for (int it = 0; it < FIT_MAX_ITER; it++) {
        memset(sw, 0, k * sizeof(double));
        memset(su, 0, k * sizeof(double));
        size_t e = 0;
        for (size_t b = 0; b < bins; b++) {
            double cb = -R + ((double)b + 0.5) * width;
            while (e + 1 < k && cb > 0.5 * (t[e] + t[e + 1])) e++;
            sw[e] += hist[2 * b];
            su[e] += hist[2 * b + 1];
        }
        double delta = 0.0;
        for (size_t i = 0; i < k; i++) {
            if (pinned && (i == 0 || i + 1 == k)) continue;
            if (!(sw[i] > 0.0)) continue;
            double v = su[i] / sw[i];
            delta = fmax(delta, fabs(v - t[i]));
            t[i] = v;
        }
        /* empty cells kept their entry: keep the order */
        for (size_t i = 1; i < k; i++)
            for (size_t j = i; j > 0 && t[j - 1] > t[j]; j--) {
                double tmp = t[j];
                t[j] = t[j - 1];
                t[j - 1] = tmp;
            }
        if (delta <= 1e-9 * R) break;
    }
    qtk__free(sw);
    qtk__free(su);
}

/* Bins the values under per-group scales and fits t from where it is. */
static qtk_status fit_round(const qtk__plan *p, const float *x, const qtk__weights *w, const float *scale, double R,
                            int threads, double *t, size_t k, bool pinned) {
    size_t bins = k * 32 > 4096 ? k * 32 : 4096;
    hist_job H = {p, x, w, scale, -R, (double)bins / (2.0 * R), bins, NULL};
    H.hist = qtk__calloc(FIT_PARTS * bins * 2, sizeof(double));
    if (!H.hist) return qtk__err(QTK_E_NOMEM, "out of memory for the table fit's histogram");
    int th = qtk__threads_for(threads, p->L.numel);
    qtk__parallel_for(th, FIT_PARTS, hist_parts, &H);
    for (size_t part = 1; part < FIT_PARTS; part++)
        for (size_t i = 0; i < bins * 2; i++) H.hist[i] += H.hist[part * bins * 2 + i];
    lloyd(H.hist, bins, R, t, k, pinned);
    qtk__free(H.hist);
    return QTK_OK;
}

/* Per-group max |x| and the sign of its first element; the first non-finite input. */
static qtk_status group_max(const qtk__plan *p, const float *x, float *amax, float *smax) {
    for (size_t r = 0; r < p->rows; r++) {
        qtk__row ri;
        qtk__plan_row(p, r, &ri);
        const float *xr = x + r * p->inner;
        for (size_t j = 0; j < p->inner; j++) {
            float a = fabsf(xr[j]);
            if (!qtk__isfinite(a)) return qtk__nonfinite_error(p, xr[j], r * p->inner + j, "input value");
            size_t gi = ri.scale_base + j / p->blk_last;
            if (a > amax[gi]) {
                amax[gi] = a;
                smax[gi] = xr[j] < 0.0f ? -1.0f : 1.0f;
            }
        }
    }
    return QTK_OK;
}

static void set_table(qtk__plan *p, const double *t, size_t k) {
    float f[256];
    for (size_t i = 0; i < k; i++) f[i] = (float)t[i];
    for (size_t i = 1; i < k; i++)
        if (!(f[i] > f[i - 1])) f[i] = nextafterf(f[i - 1], INFINITY);
    qtk__plan_set_table(p, f);
}

static double range_of(const float *amax, const float *s, size_t n) {
    double R = 1.0;
    for (size_t i = 0; i < n; i++)
        if (s[i] != 0.0f) {
            double q = (double)amax[i] / fabs((double)s[i]);
            if (q > R) R = q;
        }
    return R * (1.0 + 1e-6);
}

qtk_status qtk__fit_table(qtk__plan *p, const float *x, const qtk__weights *w, qtk_calibration cal, const float *eff,
                          int threads, uint8_t *scratch) {
    size_t n = p->L.n_scales, k = p->table_n;
    float *amax = qtk__calloc(n ? n : 1, sizeof(float)), *smax = qtk__malloc((n ? n : 1) * sizeof(float));
    float *s = qtk__malloc((n ? n : 1) * sizeof(float));
    qtk_status st = amax && smax && s ? QTK_OK : qtk__err(QTK_E_NOMEM, "out of memory for %zu scale groups", n);
    double t[256];
    for (size_t i = 0; i < k; i++) t[i] = (double)p->table[i]; /* the seed */
    for (size_t i = 0; !st && i < n; i++) smax[i] = 1.0f;
    if (!st) st = group_max(p, x, amax, smax);
    if (!st && p->rows > 0) {
        if (eff) {
            memcpy(s, eff, n * sizeof(float));
            st = fit_round(p, x, w, s, range_of(amax, s, n), threads, t, k, false);
        } else {
            bool mse = cal == QTK_CALIB_MSE;
            for (size_t i = 0; i < n; i++) s[i] = mse ? smax[i] * amax[i] : amax[i];
            st = fit_round(p, x, w, s, 1.0 + 1e-6, threads, t, k, !mse);
            if (!st && mse) {
                /* refit under the scales the search picks with this table */
                set_table(p, t, k);
                size_t bad, bad_group;
                float g = qtk__scales_global(p, amax, n);
                st = qtk__mse_pass(p, x, w, g, threads, scratch, false, s, NULL, NULL, &bad, &bad_group);
                if (!st && bad == SIZE_MAX && bad_group == SIZE_MAX)
                    st = fit_round(p, x, w, s, range_of(amax, s, n), threads, t, k, false);
            }
        }
    }
    if (!st) set_table(p, t, k);
    qtk__free(amax);
    qtk__free(smax);
    qtk__free(s);
    return st;
}
