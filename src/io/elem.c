/* elem.c — element types of raw checkpoint tensors: sizes and decoding to f32. */
#include "io/checkpoint.h"

#include "common/internal.h"
#include "numfmt/scalar.h"

#include <strings.h>

typedef struct {
    const char *name;
    unsigned bits;
    bool is_float; /* decodable by qtk__elem_to_f32 */
} elem_info;

static const elem_info elems[QTK_ELEM_COUNT_] = {
    [QTK_ELEM_NONE] = {"none", 0, false},
    [QTK_ELEM_F64] = {"F64", 64, true},
    [QTK_ELEM_F32] = {"F32", 32, true},
    [QTK_ELEM_FLEX32] = {"Flex32", 32, true},
    [QTK_ELEM_F16] = {"F16", 16, true},
    [QTK_ELEM_BF16] = {"BF16", 16, true},
    [QTK_ELEM_I64] = {"I64", 64, false},
    [QTK_ELEM_I32] = {"I32", 32, false},
    [QTK_ELEM_I16] = {"I16", 16, false},
    [QTK_ELEM_I8] = {"I8", 8, false},
    [QTK_ELEM_U64] = {"U64", 64, false},
    [QTK_ELEM_U32] = {"U32", 32, false},
    [QTK_ELEM_U16] = {"U16", 16, false},
    [QTK_ELEM_U8] = {"U8", 8, false},
    [QTK_ELEM_BOOL] = {"BOOL", 8, false},
    [QTK_ELEM_BOOL_U8] = {"Bool(U8)", 8, false},
    [QTK_ELEM_BOOL_U32] = {"Bool(U32)", 32, false},
    [QTK_ELEM_C64] = {"C64", 64, false},
    [QTK_ELEM_F8_E4M3] = {"F8_E4M3", 8, true},
    [QTK_ELEM_F8_E5M2] = {"F8_E5M2", 8, true},
    [QTK_ELEM_F8_E8M0] = {"F8_E8M0", 8, true},
    [QTK_ELEM_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 8, false},
    [QTK_ELEM_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 8, false},
    [QTK_ELEM_F4] = {"F4", 4, true},
    [QTK_ELEM_F6_E2M3] = {"F6_E2M3", 6, false},
    [QTK_ELEM_F6_E3M2] = {"F6_E3M2", 6, false},
};

static bool valid(qtk_elem e) { return (unsigned)e > QTK_ELEM_NONE && (unsigned)e < QTK_ELEM_COUNT_; }

const char *qtk_elem_name(qtk_elem e) { return (unsigned)e < QTK_ELEM_COUNT_ ? elems[e].name : "?"; }
unsigned qtk_elem_bits(qtk_elem e) { return valid(e) ? elems[e].bits : 0; }
bool qtk_elem_is_float(qtk_elem e) { return valid(e) && elems[e].is_float; }

qtk_status qtk_elem_parse(const char *name, qtk_elem *out) {
    if (!name || !out) return qtk__err(QTK_E_ARG, "qtk_elem_parse: NULL argument");
    for (int e = QTK_ELEM_NONE + 1; e < QTK_ELEM_COUNT_; e++)
        if (strcasecmp(name, elems[e].name) == 0) {
            *out = (qtk_elem)e;
            return QTK_OK;
        }
    return qtk__err(QTK_E_PARSE, "'%s' is not an element type (F64, F32, F16, BF16, I64, ..., U8, BOOL, F8_E4M3, F4, ...)", name);
}

qtk_status qtk__elem_bytes(qtk_elem e, size_t numel, size_t *out) {
    if (!valid(e)) return qtk__err(QTK_E_ARG, "element type %d is not a qtk_elem", (int)e);
    size_t bits;
    if (!qtk__mul_ok(numel, elems[e].bits, &bits))
        return qtk__err(QTK_E_SHAPE, "%zu %s elements overflow a byte count", numel, elems[e].name);
    if (bits % 8)
        return qtk__err(QTK_E_SHAPE, "%zu %s elements are %zu bits, not a whole number of bytes", numel,
                        elems[e].name, bits);
    *out = bits / 8;
    return QTK_OK;
}

static double ld_f64(const uint8_t *p) {
    uint64_t u = (uint64_t)qtk__ld32(p) | ((uint64_t)qtk__ld32(p + 4) << 32);
    double d;
    memcpy(&d, &u, 8);
    return d;
}

qtk_status qtk__elem_to_f32(qtk_elem e, const uint8_t *src, size_t numel, float *dst) {
    if (!qtk_elem_is_float(e)) return qtk__err(QTK_E_UNSUPPORTED, "%s elements do not decode to f32", qtk_elem_name(e));
    switch (e) {
    case QTK_ELEM_F64:
        for (size_t i = 0; i < numel; i++) dst[i] = (float)ld_f64(src + 8 * i);
        break;
    case QTK_ELEM_F32:
    case QTK_ELEM_FLEX32:
        for (size_t i = 0; i < numel; i++) dst[i] = qtk__bits_f32(qtk__ld32(src + 4 * i));
        break;
    case QTK_ELEM_F16:
        for (size_t i = 0; i < numel; i++) dst[i] = qtk__f16_to_f32(qtk__ld16(src + 2 * i));
        break;
    case QTK_ELEM_BF16:
        for (size_t i = 0; i < numel; i++) dst[i] = qtk__bf16_to_f32(qtk__ld16(src + 2 * i));
        break;
    case QTK_ELEM_F8_E4M3:
        for (size_t i = 0; i < numel; i++) dst[i] = qtk__e4m3_to_f32(src[i]);
        break;
    case QTK_ELEM_F8_E5M2:
        for (size_t i = 0; i < numel; i++) dst[i] = qtk__e5m2_to_f32(src[i]);
        break;
    case QTK_ELEM_F8_E8M0:
        for (size_t i = 0; i < numel; i++) dst[i] = qtk__ue8m0_to_f32(src[i]);
        break;
    case QTK_ELEM_F4: /* flattened: element 2k in the low nibble of byte k */
        for (size_t i = 0; i < numel; i++) dst[i] = qtk__e2m1_to_f32((uint8_t)((src[i / 2] >> (4 * (i % 2))) & 0xfu));
        break;
    default:
        return qtk__err(QTK_E_INTERNAL, "no decoder for %s", qtk_elem_name(e));
    }
    return QTK_OK;
}
