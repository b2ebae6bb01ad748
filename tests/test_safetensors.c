/* test_safetensors.c — the safetensors container and qtk's convention for quantized
 * tensors (docs/safetensors-quantized.md): the exact header qtk writes, zero-copy loads,
 * companions in any order, and every check of the safetensors reader (header size, JSON,
 * duplicates, contiguous in-bounds offsets, sizes, dtypes) plus the convention's own. */
#include "ckpt_util.h"

#include "io/checkpoint.h"

static qtk_status open_st(const uint8_t *f, size_t n, qtk_ckpt **out) {
    qtk_ckpt *c = NULL;
    qtk_status st = qtk_ckpt_open_memory(f, n, "t.safetensors", NULL, &c);
    if (out) *out = c;
    else qtk_ckpt_close(c);
    return st;
}

static qtk_status open_json(const char *json, size_t data_len) {
    static uint8_t data[4096];
    size_t n;
    uint8_t *f = st_assemble(json, data, data_len, &n);
    qtk_status st = open_st(f, n, NULL);
    free(f);
    return st;
}

/* The header qtk writes for an NVFP4 matrix and an F32 bias, byte for byte. */
static void convention_header(void) {
    tmp_dir_make();
    qtk__desc d;
    qtk__desc_init(&d);
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("nvfp4", &s));
    size_t ws[2] = {4, 32}, bs[1] = {4};
    CHECK_OK(qtk__desc_add_quantized(&d, "w", &s, ws, 2, NULL));
    CHECK_OK(qtk__desc_add_raw(&d, "b", QTK_ELEM_F32, bs, 1, NULL));
    CHECK_EQ_U(d.tensors[0].nbytes, 76); /* 64 values + 8 ue4m3 scales + 4 global */
    float x[128];
    uint64_t seed = 11;
    for (int i = 0; i < 128; i++) x[i] = trand_normal(&seed);
    uint8_t q[76], bias[16] = {0};
    CHECK_OK(qtk_quantize_into(x, ws, 2, &s, NULL, q, sizeof q));
    const void *bytes[2] = {q, bias};
    CHECK_OK(qtk__ckpt_write(tmp_path("w.safetensors"), QTK_CKPT_SAFETENSORS, &d, bytes, 0));
    size_t n;
    uint8_t *f = slurp(tmp_path("w.safetensors"), &n);
    const char *want =
        "{\"__metadata__\":{\"qtk:convention\":\"1\",\"qtk:scheme:w\":\"e2m1,block=16:ue4m3,tensor=f32,store=packed:0\","
        "\"qtk:shape:w\":\"4x32\"},"
        "\"w\":{\"dtype\":\"U8\",\"shape\":[4,16],\"data_offsets\":[0,64]},"
        "\"w.qtk_scales\":{\"dtype\":\"F8_E4M3\",\"shape\":[4,2],\"data_offsets\":[64,72]},"
        "\"w.qtk_global\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[72,76]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[76,92]}}";
    size_t wl = strlen(want), hl = (wl + 7) / 8 * 8;
    CHECK(f && n == 8 + hl + 92);
    if (f && n == 8 + hl + 92) {
        CHECK_EQ_U(f[0] | f[1] << 8, hl);
        CHECK_MSG(memcmp(f + 8, want, wl) == 0, "header:\n got  %.*s\n want %s", (int)wl, (char *)f + 8, want);
        for (size_t i = wl; i < hl; i++) CHECK(f[8 + i] == ' ');
        CHECK(memcmp(f + 8 + hl, q, 76) == 0); /* Burn's payload, contiguous */
    }
    /* read back: one quantized tensor, loaded without a copy */
    qtk_ckpt *c = NULL;
    CHECK_OK(open_st(f, n, &c));
    if (c) {
        const qtk__desc *r = qtk__ckpt_desc(c);
        CHECK_EQ_U(r->n_tensors, 2);
        CHECK_EQ_U(r->n_meta, 0); /* qtk's own keys are not file metadata */
        CHECK(r->tensors[0].quantized && qtk_scheme_equal(&r->tensors[0].scheme, &s));
        qtk_ckpt_view v;
        CHECK_OK(qtk_ckpt_load(c, 0, &v));
        CHECK(v.owned == NULL && v.len == 76 && memcmp(v.data, q, 76) == 0);
        qtk_ckpt_unload(c, &v);
        qtk_ckpt_close(c);
    }
    free(f);
    qtk__desc_free(&d);
    tmp_dir_remove();
}

/* Companions may come in any order in the data (another writer's choice). */
static void companions_any_order(void) {
    /* q8s,block=2:f16 on [4]: values 4 bytes, scales 2 x f16 */
    uint8_t data[8] = {0x00, 0x38, 0x00, 0x3c, /* scales 0.5, 1.0 (f16) */ 1, 2, 0xff, 0x7f};
    const char *json =
        "{\"__metadata__\":{\"qtk:scheme:v\":\"q8s,block=2:f16,store=native\",\"qtk:shape:v\":\"4\"},"
        "\"v.qtk_scales\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]},"
        "\"v\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}";
    size_t n;
    uint8_t *f = st_assemble(json, data, 8, &n);
    qtk_ckpt *c = NULL;
    CHECK_OK(open_st(f, n, &c));
    if (c) {
        CHECK_EQ_U(qtk__ckpt_desc(c)->n_tensors, 1);
        qtk_ckpt_view v;
        CHECK_OK(qtk_ckpt_load(c, 0, &v));
        uint8_t want[8] = {1, 2, 0xff, 0x7f, 0x00, 0x38, 0x00, 0x3c};
        CHECK(v.owned != NULL && v.len == 8 && memcmp(v.data, want, 8) == 0);
        float y[4];
        const qtk_ckpt_tensor *t = &qtk__ckpt_desc(c)->tensors[0];
        CHECK_OK(qtk_dequantize_bytes(v.data, v.len, t->shape, 1, &t->scheme, QTK_DTYPE_F32, y, 4));
        CHECK_BITS(y[0], 0.5f);
        CHECK_BITS(y[2], -1.0f);
        CHECK_BITS(y[3], 127.0f);
        qtk_ckpt_unload(c, &v);
        qtk_ckpt_close(c);
    }
    free(f);
}

static void malformed(void) {
    /* a valid file, then truncated everywhere */
    uint8_t data[24] = {0};
    size_t n;
    const char *ok = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                     "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[16,24]}}";
    uint8_t *f = st_assemble(ok, data, 24, &n);
    CHECK_OK(open_st(f, n, NULL));
    for (size_t k = 0; k < n; k++) {
        qtk_status st = open_st(f, k, NULL);
        CHECK_MSG(st == QTK_E_FORMAT && qtk_last_error()[0], "truncated to %zu bytes: %s", k, qtk_status_name(st));
    }
    CHECK_ERR(open_st(f, 7, NULL), QTK_E_FORMAT, "the file is 7 bytes; safetensors starts with an 8-byte header length");
    CHECK_ERR(open_st(f, 40, NULL), QTK_E_FORMAT, "runs past the end of the file");
    CHECK_ERR(open_st(f, n - 1, NULL), QTK_E_FORMAT, "the tensors end at data byte 24 but the data section holds 23 bytes (truncated)");
    free(f);
    f = st_assemble(ok, data, 24, &n);
    f = realloc(f, n + 3);
    memset(f + n, 0, 3);
    CHECK_ERR(open_st(f, n + 3, NULL), QTK_E_FORMAT, "holds 27 bytes (trailing bytes)");
    f[0] = 0x01, f[1] = 0xe1, f[2] = 0xf5, f[3] = 0x05; /* 100 000 001 */
    CHECK_ERR(open_st(f, n, NULL), QTK_E_FORMAT, "exceeds safetensors' limit of 100000000 bytes");
    free(f);

    CHECK_ERR(open_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}", 16), QTK_E_FORMAT, "header JSON");
    CHECK_ERR(open_json("[1, 2]", 0), QTK_E_FORMAT, "not an object");
    CHECK_ERR(open_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                        "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8),
              QTK_E_FORMAT, "duplicate");
    CHECK_ERR(open_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                        "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12),
              QTK_E_FORMAT, "tensor 'b': data_offsets [8, 12) do not continue where the previous tensor ends (4)");
    CHECK_ERR(open_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                        "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8),
              QTK_E_FORMAT, "do not continue");
    CHECK_ERR(open_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8), QTK_E_LENGTH,
              "tensor 'a' (F32, shape 3) takes 12 bytes; its data_offsets [0, 8) give 8");
    CHECK_ERR(open_json("{\"a\":{\"dtype\":\"F7\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1), QTK_E_FORMAT, "unknown dtype 'F7'");
    CHECK_ERR(open_json("{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2), QTK_E_SHAPE,
              "3 F4 elements are 12 bits, not a whole number of bytes");
    CHECK_OK(open_json("{\"a\":{\"dtype\":\"F4\",\"shape\":[2,3],\"data_offsets\":[0,3]}}", 3));
    CHECK_ERR(open_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0), QTK_E_FORMAT, "shape[0] is not a non-negative integer");
    CHECK_ERR(open_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4), QTK_E_FORMAT, "lacks 'data_offsets'");
    CHECK_ERR(open_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4), QTK_E_FORMAT, "is not [begin, end]");
    CHECK_ERR(open_json("{\"__metadata__\":{\"k\":1}}", 0), QTK_E_FORMAT, "metadata 'k' is not a string");
    CHECK_OK(open_json("\t\n{}\r ", 0)); /* whitespace around the object is allowed */
    CHECK_OK(open_json("{\"__metadata__\":null}", 0));

    /* the qtk convention's own checks */
    CHECK_ERR(open_json("{\"__metadata__\":{\"qtk:scheme:x\":\"q8f\",\"qtk:shape:x\":\"4\"}}", 0), QTK_E_FORMAT,
              "metadata 'qtk:scheme:x' names no tensor");
    CHECK_ERR(open_json("{\"__metadata__\":{\"qtk:scheme:v\":\"q8f\",\"qtk:shape:v\":\"4\"},"
                        "\"v\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4),
              QTK_E_FORMAT, "quantized tensor 'v' (scheme 'q8f') lacks its companion 'v.qtk_scales'");
    CHECK_ERR(open_json("{\"__metadata__\":{\"qtk:scheme:v\":\"q8f\",\"qtk:shape:v\":\"4\"},"
                        "\"v\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                        "\"v.qtk_scales\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[4,8]}}", 8),
              QTK_E_FORMAT, "tensor 'v.qtk_scales' is F16 2; scheme 'q8f' on shape 4 needs F32 scalar");
    CHECK_ERR(open_json("{\"__metadata__\":{\"qtk:scheme:v\":\"q8f\",\"qtk:shape:v\":\"5\"},"
                        "\"v\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                        "\"v.qtk_scales\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[4,8]}}", 8),
              QTK_E_FORMAT, "tensor 'v' is U8 4; scheme 'q8f' on shape 5 needs U8 8");
    CHECK_ERR(open_json("{\"__metadata__\":{\"qtk:scheme:v\":\"q9f\",\"qtk:shape:v\":\"4\"},"
                        "\"v\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4),
              QTK_E_PARSE, "metadata 'qtk:scheme:v'");
    CHECK_ERR(open_json("{\"__metadata__\":{\"qtk:scheme:v\":\"q8f\"},"
                        "\"v\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4),
              QTK_E_FORMAT, "no 'qtk:shape:v'");
    CHECK_ERR(open_json("{\"__metadata__\":{\"qtk:convention\":\"2\"}}", 0), QTK_E_UNSUPPORTED, "qtk convention version '2'");
    CHECK_ERR(open_json("{\"__metadata__\":{\"qtk:param_id:a\":\"x1\"},"
                        "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4),
              QTK_E_FORMAT, "not an unsigned 64-bit number");
    /* a quantized tensor whose bytes are wrong for its scheme (a NaN f32 scale) fails on load */
    uint8_t bad[8] = {1, 2, 3, 4, 0x00, 0x00, 0xc0, 0x7f};
    f = st_assemble("{\"__metadata__\":{\"qtk:scheme:v\":\"q8f,store=native\",\"qtk:shape:v\":\"4\"},"
                    "\"v\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                    "\"v.qtk_scales\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[4,8]}}", bad, 8, &n);
    qtk_ckpt *c = NULL;
    CHECK_OK(open_st(f, n, &c));
    if (c) {
        qtk_ckpt_view v;
        CHECK_ERR(qtk_ckpt_load(c, 0, &v), QTK_E_VALUE, "tensor 'v': scale 0 (byte 4) is not finite");
        qtk_ckpt_close(c);
    }
    free(f);
}

static void writer_names(void) {
    tmp_dir_make();
    qtk__desc d;
    qtk__desc_init(&d);
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("q8f", &s));
    size_t sh[1] = {4};
    CHECK_OK(qtk__desc_add_quantized(&d, "v", &s, sh, 1, NULL));
    CHECK_OK(qtk__desc_add_raw(&d, "v.qtk_scales", QTK_ELEM_F32, sh, 1, NULL));
    qtk__ckpt_writer *w = NULL;
    CHECK_ERR(qtk__ckpt_writer_open(tmp_path("n.safetensors"), QTK_CKPT_SAFETENSORS, &d, 0, &w), QTK_E_ARG,
              "tensor name 'v.qtk_scales' is used twice");
    qtk__desc_free(&d);
    qtk__desc_init(&d);
    CHECK_OK(qtk__desc_add_quantized(&d, "v", &s, sh, 1, NULL));
    CHECK_OK(qtk__desc_add_meta(&d, "qtk:scheme:v", "q4f"));
    CHECK_ERR(qtk__ckpt_writer_open(tmp_path("n.safetensors"), QTK_CKPT_SAFETENSORS, &d, 0, &w), QTK_E_ARG,
              "metadata key 'qtk:scheme:v' is one qtk's safetensors convention writes itself");
    CHECK(!file_exists(tmp_path("n.safetensors")));
    CHECK_EQ_U(tmp_dir_count(".qtk-tmp-"), 0);
    qtk__desc_free(&d);
    /* the convention's keys are refused from a caller's metadata even where qtk would not write
     * them itself, as a file carrying them would not read back (fuzz_burnpack found one: a
     * burnpack's 'qtk:shape:me' with no tensor 'me'); other 'qtk:' keys pass */
    const char *reserved[] = {"qtk:shape:me", "qtk:scheme:me", "qtk:param_id:me", "qtk:scalar:me", "qtk:convention",
                              "qtk:layout"};
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
        qtk__desc_init(&d);
        CHECK_OK(qtk__desc_add_raw(&d, "a", QTK_ELEM_U8, sh, 1, NULL));
        CHECK_OK(qtk__desc_add_meta(&d, reserved[i], "1"));
        CHECK_ERR(qtk__ckpt_writer_open(tmp_path("n.safetensors"), QTK_CKPT_SAFETENSORS, &d, 0, &w), QTK_E_ARG,
                  "is one qtk's safetensors convention writes itself");
        CHECK(!file_exists(tmp_path("n.safetensors")));
        CHECK_EQ_U(tmp_dir_count(".qtk-tmp-"), 0);
        qtk__desc_free(&d);
    }
    qtk__desc_init(&d);
    CHECK_OK(qtk__desc_add_raw(&d, "a", QTK_ELEM_U8, sh, 1, NULL));
    CHECK_OK(qtk__desc_add_meta(&d, "qtk:shapes", "1"));
    CHECK_OK(qtk__desc_add_meta(&d, "qtk:conventions", "1"));
    CHECK_OK(qtk__ckpt_writer_open(tmp_path("n.safetensors"), QTK_CKPT_SAFETENSORS, &d, 0, &w));
    qtk__ckpt_writer_abort(w);
    qtk__desc_free(&d);
    /* scalars and parameter ids ride in __metadata__ */
    qtk__desc_init(&d);
    qtk_ckpt_tensor *t;
    CHECK_OK(qtk__desc_add_raw(&d, "a", QTK_ELEM_U8, sh, 1, &t));
    t->has_param_id = true;
    t->param_id = 18446744073709551615ull;
    qtk_ckpt_scalar sc[4] = {{.name = "f", .kind = QTK_SCALAR_FLOAT, .f = 0.1},
                             {.name = "i", .kind = QTK_SCALAR_INT, .i = INT64_MIN},
                             {.name = "u", .kind = QTK_SCALAR_UINT, .u = 7},
                             {.name = "b", .kind = QTK_SCALAR_BOOL, .b = true}};
    for (int i = 0; i < 4; i++) CHECK_OK(qtk__desc_add_scalar(&d, &sc[i]));
    uint8_t four[4] = {1, 2, 3, 4};
    const void *b[1] = {four};
    CHECK_OK(qtk__ckpt_write(tmp_path("s.safetensors"), QTK_CKPT_SAFETENSORS, &d, b, 0));
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(tmp_path("s.safetensors"), NULL, &c));
    if (c) {
        const qtk__desc *r = qtk__ckpt_desc(c);
        CHECK(r->tensors[0].has_param_id && r->tensors[0].param_id == 18446744073709551615ull);
        CHECK_EQ_U(r->n_scalars, 4);
        CHECK(r->n_scalars == 4 && r->scalars[0].f == 0.1 && r->scalars[1].i == INT64_MIN && r->scalars[2].u == 7 &&
              r->scalars[3].b);
        qtk_ckpt_close(c);
    }
    qtk__desc_free(&d);
    tmp_dir_remove();
}

TEST_MAIN("safetensors", T(convention_header), T(companions_any_order), T(malformed), T(writer_names))
