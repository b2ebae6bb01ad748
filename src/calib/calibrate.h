/* calibrate.h — from inputs (or caller-given scales) to stored scales (SPEC §2 steps 1-5).
 *
 * Scales are written straight into the tensor's scale region (their codes) and into an
 * array of effective scales (global x stored value) that the encoder divides by. */
#ifndef QTK_CALIBRATE_H
#define QTK_CALIBRATE_H

#include "../kernels/kernels.h"

typedef struct qtk__scales {
    size_t n;
    float *eff;   /* n effective scales */
    float global; /* two-level global (1.0 otherwise) */
} qtk__scales;

QTK_INTERNAL qtk_status qtk__scales_alloc(const qtk__plan *p, qtk__scales *sc);
QTK_INTERNAL void qtk__scales_free(qtk__scales *sc);

/* The two-level global for per-group ranges alpha[0..n): max(max_i(alpha_i / div) / DMAX,
 * 2^-126); 1.0 for one-level schemes. */
QTK_INTERNAL float qtk__scales_global(const qtk__plan *p, const float *alpha, size_t n);

/* From per-group ranges (max |x| or mean |x|) to stored codes (in dst's scale region) and
 * effective scales. */
QTK_INTERNAL qtk_status qtk__scales_from_alpha(const qtk__plan *p, const float *alpha, uint8_t *dst,
                                               qtk__scales *sc);

/* Per-group ranges (max |x| or mean |x|) of x into alpha (zeroed, n_scales entries); a
 * non-finite input is an error naming it. */
QTK_INTERNAL qtk_status qtk__calibrate_alpha(const qtk__plan *p, const float *x, qtk_calibration cal, int threads,
                                             float *alpha);
/* Calibrates from x (numel values; a non-finite one is an error naming it). */
QTK_INTERNAL qtk_status qtk__scales_calibrate(const qtk__plan *p, const float *x, qtk_calibration cal, int threads,
                                              uint8_t *dst, qtk__scales *sc);
/* Uses caller-given scales (and the global for two-level schemes). */
QTK_INTERNAL qtk_status qtk__scales_given(const qtk__plan *p, const float *scales, size_t n, const float *global,
                                          uint8_t *dst, qtk__scales *sc);

/* absmean: per-group means from the statistics gathered by the absmean pass. */
QTK_INTERNAL void qtk__absmean_alpha(const qtk__plan *p, const qtk__stats *st, float *alpha);

/* Describes flat element index i as "index i (coordinates [a, b, c])". */
QTK_INTERNAL const char *qtk__index_str(const qtk__plan *p, size_t i, char *buf, size_t cap);
/* The error for a non-finite input at index bad of x. */
QTK_INTERNAL qtk_status qtk__nonfinite_error(const qtk__plan *p, float v, size_t bad, const char *what);

#endif
