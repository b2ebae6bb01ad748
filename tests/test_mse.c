/* test_mse.c — calibration mse, importance weights and fitted tables (docs/quantizers.md):
 *   - on every group of every scheme family mse's (weighted) error is never above minmax's;
 *   - its bytes are SPEC's layout: they pass the byte checks, and the independent oracle
 *     quantizing with mse's stored scales gives the very same bytes (the fields are the
 *     nearest ones under the stored scale);
 *   - the searches find what they claim: the optimal ternary scale, the better of the two
 *     MX exponents;
 *   - weights move the choice the right way (a heavily weighted element's error shrinks),
 *     per-column weights equal their per-element expansion, all-zero weights keep minmax;
 *   - table=fit is deterministic (any thread count), travels in the bytes, beats nf4 on
 *     Gaussian data, registers nothing; every misuse is refused with a message. */
#include "oracle.h"
#include "test.h"

#include <stdbool.h>

/* ---- helpers ---- */

typedef struct {
    float *x, *y;
    size_t rows, cols;
} mat;

/* data styles: 0 Gaussian, 1 heavy tails, 2 uniform with an outlier per row, 3 some groups
 * all zero, 4 tiny (1e-30), 5 huge (1e30), 6 small integers (exactly on grids) */
static void fill(float *x, size_t n, size_t cols, int style, uint64_t *seed) {
    for (size_t i = 0; i < n; i++) {
        float v = trand_normal(seed);
        switch (style) {
        case 1: {
            float d = trand_normal(seed);
            v = v / (0.25f + fabsf(d));
            if (i % cols % 37 == 5) v *= 20.0f;
            break;
        }
        case 2: v = trand_uniform(seed, -1, 1) * (i % cols == 3 ? 50.0f : 1.0f); break;
        case 3: v = (i / 16) % 3 == 0 ? 0.0f : v; break;
        case 4: v *= 1e-30f; break;
        case 5: v *= 1e30f; break;
        case 6: v = (float)((int)(trand_u64(seed) % 15) - 7); break;
        default: break;
        }
        x[i] = v;
    }
}

/* weighted squared error per scale group of a rank-2 tensor (layout L) */
static void group_errors(const qtk_layout *L, const float *x, const float *y, const float *w, bool per_col,
                         double *err) {
    memset(err, 0, L->n_scales * sizeof(double));
    size_t R = L->shape[0], C = L->shape[1];
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < C; c++) {
            size_t g = (r / L->block[0]) * L->grid[1] + c / L->block[1];
            double d = (double)x[r * C + c] - (double)y[r * C + c];
            double wt = w ? (double)w[per_col ? c : r * C + c] : 1.0;
            err[g] += wt * d * d;
        }
}

static int quantize(const float *x, const size_t *shape, const char *spec, qtk_calibration cal, const float *w,
                    size_t nw, int threads, qtk_tensor **t) {
    qtk_scheme s;
    if (qtk_scheme_parse(spec, &s) != QTK_OK) return -1;
    qtk_quantize_options o = {.calibration = cal, .weights = w, .n_weights = nw, .threads = threads};
    return qtk_quantize(x, shape, 2, &s, &o, t) == QTK_OK ? 0 : -1;
}

static void dequant(const qtk_tensor *t, float *y) {
    const qtk_layout *L = qtk_tensor_layout(t);
    CHECK_OK(qtk_dequantize(t, QTK_DTYPE_F32, y, L->numel));
}

static const char *const family_specs[] = {
    "q8f,block=32:f16",   "q8s,block=16:bf16",    "q4f,block=32:f16",          "q4s,block=16:f32",
    "q2f,block=32:f16",   "q2s,block=64:f16",     "q2s,block=32:bf16",         "e4m3,block=32:f16",
    "e5m2,block=32:ue8m0", "e2m1,block=16:ue4m3", "mxfp4",                     "mxfp8",
    "nf4",                "q4f,table=iq4nl,block=32:f16", "q2f,table=tmse2,block=8:f16", "q4f,block=4x8:f16",
    "q8s,block=*:f32",    "q4s",                  "q4s,block=64:f16,tensor=f32", "nvfp4",
    "q4f,block=2x3:ue4m3", "e4m3,block=16:ue4m3", "q4s,block=300:f16",         "e2m1,block=*:f16",
    "q8f,table=tmse8,block=16:f32", "q2s",
};

static void register_tables(void) {
    const float t2[4] = {-1.0f, -0.2f, 0.3f, 1.0f};
    float t8[256];
    for (int i = 0; i < 256; i++) t8[i] = (float)(i - 128) / 128.0f + (i % 7) * 1e-4f;
    qtk_table_register("tmse2", t2, 4);
    qtk_table_register("tmse8", t8, 256);
}

/* ---- mse never worse than minmax, group by group ---- */

static void never_worse_than_minmax(void) {
    register_tables();
    uint64_t seed = 11;
    size_t cases = 0;
    for (size_t k = 0; k < sizeof family_specs / sizeof family_specs[0]; k++) {
        for (int style = 0; style < 7; style++) {
            for (int wmode = 0; wmode < 3; wmode++) {
                size_t shape[2] = {6 + trand_u64(&seed) % 5, 40 + trand_u64(&seed) % 600};
                if (strstr(family_specs[k], "300") || strstr(family_specs[k], "*")) shape[1] = 700;
                size_t n = shape[0] * shape[1];
                float *x = malloc(n * sizeof(float)), *ya = malloc(n * sizeof(float)), *yb = malloc(n * sizeof(float));
                float *w = malloc(n * sizeof(float));
                fill(x, n, shape[1], style, &seed);
                size_t nw = wmode == 0 ? 0 : wmode == 1 ? n : shape[1];
                for (size_t i = 0; i < nw; i++) w[i] = trand_u64(&seed) % 5 == 0 ? 0.0f : trand_uniform(&seed, 0, 3);
                qtk_tensor *ta = NULL, *tb = NULL;
                int ra = quantize(x, shape, family_specs[k], QTK_CALIB_MINMAX, NULL, 0, 1, &ta);
                int rb = quantize(x, shape, family_specs[k], QTK_CALIB_MSE, nw ? w : NULL, nw, 1, &tb);
                if (ra != 0) { /* e.g. huge values overflow a two-level effective scale: mse fails too */
                    CHECK_MSG(rb != 0, "%s style %d: minmax failed (%s) but mse did not", family_specs[k], style,
                              qtk_last_error());
                } else {
                    CHECK_MSG(rb == 0, "%s style %d w %d: mse failed: %s", family_specs[k], style, wmode, qtk_last_error());
                }
                if (ra == 0 && rb == 0) {
                    dequant(ta, ya);
                    dequant(tb, yb);
                    const qtk_layout *L = qtk_tensor_layout(ta);
                    double *ea = malloc(L->n_scales * sizeof(double)), *eb = malloc(L->n_scales * sizeof(double));
                    const float *wp = nw ? w : NULL;
                    group_errors(L, x, ya, wp, wmode == 2, ea);
                    group_errors(L, x, yb, wp, wmode == 2, eb);
                    bool same_global = qtk_tensor_global(ta) == qtk_tensor_global(tb);
                    double sa = 0, sb = 0;
                    size_t worse = 0, first = 0;
                    for (size_t g = 0; g < L->n_scales; g++) {
                        sa += ea[g];
                        sb += eb[g];
                        if (same_global && eb[g] > ea[g] && !worse++) first = g;
                    }
                    CHECK_MSG(worse == 0, "%s style %d w %d: mse worse than minmax on %zu groups (first %zu: %.9g > %.9g)",
                              family_specs[k], style, wmode, worse, first, worse ? eb[first] : 0.0,
                              worse ? ea[first] : 0.0);
                    CHECK_MSG(sb <= sa, "%s style %d w %d: total error %.9g > minmax's %.9g", family_specs[k], style,
                              wmode, sb, sa);
                    free(ea);
                    free(eb);
                    cases++;
                }
                qtk_tensor_free(ta);
                qtk_tensor_free(tb);
                free(x);
                free(ya);
                free(yb);
                free(w);
            }
        }
    }
    printf("  %zu cases\n", cases);
}

/* Gaussian data, where the search must actually win somewhere (a test that cannot fail is
 * a defect): mse beats minmax by a clear margin on the 4-bit and 2-bit families. */
static void mse_gains(void) {
    const struct {
        const char *spec;
        double min_db;
    } g[] = {{"q4f,block=32:f16", 1.0}, {"q4s,block=32:f16", 0.5}, {"q2s,block=256:f16", 4.0},
             {"e2m1,block=16:ue4m3", 1.0}, {"nf4", 0.5}, {"mxfp4", 0.15}};
    size_t shape[2] = {32, 1024}, n = 32 * 1024;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    uint64_t seed = 3;
    fill(x, n, 1024, 0, &seed);
    for (size_t k = 0; k < sizeof g / sizeof g[0]; k++) {
        double db[2];
        for (int c = 0; c < 2; c++) {
            qtk_tensor *t = NULL;
            CHECK(quantize(x, shape, g[k].spec, c ? QTK_CALIB_MSE : QTK_CALIB_MINMAX, NULL, 0, 0, &t) == 0);
            dequant(t, y);
            double sx = 0, se = 0;
            for (size_t i = 0; i < n; i++) {
                sx += (double)x[i] * x[i];
                se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
            }
            db[c] = 10 * log10(sx / se);
            qtk_tensor_free(t);
        }
        CHECK_MSG(db[1] >= db[0] + g[k].min_db, "%s: mse %.3f dB vs minmax %.3f dB", g[k].spec, db[1], db[0]);
    }
    free(x);
    free(y);
}

/* ---- the bytes are SPEC's layout ---- */

static void bytes_roundtrip_oracle(void) {
    register_tables();
    uint64_t seed = 21;
    for (size_t k = 0; k < sizeof family_specs / sizeof family_specs[0]; k++) {
        size_t shape[2] = {5, 96 + trand_u64(&seed) % 200};
        if (strstr(family_specs[k], "300") || strstr(family_specs[k], "*")) shape[1] = 620;
        size_t n = shape[0] * shape[1];
        float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *y2 = malloc(n * sizeof(float));
        float *w = malloc(n * sizeof(float));
        fill(x, n, shape[1], (int)(k % 3), &seed);
        for (size_t i = 0; i < n; i++) w[i] = trand_uniform(&seed, 0, 2);
        qtk_tensor *t = NULL;
        CHECK(quantize(x, shape, family_specs[k], QTK_CALIB_MSE, w, n, 0, &t) == 0);
        if (!t) continue;
        size_t len;
        const uint8_t *b = qtk_tensor_bytes(t, &len);
        const qtk_scheme *s = qtk_tensor_scheme(t);
        CHECK_OK(qtk_bytes_check(b, len, shape, 2, s));
        dequant(t, y);
        CHECK_OK(qtk_dequantize_bytes(b, len, shape, 2, s, QTK_DTYPE_F32, y2, n));
        CHECK(memcmp(y, y2, n * 4) == 0);
        /* the oracle, quantizing with the stored scales, writes the same bytes */
        const qtk_layout *L = qtk_tensor_layout(t);
        float *sc = malloc(L->n_scales * sizeof(float));
        CHECK_OK(qtk_tensor_scales(t, sc, L->n_scales));
        float g = qtk_tensor_global(t);
        int ok = 1;
        size_t olen = oracle_length(s, shape, 2, &ok);
        uint8_t *ob = malloc(olen ? olen : 1);
        CHECK(ok && olen == len);
        CHECK_MSG(oracle_quantize(x, shape, 2, s, 0, sc, qtk_scheme_is_two_level(s) ? &g : NULL, ob) == 0,
                  "%s: the oracle refused mse's scales", family_specs[k]);
        CHECK_MSG(memcmp(ob, b, len) == 0, "%s: mse's fields are not the nearest under its stored scales",
                  family_specs[k]);
        /* and the oracle's dequantizer agrees */
        oracle_dequantize(b, shape, 2, s, y2);
        CHECK_MSG(memcmp(y, y2, n * 4) == 0, "%s: values differ from the oracle's", family_specs[k]);
        free(sc);
        free(ob);
        qtk_tensor_free(t);
        free(x);
        free(y);
        free(y2);
        free(w);
    }
}

/* ---- the searches ---- */

/* Ternary: no scale at all (a dense scan) gives a smaller error than mse's f32 scale. */
static void ternary_optimal(void) {
    uint64_t seed = 5;
    size_t shape[2] = {20, 64}, n = 20 * 64;
    float x[20 * 64], y[20 * 64], w[20 * 64];
    for (int style = 0; style < 3; style++) {
        fill(x, n, 64, style, &seed);
        for (size_t i = 0; i < n; i++) w[i] = style == 2 ? trand_uniform(&seed, 0, 1) : 1.0f;
        qtk_tensor *t = NULL;
        CHECK(quantize(x, shape, "q2s,block=64:f32", QTK_CALIB_MSE, w, n, 1, &t) == 0);
        if (!t) continue;
        dequant(t, y);
        for (size_t r = 0; r < 20; r++) {
            const float *xr = x + r * 64, *wr = w + r * 64;
            double e = 0, amax = 0;
            for (int j = 0; j < 64; j++) {
                e += wr[j] * ((double)xr[j] - y[r * 64 + j]) * ((double)xr[j] - y[r * 64 + j]);
                if (fabs(xr[j]) > amax) amax = fabs(xr[j]);
            }
            double best = INFINITY;
            for (int k = 1; k <= 4000; k++) {
                double s = amax * k / 2000.0, ek = 0;
                for (int j = 0; j < 64; j++) {
                    double q = round(xr[j] / s);
                    q = q > 1 ? 1 : q < -1 ? -1 : q;
                    ek += wr[j] * (xr[j] - q * s) * (xr[j] - q * s);
                }
                if (ek < best) best = ek;
            }
            CHECK_MSG(e <= best * (1 + 1e-6) + 1e-30, "ternary row %zu style %d: mse %.9g, a scanned scale %.9g", r,
                      style, e, best);
        }
        qtk_tensor_free(t);
    }
}

/* MX: the exponent is the better of "rounded up" (minmax) and one below. */
static void mx_exponent_by_error(void) {
    uint64_t seed = 8;
    size_t shape[2] = {16, 256}, n = 16 * 256;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    fill(x, n, 256, 1, &seed);
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("mxfp4", &s));
    qtk_tensor *t = NULL;
    CHECK(quantize(x, shape, "mxfp4", QTK_CALIB_MSE, NULL, 0, 1, &t) == 0);
    qtk_tensor *tm = NULL;
    CHECK(quantize(x, shape, "mxfp4", QTK_CALIB_MINMAX, NULL, 0, 1, &tm) == 0);
    if (t && tm) {
        const qtk_layout *L = qtk_tensor_layout(t);
        size_t ng = L->n_scales;
        float *sm = malloc(ng * 4), *sd = malloc(ng * 4), *smse = malloc(ng * 4);
        qtk_tensor_scales(tm, sm, ng);
        qtk_tensor_scales(t, smse, ng);
        double *e_mse = malloc(ng * 8), *e_up = malloc(ng * 8), *e_dn = malloc(ng * 8);
        dequant(t, y);
        group_errors(L, x, y, NULL, false, e_mse);
        uint8_t *ob = malloc(L->total_bytes);
        for (int d = 0; d < 2; d++) {
            for (size_t g = 0; g < ng; g++) sd[g] = d ? sm[g] / 2 : sm[g];
            CHECK(oracle_quantize(x, shape, 2, &s, 0, sd, NULL, ob) == 0);
            oracle_dequantize(ob, shape, 2, &s, y);
            group_errors(L, x, y, NULL, false, d ? e_dn : e_up);
        }
        size_t down = 0;
        for (size_t g = 0; g < ng; g++) {
            double best = e_up[g] < e_dn[g] ? e_up[g] : e_dn[g];
            CHECK_MSG(e_mse[g] <= best * (1 + 0x1p-11), "group %zu: mse %.9g, best exponent %.9g", g, e_mse[g], best);
            CHECK(smse[g] == sm[g] || smse[g] == sm[g] / 2);
            down += smse[g] != sm[g];
        }
        CHECK_MSG(down > 0 && down < ng, "the exponent went down in %zu of %zu groups", down, ng);
        free(sm);
        free(sd);
        free(smse);
        free(e_mse);
        free(e_up);
        free(e_dn);
        free(ob);
    }
    qtk_tensor_free(t);
    qtk_tensor_free(tm);
    free(x);
    free(y);
}

/* ---- weights ---- */

static void weights_direction(void) {
    /* one group of small values and one outlier: unweighted, the error is spread; with the
     * outlier weighing much more, its own error shrinks */
    size_t shape[2] = {1, 32};
    float x[32], w[32], y[32];
    uint64_t seed = 4;
    for (int j = 0; j < 32; j++) x[j] = 0.1f * trand_normal(&seed);
    x[5] = 0.73f;
    x[9] = 0.52f;
    const char *specs[] = {"q4s,block=32:f32", "q2s,block=32:f16", "e2m1,block=32:f16", "nf4", "e2m1,block=16:ue4m3"};
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        for (int target = 0; target < 32; target += 9) {
            qtk_tensor *tu = NULL, *tw = NULL;
            for (int j = 0; j < 32; j++) w[j] = 1.0f;
            CHECK(quantize(x, shape, specs[k], QTK_CALIB_MSE, NULL, 0, 1, &tu) == 0);
            w[target] = 1e4f;
            CHECK(quantize(x, shape, specs[k], QTK_CALIB_MSE, w, 32, 1, &tw) == 0);
            if (!tu || !tw) continue;
            dequant(tu, y);
            double eu = fabs((double)x[target] - y[target]);
            double tot_u = 0;
            for (int j = 0; j < 32; j++) tot_u += ((double)x[j] - y[j]) * ((double)x[j] - y[j]);
            dequant(tw, y);
            double ew = fabs((double)x[target] - y[target]);
            double tot_w = 0;
            for (int j = 0; j < 32; j++) tot_w += ((double)x[j] - y[j]) * ((double)x[j] - y[j]);
            CHECK_MSG(ew <= eu, "%s: element %d weighted x1e4 has error %.9g > %.9g unweighted", specs[k], target, ew,
                      eu);
            /* the unweighted choice is the better one for the unweighted error */
            CHECK_MSG(tot_u <= tot_w * (1 + 1e-6), "%s: unweighted error %.9g > %.9g", specs[k], tot_u, tot_w);
            qtk_tensor_free(tu);
            qtk_tensor_free(tw);
        }
    }
    /* x[5]'s error strictly shrinks on a q4s group where unweighted mse clips it */
    qtk_tensor *tu = NULL, *tw = NULL;
    for (int j = 0; j < 32; j++) w[j] = 1.0f;
    w[5] = 1e4f;
    CHECK(quantize(x, shape, "q4s,block=32:f32", QTK_CALIB_MSE, NULL, 0, 1, &tu) == 0);
    CHECK(quantize(x, shape, "q4s,block=32:f32", QTK_CALIB_MSE, w, 32, 1, &tw) == 0);
    if (tu && tw) {
        dequant(tu, y);
        double eu = fabs((double)x[5] - y[5]);
        dequant(tw, y);
        double ew = fabs((double)x[5] - y[5]);
        CHECK_MSG(ew < eu * 0.5, "x[5]: weighted error %.9g, unweighted %.9g", ew, eu);
    }
    qtk_tensor_free(tu);
    qtk_tensor_free(tw);
}

static void weights_layouts(void) {
    size_t shape[2] = {7, 100}, n = 700;
    float *x = malloc(n * 4), *we = malloc(n * 4), wc[100], *z = calloc(n, 4);
    uint64_t seed = 12;
    fill(x, n, 100, 0, &seed);
    for (int j = 0; j < 100; j++) wc[j] = trand_uniform(&seed, 0, 4);
    for (size_t i = 0; i < n; i++) we[i] = wc[i % 100];
    const char *specs[] = {"q4f,block=32:f16", "nvfp4", "q8s", "q4s,block=2x16:bf16", "q8s,block=*:f32"};
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        qtk_tensor *a = NULL, *b = NULL, *c = NULL, *d = NULL;
        CHECK(quantize(x, shape, specs[k], QTK_CALIB_MSE, wc, 100, 1, &a) == 0);
        CHECK(quantize(x, shape, specs[k], QTK_CALIB_MSE, we, n, 3, &b) == 0);
        /* all-zero weights: every choice is as good, minmax's is kept */
        CHECK(quantize(x, shape, specs[k], QTK_CALIB_MSE, z, n, 1, &c) == 0);
        CHECK(quantize(x, shape, specs[k], QTK_CALIB_MINMAX, NULL, 0, 1, &d) == 0);
        if (a && b && c && d) {
            size_t la, lb, lc, ld;
            const uint8_t *ba = qtk_tensor_bytes(a, &la), *bb = qtk_tensor_bytes(b, &lb), *bc = qtk_tensor_bytes(c, &lc),
                          *bd = qtk_tensor_bytes(d, &ld);
            CHECK_MSG(la == lb && memcmp(ba, bb, la) == 0, "%s: per-column weights differ from their expansion", specs[k]);
            CHECK_MSG(lc == ld && memcmp(bc, bd, lc) == 0, "%s: zero weights do not keep minmax", specs[k]);
        }
        qtk_tensor_free(a);
        qtk_tensor_free(b);
        qtk_tensor_free(c);
        qtk_tensor_free(d);
    }
    free(x);
    free(we);
    free(z);
    /* a merged-expert [experts, out, in] tensor: one weight per expert and column equals its
     * expansion per element */
    size_t s3[3] = {3, 5, 64}, n3 = 3 * 5 * 64;
    float *x3 = malloc(n3 * 4), *w3 = malloc(n3 * 4), wx[3 * 64];
    fill(x3, n3, 64, 1, &seed);
    for (int i = 0; i < 3 * 64; i++) wx[i] = trand_uniform(&seed, 0, 2);
    for (size_t i = 0; i < n3; i++) w3[i] = wx[(i / (5 * 64)) * 64 + i % 64];
    const char *specs3[] = {"q4f,block=32:f16", "q8s", "q4s,block=2x32:f16", "q4f,table=fit,block=16:f16"};
    for (size_t k = 0; k < sizeof specs3 / sizeof specs3[0]; k++) {
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse(specs3[k], &s));
        qtk_quantize_options o = {.calibration = QTK_CALIB_MSE, .weights = wx, .n_weights = 3 * 64};
        qtk_tensor *a = NULL, *b = NULL;
        CHECK_OK(qtk_quantize(x3, s3, 3, &s, &o, &a));
        o.weights = w3;
        o.n_weights = n3;
        CHECK_OK(qtk_quantize(x3, s3, 3, &s, &o, &b));
        if (a && b) {
            size_t la, lb;
            const uint8_t *ba = qtk_tensor_bytes(a, &la), *bb = qtk_tensor_bytes(b, &lb);
            CHECK_MSG(la == lb && memcmp(ba, bb, la) == 0, "%s: per-expert weights differ from their expansion",
                      specs3[k]);
        }
        qtk_tensor_free(a);
        qtk_tensor_free(b);
    }
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("q4f,block=32:f16", &s));
    qtk_quantize_options o = {.calibration = QTK_CALIB_MSE, .weights = wx, .n_weights = 2 * 64};
    qtk_tensor *t = NULL;
    CHECK_ERR(qtk_quantize(x3, s3, 3, &s, &o, &t), QTK_E_LENGTH, "or one per first index and column (192)");
    free(x3);
    free(w3);
}

/* ---- fitted tables ---- */

static void fit_deterministic(void) {
    size_t shape[2] = {300, 512}, n = 300 * 512;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    uint64_t seed = 31;
    fill(x, n, 512, 1, &seed);
    const char *specs[] = {"q4f,table=fit,block=32:f16", "q2f,table=fit,block=16:f16", "q8f,table=fit,block=64:f32",
                           "q4f,table=fit,block=32:ue4m3,tensor=f32", "q4s,table=fit,block=2x16:bf16"};
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        for (int cal = 0; cal < 2; cal++) {
            qtk_calibration c = cal ? QTK_CALIB_MSE : QTK_CALIB_MINMAX;
            qtk_tensor *t1 = NULL;
            CHECK(quantize(x, shape, specs[k], c, NULL, 0, 1, &t1) == 0);
            if (!t1) continue;
            size_t l1;
            const uint8_t *b1 = qtk_tensor_bytes(t1, &l1);
            const qtk_layout *L = qtk_tensor_layout(t1);
            /* the table: strictly increasing finite entries, in the bytes */
            float tab[256];
            for (size_t i = 0; i < L->table_entries; i++) memcpy(&tab[i], b1 + L->table_offset + 4 * i, 4);
            for (size_t i = 1; i < L->table_entries; i++) CHECK(isfinite(tab[i]) && tab[i] > tab[i - 1]);
            if (!cal) CHECK(tab[0] == -1.0f && tab[L->table_entries - 1] == 1.0f); /* minmax: ends pinned */
            for (int th = 1; th <= 5; th += 2) {
                qtk_tensor *t2 = NULL;
                CHECK(quantize(x, shape, specs[k], c, NULL, 0, th, &t2) == 0);
                size_t l2;
                const uint8_t *b2 = t2 ? qtk_tensor_bytes(t2, &l2) : NULL;
                CHECK_MSG(b2 && l1 == l2 && memcmp(b1, b2, l1) == 0, "%s cal %d: %d threads fit another table", specs[k],
                          cal, th);
                qtk_tensor_free(t2);
            }
            /* every reader gets the table back from the bytes */
            qtk_tensor *t3 = NULL;
            CHECK_OK(qtk_tensor_from_bytes(b1, l1, shape, 2, qtk_tensor_scheme(t1), &t3));
            if (t3) {
                dequant(t3, y);
                float *y1 = malloc(n * 4);
                dequant(t1, y1);
                CHECK(memcmp(y, y1, n * 4) == 0);
                free(y1);
            }
            qtk_tensor_free(t3);
            qtk_tensor_free(t1);
        }
    }
    /* nothing was registered under the name */
    size_t nt = 0;
    CHECK_ERR(qtk_table_get("fit", NULL, 0, &nt), QTK_E_NOTFOUND, "fitted to each tensor");
    const float t16[16] = {0};
    CHECK_ERR(qtk_table_register("FIT", t16, 16), QTK_E_ARG, "reserved");
    free(x);
    free(y);
}

/* On Gaussian data the fitted table beats nf4 (a table made for Gaussian data) and the fit
 * with mse beats the fit with minmax. */
static void fit_beats_nf4(void) {
    size_t shape[2] = {64, 1024}, n = 64 * 1024;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    uint64_t seed = 17;
    fill(x, n, 1024, 0, &seed);
    const char *specs[] = {"q4f,table=nf4,block=64:f32", "q4f,table=fit,block=64:f32", "q4f,table=fit,block=64:f32"};
    double db[3];
    for (int k = 0; k < 3; k++) {
        qtk_tensor *t = NULL;
        CHECK(quantize(x, shape, specs[k], k == 1 ? QTK_CALIB_MINMAX : QTK_CALIB_MSE, NULL, 0, 0, &t) == 0);
        dequant(t, y);
        double sx = 0, se = 0;
        for (size_t i = 0; i < n; i++) {
            sx += (double)x[i] * x[i];
            se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        }
        db[k] = 10 * log10(sx / se);
        qtk_tensor_free(t);
    }
    CHECK_MSG(db[2] > db[0] + 0.05, "fit+mse %.3f dB vs nf4+mse %.3f dB", db[2], db[0]);
    CHECK_MSG(db[2] > db[1], "fit+mse %.3f dB vs fit+minmax %.3f dB", db[2], db[1]);
    free(x);
    free(y);
}

/* ---- errors ---- */

static void errors(void) {
    size_t shape[2] = {4, 32};
    float x[128] = {0}, w[128];
    for (int i = 0; i < 128; i++) w[i] = 1.0f;
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("q4f,block=32:f16", &s));
    qtk_tensor *t = NULL;
    qtk_quantize_options o = {.calibration = QTK_CALIB_MSE, .weights = w, .n_weights = 5};
    CHECK_ERR(qtk_quantize(x, shape, 2, &s, &o, &t), QTK_E_LENGTH, "one per element (128) or one per column");
    o.n_weights = 128;
    w[77] = -1.0f;
    CHECK_ERR(qtk_quantize(x, shape, 2, &s, &o, &t), QTK_E_VALUE, "importance weight 77 is -1");
    w[77] = NAN;
    CHECK_ERR(qtk_quantize(x, shape, 2, &s, &o, &t), QTK_E_VALUE, "importance weight 77 is nan");
    w[77] = 1.0f;
    o.calibration = QTK_CALIB_MINMAX;
    CHECK_ERR(qtk_quantize(x, shape, 2, &s, &o, &t), QTK_E_ARG, "minmax would ignore them");
    o.weights = NULL;
    o.calibration = QTK_CALIB_MSE;
    CHECK_ERR(qtk_quantize(x, shape, 2, &s, &o, &t), QTK_E_ARG, "weights is NULL");
    o = (qtk_quantize_options){.calibration = (qtk_calibration)7};
    CHECK_ERR(qtk_quantize(x, shape, 2, &s, &o, &t), QTK_E_ARG, "calibration 7");
    /* non-finite inputs are named, as with minmax */
    x[70] = INFINITY;
    o = (qtk_quantize_options){.calibration = QTK_CALIB_MSE};
    const char *specs[] = {"q4f,block=32:f16", "q8s", "q4s,block=2x4:f16", "q4f,block=*:f32", "nvfp4", "q4f,table=fit,block=32:f16"};
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        CHECK_OK(qtk_scheme_parse(specs[k], &s));
        CHECK_ERR(qtk_quantize(x, shape, 2, &s, &o, &t), QTK_E_VALUE, "index 70 (coordinates [2, 6]) is +inf");
        CHECK(t == NULL);
    }
    size_t big[2] = {4, 4096};
    float *xb = calloc(4 * 4096, 4);
    xb[3 * 4096 + 100] = NAN;
    xb[3 * 4096 + 7] = -INFINITY;
    CHECK_OK(qtk_scheme_parse("q8s,block=*:f32", &s));
    CHECK_ERR(qtk_quantize(xb, big, 2, &s, &o, &t), QTK_E_VALUE, "index 12295 (coordinates [3, 7]) is -inf");
    CHECK_OK(qtk_scheme_parse("q8s", &s));
    CHECK_ERR(qtk_quantize(xb, big, 2, &s, &o, &t), QTK_E_VALUE, "index 12295");
    free(xb);
    x[70] = 0.0f;
    /* table=fit */
    CHECK_OK(qtk_scheme_parse("q4f,table=fit,block=32:f16", &s));
    o.calibration = QTK_CALIB_ABSMEAN;
    CHECK_ERR(qtk_quantize(x, shape, 2, &s, &o, &t), QTK_E_SCHEME, "not absmean");
    /* weights also drive a fit with minmax scales */
    o = (qtk_quantize_options){.calibration = QTK_CALIB_MINMAX, .weights = w, .n_weights = 32};
    CHECK_OK(qtk_quantize(x, shape, 2, &s, &o, &t));
    qtk_tensor_free(t);
    t = NULL;
    /* an all-zero tensor: the fit keeps a usable table */
    o.calibration = QTK_CALIB_MSE;
    CHECK_OK(qtk_quantize(x, shape, 2, &s, &o, &t));
    qtk_tensor_free(t);
}

/* Two-level ue4m3 scales: the global moves by octaves when that lowers the total error.
 * Here one block in eight reaches the tensor's largest value, so under minmax's global
 * those block codes are 448, ue4m3's largest: e2m1 often prefers a larger scale (the
 * largest value near 4 rather than 6), which only a doubled global allows. */
static void two_level_global(void) {
    size_t shape[2] = {8, 1024}, n = 8192;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    uint64_t seed = 44;
    for (size_t i = 0; i < n; i++) {
        bool top = (i / 16) % 8 == 0;
        x[i] = top && i % 16 == 3 ? 1.0f : (top ? 0.45f : 0.1f) * trand_normal(&seed);
        x[i] = x[i] > 1.0f ? 1.0f : x[i] < -1.0f ? -1.0f : x[i];
    }
    qtk_tensor *ta = NULL, *tb = NULL;
    CHECK(quantize(x, shape, "nvfp4", QTK_CALIB_MINMAX, NULL, 0, 1, &ta) == 0);
    CHECK(quantize(x, shape, "nvfp4", QTK_CALIB_MSE, NULL, 0, 1, &tb) == 0);
    if (ta && tb) {
        float ga = qtk_tensor_global(ta), gb = qtk_tensor_global(tb);
        CHECK_MSG(gb == 2 * ga, "global %g, minmax's %g", (double)gb, (double)ga);
        dequant(ta, y);
        double ea = 0, eb = 0;
        for (size_t i = 0; i < n; i++) ea += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        dequant(tb, y);
        for (size_t i = 0; i < n; i++) eb += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        CHECK_MSG(eb < ea * 0.85, "error %.9g vs minmax %.9g", eb, ea);
    }
    qtk_tensor_free(ta);
    qtk_tensor_free(tb);
    free(x);
    free(y);
}

/* qtk_convert with mse: quantize(dequantize(t)) with mse, to the bit */
static void convert_mse(void) {
    size_t shape[2] = {10, 200}, n = 2000;
    float x[2000], y[2000];
    uint64_t seed = 2;
    fill(x, n, 200, 1, &seed);
    qtk_scheme s8, s4;
    CHECK_OK(qtk_scheme_parse("q8s,block=32:f16", &s8));
    CHECK_OK(qtk_scheme_parse("q4f,table=fit,block=32:f16", &s4));
    qtk_tensor *t8 = NULL, *a = NULL, *b = NULL;
    CHECK_OK(qtk_quantize(x, shape, 2, &s8, NULL, &t8));
    qtk_quantize_options o = {.calibration = QTK_CALIB_MSE};
    CHECK_OK(qtk_convert(t8, &s4, &o, &a));
    CHECK_OK(qtk_dequantize(t8, QTK_DTYPE_F32, y, n));
    CHECK_OK(qtk_quantize(y, shape, 2, &s4, &o, &b));
    if (a && b) {
        size_t la, lb;
        const uint8_t *ba = qtk_tensor_bytes(a, &la), *bb = qtk_tensor_bytes(b, &lb);
        CHECK(la == lb && memcmp(ba, bb, la) == 0);
    }
    qtk_tensor_free(t8);
    qtk_tensor_free(a);
    qtk_tensor_free(b);
}

TEST_MAIN("mse", T(never_worse_than_minmax), T(mse_gains), T(bytes_roundtrip_oracle), T(ternary_optimal),
          T(mx_exponent_by_error), T(weights_direction), T(weights_layouts), T(fit_deterministic), T(fit_beats_nf4),
          T(two_level_global), T(errors), T(convert_mse))
