/* scalar.c — the public API over the scalar number formats. */
#include "scalar.h"

#include <math.h>
#include <strings.h>

static const char *const dtype_names[QTK_DTYPE_COUNT_] = {
    "none", "f32", "f16", "bf16", "e4m3", "e5m2", "e2m1", "ue8m0", "ue4m3", "u8", "u6", "u4", "i8", "i6",
};

const char *qtk_dtype_name(qtk_dtype d) {
    return (unsigned)d < QTK_DTYPE_COUNT_ ? dtype_names[d] : "?";
}

qtk_status qtk_dtype_parse(const char *name, qtk_dtype *out) {
    if (!name || !out) return qtk__err(QTK_E_ARG, "qtk_dtype_parse: NULL argument");
    for (int d = QTK_DTYPE_F32; d < QTK_DTYPE_COUNT_; d++) {
        if (strcasecmp(name, dtype_names[d]) == 0) {
            *out = (qtk_dtype)d;
            return QTK_OK;
        }
    }
    return qtk__err(QTK_E_PARSE,
                    "unknown dtype '%s' (expected f32, f16, bf16, e4m3, e5m2, e2m1, ue8m0, ue4m3, u8, u6, u4, i8 or i6)",
                    name);
}

unsigned qtk_dtype_bits(qtk_dtype d) {
    switch (d) {
    case QTK_DTYPE_F32: return 32;
    case QTK_DTYPE_F16:
    case QTK_DTYPE_BF16: return 16;
    case QTK_DTYPE_E4M3:
    case QTK_DTYPE_E5M2:
    case QTK_DTYPE_UE8M0:
    case QTK_DTYPE_UE4M3: return 8;
    case QTK_DTYPE_E2M1: return 4;
    case QTK_DTYPE_U8:
    case QTK_DTYPE_I8: return 8;
    case QTK_DTYPE_U6:
    case QTK_DTYPE_I6: return 6;
    case QTK_DTYPE_U4: return 4;
    default: return 0;
    }
}

float qtk_fmt_decode(qtk_dtype d, uint32_t code) {
    switch (d) {
    case QTK_DTYPE_F32: return qtk__bits_f32(code);
    case QTK_DTYPE_F16: return qtk__f16_to_f32((uint16_t)code);
    case QTK_DTYPE_BF16: return qtk__bf16_to_f32((uint16_t)code);
    case QTK_DTYPE_E4M3: return qtk__e4m3_to_f32((uint8_t)code);
    case QTK_DTYPE_E5M2: return qtk__e5m2_to_f32((uint8_t)code);
    case QTK_DTYPE_E2M1: return qtk__e2m1_to_f32((uint8_t)(code & 0xfu));
    case QTK_DTYPE_UE8M0: return qtk__ue8m0_to_f32((uint8_t)code);
    case QTK_DTYPE_UE4M3: return qtk__e4m3_to_f32((uint8_t)(code & 0x7fu));
    case QTK_DTYPE_U8:
    case QTK_DTYPE_U6:
    case QTK_DTYPE_U4:
    case QTK_DTYPE_I8:
    case QTK_DTYPE_I6: return (float)qtk__int_dtype_value(d, code);
    default: return qtk__bits_f32(0x7fc00000u);
    }
}

float qtk_fmt_max(qtk_dtype d) {
    switch (d) {
    case QTK_DTYPE_F32: return 3.40282347e38f;
    case QTK_DTYPE_F16: return 65504.0f;
    case QTK_DTYPE_BF16: return qtk__bf16_to_f32(0x7f7fu);
    case QTK_DTYPE_E4M3:
    case QTK_DTYPE_UE4M3: return 448.0f;
    case QTK_DTYPE_E5M2: return 57344.0f;
    case QTK_DTYPE_E2M1: return 6.0f;
    case QTK_DTYPE_UE8M0: return qtk__bits_f32(254u << 23); /* 2^127 */
    case QTK_DTYPE_U8:
    case QTK_DTYPE_U6:
    case QTK_DTYPE_U4:
    case QTK_DTYPE_I8:
    case QTK_DTYPE_I6: {
        int lo, hi;
        qtk__int_dtype_range(d, &lo, &hi);
        return (float)hi;
    }
    default: return 0.0f;
    }
}

/* Magnitude code of |x| (non-NaN) in format d, round to nearest even, with each format's
 * overflow behaviour; the sign is applied by the caller. */
static uint32_t encode_mag(qtk_dtype d, uint32_t a) {
    switch (d) {
    case QTK_DTYPE_E4M3:
    case QTK_DTYPE_UE4M3: {
        if (a >= 0x7f800000u) return 0x7fu;
        uint32_t c = a >= 0x44000000u ? 0x7fu : qtk__mf_round(a, 3, 7); /* >= 512 */
        return c > 0x7fu ? 0x7fu : c;
    }
    case QTK_DTYPE_E5M2: {
        if (a >= 0x7f800000u) return 0x7cu;
        uint32_t c = a >= 0x47800000u ? 0x7cu : qtk__mf_round(a, 2, 15); /* >= 65536 */
        return c > 0x7cu ? 0x7cu : c;
    }
    case QTK_DTYPE_E2M1: {
        uint32_t c = a >= 0x41000000u ? 7u : qtk__mf_round(a, 1, 1); /* >= 8 */
        return c > 7u ? 7u : c;
    }
    case QTK_DTYPE_UE8M0: {
        if (a >= 0x7f800000u) return 0xffu;
        if (a < 0x00400000u) return 0; /* below 2^-127: the smallest code */
        if (a < 0x00800000u) {
            /* f32 subnormal in [2^-127, 2^-126): code 0 or 1. A tie (1.5 * 2^-127) goes up,
             * as for every other ue8m0 tie: the significand 1.5 has an odd last bit. */
            return a >= 0x00600000u ? 1u : 0u;
        }
        uint32_t c = qtk__mf_round(a, 0, 127);
        return c > 0xffu ? 0xffu : c;
    }
    default: return 0;
    }
}

/* The code of integer dtype d for x rounded up in magnitude (`up`: the stored-scale rule,
 * the sign kept) or to nearest even, saturated. */
static uint32_t encode_int(qtk_dtype d, float x, bool up) {
    int lo, hi;
    qtk__int_dtype_range(d, &lo, &hi);
    if (x != x) return 0;
    float r = up ? copysignf(ceilf(fabsf(x)), x) : nearbyintf(x);
    int v = r <= (float)lo ? lo : r >= (float)hi ? hi : (int)r;
    return (uint32_t)v & (d == QTK_DTYPE_U4 ? 0xfu : d == QTK_DTYPE_U6 || d == QTK_DTYPE_I6 ? 0x3fu : 0xffu);
}

uint32_t qtk_fmt_encode(qtk_dtype d, float x) {
    uint32_t b = qtk__f32_bits(x), a = b & 0x7fffffffu;
    bool nan = a > 0x7f800000u;
    if (qtk__dtype_is_int(d)) return encode_int(d, x, false);
    switch (d) {
    case QTK_DTYPE_F32: return b;
    case QTK_DTYPE_F16: return qtk__f32_to_f16(x);
    case QTK_DTYPE_BF16: return qtk__f32_to_bf16(x);
    case QTK_DTYPE_E4M3: return ((b >> 24) & 0x80u) | (nan ? 0x7fu : encode_mag(d, a));
    case QTK_DTYPE_E5M2: return ((b >> 24) & 0x80u) | (nan ? 0x7eu : encode_mag(d, a));
    case QTK_DTYPE_E2M1: return ((b >> 28) & 0x8u) | (nan ? 0u : encode_mag(d, a));
    case QTK_DTYPE_UE4M3: return nan ? 0x7fu : encode_mag(d, a);
    case QTK_DTYPE_UE8M0: return nan ? 0xffu : encode_mag(d, a);
    default: return 0;
    }
}

uint32_t qtk_fmt_round_up(qtk_dtype d, float x) {
    uint32_t b = qtk__f32_bits(x), a = b & 0x7fffffffu;
    float ax = qtk__bits_f32(a);
    uint32_t sign = b & 0x80000000u;
    if (qtk__dtype_is_int(d)) return encode_int(d, x, true);
    switch (d) {
    case QTK_DTYPE_F32: return b;
    case QTK_DTYPE_F16: {
        uint32_t c;
        if (ax >= 65504.0f) c = 0x7bffu;
        else {
            c = qtk__f32_to_f16(ax);
            if (qtk__f16_to_f32((uint16_t)c) < ax) c++;
        }
        return c | (sign >> 16);
    }
    case QTK_DTYPE_BF16: {
        uint32_t c;
        if (a >= 0x7f7f0000u) c = 0x7f7fu;
        else {
            c = a >> 16;                 /* truncation is <= |x| */
            if ((a & 0xffffu) != 0) c++; /* any dropped bit: one step up */
        }
        return c | (sign >> 16);
    }
    case QTK_DTYPE_E4M3:
    case QTK_DTYPE_UE4M3:
    case QTK_DTYPE_E5M2:
    case QTK_DTYPE_E2M1:
    case QTK_DTYPE_UE8M0: {
        float mx = qtk_fmt_max(d);
        uint32_t c;
        if (ax >= mx) c = encode_mag(d, qtk__f32_bits(mx));
        else {
            c = encode_mag(d, a);
            float back = d == QTK_DTYPE_UE8M0 ? qtk__ue8m0_to_f32((uint8_t)c)
                         : d == QTK_DTYPE_E5M2 ? qtk__e5m2_to_f32((uint8_t)c)
                         : d == QTK_DTYPE_E2M1 ? qtk__e2m1_to_f32((uint8_t)c)
                                               : qtk__e4m3_to_f32((uint8_t)c);
            if (back < ax) c++;
        }
        if (d == QTK_DTYPE_UE4M3 || d == QTK_DTYPE_UE8M0) return c;
        return c | (d == QTK_DTYPE_E2M1 ? sign >> 28 : sign >> 24);
    }
    default: return 0;
    }
}
