/* synth_model.c — see synth_model.h. */
#include "synth_model.h"

#include "files.h"
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
    size_t rows, cols, numel;
} recipe;

typedef struct {
    qtk_writer *w;
    recipe *r;
    size_t n;
} model;

static qtk_status add(model *m, const cli_synth_config *c, const char *name, kind k, size_t rows, size_t cols,
                      float std) {
    size_t shape[2] = {rows, cols};
    int rank = k == KIND_MATRIX ? 2 : 1;
    qtk_status st = qtk_writer_add_raw(m->w, name, c->elem, shape, rank, NULL);
    if (st) return st;
    m->n++;
    /* each tensor has its own seed, so a tensor's values do not depend on its neighbours */
    m->r[m->n - 1] = (recipe){k, std, c->seed * 1000003u + m->n, rows, cols, rank == 2 ? rows * cols : rows};
    return QTK_OK;
}

static qtk_status describe(const cli_synth_config *c, model *d) {
    char nm[128];
    size_t h = c->hidden;
    /* init scales in the usual range: ~1/sqrt(fan-in), a little wider for embeddings */
    float wstd = (float)(1.0 / sqrt((double)h)), dstd = (float)(1.0 / sqrt((double)c->ffn));
    qtk_status st = add(d, c, "model.embed_tokens.weight", KIND_MATRIX, c->vocab, h, 0.02f);
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
            st = add(d, c, nm, parts[p].k, parts[p].rows, parts[p].cols, parts[p].std);
        }
    }
    if (!st) st = add(d, c, "model.norm.weight", KIND_NORM, h, 0, 0.05f);
    if (!st) st = add(d, c, "lm_head.weight", KIND_MATRIX, c->vocab, h, wstd);
    return st;
}

static void fill(const recipe *r, float *x) {
    if (r->k == KIND_MATRIX) {
        /* every 97th input channel is an outlier channel, 8-20x the bulk */
        cli_synth_weights(x, r->rows, r->cols, r->std, 97, r->seed);
        return;
    }
    cli_rng g = {r->seed};
    for (size_t i = 0; i < r->numel; i++) {
        double v = cli_rng_normal(&g) * r->std;
        x[i] = (float)(r->k == KIND_NORM ? 1.0 + v : v);
    }
}

/* f32 values as the checkpoint's element type; *len gets the byte count */
static void encode(qtk_elem e, const float *x, size_t n, uint8_t *out, size_t *len) {
    if (e == QTK_ELEM_F32) {
        memcpy(out, x, n * 4); /* little-endian, as every supported target is */
        *len = n * 4;
        return;
    }
    qtk_dtype dt = e == QTK_ELEM_F16 ? QTK_DTYPE_F16 : QTK_DTYPE_BF16;
    for (size_t i = 0; i < n; i++) cli_st16(out + 2 * i, (uint16_t)qtk_fmt_encode(dt, x[i]));
    *len = n * 2;
}

qtk_status cli_synth_checkpoint(const char *path, qtk_ckpt_format fmt, const cli_synth_config *c, int force) {
    if (c->elem != QTK_ELEM_F32 && c->elem != QTK_ELEM_F16 && c->elem != QTK_ELEM_BF16)
        return qtk_set_error(QTK_E_ARG, "synthetic weights are F32, F16 or BF16, not %s", qtk_elem_name(c->elem));
    if (!c->layers || !c->hidden || !c->ffn || !c->kv || !c->vocab)
        return qtk_set_error(QTK_E_ARG, "every model dimension must be at least 1");
    qtk_write_options wo = {.format = fmt, .force = force};
    model m = {NULL, calloc(3 + 12 * c->layers, sizeof(recipe)), 0};
    float *x = NULL;
    uint8_t *bytes = NULL;
    qtk_status st = m.r ? qtk_writer_create(path, &wo, &m.w) : qtk_set_error(QTK_E_NOMEM, "out of memory");
    if (!st) st = describe(c, &m);
    if (!st) st = qtk_writer_add_meta(m.w, "producer", "qtk synth");
    size_t biggest = 0;
    for (size_t i = 0; i < m.n; i++)
        if (m.r[i].numel > biggest) biggest = m.r[i].numel;
    if (!st && (biggest > SIZE_MAX / sizeof(float) || !(x = malloc(biggest * sizeof(float))) ||
                !(bytes = malloc(biggest * sizeof(float)))))
        st = qtk_set_error(QTK_E_NOMEM, "out of memory for a %zu-element tensor", biggest);
    for (size_t i = 0; i < m.n && !st; i++) {
        size_t len;
        fill(&m.r[i], x);
        encode(c->elem, x, m.r[i].numel, bytes, &len);
        st = qtk_writer_write(m.w, bytes, len);
    }
    if (!st) st = qtk_writer_commit(m.w);
    else qtk_writer_abort(m.w);
    free(x);
    free(bytes);
    free(m.r);
    return st;
}
