"""Lesson 03, part 6: memory latency, and Little's law for bytes.

Bandwidth is a throughput; every load also has a latency.  A *pointer chase* —
each load's address is the value of the previous load — lets nothing overlap, so
its time per hop is the pure latency of the memory level the working set fits in
(L1, L2, L3 caches, then main memory).  Sweeping the working-set size draws the
memory hierarchy as steps.

Little's law then says how much must be *in flight* to stream at full speed:
``bytes in flight = bandwidth × latency``.  A CPU core keeps a few dozen cache
misses outstanding; a GPU needs megabytes in flight, which is why it runs tens of
thousands of threads — each stalled thread is one more outstanding load.

>>> rs = memory_latency_sweep([2 ** 12, 2 ** 16], hops=2 ** 12, repeat=2)
>>> [r["nbytes"] for r in rs.records]
[4096, 65536]
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..arguments import Devices, Given, Real, Whole, Wholes, arguments
from ..devices import cupy_module, get_xp, normalize_device, synchronize
from ..errors import BadInputError, whole_number
from ..limits import require_fits
from ..results import ResultSet
from ..standin import register_kernel
from ..timing import benchmark

__all__ = ["LINE_BYTES", "GPU_LINE_BYTES", "GPU_SECTOR_BYTES", "random_cycle", "chase", "memory_latency",
           "memory_latency_sweep", "bytes_in_flight", "in_flight_text", "CHASE_KERNEL"]

#: One node per 64-byte cache line (a CPU's), so that no two hops share a line.
LINE_BYTES = 64
#: An NVIDIA GPU's L2 cache line and the sector it moves to and from memory (CUDA C++ Best Practices
#: Guide, "Coalesced Access to Global Memory"): data-sheet figures, not measured here.
GPU_LINE_BYTES, GPU_SECTOR_BYTES = 128, 32
_STRIDE = LINE_BYTES // 8  # int64 slots per line
MAX_HOPS = 2 ** 26  # one chase of this many dependent loads takes seconds from DRAM (~100 ns each)

#: CUDA C of the GPU chase: one thread, so every load waits for the previous one.
CHASE_KERNEL = r"""
extern "C" __global__ void course_chase(const long long* next, long long hops, long long* out) {
    long long i = 0;
    for (long long h = 0; h < hops; ++h) {
        i = next[i];
    }
    *out = i;
}
"""


def _chase_twin(grid: tuple, block: tuple, args: tuple) -> None:
    """:data:`CHASE_KERNEL` in NumPy, for the stand-in GPU (course.standin): follow ``hops`` links."""
    nxt, hops, out = np.asarray(args[0]), int(args[1]), np.asarray(args[2])
    i = 0
    for _ in range(hops):
        i = int(nxt[i])
    out.reshape(-1)[0] = i


register_kernel("course_chase", _chase_twin)


def random_cycle(nbytes: int, seed: int = 0) -> np.ndarray:
    """An int64 array in which following ``i = a[i]`` from 0 visits every cache line once, in random order.

    One node per ``LINE_BYTES`` (64-byte line); the order is a single random cycle, so the
    hardware prefetchers cannot guess the next address.
    """
    nbytes = whole_number("nbytes", nbytes, 2 * LINE_BYTES,
                          hint="the working set needs at least two 64-byte cache lines")
    lines = nbytes // LINE_BYTES
    require_fits(3 * lines * LINE_BYTES, "cpu", what=f"a {nbytes / 2**20:.1f} MiB pointer chase")
    order = np.random.default_rng(seed).permutation(lines)
    nxt = np.zeros(lines * _STRIDE, dtype=np.int64)
    nxt[order * _STRIDE] = np.roll(order, -1) * _STRIDE  # node order[k] points to order[k + 1]
    return nxt


def _chase_loop(nxt, hops):
    """The CPU chase, compiled by numba: each load's address is the previous load's value."""
    i = 0
    for _ in range(hops):
        i = nxt[i]
    return i


@functools.cache
def _cpu_chase():
    import numba

    return numba.njit(cache=True)(_chase_loop)


@functools.cache
def _gpu_chase():
    return cupy_module().RawKernel(CHASE_KERNEL, "course_chase")


def chase(nxt: Any, hops: int) -> int:
    """Follow ``hops`` pointers from index 0 (compiled loop on the CPU, one GPU thread on the GPU)."""
    hops = whole_number("hops", hops, 1, MAX_HOPS, hint="each hop is one dependent load")
    if type(nxt).__module__.startswith("cupy"):
        cp = cupy_module()
        out = cp.zeros(1, dtype=cp.int64)
        _gpu_chase()((1,), (1,), (nxt, np.int64(hops), out))
        return int(out.get()[0])
    return int(_cpu_chase()(nxt, int(hops)))


@arguments(device=Given(normalize_device),
           hops=Whole(hi=MAX_HOPS, hint="each hop is one dependent load of ~100 ns, so 2**26 hops take seconds"),
           nbytes=Whole(lo=2 * LINE_BYTES, hint="the working set needs at least two 64-byte cache lines"))
def memory_latency(nbytes: int = 2 ** 26, device: Any = "cpu", hops: int = 2 ** 18, repeat: int = 3,
                   budget_s: float | None = 1.0) -> dict:
    """Latency of one dependent load with a working set of ``nbytes``: ``seconds_per_hop`` and its record."""
    dev = device
    require_fits(int(nbytes), dev, what=f"a {int(nbytes) / 2**20:.1f} MiB pointer chase")
    xp = get_xp(dev)
    nxt = xp.asarray(random_cycle(nbytes))
    chase(nxt, min(int(hops), 1024))  # compile / warm
    synchronize(dev)
    t = benchmark(chase, nxt, int(hops), device=dev, warmup=1, repeat=repeat, budget_s=budget_s,
                  name=f"chase {nbytes}")
    per_hop = t.min / hops  # the best run: latency is what the hardware can do, undisturbed
    return t.as_record() | {"nbytes": int(nbytes), "hops": int(hops), "seconds_per_hop": per_hop,
                            "ns_per_hop": per_hop * 1e9}


@arguments(sizes=Wholes(lo=2 * LINE_BYTES, hint="working sets in bytes, e.g. [2**20]"), hops=Whole(hi=MAX_HOPS),
           devices=Devices())
def memory_latency_sweep(sizes: Sequence[int] = tuple(2 ** k for k in range(12, 27, 2)),
                         devices: Sequence[Any] | None = None, hops: int = 2 ** 18, repeat: int = 3,
                         progress: Any = None) -> ResultSet:
    """Pointer-chase latency against working-set size on each device: a ``ResultSet`` ``"memory_latency"``."""
    rs = ResultSet("memory_latency", params={"sizes": sizes, "devices": devices, "hops": hops, "repeat": repeat})
    jobs = [(d, s) for d in devices for s in sizes]
    it = progress(jobs, total=len(jobs), desc="pointer chase") if progress else jobs
    for d, s in it:
        rs.add(**(memory_latency(s, d, hops=hops, repeat=repeat) | {"device": d}))
    return rs


@arguments(bandwidth_bytes_per_s=Real(above=0), latency_s=Real(above=0))
def bytes_in_flight(bandwidth_bytes_per_s: float, latency_s: float, device: str = "cpu") -> dict:
    """Little's law for memory: the bytes that must be in flight to stream at full speed, and as many of
    the device's cache lines (64 bytes on a CPU; 128-byte lines of four 32-byte sectors on an NVIDIA GPU,
    where ``sectors`` is given too).

    >>> bytes_in_flight(20e9, 100e-9)["lines"]
    31.25
    >>> bytes_in_flight(2e12, 400e-9, "gpu")["sectors"]
    25000.0
    """
    b = bandwidth_bytes_per_s * latency_s
    if device == "gpu":
        return {"bytes": b, "lines": b / GPU_LINE_BYTES, "line_bytes": GPU_LINE_BYTES, "sectors": b / GPU_SECTOR_BYTES}
    return {"bytes": b, "lines": b / LINE_BYTES, "line_bytes": LINE_BYTES}


def in_flight_text(fl: dict) -> str:
    """``bytes_in_flight``'s answer in words: KiB, then lines (and sectors) of the device's own size.

    >>> in_flight_text(bytes_in_flight(2e12, 400e-9, "gpu"))
    '781.2 KiB = 6,250 lines of 128 bytes (25,000 sectors of 32)'
    """
    if not isinstance(fl, dict) or not {"bytes", "lines", "line_bytes"} <= fl.keys():
        raise BadInputError(f"in_flight_text takes what bytes_in_flight returns (a dict with bytes, lines and "
                            f"line_bytes); got {fl!r:.80}")
    text = f"{fl['bytes'] / 1024:,.1f} KiB = {fl['lines']:,.0f} lines of {fl['line_bytes']} bytes"
    return text + (f" ({fl['sectors']:,.0f} sectors of {GPU_SECTOR_BYTES})" if "sectors" in fl else "")
