"""Automatic checks for the exercises: ``course.check.<name>(your_function)``.

Each check runs the learner's function on fresh inputs, compares it with the
course's own implementation and prints exactly what is wrong (shape, sign,
scale...) or that it is right; it also returns True/False so a notebook test
can assert on it.  One module per lesson.
"""

from __future__ import annotations

import importlib
import pkgutil

__all__: list[str] = []

for _m in pkgutil.iter_modules(__path__):
    if _m.name.startswith("_") and _m.name != "__init__":
        _mod = importlib.import_module(f"{__name__}.{_m.name}")
        for _n in getattr(_mod, "__all__", []):
            globals()[_n] = getattr(_mod, _n)
            __all__.append(_n)
