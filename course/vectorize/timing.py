"""Lesson 02: time every rung of the elementwise ladder, check each against numpy.

:func:`ladder` runs one operation at each rung (:mod:`course.vectorize`) on the
same input, checks that every rung's answer equals numpy's, and records time,
elements per second, effective bandwidth and its fraction of the copy
bandwidth measured in the same run (:func:`course.hardware.copy_bandwidth`).

The pure-Python rungs are slow by design: beyond ``loop_max`` elements they are
timed on the first ``loop_max`` elements only (``n_timed`` says so) and compared
per element, never extrapolated into an invented total.

:func:`relu_bandwidth` is the lesson's headline measurement: ReLU with ``out=``
against ReLU that allocates its result, both as a fraction of the copy limit.

>>> rs = ladder("relu", n=1000, rungs=("loop", "numpy"), copy=False)
>>> [r["agrees"] for r in rs.records]
[True, True]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..cpu import cpu_info
from ..devices import get_xp, normalize_device, resolve_devices, to_device, to_numpy
from ..errors import BadInputError, whole_number
from ..hardware.machine import copy_bandwidth
from ..limits import validate_dtype
from ..results import ResultSet
from ..timing import Timing, benchmark
from .rungs import (
    CPU_RUNGS,
    GPU_RUNGS,
    OPS,
    RUNG_INFO,
    RUNGS,
    bytes_moved,
    elementwise,
    loop_elementwise,
    random_input,
    tolerance,
)

__all__ = ["ladder", "relu_bandwidth", "agree"]

_SLOW = ("loop", "lanes")


#: How many elements (from the start) each rung is checked on against the pure-Python loop.
ORACLE_MAX = 2**14


def agree(result: Any, reference: np.ndarray, dtype: Any) -> tuple[bool, float]:
    """(equal within the dtype's tolerance, largest absolute difference)."""
    got = to_numpy(result).astype(np.float64)
    ref = np.asarray(reference, dtype=np.float64)
    if got.shape != ref.shape:
        return False, float("inf")
    diff = float(np.max(np.abs(got - ref))) if ref.size else 0.0
    return bool(np.allclose(got, ref, **tolerance(dtype))), diff


def ladder(op: str = "relu", n: int = 2**16, dtype: Any = "float32", devices: Sequence[str] | None = None,
           rungs: Sequence[str] | None = None, lanes: int | None = None, workers: int | None = None,
           loop_max: int = 2**15, budget_s: float = 0.15, repeat: int = 5, copy: bool = True,
           seed: int = 0, progress: Callable | None = None) -> ResultSet:
    """Time ``op`` at every rung on the same ``n`` random values; check each against the Python loop.

    Parameters
    ----------
    op : ``"relu"``, ``"sigmoid"`` or ``"affine_relu"``.
    n, dtype : input size and float dtype.
    devices : default (None): the CPU, plus the GPU when one answers, as every sweep; ``("cpu",)`` for
        the CPU alone.  Naming ``"gpu"`` without a GPU raises
        :class:`~course.errors.GPUUnavailableError` saying what to do.
    rungs : which rungs (default: the CPU rungs, plus the GPU rungs for ``"gpu"``).
    lanes : elements per step of the ``lanes`` rung (default: this CPU's float32 lanes).
    loop_max : the ``loop`` rung is timed on at most this many elements, ``lanes`` on
        at most ``loop_max * lanes``; ``n_timed`` records how many.
    budget_s : seconds of timing per rung (keeps the widgets responsive).
    copy : also measure the copy bandwidth of an ``n``-element array (the limit).

    Returns
    -------
    ResultSet ``"vectorize_ladder"`` with one record per rung: ``rung``, ``label``,
    ``flynn``, ``median_s`` (for ``n_timed`` elements), ``s_per_element``,
    ``elements_per_s``, ``gb_per_s``, ``copy_fraction``, ``speedup_vs_loop``,
    ``agrees``, ``max_abs_diff``.

    Examples
    --------
    >>> rs = ladder("sigmoid", n=100, rungs=("lanes", "threads"), lanes=7, copy=False)
    >>> all(r["agrees"] for r in rs.records)
    True
    """
    if op not in OPS:
        raise BadInputError(f"op must be one of {OPS}, got {op!r}")
    devs = resolve_devices(devices)
    if not devs:
        raise BadInputError("ladder needs at least one device, e.g. devices=('cpu',)")
    rungs = _resolve_rungs(rungs, devs)
    lanes = whole_number("lanes", cpu_info()["float32_lanes"] or 8 if lanes is None else lanes)
    loop_max = whole_number("loop_max", loop_max, hint="the most elements the pure-Python loop rung handles")
    dt = validate_dtype(dtype, "cpu")
    x = random_input(n, dt, "cpu", seed=seed)
    # The oracle is the pure-Python loop (math module, float64, one element at a time), which
    # shares no code with the array rungs; on big inputs it checks the first ORACLE_MAX elements.
    m_ref = min(int(n), ORACLE_MAX)
    reference = loop_elementwise(op, x[:m_ref].astype(np.float64)).astype(dt)
    rs = ResultSet("vectorize_ladder", params={"op": op, "n": int(n), "dtype": dt.name, "lanes": lanes,
                                               "workers": workers, "loop_max": int(loop_max)})
    copy_rate = _copy_limits(rs, sorted({RUNG_INFO[r][2] for r in rungs}), int(n), dt, repeat, budget_s) \
        if copy else {}
    for rung in (progress(rungs, total=len(rungs), desc=f"{op} ladder") if progress else rungs):
        m = min(int(n), {"loop": loop_max, "lanes": loop_max * lanes}.get(rung, int(n)))
        t, fields = _time_rung(op, rung, x[:m], reference, dt, lanes, workers, repeat, budget_s, copy_rate)
        rs.add_timing(t, rung=rung, label=fields.pop("label"), flynn=RUNG_INFO[rung][1], op=op, dtype=dt.name,
                      n=int(n), n_timed=m, **fields)
    _add_speedups(rs)
    if int(n) > loop_max and any(r in _SLOW for r in rungs):
        rs.notes.append(f"The Python-loop rungs were timed on the first {loop_max:,} elements "
                        f"('lanes' on up to {loop_max * lanes:,}) and are compared per element.")
    return rs


def _resolve_rungs(rungs: Sequence[str] | None, devs: list[str]) -> list[str]:
    """The rungs asked for (default: the CPU rungs, plus the GPU ones when ``devs`` has the GPU), checked."""
    rungs = list(CPU_RUNGS) + (list(GPU_RUNGS) if "gpu" in devs else []) if rungs is None else list(rungs)
    unknown = [r for r in rungs if r not in RUNGS]
    if unknown:
        raise BadInputError(f"unknown rung {unknown[0]!r}; choose from {RUNGS}")
    if any(RUNG_INFO[r][2] == "gpu" for r in rungs):
        get_xp("gpu")  # a clear GPUUnavailableError before any work
    return rungs


def _copy_limits(rs: ResultSet, devices: list[str], n: int, dt: np.dtype, repeat: int,
                 budget_s: float) -> dict[str, float]:
    """Measure the copy bandwidth (the limit) of ``n`` elements on each device: one record each, and
    device -> bytes per second."""
    rate = {}
    for d in devices:
        bw = copy_bandwidth(d, nbytes=max(n * dt.itemsize, 4096), repeat=repeat, budget_s=budget_s)
        rate[d] = bw["bytes_per_s"]
        rs.add(device=d, rung="copy", label="copy (the limit)", flynn="", op="copy", dtype=dt.name,
               n=n, n_timed=n, median_s=bw["timing"].median, gb_per_s=bw["gb_per_s"], copy_fraction=1.0)
    return rate


def _time_rung(op: str, rung: str, x: np.ndarray, reference: np.ndarray, dt: np.dtype, lanes: int,
               workers: int | None, repeat: int, budget_s: float, copy_rate: dict) -> tuple[Timing, dict]:
    """Run ``rung`` on ``x`` once, checked against the oracle's ``reference`` on the elements both
    have, then time it; the :class:`~course.timing.Timing` and the record's other fields."""
    label, _, dev = RUNG_INFO[rung]
    m = len(x)
    xs = x if dev == "cpu" else to_device(x, "gpu")
    kw = {"lanes": lanes, "workers": workers, "out": None if rung == "numpy_new" else get_xp(dev).empty_like(xs)}
    k = min(m, len(reference))
    ok, diff = agree(to_numpy(elementwise(op, xs, rung, **kw))[:k], reference[:k], dt)
    slow = rung in _SLOW
    t = benchmark(elementwise, op, xs, rung, device=dev, warmup=1 if slow else 2, repeat=3 if slow else repeat,
                  budget_s=budget_s, name=label, **kw)
    rate = bytes_moved(m, dt) / t.median
    return t, {"label": label if rung != "lanes" else f"{lanes} lanes per step", "s_per_element": t.median / max(m, 1),
               "elements_per_s": m / t.median, "gb_per_s": rate / 1e9,
               "copy_fraction": rate / copy_rate[dev] if dev in copy_rate else None,
               "agrees": ok, "max_abs_diff": diff, "lanes": lanes if rung == "lanes" else None}


def _add_speedups(rs: ResultSet) -> None:
    """Give every timed rung its ``speedup_vs_loop`` (per element) when the loop rung was timed."""
    loop = rs.select(rung="loop")
    for r in rs.records:
        if loop and r.get("s_per_element"):
            r["speedup_vs_loop"] = loop[0]["s_per_element"] / r["s_per_element"]


def relu_bandwidth(n: int = 2**24, dtype: Any = "float32", device: Any = "cpu", rounds: int = 3,
                   repeat: int = 5, budget_s: float = 3.0, threads: bool = True) -> dict:
    """ReLU's effective bandwidth with ``out=`` and with a new array per call, against copy.

    Each round measures the copy limit, then ReLU into a preallocated ``out``, then
    ReLU allocating its result (and, on the CPU, the threaded rung); the fractions
    are medians over rounds of the per-round ratios, which cancels slow drifts of a
    shared machine.

    Returns ``{"copy_gb_per_s", "out_gb_per_s", "new_gb_per_s", "out_fraction",
    "new_fraction", ...}`` (``threads_*`` too on the CPU; on a GPU ``vector_*``, the course's
    kernel with 16-byte loads, :func:`course.vectorize.gpu.vector_relu`), plus ``"samples"``.

    >>> r = relu_bandwidth(n=2**12, rounds=1, repeat=2, threads=False)
    >>> 0 < r["out_fraction"]
    True
    """
    dev = normalize_device(device)
    rounds = whole_number("rounds", rounds, hi=1000, hint="interleaved rounds of measurements, e.g. 3")
    dt = validate_dtype(dtype, dev)
    xp = get_xp(dev)
    x = random_input(n, dt, dev)
    out = xp.empty_like(x)
    zero = dt.type(0)
    kinds = {"out": lambda: xp.maximum(x, zero, out=out), "new": lambda: xp.maximum(x, zero)}
    if threads and dev == "cpu":
        kinds["threads"] = lambda: elementwise("relu", x, "threads", out=out)
    if dev == "gpu" and dt.name in ("float32", "float64"):
        from .gpu import vector_relu

        kinds["vector"] = lambda: vector_relu(x, out)
    per_round: dict[str, list[float]] = {"copy": [], **{k: [] for k in kinds}}
    for _ in range(rounds):
        bw = copy_bandwidth(dev, nbytes=max(int(n) * dt.itemsize, 4096), repeat=repeat,
                            budget_s=budget_s / (len(kinds) + 1))
        per_round["copy"].append(bw["bytes_per_s"])
        for k, fn in kinds.items():
            t = benchmark(fn, device=dev, warmup=2, repeat=repeat, budget_s=budget_s / (len(kinds) + 1),
                          name=f"relu {k}")
            per_round[k].append(bytes_moved(n, dt) / t.median)
    res: dict[str, Any] = {"device": dev, "n": int(n), "dtype": dt.name, "rounds": rounds,
                           "samples": {k: [v / 1e9 for v in vals] for k, vals in per_round.items()}}
    copies = np.array(per_round["copy"])
    res["copy_gb_per_s"] = float(np.median(copies)) / 1e9
    for k in kinds:
        vals = np.array(per_round[k])
        res[f"{k}_gb_per_s"] = float(np.median(vals)) / 1e9
        res[f"{k}_fraction"] = float(np.median(vals / copies))
    return res
