/* gguf_write.c — writing GGUF (GGUF.md §1, §1.9 "qtk's writer"): little-endian, version 3,
 * tensors in description order, each at the running sum of sizes padded to the alignment,
 * zero padding after the header and after every tensor (the last too), names under 64 bytes,
 * 1 to 4 dims. So ggml's strict reader accepts the files, and qtk's reader reads them back.
 *
 * Which ggml type each tensor becomes is gguf_export.c's choice (an error names a tensor that
 * has none: `qtk convert` dequantizes such tensors to F32 itself, or refuses a scheme the user
 * asked for). KVs: the description's metadata in its order, each value parsed from its typed
 * text (gguf_kv.c); "qtk:..." keys (qtk's bookkeeping in other formats) are left out, and so are
 * arrays of arrays, which ggml cannot read. burnpack scalars become "qtk.scalar.NAME"
 * (i64/u64/f64/bool) and parameter ids "qtk.param_id.NAME" (u64), which qtk's reader turns back
 * into scalars and ids. general.architecture ("qtk") and general.quantization_version (2, when
 * a quantized type is written) are added when absent; general.alignment, when present, must be a
 * u32 power of two and is the alignment used. */
#include "gguf/gguf_internal.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct {
    int type;      /* ggml type id */
    bool comp;     /* followed by its companion: an F32 [1] tensor holding the global */
    size_t gbytes; /* bytes in the file */
} wtensor;

typedef struct {
    wtensor *t;
    uint32_t align;
    uint8_t *buf;
    size_t cap;
} gwriter;

void qtk__gguf_wfree(qtk__ckpt_writer *w) {
    gwriter *g = w->priv;
    if (!g) return;
    free(g->t);
    free(g->buf);
    free(g);
    w->priv = NULL;
}

/* ---- the header, built in memory ---- */

static void out_bytes(gguf_text *o, const void *p, size_t n) {
    if (o->oom) return;
    if (o->cap - o->n <= n) {
        size_t nc = o->cap ? o->cap : 4096;
        while (nc - o->n <= n) {
            if (nc > SIZE_MAX / 2) {
                o->oom = true;
                return;
            }
            nc *= 2;
        }
        char *q = realloc(o->p, nc);
        if (!q) {
            o->oom = true;
            return;
        }
        o->p = q;
        o->cap = nc;
    }
    if (n) memcpy(o->p + o->n, p, n);
    o->n += n;
}
static void out_u32(gguf_text *o, uint32_t v) {
    uint8_t b[4];
    qtk__st32(b, v);
    out_bytes(o, b, 4);
}
static void out_u64(gguf_text *o, uint64_t v) {
    out_u32(o, (uint32_t)v);
    out_u32(o, (uint32_t)(v >> 32));
}
static void out_str(gguf_text *o, const char *s) {
    size_t n = strlen(s);
    out_u64(o, n);
    out_bytes(o, s, n);
}

/* The companion's name: "<stem>.scale" for a name ending in ".weight" (llama.cpp's
 * convention, GGUF.md §3.6.4), else "<name>.scale". */
static void companion_name(const char *name, char *buf, size_t cap) {
    size_t n = strlen(name);
    if (n >= 7 && strcmp(name + n - 7, ".weight") == 0) snprintf(buf, cap, "%.*s.scale", (int)(n - 7), name);
    else snprintf(buf, cap, "%s.scale", name);
}

typedef struct {
    const char *name, *value;
} hint;
static int cmp_hint(const void *a, const void *b) { return strcmp(((const hint *)a)->name, ((const hint *)b)->name); }
static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Hints "qtk:file_type:NAME" from metadata, sorted by NAME. */
static hint *collect_hints(const qtk__desc *d, size_t *n) {
    size_t pl = strlen(QTK__META_FILE_TYPE), k = 0;
    hint *h = malloc((d->n_meta ? d->n_meta : 1) * sizeof *h);
    if (!h) return NULL;
    for (size_t i = 0; i < d->n_meta; i++)
        if (strncmp(d->meta[i].key, QTK__META_FILE_TYPE, pl) == 0) h[k++] = (hint){d->meta[i].key + pl, d->meta[i].value};
    qsort(h, k, sizeof *h, cmp_hint);
    *n = k;
    return h;
}

static const char *find_hint(const hint *h, size_t n, const char *name) {
    hint key = {name, NULL};
    const hint *f = n ? bsearch(&key, h, n, sizeof *h, cmp_hint) : NULL;
    return f ? f->value : NULL;
}

/* Decides every tensor's type; checks names (length, uniqueness with companions). */
static qtk_status plan_tensors(qtk__ckpt_writer *w, gwriter *g, size_t *n_out, bool *any_quant) {
    const qtk__desc *d = w->desc;
    size_t nh = 0;
    hint *hints = collect_hints(d, &nh);
    const char **names = malloc((2 * d->n_tensors + 1) * sizeof *names);
    char *comp_names = malloc(d->n_tensors * (GGUF_MAX_NAME + 16) + 1);
    qtk_status st = !hints || !names || !comp_names ? qtk__err(QTK_E_NOMEM, "out of memory") : QTK_OK;
    size_t nn = 0;
    *any_quant = false;
    for (size_t i = 0; i < d->n_tensors && !st; i++) {
        const qtk_ckpt_tensor *t = &d->tensors[i];
        const char *h = t->file_type ? t->file_type : find_hint(hints, nh, t->name);
        char why[400];
        wtensor *wt = &g->t[i];
        wt->type = qtk__gguf_choose(t, h, &wt->comp, why, sizeof why);
        if (wt->type < 0) {
            st = qtk__err(QTK_E_UNSUPPORTED, "tensor '%s': %s", t->name, why);
            break;
        }
        const gguf_type *ty = qtk__gguf_type((uint32_t)wt->type);
        wt->gbytes = t->numel / ty->blck * ty->bytes;
        *any_quant |= ty->kind != GK_RAW;
        if (strlen(t->name) > GGUF_MAX_NAME) {
            st = qtk__err(QTK_E_UNSUPPORTED, "tensor name '%s' is %zu bytes; GGUF (ggml) names are at most %u", t->name,
                          strlen(t->name), GGUF_MAX_NAME);
            break;
        }
        names[nn++] = t->name;
        if (wt->comp) {
            char *cn = comp_names + i * (GGUF_MAX_NAME + 16);
            companion_name(t->name, cn, GGUF_MAX_NAME + 16);
            if (strlen(cn) > GGUF_MAX_NAME) {
                st = qtk__err(QTK_E_UNSUPPORTED, "tensor '%s': its global scale goes to a companion tensor '%s', longer than %u bytes",
                              t->name, cn, GGUF_MAX_NAME);
                break;
            }
            names[nn++] = cn;
        }
    }
    if (!st) {
        qsort(names, nn, sizeof *names, cmp_str);
        for (size_t i = 1; i < nn && !st; i++)
            if (strcmp(names[i - 1], names[i]) == 0)
                st = qtk__err(QTK_E_ARG, "the tensor name '%s' would be used twice (an nvfp4 tensor's global scale is written as "
                                         "a companion tensor NAME.scale, or STEM.scale for STEM.weight)",
                              names[i]);
    }
    *n_out = nn;
    free(hints);
    free(names);
    free(comp_names);
    return st;
}

/* One KV record into kvb; keys are collected for the duplicate check. */
static qtk_status add_kv(gguf_text *kvb, const char **keys, size_t *nk, const char *key, const gguf_wvalue *v) {
    size_t kl = strlen(key);
    if (kl == 0) return qtk__err(QTK_E_ARG, "a metadata key is empty; GGUF keys are not");
    if (kl > 65535) return qtk__err(QTK_E_ARG, "the metadata key '%.40s...' is %zu bytes; GGUF keys are at most 65535", key, kl);
    out_str(kvb, key);
    out_u32(kvb, v->type);
    out_bytes(kvb, v->bytes, v->len);
    keys[(*nk)++] = key;
    return QTK_OK;
}

static qtk_status add_simple(gguf_text *kvb, const char **keys, size_t *nk, const char *key, uint32_t type, const void *b,
                             size_t n) {
    gguf_wvalue v = {type, (uint8_t *)(uintptr_t)b, n};
    return add_kv(kvb, keys, nk, key, &v);
}

static bool has_meta(const qtk__desc *d, const char *key) {
    for (size_t i = 0; i < d->n_meta; i++)
        if (strcmp(d->meta[i].key, key) == 0) return true;
    return false;
}

static qtk_status build_kvs(const qtk__desc *d, bool any_quant, gguf_text *kvb, size_t *n_kv, uint32_t *align,
                            qtk__arena *tmp) {
    size_t cap = d->n_meta + d->n_scalars + d->n_tensors + 2, nk = 0;
    const char **keys = malloc(cap * sizeof *keys);
    if (!keys) return qtk__err(QTK_E_NOMEM, "out of memory");
    qtk_status st = QTK_OK;
    *align = GGUF_DEFAULT_ALIGN;
    if (!has_meta(d, "general.architecture")) st = add_simple(kvb, keys, &nk, "general.architecture", GGUF_STR, "\3\0\0\0\0\0\0\0qtk", 11);
    if (!st && any_quant && !has_meta(d, "general.quantization_version"))
        st = add_simple(kvb, keys, &nk, "general.quantization_version", GGUF_U32, "\2\0\0\0", 4);
    for (size_t i = 0; i < d->n_meta && !st; i++) {
        const qtk__kv *m = &d->meta[i];
        if (strncmp(m->key, "qtk:", 4) == 0) continue; /* qtk's keys for other formats */
        gguf_wvalue v;
        bool nested;
        st = qtk__gguf_parse_value(m->value, &v, &nested);
        if (st) break;
        if (strcmp(m->key, "general.alignment") == 0) {
            uint32_t a = v.type == GGUF_U32 ? qtk__ld32(v.bytes) : 0;
            if (a == 0 || (a & (a - 1)))
                st = qtk__err(QTK_E_ARG, "metadata 'general.alignment' is '%.40s'; it must be u32:N with N a power of two", m->value);
            *align = a;
        }
        if (!st && !nested) st = add_kv(kvb, keys, &nk, m->key, &v);
        qtk__gguf_wvalue_free(&v);
    }
    for (size_t i = 0; i < d->n_scalars && !st; i++) {
        const qtk_ckpt_scalar *s = &d->scalars[i];
        char *key = qtk__arena_alloc(tmp, strlen(s->name) + sizeof "qtk.scalar.");
        if (!key) {
            st = qtk__err(QTK_E_NOMEM, "out of memory");
            break;
        }
        sprintf(key, "qtk.scalar.%s", s->name);
        uint8_t b[8];
        uint64_t u = 0;
        uint32_t type = GGUF_I64;
        switch (s->kind) {
        case QTK_SCALAR_INT: u = (uint64_t)s->i; break;
        case QTK_SCALAR_UINT: u = s->u, type = GGUF_U64; break;
        case QTK_SCALAR_FLOAT: memcpy(&u, &s->f, 8), type = GGUF_F64; break;
        case QTK_SCALAR_BOOL: u = s->b, type = GGUF_BOOL; break;
        }
        for (unsigned k = 0; k < 8; k++) b[k] = (uint8_t)(u >> (8 * k));
        st = add_simple(kvb, keys, &nk, key, type, b, type == GGUF_BOOL ? 1 : 8);
    }
    for (size_t i = 0; i < d->n_tensors && !st; i++) {
        const qtk_ckpt_tensor *t = &d->tensors[i];
        if (!t->has_param_id) continue;
        char *key = qtk__arena_alloc(tmp, strlen(t->name) + sizeof "qtk.param_id.");
        if (!key) {
            st = qtk__err(QTK_E_NOMEM, "out of memory");
            break;
        }
        sprintf(key, "qtk.param_id.%s", t->name);
        uint8_t b[8];
        for (unsigned k = 0; k < 8; k++) b[k] = (uint8_t)(t->param_id >> (8 * k));
        st = add_simple(kvb, keys, &nk, key, GGUF_U64, b, 8);
    }
    if (!st) {
        qsort(keys, nk, sizeof *keys, cmp_str);
        for (size_t i = 1; i < nk && !st; i++)
            if (strcmp(keys[i - 1], keys[i]) == 0)
                st = qtk__err(QTK_E_ARG, "the metadata key '%s' would be written twice (qtk writes burnpack scalars as "
                                         "qtk.scalar.NAME and parameter ids as qtk.param_id.NAME)",
                              keys[i]);
    }
    free(keys);
    *n_kv = nk;
    if (!st && kvb->oom) st = qtk__err(QTK_E_NOMEM, "out of memory for the header");
    return st;
}

static void out_info(gguf_text *h, const char *name, int rank, const size_t *shape, int type, uint64_t off) {
    out_str(h, name);
    out_u32(h, rank ? (uint32_t)rank : 1);
    if (rank == 0) out_u64(h, 1); /* a scalar is written as [1], as ggml's writer does */
    for (int d = rank - 1; d >= 0; d--) out_u64(h, shape[d]);
    out_u32(h, (uint32_t)type);
    out_u64(h, off);
}

qtk_status qtk__gguf_begin(qtk__ckpt_writer *w) {
    const qtk__desc *d = w->desc;
    gwriter *g = calloc(1, sizeof *g);
    if (g) g->t = calloc(d->n_tensors ? d->n_tensors : 1, sizeof *g->t);
    if (!g || !g->t) {
        free(g);
        return qtk__err(QTK_E_NOMEM, "out of memory");
    }
    w->priv = g;
    size_t n_infos = 0, n_kv = 0;
    bool any_quant;
    qtk_status st = plan_tensors(w, g, &n_infos, &any_quant);
    gguf_text kvb = {0}, h = {0};
    qtk__arena tmp = {0};
    if (!st && (n_infos > QTK_CKPT_MAX_TENSORS))
        st = qtk__err(QTK_E_UNSUPPORTED, "%zu tensor infos; qtk reads at most %d from one GGUF file", n_infos, QTK_CKPT_MAX_TENSORS);
    if (!st) st = build_kvs(d, any_quant, &kvb, &n_kv, &g->align, &tmp);
    if (!st && n_kv > QTK_CKPT_MAX_TENSORS)
        st = qtk__err(QTK_E_UNSUPPORTED, "%zu KV records; qtk reads at most %d from one GGUF file", n_kv, QTK_CKPT_MAX_TENSORS);
    if (!st) {
        out_bytes(&h, "GGUF", 4);
        out_u32(&h, 3);
        out_u64(&h, n_infos);
        out_u64(&h, n_kv);
        out_bytes(&h, kvb.p, kvb.n);
        uint64_t off = 0;
        char cn[GGUF_MAX_NAME + 16];
        for (size_t i = 0; i < d->n_tensors; i++) {
            const qtk_ckpt_tensor *t = &d->tensors[i];
            const wtensor *wt = &g->t[i];
            w->offsets[i] = (size_t)off;
            out_info(&h, t->name, t->rank, t->shape, wt->type, off);
            off += QTK__ALIGN_UP(wt->gbytes, g->align);
            if (wt->comp) {
                companion_name(t->name, cn, sizeof cn);
                size_t one = 1;
                out_info(&h, cn, 1, &one, 0, off);
                off += QTK__ALIGN_UP(4, g->align);
            }
        }
        w->data_end = (size_t)off;
        size_t pad = QTK__ALIGN_UP(h.n, g->align) - h.n;
        static const uint8_t zeros[64];
        while (pad && !h.oom) {
            size_t k = pad < sizeof zeros ? pad : sizeof zeros;
            out_bytes(&h, zeros, k);
            pad -= k;
        }
        st = h.oom ? qtk__err(QTK_E_NOMEM, "out of memory for the header") : qtk__afile_write(&w->file, h.p, h.n);
    }
    qtk__gguf_text_free(&kvb);
    qtk__gguf_text_free(&h);
    qtk__arena_free(&tmp);
    return st;
}

static qtk_status write_padded(qtk__ckpt_writer *w, const void *p, size_t n, uint32_t align) {
    qtk_status st = qtk__afile_write(&w->file, p, n);
    if (!st) st = qtk__afile_zeros(&w->file, QTK__ALIGN_UP(n, align) - n);
    return st;
}

qtk_status qtk__gguf_put(qtk__ckpt_writer *w, const uint8_t *bytes, size_t len) {
    gwriter *g = w->priv;
    const qtk_ckpt_tensor *t = &w->desc->tensors[w->next];
    const wtensor *wt = &g->t[w->next];
    if (!t->quantized) return write_padded(w, bytes, len, g->align); /* little-endian elements, as GGUF stores them */
    if (g->cap < wt->gbytes || !g->buf) {
        free(g->buf);
        g->buf = malloc(wt->gbytes ? wt->gbytes : 1);
        g->cap = g->buf ? wt->gbytes : 0;
        if (!g->buf) return qtk__err(QTK_E_NOMEM, "out of memory for tensor '%s' (%zu bytes)", t->name, wt->gbytes);
    }
    /* recorded scale bytes of blocks whose d underflowed (qtk:gguf_scales:NAME) */
    const char *records = NULL;
    size_t pl = strlen(QTK__META_GGUF_SCALES);
    for (size_t i = 0; i < w->desc->n_meta && !records; i++)
        if (strncmp(w->desc->meta[i].key, QTK__META_GGUF_SCALES, pl) == 0 && strcmp(w->desc->meta[i].key + pl, t->name) == 0)
            records = w->desc->meta[i].value;
    qtk_status st = qtk__gguf_export((uint32_t)wt->type, t, bytes, g->buf, records);
    if (!st) st = write_padded(w, g->buf, wt->gbytes, g->align);
    if (!st && wt->comp) {
        qtk_layout L;
        st = qtk_layout_compute(&t->scheme, t->shape, t->rank, &L);
        if (!st) st = write_padded(w, bytes + L.global_offset, 4, g->align);
    }
    return st;
}
