/* tensor_internal.h — pieces of the tensor operations shared by tensor.c and convert.c. */
#ifndef QTK_TENSOR_INTERNAL_H
#define QTK_TENSOR_INTERNAL_H

#include "../calib/calibrate.h"

/* Plan for Burn-layout bytes: checks the exact length and reads the lookup table. */
QTK_INTERNAL qtk_status qtk__bytes_plan(const void *bytes, size_t len, const size_t *shape, int rank,
                                        const qtk_scheme *s, qtk__plan *p);
/* Decodes and checks the stored scales into eff (optional) and the global. */
QTK_INTERNAL qtk_status qtk__bytes_scales(const qtk__plan *p, const uint8_t *b, float *eff, float *global);
/* Writes the global and the lookup table after the scales. */
QTK_INTERNAL void qtk__write_tail(const qtk__plan *p, float global, uint8_t *dst);
/* Checks quantize options against a plan (calibration, globals, degenerate tables). */
QTK_INTERNAL qtk_status qtk__check_calibration(const qtk__plan *p, const qtk_quantize_options *o);
/* A tensor with uninitialised bytes for scheme s and layout L. */
QTK_INTERNAL qtk_status qtk__tensor_new(const qtk_scheme *s, const qtk_layout *L, qtk_tensor **out);
QTK_INTERNAL uint8_t *qtk__tensor_mutable_bytes(qtk_tensor *t);
QTK_INTERNAL qtk_status qtk__check_x(const float *x, size_t numel);

/* ---- store=ggml tensors (gb_tensor.c, docs/affine.md §3) ---- */

/* Every block's f16 scales finite; the error names the block, its row and byte. */
QTK_INTERNAL qtk_status qtk__gb_check(const qtk__gb_fmt *F, const uint8_t *bytes, const qtk_layout *L);
/* Dequantizes checked bytes into out (f32, f16 or bf16; numel values). */
QTK_INTERNAL void qtk__gb_dequantize(const qtk__gb_fmt *F, const uint8_t *bytes, const qtk_layout *L, qtk_dtype dtype,
                                     void *out, int threads);
/* Each group's scale S_g (offsets: its stored offset, docs/affine.md) into out (n_scales). */
QTK_INTERNAL qtk_status qtk__gb_scales(const qtk__gb_fmt *F, const uint8_t *bytes, const qtk_layout *L, bool offsets,
                                       float *out);
/* Quantizes x (numel values, the layout's) into dst (total_bytes) with the options'
 * calibration and weights. */
QTK_INTERNAL qtk_status qtk__gb_quantize(const qtk__gb_fmt *F, const float *x, const qtk_layout *L,
                                         const qtk_quantize_options *o, uint8_t *dst);

#endif
