/* convert.c — see convert.h. Memory: the input is mapped and each tensor's pages are
 * released once it is written; the work buffers (the tensor as f32, the output bytes) are
 * sized for the largest tensor and reused. */
#include "ops/convert.h"

#include "common/internal.h"
#include "gguf/gguf.h"
#include "io/values.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- the type a tensor had in its GGUF file, carried through other formats ---- */

typedef struct {
    const char *name, *type;
} file_type_hint;

static int cmp_hint(const void *a, const void *b) {
    return strcmp(((const file_type_hint *)a)->name, ((const file_type_hint *)b)->name);
}

/* The input's "qtk:file_type:NAME" metadata, sorted by NAME (NULL when there is none). */
static file_type_hint *hints_of(const qtk__desc *in, size_t *n) {
    size_t pl = strlen(QTK__META_FILE_TYPE), k = 0;
    *n = 0;
    for (size_t i = 0; i < in->n_meta; i++) k += strncmp(in->meta[i].key, QTK__META_FILE_TYPE, pl) == 0;
    if (!k) return NULL;
    file_type_hint *h = malloc(k * sizeof *h);
    if (!h) return NULL;
    k = 0;
    for (size_t i = 0; i < in->n_meta; i++)
        if (strncmp(in->meta[i].key, QTK__META_FILE_TYPE, pl) == 0) h[k++] = (file_type_hint){in->meta[i].key + pl, in->meta[i].value};
    qsort(h, k, sizeof *h, cmp_hint);
    *n = k;
    return h;
}

/* Only quantized tensors need one: a scheme can have several ggml types (q8f,block=32:f16 is
 * Q8_0 or Q5_0), a raw element type has one. */
static const char *hint_for(const qtk_ckpt_tensor *t, const file_type_hint *h, size_t n) {
    if (!t->quantized) return NULL;
    if (t->file_type) return t->file_type;
    file_type_hint key = {t->name, NULL}, *f = n ? bsearch(&key, h, n, sizeof *h, cmp_hint) : NULL;
    return f ? f->type : NULL;
}

/* GGUF output holds only the schemes a ggml type holds exactly: a tensor kept in another
 * scheme is dequantized to F32 (its values unchanged), a scheme asked for is refused. */
static qtk_status gguf_fit(const qtk_ckpt_tensor *t, const char *hint, qtk__decision *d) {
    qtk_ckpt_tensor probe = *t;
    char why[400];
    if (d->act == QTK_ACT_QUANTIZE) {
        probe.quantized = true;
        probe.scheme = d->scheme;
        if (qtk__gguf_writable(&probe, NULL, why, sizeof why)) return QTK_OK;
        return qtk__err(QTK_E_UNSUPPORTED, "tensor '%s' cannot be written to GGUF in the scheme asked for: %s", t->name, why);
    }
    if (d->act != QTK_ACT_KEEP || !t->quantized || qtk__gguf_writable(t, hint, why, sizeof why)) return QTK_OK;
    d->act = QTK_ACT_DEQUANTIZE;
    d->elem = QTK_ELEM_F32;
    snprintf(d->why, sizeof d->why, "GGUF has no ggml type for its scheme: written as F32");
    return QTK_OK;
}

/* The output description: one entry per input tensor, in input order. */
static qtk_status plan(const qtk__desc *in, const qtk__convert_opts *o, qtk_ckpt_format fmt, qtk__desc *out,
                       qtk__decision *dec) {
    size_t nh = 0;
    file_type_hint *hints = hints_of(in, &nh);
    qtk_status st0 = QTK_OK;
    for (size_t i = 0; i < in->n_tensors && !st0; i++) {
        const qtk_ckpt_tensor *t = &in->tensors[i];
        qtk__decision *d = &dec[i];
        qtk__select_decide(o->select, t, d);
        const char *hint = hint_for(t, hints, nh);
        if (fmt == QTK_CKPT_GGUF && (st0 = gguf_fit(t, hint, d))) break;
        qtk_ckpt_tensor *nt = NULL;
        qtk_status st;
        if (d->act == QTK_ACT_QUANTIZE) st = qtk__desc_add_quantized(out, t->name, &d->scheme, t->shape, t->rank, &nt);
        else if (d->act == QTK_ACT_DEQUANTIZE) st = qtk__desc_add_raw(out, t->name, d->elem, t->shape, t->rank, &nt);
        else if (t->quantized) st = qtk__desc_add_quantized(out, t->name, &t->scheme, t->shape, t->rank, &nt);
        else st = qtk__desc_add_raw(out, t->name, t->elem, t->shape, t->rank, &nt);
        if (st) {
            st0 = st;
            break;
        }
        nt->has_param_id = t->has_param_id;
        nt->param_id = t->param_id;
        /* a copied tensor keeps the hint of its ggml type for a GGUF writer */
        if (d->act == QTK_ACT_KEEP && hint && !(nt->file_type = qtk__arena_strdup(&out->arena, hint)))
            st0 = qtk__err(QTK_E_NOMEM, "out of memory");
        if (o->plan) o->plan(o->ctx, t, nt, d);
    }
    free(hints);
    if (st0) return st0;
    for (size_t i = 0; i < in->n_meta; i++) {
        if (strncmp(in->meta[i].key, QTK__META_FILE_TYPE, strlen(QTK__META_FILE_TYPE)) == 0) continue; /* renewed below */
        qtk_status st = qtk__desc_add_meta(out, in->meta[i].key, in->meta[i].value);
        if (st) return st;
    }
    /* formats without a place for a ggml type carry it as metadata */
    for (size_t i = 0; i < out->n_tensors && fmt != QTK_CKPT_GGUF; i++) {
        const qtk_ckpt_tensor *t = &out->tensors[i];
        if (!t->file_type) continue;
        char *key = malloc(strlen(QTK__META_FILE_TYPE) + strlen(t->name) + 1);
        if (!key) return qtk__err(QTK_E_NOMEM, "out of memory");
        strcpy(key, QTK__META_FILE_TYPE);
        strcat(key, t->name);
        qtk_status st = qtk__desc_add_meta(out, key, t->file_type);
        free(key);
        if (st) return st;
    }
    for (size_t i = 0; i < in->n_scalars; i++) {
        qtk_status st = qtk__desc_add_scalar(out, &in->scalars[i]);
        if (st) return st;
    }
    return QTK_OK;
}

/* Where converted tensors go: a checkpoint writer, or the Hub writer (layouts, shards). */
typedef struct {
    qtk__ckpt_writer *w;
    qtk__hub_writer *h;
} sink;

static qtk_status sink_put(sink *k, const void *bytes, size_t len) {
    return k->h ? qtk__hub_writer_put(k->h, bytes, len) : qtk__ckpt_writer_put(k->w, bytes, len);
}
static qtk_status sink_commit(sink *k) {
    qtk_status st = k->h ? qtk__hub_writer_commit(k->h) : qtk__ckpt_writer_commit(k->w);
    k->h = NULL;
    k->w = NULL;
    return st;
}
static void sink_abort(sink *k) {
    qtk__hub_writer_abort(k->h);
    qtk__ckpt_writer_abort(k->w);
}

static qtk_dtype out_dtype(qtk_elem e) {
    return e == QTK_ELEM_F16 ? QTK_DTYPE_F16 : e == QTK_ELEM_BF16 ? QTK_DTYPE_BF16 : QTK_DTYPE_F32;
}

/* f32 values -> raw f32/f16/bf16 bytes (round to nearest even, as qtk_dequantize does). */
static void store_floats(const float *x, size_t n, qtk_elem e, uint8_t *out) {
    qtk_dtype dt = out_dtype(e);
    for (size_t i = 0; i < n; i++) {
        if (dt == QTK_DTYPE_F32) qtk__st32(out + 4 * i, qtk__f32_bits(x[i]));
        else qtk__st16(out + 2 * i, (uint16_t)qtk_fmt_encode(dt, x[i]));
    }
}

/* What a re-quantization cost: the new bytes dequantized against the values x. */
static qtk_status report_requant(const qtk_ckpt_tensor *t, const qtk_ckpt_tensor *ot, const float *x, const uint8_t *q,
                                 const qtk__convert_opts *o, qtk__buf *y) {
    qtk_status st = qtk__buf_reserve(y, t->numel * sizeof(float));
    if (!st) st = qtk_dequantize_bytes(q, ot->nbytes, ot->shape, ot->rank, &ot->scheme, QTK_DTYPE_F32, y->p, t->numel);
    if (st) return st;
    const float *yy = y->p;
    double e2 = 0.0, s2 = 0.0;
    for (size_t i = 0; i < t->numel; i++) {
        double dx = (double)x[i] - (double)yy[i];
        e2 += dx * dx;
        s2 += (double)x[i] * (double)x[i];
    }
    o->requantized(o->ctx, t, ot, e2 > 0.0 ? 10.0 * log10(s2 / e2) : INFINITY);
    return QTK_OK;
}

/* Produces tensor i's output bytes; *bytes points into the view or into work. */
static qtk_status transform(qtk_ckpt *c, const qtk_ckpt_tensor *t, const qtk_ckpt_tensor *ot, const qtk__decision *d,
                            const qtk_ckpt_view *v, const qtk__convert_opts *o, qtk__buf *f32, qtk__buf *work, qtk__buf *y,
                            const uint8_t **bytes) {
    if (d->act == QTK_ACT_KEEP) {
        *bytes = v->data;
        return QTK_OK;
    }
    qtk_status st = qtk__buf_reserve(work, ot->nbytes);
    if (st) return st;
    bool requant = d->act == QTK_ACT_QUANTIZE && (t->quantized || t->decoded) && o->requantized;
    if (d->act == QTK_ACT_DEQUANTIZE && !t->quantized) {
        /* a tensor the reader decoded (GGUF's Q4_K as F32) to the dtype asked for */
        const float *x;
        st = qtk__values_f32(t, v->data, f32, &x);
        if (!st) store_floats(x, t->numel, ot->elem, work->p);
    } else if (d->act == QTK_ACT_DEQUANTIZE) {
        /* the stored convention's own formula where qtk's scheme is only within an ulp of it */
        st = qtk__hub_dequantize(c, v->index, v, out_dtype(ot->elem), work->p);
    } else if (t->quantized && !requant) {
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
        st = qtk__values_f32(t, v->data, f32, &x);
        /* decoded into a copy: the input's pages are not needed while quantizing */
        if (!st && (const void *)x != (const void *)v->data) qtk__ckpt_drop_pages(c, v);
        if (!st) st = qtk_quantize_into(x, t->shape, t->rank, &d->scheme, &qo, work->p, ot->nbytes);
        /* equal to qtk_convert's result (quantize of the dequantized values), with x kept to
         * measure what the re-quantization cost */
        if (!st && requant) st = report_requant(t, ot, x, work->p, o, y);
    }
    if (st) return qtk__err_context(st, "tensor '%s'", t->name);
    *bytes = work->p;
    return QTK_OK;
}

qtk_status qtk__convert_file(const char *in, const char *out, const qtk__convert_opts *o, qtk__convert_stats *stats) {
    qtk__convert_stats s0 = {0};
    qtk_ckpt_format fmt = o->out_format ? o->out_format : qtk_ckpt_format_from_path(out);
    bool hub = o->layout != QTK_LAYOUT_AUTO || o->max_shard_bytes > 0 || qtk__hub_out_is_dir(out);
    if (hub && (fmt == QTK_CKPT_BURNPACK || fmt == QTK_CKPT_GGUF))
        return qtk__err(QTK_E_ARG, "'%s': layouts and shards are safetensors; a %s output takes neither", out,
                        qtk_ckpt_format_name(fmt));
    if (hub) fmt = QTK_CKPT_SAFETENSORS;
    if (fmt == QTK_CKPT_UNKNOWN)
        return qtk__err(QTK_E_ARG, "cannot tell the output format of '%s': name it .bpk, .safetensors or .gguf", out);
    qtk_ckpt *c = NULL;
    qtk_status st = qtk_ckpt_open(in, &c);
    if (st) return st;
    const qtk__desc *din = qtk__ckpt_desc(c);
    qtk__desc dout;
    qtk__desc_init(&dout);
    qtk__decision *dec = calloc(din->n_tensors ? din->n_tensors : 1, sizeof *dec);
    sink w = {NULL, NULL};
    qtk__buf f32 = {0}, work = {0}, y = {0};
    if (!dec) st = qtk__err(QTK_E_NOMEM, "out of memory");
    if (!st) st = plan(din, o, fmt, &dout, dec);
    qtk__hub_write_opts ho = {.layout = o->layout, .max_shard_bytes = o->max_shard_bytes, .source = c, .force = o->force,
                             .notice = o->notice, .ctx = o->ctx};
    if (!st && hub) st = qtk__hub_writer_open(out, &dout, &ho, &w.h);
    else if (!st) st = qtk__ckpt_writer_open(out, fmt, &dout, o->force, &w.w);
    s0.out_files = w.h ? qtk__hub_writer_shards(w.h) : 1;
    qtk_progress pi = {0, din->n_tensors, 0, 0};
    for (size_t i = 0; i < din->n_tensors; i++) pi.bytes_total += din->tensors[i].nbytes;
    for (size_t i = 0; i < din->n_tensors && !st; i++) {
        const qtk_ckpt_tensor *t = &din->tensors[i], *ot = &dout.tensors[i];
        qtk_ckpt_view v;
        st = qtk_ckpt_load(c, i, &v);
        if (st) break;
        const uint8_t *bytes = NULL;
        st = transform(c, t, ot, &dec[i], &v, o, &f32, &work, &y, &bytes);
        if (!st) st = sink_put(&w, bytes, ot->nbytes);
        qtk_ckpt_unload(c, &v);
        /* what the files hold: a GGUF tensor's bytes in its ggml layout, not qtk's */
        s0.in_bytes += t->file_type && t->file_bytes ? t->file_bytes : t->nbytes;
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
    qtk_ckpt_hub_info(c, &hi);
    for (size_t i = 0; !st && o->notice && i < hi.n_notices; i++) o->notice(o->ctx, hi.notices[i].tensor, hi.notices[i].text);
    s0.in_layout = hi.layout;
    s0.in_files = hi.n_shards;
    bool any_q = false;
    for (size_t i = 0; i < dout.n_tensors; i++) any_q |= dout.tensors[i].quantized;
    s0.out_layout = o->layout != QTK_LAYOUT_AUTO ? o->layout : any_q ? QTK_LAYOUT_QTK : QTK_LAYOUT_NONE;
    s0.tensors = din->n_tensors;
    s0.in_format = qtk_ckpt_format_of(c);
    s0.out_format = fmt;
    qtk__buf_free(&f32);
    qtk__buf_free(&work);
    qtk__buf_free(&y);
    free(dec);
    qtk__desc_free(&dout);
    qtk_ckpt_close(c);
    if (!st && stats) *stats = s0;
    return st;
}
