"""Automatic checks for the exercises: ``course.check.<name>(your_function)``.

Each check runs the learner's function on fresh inputs, compares it with the
course's own implementation and prints exactly what is wrong (shape, sign,
scale...) or that it is right; it also returns True/False so a notebook test
can assert on it.  Each lesson keeps its checks in its own folder (``course/scan/checks.py``, ...);
this module gathers them under one name, and :mod:`course.grading` holds what they share.

A lesson's checks are imported when one of them is first used (``__all__`` is read from the source),
so ``import course.check`` costs nothing in a notebook: the kernel checks of lessons 02-04, for
example, bring in numba's CUDA simulator.  Each is handed out through :func:`course.grading.in_words`, so
whatever a learner's answer does (raise, exit, return something nothing can read), the check answers
in words and returns False.
"""

from __future__ import annotations

import ast
import functools
import importlib
from pathlib import Path

_ROOT = Path(__file__).resolve().parent


def _index() -> dict[str, str]:
    """Each check's name -> the module that defines it, read from each lesson's ``checks.py``."""
    found: dict[str, str] = {}
    for path in sorted(_ROOT.glob("*/checks.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
                for name in ast.literal_eval(node.value):
                    if name in found:
                        raise ImportError(f"two lessons define the check {name!r}; give one of them another name")
                    found[name] = f"{__package__}.{path.parent.name}.checks"
    return found


_WHERE = _index()
__all__ = sorted(_WHERE)


class Verdict:
    """A check's True/False in a notebook: it counts as that bool (``assert``, ``if``, ``==``), and shows
    nothing as a cell's value, since the check has already said it in words (no ``Out: False`` under
    "Not done yet")."""

    __slots__ = ("ok",)

    def __init__(self, ok: bool):
        self.ok = bool(ok)

    def __bool__(self) -> bool:
        return self.ok

    def __eq__(self, other: object) -> bool:
        return self.ok == (other.ok if isinstance(other, Verdict) else other)

    def __hash__(self) -> int:
        return hash(self.ok)

    def __repr__(self) -> str:
        return repr(self.ok)

    def _ipython_display_(self, **kwargs) -> None:   # the printed words are the answer
        pass


def _in_a_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return getattr(get_ipython(), "kernel", None) is not None


def _said_once(check):
    """``check``, returning a :class:`Verdict` in a notebook's kernel and its plain bool anywhere else."""
    @functools.wraps(check)
    def run(*args, **kwargs):
        ok = check(*args, **kwargs)
        return Verdict(ok) if isinstance(ok, bool) and _in_a_kernel() else ok
    return run


def __getattr__(name: str):
    if name in _WHERE:
        from .grading import in_words

        value = _said_once(in_words(getattr(importlib.import_module(_WHERE[name]), name)))
        globals()[name] = value
        return value
    raise AttributeError(f"course.check has no check {name!r}; the checks are: {', '.join(__all__)}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
