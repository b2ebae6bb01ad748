/* hub_deepseek.c — block FP8 as DeepSeek-V3/R1 and Qwen3-FP8 publish it (HUB_LAYOUTS.md §5):
 * `P.weight` F8_E4M3 [O, K] and `P.weight_scale_inv` F32 [ceil(O/bh), ceil(K/bw)], config.json
 * `{"quant_method": "fp8", "weight_block_size": [bh, bw], ...}`.
 *
 * Despite its name the scale is a multiplier (DeepSeek's kernel computes x * s), so the qtk
 * tensor is `e4m3,block=BHxBW:f32,store=native` with the two tensors' bytes concatenated:
 * qtk's block grid, row-major, edge blocks cut short, is exactly the scale tensor. */
#include "hub/hub_internal.h"

#include <stdio.h>

static const char *const methods[] = {"fp8", NULL};

static bool sniff(const qtk__hub *h, const char **why) {
    for (size_t i = 0; i < h->n_raw; i++)
        if (qtk__has_suffix(h->raw[i].t->name, "_scale_inv")) {
            *why = "*_scale_inv";
            return true;
        }
    return false;
}

/* weight_block_size from the config, [128, 128] when there is none. */
static qtk_status block_size(const qtk__hub *h, long long bs[2], bool *given) {
    bs[0] = bs[1] = 128;
    *given = false;
    const json_t *b = hub_json(h->qcfg, "weight_block_size");
    if (!b || json_is_null(b)) return QTK_OK;
    if (!json_is_array(b) || json_array_size(b) != 2 || !hub_json_int(json_array_get(b, 0), &bs[0]) ||
        !hub_json_int(json_array_get(b, 1), &bs[1]) || bs[0] < 1 || bs[1] < 1 || bs[0] > 65535 || bs[1] > 65535)
        return qtk__err(QTK_E_FORMAT, "'%s': quantization_config.weight_block_size is not [rows, cols] of 1..65535",
                        h->config_file);
    *given = true;
    return QTK_OK;
}

static qtk_status fold(qtk__hub *h) {
    long long bs[2];
    bool given;
    qtk_status st = block_size(h, bs, &given);
    if (st) return st;
    const char *fmt = hub_json_str(h->qcfg, "fmt");
    if (fmt && strcmp(fmt, "e4m3") != 0 && strcmp(fmt, "e5m2") != 0)
        return qtk__err(QTK_E_UNSUPPORTED, "'%s': quantization_config.fmt '%.20s' is not e4m3 or e5m2", h->config_file, fmt);
    size_t found = 0;
    char a[256], b[256], c[256];
    for (size_t i = 0; i < h->n_raw; i++) {
        hub_raw *sc = &h->raw[i];
        char *x = hub_strip(h, sc->t->name, "_scale_inv");
        if (!x) continue;
        hub_raw *w = hub_find(h, x, "");
        if (!w)
            return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') has no weight '%s' beside it", sc->t->name, hub_file(h, sc), x);
        const qtk_ckpt_tensor *wt = w->t, *stt = sc->t;
        if ((wt->elem != QTK_ELEM_F8_E4M3 && wt->elem != QTK_ELEM_F8_E5M2) || wt->rank != 2)
            return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') is %s [%s]; block FP8 weights are F8_E4M3 [O, K]", x,
                            hub_file(h, w), qtk_elem_name(wt->elem), qtk_shape_format(wt->shape, wt->rank, a, sizeof a));
        qtk_dtype dt = hub_scale_dtype(stt->elem);
        if (dt == QTK_DTYPE_NONE || dt == QTK_DTYPE_UE4M3 || stt->elem == QTK_ELEM_U8)
            return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') is %s; block FP8 scales are F32 (or BF16, F16, F8_E8M0)",
                            stt->name, hub_file(h, sc), qtk_elem_name(stt->elem));
        size_t want[2] = {qtk__ceil_div(wt->shape[0], (size_t)bs[0]), qtk__ceil_div(wt->shape[1], (size_t)bs[1])};
        if (!hub_same_shape(stt, want, 2))
            return qtk__err(QTK_E_SHAPE,
                            "'%s' (in '%s') is [%s]; %lldx%lld blocks (%s) on '%s' [%s] need [%s]", stt->name,
                            hub_file(h, sc), qtk_shape_format(stt->shape, stt->rank, a, sizeof a), bs[0], bs[1],
                            given ? "config.json weight_block_size" : "the default, no config.json", x,
                            qtk_shape_format(wt->shape, 2, b, sizeof b), qtk_shape_format(want, 2, c, sizeof c));
        hub_pending p = {.name = x, .quantized = true, .rank = 2, .shape = wt->shape,
                         .item = {.raw = {(size_t)(w - h->raw), i}, .n = 2}};
        st = hub_scheme(&p.scheme, "%s,block=%lldx%lld:%s,store=native", wt->elem == QTK_ELEM_F8_E4M3 ? "e4m3" : "e5m2",
                        bs[0], bs[1], hub_dtype_spec(dt));
        if (!st) st = hub_add(h, &p);
        if (st) return st;
        w->used = sc->used = true;
        found++;
    }
    for (size_t i = 0; i < h->n_raw; i++) {
        const hub_raw *r = &h->raw[i];
        if (!r->used && r->t->elem == QTK_ELEM_F8_E4M3 && qtk__has_suffix(r->t->name, "weight"))
            return qtk__err(QTK_E_FORMAT, "F8_E4M3 weight '%s' (in '%s') has no '%s_scale_inv'", r->t->name, hub_file(h, r),
                            r->t->name);
    }
    if (!found && h->qcfg)
        return qtk__err(QTK_E_FORMAT, "'%s' says quant_method \"fp8\" (block FP8 with *_scale_inv scales) but no tensor is "
                        "named *_scale_inv", h->config_file);
    return QTK_OK;
}

/* ---- writing ---- */

static qtk_status fit(const qtk_ckpt_tensor *t, qtk_layout *L) {
    const qtk_scheme *s = &t->scheme;
    char spec[160], sh[128];
    if (qtk_scheme_format(s, spec, sizeof spec, NULL)) spec[0] = '\0';
    if ((s->value != QTK_VALUE_E4M3 && s->value != QTK_VALUE_E5M2) || s->mode != QTK_MODE_SYMMETRIC ||
        s->store != QTK_STORE_NATIVE || s->block_rank == 0 || s->tensor_dtype != QTK_DTYPE_NONE || t->rank != 2 ||
        s->block_dtype == QTK_DTYPE_UE4M3)
        return qtk__err(QTK_E_UNSUPPORTED,
                        "layout deepseek stores 2-D e4m3 weights with a grid of block scales "
                        "(e4m3,block=128x128:f32,store=native; scales f32, bf16, f16 or ue8m0); this is '%s' on [%s]",
                        spec, qtk_shape_format(t->shape, t->rank, sh, sizeof sh));
    return qtk_layout_compute(s, t->shape, t->rank, L);
}

static qtk_status plan(hub_wctx *wc, const qtk_ckpt_tensor *t, hub_wtensor *w) {
    qtk_layout L;
    qtk_status st = fit(t, &L);
    if (st) return st;
    hub_wpiece *v = hub_wpiece_add(wc, w, t, "", t->scheme.value == QTK_VALUE_E4M3 ? QTK_ELEM_F8_E4M3 : QTK_ELEM_F8_E5M2,
                                   t->shape, 2, L.value_bytes);
    hub_wpiece *s = hub_wpiece_add(wc, w, t, "_scale_inv", hub_scale_elem(L.scale_dtype), L.grid, 2, L.scale_bytes);
    if (!v || !s) return qtk__err(QTK_E_NOMEM, "out of memory");
    s->src_off = L.scales_offset;
    return QTK_OK;
}

static qtk_status config(hub_wctx *wc, json_t *q, json_t **hfq) {
    (void)hfq;
    const qtk_ckpt_tensor *first = NULL;
    qtk_layout L0;
    for (size_t i = 0; i < wc->d->n_tensors; i++) {
        const qtk_ckpt_tensor *t = &wc->d->tensors[i];
        qtk_layout L;
        if (!t->quantized || qtk_layout_compute(&t->scheme, t->shape, t->rank, &L)) continue;
        if (!first) {
            first = t;
            L0 = L;
        } else if (L.block[0] != L0.block[0] || L.block[1] != L0.block[1] || t->scheme.value != first->scheme.value) {
            return qtk__err(QTK_E_UNSUPPORTED,
                            "layout deepseek has one weight_block_size and fmt for the checkpoint: '%s' has %zux%zu "
                            "blocks of %s, '%s' %zux%zu of %s",
                            first->name, L0.block[0], L0.block[1], qtk_value_name(first->scheme.value), t->name, L.block[0],
                            L.block[1], qtk_value_name(t->scheme.value));
        }
    }
    if (!first)
        return qtk__err(QTK_E_UNSUPPORTED, "layout deepseek: no tensor is quantized (e4m3 with block scales); "
                        "a checkpoint without one is written with --layout qtk");
    json_t *bs = json_array();
    qtk_status st = bs ? QTK_OK : qtk__err(QTK_E_NOMEM, "out of memory");
    if (!st && (json_array_append_new(bs, json_integer((json_int_t)L0.block[0])) ||
                json_array_append_new(bs, json_integer((json_int_t)L0.block[1]))))
        st = qtk__err(QTK_E_NOMEM, "out of memory");
    if (!st && !json_object_get(q, "activation_scheme")) st = hub_jset(q, "activation_scheme", json_string("dynamic"));
    if (!st) st = hub_jset(q, "fmt", json_string(first->scheme.value == QTK_VALUE_E4M3 ? "e4m3" : "e5m2"));
    if (!st) st = hub_jset(q, "quant_method", json_string("fp8"));
    if (!st) {
        st = hub_jset(q, "weight_block_size", bs);
        bs = NULL;
    }
    json_decref(bs);
    return st;
}

const hub_conv hub_deepseek_conv = {QTK_LAYOUT_DEEPSEEK, "deepseek", methods, sniff, fold, plan, config, NULL};
