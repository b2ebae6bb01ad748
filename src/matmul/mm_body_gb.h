/* mm_body_gb.h — store=ggml's integer path (mm_gb.h) written once over the vocabulary, for
 * integer vectors of MV_B = 16 or 32 bytes (the portable level; AVX2, whose kernel the AVX-512
 * level runs too). Included by the per-level files after the vocabulary.
 *
 * A K block's fields become vectors of unsigned bytes in plane order (the activations'
 * layout): a window of MV_B bytes of the low- or high-nibble or 2-bit plane is one load, with
 * the 5th / 3rd / high bits merged from their masks; it is multiplied by the activations
 * (pmaddubsw: unsigned fields by int8) and by the sub-scale of each of its 16-byte lanes
 * (pmaddwd; the lanes' int16 scales picked by one pshufb from the block's 8 or 16 sub-scales).
 * One horizontal sum per block gives Σ sc Σ u q; the mins (affine) and the symmetric types'
 * field offsets (the unsigned field is the value + 4 or + 32) come from the activations' per-
 * group sums by one more pmaddwd. The 32 types: the block's 32 fields in element order, one
 * pmaddubsw + pmaddwd by ones, one sum. Then mm_gb.h's scalar arithmetic, the same at every
 * level. */

#include "mm_gb.h"

#if MV_B <= 32

#define GB_NV (256 / MV_B) /* vectors of a K block */


static const unsigned gb_bytes[QTK__GF_COUNT] = {20, 22, 24, 84, 110, 144, 176, 210};

/* ---- the integer scales of a K block, from their packings (GGUF.md §2.15) ---- */

/* Q4_K/Q5_K: 8 six-bit scales and mins in 12 bytes, as the bytes of two u64 */
MV_AI void gb_scales_k4(const uint8_t *S, uint64_t *sc, uint64_t *mn) {
    const uint32_t w0 = qtk__ld32(S), w1 = qtk__ld32(S + 4), w2 = qtk__ld32(S + 8);
    *sc = (uint64_t)(w0 & 0x3f3f3f3fu) | (uint64_t)((w2 & 0x0f0f0f0fu) | ((w0 >> 2) & 0x30303030u)) << 32;
    *mn = (uint64_t)(w1 & 0x3f3f3f3fu) | (uint64_t)(((w2 >> 4) & 0x0f0f0f0fu) | ((w1 >> 2) & 0x30303030u)) << 32;
}
/* Q3_K: 16 six-bit scales biased by 32 in 12 bytes, as the bytes of two u64 */
MV_AI void gb_scales_k3(const uint8_t *S, uint64_t *lo, uint64_t *hi) {
    const uint32_t w0 = qtk__ld32(S), w1 = qtk__ld32(S + 4), w2 = qtk__ld32(S + 8);
    *lo = (uint64_t)((w0 & 0x0f0f0f0fu) | ((w2 & 0x03030303u) << 4)) |
          (uint64_t)((w1 & 0x0f0f0f0fu) | ((w2 & 0x0c0c0c0cu) << 2)) << 32;
    *hi = (uint64_t)(((w0 >> 4) & 0x0f0f0f0fu) | (w2 & 0x30303030u)) |
          (uint64_t)(((w1 >> 4) & 0x0f0f0f0fu) | ((w2 >> 2) & 0x30303030u)) << 32;
}

/* The int16 sub-scales of the two 16-byte lanes of the window at byte j of plane p. */
MV_AI mvi gb_window_scales(const qtk__gfmt f, const mvi set0, const mvi set1, unsigned p, unsigned j) {
    const unsigned g0 = qtk__gb_plane_group(f, p, j), g1 = MV_B == 32 ? qtk__gb_plane_group(f, p, j + 16) : g0;
    return mvi_pick16(g0 < 8 ? set0 : set1, g0 % 8, g1 % 8); /* both lanes' groups share one set of 8 */
}

/* A K block's sub-scales as int16 sets: set0 holds groups 0-7 and set1 groups 8-15 (each
 * repeated per 16-byte lane; Q4_K/Q5_K: both the 8 scales); mn0 Q4_K/Q5_K's 8 mins. */
MV_AI void gb_k_sets(const qtk__gfmt f, const uint8_t *blk, mvi *set0, mvi *set1, mvi *mn0) {
    switch (f) {
    case QTK__GF_Q4_K:
    case QTK__GF_Q5_K: {
        uint64_t sc, mn;
        gb_scales_k4(blk + 4, &sc, &mn);
        *set0 = *set1 = mvi_set16x8_u64(sc);
        *mn0 = mvi_set16x8_u64(mn);
        break;
    }
    case QTK__GF_Q6_K: {
        const int8_t *s8 = (const int8_t *)(blk + 192);
        *set0 = mvi_set16x8s(s8), *set1 = mvi_set16x8s(s8 + 8);
        *mn0 = mvi_zero();
        break;
    }
    case QTK__GF_Q3_K: {
        uint64_t lo, hi;
        gb_scales_k3(blk + 96, &lo, &hi);
        const mvi bias = mvi_set1_16(-32);
        *set0 = mvi_add16(mvi_set16x8_u64(lo), bias), *set1 = mvi_add16(mvi_set16x8_u64(hi), bias);
        *mn0 = mvi_zero();
        break;
    }
    default: /* Q2_K: the low nibbles (its mins, the high ones, go straight into gb_k_corr) */
        mvi_sets16_nib(blk, 0, set0, set1);
        *mn0 = mvi_zero();
        break;
    }
}

/* The planes of a K block and the bytes of each */
#define GB_PLANES(f) ((f) == QTK__GF_Q2_K || (f) == QTK__GF_Q3_K ? 4u : 2u)

/* The bits of v's bytes that mask m selects after a shift by sh (left where sh > 0, right by -sh
 * where sh < 0). Where every bit of m lies at or above sh (left) or at most 7 + sh (right), each
 * bit it keeps comes from its own byte, so the shift may act on 32-bit lanes (here: left by up to
 * 4 into bit 4 or 4-5, right by up to 5 into bit 2, 3 into bit 4, 2 into bits 4-5). */
MV_AI mvi gb_bits_to(mvi v, int sh, mvi m) {
    return mvi_and(sh > 0 ? mvi_slli(v, sh) : sh < 0 ? mvi_srli(v, -sh) : v, m);
}

/* The unsigned fields of the window at byte j of plane p (plane order: the activations' layout):
 * one load of the low- or high-nibble or 2-bit plane, the 5th / 3rd / high bits moved from their
 * masks into place by one shift and one and (gb_bits_to; shifting them down, masking and shifting
 * them up took one more operation a window: Q5_K 1.08x, Q6_K 1.01x the time, GEMV 4096 x 4096 in
 * cache on Zen 3). */
MV_AI mvi gb_k_fields(const qtk__gfmt f, const uint8_t *blk, unsigned p, unsigned j) {
    const mvi m4 = mvi_set1_8(0x0f), m2 = mvi_set1_8(0x03);
    switch (f) {
    case QTK__GF_Q4_K:
    case QTK__GF_Q5_K: {
        const bool five = f == QTK__GF_Q5_K;
        mvi raw = mvi_loadu(blk + (five ? 48 : 16) + j), x = p ? mvi_and(mvi_srli(raw, 4), m4) : mvi_and(raw, m4);
        if (five) /* bit 2c + p of the mask byte to bit 4 */
            x = mvi_or(x, gb_bits_to(mvi_loadu(blk + 16 + j % 32), 4 - (int)(2 * (j / 32) + p), mvi_set1_8(0x10)));
        return x;
    }
    case QTK__GF_Q6_K: {
        const unsigned h = j / 64, g = (j % 64) / 32 + 2 * p;
        mvi raw = mvi_loadu(blk + j), lo = p ? mvi_and(mvi_srli(raw, 4), m4) : mvi_and(raw, m4);
        /* bits 2g, 2g + 1 of the high byte to bits 4, 5 */
        return mvi_or(lo, gb_bits_to(mvi_loadu(blk + 128 + 32 * h + j % 32), 4 - 2 * (int)g, mvi_set1_8(0x30)));
    }
    case QTK__GF_Q3_K:
    case QTK__GF_Q2_K:
    default: {
        const bool three = f == QTK__GF_Q3_K;
        mvi x = mvi_and(mvi_srli(mvi_loadu(blk + (three ? 32 : 16) + j), 2 * p), m2);
        if (three) /* bit 4h + p of the mask byte to bit 2 */
            x = mvi_or(x, gb_bits_to(mvi_loadu(blk + j % 32), 2 - (int)(4 * (j / 32) + p), mvi_set1_8(0x04)));
        return x;
    }
    }
}

/* The correction of one row of x from its per-group sums xb: Σ mn_g xb_g (the mins: Q2_K,
 * Q4_K, Q5_K) or Σ sc_g xb_g (Q3_K, Q6_K: their fields are the values + 4 or + 32), as int32
 * lanes to be summed. */
MV_AI mvi gb_k_corr(const qtk__gfmt f, const uint8_t *blk, mvi set0, mvi set1, mvi mn0, const int16_t *xb) {
    switch (f) {
    case QTK__GF_Q4_K:
    case QTK__GF_Q5_K: return mvi_madd16(mn0, mvi_load16z(xb));
    case QTK__GF_Q2_K: return mvi_dot_nib16(blk, 4, xb);
    default:
#if MV_B == 32
        return mvi_madd16(mvi_half_blend(set0, set1), mvi_loadu(xb));
#else
        return mvi_add(mvi_madd16(set0, mvi_loadu(xb)), mvi_madd16(set1, mvi_loadu(xb + 8)));
#endif
    }
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

/* The K types: blocks 8 at a time, block b in lane b mod 8 (mm_gb.h): their integer sums reduced
 * together (mvi_hsum8), their f16 words gathered, their float parts in vectors. One row of x
 * (M = 1): each window's fields go straight into the sums; more: a block's fields and scales
 * are made once and serve every row of x of the chunk. */
/* how many of vector v's MV_L lanes hold one of the nbb (<= 8) blocks */
MV_AI size_t gb_lanes_of(size_t nbb, unsigned v) {
    const size_t at = (size_t)v * MV_L;
    return nbb <= at ? 0 : nbb - at < MV_L ? nbb - at : MV_L;
}

/* y[m0 .. m0 + mc, n]: each row's 8 lanes reduced by mm_gb.h's tree, plus the bias */
MV_AI void gb_store(const qtk__mm *c, mvf A[][8 / MV_L], size_t mc, size_t m0, size_t n) {
    for (size_t mi = 0; mi < mc; mi++) {
        float lanes[8];
        for (unsigned v = 0; v < 8 / MV_L; v++) mvf_storeu(lanes + v * MV_L, A[mi][v]);
        float acc = qtk__gb_lanes_sum(lanes);
        c->y[(m0 + mi) * c->N + n] = c->bias ? acc + c->bias[n] : acc;
    }
}

MV_AI void gb_rows_m(const qtk__gfmt f, const size_t M, const bool clamp, const qtk__mm *c, size_t n0, size_t n1) {
    const bool affine = f == QTK__GF_Q2_K || f == QTK__GF_Q4_K || f == QTK__GF_Q5_K;
    const size_t bytes = gb_bytes[f], nb = c->K / 256, G = f == QTK__GF_Q4_K || f == QTK__GF_Q5_K ? 8 : 16;
    const unsigned P = GB_PLANES(f), PB = 256 / P;
    /* the f16 words: d and dmin side by side (affine), or d as the high half of the word before it */
    const size_t w_at = f == QTK__GF_Q2_K ? 80 : f == QTK__GF_Q3_K ? 106 : f == QTK__GF_Q6_K ? 206 : 0;
    for (size_t n = n0; n < n1; n++) {
        const uint8_t *row = c->w.vals + n * c->w.row_bytes;
        for (size_t m0 = 0; m0 < M; m0 += QTK__MM_GB_MAX_M) { /* rows of x a chunk at a time */
            const size_t mc = M - m0 < QTK__MM_GB_MAX_M ? M - m0 : QTK__MM_GB_MAX_M;
            mvf A[QTK__MM_GB_MAX_M][8 / MV_L];
            for (size_t mi = 0; mi < mc; mi++)
                for (unsigned v = 0; v < 8 / MV_L; v++) A[mi][v] = mvf_zero();
            for (size_t b0 = 0; b0 < nb; b0 += 8) {
                const size_t nbb = nb - b0 < 8 ? nb - b0 : 8;
                const uint8_t *blk0 = row + b0 * bytes;
                mvi ai[QTK__MM_GB_MAX_M][8], am[QTK__MM_GB_MAX_M][8];
                for (size_t bb = 0; bb < 8; bb++) {
                    if (bb >= nbb) {
                        for (size_t mi = 0; mi < mc; mi++) ai[mi][bb] = am[mi][bb] = mvi_zero();
                        continue;
                    }
                    const uint8_t *blk = blk0 + bb * bytes;
                    /* no software prefetch: the rows are one stream, which the hardware's
                     * prefetcher follows; each line of the block prefetched 4 KiB ahead took
                     * 1.1-1.3x the time for Q6_K, 1.05-1.15x for Q4_K and Q5_K where the weights
                     * came from DRAM (Zen 3, GEMV 4096 x 4096 and 14336 x 4096) */
                    mvi set0, set1, mn0;
                    gb_k_sets(f, blk, &set0, &set1, &mn0);
                    const int8_t *xq = c->xq + m0 * c->kq + (b0 + bb) * 256;
                    const int16_t *xb = c->xb + m0 * c->xb_ld + (b0 + bb) * G;
                    if (M == 1) {
                        mvi a = mvi_zero();
                        unsigned v = 0;
                        MV_UNROLL
                        for (unsigned p = 0; p < P; p++)
                            MV_UNROLL
                            for (unsigned j = 0; j < PB; j += MV_B, v++)
                                a = mvi_add(a, mvi_madd16(mvi_maddubs(gb_k_fields(f, blk, p, j), mvi_loadu(xq + v * MV_B)),
                                                          gb_window_scales(f, set0, set1, p, j)));
                        ai[0][bb] = a, am[0][bb] = gb_k_corr(f, blk, set0, set1, mn0, xb);
                        continue;
                    }
                    mvi u[GB_NV], s16[GB_NV];
                    unsigned v = 0;
                    MV_UNROLL
                    for (unsigned p = 0; p < P; p++)
                        MV_UNROLL
                        for (unsigned j = 0; j < PB; j += MV_B, v++)
                            u[v] = gb_k_fields(f, blk, p, j), s16[v] = gb_window_scales(f, set0, set1, p, j);
                    for (size_t mi = 0; mi < mc; mi++) {
                        const int8_t *xm = xq + mi * c->kq;
                        mvi a = mvi_zero();
                        MV_UNROLL
                        for (unsigned i = 0; i < GB_NV; i++)
                            a = mvi_add(a, mvi_madd16(mvi_maddubs(u[i], mvi_loadu(xm + i * MV_B)), s16[i]));
                        ai[mi][bb] = a, am[mi][bb] = gb_k_corr(f, blk, set0, set1, mn0, xb + mi * c->xb_ld);
                    }
                }
                /* the blocks' d (and dmin) as f32, for every row of x */
                mvf dd[8 / MV_L], dm[8 / MV_L];
                MV_UNROLL
                for (unsigned v = 0; v < 8 / MV_L; v++) {
                    const size_t nv = gb_lanes_of(nbb, v);
                    const mvi w = mvi_gather32s(blk0 + (size_t)v * MV_L * bytes + w_at, (int)bytes, nv);
                    dd[v] = affine ? mvf_f16_lo(w) : mvf_f16_hi(w);
                    dm[v] = affine ? mvf_f16_hi(w) : mvf_zero();
                }
                for (size_t mi = 0; mi < mc; mi++) {
                    const size_t m = m0 + mi;
                    int32_t isum[8], gsum[8];
                    mvi_hsum8(ai[mi], isum);
                    mvi_hsum8(am[mi], gsum);
                    MV_UNROLL
                    for (unsigned v = 0; v < 8 / MV_L; v++) {
                        const size_t nv = gb_lanes_of(nbb, v);
                        const mvf sx = mvf_load_n(c->xs + m * c->xs_ld + b0 + v * MV_L, nv);
                        mvi I = mvi_loadu(isum + v * MV_L), Gs = mvi_loadu(gsum + v * MV_L);
                        if (!affine) I = mvi_sub(I, mvi_slli(Gs, f == QTK__GF_Q6_K ? 5 : 2));
                        mvf ad = mvf_mul(dd[v], sx);
                        if (clamp) ad = mvf_clamp_finite(ad);
                        mvf t = mvf_mul(ad, mvf_from_i(I));
                        if (affine) { /* minus the mins: x - y is x + (-y) exactly */
                            mvf bm = mvf_mul(dm[v], sx);
                            if (clamp) bm = mvf_clamp_finite(bm);
                            t = mvf_add(t, mvf_mul(mvf_mul(bm, mvf_from_i(Gs)), mvf_set1(-1.0f)));
                        }
                        A[mi][v] = mvf_add(A[mi][v], t);
                    }
                }
            }
            gb_store(c, A, mc, m0, n);
        }
    }
}

MV_AI void gb_rows(const qtk__gfmt f, const qtk__mm *c, size_t n0, size_t n1) {
    const bool clamp = !(c->xs_max <= FLT_MAX / 65504.0f); /* |d|, |dmin| <= 65504: f16's largest */
    if (c->M == 1 && !clamp) gb_rows_m(f, 1, false, c, n0, n1);
    else gb_rows_m(f, c->M, true, c, n0, n1);
}

#define GB_LV (32 / MV_B) /* vectors of a 32 block */

#define GB_IT
#define GB_SFX(x) x
#define GB_DOT(acc, u, x) mvi_add((acc), mvi_madd1(mvi_maddubs((u), (x))))
#include "mm_body_gb32.h"
#undef GB_IT
#undef GB_SFX
#undef GB_DOT

static void gb_int(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    (void)ws;
    switch (c->w.gb->f) {
    case QTK__GF_Q4_1: gb_rows32(QTK__GF_Q4_1, c, n0, n1); break;
    case QTK__GF_Q5_0: gb_rows32(QTK__GF_Q5_0, c, n0, n1); break;
    case QTK__GF_Q5_1: gb_rows32(QTK__GF_Q5_1, c, n0, n1); break;
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
