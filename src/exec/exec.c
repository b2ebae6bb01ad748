/* exec.c — drives the kernels over all rows. */
#include "exec.h"

qtk_status qtk__exec_amax_rows(const qtk__plan *p, const float *x, qtk__stats *st, size_t r0, size_t r1) {
    const qtk__kernels *k = qtk__kernels_active();
    if (!k->amax_rows || !k->amax_rows(p, x, st, r0, r1)) qtk__kernels_ref.amax_rows(p, x, st, r0, r1);
    return QTK_OK;
}

qtk_status qtk__exec_encode_rows(const qtk__plan *p, const float *x, const float *eff, uint8_t *vals, size_t r0,
                                 size_t r1) {
    const qtk__kernels *k = qtk__kernels_active();
    if (!k->encode_rows || !k->encode_rows(p, x, eff, vals, r0, r1)) qtk__kernels_ref.encode_rows(p, x, eff, vals, r0, r1);
    return QTK_OK;
}

static void decode_rows(const qtk__plan *p, const uint8_t *vals, const float *eff, qtk_dtype dtype, void *out,
                        size_t r0, size_t r1) {
    const qtk__kernels *k = qtk__kernels_active();
    if (!k->decode_rows || !k->decode_rows(p, vals, eff, dtype, out, r0, r1))
        qtk__kernels_ref.decode_rows(p, vals, eff, dtype, out, r0, r1);
}

qtk_status qtk__exec_decode_rows(const qtk__plan *p, const uint8_t *vals, const float *eff, float *out, size_t r0,
                                 size_t r1) {
    decode_rows(p, vals, eff, QTK_DTYPE_F32, out, r0, r1);
    return QTK_OK;
}

qtk_status qtk__exec_amax(const qtk__plan *p, const float *x, qtk__stats *st, int threads) {
    (void)threads;
    return qtk__exec_amax_rows(p, x, st, 0, p->rows);
}

qtk_status qtk__exec_encode(const qtk__plan *p, const float *x, const float *eff, uint8_t *vals, int threads) {
    (void)threads;
    return qtk__exec_encode_rows(p, x, eff, vals, 0, p->rows);
}

qtk_status qtk__exec_decode(const qtk__plan *p, const uint8_t *vals, const float *eff, qtk_dtype dtype, void *out,
                            int threads) {
    (void)threads;
    decode_rows(p, vals, eff, dtype, out, 0, p->rows);
    return QTK_OK;
}
