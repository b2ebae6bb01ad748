/* values.h — a checkpoint tensor's values as f32, whatever it is stored as, and a reusable
 * buffer so a pass over a checkpoint allocates for its largest tensor once. */
#ifndef QTK_VALUES_H
#define QTK_VALUES_H

#include "io/checkpoint.h"

typedef struct qtk_buf {
    void *p;
    size_t cap;
} qtk_buf;

/* Makes b hold at least n bytes (contents not kept). */
qtk_status qtk_buf_reserve(qtk_buf *b, size_t n);
void qtk_buf_free(qtk_buf *b);

/* The tensor's values as f32: raw float elements are decoded (f32 data that is aligned is
 * used in place, no copy), quantized ones dequantized. *out points into bytes or into buf. */
qtk_status qtk_values_f32(const qtk_ckpt_tensor *t, const uint8_t *bytes, qtk_buf *buf, const float **out);

#endif
