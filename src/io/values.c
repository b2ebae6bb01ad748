/* values.c — see values.h. */
#include "io/values.h"

#include "common/internal.h"

#include <stdint.h>
#include <string.h>
#include <stdlib.h>

qtk_status qtk__buf_reserve(qtk__buf *b, size_t n) {
    if (n <= b->cap && b->p) return QTK_OK;
    free(b->p);
    b->p = malloc(n ? n : 1);
    b->cap = b->p ? n : 0;
    if (!b->p) return qtk__err(QTK_E_NOMEM, "out of memory for %zu bytes", n);
    return QTK_OK;
}

void qtk__buf_free(qtk__buf *b) {
    free(b->p);
    b->p = NULL;
    b->cap = 0;
}

qtk_status qtk__values_f32(const qtk_ckpt_tensor *t, const uint8_t *bytes, qtk__buf *buf, const float **out) {
    size_t need;
    if (!qtk__mul_ok(t->numel, sizeof(float), &need)) return qtk__err(QTK_E_SHAPE, "tensor '%s' is too large", t->name);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* f32 bytes in the file are little-endian floats already: read them where they lie */
    if (!t->quantized && (t->elem == QTK_ELEM_F32 || t->elem == QTK_ELEM_FLEX32) &&
        (uintptr_t)bytes % _Alignof(float) == 0) {
        *out = (const float *)(const void *)bytes;
        return QTK_OK;
    }
#endif
    qtk_status st = qtk__buf_reserve(buf, need);
    if (st) return st;
    if (t->quantized)
        st = qtk_dequantize_bytes(bytes, t->nbytes, t->shape, t->rank, &t->scheme, QTK_DTYPE_F32, buf->p, t->numel);
    else
        st = qtk__elem_to_f32(t->elem, bytes, t->numel, buf->p);
    if (st) return qtk__err_context(st, "tensor '%s'", t->name);
    *out = buf->p;
    return QTK_OK;
}

qtk_elem qtk__elem_of_dtype(qtk_dtype d) {
    return d == QTK_DTYPE_F16 ? QTK_ELEM_F16 : d == QTK_DTYPE_BF16 ? QTK_ELEM_BF16 : QTK_ELEM_F32;
}

qtk_dtype qtk__dtype_of_elem(qtk_elem e) {
    return e == QTK_ELEM_F16 ? QTK_DTYPE_F16 : e == QTK_ELEM_BF16 ? QTK_DTYPE_BF16 : QTK_DTYPE_F32;
}

qtk_status qtk__values_convert(const qtk_ckpt_tensor *t, const uint8_t *bytes, qtk_dtype dtype, void *out) {
    if (t->quantized || !qtk_elem_is_float(t->elem))
        return qtk__err(QTK_E_INTERNAL, "tensor '%s' is not a raw float tensor", t->name);
    qtk_elem want = qtk__elem_of_dtype(dtype);
    if (t->elem == want || (want == QTK_ELEM_F32 && t->elem == QTK_ELEM_FLEX32)) {
        if (t->nbytes) memcpy(out, bytes, t->nbytes); /* little-endian in the file and here */
        return QTK_OK;
    }
    if (dtype == QTK_DTYPE_F32) return qtk__elem_to_f32(t->elem, bytes, t->numel, out);
    /* through f32 a slice at a time (F4 slices start on whole bytes) */
    enum { SLICE = 4096 };
    float x[SLICE];
    unsigned bits = qtk_elem_bits(t->elem);
    uint8_t *o = out;
    for (size_t i = 0; i < t->numel; i += SLICE) {
        size_t n = t->numel - i < SLICE ? t->numel - i : SLICE;
        qtk_status st = qtk__elem_to_f32(t->elem, bytes + i * bits / 8, n, x);
        if (st) return qtk__err_context(st, "tensor '%s'", t->name);
        for (size_t k = 0; k < n; k++) qtk__st16(o + 2 * (i + k), (uint16_t)qtk_fmt_encode(dtype, x[k]));
    }
    return QTK_OK;
}
