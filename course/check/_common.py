"""What every exercise check does first: run the learner's function without letting it crash the notebook."""

from __future__ import annotations

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
