/* hub_ct.h — what compressed-tensors' reader (hub_ct.c) and writer (hub_ct_write.c) share. */
#ifndef QTK_HUB_CT_H
#define QTK_HUB_CT_H

#include "io/hub_internal.h"

enum { CT_NONE = 0, CT_TENSOR, CT_CHANNEL, CT_GROUP, CT_BLOCK, CT_TENSOR_GROUP, CT_OTHER };

/* The divisor global scale of nvfp4-pack-quantized (HUB_LAYOUTS.md §4.2): the value is
 * fp4 x RN32(s / G), qtk's is fp4 x RN32(g x s). Given G and which ue4m3 block-scale codes
 * occur, the g that reproduces RN32(s / G) for every one of them, searched a few ulps around
 * RN32(1 / G); *exact is false (and RN32(1 / G) returned) when none does. */
float hub_ct_global_from_divisor(float G, const bool present[128], bool *exact);
/* The inverse for writing: a G whose read-back is exactly g, or RN32(1 / g) (*exact false). */
float hub_ct_divisor_from_global(float g, const bool present[128], bool *exact);

/* Writing (hub_ct_write.c). */
qtk_status hub_ct_plan(hub_wctx *wc, const qtk_ckpt_tensor *t, hub_wtensor *w);
qtk_status hub_ct_config(hub_wctx *wc, json_t *q, json_t **hfq);

#endif
