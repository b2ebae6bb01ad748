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
 * (u the unsigned field, v the signed value; the integers are exact, converted to f32 once;
 * d s_b and dmin s_b clamped to +-FLT_MAX so that a zero sum gives 0, not 0 x inf), and
 * y = (Σ_b t_b in order of b) + bias. Every level computes these integers exactly and then
 * this same scalar arithmetic: the bits are the same at every level and for every thread count.
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
static inline unsigned qtk__gb_plane_group(const qtk__gb_fmt *F, unsigned p, unsigned j) {
    unsigned k = j / 16;
    switch (F->f) {
    case QTK__GF_Q4_K:
    case QTK__GF_Q5_K: return 2 * (k / 2) + p;
    case QTK__GF_Q6_K: return 8 * (k / 4) + 4 * p + k % 4;
    default: return 8 * (k / 2) + 2 * p + k % 2; /* Q2_K, Q3_K */
    }
}

static inline float qtk__gb_clampf(float v) { return v > FLT_MAX ? FLT_MAX : v < -FLT_MAX ? -FLT_MAX : v; }

/* The float part of one block: isum, msum (or xsum) as above, d and m the block's f16 words. */
static inline float qtk__gb_term(const qtk__gb_fmt *F, uint16_t d16, uint16_t m16, float sx, int32_t isum,
                                 int32_t msum) {
    float a = qtk__f16_to_f32(d16) * sx;
    a = qtk__gb_clampf(a);
    float t = a * (float)isum;
    if (!F->affine) return t;
    float b = qtk__f16_to_f32(m16) * sx;
    b = qtk__gb_clampf(b);
    float t2 = b * (float)msum;
    return F->super ? t - t2 : t + t2;
}

/* The integer corrections of a K block from its activations' per-16 sums bs[16]: the mins
 * (affine) or the offset of the unsigned fields the vector body multiplies (symmetric: the
 * value is u - off). sc, mn: the block's integers. */
static inline void qtk__gb_k_sums(const qtk__gb_fmt *F, const int8_t *sc, const uint8_t *mn, const int32_t *bs,
                                  int32_t *corr, int32_t *msum) {
    int32_t c = 0, m = 0;
    for (unsigned g = 0; g < F->groups; g++) {
        int32_t s = F->sub == 32 ? bs[2 * g] + bs[2 * g + 1] : bs[g];
        if (F->affine) m += (int32_t)mn[g] * s;
        else c += (int32_t)sc[g] * s;
    }
    *corr = F->affine ? 0 : (F->f == QTK__GF_Q6_K ? 32 : 4) * c;
    *msum = m;
}

#endif
