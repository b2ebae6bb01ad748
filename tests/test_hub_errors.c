/* test_hub_errors.c — malformed Hub checkpoints and layouts that do not fit: a missing
 * companion tensor, a scale whose shape does not match its weight, a config that contradicts
 * the tensors, a broken index, bad scale bytes found while converting, schemes a layout cannot
 * hold. Each is an error with a message naming the tensor, the file and what was expected,
 * and a conversion leaves no output (no file, no directory, no temporary file). */
#include "hub_util.h"

#include "ops/select.h"

#include <dirent.h>

static int case_no;

static const char *fresh_dir(void) {
    static char d[512];
    char nm[32];
    snprintf(nm, sizeof nm, "case%d", ++case_no);
    snprintf(d, sizeof d, "%s", tmp_subdir(nm));
    return d;
}

/* Nothing named like a temporary in dir (recursively one level). */
static int leftovers(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));) n += strstr(e->d_name, ".qtk-tmp") != NULL;
    closedir(d);
    return n;
}

static qtk_status convert(const char *in, const char *out, const char *spec, qtk_hub_layout l) {
    qtk_convert_options o = {.scheme = spec, .layout = l};
    if (spec && strcmp(spec, "none") == 0) o.dtype = QTK_DTYPE_BF16;
    return qtk_ckpt_convert(in, out, &o, NULL);
}

/* Opening dir fails with st and a message holding sub; so does converting it, leaving nothing. */
#define EXPECT_FAIL(dir, st, sub)                                                                                      \
    do {                                                                                                               \
        qtk_ckpt *c_ = NULL;                                                                                           \
        CHECK_ERR(qtk_ckpt_open(dir, NULL, &c_), st, sub);                                                                   \
        qtk_ckpt_close(c_);                                                                                            \
        char out_[600];                                                                                                \
        snprintf(out_, sizeof out_, "%s-out", dir);                                                                    \
        CHECK_ERR(convert(dir, out_, "none", QTK_LAYOUT_AUTO), st, sub);                                              \
        CHECK_MSG(!file_exists(out_), "'%s' exists after a failed conversion", out_);                                  \
        CHECK_EQ_U(leftovers(tmp_path("")), 0);                                                                        \
    } while (0)

static void write_one(const char *dir, const st_entry_t *e, size_t n, const char *config) {
    char p[1024];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK(st_write(p, e, n, "{\"format\":\"pt\"}"));
    if (config) {
        snprintf(p, sizeof p, "%s/config.json", dir);
        CHECK(text_write(p, config));
    }
}

static uint8_t zeros[200 * 300];
static float ones[64];

static const char ds_cfg[] = "{\"quantization_config\": {\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128]}}";

static void deepseek_malformed(void) {
    for (int i = 0; i < 64; i++) ones[i] = 1.0f;
    const char *d = fresh_dir();
    st_entry_t w = {"l.weight", "F8_E4M3", {200, 300}, 2, zeros, 60000};
    write_one(d, &w, 1, ds_cfg);
    EXPECT_FAIL(d, QTK_E_FORMAT, "/model.safetensors') has no 'l.weight_scale_inv'");

    d = fresh_dir();
    st_entry_t s = {"l.weight_scale_inv", "F32", {2, 3}, 2, ones, 24};
    write_one(d, &s, 1, ds_cfg);
    EXPECT_FAIL(d, QTK_E_FORMAT, "/model.safetensors') has no weight 'l.weight' beside it");

    d = fresh_dir();
    st_entry_t e[2] = {{"l.weight_scale_inv", "F32", {1, 1}, 2, ones, 4}, w};
    write_one(d, e, 2, ds_cfg);
    EXPECT_FAIL(d, QTK_E_SHAPE, "is [1x1]; 128x128 blocks (config.json weight_block_size) on 'l.weight' [200x300] need [2x3]");

    d = fresh_dir(); /* the config says 64x64 blocks; the scales are 128x128's */
    st_entry_t e2[2] = {{"l.weight_scale_inv", "F32", {2, 3}, 2, ones, 24}, w};
    write_one(d, e2, 2, "{\"quantization_config\": {\"quant_method\": \"fp8\", \"weight_block_size\": [64, 64]}}");
    EXPECT_FAIL(d, QTK_E_SHAPE, "64x64 blocks (config.json weight_block_size) on 'l.weight' [200x300] need [4x5]");

    d = fresh_dir(); /* the config says FP8; nothing is */
    st_entry_t b = {"l.weight", "BF16", {2, 3}, 2, zeros, 12};
    write_one(d, &b, 1, ds_cfg);
    EXPECT_FAIL(d, QTK_E_FORMAT, "says quant_method \"fp8\" (block FP8 with *_scale_inv scales) but no tensor is named");

    d = fresh_dir(); /* a config that is not JSON */
    write_one(d, &b, 1, "{\"quantization_config\": ");
    EXPECT_FAIL(d, QTK_E_FORMAT, "config.json' is not a JSON object");
}

static void gptoss_modelopt_malformed(void) {
    const char *d = fresh_dir();
    st_entry_t bl = {"e.down_proj_blocks", "U8", {1, 2, 1, 16}, 4, zeros, 32};
    write_one(d, &bl, 1, "{\"quantization_config\": {\"quant_method\": \"mxfp4\"}}");
    EXPECT_FAIL(d, QTK_E_FORMAT, "/model.safetensors') has no companion 'e.down_proj_scales'");

    d = fresh_dir();
    st_entry_t e[2] = {bl, {"e.down_proj_scales", "U8", {1, 2, 2}, 3, zeros, 4}};
    write_one(d, e, 2, NULL);
    EXPECT_FAIL(d, QTK_E_SHAPE, "/model.safetensors') is U8 [1x2x2]; for 'e.down_proj_blocks' [1x2x1x16] "
                                "the scales are U8 (or F8_E8M0) [1x2x1]");

    d = fresh_dir(); /* NVFP4 without its global scale */
    st_entry_t nv[2] = {{"l.weight_scale", "F8_E4M3", {4, 2}, 2, zeros, 8}, {"l.weight", "U8", {4, 16}, 2, zeros, 64}};
    write_one(d, nv, 2, "{\"quantization_config\": {\"quant_method\": \"modelopt\", \"quant_algo\": \"NVFP4\"}}");
    EXPECT_FAIL(d, QTK_E_FORMAT, "/model.safetensors') is NVFP4 (U8 values, F8_E4M3 block scales) but has no "
                                 "'l.weight_scale_2'");

    d = fresh_dir(); /* hf_quant_config.json says FP8; the tensors are NVFP4 */
    st_entry_t nv3[3] = {{"l.weight_scale_2", "F32", {0}, 0, ones, 4}, nv[0], nv[1]};
    write_one(d, nv3, 3, NULL);
    char p[1024];
    snprintf(p, sizeof p, "%s/hf_quant_config.json", d);
    CHECK(text_write(p, "{\"producer\": {\"name\": \"modelopt\"}, \"quantization\": {\"quant_algo\": \"FP8\"}}"));
    EXPECT_FAIL(d, QTK_E_FORMAT, "hf_quant_config.json' says quant_algo \"FP8\" but 'l.weight' (in '");

    d = fresh_dir(); /* block scales for K = 16, weight for K = 32 */
    st_entry_t nv4[3] = {{"l.weight_scale_2", "F32", {0}, 0, ones, 4}, {"l.weight_scale", "F8_E4M3", {4, 1}, 2, zeros, 4}, nv[1]};
    write_one(d, nv4, 3, NULL);
    EXPECT_FAIL(d, QTK_E_SHAPE, "/model.safetensors') is [4x1]; for 'l.weight' U8 [4x16] NVFP4 scales are "
                                "[..., O, K/16]");
}

static const char ct_cfg[] =
    "{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"config_groups\": {\"group_0\": {\"targets\": "
    "[\"Linear\"], \"weights\": {\"num_bits\": %d, \"type\": \"%s\", \"strategy\": \"%s\", \"group_size\": %d}}}, "
    "\"ignore\": [%s]}}";

static void ct_malformed(void) {
    char cfg[1024];
    const char *d = fresh_dir();
    st_entry_t nv[2] = {{"l.weight_scale", "F8_E4M3", {4, 2}, 2, zeros, 8}, {"l.weight_packed", "U8", {4, 16}, 2, zeros, 64}};
    snprintf(cfg, sizeof cfg, ct_cfg, 4, "float", "tensor_group", 16, "");
    write_one(d, nv, 2, cfg);
    EXPECT_FAIL(d, QTK_E_FORMAT, "/model.safetensors') is NVFP4 (F8_E4M3 scales) but has no "
                                 "'l.weight_global_scale'");

    d = fresh_dir(); /* int4 packing, but the config says 8 bits */
    int64_t shape[2] = {2, 8};
    uint16_t sc[2] = {0x3f80, 0x3f80};
    st_entry_t i4[3] = {{"m.o_proj.weight_packed", "I32", {2, 1}, 2, zeros, 8},
                        {"m.o_proj.weight_scale", "BF16", {2, 1}, 2, sc, 4},
                        {"m.o_proj.weight_shape", "I64", {2}, 1, shape, 16}};
    snprintf(cfg, sizeof cfg, ct_cfg, 8, "int", "channel", -1, "");
    write_one(d, i4, 3, cfg);
    EXPECT_FAIL(d, QTK_E_SHAPE, "/model.safetensors') is I32 [2x1]; 8-bit fields of "
                                "'m.o_proj.weight' [2x8] need 2 words a row (num_bits from the config)");

    d = fresh_dir(); /* the module is under ignore */
    snprintf(cfg, sizeof cfg, ct_cfg, 4, "int", "channel", -1, "\"re:m\\\\.o_proj\"");
    write_one(d, i4, 3, cfg);
    EXPECT_FAIL(d, QTK_E_FORMAT, "lists module 'm.o_proj' under ignore, but 'm.o_proj.weight' (in '");

    d = fresh_dir(); /* a group scale shape that does not match the config's group size */
    snprintf(cfg, sizeof cfg, ct_cfg, 4, "int", "group", 4, "");
    write_one(d, i4, 3, cfg);
    EXPECT_FAIL(d, QTK_E_SHAPE, "/model.safetensors') is [2x1]; the config group's strategy on "
                                "'m.o_proj.weight' [2x8] needs [2x2]");

    d = fresh_dir(); /* packed ints without their shape */
    write_one(d, i4, 2, NULL);
    EXPECT_FAIL(d, QTK_E_FORMAT, "/model.safetensors') has no 'm.o_proj.weight_shape'");
}

static void bnb_malformed(void) {
    const char *blob = "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"bfloat16\", \"shape\": [4, 64]}";
    st_entry_t e[4] = {{"m.weight", "U8", {128, 1}, 2, zeros, 128},
                       {"m.weight.absmax", "F32", {4}, 1, ones, 16},
                       {"m.weight.quant_state.bitsandbytes__nf4", "U8", {strlen(blob)}, 1, blob, strlen(blob)},
                       {"m.weight.quant_map", "F32", {16}, 1, ones, 64}};
    const char *d = fresh_dir();
    write_one(d, e, 3, NULL);
    EXPECT_FAIL(d, QTK_E_FORMAT, "/model.safetensors') has no 'm.weight.quant_map' F32 [16]");

    d = fresh_dir();
    write_one(d, e, 4,
              "{\"quantization_config\": {\"quant_method\": \"bitsandbytes\", \"load_in_4bit\": true, "
              "\"bnb_4bit_quant_type\": \"fp4\"}}");
    EXPECT_FAIL(d, QTK_E_FORMAT, "config.json' says bnb_4bit_quant_type \"fp4\" but 'm.weight' is nf4");

    d = fresh_dir(); /* absmax for a different block count */
    st_entry_t e2[4] = {e[0], {"m.weight.absmax", "F32", {3}, 1, ones, 12}, e[2], e[3]};
    write_one(d, e2, 4, NULL);
    EXPECT_FAIL(d, QTK_E_SHAPE, "/model.safetensors') is F32 with 3 values; blocks of 64 over 256 "
                                "elements need F32 [4]");
}

static void index_malformed(void) {
    char p[1024];
    st_entry_t a = {"a", "F32", {2}, 1, ones, 8}, b = {"b", "F32", {2}, 1, ones, 8};
    const char *d = fresh_dir();
    snprintf(p, sizeof p, "%s/s1.safetensors", d);
    CHECK(st_write(p, &a, 1, ""));
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", d);
    CHECK(text_write(p, "{\"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s2.safetensors\"}}"));
    EXPECT_FAIL(d, QTK_E_IO, "s2.safetensors': No such file");

    snprintf(p, sizeof p, "%s/s2.safetensors", d);
    CHECK(st_write(p, &a, 1, "")); /* 'a' again, where the index says 'b' */
    EXPECT_FAIL(d, QTK_E_FORMAT, "tensor 'a' is in both 's1.safetensors' and 's2.safetensors'");

    CHECK(st_write(p, &b, 1, ""));
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", d);
    CHECK(text_write(p, "{\"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s1.safetensors\", \"c\": \"s2.safetensors\"}}"));
    EXPECT_FAIL(d, QTK_E_FORMAT, "the weight_map puts tensor 'b' in 's1.safetensors', but it is in 's2.safetensors'");

    CHECK(text_write(p, "{\"weight_map\": {\"a\": \"s1.safetensors\"}, \"metadata\": {}}"));
    qtk_ckpt *c = NULL; /* s2 is not named by the index: not a shard, not read */
    CHECK_OK(qtk_ckpt_open(d, NULL, &c));
    CHECK(c && qtk__ckpt_desc(c)->n_tensors == 1);
    qtk_ckpt_close(c);

    CHECK(text_write(p, "{\"weight_map\": {\"a\": \"s1.safetensors\", \"z\": \"s2.safetensors\", \"b\": \"s2.safetensors\"}}"));
    EXPECT_FAIL(d, QTK_E_FORMAT, "the weight_map lists tensor 'z' in 's2.safetensors', which has no such tensor");

    CHECK(text_write(p, "{\"weight_map\": {\"a\": \"../s1.safetensors\"}}"));
    EXPECT_FAIL(d, QTK_E_FORMAT, "weight_map[\"a\"] is not a file name in the index's directory");
}

/* Bad bytes are found while converting (opening reads no values): no output either. */
static void bad_scale_bytes(void) {
    const char *d = fresh_dir();
    uint8_t sc[8] = {0x38, 0x38, 0x38, 0xB8, 0x38, 0x38, 0x38, 0x38}; /* a negative block scale */
    st_entry_t nv[3] = {{"l.weight_scale_2", "F32", {0}, 0, ones, 4}, {"l.weight_scale", "F8_E4M3", {4, 2}, 2, sc, 8},
                        {"l.weight", "U8", {4, 16}, 2, zeros, 64}};
    write_one(d, nv, 3, NULL);
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(d, NULL, &c));
    qtk_ckpt_close(c);
    char out[600];
    snprintf(out, sizeof out, "%s-out", d);
    CHECK_ERR(convert(d, out, "none", QTK_LAYOUT_AUTO), QTK_E_VALUE, "tensor 'l.weight'");
    CHECK(!file_exists(out));
    CHECK_EQ_U(leftovers(tmp_path("")), 0);
}

static const char d_path_missing[] = "/nonexistent/qtk-input";

/* Schemes a layout cannot hold: refused before anything is written. */
static void layouts_that_do_not_fit(void) {
    struct {
        const char *spec;
        size_t shape[2];
        qtk_hub_layout l;
        const char *msg;
    } cases[] = {
        {"nvfp4", {8, 64}, QTK_LAYOUT_DEEPSEEK, "layout deepseek stores 2-D e4m3 weights"},
        {"nvfp4", {8, 64}, QTK_LAYOUT_GPT_OSS, "layout gpt-oss stores mxfp4"},
        {"mxfp4", {8, 48}, QTK_LAYOUT_GPT_OSS, "this is 'e2m1,block=32:ue8m0,store=packed:0' on [8x48]"},
        {"q4f,block=32:f16", {8, 64}, QTK_LAYOUT_MODELOPT, "layout modelopt stores nvfp4"},
        {"nvfp4", {8, 40}, QTK_LAYOUT_CT, "layout compressed-tensors stores nvfp4 (2-D, K a multiple of 16)"},
        {"q4f,block=32:ue8m0", {8, 64}, QTK_LAYOUT_CT, "this is 'q4f,block=32:ue8m0' on [8x64]"},
        {"q4f,table=iq4nl,block=64:f32", {8, 64}, QTK_LAYOUT_BNB, "layout bnb stores q4f,table=nf4,block=B:f32"},
        {"nf4", {8, 100}, QTK_LAYOUT_BNB, "on [8x100]"},
        {"e4m3,block=128x128:f32,store=native", {8, 64}, QTK_LAYOUT_BNB, "layout bnb"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        qtk__desc d;
        qtk__desc_init(&d);
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse(cases[i].spec, &s));
        CHECK_OK(qtk__desc_add_quantized(&d, "l.weight", &s, cases[i].shape, 2, NULL));
        qtk__hub_writer *w = NULL;
        char out[600];
        snprintf(out, sizeof out, "%s", tmp_path("nofit"));
        qtk_status st = qtk__hub_writer_open(out, &d, &(qtk__hub_write_opts){.layout = cases[i].l}, &w);
        CHECK_MSG(st == QTK_E_UNSUPPORTED && strstr(qtk_last_error(), cases[i].msg) &&
                      strstr(qtk_last_error(), "tensor 'l.weight' does not fit layout"),
                  "%s -> %s: %s: %s", cases[i].spec, qtk_hub_layout_name(cases[i].l), qtk_status_name(st), qtk_last_error());
        qtk__hub_writer_abort(w);
        CHECK(!file_exists(out));
        qtk__desc_free(&d);
    }
    CHECK_EQ_U(leftovers(tmp_path("")), 0);

    /* one weight_block_size per DeepSeek checkpoint */
    qtk__desc d;
    qtk__desc_init(&d);
    qtk_scheme a, b;
    size_t sh[2] = {256, 256};
    CHECK_OK(qtk_scheme_parse("e4m3,block=128x128:f32,store=native", &a));
    CHECK_OK(qtk_scheme_parse("e4m3,block=64x64:f32,store=native", &b));
    CHECK_OK(qtk__desc_add_quantized(&d, "x.weight", &a, sh, 2, NULL));
    CHECK_OK(qtk__desc_add_quantized(&d, "y.weight", &b, sh, 2, NULL));
    qtk__hub_writer *w = NULL;
    CHECK_ERR(qtk__hub_writer_open(tmp_path("twoblocks"), &d, &(qtk__hub_write_opts){.layout = QTK_LAYOUT_DEEPSEEK}, &w),
              QTK_E_UNSUPPORTED, "one weight_block_size and fmt for the checkpoint: 'x.weight' has 128x128 blocks of e4m3, "
                                 "'y.weight' 64x64");
    /* shards need a directory; a .bpk output takes no layout */
    CHECK_ERR(qtk__hub_writer_open(tmp_path("x.safetensors"), &d,
                                  &(qtk__hub_write_opts){.layout = QTK_LAYOUT_QTK, .max_shard_bytes = 1000}, &w),
              QTK_E_ARG, "the output would be 2 shards: give a directory");
    qtk__desc_free(&d);
    char bpk[600];
    snprintf(bpk, sizeof bpk, "%s", tmp_path("m.bpk"));
    CHECK_ERR(convert(d_path_missing, bpk, NULL, QTK_LAYOUT_DEEPSEEK), QTK_E_ARG,
              "layouts and shards are safetensors");
    CHECK_EQ_U(leftovers(tmp_path("")), 0);
}

/* Existing outputs are replaced only with force; a directory's files too. */
static void existing_outputs(void) {
    const char *d = fresh_dir();
    st_entry_t a = {"a", "F32", {2}, 1, ones, 8};
    write_one(d, &a, 1, "{\"torch_dtype\": \"float32\"}");
    char out[600];
    snprintf(out, sizeof out, "%s", tmp_subdir("existing"));
    CHECK_OK(convert(d, out, NULL, QTK_LAYOUT_AUTO)); /* into an empty existing directory: fine */
    CHECK_ERR(convert(d, out, NULL, QTK_LAYOUT_AUTO), QTK_E_IO, "model.safetensors' exists; it is replaced only with force");
    CHECK_EQ_U(leftovers(tmp_path("")), 0);
}

int main(int argc, char **argv) {
    tmp_dir_make();
    static const test_case cases[] = {T(deepseek_malformed), T(gptoss_modelopt_malformed), T(ct_malformed),
                                      T(bnb_malformed), T(index_malformed), T(bad_scale_bytes),
                                      T(layouts_that_do_not_fit), T(existing_outputs)};
    int rc = test_run("hub_errors", cases, sizeof cases / sizeof cases[0], argc, argv);
    tmp_dir_remove();
    return rc;
}
