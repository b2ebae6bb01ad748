/* mm_body_gb32.h — store=ggml's integer path for the 32-element types (Q4_1, Q5_0, Q5_1),
 * included by mm_body_gb.h with the pmaddubsw dot product and again by mm_avx2.c with
 * vpdpbusd (AVX512-VNNI at 32 bytes). Set before including it: GB_IT (a target attribute or
 * nothing), GB_SFX(name) (a name suffix) and GB_DOT(acc, u, x): acc plus, in each int32 lane,
 * the 4 products of the lane's unsigned field bytes u and int8 activations x. Both dot
 * products give the same int32 lanes (pmaddubsw's int16 pairs cannot saturate here: fields
 * are at most 31, so a pair is at most 2 x 31 x 128), hence the same bits. */

/* The 32 types: blocks 8 at a time, block b in lane b mod 8 (mm_gb.h): their integer sums
 * reduced together (mvi_hsum8), their f16 words gathered, their float parts in vectors. */
MV_AI GB_IT void GB_SFX(gb_rows32_m)(const qtk__gfmt f, const size_t M, const bool clamp, const qtk__mm *c, size_t n0, size_t n1) {
    const bool affine = f != QTK__GF_Q5_0;
    const size_t bytes = gb_bytes[f], nb = c->K / 32;
    for (size_t n = n0; n < n1; n++) {
        const uint8_t *row = c->w.vals + n * c->w.row_bytes;
        for (size_t m0 = 0; m0 < M; m0 += QTK__MM_GB_MAX_M) {
            const size_t mc = M - m0 < QTK__MM_GB_MAX_M ? M - m0 : QTK__MM_GB_MAX_M;
            mvf A[QTK__MM_GB_MAX_M][8 / MV_L];
            for (size_t mi = 0; mi < mc; mi++)
                for (unsigned v = 0; v < 8 / MV_L; v++) A[mi][v] = mvf_zero();
            for (size_t b0 = 0; b0 < nb; b0 += 8) {
                const size_t nbb = nb - b0 < 8 ? nb - b0 : 8;
                const uint8_t *blk0 = row + b0 * bytes;
                for (size_t o = 0; o < 8 * bytes; o += 64) mv_prefetch(blk0 + QTK__MM_PF_BYTES + o);
                mvi a[QTK__MM_GB_MAX_M][8];
                for (size_t bb = 0; bb < 8; bb++) {
                    if (bb >= nbb) {
                        for (size_t mi = 0; mi < mc; mi++) a[mi][bb] = mvi_zero();
                        continue;
                    }
                    mvi u[GB_LV];
                    gb_32_vectors(f, blk0 + bb * bytes, u);
                    for (size_t mi = 0; mi < mc; mi++) {
                        const int8_t *xq = c->xq + (m0 + mi) * c->kq + (b0 + bb) * 32;
                        mvi s = mvi_zero();
                        MV_UNROLL
                        for (unsigned v = 0; v < GB_LV; v++) s = GB_DOT(s, u[v], mvi_loadu(xq + v * MV_B));
                        a[mi][bb] = s;
                    }
                }
                /* the blocks' d (and m) as f32, for every row of x */
                mvf wd[8 / MV_L], wm[8 / MV_L];
                MV_UNROLL
                for (unsigned v = 0; v < 8 / MV_L; v++) {
                    const mvi w = mvi_gather32s_st(blk0 + (size_t)v * MV_L * bytes, (int)bytes, gb_lanes_of(nbb, v));
                    wd[v] = mvf_f16_lo(w);
                    wm[v] = affine ? mvf_f16_hi(w) : mvf_zero();
                }
                for (size_t mi = 0; mi < mc; mi++) {
                    const size_t m = m0 + mi;
                    int32_t isum[8];
                    mvi_hsum8(a[mi], isum);
                    MV_UNROLL
                    for (unsigned v = 0; v < 8 / MV_L; v++) {
                        const size_t nv = gb_lanes_of(nbb, v);
                        const mvf sx = mvf_load_n(c->xs + m * c->xs_ld + b0 + v * MV_L, nv);
                        mvi I = mvi_loadu(isum + v * MV_L);
                        mvf ad = mvf_mul(wd[v], sx);
                        if (clamp) ad = mvf_clamp_finite(ad);
                        if (f == QTK__GF_Q5_0) /* the value is the field - 16 */
                            I = mvi_sub(I, mvi_slli(mvi_load32_n(c->xli + m * nb + b0 + v * MV_L, nv), 4));
                        mvf t = mvf_mul(ad, mvf_from_i(I));
                        if (affine) {
                            mvf bm = mvf_mul(wm[v], sx);
                            if (clamp) bm = mvf_clamp_finite(bm);
                            t = mvf_add(t, mvf_mul(bm, mvf_load_n(c->xlf + m * nb + b0 + v * MV_L, nv)));
                        }
                        A[mi][v] = mvf_add(A[mi][v], t);
                    }
                }
            }
            gb_store(c, A, mc, m0, n);
        }
    }
}

/* GEMV (M = 1) on its own, and whether the scale products need their clamp */
MV_AI GB_IT void GB_SFX(gb_rows32)(const qtk__gfmt f, const qtk__mm *c, size_t n0, size_t n1) {
    const bool clamp = !(c->xs_max <= FLT_MAX / 65504.0f); /* |d|, |m| <= 65504: f16's largest */
    if (c->M == 1 && !clamp) GB_SFX(gb_rows32_m)(f, 1, false, c, n0, n1);
    else if (c->M == 1) GB_SFX(gb_rows32_m)(f, 1, true, c, n0, n1);
    else GB_SFX(gb_rows32_m)(f, c->M, true, c, n0, n1);
}
