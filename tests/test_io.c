/* test_io.c — the .npy reader and writer: round trips, dtypes, byte orders, and malformed
 * files rejected with a message. */
#include "test.h"

#include "npy.h"

static void roundtrip_f32(void) {
    float v[6] = {1, -2, 3.5f, 0, -0.0f, 1e-40f};
    size_t shape[2] = {2, 3};
    uint8_t *b;
    size_t n;
    CHECK_OK(cli_npy_build(v, QTK_DTYPE_F32, shape, 2, &b, &n));
    CHECK(memcmp(b, "\x93NUMPY\x01\x00", 8) == 0);
    CHECK_EQ_U((10 + (b[8] | b[9] << 8)) % 64, 0);
    cli_npy a;
    CHECK_OK(cli_npy_parse(b, n, &a));
    CHECK_EQ_U(a.rank, 2);
    CHECK_EQ_U(a.shape[0], 2);
    CHECK_EQ_U(a.shape[1], 3);
    for (int i = 0; i < 6; i++) CHECK_BITS(a.data[i], v[i]);
    cli_npy_free(&a);
    free(b);
    /* rank 0 and rank 1 headers */
    CHECK_OK(cli_npy_build(v, QTK_DTYPE_F32, NULL, 0, &b, &n));
    CHECK(strstr((char *)b + 10, "'shape': ()") != NULL);
    CHECK_OK(cli_npy_parse(b, n, &a));
    CHECK_EQ_U(a.rank, 0);
    CHECK_EQ_U(a.numel, 1);
    cli_npy_free(&a);
    free(b);
    size_t s1[1] = {6};
    CHECK_OK(cli_npy_build(v, QTK_DTYPE_F32, s1, 1, &b, &n));
    CHECK(strstr((char *)b + 10, "'shape': (6,)") != NULL);
    free(b);
}

static uint8_t *make(const char *header, const void *data, size_t dlen, int version, size_t *n) {
    size_t hl = strlen(header), pre = version == 1 ? 10 : 12;
    uint8_t *b = malloc(pre + hl + dlen);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (uint8_t)version;
    b[7] = 0;
    if (version == 1) {
        b[8] = (uint8_t)hl;
        b[9] = (uint8_t)(hl >> 8);
    } else {
        for (int i = 0; i < 4; i++) b[8 + i] = (uint8_t)(hl >> (8 * i));
    }
    memcpy(b + pre, header, hl);
    memcpy(b + pre + hl, data, dlen);
    *n = pre + hl + dlen;
    return b;
}

static void dtypes_and_orders(void) {
    cli_npy a;
    size_t n;
    uint16_t h[2] = {0x3c00, 0xc000}; /* 1, -2 */
    uint8_t *b = make("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }\n", h, 4, 1, &n);
    CHECK_OK(cli_npy_parse(b, n, &a));
    CHECK_BITS(a.data[0], 1.0f);
    CHECK_BITS(a.data[1], -2.0f);
    cli_npy_free(&a);
    free(b);
    double d[2] = {0.1, -1e300};
    b = make("{\"descr\": \"<f8\", \"shape\": (2,), \"fortran_order\": False}", d, 16, 2, &n);
    CHECK_OK(cli_npy_parse(b, n, &a));
    CHECK_BITS(a.data[0], 0.1f);
    CHECK(isinf(a.data[1])); /* out of f32 range: the quantizer reports it */
    cli_npy_free(&a);
    free(b);
    /* Fortran order: a [2, 3, 2] array stored column-major reads as its row-major values */
    float col[12], want[12];
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 3; j++)
            for (size_t k = 0; k < 2; k++) {
                float v = (float)(100 * i + 10 * j + k);
                col[i + 2 * j + 6 * k] = v;      /* the first index moves fastest in the file */
                want[(i * 3 + j) * 2 + k] = v;   /* the last index moves fastest in memory */
            }
    b = make("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3, 2), }", col, sizeof col, 1, &n);
    CHECK_OK(cli_npy_parse(b, n, &a));
    CHECK(a.rank == 3 && a.shape[0] == 2 && a.shape[1] == 3 && a.shape[2] == 2);
    for (size_t i = 0; i < 12; i++) CHECK_BITS(a.data[i], want[i]);
    cli_npy_free(&a);
    free(b);
    b = make("{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }", col, 12, 1, &n); /* rank 1: the same order */
    CHECK_OK(cli_npy_parse(b, n, &a));
    for (size_t i = 0; i < 3; i++) CHECK_BITS(a.data[i], col[i]);
    cli_npy_free(&a);
    free(b);
    uint8_t be[8] = {0x3f, 0x80, 0, 0, 0xc0, 0, 0, 0}; /* big-endian 1, -2 */
    b = make("{'descr': '>f4', 'fortran_order': False, 'shape': (1, 2), }", be, 8, 3, &n);
    CHECK_OK(cli_npy_parse(b, n, &a));
    CHECK_BITS(a.data[0], 1.0f);
    CHECK_BITS(a.data[1], -2.0f);
    cli_npy_free(&a);
    free(b);
}

static void malformed(void) {
    cli_npy a;
    size_t n;
    float f[4] = {0};
    CHECK_ERR(cli_npy_parse((const uint8_t *)"hello world!", 12, &a), QTK_E_FORMAT, "not a .npy file");
    uint8_t *b = make("{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }", f, 16, 1, &n);
    CHECK_ERR(cli_npy_parse(b, n, &a), QTK_E_UNSUPPORTED, "dtype '<i4' is not supported");
    free(b);
    b = make("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", f, 16, 1, &n);
    CHECK_ERR(cli_npy_parse(b, n, &a), QTK_E_LENGTH, ".npy data is 16 bytes; shape and dtype '<f4' need 20");
    free(b);
    b = make("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), ", f, 16, 1, &n);
    CHECK_ERR(cli_npy_parse(b, n, &a), QTK_E_FORMAT, "malformed .npy header");
    free(b);
    b = make("{'descr': '<f4', 'shape': (4,), }", f, 16, 1, &n);
    CHECK_ERR(cli_npy_parse(b, n, &a), QTK_E_FORMAT, "lacks");
    free(b);
    b = make("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", f, 4, 1, &n);
    CHECK_ERR(cli_npy_parse(b, n, &a), QTK_E_SHAPE, "more than 8 dimensions");
    free(b);
    b = make("{'descr': '<f4', 'fortran_order': False, 'shape': (-4,), }", f, 16, 1, &n);
    CHECK_ERR(cli_npy_parse(b, n, &a), QTK_E_FORMAT, "not a non-negative integer");
    free(b);
    b = make("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'extra': 1}", f, 16, 1, &n);
    CHECK_ERR(cli_npy_parse(b, n, &a), QTK_E_FORMAT, "unknown key 'extra'");
    free(b);
    b = make("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", f, 16, 7, &n);
    CHECK_ERR(cli_npy_parse(b, n, &a), QTK_E_FORMAT, "version 7.0");
    free(b);
    uint8_t trunc[11] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0xff, 0x00, '{'};
    CHECK_ERR(cli_npy_parse(trunc, sizeof trunc, &a), QTK_E_FORMAT, "runs past the end");
    CHECK_ERR(cli_npy_read("/nonexistent/file.npy", &a), QTK_E_IO, "cannot open '/nonexistent/file.npy'");
}

TEST_MAIN("io", T(roundtrip_f32), T(dtypes_and_orders), T(malformed))
