"""Checks for lesson 02's exercises: vectorize leaky ReLU, vectorize a row-wise softmax.

``check_lane_dot`` checks a dot product written the way a SIMD unit runs it: strips of ``lanes``
elements, a masked tail, and a horizontal sum; the result must match, bit for bit, the float32 sum in
that order.

Each other check runs your function on fresh inputs (sizes 0 and 1, sizes that are not
a multiple of any lane width, float32 and float64), compares it with the course's
answer, says what is wrong if anything is, and then checks that it is vectorized: on a
large input it may run only a handful of Python lines, not one (or a few) per element
or row, which is what a loop does.  That criterion is counted, not timed, so a busy
machine cannot fail a right answer.  The speed-up over the loop is then measured and
printed, for information.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..grading import call_learner, python_lines_run, real_array, real_number, run_learner, verdict
from ..timing import benchmark
from .exercises import leaky_relu, leaky_relu_loop, softmax_rows, softmax_rows_loop

__all__ = ["check_leaky_relu", "check_softmax_rows", "check_lane_dot"]


def _call(fn: Callable, *args: Any, **kwargs: Any) -> tuple[bool, Any]:
    """(finished, result): (False, None) after printing "not done yet" for a stub."""
    return call_learner(fn, *args, context=f"input shape {np.shape(args[0])}, "
                        f"dtype {getattr(args[0], 'dtype', '?')}", **kwargs)


def _numeric(got: Any) -> np.ndarray | None:
    """``got`` as a numpy array of real numbers, or None when it is not one (a string, a dict, ...)."""
    if got is None or isinstance(got, (str, bytes)):
        return None
    try:
        arr = np.asarray(got)
    except Exception:  # e.g. a GPU array or an object numpy cannot read
        return None
    return arr if arr.dtype.kind in "iuf" else None


def _same_array(got: Any, want: np.ndarray, what: str, rtol: float, atol: float) -> str | None:
    """A sentence saying how ``got`` differs from ``want``, or None when they agree."""
    if got is None:
        return f"{what}: your function returned None; return the result array"
    _, unreadable = real_array(what, got)
    if unreadable:
        return unreadable
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"{what}: shape {got.shape}, expected {want.shape} (same shape as the input)"
    if got.dtype != want.dtype:
        return (f"{what}: dtype {got.dtype}, expected {want.dtype}; keep the input's dtype "
                "(e.g. multiply by x.dtype.type(slope), or call .astype(x.dtype, copy=False))")
    if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=False):
        bad = np.flatnonzero(~np.isclose(got, want, rtol=rtol, atol=atol).ravel())
        i = bad[0]
        g, w = float(got.ravel()[i]), float(want.ravel()[i])
        digits = next((d for d in (6, 9, 12, 17) if f"{g:.{d}g}" != f"{w:.{d}g}"), 17)   # as many as tell them apart
        return (f"{what}: {bad.size} of {want.size} values differ; first at flat index {i}: "
                f"got {g:.{digits}g}, expected {w:.{digits}g} (off by {g - w:.2g}, more than rtol={rtol:g}, "
                f"atol={atol:g} allow)")
    return None


def _vectorized(fn: Callable, loop: Callable, args: tuple, label: str, per: str, items: int) -> bool:
    """Counted, not timed: at most 64 Python lines, or one per 64 elements (rows) of the input on a
    large one.  Then the speed-up over the loop, measured here and printed, never judged."""
    shape = np.shape(args[0])
    lines, problem = run_learner(python_lines_run, fn, *args)
    if problem:
        print(f"On the speed test's {shape} input: {problem}")
        return False
    if lines > max(64, items // 64):
        print(f"Correct, but not vectorized: on a {shape} input your function ran {lines:,} lines of "
              f"Python, about one per {max(1, items // max(lines, 1))} {per}; a vectorized one runs a "
              f"handful whatever the size. Replace Python loops by whole-array operations ({label}).")
        return False
    t_loop = benchmark(loop, *args, warmup=0, repeat=2, name="loop")
    t_yours, problem = run_learner(benchmark, fn, *args, warmup=1, repeat=7, budget_s=2.0, name="yours")
    if problem:
        print(f"Timing your function on a {shape} input: {problem}")
        return False
    ratio = t_loop.median / t_yours.median
    noisy = " (noisy: this machine is busy, so the ratio is rough)" if t_loop.noisy or t_yours.noisy else ""
    print(f"Correct and vectorized: {lines} lines of Python for {items:,} {per}. Measured here, it ran "
          f"{ratio:,.0f}× faster than the loop on a {shape} input ({t_loop.median * 1e3:.2f} ms → "
          f"{t_yours.median * 1e6:.1f} µs){noisy}. Well done!")
    return True


def check_leaky_relu(fn: Callable, slope: float = 0.01, speed: bool = True) -> bool:
    """Check ``fn(x, slope=0.01)`` against leaky ReLU, then that it is vectorized (``speed=True``).

    >>> check_leaky_relu(lambda x, slope=0.01: np.where(x > 0, x, x * x.dtype.type(slope)), speed=False)
    Correct (speed not checked).
    True
    """
    rng = np.random.default_rng(2)
    cases = [(n, dt, s) for n, dt, s in ((0, "float32", slope), (1, "float32", slope), (17, "float64", slope),
                                          (1003, "float32", slope), (1003, "float64", 0.2))]
    for n, dt, s in cases:
        x = rng.standard_normal(n).astype(dt)
        if n == 1:
            x[0] = -1.5  # a lone negative value: the slope side
        done, got = _call(fn, x, slope=s)
        if not done:
            return False
        want = leaky_relu(x, s)
        msg = _same_array(got, want, f"leaky_relu of {n} {dt} values, slope={s}", 1e-6, 1e-7)
        if msg:
            got = _numeric(got)
            neg = x < 0
            if got is not None and got.shape == x.shape and neg.any():
                if np.allclose(got[neg], 0):
                    msg += ". Negative inputs give 0: that is plain ReLU; multiply them by the slope instead"
                elif np.allclose(got[neg], slope * x[neg]) and s != slope:
                    msg += f". You ignore the slope argument (called with slope={s})"
                elif np.allclose(got[~neg], s * x[~neg]):
                    msg += ". The slope is applied to the positive values: swap the two branches"
            print(msg)
            return False
    if not speed:
        print("Correct (speed not checked).")
        return True
    x = rng.standard_normal(2**16).astype(np.float32)
    return _vectorized(lambda v: fn(v, slope=slope), lambda v: leaky_relu_loop(v, slope), (x,),
                       "np.where(x > 0, x, slope * x), or np.maximum(x, slope * x)", "elements", x.size)


def check_softmax_rows(fn: Callable, speed: bool = True) -> bool:
    """Check ``fn(x)`` against a row-wise softmax (each row sums to 1), then that it is vectorized.

    >>> def soft(x):
    ...     e = np.exp(x - x.max(axis=1, keepdims=True))
    ...     return e / e.sum(axis=1, keepdims=True)
    >>> check_softmax_rows(soft, speed=False)
    Correct (speed not checked).
    True
    """
    rng = np.random.default_rng(3)
    cases = [((1, 1), "float64", 0.0), ((3, 5), "float64", 0.0), ((4, 7), "float32", 0.0),
             ((5, 3), "float64", 1000.0), ((2, 9), "float32", -800.0)]
    for shape, dt, shift in cases:
        x = (rng.standard_normal(shape) * 3 + shift).astype(dt)
        done, got = _call(fn, x.copy())
        if not done:
            return False
        want = softmax_rows(x)
        tol = (1e-5, 1e-7) if dt == "float32" else (1e-10, 1e-12)
        msg = _same_array(got, want, f"softmax of a {shape} {dt} array" +
                          (f" with values near {shift:g}" if shift else ""), *tol)
        if msg:
            g = _numeric(got)
            if g is not None and g.shape == want.shape:
                g = g.astype(np.float64)
                if not np.all(np.isfinite(g)):
                    msg += (". Some values are nan/inf: exp overflows for large inputs; subtract each "
                            "row's maximum first (x - x.max(axis=1, keepdims=True))")
                elif shape[0] > 1 and np.allclose(g.sum(axis=0), 1) and not np.allclose(g.sum(axis=1), 1):
                    msg += (". Your *columns* sum to 1: normalise each row, i.e. sum over axis=1 "
                            "with keepdims=True")
                elif np.allclose(g.sum(), 1) and shape[0] > 1:
                    msg += ". The whole array sums to 1: normalise each row separately (axis=1)"
            print(msg)
            return False
    if not speed:
        print("Correct (speed not checked).")
        return True
    x = rng.standard_normal((256, 96))
    return _vectorized(fn, softmax_rows_loop, (x,),
                       "x.max(axis=1, keepdims=True), np.exp, .sum(axis=1, keepdims=True)", "rows", x.shape[0])


def _lane_dot_reference(a: np.ndarray, b: np.ndarray, lanes: int, acc_dtype: Any = None,
                        fold: bool = True) -> Any:
    """The dot product in the order a ``lanes``-wide SIMD register adds it (the check's own spec)."""
    acc = np.zeros(lanes, dtype=acc_dtype or a.dtype)
    full = a.shape[0] - a.shape[0] % lanes
    for start in range(0, full, lanes):
        acc = acc + a[start:start + lanes] * b[start:start + lanes]
    acc[:a.shape[0] - full] += a[full:] * b[full:]
    if not fold:
        return acc.sum()
    while acc.shape[0] > 1:
        acc = acc[:acc.shape[0] // 2] + acc[acc.shape[0] // 2:]
    return acc[0]


def _lane_dot_problem(fn: Callable, a: np.ndarray, b: np.ndarray, lanes: int) -> str | None:
    where = f"n = {a.shape[0]}, lanes = {lanes}"
    ok, got = call_learner(fn, a.copy(), b.copy(), lanes, context=where)
    if not ok:
        return ""
    value, unreadable = real_number(f"({where}) the dot product", got)
    if unreadable:
        return unreadable
    exact = float(np.dot(a.astype(np.float64), b.astype(np.float64)))
    scale = float(np.abs(a.astype(np.float64) * b).sum()) + 1e-30
    if not abs(value - exact) <= 1e-4 * scale:
        return (f"({where}) you returned {value:.7g}, but the dot product is {exact:.7g}. "
                + ("Check the tail: the last n % lanes elements count too." if a.shape[0] % lanes else
                   "Multiply element by element and add every product once."))
    want = _lane_dot_reference(a, b, lanes)
    if np.float32(value) == want:
        return None
    suspects = [
        (np.float32(np.dot(a, b)) if a.size else np.float32(0), "that is numpy's (BLAS's) dot product, in its own "
         "order; here you write the strips yourself."),
        (_lane_dot_reference(a, b, lanes, acc_dtype=np.float64), "your accumulator holds float64 numbers; "
         "a float32 SIMD register holds float32: make it np.zeros(lanes, dtype=a.dtype)."),
        (_lane_dot_reference(a, b, lanes, fold=False), "the horizontal sum is not the halving tree: fold the "
         "register in halves (acc[:w] + acc[w:2w], w = lanes/2, lanes/4, ..., 1) as the shuffle instructions do."),
    ]
    seq = np.float32(0)
    for x, y in zip(a, b):
        seq = np.float32(seq + x * y)
    suspects.append((seq, "that is the sum one element at a time, the scalar loop's order; keep `lanes` partial "
                          "sums, one per lane, and add a whole strip per step."))
    for alt, msg in suspects:
        if np.float32(value) == np.float32(alt):
            return f"({where}) right to rounding, but {msg}"
    return (f"({where}) right to rounding ({value!r} against {float(want)!r}), but not in the lanes' order: "
            "one partial sum per lane over the strips, the tail into the first lanes, then the halving fold.")


def check_lane_dot(fn: Callable, speed: bool = True) -> bool:
    """Check ``fn(a, b, lanes) -> float``: the float32 dot product of ``a`` and ``b`` as a SIMD unit adds it.

    The result must equal, bit for bit, the sum kept in ``lanes`` partial sums (strip ``s`` adds
    ``a[s:s+lanes] * b[s:s+lanes]`` to them), the tail's products added to the first lanes, and the
    register folded in halves at the end. With ``speed`` it also counts the Python lines run on
    4,096 elements: a strip per step, not an element per step.
    """
    name = "check_lane_dot"
    rng = np.random.default_rng(202)
    for n, lanes in [(0, 8), (1, 8), (8, 8), (37, 8), (100, 4), (1000, 16), (999, 8)]:
        a = rng.standard_normal(n).astype(np.float32)
        b = (rng.standard_normal(n) * 10 ** rng.uniform(-3, 3, n)).astype(np.float32)  # spread: rounding shows
        problem = _lane_dot_problem(fn, a, b, lanes)
        if problem is not None:
            return verdict(name, problem, "")
    if speed:
        a = rng.standard_normal(4096).astype(np.float32)
        lines, problem = run_learner(python_lines_run, fn, a, a, 8)
        if problem:
            return verdict(name, f"on the speed test's 4,096 elements: {problem}", "")
        if lines > 4 * 4096 // 8 + 100:
            return verdict(name, f"right, but on 4,096 elements with 8 lanes it ran {lines:,} lines of Python: "
                           "about one per element. Handle a whole strip of `lanes` elements per statement "
                           f"(at most about {4096 // 8} strips).", "")
    return verdict(name, None, "right, bit for bit: strips of `lanes` partial sums, a masked tail, a halving "
                               "fold. That is the order in which a compiler's vectorised loop adds.")
