/* test_burn_scheme.c — Burn's serialized QuantScheme through the public API
 * (qtk_scheme_from/to_burn_cbor, _json): BURNPACK.md §2.6's bytes, serde_json's text for the
 * same schemes, the shape before 2026-08-19 both ways, every SPEC scheme family round trip,
 * and every error path. */
#include "ckpt_util.h"

#include "qtk_ckpt.h"

/* BURNPACK.md §2.6 (a)-(c): the dtype {"QFloat": scheme}; the scheme is the bytes after the
 * 8-byte wrapper head (a1 66 "QFloat"). */
static const char hex_a[] =
    "a16651466c6f6174a56576616c7565635134466573746f7265a1695061636b656455333200646d6f64656953796d6d65747269636674656e736f72f6"
    "65626c6f636ba26473697a65a26773746f7261676585182001010101636c656e0165647479706563463136";
static const char hex_b[] =
    "a16651466c6f6174a56576616c75656445324d316573746f7265a16c5061636b65644e617469766500646d6f64656953796d6d65747269636674656e"
    "736f726346333265626c6f636ba26473697a65a26773746f72616765851001010101636c656e01656474797065655545344d33";
static const char hex_c[] =
    "a16651466c6f6174a56576616c7565635138466573746f7265a1695061636b656455333200646d6f64656953796d6d65747269636674656e736f72f6"
    "65626c6f636bf6";

static void check_cbor(const char *spec, const char *dtype_hex) {
    qtk_scheme s, back;
    CHECK_OK(qtk_scheme_parse(spec, &s));
    uint8_t buf[256];
    size_t n = 0;
    CHECK_OK(qtk_scheme_to_burn_cbor(&s, NULL, 0, QTK_BURN_CURRENT, buf, sizeof buf, &n));
    char *got = bytes_hex(buf, n);
    CHECK_MSG(strcmp(got, dtype_hex + 16) == 0, "%s:\n got  %s\n want %s", spec, got, dtype_hex + 16);
    free(got);
    /* the scheme alone and the whole dtype both decode to it */
    qtk_burn_form form = QTK_BURN_LEGACY;
    CHECK_OK(qtk_scheme_from_burn_cbor(buf, n, &back, &form));
    CHECK(qtk_scheme_equal(&back, &s));
    CHECK_EQ_U(form, QTK_BURN_CURRENT);
    size_t dn;
    uint8_t *d = hex_bytes(dtype_hex, &dn);
    CHECK_EQ_U(dn, n + 8);
    CHECK_OK(qtk_scheme_from_burn_cbor(d, dn, &back, NULL));
    CHECK(qtk_scheme_equal(&back, &s));
    free(d);
}

static void worked_examples(void) {
    check_cbor("q4f,block=32:f16", hex_a);
    check_cbor("nvfp4", hex_b);
    check_cbor("q8f", hex_c);
}

static void check_json(const char *spec, qtk_burn_form form, const char *want) {
    qtk_scheme s, back;
    CHECK_OK(qtk_scheme_parse(spec, &s));
    char buf[512];
    size_t n = 0;
    CHECK_OK(qtk_scheme_to_burn_json(&s, NULL, 0, form, buf, sizeof buf, &n));
    CHECK_MSG(strcmp(buf, want) == 0, "%s:\n got  %s\n want %s", spec, buf, want);
    CHECK_EQ_U(n, strlen(want) + 1);
    qtk_burn_form f = (qtk_burn_form)7;
    CHECK_OK(qtk_scheme_from_burn_json(want, strlen(want), &back, &f));
    CHECK_MSG(qtk_scheme_equal(&back, &s), "%s: JSON does not decode to itself", spec);
    CHECK_EQ_U(f, form);
    /* the JSON and the CBOR of one form are the same tree */
    uint8_t cb[256];
    size_t cn;
    CHECK_OK(qtk_scheme_to_burn_cbor(&s, NULL, 0, form, cb, sizeof cb, &cn));
    CHECK_OK(qtk_scheme_from_burn_cbor(cb, cn, &back, &f));
    CHECK(qtk_scheme_equal(&back, &s));
    CHECK_EQ_U(f, form);
}

static void json_forms(void) {
    /* serde_json::to_string of the same QuantScheme values */
    check_json("q4f,block=32:f16", QTK_BURN_CURRENT,
               "{\"value\":\"Q4F\",\"store\":{\"PackedU32\":0},\"mode\":\"Symmetric\",\"tensor\":null,"
               "\"block\":{\"size\":{\"storage\":[32,1,1,1,1],\"len\":1},\"dtype\":\"F16\"}}");
    check_json("nvfp4", QTK_BURN_CURRENT,
               "{\"value\":\"E2M1\",\"store\":{\"PackedNative\":0},\"mode\":\"Symmetric\",\"tensor\":\"F32\","
               "\"block\":{\"size\":{\"storage\":[16,1,1,1,1],\"len\":1},\"dtype\":\"UE4M3\"}}");
    check_json("q8s,store=native", QTK_BURN_CURRENT,
               "{\"value\":\"Q8S\",\"store\":\"Native\",\"mode\":\"Symmetric\",\"tensor\":null,\"block\":null}");
    check_json("e4m3,block=128x128:f32", QTK_BURN_CURRENT,
               "{\"value\":\"E4M3\",\"store\":{\"PackedU32\":0},\"mode\":\"Symmetric\",\"tensor\":null,"
               "\"block\":{\"size\":{\"storage\":[128,128,1,1,1],\"len\":2},\"dtype\":\"F32\"}}");
    /* the shape before 2026-08-19 */
    check_json("q4f,block=32:f16", QTK_BURN_LEGACY,
               "{\"value\":\"Q4F\",\"param\":\"F16\",\"store\":{\"PackedU32\":0},"
               "\"level\":{\"Block\":{\"storage\":[32,1,1,1,1],\"len\":1}},\"mode\":\"Symmetric\"}");
    check_json("q8s,tensor=bf16,store=u32:1", QTK_BURN_LEGACY,
               "{\"value\":\"Q8S\",\"param\":\"BF16\",\"store\":{\"PackedU32\":1},\"level\":\"Tensor\",\"mode\":\"Symmetric\"}");
    check_json("nvfp4", QTK_BURN_LEGACY,
               "{\"value\":\"E2M1\",\"param\":\"UE4M3\",\"store\":{\"PackedNative\":0},\"level\":{\"BlockTensor\":"
               "{\"block\":{\"storage\":[16,1,1,1,1],\"len\":1},\"global\":\"F32\"}},\"mode\":\"Symmetric\"}");
    /* the old default (level Tensor, param F32) is an explicit f32 tensor level; qtk's default
     * writes as that */
    qtk_scheme s, d;
    const char *old_default = "{\"value\":\"Q8F\",\"param\":\"F32\",\"store\":{\"PackedU32\":0},\"level\":\"Tensor\","
                              "\"mode\":\"Symmetric\"}";
    CHECK_OK(qtk_scheme_from_burn_json(old_default, strlen(old_default), &s, NULL));
    CHECK_OK(qtk_scheme_parse("q8f,tensor=f32", &d));
    CHECK(qtk_scheme_equal(&s, &d));
    char buf[256];
    CHECK_OK(qtk_scheme_parse("q8f", &d));
    CHECK_OK(qtk_scheme_to_burn_json(&d, NULL, 0, QTK_BURN_LEGACY, buf, sizeof buf, NULL));
    CHECK(strcmp(buf, old_default) == 0);
    /* whitespace, key order and the DType wrapper are serde's business, not the bytes' */
    const char *spaced = " { \"QFloat\" : {\"mode\": \"Symmetric\", \"block\": null, \"tensor\": \"F16\", "
                         "\"store\": {\"PackedNative\": 1}, \"value\": \"Q4S\"} } ";
    CHECK_OK(qtk_scheme_from_burn_json(spaced, strlen(spaced), &s, NULL));
    CHECK_OK(qtk_scheme_parse("q4s,tensor=f16,store=packed:1", &d));
    CHECK(qtk_scheme_equal(&s, &d));
}

/* Every SPEC scheme family both ways in both forms (resolved on a shape where it has '*'). */
static void families(void) {
    static const char *specs[] = {
        "q8f", "q8s", "q4f", "q4s", "q2f", "q2s", "e4m3", "e5m2", "e2m1", "q8s,block=32:f16",
        "q8f,block=32:f32,store=native", "q4s,block=64:bf16,store=native", "q2f,block=16:f32,store=u32:1",
        "q4f,block=32:f16,store=packed", "e5m2,block=16:ue8m0,store=u32:1", "e2m1,block=32:ue8m0", "mxfp4", "mxfp8",
        "q4f,block=4x8:f16", "q8s,block=2x3x8:f32", "q4s,block=16:f16,tensor=f32", "q8s,block=32:ue4m3,tensor=f32",
        "e2m1,block=16:ue4m3,tensor=f32,store=packed:1", "q8s,block=1x1x2x3x8:f16",
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
        for (int form = 0; form < 2; form++) {
            qtk_scheme s, back;
            CHECK_OK(qtk_scheme_parse(specs[i], &s));
            uint8_t cb[256];
            char js[512];
            size_t cn = 0, jn = 0;
            CHECK_OK(qtk_scheme_to_burn_cbor(&s, NULL, 0, (qtk_burn_form)form, cb, sizeof cb, &cn));
            CHECK_OK(qtk_scheme_to_burn_json(&s, NULL, 0, (qtk_burn_form)form, js, sizeof js, &jn));
            qtk_burn_form f;
            CHECK_OK(qtk_scheme_from_burn_cbor(cb, cn, &back, &f));
            CHECK_MSG(qtk_scheme_equal(&back, &s) && f == (qtk_burn_form)form, "%s form %d (CBOR)", specs[i], form);
            CHECK_OK(qtk_scheme_from_burn_json(js, jn - 1, &back, &f));
            CHECK_MSG(qtk_scheme_equal(&back, &s) && f == (qtk_burn_form)form, "%s form %d (JSON)", specs[i], form);
        }
    /* '*' resolved on a shape; Burn drops leading 1s of the block */
    qtk_scheme s, back, want;
    size_t shape[2] = {4, 64};
    char js[512];
    CHECK_OK(qtk_scheme_parse("q8s,block=1x*:f32", &s));
    CHECK_OK(qtk_scheme_to_burn_json(&s, shape, 2, QTK_BURN_CURRENT, js, sizeof js, NULL));
    CHECK(strstr(js, "\"storage\":[64,1,1,1,1],\"len\":1") != NULL);
    CHECK_OK(qtk_scheme_from_burn_json(js, strlen(js), &back, NULL));
    CHECK_OK(qtk_scheme_parse("q8s,block=64:f32", &want));
    CHECK(qtk_scheme_equal(&back, &want));
    /* lookup: Burn names no table, so it comes back without one, and writes back the same */
    CHECK_OK(qtk_scheme_parse("nf4", &s));
    uint8_t cb[256];
    size_t cn;
    CHECK_OK(qtk_scheme_to_burn_cbor(&s, NULL, 0, QTK_BURN_CURRENT, cb, sizeof cb, &cn));
    CHECK_OK(qtk_scheme_from_burn_cbor(cb, cn, &back, NULL));
    CHECK_EQ_U(back.mode, QTK_MODE_LOOKUP);
    CHECK(back.table[0] == '\0');
    uint8_t cb2[256];
    size_t cn2;
    CHECK_OK(qtk_scheme_to_burn_cbor(&back, NULL, 0, QTK_BURN_CURRENT, cb2, sizeof cb2, &cn2));
    CHECK(cn2 == cn && memcmp(cb, cb2, cn) == 0);
    snprintf(back.table, sizeof back.table, "nf4");
    CHECK(qtk_scheme_equal(&back, &s));
}

static void errors(void) {
    qtk_scheme s, q;
    CHECK_OK(qtk_scheme_parse("q4f,block=32:f16", &q));
    uint8_t buf[256];
    char js[256];
    size_t n = 0;
    /* arguments */
    CHECK_ERR(qtk_scheme_from_burn_cbor(NULL, 3, &s, NULL), QTK_E_ARG, "NULL data");
    CHECK_ERR(qtk_scheme_from_burn_cbor(buf, 3, NULL, NULL), QTK_E_ARG, "NULL out");
    CHECK_ERR(qtk_scheme_from_burn_cbor(buf, 0, &s, NULL), QTK_E_LENGTH, "no bytes");
    CHECK_ERR(qtk_scheme_from_burn_json(NULL, 3, &s, NULL), QTK_E_ARG, "NULL json");
    CHECK_ERR(qtk_scheme_to_burn_cbor(NULL, NULL, 0, QTK_BURN_CURRENT, buf, sizeof buf, NULL), QTK_E_ARG, "NULL scheme");
    CHECK_ERR(qtk_scheme_to_burn_cbor(&q, NULL, 0, (qtk_burn_form)9, buf, sizeof buf, NULL), QTK_E_ARG, "qtk_burn_form 9");
    CHECK_ERR(qtk_scheme_to_burn_cbor(&q, NULL, 0, QTK_BURN_CURRENT, NULL, 8, NULL), QTK_E_ARG, "NULL buffer");
    CHECK_ERR(qtk_scheme_to_burn_cbor(&q, NULL, 2, QTK_BURN_CURRENT, buf, sizeof buf, NULL), QTK_E_ARG, "NULL shape");
    /* a buffer too small says how much it takes */
    CHECK_ERR(qtk_scheme_to_burn_cbor(&q, NULL, 0, QTK_BURN_CURRENT, buf, 10, &n), QTK_E_LENGTH, "95 bytes of CBOR");
    CHECK_EQ_U(n, 95);
    CHECK_ERR(qtk_scheme_to_burn_json(&q, NULL, 0, QTK_BURN_CURRENT, js, 10, &n), QTK_E_LENGTH, "the buffer holds 10");
    CHECK(n > 100);
    /* what Burn cannot hold */
    CHECK_OK(qtk_scheme_parse("q4_k", &s));
    CHECK_ERR(qtk_scheme_to_burn_cbor(&s, NULL, 0, QTK_BURN_CURRENT, buf, sizeof buf, NULL), QTK_E_UNSUPPORTED,
              "not one Burn's QuantScheme holds");
    CHECK_OK(qtk_scheme_parse("u4,block=128:f16,zero=u8", &s));
    CHECK_ERR(qtk_scheme_to_burn_json(&s, NULL, 0, QTK_BURN_CURRENT, js, sizeof js, NULL), QTK_E_UNSUPPORTED, "QtkQuant");
    CHECK_OK(qtk_scheme_parse("q8s,block=*:f32", &s));
    CHECK_ERR(qtk_scheme_to_burn_cbor(&s, NULL, 0, QTK_BURN_CURRENT, buf, sizeof buf, NULL), QTK_E_SHAPE, "give the tensor's shape");
    size_t wide[2] = {4, 300};
    CHECK_ERR(qtk_scheme_to_burn_cbor(&s, wide, 2, QTK_BURN_CURRENT, buf, sizeof buf, NULL), QTK_E_UNSUPPORTED,
              "block dim of 300");
    CHECK_OK(qtk_scheme_parse("q8s,block=256:f32", &s));
    CHECK_ERR(qtk_scheme_to_burn_cbor(&s, NULL, 0, QTK_BURN_LEGACY, buf, sizeof buf, NULL), QTK_E_UNSUPPORTED, "at most 255");
    size_t small[2] = {4, 30};
    CHECK_OK(qtk_scheme_parse("q8s,block=2x3x8:f32", &s));
    CHECK_ERR(qtk_scheme_to_burn_cbor(&s, small, 2, QTK_BURN_CURRENT, buf, sizeof buf, NULL), QTK_E_SHAPE, "");
    /* CBOR: trailing bytes, truncated, not a map */
    size_t cn;
    CHECK_OK(qtk_scheme_to_burn_cbor(&q, NULL, 0, QTK_BURN_CURRENT, buf, sizeof buf, &cn));
    buf[cn] = 0x00;
    CHECK_ERR(qtk_scheme_from_burn_cbor(buf, cn + 1, &s, NULL), QTK_E_FORMAT, "1 bytes follow");
    CHECK_ERR(qtk_scheme_from_burn_cbor(buf, cn - 1, &s, NULL), QTK_E_FORMAT, "Burn QuantScheme (CBOR)");
    const uint8_t text[] = {0x63, 'Q', '8', 'F'};
    CHECK_ERR(qtk_scheme_from_burn_cbor(text, sizeof text, &s, NULL), QTK_E_FORMAT, "not a CBOR map");
    static uint8_t big[70000];
    CHECK_ERR(qtk_scheme_from_burn_cbor(big, sizeof big, &s, NULL), QTK_E_LENGTH, "at most 65536");
    /* JSON: syntax, duplicates, wrong names, both shapes at once, neither level key */
    struct {
        const char *json;
        qtk_status st;
        const char *msg;
    } bad[] = {
        {"{\"value\":\"Q4F\",", QTK_E_FORMAT, "line 1"},
        {"{\"value\":\"Q4F\",\"value\":\"Q4F\"}", QTK_E_FORMAT, "duplicate"},
        {"{\"value\":\"Q3F\",\"store\":\"Native\",\"mode\":\"Symmetric\",\"tensor\":null,\"block\":null}", QTK_E_FORMAT,
         "QuantValue 'Q3F'"},
        {"{\"value\":\"Q8F\",\"store\":\"Packed\",\"mode\":\"Symmetric\",\"tensor\":null,\"block\":null}", QTK_E_FORMAT,
         "QuantStore 'Packed'"},
        {"{\"value\":\"Q8F\",\"store\":\"Native\",\"mode\":\"Affine\",\"tensor\":null,\"block\":null}", QTK_E_FORMAT,
         "QuantMode 'Affine'"},
        {"{\"value\":\"Q8F\",\"store\":\"Native\",\"mode\":\"Symmetric\",\"tensor\":\"F8\",\"block\":null}", QTK_E_FORMAT,
         "'F8' is not a ScaleDtype"},
        {"{\"value\":\"Q8F\",\"store\":\"Native\",\"mode\":\"Symmetric\"}", QTK_E_FORMAT, "neither 'tensor' nor 'block'"},
        {"{\"value\":\"Q8F\",\"param\":\"F32\",\"store\":\"Native\",\"level\":\"Tensor\",\"mode\":\"Symmetric\",\"tensor\":null}",
         QTK_E_FORMAT, "both shapes"},
        {"{\"value\":\"Q8F\",\"param\":\"F32\",\"store\":\"Native\",\"mode\":\"Symmetric\"}", QTK_E_FORMAT, "lacks 'level'"},
        {"{\"value\":\"Q8F\",\"param\":\"F32\",\"store\":\"Native\",\"level\":\"Blocks\",\"mode\":\"Symmetric\"}",
         QTK_E_FORMAT, "QuantLevel 'Blocks'"},
        {"{\"value\":\"Q8F\",\"param\":\"F32\",\"store\":\"Native\",\"level\":{\"BlockTensor\":{\"block\":{\"storage\":[8,1,1,"
         "1,1],\"len\":1}}},\"mode\":\"Symmetric\"}",
         QTK_E_FORMAT, "lacks 'global'"},
        {"{\"value\":\"Q8F\",\"store\":\"Native\",\"mode\":\"Symmetric\",\"tensor\":null,\"block\":{\"size\":{\"storage\":[0,1,"
         "1,1,1],\"len\":1},\"dtype\":\"F16\"}}",
         QTK_E_FORMAT, "storage[0] is 0"},
        {"{\"value\":\"Q8F\",\"store\":\"Native\",\"mode\":\"Symmetric\",\"tensor\":null,\"block\":{\"size\":{\"storage\":[-1,1,"
         "1,1,1],\"len\":1},\"dtype\":\"F16\"}}",
         QTK_E_FORMAT, "storage[0] is not a u8"},
        {"{\"value\":\"E2M1\",\"store\":{\"PackedU32\":9},\"mode\":\"Symmetric\",\"tensor\":null,\"block\":null}",
         QTK_E_UNSUPPORTED, "dimension 9"},
        {"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", QTK_E_FORMAT, "deeper than"},
        {"\"Q8F\"", QTK_E_FORMAT, "not a CBOR map"},
        {"", QTK_E_FORMAT, "Burn QuantScheme (JSON)"},
    };
    /* the fuzzer's first finding: a float where 'tensor' is read (libcbor asserted); as CBOR and JSON */
    static const uint8_t float_tensor[] = {0xa5, 0x65, 'v', 'a', 'l', 'u', 'e', 0x63, 'Q', '4', 'S', 0x65, 's', 't',
                                           'o', 'r', 'e', 0x66, 'N', 'a', 't', 'i', 'v', 'e', 0x64, 'm', 'o', 'd',
                                           'e', 0x66, 'L', 'o', 'o', 'k', 'u', 'p', 0x66, 't', 'e', 'n', 's', 'o',
                                           'r', 0xfa, 0x65, 0x65, 0x64, 0x62, 0x42, 0x46, 0x31, 0x36};
    CHECK_ERR(qtk_scheme_from_burn_cbor(float_tensor, sizeof float_tensor, &s, NULL), QTK_E_FORMAT, "");
    const char *jf = "{\"value\":\"Q4S\",\"store\":\"Native\",\"mode\":\"Symmetric\",\"tensor\":1.5,\"block\":2.5}";
    CHECK_ERR(qtk_scheme_from_burn_json(jf, strlen(jf), &s, NULL), QTK_E_FORMAT, "is not a ScaleDtype");
    const char *jb = "{\"value\":\"Q4S\",\"store\":\"Native\",\"mode\":\"Symmetric\",\"tensor\":null,\"block\":2.5}";
    CHECK_ERR(qtk_scheme_from_burn_json(jb, strlen(jb), &s, NULL), QTK_E_FORMAT, "not a CBOR map");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_ERR(qtk_scheme_from_burn_json(bad[i].json, strlen(bad[i].json), &s, NULL), bad[i].st, bad[i].msg);
    /* a scheme Burn can say but qtk refuses: checked on decoding */
    const char *e2m1_u32 = "{\"value\":\"E2M1\",\"store\":\"Native\",\"mode\":\"Symmetric\",\"tensor\":\"UE8M0\",\"block\":null}";
    qtk_status st = qtk_scheme_from_burn_json(e2m1_u32, strlen(e2m1_u32), &s, NULL);
    CHECK_MSG(st == QTK_OK || st == QTK_E_SCHEME, "%s", qtk_last_error());
}

TEST_MAIN("burn_scheme", T(worked_examples), T(json_forms), T(families), T(errors))
