/* test_scheme.c — the scheme model: spec strings, presets, canonical form, validation
 * messages and the derived layout (sizes checked against Burn's worked examples). */
#include "oracle.h"
#include "test.h"

static qtk_scheme parse(const char *spec) {
    qtk_scheme s;
    memset(&s, 0, sizeof s);
    qtk_status st = qtk_scheme_parse(spec, &s);
    CHECK_MSG(st == QTK_OK, "parse('%s'): %s", spec, qtk_last_error());
    return s;
}

static void check_canonical(const char *in, const char *want) {
    qtk_scheme s = parse(in);
    char buf[256];
    CHECK_OK(qtk_scheme_format(&s, buf, sizeof buf, NULL));
    CHECK_MSG(strcmp(buf, want) == 0, "format(parse('%s')) = '%s', expected '%s'", in, buf, want);
    qtk_scheme back = parse(buf);
    CHECK_MSG(qtk_scheme_equal(&s, &back), "'%s' does not parse back to the same scheme", buf);
}

static void presets_expand(void) {
    check_canonical("nvfp4", "e2m1,block=16:ue4m3,tensor=f32,store=packed:0");
    check_canonical("mxfp4", "e2m1,block=32:ue8m0,store=packed:0");
    check_canonical("mxfp8", "e4m3,block=32:ue8m0,store=native");
    check_canonical("nf4", "q4f,table=nf4,block=64:f32");
    check_canonical("NVFP4", "e2m1,block=16:ue4m3,tensor=f32,store=packed:0");
    qtk_scheme s = parse("e2m1,store=packed,tensor=f32,block=16:UE4M3");
    CHECK(qtk_scheme_preset_name(&s) && strcmp(qtk_scheme_preset_name(&s), "nvfp4") == 0);
    s = parse("q8f");
    CHECK(qtk_scheme_preset_name(&s) == NULL);
}

static void canonical_forms(void) {
    check_canonical("q8f", "q8f");
    check_canonical("Q8F,STORE=U32:0", "q8f");
    check_canonical("q4s,block=1x32:f16", "q4s,block=32:f16");
    check_canonical("q4s,block=1x1x32:f16", "q4s,block=32:f16");
    check_canonical("q4s,block=1:f16", "q4s,block=1:f16");
    check_canonical("q4s,block=1x1:f16", "q4s,block=1:f16");
    check_canonical("q4f,block=2x16:bf16,store=u32:1", "q4f,block=2x16:bf16,store=u32:1");
    check_canonical("q8s,block=*:f32", "q8s,block=*:f32");
    check_canonical("q8s,block=*x1:f32", "q8s,block=*x1:f32");
    check_canonical("q8s,block=65535:f32", "q8s,block=65535:f32");
    check_canonical("e4m3,tensor=ue8m0", "e4m3,tensor=ue8m0");
    check_canonical("e4m3,tensor=f32", "e4m3,tensor=f32");
    check_canonical("q2s,store=native", "q2s,store=native");
    check_canonical("e2m1,store=packed:2", "e2m1,store=packed:2");
    check_canonical("q4f,table=iq4nl,block=32:f16", "q4f,table=iq4nl,block=32:f16");
    check_canonical("q8s,block=2x3x4x5x6:f32", "q8s,block=2x3x4x5x6:f32");
    check_canonical("q4s,block=32:ue4m3,tensor=f32", "q4s,block=32:ue4m3,tensor=f32");
    /* the same scheme with and without an explicit tensor=f32 compares equal */
    qtk_scheme a = parse("q8f"), b = parse("q8f,tensor=f32");
    CHECK(qtk_scheme_equal(&a, &b));
    qtk_scheme c = parse("q8f,block=32:f32");
    CHECK(!qtk_scheme_equal(&a, &c));
}

static void parse_fields(void) {
    qtk_scheme s = parse("q4f,block=2x*x16:f16,tensor=f32,store=u32:2");
    CHECK(s.value == QTK_VALUE_Q4F && s.mode == QTK_MODE_SYMMETRIC && s.store == QTK_STORE_U32 && s.pack_dim == 2);
    CHECK(s.block_rank == 3 && s.block[0] == 2 && s.block[1] == QTK_BLOCK_WHOLE && s.block[2] == 16);
    CHECK(s.block_dtype == QTK_DTYPE_F16 && s.tensor_dtype == QTK_DTYPE_F32);
    CHECK(qtk_scheme_is_two_level(&s));
    s = parse("nf4");
    CHECK(s.mode == QTK_MODE_LOOKUP && strcmp(s.table, "nf4") == 0 && s.block_rank == 1 && s.block[0] == 64);
    s = parse("e5m2,store=native");
    CHECK(s.store == QTK_STORE_NATIVE && s.block_rank == 0 && s.tensor_dtype == QTK_DTYPE_NONE);
}

static void parse_errors(void) {
    qtk_scheme s;
    CHECK_ERR(qtk_scheme_parse("", &s), QTK_E_PARSE, "empty");
    CHECK_ERR(qtk_scheme_parse("q7f", &s), QTK_E_PARSE, "'q7f' is not a value");
    CHECK_ERR(qtk_scheme_parse("q8f,block=0:f16", &s), QTK_E_PARSE, "block dim '0'");
    CHECK_ERR(qtk_scheme_parse("q8f,block=65536:f16", &s), QTK_E_PARSE, "block dim '65536'");
    CHECK_ERR(qtk_scheme_parse("q8f,block=32", &s), QTK_E_PARSE, "needs a scale dtype");
    CHECK_ERR(qtk_scheme_parse("q8f,block=32:f8", &s), QTK_E_PARSE, "'f8' is not a scale dtype");
    CHECK_ERR(qtk_scheme_parse("q8f,block=32:e4m3", &s), QTK_E_PARSE, "'e4m3' is not a scale dtype");
    CHECK_ERR(qtk_scheme_parse("q8f,block=1x2x3x4x5x6:f16", &s), QTK_E_PARSE, "at most 5 dims");
    CHECK_ERR(qtk_scheme_parse("q8f,block=4x:f16", &s), QTK_E_PARSE, "block dim ''");
    CHECK_ERR(qtk_scheme_parse("q8f,store=packed:9", &s), QTK_E_PARSE, "pack dimension '9'");
    CHECK_ERR(qtk_scheme_parse("q8f,store=native:1", &s), QTK_E_PARSE, "store=native has no pack dimension");
    CHECK_ERR(qtk_scheme_parse("q8f,store=bits", &s), QTK_E_PARSE, "'bits' is not a store");
    CHECK_ERR(qtk_scheme_parse("q8f,foo=1", &s), QTK_E_PARSE, "unknown option 'foo'");
    CHECK_ERR(qtk_scheme_parse("q8f,block", &s), QTK_E_PARSE, "is not KEY=VALUE");
    CHECK_ERR(qtk_scheme_parse("q8f,,block=32:f16", &s), QTK_E_PARSE, "stray ','");
    CHECK_ERR(qtk_scheme_parse("q8f,", &s), QTK_E_PARSE, "stray ','");
    CHECK_ERR(qtk_scheme_parse("q8f,block=32:f16,block=16:f16", &s), QTK_E_PARSE, "block= given twice");
    CHECK_ERR(qtk_scheme_parse("q8f,tensor=f32,tensor=f16", &s), QTK_E_PARSE, "tensor= given twice");
    CHECK_ERR(qtk_scheme_parse("nvfp4,store=u32", &s), QTK_E_PARSE, "preset 'nvfp4' takes no options");
    CHECK_ERR(qtk_scheme_parse("q4f,table=nope", &s), QTK_E_NOTFOUND, "no lookup table named 'nope'");
    CHECK_ERR(qtk_scheme_parse("q8f,table=nf4", &s), QTK_E_SCHEME, "has 16 entries but q8f fields index 256");
    CHECK_ERR(qtk_scheme_parse("q4f,block=32:bf16,tensor=f32", &s), QTK_E_SCHEME, "two-level scales need block dtype f16 or ue4m3");
    CHECK_ERR(qtk_scheme_parse("q4f,block=32:f16,tensor=f16", &s), QTK_E_SCHEME, "need tensor=f32");
    CHECK_ERR(qtk_scheme_parse("q4f,block=2x*x16:bf16,tensor=f32,store=u32:2", &s), QTK_E_SCHEME, "two-level");
    /* the message quotes the whole spec */
    CHECK_ERR(qtk_scheme_parse("q8f,block=32:f99", &s), QTK_E_PARSE, "invalid scheme 'q8f,block=32:f99'");
    CHECK_ERR(qtk_scheme_parse(NULL, &s), QTK_E_ARG, "NULL");
    char longspec[600];
    memset(longspec, 'a', sizeof longspec - 1);
    longspec[sizeof longspec - 1] = '\0';
    CHECK_ERR(qtk_scheme_parse(longspec, &s), QTK_E_PARSE, "characters long");
}

static void validate_struct(void) {
    qtk_scheme s;
    memset(&s, 0, sizeof s);
    CHECK_OK(qtk_scheme_validate(&s)); /* all-zero: Burn's default */
    s.value = (qtk_value)42;
    CHECK_ERR(qtk_scheme_validate(&s), QTK_E_SCHEME, "value 42");
    memset(&s, 0, sizeof s);
    s.block_rank = 6;
    CHECK_ERR(qtk_scheme_validate(&s), QTK_E_SCHEME, "at most 5");
    s.block_rank = 1;
    s.block[0] = 70000;
    s.block_dtype = QTK_DTYPE_F16;
    CHECK_ERR(qtk_scheme_validate(&s), QTK_E_SCHEME, "70000");
    s.block[0] = 32;
    s.block_dtype = QTK_DTYPE_E4M3;
    CHECK_ERR(qtk_scheme_validate(&s), QTK_E_SCHEME, "not a scale dtype");
    memset(&s, 0, sizeof s);
    s.mode = QTK_MODE_LOOKUP;
    CHECK_ERR(qtk_scheme_validate(&s), QTK_E_SCHEME, "lookup mode needs a table");
    memset(&s, 0, sizeof s);
    strcpy(s.table, "nf4");
    CHECK_ERR(qtk_scheme_validate(&s), QTK_E_SCHEME, "mode is symmetric");
    memset(&s, 0, sizeof s);
    s.store = QTK_STORE_NATIVE;
    s.pack_dim = 1;
    CHECK_ERR(qtk_scheme_validate(&s), QTK_E_SCHEME, "store=native has no pack dimension");
}

typedef struct {
    const char *spec;
    size_t shape[8];
    int rank;
    size_t total;
} size_case;

/* BURNPACK.md §3.7 and Burn's own tests. */
static void layout_sizes(void) {
    const size_case cases[] = {
        {"q4f,block=32:f16", {64, 32}, 2, 1152},
        {"q4f,block=32:f16", {64, 70}, 2, 2688},
        {"nvfp4", {64, 32}, 2, 1156},
        {"q8f", {3, 3}, 2, 16},
        {"q4s", {2, 5, 9}, 3, 84},
        {"q8s,block=4:ue4m3,tensor=f32,store=native", {8}, 1, 14},
        {"q4s,store=native", {5, 5}, 2, 29},
        {"q4f", {3, 3}, 2, 12 + 4},          /* per-line padding: 3 words, not 2 */
        {"q8s,block=3:f32,store=native", {6}, 1, 6 + 8},
        {"q8s,block=5:f32,store=native", {10}, 1, 10 + 8},
        {"q2s", {17}, 1, 8 + 4},
        {"q2s,store=u32:1", {17, 3}, 2, 2 * 3 * 4 + 4},
        {"e2m1,store=packed:1", {5, 4}, 2, 3 * 4 + 4},
        {"nf4", {128}, 1, 64 + 8 + 64},
        {"q8f", {0}, 0, 8},
        {"q8f,block=32:f16", {0, 64}, 2, 0},
        {"q8f,block=2x2:f16,store=native", {3, 5}, 2, 15 + 2 * 3 * 2},
        {"q8s,block=*:f32,store=native", {4, 7}, 2, 28 + 16},
        {"q8s,block=*x1:f32,store=native", {4, 7}, 2, 28 + 28},
        {"q8s,block=65535:f32,store=native", {70000}, 1, 70000 + 8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qtk_scheme s = parse(cases[i].spec);
        qtk_layout L;
        CHECK_OK(qtk_layout_compute(&s, cases[i].shape, cases[i].rank, &L));
        CHECK_MSG(L.total_bytes == cases[i].total, "%s: total %zu, expected %zu", cases[i].spec, L.total_bytes,
                  cases[i].total);
        int ok;
        CHECK_MSG(oracle_length(&s, cases[i].shape, cases[i].rank, &ok) == L.total_bytes && ok, "%s: oracle length",
                  cases[i].spec);
    }
    /* rank 0 and the worked NVFP4 region offsets */
    qtk_scheme s = parse("nvfp4");
    qtk_layout L;
    size_t sh[2] = {64, 32};
    CHECK_OK(qtk_layout_compute(&s, sh, 2, &L));
    CHECK_EQ_U(L.value_bytes, 1024);
    CHECK_EQ_U(L.scales_offset, 1024);
    CHECK_EQ_U(L.n_scales, 128);
    CHECK_EQ_U(L.global_offset, 1152);
    CHECK_EQ_U(L.grid[0], 64);
    CHECK_EQ_U(L.grid[1], 2);
    CHECK_EQ_U(L.storage_shape[1], 16);
    CHECK(fabs(qtk_layout_bits_per_element(&L) - 1156.0 * 8 / 2048) < 1e-12);
    s = parse("q8f");
    CHECK_OK(qtk_layout_compute(&s, NULL, 0, &L));
    CHECK_EQ_U(L.numel, 1);
    CHECK_EQ_U(L.total_bytes, 8);
    s = parse("q4f,store=u32:1");
    size_t sh2[2] = {9, 3};
    CHECK_OK(qtk_layout_compute(&s, sh2, 2, &L));
    CHECK_EQ_U(L.pack_axis, 0);
    CHECK_EQ_U(L.storage_shape[0], 2);
    CHECK_EQ_U(L.storage_shape[1], 3);
    CHECK_EQ_U(L.fields_per_unit, 8);
}

static void layout_errors(void) {
    qtk_layout L;
    qtk_scheme s = parse("q8f,block=4x4:f16");
    size_t sh[1] = {16};
    CHECK_ERR(qtk_layout_compute(&s, sh, 1, &L), QTK_E_SHAPE, "block 4x4 has 2 dims but the tensor 16 has rank 1");
    s = parse("q4f,store=u32:1");
    CHECK_ERR(qtk_layout_compute(&s, sh, 1, &L), QTK_E_SHAPE, "pack dimension 1 does not exist in a rank-1 tensor");
    s = parse("q4f,store=packed:1");
    CHECK_ERR(qtk_layout_compute(&s, sh, 1, &L), QTK_E_SHAPE, "pack dimension 1");
    s = parse("q8f,block=32:f16");
    CHECK_ERR(qtk_layout_compute(&s, NULL, 0, &L), QTK_E_SHAPE, "rank 0");
    CHECK_ERR(qtk_layout_compute(&s, sh, 9, &L), QTK_E_SHAPE, "rank 9 is outside 0..8");
    CHECK_ERR(qtk_layout_compute(&s, sh, -1, &L), QTK_E_SHAPE, "rank -1");
    size_t huge[3] = {SIZE_MAX / 2, 4, 4};
    CHECK_ERR(qtk_layout_compute(&s, huge, 3, &L), QTK_E_SHAPE, "more elements than fit");
    CHECK_ERR(qtk_layout_compute(&s, NULL, 2, &L), QTK_E_ARG, "shape is NULL");
}

static void tables(void) {
    float t[256];
    size_t n;
    CHECK_OK(qtk_table_get("nf4", t, 256, &n));
    CHECK_EQ_U(n, 16);
    CHECK_BITS(t[0], -1.0f);
    CHECK_BITS(t[7], 0.0f);
    CHECK_BITS(t[15], 1.0f);
    CHECK_OK(qtk_table_get("IQ4NL", t, 256, &n));
    CHECK_BITS(t[0], -127.0f);
    CHECK_BITS(t[8], 1.0f);
    CHECK_BITS(t[15], 113.0f);
    float four[4] = {-1.5f, -0.5f, 0.5f, 1.5f};
    CHECK_OK(qtk_table_register("Mine_2bit", four, 4));
    qtk_scheme s = parse("q2f,table=mine_2bit");
    CHECK(s.mode == QTK_MODE_LOOKUP);
    CHECK_ERR(qtk_scheme_parse("q4f,table=mine_2bit", &s), QTK_E_SCHEME, "has 4 entries but q4f fields index 16");
    CHECK_ERR(qtk_table_register("nf4", four, 4), QTK_E_ARG, "built in");
    CHECK_ERR(qtk_table_register("bad name", four, 4), QTK_E_ARG, "must be");
    CHECK_ERR(qtk_table_register("x", four, 3), QTK_E_ARG, "3 entries");
    float nanv[4] = {0, NAN, 1, 2};
    CHECK_ERR(qtk_table_register("y", nanv, 4), QTK_E_VALUE, "entry 1 is not finite");
    CHECK_ERR(qtk_table_get("nothere", t, 256, &n), QTK_E_NOTFOUND, "no lookup table named 'nothere'");
}

TEST_MAIN("scheme", T(presets_expand), T(canonical_forms), T(parse_fields), T(parse_errors), T(validate_struct),
          T(layout_sizes), T(layout_errors), T(tables))
