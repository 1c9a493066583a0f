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
* Two tiers.  ``make test-quick`` (``-m "not full"``) runs the unit, property and widget-callback
  tests and the doctests in a few minutes; ``make test`` runs everything.  What only the full tier runs
  is marked ``full`` here, by kind, so a new test file joins the quick tier without an edit: the
  notebooks (nbval), the modules named in :data:`FULL_MODULES` (the browser, the executed book,
  ipywidgets 7.7.1, real MPI processes), and every test marked ``slow`` or ``early``.
* A test marked ``early("name")`` reads a whole program run in a subprocess, declared in its module
  with ``tests/_early.py``: the run starts as soon as collection ends, on a worker thread beside the
  rest of the suite, and the tests that read such runs are moved to the end of the session.  Where
  the executed book is built (``tests/test_book.py``) and no GPU answers, nbval's run of the lesson
  notebooks is left out: the book's build runs each of them top to bottom, as nbval would, and more.
* Each test module's time, and each early run's, is printed at the end with the notebooks' times.
* BLAS and OpenMP run one thread each (unless the environment says otherwise): the suite runs on
  busy 2-core machines, where a BLAS thread per core fights the other processes for the cores and
  everything slows down several-fold.  No test depends on the thread count.
"""

from __future__ import annotations

import os
import sys
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
_module_seconds: dict[str, float] = defaultdict(float)

#: Test modules that only the full tier runs (their every test is marked ``full``).
FULL_MODULES = {"test_browser.py", "test_book.py", "test_ipywidgets7.py", "test_parallel_mpi.py"}
#: The tests that read a run of the executed book stand in for nbval's run of these notebooks.
BOOK_RUNS = "tests/test_book.py::test_the_lesson_notebook_runs_top_to_bottom"


def _full_only(item) -> bool:
    return (str(item.fspath).endswith(".ipynb") or os.path.basename(str(item.fspath)) in FULL_MODULES
            or item.get_closest_marker("slow") is not None or item.get_closest_marker("early") is not None)


def _lessons_the_book_runs(items) -> set[str]:
    """The lesson notebooks whose top-to-bottom run in the book's build is among ``items``."""
    return {it.callspec.params["lesson"] for it in items
            if it.nodeid.split("[")[0] == BOOK_RUNS and hasattr(it, "callspec")}


def pytest_configure(config):
    if config.pluginmanager.hasplugin("nbval"):
        opt = config.option
        if not (opt.nbval or opt.nbval_lax):
            opt.nbval_lax = True
        opt.nbval_current_env = True
        if opt.nbval_cell_timeout == 2000:  # nbval's own default: not set on the command line
            opt.nbval_cell_timeout = CELL_TIMEOUT_S


@pytest.hookimpl(tryfirst=True)       # before -m selects: the tier markers are set here
def pytest_collection_modifyitems(config, items):
    from course.devices import gpu_available, gpu_unavailable_reason

    full = pytest.mark.full
    for item in items:
        if _full_only(item):
            item.add_marker(full)
    in_book = _lessons_the_book_runs(items) if not gpu_available() else set()
    skipped = [it for it in items if hasattr(it, "cell")
               and (runs_in_lesson_only(it.fspath, it.cell.get("metadata", {}).get("tags"))
                    or _is_lesson_notebook(it.fspath) and os.path.basename(str(it.fspath)) in in_book)]
    if skipped:
        config.hook.pytest_deselected(items=skipped)
        left_out = {id(it) for it in skipped}
        items[:] = [it for it in items if id(it) not in left_out]

    # the tests that read an early run go last, so that the run has the rest of the session to finish in
    items.sort(key=lambda it: it.get_closest_marker("early") is not None)

    if gpu_available():
        return
    skip = pytest.mark.skip(reason=f"needs a GPU: {gpu_unavailable_reason()}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _is_lesson_notebook(path) -> bool:
    parts = os.path.normpath(str(path)).split(os.sep)
    return parts[-2:-1] == ["notebooks"] and parts[-1].endswith(".ipynb")


#: The early runs, longest first (one worker thread runs them in this order).
EARLY_ORDER = ("ipywidgets7", "book", "gpu-run dry run", "nbgrader", "gpu-run out of budget")


def pytest_collection_finish(session):
    """Start the early runs that the selected tests read (``tests/_early.py``)."""
    early = sys.modules.get("_early")
    if early is None or session.config.option.collectonly:
        return
    wanted = {m.args[0] for it in session.items for m in it.iter_markers("early")}
    for name in sorted(wanted, key=lambda n: EARLY_ORDER.index(n) if n in EARLY_ORDER else len(EARLY_ORDER)):
        early.start(name)


def pytest_sessionfinish(session, exitstatus):
    early = sys.modules.get("_early")
    if early is not None:
        early.shutdown()


def pytest_runtest_logreport(report):
    _module_seconds[report.nodeid.split("::")[0]] += report.duration


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
    tr = terminalreporter
    if _module_seconds:
        tr.section("time per test module, longest first (setup, call and teardown; an early run's test "
                   "waits on it)")
        for mod, s in sorted(_module_seconds.items(), key=lambda kv: -kv[1]):
            tr.write_line(f"{s:7.1f} s  {mod}")
        tr.write_line(f"{sum(_module_seconds.values()):7.1f} s  in all")
    early = sys.modules.get("_early")
    if early is not None and early.seconds():
        tr.section("early runs (tests/_early.py: subprocesses run beside the suite, one after another)")
        for name, s in early.seconds().items():
            tr.write_line(f"{s:7.1f} s  {name}")
    if _nb_seconds:
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

