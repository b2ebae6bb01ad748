/* access.c — the public reader's accessors: tensors by index and by name, metadata,
 * scalars, and a tensor's bytes as a view, a qtk_tensor, a copy, or values. */
#include "ckpt/formats.h"

#include "hub/hub.h"
#include "io/values.h"

#include <stdio.h>
#include <stdlib.h>

size_t qtk_ckpt_count(const qtk_ckpt *c) { return c ? c->desc.n_tensors : 0; }

const qtk_ckpt_tensor *qtk_ckpt_tensor_at(const qtk_ckpt *c, size_t i) {
    return c && i < c->desc.n_tensors ? &c->desc.tensors[i] : NULL;
}

static int cmp_named(const void *a, const void *b) {
    return strcmp(((const qtk__named *)a)->name, ((const qtk__named *)b)->name);
}

/* The tensors sorted by name, built on the first lookup. */
static qtk_status by_name(const qtk_ckpt *cc, const qtk__named **out) {
    qtk_ckpt *c = (qtk_ckpt *)(uintptr_t)cc; /* a cache: the checkpoint stays logically const */
    if (!c->by_name) {
        size_t n = c->desc.n_tensors;
        qtk__named *ix = malloc((n ? n : 1) * sizeof *ix);
        if (!ix) return qtk__err(QTK_E_NOMEM, "out of memory for an index of %zu names", n);
        for (size_t i = 0; i < n; i++) ix[i] = (qtk__named){c->desc.tensors[i].name, i};
        qsort(ix, n, sizeof *ix, cmp_named);
        c->by_name = ix;
    }
    *out = c->by_name;
    return QTK_OK;
}

qtk_status qtk_ckpt_find(const qtk_ckpt *c, const char *name, size_t *index) {
    if (!c || !name || !index) return qtk__err(QTK_E_ARG, "qtk_ckpt_find: NULL argument");
    const qtk__named *ix = NULL;
    qtk_status st = by_name(c, &ix);
    if (st) return st;
    size_t lo = 0, hi = c->desc.n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = strcmp(ix[mid].name, name);
        if (r == 0) {
            *index = ix[mid].index;
            return QTK_OK;
        }
        if (r < 0) lo = mid + 1;
        else hi = mid;
    }
    return qtk__err(QTK_E_NOTFOUND, "'%s' has no tensor named '%s'", c->name, name);
}

const char *qtk_ckpt_type_string(const qtk_ckpt_tensor *t, char *buf, size_t cap) {
    if (!buf || cap == 0) return buf;
    if (!t) snprintf(buf, cap, "?");
    else if (!t->quantized) snprintf(buf, cap, "%s", qtk_elem_name(t->elem));
    else if (qtk_scheme_preset_name(&t->scheme)) snprintf(buf, cap, "%s", qtk_scheme_preset_name(&t->scheme));
    else if (qtk_scheme_format(&t->scheme, buf, cap, NULL) != QTK_OK) snprintf(buf, cap, "?");
    return buf;
}

size_t qtk_ckpt_meta_count(const qtk_ckpt *c) { return c ? c->desc.n_meta : 0; }

qtk_status qtk_ckpt_meta_at(const qtk_ckpt *c, size_t i, const char **key, const char **value) {
    if (!c || i >= c->desc.n_meta) return qtk__err(QTK_E_ARG, "qtk_ckpt_meta_at: no metadata entry %zu", i);
    if (key) *key = c->desc.meta[i].key;
    if (value) *value = c->desc.meta[i].value;
    return QTK_OK;
}

const char *qtk_ckpt_meta_get(const qtk_ckpt *c, const char *key) {
    for (size_t i = 0; c && key && i < c->desc.n_meta; i++)
        if (strcmp(c->desc.meta[i].key, key) == 0) return c->desc.meta[i].value;
    return NULL;
}

size_t qtk_ckpt_scalar_count(const qtk_ckpt *c) { return c ? c->desc.n_scalars : 0; }

const qtk_ckpt_scalar *qtk_ckpt_scalar_at(const qtk_ckpt *c, size_t i) {
    return c && i < c->desc.n_scalars ? &c->desc.scalars[i] : NULL;
}

/* ---- bytes ---- */

/* What a tensor borrowing the map holds: its checkpoint (one owner more) and its view. */
typedef struct {
    qtk_ckpt *c;
    qtk_ckpt_view v;
} borrow;

static void give_back(void *ctx) {
    borrow *b = ctx;
    qtk__ckpt_drop_pages(b->c, &b->v); /* the view owns nothing: only pages to return */
    qtk__ckpt_release(b->c);
    free(b);
}

qtk_status qtk_ckpt_load_tensor(qtk_ckpt *c, size_t i, qtk_tensor **out) {
    if (!out) return qtk__err(QTK_E_ARG, "qtk_ckpt_load_tensor: out is NULL");
    *out = NULL;
    const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(c, i);
    if (!t) return qtk__err(QTK_E_ARG, "qtk_ckpt_load_tensor: no tensor %zu", i);
    if (!t->quantized)
        return qtk__err(QTK_E_ARG, "tensor '%s' is %s, not quantized: read it with qtk_ckpt_read or qtk_ckpt_read_values",
                        t->name, qtk_elem_name(t->elem));
    qtk_ckpt_view v;
    qtk_status st = qtk__ckpt_load_unchecked(c, i, &v);
    if (st) return st;
    if (v.owned) {
        /* assembled or translated on load: the tensor takes a copy, the buffer goes back */
        st = qtk_tensor_from_bytes(v.data, v.len, t->shape, t->rank, &t->scheme, out);
        qtk_ckpt_unload(c, &v);
        qtk_status fs = qtk_ckpt_status(c);
        if (fs) {
            qtk_tensor_free(*out);
            *out = NULL;
            return fs;
        }
    } else {
        /* in the map as it is: the tensor borrows it, and keeps the checkpoint alive */
        borrow *b = malloc(sizeof *b);
        if (!b) {
            qtk_ckpt_unload(c, &v);
            return qtk__err(QTK_E_NOMEM, "out of memory");
        }
        b->c = c;
        b->v = v;
        qtk__ckpt_retain(c);
        st = qtk_tensor_wrap(v.data, v.len, t->shape, t->rank, &t->scheme, give_back, b, out);
        if (st) give_back(b);
    }
    return st ? qtk__err_context(st, "'%s': tensor '%s'", c->name, t->name) : QTK_OK;
}

qtk_status qtk_ckpt_read(qtk_ckpt *c, size_t i, void *dst, size_t len) {
    const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(c, i);
    if (!t) return qtk__err(QTK_E_ARG, "qtk_ckpt_read: no tensor %zu", i);
    if (len != t->nbytes) return qtk__err(QTK_E_LENGTH, "tensor '%s' takes %zu bytes; the buffer holds %zu", t->name, t->nbytes, len);
    if (!dst && len) return qtk__err(QTK_E_ARG, "qtk_ckpt_read: dst is NULL");
    qtk_ckpt_view v;
    qtk_status st = qtk_ckpt_load(c, i, &v);
    if (st) return st;
    if (len) memcpy(dst, v.data, len);
    qtk_ckpt_unload(c, &v);
    return qtk_ckpt_status(c); /* the copy is the file's only while the file is intact */
}

qtk_status qtk_ckpt_read_values(qtk_ckpt *c, size_t i, qtk_dtype dtype, void *dst, size_t n) {
    const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(c, i);
    if (!t) return qtk__err(QTK_E_ARG, "qtk_ckpt_read_values: no tensor %zu", i);
    if (dtype != QTK_DTYPE_F32 && dtype != QTK_DTYPE_F16 && dtype != QTK_DTYPE_BF16)
        return qtk__err(QTK_E_ARG, "values are read as f32, f16 or bf16, not %s", qtk_dtype_name(dtype));
    if (n != t->numel) return qtk__err(QTK_E_LENGTH, "tensor '%s' has %zu elements; the buffer holds %zu", t->name, t->numel, n);
    if (!dst && n) return qtk__err(QTK_E_ARG, "qtk_ckpt_read_values: dst is NULL");
    if (!t->quantized && !qtk_elem_is_float(t->elem))
        return qtk__err(QTK_E_UNSUPPORTED, "tensor '%s' holds %s elements, which are not float values", t->name,
                        qtk_elem_name(t->elem));
    qtk_ckpt_view v;
    qtk_status st = qtk_ckpt_load(c, i, &v);
    if (st) return st;
    if (t->quantized) st = qtk__hub_dequantize(c, i, &v, dtype, dst);
    else st = qtk__values_convert(t, v.data, dtype, dst);
    qtk_ckpt_unload(c, &v);
    qtk_status fs = qtk_ckpt_status(c);
    return fs ? fs : st;
}
