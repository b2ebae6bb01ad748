/* mm_gb.h — store=ggml's integer path (precision fast), shared by the scalar kernel (mm_gb.c)
 * and the vector body (mm_body_gb.h).
 *
 * Each row of x is quantized per ggml block (QK = 256 for the K types, as ggml's Q8_K; 32 for
 * Q4_1/Q5_0/Q5_1, as Q8_0/Q8_1) by qtk__mm_quantize_row: s_b = max|x| / 127 and q int8. The
 * activations of a block are laid out in the weights' plane order (gb_pos), beside their
 * per-16 sums (K types) or their block sum (the 32 types). For block b of output (m, n):
 *   K affine (Q2_K, Q4_K, Q5_K):  isum = Σ_s sc_s Σ_{k in s} u_k q_k,  msum = Σ_s mn_s Σ_{k in s} q_k
 *                                 t = fl(fl(d s_b) isum) - fl(fl(dmin s_b) msum)
 *   K symmetric (Q3_K, Q6_K):     isum = Σ_s sc_s Σ_{k in s} v_k q_k      t = fl(fl(d s_b) isum)
 *   Q4_1, Q5_1:                   isum = Σ_k u_k q_k, xsum = Σ_k q_k     t = fl(fl(d s_b) isum) + fl(fl(m s_b) xsum)
 *   Q5_0:                         isum = Σ_k v_k q_k                     t = fl(fl(d s_b) isum)
 * (u the unsigned field, v the signed value; sc, mn the sub-scales and sub-mins; the integers
 * are exact, converted to f32 once;
 * d s_b and dmin s_b clamped to +-FLT_MAX so that a zero sum gives 0, not 0 x inf). Block b
 * adds into lane b mod 8, A_{b mod 8} = A_{b mod 8} + t_b, over the blocks in order (when the
 * row's blocks are not a multiple of 8, the lanes past its last block get + 0 once more); then
 * y = ((A0 + A1) + (A2 + A3)) + ((A4 + A5) + (A6 + A7)) + bias.
 * Every level computes these integers exactly and then this same scalar arithmetic: the bits are
 * the same at every level and for every thread count.
 * The bound of qtk_matmul.h holds with activation blocks of QK. */
#ifndef QTK_MM_GB_H
#define QTK_MM_GB_H

#include "mm.h"

#include <float.h>

/* The position of element e of a block in the activations' layout: the weights' planes. */
static inline unsigned qtk__gb_pos(const qtk__gb_fmt *F, unsigned e) {
    switch (F->f) {
    case QTK__GF_Q4_K:
    case QTK__GF_Q5_K: { /* e = 64c + r: plane r >= 32, byte 32c + r % 32 */
        unsigned r = e % 64;
        return (r >= 32 ? 128u : 0u) + 32 * (e / 64) + r % 32;
    }
    case QTK__GF_Q6_K: /* e = 128h + 64p + t: plane p, byte 64h + t */
        return 128 * ((e % 128) / 64) + 64 * (e / 128) + e % 64;
    case QTK__GF_Q2_K:
    case QTK__GF_Q3_K: /* e = 128h + 32p + l: plane p, byte 32h + l */
        return 64 * ((e % 128) / 32) + 32 * (e / 128) + e % 32;
    default: return e; /* the 32 types: natural order */
    }
}

/* Planes of the K layouts: how many, and their bytes. */
static inline unsigned qtk__gb_planes(const qtk__gb_fmt *F) {
    return F->f == QTK__GF_Q2_K || F->f == QTK__GF_Q3_K ? 4u : F->qk == 256 ? 2u : 1u;
}

/* The group of plane byte j of plane p (K types). */
static inline unsigned qtk__gb_plane_group(qtk__gfmt f, unsigned p, unsigned j) {
    unsigned k = j / 16;
    switch (f) {
    case QTK__GF_Q4_K:
    case QTK__GF_Q5_K: return 2 * (k / 2) + p;
    case QTK__GF_Q6_K: return 8 * (k / 4) + 4 * p + k % 4;
    default: return 8 * (k / 2) + 2 * p + k % 2; /* Q2_K, Q3_K */
    }
}

static inline float qtk__gb_clampf(float v) { return v > FLT_MAX ? FLT_MAX : v < -FLT_MAX ? -FLT_MAX : v; }

/* The float part of one block: isum, msum (or xsum) as above, d and m the block's f16 words
 * decoded (exact); affine: a min or offset term, sub: subtracted (the K types). */
static inline float qtk__gb_term_f(bool affine, bool sub, float d, float m, float sx, int32_t isum, int32_t msum) {
    float a = d * sx;
    a = qtk__gb_clampf(a);
    float t = a * (float)isum;
    if (!affine) return t;
    float b = m * sx;
    b = qtk__gb_clampf(b);
    float t2 = b * (float)msum;
    return sub ? t - t2 : t + t2;
}
static inline float qtk__gb_term(const qtk__gb_fmt *F, float d, float m, float sx, int32_t isum, int32_t msum) {
    return qtk__gb_term_f(F->affine, F->super, d, m, sx, isum, msum);
}

/* the 32 types' 8 lanes added up at the end of a row */
static inline float qtk__gb_lanes_sum(const float *A) {
    float a = A[0] + A[1], b = A[2] + A[3], c = A[4] + A[5], d = A[6] + A[7];
    float ab = a + b, cd = c + d;
    return ab + cd;
}

/* The groups of a block's activation sums c->xb holds: one per sub-block (K types; IQ1_M: one per
 * 8, its deltas' groups), the block's sum (the 32 types). */
static inline unsigned qtk__gb_sum_groups(const qtk__gb_fmt *F) {
    return F->f == QTK__GF_IQ1_M ? 32u : F->super ? F->groups : 1u;
}

#endif
