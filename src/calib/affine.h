/* affine.h — the affine mode over qtk's layouts (docs/affine.md §2): each scale group's
 * stored scale and offset (calibration minmax or mse, or given), the fields, and reading the
 * groups' scales and offsets back from bytes. */
#ifndef QTK_CALIB_AFFINE_H
#define QTK_CALIB_AFFINE_H

#include "mse.h"

/* Quantizes x (numel values, none non-finite: checked here) into dst (the layout's
 * total_bytes) for affine plan p with the options' calibration, given scales/offsets and
 * weights w. */
QTK_INTERNAL qtk_status qtk__affine_quantize(const qtk__plan *p, const float *x, const qtk_quantize_options *o,
                                             const qtk__weights *w, int threads, uint8_t *dst);

/* The stored scale (eff) and offset (off) of every group of affine bytes, checked: scales
 * finite (unsigned dtypes without a sign bit), offsets finite, u8 zero points in the field
 * range. eff and off may be NULL (check only). */
QTK_INTERNAL qtk_status qtk__affine_load(const qtk__plan *p, const uint8_t *bytes, float *eff, float *off);

/* Dequantizes checked affine bytes into out (f32, f16 or bf16). */
QTK_INTERNAL qtk_status qtk__affine_dequantize(const qtk__plan *p, const uint8_t *bytes, qtk_dtype dtype, void *out,
                                               int threads);

#endif
