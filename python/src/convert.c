/* convert.c — whole-checkpoint conversion and evaluation (qtk_ckpt_convert, qtk_ckpt_eval)
 * with the GIL released. The library calls back after each tensor; the trampoline takes the
 * GIL, runs pending signal handlers (a Ctrl-C raises KeyboardInterrupt there) and the
 * caller's progress function, and cancels on any exception: the library then removes its
 * temporary files and the exception propagates. */
#include "qtkpy.h"

#include <math.h>
#include <string.h>
#include <time.h>

typedef struct {
    PyObject *progress; /* callable(done, total, bytes_done, bytes_total) or NULL */
    PyObject *plan, *notices, *requantized; /* lists, or NULL when not collected */
    PyObject *et, *ev, *etb;                /* the exception that cancelled */
} cb_ctx;

static void keep_error(cb_ctx *x) {
    if (!x->et) PyErr_Fetch(&x->et, &x->ev, &x->etb);
    else PyErr_Clear();
}

static int progress_cb(void *ctx, const qtk_progress *p) {
    cb_ctx *x = ctx;
    PyGILState_STATE g = PyGILState_Ensure();
    int stop = x->et != NULL;
    if (!stop && PyErr_CheckSignals() < 0) {
        keep_error(x);
        stop = 1;
    }
    if (!stop && x->progress) {
        PyObject *r = PyObject_CallFunction(x->progress, "nnnn", (Py_ssize_t)p->done, (Py_ssize_t)p->total,
                                            (Py_ssize_t)p->bytes_done, (Py_ssize_t)p->bytes_total);
        if (!r) {
            keep_error(x);
            stop = 1;
        }
        Py_XDECREF(r);
    }
    PyGILState_Release(g);
    return stop;
}

static const char *action_name(qtk_action a) {
    switch (a) {
    case QTK_ACT_KEEP: return "keep";
    case QTK_ACT_QUANTIZE: return "quantize";
    case QTK_ACT_DEQUANTIZE: return "dequantize";
    case QTK_ACT_CAST: return "cast";
    }
    return "?";
}

static PyObject *str_or_none(const char *s) {
    if (!s) Py_RETURN_NONE;
    return PyUnicode_FromString(s);
}

static void event_cb(void *ctx, const qtk_convert_event *e) {
    cb_ctx *x = ctx;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *item = NULL, *list = NULL;
    char to[256];
    if (x->et) goto out;
    if (e->kind == QTK_EVENT_PLAN && x->plan) {
        qtk_ckpt_type_string(e->out, to, sizeof to);
        item = Py_BuildValue("{s:s,s:s,s:s,s:N}", "name", e->in->name, "action", action_name(e->action), "to", to, "why",
                             str_or_none(e->why));
        list = x->plan;
    } else if (e->kind == QTK_EVENT_REQUANTIZED && x->requantized) {
        item = Py_BuildValue("(sd)", e->in->name, e->sqnr_db);
        list = x->requantized;
    } else if (e->kind == QTK_EVENT_NOTICE && x->notices) {
        item = Py_BuildValue("(NN)", str_or_none(e->tensor), str_or_none(e->text));
        list = x->notices;
    }
    if (list && (!item || PyList_Append(list, item) < 0)) keep_error(x); /* the next progress call cancels */
    Py_XDECREF(item);
out:
    PyGILState_Release(g);
}

/* A dtype for dequantized output: None, 'f32'/'f16'/'bf16' (or 'float32', 'float16',
 * 'bfloat16'), or numpy's float32/float16. */
static int out_dtype_conv(PyObject *o, void *out) {
    qtk_dtype *d = out;
    if (o == Py_None) {
        *d = QTK_DTYPE_NONE;
        return 1;
    }
    if (PyUnicode_Check(o)) {
        const char *s = PyUnicode_AsUTF8(o);
        if (!s) return 0;
        if (strcmp(s, "float32") == 0) s = "f32";
        else if (strcmp(s, "float16") == 0) s = "f16";
        else if (strcmp(s, "bfloat16") == 0) s = "bf16";
        if (qtk_dtype_parse(s, d) != QTK_OK || (*d != QTK_DTYPE_F32 && *d != QTK_DTYPE_F16 && *d != QTK_DTYPE_BF16)) {
            qtkpy_fail(QTK_E_ARG, "dtype '%s' is not f32, f16 or bf16", PyUnicode_AsUTF8(o));
            return 0;
        }
        return 1;
    }
    return qtkpy_value_dtype_conv(o, out);
}

/* A list of str into a NULL-terminated array of borrowed UTF-8 pointers (PyMem). */
static int str_list(PyObject *o, const char *what, const char ***out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (o == Py_None) return 0;
    PyObject *seq = PyUnicode_Check(o) ? NULL : PySequence_Fast(o, "");
    if (!seq) {
        PyErr_Clear();
        qtkpy_fail(QTK_E_ARG, "%s must be a list of str", what);
        return -1;
    }
    Py_ssize_t k = PySequence_Fast_GET_SIZE(seq);
    const char **v = PyMem_Calloc((size_t)k + 1, sizeof *v);
    if (!v) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *s = PySequence_Fast_GET_ITEM(seq, i);
        v[i] = PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL; /* kept alive by o */
        if (!v[i]) {
            PyErr_Clear();
            PyMem_Free(v);
            Py_DECREF(seq);
            qtkpy_fail(QTK_E_ARG, "%s must be a list of str (item %zd is not)", what, i);
            return -1;
        }
    }
    Py_DECREF(seq);
    *out = v;
    *n = (size_t)k;
    return 0;
}

static int opt_str(PyObject *o, const char *what, const char **out) {
    *out = NULL;
    if (o == Py_None) return 0;
    if (!PyUnicode_Check(o) || !(*out = PyUnicode_AsUTF8(o))) {
        PyErr_Clear();
        qtkpy_fail(QTK_E_ARG, "%s must be a str or None", what);
        return -1;
    }
    return 0;
}

static int opt_size(PyObject *o, const char *what, size_t *out) {
    *out = 0;
    if (o == Py_None) return 0;
    Py_ssize_t v = PyLong_Check(o) ? PyLong_AsSsize_t(o) : -1;
    if (v < 0) {
        PyErr_Clear();
        qtkpy_fail(QTK_E_ARG, "%s must be a non-negative int or None", what);
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* An optional importance-matrix path (None: no matrix) opened with qtk_imatrix_open. */
static int open_imatrix(PyObject *o, qtk_imatrix **out) {
    *out = NULL;
    if (o == Py_None) return 0;
    PyObject *b = NULL;
    if (!PyUnicode_FSConverter(o, &b)) return qtkpy_fail(QTK_E_ARG, "imatrix must be a path or None"), -1;
    qtk_status st;
    const char *p = PyBytes_AS_STRING(b);
    Py_BEGIN_ALLOW_THREADS
    st = qtk_imatrix_open(p, out);
    Py_END_ALLOW_THREADS
    Py_DECREF(b);
    if (st) return qtkpy_raise(st), -1;
    return 0;
}

const char qtkpy_convert_doc[] =
    "convert(src, dst, scheme=None, rules=None, only=None, skip=None, min_elements=1024, dtype=None,\n"
    "        cast_floats=False, calibration='minmax', input_layout=None, layout=None, max_shard_size=None,\n"
    "        force=False, threads=None, progress=None, imatrix=None, preset=None) -> dict\n\n"
    "The C entry point of qtk.convert (which see); progress is None or a callable taking\n"
    "(done, total, bytes_done, bytes_total).";

PyObject *qtkpy_convert(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static const char *kwlist[] = {"src", "dst", "scheme", "rules", "only", "skip", "min_elements", "dtype",
                                   "cast_floats", "calibration", "input_layout", "layout", "max_shard_size", "force",
                                   "threads", "progress", "imatrix", "preset", NULL};
    PyObject *src = NULL, *dst = NULL, *scheme_o = Py_None, *rules_o = Py_None, *only_o = Py_None, *skip_o = Py_None,
             *minel_o = Py_None, *shard_o = Py_None, *progress = Py_None, *imatrix_o = Py_None,
             *preset_o = Py_None;
    qtk_imatrix *im = NULL;
    qtk_convert_options o = {0};
    int cast = 0, force = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O&|OOOOOO&pO&O&O&OpO&OOO:convert", QTKPY_KW(kwlist), qtkpy_path_conv, &src,
                                     qtkpy_path_conv, &dst, &scheme_o, &rules_o, &only_o, &skip_o, &minel_o,
                                     out_dtype_conv, &o.dtype, &cast, qtkpy_calibration_conv, &o.calibration,
                                     qtkpy_layout_conv, &o.input_layout, qtkpy_layout_conv, &o.layout, &shard_o, &force,
                                     qtkpy_threads_conv, &o.threads, &progress, &imatrix_o, &preset_o)) {
        Py_XDECREF(src);
        Py_XDECREF(dst);
        return qtkpy_rewrap("convert");
    }
    o.cast_floats = cast;
    o.force = force;
    const char **rules = NULL;
    PyObject *result = NULL;
    cb_ctx x = {0};
    if (PyObject_TypeCheck(scheme_o, &qtkpy_SchemeType)) {
        char spec[256];
        qtk_status fst = qtk_scheme_format(&((qtkpy_SchemeObject *)scheme_o)->s, spec, sizeof spec, NULL);
        if (fst) {
            qtkpy_raise(fst);
            goto done;
        }
        scheme_o = PyUnicode_FromString(spec);
        if (!scheme_o) goto done;
    } else
        Py_INCREF(scheme_o);
    if (opt_str(scheme_o, "scheme", &o.scheme) || opt_str(only_o, "only", &o.only) || opt_str(skip_o, "skip", &o.skip) ||
        str_list(rules_o, "rules", &rules, &o.n_rules) || opt_size(minel_o, "min_elements", &o.min_elements) ||
        opt_size(shard_o, "max_shard_size", &o.max_shard_bytes) || opt_str(preset_o, "preset", &o.mixture))
        goto done_scheme;
    if (minel_o != Py_None && o.min_elements == 0) o.min_elements = 1; /* 0 would mean the default */
    o.rules = rules;
    if (progress != Py_None && !PyCallable_Check(progress)) {
        qtkpy_fail(QTK_E_ARG, "progress must be callable or None");
        goto done_scheme;
    }
    if (imatrix_o != Py_None && o.calibration != QTK_CALIB_MSE) {
        qtkpy_fail(QTK_E_ARG, "imatrix weighs the error calibration 'mse' minimizes: give calibration='mse'");
        goto done_scheme;
    }
    qtk_status st = qtk_convert_check(&o);
    if (st) {
        qtkpy_raise(st);
        goto done_scheme;
    }
    if (open_imatrix(imatrix_o, &im)) goto done_scheme;
    o.imatrix = im;
    x.progress = progress == Py_None ? NULL : progress;
    x.plan = PyList_New(0);
    x.notices = PyList_New(0);
    x.requantized = PyList_New(0);
    if (!x.plan || !x.notices || !x.requantized) goto done_scheme;
    o.progress = progress_cb; /* always: it is where Ctrl-C is noticed */
    o.event = event_cb;
    o.ctx = &x;
    qtk_convert_summary s = {0};
    const char *in = PyBytes_AS_STRING(src), *out = PyBytes_AS_STRING(dst);
    double t0 = now();
    Py_BEGIN_ALLOW_THREADS
    st = qtk_ckpt_convert(in, out, &o, &s);
    Py_END_ALLOW_THREADS
    double secs = now() - t0;
    if (x.et) {
        PyErr_Restore(x.et, x.ev, x.etb); /* KeyboardInterrupt, or what progress raised */
        x.et = x.ev = x.etb = NULL;
        goto done_scheme;
    }
    if (st) {
        qtkpy_raise(st);
        goto done_scheme;
    }
    result = Py_BuildValue("{s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:s,s:s,s:s,s:s,s:n,s:n,s:O,s:d,s:O,s:O,s:O}", "tensors",
                           (Py_ssize_t)s.tensors, "quantized", (Py_ssize_t)s.quantized, "dequantized",
                           (Py_ssize_t)s.dequantized, "cast", (Py_ssize_t)s.cast, "kept", (Py_ssize_t)s.kept, "in_bytes",
                           (Py_ssize_t)s.in_bytes, "out_bytes", (Py_ssize_t)s.out_bytes, "in_format",
                           qtk_ckpt_format_name(s.in_format), "out_format", qtk_ckpt_format_name(s.out_format),
                           "in_layout", qtk_hub_layout_name(s.in_layout), "out_layout", qtk_hub_layout_name(s.out_layout),
                           "in_files", (Py_ssize_t)s.in_files, "out_files", (Py_ssize_t)s.out_files, "out_directory",
                           s.out_directory ? Py_True : Py_False, "seconds", secs, "plan", x.plan, "notices", x.notices,
                           "requantized", x.requantized);
done_scheme:
    Py_XDECREF(scheme_o);
done:
    qtk_imatrix_close(im);
    Py_XDECREF(x.et);
    Py_XDECREF(x.ev);
    Py_XDECREF(x.etb);
    Py_XDECREF(x.plan);
    Py_XDECREF(x.notices);
    Py_XDECREF(x.requantized);
    PyMem_Free(rules);
    Py_XDECREF(src);
    Py_XDECREF(dst);
    return result;
}

/* ---- evaluation ---- */

static PyObject *nan_none(double v) {
    if (isnan(v)) Py_RETURN_NONE;
    return PyFloat_FromDouble(v);
}

static PyObject *cell_dict(const qtk_eval_cell *c, size_t n_failed, bool total) {
    if (!c->ok && !total) return Py_BuildValue("{s:O,s:s}", "ok", Py_False, "error", c->err);
    qtk_eval_metrics m;
    qtk_eval_metrics_of(c, &m);
    PyObject *d = Py_BuildValue("{s:O,s:n,s:n,s:N,s:N,s:N,s:N}", "ok", Py_True, "bytes", (Py_ssize_t)c->bytes, "numel",
                                (Py_ssize_t)c->numel, "bits_per_element", nan_none(m.bits_per_el), "rmse", nan_none(m.rmse),
                                "max_abs", nan_none(m.max_abs), "sqnr_db", nan_none(m.sqnr_db));
    if (d && c->weighted) {
        PyObject *w = nan_none(m.wsqnr_db);
        if (!w || PyDict_SetItemString(d, "weighted_sqnr_db", w) < 0) Py_CLEAR(d);
        Py_XDECREF(w);
    }
    if (d && total) {
        PyObject *f = PyLong_FromSize_t(n_failed);
        if (!f || PyDict_SetItemString(d, "failed", f) < 0) Py_CLEAR(d);
        Py_XDECREF(f);
    }
    return d;
}

const char qtkpy_evaluate_doc[] =
    "evaluate(path, schemes, calibrations=None, only=None, skip=None, min_elements=1024, input_layout=None,\n"
    "         threads=None, progress=None, imatrix=None) -> dict\n\n"
    "The C entry point of qtk.evaluate (which see).";

PyObject *qtkpy_evaluate(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static const char *kwlist[] = {"path", "schemes", "calibrations", "only", "skip", "min_elements", "input_layout",
                                   "threads", "progress", "imatrix", NULL};
    PyObject *path = NULL, *schemes_o, *calibs_o = Py_None, *only_o = Py_None, *skip_o = Py_None, *minel_o = Py_None,
             *progress = Py_None, *imatrix_o = Py_None;
    qtk_eval_options o = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O|OOOOO&O&OO:evaluate", QTKPY_KW(kwlist), qtkpy_path_conv, &path,
                                     &schemes_o, &calibs_o, &only_o, &skip_o, &minel_o, qtkpy_layout_conv, &o.input_layout,
                                     qtkpy_threads_conv, &o.threads, &progress, &imatrix_o)) {
        Py_XDECREF(path);
        return qtkpy_rewrap("evaluate");
    }
    qtk_imatrix *im = NULL;
    const char **schemes = NULL, **calib_names = NULL;
    qtk_calibration *calibs = NULL;
    PyObject *result = NULL, *columns = NULL, *rows = NULL, *totals = NULL;
    qtk_eval_report *r = NULL;
    cb_ctx x = {0};
    size_t nc = 0;
    if (str_list(schemes_o, "schemes", &schemes, &o.n_schemes) || str_list(calibs_o, "calibrations", &calib_names, &nc) ||
        opt_str(only_o, "only", &o.only) || opt_str(skip_o, "skip", &o.skip) ||
        opt_size(minel_o, "min_elements", &o.min_elements))
        goto done;
    if (minel_o != Py_None && o.min_elements == 0) o.min_elements = 1;
    if (nc) {
        calibs = PyMem_Calloc(nc, sizeof *calibs);
        if (!calibs) {
            PyErr_NoMemory();
            goto done;
        }
        for (size_t i = 0; i < nc; i++) {
            qtk_status st = qtk_calibration_parse(calib_names[i], &calibs[i]);
            if (st) {
                qtkpy_raise(st);
                goto done;
            }
        }
    }
    if (progress != Py_None && !PyCallable_Check(progress)) {
        qtkpy_fail(QTK_E_ARG, "progress must be callable or None");
        goto done;
    }
    if (open_imatrix(imatrix_o, &im)) goto done;
    o.imatrix = im;
    o.schemes = schemes;
    o.calibrations = calibs;
    o.n_calibrations = nc;
    x.progress = progress == Py_None ? NULL : progress;
    o.progress = progress_cb;
    o.ctx = &x;
    const char *p = PyBytes_AS_STRING(path);
    qtk_status st;
    Py_BEGIN_ALLOW_THREADS
    st = qtk_ckpt_eval(p, &o, &r);
    Py_END_ALLOW_THREADS
    if (x.et) {
        PyErr_Restore(x.et, x.ev, x.etb);
        x.et = x.ev = x.etb = NULL;
        goto done;
    }
    if (st) {
        qtkpy_raise(st);
        goto done;
    }
    size_t ncol = qtk_eval_columns(r), nrow = qtk_eval_rows(r);
    columns = PyList_New(0);
    rows = PyList_New(0);
    totals = PyList_New(0);
    if (!columns || !rows || !totals) goto done;
    for (size_t j = 0; j < ncol; j++) {
        const qtk_eval_column *c = qtk_eval_column_at(r, j);
        char spec[256];
        if (qtk_scheme_format(&c->scheme, spec, sizeof spec, NULL)) snprintf(spec, sizeof spec, "?");
        PyObject *d = Py_BuildValue("{s:s,s:s,s:s}", "spec", c->spec, "scheme", spec, "calibration",
                                    qtk_calibration_name(c->calibration));
        qtk_eval_cell tot;
        size_t failed = 0;
        qtk_eval_total(r, j, &tot, &failed);
        PyObject *t = d ? cell_dict(&tot, failed, true) : NULL;
        int bad = !d || !t || PyList_Append(columns, d) < 0 || PyList_Append(totals, t) < 0;
        Py_XDECREF(d);
        Py_XDECREF(t);
        if (bad) goto done;
    }
    for (size_t i = 0; i < nrow; i++) {
        const qtk_eval_row *row = qtk_eval_row_at(r, i);
        PyObject *cells = PyList_New(0);
        for (size_t j = 0; cells && j < ncol; j++) {
            PyObject *c = cell_dict(qtk_eval_cell_at(r, i, j), 0, false);
            if (!c || PyList_Append(cells, c) < 0) Py_CLEAR(cells);
            Py_XDECREF(c);
        }
        PyObject *shape = cells ? qtkpy_shape_tuple(row->shape, row->rank) : NULL;
        PyObject *d = shape ? Py_BuildValue("{s:s,s:s,s:N,s:n,s:O,s:N}", "name", row->name, "stored", row->stored, "shape",
                                            shape, "numel", (Py_ssize_t)row->numel, "weighted",
                                            row->weighted ? Py_True : Py_False, "results", cells)
                            : NULL;
        if (!d) {
            if (!shape) Py_XDECREF(cells);
            goto done;
        }
        int bad = PyList_Append(rows, d) < 0;
        Py_DECREF(d);
        if (bad) goto done;
    }
    result = Py_BuildValue("{s:O,s:O,s:O}", "columns", columns, "tensors", rows, "totals", totals);
done:
    qtk_eval_report_free(r);
    qtk_imatrix_close(im);
    Py_XDECREF(columns);
    Py_XDECREF(rows);
    Py_XDECREF(totals);
    Py_XDECREF(x.et);
    Py_XDECREF(x.ev);
    Py_XDECREF(x.etb);
    PyMem_Free(schemes);
    PyMem_Free(calib_names);
    PyMem_Free(calibs);
    Py_XDECREF(path);
    return result;
}
