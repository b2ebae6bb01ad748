"""qtk -- the quantized tensor kit, from Python.

numpy arrays in and out of every low-bit scheme of Burn's QuantScheme family (8/4/2-bit
integers, FP8 and FP4 minifloats, lookup codebooks, per-tensor, block and two-level scales)
and every checkpoint qtk reads: Burn's burnpack (.bpk), safetensors (with the Hugging Face
Hub's quantized layouts) and llama.cpp's GGUF. Backed by the qtk C library: every result is
the library's, bit for bit.

    >>> import numpy as np, qtk
    >>> w = np.random.default_rng(0).standard_normal((256, 512), dtype=np.float32)
    >>> t = qtk.quantize(w, "nvfp4")
    >>> t
    qtk.Tensor(shape=(256, 512), scheme='nvfp4', nbytes=73732)
    >>> y = t.dequantize()             # float32 [256, 512]
    >>> qtk.save("w.bpk", {"w": t})    # Burn's burnpack, bytes exactly as Burn lays them out

Errors raise qtk.Error, whose .status is qtk's status name and str() its message.
"""

from __future__ import annotations

import os as _os
import re as _re
import sys as _sys
import time as _time
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as _np

from . import _qtk
from ._qtk import (
    MAX_RANK,
    Checkpoint,
    Error,
    Scheme,
    Tensor,
    detect_isa,
    get_isa,
    get_threads,
    matmul,
    matmul_kernel,
    matmul_path,
    open,
    quantize,
    buffer_cache,
    register_table,
    save,
    set_buffer_cache,
    set_isa,
    set_threads,
    status_names,
    table,
)

__version__: str = _qtk.version()

#: The preset names qtk.Scheme accepts besides spec strings.
PRESETS: Tuple[str, ...] = ("nvfp4", "mxfp4", "mxfp8", "nf4")

__all__ = [
    "__version__",
    "Error",
    "Scheme",
    "Tensor",
    "Checkpoint",
    "PRESETS",
    "MAX_RANK",
    "quantize",
    "dequantize",
    "matmul",
    "matmul_path",
    "matmul_kernel",
    "open",
    "save",
    "convert",
    "evaluate",
    "set_isa",
    "get_isa",
    "detect_isa",
    "set_threads",
    "get_threads",
    "register_table",
    "table",
    "set_buffer_cache",
    "buffer_cache",
    "status_names",
]

PathLike = Union[str, bytes, "_os.PathLike[str]"]
SchemeLike = Union[str, Scheme]


def dequantize(tensor: Tensor, dtype: Any = None, out: Optional[_np.ndarray] = None) -> _np.ndarray:
    """The values of a qtk.Tensor as a float32 (the default) or float16 ndarray of its shape.

    The same as ``tensor.dequantize(dtype, out)``: qtk writes straight into the array it
    returns (a new one, or ``out``: a writeable C-contiguous float32/float16 array of as many
    elements, whose dtype is used when dtype is None).
    """
    if not isinstance(tensor, Tensor):
        raise _error("QTK_E_ARG", "dequantize takes a qtk.Tensor, not %s" % type(tensor).__name__)
    return tensor.dequantize(dtype, out)


def _error(status: str, message: str) -> Error:
    e = Error(message)
    e.status = status
    e.message = message
    return e


_SIZE = _re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(B|KB|kB|MB|GB|KiB|MiB|GiB)?\s*$")
_UNITS = {None: 1, "B": 1, "KB": 1e3, "kB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 1024, "MiB": 1 << 20, "GiB": 1 << 30}


def _size(v: Union[int, str, None]) -> Optional[int]:
    if v is None or isinstance(v, int):
        return v
    m = _SIZE.match(str(v))
    if not m:
        raise _error("QTK_E_ARG", "max_shard_size %r is not a size (an int, or '5GB', '500MB', '1GiB')" % (v,))
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def _rules(rules: Union[None, Mapping[str, str], Iterable[Any]]) -> Optional[List[str]]:
    if rules is None:
        return None
    if isinstance(rules, str):
        return [rules]
    if isinstance(rules, Mapping):
        return ["%s=%s" % (k, v) for k, v in rules.items()]
    out = []
    for r in rules:
        if isinstance(r, (tuple, list)) and len(r) == 2:
            out.append("%s=%s" % (r[0], r[1]))
        else:
            out.append(r)
    return out


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return ("%.0f %s" if unit == "B" else "%.1f %s") % (n, unit)
        n /= 1024.0
    return "?"


def _clock(s: float) -> str:
    s = int(max(s, 0))
    return "%d:%02d:%02d" % (s // 3600, s // 60 % 60, s % 60) if s >= 3600 else "%02d:%02d" % (s // 60, s % 60)


class _Bar:
    """A tqdm-style progress bar on a terminal stream (at most ten redraws a second)."""

    def __init__(self, what: str, stream: Any = None) -> None:
        self.what = what
        self.stream = stream if stream is not None else _sys.stderr
        try:
            self.on = bool(self.stream.isatty())
        except (AttributeError, ValueError):
            self.on = False
        self.t0 = _time.monotonic()
        self.last = 0.0
        self.drawn = False

    def __call__(self, done: int, total: int, bytes_done: int, bytes_total: int) -> None:
        if not self.on:
            return
        t = _time.monotonic()
        if done < total and t - self.last < 0.1:
            return
        self.last = t
        el = t - self.t0
        frac = bytes_done / bytes_total if bytes_total else (done / total if total else 1.0)
        width = 25
        fill = int(frac * width + 0.5)
        rate = bytes_done / el if el > 0 else 0.0
        eta = el * (1 - frac) / frac if 0 < frac < 1 else 0.0
        line = "\r%s %3d%%|%s%s| %d/%d tensors [%s/%s, %s/s, %s<%s]\033[K" % (
            self.what, int(frac * 100), "#" * fill, " " * (width - fill), done, total,
            _bytes(bytes_done), _bytes(bytes_total), _bytes(rate), _clock(el), _clock(eta))
        self.stream.write(line)
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


def _progress(progress: Union[None, bool, Callable[[int, int], Any]], what: str):
    """(the callable the C layer calls with 4 counts, the bar to close or None)."""
    if progress is None or progress is False:
        return None, None
    if progress is True:
        bar = _Bar(what)
        return (bar if bar.on else None), bar
    if not callable(progress):
        raise _error("QTK_E_ARG", "progress must be None, True or a callable taking (done, total)")
    return (lambda d, t, bd, bt: progress(d, t)), None


def convert(
    src: PathLike,
    dst: PathLike,
    scheme: Optional[SchemeLike] = None,
    rules: Union[None, Mapping[str, str], Sequence[Union[str, Tuple[str, str]]]] = None,
    min_elements: int = 1024,
    layout: Optional[str] = None,
    force: bool = False,
    progress: Union[None, bool, Callable[[int, int], Any]] = None,
    *,
    only: Optional[str] = None,
    skip: Optional[str] = None,
    dtype: Optional[str] = None,
    cast_floats: bool = False,
    calibration: str = "minmax",
    input_layout: Optional[str] = None,
    max_shard_size: Union[None, int, str] = None,
    threads: Optional[int] = None,
    imatrix: Optional[PathLike] = None,
    preset: Optional[str] = None,
) -> Dict[str, Any]:
    """Converts the checkpoint at src into dst, between formats and schemes, one tensor at a time.

    dst's format follows its extension (.bpk, .safetensors, .gguf; none: a directory of
    safetensors shards). What happens to each tensor, first rule that applies:

    1. integer, bool and other non-float tensors are copied;
    2. ``skip`` (a regex) matches its name, or ``only`` is given and does not: copied;
    3. the first of ``rules`` whose regex matches (a dict ``{regex: spec}`` or a list of
       ``'REGEX=SPEC'`` strings): SPEC, ``'none'`` (dequantize) or ``'keep'`` (copy);
    4. ``scheme`` (a spec, preset or qtk.Scheme) quantizes tensors of rank >= 2 with at least
       ``min_elements`` elements; ``'none'`` dequantizes every quantized tensor to ``dtype``
       ('f32' by default, 'f16', 'bf16'); None copies every tensor as it is. ``preset``
       (one of llama.cpp's file types: 'q4_k_m', 'q5_k_m', 'q3_k_m', 'q4_k_s', 'q5_k_s',
       'q6_k', 'q8_0'; with no ``scheme``) instead gives each weight the ggml type
       llama-quantize picks for it (docs/gguf.md, Mixture presets).

    A quantized tensor already in the target scheme is copied bit for bit; others are
    re-quantized. ``cast_floats`` converts the remaining float tensors to ``dtype`` too.
    ``layout`` writes a Hugging Face Hub layout ('gpt-oss', 'modelopt', 'compressed-tensors',
    'deepseek', 'bnb'); ``input_layout`` reads one ('none': the stored tensors);
    ``max_shard_size`` (bytes, or '5GB') writes shards. An existing dst is replaced only with
    ``force``. ``calibration`` is 'minmax', 'absmean' or 'mse'; with 'mse', ``imatrix`` (the
    path of a llama.cpp importance matrix, GGUF or legacy .dat) weighs each tensor's error by
    its entry; tensors without one are quantized unweighted (listed in 'notices').

    ``progress``: None (nothing), True (a tqdm-style bar on stderr when it is a terminal), or
    a callable called after each tensor with (done, total) tensors; an exception it raises
    cancels the conversion and propagates.

    The output appears only when complete: on any error, an exception from progress, or
    Ctrl-C (KeyboardInterrupt, noticed after the tensor in progress), nothing is left behind.
    The GIL is released while qtk works.

    Returns a summary dict: 'tensors', 'quantized', 'dequantized', 'cast', 'kept',
    'in_bytes', 'out_bytes', 'in_format', 'out_format', 'in_layout', 'out_layout',
    'in_files', 'out_files', 'out_directory', 'seconds', 'plan' (per tensor: 'name',
    'action', 'to', 'why'), 'requantized' ((name, SQNR dB) pairs) and 'notices'
    ((tensor, text) pairs).
    """
    cb, bar = _progress(progress, "convert")
    try:
        return _qtk.convert(
            src, dst, scheme=scheme, rules=_rules(rules), only=only, skip=skip,
            min_elements=min_elements, dtype=dtype, cast_floats=cast_floats,
            calibration=calibration, input_layout=input_layout, layout=layout,
            max_shard_size=_size(max_shard_size), force=force, threads=threads, progress=cb,
            imatrix=imatrix, preset=preset)
    finally:
        if bar is not None:
            bar.close()


def evaluate(
    path: PathLike,
    schemes: Union[SchemeLike, Sequence[SchemeLike]],
    calibrations: Optional[Sequence[str]] = None,
    *,
    only: Optional[str] = None,
    skip: Optional[str] = None,
    min_elements: int = 1024,
    input_layout: Optional[str] = None,
    threads: Optional[int] = None,
    progress: Union[None, bool, Callable[[int, int], Any]] = None,
    imatrix: Optional[PathLike] = None,
) -> Dict[str, Any]:
    """What each scheme costs and loses on a checkpoint, writing nothing (``qtk eval``).

    Every eligible tensor (float, selected by only/skip, rank >= 2 with at least
    min_elements elements) is quantized under each scheme (and each calibration, 'minmax'
    by default) and dequantized, against its stored values. Returns a dict: 'columns' (per
    scheme x calibration: 'spec', 'scheme', 'calibration'), 'tensors' (per tensor: 'name',
    'stored', 'shape', 'numel', 'results': per column 'ok', 'bytes', 'numel',
    'bits_per_element', 'rmse', 'max_abs', 'sqnr_db' -- or 'ok': False and 'error' where
    the scheme does not fit the shape) and 'totals' (per column, over the tensors it fits,
    with 'failed' the count it did not). SQNR is +inf when exact. With ``imatrix`` (a
    llama.cpp importance matrix's path) the 'mse' columns quantize with each tensor's entry,
    each tensor says whether it had one ('weighted'), and its results and the totals also
    carry 'weighted_sqnr_db' (the error weighted by the matrix).
    """
    if isinstance(schemes, (str, Scheme)):
        schemes = [schemes]
    specs = [str(s) if isinstance(s, Scheme) else s for s in schemes]
    cb, bar = _progress(progress, "eval")
    try:
        return _qtk.evaluate(path, specs, calibrations, only=only, skip=skip, min_elements=min_elements,
                             input_layout=input_layout, threads=threads, progress=cb, imatrix=imatrix)
    finally:
        if bar is not None:
            bar.close()
