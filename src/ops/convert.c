/* convert.c — qtk_ckpt_convert: checkpoint to checkpoint, each tensor kept, quantized,
 * re-quantized, dequantized or cast as the selection decides, streamed one tensor at a time
 * from a mapped input into a qtk_writer (nothing appears until it is complete).
 *
 * Memory: the input is mapped and each tensor's pages are released once it is written; the
 * work buffers (the tensor as f32, the output bytes) are sized for the largest tensor and
 * reused. */
#include "ops/imatrix.h"
#include "ops/select.h"

#include "common/internal.h"

#include "ckpt/writer.h"
#include "gguf/gguf.h"
#include "hub/hub.h"
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

/* The input's "PREFIX NAME" metadata ("qtk:file_type:NAME"), sorted by NAME (NULL when there
 * is none). */
static file_type_hint *prefixed_of(const qtk__desc *in, const char *prefix, size_t *n) {
    size_t pl = strlen(prefix), k = 0;
    *n = 0;
    for (size_t i = 0; i < in->n_meta; i++) k += strncmp(in->meta[i].key, prefix, pl) == 0;
    if (!k) return NULL;
    file_type_hint *h = malloc(k * sizeof *h);
    if (!h) return NULL;
    k = 0;
    for (size_t i = 0; i < in->n_meta; i++)
        if (strncmp(in->meta[i].key, prefix, pl) == 0) h[k++] = (file_type_hint){in->meta[i].key + pl, in->meta[i].value};
    qsort(h, k, sizeof *h, cmp_hint);
    *n = k;
    return h;
}

static file_type_hint *hints_of(const qtk__desc *in, size_t *n) { return prefixed_of(in, QTK__META_FILE_TYPE, n); }

static qtk_status add_prefixed_meta(qtk_writer *w, const char *prefix, const char *name, const char *value) {
    char *key = malloc(strlen(prefix) + strlen(name) + 1);
    if (!key) return qtk__err(QTK_E_NOMEM, "out of memory");
    strcpy(key, prefix);
    strcat(key, name);
    qtk_status st = qtk_writer_add_meta(w, key, value);
    free(key);
    return st;
}

/* The scale bytes of Q3_K/Q6_K/IQ4_XS blocks whose f16 d underflowed, for each such tensor
 * kept as it is: read from a GGUF input's blocks, or carried from an earlier conversion. */
static qtk_status scale_records(qtk_ckpt *c, const qtk__decision *dec, qtk_writer *w) {
    const qtk__desc *in = qtk__ckpt_desc(c);
    size_t nr = 0;
    file_type_hint *carried = prefixed_of(in, QTK__META_GGUF_SCALES, &nr);
    qtk_status st = QTK_OK;
    for (size_t i = 0; i < in->n_tensors && !st; i++) {
        const qtk_ckpt_tensor *t = &in->tensors[i];
        if (dec[i].act != QTK_ACT_KEEP || !t->quantized) continue;
        char *rec = NULL;
        st = qtk__gguf_tensor_scale_records(c, i, &rec);
        file_type_hint key = {t->name, NULL}, *f = nr && !rec ? bsearch(&key, carried, nr, sizeof *carried, cmp_hint) : NULL;
        const char *v = rec ? rec : f ? f->type : NULL;
        if (!st && v) st = add_prefixed_meta(w, QTK__META_GGUF_SCALES, t->name, v);
        free(rec);
    }
    free(carried);
    return st;
}

/* Only quantized tensors need one: a scheme can have several ggml types (q8f,block=32:f16 is
 * Q8_0 or Q5_0), a raw element type has one. */
static const char *hint_for(const qtk_ckpt_tensor *t, const file_type_hint *h, size_t n) {
    if (!t->quantized) return NULL;
    if (t->file_type) return t->file_type;
    file_type_hint key = {t->name, NULL}, *f = n ? bsearch(&key, h, n, sizeof *h, cmp_hint) : NULL;
    return f ? f->type : NULL;
}

/* ---- planning ---- */

/* What tensor t becomes in the output (before it is declared). */
static void out_tensor(const qtk_ckpt_tensor *t, const qtk__decision *d, const char *hint, qtk_ckpt_tensor *o) {
    *o = (qtk_ckpt_tensor){.name = t->name, .rank = t->rank, .shape = t->shape, .has_param_id = t->has_param_id,
                           .param_id = t->param_id};
    if (t->value_shape && (d->act == QTK_ACT_QUANTIZE || d->act == QTK_ACT_DEQUANTIZE)) {
        o->shape = t->value_shape; /* new bytes take the values' shape (bitsandbytes' quant_state) */
        o->rank = t->value_rank;
    }
    if (d->act == QTK_ACT_QUANTIZE) o->quantized = true, o->scheme = d->scheme;
    else if (d->act == QTK_ACT_DEQUANTIZE || d->act == QTK_ACT_CAST) o->elem = d->elem;
    else if (t->quantized) o->quantized = true, o->scheme = t->scheme, o->file_type = hint; /* a GGUF writer's hint */
    else o->elem = t->elem;
}

/* cast_floats: a raw float tensor the selection leaves as it is takes the dtype, unless
 * skip or a "keep" rule named it. */
static void cast_float(const qtk__select *sel, const qtk_ckpt_tensor *t, qtk__decision *d) {
    if (d->act != QTK_ACT_KEEP || t->quantized || !qtk_elem_is_float(t->elem) || t->elem == sel->out_elem) return;
    if (d->reason == QTK_WHY_SKIP || d->reason == QTK_WHY_SAME) return;
    if (d->reason == QTK_WHY_RULE && sel->rules[d->rule].target.kind == QTK__TARGET_KEEP) return;
    d->act = t->decoded ? QTK_ACT_DEQUANTIZE : QTK_ACT_CAST;
    d->elem = sel->out_elem;
}

/* The output format's capabilities (a Hub layout's are the writer's to report, with their
 * reasons): a scheme asked for that the format cannot hold is an error; a quantized tensor
 * kept in a scheme it cannot hold is dequantized (values unchanged). */
static qtk_status fit_format(const qtk_writer *w, const qtk_ckpt_tensor *t, const char *hint, qtk__decision *d) {
    char why[400];
    qtk_ckpt_tensor o;
    out_tensor(t, d, hint, &o);
    if (!o.quantized || qtk__writer_format_can_hold(w, &o, why, sizeof why)) return QTK_OK;
    if (d->act == QTK_ACT_QUANTIZE)
        return qtk__err(QTK_E_UNSUPPORTED, "tensor '%s' cannot be written to %s in the scheme asked for: %s", t->name,
                        qtk_ckpt_format_name(qtk__writer_format(w)), why);
    d->act = QTK_ACT_DEQUANTIZE;
    d->elem = QTK_ELEM_F32;
    d->reason = QTK_WHY_FORMAT;
    snprintf(d->why, sizeof d->why, "%s cannot hold its scheme: written as F32", qtk_ckpt_format_name(qtk__writer_format(w)));
    return QTK_OK;
}

static qtk_status plan(qtk_ckpt *c, const qtk__select *sel, bool cast, qtk_writer *w, qtk__decision *dec) {
    const qtk__desc *in = qtk__ckpt_desc(c);
    bool gguf_out = qtk__writer_format(w) == QTK_CKPT_GGUF;
    size_t nh = 0;
    file_type_hint *hints = hints_of(in, &nh);
    qtk_status st = QTK_OK;
    for (size_t i = 0; i < in->n_tensors && !st; i++) {
        const qtk_ckpt_tensor *t = &in->tensors[i];
        qtk__decision *d = &dec[i];
        qtk__select_decide(sel, t, i, d);
        if (cast) cast_float(sel, t, d);
        const char *hint = hint_for(t, hints, nh);
        st = fit_format(w, t, hint, d);
        qtk_ckpt_tensor o;
        out_tensor(t, d, hint, &o);
        if (!st) st = qtk_writer_add(w, &o, NULL);
    }
    free(hints);
    for (size_t i = 0; i < in->n_meta && !st; i++) {
        if (strncmp(in->meta[i].key, QTK__META_FILE_TYPE, strlen(QTK__META_FILE_TYPE)) == 0) continue; /* renewed below */
        if (strncmp(in->meta[i].key, QTK__META_GGUF_SCALES, strlen(QTK__META_GGUF_SCALES)) == 0) continue; /* likewise */
        st = qtk_writer_add_meta(w, in->meta[i].key, in->meta[i].value);
    }
    if (!st) st = scale_records(c, dec, w);
    /* formats without a place for a ggml type carry it as metadata */
    const qtk__desc *out = qtk__writer_desc(w);
    for (size_t i = 0; i < out->n_tensors && !gguf_out && !st; i++) {
        const qtk_ckpt_tensor *t = &out->tensors[i];
        if (!t->file_type) continue;
        char *key = malloc(strlen(QTK__META_FILE_TYPE) + strlen(t->name) + 1);
        if (!key) return qtk__err(QTK_E_NOMEM, "out of memory");
        strcpy(key, QTK__META_FILE_TYPE);
        strcat(key, t->name);
        st = qtk_writer_add_meta(w, key, t->file_type);
        free(key);
    }
    for (size_t i = 0; i < in->n_scalars && !st; i++) st = qtk_writer_add_scalar(w, &in->scalars[i]);
    return st;
}

/* ---- one tensor ---- */

typedef struct {
    const qtk_convert_options *o;
    qtk_ckpt *c;
    qtk__buf f32, work, y;
} job;

/* What a re-quantization cost: the new bytes dequantized against the values x. */
static qtk_status report_requant(job *j, const qtk_ckpt_tensor *t, const qtk_ckpt_tensor *ot, const float *x,
                                 const uint8_t *q) {
    qtk_status st = qtk__buf_reserve(&j->y, t->numel * sizeof(float));
    if (!st) st = qtk_dequantize_bytes(q, ot->nbytes, ot->shape, ot->rank, &ot->scheme, QTK_DTYPE_F32, j->y.p, t->numel);
    if (st) return st;
    const float *yy = j->y.p;
    double e2 = 0.0, s2 = 0.0;
    for (size_t i = 0; i < t->numel; i++) {
        double dx = (double)x[i] - (double)yy[i];
        e2 += dx * dx;
        s2 += (double)x[i] * (double)x[i];
    }
    qtk_convert_event e = {.kind = QTK_EVENT_REQUANTIZED, .in = t, .out = ot, .rule = -1,
                           .sqnr_db = e2 > 0.0 ? 10.0 * log10(s2 / e2) : INFINITY};
    j->o->event(j->o->ctx, &e);
    return QTK_OK;
}

/* Produces tensor i's output bytes; *bytes points into the view or into the work buffer. */
static qtk_status transform(job *j, const qtk_ckpt_tensor *t, const qtk_ckpt_tensor *ot, const qtk__decision *d,
                            const qtk_ckpt_view *v, const uint8_t **bytes) {
    if (d->act == QTK_ACT_KEEP) {
        *bytes = v->data;
        return QTK_OK;
    }
    qtk_status st = qtk__buf_reserve(&j->work, ot->nbytes);
    if (st) return st;
    qtk_quantize_options qo = {.calibration = j->o->calibration, .threads = j->o->threads};
    if (d->act == QTK_ACT_QUANTIZE && j->o->imatrix) {
        st = qtk__imatrix_weights(j->o->imatrix, t->name, ot->shape, ot->rank, &qo.weights, &qo.n_weights);
        if (st == QTK_E_NOTFOUND) {
            st = QTK_OK;
            if (j->o->event) {
                qtk_convert_event e = {.kind = QTK_EVENT_NOTICE, .rule = -1, .tensor = t->name,
                                       .text = "no importance-matrix entry: quantized unweighted"};
                j->o->event(j->o->ctx, &e);
            }
        }
        if (st) return qtk__err_context(st, "tensor '%s'", t->name);
    }
    bool requant = d->act == QTK_ACT_QUANTIZE && (t->quantized || t->decoded) && j->o->event;
    if (d->act == QTK_ACT_CAST || (d->act == QTK_ACT_DEQUANTIZE && !t->quantized)) {
        /* raw floats (a tensor the reader decoded, such as GGUF's Q4_K as F32) to the dtype */
        st = qtk__values_convert(t, v->data, qtk__dtype_of_elem(ot->elem), j->work.p);
    } else if (d->act == QTK_ACT_DEQUANTIZE) {
        /* the stored convention's own formula where qtk's scheme is only within an ulp of it */
        st = qtk__hub_dequantize(j->c, v->index, v, qtk__dtype_of_elem(ot->elem), j->work.p);
    } else if (t->quantized && !requant && !t->value_shape) {
        /* re-quantize: qtk_convert works a slab at a time from the tensor's bytes */
        qtk_tensor *qt = NULL, *nt = NULL;
        st = qtk_tensor_wrap(v->data, v->len, t->shape, t->rank, &t->scheme, NULL, NULL, &qt);
        if (!st) st = qtk_convert(qt, &d->scheme, &qo, &nt);
        if (!st) memcpy(j->work.p, qtk_tensor_bytes(nt, NULL), ot->nbytes);
        qtk_tensor_free(qt);
        qtk_tensor_free(nt);
    } else {
        const float *x;
        st = qtk__values_f32(t, v->data, &j->f32, &x);
        /* decoded into a copy: the input's pages are not needed while quantizing */
        if (!st && (const void *)x != (const void *)v->data) qtk__ckpt_drop_pages(j->c, v);
        if (!st) st = qtk_quantize_into(x, ot->shape, ot->rank, &d->scheme, &qo, j->work.p, ot->nbytes);
        /* equal to qtk_convert's result (quantize of the dequantized values), with x kept to
         * measure what the re-quantization cost */
        if (!st && requant) st = report_requant(j, t, ot, x, j->work.p);
    }
    if (st) return qtk__err_context(st, "tensor '%s'", t->name);
    *bytes = j->work.p;
    return QTK_OK;
}

static void notice_event(void *ctx, const char *tensor, const char *text) {
    const qtk_convert_options *o = ctx;
    qtk_convert_event e = {.kind = QTK_EVENT_NOTICE, .rule = -1, .tensor = tensor, .text = text};
    o->event(o->ctx, &e);
}

qtk_status qtk_convert_check(const qtk_convert_options *o) {
    qtk_convert_options d0 = {0};
    if (!o) o = &d0;
    qtk__select sel;
    qtk_status st = qtk__select_from(&sel, o->scheme, o->rules, o->n_rules, o->only, o->skip, o->min_elements, o->dtype);
    if (st) return st;
    qtk__select_free(&sel);
    if (o->mixture) {
        qtk__mix_ftype f;
        if (o->scheme)
            return qtk__err(QTK_E_ARG, "scheme '%s' and mixture '%s': a mixture chooses every tensor's scheme; give one",
                            o->scheme, o->mixture);
        if ((st = qtk__mixture_find(o->mixture, &f))) return st;
    }
    if ((unsigned)o->calibration > QTK_CALIB_MSE)
        return qtk__err(QTK_E_ARG, "calibration %d is not a qtk_calibration", (int)o->calibration);
    if (o->imatrix && o->calibration != QTK_CALIB_MSE)
        return qtk__err(QTK_E_ARG, "an importance matrix weighs the error calibration mse minimizes; calibration %s would ignore it",
                        qtk_calibration_name(o->calibration));
    if ((unsigned)o->input_layout >= QTK_LAYOUT_COUNT_)
        return qtk__err(QTK_E_ARG, "input layout %d is not a qtk_hub_layout", (int)o->input_layout);
    if (o->threads < 0) return qtk__err(QTK_E_ARG, "threads %d is negative", o->threads);
    return QTK_OK;
}

qtk_status qtk_ckpt_convert(const char *in, const char *out, const qtk_convert_options *opts, qtk_convert_summary *summary) {
    qtk_convert_options o = opts ? *opts : (qtk_convert_options){0};
    if (!in || !out) return qtk__err(QTK_E_ARG, "qtk_ckpt_convert: NULL path");
    qtk_status st = qtk_convert_check(&o);
    if (st) return st;
    qtk_write_options wo = {.format = o.format, .layout = o.layout, .max_shard_bytes = o.max_shard_bytes, .force = o.force,
                            .notice = o.event ? notice_event : NULL, .ctx = &o, .cancel = o.cancel};
    qtk_writer *w = NULL;
    st = qtk_writer_create(out, &wo, &w);
    if (st) return st;
    qtk_open_options oo = {.layout = o.input_layout};
    job j = {.o = &o};
    st = qtk_ckpt_open(in, &oo, &j.c);
    if (st) {
        qtk_writer_abort(w);
        return st;
    }
    qtk__writer_set_source(w, j.c);
    qtk__select sel;
    qtk_status sst = qtk__select_from(&sel, o.scheme, o.rules, o.n_rules, o.only, o.skip, o.min_elements, o.dtype);
    const qtk__desc *din = qtk__ckpt_desc(j.c);
    qtk__mixture mix = {0};
    if (!sst && o.mixture) {
        qtk__mix_ftype f = QTK__MIX_Q4_K_M;
        sst = qtk__mixture_find(o.mixture, &f);
        if (!sst) sst = qtk__mixture_plan(&mix, f, din);
        if (!sst) sel.mix = &mix;
        else qtk__select_free(&sel);
    }
    qtk__decision *dec = calloc(din->n_tensors ? din->n_tensors : 1, sizeof *dec);
    st = sst ? sst : dec ? QTK_OK : qtk__err(QTK_E_NOMEM, "out of memory");
    if (!st) st = plan(j.c, &sel, o.cast_floats, w, dec);
    const qtk__desc *dout = qtk__writer_desc(w);
    for (size_t i = 0; !st && o.event && i < din->n_tensors; i++) {
        const qtk__decision *d = &dec[i];
        qtk_convert_event e = {.kind = QTK_EVENT_PLAN, .in = &din->tensors[i], .out = &dout->tensors[i], .action = d->act,
                               .reason = d->reason, .rule = d->rule, .why = d->why};
        o.event(o.ctx, &e);
    }
    qtk_convert_summary s0 = {0};
    qtk_progress pi = {0, din->n_tensors, 0, 0};
    for (size_t i = 0; i < din->n_tensors; i++) pi.bytes_total += din->tensors[i].nbytes;
    for (size_t i = 0; i < din->n_tensors && !st; i++) {
        if (o.cancel && *o.cancel) {
            st = qtk__err(QTK_E_CANCELLED, "conversion of '%s' cancelled after %zu of %zu tensors", in, i, din->n_tensors);
            break;
        }
        const qtk_ckpt_tensor *t = &din->tensors[i], *ot = &dout->tensors[i];
        qtk_ckpt_view v;
        st = qtk_ckpt_load(j.c, i, &v);
        if (st) {
            qtk_status fs = qtk_ckpt_status(j.c); /* a truncated input explains it better */
            if (fs) st = fs;
            break;
        }
        const uint8_t *bytes = NULL;
        st = transform(&j, t, ot, &dec[i], &v, &bytes);
        /* what was read is the file's only while the file is intact (a truncated input's
         * lost pages read as zeros): checked before the bytes are written, and after, since a
         * write from the map itself fails on them instead (EFAULT) */
        qtk_status fs = qtk_ckpt_status(j.c);
        if (!st && !fs) st = qtk_writer_write(w, bytes, ot->nbytes);
        if (!fs) fs = qtk_ckpt_status(j.c);
        if (fs) st = fs;
        qtk_ckpt_unload(j.c, &v);
        /* what the files hold: a GGUF tensor's bytes in its ggml layout, not qtk's */
        s0.in_bytes += t->file_type && t->file_bytes ? t->file_bytes : t->nbytes;
        s0.out_bytes += ot->nbytes;
        s0.quantized += dec[i].act == QTK_ACT_QUANTIZE;
        s0.dequantized += dec[i].act == QTK_ACT_DEQUANTIZE;
        s0.cast += dec[i].act == QTK_ACT_CAST;
        s0.kept += dec[i].act == QTK_ACT_KEEP;
        pi.done++;
        pi.bytes_done += t->nbytes;
        if (!st && o.progress && o.progress(o.ctx, &pi))
            st = qtk__err(QTK_E_CANCELLED, "conversion of '%s' cancelled after %zu of %zu tensors", in, i + 1,
                          din->n_tensors);
    }
    s0.out_files = qtk__writer_files(w);
    s0.out_directory = qtk__hub_out_is_dir(out) && qtk__writer_format(w) == QTK_CKPT_SAFETENSORS;
    s0.out_format = qtk__writer_format(w);
    if (!st) st = qtk_writer_commit(w);
    else qtk_writer_abort(w);
    /* what reading did to single tensors (dequantized zero points, flattened blocks...) */
    qtk_hub_info hi;
    qtk_ckpt_hub_info(j.c, &hi);
    for (size_t i = 0; !st && o.event && i < hi.n_notices; i++) notice_event(&o, hi.notices[i].tensor, hi.notices[i].text);
    s0.in_layout = hi.layout;
    s0.in_files = hi.n_shards;
    bool any_q = false;
    for (size_t i = 0; i < din->n_tensors && !st; i++)
        any_q |= dec[i].act == QTK_ACT_QUANTIZE || (dec[i].act == QTK_ACT_KEEP && din->tensors[i].quantized);
    s0.out_layout = o.layout != QTK_LAYOUT_AUTO ? o.layout : any_q ? QTK_LAYOUT_QTK : QTK_LAYOUT_NONE;
    s0.tensors = din->n_tensors;
    s0.in_format = qtk_ckpt_format_of(j.c);
    qtk__buf_free(&j.f32);
    qtk__buf_free(&j.work);
    qtk__buf_free(&j.y);
    free(dec);
    if (!sst) qtk__select_free(&sel);
    qtk__mixture_free(&mix);
    qtk_ckpt_close(j.c);
    if (!st && summary) *summary = s0;
    return st;
}
