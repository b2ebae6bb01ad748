/* test_ckpt_data.c — the real files in $QTK_SHARED_DIR/data: Burn's model.bpk and PyTorch's
 * mnist.safetensors read with the values BURNPACK.md §5 lists and rewritten byte for byte
 * (also through the other format); mnist converted under each preset, every quantized
 * element within its scheme's error bound, the quantized tensors bit-exact across formats.
 * Exits 77 (skipped) when the data is absent, as in a clone without ../shared. */
#include "ckpt_util.h"

#include "ops/select.h"
#include "io/values.h"

static char bpk[1024], stf[1024], hub[1024];

static bool same_file(const char *a, const char *b) {
    size_t na, nb;
    uint8_t *x = slurp(a, &na), *y = slurp(b, &nb);
    bool same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

static qtk_status convert(const char *in, const char *out, const char *spec) {
    qtk_convert_options o = {.scheme = spec, .force = 1};
    return qtk_ckpt_convert(in, out, &o, NULL);
}

static float f32_at(const uint8_t *p) {
    float f;
    memcpy(&f, p, 4);
    return f;
}

static void model_bpk(void) {
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(bpk, NULL, &c));
    if (!c) return;
    const qtk__desc *d = qtk__ckpt_desc(c);
    CHECK(qtk_ckpt_format_of(c) == QTK_CKPT_BURNPACK);
    CHECK_EQ_U(d->n_tensors, 18);
    CHECK_EQ_U(d->n_meta, 0);
    CHECK_EQ_U(d->n_scalars, 0);
    qtk_ckpt_facts fx;
    qtk_ckpt_facts_of(c, &fx);
    CHECK_EQ_U(fx.file_bytes, 1044776);
    CHECK_EQ_U(fx.data_start, 1536);
    CHECK(strstr(fx.note, "metadata 1398 bytes") != NULL);
    /* data order = module order (BURNPACK.md §5.1) */
    const char *order[18] = {"conv1.conv.weight", "conv1.conv.bias", "conv1.norm.gamma", "conv1.norm.beta",
                             "conv1.norm.running_mean", "conv1.norm.running_var", "conv2.conv.weight", "conv2.conv.bias",
                             "conv2.norm.gamma", "conv2.norm.beta", "conv2.norm.running_mean", "conv2.norm.running_var",
                             "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"};
    for (size_t i = 0; i < 18 && i < d->n_tensors; i++) {
        CHECK_MSG(strcmp(d->tensors[i].name, order[i]) == 0, "tensor %zu is '%s', expected '%s'", i, d->tensors[i].name, order[i]);
        CHECK(d->tensors[i].elem == QTK_ELEM_F32 && d->tensors[i].has_param_id);
    }
    CHECK_EQ_U(qtk_ckpt_offset_of(c, 0), 1536);
    CHECK_EQ_U(qtk_ckpt_offset_of(c, 1), 3840);
    CHECK_EQ_U(qtk_ckpt_offset_of(c, 17), 1044736);
    CHECK_EQ_U(d->tensors[0].rank, 4);
    CHECK(d->tensors[0].shape[0] == 64 && d->tensors[0].shape[1] == 1 && d->tensors[0].shape[3] == 3);
    CHECK_EQ_U(d->tensors[1].param_id, 0x83eb859adffb2071ull);
    CHECK_EQ_U(d->tensors[12].param_id, 0x18024d1a756838cfull);
    qtk_ckpt_view v;
    CHECK_OK(qtk_ckpt_load(c, 0, &v));
    CHECK(fabsf(f32_at(v.data) + 0.14137f) < 1e-5f && fabsf(f32_at(v.data + 12) - 0.249544f) < 1e-5f);
    qtk_ckpt_unload(c, &v);
    CHECK_OK(qtk_ckpt_load(c, 1, &v));
    CHECK(fabsf(f32_at(v.data) - 0.00264026f) < 1e-7f && fabsf(f32_at(v.data + 12) + 0.0170786f) < 1e-6f);
    qtk_ckpt_unload(c, &v);
    qtk_ckpt_close(c);

    /* carried over unchanged: byte for byte, directly and through safetensors */
    CHECK_OK(convert(bpk, tmp_path("copy.bpk"), NULL));
    CHECK_MSG(same_file(bpk, tmp_path("copy.bpk")), "model.bpk -> copy.bpk is not byte-identical");
    CHECK_OK(convert(bpk, tmp_path("model.safetensors"), NULL));
    char s[1024];
    snprintf(s, sizeof s, "%s", tmp_path("model.safetensors"));
    CHECK_OK(convert(s, tmp_path("back.bpk"), NULL));
    CHECK_MSG(same_file(bpk, tmp_path("back.bpk")), "model.bpk -> .safetensors -> .bpk is not byte-identical");
}

static void mnist_safetensors(void) {
    qtk_ckpt *c = NULL;
    CHECK_OK(qtk_ckpt_open(stf, NULL, &c));
    if (!c) return;
    const qtk__desc *d = qtk__ckpt_desc(c);
    CHECK(qtk_ckpt_format_of(c) == QTK_CKPT_SAFETENSORS);
    CHECK_EQ_U(d->n_tensors, 20);
    CHECK(d->n_tensors == 20 && strcmp(d->tensors[0].name, "norm1.num_batches_tracked") == 0 &&
          d->tensors[0].elem == QTK_ELEM_I64 && d->tensors[0].rank == 0);
    CHECK(d->n_tensors == 20 && strcmp(d->tensors[9].name, "fc1.weight") == 0 && d->tensors[9].shape[1] == 11616);
    CHECK_EQ_U(qtk_ckpt_offset_of(c, 9), 20584);
    qtk_ckpt_facts fx;
    qtk_ckpt_facts_of(c, &fx);
    CHECK_EQ_U(fx.data_start, 1528);
    qtk_ckpt_close(c);
    CHECK_OK(convert(stf, tmp_path("copy.safetensors"), NULL));
    CHECK_MSG(same_file(stf, tmp_path("copy.safetensors")), "mnist.safetensors rewrite is not byte-identical");
    CHECK_OK(convert(stf, tmp_path("mnist.bpk"), NULL));
    char b[1024];
    snprintf(b, sizeof b, "%s", tmp_path("mnist.bpk"));
    CHECK_OK(convert(b, tmp_path("back.safetensors"), NULL));
    CHECK_MSG(same_file(stf, tmp_path("back.safetensors")), "mnist -> .bpk -> .safetensors is not byte-identical");
    if (hub[0]) {
        CHECK_OK(convert(hub, tmp_path("hadamards.safetensors"), NULL));
        CHECK_MSG(same_file(hub, tmp_path("hadamards.safetensors")), "hadamards.safetensors rewrite is not byte-identical");
    }
}

/* mnist under each preset: what is quantized, the error bound per element, and bit-exact
 * quantized tensors across .bpk and .safetensors. */
static void mnist_presets(void) {
    const char *presets[] = {"nvfp4", "mxfp4", "mxfp8", "nf4"};
    qtk_ckpt *src = NULL;
    CHECK_OK(qtk_ckpt_open(stf, NULL, &src));
    if (!src) return;
    for (size_t k = 0; k < 4; k++) {
        char out_b[1024], out_s[1024];
        snprintf(out_b, sizeof out_b, "%s", tmp_path("p.bpk"));
        snprintf(out_s, sizeof out_s, "%s", tmp_path("p.safetensors"));
        CHECK_OK(convert(stf, out_b, presets[k]));
        CHECK_OK(convert(out_b, out_s, NULL));
        qtk_scheme want;
        CHECK_OK(qtk_scheme_parse(presets[k], &want));
        qtk_ckpt *cb = NULL, *cs = NULL;
        CHECK_OK(qtk_ckpt_open(out_b, NULL, &cb));
        CHECK_OK(qtk_ckpt_open(out_s, NULL, &cs));
        if (!cb || !cs) {
            qtk_ckpt_close(cb);
            qtk_ckpt_close(cs);
            continue;
        }
        const qtk__desc *d = qtk__ckpt_desc(cb), *ds = qtk__ckpt_desc(cs), *d0 = qtk__ckpt_desc(src);
        CHECK_EQ_U(d->n_tensors, 20);
        size_t nq = 0;
        qtk__buf f32 = {0};
        for (size_t i = 0; i < d->n_tensors && i < ds->n_tensors && i < d0->n_tensors; i++) {
            const qtk_ckpt_tensor *t = &d->tensors[i], *t0 = &d0->tensors[i];
            /* the default selection: rank >= 2 and >= 1024 elements; nothing else */
            bool expect = t0->elem == QTK_ELEM_F32 && t0->rank >= 2 && t0->numel >= 1024;
            CHECK_MSG(t->quantized == expect, "%s: '%s' quantized=%d", presets[k], t->name, t->quantized);
            qtk_ckpt_view v, vs, v0;
            CHECK_OK(qtk_ckpt_load(cb, i, &v));
            CHECK_OK(qtk_ckpt_load(cs, i, &vs));
            CHECK_OK(qtk_ckpt_load(src, i, &v0));
            CHECK_MSG(v.len == vs.len && memcmp(v.data, vs.data, v.len) == 0, "%s: '%s' differs between .bpk and .safetensors",
                      presets[k], t->name);
            if (t->quantized) {
                nq++;
                CHECK(qtk_scheme_equal(&t->scheme, &want) || want.mode == QTK_MODE_LOOKUP);
                const float *x;
                CHECK_OK(qtk__values_f32(t0, v0.data, &f32, &x));
                size_t bad = check_error_bound(t, v.data, x);
                CHECK_MSG(bad == 0, "%s: '%s': %zu elements beyond the error bound", presets[k], t->name, bad);
                test_checks += t->numel;
            } else {
                CHECK(v.len == v0.len && memcmp(v.data, v0.data, v.len) == 0);
            }
            qtk_ckpt_unload(cb, &v);
            qtk_ckpt_unload(cs, &vs);
            qtk_ckpt_unload(src, &v0);
        }
        CHECK_EQ_U(nq, 3); /* conv2, conv3 and fc1 weights (fc2.weight has 320 elements) */
        qtk__buf_free(&f32);
        qtk_ckpt_close(cb);
        qtk_ckpt_close(cs);
        /* and back to floats: --scheme none */
        CHECK_OK(convert(out_s, tmp_path("f.safetensors"), "none"));
    }
    qtk_ckpt_close(src);
}

int main(int argc, char **argv) {
    const char *p = shared_file("burn/model.bpk");
    if (!p) {
        printf("ckpt_data: $QTK_SHARED_DIR/data/burn is missing: skipped\n");
        return 77;
    }
    snprintf(bpk, sizeof bpk, "%s", p);
    p = shared_file("burn/mnist.safetensors");
    if (!p) return 77;
    snprintf(stf, sizeof stf, "%s", p);
    p = shared_file("hub/hadamards.safetensors");
    if (p) snprintf(hub, sizeof hub, "%s", p);
    tmp_dir_make();
    static const test_case cases[] = {T(model_bpk), T(mnist_safetensors), T(mnist_presets)};
    int rc = test_run("ckpt_data", cases, sizeof cases / sizeof cases[0], argc, argv);
    tmp_dir_remove();
    return rc;
}
