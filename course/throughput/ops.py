"""Lesson 03, part 1: how fast one operation runs, against its size, on each device.

Every operation here is counted before it is timed: how many floating-point
operations it does (``flops``) and how many bytes it must at least read and
write (``bytes``: each input read once, each output written once).  Divide the
measured time into those counts and you get its rate in FLOP/s and GB/s, and
their ratio, the *arithmetic intensity* (FLOP per byte), places it on the
roofline (:mod:`course.throughput.roofline`).

For the CPU and the GPU the same sizes are timed; the **crossover** is the
size from which the GPU is faster per call and stays faster.  Below it the
GPU's fixed cost (launching a kernel, a few microseconds) outweighs its
throughput.

>>> r = time_op("add", 1024, repeat=3)
>>> r["op"], r["n"], r["flops"]
('add', 1024, 1024.0)
>>> rs = throughput_sweep("sum", [256, 1024], repeat=2)
>>> [rec["n"] for rec in rs.records]
[256, 1024]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..arguments import Devices, Dtype, Given, OneOf, Optional, Real, Whole, Wholes, arguments
from ..devices import get_xp, normalize_device, resolve_devices, synchronize
from ..errors import BadInputError, whole_number
from ..limits import require_fits, validate_dtype
from ..results import ResultSet, validate_references, validate_results
from ..timing import benchmark, sweep_within_budget

__all__ = ["Op", "OPS", "CPU_FLOAT16_MATMUL_MAX_N", "op_names", "get_op", "time_op", "throughput_sweep",
           "default_sizes", "Crossover", "crossover_size", "crossover", "find_crossover"]


@dataclass(frozen=True)
class Op:
    """One operation the lesson times, with its work and its compulsory memory traffic.

    ``n`` means the number of elements for elementwise ops and reductions, and the
    side of the square matrices for ``matmul``.
    """

    name: str
    kind: str
    description: str
    size_meaning: str
    flops: Callable[[int], float]
    bytes: Callable[[int, int], float]       # (n, itemsize) -> bytes read + written
    elements: Callable[[int], float]         # outputs produced (for elements/s)
    memory: Callable[[int, int], int]        # bytes the arrays occupy

    def __post_init__(self):
        if not isinstance(self.name, str) or not all(callable(f) for f in (self.flops, self.bytes, self.elements,
                                                                           self.memory)):
            raise BadInputError(f"an Op has a name and four counting functions (flops, bytes, elements, memory), "
                                f"got {self.name!r:.40} and {[type(f).__name__ for f in (self.flops, self.bytes)]}")

    def intensity(self, n: int, itemsize: int = 4) -> float:
        """Arithmetic intensity in FLOP per byte of compulsory traffic."""
        return self.flops(n) / self.bytes(n, itemsize)


OPS: dict[str, Op] = {
    "add": Op("add", "elementwise", "c = a + b (one add per element; read a, b, write c)", "elements",
              flops=lambda n: float(n), bytes=lambda n, s: 3.0 * n * s, elements=lambda n: float(n),
              memory=lambda n, s: 3 * n * s),
    "relu": Op("relu", "elementwise", "y = max(x, 0) (one comparison per element; read x, write y)",
               "elements", flops=lambda n: float(n), bytes=lambda n, s: 2.0 * n * s,
               elements=lambda n: float(n), memory=lambda n, s: 2 * n * s),
    "sum": Op("sum", "reduction", "s = x.sum() (n - 1 adds; read x once)", "elements",
              flops=lambda n: float(max(n - 1, 1)), bytes=lambda n, s: float(n * s + s),
              elements=lambda n: float(n), memory=lambda n, s: n * s),
    "matmul": Op("matmul", "matmul", "C = A @ B for n×n matrices (2n³ flops; read A, B, write C)",
                 "matrix side n", flops=lambda n: 2.0 * n ** 3, bytes=lambda n, s: 3.0 * n * n * s,
                 elements=lambda n: float(n * n), memory=lambda n, s: 3 * n * n * s),
}


#: Beyond this size a CPU float16 matrix product (emulated by numpy, no BLAS) takes many seconds.
CPU_FLOAT16_MATMUL_MAX_N = 512


def op_names() -> list[str]:
    """Names of the operations :func:`time_op` knows."""
    return list(OPS)


def validate_op(op: Any) -> str | Op:
    """``op`` if it names one of :data:`OPS` (or is an :class:`Op`); else a clear error."""
    if not isinstance(op, Op) and (not isinstance(op, str) or op not in OPS):
        raise BadInputError(f"unknown operation {op!r:.80}; choose one of {', '.join(OPS)}")
    return op


def _results(rs: Any) -> ResultSet:
    """``rs`` if it is a ResultSet (:func:`course.results.validate_results`)."""
    return validate_results(rs)


def _references(sets: Any) -> list[ResultSet]:
    """``sets`` as a list of ResultSets (:func:`course.results.validate_references`)."""
    return validate_references(sets)


def _validate_where(where: Any) -> dict | None:
    """None, or the record fields to select on (``{"dtype": "float32"}``)."""
    if where is not None and (not isinstance(where, dict) or not all(isinstance(k, str) for k in where)):
        raise BadInputError(f"where must be None or a dict of record fields, e.g. {{'dtype': 'float32'}}, got "
                            f"{where!r:.80}")
    return where


#: The rules the timing functions share.
_REPEAT = Whole(hint="timed calls")
_BUDGET = Optional(Real(above=0, hint="seconds of measuring, or None"))


@arguments(op=Given(validate_op))
def get_op(op: str | Op) -> Op:
    """Look an operation up by name; a clear error for an unknown one."""
    return op if isinstance(op, Op) else OPS[op]


@arguments(op=Given(validate_op), quick=OneOf(True, False))
def default_sizes(op: str | Op, quick: bool = True) -> list[int]:
    """Sizes worth sweeping for ``op``: powers of two from tiny to a few MB (quick) or ~1 GB."""
    o = get_op(op)
    if o.kind == "matmul":
        return [2 ** k for k in range(2, 11 if quick else 14)]
    return [2 ** k for k in range(0, 23 if quick else 28, 2)]


def _prepare(o: Op, xp, n: int, dt: np.dtype) -> tuple[Callable, tuple, dict]:
    """Arrays on the device and the call to time (outputs preallocated: no allocation is timed)."""
    if o.name == "add":
        a, b, c = xp.full(n, 0.5, dtype=dt), xp.full(n, 0.25, dtype=dt), xp.empty(n, dtype=dt)
        return xp.add, (a, b), {"out": c}
    if o.name == "relu":
        x, y = xp.full(n, -0.5, dtype=dt), xp.empty(n, dtype=dt)
        x[::2] = 0.5
        return xp.maximum, (x, 0), {"out": y}
    if o.name == "sum":
        return xp.sum, (xp.full(n, 0.5, dtype=dt),), {}
    if o.name == "matmul":
        a = xp.full((n, n), 0.5, dtype=dt)
        b = xp.full((n, n), 0.25, dtype=dt)
        return xp.matmul, (a, b), {"out": xp.empty((n, n), dtype=dt)}
    raise BadInputError(f"no implementation for {o.name!r}")  # pragma: no cover


def _validate_emulated(o: Op, n: int, dt: np.dtype, dev: str) -> None:
    if o.kind == "matmul" and dev == "cpu" and dt.name == "float16" and n > CPU_FLOAT16_MATMUL_MAX_N:
        raise BadInputError(
            f"matmul n={n:,} in float16 on the CPU: numpy has no BLAS for float16 and emulates it at well under "
            f"1 GFLOP/s, so one product would take about {2.0 * n ** 3 / 0.5e9:,.0f} s. Choose n <= "
            f"{CPU_FLOAT16_MATMUL_MAX_N} for float16, or float32.")


@arguments(op=Given(validate_op), n=Whole(hint="the size of the operation"), device=Given(normalize_device),
           dtype=Dtype(device="device"), repeat=_REPEAT, warmup=Whole(0, 1000, hint="untimed calls first"),
           budget_s=_BUDGET)
def time_op(op: str | Op, n: int, dtype: Any = "float32", device: Any = "cpu", repeat: int = 5,
            warmup: int = 1, budget_s: float | None = 0.25) -> dict:
    """Time one operation at size ``n`` on ``device``; return a record with its rates.

    Returns
    -------
    dict : ``op, n, dtype, device, median_s, q25_s, q75_s, min_s, repeat, stopped_early``,
        the counts ``flops`` and ``bytes``, and the rates ``gflops``, ``gb_per_s``,
        ``elements_per_s`` and the ``intensity`` (FLOP/byte).

    Examples
    --------
    >>> r = time_op("matmul", 32, repeat=2)
    >>> r["intensity"] > time_op("add", 32, repeat=2)["intensity"]
    True
    """
    o = get_op(op)
    n = whole_number("n", n, hint="the size of the operation")
    dev = normalize_device(device)
    dt = validate_dtype(dtype, dev)
    require_fits(o.memory(n, dt.itemsize), dev, what=f"{o.name} at n={n:,} in {dt.name}")
    _validate_emulated(o, n, dt, dev)
    xp = get_xp(dev)
    fn, args, kwargs = _prepare(o, xp, n, dt)
    synchronize(dev)
    t = benchmark(fn, *args, device=dev, warmup=warmup, repeat=repeat, budget_s=budget_s,
                  name=f"{o.name} n={n}", **kwargs)
    flops, nbytes = o.flops(n), o.bytes(n, dt.itemsize)
    med = max(t.median, 1e-12)
    return t.as_record() | {
        "op": o.name, "kind": o.kind, "n": n, "dtype": dt.name, "flops": flops, "bytes": nbytes,
        "gflops": flops / med / 1e9, "gb_per_s": nbytes / med / 1e9,
        "elements_per_s": o.elements(n) / med, "intensity": flops / nbytes,
    }


@arguments(op=Given(validate_op), sizes=Optional(Wholes(min_len=0, hint="each size is an operation size")),
           dtype=Dtype(), devices=Devices(), repeat=_REPEAT, budget_s=_BUDGET,
           total_budget_s=Optional(Real(above=0, hint="seconds the whole sweep may take, or None")))
def throughput_sweep(op: str | Op = "add", sizes: Sequence[int] | None = None, dtype: Any = "float32",
                     devices: Sequence[Any] | None = None, repeat: int = 5, budget_s: float | None = 0.2,
                     total_budget_s: float | None = None,
                     progress: Callable | None = None) -> ResultSet:
    """Time ``op`` at every size on every device: a ``ResultSet`` ``"throughput_sweep"``.

    Parameters
    ----------
    op : one of :data:`OPS` (``"add"``, ``"relu"``, ``"sum"``, ``"matmul"``).
    sizes : sizes to time (default :func:`default_sizes`).  Checked up front: an empty
        list, a non-positive size or arrays that do not fit give a clear error before
        anything is timed.
    devices : default the CPU plus the GPU when one answers.
    budget_s : seconds of measuring per point; ``total_budget_s``: for the whole sweep.
        When the total budget runs out the sweep stops, keeps what it measured and says so
        in ``rs.notes`` and ``rs.params["stopped_early"]``.
    progress : a tqdm-like wrapper (``course.widgets.progress``) for a progress bar.

    Examples
    --------
    >>> rs = throughput_sweep("add", [16, 64], repeat=2)
    >>> [r["n"] for r in rs.records]
    [16, 64]
    """
    o = get_op(op)
    if sizes is None:
        sizes = default_sizes(o)
    sizes = [whole_number("sizes", n, hint="each size is an operation size") for n in sizes]
    if not sizes:
        raise BadInputError(f"the size range for {o.name!r} is empty: give at least one size "
                            "(for example [2**10, 2**20])")
    if total_budget_s is not None and not total_budget_s > 0:
        raise BadInputError(f"total_budget_s must be a positive number of seconds or None, got {total_budget_s!r}")
    devs = resolve_devices(devices)
    dt = validate_dtype(dtype, "cpu")
    for d in devs:
        validate_dtype(dt, d)
        require_fits(o.memory(max(sizes), dt.itemsize), d, what=f"{o.name} at n={max(sizes):,} in {dt.name}")
        _validate_emulated(o, max(sizes), dt, d)
    rs = ResultSet("throughput_sweep", params={"op": o.name, "sizes": sizes, "dtype": dt.name,
                                              "devices": devs, "repeat": repeat, "budget_s": budget_s,
                                              "total_budget_s": total_budget_s, "stopped_early": False})
    jobs = [(d, n) for n in sizes for d in devs]

    def not_measured(rest: list) -> str:
        return "sizes not measured: " + ", ".join(f"{m:,}" for m in sorted({m for _, m in rest}))

    for d, n in sweep_within_budget(jobs, rs, total_budget_s, progress, f"{o.name} sweep", not_measured):
        rs.add(**time_op(o, n, dt, d, repeat=repeat, budget_s=budget_s))
    return rs


# ------------------------------------------------------------------------- crossover

@dataclass
class Crossover:
    """Where the GPU starts to beat the CPU per call.

    Attributes
    ----------
    n : the crossover size (interpolated in log-log between measured sizes), or None.
    status : ``"crossed"``, ``"gpu_always_faster"`` (faster at every size measured),
        ``"cpu_always_faster"``, or ``"no_data"`` (no GPU and no reference).
    message : one sentence for a learner.
    source : ``"live"`` or the reference's "recorded on ..." label.
    """

    n: float | None
    status: str
    message: str
    source: str = ""

    def __post_init__(self):
        if self.status not in CROSSOVER_STATUSES or not isinstance(self.message, str):
            raise BadInputError(f"a Crossover's status is one of {CROSSOVER_STATUSES} and its message a sentence, got "
                                f"{self.status!r:.40}")


#: What a :class:`Crossover` found.
CROSSOVER_STATUSES = ("crossed", "gpu_always_faster", "cpu_always_faster", "no_data")


def _validate_curve(v: Any, zero: bool = False) -> np.ndarray:
    """One device's sizes or times: a 1-D list of finite positive numbers (``zero``: or 0, a time too short for the
    clock), 100,000 at most."""
    if isinstance(v, (str, bytes)) or not hasattr(v, "__len__") or len(v) > 100_000:
        raise BadInputError(f"sizes and times must be lists of positive numbers, got {type(v).__name__}"
                            + (f" of {len(v):,}" if hasattr(v, "__len__") else ""))
    try:
        a = np.asarray(v, dtype=float)
    except (TypeError, ValueError):
        a = None
    if a is None or a.ndim != 1 or not np.all(np.isfinite(a)) or not np.all(a >= 0 if zero else a > 0):
        raise BadInputError(f"sizes and times must be lists of finite positive numbers, got {v!r:.80}")
    return a


def _same_lengths(cpu_n: np.ndarray, cpu_t: np.ndarray, gpu_n: np.ndarray, gpu_t: np.ndarray) -> None:
    if len(cpu_n) != len(cpu_t) or len(gpu_n) != len(gpu_t):
        raise BadInputError(f"each size needs its time: got {len(cpu_n)} CPU sizes for {len(cpu_t)} times and "
                            f"{len(gpu_n)} GPU sizes for {len(gpu_t)} times")


@arguments(cpu_n=Given(_validate_curve), cpu_t=Given(_validate_curve, zero=True), gpu_n=Given(_validate_curve),
           gpu_t=Given(_validate_curve, zero=True), then=_same_lengths)
def crossover_size(cpu_n: Sequence[float], cpu_t: Sequence[float], gpu_n: Sequence[float],
                   gpu_t: Sequence[float]) -> tuple[float | None, str]:
    """The size from which the GPU's time per call stays below the CPU's.

    Only sizes measured on both devices count.  Between the last size where the CPU
    wins and the first where the GPU wins for good, the crossing is interpolated on
    log scales.  Returns ``(n, status)`` with a status as in :class:`Crossover`.

    >>> n, status = crossover_size([1, 10, 100], [1, 10, 100], [1, 10, 100], [5, 10, 20])
    >>> round(n), status
    (10, 'crossed')
    """
    cn, ct = np.asarray(cpu_n, float), np.asarray(cpu_t, float)
    gn, gt = np.asarray(gpu_n, float), np.asarray(gpu_t, float)
    common = np.intersect1d(cn, gn)
    if not len(common):
        return None, "no_data"
    c = np.array([ct[cn == v][0] for v in common])
    g = np.array([gt[gn == v][0] for v in common])
    gpu_wins = g < c
    if not gpu_wins[-1]:
        return None, "cpu_always_faster"
    i = len(common) - 1
    while i > 0 and gpu_wins[i - 1]:
        i -= 1
    if i == 0:
        return float(common[0]), "gpu_always_faster"
    # log(c/g) goes from <= 0 at common[i-1] to > 0 at common[i]: find its zero.
    r0, r1 = math.log(c[i - 1] / g[i - 1]), math.log(c[i] / g[i])
    x0, x1 = math.log(common[i - 1]), math.log(common[i])
    frac = 0.0 if r1 == r0 else -r0 / (r1 - r0)
    return float(math.exp(x0 + frac * (x1 - x0))), "crossed"


def validate_field(y: Any) -> str:
    if not isinstance(y, str) or not y:
        raise BadInputError(f"y must name a record field, e.g. 'median_s', got {y!r:.60}")
    return y


@arguments(rs=Given(_results), where=Given(_validate_where), y=Given(validate_field))
def crossover(rs: ResultSet, where: dict | None = None, y: str = "median_s") -> Crossover:
    """The crossover in one result set (needs both CPU and GPU records)."""
    where = where or {}
    cpu = sorted((r["n"], r[y]) for r in rs.select(device="cpu", **where))
    gpu = sorted((r["n"], r[y]) for r in rs.select(device="gpu", **where))
    src = "live" if rs.source != "reference" else rs.label
    if not cpu or not gpu:
        return Crossover(None, "no_data", "These results do not have both CPU and GPU timings.", src)
    n, status = crossover_size([a for a, _ in cpu], [b for _, b in cpu], [a for a, _ in gpu],
                               [b for _, b in gpu])
    who = f"{rs.gpu_name or 'the GPU'} vs {rs.cpu_name}"
    msgs = {
        "crossed": f"{who}: the GPU is faster per call from about n = {n:,.0f} on",
        "gpu_always_faster": f"{who}: the GPU was faster at every size measured (from n = {n:,.0f})",
        "cpu_always_faster": f"{who}: the CPU was faster at every size measured, up to the largest",
        "no_data": f"{who}: no size was measured on both devices",
    }
    return Crossover(n, status, msgs[status] + (f" ({src})." if src != "live" else " (measured live)."), src)


@arguments(live=Optional(Given(_results)), references=Given(_references), where=Given(_validate_where))
def find_crossover(live: ResultSet | None, references: Sequence[ResultSet] = (),
                   where: dict | None = None) -> Crossover:
    """The crossover from live data when it has a GPU, else from a reference, else says why not."""
    for rs in ([live] if live is not None else []) + list(references):
        if rs.select(device="gpu", **(where or {})):
            return crossover(rs, where)
    return Crossover(None, "no_data",
                     "No GPU answered here and no reference GPU results are recorded yet, so the "
                     "crossover size cannot be measured: run this on a GPU (Colab: Runtime > Change "
                     "runtime type > GPU), or record references with `python -m course report "
                     "--record-reference` on a GPU machine.")
