/* test_convert.c — qtk_convert equals quantize(dequantize(t)) bit for bit, across slabs,
 * packing dims, calibrations and caller-given scales. */
#include "test.h"

static qtk_scheme parse(const char *spec) {
    qtk_scheme s;
    memset(&s, 0, sizeof s);
    CHECK_OK(qtk_scheme_parse(spec, &s));
    return s;
}

static void check_pair(const char *from, const char *to, const size_t *shape, int rank, uint64_t *seed,
                       const qtk_quantize_options *o) {
    qtk_scheme a = parse(from), b = parse(to);
    size_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    float *x = malloc((n + 1) * sizeof(float)), *y = malloc((n + 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = trand_normal(seed) * (i % 61 == 0 ? 10.0f : 1.0f);
    qtk_tensor *t = NULL, *c = NULL, *r = NULL;
    CHECK_OK(qtk_quantize(x, shape, rank, &a, NULL, &t));
    CHECK_OK(qtk_dequantize(t, QTK_DTYPE_F32, y, n));
    qtk_status s1 = qtk_convert(t, &b, o, &c);
    qtk_status s2 = qtk_quantize(y, shape, rank, &b, o, &r);
    CHECK_MSG(s1 == s2, "%s -> %s: convert %s, quantize %s (%s)", from, to, qtk_status_name(s1), qtk_status_name(s2),
              qtk_last_error());
    if (s1 == QTK_OK && s2 == QTK_OK) {
        size_t n1, n2;
        const uint8_t *b1 = qtk_tensor_bytes(c, &n1), *b2 = qtk_tensor_bytes(r, &n2);
        CHECK_MSG(n1 == n2 && memcmp(b1, b2, n1) == 0, "%s -> %s on %zu elements: convert differs from quantize(dequantize)",
                  from, to, n);
        CHECK(qtk_scheme_equal(qtk_tensor_scheme(c), &b));
    }
    qtk_tensor_free(t);
    qtk_tensor_free(c);
    qtk_tensor_free(r);
    free(x);
    free(y);
}

static void pairs(void) {
    uint64_t seed = 5;
    const char *specs[] = {"nvfp4", "mxfp4", "mxfp8", "nf4", "q8f", "q4f,block=32:f16", "q2s,block=4x8:bf16",
                           "e5m2,block=*:f32,store=packed:1", "q4s,block=16x16:ue4m3,tensor=f32,store=u32:1",
                           "e4m3,tensor=ue8m0"};
    size_t n = sizeof specs / sizeof specs[0];
    size_t shape[2] = {48, 96};
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) check_pair(specs[i], specs[j], shape, 2, &seed, NULL);
}

/* more than one 64K-element slab; rows that do not divide the slab; u32 packing along a
 * non-last dim crossing slab boundaries */
static void across_slabs(void) {
    uint64_t seed = 6;
    size_t a[2] = {700, 333};
    check_pair("q8s,block=32:f16", "q4f,block=7x32:f16,store=u32:1", a, 2, &seed, NULL);
    check_pair("nvfp4", "q2s,store=u32:1", a, 2, &seed, NULL);
    qtk_quantize_options am = {.calibration = QTK_CALIB_ABSMEAN};
    check_pair("q8f", "q2s", a, 2, &seed, &am);
    check_pair("q8f", "q2s,block=*x1:f32", a, 2, &seed, &am);
    size_t wide[2] = {3, 100000};
    check_pair("q8s,block=*:f32", "q4s,block=*:bf16", wide, 2, &seed, NULL);
    check_pair("q8s,block=*:f32", "q2s", wide, 2, &seed, &am);
    size_t r3[3] = {5, 129, 257};
    check_pair("mxfp8", "e2m1,block=2x3x5:f16,store=packed:2", r3, 3, &seed, NULL);
}

static void given_scales(void) {
    uint64_t seed = 8;
    size_t shape[2] = {4, 64};
    float sc[8];
    for (int i = 0; i < 8; i++) sc[i] = 0.01f * (float)(i + 1) * (i % 3 ? 1.0f : -1.0f);
    qtk_quantize_options o = {.scales = sc, .n_scales = 8};
    check_pair("nvfp4", "q4s,block=32:f16", shape, 2, &seed, &o);
    o.n_scales = 7;
    check_pair("nvfp4", "q4s,block=32:f16", shape, 2, &seed, &o);
}

static void rank0_and_empty(void) {
    uint64_t seed = 9;
    check_pair("q8f", "e4m3", NULL, 0, &seed, NULL);
    size_t z[2] = {0, 8};
    check_pair("q8f,block=4:f16", "nvfp4", z, 2, &seed, NULL);
}

TEST_MAIN("convert", T(pairs), T(across_slabs), T(given_scales), T(rank0_and_empty))
