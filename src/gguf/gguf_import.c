/* gguf_import.c — ggml blocks -> qtk bytes for the types a qtk scheme holds exactly
 * (GGUF.md §2, §3.2-§3.3). Nothing is re-rounded: fields are permuted, re-biased or
 * widened, scales copied as bits, or, for the K-quants, multiplied out (d x sub-scale: an f16
 * times an integer of at most 8 bits, exact in f32, the same product ggml's dequantizer
 * forms). The output layouts are the standard ones of the import schemes on a last dimension
 * that is a multiple of the ggml block: 8-bit fields one per byte in element order; 4-bit
 * fields two per byte, element 2m in the low nibble of byte m; 2-bit fields four per byte,
 * element e at bits 2(e mod 4) of byte e/4; scales in block order. */
#include "gguf/gguf_internal.h"

#include <stdarg.h>
#include <stdio.h>

typedef struct {
    const char *type;
    size_t off;       /* file offset of block 0 */
    uint32_t bytes;   /* per block */
} ictx;

static qtk_status bad_block(const ictx *x, size_t b, const char *fmt, ...) QTK_PRINTF(3, 4);
static qtk_status bad_block(const ictx *x, size_t b, const char *fmt, ...) {
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return qtk__err(QTK_E_VALUE, "%s block %zu (file offset %zu): %s", x->type, b, x->off + b * x->bytes, what);
}

/* An f16 scale must be finite (ggml_validate_row_data's rule; qtk's too). */
static bool f16_finite(uint16_t h) { return (h & 0x7c00u) != 0x7c00u; }

/* 2h 4-bit codes in ggml's split order (code i < h: low nibble of byte i; code h + i: its
 * high nibble) -> h bytes in qtk's order (codes 2m, 2m+1 in byte m, low first), each code
 * XOR x (8 turns Q4_0's offset-8 code into a two's-complement field). */
static void split_to_seq(const uint8_t *q, uint8_t *out, unsigned h, uint8_t x) {
    for (unsigned m = 0; m < h / 2; m++)
        out[m] = (uint8_t)(((q[2 * m] & 15u) ^ x) | (((q[2 * m + 1] & 15u) ^ x) << 4));
    for (unsigned m = h / 2; m < h; m++)
        out[m] = (uint8_t)(((q[2 * m - h] >> 4) ^ x) | (((q[2 * m - h + 1] >> 4) ^ x) << 4));
}

static void put_f32(uint8_t *p, float v) { qtk__st32(p, qtk__f32_bits(v)); }

/* ---- 32-element types with one f16 scale ---- */

/* Q8_0 and Q8_1: fields are the qs bytes; Q8_1's redundant sum s is dropped. */
static qtk_status imp_q8(const ictx *x, const uint8_t *src, size_t nb, uint8_t *v, uint8_t *s, unsigned qs_at) {
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk = src + b * x->bytes;
        uint16_t d = qtk__ld16(blk);
        if (!f16_finite(d)) return bad_block(x, b, "the scale d (f16 0x%04x) is not finite", d);
        memcpy(v + 32 * b, blk + qs_at, 32);
        qtk__st16(s + 2 * b, d);
    }
    return QTK_OK;
}

/* Q4_0 (x = 8: field = code - 8) and IQ4_NL (x = 0: the field is the codebook index). */
static qtk_status imp_q4(const ictx *x, const uint8_t *src, size_t nb, uint8_t *v, uint8_t *s, uint8_t xr) {
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk = src + b * x->bytes;
        uint16_t d = qtk__ld16(blk);
        if (!f16_finite(d)) return bad_block(x, b, "the scale d (f16 0x%04x) is not finite", d);
        split_to_seq(blk + 2, v + 16 * b, 16, xr);
        qtk__st16(s + 2 * b, d);
    }
    return QTK_OK;
}

/* MXFP4: the E8M0 byte is qtk's ue8m0 scale, the E2M1 codes are qtk's (only permuted).
 * e = 0xFF is NaN in OCP and qtk (ggml's validator rejects it too). */
static qtk_status imp_mxfp4(const ictx *x, const uint8_t *src, size_t nb, uint8_t *v, uint8_t *s) {
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk = src + b * x->bytes;
        if (blk[0] == 0xff) return bad_block(x, b, "the E8M0 exponent is 0x%02x (NaN)", blk[0]);
        s[b] = blk[0];
        split_to_seq(blk + 1, v + 16 * b, 16, 0);
    }
    return QTK_OK;
}

/* NVFP4: four UE4M3 scales per 64 elements, then per 16-element sub-block 8 bytes of codes in
 * split order (h = 8). ggml ignores bit 7 of a scale and reads exactly 0x7F as 0 (GGUF.md
 * §2.9): 0x7F becomes 0x00, 0x80-0xFE lose bit 7, and 0xFF (ggml: 480, above UE4M3's 448)
 * cannot be held. */
static qtk_status imp_nvfp4(const ictx *x, const uint8_t *src, size_t nb, uint8_t *v, uint8_t *s) {
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk = src + b * x->bytes;
        for (unsigned k = 0; k < 4; k++) {
            uint8_t c = blk[k];
            if (c == 0xff) return bad_block(x, b, "a UE4M3 scale byte is 0x%02x, which ggml reads as 480 (above 448)", c);
            s[4 * b + k] = c == 0x7f ? 0 : (uint8_t)(c & 0x7fu);
            split_to_seq(blk + 4 + 8 * k, v + 32 * b + 8 * k, 8, 0);
        }
    }
    return QTK_OK;
}

/* ---- ternary and 2-bit types (q2s fields: -1 = 11, 0 = 00, +1 = 01) ---- */

/* ggml's codes 0, 1, 2 mean -1, 0, +1: the q2s field is (c + 3) & 3. */
static unsigned code_to_q2s(unsigned c) { return (c + 3u) & 3u; }

/* Q2_0: codes already sit in qtk's order (element j at bits 2(j mod 4) of byte j/4). Code 3
 * (+2), which ggml's quantizer never writes, has no q2s field. */
static qtk_status imp_q2_0(const ictx *x, const uint8_t *src, size_t nb, uint8_t *v, uint8_t *s) {
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk = src + b * x->bytes;
        uint16_t d = qtk__ld16(blk);
        if (!f16_finite(d)) return bad_block(x, b, "the scale d (f16 0x%04x) is not finite", d);
        for (unsigned k = 0; k < 16; k++) {
            unsigned q = blk[2 + k], o = 0;
            if (q & (q >> 1) & 0x55u)
                return bad_block(x, b, "holds code 3 (+2, byte 0x%02x), which q2s cannot hold and ggml never writes", q);
            for (unsigned l = 0; l < 4; l++) o |= code_to_q2s((q >> (2 * l)) & 3u) << (2 * l);
            v[16 * b + k] = (uint8_t)o;
        }
        qtk__st16(s + 2 * b, d);
    }
    return QTK_OK;
}

/* TQ2_0: element e = 128h + 32l + m has code (qs[32h + m] >> 2l) & 3 (bit planes). */
static qtk_status imp_tq2_0(const ictx *x, const uint8_t *src, size_t nb, uint8_t *v, uint8_t *s) {
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk = src + b * x->bytes;
        uint16_t d = qtk__ld16(blk + 64);
        if (!f16_finite(d)) return bad_block(x, b, "the scale d (f16 0x%04x) is not finite", d);
        uint8_t *o = v + 64 * b;
        memset(o, 0, 64);
        for (unsigned i = 0; i < 64; i++) {
            unsigned q = blk[i];
            if (q & (q >> 1) & 0x55u)
                return bad_block(x, b, "holds code 3 (+2, byte 0x%02x), which q2s cannot hold and ggml never writes", q);
            unsigned h = i / 32, m = i % 32;
            for (unsigned l = 0; l < 4; l++) {
                unsigned e = 128 * h + 32 * l + m;
                o[e / 4] |= (uint8_t)(code_to_q2s((q >> (2 * l)) & 3u) << (2 * (e % 4)));
            }
        }
        qtk__st16(s + 4 * b, d);
        qtk__st16(s + 4 * b + 2, d); /* block=128: the 256-block's scale twice */
    }
    return QTK_OK;
}

/* TQ1_0: 5 trits per qs byte, 4 per qh byte, as fixed-point base-3 fractions: trit i of byte
 * q is ((q x 3^i mod 256) x 3) >> 8 (GGUF.md §2.12). Every byte yields trits 0..2. */
static unsigned trit(unsigned q, unsigned i) {
    static const unsigned pow3[5] = {1, 3, 9, 27, 81};
    return (((q * pow3[i]) & 0xffu) * 3u) >> 8;
}

static void put_q2(uint8_t *o, unsigned e, unsigned field) { o[e / 4] |= (uint8_t)(field << (2 * (e % 4))); }

static qtk_status imp_tq1_0(const ictx *x, const uint8_t *src, size_t nb, uint8_t *v, uint8_t *s) {
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk = src + b * x->bytes;
        uint16_t d = qtk__ld16(blk + 52);
        if (!f16_finite(d)) return bad_block(x, b, "the scale d (f16 0x%04x) is not finite", d);
        uint8_t *o = v + 64 * b;
        memset(o, 0, 64);
        for (unsigned m = 0; m < 32; m++)
            for (unsigned i = 0; i < 5; i++) put_q2(o, m + 32 * i, code_to_q2s(trit(blk[m], i)));
        for (unsigned m = 0; m < 16; m++)
            for (unsigned i = 0; i < 5; i++) put_q2(o, 160 + m + 16 * i, code_to_q2s(trit(blk[32 + m], i)));
        for (unsigned j = 0; j < 4; j++)
            for (unsigned i = 0; i < 4; i++) put_q2(o, 240 + j + 4 * i, code_to_q2s(trit(blk[48 + j], i)));
        qtk__st16(s + 4 * b, d);
        qtk__st16(s + 4 * b + 2, d);
    }
    return QTK_OK;
}

/* Q1_0: bit j of the block (LSB first) is +d when set, -d when clear: fields 01 and 11. */
static qtk_status imp_q1_0(const ictx *x, const uint8_t *src, size_t nb, uint8_t *v, uint8_t *s) {
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk = src + b * x->bytes;
        uint16_t d = qtk__ld16(blk);
        if (!f16_finite(d)) return bad_block(x, b, "the scale d (f16 0x%04x) is not finite", d);
        for (unsigned k = 0; k < 16; k++) {
            unsigned q = blk[2 + k];
            for (unsigned half = 0; half < 2; half++) {
                unsigned o = 0;
                for (unsigned l = 0; l < 4; l++) o |= (((q >> (4 * half + l)) & 1u) ? 1u : 3u) << (2 * l);
                v[32 * b + 2 * k + half] = (uint8_t)o;
            }
        }
        qtk__st16(s + 2 * b, d);
    }
    return QTK_OK;
}

/* ---- K-quants and IQ4_XS: f32 sub-block scales d x sc ---- */

/* Q8_K: an f32 d for 256 int8 fields; bsums (redundant sums) are dropped. */
static qtk_status imp_q8_k(const ictx *x, const uint8_t *src, size_t nb, uint8_t *v, uint8_t *s) {
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk = src + b * x->bytes;
        uint32_t d = qtk__ld32(blk);
        if ((d & 0x7f800000u) == 0x7f800000u) return bad_block(x, b, "the scale d (f32 0x%08x) is not finite", d);
        memcpy(v + 256 * b, blk + 4, 256);
        qtk__st32(s + 8 * b, d);
        qtk__st32(s + 8 * b + 4, d);
    }
    return QTK_OK;
}

/* IQ4_XS: per 32 elements a 6-bit scale ls (4 low bits in scales_l, 2 high in scales_h), value
 * (d x (ls - 32)) x K[index]. */
static qtk_status imp_iq4_xs(const ictx *x, const uint8_t *src, size_t nb, uint8_t *v, uint8_t *s) {
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *blk = src + b * x->bytes;
        uint16_t dh = qtk__ld16(blk);
        if (!f16_finite(dh)) return bad_block(x, b, "the scale d (f16 0x%04x) is not finite", dh);
        float d = qtk__gguf_f16(dh);
        unsigned sh = qtk__ld16(blk + 2);
        for (unsigned k = 0; k < 8; k++) {
            unsigned ls = ((blk[4 + k / 2] >> (4 * (k % 2))) & 15u) | ((sh >> (2 * k)) & 3u) << 4;
            put_f32(s + 4 * (8 * b + k), d * (float)((int)ls - 32));
            split_to_seq(blk + 8 + 16 * k, v + 128 * b + 16 * k, 16, 0);
        }
    }
    return QTK_OK;
}

qtk_status qtk__gguf_import(uint32_t type, const uint8_t *src, size_t nb, const qtk_layout *L, uint8_t *dst,
                            size_t file_off) {
    const gguf_type *ty = qtk__gguf_type(type);
    if (!ty || ty->kind != GK_EXACT) return qtk__err(QTK_E_INTERNAL, "ggml type %u is not imported exactly", type);
    ictx x = {ty->name, file_off, ty->bytes};
    uint8_t *v = dst, *s = dst + L->scales_offset;
    switch (type) {
    case 2: return imp_q4(&x, src, nb, v, s, 8);
    case 8: return imp_q8(&x, src, nb, v, s, 2);
    case 9: return imp_q8(&x, src, nb, v, s, 4);
    case 15: return imp_q8_k(&x, src, nb, v, s);
    case 20: return imp_q4(&x, src, nb, v, s, 0);
    case 23: return imp_iq4_xs(&x, src, nb, v, s);
    case 34: return imp_tq1_0(&x, src, nb, v, s);
    case 35: return imp_tq2_0(&x, src, nb, v, s);
    case 39: return imp_mxfp4(&x, src, nb, v, s);
    case 40: return imp_nvfp4(&x, src, nb, v, s);
    case 41: return imp_q1_0(&x, src, nb, v, s);
    case 42: return imp_q2_0(&x, src, nb, v, s);
    default: return qtk__err(QTK_E_INTERNAL, "no importer for ggml type %s", ty->name);
    }
}
