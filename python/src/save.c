/* save.c — qtk.save: a dict of qtk.Tensor / ndarray written as one checkpoint through the
 * declare-then-stream qtk_writer. Arrays are written from their own memory (C-contiguous
 * little-endian ones as they are, others converted once); the output appears only when
 * complete. */
#include "qtkpy.h"

#include <string.h>

const char qtkpy_save_doc[] =
    "save(path, tensors, metadata=None, force=False, layout=None) -> None\n\n"
    "Writes tensors (a dict of name -> qtk.Tensor or numpy.ndarray, in its order) as one checkpoint whose\n"
    "format follows the extension: .bpk (Burn's burnpack), .safetensors or .gguf; a path without an\n"
    "extension (or an existing directory) is a directory of safetensors shards. Quantized tensors keep\n"
    "their bytes exactly (safetensors: qtk's convention, or a Hugging Face Hub layout named by layout);\n"
    "arrays are written as their dtype: float64/32/16, int8..int64, uint8..uint64, bool, complex64.\n"
    "metadata: a dict of str -> str. The file is written to a temporary beside path and renamed when\n"
    "complete: an error (or a GGUF/burnpack that cannot hold a scheme) leaves nothing behind. An existing\n"
    "path is replaced only with force=True. Raises qtk.Error.";

static qtk_elem elem_of(int tn) {
    switch (tn) {
    case NPY_FLOAT64: return QTK_ELEM_F64;
    case NPY_FLOAT32: return QTK_ELEM_F32;
    case NPY_FLOAT16: return QTK_ELEM_F16;
    case NPY_INT64: return QTK_ELEM_I64;
    case NPY_INT32: return QTK_ELEM_I32;
    case NPY_INT16: return QTK_ELEM_I16;
    case NPY_INT8: return QTK_ELEM_I8;
    case NPY_UINT64: return QTK_ELEM_U64;
    case NPY_UINT32: return QTK_ELEM_U32;
    case NPY_UINT16: return QTK_ELEM_U16;
    case NPY_UINT8: return QTK_ELEM_U8;
    case NPY_BOOL: return QTK_ELEM_BOOL;
    case NPY_COMPLEX64: return QTK_ELEM_C64;
    default: break;
    }
    /* long / longlong alias the fixed widths on every platform numpy supports */
    if (tn == NPY_LONGLONG || tn == NPY_LONG) return sizeof(long) == 8 || tn == NPY_LONGLONG ? QTK_ELEM_I64 : QTK_ELEM_I32;
    if (tn == NPY_ULONGLONG || tn == NPY_ULONG) return sizeof(long) == 8 || tn == NPY_ULONGLONG ? QTK_ELEM_U64 : QTK_ELEM_U32;
    return QTK_ELEM_NONE;
}

/* Adds one array (a new reference to the array written is appended to keep). 0 or -1. */
static int add_array(qtk_writer *w, const char *name, PyArrayObject *a, PyObject *keep) {
    qtk_elem e = elem_of(PyArray_TYPE(a));
    if (e == QTK_ELEM_NONE) {
        PyObject *r = PyObject_Str((PyObject *)PyArray_DESCR(a));
        qtkpy_fail(QTK_E_UNSUPPORTED, "tensor '%s': numpy dtype %s has no checkpoint element type", name,
                   r ? PyUnicode_AsUTF8(r) : "?");
        Py_XDECREF(r);
        return -1;
    }
    PyArrayObject *c = a;
    bool le = PyArray_DESCR(a)->elsize == 1 || PyArray_DESCR(a)->byteorder == '<' ||
              (PyArray_DESCR(a)->byteorder == '=' && NPY_BYTE_ORDER == NPY_LITTLE_ENDIAN) ||
              PyArray_DESCR(a)->byteorder == '|';
    if (!PyArray_IS_C_CONTIGUOUS(a) || !le) { /* one conversion */
        PyArray_Descr *d = PyArray_DescrNewByteorder(PyArray_DESCR(a), NPY_LITTLE);
        c = d ? (PyArrayObject *)PyArray_FromArray(a, d, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ENSURECOPY) : NULL;
        if (!c) {
            qtkpy_rewrap("save");
            return -1;
        }
    } else
        Py_INCREF(c);
    int rc = PyList_Append(keep, (PyObject *)c);
    Py_DECREF(c);
    if (rc < 0) return -1;
    int rank = PyArray_NDIM(c);
    size_t shape[NPY_MAXDIMS];
    for (int i = 0; i < rank; i++) shape[i] = (size_t)PyArray_DIM(c, i);
    qtk_status st = qtk_writer_add_raw(w, name, e, shape, rank, PyArray_DATA(c));
    if (st) {
        qtkpy_raise(st);
        return -1;
    }
    return 0;
}

PyObject *qtkpy_save(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static const char *kwlist[] = {"path", "tensors", "metadata", "force", "layout", NULL};
    PyObject *path = NULL, *tensors, *metadata = Py_None;
    int force = 0;
    qtk_write_options wo = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&O|OpO&:save", QTKPY_KW(kwlist), qtkpy_path_conv, &path, &tensors,
                                     &metadata, &force, qtkpy_layout_conv, &wo.layout)) {
        Py_XDECREF(path);
        return qtkpy_rewrap("save");
    }
    wo.force = force;
    PyObject *items = NULL, *meta = NULL, *keep = PyList_New(0);
    qtk_writer *w = NULL;
    PyObject *result = NULL;
    if (!keep) goto done;
    if (!PyMapping_Check(tensors) || PyUnicode_Check(tensors) || !(items = PyMapping_Items(tensors))) {
        PyErr_Clear();
        qtkpy_fail(QTK_E_ARG, "tensors must be a dict of name -> qtk.Tensor or numpy.ndarray");
        goto done;
    }
    if (metadata != Py_None && (!PyMapping_Check(metadata) || !(meta = PyMapping_Items(metadata)))) {
        PyErr_Clear();
        qtkpy_fail(QTK_E_ARG, "metadata must be a dict of str -> str");
        goto done;
    }
    qtk_status st = qtk_writer_create(PyBytes_AS_STRING(path), &wo, &w);
    if (st) {
        qtkpy_raise(st);
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *kv = PyList_GET_ITEM(items, i);
        PyObject *k = PyTuple_Check(kv) && PyTuple_GET_SIZE(kv) == 2 ? PyTuple_GET_ITEM(kv, 0) : NULL;
        PyObject *v = k ? PyTuple_GET_ITEM(kv, 1) : NULL;
        const char *name = k && PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
        if (!name) {
            PyErr_Clear();
            qtkpy_fail(QTK_E_ARG, "tensor names must be str");
            goto done;
        }
        if (PyObject_TypeCheck(v, &qtkpy_TensorType)) {
            if (PyList_Append(keep, v) < 0) goto done;
            st = qtk_writer_add_tensor(w, name, ((qtkpy_TensorObject *)v)->t);
            if (st) {
                qtkpy_raise(st);
                goto done;
            }
        } else if (PyArray_Check(v)) {
            if (add_array(w, name, (PyArrayObject *)v, keep)) goto done;
        } else {
            qtkpy_fail(QTK_E_ARG, "tensor '%s' is a %s; save takes qtk.Tensor or numpy.ndarray values", name,
                       Py_TYPE(v)->tp_name);
            goto done;
        }
    }
    for (Py_ssize_t i = 0; meta && i < PyList_GET_SIZE(meta); i++) {
        PyObject *kv = PyList_GET_ITEM(meta, i);
        PyObject *k = PyTuple_GET_ITEM(kv, 0), *v = PyTuple_GET_ITEM(kv, 1);
        const char *ks = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : NULL;
        const char *vs = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
        if (!ks || !vs) {
            PyErr_Clear();
            qtkpy_fail(QTK_E_ARG, "metadata must be a dict of str -> str (entry %zd is not)", i);
            goto done;
        }
        st = qtk_writer_add_meta(w, ks, vs);
        if (st) {
            qtkpy_raise(st);
            goto done;
        }
    }
    qtk_writer *ww = w;
    w = NULL; /* commit frees it, whatever the result */
    Py_BEGIN_ALLOW_THREADS
    st = qtk_writer_commit(ww);
    Py_END_ALLOW_THREADS
    if (st) qtkpy_raise(st);
    else result = Py_NewRef(Py_None);
done:
    qtk_writer_abort(w);
    Py_XDECREF(items);
    Py_XDECREF(meta);
    Py_XDECREF(keep);
    Py_XDECREF(path);
    return result;
}
