/* test_imatrix.c — llama.cpp importance matrices: the legacy .dat format parsed to the
 * means E[a^2] (values / ncall), its optional trailers, every malformed file refused with a
 * message naming what is wrong; the GGUF flavour's sums / counts; the per-column weights
 * handed to calibration mse, experts included. */
#include "test.h"

#include "calib/imatrix.h"

#include <stdbool.h>

typedef struct {
    uint8_t b[4096];
    size_t n;
} buf;

static void put32(buf *w, uint32_t v) {
    for (int i = 0; i < 4; i++) w->b[w->n++] = (uint8_t)(v >> (8 * i));
}
static void putf(buf *w, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    put32(w, u);
}
static void put_entry(buf *w, const char *name, int32_t ncall, int32_t nval, const float *v) {
    put32(w, (uint32_t)strlen(name));
    memcpy(w->b + w->n, name, strlen(name));
    w->n += strlen(name);
    put32(w, (uint32_t)ncall);
    put32(w, (uint32_t)nval);
    for (int32_t i = 0; i < nval; i++) putf(w, v[i]);
}

/* a file as llama-imatrix writes it: two entries, last_chunk, the dataset's name */
static buf valid(int trailer) {
    buf w = {.n = 0};
    const float a[4] = {10, 20, 0, 5}, e[6] = {1, 2, 3, 4, 5, 6};
    put32(&w, 2);
    put_entry(&w, "blk.0.attn_q.weight", 10, 4, a);
    put_entry(&w, "blk.0.ffn_up_exps.weight", 2, 6, e);
    if (trailer >= 1) put32(&w, 33);
    if (trailer >= 2) {
        put32(&w, 9);
        memcpy(w.b + w.n, "wiki.test", 9);
        w.n += 9;
    }
    return w;
}

static void parse_valid(void) {
    for (int trailer = 0; trailer < 3; trailer++) {
        buf w = valid(trailer);
        qtk__imatrix im;
        CHECK_OK(qtk__imatrix_parse_dat(w.b, w.n, &im));
        CHECK_EQ_U(im.n, 2);
        const qtk__imatrix_entry *q = qtk__imatrix_find(&im, "blk.0.attn_q.weight");
        CHECK(q != NULL);
        if (q) {
            CHECK_EQ_U(q->nval, 4);
            CHECK_BITS(q->mean[0], 1.0f); /* 10 / ncall 10 */
            CHECK_BITS(q->mean[1], 2.0f);
            CHECK_BITS(q->mean[2], 0.0f);
            CHECK_BITS(q->mean[3], 0.5f);
            CHECK(q->count == 10.0);
            const float *wc = NULL;
            CHECK_OK(qtk__imatrix_weights(q, 4, 0, &wc));
            CHECK(wc == q->mean);
            CHECK_ERR(qtk__imatrix_weights(q, 3, 0, &wc), QTK_E_SHAPE, "not a whole number of rows of 3 columns");
            CHECK_ERR(qtk__imatrix_weights(q, 4, 1, &wc), QTK_E_SHAPE, "holds 1 matrix of 4 columns; 1 asked for");
        }
        /* merged experts: 6 values are 2 experts of 3 columns (or 3 of 2) */
        const qtk__imatrix_entry *x = qtk__imatrix_find(&im, "blk.0.ffn_up_exps.weight");
        const float *wc = NULL;
        CHECK(x != NULL);
        if (x) {
            CHECK_OK(qtk__imatrix_weights(x, 3, 1, &wc));
            CHECK(wc && wc[0] == 2.0f && wc[2] == 3.0f); /* 4/2, 6/2 */
            CHECK_OK(qtk__imatrix_weights(x, 2, 2, &wc));
            CHECK(wc && wc[1] == 3.0f);
        }
        CHECK(qtk__imatrix_find(&im, "blk.1.attn_q.weight") == NULL);
        CHECK(im.chunks == (trailer ? 33 : -1));
        CHECK(trailer == 2 ? im.dataset && strcmp(im.dataset, "wiki.test") == 0 : im.dataset == NULL);
        qtk__imatrix_free(&im);
    }
}

static void parse_malformed(void) {
    qtk__imatrix im;
    const struct {
        int what;
        const char *msg;
    } cases[] = {
        {0, "too short for the entry count"},
        {1, "0 entries"},
        {2, "entries claimed but"},
        {3, "name length 0"},
        {4, "name of 200 bytes"},
        {5, "ncall 0"},
        {6, "nval -3"},
        {7, "4 values need 16 bytes"},
        {8, "value 2 is -1"},
        {9, "value 1 is nan"},
        {10, "appears twice"},
        {11, "bytes after the entries"},
        {12, "the trailer's dataset name is 50 bytes"},
        {13, "holds a NUL byte"},
        {14, "truncated before ncall and nval"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        buf w = {.n = 0};
        const float v[4] = {1, 2, 3, 4};
        float bad[4] = {1, 2, -1, 4};
        switch (cases[k].what) {
        case 0: put32(&w, 1), w.n = 3; break;
        case 1: put32(&w, 0); break;
        case 2: put32(&w, 1000), put_entry(&w, "a", 1, 4, v); break;
        case 3: put32(&w, 1), put32(&w, 0), put32(&w, 1), put32(&w, 1), putf(&w, 1), put32(&w, 0); break;
        case 4: put32(&w, 1), put32(&w, 200), put32(&w, 1), put32(&w, 1), putf(&w, 1), put32(&w, 0); break;
        case 5: put32(&w, 1), put_entry(&w, "a", 0, 4, v); break;
        case 6:
            put32(&w, 1), put32(&w, 1), w.b[w.n++] = 'a', put32(&w, 1), put32(&w, (uint32_t)-3), put32(&w, 0),
                put32(&w, 0), put32(&w, 0), put32(&w, 0);
            break;
        case 7: put32(&w, 1), put_entry(&w, "a", 1, 4, v), w.n -= 5; break;
        case 8: put32(&w, 1), put_entry(&w, "a", 1, 4, bad); break;
        case 9: bad[1] = NAN, bad[2] = 3, put32(&w, 1), put_entry(&w, "a", 1, 4, bad); break;
        case 10: put32(&w, 2), put_entry(&w, "a", 1, 4, v), put_entry(&w, "a", 1, 4, v); break;
        case 11: put32(&w, 1), put_entry(&w, "a", 1, 4, v), put32(&w, 1), w.b[w.n++] = 0; break;
        case 12: put32(&w, 1), put_entry(&w, "a", 1, 4, v), put32(&w, 1), put32(&w, 50), put32(&w, 0); break;
        case 13: put32(&w, 1), put_entry(&w, "ab", 1, 4, v), w.b[9] = 0; break;
        default: put32(&w, 1), put_entry(&w, "abcdefghijklmnopqrstu", 1, 4, v), w.n = 4 + 4 + 21 + 6; break;
        }
        qtk_status st = qtk__imatrix_parse_dat(w.b, w.n, &im);
        CHECK_MSG(st == QTK_E_FORMAT, "case %d: %s (%s)", cases[k].what, qtk_status_name(st), qtk_last_error());
        CHECK_MSG(strstr(qtk_last_error(), cases[k].msg) != NULL, "case %d: message '%s' lacks '%s'", cases[k].what,
                  qtk_last_error(), cases[k].msg);
        qtk__imatrix_free(&im);
    }
    CHECK_ERR(qtk__imatrix_parse_dat(NULL, 8, &im), QTK_E_ARG, "NULL");
    qtk__imatrix_free(&im);
    /* every truncation of a valid file is refused, none crashes */
    buf w = valid(2);
    for (size_t cut = 0; cut < w.n; cut++) {
        qtk_status st = qtk__imatrix_parse_dat(w.b, cut, &im);
        bool trailer_cut = cut == w.n - 13 || cut == w.n - 17; /* no trailer, or last_chunk only: valid */
        CHECK_MSG(trailer_cut ? st == QTK_OK : st == QTK_E_FORMAT, "cut at %zu: %s", cut, qtk_status_name(st));
        qtk__imatrix_free(&im);
    }
}

/* The GGUF flavour: sums and counts per matrix. */
static void add_sums_counts(void) {
    qtk__imatrix im = {.chunks = -1};
    const float sums[6] = {2, 4, 6, 0, 0, 0}, counts[2] = {2, 0};
    CHECK_OK(qtk__imatrix_add(&im, "blk.3.ffn_down_exps.weight", sums, counts, 3, 2));
    const qtk__imatrix_entry *e = qtk__imatrix_find(&im, "blk.3.ffn_down_exps.weight");
    const float *w = NULL;
    CHECK(e && e->n_mat == 2 && e->count == 2.0);
    CHECK_OK(qtk__imatrix_weights(e, 3, 0, &w));
    CHECK(w && w[0] == 1.0f && w[1] == 2.0f && w[2] == 3.0f);
    CHECK_OK(qtk__imatrix_weights(e, 3, 1, &w));
    CHECK(w && w[0] == 1.0f && w[2] == 1.0f); /* count 0: no information, every column 1 */
    CHECK_ERR(qtk__imatrix_weights(e, 2, 0, &w), QTK_E_SHAPE, "per matrix");
    CHECK_ERR(qtk__imatrix_add(&im, "blk.3.ffn_down_exps.weight", sums, counts, 3, 2), QTK_E_FORMAT, "appears twice");
    const float neg[2] = {1, -1};
    CHECK_ERR(qtk__imatrix_add(&im, "x", sums, neg, 3, 2), QTK_E_FORMAT, "count 1 is -1");
    CHECK_ERR(qtk__imatrix_add(&im, "x", sums, counts, 0, 2), QTK_E_FORMAT, "0 x 2 values");
    CHECK_ERR(qtk__imatrix_add(&im, "", sums, counts, 3, 2), QTK_E_FORMAT, "a tensor name of 0 bytes");
    qtk__imatrix_free(&im);
}

/* The means weigh calibration mse per column: a column the matrix says matters gets less
 * error than with the weights reversed. */
static void weights_drive_mse(void) {
    buf w = {.n = 0};
    float v[64];
    for (int j = 0; j < 64; j++) v[j] = j < 32 ? 100.0f : 1e-3f;
    put32(&w, 1);
    put_entry(&w, "blk.0.attn_k.weight", 1, 64, v);
    qtk__imatrix im;
    CHECK_OK(qtk__imatrix_parse_dat(w.b, w.n, &im));
    const float *wc = NULL;
    CHECK_OK(qtk__imatrix_weights(qtk__imatrix_find(&im, "blk.0.attn_k.weight"), 64, 0, &wc));
    size_t shape[2] = {16, 64}, n = 1024;
    float x[1024], y[1024];
    uint64_t seed = 7;
    for (size_t i = 0; i < n; i++) x[i] = trand_normal(&seed);
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("q4s,block=64:f16", &s));
    double e[2][2] = {{0, 0}, {0, 0}}; /* [weighted or not][first half, second half] */
    for (int k = 0; k < 2; k++) {
        qtk_quantize_options o = {.calibration = QTK_CALIB_MSE, .weights = k ? wc : NULL, .n_weights = k ? 64u : 0u};
        qtk_tensor *t = NULL;
        CHECK_OK(qtk_quantize(x, shape, 2, &s, &o, &t));
        CHECK_OK(qtk_dequantize(t, QTK_DTYPE_F32, y, n));
        for (size_t i = 0; i < n; i++) e[k][i % 64 >= 32] += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        qtk_tensor_free(t);
    }
    CHECK_MSG(e[1][0] < e[0][0], "weighted columns: %.6g, unweighted %.6g", e[1][0], e[0][0]);
    qtk__imatrix_free(&im);
}

TEST_MAIN("imatrix", T(parse_valid), T(parse_malformed), T(add_sums_counts), T(weights_drive_mse))
