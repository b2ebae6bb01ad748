/* bpk_cbor.c — Burn's DType / QuantScheme / Scalar and the burnpack metadata map in CBOR
 * (formats/BURNPACK.md §1.3, §2.2-2.6). See bpk_cbor.h. */
#include "burnpack/bpk_cbor.h"

#include "io/ckpt_internal.h"

#include "numfmt/scalar.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- names ---- */

/* Burn's QuantValue: the SPEC values, the first QTK_VALUE_E2M1 + 1 of qtk_value */
#define BURN_VALUES (QTK_VALUE_E2M1 + 1)
static const char *const value_names[BURN_VALUES] = {
    [QTK_VALUE_Q8F] = "Q8F", [QTK_VALUE_Q8S] = "Q8S",   [QTK_VALUE_Q4F] = "Q4F",
    [QTK_VALUE_Q4S] = "Q4S", [QTK_VALUE_Q2F] = "Q2F",   [QTK_VALUE_Q2S] = "Q2S",
    [QTK_VALUE_E4M3] = "E4M3", [QTK_VALUE_E5M2] = "E5M2", [QTK_VALUE_E2M1] = "E2M1",
};

static const struct {
    qtk_dtype d;
    const char *name;
} scale_names[] = {
    {QTK_DTYPE_F32, "F32"}, {QTK_DTYPE_F16, "F16"}, {QTK_DTYPE_BF16, "BF16"},
    {QTK_DTYPE_UE8M0, "UE8M0"}, {QTK_DTYPE_UE4M3, "UE4M3"},
};

const char *qtk__bpk_scale_name(qtk_dtype d) {
    for (size_t i = 0; i < sizeof scale_names / sizeof scale_names[0]; i++)
        if (scale_names[i].d == d) return scale_names[i].name;
    return NULL;
}

/* Burn DType unit variants, and the Bool(BoolStore) variants, by qtk element. */
static const struct {
    qtk_elem e;
    const char *name;
} plain_names[] = {
    {QTK_ELEM_F64, "F64"}, {QTK_ELEM_F32, "F32"}, {QTK_ELEM_FLEX32, "Flex32"}, {QTK_ELEM_F16, "F16"},
    {QTK_ELEM_BF16, "BF16"}, {QTK_ELEM_I64, "I64"}, {QTK_ELEM_I32, "I32"},      {QTK_ELEM_I16, "I16"},
    {QTK_ELEM_I8, "I8"},   {QTK_ELEM_U64, "U64"}, {QTK_ELEM_U32, "U32"},       {QTK_ELEM_U16, "U16"},
    {QTK_ELEM_U8, "U8"},
};
static const struct {
    qtk_elem e;
    const char *store;
} bool_names[] = {{QTK_ELEM_BOOL, "Native"}, {QTK_ELEM_BOOL_U8, "U8"}, {QTK_ELEM_BOOL_U32, "U32"}};

/* ---- building items (each returns NULL when out of memory) ---- */

/* Shortest head, as ciborium writes every integer: libcbor keeps the width of the item it
 * is given, so the width is chosen here. */
static cbor_item_t *cb_uint(uint64_t v) {
    if (v <= 0xffu) return cbor_build_uint8((uint8_t)v);
    if (v <= 0xffffu) return cbor_build_uint16((uint16_t)v);
    if (v <= 0xffffffffu) return cbor_build_uint32((uint32_t)v);
    return cbor_build_uint64(v);
}
/* The negative integer -1 - n. */
static cbor_item_t *cb_negint(uint64_t n) {
    if (n <= 0xffu) return cbor_build_negint8((uint8_t)n);
    if (n <= 0xffffu) return cbor_build_negint16((uint16_t)n);
    if (n <= 0xffffffffu) return cbor_build_negint32((uint32_t)n);
    return cbor_build_negint64(n);
}
static cbor_item_t *cb_text(const char *s) { return cbor_build_stringn(s, strlen(s)); }

/* The shortest float that holds d exactly, bit for bit (ciborium: half, single, double). */
static cbor_item_t *cb_float(double d) {
    float f = (float)d;
    double back = (double)f;
    uint64_t db, bb;
    memcpy(&db, &d, 8);
    memcpy(&bb, &back, 8);
    if (db != bb) return cbor_build_float8(d);
    if (qtk__f32_bits(qtk__f16_to_f32(qtk__f32_to_f16(f))) == qtk__f32_bits(f)) return cbor_build_float2(f);
    return cbor_build_float4(f);
}

/* Adds key: val to a map and drops the caller's references; false if anything is NULL or
 * the map is full. */
static bool cb_put(cbor_item_t *map, cbor_item_t *key, cbor_item_t *val) {
    bool ok = map && key && val && cbor_map_add(map, (struct cbor_pair){.key = key, .value = val});
    if (key) cbor_decref(&key);
    if (val) cbor_decref(&val);
    return ok;
}
static bool cb_push(cbor_item_t *arr, cbor_item_t *v) {
    bool ok = arr && v && cbor_array_push(arr, v);
    if (v) cbor_decref(&v);
    return ok;
}
/* Drops a reference and returns NULL: for `return fail(item)` on error paths. */
static cbor_item_t *fail(cbor_item_t *it) {
    if (it) cbor_decref(&it);
    return NULL;
}
/* {name: payload}: an externally tagged enum variant. */
static cbor_item_t *cb_variant(const char *name, cbor_item_t *payload) {
    cbor_item_t *m = cbor_new_definite_map(1);
    if (!cb_put(m, cb_text(name), payload)) return fail(m);
    return m;
}

/* BlockSize {"storage": [u8; 5], "len": u8}: br block dims (resolved, outermost first),
 * leading 1s dropped as Burn's constructor does, filler 1s. A dim above 255 is refused with a
 * message naming `what`. */
static cbor_item_t *block_size_item(const size_t *dims, unsigned br, const char *what, qtk_status *st) {
    unsigned lead = 0;
    while (lead + 1 < br && dims[lead] == 1) lead++;
    cbor_item_t *storage = cbor_new_definite_array(QTK_MAX_BLOCK_DIMS);
    for (unsigned i = 0; i < QTK_MAX_BLOCK_DIMS; i++) {
        size_t v = i < br - lead ? dims[lead + i] : 1;
        if (v > 255) {
            *st = qtk__err(QTK_E_UNSUPPORTED, "%s has a block dim of %zu; Burn's format holds block dims of at most 255",
                           what, v);
            return fail(storage);
        }
        if (!cb_push(storage, cb_uint(v))) return fail(storage);
    }
    cbor_item_t *m = cbor_new_definite_map(2);
    if (!cb_put(m, cb_text("storage"), storage)) return fail(m);
    if (!cb_put(m, cb_text("len"), cb_uint(br - lead))) return fail(m);
    return m;
}

cbor_item_t *qtk__bpk_scheme_item(const qtk_scheme *s, const size_t *bdims, bool legacy, const char *what,
                                  qtk_status *st) {
    *st = QTK_OK;
    cbor_item_t *size = NULL;
    if (s->block_rank) {
        size = block_size_item(bdims, s->block_rank, what, st);
        if (!size) return NULL;
    }
    cbor_item_t *store = s->store == QTK_STORE_NATIVE ? cb_text("Native")
                         : cb_variant(s->store == QTK_STORE_PACKED ? "PackedNative" : "PackedU32", cb_uint(s->pack_dim));
    cbor_item_t *mode = cb_text(s->mode == QTK_MODE_LOOKUP ? "Lookup" : "Symmetric");
    cbor_item_t *m = cbor_new_definite_map(5);
    bool ok = cb_put(m, cb_text("value"), cb_text(value_names[s->value]));
    if (!legacy) {
        /* {value, store, mode, tensor, block} (BURNPACK.md §2.5) */
        cbor_item_t *tensor = s->tensor_dtype == QTK_DTYPE_NONE ? cbor_new_null() : cb_text(qtk__bpk_scale_name(s->tensor_dtype));
        cbor_item_t *block = NULL;
        if (!size) {
            block = cbor_new_null();
        } else {
            block = cbor_new_definite_map(2);
            if (!cb_put(block, cb_text("size"), size) || !cb_put(block, cb_text("dtype"), cb_text(qtk__bpk_scale_name(s->block_dtype))))
                block = fail(block);
            size = NULL;
        }
        /* every item is put (or dropped) whatever failed before: nothing leaks */
        ok &= cb_put(m, cb_text("store"), store);
        ok &= cb_put(m, cb_text("mode"), mode);
        ok &= cb_put(m, cb_text("tensor"), tensor);
        ok &= cb_put(m, cb_text("block"), block);
    } else {
        /* {value, param, store, level, mode} (BURNPACK.md §1.8): param is the innermost level's
         * dtype; level "Tensor", {"Block": size} or {"BlockTensor": {"block": size, "global": P}} */
        qtk_dtype param = s->block_rank ? s->block_dtype : s->tensor_dtype ? s->tensor_dtype : QTK_DTYPE_F32;
        cbor_item_t *level;
        if (!size) {
            level = cb_text("Tensor");
        } else if (s->tensor_dtype == QTK_DTYPE_NONE) {
            level = cb_variant("Block", size);
            size = NULL;
        } else {
            cbor_item_t *bt = cbor_new_definite_map(2);
            if (!cb_put(bt, cb_text("block"), size) || !cb_put(bt, cb_text("global"), cb_text(qtk__bpk_scale_name(s->tensor_dtype))))
                bt = fail(bt);
            size = NULL;
            level = bt ? cb_variant("BlockTensor", bt) : NULL;
        }
        ok &= cb_put(m, cb_text("param"), cb_text(qtk__bpk_scale_name(param)));
        ok &= cb_put(m, cb_text("store"), store);
        ok &= cb_put(m, cb_text("level"), level);
        ok &= cb_put(m, cb_text("mode"), mode);
    }
    if (size) cbor_decref(&size);
    if (!ok) {
        *st = qtk__err(QTK_E_NOMEM, "out of memory building CBOR");
        return fail(m);
    }
    return m;
}

/* QuantScheme {value, store, mode, tensor, block} of a tensor (BURNPACK.md §2.5): the block
 * dims resolved on its shape. */
static cbor_item_t *scheme_item(const qtk_ckpt_tensor *t, qtk_status *st) {
    const qtk_scheme *s = &t->scheme;
    qtk_layout L;
    *st = qtk_layout_compute(s, t->shape, t->rank, &L);
    if (*st) {
        qtk__err_context(*st, "tensor '%s'", t->name);
        return NULL;
    }
    size_t dims[QTK_MAX_BLOCK_DIMS];
    for (unsigned i = 0; i < s->block_rank; i++) dims[i] = L.block[t->rank - (int)s->block_rank + (int)i];
    char what[512], sb[128], spec[160];
    if (qtk_scheme_format(s, spec, sizeof spec, NULL) != QTK_OK) snprintf(spec, sizeof spec, "?");
    snprintf(what, sizeof what, "tensor '%.200s': scheme '%s' on shape %s", t->name, spec,
             qtk_shape_format(t->shape, t->rank, sb, sizeof sb));
    return qtk__bpk_scheme_item(s, dims, false, what, st);
}

bool qtk__bpk_burn_expressible(const qtk_scheme *s) {
    return (unsigned)s->value < BURN_VALUES && s->mode != QTK_MODE_AFFINE && s->store != QTK_STORE_GGML &&
           s->super_block == 0;
}

static cbor_item_t *dtype_item(const qtk_ckpt_tensor *t, qtk_status *st) {
    *st = QTK_OK;
    if (t->quantized && !qtk__bpk_burn_expressible(&t->scheme)) {
        qtk_layout L;
        char spec[256];
        *st = qtk_layout_compute(&t->scheme, t->shape, t->rank, &L);
        if (!*st) *st = qtk_scheme_format(&t->scheme, spec, sizeof spec, NULL);
        if (*st) {
            qtk__err_context(*st, "tensor '%s'", t->name);
            return NULL;
        }
        return cb_variant("QtkQuant", cb_text(spec));
    }
    if (t->quantized) {
        cbor_item_t *s = scheme_item(t, st);
        return s ? cb_variant("QFloat", s) : NULL;
    }
    for (size_t i = 0; i < sizeof plain_names / sizeof plain_names[0]; i++)
        if (plain_names[i].e == t->elem) return cb_text(plain_names[i].name);
    for (size_t i = 0; i < sizeof bool_names / sizeof bool_names[0]; i++)
        if (bool_names[i].e == t->elem) return cb_variant("Bool", cb_text(bool_names[i].store));
    *st = qtk__err(QTK_E_UNSUPPORTED,
                   "tensor '%s' is %s, which burnpack has no dtype for (Burn's dtypes: F64 F32 Flex32 F16 BF16, "
                   "I64..I8, U64..U8, Bool, QFloat); quantize it (--scheme) or convert it (--dtype)",
                   t->name, qtk_elem_name(t->elem));
    return NULL;
}

static qtk_status serialize(cbor_item_t *it, uint8_t **out, size_t *len) {
    unsigned char *buf = NULL;
    size_t cap = 0;
    size_t n = cbor_serialize_alloc(it, &buf, &cap);
    cbor_decref(&it);
    if (n == 0) {
        free(buf);
        return qtk__err(QTK_E_NOMEM, "out of memory serializing CBOR");
    }
    *out = buf;
    *len = n;
    return QTK_OK;
}

qtk_status qtk__bpk_encode_dtype(const qtk_ckpt_tensor *t, uint8_t **out, size_t *len) {
    qtk_status st;
    cbor_item_t *it = dtype_item(t, &st);
    if (!it) return st ? st : qtk__err(QTK_E_NOMEM, "out of memory building CBOR");
    return serialize(it, out, len);
}

/* ---- the metadata map ---- */

static int cmp_str(const char *a, const char *b) { return strcmp(a, b); } /* byte-wise: unsigned char */

typedef struct {
    const char *key;
    size_t index;
} keyed;
static int cmp_keyed(const void *a, const void *b) { return cmp_str(((const keyed *)a)->key, ((const keyed *)b)->key); }

/* Indices of n keys in BTreeMap (byte-wise) order; an error on a duplicate. */
static qtk_status sorted(size_t n, const char *(*key_of)(const qtk__desc *, size_t), const qtk__desc *d,
                         const char *what, keyed **out) {
    keyed *k = malloc((n ? n : 1) * sizeof *k);
    if (!k) return qtk__err(QTK_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) k[i] = (keyed){key_of(d, i), i};
    qsort(k, n, sizeof *k, cmp_keyed);
    for (size_t i = 1; i < n; i++)
        if (strcmp(k[i - 1].key, k[i].key) == 0) {
            qtk_status st = qtk__err(QTK_E_ARG, "two %s are named '%s'", what, k[i].key);
            free(k);
            return st;
        }
    *out = k;
    return QTK_OK;
}
static const char *tensor_key(const qtk__desc *d, size_t i) { return d->tensors[i].name; }
static const char *meta_key(const qtk__desc *d, size_t i) { return d->meta[i].key; }
static const char *scalar_key(const qtk__desc *d, size_t i) { return d->scalars[i].name; }

static cbor_item_t *scalar_item(const qtk_ckpt_scalar *s) {
    switch (s->kind) {
    case QTK_SCALAR_INT: /* serde writes a non-negative i64 as a CBOR unsigned */
        return cb_variant("Int", s->i >= 0 ? cb_uint((uint64_t)s->i) : cb_negint((uint64_t)(-1 - s->i)));
    case QTK_SCALAR_UINT: return cb_variant("UInt", cb_uint(s->u));
    case QTK_SCALAR_FLOAT: return cb_variant("Float", cb_float(s->f));
    case QTK_SCALAR_BOOL: return cb_variant("Bool", cbor_build_bool(s->b));
    }
    return NULL;
}

static cbor_item_t *descriptor_item(const qtk_ckpt_tensor *t, size_t start, qtk_status *st) {
    cbor_item_t *m = cbor_new_definite_map(t->has_param_id ? 4 : 3);
    cbor_item_t *dt = dtype_item(t, st);
    if (!dt) return fail(m);
    if (!cb_put(m, cb_text("dtype"), dt)) return fail(m);
    cbor_item_t *shape = cbor_new_definite_array((size_t)t->rank);
    for (int i = 0; i < t->rank && shape; i++)
        if (!cb_push(shape, cb_uint(t->shape[i]))) shape = fail(shape);
    if (!cb_put(m, cb_text("shape"), shape)) return fail(m);
    cbor_item_t *off = cbor_new_definite_array(2);
    if (!cb_push(off, cb_uint(start)) || !cb_push(off, cb_uint((uint64_t)start + t->nbytes))) off = fail(off);
    if (!cb_put(m, cb_text("data_offsets"), off)) return fail(m);
    if (t->has_param_id && !cb_put(m, cb_text("param_id"), cb_uint(t->param_id))) return fail(m);
    return m;
}

char *qtk__bpk_meta_order(const qtk__desc *d, qtk_status *st) {
    *st = QTK_OK;
    bool in_order = true;
    for (size_t i = 1; i < d->n_meta && in_order; i++) in_order = cmp_str(d->meta[i - 1].key, d->meta[i].key) < 0;
    if (in_order) return NULL;
    size_t n = 1;
    for (size_t i = 0; i < d->n_meta; i++) n += 2 * strlen(d->meta[i].key) + 1;
    char *s = malloc(n), *p = s;
    if (!s) {
        *st = qtk__err(QTK_E_NOMEM, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < d->n_meta; i++) {
        if (i) *p++ = '\n';
        for (const char *k = d->meta[i].key; *k; k++) {
            if (*k == '\\' || *k == '\n') *p++ = '\\', *p++ = *k == '\n' ? 'n' : '\\';
            else *p++ = *k;
        }
    }
    *p = '\0';
    return s;
}

qtk_status qtk__bpk_apply_meta_order(qtk__desc *d, const char *order) {
    size_t n = d->n_meta, placed = 0;
    qtk__kv *out = malloc((n ? n : 1) * sizeof *out);
    bool *used = calloc(n ? n : 1, sizeof *used);
    size_t cap = strlen(order) + 1;
    char *key = malloc(cap);
    if (!out || !used || !key) {
        free(out), free(used), free(key);
        return qtk__err(QTK_E_NOMEM, "out of memory");
    }
    for (const char *p = order; *p || p == order;) {
        size_t k = 0;
        for (; *p && *p != '\n'; p++) {
            if (*p == '\\' && (p[1] == 'n' || p[1] == '\\')) key[k++] = *++p == 'n' ? '\n' : '\\';
            else key[k++] = *p;
        }
        key[k] = '\0';
        for (size_t i = 0; i < n; i++)
            if (!used[i] && strcmp(d->meta[i].key, key) == 0) {
                used[i] = true;
                out[placed++] = d->meta[i];
                break;
            }
        if (!*p) break;
        p++;
    }
    for (size_t i = 0; i < n; i++)
        if (!used[i]) out[placed++] = d->meta[i];
    memcpy(d->meta, out, n * sizeof *out);
    free(out);
    free(used);
    free(key);
    return QTK_OK;
}

static qtk_status encode_metadata(const qtk__desc *d, const size_t *starts, uint8_t **out, size_t *len) {
    keyed *kt = NULL, *km = NULL, *ks = NULL;
    qtk_status st = QTK_OK;
    if (!st) st = sorted(d->n_tensors, tensor_key, d, "tensors", &kt);
    if (!st) st = sorted(d->n_meta, meta_key, d, "metadata keys", &km);
    if (!st) st = sorted(d->n_scalars, scalar_key, d, "scalars", &ks);
    cbor_item_t *root = NULL;
    if (!st) {
        /* Metadata {tensors, metadata?, scalars?}: empty maps are skipped by Burn's writer. */
        root = cbor_new_definite_map(1 + (d->n_meta > 0) + (d->n_scalars > 0));
        cbor_item_t *tensors = cbor_new_definite_map(d->n_tensors);
        bool ok = root && tensors;
        for (size_t i = 0; i < d->n_tensors && ok; i++) {
            const qtk_ckpt_tensor *t = &d->tensors[kt[i].index];
            cbor_item_t *desc = descriptor_item(t, starts[kt[i].index], &st);
            ok = cb_put(tensors, cb_text(t->name), desc);
        }
        ok = cb_put(root, cb_text("tensors"), tensors) && ok;
        if (ok && d->n_meta) {
            cbor_item_t *m = cbor_new_definite_map(d->n_meta);
            for (size_t i = 0; i < d->n_meta && m; i++)
                if (!cb_put(m, cb_text(d->meta[km[i].index].key), cb_text(d->meta[km[i].index].value))) m = fail(m);
            ok = cb_put(root, cb_text("metadata"), m);
        }
        if (ok && d->n_scalars) {
            cbor_item_t *m = cbor_new_definite_map(d->n_scalars);
            for (size_t i = 0; i < d->n_scalars && m; i++)
                if (!cb_put(m, cb_text(d->scalars[ks[i].index].name), scalar_item(&d->scalars[ks[i].index]))) m = fail(m);
            ok = cb_put(root, cb_text("scalars"), m);
        }
        if (!ok && !st) st = qtk__err(QTK_E_NOMEM, "out of memory building the burnpack metadata");
    }
    free(kt);
    free(km);
    free(ks);
    if (st) {
        if (root) cbor_decref(&root);
        return st;
    }
    return serialize(root, out, len);
}

qtk_status qtk__bpk_encode_metadata(const qtk__desc *d, const size_t *starts, uint8_t **out, size_t *len) {
    qtk_status st = QTK_OK;
    /* the declared order, when the map's sorted order is another: one more entry, in its place */
    char *order = qtk__bpk_meta_order(d, &st);
    if (st) return st;
    if (!order) return encode_metadata(d, starts, out, len);
    qtk__desc with;
    qtk__desc_init(&with);
    for (size_t i = 0; i < d->n_meta && !st; i++)
        if (strcmp(d->meta[i].key, QTK__META_ORDER) != 0) st = qtk__desc_add_meta(&with, d->meta[i].key, d->meta[i].value);
    if (!st) st = qtk__desc_add_meta(&with, QTK__META_ORDER, order);
    free(order);
    with.tensors = d->tensors; /* borrowed for the encoding */
    with.n_tensors = d->n_tensors;
    with.scalars = d->scalars;
    with.n_scalars = d->n_scalars;
    if (!st) st = encode_metadata(&with, starts, out, len);
    with.tensors = NULL, with.n_tensors = 0, with.scalars = NULL, with.n_scalars = 0;
    qtk__desc_free(&with);
    return st;
}

/* ---- decoding helpers ---- */

const cbor_item_t *qtk__cb_untag(const cbor_item_t *it) {
    /* ciborium skips tags; so do we. cbor_tag_item() adds a reference that the tag still
     * holds, so it is dropped at once. */
    while (it && cbor_isa_tag(it)) {
        cbor_item_t *inner = cbor_tag_item(it);
        cbor_intermediate_decref(inner);
        it = inner;
    }
    return it;
}

/* libcbor's cbor_is_null / cbor_is_bool read the item's control value, which it asserts is
 * not a float (an abort on a float such as `"tensor": 1.5`): ask whether it is a control first. */
bool qtk__cb_is_ctrl(const cbor_item_t *it) {
    it = qtk__cb_untag(it);
    return it && cbor_isa_float_ctrl(it) && cbor_float_ctrl_is_ctrl(it);
}

bool qtk__cb_is_null(const cbor_item_t *it) {
    it = qtk__cb_untag(it);
    return qtk__cb_is_ctrl(it) && (cbor_is_null(it) || cbor_is_undef(it));
}

bool qtk__cb_uint(const cbor_item_t *it, uint64_t *v) {
    it = qtk__cb_untag(it);
    if (!it || !cbor_isa_uint(it)) return false;
    *v = cbor_get_int(it);
    return true;
}

/* Total length and chunks of a text string; NULL data for a chunked one. */
static bool text_parts(const cbor_item_t *it, size_t *len) {
    if (!it || !cbor_isa_string(it)) return false;
    if (cbor_string_is_definite(it)) {
        *len = cbor_string_length(it);
        return true;
    }
    size_t n = 0, k = cbor_string_chunk_count(it);
    cbor_item_t **ch = cbor_string_chunks_handle(it);
    for (size_t i = 0; i < k; i++) {
        if (!cbor_isa_string(ch[i]) || !cbor_string_is_definite(ch[i])) return false;
        n += cbor_string_length(ch[i]);
    }
    *len = n;
    return true;
}

static void text_copy(const cbor_item_t *it, char *dst) {
    if (cbor_string_is_definite(it)) {
        size_t n = cbor_string_length(it);
        if (n) memcpy(dst, cbor_string_handle(it), n);
        return;
    }
    size_t k = cbor_string_chunk_count(it), at = 0;
    cbor_item_t **ch = cbor_string_chunks_handle(it);
    for (size_t i = 0; i < k; i++) {
        size_t n = cbor_string_length(ch[i]);
        if (n) memcpy(dst + at, cbor_string_handle(ch[i]), n);
        at += n;
    }
}

qtk_status qtk__cb_text(const cbor_item_t *it, qtk__arena *a, const char **out, const char *what) {
    it = qtk__cb_untag(it);
    size_t n;
    if (!text_parts(it, &n)) return qtk__err(QTK_E_FORMAT, "%s is not a text string", what);
    char *s = qtk__arena_alloc(a, n + 1);
    if (!s) return qtk__err(QTK_E_NOMEM, "out of memory for %s (%zu bytes)", what, n);
    text_copy(it, s);
    s[n] = '\0';
    if (!qtk__utf8_ok(s, n)) return qtk__err(QTK_E_FORMAT, "%s is not valid UTF-8 (or holds a NUL)", what);
    *out = s;
    return QTK_OK;
}

bool qtk__cb_is(const cbor_item_t *it, const char *lit) {
    it = qtk__cb_untag(it);
    size_t n, ln = strlen(lit);
    if (!text_parts(it, &n) || n != ln) return false;
    char buf[64];
    if (n >= sizeof buf) return false; /* every literal compared here is short */
    text_copy(it, buf);
    return memcmp(buf, lit, n) == 0;
}

/* A struct map's fields by name; a duplicate field is an error (as in serde). */
typedef struct {
    const char *name;
    const cbor_item_t *value;
} field;

static qtk_status fields(const cbor_item_t *m, field *f, size_t nf, const char *what) {
    m = qtk__cb_untag(m);
    if (!m || !cbor_isa_map(m)) return qtk__err(QTK_E_FORMAT, "%s is not a CBOR map", what);
    struct cbor_pair *p = cbor_map_handle(m);
    size_t n = cbor_map_size(m);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < nf; k++)
            if (qtk__cb_is(p[i].key, f[k].name)) {
                if (f[k].value) return qtk__err(QTK_E_FORMAT, "%s has the field '%s' twice", what, f[k].name);
                f[k].value = p[i].value;
            }
    return QTK_OK;
}

/* A 1-entry map {name: payload} or a bare text (unit variant). */
static bool variant(const cbor_item_t *it, const cbor_item_t **key, const cbor_item_t **payload) {
    it = qtk__cb_untag(it);
    if (!it) return false;
    if (cbor_isa_string(it)) {
        *key = it;
        *payload = NULL;
        return true;
    }
    if (!cbor_isa_map(it) || cbor_map_size(it) != 1) return false;
    *key = cbor_map_handle(it)[0].key;
    *payload = cbor_map_handle(it)[0].value;
    return true;
}

static void text_for_msg(const cbor_item_t *it, char *buf, size_t cap) {
    it = qtk__cb_untag(it);
    size_t n;
    if (!text_parts(it, &n)) {
        snprintf(buf, cap, "(a CBOR item of major type %d)", it ? (int)cbor_typeof(it) : -1);
        return;
    }
    char *tmp = malloc(n + 1);
    if (!tmp) {
        snprintf(buf, cap, "?");
        return;
    }
    text_copy(it, tmp);
    tmp[n] = '\0';
    snprintf(buf, cap, "'%.*s'", (int)(n > 40 ? 40 : n), tmp);
    free(tmp);
}

/* ---- decoding the scheme ---- */

static qtk_status decode_scale_dtype(const cbor_item_t *it, const char *what, qtk_dtype *out) {
    for (size_t i = 0; i < sizeof scale_names / sizeof scale_names[0]; i++)
        if (qtk__cb_is(it, scale_names[i].name)) {
            *out = scale_names[i].d;
            return QTK_OK;
        }
    char b[64];
    text_for_msg(it, b, sizeof b);
    return qtk__err(QTK_E_FORMAT, "%s %s is not a ScaleDtype (F32, F16, BF16, UE8M0, UE4M3)", what, b);
}

/* BlockSize {"storage": [u8; 5], "len": u8} into s->block / block_rank. */
static qtk_status decode_block_size(const cbor_item_t *it, qtk_scheme *s) {
    field g[2] = {{"storage", NULL}, {"len", NULL}};
    qtk_status st = fields(it, g, 2, "BlockSize");
    if (st) return st;
    if (!g[0].value || !g[1].value) return qtk__err(QTK_E_FORMAT, "BlockSize lacks '%s'", g[0].value ? "len" : "storage");
    const cbor_item_t *arr = qtk__cb_untag(g[0].value);
    if (!arr || !cbor_isa_array(arr) || cbor_array_size(arr) != QTK_MAX_BLOCK_DIMS)
        return qtk__err(QTK_E_FORMAT, "BlockSize 'storage' is not an array of %d unsigned integers", QTK_MAX_BLOCK_DIMS);
    uint64_t len;
    if (!qtk__cb_uint(g[1].value, &len) || len == 0 || len > QTK_MAX_BLOCK_DIMS)
        return qtk__err(QTK_E_FORMAT, "BlockSize 'len' is not 1..%d", QTK_MAX_BLOCK_DIMS);
    cbor_item_t **h = cbor_array_handle(arr);
    for (size_t i = 0; i < QTK_MAX_BLOCK_DIMS; i++) {
        uint64_t v;
        if (!qtk__cb_uint(h[i], &v) || v > 255)
            return qtk__err(QTK_E_FORMAT, "BlockSize storage[%zu] is not a u8", i);
        if (i < len) {
            if (v == 0) return qtk__err(QTK_E_FORMAT, "BlockSize storage[%zu] is 0; a block dim is at least 1", i);
            s->block[i] = (uint32_t)v;
        }
    }
    s->block_rank = (uint8_t)len;
    return QTK_OK;
}

static qtk_status decode_block(const cbor_item_t *it, qtk_scheme *s) {
    field f[2] = {{"size", NULL}, {"dtype", NULL}};
    qtk_status st = fields(it, f, 2, "QuantScheme 'block'");
    if (st) return st;
    if (!f[0].value || !f[1].value) return qtk__err(QTK_E_FORMAT, "QuantScheme 'block' lacks '%s'", f[0].value ? "dtype" : "size");
    st = decode_scale_dtype(f[1].value, "block dtype", &s->block_dtype);
    return st ? st : decode_block_size(f[0].value, s);
}

/* The shape before 2026-08-19 (BURNPACK.md §1.8): param is the innermost level's dtype; level
 * "Tensor", {"Block": BlockSize} or {"BlockTensor": {"block": BlockSize, "global": param}}. */
static qtk_status decode_legacy_levels(const cbor_item_t *param, const cbor_item_t *level, qtk_scheme *s) {
    if (!param || !level) return qtk__err(QTK_E_FORMAT, "QuantScheme (the shape before 2026-08-19) lacks '%s'", param ? "level" : "param");
    qtk_dtype p = QTK_DTYPE_F32;
    qtk_status st = decode_scale_dtype(param, "QuantParam", &p);
    if (st) return st;
    const cbor_item_t *key, *payload;
    if (!variant(level, &key, &payload)) return qtk__err(QTK_E_FORMAT, "QuantLevel is not a text or a 1-entry map");
    if (!payload && qtk__cb_is(key, "Tensor")) {
        s->tensor_dtype = p;
        return QTK_OK;
    }
    if (payload && qtk__cb_is(key, "Block")) {
        s->block_dtype = p;
        return decode_block_size(payload, s);
    }
    if (payload && qtk__cb_is(key, "BlockTensor")) {
        field g[2] = {{"block", NULL}, {"global", NULL}};
        st = fields(payload, g, 2, "QuantLevel BlockTensor");
        if (st) return st;
        if (!g[0].value || !g[1].value)
            return qtk__err(QTK_E_FORMAT, "QuantLevel BlockTensor lacks '%s'", g[0].value ? "global" : "block");
        s->block_dtype = p;
        st = decode_scale_dtype(g[1].value, "BlockTensor global", &s->tensor_dtype);
        return st ? st : decode_block_size(g[0].value, s);
    }
    char b[64];
    text_for_msg(key, b, sizeof b);
    return qtk__err(QTK_E_FORMAT, "QuantLevel %s is not \"Tensor\", {\"Block\": size} or {\"BlockTensor\": {block, global}}", b);
}

qtk_status qtk__bpk_decode_scheme(const cbor_item_t *it, bool legacy_ok, qtk_scheme *s, bool *legacy) {
    memset(s, 0, sizeof *s);
    if (legacy) *legacy = false;
    field f[7] = {{"value", NULL}, {"store", NULL}, {"mode", NULL}, {"tensor", NULL},
                  {"block", NULL}, {"param", NULL}, {"level", NULL}};
    qtk_status st = fields(it, f, 7, "QuantScheme");
    if (st) return st;
    bool old = f[5].value || f[6].value;
    if (old && (f[3].value || f[4].value))
        return qtk__err(QTK_E_FORMAT, "QuantScheme has both shapes' fields ('%s' and '%s')", f[5].value ? "param" : "level",
                        f[3].value ? "tensor" : "block");
    if (legacy_ok && !old && !f[3].value && !f[4].value)
        return qtk__err(QTK_E_FORMAT, "QuantScheme has neither 'tensor' nor 'block' (Burn's shape since 2026-08-19) nor "
                                      "'param' and 'level' (the shape before)");
    /* BURNPACK.md §1.8: Burn reads the old shape silently as the default scheme; qtk says so. */
    if ((old && !legacy_ok) || (!f[3].value && !f[4].value && !old))
        return qtk__err(QTK_E_UNSUPPORTED,
                        "QuantScheme has %s: the shape Burn wrote before 2026-08-19 ({value, param, store, level, mode}, "
                        "cubecl PR #1514); qtk reads only the current {value, store, mode, tensor, block} shape, "
                        "because the old one cannot be told apart from a different scheme",
                        old ? "'param'/'level' fields" : "neither 'tensor' nor 'block'");
    for (int k = 0; k < 3; k++)
        if (!f[k].value) return qtk__err(QTK_E_FORMAT, "QuantScheme lacks '%s'", f[k].name);
    bool found = false;
    for (int v = 0; v < BURN_VALUES && !found; v++)
        if (qtk__cb_is(f[0].value, value_names[v])) s->value = (qtk_value)v, found = true;
    if (!found) {
        char b[64];
        text_for_msg(f[0].value, b, sizeof b);
        return qtk__err(QTK_E_FORMAT, "QuantValue %s is not one of Q8F Q8S Q4F Q4S Q2F Q2S E4M3 E5M2 E2M1", b);
    }
    const cbor_item_t *key, *payload;
    if (!variant(f[1].value, &key, &payload)) return qtk__err(QTK_E_FORMAT, "QuantStore is not a text or a 1-entry map");
    if (!payload && qtk__cb_is(key, "Native")) {
        s->store = QTK_STORE_NATIVE;
    } else if (payload && (qtk__cb_is(key, "PackedNative") || qtk__cb_is(key, "PackedU32"))) {
        s->store = qtk__cb_is(key, "PackedU32") ? QTK_STORE_U32 : QTK_STORE_PACKED;
        uint64_t d;
        if (!qtk__cb_uint(payload, &d)) return qtk__err(QTK_E_FORMAT, "QuantStore's packed dimension is not an unsigned integer");
        if (d >= QTK_MAX_RANK)
            return qtk__err(QTK_E_UNSUPPORTED, "QuantStore packs along dimension %llu; qtk handles 0..%d",
                            (unsigned long long)d, QTK_MAX_RANK - 1);
        s->pack_dim = (uint8_t)d;
    } else {
        char b[64];
        text_for_msg(key, b, sizeof b);
        return qtk__err(QTK_E_FORMAT, "QuantStore %s is not \"Native\", {\"PackedNative\": d} or {\"PackedU32\": d}", b);
    }
    if (qtk__cb_is(f[2].value, "Symmetric")) s->mode = QTK_MODE_SYMMETRIC;
    else if (qtk__cb_is(f[2].value, "Lookup")) s->mode = QTK_MODE_LOOKUP;
    else {
        char b[64];
        text_for_msg(f[2].value, b, sizeof b);
        return qtk__err(QTK_E_FORMAT, "QuantMode %s is not \"Symmetric\" or \"Lookup\"", b);
    }
    if (old) {
        st = decode_legacy_levels(f[5].value, f[6].value, s);
        if (st) return st;
        if (legacy) *legacy = true;
    }
    if (f[3].value && !qtk__cb_is_null(f[3].value)) {
        st = decode_scale_dtype(f[3].value, "tensor scale dtype", &s->tensor_dtype);
        if (st) return st;
    }
    if (f[4].value && !qtk__cb_is_null(f[4].value)) {
        st = decode_block(f[4].value, s);
        if (st) return st;
    }
    return QTK_OK;
}

qtk_status qtk__bpk_decode_dtype(const cbor_item_t *it, qtk__bpk_dtype *out) {
    memset(out, 0, sizeof *out);
    const cbor_item_t *key, *payload;
    if (!variant(it, &key, &payload)) return qtk__err(QTK_E_FORMAT, "dtype is not a text or a 1-entry map");
    if (!payload) {
        for (size_t i = 0; i < sizeof plain_names / sizeof plain_names[0]; i++)
            if (qtk__cb_is(key, plain_names[i].name)) {
                out->elem = plain_names[i].e;
                return QTK_OK;
            }
        char b[64];
        text_for_msg(key, b, sizeof b);
        if (qtk__cb_is(key, "Bool"))
            return qtk__err(QTK_E_UNSUPPORTED, "dtype \"Bool\" as a bare string is Burn's pre-2026-03 encoding; current "
                                               "Burn writes {\"Bool\": store}");
        return qtk__err(QTK_E_FORMAT, "unknown dtype %s", b);
    }
    if (qtk__cb_is(key, "Bool")) {
        for (size_t i = 0; i < sizeof bool_names / sizeof bool_names[0]; i++)
            if (qtk__cb_is(payload, bool_names[i].store)) {
                out->elem = bool_names[i].e;
                return QTK_OK;
            }
        char b[64];
        text_for_msg(payload, b, sizeof b);
        return qtk__err(QTK_E_FORMAT, "Bool store %s is not Native, U8 or U32", b);
    }
    if (qtk__cb_is(key, "QFloat")) {
        out->quantized = true;
        qtk_status st = qtk__bpk_decode_scheme(payload, false, &out->scheme, NULL);
        return st ? qtk__err_context(st, "QFloat") : QTK_OK;
    }
    if (qtk__cb_is(key, "QtkQuant")) {
        /* qtk's extension (docs/affine.md §4): the canonical spec string of a scheme Burn's
         * QuantScheme cannot hold */
        const cbor_item_t *txt = qtk__cb_untag(payload);
        size_t n = 0;
        if (!text_parts(txt, &n) || n == 0 || n >= 256)
            return qtk__err(QTK_E_FORMAT, "dtype QtkQuant is not a spec string of 1..255 bytes");
        char spec[256];
        text_copy(txt, spec);
        spec[n] = '\0';
        if (memchr(spec, '\0', n)) return qtk__err(QTK_E_FORMAT, "dtype QtkQuant's spec string holds a NUL");
        qtk_status st = qtk_scheme_parse(spec, &out->scheme);
        if (st) return qtk__err_context(st, "dtype QtkQuant");
        if (qtk__bpk_burn_expressible(&out->scheme))
            return qtk__err(QTK_E_FORMAT, "dtype QtkQuant holds '%s', which Burn's QFloat expresses: qtk writes it as QFloat", spec);
        out->quantized = true;
        return QTK_OK;
    }
    char b[64];
    text_for_msg(key, b, sizeof b);
    return qtk__err(QTK_E_FORMAT, "unknown dtype variant %s", b);
}

qtk_status qtk__bpk_decode_scalar(const cbor_item_t *it, qtk_ckpt_scalar *out) {
    const cbor_item_t *key, *v;
    if (!variant(it, &key, &v) || !v) return qtk__err(QTK_E_FORMAT, "scalar is not a 1-entry map {kind: value}");
    v = qtk__cb_untag(v);
    if (qtk__cb_is(key, "Int")) {
        out->kind = QTK_SCALAR_INT;
        if (cbor_isa_uint(v) && cbor_get_int(v) <= (uint64_t)INT64_MAX) out->i = (int64_t)cbor_get_int(v);
        else if (cbor_isa_negint(v) && cbor_get_int(v) <= (uint64_t)INT64_MAX) out->i = -1 - (int64_t)cbor_get_int(v);
        else return qtk__err(QTK_E_FORMAT, "scalar Int is not an integer in i64 range");
    } else if (qtk__cb_is(key, "UInt")) {
        out->kind = QTK_SCALAR_UINT;
        if (!cbor_isa_uint(v)) return qtk__err(QTK_E_FORMAT, "scalar UInt is not an unsigned integer");
        out->u = cbor_get_int(v);
    } else if (qtk__cb_is(key, "Float")) {
        out->kind = QTK_SCALAR_FLOAT;
        if (!cbor_isa_float_ctrl(v) || !cbor_is_float(v)) return qtk__err(QTK_E_FORMAT, "scalar Float is not a float");
        out->f = cbor_float_get_float(v);
    } else if (qtk__cb_is(key, "Bool")) {
        out->kind = QTK_SCALAR_BOOL;
        if (!qtk__cb_is_ctrl(v) || !cbor_is_bool(v)) return qtk__err(QTK_E_FORMAT, "scalar Bool is not a bool");
        out->b = cbor_get_bool(v);
    } else {
        char b[64];
        text_for_msg(key, b, sizeof b);
        return qtk__err(QTK_E_FORMAT, "scalar kind %s is not Int, UInt, Float or Bool", b);
    }
    return QTK_OK;
}
