/* tensor.c — qtk.Tensor (a quantized tensor: a qtk_tensor) and qtk.quantize.
 *
 * Copies: quantize reads a C-contiguous, aligned float32 array in place (anything else is
 * converted once); the library writes the tensor's bytes once; dequantize writes straight
 * into the array it returns; Tensor.from_bytes borrows a bytes object (other buffers are
 * copied once, since they could change under the tensor). */
#include "qtkpy.h"

#include <string.h>

static void nothing(void *ctx) { (void)ctx; }

static PyObject *tensor_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    (void)type;
    (void)args;
    (void)kw;
    return qtkpy_fail(QTK_E_ARG, "qtk.Tensor has no constructor: use qtk.quantize, qtk.Tensor.from_bytes or a checkpoint's tensor()");
}

PyObject *qtkpy_tensor_new(qtk_tensor *t, PyObject *owner) {
    qtkpy_TensorObject *o = PyObject_New(qtkpy_TensorObject, &qtkpy_TensorType);
    if (!o) {
        qtk_tensor_free(t);
        return NULL;
    }
    o->t = t;
    o->owner = Py_XNewRef(owner);
    qtkpy_live_tensors++;
    return (PyObject *)o;
}

static void tensor_dealloc(PyObject *self) {
    qtkpy_TensorObject *o = (qtkpy_TensorObject *)self;
    qtk_tensor_free(o->t); /* first: it may borrow owner's bytes */
    Py_XDECREF(o->owner);
    qtkpy_live_tensors--;
    PyObject_Free(self);
}

static const qtk_layout *L_of(PyObject *self) { return qtk_tensor_layout(((qtkpy_TensorObject *)self)->t); }

/* ---- qtk.quantize ---- */

const char qtkpy_quantize_doc[] =
    "quantize(array, scheme, calibration='minmax', scales=None, global_scale=None, threads=None,\n"
    "         weights=None) -> Tensor\n\n"
    "Quantizes an array of rank 0 to 8 under scheme (a qtk.Scheme or a spec string) into a qtk.Tensor\n"
    "holding Burn's exact bytes (SPEC section 5).\n\n"
    "array: float32, float16 or float64, any memory order. A C-contiguous, aligned, native float32\n"
    "array is read in place; any other array is converted once to one (so a Fortran-ordered or\n"
    "strided array gives the same bytes as its C-contiguous copy). Other array-likes (lists, scalars)\n"
    "are converted as numpy.asarray(array, dtype=numpy.float32). Values must be finite.\n"
    "calibration: 'minmax' (alpha = max |x| per scale group), 'absmean' (mean |x|, BitNet b1.58;\n"
    "not for two-level schemes) or 'mse' (per group, the stored scale of least squared error;\n"
    "docs/quantizers.md).\n"
    "scales: instead of calibrating, one float32 scale per scale group, row-major over the block grid\n"
    "(shaped as the grid, or flat); global_scale: the two-level global scale that goes with them.\n"
    "threads: worker threads for this call (None: qtk.get_threads()). The GIL is released while qtk works.\n"
    "weights: importance weights of the squared error (calibration 'mse'; an importance matrix's column\n"
    "energies): float32, one per element, one per column of the last dimension, or per first index and\n"
    "column. ggml's IQ2_XXS, IQ2_XS and IQ1_S (schemes 'iq2_xxs', 'iq2_xs', 'iq1_s') need them.\n"
    "Raises qtk.Error (e.g. QTK_E_VALUE for a NaN, naming its index; QTK_E_SHAPE if the scheme does not\n"
    "fit the shape).";

PyObject *qtkpy_quantize(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static const char *kwlist[] = {"array", "scheme", "calibration", "scales", "global_scale", "threads", "weights", NULL};
    PyObject *arr_o, *scales_o = Py_None, *global_o = Py_None, *weights_o = Py_None;
    qtk_scheme s;
    qtk_calibration calib = QTK_CALIB_MINMAX;
    int threads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO&|O&OOO&O:quantize", QTKPY_KW(kwlist), &arr_o, qtkpy_scheme_conv, &s,
                                     qtkpy_calibration_conv, &calib, &scales_o, &global_o, qtkpy_threads_conv, &threads,
                                     &weights_o))
        return qtkpy_rewrap("quantize");
    PyArrayObject *a = qtkpy_f32_array(arr_o, "array", true), *sc = NULL, *wt = NULL;
    if (!a) return NULL;
    PyObject *result = NULL;
    int rank = PyArray_NDIM(a);
    if (rank > QTK_MAX_RANK) {
        qtkpy_fail(QTK_E_SHAPE, "array has rank %d; qtk tensors have rank 0 to %d", rank, QTK_MAX_RANK);
        goto done;
    }
    size_t shape[QTK_MAX_RANK];
    for (int i = 0; i < rank; i++) shape[i] = (size_t)PyArray_DIM(a, i);
    qtk_quantize_options o = {.calibration = calib, .threads = threads};
    float global = 0.0f;
    if (global_o != Py_None) {
        if (scales_o == Py_None) {
            qtkpy_fail(QTK_E_ARG, "global_scale goes with scales (it is the two-level global of caller-given scales)");
            goto done;
        }
        double g = PyFloat_AsDouble(global_o);
        if (g == -1.0 && PyErr_Occurred()) {
            qtkpy_rewrap("global_scale");
            goto done;
        }
        global = (float)g;
        o.global = &global;
    }
    if (scales_o != Py_None) {
        if (calib != QTK_CALIB_MINMAX) {
            qtkpy_fail(QTK_E_ARG, "calibration and scales exclude each other");
            goto done;
        }
        if (!(sc = qtkpy_f32_array(scales_o, "scales", true))) goto done;
        qtk_layout L;
        qtk_status st = qtk_layout_compute(&s, shape, rank, &L);
        if (st) {
            qtkpy_raise(st);
            goto done;
        }
        if (PyArray_NDIM(sc) > 1) { /* shaped as the grid, or flat */
            bool same = PyArray_NDIM(sc) == L.rank;
            for (int i = 0; same && i < L.rank; i++) same = (size_t)PyArray_DIM(sc, i) == L.grid[i];
            if (!same) {
                char g[128];
                qtkpy_fail(QTK_E_SHAPE, "scales has %d dimensions but is not shaped as the block grid %s (give it so, or flat)",
                           PyArray_NDIM(sc), qtk_shape_format(L.grid, L.rank, g, sizeof g));
                goto done;
            }
        }
        o.scales = PyArray_DATA(sc);
        o.n_scales = (size_t)PyArray_SIZE(sc);
    }
    if (weights_o != Py_None) { /* flat, whatever its shape: qtk_quantize checks the count */
        if (!(wt = qtkpy_f32_array(weights_o, "weights", true))) goto done;
        o.weights = PyArray_DATA(wt);
        o.n_weights = (size_t)PyArray_SIZE(wt);
    }
    qtk_tensor *t = NULL;
    qtk_status st;
    const float *x = PyArray_DATA(a);
    Py_BEGIN_ALLOW_THREADS
    st = qtk_quantize(x, shape, rank, &s, &o, &t);
    Py_END_ALLOW_THREADS
    if (st) qtkpy_raise(st);
    else result = qtkpy_tensor_new(t, NULL);
done:
    Py_DECREF(a);
    Py_XDECREF(sc);
    Py_XDECREF(wt);
    return result;
}

/* ---- construction from bytes ---- */

static PyObject *tensor_from_bytes(PyObject *cls, PyObject *args, PyObject *kw) {
    (void)cls;
    static const char *kwlist[] = {"data", "shape", "scheme", NULL};
    PyObject *data;
    qtkpy_shape sh;
    qtk_scheme s;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO&O&:from_bytes", QTKPY_KW(kwlist), &data, qtkpy_shape_conv, &sh,
                                     qtkpy_scheme_conv, &s))
        return qtkpy_rewrap("Tensor.from_bytes");
    qtk_tensor *t = NULL;
    qtk_status st;
    if (PyBytes_CheckExact(data)) { /* immutable: borrowed, no copy */
        const char *p = PyBytes_AS_STRING(data);
        size_t n = (size_t)PyBytes_GET_SIZE(data);
        st = qtk_tensor_wrap(p, n, sh.dims, sh.rank, &s, nothing, NULL, &t);
        if (st) return qtkpy_raise(st);
        return qtkpy_tensor_new(t, data);
    }
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_C_CONTIGUOUS) < 0)
        return qtkpy_rewrap("Tensor.from_bytes: data must be bytes or a C-contiguous buffer");
    const void *p = view.buf;
    size_t n = (size_t)view.len;
    Py_BEGIN_ALLOW_THREADS
    st = qtk_tensor_from_bytes(p, n, sh.dims, sh.rank, &s, &t);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (st) return qtkpy_raise(st);
    return qtkpy_tensor_new(t, NULL);
}

/* ---- methods ---- */

static PyObject *tensor_tobytes(PyObject *self, PyObject *unused) {
    (void)unused;
    size_t n = 0;
    const uint8_t *b = qtk_tensor_bytes(((qtkpy_TensorObject *)self)->t, &n);
    return PyBytes_FromStringAndSize((const char *)b, (Py_ssize_t)n);
}

static PyObject *tensor_dequantize(PyObject *self, PyObject *args, PyObject *kw) {
    static const char *kwlist[] = {"dtype", "out", NULL};
    PyObject *dtype_o = Py_None, *out_o = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:dequantize", QTKPY_KW(kwlist), &dtype_o, &out_o))
        return qtkpy_rewrap("dequantize");
    qtk_dtype dt = QTK_DTYPE_F32;
    if (!qtkpy_value_dtype_conv(dtype_o, &dt)) return NULL;
    const qtk_layout *L = L_of(self);
    PyArrayObject *out;
    if (out_o == Py_None) {
        npy_intp dims[QTK_MAX_RANK];
        for (int i = 0; i < L->rank; i++) dims[i] = (npy_intp)L->shape[i];
        out = (PyArrayObject *)PyArray_SimpleNew(L->rank, dims, dt == QTK_DTYPE_F16 ? NPY_FLOAT16 : NPY_FLOAT32);
        if (!out) return qtkpy_rewrap("dequantize");
    } else {
        if (!PyArray_Check(out_o)) return qtkpy_fail(QTK_E_ARG, "out must be a numpy array");
        out = (PyArrayObject *)out_o;
        if (!PyArray_IS_C_CONTIGUOUS(out) || !PyArray_ISALIGNED(out) || !PyArray_ISWRITEABLE(out) ||
            !PyArray_ISNOTSWAPPED(out))
            return qtkpy_fail(QTK_E_ARG, "out must be a writeable, aligned, C-contiguous array in native byte order");
        int tn = PyArray_TYPE(out);
        if (tn != NPY_FLOAT32 && tn != NPY_FLOAT16) return qtkpy_fail(QTK_E_ARG, "out must be float32 or float16");
        qtk_dtype odt = tn == NPY_FLOAT16 ? QTK_DTYPE_F16 : QTK_DTYPE_F32;
        if (dtype_o != Py_None && odt != dt)
            return qtkpy_fail(QTK_E_ARG, "out is %s but dtype asks for %s", tn == NPY_FLOAT16 ? "float16" : "float32",
                              dt == QTK_DTYPE_F16 ? "float16" : "float32");
        dt = odt;
        if ((size_t)PyArray_SIZE(out) != L->numel)
            return qtkpy_fail(QTK_E_LENGTH, "out holds %zd elements; the tensor has %zu", (Py_ssize_t)PyArray_SIZE(out),
                              L->numel);
        Py_INCREF(out);
    }
    const qtk_tensor *t = ((qtkpy_TensorObject *)self)->t;
    void *dst = PyArray_DATA(out);
    size_t n = L->numel;
    qtk_status st;
    Py_BEGIN_ALLOW_THREADS
    st = qtk_dequantize(t, dt, dst, n);
    Py_END_ALLOW_THREADS
    if (st) {
        Py_DECREF(out);
        return qtkpy_raise(st);
    }
    return (PyObject *)out;
}

/* one float32 per scale group, shaped as the block grid, from get (qtk_tensor_scales or
 * qtk_tensor_offsets) */
static PyObject *grid_floats(PyObject *self, qtk_status (*get)(const qtk_tensor *, float *, size_t), const char *what) {
    const qtk_layout *L = L_of(self);
    npy_intp dims[QTK_MAX_RANK];
    for (int i = 0; i < L->rank; i++) dims[i] = (npy_intp)L->grid[i];
    PyArrayObject *a = (PyArrayObject *)PyArray_SimpleNew(L->rank, dims, NPY_FLOAT32);
    if (!a) return qtkpy_rewrap(what);
    qtk_status st = get(((qtkpy_TensorObject *)self)->t, PyArray_DATA(a), L->n_scales);
    if (st) {
        Py_DECREF(a);
        return qtkpy_raise(st);
    }
    return (PyObject *)a;
}

static PyObject *tensor_scales(PyObject *self, PyObject *unused) {
    (void)unused;
    return grid_floats(self, qtk_tensor_scales, "scales");
}

static PyObject *tensor_offsets(PyObject *self, PyObject *unused) {
    (void)unused;
    return grid_floats(self, qtk_tensor_offsets, "offsets");
}

static PyObject *tensor_convert(PyObject *self, PyObject *args, PyObject *kw) {
    static const char *kwlist[] = {"scheme", "calibration", "threads", NULL};
    qtk_scheme s;
    qtk_calibration calib = QTK_CALIB_MINMAX;
    int threads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|O&O&:convert", QTKPY_KW(kwlist), qtkpy_scheme_conv, &s,
                                     qtkpy_calibration_conv, &calib, qtkpy_threads_conv, &threads))
        return qtkpy_rewrap("convert");
    qtk_quantize_options o = {.calibration = calib, .threads = threads};
    const qtk_tensor *t = ((qtkpy_TensorObject *)self)->t;
    qtk_tensor *r = NULL;
    qtk_status st;
    Py_BEGIN_ALLOW_THREADS
    st = qtk_convert(t, &s, &o, &r);
    Py_END_ALLOW_THREADS
    if (st) return qtkpy_raise(st);
    return qtkpy_tensor_new(r, NULL);
}

static PyObject *tensor_reduce(PyObject *self, PyObject *unused) {
    (void)unused;
    PyObject *from = PyObject_GetAttrString((PyObject *)Py_TYPE(self), "from_bytes");
    PyObject *b = from ? tensor_tobytes(self, NULL) : NULL;
    const qtk_layout *L = L_of(self);
    PyObject *shape = b ? qtkpy_shape_tuple(L->shape, L->rank) : NULL;
    PyObject *scheme = shape ? qtkpy_scheme_new(qtk_tensor_scheme(((qtkpy_TensorObject *)self)->t)) : NULL;
    if (!scheme) {
        Py_XDECREF(from);
        Py_XDECREF(b);
        Py_XDECREF(shape);
        return NULL;
    }
    return Py_BuildValue("(N(NNN))", from, b, shape, scheme);
}

static PyObject *tensor_repr(PyObject *self) {
    const qtk_layout *L = L_of(self);
    char spec[256], shape[160];
    const qtk_scheme *s = qtk_tensor_scheme(((qtkpy_TensorObject *)self)->t);
    const char *p = qtk_scheme_preset_name(s);
    if (p) snprintf(spec, sizeof spec, "%s", p);
    else if (qtk_scheme_format(s, spec, sizeof spec, NULL)) snprintf(spec, sizeof spec, "?");
    size_t k = 0;
    shape[0] = '\0';
    for (int i = 0; i < L->rank && k + 24 < sizeof shape; i++)
        k += (size_t)snprintf(shape + k, sizeof shape - k, i ? ", %zu" : "%zu", L->shape[i]);
    if (L->rank == 1 && k + 2 < sizeof shape) shape[k++] = ',', shape[k] = '\0';
    return PyUnicode_FromFormat("qtk.Tensor(shape=(%s), scheme='%s', nbytes=%zu)", shape, spec, L->total_bytes);
}

/* ---- properties ---- */

static PyObject *get_shape(PyObject *self, void *c) {
    (void)c;
    return qtkpy_shape_tuple(L_of(self)->shape, L_of(self)->rank);
}

static PyObject *get_ndim(PyObject *self, void *c) {
    (void)c;
    return PyLong_FromLong(L_of(self)->rank);
}

static PyObject *get_size(PyObject *self, void *c) {
    (void)c;
    return PyLong_FromSize_t(L_of(self)->numel);
}

static PyObject *get_nbytes(PyObject *self, void *c) {
    (void)c;
    return PyLong_FromSize_t(L_of(self)->total_bytes);
}

static PyObject *get_scheme(PyObject *self, void *c) {
    (void)c;
    return qtkpy_scheme_new(qtk_tensor_scheme(((qtkpy_TensorObject *)self)->t));
}

static PyObject *get_global(PyObject *self, void *c) {
    (void)c;
    const qtk_tensor *t = ((qtkpy_TensorObject *)self)->t;
    if (!qtk_scheme_is_two_level(qtk_tensor_scheme(t))) Py_RETURN_NONE;
    return PyFloat_FromDouble((double)qtk_tensor_global(t));
}

static PyObject *get_bpe(PyObject *self, void *c) {
    (void)c;
    return PyFloat_FromDouble(qtk_layout_bits_per_element(L_of(self)));
}

static PyGetSetDef tensor_getset[] = {
    {"shape", get_shape, NULL, "The tensor's shape (a tuple of ints; () for rank 0).", NULL},
    {"ndim", get_ndim, NULL, "The tensor's rank.", NULL},
    {"size", get_size, NULL, "The number of elements.", NULL},
    {"nbytes", get_nbytes, NULL, "The length of the tensor's bytes in Burn's layout (tobytes()).", NULL},
    {"scheme", get_scheme, NULL, "The tensor's scheme (a qtk.Scheme).", NULL},
    {"global_scale", get_global, NULL, "The two-level global scale (float), or None for a single-level scheme.", NULL},
    {"bits_per_element", get_bpe, NULL, "Storage bits per element, scales, global and table included.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

#define FN(f) ((PyCFunction)(void (*)(void))(f))

static PyMethodDef tensor_methods[] = {
    {"from_bytes", FN(tensor_from_bytes), METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "Tensor.from_bytes(data, shape, scheme) -> Tensor\n\n"
     "A tensor from Burn-layout bytes (SPEC section 5): [packed values][scales][f32 global][f32 table].\n"
     "The length must be exactly scheme.nbytes(shape); scales must be finite and fields in range, as\n"
     "qtk_tensor_from_bytes checks (qtk.Error otherwise). A bytes object is borrowed without a copy;\n"
     "other buffers (bytearray, memoryview, numpy arrays) are copied once."},
    {"tobytes", tensor_tobytes, METH_NOARGS,
     "tobytes() -> bytes\n\nThe tensor's bytes in Burn's layout (SPEC section 5), as Burn's TensorData holds them. "
     "memoryview(tensor) gives the same bytes without a copy."},
    {"dequantize", FN(tensor_dequantize), METH_VARARGS | METH_KEYWORDS,
     "dequantize(dtype='float32', out=None) -> numpy.ndarray\n\n"
     "The tensor's values as a new float32 or float16 array of its shape, written by qtk straight into the\n"
     "array returned. out: a writeable, C-contiguous float32/float16 array of as many elements to write into\n"
     "instead (its dtype is used when dtype is not given); it is returned."},
    {"scales", tensor_scales, METH_NOARGS,
     "scales() -> numpy.ndarray\n\nThe stored scales decoded to float32, shaped as the block grid (one per block "
     "along each dimension; all ones for a per-tensor scale). For ggml's K types, each sub-block's d x sc."},
    {"offsets", tensor_offsets, METH_NOARGS,
     "offsets() -> numpy.ndarray\n\nAn affine scheme's offsets decoded to float32, shaped as scales(), as the scheme "
     "stores them: the offset o, the min m (ggml's K types: dmin x mn) or the zero point z. qtk.Error for a scheme "
     "without offsets."},
    {"convert", FN(tensor_convert), METH_VARARGS | METH_KEYWORDS,
     "convert(scheme, calibration='minmax', threads=None) -> Tensor\n\n"
     "Re-quantizes under another scheme: equal to quantize(self.dequantize(), scheme), computed a slab at a time."},
    {"__reduce__", tensor_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

/* read-only buffer: the bytes in Burn's layout, without a copy */
static int tensor_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    size_t n = 0;
    const uint8_t *b = qtk_tensor_bytes(((qtkpy_TensorObject *)self)->t, &n);
    return PyBuffer_FillInfo(view, self, (void *)(uintptr_t)b, (Py_ssize_t)n, 1, flags);
}

static PyBufferProcs tensor_as_buffer = {tensor_getbuffer, NULL};

static const char tensor_doc[] =
    "A quantized tensor: a shape, a qtk.Scheme, and its bytes in Burn's layout (SPEC section 5).\n\n"
    "Made by qtk.quantize, Tensor.from_bytes, Tensor.convert or Checkpoint.tensor (which borrows the\n"
    "checkpoint's memory map without a copy where the file stores the bytes as they are). Immutable;\n"
    "supports the buffer protocol (read-only, the bytes) and pickling.";

PyTypeObject qtkpy_TensorType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "qtk.Tensor",
    .tp_basicsize = sizeof(qtkpy_TensorObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = tensor_doc,
    .tp_new = tensor_new,
    .tp_dealloc = tensor_dealloc,
    .tp_repr = tensor_repr,
    .tp_methods = tensor_methods,
    .tp_getset = tensor_getset,
    .tp_as_buffer = &tensor_as_buffer,
};
