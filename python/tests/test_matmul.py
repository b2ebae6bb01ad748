"""qtk.matmul against numpy (float64) within the bounds qtk_matmul.h documents."""

import numpy as np
import pytest

import qtk
from conftest import weights

U = 2.0 ** -24


def gamma(n):
    return n * U / (1 - n * U)


def exact_bound(x, wd, bias, k):
    """gamma(K+1) * (sum_k |x_k w'_k| + |b|) per output, from the actual data."""
    b = np.abs(bias.astype(np.float64)) if bias is not None else 0.0
    return gamma(k + 1) * (np.abs(x.astype(np.float64)) @ np.abs(wd.astype(np.float64)).T + b)


def fast_bound(x, wd, bias, k, block):
    """The integer path's bound: activation rounding per block of `block`, plus rounding."""
    x64, w64 = x.astype(np.float64), np.abs(wd.astype(np.float64))
    m = x.shape[0]
    eq = np.zeros((m, wd.shape[0]))
    for b0 in range(0, k, block):
        sl = slice(b0, min(b0 + block, k))
        s = np.abs(x64[:, sl]).max(axis=1) / 127.0
        eq += (s / 2)[:, None] * w64[:, sl].sum(axis=1)[None, :] * (1 + 2.0 ** -8)
    b = np.abs(bias.astype(np.float64)) if bias is not None else 0.0
    return eq + gamma(k + 4) * (np.abs(x64) @ w64.T + b + 2 * eq)


SCHEMES = ["q4f,block=32:f16", "q4s,block=32:f16", "q8s,block=32:f16", "q2s,block=32:f16", "nvfp4", "mxfp4", "nf4",
           "e4m3,block=32:f16", "q8s,block=*:f32", "q4f,table=iq4nl,block=32:f32"]


@pytest.mark.parametrize("spec", SCHEMES)
@pytest.mark.parametrize("layout", ["nk", "kn"])
def test_exact_within_the_documented_bound(spec, layout):
    n, k = 24, 100
    rng = np.random.default_rng(len(spec))
    w = weights((n, k) if layout == "nk" else (k, n), seed=len(spec))
    t = qtk.quantize(w, spec)
    wd = t.dequantize()
    wnk = wd if layout == "nk" else wd.T  # [N, K]
    bias = rng.standard_normal(n).astype(np.float32)
    for m in (1, 3, 17):
        x = rng.standard_normal((m, k)).astype(np.float32)
        for b in (None, bias):
            y = qtk.matmul(t, x, bias=b, layout=layout)
            assert y.dtype == np.float32 and y.shape == (m, n)
            ref = x.astype(np.float64) @ wnk.astype(np.float64).T + (0 if b is None else b)
            assert np.all(np.abs(y - ref) <= exact_bound(x, wnk, b, k) * (1 + 1e-9) + 1e-30), (spec, layout, m)
        # the bound is tight enough to reject the product with the unquantized weights
        wrong = x.astype(np.float64) @ (w if layout == "nk" else w.T).astype(np.float64).T
        assert not np.all(np.abs(wrong - (x.astype(np.float64) @ wnk.astype(np.float64).T)) <= exact_bound(x, wnk, None, k))
    # f16 activations are read as they are
    x16 = rng.standard_normal((2, k)).astype(np.float16)
    y = qtk.matmul(t, x16, layout=layout)
    ref = x16.astype(np.float64) @ wnk.astype(np.float64).T
    assert np.all(np.abs(y - ref) <= exact_bound(x16, wnk, None, k) * (1 + 1e-9) + 1e-30)
    # one row of x: y is [N]
    y1 = qtk.matmul(t, x16[0].astype(np.float32), layout=layout)
    assert y1.shape == (n,)


@pytest.mark.parametrize("spec,block", [("q4f,block=32:f16", 32), ("q8s,block=32:f16", 32), ("nvfp4", 16),
                                        ("q2s,block=32:f16", 32), ("mxfp4", 32)])
def test_fast_within_its_bound(spec, block):
    n, k = 40, 256
    rng = np.random.default_rng(7)
    t = qtk.quantize(weights((n, k), seed=9), spec)
    wd = t.dequantize()
    for m in (1, 4, 8, 64):  # 64: integer or exact tiled, by the kernel level's limit; both within the bound
        x = rng.standard_normal((m, k)).astype(np.float32)
        y = qtk.matmul(t, x, precision="fast")
        ref = x.astype(np.float64) @ wd.astype(np.float64).T
        assert np.all(np.abs(y - ref) <= fast_bound(x, wd, None, k, block) * (1 + 1e-9)), (spec, m)
    assert qtk.matmul_path(t, 1, precision="fast") == "integer"  # at every ISA level (a portable kernel too)
    assert qtk.matmul_path(t, 1) in ("exact", "reference")
    assert qtk.matmul_path(t, 64, precision="fast") in ("integer", "exact", "reference")
    assert qtk.matmul_path(t, 100000, precision="fast") != "integer" or spec.startswith("q2")
    kernel = qtk.matmul_kernel(t, 1, precision="fast")
    assert kernel.startswith(qtk.get_isa()) and "integer" in kernel, kernel


def test_dense_f32_weights_and_conversions():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((16, 64)).astype(np.float32)
    x = rng.standard_normal((5, 64))  # float64: converted once
    y = qtk.matmul(w, x)
    ref = x.astype(np.float32).astype(np.float64) @ w.astype(np.float64).T
    assert np.all(np.abs(y - ref) <= exact_bound(x.astype(np.float32), w, None, 64) * (1 + 1e-9))
    yf = qtk.matmul(np.asfortranarray(w), np.asfortranarray(x.astype(np.float32)), bias=list(range(16)))
    assert np.array_equal(yf, qtk.matmul(w, x.astype(np.float32), bias=np.arange(16, dtype=np.float32)))


def test_matmul_errors():
    t = qtk.quantize(weights((8, 64)), "q4f,block=32:f16")
    x = np.zeros((2, 64), np.float32)
    cases = [
        (lambda: qtk.matmul(t, np.zeros((2, 63), np.float32)), "QTK_E_SHAPE"),
        (lambda: qtk.matmul(t, x, bias=np.zeros(7, np.float32)), "QTK_E_SHAPE"),
        (lambda: qtk.matmul(t, np.zeros((2, 2, 64), np.float32)), "QTK_E_SHAPE"),
        (lambda: qtk.matmul(qtk.quantize(weights((2, 4, 64)), "q8s"), x), "QTK_E_SHAPE"),
        (lambda: qtk.matmul(t, x, layout="mk"), "QTK_E_ARG"),
        (lambda: qtk.matmul(t, x, precision="sloppy"), "QTK_E_ARG"),
        (lambda: qtk.matmul(t, np.zeros((2, 64), np.int32)), "QTK_E_ARG"),
        (lambda: qtk.matmul(t, "x"), "QTK_E_ARG"),
        (lambda: qtk.matmul_path(np.zeros((2, 2)), 1), "QTK_E_ARG"),
    ]
    for f, status in cases:
        with pytest.raises(qtk.Error) as e:
            f()
        assert e.value.status == status, (status, str(e.value))
    assert qtk.matmul(t, np.zeros((0, 64), np.float32)).shape == (0, 8)
