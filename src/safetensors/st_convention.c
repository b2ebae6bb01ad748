/* st_convention.c — qtk's convention for quantized tensors in safetensors
 * (docs/safetensors-quantized.md): a quantized tensor NAME is a U8 values tensor NAME, its
 * companions NAME.qtk_scales / .qtk_global / .qtk_table, and "qtk:scheme:NAME" /
 * "qtk:shape:NAME" in __metadata__; burnpack's parameter ids and scalars ride along as
 * "qtk:param_id:NAME" and "qtk:scalar:NAME". The container itself is safetensors.c. */
#include "safetensors/st_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

const char *const qtk__st_suffixes[QTK__ST_COMPANIONS] = {".qtk_scales", ".qtk_offsets", ".qtk_global", ".qtk_table"};

static qtk_elem scale_elem(qtk_dtype d) {
    switch (d) {
    case QTK_DTYPE_F16: return QTK_ELEM_F16;
    case QTK_DTYPE_BF16: return QTK_ELEM_BF16;
    case QTK_DTYPE_UE8M0: return QTK_ELEM_F8_E8M0;
    case QTK_DTYPE_UE4M3: return QTK_ELEM_F8_E4M3; /* E4M3FN bits with the sign clear */
    case QTK_DTYPE_U8: return QTK_ELEM_U8;         /* zero points */
    default: return QTK_ELEM_F32;
    }
}

void qtk__st_quant_pieces(const qtk_scheme *s, const qtk_layout *L, qpiece p[1 + QTK__ST_COMPANIONS]) {
    memset(p, 0, (1 + QTK__ST_COMPANIONS) * sizeof *p);
    /* values: the storage shape with its last dim in bytes (a rank-0 tensor stores one unit) */
    p[0] = (qpiece){"", QTK_ELEM_U8, L->rank > 0 ? L->rank : 1, {0}, L->value_bytes, true};
    for (int i = 0; i < p[0].rank; i++) p[0].shape[i] = L->storage_shape[i];
    p[0].shape[p[0].rank - 1] *= L->unit_bytes;
    /* scales and offsets: the block grid, or a scalar for the one per-tensor scale (store=ggml
     * has neither: they are inside its blocks) */
    p[1] = (qpiece){qtk__st_suffixes[0], scale_elem(L->scale_dtype), 0, {0}, L->scale_bytes, L->scale_bytes > 0};
    p[2] = (qpiece){qtk__st_suffixes[1], scale_elem(L->offset_dtype), 0, {0}, L->offset_bytes, L->offset_bytes > 0};
    if (s->block_rank > 0) {
        p[1].rank = p[2].rank = L->rank;
        for (int i = 0; i < L->rank; i++) p[1].shape[i] = p[2].shape[i] = L->grid[i];
    }
    p[3] = (qpiece){qtk__st_suffixes[2], QTK_ELEM_F32, 0, {0}, L->global_bytes, L->global_bytes > 0};
    p[4] = (qpiece){qtk__st_suffixes[3], QTK_ELEM_F32, 1, {L->table_entries}, L->table_bytes, L->table_bytes > 0};
}

static bool parse_dims(const char *s, size_t *shape, int *rank) {
    if (strcmp(s, "scalar") == 0) {
        *rank = 0;
        return true;
    }
    int r = 0;
    for (;;) {
        if (r == QTK_MAX_RANK || *s < '0' || *s > '9') return false;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || v > SIZE_MAX) return false;
        shape[r++] = (size_t)v;
        if (*end == '\0') break;
        if (*end != 'x') return false;
        s = end + 1;
    }
    *rank = r;
    return true;
}

const char *qtk__st_meta_get(const json_t *meta, const char *prefix, const char *name) {
    if (!meta) return NULL;
    size_t pl = strlen(prefix), nl = strlen(name);
    char stack[256], *key = pl + nl < sizeof stack ? stack : malloc(pl + nl + 1);
    if (!key) return NULL;
    memcpy(key, prefix, pl);
    memcpy(key + pl, name, nl + 1);
    const json_t *v = json_object_get(meta, key);
    if (key != stack) free(key);
    return v ? json_string_value(v) : NULL;
}

/* The value of "table=" in a spec, the hint for naming the table found in the file. */
static void table_hint(const char *spec, char *out, size_t cap) {
    out[0] = '\0';
    const char *p = strstr(spec, "table=");
    if (!p) return;
    p += 6;
    size_t n = strcspn(p, ",");
    if (n >= cap) n = cap - 1;
    memcpy(out, p, n);
    out[n] = '\0';
}

/* Folds a qtk-convention quantized tensor (values entry v) and its companions into one
 * quantized tensor of the description. */
qtk_status qtk__st_add_quantized(qtk_ckpt *c, const st_index *ix, st_entry *v, const char *spec, const json_t *meta,
                                size_t data_start) {
    const char *nm = v->name;
    const char *shape_s = qtk__st_meta_get(meta, QTK__META_SHAPE, nm);
    if (!shape_s) return qtk__err(QTK_E_FORMAT, "metadata has '" QTK__META_SCHEME "%s' but no '" QTK__META_SHAPE "%s'", nm, nm);
    size_t shape[QTK_MAX_RANK];
    int rank;
    if (!parse_dims(shape_s, shape, &rank))
        return qtk__err(QTK_E_FORMAT, "metadata '" QTK__META_SHAPE "%s' is '%.40s', not D0xD1x... or 'scalar'", nm, shape_s);
    /* A lookup scheme's table is named after its entries in the file (the spec's name is a
     * hint): a reader may not have the writer's table registered. */
    char hint[QTK_TABLE_NAME_MAX], fixed[512];
    table_hint(spec, hint, sizeof hint);
    st_entry *tab = qtk__st_find(ix, nm, qtk__st_suffixes[3]);
    if (hint[0] && tab && tab->elem == QTK_ELEM_F32 && tab->rank == 1 &&
        (tab->numel == 4 || tab->numel == 16 || tab->numel == 256)) {
        qtk_scheme tmp;
        qtk_status st = qtk__ckpt_resolve_table(c, &tmp, c->map.data + data_start + tab->begin, tab->numel, hint);
        if (st) return qtk__err_context(st, "tensor '%s': table", nm);
        const char *p = strstr(spec, "table=");
        int k = snprintf(fixed, sizeof fixed, "%.*stable=%s%s", (int)(p - spec), spec, tmp.table, p + 6 + strcspn(p + 6, ","));
        if (k < 0 || (size_t)k >= sizeof fixed) return qtk__err(QTK_E_FORMAT, "metadata '" QTK__META_SCHEME "%s' is too long", nm);
        spec = fixed;
    }
    qtk_scheme s;
    qtk_status st = qtk_scheme_parse(spec, &s);
    if (st) return qtk__err_context(st, "metadata '" QTK__META_SCHEME "%s'", nm);
    qtk_layout L;
    st = qtk_layout_compute(&s, shape, rank, &L);
    if (st) return qtk__err_context(st, "tensor '%s'", nm);
    qpiece want[1 + QTK__ST_COMPANIONS];
    qtk__st_quant_pieces(&s, &L, want);
    qtk__ckpt_loc loc = {.n = 0};
    char sb[256], sb2[256], sb3[256];
    for (int k = 0; k < 1 + QTK__ST_COMPANIONS; k++) {
        st_entry *p = k == 0 ? v : qtk__st_find(ix, nm, want[k].suffix);
        if (!want[k].present) {
            if (p) return qtk__err(QTK_E_FORMAT, "tensor '%s%s' exists but scheme '%s' has no such part", nm, want[k].suffix, spec);
            continue;
        }
        if (!p) return qtk__err(QTK_E_FORMAT, "quantized tensor '%s' (scheme '%s') lacks its companion '%s%s'", nm, spec, nm, want[k].suffix);
        bool same_shape = p->rank == want[k].rank;
        for (int i = 0; same_shape && i < p->rank; i++) same_shape = p->shape[i] == want[k].shape[i];
        if (p->elem != want[k].elem || !same_shape)
            return qtk__err(QTK_E_FORMAT, "tensor '%s%s' is %s %s; scheme '%s' on shape %s needs %s %s", nm, want[k].suffix,
                            qtk_elem_name(p->elem), qtk_shape_format(p->shape, p->rank, sb, sizeof sb), spec,
                            qtk_shape_format(shape, rank, sb2, sizeof sb2), qtk_elem_name(want[k].elem),
                            qtk_shape_format(want[k].shape, want[k].rank, sb3, sizeof sb3));
        p->consumed = 1;
        size_t off = data_start + p->begin, len = p->end - p->begin;
        /* Pieces that follow each other in the file merge into one range (no copy on load). */
        if (loc.n && loc.piece[loc.n - 1].off + loc.piece[loc.n - 1].len == off) loc.piece[loc.n - 1].len += len;
        else loc.piece[loc.n++] = (qtk__ckpt_piece){off, len};
    }
    qtk_ckpt_tensor *t;
    st = qtk__desc_add_quantized(&c->desc, nm, &s, shape, rank, &t);
    if (!st) st = qtk__ckpt_add_loc(c, &loc);
    return st;
}

static qtk_status parse_scalar(const char *name, const char *v, qtk_ckpt_scalar *s) {
    memset(s, 0, sizeof *s);
    s->name = name;
    char *end;
    errno = 0;
    if (strncmp(v, "Int:", 4) == 0) {
        s->kind = QTK_SCALAR_INT;
        long long x = strtoll(v + 4, &end, 10);
        s->i = x;
        if (!errno && !*end && end != v + 4) return QTK_OK;
    } else if (strncmp(v, "UInt:", 5) == 0) {
        s->kind = QTK_SCALAR_UINT;
        s->u = strtoull(v + 5, &end, 10);
        if (!errno && !*end && end != v + 5 && v[5] != '-') return QTK_OK;
    } else if (strncmp(v, "Float:", 6) == 0) {
        s->kind = QTK_SCALAR_FLOAT;
        s->f = strtod(v + 6, &end);
        if (!*end && end != v + 6) return QTK_OK;
    } else if (strcmp(v, "Bool:true") == 0 || strcmp(v, "Bool:false") == 0) {
        s->kind = QTK_SCALAR_BOOL;
        s->b = v[5] == 't';
        return QTK_OK;
    }
    return qtk__err(QTK_E_FORMAT, "metadata '" QTK__META_SCALAR "%s' is '%.40s', not Int:N, UInt:N, Float:X or Bool:true|false",
                    name, v);
}

/* The __metadata__ pairs: qtk's own keys drive the tensors; the others are the file's. */
qtk_status qtk__st_read_metadata(qtk_ckpt *c, json_t *meta, const st_index *ix) {
    if (!meta) return QTK_OK;
    for (void *it = json_object_iter(meta); it; it = json_object_iter_next(meta, it)) {
        const char *k = json_object_iter_key(it);
        const json_t *v = json_object_iter_value(it);
        if (strlen(k) != json_object_iter_key_len(it)) return qtk__err(QTK_E_FORMAT, "a metadata key holds a NUL character");
        if (!json_is_string(v)) return qtk__err(QTK_E_FORMAT, "metadata '%s' is not a string (safetensors metadata maps strings to strings)", k);
        const char *sv = json_string_value(v);
        if (strlen(sv) != json_string_length(v)) return qtk__err(QTK_E_FORMAT, "metadata '%s' holds a NUL character", k);
        if (strcmp(k, QTK__META_CONVENTION) == 0) {
            if (strcmp(sv, QTK__CONVENTION_VERSION) != 0)
                return qtk__err(QTK_E_UNSUPPORTED, "qtk convention version '%.20s'; this qtk reads version " QTK__CONVENTION_VERSION, sv);
        } else if (strcmp(k, QTK__META_LAYOUT) == 0) {
            if (strcmp(sv, "none") != 0)
                return qtk__err(QTK_E_FORMAT, "metadata '" QTK__META_LAYOUT "' is '%.40s'; qtk writes only \"none\"", sv);
            c->desc.stored_as_is = true;
        } else if (strncmp(k, QTK__META_SCHEME, strlen(QTK__META_SCHEME)) == 0) {
            const char *nm = k + strlen(QTK__META_SCHEME);
            if (!qtk__st_find(ix, nm, "")) return qtk__err(QTK_E_FORMAT, "metadata '%s' names no tensor", k);
            /* folded in build(), in data order */
        } else if (strncmp(k, QTK__META_SHAPE, strlen(QTK__META_SHAPE)) == 0) {
            if (!qtk__st_meta_get(meta, QTK__META_SCHEME, k + strlen(QTK__META_SHAPE)))
                return qtk__err(QTK_E_FORMAT, "metadata '%s' has no matching '" QTK__META_SCHEME "%s'", k, k + strlen(QTK__META_SHAPE));
        } else if (strncmp(k, QTK__META_PARAM, strlen(QTK__META_PARAM)) == 0) {
            /* applied once the tensors exist */
        } else if (strncmp(k, QTK__META_SCALAR, strlen(QTK__META_SCALAR)) == 0) {
            qtk_ckpt_scalar s;
            qtk_status st = parse_scalar(k + strlen(QTK__META_SCALAR), sv, &s);
            if (!st) st = qtk__desc_add_scalar(&c->desc, &s);
            if (st) return st;
        } else {
            qtk_status st = qtk__desc_add_meta(&c->desc, k, sv);
            if (st) return st;
        }
    }
    return QTK_OK;
}

/* Burn parameter ids: each tensor looks its key up (a hash lookup); keys that name no tensor
 * are found by counting. */
qtk_status qtk__st_apply_param_ids(qtk_ckpt *c, json_t *meta) {
    if (!meta) return QTK_OK;
    size_t pl = strlen(QTK__META_PARAM), keys = 0, used = 0;
    for (void *it = json_object_iter(meta); it; it = json_object_iter_next(meta, it))
        keys += strncmp(json_object_iter_key(it), QTK__META_PARAM, pl) == 0;
    for (size_t i = 0; i < c->desc.n_tensors && used < keys; i++) {
        qtk_ckpt_tensor *t = &c->desc.tensors[i];
        const char *sv = qtk__st_meta_get(meta, QTK__META_PARAM, t->name);
        if (!sv) continue;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(sv, &end, 10);
        if (errno || *end || end == sv || sv[0] == '-')
            return qtk__err(QTK_E_FORMAT, "metadata '" QTK__META_PARAM "%s' is '%.40s', not an unsigned 64-bit number", t->name, sv);
        t->has_param_id = true;
        t->param_id = v;
        used++;
    }
    if (used == keys) return QTK_OK;
    for (void *it = json_object_iter(meta); it; it = json_object_iter_next(meta, it)) {
        const char *k = json_object_iter_key(it);
        if (strncmp(k, QTK__META_PARAM, pl) != 0) continue;
        bool found = false;
        for (size_t i = 0; i < c->desc.n_tensors && !found; i++) found = strcmp(c->desc.tensors[i].name, k + pl) == 0;
        if (!found) return qtk__err(QTK_E_FORMAT, "metadata '%s' names no tensor", k);
    }
    return QTK_OK;
}

static qtk_status set_meta(json_t *meta, const char *prefix, const char *name, const char *value) {
    size_t pl = strlen(prefix), nl = strlen(name);
    char *key = malloc(pl + nl + 1);
    if (!key) return qtk__err(QTK_E_NOMEM, "out of memory");
    memcpy(key, prefix, pl);
    memcpy(key + pl, name, nl + 1);
    qtk_status st = QTK_OK;
    if (json_object_get(meta, key)) st = qtk__err(QTK_E_ARG, "metadata key '%s' is given twice (or is one qtk writes itself)", key);
    else if (json_object_set_new(meta, key, json_string(value)) != 0)
        st = qtk__err(QTK_E_ARG, "metadata '%s' cannot be written as JSON (not UTF-8?)", key);
    free(key);
    return st;
}

/* Whether a metadata key is one of the convention's own (the reader takes those as its
 * instructions, never as a caller's metadata) */
static bool reserved_key(const char *k) {
    static const char *const prefixes[] = {QTK__META_SCHEME, QTK__META_SHAPE, QTK__META_PARAM, QTK__META_SCALAR};
    if (strcmp(k, QTK__META_CONVENTION) == 0 || strcmp(k, QTK__META_LAYOUT) == 0) return true;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(k, prefixes[i], strlen(prefixes[i])) == 0) return true;
    return false;
}

qtk_status qtk__st_build_meta(const qtk__desc *d, json_t *meta) {
    qtk_status st = QTK_OK;
    for (size_t i = 0; i < d->n_meta && !st; i++) {
        if (reserved_key(d->meta[i].key))
            return qtk__err(QTK_E_ARG,
                            "metadata key '%s' is one qtk's safetensors convention writes itself "
                            "(docs/safetensors-quantized.md); a file carrying it would not read back",
                            d->meta[i].key);
        st = set_meta(meta, "", d->meta[i].key, d->meta[i].value);
    }
    bool any_q = false;
    for (size_t i = 0; i < d->n_tensors; i++) any_q |= d->tensors[i].quantized;
    if (any_q && !st) st = set_meta(meta, QTK__META_CONVENTION, "", QTK__CONVENTION_VERSION);
    if (d->stored_as_is && !st) st = set_meta(meta, QTK__META_LAYOUT, "", "none");
    char buf[512];
    for (size_t i = 0; i < d->n_tensors && !st; i++) {
        const qtk_ckpt_tensor *t = &d->tensors[i];
        if (t->quantized) {
            st = qtk_scheme_format(&t->scheme, buf, sizeof buf, NULL);
            if (!st) st = set_meta(meta, QTK__META_SCHEME, t->name, buf);
            if (!st) st = set_meta(meta, QTK__META_SHAPE, t->name, qtk_shape_format(t->shape, t->rank, buf, sizeof buf));
        }
        if (!st && t->has_param_id) {
            snprintf(buf, sizeof buf, "%llu", (unsigned long long)t->param_id);
            st = set_meta(meta, QTK__META_PARAM, t->name, buf);
        }
    }
    for (size_t i = 0; i < d->n_scalars && !st; i++) {
        const qtk_ckpt_scalar *s = &d->scalars[i];
        switch (s->kind) {
        case QTK_SCALAR_INT: snprintf(buf, sizeof buf, "Int:%lld", (long long)s->i); break;
        case QTK_SCALAR_UINT: snprintf(buf, sizeof buf, "UInt:%llu", (unsigned long long)s->u); break;
        case QTK_SCALAR_FLOAT: snprintf(buf, sizeof buf, "Float:%.17g", s->f); break; /* round-trips exactly */
        case QTK_SCALAR_BOOL: snprintf(buf, sizeof buf, "Bool:%s", s->b ? "true" : "false"); break;
        }
        st = set_meta(meta, QTK__META_SCALAR, s->name, buf);
    }
    return st;
}

