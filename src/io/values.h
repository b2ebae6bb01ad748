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

/* A raw float tensor's values as numel elements of dtype (f32, f16 or bf16; converted from
 * f32, round to nearest even; a tensor already in dtype is copied as it is). */
qtk_status qtk__values_convert(const qtk_ckpt_tensor *t, const uint8_t *bytes, qtk_dtype dtype, void *out);
/* The element type of a dtype's values (F32, F16, BF16), and back (F32 for the rest). */
qtk_elem qtk__elem_of_dtype(qtk_dtype d);
qtk_dtype qtk__dtype_of_elem(qtk_elem e);

#endif
