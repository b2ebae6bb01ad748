/* kernels.h — the hot loops, behind one table of function pointers.
 *
 * ref.c defines the bits. Accelerated implementations must produce identical bytes and
 * values; each entry may return false to say "not for this plan", and the caller then
 * uses the reference; a NULL entry means the same. All entries work on a range of rows [r0, r1) so that the caller
 * can split work across threads along boundaries it has checked are independent. */
#ifndef QTK_KERNELS_H
#define QTK_KERNELS_H

#include "mse.h"

#include "../gblock/gblock.h"

/* Conventions: x and out point at the first element of row r0 (element j of row r is at
 * (r - r0) * inner + j); per-group arrays (eff, stats->amax) are indexed by group - gbase,
 * so a caller can hold the scales of a few rows only. qtk__stats.bad holds absolute flat
 * indices. */

/* Per-group statistics gathered by the calibration pass. */
typedef struct qtk__stats {
    float *amax;     /* minmax: max |x| per group */
    double *sum;     /* absmean: completed 65536-element runs, summed in order */
    double *run;     /* absmean: the run in progress */
    size_t *count;   /* absmean: elements seen */
    size_t bad;      /* lowest index of a non-finite input seen, or SIZE_MAX */
} qtk__stats;

typedef struct qtk__kernels {
    const char *name;
    /* max |x| per group over rows [r0, r1) into st->amax (which holds the running max);
     * records the first non-finite index in st->bad. */
    bool (*amax_rows)(const qtk__plan *p, const float *x, qtk__stats *st, size_t gbase, size_t r0, size_t r1);
    /* Stored scales of groups [0, n) from their ranges alpha (SPEC §2 steps 2-5): raw =
     * alpha / p->div (then / g when two-level), rounded up to the scale dtype; the codes go
     * little-endian to codes (the scale region at the first of these groups), the effective
     * scales (g x stored, or stored) to eff. */
    bool (*finish_scales)(const qtk__plan *p, const float *alpha, size_t n, float g, uint8_t *codes, float *eff);
    /* Decodes n stored scales (their little-endian codes) into effective scales (g x
     * stored when two-level). Returns false if any scale is invalid (not finite, a ue4m3
     * sign bit) or an effective scale overflows: the caller then finds and reports it. */
    bool (*load_scales)(const qtk__plan *p, const uint8_t *codes, size_t n, float g, float *eff);
    /* fields of rows [r0, r1) into the zeroed values region vals, with effective scales eff */
    bool (*encode_rows)(const qtk__plan *p, const float *x, const float *eff, size_t gbase, uint8_t *vals, size_t r0,
                        size_t r1);
    /* values of rows [r0, r1) into out (dtype f32, f16 or bf16) */
    bool (*decode_rows)(const qtk__plan *p, const uint8_t *vals, const float *eff, size_t gbase, qtk_dtype dtype,
                        void *out, size_t r0, size_t r1);
    /* calibration mse: the stored scale of each of n groups (mse.h): codes, effective
     * scales, and optionally each group's error */
    bool (*mse_groups)(const qtk__mse_cfg *c, const qtk__mse_src *src, size_t n, float g, uint8_t *codes, float *eff,
                       double *err);
    /* store=ggml: nb blocks of format F at src into nb x F->qk f32 values, as
     * qtk__gb_dequant_ref computes them (NULL: that) */
    void (*gb_dequant)(const qtk__gb_fmt *F, const uint8_t *src, size_t nb, float *y);
} qtk__kernels;

QTK_INTERNAL extern const qtk__kernels qtk__kernels_ref;
QTK_INTERNAL extern const qtk__kernels qtk__kernels_portable;
#ifdef QTK_HAVE_AVX2
QTK_INTERNAL extern const qtk__kernels qtk__kernels_avx2;
#endif
#ifdef QTK_HAVE_AVX512
QTK_INTERNAL extern const qtk__kernels qtk__kernels_avx512;
#endif
#ifdef QTK_HAVE_NEON
QTK_INTERNAL extern const qtk__kernels qtk__kernels_neon;
#endif

/* Reference row loops (also used for absmean and finiteness checks). */
QTK_INTERNAL void qtk__ref_absmean_rows(const qtk__plan *p, const float *x, qtk__stats *st, size_t r0, size_t r1);
QTK_INTERNAL size_t qtk__ref_first_nonfinite(const float *x, size_t n);

/* The affine mode over qtk's layouts (ref_affine.c, every level): rows [r0, r1) of a tensor
 * (x and out point at its first element, eff and off hold every group's stored scale and
 * offset decoded); encode ORs into zeroed values. */
QTK_INTERNAL void qtk__affine_encode_rows(const qtk__plan *p, const float *x, const float *eff, const float *off,
                                          uint8_t *vals, size_t r0, size_t r1);
QTK_INTERNAL void qtk__affine_decode_rows(const qtk__plan *p, const uint8_t *vals, const float *eff, const float *off,
                                          qtk_dtype dtype, void *out, size_t r0, size_t r1);

/* The implementation chosen for this process (see dispatch.c). */
QTK_INTERNAL const qtk__kernels *qtk__kernels_active(void);

#endif
