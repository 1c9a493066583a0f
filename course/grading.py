"""What the exercise checks share: run the learner's function without letting it crash the notebook
(:func:`call_learner`), count the Python lines it runs, read what it returned as real numbers
(:func:`real_array`, :func:`real_number`), say what is wrong with an array (:func:`array_mismatch`) and
print the verdict (:func:`verdict`).  :func:`in_words` is the last guard around every check that
``course.check`` hands out: whatever the learner's answer does, the check answers in words.

The rules, each applied here once for every check:

* the learner's function gets copies of the arrays it is given (inside lists, tuples and dicts too),
  so an answer that writes into its input cannot change the input the check's own answer reads;
* anything the learner's code raises, ``SystemExit`` included, is reported in words (only
  ``KeyboardInterrupt`` goes through, so the learner can still stop a check);
* an answer is read as real numbers or refused: complex numbers, strings, booleans and objects that
  are not numbers are named, never converted.
"""

from __future__ import annotations

import functools
import numbers
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__: list[str] = []  # helpers for the checks, not checks themselves

NOT_DONE = ("Not done yet: your function still raises NotImplementedError. Write its body and run "
            "this check again.")


def learner_copy(value: Any) -> Any:
    """``value`` with every numpy array in it copied (through lists, tuples and dicts); other objects as they are.

    >>> x = np.zeros(2); y = learner_copy([x]); y[0][0] = 1.0; float(x[0])
    0.0
    """
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return type(value)(learner_copy(v) for v in value)
    if isinstance(value, dict) and type(value) is dict:
        return {k: learner_copy(v) for k, v in value.items()}
    if type(value).__module__.split(".")[0] == "cupy" and hasattr(value, "copy"):
        return value.copy()
    return value


def raised_in_words(exc: BaseException) -> str:
    """What an exception raised by the learner's code was, as a sentence (``SystemExit`` explained)."""
    if isinstance(exc, SystemExit):
        return (f"Your function called sys.exit({'' if exc.code is None else repr(exc.code)}): a check runs it "
                "in this notebook, so return the result instead of exiting.")
    return f"Your function raised {type(exc).__name__}: {exc}"


def run_learner(fn: Callable, *args: Any, **kwargs: Any) -> tuple[Any, str | None]:
    """``(fn(*args, **kwargs), None)`` run on copies of the arrays, or ``(None, why it gave no result)``.

    The reason is :data:`NOT_DONE` for a stub that still raises ``NotImplementedError``; anything else
    it raises, ``SystemExit`` included, is said in words (:func:`raised_in_words`).  Only
    ``KeyboardInterrupt`` goes through.  Prints nothing: :func:`call_learner` prints.
    """
    if not callable(fn):
        return None, f"Expected a function, got {type(fn).__name__} {fn!r:.80}."
    args, kwargs = learner_copy(args), learner_copy(kwargs)
    try:
        return fn(*args, **kwargs), None
    except NotImplementedError:
        return None, NOT_DONE
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001  (the learner's code: SystemExit too is said in words)
        return None, raised_in_words(exc)


def call_learner(fn: Callable, *args: Any, context: str = "", **kwargs: Any) -> tuple[bool, Any]:
    """Run ``fn(*args, **kwargs)`` on copies of the arrays: ``(True, result)``, or ``(False, None)`` and why not.

    A stub that still raises ``NotImplementedError`` gets "not done yet"; anything else it raises,
    ``SystemExit`` included, is the learner's bug, shown with its type and message (and ``context``,
    e.g. the input's shape) instead of a traceback (see :func:`run_learner`).

    >>> call_learner(lambda: sys.exit(3))
    Your function called sys.exit(3): a check runs it in this notebook, so return the result instead of exiting.
    (False, None)
    """
    result, problem = run_learner(fn, *args, **kwargs)
    if problem is None:
        return True, result
    print(problem + (f" ({context})" if context and problem != NOT_DONE and callable(fn) else ""))
    return False, None


def in_words(check: Callable[..., bool]) -> Callable[..., bool]:
    """``check``, answering in words whatever happens: an exception escaping it (an answer nothing can
    read, a learner's object that raises when looked at) is printed as a sentence and the check says False.
    ``course.check`` hands out every check through it."""
    wanted = (check.__doc__ or "").strip().splitlines()[0].rstrip(".") if check.__doc__ else ""

    @functools.wraps(check)
    def guarded(*args: Any, **kwargs: Any) -> bool:
        try:
            return bool(check(*args, **kwargs))
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001  (said in words, never a traceback in the notebook)
            said = (raised_in_words(exc) if isinstance(exc, SystemExit) else
                    f"the check could not read what your function returned ({type(exc).__name__}: {exc})")
            print(f"{check.__name__}: ✗ {said}." + (f" What it checks: {wanted}." if wanted else ""))
            return False

    return guarded


def _holds_a_bool(got: Any, depth: int = 0) -> bool:
    """True when a list or tuple (at any depth, up to 32) holds a ``bool``: numpy would read it as a number."""
    if isinstance(got, (bool, np.bool_)):
        return True
    if depth < 32 and isinstance(got, (list, tuple)):
        return any(_holds_a_bool(v, depth + 1) for v in got)
    return False


def real_array(what: str, got: Any) -> tuple[np.ndarray | None, str | None]:
    """``(array of float64, None)`` when ``got`` holds real numbers only, else ``(None, the sentence saying why not)``.

    Complex numbers, strings, booleans and objects that are not numbers are refused by name, never
    converted (``np.asarray(x, float)`` would drop an imaginary part or read ``"1.0"`` as 1.0).

    >>> real_array("dx", np.array([1 + 5j, 2]))[1]
    'dx: holds complex numbers, such as (1+5j); return real numbers (a gradient of a real loss is real).'
    >>> real_array("dx", ["1.0", "2.0"])[1]
    "dx: holds strings ('1.0'), not numbers; return the array of numbers itself."
    >>> real_array("dx", [1.5, True])[1]
    'dx: holds True/False values, not numbers; return numbers (a mask times the values, or .astype(float)).'
    """
    if got is None:
        return None, f"{what}: your function returned None where an array was expected. Did you forget a `return`?"
    if isinstance(got, (str, bytes)):
        return None, f"{what}: your function returned the string {got!r:.60}, not an array of numbers."
    if _holds_a_bool(got):                # np.asarray([1.5, True]) would read True as 1.0
        return None, (f"{what}: holds True/False values, not numbers; return numbers "
                      "(a mask times the values, or .astype(float)).")
    try:
        arr = np.asarray(got)
    except Exception as exc:  # noqa: BLE001  (a ragged list, an object that refuses to be read, a GPU array)
        return None, (f"{what}: your function returned a {type(got).__name__} numpy cannot read as an array of "
                      f"numbers ({type(exc).__name__}: {str(exc)[:80]}).")
    kind = arr.dtype.kind
    if kind == "O" and arr.size and all(isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))
                                        for v in arr.flat):
        kind = "f"
    first = arr.flat[0] if arr.size else None
    if kind == "c" or kind == "O" and any(isinstance(v, numbers.Complex) and not isinstance(v, numbers.Real)
                                          for v in arr.flat):
        z = next((v for v in arr.flat if isinstance(v, numbers.Complex) and complex(v).imag), first)
        return None, (f"{what}: holds complex numbers, such as {complex(z)!r:.40}; return real numbers (a "
                      "gradient of a real loss is real).")
    if kind in "USa" or kind == "O" and any(isinstance(v, (str, bytes)) for v in arr.flat):
        s = next((v for v in arr.flat if isinstance(v, (str, bytes))), first)
        return None, f"{what}: holds strings ({str(s)!r:.40}), not numbers; return the array of numbers itself."
    if kind == "b":
        return None, (f"{what}: holds True/False values, not numbers; return numbers "
                      "(a mask times the values, or .astype(float)).")
    if kind not in "iuf":
        if not isinstance(got, np.ndarray):
            return None, f"{what}: your function returned a {type(got).__name__}, not an array of numbers."
        return None, (f"{what}: your function returned an array of dtype {arr.dtype}"
                      f"{' holding ' + type(first).__name__ + ' objects' if first is not None else ''}, "
                      "not of numbers.")
    return arr.astype(np.float64), None


def real_number(what: str, got: Any) -> tuple[float | None, str | None]:
    """``(float, None)`` when ``got`` is one real number (a Python or numpy number, or a 0-d array of one),
    else ``(None, the sentence saying why not)``.

    >>> real_number("bytes", np.complex128(3 + 1e-9j))[1]
    'bytes: a complex number, (3+1e-09j); return one real number.'
    """
    if isinstance(got, (bool, np.bool_)):
        return None, f"{what}: return one number, got {got!r}."
    if isinstance(got, np.ndarray) and got.ndim == 0:
        got = got[()]
    if isinstance(got, numbers.Complex) and not isinstance(got, numbers.Real):
        return None, f"{what}: a complex number, {complex(got)!r}; return one real number."
    if isinstance(got, numbers.Real):
        try:
            return float(got), None
        except (OverflowError, TypeError, ValueError) as exc:
            return None, f"{what}: {got!r:.40} is not a number a float can hold ({exc})."
    return None, f"{what}: return one number, got {type(got).__name__} {got!r:.60}."


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

    It tells apart a missing ``return``, an answer that is not real numbers (complex, strings: see
    :func:`real_array`), a wrong shape, NaN, a flipped sign, one of the ``suspects``
    (pairs of a typical wrong answer and the sentence that explains it), a constant factor, and
    otherwise names the entry that is furthest off.

    >>> array_mismatch("dW", -np.ones(3), np.ones(3))
    'dW: the sign is flipped (every entry is minus the right one).'
    """
    want = np.asarray(want, dtype=np.float64)
    got, unreadable = real_array(what, got)
    if unreadable:
        return unreadable

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
