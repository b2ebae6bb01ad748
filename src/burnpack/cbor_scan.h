/* cbor_scan.h — a bounds check of untrusted CBOR before libcbor builds a tree from it.
 *
 * cbor_load() allocates every definite array or map at the size its head claims and frees
 * trees recursively, so a few hostile bytes could ask for gigabytes or nest deep enough to
 * overflow the stack. This pass walks the item with libcbor's streaming decoder, which
 * allocates nothing, and rejects such input first. */
#ifndef QTK_CBOR_SCAN_H
#define QTK_CBOR_SCAN_H

#include "qtk.h"

typedef struct qtk__cbor_limits {
    unsigned max_depth; /* containers and tags nested deeper fail (Burn: 128) */
    size_t max_items;   /* data items in total, every string chunk and break included */
} qtk__cbor_limits;

/* Checks that buf starts with one complete, well-formed CBOR item within the limits, in
 * which no definite array or map claims more entries than bytes remain. *used gets the
 * item's length (trailing bytes are the caller's business). Errors (QTK_E_FORMAT) give the
 * byte offset relative to buf. */
qtk_status qtk__cbor_scan(const uint8_t *buf, size_t len, const qtk__cbor_limits *lim, size_t *used);

#endif
