/* eval.c — qtk_ckpt_eval: what each scheme (under each calibration) would cost and lose on a
 * checkpoint's tensors, without writing anything: every eligible tensor is quantized and
 * dequantized, against its values as stored (a quantized tensor: its dequantized values). */
#include "ops/imatrix.h"
#include "ops/select.h"

#include "common/internal.h"
#include "io/values.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

struct qtk_eval_report {
    size_t n_rows, n_cols;
    qtk_eval_row *rows;
    qtk_eval_cell *cells; /* n_rows x n_cols, row-major */
    qtk_eval_column *cols;
    qtk__arena arena;
};

static qtk_status add_row(qtk_eval_report *r, const qtk_ckpt_tensor *t) {
    qtk_eval_row *row = &r->rows[r->n_rows];
    char spec[256];
    const char *stored = qtk_elem_name(t->elem);
    if (t->quantized) {
        qtk_status st = qtk_scheme_format(&t->scheme, spec, sizeof spec, NULL);
        if (st) return st;
        stored = spec;
    } else if (t->decoded && t->file_type) { /* GGUF's Q4_K, read as F32 */
        snprintf(spec, sizeof spec, "%s (ggml %s)", qtk_elem_name(t->elem), t->file_type);
        stored = spec;
    }
    row->name = qtk__arena_strdup(&r->arena, t->name);
    row->stored = qtk__arena_strdup(&r->arena, stored);
    size_t *sh = qtk__arena_alloc(&r->arena, (t->rank ? (size_t)t->rank : 1) * sizeof(size_t));
    if (!row->name || !row->stored || !sh) return qtk__err(QTK_E_NOMEM, "out of memory");
    if (t->rank) memcpy(sh, t->shape, (size_t)t->rank * sizeof(size_t));
    row->shape = sh;
    row->rank = t->rank;
    row->numel = t->numel;
    r->n_rows++;
    return QTK_OK;
}

/* Quantizes x under column c and compares; a scheme that does not fit the shape is recorded
 * in the cell, any other failure (a non-finite value) stops the evaluation. */
typedef struct {
    const float *w; /* NULL: the tensor has no importance weights */
    size_t n;       /* one per column, or per expert and column */
} weights;

static qtk_status measure(const qtk_ckpt_tensor *t, const float *x, const qtk_eval_column *col, const weights *wt,
                          int threads, qtk__buf *q, qtk__buf *y, qtk_eval_cell *c) {
    memset(c, 0, sizeof *c);
    c->numel = t->numel;
    qtk_layout L;
    qtk_status st = qtk_layout_compute(&col->scheme, t->shape, t->rank, &L);
    if (st) {
        snprintf(c->err, sizeof c->err, "%s", qtk_last_error());
        return QTK_OK;
    }
    qtk_quantize_options qo = {.calibration = col->calibration, .threads = threads};
    if (wt->w && col->calibration == QTK_CALIB_MSE) qo.weights = wt->w, qo.n_weights = wt->n;
    st = qtk__buf_reserve(q, L.total_bytes);
    if (!st) st = qtk__buf_reserve(y, t->numel * sizeof(float));
    if (!st) st = qtk_quantize_into(x, t->shape, t->rank, &col->scheme, &qo, q->p, L.total_bytes);
    if (st == QTK_E_SCHEME) { /* a calibration the scheme does not take (absmean on two levels) */
        snprintf(c->err, sizeof c->err, "%s", qtk_last_error());
        return QTK_OK;
    }
    if (!st) st = qtk_dequantize_bytes(q->p, L.total_bytes, t->shape, t->rank, &col->scheme, QTK_DTYPE_F32, y->p, t->numel);
    if (st) return qtk__err_context(st, "tensor '%s'", t->name);
    const float *yy = y->p;
    double e2 = 0.0, s2 = 0.0, mx = 0.0;
    for (size_t i = 0; i < t->numel; i++) {
        double d = (double)x[i] - (double)yy[i];
        e2 += d * d;
        s2 += (double)x[i] * (double)x[i];
        if (fabs(d) > mx) mx = fabs(d);
    }
    if (wt->w) { /* element i's weight: its column's, of its expert (first index) */
        size_t cols = t->shape[t->rank - 1], per = wt->n > cols ? t->numel / t->shape[0] : t->numel;
        double we2 = 0.0, ws2 = 0.0;
        for (size_t i = 0; i < t->numel; i++) {
            double w = wt->w[(i / per) * cols + i % cols], d = (double)x[i] - (double)yy[i];
            we2 += w * d * d;
            ws2 += w * (double)x[i] * (double)x[i];
        }
        c->weighted = true;
        c->sum_w_sq_err = we2;
        c->sum_w_sq_sig = ws2;
    }
    c->ok = true;
    c->bytes = L.total_bytes;
    c->sum_sq_err = e2;
    c->sum_sq_sig = s2;
    c->max_abs = mx;
    return QTK_OK;
}

static qtk_status columns(const qtk_eval_options *o, qtk_eval_report *r) {
    static const qtk_calibration minmax = QTK_CALIB_MINMAX;
    const qtk_calibration *cal = o->n_calibrations ? o->calibrations : &minmax;
    size_t nc = o->n_calibrations ? o->n_calibrations : 1;
    if (o->n_schemes && !o->schemes) return qtk__err(QTK_E_ARG, "%zu schemes but no schemes array", o->n_schemes);
    if (o->n_calibrations && !o->calibrations) return qtk__err(QTK_E_ARG, "%zu calibrations but no array", o->n_calibrations);
    if (o->n_schemes == 0) return qtk__err(QTK_E_ARG, "evaluation needs at least one scheme");
    for (size_t k = 0; k < nc; k++)
        if ((unsigned)cal[k] > QTK_CALIB_MSE) return qtk__err(QTK_E_ARG, "calibration %d is not a qtk_calibration", (int)cal[k]);
    if (!qtk__mul_ok(o->n_schemes, nc, &r->n_cols) || !(r->cols = calloc(r->n_cols, sizeof *r->cols)))
        return qtk__err(QTK_E_NOMEM, "out of memory");
    for (size_t s = 0; s < o->n_schemes; s++)
        for (size_t k = 0; k < nc; k++) {
            qtk_eval_column *c = &r->cols[s * nc + k];
            if (!o->schemes[s]) return qtk__err(QTK_E_ARG, "scheme %zu is NULL", s + 1);
            qtk_status st = qtk_scheme_parse(o->schemes[s], &c->scheme);
            if (st) return qtk__err_context(st, "scheme %zu", s + 1);
            if (!(c->spec = qtk__arena_strdup(&r->arena, o->schemes[s]))) return qtk__err(QTK_E_NOMEM, "out of memory");
            c->calibration = cal[k];
        }
    return QTK_OK;
}

qtk_status qtk_ckpt_eval(const char *path, const qtk_eval_options *opts, qtk_eval_report **out) {
    if (!out) return qtk__err(QTK_E_ARG, "qtk_ckpt_eval: out is NULL");
    *out = NULL;
    if (!path || !opts) return qtk__err(QTK_E_ARG, "qtk_ckpt_eval: NULL path or options");
    const qtk_eval_options *o = opts;
    qtk_eval_report *r = calloc(1, sizeof *r);
    if (!r) return qtk__err(QTK_E_NOMEM, "out of memory");
    qtk__select sel;
    qtk_status st = columns(o, r), sst = QTK_E_ARG;
    if (!st) st = sst = qtk__select_from(&sel, NULL, NULL, 0, o->only, o->skip, o->min_elements, QTK_DTYPE_NONE);
    qtk_ckpt *c = NULL;
    qtk_open_options oo = {.layout = o->input_layout};
    if (!st) st = qtk_ckpt_open(path, &oo, &c);
    const qtk__desc *d = c ? qtk__ckpt_desc(c) : NULL;
    size_t n = d && d->n_tensors ? d->n_tensors : 1, ncells = 0;
    if (!st && (!qtk__mul_ok(n, r->n_cols, &ncells) || !(r->rows = calloc(n, sizeof *r->rows)) ||
                !(r->cells = calloc(ncells, sizeof *r->cells))))
        st = qtk__err(QTK_E_NOMEM, "out of memory");
    qtk_progress pi = {0, 0, 0, 0};
    for (size_t i = 0; !st && i < d->n_tensors; i++)
        if (qtk__select_eligible(&sel, &d->tensors[i])) pi.total++, pi.bytes_total += d->tensors[i].nbytes;
    qtk__buf f32 = {0}, q = {0}, y = {0};
    for (size_t i = 0; !st && i < d->n_tensors; i++) {
        const qtk_ckpt_tensor *t = &d->tensors[i];
        if (!qtk__select_eligible(&sel, t)) continue;
        if (o->cancel && *o->cancel) {
            st = qtk__err(QTK_E_CANCELLED, "evaluation of '%s' cancelled after %zu of %zu tensors", path, pi.done, pi.total);
            break;
        }
        qtk_ckpt_view v;
        st = qtk_ckpt_load(c, i, &v);
        if (st) {
            qtk_status fs = qtk_ckpt_status(c); /* a truncated input explains it better */
            if (fs) st = fs;
            break;
        }
        const float *x = NULL;
        st = qtk__values_f32(t, v.data, &f32, &x);
        if (!st && (const void *)x != (const void *)v.data) qtk__ckpt_drop_pages(c, &v);
        size_t row = r->n_rows;
        qtk_ckpt_tensor tv = *t; /* measured on the values' shape (bitsandbytes: the matrix's) */
        if (t->value_shape) tv.shape = t->value_shape, tv.rank = t->value_rank;
        if (!st) st = add_row(r, &tv);
        weights wt = {NULL, 0};
        if (!st && o->imatrix) {
            st = qtk__imatrix_weights(o->imatrix, t->name, tv.shape, tv.rank, &wt.w, &wt.n);
            if (st == QTK_E_NOTFOUND) st = QTK_OK; /* unweighted: row.weighted says so */
            else if (st) st = qtk__err_context(st, "tensor '%s'", t->name);
            else r->rows[row].weighted = true;
        }
        for (size_t j = 0; j < r->n_cols && !st; j++)
            st = measure(&tv, x, &r->cols[j], &wt, o->threads, &q, &y, &r->cells[row * r->n_cols + j]);
        qtk_status fs = qtk_ckpt_status(c); /* the values measured were the file's */
        if (fs) st = fs;
        qtk_ckpt_unload(c, &v);
        pi.done++;
        pi.bytes_done += t->nbytes;
        if (!st && o->progress && o->progress(o->ctx, &pi))
            st = qtk__err(QTK_E_CANCELLED, "evaluation of '%s' cancelled after %zu of %zu tensors", path, pi.done, pi.total);
    }
    qtk__buf_free(&f32);
    qtk__buf_free(&q);
    qtk__buf_free(&y);
    qtk_ckpt_close(c);
    if (!sst) qtk__select_free(&sel);
    if (st) {
        qtk_eval_report_free(r);
        return st;
    }
    *out = r;
    return QTK_OK;
}

void qtk_eval_report_free(qtk_eval_report *r) {
    if (!r) return;
    free(r->rows);
    free(r->cells);
    free(r->cols);
    qtk__arena_free(&r->arena);
    free(r);
}

size_t qtk_eval_rows(const qtk_eval_report *r) { return r ? r->n_rows : 0; }
size_t qtk_eval_columns(const qtk_eval_report *r) { return r ? r->n_cols : 0; }
const qtk_eval_row *qtk_eval_row_at(const qtk_eval_report *r, size_t i) { return r && i < r->n_rows ? &r->rows[i] : NULL; }
const qtk_eval_column *qtk_eval_column_at(const qtk_eval_report *r, size_t j) {
    return r && j < r->n_cols ? &r->cols[j] : NULL;
}
const qtk_eval_cell *qtk_eval_cell_at(const qtk_eval_report *r, size_t i, size_t j) {
    return r && i < r->n_rows && j < r->n_cols ? &r->cells[i * r->n_cols + j] : NULL;
}

void qtk_eval_metrics_of(const qtk_eval_cell *c, qtk_eval_metrics *m) {
    memset(m, 0, sizeof *m);
    m->wsqnr_db = NAN;
    if (!c || !c->ok) return;
    if (c->numel == 0) { /* nothing to lose */
        m->sqnr_db = INFINITY;
        return;
    }
    m->bits_per_el = (double)c->bytes * 8.0 / (double)c->numel;
    m->rmse = sqrt(c->sum_sq_err / (double)c->numel);
    m->max_abs = c->max_abs;
    m->sqnr_db = c->sum_sq_err > 0.0 ? 10.0 * log10(c->sum_sq_sig / c->sum_sq_err) : INFINITY;
    m->wsqnr_db = !c->weighted ? NAN : c->sum_w_sq_err > 0.0 ? 10.0 * log10(c->sum_w_sq_sig / c->sum_w_sq_err) : INFINITY;
}

void qtk_eval_total(const qtk_eval_report *r, size_t j, qtk_eval_cell *total, size_t *n_failed) {
    memset(total, 0, sizeof *total);
    size_t failed = 0;
    for (size_t i = 0; r && j < r->n_cols && i < r->n_rows; i++) {
        const qtk_eval_cell *c = &r->cells[i * r->n_cols + j];
        if (!c->ok) {
            failed++;
            continue;
        }
        total->ok = true;
        total->bytes += c->bytes;
        total->numel += c->numel;
        total->sum_sq_err += c->sum_sq_err;
        total->sum_sq_sig += c->sum_sq_sig;
        if (c->max_abs > total->max_abs) total->max_abs = c->max_abs;
        if (c->weighted) {
            total->weighted = true;
            total->sum_w_sq_err += c->sum_w_sq_err;
            total->sum_w_sq_sig += c->sum_w_sq_sig;
        }
    }
    if (n_failed) *n_failed = failed;
}
