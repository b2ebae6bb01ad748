/* hub_torchao.c — torchao's prototype safetensors flattening of its tensor subclasses
 * (HUB_LAYOUTS.md §7), read only: §7.1 calls it "not a stable Hub format. Read it
 * opportunistically; do not write it as a primary target."
 *
 * A subclass tensor at `module.param` is stored as `module._param_qdata`, `module._param_scale`
 * (and `module._param_per_tensor_scale`), described by `__metadata__["module.param"]`, a JSON
 * string {"_type": "NVFP4Tensor" | "MXTensor" | "Float8Tensor", "_data": {attributes}, ...}:
 *
 *   NVFP4Tensor  qdata U8 [..., M, K/2] (low nibble first), scale F8_E4M3 [..., M, K/16],
 *                per_tensor_scale F32 [] (a multiplier)      -> nvfp4 (without: no tensor level)
 *   MXTensor     qdata U8 [..., K/2] (fp4) or F8_E4M3/E5M2 [..., K], scale F8_E8M0 [..., K/32]
 *                                                            -> mxfp4, mxfp8, e5m2,block=32:ue8m0
 *   Float8Tensor qdata F8_E4M3, scale F32 []                 -> e4m3,tensor=f32,store=native
 *
 * With `is_swizzled_scales` the scales are in cuBLAS's block-scaling layout (§7.4: 128x4 tiles,
 * byte 16b + 4a + c of a tile holding S[128 rb + 32 a + b][4 cb + c]); they are unswizzled on
 * load. */
#include "hub/hub_internal.h"

#include <stdio.h>
#include <stdlib.h>

static const char *const methods[] = {"torchao", NULL};

static bool sniff(const qtk__hub *h, const char **why) {
    for (size_t i = 0; i < h->n_raw; i++)
        if (strstr(h->raw[i].t->name, "._weight_qdata")) {
            *why = "*._weight_qdata";
            return true;
        }
    return false;
}

typedef struct {
    size_t lead, rows, cols;   /* scale matrix per leading index: rows x cols */
    size_t tiles_r, tiles_c;
    size_t value_bytes, swizzled_bytes;
    bool global;               /* a per_tensor_scale follows */
} swz_param;

/* parts: qdata, swizzled scale, [per_tensor_scale] */
static qtk_status unswizzle(qtk__hub *h, const char *name, const hub_item *it, const uint8_t *const *part, uint8_t *out) {
    (void)h;
    (void)name;
    const swz_param *p = it->param;
    memcpy(out, part[0], p->value_bytes);
    uint8_t *s = out + p->value_bytes;
    size_t tile_bytes = 512, per_lead = p->tiles_r * p->tiles_c * tile_bytes;
    for (size_t l = 0; l < p->lead; l++)
        for (size_t r = 0; r < p->rows; r++)
            for (size_t c = 0; c < p->cols; c++) {
                size_t rb = r / 128, a = (r % 128) / 32, b = r % 32, cb = c / 4, cc = c % 4;
                s[(l * p->rows + r) * p->cols + c] =
                    part[1][l * per_lead + (rb * p->tiles_c + cb) * tile_bytes + 16 * b + 4 * a + cc];
            }
    if (p->global) memcpy(s + p->lead * p->rows * p->cols, part[2], 4);
    return QTK_OK;
}

static bool truthy(const json_t *v) { return json_is_true(v); }

/* The attribute's torch.dtype name: {"_type": "torch.dtype", "_data": "float8_e4m3fn"} or a string. */
static const char *dtype_attr(const json_t *v) {
    if (json_is_string(v)) return json_string_value(v);
    return hub_json_str(v, "_data");
}

/* The qtk scheme of one tensor subclass (NVFP4Tensor, MXTensor, Float8Tensor) given its
 * qdata and scale tensors; *spec NULL for a plain {"_type": "Tensor"}. shape (qdata's, copied)
 * becomes the logical shape (two FP4 values a byte), *bs the scale block (0: per tensor), and
 * *g is dropped where the subclass has no global. */
static qtk_status subclass_scheme(const char *key, const char *type, const json_t *data, const qtk_ckpt_tensor *qt,
                                  const qtk_ckpt_tensor *st, hub_raw **g, size_t *shape, int r, long long *bs,
                                  const char **spec) {
    *spec = NULL;
    hub_json_int(hub_json(data, "block_size"), bs);
    if (strcmp(type, "NVFP4Tensor") == 0) {
        if (qt->elem != QTK_ELEM_U8 || st->elem != QTK_ELEM_F8_E4M3 || (*bs && *bs != 16))
            return qtk__err(QTK_E_FORMAT, "NVFP4Tensor '%s': qdata %s, scale %s, block_size %lld; expected U8, F8_E4M3, 16", key,
                            qtk_elem_name(qt->elem), qtk_elem_name(st->elem), *bs);
        shape[r - 1] *= 2;
        *bs = 16;
        if (*g && (*g)->t->numel != 1)
            return qtk__err(QTK_E_UNSUPPORTED, "NVFP4Tensor '%s': a per_tensor_scale of %zu values (one per expert) has no "
                            "single qtk scheme", key, (*g)->t->numel);
        *spec = *g ? "nvfp4" : "e2m1,block=16:ue4m3,store=packed:0";
    } else if (strcmp(type, "MXTensor") == 0) {
        const char *el = dtype_attr(hub_json(data, "elem_dtype"));
        if (st->elem != QTK_ELEM_F8_E8M0 && st->elem != QTK_ELEM_U8)
            return qtk__err(QTK_E_FORMAT, "MXTensor '%s': scale is %s; expected F8_E8M0", key, qtk_elem_name(st->elem));
        if (qt->elem == QTK_ELEM_U8 && (!el || strstr(el, "float4"))) {
            shape[r - 1] *= 2;
            *spec = "mxfp4";
        } else if (qt->elem == QTK_ELEM_F8_E4M3) {
            *spec = "mxfp8";
        } else if (qt->elem == QTK_ELEM_F8_E5M2) {
            *spec = "e5m2,block=32:ue8m0,store=native";
        } else {
            return qtk__err(QTK_E_FORMAT, "MXTensor '%s': qdata is %s (elem_dtype %s)", key, qtk_elem_name(qt->elem),
                            el ? el : "?");
        }
        if (*bs && *bs != 32) return qtk__err(QTK_E_UNSUPPORTED, "MXTensor '%s': block_size %lld; qtk reads 32", key, *bs);
        *bs = 32;
        *g = NULL;
    } else if (strcmp(type, "Float8Tensor") == 0) {
        if (qt->elem != QTK_ELEM_F8_E4M3 || st->elem != QTK_ELEM_F32 || st->numel != 1)
            return qtk__err(QTK_E_UNSUPPORTED, "Float8Tensor '%s': qtk reads F8_E4M3 qdata with one F32 scale (per tensor); "
                            "this has %s with %zu %s scales", key, qtk_elem_name(qt->elem), st->numel, qtk_elem_name(st->elem));
        *spec = "e4m3,tensor=f32,store=native";
        *bs = 0;
        *g = NULL;
    }
    return QTK_OK;
}

/* Checks the block scales against the logical shape, or plans their unswizzling. */
static qtk_status block_scales(qtk__hub *h, hub_pending *p, const char *key, const char *type, const json_t *data,
                               const qtk_ckpt_tensor *qt, const qtk_ckpt_tensor *st, bool has_global, size_t bs) {
    int r = p->rank;
    const size_t *shape = p->shape;
    size_t rows = r >= 2 ? shape[r - 2] : 1, cols = qtk__ceil_div(shape[r - 1], bs), lead = 1;
    for (int k = 0; k < r - 2; k++) lead *= shape[k];
    size_t want[QTK_MAX_RANK];
    memcpy(want, shape, (size_t)r * sizeof *want);
    want[r - 1] = cols;
    if (truthy(hub_json(data, "is_swizzled_scales"))) {
        swz_param *sp = hub_alloc(h, sizeof *sp);
        if (!sp) return qtk__err(QTK_E_NOMEM, "out of memory");
        *sp = (swz_param){lead, rows, cols, qtk__ceil_div(rows, 128), qtk__ceil_div(cols, 4), qt->nbytes, 0, has_global};
        sp->swizzled_bytes = lead * sp->tiles_r * sp->tiles_c * 512;
        if (st->nbytes != sp->swizzled_bytes)
            return qtk__err(QTK_E_SHAPE, "'%s' holds %zu swizzled scales; %zux%zu scales per %zu leading rows need %zu "
                            "(128x4 tiles)", st->name, st->nbytes, rows, cols, lead, sp->swizzled_bytes);
        p->item.decode = unswizzle;
        p->item.param = sp;
    } else if (!hub_same_shape(st, want, r)) {
        char b1[128], b2[128], b3[128];
        return qtk__err(QTK_E_SHAPE, "'%s' is [%s]; %s '%s' [%s] needs scales [%s]", st->name,
                        qtk_shape_format(st->shape, st->rank, b1, sizeof b1), type, key, qtk_shape_format(shape, r, b2, sizeof b2),
                        qtk_shape_format(want, r, b3, sizeof b3));
    }
    return QTK_OK;
}

/* One tensor the metadata describes as a subclass: its _qdata, _scale and optional
 * _per_tensor_scale become one qtk tensor. */
static qtk_status fold_subclass(qtk__hub *h, const char *key, const json_t *desc) {
    const char *type = hub_json_str(desc, "_type");
    const json_t *data = hub_json(desc, "_data");
    const char *dot = strrchr(key, '.');
    if (!dot) return QTK_OK;
    char prefix[1024];
    int n = snprintf(prefix, sizeof prefix, "%.*s._%s_", (int)(dot - key), key, dot + 1);
    if (n < 0 || (size_t)n >= sizeof prefix) return qtk__err(QTK_E_FORMAT, "tensor name '%.60s...' is too long", key);
    hub_raw *q = hub_find(h, prefix, "qdata"), *sc = hub_find(h, prefix, "scale"), *g = hub_find(h, prefix, "per_tensor_scale");
    if (!q || !sc)
        return qtk__err(QTK_E_FORMAT, "metadata describes '%s' as a %s, but there is no '%sqdata' with '%sscale'", key, type,
                        prefix, prefix);
    const qtk_ckpt_tensor *qt = q->t, *st = sc->t;
    int r = qt->rank;
    if (r < 1 || r > QTK_MAX_RANK) return qtk__err(QTK_E_FORMAT, "'%s' has rank %d", qt->name, r);
    size_t *shape = hub_alloc(h, (size_t)r * sizeof *shape);
    if (!shape) return qtk__err(QTK_E_NOMEM, "out of memory");
    memcpy(shape, qt->shape, (size_t)r * sizeof *shape);
    long long bs = 0;
    const char *spec;
    qtk_status s = subclass_scheme(key, type, data, qt, st, &g, shape, r, &bs, &spec);
    if (s || !spec) return s; /* an error, or a plain tensor */
    hub_pending p = {.name = key, .quantized = true, .rank = r, .shape = shape,
                     .item = {.raw = {(size_t)(q - h->raw), (size_t)(sc - h->raw)}, .n = 2}};
    s = hub_scheme(&p.scheme, "%s", spec);
    if (s) return s;
    if (g) p.item.raw[p.item.n++] = (size_t)(g - h->raw);
    if (bs && (s = block_scales(h, &p, key, type, data, qt, st, g != NULL, (size_t)bs))) return s;
    s = hub_add(h, &p);
    if (s) return s;
    q->used = sc->used = true;
    if (g) g->used = true;
    return QTK_OK;
}

static qtk_status fold(qtk__hub *h) {
    size_t found = 0;
    for (size_t s = 0; s < h->n_shards; s++) {
        const qtk__desc *d = &h->shard[s]->desc;
        for (size_t i = 0; i < d->n_meta; i++) {
            const char *v = d->meta[i].value;
            if (v[0] != '{' || !strstr(v, "\"_type\"")) continue;
            json_t *j = json_loads(v, 0, NULL);
            const char *type = hub_json_str(j, "_type");
            qtk_status st = QTK_OK;
            if (type && hub_find(h, d->meta[i].key, "") == NULL) {
                st = fold_subclass(h, d->meta[i].key, j);
                found += !st && strcmp(type, "Tensor") != 0;
            }
            json_decref(j);
            if (st) return st;
        }
    }
    for (size_t i = 0; i < h->n_raw; i++) {
        const hub_raw *r = &h->raw[i];
        if (!r->used && (strstr(r->t->name, "_qdata") || qtk__has_suffix(r->t->name, "_per_tensor_scale")))
            return qtk__err(QTK_E_FORMAT, "'%s' (in '%s') is described by no torchao metadata entry", r->t->name,
                            hub_file(h, r));
    }
    if (!found && h->qcfg)
        return qtk__err(QTK_E_FORMAT, "'%s' says quant_method \"torchao\" but no tensor is described as a torchao subclass",
                        h->config_file);
    return QTK_OK;
}

/* The subclass descriptions are not file metadata of the logical checkpoint. */
static bool meta_used(const qtk__hub *h, const char *key) {
    if (strcmp(key, "tensor_names") == 0) return true;
    const qtk__desc *d = &h->self->desc;
    for (size_t i = 0; i < d->n_tensors; i++)
        if (strcmp(d->tensors[i].name, key) == 0) return true;
    return false;
}

static qtk_status plan(hub_wctx *wc, const qtk_ckpt_tensor *t, hub_wtensor *w) {
    (void)wc;
    (void)w;
    return qtk__err(QTK_E_UNSUPPORTED, "qtk reads torchao's prototype layout but does not write it (HUB_LAYOUTS.md §7.1); "
                    "write '%s' as nvfp4/mxfp4 in --layout modelopt, compressed-tensors or qtk", t->name);
}

static qtk_status config(hub_wctx *wc, json_t *q, json_t **hfq) {
    (void)wc;
    (void)q;
    (void)hfq;
    return qtk__err(QTK_E_UNSUPPORTED, "qtk reads torchao's prototype layout but does not write it (HUB_LAYOUTS.md §7.1)");
}

const hub_conv hub_torchao_conv = {QTK_LAYOUT_TORCHAO, "torchao", methods, sniff, fold, plan, config, meta_used};
