"""Colab ships ipywidgets 7.7.1: every widget-callback test (marker ``widgets``) must pass with it too.

``make test`` installs ipywidgets 7.7.1 into ``.venv-ipyw7/`` (a folder put first on
``PYTHONPATH``, so it shadows ipywidgets 8 for one pytest run in a subprocess).  Under CI
the folder must exist; elsewhere the test skips with instructions.  The run starts when collection
ends and goes on beside the rest of the suite (``tests/_early.py``); the test reads it at the end.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import _early
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHADOW = Path(os.environ.get("COURSE_IPYW7_PATH", ROOT / ".venv-ipyw7"))
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _installed() -> bool:
    return (SHADOW / "ipywidgets").is_dir()


def _prepare_run():
    """The widget tests in a pytest run of their own with ipywidgets 7.7.1 first on the path (None: not installed)."""
    if not _installed():
        return None
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SHADOW), os.environ.get("PYTHONPATH", "")]))
    # only the modules that mark a test `widgets` (every way of marking one spells it): the others would be
    # collected, at some cost, for nothing
    files = [str(p) for p in sorted((ROOT / "tests").glob("test_*.py"))
             if "mark.widgets" in p.read_text(encoding="utf-8")]

    def run():
        version = _early.run([sys.executable, "-c", "import ipywidgets; print(ipywidgets.__version__)"],
                             env=env, timeout=600)
        tests = _early.run([sys.executable, "-m", "pytest", "-q", "-m", "widgets", "-p", "no:randomly", *files],
                           env=env, timeout=2400, cwd=ROOT)
        return version, tests
    return run


_early.job("ipywidgets7", _prepare_run)


@pytest.mark.early("ipywidgets7")
def test_widget_callbacks_pass_under_ipywidgets_7_7_1():
    if not _installed():
        msg = (f"ipywidgets 7.7.1 is not installed in {SHADOW.name}/: run `make test`, or "
               f"pip install --no-deps --target {SHADOW.name} ipywidgets==7.7.1 ipython_genutils")
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    version, run = _early.result("ipywidgets7")
    assert version.stdout.strip() == "7.7.1", version.stderr
    tail = "\n".join(run.stdout.splitlines()[-25:])
    assert run.returncode == 0, f"widget tests fail under ipywidgets 7.7.1:\n{tail}\n{run.stderr[-2000:]}"
    assert " passed" in tail and "failed" not in tail, tail
