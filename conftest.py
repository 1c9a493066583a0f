"""Test-wide settings.

* GPU tests (marked ``gpu``) skip where no GPU answers; where ipywidgets is not installed (a bare
  GPU machine) the widget test modules are not collected.
* Notebooks run under nbval (``--nbval-lax``, in this environment) when nbval is installed; the
  options are set here rather than in ``addopts`` so that ``pytest -m gpu`` also runs on a bare GPU
  machine without Jupyter or nbval.  A cell may take up to ``COURSE_CELL_TIMEOUT_S`` seconds (300 by
  default): that catches a hang, never a slow machine.  How long each notebook took is printed at
  the end for information; speed targets live in ``benchmarks/bench_notebooks.py``, because a test
  that asserts a speed fails on a busy machine.
* A solutions notebook repeats its lesson notebook cell for cell, answers filled in.  Its cells
  tagged ``lesson-only`` (the costly measurements and widgets, which define nothing a later cell
  reads) are deselected there: they already run, identically, in the lesson notebook, so every
  line still runs once in the suite, and the solutions notebook runs its exercises, their checks
  and everything those need.  ``tools/release_notebooks.py --check`` (run by the tests) proves
  each tag safe; ``COURSE_NOTEBOOKS_EVERY_CELL=1`` runs every cell of the solutions notebooks too.
* BLAS and OpenMP run one thread each (unless the environment says otherwise): the suite runs on
  busy 2-core machines, where a BLAS thread per core fights the other processes for the cores and
  everything slows down several-fold.  No test depends on the thread count.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
for _var in ("COURSE_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

CELL_TIMEOUT_S = float(os.environ.get("COURSE_CELL_TIMEOUT_S", "300"))
LESSON_ONLY = "lesson-only"  # the cell tag tools/release_notebooks.py checks


def runs_in_lesson_only(path, cell_tags) -> bool:
    """Whether the suite leaves out a notebook cell with these tags: a ``lesson-only`` cell of a
    notebook under ``notebooks/solutions/`` (benchmarks/bench_notebooks.py leaves out the same)."""
    parts = os.path.normpath(str(path)).split(os.sep)
    return (LESSON_ONLY in (cell_tags or ()) and parts[-3:-1] == ["notebooks", "solutions"]
            and os.environ.get("COURSE_NOTEBOOKS_EVERY_CELL", "") in ("", "0"))


# A bare GPU machine (``python -m course gpu-check``) may have no ipywidgets: the modules that drive
# widgets are then left out of collection instead of failing it.
try:
    import ipywidgets  # noqa: F401
except ImportError:
    collect_ignore_glob = ["tests/test_*widgets*.py", "tests/test_backprop_exercises.py",
                           "tests/test_ipywidgets7.py", "tests/test_browser.py"]
_nb_seconds: dict[str, float] = defaultdict(float)


def pytest_configure(config):
    if config.pluginmanager.hasplugin("nbval"):
        opt = config.option
        if not (opt.nbval or opt.nbval_lax):
            opt.nbval_lax = True
        opt.nbval_current_env = True
        if opt.nbval_cell_timeout == 2000:  # nbval's own default: not set on the command line
            opt.nbval_cell_timeout = CELL_TIMEOUT_S


def pytest_collection_modifyitems(config, items):
    from course.devices import gpu_available, gpu_unavailable_reason

    skipped = [it for it in items if hasattr(it, "cell")
               and runs_in_lesson_only(it.fspath, it.cell.get("metadata", {}).get("tags"))]
    if skipped:
        config.hook.pytest_deselected(items=skipped)
        left_out = {id(it) for it in skipped}
        items[:] = [it for it in items if id(it) not in left_out]

    if gpu_available():
        return
    skip = pytest.mark.skip(reason=f"needs a GPU: {gpu_unavailable_reason()}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Add up each notebook's cell times, for the summary at the end (never a failure)."""
    t0 = time.perf_counter()
    try:
        return (yield)
    finally:
        path = str(item.fspath)
        if path.endswith(".ipynb"):
            _nb_seconds[os.path.relpath(path)] += time.perf_counter() - t0


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _nb_seconds:
        return
    tr = terminalreporter
    tr.section("notebook run times (for information: benchmarks/bench_notebooks.py holds the targets)")
    for nb, s in sorted(_nb_seconds.items()):
        tr.write_line(f"{s:6.1f} s  {nb}")


@pytest.fixture
def standin_gpu(monkeypatch):
    """The stand-in GPU (``COURSE_STANDIN_GPU=1``: NumPy posing as CuPy) for one test, then back to this
    machine's own devices.  Yields its ``cupy``."""
    import importlib

    devices = importlib.import_module("course.devices")    # `course.devices` the attribute is a function
    standin = importlib.import_module("course.standin")

    def fresh():
        devices._probe.cache_clear()
        standin.reset_standin()

    monkeypatch.delenv("COURSE_DISABLE_GPU", raising=False)
    monkeypatch.setenv(standin.STANDIN_ENV, "1")
    fresh()
    try:
        yield devices.cupy_module()
    finally:
        monkeypatch.delenv(standin.STANDIN_ENV)
        fresh()

