"""No references or memory leak over 10,000 quantize/dequantize calls (and their error paths,
byte borrowing, checkpoint reads)."""

import gc
import os
import sys
import tracemalloc

import numpy as np
import pytest

import qtk
from conftest import weights


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def fds():
    return len(os.listdir("/proc/self/fd"))


def loop(n, body):
    for _ in range(100):  # warm-up: caches, interned strings, allocator pools
        body()
    gc.collect()
    live, r0 = qtk._qtk._live_tensors(), rss()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(n):
            body()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    return grown, rss() - r0, qtk._qtk._live_tensors() - live


def test_10000_quantize_dequantize_calls():
    x = weights((64, 64), seed=1)
    s = qtk.Scheme("q4f,block=32:f16")
    out = np.empty((64, 64), np.float32)
    refs = sys.getrefcount(x), sys.getrefcount(s), sys.getrefcount(out)

    def body():
        t = qtk.quantize(x, s)
        t.dequantize()
        t.dequantize(out=out)
        qtk.quantize(x, "nvfp4").dequantize(np.float16)
        t.tobytes()
        t.scales()
        t.scheme, t.shape, t.global_scale

    grown, rss_grown, live = loop(10000, body)
    assert (sys.getrefcount(x), sys.getrefcount(s), sys.getrefcount(out)) == refs
    assert live == 0
    assert grown < 64 * 1024, grown
    # a leaked tensor per call would be 2.3 KB x 20,000 = 46 MB
    assert rss_grown < 4 << 20, rss_grown


def test_error_paths_and_borrowed_bytes_do_not_leak():
    bad = np.array([1.0, np.nan], np.float32)
    t = qtk.quantize(weights((16, 64), seed=2), "mxfp4")
    b = t.tobytes()
    refs = sys.getrefcount(bad), sys.getrefcount(b)

    def body():
        try:
            qtk.quantize(bad, "q8s")
        except qtk.Error:
            pass
        try:
            qtk.quantize(["x"], "q8s")
        except qtk.Error:
            pass
        u = qtk.Tensor.from_bytes(b, (16, 64), "mxfp4")
        memoryview(u).tobytes()
        u.convert("q8s,block=32:f16")

    grown, rss_grown, live = loop(10000, body)
    assert (sys.getrefcount(bad), sys.getrefcount(b)) == refs
    assert live == 0 and grown < 64 * 1024 and rss_grown < 4 << 20, (grown, rss_grown)


def test_checkpoint_reads_do_not_leak(tmp_path):
    p = tmp_path / "m.safetensors"
    qtk.save(p, {"q": qtk.quantize(weights((32, 64), seed=3), "nvfp4"), "f": weights((8, 8), seed=4)})
    n0 = fds()

    def body():
        with qtk.open(p) as c:
            c.tensor("q").dequantize()
            c.tensor("f")
            c.numpy("q")
            c.info("f"), c.metadata, c.keys(), c.hub
        kept = qtk.open(p).tensor("q")  # outlives its checkpoint
        kept.dequantize()

    grown, rss_grown, live = loop(2000, body)
    assert fds() == n0 and live == 0 and grown < 64 * 1024 and rss_grown < 4 << 20, (fds(), grown, rss_grown)


def test_buffer_cache_is_bounded_and_reused():
    prev = qtk.set_buffer_cache(8 << 20)
    try:
        x = weights((1024, 1024), seed=5)  # 4 MiB in, 4.5 MiB out: a pooled block
        ref = qtk.quantize(x, "q8s,block=32:f32").tobytes()
        r0 = rss()
        for _ in range(50):
            assert qtk.quantize(x, "q8s,block=32:f32").tobytes() == ref
        c = qtk.buffer_cache()
        assert c["limit"] == 8 << 20 and 1 <= c["blocks"] and c["bytes"] <= 8 << 20
        assert rss() - r0 < 16 << 20
        assert qtk.set_buffer_cache(0) == 8 << 20
        assert qtk.buffer_cache() == {"blocks": 0, "bytes": 0, "limit": 0}
        t = qtk.quantize(x, "q8s,block=32:f32")
        del t
        assert qtk.buffer_cache()["blocks"] == 0  # nothing kept with a limit of 0
    finally:
        qtk.set_buffer_cache(prev)
    with pytest.raises(qtk.Error):
        qtk.set_buffer_cache(-1)
