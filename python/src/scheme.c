/* scheme.c — qtk.Scheme: a parsed quantization scheme (a value, like qtk_scheme). */
#include "qtkpy.h"

#include <string.h>

static int canonical(const qtk_scheme *s, char *buf, size_t cap) {
    qtk_status st = qtk_scheme_format(s, buf, cap, NULL);
    if (st) {
        qtkpy_raise(st);
        return -1;
    }
    return 0;
}

PyObject *qtkpy_scheme_new(const qtk_scheme *s) {
    qtkpy_SchemeObject *o = PyObject_New(qtkpy_SchemeObject, &qtkpy_SchemeType);
    if (o) o->s = *s;
    return (PyObject *)o;
}

int qtkpy_scheme_conv(PyObject *o, void *out) {
    qtk_scheme *s = out;
    if (PyObject_TypeCheck(o, &qtkpy_SchemeType)) {
        *s = ((qtkpy_SchemeObject *)o)->s;
        return 1;
    }
    if (!PyUnicode_Check(o)) {
        qtkpy_fail(QTK_E_ARG, "scheme must be a qtk.Scheme or a spec string such as 'nvfp4' or 'q4f,block=32:f16', not %s",
                   Py_TYPE(o)->tp_name);
        return 0;
    }
    const char *spec = PyUnicode_AsUTF8(o);
    if (!spec) return qtkpy_rewrap("scheme"), 0;
    qtk_status st = qtk_scheme_parse(spec, s);
    if (st) return qtkpy_raise(st), 0;
    return 1;
}

static PyObject *scheme_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static const char *kwlist[] = {"spec", NULL};
    PyObject *spec;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:Scheme", QTKPY_KW(kwlist), &spec)) return qtkpy_rewrap("Scheme");
    qtk_scheme s;
    if (!qtkpy_scheme_conv(spec, &s)) return NULL;
    qtkpy_SchemeObject *o = (qtkpy_SchemeObject *)type->tp_alloc(type, 0);
    if (o) o->s = s;
    return (PyObject *)o;
}

static PyObject *scheme_str(PyObject *self) {
    char buf[256];
    if (canonical(&((qtkpy_SchemeObject *)self)->s, buf, sizeof buf)) return NULL;
    return PyUnicode_FromString(buf);
}

static PyObject *scheme_repr(PyObject *self) {
    char buf[256];
    if (canonical(&((qtkpy_SchemeObject *)self)->s, buf, sizeof buf)) return NULL;
    return PyUnicode_FromFormat("qtk.Scheme('%s')", buf);
}

static Py_hash_t scheme_hash(PyObject *self) {
    PyObject *s = scheme_str(self);
    if (!s) return -1;
    Py_hash_t h = PyObject_Hash(s);
    Py_DECREF(s);
    return h;
}

static PyObject *scheme_richcompare(PyObject *a, PyObject *b, int op) {
    if ((op != Py_EQ && op != Py_NE) || !PyObject_TypeCheck(a, &qtkpy_SchemeType)) Py_RETURN_NOTIMPLEMENTED;
    qtk_scheme other;
    if (PyObject_TypeCheck(b, &qtkpy_SchemeType)) other = ((qtkpy_SchemeObject *)b)->s;
    else if (PyUnicode_Check(b)) {
        const char *spec = PyUnicode_AsUTF8(b);
        if (!spec) return NULL;
        if (qtk_scheme_parse(spec, &other) != QTK_OK) {
            qtk_clear_error();
            return PyBool_FromLong(op == Py_NE); /* not a spec: not equal */
        }
    } else
        Py_RETURN_NOTIMPLEMENTED;
    int eq = qtk_scheme_equal(&((qtkpy_SchemeObject *)a)->s, &other);
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static int layout_of(PyObject *self, PyObject *shape, qtk_layout *L) {
    qtkpy_shape sh;
    if (!qtkpy_shape_conv(shape, &sh)) return -1;
    qtk_status st = qtk_layout_compute(&((qtkpy_SchemeObject *)self)->s, sh.dims, sh.rank, L);
    if (st) {
        qtkpy_raise(st);
        return -1;
    }
    return 0;
}

static PyObject *scheme_bits_per_element(PyObject *self, PyObject *shape) {
    qtk_layout L;
    if (layout_of(self, shape, &L)) return NULL;
    return PyFloat_FromDouble(qtk_layout_bits_per_element(&L));
}

static PyObject *scheme_nbytes(PyObject *self, PyObject *shape) {
    qtk_layout L;
    if (layout_of(self, shape, &L)) return NULL;
    return PyLong_FromSize_t(L.total_bytes);
}

static PyObject *scheme_layout(PyObject *self, PyObject *shape) {
    qtk_layout L;
    if (layout_of(self, shape, &L)) return NULL;
    PyObject *grid = qtkpy_shape_tuple(L.grid, L.rank), *block = qtkpy_shape_tuple(L.block, L.rank);
    PyObject *d = grid && block
                      ? Py_BuildValue("{s:N,s:N,s:n,s:I,s:n,s:n,s:s,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:d}", "block", block,
                                      "grid", grid, "numel", (Py_ssize_t)L.numel, "bits", L.bits, "value_bytes",
                                      (Py_ssize_t)L.value_bytes, "n_scales", (Py_ssize_t)L.n_scales, "scale_dtype",
                                      qtk_dtype_name(L.scale_dtype), "scale_bytes", (Py_ssize_t)L.scale_bytes,
                                      "global_bytes", (Py_ssize_t)L.global_bytes, "table_bytes", (Py_ssize_t)L.table_bytes,
                                      "offset_bytes", (Py_ssize_t)L.offset_bytes, "offsets_offset",
                                      (Py_ssize_t)L.offsets_offset,
                                      "scales_offset", (Py_ssize_t)L.scales_offset, "global_offset",
                                      (Py_ssize_t)L.global_offset, "table_offset", (Py_ssize_t)L.table_offset,
                                      "total_bytes", (Py_ssize_t)L.total_bytes, "bits_per_element",
                                      qtk_layout_bits_per_element(&L))
                      : NULL;
    if (!d) {
        Py_XDECREF(grid);
        Py_XDECREF(block);
    }
    return d;
}

static PyObject *scheme_reduce(PyObject *self, PyObject *unused) {
    (void)unused;
    PyObject *s = scheme_str(self);
    return s ? Py_BuildValue("(O(N))", (PyObject *)Py_TYPE(self), s) : NULL;
}

/* ---- properties ---- */

static const qtk_scheme *S(PyObject *self) { return &((qtkpy_SchemeObject *)self)->s; }

static PyObject *dtype_or_none(qtk_dtype d) {
    if (d == QTK_DTYPE_NONE) Py_RETURN_NONE;
    return PyUnicode_FromString(qtk_dtype_name(d));
}

static PyObject *get_preset(PyObject *self, void *c) {
    (void)c;
    const char *p = qtk_scheme_preset_name(S(self));
    if (!p) Py_RETURN_NONE;
    return PyUnicode_FromString(p);
}

static PyObject *get_value(PyObject *self, void *c) {
    (void)c;
    return PyUnicode_FromString(qtk_value_name(S(self)->value));
}

static PyObject *get_bits(PyObject *self, void *c) {
    (void)c;
    return PyLong_FromUnsignedLong(qtk_value_bits(S(self)->value));
}

static PyObject *get_mode(PyObject *self, void *c) {
    (void)c;
    const qtk_mode m = S(self)->mode;
    return PyUnicode_FromString(m == QTK_MODE_LOOKUP    ? "lookup"
                                : m == QTK_MODE_AFFINE  ? "affine"
                                : m == QTK_MODE_LATTICE ? "lattice"
                                                        : "symmetric");
}

static PyObject *get_table(PyObject *self, void *c) {
    (void)c;
    if (S(self)->mode != QTK_MODE_LOOKUP && S(self)->mode != QTK_MODE_LATTICE) Py_RETURN_NONE;
    return PyUnicode_FromString(S(self)->table);
}

static PyObject *get_store(PyObject *self, void *c) {
    (void)c;
    qtk_store st = S(self)->store;
    return PyUnicode_FromString(st == QTK_STORE_NATIVE   ? "native"
                                : st == QTK_STORE_PACKED ? "packed"
                                : st == QTK_STORE_GGML   ? "ggml"
                                                         : "u32");
}

static PyObject *get_offset(PyObject *self, void *c) {
    (void)c;
    const qtk_scheme *s = S(self);
    if (s->mode != QTK_MODE_AFFINE) Py_RETURN_NONE;
    return PyUnicode_FromString(s->offset == QTK_OFFSET_ADD ? "offset" : s->offset == QTK_OFFSET_MIN ? "min" : "zero");
}

static PyObject *get_offset_dtype(PyObject *self, void *c) {
    (void)c;
    return dtype_or_none(S(self)->mode == QTK_MODE_AFFINE ? S(self)->offset_dtype : QTK_DTYPE_NONE);
}

static PyObject *get_super_block(PyObject *self, void *c) {
    (void)c;
    if (!S(self)->super_block) Py_RETURN_NONE;
    return PyLong_FromUnsignedLong(S(self)->super_block);
}

static PyObject *get_super_dtype(PyObject *self, void *c) {
    (void)c;
    return dtype_or_none(S(self)->super_block ? S(self)->super_dtype : QTK_DTYPE_NONE);
}

static PyObject *get_pack_dim(PyObject *self, void *c) {
    (void)c;
    return PyLong_FromLong(S(self)->pack_dim);
}

static PyObject *get_block(PyObject *self, void *c) {
    (void)c;
    const qtk_scheme *s = S(self);
    if (!s->block_rank) Py_RETURN_NONE;
    PyObject *t = PyTuple_New(s->block_rank);
    for (int i = 0; t && i < s->block_rank; i++) {
        PyObject *v = s->block[i] == QTK_BLOCK_WHOLE ? Py_NewRef(Py_None) : PyLong_FromUnsignedLong(s->block[i]);
        if (!v) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

static PyObject *get_block_dtype(PyObject *self, void *c) {
    (void)c;
    return dtype_or_none(S(self)->block_rank ? S(self)->block_dtype : QTK_DTYPE_NONE);
}

static PyObject *get_tensor_dtype(PyObject *self, void *c) {
    (void)c;
    const qtk_scheme *s = S(self);
    /* without a block level the one scale is the tensor's: f32 unless tensor= says otherwise */
    return dtype_or_none(!s->block_rank && s->tensor_dtype == QTK_DTYPE_NONE ? QTK_DTYPE_F32 : s->tensor_dtype);
}

static PyObject *get_two_level(PyObject *self, void *c) {
    (void)c;
    return PyBool_FromLong(qtk_scheme_is_two_level(S(self)));
}

static PyGetSetDef getset[] = {
    {"preset", get_preset, NULL, "The preset this scheme equals ('nvfp4', 'mxfp4', 'mxfp8', 'nf4', 'q4_k', ...) or None.", NULL},
    {"value", get_value, NULL,
     "The value type: 'q8f', 'q8s', 'q4f', 'q4s', 'q2f', 'q2s', 'e4m3', 'e5m2', 'e2m1', or qtk's extension's "
     "'u8', 'u5', 'u4', 'u3', 'u2', 'q6f', 'q5f', 'q3f'.", NULL},
    {"bits", get_bits, NULL, "Field width in bits (8, 6, 5, 4, 3 or 2).", NULL},
    {"mode", get_mode, NULL,
     "'symmetric', 'lookup', 'affine' (an offset per scale group, docs/affine.md) or 'lattice' (a vector codebook: "
     "ggml's IQ1/IQ2/IQ3 types, docs/lattice.md).",
     NULL},
    {"offset", get_offset, NULL,
     "How an affine scheme's offset enters: 'offset' (x = s q + o), 'min' (x = s q - m), 'zero' (x = s (q - z)); "
     "None for other modes.", NULL},
    {"offset_dtype", get_offset_dtype, NULL, "The affine offsets' dtype ('f32', 'f16', 'bf16', 'u6', 'u4', 'u8') or None.", NULL},
    {"super_block", get_super_block, NULL,
     "Elements under one super-block scale (256 for ggml's K types), or None.", NULL},
    {"super_dtype", get_super_dtype, NULL, "The super-block scales' dtype ('f16'), or None.", NULL},
    {"table", get_table, NULL, "The lookup table's name (lattice mode: the codebook's), or None.", NULL},
    {"store", get_store, NULL,
     "How fields are stored: 'u32' (Burn's default), 'native', 'packed', or 'ggml' (ggml's block structs).", NULL},
    {"pack_dim", get_pack_dim, NULL, "The dimension fields are packed along, counted from the innermost (0 = last).", NULL},
    {"block", get_block, NULL,
     "The block's extents, outermost first (None for a '*' extent: the whole dimension), or None without a block level.",
     NULL},
    {"block_dtype", get_block_dtype, NULL, "The block scales' dtype ('f32', 'f16', 'bf16', 'ue8m0', 'ue4m3') or None.", NULL},
    {"tensor_dtype", get_tensor_dtype, NULL, "The tensor-level scale's dtype (a per-tensor scheme's one scale, or a two-level global), or None.", NULL},
    {"two_level", get_two_level, NULL, "True if the scheme has block scales under a tensor-wide global scale.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};


/* ---- Burn's serialized QuantScheme (qtk_scheme_from/to_burn_cbor, _json) ---- */

/* The decoded scheme, with table= filling in the lookup table Burn does not name. */
static PyObject *from_burn(PyObject *cls, const qtk_scheme *s, PyObject *table) {
    qtk_scheme t = *s;
    if (table && table != Py_None) {
        const char *name = PyUnicode_Check(table) ? PyUnicode_AsUTF8(table) : NULL;
        if (!name) return qtkpy_fail(QTK_E_ARG, "table must be a table name ('nf4', 'iq4nl', a registered one)");
        if (t.mode != QTK_MODE_LOOKUP) return qtkpy_fail(QTK_E_ARG, "table= given for a symmetric scheme");
        if (strlen(name) >= sizeof t.table) return qtkpy_fail(QTK_E_ARG, "table name '%s' is too long", name);
        strcpy(t.table, name);
        qtk_status st = qtk_scheme_validate(&t);
        if (st) return qtkpy_raise(st);
    } else if (t.mode == QTK_MODE_LOOKUP && t.table[0] == '\0') {
        return qtkpy_fail(QTK_E_SCHEME, "Burn's Lookup mode names no table: pass table= ('nf4', 'iq4nl', ...)");
    }
    qtkpy_SchemeObject *o = (qtkpy_SchemeObject *)((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, 0);
    if (o) o->s = t;
    return (PyObject *)o;
}

static PyObject *scheme_from_burn_cbor(PyObject *cls, PyObject *args, PyObject *kw) {
    static const char *kwlist[] = {"data", "table", NULL};
    Py_buffer b;
    PyObject *table = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*|O:from_burn_cbor", QTKPY_KW(kwlist), &b, &table))
        return qtkpy_rewrap("Scheme.from_burn_cbor");
    qtk_scheme s;
    qtk_status st = qtk_scheme_from_burn_cbor(b.buf, (size_t)b.len, &s, NULL);
    PyBuffer_Release(&b);
    if (st) return qtkpy_raise(st);
    return from_burn(cls, &s, table);
}

static PyObject *scheme_from_burn_json(PyObject *cls, PyObject *args, PyObject *kw) {
    static const char *kwlist[] = {"text", "table", NULL};
    const char *text;
    Py_ssize_t n;
    PyObject *table = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s#|O:from_burn_json", QTKPY_KW(kwlist), &text, &n, &table))
        return qtkpy_rewrap("Scheme.from_burn_json");
    qtk_scheme s;
    qtk_status st = qtk_scheme_from_burn_json(text, (size_t)n, &s, NULL);
    if (st) return qtkpy_raise(st);
    return from_burn(cls, &s, table);
}

/* (shape or None, legacy) -> the arguments of qtk_scheme_to_burn_* */
static int burn_args(PyObject *args, PyObject *kw, const char *fname, qtkpy_shape *sh, int *have_shape, int *legacy) {
    static const char *kwlist[] = {"shape", "legacy", NULL};
    PyObject *shape = Py_None;
    *legacy = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|Op", QTKPY_KW(kwlist), &shape, legacy)) {
        qtkpy_rewrap(fname);
        return -1;
    }
    *have_shape = shape != Py_None;
    if (*have_shape && !qtkpy_shape_conv(shape, sh)) return -1;
    return 0;
}

static PyObject *scheme_to_burn_cbor(PyObject *self, PyObject *args, PyObject *kw) {
    qtkpy_shape sh;
    int have, legacy;
    if (burn_args(args, kw, "Scheme.to_burn_cbor", &sh, &have, &legacy)) return NULL;
    unsigned char buf[512];
    size_t n = 0;
    qtk_status st = qtk_scheme_to_burn_cbor(&((qtkpy_SchemeObject *)self)->s, have ? sh.dims : NULL, have ? sh.rank : 0,
                                            legacy ? QTK_BURN_LEGACY : QTK_BURN_CURRENT, buf, sizeof buf, &n);
    if (st) return qtkpy_raise(st);
    return PyBytes_FromStringAndSize((const char *)buf, (Py_ssize_t)n);
}

static PyObject *scheme_to_burn_json(PyObject *self, PyObject *args, PyObject *kw) {
    qtkpy_shape sh;
    int have, legacy;
    if (burn_args(args, kw, "Scheme.to_burn_json", &sh, &have, &legacy)) return NULL;
    char buf[1024];
    qtk_status st = qtk_scheme_to_burn_json(&((qtkpy_SchemeObject *)self)->s, have ? sh.dims : NULL, have ? sh.rank : 0,
                                            legacy ? QTK_BURN_LEGACY : QTK_BURN_CURRENT, buf, sizeof buf, NULL);
    if (st) return qtkpy_raise(st);
    return PyUnicode_FromString(buf);
}

static PyMethodDef scheme_methods[] = {
    {"bits_per_element", scheme_bits_per_element, METH_O,
     "bits_per_element(shape) -> float\n\nStorage bits per element of a tensor of this shape, scales, global and table included."},
    {"nbytes", scheme_nbytes, METH_O,
     "nbytes(shape) -> int\n\nThe exact length of a tensor's bytes in Burn's layout (SPEC section 5) for this shape."},
    {"layout", scheme_layout, METH_O,
     "layout(shape) -> dict\n\nEverything the scheme implies for this shape: block extents and grid per dimension, the "
     "number and dtype of scales, and the byte regions ([values][scales][offsets][global][table]) with their offsets."},
    {"from_burn_cbor", (PyCFunction)(void (*)(void))scheme_from_burn_cbor, METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "Scheme.from_burn_cbor(data, table=None) -> Scheme\n\nBurn's QuantScheme as ciborium serializes it into burnpack "
     "metadata (the scheme, or a whole {'QFloat': scheme} dtype), in either shape Burn has used. Burn's Lookup mode names "
     "no table: give it as table=."},
    {"from_burn_json", (PyCFunction)(void (*)(void))scheme_from_burn_json, METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "Scheme.from_burn_json(text, table=None) -> Scheme\n\nBurn's QuantScheme as serde_json writes it, either shape."},
    {"to_burn_cbor", (PyCFunction)(void (*)(void))scheme_to_burn_cbor, METH_VARARGS | METH_KEYWORDS,
     "to_burn_cbor(shape=None, legacy=False) -> bytes\n\nBurn's QuantScheme in CBOR, byte for byte as ciborium writes it; "
     "legacy=True: the shape before 2026-08-19. A '*' block dim needs the shape. qtk's extension is refused."},
    {"to_burn_json", (PyCFunction)(void (*)(void))scheme_to_burn_json, METH_VARARGS | METH_KEYWORDS,
     "to_burn_json(shape=None, legacy=False) -> str\n\nBurn's QuantScheme as serde_json writes it (compact)."},
    {"__reduce__", scheme_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static const char scheme_doc[] =
    "Scheme(spec)\n\n"
    "A quantization scheme of Burn's QuantScheme family, parsed from a spec string or preset:\n"
    "'nvfp4', 'mxfp4', 'mxfp8', 'nf4', 'q4f,block=32:f16', 'e4m3,block=128x128:f32,store=native', ...\n"
    "(the grammar is in qtk's README, 'Spec strings'). str() is the canonical spec, which parses back\n"
    "to an equal scheme. Schemes compare equal to each other and to spec strings of the same scheme,\n"
    "and are hashable. A bad spec raises qtk.Error (QTK_E_PARSE or QTK_E_SCHEME).";

PyTypeObject qtkpy_SchemeType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "qtk.Scheme",
    .tp_basicsize = sizeof(qtkpy_SchemeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = scheme_doc,
    .tp_new = scheme_new,
    .tp_str = scheme_str,
    .tp_repr = scheme_repr,
    .tp_hash = scheme_hash,
    .tp_richcompare = scheme_richcompare,
    .tp_methods = scheme_methods,
    .tp_getset = getset,
};
