/* ckpt.c — qtk.Checkpoint (a qtk_ckpt: an open burnpack, safetensors or GGUF checkpoint)
 * and qtk.open.
 *
 * A qtk_ckpt is used by one thread at a time: every call into it holds the object's lock,
 * taken with the GIL released when another thread has it, and long reads run without the
 * GIL. Quantized tensors come from qtk_ckpt_load_tensor (borrowing the map, no copy where
 * the file stores qtk's layout); raw tensors are read by qtk straight into the array
 * returned. */
#include "qtkpy.h"

#include <pythread.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    qtk_ckpt *c;
    PyObject *path; /* str */
    PyThread_type_lock lock;
} CkptObject;

static void lock(CkptObject *o) {
    if (!PyThread_acquire_lock(o->lock, NOWAIT_LOCK)) {
        Py_BEGIN_ALLOW_THREADS
        PyThread_acquire_lock(o->lock, WAIT_LOCK);
        Py_END_ALLOW_THREADS
    }
}

static void unlock(CkptObject *o) { PyThread_release_lock(o->lock); }

/* Locks o and checks it is open: 0, or -1 with qtk.Error raised (and o unlocked). */
static int enter(CkptObject *o) {
    lock(o);
    if (!o->c) {
        unlock(o);
        const char *p = PyUnicode_AsUTF8(o->path);
        if (!p) PyErr_Clear();
        qtkpy_fail(QTK_E_ARG, "checkpoint '%s' is closed", p ? p : "?");
        return -1;
    }
    return 0;
}

/* The index of tensor `name` (o locked): 0, or -1 with qtk.Error raised. */
static int find(CkptObject *o, PyObject *name, size_t *i) {
    const char *s = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
    if (!s) {
        qtkpy_fail(QTK_E_ARG, "a tensor name must be a str");
        return -1;
    }
    qtk_status st = qtk_ckpt_find(o->c, s, i);
    if (st) {
        qtkpy_raise(st);
        return -1;
    }
    return 0;
}

const char qtkpy_open_doc[] =
    "open(path, layout=None) -> Checkpoint\n\n"
    "Opens a checkpoint: a burnpack (.bpk), safetensors or GGUF file (recognised by content), a\n"
    "*.safetensors.index.json, or a directory of safetensors shards. The whole container is validated\n"
    "(lengths against shapes and schemes, offsets, overlaps) without reading tensor data; the file is\n"
    "memory-mapped. layout: how to read a safetensors checkpoint -- None (detect the Hugging Face Hub\n"
    "layout: gpt-oss, modelopt, compressed-tensors, deepseek, bnb, torchao, gptq, awq, or qtk's convention), 'none'\n"
    "(the tensors as stored, nothing folded), or a layout name. Use it as a context manager, or close()\n"
    "it; tensors taken from it stay valid after it is closed. Raises qtk.Error (QTK_E_IO for a missing\n"
    "file, QTK_E_FORMAT for a malformed one).";

PyObject *qtkpy_open(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static const char *kwlist[] = {"path", "layout", NULL};
    PyObject *path = NULL;
    qtk_open_options oo = {QTK_LAYOUT_AUTO};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|O&:open", QTKPY_KW(kwlist), qtkpy_path_conv, &path, qtkpy_layout_conv,
                                     &oo.layout)) {
        Py_XDECREF(path);
        return qtkpy_rewrap("open");
    }
    CkptObject *o = PyObject_New(CkptObject, &qtkpy_CheckpointType);
    if (!o) {
        Py_DECREF(path);
        return NULL;
    }
    o->c = NULL;
    o->lock = PyThread_allocate_lock();
    o->path = PyUnicode_DecodeFSDefaultAndSize(PyBytes_AS_STRING(path), PyBytes_GET_SIZE(path));
    if (!o->lock || !o->path) {
        bool nolock = !o->lock;
        Py_DECREF(path);
        Py_DECREF(o);
        return nolock ? PyErr_NoMemory() : NULL;
    }
    const char *p = PyBytes_AS_STRING(path);
    qtk_ckpt *c = NULL;
    qtk_status st;
    Py_BEGIN_ALLOW_THREADS
    st = qtk_ckpt_open(p, &oo, &c);
    Py_END_ALLOW_THREADS
    Py_DECREF(path);
    if (st) {
        Py_DECREF(o);
        return qtkpy_raise(st);
    }
    o->c = c;
    return (PyObject *)o;
}

static PyObject *ckpt_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    (void)type;
    (void)args;
    (void)kw;
    return qtkpy_fail(QTK_E_ARG, "qtk.Checkpoint has no constructor: use qtk.open(path)");
}

static void ckpt_dealloc(PyObject *self) {
    CkptObject *o = (CkptObject *)self;
    qtk_ckpt_close(o->c);
    if (o->lock) PyThread_free_lock(o->lock);
    Py_XDECREF(o->path);
    PyObject_Free(self);
}

static PyObject *ckpt_close(PyObject *self, PyObject *unused) {
    (void)unused;
    CkptObject *o = (CkptObject *)self;
    lock(o);
    qtk_ckpt *c = o->c;
    o->c = NULL;
    unlock(o);
    qtk_ckpt_close(c);
    Py_RETURN_NONE;
}

static PyObject *ckpt_enter(PyObject *self, PyObject *unused) {
    (void)unused;
    CkptObject *o = (CkptObject *)self;
    if (enter(o)) return NULL;
    unlock(o);
    return Py_NewRef(self);
}

static PyObject *ckpt_exit(PyObject *self, PyObject *args) {
    (void)args;
    PyObject *r = ckpt_close(self, NULL);
    Py_XDECREF(r);
    Py_RETURN_FALSE;
}

static PyObject *keys_locked(CkptObject *o) {
    size_t n = qtk_ckpt_count(o->c);
    PyObject *l = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; l && i < n; i++) {
        PyObject *s = PyUnicode_FromString(qtk_ckpt_tensor_at(o->c, i)->name);
        if (!s) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, (Py_ssize_t)i, s);
    }
    return l;
}

static PyObject *ckpt_keys(PyObject *self, PyObject *unused) {
    (void)unused;
    CkptObject *o = (CkptObject *)self;
    if (enter(o)) return NULL;
    PyObject *l = keys_locked(o);
    unlock(o);
    return l;
}

static PyObject *ckpt_iter(PyObject *self) {
    PyObject *l = ckpt_keys(self, NULL);
    if (!l) return NULL;
    PyObject *it = PyObject_GetIter(l);
    Py_DECREF(l);
    return it;
}

static Py_ssize_t ckpt_len(PyObject *self) {
    CkptObject *o = (CkptObject *)self;
    if (enter(o)) return -1;
    size_t n = qtk_ckpt_count(o->c);
    unlock(o);
    return (Py_ssize_t)n;
}

static int ckpt_contains(PyObject *self, PyObject *name) {
    CkptObject *o = (CkptObject *)self;
    if (!PyUnicode_Check(name)) return 0;
    const char *s = PyUnicode_AsUTF8(name);
    if (!s) return -1;
    if (enter(o)) return -1;
    size_t i;
    int found = qtk_ckpt_find(o->c, s, &i) == QTK_OK;
    unlock(o);
    if (!found) qtk_clear_error();
    return found;
}

static PyObject *info_dict(CkptObject *o, size_t i) {
    const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(o->c, i);
    char type[256];
    qtk_ckpt_type_string(t, type, sizeof type);
    PyObject *shape = qtkpy_shape_tuple(t->shape, t->rank);
    if (!shape) return NULL;
    PyObject *scheme = NULL;
    if (t->quantized) {
        char spec[256];
        if (qtk_scheme_format(&t->scheme, spec, sizeof spec, NULL)) {
            Py_DECREF(shape);
            return qtkpy_raise(QTK_E_INTERNAL);
        }
        scheme = PyUnicode_FromString(spec);
    } else
        scheme = Py_NewRef(Py_None);
    PyObject *pid = t->has_param_id ? PyLong_FromUnsignedLongLong(t->param_id) : Py_NewRef(Py_None);
    PyObject *ft = t->file_type ? PyUnicode_FromString(t->file_type) : Py_NewRef(Py_None);
    if (!scheme || !pid || !ft) {
        Py_DECREF(shape);
        Py_XDECREF(scheme);
        Py_XDECREF(pid);
        Py_XDECREF(ft);
        return NULL;
    }
    return Py_BuildValue("{s:s,s:s,s:N,s:O,s:N,s:n,s:n,s:N,s:n,s:n,s:O,s:N}", "name", t->name, "dtype", type, "shape",
                         shape, "quantized", t->quantized ? Py_True : Py_False, "scheme", scheme, "numel",
                         (Py_ssize_t)t->numel, "nbytes", (Py_ssize_t)t->nbytes, "file_type", ft, "file_bytes",
                         (Py_ssize_t)t->file_bytes, "offset", (Py_ssize_t)qtk_ckpt_offset_of(o->c, i), "decoded",
                         t->decoded ? Py_True : Py_False, "param_id", pid);
}

static PyObject *ckpt_info(PyObject *self, PyObject *name) {
    CkptObject *o = (CkptObject *)self;
    if (enter(o)) return NULL;
    size_t i;
    PyObject *r = find(o, name, &i) ? NULL : info_dict(o, i);
    unlock(o);
    return r;
}

/* ---- reading tensors ---- */

/* The numpy type holding a raw element type as it is, or -1. */
static int npy_type_of(qtk_elem e) {
    switch (e) {
    case QTK_ELEM_F64: return NPY_FLOAT64;
    case QTK_ELEM_F32:
    case QTK_ELEM_FLEX32: return NPY_FLOAT32;
    case QTK_ELEM_F16: return NPY_FLOAT16;
    case QTK_ELEM_I64: return NPY_INT64;
    case QTK_ELEM_I32: return NPY_INT32;
    case QTK_ELEM_I16: return NPY_INT16;
    case QTK_ELEM_I8: return NPY_INT8;
    case QTK_ELEM_U64: return NPY_UINT64;
    case QTK_ELEM_U32: return NPY_UINT32;
    case QTK_ELEM_U16: return NPY_UINT16;
    case QTK_ELEM_U8: return NPY_UINT8;
    case QTK_ELEM_BOOL:
    case QTK_ELEM_BOOL_U8: return NPY_BOOL;
    case QTK_ELEM_C64: return NPY_COMPLEX64;
    default: return -1;
    }
}

/* A new little-endian array (file bytes are little-endian). */
static PyArrayObject *new_le_array(int rank, const size_t *shape, int type_num) {
    if (rank > NPY_MAXDIMS) {
        qtkpy_fail(QTK_E_UNSUPPORTED, "rank %d is more than numpy's %d dimensions", rank, NPY_MAXDIMS);
        return NULL;
    }
    npy_intp dims[NPY_MAXDIMS];
    for (int i = 0; i < rank; i++) dims[i] = (npy_intp)shape[i];
    PyArray_Descr *d = PyArray_DescrFromType(type_num);
    if (d && d->elsize > 1) {
        PyArray_Descr *le = PyArray_DescrNewByteorder(d, NPY_LITTLE);
        Py_DECREF(d);
        d = le;
    }
    if (!d) return NULL;
    PyArrayObject *a = (PyArrayObject *)PyArray_NewFromDescr(&PyArray_Type, d, rank, dims, NULL, NULL, 0, NULL);
    if (!a) qtkpy_rewrap("array");
    return a;
}

/* qtk_ckpt_read of tensor i into dst (o locked), without the GIL. */
static qtk_status read_raw(CkptObject *o, size_t i, void *dst, size_t len) {
    qtk_status st;
    qtk_ckpt *c = o->c;
    Py_BEGIN_ALLOW_THREADS
    st = qtk_ckpt_read(c, i, dst, len);
    Py_END_ALLOW_THREADS
    return st;
}

static PyObject *read_values_locked(CkptObject *o, size_t i, qtk_dtype dt) {
    const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(o->c, i);
    PyArrayObject *a = new_le_array(t->rank, t->shape, dt == QTK_DTYPE_F16 ? NPY_FLOAT16 : NPY_FLOAT32);
    if (!a) return NULL;
    void *dst = PyArray_DATA(a);
    size_t n = t->numel;
    qtk_ckpt *c = o->c;
    qtk_status st;
    Py_BEGIN_ALLOW_THREADS
    st = qtk_ckpt_read_values(c, i, dt, dst, n);
    Py_END_ALLOW_THREADS
    if (st) {
        Py_DECREF(a);
        return qtkpy_raise(st);
    }
    return (PyObject *)a;
}

static PyObject *tensor_locked(CkptObject *o, size_t i) {
    const qtk_ckpt_tensor *t = qtk_ckpt_tensor_at(o->c, i);
    if (t->quantized) {
        qtk_tensor *q = NULL;
        qtk_ckpt *c = o->c;
        qtk_status st;
        Py_BEGIN_ALLOW_THREADS
        st = qtk_ckpt_load_tensor(c, i, &q);
        Py_END_ALLOW_THREADS
        if (st) return qtkpy_raise(st);
        return qtkpy_tensor_new(q, NULL);
    }
    int tn = npy_type_of(t->elem);
    if (tn >= 0) {
        PyArrayObject *a = new_le_array(t->rank, t->shape, tn);
        if (!a) return NULL;
        qtk_status st = read_raw(o, i, PyArray_DATA(a), (size_t)PyArray_NBYTES(a));
        if (st) {
            Py_DECREF(a);
            return qtkpy_raise(st);
        }
        if (tn == NPY_BOOL) { /* any non-zero byte is true */
            uint8_t *b = PyArray_DATA(a);
            for (size_t k = 0; k < t->numel; k++) b[k] = b[k] != 0;
        }
        return (PyObject *)a;
    }
    if (t->elem == QTK_ELEM_BOOL_U32) {
        PyArrayObject *a = new_le_array(t->rank, t->shape, NPY_BOOL);
        uint8_t *tmp = a ? PyMem_Malloc(t->nbytes ? t->nbytes : 1) : NULL;
        if (!tmp) {
            Py_XDECREF(a);
            return a ? PyErr_NoMemory() : NULL;
        }
        qtk_status st = read_raw(o, i, tmp, t->nbytes);
        if (!st) {
            uint8_t *b = PyArray_DATA(a);
            for (size_t k = 0; k < t->numel; k++) b[k] = (tmp[4 * k] | tmp[4 * k + 1] | tmp[4 * k + 2] | tmp[4 * k + 3]) != 0;
        }
        PyMem_Free(tmp);
        if (st) {
            Py_DECREF(a);
            return qtkpy_raise(st);
        }
        return (PyObject *)a;
    }
    if (qtk_elem_is_float(t->elem)) return read_values_locked(o, i, QTK_DTYPE_F32); /* bf16, fp8, fp4: exact in f32 */
    /* FNUZ, FP6: their bytes */
    size_t n = t->nbytes;
    PyArrayObject *a = new_le_array(1, &n, NPY_UINT8);
    if (!a) return NULL;
    qtk_status st = read_raw(o, i, PyArray_DATA(a), n);
    if (st) {
        Py_DECREF(a);
        return qtkpy_raise(st);
    }
    return (PyObject *)a;
}

static PyObject *ckpt_tensor(PyObject *self, PyObject *name) {
    CkptObject *o = (CkptObject *)self;
    if (enter(o)) return NULL;
    size_t i;
    PyObject *r = find(o, name, &i) ? NULL : tensor_locked(o, i);
    unlock(o);
    return r;
}

static PyObject *ckpt_numpy(PyObject *self, PyObject *args, PyObject *kw) {
    static const char *kwlist[] = {"name", "dtype", NULL};
    PyObject *name;
    qtk_dtype dt = QTK_DTYPE_F32;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O&:numpy", QTKPY_KW(kwlist), &name, qtkpy_value_dtype_conv, &dt))
        return qtkpy_rewrap("numpy");
    CkptObject *o = (CkptObject *)self;
    if (enter(o)) return NULL;
    size_t i;
    PyObject *r = find(o, name, &i) ? NULL : read_values_locked(o, i, dt);
    unlock(o);
    return r;
}

static PyObject *ckpt_read_bytes(PyObject *self, PyObject *name) {
    CkptObject *o = (CkptObject *)self;
    if (enter(o)) return NULL;
    size_t i;
    PyObject *r = NULL;
    if (!find(o, name, &i)) {
        size_t n = qtk_ckpt_tensor_at(o->c, i)->nbytes;
        r = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
        qtk_status st = r ? read_raw(o, i, PyBytes_AS_STRING(r), n) : QTK_OK;
        if (st) {
            Py_CLEAR(r);
            qtkpy_raise(st);
        }
    }
    unlock(o);
    return r;
}

/* ---- properties ---- */

static PyObject *get_format(PyObject *self, void *c) {
    (void)c;
    CkptObject *o = (CkptObject *)self;
    if (enter(o)) return NULL;
    PyObject *r = PyUnicode_FromString(qtk_ckpt_format_name(qtk_ckpt_format_of(o->c)));
    unlock(o);
    return r;
}

static PyObject *get_path(PyObject *self, void *c) {
    (void)c;
    return Py_NewRef(((CkptObject *)self)->path);
}

static PyObject *get_closed(PyObject *self, void *c) {
    (void)c;
    CkptObject *o = (CkptObject *)self;
    lock(o);
    bool closed = !o->c;
    unlock(o);
    return PyBool_FromLong(closed);
}

static PyObject *get_metadata(PyObject *self, void *c) {
    (void)c;
    CkptObject *o = (CkptObject *)self;
    if (enter(o)) return NULL;
    PyObject *d = PyDict_New();
    for (size_t i = 0; d && i < qtk_ckpt_meta_count(o->c); i++) {
        const char *k = NULL, *v = NULL;
        qtk_ckpt_meta_at(o->c, i, &k, &v);
        PyObject *vs = PyUnicode_DecodeUTF8(v, (Py_ssize_t)strlen(v), "replace");
        if (!vs || PyDict_SetItemString(d, k, vs) < 0) Py_CLEAR(d);
        Py_XDECREF(vs);
    }
    unlock(o);
    return d;
}

static PyObject *get_scalars(PyObject *self, void *c) {
    (void)c;
    CkptObject *o = (CkptObject *)self;
    if (enter(o)) return NULL;
    PyObject *d = PyDict_New();
    for (size_t i = 0; d && i < qtk_ckpt_scalar_count(o->c); i++) {
        const qtk_ckpt_scalar *s = qtk_ckpt_scalar_at(o->c, i);
        PyObject *v = s->kind == QTK_SCALAR_INT    ? PyLong_FromLongLong(s->i)
                      : s->kind == QTK_SCALAR_UINT ? PyLong_FromUnsignedLongLong(s->u)
                      : s->kind == QTK_SCALAR_FLOAT ? PyFloat_FromDouble(s->f)
                                                    : PyBool_FromLong(s->b);
        if (!v || PyDict_SetItemString(d, s->name, v) < 0) Py_CLEAR(d);
        Py_XDECREF(v);
    }
    unlock(o);
    return d;
}

static PyObject *str_or_none(const char *s) {
    if (!s) Py_RETURN_NONE;
    return PyUnicode_FromString(s);
}

static PyObject *get_hub(PyObject *self, void *c) {
    (void)c;
    CkptObject *o = (CkptObject *)self;
    if (enter(o)) return NULL;
    qtk_hub_info h;
    qtk_ckpt_hub_info(o->c, &h);
    PyObject *shards = PyList_New((Py_ssize_t)h.n_shards), *notices = PyList_New((Py_ssize_t)h.n_notices);
    for (size_t i = 0; shards && i < h.n_shards; i++) {
        PyObject *s = PyUnicode_DecodeFSDefault(h.shards[i]);
        if (!s) Py_CLEAR(shards);
        else PyList_SET_ITEM(shards, (Py_ssize_t)i, s);
    }
    for (size_t i = 0; notices && i < h.n_notices; i++) {
        PyObject *n = Py_BuildValue("(NN)", str_or_none(h.notices[i].tensor), str_or_none(h.notices[i].text));
        if (!n) Py_CLEAR(notices);
        else PyList_SET_ITEM(notices, (Py_ssize_t)i, n);
    }
    PyObject *r = NULL;
    if (shards && notices)
        r = Py_BuildValue("{s:s,s:N,s:N,s:N,s:N,s:O,s:O}", "layout", qtk_hub_layout_name(h.layout), "detected_by",
                          str_or_none(h.detected_by), "config_file", str_or_none(h.config_file), "quant_config",
                          str_or_none(h.quant_config), "index_file", str_or_none(h.index_file), "shards", shards,
                          "notices", notices);
    Py_XDECREF(shards);
    Py_XDECREF(notices);
    unlock(o);
    return r;
}

static PyObject *get_facts(PyObject *self, void *c) {
    (void)c;
    CkptObject *o = (CkptObject *)self;
    if (enter(o)) return NULL;
    qtk_ckpt_facts f;
    qtk_ckpt_facts_of(o->c, &f);
    unlock(o);
    return Py_BuildValue("{s:n,s:n,s:n,s:s}", "file_bytes", (Py_ssize_t)f.file_bytes, "header_bytes",
                         (Py_ssize_t)f.header_bytes, "data_start", (Py_ssize_t)f.data_start, "note", f.note);
}

static PyObject *ckpt_repr(PyObject *self) {
    CkptObject *o = (CkptObject *)self;
    lock(o);
    PyObject *r = o->c ? PyUnicode_FromFormat("<qtk.Checkpoint %R (%s, %zu tensors)>", o->path,
                                              qtk_ckpt_format_name(qtk_ckpt_format_of(o->c)), qtk_ckpt_count(o->c))
                       : PyUnicode_FromFormat("<qtk.Checkpoint %R (closed)>", o->path);
    unlock(o);
    return r;
}

#define FN(f) ((PyCFunction)(void (*)(void))(f))

static PyMethodDef ckpt_methods[] = {
    {"keys", ckpt_keys, METH_NOARGS, "keys() -> list[str]\n\nThe tensors' names, in the order of their bytes in the file."},
    {"info", ckpt_info, METH_O,
     "info(name) -> dict\n\n"
     "What the checkpoint says about a tensor: 'name'; 'dtype' (the element type, 'F32', 'BF16', 'I64', ...,\n"
     "or for a quantized tensor its preset name or canonical spec); 'shape'; 'quantized'; 'scheme' (the\n"
     "canonical spec, or None); 'numel'; 'nbytes' (its bytes as qtk hands them out: Burn's layout for a\n"
     "quantized tensor); 'file_type' (the file's own type where it has one, e.g. GGUF's 'Q6_K'), 'file_bytes';\n"
     "'offset' (in its file); 'decoded' (True: no qtk scheme holds the file's type, read as F32);\n"
     "'param_id' (Burn's, or None). qtk.Error (QTK_E_NOTFOUND) for an unknown name."},
    {"tensor", ckpt_tensor, METH_O,
     "tensor(name) -> Tensor | numpy.ndarray\n\n"
     "A quantized tensor as a qtk.Tensor (borrowing the memory map, no copy, where the file stores the bytes\n"
     "in qtk's layout; it stays valid after close()). A raw tensor as an ndarray of its shape read straight\n"
     "from the file: F32 -> float32, F16 -> float16, F64 -> float64, integers and bool as themselves, C64 ->\n"
     "complex64; BF16, FP8 and FP4 (which numpy lacks) as float32, exactly; FNUZ and FP6 elements as their\n"
     "raw bytes (a 1-D uint8 array)."},
    {"numpy", FN(ckpt_numpy), METH_VARARGS | METH_KEYWORDS,
     "numpy(name, dtype='float32') -> numpy.ndarray\n\n"
     "A tensor's values as float32 or float16: a quantized tensor dequantized (with the stored convention's\n"
     "own formula where it has one), a float tensor converted (round to nearest even). Integer tensors raise\n"
     "qtk.Error (QTK_E_UNSUPPORTED)."},
    {"read_bytes", ckpt_read_bytes, METH_O,
     "read_bytes(name) -> bytes\n\nA tensor's bytes exactly as info(name)['nbytes'] counts them (Burn's layout for "
     "a quantized tensor, little-endian elements for a raw one)."},
    {"close", ckpt_close, METH_NOARGS, "close() -> None\n\nCloses the checkpoint (tensors taken from it stay valid)."},
    {"__enter__", ckpt_enter, METH_NOARGS, NULL},
    {"__exit__", ckpt_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef ckpt_getset[] = {
    {"format", get_format, NULL, "'burnpack', 'safetensors' or 'gguf'.", NULL},
    {"path", get_path, NULL, "The path it was opened from.", NULL},
    {"closed", get_closed, NULL, "True once closed.", NULL},
    {"metadata", get_metadata, NULL,
     "The string metadata, in file order, as a dict of str (GGUF: every KV, its value as text with its type, "
     "'u32:4096').",
     NULL},
    {"scalars", get_scalars, NULL, "Burnpack's typed scalars (Burn's Writer::with_scalar): a dict of int, float or bool.",
     NULL},
    {"hub", get_hub, NULL,
     "Where the tensors came from: a dict with 'layout' (the Hugging Face Hub layout read: 'none' for a plain "
     "checkpoint, 'qtk' for qtk's convention, 'gpt-oss', 'modelopt', ...), 'detected_by', 'config_file', "
     "'quant_config', 'index_file', 'shards' (paths) and 'notices' ((tensor, text) pairs about tensors read "
     "with no exact qtk form).",
     NULL},
    {"facts", get_facts, NULL, "Container facts: 'file_bytes', 'header_bytes', 'data_start' and a one-line 'note'.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods ckpt_as_sequence = {.sq_length = ckpt_len, .sq_contains = ckpt_contains};

static const char ckpt_doc[] =
    "An open checkpoint (see qtk.open): its tensors in file order, metadata and scalars.\n\n"
    "len(c) is the number of tensors, iter(c) and c.keys() their names, 'name' in c a lookup. Usable\n"
    "from several threads (calls are serialised); reads release the GIL.";

PyTypeObject qtkpy_CheckpointType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "qtk.Checkpoint",
    .tp_basicsize = sizeof(CkptObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = ckpt_doc,
    .tp_new = ckpt_new,
    .tp_dealloc = ckpt_dealloc,
    .tp_repr = ckpt_repr,
    .tp_iter = ckpt_iter,
    .tp_as_sequence = &ckpt_as_sequence,
    .tp_methods = ckpt_methods,
    .tp_getset = ckpt_getset,
};
