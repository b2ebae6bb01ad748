/* matmul.c — qtk_matmul: argument checks, choice of path, preparation of the activations,
 * and the split of N across threads. The kernels live in mm_*.c. */
#include "mm.h"

#include "../common/parallel.h"
#include "../kernels/cpu.h"
#include "../calib/affine.h"
#include "../tensor/tensor_internal.h"

#include <stdatomic.h>
#include <stdint.h>

/* ---- test hooks ---- */

static atomic_uint hooks_bits, feature_drop;
static _Atomic(const qtk__mm_isa *) isa_override;

void qtk__mm_set_hooks(unsigned hooks) { atomic_store(&hooks_bits, hooks); }
void qtk__mm_set_isa_override(const qtk__mm_isa *isa) { atomic_store(&isa_override, isa); }
unsigned qtk__mm_hooks(void) { return atomic_load(&hooks_bits); }
void qtk__mm_set_feature_mask(unsigned drop) { atomic_store(&feature_drop, drop); }
unsigned qtk__mm_features(void) { return qtk__cpu_features() & ~atomic_load(&feature_drop); }

const char *qtk_mm_path_name(qtk_mm_path p) {
    switch (p) {
    case QTK_MM_PATH_REFERENCE: return "reference";
    case QTK_MM_PATH_EXACT: return "exact";
    case QTK_MM_PATH_GENERIC: return "generic";
    case QTK_MM_PATH_INTEGER: return "integer";
    }
    return "?";
}

static const qtk__mm_isa *active_isa(void) {
    const qtk__mm_isa *o = atomic_load(&isa_override);
    if (o) return o;
    switch (qtk__isa_active()) {
#ifdef QTK_HAVE_AVX512
    case QTK_ISA_AVX512: return &qtk__mm_isa_avx512;
#endif
#ifdef QTK_HAVE_AVX2
    case QTK_ISA_AVX2: return &qtk__mm_isa_avx2;
#endif
#ifdef QTK_HAVE_NEON
    case QTK_ISA_NEON: return &qtk__mm_isa_neon;
#endif
    case QTK_ISA_PORTABLE: return &qtk__mm_isa_portable;
    default: return &qtk__mm_isa_ref;
    }
}

static size_t int_max_m(const qtk__mm_isa *isa, unsigned per) { return isa->int_max_m[per == 4 ? 2 : per == 2 ? 1 : 0]; }
size_t qtk__mm_int_max_m(unsigned per) { return int_max_m(active_isa(), per); }

/* ---- arguments ---- */

static qtk_status get_opts(const qtk_matmul_options *opts, qtk_matmul_options *o) {
    *o = opts ? *opts : (qtk_matmul_options){0};
    if (o->layout != QTK_MM_NK && o->layout != QTK_MM_KN)
        return qtk__err(QTK_E_ARG, "matmul options: layout %d is not QTK_MM_NK or QTK_MM_KN", (int)o->layout);
    if (o->precision != QTK_PRECISION_EXACT && o->precision != QTK_PRECISION_FAST)
        return qtk__err(QTK_E_ARG, "matmul options: precision %d is not QTK_PRECISION_EXACT or QTK_PRECISION_FAST",
                        (int)o->precision);
    if (o->threads < 0) return qtk__err(QTK_E_ARG, "matmul options: threads is %d; use 0 for the default", o->threads);
    return QTK_OK;
}

static qtk_status check_buffers(const void *x, qtk_dtype xdt, size_t m, size_t k, const float *y, size_t n) {
    if (xdt != QTK_DTYPE_F32 && xdt != QTK_DTYPE_F16 && xdt != QTK_DTYPE_BF16)
        return qtk__err(QTK_E_ARG, "x dtype '%s' is not f32, f16 or bf16", qtk_dtype_name(xdt));
    size_t mk, mn, bytes;
    if (!qtk__mul_ok(m, k, &mk) || !qtk__mul_ok(mk, sizeof(float), &bytes))
        return qtk__err(QTK_E_SHAPE, "x of [M, K] = [%zu, %zu] is too large", m, k);
    if (!qtk__mul_ok(m, n, &mn) || !qtk__mul_ok(mn, sizeof(float), &bytes))
        return qtk__err(QTK_E_SHAPE, "y of [M, N] = [%zu, %zu] is too large", m, n);
    if (!x && mk) return qtk__err(QTK_E_ARG, "x is NULL");
    if (!y && mn) return qtk__err(QTK_E_ARG, "y is NULL");
    return QTK_OK;
}

/* Checks W's shape against the layout and the caller's k and n. */
static qtk_status check_shape(const size_t *shape, int rank, qtk_mm_layout lay, size_t k, size_t n) {
    char sb[128];
    const char *ln = lay == QTK_MM_NK ? "nk" : "kn";
    if (rank != 2)
        return qtk__err(QTK_E_SHAPE, "W must be rank 2 (%s for layout %s); its shape is %s",
                        lay == QTK_MM_NK ? "[N, K]" : "[K, N]", ln, qtk_shape_format(shape, rank, sb, sizeof sb));
    int kd = lay == QTK_MM_NK ? 1 : 0, nd = 1 - kd;
    if (shape[kd] != k)
        return qtk__err(QTK_E_SHAPE, "x has K = %zu columns but W of shape %s (layout %s) has K = %zu (its dim %d)", k,
                        qtk_shape_format(shape, 2, sb, sizeof sb), ln, shape[kd], kd);
    if (shape[nd] != n)
        return qtk__err(QTK_E_SHAPE, "y has N = %zu columns but W of shape %s (layout %s) has N = %zu (its dim %d)", n,
                        qtk_shape_format(shape, 2, sb, sizeof sb), ln, shape[nd], nd);
    return QTK_OK;
}

/* ---- choice of path ---- */

/* Activation block length of the integer path, 0 when the call has none: layout nk,
 * integer values streamed along K, weight blocks along K of a power of two >= 16 or
 * one scale per row. */
static size_t int_block(const qtk__mm *c) {
    const qtk__mmw *w = &c->w;
    if (c->layout != QTK_MM_NK || !w->int_ok) return 0;
    if (w->bc >= c->K) return 32;
    if (w->bc < 16 || (w->bc & (w->bc - 1))) return 0;
    return w->bc >= 32 ? 32 : 16;
}

static void choose(qtk__mm *c, const qtk_matmul_options *o) {
    unsigned hooks = atomic_load(&hooks_bits);
    const qtk__mm_isa *isa = active_isa();
    if (c->w.gb) { /* ggml's blocks: the integer kernels of their own, else tiles decoded whole */
        c->isa = isa;
        c->fused = false;
        c->smode = QTK__SM_NONE;
        bool fast = o->precision == QTK_PRECISION_FAST && c->layout == QTK_MM_NK && isa->gb_int;
        if (fast && (c->M <= isa->gb_int_max_m || (hooks & QTK__MM_HOOK_INT_ANY_M))) {
            c->path = QTK_MM_PATH_INTEGER;
            c->bx = c->w.gb->qk;
            return;
        }
        if (c->w.gb->lattice && isa->gb_lat_exact && c->layout == QTK_MM_NK && c->M <= QTK__MM_GB_MAX_M &&
            !(hooks & QTK__MM_HOOK_NO_FUSED)) {
            c->path = QTK_MM_PATH_EXACT; /* the lattice blocks' fused GEMV (mm_body_lat.h) */
            c->fused = true;
            return;
        }
        c->path = isa == &qtk__mm_isa_ref ? QTK_MM_PATH_REFERENCE : QTK_MM_PATH_GENERIC;
        return;
    }
    size_t bx = o->precision == QTK_PRECISION_FAST && c->w.p ? int_block(c) : 0;
    if (c->M > int_max_m(isa, c->w.per) && !(hooks & QTK__MM_HOOK_INT_ANY_M)) bx = 0;
    c->isa = isa;
    c->fused = false;
    c->smode = QTK__SM_NONE;
    if (bx && isa->nk_int) {
        c->path = QTK_MM_PATH_INTEGER;
        c->bx = bx;
        return;
    }
    if (isa == &qtk__mm_isa_ref) {
        c->path = QTK_MM_PATH_REFERENCE;
        return;
    }
    if (c->w.zb && (c->layout != QTK_MM_NK || c->w.zmax > 128 || (c->w.bc < c->w.C && c->w.bc % c->w.per))) {
        /* zero points: the exact stream subtracts each byte's z from its int8 codes (nk, z <= 128,
         * a byte's codes in one block) */
        c->path = QTK_MM_PATH_GENERIC;
        return;
    }
    if (isa->decode && (!(hooks & QTK__MM_HOOK_GENERIC) || !c->w.p)) c->smode = isa->stream_mode(&c->w, c->w.C);
    if (c->smode == QTK__SM_NONE) {
        c->path = QTK_MM_PATH_GENERIC;
        return;
    }
    c->path = QTK_MM_PATH_EXACT;
    if ((c->layout == QTK_MM_NK && isa->nk_fused) || (c->layout == QTK_MM_KN && isa->kn_fused)) {
        c->fused = c->M <= isa->fused_max_m;
        if (hooks & QTK__MM_HOOK_NO_FUSED) c->fused = false;
        if (hooks & QTK__MM_HOOK_FUSED) c->fused = true;
    }
}

/* ---- preparation ---- */

static qtk_status prepare(qtk__mm *c) {
    const size_t M = c->M, K = c->K;
    const qtk__mm_isa *isa = c->isa;
    switch (c->path) {
    case QTK_MM_PATH_REFERENCE: c->ws_floats = qtk__mm_ref_ws(c); return QTK_OK;
    case QTK_MM_PATH_INTEGER: return c->w.gb ? qtk__mm_gb_prepare(c) : isa->int_prepare(c);
    default: break;
    }
    if (c->w.gb && c->path == QTK_MM_PATH_EXACT) { /* the lattice GEMV reads x as it is */
        c->ws_floats = 0;
        return QTK_OK;
    }
    /* the exact path's step order (the generic decoder's natural order: sf = 0) */
    c->sf = 0;
    if (c->path == QTK_MM_PATH_EXACT) {
        c->sf = isa->step(&c->w);
        isa->order(&c->w, c->perm);
    }
    if (c->layout == QTK_MM_KN) {
        c->ws_floats = c->fused ? QTK__MM_KNF_WS : qtk__mm_gemm_ws(c, c->N);
        return QTK_OK;
    }
    /* nk: activations in step order, K padded to whole steps (tiles: to whole vectors) */
    const size_t L = isa->lanes, C = c->sf ? c->sf : L;
    c->kp = qtk__ceil_div(K, C) * C;
    bool xok = true;
    if (c->fused) {
        c->xp = qtk__malloc(M * c->kp * sizeof(float));
        if (!c->xp) return qtk__err(QTK_E_NOMEM, "out of memory for the activations");
        for (size_t m = 0; m < M; m++) xok &= qtk__mm_permute_steps(c->x + m * K, K, c->perm, c->sf, c->xp + m * c->kp, c->kp);
        c->xbig = !xok;
        c->ws_floats = isa->row_ws(c);
        return QTK_OK;
    }
    c->mp = qtk__ceil_div(M, L) * L;
    /* xt[k][m]: 16 rows of x at a time are permuted into a scratch block, then written out
     * k by k as runs of 16 floats (a scatter of single floats mp apart is several times
     * slower) */
    const size_t G = 16;
    c->xt = qtk__malloc(c->kp * c->mp * sizeof(float));
    float *blk = qtk__malloc(G * c->kp * sizeof(float));
    if (!c->xt || !blk) {
        qtk__free(blk);
        return qtk__err(QTK_E_NOMEM, "out of memory for the activations");
    }
    for (size_t m0 = 0; m0 < c->mp; m0 += G) {
        size_t g = c->mp - m0 < G ? c->mp - m0 : G;
        for (size_t i = 0; i < g; i++) {
            if (m0 + i < M) qtk__mm_permute_steps(c->x + (m0 + i) * K, K, c->perm, c->sf, blk + i * c->kp, c->kp);
            else memset(blk + i * c->kp, 0, c->kp * sizeof(float)); /* padding rows */
        }
        for (size_t k = 0; k < c->kp; k++) {
            float *dst = c->xt + k * c->mp + m0;
            for (size_t i = 0; i < g; i++) dst[i] = blk[i * c->kp + k];
        }
    }
    qtk__free(blk);
    c->ws_floats = qtk__mm_gemm_ws(c, c->N);
    return QTK_OK;
}

static void release(qtk__mm *c) {
    qtk__free(c->xp);
    qtk__free(c->xt);
    qtk__free(c->xq);
    qtk__free(c->xs);
    qtk__free(c->xc);
    qtk__free(c->xz);
    c->xz = NULL;
    qtk__free(c->xb);
    qtk__free(c->xlf);
    qtk__free(c->xli);
    c->xb = NULL;
    c->xlf = NULL;
    c->xli = NULL;
    c->xp = c->xt = c->xs = NULL;
    c->xq = NULL;
    c->xc = NULL;
}

/* ---- running ---- */

typedef struct {
    const qtk__mm *c;
    qtk__mm_range_fn fn;
    size_t unit;
    float *ws;
    size_t ws_stride;
} job;

static void run_range(void *ctx, size_t b, size_t e, int worker) {
    const job *j = ctx;
    size_t n0 = b * j->unit, n1 = e * j->unit;
    if (n1 > j->c->N) n1 = j->c->N;
    j->fn(j->c, n0, n1, j->ws ? j->ws + (size_t)worker * j->ws_stride : NULL);
}

static qtk__mm_range_fn range_fn(const qtk__mm *c) {
    switch (c->path) {
    case QTK_MM_PATH_REFERENCE: return qtk__mm_ref_range;
    case QTK_MM_PATH_INTEGER: return !c->w.gb ? c->isa->nk_int : c->w.gb->lattice ? c->isa->gb_lat_int : c->isa->gb_int;
    case QTK_MM_PATH_EXACT:
        if (c->w.gb) return c->isa->gb_lat_exact;
        break;
    default: break;
    }
    if (c->layout == QTK_MM_KN) return c->fused ? c->isa->kn_fused : qtk__mm_gemm_kn;
    return c->fused ? c->isa->nk_fused : qtk__mm_gemm_nk;
}

static bool aligned_f32(const void *p) { return ((uintptr_t)p % _Alignof(float)) == 0; }

/* Runs a prepared view: converts x, picks the path, splits N over threads. */
static qtk_status run(qtk__mm *c, const void *x, qtk_dtype xdt, const float *bias, float *y,
                      const qtk_matmul_options *o) {
    const size_t M = c->M, N = c->N, K = c->K;
    if (M == 0 || N == 0) return QTK_OK;
    /* misaligned f32 buffers are copied: the kernels dereference float pointers */
    float *xbuf = NULL, *bbuf = NULL, *ybuf = NULL;
    qtk_status st = QTK_OK;
    if (bias && !aligned_f32(bias)) {
        bbuf = qtk__malloc(N * sizeof(float));
        if (!bbuf) return qtk__err(QTK_E_NOMEM, "out of memory for the bias");
        memcpy(bbuf, bias, N * sizeof(float));
        bias = bbuf;
    }
    float *yout = y;
    if (!aligned_f32(y)) {
        ybuf = qtk__malloc(M * N * sizeof(float));
        if (!ybuf) {
            st = qtk__err(QTK_E_NOMEM, "out of memory for the output");
            goto done;
        }
        yout = ybuf;
    }
    if (K == 0) { /* an empty sum: y = bias */
        for (size_t m = 0; m < M; m++)
            for (size_t n = 0; n < N; n++) yout[m * N + n] = bias ? bias[n] : 0.0f;
        goto done;
    }
    const float *xf = x;
    if (xdt != QTK_DTYPE_F32 || !aligned_f32(x)) {
        xbuf = qtk__malloc(M * K * sizeof(float));
        if (!xbuf) {
            st = qtk__err(QTK_E_NOMEM, "out of memory for the activations");
            goto done;
        }
        const uint8_t *xb = x;
        for (size_t i = 0; i < M * K; i++) {
            if (xdt == QTK_DTYPE_F16) xbuf[i] = qtk__f16_to_f32(qtk__ld16(xb + 2 * i));
            else if (xdt == QTK_DTYPE_BF16) xbuf[i] = qtk__bf16_to_f32(qtk__ld16(xb + 2 * i));
            else memcpy(&xbuf[i], xb + 4 * i, 4);
        }
        xf = xbuf;
    }
    c->x = xf;
    c->bias = bias;
    c->y = yout;
    st = prepare(c);
    if (st) goto done;

    job j = {c, range_fn(c), c->layout == QTK_MM_KN ? QTK__MM_NC : 16u, NULL, 0};
    size_t units = qtk__ceil_div(N, j.unit), work;
    if (!qtk__mul_ok(N, K, &work) || !qtk__mul_ok(work, M, &work)) work = SIZE_MAX;
    int threads = qtk__threads_for(o->threads, work);
    if ((size_t)threads > units) threads = (int)units;
    float *ws_mem = NULL;
    if (c->ws_floats) {
        /* each thread's scratch starts on its own 64-byte line */
        j.ws_stride = qtk__ceil_div(c->ws_floats, 16) * 16;
        size_t total;
        if (!qtk__mul_ok(j.ws_stride, (size_t)threads, &total) || !qtk__mul_ok(total + 16, sizeof(float), &total)) {
            st = qtk__err(QTK_E_NOMEM, "scratch for %d threads is too large", threads);
            goto done;
        }
        ws_mem = qtk__malloc(total);
        if (!ws_mem) {
            st = qtk__err(QTK_E_NOMEM, "out of memory for %zu bytes of scratch", total);
            goto done;
        }
        uintptr_t a = ((uintptr_t)ws_mem + 63) & ~(uintptr_t)63;
        j.ws = ws_mem + (a - (uintptr_t)ws_mem) / sizeof(float);
    }
    /* chunks claimed dynamically, about 8 per thread (whole passes of the tiled nk driver),
     * so that a thread slowed by other work does not hold the call up; every output's
     * arithmetic is the same whichever thread computes it */
    size_t grain = qtk__ceil_div(units, 8 * (size_t)threads);
    if (j.fn == qtk__mm_gemm_nk)
        grain = qtk__ceil_div(grain, QTK__MM_NB / 16) * (QTK__MM_NB / 16);
    qtk__parallel_for_dynamic(threads, units, grain, run_range, &j);
    qtk__free(ws_mem);
done:
    if (!st && ybuf) memcpy(y, ybuf, M * N * sizeof(float));
    release(c);
    qtk__free(xbuf);
    qtk__free(bbuf);
    qtk__free(ybuf);
    return st;
}

/* ---- the API ---- */

/* Plans a tensor for matmul: shape checks, then the view. p is the caller's. */
static qtk_status view_tensor(const qtk_tensor *w, const qtk_matmul_options *o, size_t k, size_t n, qtk__plan *p,
                              qtk__mm *c) {
    const qtk_layout *L = qtk_tensor_layout(w);
    qtk_status st = check_shape(L->shape, L->rank, o->layout, k, n);
    if (st) return st;
    size_t len = 0;
    const uint8_t *bytes = qtk_tensor_bytes(w, &len);
    const qtk__gb_fmt *F = qtk__gb_fmt_of_scheme(qtk_tensor_scheme(w));
    if (F) {
        qtk__mmw_init_gb(&c->w, F, bytes, L->shape[0], L->shape[1]);
    } else {
        st = qtk__bytes_plan(bytes, len, L->shape, 2, qtk_tensor_scheme(w), p);
        if (st) return st;
        qtk__mmw_init(&c->w, p, bytes);
    }
    c->layout = o->layout;
    c->N = n;
    c->K = k;
    return QTK_OK;
}

/* Effective scales (and the affine mode's offsets) of every group, for the paths that decode
 * element by element; store=ggml decodes whole blocks and needs none. */
static qtk_status need_eff(qtk__mm *c, float **eff) {
    *eff = NULL;
    if (c->w.gb || (c->path != QTK_MM_PATH_REFERENCE && c->path != QTK_MM_PATH_GENERIC)) return QTK_OK;
    const qtk__plan *p = c->w.p;
    size_t ng = p->L.n_scales ? p->L.n_scales : 1;
    *eff = qtk__malloc((p->affine ? 2 : 1) * ng * sizeof(float));
    if (!*eff) return qtk__err(QTK_E_NOMEM, "out of memory for %zu scales", p->L.n_scales);
    qtk_status st = p->affine ? qtk__affine_load(p, c->w.vals, *eff, *eff + ng) : qtk__bytes_scales(p, c->w.vals, *eff, NULL);
    c->w.eff = *eff;
    c->w.off = p->affine ? *eff + ng : NULL;
    return st;
}

qtk_status qtk_matmul(const qtk_tensor *w, const void *x, qtk_dtype x_dtype, size_t m, size_t k, const float *bias,
                      float *y, size_t n, const qtk_matmul_options *opts) {
    if (!w) return qtk__err(QTK_E_ARG, "qtk_matmul: W is NULL");
    qtk_matmul_options o;
    qtk_status st = get_opts(opts, &o);
    if (!st) st = check_buffers(x, x_dtype, m, k, y, n);
    if (st) return st;
    qtk__plan *p = qtk__malloc(sizeof *p);
    if (!p) return qtk__err(QTK_E_NOMEM, "out of memory");
    qtk__mm c;
    memset(&c, 0, sizeof c);
    float *eff = NULL;
    st = view_tensor(w, &o, k, n, p, &c);
    if (!st) {
        c.M = m;
        choose(&c, &o);
        st = need_eff(&c, &eff);
    }
    if (!st) st = run(&c, x, x_dtype, bias, y, &o);
    qtk__free(eff);
    qtk__free(p);
    return st;
}

/* The plan of a call, without running it: c->path, c->isa, c->fused, ... The view's plan is
 * allocated in *pp (the caller frees it, also on failure). */
static qtk_status plan_call(const qtk_tensor *w, size_t m, const qtk_matmul_options *opts, qtk__plan **pp, qtk__mm *c) {
    *pp = NULL;
    qtk_matmul_options o;
    qtk_status st = get_opts(opts, &o);
    if (st) return st;
    const qtk_layout *L = qtk_tensor_layout(w);
    if (L->rank != 2) return check_shape(L->shape, L->rank, o.layout, 0, 0);
    size_t k = o.layout == QTK_MM_NK ? L->shape[1] : L->shape[0];
    size_t n = o.layout == QTK_MM_NK ? L->shape[0] : L->shape[1];
    qtk__plan *p = *pp = qtk__malloc(sizeof *p);
    if (!p) return qtk__err(QTK_E_NOMEM, "out of memory");
    memset(c, 0, sizeof *c);
    st = view_tensor(w, &o, k, n, p, c);
    if (!st) {
        c->M = m;
        choose(c, &o);
    }
    return st;
}

qtk_status qtk_matmul_kernel(const qtk_tensor *w, size_t m, const qtk_matmul_options *opts, const char **kernel) {
    if (!w || !kernel) return qtk__err(QTK_E_ARG, "qtk_matmul_kernel: NULL argument");
    qtk__plan *p;
    qtk__mm c;
    qtk_status st = plan_call(w, m, opts, &p, &c);
    if (!st) {
        switch (c.path) {
        case QTK_MM_PATH_REFERENCE: *kernel = "scalar reference: element codecs, f32 sums in order of k"; break;
        case QTK_MM_PATH_GENERIC: *kernel = c.isa->generic_name; break;
        case QTK_MM_PATH_EXACT:
            *kernel = c.w.gb ? c.isa->gb_lat_exact_name : c.fused ? c.isa->fused_name : c.isa->tiled_name;
            break;
        default:
            *kernel = !c.w.gb ? c.isa->int_name(&c) : c.w.gb->lattice ? c.isa->gb_lat_int_name : c.isa->gb_int_name;
            break;
        }
    }
    qtk__free(p);
    return st;
}

qtk_status qtk_matmul_path(const qtk_tensor *w, size_t m, const qtk_matmul_options *opts, qtk_mm_path *path) {
    if (!w || !path) return qtk__err(QTK_E_ARG, "qtk_matmul_path: NULL argument");
    qtk__plan *p;
    qtk__mm c;
    qtk_status st = plan_call(w, m, opts, &p, &c);
    if (!st) *path = c.path;
    qtk__free(p);
    return st;
}

qtk_status qtk_matmul_f32(const float *w, const void *x, qtk_dtype x_dtype, size_t m, size_t k, const float *bias,
                          float *y, size_t n, const qtk_matmul_options *opts) {
    qtk_matmul_options o;
    qtk_status st = get_opts(opts, &o);
    if (!st) st = check_buffers(x, x_dtype, m, k, y, n);
    if (st) return st;
    size_t nk;
    if (!qtk__mul_ok(n, k, &nk) || !qtk__mul_ok(nk, sizeof(float), &nk))
        return qtk__err(QTK_E_SHAPE, "W of %zu x %zu is too large", n, k);
    if (!w && nk) return qtk__err(QTK_E_ARG, "W is NULL");
    qtk__mm c;
    memset(&c, 0, sizeof c);
    qtk__mmw *v = &c.w;
    v->vals = (const uint8_t *)w;
    v->R = o.layout == QTK_MM_NK ? n : k;
    v->C = o.layout == QTK_MM_NK ? k : n;
    v->br = v->R ? v->R : 1;
    v->bc = v->C ? v->C : 1;
    v->gc = 1;
    v->kind = QTK__MMK_F32;
    v->per = 1;
    v->row_bytes = v->C * sizeof(float);
    c.layout = o.layout;
    c.M = m;
    c.N = n;
    c.K = k;
    o.precision = QTK_PRECISION_EXACT;
    choose(&c, &o);
    return run(&c, x, x_dtype, bias, y, &o);
}
