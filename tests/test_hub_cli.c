/* test_hub_cli.c — Hub checkpoints through the qtk binary ($QTK_BIN), as a user runs it:
 * synth -> convert --layout deepseek --max-shard-size (a sharded block-FP8 model with its
 * config), inspect (layout, config, shards, schemes; --json; --layout none), convert back to
 * bf16 shards, round trips, layouts that do not fit (exit 1, no output), bad options (exit 2),
 * notices on stderr. */
#include "hub_util.h"

#include <stdarg.h>
#include <sys/wait.h>

static const char *bin;
static char out[1 << 17], err[1 << 14];

/* `qtk ARGS` in the temporary directory; stdout and stderr land in out and err */
#define run(...) cli_run(bin, out, sizeof out, err, sizeof err, __VA_ARGS__)

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

static void deepseek_round_trip(void) {
    CHECK(run("synth m.safetensors --layers 2 --hidden 256 --ffn 512 --kv 64 --vocab 1024") == 0);
    CHECK(run("convert m.safetensors ds --scheme 'e4m3,block=128x128:f32,store=native' --skip 'embed|lm_head' "
              "--layout deepseek --max-shard-size 600KB") == 0);
    CHECK_MSG(strstr(out, "layout deepseek, 4 files") && strstr(out, "14 quantized"), "%s", out);
    CHECK(file_exists(tmp_path("ds/model.safetensors.index.json")) && file_exists(tmp_path("ds/config.json")) &&
          file_exists(tmp_path("ds/model-00004-of-00004.safetensors")));

    CHECK(run("inspect ds") == 0);
    CHECK_MSG(strstr(out, "layout    deepseek (config.json quant_method \"fp8\")"), "%s", out);
    CHECK(strstr(out, "config    ds/config.json: {\"activation_scheme\":\"dynamic\",\"fmt\":\"e4m3\",\"quant_method\":\"fp8\","
                      "\"weight_block_size\":[128,128]}"));
    CHECK(strstr(out, "shards    4 (index ds/model.safetensors.index.json)"));
    CHECK_EQ_U(count(out, "e4m3,block=128x128:f32,store=native"), 14);
    CHECK(!strstr(out, "scale_inv"));
    CHECK(strstr(out, "27 tensors"));

    CHECK(run("inspect --json ds") == 0);
    CHECK(strstr(out, "\"layout\": \"deepseek\"") && strstr(out, "\"quantization_config\": {\"activation_scheme\"") &&
          strstr(out, "\"shard\": 3"));
    CHECK(run("inspect --layout none ds") == 0);
    CHECK(strstr(out, "layout    none (given)") && count(out, "_scale_inv") == 14);

    /* to bf16 shards, as DeepSeek's fp8_cast_bf16.py does, on the CPU */
    CHECK(run("convert ds bf16 --scheme none --dtype bf16") == 0);
    CHECK_MSG(strstr(out, "layout none, 4 files") && strstr(out, "14 dequantized, 13 copied"), "%s", out);
    CHECK(!file_exists(tmp_path("bf16/config.json"))); /* the source's config held only its quantization */
    CHECK(run("inspect bf16") == 0);
    CHECK(strstr(out, "layout    none") && count(out, "BF16") == 27);
    /* the same layout again: every file byte for byte */
    CHECK(run("convert ds ds2 --layout deepseek") == 0);
    const char *files[] = {"config.json", "model.safetensors.index.json", "model-00001-of-00004.safetensors",
                           "model-00004-of-00004.safetensors"};
    for (int i = 0; i < 4; i++) {
        char a[1024], b[1024];
        snprintf(a, sizeof a, "%s", tmp_path("ds"));
        snprintf(b, sizeof b, "%s", tmp_path("ds2"));
        char pa[1200], pb[1200];
        snprintf(pa, sizeof pa, "%s/%s", a, files[i]);
        snprintf(pb, sizeof pb, "%s/%s", b, files[i]);
        size_t na, nb;
        uint8_t *x = slurp(pa, &na), *y = slurp(pb, &nb);
        CHECK_MSG(x && y && na == nb && memcmp(x, y, na) == 0, "%s differs", files[i]);
        free(x);
        free(y);
    }
    /* into another layout: compressed-tensors FP8 block, then qtk's own single file */
    CHECK(run("convert ds ct --layout compressed-tensors") == 0);
    CHECK(run("inspect ct") == 0);
    CHECK(strstr(out, "layout    compressed-tensors (config.json quant_method \"compressed-tensors\")") &&
          count(out, "e4m3,block=128x128:f32,store=native") == 14);
    CHECK(run("convert ds one.safetensors") == 0 && file_exists(tmp_path("one.safetensors")));
}

static void cli_errors(void) {
    CHECK(run("convert ds out.safetensors --layout bnb") == 1);
    CHECK_MSG(strstr(err, "does not fit layout bnb") && strstr(err, "on [256x256]"), "%s", err);
    CHECK(!file_exists(tmp_path("out.safetensors")));
    CHECK(run("convert ds o2 --layout gptoss2") == 2 && strstr(err, "--layout 'gptoss2' is not one of"));
    CHECK(run("convert ds o2 --max-shard-size lots") == 2 && strstr(err, "is not a size"));
    CHECK(run("convert ds x.bpk --layout deepseek") == 2 && strstr(err, "layouts and shards are safetensors"));
    CHECK(run("inspect --layout modelopt ds") == 1 && strstr(err, "F8_E4M3 weight"));
    CHECK_MSG(run("convert ds bf16 --scheme none --dtype bf16") == 1 && strstr(err, "exists; it is replaced only with"), "%s", err);
    CHECK(run("convert ds bf16 --scheme none --dtype bf16 --force") == 0);
    CHECK(!file_exists(tmp_path("o2")));
}

/* A tensor dequantized on read: its notice goes to stderr, the conversion succeeds. */
static void notices(void) {
    char d[600], p[1024];
    snprintf(d, sizeof d, "%s", tmp_subdir("zp"));
    uint32_t words[2] = {0x12345678, 0x9abcdef0}, zp = 0x9898;
    uint16_t sc[4] = {0x3f80, 0x3f00, 0x3f80, 0x3f00};
    int64_t shape[2] = {2, 8};
    int32_t gidx[8] = {1, 0, 1, 0, 1, 0, 1, 0}; /* activation order */
    st_entry_t e[5] = {{"m.o_proj.weight_packed", "I32", {2, 1}, 2, words, 8},
                       {"m.o_proj.weight_scale", "BF16", {2, 2}, 2, sc, 8},
                       {"m.o_proj.weight_shape", "I64", {2}, 1, shape, 16},
                       {"m.o_proj.weight_zero_point", "I32", {1, 2}, 2, &zp, 8},
                       {"m.o_proj.weight_g_idx", "I32", {8}, 1, gidx, 32}};
    uint32_t zp2[2] = {0x98, 0x98};
    e[3].data = zp2;
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    CHECK(st_write(p, e, 5, ""));
    CHECK(run("convert zp zp-bf16 --scheme none --dtype bf16") == 0);
    CHECK_MSG(strstr(err, "note: 'm.o_proj.weight': an activation-order group index (weight_g_idx) has no qtk scheme: "
                          "dequantized to F32"), "%s", err);
    CHECK(run("inspect zp") == 0 && strstr(out, "notice    'm.o_proj.weight': an activation-order group index"));
}

int main(int argc, char **argv) {
    bin = getenv("QTK_BIN");
    if (!bin) {
        printf("hub_cli: QTK_BIN is not set: skipped\n");
        return 77;
    }
    tmp_dir_make();
    static const test_case cases[] = {T(deepseek_round_trip), T(cli_errors), T(notices)};
    int rc = test_run("hub_cli", cases, sizeof cases / sizeof cases[0], argc, argv);
    tmp_dir_remove();
    return rc;
}
