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
from functools import partial
from typing import Any

import numpy as np

from ..arguments import Dtype, Given, OneOf, Whole, arguments
from ..cpu import cpu_info
from ..devices import get_xp, normalize_device, resolve_devices, synchronize, to_device, to_numpy
from ..errors import BadInputError, UnsupportedDtypeError, whole_number
from ..hardware.machine import copy_bandwidth, matmul_flops
from ..limits import require_fits, validate_dtype
from ..results import ResultSet
from ..timing import Timing, benchmark, interleaved_rounds
from ..torch_peer import TORCH_INSTALL, benchmark_torch, torch_available, torch_cuda_available
from .matmul import CPU_FLOAT16_MATMUL_MAX_N, MATMUL_LIMITS, MATMUL_RUNGS, matmul, matmul_tolerance, random_matrices
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

__all__ = ["ladder", "relu_bandwidth", "agree", "LADDER_RUNGS", "torch_available", "torch_matrices",
           "matmul_operands", "time_matmul_rung", "matmul_ladder", "wrapper_overhead", "fastest_call_s",
           "operand_probe"]

_SLOW = ("loop", "lanes")


#: How many elements (from the start) each rung is checked on against the pure-Python loop.
ORACLE_MAX = 2**14


@arguments(dtype=Dtype())
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


@arguments(device=Given(normalize_device), rounds=Whole(hi=1000, hint="interleaved rounds of measurements, e.g. 3"),
           dtype=Dtype(device="device"), threads=OneOf(True, False))
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
    dev, dt = device, dtype
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


#: The matrix product's rungs (:mod:`course.vectorize.matmul`), and PyTorch's product as one more, ``torch``:
#: the one place here with bfloat16, timed when PyTorch is installed.
LADDER_RUNGS = MATMUL_RUNGS + ("torch",)


def torch_matrices(n: int, dtype: Any = "bfloat16", device: Any = "cpu", seed: int = 0) -> tuple[Any, Any, Any]:
    """The ``torch`` rung's operands: :func:`~course.vectorize.matmul.random_matrices`' values as two PyTorch
    tensors in ``dtype`` (bfloat16 too, which numpy and CuPy lack), and an output."""
    if not torch_available():
        raise UnsupportedDtypeError(f"the 'torch' rung needs PyTorch ({TORCH_INSTALL}); "
                                    "numpy and CuPy have no bfloat16")
    import torch

    tdt = getattr(torch, str(dtype), None)
    if not isinstance(tdt, torch.dtype):
        raise UnsupportedDtypeError(f"PyTorch has no dtype {dtype!r}; try bfloat16, float16 or float32")
    dev = normalize_device(device)
    tdev = "cuda" if dev == "gpu" else "cpu"
    if tdev == "cuda" and not torch_cuda_available():
        raise UnsupportedDtypeError("this PyTorch build sees no CUDA GPU; install a CUDA build of "
                                    "PyTorch or use device='cpu'")
    a, b, _ = random_matrices(n, "float64", "cpu", seed=seed)
    require_fits(3 * a.size * torch.tensor([], dtype=tdt).element_size(), dev, what="three matrices")
    a, b = (torch.as_tensor(m).to(device=tdev, dtype=tdt) for m in (a, b))
    return a, b, torch.empty(a.shape, dtype=tdt, device=tdev)


@arguments(rung=OneOf(*LADDER_RUNGS))
def matmul_operands(rung: str, n: int, dtype: Any = "float32", device: Any = "cpu") -> tuple[Any, Any, Callable]:
    """Two random n×n matrices for ``rung`` and the call that multiplies them, into a preallocated output
    where the rung takes one (``torch``: PyTorch tensors and ``torch.matmul``)."""
    if rung == "torch":
        a, b, out = torch_matrices(n, dtype, device)
        import torch

        return a, b, partial(torch.matmul, a, b, out=out)
    a, b, out = random_matrices(n, dtype, device)
    return a, b, partial(matmul, a, b, rung, **({"out": out} if rung in ("blas", "gpu") else {}))


def time_matmul_rung(rung: str, n: int, dtype: Any = "float32", device: Any = "cpu", repeat: int = 5,
                     budget_s: float | None = 0.5, check: bool = True) -> dict:
    """Time one rung at size n: a record (:meth:`course.timing.Timing.as_record`) with the rung, n,
    dtype, ``gflops`` and (with ``check``) ``rel_error`` against float64 and whether it ``agrees``."""
    if rung not in LADDER_RUNGS:
        raise BadInputError(f"rung must be one of {LADDER_RUNGS}, got {rung!r}")
    n = whole_number("n", n, hint="the matrix size n (n×n matrices)")
    dev = "gpu" if rung == "gpu" else normalize_device(device)
    if rung in MATMUL_LIMITS and n > MATMUL_LIMITS[rung]:
        raise BadInputError(f"rung {rung!r} is limited to n <= {MATMUL_LIMITS[rung]} (got n={n}): "
                            "it would take too long")
    a, b, product = matmul_operands(rung, n, dtype, dev)
    err = None
    if check:
        got = product()
        if rung == "torch":
            got, a_np, b_np = (t.float().cpu().numpy() for t in (got, a, b))
        else:
            got, a_np, b_np = to_numpy(got), to_numpy(a), to_numpy(b)
        exact = a_np.astype(np.float64) @ b_np.astype(np.float64)
        err = float(np.max(np.abs(got - exact)) / max(np.max(np.abs(exact)), 1e-30))
    if rung == "torch":
        t = benchmark_torch(product, device=dev, warmup=2, repeat=repeat, budget_s=budget_s, name="torch matmul")
    else:
        synchronize(dev)
        slow = rung in MATMUL_LIMITS
        t = benchmark(product, device=dev, warmup=0 if slow else 2, repeat=2 if slow else repeat,
                      budget_s=budget_s, name=f"matmul {rung}")
    return t.as_record(rung=rung, n=int(n), dtype=str(dtype), gflops=matmul_flops(n) / t.median / 1e9,
                       rel_error=err, agrees=None if err is None else err <= matmul_tolerance(dtype, n))


def matmul_ladder(n: int = 64, dtypes: Sequence[str] = ("float32", "float16"), devices: Sequence[str] | None = None,
                  rungs: Sequence[str] | None = None, repeat: int = 5, budget_s: float = 0.4,
                  progress: Callable | None = None) -> ResultSet:
    """Every matmul rung that applies, for each dtype, at size n; GFLOP/s and error per record.

    Rungs too slow for n (see :data:`MATMUL_LIMITS`) are skipped, with a note; the
    ``torch`` rung runs only when PyTorch is installed; dtypes a rung cannot hold
    (bfloat16 in numpy) are skipped with the device's own error message as a note.  ``devices``
    defaults to the CPU plus the GPU when one answers, as every sweep.
    """
    n = whole_number("n", n, hint="the matrix size n (n×n matrices)")
    devs = resolve_devices(devices)
    rungs = list(rungs) if rungs is not None else (
        ["loop", "dots", "blas"] + (["gpu"] if "gpu" in devs else []) + (["torch"] if torch_available() else []))
    rs = ResultSet("vectorize_matmul", params={"n": int(n), "dtypes": list(dtypes), "rungs": rungs})
    jobs = [(r, d, dt) for r in rungs for d in (devs if r == "torch" else ["gpu" if r == "gpu" else "cpu"])
            for dt in dtypes]
    it = progress(jobs, total=len(jobs), desc="matmul ladder") if progress else jobs
    for rung, dev, dt in it:
        if rung in MATMUL_LIMITS and n > MATMUL_LIMITS[rung]:
            note = f"{rung}: skipped at n={n} (limit {MATMUL_LIMITS[rung]})"
            if note not in rs.notes:
                rs.notes.append(note)
            continue
        if dev == "cpu" and rung != "torch" and str(dt) == "float16" and n > CPU_FLOAT16_MATMUL_MAX_N:
            note = (f"{rung} float16: skipped at n={n} (numpy emulates float16 on the CPU, without BLAS: "
                    f"at most n = {CPU_FLOAT16_MATMUL_MAX_N} here)")
            if note not in rs.notes:
                rs.notes.append(note)
            continue
        try:
            r = time_matmul_rung(rung, n, dt, dev, repeat=repeat, budget_s=budget_s)
        except UnsupportedDtypeError as exc:
            note = f"{dt} on {dev}" + (" with PyTorch" if rung == "torch" else "") + f": {exc}"
            if note not in rs.notes:
                rs.notes.append(note)
            continue
        rs.add(**r)
    return rs


def wrapper_overhead(n: int = 256, dtype: Any = "float32", rounds: int = 30) -> dict:
    """The course wrapper :func:`matmul` against ``numpy.matmul`` itself, calls interleaved.

    Alternating the two calls (ABBA order) puts both under the same machine conditions;
    ``overhead`` compares the median times, ``overhead_best`` the fastest ones, and
    ``added_s`` is the wrapper's own cost per call, measured on 1×1 matrices where
    the product itself costs almost nothing (``added_fraction`` = its share of the
    fastest direct call at size n, ``direct_best_s``): on a busy machine the last is the
    steadiest figure.

    >>> r = wrapper_overhead(n=32, rounds=5)       # a timing, so only its shape is shown here
    >>> r["n"], r["rounds"], r["direct_s"] > 0
    (32, 5, True)
    """
    rounds = whole_number("rounds", rounds, hi=10_000, hint="pairs of calls to time, e.g. 30")
    a, b, out = random_matrices(n, dtype, "cpu")
    t = interleaved_rounds({"direct": partial(np.matmul, a, b, out=out), "wrapper": partial(matmul, a, b, out=out)},
                           warmup=1, repeat=rounds, alternate=True)   # ABBA: order effects cancel
    d, w = t["direct"], t["wrapper"]
    # The wrapper's own cost, seen directly: both calls on 1×1 matrices, best of many.
    a1, b1, o1 = random_matrices(1, dtype, "cpu")
    tiny_d = fastest_call_s(lambda: np.matmul(a1, b1, out=o1), calls=600, per_sample=20)
    tiny_w = fastest_call_s(lambda: matmul(a1, b1, out=o1), calls=600, per_sample=20)
    added = max(tiny_w - tiny_d, 0.0)
    return {"n": int(n), "dtype": str(dtype), "rounds": int(rounds),
            "direct_s": d.median, "wrapper_s": w.median, "direct_best_s": d.min,
            "overhead": w.median / d.median - 1.0, "overhead_best": w.min / d.min - 1.0,
            "added_s": added, "added_fraction": added / d.min,
            "direct_gflops": matmul_flops(n) / d.median / 1e9, "wrapper_gflops": matmul_flops(n) / w.median / 1e9,
            "noisy": d.noisy or w.noisy}


@arguments(calls=Whole(hi=10**6, hint="calls to time in all, e.g. 60"),
           per_sample=Whole(hi=10**4, hint="calls timed together, e.g. 10"))
def fastest_call_s(fn: Callable[[], Any], calls: int = 60, per_sample: int = 10) -> float:
    """Seconds per call of ``fn``, the fastest of ``calls`` calls timed ``per_sample`` at a time.

    For costs of a few microseconds: one call is too short for the clock, and the fastest
    batch is the one the machine disturbed least (:func:`course.timing.benchmark` times each batch).

    >>> fastest_call_s(lambda: None, calls=20) < 1e-3
    True
    """
    if not callable(fn):
        raise BadInputError(f"fastest_call_s needs a function to call, got {fn!r}")

    def batch() -> None:
        for _ in range(per_sample):
            fn()

    return benchmark(batch, warmup=0, repeat=max(calls // per_sample, 1), name="batch of calls").min / per_sample


@arguments(n=Whole(hi=2**22, hint="a cache-sized array"),
           calls=Whole(lo=10, hi=100_000, hint="timed calls per kind, e.g. 200"), dtype=Dtype())
def operand_probe(n: int = 2**14, dtype: Any = "float32", calls: int = 200) -> dict:
    """GB/s of ``maximum(x, 0)`` (scalar operand), ``maximum(x, zeros)`` (two arrays) and a
    copy, all on ``n`` values that fit in the cache; best of ``calls`` calls each.

    Same answer, same bytes counted (read ``x``, write ``y``), possibly different inner loops.

    >>> r = operand_probe(n=1024, calls=20)
    >>> r["scalar_gb_per_s"] > 0 and r["array_gb_per_s"] > 0
    True
    """
    if dtype.kind != "f":
        raise BadInputError(f"operand_probe times a float dtype, got {dtype.name}")
    x = np.random.default_rng(0).standard_normal(n).astype(dtype)
    out, zeros, zero = np.empty_like(x), np.zeros_like(x), dtype.type(0)
    bytes_ = 2 * x.nbytes
    times = {"scalar": fastest_call_s(lambda: np.maximum(x, zero, out=out), calls),
             "array": fastest_call_s(lambda: np.maximum(x, zeros, out=out), calls),
             "copy": fastest_call_s(lambda: np.copyto(out, x), calls)}
    res = {"n": n, "dtype": dtype.name}
    for k, t in times.items():
        res[f"{k}_gb_per_s"] = bytes_ / t / 1e9
    res["array_over_scalar"] = times["scalar"] / times["array"]
    return res
