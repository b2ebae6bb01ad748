/* hub_util.c — small helpers the Hub conventions share: schemes from printf, scale dtypes
 * and their stored elements, JSON access, stored pieces of a planned tensor. */
#include "hub/hub_internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>

qtk_status hub_scheme(qtk_scheme *s, const char *fmt, ...) {
    char buf[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return qtk_scheme_parse(buf, s);
}

qtk_dtype hub_scale_dtype(qtk_elem e) {
    switch (e) {
    case QTK_ELEM_F32: return QTK_DTYPE_F32;
    case QTK_ELEM_BF16: return QTK_DTYPE_BF16;
    case QTK_ELEM_F16: return QTK_DTYPE_F16;
    case QTK_ELEM_F8_E8M0:
    case QTK_ELEM_U8: return QTK_DTYPE_UE8M0;
    case QTK_ELEM_F8_E4M3: return QTK_DTYPE_UE4M3;
    default: return QTK_DTYPE_NONE;
    }
}

qtk_elem hub_scale_elem(qtk_dtype d) {
    switch (d) {
    case QTK_DTYPE_BF16: return QTK_ELEM_BF16;
    case QTK_DTYPE_F16: return QTK_ELEM_F16;
    case QTK_DTYPE_UE8M0: return QTK_ELEM_F8_E8M0;
    case QTK_DTYPE_UE4M3: return QTK_ELEM_F8_E4M3;
    default: return QTK_ELEM_F32;
    }
}

const char *hub_dtype_spec(qtk_dtype d) { return qtk_dtype_name(d); }

float hub_scale_value(qtk_elem e, const uint8_t *p) {
    switch (e) {
    case QTK_ELEM_F32: return qtk__bits_f32(qtk__ld32(p));
    case QTK_ELEM_BF16: return qtk__bits_f32((uint32_t)qtk__ld16(p) << 16);
    case QTK_ELEM_F16: return qtk_fmt_decode(QTK_DTYPE_F16, qtk__ld16(p));
    case QTK_ELEM_F8_E8M0:
    case QTK_ELEM_U8: return qtk_fmt_decode(QTK_DTYPE_UE8M0, p[0]);
    case QTK_ELEM_F8_E4M3: return qtk_fmt_decode(QTK_DTYPE_E4M3, p[0]);
    default: return 0.0f;
    }
}

const json_t *hub_json(const json_t *o, const char *key) {
    return json_is_object(o) ? json_object_get(o, key) : NULL;
}

bool hub_json_int(const json_t *v, long long *out) {
    if (json_is_integer(v)) {
        *out = (long long)json_integer_value(v);
        return true;
    }
    /* 128.0 written by a Python float: accept whole numbers */
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == (double)(long long)d) {
            *out = (long long)d;
            return true;
        }
    }
    return false;
}

const char *hub_json_str(const json_t *o, const char *key) { return json_string_value(hub_json(o, key)); }

qtk_status hub_jset(json_t *o, const char *key, json_t *v) {
    if (!v || json_object_set_new(o, key, v) != 0) return qtk__err(QTK_E_NOMEM, "out of memory building JSON");
    return QTK_OK;
}

hub_wpiece *hub_wpiece_add(hub_wctx *wc, hub_wtensor *w, const qtk_ckpt_tensor *t, const char *suffix, qtk_elem e,
                           const size_t *shape, int rank, size_t nbytes) {
    if (w->n >= HUB_MAX_WPIECES) return NULL;
    size_t nl = strlen(t->name), sl = strlen(suffix);
    char *name = qtk__arena_alloc(wc->arena, nl + sl + 1);
    size_t *sh = qtk__arena_alloc(wc->arena, (rank > 0 ? (size_t)rank : 1) * sizeof *sh);
    if (!name || !sh) return NULL;
    memcpy(name, t->name, nl);
    memcpy(name + nl, suffix, sl + 1);
    hub_wpiece *p = &w->piece[w->n++];
    memset(p, 0, sizeof *p);
    p->name = name;
    p->elem = e;
    p->rank = rank;
    p->shape = sh;
    for (int i = 0; i < rank; i++) sh[i] = shape[i];
    p->nbytes = nbytes;
    return p;
}

const char *hub_module(hub_wctx *wc, const char *name) {
    size_t n = strlen(name);
    if (n > 7 && strcmp(name + n - 7, ".weight") == 0) return qtk__arena_strndup(wc->arena, name, n - 7);
    return name;
}

/* The reference dequantization of zero-point tensors (hub_internal.h). */
qtk_status hub_deq_zero_point(const qtk__hub *h, const hub_item *it, const qtk_ckpt_tensor *t, const uint8_t *bytes,
                              qtk_dtype dtype, void *out, bool *done) {
    (void)h, (void)it;
    qtk_dtype sdt = t->scheme.block_rank ? t->scheme.block_dtype : t->scheme.tensor_dtype;
    if (sdt == QTK_DTYPE_F32 || (dtype == sdt)) return QTK_OK; /* qtk's one rounding is the reference's */
    float *y = dtype == QTK_DTYPE_F32 ? out : malloc(t->numel * sizeof *y);
    if (!y) return qtk__err(QTK_E_NOMEM, "out of memory");
    qtk_status st = qtk_dequantize_bytes(bytes, t->nbytes, t->shape, t->rank, &t->scheme, QTK_DTYPE_F32, y, t->numel);
    for (size_t i = 0; i < t->numel && !st; i++) {
        float v = qtk_fmt_decode(sdt, qtk_fmt_encode(sdt, y[i])); /* RN in the scales' dtype */
        if (dtype == QTK_DTYPE_F32) y[i] = v;
        else ((uint16_t *)out)[i] = (uint16_t)qtk_fmt_encode(dtype, v);
    }
    if (y != out) free(y);
    if (!st) *done = true;
    return st;
}
