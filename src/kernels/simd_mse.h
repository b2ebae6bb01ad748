/* simd_mse.h — calibration mse's per-group search (mse.h) in the vector vocabulary, one
 * group per lane: every lane runs the reference's steps on its own group, element by
 * element in order, so its sums — and so its decisions — are the reference's bits. Included
 * by simd_body.h (which provides the codecs and the vocabulary). */

#include "mse.h"

/* ---- lane helpers ---- */


static inline vf vf_neg_sign(vf x) { /* -1 where x < 0, else +1 (the sign of a max element) */
    return vf_blend(vf_gt(vf_zero(), x), vf_set1(1.0f), vf_set1(-1.0f));
}

static QTK_ALWAYS_INLINE vf mse_mf_grid(vf y, int M, int bias) {
    vi b = vf_bits(y);
    vi sign = vi_and(b, vi_set1((int)0x80000000u));
    vi ab = vi_and(b, vi_set1(0x7fffffff));
    const int nmin = (1 - bias + 127) << 23;
    vi e = vi_max(vi_and(b, vi_set1(0x7f800000)), vi_set1(nmin));
    vf cc = vi_bits(vi_add(e, vi_set1((23 - M) << 23)));
    vf r = vf_sub(vf_add(vi_bits(ab), cc), cc);
    return vi_bits(vi_or(vf_bits(r), sign));
}

typedef struct {
    const qtk__mse_cfg *c;
    vf lo, hi, fmax, nfmax, zv, div, g, margin, round, fmaxs;
    lookup_enc le;
    lut16 sorted; /* lookup entries in ascending order */
} mse_ctx;

static bool mse_ctx_init(const qtk__mse_cfg *c, mse_ctx *k) {
    memset(k, 0, offsetof(mse_ctx, le)); /* the lookup encoder (2 KiB) is filled when used */
    const qtk__plan *p = c->p;
    k->c = c;
    k->lo = vf_set1(p->lo);
    k->hi = vf_set1(p->hi);
    k->fmax = vf_set1(p->fmax);
    k->nfmax = vf_set1(-p->fmax);
    k->zv = vf_set1(c->zero_value);
    k->div = vf_set1(p->div);
    k->margin = vf_set1(1.0f + QTK__MSE_MARGIN);
    k->round = vf_set1(QTK__MSE_ROUND);
    k->fmaxs = vf_set1(3.40282347e38f);
    if (c->kind == QTK__MSE_LUT) {
        if (!lookup_enc_init(p, &k->le)) return false;
        float s[16] = {0};
        for (int i = 0; i <= k->le.n; i++) s[i] = p->table[(int)k->le.perm[i]];
        k->sorted = lut16_load(s);
    }
    return true;
}

/* count of thresholds below q (the sorted position of the nearest entry) */
static inline vi mse_lut_pos(const lookup_enc *le, vf q) {
    vi c = vi_zero();
    for (int step = 8; step >= 1; step >>= 1) {
        vf t = vf_lut16(le->tl, vi_add(c, vi_set1(step - 1)));
        c = vi_blend(vf_gt(q, t), c, vi_add(c, vi_set1(step)));
    }
    return c;
}

/* the exact value of a field for quotient q (what the encoder writes) */
static QTK_ALWAYS_INLINE vf mse_exact_value(const mse_ctx *k, vf q, int kind) {
    switch (kind) {
    case K_INT: {
        vf h = vi_bits(vi_or(vi_and(vf_bits(q), vi_set1((int)0x80000000u)), vi_set1(0x3effffff)));
        return vf_min(vf_max(vf_trunc(vf_add(q, h)), k->lo), k->hi);
    }
    case K_LOOKUP: return vf_lut16(k->sorted, mse_lut_pos(&k->le, q));
    case K_E4M3: return mse_mf_grid(vf_min(vf_max(q, k->nfmax), k->fmax), 3, 7);
    case K_E5M2: return mse_mf_grid(vf_min(vf_max(q, k->nfmax), k->fmax), 2, 15);
    default: return mse_mf_grid(vf_min(vf_max(q, k->nfmax), k->fmax), 1, 1);
    }
}

static QTK_ALWAYS_INLINE vf mse_trial_value(const mse_ctx *k, vf q, int kind) {
    if (kind != K_INT) return mse_exact_value(k, q, kind);
    vf r = vf_sub(vf_add(q, k->round), k->round);
    return vf_min(vf_max(r, k->lo), k->hi);
}

/* scale codes (see mse.h: qtk__mse_code_ceil / floor) */
static inline vi mse_code_ceil(const qtk__mse_cfg *c, vf s) {
    if (c->dt == QTK_DTYPE_F32) return vf_bits(s);
    vi code = ceil_code(c->dt, vf_abs(s));
    if (c->signed_dt) code = vi_or(code, vi_blend(vf_gt(vf_zero(), s), vi_zero(), vi_set1(0x8000)));
    return code;
}
static inline vi mse_code_floor(const qtk__mse_cfg *c, vf s) {
    if (c->dt == QTK_DTYPE_F32) return vf_bits(s);
    vf a = vf_abs(s);
    vi code = ceil_code(c->dt, a);
    vm down = vm_and(vf_gt(decode_scale(c->dt, code), a), vi_gt(code, vi_zero()));
    code = vi_blend(down, code, vi_sub(code, vi_set1(1)));
    if (c->signed_dt) code = vi_or(code, vi_blend(vf_gt(vf_zero(), s), vi_zero(), vi_set1(0x8000)));
    return code;
}
static inline vf mse_eff_raw(const mse_ctx *k, vi code) {
    return k->c->dt == QTK_DTYPE_F32 ? vi_bits(code) : decode_scale(k->c->dt, code);
}
static inline vf mse_eff(const mse_ctx *k, vi code) {
    vf v = mse_eff_raw(k, code);
    return k->c->p->two_level ? vf_mul(k->g, v) : v;
}

/* ---- one batch of VW groups: X, W, WX hold element j of lane l at [j * VW + l] ---- */

typedef struct {
    vi code;
    vf eff, err, adj, sxv, svv;
} mse_best;

typedef struct {
    const float *X, *W, *WX;
    size_t len;
    vf m, an, smax;
} mse_batch;

/* Exact scores of two scales at once (two independent chains of sums: the same sums as
 * one at a time, twice the throughput). */
typedef struct {
    vf err, sxv, svv;
} mse_sums;

static QTK_ALWAYS_INLINE void mse_finish(vf en, vf e, vf a, vf v2, mse_sums *o) {
    /* a non-finite scale (a two-level overflow) scores +inf, with empty sums */
    vm bad = vi_eq(vi_and(vf_bits(en), vi_set1(0x7f800000)), vi_set1(0x7f800000));
    o->err = vf_blend(bad, e, vi_bits(vi_set1(0x7f800000)));
    o->sxv = vf_blend(bad, a, vf_zero());
    o->svv = vf_blend(bad, v2, vf_zero());
}

static QTK_ALWAYS_INLINE vf mse_exact_v(const mse_ctx *k, vf x, vf en, vm z, int kind) {
    return vf_blend(z, mse_exact_value(k, vf_div(x, en), kind), k->zv);
}

/* sums: also the least-squares sums (for a Lloyd step; the code grids need none) */
static QTK_ALWAYS_INLINE void mse_exact2(const mse_ctx *k, const mse_batch *b, vf en0, vf en1, int two, int kind,
                                         int weighted, int sums, mse_sums *o0, mse_sums *o1) {
    vf e0 = vf_zero(), a0 = vf_zero(), q0 = vf_zero(), e1 = vf_zero(), a1 = vf_zero(), q1 = vf_zero();
    vm z0 = vf_eq(en0, vf_zero()), z1 = vf_eq(en1, vf_zero());
    for (size_t j = 0; j < b->len; j++) {
        vf x = vf_loadu(b->X + j * VW);
        vf v = mse_exact_v(k, x, en0, z0, kind);
        vf d = vf_sub(x, vf_mul(v, en0)); /* x minus the decoded value, as the decoder rounds it */
        vf t = vf_mul(d, d);
        vf v1 = vf_zero(), t1 = vf_zero();
        if (two) {
            v1 = mse_exact_v(k, x, en1, z1, kind);
            vf d1 = vf_sub(x, vf_mul(v1, en1));
            t1 = vf_mul(d1, d1);
        }
        if (weighted) {
            vf w = vf_loadu(b->W + j * VW);
            e0 = vf_fma(w, t, e0);
            if (two) e1 = vf_fma(w, t1, e1);
            if (sums) {
                vf wx = vf_loadu(b->WX + j * VW);
                a0 = vf_fma(wx, v, a0);
                q0 = vf_fma(vf_mul(w, v), v, q0);
                if (two) {
                    a1 = vf_fma(wx, v1, a1);
                    q1 = vf_fma(vf_mul(w, v1), v1, q1);
                }
            }
        } else {
            e0 = vf_add(e0, t);
            if (two) e1 = vf_add(e1, t1);
            if (sums) {
                a0 = vf_fma(x, v, a0);
                q0 = vf_fma(v, v, q0);
                if (two) {
                    a1 = vf_fma(x, v1, a1);
                    q1 = vf_fma(v1, v1, q1);
                }
            }
        }
    }
    mse_finish(en0, e0, a0, q0, o0);
    if (two) mse_finish(en1, e1, a1, q1, o1);
    else *o1 = *o0;
}

static QTK_ALWAYS_INLINE void mse_take(const mse_ctx *k, vi code, vf eff, const mse_sums *s, mse_best *best) {
    vf adj = vf_mul(s->err, k->margin);
    vm take = vf_gt(best->adj, adj);
    best->code = vi_blend(take, best->code, code);
    best->eff = vf_blend(take, best->eff, eff);
    best->adj = vf_blend(take, best->adj, adj);
    best->err = vf_blend(take, best->err, s->err);
    best->sxv = vf_blend(take, best->sxv, s->sxv);
    best->svv = vf_blend(take, best->svv, s->svv);
}

/* Scores codes c0 (and c1 when two), in that order. */
static QTK_ALWAYS_INLINE void mse_consider2(const mse_ctx *k, const mse_batch *b, vi c0, vi c1, int two, int kind,
                                            int weighted, int sums, mse_best *best) {
    vf f0 = mse_eff(k, c0), f1 = two ? mse_eff(k, c1) : f0;
    mse_sums s0, s1;
    mse_exact2(k, b, vf_mul(f0, b->m), vf_mul(f1, b->m), two, kind, weighted, sums, &s0, &s1);
    mse_take(k, c0, f0, &s0, best);
    if (two) mse_take(k, c1, f1, &s1, best);
}

/* The code(s) a least-squares scale r (normalised) proposes: the nearest, or both
 * neighbours (ls_pair: *two set). */
static QTK_ALWAYS_INLINE vi mse_ls_codes(const mse_ctx *k, const mse_batch *b, vf r, vi *second) {
    vf s = vf_div(r, b->m);
    if (k->c->p->two_level) s = vf_div(s, k->g);
    s = vf_min(vf_max(s, vf_sub(vf_zero(), k->fmaxs)), k->fmaxs);
    vi lo = mse_code_floor(k->c, s), hi = mse_code_ceil(k->c, s);
    *second = hi;
    if (k->c->ls_pair) return lo;
    vf a = vf_abs(s);
    vf dl = vf_sub(a, vf_abs(mse_eff_raw(k, lo))), dh = vf_sub(vf_abs(mse_eff_raw(k, hi)), a);
    return vi_blend(vf_gt(dl, dh), lo, hi);
}

/* Trial sums of N (2 or 4) inverse scales at once: independent chains of fused multiply-
 * adds in one loop (their latency hidden), each the reference's sums in element order. */
static QTK_ALWAYS_INLINE void mse_trials(const mse_ctx *k, const mse_batch *b, const vf *inv, int N, int kind,
                                         int weighted, vf *sxv, vf *svv) {
    vf a0 = vf_zero(), q0 = vf_zero(), a1 = vf_zero(), q1 = vf_zero(), a2 = vf_zero(), q2 = vf_zero(), a3 = vf_zero(),
       q3 = vf_zero();
    vf i0 = inv[0], i1 = inv[1], i2 = N > 2 ? inv[2] : inv[0], i3 = N > 2 ? inv[3] : inv[0];
    for (size_t j = 0; j < b->len; j++) {
        vf x = vf_loadu(b->X + j * VW);
        vf v0 = mse_trial_value(k, vf_mul(x, i0), kind), v1 = mse_trial_value(k, vf_mul(x, i1), kind);
        vf v2 = N > 2 ? mse_trial_value(k, vf_mul(x, i2), kind) : v0;
        vf v3 = N > 2 ? mse_trial_value(k, vf_mul(x, i3), kind) : v0;
        if (weighted) {
            vf w = vf_loadu(b->W + j * VW), wx = vf_loadu(b->WX + j * VW);
            a0 = vf_fma(wx, v0, a0);
            q0 = vf_fma(vf_mul(w, v0), v0, q0);
            a1 = vf_fma(wx, v1, a1);
            q1 = vf_fma(vf_mul(w, v1), v1, q1);
            if (N > 2) {
                a2 = vf_fma(wx, v2, a2);
                q2 = vf_fma(vf_mul(w, v2), v2, q2);
                a3 = vf_fma(wx, v3, a3);
                q3 = vf_fma(vf_mul(w, v3), v3, q3);
            }
        } else {
            a0 = vf_fma(x, v0, a0);
            q0 = vf_fma(v0, v0, q0);
            a1 = vf_fma(x, v1, a1);
            q1 = vf_fma(v1, v1, q1);
            if (N > 2) {
                a2 = vf_fma(x, v2, a2);
                q2 = vf_fma(v2, v2, q2);
                a3 = vf_fma(x, v3, a3);
                q3 = vf_fma(v3, v3, q3);
            }
        }
    }
    sxv[0] = a0, svv[0] = q0, sxv[1] = a1, svv[1] = q1;
    if (N > 2) sxv[2] = a2, svv[2] = q2, sxv[3] = a3, svv[3] = q3;
}

static QTK_ALWAYS_INLINE void mse_trial_take(vf sxv, vf svv, vf *best_score, vf *best_r) {
    vm pos = vf_gt(svv, vf_zero());
    vf r = vf_blend(pos, vf_zero(), vf_div(sxv, svv));
    vf sc = vf_blend(pos, vf_zero(), vf_mul(sxv, r));
    vm better = vf_gt(sc, *best_score);
    *best_score = vf_blend(better, *best_score, sc);
    *best_r = vf_blend(better, *best_r, r);
}

/* grid candidate i (mse.h step 3) */
static QTK_ALWAYS_INLINE vi mse_grid_code(const mse_ctx *k, vi c0, vf raw0, int i) {
    const qtk__mse_cfg *c = k->c;
    vi off = vi_min(vi_max(vi_add(c0, vi_set1(c->grid_off[i])), vi_zero()), vi_set1(c->grid_max));
    vm sparse = vi_gt(vi_set1(16), c0); /* codes below 16: the nearest codes to raw0 x 2^(off/8) */
    if (c->dt == QTK_DTYPE_UE8M0 || !vm_any(sparse)) return off;
    vf s = vf_min(vf_mul(raw0, vf_set1(c->grid_f[i])), k->fmaxs);
    vi lo = mse_code_floor(c, s), hi = mse_code_ceil(c, s);
    vf dl = vf_sub(s, vf_abs(mse_eff_raw(k, lo))), dh = vf_sub(vf_abs(mse_eff_raw(k, hi)), s);
    return vi_blend(sparse, off, vi_blend(vf_gt(dl, dh), lo, hi));
}

static QTK_ALWAYS_INLINE void mse_batch_search(const mse_ctx *k, const mse_batch *b, vi c0, vf raw0, vf eff0, int kind,
                                               int weighted, mse_best *best) {
    const qtk__mse_cfg *c = k->c;
    /* c0 is scored together with the first candidate (two chains of sums in one loop); the
     * choice then goes in the reference's order: c0, the candidates one by one */
    vi first;
    int i0 = 0;
    if (c->grid) {
        first = mse_grid_code(k, c0, raw0, 0);
        i0 = 1;
    } else {
        vf best_score = vf_zero(), best_r = vf_zero();
        int nsign = c->sign == QTK__MSE_SIGN_BOTH ? 2 : 1;
        for (int si = 0; si < nsign; si++) {
            vf sg = c->sign == QTK__MSE_SIGN_POS  ? vf_set1(1.0f)
                    : c->sign == QTK__MSE_SIGN_MAX ? vf_mul(vf_set1(c->sign_max), b->smax)
                    : si == 0                     ? vf_set1(1.0f)
                                                  : vf_set1(-1.0f);
            vf ext = vf_blend(vf_gt(vf_mul(sg, b->smax), vf_zero()), vf_set1(c->ext_neg), vf_set1(c->ext_pos));
            vf num = vf_mul(sg, ext);
            for (int t = 0; t < c->n_trials;) {
                /* four at a time, then two (the last one twice when the count is odd) */
                int left = c->n_trials - t, N = left >= 4 ? 4 : 2, real = left >= 4 ? 4 : left;
                vf inv[4], sxv[4], svv[4];
                for (int u = 0; u < N; u++)
                    inv[u] = vf_div(num, vf_mul(b->an, vf_set1(c->trial[t + (u < real ? u : real - 1)])));
                if (N == 4) mse_trials(k, b, inv, 4, kind, weighted, sxv, svv);
                else mse_trials(k, b, inv, 2, kind, weighted, sxv, svv);
                for (int u = 0; u < real; u++) mse_trial_take(sxv[u], svv[u], &best_score, &best_r);
                t += real;
            }
        }
        vi second;
        first = mse_ls_codes(k, b, best_r, &second);
        if (c->ls_pair) {
            mse_sums s0, s1;
            vf f0 = mse_eff(k, c0), f1 = mse_eff(k, first);
            mse_exact2(k, b, vf_mul(f0, b->m), vf_mul(f1, b->m), 1, kind, weighted, 1, &s0, &s1);
            best->code = c0;
            best->eff = eff0;
            best->err = best->adj = s0.err;
            best->sxv = s0.sxv;
            best->svv = s0.svv;
            mse_take(k, first, f1, &s1, best);
            mse_consider2(k, b, second, second, 0, kind, weighted, 1, best);
            goto lloyd;
        }
    }
    if (c->grid) {
        mse_sums s0, s1;
        vf f1 = mse_eff(k, first);
        mse_exact2(k, b, vf_mul(eff0, b->m), vf_mul(f1, b->m), 1, kind, weighted, 0, &s0, &s1);
        best->code = c0;
        best->eff = eff0;
        best->err = best->adj = s0.err;
        best->sxv = s0.sxv;
        best->svv = s0.svv;
        mse_take(k, first, f1, &s1, best);
    } else {
        mse_sums s0, s1;
        vf f1 = mse_eff(k, first);
        mse_exact2(k, b, vf_mul(eff0, b->m), vf_mul(f1, b->m), 1, kind, weighted, 1, &s0, &s1);
        best->code = c0;
        best->eff = eff0;
        best->err = best->adj = s0.err;
        best->sxv = s0.sxv;
        best->svv = s0.svv;
        mse_take(k, first, f1, &s1, best);
    }
    if (c->grid) {
        for (int i = i0; i < c->n_grid; i += 2) {
            int two = i + 1 < c->n_grid;
            mse_consider2(k, b, mse_grid_code(k, c0, raw0, i), mse_grid_code(k, c0, raw0, two ? i + 1 : i), two, kind,
                          weighted, 0, best);
        }
        return;
    }
lloyd:
    if (c->lloyd) {
        vm pos = vf_gt(best->svv, vf_zero());
        vf r2 = vf_blend(pos, vf_zero(), vf_div(best->sxv, best->svv));
        vi second, one = mse_ls_codes(k, b, r2, &second);
        mse_consider2(k, b, one, second, c->ls_pair, kind, weighted, 1, best);
    }
}

#define MSE_FN(K, WT)                                                                                                  \
    static __attribute__((noinline)) void mse_batch_##K##_##WT(const mse_ctx *k, const mse_batch *b, vi c0, vf raw0,   \
                                                               vf eff0, mse_best *best) {                              \
        mse_batch_search(k, b, c0, raw0, eff0, K, WT, best);                                                           \
    }
#define MSE_FN_W(K) MSE_FN(K, 0) MSE_FN(K, 1)
MSE_FN_W(K_INT)
MSE_FN_W(K_LOOKUP)
MSE_FN_W(K_E4M3)
MSE_FN_W(K_E5M2)
MSE_FN_W(K_E2M1)

#define MSE_CALL_W(K)                                                                                                  \
    do {                                                                                                               \
        if (weighted) mse_batch_##K##_1(&k, &b, c0, raw, eff0, &best);                                                 \
        else mse_batch_##K##_0(&k, &b, c0, raw, eff0, &best);                                                          \
    } while (0)

static bool simd_mse_groups(const qtk__mse_cfg *c, const qtk__mse_src *src, size_t n, float g, uint8_t *codes,
                            float *eff, double *err) {
    if (c->ternary) return false;
    /* the extension's values (unsigned, 3-, 5- and 6-bit) and the affine mode: the reference */
    if (c->p->unsig || c->p->affine || (c->p->bits != 2 && c->p->bits != 4 && c->p->bits != 8)) return false;
    mse_ctx k;
    if (!mse_ctx_init(c, &k)) return false;
    k.g = vf_set1(g);
    const qtk__plan *p = c->p;
    int kind = c->kind == QTK__MSE_LUT      ? K_LOOKUP
               : c->kind == QTK__MSE_INT    ? K_INT
               : p->fmt == QTK_DTYPE_E4M3   ? K_E4M3
               : p->fmt == QTK_DTYPE_E5M2   ? K_E5M2
                                            : K_E2M1;
    float X[QTK__MSE_LANE_MAX * VW], W[QTK__MSE_LANE_MAX * VW], WX[QTK__MSE_LANE_MAX * VW];
    for (size_t b0 = 0; b0 < n; b0 += VW) {
        size_t nl = n - b0 < VW ? n - b0 : VW, maxlen = 0;
        bool weighted = false;
        for (size_t l = 0; l < nl; l++) {
            if (src[b0 + l].len > maxlen) maxlen = src[b0 + l].len;
            if (src[b0 + l].w) weighted = true;
        }
        for (size_t l = 0; l < VW; l++)
            if (l >= nl || src[b0 + l].len != maxlen) weighted = true; /* padding: weight 0 */
        /* lane l <- group b0 + l, element j at [j * VW + l]: a block transpose when the
         * groups are equally spaced (groups along rows), else element by element */
        ptrdiff_t sx = 0, sw = 0;
        bool full = nl == VW;
        for (size_t l = 0; l < nl && full; l++) full = src[b0 + l].len == maxlen;
        bool xs_eq = full, ws_eq = full && weighted && src[b0].w;
        if (full && VW > 1) {
            sx = src[b0 + 1].x - src[b0].x;
            if (ws_eq) sw = src[b0 + 1].w - src[b0].w;
            /* (differences of pointers into the same array: no pointer is formed outside it) */
            for (size_t l = 0; l < VW; l++) {
                xs_eq = xs_eq && src[b0 + l].x - src[b0].x == (ptrdiff_t)l * sx;
                ws_eq = ws_eq && src[b0 + l].w - src[b0].w == (ptrdiff_t)l * sw;
            }
        }
        size_t jt = maxlen - maxlen % VW; /* transposed blocks cover [0, jt) */
        if (xs_eq)
            for (size_t j = 0; j < jt; j += VW) vf_transpose_block(src[b0].x + j, sx, X + j * VW);
        if (ws_eq)
            for (size_t j = 0; j < jt; j += VW) vf_transpose_block(src[b0].w + j, sw, W + j * VW);
        for (size_t l = 0; l < VW; l++) {
            const qtk__mse_src *q = l < nl ? &src[b0 + l] : NULL;
            size_t len = q ? q->len : 0;
            const float *xs = q ? q->x : NULL;
            float *xd = X + l;
            size_t j = xs_eq ? jt : 0;
            for (; j < len; j++) xd[j * VW] = xs[j];
            for (; j < maxlen; j++) xd[j * VW] = 0.0f;
            if (!weighted) continue;
            const float *ws = q ? q->w : NULL;
            float *wd = W + l;
            j = ws_eq ? jt : 0;
            if (ws)
                for (; j < len; j++) wd[j * VW] = ws[j];
            else
                for (; j < len; j++) wd[j * VW] = 1.0f;
            for (; j < maxlen; j++) wd[j * VW] = 0.0f;
        }
        /* amax, the sign of its first element, the minmax code, the normalisation */
        vf amax = vf_zero(), smax = vf_set1(1.0f);
        vi amax_bits = vi_zero(); /* integer max of |x|'s bits: inf and NaN show as >= 0x7f800000 */
        for (size_t j = 0; j < maxlen; j++) {
            vf x = vf_loadu(X + j * VW);
            vf a = vf_abs(x);
            vm gt = vf_gt(a, amax);
            amax = vf_blend(gt, amax, a);
            smax = vf_blend(gt, smax, vf_neg_sign(x));
            amax_bits = vi_max(amax_bits, vf_bits(a));
        }
        vm nonfinite = vi_gt(amax_bits, vi_set1(0x7f7fffff));
        amax = vf_blend(nonfinite, amax, vf_zero()); /* searched as zeros, reported as NaN below */
        vf raw = vf_div(amax, k.div);
        if (p->two_level) raw = vf_div(raw, k.g);
        vi c0 = c->dt == QTK_DTYPE_F32 ? vf_bits(raw) : ceil_code(c->dt, raw);
        vf eff0 = mse_eff(&k, c0);
        vi e = vi_srl(vf_bits(amax), 23);
        vi kk = vi_blend(vi_eq(e, vi_zero()), vi_sub(vi_set1(127), e), vi_set1(126));
        kk = vi_max(vi_min(kk, vi_set1(126)), vi_set1(-126));
        vf m = vi_bits(vi_sll(vi_add(kk, vi_set1(127)), 23));
        vm zero = vf_eq(amax, vf_zero());
        mse_batch b = {X, W, WX, maxlen, m, vf_blend(zero, vf_mul(amax, m), vf_set1(1.0f)), smax};
        for (size_t j = 0; j < maxlen; j++) {
            vf x = vf_mul(vf_loadu(X + j * VW), m);
            vf_storeu(X + j * VW, x);
            if (weighted) vf_storeu(WX + j * VW, vf_mul(vf_loadu(W + j * VW), x));
        }
        mse_best best;
        switch (kind) {
        case K_INT: MSE_CALL_W(K_INT); break;
        case K_LOOKUP: MSE_CALL_W(K_LOOKUP); break;
        case K_E4M3: MSE_CALL_W(K_E4M3); break;
        case K_E5M2: MSE_CALL_W(K_E5M2); break;
        default: MSE_CALL_W(K_E2M1); break;
        }
        /* amax == 0: the minmax code, error 0 */
        vi code = vi_blend(zero, best.code, c0);
        vf ef = vf_blend(nonfinite, vf_blend(zero, best.eff, eff0), vi_bits(vi_set1(0x7fc00000)));
        vf er = vf_blend(zero, best.err, vf_zero());
        uint32_t cl[VW];
        float el[VW], rl[VW], ml[VW];
        vi_store_u32((uint8_t *)cl, code);
        vf_storeu(el, ef);
        vf_storeu(rl, er);
        vf_storeu(ml, m);
        for (size_t l = 0; l < nl; l++) {
            qtk__scale_store(c->dt, codes + (b0 + l) * c->sz, cl[l]);
            eff[b0 + l] = el[l];
            if (err) err[b0 + l] = (double)rl[l] / ((double)ml[l] * (double)ml[l]);
        }
    }
    return true;
}
