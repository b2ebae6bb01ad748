/* exec.h — runs kernel row loops over a whole tensor, split across threads where the
 * split cannot change a single bit of the result. */
#ifndef QTK_EXEC_H
#define QTK_EXEC_H

#include "../kernels/kernels.h"

QTK_INTERNAL qtk_status qtk__exec_amax(const qtk__plan *p, const float *x, qtk__stats *st, int threads);
QTK_INTERNAL qtk_status qtk__exec_encode(const qtk__plan *p, const float *x, const float *eff, uint8_t *vals,
                                         int threads);
QTK_INTERNAL qtk_status qtk__exec_decode(const qtk__plan *p, const uint8_t *vals, const float *eff, qtk_dtype dtype,
                                         void *out, int threads);

/* Single-threaded range versions (rows [r0, r1); x/out point at row r0). */
QTK_INTERNAL qtk_status qtk__exec_amax_rows(const qtk__plan *p, const float *x, qtk__stats *st, size_t r0, size_t r1);
QTK_INTERNAL qtk_status qtk__exec_encode_rows(const qtk__plan *p, const float *x, const float *eff, uint8_t *vals,
                                              size_t r0, size_t r1);
QTK_INTERNAL qtk_status qtk__exec_decode_rows(const qtk__plan *p, const uint8_t *vals, const float *eff, float *out,
                                              size_t r0, size_t r1);

#endif
