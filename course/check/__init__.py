"""Automatic checks for the exercises: ``course.check.<name>(your_function)``.

Each check runs the learner's function on fresh inputs, compares it with the
course's own implementation and prints exactly what is wrong (shape, sign,
scale...) or that it is right; it also returns True/False so a notebook test
can assert on it.  One module per lesson here, and for a lesson that lives in a folder of its own
(``course/parallel/``, ...), that folder's ``checks`` module.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

__all__: list[str] = []

for _m in pkgutil.iter_modules(__path__):
    if _m.name.startswith("_") and _m.name != "__init__":
        _mod = importlib.import_module(f"{__name__}.{_m.name}")
        for _n in getattr(_mod, "__all__", []):
            globals()[_n] = getattr(_mod, _n)
            __all__.append(_n)

_root = Path(__file__).resolve().parents[1]
for _m in pkgutil.iter_modules([str(_root)]):
    if _m.ispkg and (_root / _m.name / "checks.py").is_file():
        _mod = importlib.import_module(f"{__package__.rsplit('.', 1)[0]}.{_m.name}.checks")
        for _n in getattr(_mod, "__all__", []):
            globals()[_n] = getattr(_mod, _n)
            __all__.append(_n)
