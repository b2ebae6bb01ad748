/* ref_affine.c — the affine mode over qtk's layouts (docs/affine.md §2): fields of rows from
 * the groups' stored scales and offsets, and values back. Plain C at every kernel level (the
 * vector kernels decline affine plans), so the bits are the same everywhere. */
#include "kernels.h"

void qtk__affine_encode_rows(const qtk__plan *p, const float *x, const float *eff, const float *off, uint8_t *vals,
                             size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; r++) {
        qtk__row ri;
        qtk__plan_row(p, r, &ri);
        const float *xr = x + r * p->inner;
        for (size_t j = 0; j < p->inner; j++) {
            size_t g = ri.scale_base + j / p->blk_last;
            uint32_t code = qtk__encode_affine(p, xr[j], eff[g], off[g]);
            if (p->pack_last) qtk__field_put(p, vals, ri.unit_base + j / p->fpu, (unsigned)(j % p->fpu), code);
            else qtk__field_put(p, vals, ri.unit_base + j, ri.slot, code);
        }
    }
}

void qtk__affine_decode_rows(const qtk__plan *p, const uint8_t *vals, const float *eff, const float *off,
                             qtk_dtype dtype, void *out, size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; r++) {
        qtk__row ri;
        qtk__plan_row(p, r, &ri);
        size_t base = r * p->inner;
        for (size_t j = 0; j < p->inner; j++) {
            uint32_t code = p->pack_last ? qtk__field_get(p, vals, ri.unit_base + j / p->fpu, (unsigned)(j % p->fpu))
                                         : qtk__field_get(p, vals, ri.unit_base + j, ri.slot);
            size_t g = ri.scale_base + j / p->blk_last;
            float v = qtk__decode_affine(p, code, eff[g], off[g]);
            switch (dtype) {
            case QTK_DTYPE_F16: ((uint16_t *)out)[base + j] = qtk__f32_to_f16(v); break;
            case QTK_DTYPE_BF16: ((uint16_t *)out)[base + j] = qtk__f32_to_bf16(v); break;
            default: ((float *)out)[base + j] = v; break;
            }
        }
    }
}
