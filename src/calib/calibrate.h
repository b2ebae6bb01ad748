/* calibrate.h — from inputs (or caller-given scales) to stored scales (SPEC §2 steps 1-5). */
#ifndef QTK_CALIBRATE_H
#define QTK_CALIBRATE_H

#include "../kernels/kernels.h"

/* The scales of one quantization, decided before any field is encoded. */
typedef struct qtk__scales {
    size_t n;
    float *stored;  /* n stored scales, decoded (the values their codes mean) */
    uint32_t *codes;/* n codes in the scale dtype */
    float *eff;     /* n effective scales: global * stored (two-level) or stored */
    float global;   /* two-level global (1.0 otherwise) */
} qtk__scales;

QTK_INTERNAL void qtk__scales_free(qtk__scales *sc);

/* Calibrates from x (numel finite f32 values; a non-finite one is an error naming it). */
QTK_INTERNAL qtk_status qtk__scales_calibrate(const qtk__plan *p, const float *x, qtk_calibration cal, int threads,
                                              qtk__scales *out);
/* Uses caller-given scales (and global for two-level schemes). */
QTK_INTERNAL qtk_status qtk__scales_given(const qtk__plan *p, const float *scales, size_t n, const float *global,
                                          qtk__scales *out);
/* Turns raw per-group scales (already two-level-divided) into stored codes and values, and
 * the effective scales. raw has p->L.n_scales entries. */
QTK_INTERNAL qtk_status qtk__scales_finish(const qtk__plan *p, const float *raw, float global, qtk__scales *out);
/* Raw scales from per-group alphas (steps 2-3): fills raw[] and *global. */
QTK_INTERNAL void qtk__scales_from_alpha(const qtk__plan *p, const float *alpha, float *raw, float *global);

/* Describes flat element index i as "index i (coordinates [a, b, c])". */
QTK_INTERNAL const char *qtk__index_str(const qtk__plan *p, size_t i, char *buf, size_t cap);

#endif
