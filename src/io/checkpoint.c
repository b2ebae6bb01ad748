/* checkpoint.c — the format-independent reader and writer: opening a map with the format
 * that recognises it, handing out tensors, and the streaming writer. */
#include "ckpt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

const char *qtk_ckpt_format_name(qtk_ckpt_format f) {
    switch (f) {
    case QTK_CKPT_BURNPACK: return "burnpack";
    case QTK_CKPT_SAFETENSORS: return "safetensors";
    case QTK_CKPT_GGUF: return "gguf";
    default: return "unknown";
    }
}

qtk_ckpt_format qtk_ckpt_format_from_path(const char *path) {
    const char *dot = path ? strrchr(path, '.') : NULL;
    if (!dot || strchr(dot, '/')) return QTK_CKPT_UNKNOWN;
    if (strcasecmp(dot, ".bpk") == 0) return QTK_CKPT_BURNPACK;
    if (strcasecmp(dot, ".safetensors") == 0) return QTK_CKPT_SAFETENSORS;
    if (strcasecmp(dot, ".gguf") == 0) return QTK_CKPT_GGUF;
    return QTK_CKPT_UNKNOWN;
}

/* ---- reading ---- */

qtk_status qtk__ckpt_add_loc(qtk_ckpt *c, const qtk__ckpt_loc *loc) {
    if (c->desc.n_tensors == 0) return qtk__err(QTK_E_INTERNAL, "location out of step");
    if (!qtk__grow((void **)&c->loc, &c->cap_loc, c->desc.n_tensors - 1, sizeof *c->loc))
        return qtk__err(QTK_E_NOMEM, "out of memory for tensor locations");
    c->loc[c->desc.n_tensors - 1] = *loc;
    return QTK_OK;
}

qtk_status qtk__ckpt_reserve_loc(qtk_ckpt *c, size_t n) {
    if (n <= c->cap_loc) return QTK_OK;
    if (n > SIZE_MAX / sizeof *c->loc) return qtk__err(QTK_E_NOMEM, "out of memory for %zu tensor locations", n);
    qtk__ckpt_loc *l = realloc(c->loc, n * sizeof *l);
    if (!l) return qtk__err(QTK_E_NOMEM, "out of memory for %zu tensor locations", n);
    c->loc = l;
    c->cap_loc = n;
    return QTK_OK;
}

/* The format of c's map: the first whose sniff accepts the bytes, else the one its name's
 * extension names (so the format's parser explains what is wrong). */
static qtk_status open_map(qtk_ckpt *c, const qtk__ckpt_ops *const *formats, size_t n) {
    const qtk__ckpt_ops *ops = NULL;
    for (size_t i = 0; i < n && !ops; i++)
        if (formats[i]->sniff(c->map.data, c->map.len)) ops = formats[i];
    qtk_ckpt_format by_name = qtk_ckpt_format_from_path(c->name);
    for (size_t i = 0; i < n && !ops; i++)
        if (formats[i]->fmt == by_name) ops = formats[i];
    if (!ops) {
        char what[256] = "", ext[128] = "";
        for (size_t i = 0; i < n; i++) {
            const char *sep = i == 0 ? "" : i + 1 == n ? " and " : ", ";
            size_t a = strlen(what), b = strlen(ext);
            snprintf(what + a, sizeof what - a, "%sno %s", sep, formats[i]->signature);
            snprintf(ext + b, sizeof ext - b, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ", formats[i]->ext);
        }
        return qtk__err(QTK_E_FORMAT, "'%s' is not a checkpoint qtk reads: %s, and the name does not end in %s", c->name,
                        what, ext);
    }
    c->fmt = ops->fmt;
    c->ops = ops;
    qtk_status st = ops->parse(c);
    if (qtk__map_faulted(&c->map)) return qtk__map_check(&c->map, c->name); /* the header went while read */
    if (st) return qtk__err_context(st, "%s '%s'", ops->name, c->name);
    c->facts.file_bytes = c->map.len;
    return QTK_OK;
}

qtk_status qtk__ckpt_new(const char *name, qtk_ckpt **out) {
    *out = NULL;
    qtk_ckpt *c = calloc(1, sizeof *c);
    if (c) c->name = qtk__strdup(name);
    if (!c || !c->name) {
        free(c);
        return qtk__err(QTK_E_NOMEM, "out of memory");
    }
    qtk__desc_init(&c->desc);
    atomic_init(&c->refs, 1);
    *out = c;
    return QTK_OK;
}

qtk_status qtk__ckpt_open_path(const char *path, const qtk__ckpt_ops *const *formats, size_t n, qtk_ckpt **out) {
    qtk_ckpt *c;
    qtk_status st = qtk__ckpt_new(path, &c);
    if (st) return st;
    st = qtk__map_open(path, &c->map);
    if (!st) st = open_map(c, formats, n);
    if (st) {
        qtk_ckpt_close(c);
        return st;
    }
    *out = c;
    return QTK_OK;
}

qtk_status qtk__ckpt_open_buffer(const void *data, size_t len, const char *name, const qtk__ckpt_ops *const *formats,
                                 size_t n, qtk_ckpt **out) {
    qtk_ckpt *c;
    qtk_status st = qtk__ckpt_new(name ? name : "(buffer)", &c);
    if (st) return st;
    qtk__map_borrow(&c->map, data, len);
    st = open_map(c, formats, n);
    if (st) {
        qtk_ckpt_close(c);
        return st;
    }
    *out = c;
    return QTK_OK;
}

qtk_status qtk_ckpt_status(const qtk_ckpt *c) {
    if (!c) return qtk__err(QTK_E_ARG, "qtk_ckpt_status: checkpoint is NULL");
    if (c->virt) return c->virt->status ? c->virt->status(c) : QTK_OK;
    return qtk__map_check(&c->map, c->name);
}

void qtk__ckpt_retain(qtk_ckpt *c) { atomic_fetch_add(&c->refs, 1); }

void qtk__ckpt_release(qtk_ckpt *c) {
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1) return;
    if (c->virt) c->virt->close(c->impl);
    if (c->ops && c->ops->close) c->ops->close(c);
    qtk__map_close(&c->map);
    qtk__desc_free(&c->desc);
    qtk__ckpt_release_tables(c); /* after the description naming them */
    free(c->loc);
    free(c->by_name);
    free(c->name);
    free(c);
}

void qtk_ckpt_close(qtk_ckpt *c) { qtk__ckpt_release(c); }

qtk_ckpt_format qtk_ckpt_format_of(const qtk_ckpt *c) { return c ? c->fmt : QTK_CKPT_UNKNOWN; }
const qtk__desc *qtk__ckpt_desc(const qtk_ckpt *c) { return c ? &c->desc : NULL; }
void qtk_ckpt_facts_of(const qtk_ckpt *c, qtk_ckpt_facts *f) { *f = c->facts; }
size_t qtk_ckpt_offset_of(const qtk_ckpt *c, size_t i) {
    if (c->virt) return i < c->desc.n_tensors ? c->virt->offset_of(c, i) : 0;
    return i < c->desc.n_tensors && c->loc[i].n ? c->loc[i].piece[0].off : 0;
}

qtk_status qtk__ckpt_load_unchecked(qtk_ckpt *c, size_t i, qtk_ckpt_view *v) {
    memset(v, 0, sizeof *v);
    if (!c || i >= c->desc.n_tensors) return qtk__err(QTK_E_ARG, "qtk_ckpt_load: no tensor %zu", i);
    const qtk_ckpt_tensor *t = &c->desc.tensors[i];
    const qtk__ckpt_loc *loc = c->virt ? NULL : &c->loc[i];
    static const uint8_t empty[1];
    v->index = i;
    v->len = t->nbytes;
    const qtk__ckpt_ops *ops = c->ops;
    if (c->virt) {
        /* a logical checkpoint (hub.c) hands its tensors out itself */
        qtk_status st = c->virt->load(c, i, v);
        if (st) {
            memset(v, 0, sizeof *v);
            return st;
        }
    } else if (ops && ops->load) {
        /* a format whose bytes are translated on load (GGUF) */
        qtk_status st = ops->load(c, i, v);
        if (st) {
            qtk_ckpt_unload(c, v);
            return qtk__err_context(st, "'%s': tensor '%s'", c->name, t->name);
        }
    } else if (loc->n == 1) {
        v->data = loc->piece[0].len ? c->map.data + loc->piece[0].off : empty;
    } else {
        /* Pieces were checked at open to add up to nbytes and lie inside the file. */
        uint8_t *b = malloc(t->nbytes ? t->nbytes : 1);
        if (!b) return qtk__err(QTK_E_NOMEM, "out of memory for tensor '%s' (%zu bytes)", t->name, t->nbytes);
        size_t at = 0;
        for (unsigned k = 0; k < loc->n; k++) {
            if (loc->piece[k].len) memcpy(b + at, c->map.data + loc->piece[k].off, loc->piece[k].len);
            at += loc->piece[k].len;
        }
        v->owned = b;
        v->data = b;
    }
    return QTK_OK;
}

qtk_status qtk_ckpt_load(qtk_ckpt *c, size_t i, qtk_ckpt_view *v) {
    qtk_status st = qtk__ckpt_load_unchecked(c, i, v);
    if (st) return st;
    const qtk_ckpt_tensor *t = &c->desc.tensors[i];
    if (t->quantized && (st = qtk_bytes_check(v->data, v->len, t->shape, t->rank, &t->scheme))) {
        qtk_ckpt_unload(c, v);
        return qtk__err_context(st, "'%s': tensor '%s'", c->name, t->name);
    }
    return QTK_OK;
}

void qtk__ckpt_drop_pages(qtk_ckpt *c, const qtk_ckpt_view *v) {
    if (!c || !v || v->index >= c->desc.n_tensors) return;
    if (c->virt) {
        c->virt->drop_pages(c, v->index);
        return;
    }
    const qtk__ckpt_loc *loc = &c->loc[v->index];
    for (unsigned k = 0; k < loc->n; k++) qtk__map_release(&c->map, loc->piece[k].off, loc->piece[k].len);
}

void qtk_ckpt_unload(qtk_ckpt *c, qtk_ckpt_view *v) {
    if (!c || !v) return;
    qtk__ckpt_drop_pages(c, v);
    if (c->virt && c->virt->release) c->virt->release(c, v);
    else free(v->owned);
    memset(v, 0, sizeof *v);
}

/* ---- writing ---- */

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Names must be unique in every format (a map key in both burnpack and safetensors). */
static qtk_status check_unique(const qtk__desc *d) {
    if (d->n_tensors < 2) return QTK_OK;
    const char **names = malloc(d->n_tensors * sizeof *names);
    if (!names) return qtk__err(QTK_E_NOMEM, "out of memory");
    for (size_t i = 0; i < d->n_tensors; i++) names[i] = d->tensors[i].name;
    qsort(names, d->n_tensors, sizeof *names, cmp_name);
    qtk_status st = QTK_OK;
    for (size_t i = 1; i < d->n_tensors && !st; i++)
        if (strcmp(names[i - 1], names[i]) == 0) st = qtk__err(QTK_E_ARG, "two tensors are named '%s'", names[i]);
    free(names);
    return st;
}

qtk_status qtk__ckpt_writer_open_ops(const char *path, const qtk__ckpt_ops *ops, const qtk__desc *desc, int force,
                                     qtk__ckpt_writer **out) {
    if (!path || !ops || !desc || !out) return qtk__err(QTK_E_ARG, "qtk__ckpt_writer_open: NULL argument");
    *out = NULL;
    qtk_status st = check_unique(desc);
    if (st) return qtk__err_context(st, "cannot write '%s'", path);
    qtk__ckpt_writer *w = calloc(1, sizeof *w);
    if (w) w->offsets = malloc((desc->n_tensors ? desc->n_tensors : 1) * sizeof *w->offsets);
    if (!w || !w->offsets) {
        if (w) free(w);
        return qtk__err(QTK_E_NOMEM, "out of memory");
    }
    w->ops = ops;
    w->desc = desc;
    st = qtk__afile_open(&w->file, path, force);
    if (st) {
        free(w->offsets);
        free(w);
        return st;
    }
    st = ops->begin(w);
    if (st) {
        qtk__err_context(st, "cannot write %s '%s'", ops->name, path);
        qtk__ckpt_writer_abort(w);
        return st;
    }
    w->data_start = w->file.written;
    *out = w;
    return QTK_OK;
}

static qtk_status put_plain(qtk__ckpt_writer *w, const uint8_t *bytes, size_t len) {
    size_t at = w->offsets[w->next];
    if (at < w->pos) return qtk__err(QTK_E_INTERNAL, "tensor %zu placed before the write position", w->next);
    qtk_status st = qtk__afile_zeros(&w->file, at - w->pos);
    if (!st) st = qtk__afile_write(&w->file, bytes, len);
    if (!st) w->pos = at + len;
    return st;
}

qtk_status qtk__ckpt_writer_put(qtk__ckpt_writer *w, const void *bytes, size_t len) {
    if (!w) return qtk__err(QTK_E_ARG, "qtk__ckpt_writer_put: writer is NULL");
    if (w->next >= w->desc->n_tensors)
        return qtk__err(QTK_E_ARG, "all %zu tensors are written already", w->desc->n_tensors);
    const qtk_ckpt_tensor *t = &w->desc->tensors[w->next];
    if (len != t->nbytes)
        return qtk__err(QTK_E_LENGTH, "tensor '%s' takes %zu bytes; got %zu", t->name, t->nbytes, len);
    if (!bytes && len) return qtk__err(QTK_E_ARG, "tensor '%s': bytes are NULL", t->name);
    if (t->quantized) {
        qtk_status st = qtk_bytes_check(bytes, len, t->shape, t->rank, &t->scheme);
        if (st) return qtk__err_context(st, "tensor '%s'", t->name);
    }
    qtk_status st = w->ops->put ? w->ops->put(w, bytes, len) : put_plain(w, bytes, len);
    if (st) return st;
    w->next++;
    return QTK_OK;
}

qtk_status qtk__ckpt_writer_put_at(qtk__ckpt_writer *w, size_t j, const void *bytes, size_t len) {
    if (!w || j >= w->desc->n_tensors) return qtk__err(QTK_E_ARG, "qtk__ckpt_writer_put_at: no tensor %zu", j);
    const qtk_ckpt_tensor *t = &w->desc->tensors[j];
    if (w->ops->put) return qtk__err(QTK_E_INTERNAL, "format %s writes tensors in order only", w->ops->name);
    if (w->next != 0 && !w->put_done) return qtk__err(QTK_E_INTERNAL, "put_at after put on '%s'", w->file.path);
    if (!w->put_done && !(w->put_done = calloc(w->desc->n_tensors, 1))) return qtk__err(QTK_E_NOMEM, "out of memory");
    if (w->put_done[j]) return qtk__err(QTK_E_INTERNAL, "tensor '%s' written twice", t->name);
    if (len != t->nbytes) return qtk__err(QTK_E_LENGTH, "tensor '%s' takes %zu bytes; got %zu", t->name, t->nbytes, len);
    if (t->quantized) {
        qtk_status st = qtk_bytes_check(bytes, len, t->shape, t->rank, &t->scheme);
        if (st) return qtk__err_context(st, "tensor '%s'", t->name);
    }
    qtk_status st = qtk__afile_write_at(&w->file, w->data_start + w->offsets[j], bytes, len);
    if (st) return st;
    w->put_done[j] = 1;
    w->next++; /* a count here: commit checks that all were written */
    return QTK_OK;
}

qtk_status qtk__ckpt_writer_commit(qtk__ckpt_writer *w) {
    if (!w) return qtk__err(QTK_E_ARG, "qtk__ckpt_writer_commit: writer is NULL");
    qtk_status st = QTK_OK;
    if (w->next != w->desc->n_tensors)
        st = qtk__err(QTK_E_ARG, "only %zu of %zu tensors were written", w->next, w->desc->n_tensors);
    if (st) {
        qtk__ckpt_writer_abort(w);
        return st;
    }
    st = qtk__afile_commit(&w->file); /* removes the temporary file itself on failure */
    if (w->ops && w->ops->wfree) w->ops->wfree(w);
    free(w->put_done);
    free(w->offsets);
    free(w);
    return st;
}

qtk_status qtk__ckpt_writer_finish(qtk__ckpt_writer *w, qtk__afile *out) {
    memset(out, 0, sizeof *out);
    if (!w) return qtk__err(QTK_E_ARG, "qtk__ckpt_writer_finish: writer is NULL");
    qtk_status st = QTK_OK;
    if (w->next != w->desc->n_tensors)
        st = qtk__err(QTK_E_ARG, "only %zu of %zu tensors were written", w->next, w->desc->n_tensors);
    if (!st) st = qtk__afile_finish(&w->file);
    if (st) {
        qtk__ckpt_writer_abort(w);
        return st;
    }
    *out = w->file;
    memset(&w->file, 0, sizeof w->file); /* the caller's now */
    qtk__ckpt_writer_abort(w);
    return QTK_OK;
}

void qtk__ckpt_writer_set_cancel(qtk__ckpt_writer *w, const volatile sig_atomic_t *cancel) {
    if (w) w->file.cancel = cancel;
}

void qtk__ckpt_writer_abort(qtk__ckpt_writer *w) {
    if (!w) return;
    qtk__afile_abort(&w->file);
    if (w->ops && w->ops->wfree) w->ops->wfree(w);
    free(w->put_done);
    free(w->offsets);
    free(w);
}
