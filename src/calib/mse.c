/* mse.c — calibration mse over a whole tensor (see mse.h here and kernels/mse.h).
 *
 * Groups of up to QTK__MSE_LANE_MAX elements go to the kernels' search. Longer ones (per-
 * row scales of long rows, per-tensor scales, large N-D blocks) are searched here by the
 * same steps with sums kept per run of BIG_SUB elements (f32, in element order) and added
 * in double in run order, so a per-tensor group can be evaluated by several threads with
 * the same result. Every decision is made from numbers that do not depend on the kernel
 * level or the thread count: results are bit-identical across both. */
#include "mse.h"

#include "../common/parallel.h"
#include "../exec/exec.h"
#include "calibrate.h"

#include <math.h>
#include <stdio.h>

#define BIG_SUB 4096u
#define CHUNK_ELEMS 16384u
#define MAX_WORKERS 256
#define BIG_MAX_CAND 32
#define TERN_EXACT_MAX ((size_t)1 << 22)

/* ---- weights ---- */

qtk_status qtk__weights_resolve(const qtk__plan *p, const qtk_quantize_options *o, qtk__weights *out) {
    memset(out, 0, sizeof *out);
    if (!o->weights) {
        if (o->n_weights) return qtk__err(QTK_E_ARG, "n_weights is %zu but weights is NULL", o->n_weights);
        return QTK_OK;
    }
    size_t cols = p->L.rank > 0 ? p->L.shape[p->L.rank - 1] : 1, lead = p->L.rank >= 3 ? p->L.shape[0] : 0;
    out->inner = p->inner ? p->inner : 1;
    if (o->n_weights == p->L.numel) out->row_div = 1;
    else if (o->n_weights == cols) out->row_div = 0;
    else if (lead && o->n_weights == lead * cols) out->row_div = p->rows / lead;
    else {
        char sb[256], ex[96] = "";
        if (p->L.rank >= 3) snprintf(ex, sizeof ex, ", or one per first index and column (%zu)", lead * cols);
        return qtk__err(QTK_E_LENGTH,
                        "%zu importance weights given for a tensor of shape %s: give one per element (%zu) or one "
                        "per column of the last dimension (%zu)%s",
                        o->n_weights, qtk_shape_format(p->L.shape, p->L.rank, sb, sizeof sb), p->L.numel, cols, ex);
    }
    for (size_t i = 0; i < o->n_weights; i++) {
        float v = o->weights[i];
        if (!qtk__isfinite(v) || v < 0.0f)
            return qtk__err(QTK_E_VALUE, "importance weight %zu is %g; weights must be finite and >= 0", i, (double)v);
    }
    out->w = o->weights;
    return QTK_OK;
}

/* ---- longer groups: the search with double decisions ---- */

typedef struct {
    const qtk__mse_cfg *c;
    const float *x, *w;
    size_t wperiod, n, nsub;
    float m;
    bool trial;
    int ncand;
    float scale[BIG_MAX_CAND]; /* trial: inverse scales; exact: normalised effective scales */
    float *part;               /* nsub x ncand x 3 */
} big_eval;

static void big_eval_range(void *ctx, size_t b, size_t e, int worker) {
    (void)worker;
    const big_eval *E = ctx;
    const qtk__mse_cfg *c = E->c;
    for (size_t sub = b; sub < e; sub++) {
        size_t j0 = sub * BIG_SUB, j1 = j0 + BIG_SUB < E->n ? j0 + BIG_SUB : E->n;
        for (int k = 0; k < E->ncand; k++) {
            float s = E->scale[k], err = 0.0f, sxv = 0.0f, svv = 0.0f;
            bool bad = !E->trial && !qtk__isfinite(s);
            for (size_t j = j0; j < j1 && !bad; j++) {
                float xn = E->x[j] * E->m;
                float w = E->w ? E->w[j % E->wperiod] : 1.0f;
                float v;
                if (E->trial) {
                    v = qtk__mse_value_trial(c, xn * s);
                } else {
                    float d;
                    if (s == 0.0f) {
                        v = c->zero_value;
                        d = xn;
                    } else {
                        v = qtk__mse_value_exact(c, xn / s);
                        d = xn - v * s;
                    }
                    err += E->w ? w * (d * d) : d * d;
                }
                if (E->w) {
                    sxv += (w * xn) * v;
                    svv += (w * v) * v;
                } else {
                    sxv += xn * v;
                    svv += v * v;
                }
            }
            float *o = E->part + (sub * (size_t)E->ncand + (size_t)k) * 3;
            o[0] = bad ? INFINITY : err;
            o[1] = bad ? 0.0f : sxv;
            o[2] = bad ? 0.0f : svv;
        }
    }
}

/* Sums per candidate: out[k] = {err, sxv, svv} */
static void big_evaluate(big_eval *E, int threads, double (*out)[3]) {
    qtk__parallel_for(threads, E->nsub, big_eval_range, E);
    for (int k = 0; k < E->ncand; k++) {
        out[k][0] = out[k][1] = out[k][2] = 0.0;
        for (size_t s = 0; s < E->nsub; s++)
            for (int q = 0; q < 3; q++) out[k][q] += (double)E->part[(s * (size_t)E->ncand + (size_t)k) * 3 + q];
    }
}

typedef struct {
    uint32_t code;
    float eff;
    double err, adj, sxv, svv;
} big_choice;

static void big_consider(const qtk__mse_cfg *c, big_eval *E, int threads, float g, const uint32_t *codes, int n,
                         big_choice *best) {
    E->trial = false;
    E->ncand = n;
    float eff[BIG_MAX_CAND];
    for (int k = 0; k < n; k++) {
        eff[k] = qtk__mse_eff(c, codes[k], g);
        E->scale[k] = eff[k] * E->m;
    }
    double r[BIG_MAX_CAND][3];
    big_evaluate(E, threads, r);
    for (int k = 0; k < n; k++) {
        double adj = r[k][0] * (1.0 + (double)QTK__MSE_MARGIN);
        if (adj < best->adj) *best = (big_choice){codes[k], eff[k], r[k][0], adj, r[k][1], r[k][2]};
    }
}

static int big_ls_codes(const qtk__mse_cfg *c, float g, float m, double r, uint32_t *out) {
    float s = (float)r / m;
    if (c->p->two_level) s = s / g;
    s = qtk__mse_clamp(s);
    if (!c->ls_pair && !c->ternary) {
        out[0] = qtk__mse_code_nearest(c, s);
        return 1;
    }
    out[0] = qtk__mse_code_floor(c, s);
    out[1] = qtk__mse_code_ceil(c, s);
    return 2;
}

/* The search of one group of n contiguous values (weights w[j % wperiod], or none). */
static qtk_status big_search(const qtk__mse_cfg *c, const float *x, const float *w, size_t wperiod, size_t n, float g,
                             int threads, uint32_t *code, float *eff, double *err) {
    const qtk__plan *p = c->p;
    float amax = 0.0f, smax = 1.0f;
    for (size_t j = 0; j < n; j++) {
        float a = fabsf(x[j]);
        if (!qtk__isfinite(a)) {
            *code = 0;
            *eff = qtk__bits_f32(0x7fc00000u);
            *err = 0.0;
            return QTK_OK;
        }
        if (a > amax) {
            amax = a;
            smax = x[j] < 0.0f ? -1.0f : 1.0f;
        }
    }
    float raw = amax / p->div;
    if (p->two_level) raw = raw / g;
    uint32_t c0 = qtk_fmt_round_up(c->dt, raw);
    *code = c0;
    *eff = qtk__mse_eff(c, c0, g);
    *err = 0.0;
    if (amax == 0.0f) return QTK_OK;
    big_eval E = {.c = c, .x = x, .w = w, .wperiod = wperiod ? wperiod : 1, .n = n, .nsub = qtk__ceil_div(n, BIG_SUB)};
    E.m = qtk__mse_norm(amax);
    float an = amax * E.m;
    E.part = qtk__malloc(E.nsub * BIG_MAX_CAND * 3 * sizeof(float));
    if (!E.part) return qtk__err(QTK_E_NOMEM, "out of memory for the search of a %zu-element group", n);
    big_choice best = {c0, *eff, INFINITY, INFINITY, 0, 0};
    big_consider(c, &E, threads, g, &c0, 1, &best);
    best.adj = best.err; /* c0 carries no margin */
    qtk_status st = QTK_OK;
    if (c->grid) {
        uint32_t cs[BIG_MAX_CAND];
        int k = 0;
        for (int i = 0; i < c->n_grid && k < BIG_MAX_CAND; i++) {
            if (c->dt == QTK_DTYPE_UE8M0 || c0 >= 16) {
                int64_t v = (int64_t)c0 + c->grid_off[i];
                cs[k++] = (uint32_t)(v < 0 ? 0 : v > c->grid_max ? c->grid_max : v);
            } else {
                cs[k++] = qtk__mse_code_nearest(c, qtk__mse_clamp(raw * c->grid_f[i]));
            }
        }
        big_consider(c, &E, threads, g, cs, k, &best);
    } else {
        double r0 = 0.0;
        bool have = false;
        if (c->ternary && n <= TERN_EXACT_MAX) {
            float *xn = qtk__malloc(n * sizeof(float));
            void *scratch = qtk__malloc(n * QTK__MSE_TERN_ITEM);
            if (!xn || !scratch) st = qtk__err(QTK_E_NOMEM, "out of memory for the search of a %zu-element group", n);
            if (!st) {
                for (size_t j = 0; j < n; j++) xn[j] = x[j] * E.m;
                r0 = (double)(float)qtk__mse_ternary_scale(xn, w, E.wperiod, n, scratch);
                have = true;
            }
            qtk__free(xn);
            qtk__free(scratch);
        }
        if (!st && !have) {
            double best_score = 0.0;
            int nsign = c->sign == QTK__MSE_SIGN_BOTH ? 2 : 1;
            for (int si = 0; si < nsign; si++) {
                float sg = c->sign == QTK__MSE_SIGN_POS   ? 1.0f
                           : c->sign == QTK__MSE_SIGN_MAX ? c->sign_max * smax
                           : si == 0                      ? 1.0f
                                                          : -1.0f;
                float ext = sg * smax > 0.0f ? c->ext_pos : c->ext_neg;
                E.trial = true;
                E.ncand = c->n_trials;
                for (int t = 0; t < c->n_trials; t++) E.scale[t] = (sg * ext) / (an * c->trial[t]);
                double r[BIG_MAX_CAND][3];
                big_evaluate(&E, threads, r);
                for (int t = 0; t < c->n_trials; t++) {
                    if (!(r[t][2] > 0.0)) continue;
                    double rr = r[t][1] / r[t][2], sc = r[t][1] * rr;
                    if (sc > best_score) {
                        best_score = sc;
                        r0 = rr;
                    }
                }
            }
        }
        if (!st) {
            uint32_t cs[2];
            int nc = big_ls_codes(c, g, E.m, r0, cs);
            big_consider(c, &E, threads, g, cs, nc, &best);
            if (c->lloyd && !c->ternary) {
                nc = big_ls_codes(c, g, E.m, best.svv > 0.0 ? best.sxv / best.svv : 0.0, cs);
                big_consider(c, &E, threads, g, cs, nc, &best);
            }
        }
    }
    qtk__free(E.part);
    *code = best.code;
    *eff = best.eff;
    *err = best.err / ((double)E.m * (double)E.m);
    return st;
}

/* ---- groups of rows (chunkable plans: groups are segments of rows) ---- */

typedef struct {
    const qtk__plan *p;
    const qtk__mse_cfg *c;
    const float *x;
    const qtk__weights *w;
    float g;
    uint8_t *dst;
    bool encode;
    float *eff_all;
    double *err_all;          /* per group (optional) */
    double *chunk_err;        /* per chunk */
    size_t chunk_rows, chunk_groups;
    qtk__mse_src *src;        /* per worker: chunk_groups */
    float *eff;               /* per worker: chunk_groups */
    double *err;              /* per worker: chunk_groups */
    size_t bad[MAX_WORKERS], bad_group[MAX_WORKERS];
    qtk_status st[MAX_WORKERS];
} rows_job;

static void mse_kernel(const qtk__mse_cfg *c, const qtk__mse_src *src, size_t n, float g, uint8_t *codes, float *eff,
                       double *err) {
    const qtk__kernels *k = qtk__kernels_active();
    if (!k->mse_groups || !k->mse_groups(c, src, n, g, codes, eff, err)) qtk__ref_mse_groups(c, src, n, g, codes, eff, err);
}

static void rows_chunk(void *ctx, size_t b, size_t e, int wk) {
    rows_job *J = ctx;
    const qtk__plan *p = J->p;
    const size_t inner = p->inner, blk = p->blk_last;
    qtk__mse_src *src = J->src + (size_t)wk * J->chunk_groups;
    float *eff = J->eff + (size_t)wk * J->chunk_groups;
    double *err = J->err + (size_t)wk * J->chunk_groups;
    unsigned sz = qtk__scale_size(p->L.scale_dtype);
    for (size_t ch = b; ch < e; ch++) {
        size_t r0 = ch * J->chunk_rows, r1 = r0 + J->chunk_rows < p->rows ? r0 + J->chunk_rows : p->rows;
        size_t g0 = qtk__exec_first_group(p, r0), n = qtk__exec_first_group(p, r1) - g0;
        const float *x = J->x + r0 * inner;
        size_t k = 0;
        for (size_t r = r0; r < r1; r++)
            for (size_t j0 = 0; j0 < inner; j0 += blk, k++) {
                size_t len = j0 + blk < inner ? blk : inner - j0;
                src[k].x = J->x + r * inner + j0;
                src[k].w = J->w->w ? qtk__weights_row(J->w, r) + j0 : NULL;
                src[k].len = len;
            }
        uint8_t *codes = J->dst + p->L.scales_offset + g0 * sz;
        if (blk <= QTK__MSE_LANE_MAX || inner <= QTK__MSE_LANE_MAX) {
            /* the next chunk comes from memory while this one is searched (the search reads
             * groups lane by lane, a pattern the hardware prefetchers do not follow): a slice
             * of it after each slice of this one's groups */
            const char *nx = ch + 1 < e ? (const char *)(J->x + r1 * inner) : NULL;
            size_t nb = nx ? (r1 + J->chunk_rows < p->rows ? J->chunk_rows : p->rows - r1) * inner * sizeof(float) : 0;
            const size_t slices = 8;
            for (size_t sl = 0; sl < slices; sl++) {
                size_t a = n * sl / slices, z = n * (sl + 1) / slices;
                if (z > a)
                    mse_kernel(J->c, src + a, z - a, J->g, codes + a * sz, eff + a,
                               J->chunk_err || J->err_all ? err + a : NULL);
                for (size_t o = nb * sl / slices & ~(size_t)63; o < nb * (sl + 1) / slices; o += 64)
                    __builtin_prefetch(nx + o, 0, 2);
            }
        } else {
            for (size_t i = 0; i < n; i++) {
                uint32_t code;
                qtk_status st = big_search(J->c, src[i].x, src[i].w, src[i].len, src[i].len, J->g, 1, &code, eff + i,
                                           err + i);
                if (st) {
                    J->st[wk] = st;
                    return;
                }
                qtk__scale_store(p->L.scale_dtype, codes + i * sz, code);
            }
        }
        double tot = 0.0;
        for (size_t i = 0; i < n; i++) {
            if (eff[i] != eff[i]) { /* a non-finite input in the chunk: its lowest index */
                size_t bad = qtk__ref_first_nonfinite(x, (r1 - r0) * inner) + r0 * inner;
                if (bad < J->bad[wk]) J->bad[wk] = bad;
                return;
            }
            if (!qtk__isfinite(eff[i])) {
                if (g0 + i < J->bad_group[wk]) J->bad_group[wk] = g0 + i;
                return;
            }
            if (J->chunk_err) tot += err[i];
        }
        if (J->chunk_err) J->chunk_err[ch] = tot;
        if (J->eff_all) memcpy(J->eff_all + g0, eff, n * sizeof(float));
        if (J->err_all) memcpy(J->err_all + g0, err, n * sizeof(double));
        if (J->encode) qtk__exec_encode_rows(p, x, eff, g0, J->dst, r0, r1);
    }
}

static qtk_status pass_rows(const qtk__plan *p, const qtk__mse_cfg *c, const float *x, const qtk__weights *w, float g,
                            int threads, uint8_t *dst, bool encode, float *eff_all, double *err_all, double *total,
                            size_t *bad, size_t *bad_group) {
    rows_job *J = qtk__calloc(1, sizeof *J);
    if (!J) return qtk__err(QTK_E_NOMEM, "out of memory");
    J->p = p;
    J->c = c;
    J->x = x;
    J->w = w;
    J->g = g;
    J->dst = dst;
    J->encode = encode;
    J->eff_all = eff_all;
    J->err_all = err_all;
    J->chunk_rows = p->inner >= CHUNK_ELEMS ? 1 : CHUNK_ELEMS / p->inner;
    J->chunk_groups = J->chunk_rows * qtk__ceil_div(p->inner, p->blk_last);
    size_t chunks = qtk__ceil_div(p->rows, J->chunk_rows);
    int t = qtk__threads_for(threads, p->L.numel);
    if ((size_t)t > chunks) t = (int)chunks;
    if (t > MAX_WORKERS) t = MAX_WORKERS;
    size_t per = (size_t)t * J->chunk_groups;
    J->src = qtk__malloc(per * sizeof *J->src);
    J->eff = qtk__malloc(per * sizeof(float));
    J->err = qtk__malloc(per * sizeof(double));
    J->chunk_err = total ? qtk__calloc(chunks, sizeof(double)) : NULL;
    qtk_status st = QTK_OK;
    if (!J->src || !J->eff || !J->err || (total && !J->chunk_err))
        st = qtk__err(QTK_E_NOMEM, "out of memory for the search of %zu scale groups", p->L.n_scales);
    for (int i = 0; i < MAX_WORKERS; i++) J->bad[i] = J->bad_group[i] = SIZE_MAX;
    if (!st) qtk__parallel_for(t, chunks, rows_chunk, J);
    for (int i = 0; !st && i < t; i++) {
        if (J->st[i]) st = J->st[i];
        if (J->bad[i] < *bad) *bad = J->bad[i];
        if (J->bad_group[i] < *bad_group) *bad_group = J->bad_group[i];
    }
    if (!st && total) {
        *total = 0.0;
        for (size_t i = 0; i < chunks; i++) *total += J->chunk_err[i];
    }
    qtk__free(J->src);
    qtk__free(J->eff);
    qtk__free(J->err);
    qtk__free(J->chunk_err);
    qtk__free(J);
    return st;
}

/* ---- any plan: groups gathered from their blocks ---- */

/* Flat indices of group gi's elements in row-major order of the block. Returns the count. */
static size_t group_elements(const qtk__plan *p, size_t gi, size_t *idx) {
    int R = p->erank;
    size_t lo[QTK_MAX_RANK], hi[QTK_MAX_RANK], st[QTK_MAX_RANK], rem = gi;
    size_t s = 1;
    for (int i = R - 1; i >= 0; i--) {
        size_t gc = p->L.rank > 0 ? rem / p->gstride[i] % p->L.grid[i] : 0;
        lo[i] = gc * p->L.block[i];
        hi[i] = lo[i] + p->L.block[i] < p->eshape[i] ? lo[i] + p->L.block[i] : p->eshape[i];
        st[i] = s;
        s *= p->eshape[i];
    }
    size_t c[QTK_MAX_RANK], n = 0;
    for (int i = 0; i < R; i++) {
        c[i] = lo[i];
        if (lo[i] >= hi[i]) return 0;
    }
    for (;;) {
        size_t f = 0;
        for (int i = 0; i < R; i++) f += c[i] * st[i];
        size_t run = hi[R - 1] - lo[R - 1];
        for (size_t k = 0; k < run; k++) idx[n++] = f + k;
        int i = R - 2;
        for (; i >= 0; i--) {
            if (++c[i] < hi[i]) break;
            c[i] = lo[i];
        }
        if (i < 0) break;
    }
    return n;
}

static size_t group_size(const qtk__plan *p) {
    size_t n = 1;
    for (int i = 0; i < p->erank; i++) n *= p->L.block[i] < p->eshape[i] ? p->L.block[i] : p->eshape[i];
    return n;
}

static qtk_status pass_groups(const qtk__plan *p, const qtk__mse_cfg *c, const float *x, const qtk__weights *w, float g,
                              int threads, uint8_t *dst, bool encode, float *eff_all, double *err_all, double *total,
                              size_t *bad, size_t *bad_group) {
    size_t ng = p->L.n_scales, gmax = group_size(p);
    unsigned sz = qtk__scale_size(p->L.scale_dtype);
    float *eff = eff_all ? eff_all : qtk__malloc((ng ? ng : 1) * sizeof(float));
    size_t cap = gmax > CHUNK_ELEMS ? gmax : CHUNK_ELEMS;
    bool whole = ng == 1 && gmax == p->L.numel; /* one group: the tensor, in order */
    float *xb = whole ? NULL : qtk__malloc(cap * sizeof(float));
    float *wb = whole || !w->w ? NULL : qtk__malloc(cap * sizeof(float));
    size_t *idx = whole ? NULL : qtk__malloc(gmax * sizeof(size_t));
    qtk__mse_src *src = qtk__malloc((CHUNK_ELEMS + 1) * sizeof *src);
    double *err = qtk__malloc((CHUNK_ELEMS + 1) * sizeof(double));
    qtk_status st = QTK_OK;
    if (!eff || (!whole && (!xb || !idx || (w->w && !wb))) || !src || !err)
        st = qtk__err(QTK_E_NOMEM, "out of memory for the search of %zu scale groups", ng);
    double tot = 0.0;
    if (!st && whole) {
        size_t b = qtk__ref_first_nonfinite(x, p->L.numel);
        if (b != SIZE_MAX) *bad = b;
        else if (p->L.numel <= QTK__MSE_LANE_MAX) {
            float wt[QTK__MSE_LANE_MAX];
            for (size_t j = 0; w->w && j < p->L.numel; j++) wt[j] = qtk__weights_at(w, j);
            qtk__mse_src s1 = {x, w->w ? wt : NULL, p->L.numel};
            mse_kernel(c, &s1, 1, g, dst + p->L.scales_offset, eff, err);
            tot = err[0];
            if (err_all) err_all[0] = err[0];
        } else {
            uint32_t code;
            /* weights as a period over the flat index: per column, per element, or expanded */
            const float *wp = w->w;
            float *wexp = NULL;
            size_t period = w->row_div == 0 ? p->inner : p->L.numel;
            if (w->w && w->row_div > 1) {
                wexp = qtk__malloc(p->L.numel * sizeof(float));
                if (!wexp) st = qtk__err(QTK_E_NOMEM, "out of memory for %zu weights", p->L.numel);
                for (size_t j = 0; wexp && j < p->L.numel; j++) wexp[j] = qtk__weights_at(w, j);
                wp = wexp;
            }
            if (!st)
                st = big_search(c, x, wp, period, p->L.numel, g, qtk__threads_for(threads, p->L.numel), &code, eff, err);
            qtk__free(wexp);
            if (!st) qtk__scale_store(p->L.scale_dtype, dst + p->L.scales_offset, code);
            tot = err[0];
            if (err_all) err_all[0] = err[0];
        }
    }
    for (size_t gi = 0; !st && !whole && gi < ng && *bad == SIZE_MAX;) {
        /* a batch of short groups, or one long one */
        size_t used = 0, nb = 0, g0 = gi;
        while (gi < ng && nb < CHUNK_ELEMS) {
            size_t n = group_elements(p, gi, idx);
            if (n > QTK__MSE_LANE_MAX && nb > 0) break;
            if (used + n > cap) break;
            for (size_t k = 0; k < n; k++) {
                float v = x[idx[k]];
                if (!qtk__isfinite(v) && idx[k] < *bad) *bad = idx[k];
                xb[used + k] = v;
                if (wb) wb[used + k] = qtk__weights_at(w, idx[k]);
            }
            src[nb] = (qtk__mse_src){xb + used, wb ? wb + used : NULL, n};
            used += n;
            nb++;
            gi++;
            if (n > QTK__MSE_LANE_MAX) break;
        }
        if (*bad != SIZE_MAX) {
            *bad = qtk__ref_first_nonfinite(x, p->L.numel); /* the lowest index, wherever it is */
            break;
        }
        uint8_t *codes = dst + p->L.scales_offset + g0 * sz;
        if (nb == 1 && src[0].len > QTK__MSE_LANE_MAX) {
            uint32_t code;
            st = big_search(c, src[0].x, src[0].w, src[0].len, src[0].len, g, 1, &code, eff + g0, err);
            if (!st) qtk__scale_store(p->L.scale_dtype, codes, code);
        } else {
            /* empty groups (a zero extent) never reach here: ng is 0 then */
            mse_kernel(c, src, nb, g, codes, eff + g0, err);
        }
        for (size_t i = 0; i < nb; i++) tot += err[i];
        if (err_all) memcpy(err_all + g0, err, nb * sizeof(double));
    }
    for (size_t i = 0; !st && *bad == SIZE_MAX && i < ng; i++)
        if (!qtk__isfinite(eff[i])) {
            *bad_group = i;
            break;
        }
    if (!st && total) *total = tot;
    if (!st && encode && *bad == SIZE_MAX && *bad_group == SIZE_MAX) st = qtk__exec_encode(p, x, eff, dst, threads);
    if (eff != eff_all) qtk__free(eff);
    qtk__free(xb);
    qtk__free(wb);
    qtk__free(idx);
    qtk__free(src);
    qtk__free(err);
    return st;
}

qtk_status qtk__mse_pass(const qtk__plan *p, const float *x, const qtk__weights *w, float g, int threads, uint8_t *dst,
                         bool encode, float *eff_all, double *err_all, double *total, size_t *bad, size_t *bad_group) {
    *bad = *bad_group = SIZE_MAX;
    if (total) *total = 0.0;
    qtk__mse_cfg c;
    qtk__mse_cfg_init(&c, p);
    if (qtk__exec_chunkable(p))
        return pass_rows(p, &c, x, w, g, threads, dst, encode, eff_all, err_all, total, bad, bad_group);
    if (p->L.n_scales == 0) {
        if (encode) memset(dst, 0, p->L.value_bytes);
        return QTK_OK;
    }
    return pass_groups(p, &c, x, w, g, threads, dst, encode, eff_all, err_all, total, bad, bad_group);
}

/* ---- the whole tensor ---- */

static qtk_status pass_errors(const qtk__plan *p, const float *x, size_t bad, size_t bad_group, float g) {
    if (bad != SIZE_MAX) return qtk__nonfinite_error(p, x[bad], bad, "input value");
    if (bad_group != SIZE_MAX)
        return qtk__err(QTK_E_VALUE, "effective scale of group %zu overflows f32 (global %g x its block scale)",
                        bad_group, (double)g);
    return QTK_OK;
}

/* The search of the listed groups alone at global g: their errors in err (codes and
 * effective scales go to scratch). */
static qtk_status search_subset(const qtk__plan *p, const qtk__mse_cfg *c, const float *x, const qtk__weights *w,
                                float g, const size_t *list, size_t n, double *err, uint32_t *codes_out,
                                float *eff_out) {
    size_t gmax = group_size(p);
    bool rows = qtk__exec_chunkable(p);
    size_t gpr = rows ? qtk__ceil_div(p->inner, p->blk_last) : 0;
    enum { BATCH = 256 };
    size_t cap = rows ? 1 : (gmax > BATCH * QTK__MSE_LANE_MAX ? gmax : BATCH * QTK__MSE_LANE_MAX);
    float *xb = qtk__malloc(cap * sizeof(float)), *wb = qtk__malloc(cap * sizeof(float));
    size_t *idx = qtk__malloc((rows ? 1 : gmax) * sizeof(size_t));
    qtk__mse_src *src = qtk__malloc(BATCH * sizeof *src);
    uint8_t *codes = qtk__malloc(BATCH * 4);
    qtk_status st = xb && wb && idx && src && codes ? QTK_OK : qtk__err(QTK_E_NOMEM, "out of memory");
    for (size_t i = 0; !st && i < n;) {
        size_t nb = 0, used = 0;
        while (i + nb < n && nb < BATCH) {
            size_t gi = list[i + nb];
            qtk__mse_src q;
            if (rows) {
                size_t r = gi / gpr, j0 = (gi % gpr) * p->blk_last;
                q.x = x + r * p->inner + j0;
                q.w = w->w ? qtk__weights_row(w, r) + j0 : NULL;
                q.len = j0 + p->blk_last < p->inner ? p->blk_last : p->inner - j0;
            } else {
                size_t k = group_elements(p, gi, idx);
                if (nb > 0 && (k > QTK__MSE_LANE_MAX || used + k > cap)) break;
                for (size_t e = 0; e < k; e++) {
                    xb[used + e] = x[idx[e]];
                    if (w->w) wb[used + e] = qtk__weights_at(w, idx[e]);
                }
                q = (qtk__mse_src){xb + used, w->w ? wb + used : NULL, k};
                used += k;
            }
            src[nb++] = q;
            if (q.len > QTK__MSE_LANE_MAX) break;
        }
        if (nb == 1 && src[0].len > QTK__MSE_LANE_MAX) {
            st = big_search(c, src[0].x, src[0].w, src[0].len, src[0].len, g, 1, codes_out + i, eff_out + i, err + i);
        } else {
            mse_kernel(c, src, nb, g, codes, eff_out + i, err + i);
            for (size_t k = 0; k < nb; k++) {
                const uint8_t *q = codes + k * c->sz;
                codes_out[i + k] = c->sz == 1 ? q[0] : c->sz == 2 ? qtk__ld16(q) : qtk__ld32(q);
            }
        }
        i += nb;
    }
    qtk__free(xb);
    qtk__free(wb);
    qtk__free(idx);
    qtk__free(src);
    qtk__free(codes);
    return st;
}

qtk_status qtk__mse_quantize(const qtk__plan *p, const float *x, const qtk__weights *w, int threads, uint8_t *dst,
                             float *global) {
    size_t bad = SIZE_MAX, bad_group = SIZE_MAX;
    if (!p->two_level) {
        *global = 1.0f;
        qtk_status st = qtk__mse_pass(p, x, w, 1.0f, threads, dst, true, NULL, NULL, NULL, &bad, &bad_group);
        return st ? st : pass_errors(p, x, bad, bad_group, 1.0f);
    }
    /* Two-level: the global. Scaling it by 2^j moves every block code by j octaves: a block
     * whose candidates stay among the block dtype's normal, unsaturated codes keeps exactly
     * its effective scales, fields and error. Only the others — blocks near the dtype's
     * largest value, whose best scale the saturation may cut, and blocks near or among its
     * subnormals, where the grid thins out — change; they are searched again at 2 g0 and at
     * g0 / 2, g0 / 4, ... (while that pays, and while these re-searches stay within a
     * quarter of the groups), and the global with the least total error wins (minmax's g0
     * unless another is clearly better). The totals compared are the exact totals of the
     * results: a kept group's chosen code must itself move by whole octaves. */
    size_t n = p->L.n_scales, n1 = n ? n : 1;
    size_t budget = n / 4 + 1; /* groups searched again, at most: the global costs <= 1/4 more */
    float *alpha = qtk__calloc(n1, sizeof(float)), *eff0 = qtk__malloc(n1 * sizeof(float));
    double *err0 = qtk__malloc(n1 * sizeof(double));
    uint8_t *c0b = qtk__malloc(n1 * 2); /* minmax's codes (ue4m3: 1 byte, f16: 2) */
    size_t *list = qtk__malloc(budget * sizeof(size_t));
    /* the re-searched groups, and the best alternative's */
    double *ej = qtk__malloc(budget * sizeof(double));
    uint32_t *cj = qtk__malloc(budget * sizeof(uint32_t)), *cb = qtk__malloc(budget * sizeof(uint32_t));
    float *fj = qtk__malloc(budget * sizeof(float)), *fb = qtk__malloc(budget * sizeof(float));
    size_t *lb = qtk__malloc(budget * sizeof(size_t)), mb = 0;
    qtk_status st = alpha && eff0 && err0 && c0b && list && ej && cj && cb && fj && fb && lb
                        ? QTK_OK
                        : qtk__err(QTK_E_NOMEM, "out of memory for %zu scales", n);
    float g0 = 1.0f, g = 1.0f;
    if (!st) st = qtk__calibrate_alpha(p, x, QTK_CALIB_MINMAX, threads, alpha);
    if (!st) g = g0 = qtk__scales_global(p, alpha, n);
    if (!st) { /* minmax's codes: the kernels' stored-scale rule (eff0 is scratch here) */
        const qtk__kernels *kk = qtk__kernels_active();
        if (!kk->finish_scales || !kk->finish_scales(p, alpha, n, g0, c0b, eff0))
            qtk__kernels_ref.finish_scales(p, alpha, n, g0, c0b, eff0);
    }
    if (!st) st = qtk__mse_pass(p, x, w, g0, threads, dst, true, eff0, err0, NULL, &bad, &bad_group);
    if (!st) st = pass_errors(p, x, bad, bad_group, g0);
    qtk__mse_cfg c;
    qtk__mse_cfg_init(&c, p);
    bool ue = p->s.block_dtype == QTK_DTYPE_UE4M3;
    const int32_t oct = ue ? 8 : 0x400, nmin = ue ? 8 : 0x400, cmax = ue ? 0x7e : 0x7bff;
    const int32_t lo_slack = ue ? 3 + 8 : oct, hi_slack = ue ? 5 : oct; /* ue4m3: offsets -3..+5, from 16 up */
    const uint8_t *codes0 = dst + p->L.scales_offset;
    double e0 = 0.0, best = 0.0;
    for (size_t i = 0; i < n; i++) e0 += err0[i];
#define C0(i) (alpha[i] == 0.0f ? -1 : (int32_t)(c.sz == 1 ? c0b[i] : qtk__ld16(c0b + 2 * (i))))
    int bj = 0;
    const int js[] = {1, -1, -2, -3, -4, -5, -6, -7, -8};
    for (size_t ji = 0; !st && ji < sizeof js / sizeof js[0]; ji++) {
        int j = js[ji];
        float gj = ldexpf(g0, j);
        if (!(gj >= 0x1p-126f) || !qtk__isfinite(gj)) continue;
        size_t m = 0;
        bool shiftable = true, over = false;
        for (size_t i = 0; i < n && shiftable; i++) {
            int32_t c0i = C0(i);
            if (c0i < 0) continue;
            int32_t sj = c0i - oct * j, lo = c0i < sj ? c0i : sj, hi = c0i > sj ? c0i : sj;
            if (lo - lo_slack < nmin || hi + hi_slack > cmax) {
                if (m == budget) {
                    over = true;
                    break;
                }
                list[m++] = i;
            } else { /* kept: its chosen code must move by whole octaves too */
                int32_t k = (int32_t)(c.sz == 1 ? codes0[i] : qtk__ld16(codes0 + 2 * i)) & 0x7fff;
                shiftable = k - oct * j >= nmin && k - oct * j <= cmax && k >= nmin && k <= cmax;
            }
        }
        if (over) {
            if (j < 0) break; /* further down, still more groups move */
            continue;
        }
        if (m == 0 || !shiftable) continue;
        budget -= m;
        st = search_subset(p, &c, x, w, gj, list, m, ej, cj, fj);
        double d = 0.0;
        for (size_t k = 0; !st && k < m; k++) d += ej[k] - err0[list[k]];
        if (!st && d < best) {
            best = d;
            bj = j;
            mb = m;
            memcpy(lb, list, m * sizeof *lb);
            memcpy(cb, cj, m * sizeof *cb);
            memcpy(fb, fj, m * sizeof *fb);
        } else if (j < 0) {
            break; /* going down stopped paying */
        }
    }
    if (!st && bj != 0 && (e0 + best) * (1.0 + (double)QTK__MSE_MARGIN) < e0) {
        /* the new global: kept groups' codes move by bj octaves (same effective scales, same
         * fields), re-searched ones take their new codes; then the fields again */
        g = ldexpf(g0, bj);
        uint8_t *codes = dst + p->L.scales_offset;
        for (size_t i = 0, k = 0; i < n; i++) {
            if (k < mb && lb[k] == i) {
                qtk__scale_store(c.dt, codes + i * c.sz, cb[k]);
                eff0[i] = fb[k];
                k++;
            } else if (C0(i) >= 0) {
                uint32_t v = c.sz == 1 ? codes[i] : qtk__ld16(codes + 2 * i);
                qtk__scale_store(c.dt, codes + i * c.sz, v - (uint32_t)(oct * bj));
            }
        }
        for (size_t i = 0; i < n && bad_group == SIZE_MAX; i++)
            if (!qtk__isfinite(eff0[i])) bad_group = i;
        if (bad_group == SIZE_MAX) st = qtk__exec_encode(p, x, eff0, dst, threads);
        if (!st) st = pass_errors(p, x, bad, bad_group, g);
    }
    *global = g;
    qtk__free(alpha);
    qtk__free(eff0);
    qtk__free(err0);
#undef C0
    qtk__free(c0b);
    qtk__free(list);
    qtk__free(ej);
    qtk__free(cj);
    qtk__free(cb);
    qtk__free(fj);
    qtk__free(fb);
    qtk__free(lb);
    return st;
}
