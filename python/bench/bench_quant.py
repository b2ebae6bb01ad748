#!/usr/bin/python3
"""qtk.quantize / dequantize from Python against `qtk bench` for the same schemes, in one run.

    flock -x /tmp/qtk-cpu.lock /usr/bin/python3 python/bench/bench_quant.py [--qtk build/qtk]
        [--schemes 'nvfp4;mxfp4;q4f,block=32:f16'] [--size 64M] [--runs 5] [--threads 1]

Not a test. Both sides time the library on one thread (by default) over [N/4096, 4096] f32
weights, best of R runs; rates are GB/s of f32 data (4 bytes x elements) read by quantize or
written by dequantize, as `qtk bench` reports them. `qtk bench` runs before and after the
Python measurements and its better figure is kept (so drift in the machine counts against
Python). Python's dequantize is timed two ways: into a preallocated array (`out=`, what the
CLI does with its buffer) and returning a new array (which also pays the kernel's first-touch
page faults of a fresh 256 MiB allocation).
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "build", "python"))

import numpy as np  # noqa: E402

import qtk  # noqa: E402

DEFAULT = "nvfp4;mxfp4;mxfp8;nf4;q8s,block=32:f16;q4f,block=32:f16;q2s,block=32:f16;e4m3,block=32:f16"


def size(s):
    m = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * m[s[-1].upper()] if s[-1].upper() in m else int(s)


def cli_bench(exe, schemes, n, runs, threads):
    out = subprocess.run([exe, "bench", "--sizes", str(n), "--schemes", ";".join(schemes), "--runs", str(runs),
                          "--threads", str(threads), "--json"], check=True, capture_output=True, text=True).stdout
    r = {}
    for line in out.splitlines():
        j = json.loads(line)
        r[(j["scheme"], j["op"])] = (j["f32_gbps"], j["isa"])
    return r


def best(f, runs):
    t = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        t = min(t, time.perf_counter() - t0)
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qtk", default=os.path.join(REPO, "build", "qtk"), help="the qtk CLI (default build/qtk)")
    ap.add_argument("--schemes", default=DEFAULT, help="';'-separated specs")
    ap.add_argument("--size", default="64M", help="elements (K/M suffixes)")
    ap.add_argument("--runs", type=int, default=5, help="runs per measurement, best kept")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    schemes = a.schemes.split(";")
    n = size(a.size)
    cols = 4096 if n >= 4096 else n
    shape = (n // cols, cols)
    n = shape[0] * shape[1]
    gb = 4.0 * n / 1e9

    cli1 = cli_bench(a.qtk, schemes, n, a.runs, a.threads)
    qtk.set_threads(a.threads)
    rng = np.random.default_rng(97)
    x = rng.standard_normal(shape, dtype=np.float32)
    x *= np.float32(0.02)
    y = np.ones(shape, np.float32)  # touched, as the CLI's buffer is
    py = {}
    for s in schemes:
        sc = qtk.Scheme(s)
        t = qtk.quantize(x, sc, threads=a.threads)
        tq = best(lambda: qtk.quantize(x, sc, threads=a.threads), a.runs)
        tdo = best(lambda: t.dequantize(out=y), a.runs)
        tdn = best(lambda: t.dequantize(), a.runs)
        py[s] = (gb / tq, gb / tdo, gb / tdn)
        del t
    cli2 = cli_bench(a.qtk, schemes, n, a.runs, a.threads)

    def c(s, op):
        return max(cli1[(s, op)][0], cli2[(s, op)][0])

    isa = cli1[(schemes[0], "quantize")][1]
    print("qtk.quantize/dequantize vs `qtk bench` (%s), %d elements %s f32, %d thread(s), isa %s, best of %d;" %
          (a.qtk, n, "x".join(map(str, shape)), a.threads, isa, a.runs))
    print("baselines (qtk bench): read %.2f GB/s, write-nt %.2f GB/s, memcpy %.2f GB/s\n" %
          (max(cli1[("(baseline)", "read")][0], cli2[("(baseline)", "read")][0]),
           max(cli1[("(baseline)", "write-nt")][0], cli2[("(baseline)", "write-nt")][0]),
           max(cli1[("(baseline)", "memcpy")][0], cli2[("(baseline)", "memcpy")][0])))
    print("| scheme | quantize CLI | quantize py | py/CLI | dequantize CLI | dequantize py (out=) | py/CLI "
          "| dequantize py (new array) | py/CLI |")
    print("|---|---|---|---|---|---|---|---|---|")
    worst = 9.0
    for s in schemes:
        q, do, dn = py[s]
        cq, cd = c(s, "quantize"), c(s, "dequantize")
        worst = min(worst, q / cq, do / cd)
        print("| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |" % (s, cq, q, q / cq, cd, do, do / cd, dn, dn / cd))
    print("\nlowest py/CLI ratio (quantize, dequantize into out=): %.2f" % worst)


if __name__ == "__main__":
    main()
