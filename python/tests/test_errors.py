"""Bad input raises qtk.Error with qtk's message and status -- never a crash, never a bare
TypeError, ValueError or OSError from deep inside."""

import numpy as np
import pytest

import qtk
from conftest import weights

X = weights((4, 64))
T = qtk.quantize(X, "q4f,block=32:f16")
NAN_SCALE = bytearray(T.tobytes())
_OFF = T.scheme.layout(T.shape)["scales_offset"]
NAN_SCALE[_OFF:_OFF + 2] = b"\x00\x7e"  # an f16 NaN scale

CASES = [
    ("int array", lambda: qtk.quantize(np.zeros((2, 2), np.int32), "q8s"), "QTK_E_ARG"),
    ("complex array", lambda: qtk.quantize(np.zeros(4, np.complex64), "q8s"), "QTK_E_ARG"),
    ("rank 9", lambda: qtk.quantize(np.zeros([1] * 9, np.float32), "q8s"), "QTK_E_SHAPE"),
    ("strings", lambda: qtk.quantize(["a", "b"], "q8s"), "QTK_E_ARG"),
    ("ragged", lambda: qtk.quantize([[1.0], [1.0, 2.0]], "q8s"), "QTK_E_ARG"),
    ("scheme type", lambda: qtk.quantize(X, 5), "QTK_E_ARG"),
    ("scheme spec", lambda: qtk.quantize(X, "q4f,block=32"), "QTK_E_PARSE"),
    ("no scheme", lambda: qtk.quantize(X), "QTK_E_ARG"),
    ("unknown keyword", lambda: qtk.quantize(X, "q8s", scale=1.0), "QTK_E_ARG"),
    ("calibration", lambda: qtk.quantize(X, "q8s", calibration="median"), None),
    ("calibration type", lambda: qtk.quantize(X, "q8s", calibration=3), "QTK_E_ARG"),
    ("absmean two-level", lambda: qtk.quantize(X, "nvfp4", calibration="absmean"), None),
    ("block rank", lambda: qtk.quantize(X, "q8s,block=2x2x2:f32"), None),
    ("inf", lambda: qtk.quantize(np.full(4, np.inf, np.float32), "q8s"), "QTK_E_VALUE"),
    ("nan f64", lambda: qtk.quantize(np.array([0.0, np.nan]), "q8s"), "QTK_E_VALUE"),
    ("scale count", lambda: qtk.quantize(X, "q8s,block=32:f32", scales=[1.0, 2.0]), None),
    ("negative scale", lambda: qtk.quantize(X, "q8s", scales=[float("nan")]), None),
    ("global alone", lambda: qtk.quantize(X, "nvfp4", global_scale=1.0), "QTK_E_ARG"),
    ("global type", lambda: qtk.quantize(X, "nvfp4", scales=T.scales(), global_scale="a"), "QTK_E_ARG"),
    ("calibration and scales", lambda: qtk.quantize(X, "q8s", calibration="absmean", scales=[1.0]), "QTK_E_ARG"),
    ("threads", lambda: qtk.quantize(X, "q8s", threads=-1), "QTK_E_ARG"),
    ("from_bytes length", lambda: qtk.Tensor.from_bytes(b"123", (2, 2), "q8s"), "QTK_E_LENGTH"),
    ("from_bytes type", lambda: qtk.Tensor.from_bytes(3, (2, 2), "q8s"), "QTK_E_ARG"),
    ("from_bytes nan scale", lambda: qtk.Tensor.from_bytes(bytes(NAN_SCALE), T.shape, T.scheme), "QTK_E_VALUE"),
    ("from_bytes shape", lambda: qtk.Tensor.from_bytes(T.tobytes(), (4, "64"), T.scheme), "QTK_E_ARG"),
    ("from_bytes wrong shape", lambda: qtk.Tensor.from_bytes(T.tobytes(), (4, 65), T.scheme), "QTK_E_LENGTH"),
    ("Tensor()", lambda: qtk.Tensor(), "QTK_E_ARG"),
    ("Checkpoint()", lambda: qtk.Checkpoint(), "QTK_E_ARG"),
    ("dequantize dtype", lambda: T.dequantize("int8"), "QTK_E_ARG"),
    ("dequantize unknown dtype", lambda: T.dequantize("float17"), "QTK_E_ARG"),
    ("dequantize out type", lambda: T.dequantize(out=[0.0] * 256), "QTK_E_ARG"),
    ("module dequantize", lambda: qtk.dequantize(X), "QTK_E_ARG"),
    ("convert", lambda: T.convert("q9f"), "QTK_E_PARSE"),
    ("convert shape", lambda: T.convert("q8s,block=3x3x3:f32"), None),
    ("nbytes", lambda: qtk.Scheme("q8s").nbytes(None), "QTK_E_ARG"),
    ("table", lambda: qtk.table("no-such-table"), "QTK_E_NOTFOUND"),
    ("register_table size", lambda: qtk.register_table("t3", [1.0, 2.0, 3.0]), None),
    ("register builtin", lambda: qtk.register_table("nf4", [0.0] * 16), None),
    ("open type", lambda: qtk.open(None), "QTK_E_ARG"),
    ("open nul", lambda: qtk.open("a\0b"), "QTK_E_ARG"),
    ("open directory", lambda: qtk.open("/proc/self"), None),
    ("save path", lambda: qtk.save(None, {}), "QTK_E_ARG"),
    ("convert path", lambda: qtk.convert(3, "x.bpk"), "QTK_E_ARG"),
    ("evaluate schemes", lambda: qtk.evaluate("x.bpk", [3]), "QTK_E_ARG"),
]


@pytest.mark.parametrize("what,call,status", CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_qtk_error(what, call, status):
    with pytest.raises(qtk.Error) as e:
        call()
    assert isinstance(e.value.status, str) and e.value.status.startswith("QTK_E_")
    assert e.value.status in qtk.status_names()
    if status:
        assert e.value.status == status, (what, e.value.status, str(e.value))
    assert str(e.value) and e.value.message == str(e.value)


def test_messages_name_the_problem():
    with pytest.raises(qtk.Error) as e:
        qtk.quantize(np.array([[0.0, 1.0], [2.0, np.nan]], np.float32), "q8s")
    assert "index 3" in str(e.value) and "[1, 1]" in str(e.value)
    with pytest.raises(qtk.Error) as e:
        qtk.Tensor.from_bytes(b"\0" * 2687, (64, 70), "q4f,block=32:f16")
    assert "2688" in str(e.value) and "2687" in str(e.value)
    with pytest.raises(qtk.Error) as e:
        qtk.quantize(["a"], "q8s")
    assert str(e.value).startswith("array: ") and isinstance(e.value.__cause__, ValueError)


def test_error_is_an_exception_users_can_raise():
    e = qtk.Error("mine")
    assert isinstance(e, Exception) and e.status is None and str(e) == "mine"
    assert qtk.Error.__module__ == "qtk"
