/* affine.c — the affine mode over qtk's layouts (docs/affine.md §2; affine.h).
 *
 * minmax, per group, from lo = min x and hi = max x (zero points: the range widened to hold
 * 0, since a zero point is a field):
 *   offset=: o = nearest(lo),  s = up((hi - o) / Q)
 *   min=:    m = nearest(-lo), s = up((hi + m) / Q)
 *   zero=:   s = up((hi - lo) / Q), z = nearest(-lo / s)  (u8: an integer, clamped to [0, Q])
 * with up() SPEC §2 step 4's round-up to the scale dtype (0 for a negative raw scale) and
 * nearest() the offset dtype's rounding; the scale is computed after the offset is stored, so
 * the group's largest value is covered.
 * mse, per group: the continuous least-squares (scale, offset) of its values and weights
 * (qtk__fit_affine), turned into each convention, then the stored codes nearest to it and their
 * neighbours (3 x 3), each scored by the exact error of the encoder's fields; the minmax pair
 * wins unless a candidate's error times (1 + 2^-12) is below its (never worse than minmax).
 * Groups are independent: split across threads, the bytes are the same for any count. */
#include "affine.h"

#include "../common/parallel.h"
#include "../kernels/kernels.h"
#include "calibrate.h"

#include <float.h>
#include <math.h>

#define MARGIN 0x1p-12

typedef struct {
    const qtk__plan *p;
    qtk_dtype sdt, odt;
    unsigned ssz, osz;
    float Q;
} affine_ctx;

static void ctx_init(affine_ctx *a, const qtk__plan *p) {
    a->p = p;
    a->sdt = p->L.scale_dtype, a->odt = p->L.offset_dtype;
    a->ssz = qtk__scale_size(a->sdt), a->osz = qtk__scale_size(a->odt);
    a->Q = p->hi;
}

static float sval(const affine_ctx *a, uint32_t c) { return qtk_fmt_decode(a->sdt, c); }
static float oval(const affine_ctx *a, uint32_t c) { return qtk_fmt_decode(a->odt, c); }

/* the stored scale for a raw one: the round-up of SPEC §2 step 4 (0 when not positive) */
static uint32_t scale_code(const affine_ctx *a, float raw) {
    return qtk_fmt_round_up(a->sdt, raw > 0.0f && raw == raw ? raw : 0.0f);
}
/* the stored offset nearest to v (u8 zero points clamped to the field range) */
static uint32_t offset_code(const affine_ctx *a, float v) {
    if (a->odt == QTK_DTYPE_U8) {
        float r = nearbyintf(v);
        return (uint32_t)(r < 0.0f ? 0.0f : r > a->Q ? a->Q : r);
    }
    return qtk_fmt_encode(a->odt, v);
}

/* The exact error of the encoder's fields under stored (s, o). */
static double group_error(const affine_ctx *a, const float *x, const float *w, size_t n, float s, float o) {
    double e = 0.0;
    for (size_t i = 0; i < n; i++) {
        uint32_t q = qtk__encode_affine(a->p, x[i], s, o);
        double d = (double)x[i] - (double)qtk__decode_affine(a->p, q, s, o);
        e += (w ? (double)w[i] : 1.0) * d * d;
    }
    return e;
}

static void minmax_group(const affine_ctx *a, const float *x, size_t n, uint32_t *sc, uint32_t *oc) {
    float lo = n ? x[0] : 0.0f, hi = lo;
    for (size_t i = 1; i < n; i++) lo = x[i] < lo ? x[i] : lo, hi = x[i] > hi ? x[i] : hi;
    const qtk__plan *p = a->p;
    float r;
    if (p->offk == QTK_OFFSET_ADD) {
        *oc = offset_code(a, lo);
        r = hi - oval(a, *oc);
        *sc = scale_code(a, r / a->Q);
    } else if (p->offk == QTK_OFFSET_MIN) {
        *oc = offset_code(a, -lo);
        r = hi + oval(a, *oc);
        *sc = scale_code(a, r / a->Q);
    } else {
        lo = lo < 0.0f ? lo : 0.0f, hi = hi > 0.0f ? hi : 0.0f;
        r = hi - lo;
        *sc = scale_code(a, r / a->Q);
        float s = sval(a, *sc);
        *oc = offset_code(a, s > 0.0f ? -lo / s : 0.0f);
    }
}

/* codes next to c of a monotone dtype (stepping the code moves the value by one grid step) */
static int neighbours(qtk_dtype d, uint32_t c, uint32_t *out) {
    int n = 0;
    unsigned bits = qtk_dtype_bits(d);
    uint32_t maxc = bits >= 32 ? 0xffffffffu : (1u << bits) - 1u;
    out[n++] = c;
    if (c > 0) out[n++] = c - 1;
    if (c < maxc) out[n++] = c + 1;
    return n;
}

static void mse_group(const affine_ctx *a, const float *x, const float *w, size_t n, uint32_t *sc, uint32_t *oc) {
    minmax_group(a, x, n, sc, oc);
    double best = group_error(a, x, w, n, sval(a, *sc), oval(a, *oc));
    if (best == 0.0) return;
    float fa, fc;
    qtk__fit_affine(x, w, n, (int)a->Q, &fa, &fc); /* x ~ fa q + fc */
    if (!(fa > 0.0f) || !isfinite(fa) || !isfinite(fc)) return;
    const qtk__plan *p = a->p;
    float ov = p->offk == QTK_OFFSET_ADD ? fc : p->offk == QTK_OFFSET_MIN ? -fc : -fc / fa;
    uint32_t s0 = qtk_fmt_encode(a->sdt, fa), o0 = offset_code(a, ov), sn[3], on[3];
    int ns = neighbours(a->sdt, s0, sn), no = neighbours(a->odt, o0, on);
    uint32_t bs = *sc, bo = *oc;
    double thr = best;
    for (int i = 0; i < ns; i++)
        for (int j = 0; j < no; j++) {
            float s = sval(a, sn[i]), o = oval(a, on[j]);
            if (!(s >= 0.0f) || !isfinite(s) || !isfinite(o) || (a->odt == QTK_DTYPE_U8 && on[j] > (uint32_t)a->Q))
                continue;
            double e = group_error(a, x, w, n, s, o);
            if (e * (1.0 + MARGIN) < best && e < thr) thr = e, bs = sn[i], bo = on[j];
        }
    *sc = bs, *oc = bo;
}

/* ---- the groups of a tensor, gathered ---- */

typedef struct {
    const affine_ctx *a;
    const float *gx, *gw; /* values (and weights) group by group */
    const size_t *start;  /* group g's are [start[g], start[g + 1]) */
    bool mse;
    uint8_t *dst;
    float *eff, *off;
} groups_job;

static void groups_range(void *ctx, size_t g0, size_t g1, int worker) {
    (void)worker;
    const groups_job *j = ctx;
    const affine_ctx *a = j->a;
    const qtk__plan *p = a->p;
    for (size_t g = g0; g < g1; g++) {
        size_t b = j->start[g], n = j->start[g + 1] - b;
        uint32_t sc, oc;
        if (j->mse) mse_group(a, j->gx + b, j->gw ? j->gw + b : NULL, n, &sc, &oc);
        else minmax_group(a, j->gx + b, n, &sc, &oc);
        qtk__scale_store(a->sdt, j->dst + p->L.scales_offset + g * a->ssz, sc);
        qtk__scale_store(a->odt, j->dst + p->L.offsets_offset + g * a->osz, oc);
        j->eff[g] = sval(a, sc), j->off[g] = oval(a, oc);
    }
}

/* Group g of element j of row r: qtk__plan_row's scale_base + j / blk_last. The groups' elements
 * in row-major order, gathered: counts, starts, then the copy. */
static qtk_status gather(const qtk__plan *p, const float *x, const qtk__weights *w, size_t **start_out, float **gx_out,
                         float **gw_out) {
    size_t ng = p->L.n_scales, *start = qtk__calloc(ng + 1, sizeof *start), *fill = qtk__calloc(ng, sizeof *fill);
    float *gx = qtk__malloc((p->L.numel ? p->L.numel : 1) * sizeof *gx), *gw = NULL;
    if (w->w) gw = qtk__malloc((p->L.numel ? p->L.numel : 1) * sizeof *gw);
    if (!start || !fill || !gx || (w->w && !gw)) {
        qtk__free(start), qtk__free(fill), qtk__free(gx), qtk__free(gw);
        return qtk__err(QTK_E_NOMEM, "out of memory gathering %zu groups", ng);
    }
    for (size_t r = 0; r < p->rows; r++) {
        qtk__row ri;
        qtk__plan_row(p, r, &ri);
        for (size_t j = 0; j < p->inner; j += p->blk_last) {
            size_t k = p->inner - j < p->blk_last ? p->inner - j : p->blk_last;
            start[ri.scale_base + j / p->blk_last + 1] += k;
        }
    }
    for (size_t g = 0; g < ng; g++) start[g + 1] += start[g];
    for (size_t r = 0; r < p->rows; r++) {
        qtk__row ri;
        qtk__plan_row(p, r, &ri);
        const float *wr = qtk__weights_row(w, r);
        for (size_t j = 0; j < p->inner; j++) {
            size_t g = ri.scale_base + j / p->blk_last, at = start[g] + fill[g]++;
            gx[at] = x[r * p->inner + j];
            if (gw) gw[at] = wr[j];
        }
    }
    qtk__free(fill);
    *start_out = start, *gx_out = gx, *gw_out = gw;
    return QTK_OK;
}

qtk_status qtk__affine_quantize(const qtk__plan *p, const float *x, const qtk_quantize_options *o, const qtk__weights *w,
                                int threads, uint8_t *dst) {
    if (o->calibration == QTK_CALIB_ABSMEAN && !o->scales)
        return qtk__err(QTK_E_SCHEME, "absmean calibration is not defined for the affine mode (use minmax or mse)");
    if (o->offsets && !o->scales) return qtk__err(QTK_E_ARG, "offsets were given without scales");
    size_t bad = qtk__ref_first_nonfinite(x, p->L.numel);
    if (bad != SIZE_MAX) return qtk__nonfinite_error(p, x[bad], bad, "input value");
    affine_ctx a;
    ctx_init(&a, p);
    size_t ng = p->L.n_scales;
    float *eff = qtk__malloc((ng ? ng : 1) * sizeof *eff), *off = qtk__malloc((ng ? ng : 1) * sizeof *off);
    if (!eff || !off) {
        qtk__free(eff), qtk__free(off);
        return qtk__err(QTK_E_NOMEM, "out of memory for %zu scales", ng);
    }
    qtk_status st = QTK_OK;
    if (o->scales) { /* caller-given: stored by the same rules */
        if (!o->offsets) st = qtk__err(QTK_E_ARG, "the affine mode takes given scales with given offsets (offsets, n_offsets)");
        else if (o->n_scales != ng || o->n_offsets != ng)
            st = qtk__err(QTK_E_LENGTH, "%zu scales and %zu offsets given; the scheme has %zu groups", o->n_scales, o->n_offsets, ng);
        for (size_t g = 0; !st && g < ng; g++) {
            if (!qtk__isfinite(o->scales[g]) || o->scales[g] < 0.0f || !qtk__isfinite(o->offsets[g]))
                st = qtk__err(QTK_E_VALUE, "given scale %zu (%g) or offset (%g) is not finite (or the scale is negative)", g,
                              (double)o->scales[g], (double)o->offsets[g]);
            if (st) break;
            uint32_t sc = scale_code(&a, o->scales[g]), oc = offset_code(&a, o->offsets[g]);
            qtk__scale_store(a.sdt, dst + p->L.scales_offset + g * a.ssz, sc);
            qtk__scale_store(a.odt, dst + p->L.offsets_offset + g * a.osz, oc);
            eff[g] = sval(&a, sc), off[g] = oval(&a, oc);
        }
    } else {
        size_t *start = NULL;
        float *gx = NULL, *gw = NULL;
        st = gather(p, x, w, &start, &gx, &gw);
        if (!st) {
            groups_job j = {&a, gx, gw, start, o->calibration == QTK_CALIB_MSE, dst, eff, off};
            /* an mse group costs about 20 passes over its values */
            qtk__parallel_for(qtk__threads_for(threads, p->L.numel * (j.mse ? 32 : 1)), ng, groups_range, &j);
        }
        qtk__free(start), qtk__free(gx), qtk__free(gw);
    }
    if (!st) {
        memset(dst, 0, p->L.value_bytes);
        qtk__affine_encode_rows(p, x, eff, off, dst, 0, p->rows);
    }
    qtk__free(eff), qtk__free(off);
    return st;
}

qtk_status qtk__affine_load(const qtk__plan *p, const uint8_t *b, float *eff, float *off) {
    affine_ctx a;
    ctx_init(&a, p);
    for (size_t g = 0; g < p->L.n_scales; g++) {
        const uint8_t *sp = b + p->L.scales_offset + g * a.ssz, *op = b + p->L.offsets_offset + g * a.osz;
        if (a.sdt == QTK_DTYPE_UE4M3 && (sp[0] & 0x80u))
            return qtk__err(QTK_E_VALUE, "scale %zu (byte %zu) is 0x%02x: the sign bit of a ue4m3 scale must be 0", g,
                            p->L.scales_offset + g * a.ssz, sp[0]);
        float s = qtk__scale_load(a.sdt, sp), o = qtk__scale_load(a.odt, op);
        if (!qtk__isfinite(s))
            return qtk__err(QTK_E_VALUE, "scale %zu (byte %zu) is not finite", g, p->L.scales_offset + g * a.ssz);
        if (!qtk__isfinite(o))
            return qtk__err(QTK_E_VALUE, "offset %zu (byte %zu) is not finite", g, p->L.offsets_offset + g * a.osz);
        if (a.odt == QTK_DTYPE_U8 && o > a.Q)
            return qtk__err(QTK_E_VALUE, "zero point %zu (byte %zu) is %u; %s fields are 0..%u", g,
                            p->L.offsets_offset + g * a.osz, op[0], p->vi->name, (unsigned)a.Q);
        if (eff) eff[g] = s;
        if (off) off[g] = o;
    }
    return QTK_OK;
}

typedef struct {
    const qtk__plan *p;
    const uint8_t *b;
    const float *eff, *off;
    qtk_dtype dtype;
    void *out;
} decode_job;

static void decode_range(void *ctx, size_t r0, size_t r1, int worker) {
    (void)worker;
    const decode_job *j = ctx;
    qtk__affine_decode_rows(j->p, j->b, j->eff, j->off, j->dtype, j->out, r0, r1);
}

qtk_status qtk__affine_dequantize(const qtk__plan *p, const uint8_t *bytes, qtk_dtype dtype, void *out, int threads) {
    size_t ng = p->L.n_scales;
    float *eff = qtk__malloc((ng ? ng : 1) * sizeof *eff), *off = qtk__malloc((ng ? ng : 1) * sizeof *off);
    qtk_status st = eff && off ? qtk__affine_load(p, bytes, eff, off) : qtk__err(QTK_E_NOMEM, "out of memory for %zu scales", ng);
    if (!st) {
        decode_job j = {p, bytes, eff, off, dtype, out};
        qtk__parallel_for(qtk__threads_for(threads, p->L.numel), p->rows, decode_range, &j);
    }
    qtk__free(eff), qtk__free(off);
    return st;
}
