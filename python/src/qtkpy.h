/* qtkpy.h — what the files of the qtk._qtk extension share: the object types, argument
 * converters and the error helpers. The extension uses qtk's public headers only. */
#ifndef QTKPY_H
#define QTKPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL qtkpy_ARRAY_API
#ifndef QTKPY_MODULE_C
#  define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#include <qtk.h>
#include <qtk_ckpt.h>
#include <qtk_matmul.h>

#include <stdbool.h>
#include <stdint.h>

/* PyArg_ParseTupleAndKeywords takes char ** before Python 3.13: the keyword lists are
 * const here and passed through an integer so no qualifier is cast away in the open. */
#define QTKPY_KW(list) ((char **)(uintptr_t)(list))

/* ---- errors ---- */

/* qtk.Error, created at import. */
extern PyObject *qtkpy_Error;

/* Raises qtk.Error from the calling thread's qtk_last_error() and st; returns NULL. */
PyObject *qtkpy_raise(qtk_status st);
/* Records a message as qtk's last error (so a failure of the binding's own reads the same
 * as the library's) and raises it; returns NULL. */
PyObject *qtkpy_fail(qtk_status st, const char *fmt, ...) QTK_FORMAT_ATTR(2, 3);
/* Turns a pending Python exception that is not already qtk.Error (a ValueError from numpy's
 * conversion, a TypeError from a shape) into qtk.Error(QTK_E_ARG) with "what: message".
 * KeyboardInterrupt, MemoryError and the like pass through. Returns NULL. */
PyObject *qtkpy_rewrap(const char *what);

/* ---- qtk.Scheme ---- */

typedef struct {
    PyObject_HEAD
    qtk_scheme s;
} qtkpy_SchemeObject;

extern PyTypeObject qtkpy_SchemeType;

/* A qtk.Scheme or a spec string into *out (a converter for "O&"): 1 on success, 0 with
 * qtk.Error raised. */
int qtkpy_scheme_conv(PyObject *o, void *out);
PyObject *qtkpy_scheme_new(const qtk_scheme *s);

/* ---- shapes, dtypes, names ---- */

typedef struct {
    int rank;
    size_t dims[QTK_MAX_RANK];
} qtkpy_shape;

/* A sequence of non-negative ints (or one int: rank 1) into a qtkpy_shape ("O&"). */
int qtkpy_shape_conv(PyObject *o, void *out);
PyObject *qtkpy_shape_tuple(const size_t *dims, int rank);
/* Float dtypes qtk writes values in: "float32"/np.float32 -> F32, "float16" -> F16 ("O&"
 * into a qtk_dtype; None means F32). */
int qtkpy_value_dtype_conv(PyObject *o, void *out);
/* "minmax" | "absmean" ("O&" into a qtk_calibration; None means minmax). */
int qtkpy_calibration_conv(PyObject *o, void *out);
/* A Hub layout name or None (AUTO) ("O&" into a qtk_hub_layout). */
int qtkpy_layout_conv(PyObject *o, void *out);
/* A str or os.PathLike into a new bytes object holding the file system path ("O&"; the
 * caller owns *out). */
int qtkpy_path_conv(PyObject *o, void *out);
/* threads: None or an int >= 0 ("O&" into an int). */
int qtkpy_threads_conv(PyObject *o, void *out);

/* An array of float values the library reads in place: a C-contiguous, aligned, native
 * float32 ndarray is used as it is (a new reference), anything else is converted once into
 * one. what names the argument in messages. NULL with qtk.Error raised on failure.
 * float_only: refuse ndarrays of non-float dtypes instead of converting them. */
PyArrayObject *qtkpy_f32_array(PyObject *o, const char *what, bool float_only);

/* ---- qtk.Tensor ---- */

typedef struct {
    PyObject_HEAD
    qtk_tensor *t;
    PyObject *owner; /* what the tensor's bytes borrow (a bytes object), or NULL */
} qtkpy_TensorObject;

extern PyTypeObject qtkpy_TensorType;

/* Takes ownership of t (freed on failure too); owner (may be NULL) gets a new reference. */
PyObject *qtkpy_tensor_new(qtk_tensor *t, PyObject *owner);

/* ---- qtk.Checkpoint ---- */

extern PyTypeObject qtkpy_CheckpointType;

/* ---- module functions (one file each) ---- */

PyObject *qtkpy_quantize(PyObject *self, PyObject *args, PyObject *kw);
PyObject *qtkpy_matmul(PyObject *self, PyObject *args, PyObject *kw);
PyObject *qtkpy_matmul_path(PyObject *self, PyObject *args, PyObject *kw);
PyObject *qtkpy_matmul_kernel(PyObject *self, PyObject *args, PyObject *kw);
PyObject *qtkpy_open(PyObject *self, PyObject *args, PyObject *kw);
PyObject *qtkpy_save(PyObject *self, PyObject *args, PyObject *kw);
PyObject *qtkpy_convert(PyObject *self, PyObject *args, PyObject *kw);
PyObject *qtkpy_evaluate(PyObject *self, PyObject *args, PyObject *kw);

extern const char qtkpy_quantize_doc[], qtkpy_matmul_doc[], qtkpy_matmul_path_doc[], qtkpy_matmul_kernel_doc[], qtkpy_open_doc[],
    qtkpy_save_doc[], qtkpy_convert_doc[], qtkpy_evaluate_doc[];

/* ---- the allocator of the extension's libqtk (pool.c) ---- */

void qtkpy_pool_install(void);
size_t qtkpy_pool_set_limit(size_t max); /* returns the previous limit */
void qtkpy_pool_stats(size_t *blocks, size_t *bytes, size_t *max);

/* Live qtk.Tensor objects (for the leak tests). */
extern Py_ssize_t qtkpy_live_tensors;

#endif /* QTKPY_H */
