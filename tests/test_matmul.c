/* test_matmul.c — qtk_matmul against dequantize + an f64-accumulated reference, for every
 * value, store, block shape, lookup table and two-level scheme, both layouts, awkward
 * shapes (K < block, partial blocks, odd K and N, M = 1 to 67), every path (reference,
 * exact fused/tiled, generic, integer with each of its dot-product flavours) at every ISA
 * level this machine runs — and the portable body also at 8 and 16 lanes (AVX2's and
 * AVX-512's widths, mm_body_w8.c / mm_body_w16.c), so that the kernels every vocabulary runs
 * are exercised on any machine — with and without bias, f16/bf16 activations, misaligned
 * buffers, extreme scales and activations, and several thread counts.
 *
 * The bounds checked are the ones qtk_matmul.h states, evaluated per output from the actual
 * data: exact  |y - y64| <= γ(K+2) · (Σ|x w'| + |b|)
 *         fast |y - y64| <= Σ_b (s_b/2) Σ_{k in b}|w'_k| (1 + 2^-8) + γ(K+4) · (Σ|x w'| + |b| + 2 E_q)
 * and bound_catches_errors shows that they reject a dropped block or a wrong scale. */
#include "test.h"

#include "common/parallel.h"
#include "kernels/cpu.h"
#include "matmul/mm.h"
#include "qtk_matmul.h"

extern const qtk__mm_isa qtk__mm_isa_portable8, qtk__mm_isa_portable16;

static const char *const SCHEMES[] = {
    /* integers: every value, stores, block shapes */
    "q8f,block=32:f16", "q8s,block=32:f32", "q8s,block=32:ue4m3", "q8f,store=native", "q8s,block=32:f16,store=u32:1",
    "q8f,block=8:f16", "q4f,block=32:f16", "q4s,block=32:bf16", "q4f,block=32:f16,store=native", "q4f,block=*:f32",
    "q4f,block=2x16:f16", "q4f,block=48:f16", "q4s,block=64:f16", "q4f,block=128:f16", "q4f,block=*x1:f32",
    "q4f,block=32:f16,store=u32:1", "q4f,block=16:f16,tensor=f32", "q2f,block=16:f16", "q2s,block=32:f16", "q2s",
    "q2s,block=32:f16,store=native", "q2f,block=64:ue8m0", "q8s,block=7:f32", "q4s,block=32:f16,store=packed",
    "q2f,block=16:f16,store=packed", "q8s,block=8:f16", "q8f,block=96:bf16", "q4f,block=4:f16", "q2s,block=16:f16",
    /* minifloats */
    "e4m3,block=32:f32", "e4m3,block=32:f16,store=u32", "e5m2,block=16:bf16", "e2m1,block=32:ue8m0,store=packed",
    "e2m1,block=32:f16,store=native", "e2m1,block=32:f16", "nvfp4", "mxfp4", "mxfp8", "e4m3,block=8:f16",
    "e5m2,block=4:f32", "e2m1,block=16:ue4m3",
    /* lookup */
    "nf4", "q4f,table=iq4nl,block=32:f16", "q4f,table=nf4,block=64:f32,store=native", "q2f,table=tq2,block=32:f16",
    "q8f,table=t256,block=32:f16",
};
#define N_SCHEMES (sizeof SCHEMES / sizeof SCHEMES[0])

typedef struct {
    size_t m, n, k;
} shape3;
static const shape3 SHAPES[] = {{1, 5, 33}, {3, 19, 100}, {64, 21, 257}, {5, 70, 7}, {2, 3, 5}, {17, 9, 64}};
#define N_SHAPES (sizeof SHAPES / sizeof SHAPES[0])

static void register_tables(void) {
    static bool done;
    if (done) return;
    done = true;
    const float t4[4] = {-1.5f, -0.5f, 0.5f, 1.5f};
    CHECK_OK(qtk_table_register("tq2", t4, 4));
    float t256[256];
    uint64_t s = 99;
    for (int i = 0; i < 256; i++) t256[i] = trand_normal(&s);
    CHECK_OK(qtk_table_register("t256", t256, 256));
}

static double gamma_n(double n) {
    double u = ldexp(1.0, -24);
    return n * u / (1.0 - n * u);
}

/* One problem: W quantized, its dequantized values, x, bias, and per-output references. */
typedef struct {
    qtk_scheme s;
    qtk_mm_layout lay;
    size_t M, N, K;
    qtk_tensor *t;
    float *wd;   /* dequantized W in its own layout */
    float *x;    /* [M][K] */
    float *bias; /* N or NULL */
    double *y64, *sabs;
    size_t bx;   /* activation block of the integer path */
    double *y64q, *sabsq; /* the same with x replaced by its int8 quantization s_b * q */
} problem;

static float wval(const problem *p, size_t n, size_t k) {
    return p->lay == QTK_MM_NK ? p->wd[n * p->K + k] : p->wd[k * p->N + n];
}

/* The integer path's activations as qtk_matmul.h defines them: per block of bx,
 * s = max|x| / 127 and q = round-half-even(x * (127 / max|x|)) in f32. */
static void quantize_x(const problem *p, double *xq) {
    for (size_t m = 0; m < p->M; m++)
        for (size_t b0 = 0; b0 < p->K; b0 += p->bx) {
            const float *x = p->x + m * p->K;
            size_t b1 = b0 + p->bx < p->K ? b0 + p->bx : p->K;
            float amax = 0.0f;
            for (size_t k = b0; k < b1; k++) amax = fabsf(x[k]) > amax ? fabsf(x[k]) : amax;
            float sc = amax / 127.0f, inv = 127.0f / amax;
            for (size_t k = b0; k < b1; k++) {
                float q = amax == 0.0f ? 0.0f : nearbyintf(x[k] * inv);
                q = q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q;
                xq[m * p->K + k] = (double)sc * q;
            }
        }
}

static void references(problem *p) {
    size_t M = p->M, N = p->N, K = p->K;
    free(p->y64);
    free(p->sabs);
    free(p->y64q);
    free(p->sabsq);
    p->y64 = malloc((M * N + 1) * sizeof(double));
    p->sabs = malloc((M * N + 1) * sizeof(double));
    p->y64q = malloc((M * N + 1) * sizeof(double));
    p->sabsq = malloc((M * N + 1) * sizeof(double));
    double *xq = malloc((M * K + 1) * sizeof(double));
    quantize_x(p, xq);
    for (size_t m = 0; m < M; m++)
        for (size_t n = 0; n < N; n++) {
            double acc = p->bias ? p->bias[n] : 0.0, sa = p->bias ? fabs(p->bias[n]) : 0.0;
            double accq = acc, saq = sa;
            for (size_t k = 0; k < K; k++) {
                double w = wval(p, n, k), t = (double)p->x[m * K + k] * w, tq = xq[m * K + k] * w;
                acc += t;
                sa += fabs(t);
                accq += tq;
                saq += fabs(tq);
            }
            p->y64[m * N + n] = acc;
            p->sabs[m * N + n] = sa;
            p->y64q[m * N + n] = accq;
            p->sabsq[m * N + n] = saq;
        }
    free(xq);
}

static bool problem_init(problem *p, const char *spec, qtk_mm_layout lay, size_t M, size_t N, size_t K, bool bias,
                         uint64_t seed) {
    memset(p, 0, sizeof *p);
    if (qtk_scheme_parse(spec, &p->s) != QTK_OK) {
        TEST_FAILMSG("parse %s: %s", spec, qtk_last_error());
        return false;
    }
    p->lay = lay;
    p->M = M;
    p->N = N;
    p->K = K;
    size_t shape[2] = {lay == QTK_MM_NK ? N : K, lay == QTK_MM_NK ? K : N};
    float *w = malloc((N * K + 1) * sizeof(float));
    for (size_t i = 0; i < N * K; i++) w[i] = trand_normal(&seed) * 0.05f;
    qtk_quantize_options qo = {0};
    if (p->s.value == QTK_VALUE_Q2S && p->s.block_rank == 0) qo.calibration = QTK_CALIB_ABSMEAN; /* BitNet */
    qtk_status st = qtk_quantize(w, shape, 2, &p->s, &qo, &p->t);
    free(w);
    if (st) {
        TEST_FAILMSG("quantize %s on [%zu, %zu]: %s", spec, shape[0], shape[1], qtk_last_error());
        return false;
    }
    p->wd = malloc((N * K + 1) * sizeof(float));
    CHECK_OK(qtk_dequantize(p->t, QTK_DTYPE_F32, p->wd, N * K));
    p->x = malloc((M * K + 1) * sizeof(float));
    for (size_t i = 0; i < M * K; i++) p->x[i] = trand_normal(&seed);
    if (M * K > 3) p->x[M * K / 2] *= 9.0f; /* an outlier activation */
    if (bias) {
        p->bias = malloc(N * sizeof(float));
        for (size_t i = 0; i < N; i++) p->bias[i] = trand_normal(&seed);
    }
    const qtk_layout *L = qtk_tensor_layout(p->t);
    size_t bc = lay == QTK_MM_NK ? L->block[1] : L->block[0];
    p->bx = bc >= K ? 32 : bc >= 32 ? 32 : 16;
    if (p->s.store == QTK_STORE_GGML) p->bx = L->fields_per_unit; /* ggml's blocks: activations per block (QK) */
    references(p);
    return true;
}

static void problem_free(problem *p) {
    qtk_tensor_free(p->t);
    free(p->wd);
    free(p->x);
    free(p->bias);
    free(p->y64);
    free(p->sabs);
    free(p->y64q);
    free(p->sabsq);
}

/* E_q of output (m, n): Σ_b (s_b / 2) Σ_{k in b} |w'_k| with s_b = max|x_b| / 127. */
static double quant_err(const problem *p, size_t m, size_t n) {
    double e = 0.0;
    for (size_t b0 = 0; b0 < p->K; b0 += p->bx) {
        size_t b1 = b0 + p->bx < p->K ? b0 + p->bx : p->K;
        float amax = 0.0f;
        double sw = 0.0;
        for (size_t k = b0; k < b1; k++) {
            float a = fabsf(p->x[m * p->K + k]);
            if (a > amax) amax = a;
            sw += fabs(wval(p, n, k));
        }
        e += (double)(amax / 127.0f) / 2.0 * sw;
    }
    return e * (1.0 + ldexp(1.0, -8));
}

static double tolerance(const problem *p, size_t m, size_t n, bool integer) {
    double s = p->sabs[m * p->N + n];
    if (!integer) return gamma_n((double)p->K + 2) * s;
    double eq = quant_err(p, m, n);
    return eq + gamma_n((double)p->K + 4) * (s + 2 * eq);
}

/* Checks y against the reference; returns the number of outputs outside the bound. */
static size_t check_y(const problem *p, const float *y, bool integer, const char *what) {
    size_t bad = 0;
    for (size_t m = 0; m < p->M; m++)
        for (size_t n = 0; n < p->N; n++) {
            double want = p->y64[m * p->N + n], got = y[m * p->N + n];
            double tol = tolerance(p, m, n, integer);
            if (!(fabs(got - want) <= tol)) {
                if (bad++ == 0)
                    TEST_FAILMSG("%s: y[%zu][%zu] = %.9g, reference %.9g, |diff| %.3g > bound %.3g", what, m, n, got,
                                 want, fabs(got - want), tol);
            }
            /* the integer path is the exact product of the quantized activations, rounded in f32 */
            double wantq = p->y64q[m * p->N + n], tolq = gamma_n((double)p->K + 4) * p->sabsq[m * p->N + n];
            if (integer && !(fabs(got - wantq) <= tolq)) {
                if (bad++ == 0)
                    TEST_FAILMSG("%s: y[%zu][%zu] = %.9g, quantized-x reference %.9g, |diff| %.3g > bound %.3g", what, m,
                                 n, got, wantq, fabs(got - wantq), tolq);
            }
        }
    test_checks++;
    return bad;
}

static qtk_status run(const problem *p, qtk_precision prec, int threads, float *y) {
    qtk_matmul_options o = {p->lay, prec, threads};
    return qtk_matmul(p->t, p->x, QTK_DTYPE_F32, p->M, p->K, p->bias, y, p->N, &o);
}

static const qtk_isa ISAS[] = {QTK_ISA_SCALAR, QTK_ISA_AVX2, QTK_ISA_AVX512, QTK_ISA_NEON};
#define N_ISAS (sizeof ISAS / sizeof ISAS[0])

/* Kernel configurations: ISA level, test hooks, CPU features withheld, and the portable body
 * at another width in place of the level's kernels. */
typedef struct {
    qtk_isa isa;
    unsigned hooks, drop;
    const qtk__mm_isa *body;
} config;
static const config CONFIGS[] = {
    {QTK_ISA_SCALAR, 0, 0, NULL},
    {QTK_ISA_SCALAR, QTK__MM_HOOK_INT_ANY_M, 0, NULL},
    {QTK_ISA_PORTABLE, 0, 0, NULL},
    {QTK_ISA_PORTABLE, QTK__MM_HOOK_INT_MAD, 0, NULL},
    {QTK_ISA_PORTABLE, QTK__MM_HOOK_TERN, 0, NULL},
    {QTK_ISA_PORTABLE, QTK__MM_HOOK_GENERIC, 0, NULL},
    {QTK_ISA_PORTABLE, 0, 0, &qtk__mm_isa_portable8},
    {QTK_ISA_PORTABLE, QTK__MM_HOOK_INT_MAD, 0, &qtk__mm_isa_portable8},
    {QTK_ISA_PORTABLE, QTK__MM_HOOK_NO_FUSED, 0, &qtk__mm_isa_portable8},
    {QTK_ISA_PORTABLE, 0, 0, &qtk__mm_isa_portable16},
    {QTK_ISA_PORTABLE, QTK__MM_HOOK_INT_MAD, 0, &qtk__mm_isa_portable16},
    {QTK_ISA_PORTABLE, QTK__MM_HOOK_TERN | QTK__MM_HOOK_INT_ANY_M, 0, &qtk__mm_isa_portable16},
    {QTK_ISA_PORTABLE, QTK__MM_HOOK_NO_FUSED, 0, &qtk__mm_isa_portable16},
    {QTK_ISA_AVX2, 0, 0, NULL},
    {QTK_ISA_AVX2, QTK__MM_HOOK_INT_ANY_M, 0, NULL},
    {QTK_ISA_AVX2, QTK__MM_HOOK_GENERIC, 0, NULL},
    {QTK_ISA_AVX2, QTK__MM_HOOK_NO_FUSED, 0, NULL},
    {QTK_ISA_AVX2, QTK__MM_HOOK_FUSED, 0, NULL},
    {QTK_ISA_AVX2, QTK__MM_HOOK_TERN, 0, NULL},
    {QTK_ISA_AVX2, 0, QTK_CPU_AVXVNNI | QTK_CPU_AVX512VNNI, NULL},
    {QTK_ISA_AVX512, 0, 0, NULL},
    {QTK_ISA_AVX512, QTK__MM_HOOK_GENERIC, 0, NULL},
    {QTK_ISA_AVX512, QTK__MM_HOOK_NO_FUSED, 0, NULL},
    {QTK_ISA_AVX512, QTK__MM_HOOK_FUSED, 0, NULL},
    {QTK_ISA_AVX512, 0, QTK_CPU_AVX512VNNI, NULL},
    {QTK_ISA_AVX512, QTK__MM_HOOK_INT_ANY_M, 0, NULL},
    {QTK_ISA_AVX512, QTK__MM_HOOK_INT_ANY_M, QTK_CPU_AVX512VNNI, NULL},
    {QTK_ISA_AVX512, QTK__MM_HOOK_NO_TERN, 0, NULL},
    /* AArch64: sdot where the CPU has it, smull + sadalp without (INT_MAD, or the feature withheld) */
    {QTK_ISA_NEON, 0, 0, NULL},
    {QTK_ISA_NEON, QTK__MM_HOOK_INT_MAD, 0, NULL},
    {QTK_ISA_NEON, QTK__MM_HOOK_INT_ANY_M, QTK_CPU_DOTPROD, NULL},
    {QTK_ISA_NEON, QTK__MM_HOOK_GENERIC, 0, NULL},
    {QTK_ISA_NEON, QTK__MM_HOOK_NO_FUSED, 0, NULL},
    {QTK_ISA_NEON, QTK__MM_HOOK_FUSED, 0, NULL},
};
#define N_CONFIGS (sizeof CONFIGS / sizeof CONFIGS[0])

/* Every scheme x layout x shape x path x ISA against the reference. */
static void all_schemes_all_paths(void) {
    register_tables();
    size_t runs = 0;
    for (size_t si = 0; si < N_SCHEMES; si++)
        for (int lay = 0; lay < 2; lay++)
            for (size_t sh = 0; sh < N_SHAPES; sh++) {
                problem p;
                const shape3 *d = &SHAPES[sh];
                if (!problem_init(&p, SCHEMES[si], (qtk_mm_layout)lay, d->m, d->n, d->k, sh % 2 == 0,
                                  1000 + si * 31 + sh))
                    continue;
                float *y = malloc((p.M * p.N + 1) * sizeof(float));
                for (size_t ci = 0; ci < N_CONFIGS; ci++) {
                    const config *cf = &CONFIGS[ci];
                    if (qtk_set_isa(cf->isa) != QTK_OK) continue;
                    qtk__mm_set_hooks(cf->hooks);
                    qtk__mm_set_feature_mask(cf->drop);
                    qtk__mm_set_isa_override(cf->body);
                    for (int prec = 0; prec < 2; prec++) {
                        const unsigned int_hooks = QTK__MM_HOOK_NO_TERN | QTK__MM_HOOK_INT_ANY_M | QTK__MM_HOOK_TERN |
                                                   QTK__MM_HOOK_INT_MAD;
                        if (prec == 1 && (cf->hooks & ~int_hooks)) break; /* exact-path hooks */
                        if (prec == 0 && (cf->hooks & int_hooks)) continue;
                        if (prec == 0 && cf->drop) continue; /* features matter to the integer path only */
                        qtk_mm_path path;
                        qtk_matmul_options o = {p.lay, (qtk_precision)prec, 0};
                        CHECK_OK(qtk_matmul_path(p.t, p.M, &o, &path));
                        CHECK_OK(run(&p, (qtk_precision)prec, 1 + (int)(sh % 3), y));
                        char what[256];
                        snprintf(what, sizeof what, "%s layout %s M=%zu N=%zu K=%zu isa %s hooks %u drop %x %s path %s",
                                 SCHEMES[si], lay ? "kn" : "nk", p.M, p.N, p.K,
                                 cf->body ? cf->body->name : qtk_isa_name(cf->isa), cf->hooks, cf->drop,
                                 prec ? "fast" : "exact", qtk_mm_path_name(path));
                        check_y(&p, y, path == QTK_MM_PATH_INTEGER, what);
                        /* FAST on a scheme with no integer path must fall back to the exact path */
                        if (prec == 0) CHECK_MSG(path != QTK_MM_PATH_INTEGER, "%s: exact ran integer", what);
                        runs++;
                    }
                }
                qtk__mm_set_feature_mask(0);
                qtk__mm_set_hooks(0);
                qtk__mm_set_isa_override(NULL);
                qtk_set_isa(QTK_ISA_AUTO);
                free(y);
                problem_free(&p);
            }
    printf("  %zu matmuls checked\n", runs);
}

/* The extension's schemes (docs/affine.md): ggml's blocks on every path of every level, both
 * layouts, within the bounds; their integer path gives the same bits at every level and thread
 * count; and the affine mode over qtk's layouts (the generic path). */
static const char *const GB_SCHEMES[] = {"q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k",
                                         "u4,block=32:f16,offset=f16", "u8,block=16:f32,min=f32,store=native",
                                         "u2,block=64:bf16,zero=u8", "u4,block=2x16:f16,zero=f16,store=u32:1",
                                         "u4,block=128:f16,zero=u8", "u4,block=32:bf16,zero=u8", "u4,block=*:f16,zero=u8"};
static void ggml_blocks_and_affine(void) {
    static const shape3 NK[] = {{1, 9, 256}, {3, 5, 512}, {17, 7, 768}, {9, 12, 256}, {64, 3, 256}};
    static const shape3 KN[] = {{2, 256, 33}, {5, 512, 70}, {1, 256, 7}};
    size_t runs = 0, compared = 0, zp_int = 0;
    for (size_t si = 0; si < sizeof GB_SCHEMES / sizeof GB_SCHEMES[0]; si++)
        for (int lay = 0; lay < 2; lay++)
            for (size_t sh = 0; sh < (lay ? sizeof KN / sizeof KN[0] : sizeof NK / sizeof NK[0]); sh++) {
                const shape3 *d = lay ? &KN[sh] : &NK[sh];
                problem p;
                if (!problem_init(&p, GB_SCHEMES[si], (qtk_mm_layout)lay, d->m, d->n, d->k, sh % 2 == 0, 77 + si * 13 + sh))
                    continue;
                float *y = malloc((p.M * p.N + 1) * sizeof(float)), *yint = malloc((p.M * p.N + 1) * sizeof(float));
                bool have_int = false;
                for (size_t ci = 0; ci < N_CONFIGS; ci++) {
                    const config *cf = &CONFIGS[ci];
                    if (qtk_set_isa(cf->isa) != QTK_OK) continue;
                    qtk__mm_set_hooks(cf->hooks);
                    qtk__mm_set_feature_mask(cf->drop);
                    qtk__mm_set_isa_override(cf->body);
                    for (int prec = 0; prec < 2; prec++) {
                        qtk_mm_path path;
                        qtk_matmul_options o = {p.lay, (qtk_precision)prec, 0};
                        CHECK_OK(qtk_matmul_path(p.t, p.M, &o, &path));
                        CHECK_OK(run(&p, (qtk_precision)prec, 1 + (int)(ci % 3), y));
                        char what[256];
                        snprintf(what, sizeof what, "%s layout %s M=%zu N=%zu K=%zu config %s hooks %u %s path %s",
                                 GB_SCHEMES[si], lay ? "kn" : "nk", p.M, p.N, p.K, cf->body ? cf->body->name : qtk_isa_name(cf->isa),
                                 cf->hooks, prec ? "fast" : "exact", qtk_mm_path_name(path));
                        check_y(&p, y, path == QTK_MM_PATH_INTEGER, what);
                        if (prec == 0) CHECK_MSG(path != QTK_MM_PATH_INTEGER, "%s: exact ran integer", what);
                        /* zero points (u4/u2 words) take the integer path of the stream view, within
                         * its bound; ggml's blocks also give the same bits at every level */
                        bool zp = p.s.mode == QTK_MODE_AFFINE && p.s.offset == QTK_OFFSET_ZERO &&
                                  p.s.offset_dtype == QTK_DTYPE_U8 && p.s.store == QTK_STORE_U32 && p.s.pack_dim == 0;
                        if (path == QTK_MM_PATH_INTEGER) {
                            CHECK_MSG((p.s.store == QTK_STORE_GGML || zp) && !lay, "%s: an integer path here", what);
                            if (zp) zp_int++;
                        }
                        if (path == QTK_MM_PATH_INTEGER && !zp) {
                            if (!have_int) memcpy(yint, y, p.M * p.N * sizeof(float)), have_int = true;
                            else {
                                CHECK_MSG(memcmp(yint, y, p.M * p.N * sizeof(float)) == 0, "%s: other bits than the first level's", what);
                                compared++;
                            }
                        }
                        runs++;
                    }
                }
                qtk__mm_set_feature_mask(0);
                qtk__mm_set_hooks(0);
                qtk__mm_set_isa_override(NULL);
                qtk_set_isa(QTK_ISA_AUTO);
                /* fast at M <= the limit takes the integer path for ggml's blocks and u8 zero points
                 * of u4/u2 words in layout nk */
                qtk_mm_path path;
                qtk_matmul_options o = {p.lay, QTK_PRECISION_FAST, 0};
                CHECK_OK(qtk_matmul_path(p.t, 1, &o, &path));
                bool zpw = p.s.mode == QTK_MODE_AFFINE && p.s.offset == QTK_OFFSET_ZERO && p.s.offset_dtype == QTK_DTYPE_U8 &&
                           p.s.store == QTK_STORE_U32 && p.s.pack_dim == 0;
                CHECK_MSG((path == QTK_MM_PATH_INTEGER) == ((p.s.store == QTK_STORE_GGML || zpw) && !lay),
                          "%s layout %d: path %s", GB_SCHEMES[si], lay, qtk_mm_path_name(path));
                free(y);
                free(yint);
                problem_free(&p);
            }
    printf("  %zu matmuls checked, %zu integer results compared bit for bit, %zu zero-point integer runs\n", runs, compared,
           zp_int);
    CHECK(compared > 100);
    CHECK(zp_int > 20); /* GPTQ/AWQ's u4 and u2 words took the integer path */
}

/* The integer path's row limit of the active level for a scheme's weight width. */
static size_t int_limit(const char *spec) {
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse(spec, &s));
    const unsigned bits = qtk_value_bits(s.value);
    return qtk__mm_int_max_m(bits == 2 ? 4u : bits == 4 ? 2u : 1u);
}

/* The integer path is taken exactly for integer-valued schemes in layout nk. */
static void integer_path_selection(void) {
    register_tables();
    struct {
        const char *spec;
        bool integer;
    } cases[] = {{"q4f,block=32:f16", true},  {"q8s,block=32:f32", true},  {"q2s", true},
                 {"mxfp4", true},             {"nvfp4", true},             {"q4f,table=iq4nl,block=32:f16", true},
                 {"q2f,table=tq2,block=32:f16", true}, {"nf4", false},     {"e4m3,block=32:f32", false},
                 {"q4f,block=48:f16", false}, {"q4f,block=32:f16,store=u32:1", false}, {"q8f,table=t256,block=32:f16", false}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        problem p;
        if (!problem_init(&p, cases[i].spec, QTK_MM_NK, 2, 4, 96, false, 5)) continue;
        qtk_mm_path path;
        qtk_matmul_options o = {QTK_MM_NK, QTK_PRECISION_FAST, 1};
        CHECK_OK(qtk_matmul_path(p.t, 2, &o, &path));
        CHECK_MSG((path == QTK_MM_PATH_INTEGER) == cases[i].integer, "%s: fast path is %s", cases[i].spec,
                  qtk_mm_path_name(path));
        /* many rows of x: the exact tiled kernel above the level's limit for the weights'
         * width, the integer path up to it */
        if (cases[i].integer) {
            const size_t lim = int_limit(cases[i].spec);
            for (size_t m = 9; m <= 300; m = m * 2 + 1) {
                CHECK_OK(qtk_matmul_path(p.t, m, &o, &path));
                CHECK_MSG((path == QTK_MM_PATH_INTEGER) == (m <= lim), "%s: fast at M = %zu is %s (limit %zu)",
                          cases[i].spec, m, qtk_mm_path_name(path), lim);
            }
        }
        o.precision = QTK_PRECISION_EXACT;
        CHECK_OK(qtk_matmul_path(p.t, 2, &o, &path));
        CHECK_MSG(path != QTK_MM_PATH_INTEGER, "%s: exact path is integer", cases[i].spec);
        o.layout = QTK_MM_KN;
        o.precision = QTK_PRECISION_FAST;
        problem_free(&p);
        if (!problem_init(&p, cases[i].spec, QTK_MM_KN, 2, 4, 96, false, 5)) continue;
        CHECK_OK(qtk_matmul_path(p.t, 2, &o, &path));
        CHECK_MSG(path != QTK_MM_PATH_INTEGER, "%s: kn took the integer path", cases[i].spec);
        problem_free(&p);
    }
}

/* qtk_matmul_kernel names the level, the path and, on the integer path, the instruction the
 * configuration runs: vpdpbusd where VNNI is used, vpmaddubsw where it is withheld or the
 * test hook asks for it, sdot / smull on NEON. */
static void kernel_names(void) {
    problem p;
    if (!problem_init(&p, "q4f,block=32:f16", QTK_MM_NK, 2, 4, 96, false, 5)) return;
    const char *k = NULL;
    CHECK_ERR(qtk_matmul_kernel(NULL, 1, NULL, &k), QTK_E_ARG, "NULL");
    CHECK_ERR(qtk_matmul_kernel(p.t, 1, NULL, NULL), QTK_E_ARG, "NULL");
    qtk_matmul_options bad = {(qtk_mm_layout)7, QTK_PRECISION_FAST, 1};
    CHECK_ERR(qtk_matmul_kernel(p.t, 1, &bad, &k), QTK_E_ARG, "layout");
    for (size_t ci = 0; ci < N_CONFIGS; ci++) {
        const config *cf = &CONFIGS[ci];
        if (cf->body || qtk_set_isa(cf->isa) != QTK_OK) continue;
        qtk__mm_set_hooks(cf->hooks);
        qtk__mm_set_feature_mask(cf->drop);
        for (int prec = 0; prec < 2; prec++) {
            qtk_matmul_options o = {QTK_MM_NK, (qtk_precision)prec, 1};
            qtk_mm_path path;
            k = NULL;
            CHECK_OK(qtk_matmul_path(p.t, 2, &o, &path));
            CHECK_OK(qtk_matmul_kernel(p.t, 2, &o, &k));
            if (!k) continue;
            const char *lv = qtk_isa_name(cf->isa);
            CHECK_MSG(strncmp(k, lv, strlen(lv)) == 0, "isa %s hooks %u: kernel '%s'", lv, cf->hooks, k);
            if (path == QTK_MM_PATH_INTEGER && cf->isa != QTK_ISA_SCALAR) {
                const unsigned vnni = QTK_CPU_AVX512VNNI | QTK_CPU_AVXVNNI;
                const bool mad = (cf->hooks & QTK__MM_HOOK_INT_MAD) || (cf->drop & vnni);
                /* q4f's codes are two's complement: on the CPUs where vpmaddubsw is faster they take it */
                const bool has_vnni = (cf->isa == QTK_ISA_AVX512 ? (qtk__cpu_features() & QTK_CPU_AVX512VNNI) != 0
                                                                 : (qtk__cpu_features() & QTK_CPU_AVXVNNI) != 0) &&
                                      !(qtk__cpu_features() & QTK_CPU_MADD_OVER_DPBUSD);
                if (cf->isa == QTK_ISA_AVX2 || cf->isa == QTK_ISA_AVX512)
                    CHECK_MSG(strstr(k, !mad && has_vnni ? "vpdpbusd" : "vpmaddubsw"), "isa %s hooks %u drop %x: '%s'", lv,
                              cf->hooks, cf->drop, k);
                if (cf->isa == QTK_ISA_NEON) {
                    const bool sdot = !(cf->hooks & QTK__MM_HOOK_INT_MAD) && !(cf->drop & QTK_CPU_DOTPROD) &&
                                      (qtk__cpu_features() & QTK_CPU_DOTPROD);
                    CHECK_MSG(strstr(k, sdot ? "sdot" : "smull"), "neon hooks %u drop %x: '%s'", cf->hooks, cf->drop, k);
                }
            }
            if (path == QTK_MM_PATH_EXACT) CHECK_MSG(strstr(k, "exact"), "'%s' on the exact path", k);
        }
        qtk__mm_set_feature_mask(0);
        qtk__mm_set_hooks(0);
    }
    qtk_set_isa(QTK_ISA_AUTO);
    problem_free(&p);
}

/* Long rows: the bound grows with K and must still hold (and not be vacuous). */
static void long_rows(void) {
    /* q2s,block=256 and q8s,block=64: weight blocks of several integer-path steps */
    const char *specs[] = {"q4f,block=32:f16", "nvfp4", "e4m3,block=32:f32", "q2s", "q2s,block=256:f16", "q8s,block=64:f16"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        for (int lay = 0; lay < 2; lay++) {
            problem p;
            if (!problem_init(&p, specs[i], (qtk_mm_layout)lay, 3, 40, 4099, true, 77 + i)) continue;
            float *y = malloc(p.M * p.N * sizeof(float));
            for (int prec = 0; prec < 2; prec++) {
                CHECK_OK(run(&p, (qtk_precision)prec, 2, y));
                qtk_mm_path path;
                qtk_matmul_options o = {p.lay, (qtk_precision)prec, 0};
                CHECK_OK(qtk_matmul_path(p.t, p.M, &o, &path));
                char what[128];
                snprintf(what, sizeof what, "%s K=4099 %s %s", specs[i], lay ? "kn" : "nk", qtk_mm_path_name(path));
                check_y(&p, y, path == QTK_MM_PATH_INTEGER, what);
            }
            free(y);
            problem_free(&p);
        }
    }
}

/* The bounds reject a result with one block dropped or one scale wrong: the tests above
 * can fail. For the integer path the tight check is against the quantized-x reference. */
static void bound_catches_errors(void) {
    const char *specs[] = {"q4f,block=32:f16", "nvfp4", "q8s,block=32:f32", "nf4"};
    for (size_t i = 0; i < 4; i++) {
        problem p;
        if (!problem_init(&p, specs[i], QTK_MM_NK, 4, 32, 256, false, 11)) continue;
        size_t caught_drop[2] = {0, 0}, caught_scale[2] = {0, 0}, total = p.M * p.N;
        float *bad = malloc(total * sizeof(float));
        double *xq = malloc(p.M * p.K * sizeof(double)), *xd = malloc(p.M * p.K * sizeof(double));
        quantize_x(&p, xq);
        for (size_t k = 0; k < p.M * p.K; k++) xd[k] = p.x[k];
        for (int integer = 0; integer < 2; integer++) {
            const double *xv = integer ? xq : xd; /* the activations each path multiplies */
            /* y with the products of block [64, 96) left out */
            for (size_t m = 0; m < p.M; m++)
                for (size_t n = 0; n < p.N; n++) {
                    double acc = 0.0;
                    for (size_t k = 0; k < p.K; k++)
                        if (k < 64 || k >= 96) acc += xv[m * p.K + k] * wval(&p, n, k);
                    bad[m * p.N + n] = (float)acc;
                }
            for (size_t o = 0; o < total; o++)
                caught_drop[integer] += integer ? fabs(bad[o] - p.y64q[o]) > gamma_n((double)p.K + 4) * p.sabsq[o]
                                                : fabs(bad[o] - p.y64[o]) > tolerance(&p, o / p.N, o % p.N, false);
            /* y with the scale of block [0, 32) off by 1/16 */
            for (size_t m = 0; m < p.M; m++)
                for (size_t n = 0; n < p.N; n++) {
                    double acc = 0.0;
                    for (size_t k = 0; k < p.K; k++)
                        acc += xv[m * p.K + k] * wval(&p, n, k) * (k < 32 ? 1.0625 : 1.0);
                    bad[m * p.N + n] = (float)acc;
                }
            for (size_t o = 0; o < total; o++)
                caught_scale[integer] += integer ? fabs(bad[o] - p.y64q[o]) > gamma_n((double)p.K + 4) * p.sabsq[o]
                                                 : fabs(bad[o] - p.y64[o]) > tolerance(&p, o / p.N, o % p.N, false);
        }
        /* both checks catch a dropped block everywhere and a scale off by 1/16 nearly everywhere */
        CHECK_MSG(caught_drop[0] == total, "%s: exact bound caught %zu/%zu dropped blocks", specs[i], caught_drop[0], total);
        CHECK_MSG(caught_scale[0] >= total * 95 / 100, "%s: exact bound caught %zu/%zu wrong scales", specs[i],
                  caught_scale[0], total);
        CHECK_MSG(caught_drop[1] == total, "%s: integer bound caught %zu/%zu dropped blocks", specs[i],
                  caught_drop[1], total);
        CHECK_MSG(caught_scale[1] >= total * 95 / 100, "%s: integer bound caught %zu/%zu wrong scales", specs[i],
                  caught_scale[1], total);
        printf("  %-18s bounds reject: dropped block %zu/%zu (exact) %zu/%zu (integer); scale +1/16 %zu/%zu (exact) %zu/%zu (integer)\n",
               specs[i], caught_drop[0], total, caught_drop[1], total, caught_scale[0], total, caught_scale[1], total);
        free(bad);
        free(xq);
        free(xd);
        problem_free(&p);
    }
}

/* Results do not depend on the thread count; f16/bf16 activations; misaligned buffers. */
static void threads_dtypes_alignment(void) {
    const char *specs[] = {"q4f,block=32:f16", "e4m3,block=32:f32", "q4f,block=48:f16", "q2s"};
    for (size_t i = 0; i < 4; i++)
        for (int lay = 0; lay < 2; lay++)
            for (int prec = 0; prec < 2; prec++) {
                problem p;
                if (!problem_init(&p, specs[i], (qtk_mm_layout)lay, 64, 200, 130, true, 3 + i)) continue;
                size_t ny = p.M * p.N;
                float *y1 = malloc(ny * sizeof(float)), *y3 = malloc(ny * sizeof(float));
                CHECK_OK(run(&p, (qtk_precision)prec, 1, y1));
                CHECK_OK(run(&p, (qtk_precision)prec, 3, y3));
                CHECK_MSG(memcmp(y1, y3, ny * sizeof(float)) == 0, "%s: 1 and 3 threads differ", specs[i]);
                /* misaligned x, bias and y (odd byte addresses) give the same bits */
                uint8_t *xb = malloc(p.M * p.K * 4 + 1), *bb = malloc(p.N * 4 + 1), *yb = malloc(ny * 4 + 1);
                memcpy(xb + 1, p.x, p.M * p.K * 4);
                memcpy(bb + 1, p.bias, p.N * 4);
                qtk_matmul_options o = {p.lay, (qtk_precision)prec, 2};
                CHECK_OK(qtk_matmul(p.t, xb + 1, QTK_DTYPE_F32, p.M, p.K, (const float *)(const void *)(bb + 1),
                                    (float *)(void *)(yb + 1), p.N, &o));
                CHECK_MSG(memcmp(yb + 1, y1, ny * 4) == 0, "%s: misaligned buffers change the result", specs[i]);
                /* f16 and bf16 activations: round x onto the grid, compare with f32 on the same values */
                for (int dt = 0; dt < 2; dt++) {
                    uint16_t *xh = malloc(p.M * p.K * 2);
                    for (size_t k = 0; k < p.M * p.K; k++) {
                        qtk_dtype d = dt ? QTK_DTYPE_BF16 : QTK_DTYPE_F16;
                        xh[k] = (uint16_t)qtk_fmt_encode(d, p.x[k]);
                        p.x[k] = qtk_fmt_decode(d, xh[k]);
                    }
                    CHECK_OK(run(&p, (qtk_precision)prec, 1, y1));
                    CHECK_OK(qtk_matmul(p.t, xh, dt ? QTK_DTYPE_BF16 : QTK_DTYPE_F16, p.M, p.K, p.bias, y3, p.N, &o));
                    CHECK_MSG(memcmp(y1, y3, ny * sizeof(float)) == 0, "%s: %s activations differ from f32", specs[i],
                              dt ? "bf16" : "f16");
                    free(xh);
                }
                free(xb);
                free(bb);
                free(yb);
                free(y1);
                free(y3);
                problem_free(&p);
            }
}

/* Padding fields of packed stores may hold anything (bytes from elsewhere are kept as
 * they are); they must not reach the result. NaN fields in W do. */
static void padding_and_nan_fields(void) {
    const char *specs[] = {"e4m3,block=32:f32,store=u32", "q4f,block=32:f16", "e2m1,block=32:f16,store=packed",
                           "q2s,block=32:f16"};
    for (size_t i = 0; i < 4; i++) {
        problem p;
        if (!problem_init(&p, specs[i], QTK_MM_NK, 3, 5, 37, false, 8)) continue;
        size_t len;
        const uint8_t *b = qtk_tensor_bytes(p.t, &len);
        uint8_t *dirty = malloc(len);
        memcpy(dirty, b, len);
        const qtk_layout *L = qtk_tensor_layout(p.t);
        size_t row_bytes = L->storage_shape[1] * L->unit_bytes;
        for (size_t n = 0; n < p.N; n++) { /* set every bit past field K-1 of each row */
            size_t used_bits = p.K * L->bits;
            for (size_t bit = used_bits; bit < row_bytes * 8; bit++) dirty[n * row_bytes + bit / 8] |= (uint8_t)(1u << (bit % 8));
        }
        qtk_tensor *t2 = NULL;
        size_t shape[2] = {p.N, p.K};
        CHECK_OK(qtk_tensor_from_bytes(dirty, len, shape, 2, &p.s, &t2));
        float *y1 = malloc(15 * sizeof(float)), *y2 = malloc(15 * sizeof(float));
        for (size_t ii = 0; ii < N_ISAS; ii++) {
            if (qtk_set_isa(ISAS[ii]) != QTK_OK) continue;
            qtk_matmul_options o = {QTK_MM_NK, QTK_PRECISION_EXACT, 1};
            CHECK_OK(qtk_matmul(p.t, p.x, QTK_DTYPE_F32, 3, 37, NULL, y1, 5, &o));
            if (t2) CHECK_OK(qtk_matmul(t2, p.x, QTK_DTYPE_F32, 3, 37, NULL, y2, 5, &o));
            CHECK_MSG(memcmp(y1, y2, 15 * sizeof(float)) == 0, "%s isa %s: padding fields changed y", specs[i],
                      qtk_isa_name(ISAS[ii]));
            o.precision = QTK_PRECISION_FAST;
            CHECK_OK(qtk_matmul(p.t, p.x, QTK_DTYPE_F32, 3, 37, NULL, y1, 5, &o));
            if (t2) CHECK_OK(qtk_matmul(t2, p.x, QTK_DTYPE_F32, 3, 37, NULL, y2, 5, &o));
            CHECK_MSG(memcmp(y1, y2, 15 * sizeof(float)) == 0, "%s isa %s fast: padding fields changed y", specs[i],
                      qtk_isa_name(ISAS[ii]));
        }
        qtk_set_isa(QTK_ISA_AUTO);
        /* a NaN code in W (e4m3 S.1111.111) makes that output NaN on every path */
        if (i == 0) {
            dirty[1 * row_bytes + 5] = 0x7f;
            qtk_tensor *t3 = NULL;
            CHECK_OK(qtk_tensor_from_bytes(dirty, len, shape, 2, &p.s, &t3));
            for (size_t ii = 0; ii < N_ISAS && t3; ii++) {
                if (qtk_set_isa(ISAS[ii]) != QTK_OK) continue;
                CHECK_OK(qtk_matmul(t3, p.x, QTK_DTYPE_F32, 3, 37, NULL, y1, 5, NULL));
                for (size_t m = 0; m < 3; m++)
                    for (size_t n = 0; n < 5; n++)
                        CHECK_MSG(isnan(y1[m * 5 + n]) == (n == 1), "isa %s: y[%zu][%zu] = %g", qtk_isa_name(ISAS[ii]),
                                  m, n, (double)y1[m * 5 + n]);
            }
            qtk_set_isa(QTK_ISA_AUTO);
            qtk_tensor_free(t3);
        }
        qtk_tensor_free(t2);
        free(dirty);
        free(y1);
        free(y2);
        problem_free(&p);
    }
}

/* e4m3 blocks whose scale times 256 would overflow take the per-vector path (the fast
 * e4m3 route folds 256 into the scales); both must agree with the reference. */
static void e4m3_huge_scales(void) {
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("e4m3,block=32:f32", &s));
    const size_t N = 6, K = 96, M = 3;
    float w[6 * 96], x[3 * 96], y[18], sc[6 * 3];
    uint64_t seed = 21;
    for (size_t i = 0; i < N * K; i++) w[i] = trand_uniform(&seed, -1.0f, 1.0f) * 0x1p125f;
    for (size_t i = 0; i < N * 3; i++) sc[i] = i % 2 ? 0x1p121f : 0x1p-3f; /* some blocks huge, some not */
    for (size_t i = 0; i < M * K; i++) x[i] = trand_normal(&seed) * 0x1p-110f;
    size_t shape[2] = {N, K};
    qtk_quantize_options qo = {0};
    qo.scales = sc;
    qo.n_scales = N * 3;
    qtk_tensor *t = NULL;
    CHECK_OK(qtk_quantize(w, shape, 2, &s, &qo, &t));
    float wd[6 * 96];
    CHECK_OK(qtk_dequantize(t, QTK_DTYPE_F32, wd, N * K));
    for (size_t ii = 0; ii < N_ISAS && t; ii++) {
        if (qtk_set_isa(ISAS[ii]) != QTK_OK) continue;
        CHECK_OK(qtk_matmul(t, x, QTK_DTYPE_F32, M, K, NULL, y, N, NULL));
        for (size_t m = 0; m < M; m++)
            for (size_t n = 0; n < N; n++) {
                double acc = 0, sa = 0;
                for (size_t k = 0; k < K; k++) {
                    double p = (double)x[m * K + k] * wd[n * K + k];
                    acc += p;
                    sa += fabs(p);
                }
                CHECK_MSG(fabs(y[m * N + n] - acc) <= gamma_n((double)K + 2) * sa, "isa %s y[%zu][%zu] = %g, want %g",
                          qtk_isa_name(ISAS[ii]), m, n, (double)y[m * N + n], acc);
            }
    }
    qtk_set_isa(QTK_ISA_AUTO);
    qtk_tensor_free(t);
}

/* Dense f32 weights: the baseline entry point. */
static void dense_f32(void) {
    for (int lay = 0; lay < 2; lay++) {
        size_t M = 5, N = 37, K = 70;
        uint64_t s = 4;
        float *w = malloc(N * K * 4), *x = malloc(M * K * 4), *y = malloc(M * N * 4);
        for (size_t i = 0; i < N * K; i++) w[i] = trand_normal(&s);
        for (size_t i = 0; i < M * K; i++) x[i] = trand_normal(&s);
        for (size_t ii = 0; ii < N_ISAS; ii++) {
            if (qtk_set_isa(ISAS[ii]) != QTK_OK) continue;
            qtk_matmul_options o = {(qtk_mm_layout)lay, QTK_PRECISION_EXACT, 2};
            CHECK_OK(qtk_matmul_f32(w, x, QTK_DTYPE_F32, M, K, NULL, y, N, &o));
            for (size_t m = 0; m < M; m++)
                for (size_t n = 0; n < N; n++) {
                    double acc = 0, sa = 0;
                    for (size_t k = 0; k < K; k++) {
                        double t = (double)x[m * K + k] * (lay ? w[k * N + n] : w[n * K + k]);
                        acc += t;
                        sa += fabs(t);
                    }
                    CHECK_MSG(fabs(y[m * N + n] - acc) <= gamma_n((double)K + 2) * sa, "dense %s isa %s y[%zu][%zu]",
                              lay ? "kn" : "nk", qtk_isa_name(ISAS[ii]), m, n);
                }
        }
        qtk_set_isa(QTK_ISA_AUTO);
        free(w);
        free(x);
        free(y);
    }
}

/* K = 0 gives y = bias; M = 0 or N = 0 do nothing. */
static void empty_shapes(void) {
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("q4f,block=32:f16", &s));
    size_t shape[2] = {3, 0};
    qtk_tensor *t = NULL;
    CHECK_OK(qtk_quantize(NULL, shape, 2, &s, NULL, &t));
    float bias[3] = {1, 2, 3}, y[6] = {9, 9, 9, 9, 9, 9};
    CHECK_OK(qtk_matmul(t, NULL, QTK_DTYPE_F32, 2, 0, bias, y, 3, NULL));
    CHECK(y[0] == 1 && y[1] == 2 && y[2] == 3 && y[3] == 1 && y[5] == 3);
    CHECK_OK(qtk_matmul(t, NULL, QTK_DTYPE_F32, 2, 0, NULL, y, 3, NULL));
    CHECK(y[0] == 0 && y[5] == 0);
    CHECK_OK(qtk_matmul(t, NULL, QTK_DTYPE_F32, 0, 0, NULL, NULL, 3, NULL));
    qtk_tensor_free(t);
}

/* An allocator that fails after a budget of allocations. */
static int alloc_budget = -1;
static void *fail_alloc(void *opaque, size_t n) {
    (void)opaque;
    if (alloc_budget == 0) return NULL;
    if (alloc_budget > 0) alloc_budget--;
    return malloc(n);
}
static void pass_free(void *opaque, void *p) {
    (void)opaque;
    free(p);
}

/* Every allocation of every path, failing one at a time: QTK_E_NOMEM, a message, no leak. */
static void allocation_failure(void) {
    struct {
        const char *spec;
        qtk_mm_layout lay;
        size_t m;
        qtk_precision prec;
        qtk_dtype xdt;
        unsigned hooks;
        bool misaligned;
    } cases[] = {
        {"q4f,block=32:f16", QTK_MM_NK, 1, QTK_PRECISION_EXACT, QTK_DTYPE_F32, 0, false},       /* fused */
        {"q4f,block=32:f16", QTK_MM_NK, 20, QTK_PRECISION_EXACT, QTK_DTYPE_F16, 0, false},      /* tiled */
        {"q4f,block=32:f16", QTK_MM_NK, 3, QTK_PRECISION_FAST, QTK_DTYPE_BF16, 0, true},        /* integer */
        {"q2s", QTK_MM_NK, 2, QTK_PRECISION_FAST, QTK_DTYPE_F32, 0, false},                     /* ternary */
        {"q4f,block=32:f16,store=u32:1", QTK_MM_NK, 2, QTK_PRECISION_EXACT, QTK_DTYPE_F32, 0, false}, /* generic */
        {"nvfp4", QTK_MM_KN, 2, QTK_PRECISION_EXACT, QTK_DTYPE_F32, 0, false},                  /* kn fused */
        {"nvfp4", QTK_MM_KN, 20, QTK_PRECISION_EXACT, QTK_DTYPE_F32, 0, true},                  /* kn tiled */
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (size_t isa = 0; isa < N_ISAS; isa++) {
            if (qtk_set_isa(ISAS[isa]) != QTK_OK) continue;
            problem p;
            if (!problem_init(&p, cases[ci].spec, cases[ci].lay, cases[ci].m, 40, 96, true, 9)) continue;
            uint16_t xh[20 * 96];
            for (size_t i = 0; i < p.M * p.K; i++) xh[i] = (uint16_t)qtk_fmt_encode(cases[ci].xdt == QTK_DTYPE_F16 ? QTK_DTYPE_F16 : QTK_DTYPE_BF16, p.x[i]);
            uint8_t *xb = malloc(p.M * p.K * 4 + 1), *yb = malloc(p.M * p.N * 4 + 1);
            memcpy(xb + 1, p.x, p.M * p.K * 4);
            const void *x = cases[ci].xdt != QTK_DTYPE_F32 ? (const void *)xh : cases[ci].misaligned ? (const void *)(xb + 1) : (const void *)p.x;
            float *y = cases[ci].misaligned ? (float *)(void *)(yb + 1) : (float *)(void *)yb;
            qtk_matmul_options o = {cases[ci].lay, cases[ci].prec, 2};
            qtk_allocator a = {fail_alloc, pass_free, NULL};
            qtk_set_allocator(&a);
            int nomem = 0;
            qtk_status st = QTK_E_NOMEM;
            for (int budget = 0; budget < 40 && st != QTK_OK; budget++) {
                alloc_budget = budget;
                st = qtk_matmul(p.t, x, cases[ci].xdt, p.M, p.K, p.bias, y, p.N, &o);
                if (st != QTK_OK) {
                    CHECK_MSG(st == QTK_E_NOMEM, "%s budget %d: %s: %s", cases[ci].spec, budget, qtk_status_name(st),
                              qtk_last_error());
                    CHECK_MSG(strstr(qtk_last_error(), "out of memory") != NULL, "%s: message '%s'", cases[ci].spec,
                              qtk_last_error());
                    nomem++;
                }
            }
            alloc_budget = -1;
            qtk_set_allocator(NULL);
            CHECK_MSG(st == QTK_OK && nomem >= 2, "%s isa %s: %d failures, then %s", cases[ci].spec,
                      qtk_isa_name(ISAS[isa]), nomem, qtk_status_name(st));
            free(xb);
            free(yb);
            problem_free(&p);
        }
    qtk_set_isa(QTK_ISA_AUTO);
}

static void errors(void) {
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("q4f,block=32:f16", &s));
    size_t shape[2] = {8, 64};
    float w[8 * 64] = {0}, x[2 * 64] = {0}, y[16];
    qtk_tensor *t = NULL;
    CHECK_OK(qtk_quantize(w, shape, 2, &s, NULL, &t));
    CHECK_ERR(qtk_matmul(NULL, x, QTK_DTYPE_F32, 2, 64, NULL, y, 8, NULL), QTK_E_ARG, "W is NULL");
    CHECK_ERR(qtk_matmul(t, NULL, QTK_DTYPE_F32, 2, 64, NULL, y, 8, NULL), QTK_E_ARG, "x is NULL");
    CHECK_ERR(qtk_matmul(t, x, QTK_DTYPE_F32, 2, 64, NULL, NULL, 8, NULL), QTK_E_ARG, "y is NULL");
    CHECK_ERR(qtk_matmul(t, x, QTK_DTYPE_E4M3, 2, 64, NULL, y, 8, NULL), QTK_E_ARG, "x dtype 'e4m3'");
    CHECK_ERR(qtk_matmul(t, x, QTK_DTYPE_F32, 2, 63, NULL, y, 8, NULL), QTK_E_SHAPE,
              "x has K = 63 columns but W of shape 8x64 (layout nk) has K = 64 (its dim 1)");
    CHECK_ERR(qtk_matmul(t, x, QTK_DTYPE_F32, 2, 64, NULL, y, 7, NULL), QTK_E_SHAPE,
              "y has N = 7 columns but W of shape 8x64 (layout nk) has N = 8 (its dim 0)");
    qtk_matmul_options o = {QTK_MM_KN, QTK_PRECISION_EXACT, 0};
    CHECK_ERR(qtk_matmul(t, x, QTK_DTYPE_F32, 2, 64, NULL, y, 8, &o), QTK_E_SHAPE,
              "x has K = 64 columns but W of shape 8x64 (layout kn) has K = 8 (its dim 0)");
    o = (qtk_matmul_options){(qtk_mm_layout)7, QTK_PRECISION_EXACT, 0};
    CHECK_ERR(qtk_matmul(t, x, QTK_DTYPE_F32, 2, 64, NULL, y, 8, &o), QTK_E_ARG, "layout 7");
    o = (qtk_matmul_options){QTK_MM_NK, (qtk_precision)9, 0};
    CHECK_ERR(qtk_matmul(t, x, QTK_DTYPE_F32, 2, 64, NULL, y, 8, &o), QTK_E_ARG, "precision 9");
    o = (qtk_matmul_options){QTK_MM_NK, QTK_PRECISION_EXACT, -1};
    CHECK_ERR(qtk_matmul(t, x, QTK_DTYPE_F32, 2, 64, NULL, y, 8, &o), QTK_E_ARG, "threads is -1");
    CHECK_ERR(qtk_matmul(t, x, QTK_DTYPE_F32, SIZE_MAX / 2, 64, NULL, y, 8, NULL), QTK_E_SHAPE, "too large");
    qtk_mm_path path;
    CHECK_ERR(qtk_matmul_path(t, 1, NULL, NULL), QTK_E_ARG, "NULL");
    qtk_tensor_free(t);
    size_t shp3[3] = {2, 4, 64};
    float w3[2 * 4 * 64] = {0};
    CHECK_OK(qtk_quantize(w3, shp3, 3, &s, NULL, &t));
    CHECK_ERR(qtk_matmul(t, x, QTK_DTYPE_F32, 2, 64, NULL, y, 8, NULL), QTK_E_SHAPE,
              "W must be rank 2 ([N, K] for layout nk); its shape is 2x4x64");
    CHECK_ERR(qtk_matmul_path(t, 1, NULL, &path), QTK_E_SHAPE, "rank 2");
    qtk_tensor_free(t);
    CHECK_ERR(qtk_matmul_f32(NULL, x, QTK_DTYPE_F32, 2, 64, NULL, y, 8, NULL), QTK_E_ARG, "W is NULL");
    CHECK(strcmp(qtk_mm_path_name(QTK_MM_PATH_INTEGER), "integer") == 0);
    CHECK(strcmp(qtk_mm_path_name((qtk_mm_path)42), "?") == 0);
}

/* Kernel configurations of the SIMD levels this machine runs (the portable body at every
 * width included), for the sweeps below. */
static size_t simd_configs(const config **out) {
    size_t n = 0;
    for (size_t ci = 0; ci < N_CONFIGS; ci++) {
        const config *cf = &CONFIGS[ci];
        if (cf->isa == QTK_ISA_SCALAR || cf->drop || (cf->hooks & (QTK__MM_HOOK_GENERIC | QTK__MM_HOOK_INT_ANY_M))) continue;
        if (qtk_set_isa(cf->isa) != QTK_OK) continue;
        out[n++] = cf;
    }
    qtk_set_isa(QTK_ISA_AUTO);
    return n;
}

static void use_config(const config *cf) {
    qtk_set_isa(cf->isa);
    qtk__mm_set_hooks(cf->hooks);
    qtk__mm_set_isa_override(cf->body);
}
static void reset_config(void) {
    qtk__mm_set_hooks(0);
    qtk__mm_set_isa_override(NULL);
    qtk_set_isa(QTK_ISA_AUTO);
}
static const char *config_name(const config *cf) { return cf->body ? cf->body->name : qtk_isa_name(cf->isa); }

/* Every decode kind at M = 1..67 (fused kernels up to 8 rows of x, in tiles of 4, 2, 1; the
 * tiled drivers above), K never a multiple of the block or of a step, N never a multiple of
 * a tile or of the 16 rows a thread takes, both layouts, both precisions, every kernel
 * configuration: each output within the bound of qtk_matmul.h. */
static void m_sweep_awkward(void) {
    register_tables();
    static const char *const specs[] = {"q8s,block=32:f16",  "q4f,block=32:f16", "q2s,block=256:f16", "nvfp4",
                                        "e2m1,block=32:f16,store=native", "nf4", "q2f,table=tq2,block=32:f16",
                                        "e4m3,block=32:f32", "e5m2,block=16:bf16", "q4f,table=iq4nl,block=32:f16",
                                        "q4s,block=16:f16", "mxfp4"};
    static const size_t ks[] = {33, 97, 300, 1, 259, 70}, ns[] = {5, 17, 33, 1, 47};
    const config *cfs[N_CONFIGS];
    size_t ncf = simd_configs(cfs), runs = 0;
    for (size_t si = 0; si < sizeof specs / sizeof specs[0]; si++)
        for (size_t M = 1; M <= 67; M += M < 10 ? 1 : M < 60 ? 9 : 3) {
            size_t K = ks[(M + si) % 6], N = ns[(M * 3 + si) % 5];
            qtk_mm_layout lay = (qtk_mm_layout)((M + si) % 2);
            problem p;
            if (!problem_init(&p, specs[si], lay, M, N, K, M % 3 == 0, 500 + M * 13 + si)) continue;
            float *y = malloc((M * N + 1) * sizeof(float));
            for (size_t ci = 0; ci < ncf; ci++) {
                use_config(cfs[ci]);
                for (int prec = 0; prec < 2; prec++) {
                    qtk_mm_path path;
                    qtk_matmul_options o = {p.lay, (qtk_precision)prec, 0};
                    CHECK_OK(qtk_matmul_path(p.t, p.M, &o, &path));
                    CHECK_OK(run(&p, (qtk_precision)prec, 1 + (int)(M % 3), y));
                    char what[256];
                    snprintf(what, sizeof what, "%s %s M=%zu N=%zu K=%zu %s hooks %u %s path %s", specs[si],
                             lay ? "kn" : "nk", M, N, K, config_name(cfs[ci]), cfs[ci]->hooks, prec ? "fast" : "exact",
                             qtk_mm_path_name(path));
                    check_y(&p, y, path == QTK_MM_PATH_INTEGER, what);
                    runs++;
                }
            }
            reset_config();
            free(y);
            problem_free(&p);
        }
    printf("  %zu matmuls checked\n", runs);
}

/* The matmul's scheduler: every item of [0, n) exactly once, in chunks of at most `grain`
 * that start at multiples of it (or, run inline on one thread, all at once), each from a
 * worker below the thread count. */
typedef struct {
    _Atomic unsigned *seen;
    size_t grain;
    int threads;
    size_t n;
    _Atomic unsigned bad;
} dyn_check;
static void dyn_visit(void *ctx, size_t b, size_t e, int worker) {
    dyn_check *d = ctx;
    const bool chunk = b % d->grain == 0 && e > b && e - b <= d->grain, whole = b == 0 && e == d->n;
    if (worker < 0 || worker >= d->threads || !(chunk || whole)) d->bad++;
    for (size_t i = b; i < e; i++) d->seen[i]++;
}
static void dynamic_chunks(void) {
    static const size_t ns[] = {1, 7, 100, 1000};
    static const size_t grains[] = {1, 3, 64, 5000};
    for (size_t ni = 0; ni < 4; ni++)
        for (size_t gi = 0; gi < 4; gi++)
            for (int th = 1; th <= 5; th += 2) {
                const size_t n = ns[ni];
                _Atomic unsigned *seen = calloc(n, sizeof *seen);
                dyn_check d = {seen, grains[gi], th, n, 0};
                qtk__parallel_for_dynamic(th, n, grains[gi], dyn_visit, &d);
                size_t wrong = 0;
                for (size_t i = 0; i < n; i++) wrong += seen[i] != 1;
                CHECK_MSG(wrong == 0 && d.bad == 0, "n %zu grain %zu threads %d: %zu items not seen once, %u bad chunks", n,
                          grains[gi], th, wrong, (unsigned)d.bad);
                free(seen);
            }
}

/* The fused kernels and the integer path give the same bits for every thread count (each
 * output is one thread's, computed in one order). */
static void thread_invariance(void) {
    static const char *const specs[] = {"q4f,block=32:f16", "q2s,block=256:f16", "nvfp4", "e4m3,block=32:f32", "nf4",
                                        "q8s,block=32:f16", "u4,block=128:f16,zero=u8", "u2,block=32:f16,zero=u8"};
    static const size_t ms[] = {1, 3, 8, 20};
    const config *cfs[N_CONFIGS];
    size_t ncf = simd_configs(cfs);
    for (size_t si = 0; si < sizeof specs / sizeof specs[0]; si++)
        for (int lay = 0; lay < 2; lay++)
            for (size_t mi = 0; mi < 4; mi++) {
                problem p;
                if (!problem_init(&p, specs[si], (qtk_mm_layout)lay, ms[mi], 300, 200, true, 31 + si)) continue;
                size_t ny = p.M * p.N;
                float *y1 = malloc(ny * sizeof(float)), *yt = malloc(ny * sizeof(float));
                for (size_t ci = 0; ci < ncf; ci++) {
                    use_config(cfs[ci]);
                    for (int prec = 0; prec < 2; prec++) {
                        CHECK_OK(run(&p, (qtk_precision)prec, 1, y1));
                        for (int th = 2; th <= 7; th += 5 - th / 4 * 3) { /* 2, 5, 7 */
                            CHECK_OK(run(&p, (qtk_precision)prec, th, yt));
                            CHECK_MSG(memcmp(y1, yt, ny * sizeof(float)) == 0, "%s %s M=%zu %s %s: 1 and %d threads differ",
                                      specs[si], lay ? "kn" : "nk", p.M, config_name(cfs[ci]), prec ? "fast" : "exact", th);
                        }
                    }
                }
                reset_config();
                free(y1);
                free(yt);
                problem_free(&p);
            }
}

/* The integer path's flavours give the same bits at one vector width: every dot product
 * (vpdpbusd, vpmaddubsw by offset, xor or sign, the multiply-free ternary kernel; NEON's
 * sdot and smull/sadalp; the portable lane loops) makes the same exact integer sums, scaled
 * and added in the same order. Widths differ in how lanes are grouped, and the x86
 * vocabularies add a vector's lanes in another order than the portable one, so each family
 * of a width is compared with itself: the portable vocabulary at 4 lanes (portable, neon
 * with and without the dot product), 8 and 16 (the test builds of the body), and x86 at 8
 * (avx2, with and without VNNI, each flavour) and 16 (avx512 likewise). The multiply-free
 * ternary kernel sums 32 fields a 64-bit lane, another grouping: it is a family of its own. */
static unsigned config_lanes(const config *cf) {
    if (cf->body) return cf->body->lanes;
    return cf->isa == QTK_ISA_AVX512 ? 16 : cf->isa == QTK_ISA_AVX2 ? 8 : 4;
}
/* the family: its width, + 32 for the portable vocabulary, + 64 for the ternary kernel
 * (where qtk_matmul_kernel says the call takes it; the portable bodies at other widths name
 * the level's kernel, so the hook decides there) */
static unsigned config_family(const config *cf, const problem *p) {
    const bool x86 = !cf->body && (cf->isa == QTK_ISA_AVX2 || cf->isa == QTK_ISA_AVX512);
    const char *k = "";
    qtk_matmul_options o = {QTK_MM_NK, QTK_PRECISION_FAST, 1};
    CHECK_OK(qtk_matmul_kernel(p->t, p->M, &o, &k));
    const bool t2 = (p->s.value == QTK_VALUE_Q2S || p->s.value == QTK_VALUE_Q2F) && p->s.mode != QTK_MODE_LOOKUP;
    const bool tern = cf->body ? t2 && (cf->hooks & QTK__MM_HOOK_TERN) : strstr(k, "multiply-free") != NULL;
    return config_lanes(cf) + (x86 ? 0 : 32) + (tern ? 64 : 0);
}
static void integer_flavours_same_bits(void) {
    register_tables();
    static const char *const specs[] = {"q8s,block=32:f16", "q4f,block=32:f16", "q4s,block=64:f16", "q2s,block=256:f16",
                                        "q2f,block=32:f16", "nf4", "q4f,table=iq4nl,block=32:f16", "q2f,table=tq2,block=32:f16",
                                        "q8f,block=16:f32", "u4,block=128:f16,zero=u8", "u2,block=32:f16,zero=u8"};
    static const size_t ms[] = {1, 3, 8};
    size_t compared[113] = {0}, configs[113] = {0};
    for (size_t si = 0; si < sizeof specs / sizeof specs[0]; si++)
        for (size_t mi = 0; mi < 3; mi++) {
            problem p;
            if (!problem_init(&p, specs[si], QTK_MM_NK, ms[mi], 37, 512, mi == 1, 4242 + si)) continue;
            const size_t ny = p.M * p.N;
            float *first[113] = {NULL}, *y = malloc(ny * sizeof(float));
            const char *first_name[113] = {NULL};
            for (size_t ci = 0; ci < N_CONFIGS; ci++) {
                const config *cf = &CONFIGS[ci];
                if (cf->isa == QTK_ISA_SCALAR || (cf->hooks & QTK__MM_HOOK_GENERIC) || qtk_set_isa(cf->isa) != QTK_OK) continue;
                use_config(cf);
                qtk__mm_set_feature_mask(cf->drop);
                qtk_mm_path path;
                qtk_matmul_options o = {QTK_MM_NK, QTK_PRECISION_FAST, 1};
                CHECK_OK(qtk_matmul_path(p.t, p.M, &o, &path));
                if (path != QTK_MM_PATH_INTEGER) continue;
                CHECK_OK(run(&p, QTK_PRECISION_FAST, 1 + (int)(ci % 2), y));
                const unsigned L = config_family(cf, &p);
                configs[L]++;
                if (!first[L]) {
                    first[L] = malloc(ny * sizeof(float));
                    memcpy(first[L], y, ny * sizeof(float));
                    first_name[L] = config_name(cf);
                    continue;
                }
                CHECK_MSG(memcmp(first[L], y, ny * sizeof(float)) == 0, "%s M=%zu: %s (hooks %u, drop %x) differs from %s",
                          specs[si], p.M, config_name(cf), cf->hooks, cf->drop, first_name[L]);
                compared[L]++;
            }
            qtk__mm_set_feature_mask(0);
            reset_config();
            for (int L = 0; L < 113; L++) free(first[L]);
            free(y);
            problem_free(&p);
        }
    /* the 4-lane portable family runs on every machine (portable, its INT_MAD flavour, and on
     * ARM neon with and without sdot); avx2's where the CPU has it */
    CHECK_MSG(compared[4 + 32] > 0, "the 4-lane family compared nothing");
    if (qtk_set_isa(QTK_ISA_AVX2) == QTK_OK) CHECK_MSG(compared[8] > 0, "avx2's family compared nothing");
    qtk_clear_error();
    qtk_set_isa(QTK_ISA_AUTO);
    for (int L = 4; L < 113; L++) {
        if (configs[L])
            printf("  %s vocabulary, %2d lanes%s: %zu integer results, %zu compared bit for bit with the family's first\n",
                   L % 64 > 32 ? "portable" : "x86", L % 32, L > 64 ? " (ternary)" : "", configs[L], compared[L]);
    }
}

/* y of bytes built by hand (the scales given as stored codes), x given, in f64 from the
 * dequantized weights: for extreme scales and activations. */
static void check_bytes(const char *spec, const uint8_t *bytes, size_t len, size_t N, size_t K, const float *x, size_t M,
                        const char *what) {
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse(spec, &s));
    size_t shape[2] = {N, K};
    qtk_tensor *t = NULL;
    CHECK_OK(qtk_tensor_from_bytes(bytes, len, shape, 2, &s, &t));
    if (!t) return;
    float *wd = malloc(N * K * sizeof(float)), *y = malloc(M * N * sizeof(float));
    CHECK_OK(qtk_dequantize(t, QTK_DTYPE_F32, wd, N * K));
    const config *cfs[N_CONFIGS];
    size_t ncf = simd_configs(cfs);
    for (size_t ci = 0; ci <= ncf; ci++) {
        if (ci < ncf) use_config(cfs[ci]);
        else qtk_set_isa(QTK_ISA_SCALAR);
        qtk_matmul_options o = {QTK_MM_NK, QTK_PRECISION_EXACT, 1};
        CHECK_OK(qtk_matmul(t, x, QTK_DTYPE_F32, M, K, NULL, y, N, &o));
        for (size_t m = 0; m < M; m++)
            for (size_t n = 0; n < N; n++) {
                double acc = 0, sa = 0;
                bool inf = false;
                for (size_t k = 0; k < K; k++) {
                    double pr = (double)x[m * K + k] * wd[n * K + k];
                    inf = inf || isinf(wd[n * K + k]);
                    acc += pr;
                    sa += fabs(pr);
                }
                double got = y[m * N + n];
                bool ok = inf ? isinf(got) || isnan(got) : fabs(got - acc) <= gamma_n((double)K + 2) * sa;
                CHECK_MSG(ok, "%s %s: y[%zu][%zu] = %g, want %g (bound %g)", what,
                          ci < ncf ? config_name(cfs[ci]) : "scalar", m, n, got, acc, gamma_n((double)K + 2) * sa);
            }
    }
    reset_config();
    qtk_tensor_free(t);
    free(wd);
    free(y);
}

/* Scales too small to carry the kernels' 2^-24 (ue8m0 2^-127.., bf16 subnormals), scales so
 * large that value x scale overflows (w' = inf, as qtk_dequantize gives), activations near
 * 2^100: the exact path keeps the products the reference forms. */
static void extreme_scales(void) {
    const size_t N = 6, K = 96, M = 1;
    uint64_t seed = 77;
    float x[96], xb[96];
    for (size_t k = 0; k < K; k++) {
        x[k] = trand_normal(&seed) * 0x1p60f;
        xb[k] = trand_normal(&seed) * 0x1p100f;
    }
    /* mxfp4: two codes per byte, then one ue8m0 per block of 32 */
    uint8_t mx[6 * 48 + 6 * 3];
    for (size_t i = 0; i < 6 * 48; i++) mx[i] = (uint8_t)trand_u64(&seed);
    for (size_t i = 0; i < 18; i++) mx[6 * 48 + i] = (uint8_t)(i < 3 || i % 3 == 0 ? 1 + i % 5 : 100 + i); /* 2^-126 .. */
    check_bytes("mxfp4", mx, sizeof mx, N, K, x, M, "mxfp4 tiny scales");
    /* q4f with bf16 scales: subnormal ones, then huge ones (7 x 2^126 overflows) */
    uint8_t q4[6 * 48 + 6 * 3 * 2];
    for (size_t i = 0; i < 6 * 48; i++) q4[i] = (uint8_t)trand_u64(&seed);
    for (size_t i = 0; i < 18; i++) qtk__st16(q4 + 6 * 48 + 2 * i, (uint16_t)(i < 6 || i % 2 ? 0x0003u + i : 0x3f80u)); /* 2^-133.., 1 */
    check_bytes("q4f,block=32:bf16", q4, sizeof q4, N, K, x, M, "q4f bf16 subnormal scales");
    for (size_t i = 0; i < 18; i++) qtk__st16(q4 + 6 * 48 + 2 * i, (uint16_t)(i % 6 == 1 ? 0x7e80u : 0x7b00u)); /* 2^126, 2^119 */
    float xs[96];
    for (size_t k = 0; k < K; k++) xs[k] = trand_normal(&seed) * 0x1p-100f;
    check_bytes("q4f,block=32:bf16", q4, sizeof q4, N, K, xs, M, "q4f bf16 huge scales");
    /* q4f f16 scales and activations near 2^100 */
    for (size_t i = 0; i < 18; i++) qtk__st16(q4 + 6 * 48 + 2 * i, (uint16_t)(0x3c00u + 37 * i));
    check_bytes("q4f,block=32:f16", q4, sizeof q4, N, K, xb, M, "q4f huge activations");
    check_bytes("q4f,block=32:f16", q4, sizeof q4, N, K, x, M, "q4f");
}

/* A block of zero fields under a weight scale near FLT_MAX gives 0 on the integer path: the
 * block's scale (weight scale x s_b) overflows, and 0 x inf was NaN (found by fuzz_tensor). */
static void integer_path_huge_scale(void) {
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("q2s,block=*:f32", &s));
    enum { N = 2, K = 32 };
    size_t shape[2] = {N, K};
    qtk_layout L;
    CHECK_OK(qtk_layout_compute(&s, shape, 2, &L));
    uint8_t b[64];
    memset(b, 0, sizeof b);
    memset(b + L.value_bytes / 2, 0x55, L.value_bytes / 2); /* row 1: every field 1 */
    const float sc[2] = {0x1.fc0536p+127f, 1.0f};
    memcpy(b + L.scales_offset, sc, sizeof sc);
    qtk_tensor *t = NULL;
    CHECK_OK(qtk_tensor_from_bytes(b, L.total_bytes, shape, 2, &s, &t));
    float x[K], y[N];
    for (int k = 0; k < K; k++) x[k] = 200.0f; /* s_b = 200 / 127: the row-0 block scale overflows */
    const float bias[N] = {-2.0f, 0.0f};
    qtk_matmul_options o = {QTK_MM_NK, QTK_PRECISION_FAST, 1};
    const config *cfs[N_CONFIGS];
    size_t ncf = simd_configs(cfs);
    for (size_t ci = 0; ci <= ncf && t; ci++) { /* every kernel configuration, then the reference */
        if (ci < ncf) use_config(cfs[ci]);
        else qtk_set_isa(QTK_ISA_SCALAR);
        const char *name = ci < ncf ? config_name(cfs[ci]) : "scalar";
        qtk_mm_path path;
        CHECK_OK(qtk_matmul_path(t, 1, &o, &path));
        CHECK(path == QTK_MM_PATH_INTEGER);
        CHECK_OK(qtk_matmul(t, x, QTK_DTYPE_F32, 1, K, bias, y, N, &o));
        CHECK_MSG(y[0] == -2.0f, "%s: y[0] = %g, want -2 (0 x a huge scale + bias)", name, (double)y[0]);
        CHECK_MSG(fabsf(y[1] - 6400.0f) < 30.0f, "%s: y[1] = %g, want about 6400", name, (double)y[1]);
    }
    reset_config();
    qtk_tensor_free(t);
}

/* Products below f32's normal range: rounded to multiples of 2^-149 (0 here), not within a
 * relative 2^-24, so the bound of qtk_matmul.h needs its absolute K 2^-149 (issue 12 item
 * 10): without it these outputs would break it on both paths. */
static void underflowing_products(void) {
    enum { N = 3, K = 64 };
    float w[N * K], x[K], y[N];
    for (int i = 0; i < N * K; i++) w[i] = ldexpf(1.0f + (float)(i % 7) / 8.0f, -60);
    for (int k = 0; k < K; k++) x[k] = ldexpf(1.0f + (float)(k % 5) / 4.0f, -100);
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("q8s,block=32:f32", &s));
    size_t shape[2] = {N, K};
    qtk_tensor *t = NULL;
    CHECK_OK(qtk_quantize(w, shape, 2, &s, NULL, &t));
    float wd[N * K];
    CHECK_OK(qtk_dequantize(t, QTK_DTYPE_F32, wd, N * K));
    for (int prec = 0; prec < 2 && t; prec++) {
        qtk_matmul_options o = {QTK_MM_NK, (qtk_precision)prec, 1};
        CHECK_OK(qtk_matmul(t, x, QTK_DTYPE_F32, 1, K, NULL, y, N, &o));
        for (int n = 0; n < N; n++) {
            double exact = 0, sa = 0;
            for (int k = 0; k < K; k++) exact += (double)x[k] * wd[n * K + k], sa += fabs((double)x[k] * wd[n * K + k]);
            double err = fabs(y[n] - exact), rel = gamma_n(K + 4.0) * sa * 3.0;
            CHECK_MSG(err <= rel + K * 0x1p-149, "%s: y[%d] = %a, exact %a: beyond the bound", prec ? "fast" : "exact", n,
                      (double)y[n], exact);
            CHECK_MSG(err > rel, "%s: y[%d]: the products did not underflow (the case tests nothing)", prec ? "fast" : "exact", n);
        }
    }
    qtk_tensor_free(t);
}

/* Padding fields (past a row's end, in its last byte and in the kernels' last step) meet
 * x = 0; a table whose code 0 overflows under the row's scale (w' = -inf) must not turn them
 * into 0 x inf = NaN when the row's own codes are all finite (found by fuzz_tensor: a table
 * read from the tensor's bytes). Every configuration, both layouts, fused and tiled. */
static void padding_codes_overflow(void) {
    float t[16];
    t[0] = -1e38f;
    for (int i = 1; i < 16; i++) t[i] = (float)(i - 8);
    CHECK_OK(qtk_table_register("pad-ovf", t, 16));
    static const char *const specs[] = {"q4f,table=pad-ovf,block=32:f32", "q4f,table=pad-ovf,block=32:f32,store=native"};
    const config *cfs[N_CONFIGS];
    size_t ncf = simd_configs(cfs);
    uint64_t seed = 4242;
    for (size_t si = 0; si < 2; si++)
        for (int lay = 0; lay < 2; lay++)
            for (size_t M = 1; M <= 9; M += 8) {
                const size_t R = 5, C = 37; /* C: not a multiple of a byte's fields, a block or a step */
                size_t shape[2] = {R, C};
                float w[5 * 37], sc[5 * 2];
                for (size_t i = 0; i < R * C; i++) w[i] = t[1 + trand_u64(&seed) % 15] * 100.0f;
                for (size_t i = 0; i < R * 2; i++) sc[i] = 100.0f;
                qtk_scheme s;
                CHECK_OK(qtk_scheme_parse(specs[si], &s));
                qtk_quantize_options qo = {.scales = sc, .n_scales = R * 2};
                qtk_tensor *q = NULL;
                CHECK_OK(qtk_quantize(w, shape, 2, &s, &qo, &q));
                if (!q) continue;
                size_t N = lay ? C : R, K = lay ? R : C;
                float x[9 * 37], y[9 * 37];
                for (size_t i = 0; i < M * K; i++) x[i] = trand_normal(&seed);
                for (size_t ci = 0; ci <= ncf; ci++) {
                    if (ci < ncf) use_config(cfs[ci]);
                    else qtk_set_isa(QTK_ISA_SCALAR);
                    for (int prec = 0; prec < 2; prec++) {
                        qtk_matmul_options o = {(qtk_mm_layout)lay, (qtk_precision)prec, 1};
                        CHECK_OK(qtk_matmul(q, x, QTK_DTYPE_F32, M, K, NULL, y, N, &o));
                        for (size_t m = 0; m < M; m++)
                            for (size_t n = 0; n < N; n++) {
                                double e = 0, a = 0;
                                for (size_t k = 0; k < K; k++) {
                                    double wv = lay ? w[k * C + n] : w[n * C + k];
                                    e += wv * x[m * K + k], a += fabs(wv * x[m * K + k]);
                                }
                                CHECK_MSG(isfinite(y[m * N + n]) && fabs(y[m * N + n] - e) <= 0.02 * a + 1e-6,
                                          "%s %s M=%zu %s %s: y[%zu][%zu] = %g, want %g", specs[si], lay ? "kn" : "nk", M,
                                          ci < ncf ? config_name(cfs[ci]) : "scalar", prec ? "fast" : "exact", m, n,
                                          (double)y[m * N + n], e);
                            }
                    }
                }
                reset_config();
                qtk_tensor_free(q);
            }
}

TEST_MAIN("matmul", T(ggml_blocks_and_affine), T(errors), T(integer_path_huge_scale), T(underflowing_products), T(padding_codes_overflow), T(allocation_failure), T(empty_shapes), T(integer_path_selection), T(bound_catches_errors), T(dense_f32),
          T(padding_and_nan_fields), T(e4m3_huge_scales), T(threads_dtypes_alignment), T(long_rows), T(all_schemes_all_paths), T(m_sweep_awkward),
          T(thread_invariance), T(dynamic_chunks), T(extreme_scales), T(integer_flavours_same_bits), T(kernel_names))
