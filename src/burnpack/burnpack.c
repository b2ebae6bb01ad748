/* burnpack.c — Burn's .bpk container (formats/BURNPACK.md §1): a 10-byte header, CBOR
 * metadata, zero padding to a 256-byte boundary, then each tensor's bytes at a 256-aligned
 * offset. Reading checks everything Burn's reader checks (§1.6) and, being stricter where
 * the spec allows, also lengths against shape and dtype (QFloat: the exact qtk/Burn layout
 * size), alignment, overlaps, trailing bytes, and duplicate names. */
#include "burnpack/bpk_cbor.h"
#include "burnpack/cbor_scan.h"
#include "burnpack/burnpack.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#define BPK_HEADER 10u
#define BPK_ALIGN 256u
#define BPK_MAX_METADATA 104857600u             /* MAX_METADATA_SIZE */
#define BPK_MAX_TENSORS 100000u                 /* MAX_TENSOR_COUNT */
#define BPK_MAX_TENSOR_BYTES (10ull << 30)      /* MAX_TENSOR_SIZE on 64-bit targets */
#define BPK_MAX_FILE (100ull << 30)             /* MAX_FILE_SIZE of Burn's file loader */
#define BPK_MAX_DEPTH 128u                      /* MAX_CBOR_RECURSION_DEPTH */
/* qtk's own bound on metadata items, so a hostile header cannot make libcbor build a tree of
 * gigabytes: 100 000 tensors take ~20 items each. */
#define BPK_MAX_ITEMS (4u << 20)
#define BPK_MAX_RANK 64

static const uint8_t bpk_magic[4] = {0x4e, 0x52, 0x55, 0x42}; /* 0x4255524E little-endian: "NRUB" */

static bool bpk_sniff(const uint8_t *b, size_t len) { return len >= 4 && memcmp(b, bpk_magic, 4) == 0; }

/* One tensor as the metadata describes it, before it is checked against the data. */
typedef struct {
    const char *name;
    qtk__bpk_dtype dt;
    size_t *shape;
    int rank;
    size_t numel;
    uint64_t start, end;
    bool has_pid;
    uint64_t pid;
} entry;

static int cmp_entry_name(const void *a, const void *b) {
    return strcmp(((const entry *)a)->name, ((const entry *)b)->name);
}
static int cmp_entry_offset(const void *a, const void *b) {
    const entry *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static qtk_status decode_entry(const cbor_item_t *key, const cbor_item_t *val, qtk__arena *a, entry *e) {
    memset(e, 0, sizeof *e);
    qtk_status st0 = qtk__cb_text(key, a, &e->name, "a tensor name");
    if (st0) return st0;
    const cbor_item_t *m = qtk__cb_untag(val);
    if (!m || !cbor_isa_map(m)) return qtk__err(QTK_E_FORMAT, "tensor '%s': its descriptor is not a map", e->name);
    const char *names[4] = {"dtype", "shape", "data_offsets", "param_id"};
    const cbor_item_t *f[4] = {NULL, NULL, NULL, NULL};
    struct cbor_pair *p = cbor_map_handle(m);
    for (size_t i = 0; i < cbor_map_size(m); i++)
        for (int k = 0; k < 4; k++)
            if (qtk__cb_is(p[i].key, names[k])) {
                if (f[k]) return qtk__err(QTK_E_FORMAT, "tensor '%s': field '%s' appears twice", e->name, names[k]);
                f[k] = p[i].value;
            }
    for (int k = 0; k < 3; k++)
        if (!f[k]) return qtk__err(QTK_E_FORMAT, "tensor '%s': the descriptor lacks '%s'", e->name, names[k]);
    qtk_status st = qtk__bpk_decode_dtype(f[0], &e->dt);
    if (st) return qtk__err_context(st, "tensor '%s'", e->name);

    const cbor_item_t *sh = qtk__cb_untag(f[1]);
    if (!sh || !cbor_isa_array(sh)) return qtk__err(QTK_E_FORMAT, "tensor '%s': 'shape' is not an array", e->name);
    size_t rank = cbor_array_size(sh);
    if (rank > BPK_MAX_RANK)
        return qtk__err(QTK_E_UNSUPPORTED, "tensor '%s': rank %zu; qtk reads ranks up to %d", e->name, rank, BPK_MAX_RANK);
    e->rank = (int)rank;
    e->shape = qtk__arena_alloc(a, (rank ? rank : 1) * sizeof(size_t));
    if (!e->shape) return qtk__err(QTK_E_NOMEM, "out of memory");
    e->numel = 1;
    for (size_t i = 0; i < rank; i++) {
        uint64_t v;
        if (!qtk__cb_uint(cbor_array_handle(sh)[i], &v))
            return qtk__err(QTK_E_FORMAT, "tensor '%s': shape[%zu] is not an unsigned integer", e->name, i);
        if (v > SIZE_MAX || !qtk__mul_ok(e->numel, (size_t)v, &e->numel))
            return qtk__err(QTK_E_SHAPE, "tensor '%s': the shape's element count overflows", e->name);
        e->shape[i] = (size_t)v;
    }
    const cbor_item_t *off = qtk__cb_untag(f[2]);
    if (!off || !cbor_isa_array(off) || cbor_array_size(off) != 2 || !qtk__cb_uint(cbor_array_handle(off)[0], &e->start) ||
        !qtk__cb_uint(cbor_array_handle(off)[1], &e->end))
        return qtk__err(QTK_E_FORMAT, "tensor '%s': 'data_offsets' is not [start, end]", e->name);
    if (f[3] && !qtk__cb_is_null(f[3])) {
        if (!qtk__cb_uint(f[3], &e->pid))
            return qtk__err(QTK_E_FORMAT, "tensor '%s': 'param_id' is not an unsigned integer", e->name);
        e->has_pid = true;
    }
    return QTK_OK;
}

/* Checks one tensor's byte range and length, then adds it to the description. */
static qtk_status add_entry(qtk_ckpt *c, const entry *e, size_t data_start) {
    size_t len = (size_t)(e->end - e->start), abs = data_start + (size_t)e->start;
    const char *nm = e->name;
    qtk_ckpt_tensor *t;
    qtk_status st;
    char sb[256];
    if (!e->dt.quantized) {
        st = qtk__desc_add_raw(&c->desc, nm, e->dt.elem, e->shape, e->rank, &t);
        if (st) return st;
        if (t->nbytes != len)
            return qtk__err(QTK_E_LENGTH, "tensor '%s' (%s, shape %s) takes %zu bytes; its data_offsets [%llu, %llu) give %zu",
                            nm, qtk_elem_name(e->dt.elem), qtk_shape_format(e->shape, e->rank, sb, sizeof sb),
                            t->nbytes, (unsigned long long)e->start, (unsigned long long)e->end, len);
    } else {
        if (e->rank > QTK_MAX_RANK)
            return qtk__err(QTK_E_UNSUPPORTED, "tensor '%s': a quantized tensor of rank %d (qtk: at most %d)", nm, e->rank,
                            QTK_MAX_RANK);
        qtk_scheme s = e->dt.scheme;
        if (s.mode == QTK_MODE_LOOKUP) {
            /* Burn's scheme names no table; qtk's layout ends with the table's entries. */
            size_t n = (size_t)1 << qtk_value_bits(s.value);
            if (len < 4 * n)
                return qtk__err(QTK_E_LENGTH, "tensor '%s': a Lookup tensor ends with its %zu-entry f32 table (%zu bytes); "
                                              "it has only %zu bytes", nm, n, 4 * n, len);
            st = qtk__ckpt_resolve_table(c, &s, c->map.data + abs + len - 4 * n, n, NULL);
            if (st) return qtk__err_context(st, "tensor '%s'", nm);
        }
        st = qtk__desc_add_quantized(&c->desc, nm, &s, e->shape, e->rank, &t);
        if (st) return st;
        if (t->nbytes != len) {
            qtk_layout L;
            char spec[160];
            (void)qtk_layout_compute(&s, e->shape, e->rank, &L);
            if (qtk_scheme_format(&s, spec, sizeof spec, NULL) != QTK_OK) snprintf(spec, sizeof spec, "?");
            return qtk__err(QTK_E_LENGTH,
                            "tensor '%s': scheme '%s' on shape %s takes exactly %zu bytes (values %zu + scales %zu + global "
                            "%zu + table %zu); its data_offsets [%llu, %llu) give %zu",
                            nm, spec, qtk_shape_format(e->shape, e->rank, sb, sizeof sb), L.total_bytes, L.value_bytes,
                            L.scale_bytes, L.global_bytes, L.table_bytes, (unsigned long long)e->start,
                            (unsigned long long)e->end, len);
        }
    }
    t->has_param_id = e->has_pid;
    t->param_id = e->pid;
    qtk__ckpt_loc loc = {.piece = {{abs, len}}, .n = 1};
    return qtk__ckpt_add_loc(c, &loc);
}

static qtk_status decode_tensors(qtk_ckpt *c, const cbor_item_t *tensors, size_t meta_end, size_t data_start,
                                 qtk__arena *tmp) {
    tensors = qtk__cb_untag(tensors);
    if (!tensors || !cbor_isa_map(tensors)) return qtk__err(QTK_E_FORMAT, "'tensors' is not a map");
    size_t n = cbor_map_size(tensors);
    if (n > BPK_MAX_TENSORS)
        return qtk__err(QTK_E_FORMAT, "%zu tensors; Burn's reader takes at most %u", n, BPK_MAX_TENSORS);
    entry *e = malloc((n ? n : 1) * sizeof *e);
    if (!e) return qtk__err(QTK_E_NOMEM, "out of memory");
    qtk_status st = QTK_OK;
    size_t len = c->map.len, max_end = 0;
    for (size_t i = 0; i < n && !st; i++) {
        st = decode_entry(cbor_map_handle(tensors)[i].key, cbor_map_handle(tensors)[i].value, tmp, &e[i]);
        if (st) break;
        const entry *x = &e[i];
        if (x->end < x->start)
            st = qtk__err(QTK_E_FORMAT, "tensor '%s': data_offsets [%llu, %llu) end before they start", x->name,
                          (unsigned long long)x->start, (unsigned long long)x->end);
        else if (x->end - x->start > BPK_MAX_TENSOR_BYTES)
            st = qtk__err(QTK_E_FORMAT, "tensor '%s' is %llu bytes; Burn's reader takes at most %llu", x->name,
                          (unsigned long long)(x->end - x->start), (unsigned long long)BPK_MAX_TENSOR_BYTES);
        else if (x->end > len || data_start + x->end > len)
            st = qtk__err(QTK_E_FORMAT, "tensor '%s': bytes [%llu, %llu) of the data section (file offsets [%zu, %llu)) "
                          "lie beyond the end of the file (%zu bytes): truncated?", x->name,
                          (unsigned long long)x->start, (unsigned long long)x->end, data_start + (size_t)x->start,
                          (unsigned long long)(data_start + x->end), len);
        else if (x->start % BPK_ALIGN)
            st = qtk__err(QTK_E_FORMAT, "tensor '%s' starts at data offset %llu, not a multiple of 256 (a burnpack "
                          "written before Burn's 2025-12 alignment change? BURNPACK.md §1.8)", x->name,
                          (unsigned long long)x->start);
        else if (x->end > max_end)
            max_end = (size_t)x->end;
    }
    if (!st && n > 1) { /* Burn keeps the last of duplicate names; qtk refuses them */
        qsort(e, n, sizeof *e, cmp_entry_name);
        for (size_t i = 1; i < n && !st; i++)
            if (strcmp(e[i - 1].name, e[i].name) == 0) st = qtk__err(QTK_E_FORMAT, "tensor '%s' is listed twice", e[i].name);
    }
    if (!st) {
        qsort(e, n, sizeof *e, cmp_entry_offset);
        for (size_t i = 1; i < n && !st; i++)
            if (e[i].start < e[i - 1].end)
                st = qtk__err(QTK_E_FORMAT, "tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap", e[i - 1].name,
                              (unsigned long long)e[i - 1].start, (unsigned long long)e[i - 1].end, e[i].name,
                              (unsigned long long)e[i].start, (unsigned long long)e[i].end);
    }
    /* Burn's writer ends the file at the last tensor's end (with no tensor bytes, at the
     * padded or unpadded metadata end). */
    if (!st && len != data_start + max_end && !(max_end == 0 && len >= meta_end && len <= data_start))
        st = qtk__err(QTK_E_FORMAT, "the file is %zu bytes but its tensors end at byte %zu: %zu unexpected trailing bytes",
                      len, data_start + max_end, len - (data_start + max_end));
    for (size_t i = 0; i < n && !st; i++) st = add_entry(c, &e[i], data_start);
    free(e);
    return st;
}

static int cmp_cstr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Refuses a name that appears twice among n records (the name is the `const char *` at
 * `off` in each record), found by sorting. Burn keeps the last duplicate; qtk refuses them. */
static qtk_status check_duplicates(const void *recs, size_t n, size_t size, size_t off, const char *what) {
    if (n < 2) return QTK_OK;
    const char **names = malloc(n * sizeof *names);
    if (!names) return qtk__err(QTK_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) memcpy(&names[i], (const char *)recs + i * size + off, sizeof names[i]);
    qsort(names, n, sizeof *names, cmp_cstr);
    qtk_status st = QTK_OK;
    for (size_t i = 1; i < n && !st; i++)
        if (strcmp(names[i - 1], names[i]) == 0) st = qtk__err(QTK_E_FORMAT, "%s '%s' appears twice", what, names[i]);
    free(names);
    return st;
}

static qtk_status decode_strings(qtk_ckpt *c, const cbor_item_t *m, qtk__arena *tmp) {
    m = qtk__cb_untag(m);
    if (!m || !cbor_isa_map(m)) return qtk__err(QTK_E_FORMAT, "'metadata' is not a map");
    const char *order = NULL;
    for (size_t i = 0; i < cbor_map_size(m); i++) {
        const char *k, *v;
        qtk_status st = qtk__cb_text(cbor_map_handle(m)[i].key, tmp, &k, "a metadata key");
        if (!st && (st = qtk__cb_text(cbor_map_handle(m)[i].value, tmp, &v, "the value")))
            qtk__err_context(st, "metadata '%s'", k);
        if (!st && strcmp(k, QTK__META_ORDER) == 0) {
            order = v; /* the declared order of the keys, applied below */
            continue;
        }
        if (!st) st = qtk__desc_add_meta(&c->desc, k, v);
        if (st) return st;
    }
    qtk_status st = check_duplicates(c->desc.meta, c->desc.n_meta, sizeof *c->desc.meta, offsetof(qtk__kv, key), "metadata key");
    if (!st && order) st = qtk__bpk_apply_meta_order(&c->desc, order);
    return st;
}

static qtk_status decode_scalars(qtk_ckpt *c, const cbor_item_t *m, qtk__arena *tmp) {
    m = qtk__cb_untag(m);
    if (!m || !cbor_isa_map(m)) return qtk__err(QTK_E_FORMAT, "'scalars' is not a map");
    for (size_t i = 0; i < cbor_map_size(m); i++) {
        qtk_ckpt_scalar s = {0};
        qtk_status st = qtk__cb_text(cbor_map_handle(m)[i].key, tmp, &s.name, "a scalar name");
        if (st) return st;
        st = qtk__bpk_decode_scalar(cbor_map_handle(m)[i].value, &s);
        if (!st) st = qtk__desc_add_scalar(&c->desc, &s);
        if (st) return qtk__err_context(st, "scalar '%s'", s.name);
    }
    return check_duplicates(c->desc.scalars, c->desc.n_scalars, sizeof *c->desc.scalars, offsetof(qtk_ckpt_scalar, name),
                            "scalar");
}

static qtk_status bpk_parse(qtk_ckpt *c) {
    const uint8_t *b = c->map.data;
    size_t len = c->map.len;
    if (len < BPK_HEADER) return qtk__err(QTK_E_FORMAT, "the file is %zu bytes; a burnpack starts with a 10-byte header", len);
    if (memcmp(b, bpk_magic, 4) != 0)
        return qtk__err(QTK_E_FORMAT, "bad magic %02x %02x %02x %02x; a burnpack starts with 4e 52 55 42 (\"NRUB\")", b[0],
                        b[1], b[2], b[3]);
    unsigned version = qtk__ld16(b + 4);
    if (version > 1) return qtk__err(QTK_E_UNSUPPORTED, "format version %u; qtk reads versions 0 and 1", version);
    size_t msize = qtk__ld32(b + 6);
    if (msize > BPK_MAX_METADATA)
        return qtk__err(QTK_E_FORMAT, "metadata size %zu exceeds Burn's limit of %u bytes", msize, BPK_MAX_METADATA);
    if ((unsigned long long)len > BPK_MAX_FILE)
        return qtk__err(QTK_E_FORMAT, "the file is %zu bytes; Burn reads files up to %llu", len, BPK_MAX_FILE);
    if (len < BPK_HEADER + msize)
        return qtk__err(QTK_E_FORMAT, "truncated: the metadata takes bytes [10, %zu) but the file has %zu", BPK_HEADER + msize,
                        len);
    qtk__cbor_limits lim = {BPK_MAX_DEPTH, BPK_MAX_ITEMS};
    size_t used = 0;
    qtk_status st = qtk__cbor_scan(b + BPK_HEADER, msize, &lim, &used);
    if (st) return qtk__err_context(st, "metadata");
    if (used != msize)
        return qtk__err(QTK_E_FORMAT, "metadata: %zu bytes follow its CBOR item (item ends at file offset %zu, metadata at %zu)",
                        msize - used, BPK_HEADER + used, BPK_HEADER + msize);
    struct cbor_load_result res;
    cbor_item_t *root = cbor_load(b + BPK_HEADER, msize, &res);
    if (!root)
        return res.error.code == CBOR_ERR_MEMERROR
                   ? qtk__err(QTK_E_NOMEM, "out of memory decoding %zu bytes of metadata", msize)
                   : qtk__err(QTK_E_FORMAT, "metadata: libcbor cannot decode it near byte %zu (%s)", res.error.position,
                              res.error.code == CBOR_ERR_SYNTAXERROR
                                  ? "invalid: a text string that is not valid UTF-8, or a map with an odd item count"
                                  : "malformed");
    size_t meta_end = BPK_HEADER + msize, data_start = QTK__ALIGN_UP(meta_end, BPK_ALIGN);
    qtk__arena tmp = {0};
    const cbor_item_t *top = qtk__cb_untag(root);
    const cbor_item_t *f[3] = {NULL, NULL, NULL};
    const char *names[3] = {"tensors", "metadata", "scalars"};
    if (!top || !cbor_isa_map(top)) {
        st = qtk__err(QTK_E_FORMAT, "metadata: the CBOR item is not a map");
    } else {
        for (size_t i = 0; i < cbor_map_size(top) && !st; i++)
            for (int k = 0; k < 3; k++)
                if (qtk__cb_is(cbor_map_handle(top)[i].key, names[k])) {
                    if (f[k]) st = qtk__err(QTK_E_FORMAT, "metadata: field '%s' appears twice", names[k]);
                    f[k] = cbor_map_handle(top)[i].value;
                }
        if (!st && !f[0]) st = qtk__err(QTK_E_FORMAT, "metadata: no 'tensors' field");
    }
    if (!st) st = decode_tensors(c, f[0], meta_end, data_start, &tmp);
    if (!st && f[1] && !qtk__cb_is_null(f[1])) st = decode_strings(c, f[1], &tmp);
    if (!st && f[2] && !qtk__cb_is_null(f[2])) st = decode_scalars(c, f[2], &tmp);
    cbor_decref(&root);
    qtk__arena_free(&tmp);
    if (st) return st;
    c->facts.header_bytes = data_start;
    c->facts.data_start = data_start;
    snprintf(c->facts.note, sizeof c->facts.note, "version %u, metadata %zu bytes of CBOR, data at byte %zu", version,
             msize, data_start);
    return QTK_OK;
}

static qtk_status bpk_begin(qtk__ckpt_writer *w) {
    const qtk__desc *d = w->desc;
    if (d->n_tensors > BPK_MAX_TENSORS)
        return qtk__err(QTK_E_UNSUPPORTED, "%zu tensors; Burn reads at most %u from one burnpack", d->n_tensors,
                        BPK_MAX_TENSORS);
    /* Tensors in description order, each at the next 256-aligned offset (writer.rs). */
    size_t cursor = 0;
    for (size_t i = 0; i < d->n_tensors; i++) {
        const qtk_ckpt_tensor *t = &d->tensors[i];
        if ((unsigned long long)t->nbytes > BPK_MAX_TENSOR_BYTES)
            return qtk__err(QTK_E_UNSUPPORTED, "tensor '%s' is %zu bytes; Burn reads tensors up to %llu bytes", t->name,
                            t->nbytes, BPK_MAX_TENSOR_BYTES);
        size_t start = QTK__ALIGN_UP(cursor, BPK_ALIGN);
        if (start < cursor || !qtk__add_ok(start, t->nbytes, &cursor))
            return qtk__err(QTK_E_SHAPE, "the data section overflows size_t");
        w->offsets[i] = start;
    }
    w->data_end = cursor;
    uint8_t *meta = NULL;
    size_t msize = 0;
    qtk_status st = qtk__bpk_encode_metadata(d, w->offsets, &meta, &msize);
    if (st) return st;
    if (msize > BPK_MAX_METADATA) {
        free(meta);
        return qtk__err(QTK_E_UNSUPPORTED, "the metadata takes %zu bytes; Burn reads at most %u", msize, BPK_MAX_METADATA);
    }
    uint8_t head[BPK_HEADER];
    memcpy(head, bpk_magic, 4);
    qtk__st16(head + 4, 1);
    qtk__st32(head + 6, (uint32_t)msize);
    st = qtk__afile_write(&w->file, head, sizeof head);
    if (!st) st = qtk__afile_write(&w->file, meta, msize);
    size_t end = BPK_HEADER + msize;
    if (!st) st = qtk__afile_zeros(&w->file, QTK__ALIGN_UP(end, BPK_ALIGN) - end);
    free(meta);
    return st;
}

/* What Burn's TensorData can name (a dtype, block dims of at most 255). */
static bool bpk_can_hold(const qtk_ckpt_tensor *t, char *why, size_t cap) {
    uint8_t *b = NULL;
    size_t n = 0;
    qtk_status st = qtk__bpk_encode_dtype(t, &b, &n);
    free(b);
    if (st && why && cap) snprintf(why, cap, "%s", qtk_last_error());
    return st == QTK_OK;
}

const qtk__ckpt_ops qtk__burnpack_ops = {
    .fmt = QTK_CKPT_BURNPACK,
    .name = "burnpack",
    .signature = "burnpack magic (\"NRUB\")",
    .ext = ".bpk",
    .sniff = bpk_sniff,
    .parse = bpk_parse,
    .begin = bpk_begin,
    .put = NULL,
    .can_hold = bpk_can_hold,
};
