/* gguf_ref_decode.c — a second, independent decoder of ggml's types with offsets and mins
 * (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K; GGUF.md §2.6, §2.7, §2.15): qtk's decoder of these types before
 * they were held natively (store=ggml, docs/affine.md), kept as the tests' reference. Each value
 * is computed with ggml's operations in ggml's order: scale products first (exact: f16 x small
 * integer), then one rounded multiply, then one rounded add or subtract; this file is compiled
 * with -ffp-contract=off (tests/CMakeLists.txt). */
#include "gguf_ref_decode.h"

#include "gguf/gguf_internal.h"

#include <stdio.h>

static bool f16_finite(uint16_t h) { return (h & 0x7c00u) != 0x7c00u; }

static qtk_status nonfinite(const char *type, size_t b, size_t off, const char *field, uint16_t h) {
    return qtk__err(QTK_E_VALUE, "%s block %zu (file offset %zu): %s (f16 0x%04x) is not finite", type, b, off, field, h);
}

/* Q4_1: x = n d + m, n the unsigned 4-bit code in split order. */
static qtk_status dec_q4_1(const uint8_t *src, size_t nb, float *y, size_t off) {
    for (size_t b = 0; b < nb; b++, y += 32) {
        const uint8_t *blk = src + 20 * b;
        uint16_t dh = qtk__ld16(blk), mh = qtk__ld16(blk + 2);
        if (!f16_finite(dh)) return nonfinite("Q4_1", b, off + 20 * b, "d", dh);
        if (!f16_finite(mh)) return nonfinite("Q4_1", b, off + 20 * b, "m", mh);
        const float d = qtk__gguf_f16(dh), m = qtk__gguf_f16(mh);
        for (unsigned j = 0; j < 16; j++) {
            const int x0 = blk[4 + j] & 15, x1 = blk[4 + j] >> 4;
            y[j] = (float)x0 * d + m;
            y[j + 16] = (float)x1 * d + m;
        }
    }
    return QTK_OK;
}

/* Q5_1: as Q4_1 with a fifth bit from qh (bit j for element j). */
static qtk_status dec_q5_1(const uint8_t *src, size_t nb, float *y, size_t off) {
    for (size_t b = 0; b < nb; b++, y += 32) {
        const uint8_t *blk = src + 24 * b;
        uint16_t dh = qtk__ld16(blk), mh = qtk__ld16(blk + 2);
        if (!f16_finite(dh)) return nonfinite("Q5_1", b, off + 24 * b, "d", dh);
        if (!f16_finite(mh)) return nonfinite("Q5_1", b, off + 24 * b, "m", mh);
        const float d = qtk__gguf_f16(dh), m = qtk__gguf_f16(mh);
        const uint32_t qh = qtk__ld32(blk + 4);
        for (unsigned j = 0; j < 16; j++) {
            const int x0 = (blk[8 + j] & 15) | (int)(((qh >> j) & 1u) << 4);
            const int x1 = (blk[8 + j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            y[j] = (float)x0 * d + m;
            y[j + 16] = (float)x1 * d + m;
        }
    }
    return QTK_OK;
}

/* Q2_K: element e = 128h + 32j + l has q = (qs[32h + l] >> 2j) & 3; scales[e/16] holds the
 * 4-bit scale (low) and min (high); x = (d sc) q - (dmin mn). */
static qtk_status dec_q2_k(const uint8_t *src, size_t nb, float *y, size_t off) {
    for (size_t b = 0; b < nb; b++, y += 256) {
        const uint8_t *blk = src + 84 * b, *sc = blk, *qs = blk + 16;
        uint16_t dh = qtk__ld16(blk + 80), mh = qtk__ld16(blk + 82);
        if (!f16_finite(dh)) return nonfinite("Q2_K", b, off + 84 * b, "d", dh);
        if (!f16_finite(mh)) return nonfinite("Q2_K", b, off + 84 * b, "dmin", mh);
        const float d = qtk__gguf_f16(dh), dmin = qtk__gguf_f16(mh);
        for (unsigned e = 0; e < 256; e++) {
            const unsigned h = e / 128, j = (e / 32) % 4, l = e % 32, s = sc[e / 16];
            const float dl = d * (float)(s & 15u), ml = dmin * (float)(s >> 4);
            const int q = (qs[32 * h + l] >> (2 * j)) & 3;
            y[e] = dl * (float)q - ml;
        }
    }
    return QTK_OK;
}

/* The 6-bit scale and min of sub-block s (0..7) of Q4_K/Q5_K, packed in 12 bytes. */
static void scale_min_k4(unsigned s, const uint8_t *q, unsigned *sc, unsigned *mn) {
    if (s < 4) {
        *sc = q[s] & 63u;
        *mn = q[s + 4] & 63u;
    } else {
        *sc = (q[s + 4] & 15u) | ((unsigned)(q[s - 4] >> 6) << 4);
        *mn = (unsigned)(q[s + 4] >> 4) | ((unsigned)(q[s] >> 6) << 4);
    }
}

/* Q4_K (five = false) and Q5_K (five = true): sub-blocks of 32, codes in split order per 64
 * (h = 32), Q5_K's fifth bit from qh; x = (d sc) q - (dmin mn). */
static qtk_status dec_q45_k(const uint8_t *src, size_t nb, float *y, size_t off, bool five) {
    const size_t bytes = five ? 176 : 144;
    const char *tn = five ? "Q5_K" : "Q4_K";
    for (size_t b = 0; b < nb; b++, y += 256) {
        const uint8_t *blk = src + bytes * b, *scales = blk + 4, *qh = blk + 16, *qs = blk + (five ? 48 : 16);
        uint16_t dh = qtk__ld16(blk), mh = qtk__ld16(blk + 2);
        if (!f16_finite(dh)) return nonfinite(tn, b, off + bytes * b, "d", dh);
        if (!f16_finite(mh)) return nonfinite(tn, b, off + bytes * b, "dmin", mh);
        const float d = qtk__gguf_f16(dh), dmin = qtk__gguf_f16(mh);
        for (unsigned c = 0; c < 4; c++) {
            unsigned sc, mn;
            scale_min_k4(2 * c, scales, &sc, &mn);
            const float d1 = d * (float)sc, m1 = dmin * (float)mn;
            scale_min_k4(2 * c + 1, scales, &sc, &mn);
            const float d2 = d * (float)sc, m2 = dmin * (float)mn;
            for (unsigned l = 0; l < 32; l++) {
                int q1 = qs[32 * c + l] & 15, q2 = qs[32 * c + l] >> 4;
                if (five) {
                    q1 += (qh[l] >> (2 * c)) & 1u ? 16 : 0;
                    q2 += (qh[l] >> (2 * c + 1)) & 1u ? 16 : 0;
                }
                y[64 * c + l] = d1 * (float)q1 - m1;
                y[64 * c + 32 + l] = d2 * (float)q2 - m2;
            }
        }
    }
    return QTK_OK;
}

qtk_status test_gguf_ref_decode(uint32_t type, const uint8_t *src, size_t nb, float *dst, size_t off) {
    switch (type) {
    case 3: return dec_q4_1(src, nb, dst, off);
    case 7: return dec_q5_1(src, nb, dst, off);
    case 10: return dec_q2_k(src, nb, dst, off);
    case 12: return dec_q45_k(src, nb, dst, off, false);
    case 13: return dec_q45_k(src, nb, dst, off, true);
    default: return qtk__err(QTK_E_UNSUPPORTED, "the reference decoder has no ggml type %u", type);
    }
}
