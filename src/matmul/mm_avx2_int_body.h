/* mm_avx2_int_body.h — the AVX2 integer kernel, included twice by mm_avx2_int.c: with
 * QTK__INT_VNNI 1 (AVX-VNNI vpdpbusd on 256-bit vectors, functions built for "avxvnni",
 * suffix _vnni) and 0 (vpmaddubsw, suffix _mad). The design is mm_avx512_int_body.h's with
 * 32-byte steps: unsigned weights + 128 with the activations' correction for VNNI; |w| times
 * x with w's sign (vpsignb) for vpmaddubsw, which then cannot saturate. */

#if QTK__INT_VNNI
#  define IT __attribute__((target("avxvnni")))
#  define SFX(x) x##_vnni
#else
#  define IT
#  define SFX(x) x##_mad
#endif

/* Byte vector j of a step: unsigned weights + 128 (VNNI) or signed weights. */
QTK_AI IT __m256i SFX(wbytes)(const int kind, __m256i w, unsigned j, __m256i tab) {
    const __m256i lo4 = _mm256_set1_epi8(0x0f);
    switch (kind) {
    case QTK__MMK_I8: return QTK__INT_VNNI ? _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)) : w;
    case QTK__MMK_T8: return _mm256_shuffle_epi8(tab, w);
    case QTK__MMK_T4: return _mm256_shuffle_epi8(tab, _mm256_and_si256(j ? _mm256_srli_epi16(w, 4) : w, lo4));
    default: return _mm256_shuffle_epi8(tab, _mm256_and_si256(j ? _mm256_srli_epi16(w, 2 * (int)j) : w, lo4));
    }
}

typedef struct {
    bool split;
    __m256i pat, bm; /* split: weight block of each lane; lanes that load a block scale */
    __m256i tab;     /* byte value of each code, in both 128-bit lanes */
    float unit;      /* 2^-ishift */
} SFX(int_consts);

QTK_AI IT void SFX(int_consts_init)(const int kind, const qtk__mm *c, SFX(int_consts) *k) {
    const qtk__mmw *w = &c->w;
    const unsigned per = kind == QTK__MMK_T4 ? 2u : kind == QTK__MMK_T2 ? 4u : 1u;
    const size_t CH = 32u * per, bc = w->bc;
    k->split = !(bc >= c->K || bc % CH == 0); /* then CH % bc == 0: bc is a power of two */
    alignas(32) int32_t pidx[8], bm[8];
    size_t cb = k->split ? CH / bc : 0;
    for (unsigned l = 0; l < 8; l++) {
        pidx[l] = k->split ? (int32_t)((4 * per * l) / bc) : 0;
        bm[l] = l < cb ? -1 : 0;
    }
    k->pat = _mm256_load_si256((const __m256i *)(const void *)pidx);
    k->bm = _mm256_load_si256((const __m256i *)(const void *)bm);
    k->unit = ldexpf(1.0f, -w->ishift);
    alignas(32) int8_t tb[32];
    for (unsigned i = 0; i < 32; i++) tb[i] = (int8_t)(QTK__INT_VNNI ? w->ival[i % 16] + 128 : w->ival[i % 16]);
    k->tab = _mm256_load_si256((const __m256i *)(const void *)tb);
}

/* 32 bytes of a row (fewer at its end, the rest zero). */
QTK_AI __m256i SFX(step_bytes)(const uint8_t *p, unsigned nbytes) {
    if (QTK_LIKELY(nbytes >= 32)) return _mm256_loadu_si256((const __m256i *)(const void *)p);
    alignas(32) uint8_t buf[32] = {0};
    memcpy(buf, p, nbytes);
    return _mm256_load_si256((const __m256i *)(const void *)buf);
}

/* Rows n..n+NR-1 of W times rows m0..m0+MR-1 of x. */
QTK_AI IT void SFX(int_tile)(const int kind, const unsigned MR, const unsigned NR, const qtk__mm *c,
                             const SFX(int_consts) *kc, size_t n, size_t m0) {
    const qtk__mmw *w = &c->w;
    const unsigned per = kind == QTK__MMK_T4 ? 2u : kind == QTK__MMK_T2 ? 4u : 1u;
    const size_t CH = 32u * per, K = c->K, kq = c->kq, bc = w->bc;
    const bool split = kc->split;
#if !QTK__INT_VNNI
    const __m256i ones = _mm256_set1_epi16(1);
#endif
    const uint8_t *row[2];
    size_t g0[2];
    QTK_UNROLL
    for (unsigned r = 0; r < NR; r++) {
        row[r] = w->vals + (n + r) * w->row_bytes;
        g0[r] = qtk__mmw_group0(w, n + r);
    }
    __m256 facc[2][2];
    QTK_UNROLL
    for (unsigned i = 0; i < MR; i++)
        QTK_UNROLL
        for (unsigned r = 0; r < NR; r++) facc[i][r] = _mm256_setzero_ps();
    alignas(32) float bs[2][QTK__MM_SEG / 16 + 32];

    for (size_t s0 = 0; s0 < kq; s0 += QTK__MM_SEG) {
        size_t s1 = kq - s0 < QTK__MM_SEG ? kq : s0 + QTK__MM_SEG;
        size_t b0 = s0 / bc, last = (s1 < K ? s1 : K) - 1, nblk = last / bc - b0 + 1;
        QTK_UNROLL
        for (unsigned r = 0; r < NR; r++) {
            load_scales(w, g0[r] + b0, nblk, bs[r]);
            if (w->ishift)
                for (size_t i = 0; i < nblk; i++) bs[r][i] *= kc->unit;
        }
        qtk__blk_walk bw;
        qtk__blk_start(&bw, s0, bc);
        size_t si = 0;
        for (size_t k = s0; k < s1; k += CH, si += split ? CH / bc : 0) {
            const size_t st = k / CH, rem = K - k;
            const size_t bi = split ? si : qtk__blk_at(&bw, k);
            const unsigned nbytes = rem >= CH ? 32u : (unsigned)((rem + per - 1) / per);
            __m256 wsv[2];
            __m256i wv[2];
            QTK_UNROLL
            for (unsigned r = 0; r < NR; r++) {
                wsv[r] = split ? _mm256_permutevar8x32_ps(_mm256_maskload_ps(bs[r] + bi, kc->bm), kc->pat)
                               : _mm256_set1_ps(bs[r][bi]);
                wv[r] = SFX(step_bytes)(row[r] + k / per, nbytes);
            }
            __m256i isum[2][2];
            QTK_UNROLL
            for (unsigned i = 0; i < MR; i++)
                QTK_UNROLL
                for (unsigned r = 0; r < NR; r++)
                    isum[i][r] = QTK__INT_VNNI
                                     ? _mm256_loadu_si256((const __m256i *)(const void *)(c->xc + (m0 + i) * c->xc_ld + st * 8))
                                     : _mm256_setzero_si256();
            QTK_UNROLL
            for (unsigned j = 0; j < per; j++) {
                __m256i u[2];
                QTK_UNROLL
                for (unsigned r = 0; r < NR; r++) u[r] = SFX(wbytes)(kind, wv[r], j, kc->tab);
                QTK_UNROLL
                for (unsigned i = 0; i < MR; i++) {
                    __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(c->xq + (m0 + i) * kq + k + 32 * j));
                    QTK_UNROLL
                    for (unsigned r = 0; r < NR; r++) {
#if QTK__INT_VNNI
                        isum[i][r] = _mm256_dpbusd_avx_epi32(isum[i][r], u[r], xv);
#else
                        __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(u[r]), _mm256_sign_epi8(xv, u[r]));
                        isum[i][r] = _mm256_add_epi32(isum[i][r], _mm256_madd_epi16(p, ones));
#endif
                    }
                }
            }
            QTK_UNROLL
            for (unsigned i = 0; i < MR; i++) {
                __m256 xs = _mm256_loadu_ps(c->xs + (m0 + i) * c->xs_ld + st * 8);
                QTK_UNROLL
                for (unsigned r = 0; r < NR; r++)
                    /* the block scale clamped to +-FLT_MAX (NaN kept: min returns its second
                     * operand then): a zero block under a huge scale gives 0, not NaN */
                    facc[i][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[i][r]),
                                                 _mm256_max_ps(_mm256_set1_ps(-FLT_MAX),
                                                               _mm256_min_ps(_mm256_set1_ps(FLT_MAX), _mm256_mul_ps(wsv[r], xs))),
                                                 facc[i][r]);
            }
        }
    }
    QTK_UNROLL
    for (unsigned i = 0; i < MR; i++)
        QTK_UNROLL
        for (unsigned r = 0; r < NR; r++) {
            float s = hsum(facc[i][r]);
            c->y[(m0 + i) * c->N + n + r] = c->bias ? s + c->bias[n + r] : s;
        }
}

/* Rows [n0, n1) in tiles of 2, the last one moved back to end at n1 (same bits). */
QTK_AI IT void SFX(int_range_k)(const int kind, const qtk__mm *c, size_t n0, size_t n1) {
    SFX(int_consts) kc;
    SFX(int_consts_init)(kind, c, &kc);
    const size_t M = c->M;
    if (n1 - n0 < 2) {
        for (size_t m = 0; m < M; m++) SFX(int_tile)(kind, 1, 1, c, &kc, n0, m);
        return;
    }
    for (size_t n = n0; n < n1; n += 2) {
        size_t t = n1 - n < 2 ? n1 - 2 : n, m = 0;
        for (; m + 2 <= M; m += 2) SFX(int_tile)(kind, 2, 2, c, &kc, t, m);
        if (m < M) SFX(int_tile)(kind, 1, 2, c, &kc, t, m);
    }
}

static IT void SFX(int_range)(const qtk__mm *c, size_t n0, size_t n1) {
    switch (c->w.kind) {
    case QTK__MMK_I8: SFX(int_range_k)(QTK__MMK_I8, c, n0, n1); break;
    case QTK__MMK_T8: SFX(int_range_k)(QTK__MMK_T8, c, n0, n1); break;
    case QTK__MMK_T4: SFX(int_range_k)(QTK__MMK_T4, c, n0, n1); break;
    default: SFX(int_range_k)(QTK__MMK_T2, c, n0, n1); break;
    }
}

#undef IT
#undef SFX
