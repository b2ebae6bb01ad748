/* hub_gptq_write.c — writing GPTQ and AWQ (GEMM) checkpoints: which qtk schemes have such a
 * form, their stored tensors (P.qweight, P.qzeros, P.scales, GPTQ's P.g_idx) and the
 * quantization_config. The read side and the packings are hub_gptq.c / hub_gptq.h. */
#include "hub/hub_gptq.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct {
    unsigned bits;
    size_t N, K, G, ng;
    qtk_dtype sdt;
} wshape;

/* A zero-point scheme GPTQ (AWQ) can store: [N, K] u2/u3/u4/u8 (u4), one group size along K,
 * f16 (bf16, f32) scales, u8 zero points, qtk's natural store. */
static bool classify(int kind, const qtk_ckpt_tensor *t, wshape *w) {
    const qtk_scheme *s = &t->scheme;
    memset(w, 0, sizeof *w);
    if (t->rank != 2 || s->mode != QTK_MODE_AFFINE || s->offset != QTK_OFFSET_ZERO || s->offset_dtype != QTK_DTYPE_U8 ||
        s->tensor_dtype != QTK_DTYPE_NONE || s->block_rank != 1 ||
        (s->block_dtype != QTK_DTYPE_F16 && s->block_dtype != QTK_DTYPE_BF16 && s->block_dtype != QTK_DTYPE_F32))
        return false;
    unsigned b = s->value == QTK_VALUE_U2 ? 2 : s->value == QTK_VALUE_U3 ? 3 : s->value == QTK_VALUE_U4 ? 4
               : s->value == QTK_VALUE_U8 ? 8 : 0;
    if (!b || (kind == HUB_AWQ && b != 4)) return false;
    if (b == 3 ? s->store != QTK_STORE_NATIVE : (s->store != QTK_STORE_U32 || s->pack_dim != 0)) return false;
    w->bits = b, w->N = t->shape[0], w->K = t->shape[1], w->sdt = s->block_dtype;
    w->G = s->block[0] == QTK_BLOCK_WHOLE || s->block[0] >= w->K ? w->K : s->block[0];
    w->ng = w->G ? qtk__ceil_div(w->K, w->G) : 0;
    unsigned fpw = 32 / b;
    if (w->K == 0 || w->N == 0 || (b == 3 ? w->K % 32 || w->N % 32 : w->K % fpw || w->N % fpw)) return false;
    return kind == HUB_GPTQ || (w->N % 8 == 0 && w->K % 8 == 0);
}

static size_t value_bytes(const wshape *w) { return w->bits == 3 ? w->N * w->K : w->N * w->K * w->bits / 8; }

/* checkpoint_format of what is written: the source's (same layout), else "gptq" (v1) */
static bool writes_v1(const hub_wctx *wc) {
    const char *f = hub_json_str(wc->src_qcfg, "checkpoint_format");
    if (!f) f = hub_json_str(wc->src_qcfg, "format");
    return !f || strcmp(f, "gptq_v2") != 0;
}

/* ---- encoders ---- */

static qtk_status enc_qweight(hub_wctx *wc, const hub_wpiece *pc, const qtk_ckpt_tensor *t, const uint8_t *bytes,
                              uint8_t *out) {
    int kind = *(const int *)pc->param;
    wshape w;
    classify(kind, t, &w);
    (void)wc;
    memset(out, 0, pc->nbytes);
    if (kind == HUB_AWQ) {
        size_t C = w.N / 8, wpr = w.K / 8;
        for (size_t k0 = 0; k0 < w.K; k0 += 8)
            for (size_t c = 0; c < C; c++) {
                uint32_t o[8], f[8] = {0};
                for (unsigned i = 0; i < 8; i++) o[i] = qtk__ld32(bytes + 4 * ((8 * c + hub_awq_order[i]) * wpr + k0 / 8));
                for (unsigned j = 0; j < 8; j++)
                    for (unsigned i = 0; i < 8; i++) f[j] |= ((o[i] >> (4 * j)) & 15u) << (4 * i);
                for (unsigned j = 0; j < 8; j++) qtk__st32(out + 4 * ((k0 + j) * C + c), f[j]);
            }
    } else if (w.bits == 3) {
        for (size_t n = 0; n < w.N; n++)
            for (size_t k = 0; k < w.K; k++) hub_stream_put(out + 4 * n, 4 * w.N, k, 3, bytes[n * w.K + k] & 7u);
    } else {
        hub_transpose(bytes, w.N, w.K * w.bits / 32, 4, out);
    }
    return QTK_OK;
}

static qtk_status enc_scales(hub_wctx *wc, const hub_wpiece *pc, const qtk_ckpt_tensor *t, const uint8_t *bytes,
                             uint8_t *out) {
    (void)wc;
    int kind = *(const int *)pc->param;
    wshape w;
    classify(kind, t, &w);
    const uint8_t *s = bytes + value_bytes(&w);
    hub_transpose(s, w.N, w.ng, qtk__scale_size(w.sdt), out);
    return QTK_OK;
}

/* v2 zero points (qtk's) to the stored words; v1 subtracts one as GPTQModel does when it saves
 * "gptq": the constant from every word for 2/4/8 bits (borrows crossing fields, undone by the
 * reader's add), (z - 1) & 7 per field for 3 bits. */
static qtk_status enc_qzeros(hub_wctx *wc, const hub_wpiece *pc, const qtk_ckpt_tensor *t, const uint8_t *bytes,
                             uint8_t *out) {
    int kind = *(const int *)pc->param;
    wshape w;
    classify(kind, t, &w);
    const uint8_t *z = bytes + value_bytes(&w) + w.N * w.ng * qtk__scale_size(w.sdt);
    bool v1 = kind == HUB_GPTQ && writes_v1(wc);
    unsigned top = (1u << w.bits) - 1u;
    memset(out, 0, pc->nbytes);
    size_t wpr = kind == HUB_AWQ ? w.N / 8 : w.N * w.bits / 32;
    for (size_t g = 0; g < w.ng; g++)
        for (size_t n = 0; n < w.N; n++) {
            unsigned v = z[n * w.ng + g];
            if (v > top)
                return qtk__err(QTK_E_VALUE, "tensor '%s': the zero point of output %zu, group %zu is %u; %u-bit zero points "
                                "are 0..%u", t->name, n, g, v, w.bits, top);
            if (kind == HUB_AWQ) {
                uint8_t *p = out + 4 * (g * wpr + n / 8);
                qtk__st32(p, qtk__ld32(p) | v << (4 * hub_awq_field[n % 8]));
            } else {
                hub_stream_put(out + 4 * g * wpr, 4, n, w.bits, v1 && w.bits == 3 ? (v - 1u) & 7u : v);
            }
        }
    if (v1 && w.bits != 3) {
        for (size_t i = 0; i < w.ng * wpr; i++) qtk__st32(out + 4 * i, qtk__ld32(out + 4 * i) - hub_gptq_v1_step(w.bits));
    }
    return QTK_OK;
}

/* ---- plan ---- */

static const int kinds[3] = {0, HUB_GPTQ, HUB_AWQ};

static qtk_status plan(int kind, hub_wctx *wc, const qtk_ckpt_tensor *t, hub_wtensor *wt) {
    wshape w;
    char spec[160], sh[128];
    const char *P = hub_module(wc, t->name);
    if (!classify(kind, t, &w) || P == t->name) {
        if (qtk_scheme_format(&t->scheme, spec, sizeof spec, NULL)) spec[0] = '\0';
        return qtk__err(QTK_E_UNSUPPORTED,
                        kind == HUB_AWQ
                            ? "layout awq stores a Linear weight P.weight [N, K] as u4,block=G:f16,zero=u8 (store=u32), N "
                              "and K multiples of 8; this is '%s' on [%s]%s"
                            : "layout gptq stores a Linear weight P.weight [N, K] as u2/u4/u8,block=G:f16,zero=u8 (store=u32) "
                              "or u3,...,store=native, K and N multiples of 32/bits (32 for u3); this is '%s' on [%s]%s",
                        spec, qtk_shape_format(t->shape, t->rank, sh, sizeof sh),
                        P == t->name ? " (and its name does not end in .weight)" : "");
    }
    wt->kind = (int)w.bits;
    size_t R = kind == HUB_AWQ ? w.K : w.K * w.bits / 32, C = kind == HUB_AWQ ? w.N / 8 : w.N;
    size_t zc = kind == HUB_AWQ ? w.N / 8 : w.N * w.bits / 32;
    size_t s1[2] = {R, C}, s2[2] = {w.ng, zc}, s3[2] = {w.ng, w.N}, s4[1] = {w.K};
    hub_wpiece *qw = hub_wpiece_add(wc, wt, t, "", QTK_ELEM_I32, s1, 2, 4 * R * C);
    hub_wpiece *qz = hub_wpiece_add(wc, wt, t, "", QTK_ELEM_I32, s2, 2, 4 * w.ng * zc);
    hub_wpiece *sc = hub_wpiece_add(wc, wt, t, "", hub_scale_elem(w.sdt), s3, 2, w.ng * w.N * qtk__scale_size(w.sdt));
    hub_wpiece *gi = kind == HUB_GPTQ ? hub_wpiece_add(wc, wt, t, "", QTK_ELEM_I32, s4, 1, 4 * w.K) : NULL;
    uint8_t *gc = kind == HUB_GPTQ ? qtk__arena_alloc(wc->arena, 4 * w.K) : NULL;
    size_t pl = strlen(P) + 10;
    char *names[4];
    for (int i = 0; i < 4; i++) names[i] = qtk__arena_alloc(wc->arena, pl);
    if (!qw || !qz || !sc || (kind == HUB_GPTQ && (!gi || !gc)) || !names[0] || !names[1] || !names[2] || !names[3])
        return qtk__err(QTK_E_NOMEM, "out of memory");
    snprintf(names[0], pl, "%s.qweight", P);
    snprintf(names[1], pl, "%s.qzeros", P);
    snprintf(names[2], pl, "%s.scales", P);
    snprintf(names[3], pl, "%s.g_idx", P);
    qw->name = names[0], qz->name = names[1], sc->name = names[2];
    qw->encode = enc_qweight, qz->encode = enc_qzeros, sc->encode = enc_scales;
    qw->param = qz->param = sc->param = &kinds[kind];
    if (gi) {
        gi->name = names[3];
        for (size_t k = 0; k < w.K; k++) qtk__st32(gc + 4 * k, (uint32_t)(k / w.G));
        gi->constant = gc;
    }
    return QTK_OK;
}

qtk_status hub_gptq_plan(hub_wctx *wc, const qtk_ckpt_tensor *t, hub_wtensor *w) { return plan(HUB_GPTQ, wc, t, w); }
qtk_status hub_awq_plan(hub_wctx *wc, const qtk_ckpt_tensor *t, hub_wtensor *w) { return plan(HUB_AWQ, wc, t, w); }

/* ---- config ---- */

/* The one bits / group size of the checkpoint's quantized tensors. */
static qtk_status common_shape(int kind, const hub_wctx *wc, wshape *out) {
    const qtk__desc *d = wc->d;
    bool any = false;
    for (size_t i = 0; i < d->n_tensors; i++) {
        const qtk_ckpt_tensor *t = &d->tensors[i];
        wshape w;
        if (!t->quantized || !classify(kind, t, &w)) continue;
        size_t G = w.G == w.K ? 0 : w.G; /* 0: one group per row (-1 in the config) */
        if (any && (w.bits != out->bits || G != out->G))
            return qtk__err(QTK_E_UNSUPPORTED, "layout %s has one bits and group_size for the checkpoint; '%s' is %u-bit with "
                            "%s %zu, another tensor %u-bit with %zu", kind == HUB_AWQ ? "awq" : "gptq", t->name, w.bits,
                            "group size", G ? G : w.K, out->bits, out->G);
        *out = w;
        out->G = G;
        any = true;
    }
    if (!any)
        return qtk__err(QTK_E_UNSUPPORTED, "layout %s: no tensor is quantized; a checkpoint without one is written with "
                        "--layout qtk", kind == HUB_AWQ ? "awq" : "gptq");
    return QTK_OK;
}

/* modules_to_not_convert: the unquantized matrices, so that a loader replacing every Linear
 * leaves them alone */
static qtk_status not_converted(hub_wctx *wc, json_t *q) {
    if (hub_json(q, "modules_to_not_convert")) return QTK_OK;
    json_t *a = json_array();
    qtk_status st = a ? QTK_OK : qtk__err(QTK_E_NOMEM, "out of memory");
    for (size_t i = 0; i < wc->d->n_tensors && !st; i++) {
        const qtk_ckpt_tensor *t = &wc->d->tensors[i];
        if (!t->quantized && t->rank == 2 && qtk_elem_is_float(t->elem) && qtk__has_suffix(t->name, ".weight"))
            if (json_array_append_new(a, json_string(hub_module(wc, t->name)))) st = qtk__err(QTK_E_NOMEM, "out of memory");
    }
    if (st) {
        json_decref(a);
        return st;
    }
    return hub_jset(q, "modules_to_not_convert", a);
}

static qtk_status set_int(json_t *q, const char *key, long long v) {
    long long have;
    if (hub_json_int(hub_json(q, key), &have) && have == v) return QTK_OK; /* the source's, kept */
    return hub_jset(q, key, json_integer((json_int_t)v));
}

qtk_status hub_gptq_config(hub_wctx *wc, json_t *q, json_t **hfq) {
    (void)hfq;
    wshape w;
    qtk_status st = common_shape(HUB_GPTQ, wc, &w);
    if (!st && !hub_json(q, "quant_method")) st = hub_jset(q, "quant_method", json_string("gptq"));
    if (!st) st = set_int(q, "bits", w.bits);
    if (!st) st = set_int(q, "group_size", w.G ? (long long)w.G : -1);
    /* qtk writes g_idx = k / G: the groups are in input order */
    if (!st && !json_is_false(hub_json(q, "desc_act"))) st = hub_jset(q, "desc_act", json_false());
    /* sym promises zero points of 2^(bits-1) to kernels that skip qzeros; qtk's are as stored */
    if (!st && !hub_json(q, "sym")) st = hub_jset(q, "sym", json_false());
    if (!st && !hub_json(q, "checkpoint_format") && !hub_json(q, "format"))
        st = hub_jset(q, "checkpoint_format", json_string("gptq"));
    return st;
}

qtk_status hub_awq_config(hub_wctx *wc, json_t *q, json_t **hfq) {
    (void)hfq;
    wshape w;
    qtk_status st = common_shape(HUB_AWQ, wc, &w);
    if (!st && !w.G) st = qtk__err(QTK_E_UNSUPPORTED, "layout awq needs a group size (block=G); one group per row has none");
    if (!st && !hub_json(q, "quant_method")) st = hub_jset(q, "quant_method", json_string("awq"));
    if (!st) st = set_int(q, hub_json(q, "w_bit") ? "w_bit" : "bits", 4);
    if (!st) st = set_int(q, hub_json(q, "q_group_size") ? "q_group_size" : "group_size", (long long)w.G);
    if (!st && !hub_json(q, "zero_point")) st = hub_jset(q, "zero_point", json_true());
    if (!st && !hub_json(q, "version")) st = hub_jset(q, "version", json_string("gemm"));
    if (!st) st = not_converted(wc, q);
    return st;
}
