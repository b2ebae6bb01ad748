/* mm_avx2.c — the exact path with AVX2 + FMA + F16C: the same design as mm_avx512.c with
 * vectors of 8 lanes. A chunk is 8 bytes of a stream row: 8 int8 / FP8 / table codes (one
 * vector), 16 nibbles (two) or 32 2-bit codes (four). vpermps indexes only 8 entries, so a
 * 16-entry table is two lookups blended on bit 3 of the code (2-bit tables repeat every 4
 * entries and need one). There are no mask registers: a row's last chunk is copied into a
 * zeroed 8-byte buffer and lanes past K are cleared with a compare. */
#include "mm_avx2.h"

#define L8 8u


/* ---- chunks ---- */

QTK_AI unsigned per_of(const int kind) { return kind == QTK__MMK_T4 ? 2u : kind == QTK__MMK_T2 ? 4u : 1u; }
QTK_AI bool is_table(const int kind) {
    return kind == QTK__MMK_T8 || kind == QTK__MMK_T4 || kind == QTK__MMK_T2;
}

/* The 8 bytes of a chunk in the low half; at a row's end only the bytes the row has. */
QTK_AI __m128i chunk_bytes(const uint8_t *p, unsigned nbytes) {
    if (QTK_LIKELY(nbytes >= 8)) return _mm_loadl_epi64((const __m128i *)(const void *)p);
    uint8_t buf[8] = {0};
    memcpy(buf, p, nbytes);
    return _mm_loadl_epi64((const __m128i *)(const void *)buf);
}

/* Table kinds: the bytes widened to 32-bit lanes; the others keep the bytes. */
QTK_AI __m256i chunk_lanes(const int kind, __m128i b) {
    return is_table(kind) ? _mm256_cvtepu8_epi32(b) : _mm256_castsi128_si256(b);
}

/* value[idx & 15] from the two halves of a 16-entry table. */
QTK_AI __m256 lookup16(__m256i idx, __m256 lo, __m256 hi) {
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, idx), _mm256_permutevar8x32_ps(hi, idx),
                            _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}

/* Vector j of a chunk, unscaled (tlo/thi: the table, possibly pre-scaled). */
QTK_AI __m256 chunk_vec(const int kind, __m256i v, unsigned j, __m256 tlo, __m256 thi) {
    switch (kind) {
    case QTK__MMK_I8: return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm256_castsi256_si128(v)));
    case QTK__MMK_E5M2: return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(_mm256_castsi256_si128(v)), 8));
    case QTK__MMK_E4M3: return e4m3_8(_mm256_castsi256_si128(v));
    case QTK__MMK_T4: return lookup16(j ? _mm256_srli_epi32(v, 4) : v, tlo, thi);
    case QTK__MMK_T2: /* a 4-entry table repeated: one lookup of 8 */
        return _mm256_permutevar8x32_ps(tlo, j ? _mm256_srli_epi32(v, 2 * (int)j) : v);
    default: return lookup16(v, tlo, thi); /* T8 */
    }
}

/* Lanes of vector j holding fields below rem, as an all-ones mask. */
QTK_AI __m256 tail_mask(unsigned per, size_t rem, unsigned j) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    long n = rem > j ? (long)((rem - j + per - 1) / per) : 0;
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n > 8 ? 8 : n)), lane));
}

/* What every tile of a call shares. */
typedef struct {
    bool split;   /* a chunk spans several scale blocks (only 2-bit codes with blocks of 16) */
    size_t cb;    /* split: blocks per chunk */
    __m256i pat;  /* split: block of each lane, relative to the chunk's first */
    __m256i bm;   /* split: lanes that load a block scale */
    __m256 tlo, thi;
} consts;

static void consts_init(const qtk__mm *c, consts *k) {
    const unsigned per = c->w.per;
    const size_t C = L8 * per, bc = c->w.bc;
    k->split = c->smode == QTK__SM_SPLIT;
    k->cb = k->split ? C / bc : 0;
    alignas(32) int32_t idx[8], bm[8];
    for (unsigned l = 0; l < 8; l++) {
        idx[l] = k->split ? (int32_t)((per * l) >> 4) : 0; /* split blocks are 16 long */
        bm[l] = l < k->cb ? -1 : 0;
    }
    k->pat = _mm256_load_si256((const __m256i *)(const void *)idx);
    k->bm = _mm256_load_si256((const __m256i *)(const void *)bm);
    k->tlo = _mm256_loadu_ps(c->w.table);
    k->thi = _mm256_loadu_ps(c->w.table + 8);
}

QTK_AI __m256 split_scales(const consts *kc, const float *b) {
    return _mm256_permutevar8x32_ps(_mm256_maskload_ps(b, kc->bm), kc->pat);
}

/* ---- nk fused: y[m][n] for small M ---- */

#define BS_LD (QTK__MM_SEG / 16 + 32)

/* One chunk of NR weight rows (row r at p + r * rb) into the MR x NR accumulators. */
QTK_AI void fused_chunk(const int kind, const unsigned MR, const unsigned NR, const bool tail, const bool pre,
                        const uint8_t *p, size_t rb, const float *const *xr, size_t k, size_t rem, const __m256 *sc,
                        const __m256 *tl, const __m256 *th, __m256 acc[4][4]) {
    const unsigned per = per_of(kind);
    __m256i v[4];
    if (kind != QTK__MMK_F32) {
        unsigned nb = tail ? (unsigned)((rem + per - 1) / per) : 8u;
        QTK_UNROLL
        for (unsigned r = 0; r < NR; r++) v[r] = chunk_lanes(kind, chunk_bytes(p + r * rb, nb));
    }
    QTK_UNROLL
    for (unsigned j = 0; j < per; j++) {
        __m256 wv[4];
        QTK_UNROLL
        for (unsigned r = 0; r < NR; r++) {
            if (kind == QTK__MMK_F32) {
                const float *src = (const float *)(const void *)(p + r * rb);
                wv[r] = tail ? _mm256_maskload_ps(src, _mm256_castps_si256(tail_mask(1, rem, 0))) : _mm256_loadu_ps(src);
                continue;
            }
            wv[r] = chunk_vec(kind, v[r], j, tl[r], th[r]);
            if (!pre) wv[r] = _mm256_mul_ps(wv[r], sc[r]);
            if (tail) wv[r] = _mm256_and_ps(wv[r], tail_mask(per, rem, j));
        }
        QTK_UNROLL
        for (unsigned i = 0; i < MR; i++) {
            __m256 xv = _mm256_loadu_ps(xr[i] + k + (size_t)j * L8);
            QTK_UNROLL
            for (unsigned r = 0; r < NR; r++) acc[i][r] = _mm256_fmadd_ps(wv[r], xv, acc[i][r]);
        }
    }
}

/* One tile: rows n..n+NR-1 of W times rows m0..m0+MR-1 of x. */
QTK_AI void fused_tile(const int kind, const unsigned MR, const unsigned NR, const qtk__mm *c, const consts *kc,
                       size_t n, size_t m0) {
    const qtk__mmw *w = &c->w;
    const unsigned per = per_of(kind), C = L8 * per;
    const size_t K = c->K, kp = c->kp, bc = w->bc, rb = w->row_bytes;
    const size_t kfull = K / C * C;
    const bool split = kc->split, pre = is_table(kind) && !split;
    const uint8_t *row0 = w->vals + n * rb;
    const float *xr[4];
    QTK_UNROLL
    for (unsigned i = 0; i < MR; i++) xr[i] = c->xp + (m0 + i) * kp;
    __m256 acc[4][4];
    QTK_UNROLL
    for (unsigned i = 0; i < MR; i++)
        QTK_UNROLL
        for (unsigned r = 0; r < NR; r++) acc[i][r] = _mm256_setzero_ps();
    alignas(32) float bs[4 * BS_LD];
    __m256 sc[4], tl[4], th[4];
    QTK_UNROLL
    for (unsigned r = 0; r < NR; r++) {
        sc[r] = _mm256_setzero_ps();
        tl[r] = kc->tlo;
        th[r] = kc->thi;
    }
    if (kind == QTK__MMK_F32) {
        for (size_t k = 0; k < kfull; k += C)
            fused_chunk(kind, MR, NR, false, false, row0 + k * 4, rb, xr, k, 0, sc, tl, th, acc);
        if (kfull < K) fused_chunk(kind, MR, NR, true, false, row0 + kfull * 4, rb, xr, kfull, K - kfull, sc, tl, th, acc);
    } else {
        for (size_t s0 = 0; s0 < kp; s0 += QTK__MM_SEG) {
            const size_t s1 = kp - s0 < QTK__MM_SEG ? kp : s0 + QTK__MM_SEG;
            const size_t e1 = s1 < kfull ? s1 : kfull;
            const size_t b0 = s0 / bc, nblk = ((s1 < K ? s1 : K) - 1) / bc - b0 + 1;
            QTK_UNROLL
            for (unsigned r = 0; r < NR; r++) load_scales(w, group0_fast(w, n + r) + b0, nblk, bs + r * BS_LD);
            size_t k = s0, bi = 0;
            if (split) {
                for (; k < e1; k += C, bi += kc->cb) {
                    QTK_UNROLL
                    for (unsigned r = 0; r < NR; r++) sc[r] = split_scales(kc, bs + r * BS_LD + bi);
                    fused_chunk(kind, MR, NR, false, false, row0 + k / per, rb, xr, k, 0, sc, tl, th, acc);
                }
            } else {
                for (size_t next = (s0 / bc + 1) * bc; k < e1; bi++, next += bc) {
                    QTK_UNROLL
                    for (unsigned r = 0; r < NR; r++) {
                        sc[r] = _mm256_set1_ps(bs[r * BS_LD + bi]);
                        if (pre) {
                            tl[r] = _mm256_mul_ps(kc->tlo, sc[r]);
                            th[r] = _mm256_mul_ps(kc->thi, sc[r]);
                        }
                    }
                    const size_t e = next < e1 ? next : e1;
                    for (; k < e; k += C)
                        fused_chunk(kind, MR, NR, false, pre, row0 + k / per, rb, xr, k, 0, sc, tl, th, acc);
                    if (k >= e1) break;
                }
            }
            if (k < s1 && k < K) {
                bi = split ? bi : (k / bc) - b0;
                QTK_UNROLL
                for (unsigned r = 0; r < NR; r++) {
                    const float *b = bs + r * BS_LD + bi;
                    sc[r] = split ? split_scales(kc, b) : _mm256_set1_ps(*b);
                    if (pre) {
                        tl[r] = _mm256_mul_ps(kc->tlo, sc[r]);
                        th[r] = _mm256_mul_ps(kc->thi, sc[r]);
                    }
                }
                fused_chunk(kind, MR, NR, true, pre, row0 + k / per, rb, xr, k, K - k, sc, tl, th, acc);
            }
        }
    }
    QTK_UNROLL
    for (unsigned i = 0; i < MR; i++)
        QTK_UNROLL
        for (unsigned r = 0; r < NR; r++) {
            float s = hsum(acc[i][r]);
            c->y[(m0 + i) * c->N + n + r] = c->bias ? s + c->bias[n + r] : s;
        }
}

/* Rows [n0, n1) in tiles of 2 (16 registers); a last partial tile moves back to end at n1. */
QTK_AI void fused_range(const int kind, const qtk__mm *c, size_t n0, size_t n1) {
    consts kc;
    consts_init(c, &kc);
    const size_t M = c->M;
    if (n1 - n0 < 2) {
        for (size_t m = 0; m < M; m++) fused_tile(kind, 1, 1, c, &kc, n0, m);
        return;
    }
    for (size_t n = n0; n < n1; n += 2) {
        size_t t = n1 - n < 2 ? n1 - 2 : n;
        size_t m = 0;
        for (; m + 2 <= M; m += 2) fused_tile(kind, 2, 2, c, &kc, t, m);
        if (m < M) fused_tile(kind, 1, 2, c, &kc, t, m);
    }
}

#include "mm_x86_fused.h"

/* ---- tiles for the drivers ---- */

/* Natural order from the per vectors of a chunk (per = 2 or 4), 8 fields per output. */
QTK_AI void interleave(unsigned per, const __m256 *v, float *dst, unsigned nout) {
    __m256 o[4];
    if (per == 2) {
        __m256 a = _mm256_unpacklo_ps(v[0], v[1]), b = _mm256_unpackhi_ps(v[0], v[1]);
        o[0] = _mm256_permute2f128_ps(a, b, 0x20);
        o[1] = _mm256_permute2f128_ps(a, b, 0x31);
    } else {
        __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpacklo_ps(v[2], v[3]);
        __m256 t2 = _mm256_unpackhi_ps(v[0], v[1]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
        __m256 u0 = _mm256_shuffle_ps(t0, t1, 0x44), u1 = _mm256_shuffle_ps(t0, t1, 0xEE);
        __m256 u2 = _mm256_shuffle_ps(t2, t3, 0x44), u3 = _mm256_shuffle_ps(t2, t3, 0xEE);
        o[0] = _mm256_permute2f128_ps(u0, u1, 0x20);
        o[1] = _mm256_permute2f128_ps(u2, u3, 0x20);
        o[2] = _mm256_permute2f128_ps(u0, u1, 0x31);
        o[3] = _mm256_permute2f128_ps(u2, u3, 0x31);
    }
    for (unsigned q = 0; q < 4; q++)
        if (q < nout) _mm256_storeu_ps(dst + 8 * q, o[q]);
}

/* One chunk into d: nvec vectors of 8, scaled, chunk or natural order. */
QTK_AI void decode_chunk(const int kind, const bool tail, bool chunked, const uint8_t *src, size_t rem, __m256 sc,
                         __m256 tl, __m256 th, bool pre, float *d, unsigned nvec) {
    const unsigned per = per_of(kind);
    unsigned nb = tail ? (unsigned)((rem + per - 1) / per) : 8u;
    __m256i v = chunk_lanes(kind, chunk_bytes(src, nb));
    __m256 out[4];
    QTK_UNROLL
    for (unsigned j = 0; j < per; j++) {
        out[j] = chunk_vec(kind, v, j, tl, th);
        if (!pre) out[j] = _mm256_mul_ps(out[j], sc);
        if (tail) out[j] = _mm256_and_ps(out[j], tail_mask(per, rem, j));
    }
    if (per == 1 || chunked) {
        QTK_UNROLL
        for (unsigned j = 0; j < per; j++)
            if (j < nvec) _mm256_storeu_ps(d + 8 * j, out[j]);
    } else {
        interleave(per, out, d, nvec);
    }
}

/* Row r, columns [c0, c0+nc) (c0 a multiple of the chunk, nc of 8) into dst. */
QTK_AI void decode_row(const int kind, const qtk__mm *c, const consts *kc, size_t r, size_t c0, size_t nc, bool chunked,
                       size_t b0, size_t nblk, float *dst) {
    const qtk__mmw *w = &c->w;
    const unsigned per = per_of(kind), C = L8 * per;
    const size_t len = w->C, bc = w->bc;
    const uint8_t *row = w->vals + r * w->row_bytes;
    if (kind == QTK__MMK_F32) {
        const float *src = (const float *)(const void *)row;
        for (size_t k = c0; k < c0 + nc; k += 8) {
            size_t rem = k < len ? len - k : 0;
            __m256 v = rem >= 8 ? _mm256_loadu_ps(src + k)
                                : _mm256_maskload_ps(src + k, _mm256_castps_si256(tail_mask(1, rem, 0)));
            _mm256_storeu_ps(dst + (k - c0), v);
        }
        return;
    }
    const bool split = kc->split, pre = is_table(kind) && !split;
    alignas(32) float bs[QTK__MM_KC / 16 + 32];
    if (nblk) load_scales(w, group0_fast(w, r) + b0, nblk, bs);
    const size_t cend = c0 + nc, have = cend < len ? cend : len;
    const size_t kfull = have > c0 ? c0 + (have - c0) / C * C : c0;
    size_t k = c0, bi = 0;
    __m256 sc = _mm256_setzero_ps(), tl = kc->tlo, th = kc->thi;
    if (split) {
        for (; k < kfull; k += C, bi += kc->cb)
            decode_chunk(kind, false, chunked, row + k / per, 0, split_scales(kc, bs + bi), tl, th, false, dst + (k - c0), per);
    } else {
        for (size_t next = (b0 + 1) * bc; k < kfull; bi++, next += bc) {
            sc = _mm256_set1_ps(bs[bi]);
            if (pre) {
                tl = _mm256_mul_ps(kc->tlo, sc);
                th = _mm256_mul_ps(kc->thi, sc);
            }
            const size_t e = next < kfull ? next : kfull;
            for (; k < e; k += C) decode_chunk(kind, false, chunked, row + k / per, 0, sc, tl, th, pre, dst + (k - c0), per);
        }
    }
    if (k < have) {
        bi = split ? bi : k / bc - b0;
        sc = split ? split_scales(kc, bs + bi) : _mm256_set1_ps(bs[bi]);
        if (pre) {
            tl = _mm256_mul_ps(kc->tlo, sc);
            th = _mm256_mul_ps(kc->thi, sc);
        }
        unsigned nvec = (unsigned)((cend - k) / 8 < per ? (cend - k) / 8 : per);
        decode_chunk(kind, true, chunked, row + k / per, len - k, sc, tl, th, pre, dst + (k - c0), nvec);
        k += C;
    }
    for (; k < cend; k += 8) _mm256_storeu_ps(dst + (k - c0), _mm256_setzero_ps());
}

/* Next tile's rows towards L2 (see mm_avx512.c; always inlined for the same reason). */
QTK_AI void prefetch_row(const qtk__mmw *w, size_t r, size_t c0, size_t nc) {
    if (r >= w->R || c0 >= w->C) return;
    size_t end = c0 + nc < w->C ? c0 + nc : w->C;
    const uint8_t *p = w->vals + r * w->row_bytes;
    size_t bpf = w->kind == QTK__MMK_F32 ? 4 : 1, per = w->per;
    for (size_t o = c0 * bpf / per; o < (end * bpf + per - 1) / per; o += 64) _mm_prefetch((const char *)(p + o), _MM_HINT_T1);
    if (w->kind != QTK__MMK_F32)
        _mm_prefetch((const char *)(w->sb + (group0_fast(w, r) + c0 / w->bc) * w->ssz), _MM_HINT_T1);
}

#include "mm_x86_decode.h"

/* ---- the f32 microkernel: 6 broadcast rows x up to 2 vectors of 8 ---- */

#define IR 6u

QTK_AI void ukr_t(const unsigned JV, size_t kc, const float *a, size_t lda, const float *b, size_t ldb, float *cc,
                  size_t ldc, unsigned ir, bool acc) {
    const float *ap[IR];
    for (unsigned i = 0; i < IR; i++) ap[i] = a + (i < ir ? i : 0) * lda;
    __m256 c[IR][2];
    QTK_UNROLL
    for (unsigned i = 0; i < IR; i++)
        QTK_UNROLL
        for (unsigned v = 0; v < JV; v++)
            c[i][v] = acc && i < ir ? _mm256_loadu_ps(cc + i * ldc + 8 * v) : _mm256_setzero_ps();
    for (size_t k = 0; k < kc; k++) {
        __m256 bv[2];
        QTK_UNROLL
        for (unsigned v = 0; v < JV; v++) bv[v] = _mm256_loadu_ps(b + k * ldb + 8 * v);
        QTK_UNROLL
        for (unsigned i = 0; i < IR; i++) {
            __m256 av = _mm256_broadcast_ss(ap[i] + k);
            QTK_UNROLL
            for (unsigned v = 0; v < JV; v++) c[i][v] = _mm256_fmadd_ps(av, bv[v], c[i][v]);
        }
    }
    for (unsigned i = 0; i < IR; i++)
        for (unsigned v = 0; v < JV; v++)
            if (i < ir) _mm256_storeu_ps(cc + i * ldc + 8 * v, c[i][v]);
}

static void ukr(size_t kc, const float *a, size_t lda, const float *b, size_t ldb, float *cc, size_t ldc, unsigned ir,
                unsigned jr, bool acc) {
    if (jr >= 16) ukr_t(2, kc, a, lda, b, ldb, cc, ldc, ir, acc);
    else ukr_t(1, kc, a, lda, b, ldb, cc, ldc, ir, acc);
}

const qtk__mm_isa qtk__mm_isa_avx2 = {
    .name = "avx2",
    .lanes = 8,
    .ir = IR,
    .jr = 16,
    .fused_max_m = 8,
    .nk_fused = nk_fused,
    .kn_fused = NULL,
    .decode = decode,
    .ukr = ukr,
    .int_prepare = qtk__mm_int_prepare_avx2,
    .nk_int = qtk__mm_int_avx2,
};
