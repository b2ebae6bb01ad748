/* hub_ct.h — what compressed-tensors' reader (hub_ct.c) and writer (hub_ct_write.c) share. */
#ifndef QTK_HUB_CT_H
#define QTK_HUB_CT_H

#include "hub/hub_internal.h"

enum { CT_NONE = 0, CT_TENSOR, CT_CHANNEL, CT_GROUP, CT_BLOCK, CT_TENSOR_GROUP, CT_OTHER };

/* The divisor global scale of nvfp4-pack-quantized (HUB_LAYOUTS.md §4.2): the value is
 * fp4 x RN32(s / G), qtk's is fp4 x RN32(g x s). Given G and which ue4m3 block-scale codes
 * occur, the g that reproduces RN32(s / G) for every one of them, searched a few ulps around
 * RN32(1 / G); *exact is false (and RN32(1 / G) returned) when none does. */
float hub_ct_global_from_divisor(float G, const bool present[128], bool *exact);
/* The inverse for writing: a G whose read-back is exactly g, or RN32(1 / g) (*exact false). */
float hub_ct_divisor_from_global(float g, const bool present[128], bool *exact);

/* Stored bytes to qtk's (hub_ct_decode.c; hub_decode_fn / hub_deq_fn). */
/* nvfp4-pack-quantized: packed, scale, global (G) -> values, scales, g. */
qtk_status hub_ct_decode_nvfp4(qtk__hub *h, const char *name, const hub_item *it, const uint8_t *const *part, uint8_t *out);
/* ... and dequantized with the reference's RN32(s / G) when no g reproduces it. */
qtk_status hub_ct_deq_nvfp4(const qtk__hub *h, const hub_item *it, const qtk_ckpt_tensor *t, const uint8_t *bytes,
                            qtk_dtype dtype, void *out, bool *done);

/* pack-quantized ints: offset-binary words -> qtk's two's-complement u32 words, then scales. */
typedef struct {
    unsigned bits;
    size_t rows, cols, wpr; /* logical rows x cols, words per row */
} hub_ct_pack_param;
qtk_status hub_ct_decode_pack(qtk__hub *h, const char *name, const hub_item *it, const uint8_t *const *part, uint8_t *out);

/* Asymmetric ints with channel or group scales -> u{bits},...,zero=u8. Parts: weight, scale, zp. */
typedef struct {
    bool packed;            /* I32 offset-binary words (zero points packed along the rows), else I8 */
    unsigned bits;
    size_t O, K, wpr, gcols;
} hub_ct_zp_param;
qtk_status hub_ct_decode_zp(qtk__hub *h, const char *name, const hub_item *it, const uint8_t *const *part, uint8_t *out);

/* Zero points and activation order: (q - z) x s as F32. Parts: weight, scale, [zp], [g_idx]. */
typedef struct {
    bool packed;            /* I32 offset-binary words, else I8 */
    unsigned bits;
    size_t O, K, wpr;
    int strategy;
    size_t G, bh, bw, gcols; /* scale grid columns */
    qtk_elem scale_elem;
    int zp_part, gidx_part;  /* -1 if absent */
    qtk_elem zp_elem;
    bool zp_packed;
} hub_ct_deq_param;
qtk_status hub_ct_decode_deq(qtk__hub *h, const char *name, const hub_item *it, const uint8_t *const *part, uint8_t *out);

/* Writing (hub_ct_write.c). */
qtk_status hub_ct_plan(hub_wctx *wc, const qtk_ckpt_tensor *t, hub_wtensor *w);
qtk_status hub_ct_config(hub_wctx *wc, json_t *q, json_t **hfq);

#endif
