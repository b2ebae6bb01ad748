/* bpk_scheme.c — Burn's serialized QuantScheme as a public API (qtk_ckpt.h, "Burn's serialized
 * QuantScheme"): the CBOR burnpack metadata holds, and the JSON serde_json writes for the same
 * struct, both shapes Burn has used. One decoder and one encoder (bpk_cbor.c) serve both: JSON
 * is turned into the CBOR item tree it describes (serde's data model is the same for both) and
 * back. */
#include "burnpack/bpk_cbor.h"
#include "burnpack/cbor_scan.h"

#include "io/ckpt_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

/* A scheme is about 110 bytes; anything this large is not one. */
#define SCHEME_MAX_BYTES 65536u
#define SCHEME_MAX_DEPTH 32u

/* The root: a QuantScheme map, or a DType {"QFloat": QuantScheme} / {"QtkQuant": spec}. */
static qtk_status decode_root(const cbor_item_t *root, qtk_scheme *out, qtk_burn_form *form) {
    const cbor_item_t *it = qtk__cb_untag(root);
    bool legacy = false;
    qtk_status st;
    if (it && cbor_isa_map(it) && cbor_map_size(it) == 1 && qtk__cb_is(cbor_map_handle(it)[0].key, "QtkQuant")) {
        qtk__bpk_dtype dt;
        st = qtk__bpk_decode_dtype(it, &dt);
        if (!st) *out = dt.scheme;
    } else {
        if (it && cbor_isa_map(it) && cbor_map_size(it) == 1 && qtk__cb_is(cbor_map_handle(it)[0].key, "QFloat"))
            it = cbor_map_handle(it)[0].value;
        st = qtk__bpk_decode_scheme(it, true, out, &legacy);
        /* Burn's lookup mode names no table: such a scheme is complete but for it */
        if (!st && !(out->mode == QTK_MODE_LOOKUP && out->table[0] == '\0')) st = qtk_scheme_validate(out);
    }
    if (st) return st;
    if (form) *form = legacy ? QTK_BURN_LEGACY : QTK_BURN_CURRENT;
    return QTK_OK;
}

qtk_status qtk_scheme_from_burn_cbor(const void *data, size_t len, qtk_scheme *out, qtk_burn_form *form) {
    if (!out || (!data && len)) return qtk__err(QTK_E_ARG, "qtk_scheme_from_burn_cbor: NULL %s", out ? "data" : "out");
    if (len == 0) return qtk__err(QTK_E_LENGTH, "Burn QuantScheme (CBOR): no bytes");
    if (len > SCHEME_MAX_BYTES)
        return qtk__err(QTK_E_LENGTH, "Burn QuantScheme (CBOR): %zu bytes; a scheme takes about 110 (at most %u read)", len,
                        SCHEME_MAX_BYTES);
    qtk__cbor_limits lim = {SCHEME_MAX_DEPTH, 4096};
    size_t used = 0;
    qtk_status st = qtk__cbor_scan(data, len, &lim, &used);
    if (st) return qtk__err_context(st, "Burn QuantScheme (CBOR)");
    if (used != len)
        return qtk__err(QTK_E_FORMAT, "Burn QuantScheme (CBOR): %zu bytes follow the item (it ends at byte %zu)", len - used,
                        used);
    struct cbor_load_result res;
    cbor_item_t *root = cbor_load(data, len, &res);
    if (!root)
        return res.error.code == CBOR_ERR_MEMERROR
                   ? qtk__err(QTK_E_NOMEM, "out of memory decoding a QuantScheme")
                   : qtk__err(QTK_E_FORMAT, "Burn QuantScheme (CBOR): libcbor cannot decode it near byte %zu",
                              res.error.position);
    st = decode_root(root, out, form);
    cbor_decref(&root);
    return st ? qtk__err_context(st, "Burn QuantScheme (CBOR)") : QTK_OK;
}

/* The CBOR item of s (checked to be one of Burn's schemes), its block dims resolved on shape. */
static qtk_status encode_item(const qtk_scheme *s, const size_t *shape, int rank, qtk_burn_form form, cbor_item_t **out) {
    *out = NULL;
    if (!s) return qtk__err(QTK_E_ARG, "NULL scheme");
    if (form != QTK_BURN_CURRENT && form != QTK_BURN_LEGACY) return qtk__err(QTK_E_ARG, "unknown qtk_burn_form %d", (int)form);
    bool no_table = s->mode == QTK_MODE_LOOKUP && s->table[0] == '\0';
    qtk_status st = no_table ? QTK_OK : qtk_scheme_validate(s);
    if (st) return st;
    char spec[256];
    if (!no_table && qtk_scheme_format(s, spec, sizeof spec, NULL) != QTK_OK) snprintf(spec, sizeof spec, "?");
    if (no_table) snprintf(spec, sizeof spec, "a lookup scheme without a table");
    /* burn_expressible says value, mode and ggml; the dtypes, store range and rank are what
     * validation would have said, for a lookup scheme without a table, which is not validated */
    if (!qtk__bpk_burn_expressible(s) || (s->tensor_dtype != QTK_DTYPE_NONE && !qtk__bpk_scale_name(s->tensor_dtype)) ||
        (s->block_rank && !qtk__bpk_scale_name(s->block_dtype)) || (unsigned)s->store > QTK_STORE_PACKED ||
        s->block_rank > QTK_MAX_BLOCK_DIMS)
        return qtk__err(QTK_E_UNSUPPORTED,
                        "scheme '%s' is not one Burn's QuantScheme holds (qtk's extension, docs/affine.md: Burn files "
                        "carry it as {\"QtkQuant\": spec})",
                        spec);
    size_t dims[QTK_MAX_BLOCK_DIMS];
    if (shape || rank) {
        if (!shape) return qtk__err(QTK_E_ARG, "NULL shape with rank %d", rank);
        qtk_layout L;
        st = qtk_layout_compute(s, shape, rank, &L);
        if (st) return st;
        for (unsigned i = 0; i < s->block_rank; i++) dims[i] = L.block[rank - (int)s->block_rank + (int)i];
    } else {
        for (unsigned i = 0; i < s->block_rank; i++) {
            if (s->block[i] == QTK_BLOCK_WHOLE)
                return qtk__err(QTK_E_SHAPE,
                                "scheme '%s': block dim %u is '*' (the whole extent), which Burn stores resolved; give "
                                "the tensor's shape",
                                spec, i);
            dims[i] = s->block[i];
        }
    }
    char what[300];
    snprintf(what, sizeof what, "scheme '%s'", spec);
    *out = qtk__bpk_scheme_item(s, dims, form == QTK_BURN_LEGACY, what, &st);
    return *out ? QTK_OK : st;
}

qtk_status qtk_scheme_to_burn_cbor(const qtk_scheme *s, const size_t *shape, int rank, qtk_burn_form form, void *buf,
                                   size_t cap, size_t *needed) {
    if (!buf && cap) return qtk__err(QTK_E_ARG, "NULL buffer with cap %zu", cap);
    cbor_item_t *it;
    qtk_status st = encode_item(s, shape, rank, form, &it);
    if (st) return st;
    unsigned char *bytes = NULL;
    size_t bcap = 0, n = cbor_serialize_alloc(it, &bytes, &bcap);
    cbor_decref(&it);
    if (n == 0) {
        free(bytes);
        return qtk__err(QTK_E_NOMEM, "out of memory serializing CBOR");
    }
    if (needed) *needed = n;
    if (n > cap) {
        free(bytes);
        return qtk__err(QTK_E_LENGTH, "the QuantScheme takes %zu bytes of CBOR; the buffer holds %zu", n, cap);
    }
    memcpy(buf, bytes, n);
    free(bytes);
    return QTK_OK;
}

/* ---- JSON <-> the CBOR item tree (serde's data model: maps, arrays, text, integers, null) ---- */

static qtk_status json_to_cbor(json_t *j, unsigned depth, cbor_item_t **out) {
    *out = NULL;
    if (depth > SCHEME_MAX_DEPTH) return qtk__err(QTK_E_FORMAT, "nested deeper than %u levels", SCHEME_MAX_DEPTH);
    cbor_item_t *it = NULL;
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        it = cbor_new_definite_map(json_object_size(j));
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) {
            cbor_item_t *cv;
            qtk_status st = json_to_cbor(v, depth + 1, &cv);
            if (st) {
                if (it) cbor_decref(&it);
                return st;
            }
            cbor_item_t *ck = cbor_build_string(k);
            bool ok = it && ck && cbor_map_add(it, (struct cbor_pair){.key = ck, .value = cv});
            if (ck) cbor_decref(&ck);
            cbor_decref(&cv);
            if (!ok) {
                if (it) cbor_decref(&it);
                return qtk__err(QTK_E_NOMEM, "out of memory");
            }
        }
        break;
    }
    case JSON_ARRAY: {
        it = cbor_new_definite_array(json_array_size(j));
        for (size_t i = 0; i < json_array_size(j); i++) {
            cbor_item_t *cv;
            qtk_status st = json_to_cbor(json_array_get(j, i), depth + 1, &cv);
            if (st) {
                if (it) cbor_decref(&it);
                return st;
            }
            bool ok = it && cbor_array_push(it, cv);
            cbor_decref(&cv);
            if (!ok) {
                if (it) cbor_decref(&it);
                return qtk__err(QTK_E_NOMEM, "out of memory");
            }
        }
        break;
    }
    case JSON_STRING: it = cbor_build_stringn(json_string_value(j), json_string_length(j)); break;
    case JSON_INTEGER: {
        json_int_t v = json_integer_value(j);
        it = v >= 0 ? cbor_build_uint64((uint64_t)v) : cbor_build_negint64((uint64_t)(-(v + 1)));
        break;
    }
    case JSON_REAL: it = cbor_build_float8(json_real_value(j)); break;
    case JSON_TRUE: it = cbor_build_bool(true); break;
    case JSON_FALSE: it = cbor_build_bool(false); break;
    case JSON_NULL: it = cbor_new_null(); break;
    }
    if (!it) return qtk__err(QTK_E_NOMEM, "out of memory");
    *out = it;
    return QTK_OK;
}

qtk_status qtk_scheme_from_burn_json(const char *json, size_t len, qtk_scheme *out, qtk_burn_form *form) {
    if (!out || (!json && len)) return qtk__err(QTK_E_ARG, "qtk_scheme_from_burn_json: NULL %s", out ? "json" : "out");
    if (len > SCHEME_MAX_BYTES)
        return qtk__err(QTK_E_LENGTH, "Burn QuantScheme (JSON): %zu bytes; a scheme takes about 150 (at most %u read)", len,
                        SCHEME_MAX_BYTES);
    json_error_t e;
    json_t *root = json_loadb(json ? json : "", len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &e);
    if (!root)
        return qtk__err(QTK_E_FORMAT, "Burn QuantScheme (JSON): %s at line %d, column %d", e.text, e.line, e.column);
    cbor_item_t *it;
    qtk_status st = json_to_cbor(root, 0, &it);
    json_decref(root);
    if (!st) {
        st = decode_root(it, out, form);
        cbor_decref(&it);
    }
    return st ? qtk__err_context(st, "Burn QuantScheme (JSON)") : QTK_OK;
}

/* The tree qtk__bpk_scheme_item builds holds maps with text keys, arrays, text, uints, null. */
static json_t *cbor_to_json(const cbor_item_t *it) {
    switch (cbor_typeof(it)) {
    case CBOR_TYPE_MAP: {
        json_t *o = json_object();
        struct cbor_pair *p = cbor_map_handle(it);
        for (size_t i = 0; o && i < cbor_map_size(it); i++) {
            char key[64];
            size_t n = cbor_isa_string(p[i].key) ? cbor_string_length(p[i].key) : sizeof key;
            json_t *v = n < sizeof key ? cbor_to_json(p[i].value) : NULL;
            if (v) {
                memcpy(key, cbor_string_handle(p[i].key), n);
                key[n] = '\0';
            }
            if (!v || json_object_set_new(o, key, v)) { /* set_new takes v even when it fails */
                json_decref(o);
                o = NULL;
            }
        }
        return o;
    }
    case CBOR_TYPE_ARRAY: {
        json_t *a = json_array();
        for (size_t i = 0; a && i < cbor_array_size(it); i++)
            if (json_array_append_new(a, cbor_to_json(cbor_array_handle(it)[i]))) {
                json_decref(a);
                a = NULL;
            }
        return a;
    }
    case CBOR_TYPE_STRING: return json_stringn((const char *)cbor_string_handle(it), cbor_string_length(it));
    case CBOR_TYPE_UINT: return json_integer((json_int_t)cbor_get_int(it));
    case CBOR_TYPE_FLOAT_CTRL: return qtk__cb_is_null(it) ? json_null() : NULL;
    default: return NULL;
    }
}

qtk_status qtk_scheme_to_burn_json(const qtk_scheme *s, const size_t *shape, int rank, qtk_burn_form form, char *buf,
                                   size_t cap, size_t *needed) {
    if (!buf && cap) return qtk__err(QTK_E_ARG, "NULL buffer with cap %zu", cap);
    cbor_item_t *it;
    qtk_status st = encode_item(s, shape, rank, form, &it);
    if (st) return st;
    json_t *j = cbor_to_json(it);
    cbor_decref(&it);
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    if (!text) return qtk__err(QTK_E_NOMEM, "out of memory writing JSON");
    size_t n = strlen(text) + 1;
    if (needed) *needed = n;
    if (n > cap) {
        free(text);
        return qtk__err(QTK_E_LENGTH, "the QuantScheme takes %zu bytes of JSON with its terminator; the buffer holds %zu", n,
                        cap);
    }
    memcpy(buf, text, n);
    free(text);
    return QTK_OK;
}
