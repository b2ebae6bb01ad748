/* test_errors.c — every error path returns a status and a message that names the problem;
 * nothing is written on failure; messages are per thread; allocation failure is an error. */
#include "test.h"

#include <pthread.h>

static qtk_scheme parse(const char *spec) {
    qtk_scheme s;
    memset(&s, 0, sizeof s);
    CHECK_OK(qtk_scheme_parse(spec, &s));
    return s;
}

static void null_arguments(void) {
    qtk_scheme s = parse("q8f");
    size_t shape[1] = {4};
    float x[4] = {1, 2, 3, 4};
    qtk_tensor *t = NULL;
    uint8_t buf[8];
    CHECK_ERR(qtk_quantize(x, shape, 1, &s, NULL, NULL), QTK_E_ARG, "out is NULL");
    CHECK_ERR(qtk_quantize(NULL, shape, 1, &s, NULL, &t), QTK_E_ARG, "input values are NULL");
    CHECK(t == NULL);
    CHECK_ERR(qtk_quantize(x, shape, 1, NULL, NULL, &t), QTK_E_ARG, "scheme is NULL");
    CHECK_ERR(qtk_quantize_into(x, shape, 1, &s, NULL, NULL, 8), QTK_E_ARG, "destination is NULL");
    CHECK_ERR(qtk_tensor_from_bytes(NULL, 8, shape, 1, &s, &t), QTK_E_ARG, "bytes are NULL");
    CHECK_ERR(qtk_tensor_from_bytes(buf, 8, shape, 1, &s, NULL), QTK_E_ARG, "out is NULL");
    CHECK_ERR(qtk_dequantize(NULL, QTK_DTYPE_F32, x, 4), QTK_E_ARG, "tensor is NULL");
    CHECK_ERR(qtk_convert(NULL, &s, NULL, &t), QTK_E_ARG, "NULL");
    CHECK_ERR(qtk_layout_compute(&s, shape, 1, NULL), QTK_E_ARG, "layout is NULL");
    CHECK_ERR(qtk_scheme_format(NULL, NULL, 0, NULL), QTK_E_ARG, "NULL");
    CHECK_ERR(qtk_table_get(NULL, NULL, 0, NULL), QTK_E_ARG, "NULL");
    CHECK_ERR(qtk_dtype_parse("f99", &s.block_dtype), QTK_E_PARSE, "unknown dtype 'f99'");
    qtk_tensor_free(NULL); /* no-op */
}

static void wrong_lengths(void) {
    qtk_scheme s = parse("q4f,block=32:f16");
    size_t shape[2] = {64, 70};
    uint8_t *buf = calloc(4000, 1);
    qtk_tensor *t = NULL;
    CHECK_ERR(qtk_tensor_from_bytes(buf, 2687, shape, 2, &s, &t), QTK_E_LENGTH,
              "takes exactly 2688 bytes (values 2304 + scales 384 + global 0 + table 0); got 2687");
    CHECK_ERR(qtk_tensor_from_bytes(buf, 2689, shape, 2, &s, &t), QTK_E_LENGTH, "got 2689");
    CHECK(t == NULL);
    float x[64 * 70];
    memset(x, 0, sizeof x);
    CHECK_ERR(qtk_quantize_into(x, shape, 2, &s, NULL, buf, 2000), QTK_E_LENGTH, "needs exactly 2688");
    float y[10];
    CHECK_OK(qtk_tensor_from_bytes(buf, 2688, shape, 2, &s, &t));
    CHECK_ERR(qtk_dequantize(t, QTK_DTYPE_F32, y, 10), QTK_E_LENGTH, "output holds 10 elements; the tensor has 4480");
    CHECK_ERR(qtk_dequantize(t, QTK_DTYPE_E4M3, y, 4480), QTK_E_ARG, "output dtype 'e4m3' is not f32, f16 or bf16");
    float sc[2];
    CHECK_ERR(qtk_tensor_scales(t, sc, 2), QTK_E_LENGTH, "room for 2 scales; the tensor has 192");
    char tiny[4];
    size_t need;
    CHECK_ERR(qtk_scheme_format(&s, tiny, sizeof tiny, &need), QTK_E_LENGTH, "17 needed");
    CHECK_EQ_U(need, 17);
    qtk_tensor_free(t);
    free(buf);
}

static void nonfinite_inputs(void) {
    qtk_scheme s = parse("q8s,block=4:f16");
    size_t shape[2] = {3, 4};
    float x[12] = {0};
    uint8_t out[12 + 6];
    memset(out, 0xAB, sizeof out);
    x[7] = NAN;
    x[9] = INFINITY;
    CHECK_ERR(qtk_quantize_into(x, shape, 2, &s, NULL, out, sizeof out), QTK_E_VALUE,
              "input value at index 7 (coordinates [1, 3]) is NaN");
    for (size_t i = 0; i < sizeof out; i++) CHECK(out[i] == 0xAB); /* nothing written */
    x[7] = 0;
    CHECK_ERR(qtk_quantize_into(x, shape, 2, &s, NULL, out, sizeof out), QTK_E_VALUE, "index 9 (coordinates [2, 1]) is +inf");
    x[9] = -INFINITY;
    qtk_quantize_options o = {.calibration = QTK_CALIB_ABSMEAN};
    CHECK_ERR(qtk_quantize_into(x, shape, 2, &s, &o, out, sizeof out), QTK_E_VALUE, "is -inf");
    float given[3] = {1, 1, 1};
    qtk_quantize_options og = {.scales = given, .n_scales = 3};
    CHECK_ERR(qtk_quantize_into(x, shape, 2, &s, &og, out, sizeof out), QTK_E_VALUE, "index 9");
}

static void given_scale_errors(void) {
    size_t shape[2] = {2, 8};
    float x[16] = {1, 2, 3};
    uint8_t out[256];
    qtk_scheme s = parse("q8s,block=8:f16");
    float sc[2] = {1, NAN};
    qtk_quantize_options o = {.scales = sc, .n_scales = 2};
    CHECK_ERR(qtk_quantize_into(x, shape, 2, &s, &o, out, 16 + 4), QTK_E_VALUE, "given scale 1 is NaN");
    sc[1] = INFINITY;
    CHECK_ERR(qtk_quantize_into(x, shape, 2, &s, &o, out, 16 + 4), QTK_E_VALUE, "given scale 1 is infinite");
    o.n_scales = 3;
    CHECK_ERR(qtk_quantize_into(x, shape, 2, &s, &o, out, 16 + 4), QTK_E_LENGTH, "3 scales given; the scheme and shape have 2");
    /* negative scales: fine for f16, refused for ue8m0/ue4m3 */
    sc[1] = -0.5f;
    o.n_scales = 2;
    CHECK_OK(qtk_quantize_into(x, shape, 2, &s, &o, out, 16 + 4));
    qtk_scheme u = parse("q8s,block=8:ue4m3");
    CHECK_ERR(qtk_quantize_into(x, shape, 2, &u, &o, out, 16 + 2), QTK_E_VALUE, "given scale 1 is -0.5 but ue4m3 scales are unsigned");
    qtk_scheme u8 = parse("q8s,block=8:ue8m0");
    CHECK_ERR(qtk_quantize_into(x, shape, 2, &u8, &o, out, 16 + 2), QTK_E_VALUE, "ue8m0 scales are unsigned");
    /* globals */
    qtk_scheme two = parse("q8s,block=8:f16,tensor=f32");
    sc[1] = 0.5f;
    CHECK_ERR(qtk_quantize_into(x, shape, 2, &two, &o, out, 16 + 4 + 4), QTK_E_ARG, "need a global scale too");
    float g = NAN;
    o.global = &g;
    CHECK_ERR(qtk_quantize_into(x, shape, 2, &two, &o, out, 16 + 4 + 4), QTK_E_VALUE, "global scale is NaN");
    g = 1e35f;
    sc[0] = 60000.0f;
    CHECK_ERR(qtk_quantize_into(x, shape, 2, &two, &o, out, 16 + 4 + 4), QTK_E_VALUE, "overflows f32");
    g = 2.0f;
    CHECK_ERR(qtk_quantize_into(x, shape, 2, &s, &o, out, 16 + 4), QTK_E_ARG, "not two-level");
    qtk_quantize_options og = {.global = &g};
    CHECK_ERR(qtk_quantize_into(x, shape, 2, &s, &og, out, 16 + 4), QTK_E_ARG, "global scale was given without block scales");
    /* absmean on a two-level scheme */
    qtk_quantize_options oa = {.calibration = QTK_CALIB_ABSMEAN};
    CHECK_ERR(qtk_quantize_into(x, shape, 2, &two, &oa, out, 16 + 4 + 4), QTK_E_SCHEME, "absmean calibration is not defined for two-level");
    oa.calibration = (qtk_calibration)7;
    CHECK_ERR(qtk_quantize_into(x, shape, 2, &s, &oa, out, 16 + 4), QTK_E_ARG, "calibration 7");
}

static void bad_bytes(void) {
    size_t shape[1] = {4};
    qtk_tensor *t = NULL;
    /* f16 scale that is inf */
    qtk_scheme s = parse("q8s,block=4:f16,store=native");
    uint8_t b[6] = {1, 2, 3, 4, 0x00, 0x7C};
    CHECK_ERR(qtk_tensor_from_bytes(b, 6, shape, 1, &s, &t), QTK_E_VALUE, "scale 0 (byte 4) is not finite (f16 code 0x7c00)");
    /* negative stored f16 scales are accepted */
    b[5] = 0xBC;
    CHECK_OK(qtk_tensor_from_bytes(b, 6, shape, 1, &s, &t));
    float y[4];
    CHECK_OK(qtk_dequantize(t, QTK_DTYPE_F32, y, 4));
    CHECK_BITS(y[0], -1.0f);
    qtk_tensor_free(t);
    /* ue4m3 with the sign bit, and its NaN */
    qtk_scheme u = parse("q8s,block=4:ue4m3,store=native");
    uint8_t c[5] = {1, 2, 3, 4, 0xB8};
    CHECK_ERR(qtk_tensor_from_bytes(c, 5, shape, 1, &u, &t), QTK_E_VALUE, "the sign bit of a ue4m3 scale must be 0");
    c[4] = 0x7F;
    CHECK_ERR(qtk_tensor_from_bytes(c, 5, shape, 1, &u, &t), QTK_E_VALUE, "not finite");
    qtk_scheme e8 = parse("q8s,block=4:ue8m0,store=native");
    c[4] = 0xFF;
    CHECK_ERR(qtk_tensor_from_bytes(c, 5, shape, 1, &e8, &t), QTK_E_VALUE, "ue8m0 code 0xff");
    /* two-level global */
    qtk_scheme two = parse("q8s,block=4:ue4m3,tensor=f32,store=native");
    uint8_t d[9] = {1, 2, 3, 4, 0x38, 0x00, 0x00, 0xC0, 0x7F};
    CHECK_ERR(qtk_tensor_from_bytes(d, 9, shape, 1, &two, &t), QTK_E_VALUE, "global scale (byte 5) is not finite");
    /* native sub-byte fields must be sign-extended / in range */
    qtk_scheme n4 = parse("q4f,store=native");
    uint8_t e[8] = {0x07, 0xF8, 0x08, 0, 0, 0, 0x80, 0x3F};
    CHECK_ERR(qtk_tensor_from_bytes(e, 8, shape, 1, &n4, &t), QTK_E_VALUE, "native field at index 2 (coordinates [2]) is 0x08");
    qtk_scheme nfp = parse("e2m1,store=native");
    uint8_t f[8] = {0x0F, 0x10, 0, 0, 0, 0, 0x80, 0x3F};
    CHECK_ERR(qtk_tensor_from_bytes(f, 8, shape, 1, &nfp, &t), QTK_E_VALUE, "index 1");
    /* lookup table entries must be finite */
    qtk_scheme nf = parse("q4f,table=nf4,store=native");
    uint8_t g[4 + 4 + 64];
    memset(g, 0, sizeof g);
    g[4 + 4 + 4 * 3 + 3] = 0x7F;
    g[4 + 4 + 4 * 3 + 2] = 0xC0;
    CHECK_ERR(qtk_tensor_from_bytes(g, sizeof g, shape, 1, &nf, &t), QTK_E_VALUE, "lookup table entry 3");
    CHECK_ERR(qtk_bytes_check(g, sizeof g, shape, 1, &nf), QTK_E_VALUE, "lookup table entry 3");
    y[0] = 0;
    CHECK_ERR(qtk_dequantize_bytes(g, sizeof g, shape, 1, &nf, QTK_DTYPE_F32, y, 4), QTK_E_VALUE, "lookup table entry 3");
}

static void shape_errors(void) {
    float x[16] = {0};
    uint8_t out[64];
    size_t shape1[1] = {16};
    qtk_scheme s = parse("q8f,block=4x4:f16");
    qtk_tensor *t = NULL;
    CHECK_ERR(qtk_quantize(x, shape1, 1, &s, NULL, &t), QTK_E_SHAPE, "block 4x4 has 2 dims but the tensor 16 has rank 1");
    qtk_scheme p = parse("e2m1,store=packed:1");
    CHECK_ERR(qtk_quantize_into(x, shape1, 1, &p, NULL, out, sizeof out), QTK_E_SHAPE, "pack dimension 1 does not exist");
    CHECK_ERR(qtk_tensor_from_bytes(out, 12, shape1, 1, &p, &t), QTK_E_SHAPE, "pack dimension 1");
    size_t shape9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK_ERR(qtk_quantize(x, shape9, 9, &s, NULL, &t), QTK_E_SHAPE, "rank 9");
}

static void table_without_nonzero_entry(void) {
    float zeros[4] = {0, 0, 0, 0};
    CHECK_OK(qtk_table_register("zeros", zeros, 4));
    qtk_scheme s = parse("q2f,table=zeros");
    float x[4] = {1, 2, 3, 4};
    size_t shape[1] = {4};
    qtk_tensor *t = NULL;
    CHECK_ERR(qtk_quantize(x, shape, 1, &s, NULL, &t), QTK_E_SCHEME, "table 'zeros' has no non-zero entry");
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

static void allocation_failure(void) {
    qtk_allocator a = {fail_alloc, pass_free, NULL};
    qtk_set_allocator(&a);
    qtk_scheme s = parse("nvfp4"), d = parse("q4f,block=32:f16");
    size_t shape[2] = {8, 64};
    float x[8 * 64];
    for (int i = 0; i < 8 * 64; i++) x[i] = (float)i;
    /* every allocation point in quantize, dequantize and convert, one at a time */
    int saw_nomem = 0;
    for (int budget = 0; budget < 40; budget++) {
        alloc_budget = budget;
        qtk_tensor *t = NULL, *c = NULL;
        qtk_status st = qtk_quantize(x, shape, 2, &s, NULL, &t);
        if (st == QTK_OK) {
            float y[8 * 64];
            st = qtk_dequantize(t, QTK_DTYPE_F32, y, 8 * 64);
            if (st == QTK_OK) st = qtk_convert(t, &d, NULL, &c);
        }
        if (st != QTK_OK) {
            CHECK_MSG(st == QTK_E_NOMEM, "budget %d: %s: %s", budget, qtk_status_name(st), qtk_last_error());
            CHECK(strstr(qtk_last_error(), "out of memory") != NULL);
            saw_nomem++;
        }
        qtk_tensor_free(t);
        qtk_tensor_free(c);
    }
    alloc_budget = -1;
    qtk_set_allocator(NULL);
    CHECK(saw_nomem >= 5);
}

/* Each thread sees its own last error. */
static void *thread_err(void *arg) {
    const char *spec = arg;
    qtk_scheme s;
    for (int i = 0; i < 2000; i++) {
        if (qtk_scheme_parse(spec, &s) == QTK_OK) return (void *)1;
        if (!strstr(qtk_last_error(), spec)) return (void *)2;
    }
    return NULL;
}

static void per_thread_messages(void) {
    pthread_t th[4];
    const char *specs[4] = {"bad1", "q8f,block=0:f16", "q8f,foo=bar", "q5q"};
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, thread_err, (void *)(uintptr_t)specs[i]);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        CHECK_MSG(r == NULL, "thread %d saw another thread's message (%p)", i, r);
    }
    qtk_clear_error();
    CHECK(qtk_last_error()[0] == '\0');
    CHECK(strcmp(qtk_status_name(QTK_E_SHAPE), "QTK_E_SHAPE") == 0);
    CHECK(strcmp(qtk_status_name((qtk_status)99), "QTK_E_UNKNOWN") == 0);
}

TEST_MAIN("errors", T(null_arguments), T(wrong_lengths), T(nonfinite_inputs), T(given_scale_errors), T(bad_bytes),
          T(shape_errors), T(table_without_nonzero_entry), T(allocation_failure), T(per_thread_messages))
