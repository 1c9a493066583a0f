"""Shared by the benchmarks: interleaved rounds that go on until a ratio is stable, and the load line.

Each round times every function once (``course.benchmark``, so BLAS threads are set and GPU work is
timed with CUDA events), in turn, so that a slow drift of a shared machine hits all of them alike.
After ``min_rounds`` the rounds stop as soon as every ratio asked for has an interquartile range under
``target_iqr`` of its median (each ratio is taken within a round, then the median over rounds), or
when ``budget_s`` is spent: that ratio is then reported as noisy.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from course.threads import get_threads
from course.timing import Timing, benchmark

TARGET_IQR = 0.10


def load_line() -> str:
    """The machine's load average and cores, from /proc/loadavg where there is one."""
    try:
        with open("/proc/loadavg") as fh:
            one, five, fifteen = fh.read().split()[:3]
        return f"load average {one} / {five} / {fifteen} (1/5/15 min) on {os.cpu_count()} logical cores"
    except OSError:
        return "load average: unknown on this system"


def rounds(fns: dict[str, Callable[[], Any]], ratios: dict[str, tuple[str, str]], device: str = "cpu",
           min_rounds: int = 5, max_rounds: int = 60, budget_s: float = 20.0, target_iqr: float = TARGET_IQR,
           warmup: int = 1, blas_threads: int | None = None) -> dict:
    """Time ``fns`` in interleaved rounds until each ratio ``name: (numerator, denominator)`` is stable.

    Returns ``{"timings": {name: Timing}, "ratios": {name: {"median", "iqr", "rel_iqr", "noisy"}},
    "rounds": k, "stopped_by_budget": bool, "threads": n}``.
    """
    threads = get_threads() if blas_threads is None else blas_threads
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    samples: dict[str, list[float]] = {k: [] for k in fns}
    began, k, by_budget = time.perf_counter(), 0, False

    def stats() -> dict:
        out = {}
        for name, (num, den) in ratios.items():
            r = np.asarray(samples[num]) / np.asarray(samples[den])
            med = float(np.median(r))
            iqr = float(np.percentile(r, 75) - np.percentile(r, 25))
            out[name] = {"median": med, "iqr": iqr, "rel_iqr": iqr / med if med else float("inf")}
        return out

    while k < max_rounds:
        for name, fn in fns.items():
            samples[name].append(benchmark(fn, device=device, warmup=0, repeat=1, name=name,
                                           blas_threads=threads).samples[0])
        k += 1
        if k >= min_rounds and all(s["rel_iqr"] < target_iqr for s in stats().values()):
            break
        if time.perf_counter() - began > budget_s:
            by_budget = True
            break
    st = stats()
    for s in st.values():
        s["noisy"] = s["rel_iqr"] >= target_iqr
    timings = {name: Timing(samples=np.asarray(v), device=device, name=name, threads=threads)
               for name, v in samples.items()}
    return {"timings": timings, "ratios": st, "rounds": k, "stopped_by_budget": by_budget, "threads": threads}


def verdict(value: float, target: float, at_least: bool = True, noisy: bool = False) -> str:
    """'meets' / 'misses' the target, with '(noisy)' when the ratio never settled."""
    ok = value >= target if at_least else value <= target
    return ("meets" if ok else "misses") + (" (noisy: IQR >= 10 %)" if noisy else "")
