/* writer.c — qtk_writer: tensors and metadata declared, then their bytes streamed in order
 * into the format's writer (io/) or the Hub writer (layouts, shards), chosen from the path
 * and options as qtk convert chooses them. */
#include "ckpt/writer.h"

#include "ckpt/formats.h"
#include "hub/hub.h"

#include <stdio.h>
#include <stdlib.h>

struct qtk_writer {
    char *path;
    qtk_write_options o;
    bool hub;                 /* through the Hub writer: a layout, shards, or a directory */
    qtk_ckpt_format fmt;
    const qtk__ckpt_ops *ops; /* the format's writer when not hub */
    qtk__desc desc;
    const void **data;        /* per declared tensor: its borrowed bytes, or NULL */
    size_t cap_data;
    bool begun;
    size_t next;              /* tensors written */
    qtk_status failed;        /* the first error after begin: the writer is dead */
    qtk__ckpt_writer *w;
    qtk__hub_writer *h;
};

qtk_status qtk_writer_create(const char *path, const qtk_write_options *opts, qtk_writer **out) {
    if (!out) return qtk__err(QTK_E_ARG, "qtk_writer_create: out is NULL");
    *out = NULL;
    if (!path || !*path) return qtk__err(QTK_E_ARG, "qtk_writer_create: no path");
    qtk_write_options o = opts ? *opts : (qtk_write_options){0};
    if ((unsigned)o.format >= QTK_CKPT_FORMAT_COUNT_) return qtk__err(QTK_E_ARG, "format %d is not a qtk_ckpt_format", (int)o.format);
    if ((unsigned)o.layout >= QTK_LAYOUT_COUNT_ || o.layout == QTK_LAYOUT_NONE || o.layout == QTK_LAYOUT_TORCHAO)
        return qtk__err(QTK_E_ARG, "cannot write layout '%s' (write: qtk, gpt-oss, modelopt, compressed-tensors, deepseek, bnb, gptq, awq)",
                        qtk_hub_layout_name(o.layout));
    qtk_ckpt_format fmt = o.format ? o.format : qtk_ckpt_format_from_path(path);
    /* a directory named like a .bpk or .gguf file is a target a file cannot replace (said so
     * when writing starts), not a directory of shards */
    bool file_named = fmt == QTK_CKPT_BURNPACK || fmt == QTK_CKPT_GGUF;
    bool hub = o.layout != QTK_LAYOUT_AUTO || o.max_shard_bytes > 0 || (!file_named && qtk__hub_out_is_dir(path));
    if (hub && (fmt == QTK_CKPT_BURNPACK || fmt == QTK_CKPT_GGUF))
        return qtk__err(QTK_E_ARG, "'%s': layouts and shards are safetensors; a %s output takes neither", path,
                        qtk_ckpt_format_name(fmt));
    if (hub) fmt = QTK_CKPT_SAFETENSORS;
    if (fmt == QTK_CKPT_UNKNOWN)
        return qtk__err(QTK_E_ARG, "cannot tell the output format of '%s': name it .bpk, .safetensors or .gguf, or give a directory",
                        path);
    qtk_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = qtk__strdup(path))) {
        free(w);
        return qtk__err(QTK_E_NOMEM, "out of memory");
    }
    w->o = o;
    w->hub = hub;
    w->fmt = fmt;
    w->ops = qtk__format_ops(fmt);
    qtk__desc_init(&w->desc);
    *out = w;
    return QTK_OK;
}

static qtk_status declaring(const qtk_writer *w, const char *what) {
    if (!w) return qtk__err(QTK_E_ARG, "%s: writer is NULL", what);
    if (w->begun) return qtk__err(QTK_E_ARG, "%s: '%s' is being written; declare everything before the first write", what, w->path);
    return QTK_OK;
}

qtk_status qtk_writer_add(qtk_writer *w, const qtk_ckpt_tensor *t, const void *data) {
    qtk_status st = declaring(w, "qtk_writer_add");
    if (st) return st;
    if (!t) return qtk__err(QTK_E_ARG, "qtk_writer_add: tensor is NULL");
    if (!qtk__grow((void **)&w->data, &w->cap_data, w->desc.n_tensors, sizeof *w->data))
        return qtk__err(QTK_E_NOMEM, "out of memory");
    qtk_ckpt_tensor *n = NULL;
    st = qtk__desc_add_copy(&w->desc, t, &n);
    if (st) return st;
    n->decoded = false; /* what a reader did; nothing to a writer */
    w->data[w->desc.n_tensors - 1] = data;
    return QTK_OK;
}

qtk_status qtk_writer_add_raw(qtk_writer *w, const char *name, qtk_elem e, const size_t *shape, int rank,
                              const void *data) {
    qtk_ckpt_tensor t = {.name = name, .elem = e, .rank = rank, .shape = shape};
    return qtk_writer_add(w, &t, data);
}

qtk_status qtk_writer_add_tensor(qtk_writer *w, const char *name, const qtk_tensor *q) {
    if (!q) return qtk__err(QTK_E_ARG, "qtk_writer_add_tensor: tensor is NULL");
    const qtk_layout *L = qtk_tensor_layout(q);
    qtk_ckpt_tensor t = {.name = name, .quantized = true, .scheme = *qtk_tensor_scheme(q), .rank = L->rank, .shape = L->shape};
    return qtk_writer_add(w, &t, qtk_tensor_bytes(q, NULL));
}

qtk_status qtk_writer_add_meta(qtk_writer *w, const char *key, const char *value) {
    qtk_status st = declaring(w, "qtk_writer_add_meta");
    if (st) return st;
    if (!key || !value) return qtk__err(QTK_E_ARG, "qtk_writer_add_meta: NULL key or value");
    return qtk__desc_add_meta(&w->desc, key, value);
}

qtk_status qtk_writer_add_scalar(qtk_writer *w, const qtk_ckpt_scalar *s) {
    qtk_status st = declaring(w, "qtk_writer_add_scalar");
    if (st) return st;
    if (!s || !s->name) return qtk__err(QTK_E_ARG, "qtk_writer_add_scalar: NULL scalar or name");
    return qtk__desc_add_scalar(&w->desc, s);
}

bool qtk__writer_format_can_hold(const qtk_writer *w, const qtk_ckpt_tensor *t, char *why, size_t cap) {
    if (why && cap) why[0] = '\0';
    return !w->ops->can_hold || w->ops->can_hold(t, why, cap);
}

bool qtk_writer_can_hold(const qtk_writer *w, const qtk_ckpt_tensor *t, char *why, size_t cap) {
    if (why && cap) why[0] = '\0';
    if (!w || !t) return false;
    if (w->hub && !qtk__hub_can_hold(w->o.layout, t, why, cap)) return false;
    return qtk__writer_format_can_hold(w, t, why, cap);
}

static qtk_status begin(qtk_writer *w) {
    w->begun = true;
    /* stored tensors whose names a reader would take for a Hub layout (X_blocks + X_scales
     * read back as gpt-oss) are marked so that they read back as written */
    if (w->fmt == QTK_CKPT_SAFETENSORS && (w->o.layout == QTK_LAYOUT_AUTO || w->o.layout == QTK_LAYOUT_QTK)) {
        bool any_q = false;
        for (size_t i = 0; i < w->desc.n_tensors; i++) any_q |= w->desc.tensors[i].quantized;
        w->desc.stored_as_is = !any_q && qtk__hub_names_suggest(&w->desc) != NULL;
    }
    if (w->hub) {
        qtk__hub_write_opts ho = {.layout = w->o.layout, .max_shard_bytes = w->o.max_shard_bytes, .source = w->o.source,
                                  .force = w->o.force, .notice = w->o.notice, .ctx = w->o.ctx, .cancel = w->o.cancel};
        return qtk__hub_writer_open(w->path, &w->desc, &ho, &w->h);
    }
    qtk_status st = qtk__ckpt_writer_open_ops(w->path, w->ops, &w->desc, w->o.force, &w->w);
    if (!st) qtk__ckpt_writer_set_cancel(w->w, w->o.cancel);
    return st;
}

static qtk_status put(qtk_writer *w, const void *bytes, size_t len) {
    qtk_status st = w->h ? qtk__hub_writer_put(w->h, bytes, len) : qtk__ckpt_writer_put(w->w, bytes, len);
    if (!st) w->next++;
    return st;
}

/* Writes the declared-with-data tensors due before the next one without. */
static qtk_status flush(qtk_writer *w) {
    qtk_status st = QTK_OK;
    while (!st && w->next < w->desc.n_tensors && w->data[w->next])
        st = put(w, w->data[w->next], w->desc.tensors[w->next].nbytes);
    return st;
}

qtk_status qtk_writer_write(qtk_writer *w, const void *bytes, size_t len) {
    if (!w) return qtk__err(QTK_E_ARG, "qtk_writer_write: writer is NULL");
    if (w->failed) return qtk__err(w->failed, "'%s' failed earlier: abort it", w->path);
    qtk_status st = w->begun ? QTK_OK : begin(w);
    if (!st) st = flush(w);
    if (!st && w->next >= w->desc.n_tensors)
        st = qtk__err(QTK_E_ARG, "all %zu tensors declared for '%s' are written already", w->desc.n_tensors, w->path);
    if (!st) st = put(w, bytes, len);
    if (st) w->failed = st;
    return st;
}

qtk_status qtk_writer_commit(qtk_writer *w) {
    if (!w) return qtk__err(QTK_E_ARG, "qtk_writer_commit: writer is NULL");
    qtk_status st = w->failed ? qtk__err(w->failed, "'%s' failed earlier: nothing was written", w->path) : QTK_OK;
    if (!st && !w->begun) st = begin(w);
    if (!st) st = flush(w);
    if (!st && w->next < w->desc.n_tensors)
        st = qtk__err(QTK_E_ARG, "tensor '%s' was declared without data and never written (%zu of %zu written)",
                      w->desc.tensors[w->next].name, w->next, w->desc.n_tensors);
    if (!st) {
        st = w->h ? qtk__hub_writer_commit(w->h) : qtk__ckpt_writer_commit(w->w); /* each frees itself */
        w->h = NULL;
        w->w = NULL;
    }
    qtk_writer_abort(w);
    return st;
}

void qtk_writer_abort(qtk_writer *w) {
    if (!w) return;
    qtk__hub_writer_abort(w->h);
    qtk__ckpt_writer_abort(w->w);
    qtk__desc_free(&w->desc);
    free(w->data);
    free(w->path);
    free(w);
}

size_t qtk__writer_files(const qtk_writer *w) { return w->h ? qtk__hub_writer_shards(w->h) : w->w ? 1 : 0; }
qtk_ckpt_format qtk__writer_format(const qtk_writer *w) { return w->fmt; }
const qtk__desc *qtk__writer_desc(const qtk_writer *w) { return &w->desc; }
void qtk__writer_set_source(qtk_writer *w, const qtk_ckpt *source) { w->o.source = source; }
