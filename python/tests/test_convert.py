"""qtk.convert and qtk.evaluate: the CLI's output byte for byte, round trips, progress, and a
Ctrl-C (or an exception from progress) leaving nothing behind."""

import io
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import qtk
from conftest import weights


def test_convert_mnist_equals_the_cli(burn, cli, tmp_path):
    src = burn / "mnist.safetensors"
    cli("convert", src, tmp_path / "cli.bpk", "--scheme", "nvfp4", "--rule", "fc1=q4f,block=32:f16")
    s = qtk.convert(src, tmp_path / "py.bpk", scheme="nvfp4", rules={"fc1": "q4f,block=32:f16"})
    assert (tmp_path / "py.bpk").read_bytes() == (tmp_path / "cli.bpk").read_bytes()
    assert (s["tensors"], s["quantized"], s["dequantized"], s["kept"]) == (20, 4, 0, 16)
    assert (s["in_format"], s["out_format"]) == ("safetensors", "burnpack")
    assert s["in_bytes"] == 1507768 and s["out_bytes"] < s["in_bytes"] / 6
    plan = {p["name"]: p for p in s["plan"]}
    assert plan["fc1.weight"]["action"] == "quantize" and plan["fc1.weight"]["to"] == "q4f,block=32:f16"
    assert plan["conv2.weight"]["to"] == "nvfp4" and plan["conv1.weight"]["action"] == "keep"
    assert plan["norm1.num_batches_tracked"]["why"] == "I64 is not a float type"
    # the quantized tensors cross formats bit for bit, and come back byte for byte
    qtk.convert(tmp_path / "py.bpk", tmp_path / "py.safetensors")
    qtk.convert(tmp_path / "py.safetensors", tmp_path / "again.bpk")
    assert (tmp_path / "again.bpk").read_bytes() == (tmp_path / "py.bpk").read_bytes()
    with qtk.open(tmp_path / "py.safetensors") as c:
        t = c.tensor("fc1.weight")
        assert isinstance(t, qtk.Tensor) and t.scheme == "q4f,block=32:f16" and t.shape == (32, 11616)
        x = qtk.open(src).tensor("fc1.weight")
        assert t.tobytes() == qtk.quantize(x, "q4f,block=32:f16").tobytes()


def test_copy_is_byte_identical_and_dequantize_to_bf16(burn, tmp_path):
    s = qtk.convert(burn / "model.bpk", tmp_path / "copy.bpk")
    assert (tmp_path / "copy.bpk").read_bytes() == (burn / "model.bpk").read_bytes()
    assert s["kept"] == 18
    qtk.convert(burn / "model.bpk", tmp_path / "q.safetensors", scheme=qtk.Scheme("mxfp8"), min_elements=5000)
    s = qtk.convert(tmp_path / "q.safetensors", tmp_path / "bf.safetensors", scheme="none", dtype="bf16")
    assert s["dequantized"] == 3
    with qtk.open(tmp_path / "bf.safetensors") as c, qtk.open(tmp_path / "q.safetensors") as q:
        assert c.info("fc1.weight")["dtype"] == "BF16"
        want = q.tensor("fc1.weight").dequantize()
        got = c.tensor("fc1.weight")
        # bf16 of the dequantized values: the top half of each f32, rounded to nearest even
        b = want.view(np.uint32)
        bf = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16).view(np.float32)
        assert np.array_equal(got, bf)


def make_model(path, n=48, shape=(64, 256)):
    qtk.save(path, {"layer%02d.weight" % i: weights(shape, seed=i) for i in range(n)})


def test_progress_is_called_after_each_tensor(tmp_path):
    make_model(tmp_path / "m.safetensors", n=12)
    seen = []
    s = qtk.convert(tmp_path / "m.safetensors", tmp_path / "o.bpk", scheme="mxfp4", progress=lambda d, t: seen.append((d, t)))
    assert seen == [(i, 12) for i in range(1, 13)] and s["quantized"] == 12


def test_an_exception_in_progress_cancels_and_leaves_nothing(tmp_path):
    make_model(tmp_path / "m.safetensors", n=12)

    class Stop(Exception):
        pass

    def progress(done, total):
        if done == 3:
            raise Stop("enough")

    with pytest.raises(Stop):
        qtk.convert(tmp_path / "m.safetensors", tmp_path / "o.bpk", scheme="mxfp4", progress=progress)
    assert sorted(os.listdir(tmp_path)) == ["m.safetensors"]


CTRL_C = textwrap.dedent("""
    import json, os, signal, sys, threading
    import qtk
    src, dst = sys.argv[1], sys.argv[2]
    # a shell's background job starts with SIGINT ignored, and then Python installs no handler
    signal.signal(signal.SIGINT, signal.default_int_handler)
    first, sent = threading.Event(), threading.Event()
    def press_ctrl_c():
        first.wait()
        os.kill(os.getpid(), signal.SIGINT)   # arrives while qtk works on a later tensor
        sent.set()
    threading.Thread(target=press_ctrl_c).start()
    seen = []
    def progress(done, total):
        seen.append(done)
        first.set()
        if done == total - 1:
            sent.wait()   # however late the thread runs, it is pressed before the end
    try:
        qtk.convert(src, dst, scheme="nvfp4", progress=progress)
        result = "finished"
    except KeyboardInterrupt:
        result = "interrupted"
    print(json.dumps({"result": result, "seen": seen, "files": sorted(os.listdir(os.path.dirname(dst)))}))
""")


def test_ctrl_c_during_convert_leaves_no_partial_output(tmp_path):
    make_model(tmp_path / "m.safetensors", n=48)
    dst = tmp_path / "out" / "o.bpk"
    dst.parent.mkdir()
    p = subprocess.run([sys.executable, "-c", CTRL_C, str(tmp_path / "m.safetensors"), str(dst)], capture_output=True,
                       text=True, env=os.environ)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["result"] == "interrupted" and r["files"] == [], r
    assert 1 <= len(r["seen"]) < 48


def test_progress_bar_only_on_a_terminal(tmp_path, capsys):
    make_model(tmp_path / "m.safetensors", n=4)
    qtk.convert(tmp_path / "m.safetensors", tmp_path / "o.bpk", progress=True)
    assert capsys.readouterr().err == ""  # stderr is not a terminal here

    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    bar = qtk._Bar("convert", out)
    for d in range(1, 5):
        bar(d, 4, d * 1024 * 1024, 4 * 1024 * 1024)
    bar.close()
    text = out.getvalue()
    assert text.startswith("\rconvert") and "100%|" in text and "4/4 tensors" in text and "4.0 MiB/4.0 MiB" in text
    assert text.endswith("\n")


def test_convert_errors(burn, tmp_path):
    src = burn / "mnist.safetensors"
    cases = [
        (dict(src=tmp_path / "missing.bpk", dst=tmp_path / "o.bpk"), "QTK_E_IO"),
        (dict(src=src, dst=tmp_path / "o.bpk", scheme="q4f,block=32:f99"), "QTK_E_PARSE"),
        (dict(src=src, dst=tmp_path / "o.bpk", rules=["fc1"]), None),
        (dict(src=src, dst=tmp_path / "o.bpk", only="(unclosed"), None),
        (dict(src=src, dst=tmp_path / "o.bpk", dtype="f64"), "QTK_E_ARG"),
        (dict(src=src, dst=tmp_path / "o.bpk", progress=3), "QTK_E_ARG"),
        (dict(src=src, dst=tmp_path / "o.bpk", layout="bnb"), None),
        (dict(src=src, dst=tmp_path / "o.gguf", scheme="q8s,block=*:f32"), None),
        (dict(src=src, dst=tmp_path / "o.txt"), None),
        (dict(src=src, dst=tmp_path / "o.bpk", max_shard_size="lots"), "QTK_E_ARG"),
        (dict(src=src, dst=tmp_path / "o.bpk", calibration="median"), None),
    ]
    for kw, status in cases:
        with pytest.raises(qtk.Error) as e:
            qtk.convert(**kw)
        assert status is None or e.value.status == status, (kw, e.value.status, str(e.value))
        assert str(e.value)
    assert os.listdir(tmp_path) == []
    qtk.convert(src, tmp_path / "o.bpk")
    with pytest.raises(qtk.Error):
        qtk.convert(src, tmp_path / "o.bpk")  # exists
    qtk.convert(src, tmp_path / "o.bpk", force=True)


def test_sharded_output_and_layouts(tmp_path):
    make_model(tmp_path / "m.safetensors", n=6)
    s = qtk.convert(tmp_path / "m.safetensors", tmp_path / "shards", scheme="nvfp4", max_shard_size="20KB",
                    layout="modelopt")
    assert s["out_directory"] and s["out_files"] > 1 and s["out_layout"] == "modelopt"
    with qtk.open(tmp_path / "shards") as c:
        assert c.hub["layout"] == "modelopt" and len(c.hub["shards"]) == s["out_files"]
        assert c.tensor("layer03.weight").scheme == "nvfp4"
        want = qtk.quantize(weights((64, 256), seed=3), "nvfp4")
        assert c.tensor("layer03.weight").tobytes() == want.tobytes()


def test_evaluate(burn):
    r = qtk.evaluate(burn / "mnist.safetensors", ["nvfp4", qtk.Scheme("mxfp8")], calibrations=["minmax"])
    assert [c["spec"] for c in r["columns"]] == ["nvfp4", "e4m3,block=32:ue8m0,store=native"]
    assert [t["name"] for t in r["tensors"]] == ["conv2.weight", "conv3.weight", "fc1.weight"]
    nv, mx = r["totals"]
    assert 4.5 < nv["bits_per_element"] < 4.6 and 8.2 < mx["bits_per_element"] < 8.3
    assert 19 < nv["sqnr_db"] < 22 and 30 < mx["sqnr_db"] < 33 and nv["failed"] == 0
    fc1 = r["tensors"][2]["results"][0]
    assert fc1["ok"] and fc1["numel"] == 32 * 11616 and fc1["rmse"] > 0
    with pytest.raises(qtk.Error):
        qtk.evaluate(burn / "mnist.safetensors", ["nope"])


def _legacy_imatrix(path, entries):
    """A llama.cpp legacy .dat importance matrix: {name: weights} with ncall 1."""
    import struct

    b = struct.pack("<i", len(entries))
    for name, w in entries.items():
        w = np.asarray(w, dtype="<f4")
        b += struct.pack("<i", len(name)) + name.encode() + struct.pack("<ii", 1, w.size) + w.tobytes()
    path.write_bytes(b)


def test_imatrix_convert_and_evaluate(tmp_path):
    rng = np.random.default_rng(5)
    t = {"model.layers.0.mlp.up_proj.weight": rng.standard_normal((64, 128)).astype(np.float32),
         "other.weight": rng.standard_normal((64, 128)).astype(np.float32)}
    qtk.save(tmp_path / "m.safetensors", t)
    w = (1.0 + np.arange(128) % 7).astype(np.float32)
    w[5] = 400.0
    _legacy_imatrix(tmp_path / "m.dat", {"blk.0.ffn_up.weight": w})
    spec = "q4f,block=32:f16"
    s = qtk.convert(tmp_path / "m.safetensors", tmp_path / "w.bpk", scheme=spec, calibration="mse",
                    imatrix=tmp_path / "m.dat")
    assert [n for n, text in s["notices"] if "importance" in text] == ["other.weight"]
    qtk.convert(tmp_path / "m.safetensors", tmp_path / "p.bpk", scheme=spec, calibration="mse")
    with qtk.open(tmp_path / "w.bpk") as a, qtk.open(tmp_path / "p.bpk") as b:
        up = "model.layers.0.mlp.up_proj.weight"
        assert a.tensor(up).tobytes() != b.tensor(up).tobytes()  # the weights changed the choice
        assert a.tensor("other.weight").tobytes() == b.tensor("other.weight").tobytes()
        # the heavily weighted column comes out better
        x = t[up][:, 5]
        assert np.sum((a.numpy(up)[:, 5] - x) ** 2) < np.sum((b.numpy(up)[:, 5] - x) ** 2)
    r = qtk.evaluate(tmp_path / "m.safetensors", [spec], ["minmax", "mse"], imatrix=tmp_path / "m.dat")
    rows = {row["name"]: row for row in r["tensors"]}
    assert rows[up]["weighted"] and not rows["other.weight"]["weighted"]
    mm, mse = rows[up]["results"]
    assert mse["weighted_sqnr_db"] > mm["weighted_sqnr_db"]
    assert "weighted_sqnr_db" not in rows["other.weight"]["results"][0]
    assert "weighted_sqnr_db" in r["totals"][1]
    with pytest.raises(qtk.Error, match="calibration='mse'"):
        qtk.convert(tmp_path / "m.safetensors", tmp_path / "x.bpk", scheme=spec, imatrix=tmp_path / "m.dat")
    with pytest.raises(qtk.Error) as e:
        qtk.evaluate(tmp_path / "m.safetensors", [spec], imatrix=tmp_path / "missing.dat")
    assert e.value.status == "QTK_E_IO" and not (tmp_path / "x.bpk").exists()


def test_preset_gives_llama_cpp_types(tmp_path):
    rng = np.random.default_rng(9)
    t = {}
    for layer in range(4):
        for name in ("attn_q", "attn_v", "ffn_down"):
            t[f"blk.{layer}.{name}.weight"] = (0.02 * rng.standard_normal((64, 256))).astype(np.float32)
        t[f"blk.{layer}.attn_norm.weight"] = np.ones(256, np.float32)
    t["output.weight"] = (0.02 * rng.standard_normal((64, 256))).astype(np.float32)
    qtk.save(tmp_path / "m.safetensors", t)
    s = qtk.convert(tmp_path / "m.safetensors", tmp_path / "m.gguf", preset="q4_k_m")
    why = {p["name"]: p["why"] for p in s["plan"]}
    assert why["blk.2.attn_v.weight"] == "q4_k_m: attention v 2 of 4: Q6_K"
    assert why["blk.1.attn_v.weight"] == "q4_k_m: attention v 1 of 4: Q4_K"
    assert why["blk.0.attn_norm.weight"] == "q4_k_m: not quantized by llama.cpp"
    with qtk.open(tmp_path / "m.gguf") as c:
        assert str(c.tensor("blk.2.attn_v.weight").scheme) == str(qtk.Scheme("q6_k"))
        assert str(c.tensor("output.weight").scheme) == str(qtk.Scheme("q6_k"))
        assert str(c.tensor("blk.1.attn_q.weight").scheme) == str(qtk.Scheme("q4_k"))
    with pytest.raises(qtk.Error, match="give one"):
        qtk.convert(tmp_path / "m.safetensors", tmp_path / "x.gguf", preset="q4_k_m", scheme="q8s")
    with pytest.raises(qtk.Error, match="q4_k_x"):
        qtk.convert(tmp_path / "m.safetensors", tmp_path / "x.gguf", preset="q4_k_x")
