/* mm_avx512_int_body.h — the AVX-512 integer kernel, included twice by mm_avx512_int.c:
 * with QTK__INT_VNNI 1 (functions built for AVX512-VNNI, suffix _vnni) and 0 (AVX-512BW
 * only, suffix _bw). Two copies rather than one function with a flag, because a function
 * compiled for VNNI may contain VNNI instructions anywhere and must never run on a CPU
 * without it.
 *
 * A step reads 64 bytes of a weight row (64, 128 or 256 fields) and makes `per` byte
 * vectors of weights: with VNNI, unsigned (value + 128) for vpdpbusd, whose int32 lanes
 * start from the activations' correction xc (-128 x their sum) so that they end with the
 * exact signed dot product; without VNNI, signed, multiplied as |w| x (x with w's sign) by
 * vpmaddubsw (|w| <= 128, so the pairs never saturate) and summed by vpmaddwd. With VBMI
 * (QTK__INT_VBMI, on top of VNNI) codes become bytes with vpermb on a 64-entry table that
 * repeats the 16 values, so the neighbouring bits a shift leaves in an index need no mask.
 * Each int32
 * lane covers fields of one activation block and one weight block, so after a step every
 * lane is scaled by (weight scale x activation scale) and added into f32 accumulators. */

#if QTK__INT_VBMI
#  define IT __attribute__((target("avx512vnni,avx512vbmi")))
#  define SFX(x) x##_vbmi
#elif QTK__INT_VNNI
#  define IT __attribute__((target("avx512vnni")))
#  define SFX(x) x##_vnni
#else
#  define IT
#  define SFX(x) x##_bw
#endif

/* Byte vector j of a step: unsigned weights + 128 (VNNI) or signed weights. */
QTK_AI IT __m512i SFX(wbytes)(const int kind, __m512i w, unsigned j, __m512i tab) {
    const __m512i lo4 = _mm512_set1_epi8(0x0f);
#if QTK__INT_VBMI
    switch (kind) {
    case QTK__MMK_I8: return _mm512_xor_si512(w, _mm512_set1_epi8((char)0x80));
    case QTK__MMK_T8: return _mm512_permutexvar_epi8(w, tab);
    case QTK__MMK_T4: return _mm512_permutexvar_epi8(j ? _mm512_srli_epi16(w, 4) : w, tab);
    default: return _mm512_permutexvar_epi8(j ? _mm512_srli_epi16(w, 2 * (int)j) : w, tab);
    }
#endif
    switch (kind) {
    case QTK__MMK_I8: return QTK__INT_VNNI ? _mm512_xor_si512(w, _mm512_set1_epi8((char)0x80)) : w;
    case QTK__MMK_T8: return _mm512_shuffle_epi8(tab, w);
    case QTK__MMK_T4:
        return _mm512_shuffle_epi8(tab, _mm512_and_si512(j ? _mm512_srli_epi16(w, 4) : w, lo4));
    default: /* T2: the table repeats every 4 entries, so the code needs no mask beyond 4 bits */
        return _mm512_shuffle_epi8(tab, _mm512_and_si512(j ? _mm512_srli_epi16(w, 2 * (int)j) : w, lo4));
    }
}

/* What every tile of a call shares (computed once per thread range). */
typedef struct {
    bool split;      /* a step spans several weight blocks */
    __m512i pat;     /* split: weight block of each lane, relative to the step's first */
    __mmask16 bmask; /* split: blocks in a step */
    __m512 unit;     /* 2^-ishift */
    __m512i tab;     /* byte value of each code, in every 128-bit lane */
} SFX(int_consts);

QTK_AI IT void SFX(int_consts_init)(const int kind, const qtk__mm *c, SFX(int_consts) *k) {
    const qtk__mmw *w = &c->w;
    const unsigned per = kind == QTK__MMK_T4 ? 2u : kind == QTK__MMK_T2 ? 4u : 1u;
    const size_t CH = 64u * per, bc = w->bc;
    k->split = !(bc >= c->K || bc % CH == 0); /* then CH % bc == 0: bc is a power of two */
    alignas(64) int32_t pidx[16];
    for (unsigned l = 0; l < 16; l++) pidx[l] = k->split ? (int32_t)((4 * per * l) / bc) : 0;
    k->pat = _mm512_load_si512(pidx);
    k->bmask = k->split ? (__mmask16)((1u << (CH / bc)) - 1u) : 0;
    k->unit = _mm512_set1_ps(ldexpf(1.0f, -w->ishift));
    alignas(16) int8_t tb[16];
    QTK_UNROLL
    for (unsigned i = 0; i < 16; i++) tb[i] = (int8_t)(QTK__INT_VNNI ? w->ival[i] + 128 : w->ival[i]);
    k->tab = _mm512_broadcast_i32x4(_mm_load_si128((const __m128i *)(const void *)tb));
}

/* Rows n..n+NR-1 of W times rows m0..m0+MR-1 of x. */
QTK_AI IT void SFX(int_tile)(const int kind, const unsigned MR, const unsigned NR, const qtk__mm *c,
                             const SFX(int_consts) *kc, size_t n, size_t m0) {
    const qtk__mmw *w = &c->w;
    const unsigned per = kind == QTK__MMK_T4 ? 2u : kind == QTK__MMK_T2 ? 4u : 1u;
    const size_t CH = 64u * per, K = c->K, kq = c->kq, bc = w->bc, steps_ld = c->xs_ld;
    const bool split = kc->split;
    const __m512i pat = kc->pat, tab = kc->tab;
    const __mmask16 bmask = kc->bmask;
    const __m512 unit = kc->unit;
#if !QTK__INT_VNNI
    const __m512i ones = _mm512_set1_epi16(1);
#endif
    const uint8_t *row[4];
    size_t g0[4];
    QTK_UNROLL
    for (unsigned r = 0; r < NR; r++) {
        row[r] = w->vals + (n + r) * w->row_bytes;
        g0[r] = qtk__mmw_group0(w, n + r);
    }
    __m512 facc[4][4];
    QTK_UNROLL
    for (unsigned i = 0; i < MR; i++)
        QTK_UNROLL
        for (unsigned r = 0; r < NR; r++) facc[i][r] = _mm512_setzero_ps();
    alignas(64) float bs[4][QTK__MM_SEG / 16 + 32];

    for (size_t s0 = 0; s0 < kq; s0 += QTK__MM_SEG) {
        size_t s1 = kq - s0 < QTK__MM_SEG ? kq : s0 + QTK__MM_SEG;
        size_t b0 = s0 / bc, last = (s1 < K ? s1 : K) - 1, nblk = last / bc - b0 + 1;
        QTK_UNROLL
        for (unsigned r = 0; r < NR; r++) {
            load_scales(w, g0[r] + b0, nblk, bs[r]);
            if (w->ishift) /* e2m1 and tables of halves: the integers are 2^ishift x the values */
                for (size_t i = 0; i < nblk; i += 16) _mm512_store_ps(bs[r] + i, _mm512_mul_ps(_mm512_load_ps(bs[r] + i), unit));
        }
        qtk__blk_walk bw;
        qtk__blk_start(&bw, s0, bc);
        size_t si = 0;
        for (size_t k = s0; k < s1; k += CH, si += split ? CH / bc : 0) {
            const size_t st = k / CH, rem = K - k;
            const size_t bi = split ? si : qtk__blk_at(&bw, k);
            const unsigned nbytes = rem >= CH ? 64u : (unsigned)((rem + per - 1) / per);
            const __mmask64 bm = nbytes >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << nbytes) - 1);
            __m512 wsv[4];
            __m512i wv[4];
            QTK_UNROLL
            for (unsigned r = 0; r < NR; r++) {
                const float *b = bs[r];
                wsv[r] = split ? _mm512_permutexvar_ps(pat, _mm512_maskz_loadu_ps(bmask, b + bi)) : _mm512_set1_ps(b[bi]);
                wv[r] = _mm512_maskz_loadu_epi8(bm, row[r] + k / per);
            }
            __m512i isum[4][4];
            QTK_UNROLL
            for (unsigned i = 0; i < MR; i++)
                QTK_UNROLL
                for (unsigned r = 0; r < NR; r++)
                    isum[i][r] = QTK__INT_VNNI ? _mm512_loadu_si512(c->xc + (m0 + i) * c->xc_ld + st * 16)
                                               : _mm512_setzero_si512();
            QTK_UNROLL
            for (unsigned j = 0; j < per; j++) {
                __m512i u[4];
#if !QTK__INT_VNNI
                __mmask64 neg[4];
#endif
                QTK_UNROLL
                for (unsigned r = 0; r < NR; r++) {
                    u[r] = SFX(wbytes)(kind, wv[r], j, tab);
#if !QTK__INT_VNNI
                    neg[r] = _mm512_movepi8_mask(u[r]);
                    u[r] = _mm512_abs_epi8(u[r]);
#endif
                }
                QTK_UNROLL
                for (unsigned i = 0; i < MR; i++) {
                    __m512i xv = _mm512_loadu_si512(c->xq + (m0 + i) * kq + k + 64 * j);
                    QTK_UNROLL
                    for (unsigned r = 0; r < NR; r++) {
#if QTK__INT_VNNI
                        isum[i][r] = _mm512_dpbusd_epi32(isum[i][r], u[r], xv);
#else
                        __m512i sx = _mm512_mask_sub_epi8(xv, neg[r], _mm512_setzero_si512(), xv);
                        isum[i][r] = _mm512_add_epi32(isum[i][r], _mm512_madd_epi16(_mm512_maddubs_epi16(u[r], sx), ones));
#endif
                    }
                }
            }
            QTK_UNROLL
            for (unsigned i = 0; i < MR; i++) {
                __m512 xs = _mm512_loadu_ps(c->xs + (m0 + i) * steps_ld + st * 16);
                QTK_UNROLL
                for (unsigned r = 0; r < NR; r++)
                    /* the block scale clamped to +-FLT_MAX (NaN kept): see mm_int.c */
                    facc[i][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[i][r]),
                                                 _mm512_max_ps(_mm512_set1_ps(-FLT_MAX),
                                                               _mm512_min_ps(_mm512_set1_ps(FLT_MAX), _mm512_mul_ps(wsv[r], xs))),
                                                 facc[i][r]);
            }
        }
    }
    QTK_UNROLL
    for (unsigned i = 0; i < MR; i++)
        QTK_UNROLL
        for (unsigned r = 0; r < NR; r++) {
            float s = _mm512_reduce_add_ps(facc[i][r]);
            c->y[(m0 + i) * c->N + n + r] = c->bias ? s + c->bias[n + r] : s;
        }
}

/* Rows [n0, n1) in tiles of 4 (one row of x) or 2 (more); a last partial tile moves back to
 * end at n1 and recomputes a row or two (same bits); ranges shorter than a tile go one row
 * at a time. */
QTK_AI IT void SFX(int_range_k)(const int kind, const qtk__mm *c, size_t n0, size_t n1) {
    SFX(int_consts) kc;
    SFX(int_consts_init)(kind, c, &kc);
    const size_t M = c->M, nt = M == 1 ? 4 : 2;
    if (n1 - n0 < nt) {
        for (size_t n = n0; n < n1; n++)
            for (size_t m = 0; m < M; m++) SFX(int_tile)(kind, 1, 1, c, &kc, n, m);
        return;
    }
    for (size_t n = n0; n < n1; n += nt) {
        size_t t = n1 - n < nt ? n1 - nt : n;
        if (M == 1) {
            SFX(int_tile)(kind, 1, 4, c, &kc, t, 0);
            continue;
        }
        size_t m = 0;
        for (; m + 4 <= M; m += 4) SFX(int_tile)(kind, 4, 2, c, &kc, t, m);
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
