"""Subprocess runs the suite starts at its beginning and a test reads at its end.

The costliest checks are whole programs run in a subprocess (the widget tests under ipywidgets 7.7.1,
``tools/gpu_run.sh --dry-run``, the book's build): each test waits on one process.  A test module
declares such a run with :func:`job` and marks the test that reads it ``@pytest.mark.early("name")``;
when that test is selected, ``conftest.py`` starts the run as soon as collection ends, and the runs
go one after another on one worker thread, beside the rest of the suite, which runs one test at a
time (BLAS single-threaded) and so leaves the second core of a 2-core machine idle while it waits
on a notebook kernel.  The test then calls :func:`result`, which waits for the run (or, where nothing
started it, as when the test runs alone, does it there and then).  The run, its arguments and the
test's assertions are the same as when the test ran it itself; only the start moves earlier.

A job's ``prepare()`` runs in the main thread when the job is started (so it reads ``os.environ`` before
any test changes it) and returns the function the worker thread calls, or ``None`` where the run
cannot happen here (the test then says why itself).
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

_PREPARE: dict[str, Callable[[], Callable[[], Any] | None]] = {}
_STARTED: dict[str, Future] = {}
_POOL: ThreadPoolExecutor | None = None
_WAITED: dict[str, float] = {}


def job(name: str, prepare: Callable[[], Callable[[], Any] | None]) -> None:
    """Declare the run ``name``: ``prepare()`` gives the function that does it (or None: not here)."""
    _PREPARE[name] = prepare


def known() -> set[str]:
    return set(_PREPARE)


def _timed(name: str, run: Callable[[], Any]) -> Callable[[], Any]:
    def go():
        t0 = time.perf_counter()
        try:
            return run()
        finally:
            _WAITED[name] = time.perf_counter() - t0
    return go


def start(name: str) -> None:
    """Queue the run ``name`` on the worker thread (once)."""
    global _POOL
    if name in _STARTED or name not in _PREPARE:
        return
    run = _PREPARE[name]()
    future: Future = Future()
    if run is None:
        future.set_result(None)
    else:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="course-early")
        future = _POOL.submit(_timed(name, run))
    _STARTED[name] = future


def result(name: str) -> Any:
    """What the run ``name`` returned (its exception raised here), waiting for it if it is still going."""
    if name not in _STARTED:
        start(name)
    return _STARTED[name].result()


def seconds() -> dict[str, float]:
    """How long each finished run took on its thread (for the summary at the end of the session)."""
    return dict(_WAITED)


_RUNNING: set = set()


def run(argv: list[str], timeout: float, **kwargs: Any) -> subprocess.CompletedProcess:
    """``subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)``, in a process
    group of its own that :func:`shutdown` ends if the session ends first (the kernels it started too)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **kwargs)
    _RUNNING.add(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _end(proc)
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(argv, timeout, output=out, stderr=err) from None
    finally:
        _RUNNING.discard(proc)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _end(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def shutdown() -> None:
    """End what is still running (no test is left to read it: the session is over) and the worker thread."""
    for proc in list(_RUNNING):
        _end(proc)
    if _POOL is not None:
        _POOL.shutdown(wait=True, cancel_futures=True)


def scratch(prefix: str) -> Path:
    """A fresh folder for one run, removed when the session ends."""
    path = Path(tempfile.mkdtemp(prefix=f"course-{prefix}-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


# ----------------------------------------------------------------- the book, read by two test modules

ROOT = Path(__file__).resolve().parents[1]


def _prepare_book() -> Callable[[], Any]:
    """The whole book, built once, CPU only (so every reference curve is an overlay), into a fresh folder,
    every lesson tried even when one fails (``build.json`` says which)."""
    import sys

    out = scratch("book")
    env = dict(os.environ, COURSE_DISABLE_GPU="1")
    timeout = os.environ.get("COURSE_CELL_TIMEOUT_S", "300")
    argv = [sys.executable, str(ROOT / "tools" / "build_book.py"), "--out", str(out), "--keep-going",
            "--timeout", timeout]
    return lambda: (out, run(argv, timeout=3000, cwd=ROOT, env=env))


job("book", _prepare_book)
