"""The headless report: every registered experiment, index.html + results.json with provenance."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from course.errors import BadInputError
from course.report import discover, run_report


def test_every_lesson_module_registers_its_experiments():
    exps = discover()
    assert "matmul_sweep" in exps
    for exp in exps.values():
        assert exp.title and exp.lesson and callable(exp.run)


def test_report_writes_html_json_and_pngs(tmp_path):
    index = run_report(tmp_path, quick=True, only=["matmul_sweep"], show_progress=False)
    html = index.read_text()
    assert "Matrix multiply" in html and "<img src='matmul_sweep.png'" in html
    assert (tmp_path / "matmul_sweep.png").stat().st_size > 1000
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["failures"] == [] and doc["quick"] is True
    assert doc["provenance"]["cpu"]["model"]
    sets = [s for s in doc["result_sets"] if s["experiment"] == "matmul_sweep"]
    assert sets and sets[0]["records"] and sets[0]["provenance"]["libraries"]["numpy"]


def test_unknown_experiment_names_the_known_ones(tmp_path):
    with pytest.raises(BadInputError, match="unknown experiment"):
        run_report(tmp_path, only=["nope"], show_progress=False)


def test_recording_references_without_a_gpu_is_refused(tmp_path):
    from course import gpu_available

    if gpu_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(BadInputError, match="needs a GPU"):
        run_report(tmp_path, only=["matmul_sweep"], record_reference=True, show_progress=False)


def test_command_line_report_runs(tmp_path):
    out = subprocess.run([sys.executable, "-m", "course", "report", "--quick", "--only", "matmul_sweep",
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "index.html" in out.stdout and (tmp_path / "results.json").exists()
    lst = subprocess.run([sys.executable, "-m", "course", "report", "--list"], capture_output=True,
                         text=True, timeout=120)
    assert "matmul_sweep" in lst.stdout
