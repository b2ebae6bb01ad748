/* convert.c — see convert.h. Memory: the input is mapped and each tensor's pages are
 * released once it is written; the work buffers (the tensor as f32, the output bytes) are
 * sized for the largest tensor and reused. */
#include "tools/convert.h"

#include "common/internal.h"
#include "tools/values.h"

#include <stdlib.h>

/* The output description: one entry per input tensor, in input order. */
static qtk_status plan(const qtk_ckpt_desc *in, const qtk_convert_opts *o, qtk_ckpt_desc *out, qtk_decision *dec) {
    for (size_t i = 0; i < in->n_tensors; i++) {
        const qtk_ckpt_tensor *t = &in->tensors[i];
        qtk_decision *d = &dec[i];
        qtk_select_decide(o->select, t, d);
        qtk_ckpt_tensor *nt = NULL;
        qtk_status st;
        if (d->act == QTK_ACT_QUANTIZE) st = qtk_ckpt_desc_add_quantized(out, t->name, &d->scheme, t->shape, t->rank, &nt);
        else if (d->act == QTK_ACT_DEQUANTIZE) st = qtk_ckpt_desc_add_raw(out, t->name, d->elem, t->shape, t->rank, &nt);
        else if (t->quantized) st = qtk_ckpt_desc_add_quantized(out, t->name, &t->scheme, t->shape, t->rank, &nt);
        else st = qtk_ckpt_desc_add_raw(out, t->name, t->elem, t->shape, t->rank, &nt);
        if (st) return st;
        nt->has_param_id = t->has_param_id;
        nt->param_id = t->param_id;
        if (o->plan) o->plan(o->ctx, t, nt, d);
    }
    for (size_t i = 0; i < in->n_meta; i++) {
        qtk_status st = qtk_ckpt_desc_add_meta(out, in->meta[i].key, in->meta[i].value);
        if (st) return st;
    }
    for (size_t i = 0; i < in->n_scalars; i++) {
        qtk_status st = qtk_ckpt_desc_add_scalar(out, &in->scalars[i]);
        if (st) return st;
    }
    return QTK_OK;
}

/* Where converted tensors go: a checkpoint writer, or the Hub writer (layouts, shards). */
typedef struct {
    qtk_ckpt_writer *w;
    qtk_hub_writer *h;
} sink;

static qtk_status sink_put(sink *k, const void *bytes, size_t len) {
    return k->h ? qtk_hub_writer_put(k->h, bytes, len) : qtk_ckpt_writer_put(k->w, bytes, len);
}
static qtk_status sink_commit(sink *k) {
    qtk_status st = k->h ? qtk_hub_writer_commit(k->h) : qtk_ckpt_writer_commit(k->w);
    k->h = NULL;
    k->w = NULL;
    return st;
}
static void sink_abort(sink *k) {
    qtk_hub_writer_abort(k->h);
    qtk_ckpt_writer_abort(k->w);
}

static qtk_dtype out_dtype(qtk_elem e) {
    return e == QTK_ELEM_F16 ? QTK_DTYPE_F16 : e == QTK_ELEM_BF16 ? QTK_DTYPE_BF16 : QTK_DTYPE_F32;
}

/* Produces tensor i's output bytes; *bytes points into the view or into work. */
static qtk_status transform(qtk_ckpt *c, const qtk_ckpt_tensor *t, const qtk_ckpt_tensor *ot, const qtk_decision *d,
                            const qtk_ckpt_view *v, const qtk_convert_opts *o, qtk_buf *f32, qtk_buf *work,
                            const uint8_t **bytes) {
    if (d->act == QTK_ACT_KEEP) {
        *bytes = v->data;
        return QTK_OK;
    }
    qtk_status st = qtk_buf_reserve(work, ot->nbytes);
    if (st) return st;
    if (d->act == QTK_ACT_DEQUANTIZE) {
        /* the stored convention's own formula where qtk's scheme is only within an ulp of it */
        st = qtk_hub_dequantize(c, v->index, v, out_dtype(ot->elem), work->p);
    } else if (t->quantized) {
        /* re-quantize: qtk_convert works a slab at a time from the tensor's bytes */
        qtk_tensor *qt = NULL, *nt = NULL;
        qtk_quantize_options qo = {.threads = o->threads};
        st = qtk_tensor_from_bytes(v->data, v->len, t->shape, t->rank, &t->scheme, &qt);
        if (!st) st = qtk_convert(qt, &d->scheme, &qo, &nt);
        if (!st) memcpy(work->p, qtk_tensor_bytes(nt, NULL), ot->nbytes);
        qtk_tensor_free(qt);
        qtk_tensor_free(nt);
    } else {
        const float *x;
        qtk_quantize_options qo = {.threads = o->threads};
        st = qtk_values_f32(t, v->data, f32, &x);
        /* decoded into a copy: the input's pages are not needed while quantizing */
        if (!st && (const void *)x != (const void *)v->data) qtk_ckpt_drop_pages(c, v);
        if (!st) st = qtk_quantize_into(x, t->shape, t->rank, &d->scheme, &qo, work->p, ot->nbytes);
    }
    if (st) return qtk__err_context(st, "tensor '%s'", t->name);
    *bytes = work->p;
    return QTK_OK;
}

qtk_status qtk_convert_file(const char *in, const char *out, const qtk_convert_opts *o, qtk_convert_stats *stats) {
    qtk_convert_stats s0 = {0};
    qtk_ckpt_format fmt = o->out_format ? o->out_format : qtk_ckpt_format_from_path(out);
    bool hub = o->layout != QTK_LAYOUT_AUTO || o->max_shard_bytes > 0 || qtk_hub_out_is_dir(out);
    if (hub && fmt == QTK_CKPT_BURNPACK)
        return qtk__err(QTK_E_ARG, "'%s': layouts and shards are safetensors; a burnpack output takes neither", out);
    if (hub) fmt = QTK_CKPT_SAFETENSORS;
    if (fmt == QTK_CKPT_UNKNOWN)
        return qtk__err(QTK_E_ARG, "cannot tell the output format of '%s': name it .bpk or .safetensors", out);
    qtk_ckpt *c = NULL;
    qtk_status st = qtk_ckpt_open(in, &c);
    if (st) return st;
    const qtk_ckpt_desc *din = qtk_ckpt_desc_of(c);
    qtk_ckpt_desc dout;
    qtk_ckpt_desc_init(&dout);
    qtk_decision *dec = calloc(din->n_tensors ? din->n_tensors : 1, sizeof *dec);
    sink w = {NULL, NULL};
    qtk_buf f32 = {0}, work = {0};
    if (!dec) st = qtk__err(QTK_E_NOMEM, "out of memory");
    if (!st) st = plan(din, o, &dout, dec);
    qtk_hub_write_opts ho = {.layout = o->layout, .max_shard_bytes = o->max_shard_bytes, .source = c, .force = o->force,
                             .notice = o->notice, .ctx = o->ctx};
    if (!st && hub) st = qtk_hub_writer_open(out, &dout, &ho, &w.h);
    else if (!st) st = qtk_ckpt_writer_open(out, fmt, &dout, o->force, &w.w);
    s0.out_files = w.h ? qtk_hub_writer_shards(w.h) : 1;
    qtk_progress_info pi = {0, din->n_tensors, 0, 0};
    for (size_t i = 0; i < din->n_tensors; i++) pi.bytes_total += din->tensors[i].nbytes;
    for (size_t i = 0; i < din->n_tensors && !st; i++) {
        const qtk_ckpt_tensor *t = &din->tensors[i], *ot = &dout.tensors[i];
        qtk_ckpt_view v;
        st = qtk_ckpt_load(c, i, &v);
        if (st) break;
        const uint8_t *bytes = NULL;
        st = transform(c, t, ot, &dec[i], &v, o, &f32, &work, &bytes);
        if (!st) st = sink_put(&w, bytes, ot->nbytes);
        qtk_ckpt_unload(c, &v);
        s0.in_bytes += t->nbytes;
        s0.out_bytes += ot->nbytes;
        s0.quantized += dec[i].act == QTK_ACT_QUANTIZE;
        s0.dequantized += dec[i].act == QTK_ACT_DEQUANTIZE;
        s0.kept += dec[i].act == QTK_ACT_KEEP;
        pi.done++;
        pi.bytes_done += t->nbytes;
        if (!st && o->progress) o->progress(o->ctx, &pi);
    }
    if (!st) st = sink_commit(&w);
    sink_abort(&w);
    /* what reading did to single tensors (dequantized zero points, flattened blocks...) */
    qtk_hub_info hi;
    qtk_hub_info_of(c, &hi);
    for (size_t i = 0; !st && o->notice && i < hi.n_notices; i++) o->notice(o->ctx, hi.notices[i].tensor, hi.notices[i].text);
    s0.in_layout = hi.layout;
    s0.in_files = hi.n_shards;
    bool any_q = false;
    for (size_t i = 0; i < dout.n_tensors; i++) any_q |= dout.tensors[i].quantized;
    s0.out_layout = o->layout != QTK_LAYOUT_AUTO ? o->layout : any_q ? QTK_LAYOUT_QTK : QTK_LAYOUT_NONE;
    s0.tensors = din->n_tensors;
    s0.in_format = qtk_ckpt_format_of(c);
    s0.out_format = fmt;
    qtk_buf_free(&f32);
    qtk_buf_free(&work);
    free(dec);
    qtk_ckpt_desc_free(&dout);
    qtk_ckpt_close(c);
    if (!st && stats) *stats = s0;
    return st;
}
