/* cmd_bench.c — qtk bench: quantize and dequantize throughput per scheme, against memory
 * baselines measured in the same run over the same f32 bytes. */
#include "cli.h"

#include "synth.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__SSE2__)
#  include <emmintrin.h>
#endif

static const char usage[] =
    "usage: qtk bench [--schemes S1;S2;...] [--sizes N1,N2,...] [--isa auto|scalar|portable|avx2|avx512|neon|all]\n"
    "                 [--calibration C1,C2,...] [--threads N] [--runs R] [--json]\n"
    "\n"
    "Times quantize (f32 -> bytes) and dequantize (bytes -> f32) for each scheme and size\n"
    "(best of R runs) on deterministic synthetic weights shaped [N/4096, 4096], and, in the\n"
    "same run over the same f32 bytes, three memory baselines: memcpy, a read-only streaming\n"
    "reduction, and a streaming-store (non-temporal) write. Rates are in GB/s of f32 data\n"
    "(4 bytes per element) read by quantize or written by dequantize.\n"
    "\n"
    "  --schemes LIST   ';'-separated spec strings (default: the presets and q8s/q4f/q4s/q2s/\n"
    "                   e4m3/e5m2 with block=32:f16)\n"
    "  --sizes LIST     element counts, ','-separated; K and M suffixes allowed (default 64M,64K)\n"
    "  --isa L          kernel level: auto (the best, default), scalar (the reference),\n"
    "                   portable (C vectors, any CPU), avx2, avx512 (x86-64), neon (AArch64),\n"
    "                   or all (every level this CPU runs)\n"
    "  --calibration L  ','-separated calibrations to time quantize with: minmax (the default),\n"
    "                   absmean, mse; minmax is always timed too, and the others' rows add\n"
    "                   their time relative to it ('x minmax'); dequantize is timed once\n"
    "  --threads N      worker threads (default 1, so figures are per core)\n"
    "  --runs R         runs per measurement, best kept (default 5; 50 for sizes <= 1M)\n"
    "  --json           one JSON object per line instead of the table\n"
    "\n"
    "qtk bench --matmul [OPTIONS] times quantized GEMV/GEMM instead ('qtk bench --matmul --help').\n";

static const char *const default_schemes[] = {
    "nvfp4",          "mxfp4",           "mxfp8",           "nf4",
    "q8s,block=32:f16", "q4f,block=32:f16", "q4s,block=32:f16", "q2s,block=32:f16",
    "e4m3,block=32:f16", "e5m2,block=32:f16",
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- memory baselines, split over threads like the kernels ---- */

typedef struct {
    int op; /* 0 memcpy, 1 read, 2 stream write */
    const uint8_t *src;
    uint8_t *dst;
    size_t bytes;
    uint64_t sink;
} base_job;

typedef struct {
    base_job *j;
    uint64_t sink[64]; /* per worker */
} base_part;

/* Units [u0, u1) of 64 bytes (the last one takes the tail). */
static void base_run(void *ctx, size_t u0, size_t u1, int worker) {
    base_part *pt = ctx;
    base_job *j = pt->j;
    size_t b = u0 * 64, e = u1 * 64 < j->bytes ? u1 * 64 : j->bytes, n = e - b;
    uint64_t sink = 0;
    if (j->op == 0) {
        memcpy(j->dst + b, j->src + b, n);
    } else if (j->op == 1) {
        const uint64_t *s = (const uint64_t *)(const void *)(j->src + b);
        uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        size_t k = n / 8, i = 0;
        for (; i + 4 <= k; i += 4) {
            a0 += s[i];
            a1 ^= s[i + 1];
            a2 += s[i + 2];
            a3 ^= s[i + 3];
        }
        for (; i < k; i++) a0 += s[i];
        sink = a0 ^ a1 ^ a2 ^ a3;
    } else {
#if defined(__SSE2__)
        __m128i v = _mm_set1_epi32(0x3f800000);
        uint8_t *d = j->dst + b;
        size_t i = 0;
        while (i < n && ((uintptr_t)(d + i) & 15)) d[i++] = 0;
        for (; i + 64 <= n; i += 64) {
            _mm_stream_si128((__m128i *)(void *)(d + i), v);
            _mm_stream_si128((__m128i *)(void *)(d + i + 16), v);
            _mm_stream_si128((__m128i *)(void *)(d + i + 32), v);
            _mm_stream_si128((__m128i *)(void *)(d + i + 48), v);
        }
        _mm_sfence();
        memset(d + i, 0, n - i);
#else
        memset(j->dst + b, 1, n);
#endif
    }
    if (worker < 64) pt->sink[worker] ^= sink;
}

static double time_baseline(int op, const uint8_t *src, uint8_t *dst, size_t bytes, int threads, int runs) {
    base_job j = {op, src, dst, bytes, 0};
    double best = INFINITY;
    for (int r = 0; r < runs; r++) {
        base_part parts = {&j, {0}};
        double t0 = now();
        /* the library's fork-join over 64-byte units: each worker streams one contiguous range */
        qtk_parallel_for(threads > 64 ? 64 : threads, (bytes + 63) / 64, base_run, &parts);
        double dt = now() - t0;
        for (int i = 0; i < 64; i++) j.sink ^= parts.sink[i];
        if (dt < best) best = dt;
    }
    if (j.sink == 42) fputc(' ', stderr); /* keep the reduction alive */
    return best;
}

static bool parse_size(const char *s, size_t *out) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s) return false;
    if (*end == 'K' || *end == 'k') v <<= 10, end++;
    else if (*end == 'M' || *end == 'm') v <<= 20, end++;
    else if (*end == 'G' || *end == 'g') v <<= 30, end++;
    if (*end || v == 0) return false;
    *out = (size_t)v;
    return true;
}

typedef struct {
    bool json;
    int threads, runs;
    qtk_calibration cals[3]; /* cals[0] is minmax */
    int ncal;
} bench_cfg;


/* base_s: the minmax quantize time of the same scheme in this run (0: none to compare) */
static void report(const bench_cfg *c, const char *scheme, const char *op, const char *cal, size_t n, const char *isa,
                   double sec, double memcpy_s, double read_s, double write_s, double base_s) {
    double bytes = (double)n * 4.0;
    double gbps = bytes / sec / 1e9, mc = bytes / memcpy_s / 1e9, rd = bytes / read_s / 1e9, wr = bytes / write_s / 1e9;
    if (c->json) {
        printf("{\"scheme\":\"%s\",\"op\":\"%s\",\"calibration\":\"%s\",\"elements\":%zu,\"threads\":%d,\"isa\":\"%s\","
               "\"seconds\":%.9f,\"f32_gbps\":%.3f,\"elements_per_ns\":%.4f,\"memcpy_gbps\":%.3f,\"read_gbps\":%.3f,"
               "\"write_gbps\":%.3f",
               scheme, op, cal, n, c->threads, isa, sec, gbps, (double)n / sec / 1e9, mc, rd, wr);
        if (base_s > 0) printf(",\"time_vs_minmax\":%.3f", sec / base_s);
        printf("}\n");
    } else {
        double limit = strcmp(op, "quantize") == 0 ? rd : strcmp(op, "dequantize") == 0 ? wr : gbps;
        printf("%-30s %-10s %-7s %-7s %3d %10zu %10.3f %8.3f %8.2f %7.2f %7.2f", scheme, op, cal, isa, c->threads, n,
               sec * 1e3, (double)n / sec / 1e9, gbps, gbps / mc, gbps / limit);
        if (base_s > 0) printf(" %9.2f", sec / base_s);
        printf("\n");
    }
    fflush(stdout);
}

static int bench_size(const char *cmd, const bench_cfg *c, const char *const *schemes, int nschemes, size_t n,
                      const qtk_isa *isas, int nisa) {
    size_t cols = n >= 4096 ? 4096 : n, rows = n / cols;
    n = rows * cols;
    size_t shape[2] = {rows, cols};
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    uint8_t *q = malloc(n * 4 + 4096);
    if (!x || !y || !q) {
        free(x);
        free(y);
        free(q);
        return cli_fail(cmd, QTK_OK, "out of memory for %zu elements", n);
    }
    cli_synth_weights(x, rows, cols, 0.02f, 97, 7);
    memset(y, 0, n * sizeof(float));
    memset(q, 0, n * 4 + 4096);
    int runs = c->runs > 0 ? c->runs : n <= ((size_t)1 << 20) ? 50 : 5;
    double mc = time_baseline(0, (const uint8_t *)x, (uint8_t *)y, n * 4, c->threads, runs);
    double rd = time_baseline(1, (const uint8_t *)x, NULL, n * 4, c->threads, runs);
    double wr = time_baseline(2, NULL, (uint8_t *)y, n * 4, c->threads, runs);
    report(c, "(baseline)", "memcpy", "-", n, "-", mc, mc, rd, wr, 0);
    report(c, "(baseline)", "read", "-", n, "-", rd, mc, rd, wr, 0);
    report(c, "(baseline)", "write-nt", "-", n, "-", wr, mc, rd, wr, 0);
    int rc = CLI_OK;
    qtk_quantize_options o = {.threads = c->threads};
    qtk_set_threads(c->threads);
    for (int k = 0; k < nschemes && rc == CLI_OK; k++) {
        qtk_scheme s;
        qtk_layout L;
        qtk_status st = qtk_scheme_parse(schemes[k], &s);
        if (!st) st = qtk_layout_compute(&s, shape, 2, &L);
        if (st) {
            rc = cli_fail(cmd, st, "scheme '%s'", schemes[k]);
            break;
        }
        for (int ii = 0; ii < nisa && rc == CLI_OK; ii++) {
            qtk_set_isa(isas[ii]);
            const char *iname = qtk_isa_name(qtk_get_isa());
            double bq[3] = {INFINITY, INFINITY, INFINITY}, bd = INFINITY;
            qtk_tensor *t = NULL;
            bool skip[3] = {false, false, false};
            /* each calibration's runs interleaved with the others', so that a slow phase of
             * the machine does not favour one of them */
            for (int r = 0; r < runs && !st; r++) {
                for (int ci = c->ncal - 1; ci >= 0 && !st; ci--) {
                    if (skip[ci]) continue;
                    o.calibration = c->cals[ci];
                    double t0 = now();
                    st = qtk_quantize_into(x, shape, 2, &s, &o, q, L.total_bytes);
                    double dt = now() - t0;
                    if (st && ci > 0) { /* e.g. absmean on a two-level scheme: not timed */
                        skip[ci] = true;
                        st = QTK_OK;
                        continue;
                    }
                    if (dt < bq[ci]) bq[ci] = dt;
                }
            }
            o.calibration = QTK_CALIB_MINMAX;
            if (!st) st = qtk_quantize_into(x, shape, 2, &s, &o, q, L.total_bytes);
            if (!st) st = qtk_tensor_from_bytes(q, L.total_bytes, shape, 2, &s, &t);
            for (int r = 0; !st && r < runs; r++) {
                double t0 = now();
                st = qtk_dequantize(t, QTK_DTYPE_F32, y, n);
                double dt = now() - t0;
                if (dt < bd) bd = dt;
            }
            qtk_tensor_free(t);
            if (st) {
                rc = cli_fail(cmd, st, "scheme '%s'", schemes[k]);
                break;
            }
            for (int ci = 0; ci < c->ncal; ci++)
                if (!skip[ci])
                    report(c, schemes[k], "quantize", qtk_calibration_name(c->cals[ci]), n, iname, bq[ci], mc, rd, wr,
                           ci ? bq[0] : 0);
            report(c, schemes[k], "dequantize", "-", n, iname, bd, mc, rd, wr, 0);
        }
    }
    qtk_set_isa(QTK_ISA_AUTO);
    free(x);
    free(y);
    free(q);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    const char *cmd = "bench";
    /* the matmul benchmark has options of its own */
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--matmul") == 0) return cli_bench_matmul(argc, argv);
    const char *schemes_s = NULL, *sizes_s = NULL, *isa_s = NULL, *threads_s = NULL, *runs_s = NULL, *cal_s = NULL;
    bool json = false, matmul = false;
    const cli_opt opts[] = {
        {"schemes", true, &schemes_s, NULL, NULL, NULL}, {"sizes", true, &sizes_s, NULL, NULL, NULL},
        {"isa", true, &isa_s, NULL, NULL, NULL},         {"threads", true, &threads_s, NULL, NULL, NULL},
        {"runs", true, &runs_s, NULL, NULL, NULL},       {"json", false, NULL, &json, NULL, NULL},
        {"matmul", false, NULL, &matmul, NULL, NULL},    {"calibration", true, &cal_s, NULL, NULL, NULL},
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
    (void)matmul;
    bench_cfg c = {json, 1, 0, {QTK_CALIB_MINMAX, QTK_CALIB_MINMAX, QTK_CALIB_MINMAX}, 1};
    if (cal_s) {
        char cb[128];
        bool absmean = false, mse = false;
        snprintf(cb, sizeof cb, "%s", cal_s);
        for (char *tok = strtok(cb, ","); tok; tok = strtok(NULL, ",")) {
            qtk_calibration k;
            if (qtk_calibration_parse(tok, &k)) return cli_usage_error(cmd, "--calibration '%s' is not minmax, absmean or mse", tok);
            if (k == QTK_CALIB_MSE) mse = true; /* minmax: always timed, first */
            else if (k == QTK_CALIB_ABSMEAN) absmean = true;
        }
        if (absmean) c.cals[c.ncal++] = QTK_CALIB_ABSMEAN;
        if (mse) c.cals[c.ncal++] = QTK_CALIB_MSE;
    }
    long v;
    if (threads_s) {
        if (!cli_parse_int(threads_s, 1, 256, &v)) return cli_usage_error(cmd, "--threads '%s' is not 1..256", threads_s);
        c.threads = (int)v;
    }
    if (runs_s) {
        if (!cli_parse_int(runs_s, 1, 100000, &v)) return cli_usage_error(cmd, "--runs '%s' is not 1..100000", runs_s);
        c.runs = (int)v;
    }
    static const qtk_isa every[] = {QTK_ISA_SCALAR, QTK_ISA_PORTABLE, QTK_ISA_AVX2, QTK_ISA_AVX512, QTK_ISA_NEON};
    qtk_isa isas[5];
    int nisa = 0;
    if (!isa_s || strcmp(isa_s, "auto") == 0) isas[nisa++] = qtk_detect_isa();
    else if (strcmp(isa_s, "all") == 0) {
        for (size_t i = 0; i < sizeof every / sizeof every[0]; i++)
            if (qtk_set_isa(every[i]) == QTK_OK) isas[nisa++] = every[i];
        qtk_clear_error();
        qtk_set_isa(QTK_ISA_AUTO);
    } else {
        qtk_isa want = strcmp(isa_s, "scalar") == 0     ? QTK_ISA_SCALAR
                       : strcmp(isa_s, "portable") == 0 ? QTK_ISA_PORTABLE
                       : strcmp(isa_s, "avx2") == 0     ? QTK_ISA_AVX2
                       : strcmp(isa_s, "avx512") == 0   ? QTK_ISA_AVX512
                       : strcmp(isa_s, "neon") == 0     ? QTK_ISA_NEON
                                                        : QTK_ISA_AUTO;
        if (want == QTK_ISA_AUTO)
            return cli_usage_error(cmd, "--isa '%s' is not auto, scalar, portable, avx2, avx512, neon or all", isa_s);
        qtk_status st = qtk_set_isa(want);
        if (st) return cli_fail(cmd, st, "--isa %s", isa_s);
        isas[nisa++] = want;
    }
    /* schemes */
    const char *list[64];
    int ns = 0;
    char *sbuf = NULL;
    if (schemes_s) {
        size_t len = strlen(schemes_s);
        sbuf = malloc(len + 1);
        if (!sbuf) return cli_fail(cmd, QTK_OK, "out of memory");
        memcpy(sbuf, schemes_s, len + 1);
        for (char *tok = strtok(sbuf, ";"); tok && ns < 64; tok = strtok(NULL, ";")) list[ns++] = tok;
    } else {
        for (size_t i = 0; i < sizeof default_schemes / sizeof default_schemes[0]; i++) list[ns++] = default_schemes[i];
    }
    size_t sizes[16];
    int nsz = 0;
    char szbuf[256];
    snprintf(szbuf, sizeof szbuf, "%s", sizes_s ? sizes_s : "64M,64K");
    for (char *tok = strtok(szbuf, ","); tok; tok = strtok(NULL, ",")) {
        if (nsz == 16 || !parse_size(tok, &sizes[nsz])) {
            free(sbuf);
            return cli_usage_error(cmd, "--sizes: '%s' is not a positive count (K/M/G suffixes allowed)", tok);
        }
        nsz++;
    }
    if (!json) {
        printf("qtk bench: %d thread(s); f32 GB/s = 4 bytes x elements / second; 'vs mem' = ratio to the read\n"
               "baseline (quantize) or the streaming-write baseline (dequantize)\n\n",
               c.threads);
        printf("%-30s %-10s %-7s %-7s %3s %10s %10s %8s %8s %7s %7s %9s\n", "scheme", "op", "cal", "isa", "thr",
               "elements", "ms", "elem/ns", "GB/s", "/memcpy", "vs mem", "x minmax");
    }
    for (int i = 0; i < nsz && rc == CLI_OK; i++) rc = bench_size(cmd, &c, list, ns, sizes[i], isas, nisa);
    free(sbuf);
    return rc;
}
