"""Measuring attention: time against the sequence length, peak memory, and what each byte moved costs.

Every time goes through :func:`course.timing.benchmark` (PyTorch's through
:func:`course.torch_peer.benchmark_torch`), every peak memory through :mod:`tracemalloc` (NumPy reports
its arrays to it).  The methods, by name:

* ``"naive"``: :func:`~course.attention.naive_attention` (NumPy on the CPU, CuPy on a GPU);
* ``"flash"``: :func:`~course.attention.flash_attention`, the tiled NumPy/CuPy code (64 × 64 tiles);
* ``"fused"`` (GPU): the CUDA C kernel of :mod:`course.attention.fused`;
* ``"torch sdpa"``: ``torch.nn.functional.scaled_dot_product_attention`` with PyTorch's own choice of
  backend; on a GPU also each backend alone, forced with ``torch.nn.attention.sdpa_kernel`` on 4-D inputs
  ``(1, heads, n, d)`` (:data:`TORCH_BACKENDS`): ``"torch math"`` (float32, the unfused reference),
  ``"torch efficient"`` (the memory-efficient backend in float32: CUTLASS kernels, float32-accurate,
  which ignore PyTorch's TF32 flags: the course's float32 peer), and ``"torch flash (bfloat16)"`` and
  ``"torch flash (float16)"``: FlashAttention runs in half precision only, so those records say their
  precision and are not a like-for-like ratio with a float32 kernel.  Every PyTorch record names its
  ``backend`` and its ``precision``; a backend that refuses its inputs here is recorded as
  ``kind="refused"`` with PyTorch's reason, never as a timing.

Both sides of a comparison run with TF32 off (PyTorch's switches set, CuPy's read) and say so in the
record.  Each record carries the counted global-memory bytes of its algorithm where the course knows
them (:mod:`course.attention.traffic`) and the FLOPs (4·n·n_k·d per head), so a figure can put it on the
roofline or against the device copy measured in the same run.

>>> r = time_attention("flash", n=64, d=8, repeat=2)
>>> r["method"], r["counted_bytes"] > 0
('flash', True)
"""

from __future__ import annotations

import math
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..arguments import Devices, Dtype, Given, OneOf, Whole, Wholes, arguments
from ..devices import get_xp, normalize_device
from ..errors import BadInputError, GPUUnavailableError
from ..limits import require_fits
from ..results import ResultSet
from ..timing import benchmark, sweep_within_budget
from ..torch_peer import benchmark_torch, cupy_tf32, torch_device, torch_tf32, torch_tf32_flags
from .forward import flash_attention, memory_held, naive_attention, online_attention
from .fused import KEYS_PER_TILE, ROWS_PER_BLOCK, fused_attention
from .traffic import count_traffic, tile_traffic

__all__ = ["METHODS", "TORCH_BACKENDS", "BackendRefusedError", "torch_backend_precision", "BLOCK", "FLASH_MAX_TILES",
           "attention_input", "attention_function",
           "time_attention", "attention_sweep",
           "peak_memory", "memory_sweep", "cache_sizes", "attention_flops", "counted_bytes"]

#: The methods timed on each device, in the order the figures list them.
METHODS = {"cpu": ("naive", "flash", "torch sdpa"),
           "gpu": ("naive", "flash", "fused", "torch sdpa", "torch math", "torch efficient", "torch flash (bfloat16)",
                   "torch flash (float16)")}
#: PyTorch's attention backends by the course's name: (``torch.nn.attention.SDPBackend`` member, the dtype its
#: inputs are given in, what it runs at that dtype).
TORCH_BACKENDS = {"torch math": ("MATH", "float32", "float32, unfused (scores in memory)"),
                  "torch efficient": ("EFFICIENT_ATTENTION", "float32",
                                      "float32: CUTLASS kernels, float32-accurate, ignoring the TF32 flags"),
                  "torch flash (bfloat16)": ("FLASH_ATTENTION", "bfloat16",
                                             "bfloat16 inputs, float32 accumulation (tensor cores)"),
                  "torch flash (float16)": ("FLASH_ATTENTION", "float16",
                                            "float16 inputs, float32 accumulation (tensor cores)")}
#: The tiles of the NumPy/CuPy ``"flash"`` method here, and the most tiles one timed call may walk on each device
#: (each tile is about ten library calls: on a GPU, ten kernel launches).
BLOCK = 64
FLASH_MAX_TILES = {"cpu": 16_384, "gpu": 4_096}


@arguments(n=Whole(hint="the sequence length"), d=Whole(hint="the head size"), heads=Whole(hint="batch × heads"),
           dtype=Dtype(), seed=Whole(lo=0))
def attention_input(n: int, d: int, heads: int = 1, dtype: Any = "float32", device: Any = "cpu",
                    seed: int = 0) -> tuple[Any, Any, Any]:
    """Random ``(q, k, v)`` of shape ``(heads, n, d)`` on ``device`` (normal, so scores stay moderate).

    >>> [a.shape for a in attention_input(5, 4, heads=2)]
    [(2, 5, 4), (2, 5, 4), (2, 5, 4)]
    """
    dev = normalize_device(device)
    require_fits(3 * heads * n * d * dtype.itemsize, dev, what=f"q, k and v of {heads} × {n:,} × {d}")
    rng = np.random.default_rng(seed)
    xp = get_xp(dev)
    return tuple(xp.asarray(rng.standard_normal((heads, n, d)).astype(dtype)) for _ in range(3))


_ALL_METHODS = OneOf(*sorted({m for ms in METHODS.values() for m in ms}))
_N = Whole(hint="the sequence length")
_D = Whole(hint="the head size")
_HEADS = Whole(hint="batch × heads")
_CAUSAL = OneOf(True, False)
_BLOCK = Whole(hint="the tiled pass's tile size")


def _validate_qkv(inputs: Any) -> tuple:
    """``inputs`` as the three arrays ``(q, k, v)`` :func:`attention_input` returns, or a clear error."""
    if not isinstance(inputs, (tuple, list)) or len(inputs) != 3 or not all(hasattr(x, "shape") for x in inputs):
        raise BadInputError(f"inputs must be the three arrays (q, k, v) attention_input(n, d) returns, got "
                            f"{type(inputs).__name__}")
    return tuple(inputs)


@arguments(n=_N, d=_D, heads=_HEADS, causal=_CAUSAL)
def attention_flops(n: int, d: int, heads: int = 1, causal: bool = False) -> float:
    """FLOPs of one forward pass: ``2d`` for each score (``q·k``) and ``2d`` for each weighted value, per head;
    a causal pass counts the ``n(n+1)/2`` scores it needs.

    >>> attention_flops(1024, 64)
    268435456.0
    """
    scores = n * (n + 1) / 2 if causal else float(n) * n
    return 4.0 * heads * scores * d


@arguments(method=_ALL_METHODS, n=_N, d=_D, heads=_HEADS, itemsize=Whole(hint="bytes per number, 4 for float32"),
           causal=_CAUSAL, block=_BLOCK)
def counted_bytes(method: str, n: int, d: int, heads: int = 1, itemsize: int = 4, causal: bool = False,
                  block: int = BLOCK) -> float | None:
    """Global-memory bytes the course counts for ``method`` (None for PyTorch's, whose algorithm it does not
    count): the naive algorithm's ``4nd + 4n²`` numbers per head, or the tiles' Q once, K and V once per query
    tile, O and lse once, with the method's tile sizes.

    >>> counted_bytes("naive", 1024, 64) == 4 * (4 * 1024 * 64 + 4 * 1024 ** 2)
    True
    """
    if method == "naive":
        return float(heads * itemsize * count_traffic("naive", n, d)["numbers"])
    tiles = {"flash": (block, block), "fused": (ROWS_PER_BLOCK, KEYS_PER_TILE)}.get(method)
    if tiles is None:
        return None
    return float(heads * itemsize * tile_traffic(n, n, d, d, *tiles, causal=causal)["numbers"])


class BackendRefusedError(BadInputError):
    """PyTorch's attention backend refused these inputs here: ``reason`` says why, in PyTorch's words."""

    def __init__(self, method: str, reason: str):
        self.method, self.reason = method, reason
        super().__init__(f"{method} cannot run here: {reason}")


def torch_backend_precision(method: str) -> tuple[str, str]:
    """``(backend, precision)`` of a PyTorch method: the ``SDPBackend`` it is forced to (or PyTorch's own choice)
    and what it computes in.

    >>> torch_backend_precision("torch efficient")[0]
    'EFFICIENT_ATTENTION'
    """
    if method not in ("torch sdpa", *TORCH_BACKENDS):
        raise BadInputError(f"{method!r} is not a PyTorch method; choose one of {['torch sdpa', *TORCH_BACKENDS]}.")
    if method == "torch sdpa":
        return "PyTorch's choice", "float32 (PyTorch's choice of backend)"
    backend, _, precision = TORCH_BACKENDS[method]
    return backend, precision


def _torch_call(method: str, q, k, v, causal: bool, dev: str) -> Callable[[], Any]:
    import warnings

    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from ..devices import to_numpy

    tdev = torch_device(dev)                  # a clear error where PyTorch has no CUDA device
    dtype = getattr(torch, TORCH_BACKENDS[method][1]) if method in TORCH_BACKENDS else torch.float32
    # (1, heads, n, d): PyTorch's FlashAttention and memory-efficient backends take 4-D inputs only (batch, heads,
    # length, head size); given (heads, n, d) they refuse, and its own choice falls back to the math backend
    tq, tk, tv = (torch.as_tensor(to_numpy(a), device=tdev).to(dtype)[None] for a in (q, k, v))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    if method == "torch sdpa":
        return lambda: sdpa(tq, tk, tv, is_causal=causal)
    backend = getattr(SDPBackend, TORCH_BACKENDS[method][0])

    def run():
        with sdpa_kernel(backend):
            return sdpa(tq, tk, tv, is_causal=causal)
    with warnings.catch_warnings(record=True) as said:      # PyTorch warns why each backend declined
        warnings.simplefilter("always")
        try:
            run()
        except RuntimeError as exc:
            why = [str(w.message).splitlines()[0] for w in said if "not used because" in str(w.message)
                   or "kernel" in str(w.message).lower()]
            raise BackendRefusedError(method, "; ".join(why[:3] + [str(exc).splitlines()[0]])) from None
    return run


@arguments(method=_ALL_METHODS, inputs=Given(_validate_qkv), device=Given(normalize_device), causal=_CAUSAL,
           block=_BLOCK)
def attention_function(method: str, inputs: tuple, device: Any = "cpu", causal: bool = False,
                       block: int = BLOCK) -> Callable[[], Any]:
    """A no-argument function that runs ``method`` on prepared ``inputs`` (``(q, k, v)`` on ``device``); ``"flash"``
    with tiles of ``block`` × ``block``.

    A clear error for a method this device or this machine cannot run (no GPU for ``"fused"``, no PyTorch).
    """
    dev = device
    if method not in METHODS[dev]:
        raise BadInputError(f"no attention method {method!r} on the {dev.upper()}; choose one of {list(METHODS[dev])}.")
    q, k, v = inputs
    if method == "naive":
        return lambda: naive_attention(q, k, v, causal)
    if method == "flash":
        return lambda: flash_attention(q, k, v, causal, block_q=block, block_k=block)
    if method == "fused":
        return lambda: fused_attention(q, k, v, causal)
    torch_device(dev)                         # a clear error without PyTorch, or without its CUDA build
    return _torch_call(method, q, k, v, causal, dev)


@arguments(method=OneOf(*sorted({m for ms in METHODS.values() for m in ms})), n=Whole(hint="the sequence length"),
           d=Whole(hint="the head size"), heads=Whole(hint="batch × heads"), dtype=Dtype(),
           causal=_CAUSAL, repeat=Whole(hint="timed calls"), block=_BLOCK)
def time_attention(method: str, n: int, d: int = 64, heads: int = 1, device: Any = "cpu", dtype: Any = "float32",
                   causal: bool = False, repeat: int = 5, budget_s: float | None = 0.5, block: int = BLOCK) -> dict:
    """Time one method at one size: a record with the method, sizes, FLOPs, counted bytes and TF32 settings.

    The naive method's two ``n × n`` arrays per head are refused before they are made when they would not fit.
    """
    dev = normalize_device(device)
    if method == "naive":
        require_fits(2 * heads * n * n * dtype.itemsize, dev, what=f"the naive method's scores at n = {n:,}")
    tiles = math.ceil(n / block) ** 2
    if method == "flash" and tiles > FLASH_MAX_TILES[dev]:
        raise BadInputError(f"the tiled NumPy/CuPy pass makes about ten library calls per {block} × {block} tile: at "
                            f"n = {n:,} that is {tiles:,} tiles; it is timed up to "
                            f"{FLASH_MAX_TILES[dev]:,} tiles on the {dev.upper()} (the fused kernel does all in one "
                            "launch).")
    inputs = attention_input(n, d, heads, dtype, dev)
    fn = attention_function(method, inputs, dev, causal, block)
    torch_side = method.startswith("torch")
    if torch_side:
        with torch_tf32(False):
            t = benchmark_torch(fn, device=dev, warmup=1, repeat=repeat, budget_s=budget_s, name=method)
    else:
        t = benchmark(fn, device=dev, warmup=1, repeat=repeat, budget_s=budget_s, name=f"{method} n={n}")
    flops = attention_flops(n, d, heads, causal)
    nbytes = counted_bytes(method, n, d, heads, dtype.itemsize, causal, block)
    tf32 = {"tf32": False, **(torch_tf32_flags() or {})} if torch_side else {"tf32": cupy_tf32() if dev == "gpu"
                                                                             else False}
    extra = {"counted_bytes": nbytes, "gb_per_s": nbytes / t.median / 1e9} if nbytes else {"counted_bytes": None}
    named = dict(zip(("backend", "precision"), torch_backend_precision(method))) if torch_side else {
        "precision": f"{dtype.name}" + (" (TF32 products)" if tf32["tf32"] else "")}
    return t.as_record(method=method, n=n, d=d, heads=heads, causal=bool(causal), block=block if method == "flash"
                       else None,
                       dtype=TORCH_BACKENDS[method][1] if method in TORCH_BACKENDS else dtype.name, flops=flops,
                       gflops=flops / t.median / 1e9, **named, **extra, **tf32)


@arguments(ns=Wholes(hint="each is a sequence length"), d=Whole(hint="the head size"), heads=Whole(),
           devices=Devices(), dtype=Dtype(), repeat=Whole())
def attention_sweep(ns: Sequence[int], d: int = 64, heads: int = 1, methods: Sequence[str] | None = None,
                    devices: Sequence[str] | None = None, dtype: Any = "float32", causal: bool = False,
                    repeat: int = 5, budget_s: float | None = 0.5, total_budget_s: float | None = None,
                    copy: bool = True, progress: Callable | None = None) -> ResultSet:
    """Time every method at each n on each device; with ``copy``, each device's copy bandwidth measured in the
    same run (``kind="copy"``, the bar a memory-bound kernel is held to).  What cannot run here (no PyTorch,
    a backend PyTorch refuses, a size that does not fit) is skipped and named in ``notes``.

    >>> rs = attention_sweep([32, 64], d=8, methods=["naive", "flash"], repeat=2, copy=False)
    >>> sorted({r["method"] for r in rs.records})
    ['flash', 'naive']
    """
    rs = ResultSet("attention_sweep", params={"ns": ns, "d": d, "heads": heads, "dtype": dtype.name,
                                              "causal": bool(causal), "repeat": repeat, "devices": devices})
    if copy:
        from ..hardware.machine import copy_bandwidth

        for dev in devices:
            bw = copy_bandwidth(dev, nbytes=2**26 if dev == "cpu" else 2**28, repeat=5, budget_s=1.0)
            rs.add(kind="copy", device=dev, bytes_per_s=bw["bytes_per_s"], gb_per_s=bw["gb_per_s"],
                   nbytes=bw["nbytes"], threads=bw["threads"])
    jobs = [(dev, m, n) for dev in devices for m in METHODS[dev] if methods is None or m in methods for n in ns]
    unavailable: set = set()
    for dev, method, n in sweep_within_budget(jobs, rs, total_budget_s, progress, "attention"):
        if (dev, method) in unavailable:
            continue
        try:
            rs.add(kind="time", **time_attention(method, n, d, heads, dev, dtype, causal, repeat, budget_s))
        except BackendRefusedError as exc:         # PyTorch's backend refused these inputs: a record, not a time
            backend, precision = torch_backend_precision(method)
            rs.add(kind="refused", device=dev, method=method, n=n, d=d, heads=heads, backend=backend,
                   precision=precision, reason=exc.reason)
        except GPUUnavailableError as exc:         # missing here at every size: said once
            unavailable.add((dev, method))
            rs.notes.append(f"{dev} {method}: skipped ({str(exc).splitlines()[0]})")
        except (BadInputError, MemoryError) as exc:
            rs.notes.append(f"{dev} {method} n={n}: skipped ({str(exc).splitlines()[0]})")
    return rs


@arguments(method=OneOf("naive", "online", "flash"), n=Whole(hint="the sequence length"),
           d=Whole(hint="the head size"), heads=Whole(), dtype=Dtype(), block=Whole(hint="tile size"))
def peak_memory(method: str, n: int, d: int = 64, heads: int = 1, dtype: Any = "float32", block: int = BLOCK,
                causal: bool = False) -> dict:
    """The most memory one NumPy forward pass held above its inputs, measured by :mod:`tracemalloc`, beside
    what the code was expected to hold (:func:`~course.attention.forward.memory_held`) and one ``n × n``
    array.  Returns ``{"method", "n", "d", "heads", "peak_bytes", "expected_bytes", "square_bytes"}``.

    >>> r = peak_memory("naive", 128, 16)
    >>> r["peak_bytes"] >= r["square_bytes"]
    True
    """
    q, k, v = attention_input(n, d, heads, dtype, "cpu")
    run = {"naive": lambda: naive_attention(q, k, v, causal),
           "online": lambda: online_attention(q, k, v, causal, block_k=block),
           "flash": lambda: flash_attention(q, k, v, causal, block_q=block, block_k=block)}[method]
    started = tracemalloc.is_tracing()
    if not started:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        result = run()
        peak = tracemalloc.get_traced_memory()[1] - base
        del result
    finally:
        if not started:
            tracemalloc.stop()
    memory = "naive" if method == "naive" else "tiled"
    rows = n if method == "online" else block
    expected = memory_held(memory, n, n, d, rows, block, heads) * dtype.itemsize
    return {"device": "cpu", "method": method, "n": n, "d": d, "heads": heads, "dtype": dtype.name, "block": block,
            "peak_bytes": int(peak), "expected_bytes": float(expected), "square_bytes": float(heads * n * n
                                                                                               * dtype.itemsize)}


@arguments(ns=Wholes(hint="each is a sequence length"), d=Whole(hint="the head size"))
def memory_sweep(ns: Sequence[int], d: int = 64, methods: Sequence[str] = ("naive", "flash"),
                 progress: Callable | None = None) -> ResultSet:
    """:func:`peak_memory` of each method at each n (NumPy, float32, one head): a ResultSet ``"attention_memory"``;
    sizes that do not fit are skipped with a note.

    >>> rs = memory_sweep([64, 128], d=8)
    >>> len(rs.records)
    4
    """
    rs = ResultSet("attention_memory", params={"ns": ns, "d": d, "methods": list(methods)})
    for method, n in (progress or (lambda x, **_: x))([(m, n) for m in methods for n in ns], desc="peak memory"):
        try:
            rs.add(**peak_memory(method, n, d))
        except (BadInputError, MemoryError) as exc:
            rs.notes.append(f"{method} n={n}: skipped ({str(exc).splitlines()[0]})")
    return rs


def cache_sizes() -> dict:
    """This CPU's data caches in bytes, as Linux describes them (``{"L1": .., "L2": .., "L3": ..}``; empty
    where the system does not say).

    >>> all(v > 0 for v in cache_sizes().values())
    True
    """
    out: dict[str, int] = {}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(size[-1:].upper(), 1)
        try:
            out[f"L{level}"] = int(size.rstrip("KkMmGg")) * scale
        except ValueError:
            continue
    return out

