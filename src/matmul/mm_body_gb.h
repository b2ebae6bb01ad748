/* mm_body_gb.h — store=ggml's integer path (mm_gb.h) written once over the vocabulary, for
 * integer vectors of MV_B = 16 or 32 bytes (the portable level; AVX2, whose kernel the AVX-512
 * level runs too). Included by mm_body.h's including files after the vocabulary.
 *
 * A block's fields become vectors of unsigned bytes in plane order (the activations' layout):
 * for the K types, plane p of a window of MV_B bytes is one load of the low- or high-nibble /
 * 2-bit plane, with the 5th / 3rd / high bits merged from their masks; each is multiplied by
 * the activations (pmaddubsw: unsigned fields by int8) and by its groups' sub-scales (pmaddwd
 * with the int16 scale of each 16-byte lane), and one horizontal sum per block gives the
 * integer of mm_gb.h (the symmetric types' unsigned fields are value + 4 or + 32: the offset
 * is taken back with the activations' per-16 sums). The 32 types: the 32 nibbles (and 5th
 * bits) in element order, one pmaddubsw + pmaddwd by ones, one sum. Then mm_gb.h's scalar
 * arithmetic, the same at every level. */

#include "mm_gb.h"

#if MV_B <= 32

#define GB_NV (256 / MV_B) /* vectors of a K block */

/* A K block's fields (u) and the int16 sub-scales of each 16-byte lane (s16), plane order. */
MV_AI void gb_k_vectors(const qtk__gfmt f, const qtk__gb_fmt *F, const uint8_t *blk, const qtk__gb_unpacked *sc, mvi *u,
                        mvi *s16) {
    int16_t S[16];
    const mvi m4 = mvi_set1_8(0x0f), m2 = mvi_set1_8(0x03);
    const unsigned planes = qtk__gb_planes(F), pb = 256 / planes;
    for (unsigned p = 0; p < planes; p++)
        for (unsigned k = 0; k < pb / 16; k++) S[p * (pb / 16) + k] = sc->sc[qtk__gb_plane_group(F, p, 16 * k)];
    unsigned v = 0;
    switch (f) {
    case QTK__GF_Q4_K:
    case QTK__GF_Q5_K: {
        const bool five = f == QTK__GF_Q5_K;
        const uint8_t *qs = blk + (five ? 48 : 16), *qh = blk + 16;
        MV_UNROLL
        for (unsigned p = 0; p < 2; p++)
            MV_UNROLL
            for (unsigned j = 0; j < 128; j += MV_B, v++) {
                mvi raw = mvi_loadu(qs + j), x = p ? mvi_and(mvi_srli(raw, 4), m4) : mvi_and(raw, m4);
                if (five) {
                    mvi h = mvi_loadu(qh + j % 32);
                    x = mvi_or(x, mvi_and(mvi_test8(h, (int8_t)(1u << (2 * (j / 32) + p))), mvi_set1_8(0x10)));
                }
                u[v] = x;
            }
        break;
    }
    case QTK__GF_Q6_K: {
        const uint8_t *ql = blk, *qh = blk + 128;
        MV_UNROLL
        for (unsigned p = 0; p < 2; p++)
            MV_UNROLL
            for (unsigned j = 0; j < 128; j += MV_B, v++) {
                const unsigned h = j / 64, g = (j % 64) / 32 + 2 * p;
                mvi raw = mvi_loadu(ql + j), lo = p ? mvi_and(mvi_srli(raw, 4), m4) : mvi_and(raw, m4);
                mvi hb = mvi_loadu(qh + 32 * h + j % 32);
                u[v] = mvi_or(lo, mvi_slli(mvi_and(mvi_srli(hb, 2 * g), m2), 4));
            }
        break;
    }
    case QTK__GF_Q3_K:
    case QTK__GF_Q2_K:
    default: {
        const bool three = f == QTK__GF_Q3_K;
        const uint8_t *qs = blk + (three ? 32 : 16), *hm = blk;
        MV_UNROLL
        for (unsigned p = 0; p < 4; p++)
            MV_UNROLL
            for (unsigned j = 0; j < 64; j += MV_B, v++) {
                mvi x = mvi_and(mvi_srli(mvi_loadu(qs + j), 2 * p), m2);
                if (three) {
                    mvi h = mvi_loadu(hm + j % 32);
                    x = mvi_or(x, mvi_and(mvi_test8(h, (int8_t)(1u << (4 * (j / 32) + p))), mvi_set1_8(0x04)));
                }
                u[v] = x;
            }
        break;
    }
    }
    MV_UNROLL
    for (unsigned i = 0; i < GB_NV; i++) s16[i] = mvi_bcast16x(S + i * (MV_B / 16));
}

/* A 32 block's fields in element order (32 / MV_B vectors). */
MV_AI void gb_32_vectors(const qtk__gfmt f, const uint8_t *blk, mvi *u) {
    const mvi m4 = mvi_set1_8(0x0f);
    const unsigned qs_at = f == QTK__GF_Q4_1 ? 4 : f == QTK__GF_Q5_0 ? 6 : 8;
#if MV_B == 32
    mvi v = mvi_load16x2(blk + qs_at);
    u[0] = mvi_half_blend(mvi_and(v, m4), mvi_and(mvi_srli(v, 4), m4));
#else
    mvi v = mvi_loadu(blk + qs_at);
    u[0] = mvi_and(v, m4);
    u[1] = mvi_and(mvi_srli(v, 4), m4);
#endif
    if (f != QTK__GF_Q4_1) {
        uint32_t qh = qtk__ld32(blk + (f == QTK__GF_Q5_0 ? 2 : 4));
        const mvi b5 = mvi_set1_8(0x10);
        MV_UNROLL
        for (unsigned i = 0; i < 32 / MV_B; i++) u[i] = mvi_or(u[i], mvi_and(mvi_bitmask_bytes(qh >> (MV_B * i)), b5));
    }
}

/* Rows [n0, n1) of W in format f (a constant in each instantiation). */
MV_AI void gb_rows(const qtk__gfmt f, const qtk__mm *c, size_t n0, size_t n1) {
    const qtk__gb_fmt *F = qtk__gb_fmt_of(f);
    const bool k = f >= QTK__GF_Q2_K; /* the K types (a constant here) */
    const size_t qk = k ? 256 : 32, nb = c->K / qk, per = k ? 16 : 1, M = c->M;
    qtk__gb_unpacked sc;
    memset(&sc, 0, sizeof sc);
    for (size_t n = n0; n < n1; n++)
        for (size_t m0 = 0; m0 < M; m0 += QTK__MM_GB_MAX_M) { /* rows of x a chunk at a time */
        const uint8_t *row = c->w.vals + n * c->w.row_bytes;
        const size_t mc = M - m0 < QTK__MM_GB_MAX_M ? M - m0 : QTK__MM_GB_MAX_M;
        float acc[QTK__MM_GB_MAX_M];
        for (size_t m = 0; m < mc; m++) acc[m] = 0.0f;
        for (size_t b = 0; b < nb; b++) {
            const uint8_t *blk = row + b * F->bytes;
            mv_prefetch(blk + QTK__MM_PF_BYTES);
            mvi u[GB_NV], s16[GB_NV];
            qtk__gb_unpack_scales(F, blk, &sc);
            if (k) gb_k_vectors(f, F, blk, &sc, u, s16);
            else gb_32_vectors(f, blk, u);
            for (size_t mi = 0; mi < mc; mi++) {
                const size_t m = m0 + mi;
                const int8_t *xq = c->xq + m * c->kq + b * qk;
                const int32_t *xc = c->xc + m * c->xc_ld + b * per;
                int32_t isum, msum = 0;
                if (k) {
                    mvi a = mvi_zero();
                    MV_UNROLL
                    for (unsigned i = 0; i < GB_NV; i++)
                        a = mvi_add(a, mvi_madd16(mvi_maddubs(u[i], mvi_loadu(xq + i * MV_B)), s16[i]));
                    int32_t corr;
                    qtk__gb_k_sums(F, sc.sc, sc.mn, xc, &corr, &msum);
                    isum = mvi_hsum(a) - corr;
                } else {
                    mvi a = mvi_zero();
                    MV_UNROLL
                    for (unsigned i = 0; i < 32 / MV_B; i++) a = mvi_add(a, mvi_madd1(mvi_maddubs(u[i], mvi_loadu(xq + i * MV_B))));
                    isum = mvi_hsum(a);
                    if (f == QTK__GF_Q5_0) isum -= 16 * xc[0]; /* the value is the field - 16 */
                    else msum = xc[0];
                }
                float t = qtk__gb_term(F, sc.d, sc.m, c->xs[m * c->xs_ld + b], isum, msum);
                acc[mi] = acc[mi] + t;
            }
        }
        for (size_t mi = 0; mi < mc; mi++) c->y[(m0 + mi) * c->N + n] = c->bias ? acc[mi] + c->bias[n] : acc[mi];
    }
}

static void gb_int(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    (void)ws;
    switch (c->w.gb->f) {
    case QTK__GF_Q4_1: gb_rows(QTK__GF_Q4_1, c, n0, n1); break;
    case QTK__GF_Q5_0: gb_rows(QTK__GF_Q5_0, c, n0, n1); break;
    case QTK__GF_Q5_1: gb_rows(QTK__GF_Q5_1, c, n0, n1); break;
    case QTK__GF_Q2_K: gb_rows(QTK__GF_Q2_K, c, n0, n1); break;
    case QTK__GF_Q3_K: gb_rows(QTK__GF_Q3_K, c, n0, n1); break;
    case QTK__GF_Q4_K: gb_rows(QTK__GF_Q4_K, c, n0, n1); break;
    case QTK__GF_Q5_K: gb_rows(QTK__GF_Q5_K, c, n0, n1); break;
    default: gb_rows(QTK__GF_Q6_K, c, n0, n1); break;
    }
}
#ifndef GB_INT
#  define GB_INT gb_int
#endif

#else
#ifndef GB_INT
#  define GB_INT NULL
#endif
#endif
