/* mm_avx512_tern.c — 2-bit integer weights (ternary q2s, BitNet b1.58; also q2f) on the
 * integer path without a single multiplication: weights only select and add.
 *
 * A 2-bit field is v = b0 - 2 b1 (two's complement: 01 = +1, 11 = -1, 00 = 0, 10 = -2), so
 *     Σ_k v_k x_k = Σ_{k: b0} x_k - 2 Σ_{k: b1} x_k.
 * For each of the 4 byte vectors of a 64-byte step (vector j holds code j of every byte,
 * the activations laid out to match, mm_int.c), vptestmb turns bit 0 and bit 1 of the codes
 * into byte masks; the selected int8 activations (others zeroed), offset by 128, are summed
 * 8 bytes at a time by vpsadbw, an adder: each 64-bit lane of a step covers fields
 * 32q..32q+31, one activation block of 32 and one weight block. The integer sums are exact;
 * each lane is then scaled once by (weight scale x activation scale), as on the rest of the
 * integer path, so the bound of qtk_matmul.h holds unchanged. */
#include <float.h>
#include "mm_avx512.h"

/* Rows n..n+NR-1 of W times rows m0..m0+MR-1 of x (activation blocks of 32). */
QTK_AI void tern_tile(const unsigned MR, const unsigned NR, const qtk__mm *c, size_t n, size_t m0) {
    const qtk__mmw *w = &c->w;
    const size_t CH = 256, K = c->K, kq = c->kq, bc = w->bc;
    const bool split = !(bc >= K || bc % CH == 0); /* then bc is 32, 64 or 128 */
    alignas(32) int32_t pidx[8];
    const unsigned sh = bc == 32 ? 5u : bc == 64 ? 6u : 7u; /* split blocks: 32, 64 or 128 */
    for (unsigned q = 0; q < 8; q++) pidx[q] = split ? (int32_t)((32 * q) >> sh) : 0;
    const __m256i pat = _mm256_load_si256((const __m256i *)(const void *)pidx);
    const __mmask8 bmask = split ? (__mmask8)((1u << (CH / bc)) - 1u) : 0;
    const __m512i bias128 = _mm512_set1_epi8((char)0x80), zero = _mm512_setzero_si512();
    const __m512i off = _mm512_set1_epi64(4 * 8 * 128); /* 4 vectors x 8 bytes x 128 per lane */
    const uint8_t *row[4];
    size_t g0[4];
    QTK_UNROLL
    for (unsigned r = 0; r < NR; r++) {
        row[r] = w->vals + (n + r) * w->row_bytes;
        g0[r] = qtk__mmw_group0(w, n + r);
    }
    __m256 facc[4][4];
    QTK_UNROLL
    for (unsigned i = 0; i < MR; i++)
        QTK_UNROLL
        for (unsigned r = 0; r < NR; r++) facc[i][r] = _mm256_setzero_ps();
    alignas(64) float bs[4][QTK__MM_SEG / 16 + 32];
    for (size_t s0 = 0; s0 < kq; s0 += QTK__MM_SEG) {
        size_t s1 = kq - s0 < QTK__MM_SEG ? kq : s0 + QTK__MM_SEG;
        size_t b0 = s0 / bc, last = (s1 < K ? s1 : K) - 1, nblk = last / bc - b0 + 1;
        QTK_UNROLL
        for (unsigned r = 0; r < NR; r++) load_scales(w, g0[r] + b0, nblk, bs[r]);
        qtk__blk_walk bw;
        qtk__blk_start(&bw, s0, bc);
        size_t si = 0;
        for (size_t k = s0; k < s1; k += CH, si += split ? CH / bc : 0) {
            const size_t st = k / CH, rem = K - k;
            const size_t bi = split ? si : qtk__blk_at(&bw, k);
            const unsigned nbytes = rem >= CH ? 64u : (unsigned)((rem + 3) / 4);
            const __mmask64 bm = nbytes >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << nbytes) - 1);
            __m256 wsv[4];
            __m512i wv[4];
            QTK_UNROLL
            for (unsigned r = 0; r < NR; r++) {
                /* the weight scale of each 64-bit lane (fields 32q..32q+31) */
                wsv[r] = split ? _mm256_permutevar8x32_ps(_mm256_maskz_loadu_ps(bmask, bs[r] + bi), pat)
                               : _mm256_set1_ps(bs[r][bi]);
                wv[r] = _mm512_maskz_loadu_epi8(bm, row[r] + k / 4);
            }
            __m512i s0v[4][4], s1v[4][4]; /* Σ over bit-0 and bit-1 fields, per 64-bit lane */
            QTK_UNROLL
            for (unsigned i = 0; i < MR; i++)
                QTK_UNROLL
                for (unsigned r = 0; r < NR; r++) s0v[i][r] = s1v[i][r] = zero;
            QTK_UNROLL
            for (unsigned j = 0; j < 4; j++) {
                /* activations + 128 as unsigned bytes; unselected bytes count 0 + 128 */
                __m512i xb[4];
                QTK_UNROLL
                for (unsigned i = 0; i < MR; i++)
                    xb[i] = _mm512_xor_si512(_mm512_loadu_si512(c->xq + (m0 + i) * kq + k + 64 * j), bias128);
                QTK_UNROLL
                for (unsigned r = 0; r < NR; r++) {
                    /* one row's two masks at a time: there are 7 mask registers */
                    __mmask64 lo = _mm512_test_epi8_mask(wv[r], _mm512_set1_epi8((char)(1u << (2 * j))));
                    __mmask64 hi = _mm512_test_epi8_mask(wv[r], _mm512_set1_epi8((char)(2u << (2 * j))));
                    QTK_UNROLL
                    for (unsigned i = 0; i < MR; i++) {
                        s0v[i][r] = _mm512_add_epi64(s0v[i][r], _mm512_sad_epu8(_mm512_mask_mov_epi8(bias128, lo, xb[i]), zero));
                        s1v[i][r] = _mm512_add_epi64(s1v[i][r], _mm512_sad_epu8(_mm512_mask_mov_epi8(bias128, hi, xb[i]), zero));
                    }
                }
            }
            QTK_UNROLL
            for (unsigned i = 0; i < MR; i++) {
                /* activation scale of lane q: that of its block (dword lanes 2q and 2q+1) */
                __m256 xs = _mm512_castps512_ps256(_mm512_permutexvar_ps(
                    _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0),
                    _mm512_loadu_ps(c->xs + (m0 + i) * c->xs_ld + st * 16)));
                QTK_UNROLL
                for (unsigned r = 0; r < NR; r++) {
                    /* Σ b0 x - 2 Σ b1 x, without the offsets: (s0 - off) - 2 (s1 - off) */
                    __m512i t = _mm512_sub_epi64(_mm512_sub_epi64(s0v[i][r], off),
                                                 _mm512_slli_epi64(_mm512_sub_epi64(s1v[i][r], off), 1));
                    /* the block scale clamped to +-FLT_MAX (NaN kept): see mm_int.c */
                    facc[i][r] = _mm256_fmadd_ps(_mm512_cvtepi64_ps(t),
                                                 _mm256_max_ps(_mm256_set1_ps(-FLT_MAX),
                                                               _mm256_min_ps(_mm256_set1_ps(FLT_MAX), _mm256_mul_ps(wsv[r], xs))),
                                                 facc[i][r]);
                }
            }
        }
    }
    QTK_UNROLL
    for (unsigned i = 0; i < MR; i++)
        QTK_UNROLL
        for (unsigned r = 0; r < NR; r++) {
            __m128 v = _mm_add_ps(_mm256_castps256_ps128(facc[i][r]), _mm256_extractf128_ps(facc[i][r], 1));
            v = _mm_add_ps(v, _mm_movehl_ps(v, v));
            v = _mm_add_ss(v, _mm_movehdup_ps(v));
            float s = _mm_cvtss_f32(v);
            c->y[(m0 + i) * c->N + n + r] = c->bias ? s + c->bias[n + r] : s;
        }
}

void qtk__mm_tern_avx512(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    (void)ws;
    const size_t M = c->M, nt = M == 1 ? 4 : 2;
    if (n1 - n0 < nt) {
        for (size_t n = n0; n < n1; n++)
            for (size_t m = 0; m < M; m++) tern_tile(1, 1, c, n, m);
        return;
    }
    for (size_t n = n0; n < n1; n += nt) {
        size_t t = n1 - n < nt ? n1 - nt : n;
        if (M == 1) {
            tern_tile(1, 4, c, t, 0);
            continue;
        }
        size_t m = 0; /* 2 x 2: four pairs of integer sums stay in registers */
        for (; m + 2 <= M; m += 2) tern_tile(2, 2, c, t, m);
        if (m < M) tern_tile(1, 2, c, t, m);
    }
}
