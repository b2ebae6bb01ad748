/* mm_body_lat.h — the lattice types' integer path (docs/lattice.md; mm_gb.h's arithmetic)
 * written once over the vocabulary, for integer vectors of MV_B = 16 or 32 bytes (the
 * portable and NEON levels; AVX2, whose kernel the AVX-512 level runs too). Included by the
 * per-level files after mm_body_gb.h.
 *
 * A block's coordinates are made 8 at a time from the codebook (a u64 row, IQ3: two u32): the grid
 * point's levels (unsigned) and a mask of -1 / +1 bytes for their signs, set into vectors; the
 * sub-scales (2s + 1) become int16 vectors, one per 16 elements. With q the coordinates and x the
 * activations, one vector gives madd16(maddubs(|q|, sign(x, q)), sc): pairs of q x, |q x| <= 62 x
 * 127, exact in int16, times the sub-scale into int32. (IQ1 splits q = 8 g + delta: lat_q1_block
 * below. The exact path takes IQ1's coordinates from a table of the signed 8 x (level + 1/8), less
 * 2 where delta is -1/8.) A block's vectors are made once and serve every row of x of
 * the chunk; its int32 sum is mm_gb.h's isum, and the float arithmetic after it is mm_gb.h's,
 * blocks 8 at a time in lanes (as mm_body_gb.h's K types): the same bits as the scalar kernel. */

#if MV_B <= 32

#define LAT_NV (256 / MV_B) /* vectors of a block */

/* ix, the grid indices of a block (IQ3_S: its 64 groups of 4; IQ2_S, IQ2_XS: its 32 groups of 8),
 * where a type's bits are better gathered at once: made by vectors and stored, the scalar units
 * left to the loads (IQ2_S: a byte and a 2-bit field, 0.94x the time of gathering them per 8; IQ3_S:
 * a byte and a bit, 0.96x; IQ2_XS: the low 9 bits of a u16, 0.965x; Zen 3, GEMV 4096 x 4096; IQ1's:
 * lat_q1_block). NULL for the others, whose indices are bytes as stored. */
MV_AI const uint16_t *lat_index(const qtk__gfmt f, const uint8_t *b, uint16_t *ix) {
    if (f == QTK__GF_IQ2_XS) mv_idx_m9(b + 2, ix);
    else if (f == QTK__GF_IQ2_S) mv_idx_f2x4(b + 2, b + 66, ix);
    else if (f == QTK__GF_IQ3_S) mv_idx_b1x8(b + 2, b + 66, ix);
    else return NULL;
    return ix;
}

/* The sub-scales 2 s + 1 of a block of a type that packs them by nibbles or 3-bit fields (IQ2_XS,
 * IQ2_S, IQ3_S, IQ1_M), one per 16 elements (IQ3_S: one per 32, given to both its 16s): the first
 * 16 of 32-group k at byte k, the second at byte 8 + k, as 16 bytes for mvi_pick_sc16 (IQ1_M:
 * mvi_pick_sc8); by shifts and masks on u64, once per block. (The other types keep one per 32 beside fields their vectors
 * read anyway; lat_vec makes theirs.) */
MV_AI mvi lat_scales(const qtk__gfmt f, const uint8_t *b) {
    const uint64_t m4 = 0x0f0f0f0f0f0f0f0full, m3 = 0x0007000700070007ull, one = 0x0101010101010101ull;
    uint64_t lo, hi;
    if (f == QTK__GF_IQ1_M) { /* u16 j: the 16s of 32-groups 2 j and 2 j + 1 in four 3-bit fields (its top nibble: d's) */
        const uint64_t x = qtk__ld64(b + 48);
        lo = (x & m3) | (x >> 6 & m3) << 8, hi = (x >> 3 & m3) | (x >> 9 & m3) << 8;
    } else if (f == QTK__GF_IQ3_S) { /* a nibble per 32, in order: spread to bytes */
        uint64_t x = qtk__ld32(b + 106);
        x = (x | x << 16) & 0x0000ffff0000ffffull;
        x = (x | x << 8) & 0x00ff00ff00ff00ffull;
        hi = lo = (x | x << 4) & m4;
    } else { /* a byte per 32: its low nibble the first 16's, its high one the second's */
        const uint64_t x = qtk__ld64(b + (f == QTK__GF_IQ2_XS ? 66 : 74));
        lo = x & m4, hi = x >> 4 & m4;
    }
    return mvi_from_u64x2(lo << 1 | one, hi << 1 | one);
}

/* IQ2_S's and IQ3_S's signs of vector i, a bit per element: -1 bytes where set, else 0 */
MV_AI mvi lat_sign_bits(const qtk__gfmt f, const uint8_t *b, unsigned i) {
    return mvi_bitmask_bytes(qtk__ld32(b + (f == QTK__GF_IQ2_S ? 34 : 74) + i * MV_B / 8));
}

/* Whether a type stores 7 sign bits per 8 (the 8th their parity) */
#define LAT_SIGNS7(f) ((f) == QTK__GF_IQ2_XS || (f) == QTK__GF_IQ3_XXS)
/* Such a block's 32 sign bytes made at once by vectors (mvsg_signs7, mvsg_signs7w), each vector's
 * then one permute and a bit test (mvsg_mask): 0.93x (IQ2_XS), 0.92x (IQ3_XXS) the time of a u64
 * sign row per 8 from a table (spm7) on Zen 3, GEMV 4096 x 4096 (M = 64: 0.95x). IQ2_XXS keeps the
 * table: 1.07x the time by vectors (its u32 words 8 bytes apart, two loads and a shuffle; its grid
 * rows are u64, so its vectors have fewer inserts for the table's rows to compete with). Zero for
 * the other types. */
MV_AI mvsg lat_signs7(const qtk__gfmt f, const uint8_t *b) {
    if (f == QTK__GF_IQ2_XS) return mvsg_signs7(b + 2);
    if (f == QTK__GF_IQ3_XXS) return mvsg_signs7w(b + 66);
    mvsg z;
    memset(&z, 0, sizeof z);
    return z;
}

/* Vector i of a block (elements i MV_B .. + MV_B): the magnitudes of its coordinates *u
 * (unsigned bytes) and *sg, bytes whose sign is theirs (for mvi_sign8 of x: -1 or +1 as a mask,
 * the coordinate itself for IQ1); sc2 the sub-scales (2s + 1) of its (one or two) 16 elements (the
 * exact path's, and the fast path's for the types without lat_scales);
 * ix the block's indices from lat_index, or NULL: made per 8; s7 the block's signs from lat_signs7
 * for LAT_SIGNS7's types, or NULL: their sign rows from the table. */
MV_AI void lat_vec(const qtk__gfmt f, const uint8_t *b, const uint16_t *ix, const mvsg *s7, const qtk__lattice_grids *T,
                   unsigned i, mvi *u, mvi *sg, int16_t *sc2) {
    uint64_t g[MV_B / 8], m[MV_B / 8] = {0};
    /* m: sign rows (IQ2_XXS, IQ2_XS, IQ3_XXS), IQ1_M's per-8 deltas; g4: IQ3's 4-wide rows, set into
     * the vector by 32-bit inserts from memory (paired into u64 by shifts first: 1.07x (IQ3_XXS),
     * 1.15x (IQ3_S) the time on Zen 3) */
    uint32_t g4[MV_B / 4];
    const unsigned k = i * MV_B / 32; /* its group of 32 */
    MV_UNROLL
    for (unsigned t = 0; t < MV_B / 8; t++) {
        const unsigned l = (i * MV_B / 8 + t) % 4; /* its 8 within the 32 */
        switch (f) {
        case QTK__GF_IQ2_XXS: {
            const uint32_t a = qtk__ld32(b + 6 + 8 * k);
            memcpy(&g[t], T->iq2xxs[b[2 + 8 * k + l]], 8);
            m[t] = T->spm7[(a >> (7 * l)) & 127u];
            sc2[0] = sc2[1] = (int16_t)(2 * (a >> 28) + 1);
            break;
        }
        case QTK__GF_IQ2_XS: {
            const unsigned w = qtk__ld16(b + 2 + 8 * k + 2 * l), s = b[66 + k];
            memcpy(&g[t], T->iq2xs[ix ? ix[4 * k + l] : w & 511u], 8);
            m[t] = T->spm7[w >> 9];
            sc2[0] = (int16_t)(2 * (s & 15u) + 1), sc2[1] = (int16_t)(2 * (s >> 4) + 1);
            break;
        }
        case QTK__GF_IQ2_S: {
            const unsigned s = b[74 + k], h = b[66 + k];
            memcpy(&g[t], T->iq2s[ix ? ix[4 * k + l] : b[2 + 4 * k + l] | ((h >> (2 * l)) & 3u) << 8], 8);
            sc2[0] = (int16_t)(2 * (s & 15u) + 1), sc2[1] = (int16_t)(2 * (s >> 4) + 1);
            break;
        }
        case QTK__GF_IQ3_XXS: {
            const uint32_t a = qtk__ld32(b + 66 + 4 * k);
            memcpy(&g4[2 * t], T->iq3xxs[b[2 + 8 * k + 2 * l]], 4);
            memcpy(&g4[2 * t + 1], T->iq3xxs[b[2 + 8 * k + 2 * l + 1]], 4);
            m[t] = T->spm7[(a >> (7 * l)) & 127u];
            sc2[0] = sc2[1] = (int16_t)(2 * (a >> 28) + 1);
            break;
        }
        case QTK__GF_IQ3_S: {
            const unsigned h = b[66 + k];
            memcpy(&g4[2 * t], T->iq3s[ix ? ix[8 * k + 2 * l] : b[2 + 8 * k + 2 * l] | ((h >> (2 * l)) & 1u) << 8], 4);
            memcpy(&g4[2 * t + 1], T->iq3s[ix ? ix[8 * k + 2 * l + 1] : b[2 + 8 * k + 2 * l + 1] | ((h >> (2 * l + 1)) & 1u) << 8], 4);
            sc2[0] = sc2[1] = (int16_t)(2 * ((b[106 + k / 2] >> (4 * (k % 2))) & 15u) + 1);
            break;
        }
        case QTK__GF_IQ1_S: {
            const unsigned h = qtk__ld16(b + 34 + 2 * k);
            memcpy(&g[t], T->iq1q[b[2 + 4 * k + l] | ((h >> (3 * l)) & 7u) << 8], 8);
            sc2[0] = sc2[1] = (int16_t)(2 * ((h >> 12) & 7u) + 1);
            break;
        }
        default: { /* IQ1_M */
            const unsigned s = qtk__ld16(b + 48 + 2 * (k / 2)) >> (6 * (k % 2)), hh = b[32 + 2 * k + l / 2] >> (4 * (l % 2));
            memcpy(&g[t], T->iq1q[b[4 * k + l] | (hh & 7u) << 8], 8);
            m[t] = hh & 8u ? 0x0202020202020202ull : 0;
            sc2[0] = (int16_t)(2 * (s & 7u) + 1), sc2[1] = (int16_t)(2 * ((s >> 3) & 7u) + 1);
            break;
        }
        }
    }
    if (f == QTK__GF_IQ1_S) { /* one delta per 32: 8 g - 1 = (8 g + 1) - 2 where it is -1/8 */
        *sg = mvi_sub8(mvi_from_u64(g), mvi_set1_8((int8_t)(2 * (qtk__ld16(b + 34 + 2 * k) >> 15))));
        *u = mvi_abs8(*sg);
    } else if (f == QTK__GF_IQ1_M) { /* a delta per 8, the top bit of its nibble: 2 less where it is -1/8 */
        *sg = mvi_sub8(mvi_from_u64(g), mvi_from_u64(m)); /* one 16 KiB table: L1 holds it beside the stream */
        *u = mvi_abs8(*sg);
    } else if (f == QTK__GF_IQ2_S || f == QTK__GF_IQ3_S) { /* a sign bit per element: -1 where set, else +1 */
        *u = f == QTK__GF_IQ3_S ? mvi_from_u32(g4) : mvi_from_u64(g);
        *sg = mvi_or(lat_sign_bits(f, b, i), mvi_set1_8(1));
    } else {
        *u = f == QTK__GF_IQ3_XXS ? mvi_from_u32(g4) : mvi_from_u64(g);
        *sg = s7 && LAT_SIGNS7(f) ? mvi_or(mvsg_mask(*s7, i), mvi_set1_8(1)) : mvi_from_u64(m);
    }
#if MV_B == 16
    if (i % 2) sc2[0] = sc2[1]; /* the second 16 of its 32 */
#endif
}

/* Whether a type's sub-scales come from lat_scales */
#define LAT_SCALES(f) ((f) == QTK__GF_IQ2_XS || (f) == QTK__GF_IQ2_S || (f) == QTK__GF_IQ3_S)
/* Vector i's sub-scales as int16: picked from the block's (lat_scales, sc), which took 0.84-0.96x
 * the time of making them per vector on Zen 3 (GEMV, 4096 x 4096); else lat_vec's sc2 */
MV_AI mvi lat_sc16(const qtk__gfmt f, mvi sc, const int16_t *sc2, unsigned i) {
    return LAT_SCALES(f) ? mvi_pick_sc16(sc, i) : mvi_bcast16x(sc2);
}

/* Vector i of the int8 activations xq of a block's 256 with the signs of its coordinates put on
 * them, for one row of x: where the signs are bits (IQ2_S, IQ3_S; LAT_SIGNS7's types, from s7), by
 * their 0 / -1 mask m as (x ^ m) - m, two operations any vector ALU runs (0.98x the time of vpsignb
 * by m | 1 for IQ2_S and IQ3_S on Zen 3, GEMV 4096 x 4096; |x| <= 127, so the same bytes); else by
 * lat_vec's -1 / +1 bytes q */
MV_AI mvi lat_xs(const qtk__gfmt f, const uint8_t *b, const mvsg *s7, unsigned i, const int8_t *xq, mvi q) {
    const mvi x = mvi_loadu(xq + i * MV_B);
    mvi m;
    if (f == QTK__GF_IQ2_S || f == QTK__GF_IQ3_S) m = lat_sign_bits(f, b, i);
    else if (LAT_SIGNS7(f)) m = mvsg_mask(*s7, i);
    else return mvi_sign8(x, q);
    return mvi_sub8(mvi_xor(x, m), m);
}

/* a + vector i of a block times the int8 activations xq of its 256, by its sub-scales (lat_sc16) */
MV_AI mvi lat_dot1(const qtk__gfmt f, const uint8_t *b, const uint16_t *ix, const qtk__lattice_grids *T, mvi sc,
                   const mvsg *s7, unsigned i, const int8_t *xq, mvi a) {
    int16_t sc2[2];
    mvi u, q;
    lat_vec(f, b, ix, s7, T, i, &u, &q, sc2);
    return mvi_add(a, mvi_madd16(mvi_maddubs(u, lat_xs(f, b, s7, i, xq, q)), lat_sc16(f, sc, sc2, i)));
}

/* The block's f16 d (IQ1_M: gathered from its scale words' top nibbles) times dmul, exact. */
MV_AI float lat_d(const qtk__gfmt f, const uint8_t *b, float dmul) { return mv_f16(qtk__gb_lattice_d(f, b)) * dmul; }

/* IQ1 on the integer path. Its coordinates are q = 8 g + δ (g in -1 0 1 from iq1s; δ = +-1 per
 * 32 (IQ1_S) or per 8 (IQ1_M)), so with X_j the sum of group j's activations (c->xb)
 *   Σ_k sc_k Σ q x = 8 Σ_k sc_k Σ g x + Σ_j δ_j sc_j X_j,
 * the same integer: the first term by byte products sc x (g x) (one pmaddubsw by the sub-scales as
 * bytes, the signs of g put on x) summed in int16 over 8 vectors (8 x 2 x 15 x 127 < 2^15), then
 * multiplied by 8 into int32; the second once per block (IQ1_S: one pmaddwd of X by δ sc made by
 * shifts and masks on u64; IQ1_M: mvi_q1m_delta). The block's grid indices are made by vectors
 * (mv_idx_f3x4, mv_idx_nib3). On Zen 3 (GEMV 4096 x 4096) this took 0.84x (IQ1_S) and 0.83x (IQ1_M)
 * the time of the coordinates 8 g + δ made in vectors and multiplied by |q| with the signs on x. */
typedef struct {
    mvi sc, dsc; /* sc: the sub-scales 2 s + 1 as lat_scales lays them out; dsc: IQ1_S's δ sc as int16 */
    uint16_t ix[32];
} lat_q1;
MV_AI void lat_q1_block(const qtk__gfmt f, const uint8_t *b, lat_q1 *q) {
    if (f == QTK__GF_IQ1_M) {
        mv_idx_nib3(b, b + 32, q->ix);
        q->sc = lat_scales(f, b);
        q->dsc = mvi_zero();
        return;
    }
    mv_idx_f3x4(b + 2, b + 34, q->ix);
    uint64_t v[2], w[2];
    for (unsigned j = 0; j < 2; j++) { /* u16 words 4 j .. 4 j + 3: bits 12-14 s, bit 15 δ = -1 */
        const uint64_t x = qtk__ld64(b + 34 + 8 * j), s = (x >> 11 & 0x000e000e000e000eull) | 0x0001000100010001ull;
        const uint64_t m = x >> 15 & 0x0001000100010001ull; /* 1 where δ = -1: s negated in its lane */
        w[j] = (s ^ m * 0xffffu) + m;
        uint64_t t = (s | s >> 8) & 0x0000ffff0000ffffull; /* the words' low bytes packed */
        v[j] = (t | t >> 16) & 0xffffffffull;
    }
    const uint64_t sc = v[0] | v[1] << 32; /* one per 32: both of its 16s */
    q->sc = mvi_from_u64x2(sc, sc);
    q->dsc = mvi_from_u64x2(w[0], w[1]);
}
/* vector i's g, from the block's indices */
MV_AI mvi lat_q1_vec(const qtk__lattice_grids *T, const lat_q1 *q, unsigned i) {
    uint64_t g[MV_B / 8];
    MV_UNROLL
    for (unsigned j = 0; j < MV_B / 8; j++) memcpy(&g[j], T->iq1s[q->ix[i * MV_B / 8 + j]], 8);
    return mvi_from_u64(g);
}
/* the block's isum as int32 lanes: a (the 8 Σ sc g x) and the δ terms of the row's X */
MV_AI mvi lat_q1_sum(const qtk__gfmt f, const uint8_t *b, const lat_q1 *q, mvi a, const int16_t *X) {
    return mvi_add(a, f == QTK__GF_IQ1_S ? mvi_madd16(mvi_load16z(X), q->dsc) : mvi_q1m_delta(b + 32, q->sc, X));
}
/* a + Σ over the 8 vectors from i0 of 8 sc g x, g and the sub-scales s8 given or made from q */
MV_AI mvi lat_q1_dot8(const qtk__lattice_grids *T, const lat_q1 *q, const mvi *g, const mvi *s8, unsigned i0,
                      const int8_t *xq, mvi a) {
    mvi a16 = mvi_zero();
    MV_UNROLL
    for (unsigned i = i0; i < i0 + 8; i++)
        a16 = mvi_add16(a16, mvi_maddubs(s8 ? s8[i] : mvi_pick_sc8(q->sc, i),
                                         mvi_sign8(mvi_loadu(xq + i * MV_B), g ? g[i] : lat_q1_vec(T, q, i))));
    return mvi_add(a, mvi_madd16(a16, mvi_set1_16(8)));
}

MV_AI void lat_rows_m(const qtk__gfmt f, const size_t M, const bool clamp, const qtk__mm *c, size_t n0, size_t n1) {
    const qtk__gb_fmt *F = c->w.gb;
    const size_t bytes = F->bytes, nb = c->K / 256;
    const float dmul = F->dmul;
    const qtk__lattice_grids *T = qtk__lattice();
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
                mvi ai[QTK__MM_GB_MAX_M][8];
                float dv[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                for (size_t bb = 0; bb < 8; bb++) {
                    if (bb >= nbb) {
                        for (size_t mi = 0; mi < mc; mi++) ai[mi][bb] = mvi_zero();
                        continue;
                    }
                    const uint8_t *blk = blk0 + bb * bytes;
                    for (size_t o = 0; o < bytes; o += 64) mv_prefetch(blk + QTK__MM_PF_BYTES + o);
                    dv[bb] = lat_d(f, blk, dmul);
                    const int8_t *xq = c->xq + m0 * c->kq + (b0 + bb) * 256;
                    if (f == QTK__GF_IQ1_S || f == QTK__GF_IQ1_M) {
                        lat_q1 q;
                        lat_q1_block(f, blk, &q);
                        const int16_t *X = c->xb + m0 * c->xb_ld + (b0 + bb) * qtk__gb_sum_groups(F);
                        if (M == 1) {
                            mvi a = mvi_zero();
                            for (unsigned i0 = 0; i0 < LAT_NV; i0 += 8) a = lat_q1_dot8(T, &q, NULL, NULL, i0, xq, a);
                            ai[0][bb] = lat_q1_sum(f, blk, &q, a, X);
                            continue;
                        }
                        mvi g[LAT_NV], s8[LAT_NV];
                        MV_UNROLL
                        for (unsigned i = 0; i < LAT_NV; i++) g[i] = lat_q1_vec(T, &q, i), s8[i] = mvi_pick_sc8(q.sc, i);
                        for (size_t mi = 0; mi < mc; mi++) {
                            mvi a = mvi_zero();
                            for (unsigned i0 = 0; i0 < LAT_NV; i0 += 8) a = lat_q1_dot8(T, &q, g, s8, i0, xq + mi * c->kq, a);
                            ai[mi][bb] = lat_q1_sum(f, blk, &q, a, X + mi * c->xb_ld);
                        }
                        continue;
                    }
                    uint16_t ixb[64];
                    const uint16_t *ix = lat_index(f, blk, ixb);
                    const mvi sc = LAT_SCALES(f) ? lat_scales(f, blk) : mvi_zero();
                    /* one row of x: each vector used at once, none kept; the loop unrolled in full
                     * but for IQ2_XS, whose unrolled loop spills (2x slower on Zen 4; by 2: 1.15x faster
                     * than keeping the block's vectors); the full loop written out here, as through
                     * lat_dot1 GCC spilled in it (IQ2_XXS, IQ3_XXS: 1.07-1.18x the time on Zen 3) */
                    if (M == 1) {
                        mvi a = mvi_zero();
                        const mvsg s7 = lat_signs7(f, blk);
                        if (f == QTK__GF_IQ2_XS) {
                            _Pragma("GCC unroll 2")
                            for (unsigned i = 0; i < LAT_NV; i++) a = lat_dot1(f, blk, ix, T, sc, &s7, i, xq, a);
                        } else {
                            MV_UNROLL
                            for (unsigned i = 0; i < LAT_NV; i++) {
                                int16_t sc2[2];
                                mvi u, q;
                                lat_vec(f, blk, ix, &s7, T, i, &u, &q, sc2);
                                a = mvi_add(a, mvi_madd16(mvi_maddubs(u, lat_xs(f, blk, &s7, i, xq, q)), lat_sc16(f, sc, sc2, i)));
                            }
                        }
                        ai[0][bb] = a;
                        continue;
                    }
                    mvi u[LAT_NV], q[LAT_NV], s16[LAT_NV];
                    const mvsg s7 = lat_signs7(f, blk);
                    MV_UNROLL
                    for (unsigned i = 0; i < LAT_NV; i++) {
                        int16_t sc2[2];
                        lat_vec(f, blk, ix, &s7, T, i, &u[i], &q[i], sc2);
                        s16[i] = lat_sc16(f, sc, sc2, i);
                    }
                    for (size_t mi = 0; mi < mc; mi++) {
                        const int8_t *xm = xq + mi * c->kq;
                        mvi a = mvi_zero();
                        MV_UNROLL
                        for (unsigned i = 0; i < LAT_NV; i++)
                            a = mvi_add(a, mvi_madd16(mvi_maddubs(u[i], mvi_sign8(mvi_loadu(xm + i * MV_B), q[i])), s16[i]));
                        ai[mi][bb] = a;
                    }
                }
                for (size_t mi = 0; mi < mc; mi++) {
                    const size_t m = m0 + mi;
                    int32_t isum[8];
                    mvi_hsum8(ai[mi], isum);
                    MV_UNROLL
                    for (unsigned v = 0; v < 8 / MV_L; v++) {
                        const size_t nv = gb_lanes_of(nbb, v);
                        const mvf sx = mvf_load_n(c->xs + m * c->xs_ld + b0 + v * MV_L, nv);
                        mvf ad = mvf_mul(mvf_loadu(dv + v * MV_L), sx);
                        if (clamp) ad = mvf_clamp_finite(ad);
                        A[mi][v] = mvf_add(A[mi][v], mvf_mul(ad, mvf_from_i(mvi_loadu(isum + v * MV_L))));
                    }
                }
            }
            gb_store(c, A, mc, m0, n);
        }
    }
}

MV_AI void lat_rows(const qtk__gfmt f, const qtk__mm *c, size_t n0, size_t n1) {
    const bool clamp = !(c->xs_max <= FLT_MAX / 65504.0f); /* |d x dmul| <= 65504 */
    if (c->M == 1 && !clamp) lat_rows_m(f, 1, false, c, n0, n1);
    else lat_rows_m(f, c->M, true, c, n0, n1);
}

static void gb_lat_int(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    (void)ws;
    switch (c->w.gb->f) {
    case QTK__GF_IQ2_XXS: lat_rows(QTK__GF_IQ2_XXS, c, n0, n1); break;
    case QTK__GF_IQ2_XS: lat_rows(QTK__GF_IQ2_XS, c, n0, n1); break;
    case QTK__GF_IQ2_S: lat_rows(QTK__GF_IQ2_S, c, n0, n1); break;
    case QTK__GF_IQ3_XXS: lat_rows(QTK__GF_IQ3_XXS, c, n0, n1); break;
    case QTK__GF_IQ3_S: lat_rows(QTK__GF_IQ3_S, c, n0, n1); break;
    case QTK__GF_IQ1_S: lat_rows(QTK__GF_IQ1_S, c, n0, n1); break;
    default: lat_rows(QTK__GF_IQ1_M, c, n0, n1); break;
    }
}
#ifndef GB_LAT_INT
#  define GB_LAT_INT gb_lat_int
#endif

/* The exact path at small M (nk, M <= QTK__MM_GB_MAX_M): a block's signed coordinates into 256
 * bytes (the vectors above, signs applied), its sub-block scales d x sc x 2^-k as f32 (exact);
 * then MV_L weights at a time: w = f32(q) x S, exactly qtk_dequantize's value, multiplied by
 * the f32 activations into LAT_ACC accumulators per row of x (lane sums, then a fixed tree). */
#define LAT_ACC 4

MV_AI void lat_exact_rows_m(const qtk__gfmt f, const size_t M, const qtk__mm *c, size_t n0, size_t n1) {
    const qtk__gb_fmt *F = c->w.gb;
    const size_t bytes = F->bytes, nb = c->K / 256, K = c->K;
    const float dmul = F->dmul;
    const qtk__lattice_grids *T = qtk__lattice();
    for (size_t n = n0; n < n1; n++) {
        const uint8_t *row = c->w.vals + n * c->w.row_bytes;
        mvf acc[QTK__MM_GB_MAX_M][LAT_ACC];
        for (size_t mi = 0; mi < M; mi++)
            for (unsigned a = 0; a < LAT_ACC; a++) acc[mi][a] = mvf_zero();
        for (size_t b = 0; b < nb; b++) {
            const uint8_t *blk = row + b * bytes;
            for (size_t o = 0; o < bytes; o += 64) mv_prefetch(blk + QTK__MM_PF_BYTES + o);
            /* the indices and IQ1_M's deltas made per 8 here (ix NULL): with IQ1_M's by vectors this
             * loop took 1.5x the time on Zen 4 (the fast path's 0.73x) */
            int8_t qb[256];
            int16_t sc[17]; /* lat_vec writes two from sc + i x MV_B / 16: one past the end at 16 bytes */
            MV_UNROLL
            for (unsigned i = 0; i < LAT_NV; i++) {
                mvi u, sg;
                lat_vec(f, blk, NULL, NULL, T, i, &u, &sg, sc + i * (MV_B / 16));
                mvi_storeu(qb + i * MV_B, mvi_sign8(u, sg));
            }
            const float d = lat_d(f, blk, dmul);
            float S[16];
            for (unsigned g = 0; g < 16; g++) S[g] = d * (float)sc[g]; /* exact */
            const float *xb = c->x + b * 256;
            MV_UNROLL
            for (unsigned j = 0; j < 256 / MV_L; j++) {
                const mvf w = mvf_mul(mvf_from_s8x(qb + j * MV_L), mvf_set1(S[j * MV_L / 16]));
                for (size_t mi = 0; mi < M; mi++)
                    acc[mi][j % LAT_ACC] = mvf_fma(w, mvf_loadu(xb + mi * K + j * MV_L), acc[mi][j % LAT_ACC]);
            }
        }
        for (size_t mi = 0; mi < M; mi++) {
            float s = mvf_hsum(mvf_add(mvf_add(acc[mi][0], acc[mi][1]), mvf_add(acc[mi][2], acc[mi][3])));
            c->y[mi * c->N + n] = c->bias ? s + c->bias[n] : s;
        }
    }
}

static void gb_lat_exact(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    (void)ws;
#define LAT_EX(F)                                                                                                      \
    do {                                                                                                               \
        if (c->M == 1) lat_exact_rows_m(F, 1, c, n0, n1);                                                              \
        else lat_exact_rows_m(F, c->M, c, n0, n1);                                                                     \
    } while (0)
    switch (c->w.gb->f) {
    case QTK__GF_IQ2_XXS: LAT_EX(QTK__GF_IQ2_XXS); break;
    case QTK__GF_IQ2_XS: LAT_EX(QTK__GF_IQ2_XS); break;
    case QTK__GF_IQ2_S: LAT_EX(QTK__GF_IQ2_S); break;
    case QTK__GF_IQ3_XXS: LAT_EX(QTK__GF_IQ3_XXS); break;
    case QTK__GF_IQ3_S: LAT_EX(QTK__GF_IQ3_S); break;
    case QTK__GF_IQ1_S: LAT_EX(QTK__GF_IQ1_S); break;
    default: LAT_EX(QTK__GF_IQ1_M); break;
    }
#undef LAT_EX
}
#ifndef GB_LAT_EXACT
#  define GB_LAT_EXACT gb_lat_exact
#endif
#define GB_LAT_INSN "codebook rows from tables, pmaddubsw by |q| with the signs on x, pmaddwd by the sub-scales (IQ1: pmaddubsw by the sub-scales, the deltas once a block)"

#endif
