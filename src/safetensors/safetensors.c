/* safetensors.c — the .safetensors container (formats/HUB_LAYOUTS.md §1): an 8-byte header
 * length, a JSON header, then the tensors back to back. The header is read with jansson
 * (duplicate keys rejected) and validated as the safetensors project does (§1.5): header
 * size limit, offsets contiguous from 0 and in bounds, byte sizes matching dtype and shape,
 * the data ending exactly at the end of the file.
 *
 * Quantized tensors use the qtk convention of docs/safetensors-quantized.md, implemented in
 * st_convention.c: the writer puts a tensor's pieces back to back in Burn's payload order,
 * so the payload is one contiguous range that loads without a copy. */
#include "safetensors/st_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define ST_MAX_HEADER 100000000ull /* safetensors' MAX_HEADER_SIZE */
#define ST_MAX_RANK 64

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
const char *qtk__st_name(qtk_elem e) {
    if (e == QTK_ELEM_FLEX32) e = QTK_ELEM_F32;
    if (e == QTK_ELEM_BOOL_U8) e = QTK_ELEM_U8;
    if (e == QTK_ELEM_BOOL_U32) e = QTK_ELEM_U32;
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (st_dtypes[i].e == e) return st_dtypes[i].name;
    return NULL;
}

static bool st_sniff(const uint8_t *b, size_t len) {
    if (len < 10) return false;
    uint64_t n = (uint64_t)qtk__ld32(b) | ((uint64_t)qtk__ld32(b + 4) << 32);
    return n >= 2 && n <= len - 8 && strchr("{ \t\r\n", b[8]) != NULL && b[8] != '\0';
}

/* ---- reading ---- */

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

static qtk_status parse_entry(const char *name, size_t name_len, const json_t *v, qtk__arena *a, st_entry *e) {
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
    e->shape = qtk__arena_alloc(a, (rank ? rank : 1) * sizeof(size_t));
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
        qtk_status st = qtk__elem_bytes(e[i].elem, e[i].numel, &bytes);
        if (st) return qtk__err_context(st, "tensor '%s'", e[i].name);
        if (e[i].end - e[i].begin != bytes)
            return qtk__err(QTK_E_LENGTH, "tensor '%s' (%s, shape %s) takes %zu bytes; its data_offsets [%zu, %zu) give %zu",
                            e[i].name, qtk_elem_name(e[i].elem), qtk_shape_format(e[i].shape, e[i].rank, sb, sizeof sb),
                            bytes, e[i].begin, e[i].end, e[i].end - e[i].begin);
        at = e[i].end;
    }
    if (at != data_len)
        return qtk__err(QTK_E_FORMAT, "the tensors end at data byte %zu but the data section holds %zu bytes (%s)", at,
                        data_len, at < data_len ? "trailing bytes" : "truncated");
    return QTK_OK;
}

/* Entries by name, for lookups that stay fast with 100 000 tensors. */
static int cmp_bytes(const char *a, size_t na, const char *b, size_t nb) {
    int c = memcmp(a, b, na < nb ? na : nb);
    return c ? c : (na > nb) - (na < nb);
}
static int cmp_by_name(const void *a, const void *b) {
    const st_entry *x = *(st_entry *const *)a, *y = *(st_entry *const *)b;
    return cmp_bytes(x->name, x->name_len, y->name, y->name_len);
}

/* The entry named name + suffix, or NULL. */
st_entry *qtk__st_find(const st_index *ix, const char *name, const char *suffix) {
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

static qtk_status build(qtk_ckpt *c, json_t *root, size_t hlen, qtk__arena *tmp) {
    size_t data_start = 8 + hlen, data_len = c->map.len - data_start;
    json_t *meta = NULL;
    size_t n = 0, cap = json_object_size(root);
    if (cap > (size_t)QTK_CKPT_MAX_TENSORS + 1)
        return qtk__err(QTK_E_UNSUPPORTED, "the header has %zu entries; qtk reads at most %d tensors per file", cap,
                        QTK_CKPT_MAX_TENSORS);
    st_entry *e = malloc((cap ? cap : 1) * sizeof *e);
    if (!e) return qtk__err(QTK_E_NOMEM, "out of memory");
    qtk_status st = qtk__desc_reserve(&c->desc, cap); /* no slack in the per-tensor arrays */
    if (!st) st = qtk__ckpt_reserve_loc(c, cap);
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
    if (!st) st = qtk__st_read_metadata(c, meta, &ix);
    /* Companions are set aside first, so that their position in the data does not matter;
     * then tensors go in data order, a quantized one in the place of its values. */
    for (size_t i = 0; i < n && !st; i++)
        if (qtk__st_meta_get(meta, QTK__META_SCHEME, e[i].name))
            for (int k = 0; k < QTK__ST_COMPANIONS; k++) {
                st_entry *p = qtk__st_find(&ix, e[i].name, qtk__st_suffixes[k]);
                if (p) p->consumed = 1;
            }
    for (size_t i = 0; i < n && !st; i++) {
        if (e[i].consumed) continue;
        const char *spec = qtk__st_meta_get(meta, QTK__META_SCHEME, e[i].name);
        if (spec) {
            st = qtk__st_add_quantized(c, &ix, &e[i], spec, meta, data_start);
            continue;
        }
        st = qtk__desc_add_raw(&c->desc, e[i].name, e[i].elem, e[i].shape, e[i].rank, NULL);
        qtk__ckpt_loc loc = {.piece = {{data_start + e[i].begin, e[i].end - e[i].begin}}, .n = 1};
        if (!st) st = qtk__ckpt_add_loc(c, &loc);
    }
    free(ix.by_name);
    if (!st) st = qtk__st_apply_param_ids(c, meta);
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
    /* Every entry names its data_offsets: more than the limit are refused before the header
     * is parsed, whose tree takes several hundred bytes per entry. */
    size_t entries = 0;
    const char *hp = (const char *)b + 8, *hend = hp + hlen;
    static const char key[] = "\"data_offsets\"";
    for (const char *q = hp; q && entries <= QTK_CKPT_MAX_TENSORS;) {
        q = memchr(q, '"', (size_t)(hend - q));
        if (!q) break;
        if ((size_t)(hend - q) >= sizeof key - 1 && memcmp(q, key, sizeof key - 1) == 0) entries++, q += sizeof key - 1;
        else q++;
    }
    if (entries > QTK_CKPT_MAX_TENSORS)
        return qtk__err(QTK_E_UNSUPPORTED, "the header has more than %d tensor entries; qtk reads at most %d per file (shard "
                        "larger checkpoints)",
                        QTK_CKPT_MAX_TENSORS, QTK_CKPT_MAX_TENSORS);
    json_error_t jerr;
    json_t *root = json_loadb((const char *)b + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return qtk__err(QTK_E_FORMAT, "header JSON: %s (header byte %d)", jerr.text, jerr.position);
    qtk_status st = QTK_OK;
    qtk__arena tmp = {0};
    if (!json_is_object(root)) st = qtk__err(QTK_E_FORMAT, "the header is JSON but not an object");
    else st = build(c, root, (size_t)hlen, &tmp);
    json_decref(root);
    qtk__arena_free(&tmp);
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
        st = qtk__err(QTK_E_ARG, "tensor name '%s' is used twice (a quantized tensor's companions are NAME%s, NAME%s, NAME%s and NAME%s)",
                      key, qtk__st_suffixes[0], qtk__st_suffixes[1], qtk__st_suffixes[2], qtk__st_suffixes[3]);
    else {
        json_t *e = entry_json(dtype, shape, rank, begin, end);
        if (!e || json_object_set_new(root, key, e) != 0)
            st = qtk__err(QTK_E_ARG, "tensor name '%s' cannot be written as JSON (not UTF-8?) or memory ran out", key);
    }
    free(key);
    return st;
}

static qtk_status build_header(qtk__ckpt_writer *w, json_t *root) {
    const qtk__desc *d = w->desc;
    json_t *meta = json_object();
    if (!meta) return qtk__err(QTK_E_NOMEM, "out of memory");
    qtk_status st = qtk__st_build_meta(d, meta);
    if (!st && json_object_size(meta) > 0 && json_object_set(root, "__metadata__", meta) != 0)
        st = qtk__err(QTK_E_NOMEM, "out of memory");
    json_decref(meta);
    size_t at = 0;
    for (size_t i = 0; i < d->n_tensors && !st; i++) {
        const qtk_ckpt_tensor *t = &d->tensors[i];
        w->offsets[i] = at;
        if (!t->quantized) {
            const char *dt = qtk__st_name(t->elem);
            if (!dt) return qtk__err(QTK_E_UNSUPPORTED, "tensor '%s' is %s, which safetensors has no dtype for", t->name, qtk_elem_name(t->elem));
            st = add_json_entry(root, t->name, "", dt, t->shape, t->rank, at, at + t->nbytes);
            at += t->nbytes;
            continue;
        }
        qtk_layout L;
        st = qtk_layout_compute(&t->scheme, t->shape, t->rank, &L);
        if (st) return qtk__err_context(st, "tensor '%s'", t->name);
        qpiece p[1 + QTK__ST_COMPANIONS];
        qtk__st_quant_pieces(&t->scheme, &L, p);
        for (int k = 0; k < 1 + QTK__ST_COMPANIONS && !st; k++) {
            if (!p[k].present) continue;
            st = add_json_entry(root, t->name, p[k].suffix, qtk__st_name(p[k].elem), p[k].shape, p[k].rank, at, at + p[k].bytes);
            at += p[k].bytes;
        }
    }
    w->data_end = at;
    size_t entries = json_object_size(root) - (json_object_get(root, "__metadata__") ? 1 : 0);
    if (!st && entries > QTK_CKPT_MAX_TENSORS)
        st = qtk__err(QTK_E_UNSUPPORTED, "%zu tensor entries (companions included); qtk reads at most %d from one "
                      "safetensors file: write shards (--max-shard-size)",
                      entries, QTK_CKPT_MAX_TENSORS);
    return st;
}

static qtk_status st_begin(qtk__ckpt_writer *w) {
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
    size_t n = strlen(text), padded = QTK__ALIGN_UP(n, 8); /* spaces up to a multiple of 8 */
    if (padded > ST_MAX_HEADER) {
        free(text);
        return qtk__err(QTK_E_UNSUPPORTED, "the header would be %zu bytes; safetensors reads at most %llu", padded, ST_MAX_HEADER);
    }
    uint8_t len8[8];
    qtk__st32(len8, (uint32_t)padded);
    qtk__st32(len8 + 4, (uint32_t)((uint64_t)padded >> 32));
    st = qtk__afile_write(&w->file, len8, 8);
    if (!st) st = qtk__afile_write(&w->file, text, n);
    static const char spaces[8] = "       ";
    if (!st) st = qtk__afile_write(&w->file, spaces, padded - n);
    free(text);
    return st;
}

/* Every scheme (qtk's convention); raw tensors of the dtypes safetensors names. */
static bool st_can_hold(const qtk_ckpt_tensor *t, char *why, size_t cap) {
    if (t->quantized || qtk__st_name(t->elem)) return true;
    if (why && cap) snprintf(why, cap, "safetensors has no dtype for %s", qtk_elem_name(t->elem));
    return false;
}

const qtk__ckpt_ops qtk__safetensors_ops = {
    .fmt = QTK_CKPT_SAFETENSORS,
    .name = "safetensors",
    .signature = "safetensors header",
    .ext = ".safetensors",
    .sniff = st_sniff,
    .parse = st_parse,
    .begin = st_begin,
    .put = NULL,
    .can_hold = st_can_hold,
};
