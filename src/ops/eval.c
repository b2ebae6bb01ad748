/* eval.c — see eval.h. */
#include "ops/eval.h"

#include "common/internal.h"
#include "io/values.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static qtk_status add_row(qtk__eval_result *r, const qtk_ckpt_tensor *t) {
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

/* Quantizes x under s and compares; a scheme that does not fit the shape is recorded in the
 * cell, any other failure (a non-finite value) stops the evaluation. */
static qtk_status measure(const qtk_ckpt_tensor *t, const float *x, const qtk_scheme *s, int threads, qtk__buf *q,
                          qtk__buf *y, qtk_eval_cell *c) {
    memset(c, 0, sizeof *c);
    c->numel = t->numel;
    qtk_layout L;
    qtk_status st = qtk_layout_compute(s, t->shape, t->rank, &L);
    if (st) {
        snprintf(c->err, sizeof c->err, "%s", qtk_last_error());
        return QTK_OK;
    }
    st = qtk__buf_reserve(q, L.total_bytes);
    if (!st) st = qtk__buf_reserve(y, t->numel * sizeof(float));
    qtk_quantize_options qo = {.threads = threads};
    if (!st) st = qtk_quantize_into(x, t->shape, t->rank, s, &qo, q->p, L.total_bytes);
    if (!st) st = qtk_dequantize_bytes(q->p, L.total_bytes, t->shape, t->rank, s, QTK_DTYPE_F32, y->p, t->numel);
    if (st) return qtk__err_context(st, "tensor '%s'", t->name);
    const float *yy = y->p;
    double e2 = 0.0, s2 = 0.0, mx = 0.0;
    for (size_t i = 0; i < t->numel; i++) {
        double d = (double)x[i] - (double)yy[i];
        e2 += d * d;
        s2 += (double)x[i] * (double)x[i];
        if (fabs(d) > mx) mx = fabs(d);
    }
    c->ok = true;
    c->bytes = L.total_bytes;
    c->sum_sq_err = e2;
    c->sum_sq_sig = s2;
    c->max_abs = mx;
    return QTK_OK;
}

qtk_status qtk__eval_file(const char *path, const qtk__select *sel, const qtk_scheme *schemes, const char *const *names,
                         size_t n_schemes, int threads, qtk_progress_fn progress, void *ctx, qtk__eval_result *out) {
    memset(out, 0, sizeof *out);
    qtk_ckpt *c = NULL;
    qtk_status st = qtk_ckpt_open(path, &c);
    if (st) return st;
    const qtk__desc *d = qtk__ckpt_desc(c);
    size_t n = d->n_tensors ? d->n_tensors : 1;
    out->n_schemes = n_schemes;
    out->rows = calloc(n, sizeof *out->rows);
    out->cells = calloc(n * (n_schemes ? n_schemes : 1), sizeof *out->cells);
    out->specs = calloc(n_schemes ? n_schemes : 1, sizeof *out->specs);
    if (!out->rows || !out->cells || !out->specs) st = qtk__err(QTK_E_NOMEM, "out of memory");
    for (size_t j = 0; j < n_schemes && !st; j++)
        if (!(out->specs[j] = qtk__arena_strdup(&out->arena, names[j]))) st = qtk__err(QTK_E_NOMEM, "out of memory");
    qtk_progress pi = {0, 0, 0, 0};
    for (size_t i = 0; i < d->n_tensors; i++)
        if (qtk__select_eligible(sel, &d->tensors[i])) pi.total++, pi.bytes_total += d->tensors[i].nbytes;
    qtk__buf f32 = {0}, q = {0}, y = {0};
    for (size_t i = 0; i < d->n_tensors && !st; i++) {
        const qtk_ckpt_tensor *t = &d->tensors[i];
        if (!qtk__select_eligible(sel, t)) continue;
        qtk_ckpt_view v;
        st = qtk_ckpt_load(c, i, &v);
        if (st) break;
        const float *x = NULL;
        st = qtk__values_f32(t, v.data, &f32, &x);
        if (!st && (const void *)x != (const void *)v.data) qtk__ckpt_drop_pages(c, &v);
        size_t row = out->n_rows;
        if (!st) st = add_row(out, t);
        for (size_t j = 0; j < n_schemes && !st; j++)
            st = measure(t, x, &schemes[j], threads, &q, &y, &out->cells[row * n_schemes + j]);
        qtk_ckpt_unload(c, &v);
        pi.done++;
        pi.bytes_done += t->nbytes;
        if (!st && progress) progress(ctx, &pi);
    }
    qtk__buf_free(&f32);
    qtk__buf_free(&q);
    qtk__buf_free(&y);
    qtk_ckpt_close(c);
    if (st) qtk__eval_result_free(out);
    return st;
}

void qtk__eval_result_free(qtk__eval_result *r) {
    free(r->rows);
    free(r->cells);
    free(r->specs);
    qtk__arena_free(&r->arena);
    memset(r, 0, sizeof *r);
}

void qtk_eval_cell_metrics(const qtk_eval_cell *c, qtk_eval_metrics *m) {
    memset(m, 0, sizeof *m);
    if (!c->ok) return;
    if (c->numel == 0) { /* nothing to lose */
        m->sqnr_db = INFINITY;
        return;
    }
    m->bits_per_el = (double)c->bytes * 8.0 / (double)c->numel;
    m->rmse = sqrt(c->sum_sq_err / (double)c->numel);
    m->max_abs = c->max_abs;
    m->sqnr_db = c->sum_sq_err > 0.0 ? 10.0 * log10(c->sum_sq_sig / c->sum_sq_err) : INFINITY;
}

void qtk_eval_total(const qtk__eval_result *r, size_t j, qtk_eval_cell *total, size_t *n_failed) {
    memset(total, 0, sizeof *total);
    size_t failed = 0;
    for (size_t i = 0; i < r->n_rows; i++) {
        const qtk_eval_cell *c = &r->cells[i * r->n_schemes + j];
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
    }
    if (n_failed) *n_failed = failed;
}
