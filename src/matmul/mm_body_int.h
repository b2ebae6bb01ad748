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
 *           where mvi_dp multiplies signed bytes (MV_DP_BIAS 0: NEON's sdot, or smull and
 *           sadalp) the weights as they are, the lane starting from 0;
 *   IV_OFF  pmaddubsw on unsigned weights (value + off, off = -min value) when the int16
 *           sums of all planes cannot saturate (per x (max - min) <= 129), one pmaddwd,
 *           starting from -off x Σq;
 *   IV_XDP  IV_XOR's weights (below) on vpdpbusd: the code with its top bit flipped is
 *           value + 2^(width-1), unsigned, so no table lookup; the lane starting from
 *           -2^(width-1) x Σq (vocabularies whose dot product takes unsigned weights);
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
 * scale) and added into f32 accumulators, so every flavour but IV_TERN (whose lanes group
 * 32 fields, not 4 x per) gives the same bits at one width and vocabulary
 * (test_matmul's integer_flavours_same_bits). */

#ifndef MV_IT
#  error "define MV_IT and SFX before including mm_body_int.h"
#endif

/* what every row of a call shares */
typedef struct {
    bool split;   /* a step spans several weight blocks; else a block spans 2^bsh steps */
    unsigned bsh; /* 63 for one block a row */
    size_t bstep; /* split: the blocks of a step (sf / bc, made once: a division) */
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
    /* bc is a power of two >= 16 or at least K (matmul.c's int_block), sf a power of two */
    k->split = !(bc >= c->K || bc % sf == 0);
    k->bstep = k->split ? sf / bc : 0;
    k->bsh = 63; /* one block a row */
    if (bc < c->K)
        for (k->bsh = 0; ((size_t)sf << k->bsh) < bc;) k->bsh++;
    int32_t pat[MV_L], off[MV_L];
    for (unsigned l = 0; l < MV_L; l++) {
        pat[l] = k->split ? (int32_t)((4 * per * l) / bc) : 0;
        off[l] = l % 2 ? 0 : 4 * 8 * 128;
    }
    k->ipat = mvi_loadu(pat);
    k->toff = mvi_loadu(off);
    int8_t t[16];
    for (unsigned i = 0; i < 16; i++)
        t[i] = (int8_t)(iv == IV_DP ? w->ival[i] + MV_DP_BIAS : iv == IV_OFF ? w->ival[i] + c->ioff : w->ival[i]);
    k->utab = mvi_table16(t);
    k->cmask = mvi_set1_8(dk_cw(ik) == 4 ? 0x0f : 0x03);
    k->xmask = mvi_set1_8(dk_cw(ik) == 4 ? (int8_t)0x88 : (int8_t)0xaa);
}

/* A step of a row (src: its bytes; ws, nz: each lane's weight scale and -z) into the
 * accumulators facc[i][A]. xq, xs, xc: the step's activations of each row. */
MV_AI MV_IT void SFX(int_step)(const int ik, const int iv, const bool clamp, const bool zp, const unsigned MR,
                               const unsigned A, const SFX(ic) * kc, const mvf ws, const mvf nz, const uint8_t *src,
                               const int8_t *const *xq, const float *const *xs, const int32_t *const *xc,
                               const float *const *xz, mvf facc[MR_MAX][2]) {
    const unsigned per = dk_per(ik), cw = dk_cw(ik);
    mvi b = mvi_loadu(src);
    /* the weight planes */
    mvi u[4], a[4];
    if (iv == IV_TERN) {
        u[0] = b;
    } else if (ik == DK_I8) {
        u[0] = iv == IV_SGN || MV_DP_BIAS == 0 ? b : mvi_xor(b, mvi_set1_8((int8_t)-128)); /* DP: + 128 */
    } else if (iv == IV_XOR || iv == IV_XDP) {
        const mvi bx = mvi_xor(b, kc->xmask);
        MV_UNROLL
        for (unsigned p = 0; p < per; p++) u[p] = mvi_and(p ? mvi_srli(bx, cw * p) : bx, kc->cmask);
    } else {
        MV_UNROLL
        for (unsigned p = 0; p < per; p++) u[p] = mvi_lookup16(kc->utab, mvi_and(p ? mvi_srli(b, cw * p) : b, kc->cmask));
    }
    if (iv == IV_SGN) {
        MV_UNROLL
        for (unsigned p = 0; p < per; p++) a[p] = mvi_abs8(u[p]);
    }
    MV_UNROLL
    for (unsigned i = 0; i < MR; i++) {
        mvi isum;
        if (iv == IV_TERN) {
            const mvi bias = mvi_set1_8((int8_t)-128);
            mvi s0 = mvi_zero(), s1 = mvi_zero();
            MV_UNROLL
            for (unsigned p = 0; p < 4; p++) {
                mvi xb = mvi_xor(mvi_loadu(xq[i] + (size_t)p * MV_B), bias); /* x + 128, unsigned */
                s0 = mvi_add(s0, mvi_sad(mvi_blend8(mvi_test8(b, (int8_t)(1u << (2 * p))), bias, xb)));
                s1 = mvi_add(s1, mvi_sad(mvi_blend8(mvi_test8(b, (int8_t)(2u << (2 * p))), bias, xb)));
            }
            /* Σ b0 x - 2 Σ b1 x, without the offsets: (s0 - off) - 2 (s1 - off) */
            isum = mvi_sub(mvi_sub(s0, kc->toff), mvi_slli(mvi_sub(s1, kc->toff), 1));
        } else if (iv == IV_SGN) {
            isum = mvi_zero();
            MV_UNROLL
            for (unsigned p = 0; p < per; p++) {
                mvi xv = mvi_loadu(xq[i] + (size_t)p * MV_B);
                isum = mvi_add(isum, mvi_madd1(mvi_maddubs(a[p], mvi_sign8(xv, u[p]))));
            }
        } else {
            isum = iv == IV_DP && MV_DP_BIAS == 0 ? mvi_zero() : mvi_loadu(xc[i]);
#if MV_DP
            if (iv == IV_DP || iv == IV_XDP) {
                MV_UNROLL
                for (unsigned p = 0; p < per; p++) isum = mvi_dp(isum, u[p], mvi_loadu(xq[i] + (size_t)p * MV_B));
            } else
#endif
            {
                mvi h = mvi_maddubs(u[0], mvi_loadu(xq[i]));
                MV_UNROLL
                for (unsigned p = 1; p < per; p++) h = mvi_add16(h, mvi_maddubs(u[p], mvi_loadu(xq[i] + (size_t)p * MV_B)));
                isum = mvi_add(isum, mvi_madd1(h));
            }
        }
        /* the block scale clamped to +-FLT_MAX, NaN kept: a zero block under a scale near
         * FLT_MAX gives 0, not 0 x inf = NaN (see mm_int.c); without `clamp` the row's
         * products are known to be finite already (int_range_k) */
        mvf d = mvf_mul(ws, mvf_loadu(xs[i]));
        if (clamp) d = mvf_clamp_finite(d);
        mvf fi = mvf_from_i(isum);
        /* Σ (q - z) x = Σ q x - z Σ x: integers below 2^24, so the fma is exact */
        if (zp) fi = mvf_fma(nz, mvf_loadu(xz[i]), fi);
        facc[i][A] = mvf_fma(fi, d, facc[i][A]);
    }
}

/* Row r of W (its scales times 2^-ishift in bs) times rows m0..m0+MR-1 of x; split: kc->split. */
MV_AI MV_IT void SFX(int_row)(const int ik, const int iv, const bool clamp, const bool zp, const bool split,
                              const unsigned MR, const qtk__mm *c, const SFX(ic) * kc, const float *bs, const float *zs,
                              size_t r, size_t m0) {
    const size_t K = c->K, sf = (size_t)dk_per(ik) * MV_B;
    const uint8_t *row = c->w.vals + r * c->w.row_bytes;
    const size_t rbytes = row_field_bytes(ik, K), nst = qtk__ceil_div(K, sf), nfull = K / sf;
    /* the block of each step: split, sf / bc blocks a step; else a block every 2^bsh steps */
    const size_t bstep = split ? kc->bstep : 0;
    const int8_t *xq[MR_MAX];
    const float *xs[MR_MAX];
    const int32_t *xc[MR_MAX];
    const float *xz[MR_MAX];
    MV_UNROLL
    for (unsigned i = 0; i < MR; i++) {
        xq[i] = c->xq + (m0 + i) * c->kq;
        xs[i] = c->xs + (m0 + i) * c->xs_ld;
        xc[i] = c->xc ? c->xc + (m0 + i) * c->xc_ld : NULL;
        xz[i] = zp ? c->xz + (m0 + i) * c->xs_ld : NULL;
    }
    mvf facc[MR_MAX][2];
    MV_UNROLL
    for (unsigned i = 0; i < MR; i++) facc[i][0] = facc[i][1] = mvf_zero();
    /* each lane's weight scale and -z: where a block spans steps its index is a shift of the
     * step's, with no branch in the loop (ternary GEMV 0.94x the time, Zen 3, against a
     * counter whose block change left the loop; split as a constant too: q4_0's 0.96x) */
    size_t st = 0, bi = 0; /* bi: split's first block of the step */
    mvf ws, nz = mvf_zero();
#define STEP(A, src)                                                                                                   \
    do {                                                                                                               \
        if (split) {                                                                                                   \
            ws = mvf_perm(mvf_loadu(bs + bi), kc->ipat);                                                               \
            if (zp) nz = mvf_perm(mvf_loadu(zs + bi), kc->ipat);                                                       \
            bi += bstep;                                                                                               \
        } else {                                                                                                       \
            ws = mvf_bcast(bs + (st >> kc->bsh));                                                                      \
            if (zp) nz = mvf_bcast(zs + (st >> kc->bsh));                                                              \
        }                                                                                                              \
        SFX(int_step)(ik, iv, clamp, zp, MR, A, kc, ws, nz, src, xq, xs, xc, xz, facc);                               \
        MV_UNROLL                                                                                                      \
        for (unsigned i = 0; i < MR; i++) {                                                                            \
            xq[i] += sf;                                                                                               \
            xs[i] += MV_L;                                                                                             \
            if (xc[i]) xc[i] += MV_L;                                                                                  \
            if (zp) xz[i] += MV_L;                                                                                     \
        }                                                                                                              \
        st++;                                                                                                          \
    } while (0)
    for (; st + 2 <= nfull;) { /* two chains of accumulators */
        /* the weights QTK__MM_PF_BYTES ahead (rows follow each other in memory): in DRAM the
         * hardware prefetcher alone falls behind a kernel that also computes. One line an
         * iteration; both of a 64-byte pair for 4- and 2-bit weights (8-bit: no gain) */
        mv_prefetch(row + st * MV_B + QTK__MM_PF_BYTES);
        if (MV_B == 64 && dk_per(ik) >= 2) mv_prefetch(row + st * MV_B + QTK__MM_PF_BYTES + 64);
        STEP(0, row + st * MV_B);
        STEP(1, row + st * MV_B);
    }
    uint8_t tb[TAIL_BYTES];
    for (; st < nst;) {
        const uint8_t *src = row + st * MV_B;
        if (st == nfull) src = tail_copy_raw(tb, src, rbytes - st * MV_B);
        STEP(0, src);
    }
#undef STEP
    MV_UNROLL
    for (unsigned i = 0; i < MR; i++) {
        float s = mvf_hsum(mvf_add(facc[i][0], facc[i][1]));
        c->y[(m0 + i) * c->N + r] = c->bias ? s + c->bias[r] : s;
    }
}

/* Rows r0 .. r0 + nr - 1 of W (row t's prologue in slot t of ws: its scales, then its -z at rsf;
 * clamp[t]: a product of its scales may overflow) times rows m0 .. m0 + MR - 1 of x */
MV_AI MV_IT void SFX(int_tile)(const int ik, const int iv, const bool zp, const unsigned MR, const qtk__mm *c,
                               const SFX(ic) * kc, const float *ws, size_t slot, size_t rsf, const bool *clamp,
                               size_t r0, size_t nr, size_t m0) {
    for (size_t t = 0; t < nr; t++) {
        const float *bs = ws + t * slot, *zs = bs + rsf;
        if (clamp[t]) SFX(int_row)(ik, iv, true, zp, kc->split, MR, c, kc, bs, zs, r0 + t, m0); /* rare */
        else if (kc->split) SFX(int_row)(ik, iv, false, zp, true, MR, c, kc, bs, zs, r0 + t, m0);
        else SFX(int_row)(ik, iv, false, zp, false, MR, c, kc, bs, zs, r0 + t, m0);
    }
}

/* Rows n0 .. n1 of W by tiles of int_tile_rows: the tile's prologues (each row's scales times
 * 2^-ishift, as the integers are 2^ishift x the values; whether a product with an activation
 * scale can overflow), then x's rows 4 (2, 1) at a time, each group meeting every row of the
 * tile. one: M is 1, a constant (a GEMV row's code then holds none of the setup of 4 and 2 rows:
 * 0.95x the time, ternary GEMV on Zen 3). */
MV_AI MV_IT void SFX(int_range_m)(const int ik, const int iv, const bool zp, const bool one, const qtk__mm *c,
                                  size_t n0, size_t n1, float *ws) {
    SFX(ic) kc;
    SFX(ic_init)(ik, iv, c, &kc);
    const qtk__mmw *w = &c->w;
    const float unit = ldexpf(1.0f, -w->ishift);
    const size_t rsf = mm_row_zoff(c), M = one ? 1 : c->M, RB = one ? 1 : int_tile_rows(c), slot = int_slot_floats(c);
    bool clamp[QTK__MM_INT_TILE];
    if (zp) /* each slot's -z, padded as the scales */
        for (size_t t = 0; t < RB; t++)
            for (size_t g = w->gc; g < rsf; g++) ws[t * slot + rsf + g] = 0.0f;
    for (size_t r0 = n0; r0 < n1; r0 += RB) {
        const size_t nr = n1 - r0 < RB ? n1 - r0 : RB;
        for (size_t t = 0; t < nr; t++) {
            const size_t r = r0 + t;
            float *bs = ws + t * slot, *zs = bs + rsf;
            prefetch_row_scales(w, r, n1);
            const size_t g0 = qtk__mmw_group0(w, r);
            clamp[t] = row_scales_max(w, g0, w->gc, unit, bs) * c->xs_max > FLT_MAX;
            if (zp)
                for (size_t g = 0; g < w->gc; g++) zs[g] = -(float)w->zb[g0 + g];
        }
        size_t m = 0;
        for (; m + 4 <= M; m += 4) SFX(int_tile)(ik, iv, zp, 4, c, &kc, ws, slot, rsf, clamp, r0, nr, m);
        for (; m + 2 <= M; m += 2) SFX(int_tile)(ik, iv, zp, 2, c, &kc, ws, slot, rsf, clamp, r0, nr, m);
        if (m < M) SFX(int_tile)(ik, iv, zp, 1, c, &kc, ws, slot, rsf, clamp, r0, nr, m);
    }
}

MV_AI MV_IT void SFX(int_range_k)(const int ik, const int iv, const bool zp, const qtk__mm *c, size_t n0, size_t n1,
                                  float *ws) {
    /* the M = 1 loop is a third more code to compile: only where the compiler optimizes (an
     * unoptimized sanitizer build of the test's 8- and 16-lane bodies took 1003 s without it,
     * over 1300 s with it); the rows' results are the same either way */
#ifdef __OPTIMIZE__
    if (c->M == 1) {
        SFX(int_range_m)(ik, iv, zp, true, c, n0, n1, ws);
        return;
    }
#endif
    SFX(int_range_m)(ik, iv, zp, false, c, n0, n1, ws);
}

#define INTK(name, ik, iv)                                                                                             \
    static MV_IT void name(const qtk__mm *c, size_t n0, size_t n1, float *ws) {                                        \
        SFX(int_range_k)(ik, iv, false, c, n0, n1, ws);                                                                \
    }
/* zero points (u4 / u2 codes): the flavours unsigned codes take */
#define INTKZ(name, ik, iv)                                                                                            \
    static MV_IT void name(const qtk__mm *c, size_t n0, size_t n1, float *ws) {                                        \
        SFX(int_range_k)(ik, iv, true, c, n0, n1, ws);                                                                 \
    }
#if MV_DP
INTKZ(SFX(int_t4_dp_z), DK_T4I, IV_DP)
INTKZ(SFX(int_t2_dp_z), DK_T2I, IV_DP)
INTK(SFX(int_i8_dp), DK_I8, IV_DP)
INTK(SFX(int_t8_dp), DK_T8I, IV_DP)
INTK(SFX(int_t4_dp), DK_T4I, IV_DP)
INTK(SFX(int_t2_dp), DK_T2I, IV_DP)
#  if MV_DP_BIAS
INTK(SFX(int_t4_xdp), DK_T4I, IV_XDP)
INTK(SFX(int_t2_xdp), DK_T2I, IV_XDP)
#  endif
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
INTKZ(SFX(int_t4_off_z), DK_T4I, IV_OFF)
INTKZ(SFX(int_t2_off_z), DK_T2I, IV_OFF)
#endif

static MV_IT void SFX(nk_int)(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    const int ik = dk_of(&c->w);
#if MV_DP
    if (c->w.zb) {
        if (ik == DK_T4I) SFX(int_t4_dp_z)(c, n0, n1, ws);
        else SFX(int_t2_dp_z)(c, n0, n1, ws);
        return;
    }
#  if MV_DP_BIAS
    if (c->ivar == IV_XDP) {
        if (ik == DK_T4I) SFX(int_t4_xdp)(c, n0, n1, ws);
        else SFX(int_t2_xdp)(c, n0, n1, ws);
        return;
    }
#  endif
    switch (ik) {
    case DK_I8: SFX(int_i8_dp)(c, n0, n1, ws); break;
    case DK_T8I: SFX(int_t8_dp)(c, n0, n1, ws); break;
    case DK_T4I: SFX(int_t4_dp)(c, n0, n1, ws); break;
    default: SFX(int_t2_dp)(c, n0, n1, ws); break;
    }
#else
    if (c->w.zb) { /* unsigned codes: IV_OFF with off = 0 (int_prepare) */
        if (ik == DK_T4I) SFX(int_t4_off_z)(c, n0, n1, ws);
        else SFX(int_t2_off_z)(c, n0, n1, ws);
        return;
    }
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
