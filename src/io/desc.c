/* desc.c — checkpoint descriptions: tensors, metadata and scalars, owned by one arena. */
#include "io/checkpoint.h"

#include "common/internal.h"
#include "io/util.h"

#include <stdlib.h>

void qtk__desc_init(qtk__desc *d) { memset(d, 0, sizeof *d); }

qtk_status qtk__desc_reserve(qtk__desc *d, size_t n) {
    if (n <= d->cap_tensors) return QTK_OK;
    if (n > SIZE_MAX / sizeof *d->tensors) return qtk__err(QTK_E_NOMEM, "out of memory for %zu tensors", n);
    qtk_ckpt_tensor *t = realloc(d->tensors, n * sizeof *t);
    if (!t) return qtk__err(QTK_E_NOMEM, "out of memory for %zu tensors", n);
    d->tensors = t;
    d->cap_tensors = n;
    return QTK_OK;
}

void qtk__desc_free(qtk__desc *d) {
    if (!d) return;
    free(d->tensors);
    free(d->meta);
    free(d->scalars);
    qtk__arena_free(&d->arena);
    memset(d, 0, sizeof *d);
}

static qtk_status add_tensor(qtk__desc *d, const char *name, const size_t *shape, int rank, qtk_ckpt_tensor **out) {
    if (rank < 0) return qtk__err(QTK_E_SHAPE, "tensor '%s': negative rank", name);
    if (!qtk__grow((void **)&d->tensors, &d->cap_tensors, d->n_tensors, sizeof *d->tensors))
        return qtk__err(QTK_E_NOMEM, "out of memory for %zu tensor descriptions", d->n_tensors + 1);
    qtk_ckpt_tensor *t = &d->tensors[d->n_tensors];
    memset(t, 0, sizeof *t);
    char *nm = qtk__arena_strdup(&d->arena, name);
    size_t *sh = qtk__arena_alloc(&d->arena, (rank ? (size_t)rank : 1) * sizeof(size_t));
    if (!nm || !sh) return qtk__err(QTK_E_NOMEM, "out of memory for tensor '%s'", name);
    size_t numel = 1;
    for (int i = 0; i < rank; i++) {
        sh[i] = shape[i];
        if (!qtk__mul_ok(numel, shape[i], &numel)) {
            char sb[256];
            return qtk__err(QTK_E_SHAPE, "tensor '%s': shape %s has more elements than fit in size_t", name,
                            qtk_shape_format(shape, rank, sb, sizeof sb));
        }
    }
    t->name = nm;
    t->rank = rank;
    t->shape = sh;
    t->numel = numel;
    *out = t;
    return QTK_OK;
}

qtk_status qtk__desc_add_raw(qtk__desc *d, const char *name, qtk_elem e, const size_t *shape, int rank,
                                 qtk_ckpt_tensor **out) {
    qtk_ckpt_tensor *t;
    qtk_status st = add_tensor(d, name, shape, rank, &t);
    if (st) return st;
    t->elem = e;
    st = qtk__elem_bytes(e, t->numel, &t->nbytes);
    if (st) return qtk__err_context(st, "tensor '%s'", name);
    d->n_tensors++;
    if (out) *out = t;
    return QTK_OK;
}

qtk_status qtk__desc_add_quantized(qtk__desc *d, const char *name, const qtk_scheme *s, const size_t *shape,
                                       int rank, qtk_ckpt_tensor **out) {
    if (rank > QTK_MAX_RANK)
        return qtk__err(QTK_E_UNSUPPORTED, "tensor '%s': a quantized tensor has rank at most %d (got %d)", name,
                        QTK_MAX_RANK, rank);
    qtk_ckpt_tensor *t;
    qtk_status st = add_tensor(d, name, shape, rank, &t);
    if (st) return st;
    qtk_layout L;
    st = qtk_layout_compute(s, shape, rank, &L);
    if (st) return qtk__err_context(st, "tensor '%s'", name);
    t->quantized = true;
    t->scheme = *s;
    t->nbytes = L.total_bytes;
    d->n_tensors++;
    if (out) *out = t;
    return QTK_OK;
}

qtk_status qtk__desc_add_copy(qtk__desc *d, const qtk_ckpt_tensor *t, qtk_ckpt_tensor **out) {
    if (!t || !t->name || (t->rank && !t->shape)) return qtk__err(QTK_E_ARG, "a tensor needs a name and a shape");
    qtk_ckpt_tensor *n = NULL;
    qtk_status st = t->quantized ? qtk__desc_add_quantized(d, t->name, &t->scheme, t->shape, t->rank, &n)
                                 : qtk__desc_add_raw(d, t->name, t->elem, t->shape, t->rank, &n);
    if (st) return st;
    n->has_param_id = t->has_param_id;
    n->param_id = t->param_id;
    if (t->file_type && !(n->file_type = qtk__arena_strdup(&d->arena, t->file_type)))
        return qtk__err(QTK_E_NOMEM, "out of memory");
    n->file_bytes = t->file_bytes;
    n->decoded = t->decoded;
    if (out) *out = n;
    return QTK_OK;
}

qtk_status qtk__desc_add_meta(qtk__desc *d, const char *key, const char *value) {
    if (!qtk__grow((void **)&d->meta, &d->cap_meta, d->n_meta, sizeof *d->meta))
        return qtk__err(QTK_E_NOMEM, "out of memory for metadata");
    char *k = qtk__arena_strdup(&d->arena, key), *v = qtk__arena_strdup(&d->arena, value);
    if (!k || !v) return qtk__err(QTK_E_NOMEM, "out of memory for metadata '%s'", key);
    d->meta[d->n_meta].key = k;
    d->meta[d->n_meta].value = v;
    d->n_meta++;
    return QTK_OK;
}

qtk_status qtk__desc_add_scalar(qtk__desc *d, const qtk_ckpt_scalar *s) {
    if (!qtk__grow((void **)&d->scalars, &d->cap_scalars, d->n_scalars, sizeof *d->scalars))
        return qtk__err(QTK_E_NOMEM, "out of memory for scalars");
    qtk_ckpt_scalar c = *s;
    c.name = qtk__arena_strdup(&d->arena, s->name);
    if (!c.name) return qtk__err(QTK_E_NOMEM, "out of memory for scalar '%s'", s->name);
    d->scalars[d->n_scalars++] = c;
    return QTK_OK;
}

