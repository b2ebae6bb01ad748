/* fuzz_tensor.c — tensor bytes (SPEC §5) under every scheme family.
 *
 * Input: [scheme][rank][extents...][flags][bytes...]. The scheme byte picks one of the
 * families below (0xff: a spec string follows, up to ';'); flags bit 0 passes the bytes as
 * they are (so lengths are fuzzed too), else they are cut or repeated to the exact length.
 *
 * Oracles:
 *   - qtk_bytes_check and qtk_tensor_from_bytes agree (same status); a tensor gives its
 *     bytes back unchanged, and qtk_dequantize_bytes equals qtk_dequantize;
 *   - every ISA level gives the same bits: dequantize to f32, f16 and bf16, and quantize
 *     the dequantized values again (same status, same bytes);
 *   - qtk_convert to another scheme equals qtk_quantize of the dequantized values;
 *   - thread-count invariance on a tiled copy large enough to be split (1 and 3 threads, one input in 64;
 *     quantize, dequantize and matmul);
 *   - rank-2 tensors: qtk_matmul (both layouts; exact at every level, fast where it runs)
 *     within the bound of qtk_matmul.h against an f64 product of the dequantized weights,
 *     plus the absolute terms underflow adds, which qtk_matmul.h does not state yet: K x 2^-149
 *     for the exact path, (127 x 128 x K + 4 (K/16 + 1)) x 2^-149 for the integer path.
 *
 * Built twice: fuzz_tensor (every oracle above) and, with FZ_PARSE_ONLY, fuzz_tensor_bytes:
 * the first oracle alone (bytes_check against from_bytes, bytes back unchanged,
 * dequantize_bytes equal to dequantize at the machine's own level), thousands of inputs a
 * second where the ISA, quantize, convert and matmul oracles run a few hundred. */
#include "fuzz_util.h"

#include "qtk_matmul.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FZ_PARSE_ONLY
#  define FZ_FAST 1
#else
#  define FZ_FAST 0
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const families[] = {
    /* 8-, 4- and 2-bit integers, symmetric: every store, pack dim and block shape */
    "q8f", "q8s,block=32:f16", "q8s,block=*:f32,store=native", "q8f,block=7:bf16,store=u32:1", "q8s,store=u32:1",
    "q4f,block=32:f16", "q4s,block=16:bf16", "q4f,block=7:f16", "q4s,block=3:ue8m0,store=native",
    "q4f,store=u32:1,block=8:f16", "q4s,block=32:f16,store=packed:0", "q4f,block=4x8:f16", "q4s,block=64:f16,tensor=f32",
    "q4f,block=*x1:f32", "q2s,block=32:f16", "q2f,block=12:f32", "q2s,block=5:f16", "q2s,store=u32:2,block=5:bf16",
    "q2f,block=64:f32,store=native", "q2s,store=packed:1,block=4:f16", "q2s,block=*:f32",
    /* minifloats */
    "e4m3", "e4m3,block=32:f16", "e4m3,block=128x128:f32,store=native", "e4m3,block=16:ue4m3,tensor=f32",
    "e5m2,block=32:ue8m0", "e5m2,block=9:f16,store=native", "e5m2,store=u32:1", "e2m1,block=16:f16",
    "e2m1,block=3:f32,store=packed:0", "e2m1,store=packed:1,block=4:f16", "e2m1,block=32:ue8m0,store=u32",
    /* presets, two-level */
    "nvfp4", "mxfp4", "mxfp8", "nf4", "q8s,block=2x3:ue4m3", "e2m1,block=16x1:ue4m3,tensor=f32,store=packed:1",
    /* lookup tables: built in and registered, 2, 4 and 8 bits */
    "q4f,table=iq4nl,block=32:f16", "q4f,table=nf4,block=*:f32", "q2f,table=t2x,block=8:f16",
    "q8f,table=t8x,block=16:f32", "q4s,table=t4x,block=5:bf16,store=native", "q2s,table=t2x,store=u32:1",
    "q4f,table=iq4nl,block=32:f32",
};
#define N_FAMILIES (sizeof families / sizeof families[0])

static qtk_isa levels[5];
static int n_levels;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    static const float t2[4] = {-1.5f, -0.5f, 0.5f, 1.5f};
    float t8[256], t4[16];
    for (int i = 0; i < 16; i++) t4[i] = (float)(i - 8) * 0.25f;
    for (int i = 0; i < 256; i++) t8[i] = (float)(i - 128) / 16.0f;
    if (qtk_table_register("t2x", t2, 4) || qtk_table_register("t4x", t4, 16) || qtk_table_register("t8x", t8, 256))
        abort();
    n_levels = fz_isa_levels(levels);
    qtk_set_threads(1);
    return 0;
}

static size_t numel_of(const size_t *shape, int rank) {
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    return n;
}

static void set_isa(qtk_isa i) { FZ_CHECK(qtk_set_isa(i) == QTK_OK, "cannot set ISA %s", qtk_isa_name(i)); }

/* Dequantized values at every level, bit for bit; returns the f32 values (level 0). */
static float *dequantize_everywhere(const qtk_tensor *t, size_t n, const char *spec) {
    static const qtk_dtype dts[3] = {QTK_DTYPE_F32, QTK_DTYPE_F16, QTK_DTYPE_BF16};
    float *ref = NULL;
    for (int d = 0; d < 3; d++) {
        size_t esz = d == 0 ? 4 : 2, bytes = (n ? n : 1) * esz;
        uint8_t *base = malloc(bytes), *other = malloc(bytes);
        FZ_CHECK(base && other, "out of memory");
        for (int l = 0; l < n_levels; l++) {
            set_isa(levels[l]);
            uint8_t *dst = l == 0 ? base : other;
            memset(dst, 0xa5, bytes);
            qtk_status st = qtk_dequantize(t, dts[d], dst, n);
            FZ_CHECK(st == QTK_OK, "%s: dequantize to %s at %s: %s", spec, qtk_dtype_name(dts[d]), qtk_isa_name(levels[l]),
                     qtk_last_error());
            if (l == 0) continue;
            for (size_t i = 0; i < n; i++)
                FZ_CHECK(memcmp(base + i * esz, other + i * esz, esz) == 0,
                         "%s: dequantized %s element %zu differs between %s and %s", spec, qtk_dtype_name(dts[d]), i,
                         qtk_isa_name(levels[0]), qtk_isa_name(levels[l]));
        }
        set_isa(QTK_ISA_AUTO);
        free(other);
        if (d == 0) ref = (float *)(void *)base;
        else free(base);
    }
    return ref;
}

static bool all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

/* qtk_quantize at every level: the same status and bytes. Returns level 0's tensor. */
static qtk_tensor *quantize_everywhere(const float *x, const size_t *shape, int rank, const qtk_scheme *s,
                                       qtk_calibration cal, int threads, const char *spec) {
    qtk_quantize_options o = {.calibration = cal, .threads = threads};
    qtk_tensor *ref = NULL;
    qtk_status st0 = QTK_OK;
    for (int l = 0; l < n_levels; l++) {
        set_isa(levels[l]);
        qtk_tensor *t = NULL;
        qtk_status st = qtk_quantize(x, shape, rank, s, &o, &t);
        if (l == 0) {
            st0 = st;
            ref = t;
            FZ_CHECK(st == QTK_OK || (fz_data_error(st) && qtk_last_error()[0]), "%s: quantize: %s", spec,
                     qtk_status_name(st));
            continue;
        }
        FZ_CHECK(st == st0, "%s: quantize is %s at %s but %s at %s", spec, qtk_status_name(st0), qtk_isa_name(levels[0]),
                 qtk_status_name(st), qtk_isa_name(levels[l]));
        if (!st) {
            size_t a = 0, b = 0;
            const uint8_t *pa = qtk_tensor_bytes(ref, &a), *pb = qtk_tensor_bytes(t, &b);
            size_t at = 0;
            while (at < a && pa[at] == pb[at]) at++;
            FZ_CHECK(a == b && at == a, "%s (%s): quantized byte %zu differs between %s and %s", spec,
                     qtk_calibration_name(cal), at, qtk_isa_name(levels[0]), qtk_isa_name(levels[l]));
        }
        qtk_tensor_free(t);
    }
    set_isa(QTK_ISA_AUTO);
    return ref;
}

static bool same_tensor_bytes(const qtk_tensor *a, const qtk_tensor *b) {
    size_t na = 0, nb = 0;
    const uint8_t *pa = qtk_tensor_bytes(a, &na), *pb = qtk_tensor_bytes(b, &nb);
    return na == nb && (!na || memcmp(pa, pb, na) == 0);
}

/* y = x · Wᵀ against the f64 product of the dequantized weights w (N x K, or K x N for kn). */
static void check_matmul(const qtk_tensor *t, const float *w, size_t R, size_t C, uint64_t h, const char *spec) {
    size_t M = 1 + h % 3;
    for (int lay = 0; lay < 2; lay++) {
        size_t N = lay == 0 ? R : C, K = lay == 0 ? C : R;
        float *x = malloc(M * K * sizeof(float) + 4), *y = malloc(M * N * sizeof(float) + 4),
              *bias = malloc(N * sizeof(float) + 4);
        double *ref = malloc(M * N * sizeof(double) + 8), *mag = malloc(M * N * sizeof(double) + 8);
        FZ_CHECK(x && y && bias && ref && mag, "out of memory");
        uint64_t r = h | 1;
        for (size_t i = 0; i < M * K; i++) {
            r = fz_next(r);
            x[i] = ldexpf((float)((int)(r % 17) - 8), (int)((r >> 8) % 9) - 4);
        }
        for (size_t n = 0; n < N; n++) bias[n] = (float)((int)((h >> (n % 48)) % 5) - 2);
        bool finite = true;
        for (size_t m = 0; m < M; m++)
            for (size_t n = 0; n < N; n++) {
                double s = bias[n], a = fabs((double)bias[n]);
                for (size_t k = 0; k < K; k++) {
                    double wv = lay == 0 ? w[n * K + k] : w[k * N + n];
                    s += (double)x[m * K + k] * wv;
                    a += fabs((double)x[m * K + k] * wv);
                }
                ref[m * N + n] = s;
                mag[m * N + n] = a;
                finite = finite && a < FLT_MAX / 4;
            }
        if (!finite) goto next; /* products beyond f32: no bound to check */
        double u = ldexp(1.0, -24), under = (double)K * ldexp(1.0, -149);
        for (int prec = 0; prec < 2; prec++) {
            qtk_matmul_options o = {.layout = lay ? QTK_MM_KN : QTK_MM_NK, .precision = prec ? QTK_PRECISION_FAST
                                                                                           : QTK_PRECISION_EXACT,
                                    .threads = 1};
            for (int l = 0; l < n_levels; l++) {
                set_isa(levels[l]);
                qtk_mm_path path;
                FZ_CHECK(qtk_matmul_path(t, M, &o, &path) == QTK_OK, "%s: matmul_path: %s", spec, qtk_last_error());
                qtk_status st = qtk_matmul(t, x, QTK_DTYPE_F32, M, K, bias, y, N, &o);
                FZ_CHECK(st == QTK_OK, "%s: matmul (%s, %s, %s): %s", spec, lay ? "kn" : "nk", prec ? "fast" : "exact",
                         qtk_isa_name(levels[l]), qtk_last_error());
                for (size_t m = 0; m < M; m++)
                    for (size_t n = 0; n < N; n++) {
                        double g = (double)(K + 1) * u / (1.0 - (double)(K + 1) * u), tol = g * mag[m * N + n] + under;
                        if (path == QTK_MM_PATH_INTEGER) {
                            /* E_q: the activations' rounding, blocks of 32 (a bound for 16 too) */
                            double eq = 0.0;
                            for (size_t b0 = 0; b0 < K; b0 += 32) {
                                float amax = 0.0f;
                                double sw = 0.0;
                                for (size_t k = b0; k < K && k < b0 + 32; k++) {
                                    if (fabsf(x[m * K + k]) > amax) amax = fabsf(x[m * K + k]);
                                    sw += fabs((double)(lay == 0 ? w[n * K + k] : w[k * N + n]));
                                }
                                eq += (double)(amax / 127.0f) / 2.0 * sw;
                            }
                            eq *= 1.0 + ldexp(1.0, -8);
                            double g4 = (double)(K + 4) * u / (1.0 - (double)(K + 4) * u);
                            /* underflow: each block's scale (weight scale x s_b, x global) may
                             * lose up to 2^-150 absolute, multiplied by the block's integer dot
                             * product (|q| <= 127, |field| <= 128), and each of a few roundings
                             * per block adds 2^-150 */
                            double under_int = ((double)K * 127.0 * 128.0 + 4.0 * (double)(K / 16 + 1)) * ldexp(1.0, -149);
                            tol = eq + g4 * (mag[m * N + n] + 2 * eq) + under_int;
                        }
                        double d = fabs((double)y[m * N + n] - ref[m * N + n]);
                        FZ_CHECK(d <= tol, "%s: matmul %s %s path %s at %s, M=%zu N=%zu K=%zu: y[%zu][%zu] = %.9g, f64 %.9g, "
                                 "|diff| %.3g > bound %.3g",
                                 spec, lay ? "kn" : "nk", prec ? "fast" : "exact", qtk_mm_path_name(path),
                                 qtk_isa_name(levels[l]), M, N, K, m, n, (double)y[m * N + n], ref[m * N + n], d, tol);
                    }
            }
            set_isa(QTK_ISA_AUTO);
        }
    next:
        free(x);
        free(y);
        free(bias);
        free(ref);
        free(mag);
    }
}

/* A copy tiled along the first dimension to at least 140 000 elements: quantize, dequantize
 * and matmul split it across threads, and must give the bits one thread gives. */
static void check_threads(const float *y, const size_t *shape, int rank, const qtk_scheme *s, const char *spec) {
    size_t n = numel_of(shape, rank);
    if (rank < 1 || n == 0 || n > 4096) return;
    size_t reps = (140000 + n - 1) / n, big[QTK_MAX_RANK]; /* 3 threads from 131072 elements */
    memcpy(big, shape, (size_t)rank * sizeof *big);
    big[0] *= reps;
    size_t bn = n * reps;
    float *x = malloc(bn * sizeof(float)), *d1 = malloc(bn * sizeof(float)), *d3 = malloc(bn * sizeof(float));
    FZ_CHECK(x && d1 && d3, "out of memory");
    for (size_t i = 0; i < reps; i++) memcpy(x + i * n, y, n * sizeof(float));
    qtk_quantize_options o1 = {.threads = 1}, o3 = {.threads = 3};
    qtk_tensor *a = NULL, *b = NULL;
    qtk_status sa = qtk_quantize(x, big, rank, s, &o1, &a), sb = qtk_quantize(x, big, rank, s, &o3, &b);
    FZ_CHECK(sa == sb, "%s: quantize of the tiled tensor is %s with 1 thread, %s with 3", spec, qtk_status_name(sa),
             qtk_status_name(sb));
    if (!sa) {
        FZ_CHECK(same_tensor_bytes(a, b), "%s: the tiled tensor quantizes to other bytes on 3 threads", spec);
        qtk_set_threads(1);
        FZ_CHECK(qtk_dequantize(a, QTK_DTYPE_F32, d1, bn) == QTK_OK, "%s: dequantize", spec);
        qtk_set_threads(3);
        FZ_CHECK(qtk_dequantize(a, QTK_DTYPE_F32, d3, bn) == QTK_OK, "%s: dequantize", spec);
        qtk_set_threads(1);
        FZ_CHECK(memcmp(d1, d3, bn * sizeof(float)) == 0, "%s: the tiled tensor dequantizes to other bits on 3 threads", spec);
        if (rank == 2 && all_finite(d1, bn)) {
            size_t K = big[1], N = big[0];
            float *xv = malloc(K * sizeof(float)), *y1 = malloc(N * sizeof(float)), *y3 = malloc(N * sizeof(float));
            FZ_CHECK(xv && y1 && y3, "out of memory");
            for (size_t k = 0; k < K; k++) xv[k] = (float)((int)(k % 7) - 3);
            for (int prec = 0; prec < 2; prec++) {
                qtk_matmul_options m1 = {.precision = (qtk_precision)prec, .threads = 1},
                                   m3 = {.precision = (qtk_precision)prec, .threads = 3};
                qtk_status s1 = qtk_matmul(a, xv, QTK_DTYPE_F32, 1, K, NULL, y1, N, &m1);
                qtk_status s3 = qtk_matmul(a, xv, QTK_DTYPE_F32, 1, K, NULL, y3, N, &m3);
                FZ_CHECK(s1 == QTK_OK && s3 == QTK_OK, "%s: matmul on the tiled tensor: %s", spec, qtk_last_error());
                FZ_CHECK(memcmp(y1, y3, N * sizeof(float)) == 0, "%s: matmul (%s) differs between 1 and 3 threads", spec,
                         prec ? "fast" : "exact");
            }
            free(xv);
            free(y1);
            free(y3);
        }
    }
    qtk_tensor_free(a);
    qtk_tensor_free(b);
    free(x);
    free(d1);
    free(d3);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 8192) return 0;
    fz_reader r = {data, size, 0};
    uint8_t sel = fz_u8(&r);
    char spec[96];
    if (sel == 0xff) {
        size_t k = 0;
        while (r.at < r.n && data[r.at] != ';' && k + 1 < sizeof spec) spec[k++] = (char)data[r.at++];
        spec[k] = '\0';
        r.at++;
    } else {
        snprintf(spec, sizeof spec, "%s", families[sel % N_FAMILIES]);
    }
    qtk_scheme s;
    if (qtk_scheme_parse(spec, &s) != QTK_OK) return 0;
    int rank = fz_u8(&r) % 5;
    size_t shape[QTK_MAX_RANK];
    for (int i = 0; i < rank; i++) shape[i] = fz_u8(&r) % 41; /* 0 included: empty tensors */
    uint8_t flags = fz_u8(&r);
    size_t n = numel_of(shape, rank);
    if (n > 4096) return 0;
    qtk_layout L;
    qtk_status lst = qtk_layout_compute(&s, shape, rank, &L);
    const uint8_t *rest = data + (r.at < size ? r.at : size);
    size_t nrest = size - (r.at < size ? r.at : size);
    const uint8_t *bytes = rest;
    size_t len = nrest;
    uint8_t *exact = NULL;
    if (!(flags & 1) && lst == QTK_OK) {
        len = L.total_bytes;
        exact = malloc(len ? len : 1);
        FZ_CHECK(exact, "out of memory");
        for (size_t i = 0; i < len; i++) exact[i] = nrest ? rest[i % nrest] : (uint8_t)(i * 37);
        bytes = exact;
    }
    qtk_clear_error();
    qtk_status sc = qtk_bytes_check(bytes, len, shape, rank, &s);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", qtk_last_error());
    qtk_tensor *t = NULL;
    qtk_status sf = qtk_tensor_from_bytes(bytes, len, shape, rank, &s, &t);
    FZ_CHECK(sc == sf, "%s on %zu elements: qtk_bytes_check says %s (%s), qtk_tensor_from_bytes %s", spec, n,
             qtk_status_name(sc), msg, qtk_status_name(sf));
    if (sf) {
        FZ_CHECK(fz_data_error(sf) && qtk_last_error()[0], "%s: from_bytes failed with %s", spec, qtk_status_name(sf));
        free(exact);
        return 0;
    }
    size_t tn = 0;
    const uint8_t *tb = qtk_tensor_bytes(t, &tn);
    FZ_CHECK(tn == len && (!len || memcmp(tb, bytes, len) == 0), "%s: bytes -> tensor -> bytes changed them", spec);
    float *y = NULL;
    if (FZ_FAST) {
        y = malloc((n ? n : 1) * sizeof(float));
        FZ_CHECK(y, "out of memory");
        FZ_CHECK(qtk_dequantize(t, QTK_DTYPE_F32, y, n) == QTK_OK, "%s: dequantize: %s", spec, qtk_last_error());
    } else {
        y = dequantize_everywhere(t, n, spec);
    }
    float *z = malloc((n ? n : 1) * sizeof(float));
    FZ_CHECK(z, "out of memory");
    FZ_CHECK(qtk_dequantize_bytes(bytes, len, shape, rank, &s, QTK_DTYPE_F32, z, n) == QTK_OK &&
                 (!n || memcmp(y, z, n * sizeof(float)) == 0),
             "%s: qtk_dequantize_bytes differs from qtk_dequantize", spec);
    uint64_t h = fz_hash(data, size);
    if (!FZ_FAST && all_finite(y, n)) {
        qtk_tensor *q = quantize_everywhere(y, shape, rank, &s, QTK_CALIB_MINMAX, 1, spec);
        qtk_tensor_free(q);
        if (!qtk_scheme_is_two_level(&s)) qtk_tensor_free(quantize_everywhere(y, shape, rank, &s, QTK_CALIB_ABSMEAN, 1, spec));
        /* qtk_convert == qtk_quantize(dequantize) */
        qtk_scheme s2;
        FZ_CHECK(qtk_scheme_parse(families[(h >> 16) % N_FAMILIES], &s2) == QTK_OK, "family");
        qtk_tensor *c = NULL, *d = NULL;
        qtk_status s1 = qtk_convert(t, &s2, NULL, &c), s3 = qtk_quantize(y, shape, rank, &s2, NULL, &d);
        FZ_CHECK(s1 == s3, "%s -> %s: qtk_convert is %s, quantize(dequantize) %s", spec, families[(h >> 16) % N_FAMILIES],
                 qtk_status_name(s1), qtk_status_name(s3));
        if (!s1)
            FZ_CHECK(same_tensor_bytes(c, d), "%s -> %s: qtk_convert differs from quantize(dequantize)", spec,
                     families[(h >> 16) % N_FAMILIES]);
        qtk_tensor_free(c);
        qtk_tensor_free(d);
        if (rank == 2 && n > 0) check_matmul(t, y, shape[0], shape[1], h, spec);
        if ((h & 63) == 0) check_threads(y, shape, rank, &s, spec);
    }
    free(z);
    free(y);
    qtk_tensor_free(t);
    free(exact);
    return 0;
}
