/* bench_ggml.c — qtk_matmul and ggml's CPU mul_mat side by side, in one process.
 *
 * For each shape W [N, K] and each pair of a ggml type and the qtk scheme of the same layout
 * (q4_0 / q4f,block=32:f16, ...), the same random f32 weights are quantized by each library's
 * own quantizer, and y = x · Wᵀ (M rows of x) is timed for ggml (ggml_mul_mat computed by
 * ggml_graph_compute_with_ctx), qtk precision exact and qtk precision fast, interleaved call
 * by call, best of R. In the same run it measures the read-only streaming rate of a buffer the
 * size of the weights (the loop of `qtk bench`'s `read` baseline), so that every GEMV can be
 * put as weight bytes per second over that limit.
 *
 * Not part of qtk or its CI: bench/build.sh builds it against a ggml source tree. */
#include "ggml-cpu.h"
#include "ggml.h"
#include "qtk.h"
#include "qtk_matmul.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- deterministic data ---- */

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double rng_unit(uint64_t *s) { return ((double)(rng_next(s) >> 11) + 0.5) * 0x1p-53; }
static float rng_normal(uint64_t *s) {
    double u = rng_unit(s), v = rng_unit(s);
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

/* ---- the read-only baseline: qtk bench's `read` loop, split over threads ---- */

typedef struct {
    const uint64_t *p;
    size_t n;
    uint64_t sink;
} rd_part;

static void *rd_run(void *arg) {
    rd_part *r = arg;
    const uint64_t *s = r->p;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    size_t i = 0;
    for (; i + 4 <= r->n; i += 4) {
        a0 += s[i];
        a1 ^= s[i + 1];
        a2 += s[i + 2];
        a3 ^= s[i + 3];
    }
    for (; i < r->n; i++) a0 += s[i];
    r->sink = a0 ^ a1 ^ a2 ^ a3;
    return NULL;
}

static uint64_t rd_sink;

/* One timed read of bytes of buf over threads (at most 8). */
static double read_once(const uint8_t *buf, size_t bytes, int threads) {
    rd_part parts[8];
    pthread_t tid[8];
    size_t words = bytes / 8;
    double t0 = now();
    for (int i = 0; i < threads; i++) {
        size_t b = words * (size_t)i / (size_t)threads, e = words * (size_t)(i + 1) / (size_t)threads;
        parts[i] = (rd_part){(const uint64_t *)(const void *)buf + b, e - b, 0};
        if (i) pthread_create(&tid[i], NULL, rd_run, &parts[i]);
    }
    rd_run(&parts[0]);
    for (int i = 1; i < threads; i++) pthread_join(tid[i], NULL);
    double dt = now() - t0;
    for (int i = 0; i < threads; i++) rd_sink ^= parts[i].sink;
    return dt;
}

/* ---- the pairs ---- */

typedef struct {
    const char *name;
    enum ggml_type type;
    const char *spec;
} pair;

static const pair PAIRS[] = {
    {"q4_0", GGML_TYPE_Q4_0, "q4f,block=32:f16"},
    {"q8_0", GGML_TYPE_Q8_0, "q8s,block=32:f16"},
    {"mxfp4", GGML_TYPE_MXFP4, "mxfp4"},
    {"nvfp4", GGML_TYPE_NVFP4, "e2m1,block=16:ue4m3"},
    {"iq4_nl", GGML_TYPE_IQ4_NL, "q4f,table=iq4nl,block=32:f16"},
    {"tq2_0", GGML_TYPE_TQ2_0, "q2s,block=256:f16"},
    /* ggml's own blocks (docs/affine.md) */
    {"q4_1", GGML_TYPE_Q4_1, "q4_1"},
    {"q5_0", GGML_TYPE_Q5_0, "q5_0"},
    {"q5_1", GGML_TYPE_Q5_1, "q5_1"},
    {"q2_k", GGML_TYPE_Q2_K, "q2_k"},
    {"q3_k", GGML_TYPE_Q3_K, "q3_k"},
    {"q4_k", GGML_TYPE_Q4_K, "q4_k"},
    {"q5_k", GGML_TYPE_Q5_K, "q5_k"},
    {"q6_k", GGML_TYPE_Q6_K, "q6_k"},
    /* the lattice types (docs/lattice.md): both sides multiply the same random blocks (every
     * bit pattern with a finite d is a block; the kernels' time does not depend on the values) */
    {"iq2_xxs", GGML_TYPE_IQ2_XXS, "iq2_xxs"},
    {"iq2_xs", GGML_TYPE_IQ2_XS, "iq2_xs"},
    {"iq2_s", GGML_TYPE_IQ2_S, "iq2_s"},
    {"iq3_xxs", GGML_TYPE_IQ3_XXS, "iq3_xxs"},
    {"iq3_s", GGML_TYPE_IQ3_S, "iq3_s"},
    {"iq1_s", GGML_TYPE_IQ1_S, "iq1_s"},
    {"iq1_m", GGML_TYPE_IQ1_M, "iq1_m"},
};
#define NPAIRS (sizeof PAIRS / sizeof PAIRS[0])

typedef struct {
    size_t n, k, m;
} shape;

static const shape SHAPES[] = {
    {4096, 4096, 1}, {4096, 4096, 64}, {14336, 4096, 1}, {14336, 4096, 64}, {4096, 11008, 1},
};
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])

/* ---- one ggml product, prepared once ---- */

typedef struct {
    struct ggml_context *ctx;
    struct ggml_cgraph *graph;
    struct ggml_tensor *out;
    void *wdata; /* quantized weights */
    float *xdata, *ydata;
    size_t wbytes;
} gg_mm;

/* random lattice blocks with d = 2^-8 (IQ1_M: its d's nibbles in the scale words' tops) */
static void lattice_blocks(enum ggml_type type, uint8_t *p, size_t bytes) {
    const size_t bb = ggml_type_size(type);
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < bytes; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        p[i] = (uint8_t)r;
    }
    for (size_t b = 0; b < bytes / bb; b++) {
        uint8_t *q = p + b * bb;
        if (type == GGML_TYPE_IQ1_M) {
            q[49] &= 0x0f, q[51] &= 0x0f, q[53] = (uint8_t)((q[53] & 0x0f) | 0xc0), q[55] = (uint8_t)((q[55] & 0x0f) | 0x10);
        } else {
            q[0] = 0x00, q[1] = 0x1c;
        }
    }
}

static int gg_init(gg_mm *g, enum ggml_type type, const float *w, size_t n, size_t k, const float *x, size_t m, bool random) {
    memset(g, 0, sizeof *g);
    g->wbytes = ggml_row_size(type, (int64_t)k) * n;
    g->wdata = aligned_alloc(64, (g->wbytes + 63) / 64 * 64);
    if (!g->wdata) return -1;
    if (random) {
        lattice_blocks(type, g->wdata, g->wbytes);
    } else {
        ggml_quantize_init(type);
        ggml_quantize_chunk(type, w, g->wdata, 0, (int64_t)n, (int64_t)k, NULL);
    }
    g->xdata = malloc(m * k * sizeof(float));
    g->ydata = malloc(m * n * sizeof(float));
    if (!g->xdata || !g->ydata) return -1;
    memcpy(g->xdata, x, m * k * sizeof(float));
    /* the context holds only headers and the graph; every tensor's data is ours */
    struct ggml_init_params ip = {ggml_tensor_overhead() * 8 + ggml_graph_overhead() + (64u << 10), NULL, true};
    g->ctx = ggml_init(ip);
    if (!g->ctx) return -1;
    struct ggml_tensor *a = ggml_new_tensor_2d(g->ctx, type, (int64_t)k, (int64_t)n);
    a->data = g->wdata;
    struct ggml_tensor *b = ggml_new_tensor_2d(g->ctx, GGML_TYPE_F32, (int64_t)k, (int64_t)m);
    b->data = g->xdata;
    g->out = ggml_mul_mat(g->ctx, a, b);
    g->out->data = g->ydata;
    g->graph = ggml_new_graph(g->ctx);
    ggml_build_forward_expand(g->graph, g->out);
    return 0;
}

/* Times one ggml_graph_compute_with_ctx. Its work buffer comes from a context made (and
 * freed) outside the timed region, as a long-lived caller's would be. */
static double gg_run(gg_mm *g, int threads) {
    struct ggml_cplan plan = ggml_graph_plan(g->graph, threads, NULL);
    struct ggml_init_params ip = {plan.work_size + ggml_tensor_overhead() + (64u << 10), NULL, false};
    struct ggml_context *wctx = ggml_init(ip);
    double t0 = now();
    ggml_graph_compute_with_ctx(wctx, g->graph, threads);
    double dt = now() - t0;
    ggml_free(wctx);
    return dt;
}

static void gg_free(gg_mm *g) {
    if (g->ctx) ggml_free(g->ctx);
    free(g->wdata);
    free(g->xdata);
    free(g->ydata);
}

/* ---- qtk ---- */

/* qtk's internal test hook (src/matmul/mm.h; libqtk.a links it, it is not public API):
 * withholds CPU features from the matmul kernels' choice. Here VNNI (QTK_CPU_AVX512VNNI,
 * QTK_CPU_AVXVNNI of src/kernels/cpu.h), so that the integer path's vpmaddubsw flavour is
 * timed beside vpdpbusd in the same process. */
void qtk__mm_set_feature_mask(unsigned drop);
#define BENCH_DROP_VNNI ((1u << 8) | (1u << 11))
/* and the hook that keeps 2-bit weights off the multiply-free kernel (QTK__MM_HOOK_NO_TERN) */
void qtk__mm_set_hooks(unsigned hooks);
#define BENCH_NO_TERN 8u

static double qtk_run(const qtk_tensor *t, const float *x, size_t m, size_t k, float *y, size_t n, qtk_precision prec,
                      int threads) {
    qtk_matmul_options o = {QTK_MM_NK, prec, threads};
    double t0 = now();
    qtk_status st = qtk_matmul(t, x, QTK_DTYPE_F32, m, k, NULL, y, n, &o);
    double dt = now() - t0;
    if (st) {
        fprintf(stderr, "qtk_matmul: %s\n", qtk_last_error());
        exit(1);
    }
    return dt;
}

/* max |a - b| / max |b| */
static double rel_diff(const float *a, const float *b, size_t n) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]), v = fabs((double)b[i]);
        if (e > d) d = e;
        if (v > s) s = v;
    }
    return s > 0 ? d / s : d;
}

static void usage(void) {
    fputs("usage: bench_ggml [--reps R] [--threads T1,T2,...] [--pairs p1,p2,...] [--shapes i,j,...]\n"
          "  --reps R     interleaved rounds; each variant keeps its best (default 20; GEMM: R/4, at least 3)\n"
          "  --threads    thread counts (default 1,2)\n"
          "  --pairs      ggml type names among q4_0,q8_0,mxfp4,nvfp4,iq4_nl,tq2_0,q4_1,q5_0,q5_1,q2_k,q3_k,q4_k,\n"
          "               q5_k,q6_k,iq2_xxs,iq2_xs,iq2_s,iq3_xxs,iq3_s,iq1_s,iq1_m (default all)\n"
          "  --shapes     indices into 0:4096x4096/1 1:4096x4096/64 2:14336x4096/1 3:14336x4096/64\n"
          "               4:4096x11008/1 (N x K / M; default all)\n",
          stderr);
}

static bool in_list(const char *list, const char *name) {
    if (!list) return true;
    size_t len = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == len && strncmp(p, name, len) == 0) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

int main(int argc, char **argv) {
    int reps = 20;
    int thr[8] = {1, 2}, nthr = 2;
    const char *pairs = NULL, *shapes = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            nthr = 0;
            for (char *p = argv[++i]; *p && nthr < 8;) {
                thr[nthr++] = (int)strtol(p, &p, 10);
                if (*p == ',') p++;
            }
        } else if (strcmp(argv[i], "--pairs") == 0 && i + 1 < argc) pairs = argv[++i];
        else if (strcmp(argv[i], "--shapes") == 0 && i + 1 < argc) shapes = argv[++i];
        else {
            usage();
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    ggml_cpu_init();
    printf("qtk %s (kernels %s) vs ggml (CPU backend), one process, interleaved, best of %d rounds\n", qtk_version(),
           qtk_isa_name(qtk_get_isa()), reps);
    FILE *la = fopen("/proc/loadavg", "r");
    char lbuf[64] = "";
    if (la) {
        if (!fgets(lbuf, sizeof lbuf, la)) lbuf[0] = '\0';
        fclose(la);
        lbuf[strcspn(lbuf, "\n")] = '\0';
    }
    printf("load average at start: %s\n", lbuf[0] ? lbuf : "unknown");
    printf("read GB/s: the read-only streaming rate over a buffer the size of qtk's weights, measured\n"
           "interleaved with the products; roof = qtk fast's weight bytes per second / that rate (M = 1)\n\n");
    printf("fast-alt: qtk fast with VNNI withheld (vpmaddubsw) where fast runs vpdpbusd, or kept off the multiply-free\n"
           "kernel (the dot product) where fast runs that; kernel: qtk_matmul_kernel of fast\n\n");
    printf("| shape (NxK)  |  M | T | type   | qtk scheme                   | ggml ms | exact ms | fast ms | exact/ggml | fast/ggml | read GB/s | fast GB/s | roof | ggml GB/s | fast-alt ms | alt/fast | kernel |\n");
    printf("|--------------|----|---|--------|------------------------------|---------|----------|---------|------------|-----------|-----------|-----------|------|-----------|-------------|----------|--------|\n");
    for (size_t si = 0; si < NSHAPES; si++) {
        char idx[8];
        snprintf(idx, sizeof idx, "%zu", si);
        if (!in_list(shapes, idx)) continue;
        const size_t N = SHAPES[si].n, K = SHAPES[si].k, M = SHAPES[si].m;
        float *w = malloc(N * K * sizeof(float)), *x = malloc(M * K * sizeof(float));
        float *y = malloc(M * N * sizeof(float)), *y2 = malloc(M * N * sizeof(float));
        if (!w || !x || !y || !y2) return 1;
        uint64_t seed = 1234 + N + K;
        for (size_t i = 0; i < N * K; i++) w[i] = 0.02f * rng_normal(&seed);
        for (size_t i = 0; i < M * K; i++) x[i] = rng_normal(&seed);
        for (size_t pi = 0; pi < NPAIRS; pi++) {
            const pair *pr = &PAIRS[pi];
            if (!in_list(pairs, pr->name)) continue;
            qtk_scheme s;
            qtk_tensor *t = NULL;
            size_t shp[2] = {N, K};
            if (qtk_scheme_parse(pr->spec, &s)) {
                fprintf(stderr, "qtk: %s\n", qtk_last_error());
                return 1;
            }
            const bool lattice = s.mode == QTK_MODE_LATTICE;
            gg_mm g;
            if (gg_init(&g, pr->type, w, N, K, x, M, lattice)) {
                fprintf(stderr, "ggml setup failed for %s\n", pr->name);
                return 1;
            }
            if (lattice ? qtk_tensor_from_bytes(g.wdata, g.wbytes, shp, 2, &s, &t) : qtk_quantize(w, shp, 2, &s, NULL, &t)) {
                fprintf(stderr, "qtk: %s\n", qtk_last_error());
                return 1;
            }
            size_t qbytes = 0;
            const uint8_t *qb = qtk_tensor_bytes(t, &qbytes);
            /* ggml's own block structs (store=ggml): both sides multiply the same weights, so
             * the results differ only by the activations' rounding; this also has ggml read
             * the bytes qtk's quantizer wrote */
            if (s.store == QTK_STORE_GGML && qbytes == g.wbytes) memcpy(g.wdata, qb, qbytes);
            uint8_t *rbuf = aligned_alloc(64, (qbytes + 63) / 64 * 64);
            if (!rbuf) return 1;
            memset(rbuf, 1, qbytes);
            const char *kern = "";
            qtk_matmul_options fo = {QTK_MM_NK, QTK_PRECISION_FAST, 1};
            if (qtk_matmul_kernel(t, M, &fo, &kern)) kern = "?";
            /* the alternative timed beside fast: the other dot product, or off the multiply-free
             * kernel; BENCH_ALT_DROP=0xBITS withholds those feature bits instead (exploration) */
            const char *drop = getenv("BENCH_ALT_DROP");
            const bool tern = strstr(kern, "multiply-free") != NULL,
                       alt = drop || tern || strstr(kern, "vpdpbusd") != NULL;
            for (int ti = 0; ti < nthr; ti++) {
                int T = thr[ti];
                int R = M == 1 ? reps : (reps / 4 > 3 ? reps / 4 : 3);
                double bg = 1e30, be = 1e30, bf = 1e30, br = 1e30, bm = 1e30;
                for (int r = 0; r < R; r++) {
                    if (alt) {
                        if (drop) qtk__mm_set_feature_mask((unsigned)strtoul(drop, NULL, 0));
                        else if (tern) qtk__mm_set_hooks(BENCH_NO_TERN);
                        else qtk__mm_set_feature_mask(BENCH_DROP_VNNI);
                        double d = qtk_run(t, x, M, K, y2, N, QTK_PRECISION_FAST, T);
                        if (d < bm) bm = d;
                        qtk__mm_set_feature_mask(0);
                        qtk__mm_set_hooks(0);
                    }
                    double d = gg_run(&g, T);
                    if (d < bg) bg = d;
                    d = qtk_run(t, x, M, K, y, N, QTK_PRECISION_EXACT, T);
                    if (d < be) be = d;
                    d = qtk_run(t, x, M, K, y2, N, QTK_PRECISION_FAST, T);
                    if (d < bf) bf = d;
                    if (M == 1) {
                        d = read_once(rbuf, qbytes, T);
                        if (d < br) br = d;
                    }
                }
                /* the three results agree (ggml's activations are int8 too, so loosely) */
                double dfast = rel_diff(y2, y, M * N);
                double dgg = rel_diff((const float *)g.out->data, y, M * N);
                if (dfast > 0.05 || dgg > 0.1)
                    fprintf(stderr, "warning: %s %zux%zu M=%zu: fast vs exact %.3g, ggml vs exact %.3g\n", pr->name, N, K,
                            M, dfast, dgg);
                char sh[16], rd[16] = "", fg[16] = "", rf[16] = "", gg[16] = "", fm[16] = "", mv[16] = "";
                if (alt) {
                    snprintf(fm, sizeof fm, "%.3f", bm * 1e3);
                    snprintf(mv, sizeof mv, "%.2f", bm / bf);
                }
                snprintf(sh, sizeof sh, "%zux%zu", N, K);
                if (M == 1) {
                    snprintf(rd, sizeof rd, "%.2f", (double)qbytes / br / 1e9);
                    snprintf(fg, sizeof fg, "%.2f", (double)qbytes / bf / 1e9);
                    snprintf(rf, sizeof rf, "%.2f", br / bf);
                    snprintf(gg, sizeof gg, "%.2f", (double)g.wbytes / bg / 1e9);
                }
                printf("| %-12s | %2zu | %d | %-6s | %-28s | %7.3f | %8.3f | %7.3f | %10.2f | %9.2f | %9s | %9s | %4s | %9s | %11s | %8s | %s |\n",
                       sh, M, T, pr->name, pr->spec, bg * 1e3, be * 1e3, bf * 1e3, be / bg, bf / bg, rd, fg, rf, gg, fm, mv,
                       kern);
                fflush(stdout);
            }
            free(rbuf);
            gg_free(&g);
            qtk_tensor_free(t);
        }
        free(w);
        free(x);
        free(y);
        free(y2);
    }
    if (rd_sink == 42) fputc(' ', stderr);
    return 0;
}
