"""Timing the recurrence: loop against scan, diagonal against dense, CPU against GPU.

Every measurement goes through :func:`course.timing.benchmark` (warm-up, repeats, median; CUDA
events on a GPU).  The implementations, by name:

* ``"loop"``: diagonal, :func:`course.recurrences.linear.recurrence_loop` (T dependent steps,
  each one vectorized over the n channels); dense, lesson 05's
  :func:`course.bppsa.backprop_sequential` (T dependent n×n matrix-vector products);
* ``"scan"``: diagonal, :func:`course.recurrences.linear.recurrence_scan` (the Blelloch scan with
  the affine operator); dense, lesson 05's :func:`course.bppsa.backprop_scan` (n×n products);
* ``"torch loop"`` (diagonal): the same loop in PyTorch, timed by :func:`course.torch_peer.benchmark_torch`;
* ``"numba chunked"`` and ``"numba per-channel"`` (diagonal, GPU only): the hand-written kernels
  of :mod:`course.recurrences.kernels` with chunks of 64 steps, or one thread per channel: the
  *unstaged* rung, each step waiting on its own global loads;
* ``"staged per-channel"`` (diagonal, GPU only): the sequential loop a GPU programmer writes, one thread
  per channel with ``a`` and ``b`` loaded a tile ahead of the FMA chain
  (:func:`course.recurrences.kernels.staged_diagonal_scan`, CUDA C): the sequential baseline the
  scans are held to (:func:`fastest_loop` picks it wherever it was measured and is the fastest).

>>> r = time_recurrence("diagonal", "scan", T=64, n=8, repeat=2)
>>> r["median_s"] > 0 and r["method"]
'scan'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..arguments import Dtype, Given, OneOf, Optional, Real, Whole, arguments
from ..bppsa.algorithm import backprop_scan, backprop_sequential
from ..devices import get_xp, normalize_device, resolve_devices, to_numpy
from ..errors import BadInputError, GPUUnavailableError, whole_number
from ..limits import require_fits
from ..results import ResultSet, validate_results
from ..timing import benchmark, sweep_within_budget
from ..torch_peer import benchmark_torch, torch_device
from .linear import recurrence_loop, recurrence_scan
from .work import KINDS, work_counts

__all__ = ["METHODS", "SEQUENTIAL", "LOOP_MAX_T", "DENSE_SCAN_MAX_FLOPS", "recurrence_input", "recurrence_function",
           "time_recurrence", "recurrence_sweep", "crossover", "speedups", "fastest_loop", "chunked_kernel_rate"]

#: Implementations per (device, kind), in the order the plots list them.
METHODS = {("cpu", "diagonal"): ("loop", "scan", "torch loop"),
           ("cpu", "dense"): ("loop", "scan"),
           ("gpu", "diagonal"): ("loop", "scan", "staged per-channel", "numba per-channel", "numba chunked",
                                 "torch loop"),
           ("gpu", "dense"): ("loop", "scan")}
#: The sequential implementations, each walking the T steps in order: the staged CUDA C kernel and the unstaged
#: numba kernel (one thread per channel, one launch), PyTorch's loop and the Python loop (launches per step).
SEQUENTIAL = ("staged per-channel", "numba per-channel", "torch loop", "loop")
#: Every loop over time (Python's, and PyTorch's) is timed only up to this T: each step is a few
#: library calls, so past it one call takes seconds while the scans take milliseconds.
LOOP_MAX_T = 2**14
#: The dense scan is timed only up to this many flops per call on each device (2n³ per combine).
DENSE_SCAN_MAX_FLOPS = {"cpu": 2e9, "gpu": 1e12}


#: Every implementation's name, on any device and kind.
ALL_METHODS = tuple(sorted({m for ms in METHODS.values() for m in ms}))

_T = Whole(hint="steps of the recurrence")
_N = Whole(hint="the channels")
_KIND = OneOf(*KINDS)
_METHOD = OneOf(*ALL_METHODS)
_RS = Given(validate_results, what="rs")
_DEVICE = Given(normalize_device)


def _validate_inputs(inputs: Any) -> tuple:
    """``inputs`` as the pair :func:`recurrence_input` returns, ``(a, b)`` or ``(jacobians, grad)``."""
    if not isinstance(inputs, (tuple, list)) or len(inputs) != 2 or not all(hasattr(x, "shape") for x in inputs):
        raise BadInputError(f"inputs must be the pair of arrays recurrence_input(T, n, kind) returns, got "
                            f"{type(inputs).__name__}")
    return tuple(inputs)


def _require_method(kind: str, method: str, device: str) -> None:
    if method not in METHODS[(device, kind)]:
        raise BadInputError(f"no {kind} implementation {method!r} on the {device.upper()}; choose one of "
                            f"{list(METHODS[(device, kind)])}.")


@arguments(T=_T, n=_N, kind=_KIND, device=_DEVICE, dtype=Dtype(device="device", floating=True),
           seed=Whole(0, hint="a whole number such as 0"))
def recurrence_input(T: int, n: int, kind: str = "diagonal", dtype: Any = "float32",
                     device: Any = "cpu", seed: int = 0) -> tuple[Any, Any]:
    """Random inputs: ``(a, b)`` of shape (T, n) for a diagonal recurrence, with a in [0.5, 1)
    (slow decays, as trained state-space models have); ``(jacobians, grad)`` of shapes
    (T, n, n) and (n,) for the dense one, scaled so that long products stay bounded.

    >>> [x.shape for x in recurrence_input(5, 3, "dense")]
    [(5, 3, 3), (3,)]
    """
    dev, dt = device, dtype
    per_step = n * n if kind == "dense" else 2 * n
    require_fits(4 * T * per_step * dt.itemsize, dev, what=f"a {kind} recurrence of T = {T:,}, n = {n}")
    rng = np.random.default_rng(seed)
    xp = get_xp(dev)
    if kind == "diagonal":
        a, b = rng.uniform(0.5, 1.0, (T, n)), rng.normal(size=(T, n))
        return xp.asarray(a, dtype=dt), xp.asarray(b, dtype=dt)
    J = rng.normal(0, 1 / np.sqrt(n), (T, n, n))
    return xp.asarray(J, dtype=dt), xp.asarray(rng.normal(size=n), dtype=dt)


def _torch_loop(a, b, dev: str) -> Callable[[], Any]:
    """The loop in PyTorch on ``dev`` ("cpu" or "cuda"): the same steps, PyTorch's per-call overhead."""
    import torch

    ta, tb = (torch.as_tensor(to_numpy(x), device=dev) for x in (a, b))

    def run():
        h, out = torch.zeros_like(tb[0]), torch.empty_like(tb)
        for t in range(tb.shape[0]):
            h = ta[t] * h + tb[t]
            out[t] = h
        return out
    return run


@arguments(kind=_KIND, method=_METHOD, inputs=Given(_validate_inputs), device=_DEVICE, then=_require_method)
def recurrence_function(kind: str, method: str, inputs: tuple, device: Any = "cpu") -> Callable[[], Any]:
    """A no-argument function that runs one implementation on prepared ``inputs``."""
    dev = device
    x, y = inputs
    if kind == "dense":
        fn = backprop_sequential if method == "loop" else backprop_scan
        return lambda: fn(x, y)
    if method == "loop":
        return lambda: recurrence_loop(x, y)
    if method == "scan":
        return lambda: recurrence_scan(x, y)
    if method == "torch loop":
        return _torch_loop(x, y, torch_device(dev))      # a clear error without PyTorch (or its GPU)
    from .kernels import diagonal_scan, kernels_unavailable_reason, staged_diagonal_scan

    if method == "staged per-channel":                   # CUDA C through CuPy: needs no numba
        out = get_xp(dev).empty_like(y)
        return lambda: staged_diagonal_scan(x, y, out=out)
    if dev != "gpu" or kernels_unavailable_reason():
        raise GPUUnavailableError(f"the numba kernels are timed on a GPU only: "
                                  f"{kernels_unavailable_reason() or 'this is the CPU'}")
    chunk = 64 if method == "numba chunked" else int(x.shape[0])
    return lambda: diagonal_scan(x, y, chunk=chunk)


@arguments(kind=_KIND, method=_METHOD, T=_T, n=_N, device=_DEVICE, dtype=Dtype(device="device", floating=True),
           repeat=Whole(hint="timed runs"), budget_s=Optional(Real(above=0, hint="seconds the timing may take")),
           then=_require_method)
def time_recurrence(kind: str, method: str, T: int, n: int, device: Any = "cpu", dtype: Any = "float32",
                    repeat: int = 5, budget_s: float | None = 0.5) -> dict:
    """Time one implementation at one (T, n): a record (:meth:`course.timing.Timing.as_record`) with
    the kind, method, T, n, dtype and the counted work ratio.  A clear error for a combination that
    cannot run."""
    dev = device
    if "loop" in method and T > LOOP_MAX_T:
        what = "PyTorch loop" if method == "torch loop" else "Python loop"
        raise BadInputError(f"the {what} is timed only up to T = {LOOP_MAX_T:,} (one call past it takes "
                            f"seconds); got T = {T:,}. Choose a smaller T, or a scan.")
    if kind == "dense" and method == "scan":
        flops = work_counts(T, n, "dense")["flops_scan"]
        if flops > DENSE_SCAN_MAX_FLOPS[dev]:
            raise BadInputError(f"the dense scan at T = {T:,}, n = {n} needs {flops:.2g} flops per call; "
                                f"it is timed only up to {DENSE_SCAN_MAX_FLOPS[dev]:.0g} on the {dev.upper()}.")
    fn = recurrence_function(kind, method, recurrence_input(T, n, kind, dtype, dev), dev)
    timer = benchmark_torch if method == "torch loop" else benchmark    # PyTorch: events on its own stream
    t = timer(fn, device=dev, warmup=1, repeat=repeat, budget_s=budget_s, name=f"{kind} {method} T={T} n={n}")
    w = work_counts(T, n, kind, np.dtype(dtype).itemsize)
    return t.as_record(kind=kind, method=method, T=T, n=n, dtype=np.dtype(dtype).name,
                       work_ratio=w["work_ratio"], steps_scan=w["steps_scan"])


def recurrence_sweep(Ts: Sequence[int], ns: Sequence[int] = (16,), kinds: Sequence[str] = KINDS,
                     methods: Sequence[str] | None = None, devices: Sequence[str] | None = None,
                     dtype: Any = "float32", repeat: int = 5, budget_s: float | None = 0.3,
                     total_budget_s: float | None = None, progress: Callable | None = None) -> ResultSet:
    """Time every implementation at each (T, n) on each device; each record carries the work ratio.

    Combinations that cannot run here (no PyTorch, no GPU for the kernels, a Python loop past
    :data:`LOOP_MAX_T`) are skipped and listed in ``notes``.

    >>> rs = recurrence_sweep([32], [4], kinds=["diagonal"], methods=["loop", "scan"], repeat=2)
    >>> sorted(r["method"] for r in rs.records)
    ['loop', 'scan']
    """
    Ts = [whole_number("Ts", T, hint="each is a number of steps") for T in Ts]
    ns = [whole_number("ns", n, hint="each is a number of channels") for n in ns]
    devs = resolve_devices(devices or None)
    if isinstance(kinds, str) or not kinds or not all(isinstance(k, str) and k in KINDS for k in kinds):
        raise BadInputError(f"kinds must be a list of recurrence kinds, each one of {list(KINDS)}; got {kinds!r}")
    known = sorted({m for ms in METHODS.values() for m in ms})
    if methods is not None and (isinstance(methods, str) or not all(m in known for m in methods)):
        raise BadInputError(f"methods must be a list of methods, each one of {known}; got {methods!r}")
    dt = np.dtype(dtype)
    rs = ResultSet("recurrence_sweep", params={"Ts": Ts, "ns": ns,
                                               "kinds": list(kinds), "dtype": dt.name, "devices": devs,
                                               "repeat": repeat})
    jobs = [(d, k, m, int(T), int(n)) for d in devs for k in kinds for m in METHODS[(d, k)]
            if methods is None or m in methods for n in ns for T in Ts]
    for dev, kind, method, T, n in sweep_within_budget(jobs, rs, total_budget_s, progress, "recurrences"):
        try:
            rs.add(**time_recurrence(kind, method, T, n, dev, dt, repeat=repeat, budget_s=budget_s))
        except (BadInputError, GPUUnavailableError) as exc:
            rs.notes.append(f"{dev} {kind} {method} T={T} n={n}: skipped ({exc})")
    return rs


@arguments(rs=_RS, device=_DEVICE, kind=_KIND, n=_N, method=_METHOD, over=_METHOD)
def crossover(rs: ResultSet, device: str, kind: str, n: int, method: str = "scan",
              over: str = "loop") -> int | None:
    """The smallest measured T from which ``method`` is faster than ``over`` at every larger T, or None.

    >>> rs = ResultSet("demo")
    >>> for T, loop, scan in [(8, 1, 2), (64, 4, 3), (512, 30, 5)]:
    ...     rs.add(device="cpu", kind="diagonal", n=4, T=T, method="loop", median_s=loop)
    ...     rs.add(device="cpu", kind="diagonal", n=4, T=T, method="scan", median_s=scan)
    >>> crossover(rs, "cpu", "diagonal", 4)
    64
    """
    a = {r["T"]: r["median_s"] for r in rs.select(device=device, kind=kind, n=n, method=method)}
    b = {r["T"]: r["median_s"] for r in rs.select(device=device, kind=kind, n=n, method=over)}
    Ts = sorted(set(a) & set(b))
    best = None
    for T in reversed(Ts):
        if a[T] < b[T]:
            best = T
        else:
            break
    return best


@arguments(rs=_RS, device=_DEVICE, kind=_KIND, n=_N, method=_METHOD, over=_METHOD)
def speedups(rs: ResultSet, device: str, kind: str, n: int, method: str = "scan",
             over: str = "loop") -> tuple[list[int], list[float]]:
    """(the T measured for both, time of ``over`` / time of ``method`` at each): above 1, ``method`` is faster.

    >>> rs = ResultSet("demo")
    >>> for T, loop, scan in [(8, 1, 2), (64, 6, 3)]:
    ...     rs.add(device="gpu", kind="diagonal", n=4, T=T, method="numba per-channel", median_s=loop)
    ...     rs.add(device="gpu", kind="diagonal", n=4, T=T, method="scan", median_s=scan)
    >>> speedups(rs, "gpu", "diagonal", 4, over="numba per-channel")
    ([8, 64], [0.5, 2.0])
    """
    a = {r["T"]: r["median_s"] for r in rs.select(device=device, kind=kind, n=n, method=method)}
    b = {r["T"]: r["median_s"] for r in rs.select(device=device, kind=kind, n=n, method=over)}
    Ts = sorted(T for T in set(a) & set(b) if a[T] > 0)
    return Ts, [b[T] / a[T] for T in Ts]


@arguments(rs=_RS, device=_DEVICE, kind=_KIND, n=_N)
def fastest_loop(rs: ResultSet, device: str, kind: str, n: int) -> str | None:
    """The sequential implementation (:data:`SEQUENTIAL`) that was the fastest at every T where two or more of
    them were measured; the only one measured, if just one was; None where the fastest changes with T.

    >>> rs = ResultSet("demo")
    >>> for m, s in [("loop", 2.0), ("numba per-channel", 0.1)]:
    ...     rs.add(device="gpu", kind="diagonal", n=4, T=64, method=m, median_s=s)
    >>> fastest_loop(rs, "gpu", "diagonal", 4)
    'numba per-channel'
    """
    times = {m: {r["T"]: r["median_s"] for r in rs.select(device=device, kind=kind, n=n, method=m)} for m in SEQUENTIAL}
    times = {m: t for m, t in times.items() if t}
    if len(times) == 1:
        return next(iter(times))
    shared = {T for t in times.values() for T in t if sum(T in u for u in times.values()) > 1}
    winners = {min((t[T], m) for m, t in times.items() if T in t)[1] for T in shared}
    return winners.pop() if len(winners) == 1 else None


@arguments(rs=_RS, device=_DEVICE, n=_N, T=Optional(_T))
def chunked_kernel_rate(rs: ResultSet, device: str, n: int, T: int | None = None) -> dict | None:
    """The chunked kernel's measured time at ``T`` (the largest measured by default) with what it moved.

    Returns ``{"T", "n", "median_s", "bytes", "bytes_per_s", "plan"}`` (``plan`` is
    :func:`course.recurrences.kernels.chunk_plan` for the chunk of 64 the timings use), or None where the
    result set holds no ``"numba chunked"`` record for that device and n.

    >>> rs = ResultSet("demo")
    >>> rs.add(device="gpu", kind="diagonal", n=16, T=1024, method="numba chunked", median_s=1e-4)
    >>> r = chunked_kernel_rate(rs, "gpu", 16)
    >>> r["bytes"], round(r["bytes_per_s"] / 1e9, 2)
    (333824, 3.34)
    """
    from .kernels import chunk_plan

    recs = {r["T"]: r for r in rs.select(device=device, kind="diagonal", n=n, method="numba chunked")}
    if not recs or (T is not None and T not in recs):
        return None
    r = recs[max(recs) if T is None else T]
    plan = chunk_plan(T=r["T"], n=n, chunk=64)
    return {"T": r["T"], "n": n, "median_s": r["median_s"], "bytes": plan["bytes"],
            "bytes_per_s": plan["bytes"] / r["median_s"], "plan": plan}
