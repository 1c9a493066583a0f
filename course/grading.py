"""What the exercise checks share: run the learner's function without letting it crash the notebook
(:func:`call_learner`), count the Python lines it runs, say what is wrong with an array
(:func:`array_mismatch`) and print the verdict (:func:`verdict`)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__: list[str] = []  # helpers for the checks, not checks themselves

NOT_DONE = ("Not done yet: your function still raises NotImplementedError. Write its body and run "
            "this check again.")


def call_learner(fn: Callable, *args: Any, context: str = "", **kwargs: Any) -> tuple[bool, Any]:
    """Run ``fn(*args, **kwargs)``: ``(True, result)``, or ``(False, None)`` after printing why not.

    A stub that still raises ``NotImplementedError`` gets "not done yet"; any other exception is
    the learner's bug, shown with its type and message (and ``context``, e.g. the input's shape)
    instead of a traceback.
    """
    if not callable(fn):
        print(f"Expected a function, got {type(fn).__name__} {fn!r}.")
        return False, None
    try:
        return True, fn(*args, **kwargs)
    except NotImplementedError:
        print(NOT_DONE)
        return False, None
    except Exception as exc:
        print(f"Your function raised {type(exc).__name__}: {exc}" + (f" ({context})" if context else ""))
        return False, None


def python_lines_run(fn: Callable, *args: Any, **kwargs: Any) -> int:
    """How many lines of Python code (anywhere, numpy's Python wrappers included) one call runs.

    A loop over 65,536 elements runs at least 65,536 lines; a vectorized function runs a
    handful, whatever the size: its work happens inside compiled numpy loops.

    >>> import numpy as np
    >>> python_lines_run(np.maximum, np.ones(10**5), 0.0)
    0
    """
    count = 0

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    before = sys.gettrace()
    sys.settrace(tracer)
    try:
        fn(*args, **kwargs)
    finally:
        sys.settrace(before)
    return count


def array_mismatch(what: str, got: Any, want: Any, suspects: Sequence[tuple[Any, str]] = (),
                   rtol: float = 1e-6, atol: float = 1e-9) -> str | None:
    """``None`` when ``got`` matches ``want``, else one message: what is wrong with ``what``, and what to do.

    It tells apart a missing ``return``, a wrong shape, NaN, a flipped sign, one of the ``suspects``
    (pairs of a typical wrong answer and the sentence that explains it), a constant factor, and
    otherwise names the entry that is furthest off.

    >>> array_mismatch("dW", -np.ones(3), np.ones(3))
    'dW: the sign is flipped (every entry is minus the right one).'
    """
    want = np.asarray(want, dtype=np.float64)
    if got is None:
        return f"{what}: your function returned None where an array was expected. Did you forget a `return`?"
    try:
        got = np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError):
        return f"{what}: expected an array of numbers, got a {type(got).__name__}."

    def close(a: Any) -> bool:
        a = np.asarray(a, dtype=np.float64)
        return a.shape == got.shape and bool(np.allclose(got, a, rtol=rtol, atol=atol))

    if got.shape != want.shape:
        for alt, msg in suspects:
            if close(alt):
                return f"{what}: shape {got.shape}, expected {want.shape}. {msg}"
        return f"{what}: shape {got.shape}, expected {want.shape}."
    if close(want):
        return None
    if not np.all(np.isfinite(got)):
        return f"{what}: contains NaN or inf (at index {tuple(int(i) for i in np.argwhere(~np.isfinite(got))[0])})."
    if np.any(want) and close(-want):
        return f"{what}: the sign is flipped (every entry is minus the right one)."
    for alt, msg in suspects:
        if close(alt):
            return f"{what}: {msg}"
    denom = float(np.vdot(want, want))
    if denom:
        c = float(np.vdot(got, want)) / denom
        if np.allclose(got, c * want, rtol=rtol, atol=atol):
            return f"{what}: right up to a constant factor: every entry is {c:.4g} × the right one."
    i = np.unravel_index(np.argmax(np.abs(got - want)), want.shape)
    return (f"{what}: wrong values; the largest error is at index {tuple(int(j) for j in i)}: "
            f"you gave {got[i]:.6g}, expected {want[i]:.6g}.")


def verdict(name: str, problem: str | None, right: str) -> bool:
    """Print ``name: right`` or ``name: ✗ problem`` and return whether it was right.

    An empty ``problem`` is one already printed (by :func:`call_learner`): nothing more is said.
    """
    if problem is None:
        print(f"{name}: {right}")
    elif problem:
        print(f"{name}: ✗ {problem}")
    return problem is None
