/* gb_lattice.c — ggml's lattice types (docs/lattice.md): their codebooks expanded, and their
 * blocks <-> unpacked blocks (formats/GGUF.md's structs; ggml's dequantize_row_iq*).
 *
 * Unpacked, every lattice block is what the K types are (gblock.h): integer coordinates q
 * (the codebook's levels with their signs; IQ1: 8 x (level + delta), delta = +-1/8), integer
 * sub-scales sc (the stored s as the codebook uses it: 2s + 1) and the f16 d, worth
 * x = (d x sc x dmul) x q, every product exact. Every bit of a block lands in the unpacked
 * form and no two blocks unpack alike, so pack inverts unpack exactly. */
#include "gblock.h"

#include <pthread.h>

static qtk__lattice_grids grids;
static pthread_once_t grids_once = PTHREAD_ONCE_INIT;

/* Entries of n grid points of `width` coordinates, `base`-ary digits indexing `levels`. */
static void expand(const uint16_t *codes, size_t n, unsigned width, unsigned base, const int8_t *levels, int8_t *out) {
    for (size_t i = 0; i < n; i++) {
        unsigned c = codes[i];
        for (unsigned j = 0; j < width; j++, c /= base) out[i * width + j] = levels[c % base];
    }
}

static unsigned signs8(unsigned bits);

static const int8_t l2[3] = {8, 25, 43}, l1[3] = {-1, 0, 1};
static const int8_t l3xxs[8] = {4, 12, 20, 28, 36, 44, 52, 62}, l3s[8] = {1, 3, 5, 7, 9, 11, 13, 15};

/* cell (a point's code) -> its index in the grid, or -1 */
static void invert(const uint16_t *codes, size_t n, size_t cells, int16_t *inv) {
    for (size_t c = 0; c < cells; c++) inv[c] = -1;
    for (size_t i = 0; i < n; i++) inv[codes[i]] = (int16_t)i;
}

static void build(void) {
    expand(qtk__grid_iq2xxs, 256, 8, 3, l2, &grids.iq2xxs[0][0]);
    expand(qtk__grid_iq2xs, 512, 8, 3, l2, &grids.iq2xs[0][0]);
    expand(qtk__grid_iq2s, 1024, 8, 3, l2, &grids.iq2s[0][0]);
    expand(qtk__grid_iq1s, 2048, 8, 3, l1, &grids.iq1s[0][0]);
    expand(qtk__grid_iq3xxs, 256, 4, 8, l3xxs, &grids.iq3xxs[0][0]);
    expand(qtk__grid_iq3s, 512, 4, 8, l3s, &grids.iq3s[0][0]);
    for (unsigned i = 0; i < 2048; i++)
        for (unsigned j = 0; j < 8; j++) grids.iq1q[i][j] = (int8_t)(8 * grids.iq1s[i][j] + 1);
    for (unsigned i = 0; i < 128; i++) grids.ksigns[i] = (uint8_t)signs8(i);
    for (unsigned i = 0; i < 256; i++) {
        uint64_t m = 0;
        for (unsigned j = 0; j < 8; j++) m |= (uint64_t)((i >> j) & 1u ? 0xffu : 0u) << (8 * j);
        grids.smask[i] = m;
        grids.spm8[i] = m | 0x0101010101010101ull;
    }
    for (unsigned i = 0; i < 128; i++) grids.spm7[i] = grids.spm8[grids.ksigns[i]];
    invert(qtk__grid_iq2xxs, 256, 6561, grids.inv2xxs);
    invert(qtk__grid_iq2xs, 512, 6561, grids.inv2xs);
    invert(qtk__grid_iq2s, 1024, 6561, grids.inv2s);
    invert(qtk__grid_iq1s, 2048, 6561, grids.inv1s);
    invert(qtk__grid_iq3xxs, 256, 4096, grids.inv3xxs);
    invert(qtk__grid_iq3s, 512, 4096, grids.inv3s);
}

const qtk__lattice_grids *qtk__lattice(void) {
    pthread_once(&grids_once, build);
    return &grids;
}

/* ---- pieces ---- */

/* 7 stored sign bits -> the 8 signs, the 8th making their count even (ggml's ksigns_iq2xs) */
static unsigned signs8(unsigned bits) {
    unsigned s7 = bits & 127u, p = s7 ^ (s7 >> 4);
    p ^= p >> 2;
    p ^= p >> 1;
    return s7 | (p & 1u) << 7;
}

/* n coordinates: magnitudes g, signs from the bits of `signs`, into q */
static void put_signed(const int8_t *g, unsigned n, unsigned signs, int8_t *q) {
    for (unsigned j = 0; j < n; j++) q[j] = (int8_t)((signs >> j) & 1u ? -g[j] : g[j]);
}

/* The index of the grid point whose coordinates are |q[0..width)| (or -1), and their signs:
 * the levels' digits make the point's code, which inv maps to its index. */
static int find(const int16_t *inv, const int8_t *lev, unsigned base, unsigned width, const int8_t *q, unsigned *signs) {
    unsigned s = 0, code = 0, m = 1;
    bool on = true;
    for (unsigned j = 0; j < width; j++, m *= base) {
        int a = q[j] < 0 ? -q[j] : q[j];
        unsigned k = 0;
        while (k < base && lev[k] != a) k++;
        on &= k < base;
        code += (k < base ? k : 0) * m;
        s |= (q[j] < 0 ? 1u : 0u) << j;
    }
    *signs = s;
    return on ? inv[code] : -1;
}

/* IQ1: the grid point (coordinates -1 0 1) and delta sign of 8 values q = 8 (g + delta) */
static int find_iq1(const int8_t *q, bool *neg) {
    int8_t g[8];
    *neg = false;
    for (unsigned j = 0; j < 8; j++) {
        int r = ((q[j] % 8) + 8) % 8; /* 1: delta +1/8, 7: delta -1/8 */
        if (r != 1 && r != 7) return -1;
        if (r == 7) *neg = true;
        g[j] = (int8_t)((q[j] - (r == 1 ? 1 : -1)) / 8);
    }
    for (unsigned j = 0; j < 8; j++)
        if ((((q[j] % 8) + 8) % 8 == 7) != *neg) return -1;
    unsigned code = 0;
    for (unsigned j = 8; j-- > 0;) {
        if (g[j] < -1 || g[j] > 1) return -1;
        code = code * 3 + (unsigned)(g[j] + 1);
    }
    return qtk__lattice()->inv1s[code];
}

static void iq1_put(const int8_t *g, bool neg, int8_t *q) {
    for (unsigned j = 0; j < 8; j++) q[j] = (int8_t)(8 * g[j] + (neg ? -1 : 1));
}

/* ---- unpack ---- */

void qtk__gb_lattice_unpack(const qtk__gb_fmt *F, const uint8_t *b, qtk__gb_unpacked *u) {
    const qtk__lattice_grids *G = qtk__lattice();
    memset(u->sc, 0, sizeof u->sc);
    memset(u->mn, 0, sizeof u->mn);
    u->m = 0;
    u->d = qtk__gb_lattice_d(F->f, b);
    int8_t *q = u->q;
    switch (F->f) {
    case QTK__GF_IQ2_XXS:
        for (unsigned k = 0; k < 8; k++) { /* 8 bytes per 32: 4 indices, then 4 x 7 sign bits and the scale */
            const uint8_t *p = b + 2 + 8 * k;
            uint32_t a = qtk__ld32(p + 4);
            u->sc[k] = (int8_t)(2 * (a >> 28) + 1);
            for (unsigned l = 0; l < 4; l++) put_signed(G->iq2xxs[p[l]], 8, signs8(a >> (7 * l)), q + 32 * k + 8 * l);
        }
        break;
    case QTK__GF_IQ2_XS:
        for (unsigned k = 0; k < 8; k++) {
            unsigned s = b[66 + k];
            u->sc[2 * k] = (int8_t)(2 * (s & 15u) + 1), u->sc[2 * k + 1] = (int8_t)(2 * (s >> 4) + 1);
            for (unsigned l = 0; l < 4; l++) {
                unsigned w = qtk__ld16(b + 2 + 8 * k + 2 * l);
                put_signed(G->iq2xs[w & 511u], 8, signs8(w >> 9), q + 32 * k + 8 * l);
            }
        }
        break;
    case QTK__GF_IQ2_S:
        for (unsigned k = 0; k < 8; k++) {
            unsigned s = b[74 + k], h = b[66 + k];
            u->sc[2 * k] = (int8_t)(2 * (s & 15u) + 1), u->sc[2 * k + 1] = (int8_t)(2 * (s >> 4) + 1);
            for (unsigned l = 0; l < 4; l++) {
                unsigned idx = b[2 + 4 * k + l] | ((h >> (2 * l)) & 3u) << 8;
                put_signed(G->iq2s[idx], 8, b[34 + 4 * k + l], q + 32 * k + 8 * l);
            }
        }
        break;
    case QTK__GF_IQ3_XXS:
        for (unsigned k = 0; k < 8; k++) {
            uint32_t a = qtk__ld32(b + 66 + 4 * k);
            u->sc[k] = (int8_t)(2 * (a >> 28) + 1);
            for (unsigned l = 0; l < 4; l++) {
                unsigned sg = signs8(a >> (7 * l));
                int8_t *o = q + 32 * k + 8 * l;
                put_signed(G->iq3xxs[b[2 + 8 * k + 2 * l]], 4, sg, o);
                put_signed(G->iq3xxs[b[2 + 8 * k + 2 * l + 1]], 4, sg >> 4, o + 4);
            }
        }
        break;
    case QTK__GF_IQ3_S:
        for (unsigned k = 0; k < 8; k++) {
            unsigned h = b[66 + k];
            u->sc[k] = (int8_t)(2 * ((b[106 + k / 2] >> (4 * (k % 2))) & 15u) + 1);
            for (unsigned l = 0; l < 4; l++) {
                unsigned sg = b[74 + 4 * k + l];
                unsigned i1 = b[2 + 8 * k + 2 * l] | ((h >> (2 * l)) & 1u) << 8;
                unsigned i2 = b[2 + 8 * k + 2 * l + 1] | ((h >> (2 * l + 1)) & 1u) << 8;
                int8_t *o = q + 32 * k + 8 * l;
                put_signed(G->iq3s[i1], 4, sg, o);
                put_signed(G->iq3s[i2], 4, sg >> 4, o + 4);
            }
        }
        break;
    case QTK__GF_IQ1_S:
        for (unsigned k = 0; k < 8; k++) {
            unsigned h = qtk__ld16(b + 34 + 2 * k);
            u->sc[k] = (int8_t)(2 * ((h >> 12) & 7u) + 1);
            for (unsigned l = 0; l < 4; l++)
                iq1_put(G->iq1s[b[2 + 4 * k + l] | ((h >> (3 * l)) & 7u) << 8], (h & 0x8000u) != 0, q + 32 * k + 8 * l);
        }
        break;
    default: /* IQ1_M: qs[32] qh[16] scales[8]; per 32: 4 index bytes, 2 qh bytes, 2 x 3-bit scales */
        for (unsigned k = 0; k < 8; k++) {
            unsigned s = qtk__ld16(b + 48 + 2 * (k / 2)) >> (6 * (k % 2));
            u->sc[2 * k] = (int8_t)(2 * (s & 7u) + 1), u->sc[2 * k + 1] = (int8_t)(2 * ((s >> 3) & 7u) + 1);
            for (unsigned l = 0; l < 4; l++) {
                unsigned h = b[32 + 2 * k + l / 2] >> (4 * (l % 2)); /* 3 index bits, then the delta sign */
                iq1_put(G->iq1s[b[4 * k + l] | (h & 7u) << 8], (h & 8u) != 0, q + 32 * k + 8 * l);
            }
        }
        break;
    }
}

/* ---- pack ---- */

static unsigned sub_s(int sc) { return sc >= 1 && sc <= 31 ? (unsigned)(sc - 1) / 2 : 0u; } /* sc = 2s + 1 */

bool qtk__gb_lattice_pack(const qtk__gb_fmt *F, const qtk__gb_unpacked *u, uint8_t *b) {
    const qtk__lattice_grids *G = qtk__lattice();
    const int8_t *q = u->q;
    bool ok = true;
    memset(b, 0, F->bytes);
    for (unsigned g = 0; g < F->groups; g++) {
        int sc = u->sc[g], top = F->f == QTK__GF_IQ1_S || F->f == QTK__GF_IQ1_M ? 15 : 31;
        if (sc < 1 || sc > top || sc % 2 == 0) ok = false;
    }
    if (F->f != QTK__GF_IQ1_M) qtk__st16(b, u->d);
    unsigned sg, sg2;
    int i, i2;
    switch (F->f) {
    case QTK__GF_IQ2_XXS:
        for (unsigned k = 0; k < 8; k++) {
            uint8_t *p = b + 2 + 8 * k;
            uint32_t a = sub_s(u->sc[k]) << 28;
            for (unsigned l = 0; l < 4; l++) {
                i = find(G->inv2xxs, l2, 3, 8, q + 32 * k + 8 * l, &sg);
                ok &= i >= 0 && signs8(sg) == sg;
                p[l] = (uint8_t)(i < 0 ? 0 : i);
                a |= (uint32_t)(sg & 127u) << (7 * l);
            }
            qtk__st32(p + 4, a);
        }
        break;
    case QTK__GF_IQ2_XS:
    case QTK__GF_IQ2_S: {
        const bool xs = F->f == QTK__GF_IQ2_XS;
        for (unsigned k = 0; k < 8; k++) {
            b[(xs ? 66 : 74) + k] = (uint8_t)(sub_s(u->sc[2 * k]) | sub_s(u->sc[2 * k + 1]) << 4);
            for (unsigned l = 0; l < 4; l++) {
                const int8_t *o = q + 32 * k + 8 * l;
                if (xs) {
                    i = find(G->inv2xs, l2, 3, 8, o, &sg);
                    ok &= i >= 0 && signs8(sg) == sg;
                    qtk__st16(b + 2 + 8 * k + 2 * l, (uint16_t)((i < 0 ? 0u : (unsigned)i) | (sg & 127u) << 9));
                } else {
                    i = find(G->inv2s, l2, 3, 8, o, &sg);
                    ok &= i >= 0;
                    unsigned idx = i < 0 ? 0u : (unsigned)i;
                    b[2 + 4 * k + l] = (uint8_t)idx;
                    b[66 + k] |= (uint8_t)((idx >> 8) << (2 * l));
                    b[34 + 4 * k + l] = (uint8_t)sg;
                }
            }
        }
        break;
    }
    case QTK__GF_IQ3_XXS:
        for (unsigned k = 0; k < 8; k++) {
            uint32_t a = sub_s(u->sc[k]) << 28;
            for (unsigned l = 0; l < 4; l++) {
                const int8_t *o = q + 32 * k + 8 * l;
                i = find(G->inv3xxs, l3xxs, 8, 4, o, &sg);
                i2 = find(G->inv3xxs, l3xxs, 8, 4, o + 4, &sg2);
                sg |= sg2 << 4;
                ok &= i >= 0 && i2 >= 0 && signs8(sg) == sg;
                b[2 + 8 * k + 2 * l] = (uint8_t)(i < 0 ? 0 : i);
                b[2 + 8 * k + 2 * l + 1] = (uint8_t)(i2 < 0 ? 0 : i2);
                a |= (uint32_t)(sg & 127u) << (7 * l);
            }
            qtk__st32(b + 66 + 4 * k, a);
        }
        break;
    case QTK__GF_IQ3_S:
        for (unsigned k = 0; k < 8; k++) {
            b[106 + k / 2] |= (uint8_t)(sub_s(u->sc[k]) << (4 * (k % 2)));
            for (unsigned l = 0; l < 4; l++) {
                const int8_t *o = q + 32 * k + 8 * l;
                i = find(G->inv3s, l3s, 8, 4, o, &sg);
                i2 = find(G->inv3s, l3s, 8, 4, o + 4, &sg2);
                ok &= i >= 0 && i2 >= 0;
                unsigned a1 = i < 0 ? 0u : (unsigned)i, a2 = i2 < 0 ? 0u : (unsigned)i2;
                b[2 + 8 * k + 2 * l] = (uint8_t)a1, b[2 + 8 * k + 2 * l + 1] = (uint8_t)a2;
                b[66 + k] |= (uint8_t)((a1 >> 8) << (2 * l) | (a2 >> 8) << (2 * l + 1));
                b[74 + 4 * k + l] = (uint8_t)(sg | sg2 << 4);
            }
        }
        break;
    case QTK__GF_IQ1_S:
        for (unsigned k = 0; k < 8; k++) {
            unsigned h = sub_s(u->sc[k]) << 12;
            bool neg0 = false;
            for (unsigned l = 0; l < 4; l++) {
                bool neg;
                i = find_iq1(q + 32 * k + 8 * l, &neg);
                if (l == 0) neg0 = neg;
                ok &= i >= 0 && neg == neg0;
                unsigned idx = i < 0 ? 0u : (unsigned)i;
                b[2 + 4 * k + l] = (uint8_t)idx;
                h |= (idx >> 8) << (3 * l);
            }
            qtk__st16(b + 34 + 2 * k, (uint16_t)(h | (neg0 ? 0x8000u : 0u)));
        }
        break;
    default: { /* IQ1_M */
        uint16_t S[4] = {0, 0, 0, 0};
        for (unsigned k = 0; k < 8; k++) {
            S[k / 2] |= (uint16_t)((sub_s(u->sc[2 * k]) | sub_s(u->sc[2 * k + 1]) << 3) << (6 * (k % 2)));
            for (unsigned l = 0; l < 4; l++) {
                bool neg;
                i = find_iq1(q + 32 * k + 8 * l, &neg);
                ok &= i >= 0;
                unsigned idx = i < 0 ? 0u : (unsigned)i;
                b[4 * k + l] = (uint8_t)idx;
                b[32 + 2 * k + l / 2] |= (uint8_t)(((idx >> 8) | (neg ? 8u : 0u)) << (4 * (l % 2)));
            }
        }
        for (unsigned j = 0; j < 4; j++) qtk__st16(b + 48 + 2 * j, (uint16_t)(S[j] | ((u->d >> (4 * j)) & 15u) << 12));
        break;
    }
    }
    return ok;
}
