/* bench_matmul.c — the matmul benchmark (qtk bench --matmul): GEMV (M = 1) and GEMM
 * (M = 64) for the common schemes on LLM-sized matrices, against the baselines measured in
 * the same run: the machine's clock and f32 FMA peak, the read-only streaming rate at the
 * size of the weights (the loop of `qtk bench`'s `read` baseline: a GEMV's limit), an f32
 * GEMV over the same matrix, and the scalar reference. */
#include "cli.h"

#include "synth.h"
#include "qtk_matmul.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char usage[] =
    "usage: qtk bench --matmul [--threads N] [--repeat R] [--quick] [--no-reference]\n"
    "\n"
    "Times y = x · Wᵀ with W [N, K] quantized (layout nk) on 4096x4096 and 14336x4096 (weights\n"
    "larger than most L3 caches), plus 1024x1024 (weights in L2/L3: the kernels' compute\n"
    "cost), for q4f/q4s/q8s with blocks of 32, nvfp4, mxfp4, nf4, e4m3 with blocks of 32,\n"
    "ternary q2s (BitNet: per-tensor absmean) and GPTQ/AWQ's int4 with zero points\n"
    "(u4,block=128:f16,zero=u8): GEMV (M = 1) on the exact and the integer\n"
    "path on one thread and, on the large shapes, on N threads (default 2); GEMM (M = 64,\n"
    "which precision fast runs on the exact path) on one and on N threads.\n"
    "Baselines from the same run: clock (a chain of dependent adds), f32 FMA peak, the\n"
    "read-only streaming rate (qtk bench's `read` loop) at the size of the weights, f32 GEMV\n"
    "over the same matrix, the scalar reference.\n"
    "Times are the best of at least R runs (default 15 for GEMV, 5 for GEMM) spread over at\n"
    "least 0.25 s (GEMV) / 0.4 s (GEMM), so that other work on the machine skews them less.\n"
    "\n"
    "Columns: ms per product; W GB/s = bytes of the quantized weights (values, scales) per\n"
    "second; GFLOP/s = 2·M·N·K per second; cyc/32w = clock cycles per 32 weights (GEMV);\n"
    "roof = GEMV: weight read rate / read-only rate of as many bytes on as many threads\n"
    "(targets, weights in DRAM: >= 0.9 integer, >= 0.8 exact), GEMM: fraction of the f32 FMA\n"
    "peak (target >= 0.6); x2thr = speed-up of N threads over one; kernel = what ran\n"
    "(qtk_matmul_kernel): the level, the path and, on the integer path, the instruction\n"
    "that multiplies (vpdpbusd, vpmaddubsw, sdot, ...).\n";

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- machine baselines ---- */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* A chain of 16 dependent register adds per iteration: 16 cycles. (Adds of an immediate
 * are no good: recent cores fold them at rename.) */
static double measure_ghz(void) {
    double best = 0;
    for (int rep = 0; rep < 7; rep++) {
        unsigned long x = 1, n = 10000000;
        double t0 = now();
        for (unsigned long i = 0; i < n; i++)
            __asm__ volatile("add %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\t"
                             "add %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\t"
                             "add %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\t"
                             "add %0, %0\n\tadd %0, %0\n\tadd %0, %0\n\tadd %0, %0"
                             : "+r"(x));
        double ghz = (double)n * 16 / (now() - t0) / 1e9;
        if (ghz > best) best = ghz;
    }
    return best;
}

/* 12 independent FMA chains (2 ports x 4 cycles of latency = 8 needed), written out so
 * that they stay in registers. */
#define FMA12(fma, T)                                                                                                  \
    T a0 = c0, a1 = c1, a2 = a1 + c1, a3 = a2 + c1, a4 = a3 + c1, a5 = a4 + c1, a6 = a5 + c1, a7 = a6 + c1,           \
      a8 = a7 + c1, a9 = a8 + c1, a10 = a9 + c1, a11 = a10 + c1; /* distinct, or the compiler merges chains */        \
    for (unsigned long i = 0; i < n; i++) {                                                                            \
        a0 = fma(a0, m, d); a1 = fma(a1, m, d); a2 = fma(a2, m, d); a3 = fma(a3, m, d);                                \
        a4 = fma(a4, m, d); a5 = fma(a5, m, d); a6 = fma(a6, m, d); a7 = fma(a7, m, d);                                \
        a8 = fma(a8, m, d); a9 = fma(a9, m, d); a10 = fma(a10, m, d); a11 = fma(a11, m, d);                            \
    }                                                                                                                  \
    T sum = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;

__attribute__((target("avx512f,fma"))) static double peak_avx512(void) {
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        unsigned long n = 2000000;
        __m512 c0 = _mm512_set1_ps(1.0f), c1 = _mm512_set1_ps(2.0f), m = _mm512_set1_ps(0.999999f),
               d = _mm512_set1_ps(1e-7f);
        double t0 = now();
        FMA12(_mm512_fmadd_ps, __m512)
        double g = (double)n * 12 * 16 * 2 / (now() - t0) / 1e9;
        if (_mm512_reduce_add_ps(sum) == 12345.0f) g = 0;
        if (g > best) best = g;
    }
    return best;
}
__attribute__((target("avx2,fma"))) static double peak_avx2(void) {
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        unsigned long n = 4000000;
        __m256 c0 = _mm256_set1_ps(1.0f), c1 = _mm256_set1_ps(2.0f), m = _mm256_set1_ps(0.999999f),
               d = _mm256_set1_ps(1e-7f);
        double t0 = now();
        FMA12(_mm256_fmadd_ps, __m256)
        double g = (double)n * 12 * 8 * 2 / (now() - t0) / 1e9;
        float v[8];
        _mm256_storeu_ps(v, sum);
        if (v[0] == 12345.0f) g = 0;
        if (g > best) best = g;
    }
    return best;
}
static double measure_peak(qtk_isa isa) {
    if (isa == QTK_ISA_AVX512) return peak_avx512();
    if (isa == QTK_ISA_AVX2) return peak_avx2();
    return 0;
}
#else
static double measure_ghz(void) { return 0; }
static double measure_peak(qtk_isa isa) {
    (void)isa;
    return 0;
}
#endif

/* The read-only streaming rate (bytes per second) over a buffer of `bytes` on `threads`
 * threads, best of several: the loop of `qtk bench`'s `read` baseline (four independent
 * 64-bit accumulators), each thread reading its share. */
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

static double read_rate(size_t bytes, int threads) {
    uint64_t *a = malloc(bytes + 64);
    if (!a) return 0;
    memset(a, 1, bytes + 64);
    if (threads > 16) threads = 16;
    size_t words = bytes / 8;
    double best = 1e30;
    uint64_t sink = 0;
    int reps = bytes > (256u << 20) ? 3 : 9;
    for (int r = 0; r < reps; r++) {
        rd_part parts[16];
        pthread_t tid[16];
        bool started[16] = {false};
        double t0 = now();
        for (int i = 0; i < threads; i++) {
            size_t b = words * (size_t)i / (size_t)threads, e = words * (size_t)(i + 1) / (size_t)threads;
            parts[i] = (rd_part){a + b, e - b, 0};
            if (i) started[i] = pthread_create(&tid[i], NULL, rd_run, &parts[i]) == 0;
        }
        rd_run(&parts[0]);
        for (int i = 1; i < threads; i++) {
            if (started[i]) pthread_join(tid[i], NULL);
            else rd_run(&parts[i]);
        }
        double t = now() - t0;
        for (int i = 0; i < threads; i++) sink ^= parts[i].sink;
        if (t < best) best = t;
    }
    free(a);
    if (sink == 42) fputc(' ', stderr); /* keep the reduction alive */
    return (double)bytes / best;
}

/* ---- the table ---- */

typedef struct {
    double ghz, peak, rd_small, rd_large;
    int repeat_gemv, repeat_gemm, threads;
    qtk_isa isa;
} machine;

static void row(const char *shape, const char *scheme, double bpw, const char *path, size_t m, int thr, double t,
                double wbytes, size_t n, size_t k, const machine *mc, double roof, double x2, const char *kernel) {
    double gflops = 2.0 * (double)m * (double)n * (double)k / t / 1e9;
    char cyc[16] = "", rf[16] = "", sp[16] = "";
    if (m == 1 && mc->ghz > 0) snprintf(cyc, sizeof cyc, "%.2f", t * mc->ghz * 1e9 / ((double)n * (double)k / 32));
    if (roof > 0) snprintf(rf, sizeof rf, "%.2f", roof);
    if (x2 > 0) snprintf(sp, sizeof sp, "%.2f", x2);
    printf("| %-9s | %-22s | %5.2f | %-9s | %2zu | %d | %9.3f | %7.2f | %7.1f | %7s | %5s | %5s | %s |\n", shape, scheme,
           bpw, path, m, thr, t * 1e3, wbytes / t / 1e9, gflops, cyc, rf, sp, kernel);
    fflush(stdout);
}

/* Best time of at least `rep` calls spread over at least `min_s` seconds: on a machine
 * others use, a short burst of runs can fall entirely in someone else's time slice. */
static double time_matmul(const qtk_tensor *t, const float *w32, const float *x, size_t m, size_t k, float *y, size_t n,
                          const qtk_matmul_options *o, int rep, qtk_status *st) {
    double best = 1e30, start = now(), min_s = m == 1 ? 0.25 : 0.4;
    if (rep == 1) min_s = 0; /* the scalar reference: once is enough */
    for (int r = 0; r < rep || (now() - start < min_s && r < 5000); r++) {
        double t0 = now();
        *st = t ? qtk_matmul(t, x, QTK_DTYPE_F32, m, k, NULL, y, n, o) : qtk_matmul_f32(w32, x, QTK_DTYPE_F32, m, k, NULL, y, n, o);
        double dt = now() - t0;
        if (*st) return 0;
        if (dt < best) best = dt;
    }
    return best;
}

static const char *const SCHEMES[] = {"q4f,block=32:f16", "q4s,block=32:f16", "q8s,block=32:f16", "nvfp4", "mxfp4",
                                      "nf4", "e4m3,block=32:f16", "q2s", "u4,block=128:f16,zero=u8"};

static int bench_shape(const char *cmd, size_t N, size_t K, const machine *mc, bool reference) {
    char shape[32];
    snprintf(shape, sizeof shape, "%zux%zu", N, K);
    const size_t MB = 64;
    float *w = malloc(N * K * sizeof(float)), *x = malloc(MB * K * sizeof(float)), *y = malloc(MB * N * sizeof(float));
    if (!w || !x || !y) {
        free(w);
        free(x);
        free(y);
        return cli_fail(cmd, QTK_OK, "out of memory for %s", shape);
    }
    cli_synth_weights(w, N, K, 0.02f, 64, 7);
    cli_rng r = {11};
    for (size_t i = 0; i < MB * K; i++) x[i] = (float)cli_rng_normal(&r);
    qtk_status st = QTK_OK;
    qtk_matmul_options o1 = {QTK_MM_NK, QTK_PRECISION_EXACT, 1};

    /* baseline: dense f32 GEMV over the same matrix */
    double fbytes = (double)N * (double)K * 4;
    double t = time_matmul(NULL, w, x, 1, K, y, N, &o1, mc->repeat_gemv, &st);
    if (st) goto fail;
    row(shape, "f32 (dense baseline)", 32, "exact", 1, 1, t, fbytes, N, K, mc, fbytes / t / read_rate((size_t)fbytes, 1), 0,
        "f32 weights, FMA");

    for (size_t si = 0; si < sizeof SCHEMES / sizeof SCHEMES[0]; si++) {
        qtk_scheme s;
        st = qtk_scheme_parse(SCHEMES[si], &s);
        if (st) goto fail;
        size_t shp[2] = {N, K};
        qtk_quantize_options qo = {0};
        qo.threads = mc->threads;
        if (s.value == QTK_VALUE_Q2S && s.block_rank == 0) qo.calibration = QTK_CALIB_ABSMEAN;
        qtk_tensor *tq = NULL;
        st = qtk_quantize(w, shp, 2, &s, &qo, &tq);
        if (st) goto fail;
        size_t nbytes = 0;
        qtk_tensor_bytes(tq, &nbytes);
        double wb = (double)nbytes, bpw = 8.0 * wb / ((double)N * (double)K);
        /* the read-only rate at the weights' size: the same cache level as the GEMV's reads */
        double rrate = read_rate(nbytes, 1), rrate2 = mc->threads > 1 && N * K > 2000000 ? read_rate(nbytes, mc->threads) : 0;
        const char *label = SCHEMES[si][0] == 'q' && strcmp(SCHEMES[si], "q2s") == 0 ? "q2s (tensor, absmean)" : SCHEMES[si];
        for (int prec = 0; prec < 2; prec++) {
            qtk_matmul_options o = {QTK_MM_NK, (qtk_precision)prec, 1};
            qtk_mm_path path;
            const char *kern = "";
            st = qtk_matmul_path(tq, 1, &o, &path);
            if (!st) st = qtk_matmul_kernel(tq, 1, &o, &kern);
            if (st) break;
            if (prec == 1 && path != QTK_MM_PATH_INTEGER) continue; /* no integer path: same as exact */
            t = time_matmul(tq, NULL, x, 1, K, y, N, &o, mc->repeat_gemv, &st);
            if (st) break;
            row(shape, label, bpw, qtk_mm_path_name(path), 1, 1, t, wb, N, K, mc, wb / t / rrate, 0, kern);
            if (rrate2 > 0) { /* GEMV on N threads, against the read rate of N threads */
                qtk_matmul_options on = o;
                on.threads = mc->threads;
                double tn = time_matmul(tq, NULL, x, 1, K, y, N, &on, mc->repeat_gemv, &st);
                if (st) break;
                row(shape, label, bpw, qtk_mm_path_name(path), 1, mc->threads, tn, wb, N, K, mc, wb / tn / rrate2, t / tn, kern);
            }
            if (N * K > 2000000) { /* GEMM only on the large shapes */
                st = qtk_matmul_path(tq, MB, &o, &path);
                if (!st) st = qtk_matmul_kernel(tq, MB, &o, &kern);
                if (st) break;
                if (prec == 1 && path != QTK_MM_PATH_INTEGER) continue; /* fast = exact here */
                double t1 = time_matmul(tq, NULL, x, MB, K, y, N, &o, mc->repeat_gemm, &st);
                if (st) break;
                row(shape, label, bpw, qtk_mm_path_name(path), MB, 1, t1, wb, N, K, mc,
                    mc->peak > 0 ? 2.0 * MB * (double)N * (double)K / t1 / 1e9 / mc->peak : 0, 0, kern);
                if (mc->threads > 1) {
                    o.threads = mc->threads;
                    double t2 = time_matmul(tq, NULL, x, MB, K, y, N, &o, mc->repeat_gemm, &st);
                    if (st) break;
                    row(shape, label, bpw, qtk_mm_path_name(path), MB, mc->threads, t2, wb, N, K, mc,
                        mc->peak > 0 ? 2.0 * MB * (double)N * (double)K / t2 / 1e9 / (mc->peak * mc->threads) : 0,
                        t1 / t2, kern);
                }
            }
        }
        if (!st && reference && N * K <= 4096u * 4096u) {
            qtk_isa prev = qtk_get_isa();
            qtk_set_isa(QTK_ISA_SCALAR);
            t = time_matmul(tq, NULL, x, 1, K, y, N, &o1, 1, &st);
            qtk_set_isa(prev);
            if (!st) row(shape, label, bpw, "reference", 1, 1, t, wb, N, K, mc, wb / t / rrate, 0, "scalar reference");
        }
        qtk_tensor_free(tq);
        if (st) goto fail;
    }
    free(w);
    free(x);
    free(y);
    return CLI_OK;
fail:
    free(w);
    free(x);
    free(y);
    return cli_fail(cmd, st, "benchmark on %s failed", shape);
}

int cli_bench_matmul(int argc, char **argv) {
    const char *cmd = "bench --matmul";
    const char *threads_s = NULL, *repeat_s = NULL;
    bool quick = false, noref = false, matmul_flag = false;
    const cli_opt opts[] = {
        {"threads", true, &threads_s, NULL, NULL, NULL}, {"repeat", true, &repeat_s, NULL, NULL, NULL},
        {"quick", false, NULL, &quick, NULL, NULL},      {"no-reference", false, NULL, &noref, NULL, NULL},
        {"matmul", false, NULL, &matmul_flag, NULL, NULL},
    };
    const char *pos[1];
    int npos;
    bool help;
    int rc = cli_parse(cmd, argc, argv, opts, (int)(sizeof opts / sizeof opts[0]), pos, 0, &npos, &help);
    if (rc) return rc;
    if (help) {
        fputs(usage, stdout);
        return CLI_OK;
    }
    machine mc = {0};
    mc.threads = 2;
    mc.repeat_gemv = quick ? 2 : 15;
    mc.repeat_gemm = quick ? 1 : 5;
    if (threads_s) {
        long v;
        if (!cli_parse_int(threads_s, 1, 256, &v)) return cli_usage_error(cmd, "--threads '%s' is not 1..256", threads_s);
        mc.threads = (int)v;
    }
    if (repeat_s) {
        long v;
        if (!cli_parse_int(repeat_s, 1, 1000, &v)) return cli_usage_error(cmd, "--repeat '%s' is not 1..1000", repeat_s);
        mc.repeat_gemv = mc.repeat_gemm = (int)v;
    }
    mc.isa = qtk_get_isa();
    mc.ghz = measure_ghz();
    mc.peak = measure_peak(mc.isa);
    mc.rd_small = read_rate(8u << 20, 1);
    mc.rd_large = read_rate(quick ? 64u << 20 : 512u << 20, 1);
    printf("qtk bench --matmul: kernels %s, layout nk, best of %d (GEMV) / %d (GEMM)\n", qtk_isa_name(mc.isa),
           mc.repeat_gemv, mc.repeat_gemm);
    printf("machine: %.2f GHz (measured), f32 FMA peak %.1f GFLOP/s per core (%s), read-only %.1f GB/s (8 MiB), %.1f GB/s (%d MiB)\n",
           mc.ghz, mc.peak, qtk_isa_name(mc.isa), mc.rd_small / 1e9, mc.rd_large / 1e9, quick ? 64 : 512);
    /* other work on the machine skews every figure: say how busy it was */
    FILE *la = fopen("/proc/loadavg", "r");
    char lbuf[64] = "";
    if (la) {
        if (!fgets(lbuf, sizeof lbuf, la)) lbuf[0] = '\0';
        fclose(la);
        lbuf[strcspn(lbuf, "\n")] = '\0';
    }
    printf("load average at start: %s\n\n", lbuf[0] ? lbuf : "unknown");
    printf("| shape     | scheme                 | bits  | path      |  M | T |        ms |  W GB/s | GFLOP/s | cyc/32w |  roof | x2thr | kernel |\n");
    printf("|-----------|------------------------|-------|-----------|----|---|-----------|---------|---------|---------|-------|-------|--------|\n");
    static const size_t shapes[][2] = {{4096, 4096}, {14336, 4096}, {1024, 1024}};
    for (size_t i = 0; i < 3; i++) {
        if (quick && i == 1) continue;
        rc = bench_shape(cmd, shapes[i][0], shapes[i][1], &mc, !noref);
        if (rc) return rc;
    }
    return CLI_OK;
}
