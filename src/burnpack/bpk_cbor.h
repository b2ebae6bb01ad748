/* bpk_cbor.h — burnpack's CBOR metadata (formats/BURNPACK.md §1.3, §2): Burn's DType and
 * QuantScheme, scalars, and the whole metadata map, encoded with libcbor exactly as Burn's
 * ciborium writes them (shortest heads, definite lengths, struct fields in declaration
 * order, BTreeMap keys sorted byte-wise), and decoded leniently where ciborium is (any
 * integer width, indefinite strings, tags skipped, unknown keys ignored). */
#ifndef QTK_BPK_CBOR_H
#define QTK_BPK_CBOR_H

#include "io/checkpoint.h"

#include <cbor.h>

/* ---- encoding ---- */

/* The `dtype` value of a tensor: "F32", {"Bool": "U8"}, {"QFloat": {...}}. For QFloat the
 * block dims are resolved on the tensor's shape (`*` becomes the extent) and must be at
 * most 255 (Burn keeps them as u8). */
qtk_status qtk__bpk_encode_dtype(const qtk_ckpt_tensor *t, uint8_t **out, size_t *len);
/* Burn's QuantScheme of s, current shape or (legacy) the one before 2026-08-19, with the block
 * dims bdims (block_rank of them, resolved: no `*`). s must be Burn-expressible. A block dim
 * above 255 fails with a message naming `what`. NULL on failure (*st says why). */
cbor_item_t *qtk__bpk_scheme_item(const qtk_scheme *s, const size_t *bdims, bool legacy, const char *what,
                                  qtk_status *st);
/* 1 if Burn's QuantScheme can say what s is: a SPEC value, mode and store (docs/affine.md:
 * the extension's schemes are written as {"QtkQuant": spec} instead). */
bool qtk__bpk_burn_expressible(const qtk_scheme *s);
/* Burn's ScaleDtype name of d ("F32", "UE4M3"), or NULL for a dtype Burn has no name for. */
const char *qtk__bpk_scale_name(qtk_dtype d);
/* The whole metadata item for d, with tensor i at data_offsets [starts[i], starts[i] +
 * nbytes). *out is malloc'ed. */
qtk_status qtk__bpk_encode_metadata(const qtk__desc *d, const size_t *starts, uint8_t **out, size_t *len);

/* ---- decoding ---- */

typedef struct qtk__bpk_dtype {
    bool quantized;
    qtk_elem elem;
    qtk_scheme scheme; /* a Lookup scheme comes back without a table name (Burn has none) */
} qtk__bpk_dtype;

qtk_status qtk__bpk_decode_dtype(const cbor_item_t *it, qtk__bpk_dtype *out);
/* A QuantScheme map. The shape before 2026-08-19 ({value, param, store, level, mode}) is read
 * when legacy_ok (then *legacy, optional, is set), refused with BURNPACK.md §1.8's reason
 * otherwise (burnpack files: Burn itself misreads such a descriptor). */
qtk_status qtk__bpk_decode_scheme(const cbor_item_t *it, bool legacy_ok, qtk_scheme *s, bool *legacy);
qtk_status qtk__bpk_decode_scalar(const cbor_item_t *it, qtk_ckpt_scalar *out);

/* libcbor helpers shared with burnpack.c */
const cbor_item_t *qtk__cb_untag(const cbor_item_t *it);
/* Copies a text string (definite or chunked) into the arena. QTK_E_FORMAT when it is not
 * text, not valid UTF-8 or holds a NUL, QTK_E_NOMEM when memory runs out; the message calls
 * it `what` ("a tensor name"). */
qtk_status qtk__cb_text(const cbor_item_t *it, qtk__arena *a, const char **out, const char *what);
/* true if it is a text string equal to lit. */
bool qtk__cb_is(const cbor_item_t *it, const char *lit);
bool qtk__cb_uint(const cbor_item_t *it, uint64_t *v);
bool qtk__cb_is_null(const cbor_item_t *it);
/* true for a simple value (false, true, null, undefined, ...), false for a float or any
 * other item: the test libcbor's cbor_is_null / cbor_is_bool need first. */
bool qtk__cb_is_ctrl(const cbor_item_t *it);

/* Burn's metadata map is sorted by key (a BTreeMap). The order the keys were declared in (a
 * GGUF file's KV order) rides along, when it is another, as the metadata entry
 * "qtk:meta_order": the keys joined by newlines, with '\\' and a newline in a key written as
 * "\\\\" and "\\n". The reader puts the keys back in that order and drops the entry. */
#define QTK__META_ORDER "qtk:meta_order"
/* The entry's value for d's keys (malloc'ed), or NULL when they are in sorted order already;
 * *st gets QTK_E_NOMEM if memory ran out. */
char *qtk__bpk_meta_order(const qtk__desc *d, qtk_status *st);
/* Reorders d's metadata as order (the entry's value) says: the keys it names first in its
 * order, any others after in theirs. */
qtk_status qtk__bpk_apply_meta_order(qtk__desc *d, const char *order);

#endif
