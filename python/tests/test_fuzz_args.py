"""Property tests of the binding's argument parsing (issue 22's Python surface): every entry point
called with arbitrary Python values -- numbers, strings, bytes, None, nested sequences, dicts,
numpy arrays of any dtype and shape, schemes and tensors -- returns or raises qtk.Error with a
status qtk names and a message. Never a crash, never another exception type, never a hang.

Hypothesis comes from Debian's python3-hypothesis (scripts/deps.sh installs it); without it
these tests are skipped. QTK_HYPOTHESIS_EXAMPLES sets the examples per test (default 300;
the long run: 20000)."""

import os

import numpy as np
import pytest

import qtk

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

# numpy's own warnings about the values drawn (casts that overflow, complex parts dropped)
pytestmark = pytest.mark.filterwarnings("ignore")

EXAMPLES = int(os.environ.get("QTK_HYPOTHESIS_EXAMPLES", "300"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))

T4 = qtk.quantize(np.linspace(-1, 1, 256, dtype=np.float32).reshape(4, 64), "q4f,block=32:f16")
SPECS = ["q8s", "q4f,block=32:f16", "nvfp4", "mxfp4", "e4m3,block=16:ue4m3,tensor=f32", "q2s,block=*:f32",
         "q4f,table=iq4nl,block=32:f16", "q8f,block=2x3:ue4m3", "q4s,block=64:f16,tensor=f32", "nf4"]

# spec-like strings: fragments of the grammar glued together, and arbitrary text
_frag = st.sampled_from(["q8s", "q4f", "q2s", "e4m3", "e5m2", "e2m1", "nvfp4", "mxfp4", "nf4", ",", "block=", "32",
                         "*", "x", ":", "f16", "bf16", "f32", "ue8m0", "ue4m3", "tensor=", "store=", "u32", "packed",
                         "native", "table=", "iq4nl", "0", "1", "-1", "99999999999999999999", "\0", "é"])
spec_text = st.one_of(st.lists(_frag, max_size=10).map("".join), st.text(max_size=40), st.sampled_from(SPECS))

_dtypes = st.sampled_from([np.float32, np.float64, np.float16, np.int8, np.int32, np.uint8, np.bool_, np.complex64,
                           object])


@st.composite
def arrays(draw):
    shape = tuple(draw(st.lists(st.integers(0, 9), max_size=4)))
    dt = draw(_dtypes)
    n = int(np.prod(shape)) if shape else 1
    vals = draw(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=n, max_size=n))
    a = np.array(vals, dtype=np.float64).reshape(shape)
    with np.errstate(all="ignore"):
        a = a.astype(dt) if dt is not object else a.astype(object)
    if draw(st.booleans()) and a.ndim >= 2:
        a = a.T  # not C-contiguous
    return a


scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(), st.text(max_size=12),
                    st.binary(max_size=16))
values = st.recursive(st.one_of(scalars, arrays(), spec_text, st.just(T4), st.just(qtk.Scheme("q8s"))),
                      lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner),
                                              st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                      max_leaves=8)
shapes = st.one_of(st.lists(st.integers(-3, 70), max_size=9).map(tuple), st.integers(-5, 300), values)
schemes = st.one_of(spec_text, st.sampled_from(SPECS).map(qtk.Scheme), values)
kw_names = st.sampled_from(["calibration", "threads", "scales", "global_scale", "imatrix", "layout", "precision",
                            "bias", "out", "dtype", "m", "legacy", "table", "shape", "bogus"])
kwargs = st.dictionaries(kw_names, values, max_size=3)


def call(f, *args, **kw):
    """f(*args, **kw) returns, or raises qtk.Error with a named status and a message."""
    try:
        f(*args, **kw)
    except qtk.Error as e:
        assert e.status in qtk.status_names(), (f, e.status)
        assert str(e) and e.message == str(e)
    except RecursionError:
        pass  # a nested value deeper than Python allows: not the binding's doing


@SETTINGS
@given(values, schemes, kwargs)
def test_quantize(a, s, kw):
    call(qtk.quantize, a, s, **kw)


@SETTINGS
@given(schemes, shapes)
def test_scheme(s, shape):
    try:
        sc = qtk.Scheme(s)
    except qtk.Error as e:
        assert e.status in qtk.status_names() and str(e)
        return
    assert qtk.Scheme(str(sc)) == sc  # the canonical spec parses back to the same scheme
    for f in (sc.nbytes, sc.bits_per_element, sc.layout):
        call(f, shape)
    call(sc.to_burn_cbor, shape)
    call(sc.to_burn_json, shape, legacy=True)


@SETTINGS
@given(st.binary(max_size=200), st.text(max_size=200), st.one_of(st.none(), st.text(max_size=8), values))
def test_burn_scheme(b, text, table):
    call(qtk.Scheme.from_burn_cbor, b, table)
    call(qtk.Scheme.from_burn_json, text, table)


@SETTINGS
@given(st.one_of(st.binary(max_size=600), values), shapes, schemes)
def test_from_bytes(data, shape, s):
    try:
        t = qtk.Tensor.from_bytes(data, shape, s)
    except qtk.Error as e:
        assert e.status in qtk.status_names() and str(e)
        return
    if isinstance(data, (bytes, bytearray)):
        assert t.tobytes() == bytes(data)
    call(t.dequantize)
    call(t.scales)


@SETTINGS
@given(st.one_of(st.just(T4), values), values, st.one_of(st.none(), values), kwargs)
def test_matmul(w, x, bias, kw):
    call(qtk.matmul, w, x, bias, **kw)


@SETTINGS
@given(st.one_of(st.just(T4), values), values, kwargs)
def test_tensor_methods(t, v, kw):
    call(qtk.dequantize, t, v)
    call(T4.dequantize, v, **kw)
    call(T4.convert, v, **kw)
    call(qtk.matmul_path, T4, v, **kw)
    call(qtk.matmul_kernel, T4, v, **kw)


@SETTINGS
@given(st.text(max_size=12), values)
def test_tables_and_settings(name, v):
    call(qtk.register_table, "fz-" + name, v)
    call(qtk.table, name)
    call(qtk.set_isa, v)
    qtk.set_isa("auto")
    call(qtk.set_threads, v)
    qtk.set_threads(None)
