/* mm_body_int.h — the integer path (precision fast) and the multiply-free 2-bit kernel,
 * written once over the vocabulary; mm_body.h's including file includes it once per flavour
 * of dot product: MV_IT (a target attribute, or nothing) and SFX (a name suffix) set, and
 * MV_DP 1 where mvi_dp may be used.
 *
 * A step reads MV_B bytes of a weight row (SF = per x MV_B fields) and makes `per` byte
 * vectors of weights, plane p holding fields per x i + p (i the byte); the activations are
 * laid out to match (qtk__mm_int_layout). Each 32-bit lane covers 4 x per consecutive fields,
 * inside one activation block and one weight block. The flavours:
 *   IV_DP   vpdpbusd on unsigned weights (value + 128), the lane starting from the
 *           activations' correction -128 x Σq, so that it ends with the signed dot product;
 *   IV_OFF  pmaddubsw on unsigned weights (value + off, off = -min value) when the int16
 *           sums of all planes cannot saturate (per x (max - min) <= 129), one pmaddwd,
 *           starting from -off x Σq;
 *   IV_XOR  IV_OFF for codes that are two's complement integers (q4f, q4s, q2f, q2s, and
 *           Burn's native stores of them): with off = 2^(width-1), value + off is the code
 *           with its top bit flipped, so one xor of the step's bytes replaces the lookups;
 *   IV_SGN  pmaddubsw of |w| by q with w's sign, one pmaddwd per plane (int8 weights,
 *           tables of values spread wider);
 *   IV_TERN 2-bit integers, v = b0 - 2 b1: for each plane, the activations + 128 whose bit
 *           b0 (b1) is set are summed 8 bytes at a time by psadbw (unselected bytes count
 *           128, taken back at the end): additions only, BitNet b1.58's intent. Each 64-bit
 *           lane covers fields 32j..32j+31 (its even 32-bit lane holds the sum, the odd 0).
 * The integer sums are exact; each lane is then scaled once by (weight scale x activation
 * scale) and added into f32 accumulators, so every flavour gives the same bits. */

#ifndef MV_IT
#  error "define MV_IT and SFX before including mm_body_int.h"
#endif

/* what every row of a call shares */
typedef struct {
    bool split;
    mvi utab;     /* weights as the flavour multiplies them (unsigned + offset, or signed) */
    mvi cmask;
    mvi xmask;    /* IV_XOR: the top bit of every field */
    mvi ipat;     /* SPLIT: weight block of each 32-bit lane, relative to the step's first */
    mvi toff;     /* IV_TERN: 4 planes x 8 bytes x 128 in the even lanes */
} SFX(ic);

MV_AI MV_IT void SFX(ic_init)(const int ik, const int iv, const qtk__mm *c, SFX(ic) * k) {
    const qtk__mmw *w = &c->w;
    memset(k, 0, sizeof *k);
    const unsigned per = dk_per(ik);
    const size_t sf = (size_t)per * MV_B, bc = w->bc;
    k->split = !(bc >= c->K || bc % sf == 0); /* then sf % bc == 0: bc is a power of two >= 16 */
    int32_t pat[MV_L], off[MV_L];
    for (unsigned l = 0; l < MV_L; l++) {
        pat[l] = k->split ? (int32_t)((4 * per * l) / bc) : 0;
        off[l] = l % 2 ? 0 : 4 * 8 * 128;
    }
    k->ipat = mvi_loadu(pat);
    k->toff = mvi_loadu(off);
    int8_t t[16];
    for (unsigned i = 0; i < 16; i++)
        t[i] = (int8_t)(iv == IV_DP ? w->ival[i] + 128 : iv == IV_OFF ? w->ival[i] + c->ioff : w->ival[i]);
    k->utab = mvi_table16(t);
    k->cmask = mvi_set1_8(dk_cw(ik) == 4 ? 0x0f : 0x03);
    k->xmask = mvi_set1_8(dk_cw(ik) == 4 ? (int8_t)0x88 : (int8_t)0xaa);
}

/* The step's bytes as the flavour reads them, and their plane p (the weights as it multiplies
 * them: unsigned + offset, or signed). */
MV_AI MV_IT mvi SFX(step_bytes_in)(const int ik, const int iv, const SFX(ic) * kc, const uint8_t *src) {
    mvi b = mvi_loadu(src);
    if (iv == IV_TERN || iv == IV_SGN) return b;
    if (ik == DK_I8) return mvi_xor(b, mvi_set1_8((int8_t)-128)); /* DP: + 128 */
    if (iv == IV_XOR) return mvi_xor(b, kc->xmask);
    return b;
}
MV_AI MV_IT mvi SFX(plane)(const int ik, const int iv, const SFX(ic) * kc, mvi b, unsigned p) {
    if (ik == DK_I8) return b;
    mvi codes = mvi_and(p ? mvi_srli(b, dk_cw(ik) * p) : b, kc->cmask);
    return iv == IV_XOR ? codes : mvi_lookup16(kc->utab, codes);
}

/* Σ over one plane's bytes of u x q into the lanes' sums: int16 pairs in h (OFF, XOR; the
 * caller adds them up with one pmaddwd), int32 in isum (DP, SGN). */
MV_AI MV_IT void SFX(plane_dot)(const int iv, mvi u, mvi xv, unsigned p, mvi *h, mvi *isum) {
    if (iv == IV_SGN) {
        *isum = mvi_add(*isum, mvi_madd1(mvi_maddubs(mvi_abs8(u), mvi_sign8(xv, u))));
        return;
    }
#if MV_DP
    if (iv == IV_DP) {
        *isum = mvi_dp(*isum, u, xv);
        return;
    }
#endif
    mvi m = mvi_maddubs(u, xv);
    *h = p ? mvi_add16(*h, m) : m;
}

/* IV_TERN: the exact dot product of one step of 2-bit weights (bytes b) with the activations
 * xq, by additions (see the top of this file). */
MV_AI MV_IT mvi SFX(tern_dot)(const SFX(ic) * kc, mvi b, const int8_t *xq) {
    const mvi bias = mvi_set1_8((int8_t)-128);
    mvi s0 = mvi_zero(), s1 = mvi_zero();
    MV_UNROLL
    for (unsigned p = 0; p < 4; p++) {
        mvi xb = mvi_xor(mvi_loadu(xq + (size_t)p * MV_B), bias); /* x + 128, unsigned */
        s0 = mvi_add(s0, mvi_sad(mvi_blend8(mvi_test8(b, (int8_t)(1u << (2 * p))), bias, xb)));
        s1 = mvi_add(s1, mvi_sad(mvi_blend8(mvi_test8(b, (int8_t)(2u << (2 * p))), bias, xb)));
    }
    /* Σ b0 x - 2 Σ b1 x, without the offsets: (s0 - off) - 2 (s1 - off) */
    return mvi_sub(mvi_sub(s0, kc->toff), mvi_slli(mvi_sub(s1, kc->toff), 1));
}

/* One step of NW rows of W (src[w]: its bytes; bs[w]: its first block's scale) against MR
 * rows of x (xq, xs, xc: the step's activations of each), into facc[i + w][A]; NW = 2 only
 * with MR = 1, where the two rows share each load of the activations. */
MV_AI MV_IT void SFX(int_step)(const int ik, const int iv, const bool clamp, const unsigned NW, const unsigned MR,
                               const unsigned A, const SFX(ic) * kc, const float *const *bs,
                               const uint8_t *const *src, const int8_t *const *xq, const float *const *xs,
                               const int32_t *const *xc, mvf facc[MR_MAX][2]) {
    const unsigned per = dk_per(ik);
    mvi b[2];
    mvf ws[2];
    MV_UNROLL
    for (unsigned w = 0; w < NW; w++) {
        b[w] = SFX(step_bytes_in)(ik, iv, kc, src[w]);
        ws[w] = kc->split ? mvf_perm(mvf_loadu(bs[w]), kc->ipat) : mvf_bcast(bs[w]);
    }
    /* one row of W: its planes once, for every row of x */
    mvi u[4];
    if (NW == 1 && iv != IV_TERN) {
        MV_UNROLL
        for (unsigned p = 0; p < per; p++) u[p] = SFX(plane)(ik, iv, kc, b[0], p);
    }
    MV_UNROLL
    for (unsigned i = 0; i < MR; i++) {
        mvi isum[2], h[2];
        MV_UNROLL
        for (unsigned w = 0; w < NW; w++) {
            isum[w] = iv == IV_TERN || iv == IV_SGN ? mvi_zero() : mvi_loadu(xc[i]);
            h[w] = mvi_zero();
        }
        if (iv == IV_TERN) {
            MV_UNROLL
            for (unsigned w = 0; w < NW; w++) isum[w] = SFX(tern_dot)(kc, b[w], xq[i]);
        } else {
            MV_UNROLL
            for (unsigned p = 0; p < per; p++) {
                mvi xv = mvi_loadu(xq[i] + (size_t)p * MV_B);
                MV_UNROLL
                for (unsigned w = 0; w < NW; w++)
                    SFX(plane_dot)(iv, NW == 1 ? u[p] : SFX(plane)(ik, iv, kc, b[w], p), xv, p, &h[w], &isum[w]);
            }
            if (iv == IV_OFF || iv == IV_XOR) {
                MV_UNROLL
                for (unsigned w = 0; w < NW; w++) isum[w] = mvi_add(isum[w], mvi_madd1(h[w]));
            }
        }
        /* the block scale clamped to +-FLT_MAX, NaN kept: a zero block under a scale near
         * FLT_MAX gives 0, not 0 x inf = NaN (see mm_int.c); without `clamp` the rows'
         * products are known to be finite already (int_range_k) */
        const mvf xsv = mvf_loadu(xs[i]);
        MV_UNROLL
        for (unsigned w = 0; w < NW; w++) {
            mvf d = mvf_mul(ws[w], xsv);
            if (clamp) d = mvf_clamp_finite(d);
            facc[i + w][A] = mvf_fma(mvf_from_i(isum[w]), d, facc[i + w][A]);
        }
    }
}

/* Rows r..r+NW-1 of W (the scales of row r + w times 2^-ishift at bs + w x bsld) times rows
 * m0..m0+MR-1 of x (NW = 2 only with MR = 1). */
MV_AI MV_IT void SFX(int_row)(const int ik, const int iv, const bool clamp, const unsigned NW, const unsigned MR,
                              const qtk__mm *c, const SFX(ic) * kc, const float *bs, size_t bsld, size_t r, size_t m0) {
    const size_t K = c->K, sf = (size_t)dk_per(ik) * MV_B;
    const uint8_t *row[2];
    MV_UNROLL
    for (unsigned w = 0; w < NW; w++) row[w] = c->w.vals + (r + w) * c->w.row_bytes;
    const size_t rbytes = row_field_bytes(ik, K), nst = qtk__ceil_div(K, sf), nfull = K / sf;
    /* the block of each step: split, sf / bc blocks a step; else a block every bc / sf steps */
    const size_t bc = c->w.bc, bstep = kc->split ? sf / bc : 0, spb = kc->split || bc >= K ? SIZE_MAX : bc / sf;
    const int8_t *xq[MR_MAX];
    const float *xs[MR_MAX];
    const int32_t *xc[MR_MAX];
    MV_UNROLL
    for (unsigned i = 0; i < MR; i++) {
        xq[i] = c->xq + (m0 + i) * c->kq;
        xs[i] = c->xs + (m0 + i) * c->xs_ld;
        xc[i] = c->xc ? c->xc + (m0 + i) * c->xc_ld : NULL;
    }
    mvf facc[MR_MAX][2];
    MV_UNROLL
    for (unsigned i = 0; i < MR + NW - 1; i++) facc[i][0] = facc[i][1] = mvf_zero();
    size_t st = 0, bi = 0, cnt = 0;
    const float *sb[2];
    const uint8_t *sp[2];
    uint8_t tb[2][TAIL_BYTES];
#define STEP(A, TAIL)                                                                                                  \
    do {                                                                                                               \
        MV_UNROLL                                                                                                      \
        for (unsigned w = 0; w < NW; w++) {                                                                            \
            sb[w] = bs + w * bsld + bi;                                                                                \
            sp[w] = row[w] + st * MV_B;                                                                                \
            if (TAIL && st == nfull) sp[w] = tail_copy_raw(tb[w], sp[w], rbytes - st * MV_B);                          \
        }                                                                                                              \
        SFX(int_step)(ik, iv, clamp, NW, MR, A, kc, sb, sp, xq, xs, xc, facc);                                        \
        MV_UNROLL                                                                                                      \
        for (unsigned i = 0; i < MR; i++) {                                                                            \
            xq[i] += sf;                                                                                               \
            xs[i] += MV_L;                                                                                             \
            if (xc[i]) xc[i] += MV_L;                                                                                  \
        }                                                                                                              \
        bi += bstep;                                                                                                   \
        if (++cnt == spb) {                                                                                            \
            cnt = 0;                                                                                                   \
            bi++;                                                                                                      \
        }                                                                                                              \
        st++;                                                                                                          \
    } while (0)
    for (; st + 2 <= nfull;) { /* two chains of accumulators */
        /* a line of each weight row QTK__MM_PF_BYTES ahead (rows follow each other in
         * memory): in DRAM the hardware prefetcher alone falls behind a kernel that also
         * computes */
        MV_UNROLL
        for (unsigned w = 0; w < NW; w++) mv_prefetch(row[w] + st * MV_B + QTK__MM_PF_BYTES);
        STEP(0, false);
        STEP(1, false);
    }
    while (st < nst) STEP(0, true);
#undef STEP
    MV_UNROLL
    for (unsigned j = 0; j < MR + NW - 1; j++) {
        const size_t m = NW == 1 ? m0 + j : m0, n = NW == 1 ? r : r + j;
        float s = mvf_hsum(mvf_add(facc[j][0], facc[j][1]));
        c->y[m * c->N + n] = c->bias ? s + c->bias[n] : s;
    }
}

MV_AI MV_IT void SFX(int_rows)(const int ik, const int iv, const bool clamp, const unsigned NW, const qtk__mm *c,
                               const SFX(ic) * kc, const float *ws, size_t wsld, size_t r) {
    const size_t M = c->M;
    if (NW == 2) {
        SFX(int_row)(ik, iv, clamp, 2, 1, c, kc, ws, wsld, r, 0);
        return;
    }
    size_t m = 0;
    for (; m + 4 <= M; m += 4) SFX(int_row)(ik, iv, clamp, 1, 4, c, kc, ws, wsld, r, m);
    for (; m + 2 <= M; m += 2) SFX(int_row)(ik, iv, clamp, 1, 2, c, kc, ws, wsld, r, m);
    if (m < M) SFX(int_row)(ik, iv, clamp, 1, 1, c, kc, ws, wsld, r, m);
}

/* ws: the scales of two rows (int_ws floats). With M = 1 the rows go in pairs. */
MV_AI MV_IT void SFX(int_range_k)(const int ik, const int iv, const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    SFX(ic) kc;
    SFX(ic_init)(ik, iv, c, &kc);
    const qtk__mmw *w = &c->w;
    const float unit = ldexpf(1.0f, -w->ishift);
    const size_t sbytes = w->gc * w->ssz, wsld = rs_floats(w->gc);
    const unsigned nw = c->M == 1 ? 2u : 1u;
    for (size_t r = n0; r < n1;) {
        const unsigned n = r + nw <= n1 ? nw : 1u;
        bool clamp = false;
        for (unsigned j = 0; j < n; j++) {
            /* the scales of a row QTK__MM_PF_ROWS ahead, a stream of its own */
            const size_t rr = r + j, ra = rr + QTK__MM_PF_ROWS;
            if (ra < n1) {
                const uint8_t *sp = w->sb + (w->br == 1 ? ra * w->gc : qtk__mmw_group0(w, ra)) * w->ssz;
                for (size_t o = 0; o < sbytes; o += 64) mv_prefetch(sp + o);
            }
            /* the prologue: the row's scales times 2^-ishift (the integers are 2^ishift x the
             * values), and whether a product with an activation scale can overflow */
            float wmax = row_scales_max(w, w->br == 1 ? rr * w->gc : qtk__mmw_group0(w, rr), w->gc, unit, ws + j * wsld);
            clamp |= !(wmax * c->xs_max <= FLT_MAX);
        }
        if (n == 2) {
            if (clamp) SFX(int_rows)(ik, iv, true, 2, c, &kc, ws, wsld, r);
            else SFX(int_rows)(ik, iv, false, 2, c, &kc, ws, wsld, r);
        } else {
            if (clamp) SFX(int_rows)(ik, iv, true, 1, c, &kc, ws, wsld, r);
            else SFX(int_rows)(ik, iv, false, 1, c, &kc, ws, wsld, r);
        }
        r += n;
    }
}

#define INTK(name, ik, iv)                                                                                             \
    static MV_IT void name(const qtk__mm *c, size_t n0, size_t n1, float *ws) { SFX(int_range_k)(ik, iv, c, n0, n1, ws); }
#if MV_DP
INTK(SFX(int_i8_dp), DK_I8, IV_DP)
INTK(SFX(int_t8_dp), DK_T8I, IV_DP)
INTK(SFX(int_t4_dp), DK_T4I, IV_DP)
INTK(SFX(int_t2_dp), DK_T2I, IV_DP)
#else
INTK(SFX(int_i8_sgn), DK_I8, IV_SGN)
INTK(SFX(int_t8_sgn), DK_T8I, IV_SGN)
INTK(SFX(int_t4_sgn), DK_T4I, IV_SGN)
INTK(SFX(int_t2_sgn), DK_T2I, IV_SGN)
INTK(SFX(int_t8_off), DK_T8I, IV_OFF)
INTK(SFX(int_t4_off), DK_T4I, IV_OFF)
INTK(SFX(int_t2_off), DK_T2I, IV_OFF)
INTK(SFX(int_t4_xor), DK_T4I, IV_XOR)
INTK(SFX(int_t2_xor), DK_T2I, IV_XOR)
INTK(SFX(int_t2_tern), DK_T2I, IV_TERN)
#endif

static MV_IT void SFX(nk_int)(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    const int ik = dk_of(&c->w);
#if MV_DP
    switch (ik) {
    case DK_I8: SFX(int_i8_dp)(c, n0, n1, ws); break;
    case DK_T8I: SFX(int_t8_dp)(c, n0, n1, ws); break;
    case DK_T4I: SFX(int_t4_dp)(c, n0, n1, ws); break;
    default: SFX(int_t2_dp)(c, n0, n1, ws); break;
    }
#else
    if (c->ivar == IV_TERN) {
        SFX(int_t2_tern)(c, n0, n1, ws);
        return;
    }
    const bool off = c->ivar == IV_OFF;
    if (c->ivar == IV_XOR) {
        if (ik == DK_T4I) SFX(int_t4_xor)(c, n0, n1, ws);
        else SFX(int_t2_xor)(c, n0, n1, ws);
        return;
    }
    switch (ik) {
    case DK_I8: SFX(int_i8_sgn)(c, n0, n1, ws); break;
    case DK_T8I: off ? SFX(int_t8_off)(c, n0, n1, ws) : SFX(int_t8_sgn)(c, n0, n1, ws); break;
    case DK_T4I: off ? SFX(int_t4_off)(c, n0, n1, ws) : SFX(int_t4_sgn)(c, n0, n1, ws); break;
    default: off ? SFX(int_t2_off)(c, n0, n1, ws) : SFX(int_t2_sgn)(c, n0, n1, ws); break;
    }
#endif
}

#undef INTK
