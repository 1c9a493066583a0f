"""Automatic checks for the exercises: ``course.check.<name>(your_function)``.

Each check runs the learner's function on fresh inputs, compares it with the
course's own implementation and prints exactly what is wrong (shape, sign,
scale...) or that it is right; it also returns True/False so a notebook test
can assert on it.  Each lesson keeps its checks in its own folder (``course/scan/checks.py``, ...);
this module gathers them under one name, and :mod:`course.grading` holds what they share.

A lesson's checks are imported when one of them is first used (``__all__`` is read from the source),
so ``import course.check`` costs nothing in a notebook: the kernel checks of lessons 02-04, for
example, bring in numba's CUDA simulator.
"""

from __future__ import annotations

import ast
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


def __getattr__(name: str):
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"course.check has no check {name!r}; the checks are: {', '.join(__all__)}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
