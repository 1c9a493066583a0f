"""Lesson 03, part 2: latency — the fixed cost of the smallest possible operation.

On the **CPU** the smallest numpy operation (adding two 1-element arrays) costs
the Python-to-C call overhead: checking types, picking a loop, handling the
output.  Hundreds of nanoseconds for work of one nanosecond.

On the **GPU** the same tiny add must also be *launched*: the CPU builds a
command, hands it to the driver, and the GPU schedules it.  Asking for the answer
adds a **synchronize** (wait for the queue to drain) and a **copy** back over
PCIe/NVLink.  These costs are microseconds each, and they are paid per call, not
per element: that is why a GPU loses on small work.

On a GPU two costs go by the name "launch latency", and the rows keep them apart: the **host's cost
per call** (CuPy's or PyTorch's Python and driver work to queue one kernel, timed on the host clock),
and the **hardware's launch** (how soon the GPU starts the next kernel of a queue: empty kernels
queued behind a busy one and timed by CUDA events on the device, or one node of a CUDA graph).

GPU calls are also **asynchronous**: a CuPy call returns once its kernel is
queued.  :func:`async_chain` times a chain of ops three ways (return without
waiting, wait once at the end, wait after every op) to make the invisible queue
visible.  :func:`transfer_bandwidth` measures host↔device copies from ordinary
(pageable) and from pinned host memory.

Every number is a distribution over many calls, never a single time.

>>> rs = smallest_op_latency("cpu", repeat=50, budget_s=0.2)
>>> "empty Python call (the timer itself)" in {r["what"] for r in rs.records}
True
"""

from __future__ import annotations

import operator
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..arguments import Given, Optional, Real, Whole, Wholes, arguments
from ..devices import cupy_module, get_xp, normalize_device, require_gpu
from ..errors import BadInputError, UnsupportedDtypeError, whole_number
from ..limits import require_fits, validate_dtype
from ..results import ResultSet
from ..results import validate_results as _results
from ..standin import register_kernel
from ..timing import Timing, benchmark

__all__ = ["smallest_op_latency", "async_chain", "transfer_bandwidth", "latency_summary", "launch_reading",
           "LAUNCH_SOURCE", "RELABELLED", "EVENTS_BEHIND_LEAD", "HEAD_START_S", "relabel_latency"]

#: An empty kernel, and one that keeps the GPU busy for a given number of clock cycles.
LAUNCH_SOURCE = r"""
extern "C" __global__ void empty_kernel() {}

extern "C" __global__ void spin_kernel(const long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
"""

# On the stand-in GPU (course.standin) the empty kernel does nothing, and so does the spin: its host
# clock has no GPU time to show.
register_kernel("empty_kernel", lambda grid, block, args: None)
register_kernel("spin_kernel", lambda grid, block, args: None)

#: Rows of results recorded before the rows said what they measure: old label -> what it measured.
RELABELLED = {
    "launch a 1-element kernel (host time, no wait)":
        "CuPy add of 1 element: host time per call, no wait (not the GPU's launch)",
    "the kernel itself (GPU time, CUDA events)":
        "CuPy add of 1 element between CUDA events (the host call included, not the kernel alone)",
}
#: The events row once the timer queues a lead ahead of its start event (``lead_s`` in the record): the GPU
#: reaches the start event only after the host has queued the add, so no host time falls between the events.
EVENTS_BEHIND_LEAD = ("CuPy add of 1 element between CUDA events, behind a lead: GPU time of one kernel and "
                      "the two events (no host time)")
#: How long the spinning kernel keeps the GPU busy while the host queues the empty kernels behind it.
HEAD_START_S = 4e-3


_RS, _DEVICE = Given(_results), Given(normalize_device)
_REPEAT, _BUDGET = Whole(hint="timed calls"), Optional(Real(above=0, hint="seconds of measuring, or None"))


@arguments(rs=_RS)
def relabel_latency(rs: ResultSet) -> ResultSet:
    """``rs`` with the rows of older recordings renamed by :data:`RELABELLED`, and an events row timed
    behind a lead named :data:`EVENTS_BEHIND_LEAD` (in place; returned)."""
    host_included = RELABELLED["the kernel itself (GPU time, CUDA events)"]
    for r in rs.records:
        what = RELABELLED.get(r.get("what"), r.get("what"))
        r["what"] = EVENTS_BEHIND_LEAD if what == host_included and r.get("lead_s") else what
    return rs


def _record(rs: ResultSet, t: Timing, what: str, device: str, **extra: Any) -> None:
    rs.add_timing(t, what=what, device=device, samples_s=[float(s) for s in t.samples], **extra)
    if t.stopped_early:
        rs.notes.append(f"{device.upper()} '{what}': stopped early by its time budget after "
                        f"{t.repeat} calls.")


@arguments(device=_DEVICE, repeat=_REPEAT, budget_s=_BUDGET)
def smallest_op_latency(device: Any = "cpu", repeat: int = 300, budget_s: float | None = 0.5) -> ResultSet:
    """Time the smallest operations on ``device``, ``repeat`` times each: a distribution.

    CPU (wall clock): an empty Python call (the timer's own cost), a Python float
    addition (no numpy), a 1-element ``numpy.add`` into a preallocated output (the
    ufunc call overhead), and a 1-element ``sum`` (a Python-level wrapper around a
    reduction).

    GPU: CuPy's host time per call of a 1-element add (no wait; PyTorch's beside it where
    PyTorch has CUDA); the call followed by a synchronize (the round trip); a synchronize of
    an idle stream; the call bracketed by CUDA events (host call and kernel); the hardware's
    launch: device time per kernel of empty kernels queued back to back, and per node of a
    CUDA graph of empty kernels; a 4-byte host→device and device→host copy.

    Returns a ``ResultSet`` ``"launch_latency"``: one record per item with ``what``,
    median/quartiles and every sample in ``samples_s``.
    """
    dev = normalize_device(device)
    repeat = whole_number("repeat", repeat)
    xp = get_xp(dev)
    rs = ResultSet("launch_latency", params={"device": dev, "repeat": repeat, "budget_s": budget_s})

    def noop() -> None:
        return None

    kw = {"repeat": repeat, "budget_s": budget_s, "warmup": 5}
    _record(rs, benchmark(noop, device="cpu", name="empty call", **kw),
            "empty Python call (the timer itself)", dev)
    a, b, c = xp.ones(1, xp.float32), xp.ones(1, xp.float32), xp.empty(1, xp.float32)
    if dev == "cpu":
        _record(rs, benchmark(operator.add, 1.0, 2.0, name="float add", **kw),
                "Python float add, no numpy (operator.add)", dev)
        _record(rs, benchmark(np.add, a, b, out=c, name="np.add 1", **kw),
                "numpy add of 1 element (ufunc call overhead)", dev)
        _record(rs, benchmark(a.sum, name="sum 1", **kw), "numpy sum of 1 element", dev)
        return rs

    cp = cupy_module()
    stream = cp.cuda.get_current_stream()
    host = np.ones(1, np.float32)

    def launch() -> None:
        cp.add(a, b, out=c)

    def launch_sync() -> None:
        cp.add(a, b, out=c)
        stream.synchronize()

    stream.synchronize()
    _record(rs, benchmark(launch, device="cpu", name="launch", **kw), RELABELLED[
            "launch a 1-element kernel (host time, no wait)"], dev)
    _torch_host_call(rs, kw)
    stream.synchronize()
    _record(rs, benchmark(launch_sync, device="cpu", name="launch+sync", **kw),
            "launch + synchronize (round trip)", dev)
    _record(rs, benchmark(stream.synchronize, device="cpu", name="sync", **kw),
            "synchronize an idle stream", dev)
    events = benchmark(cp.add, a, b, out=c, device="gpu", name="kernel", **kw)
    _record(rs, events, EVENTS_BEHIND_LEAD if events.lead_s else RELABELLED[
            "the kernel itself (GPU time, CUDA events)"], dev)
    _hardware_launch(rs, cp, calls=200, repeat=max(5, min(repeat, 50)), budget_s=budget_s)
    _record(rs, benchmark(c.set, host, device="cpu", name="h2d", **kw),
            "copy 4 bytes host→device", dev)
    _record(rs, benchmark(c.get, out=host, device="cpu", name="d2h", **kw),
            "copy 4 bytes device→host", dev)
    return rs


def _torch_host_call(rs: ResultSet, kw: dict) -> None:
    """PyTorch's host time per call of a 1-element add on the GPU (where PyTorch has CUDA)."""
    from ..torch_peer import torch_cuda_available

    if not torch_cuda_available():
        return
    import torch

    ta, tb, tc = (torch.ones(1, device="cuda") for _ in range(3))
    torch.cuda.synchronize()
    _record(rs, benchmark(torch.add, ta, tb, out=tc, device="cpu", name="torch launch", **kw),
            "PyTorch add of 1 element: host time per call, no wait (not the GPU's launch)", "gpu")
    torch.cuda.synchronize()


def _hardware_launch(rs: ResultSet, cp: Any, calls: int, repeat: int, budget_s: float | None) -> None:
    """The GPU's own launch: ``calls`` empty kernels queued behind a spinning kernel (so the host has
    queued them all before the first starts), and a CUDA graph of ``calls`` empty kernels; the device
    time between two CUDA events, per kernel."""
    mod = cp.RawModule(code=LAUNCH_SOURCE)
    empty, spin = mod.get_function("empty_kernel"), mod.get_function("spin_kernel")
    khz = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id).get("clockRate") or 2_000_000
    side = cp.cuda.Stream(non_blocking=True)
    with side:
        side.begin_capture()
        for _ in range(calls):
            empty((1,), (1,), ())
        graph = side.end_capture()
    stream = cp.cuda.get_current_stream()

    def per_kernel(use_graph: bool) -> tuple[float, float]:
        start, end = cp.cuda.Event(), cp.cuda.Event()
        spin((1,), (1,), (np.int64(khz * 1e3 * HEAD_START_S),))  # ~4 ms of work ahead of the queue
        start.record(stream)
        t0 = time.perf_counter()
        if use_graph:
            graph.launch(stream)
        else:
            for _ in range(calls):
                empty((1,), (1,), ())
        queued = time.perf_counter() - t0
        end.record(stream)
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end) / 1e3 / calls, queued

    for use_graph, what in ((False, f"GPU launch: {calls} empty kernels queued back to back, device time per "
                                    "kernel (CUDA events)"),
                            (True, f"GPU launch: a CUDA graph of {calls} empty kernels, device time per node "
                                   "(CUDA events)")):
        per_kernel(use_graph)                                       # warm-up (module load, graph upload)
        began, samples, host_bound = time.perf_counter(), [], 0
        for i in range(repeat):
            if i and budget_s is not None and time.perf_counter() - began > budget_s:
                break
            s, queued = per_kernel(use_graph)
            samples.append(s)
            host_bound += queued > HEAD_START_S
        t = Timing(np.asarray(samples), device="gpu", name=what, warmup=1, stopped_early=len(samples) < repeat,
                   budget_s=budget_s)
        _record(rs, t, what, "gpu", calls=calls, host_bound_runs=host_bound)
        if host_bound:
            rs.notes.append(f"'{what}': in {host_bound} of {len(samples)} runs the host took longer to queue "
                            f"the {calls} kernels than the GPU's head start, so those times include host time.")


@arguments(rs=_RS)
def latency_summary(rs: ResultSet) -> str:
    """An HTML table of the latency distributions: median, IQR, 5th–95th percentile."""
    rows = []
    for r in rs.records:
        s = np.asarray(r.get("samples_s") or [r["median_s"]], float) * 1e6
        p5, p95 = np.percentile(s, [5, 95])
        rows.append(f"<tr><td>{r['device'].upper()}</td><td>{r['what']}</td>"
                    f"<td>{r['median_s'] * 1e6:.2f}</td><td>{r['q25_s'] * 1e6:.2f} – {r['q75_s'] * 1e6:.2f}"
                    f"</td><td>{p5:.2f} – {p95:.2f}</td><td>{len(s)}</td></tr>")
    return ("<table><tr><th>device</th><th>operation</th><th>median µs</th><th>IQR µs</th>"
            "<th>5–95 % µs</th><th>calls</th></tr>" + "".join(rows) + "</table>")


def _host_bound_runs(rs: ResultSet, r: dict) -> int | None:
    """How many runs of a ``GPU launch:`` row ran dry (the host slower than the head start): the record's
    count, else the one its note gives (recordings made before the records kept it), else None."""
    if r.get("host_bound_runs") is not None:
        return int(r["host_bound_runs"])
    for note in rs.notes:
        m = re.match(r"'(?P<what>.+)': in (?P<k>\d+) of \d+ runs the host took longer", note)
        if m and m["what"] == r["what"]:
            return int(m["k"])
    return None


@arguments(rs=_RS)
def launch_reading(rs: ResultSet) -> list[str]:
    """Lines that set the GPU's own launch apart from the libraries' host cost per call, read off the GPU
    rows of a ``launch_latency`` result set (live or recorded); ``[]`` where it has no GPU launch rows.

    The GPU's launch is the device time per kernel of empty kernels queued back to back, and per node of
    a CUDA graph; the host's cost is CuPy's (and PyTorch's) time per call on the host clock.  Runs in which
    the host could not queue the kernels within the head start are counted and their meaning said.
    """
    gpu = [r for r in rs.records if r.get("device") == "gpu"]

    def row(start: str, has: str = "") -> dict | None:
        return next((r for r in gpu if r["what"].startswith(start) and has in r["what"]), None)

    queued, node = row("GPU launch:", "back to back"), row("GPU launch:", "CUDA graph")
    if queued is None:
        return []
    us = queued["median_s"] * 1e6
    where = rs.label if rs.source == "reference" else f"measured live on {rs.gpu_name or 'this GPU'}"
    lines = [f"GPU rows, {where}:",
             f"  the GPU's own launch (device clock, CUDA events): {us:.2f} µs per kernel queued back to back"
             + (f", {node['median_s'] * 1e6:.2f} µs per node of a CUDA graph" if node else "")]
    hosts = [(name, r) for name, r in (("CuPy", row("CuPy add of 1 element: host time")),
                                        ("PyTorch", row("PyTorch add of 1 element: host time"))) if r]
    if hosts:
        lines.append("  the libraries' cost per call (host clock, no wait): "
                     + ", ".join(f"{name} {r['median_s'] * 1e6:.2f} µs = {r['median_s'] * 1e6 / us:.1f}× "
                                 "the GPU's time per kernel" for name, r in hosts))
        name, r = hosts[0]
        lines.append(f"  so kernels launched one {name} call at a time reach the GPU every "
                     f"{r['median_s'] * 1e6:.2f} µs, and it could start one every {us:.2f} µs: for small "
                     "kernels the host sets the pace")
    trip, idle = row("launch + synchronize"), row("synchronize an idle stream")
    cupy = row("CuPy add of 1 element: host time")
    if trip and idle and cupy:
        rest = (trip["median_s"] - cupy["median_s"] - idle["median_s"]) * 1e6
        lines.append(f"  a round trip (CuPy add of 1 element, then synchronize): {trip['median_s'] * 1e6:.2f} µs"
                     + (f" = the call ({cupy['median_s'] * 1e6:.2f}) + a synchronize with nothing to wait for "
                        f"({idle['median_s'] * 1e6:.2f}) + {rest:.2f} µs for the launch to reach the GPU, the "
                        "kernel to run and its end to reach the host" if rest > 0 else
                        " (medians of separate runs: no more than the call and an idle synchronize here, so "
                        "nothing is left to read off for the way to the GPU and back)"))
    dry = _host_bound_runs(rs, queued)
    if dry:
        runs = queued.get("repeat") or len(queued.get("samples_s") or [])
        worst = max(queued.get("samples_s") or [queued["median_s"]]) * 1e6
        lines.append(f"  in {dry} of {runs} runs of the back-to-back kernels the host took longer to queue "
                     f"them than the ~{HEAD_START_S * 1e3:.0f} ms head start the GPU had: the queue ran dry, "
                     f"the GPU waited for the host, and those runs timed the host's pace (up to {worst:.1f} µs "
                     "per kernel), not the GPU's"
                     + (f"; they are fewer than half, so the median is one of the other {runs - dry} runs, the "
                        "GPU's own pace" if 2 * dry < runs else
                        "; so many that the median is the host's pace too: this row does not show the GPU's "
                        "launch"))
    return lines


@arguments(device=_DEVICE, n=Whole(hint="elements per op"),
           chain=Whole(1, 10_000, hint="the number of ops in the chain"), repeat=_REPEAT, budget_s=_BUDGET)
def async_chain(device: Any = "cpu", n: int = 2 ** 20, chain: int = 20, dtype: Any = "float32",
                repeat: int = 7, budget_s: float | None = 1.0) -> ResultSet:
    """Time a chain of ``chain`` elementwise ops three ways; a ``ResultSet`` ``"async_chain"``.

    ``mode`` of each record:

    * ``"return without waiting"`` — host time until the last call returns;
    * ``"wait once at the end"`` — the same chain, then one synchronize;
    * ``"wait after every op"`` — a synchronize after each op.

    On the CPU numpy is synchronous and the three agree.  On a GPU the first is
    just the launch cost: the work is still in the queue when the timer stops.
    """
    dev = normalize_device(device)
    n = whole_number("n", n)
    chain = whole_number("chain", chain, 1, 10_000, hint="the number of ops in the chain")
    repeat = whole_number("repeat", repeat)
    dt = validate_dtype(dtype, dev)
    if dt.kind != "f":
        raise UnsupportedDtypeError(f"dtype must be a floating type (float16, float32, float64): each op "
                                    f"multiplies by 1.0 into a preallocated output, got {dt.name}")
    require_fits(2 * int(n) * dt.itemsize, dev, what=f"two arrays of {n:,} {dt.name}")
    xp = get_xp(dev)
    x = xp.full(int(n), 0.5, dtype=dt)
    y = xp.empty_like(x)

    def sync() -> None:
        if dev == "gpu":
            cupy_module().cuda.get_current_stream().synchronize()

    def issue(each: bool) -> None:
        for _ in range(chain):
            xp.multiply(x, 1.0, out=y)
            if each:
                sync()

    def no_wait() -> float:
        t0 = time.perf_counter()
        issue(False)
        t = time.perf_counter() - t0
        sync()  # drain outside the timed region, so the next run starts from an empty queue
        return t

    def wait_end() -> float:
        t0 = time.perf_counter()
        issue(False)
        sync()
        return time.perf_counter() - t0

    def wait_each() -> float:
        t0 = time.perf_counter()
        issue(True)
        return time.perf_counter() - t0

    modes: dict[str, Callable[[], float]] = {"return without waiting": no_wait,
                                             "wait once at the end": wait_end, "wait after every op": wait_each}
    rs = ResultSet("async_chain", params={"device": dev, "n": int(n), "chain": int(chain), "dtype": dt.name,
                                         "repeat": repeat, "budget_s": budget_s})
    for mode, fn in modes.items():
        fn()  # warm-up
        began, samples = time.perf_counter(), []
        for i in range(repeat):
            if i and budget_s is not None and time.perf_counter() - began > budget_s / len(modes):
                rs.notes.append(f"'{mode}': stopped early by the time budget after {i} runs.")
                break
            samples.append(fn())
        t = Timing(np.asarray(samples), device=dev, name=mode, warmup=1,
                   stopped_early=len(samples) < repeat, budget_s=budget_s)
        rs.add_timing(t, mode=mode, n=int(n), chain=int(chain), dtype=dt.name,
                      per_op_s=t.median / chain)
    return rs


def require_transfer_buffers(sizes: list[int], memory: Sequence[str]) -> None:
    """Refuse a ``memory`` other than pageable and/or pinned, no GPU, or buffers of the largest size that
    do not fit."""
    bad = [m for m in memory if m not in ("pageable", "pinned")]
    if bad or not memory:
        raise BadInputError(f"memory must name 'pageable' and/or 'pinned', got {list(memory)!r}")
    require_gpu()
    require_fits(max(sizes), "gpu", what=f"a {max(sizes) / 2**20:.0f} MiB transfer buffer")
    require_fits(2 * max(sizes), "cpu", what=f"host buffers of {max(sizes) / 2**20:.0f} MiB")


@arguments(sizes=Wholes(lo=4, hint="byte counts of at least 4"), then=require_transfer_buffers)
def transfer_bandwidth(sizes: Sequence[int] = (2 ** 12, 2 ** 16, 2 ** 20, 2 ** 24, 2 ** 26),
                       memory: Sequence[str] = ("pageable", "pinned"), repeat: int = 5,
                       budget_s: float | None = 0.3, progress: Callable | None = None) -> ResultSet:
    """Host↔device copy bandwidth (GB/s) against size, from pageable and pinned host memory.

    Pageable memory is what ``numpy.empty`` gives; the driver first copies it into a
    pinned staging buffer, then DMAs it.  Pinned (page-locked) memory is DMA'd
    directly.  Needs a GPU (there is no host↔device copy without one).
    """
    cp = cupy_module()
    import cupyx

    rs = ResultSet("transfer_bandwidth", params={"sizes": sizes, "memory": list(memory), "repeat": repeat})
    jobs = [(m, s, d) for m in memory for s in sizes for d in ("host→device", "device→host")]
    it = progress(jobs, total=len(jobs), desc="transfers") if progress else jobs
    for m, nbytes, direction in it:
        count = nbytes // 4
        h = (cupyx.empty_pinned((count,), np.float32) if m == "pinned" else np.empty(count, np.float32))
        h[...] = 1.0
        d = cp.empty(count, cp.float32)
        stream = cp.cuda.get_current_stream()
        if direction == "host→device":
            def fn(d=d, h=h, stream=stream) -> None:
                d.set(h)
                stream.synchronize()
        else:
            def fn(d=d, h=h, stream=stream) -> None:
                d.get(out=h)
                stream.synchronize()
        t = benchmark(fn, device="cpu", warmup=2, repeat=repeat, budget_s=budget_s,
                      name=f"{direction} {m}")
        rs.add_timing(t, device="gpu", memory=m, direction=direction, nbytes=count * 4,
                      gb_per_s=count * 4 / t.median / 1e9)
    return rs
