"""Where the scan wins on a CPU: the regime of lesson 05 that a learner can see without a GPU.

Sequential backprop takes T dependent steps; each is one small matrix-vector product, so for a thin
chain (small n) each step is mostly the fixed cost of a numpy call, the CPU's analogue of a kernel
launch.  The scan (:func:`course.bppsa.backprop_scan`) takes about 2·log₂(T+1) levels, each one
batched call over thousands of products, but every combine is an n×n matrix *product*: about 2n
times the loop's arithmetic.  So the scan wins where the per-step overhead dominates (small n, long
T) and loses where the arithmetic does (large n).  :func:`regime_sweep` measures both over a grid of
n and T, and :func:`crossover_n` reads off, for each T, the largest n at which the scan still won.

>>> rs = regime_sweep(ns=[2], Ts=[64], repeat=1, budget_s=0.05)
>>> sorted({r["method"] for r in rs.records})
['scan', 'sequential']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import BadInputError, whole_number
from ..limits import require_fits
from ..results import ResultSet
from ..timing import benchmark, sweep_within_budget
from .algorithm import backprop_scan, backprop_sequential

__all__ = ["random_chain", "regime_sweep", "speedup_grid", "crossover_n", "REGIME_NS", "REGIME_TS"]

#: The grid the notebook measures by default: thin to moderately wide chains, short to long.
REGIME_NS = (2, 4, 8, 16, 32)
REGIME_TS = (1_000, 10_000, 30_000)
#: Largest chain measured: T · n² numbers of float32 (the scan keeps about twice that).
MAX_ELEMENTS = 2**25


def random_chain(T: int, n: int, seed: int = 0, dtype: Any = "float32") -> tuple[np.ndarray, np.ndarray]:
    """``T`` random rotations ``(T, n, n)`` (their products neither blow up nor vanish) and a gradient ``(n,)``.

    >>> J, g = random_chain(3, 2)
    >>> J.shape, g.shape
    ((3, 2, 2), (2,))
    """
    T, n = whole_number("T", T, hint="the chain length"), whole_number("n", n, hint="the state size")
    if T * n * n > MAX_ELEMENTS:
        raise BadInputError(f"T = {T:,} steps of {n}×{n} Jacobians is {T * n * n:,} numbers, more than the "
                            f"{MAX_ELEMENTS:,} this sweep allows; choose a smaller T or n")
    require_fits(3 * T * n * n * np.dtype(dtype).itemsize, "cpu", what=f"a chain of {T:,} {n}×{n} Jacobians")
    rng = np.random.default_rng(seed)
    q, r = np.linalg.qr(rng.standard_normal((T, n, n)))
    q = q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[..., None, :]
    return q.astype(dtype), rng.standard_normal(n).astype(dtype)


def regime_sweep(ns: Sequence[int] = REGIME_NS, Ts: Sequence[int] = REGIME_TS, repeat: int = 3,
                 budget_s: float = 1.0, total_budget_s: float | None = 30.0,
                 progress: Callable | None = None) -> ResultSet:
    """Time sequential backprop and the scan on random chains, for every (n, T), on the CPU.

    Each record: ``method`` (``"sequential"`` or ``"scan"``), ``n``, ``T``, the timing, and ``flops``
    (the work the method does: 2n² per step for the loop, 2n³ per combine for the scan).  Chains
    larger than :data:`MAX_ELEMENTS` are skipped with a note; ``total_budget_s`` stops the sweep
    early, and says so.
    """
    ns = [whole_number("ns", n, hint="each is a state size") for n in ns]
    Ts = [whole_number("Ts", T, hint="each is a chain length") for T in Ts]
    if not ns or not Ts:
        raise BadInputError(f"ns and Ts must each list at least one size, got {ns!r} and {Ts!r}")
    repeat = whole_number("repeat", repeat)
    rs = ResultSet("bppsa_regime", params={"ns": ns, "Ts": Ts, "dtype": "float32"})
    jobs = [(n, T) for T in Ts for n in ns]
    too_big = [(n, T) for n, T in jobs if T * n * n > MAX_ELEMENTS]
    if too_big:
        rs.notes.append(f"Not measured, over {MAX_ELEMENTS:,} numbers: " +
                        ", ".join(f"n = {n}, T = {T:,}" for n, T in too_big))
    jobs = [j for j in jobs if j not in too_big]
    for n, T in sweep_within_budget(jobs, rs, total_budget_s, progress, "n × T",
                                    skipped=lambda rest: f"{len(rest)} (n, T) pairs not measured"):
        J, g = random_chain(T, n, seed=n * 7919 + T)
        combines = 2 * T  # the Blelloch tree: about T up-sweep and T down-sweep combines
        for method, fn, flops in (("sequential", backprop_sequential, 2.0 * n * n * T),
                                  ("scan", backprop_scan, 2.0 * n ** 3 * combines)):
            t = benchmark(fn, J, g, warmup=1, repeat=repeat, budget_s=budget_s, name=f"{method} n={n} T={T}")
            rs.add_timing(t, method=method, n=n, T=T, flops=flops)
    return rs


def speedup_grid(rs: ResultSet) -> dict[tuple[int, int], float]:
    """``{(n, T): sequential time / scan time}`` (above 1: the scan won) for every measured pair."""
    out = {}
    for r in rs.select(method="scan"):
        seq = rs.select(method="sequential", n=r["n"], T=r["T"])
        if seq and r["median_s"] > 0:
            out[(r["n"], r["T"])] = seq[0]["median_s"] / r["median_s"]
    return out


def crossover_n(rs: ResultSet) -> dict[int, int | None]:
    """For each T: the largest n at which the scan was faster than the loop (None: at no n measured).

    >>> rs = ResultSet("bppsa_regime")
    >>> for n, seq, scan in ((2, 1.0, 0.2), (8, 1.0, 0.9), (32, 1.0, 3.0)):
    ...     rs.add(device="cpu", method="sequential", n=n, T=100, median_s=seq)
    ...     rs.add(device="cpu", method="scan", n=n, T=100, median_s=scan)
    >>> crossover_n(rs)
    {100: 8}
    """
    grid = speedup_grid(rs)
    out: dict[int, int | None] = {}
    for T in sorted({T for _, T in grid}):
        wins = [n for (n, t), s in grid.items() if t == T and s > 1.0]
        out[T] = max(wins) if wins else None
    return out
