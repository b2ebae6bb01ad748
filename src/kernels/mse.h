/* mse.h — calibration mse: the error-minimizing choice of a scale group's stored scale, as
 * the kernels run it (docs/quantizers.md describes the method).
 *
 * For one group of n <= QTK__MSE_LANE_MAX elements x (weights w >= 0, or none) and the
 * two-level global g (1 for one-level schemes), the search returns the stored scale code
 * whose fields — nearest rounding, exactly what the encoder then writes — give the least
 * squared error sum_j w_j (x_j - x'_j)^2. The reference (ref_mse.c) defines the bits; every
 * other level computes the same, step for step:
 *
 *   1. amax = max |x| and the sign of the first element reaching it. c0 = the minmax code
 *      (alpha / div, / g, rounded up: SPEC §2). amax == 0: c0, error 0.
 *   2. Normalisation: xn = x * m with m = 2^k putting amax in [1, 2) (exact: fields and
 *      errors are those of x, scaled by m and m^2).
 *   3. Candidates, each scored by its exact error (f32, summed in element order):
 *      - coarse scale dtypes: ue8m0 (MX) the code below c0 too; ue4m3 the codes nearest to
 *        c0's raw scale times a few factors (where the best code of nearly every group falls);
 *      - otherwise: trial scales (amax / extent) * f_t for the sign(s) of the configuration,
 *        each giving fields by nearest rounding (ties to even) and its least-squares scale
 *        r = sum w x v / sum w v^2; the trial with the largest sum(w x v)^2 / sum(w v^2)
 *        proposes r; the codes just below and above r (on the dtype's grid) are scored; then
 *        one Lloyd step: the least-squares scale of the best candidate's fields proposes two
 *        more codes.
 *   4. The choice: c0 unless a candidate's error times (1 + QTK__MSE_MARGIN) is below
 *      c0's; among the others the lowest error, the first on ties. The margin makes "never
 *      worse than minmax" hold for the exact (double) error, whatever f32 rounding did to
 *      the scores.
 * A group holding a non-finite value gets effective scale NaN (its code is unspecified):
 * the caller finds and reports the value.
 * Ternary values (q2s) use the exact search instead (qtk__mse_ternary in ref_mse.c): the
 * optimal scale over every support set, then its two neighbouring codes. */
#ifndef QTK_MSE_H
#define QTK_MSE_H

#include "plan.h"

#define QTK__MSE_LANE_MAX 256u /* longest group the kernels search (longer: calib/mse.c) */
#define QTK__MSE_MAX_TRIALS 16
#define QTK__MSE_MARGIN 0x1p-12f
#define QTK__MSE_ROUND 12582912.0f /* 1.5 x 2^23: (q + R) - R rounds |q| < 2^22 to nearest even */

typedef enum { QTK__MSE_INT, QTK__MSE_MF, QTK__MSE_LUT } qtk__mse_kind;
typedef enum {
    QTK__MSE_SIGN_POS,  /* positive scales only (symmetric value sets, unsigned scale dtypes) */
    QTK__MSE_SIGN_MAX,  /* one sign: the max-magnitude element lands on the longer side */
    QTK__MSE_SIGN_BOTH, /* both signs */
} qtk__mse_sign;

typedef struct qtk__mse_cfg {
    const qtk__plan *p;
    qtk__mse_kind kind;
    qtk_dtype dt;        /* stored scale dtype */
    unsigned sz;         /* its bytes */
    bool grid;           /* enumerate codes (ue8m0, ue4m3) instead of trials */
    int n_grid;          /* candidates after c0: */
    int grid_off[16];    /*   ue8m0: the codes c0 + grid_off[i] (clamped to 0..grid_max) */
    float grid_f[16];    /*   ue4m3: the codes nearest to raw0 x grid_f[i] (raw0: c0's raw scale) */
    int grid_max;        /* the largest code */
    qtk__mse_sign sign;
    float sign_max;      /* SIGN_MAX: trial scale sign = sign_max x sign of the max element */
    int n_trials;        /* per sign */
    float trial[QTK__MSE_MAX_TRIALS]; /* scale multipliers f_t */
    float ext_pos, ext_neg; /* extent of the value set above and below 0 */
    bool lloyd;
    bool ls_pair;        /* a least-squares scale proposes both neighbouring codes (else the nearest) */
    bool ternary;        /* q2s: exact ternary search (reference only, every level) */
    bool signed_dt;      /* f32, f16, bf16: codes carry a sign */
    float zero_value;    /* value of the field an element gets under scale 0 */
} qtk__mse_cfg;

/* One group: len (1..QTK__MSE_LANE_MAX) values and their weights (NULL: all 1). */
typedef struct qtk__mse_src {
    const float *x, *w;
    size_t len;
} qtk__mse_src;

/* Fills the configuration for plan p (the lookup table, if any, already in p). */
QTK_INTERNAL void qtk__mse_cfg_init(qtk__mse_cfg *c, const qtk__plan *p);

/* The reference search of n groups: codes (little-endian, c->sz bytes each) at codes,
 * effective scales (g x stored, or stored) in eff, and (optional) each group's error in
 * err (real units, double). */
QTK_INTERNAL void qtk__ref_mse_groups(const qtk__mse_cfg *c, const qtk__mse_src *src, size_t n, float g,
                                      uint8_t *codes, float *eff, double *err);

/* Ternary (q2s): the scale minimizing the error over every support set — sort |x| (ties by
 * index), maximize (sum over the k largest of w|x|)^2 / (sum of their w) — in double.
 * scratch holds n 12-byte items; w[j % wperiod] weighs element j (w NULL: 1). */
QTK_INTERNAL double qtk__mse_ternary_scale(const float *x, const float *w, size_t wperiod, size_t n, void *scratch);
#define QTK__MSE_TERN_ITEM 12u

/* ---- scalar pieces shared with calib/mse.c (the search of longer groups) ---- */

/* Keeps a proposed scale finite. */
static inline float qtk__mse_clamp(float s) {
    const float mx = 3.40282347e38f;
    return s < -mx ? -mx : s > mx ? mx : s;
}

/* Normalisation of a group with max |x| = amax > 0: m = 2^k with amax * m in [1, 2) (k
 * clamped to -126..126). */
static inline float qtk__mse_norm(float amax) {
    int e = (int)(qtk__f32_bits(amax) >> 23);
    int k = e ? 127 - e : 126;
    if (k < -126) k = -126;
    if (k > 126) k = 126;
    return qtk__bits_f32((uint32_t)(127 + k) << 23);
}

/* The code of the scale dtype nearest to |s| from below (floor) or above (ceil), with the
 * sign of s for the signed dtypes. */
static inline uint32_t qtk__mse_code_ceil(const qtk__mse_cfg *c, float s) {
    if (c->dt == QTK_DTYPE_F32) return qtk__f32_bits(s);
    float a = fabsf(s);
    uint32_t code = qtk_fmt_round_up(c->dt, a);
    if (c->signed_dt && s < 0.0f) code |= 0x8000u;
    return code;
}
static inline uint32_t qtk__mse_code_floor(const qtk__mse_cfg *c, float s) {
    if (c->dt == QTK_DTYPE_F32) return qtk__f32_bits(s);
    float a = fabsf(s);
    uint32_t code = qtk_fmt_round_up(c->dt, a);
    if (code > 0 && qtk_fmt_decode(c->dt, code) > a) code--;
    if (c->signed_dt && s < 0.0f) code |= 0x8000u;
    return code;
}

/* The nearer of the two (below on a tie). */
static inline uint32_t qtk__mse_code_nearest(const qtk__mse_cfg *c, float s) {
    uint32_t lo = qtk__mse_code_floor(c, s), hi = qtk__mse_code_ceil(c, s);
    float a = fabsf(s);
    float dl = a - fabsf(qtk_fmt_decode(c->dt, lo)), dh = fabsf(qtk_fmt_decode(c->dt, hi)) - a;
    return dh < dl ? hi : lo;
}

/* Trial-rounded value (the fields a trial scale proposes: nearest, ties to even) and the
 * exact field value (what the encoder writes) of q = x / e, as numbers. */
static inline float qtk__mse_mf_grid(const qtk__plan *p, float y) {
    int M = p->fmt == QTK_DTYPE_E4M3 ? 3 : p->fmt == QTK_DTYPE_E5M2 ? 2 : 1;
    int bias = p->fmt == QTK_DTYPE_E4M3 ? 7 : p->fmt == QTK_DTYPE_E5M2 ? 15 : 1;
    uint32_t b = qtk__f32_bits(y), sign = b & 0x80000000u, ab = b & 0x7fffffffu;
    uint32_t nmin = (uint32_t)(1 - bias + 127) << 23;
    uint32_t e = ab & 0x7f800000u;
    if (e < nmin) e = nmin;
    float cc = qtk__bits_f32(e + ((uint32_t)(23 - M) << 23));
    float a = qtk__bits_f32(ab);
    float r = (a + cc) - cc;
    return qtk__bits_f32(qtk__f32_bits(r) | sign);
}

static inline float qtk__mse_value_exact(const qtk__mse_cfg *c, float q) {
    const qtk__plan *p = c->p;
    switch (c->kind) {
    case QTK__MSE_INT: {
        float r = roundf(q);
        return r < p->lo ? p->lo : r > p->hi ? p->hi : r;
    }
    case QTK__MSE_MF: return qtk__mse_mf_grid(p, q < -p->fmax ? -p->fmax : q > p->fmax ? p->fmax : q);
    default: return p->table[qtk__lookup_nearest(p, q)];
    }
}

static inline float qtk__mse_value_trial(const qtk__mse_cfg *c, float q) {
    if (c->kind != QTK__MSE_INT) return qtk__mse_value_exact(c, q);
    float r = (q + QTK__MSE_ROUND) - QTK__MSE_ROUND;
    return r < c->p->lo ? c->p->lo : r > c->p->hi ? c->p->hi : r;
}

/* The effective scale of a code: g x stored (two-level) or stored. */
static inline float qtk__mse_eff(const qtk__mse_cfg *c, uint32_t code, float g) {
    float v = qtk_fmt_decode(c->dt, code);
    return c->p->two_level ? g * v : v;
}

#endif
