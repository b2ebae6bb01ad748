/* synth_model.c — see synth_model.h. */
#include "synth_model.h"

#include "common/internal.h"
#include "numfmt/scalar.h"
#include "synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void cli_synth_default(cli_synth_config *c) {
    *c = (cli_synth_config){.layers = 4, .hidden = 512, .ffn = 1536, .kv = 128, .vocab = 4096,
                            .elem = QTK_ELEM_BF16, .seed = 42};
}

typedef enum { KIND_MATRIX, KIND_NORM, KIND_BIAS } kind;

typedef struct {
    kind k;
    float std;
    uint64_t seed;
} recipe;

static qtk_status add(qtk__desc *d, recipe *r, const cli_synth_config *c, const char *name, kind k, size_t rows,
                      size_t cols, float std) {
    size_t shape[2] = {rows, cols};
    qtk_status st = qtk__desc_add_raw(d, name, c->elem, shape, k == KIND_MATRIX ? 2 : 1, NULL);
    if (st) return st;
    /* each tensor has its own seed, so a tensor's values do not depend on its neighbours */
    r[d->n_tensors - 1] = (recipe){k, std, c->seed * 1000003u + d->n_tensors};
    return QTK_OK;
}

static qtk_status describe(const cli_synth_config *c, qtk__desc *d, recipe *r) {
    char nm[128];
    size_t h = c->hidden;
    /* init scales in the usual range: ~1/sqrt(fan-in), a little wider for embeddings */
    float wstd = (float)(1.0 / sqrt((double)h)), dstd = (float)(1.0 / sqrt((double)c->ffn));
    qtk_status st = add(d, r, c, "model.embed_tokens.weight", KIND_MATRIX, c->vocab, h, 0.02f);
    for (size_t l = 0; l < c->layers && !st; l++) {
        const struct {
            const char *part;
            kind k;
            size_t rows, cols;
            float std;
        } parts[] = {
            {"input_layernorm.weight", KIND_NORM, h, 0, 0.05f},
            {"self_attn.q_proj.weight", KIND_MATRIX, h, h, wstd},
            {"self_attn.q_proj.bias", KIND_BIAS, h, 0, 0.02f},
            {"self_attn.k_proj.weight", KIND_MATRIX, c->kv, h, wstd},
            {"self_attn.k_proj.bias", KIND_BIAS, c->kv, 0, 0.02f},
            {"self_attn.v_proj.weight", KIND_MATRIX, c->kv, h, wstd},
            {"self_attn.v_proj.bias", KIND_BIAS, c->kv, 0, 0.02f},
            {"self_attn.o_proj.weight", KIND_MATRIX, h, h, wstd},
            {"post_attention_layernorm.weight", KIND_NORM, h, 0, 0.05f},
            {"mlp.gate_proj.weight", KIND_MATRIX, c->ffn, h, wstd},
            {"mlp.up_proj.weight", KIND_MATRIX, c->ffn, h, wstd},
            {"mlp.down_proj.weight", KIND_MATRIX, h, c->ffn, dstd},
        };
        for (size_t p = 0; p < sizeof parts / sizeof parts[0] && !st; p++) {
            snprintf(nm, sizeof nm, "model.layers.%zu.%s", l, parts[p].part);
            st = add(d, r, c, nm, parts[p].k, parts[p].rows, parts[p].cols, parts[p].std);
        }
    }
    if (!st) st = add(d, r, c, "model.norm.weight", KIND_NORM, h, 0, 0.05f);
    if (!st) st = add(d, r, c, "lm_head.weight", KIND_MATRIX, c->vocab, h, wstd);
    return st;
}

static void fill(const recipe *r, const qtk_ckpt_tensor *t, float *x) {
    if (r->k == KIND_MATRIX) {
        /* every 97th input channel is an outlier channel, 8-20x the bulk */
        cli_synth_weights(x, t->shape[0], t->shape[1], r->std, 97, r->seed);
        return;
    }
    cli_rng g = {r->seed};
    for (size_t i = 0; i < t->numel; i++) {
        double v = cli_rng_normal(&g) * r->std;
        x[i] = (float)(r->k == KIND_NORM ? 1.0 + v : v);
    }
}

static void encode(qtk_elem e, const float *x, size_t n, uint8_t *out) {
    for (size_t i = 0; i < n; i++) {
        if (e == QTK_ELEM_F32) qtk__st32(out + 4 * i, qtk__f32_bits(x[i]));
        else if (e == QTK_ELEM_F16) qtk__st16(out + 2 * i, qtk__f32_to_f16(x[i]));
        else qtk__st16(out + 2 * i, qtk__f32_to_bf16(x[i]));
    }
}

qtk_status cli_synth_checkpoint(const char *path, qtk_ckpt_format fmt, const cli_synth_config *c, int force) {
    if (c->elem != QTK_ELEM_F32 && c->elem != QTK_ELEM_F16 && c->elem != QTK_ELEM_BF16)
        return qtk__err(QTK_E_ARG, "synthetic weights are F32, F16 or BF16, not %s", qtk_elem_name(c->elem));
    if (!c->layers || !c->hidden || !c->ffn || !c->kv || !c->vocab)
        return qtk__err(QTK_E_ARG, "every model dimension must be at least 1");
    qtk__desc d;
    qtk__desc_init(&d);
    size_t n_max = 3 + 12 * c->layers;
    recipe *r = calloc(n_max, sizeof *r);
    float *x = NULL;
    uint8_t *bytes = NULL;
    qtk__ckpt_writer *w = NULL;
    qtk_status st = r ? describe(c, &d, r) : qtk__err(QTK_E_NOMEM, "out of memory");
    if (!st) st = qtk__desc_add_meta(&d, "producer", "qtk synth");
    size_t biggest = 0;
    for (size_t i = 0; i < d.n_tensors; i++)
        if (d.tensors[i].numel > biggest) biggest = d.tensors[i].numel;
    if (!st && (biggest > SIZE_MAX / sizeof(float) || !(x = malloc(biggest * sizeof(float))) ||
                !(bytes = malloc(biggest * sizeof(float)))))
        st = qtk__err(QTK_E_NOMEM, "out of memory for a %zu-element tensor", biggest);
    if (!st) st = qtk__ckpt_writer_open(path, fmt, &d, force, &w);
    for (size_t i = 0; i < d.n_tensors && !st; i++) {
        fill(&r[i], &d.tensors[i], x);
        encode(c->elem, x, d.tensors[i].numel, bytes);
        st = qtk__ckpt_writer_put(w, bytes, d.tensors[i].nbytes);
    }
    if (!st) {
        st = qtk__ckpt_writer_commit(w);
        w = NULL;
    }
    qtk__ckpt_writer_abort(w);
    free(x);
    free(bytes);
    free(r);
    qtk__desc_free(&d);
    return st;
}
