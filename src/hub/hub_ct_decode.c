/* hub_ct_decode.c — compressed-tensors' stored bytes to qtk's (and its reference
 * dequantization where qtk's scheme is only within an ulp of it): the divisor global scale,
 * offset-binary packed ints, and the tensors with no qtk form (zero points, activation order),
 * dequantized to F32. The reader that picks them is hub_ct.c. */
#include "hub/hub_ct.h"

#include <stdio.h>

/* ---- the divisor global scale ---- */

static float step_ulps(float x, int d) {
    uint32_t b = qtk__f32_bits(x);
    return qtk__bits_f32(d >= 0 ? b + (uint32_t)d : b - (uint32_t)(-d));
}

static bool g_reproduces(float g, float G, const bool present[128]) {
    if (!(g > 0.0f) || !qtk__isfinite(g)) return false;
    for (unsigned c = 1; c < 127; c++) {
        if (!present[c]) continue;
        float v = qtk_fmt_decode(QTK_DTYPE_E4M3, c);
        volatile float a = v * g, b = v / G; /* each one f32 operation, as both references do */
        if (qtk__f32_bits(a) != qtk__f32_bits(b)) return false;
    }
    return true;
}

static const int search[] = {0, 1, -1, 2, -2, 3, -3, 4, -4};

float hub_ct_global_from_divisor(float G, const bool present[128], bool *exact) {
    float g0 = 1.0f / G;
    for (size_t i = 0; i < sizeof search / sizeof search[0]; i++) {
        float g = step_ulps(g0, search[i]);
        if (g_reproduces(g, G, present)) {
            *exact = true;
            return g;
        }
    }
    *exact = false;
    return g0;
}

float hub_ct_divisor_from_global(float g, const bool present[128], bool *exact) {
    float G0 = 1.0f / g;
    for (size_t i = 0; i < sizeof search / sizeof search[0]; i++) {
        float G = step_ulps(G0, search[i]);
        bool ex;
        if (!(G > 0.0f) || !qtk__isfinite(G)) continue;
        float back = hub_ct_global_from_divisor(G, present, &ex);
        if (ex && qtk__f32_bits(back) == qtk__f32_bits(g)) {
            *exact = true;
            return G;
        }
    }
    *exact = false;
    return G0;
}

/* parts: packed, scale, global */
qtk_status hub_ct_decode_nvfp4(qtk__hub *h, const char *name, const hub_item *it, const uint8_t *const *part, uint8_t *out) {
    size_t nv = h->raw[it->raw[0]].t->nbytes, ns = h->raw[it->raw[1]].t->nbytes;
    float G = qtk__bits_f32(qtk__ld32(part[2]));
    if (!(G > 0.0f) || !qtk__isfinite(G))
        return qtk__err(QTK_E_VALUE, "tensor '%s': weight_global_scale is %g; a divisor must be finite and positive", name,
                        (double)G);
    bool present[128] = {false};
    for (size_t i = 0; i < ns; i++) present[part[1][i] & 0x7F] = true;
    bool exact;
    float g = hub_ct_global_from_divisor(G, present, &exact);
    memcpy(out, part[0], nv);
    memcpy(out + nv, part[1], ns);
    qtk__st32(out + nv + ns, qtk__f32_bits(g));
    if (!exact)
        return hub_notice(h, name, "no f32 global scale g reproduces block scale / weight_global_scale for every block "
                          "scale: its nvfp4 tensor has g = 1/G (values within one ulp of the effective scale); "
                          "dequantizing it with --scheme none uses compressed-tensors' s / G");
    return QTK_OK;
}

/* The reference: fp4 x RN32(s / G), when no g gives exactly that (else qtk's is the same). */
qtk_status hub_ct_deq_nvfp4(const qtk__hub *h, const hub_item *it, const qtk_ckpt_tensor *t, const uint8_t *bytes,
                            qtk_dtype dtype, void *out, bool *done) {
    const qtk_ckpt_tensor *pt = h->raw[it->raw[0]].t, *stt = h->raw[it->raw[1]].t;
    float G = qtk__bits_f32(qtk__ld32(hub_bytes(h, &h->raw[it->raw[2]])));
    const uint8_t *scales = bytes + pt->nbytes;
    bool present[128] = {false}, exact;
    for (size_t i = 0; i < stt->nbytes; i++) present[scales[i] & 0x7F] = true;
    hub_ct_global_from_divisor(G, present, &exact);
    if (exact) return QTK_OK; /* qtk's g reproduces it: the fast path gives these values */
    size_t K = t->shape[t->rank - 1], rows = K ? t->numel / K : 0, kb = (K + 1) / 2, kg = (K + 15) / 16;
    float eff[128];
    for (unsigned c = 0; c < 128; c++) {
        volatile float q = qtk_fmt_decode(QTK_DTYPE_E4M3, c) / G; /* one f32 division, as the reference */
        eff[c] = q;
    }
    for (size_t r = 0; r < rows; r++)
        for (size_t k = 0; k < K; k++) {
            unsigned code = (bytes[r * kb + k / 2] >> (4 * (k & 1))) & 15;
            float v = qtk_fmt_decode(QTK_DTYPE_E2M1, code) * eff[scales[r * kg + k / 16] & 0x7F];
            size_t j = r * K + k;
            if (dtype == QTK_DTYPE_F32) ((float *)out)[j] = v;
            else ((uint16_t *)out)[j] = (uint16_t)qtk_fmt_encode(dtype, v);
        }
    *done = true;
    return QTK_OK;
}

/* ---- pack-quantized ints: offset binary -> two's complement ---- */


qtk_status hub_ct_decode_pack(qtk__hub *h, const char *name, const hub_item *it, const uint8_t *const *part, uint8_t *out) {
    (void)name;
    const hub_ct_pack_param *p = it->param;
    unsigned fpw = 32 / p->bits;
    /* flipping each field's top bit maps v + 2^(b-1) to v & mask */
    uint32_t flip = p->bits == 4 ? 0x88888888u : 0x80808080u;
    size_t used = p->cols % fpw; /* fields in a row's last word, 0 = all */
    uint32_t keep = used ? (uint32_t)((1ull << (used * p->bits)) - 1) : 0xFFFFFFFFu;
    for (size_t r = 0; r < p->rows; r++)
        for (size_t w = 0; w < p->wpr; w++) {
            size_t at = 4 * (r * p->wpr + w);
            uint32_t v = qtk__ld32(part[0] + at) ^ flip;
            if (w == p->wpr - 1) v &= keep; /* padding fields read 0 in qtk */
            qtk__st32(out + at, v);
        }
    size_t nv = h->raw[it->raw[0]].t->nbytes, ns = h->raw[it->raw[1]].t->nbytes;
    memcpy(out + nv, part[1], ns);
    return QTK_OK;
}

/* ---- zero points: offset-binary codes are qtk's unsigned fields ---- */

qtk_status hub_ct_decode_zp(qtk__hub *h, const char *name, const hub_item *it, const uint8_t *const *part, uint8_t *out) {
    (void)name;
    const hub_ct_zp_param *p = it->param;
    size_t nv = h->raw[it->raw[0]].t->nbytes, ns = h->raw[it->raw[1]].t->nbytes;
    if (p->packed) {
        unsigned fpw = 32 / p->bits;
        size_t used = p->K % fpw;
        uint32_t keep = used ? (uint32_t)((1ull << (used * p->bits)) - 1) : 0xFFFFFFFFu;
        for (size_t r = 0; r < p->O; r++)
            for (size_t w = 0; w < p->wpr; w++) {
                size_t at = 4 * (r * p->wpr + w);
                uint32_t v = qtk__ld32(part[0] + at);
                qtk__st32(out + at, w == p->wpr - 1 ? v & keep : v); /* padding fields read 0 in qtk */
            }
    } else {
        for (size_t i = 0; i < nv; i++) out[i] = part[0][i] ^ 0x80u; /* two's complement -> offset binary */
    }
    memcpy(out + nv, part[1], ns);
    uint8_t *z = out + nv + ns;
    for (size_t o = 0; o < p->O; o++)
        for (size_t g = 0; g < p->gcols; g++) {
            size_t i = o * p->gcols + g;
            if (p->packed) {
                unsigned fpw = 32 / p->bits;
                uint32_t word = qtk__ld32(part[2] + 4 * ((o / fpw) * p->gcols + g));
                z[i] = (uint8_t)((word >> (p->bits * (o % fpw))) & ((1u << p->bits) - 1u));
            } else {
                z[i] = part[2][i] ^ 0x80u;
            }
        }
    return QTK_OK;
}

/* ---- tensors with no qtk form: zero points of other strategies, activation order ---- */


static int32_t field(const uint8_t *words, size_t word, unsigned i, unsigned bits) {
    uint32_t v = qtk__ld32(words + 4 * word);
    return (int32_t)((v >> (i * bits)) & ((1u << bits) - 1)) - (int32_t)(1u << (bits - 1));
}

qtk_status hub_ct_decode_deq(qtk__hub *h, const char *name, const hub_item *it, const uint8_t *const *part, uint8_t *out) {
    (void)h;
    const hub_ct_deq_param *p = it->param;
    unsigned fpw = 32 / p->bits, ssz = qtk_elem_bits(p->scale_elem) / 8;
    for (size_t o = 0; o < p->O; o++)
        for (size_t k = 0; k < p->K; k++) {
            int32_t q = p->packed ? field(part[0], o * p->wpr + k / fpw, (unsigned)(k % fpw), p->bits)
                                  : (int8_t)part[0][o * p->K + k];
            size_t gc = 0, gr = 0;
            if (p->strategy == CT_CHANNEL) gr = o;
            else if (p->strategy == CT_GROUP) {
                gr = o;
                gc = p->gidx_part >= 0 ? (size_t)(int32_t)qtk__ld32(part[p->gidx_part] + 4 * k) : k / p->G;
                if (gc >= p->gcols)
                    return qtk__err(QTK_E_VALUE, "tensor '%s': weight_g_idx[%zu] = %zu is not a group (0..%zu)", name, k, gc,
                                    p->gcols - 1);
            } else if (p->strategy == CT_BLOCK) gr = o / p->bh, gc = k / p->bw;
            size_t gi = gr * p->gcols + gc;
            int32_t z = 0;
            if (p->zp_part >= 0) {
                if (p->zp_packed) z = field(part[p->zp_part], (gr / fpw) * p->gcols + gc, (unsigned)(gr % fpw), p->bits);
                else z = (int8_t)part[p->zp_part][gi];
            }
            float s = hub_scale_value(p->scale_elem, part[1] + ssz * gi);
            /* (q - z) has at most 9 bits and s at most 24: the product is exact in f32 */
            float v = (float)(q - z) * s;
            qtk__st32(out + 4 * (o * p->K + k), qtk__f32_bits(v));
        }
    return QTK_OK;
}
