/* test_simd.c — every accelerated level (AVX2, AVX-512 where this CPU has them) gives the
 * reference's bits: quantize bytes and dequantized values (f32, f16, bf16) on random
 * shapes with odd lengths, partial blocks and tails, unaligned buffers, special values
 * (+-0, subnormals, exact rounding midpoints, saturation) and random bit patterns
 * (including NaN codes); results do not depend on the thread count; the caller's
 * FTZ/DAZ or rounding mode does not leak in. */
#include "test.h"

#include "kernels/plan.h"

#include <fenv.h>
#include <stdbool.h>
#if defined(__SSE__)
#  include <xmmintrin.h>
#endif

static const char *const specs[] = {
    "nvfp4", "mxfp4", "mxfp8", "nf4", "q8f", "q8s,block=32:f16", "q8s,block=*:f32,store=native",
    "q4f,block=32:f16", "q4s,block=16:bf16", "q4f,block=7:f16", "q4s,block=3:ue8m0,store=native",
    "q2s,block=32:f16", "q2f,block=12:f32", "q2s,block=5:f16", "e4m3", "e4m3,block=32:f16",
    "e5m2,block=32:ue8m0", "e5m2,block=9:f16,store=native", "e2m1,block=16:f16", "e2m1,block=3:f32,store=packed:0",
    "q4f,table=iq4nl,block=32:f16", "q4f,table=nf4,block=*:f32", "q2f,table=t2x,block=8:f16",
    "q8f,table=t8x,block=16:f32", "e4m3,block=16:ue4m3,tensor=f32", "q4s,block=64:f16,tensor=f32",
    "q4f,store=u32:1,block=8:f16", "e2m1,store=packed:1,block=4:f16", "q8s,store=u32:1", "q2s,store=u32:2,block=5:bf16",
    "q4f,block=4x8:f16", "q8s,block=2x3:ue4m3", "q4s,block=16:f16,store=native",
};

static qtk_isa levels[5];
static int n_levels;

static void init_levels(void) {
    n_levels = 0;
    const qtk_isa all[] = {QTK_ISA_PORTABLE, QTK_ISA_AVX2, QTK_ISA_AVX512, QTK_ISA_NEON};
    for (int i = 0; i < 4; i++)
        if (qtk_set_isa(all[i]) == QTK_OK) levels[n_levels++] = all[i];
    qtk_set_isa(QTK_ISA_AUTO);
    const float t2[4] = {-1.0f, -0.25f, 0.5f, 2.0f};
    float t8[256];
    for (int i = 0; i < 256; i++) t8[i] = (float)(i - 100) * 0.37f;
    qtk_table_register("t2x", t2, 4);
    qtk_table_register("t8x", t8, 256);
}

/* inputs with +-0, f32 subnormals, values on rounding midpoints of typical scales, and a
 * few outliers */
static void fill(float *x, size_t n, uint64_t *seed, int style) {
    for (size_t i = 0; i < n; i++) {
        int k = (int)(trand_u64(seed) % 20);
        float v = trand_normal(seed);
        if (style == 1) v = (float)((int)(trand_u64(seed) % 33) - 16) * 0.5f;                 /* midpoints */
        if (style == 2) v = ldexpf(trand_uniform(seed, -1, 1), (int)(trand_u64(seed) % 60) - 30); /* wide range */
        if (k == 0) v = 0.0f;
        else if (k == 1) v = -0.0f;
        else if (k == 2) v = 1e-41f * (float)((int)(trand_u64(seed) % 7) - 3);
        else if (k == 3) v *= 30.0f;
        x[i] = v;
    }
}

static bool same_bits(const void *a, const void *b, size_t n) { return memcmp(a, b, n) == 0; }

static void run_case(const char *spec, const size_t *shape, int rank, uint64_t *seed, int style, int misalign) {
    qtk_scheme s;
    if (qtk_scheme_parse(spec, &s) != QTK_OK) {
        CHECK_MSG(0, "parse %s: %s", spec, qtk_last_error());
        return;
    }
    qtk_layout L;
    if (qtk_layout_compute(&s, shape, rank, &L) != QTK_OK) return; /* e.g. block rank > tensor rank */
    size_t n = L.numel;
    float *xb = malloc((n + 32) * sizeof(float)), *x = xb + misalign;
    uint8_t *ref = malloc(L.total_bytes + 1), *gotb = malloc(L.total_bytes + 8), *got = gotb + misalign % 7;
    float *yr = malloc((n + 32) * sizeof(float)), *yb = malloc((n + 32) * sizeof(float)), *y = yb + (misalign * 3) % 16;
    uint16_t *hr = malloc((n + 16) * 2), *hb = malloc((n + 16) * 2), *h = hb + misalign % 5;
    fill(x, n, seed, style);
    qtk_quantize_options o = {0};
    if (style == 3 && !qtk_scheme_is_two_level(&s)) o.calibration = QTK_CALIB_ABSMEAN;
    qtk_set_isa(QTK_ISA_SCALAR);
    qtk_status st = qtk_quantize_into(x, shape, rank, &s, &o, ref, L.total_bytes);
    CHECK_MSG(st == QTK_OK, "%s: scalar quantize: %s", spec, qtk_last_error());
    if (st) goto done;
    if (style == 4) {
        /* random field bits (scales kept): decode must agree on every pattern, NaN codes too */
        for (size_t i = 0; i < L.value_bytes; i++) ref[i] = (uint8_t)trand_u64(seed);
        if (s.store == QTK_STORE_NATIVE && qtk_value_bits(s.value) < 8)
            for (size_t i = 0; i < L.value_bytes; i++) {
                int b = (int)qtk_value_bits(s.value);
                int v = ref[i] & ((1 << b) - 1);
                if (s.mode == QTK_MODE_SYMMETRIC && s.value <= QTK_VALUE_Q2S && v >= (1 << (b - 1))) v -= 1 << b;
                ref[i] = (uint8_t)v;
            }
    }
    qtk_dequantize_bytes(ref, L.total_bytes, shape, rank, &s, QTK_DTYPE_F32, yr, n);
    for (int li = 0; li < n_levels; li++) {
        qtk_set_isa(levels[li]);
        const char *lv = qtk_isa_name(levels[li]);
        if (style != 4) {
            st = qtk_quantize_into(x, shape, rank, &s, &o, got, L.total_bytes);
            CHECK_MSG(st == QTK_OK && same_bits(got, ref, L.total_bytes), "%s %s rank %d style %d: quantize bytes differ",
                      spec, lv, rank, style);
        }
        st = qtk_dequantize_bytes(ref, L.total_bytes, shape, rank, &s, QTK_DTYPE_F32, y, n);
        CHECK_MSG(st == QTK_OK && same_bits(y, yr, n * 4), "%s %s rank %d style %d: f32 values differ", spec, lv, rank,
                  style);
        for (int dt = 0; dt < 2; dt++) {
            qtk_dtype d = dt ? QTK_DTYPE_BF16 : QTK_DTYPE_F16;
            qtk_set_isa(QTK_ISA_SCALAR);
            qtk_dequantize_bytes(ref, L.total_bytes, shape, rank, &s, d, hr, n);
            qtk_set_isa(levels[li]);
            st = qtk_dequantize_bytes(ref, L.total_bytes, shape, rank, &s, d, h, n);
            CHECK_MSG(st == QTK_OK && same_bits(h, hr, n * 2), "%s %s: %s values differ", spec, lv, qtk_dtype_name(d));
        }
    }
done:
    qtk_set_isa(QTK_ISA_AUTO);
    free(xb);
    free(ref);
    free(gotb);
    free(yr);
    free(yb);
    free(hr);
    free(hb);
}

static void levels_match_reference(void) {
    init_levels();
    printf("  levels under test:");
    for (int i = 0; i < n_levels; i++) printf(" %s", qtk_isa_name(levels[i]));
    printf("%s\n", n_levels ? "" : " none (this CPU or build has only the reference)");
    uint64_t seed = 77;
    size_t cases = 0;
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        for (int t = 0; t < 14; t++) {
            size_t shape[4];
            int rank = 1 + (int)(trand_u64(&seed) % 3);
            for (int i = 0; i < rank; i++) shape[i] = 1 + trand_u64(&seed) % (i == rank - 1 ? 150 : 9);
            if (t == 0) { /* long rows: full vectors and a tail */
                rank = 2;
                shape[0] = 3;
                shape[1] = 1000 + trand_u64(&seed) % 64;
            }
            run_case(specs[k], shape, rank, &seed, t % 5, (int)(trand_u64(&seed) % 16));
            cases++;
        }
    }
    printf("  %zu cases x %d level(s) x {quantize, f32, f16, bf16}\n", cases, n_levels);
}

/* Same bytes and values for 1, 2, 3 and 5 threads, on shapes large enough to split. */
static void threads_deterministic(void) {
    const char *tspecs[] = {"nvfp4", "q4f,block=32:f16", "q8f", "q4f,store=u32:1,block=8:f16", "q2s,block=4x64:bf16",
                            "q8s,block=*x1:f32", "e4m3,block=32:ue4m3,tensor=f32", "q8s,block=*:f32"};
    size_t shape[2] = {333, 704};
    size_t n = shape[0] * shape[1];
    float *x = malloc(n * sizeof(float)), *y1 = malloc(n * sizeof(float)), *y2 = malloc(n * sizeof(float));
    uint64_t seed = 5;
    fill(x, n, &seed, 0);
    for (size_t k = 0; k < sizeof tspecs / sizeof tspecs[0]; k++) {
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse(tspecs[k], &s));
        qtk_layout L;
        CHECK_OK(qtk_layout_compute(&s, shape, 2, &L));
        for (int cal = 0; cal < 3; cal++) {
            if (cal == 1 && qtk_scheme_is_two_level(&s)) continue;
            uint8_t *b1 = malloc(L.total_bytes), *b2 = malloc(L.total_bytes);
            qtk_quantize_options o = {.calibration = cal == 2 ? QTK_CALIB_MSE : cal ? QTK_CALIB_ABSMEAN : QTK_CALIB_MINMAX,
                                      .threads = 1};
            CHECK_OK(qtk_quantize_into(x, shape, 2, &s, &o, b1, L.total_bytes));
            qtk_set_threads(1);
            CHECK_OK(qtk_dequantize_bytes(b1, L.total_bytes, shape, 2, &s, QTK_DTYPE_F32, y1, n));
            const int counts[] = {2, 3, 5};
            for (int c = 0; c < 3; c++) {
                o.threads = counts[c];
                CHECK_OK(qtk_quantize_into(x, shape, 2, &s, &o, b2, L.total_bytes));
                CHECK_MSG(same_bits(b1, b2, L.total_bytes), "%s cal %d: %d threads give other bytes", tspecs[k], cal,
                          counts[c]);
                qtk_set_threads(counts[c]);
                CHECK_OK(qtk_dequantize_bytes(b1, L.total_bytes, shape, 2, &s, QTK_DTYPE_F32, y2, n));
                CHECK_MSG(same_bits(y1, y2, n * 4), "%s: %d threads give other values", tspecs[k], counts[c]);
            }
            free(b1);
            free(b2);
        }
    }
    qtk_set_threads(0);
    free(x);
    free(y1);
    free(y2);
}

/* Calibration mse (and fitted tables): every level writes the reference's bytes, with and
 * without importance weights, on partial blocks, N-D blocks, long groups and tails. */
static const char *const mse_specs[] = {
    "q4f,block=32:f16", "q4s,block=16:bf16", "q8f,block=32:f16", "q8s,block=7:f32", "q2f,block=12:f16",
    "q2s,block=32:f16", "e4m3,block=32:f16", "e5m2,block=9:f16", "e2m1,block=16:ue4m3", "mxfp4", "mxfp8",
    "nvfp4", "nf4", "q4f,table=iq4nl,block=32:f16", "q2f,table=t2x,block=8:f16", "q8f,table=t8x,block=16:f32",
    "q4f,table=fit,block=32:f16", "q2s,table=fit,block=8:bf16", "q4s,block=64:f16,tensor=f32", "q4f,block=4x8:f16",
    "q8s,block=*:f32", "q4s", "e2m1,block=300:f16", "q4f,block=3:ue8m0", "e2m1,block=5:ue4m3,tensor=f32",
    "q4f,store=u32:1,block=8:f16", "e4m3,block=16:ue4m3",
};

static void mse_levels_match_reference(void) {
    init_levels();
    uint64_t seed = 99;
    size_t cases = 0;
    for (size_t k = 0; k < sizeof mse_specs / sizeof mse_specs[0]; k++) {
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse(mse_specs[k], &s));
        for (int t = 0; t < 8; t++) {
            size_t shape[3];
            int rank = 1 + (int)(trand_u64(&seed) % 3);
            for (int i = 0; i < rank; i++) shape[i] = 1 + trand_u64(&seed) % (i == rank - 1 ? 400 : 7);
            if (t == 0) {
                rank = 2;
                shape[0] = 5;
                shape[1] = 700 + trand_u64(&seed) % 64;
            }
            qtk_layout L;
            if (qtk_layout_compute(&s, shape, rank, &L) != QTK_OK) continue;
            size_t n = L.numel, cols = rank ? shape[rank - 1] : 1;
            float *x = malloc((n + 1) * sizeof(float)), *w = malloc((n + 1) * sizeof(float));
            fill(x, n, &seed, t % 3);
            if (t == 7) /* tiny blocks among large ones: the two-level global search */
                for (size_t i = 0; i < n; i++) x[i] *= i % 97 < 40 ? 1e-7f : 1.0f;
            int wmode = t % 3; /* none, per element, per column */
            size_t nw = wmode == 0 ? 0 : wmode == 1 ? n : cols;
            for (size_t i = 0; i < nw; i++) w[i] = trand_u64(&seed) % 7 == 0 ? 0.0f : trand_uniform(&seed, 0, 2);
            qtk_quantize_options o = {.calibration = QTK_CALIB_MSE, .weights = nw ? w : NULL, .n_weights = nw, .threads = 1};
            uint8_t *ref = malloc(L.total_bytes + 1), *got = malloc(L.total_bytes + 1);
            qtk_set_isa(QTK_ISA_SCALAR);
            qtk_status st = qtk_quantize_into(x, shape, rank, &s, &o, ref, L.total_bytes);
            CHECK_MSG(st == QTK_OK, "%s: scalar mse: %s", mse_specs[k], qtk_last_error());
            for (int li = 0; st == QTK_OK && li < n_levels; li++) {
                qtk_set_isa(levels[li]);
                for (int th = 1; th <= 3; th += 2) {
                    o.threads = th;
                    qtk_status st2 = qtk_quantize_into(x, shape, rank, &s, &o, got, L.total_bytes);
                    CHECK_MSG(st2 == QTK_OK && same_bits(got, ref, L.total_bytes),
                              "%s %s rank %d t %d threads %d: mse bytes differ from the reference", mse_specs[k],
                              qtk_isa_name(levels[li]), rank, t, th);
                }
                o.threads = 1;
            }
            qtk_set_isa(QTK_ISA_AUTO);
            cases++;
            free(x);
            free(w);
            free(ref);
            free(got);
        }
    }
    printf("  %zu mse cases x %d level(s) x 2 thread counts\n", cases, n_levels);
}

/* The caller's floating-point mode must not change qtk's bits. */
static void caller_fp_mode_ignored(void) {
    size_t shape[2] = {8, 64}, n = 512;
    float x[512];
    uint64_t seed = 9;
    fill(x, n, &seed, 2);
    for (size_t i = 0; i < n; i += 7) x[i] = 3e-39f * (float)(i % 5); /* subnormal inputs */
    const char *fspecs[] = {"e4m3,block=16:f16", "q8s,block=*:f32", "e5m2", "nvfp4"};
    for (size_t k = 0; k < 4; k++) {
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse(fspecs[k], &s));
        qtk_layout L;
        CHECK_OK(qtk_layout_compute(&s, shape, 2, &L));
        uint8_t *a = malloc(L.total_bytes), *b = malloc(L.total_bytes);
        float ya[512], yb[512];
        CHECK_OK(qtk_quantize_into(x, shape, 2, &s, NULL, a, L.total_bytes));
        CHECK_OK(qtk_dequantize_bytes(a, L.total_bytes, shape, 2, &s, QTK_DTYPE_F32, ya, n));
#if defined(__SSE__)
        unsigned csr = _mm_getcsr();
        _mm_setcsr(csr | 0x8040u); /* FTZ | DAZ */
#endif
        fesetround(FE_UPWARD);
        CHECK_OK(qtk_quantize_into(x, shape, 2, &s, NULL, b, L.total_bytes));
        CHECK_OK(qtk_dequantize_bytes(a, L.total_bytes, shape, 2, &s, QTK_DTYPE_F32, yb, n));
        CHECK(fegetround() == FE_UPWARD); /* the caller's mode is back */
        fesetround(FE_TONEAREST);
#if defined(__SSE__)
        CHECK((_mm_getcsr() & 0x8040u) == 0x8040u);
        _mm_setcsr(csr);
#endif
        CHECK_MSG(same_bits(a, b, L.total_bytes), "%s: bytes depend on the caller's FP mode", fspecs[k]);
        CHECK_MSG(same_bits(ya, yb, sizeof ya), "%s: values depend on the caller's FP mode", fspecs[k]);
        free(a);
        free(b);
    }
}

static void isa_api(void) {
    if (!getenv("QTK_ISA")) CHECK(qtk_get_isa() == qtk_detect_isa()); /* no override: the best level */
    CHECK_OK(qtk_set_isa(QTK_ISA_SCALAR));
    CHECK(qtk_get_isa() == QTK_ISA_SCALAR);
    CHECK_OK(qtk_set_isa(QTK_ISA_AUTO));
    CHECK(qtk_get_isa() == qtk_detect_isa());
    CHECK_ERR(qtk_set_isa((qtk_isa)9), QTK_E_ARG, "not a qtk_isa");
    if (qtk_detect_isa() < QTK_ISA_AVX512) CHECK_ERR(qtk_set_isa(QTK_ISA_AVX512), QTK_E_UNSUPPORTED, "avx512");
    CHECK(strcmp(qtk_isa_name(QTK_ISA_AVX2), "avx2") == 0);
    const char *env = getenv("QTK_ISA");
    if (env && strcmp(env, "scalar") == 0) CHECK(qtk_detect_isa() >= QTK_ISA_SCALAR);
}

/* Lookup fields are the entry nearest x / e exactly: a quotient far below the entries' scale
 * (2^-143 against +-0.5) is not a tie, although |q - 0.5| and |q + 0.5| are the same double.
 * Every level gives the nearest entry; exactly 0 is a tie (the lower index). Found by
 * fuzz_tensor: the reference compared distances in double and took -0.5. */
static void lookup_tiny_quotients(void) {
    static const float t[4] = {-1.5f, -0.5f, 0.5f, 1.5f};
    CHECK_OK(qtk_table_register("tiny-q", t, 4));
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("q2f,table=tiny-q,block=8:f32,store=native", &s));
    const float tiny = ldexpf(1.59f, -143);
    const float x[8] = {tiny, -tiny, 0.0f, -0.0f, ldexpf(1.0f, -149), 0.2f, -0.2f, 1.0f};
    const uint8_t want[8] = {2, 1, 1, 1, 2, 2, 1, 2};
    float scale = 1.0f; /* given, so the quotient is x itself */
    qtk_quantize_options o = {.scales = &scale, .n_scales = 1};
    size_t shape[1] = {8};
    init_levels();
    qtk_isa all[5] = {QTK_ISA_SCALAR};
    memcpy(all + 1, levels, (size_t)n_levels * sizeof *levels);
    for (int l = 0; l < n_levels + 1; l++) {
        CHECK_OK(qtk_set_isa(all[l]));
        qtk_tensor *q = NULL;
        CHECK_OK(qtk_quantize(x, shape, 1, &s, &o, &q));
        const uint8_t *b = q ? qtk_tensor_bytes(q, NULL) : NULL;
        for (int i = 0; b && i < 8; i++)
            CHECK_MSG(b[i] == want[i], "%s: x[%d] = %a: code %u, want %u", qtk_isa_name(all[l]), i, (double)x[i], b[i],
                      want[i]);
        qtk_tensor_free(q);
    }
    CHECK_OK(qtk_set_isa(QTK_ISA_AUTO));
}

/* Tables of more than 16 entries find the nearest entry by bisection over their distinct
 * entries: the same index as the scan (exact distances, lowest index on a tie) on random
 * unsorted tables with repeated entries and both zeros, for the entries themselves, their
 * exact midpoints and the floats next to them, random values and values beyond the range. */
static void lookup_bisection_matches_scan(void) {
    static float t[256];
    for (int i = 0; i < 256; i++) t[i] = (float)(i - 128);
    CHECK_OK(qtk_table_register("bisect256", t, 256));
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("q8f,table=bisect256,block=8:f32", &s));
    size_t shape[1] = {8};
    static qtk__plan p;
    uint64_t seed = 77;
    size_t checked = 0, mism = 0;
    for (int trial = 0; trial < 60; trial++) {
        for (int i = 0; i < 256; i++) {
            uint64_t r = trand_u64(&seed);
            int pool = trial % 3 == 0 ? 40 : trial % 3 == 1 ? 256 : 7; /* many, some, few repeats */
            t[i] = (float)((int)(r % (uint64_t)pool) - pool / 2) * (trial % 2 ? 0.37f : 1.0f);
            if (r % 97 == 0) t[i] = -0.0f;
            if (trial >= 50) t[i] = ldexpf((float)((int)(r % 11) - 5), (int)((r >> 8) % 40) - 20); /* wide range */
        }
        CHECK_OK(qtk__plan_init(&p, &s, shape, 1, t));
        CHECK(p.n_sorted > 0);
        float qs[4 * 256 + 8];
        size_t nq = 0;
        for (int i = 0; i < 256; i++) {
            float a = t[i], b = t[(i * 7 + 3) % 256];
            float m = (float)(((double)a + (double)b) / 2);
            qs[nq++] = a;
            qs[nq++] = m;
            qs[nq++] = nextafterf(m, INFINITY);
            qs[nq++] = nextafterf(m, -INFINITY);
        }
        qs[nq++] = 1e30f, qs[nq++] = -1e30f, qs[nq++] = 0.0f, qs[nq++] = -0.0f;
        qs[nq++] = p.tmin, qs[nq++] = p.tmax, qs[nq++] = nextafterf(p.tmin, 0), qs[nq++] = nextafterf(p.tmax, 0);
        for (size_t k = 0; k < nq; k++) {
            float qc = qs[k] < p.tmin ? p.tmin : qs[k] > p.tmax ? p.tmax : qs[k];
            uint32_t a = qtk__lookup_nearest(&p, qs[k]), b = qtk__lookup_scan(&p, qc);
            if (a != b && mism++ < 5)
                CHECK_MSG(false, "trial %d: q = %a: bisection gives %u (%a), the scan %u (%a)", trial, (double)qs[k], a,
                          (double)t[a], b, (double)t[b]);
            checked++;
        }
    }
    CHECK(mism == 0);
    CHECK(checked > 60000);
}

TEST_MAIN("simd", T(isa_api), T(levels_match_reference), T(mse_levels_match_reference), T(threads_deterministic),
          T(caller_fp_mode_ignored),
          T(lookup_tiny_quotients), T(lookup_bisection_matches_scan))
