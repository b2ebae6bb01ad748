/* module.c — the qtk._qtk extension module: qtk.Error, the argument converters the other
 * files share, the process-wide settings (ISA level, threads, lookup tables) and the module
 * table. */
#define QTKPY_MODULE_C
#include "qtkpy.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

PyObject *qtkpy_Error;
Py_ssize_t qtkpy_live_tensors;

/* ---- errors ---- */

static PyObject *raise_message(qtk_status st, const char *msg) {
    PyObject *exc = PyObject_CallFunction(qtkpy_Error, "s", msg);
    if (!exc) return NULL;
    PyObject *name = PyUnicode_FromString(qtk_status_name(st));
    PyObject *text = PyUnicode_FromString(msg);
    if (!name || !text || PyObject_SetAttrString(exc, "status", name) < 0 || PyObject_SetAttrString(exc, "message", text) < 0) {
        Py_XDECREF(name);
        Py_XDECREF(text);
        Py_DECREF(exc);
        return NULL;
    }
    Py_DECREF(name);
    Py_DECREF(text);
    PyErr_SetObject(qtkpy_Error, exc);
    Py_DECREF(exc);
    return NULL;
}

PyObject *qtkpy_raise(qtk_status st) {
    const char *msg = qtk_last_error();
    if (!msg || !*msg) msg = qtk_status_name(st);
    return raise_message(st, msg);
}

PyObject *qtkpy_fail(qtk_status st, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    qtk_set_error(st, "%s", buf);
    return raise_message(st, buf);
}

PyObject *qtkpy_rewrap(const char *what) {
    if (!PyErr_Occurred() || PyErr_ExceptionMatches(qtkpy_Error) || !PyErr_ExceptionMatches(PyExc_Exception)) return NULL;
    qtk_status st = PyErr_ExceptionMatches(PyExc_MemoryError) ? QTK_E_NOMEM : QTK_E_ARG;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *s = value ? PyObject_Str(value) : NULL;
    const char *text = s ? PyUnicode_AsUTF8(s) : NULL;
    if (!text) PyErr_Clear();
    char buf[1024];
    snprintf(buf, sizeof buf, "%s: %s", what, text && *text ? text : ((PyTypeObject *)type)->tp_name);
    Py_XDECREF(s);
    qtk_set_error(st, "%s", buf);
    raise_message(st, buf);
    /* the original error stays visible as the cause */
    if (value) {
        PyObject *t2, *v2, *tb2;
        PyErr_Fetch(&t2, &v2, &tb2);
        PyErr_NormalizeException(&t2, &v2, &tb2);
        if (v2) {
            Py_INCREF(value);
            PyException_SetCause(v2, value);
        }
        PyErr_Restore(t2, v2, tb2);
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return NULL;
}

/* ---- converters ---- */

int qtkpy_shape_conv(PyObject *o, void *out) {
    qtkpy_shape *sh = out;
    sh->rank = 0;
    if (PyLong_Check(o)) {
        Py_ssize_t v = PyLong_AsSsize_t(o);
        if (v == -1 && PyErr_Occurred()) return qtkpy_rewrap("shape"), 0;
        if (v < 0) return qtkpy_fail(QTK_E_SHAPE, "shape: extent %zd is negative", v), 0;
        sh->rank = 1;
        sh->dims[0] = (size_t)v;
        return 1;
    }
    PyObject *seq = PySequence_Fast(o, "shape must be a tuple of ints");
    if (!seq) return qtkpy_rewrap("shape"), 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > QTK_MAX_RANK) {
        Py_DECREF(seq);
        return qtkpy_fail(QTK_E_SHAPE, "shape has rank %zd; qtk tensors have rank 0 to %d", n, QTK_MAX_RANK), 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *idx = PyNumber_Index(PySequence_Fast_GET_ITEM(seq, i));
        Py_ssize_t v = idx ? PyLong_AsSsize_t(idx) : -1;
        Py_XDECREF(idx);
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return qtkpy_rewrap("shape"), 0;
        }
        if (v < 0) {
            Py_DECREF(seq);
            return qtkpy_fail(QTK_E_SHAPE, "shape: extent %zd (dim %zd) is negative", v, i), 0;
        }
        sh->dims[i] = (size_t)v;
    }
    sh->rank = (int)n;
    Py_DECREF(seq);
    return 1;
}

PyObject *qtkpy_shape_tuple(const size_t *dims, int rank) {
    PyObject *t = PyTuple_New(rank);
    for (int i = 0; t && i < rank; i++) {
        PyObject *v = PyLong_FromSize_t(dims[i]);
        if (!v) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

int qtkpy_value_dtype_conv(PyObject *o, void *out) {
    qtk_dtype *d = out;
    if (o == Py_None) {
        *d = QTK_DTYPE_F32;
        return 1;
    }
    PyArray_Descr *descr = NULL;
    if (!PyArray_DescrConverter2(o, &descr) || !descr) {
        PyErr_Clear();
        PyObject *r = PyObject_Repr(o);
        qtkpy_fail(QTK_E_ARG, "dtype %s is not float32 or float16", r ? PyUnicode_AsUTF8(r) : "?");
        Py_XDECREF(r);
        return 0;
    }
    int tn = descr->type_num;
    Py_DECREF(descr);
    if (tn == NPY_FLOAT32) *d = QTK_DTYPE_F32;
    else if (tn == NPY_FLOAT16) *d = QTK_DTYPE_F16;
    else {
        PyObject *r = PyObject_Repr(o);
        qtkpy_fail(QTK_E_ARG, "dtype %s is not float32 or float16", r ? PyUnicode_AsUTF8(r) : "?");
        Py_XDECREF(r);
        return 0;
    }
    return 1;
}

int qtkpy_calibration_conv(PyObject *o, void *out) {
    qtk_calibration *c = out;
    if (o == Py_None) {
        *c = QTK_CALIB_MINMAX;
        return 1;
    }
    const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    if (!s) return qtkpy_fail(QTK_E_ARG, "calibration must be 'minmax', 'absmean' or 'mse'"), 0;
    qtk_status st = qtk_calibration_parse(s, c);
    if (st) return qtkpy_raise(st), 0;
    return 1;
}

int qtkpy_layout_conv(PyObject *o, void *out) {
    qtk_hub_layout *l = out;
    if (o == Py_None) {
        *l = QTK_LAYOUT_AUTO;
        return 1;
    }
    const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    if (!s) return qtkpy_fail(QTK_E_ARG, "layout must be a layout name (str) or None"), 0;
    qtk_status st = qtk_hub_layout_parse(s, l);
    if (st) return qtkpy_raise(st), 0;
    return 1;
}

int qtkpy_path_conv(PyObject *o, void *out) {
    PyObject **b = out;
    *b = NULL;
    if (!PyUnicode_FSConverter(o, b)) return qtkpy_rewrap("path"), 0;
    return 1;
}

int qtkpy_threads_conv(PyObject *o, void *out) {
    int *t = out;
    if (o == Py_None) {
        *t = 0;
        return 1;
    }
    long v = PyLong_Check(o) ? PyLong_AsLong(o) : -1;
    if (v == -1 && PyErr_Occurred()) PyErr_Clear();
    if (v < 0 || v > 4096) return qtkpy_fail(QTK_E_ARG, "threads must be None or an int in 0..4096"), 0;
    *t = (int)v;
    return 1;
}

PyArrayObject *qtkpy_f32_array(PyObject *o, const char *what, bool float_only) {
    if (PyArray_Check(o)) {
        PyArrayObject *a = (PyArrayObject *)o;
        int tn = PyArray_TYPE(a);
        if (float_only && tn != NPY_FLOAT32 && tn != NPY_FLOAT16 && tn != NPY_FLOAT64) {
            PyObject *r = PyObject_Str((PyObject *)PyArray_DESCR(a));
            qtkpy_fail(QTK_E_ARG, "%s has dtype %s; qtk reads float32, float16 or float64 arrays", what,
                       r ? PyUnicode_AsUTF8(r) : "?");
            Py_XDECREF(r);
            return NULL;
        }
        if (tn == NPY_FLOAT32 && PyArray_IS_C_CONTIGUOUS(a) && PyArray_ISALIGNED(a) && PyArray_ISNOTSWAPPED(a)) {
            Py_INCREF(o);
            return a; /* read in place */
        }
    }
    /* one conversion: cast, byte swap and reorder into a new C-contiguous float32 array */
    PyObject *r = PyArray_FromAny(o, PyArray_DescrFromType(NPY_FLOAT32), 0, 0,
                                  NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_FORCECAST, NULL);
    if (!r) return qtkpy_rewrap(what), NULL;
    return (PyArrayObject *)r;
}

/* ---- module functions: settings ---- */

static PyObject *m_version(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyUnicode_FromString(qtk_version());
}

/* indexed by qtk_isa */
static const char *const isa_names[] = {"auto", "scalar", "portable", "avx2", "avx512", "neon"};

static PyObject *m_set_isa(PyObject *self, PyObject *arg) {
    (void)self;
    const char *s = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!s) return qtkpy_fail(QTK_E_ARG, "set_isa takes a level name: auto, scalar, portable, avx2, avx512 or neon");
    for (int i = 0; i < (int)(sizeof isa_names / sizeof isa_names[0]); i++)
        if (strcmp(s, isa_names[i]) == 0) {
            qtk_status st = qtk_set_isa((qtk_isa)i);
            if (st) return qtkpy_raise(st);
            Py_RETURN_NONE;
        }
    return qtkpy_fail(QTK_E_ARG, "ISA level '%s' is not auto, scalar, portable, avx2, avx512 or neon", s);
}

static PyObject *m_get_isa(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyUnicode_FromString(qtk_isa_name(qtk_get_isa()));
}

static PyObject *m_detect_isa(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyUnicode_FromString(qtk_isa_name(qtk_detect_isa()));
}

static PyObject *m_set_threads(PyObject *self, PyObject *arg) {
    (void)self;
    int n = 0;
    if (!qtkpy_threads_conv(arg, &n)) return NULL;
    qtk_set_threads(n);
    Py_RETURN_NONE;
}

static PyObject *m_get_threads(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyLong_FromLong(qtk_get_threads());
}

static PyObject *m_register_table(PyObject *self, PyObject *args) {
    (void)self;
    const char *name;
    PyObject *entries;
    if (!PyArg_ParseTuple(args, "sO:register_table", &name, &entries)) return qtkpy_rewrap("register_table");
    PyArrayObject *a = qtkpy_f32_array(entries, "entries", true);
    if (!a) return NULL;
    qtk_status st = qtk_table_register(name, PyArray_DATA(a), (size_t)PyArray_SIZE(a));
    Py_DECREF(a);
    if (st) return qtkpy_raise(st);
    Py_RETURN_NONE;
}

static PyObject *m_table(PyObject *self, PyObject *arg) {
    (void)self;
    const char *name = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!name) return qtkpy_fail(QTK_E_ARG, "table takes a table name (str)");
    float buf[256];
    size_t n = 0;
    qtk_status st = qtk_table_get(name, buf, 256, &n);
    if (st) return qtkpy_raise(st);
    npy_intp dim = (npy_intp)n;
    PyObject *r = PyArray_SimpleNew(1, &dim, NPY_FLOAT32);
    if (r) memcpy(PyArray_DATA((PyArrayObject *)r), buf, n * sizeof(float));
    return r;
}

static PyObject *m_set_buffer_cache(PyObject *self, PyObject *arg) {
    (void)self;
    Py_ssize_t v = PyLong_Check(arg) ? PyLong_AsSsize_t(arg) : -1;
    if (v < 0) {
        PyErr_Clear();
        return qtkpy_fail(QTK_E_ARG, "set_buffer_cache takes a byte count >= 0");
    }
    return PyLong_FromSize_t(qtkpy_pool_set_limit((size_t)v));
}

static PyObject *m_buffer_cache(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    size_t blocks, bytes, max;
    qtkpy_pool_stats(&blocks, &bytes, &max);
    return Py_BuildValue("{s:n,s:n,s:n}", "blocks", (Py_ssize_t)blocks, "bytes", (Py_ssize_t)bytes, "limit", (Py_ssize_t)max);
}

static PyObject *m_live_tensors(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyLong_FromSsize_t(qtkpy_live_tensors);
}

static PyObject *m_status_names(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    PyObject *l = PyList_New(0);
    for (int st = QTK_OK; l && st <= QTK_E_CANCELLED; st++) {
        PyObject *s = PyUnicode_FromString(qtk_status_name((qtk_status)st));
        if (!s || PyList_Append(l, s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(l);
            return NULL;
        }
        Py_DECREF(s);
    }
    return l;
}

#define FN(f) ((PyCFunction)(void (*)(void))(f))

static PyMethodDef methods[] = {
    {"version", m_version, METH_NOARGS, "version() -> str\n\nThe version of the qtk library this module runs on."},
    {"set_isa", m_set_isa, METH_O,
     "set_isa(level: str) -> None\n\nForces the kernels' instruction-set level for the process: 'auto' (the best this "
     "CPU runs, the default), 'scalar' (the reference that defines the bits), 'portable', 'avx2', 'avx512' or 'neon'. Every "
     "level gives the same bits. A level this CPU or build lacks raises qtk.Error (QTK_E_UNSUPPORTED). The "
     "environment variable QTK_ISA sets the initial level."},
    {"get_isa", m_get_isa, METH_NOARGS, "get_isa() -> str\n\nThe kernel level in use ('scalar', 'portable', 'avx2', 'avx512', 'neon')."},
    {"detect_isa", m_detect_isa, METH_NOARGS, "detect_isa() -> str\n\nThe best kernel level this CPU and build support."},
    {"set_threads", m_set_threads, METH_O,
     "set_threads(n: int | None) -> None\n\nDefault thread count of qtk's operations (0 or None: every available core)."},
    {"get_threads", m_get_threads, METH_NOARGS, "get_threads() -> int\n\nThe default thread count (0: every available core)."},
    {"register_table", m_register_table, METH_VARARGS,
     "register_table(name: str, entries) -> None\n\nRegisters (or replaces) a lookup table of 2, 4, 16 or 256 finite "
     "float32 entries under name, for schemes with table=name. 'nf4' and 'iq4nl' are built in."},
    {"table", m_table, METH_O, "table(name: str) -> numpy.ndarray\n\nThe entries of a lookup table as float32."},
    {"status_names", m_status_names, METH_NOARGS,
     "status_names() -> list[str]\n\nEvery value qtk.Error.status can take, 'QTK_OK' first."},
    {"set_buffer_cache", m_set_buffer_cache, METH_O,
     "set_buffer_cache(max_bytes: int) -> int\n\n"
     "How many bytes of freed large buffers (tensor bytes qtk allocated, 1 MiB and more) the module keeps\n"
     "for reuse, so that repeated quantize/convert calls of similar sizes write into memory that is\n"
     "already mapped instead of faulting in fresh pages. 256 MiB by default; 0 keeps nothing (and frees\n"
     "what is kept). Returns the previous limit."},
    {"buffer_cache", m_buffer_cache, METH_NOARGS,
     "buffer_cache() -> dict\n\nWhat the buffer cache holds: 'blocks', 'bytes', and its 'limit'."},
    {"_live_tensors", m_live_tensors, METH_NOARGS, "Number of qtk.Tensor objects alive (for leak tests)."},
    {"quantize", FN(qtkpy_quantize), METH_VARARGS | METH_KEYWORDS, qtkpy_quantize_doc},
    {"matmul", FN(qtkpy_matmul), METH_VARARGS | METH_KEYWORDS, qtkpy_matmul_doc},
    {"matmul_path", FN(qtkpy_matmul_path), METH_VARARGS | METH_KEYWORDS, qtkpy_matmul_path_doc},
    {"matmul_kernel", FN(qtkpy_matmul_kernel), METH_VARARGS | METH_KEYWORDS, qtkpy_matmul_kernel_doc},
    {"open", FN(qtkpy_open), METH_VARARGS | METH_KEYWORDS, qtkpy_open_doc},
    {"save", FN(qtkpy_save), METH_VARARGS | METH_KEYWORDS, qtkpy_save_doc},
    {"convert", FN(qtkpy_convert), METH_VARARGS | METH_KEYWORDS, qtkpy_convert_doc},
    {"evaluate", FN(qtkpy_evaluate), METH_VARARGS | METH_KEYWORDS, qtkpy_evaluate_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "qtk._qtk",
    .m_doc = "The C extension behind the qtk package (use 'import qtk').",
    .m_size = -1,
    .m_methods = methods,
};

static const char error_doc[] =
    "An error reported by qtk.\n\n"
    "str(e) and e.message are qtk's message, which names the argument, index or length at fault;\n"
    "e.status is the status name ('QTK_E_SHAPE', 'QTK_E_VALUE', 'QTK_E_IO', ...; see qtk.status_names()).";

PyMODINIT_FUNC PyInit__qtk(void);
PyMODINIT_FUNC PyInit__qtk(void) {
    import_array();
    qtkpy_pool_install(); /* before any allocation by the library */
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    PyObject *dict = Py_BuildValue("{s:O,s:s}", "status", Py_None, "__module__", "qtk");
    qtkpy_Error = dict ? PyErr_NewExceptionWithDoc("qtk.Error", error_doc, NULL, dict) : NULL;
    Py_XDECREF(dict);
    if (!qtkpy_Error || PyModule_AddObjectRef(m, "Error", qtkpy_Error) < 0) goto fail;
    PyTypeObject *types[] = {&qtkpy_SchemeType, &qtkpy_TensorType, &qtkpy_CheckpointType};
    const char *names[] = {"Scheme", "Tensor", "Checkpoint"};
    for (int i = 0; i < 3; i++)
        if (PyType_Ready(types[i]) < 0 || PyModule_AddObjectRef(m, names[i], (PyObject *)types[i]) < 0) goto fail;
    if (PyModule_AddIntConstant(m, "MAX_RANK", QTK_MAX_RANK) < 0) goto fail;
    if (PyModule_AddIntConstant(m, "MIN_ELEMENTS_DEFAULT", QTK_MIN_ELEMENTS_DEFAULT) < 0) goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
