"""Checkpoints: Burn's model.bpk and mnist.safetensors and ggml's types.gguf read (against an
independent reading of their bytes and ggml's own dequantization), qtk.save in every format,
round trips byte for byte, and nothing left behind by failed writes."""

import json
import os

import numpy as np
import pytest

import qtk
from conftest import GGML, REPO, weights

# BURNPACK.md section 5: model.bpk's tensors by offset, with their absolute offsets
MODEL_ORDER = [
    ("conv1.conv.weight", (64, 1, 3, 3), 1536), ("conv1.conv.bias", (64,), 3840),
    ("conv1.norm.gamma", (64,), 4096), ("conv1.norm.beta", (64,), 4352),
    ("conv1.norm.running_mean", (64,), 4608), ("conv1.norm.running_var", (64,), 4864),
    ("conv2.conv.weight", (64, 64, 3, 3), 5120), ("conv2.conv.bias", (64,), 152576),
    ("conv2.norm.gamma", (64,), 152832), ("conv2.norm.beta", (64,), 153088),
    ("conv2.norm.running_mean", (64,), 153344), ("conv2.norm.running_var", (64,), 153600),
    ("fc1.weight", (1600, 128), 153856), ("fc1.bias", (128,), 973056),
    ("fc2.weight", (128, 128), 973568), ("fc2.bias", (128,), 1039104),
    ("fc3.weight", (128, 10), 1039616), ("fc3.bias", (10,), 1044736),
]


def raw_f32(path, offset, shape):
    """An independent reading: the file's bytes at offset as little-endian float32."""
    n = int(np.prod(shape)) if shape else 1
    return np.fromfile(path, dtype="<f4", count=n, offset=offset).reshape(shape)


def test_burn_model_bpk(burn):
    path = burn / "model.bpk"
    with qtk.open(path) as c:
        assert c.format == "burnpack" and len(c) == 18 and c.metadata == {} and c.scalars == {}
        assert c.keys() == [n for n, _, _ in MODEL_ORDER] == list(c)
        assert "fc1.weight" in c and "fc4.weight" not in c and 3 not in c
        assert c.facts["file_bytes"] == 1044776 and c.facts["data_start"] == 1536
        for name, shape, offset in MODEL_ORDER:
            i = c.info(name)
            assert (i["dtype"], i["shape"], i["quantized"], i["offset"]) == ("F32", shape, False, offset)
            assert i["nbytes"] == 4 * int(np.prod(shape)) and i["scheme"] is None
            a = c.tensor(name)
            assert a.dtype == np.float32 and a.shape == shape
            assert a.tobytes() == raw_f32(path, offset, shape).tobytes()
            assert c.numpy(name).tobytes() == a.tobytes()
            assert c.read_bytes(name) == a.tobytes()
        assert c.info("conv1.conv.bias")["param_id"] == 0x83EB859ADFFB2071
        assert np.allclose(c.tensor("conv1.conv.weight").reshape(-1)[:4], [-0.14137, -0.309723, -0.333443, 0.249544])
        assert np.allclose(c.numpy("conv1.conv.bias", "float16")[:4], [0.00264026, 0.270673, 0.331686, -0.0170786],
                           rtol=1e-3)
    assert c.closed
    with pytest.raises(qtk.Error):
        c.tensor("fc1.weight")


def test_mnist_safetensors(burn):
    path = burn / "mnist.safetensors"
    c = qtk.open(str(path))
    assert c.format == "safetensors" and len(c) == 20 and c.hub["layout"] == "none"
    assert c.keys()[:3] == ["norm1.num_batches_tracked", "norm2.num_batches_tracked", "conv1.bias"]
    nbt = c.tensor("norm1.num_batches_tracked")
    assert nbt.dtype == np.int64 and nbt.shape == () and nbt.tobytes() == open(path, "rb").read()[1528:1536]
    i = c.info("fc1.weight")
    assert (i["shape"], i["offset"], i["nbytes"]) == ((32, 11616), 20584, 1486848)
    assert c.tensor("fc1.weight").tobytes() == raw_f32(path, 20584, (32, 11616)).tobytes()
    with pytest.raises(qtk.Error) as e:
        c.numpy("norm1.num_batches_tracked")
    assert e.value.status == "QTK_E_UNSUPPORTED"
    with pytest.raises(qtk.Error) as e:
        c.tensor("nope")
    assert e.value.status == "QTK_E_NOTFOUND" and "nope" in str(e.value)
    c.close()
    c.close()


@pytest.mark.skipif(not (GGML / "types.gguf").exists(), reason="no ggml data")
def test_gguf_reads_ggml_values_bit_for_bit():
    with qtk.open(GGML / "types.gguf") as c:
        assert c.format == "gguf" and len(c) == 19
        assert c.metadata["general.architecture"] == "qtk-test"
        quantized = decoded = 0
        for name in c.keys():
            want = np.fromfile(GGML / "expected" / (name + ".f32"), dtype="<f4")
            info = c.info(name)
            assert c.numpy(name).reshape(-1).tobytes() == want.tobytes(), name
            t = c.tensor(name)
            if info["quantized"]:
                quantized += 1
                assert isinstance(t, qtk.Tensor) and t.shape == info["shape"] and t.nbytes == info["nbytes"]
                assert t.dequantize().reshape(-1).tobytes() == want.tobytes(), name
                assert info["file_type"] is not None
            else:
                decoded += info["decoded"]  # Q4_1, Q5_1, Q2_K, Q4_K, Q5_K: no exact qtk scheme
                # F16 as float16; F32, BF16 (as float32) and the types qtk decodes as float32
                assert isinstance(t, np.ndarray) and t.dtype == (np.float16 if info["dtype"] == "F16" else np.float32)
                assert t.reshape(-1).astype(np.float32).tobytes() == want.tobytes(), name
        assert (quantized, decoded) == (16, 0)


def test_quantized_tensors_borrow_the_map(tmp_path):
    path = tmp_path / "q.bpk"
    x = weights((64, 256), seed=1)
    qtk.save(path, {"w": qtk.quantize(x, "q4f,block=32:f16")})
    c = qtk.open(path)
    a, b = c.tensor("w"), c.tensor("w")
    # two loads of a tensor stored in qtk's layout point at the same bytes: the map, not copies
    assert np.frombuffer(a, np.uint8).ctypes.data == np.frombuffer(b, np.uint8).ctypes.data
    c.close()
    assert a.dequantize().tobytes() == qtk.quantize(x, "q4f,block=32:f16").dequantize().tobytes()  # valid after close


DTYPES = [np.float32, np.float16, np.float64, np.int64, np.int32, np.int16, np.int8, np.uint8, np.uint16,
          np.uint32, np.uint64, np.bool_, np.complex64]


@pytest.mark.parametrize("ext", ["bpk", "safetensors"])
def test_save_every_dtype_and_quantized_tensors(ext, tmp_path):
    rng = np.random.default_rng(2)
    tensors = {}
    for dt in DTYPES:
        if dt == np.complex64 and ext == "bpk":
            continue  # Burn has no complex dtype
        a = (rng.standard_normal((3, 5)) * 50).astype(dt)
        if dt == np.complex64:
            a = a + 1j * a[::-1]
        tensors["raw.%s" % np.dtype(dt).name] = a
    tensors["scalar"] = np.array(7, np.int64)
    tensors["empty"] = np.zeros((0, 4), np.float32)
    specs = ["nvfp4", "mxfp4", "q4f,block=32:f16", "q8s,block=*:f32", "nf4", "e4m3,block=32:f16,store=native"]
    for s in specs:
        tensors["q." + s] = qtk.quantize(weights((16, 64), seed=len(s)), s)
    meta = {"producer": "pytest", "note": "γάμμα"}
    path = tmp_path / ("m." + ext)
    qtk.save(path, tensors, metadata=meta)
    with qtk.open(path) as c:
        assert c.keys() == list(tensors)
        assert c.metadata == meta
        for name, v in tensors.items():
            got = c.tensor(name)
            if isinstance(v, qtk.Tensor):
                assert isinstance(got, qtk.Tensor) and got.tobytes() == v.tobytes()
                # burnpack stores a '*' block as the extent it resolves to (Burn's blocks are numbers)
                assert got.scheme == v.scheme or (ext == "bpk" and "*" in str(v.scheme)), name
            else:
                assert got.dtype == v.dtype and got.shape == v.shape and np.array_equal(got, v), name
    # written again from what was read: the same file
    with qtk.open(path) as c:
        again = {n: c.tensor(n) for n in c}
        meta2 = c.metadata
    qtk.save(tmp_path / ("again." + ext), again, meta2)
    assert (tmp_path / ("again." + ext)).read_bytes() == path.read_bytes()


def test_save_gguf(tmp_path):
    t = {"a": qtk.quantize(weights((8, 64), seed=3), "q4f,block=32:f16"),
         "b": qtk.quantize(weights((8, 64), seed=4), "mxfp4"),
         "n": weights((64,), seed=5)}
    qtk.save(tmp_path / "m.gguf", t, {"general.name": "pytest"})
    with qtk.open(tmp_path / "m.gguf") as c:
        assert c.format == "gguf" and c.keys() == ["a", "b", "n"]
        assert c.info("a")["file_type"] == "Q4_0" and c.info("b")["file_type"] == "MXFP4"
        assert c.tensor("a").tobytes() == t["a"].tobytes() and c.tensor("b").tobytes() == t["b"].tobytes()
        assert np.array_equal(c.tensor("n"), t["n"])
    # GGUF holds no ggml type for q8s,block=*:f32: refused, nothing written
    with pytest.raises(qtk.Error) as e:
        qtk.save(tmp_path / "bad.gguf", {"w": qtk.quantize(weights((4, 64)), "q8s,block=*:f32")})
    assert "GGUF" in str(e.value) or "gguf" in str(e.value)
    assert sorted(os.listdir(tmp_path)) == ["m.gguf"]


def test_save_orders_and_byte_orders_are_converted_once(tmp_path):
    x = weights((16, 32), seed=6).astype(np.float64)
    views = {"f": np.asfortranarray(x), "t": x.T, "s": x[:, ::2], "be": x.astype(">f8"), "c": x}
    qtk.save(tmp_path / "v.safetensors", views)
    with qtk.open(tmp_path / "v.safetensors") as c:
        for k, v in views.items():
            got = c.tensor(k)
            assert got.shape == v.shape and np.array_equal(got, v), k


def test_save_refuses_to_replace_without_force_and_leaves_nothing_on_error(tmp_path):
    p = tmp_path / "a.bpk"
    qtk.save(p, {"x": np.arange(4, dtype=np.float32)})
    with pytest.raises(qtk.Error) as e:
        qtk.save(p, {"x": np.zeros(4, np.float32)})
    assert e.value.status in ("QTK_E_IO", "QTK_E_ARG")
    assert np.array_equal(qtk.open(p).tensor("x"), np.arange(4, dtype=np.float32))
    qtk.save(p, {"x": np.zeros(4, np.float32)}, force=True)
    assert np.array_equal(qtk.open(p).tensor("x"), np.zeros(4, np.float32))
    bad = [
        ({"x": np.zeros(3, dtype="datetime64[s]")}, "QTK_E_UNSUPPORTED"),
        ({"x": [1.0, 2.0]}, "QTK_E_ARG"),
        ({1: np.zeros(3, np.float32)}, "QTK_E_ARG"),
        ("not a dict", "QTK_E_ARG"),
    ]
    for tensors, status in bad:
        with pytest.raises(qtk.Error) as e:
            qtk.save(tmp_path / "b.safetensors", tensors)
        assert e.value.status == status, tensors
    with pytest.raises(qtk.Error):
        qtk.save(tmp_path / "b.safetensors", {"x": np.zeros(3, np.float32)}, metadata={"k": 3})
    with pytest.raises(qtk.Error):
        qtk.save(tmp_path / "b.txt", {"x": np.zeros(3, np.float32)})
    with pytest.raises(qtk.Error):  # burnpack blocks stop at 255
        qtk.save(tmp_path / "b.bpk", {"x": qtk.quantize(weights((2, 512)), "q8s,block=512:f32")})
    assert sorted(os.listdir(tmp_path)) == ["a.bpk"]


def test_open_errors(tmp_path):
    with pytest.raises(qtk.Error) as e:
        qtk.open(tmp_path / "missing.bpk")
    assert e.value.status == "QTK_E_IO" and "missing.bpk" in str(e.value)
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    with pytest.raises(qtk.Error) as e:
        qtk.open(junk)
    assert e.value.status == "QTK_E_FORMAT"
    with pytest.raises(qtk.Error):
        qtk.open(tmp_path / "m.bpk", layout="no-such-layout")
    with pytest.raises(qtk.Error):
        qtk.open(3.5)


def _pack_rows(fields, bits):
    """Fields [R, C] -> int32 words [R / (32 / bits), C], LSB first down each column (GPTQ's qweight)."""
    pf = 32 // bits
    f = fields.astype(np.uint32).reshape(fields.shape[0] // pf, pf, fields.shape[1])
    w = np.zeros((f.shape[0], f.shape[2]), np.uint32)
    for i in range(pf):
        w |= f[:, i, :] << np.uint32(bits * i)
    return w.view(np.int32)


def test_gptq_checkpoint_reads_as_a_zero_point_scheme_and_writes_back(tmp_path):
    """A GPTQ (checkpoint_format gptq: zero points minus one) module packed here with numpy:
    one qtk tensor whose values are the packer's own f16 s * (q - z), written back unchanged."""
    rng = np.random.default_rng(7)
    N, K, G = 64, 256, 64
    q = rng.integers(0, 16, (N, K))
    z = rng.integers(1, 16, (K // G, N))
    s = (rng.random((K // G, N)) * 0.01 + 0.001).astype(np.float16)
    g_idx = (np.arange(K) // G).astype(np.int32)
    stored = {"l.qweight": _pack_rows(q.T, 4), "l.qzeros": _pack_rows((z - 1).T, 4).T.copy(),
              "l.scales": s, "l.g_idx": g_idx}
    src = tmp_path / "src"
    src.mkdir()
    qtk.save(src / "model.safetensors", stored)
    (src / "config.json").write_text(json.dumps({"quantization_config": {
        "quant_method": "gptq", "bits": 4, "group_size": G, "desc_act": False, "sym": False}}))
    want = (s.astype(np.float32)[g_idx, :].T * (q - z[g_idx, :].T)).astype(np.float16)
    with qtk.open(src) as c:
        assert c.hub["layout"] == "gptq" and c.keys() == ["l.weight"]
        t = c.tensor("l.weight")
        assert t.scheme == "u4,block=64:f16,zero=u8" and t.shape == (N, K)
        assert t.scheme.mode == "affine" and t.scheme.offset == "zero"
        assert np.array_equal(t.offsets().reshape(N, K // G), z.T)
        assert np.array_equal(c.numpy("l.weight", dtype="float16"), want)
    qtk.convert(src, tmp_path / "out", layout="gptq")
    with qtk.open(tmp_path / "out", layout="none") as c:
        for name, a in stored.items():
            assert np.array_equal(c.tensor(name), a), name


LATTICE = REPO / "tests" / "data" / "lattice"


def test_gguf_lattice_types_read_as_ggml_wrote_them(tmp_path):
    """ggml's IQ1/IQ2/IQ3 types (docs/lattice.md): the file ggml wrote (tests/data/lattice) reads
    as qtk tensors of the lattice mode whose values are ggml's bit for bit, and converts back."""
    with qtk.open(LATTICE / "lattice.gguf") as c:
        assert len(c) == 7
        for name in c.keys():
            t = c.tensor(name)
            s = t.scheme
            assert s.mode == "lattice" and s.store == "ggml" and s.preset == name[2:]
            assert s.table == name[2:].replace("_", "")
            want = np.fromfile(LATTICE / (name + ".expected.f32"), dtype="<f4")
            assert t.dequantize().reshape(-1).tobytes() == want.tobytes(), name
            x = np.random.default_rng(5).standard_normal((3, t.shape[1])).astype(np.float32)
            y = qtk.matmul(t, x, precision="fast")
            ref = x.astype(np.float64) @ t.dequantize().astype(np.float64).T
            assert np.abs(y - ref).max() <= 0.02 * np.abs(ref).max(), name
    qtk.convert(LATTICE / "lattice.gguf", tmp_path / "l.bpk")
    qtk.convert(tmp_path / "l.bpk", tmp_path / "back.gguf")
    assert (tmp_path / "back.gguf").read_bytes() == (LATTICE / "lattice.gguf").read_bytes()
    # made by qtk (docs/lattice.md section 8): with importance weights; three types need them
    with pytest.raises(qtk.Error) as e:
        qtk.quantize(np.zeros((2, 256), np.float32), "iq2_xxs")
    assert e.value.status == "QTK_E_ARG" and "needs an importance matrix" in str(e.value)
    x = np.random.default_rng(9).standard_normal((4, 512)).astype(np.float32)
    w = np.exp(np.random.default_rng(10).standard_normal(512)).astype(np.float32)
    floor = {"iq2_xxs": 10.0, "iq2_xs": 11.0, "iq2_s": 12.0, "iq3_xxs": 15.5, "iq3_s": 17.5, "iq1_s": 6.5, "iq1_m": 7.5}
    for name, db in floor.items():
        t = qtk.quantize(x, name, calibration="mse", weights=w)
        assert t.scheme.mode == "lattice" and t.nbytes == qtk.Scheme(name).nbytes((4, 512))
        y = t.dequantize()
        got = 10 * np.log10((w * x.astype(np.float64) ** 2).sum() / (w * (x - y).astype(np.float64) ** 2).sum())
        assert got > db, (name, got)
    assert qtk.quantize(x, "iq3_xxs").scheme.preset == "iq3_xxs"  # no weights needed there
    with pytest.raises(qtk.Error) as e:
        qtk.quantize(x, "iq2_xs", calibration="mse", weights=w[:100])
    assert e.value.status == "QTK_E_LENGTH"
