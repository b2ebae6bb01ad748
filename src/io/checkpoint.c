/* checkpoint.c — the format-independent half of checkpoints: descriptions, opening a file
 * with the right format, handing out tensors, and the streaming writer. */
#include "ckpt_internal.h"

#include "hub/hub.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

static const qtk__ckpt_ops *const formats[] = {&qtk__burnpack_ops, &qtk__safetensors_ops, &qtk__gguf_ops};
#define N_FORMATS (sizeof formats / sizeof formats[0])

static const qtk__ckpt_ops *ops_of(qtk_ckpt_format f) {
    for (size_t i = 0; i < N_FORMATS; i++)
        if (formats[i]->fmt == f) return formats[i];
    return NULL;
}

const char *qtk_ckpt_format_name(qtk_ckpt_format f) {
    const qtk__ckpt_ops *o = ops_of(f);
    return o ? o->name : "unknown";
}

qtk_ckpt_format qtk_ckpt_format_from_path(const char *path) {
    const char *dot = path ? strrchr(path, '.') : NULL;
    if (!dot || strchr(dot, '/')) return QTK_CKPT_UNKNOWN;
    if (strcasecmp(dot, ".bpk") == 0) return QTK_CKPT_BURNPACK;
    if (strcasecmp(dot, ".safetensors") == 0) return QTK_CKPT_SAFETENSORS;
    if (strcasecmp(dot, ".gguf") == 0) return QTK_CKPT_GGUF;
    return QTK_CKPT_UNKNOWN;
}

/* ---- small shared helpers ---- */

bool qtk__utf8_ok(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c == 0) return false;
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        unsigned cp;
        if (c >= 0xc2 && c <= 0xdf) k = 1, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef) k = 2, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4) k = 3, cp = c & 0x07;
        else return false;
        if (n - i <= k) return false;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (s[i + j] & 0x3fu);
        }
        /* overlong forms, surrogates, beyond U+10FFFF */
        if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
            return false;
        i += k + 1;
    }
    return true;
}


/* ---- descriptions ---- */

void qtk__desc_init(qtk__desc *d) { memset(d, 0, sizeof *d); }

void qtk__desc_free(qtk__desc *d) {
    if (!d) return;
    free(d->tensors);
    free(d->meta);
    free(d->scalars);
    qtk__arena_free(&d->arena);
    memset(d, 0, sizeof *d);
}

/* Grows a description array by one slot. */
static bool grow(void **arr, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return true;
    size_t nc = *cap ? *cap * 2 : 16;
    if (nc > SIZE_MAX / elem) return false;
    void *p = realloc(*arr, nc * elem);
    if (!p) return false;
    *arr = p;
    *cap = nc;
    return true;
}

static qtk_status add_tensor(qtk__desc *d, const char *name, const size_t *shape, int rank, qtk_ckpt_tensor **out) {
    if (rank < 0) return qtk__err(QTK_E_SHAPE, "tensor '%s': negative rank", name);
    if (!grow((void **)&d->tensors, &d->cap_tensors, d->n_tensors, sizeof *d->tensors))
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

qtk_status qtk__desc_add_meta(qtk__desc *d, const char *key, const char *value) {
    if (!grow((void **)&d->meta, &d->cap_meta, d->n_meta, sizeof *d->meta))
        return qtk__err(QTK_E_NOMEM, "out of memory for metadata");
    char *k = qtk__arena_strdup(&d->arena, key), *v = qtk__arena_strdup(&d->arena, value);
    if (!k || !v) return qtk__err(QTK_E_NOMEM, "out of memory for metadata '%s'", key);
    d->meta[d->n_meta].key = k;
    d->meta[d->n_meta].value = v;
    d->n_meta++;
    return QTK_OK;
}

qtk_status qtk__desc_add_scalar(qtk__desc *d, const qtk_ckpt_scalar *s) {
    if (!grow((void **)&d->scalars, &d->cap_scalars, d->n_scalars, sizeof *d->scalars))
        return qtk__err(QTK_E_NOMEM, "out of memory for scalars");
    qtk_ckpt_scalar c = *s;
    c.name = qtk__arena_strdup(&d->arena, s->name);
    if (!c.name) return qtk__err(QTK_E_NOMEM, "out of memory for scalar '%s'", s->name);
    d->scalars[d->n_scalars++] = c;
    return QTK_OK;
}

/* ---- lookup tables found in files ---- */

static bool same_table(const char *name, const float *v, size_t n) {
    float t[256];
    size_t k = 0;
    if (!name || !*name || qtk_table_get(name, t, 256, &k) != QTK_OK || k != n) return false;
    return memcmp(t, v, n * sizeof(float)) == 0;
}

qtk_status qtk__ckpt_resolve_table(qtk_scheme *s, const uint8_t *entries, size_t n, const char *hint) {
    float v[256];
    if (n != 4 && n != 16 && n != 256) return qtk__err(QTK_E_INTERNAL, "a table of %zu entries", n);
    for (size_t i = 0; i < n; i++) {
        v[i] = qtk__bits_f32(qtk__ld32(entries + 4 * i));
        if (!qtk__isfinite(v[i])) return qtk__err(QTK_E_VALUE, "lookup table entry %zu is not finite", i);
    }
    const char *name = NULL;
    char derived[QTK_TABLE_NAME_MAX];
    if (same_table(hint, v, n)) name = hint;
    else if (same_table("nf4", v, n)) name = "nf4";
    else if (same_table("iq4nl", v, n)) name = "iq4nl";
    else if (hint && *hint && qtk_table_get(hint, NULL, 0, &(size_t){0}) != QTK_OK &&
             qtk_table_register(hint, v, n) == QTK_OK)
        name = hint; /* the writer's name, free here: keep it */
    else {
        /* FNV-1a over the entries' bytes: the same table always gets the same name, so
         * registering it again is harmless. */
        uint64_t h = 0xcbf29ce484222325ull;
        for (size_t i = 0; i < 4 * n; i++) h = (h ^ entries[i]) * 0x100000001b3ull;
        snprintf(derived, sizeof derived, "lut-%016llx", (unsigned long long)h);
        qtk_status st = qtk_table_register(derived, v, n);
        if (st) return st;
        name = derived;
    }
    memset(s->table, 0, sizeof s->table);
    snprintf(s->table, sizeof s->table, "%s", name);
    return QTK_OK;
}

/* ---- reading ---- */

qtk_status qtk__ckpt_add_loc(qtk_ckpt *c, const qtk__ckpt_loc *loc) {
    if (c->desc.n_tensors == 0) return qtk__err(QTK_E_INTERNAL, "location out of step");
    if (!grow((void **)&c->loc, &c->cap_loc, c->desc.n_tensors - 1, sizeof *c->loc))
        return qtk__err(QTK_E_NOMEM, "out of memory for tensor locations");
    c->loc[c->desc.n_tensors - 1] = *loc;
    return QTK_OK;
}

static qtk_status open_map(qtk_ckpt *c) {
    const qtk__ckpt_ops *ops = NULL;
    for (size_t i = 0; i < N_FORMATS && !ops; i++)
        if (formats[i]->sniff(c->map.data, c->map.len)) ops = formats[i];
    if (!ops) ops = ops_of(qtk_ckpt_format_from_path(c->name));
    if (!ops)
        return qtk__err(QTK_E_FORMAT,
                        "'%s' is not a checkpoint qtk reads: no burnpack magic (\"NRUB\"), no safetensors header and "
                        "no GGUF magic, and the name does not end in .bpk, .safetensors or .gguf",
                        c->name);
    c->fmt = ops->fmt;
    qtk_status st = ops->parse(c);
    if (st) return qtk__err_context(st, "%s '%s'", ops->name, c->name);
    c->facts.file_bytes = c->map.len;
    return QTK_OK;
}

qtk_status qtk__ckpt_new(const char *name, qtk_ckpt **out) {
    *out = NULL;
    qtk_ckpt *c = calloc(1, sizeof *c);
    if (c) c->name = malloc(strlen(name) + 1);
    if (!c || !c->name) {
        free(c);
        return qtk__err(QTK_E_NOMEM, "out of memory");
    }
    memcpy(c->name, name, strlen(name) + 1);
    qtk__desc_init(&c->desc);
    *out = c;
    return QTK_OK;
}

/* A file, an index or a directory; Hub layouts are recognised (hub.c). */
qtk_status qtk_ckpt_open(const char *path, qtk_ckpt **out) { return qtk__hub_open(path, QTK_LAYOUT_AUTO, out); }

qtk_status qtk__ckpt_open_file(const char *path, qtk_ckpt **out) {
    if (!path || !out) return qtk__err(QTK_E_ARG, "qtk_ckpt_open: NULL argument");
    qtk_ckpt *c;
    qtk_status st = qtk__ckpt_new(path, &c);
    if (st) return st;
    st = qtk__map_open(path, &c->map);
    if (!st) st = open_map(c);
    if (st) {
        qtk_ckpt_close(c);
        return st;
    }
    *out = c;
    return QTK_OK;
}

qtk_status qtk_ckpt_open_buffer(const void *data, size_t len, const char *name, qtk_ckpt **out) {
    if ((!data && len) || !out) return qtk__err(QTK_E_ARG, "qtk_ckpt_open_buffer: NULL argument");
    qtk_ckpt *c;
    qtk_status st = qtk__ckpt_new(name ? name : "(buffer)", &c);
    if (st) return st;
    qtk__map_borrow(&c->map, data, len);
    st = open_map(c);
    if (!st && c->fmt == QTK_CKPT_SAFETENSORS) st = qtk__hub_wrap(&c, NULL); /* names alone: no config beside */
    if (st) {
        qtk_ckpt_close(c);
        return st;
    }
    *out = c;
    return QTK_OK;
}

void qtk_ckpt_close(qtk_ckpt *c) {
    if (!c) return;
    if (c->virt) c->virt->close(c->impl);
    const qtk__ckpt_ops *ops = ops_of(c->fmt);
    if (ops && ops->close) ops->close(c);
    qtk__map_close(&c->map);
    qtk__desc_free(&c->desc);
    free(c->loc);
    free(c->name);
    free(c);
}

qtk_ckpt_format qtk_ckpt_format_of(const qtk_ckpt *c) { return c ? c->fmt : QTK_CKPT_UNKNOWN; }
const qtk__desc *qtk__ckpt_desc(const qtk_ckpt *c) { return c ? &c->desc : NULL; }
void qtk_ckpt_facts_of(const qtk_ckpt *c, qtk_ckpt_facts *f) { *f = c->facts; }
size_t qtk_ckpt_offset_of(const qtk_ckpt *c, size_t i) {
    if (c->virt) return i < c->desc.n_tensors ? c->virt->offset_of(c, i) : 0;
    return i < c->desc.n_tensors && c->loc[i].n ? c->loc[i].piece[0].off : 0;
}

qtk_status qtk_ckpt_load(qtk_ckpt *c, size_t i, qtk_ckpt_view *v) {
    memset(v, 0, sizeof *v);
    if (!c || i >= c->desc.n_tensors) return qtk__err(QTK_E_ARG, "qtk_ckpt_load: no tensor %zu", i);
    const qtk_ckpt_tensor *t = &c->desc.tensors[i];
    const qtk__ckpt_loc *loc = c->virt ? NULL : &c->loc[i];
    static const uint8_t empty[1];
    v->index = i;
    v->len = t->nbytes;
    const qtk__ckpt_ops *ops = ops_of(c->fmt);
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
    if (t->quantized) {
        qtk_status st = qtk_bytes_check(v->data, v->len, t->shape, t->rank, &t->scheme);
        if (st) {
            qtk_ckpt_unload(c, v);
            return qtk__err_context(st, "'%s': tensor '%s'", c->name, t->name);
        }
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

qtk_status qtk__ckpt_writer_open(const char *path, qtk_ckpt_format fmt, const qtk__desc *desc, int force,
                                qtk__ckpt_writer **out) {
    if (!path || !desc || !out) return qtk__err(QTK_E_ARG, "qtk__ckpt_writer_open: NULL argument");
    *out = NULL;
    const qtk__ckpt_ops *ops = ops_of(fmt);
    if (!ops) return qtk__err(QTK_E_ARG, "cannot write format %d", (int)fmt);
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

void qtk__ckpt_writer_abort(qtk__ckpt_writer *w) {
    if (!w) return;
    qtk__afile_abort(&w->file);
    if (w->ops && w->ops->wfree) w->ops->wfree(w);
    free(w->put_done);
    free(w->offsets);
    free(w);
}

qtk_status qtk__ckpt_write(const char *path, qtk_ckpt_format fmt, const qtk__desc *desc, const void *const *bytes,
                          int force) {
    qtk__ckpt_writer *w;
    qtk_status st = qtk__ckpt_writer_open(path, fmt, desc, force, &w);
    if (st) return st;
    for (size_t i = 0; i < desc->n_tensors; i++) {
        st = qtk__ckpt_writer_put(w, bytes[i], desc->tensors[i].nbytes);
        if (st) {
            qtk__ckpt_writer_abort(w);
            return st;
        }
    }
    return qtk__ckpt_writer_commit(w);
}
