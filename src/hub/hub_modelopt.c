/* hub_modelopt.c — NVIDIA ModelOpt's unified Hugging Face export (HUB_LAYOUTS.md §3):
 *
 *   NVFP4  P.weight U8 [..., O, K/2], P.weight_scale F8_E4M3 [..., O, K/16],
 *          P.weight_scale_2 F32 [] (a multiplier)                      -> nvfp4
 *   NVFP4, BMM experts: weight U8 [E, K/2, O], weight_scale [E, K/16, O]
 *                       -> e2m1,block=16x1:ue4m3,tensor=f32,store=packed:1 on [E, K, O]
 *   MXFP4  weight U8 [..., O, K/2], weight_scale U8 [..., O, K/32]     -> mxfp4
 *   FP8    weight F8_E4M3, weight_scale F32 []                         -> e4m3,tensor=f32,store=native
 *          per channel: weight_scale [O] or [O, 1]                     -> e4m3,block=*:f32,store=native
 *          fp8_pb_wo:   weight_scale [ceil(O/128), ceil(K/128)]        -> e4m3,block=128x128:f32,store=native
 *
 * In every case the qtk bytes are the stored tensors concatenated: ModelOpt's global scale
 * multiplies, as qtk's does. A weight_scale_2 with one value per expert has no single-tensor
 * qtk form: such a tensor is dequantized (exactly, to F32) with a notice. The config is
 * hf_quant_config.json and/or config.json quantization_config (quant_method "modelopt"). */
#include "hub/hub_internal.h"

#include <stdio.h>
#include <stdlib.h>

static const char *const methods[] = {"modelopt", NULL};

enum { K_NVFP4 = 1, K_NVFP4_BMM, K_MXFP4, K_FP8, K_FP8_PC, K_FP8_PB };
static const char *const algo_of[] = {"", "NVFP4", "NVFP4", "MXFP4", "FP8", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO"};

static bool sniff(const qtk__hub *h, const char **why) {
    for (size_t i = 0; i < h->n_raw; i++)
        if (qtk__has_suffix(h->raw[i].t->name, "weight_scale_2")) {
            *why = "*.weight_scale_2";
            return true;
        }
    /* FP8 as ModelOpt writes it: an F32 scalar weight_scale beside an F8_E4M3 weight */
    for (size_t i = 0; i < h->n_raw; i++) {
        const qtk_ckpt_tensor *t = h->raw[i].t;
        if (!qtk__has_suffix(t->name, "weight_scale") || t->elem != QTK_ELEM_F32 || t->rank != 0) continue;
        char buf[1024];
        size_t k = strlen(t->name) - 6;
        if (k >= sizeof buf) continue;
        memcpy(buf, t->name, k);
        buf[k] = '\0';
        const hub_raw *w = hub_find(h, buf, "");
        if (w && w->t->elem == QTK_ELEM_F8_E4M3) {
            *why = "*.weight_scale F32 [] beside an F8_E4M3 weight";
            return true;
        }
    }
    return false;
}

static const char *config_algo(const qtk__hub *h) {
    if (!h->qcfg) return NULL;
    if (h->qcfg == h->hfq) return hub_json_str(hub_json(h->hfq, "quantization"), "quant_algo");
    return hub_json_str(h->qcfg, "quant_algo");
}

/* ---- per-expert global scales: dequantized on load ---- */

typedef struct {
    bool bmm;           /* [E, K/2, O] with pairs along K, else [E, ..., O, K/2] */
    size_t experts;     /* E */
    size_t inner;       /* elements per expert */
    size_t a, b;        /* per expert, logical [a, b] with the last dim b (rows collapsed into a) */
} deq_param;

static qtk_status deq_nvfp4(qtk__hub *h, const char *name, const hub_item *it, const uint8_t *const *part, uint8_t *out) {
    (void)h;
    const deq_param *p = it->param;
    const uint8_t *w = part[0], *s = part[1], *g = part[2];
    for (size_t e = 0; e < p->experts; e++) {
        float ge = qtk__bits_f32(qtk__ld32(g + 4 * e));
        if (!qtk__isfinite(ge))
            return qtk__err(QTK_E_VALUE, "tensor '%s': weight_scale_2[%zu] is not finite", name, e);
        for (size_t i = 0; i < p->a; i++)
            for (size_t j = 0; j < p->b; j++) {
                /* dense: pairs and blocks along the last dim j; BMM: along the first dim i (= K) */
                size_t byte, nib, blk;
                if (!p->bmm) {
                    byte = (i * ((p->b + 1) / 2)) + j / 2, nib = j & 1;
                    blk = i * ((p->b + 15) / 16) + j / 16;
                } else {
                    byte = (i / 2) * p->b + j, nib = i & 1;
                    blk = (i / 16) * p->b + j;
                }
                size_t wb = e * (p->bmm ? ((p->a + 1) / 2) * p->b : p->a * ((p->b + 1) / 2));
                size_t sb = e * (p->bmm ? ((p->a + 15) / 16) * p->b : p->a * ((p->b + 15) / 16));
                unsigned code = (w[wb + byte] >> (4 * nib)) & 0xF;
                uint8_t sc = s[sb + blk];
                if (sc & 0x80 || sc == 0x7F)
                    return qtk__err(QTK_E_VALUE, "tensor '%s': block scale byte 0x%02x is not a ue4m3 scale", name, sc);
                /* ModelOpt: block = RN32(f32(weight_scale) * weight_scale_2), then fp4 * block (exact) */
                float blockv = qtk_fmt_decode(QTK_DTYPE_E4M3, sc) * ge;
                float v = qtk_fmt_decode(QTK_DTYPE_E2M1, code) * blockv;
                qtk__st32(out + 4 * (e * p->inner + i * p->b + j), qtk__f32_bits(v));
            }
    }
    return QTK_OK;
}

/* ---- reading ---- */

static qtk_status nvfp4(qtk__hub *h, const char *x, hub_raw *w, hub_raw *sc, hub_raw *g2, int *kind) {
    const qtk_ckpt_tensor *wt = w->t, *st = sc->t;
    int r = wt->rank;
    char a[256], b[256];
    if (!g2)
        return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') is NVFP4 (U8 values, F8_E4M3 block scales) but has no '%s_scale_2'",
                        x, hub_file(h, w), x);
    bool dense = r >= 1 && st->rank == r && st->shape[r - 1] * 8 == wt->shape[r - 1] && wt->shape[r - 1] > 0;
    for (int k = 0; dense && k < r - 1; k++) dense = st->shape[k] == wt->shape[k];
    bool bmm = !dense && r == 3 && st->rank == 3 && st->shape[2] == wt->shape[2] && st->shape[0] == wt->shape[0] &&
               st->shape[1] * 8 == wt->shape[1] && wt->shape[1] > 0;
    if (!dense && !bmm)
        return qtk__err(QTK_E_SHAPE,
                        "'%s_scale' (in '%s') is [%s]; for '%s' U8 [%s] NVFP4 scales are [..., O, K/16] (one per 16 of "
                        "the last dim's K = 2 x %zu) or, for BMM experts, [E, K/16, O]",
                        x, hub_file(h, sc), qtk_shape_format(st->shape, st->rank, a, sizeof a), x,
                        qtk_shape_format(wt->shape, r, b, sizeof b), r ? wt->shape[r - 1] : 0);
    if (g2->t->elem != QTK_ELEM_F32)
        return qtk__err(QTK_E_FORMAT, "'%s_scale_2' (in '%s') is %s; ModelOpt's global scale is F32", x, hub_file(h, g2),
                        qtk_elem_name(g2->t->elem));
    size_t *shape = hub_alloc(h, (size_t)r * sizeof *shape);
    if (!shape) return qtk__err(QTK_E_NOMEM, "out of memory");
    for (int k = 0; k < r; k++) shape[k] = wt->shape[k];
    if (dense) shape[r - 1] *= 2;
    else shape[1] *= 2;
    hub_pending p = {.name = x, .rank = r, .shape = shape,
                     .item = {.raw = {(size_t)(w - h->raw), (size_t)(sc - h->raw), (size_t)(g2 - h->raw)}, .n = 3}};
    *kind = dense ? K_NVFP4 : K_NVFP4_BMM;
    if (g2->t->numel == 1) {
        p.quantized = true;
        qtk_status s = hub_scheme(&p.scheme, "%s", dense ? "nvfp4" : "e2m1,block=16x1:ue4m3,tensor=f32,store=packed:1");
        return s ? s : hub_add(h, &p);
    }
    size_t experts = r >= 2 ? wt->shape[0] : 0;
    if (g2->t->numel != experts || experts == 0)
        return qtk__err(QTK_E_SHAPE, "'%s_scale_2' (in '%s') holds %zu values; ModelOpt's global scale is one value, or one "
                        "per expert (%zu)", x, hub_file(h, g2), g2->t->numel, experts);
    deq_param *dp = hub_alloc(h, sizeof *dp);
    if (!dp) return qtk__err(QTK_E_NOMEM, "out of memory");
    dp->bmm = bmm;
    dp->experts = experts;
    dp->b = shape[r - 1];
    dp->inner = 1;
    for (int k = 1; k < r; k++) dp->inner *= shape[k];
    dp->a = dp->b ? dp->inner / dp->b : 0;
    p.quantized = false;
    p.elem = QTK_ELEM_F32;
    p.item.decode = deq_nvfp4;
    p.item.param = dp;
    qtk_status s = hub_add(h, &p);
    if (!s)
        s = hub_notice(h, x, "NVFP4 with one global scale per expert (%zu) has no single qtk scheme: dequantized to F32 "
                       "(exact values)", experts);
    return s;
}

static qtk_status one(qtk__hub *h, const char *x, hub_raw *w, hub_raw *sc, int *kind) {
    const qtk_ckpt_tensor *wt = w->t, *st = sc->t;
    int r = wt->rank;
    char a[256], b[256], c[256];
    hub_raw *g2 = hub_find(h, x, "_scale_2");
    if (wt->elem == QTK_ELEM_U8 && st->elem == QTK_ELEM_F8_E4M3) return nvfp4(h, x, w, sc, g2, kind);
    hub_pending p = {.name = x, .quantized = true, .rank = r, .shape = wt->shape,
                     .item = {.raw = {(size_t)(w - h->raw), (size_t)(sc - h->raw)}, .n = 2}};
    qtk_status s;
    if (wt->elem == QTK_ELEM_U8 && (st->elem == QTK_ELEM_U8 || st->elem == QTK_ELEM_F8_E8M0)) {
        bool ok = r >= 1 && st->rank == r && wt->shape[r - 1] == 16 * st->shape[r - 1] && wt->shape[r - 1] > 0 && !g2;
        for (int k = 0; ok && k < r - 1; k++) ok = st->shape[k] == wt->shape[k];
        if (!ok)
            return qtk__err(QTK_E_SHAPE, "'%s_scale' (in '%s') is %s [%s]; for MXFP4 '%s' U8 [%s] it is [..., O, K/32]%s",
                            x, hub_file(h, sc), qtk_elem_name(st->elem), qtk_shape_format(st->shape, st->rank, a, sizeof a), x,
                            qtk_shape_format(wt->shape, r, b, sizeof b), g2 ? " and there is no weight_scale_2" : "");
        size_t *shape = hub_alloc(h, (size_t)r * sizeof *shape);
        if (!shape) return qtk__err(QTK_E_NOMEM, "out of memory");
        for (int k = 0; k < r; k++) shape[k] = wt->shape[k];
        shape[r - 1] *= 2;
        p.shape = shape;
        *kind = K_MXFP4;
        s = hub_scheme(&p.scheme, "mxfp4");
    } else if (wt->elem == QTK_ELEM_F8_E4M3 && st->elem == QTK_ELEM_F32 && !g2) {
        size_t pb[2] = {r == 2 ? qtk__ceil_div(wt->shape[0], 128) : 0, r == 2 ? qtk__ceil_div(wt->shape[1], 128) : 0};
        if (st->numel == 1) {
            *kind = K_FP8;
            s = hub_scheme(&p.scheme, "e4m3,tensor=f32,store=native");
        } else if (r == 2 && st->numel == wt->shape[0] && (st->rank == 1 || (st->rank == 2 && st->shape[1] == 1))) {
            *kind = K_FP8_PC;
            s = hub_scheme(&p.scheme, "e4m3,block=*:f32,store=native");
        } else if (r == 2 && hub_same_shape(st, pb, 2)) {
            *kind = K_FP8_PB;
            s = hub_scheme(&p.scheme, "e4m3,block=128x128:f32,store=native");
        } else {
            return qtk__err(QTK_E_SHAPE,
                            "'%s_scale' (in '%s') is F32 [%s]; for FP8 '%s' [%s] ModelOpt writes [] (per tensor), [O] "
                            "(per channel) or [%s] (128x128 blocks)",
                            x, hub_file(h, sc), qtk_shape_format(st->shape, st->rank, a, sizeof a), x,
                            qtk_shape_format(wt->shape, r, b, sizeof b), qtk_shape_format(pb, 2, c, sizeof c));
        }
    } else {
        return qtk__err(QTK_E_FORMAT,
                        "'%s' (%s, in '%s') with '%s_scale' (%s)%s is no ModelOpt format qtk knows (NVFP4: U8 + F8_E4M3 "
                        "+ F32 weight_scale_2; MXFP4: U8 + U8; FP8: F8_E4M3 + F32)",
                        x, qtk_elem_name(wt->elem), hub_file(h, w), x, qtk_elem_name(st->elem),
                        g2 ? " and a weight_scale_2" : "");
    }
    return s ? s : hub_add(h, &p);
}

static qtk_status fold(qtk__hub *h) {
    const char *algo = config_algo(h);
    bool check = algo && (strcmp(algo, "NVFP4") == 0 || strcmp(algo, "FP8") == 0 || strcmp(algo, "MXFP4") == 0);
    size_t found = 0;
    for (size_t i = 0; i < h->n_raw; i++) {
        hub_raw *sc = &h->raw[i];
        char *x = hub_strip(h, sc->t->name, "_scale");
        if (!x) continue;
        hub_raw *w = hub_find(h, x, "");
        if (!w) {
            if (qtk__has_suffix(sc->t->name, "weight_scale"))
                return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') has no weight '%s' beside it", sc->t->name, hub_file(h, sc), x);
            continue; /* input_scale, k_scale, pre_quant_scale...: activations, kept as they are */
        }
        int kind = 0;
        qtk_status st = one(h, x, w, sc, &kind);
        if (st) return st;
        if (check && strcmp(algo_of[kind], algo) != 0)
            return qtk__err(QTK_E_FORMAT, "'%s' says quant_algo \"%s\" but '%s' (in '%s') is %s", h->config_file, algo, x,
                            hub_file(h, w), algo_of[kind]);
        hub_raw *g2 = hub_find(h, x, "_scale_2");
        w->used = sc->used = true;
        if (g2) g2->used = true;
        found++;
    }
    for (size_t i = 0; i < h->n_raw; i++) {
        const hub_raw *r = &h->raw[i];
        if (!r->used && qtk__has_suffix(r->t->name, "weight_scale_2"))
            return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') has no NVFP4 weight and weight_scale beside it", r->t->name,
                            hub_file(h, r));
        if (!r->used && r->t->elem == QTK_ELEM_F8_E4M3 && qtk__has_suffix(r->t->name, "weight"))
            return qtk__err(QTK_E_FORMAT, "F8_E4M3 weight '%s' (in '%s') has no '%s_scale'", r->t->name, hub_file(h, r),
                            r->t->name);
    }
    if (!found && h->qcfg)
        return qtk__err(QTK_E_FORMAT, "'%s' says the checkpoint is ModelOpt-quantized but no weight has a weight_scale",
                        h->config_file);
    return QTK_OK;
}

/* ---- writing ---- */

static int classify(const qtk_ckpt_tensor *t) {
    static const char *const specs[] = {"nvfp4", "e2m1,block=16x1:ue4m3,tensor=f32,store=packed:1", "mxfp4",
                                        "e4m3,tensor=f32,store=native", "e4m3,block=*:f32,store=native",
                                        "e4m3,block=128x128:f32,store=native"};
    static const int kinds[] = {K_NVFP4, K_NVFP4_BMM, K_MXFP4, K_FP8, K_FP8_PC, K_FP8_PB};
    const size_t *sh = t->shape;
    int r = t->rank;
    for (int i = 0; i < 6; i++) {
        qtk_scheme s;
        if (qtk_scheme_parse(specs[i], &s) || !qtk_scheme_equal(&s, &t->scheme)) continue;
        switch (kinds[i]) {
        case K_NVFP4: return r >= 1 && sh[r - 1] % 16 == 0 ? K_NVFP4 : 0;
        case K_NVFP4_BMM: return r == 3 && sh[1] % 16 == 0 ? K_NVFP4_BMM : 0;
        case K_MXFP4: return r >= 1 && sh[r - 1] % 32 == 0 ? K_MXFP4 : 0;
        case K_FP8: return K_FP8;
        default: return r == 2 ? kinds[i] : 0;
        }
    }
    return 0;
}

static qtk_status plan(hub_wctx *wc, const qtk_ckpt_tensor *t, hub_wtensor *w) {
    int kind = classify(t);
    char spec[160], sh[128];
    if (!kind) {
        if (qtk_scheme_format(&t->scheme, spec, sizeof spec, NULL)) spec[0] = '\0';
        return qtk__err(QTK_E_UNSUPPORTED,
                        "layout modelopt stores nvfp4 (last dim a multiple of 16), the BMM-expert form "
                        "e2m1,block=16x1:ue4m3,tensor=f32,store=packed:1 on [E, K, O], mxfp4 (last dim a multiple of 32), "
                        "and e4m3,store=native with tensor=f32, block=*:f32 or block=128x128:f32 (2-D); this is '%s' on [%s]",
                        spec, qtk_shape_format(t->shape, t->rank, sh, sizeof sh));
    }
    qtk_layout L;
    qtk_status st = qtk_layout_compute(&t->scheme, t->shape, t->rank, &L);
    if (st) return st;
    w->kind = kind;
    size_t shape[QTK_MAX_RANK];
    int r = t->rank;
    for (int k = 0; k < r; k++) shape[k] = L.storage_shape[k]; /* packed/native: units are bytes */
    qtk_elem ve = kind <= K_MXFP4 ? QTK_ELEM_U8 : QTK_ELEM_F8_E4M3;
    hub_wpiece *v = hub_wpiece_add(wc, w, t, "", ve, kind <= K_MXFP4 ? shape : t->shape, r, L.value_bytes);
    size_t o[1] = {r ? t->shape[0] : 1};
    hub_wpiece *s = hub_wpiece_add(wc, w, t, "_scale", kind == K_MXFP4 ? QTK_ELEM_U8 : hub_scale_elem(L.scale_dtype),
                                   kind == K_FP8_PC ? o : L.grid, kind == K_FP8 ? 0 : kind == K_FP8_PC ? 1 : r, L.scale_bytes);
    if (!v || !s) return qtk__err(QTK_E_NOMEM, "out of memory");
    s->src_off = L.scales_offset;
    if (kind == K_NVFP4 || kind == K_NVFP4_BMM) {
        hub_wpiece *g = hub_wpiece_add(wc, w, t, "_scale_2", QTK_ELEM_F32, NULL, 0, 4);
        if (!g) return qtk__err(QTK_E_NOMEM, "out of memory");
        g->src_off = L.global_offset;
    }
    return QTK_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The modules left unquantized: every float matrix named *.weight that is stored as it is. */
static json_t *exclude_modules(hub_wctx *wc) {
    size_t n = 0;
    const char **m = malloc((wc->d->n_tensors ? wc->d->n_tensors : 1) * sizeof *m);
    json_t *a = json_array();
    if (!m || !a) {
        free(m);
        json_decref(a);
        return NULL;
    }
    for (size_t i = 0; i < wc->d->n_tensors; i++) {
        const qtk_ckpt_tensor *t = &wc->d->tensors[i];
        if (!t->quantized && t->rank >= 2 && qtk_elem_is_float(t->elem) && qtk__has_suffix(t->name, ".weight"))
            m[n++] = hub_module(wc, t->name);
    }
    qsort(m, n, sizeof *m, cmp_str);
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) ok = json_array_append_new(a, json_string(m[i])) == 0;
    free(m);
    if (!ok) {
        json_decref(a);
        return NULL;
    }
    return a;
}

static qtk_status config(hub_wctx *wc, json_t *q, json_t **hfq_out) {
    int kind = 0;
    bool mixed = false;
    for (size_t i = 0; i < wc->d->n_tensors; i++) {
        int k = wc->d->tensors[i].quantized ? wc->wt[i].kind : 0;
        if (!k) continue;
        if (k == K_NVFP4_BMM) k = K_NVFP4;
        if (kind && k != kind) mixed = true;
        kind = k;
    }
    if (!kind)
        return qtk__err(QTK_E_UNSUPPORTED, "layout modelopt: no tensor is quantized; a checkpoint without one is written "
                        "with --layout qtk");
    const char *algo = mixed ? "MIXED_PRECISION" : algo_of[kind];
    json_t *hfq = wc->src_hfq ? json_deep_copy(wc->src_hfq) : json_object();
    json_t *quant = NULL, *excl = exclude_modules(wc);
    qtk_status st = hfq && excl ? QTK_OK : qtk__err(QTK_E_NOMEM, "out of memory");
    if (!st && !wc->src_hfq) {
        json_t *prod = json_pack("{s:s, s:s}", "name", "qtk", "version", qtk_version());
        st = hub_jset(hfq, "producer", prod);
    }
    if (!st) {
        quant = json_object_get(hfq, "quantization");
        if (!json_is_object(quant)) st = hub_jset(hfq, "quantization", quant = json_object());
    }
    if (!st) st = hub_jset(quant, "quant_algo", json_string(algo));
    if (!st && !json_object_get(quant, "kv_cache_quant_algo")) st = hub_jset(quant, "kv_cache_quant_algo", json_null());
    if (!st && (kind == K_NVFP4 || kind == K_MXFP4) && !mixed)
        st = hub_jset(quant, "group_size", json_integer(kind == K_NVFP4 ? 16 : 32));
    if (!st) st = hub_jset(quant, "exclude_modules", json_incref(excl));
    if (!st && mixed) {
        json_t *layers = json_object();
        st = layers ? QTK_OK : qtk__err(QTK_E_NOMEM, "out of memory");
        for (size_t i = 0; i < wc->d->n_tensors && !st; i++) {
            const qtk_ckpt_tensor *t = &wc->d->tensors[i];
            int k = t->quantized ? wc->wt[i].kind : 0;
            if (!k) continue;
            json_t *e = k == K_NVFP4 || k == K_NVFP4_BMM || k == K_MXFP4
                            ? json_pack("{s:s, s:i}", "quant_algo", algo_of[k], "group_size", k == K_MXFP4 ? 32 : 16)
                            : json_pack("{s:s}", "quant_algo", algo_of[k]);
            st = hub_jset(layers, hub_module(wc, t->name), e);
        }
        if (!st) st = hub_jset(quant, "quantized_layers", layers);
        else json_decref(layers);
    }
    /* config.json's copy (§3.5): config groups for FP8 and NVFP4 only */
    if (!st && !wc->src_qcfg && !mixed && (kind == K_NVFP4 || kind == K_FP8)) {
        json_t *args = kind == K_NVFP4
                           ? json_pack("{s:b, s:i, s:s, s:i}", "dynamic", 0, "num_bits", 4, "type", "float", "group_size", 16)
                           : json_pack("{s:b, s:i, s:s}", "dynamic", 0, "num_bits", 8, "type", "float");
        json_t *g = json_pack("{s:{s:O, s:O, s:[s]}}", "group_0", "input_activations", args, "weights", args, "targets",
                              "Linear");
        json_decref(args);
        st = hub_jset(q, "config_groups", g);
    }
    if (!st) st = hub_jset(q, "ignore", json_incref(excl));
    if (!st) st = hub_jset(q, "quant_algo", json_string(algo));
    if (!st && !json_object_get(q, "producer") && json_object_get(hfq, "producer"))
        st = hub_jset(q, "producer", json_deep_copy(json_object_get(hfq, "producer")));
    if (!st) st = hub_jset(q, "quant_method", json_string("modelopt"));
    json_decref(excl);
    if (st) {
        json_decref(hfq);
        return st;
    }
    *hfq_out = hfq;
    return QTK_OK;
}

const hub_conv hub_modelopt_conv = {QTK_LAYOUT_MODELOPT, "modelopt", methods, sniff, fold, plan, config, NULL};
