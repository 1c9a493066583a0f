"""Test-wide settings: GPU tests skip without a GPU; each notebook must run in under 30 s."""

from __future__ import annotations

import os
import time
from collections import defaultdict

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")

NOTEBOOK_LIMIT_S = float(os.environ.get("COURSE_NOTEBOOK_LIMIT_S", "30"))
_nb_seconds: dict[str, float] = defaultdict(float)


def pytest_collection_modifyitems(config, items):
    from course.devices import gpu_available, gpu_unavailable_reason

    if gpu_available():
        return
    skip = pytest.mark.skip(reason=f"needs a GPU: {gpu_unavailable_reason()}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Add up each notebook's cell times; fail the cell that takes it past the limit."""
    t0 = time.perf_counter()
    result = yield
    path = str(item.fspath)
    if path.endswith(".ipynb"):
        nb = os.path.relpath(path)
        before = _nb_seconds[nb]
        _nb_seconds[nb] += time.perf_counter() - t0
        if before <= NOTEBOOK_LIMIT_S < _nb_seconds[nb]:
            pytest.fail(f"{nb} has run {_nb_seconds[nb]:.1f} s so far, over its "
                        f"{NOTEBOOK_LIMIT_S:.0f} s limit: make its defaults smaller")
    return result


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _nb_seconds:
        return
    tr = terminalreporter
    tr.section(f"notebook run times (limit {NOTEBOOK_LIMIT_S:.0f} s each)")
    for nb, s in sorted(_nb_seconds.items()):
        tr.write_line(f"{s:6.1f} s  {nb}")
