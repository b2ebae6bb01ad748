/* mm_avx512.c — the exact path with AVX-512 (F/BW/DQ/VL): weights decoded from their
 * packed fields straight into registers, f32 FMA accumulation.
 *
 * A chunk is the 16 bytes of a stream row that one group of vectors decodes: 16 int8 / e4m3
 * / e5m2 / 4-bit-table bytes (one vector), 32 nibbles (two: low and high nibbles), or 64
 * 2-bit codes (four). Codes become values with vpermps on a 16-entry table (the low 4 bits
 * of each lane index it, so the high nibble needs only a shift and 2-bit codes use a table
 * that repeats every 4 entries), vpmovsxbd + vcvtdq2ps for int8, and vcvtph2ps for FP8:
 * e5m2 is the top byte of an f16, and an e4m3 code moved into the bits of an f16 is its
 * value / 256 (subnormals included; conversions from f16 ignore DAZ). Every weight is the
 * product of its value and its effective scale rounded once — the same f32 that
 * qtk_dequantize gives — and, for table values with one scale per chunk, the table is
 * scaled instead of each vector (the same products).
 *
 * Kernels: nk_fused (small M: x kept in chunk order, each chunk of W decoded once per tile
 * of up to 4 rows of x and multiplied into 4 output rows at a time), decode (tiles for the
 * drivers of mm_gemm.c) and the 6x64 f32 microkernel. */
#include "mm_avx512.h"

#define L16 16u

/* qtk__mmw_group0 without a division in the common case of blocks one row tall. */
static inline size_t group0_fast(const qtk__mmw *w, size_t r) { return (w->br == 1 ? r : r / w->br) * w->gc; }

/* ---- chunks ---- */

QTK_AI unsigned per_of(const int kind) { return kind == QTK__MMK_T4 ? 2u : kind == QTK__MMK_T2 ? 4u : 1u; }
QTK_AI bool is_table(const int kind) {
    return kind == QTK__MMK_T8 || kind == QTK__MMK_T4 || kind == QTK__MMK_T2;
}

/* The 16 bytes of a chunk; at a row's end only the bytes the row has (nbytes < 16). */
QTK_AI __m128i chunk_bytes(const uint8_t *p, unsigned nbytes) {
    if (QTK_LIKELY(nbytes >= 16)) return _mm_loadu_si128((const __m128i *)(const void *)p);
    return _mm_maskz_loadu_epi8((__mmask16)((1u << nbytes) - 1u), p);
}

/* The integer form a chunk is decoded from: the bytes widened to 32-bit lanes (tables),
 * or the raw bytes (the other kinds, widened by the decoder). */
QTK_AI __m512i chunk_lanes(const int kind, __m128i b) {
    return is_table(kind) ? _mm512_cvtepu8_epi32(b) : _mm512_castsi128_si512(b);
}

/* Vector j of a chunk, unscaled (tab: the value table, possibly pre-scaled). For F32 the
 * caller loads the values itself. raw (e4m3 only): the value / 256 and no NaN check, for
 * segments whose scales carry the 256 and whose codes hold no NaN (fused_tile). */
QTK_AI __m512 chunk_vec_raw(const int kind, __m512i v, unsigned j, __m512 tab, bool raw) {
    if (kind == QTK__MMK_E4M3 && raw) return _mm512_cvtph_ps(e4m3_to_h(_mm512_castsi512_si128(v)));
    switch (kind) {
    case QTK__MMK_I8: return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm512_castsi512_si128(v)));
    case QTK__MMK_E5M2: /* e5m2 is the top byte of an f16 */
        return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm512_castsi512_si128(v)), 8));
    case QTK__MMK_E4M3: return e4m3_16(_mm512_castsi512_si128(v));
    case QTK__MMK_T4: return _mm512_permutexvar_ps(j ? _mm512_srli_epi32(v, 4) : v, tab);
    case QTK__MMK_T2: return _mm512_permutexvar_ps(j ? _mm512_srli_epi32(v, 2 * j) : v, tab);
    default: return _mm512_permutexvar_ps(v, tab); /* T8 */
    }
}
QTK_AI __m512 chunk_vec(const int kind, __m512i v, unsigned j, __m512 tab) { return chunk_vec_raw(kind, v, j, tab, false); }

/* Lanes of vector j that hold fields below rem (rem < chunk: a row's last chunk). */
QTK_AI __mmask16 tail_mask(unsigned per, size_t rem, unsigned j) {
    size_t n = rem > j ? (rem - j + per - 1) / per : 0;
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
}

/* ---- nk fused: y[m][n] for small M ---- */

/* What every tile of a call shares (computed once per thread range). */
typedef struct {
    bool split;      /* a chunk spans several scale blocks */
    size_t cb;       /* split: blocks per chunk */
    __m512i pat;     /* split: block of each lane, relative to the chunk's first */
    __mmask16 bmask; /* split: blocks in a chunk */
    __m512 tab;      /* value of each code */
} consts;

static void consts_init(const qtk__mm *c, consts *k) {
    const unsigned per = c->w.per;
    const size_t C = L16 * per, bc = c->w.bc;
    k->split = c->smode == QTK__SM_SPLIT;
    k->cb = k->split ? C / bc : 0;
    alignas(64) int32_t idx[16];
    const unsigned sh = bc == 16 ? 4u : 5u; /* split blocks are 16 or 32 long: shifts, not divisions */
    for (unsigned l = 0; l < 16; l++) idx[l] = k->split ? (int32_t)((per * l) >> sh) : 0;
    k->pat = _mm512_load_si512(idx);
    k->bmask = k->split ? (__mmask16)((1u << k->cb) - 1u) : 0;
    k->tab = _mm512_loadu_ps(c->w.table);
}

#define BS_LD (QTK__MM_SEG / 16 + 32) /* floats per row of converted scales */

/* One chunk of NR weight rows (row r at p + r * rb) into the MR x NR accumulators. sc: the
 * rows' scale vectors; tb: their tables, pre-scaled when the chunk has one scale (pre). In a
 * row's last chunk (tail), only the bytes the row has are read and lanes past K are zeroed:
 * padding fields may hold anything, even NaN codes. */
QTK_AI void fused_chunk(const int kind, const unsigned MR, const unsigned NR, const bool tail, const bool pre,
                        const bool raw, const uint8_t *p, size_t rb, const float *const *xr, size_t k, size_t rem,
                        const __m512 *sc, const __m512 *tb, __m512 acc[4][4]) {
    const unsigned per = per_of(kind);
    __m512i v[4];
    if (kind != QTK__MMK_F32) {
        unsigned nb = tail ? (unsigned)((rem + per - 1) / per) : 16u;
        QTK_UNROLL
        for (unsigned r = 0; r < NR; r++) v[r] = chunk_lanes(kind, chunk_bytes(p + r * rb, nb));
    }
    QTK_UNROLL
    for (unsigned j = 0; j < per; j++) {
        __m512 wv[4];
        QTK_UNROLL
        for (unsigned r = 0; r < NR; r++) {
            if (kind == QTK__MMK_F32) {
                const float *src = (const float *)(const void *)(p + r * rb);
                wv[r] = tail ? _mm512_maskz_loadu_ps(tail_mask(1, rem, 0), src) : _mm512_loadu_ps(src);
                continue;
            }
            wv[r] = chunk_vec_raw(kind, v[r], j, tb[r], raw);
            if (!pre) wv[r] = _mm512_mul_ps(wv[r], sc[r]);
            if (tail) wv[r] = _mm512_maskz_mov_ps(tail_mask(per, rem, j), wv[r]);
        }
        QTK_UNROLL
        for (unsigned i = 0; i < MR; i++) {
            __m512 xv = _mm512_loadu_ps(xr[i] + k + (size_t)j * L16);
            QTK_UNROLL
            for (unsigned r = 0; r < NR; r++) acc[i][r] = _mm512_fmadd_ps(wv[r], xv, acc[i][r]);
        }
    }
}

/* Fields [s0, s1) of NR rows (row0, stride rb) with their converted scales bs. */
QTK_AI void fused_segment(const int kind, const unsigned MR, const unsigned NR, const bool raw, const qtk__mm *c,
                          const consts *kc, const uint8_t *row0, const float *const *xr, size_t s0, size_t s1,
                          const float *bs, __m512 acc[4][4]) {
    const unsigned per = per_of(kind), C = L16 * per;
    const size_t K = c->K, bc = c->w.bc, rb = c->w.row_bytes, kfull = K / C * C;
    const size_t e1 = s1 < kfull ? s1 : kfull; /* whole chunks of this segment end here */
    const bool split = kc->split, pre = is_table(kind) && !split;
    __m512 sc[4], tb[4];
    QTK_UNROLL
    for (unsigned r = 0; r < NR; r++) sc[r] = tb[r] = kc->tab;
    size_t k = s0, bi = 0, b0 = s0 / bc;
    if (split) {
        for (; k < e1; k += C, bi += kc->cb) {
            QTK_UNROLL
            for (unsigned r = 0; r < NR; r++)
                sc[r] = _mm512_permutexvar_ps(kc->pat, _mm512_maskz_loadu_ps(kc->bmask, bs + r * BS_LD + bi));
            fused_chunk(kind, MR, NR, false, false, raw, row0 + k / per, rb, xr, k, 0, sc, tb, acc);
        }
    } else {
        /* blocks of whole chunks (or one block past the row's end): scale once per block */
        for (size_t next = (b0 + 1) * bc; k < e1; bi++, next += bc) {
            QTK_UNROLL
            for (unsigned r = 0; r < NR; r++) {
                sc[r] = _mm512_set1_ps(bs[r * BS_LD + bi]);
                if (pre) tb[r] = _mm512_mul_ps(kc->tab, sc[r]);
            }
            const size_t e = next < e1 ? next : e1;
            for (; k < e; k += C) fused_chunk(kind, MR, NR, false, pre, raw, row0 + k / per, rb, xr, k, 0, sc, tb, acc);
            if (k >= e1) break;
        }
    }
    if (k < s1 && k < K) { /* the row's last, partial chunk */
        bi = split ? bi : (k / bc) - b0;
        QTK_UNROLL
        for (unsigned r = 0; r < NR; r++) {
            const float *b = bs + r * BS_LD + bi;
            sc[r] = split ? _mm512_permutexvar_ps(kc->pat, _mm512_maskz_loadu_ps(kc->bmask, b)) : _mm512_set1_ps(*b);
            if (pre) tb[r] = _mm512_mul_ps(kc->tab, sc[r]);
        }
        fused_chunk(kind, MR, NR, true, pre, raw, row0 + k / per, rb, xr, k, K - k, sc, tb, acc);
    }
}

/* e4m3 segments without NaN codes whose scales times 256 stay finite (all of them, in
 * practice) take the raw decode: the 256 moves into the scales (an exact power-of-two
 * product, so every weight is still value x scale rounded once) and the per-vector NaN
 * check becomes one scan of the segment's bytes. Multiplies bs by 256 when it says yes. */
static inline bool e4m3_raw_ok(const qtk__mmw *w, const uint8_t *row0, size_t rb, unsigned nr, size_t s0, size_t s1,
                               float *bs, size_t nblk) {
    (void)w;
    const __m512 lim = _mm512_set1_ps(0x1p119f);
    for (unsigned r = 0; r < nr; r++)
        for (size_t i = 0; i < nblk; i += 16) {
            __mmask16 m = (__mmask16)(nblk - i >= 16 ? 0xffffu : (1u << (nblk - i)) - 1u);
            __m512 v = _mm512_abs_ps(_mm512_maskz_loadu_ps(m, bs + r * BS_LD + i));
            if (_mm512_mask_cmp_ps_mask(m, v, lim, _CMP_NLT_UQ)) return false; /* >= 2^119, or NaN */
        }
    const __m512i hi = _mm512_set1_epi8((char)0x80), ones = _mm512_set1_epi8((char)0xff);
    for (unsigned r = 0; r < nr; r++)
        for (size_t k = s0; k < s1; k += 64) {
            __mmask64 m = s1 - k >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (s1 - k)) - 1);
            __m512i b = _mm512_maskz_loadu_epi8(m, row0 + r * rb + k);
            if (_mm512_mask_cmpeq_epi8_mask(m, _mm512_or_si512(b, hi), ones)) return false; /* S.1111.111 */
        }
    const __m512 k256 = _mm512_set1_ps(256.0f);
    for (unsigned r = 0; r < nr; r++)
        for (size_t i = 0; i < nblk; i += 16) _mm512_store_ps(bs + r * BS_LD + i, _mm512_mul_ps(_mm512_load_ps(bs + r * BS_LD + i), k256));
    return true;
}

/* One tile: rows n..n+NR-1 of W times rows m0..m0+MR-1 of x. */
QTK_AI void fused_tile(const int kind, const unsigned MR, const unsigned NR, const qtk__mm *c, const consts *kc,
                       size_t n, size_t m0) {
    const qtk__mmw *w = &c->w;
    const unsigned per = per_of(kind), C = L16 * per;
    const size_t K = c->K, kp = c->kp, bc = w->bc, rb = w->row_bytes;
    const size_t kfull = K / C * C; /* fields in whole chunks */
    (void)per;
    const uint8_t *row0 = w->vals + n * rb;
    const float *xr[4];
    QTK_UNROLL
    for (unsigned i = 0; i < MR; i++) xr[i] = c->xp + (m0 + i) * kp;
    __m512 acc[4][4];
    QTK_UNROLL
    for (unsigned i = 0; i < MR; i++)
        QTK_UNROLL
        for (unsigned r = 0; r < NR; r++) acc[i][r] = _mm512_setzero_ps();
    alignas(64) float bs[4 * BS_LD];
    if (kind == QTK__MMK_F32) {
        __m512 none[4];
        QTK_UNROLL
        for (unsigned r = 0; r < NR; r++) none[r] = kc->tab;
        for (size_t k = 0; k < kfull; k += C)
            fused_chunk(kind, MR, NR, false, false, false, row0 + k * 4, rb, xr, k, 0, none, none, acc);
        if (kfull < K)
            fused_chunk(kind, MR, NR, true, false, false, row0 + kfull * 4, rb, xr, kfull, K - kfull, none, none, acc);
    } else {
        for (size_t s0 = 0; s0 < kp; s0 += QTK__MM_SEG) {
            const size_t s1 = kp - s0 < QTK__MM_SEG ? kp : s0 + QTK__MM_SEG;
            const size_t b0 = s0 / bc, nblk = ((s1 < K ? s1 : K) - 1) / bc - b0 + 1;
            QTK_UNROLL
            for (unsigned r = 0; r < NR; r++) load_scales(w, group0_fast(w, n + r) + b0, nblk, bs + r * BS_LD);
            if (kind == QTK__MMK_E4M3 && e4m3_raw_ok(w, row0, rb, NR, s0, s1 < K ? s1 : K, bs, nblk))
                fused_segment(kind, MR, NR, true, c, kc, row0, xr, s0, s1, bs, acc);
            else
                fused_segment(kind, MR, NR, false, c, kc, row0, xr, s0, s1, bs, acc);
        }
    }
    QTK_UNROLL
    for (unsigned i = 0; i < MR; i++)
        QTK_UNROLL
        for (unsigned r = 0; r < NR; r++) {
            float s = _mm512_reduce_add_ps(acc[i][r]);
            c->y[(m0 + i) * c->N + n + r] = c->bias ? s + c->bias[n + r] : s;
        }
}

/* Rows [n0, n1): tiles of 4 rows; a last partial tile moves back to end at n1 and
 * recomputes a few rows (same bits), ranges under 4 rows go one row at a time. */
QTK_AI void fused_range(const int kind, const qtk__mm *c, size_t n0, size_t n1) {
    consts kc;
    consts_init(c, &kc);
    const size_t M = c->M;
    if (n1 - n0 < 4) {
        for (size_t n = n0; n < n1; n++)
            for (size_t m = 0; m < M; m++) fused_tile(kind, 1, 1, c, &kc, n, m);
        return;
    }
    for (size_t n = n0; n < n1; n += 4) {
        size_t t = n1 - n < 4 ? n1 - 4 : n;
        size_t m = 0;
        for (; m + 4 <= M; m += 4) {
            fused_tile(kind, 4, 2, c, &kc, t, m);
            fused_tile(kind, 4, 2, c, &kc, t + 2, m);
        }
        for (; m + 2 <= M; m += 2) fused_tile(kind, 2, 4, c, &kc, t, m);
        if (m < M) fused_tile(kind, 1, 4, c, &kc, t, m);
    }
}

#include "mm_x86_fused.h"

/* ---- kn fused: y[m][n] for small M, W [K, N] streamed along N ---- */

/* Columns [c0, c0+nn) of y for rows m0..m0+MR-1 of x (c0 a multiple of the chunk): every
 * group of KG weight rows k is decoded once and added into accumulators acc[m] that hold
 * the columns in chunk order (L1-resident); the rows are read sequentially. */
QTK_AI void knf_block(const int kind, const unsigned MR, const qtk__mm *c, const consts *kc, size_t c0, size_t nn,
                      size_t m0, float *acc) {
    const qtk__mmw *w = &c->w;
    const unsigned per = per_of(kind), C = L16 * per;
    const size_t K = c->K, N = c->N, bc = w->bc, np = qtk__ceil_div(nn, C) * C;
    const size_t have = c0 + nn, kfull = c0 + nn / C * C; /* nn < C only at N's end */
    const bool split = kc->split, pre = is_table(kind) && !split;
    for (size_t i = 0; i < MR * np; i++) acc[i] = 0.0f;
    const size_t b0 = c0 / bc, nblk = kind == QTK__MMK_F32 ? 0 : (have - 1) / bc - b0 + 1;
    alignas(64) float bs[4][QTK__MM_KNF_COLS / 16 + 32];
    for (size_t k = 0; k < K; k += 4) {
        const unsigned kg = K - k < 4 ? (unsigned)(K - k) : 4u;
        __m512 xb[2][4];
        QTK_UNROLL
        for (unsigned i = 0; i < MR; i++)
            QTK_UNROLL
            for (unsigned r = 0; r < 4; r++) xb[i][r] = _mm512_set1_ps(r < kg ? c->x[(m0 + i) * K + k + r] : 0.0f);
        const uint8_t *row[4];
        QTK_UNROLL
        for (unsigned r = 0; r < 4; r++) {
            size_t rr = k + (r < kg ? r : 0); /* missing rows repeat the first, times x = 0 */
            row[r] = w->vals + rr * w->row_bytes;
            if (nblk) load_scales(w, group0_fast(w, rr) + b0, nblk, bs[r]);
        }
        __m512 sc[4], tb[4];
        QTK_UNROLL
        for (unsigned r = 0; r < 4; r++) sc[r] = tb[r] = kc->tab;
        size_t bi = 0, next = (b0 + 1) * bc;
        for (size_t cc = c0; cc < have; cc += C) {
            const bool tail = cc >= kfull;
            const size_t rem = N - cc;
            if (kind != QTK__MMK_F32) {
                if (split) {
                    QTK_UNROLL
                    for (unsigned r = 0; r < 4; r++) sc[r] = _mm512_permutexvar_ps(kc->pat, _mm512_maskz_loadu_ps(kc->bmask, bs[r] + bi));
                    bi += kc->cb;
                } else if (cc == c0 || cc >= next) {
                    while (cc >= next) { /* whole chunks per block here */
                        bi++;
                        next += bc;
                    }
                    QTK_UNROLL
                    for (unsigned r = 0; r < 4; r++) {
                        sc[r] = _mm512_set1_ps(bs[r][bi]);
                        tb[r] = pre ? _mm512_mul_ps(kc->tab, sc[r]) : kc->tab;
                    }
                }
                if (split)
                    QTK_UNROLL
                    for (unsigned r = 0; r < 4; r++) tb[r] = kc->tab;
            }
            __m512i v[4];
            if (kind != QTK__MMK_F32) {
                unsigned nb = tail ? (unsigned)((rem + per - 1) / per) : 16u;
                QTK_UNROLL
                for (unsigned r = 0; r < 4; r++) v[r] = chunk_lanes(kind, chunk_bytes(row[r] + cc / per, nb));
            }
            float *a = acc + (cc - c0);
            QTK_UNROLL
            for (unsigned j = 0; j < per; j++) {
                __m512 wv[4];
                QTK_UNROLL
                for (unsigned r = 0; r < 4; r++) {
                    if (kind == QTK__MMK_F32) {
                        const float *src = (const float *)(const void *)row[r] + cc;
                        wv[r] = tail ? _mm512_maskz_loadu_ps(tail_mask(1, rem, 0), src) : _mm512_loadu_ps(src);
                        continue;
                    }
                    wv[r] = chunk_vec(kind, v[r], j, tb[r]);
                    if (!pre) wv[r] = _mm512_mul_ps(wv[r], sc[r]);
                    if (tail) wv[r] = _mm512_maskz_mov_ps(tail_mask(per, rem, j), wv[r]);
                }
                QTK_UNROLL
                for (unsigned i = 0; i < MR; i++) {
                    float *ap = a + i * np + 16 * j;
                    __m512 s = _mm512_loadu_ps(ap);
                    QTK_UNROLL
                    for (unsigned r = 0; r < 4; r++) s = _mm512_fmadd_ps(wv[r], xb[i][r], s);
                    _mm512_storeu_ps(ap, s);
                }
            }
        }
    }
    /* back to natural order, plus bias */
    for (unsigned i = 0; i < MR; i++)
        for (size_t p = 0; p < np; p++) {
            size_t ci = p / C, j = (p % C) / 16, l = p % 16, col = ci * C + per * l + j;
            if (col >= nn) continue;
            float s = acc[i * np + p];
            c->y[(m0 + i) * N + c0 + col] = c->bias ? s + c->bias[c0 + col] : s;
        }
}

QTK_AI void knf_range(const int kind, const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    consts kc;
    consts_init(c, &kc);
    for (size_t c0 = n0; c0 < n1; c0 += QTK__MM_KNF_COLS) {
        size_t nn = n1 - c0 < QTK__MM_KNF_COLS ? n1 - c0 : QTK__MM_KNF_COLS, m = 0;
        for (; m + 2 <= c->M; m += 2) knf_block(kind, 2, c, &kc, c0, nn, m, ws);
        if (m < c->M) knf_block(kind, 1, c, &kc, c0, nn, m, ws);
    }
}

#define KNF(name, kind)                                                                                                \
    static void name(const qtk__mm *c, size_t n0, size_t n1, float *ws) { knf_range(kind, c, n0, n1, ws); }
KNF(knf_f32, QTK__MMK_F32)
KNF(knf_i8, QTK__MMK_I8)
KNF(knf_t8, QTK__MMK_T8)
KNF(knf_e4m3, QTK__MMK_E4M3)
KNF(knf_e5m2, QTK__MMK_E5M2)
KNF(knf_t4, QTK__MMK_T4)
KNF(knf_t2, QTK__MMK_T2)

static void kn_fused(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    switch (c->w.kind) {
    case QTK__MMK_F32: knf_f32(c, n0, n1, ws); break;
    case QTK__MMK_I8: knf_i8(c, n0, n1, ws); break;
    case QTK__MMK_T8: knf_t8(c, n0, n1, ws); break;
    case QTK__MMK_E4M3: knf_e4m3(c, n0, n1, ws); break;
    case QTK__MMK_E5M2: knf_e5m2(c, n0, n1, ws); break;
    case QTK__MMK_T4: knf_t4(c, n0, n1, ws); break;
    case QTK__MMK_T2: knf_t2(c, n0, n1, ws); break;
    default: break;
    }
}

/* ---- tiles for the drivers ---- */

/* Natural order from the per vectors of a chunk (per = 2 or 4), 16 fields per output. */
QTK_AI void interleave(unsigned per, __m512 *v, float *dst, unsigned nout) {
    __m512 o[4];
    if (per == 2) {
        const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
        const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
        o[0] = _mm512_permutex2var_ps(v[0], lo, v[1]);
        o[1] = _mm512_permutex2var_ps(v[0], hi, v[1]);
    } else {
        /* pairs (v0, v1) and (v2, v3) interleaved, then pairs of pairs */
        const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
        const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
        __m512 a0 = _mm512_permutex2var_ps(v[0], lo, v[1]), a1 = _mm512_permutex2var_ps(v[0], hi, v[1]);
        __m512 b0 = _mm512_permutex2var_ps(v[2], lo, v[3]), b1 = _mm512_permutex2var_ps(v[2], hi, v[3]);
        const __m512i q0 = _mm512_set_epi32(23, 22, 7, 6, 21, 20, 5, 4, 19, 18, 3, 2, 17, 16, 1, 0);
        const __m512i q1 = _mm512_set_epi32(31, 30, 15, 14, 29, 28, 13, 12, 27, 26, 11, 10, 25, 24, 9, 8);
        o[0] = _mm512_permutex2var_ps(a0, q0, b0);
        o[1] = _mm512_permutex2var_ps(a0, q1, b0);
        o[2] = _mm512_permutex2var_ps(a1, q0, b1);
        o[3] = _mm512_permutex2var_ps(a1, q1, b1);
    }
    QTK_UNROLL
    for (unsigned q = 0; q < 4; q++) /* a constant trip count keeps o[] in registers */
        if (q < nout) _mm512_storeu_ps(dst + 16 * q, o[q]);
}

/* One chunk of a row into d: nvec vectors of 16, scaled, in chunk or natural order. In the
 * row's last chunk (tail) only the row's bytes are read and fields past it are zeroed. */
QTK_AI void decode_chunk(const int kind, const bool tail, bool chunked, const uint8_t *src, size_t rem, __m512 sc,
                         __m512 tb, bool pre, float *d, unsigned nvec) {
    const unsigned per = per_of(kind);
    unsigned nb = tail ? (unsigned)((rem + per - 1) / per) : 16u;
    __m512i v = chunk_lanes(kind, chunk_bytes(src, nb));
    __m512 out[4];
    QTK_UNROLL
    for (unsigned j = 0; j < per; j++) {
        out[j] = chunk_vec(kind, v, j, tb);
        if (!pre) out[j] = _mm512_mul_ps(out[j], sc);
        if (tail) out[j] = _mm512_maskz_mov_ps(tail_mask(per, rem, j), out[j]);
    }
    if (per == 1 || chunked) {
        QTK_UNROLL
        for (unsigned j = 0; j < per; j++)
            if (j < nvec) _mm512_storeu_ps(d + 16 * j, out[j]);
    } else {
        interleave(per, out, d, nvec);
    }
}

/* Row r, columns [c0, c0+nc) (c0 a multiple of the chunk, nc a multiple of 16) into dst.
 * b0: first scale block of the columns, nblk: blocks up to the last existing column. */
QTK_AI void decode_row(const int kind, const qtk__mm *c, const consts *kc, size_t r, size_t c0, size_t nc, bool chunked,
                       size_t b0, size_t nblk, float *dst) {
    const qtk__mmw *w = &c->w;
    const unsigned per = per_of(kind), C = L16 * per;
    const size_t len = w->C, bc = w->bc;
    const uint8_t *row = w->vals + r * w->row_bytes;
    if (kind == QTK__MMK_F32) {
        const float *src = (const float *)(const void *)row;
        for (size_t k = c0; k < c0 + nc; k += 16) {
            size_t rem = k < len ? len - k : 0;
            __m512 v = rem >= 16 ? _mm512_loadu_ps(src + k) : _mm512_maskz_loadu_ps(tail_mask(1, rem, 0), src + k);
            _mm512_storeu_ps(dst + (k - c0), v);
        }
        return;
    }
    const bool split = kc->split, pre = is_table(kind) && !split;
    alignas(64) float bs[QTK__MM_KC / 16 + 32];
    if (nblk) load_scales(w, group0_fast(w, r) + b0, nblk, bs);
    const size_t cend = c0 + nc, have = cend < len ? cend : len;
    const size_t kfull = have > c0 ? c0 + (have - c0) / C * C : c0; /* chunks wholly inside the row */
    size_t k = c0, bi = 0;
    __m512 sc, tb = kc->tab;
    if (split) {
        for (; k < kfull; k += C, bi += kc->cb) {
            sc = _mm512_permutexvar_ps(kc->pat, _mm512_maskz_loadu_ps(kc->bmask, bs + bi));
            decode_chunk(kind, false, chunked, row + k / per, 0, sc, tb, false, dst + (k - c0), per);
        }
    } else {
        /* blocks of whole chunks (or one block past the row's end): scale once per block */
        for (size_t next = (b0 + 1) * bc; k < kfull; bi++, next += bc) {
            sc = _mm512_set1_ps(bs[bi]);
            if (pre) tb = _mm512_mul_ps(kc->tab, sc);
            const size_t e = next < kfull ? next : kfull;
            for (; k < e; k += C) decode_chunk(kind, false, chunked, row + k / per, 0, sc, tb, pre, dst + (k - c0), per);
        }
    }
    if (k < have) { /* the row's last, partial chunk */
        bi = split ? bi : k / bc - b0;
        sc = split ? _mm512_permutexvar_ps(kc->pat, _mm512_maskz_loadu_ps(kc->bmask, bs + bi)) : _mm512_set1_ps(bs[bi]);
        if (pre) tb = _mm512_mul_ps(kc->tab, sc);
        unsigned nvec = (unsigned)((cend - k) / 16 < per ? (cend - k) / 16 : per);
        decode_chunk(kind, true, chunked, row + k / per, len - k, sc, tb, pre, dst + (k - c0), nvec);
        k += C;
    }
    for (; k < cend; k += 16) _mm512_storeu_ps(dst + (k - c0), _mm512_setzero_ps()); /* padding */
}

/* Fetches the values and scales of row r, columns [c0, c0+nc), towards L2: the nk driver
 * walks W a column slab at a time, which the hardware prefetchers do not follow. Always
 * inlined: GCC deems an out-of-line function holding only prefetches free of effects and
 * deletes its calls. */
QTK_AI void prefetch_row(const qtk__mmw *w, size_t r, size_t c0, size_t nc) {
    if (r >= w->R || c0 >= w->C) return;
    size_t end = c0 + nc < w->C ? c0 + nc : w->C;
    const uint8_t *p = w->vals + r * w->row_bytes;
    size_t bpf = w->kind == QTK__MMK_F32 ? 4 : 1, per = w->per;
    for (size_t o = c0 * bpf / per; o < (end * bpf + per - 1) / per; o += 64) _mm_prefetch((const char *)(p + o), _MM_HINT_T1);
    if (w->kind != QTK__MMK_F32) {
        const uint8_t *sp = w->sb + (group0_fast(w, r) + c0 / w->bc) * w->ssz;
        _mm_prefetch((const char *)sp, _MM_HINT_T1);
    }
}

#include "mm_x86_decode.h"

/* ---- the f32 microkernel: 6 broadcast rows x up to 4 vectors ---- */

#define IR 6u

QTK_AI void ukr_t(const unsigned JV, size_t kc, const float *a, size_t lda, const float *b, size_t ldb, float *cc,
                  size_t ldc, unsigned ir, bool acc) {
    const float *ap[IR];
    QTK_UNROLL
    for (unsigned i = 0; i < IR; i++) ap[i] = a + (i < ir ? i : 0) * lda;
    __m512 c[IR][4];
    QTK_UNROLL
    for (unsigned i = 0; i < IR; i++)
        QTK_UNROLL
        for (unsigned v = 0; v < JV; v++)
            c[i][v] = acc && i < ir ? _mm512_loadu_ps(cc + i * ldc + 16 * v) : _mm512_setzero_ps();
    for (size_t k = 0; k < kc; k++) {
        __m512 bv[4];
        QTK_UNROLL
        for (unsigned v = 0; v < JV; v++) bv[v] = _mm512_loadu_ps(b + k * ldb + 16 * v);
        QTK_UNROLL
        for (unsigned i = 0; i < IR; i++) {
            __m512 av = _mm512_set1_ps(ap[i][k]);
            QTK_UNROLL
            for (unsigned v = 0; v < JV; v++) c[i][v] = _mm512_fmadd_ps(av, bv[v], c[i][v]);
        }
    }
    QTK_UNROLL
    for (unsigned i = 0; i < IR; i++)
        QTK_UNROLL
        for (unsigned v = 0; v < JV; v++)
            if (i < ir) _mm512_storeu_ps(cc + i * ldc + 16 * v, c[i][v]);
}

static void ukr(size_t kc, const float *a, size_t lda, const float *b, size_t ldb, float *cc, size_t ldc, unsigned ir,
                unsigned jr, bool acc) {
    switch (jr / 16) {
    case 4: ukr_t(4, kc, a, lda, b, ldb, cc, ldc, ir, acc); break;
    case 3: ukr_t(3, kc, a, lda, b, ldb, cc, ldc, ir, acc); break;
    case 2: ukr_t(2, kc, a, lda, b, ldb, cc, ldc, ir, acc); break;
    default: ukr_t(1, kc, a, lda, b, ldb, cc, ldc, ir, acc); break;
    }
}

const qtk__mm_isa qtk__mm_isa_avx512 = {
    .name = "avx512",
    .lanes = 16,
    .ir = IR,
    .jr = 64,
    .fused_max_m = 8,
    .nk_fused = nk_fused,
    .kn_fused = kn_fused,
    .decode = decode,
    .ukr = ukr,
    .int_prepare = qtk__mm_int_prepare_avx512,
    .nk_int = qtk__mm_int_avx512,
};
