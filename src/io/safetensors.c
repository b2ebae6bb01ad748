/* safetensors.c — the .safetensors container (formats/HUB_LAYOUTS.md §1): an 8-byte header
 * length, a JSON header, then the tensors back to back. The header is read with jansson
 * (duplicate keys rejected) and validated as the safetensors project does (§1.5): header
 * size limit, offsets contiguous from 0 and in bounds, byte sizes matching dtype and shape,
 * the data ending exactly at the end of the file.
 *
 * Quantized tensors use the qtk convention of docs/safetensors-quantized.md: a U8 tensor
 * holding the packed values under the tensor's own name, companion tensors NAME.qtk_scales,
 * NAME.qtk_global and NAME.qtk_table with their natural dtypes, and the scheme and logical
 * shape in __metadata__ ("qtk:scheme:NAME", "qtk:shape:NAME"). The writer puts the pieces
 * back to back in Burn's payload order, so the payload is one contiguous range. */
#include "io/ckpt_internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#define ST_MAX_HEADER 100000000ull /* safetensors' MAX_HEADER_SIZE */
#define ST_MAX_RANK 64

#define QTK_META_PREFIX "qtk:"
#define QTK_META_CONVENTION "qtk:convention"
#define QTK_META_SCHEME "qtk:scheme:"
#define QTK_META_SHAPE "qtk:shape:"
#define QTK_META_PARAM "qtk:param_id:"
#define QTK_META_SCALAR "qtk:scalar:"
#define QTK_CONVENTION_VERSION "1"

static const char *const suffixes[3] = {".qtk_scales", ".qtk_global", ".qtk_table"};

/* dtype strings of the safetensors crate and the element each names */
static const struct {
    const char *name;
    qtk_elem e;
} st_dtypes[] = {
    {"BOOL", QTK_ELEM_BOOL},       {"F4", QTK_ELEM_F4},           {"F6_E2M3", QTK_ELEM_F6_E2M3},
    {"F6_E3M2", QTK_ELEM_F6_E3M2}, {"U8", QTK_ELEM_U8},           {"I8", QTK_ELEM_I8},
    {"F8_E5M2", QTK_ELEM_F8_E5M2}, {"F8_E4M3", QTK_ELEM_F8_E4M3}, {"F8_E8M0", QTK_ELEM_F8_E8M0},
    {"F8_E4M3FNUZ", QTK_ELEM_F8_E4M3FNUZ}, {"F8_E5M2FNUZ", QTK_ELEM_F8_E5M2FNUZ},
    {"I16", QTK_ELEM_I16},         {"U16", QTK_ELEM_U16},         {"F16", QTK_ELEM_F16},
    {"BF16", QTK_ELEM_BF16},       {"I32", QTK_ELEM_I32},         {"U32", QTK_ELEM_U32},
    {"F32", QTK_ELEM_F32},         {"C64", QTK_ELEM_C64},         {"F64", QTK_ELEM_F64},
    {"I64", QTK_ELEM_I64},         {"U64", QTK_ELEM_U64},
};

/* The dtype string an element is written as. Burn-only elements take the name Burn's own
 * safetensors store gives them (BURNPACK.md §4): Flex32 -> F32, Bool(U8) -> U8,
 * Bool(U32) -> U32. */
static const char *st_name(qtk_elem e) {
    if (e == QTK_ELEM_FLEX32) e = QTK_ELEM_F32;
    if (e == QTK_ELEM_BOOL_U8) e = QTK_ELEM_U8;
    if (e == QTK_ELEM_BOOL_U32) e = QTK_ELEM_U32;
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (st_dtypes[i].e == e) return st_dtypes[i].name;
    return NULL;
}

static qtk_elem scale_elem(qtk_dtype d) {
    switch (d) {
    case QTK_DTYPE_F16: return QTK_ELEM_F16;
    case QTK_DTYPE_BF16: return QTK_ELEM_BF16;
    case QTK_DTYPE_UE8M0: return QTK_ELEM_F8_E8M0;
    case QTK_DTYPE_UE4M3: return QTK_ELEM_F8_E4M3; /* E4M3FN bits with the sign clear */
    default: return QTK_ELEM_F32;
    }
}

static bool st_sniff(const uint8_t *b, size_t len) {
    if (len < 10) return false;
    uint64_t n = (uint64_t)qtk__ld32(b) | ((uint64_t)qtk__ld32(b + 4) << 32);
    return n >= 2 && n <= len - 8 && strchr("{ \t\r\n", b[8]) != NULL && b[8] != '\0';
}

/* ---- the pieces of a quantized tensor ---- */

/* The four safetensors tensors one quantized tensor becomes: values, scales, global, table
 * (the last two may be absent: len 0 and no name). */
typedef struct {
    const char *suffix; /* "" for the values */
    qtk_elem elem;
    int rank;
    size_t shape[QTK_MAX_RANK];
    size_t bytes;
    bool present;
} qpiece;

static void quant_pieces(const qtk_scheme *s, const qtk_layout *L, qpiece p[4]) {
    memset(p, 0, 4 * sizeof *p);
    /* values: the storage shape with its last dim in bytes (a rank-0 tensor stores one unit) */
    p[0] = (qpiece){"", QTK_ELEM_U8, L->rank > 0 ? L->rank : 1, {0}, L->value_bytes, true};
    for (int i = 0; i < p[0].rank; i++) p[0].shape[i] = L->storage_shape[i];
    p[0].shape[p[0].rank - 1] *= L->unit_bytes;
    /* scales: the block grid, or a scalar for the one per-tensor scale */
    p[1] = (qpiece){suffixes[0], scale_elem(L->scale_dtype), 0, {0}, L->scale_bytes, true};
    if (s->block_rank > 0) {
        p[1].rank = L->rank;
        for (int i = 0; i < L->rank; i++) p[1].shape[i] = L->grid[i];
    }
    p[2] = (qpiece){suffixes[1], QTK_ELEM_F32, 0, {0}, L->global_bytes, L->global_bytes > 0};
    p[3] = (qpiece){suffixes[2], QTK_ELEM_F32, 1, {L->table_entries}, L->table_bytes, L->table_bytes > 0};
}

/* ---- reading ---- */

typedef struct {
    const char *name;
    size_t name_len;
    qtk_elem elem;
    int rank;
    size_t *shape;
    size_t numel;
    size_t begin, end;
    size_t order;  /* position in the header */
    int consumed;  /* 1: a companion folded into a quantized tensor */
} st_entry;

static int cmp_entry(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static bool json_uint(const json_t *v, size_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
    *out = (size_t)json_integer_value(v);
    return (json_int_t)*out == json_integer_value(v);
}

static qtk_status parse_entry(const char *name, size_t name_len, const json_t *v, qtk_arena *a, st_entry *e) {
    memset(e, 0, sizeof *e);
    e->name = name;
    e->name_len = name_len;
    if (strlen(name) != name_len) return qtk__err(QTK_E_FORMAT, "a tensor name holds a NUL character");
    if (!json_is_object(v)) return qtk__err(QTK_E_FORMAT, "tensor '%s': its entry is not a JSON object", name);
    const json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"), *off = json_object_get(v, "data_offsets");
    if (!dt || !sh || !off)
        return qtk__err(QTK_E_FORMAT, "tensor '%s': the entry lacks '%s'", name, !dt ? "dtype" : !sh ? "shape" : "data_offsets");
    if (!json_is_string(dt)) return qtk__err(QTK_E_FORMAT, "tensor '%s': 'dtype' is not a string", name);
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0] && !e->elem; i++)
        if (strcmp(json_string_value(dt), st_dtypes[i].name) == 0) e->elem = st_dtypes[i].e;
    if (!e->elem) return qtk__err(QTK_E_FORMAT, "tensor '%s': unknown dtype '%.40s'", name, json_string_value(dt));
    if (!json_is_array(sh)) return qtk__err(QTK_E_FORMAT, "tensor '%s': 'shape' is not an array", name);
    size_t rank = json_array_size(sh);
    if (rank > ST_MAX_RANK)
        return qtk__err(QTK_E_UNSUPPORTED, "tensor '%s': rank %zu; qtk reads ranks up to %d", name, rank, ST_MAX_RANK);
    e->rank = (int)rank;
    e->shape = qtk_arena_alloc(a, (rank ? rank : 1) * sizeof(size_t));
    if (!e->shape) return qtk__err(QTK_E_NOMEM, "out of memory");
    e->numel = 1;
    for (size_t i = 0; i < rank; i++) {
        if (!json_uint(json_array_get(sh, i), &e->shape[i]))
            return qtk__err(QTK_E_FORMAT, "tensor '%s': shape[%zu] is not a non-negative integer", name, i);
        if (!qtk__mul_ok(e->numel, e->shape[i], &e->numel))
            return qtk__err(QTK_E_SHAPE, "tensor '%s': the element count overflows", name);
    }
    if (!json_is_array(off) || json_array_size(off) != 2 || !json_uint(json_array_get(off, 0), &e->begin) ||
        !json_uint(json_array_get(off, 1), &e->end))
        return qtk__err(QTK_E_FORMAT, "tensor '%s': 'data_offsets' is not [begin, end] of non-negative integers", name);
    return QTK_OK;
}

/* Validation of HUB_LAYOUTS.md §1.5 steps 6-7 on entries sorted by offset. */
static qtk_status check_layout(const st_entry *e, size_t n, size_t data_len) {
    size_t at = 0;
    char sb[256];
    for (size_t i = 0; i < n; i++) {
        if (e[i].begin != at || e[i].end < e[i].begin)
            return qtk__err(QTK_E_FORMAT,
                            "tensor '%s': data_offsets [%zu, %zu) do not continue where the previous tensor ends (%zu); "
                            "safetensors data is contiguous from 0 with no gaps or overlaps",
                            e[i].name, e[i].begin, e[i].end, at);
        size_t bytes;
        qtk_status st = qtk_elem_bytes(e[i].elem, e[i].numel, &bytes);
        if (st) return qtk__err_context(st, "tensor '%s'", e[i].name);
        if (e[i].end - e[i].begin != bytes)
            return qtk__err(QTK_E_LENGTH, "tensor '%s' (%s, shape %s) takes %zu bytes; its data_offsets [%zu, %zu) give %zu",
                            e[i].name, qtk_elem_name(e[i].elem), qtk__ckpt_shape_str(e[i].shape, e[i].rank, sb, sizeof sb),
                            bytes, e[i].begin, e[i].end, e[i].end - e[i].begin);
        at = e[i].end;
    }
    if (at != data_len)
        return qtk__err(QTK_E_FORMAT, "the tensors end at data byte %zu but the data section holds %zu bytes (%s)", at,
                        data_len, at < data_len ? "trailing bytes" : "truncated");
    return QTK_OK;
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

static const char *meta_get(const json_t *meta, const char *prefix, const char *name) {
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

/* Entries by name, for lookups that stay fast with 100 000 tensors. */
typedef struct {
    st_entry **by_name;
    size_t n;
} st_index;

static int cmp_bytes(const char *a, size_t na, const char *b, size_t nb) {
    int c = memcmp(a, b, na < nb ? na : nb);
    return c ? c : (na > nb) - (na < nb);
}
static int cmp_by_name(const void *a, const void *b) {
    const st_entry *x = *(st_entry *const *)a, *y = *(st_entry *const *)b;
    return cmp_bytes(x->name, x->name_len, y->name, y->name_len);
}

/* The entry named name + suffix, or NULL. */
static st_entry *find_entry(const st_index *ix, const char *name, const char *suffix) {
    size_t nl = strlen(name), sl = strlen(suffix), lo = 0, hi = ix->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const st_entry *m = ix->by_name[mid];
        /* compare m->name with the concatenation name + suffix without building it */
        size_t k = m->name_len < nl ? m->name_len : nl;
        int c = memcmp(m->name, name, k);
        if (!c) {
            if (m->name_len < nl) c = -1;
            else c = cmp_bytes(m->name + nl, m->name_len - nl, suffix, sl);
        }
        if (c == 0) return ix->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
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
static qtk_status add_quantized(qtk_ckpt *c, const st_index *ix, st_entry *v, const char *spec, const json_t *meta,
                                size_t data_start) {
    const char *nm = v->name;
    const char *shape_s = meta_get(meta, QTK_META_SHAPE, nm);
    if (!shape_s) return qtk__err(QTK_E_FORMAT, "metadata has '" QTK_META_SCHEME "%s' but no '" QTK_META_SHAPE "%s'", nm, nm);
    size_t shape[QTK_MAX_RANK];
    int rank;
    if (!parse_dims(shape_s, shape, &rank))
        return qtk__err(QTK_E_FORMAT, "metadata '" QTK_META_SHAPE "%s' is '%.40s', not D0xD1x... or 'scalar'", nm, shape_s);
    /* A lookup scheme's table is named after its entries in the file (the spec's name is a
     * hint): a reader may not have the writer's table registered. */
    char hint[QTK_TABLE_NAME_MAX], fixed[512];
    table_hint(spec, hint, sizeof hint);
    st_entry *tab = find_entry(ix, nm, suffixes[2]);
    if (hint[0] && tab && tab->elem == QTK_ELEM_F32 && tab->rank == 1 &&
        (tab->numel == 4 || tab->numel == 16 || tab->numel == 256)) {
        qtk_scheme tmp;
        qtk_status st = qtk__ckpt_resolve_table(&tmp, c->map.data + data_start + tab->begin, tab->numel, hint);
        if (st) return qtk__err_context(st, "tensor '%s': table", nm);
        const char *p = strstr(spec, "table=");
        int k = snprintf(fixed, sizeof fixed, "%.*stable=%s%s", (int)(p - spec), spec, tmp.table, p + 6 + strcspn(p + 6, ","));
        if (k < 0 || (size_t)k >= sizeof fixed) return qtk__err(QTK_E_FORMAT, "metadata '" QTK_META_SCHEME "%s' is too long", nm);
        spec = fixed;
    }
    qtk_scheme s;
    qtk_status st = qtk_scheme_parse(spec, &s);
    if (st) return qtk__err_context(st, "metadata '" QTK_META_SCHEME "%s'", nm);
    qtk_layout L;
    st = qtk_layout_compute(&s, shape, rank, &L);
    if (st) return qtk__err_context(st, "tensor '%s'", nm);
    qpiece want[4];
    quant_pieces(&s, &L, want);
    qtk__ckpt_loc loc = {.n = 0};
    char sb[256], sb2[256], sb3[256];
    for (int k = 0; k < 4; k++) {
        st_entry *p = k == 0 ? v : find_entry(ix, nm, want[k].suffix);
        if (!want[k].present) {
            if (p) return qtk__err(QTK_E_FORMAT, "tensor '%s%s' exists but scheme '%s' has no such part", nm, want[k].suffix, spec);
            continue;
        }
        if (!p) return qtk__err(QTK_E_FORMAT, "quantized tensor '%s' (scheme '%s') lacks its companion '%s%s'", nm, spec, nm, want[k].suffix);
        bool same_shape = p->rank == want[k].rank;
        for (int i = 0; same_shape && i < p->rank; i++) same_shape = p->shape[i] == want[k].shape[i];
        if (p->elem != want[k].elem || !same_shape)
            return qtk__err(QTK_E_FORMAT, "tensor '%s%s' is %s %s; scheme '%s' on shape %s needs %s %s", nm, want[k].suffix,
                            qtk_elem_name(p->elem), qtk__ckpt_shape_str(p->shape, p->rank, sb, sizeof sb), spec,
                            qtk__ckpt_shape_str(shape, rank, sb2, sizeof sb2), qtk_elem_name(want[k].elem),
                            qtk__ckpt_shape_str(want[k].shape, want[k].rank, sb3, sizeof sb3));
        p->consumed = 1;
        size_t off = data_start + p->begin, len = p->end - p->begin;
        /* Pieces that follow each other in the file merge into one range (no copy on load). */
        if (loc.n && loc.piece[loc.n - 1].off + loc.piece[loc.n - 1].len == off) loc.piece[loc.n - 1].len += len;
        else loc.piece[loc.n++] = (qtk__ckpt_piece){off, len};
    }
    qtk_ckpt_tensor *t;
    st = qtk_ckpt_desc_add_quantized(&c->desc, nm, &s, shape, rank, &t);
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
    return qtk__err(QTK_E_FORMAT, "metadata '" QTK_META_SCALAR "%s' is '%.40s', not Int:N, UInt:N, Float:X or Bool:true|false",
                    name, v);
}

/* The __metadata__ pairs: qtk's own keys drive the tensors; the others are the file's. */
static qtk_status read_metadata(qtk_ckpt *c, json_t *meta, const st_index *ix) {
    if (!meta) return QTK_OK;
    for (void *it = json_object_iter(meta); it; it = json_object_iter_next(meta, it)) {
        const char *k = json_object_iter_key(it);
        const json_t *v = json_object_iter_value(it);
        if (strlen(k) != json_object_iter_key_len(it)) return qtk__err(QTK_E_FORMAT, "a metadata key holds a NUL character");
        if (!json_is_string(v)) return qtk__err(QTK_E_FORMAT, "metadata '%s' is not a string (safetensors metadata maps strings to strings)", k);
        const char *sv = json_string_value(v);
        if (strlen(sv) != json_string_length(v)) return qtk__err(QTK_E_FORMAT, "metadata '%s' holds a NUL character", k);
        if (strcmp(k, QTK_META_CONVENTION) == 0) {
            if (strcmp(sv, QTK_CONVENTION_VERSION) != 0)
                return qtk__err(QTK_E_UNSUPPORTED, "qtk convention version '%.20s'; this qtk reads version " QTK_CONVENTION_VERSION, sv);
        } else if (strncmp(k, QTK_META_SCHEME, strlen(QTK_META_SCHEME)) == 0) {
            const char *nm = k + strlen(QTK_META_SCHEME);
            if (!find_entry(ix, nm, "")) return qtk__err(QTK_E_FORMAT, "metadata '%s' names no tensor", k);
            /* folded in build(), in data order */
        } else if (strncmp(k, QTK_META_SHAPE, strlen(QTK_META_SHAPE)) == 0) {
            if (!meta_get(meta, QTK_META_SCHEME, k + strlen(QTK_META_SHAPE)))
                return qtk__err(QTK_E_FORMAT, "metadata '%s' has no matching '" QTK_META_SCHEME "%s'", k, k + strlen(QTK_META_SHAPE));
        } else if (strncmp(k, QTK_META_PARAM, strlen(QTK_META_PARAM)) == 0) {
            /* applied once the tensors exist */
        } else if (strncmp(k, QTK_META_SCALAR, strlen(QTK_META_SCALAR)) == 0) {
            qtk_ckpt_scalar s;
            qtk_status st = parse_scalar(k + strlen(QTK_META_SCALAR), sv, &s);
            if (!st) st = qtk_ckpt_desc_add_scalar(&c->desc, &s);
            if (st) return st;
        } else {
            qtk_status st = qtk_ckpt_desc_add_meta(&c->desc, k, sv);
            if (st) return st;
        }
    }
    return QTK_OK;
}

/* Burn parameter ids: each tensor looks its key up (a hash lookup); keys that name no tensor
 * are found by counting. */
static qtk_status apply_param_ids(qtk_ckpt *c, json_t *meta) {
    if (!meta) return QTK_OK;
    size_t pl = strlen(QTK_META_PARAM), keys = 0, used = 0;
    for (void *it = json_object_iter(meta); it; it = json_object_iter_next(meta, it))
        keys += strncmp(json_object_iter_key(it), QTK_META_PARAM, pl) == 0;
    for (size_t i = 0; i < c->desc.n_tensors && used < keys; i++) {
        qtk_ckpt_tensor *t = &c->desc.tensors[i];
        const char *sv = meta_get(meta, QTK_META_PARAM, t->name);
        if (!sv) continue;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(sv, &end, 10);
        if (errno || *end || end == sv || sv[0] == '-')
            return qtk__err(QTK_E_FORMAT, "metadata '" QTK_META_PARAM "%s' is '%.40s', not an unsigned 64-bit number", t->name, sv);
        t->has_param_id = true;
        t->param_id = v;
        used++;
    }
    if (used == keys) return QTK_OK;
    for (void *it = json_object_iter(meta); it; it = json_object_iter_next(meta, it)) {
        const char *k = json_object_iter_key(it);
        if (strncmp(k, QTK_META_PARAM, pl) != 0) continue;
        bool found = false;
        for (size_t i = 0; i < c->desc.n_tensors && !found; i++) found = strcmp(c->desc.tensors[i].name, k + pl) == 0;
        if (!found) return qtk__err(QTK_E_FORMAT, "metadata '%s' names no tensor", k);
    }
    return QTK_OK;
}

static qtk_status build(qtk_ckpt *c, json_t *root, size_t hlen, qtk_arena *tmp) {
    size_t data_start = 8 + hlen, data_len = c->map.len - data_start;
    json_t *meta = NULL;
    size_t n = 0, cap = json_object_size(root);
    st_entry *e = malloc((cap ? cap : 1) * sizeof *e);
    if (!e) return qtk__err(QTK_E_NOMEM, "out of memory");
    qtk_status st = QTK_OK;
    for (void *it = json_object_iter(root); it && !st;
         it = json_object_iter_next(root, it)) {
        const char *k = json_object_iter_key(it);
        json_t *v = json_object_iter_value(it);
        if (strcmp(k, "__metadata__") == 0) {
            if (json_is_null(v)) continue;
            if (!json_is_object(v)) st = qtk__err(QTK_E_FORMAT, "'__metadata__' is not an object of strings");
            meta = v;
            continue;
        }
        st = parse_entry(k, json_object_iter_key_len(it), v, tmp, &e[n]);
        e[n].order = n;
        n++;
    }
    if (!st) {
        qsort(e, n, sizeof *e, cmp_entry);
        st = check_layout(e, n, data_len);
    }
    st_index ix = {malloc((n ? n : 1) * sizeof *ix.by_name), n};
    if (!st && !ix.by_name) st = qtk__err(QTK_E_NOMEM, "out of memory");
    if (!st) {
        for (size_t i = 0; i < n; i++) ix.by_name[i] = &e[i];
        qsort(ix.by_name, n, sizeof *ix.by_name, cmp_by_name);
    }
    if (!st) st = read_metadata(c, meta, &ix);
    /* Companions are set aside first, so that their position in the data does not matter;
     * then tensors go in data order, a quantized one in the place of its values. */
    for (size_t i = 0; i < n && !st; i++)
        if (meta_get(meta, QTK_META_SCHEME, e[i].name))
            for (int k = 0; k < 3; k++) {
                st_entry *p = find_entry(&ix, e[i].name, suffixes[k]);
                if (p) p->consumed = 1;
            }
    for (size_t i = 0; i < n && !st; i++) {
        if (e[i].consumed) continue;
        const char *spec = meta_get(meta, QTK_META_SCHEME, e[i].name);
        if (spec) {
            st = add_quantized(c, &ix, &e[i], spec, meta, data_start);
            continue;
        }
        st = qtk_ckpt_desc_add_raw(&c->desc, e[i].name, e[i].elem, e[i].shape, e[i].rank, NULL);
        qtk__ckpt_loc loc = {.piece = {{data_start + e[i].begin, e[i].end - e[i].begin}}, .n = 1};
        if (!st) st = qtk__ckpt_add_loc(c, &loc);
    }
    free(ix.by_name);
    if (!st) st = apply_param_ids(c, meta);
    free(e);
    return st;
}

static qtk_status st_parse(qtk_ckpt *c) {
    const uint8_t *b = c->map.data;
    size_t len = c->map.len;
    if (len < 8) return qtk__err(QTK_E_FORMAT, "the file is %zu bytes; safetensors starts with an 8-byte header length", len);
    uint64_t hlen = (uint64_t)qtk__ld32(b) | ((uint64_t)qtk__ld32(b + 4) << 32);
    if (hlen > ST_MAX_HEADER)
        return qtk__err(QTK_E_FORMAT, "header length %llu exceeds safetensors' limit of %llu bytes", (unsigned long long)hlen,
                        ST_MAX_HEADER);
    if (hlen > len - 8)
        return qtk__err(QTK_E_FORMAT, "header length %llu runs past the end of the file (%zu bytes): truncated?",
                        (unsigned long long)hlen, len);
    json_error_t jerr;
    json_t *root = json_loadb((const char *)b + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return qtk__err(QTK_E_FORMAT, "header JSON: %s (header byte %d)", jerr.text, jerr.position);
    qtk_status st = QTK_OK;
    qtk_arena tmp = {0};
    if (!json_is_object(root)) st = qtk__err(QTK_E_FORMAT, "the header is JSON but not an object");
    else st = build(c, root, (size_t)hlen, &tmp);
    json_decref(root);
    qtk_arena_free(&tmp);
    if (st) return st;
    c->facts.header_bytes = 8 + (size_t)hlen;
    c->facts.data_start = 8 + (size_t)hlen;
    snprintf(c->facts.note, sizeof c->facts.note, "JSON header %llu bytes, data at byte %zu", (unsigned long long)hlen,
             c->facts.data_start);
    return QTK_OK;
}

/* ---- writing ---- */

static json_t *entry_json(const char *dtype, const size_t *shape, int rank, size_t begin, size_t end) {
    json_t *o = json_object(), *sh = json_array(), *off = json_array();
    bool ok = o && sh && off;
    for (int i = 0; i < rank && ok; i++) ok = json_array_append_new(sh, json_integer((json_int_t)shape[i])) == 0;
    ok = ok && json_array_append_new(off, json_integer((json_int_t)begin)) == 0 &&
         json_array_append_new(off, json_integer((json_int_t)end)) == 0;
    /* field order as the safetensors writer emits it */
    ok = ok && json_object_set_new(o, "dtype", json_string(dtype)) == 0;
    if (ok) {
        ok = json_object_set_new(o, "shape", sh) == 0;
        sh = NULL;
    }
    if (ok) {
        ok = json_object_set_new(o, "data_offsets", off) == 0;
        off = NULL;
    }
    json_decref(sh);
    json_decref(off);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
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

static qtk_status build_meta(const qtk_ckpt_desc *d, json_t *meta) {
    qtk_status st = QTK_OK;
    for (size_t i = 0; i < d->n_meta && !st; i++) st = set_meta(meta, "", d->meta[i].key, d->meta[i].value);
    bool any_q = false;
    for (size_t i = 0; i < d->n_tensors; i++) any_q |= d->tensors[i].quantized;
    if (any_q && !st) st = set_meta(meta, QTK_META_CONVENTION, "", QTK_CONVENTION_VERSION);
    char buf[512];
    for (size_t i = 0; i < d->n_tensors && !st; i++) {
        const qtk_ckpt_tensor *t = &d->tensors[i];
        if (t->quantized) {
            st = qtk_scheme_format(&t->scheme, buf, sizeof buf, NULL);
            if (!st) st = set_meta(meta, QTK_META_SCHEME, t->name, buf);
            if (!st) st = set_meta(meta, QTK_META_SHAPE, t->name, qtk__ckpt_shape_str(t->shape, t->rank, buf, sizeof buf));
        }
        if (!st && t->has_param_id) {
            snprintf(buf, sizeof buf, "%llu", (unsigned long long)t->param_id);
            st = set_meta(meta, QTK_META_PARAM, t->name, buf);
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
        st = set_meta(meta, QTK_META_SCALAR, s->name, buf);
    }
    return st;
}

/* Adds one header entry; an error if the name is taken (companion names included). */
static qtk_status add_json_entry(json_t *root, const char *name, const char *suffix, const char *dtype, const size_t *shape,
                                 int rank, size_t begin, size_t end) {
    size_t nl = strlen(name), sl = strlen(suffix);
    char *key = malloc(nl + sl + 1);
    if (!key) return qtk__err(QTK_E_NOMEM, "out of memory");
    memcpy(key, name, nl);
    memcpy(key + nl, suffix, sl + 1);
    qtk_status st = QTK_OK;
    if (strcmp(key, "__metadata__") == 0) st = qtk__err(QTK_E_ARG, "a tensor cannot be named '__metadata__' in safetensors");
    else if (json_object_get(root, key))
        st = qtk__err(QTK_E_ARG, "tensor name '%s' is used twice (a quantized tensor's companions are NAME%s, NAME%s and NAME%s)",
                      key, suffixes[0], suffixes[1], suffixes[2]);
    else {
        json_t *e = entry_json(dtype, shape, rank, begin, end);
        if (!e || json_object_set_new(root, key, e) != 0)
            st = qtk__err(QTK_E_ARG, "tensor name '%s' cannot be written as JSON (not UTF-8?) or memory ran out", key);
    }
    free(key);
    return st;
}

static qtk_status build_header(qtk_ckpt_writer *w, json_t *root) {
    const qtk_ckpt_desc *d = w->desc;
    json_t *meta = json_object();
    if (!meta) return qtk__err(QTK_E_NOMEM, "out of memory");
    qtk_status st = build_meta(d, meta);
    if (!st && json_object_size(meta) > 0 && json_object_set(root, "__metadata__", meta) != 0)
        st = qtk__err(QTK_E_NOMEM, "out of memory");
    json_decref(meta);
    size_t at = 0;
    for (size_t i = 0; i < d->n_tensors && !st; i++) {
        const qtk_ckpt_tensor *t = &d->tensors[i];
        w->offsets[i] = at;
        if (!t->quantized) {
            const char *dt = st_name(t->elem);
            if (!dt) return qtk__err(QTK_E_UNSUPPORTED, "tensor '%s' is %s, which safetensors has no dtype for", t->name, qtk_elem_name(t->elem));
            st = add_json_entry(root, t->name, "", dt, t->shape, t->rank, at, at + t->nbytes);
            at += t->nbytes;
            continue;
        }
        qtk_layout L;
        st = qtk_layout_compute(&t->scheme, t->shape, t->rank, &L);
        if (st) return qtk__err_context(st, "tensor '%s'", t->name);
        qpiece p[4];
        quant_pieces(&t->scheme, &L, p);
        for (int k = 0; k < 4 && !st; k++) {
            if (!p[k].present) continue;
            st = add_json_entry(root, t->name, p[k].suffix, st_name(p[k].elem), p[k].shape, p[k].rank, at, at + p[k].bytes);
            at += p[k].bytes;
        }
    }
    w->data_end = at;
    return st;
}

static qtk_status st_begin(qtk_ckpt_writer *w) {
    json_t *root = json_object();
    if (!root) return qtk__err(QTK_E_NOMEM, "out of memory");
    qtk_status st = build_header(w, root);
    char *text = NULL;
    if (!st) {
        /* compact, in insertion order: what the safetensors writer emits */
        text = json_dumps(root, JSON_COMPACT);
        if (!text) st = qtk__err(QTK_E_NOMEM, "out of memory writing the header");
    }
    json_decref(root);
    if (st) return st;
    size_t n = strlen(text), padded = QTK_CKPT_ALIGN_UP(n, 8); /* spaces up to a multiple of 8 */
    if (padded > ST_MAX_HEADER) {
        free(text);
        return qtk__err(QTK_E_UNSUPPORTED, "the header would be %zu bytes; safetensors reads at most %llu", padded, ST_MAX_HEADER);
    }
    uint8_t len8[8];
    qtk__st32(len8, (uint32_t)padded);
    qtk__st32(len8 + 4, (uint32_t)((uint64_t)padded >> 32));
    st = qtk_afile_write(&w->file, len8, 8);
    if (!st) st = qtk_afile_write(&w->file, text, n);
    static const char spaces[8] = "       ";
    if (!st) st = qtk_afile_write(&w->file, spaces, padded - n);
    free(text);
    return st;
}

const qtk__ckpt_ops qtk__safetensors_ops = {
    .fmt = QTK_CKPT_SAFETENSORS,
    .name = "safetensors",
    .sniff = st_sniff,
    .parse = st_parse,
    .begin = st_begin,
    .put = NULL,
};
