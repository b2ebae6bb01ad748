/* hub_gptq.c — reading GPTQ (AutoGPTQ, GPTQModel, transformers/optimum) and AWQ (AutoAWQ's
 * GEMM layout) checkpoints (docs/hub-layouts.md; the packings in hub_gptq.h).
 *
 * Each module P with P.qweight, P.qzeros and P.scales (and, for GPTQ, P.g_idx) becomes one
 * qtk tensor P.weight [N, K]: u{bits},block=G:f16,zero=u8 with the zero points as the packer
 * meant them (GPTQ's checkpoint_format "gptq" stores z - 1). A GPTQ weight whose g_idx is not
 * k / G (act-order with groups in the permuted order) has no qtk block form: it is
 * dequantized on load to the scales' dtype with the reference formula, with a notice.
 * P.bias and everything else are listed as stored. */
#include "hub/hub_gptq.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

const unsigned hub_awq_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
const unsigned hub_awq_field[8] = {0, 4, 1, 5, 2, 6, 3, 7};

/* ---- word matrices ---- */

void hub_transpose(const uint8_t *src, size_t R, size_t C, size_t esz, uint8_t *dst) {
    enum { T = 16 };
    for (size_t r0 = 0; r0 < R; r0 += T)
        for (size_t c0 = 0; c0 < C; c0 += T) {
            size_t r1 = r0 + T < R ? r0 + T : R, c1 = c0 + T < C ? c0 + T : C;
            for (size_t c = c0; c < c1; c++)
                for (size_t r = r0; r < r1; r++) memcpy(dst + esz * (c * R + r), src + esz * (r * C + c), esz);
        }
}

/* ---- the config ---- */

typedef struct {
    const char *file;     /* for messages */
    long long bits, G;    /* G: -1 the whole row, 0 not given */
    bool desc_act, v1, have_bits;
} pcfg;

static const json_t *first_of(const json_t *o, const char *a, const char *b) {
    const json_t *v = hub_json(o, a);
    return v ? v : b ? hub_json(o, b) : NULL;
}

static qtk_status read_cfg(const qtk__hub *h, int kind, pcfg *c) {
    memset(c, 0, sizeof *c);
    c->v1 = kind == HUB_GPTQ;
    const json_t *q = h->qcfg;
    if (!q) return QTK_OK;
    c->file = h->config_file;
    const json_t *b = first_of(q, "bits", kind == HUB_AWQ ? "w_bit" : NULL);
    if (b && !hub_json_int(b, &c->bits)) return qtk__err(QTK_E_FORMAT, "'%s': bits is not an integer", c->file);
    c->have_bits = b != NULL;
    const json_t *g = first_of(q, "group_size", kind == HUB_AWQ ? "q_group_size" : NULL);
    if (g && !json_is_null(g) && !hub_json_int(g, &c->G))
        return qtk__err(QTK_E_FORMAT, "'%s': group_size is not an integer", c->file);
    if (g && (c->G == 0 || c->G < -1))
        return qtk__err(QTK_E_FORMAT, "'%s': group_size is %lld (a group size is positive, or -1 for one group per row)",
                        c->file, c->G);
    if (kind == HUB_GPTQ) {
        if (c->have_bits && c->bits != 2 && c->bits != 3 && c->bits != 4 && c->bits != 8)
            return qtk__err(QTK_E_UNSUPPORTED, "'%s': bits %lld; GPTQ packs 2, 3, 4 or 8 bits", c->file, c->bits);
        c->desc_act = json_is_true(hub_json(q, "desc_act"));
        /* checkpoint_format (AutoGPTQ, transformers), format (optimum, GPTQModel); "gptq" if neither */
        const char *f = hub_json_str(q, "checkpoint_format");
        if (!f) f = hub_json_str(q, "format");
        if (json_is_true(hub_json(q, "is_marlin_format")) || (f && strcasecmp(f, "marlin") == 0))
            return qtk__err(QTK_E_UNSUPPORTED, "'%s': a Marlin-format GPTQ checkpoint (its qweight is permuted for the Marlin "
                            "kernel's tiles); qtk reads checkpoint_format gptq and gptq_v2", c->file);
        if (f && strcmp(f, "gptq") != 0 && strcmp(f, "gptq_v2") != 0)
            return qtk__err(QTK_E_UNSUPPORTED, "'%s': checkpoint_format \"%.40s\" is not one qtk reads (gptq, gptq_v2%s)",
                            c->file, f, strcmp(f, "gptq_p") == 0 ? "; gptq_p is GPTQModel's planar packing" : "");
        c->v1 = !f || strcmp(f, "gptq") == 0;
    } else {
        if (c->have_bits && c->bits != 4)
            return qtk__err(QTK_E_UNSUPPORTED, "'%s': bits %lld; AWQ's GEMM layout packs 4 bits", c->file, c->bits);
        const char *v = hub_json_str(q, "version");
        if (v && strcasecmp(v, "gemm") != 0)
            return qtk__err(QTK_E_UNSUPPORTED,
                            "'%s': AWQ version \"%.40s\"; qtk reads the GEMM layout only (gemv and gemv_fast pack along "
                            "the input dimension with padded, interleaved groups, marlin and exllama permute for their "
                            "kernels; convert them to GEMM with AutoAWQ first)", c->file, v);
        const json_t *zp = hub_json(q, "zero_point");
        if (json_is_false(zp))
            return qtk__err(QTK_E_UNSUPPORTED, "'%s': zero_point false; qtk reads AWQ with zero points (the default)",
                            c->file);
    }
    return QTK_OK;
}

/* ---- one module ---- */

typedef struct {
    const char *P;       /* module */
    hub_raw *qw, *qz, *sc, *gi;
} module;

static qtk_status need_2d(const qtk__hub *h, const hub_raw *r, qtk_elem e) {
    if (r->t->elem != e || r->t->rank != 2)
        return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') is %s of rank %d; it is %s [rows, cols]", r->t->name, hub_file(h, r),
                        qtk_elem_name(r->t->elem), r->t->rank, qtk_elem_name(e));
    return QTK_OK;
}

static qtk_status bad_shape(const qtk__hub *h, const hub_raw *r, const char *want, size_t a, size_t b, const char *why) {
    char s1[96];
    return qtk__err(QTK_E_SHAPE, "'%s' (in '%s') is [%s]; %s needs %s [%zu, %zu]", r->t->name, hub_file(h, r),
                    qtk_shape_format(r->t->shape, r->t->rank, s1, sizeof s1), why, want, a, b);
}

static qtk_status add_module(qtk__hub *h, int kind, const pcfg *c, module *m) {
    qtk_status st;
    if ((st = need_2d(h, m->qw, QTK_ELEM_I32)) || (st = need_2d(h, m->qz, QTK_ELEM_I32))) return st;
    const qtk_ckpt_tensor *sc = m->sc->t;
    if ((sc->elem != QTK_ELEM_F16 && sc->elem != QTK_ELEM_BF16 && sc->elem != QTK_ELEM_F32) || sc->rank != 2)
        return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') is %s of rank %d; scales are F16 (or BF16, F32) [groups, out]", sc->name,
                        hub_file(h, m->sc), qtk_elem_name(sc->elem), sc->rank);
    size_t N = sc->shape[1], ng = sc->shape[0], K;
    unsigned bits;
    if (kind == HUB_AWQ) {
        bits = 4;
        K = m->qw->t->shape[0];
        if (m->qw->t->shape[1] * 8 != N || N == 0) return bad_shape(h, m->qw, "I32", K, N / 8, "AWQ with the scales' out dimension");
    } else {
        size_t R = m->qw->t->shape[0];
        if (m->qw->t->shape[1] != N) return bad_shape(h, m->qw, "[*,", 0, N, "the scales' out dimension");
        if (m->gi) {
            const qtk_ckpt_tensor *g = m->gi->t;
            if (g->elem != QTK_ELEM_I32 || g->rank != 1)
                return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') is %s of rank %d; g_idx is I32 [in]", g->name, hub_file(h, m->gi),
                                qtk_elem_name(g->elem), g->rank);
        }
        if (c->have_bits) {
            bits = (unsigned)c->bits;
            K = R * 32 / bits;
        } else if (m->gi && m->gi->t->shape[0] > 0 && (R * 32) % m->gi->t->shape[0] == 0) {
            K = m->gi->t->shape[0];
            bits = (unsigned)(R * 32 / K);
            if (bits != 2 && bits != 3 && bits != 4 && bits != 8)
                return qtk__err(QTK_E_FORMAT, "'%s' (in '%s'): %zu rows of words for %zu inputs is %u bits; GPTQ packs 2, 3, "
                                "4 or 8", m->qw->t->name, hub_file(h, m->qw), R, K, bits);
        } else {
            return qtk__err(QTK_E_FORMAT, "'%s' (in '%s'): no quantization config says its bits, and no g_idx its input "
                            "size; add the model's config.json (or quantize_config.json) beside it",
                            m->qw->t->name, hub_file(h, m->qw));
        }
        if (m->gi && m->gi->t->shape[0] != K)
            return qtk__err(QTK_E_SHAPE, "'%s' (in '%s') has %zu entries; %u-bit '%s' [%zu, %zu] has %zu inputs", m->gi->t->name,
                            hub_file(h, m->gi), m->gi->t->shape[0], bits, m->qw->t->name, R, N, K);
    }
    unsigned fpw = 32 / bits;
    if (kind == HUB_GPTQ && (bits == 3 ? N % 32 : N % fpw))
        return qtk__err(QTK_E_SHAPE, "'%s': %zu outputs; GPTQ's %u-bit qzeros pack %s outputs", sc->name, N, bits,
                        bits == 3 ? "32 (in 3 words)" : fpw == 16 ? "16" : fpw == 8 ? "8" : "4");
    size_t zc = kind == HUB_AWQ ? N / 8 : N * bits / 32;
    /* groups: the config's size, else what the scales' rows imply */
    size_t G;
    if (c->G == -1) G = K;
    else if (c->G > 0) G = (size_t)c->G;
    else if (ng > 0 && K % ng == 0) {
        G = K / ng;
        if ((st = hub_notice(h, m->P, "no config gives group_size: %zu inferred from the scales", G))) return st;
    } else
        return qtk__err(QTK_E_FORMAT, "'%s' has %zu rows for %zu inputs; without a config qtk cannot tell the group size",
                        sc->name, ng, K);
    if (G == 0 || qtk__ceil_div(K, G) != ng)
        return qtk__err(QTK_E_SHAPE, "'%s' (in '%s') has %zu groups; group_size %zu over %zu inputs makes %zu%s", sc->name,
                        hub_file(h, m->sc), ng, G, K, G ? qtk__ceil_div(K, G) : 0,
                        c->G ? " (group_size from the config)" : "");
    if (m->qz->t->shape[0] != ng || m->qz->t->shape[1] != zc) return bad_shape(h, m->qz, "I32", ng, zc, "the scales' groups");
    if (K == 0 || (bits == 3 ? K % 32 : K % fpw))
        return qtk__err(QTK_E_SHAPE, "'%s': %zu inputs; %u-bit fields are packed in whole words (%s)", m->qw->t->name, K, bits,
                        bits == 3 ? "32 inputs per 3 words" : "a multiple of 32 / bits");
    bool act = false;
    if (m->gi) {
        const uint8_t *g = hub_bytes(h, m->gi);
        for (size_t k = 0; k < K; k++) {
            int32_t v = (int32_t)qtk__ld32(g + 4 * k);
            if (v < 0 || (size_t)v >= ng)
                return qtk__err(QTK_E_VALUE, "'%s' (in '%s')[%zu] is %d; the groups are 0..%zu", m->gi->t->name,
                                hub_file(h, m->gi), k, (int)v, ng - 1);
            act |= (size_t)v != k / G;
        }
    }
    hub_gptq_param *pp = hub_alloc(h, sizeof *pp);
    size_t *shape = hub_alloc(h, 2 * sizeof *shape);
    size_t xl = strlen(m->P) + 8;
    char *x = hub_alloc(h, xl);
    if (!pp || !shape || !x) return qtk__err(QTK_E_NOMEM, "out of memory");
    snprintf(x, xl, "%s.weight", m->P);
    if (hub_find(h, x, ""))
        return qtk__err(QTK_E_FORMAT, "'%s' and '%s' are both in the files: a module holds a float weight or a packed one",
                        x, m->qw->t->name);
    *pp = (hub_gptq_param){.kind = kind, .bits = bits, .N = N, .K = K, .G = G, .ng = ng, .v1 = kind == HUB_GPTQ && c->v1,
                           .scale_elem = sc->elem, .act_order = act};
    shape[0] = N, shape[1] = K;
    hub_pending p = {.name = x, .quantized = !act, .rank = 2, .shape = shape};
    p.item.raw[p.item.n++] = (size_t)(m->qw - h->raw);
    p.item.raw[p.item.n++] = (size_t)(m->sc - h->raw);
    p.item.raw[p.item.n++] = (size_t)(m->qz - h->raw);
    if (act) p.item.raw[p.item.n++] = (size_t)(m->gi - h->raw);
    p.item.decode = hub_gptq_decode;
    p.item.param = pp;
    const char *sdt = hub_dtype_spec(hub_scale_dtype(sc->elem));
    if (act) {
        p.elem = sc->elem;
        st = hub_notice(h, x, "g_idx orders the groups by activation (desc_act): no qtk block scheme holds that, so the "
                        "weight is dequantized on load to %s with the packer's formula (exact values)", qtk_elem_name(sc->elem));
    } else {
        char blk[32];
        if (G >= K) snprintf(blk, sizeof blk, "*");
        else snprintf(blk, sizeof blk, "%zu", G);
        st = hub_scheme(&p.scheme, "u%u,block=%s:%s,zero=u8,store=%s", bits, blk, sdt, bits == 3 ? "native" : "u32");
        if (sc->elem != QTK_ELEM_F32) p.item.deq = hub_deq_zero_point;
    }
    if (!st) st = hub_add(h, &p);
    if (!st) m->qw->used = m->qz->used = m->sc->used = true;
    if (!st && m->gi) m->gi->used = true;
    return st;
}

static qtk_status fold_kind(qtk__hub *h, int kind) {
    pcfg c;
    qtk_status st = read_cfg(h, kind, &c);
    size_t found = 0;
    for (size_t i = 0; i < h->n_raw && !st; i++) {
        hub_raw *r = &h->raw[i];
        if (r->used) continue;
        char *P = hub_strip(h, r->t->name, ".qweight");
        if (!P) continue;
        module m = {P, r, hub_find(h, P, ".qzeros"), hub_find(h, P, ".scales"), kind == HUB_GPTQ ? hub_find(h, P, ".g_idx") : NULL};
        if (!m.qz || !m.sc)
            return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') has no '%s.%s'%s", r->t->name, hub_file(h, r), P,
                            m.qz ? "scales" : "qzeros",
                            kind == HUB_AWQ ? " (AWQ always stores zero points)" : "");
        st = add_module(h, kind, &c, &m);
        found++;
    }
    if (st) return st;
    static const char *const parts[] = {".qweight", ".qzeros", ".scales", ".g_idx"};
    for (size_t i = 0; i < h->n_raw; i++) {
        const hub_raw *r = &h->raw[i];
        for (size_t k = 0; k < 4 && !r->used; k++)
            if (qtk__has_suffix(r->t->name, parts[k]) && (k != 2 || r->t->elem == QTK_ELEM_F16) &&
                (k != 3 || kind == HUB_GPTQ))
                return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') belongs to no quantized module (its .qweight is missing)",
                                r->t->name, hub_file(h, r));
    }
    if (!found && h->qcfg)
        return qtk__err(QTK_E_FORMAT, "'%s' says quant_method \"%s\" but no tensor is a *.qweight", h->config_file,
                        kind == HUB_AWQ ? "awq" : "gptq");
    return QTK_OK;
}

static qtk_status fold_gptq(qtk__hub *h) { return fold_kind(h, HUB_GPTQ); }
static qtk_status fold_awq(qtk__hub *h) { return fold_kind(h, HUB_AWQ); }

/* ---- bytes ---- */

/* Row g of qzeros as v2 words into dst (zc words): v1's z - 1 undone as GPTQModel, the
 * maintained packer, does on load (hub_gptq_v1_step): the exact inverse of its subtraction on
 * save, so that a zero point of 0 survives. */
static void zrow(const hub_gptq_param *p, const uint8_t *qz, size_t g, uint8_t *dst) {
    size_t zc = p->kind == HUB_AWQ ? p->N / 8 : p->N * p->bits / 32;
    const uint8_t *row = qz + 4 * g * zc;
    if (!p->v1) {
        memcpy(dst, row, 4 * zc);
    } else if (p->bits != 3) {
        for (size_t w = 0; w < zc; w++) qtk__st32(dst + 4 * w, qtk__ld32(row + 4 * w) + hub_gptq_v1_step(p->bits));
    } else {
        memset(dst, 0, 4 * zc);
        for (size_t n = 0; n < p->N; n++) hub_stream_put(dst, 4, n, 3, (hub_stream_get(row, 4, n, 3) + 1u) & 7u);
    }
}

/* the zero point of output n in a v2 row */
static uint32_t zfield(const hub_gptq_param *p, const uint8_t *row, size_t n) {
    if (p->kind == HUB_AWQ) {
        return (qtk__ld32(row + 4 * (n / 8)) >> (4 * hub_awq_field[n % 8])) & 15u;
    }
    return hub_stream_get(row, 4, n, p->bits);
}

/* the value field of output n, input k */
static uint32_t qfield(const hub_gptq_param *p, const uint8_t *qw, size_t n, size_t k) {
    if (p->kind == HUB_AWQ) {
        return (qtk__ld32(qw + 4 * (k * (p->N / 8) + n / 8)) >> (4 * hub_awq_field[n % 8])) & 15u;
    }
    return hub_stream_get(qw + 4 * n, 4 * p->N, k, p->bits);
}

/* AWQ's words of 8 inputs (rows k0..k0+7) x 8 outputs (8c..8c+7) to qtk's 8 words */
static void awq_values(const hub_gptq_param *p, const uint8_t *qw, uint8_t *out) {
    size_t C = p->N / 8, wpr = p->K / 8;
    for (size_t k0 = 0; k0 < p->K; k0 += 8)
        for (size_t c = 0; c < C; c++) {
            uint32_t w[8], o[8] = {0};
            for (unsigned j = 0; j < 8; j++) w[j] = qtk__ld32(qw + 4 * ((k0 + j) * C + c));
            for (unsigned i = 0; i < 8; i++)
                for (unsigned j = 0; j < 8; j++) o[i] |= ((w[j] >> (4 * i)) & 15u) << (4 * j);
            for (unsigned i = 0; i < 8; i++) qtk__st32(out + 4 * ((8 * c + hub_awq_order[i]) * wpr + k0 / 8), o[i]);
        }
}

/* parts: qweight, scales, qzeros [, g_idx] */
qtk_status hub_gptq_decode(qtk__hub *h, const char *name, const hub_item *it, const uint8_t *const *part, uint8_t *out) {
    (void)h;
    const hub_gptq_param *p = it->param;
    size_t N = p->N, K = p->K, ng = p->ng;
    unsigned ssz = qtk_elem_bits(p->scale_elem) / 8;
    size_t zc = p->kind == HUB_AWQ ? N / 8 : N * p->bits / 32;
    uint8_t *zs = malloc(4 * zc * (ng ? ng : 1)); /* every row of qzeros as v2 words */
    if (!zs) return qtk__err(QTK_E_NOMEM, "out of memory");
    for (size_t g = 0; g < ng; g++) zrow(p, part[2], g, zs + 4 * g * zc);
    if (p->act_order) {
        /* the packer's own formula, in the scales' dtype: s[g_idx[k], n] (q - z) */
        qtk_dtype sdt = hub_scale_dtype(p->scale_elem);
        for (size_t n = 0; n < N; n++)
            for (size_t k = 0; k < K; k++) {
                size_t g = (size_t)(int32_t)qtk__ld32(part[3] + 4 * k);
                uint32_t z = zfield(p, zs + 4 * g * zc, n);
                float s = hub_scale_value(p->scale_elem, part[1] + ssz * (g * N + n));
                float v = s * (float)((int32_t)qfield(p, part[0], n, k) - (int32_t)z); /* exact in f32 */
                uint8_t *d = out + ssz * (n * K + k);
                if (ssz == 4) qtk__st32(d, qtk__f32_bits(v));
                else qtk__st16(d, (uint16_t)qtk_fmt_encode(sdt, v));
            }
        free(zs);
        return QTK_OK;
    }
    size_t vb;
    if (p->kind == HUB_AWQ) {
        awq_values(p, part[0], out);
        vb = N * K / 2;
    } else if (p->bits == 3) {
        for (size_t n = 0; n < N; n++)
            for (size_t k = 0; k < K; k++) out[n * K + k] = (uint8_t)qfield(p, part[0], n, k);
        vb = N * K;
    } else {
        hub_transpose(part[0], K * p->bits / 32, N, 4, out);
        vb = N * K * p->bits / 8;
    }
    hub_transpose(part[1], ng, N, ssz, out + vb);
    uint8_t *zo = out + vb + N * ng * ssz;
    for (size_t g = 0; g < ng; g++)
        for (size_t n = 0; n < N; n++) zo[n * ng + g] = (uint8_t)zfield(p, zs + 4 * g * zc, n);
    free(zs);
    (void)name;
    return QTK_OK;
}

/* ---- detection ---- */

static bool sniff_kind(const qtk__hub *h, int kind, const char **why) {
    for (size_t i = 0; i < h->n_raw; i++) {
        const char *n = h->raw[i].t->name;
        if (!qtk__has_suffix(n, ".qweight")) continue;
        size_t l = strlen(n) - 8;
        char buf[1024];
        if (l >= sizeof buf) continue;
        memcpy(buf, n, l);
        buf[l] = '\0';
        const hub_raw *q = h->raw[i].t->rank == 2 ? h->raw + i : NULL, *s = hub_find(h, buf, ".scales");
        if (!q || !s || s->t->rank != 2) continue;
        /* GPTQ's qweight has the scales' out columns; AWQ's an eighth of them */
        bool awq = q->t->shape[1] * 8 == s->t->shape[1] && q->t->shape[1] != s->t->shape[1];
        if ((kind == HUB_AWQ) == awq) {
            *why = kind == HUB_AWQ ? "*.qweight with an eighth of *.scales' columns (AWQ)"
                                   : "*.qweight with *.scales' columns (GPTQ)";
            return true;
        }
    }
    return false;
}

static bool sniff_gptq(const qtk__hub *h, const char **why) { return sniff_kind(h, HUB_GPTQ, why); }
static bool sniff_awq(const qtk__hub *h, const char **why) { return sniff_kind(h, HUB_AWQ, why); }

static const char *const gptq_methods[] = {"gptq", NULL};
static const char *const awq_methods[] = {"awq", NULL};

const hub_conv hub_gptq_conv = {QTK_LAYOUT_GPTQ, "gptq", gptq_methods, sniff_gptq, fold_gptq, hub_gptq_plan, hub_gptq_config,
                                NULL};
const hub_conv hub_awq_conv = {QTK_LAYOUT_AWQ, "awq", awq_methods, sniff_awq, fold_awq, hub_awq_plan, hub_awq_config, NULL};
