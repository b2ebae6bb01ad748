/* ggml_compare.c — SQNR of qtk's quantizers beside ggml's own (ggml_quantize_chunk) at the
 * same layouts, on the data sets of docs/quantizers.md, without an importance matrix and (the
 * affine and K types, docs/affine.md) with one:
 *
 *   gauss    N(0, 1), [256, 4096]
 *   student  Student-t with 4 degrees of freedom, [256, 4096], every 100th column x20
 *   mnist    Burn's mnist.safetensors: every tensor of rank >= 2, flattened into rows of
 *            256 (the last row zero-padded; the padding is quantized but not scored)
 *
 * SQNR = 10 log10(sum x^2 / sum (x - x')^2) over all (real) elements of a data set; with an
 * importance matrix (one weight per column, lognormal, the same for both) the weighted SQNR
 * 10 log10(sum w x^2 / sum w (x - x')^2), the error both quantizers then minimize. Bits per
 * element count everything stored: scales, globals and tables (the padded layout's bytes
 * over the padded element count).
 *
 * Not part of qtk's build or CI: bench/ggml_compare.sh builds it against a ggml source tree
 * and build directory. */
#include "qtk.h"

#include "ggml.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- deterministic data ---- */

static uint64_t rng_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double rng_unit(uint64_t *s) { return ((double)(rng_u64(s) >> 11) + 0.5) * 0x1p-53; }
static double rng_normal(uint64_t *s) {
    double u = rng_unit(s), v = rng_unit(s);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

typedef struct {
    const char *name;
    size_t rows, cols;  /* the layout quantized: rows of cols */
    float *x;           /* rows * cols values (padding included) */
    unsigned char *real; /* 1 for a real element, 0 for padding (NULL: all real) */
} dataset;

static dataset make_gauss(void) {
    dataset d = {"gauss", 256, 4096, NULL, NULL};
    d.x = malloc(d.rows * d.cols * sizeof(float));
    uint64_t s = 1234;
    for (size_t i = 0; i < d.rows * d.cols; i++) d.x[i] = (float)rng_normal(&s);
    return d;
}

static dataset make_student(void) {
    dataset d = {"student-t4", 256, 4096, NULL, NULL};
    d.x = malloc(d.rows * d.cols * sizeof(float));
    uint64_t s = 5678;
    for (size_t r = 0; r < d.rows; r++)
        for (size_t c = 0; c < d.cols; c++) {
            double z = rng_normal(&s), v = 0;
            for (int k = 0; k < 4; k++) {
                double n = rng_normal(&s);
                v += n * n;
            }
            double t = z / sqrt(v / 4.0);
            if (c % 100 == 7) t *= 20.0;
            d.x[r * d.cols + c] = (float)t;
        }
    return d;
}

/* A minimal reader of a safetensors file's F32 tensors of rank >= 2: enough of JSON for the
 * header the safetensors writer produces. */
static const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++;
    return p;
}
static const char *read_str(const char *p, char *out, size_t cap) {
    p = skip_ws(p);
    if (*p != '"') return NULL;
    p++;
    size_t n = 0;
    while (*p && *p != '"') {
        if (*p == '\\' && p[1]) p++;
        if (n + 1 < cap) out[n++] = *p;
        p++;
    }
    out[n] = '\0';
    return *p == '"' ? p + 1 : NULL;
}
static const char *skip_value(const char *p) {
    p = skip_ws(p);
    if (*p == '"') {
        char tmp[4];
        return read_str(p, tmp, sizeof tmp);
    }
    if (*p == '{' || *p == '[') {
        int depth = 0;
        bool in_str = false;
        for (; *p; p++) {
            if (in_str) {
                if (*p == '\\') p++;
                else if (*p == '"') in_str = false;
            } else if (*p == '"') in_str = true;
            else if (*p == '{' || *p == '[') depth++;
            else if (*p == '}' || *p == ']') {
                if (--depth == 0) return p + 1;
            }
        }
        return NULL;
    }
    while (*p && *p != ',' && *p != '}' && *p != ']') p++;
    return p;
}
static const char *read_ints(const char *p, long long *v, int cap, int *n) {
    p = skip_ws(p);
    if (*p != '[') return NULL;
    p++;
    *n = 0;
    for (;;) {
        p = skip_ws(p);
        if (*p == ']') return p + 1;
        char *end;
        long long x = strtoll(p, &end, 10);
        if (end == p) return NULL;
        if (*n < cap) v[(*n)++] = x;
        p = skip_ws(end);
        if (*p == ',') p++;
    }
}

static int make_mnist(const char *path, dataset *d) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)len + 1);
    if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
        fclose(f);
        free(buf);
        return -1;
    }
    fclose(f);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)buf[i] << (8 * i);
    char *hdr = malloc(hl + 1);
    memcpy(hdr, buf + 8, hl);
    hdr[hl] = '\0';
    const unsigned char *data = buf + 8 + hl;
    size_t cols = 256, total_rows = 0, cap_rows = 4096;
    float *x = calloc(cap_rows * cols, sizeof(float));
    unsigned char *real = calloc(cap_rows * cols, 1);
    const char *p = skip_ws(hdr);
    if (*p != '{') return -1;
    p++;
    for (;;) {
        p = skip_ws(p);
        if (*p == '}') break;
        char name[256];
        p = read_str(p, name, sizeof name);
        if (!p) return -1;
        p = skip_ws(p);
        if (*p != ':') return -1;
        p = skip_ws(p + 1);
        if (strcmp(name, "__metadata__") == 0) {
            p = skip_value(p);
        } else {
            char dtype[16] = "";
            long long shape[8], offs[2];
            int rank = 0, no = 0;
            if (*p != '{') return -1;
            p++;
            for (;;) {
                p = skip_ws(p);
                if (*p == '}') {
                    p++;
                    break;
                }
                char key[64];
                p = read_str(p, key, sizeof key);
                p = skip_ws(p);
                p = skip_ws(p + 1);
                if (strcmp(key, "dtype") == 0) p = read_str(p, dtype, sizeof dtype);
                else if (strcmp(key, "shape") == 0) p = read_ints(p, shape, 8, &rank);
                else if (strcmp(key, "data_offsets") == 0) p = read_ints(p, offs, 2, &no);
                else p = skip_value(p);
                if (!p) return -1;
                p = skip_ws(p);
                if (*p == ',') p++;
            }
            if (rank >= 2 && strcmp(dtype, "F32") == 0 && no == 2) {
                size_t n = (size_t)(offs[1] - offs[0]) / 4, rows = (n + cols - 1) / cols;
                while (total_rows + rows > cap_rows) {
                    x = realloc(x, 2 * cap_rows * cols * sizeof(float));
                    real = realloc(real, 2 * cap_rows * cols);
                    memset(x + cap_rows * cols, 0, cap_rows * cols * sizeof(float));
                    memset(real + cap_rows * cols, 0, cap_rows * cols);
                    cap_rows *= 2;
                }
                memcpy(x + total_rows * cols, data + offs[0], n * 4);
                memset(real + total_rows * cols, 1, n);
                total_rows += rows;
            }
        }
        p = skip_ws(p);
        if (*p == ',') p++;
    }
    free(hdr);
    free(buf);
    d->name = "mnist";
    d->rows = total_rows;
    d->cols = cols;
    d->x = x;
    d->real = real;
    return 0;
}

/* ---- scoring ---- */

static double sqnr_w(const dataset *d, const float *y, const float *imat) {
    double sx = 0, se = 0;
    for (size_t i = 0; i < d->rows * d->cols; i++) {
        if (d->real && !d->real[i]) continue;
        double w = imat ? imat[i % d->cols] : 1.0, e = (double)d->x[i] - (double)y[i];
        sx += w * (double)d->x[i] * d->x[i];
        se += w * e * e;
    }
    return se > 0 ? 10.0 * log10(sx / se) : INFINITY;
}
static double sqnr(const dataset *d, const float *y) { return sqnr_w(d, y, NULL); }

/* A synthetic importance matrix: per column a lognormal weight (activations' energies spread
 * over two decades or so), deterministic. */
static float *make_imatrix(size_t cols) {
    float *w = malloc(cols * sizeof *w);
    uint64_t s = 4242;
    for (size_t j = 0; j < cols; j++) w[j] = (float)exp(1.2 * rng_normal(&s));
    return w;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
    char label[96];
    double bits, db, gbps;
} result;

static int run_ggml_w(const dataset *d, enum ggml_type type, const float *imat, result *r) {
    const struct ggml_type_traits *tt = ggml_get_type_traits(type);
    if ((size_t)d->cols % (size_t)tt->blck_size) return -1;
    size_t row = ggml_row_size(type, (int64_t)d->cols), n = d->rows * d->cols;
    void *q = malloc(row * d->rows);
    float *y = malloc(n * sizeof(float));
    double t0 = now();
    ggml_quantize_chunk(type, d->x, q, 0, (int64_t)d->rows, (int64_t)d->cols, imat);
    double dt = now() - t0;
    tt->to_float(q, y, (int64_t)n);
    snprintf(r->label, sizeof r->label, "ggml %s", tt->type_name);
    r->bits = (double)row * 8.0 / (double)d->cols;
    r->db = sqnr_w(d, y, imat);
    r->gbps = (double)n * 4.0 / dt / 1e9;
    free(q);
    free(y);
    return 0;
}
static int run_ggml(const dataset *d, enum ggml_type type, result *r) { return run_ggml_w(d, type, NULL, r); }

static int run_qtk_w(const dataset *d, const char *spec, qtk_calibration cal, const char *cname, const float *imat,
                     result *r) {
    qtk_scheme s;
    if (qtk_scheme_parse(spec, &s) != QTK_OK) {
        fprintf(stderr, "%s: %s\n", spec, qtk_last_error());
        return -1;
    }
    size_t shape[2] = {d->rows, d->cols}, n = d->rows * d->cols;
    qtk_quantize_options o = {.calibration = cal, .threads = 1, .weights = imat, .n_weights = imat ? d->cols : 0};
    qtk_tensor *t = NULL;
    double t0 = now();
    if (qtk_quantize(d->x, shape, 2, &s, &o, &t) != QTK_OK) {
        fprintf(stderr, "%s (%s): %s\n", spec, cname, qtk_last_error());
        return -1;
    }
    double dt = now() - t0;
    float *y = malloc(n * sizeof(float));
    qtk_dequantize(t, QTK_DTYPE_F32, y, n);
    snprintf(r->label, sizeof r->label, "qtk %s [%s]", spec, cname);
    r->bits = qtk_layout_bits_per_element(qtk_tensor_layout(t));
    r->db = sqnr_w(d, y, imat);
    r->gbps = (double)n * 4.0 / dt / 1e9;
    qtk_tensor_free(t);
    free(y);
    return 0;
}
static int run_qtk(const dataset *d, const char *spec, qtk_calibration cal, const char *cname, result *r) {
    return run_qtk_w(d, spec, cal, cname, NULL, r);
}

/* the layouts compared: each qtk scheme beside the ggml type with the same layout */
typedef struct {
    const char *qtk;
    enum ggml_type ggml;
    double margin; /* target: qtk mse >= ggml + margin dB */
} pair;

static const pair pairs[] = {
    {"q4f,block=32:f16", GGML_TYPE_Q4_0, 0.5},
    {"mxfp4", GGML_TYPE_MXFP4, 0.5},
    {"e2m1,block=16:ue4m3", GGML_TYPE_NVFP4, 0.3},
    {"q8s,block=32:f16", GGML_TYPE_Q8_0, 0.0},
    {"q4f,table=iq4nl,block=32:f16", GGML_TYPE_IQ4_NL, 0.0},
    {"q2s,block=256:f16", GGML_TYPE_TQ2_0, 3.0},
    /* docs/affine.md: ggml's own layouts, with and without an importance matrix */
    {"q4_1", GGML_TYPE_Q4_1, 0.0},
    {"q5_0", GGML_TYPE_Q5_0, 0.0},
    {"q5_1", GGML_TYPE_Q5_1, 0.0},
    {"q2_k", GGML_TYPE_Q2_K, 0.0},
    {"q3_k", GGML_TYPE_Q3_K, 0.0},
    {"q4_k", GGML_TYPE_Q4_K, 0.0},
    {"q5_k", GGML_TYPE_Q5_K, 0.0},
    {"q6_k", GGML_TYPE_Q6_K, 0.0},
};
#define FIRST_AFFINE 6 /* pairs[FIRST_AFFINE..] are also compared with an importance matrix */

/* more of each side, for the best-at-<=4.5-bits comparison and context */
static const char *const qtk_more[] = {
    "nvfp4",
    "u4,block=32:bf16,offset=bf16",
    "u4,block=64:f16,min=f16",
    "q4f,table=fit,block=32:f16",
    "q4f,table=fit,block=17:ue4m3,tensor=f32", /* 4.47 bits + the table (rows of 4096) */
    "q4f,table=fit,block=18:ue4m3,tensor=f32", /* 4.45-4.47 bits + the table */
    "q4f,table=iq4nl,block=18:ue4m3,tensor=f32",
    "q4f,block=16:ue4m3",
    "q4f,table=fit,block=32:ue4m3,tensor=f32",
    "q4f,table=nf4,block=32:f16",
    "e2m1,block=32:f16",
    "q2f,block=32:f16",
    "q2s,block=32:f16",
};
/* docs/lattice.md: the lattice types, with an importance matrix (ggml requires one for three) */
static const pair lattice_pairs[] = {
    {"iq2_xxs", GGML_TYPE_IQ2_XXS, 0.0}, {"iq2_xs", GGML_TYPE_IQ2_XS, 0.0}, {"iq2_s", GGML_TYPE_IQ2_S, 0.0},
    {"iq3_xxs", GGML_TYPE_IQ3_XXS, 0.0}, {"iq3_s", GGML_TYPE_IQ3_S, 0.0},  {"iq1_s", GGML_TYPE_IQ1_S, 0.0},
    {"iq1_m", GGML_TYPE_IQ1_M, 0.0},
};

static const enum ggml_type ggml_more[] = {GGML_TYPE_Q4_K, GGML_TYPE_Q4_1, GGML_TYPE_IQ4_XS, GGML_TYPE_Q5_0,
                                           GGML_TYPE_Q3_K, GGML_TYPE_Q2_K};

static const qtk_calibration CAL_MSE = (qtk_calibration)2; /* QTK_CALIB_MSE */

int main(int argc, char **argv) {
    const char *mnist = argc > 1 ? argv[1] : "../shared/data/burn/mnist.safetensors";
    bool markdown = false, only_affine = false, only_lattice = false;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--markdown") == 0) markdown = true;
        else if (strcmp(argv[i], "--affine") == 0) only_affine = true;   /* the affine pairs only */
        else if (strcmp(argv[i], "--lattice") == 0) only_lattice = true; /* the lattice pairs only */
    }
    qtk_set_threads(1);
    dataset sets[3];
    int ns = 0;
    sets[ns++] = make_gauss();
    sets[ns++] = make_student();
    if (make_mnist(mnist, &sets[ns]) == 0) ns++;
    else fprintf(stderr, "cannot read %s: skipping the mnist data set\n", mnist);
    const char *dump = getenv("QTK_COMPARE_DUMP"); /* a directory: write each data set as <name>.f32 */
    for (int di = 0; dump && di < ns; di++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.f32", dump, sets[di].name);
        FILE *f = fopen(path, "wb");
        if (f) {
            fwrite(sets[di].x, sizeof(float), sets[di].rows * sets[di].cols, f);
            fclose(f);
        }
    }
    int failures = 0;
    for (int di = 0; di < ns; di++) {
        const dataset *d = &sets[di];
        printf("\n## %s: [%zu, %zu]\n\n", d->name, d->rows, d->cols);
        if (only_lattice) {
            /* weighted SQNR with the importance matrix, and quantizing speed (one thread) */
            float *imat = make_imatrix(d->cols);
            if (markdown) printf("| type | ggml dB | qtk dB | qtk - ggml | ggml MB/s | qtk MB/s |\n|---|---|---|---|---|---|\n");
            for (size_t k = 0; k < sizeof lattice_pairs / sizeof lattice_pairs[0]; k++) {
                result g, m;
                if (run_ggml_w(d, lattice_pairs[k].ggml, imat, &g) || run_qtk_w(d, lattice_pairs[k].qtk, CAL_MSE, "mse", imat, &m)) {
                    failures++;
                    continue;
                }
                bool ok = m.db >= g.db;
                failures += !ok;
                if (markdown)
                    printf("| %s | %.3f | %.3f | %+.3f %s | %.1f | %.1f |\n", lattice_pairs[k].qtk, g.db, m.db, m.db - g.db,
                           ok ? "met" : "NOT met", g.gbps * 1e3, m.gbps * 1e3);
                else
                    printf("%-8s ggml %7.3f dB | qtk %7.3f dB | %+6.3f (%s)  [f32 in: ggml %.1f MB/s, qtk %.1f MB/s]\n",
                           lattice_pairs[k].qtk, g.db, m.db, m.db - g.db, ok ? "met" : "NOT MET", g.gbps * 1e3, m.gbps * 1e3);
                fflush(stdout);
            }
            free(imat);
            continue;
        }
        if (markdown) printf("| layout | ggml | dB | qtk minmax dB | qtk mse dB | mse - ggml | target |\n|---|---|---|---|---|---|---|\n");
        for (size_t k = only_affine ? FIRST_AFFINE : 0; k < sizeof pairs / sizeof pairs[0]; k++) {
            result g, a, m;
            if (run_ggml(d, pairs[k].ggml, &g) || run_qtk(d, pairs[k].qtk, QTK_CALIB_MINMAX, "minmax", &a) ||
                run_qtk(d, pairs[k].qtk, CAL_MSE, "mse", &m)) {
                failures++;
                continue;
            }
            bool ok = m.db >= g.db + pairs[k].margin;
            failures += !ok;
            if (markdown)
                printf("| %s | %s | %.3f | %.3f | %.3f | %+.3f | >= %+.1f %s |\n", pairs[k].qtk, g.label + 5, g.db, a.db,
                       m.db, m.db - g.db, pairs[k].margin, ok ? "met" : "NOT met");
            else
                printf("%-34s %-8s %7.3f dB | qtk minmax %7.3f | mse %7.3f | %+6.3f (target %+.1f: %s)\n", pairs[k].qtk,
                       g.label + 5, g.db, a.db, m.db, m.db - g.db, pairs[k].margin, ok ? "met" : "NOT MET");
        }
        /* the affine pairs with an importance matrix: weighted SQNR */
        float *imat = make_imatrix(d->cols);
        if (markdown) printf("\nwith an importance matrix (weighted SQNR)\n\n| layout | ggml dB | qtk mse dB | mse - ggml |\n|---|---|---|---|\n");
        else printf("\nwith an importance matrix (weighted SQNR):\n");
        for (size_t k = FIRST_AFFINE; k < sizeof pairs / sizeof pairs[0]; k++) {
            result g, m;
            if (run_ggml_w(d, pairs[k].ggml, imat, &g) || run_qtk_w(d, pairs[k].qtk, CAL_MSE, "mse", imat, &m)) {
                failures++;
                continue;
            }
            bool ok = m.db >= g.db + pairs[k].margin;
            failures += !ok;
            if (markdown) printf("| %s | %.3f | %.3f | %+.3f %s |\n", pairs[k].qtk, g.db, m.db, m.db - g.db, ok ? "met" : "NOT met");
            else
                printf("%-34s %-8s %7.3f dB | qtk mse %7.3f | %+6.3f (%s)  [%.3f / %.3f GB/s]\n", pairs[k].qtk, g.label + 5, g.db,
                       m.db, m.db - g.db, ok ? "met" : "NOT MET", g.gbps, m.gbps);
        }
        free(imat);
        if (only_affine) continue;
        /* best at <= 4.5 bits per element */
        result best_g = {"", 0, -INFINITY, 0}, best_q = {"", 0, -INFINITY, 0};
        printf("\n%s\n", markdown ? "| scheme | bits/elem | dB | f32 GB/s (1 thread) |\n|---|---|---|---|" : "");
        for (size_t k = 0; k < sizeof pairs / sizeof pairs[0] + sizeof ggml_more / sizeof ggml_more[0]; k++) {
            enum ggml_type t = k < sizeof pairs / sizeof pairs[0] ? pairs[k].ggml : ggml_more[k - sizeof pairs / sizeof pairs[0]];
            result g;
            if (run_ggml(d, t, &g)) continue;
            if (markdown) printf("| %s | %.4f | %.2f | %.3f |\n", g.label, g.bits, g.db, g.gbps);
            else printf("%-50s %7.4f b/e %7.2f dB %7.3f GB/s\n", g.label, g.bits, g.db, g.gbps);
            if (g.bits <= 4.5 && g.db > best_g.db) best_g = g;
        }
        for (size_t k = 0; k < sizeof pairs / sizeof pairs[0] + sizeof qtk_more / sizeof qtk_more[0]; k++) {
            const char *spec = k < sizeof pairs / sizeof pairs[0] ? pairs[k].qtk : qtk_more[k - sizeof pairs / sizeof pairs[0]];
            for (int c = 0; c < 2; c++) {
                result q;
                if (run_qtk(d, spec, c ? CAL_MSE : QTK_CALIB_MINMAX, c ? "mse" : "minmax", &q)) continue;
                if (markdown) printf("| %s | %.4f | %.2f | %.3f |\n", q.label, q.bits, q.db, q.gbps);
                else printf("%-50s %7.4f b/e %7.2f dB %7.3f GB/s\n", q.label, q.bits, q.db, q.gbps);
                if (q.bits <= 4.5 && q.db > best_q.db) best_q = q;
            }
        }
        bool ok = best_q.db >= best_g.db;
        failures += !ok;
        printf("\nbest at <= 4.5 bits/element: %s %.2f dB (%.4f b/e) vs %s %.2f dB (%.4f b/e): %+.2f dB, %s\n",
               best_q.label, best_q.db, best_q.bits, best_g.label, best_g.db, best_g.bits, best_q.db - best_g.db,
               ok ? "met" : "NOT MET");
    }
    printf("\n%d target(s) not met\n", failures);
    for (int i = 0; i < ns; i++) {
        free(sets[i].x);
        free(sets[i].real);
    }
    ggml_quantize_free();
    return failures ? 1 : 0;
}
