/* matmul.c — qtk.matmul: y = x · Wᵀ + bias with W a quantized qtk.Tensor (or a dense
 * float32 array, the baseline), x float32 or float16, y a new float32 array written by qtk. */
#include "qtkpy.h"

#include <string.h>

static int layout_conv(PyObject *o, void *out) {
    qtk_mm_layout *l = out;
    const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    if (s && strcmp(s, "nk") == 0) *l = QTK_MM_NK;
    else if (s && strcmp(s, "kn") == 0) *l = QTK_MM_KN;
    else return qtkpy_fail(QTK_E_ARG, "layout must be 'nk' (W is [N, K]) or 'kn' (W is [K, N])"), 0;
    return 1;
}

static int precision_conv(PyObject *o, void *out) {
    qtk_precision *p = out;
    const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    if (s && strcmp(s, "exact") == 0) *p = QTK_PRECISION_EXACT;
    else if (s && strcmp(s, "fast") == 0) *p = QTK_PRECISION_FAST;
    else return qtkpy_fail(QTK_E_ARG, "precision must be 'exact' or 'fast'"), 0;
    return 1;
}

const char qtkpy_matmul_doc[] =
    "matmul(weight, x, bias=None, layout='nk', precision='exact', threads=None) -> numpy.ndarray\n\n"
    "y = x @ W.T + bias, with W the quantized weight (a rank-2 qtk.Tensor, never expanded to float32 as a\n"
    "whole) or a dense float32 array (the baseline qtk's kernels are measured against).\n"
    "layout: 'nk' (W is [N, K], a linear layer's [out, in]) or 'kn' (W is [K, N], Burn's Linear).\n"
    "x: [M, K] (or [K]: then y is [N]) float32 or float16 (read in place when C-contiguous; other dtypes\n"
    "and orders are converted once to float32). bias: None or [N] float32. Returns float32 [M, N].\n"
    "precision: 'exact' -- the product with exactly the weights dequantize() gives, in float32 sums:\n"
    "|y - y*| <= gamma(K+1) * (sum_k |x_k w_k| + |b|), gamma(n) = n u / (1 - n u), u = 2**-24;\n"
    "'fast' allows the int8-activation integer path for integer-valued weights (layout nk, small M) with\n"
    "the bound in qtk's README ('Matmul'); other cases run exact. The GIL is released while qtk works.";

static PyArrayObject *x_array(PyObject *o, qtk_dtype *dt) {
    if (PyArray_Check(o)) {
        PyArrayObject *a = (PyArrayObject *)o;
        if (PyArray_TYPE(a) == NPY_FLOAT16 && PyArray_IS_C_CONTIGUOUS(a) && PyArray_ISALIGNED(a) && PyArray_ISNOTSWAPPED(a)) {
            *dt = QTK_DTYPE_F16;
            Py_INCREF(o);
            return a;
        }
    }
    *dt = QTK_DTYPE_F32;
    return qtkpy_f32_array(o, "x", true);
}

PyObject *qtkpy_matmul(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static const char *kwlist[] = {"weight", "x", "bias", "layout", "precision", "threads", NULL};
    PyObject *w_o, *x_o, *b_o = Py_None;
    qtk_matmul_options mo = {QTK_MM_NK, QTK_PRECISION_EXACT, 0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OO&O&O&:matmul", QTKPY_KW(kwlist), &w_o, &x_o, &b_o, layout_conv,
                                     &mo.layout, precision_conv, &mo.precision, qtkpy_threads_conv, &mo.threads))
        return qtkpy_rewrap("matmul");
    PyArrayObject *wd = NULL, *x = NULL, *b = NULL, *y = NULL;
    const qtk_tensor *wt = NULL;
    size_t wshape[2];
    PyObject *result = NULL;
    if (PyObject_TypeCheck(w_o, &qtkpy_TensorType)) {
        wt = ((qtkpy_TensorObject *)w_o)->t;
        const qtk_layout *L = qtk_tensor_layout(wt);
        if (L->rank != 2) {
            char s[128];
            qtkpy_fail(QTK_E_SHAPE, "weight has shape %s; matmul takes a rank-2 weight", qtk_shape_format(L->shape, L->rank, s, sizeof s));
            goto done;
        }
        wshape[0] = L->shape[0];
        wshape[1] = L->shape[1];
    } else {
        if (!(wd = qtkpy_f32_array(w_o, "weight", true))) goto done;
        if (PyArray_NDIM(wd) != 2) {
            qtkpy_fail(QTK_E_SHAPE, "weight has %d dimensions; matmul takes a rank-2 weight", PyArray_NDIM(wd));
            goto done;
        }
        wshape[0] = (size_t)PyArray_DIM(wd, 0);
        wshape[1] = (size_t)PyArray_DIM(wd, 1);
    }
    qtk_dtype xdt;
    if (!(x = x_array(x_o, &xdt))) goto done;
    int xr = PyArray_NDIM(x);
    if (xr != 1 && xr != 2) {
        qtkpy_fail(QTK_E_SHAPE, "x has %d dimensions; matmul takes x of shape [M, K] or [K]", xr);
        goto done;
    }
    size_t m = xr == 2 ? (size_t)PyArray_DIM(x, 0) : 1, k = (size_t)PyArray_DIM(x, xr - 1);
    size_t n = mo.layout == QTK_MM_NK ? wshape[0] : wshape[1];
    const float *bias = NULL;
    if (b_o != Py_None) {
        if (!(b = qtkpy_f32_array(b_o, "bias", true))) goto done;
        if (PyArray_NDIM(b) != 1 || (size_t)PyArray_DIM(b, 0) != n) {
            qtkpy_fail(QTK_E_SHAPE, "bias has %zd elements in %d dimensions; it must be [N] = [%zu]", (Py_ssize_t)PyArray_SIZE(b),
                       PyArray_NDIM(b), n);
            goto done;
        }
        bias = PyArray_DATA(b);
    }
    npy_intp dims[2] = {(npy_intp)m, (npy_intp)n};
    if (!(y = (PyArrayObject *)PyArray_SimpleNew(xr, xr == 2 ? dims : dims + 1, NPY_FLOAT32))) {
        qtkpy_rewrap("matmul");
        goto done;
    }
    const void *xp = PyArray_DATA(x);
    float *yp = PyArray_DATA(y);
    const float *wp = wd ? PyArray_DATA(wd) : NULL;
    qtk_status st;
    Py_BEGIN_ALLOW_THREADS
    st = wt ? qtk_matmul(wt, xp, xdt, m, k, bias, yp, n, &mo) : qtk_matmul_f32(wp, xp, xdt, m, k, bias, yp, n, &mo);
    Py_END_ALLOW_THREADS
    if (st) qtkpy_raise(st);
    else result = Py_NewRef((PyObject *)y);
done:
    Py_XDECREF(wd);
    Py_XDECREF(x);
    Py_XDECREF(b);
    Py_XDECREF(y);
    return result;
}

const char qtkpy_matmul_path_doc[] =
    "matmul_path(weight, m=1, layout='nk', precision='exact') -> str\n\n"
    "Which kernel family matmul(weight, x) with M = m rows of x runs on this machine at the current ISA\n"
    "level: 'reference', 'exact', 'generic' or 'integer'.";

/* The arguments of matmul_path and matmul_kernel: (weight, m=1, layout='nk', precision='exact'). */
static bool mm_query_args(PyObject *args, PyObject *kw, const char *fmt, const char *name, const qtk_tensor **t, size_t *m,
                          qtk_matmul_options *mo) {
    static const char *kwlist[] = {"weight", "m", "layout", "precision", NULL};
    PyObject *w_o;
    Py_ssize_t mm = 1;
    *mo = (qtk_matmul_options){QTK_MM_NK, QTK_PRECISION_EXACT, 0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, QTKPY_KW(kwlist), &w_o, &mm, layout_conv, &mo->layout, precision_conv,
                                     &mo->precision)) {
        qtkpy_rewrap(name);
        return false;
    }
    if (!PyObject_TypeCheck(w_o, &qtkpy_TensorType)) {
        qtkpy_fail(QTK_E_ARG, "weight must be a qtk.Tensor");
        return false;
    }
    if (mm < 0) {
        qtkpy_fail(QTK_E_ARG, "m must be >= 0");
        return false;
    }
    *t = ((qtkpy_TensorObject *)w_o)->t;
    *m = (size_t)mm;
    return true;
}

PyObject *qtkpy_matmul_path(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    const qtk_tensor *t;
    size_t m;
    qtk_matmul_options mo;
    if (!mm_query_args(args, kw, "O|nO&O&:matmul_path", "matmul_path", &t, &m, &mo)) return NULL;
    qtk_mm_path p;
    qtk_status st = qtk_matmul_path(t, m, &mo, &p);
    if (st) return qtkpy_raise(st);
    return PyUnicode_FromString(qtk_mm_path_name(p));
}

const char qtkpy_matmul_kernel_doc[] =
    "matmul_kernel(weight, m=1, layout='nk', precision='exact') -> str\n\n"
    "What matmul(weight, x) with M = m rows of x runs on this machine at the current ISA level, as text:\n"
    "the level, the path and, on the integer path, the instruction that multiplies (e.g.\n"
    "'avx512 integer: vpdpbusd (AVX512-VNNI)', 'neon integer: sdot'). For logs and benchmarks.";

PyObject *qtkpy_matmul_kernel(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    const qtk_tensor *t;
    size_t m;
    qtk_matmul_options mo;
    if (!mm_query_args(args, kw, "O|nO&O&:matmul_kernel", "matmul_kernel", &t, &m, &mo)) return NULL;
    const char *k = NULL;
    qtk_status st = qtk_matmul_kernel(t, m, &mo, &k);
    if (st) return qtkpy_raise(st);
    return PyUnicode_FromString(k);
}
