/* test_hub_examples.c — the derived hex examples of HUB_LAYOUTS.md: the gpt-oss MXFP4 file of
 * §2.6 and the ModelOpt NVFP4 file of §3.6 are read into the stated qtk payloads and values,
 * and writing those qtk tensors in the same layouts reproduces the files byte for byte; the
 * §3.6 weight in compressed-tensors form has the stated weight_global_scale (1024 = 1/g). */
#include "hub_util.h"

#include "hub/hub.h"

/* §2.6: 265 bytes */
static const char gptoss_hex[] =
    "f0 00 00 00 00 00 00 00 7b 22 5f 5f 6d 65 74 61 64 61 74 61 5f 5f 22 3a 7b 22 66 6f 72 6d 61 74"
    "22 3a 22 70 74 22 7d 2c 22 6d 6f 64 65 6c 2e 6c 61 79 65 72 73 2e 30 2e 6d 6c 70 2e 65 78 70 65"
    "72 74 73 2e 64 6f 77 6e 5f 70 72 6f 6a 5f 62 6c 6f 63 6b 73 22 3a 7b 22 64 74 79 70 65 22 3a 22"
    "55 38 22 2c 22 73 68 61 70 65 22 3a 5b 31 2c 31 2c 31 2c 31 36 5d 2c 22 64 61 74 61 5f 6f 66 66"
    "73 65 74 73 22 3a 5b 30 2c 31 36 5d 7d 2c 22 6d 6f 64 65 6c 2e 6c 61 79 65 72 73 2e 30 2e 6d 6c"
    "70 2e 65 78 70 65 72 74 73 2e 64 6f 77 6e 5f 70 72 6f 6a 5f 73 63 61 6c 65 73 22 3a 7b 22 64 74"
    "79 70 65 22 3a 22 55 38 22 2c 22 73 68 61 70 65 22 3a 5b 31 2c 31 2c 31 5d 2c 22 64 61 74 61 5f"
    "6f 66 66 73 65 74 73 22 3a 5b 31 36 2c 31 37 5d 7d 7d 20 20 20 20 20 20 f2 10 00 00 00 00 00 00"
    "00 00 00 00 00 00 00 60 7e";

/* §3.6: 354 bytes */
static const char modelopt_hex[] =
    "40 01 00 00 00 00 00 00 7b 22 5f 5f 6d 65 74 61 64 61 74 61 5f 5f 22 3a 7b 22 66 6f 72 6d 61 74"
    "22 3a 22 70 74 22 7d 2c 22 6c 61 79 65 72 2e 69 6e 70 75 74 5f 73 63 61 6c 65 22 3a 7b 22 64 74"
    "79 70 65 22 3a 22 46 33 32 22 2c 22 73 68 61 70 65 22 3a 5b 5d 2c 22 64 61 74 61 5f 6f 66 66 73"
    "65 74 73 22 3a 5b 30 2c 34 5d 7d 2c 22 6c 61 79 65 72 2e 77 65 69 67 68 74 5f 73 63 61 6c 65 5f"
    "32 22 3a 7b 22 64 74 79 70 65 22 3a 22 46 33 32 22 2c 22 73 68 61 70 65 22 3a 5b 5d 2c 22 64 61"
    "74 61 5f 6f 66 66 73 65 74 73 22 3a 5b 34 2c 38 5d 7d 2c 22 6c 61 79 65 72 2e 77 65 69 67 68 74"
    "5f 73 63 61 6c 65 22 3a 7b 22 64 74 79 70 65 22 3a 22 46 38 5f 45 34 4d 33 22 2c 22 73 68 61 70"
    "65 22 3a 5b 31 2c 32 5d 2c 22 64 61 74 61 5f 6f 66 66 73 65 74 73 22 3a 5b 38 2c 31 30 5d 7d 2c"
    "22 6c 61 79 65 72 2e 77 65 69 67 68 74 22 3a 7b 22 64 74 79 70 65 22 3a 22 55 38 22 2c 22 73 68"
    "61 70 65 22 3a 5b 31 2c 31 36 5d 2c 22 64 61 74 61 5f 6f 66 66 73 65 74 73 22 3a 5b 31 30 2c 32"
    "36 5d 7d 7d 20 20 20 20 00 00 00 3c 00 00 80 3a 7e 6e 97 02 00 00 00 00 00 d0 f1 00 00 00 00 00"
    "00 00";

static void expect_payload(qtk_ckpt *c, size_t i, const char *hex) {
    size_t n;
    uint8_t *want = hex_bytes(hex, &n);
    qtk_ckpt_view v;
    CHECK_OK(qtk_ckpt_load(c, i, &v));
    CHECK_EQ_U(v.len, n);
    if (v.len == n) {
        char *got = bytes_hex(v.data, v.len);
        CHECK_MSG(memcmp(v.data, want, n) == 0, "payload %s, expected %s", got, hex);
        free(got);
    }
    qtk_ckpt_unload(c, &v);
    free(want);
}

static void expect_values(qtk_ckpt *c, size_t i, const float *want, size_t n) {
    const qtk_ckpt_tensor *t = &qtk__ckpt_desc(c)->tensors[i];
    CHECK_EQ_U(t->numel, n);
    if (t->numel != n) return;
    float *y = calloc(n, sizeof *y);
    qtk_ckpt_view v;
    CHECK_OK(qtk_ckpt_load(c, i, &v));
    CHECK_OK(qtk_dequantize_bytes(v.data, v.len, t->shape, t->rank, &t->scheme, QTK_DTYPE_F32, y, n));
    for (size_t k = 0; k < n; k++) CHECK_BITS(y[k], want[k]);
    qtk_ckpt_unload(c, &v);
    free(y);
}

static bool same_as_hex(const char *path, const char *hex) {
    size_t n, m;
    uint8_t *want = hex_bytes(hex, &n), *got = slurp(path, &m);
    bool same = got && n == m && memcmp(want, got, n) == 0;
    if (!same && got) {
        char *h = bytes_hex(got, m);
        fprintf(stderr, "  wrote %zu bytes: %s\n", m, h);
        free(h);
    }
    free(want);
    free(got);
    return same;
}

static void gptoss_mxfp4(void) {
    size_t n;
    uint8_t *f = hex_bytes(gptoss_hex, &n);
    CHECK_EQ_U(n, 265);
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open_memory(f, n, "gptoss.safetensors", NULL, &c));
    if (c) {
        qtk_hub_info hi;
        qtk_ckpt_hub_info(c, &hi);
        CHECK(hi.layout == QTK_LAYOUT_GPT_OSS);
        const qtk__desc *d = qtk__ckpt_desc(c);
        CHECK_EQ_U(d->n_tensors, 1);
        const qtk_ckpt_tensor *t = &d->tensors[0];
        qtk_scheme mx;
        CHECK_OK(qtk_scheme_parse("mxfp4", &mx));
        CHECK(strcmp(t->name, "model.layers.0.mlp.experts.down_proj") == 0);
        CHECK(t->quantized && qtk_scheme_equal(&t->scheme, &mx));
        CHECK(t->rank == 3 && t->shape[0] == 1 && t->shape[1] == 1 && t->shape[2] == 32);
        expect_payload(c, 0, "F2 10 00 00 00 00 00 00 00 00 00 00 00 00 00 60 7E");
        float want[32] = {0.5f, -3.0f, 0.0f, 0.25f};
        want[31] = 2.0f;
        expect_values(c, 0, want, 32);
        /* written back in the same layout: the same 265 bytes (config.json goes beside) */
        tmp_dir_make();
        CHECK_OK(hub_rewrite(c, tmp_path("g.safetensors"), QTK_LAYOUT_GPT_OSS));
        CHECK_MSG(same_as_hex(tmp_path("g.safetensors"), gptoss_hex), "gpt-oss rewrite differs from §2.6");
        char *cfg = text_read(tmp_path("config.json"));
        CHECK(cfg && strstr(cfg, "\"quant_method\": \"mxfp4\""));
        free(cfg);
        /* and the directory reads back as gpt-oss, from its config this time */
        qtk_ckpt *c2 = NULL;
        CHECK_OK(qtk_ckpt_open(tmp_path("g.safetensors"), NULL, &c2));
        if (c2) {
            qtk_ckpt_hub_info(c2, &hi);
            CHECK(hi.layout == QTK_LAYOUT_GPT_OSS && hi.config_file && strstr(hi.detected_by, "mxfp4"));
            expect_payload(c2, 0, "F2 10 00 00 00 00 00 00 00 00 00 00 00 00 00 60 7E");
            qtk_ckpt_close(c2);
        }
        tmp_dir_remove();
        qtk_ckpt_close(c);
    }
    free(f);
}

static const float nvfp4_values[32] = {2.625f, -0.21875f, 0.4375f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1.3125f,
                                       0.0546875f, -0.65625f};

static void modelopt_nvfp4(void) {
    size_t n;
    uint8_t *f = hex_bytes(modelopt_hex, &n);
    CHECK_EQ_U(n, 354);
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open_memory(f, n, "modelopt.safetensors", NULL, &c));
    if (c) {
        qtk_hub_info hi;
        qtk_ckpt_hub_info(c, &hi);
        CHECK(hi.layout == QTK_LAYOUT_MODELOPT);
        const qtk__desc *d = qtk__ckpt_desc(c);
        CHECK_EQ_U(d->n_tensors, 2);
        qtk_scheme nv;
        CHECK_OK(qtk_scheme_parse("nvfp4", &nv));
        /* in file order: input_scale (an activation scale, as stored), then the weight */
        CHECK(d->n_tensors == 2 && strcmp(d->tensors[0].name, "layer.input_scale") == 0 && !d->tensors[0].quantized &&
              d->tensors[0].elem == QTK_ELEM_F32 && d->tensors[0].rank == 0);
        size_t w = 1;
        CHECK(d->n_tensors == 2 && strcmp(d->tensors[w].name, "layer.weight") == 0);
        CHECK(d->tensors[w].quantized && qtk_scheme_equal(&d->tensors[w].scheme, &nv));
        CHECK(d->tensors[w].rank == 2 && d->tensors[w].shape[0] == 1 && d->tensors[w].shape[1] == 32);
        expect_payload(c, w, "97 02 00 00 00 00 00 D0 F1 00 00 00 00 00 00 00 7E 6E 00 00 80 3A");
        expect_values(c, w, nvfp4_values, 32);
        tmp_dir_make();
        CHECK_OK(hub_rewrite(c, tmp_path("m.safetensors"), QTK_LAYOUT_MODELOPT));
        CHECK_MSG(same_as_hex(tmp_path("m.safetensors"), modelopt_hex), "ModelOpt rewrite differs from §3.6");
        CHECK(file_exists(tmp_path("hf_quant_config.json")) && file_exists(tmp_path("config.json")));

        /* compressed-tensors form (§3.6, last paragraph): the same packed bytes and block
         * scales, and weight_global_scale [1024.0] = 00 00 80 44, a divisor */
        char ct[1024];
        snprintf(ct, sizeof ct, "%s", tmp_path("ct"));
        CHECK_OK(hub_rewrite(c, ct, QTK_LAYOUT_CT));
        qtk_ckpt *raw = NULL;
        CHECK_OK(qtk_ckpt_open(ct, &(qtk_open_options){.layout = QTK_LAYOUT_NONE}, &raw));
        if (raw) {
            const qtk__desc *rd = qtk__ckpt_desc(raw);
            const char *names[3] = {"layer.weight_global_scale", "layer.weight_scale", "layer.weight_packed"};
            const char *hex[3] = {"00 00 80 44", "7E 6E", "97 02 00 00 00 00 00 D0 F1 00 00 00 00 00 00 00"};
            for (size_t k = 0; k < 3; k++) {
                size_t j = 0;
                while (j < rd->n_tensors && strcmp(rd->tensors[j].name, names[k]) != 0) j++;
                CHECK_MSG(j < rd->n_tensors, "no '%s' in the compressed-tensors file", names[k]);
                if (j < rd->n_tensors) expect_payload(raw, j, hex[k]);
            }
            qtk_ckpt_close(raw);
        }
        qtk_ckpt *back = NULL;
        CHECK_OK(qtk_ckpt_open(ct, NULL, &back));
        if (back) {
            qtk_ckpt_hub_info(back, &hi);
            CHECK(hi.layout == QTK_LAYOUT_CT && hi.n_notices == 0);
            const qtk__desc *bd = qtk__ckpt_desc(back);
            size_t j = 0;
            while (j < bd->n_tensors && strcmp(bd->tensors[j].name, "layer.weight") != 0) j++;
            CHECK(j < bd->n_tensors && bd->tensors[j].quantized && qtk_scheme_equal(&bd->tensors[j].scheme, &nv));
            if (j < bd->n_tensors) {
                expect_payload(back, j, "97 02 00 00 00 00 00 D0 F1 00 00 00 00 00 00 00 7E 6E 00 00 80 3A");
                expect_values(back, j, nvfp4_values, 32);
            }
            qtk_ckpt_close(back);
        }
        tmp_dir_remove();
        qtk_ckpt_close(c);
    }
    free(f);
}

TEST_MAIN("hub_examples", T(gptoss_mxfp4), T(modelopt_nvfp4))
