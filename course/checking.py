"""What every exercise check does first: run the learner's function without letting it crash the notebook."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

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
