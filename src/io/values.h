/* values.h — a checkpoint tensor's values as f32, whatever it is stored as, and a reusable
 * buffer so a pass over a checkpoint allocates for its largest tensor once. */
#ifndef QTK_VALUES_H
#define QTK_VALUES_H

#include "io/checkpoint.h"

typedef struct qtk__buf {
    void *p;
    size_t cap;
} qtk__buf;

/* Makes b hold at least n bytes (contents not kept). */
qtk_status qtk__buf_reserve(qtk__buf *b, size_t n);
void qtk__buf_free(qtk__buf *b);

/* The tensor's values as f32: raw float elements are decoded (f32 data that is aligned is
 * used in place, no copy), quantized ones dequantized. *out points into bytes or into buf. */
qtk_status qtk__values_f32(const qtk_ckpt_tensor *t, const uint8_t *bytes, qtk__buf *buf, const float **out);

#endif
