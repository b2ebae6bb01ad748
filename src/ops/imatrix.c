/* imatrix.c — llama.cpp's importance matrices (see qtk_ckpt.h): the GGUF format through the
 * checkpoint reader, the legacy .dat format parsed here, and the mapping from Hugging Face
 * tensor names onto llama.cpp's. */
#include "ops/imatrix.h"

#include "io/ckpt_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

struct qtk_imatrix {
    qtk_imatrix_entry *e;
    size_t n, cap;
    qtk__named *by_name; /* sorted, for lookups */
    qtk__arena arena;    /* names and weights */
};

void qtk_imatrix_close(qtk_imatrix *m) {
    if (!m) return;
    free(m->e);
    free(m->by_name);
    qtk__arena_free(&m->arena);
    free(m);
}

size_t qtk_imatrix_count(const qtk_imatrix *m) { return m ? m->n : 0; }
const qtk_imatrix_entry *qtk_imatrix_entry_at(const qtk_imatrix *m, size_t i) { return m && i < m->n ? &m->e[i] : NULL; }

/* A new entry named name[0..len) with room for columns x experts weights. */
static qtk_status add_entry(qtk_imatrix *m, const char *name, size_t len, size_t columns, size_t experts, float **w) {
    size_t nw;
    if (!qtk__mul_ok(columns, experts, &nw) || nw > SIZE_MAX / sizeof(float))
        return qtk__err(QTK_E_SHAPE, "entry '%.*s': %zu x %zu weights overflow", (int)(len < 64 ? len : 64), name, columns,
                        experts);
    if (!qtk__grow((void **)&m->e, &m->cap, m->n, sizeof *m->e)) return qtk__err(QTK_E_NOMEM, "out of memory");
    char *nm = qtk__arena_strndup(&m->arena, name, len);
    *w = qtk__arena_alloc(&m->arena, (nw ? nw : 1) * sizeof(float));
    if (!nm || !*w) return qtk__err(QTK_E_NOMEM, "out of memory for imatrix entry '%.64s'", nm ? nm : "?");
    m->e[m->n++] = (qtk_imatrix_entry){nm, *w, columns, experts};
    return QTK_OK;
}

static int cmp_named(const void *a, const void *b) {
    return strcmp(((const qtk__named *)a)->name, ((const qtk__named *)b)->name);
}

/* Sorts the names for lookup; two entries of one name are an error. */
static qtk_status index_names(qtk_imatrix *m, const char *file) {
    m->by_name = malloc((m->n ? m->n : 1) * sizeof *m->by_name);
    if (!m->by_name) return qtk__err(QTK_E_NOMEM, "out of memory");
    for (size_t i = 0; i < m->n; i++) m->by_name[i] = (qtk__named){m->e[i].name, i};
    qsort(m->by_name, m->n, sizeof *m->by_name, cmp_named);
    for (size_t i = 1; i < m->n; i++)
        if (strcmp(m->by_name[i - 1].name, m->by_name[i].name) == 0)
            return qtk__err(QTK_E_FORMAT, "'%s' has two entries for '%s'", file, m->by_name[i].name);
    return QTK_OK;
}

static qtk_status check_weights(const char *file, const qtk_imatrix_entry *e) {
    for (size_t i = 0; i < e->columns * e->experts; i++)
        if (!qtk__isfinite(e->weights[i]) || e->weights[i] < 0.0f)
            return qtk__err(QTK_E_VALUE, "'%s': entry '%s' has weight %g at %zu; importance is finite and >= 0", file,
                            e->name, (double)e->weights[i], i);
    return QTK_OK;
}

/* ---- GGUF: NAME.in_sum2 [columns x experts] and NAME.counts [experts], F32 ---- */

static qtk_status read_f32(qtk_ckpt *c, size_t i, float *out, size_t n) {
    const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(c, i);
    if (t->quantized || t->elem != QTK_ELEM_F32)
        return qtk__err(QTK_E_FORMAT, "'%s' is %s; imatrix sums and counts are F32", t->name,
                        t->quantized ? "quantized" : qtk_elem_name(t->elem));
    return qtk_ckpt_read(c, i, out, n * sizeof(float));
}

static qtk_status from_gguf(qtk_imatrix *m, qtk_ckpt *c, const char *file) {
    size_t n = qtk_ckpt_count(c), found = 0;
    float *counts = NULL;
    qtk_status st = QTK_OK;
    for (size_t i = 0; i < n && !st; i++) {
        const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(c, i);
        if (!qtk__has_suffix(t->name, ".in_sum2")) continue;
        size_t len = strlen(t->name) - strlen(".in_sum2"), k;
        char *cname = malloc(len + sizeof ".counts");
        if (!cname) return qtk__err(QTK_E_NOMEM, "out of memory");
        memcpy(cname, t->name, len);
        memcpy(cname + len, ".counts", sizeof ".counts");
        st = qtk_ckpt_find(c, cname, &k);
        if (st) st = qtk__err(QTK_E_FORMAT, "'%s': '%s' has no '%s' beside it", file, t->name, cname);
        free(cname);
        if (st) break;
        const qtk_ckpt_tensor *ct = qtk_ckpt_tensor_at(c, k);
        size_t experts = ct->numel;
        if (experts == 0 || t->numel == 0 || t->numel % experts)
            st = qtk__err(QTK_E_FORMAT, "'%s': '%s' has %zu sums for %zu counts; it needs a whole number of columns per count",
                          file, t->name, t->numel, experts);
        float *w = NULL;
        if (!st) st = add_entry(m, t->name, len, t->numel / experts, experts, &w);
        free(counts);
        counts = st ? NULL : malloc(experts * sizeof *counts);
        if (!st && !counts) st = qtk__err(QTK_E_NOMEM, "out of memory");
        if (!st) st = read_f32(c, i, w, t->numel);
        if (!st) st = read_f32(c, k, counts, experts);
        const qtk_imatrix_entry *e = st ? NULL : &m->e[m->n - 1];
        for (size_t x = 0; e && x < experts; x++) {
            if (!qtk__isfinite(counts[x]) || counts[x] < 0.0f) {
                st = qtk__err(QTK_E_VALUE, "'%s': '%s' count %zu is %g", file, ct->name, x, (double)counts[x]);
                break;
            }
            float cnt = roundf(counts[x]); /* counts of tokens, stored as floats */
            for (size_t j = 0; j < e->columns; j++) w[x * e->columns + j] = cnt > 0.0f ? w[x * e->columns + j] / cnt : 1.0f;
        }
        if (!st) st = check_weights(file, e);
        found++;
    }
    free(counts);
    if (!st && !found)
        st = qtk__err(QTK_E_FORMAT, "'%s' is a GGUF file without imatrix entries (no tensor named NAME.in_sum2)", file);
    return st;
}

/* ---- the legacy .dat: i32 n; n x (i32 len, name, i32 ncall, i32 nval, f32 sums[nval]);
 *      then, optionally, i32 chunks and i32 len + the dataset's name ---- */

static bool take_i32(const uint8_t **p, const uint8_t *end, int32_t *v) {
    if (end - *p < 4) return false;
    *v = (int32_t)qtk__ld32(*p);
    *p += 4;
    return true;
}

static qtk_status from_dat(qtk_imatrix *m, const uint8_t *b, size_t len, const char *file) {
    const uint8_t *p = b, *end = b + len;
    int32_t n;
    if (!take_i32(&p, end, &n) || n < 1)
        return qtk__err(QTK_E_FORMAT, "'%s' is neither GGUF nor a legacy imatrix .dat (no entry count at its start)", file);
    /* every entry takes at least 16 bytes: a count beyond that is a lie, refused before any allocation */
    if ((size_t)n > (len - 4) / 16)
        return qtk__err(QTK_E_FORMAT, "'%s' claims %d imatrix entries in %zu bytes", file, (int)n, len);
    for (int32_t i = 0; i < n; i++) {
        int32_t nl, ncall, nval;
        if (!take_i32(&p, end, &nl) || nl < 1 || nl > 4096 || end - p < nl)
            return qtk__err(QTK_E_FORMAT, "'%s': entry %d: the name length is missing, not 1..4096, or past the end", file,
                            (int)i + 1);
        const char *name = (const char *)p;
        if (!qtk__utf8_ok(name, (size_t)nl))
            return qtk__err(QTK_E_FORMAT, "'%s': entry %d: the name is not UTF-8 (or holds a NUL)", file, (int)i + 1);
        p += nl;
        if (!take_i32(&p, end, &ncall) || !take_i32(&p, end, &nval) || nval < 1 || ncall < 0)
            return qtk__err(QTK_E_FORMAT, "'%s': entry '%.*s': no call count and value count (>= 1) after the name", file,
                            nl > 64 ? 64 : nl, name);
        if ((size_t)(end - p) / 4 < (size_t)nval)
            return qtk__err(QTK_E_FORMAT, "'%s': entry '%.*s' has %d values; the file ends after %zu", file,
                            nl > 64 ? 64 : nl, name, (int)nval, (size_t)(end - p) / 4);
        float *w = NULL;
        qtk_status st = add_entry(m, name, (size_t)nl, (size_t)nval, 1, &w);
        if (st) return st;
        for (int32_t k = 0; k < nval; k++, p += 4) {
            float v = qtk__bits_f32(qtk__ld32(p));
            w[k] = ncall > 0 ? v / (float)ncall : v;
        }
        if ((st = check_weights(file, &m->e[m->n - 1]))) return st;
    }
    /* the trailer (chunk count, dataset name) is optional; what is there must be whole */
    int32_t chunks, dl;
    if (p < end && (!take_i32(&p, end, &chunks) || (p < end && (!take_i32(&p, end, &dl) || dl < 0 || end - p != dl))))
        return qtk__err(QTK_E_FORMAT, "'%s': %zu bytes after the last entry are not a chunk count and a dataset name", file,
                        (size_t)(end - b) - (size_t)(p - b));
    return QTK_OK;
}

static qtk_status finish(qtk_imatrix *m, qtk_status st, const char *file, qtk_imatrix **out) {
    if (!st) st = index_names(m, file);
    if (st) {
        qtk_imatrix_close(m);
        return st;
    }
    *out = m;
    return QTK_OK;
}

static bool is_gguf(const uint8_t *b, size_t n) { return n >= 4 && memcmp(b, "GGUF", 4) == 0; }

qtk_status qtk_imatrix_open(const char *path, qtk_imatrix **out) {
    if (!out) return qtk__err(QTK_E_ARG, "qtk_imatrix_open: out is NULL");
    *out = NULL;
    if (!path) return qtk__err(QTK_E_ARG, "qtk_imatrix_open: path is NULL");
    qtk__mapfile map;
    qtk_status st = qtk__map_open(path, &map);
    if (st) return st;
    qtk_imatrix *m = calloc(1, sizeof *m);
    if (!m) st = qtk__err(QTK_E_NOMEM, "out of memory");
    else if (is_gguf(map.data, map.len)) {
        qtk_ckpt *c = NULL;
        st = qtk_ckpt_open(path, NULL, &c);
        if (!st) st = from_gguf(m, c, path);
        qtk_ckpt_close(c);
    } else {
        st = from_dat(m, map.data, map.len, path);
    }
    qtk__map_close(&map);
    if (!m) return st;
    return finish(m, st, path, out);
}

qtk_status qtk_imatrix_open_memory(const void *data, size_t len, const char *name, qtk_imatrix **out) {
    if (!out) return qtk__err(QTK_E_ARG, "qtk_imatrix_open_memory: out is NULL");
    *out = NULL;
    if (!data && len) return qtk__err(QTK_E_ARG, "qtk_imatrix_open_memory: data is NULL");
    if (!name) name = "(imatrix)";
    qtk_imatrix *m = calloc(1, sizeof *m);
    if (!m) return qtk__err(QTK_E_NOMEM, "out of memory");
    qtk_status st;
    if (is_gguf(data, len)) {
        qtk_ckpt *c = NULL;
        st = qtk_ckpt_open_memory(data, len, name, NULL, &c);
        if (!st) st = from_gguf(m, c, name);
        qtk_ckpt_close(c);
    } else {
        st = from_dat(m, data, len, name);
    }
    return finish(m, st, name, out);
}

/* ---- names ---- */

static const qtk_imatrix_entry *by_name(const qtk_imatrix *m, const char *name) {
    qtk__named key = {name, 0};
    const qtk__named *f = m->n ? bsearch(&key, m->by_name, m->n, sizeof key, cmp_named) : NULL;
    return f ? &m->e[f->index] : NULL;
}

/* Hugging Face (transformers) names of llama-family models and llama.cpp's for them. */
static const struct {
    const char *hf, *gguf;
} layer_names[] = {
    {"self_attn.q_proj", "attn_q"},      {"self_attn.k_proj", "attn_k"},     {"self_attn.v_proj", "attn_v"},
    {"self_attn.o_proj", "attn_output"}, {"mlp.gate_proj", "ffn_gate"},      {"mlp.up_proj", "ffn_up"},
    {"mlp.down_proj", "ffn_down"},       {"input_layernorm", "attn_norm"},   {"post_attention_layernorm", "ffn_norm"},
    {"self_attn.qkv_proj", "attn_qkv"},  {"mlp.gate_up_proj", "ffn_gate_up"}, {"mlp.router", "ffn_gate_inp"},
    {"mlp.gate", "ffn_gate_inp"},
}, whole_names[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"lm_head.weight", "output.weight"},
    {"model.norm.weight", "output_norm.weight"},
};

/* llama.cpp's name for a Hugging Face one (into buf), and the expert it is, or -1. */
static bool map_name(const char *hf, char *buf, size_t cap, long *expert) {
    *expert = -1;
    for (size_t i = 0; i < sizeof whole_names / sizeof whole_names[0]; i++)
        if (strcmp(hf, whole_names[i].hf) == 0) return snprintf(buf, cap, "%s", whole_names[i].gguf) < (int)cap;
    unsigned long layer;
    int at = 0;
    if (sscanf(hf, "model.layers.%lu.%n", &layer, &at) != 1 || at == 0) return false;
    const char *rest = hf + at;
    long e = -1;
    int n2 = 0;
    if (sscanf(rest, "mlp.experts.%ld.%n", &e, &n2) == 1 && n2 > 0 && e >= 0) {
        rest += n2; /* "up_proj.weight": the e-th slice of blk.L.ffn_up_exps.weight */
        static const char *const parts[][2] = {{"gate_proj", "ffn_gate_exps"}, {"up_proj", "ffn_up_exps"},
                                                {"down_proj", "ffn_down_exps"}};
        for (size_t i = 0; i < 3; i++) {
            size_t k = strlen(parts[i][0]);
            if (strncmp(rest, parts[i][0], k) == 0 && strcmp(rest + k, ".weight") == 0) {
                *expert = e;
                return snprintf(buf, cap, "blk.%lu.%s.weight", layer, parts[i][1]) < (int)cap;
            }
        }
        return false;
    }
    for (size_t i = 0; i < sizeof layer_names / sizeof layer_names[0]; i++) {
        size_t k = strlen(layer_names[i].hf);
        if (strncmp(rest, layer_names[i].hf, k) == 0 && rest[k] == '.')
            return snprintf(buf, cap, "blk.%lu.%s%s", layer, layer_names[i].gguf, rest + k) < (int)cap;
    }
    return false;
}

qtk_status qtk_imatrix_lookup(const qtk_imatrix *m, const char *tensor, qtk_imatrix_entry *e) {
    if (!m || !tensor || !e) return qtk__err(QTK_E_ARG, "qtk_imatrix_lookup: NULL argument");
    const qtk_imatrix_entry *f = by_name(m, tensor);
    if (f) {
        *e = *f;
        return QTK_OK;
    }
    char name[512];
    long expert;
    if (map_name(tensor, name, sizeof name, &expert) && (f = by_name(m, name))) {
        *e = *f;
        if (expert < 0) return QTK_OK;
        if ((size_t)expert >= f->experts)
            return qtk__err(QTK_E_NOTFOUND, "the importance matrix's '%s' has %zu experts; '%s' is expert %ld", name, f->experts,
                            tensor, expert);
        e->weights = f->weights + (size_t)expert * f->columns; /* that expert's columns */
        e->experts = 1;
        return QTK_OK;
    }
    return qtk__err(QTK_E_NOTFOUND, "the importance matrix has no entry for '%s'", tensor);
}

qtk_status qtk__imatrix_weights(const qtk_imatrix *m, const char *name, const size_t *shape, int rank, const float **w,
                                size_t *n) {
    qtk_imatrix_entry e;
    qtk_status st = qtk_imatrix_lookup(m, name, &e);
    if (st) return st;
    size_t cols = rank > 0 ? shape[rank - 1] : 1;
    if (rank < 2 || e.columns != cols)
        return qtk__err(QTK_E_SHAPE, "the importance matrix's '%s' has %zu columns; tensor '%s' has %zu (its last extent)",
                        e.name, e.columns, name, cols);
    if (e.experts > 1 && (rank < 3 || shape[0] != e.experts))
        return qtk__err(QTK_E_SHAPE, "the importance matrix's '%s' holds %zu experts; tensor '%s' is not [%zu, ..., %zu]",
                        e.name, e.experts, name, e.experts, cols);
    *w = e.weights;
    *n = e.columns * e.experts;
    return QTK_OK;
}
