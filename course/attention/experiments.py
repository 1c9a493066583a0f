"""Lesson 08's experiments for ``python -m course report``: attention's forward pass timed against the sequence
length on every device (naive, tiled, the fused kernel, PyTorch), and its peak memory measured on the CPU."""

from __future__ import annotations

from ..report import by_size, experiment
from ..results import ResultSet
from .plots import memory_figure, timing_figure
from .timing import attention_sweep, cache_sizes, memory_sweep


@experiment("attention_sweep", title="Attention forward against n: naive, tiled, fused kernel, PyTorch", lesson="08")
def sweep(devices, quick, progress):
    """float32, head size 64, no mask.  CPU: one head, n from 256 (NumPy's naive pass, the tiled NumPy pass with
    64 × 64 tiles, PyTorch's scaled_dot_product_attention).  GPU: 8 heads, the same two on CuPy, the fused CUDA C
    kernel, and PyTorch's attention with its own choice of backend and each backend forced alone on 4-D inputs
    (1, heads, n, d): math (float32), memory-efficient (float32: CUTLASS kernels, float32-accurate, which ignore the
    TF32 flags; the float32 peer) and FlashAttention in bfloat16 and in float16 (half precision only, labelled).
    TF32 is off on both sides.  Each PyTorch record names its backend and precision; a backend that refuses its
    inputs is recorded as refused with PyTorch's reason.  Each device's copy bandwidth is measured in the same run;
    each record carries its counted memory bytes."""
    rs = ResultSet("attention_sweep", params={"d": 64, "dtype": "float32"})
    for dev in devices:
        top = by_size(quick, 12 if dev == "cpu" else 14, 11 if dev == "cpu" else 13, 9)
        part = attention_sweep([2**k for k in range(8, top + 1)], d=64, heads=1 if dev == "cpu" else 8,
                               devices=[dev], repeat=3 if quick else 7, budget_s=1.0 if quick else 3.0,
                               total_budget_s=60 if quick else 600, progress=progress)
        rs.extend(part)
        rs.params[f"{dev}_ns"] = part.params["ns"]
    return rs


@sweep.plot
def _(rs, references):
    cpu = bool(rs.select(device="cpu")) or any(r.select(device="cpu") for r in references)
    return timing_figure(rs, references, caches=cache_sizes() if cpu and rs.source != "reference" else None)


@experiment("attention_memory", title="Peak memory of attention's forward pass: naive against tiled", lesson="08")
def memory(devices, quick, progress):
    """NumPy, float32, one head of size 64: the most memory one forward pass holds above its inputs, measured
    with tracemalloc, for the naive pass (its n × n scores and probabilities) and the tiled one (64 × 64 tiles),
    n from 256.  CPU only: tracemalloc sees NumPy's allocations, not a GPU's."""
    if "cpu" not in devices:
        rs = ResultSet("attention_memory")
        rs.notes.append("CPU only: the peak is measured with tracemalloc, which sees NumPy's arrays, not a GPU's.")
        return rs
    return memory_sweep([2**k for k in range(8, by_size(quick, 13, 12, 9) + 1)], d=64, progress=progress)


@memory.plot
def _(rs, references):
    return memory_figure(rs)
