"""Checks for lesson 03's exercises.

* :func:`check_matmul_intensity` — ``your_fn(n, itemsize)``: the arithmetic intensity of an
  n×n matrix product (FLOP per byte of compulsory traffic).
* :func:`check_roofline_bound` — ``your_fn(flops, nbytes, peak_flops, peak_bandwidth)``:
  ``"memory-bound"`` or ``"compute-bound"``, predicted from the roofline.
* :func:`check_linear_roofline` — ``your_fn(batch, n_in, n_out, itemsize, peak_flops, peak_bandwidth)``:
  one Linear layer's counted FLOPs and bytes, its place on the roofline, its shortest possible time,
  and the smallest batch that makes it compute-bound.
* :func:`check_batch_for_fraction` — ``your_fn(batch_sizes, samples_per_s, fraction)``: the
  smallest batch whose throughput reaches ``fraction`` of the best.

Each runs your function on fresh inputs, compares with the course's answer, prints
what is wrong (scale, direction, order...) or that it is right, and returns a bool.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..grading import call_learner, real_number, verdict
from .batch import batch_for_fraction
from .roofline import classify

__all__ = ["check_matmul_intensity", "check_roofline_bound", "check_batch_for_fraction", "check_linear_roofline"]


def _call(fn: Callable, *args: Any) -> tuple[bool, Any]:
    return call_learner(fn, *args, context=f"arguments {args!r}")


def check_matmul_intensity(fn: Callable) -> bool:
    """Check ``fn(n, itemsize)`` = 2n³ / (3n² · itemsize) FLOP/byte.

    >>> check_matmul_intensity(lambda n, s: 2 * n ** 3 / (3 * n * n * s))
    Correct: the intensity grows like n/(1.5·itemsize): big matrix products are compute-bound.
    True
    """
    for n, s in ((1, 4), (7, 4), (64, 2), (1000, 8), (4096, 4)):
        want = 2.0 * n ** 3 / (3.0 * n * n * s)
        ok, got = _call(fn, n, s)
        if not ok:
            return False
        if not isinstance(got, (int, float, np.floating, np.integer)) or isinstance(got, bool):
            print(f"For n={n}, itemsize={s}: return one number (FLOP per byte), got {type(got).__name__} {got!r}")
            return False
        if np.isclose(got, want, rtol=1e-9):
            continue
        ratio = float(got) / want if want else float("nan")
        hints = {0.5: "you counted n³ flops: each multiply-add is 2 flops",
                 1.5: "you counted two matrices of traffic: A and B are read, and C is written (three)",
                 float(s): "you divided by elements, not bytes: multiply the traffic by itemsize",
                 1 / s: "you multiplied by itemsize instead of dividing by it",
                 2.0: "the flop count is 2n³, not 4n³"}
        hint = next((h for r, h in hints.items() if np.isclose(ratio, r, rtol=1e-6)),
                    "flops: 2·n³; bytes: 3 matrices × n² elements × itemsize")
        print(f"For n={n}, itemsize={s}: got {float(got):.6g}, expected {want:.6g} ({ratio:.3g}× off): {hint}.")
        return False
    print("Correct: the intensity grows like n/(1.5·itemsize): big matrix products are compute-bound.")
    return True


def check_roofline_bound(fn: Callable, seed: int = 3) -> bool:
    """Check ``fn(flops, nbytes, peak_flops, peak_bandwidth)`` -> ``"memory-bound"`` / ``"compute-bound"``.

    >>> check_roofline_bound(lambda f, b, pf, pb: "memory-bound" if f / b < pf / pb else "compute-bound")
    Correct on 200 operations: left of the ridge point memory-bound, right of it compute-bound.
    True
    """
    rng = np.random.default_rng(seed)
    cases = [(1e6, 12e6, 1e11, 1e10), (2e9, 12e6, 1e11, 1e10), (1e6, 1e5, 1e11, 1e10)]  # below, above, on ridge
    for _ in range(197):
        pf, pb = 10 ** rng.uniform(9, 15), 10 ** rng.uniform(9, 13)
        nbytes = 10 ** rng.uniform(3, 10)
        cases.append((nbytes * pf / pb * 10 ** rng.uniform(-3, 3), nbytes, pf, pb))
    wrong_way, first = 0, None
    for f, b, pf, pb in cases:
        ok, got = _call(fn, f, b, pf, pb)
        if not ok:
            return False
        if not isinstance(got, str) or got not in ("memory-bound", "compute-bound"):
            print(f"Return the string 'memory-bound' or 'compute-bound'; got {got!r} for flops={f:.3g}, "
                  f"bytes={b:.3g}, peak {pf:.3g} FLOP/s, {pb:.3g} B/s")
            return False
        want = classify(f / b, pf, pb)
        if got != want:
            wrong_way += 1
            if first is None:
                first = (f, b, pf, pb, got, want)
    if wrong_way:
        f, b, pf, pb, got, want = first
        how = ("every answer was reversed: an intensity BELOW the ridge point (peak FLOP/s ÷ bandwidth) "
               "means the memory roof is the lower one, so memory-bound" if wrong_way == len(cases) else
               "compare the intensity flops/bytes with the ridge point peak_flops/peak_bandwidth")
        print(f"{wrong_way} of {len(cases)} wrong. First: flops={f:.3g}, bytes={b:.3g} (intensity {f / b:.3g}), "
              f"ridge at {pf / pb:.3g} FLOP/byte: you said {got!r}, the roofline says {want!r}. Hint: {how}.")
        return False
    print(f"Correct on {len(cases)} operations: left of the ridge point memory-bound, right of it compute-bound.")
    return True


def check_batch_for_fraction(fn: Callable, seed: int = 5) -> bool:
    """Check ``fn(batch_sizes, samples_per_s, fraction)`` -> the smallest batch reaching ``fraction`` of the best.

    >>> def mine(b, s, fraction):
    ...     best = max(s)
    ...     return min(bb for bb, ss in zip(b, s) if ss >= fraction * best)
    >>> check_batch_for_fraction(mine)
    Correct on 60 throughput curves, including unsorted ones and curves that dip after their peak.
    True
    """
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(60):
        k = int(rng.integers(3, 12))
        b = [2 ** j for j in range(k)]
        peak = 10 ** rng.uniform(3, 6)
        half = 2 ** rng.uniform(0, k)
        s = [peak * bb / (bb + half) * (1 - 0.3 * (j == k - 1 and i % 3 == 0)) for j, bb in enumerate(b)]
        frac = float(rng.choice([0.5, 0.8, 0.9, 0.95]))
        if i % 4 == 1:  # unsorted input
            order = rng.permutation(k)
            b, s = [b[j] for j in order], [s[j] for j in order]
        cases.append((b, s, frac))
    for b, s, frac in cases:
        ok, got = _call(fn, list(b), list(s), frac)
        if not ok:
            return False
        want = batch_for_fraction(b, s, frac)
        if isinstance(got, bool) or not isinstance(got, (int, float, np.integer, np.floating)) \
                or not np.isfinite(got):
            print(f"For fraction {frac}: return one batch size (a number), got {type(got).__name__} {got!r}")
            return False
        if int(got) != want:
            pairs = ", ".join(f"{bb}: {ss:,.0f}" for bb, ss in sorted(zip(b, s)))
            hint = ""
            if got in range(len(b)) and got not in b:
                hint = " It looks like a position in the list: return the batch size itself."
            elif got == b[int(np.argmax(s))]:
                hint = (" That is the batch with the best throughput; the question is the SMALLEST one "
                        "that gets within the fraction.")
            elif got == max(b):
                hint = " Compare with the best throughput measured (max), not with the last one."
            print(f"For fraction {frac} of the best on (batch: samples/s) {pairs}: got {got!r}, expected {want}.{hint}")
            return False
    print(f"Correct on {len(cases)} throughput curves, including unsorted ones and curves that dip after their peak.")
    return True


LINEAR_ROOFLINE_KEYS = ("flops", "bytes", "intensity", "attainable_flops_per_s", "min_time_s", "bound",
                        "compute_bound_from_batch")


def _linear_counts(batch: int, n_in: int, n_out: int, itemsize: int) -> tuple[int, int]:
    """FLOPs and compulsory bytes of ``out = x @ W + b``: each number read or written once."""
    flops = 2 * batch * n_in * n_out + batch * n_out
    nbytes = (batch * n_in + n_in * n_out + n_out + batch * n_out) * itemsize
    return flops, nbytes


def _linear_roofline(batch: int, n_in: int, n_out: int, itemsize: int, pf: float, pb: float) -> dict:
    """The check's own answer (the spec): the counts above, then the roofline of :mod:`course.throughput`."""
    flops, nbytes = _linear_counts(batch, n_in, n_out, itemsize)
    ridge = pf / pb
    smallest, top = None, 1 << 24
    if _linear_counts(top, n_in, n_out, itemsize)[0] / _linear_counts(top, n_in, n_out, itemsize)[1] >= ridge:
        lo, hi = 0, top                                # the intensity grows with the batch: bisect
        while hi - lo > 1:
            mid = (lo + hi) // 2
            f, b = _linear_counts(mid, n_in, n_out, itemsize)
            lo, hi = (lo, mid) if f / b >= ridge else (mid, hi)
        smallest = hi
    return {"flops": flops, "bytes": nbytes, "intensity": flops / nbytes,
            "attainable_flops_per_s": min(pf, flops / nbytes * pb), "min_time_s": max(flops / pf, nbytes / pb),
            "bound": classify(flops / nbytes, pf, pb), "compute_bound_from_batch": smallest}


def _linear_roofline_problem(got: Any, want: dict, args: tuple) -> str | None:
    batch, n_in, n_out, itemsize, pf, pb = args
    where = f"(batch {batch}, {n_in} -> {n_out}, {itemsize}-byte numbers, peaks {pf:.3g} FLOP/s and {pb:.3g} B/s)"
    if not isinstance(got, dict):
        return f"return a dict with the keys {', '.join(LINEAR_ROOFLINE_KEYS)}; got a {type(got).__name__}."
    missing = [k for k in LINEAR_ROOFLINE_KEYS if k not in got]
    if missing:
        return f"your dict lacks the keys {missing}."
    hints = {
        "flops": [(want["flops"] / 2 + batch * n_out / 2, "count a multiply-add as 2 FLOPs (a multiply and an add)."),
                  (want["flops"] - batch * n_out, "the bias adds one FLOP per output: batch × n_out more."),
                  (want["flops"] / batch, "that is one example's count: every row of the batch does the work.")],
        "bytes": [(want["bytes"] / itemsize, f"that counts numbers, not bytes: multiply by itemsize ({itemsize})."),
                  ((batch * n_in + batch * n_in * n_out + n_out + batch * n_out) * itemsize,
                   "W is read once for the whole batch, not once per example: that reuse is what batching buys."),
                  ((batch * n_in + n_in * n_out + batch * n_out) * itemsize,
                   "the bias b is read too (n_out numbers).")],
        "intensity": [(1 / want["intensity"], "intensity is FLOPs per byte: flops / bytes, not bytes / flops.")],
        "attainable_flops_per_s": [(max(pf, want["intensity"] * pb), "the attainable rate is the LOWER roof: "
                                    "min(peak_flops, intensity × peak_bandwidth).")],
        "min_time_s": [(want["flops"] / pf, "that is the compute time alone; a memory-bound layer takes "
                        "bytes / bandwidth: the time is the larger of the two."),
                       (want["bytes"] / pb, "that is the memory time alone; the time is the larger of "
                        "flops / peak_flops and bytes / peak_bandwidth."),
                       (want["flops"] / pf + want["bytes"] / pb, "the roofline overlaps computing and moving "
                        "data: take the larger of the two times, not their sum.")],
    }
    for key in LINEAR_ROOFLINE_KEYS:
        value, right = got[key], want[key]
        if key == "bound":
            if not isinstance(value, str) or value != right:
                return (f"{where}: 'bound' should be {right!r}, you said {value!r}. Compare the intensity with "
                        "the ridge point peak_flops / peak_bandwidth.")
            continue
        if key == "compute_bound_from_batch":
            number = None if value is None else real_number("", value)[0]
            if (value is None) != (right is None) or right is not None and number != right:
                return (f"{where}: the smallest batch that makes this layer compute-bound is {right}, you said "
                        f"{value!r}. The intensity grows with the batch (W is read once, whatever the batch); "
                        "find the first batch whose intensity reaches the ridge point"
                        + (", or None when none up to 2**24 does." if right is None else "."))
            continue
        value, unreadable = real_number(f"{where}: {key!r}", value)
        if unreadable:
            return unreadable
        if not np.isclose(value, right, rtol=1e-9):
            for alt, msg in hints.get(key, []):
                if np.isclose(value, alt, rtol=1e-9):
                    return f"{where}: {key!r} is {value:.6g}, expected {right:.6g}: {msg}"
            return f"{where}: {key!r} is {value:.6g}, expected {right:.6g}."
    return None


def check_linear_roofline(fn: Callable, seed: int = 7) -> bool:
    """Check ``fn(batch, n_in, n_out, itemsize, peak_flops, peak_bandwidth)`` -> a dict of one Linear layer's roofline.

    The keys: ``flops`` (``2·batch·n_in·n_out`` for the product, ``batch·n_out`` for the bias),
    ``bytes`` (x, W, b read once and out written once, times ``itemsize``), ``intensity``,
    ``attainable_flops_per_s``, ``min_time_s`` (the larger of the compute and the memory time),
    ``bound`` and ``compute_bound_from_batch`` (the smallest batch whose intensity reaches the ridge
    point, or None if no batch up to 2**24 does).
    """
    name = "check_linear_roofline"
    rng = np.random.default_rng(seed)
    cases = [(1, 784, 512, 4, 1e12, 1e11), (256, 784, 512, 4, 1e12, 1e11), (64, 4096, 4096, 2, 9.9e14, 3.35e12),
             (8, 10, 3, 8, 1e11, 1e10), (1, 100, 100, 4, 5e13, 1e10)]
    for _ in range(20):
        cases.append((int(rng.integers(1, 2048)), int(rng.integers(1, 4096)), int(rng.integers(1, 4096)),
                      int(rng.choice([2, 4, 8])), 10 ** rng.uniform(10, 15), 10 ** rng.uniform(9, 13)))
    for args in cases:
        ok, got = call_learner(fn, *args, context=f"arguments {args!r}")
        if not ok:
            return False
        problem = _linear_roofline_problem(got, _linear_roofline(*args), args)
        if problem:
            return verdict(name, problem, "")
    return verdict(name, None, f"right on {len(cases)} layers: FLOPs and bytes counted, the lower roof taken, "
                               "and the batch from which W's reuse makes the layer compute-bound.")
