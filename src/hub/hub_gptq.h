/* hub_gptq.h — what GPTQ's and AWQ's reader (hub_gptq.c) and writer (hub_gptq_write.c)
 * share: the two packings of int32 words and the parameters of one folded weight.
 *
 * Both store a Linear weight [N, K] (out, in) transposed, as int32 words of b-bit fields,
 * lowest field in the lowest bits:
 *   GPTQ  qweight I32 [K b/32, N]: column n's K fields are one LSB-first bit stream down the
 *         column (b = 3: 32 fields in 3 words, fields crossing word boundaries);
 *         qzeros I32 [ng, N b/32]: row g's N zero points, one bit stream along the row;
 *   AWQ   qweight I32 [K, N/8]: word (k, c) holds columns 8c..8c+7 in the order
 *         0 2 4 6 1 3 5 7 (field i is column 8c + awq_order[i]); qzeros I32 [ng, N/8] the same;
 *   both  scales [ng, N] (F16), groups of G consecutive input channels (g_idx: GPTQ's map of
 *         input channel to group).
 * qtk's tensor is [N, K] u{b},block=G:f16,zero=u8 (store=u32 for 2/4/8 bits, native for 3). */
#ifndef QTK_HUB_GPTQ_H
#define QTK_HUB_GPTQ_H

#include "hub/hub_internal.h"
#include "numfmt/scalar.h"

enum { HUB_GPTQ = 1, HUB_AWQ };

/* AWQ's order: field i of a word is output 8c + hub_awq_order[i]; output 8c + j is field
 * hub_awq_field[j] (the inverse). */
extern const unsigned hub_awq_order[8], hub_awq_field[8];

/* GPTQ's v1 ("gptq") stores z - 1; GPTQModel converts whole qzeros words by this constant
 * (one per field, carries and borrows crossing fields) for 2/4/8 bits, and per field
 * ((f ± 1) & 7) for 3 bits. */
static inline uint32_t hub_gptq_v1_step(unsigned bits) {
    return bits == 2 ? 0x55555555u : bits == 4 ? 0x11111111u : 0x01010101u;
}

typedef struct {
    int kind;            /* HUB_GPTQ, HUB_AWQ */
    unsigned bits;
    size_t N, K, G, ng;  /* ng = ceil(K / G) groups along K */
    bool v1;             /* GPTQ checkpoint_format "gptq": zero points stored minus one */
    qtk_elem scale_elem; /* the stored scales' element */
    bool act_order;      /* g_idx is not k / G: dequantized on load (part 3 is g_idx) */
} hub_gptq_param;

/* Field i (b bits) of an LSB-first bit stream whose 32-bit words are `stride` bytes apart. */
static inline uint32_t hub_stream_get(const uint8_t *w, size_t stride, size_t i, unsigned b) {
    size_t bit = i * b, wi = bit / 32;
    unsigned sh = (unsigned)(bit % 32);
    uint64_t v = qtk__ld32(w + wi * stride);
    if (sh + b > 32) v |= (uint64_t)qtk__ld32(w + (wi + 1) * stride) << 32;
    return (uint32_t)(v >> sh) & ((1u << b) - 1u);
}
/* ORs field i into a zeroed bit stream. */
static inline void hub_stream_put(uint8_t *w, size_t stride, size_t i, unsigned b, uint32_t code) {
    size_t bit = i * b, wi = bit / 32;
    unsigned sh = (unsigned)(bit % 32);
    uint64_t v = (uint64_t)code << sh;
    qtk__st32(w + wi * stride, qtk__ld32(w + wi * stride) | (uint32_t)v);
    if (sh + b > 32) qtk__st32(w + (wi + 1) * stride, qtk__ld32(w + (wi + 1) * stride) | (uint32_t)(v >> 32));
}

/* The [R, C] matrix of esz-byte elements at src as [C, R] at dst (in blocks, for the caches). */
void hub_transpose(const uint8_t *src, size_t R, size_t C, size_t esz, uint8_t *dst);

/* GPTQ/AWQ stored words to qtk's bytes (parts: qweight, scales, qzeros [, g_idx]); with
 * act_order, the reference values in the scales' element. */
qtk_status hub_gptq_decode(qtk__hub *h, const char *name, const hub_item *it, const uint8_t *const *part, uint8_t *out);

/* Writing (hub_gptq_write.c). */
qtk_status hub_gptq_plan(hub_wctx *wc, const qtk_ckpt_tensor *t, hub_wtensor *w);
qtk_status hub_gptq_config(hub_wctx *wc, json_t *q, json_t **hfq);
qtk_status hub_awq_plan(hub_wctx *wc, const qtk_ckpt_tensor *t, hub_wtensor *w);
qtk_status hub_awq_config(hub_wctx *wc, json_t *q, json_t **hfq);

#endif
