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
#include "mm_x86.h"

#include <math.h>

#define L16 16u
#define NR 4u /* weight rows per fused tile */

/* ---- scales ---- */

/* 16 e4m3 codes -> f16 bits of value / 256: sign-extended to 16 bits and shifted left by 7,
 * the magnitude lands on bits 7..13 and copies of the sign on 14 and 15; clearing bit 14
 * leaves the f16 whose exponent is the e4m3 exponent (bias 15 instead of 7: a factor 2^-8). */
QTK_AI __m256i e4m3_to_h(__m128i b) {
    return _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(b), 7), _mm256_set1_epi16((short)0xBF80));
}

/* 16 e4m3 codes -> f32 values (NaN for S.1111.111). */
QTK_AI __m512 e4m3_16(__m128i b) {
    __m512 v = _mm512_mul_ps(_mm512_cvtph_ps(e4m3_to_h(b)), _mm512_set1_ps(256.0f));
    __mmask16 nan = _mm_cmpeq_epi8_mask(_mm_or_si128(b, _mm_set1_epi8((char)0x80)), _mm_set1_epi8((char)0xff));
    return _mm512_mask_mov_ps(v, nan, _mm512_set1_ps(NAN));
}

/* Effective scales of groups [g, g+n) of W into dst (multiple of 16 written; dst has room). */
static void load_scales(const qtk__mmw *w, size_t g, size_t n, float *dst) {
    const uint8_t *s = w->sb + g * w->ssz;
    const __m512 glob = _mm512_set1_ps(w->global);
    for (size_t i = 0; i < n; i += 16) {
        unsigned cnt = n - i < 16 ? (unsigned)(n - i) : 16u;
        __mmask16 k = (__mmask16)((1u << cnt) - 1u);
        const uint8_t *p = s + i * w->ssz;
        __m512 v;
        switch (w->sdt) {
        case QTK_DTYPE_F16: v = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, p)); break;
        case QTK_DTYPE_BF16:
            v = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, p)), 16));
            break;
        case QTK_DTYPE_UE8M0: {
            __m512i e = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, p));
            __mmask16 z = _mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512());
            /* 2^(e-127); e = 0 is 2^-127, an f32 subnormal */
            v = _mm512_castsi512_ps(_mm512_mask_mov_epi32(_mm512_slli_epi32(e, 23), z, _mm512_set1_epi32(0x00400000)));
            break;
        }
        case QTK_DTYPE_UE4M3: v = e4m3_16(_mm_maskz_loadu_epi8(k, p)); break;
        default: v = _mm512_maskz_loadu_ps(k, p); break;
        }
        if (w->two_level) v = _mm512_mul_ps(glob, v);
        _mm512_storeu_ps(dst + i, v);
    }
}

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
 * caller loads the values itself. */
QTK_AI __m512 chunk_vec(const int kind, __m512i v, unsigned j, __m512 tab) {
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

/* Lanes of vector j that hold fields below rem (rem < chunk: a row's last chunk). */
QTK_AI __mmask16 tail_mask(unsigned per, size_t rem, unsigned j) {
    size_t n = rem > j ? (rem - j + per - 1) / per : 0;
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
}

/* Lane pattern of a chunk whose scale blocks (bc fields) are shorter than the chunk:
 * lane l of every vector holds field per*l + j, in block per*l / bc. */
QTK_AI __m512i split_pattern(unsigned per, size_t bc) {
    alignas(64) int32_t idx[16];
    for (unsigned l = 0; l < 16; l++) idx[l] = (int32_t)((per * l) / bc);
    return _mm512_load_si512(idx);
}

/* ---- nk fused: y[m][n] for small M ---- */

/* One tile: rows n..n+nr-1 of W (nr <= NR) times rows m0..m0+MR-1 of x. */
QTK_AI void fused_tile(const int kind, const unsigned MR, const qtk__mm *c, size_t n, unsigned nr, size_t m0) {
    const qtk__mmw *w = &c->w;
    const unsigned per = per_of(kind), C = L16 * per;
    const size_t K = c->K, kp = c->kp, bc = w->bc;
    const bool split = c->smode == QTK__SM_SPLIT;
    const __m512i pat = split ? split_pattern(per, bc) : _mm512_setzero_si512();
    const __mmask16 bmask = split ? (__mmask16)((1u << (C / bc)) - 1u) : 0; /* blocks in a chunk */
    const __m512 tab = _mm512_loadu_ps(w->table);
    const uint8_t *row[NR];
    size_t g0[NR];
    for (unsigned r = 0; r < NR; r++) {
        size_t rr = n + (r < nr ? r : 0); /* missing rows repeat the first; never stored */
        row[r] = w->vals + rr * w->row_bytes;
        g0[r] = kind == QTK__MMK_F32 ? 0 : qtk__mmw_group0(w, rr);
    }
    const float *xr[4];
    for (unsigned i = 0; i < MR; i++) xr[i] = c->xp + (m0 + i) * kp;
    __m512 acc[4][NR];
    for (unsigned i = 0; i < MR; i++)
        for (unsigned r = 0; r < NR; r++) acc[i][r] = _mm512_setzero_ps();
    alignas(64) float bs[NR][QTK__MM_SEG / 16 + 32];

    for (size_t s0 = 0; s0 < kp; s0 += QTK__MM_SEG) {
        size_t s1 = kp - s0 < QTK__MM_SEG ? kp : s0 + QTK__MM_SEG;
        size_t b0 = s0 / bc;
        qtk__blk_walk bw;
        if (kind != QTK__MMK_F32) {
            size_t last = (s1 < K ? s1 : K) - 1, nblk = last / bc - b0 + 1;
            for (unsigned r = 0; r < nr; r++) load_scales(w, g0[r] + b0, nblk, bs[r]);
            qtk__blk_start(&bw, s0, bc);
        }
        size_t si = 0; /* split: first block of the chunk, relative to b0 */
        for (size_t k = s0; k < s1; k += C, si += C / (split ? bc : C)) {
            const size_t rem = K - k;
            const bool tail = rem < C;
            __m512i v[NR];
            __m512 sc[NR], tb[NR];
            if (kind == QTK__MMK_F32) {
                for (unsigned r = 0; r < NR; r++) {
                    sc[r] = tb[r] = _mm512_setzero_ps();
                    v[r] = _mm512_setzero_si512();
                }
            } else {
                size_t bi = split ? si : qtk__blk_at(&bw, k);
                for (unsigned r = 0; r < NR; r++) {
                    const float *b = bs[r < nr ? r : 0];
                    sc[r] = split ? _mm512_permutexvar_ps(pat, _mm512_maskz_loadu_ps(bmask, b + bi)) : _mm512_set1_ps(b[bi]);
                    /* one scale per chunk: scale the table, not every vector */
                    tb[r] = is_table(kind) && !split ? _mm512_mul_ps(tab, sc[r]) : tab;
                    unsigned nb = tail ? (unsigned)((rem + per - 1) / per) : 16u;
                    v[r] = chunk_lanes(kind, chunk_bytes(row[r] + k / per, nb));
                }
            }
            for (unsigned j = 0; j < per; j++) {
                __m512 wv[NR];
                for (unsigned r = 0; r < NR; r++) {
                    if (kind == QTK__MMK_F32) {
                        const float *src = (const float *)(const void *)row[r] + k;
                        wv[r] = tail ? _mm512_maskz_loadu_ps(tail_mask(1, rem, 0), src) : _mm512_loadu_ps(src);
                        continue;
                    }
                    wv[r] = chunk_vec(kind, v[r], j, tb[r]);
                    if (!(is_table(kind) && !split)) wv[r] = _mm512_mul_ps(wv[r], sc[r]);
                    /* padding fields past K may hold anything (even NaN codes): zero them */
                    if (tail) wv[r] = _mm512_maskz_mov_ps(tail_mask(per, rem, j), wv[r]);
                }
                for (unsigned i = 0; i < MR; i++) {
                    __m512 xv = _mm512_loadu_ps(xr[i] + k + (size_t)j * L16);
                    for (unsigned r = 0; r < NR; r++) acc[i][r] = _mm512_fmadd_ps(wv[r], xv, acc[i][r]);
                }
            }
        }
    }
    for (unsigned i = 0; i < MR; i++)
        for (unsigned r = 0; r < nr; r++) {
            float s = _mm512_reduce_add_ps(acc[i][r]);
            c->y[(m0 + i) * c->N + n + r] = c->bias ? s + c->bias[n + r] : s;
        }
}

QTK_AI void fused_range(const int kind, const qtk__mm *c, size_t n0, size_t n1) {
    for (size_t n = n0; n < n1; n += NR) {
        unsigned nr = n1 - n < NR ? (unsigned)(n1 - n) : NR;
        size_t m = 0;
        for (; m + 4 <= c->M; m += 4) fused_tile(kind, 4, c, n, nr, m);
        if (c->M - m >= 2) {
            fused_tile(kind, 2, c, n, nr, m);
            m += 2;
        }
        if (m < c->M) fused_tile(kind, 1, c, n, nr, m);
    }
}

#define FUSED(name, kind)                                                                                              \
    static void name(const qtk__mm *c, size_t n0, size_t n1) { fused_range(kind, c, n0, n1); }
FUSED(fused_f32, QTK__MMK_F32)
FUSED(fused_i8, QTK__MMK_I8)
FUSED(fused_t8, QTK__MMK_T8)
FUSED(fused_e4m3, QTK__MMK_E4M3)
FUSED(fused_e5m2, QTK__MMK_E5M2)
FUSED(fused_t4, QTK__MMK_T4)
FUSED(fused_t2, QTK__MMK_T2)

static void nk_fused(const qtk__mm *c, size_t n0, size_t n1, float *ws) {
    (void)ws;
    switch (c->w.kind) {
    case QTK__MMK_F32: fused_f32(c, n0, n1); break;
    case QTK__MMK_I8: fused_i8(c, n0, n1); break;
    case QTK__MMK_T8: fused_t8(c, n0, n1); break;
    case QTK__MMK_E4M3: fused_e4m3(c, n0, n1); break;
    case QTK__MMK_E5M2: fused_e5m2(c, n0, n1); break;
    case QTK__MMK_T4: fused_t4(c, n0, n1); break;
    case QTK__MMK_T2: fused_t2(c, n0, n1); break;
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
    for (unsigned q = 0; q < nout; q++) _mm512_storeu_ps(dst + 16 * q, o[q]);
}

/* Row r, columns [c0, c0+nc) (c0 a multiple of the chunk, nc a multiple of 16) into dst. */
QTK_AI void decode_row(const int kind, const qtk__mm *c, size_t r, size_t c0, size_t nc, bool chunked, float *dst) {
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
    const bool split = c->smode == QTK__SM_SPLIT;
    const __m512i pat = split ? split_pattern(per, bc) : _mm512_setzero_si512();
    const __mmask16 bmask = split ? (__mmask16)((1u << (C / bc)) - 1u) : 0;
    const __m512 tab = _mm512_loadu_ps(w->table);
    const size_t end = c0 + nc < len ? c0 + nc : len; /* fields that exist */
    alignas(64) float bs[QTK__MM_KC / 16 + 32];
    size_t b0 = c0 / bc;
    if (end > c0) load_scales(w, qtk__mmw_group0(w, r) + b0, (end - 1) / bc - b0 + 1, bs);
    qtk__blk_walk bw;
    qtk__blk_start(&bw, c0, bc);
    size_t si = 0;
    for (size_t k = c0; k < c0 + nc; k += C, si += C / (split ? bc : C)) {
        unsigned nvec = (unsigned)((c0 + nc - k) / 16 < per ? (c0 + nc - k) / 16 : per);
        float *d = dst + (k - c0);
        if (k >= len) { /* padding chunk */
            for (unsigned q = 0; q < nvec; q++) _mm512_storeu_ps(d + 16 * q, _mm512_setzero_ps());
            continue;
        }
        const size_t rem = len - k;
        const bool tail = rem < C;
        size_t bi = split ? si : qtk__blk_at(&bw, k);
        __m512 sc = split ? _mm512_permutexvar_ps(pat, _mm512_maskz_loadu_ps(bmask, bs + bi)) : _mm512_set1_ps(bs[bi]);
        __m512 tb = is_table(kind) && !split ? _mm512_mul_ps(tab, sc) : tab;
        unsigned nb = tail ? (unsigned)((rem + per - 1) / per) : 16u;
        __m512i v = chunk_lanes(kind, chunk_bytes(row + k / per, nb));
        __m512 out[4];
        for (unsigned j = 0; j < per; j++) {
            out[j] = chunk_vec(kind, v, j, tb);
            if (!(is_table(kind) && !split)) out[j] = _mm512_mul_ps(out[j], sc);
            if (tail) out[j] = _mm512_maskz_mov_ps(tail_mask(per, rem, j), out[j]);
        }
        if (per == 1 || chunked) {
            for (unsigned j = 0; j < nvec; j++) _mm512_storeu_ps(d + 16 * j, out[j]);
        } else {
            interleave(per, out, d, nvec);
        }
    }
}

#define DECODE(name, kind)                                                                                             \
    static void name(const qtk__mm *c, size_t r0, size_t nr, size_t c0, size_t nc, bool chunked, float *dst,          \
                     size_t ld) {                                                                                      \
        for (size_t i = 0; i < nr; i++) decode_row(kind, c, r0 + i, c0, nc, chunked, dst + i * ld);                    \
    }
DECODE(decode_f32, QTK__MMK_F32)
DECODE(decode_i8, QTK__MMK_I8)
DECODE(decode_t8, QTK__MMK_T8)
DECODE(decode_e4m3, QTK__MMK_E4M3)
DECODE(decode_e5m2, QTK__MMK_E5M2)
DECODE(decode_t4, QTK__MMK_T4)
DECODE(decode_t2, QTK__MMK_T2)

static void decode(const qtk__mm *c, size_t r0, size_t nr, size_t c0, size_t nc, bool chunked, float *dst, size_t ld) {
    switch (c->w.kind) {
    case QTK__MMK_F32: decode_f32(c, r0, nr, c0, nc, chunked, dst, ld); break;
    case QTK__MMK_I8: decode_i8(c, r0, nr, c0, nc, chunked, dst, ld); break;
    case QTK__MMK_T8: decode_t8(c, r0, nr, c0, nc, chunked, dst, ld); break;
    case QTK__MMK_E4M3: decode_e4m3(c, r0, nr, c0, nc, chunked, dst, ld); break;
    case QTK__MMK_E5M2: decode_e5m2(c, r0, nr, c0, nc, chunked, dst, ld); break;
    case QTK__MMK_T4: decode_t4(c, r0, nr, c0, nc, chunked, dst, ld); break;
    case QTK__MMK_T2: decode_t2(c, r0, nr, c0, nc, chunked, dst, ld); break;
    default: break;
    }
}

/* ---- the f32 microkernel: 6 broadcast rows x up to 4 vectors ---- */

#define IR 6u

QTK_AI void ukr_t(const unsigned JV, size_t kc, const float *a, size_t lda, const float *b, size_t ldb, float *cc,
                  size_t ldc, unsigned ir, bool acc) {
    const float *ap[IR];
    for (unsigned i = 0; i < IR; i++) ap[i] = a + (i < ir ? i : 0) * lda;
    __m512 c[IR][4];
    for (unsigned i = 0; i < IR; i++)
        for (unsigned v = 0; v < JV; v++)
            c[i][v] = acc && i < ir ? _mm512_loadu_ps(cc + i * ldc + 16 * v) : _mm512_setzero_ps();
    for (size_t k = 0; k < kc; k++) {
        __m512 bv[4];
        for (unsigned v = 0; v < JV; v++) bv[v] = _mm512_loadu_ps(b + k * ldb + 16 * v);
        for (unsigned i = 0; i < IR; i++) {
            __m512 av = _mm512_set1_ps(ap[i][k]);
            for (unsigned v = 0; v < JV; v++) c[i][v] = _mm512_fmadd_ps(av, bv[v], c[i][v]);
        }
    }
    for (unsigned i = 0; i < ir; i++)
        for (unsigned v = 0; v < JV; v++) _mm512_storeu_ps(cc + i * ldc + 16 * v, c[i][v]);
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
    .decode = decode,
    .ukr = ukr,
    .int_prepare = qtk__mm_int_prepare_ref, /* portable integer kernel until the SIMD one lands */
    .nk_int = qtk__mm_int_ref_range,
};
