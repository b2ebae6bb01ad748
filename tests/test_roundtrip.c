/* test_roundtrip.c — the matrix: every value x mode x store (every pack dim) x level x
 * scale dtype, on shapes of rank 0..8 with odd extents. For each case:
 *   - quantize gives exactly the oracle's bytes (tests/oracle.c, an independent naive
 *     implementation of SPEC);
 *   - bytes -> tensor -> bytes is the identity;
 *   - dequantize gives exactly the oracle's values, and to f16/bf16 their RNE;
 *   - every element's error is within half a step of its effective scale (integers), half
 *     the minifloat's spacing at that value, or the lookup table's nearest-entry distance.
 * Calibrated (minmax, absmean) and caller-given scales, including negative ones. */
#include "oracle.h"
#include "test.h"

typedef struct {
    size_t shape[8];
    int rank;
} shape_t;

static const shape_t shapes[] = {
    {{0}, 0},
    {{1}, 1},
    {{7}, 1},
    {{33}, 1},
    {{3, 3}, 2},
    {{5, 17}, 2},
    {{4, 64}, 2},
    {{16, 16}, 2},
    {{0, 4}, 2},
    {{2, 5, 9}, 3},
    {{3, 1, 8}, 3},
    {{2, 3, 4, 5}, 4},
    {{2, 1, 3, 1, 2}, 5},
    {{1, 2, 1, 2, 1, 3}, 6},
    {{2, 1, 2, 1, 2, 1, 3}, 7},
    {{1, 2, 1, 1, 2, 1, 1, 5}, 8},
};

static const char *const block_variants[] = {"4", "3", "1", "64", "*", "2x3", "*x1", "2x1x3", "1x2x1x2x3", "2x2x2x2x2"};
static int block_rank_of(const char *b) {
    int r = 1;
    for (; *b; b++) r += *b == 'x';
    return r;
}

static const qtk_dtype scale_dtypes[] = {QTK_DTYPE_F32, QTK_DTYPE_F16, QTK_DTYPE_BF16, QTK_DTYPE_UE8M0, QTK_DTYPE_UE4M3};

static long n_cases, n_given, n_absmean;

static void register_tables(void) {
    const float t2[4] = {-1.5f, -0.25f, 0.5f, 1.5f};
    float t8[256];
    for (int i = 0; i < 256; i++) t8[i] = (float)((i - 128) * abs(i - 128)) / 64.0f + (i % 7 == 0 ? 0.125f : 0.0f);
    CHECK_OK(qtk_table_register("t2", t2, 4));
    CHECK_OK(qtk_table_register("t8", t8, 256));
}

static const char *table_for_bits(unsigned bits, int variant) {
    return bits == 2 ? "t2" : bits == 8 ? "t8" : variant % 2 ? "iq4nl" : "nf4";
}

/* Spacing of a minifloat format at magnitude a (in units, before scaling). */
static double mf_spacing(qtk_value v, double a) {
    int M = v == QTK_VALUE_E4M3 ? 3 : v == QTK_VALUE_E5M2 ? 2 : 1;
    int bias = v == QTK_VALUE_E4M3 ? 7 : v == QTK_VALUE_E5M2 ? 15 : 1;
    int emin = 1 - bias;
    int k = a > 0 ? (int)floor(log2(a)) : emin;
    if (k < emin) k = emin;
    return ldexp(1.0, k - M);
}

static void fill_input(float *x, size_t n, uint64_t *seed, const qtk_scheme *s, int structured) {
    float mag = ldexpf(1.0f, (int)(trand_u64(seed) % 20) - 10);
    for (size_t i = 0; i < n; i++) {
        int k = (int)(trand_u64(seed) % 16);
        if (k == 0) x[i] = 0.0f;
        else if (k == 1) x[i] = -0.0f;
        else if (k == 2) x[i] = 1e-40f * (float)((int)(trand_u64(seed) % 5) - 2); /* f32 subnormals */
        else x[i] = trand_normal(seed) * mag * (k == 3 ? 40.0f : 1.0f);
    }
    if (structured && n > 1) {
        /* element 0 fixes alpha so that the scale is a power of two; the rest sit on
         * rounding midpoints of the value grid. */
        float half = s->value <= QTK_VALUE_Q2S ? (s->value == QTK_VALUE_Q8F ? 127.5f : s->value == QTK_VALUE_Q8S ? 127.0f
                                                   : s->value == QTK_VALUE_Q4F ? 7.5f : s->value == QTK_VALUE_Q4S ? 7.0f
                                                   : s->value == QTK_VALUE_Q2F ? 1.5f : 1.0f)
                                               : qtk_value_max(s->value);
        float sc = ldexpf(1.0f, (int)(trand_u64(seed) % 8) - 4);
        x[0] = half * sc;
        for (size_t i = 1; i < n; i++) {
            if (s->value <= QTK_VALUE_Q2S) {
                int lim = (int)half;
                x[i] = ((float)((int)(trand_u64(seed) % (unsigned)(2 * lim + 1)) - lim) + (trand_u64(seed) % 2 ? 0.5f : -0.5f)) * sc;
            } else {
                qtk_dtype f = s->value == QTK_VALUE_E4M3 ? QTK_DTYPE_E4M3 : s->value == QTK_VALUE_E5M2 ? QTK_DTYPE_E5M2 : QTK_DTYPE_E2M1;
                uint32_t nm = f == QTK_DTYPE_E2M1 ? 7 : f == QTK_DTYPE_E4M3 ? 126 : 123;
                uint32_t c = (uint32_t)(trand_u64(seed) % nm);
                double a = oracle_decode(f, c), b = oracle_decode(f, c + 1);
                x[i] = (float)((a + b) / 2) * sc * (trand_u64(seed) % 2 ? -1.0f : 1.0f);
            }
        }
    }
}

static void run_case(const qtk_scheme *s, const shape_t *sh, uint64_t *seed, int mode) {
    /* mode 0: minmax; 1: absmean; 2: given scales; 3: structured midpoints (per-tensor) */
    char spec[256];
    qtk_scheme_format(s, spec, sizeof spec, NULL);
    int ok;
    size_t len = oracle_length(s, sh->shape, sh->rank, &ok);
    qtk_layout L;
    qtk_status st = qtk_layout_compute(s, sh->shape, sh->rank, &L);
    if (!ok) {
        CHECK_MSG(st != QTK_OK, "%s on rank %d: the library accepts a shape the oracle rejects", spec, sh->rank);
        return;
    }
    CHECK_MSG(st == QTK_OK && L.total_bytes == len, "%s rank %d: layout %s / %zu vs oracle %zu", spec, sh->rank,
              qtk_last_error(), L.total_bytes, len);
    if (st) return;
    if (L.n_scales > 4096) return;
    size_t n = L.numel;
    float *x = malloc((n + 1) * sizeof(float)), *y = malloc((n + 1) * sizeof(float)),
          *yo = malloc((n + 1) * sizeof(float)), *eff = malloc((n + 1) * sizeof(float));
    uint16_t *h = malloc((n + 1) * sizeof(uint16_t));
    uint8_t *want = malloc(len + 1), *got = malloc(len + 1);
    fill_input(x, n, seed, s, mode == 3);
    qtk_quantize_options o = {0};
    float *given = NULL, gglobal = 1.0f;
    if (mode == 1) o.calibration = QTK_CALIB_ABSMEAN;
    if (mode == 2) {
        given = malloc((L.n_scales + 1) * sizeof(float));
        int unsig = L.scale_dtype == QTK_DTYPE_UE8M0 || L.scale_dtype == QTK_DTYPE_UE4M3;
        for (size_t i = 0; i < L.n_scales; i++) {
            float v = ldexpf(trand_uniform(seed, 0.5f, 1.0f), (int)(trand_u64(seed) % 12) - 8);
            int k = (int)(trand_u64(seed) % 8);
            if (k == 0) v = 0.0f;
            if (k == 1 && !unsig) v = -v;
            given[i] = v;
        }
        o.scales = given;
        o.n_scales = L.n_scales;
        if (qtk_scheme_is_two_level(s)) {
            gglobal = trand_uniform(seed, 0.001f, 2.0f);
            o.global = &gglobal;
        }
        n_given++;
    }
    int orc = oracle_quantize(x, sh->shape, sh->rank, s, mode == 1, given, o.global, want);
    st = qtk_quantize_into(x, sh->shape, sh->rank, s, &o, got, len);
    if (orc != 0) {
        CHECK_MSG(st != QTK_OK, "%s: oracle refused, library accepted", spec);
        goto done;
    }
    if (mode == 1) n_absmean++;
    CHECK_MSG(st == QTK_OK, "%s rank %d mode %d: %s", spec, sh->rank, mode, qtk_last_error());
    if (st) goto done;
    n_cases++;
    size_t first = len;
    for (size_t i = 0; i < len; i++)
        if (got[i] != want[i]) {
            first = i;
            break;
        }
    CHECK_MSG(first == len, "%s rank %d mode %d: byte %zu is 0x%02x, oracle 0x%02x (values %zu, scales at %zu)", spec,
              sh->rank, mode, first, first < len ? got[first] : 0, first < len ? want[first] : 0, L.value_bytes,
              L.scales_offset);
    /* bytes -> tensor -> bytes */
    qtk_tensor *t = NULL;
    st = qtk_tensor_from_bytes(got, len, sh->shape, sh->rank, s, &t);
    CHECK_MSG(st == QTK_OK, "%s: from_bytes: %s", spec, qtk_last_error());
    if (st) goto done;
    size_t blen;
    const uint8_t *back = qtk_tensor_bytes(t, &blen);
    CHECK_MSG(blen == len && memcmp(back, got, len) == 0, "%s: bytes -> tensor -> bytes differs", spec);
    /* dequantize */
    CHECK_OK(qtk_dequantize(t, QTK_DTYPE_F32, y, n));
    oracle_dequantize(got, sh->shape, sh->rank, s, yo);
    oracle_effective_scales(got, sh->shape, sh->rank, s, eff);
    for (size_t i = 0; i < n; i++) {
        uint32_t a, b;
        memcpy(&a, &y[i], 4);
        memcpy(&b, &yo[i], 4);
        if (a != b) {
            CHECK_MSG(0, "%s: element %zu dequantizes to %.9g, oracle %.9g", spec, i, (double)y[i], (double)yo[i]);
            break;
        }
    }
    test_checks++;
    CHECK_OK(qtk_dequantize(t, QTK_DTYPE_F16, h, n));
    for (size_t i = 0; i < n; i++)
        if (h[i] != qtk_fmt_encode(QTK_DTYPE_F16, y[i])) {
            CHECK_MSG(0, "%s: f16 output %zu", spec, i);
            break;
        }
    CHECK_OK(qtk_dequantize(t, QTK_DTYPE_BF16, h, n));
    for (size_t i = 0; i < n; i++)
        if (h[i] != qtk_fmt_encode(QTK_DTYPE_BF16, y[i])) {
            CHECK_MSG(0, "%s: bf16 output %zu", spec, i);
            break;
        }
    /* the error bound, for minmax calibration (absmean and given scales clip on purpose) */
    if (mode == 0 || mode == 3) {
        float tab[256];
        size_t tn = 0;
        double maxgap = 0, tmin = 0, tmax = 0;
        if (s->mode == QTK_MODE_LOOKUP) {
            qtk_table_get(s->table, tab, 256, &tn);
            float srt[256];
            memcpy(srt, tab, tn * sizeof(float));
            for (size_t i = 1; i < tn; i++)
                for (size_t j = i; j > 0 && srt[j - 1] > srt[j]; j--) {
                    float tmp = srt[j];
                    srt[j] = srt[j - 1];
                    srt[j - 1] = tmp;
                }
            for (size_t i = 1; i < tn; i++)
                if (srt[i] - srt[i - 1] > maxgap) maxgap = srt[i] - srt[i - 1];
            tmin = srt[0];
            tmax = srt[tn - 1];
        }
        for (size_t i = 0; i < n; i++) {
            double e = fabs((double)eff[i]), err = fabs((double)x[i] - (double)y[i]), bound;
            /* a scale saturated at its dtype's largest value clips by design (SPEC §2 step 4) */
            if (!qtk_scheme_is_two_level(s) && e == (double)qtk_fmt_max(L.scale_dtype)) continue;
            if (e == 0) {
                bound = fabs((double)x[i]) + (s->mode == QTK_MODE_LOOKUP ? 0 : 0);
            } else if (s->mode == QTK_MODE_LOOKUP) {
                double q = (double)x[i] / e, over = q > tmax ? q - tmax : q < tmin ? tmin - q : 0;
                bound = e * (maxgap / 2 > over ? maxgap / 2 : over);
            } else if (s->value <= QTK_VALUE_Q2S) {
                bound = 0.5 * e;
            } else {
                double q = fabs((double)x[i]) / e;
                double mx = qtk_value_max(s->value);
                bound = 0.5 * e * mf_spacing(s->value, q < mx ? q : mx);
            }
            bound = bound * (1 + 1e-5) + fabs((double)x[i]) * 0x1p-21 + 1e-37;
            if (err > bound) {
                CHECK_MSG(0, "%s mode %d: element %zu error %.3g exceeds the bound %.3g (x %.9g, y %.9g, scale %.9g)", spec,
                          mode, i, err, bound, (double)x[i], (double)y[i], e);
                break;
            }
        }
        test_checks++;
    }
    qtk_tensor_free(t);
done:
    free(x);
    free(y);
    free(yo);
    free(eff);
    free(h);
    free(want);
    free(got);
    free(given);
}

static void matrix(void) {
    register_tables();
    uint64_t seed = 2026;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const shape_t *sh = &shapes[si];
        int erank = sh->rank ? sh->rank : 1;
        for (int v = 0; v <= QTK_VALUE_E2M1; v++) {
            for (int lookup = 0; lookup < 2; lookup++) {
                /* stores: native, then packed and u32 along each dim (at most 3) */
                int nstores = 1 + 2 * (erank < 3 ? erank : 3);
                for (int st = 0; st < nstores; st++) {
                    /* levels: 0 none, 1..4 tensor=dt, 5.. blocks, last two: two-level */
                    int nblk = (int)(sizeof block_variants / sizeof block_variants[0]);
                    for (int lv = 0; lv < 5 + nblk + 2; lv++) {
                        qtk_scheme s;
                        memset(&s, 0, sizeof s);
                        s.value = (qtk_value)v;
                        if (lookup) {
                            s.mode = QTK_MODE_LOOKUP;
                            snprintf(s.table, sizeof s.table, "%s", table_for_bits(qtk_value_bits(s.value), lv));
                        }
                        if (st == 0) s.store = QTK_STORE_NATIVE;
                        else {
                            s.store = (st % 2) ? QTK_STORE_PACKED : QTK_STORE_U32;
                            s.pack_dim = (uint8_t)((st - 1) / 2);
                        }
                        const char *blk = NULL;
                        if (lv >= 1 && lv <= 4) s.tensor_dtype = scale_dtypes[lv];
                        else if (lv >= 5 && lv < 5 + nblk) blk = block_variants[lv - 5];
                        else if (lv >= 5 + nblk) blk = lv == 5 + nblk ? "4" : "2x3";
                        if (blk) {
                            if (block_rank_of(blk) > sh->rank) continue;
                            char spec[64];
                            snprintf(spec, sizeof spec, "q8f,block=%s:f32", blk);
                            qtk_scheme tmp;
                            CHECK_OK(qtk_scheme_parse(spec, &tmp));
                            s.block_rank = tmp.block_rank;
                            memcpy(s.block, tmp.block, sizeof s.block);
                            s.block_dtype = scale_dtypes[(lv + v) % 5];
                            if (lv >= 5 + nblk) {
                                s.block_dtype = lv == 5 + nblk ? QTK_DTYPE_UE4M3 : QTK_DTYPE_F16;
                                s.tensor_dtype = QTK_DTYPE_F32;
                            }
                        }
                        CHECK_OK(qtk_scheme_validate(&s));
                        int two = qtk_scheme_is_two_level(&s);
                        run_case(&s, sh, &seed, 0);
                        if (!two && (lv + st) % 3 == 0) run_case(&s, sh, &seed, 1);
                        if ((lv + st + v) % 2 == 0) run_case(&s, sh, &seed, 2);
                        if (!blk && !lookup) run_case(&s, sh, &seed, 3);
                    }
                }
            }
        }
    }
    printf("  matrix: %ld quantize cases checked against the oracle (%ld with given scales, %ld absmean)\n", n_cases,
           n_given, n_absmean);
    CHECK(n_cases > 10000);
}

/* Larger tensors, where rows of one block span several rows and slabs. */
static void larger_tensors(void) {
    uint64_t seed = 99;
    const char *specs[] = {"nvfp4", "mxfp4", "mxfp8", "nf4", "q4f,block=32:f16", "q8s,block=*:f32", "q2s,block=4x8:bf16",
                           "q4s,block=16x16:ue4m3,tensor=f32,store=u32:1", "e5m2,block=3x5:f16,store=packed:1"};
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse(specs[k], &s));
        shape_t sh = {{48, 130}, 2};
        run_case(&s, &sh, &seed, 0);
        shape_t sh3 = {{3, 17, 64}, 3};
        run_case(&s, &sh3, &seed, 0);
    }
}

/* Block extents at the top of the range. */
static void big_blocks(void) {
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("q8s,block=65535:f32,store=native", &s));
    size_t n = 70000, shape[1] = {70000};
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = (float)(i % 1000) - 500.0f;
    x[65534] = 1000.0f;  /* block 0 */
    x[65535] = -10.0f;   /* block 1's first */
    x[69999] = 20.0f;
    qtk_tensor *t = NULL;
    CHECK_OK(qtk_quantize(x, shape, 1, &s, NULL, &t));
    float sc[2];
    CHECK_OK(qtk_tensor_scales(t, sc, 2));
    CHECK_BITS(sc[0], 1000.0f / 127.0f);
    CHECK_BITS(sc[1], 500.0f / 127.0f);
    qtk_tensor_free(t);
    free(x);
}

TEST_MAIN("roundtrip", T(matrix), T(larger_tensors), T(big_blocks))
