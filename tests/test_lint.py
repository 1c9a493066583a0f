"""The house rules that a tool can check: ruff, over the package, the tests, the benchmarks and the tools."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (it comes with the test extra: pip install -e '.[test]')")
    out = subprocess.run([ruff, "check", "course", "tests", "benchmarks", "tools", "conftest.py"],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
