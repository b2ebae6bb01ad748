/* hub_gptoss.c — gpt-oss MXFP4 (HUB_LAYOUTS.md §2): the MoE expert projections X as
 * `X_blocks` U8 [..., K/32, 16] (e2m1 pairs, first in the low nibble) and `X_scales` U8
 * [..., K/32] (e8m0 biased exponents), config.json `{"quant_method": "mxfp4", ...}`.
 *
 * The blocks tensor is simply a [..., K/2] packed array, so the qtk tensor is `mxfp4` on
 * [..., K] holding blocks ‖ scales unchanged. (qtk produces [E, O, K]; transformers'
 * dequantizing loader transposes the last two axes for its x @ W — a model convention, not
 * part of the stored layout.) */
#include "hub/hub_internal.h"

static const char *const methods[] = {"mxfp4", NULL};

static bool sniff(const qtk__hub *h, const char **why) {
    for (size_t i = 0; i < h->n_raw; i++) {
        const char *n = h->raw[i].t->name;
        if (!qtk__has_suffix(n, "_blocks")) continue;
        size_t k = strlen(n) - 7;
        char buf[1024];
        if (k + 8 > sizeof buf) continue;
        memcpy(buf, n, k);
        buf[k] = '\0';
        if (hub_find(h, buf, "_scales")) {
            *why = "*_blocks with *_scales";
            return true;
        }
    }
    return false;
}

static qtk_status fold(qtk__hub *h) {
    qtk_scheme mx;
    qtk_status st = qtk_scheme_parse("mxfp4", &mx);
    if (st) return st;
    size_t found = 0;
    char a[256], b[256], c[256];
    for (size_t i = 0; i < h->n_raw; i++) {
        hub_raw *bl = &h->raw[i];
        char *x = hub_strip(h, bl->t->name, "_blocks");
        if (!x) continue;
        hub_raw *sc = hub_find(h, x, "_scales");
        if (!sc)
            return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') has no companion '%s_scales'", bl->t->name, hub_file(h, bl), x);
        const qtk_ckpt_tensor *bt = bl->t, *stt = sc->t;
        int r = bt->rank;
        if (bt->elem != QTK_ELEM_U8 || r < 2 || bt->shape[r - 1] != 16 || r - 1 > QTK_MAX_RANK)
            return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') is %s [%s]; gpt-oss blocks are U8 [..., K/32, 16]", bt->name,
                            hub_file(h, bl), qtk_elem_name(bt->elem), qtk_shape_format(bt->shape, r, a, sizeof a));
        if ((stt->elem != QTK_ELEM_U8 && stt->elem != QTK_ELEM_F8_E8M0) || !hub_same_shape(stt, bt->shape, r - 1))
            return qtk__err(QTK_E_SHAPE, "'%s' (in '%s') is %s [%s]; for '%s' [%s] the scales are U8 (or F8_E8M0) [%s]",
                            stt->name, hub_file(h, sc), qtk_elem_name(stt->elem), qtk_shape_format(stt->shape, stt->rank, a, sizeof a),
                            bt->name, qtk_shape_format(bt->shape, r, b, sizeof b), qtk_shape_format(bt->shape, r - 1, c, sizeof c));
        size_t *shape = hub_alloc(h, (size_t)(r - 1) * sizeof *shape);
        if (!shape) return qtk__err(QTK_E_NOMEM, "out of memory");
        for (int k = 0; k < r - 2; k++) shape[k] = bt->shape[k];
        if (!qtk__mul_ok(bt->shape[r - 2], 32, &shape[r - 2])) return qtk__err(QTK_E_SHAPE, "'%s' is too large", bt->name);
        hub_pending p = {.name = x, .quantized = true, .scheme = mx, .rank = r - 1, .shape = shape,
                         .item = {.raw = {i, (size_t)(sc - h->raw)}, .n = 2}};
        if ((st = hub_add(h, &p))) return st;
        bl->used = sc->used = true;
        found++;
    }
    for (size_t i = 0; i < h->n_raw; i++) {
        const hub_raw *r = &h->raw[i];
        if (!r->used && qtk__has_suffix(r->t->name, "_scales"))
            return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') has no '%.*s_blocks' beside it", r->t->name, hub_file(h, r),
                            (int)(strlen(r->t->name) - 7), r->t->name);
    }
    if (!found && h->qcfg)
        return qtk__err(QTK_E_FORMAT, "'%s' says quant_method \"mxfp4\" (gpt-oss *_blocks and *_scales) but no tensor is "
                        "named *_blocks", h->config_file);
    return QTK_OK;
}

/* ---- writing ---- */

static qtk_status plan(hub_wctx *wc, const qtk_ckpt_tensor *t, hub_wtensor *w) {
    qtk_scheme mx;
    qtk_status st = qtk_scheme_parse("mxfp4", &mx);
    if (st) return st;
    char spec[160], sh[128];
    if (!qtk_scheme_equal(&t->scheme, &mx) || t->rank < 1 || t->shape[t->rank - 1] % 32 != 0) {
        if (qtk_scheme_format(&t->scheme, spec, sizeof spec, NULL)) spec[0] = '\0';
        return qtk__err(QTK_E_UNSUPPORTED,
                        "layout gpt-oss stores mxfp4 (e2m1,block=32:ue8m0,store=packed:0) on tensors whose last "
                        "dimension is a multiple of 32; this is '%s' on [%s]",
                        spec, qtk_shape_format(t->shape, t->rank, sh, sizeof sh));
    }
    qtk_layout L;
    if ((st = qtk_layout_compute(&t->scheme, t->shape, t->rank, &L))) return st;
    size_t shape[QTK_MAX_RANK + 1];
    int r = t->rank;
    for (int k = 0; k < r - 1; k++) shape[k] = t->shape[k];
    shape[r - 1] = t->shape[r - 1] / 32;
    shape[r] = 16;
    hub_wpiece *bl = hub_wpiece_add(wc, w, t, "_blocks", QTK_ELEM_U8, shape, r + 1, L.value_bytes);
    hub_wpiece *sc = hub_wpiece_add(wc, w, t, "_scales", QTK_ELEM_U8, shape, r, L.scale_bytes);
    if (!bl || !sc) return qtk__err(QTK_E_NOMEM, "out of memory");
    sc->src_off = L.scales_offset;
    return QTK_OK;
}

static qtk_status config(hub_wctx *wc, json_t *q, json_t **hfq) {
    (void)hfq;
    bool any = false;
    for (size_t i = 0; i < wc->d->n_tensors; i++) any |= wc->d->tensors[i].quantized;
    if (!any)
        return qtk__err(QTK_E_UNSUPPORTED, "layout gpt-oss: no tensor is mxfp4; a checkpoint without one is written "
                        "with --layout qtk");
    qtk_status st = QTK_OK;
    if (!json_object_get(q, "modules_to_not_convert")) {
        /* the unquantized matrices, so that a loader leaves them alone */
        json_t *m = json_array();
        if (!m) return qtk__err(QTK_E_NOMEM, "out of memory");
        for (size_t i = 0; i < wc->d->n_tensors && !st; i++) {
            const qtk_ckpt_tensor *t = &wc->d->tensors[i];
            if (!t->quantized && t->rank >= 2 && qtk_elem_is_float(t->elem) && qtk__has_suffix(t->name, ".weight"))
                if (json_array_append_new(m, json_string(hub_module(wc, t->name)))) st = qtk__err(QTK_E_NOMEM, "out of memory");
        }
        if (!st) st = hub_jset(q, "modules_to_not_convert", m);
        else json_decref(m);
    }
    if (!st) st = hub_jset(q, "quant_method", json_string("mxfp4"));
    return st;
}

const hub_conv hub_gptoss_conv = {QTK_LAYOUT_GPT_OSS, "gpt-oss", methods, sniff, fold, plan, config, NULL};
