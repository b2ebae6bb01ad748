"""quantize / dequantize: bit-exact against the library's scalar reference (through the CLI,
an independent route, and in-process with qtk.set_isa), every numpy dtype and memory order,
caller-given scales, and no extra copies."""

import pickle
import tracemalloc

import numpy as np
import pytest

import qtk
from conftest import SCHEMES, shape_arg, weights

SHAPES = {
    "q8s,block=2x3x8:f32": (5, 7, 70),
    "e4m3,block=128x128:f32,store=native": (130, 260),
}


def shape_for(spec):
    return SHAPES.get(spec, (37, 70))


@pytest.mark.parametrize("spec", SCHEMES)
def test_bytes_and_values_equal_the_cli_reference(spec, cli, tmp_path):
    """The binding's bytes and values are the CLI's on the scalar reference kernels."""
    shape = shape_for(spec)
    x = weights(shape, seed=len(spec))
    np.save(tmp_path / "x.npy", x)
    cli("quantize", "--scheme", spec, tmp_path / "x.npy", tmp_path / "q.bin")
    ref = (tmp_path / "q.bin").read_bytes()
    t = qtk.quantize(x, spec)
    assert t.tobytes() == ref
    assert t.nbytes == len(ref) == qtk.Scheme(spec).nbytes(shape)
    for dt, arg in ((np.float32, "f32"), (np.float16, "f16")):
        out = tmp_path / ("y_%s.npy" % arg)
        cli("dequantize", "--scheme", spec, "--shape", shape_arg(shape), "--dtype", arg, tmp_path / "q.bin", out)
        want = np.load(out)
        got = t.dequantize(dt)
        assert got.dtype == dt and got.shape == shape
        assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("spec", SCHEMES)
def test_every_kernel_level_gives_the_reference_bits(spec):
    shape = shape_for(spec)
    x = weights(shape, seed=3)
    fast = qtk.quantize(x, spec)
    yf = fast.dequantize()
    prev = qtk.get_isa()
    try:
        qtk.set_isa("scalar")
        ref = qtk.quantize(x, spec)
        yr = ref.dequantize()
        yb = fast.dequantize()
    finally:
        qtk.set_isa("auto" if prev == qtk.detect_isa() else prev)
    assert fast.tobytes() == ref.tobytes()
    assert yf.tobytes() == yr.tobytes() == yb.tobytes()


def test_burn_q8s_with_given_scale():
    # Burn's own case: [-1.8, -1, 0, 0.5] with scale 0.014173228 -> [-127, -71, 0, 35] (u32 store, little-endian)
    t = qtk.quantize(np.array([-1.8, -1.0, 0.0, 0.5], np.float32), "q8s", scales=[0.014173228])
    b = t.tobytes()
    assert list(np.frombuffer(b[:4], np.int8)) == [-127, -71, 0, 35]
    assert np.frombuffer(b[4:], np.float32)[0] == np.float32(0.014173228)
    assert t.scales().tolist() == [np.float32(0.014173228)]


def test_burn_dynamic_q8s_scale():
    # minmax: the scale is max|x| / 127
    t = qtk.quantize(np.array([-12.7, 3.0, 0.0, 6.35], np.float32), "q8s")
    assert t.scales()[0] == np.float32(np.float32(12.7) / np.float32(127))
    assert list(np.frombuffer(t.tobytes()[:4], np.int8)) == [-127, 30, 0, 64]


@pytest.mark.parametrize("dtype", [np.float16, np.float64, ">f4", "<f8", ">f2"])
def test_dtypes_give_the_bytes_of_their_float32_values(dtype):
    x = weights((33, 64), seed=5).astype(dtype)
    ref = qtk.quantize(np.ascontiguousarray(x, dtype=np.float32), "q4f,block=32:f16")
    assert qtk.quantize(x, "q4f,block=32:f16").tobytes() == ref.tobytes()


def _orders(x):
    yield "fortran", np.asfortranarray(x)
    yield "transposed", np.ascontiguousarray(x.T).T
    yield "strided", np.repeat(x, 2, axis=1)[:, ::2]
    yield "reversed", np.ascontiguousarray(x[::-1])[::-1]
    raw = np.zeros(x.size * 4 + 1, np.uint8)
    u = np.ndarray(x.shape, np.float32, buffer=raw, offset=1)  # unaligned
    u[...] = x
    assert not u.flags.aligned
    yield "unaligned", u


def test_memory_orders_give_the_bytes_of_the_c_contiguous_copy():
    x = weights((48, 96), seed=7)
    for spec in ("nvfp4", "q8s,block=*x1:f32", "q4s,block=4x8:f16"):
        ref = qtk.quantize(x, spec).tobytes()
        for name, v in _orders(x):
            assert np.array_equal(v, x)
            assert qtk.quantize(v, spec).tobytes() == ref, (spec, name)
    x3 = weights((4, 6, 64), seed=8)
    ref = qtk.quantize(x3, "mxfp4").tobytes()
    assert qtk.quantize(np.transpose(np.ascontiguousarray(np.transpose(x3, (2, 0, 1))), (1, 2, 0)), "mxfp4").tobytes() == ref


def test_array_likes():
    assert qtk.quantize([[1.0, -2.0], [0.5, 0.25]], "q8s").tobytes() == qtk.quantize(
        np.array([[1.0, -2.0], [0.5, 0.25]], np.float32), "q8s").tobytes()
    t = qtk.quantize(np.float32(3.0), "q8s")
    assert t.shape == () and t.dequantize().shape == () and t.dequantize()[()] == 3.0


@pytest.mark.parametrize("rank", range(0, 9))
def test_every_rank(rank, cli, tmp_path):
    shape = tuple([3, 2, 1, 2, 3, 1, 2, 5][:rank])
    x = weights(shape, seed=rank)
    t = qtk.quantize(x, "q4s,block=2:f16" if rank else "q8s")
    assert t.shape == shape and t.ndim == rank and t.size == x.size
    np.save(tmp_path / "x.npy", x)
    spec = str(t.scheme)
    cli("quantize", "--scheme", spec, tmp_path / "x.npy", tmp_path / "q.bin")
    assert t.tobytes() == (tmp_path / "q.bin").read_bytes()
    y = t.dequantize()
    assert y.shape == shape
    u = qtk.Tensor.from_bytes(t.tobytes(), shape, spec)
    assert u.dequantize().tobytes() == y.tobytes()


def test_given_scales_match_the_cli(cli, tmp_path):
    x = weights((8, 64), seed=11)
    spec = "q4s,block=32:f16"
    grid = qtk.quantize(x, spec).scales()
    assert grid.shape == (8, 2)
    sc = (grid * 1.5).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "s.npy", sc)
    cli("quantize", "--scheme", spec, "--scales", tmp_path / "s.npy", tmp_path / "x.npy", tmp_path / "q.bin")
    ref = (tmp_path / "q.bin").read_bytes()
    assert qtk.quantize(x, spec, scales=sc).tobytes() == ref
    assert qtk.quantize(x, spec, scales=sc.reshape(-1)).tobytes() == ref  # flat is fine too
    with pytest.raises(qtk.Error) as e:
        qtk.quantize(x, spec, scales=sc.reshape(2, 8))
    assert e.value.status == "QTK_E_SHAPE"


def test_two_level_given_scales_and_global(cli, tmp_path):
    x = weights((4, 64), seed=12)
    t = qtk.quantize(x, "nvfp4")
    g = t.global_scale
    assert isinstance(g, float) and g > 0
    # the block scales as stored are ue4m3 codes times g: give them back with g
    u = qtk.quantize(x, "nvfp4", scales=t.scales(), global_scale=g)
    assert u.tobytes() == t.tobytes()
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "s.npy", t.scales())
    cli("quantize", "--scheme", "nvfp4", "--scales", tmp_path / "s.npy", "--global", repr(g), tmp_path / "x.npy",
        tmp_path / "q.bin")
    assert (tmp_path / "q.bin").read_bytes() == u.tobytes()
    assert qtk.quantize(x, "q4f,block=32:f16").global_scale is None


def test_absmean_matches_the_cli(cli, tmp_path):
    x = weights((16, 128), seed=13)
    np.save(tmp_path / "x.npy", x)
    cli("quantize", "--scheme", "q2s,block=64:f32", "--calibration", "absmean", tmp_path / "x.npy", tmp_path / "q.bin")
    assert qtk.quantize(x, "q2s,block=64:f32", calibration="absmean").tobytes() == (tmp_path / "q.bin").read_bytes()


def test_scales_and_layout():
    x = weights((64, 96), seed=14)
    t = qtk.quantize(x, "q8s,block=32:f32")
    lay = t.scheme.layout(t.shape)
    assert lay["grid"] == (64, 3) and lay["n_scales"] == 192 and lay["total_bytes"] == t.nbytes
    s = t.scales()
    assert s.shape == (64, 3) and s.dtype == np.float32
    want = np.abs(x.reshape(64, 3, 32)).max(axis=2) / np.float32(127)
    assert np.array_equal(s, want.astype(np.float32))
    assert qtk.quantize(x, "q8s").scales().shape == (1, 1)


def test_from_bytes_borrows_bytes_and_copies_mutable_buffers():
    x = weights((16, 64), seed=15)
    t = qtk.quantize(x, "mxfp4")
    b = t.tobytes()
    u = qtk.Tensor.from_bytes(b, (16, 64), "mxfp4")
    assert np.frombuffer(u, np.uint8).ctypes.data == np.frombuffer(b, np.uint8).ctypes.data  # no copy
    ba = bytearray(b)
    v = qtk.Tensor.from_bytes(ba, (16, 64), qtk.Scheme("mxfp4"))
    assert np.frombuffer(v, np.uint8).ctypes.data != np.frombuffer(ba, np.uint8).ctypes.data
    ba[:] = b"\0" * len(ba)  # the copy is unaffected
    assert v.tobytes() == b == bytes(memoryview(u))
    w = qtk.Tensor.from_bytes(np.frombuffer(b, np.uint8), [16, 64], "mxfp4")
    assert w.dequantize().tobytes() == t.dequantize().tobytes()
    del b
    assert u.dequantize().tobytes() == t.dequantize().tobytes()


def test_dequantize_into_out_and_module_function():
    t = qtk.quantize(weights((32, 64), seed=16), "q4f,block=32:f16")
    ref = t.dequantize()
    out = np.empty((32 * 64,), np.float32)
    assert t.dequantize(out=out) is out
    assert out.tobytes() == ref.tobytes()
    h = np.empty((32, 64), np.float16)
    assert qtk.dequantize(t, out=h) is h and h.tobytes() == t.dequantize("float16").tobytes()
    assert qtk.dequantize(t, np.float16).dtype == np.float16
    with pytest.raises(qtk.Error):
        t.dequantize(out=np.empty((32, 64), np.float64))
    with pytest.raises(qtk.Error):
        t.dequantize("float32", out=h)
    with pytest.raises(qtk.Error) as e:
        t.dequantize(out=np.empty(7, np.float32))
    assert e.value.status == "QTK_E_LENGTH"
    with pytest.raises(qtk.Error):
        t.dequantize(out=np.empty((64, 64), np.float32)[:, ::2])
    with pytest.raises(qtk.Error):
        t.dequantize("bfloat16")


def test_convert_equals_quantize_of_dequantize():
    t = qtk.quantize(weights((32, 128), seed=17), "mxfp8")
    c = t.convert("q4f,block=32:f16")
    assert c.tobytes() == qtk.quantize(t.dequantize(), "q4f,block=32:f16").tobytes()
    assert str(c.scheme) == "q4f,block=32:f16"


def test_pickle_and_repr():
    t = qtk.quantize(weights((8, 32), seed=18), "nf4")
    u = pickle.loads(pickle.dumps(t))
    assert u.tobytes() == t.tobytes() and u.shape == t.shape and u.scheme == t.scheme
    assert repr(t) == "qtk.Tensor(shape=(8, 32), scheme='nf4', nbytes=%d)" % t.nbytes
    assert abs(t.bits_per_element - 8 * t.nbytes / 256) < 1e-9


def test_custom_lookup_table_in_process(reference_isa):
    qtk.register_table("pytest_x4", [-1.5, -0.5, 0.5, 1.5])
    assert qtk.table("pytest_x4").tolist() == [-1.5, -0.5, 0.5, 1.5]
    assert qtk.table("nf4").shape == (16,)
    x = weights((4, 64), seed=19)
    t = qtk.quantize(x, "q2s,table=pytest_x4,block=32:f32")
    # the table travels with the bytes (SPEC section 5)
    assert np.frombuffer(t.tobytes()[-16:], np.float32).tolist() == [-1.5, -0.5, 0.5, 1.5]
    vals = np.unique(t.dequantize() / np.repeat(t.scales(), 32, axis=1))
    assert set(np.round(vals, 5)) <= {-1.5, -0.5, 0.5, 1.5}


def test_quantize_reads_float32_in_place_and_converts_others_once():
    x = weights((1024, 1024), seed=20)  # 4 MiB
    mib = 1 << 20
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        t = qtk.quantize(x, "q4f,block=32:f16")
        _, peak = tracemalloc.get_traced_memory()
        assert peak < mib // 4, peak  # no copy of the input
        x64 = x.astype(np.float64)
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        qtk.quantize(x64, "q4f,block=32:f16")
        _, peak = tracemalloc.get_traced_memory()
        assert 4 * mib <= peak - base < 5 * mib, peak - base  # exactly one float32 conversion
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        y = t.dequantize()
        _, peak = tracemalloc.get_traced_memory()
        assert 4 * mib <= peak - base < 5 * mib, peak - base  # the returned array, nothing else
        del y
    finally:
        tracemalloc.stop()


def test_affine_bytes_decode_by_hand():
    """qtk's affine layout: [u32 words of 8 fields][f16 scales][f16 mins], x = fl(fl(s q) - m)."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((4, 64)) + 0.7).astype(np.float32)
    t = qtk.quantize(x, "u4,block=32:f16,min=f16")
    b = np.frombuffer(t.tobytes(), dtype=np.uint8)
    assert b.size == 4 * 64 // 2 + 8 * 2 + 8 * 2
    words = b[:128].view("<u4").reshape(4, 8)
    q = np.stack([(words >> (4 * i)) & 15 for i in range(8)], axis=-1).reshape(4, 64).astype(np.float32)
    s = b[128:144].view("<f2").astype(np.float32).reshape(4, 2)
    m = b[144:160].view("<f2").astype(np.float32).reshape(4, 2)
    want = (np.repeat(s, 32, axis=1) * q).astype(np.float32) - np.repeat(m, 32, axis=1)
    assert np.array_equal(t.dequantize(), want.astype(np.float32))
    assert np.array_equal(t.scales(), s) and np.array_equal(t.offsets(), m)
    assert (m > 0).any()  # the data sit above zero in places: the mins are really used
    with pytest.raises(qtk.Error):
        qtk.quantize(x, "q4f,block=32:f16").offsets()


def test_ggml_k_type_scales_offsets_and_values():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((8, 512)).astype(np.float32)
    t = qtk.quantize(x, "q4_k", calibration="mse")
    assert t.nbytes == 8 * 2 * 144 and t.scheme.store == "ggml"
    s, m = t.scales(), t.offsets()
    assert s.shape == m.shape == (8, 16)
    y = t.dequantize()
    # every value is s q - m for an integer q in 0..15 of its sub-block
    q = (y + np.repeat(m, 32, axis=1)) / np.repeat(s, 32, axis=1)
    assert np.allclose(q, np.round(q), atol=1e-3) and q.min() > -0.01 and q.max() < 15.01
    err = ((x - y) ** 2).sum() / (x ** 2).sum()
    assert 10 * np.log10(1 / err) > 19
    assert qtk.Tensor.from_bytes(t.tobytes(), (8, 512), "q4_k").dequantize().tobytes() == y.tobytes()
