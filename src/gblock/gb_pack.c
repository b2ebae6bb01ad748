/* gb_pack.c — ggml's block structs <-> unpacked blocks (formats/GGUF.md §2.6, §2.7, §2.15).
 *
 * Each pack is the exact inverse of its unpack over all bit patterns: the fields, integer
 * scales and f16 words of an unpacked block take every bit of the struct once. */
#include "gblock.h"

/* ---- the formats ---- */

/* f, qk, bytes, sub, groups, qlo, qhi, affine, super, sclo, schi, mnhi, lattice, dmul */
#define GB_K(f, qk, by, sub, gr, qlo, qhi, aff, sup, sclo, schi, mnhi) {f, qk, by, sub, gr, qlo, qhi, aff, sup, sclo, schi, mnhi, false, 1.0f}
#define GB_L(f, by, sub, qhi, schi, dmul) {f, 256, by, sub, 256 / (sub), -(qhi), qhi, false, true, 1, schi, 0, true, dmul}
static const qtk__gb_fmt fmts[QTK__GF_COUNT] = {
    [QTK__GF_Q4_1] = GB_K(QTK__GF_Q4_1, 32, 20, 32, 1, 0, 15, true, false, 0, 0, 0),
    [QTK__GF_Q5_0] = GB_K(QTK__GF_Q5_0, 32, 22, 32, 1, -16, 15, false, false, 0, 0, 0),
    [QTK__GF_Q5_1] = GB_K(QTK__GF_Q5_1, 32, 24, 32, 1, 0, 31, true, false, 0, 0, 0),
    [QTK__GF_Q2_K] = GB_K(QTK__GF_Q2_K, 256, 84, 16, 16, 0, 3, true, true, 0, 15, 15),
    [QTK__GF_Q3_K] = GB_K(QTK__GF_Q3_K, 256, 110, 16, 16, -4, 3, false, true, -32, 31, 0),
    [QTK__GF_Q4_K] = GB_K(QTK__GF_Q4_K, 256, 144, 32, 8, 0, 15, true, true, 0, 63, 63),
    [QTK__GF_Q5_K] = GB_K(QTK__GF_Q5_K, 256, 176, 32, 8, 0, 31, true, true, 0, 63, 63),
    [QTK__GF_Q6_K] = GB_K(QTK__GF_Q6_K, 256, 210, 16, 16, -32, 31, false, true, -128, 127, 0),
    /* lattice types: q the signed coordinates (IQ1: 8 x (level +- 1/8)), sc = 2s + 1 */
    [QTK__GF_IQ2_XXS] = GB_L(QTK__GF_IQ2_XXS, 66, 32, 43, 31, 0.125f),
    [QTK__GF_IQ2_XS] = GB_L(QTK__GF_IQ2_XS, 74, 16, 43, 31, 0.125f),
    [QTK__GF_IQ2_S] = GB_L(QTK__GF_IQ2_S, 82, 16, 43, 31, 0.125f),
    [QTK__GF_IQ3_XXS] = GB_L(QTK__GF_IQ3_XXS, 98, 32, 62, 31, 0.25f),
    [QTK__GF_IQ3_S] = GB_L(QTK__GF_IQ3_S, 110, 32, 15, 31, 1.0f),
    [QTK__GF_IQ1_S] = GB_L(QTK__GF_IQ1_S, 50, 32, 9, 15, 0.125f),
    [QTK__GF_IQ1_M] = GB_L(QTK__GF_IQ1_M, 56, 16, 9, 15, 0.125f),
};

const qtk__gb_fmt *qtk__gb_fmt_of(qtk__gfmt f) { return &fmts[f]; }

const qtk__gb_fmt *qtk__gb_fmt_of_scheme(const qtk_scheme *s) {
    int f = qtk__scheme_gfmt(s);
    return f < 0 ? NULL : &fmts[f];
}

/* ---- split nibbles (h low nibbles then h high ones) and bit planes ---- */

/* Q4_1/Q5_x: element j < 16 is the low nibble of qs[j], j >= 16 the high nibble of qs[j-16]. */
static void nibbles32_get(const uint8_t *qs, int8_t *q) {
    for (unsigned j = 0; j < 16; j++) {
        q[j] = (int8_t)(qs[j] & 15u);
        q[j + 16] = (int8_t)(qs[j] >> 4);
    }
}
static void nibbles32_put(const int8_t *q, uint8_t *qs) {
    for (unsigned j = 0; j < 16; j++) qs[j] = (uint8_t)(((unsigned)q[j] & 15u) | (((unsigned)q[j + 16] & 15u) << 4));
}

/* Q4_K/Q5_K: per 64 elements (chunk c), element 64c + r is the low nibble of qs[32c + r] for
 * r < 32, the high nibble of qs[32c + r - 32] for r >= 32. */
static void nibbles256_get(const uint8_t *qs, int8_t *q) {
    for (unsigned c = 0; c < 4; c++)
        for (unsigned l = 0; l < 32; l++) {
            q[64 * c + l] = (int8_t)(qs[32 * c + l] & 15u);
            q[64 * c + 32 + l] = (int8_t)(qs[32 * c + l] >> 4);
        }
}
static void nibbles256_put(const int8_t *q, uint8_t *qs) {
    for (unsigned c = 0; c < 4; c++)
        for (unsigned l = 0; l < 32; l++)
            qs[32 * c + l] = (uint8_t)(((unsigned)q[64 * c + l] & 15u) | (((unsigned)q[64 * c + 32 + l] & 15u) << 4));
}

/* Q2_K/Q3_K: element e = 128h + 32j + l holds its 2 low bits at bits 2j of qs[32h + l]. */
static void crumbs_get(const uint8_t *qs, int8_t *q) {
    for (unsigned e = 0; e < 256; e++) q[e] = (int8_t)((qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3u);
}
static void crumbs_put(const int8_t *q, uint8_t *qs) {
    memset(qs, 0, 64);
    for (unsigned e = 0; e < 256; e++) qs[32 * (e / 128) + e % 32] |= (uint8_t)(((unsigned)q[e] & 3u) << (2 * ((e / 32) % 4)));
}

/* Q3_K/Q5_K: bit e / 32 of byte e % 32 of a 32-byte plane. */
static unsigned plane_get(const uint8_t *p, unsigned e) { return (p[e % 32] >> (e / 32)) & 1u; }
static void plane_put(uint8_t *p, unsigned e, unsigned bit) { p[e % 32] |= (uint8_t)(bit << (e / 32)); }

/* Q4_K/Q5_K's 8 pairs of 6-bit scale and min in 12 bytes (GGUF.md §2.15). */
static void k4_scales_get(const uint8_t *S, int8_t *sc, uint8_t *mn) {
    for (unsigned s = 0; s < 4; s++) {
        sc[s] = (int8_t)(S[s] & 63u);
        mn[s] = (uint8_t)(S[s + 4] & 63u);
    }
    for (unsigned s = 4; s < 8; s++) {
        sc[s] = (int8_t)((S[s + 4] & 15u) | ((unsigned)(S[s - 4] >> 6) << 4));
        mn[s] = (uint8_t)((S[s + 4] >> 4) | ((unsigned)(S[s] >> 6) << 4));
    }
}
static void k4_scales_put(const int8_t *sc, const uint8_t *mn, uint8_t *S) {
    for (unsigned s = 0; s < 4; s++) {
        unsigned a = (unsigned)sc[s] & 63u, b = (unsigned)mn[s] & 63u;
        unsigned ha = ((unsigned)sc[s + 4] & 63u) >> 4, hb = ((unsigned)mn[s + 4] & 63u) >> 4;
        S[s] = (uint8_t)(a | ha << 6);
        S[s + 4] = (uint8_t)(b | hb << 6);
        S[s + 8] = (uint8_t)(((unsigned)sc[s + 4] & 15u) | ((unsigned)mn[s + 4] & 15u) << 4);
    }
}

/* Q3_K's 16 6-bit scales, biased by 32, in 12 bytes: low 4 bits in the nibbles of bytes 0-7
 * (s < 8 low, s >= 8 high of byte s - 8), high 2 bits at bits 2 (s / 4) of byte 8 + s % 4. */
static void k3_scales_get(const uint8_t *S, int8_t *sc) {
    for (unsigned s = 0; s < 16; s++) {
        unsigned lo = s < 8 ? S[s] & 15u : (unsigned)S[s - 8] >> 4, hi = (S[8 + s % 4] >> (2 * (s / 4))) & 3u;
        sc[s] = (int8_t)((int)(lo | hi << 4) - 32);
    }
}
static void k3_scales_put(const int8_t *sc, uint8_t *S) {
    memset(S, 0, 12);
    for (unsigned s = 0; s < 16; s++) {
        unsigned v = (unsigned)(sc[s] + 32) & 63u;
        S[s % 8] |= (uint8_t)((v & 15u) << (s < 8 ? 0 : 4));
        S[8 + s % 4] |= (uint8_t)((v >> 4) << (2 * (s / 4)));
    }
}

/* ---- unpack / pack ---- */

void qtk__gb_unpack_scales(const qtk__gb_fmt *F, const uint8_t *b, qtk__gb_unpacked *u) {
    if (F->lattice) {
        qtk__gb_lattice_unpack(F, b, u);
        return;
    }
    switch (F->f) {
    case QTK__GF_Q2_K:
        for (unsigned s = 0; s < 16; s++) u->sc[s] = (int8_t)(b[s] & 15u), u->mn[s] = (uint8_t)(b[s] >> 4);
        u->d = qtk__ld16(b + 80), u->m = qtk__ld16(b + 82);
        break;
    case QTK__GF_Q3_K:
        k3_scales_get(b + 96, u->sc);
        u->d = qtk__ld16(b + 108), u->m = 0;
        break;
    case QTK__GF_Q4_K:
    case QTK__GF_Q5_K:
        u->d = qtk__ld16(b), u->m = qtk__ld16(b + 2);
        k4_scales_get(b + 4, u->sc, u->mn);
        break;
    case QTK__GF_Q6_K:
        for (unsigned s = 0; s < 16; s++) u->sc[s] = (int8_t)b[192 + s];
        u->d = qtk__ld16(b + 208), u->m = 0;
        break;
    default: /* the 32 types */
        u->d = qtk__ld16(b);
        u->m = F->affine ? qtk__ld16(b + 2) : 0;
        break;
    }
}

void qtk__gb_unpack(const qtk__gb_fmt *F, const uint8_t *b, qtk__gb_unpacked *u) {
    if (F->lattice) {
        qtk__gb_lattice_unpack(F, b, u);
        return;
    }
    memset(u->sc, 0, sizeof u->sc);
    memset(u->mn, 0, sizeof u->mn);
    u->m = 0;
    switch (F->f) {
    case QTK__GF_Q4_1:
        u->d = qtk__ld16(b), u->m = qtk__ld16(b + 2);
        nibbles32_get(b + 4, u->q);
        break;
    case QTK__GF_Q5_0:
    case QTK__GF_Q5_1: {
        bool one = F->f == QTK__GF_Q5_1;
        u->d = qtk__ld16(b);
        if (one) u->m = qtk__ld16(b + 2);
        uint32_t qh = qtk__ld32(b + (one ? 4 : 2));
        nibbles32_get(b + (one ? 8 : 6), u->q);
        for (unsigned j = 0; j < 32; j++) u->q[j] = (int8_t)(u->q[j] + (int)(((qh >> j) & 1u) << 4) - (one ? 0 : 16));
        break;
    }
    case QTK__GF_Q2_K:
        for (unsigned s = 0; s < 16; s++) u->sc[s] = (int8_t)(b[s] & 15u), u->mn[s] = (uint8_t)(b[s] >> 4);
        crumbs_get(b + 16, u->q);
        u->d = qtk__ld16(b + 80), u->m = qtk__ld16(b + 82);
        break;
    case QTK__GF_Q3_K:
        crumbs_get(b + 32, u->q);
        for (unsigned e = 0; e < 256; e++) u->q[e] = (int8_t)(u->q[e] - (plane_get(b, e) ? 0 : 4));
        k3_scales_get(b + 96, u->sc);
        u->d = qtk__ld16(b + 108);
        break;
    case QTK__GF_Q4_K:
    case QTK__GF_Q5_K: {
        bool five = F->f == QTK__GF_Q5_K;
        u->d = qtk__ld16(b), u->m = qtk__ld16(b + 2);
        k4_scales_get(b + 4, u->sc, u->mn);
        nibbles256_get(b + (five ? 48 : 16), u->q);
        if (five)
            for (unsigned e = 0; e < 256; e++) u->q[e] = (int8_t)(u->q[e] + (int)(plane_get(b + 16, e) << 4));
        break;
    }
    case QTK__GF_Q6_K:
    default:
        for (unsigned e = 0; e < 256; e++) {
            unsigned h = e / 128, g = (e / 32) % 4, l = e % 32;
            unsigned lo = (b[64 * h + 32 * (g & 1u) + l] >> (g < 2 ? 0 : 4)) & 15u;
            unsigned hi = (b[128 + 32 * h + l] >> (2 * g)) & 3u;
            u->q[e] = (int8_t)((int)(lo | hi << 4) - 32);
        }
        for (unsigned s = 0; s < 16; s++) u->sc[s] = (int8_t)b[192 + s];
        u->d = qtk__ld16(b + 208);
        break;
    }
}

void qtk__gb_pack(const qtk__gb_fmt *F, const qtk__gb_unpacked *u, uint8_t *b) {
    if (F->lattice) {
        (void)qtk__gb_lattice_pack(F, u, b);
        return;
    }
    memset(b, 0, F->bytes);
    int8_t t[QTK__GB_QK_MAX];
    switch (F->f) {
    case QTK__GF_Q4_1:
        qtk__st16(b, u->d), qtk__st16(b + 2, u->m);
        nibbles32_put(u->q, b + 4);
        break;
    case QTK__GF_Q5_0:
    case QTK__GF_Q5_1: {
        bool one = F->f == QTK__GF_Q5_1;
        qtk__st16(b, u->d);
        if (one) qtk__st16(b + 2, u->m);
        uint32_t qh = 0;
        for (unsigned j = 0; j < 32; j++) {
            unsigned c = (unsigned)(u->q[j] + (one ? 0 : 16)) & 31u;
            qh |= (uint32_t)(c >> 4) << j;
            t[j] = (int8_t)(c & 15u);
        }
        qtk__st32(b + (one ? 4 : 2), qh);
        nibbles32_put(t, b + (one ? 8 : 6));
        break;
    }
    case QTK__GF_Q2_K:
        for (unsigned s = 0; s < 16; s++) b[s] = (uint8_t)(((unsigned)u->sc[s] & 15u) | ((unsigned)u->mn[s] & 15u) << 4);
        crumbs_put(u->q, b + 16);
        qtk__st16(b + 80, u->d), qtk__st16(b + 82, u->m);
        break;
    case QTK__GF_Q3_K:
        /* q = low2 - (high bit ? 0 : 4): q >= 0 has the high bit and low2 = q, q < 0 low2 = q + 4 */
        for (unsigned e = 0; e < 256; e++) {
            plane_put(b, e, u->q[e] >= 0 ? 1u : 0u);
            t[e] = (int8_t)((u->q[e] + 4) & 3);
        }
        crumbs_put(t, b + 32);
        k3_scales_put(u->sc, b + 96);
        qtk__st16(b + 108, u->d);
        break;
    case QTK__GF_Q4_K:
    case QTK__GF_Q5_K: {
        bool five = F->f == QTK__GF_Q5_K;
        qtk__st16(b, u->d), qtk__st16(b + 2, u->m);
        k4_scales_put(u->sc, u->mn, b + 4);
        for (unsigned e = 0; e < 256; e++) {
            t[e] = (int8_t)((unsigned)u->q[e] & 15u);
            if (five) plane_put(b + 16, e, ((unsigned)u->q[e] >> 4) & 1u);
        }
        nibbles256_put(t, b + (five ? 48 : 16));
        break;
    }
    case QTK__GF_Q6_K:
    default:
        for (unsigned e = 0; e < 256; e++) {
            unsigned h = e / 128, g = (e / 32) % 4, l = e % 32, c = (unsigned)(u->q[e] + 32) & 63u;
            b[64 * h + 32 * (g & 1u) + l] |= (uint8_t)((c & 15u) << (g < 2 ? 0 : 4));
            b[128 + 32 * h + l] |= (uint8_t)((c >> 4) << (2 * g));
        }
        for (unsigned s = 0; s < 16; s++) b[192 + s] = (uint8_t)u->sc[s];
        qtk__st16(b + 208, u->d);
        break;
    }
}
