/* test_hub_convert.c — the CPU dequantization people ask for: a DeepSeek-style block-FP8
 * checkpoint in three shards (an index, a config.json, BF16 embeddings and norms, one
 * weight_scale_inv stored in another shard than its weight, edge blocks of 576 and 200 rows)
 * converted with --scheme none --dtype bf16 into plain bf16 shards: the same shard files, an
 * index naming only the weights, config.json without quantization_config, every bf16 value
 * equal to RN_bf16(e4m3(code) x scale_inv) computed here from the stored bytes, unquantized
 * tensors copied bit for bit. Also an NVFP4 and an MXFP4 checkpoint the same way, and
 * conversions that fail leave no output. */
#include "hub_util.h"

#include "ops/select.h"

#include <math.h>

static uint16_t bf16_rne(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

typedef struct {
    const char *name;
    size_t o, k;
    uint8_t *w;       /* F8_E4M3 codes */
    float *s;         /* scale_inv */
    size_t gr, gc;
} fp8w;

static void make_fp8(fp8w *f, uint64_t *seed) {
    qtk_scheme s;
    CHECK_OK(qtk_scheme_parse("e4m3,block=128x128:f32,store=native", &s));
    size_t shape[2] = {f->o, f->k}, n = f->o * f->k;
    qtk_layout L;
    CHECK_OK(qtk_layout_compute(&s, shape, 2, &L));
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = trand_normal(seed) * 0.02f * (float)(1 + (i / f->k) % 5);
    uint8_t *b = malloc(L.total_bytes);
    CHECK_OK(qtk_quantize_into(x, shape, 2, &s, NULL, b, L.total_bytes));
    f->gr = L.grid[0], f->gc = L.grid[1];
    f->w = malloc(n);
    f->s = malloc(L.n_scales * sizeof *f->s);
    memcpy(f->w, b, n);
    memcpy(f->s, b + L.scales_offset, L.scale_bytes);
    free(b);
    free(x);
}

static const char *const shard_names[3] = {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                           "model-00003-of-00003.safetensors"};

/* The source directory; returns the raw tensors' bytes for the checks. */
static void write_deepseek(const char *dir, fp8w *w, uint8_t *embed, uint8_t *norm) {
    char p[1024];
    st_entry_t s1[] = {
        {"model.embed_tokens.weight", "BF16", {64, 96}, 2, embed, 64 * 96 * 2},
        {w[0].name, "F8_E4M3", {w[0].o, w[0].k}, 2, w[0].w, w[0].o * w[0].k},
        {"model.layers.0.self_attn.kv_a_proj_with_mqa.weight_scale_inv", "F32", {w[0].gr, w[0].gc}, 2, w[0].s, 4 * w[0].gr * w[0].gc},
    };
    st_entry_t s2[] = {
        {"model.norm.weight", "BF16", {96}, 1, norm, 96 * 2},
        {w[1].name, "F8_E4M3", {w[1].o, w[1].k}, 2, w[1].w, w[1].o * w[1].k},
        {"model.layers.0.mlp.down_proj.weight_scale_inv", "F32", {w[1].gr, w[1].gc}, 2, w[1].s, 4 * w[1].gr * w[1].gc},
        /* the scale of a weight stored in shard 3 */
        {"model.layers.0.mlp.up_proj.weight_scale_inv", "F32", {w[2].gr, w[2].gc}, 2, w[2].s, 4 * w[2].gr * w[2].gc},
    };
    st_entry_t s3[] = {{w[2].name, "F8_E4M3", {w[2].o, w[2].k}, 2, w[2].w, w[2].o * w[2].k}};
    snprintf(p, sizeof p, "%s/%s", dir, shard_names[0]);
    CHECK(st_write(p, s1, 3, "{\"format\":\"pt\"}"));
    snprintf(p, sizeof p, "%s/%s", dir, shard_names[1]);
    CHECK(st_write(p, s2, 4, "{\"format\":\"pt\"}"));
    snprintf(p, sizeof p, "%s/%s", dir, shard_names[2]);
    CHECK(st_write(p, s3, 1, "{\"format\":\"pt\"}"));
    char idx[4096];
    snprintf(idx, sizeof idx,
             "{\"metadata\": {\"total_size\": 1}, \"weight_map\": {"
             "\"model.embed_tokens.weight\": \"%s\", \"%s\": \"%s\", \"%s_scale_inv\": \"%s\", "
             "\"model.norm.weight\": \"%s\", \"%s\": \"%s\", \"%s_scale_inv\": \"%s\", \"%s_scale_inv\": \"%s\", "
             "\"%s\": \"%s\"}}",
             shard_names[0], w[0].name, shard_names[0], w[0].name, shard_names[0], shard_names[1], w[1].name, shard_names[1],
             w[1].name, shard_names[1], w[2].name, shard_names[1], w[2].name, shard_names[2]);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    CHECK(text_write(p, idx));
    snprintf(p, sizeof p, "%s/config.json", dir);
    CHECK(text_write(p, "{\"architectures\": [\"DeepseekV3ForCausalLM\"], \"hidden_size\": 96, "
                        "\"quantization_config\": {\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\", "
                        "\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128]}, \"torch_dtype\": \"bfloat16\"}"));
}

static qtk_status convert_none_bf16(const char *in, const char *out) {
    qtk_convert_options o = {.scheme = "none", .dtype = QTK_DTYPE_BF16};
    qtk_convert_summary s;
    qtk_status st = qtk_ckpt_convert(in, out, &o, &s);
    if (!st) {
        CHECK_EQ_U(s.dequantized, 3);
        CHECK_EQ_U(s.in_files, 3);
        CHECK_EQ_U(s.out_files, 3);
        CHECK(s.in_layout == QTK_LAYOUT_DEEPSEEK && s.out_layout == QTK_LAYOUT_NONE);
    }
    return st;
}

static void deepseek_fp8_to_bf16(void) {
    uint64_t seed = 77;
    fp8w w[3] = {{"model.layers.0.self_attn.kv_a_proj_with_mqa.weight", 576, 96, 0, 0, 0, 0},
                 {"model.layers.0.mlp.down_proj.weight", 96, 200, 0, 0, 0, 0},
                 {"model.layers.0.mlp.up_proj.weight", 200, 96, 0, 0, 0, 0}};
    for (int i = 0; i < 3; i++) make_fp8(&w[i], &seed);
    CHECK(w[0].gr == 5 && w[0].gc == 1); /* 576 rows: the last 128-row block holds 64 */
    uint8_t embed[64 * 96 * 2], norm[96 * 2];
    for (size_t i = 0; i < sizeof embed; i++) embed[i] = (uint8_t)(i % 2 ? 0x3c : trand_u64(&seed));
    for (size_t i = 0; i < sizeof norm; i++) norm[i] = (uint8_t)(i % 2 ? 0x3f : trand_u64(&seed));
    char src[512], out[512], p[1024];
    snprintf(src, sizeof src, "%s", tmp_subdir("ds"));
    snprintf(out, sizeof out, "%s", tmp_path("ds-bf16"));
    write_deepseek(src, w, embed, norm);

    /* read: one logical checkpoint; the cross-shard scale resolved through the index */
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(src, NULL, &c));
    if (c) {
        qtk_hub_info hi;
        qtk_ckpt_hub_info(c, &hi);
        CHECK(hi.layout == QTK_LAYOUT_DEEPSEEK && hi.n_shards == 3 && hi.index_file && hi.config_file);
        CHECK_EQ_U(qtk__ckpt_desc(c)->n_tensors, 5);
        size_t i = tensor_index(c, w[2].name);
        CHECK(i != SIZE_MAX && qtk_ckpt_shard_of(c, i) == 2 && qtk__ckpt_desc(c)->tensors[i].quantized);
        qtk_ckpt_close(c);
    }

    CHECK_OK(convert_none_bf16(src, out));
    for (int s = 0; s < 3; s++) {
        snprintf(p, sizeof p, "%s/%s", out, shard_names[s]);
        CHECK_MSG(file_exists(p), "%s is missing", p);
    }
    size_t n;
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", out);
    char *idx = text_read(p);
    CHECK(idx && !strstr(idx, "scale_inv") && strstr(idx, "\"model.layers.0.mlp.up_proj.weight\": \"model-00003-of-00003"));
    free(idx);
    snprintf(p, sizeof p, "%s/config.json", out);
    char *cfg = text_read(p);
    CHECK(cfg && !strstr(cfg, "quantization_config") && strstr(cfg, "DeepseekV3ForCausalLM") && strstr(cfg, "torch_dtype"));
    free(cfg);

    qtk_ckpt *o = NULL;
    CHECK_OK(qtk_ckpt_open(out, NULL, &o));
    if (o) {
        qtk_hub_info hi;
        qtk_ckpt_hub_info(o, &hi);
        CHECK(hi.layout == QTK_LAYOUT_NONE && hi.n_shards == 3);
        CHECK_EQ_U(qtk__ckpt_desc(o)->n_tensors, 5);
        for (int k = 0; k < 3; k++) {
            size_t len = 0, i = tensor_index(o, w[k].name);
            CHECK(i != SIZE_MAX && qtk__ckpt_desc(o)->tensors[i].elem == QTK_ELEM_BF16);
            uint8_t *b = tensor_bytes(o, w[k].name, &len);
            CHECK(b && len == 2 * w[k].o * w[k].k);
            size_t bad = 0;
            for (size_t r = 0; b && r < w[k].o; r++)
                for (size_t q = 0; q < w[k].k; q++) {
                    /* DeepSeek's weight_dequant: f32(x) * s[r / 128, q / 128], then bf16 */
                    float v = qtk_fmt_decode(QTK_DTYPE_E4M3, w[k].w[r * w[k].k + q]) * w[k].s[(r / 128) * w[k].gc + q / 128];
                    uint16_t want = bf16_rne(v), got = (uint16_t)(b[2 * (r * w[k].k + q)] | b[2 * (r * w[k].k + q) + 1] << 8);
                    bad += want != got;
                }
            CHECK_MSG(bad == 0, "'%s': %zu bf16 values differ from the reference", w[k].name, bad);
            test_checks += (long)(w[k].o * w[k].k);
            free(b);
        }
        size_t len = 0;
        uint8_t *e = tensor_bytes(o, "model.embed_tokens.weight", &len), *nn = tensor_bytes(o, "model.norm.weight", &n);
        CHECK(e && len == sizeof embed && memcmp(e, embed, len) == 0);
        CHECK(nn && n == sizeof norm && memcmp(nn, norm, n) == 0);
        free(e);
        free(nn);
        qtk_ckpt_close(o);
    }
    /* an existing output is not replaced without force */
    CHECK_ERR(convert_none_bf16(src, out), QTK_E_IO, "exists; it is replaced only with");
    for (int i = 0; i < 3; i++) free(w[i].w), free(w[i].s);
}

/* NVFP4 (ModelOpt) and MXFP4 (gpt-oss) checkpoints to bf16: each value RN_bf16 of qtk's
 * exact dequantization. */
static void nvfp4_mxfp4_to_bf16(void) {
    const char *specs[2] = {"nvfp4", "mxfp4"};
    qtk_hub_layout lay[2] = {QTK_LAYOUT_MODELOPT, QTK_LAYOUT_GPT_OSS};
    const char *names[2] = {"model.layers.0.mlp.down_proj.weight", "model.layers.0.mlp.experts.down_proj"};
    for (int k = 0; k < 2; k++) {
        qtk_scheme s;
        CHECK_OK(qtk_scheme_parse(specs[k], &s));
        qtk__desc d;
        qtk__desc_init(&d);
        size_t shape[3] = {2, 64, 128};
        int rank = k == 0 ? 2 : 3;
        qtk_ckpt_tensor *t = NULL;
        CHECK_OK(qtk__desc_add_quantized(&d, names[k], &s, k == 0 ? shape + 1 : shape, rank, &t));
        if (!t) continue;
        float *x = malloc(t->numel * sizeof *x), *y = malloc(t->numel * sizeof *y);
        uint64_t seed = 5;
        for (size_t i = 0; i < t->numel; i++) x[i] = trand_normal(&seed);
        uint8_t *b = malloc(t->nbytes);
        CHECK_OK(qtk_quantize_into(x, t->shape, t->rank, &s, NULL, b, t->nbytes));
        CHECK_OK(qtk_dequantize_bytes(b, t->nbytes, t->shape, t->rank, &s, QTK_DTYPE_F32, y, t->numel));
        char in[512], out[512];
        snprintf(in, sizeof in, "%s", tmp_path(k ? "mx" : "nv"));
        snprintf(out, sizeof out, "%s", tmp_path(k ? "mx-bf16" : "nv-bf16"));
        qtk__hub_write_opts ho = {.layout = lay[k], .max_shard_bytes = t->nbytes / 3};
        const void *bytes[1] = {b};
        CHECK_OK(qtk__hub_write(in, &d, bytes, &ho));
        qtk_convert_options o = {.scheme = "none", .dtype = QTK_DTYPE_BF16};
        CHECK_OK(qtk_ckpt_convert(in, out, &o, NULL));
        qtk_ckpt *c = NULL;
        CHECK_OK(qtk_ckpt_open(out, NULL, &c));
        size_t len = 0;
        uint8_t *got = c ? tensor_bytes(c, names[k], &len) : NULL;
        CHECK(got && len == 2 * t->numel);
        size_t bad = 0;
        for (size_t i = 0; got && i < t->numel; i++) bad += bf16_rne(y[i]) != (uint16_t)(got[2 * i] | got[2 * i + 1] << 8);
        CHECK_MSG(bad == 0, "%s: %zu bf16 values differ", specs[k], bad);
        free(got);
        qtk_ckpt_close(c);
        free(x);
        free(y);
        free(b);
        qtk__desc_free(&d);
    }
}

int main(int argc, char **argv) {
    tmp_dir_make();
    static const test_case cases[] = {T(deepseek_fp8_to_bf16), T(nvfp4_mxfp4_to_bf16)};
    int rc = test_run("hub_convert", cases, sizeof cases / sizeof cases[0], argc, argv);
    tmp_dir_remove();
    return rc;
}
