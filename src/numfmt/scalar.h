/* scalar.h — bit-exact conversions between f32 and the small number formats.
 *
 * These inline functions are the reference definitions: the SIMD kernels must give the
 * same bits. Encoding rounds to nearest, ties to even, with integer arithmetic only (no
 * dependence on the floating-point environment). */
#ifndef QTK_SCALAR_H
#define QTK_SCALAR_H

#include "../common/internal.h"

/* Round the magnitude of a non-zero finite f32 (given by its bits without sign) onto a
 * binary format with M explicit mantissa bits and exponent bias `bias`, round to nearest
 * even; returns the magnitude code (exponent field << M | mantissa). Values below half
 * the smallest subnormal give 0. The caller handles overflow (codes beyond the format's
 * largest finite value). */
static inline uint32_t qtk__mf_round(uint32_t abits, int M, int bias) {
    uint32_t ef = abits >> 23;
    if (ef == 0) {
        /* f32 subnormal (< 2^-126): below every target's rounding threshold except bf16
         * and ue8m0, which the callers treat separately. */
        return 0;
    }
    int exp = (int)ef - 127;
    uint32_t mant = (abits & 0x7fffffu) | 0x800000u;
    int emin = 1 - bias;
    int shift = 23 - M;
    if (exp < emin) shift += emin - exp;
    if (shift >= 25) return 0;
    uint32_t r = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) r++;
    if (exp < emin) return r; /* subnormal (r may carry into the smallest normal) */
    return ((uint32_t)(exp + bias) << M) + (r - (1u << M));
}

/* Decode a minifloat magnitude code with M mantissa bits and the given bias (no specials). */
static inline float qtk__mf_decode_mag(uint32_t mag, int M, int bias) {
    uint32_t e = mag >> M, m = mag & ((1u << M) - 1u);
    if (e == 0) {
        /* subnormal: m * 2^(1 - bias - M), exact */
        return (float)m * qtk__bits_f32((uint32_t)(127 + 1 - bias - M) << 23);
    }
    return qtk__bits_f32(((e + 127u - (uint32_t)bias) << 23) | (m << (23 - M)));
}

/* ---- f16 ---- */
static inline float qtk__f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ffu;
    if (e == 0x1f) return qtk__bits_f32(sign | 0x7f800000u | (m << 13));
    float v = qtk__mf_decode_mag(h & 0x7fffu, 10, 15);
    return qtk__bits_f32(qtk__f32_bits(v) | sign);
}
static inline uint16_t qtk__f32_to_f16(float f) {
    uint32_t b = qtk__f32_bits(f);
    uint16_t sign = (uint16_t)((b >> 16) & 0x8000u);
    uint32_t a = b & 0x7fffffffu;
    if (a >= 0x7f800000u) return (uint16_t)(sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (a >= 0x47800000u) return (uint16_t)(sign | 0x7c00u); /* >= 65536: inf */
    uint32_t c = qtk__mf_round(a, 10, 15);
    if (c > 0x7c00u) c = 0x7c00u;
    return (uint16_t)(sign | c);
}

/* ---- bf16 ---- */
static inline float qtk__bf16_to_f32(uint16_t h) { return qtk__bits_f32((uint32_t)h << 16); }
static inline uint16_t qtk__f32_to_bf16(float f) {
    uint32_t b = qtk__f32_bits(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x40u); /* quiet NaN */
    b += 0x7fffu + ((b >> 16) & 1u);
    return (uint16_t)(b >> 16);
}

/* ---- e4m3 (FN), e5m2, e2m1: magnitude helpers; sign is bit 7 (bit 3 for e2m1) ---- */
static inline float qtk__e4m3_to_f32(uint8_t c) {
    uint32_t mag = c & 0x7fu;
    if (mag == 0x7fu) return qtk__bits_f32(((uint32_t)(c & 0x80u) << 24) | 0x7fc00000u);
    float v = qtk__mf_decode_mag(mag, 3, 7);
    return qtk__bits_f32(qtk__f32_bits(v) | ((uint32_t)(c & 0x80u) << 24));
}
static inline float qtk__e5m2_to_f32(uint8_t c) {
    uint32_t mag = c & 0x7fu, sign = (uint32_t)(c & 0x80u) << 24;
    if (mag >= 0x7cu) return qtk__bits_f32(sign | 0x7f800000u | (mag > 0x7cu ? 0x400000u : 0u));
    return qtk__bits_f32(qtk__f32_bits(qtk__mf_decode_mag(mag, 2, 15)) | sign);
}
static inline float qtk__e2m1_to_f32(uint8_t c) {
    float v = qtk__mf_decode_mag(c & 7u, 1, 1);
    return qtk__bits_f32(qtk__f32_bits(v) | ((uint32_t)(c & 8u) << 28));
}

/* Encoders for values already clamped to the format's finite range (what the quantizer
 * feeds them). The sign is kept: -0 and negatives that round to 0 give the -0 code. */
static inline uint8_t qtk__f32_to_e4m3_sat(float f) {
    uint32_t b = qtk__f32_bits(f);
    return (uint8_t)(((b >> 24) & 0x80u) | qtk__mf_round(b & 0x7fffffffu, 3, 7));
}
static inline uint8_t qtk__f32_to_e5m2_sat(float f) {
    uint32_t b = qtk__f32_bits(f);
    return (uint8_t)(((b >> 24) & 0x80u) | qtk__mf_round(b & 0x7fffffffu, 2, 15));
}
static inline uint8_t qtk__f32_to_e2m1_sat(float f) {
    uint32_t b = qtk__f32_bits(f);
    return (uint8_t)(((b >> 28) & 0x8u) | qtk__mf_round(b & 0x7fffffffu, 1, 1));
}

/* ---- ue8m0 ---- */
static inline float qtk__ue8m0_to_f32(uint8_t c) {
    if (c == 0xffu) return qtk__bits_f32(0x7fc00000u);
    if (c == 0) return qtk__bits_f32(0x00400000u); /* 2^-127, an f32 subnormal */
    return qtk__bits_f32((uint32_t)c << 23);
}

/* ---- the integer dtypes (docs/affine.md): range and the integer of a code ---- */
static inline bool qtk__dtype_is_int(qtk_dtype d) { return d >= QTK_DTYPE_U8 && d <= QTK_DTYPE_I6; }
static inline void qtk__int_dtype_range(qtk_dtype d, int *lo, int *hi) {
    switch (d) {
    case QTK_DTYPE_U8: *lo = 0, *hi = 255; break;
    case QTK_DTYPE_U6: *lo = 0, *hi = 63; break;
    case QTK_DTYPE_U4: *lo = 0, *hi = 15; break;
    case QTK_DTYPE_I8: *lo = -128, *hi = 127; break;
    default: *lo = -32, *hi = 31; break; /* i6 */
    }
}
static inline int qtk__int_dtype_value(qtk_dtype d, uint32_t code) {
    switch (d) {
    case QTK_DTYPE_U8: return (int)(code & 0xffu);
    case QTK_DTYPE_U6: return (int)(code & 0x3fu);
    case QTK_DTYPE_U4: return (int)(code & 0xfu);
    case QTK_DTYPE_I8: return (int)(int8_t)(uint8_t)code;
    default: return (int)((code & 0x3fu) ^ 0x20u) - 32; /* i6: two's complement in 6 bits */
    }
}

/* Decode one stored scale of a scale dtype from its little-endian bytes. */
static inline float qtk__scale_load(qtk_dtype d, const uint8_t *p) {
    switch (d) {
    case QTK_DTYPE_F16: return qtk__f16_to_f32(qtk__ld16(p));
    case QTK_DTYPE_BF16: return qtk__bf16_to_f32(qtk__ld16(p));
    case QTK_DTYPE_UE8M0: return qtk__ue8m0_to_f32(p[0]);
    case QTK_DTYPE_UE4M3: return qtk__e4m3_to_f32(p[0]);
    case QTK_DTYPE_U8:
    case QTK_DTYPE_U6:
    case QTK_DTYPE_U4:
    case QTK_DTYPE_I8:
    case QTK_DTYPE_I6: return (float)qtk__int_dtype_value(d, p[0]);
    default: return qtk__bits_f32(qtk__ld32(p));
    }
}

/* Byte size of one stored scale (or offset). */
static inline unsigned qtk__scale_size(qtk_dtype d) {
    switch (d) {
    case QTK_DTYPE_F16:
    case QTK_DTYPE_BF16: return 2;
    case QTK_DTYPE_UE8M0:
    case QTK_DTYPE_UE4M3:
    case QTK_DTYPE_U8:
    case QTK_DTYPE_U6:
    case QTK_DTYPE_U4:
    case QTK_DTYPE_I8:
    case QTK_DTYPE_I6: return 1;
    default: return 4;
    }
}

/* Store a code of the scale dtype little-endian. */
static inline void qtk__scale_store(qtk_dtype d, uint8_t *p, uint32_t code) {
    switch (qtk__scale_size(d)) {
    case 1: p[0] = (uint8_t)code; break;
    case 2: qtk__st16(p, (uint16_t)code); break;
    default: qtk__st32(p, code); break;
    }
}

#endif
