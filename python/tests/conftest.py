"""Shared fixtures: the qtk CLI (the independent route to the library's reference kernels),
the checkpoints in ../shared/data, deterministic test arrays."""

import os
import pathlib
import subprocess

import numpy as np
import pytest

import qtk

REPO = pathlib.Path(__file__).resolve().parents[2]


def _find_bin():
    b = os.environ.get("QTK_BIN")
    if b:
        return pathlib.Path(b)
    for cand in (REPO / "build" / "qtk",):
        if cand.exists():
            return cand
    return None


QTK_BIN = _find_bin()
SHARED = pathlib.Path(os.environ.get("QTK_SHARED_DIR", REPO.parent / "shared"))
BURN = SHARED / "data" / "burn"
GGML = SHARED / "data" / "ggml"

# Every scheme family: each value type, symmetric and lookup, u32 / native / packed stores along
# either dimension, per-tensor, 1-D, 2-D, 3-D and '*' blocks, every scale dtype, two-level.
SCHEMES = [
    "q8f", "q8s", "q4f", "q4s", "q2f", "q2s", "e4m3", "e5m2", "e2m1",
    "q8s,block=32:f16", "q8f,block=32:f32,store=native", "q4f,block=32:f16", "q4s,block=64:bf16,store=native",
    "q2s,block=32:f16", "q2f,block=16:f32,store=u32:1", "q4f,block=32:f16,store=packed",
    "e4m3,block=32:f16", "e5m2,block=32:bf16", "e4m3,block=128x128:f32,store=native", "e2m1,block=32:ue8m0",
    "e5m2,block=16:ue8m0,store=u32:1", "e2m1,block=32:f16,store=native",
    "nvfp4", "mxfp4", "mxfp8", "nf4", "q4f,table=iq4nl,block=32:f32",
    "q8s,block=*:f32", "q4s,block=*x1:f16", "q4f,block=4x8:f16", "q8s,block=2x3x8:f32",
    "e2m1,block=16:ue4m3,tensor=f32,store=packed:1", "q4s,block=16:f16,tensor=f32", "q8s,block=32:ue4m3,tensor=f32",
]


def weights(shape, seed=0, scale=0.02):
    """Gaussian weights with a few outliers, zeros, a negative zero and exact halves."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    flat = x.reshape(-1)
    if flat.size >= 8:
        flat[: flat.size // 50 + 1] *= 40.0
        flat[1] = 0.0
        flat[2] = -0.0
        flat[3] = 0.5
        rng.shuffle(flat)
    return x


@pytest.fixture
def qtk_bin():
    if QTK_BIN is None or not QTK_BIN.exists():
        pytest.skip("the qtk CLI is not built (set QTK_BIN)")
    return QTK_BIN


@pytest.fixture
def cli(qtk_bin):
    """Runs the qtk CLI on the scalar reference kernels; returns the completed process."""

    def run(*args, check=True):
        env = dict(os.environ, QTK_ISA="scalar")
        p = subprocess.run([str(qtk_bin)] + [str(a) for a in args], env=env, capture_output=True, text=True)
        if check and p.returncode != 0:
            raise AssertionError("qtk %s failed (%d): %s" % (" ".join(map(str, args)), p.returncode, p.stderr))
        return p

    return run


@pytest.fixture
def burn():
    if not (BURN / "model.bpk").exists() or not (BURN / "mnist.safetensors").exists():
        pytest.skip("no %s (Burn's model.bpk and mnist.safetensors)" % BURN)
    return BURN


@pytest.fixture
def reference_isa():
    """Switches the kernels to the scalar reference for the test, then back."""
    prev = qtk.get_isa()
    qtk.set_isa("scalar")
    yield
    qtk.set_isa("auto" if prev == qtk.detect_isa() else prev)


def shape_arg(shape):
    return "x".join(map(str, shape)) if len(shape) else "scalar"
