"""Lesson 03, part 3: batching (Little's law) and reduced precision.

**Batching.**  One training step of an MLP (lesson 01) on a batch of ``B``
samples costs a fixed overhead (one call per layer, a kernel launch per op on a
GPU) plus work proportional to ``B``.  Larger batches spread the overhead: the
*throughput* (samples per second) rises until the device is busy, while the
*latency* (seconds per batch) grows.  **Little's law** ties the two: the number
of samples in flight ``L`` equals the throughput ``λ`` times the time each spends
in the system ``W``; for one step at a time that is the batch itself, so it tests
nothing, and :func:`batch_reading` asks what can be tested instead: whether the
throughput levelled off within the batches measured, at what share of the roof.
:func:`batch_sweep` measures ``λ`` from a continuous run of steps and ``W`` from
single steps, independently.

**Reduced precision.**  :func:`precision_sweep` times matrix products in float32,
TF32 (float32 data on a GPU's tensor cores, through PyTorch), float16 and bfloat16.
Half-precision numbers take half the memory and, on hardware with units for them (GPU
tensor cores), run many times faster on large products (the reference's ratio is
printed by the lesson, not assumed).  A CPU without float16 arithmetic has numpy
*emulate* it (convert every element to float32 and back, with no BLAS), so there it
is much slower: measured, not assumed.  bfloat16 has no numpy type; it is timed
through PyTorch when that is installed.  Mixed-precision *training* (float32 master
weights, float32 accumulation, loss scaling) is lesson 01's :mod:`course.backprop.mixed`.

>>> rs = precision_sweep([32], dtypes=("float32", "float16"), repeat=2)
>>> sorted(r["dtype"] for r in rs.records)
['float16', 'float32']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..arguments import Devices, Dtype, Optional, Real, Whole, Wholes, arguments
from ..backprop import MLP
from ..devices import cupy_module, get_xp, synchronize
from ..errors import BadInputError, GPUUnavailableError, UnsupportedDtypeError
from ..limits import require_fits, validate_dtype
from ..results import ResultSet
from ..timing import benchmark, sweep_within_budget
from ..torch_peer import TORCH_INSTALL, benchmark_torch, torch_available, torch_cuda_available, torch_tf32
from .ops import CPU_FLOAT16_MATMUL_MAX_N, time_op

__all__ = ["batch_sweep", "littles_law", "batch_for_fraction", "batch_reading", "precision_sweep",
           "time_torch_matmul", "torch_available", "DEFAULT_MLP_SIZES", "TF32"]

#: The dtype name of float32 data multiplied in TF32 on tensor cores (PyTorch, TF32 switched on for the call).
TF32 = "tf32"

DEFAULT_MLP_SIZES = (256, 256, 256, 10)


@arguments(throughput_per_s=Real(lo=0), latency_s=Real(lo=0))
def littles_law(throughput_per_s: float, latency_s: float) -> float:
    """Items in flight ``L = λ · W`` (Little's law).

    >>> littles_law(1000.0, 0.064)  # 1000 samples/s, 64 ms each: 64 in flight
    64.0
    """
    return throughput_per_s * latency_s


@arguments(fraction=Real(above=0, hi=1))
def batch_for_fraction(batch_sizes: Sequence[float], samples_per_s: Sequence[float],
                       fraction: float = 0.9) -> int:
    """The smallest batch size whose throughput reaches ``fraction`` of the best measured.

    >>> batch_for_fraction([1, 2, 4, 8], [10, 50, 95, 100])
    4
    """
    b = np.asarray(batch_sizes, float)
    s = np.asarray(samples_per_s, float)
    if b.shape != s.shape or b.ndim != 1 or not len(b):
        raise BadInputError(f"need two equally long, non-empty lists, got {len(b)} batch sizes and "
                            f"{len(s)} throughputs")
    if not np.all(np.isfinite(b)) or not np.all(np.isfinite(s)):
        raise BadInputError("batch_sizes and samples_per_s must be finite numbers (no NaN or infinity)")
    order = np.argsort(b)
    b, s = b[order], s[order]
    return int(b[np.nonzero(s >= fraction * s.max())[0][0]])


#: Samples/s growing by more than this per doubling of the batch at the largest batch measured: still rising.
STILL_RISING_PER_DOUBLING = 1.1


@arguments(peak_flops=Optional(Real(above=0, hint="the device's peak FLOP/s, or None")))
def batch_reading(records: Sequence[dict], peak_flops: float | None = None) -> str:
    """One device's batch sweep in words: did samples/s level off within the batches measured, and how busy did
    the device get (the step's FLOP/s as a share of ``peak_flops``, the float32 matrix-product roof measured on
    that device, where given)?  "90 % of the best" names a plateau only if there is one.

    >>> recs = [{"batch": b, "samples_per_s": 100.0 * b, "gflops": 0.01 * b} for b in (1, 2, 4, 8)]
    >>> batch_reading(recs, peak_flops=1e12)[:60]
    'samples/s were still rising at the largest batch measured (2'
    """
    recs = sorted(records, key=lambda r: r["batch"])
    if len(recs) < 2:
        return ""
    a, z = recs[-2], recs[-1]
    per_doubling = (z["samples_per_s"] / a["samples_per_s"]) ** (1 / np.log2(z["batch"] / a["batch"]))
    share = z["gflops"] * 1e9 / peak_flops if peak_flops and z.get("gflops") else None
    busy = f", where the step ran at {100 * share:.2g} % of the float32 roof" if share is not None else ""
    b90 = batch_for_fraction([r["batch"] for r in recs], [r["samples_per_s"] for r in recs])
    if per_doubling > STILL_RISING_PER_DOUBLING:
        return (f"samples/s were still rising at the largest batch measured ({per_doubling:.2f}× per doubling from "
                f"batch {a['batch']:,} to {z['batch']:,}{busy})"
                + (": the device never became busy in this range" if share is not None and share < 0.5 else "")
                + f", so the smallest batch for 90 % of the best ({b90:,}) is an edge of the sweep, not a plateau.")
    return (f"samples/s levelled off ({per_doubling:.2f}× per doubling at the largest batches{busy}): batch "
            f"{b90:,} already reaches 90 % of the best measured.")




def _run_steps(model: Any, x: Any, y: Any, steps: int, device: str) -> None:
    """``steps`` training steps back to back, one synchronize at the end (a continuous stream)."""
    for _ in range(steps):
        model.train_step(x, y, 1e-3)
    synchronize(device)


def _require_mlp_fits(batch_sizes: list[int], sizes: list[int], devices: list[str], dtype: np.dtype) -> None:
    """Refuse a dtype a device cannot hold, or an MLP step at the largest batch that does not fit on a device."""
    nbytes = (4 * max(batch_sizes) * sum(sizes) + 3 * sum(a * b for a, b in zip(sizes, sizes[1:]))) * dtype.itemsize
    for d in devices:
        validate_dtype(dtype, d)
        require_fits(nbytes, d, what=f"an MLP {sizes} at batch {max(batch_sizes):,}")


@arguments(batch_sizes=Wholes(hint="each is a batch size, e.g. [1, 64]"),
           sizes=Wholes(min_len=2, hint="the layer widths, at least an input and an output width"),
           devices=Devices(), dtype=Dtype(), repeat=Whole(), stream_steps=Whole(hi=10_000), then=_require_mlp_fits)
def batch_sweep(batch_sizes: Sequence[int] = (1, 4, 16, 64, 256), sizes: Sequence[int] = DEFAULT_MLP_SIZES,
                devices: Sequence[Any] | None = None, dtype: Any = "float32", repeat: int = 5,
                budget_s: float | None = 0.3, stream_steps: int = 5, total_budget_s: float | None = None,
                progress: Callable | None = None) -> ResultSet:
    """Forward + backward + update of an MLP across batch sizes: a ``ResultSet`` ``"batching"``.

    Per record (one per device and batch size): ``median_s`` (latency of one step),
    ``samples_per_s`` (``batch / median_s``), ``stream_samples_per_s`` (samples per second
    over ``stream_steps`` consecutive steps timed as one run; median of up to 3 runs), ``in_flight`` (Little's law:
    ``stream_samples_per_s × median_s``, to compare with ``batch``) and ``gflops``.
    """
    rs = ResultSet("batching", params={"batch_sizes": batch_sizes, "sizes": sizes, "devices": devices,
                                      "dtype": dtype.name, "repeat": repeat, "stream_steps": stream_steps,
                                      "total_budget_s": total_budget_s, "stopped_early": False})
    jobs = [(d, b) for d in devices for b in batch_sizes]
    rng = np.random.default_rng(0)
    models: dict[str, Any] = {}
    for d, b in sweep_within_budget(jobs, rs, total_budget_s, progress, "batch sizes"):
        model = models.get(d) or models.setdefault(d, MLP(sizes, dtype=dtype.name, device=d, seed=0))
        xp = get_xp(d)
        x = xp.asarray(rng.standard_normal((b, sizes[0])).astype(dtype))
        y = xp.asarray(rng.integers(0, sizes[-1], size=b))
        t = benchmark(model.train_step, x, y, 1e-3, device=d, warmup=1, repeat=repeat, budget_s=budget_s,
                      name=f"train_step B={b}")
        steps = benchmark(_run_steps, model, x, y, stream_steps, d, device="cpu", warmup=0,
                          repeat=max(1, min(repeat, 3)), budget_s=budget_s, name=f"{stream_steps} steps")
        stream = stream_steps * b / steps.median
        flops = float(model.flops_per_step(b))
        rs.add_timing(t, batch=b, dtype=dtype.name, samples_per_s=b / t.median, stream_samples_per_s=stream,
                      in_flight=littles_law(stream, t.median), flops=flops, gflops=flops / t.median / 1e9)
    return rs


# ----------------------------------------------------------------- reduced precision

def require_torch_matmul(n: int, dtype: Any, device: str) -> None:
    """Refuse three n×n matrices that do not fit, or a product PyTorch cannot time here: not installed, no
    such dtype, or no CUDA build for the GPU."""
    require_fits(3 * n * n * 2, "gpu" if device == "gpu" else "cpu", what=f"three {n:,}x{n:,} {dtype} matrices")
    if not torch_available():
        raise UnsupportedDtypeError(f"{dtype} is timed through PyTorch, which is not installed here; "
                                    f"add it ({TORCH_INSTALL}), or choose float32 or float16")
    import torch

    if not isinstance(dtype, str) or not isinstance(getattr(torch, dtype, None), torch.dtype):
        raise UnsupportedDtypeError(f"dtype must name a PyTorch dtype such as 'bfloat16', got {dtype!r}")
    if device == "gpu" and not torch_cuda_available():
        raise UnsupportedDtypeError("bfloat16 on the GPU is timed through PyTorch, whose CUDA build is not "
                                    "installed here; install a CUDA build of torch or choose float16")


@arguments(n=Whole(hint="the matrix side"), then=require_torch_matmul)
def time_torch_matmul(n: int, dtype: str, device: str, repeat: int, budget_s: float | None) -> dict:
    """One n×n matrix product in ``dtype`` (bfloat16, ...) timed through PyTorch: a record with its GFLOP/s."""
    import torch

    tdev = "cuda" if device == "gpu" else "cpu"
    tdt = getattr(torch, dtype)
    a = torch.full((n, n), 0.5, dtype=tdt, device=tdev)
    b = torch.full((n, n), 0.25, dtype=tdt, device=tdev)
    c = torch.empty((n, n), dtype=tdt, device=tdev)

    def mm() -> None:
        torch.matmul(a, b, out=c)

    t = benchmark_torch(mm, device=device, warmup=2, repeat=repeat, budget_s=budget_s, name=f"torch matmul {n}")
    flops = 2.0 * n ** 3
    return t.as_record() | {"device": device, "n": n, "gflops": flops / t.median / 1e9, "flops": flops}


def _require_precisions_fit(sizes: list[int], dtypes: Sequence[str], devices: list[str]) -> None:
    """Refuse no dtypes, a dtype a device cannot hold (bfloat16 is PyTorch's), or three matrices of the largest
    size that do not fit."""
    if not dtypes:
        raise BadInputError("dtypes is empty: give at least one of float32, float16, bfloat16")
    for dtn in dtypes:
        for d in devices:
            if dtn not in ("bfloat16", TF32):
                validate_dtype(dtn, d)
            itemsize = 2 if dtn == "bfloat16" else 4 if dtn == TF32 else np.dtype(dtn).itemsize
            require_fits(3 * max(sizes) ** 2 * itemsize, d, what=f"three {max(sizes):,}x{max(sizes):,} {dtn} matrices")


@arguments(sizes=Wholes(hint="each is a matrix side, e.g. [256]"), devices=Devices(), then=_require_precisions_fit)
def precision_sweep(sizes: Sequence[int] = (64, 128, 256), dtypes: Sequence[str] = ("float32", "float16", "bfloat16"),
                    devices: Sequence[Any] | None = None, repeat: int = 3, budget_s: float | None = 0.3,
                    total_budget_s: float | None = None, progress: Callable | None = None) -> ResultSet:
    """Matrix-product GFLOP/s and memory per dtype: a ``ResultSet`` ``"mixed_precision"``.

    float32 and float16 use numpy (CPU) / CuPy (GPU: cuBLAS, whose float16 path uses
    tensor cores where the GPU has them; its float32 path strict float32, TF32 off); bfloat16
    uses PyTorch, and is skipped with a note when PyTorch is not installed.  ``"tf32"`` is
    float32 data multiplied on the tensor cores in TF32 (PyTorch with TF32 switched on for
    the call): the float32 a Hopper or Ampere GPU runs when a framework allows it, GPU only.
    Each record has ``dtype``, ``library``, ``n``, ``gflops``, ``median_s`` and
    ``matrix_bytes`` (one n×n matrix).
    """
    dtypes = list(dtypes)
    rs = ResultSet("mixed_precision", params={"sizes": sizes, "dtypes": dtypes, "devices": devices,
                                             "repeat": repeat, "stopped_early": False})
    if "bfloat16" in dtypes and not torch_available():
        rs.notes.append("bfloat16 was not timed: numpy and CuPy have no bfloat16 type and PyTorch is not "
                        f"installed (to add it, {TORCH_INSTALL}).")
        dtypes = [d for d in dtypes if d != "bfloat16"]
    if TF32 in dtypes and (not torch_available() or devices == ["cpu"]):
        rs.notes.append("TF32 was not timed: it is a tensor-core format of NVIDIA GPUs (Ampere and later), timed "
                        "through PyTorch on a GPU" + ("" if torch_available() else ", and PyTorch is not installed")
                        + ".")
        dtypes = [d for d in dtypes if d != TF32]
    jobs = [(d, dtn, n) for d in devices for dtn in dtypes for n in sizes]
    for d, dtn, n in sweep_within_budget(jobs, rs, total_budget_s, progress, "precisions"):
        if dtn == TF32 and (d == "cpu" or not torch_cuda_available()):
            note = ("TF32 was not timed on the GPU: it is timed through PyTorch, whose CUDA build is not installed "
                    "here" if d == "gpu" else "")
            if note and note not in rs.notes:
                rs.notes.append(note)
            continue
        if dtn in ("bfloat16", TF32):
            try:
                if dtn == TF32:
                    with torch_tf32(True):
                        rec, lib, itemsize = time_torch_matmul(n, "float32", d, repeat, budget_s), "torch, TF32 on", 4
                else:
                    rec, lib, itemsize = time_torch_matmul(n, dtn, d, repeat, budget_s), "torch", 2
            except (UnsupportedDtypeError, GPUUnavailableError) as exc:  # e.g. a CPU-only PyTorch on a GPU machine
                if str(exc) not in rs.notes:
                    rs.notes.append(str(exc))
                continue
        elif d == "cpu" and dtn == "float16" and n > CPU_FLOAT16_MATMUL_MAX_N:
            rs.notes.append(f"CPU float16 at n={n:,} skipped: numpy emulates float16 without BLAS, so one "
                            "product would take minutes.")
            continue
        else:
            rec = time_op("matmul", n, dtn, d, repeat=repeat, budget_s=budget_s)
            lib, itemsize = ("cupy" if d == "gpu" else "numpy"), np.dtype(dtn).itemsize
        rs.add(**(rec | {"dtype": dtn, "library": lib, "matrix_bytes": n * n * itemsize}))
    if "gpu" in devices and cupy_module() is not None:
        rs.notes.append("GPU float16 products go through cuBLAS, which uses tensor cores where the GPU has "
                        "them; float32 uses the ordinary FP32 units (CuPy enables TF32 only with CUPY_TF32=1; "
                        "the tf32 rows, where present, are PyTorch's float32 products with TF32 on).")
    return rs

