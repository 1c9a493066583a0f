"""The examples in the package's docstrings run and print what they say (the modules' doctests)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import course


def _modules() -> list[str]:
    names = []
    for mod in pkgutil.walk_packages(course.__path__, prefix="course."):
        if mod.name.endswith("__main__"):
            continue
        names.append(mod.name)
    return sorted(names)


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples_run_as_written(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples in {name} failed (see above)"
