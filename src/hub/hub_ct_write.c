/* hub_ct_write.c — writing compressed-tensors checkpoints: which qtk schemes have a
 * compressed-tensors format, their stored tensors, and the quantization_config (one config
 * group per distinct set of weight arguments). The read side is hub_ct.c. */
#include "hub/hub_ct.h"

#include <stdio.h>
#include <stdlib.h>

enum { WK_NVFP4 = 1, WK_MXFP4, WK_FLOAT, WK_INT8, WK_PACK };

/* A tensor's weight arguments (what a config group says). */
typedef struct {
    int kind, strategy;
    unsigned bits;
    bool is_float;
    size_t G, bh, bw;
    bool asym;     /* zero points (u4/u8,...,zero=u8) */
} wargs;

static const char *const format_of[] = {"", "nvfp4-pack-quantized", "mxfp4-pack-quantized", "float-quantized",
                                        "int-quantized", "pack-quantized"};
static const char *const strategy_name[] = {"", "tensor", "channel", "group", "block", "tensor_group", "?"};

/* The strategy of a one-level scheme on a 2-D weight (or a per-tensor one on any). */
static bool strategy_of(const qtk_ckpt_tensor *t, wargs *a) {
    const qtk_scheme *s = &t->scheme;
    if (s->block_rank == 0) {
        a->strategy = CT_TENSOR;
        return s->tensor_dtype == QTK_DTYPE_F32 || s->tensor_dtype == QTK_DTYPE_BF16 || s->tensor_dtype == QTK_DTYPE_F16;
    }
    if (s->tensor_dtype != QTK_DTYPE_NONE || t->rank != 2 ||
        (s->block_dtype != QTK_DTYPE_F32 && s->block_dtype != QTK_DTYPE_BF16 && s->block_dtype != QTK_DTYPE_F16))
        return false;
    if (s->block_rank == 1 && s->block[0] == QTK_BLOCK_WHOLE) a->strategy = CT_CHANNEL;
    else if (s->block_rank == 1) a->strategy = CT_GROUP, a->G = s->block[0];
    else if (s->block_rank == 2 && s->block[0] != QTK_BLOCK_WHOLE && s->block[1] != QTK_BLOCK_WHOLE)
        a->strategy = CT_BLOCK, a->bh = s->block[0], a->bw = s->block[1];
    else return false;
    return true;
}

static bool classify(const qtk_ckpt_tensor *t, wargs *a) {
    memset(a, 0, sizeof *a);
    const qtk_scheme *s = &t->scheme;
    qtk_scheme nv, mx;
    if (qtk_scheme_parse("nvfp4", &nv) || qtk_scheme_parse("mxfp4", &mx)) return false;
    int r = t->rank;
    if (qtk_scheme_equal(s, &nv)) {
        *a = (wargs){WK_NVFP4, CT_TENSOR_GROUP, 4, true, 16, 0, 0, false};
        return r == 2 && t->shape[1] % 16 == 0;
    }
    if (qtk_scheme_equal(s, &mx)) {
        *a = (wargs){WK_MXFP4, CT_GROUP, 4, true, 32, 0, 0, false};
        return r >= 1 && t->shape[r - 1] % 32 == 0;
    }
    if (s->mode == QTK_MODE_AFFINE && s->offset == QTK_OFFSET_ZERO && s->offset_dtype == QTK_DTYPE_U8 && r == 2 &&
        ((s->value == QTK_VALUE_U4 || s->value == QTK_VALUE_U8) && s->store == QTK_STORE_U32 && s->pack_dim == 0)) {
        a->kind = WK_PACK, a->bits = s->value == QTK_VALUE_U4 ? 4 : 8, a->asym = true;
        return strategy_of(t, a) && (a->strategy == CT_CHANNEL || a->strategy == CT_GROUP);
    }
    if (s->mode == QTK_MODE_AFFINE && s->offset == QTK_OFFSET_ZERO && s->offset_dtype == QTK_DTYPE_U8 && r == 2 &&
        s->value == QTK_VALUE_U8 && s->store == QTK_STORE_NATIVE) {
        a->kind = WK_INT8, a->bits = 8, a->asym = true;
        return strategy_of(t, a) && (a->strategy == CT_CHANNEL || a->strategy == CT_GROUP);
    }
    if (s->mode != QTK_MODE_SYMMETRIC) return false;
    if ((s->value == QTK_VALUE_E4M3 || s->value == QTK_VALUE_E5M2) && s->store == QTK_STORE_NATIVE) {
        a->kind = WK_FLOAT, a->bits = 8, a->is_float = true;
        return strategy_of(t, a);
    }
    if (s->value == QTK_VALUE_Q8F && s->store == QTK_STORE_NATIVE) {
        a->kind = WK_INT8, a->bits = 8;
        return strategy_of(t, a);
    }
    if ((s->value == QTK_VALUE_Q4F || s->value == QTK_VALUE_Q8F) && s->store == QTK_STORE_U32 && s->pack_dim == 0 && r == 2) {
        a->kind = WK_PACK, a->bits = s->value == QTK_VALUE_Q4F ? 4 : 8;
        return strategy_of(t, a) && a->strategy != CT_BLOCK;
    }
    return false;
}

/* ---- encoders ---- */

static qtk_status enc_pack(hub_wctx *wc, const hub_wpiece *p, const qtk_ckpt_tensor *t, const uint8_t *bytes, uint8_t *out) {
    (void)wc;
    bool asym = t->scheme.mode == QTK_MODE_AFFINE; /* unsigned codes: already offset binary */
    unsigned bits = t->scheme.value == QTK_VALUE_Q4F || t->scheme.value == QTK_VALUE_U4 ? 4 : 8, fpw = 32 / bits;
    uint32_t flip = asym ? 0u : bits == 4 ? 0x88888888u : 0x80808080u;
    size_t rows = t->shape[0], cols = t->shape[1], wpr = qtk__ceil_div(cols, fpw), used = cols % fpw;
    /* compressed-tensors pads a row's last word with field 0 (offset binary) */
    uint32_t keep = used ? (uint32_t)((1ull << (used * bits)) - 1) : 0xFFFFFFFFu;
    for (size_t r = 0; r < rows; r++)
        for (size_t w = 0; w < wpr; w++) {
            size_t at = 4 * (r * wpr + w);
            uint32_t v = qtk__ld32(bytes + at) ^ flip;
            if (w == wpr - 1) v &= keep;
            qtk__st32(out + at, v);
        }
    (void)p;
    return QTK_OK;
}

/* int8 with zero points: qtk's u8 codes back to two's complement */
static qtk_status enc_flip8(hub_wctx *wc, const hub_wpiece *p, const qtk_ckpt_tensor *t, const uint8_t *bytes, uint8_t *out) {
    (void)wc, (void)t;
    for (size_t i = 0; i < p->nbytes; i++) out[i] = bytes[i] ^ 0x80u;
    return QTK_OK;
}

/* zero points: qtk's u8 per scale -> I32 packed along the rows (offset-binary fields) or I8 */
static qtk_status enc_zp(hub_wctx *wc, const hub_wpiece *p, const qtk_ckpt_tensor *t, const uint8_t *bytes, uint8_t *out) {
    (void)wc;
    qtk_layout L;
    qtk_status st = qtk_layout_compute(&t->scheme, t->shape, t->rank, &L);
    if (st) return st;
    const uint8_t *z = bytes + L.offsets_offset;
    size_t O = L.grid[0], gc = L.grid[1];
    if (p->elem == QTK_ELEM_I8) {
        for (size_t i = 0; i < O * gc; i++) out[i] = z[i] ^ 0x80u;
        return QTK_OK;
    }
    unsigned bits = t->scheme.value == QTK_VALUE_U4 ? 4 : 8, fpw = 32 / bits;
    memset(out, 0, p->nbytes);
    for (size_t o = 0; o < O; o++)
        for (size_t g = 0; g < gc; g++) {
            uint8_t *w = out + 4 * ((o / fpw) * gc + g);
            qtk__st32(w, qtk__ld32(w) | (uint32_t)z[o * gc + g] << (bits * (o % fpw)));
        }
    return QTK_OK;
}

static qtk_status enc_global(hub_wctx *wc, const hub_wpiece *p, const qtk_ckpt_tensor *t, const uint8_t *bytes,
                             uint8_t *out) {
    (void)p;
    qtk_layout L;
    qtk_status st = qtk_layout_compute(&t->scheme, t->shape, t->rank, &L);
    if (st) return st;
    bool present[128] = {false};
    for (size_t i = 0; i < L.scale_bytes; i++) present[bytes[L.scales_offset + i] & 0x7F] = true;
    float g = qtk__bits_f32(qtk__ld32(bytes + L.global_offset)), G;
    bool exact;
    /* The source's own divisor, when it reads back to this g: g alone does not always
     * determine G (1/x maps neighbouring divisors to one g), so a compressed-tensors
     * checkpoint written again keeps its bytes. */
    const hub_raw *src = wc->src ? hub_find(wc->src, t->name, "_global_scale") : NULL;
    if (src && src->t->elem == QTK_ELEM_F32 && src->t->nbytes == 4) {
        float Gs = qtk__bits_f32(qtk__ld32(hub_bytes(wc->src, src)));
        bool ex;
        if (Gs > 0.0f && qtk__isfinite(Gs) &&
            qtk__f32_bits(hub_ct_global_from_divisor(Gs, present, &ex)) == qtk__f32_bits(g)) {
            qtk__st32(out, qtk__f32_bits(Gs));
            return QTK_OK;
        }
    }
    if (!(g > 0.0f)) {
        /* an all-zero tensor: any divisor gives zeros; 1 is what a reader expects */
        G = 1.0f;
        exact = true;
    } else {
        G = hub_ct_divisor_from_global(g, present, &exact);
    }
    if (!exact && wc->notice)
        wc->notice(wc->ctx, t->name, "no f32 divisor G reproduces every effective scale g x s: weight_global_scale = 1/g; "
                   "readers that divide may differ by one ulp of the effective scale");
    qtk__st32(out, qtk__f32_bits(G));
    return QTK_OK;
}

/* ---- plan ---- */

qtk_status hub_ct_plan(hub_wctx *wc, const qtk_ckpt_tensor *t, hub_wtensor *w) {
    wargs a;
    char spec[160], sh[128];
    if (!classify(t, &a)) {
        if (qtk_scheme_format(&t->scheme, spec, sizeof spec, NULL)) spec[0] = '\0';
        return qtk__err(QTK_E_UNSUPPORTED,
                        "layout compressed-tensors stores nvfp4 (2-D, K a multiple of 16), mxfp4, e4m3/e5m2 and q8f with "
                        "store=native, and q4f/q8f with store=u32:0 (2-D), each with one per-tensor, per-row (block=*), "
                        "group (block=G) or 2-D block scale in f32, bf16 or f16, and with zero points u4/u8,...,zero=u8 "
                        "(store=u32:0, or u8 store=native) with per-row or group scales; this is '%s' on [%s]",
                        spec, qtk_shape_format(t->shape, t->rank, sh, sizeof sh));
    }
    qtk_layout L;
    qtk_status st = qtk_layout_compute(&t->scheme, t->shape, t->rank, &L);
    if (st) return st;
    w->kind = a.kind;
    int r = t->rank;
    hub_wpiece *v, *s, *x = NULL;
    size_t shape[QTK_MAX_RANK], one[1] = {1};
    for (int k = 0; k < r; k++) shape[k] = L.storage_shape[k]; /* storage units: bytes, or words for u32 */
    const char *vs = a.kind == WK_FLOAT || a.kind == WK_INT8 ? "" : "_packed";
    if (a.kind == WK_PACK) {
        v = hub_wpiece_add(wc, w, t, vs, QTK_ELEM_I32, shape, 2, L.value_bytes);
        if (v) v->encode = enc_pack;
    } else if (a.kind == WK_FLOAT || a.kind == WK_INT8) {
        qtk_elem e = a.kind == WK_INT8 ? QTK_ELEM_I8 : t->scheme.value == QTK_VALUE_E4M3 ? QTK_ELEM_F8_E4M3 : QTK_ELEM_F8_E5M2;
        v = hub_wpiece_add(wc, w, t, vs, e, t->shape, r, L.value_bytes);
        if (v && a.asym) v->encode = enc_flip8;
    } else {
        v = hub_wpiece_add(wc, w, t, vs, QTK_ELEM_U8, shape, r, L.value_bytes);
    }
    qtk_elem se = a.kind == WK_MXFP4 ? QTK_ELEM_U8 : hub_scale_elem(L.scale_dtype);
    if (a.strategy == CT_TENSOR) s = hub_wpiece_add(wc, w, t, "_scale", se, one, 1, L.scale_bytes);
    else s = hub_wpiece_add(wc, w, t, "_scale", se, L.grid, r, L.scale_bytes);
    if (s) s->src_off = L.scales_offset;
    if (a.kind == WK_NVFP4) {
        x = hub_wpiece_add(wc, w, t, "_global_scale", QTK_ELEM_F32, one, 1, 4);
        if (x) x->encode = enc_global;
    } else if (a.kind == WK_PACK) {
        size_t two[1] = {2};
        uint8_t *c = qtk__arena_alloc(wc->arena, 16);
        x = c ? hub_wpiece_add(wc, w, t, "_shape", QTK_ELEM_I64, two, 1, 16) : NULL;
        if (x) {
            for (int k = 0; k < 2; k++) {
                qtk__st32(c + 8 * k, (uint32_t)t->shape[k]);
                qtk__st32(c + 8 * k + 4, (uint32_t)((uint64_t)t->shape[k] >> 32));
            }
            x->constant = c;
        }
    }
    hub_wpiece *zp = NULL;
    if (a.asym) {
        unsigned fpw = 32 / a.bits;
        size_t zs[2] = {a.kind == WK_PACK ? qtk__ceil_div(L.grid[0], fpw) : L.grid[0], L.grid[1]};
        zp = hub_wpiece_add(wc, w, t, "_zero_point", a.kind == WK_PACK ? QTK_ELEM_I32 : QTK_ELEM_I8, zs, 2,
                            a.kind == WK_PACK ? 4 * zs[0] * zs[1] : zs[0] * zs[1]);
        if (zp) zp->encode = enc_zp;
    }
    bool need_x = a.kind == WK_NVFP4 || a.kind == WK_PACK;
    if (!v || !s || (need_x && !x) || (a.asym && !zp)) return qtk__err(QTK_E_NOMEM, "out of memory");
    return QTK_OK;
}

/* ---- config ---- */

static json_t *weights_json(const wargs *a) {
    json_t *w = json_pack("{s:i, s:s, s:b, s:o, s:s, s:o, s:b, s:n, s:s, s:{}}", "num_bits", (int)a->bits, "type",
                          a->is_float ? "float" : "int", "symmetric", !a->asym, "group_size",
                          a->G ? json_integer((json_int_t)a->G) : json_null(), "strategy", strategy_name[a->strategy],
                          "block_structure",
                          a->strategy == CT_BLOCK ? json_pack("[I, I]", (json_int_t)a->bh, (json_int_t)a->bw) : json_null(),
                          "dynamic", 0, "actorder", "observer", "minmax", "observer_kwargs");
    return w;
}

static bool same_args(const wargs *a, const wargs *b) {
    return a->kind == b->kind && a->strategy == b->strategy && a->bits == b->bits && a->G == b->G && a->bh == b->bh &&
           a->bw == b->bw && a->asym == b->asym;
}

/* The source's single group, if it says what ours would. */
static bool source_group_matches(const json_t *src, const wargs *a) {
    const json_t *groups = hub_json(src, "config_groups");
    if (!json_is_object(groups) || json_object_size(groups) != 1) return false;
    const json_t *g = json_object_iter_value(json_object_iter((json_t *)(uintptr_t)groups));
    const json_t *w = hub_json(g, "weights");
    long long bits = 0, gs = 0;
    const char *type = hub_json_str(w, "type"), *strategy = hub_json_str(w, "strategy");
    const json_t *sym = hub_json(w, "symmetric");
    if (!hub_json_int(hub_json(w, "num_bits"), &bits) || (unsigned long long)bits != a->bits || !type ||
        strcmp(type, a->is_float ? "float" : "int") != 0 || !strategy || strcmp(strategy, strategy_name[a->strategy]) != 0 ||
        (a->asym ? !json_is_false(sym) : json_is_false(sym)))
        return false;
    if (a->G && (!hub_json_int(hub_json(w, "group_size"), &gs) || (size_t)gs != a->G)) return false;
    if (a->strategy == CT_BLOCK) {
        const json_t *bs = hub_json(w, "block_structure");
        long long bh = 0, bw = 0;
        if (!json_is_array(bs) || !hub_json_int(json_array_get(bs, 0), &bh) || !hub_json_int(json_array_get(bs, 1), &bw) ||
            (size_t)bh != a->bh || (size_t)bw != a->bw)
            return false;
    }
    const char *f = hub_json_str(g, "format");
    if (!f) f = hub_json_str(src, "format");
    return !f || strcmp(f, format_of[a->kind]) == 0;
}

/* "re:^model\.layers\.0\.mlp\.down_proj$" */
static json_t *module_regex(hub_wctx *wc, const char *name) {
    const char *m = hub_module(wc, name);
    size_t n = strlen(m);
    char *b = malloc(2 * n + 8);
    if (!b) return NULL;
    size_t k = 0;
    memcpy(b, "re:^", 4), k = 4;
    for (size_t i = 0; i < n; i++) {
        if (strchr(".[]()*+?{}|^$\\", m[i])) b[k++] = '\\';
        b[k++] = m[i];
    }
    b[k++] = '$';
    b[k] = '\0';
    json_t *s = json_string(b);
    free(b);
    return s;
}

qtk_status hub_ct_config(hub_wctx *wc, json_t *q, json_t **hfq) {
    (void)hfq;
    const qtk__desc *d = wc->d;
    size_t nt = d->n_tensors, ng = 0;
    wargs *g = malloc((nt ? nt : 1) * sizeof *g);
    size_t *gi = malloc((nt ? nt : 1) * sizeof *gi);
    qtk_status st = g && gi ? QTK_OK : qtk__err(QTK_E_NOMEM, "out of memory");
    for (size_t i = 0; i < nt && !st; i++) {
        wargs a;
        gi[i] = SIZE_MAX;
        if (!d->tensors[i].quantized || !classify(&d->tensors[i], &a)) continue;
        size_t k = 0;
        while (k < ng && !same_args(&g[k], &a)) k++;
        if (k == ng) g[ng++] = a;
        gi[i] = k;
    }
    if (!st && ng == 0)
        st = qtk__err(QTK_E_UNSUPPORTED, "layout compressed-tensors: no tensor is quantized; a checkpoint without one is "
                      "written with --layout qtk");
    bool reuse = !st && ng == 1 && wc->src_qcfg && source_group_matches(wc->src_qcfg, &g[0]);
    if (!st && !reuse) {
        json_t *groups = json_object(), *ignore = json_array();
        st = groups && ignore ? QTK_OK : qtk__err(QTK_E_NOMEM, "out of memory");
        for (size_t k = 0; k < ng && !st; k++) {
            json_t *targets = json_array();
            if (ng == 1) json_array_append_new(targets, json_string("Linear"));
            for (size_t i = 0; i < nt && ng > 1 && targets; i++)
                if (gi[i] == k) json_array_append_new(targets, module_regex(wc, d->tensors[i].name));
            char name[32];
            snprintf(name, sizeof name, "group_%zu", k);
            json_t *grp = json_pack("{s:o, s:o, s:n, s:n, s:s}", "targets", targets, "weights", weights_json(&g[k]),
                                    "input_activations", "output_activations", "format", format_of[g[k].kind]);
            st = hub_jset(groups, name, grp);
        }
        /* the unquantized matrices, so that a loader targeting "Linear" leaves them alone */
        for (size_t i = 0; i < nt && !st; i++) {
            const qtk_ckpt_tensor *t = &d->tensors[i];
            if (!t->quantized && t->rank == 2 && qtk_elem_is_float(t->elem) && qtk__has_suffix(t->name, ".weight"))
                if (json_array_append_new(ignore, json_string(hub_module(wc, t->name)))) st = qtk__err(QTK_E_NOMEM, "out of memory");
        }
        if (!st) {
            st = hub_jset(q, "config_groups", groups);
            groups = NULL;
        }
        if (!st) {
            st = hub_jset(q, "ignore", ignore);
            ignore = NULL;
        }
        json_decref(groups);
        json_decref(ignore);
        if (!st) st = hub_jset(q, "format", json_string(ng == 1 ? format_of[g[0].kind] : "mixed-precision"));
    }
    if (!st) st = hub_jset(q, "quant_method", json_string("compressed-tensors"));
    if (!st) st = hub_jset(q, "quantization_status", json_string("compressed"));
    free(g);
    free(gi);
    return st;
}
