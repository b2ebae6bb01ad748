/* cbor_scan.c — see cbor_scan.h. */
#include "burnpack/cbor_scan.h"

#include "common/internal.h"

#include <cbor.h>
#include <stdlib.h>

typedef enum { EV_NONE, EV_LEAF, EV_DEFINITE, EV_INDEFINITE, EV_BREAK, EV_TAG } scan_event;

typedef struct {
    scan_event ev;
    size_t n;  /* entries of a definite container */
    bool bad;  /* a map too large to count */
} scan_ctx;

static void on_leaf(void *c) { ((scan_ctx *)c)->ev = EV_LEAF; }
static void on_u8(void *c, uint8_t v) { (void)v; on_leaf(c); }
static void on_u16(void *c, uint16_t v) { (void)v; on_leaf(c); }
static void on_u32(void *c, uint32_t v) { (void)v; on_leaf(c); }
static void on_u64(void *c, uint64_t v) { (void)v; on_leaf(c); }
static void on_str(void *c, cbor_data d, size_t n) { (void)d; (void)n; on_leaf(c); }
static void on_f(void *c, float v) { (void)v; on_leaf(c); }
static void on_d(void *c, double v) { (void)v; on_leaf(c); }
static void on_b(void *c, bool v) { (void)v; on_leaf(c); }
static void on_indef(void *c) { ((scan_ctx *)c)->ev = EV_INDEFINITE; }
static void on_break(void *c) { ((scan_ctx *)c)->ev = EV_BREAK; }
static void on_tag(void *c, uint64_t v) { (void)v; ((scan_ctx *)c)->ev = EV_TAG; }
static void on_array(void *c, size_t n) {
    scan_ctx *s = c;
    s->ev = EV_DEFINITE;
    s->n = n;
}
static void on_map(void *c, size_t n) {
    scan_ctx *s = c;
    s->ev = EV_DEFINITE;
    s->bad = n > SIZE_MAX / 2;
    s->n = s->bad ? SIZE_MAX : 2 * n; /* keys and values */
}

static struct cbor_callbacks scan_callbacks(void) {
    struct cbor_callbacks cb = cbor_empty_callbacks;
    cb.uint8 = on_u8, cb.uint16 = on_u16, cb.uint32 = on_u32, cb.uint64 = on_u64;
    cb.negint8 = on_u8, cb.negint16 = on_u16, cb.negint32 = on_u32, cb.negint64 = on_u64;
    /* libcbor's naming: `string`/`byte_string` deliver a definite string, the `_start`
     * callbacks open an indefinite one. */
    cb.string = on_str, cb.byte_string = on_str;
    cb.string_start = on_indef, cb.byte_string_start = on_indef;
    cb.array_start = on_array, cb.map_start = on_map;
    cb.indef_array_start = on_indef, cb.indef_map_start = on_indef;
    cb.tag = on_tag;
    cb.float2 = on_f, cb.float4 = on_f, cb.float8 = on_d;
    cb.undefined = on_leaf, cb.null = on_leaf, cb.boolean = on_b;
    cb.indef_break = on_break;
    return cb;
}

typedef struct {
    size_t left;     /* entries still to come (definite containers and tags) */
    bool indefinite; /* ends with a break instead */
} frame;

/* An item just ended: count it against the open containers, closing those it fills.
 * Returns true when the top-level item is complete. */
static bool item_done(frame *stack, unsigned *depth) {
    while (*depth > 0) {
        frame *f = &stack[*depth - 1];
        if (f->indefinite) return false;
        if (--f->left > 0) return false;
        (*depth)--; /* the container itself is now a finished item of its parent */
    }
    return true;
}

qtk_status qtk__cbor_scan(const uint8_t *buf, size_t len, const qtk__cbor_limits *lim, size_t *used) {
    frame *stack = malloc(((size_t)lim->max_depth + 1) * sizeof *stack);
    if (!stack) return qtk__err(QTK_E_NOMEM, "out of memory");
    struct cbor_callbacks cb = scan_callbacks();
    unsigned depth = 0;
    size_t pos = 0, items = 0;
    qtk_status st = QTK_OK;
    for (bool done = false; !done && !st;) {
        if (pos >= len) {
            st = qtk__err(QTK_E_FORMAT, "CBOR ends inside an item (%zu bytes, %u containers open)", len, depth);
            break;
        }
        scan_ctx ctx = {EV_NONE, 0, false};
        struct cbor_decoder_result r = cbor_stream_decode(buf + pos, len - pos, &cb, &ctx);
        if (r.status == CBOR_DECODER_NEDATA) {
            st = qtk__err(QTK_E_FORMAT, "CBOR item at byte %zu needs %zu bytes; %zu remain", pos, r.required, len - pos);
            break;
        }
        if (r.status != CBOR_DECODER_FINISHED || ctx.ev == EV_NONE) {
            st = qtk__err(QTK_E_FORMAT, "malformed CBOR at byte %zu (initial byte 0x%02x)", pos, buf[pos]);
            break;
        }
        size_t at = pos;
        pos += r.read;
        if (++items > lim->max_items) {
            st = qtk__err(QTK_E_FORMAT, "CBOR holds more than %zu items", lim->max_items);
            break;
        }
        switch (ctx.ev) {
        case EV_LEAF:
            done = item_done(stack, &depth);
            break;
        case EV_DEFINITE:
            /* every entry takes at least one byte */
            if (ctx.bad || ctx.n > len - pos) {
                st = qtk__err(QTK_E_FORMAT, "CBOR container at byte %zu claims %zu entries; only %zu bytes follow", at,
                              ctx.n, len - pos);
                break;
            }
            if (ctx.n == 0) {
                done = item_done(stack, &depth);
                break;
            }
            /* fallthrough */
        case EV_INDEFINITE:
        case EV_TAG:
            if (depth >= lim->max_depth) {
                st = qtk__err(QTK_E_FORMAT, "CBOR nests deeper than %u levels (at byte %zu)", lim->max_depth, at);
                break;
            }
            stack[depth].indefinite = ctx.ev == EV_INDEFINITE;
            stack[depth].left = ctx.ev == EV_TAG ? 1 : ctx.n;
            depth++;
            break;
        case EV_BREAK:
            if (depth == 0 || !stack[depth - 1].indefinite) {
                st = qtk__err(QTK_E_FORMAT, "CBOR break at byte %zu closes nothing", at);
                break;
            }
            depth--;
            done = item_done(stack, &depth);
            break;
        case EV_NONE:
            break;
        }
    }
    free(stack);
    if (!st && used) *used = pos;
    return st;
}
