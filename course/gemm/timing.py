"""Lesson 09's measurements: every rung against its library in the same run, and against the FMA peak.

* :func:`fma_rate`: this CPU's FMA peak, measured: a numba loop of independent FMA chains, vectorised
  across SIMD lanes, that reads and writes almost nothing (the roof of the CPU ladder);
* :func:`time_cpu_rung`: one CPU rung (or NumPy's BLAS) at one size: a record;
* :func:`cpu_ladder_sweep`: every CPU rung and ``"blas"`` (NumPy's ``@``) in alternating rounds, so a
  drifting machine slows them alike; ``of_blas`` is the share of BLAS measured in those same rounds;
* :func:`gpu_ladder_sweep`: every GPU rung and cuBLAS at the rung's own precision, alternating likewise;
* :func:`backprop_products_sweep`: the three products one layer of lesson 01's MLP makes per step.

>>> rs = cpu_ladder_sweep([16], rungs=("reordered",), threads=(1,), repeat=2)
>>> sorted({r["rung"] for r in rs.records})
['blas', 'reordered']
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

import numba
import numpy as np
from numba import njit, prange

from ..arguments import Devices, Given, Optional, Real, Seed, Whole, Wholes, arguments
from ..cpu import usable_cores
from ..devices import cupy_module
from ..errors import BadInputError
from ..limits import validate_dtype
from ..results import ResultSet
from ..threads import validate_threads
from ..timing import Timing, benchmark, interleaved_rounds, noisy_note
from .cpu import CPU_RUNGS, cpu_matmul, cpu_traffic

__all__ = ["FMA_CHAINS", "FMA_STEPS", "LOOPS_COST_LIMIT_S", "LOOPS_MAX_N", "fma_rate", "time_cpu_rung",
           "cpu_ladder_sweep", "gpu_ladder_sweep", "backprop_products_sweep", "validate_thread_counts",
           "validate_cpu_rung", "validate_cpu_rungs", "BACKPROP_PRODUCTS", "ERROR_FULL_MAX_N", "ERROR_ROWS"]

#: Independent FMA chains per SIMD lane in :func:`fma_rate`'s loop, and the FMAs in each chain per element:
#: 10 chains cover the FMA latency (4-5 cycles) of one or two FMA units with room to spare.
FMA_CHAINS, FMA_STEPS = 10, 32
_PEAK_VALUES = 512         # values per thread: 2 KiB of float32, in L1 the whole time
#: A ``loops`` product estimated to take longer than this (at the rate it reached at a smaller n) is
#: skipped at that size, with a note: the textbook loops are a few hundred times slower than BLAS.
LOOPS_COST_LIMIT_S = 2.0
#: Beyond this n the ``loops`` rung is not timed: a column of B then spans more cache lines than L1 holds, so
#: every FMA waits for a line from L2 or further, and one product takes many seconds.
LOOPS_MAX_N = 512
_LOOPS_WHY = f"; beyond n = {LOOPS_MAX_N} a column of B no longer fits in L1, and the rate only falls"


# ----------------------------------------------------------------- the roof: FMA peak

@njit(cache=True, fastmath={"contract"})
def _fma_chains(x, out, m, a, reps):
    """``reps`` times, for each value (a SIMD lane): 10 independent chains of 32 FMAs, ``v = v * m + a``.

    ``fastmath={"contract"}`` only fuses each multiply and add into one FMA; without ``reassoc`` LLVM may
    not fold a chain into fewer operations, so every FMA written here is executed.  The 32 steps are four
    loops of 8, each of which LLVM unrolls completely (it would not unroll one of 32), so that the loop over
    the values is vectorised and the 9 multiplies and 9 adds around the chains are 5 % of the work.
    """
    for _ in range(reps):
        for i in range(x.shape[0]):
            v0 = x[i]
            v1 = v0 * m
            v2 = v1 * m
            v3 = v2 * m
            v4 = v3 * m
            v5 = v4 * m
            v6 = v5 * m
            v7 = v6 * m
            v8 = v7 * m
            v9 = v8 * m
            for _s in range(8):
                v0, v1, v2, v3, v4 = v0 * m + a, v1 * m + a, v2 * m + a, v3 * m + a, v4 * m + a
                v5, v6, v7, v8, v9 = v5 * m + a, v6 * m + a, v7 * m + a, v8 * m + a, v9 * m + a
            for _s in range(8):
                v0, v1, v2, v3, v4 = v0 * m + a, v1 * m + a, v2 * m + a, v3 * m + a, v4 * m + a
                v5, v6, v7, v8, v9 = v5 * m + a, v6 * m + a, v7 * m + a, v8 * m + a, v9 * m + a
            for _s in range(8):
                v0, v1, v2, v3, v4 = v0 * m + a, v1 * m + a, v2 * m + a, v3 * m + a, v4 * m + a
                v5, v6, v7, v8, v9 = v5 * m + a, v6 * m + a, v7 * m + a, v8 * m + a, v9 * m + a
            for _s in range(8):
                v0, v1, v2, v3, v4 = v0 * m + a, v1 * m + a, v2 * m + a, v3 * m + a, v4 * m + a
                v5, v6, v7, v8, v9 = v5 * m + a, v6 * m + a, v7 * m + a, v8 * m + a, v9 * m + a
            out[i] = v0 + v1 + v2 + v3 + v4 + v5 + v6 + v7 + v8 + v9


@njit(cache=True, parallel=True)
def _fma_chains_parallel(x, out, m, a, reps):
    for t in prange(x.shape[0]):                                   # one row of values per core
        _fma_chains(x[t], out[t], m, a, reps)


def validate_cpu_dtype(dtype: Any) -> np.dtype:
    """``dtype`` as a numpy dtype if it is float32 or float64: what the CPU rungs (and the FMA chains) compute in."""
    dt = validate_dtype(dtype, "cpu")
    if dt.name not in ("float32", "float64"):
        raise BadInputError(f"the CPU rungs compute in float32 or float64, got {dt.name}; use 'float32'")
    return dt


def _peak_call(dtype: str, threads: int) -> tuple[Callable[[], None], float]:
    """The FMA-chain run on ``threads`` cores, as a call of no arguments, and the FLOPs it does."""
    dt = np.dtype(dtype)
    x = np.full((threads, _PEAK_VALUES), 0.5, dtype=dt)
    out = np.empty_like(x)
    m, a, reps = dt.type(0.999), dt.type(0.0005), 250   # a few ms: long beside a quiet machine's thread wake-up

    def run() -> None:
        before = numba.get_num_threads()
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        try:
            _fma_chains_parallel(x, out, m, a, reps)
        finally:
            numba.set_num_threads(before)

    return run, 2.0 * threads * _PEAK_VALUES * reps * FMA_CHAINS * FMA_STEPS


@functools.cache
def _peak(dtype: str, threads: int, repeat: int) -> float:
    run, flops = _peak_call(dtype, threads)
    return flops / benchmark(run, warmup=1, repeat=repeat, name="FMA chains", blas_threads=threads).min


@arguments(dtype=Given(validate_cpu_dtype), threads=Optional(Whole(hi=4096, hint="the cores to run the FMA chains on")),
           repeat=Whole(hi=1000))
def fma_rate(dtype: Any = "float32", threads: int | None = None, repeat: int = 7) -> float:
    """This CPU's measured FMA peak in FLOP/s (2 per FMA) on ``threads`` cores (default: every usable core).

    Each core runs :data:`FMA_CHAINS` independent chains of FMAs in every SIMD lane on values that stay in
    L1, so nothing but the FMA units limits it: the roof no matrix product on these cores can pass.  The
    fastest of ``repeat`` runs (a peak: what the cores do when nothing disturbs them), measured once per
    process for each (dtype, threads).

    >>> fma_rate("float64", threads=1, repeat=3) > 1e8
    True
    """
    return _peak(dtype.name, threads or usable_cores(), repeat)


# ----------------------------------------------------------------- one rung

def _operands(n: int, dtype: np.dtype, seed: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two n×n matrices of values in [-1, 1), drawn in float64 and rounded once to ``dtype``."""
    return tuple(seed.uniform(-1.0, 1.0, (n, n)).astype(dtype) for _ in range(2))


def _rel_error(got: np.ndarray, exact: np.ndarray) -> float:
    return float(np.max(np.abs(got.astype(np.float64) - exact)) / max(float(np.max(np.abs(exact))), 1e-300))


def _product(rung: str, a: np.ndarray, b: np.ndarray, threads: int) -> Callable[[], Any]:
    if rung == "blas":
        out = np.empty((a.shape[0], b.shape[1]), dtype=a.dtype)
        return functools.partial(np.matmul, a, b, out=out)
    return functools.partial(cpu_matmul, a, b, rung, threads=threads)


def _cpu_fields(rung: str, m: int, n: int, k: int, dtype: np.dtype, seconds: float) -> dict:
    """The record fields of a timed product: GFLOP/s and, for a course rung, its counted bytes per FMA."""
    fields = {"gflops": 2.0 * m * n * k / seconds / 1e9}
    if rung != "blas":   # BLAS's loops are not ours to count: its records leave these fields out
        t = cpu_traffic(rung, m, n, k, dtype.itemsize)
        fields |= {"bytes_per_fma": t["l1_fill"], "bytes_per_fma_registers": t["registers"],
                   "bytes_per_fma_memory": t["memory"]}
    return fields


def validate_cpu_rung(rung: Any) -> str:
    """``rung`` if it is one of :data:`~course.gemm.cpu.CPU_RUNGS` or ``"blas"``."""
    if not isinstance(rung, str) or rung not in (*CPU_RUNGS, "blas"):
        raise BadInputError(f"rung must be one of {CPU_RUNGS + ('blas',)}, got {rung!r}")
    return rung


def validate_cpu_rungs(rungs: Any) -> list[str]:
    """``rungs`` as a list of CPU rung names (``"blas"`` left out: it always runs), else a clear error."""
    if isinstance(rungs, str) or not isinstance(rungs, (list, tuple)):
        raise BadInputError(f"rungs must be a list of rung names from {CPU_RUNGS}, got {type(rungs).__name__}")
    return [validate_cpu_rung(r) for r in rungs if r != "blas"]


def validate_thread_counts(threads: Any) -> list[int]:
    """``threads`` as a list of thread counts (None: one thread and every usable core, once each)."""
    if threads is None:
        return sorted({1, usable_cores()})
    if isinstance(threads, (int, np.integer)) and not isinstance(threads, bool):
        threads = [threads]
    if isinstance(threads, (str, bytes)) or not hasattr(threads, "__len__") or not len(threads):
        raise BadInputError(f"threads must be a list of thread counts such as (1, {usable_cores()}), got {threads!r}")
    return [validate_threads(t) for t in threads]


@arguments(rung=Given(validate_cpu_rung), n=Whole(hi=16384, hint="the matrix size n (n×n matrices)"),
           dtype=Given(validate_cpu_dtype), threads=Whole(hi=4096, hint="BLAS's threads and the 'parallel' rung's"),
           repeat=Whole(hi=1000), budget_s=Optional(Real(above=0)), seed=Seed())
def time_cpu_rung(rung: str, n: int, dtype: Any = "float32", threads: int = 1, repeat: int = 5,
                  budget_s: float | None = None, seed: int = 0) -> dict:
    """One CPU rung (or ``"blas"``, NumPy's ``@``) on two random n×n matrices: a record.

    The record (:meth:`course.timing.Timing.as_record`) adds ``rung``, ``n``, ``dtype``, ``gflops``,
    ``max_rel_error`` (against the float64 product of the same inputs) and, for a course rung, its counted
    ``bytes_per_fma`` (into L1, :func:`~course.gemm.cpu.cpu_traffic`).  Compare rungs with
    :func:`cpu_ladder_sweep`, which times them in the same rounds.

    >>> r = time_cpu_rung("blocked", 32, repeat=2)
    >>> r["rung"], r["max_rel_error"] < 1e-5
    ('blocked', True)
    """
    a, b = _operands(n, dtype, seed)
    call = _product(rung, a, b, threads)
    err = _rel_error(call(), a.astype(np.float64) @ b.astype(np.float64))
    t = benchmark(call, warmup=1, repeat=repeat, budget_s=budget_s, name=f"{rung} n={n}", blas_threads=threads)
    return t.as_record(rung=rung, n=n, dtype=dtype.name, max_rel_error=err,
                       **_cpu_fields(rung, n, n, n, dtype, t.median))


# ----------------------------------------------------------------- the CPU ladder

def _loops_rate(dtype: np.dtype, threads: int, seed: np.random.Generator) -> float:
    """FLOP/s of the ``loops`` rung at n = 128 (a fraction of a second): an upper bound of its rate at a bigger n,
    where B's columns no longer stay in the caches."""
    a, b = _operands(128, dtype, seed)
    t = benchmark(cpu_matmul, a, b, "loops", warmup=1, repeat=2, name="loops n=128", blas_threads=threads)
    return 2.0 * 128**3 / t.min


@arguments(ns=Wholes(hi=16384, hint="square sizes n, e.g. [256, 1024]"),
           rungs=Optional(Given(lambda rungs: validate_cpu_rungs(rungs))),
           dtype=Given(validate_cpu_dtype), threads=Given(validate_thread_counts), repeat=Whole(hi=1000),
           budget_s=Optional(Real(above=0, hint="seconds the whole sweep may take")), seed=Seed())
def cpu_ladder_sweep(ns: Sequence[int], rungs: Sequence[str] | None = None, dtype: Any = "float32",
                     threads: Sequence[int] | None = None, repeat: int = 5, budget_s: float | None = 60.0,
                     progress: Callable | None = None, seed: int = 0) -> ResultSet:
    """Every CPU rung and NumPy's BLAS on the same n×n inputs, in alternating rounds: ``"gemm_cpu_ladder"``.

    Parameters
    ----------
    ns : square sizes.
    rungs : the CPU rungs (default: all of :data:`~course.gemm.cpu.CPU_RUNGS`); ``"blas"`` always runs.
    dtype : float32 or float64.
    threads : thread counts (default: 1 and every usable core).  On one thread every rung but ``parallel``
        runs (on one thread it is ``microkernel``); on more, ``parallel`` alone, and BLAS on as many threads.
    repeat : alternating rounds (each times every rung once).
    budget_s : seconds for the whole sweep: ``loops`` is skipped with a note beyond n = :data:`LOOPS_MAX_N`
        or where a product is estimated over :data:`LOOPS_COST_LIMIT_S` (or over what is left), and once
        the budget is spent the remaining rounds are cut short (at least one runs).
    progress : e.g. :func:`course.widgets.progress`.

    Returns
    -------
    ResultSet whose records (``device="cpu"``) hold ``rung``, ``n``, ``dtype``, ``threads``, ``gflops``,
    ``of_blas`` (the share of BLAS's GFLOP/s in the same rounds), ``of_roof`` (the share of the FMA peak,
    :func:`fma_rate`'s chains run on as many cores in the same rounds, their fastest round), ``bytes_per_fma``
    (counted, into L1),
    ``roof_gflops`` (that peak), ``max_rel_error`` (against float64), and the timing fields; params hold the
    highest peak on each thread count (``peak_gflops``).
    """
    rungs = list(CPU_RUNGS) if rungs is None else rungs
    rs = ResultSet("gemm_cpu_ladder", params={"ns": ns, "rungs": rungs, "dtype": dtype.name, "threads": threads,
                                              "repeat": repeat, "budget_s": budget_s, "peak_gflops": {}})
    began = time.perf_counter()
    jobs = [(t, n) for t in threads for n in ns]
    loops_rate = None
    for k, (t, n) in enumerate(progress(jobs, total=len(jobs), desc="CPU ladder") if progress else jobs):
        here = [r for r in rungs if (t == 1) != (r == "parallel")]   # 'parallel' on 1 thread is 'microkernel'
        left = None if budget_s is None else max(budget_s - (time.perf_counter() - began), 1e-3) / (len(jobs) - k)
        if "loops" in here:
            loops_rate = loops_rate or _loops_rate(dtype, t, seed)
            est = 2.0 * n**3 / loops_rate
            if n > LOOPS_MAX_N or est * (repeat + 1) > min(LOOPS_COST_LIMIT_S * (repeat + 1),
                                                           left if left is not None else 1e300):
                here.remove("loops")
                rs.notes.append(f"loops: skipped at n = {n:,} (at least {est:,.1f} s per product, at the "
                                f"{loops_rate / 1e9:.2g} GFLOP/s it reached at n = 128{_LOOPS_WHY})")
        if not here and t > 1:
            continue
        a, b = _operands(n, dtype, seed)
        exact = a.astype(np.float64) @ b.astype(np.float64)
        calls = {r: _product(r, a, b, t) for r in [*here, "blas"]}
        errors = {r: _rel_error(call(), exact) for r, call in calls.items()}   # also each one's warm-up
        calls["peak"], peak_flops = _peak_call(dtype.name, t)
        timings: dict[str, Timing] = interleaved_rounds(
            calls, warmup=0, repeat=repeat, budget_s=left, alternate=True, blas_threads=t,
            timer=functools.partial(benchmark, blas_threads=t))
        peak = peak_flops / timings.pop("peak").min    # a peak: its fastest round
        rs.params["peak_gflops"][str(t)] = max(peak / 1e9, rs.params["peak_gflops"].get(str(t), 0.0))
        blas = 2.0 * n**3 / timings["blas"].median
        for r in timings:
            fields = _cpu_fields(r, n, n, n, dtype, timings[r].median)
            rs.add_timing(timings[r], rung=r, n=n, dtype=dtype.name, of_blas=fields["gflops"] * 1e9 / blas,
                          of_roof=fields["gflops"] * 1e9 / peak, roof_gflops=peak / 1e9, max_rel_error=errors[r],
                          **fields)
    if budget_s is not None and time.perf_counter() - began > budget_s:
        rs.notes.append(f"The sweep ran past its budget of {budget_s:g} s: its rounds were cut short.")
    note = noisy_note(rs.records)
    if note:
        rs.notes.append(note)
    return rs


# ----------------------------------------------------------------- the GPU ladder

#: Up to this n the GPU results are compared with a float64 product in full; above it, on
#: :data:`ERROR_ROWS` rows drawn at random (the float64 product of n = 8,192 on the host would take minutes).
ERROR_FULL_MAX_N, ERROR_ROWS = 1024, 64


def _gpu_rungs(rungs: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """(the GPU rungs to time, notes on the ones this GPU lacks), checked against ``GPU_RUNGS``."""
    from .ladder import GPU_RUNG_SPECS, GPU_RUNGS, device_arch

    asked = list(GPU_RUNGS) if rungs is None else list(rungs)
    bad = [r for r in asked if r not in GPU_RUNGS]
    if bad:
        raise BadInputError(f"unknown GPU rung {bad[0]!r}; choose from {GPU_RUNGS}")
    arch = device_arch()
    lacks = [r for r in asked if GPU_RUNG_SPECS[r].min_arch > arch]
    notes = [f"{r}: skipped, it needs compute capability {GPU_RUNG_SPECS[r].min_arch / 10:.1f} (this GPU has "
             f"{arch / 10:.1f})" for r in lacks]
    return [r for r in asked if r not in lacks], notes


def _gpu_bytes_per_fma(rung: str, n: int) -> float:
    """Bytes one thread of the rung loads from global memory (L2/DRAM) per FMA (:mod:`course.gemm.counts`)."""
    from .counts import rung_counts

    c = rung_counts(rung, n, n, n)
    return c["global_load_bytes"] / c["fma"]


@arguments(ns=Wholes(hi=16384, hint="square sizes n, e.g. [1024, 4096]"), repeat=Whole(hi=1000), seed=Seed())
def gpu_ladder_sweep(ns: Sequence[int], rungs: Sequence[str] | None = None, precisions: Sequence[str] | None = None,
                     repeat: int = 5, progress: Callable | None = None, seed: int = 0) -> ResultSet:
    """Every GPU rung and cuBLAS at the rung's precision, in alternating rounds: ``"gemm_gpu_ladder"``.

    For each n and each precision (``"float32"`` strict, ``"tf32"``, ``"bfloat16"``:
    ``GPU_RUNG_SPECS[rung].precision``), the rungs of that precision and
    :func:`~course.gemm.cublas.cublas_matmul` at the same precision run on the same inputs (bfloat16:
    rounded to bfloat16 bits once, before timing, for both), one after another in every round, so
    ``of_cublas`` compares numbers taken together.  ``max_rel_error`` is ``max |C - C64| / max |C64|``
    against the float64 product of the same float32 inputs on the host, so it includes the rounding of
    the inputs to TF32 or bfloat16: over all of C up to n = :data:`ERROR_FULL_MAX_N`, above it over
    :data:`ERROR_ROWS` rows drawn at random (``error_rows`` says how many).  Rungs this GPU's
    architecture lacks are skipped with a note.  Needs a GPU (or the stand-in, ``COURSE_STANDIN_GPU=1``).
    """
    from ..devices import require_gpu, to_numpy
    from .cublas import cublas_matmul
    from .ladder import GPU_RUNG_SPECS, PRECISIONS, gpu_matmul, to_bfloat16_bits

    require_gpu()
    rungs, notes = _gpu_rungs(rungs)
    precisions = list(PRECISIONS) if precisions is None else list(precisions)
    bad = [p for p in precisions if p not in PRECISIONS]
    if bad:
        raise BadInputError(f"unknown precision {bad[0]!r}; choose from {PRECISIONS}")
    cp = cupy_module()
    rs = ResultSet("gemm_gpu_ladder", params={"ns": ns, "rungs": rungs, "precisions": precisions, "repeat": repeat,
                                              "error_full_max_n": ERROR_FULL_MAX_N, "error_rows": ERROR_ROWS},
                   notes=notes)
    for n in (progress(ns, desc="GPU ladder") if progress else ns):
        a, b = _operands(n, np.dtype("float32"), seed)
        rows = np.arange(n) if n <= ERROR_FULL_MAX_N else np.sort(seed.choice(n, ERROR_ROWS, replace=False))
        exact = a[rows].astype(np.float64) @ b.astype(np.float64)
        da, db = cp.asarray(a), cp.asarray(b)
        for p in precisions:
            here = [r for r in rungs if GPU_RUNG_SPECS[r].precision == p]
            if not here:
                continue
            x, y = (to_bfloat16_bits(da), to_bfloat16_bits(db)) if p == "bfloat16" else (da, db)
            calls = {r: functools.partial(gpu_matmul, x, y, r) for r in here}
            calls["cublas"] = functools.partial(cublas_matmul, x, y, p)
            errors = {r: _rel_error(to_numpy(call()[rows]), exact) for r, call in calls.items()}
            timings = interleaved_rounds(calls, device="gpu", warmup=1, repeat=repeat, alternate=True,
                                         timer=benchmark)
            library = 2.0 * n**3 / timings["cublas"].median
            for r, t in timings.items():
                tflops = 2.0 * n**3 / t.median / 1e12
                counted = {} if r == "cublas" else {"bytes_per_fma": _gpu_bytes_per_fma(r, n)}
                rs.add_timing(t, rung=r, precision=p, n=n, tflops=tflops, of_cublas=tflops * 1e12 / library,
                              max_rel_error=errors[r], error_rows=len(rows), **counted)
    return rs


# ----------------------------------------------------------------- one layer's three products

#: One layer ``Y = X @ W`` of lesson 01's MLP (:class:`course.backprop.layers.Linear`) and its backward pass:
#: product -> (left operand, right operand, the operand read transposed).
BACKPROP_PRODUCTS = {"forward": ("X", "W", ""), "input_grad": ("dY", "W.T", "W"), "weight_grad": ("X.T", "dY", "X")}


def _best_rungs(devices: Sequence[str], threads: int) -> dict[str, tuple[str, str]]:
    """device -> (the course's fastest rung there, its library peer)."""
    best = {"cpu": ("parallel" if threads > 1 else "microkernel", "blas")}
    if "gpu" in devices:
        from .ladder import GPU_RUNG_SPECS, GPU_RUNGS

        best["gpu"] = ([r for r in GPU_RUNGS if GPU_RUNG_SPECS[r].precision == "float32"][-1], "cublas")
    return best


@arguments(widths=Wholes(hi=16384, hint="layer widths (inputs = outputs), e.g. [256, 1024]"),
           batch=Whole(hi=65536, hint="samples per step"), devices=Devices(),
           threads=Optional(Whole(hi=4096, hint="BLAS's threads and the 'parallel' rung's")),
           repeat=Whole(hi=1000), budget_s=Optional(Real(above=0)), seed=Seed())
def backprop_products_sweep(widths: Sequence[int], batch: int = 256, devices: Sequence[str] | None = None,
                            threads: int | None = None, repeat: int = 5, budget_s: float | None = None,
                            progress: Callable | None = None, seed: int = 0) -> ResultSet:
    """The three products one ``width → width`` layer of lesson 01's MLP makes per step, float32:
    ``"gemm_backprop_products"``.

    Forward ``Y = X @ W`` ((batch × in) @ (in × out)); the input gradient ``dX = dY @ W.T``
    ((batch × out) @ (out × in)); the weight gradient ``dW = X.T @ dY`` ((in × batch) @ (batch × out)), as
    :meth:`course.backprop.layers.Linear.backward` writes them.  The same FMAs (batch·in·out) each, but
    ``dW`` writes an in × out matrix from sums of only ``batch`` terms, and two of them read an operand
    transposed: BLAS reads a transposed view as it is (a flag), while the course's rungs copy it into row
    order first, inside the time.  Each product at the course's best rung and its library on every device
    (CPU: ``microkernel``, or ``parallel`` on several threads, and NumPy's BLAS; GPU: the fastest float32
    rung and cuBLAS float32), all six in alternating rounds.  Records: ``product``, ``method``,
    ``library`` (bool), ``m``, ``k``, ``n``, ``transposed`` (the operand read transposed, or ``""``),
    ``gflops`` and ``of_library`` (the share of the library's GFLOP/s on the same product, same rounds).
    """
    from ..devices import get_xp
    from ..threads import get_threads

    threads = threads or get_threads()
    best = _best_rungs(devices, threads)
    rs = ResultSet("gemm_backprop_products", params={"widths": widths, "batch": batch, "dtype": "float32",
                                                     "threads": threads, "repeat": repeat, "budget_s": budget_s,
                                                     "methods": {d: list(best[d]) for d in devices}})
    jobs = [(d, w) for d in devices for w in widths]
    for dev, w in (progress(jobs, total=len(jobs), desc="backprop products") if progress else jobs):
        xp = get_xp(dev)
        x, wt, dy = (xp.asarray(seed.uniform(-1, 1, s).astype(np.float32)) for s in ((batch, w), (w, w), (batch, w)))
        operands = {"forward": (x, wt), "input_grad": (dy, wt.T), "weight_grad": (x.T, dy)}
        calls = {}
        for product, (left, right) in operands.items():
            for method in best[dev]:
                calls[(product, method)] = _layer_product(dev, method, left, right, threads)
        timings = interleaved_rounds({f"{p} {m}": c for (p, m), c in calls.items()}, device=dev, warmup=1,
                                     repeat=repeat, budget_s=budget_s, alternate=True, blas_threads=threads,
                                     timer=functools.partial(benchmark, blas_threads=threads))
        for product, (left, right) in operands.items():
            m, k = left.shape
            n = right.shape[1]
            library = 2.0 * m * n * k / timings[f"{product} {best[dev][1]}"].median
            for method in best[dev]:
                t = timings[f"{product} {method}"]
                gflops = 2.0 * m * n * k / t.median / 1e9
                rs.add_timing(t, product=product, method=method, library=method == best[dev][1], width=w,
                              batch=batch, m=m, k=k, n=n, transposed=BACKPROP_PRODUCTS[product][2], gflops=gflops,
                              of_library=gflops * 1e9 / library)
    note = noisy_note(rs.records)
    if note:
        rs.notes.append(note)
    return rs


def _layer_product(device: str, method: str, left: Any, right: Any, threads: int) -> Callable[[], Any]:
    """The call that multiplies ``left @ right`` by ``method`` on ``device``."""
    if method == "blas":
        return functools.partial(np.matmul, left, right)
    if method == "cublas":
        from .cublas import cublas_matmul

        return functools.partial(cublas_matmul, left, right, "float32")
    if device == "gpu":
        from .ladder import gpu_matmul

        return functools.partial(gpu_matmul, left, right, method)
    return functools.partial(cpu_matmul, left, right, method, threads=threads)
