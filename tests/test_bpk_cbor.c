/* test_bpk_cbor.c — burnpack's CBOR: BURNPACK.md §2.6's worked examples byte for byte, every
 * scheme family encoded and decoded back, Burn's limits (block dims <= 255), and the
 * pre-2026-08 scheme shape refused. */
#include "ckpt_util.h"

#include "burnpack/bpk_cbor.h"

static qtk_ckpt_tensor tensor(const char *name, const char *spec, const size_t *shape, int rank, qtk_scheme *s) {
    qtk_ckpt_tensor t = {0};
    CHECK_OK(qtk_scheme_parse(spec, s));
    t.name = name;
    t.quantized = true;
    t.scheme = *s;
    t.rank = rank;
    t.shape = shape;
    qtk_layout L;
    CHECK_OK(qtk_layout_compute(s, shape, rank, &L));
    t.numel = L.numel;
    t.nbytes = L.total_bytes;
    return t;
}

static void check_dtype_hex(const char *spec, const size_t *shape, int rank, const char *want_hex, size_t want_len) {
    qtk_scheme s;
    qtk_ckpt_tensor t = tensor("w", spec, shape, rank, &s);
    uint8_t *b = NULL;
    size_t n = 0;
    CHECK_OK(qtk__bpk_encode_dtype(&t, &b, &n));
    char *got = bytes_hex(b, n);
    CHECK_EQ_U(n, want_len);
    CHECK_MSG(strcmp(got, want_hex) == 0, "%s:\n got  %s\n want %s", spec, got, want_hex);
    /* and back */
    struct cbor_load_result res;
    cbor_item_t *it = cbor_load(b, n, &res);
    CHECK(it != NULL);
    qtk__bpk_dtype dt;
    CHECK_OK(qtk__bpk_decode_dtype(it, &dt));
    CHECK(dt.quantized);
    if (s.mode != QTK_MODE_LOOKUP) CHECK_MSG(qtk_scheme_equal(&dt.scheme, &s), "%s does not decode to itself", spec);
    cbor_decref(&it);
    free(got);
    free(b);
}

static const char hex_a[] =
    "a16651466c6f6174a56576616c7565635134466573746f7265a1695061636b656455333200646d6f64656953796d6d65747269636674656e736f72f6"
    "65626c6f636ba26473697a65a26773746f7261676585182001010101636c656e0165647479706563463136";
static const char hex_b[] =
    "a16651466c6f6174a56576616c75656445324d316573746f7265a16c5061636b65644e617469766500646d6f64656953796d6d65747269636674656e"
    "736f726346333265626c6f636ba26473697a65a26773746f72616765851001010101636c656e01656474797065655545344d33";
static const char hex_c[] =
    "a16651466c6f6174a56576616c7565635138466573746f7265a1695061636b656455333200646d6f64656953796d6d65747269636674656e736f72f6"
    "65626c6f636bf6";
static const char hex_d[] =
    "a26774656e736f7273a16177a3656474797065a16651466c6f6174a56576616c75656445324d316573746f7265a16c5061636b65644e61746976650064"
    "6d6f64656953796d6d65747269636674656e736f726346333265626c6f636ba26473697a65a26773746f72616765851001010101636c656e016564747970"
    "65655545344d3365736861706582184018206c646174615f6f6666736574738200190484686d65746164617461a166666f726d6174686275726e7061636b";

static void worked_examples(void) {
    size_t s64x32[2] = {64, 32}, s3x3[2] = {3, 3};
    check_dtype_hex("q4f,block=32:f16", s64x32, 2, hex_a, 103);              /* (a) */
    check_dtype_hex("nvfp4", s64x32, 2, hex_b, 111);                         /* (b) */
    check_dtype_hex("q8f", s3x3, 2, hex_c, 67);                              /* (c): the default scheme */
    check_dtype_hex("q4f,block=1x32:f16,store=u32:0", s64x32, 2, hex_a, 103); /* leading 1s dropped as Burn does */
}

/* (d): the whole metadata of a one-tensor file, and the file around it. */
static void whole_metadata(void) {
    qtk__desc d;
    qtk__desc_init(&d);
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("nvfp4", &s));
    size_t shape[2] = {64, 32}, starts[1] = {0};
    CHECK_OK(qtk__desc_add_quantized(&d, "w", &s, shape, 2, NULL));
    CHECK_OK(qtk__desc_add_meta(&d, "format", "burnpack"));
    CHECK_EQ_U(d.tensors[0].nbytes, 1156);
    uint8_t *b = NULL;
    size_t n = 0;
    CHECK_OK(qtk__bpk_encode_metadata(&d, starts, &b, &n));
    char *got = bytes_hex(b, n);
    CHECK_EQ_U(n, 185);
    CHECK_MSG(strcmp(got, hex_d) == 0, "metadata:\n got  %s\n want %s", got, hex_d);
    free(got);
    free(b);

    /* the file: D = 256, tensor bytes at [256, 1412) */
    float x[64 * 32];
    uint64_t seed = 5;
    for (int i = 0; i < 64 * 32; i++) x[i] = trand_normal(&seed);
    uint8_t payload[1156];
    CHECK_OK(qtk_quantize_into(x, shape, 2, &s, NULL, payload, sizeof payload));
    tmp_dir_make();
    const void *bytes[1] = {payload};
    CHECK_OK(qtk__ckpt_write(tmp_path("w.bpk"), QTK_CKPT_BURNPACK, &d, bytes, 0));
    size_t fn;
    uint8_t *f = slurp(tmp_path("w.bpk"), &fn);
    CHECK(f && fn == 1412);
    if (f && fn == 1412) {
        CHECK(memcmp(f, "NRUB\x01\x00\xb9\x00\x00\x00", 10) == 0); /* 185 = 0xb9 */
        uint8_t *want = hex_bytes(hex_d, &n);
        CHECK(memcmp(f + 10, want, 185) == 0);
        free(want);
        bool zeros = true;
        for (size_t i = 195; i < 256; i++) zeros &= f[i] == 0;
        CHECK(zeros);
        CHECK(memcmp(f + 256, payload, 1156) == 0);
    }
    free(f);
    tmp_dir_remove();
    qtk__desc_free(&d);
}

/* (e): scalars, keys sorted, shortest floats. */
static void scalars(void) {
    qtk__desc d;
    qtk__desc_init(&d);
    qtk_ckpt_scalar sc[5] = {
        {.name = "e", .kind = QTK_SCALAR_FLOAT, .f = 0.1}, {.name = "b", .kind = QTK_SCALAR_UINT, .u = 7},
        {.name = "a", .kind = QTK_SCALAR_INT, .i = -3},    {.name = "d", .kind = QTK_SCALAR_BOOL, .b = true},
        {.name = "c", .kind = QTK_SCALAR_FLOAT, .f = 0.5},
    };
    for (int i = 0; i < 5; i++) CHECK_OK(qtk__desc_add_scalar(&d, &sc[i]));
    uint8_t *b = NULL;
    size_t n = 0;
    CHECK_OK(qtk__bpk_encode_metadata(&d, NULL, &b, &n));
    char *got = bytes_hex(b, n);
    const char *want = "a2" "6774656e736f7273" "a0" "677363616c617273" "a5"
                       "6161" "a163496e74" "22"
                       "6162" "a16455496e74" "07"
                       "6163" "a165466c6f6174" "f93800"
                       "6164" "a164426f6f6c" "f5"
                       "6165" "a165466c6f6174" "fb3fb999999999999a";
    CHECK_MSG(strcmp(got, want) == 0, "scalars:\n got  %s\n want %s", got, want);
    free(got);
    free(b);
    qtk__desc_free(&d);
    /* Int 3 is a CBOR unsigned; a single-precision and a half subnormal */
    qtk__desc_init(&d);
    qtk_ckpt_scalar s2[3] = {{.name = "i", .kind = QTK_SCALAR_INT, .i = 3},
                             {.name = "s", .kind = QTK_SCALAR_FLOAT, .f = 0.1f},
                             {.name = "t", .kind = QTK_SCALAR_FLOAT, .f = 0x1p-20}};
    for (int i = 0; i < 3; i++) CHECK_OK(qtk__desc_add_scalar(&d, &s2[i]));
    CHECK_OK(qtk__bpk_encode_metadata(&d, NULL, &b, &n));
    got = bytes_hex(b, n);
    CHECK_MSG(strstr(got, "6169a163496e7403") != NULL, "Int 3: %s", got);
    CHECK_MSG(strstr(got, "a165466c6f6174fa3dcccccd") != NULL, "f32 0.1: %s", got);
    CHECK_MSG(strstr(got, "a165466c6f6174f90010") != NULL, "half subnormal 2^-20: %s", got);
    free(got);
    free(b);
    qtk__desc_free(&d);
}

/* Every family: each value, store, level and scale dtype encodes and decodes to itself. */
static void families(void) {
    const char *specs[] = {
        "q8f", "q8s", "q4f", "q4s", "q2f", "q2s", "e4m3", "e5m2", "e2m1",
        "q8f,store=native", "q4s,store=native", "q2f,store=packed", "e2m1,store=packed:1", "q4f,store=u32:1",
        "q8s,tensor=f16", "q8s,tensor=bf16", "e4m3,tensor=ue8m0", "q4f,tensor=ue4m3",
        "q4f,block=32:f16", "q4s,block=16:bf16", "q8f,block=4x8:f32", "e5m2,block=2x2x4:ue8m0", "e4m3,block=32:ue4m3",
        "q4s,block=32:ue4m3,tensor=f32", "q8s,block=16:f16,tensor=f32", "nvfp4", "mxfp4", "mxfp8",
        "q2s,block=1x2x2x2x4:f32",
    };
    size_t shape[5] = {2, 4, 8, 16, 32};
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        qtk_scheme s;
        qtk_ckpt_tensor t = tensor("x", specs[k], shape, 5, &s);
        uint8_t *b = NULL;
        size_t n = 0;
        CHECK_OK(qtk__bpk_encode_dtype(&t, &b, &n));
        struct cbor_load_result res;
        cbor_item_t *it = cbor_load(b, n, &res);
        qtk__bpk_dtype dt;
        CHECK(it && qtk__bpk_decode_dtype(it, &dt) == QTK_OK && dt.quantized);
        CHECK_MSG(qtk_scheme_equal(&dt.scheme, &s), "'%s' does not come back", specs[k]);
        if (it) cbor_decref(&it);
        free(b);
    }
    /* lookup: the mode is written, the table is not (Burn has no place for it) */
    qtk_scheme s;
    qtk_ckpt_tensor t = tensor("x", "nf4", shape + 3, 2, &s);
    uint8_t *b = NULL;
    size_t n = 0;
    CHECK_OK(qtk__bpk_encode_dtype(&t, &b, &n));
    char *h = bytes_hex(b, n);
    CHECK(strstr(h, "646d6f6465664c6f6f6b7570") != NULL); /* "mode": "Lookup" */
    free(h);
    free(b);
}

static void block_limits(void) {
    qtk_scheme s;
    size_t ok_shape[2] = {4, 255}, big[2] = {4, 256};
    qtk_ckpt_tensor t = tensor("w", "q4f,block=*:f32", ok_shape, 2, &s);
    uint8_t *b = NULL;
    size_t n = 0;
    CHECK_OK(qtk__bpk_encode_dtype(&t, &b, &n));
    char *h = bytes_hex(b, n);
    CHECK_MSG(strstr(h, "8518ff01010101") != NULL, "* resolves to 255: %s", h); /* storage [255, 1, 1, 1, 1] */
    free(h);
    free(b);
    t = tensor("w", "q4f,block=*:f32", big, 2, &s);
    CHECK_ERR(qtk__bpk_encode_dtype(&t, &b, &n), QTK_E_UNSUPPORTED, "tensor 'w': scheme 'q4f,block=*:f32' on shape 4x256 has a block dim of 256");
    t = tensor("w", "q8s,block=300:f16", big, 2, &s);
    CHECK_ERR(qtk__bpk_encode_dtype(&t, &b, &n), QTK_E_UNSUPPORTED, "at most 255");
    t = tensor("w", "q8s,block=2x*:f16", ok_shape, 2, &s);
    CHECK_OK(qtk__bpk_encode_dtype(&t, &b, &n));
    h = bytes_hex(b, n);
    CHECK_MSG(strstr(h, "850218ff010101") != NULL && strstr(h, "636c656e02") != NULL, "2x*: %s", h);
    free(h);
    free(b);
    /* a raw dtype Burn does not have */
    qtk_ckpt_tensor r = {.name = "f8", .elem = QTK_ELEM_F8_E4M3};
    CHECK_ERR(qtk__bpk_encode_dtype(&r, &b, &n), QTK_E_UNSUPPORTED, "tensor 'f8' is F8_E4M3, which burnpack has no dtype for");
    qtk_ckpt_tensor bu = {.name = "m", .elem = QTK_ELEM_BOOL_U32};
    CHECK_OK(qtk__bpk_encode_dtype(&bu, &b, &n));
    h = bytes_hex(b, n);
    CHECK_MSG(strcmp(h, "a164426f6f6c63553332") == 0, "Bool(U32): %s", h);
    free(h);
    free(b);
}

static qtk_status decode_hex_dtype(const uint8_t *b, size_t n, qtk__bpk_dtype *dt) {
    struct cbor_load_result res;
    cbor_item_t *it = cbor_load(b, n, &res);
    if (!it) return QTK_E_INTERNAL;
    qtk_status st = qtk__bpk_decode_dtype(it, dt);
    cbor_decref(&it);
    return st;
}

static void decode_errors(void) {
    qtk__bpk_dtype dt;
    cbuf c = {0};
    /* the pre-2026-08-19 shape: {value, param, store, level, mode} */
    cb_head(&c, 5, 1), cb_text(&c, "QFloat"), cb_head(&c, 5, 5);
    cb_text(&c, "value"), cb_text(&c, "Q8F"), cb_text(&c, "param"), cb_text(&c, "F32");
    cb_text(&c, "store"), cb_head(&c, 5, 1), cb_text(&c, "PackedU32"), cb_u(&c, 0);
    cb_text(&c, "level"), cb_text(&c, "Tensor"), cb_text(&c, "mode"), cb_text(&c, "Symmetric");
    CHECK_ERR(decode_hex_dtype(c.p, c.n, &dt), QTK_E_UNSUPPORTED, "before 2026-08-19");
    c.n = 0;
    cb_head(&c, 5, 1), cb_text(&c, "QFloat"), cb_head(&c, 5, 3);
    cb_text(&c, "value"), cb_text(&c, "Q8F"), cb_text(&c, "store"), cb_text(&c, "Native");
    cb_text(&c, "mode"), cb_text(&c, "Symmetric");
    CHECK_ERR(decode_hex_dtype(c.p, c.n, &dt), QTK_E_UNSUPPORTED, "neither 'tensor' nor 'block'");
    c.n = 0;
    cb_text(&c, "F8");
    CHECK_ERR(decode_hex_dtype(c.p, c.n, &dt), QTK_E_FORMAT, "unknown dtype 'F8'");
    c.n = 0;
    cb_text(&c, "Bool");
    CHECK_ERR(decode_hex_dtype(c.p, c.n, &dt), QTK_E_UNSUPPORTED, "pre-2026-03");
    c.n = 0;
    cb_head(&c, 5, 1), cb_text(&c, "QFloat"), cb_head(&c, 5, 5);
    cb_text(&c, "value"), cb_text(&c, "Q3F"), cb_text(&c, "store"), cb_text(&c, "Native");
    cb_text(&c, "mode"), cb_text(&c, "Symmetric"), cb_text(&c, "tensor"), cb_head(&c, 7, 22);
    cb_text(&c, "block"), cb_head(&c, 7, 22);
    CHECK_ERR(decode_hex_dtype(c.p, c.n, &dt), QTK_E_FORMAT, "QuantValue 'Q3F'");
    /* block storage entries: exactly 5 u8, len 1..5, no 0 */
    const char *bad_blocks[][2] = {
        {"83 01 01 01", "array of 5"}, {"85 190100 01 01 01 01", "storage[0] is not a u8"},
        {"85 00 01 01 01 01", "storage[0] is 0"},
    };
    for (int k = 0; k < 3; k++) {
        c.n = 0;
        cb_head(&c, 5, 1), cb_text(&c, "QFloat"), cb_head(&c, 5, 5);
        cb_text(&c, "value"), cb_text(&c, "Q8F"), cb_text(&c, "store"), cb_text(&c, "Native");
        cb_text(&c, "mode"), cb_text(&c, "Symmetric"), cb_text(&c, "tensor"), cb_head(&c, 7, 22);
        cb_text(&c, "block"), cb_head(&c, 5, 2), cb_text(&c, "size"), cb_head(&c, 5, 2), cb_text(&c, "storage");
        size_t hn;
        uint8_t *h = hex_bytes(bad_blocks[k][0], &hn);
        cb_raw(&c, h, hn);
        free(h);
        cb_text(&c, "len"), cb_u(&c, 1), cb_text(&c, "dtype"), cb_text(&c, "F32");
        CHECK_ERR(decode_hex_dtype(c.p, c.n, &dt), QTK_E_FORMAT, bad_blocks[k][1]);
    }
    /* floats where a simple value (null, a bool) or a name is read: libcbor asserts when asked
     * whether a float is null or a bool (the burn_scheme fuzzer's first finding), so qtk asks
     * whether an item is a simple value first; each is a format error, not an abort */
    for (int w = 0; w < 3; w++) {
        c.n = 0;
        cb_head(&c, 5, 1), cb_text(&c, "QFloat"), cb_head(&c, 5, 5);
        cb_text(&c, "value"), cb_text(&c, "Q4S"), cb_text(&c, "store"), cb_text(&c, "Native");
        cb_text(&c, "mode"), cb_text(&c, "Symmetric"), cb_text(&c, "tensor");
        static const uint8_t floats[3][9] = {{0xf9, 0x3e, 0x00}, {0xfa, 0x3f, 0xc0, 0, 0}, {0xfb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0}};
        cb_raw(&c, floats[w], w == 0 ? 3 : w == 1 ? 5 : 9);
        cb_text(&c, "block"), cb_head(&c, 7, 22);
        CHECK_ERR(decode_hex_dtype(c.p, c.n, &dt), QTK_E_FORMAT, "is not a ScaleDtype");
        /* and as 'block' */
        c.n = 0;
        cb_head(&c, 5, 1), cb_text(&c, "QFloat"), cb_head(&c, 5, 5);
        cb_text(&c, "value"), cb_text(&c, "Q4S"), cb_text(&c, "store"), cb_text(&c, "Native");
        cb_text(&c, "mode"), cb_text(&c, "Symmetric"), cb_text(&c, "tensor"), cb_head(&c, 7, 22);
        cb_text(&c, "block");
        cb_raw(&c, floats[w], w == 0 ? 3 : w == 1 ? 5 : 9);
        CHECK_ERR(decode_hex_dtype(c.p, c.n, &dt), QTK_E_FORMAT, "not a CBOR map");
    }
    {
        static const uint8_t bool_float[] = {0xa1, 0x64, 'B', 'o', 'o', 'l', 0xf9, 0x3c, 0x00}; /* {"Bool": 1.0} */
        struct cbor_load_result res;
        cbor_item_t *it = cbor_load(bool_float, sizeof bool_float, &res);
        CHECK(it != NULL);
        qtk_ckpt_scalar sc;
        if (it) CHECK_ERR(qtk__bpk_decode_scalar(it, &sc), QTK_E_FORMAT, "scalar Bool is not a bool");
        if (it) cbor_decref(&it);
    }
    /* a duplicate struct field */
    c.n = 0;
    cb_head(&c, 5, 1), cb_text(&c, "QFloat"), cb_head(&c, 5, 6);
    cb_text(&c, "value"), cb_text(&c, "Q8F"), cb_text(&c, "value"), cb_text(&c, "Q8F");
    cb_text(&c, "store"), cb_text(&c, "Native"), cb_text(&c, "mode"), cb_text(&c, "Symmetric");
    cb_text(&c, "tensor"), cb_head(&c, 7, 22), cb_text(&c, "block"), cb_head(&c, 7, 22);
    CHECK_ERR(decode_hex_dtype(c.p, c.n, &dt), QTK_E_FORMAT, "field 'value' twice");
    free(c.p);
}

TEST_MAIN("bpk_cbor", T(worked_examples), T(whole_metadata), T(scalars), T(families), T(block_limits), T(decode_errors))
