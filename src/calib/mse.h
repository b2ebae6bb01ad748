/* mse.h (calib) — calibration mse over a whole tensor, importance weights, and fitted
 * tables (table=fit). kernels/mse.h searches one group; this drives it over every group
 * (threads, chunks, groups gathered from N-D blocks, groups longer than the kernels take),
 * chooses the two-level global, and fits tables. docs/quantizers.md has the method. */
#ifndef QTK_CALIB_MSE_H
#define QTK_CALIB_MSE_H

#include "../kernels/kernels.h"

/* Importance weights resolved against a plan: the weights of row r (inner of them, a row
 * being the last dimension) start at w + (r / row_div) * inner, or at w when row_div is 0
 * (one weight per column). Per element: row_div 1; per (first index, column) of a rank >= 3
 * tensor: row_div = rows / shape[0]. */
typedef struct qtk__weights {
    const float *w; /* NULL: every element weighs 1 */
    size_t row_div;
    size_t inner;
} qtk__weights;

static inline const float *qtk__weights_row(const qtk__weights *w, size_t r) {
    return !w->w ? NULL : w->row_div ? w->w + (r / w->row_div) * w->inner : w->w;
}
/* the weight of flat element i */
static inline float qtk__weights_at(const qtk__weights *w, size_t i) {
    return qtk__weights_row(w, i / w->inner)[i % w->inner];
}

/* Checks opts' weights against the plan (count, finite, >= 0) into *out. */
QTK_INTERNAL qtk_status qtk__weights_resolve(const qtk__plan *p, const qtk_quantize_options *o, qtk__weights *out);

/* Calibration mse of x into dst's scale region and, with encode, its values region; two-
 * level schemes choose the global (*global). threads: as qtk_quantize_options. */
QTK_INTERNAL qtk_status qtk__mse_quantize(const qtk__plan *p, const float *x, const qtk__weights *w, int threads,
                                          uint8_t *dst, float *global);

/* One search pass at global g (1 for one-level): codes into dst, effective scales into
 * eff_all and errors into err_all (optional, n_scales each), the fields too when encode;
 * *total (optional) gets the sum of the groups' errors. *bad: the lowest non-finite input
 * index, *bad_group: the lowest group whose effective scale overflows (SIZE_MAX: none). */
QTK_INTERNAL qtk_status qtk__mse_pass(const qtk__plan *p, const float *x, const qtk__weights *w, float g, int threads,
                                      uint8_t *dst, bool encode, float *eff_all, double *err_all, double *total,
                                      size_t *bad, size_t *bad_group);

/* table=fit: fits p's table to x (p->fit must be set) for calibration cal, or to the given
 * effective scales eff (n_scales; NULL to calibrate), with weights w. scratch: a buffer of
 * the tensor's total_bytes (codes of intermediate searches go there). */
QTK_INTERNAL qtk_status qtk__fit_table(qtk__plan *p, const float *x, const qtk__weights *w, qtk_calibration cal,
                                       const float *eff, int threads, uint8_t *scratch);

#endif
