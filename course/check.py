"""Automatic checks for the exercises: ``course.check.<name>(your_function)``.

Each check runs the learner's function on fresh inputs, compares it with the
course's own implementation and prints exactly what is wrong (shape, sign,
scale...) or that it is right; it also returns True/False so a notebook test
can assert on it.  Each lesson keeps its checks in its own folder (``course/scan/checks.py``, ...);
this module gathers them under one name, and :mod:`course.checking` holds what they share.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

__all__: list[str] = []

_root = Path(__file__).resolve().parent
for _m in pkgutil.iter_modules([str(_root)]):
    if _m.ispkg and (_root / _m.name / "checks.py").is_file():
        _mod = importlib.import_module(f"{__package__}.{_m.name}.checks")
        for _n in getattr(_mod, "__all__", []):
            if _n in globals():
                raise ImportError(f"two lessons define the check {_n!r}; give one of them another name")
            globals()[_n] = getattr(_mod, _n)
            __all__.append(_n)
