"""``python -m course gpu-check``: without a GPU it says so first, and lists every GPU test it would run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import course
from course.gpu_machine import NO_GPU_STATUS, TARGETS, headless_imports, pytest_gpu_command
from course.report import discover


@pytest.mark.slow
def test_headless_paths_import_no_widget_or_notebook_package():
    assert headless_imports() == []


def test_gpu_tests_run_without_the_projects_pytest_options_so_nbval_is_not_needed():
    cmd = pytest_gpu_command()
    assert cmd[cmd.index("-m", 3) + 1] == "gpu" and "addopts=" in cmd
    assert "--continue-on-collection-errors" in cmd


def test_every_target_of_the_issue_has_a_line():
    assert {"train_step_vs_torch", "relu_vs_copy", "block_scan_vs_cumsum", "bppsa_vs_sequential",
            "bppsa_vs_cudnn", "latency_crossover_roofline"} == set(TARGETS)


@pytest.fixture(scope="module")
def no_gpu_run(tmp_path_factory):
    if course.gpu_available():
        pytest.skip("a GPU answers here: the no-GPU mode is not what runs")
    out = tmp_path_factory.mktemp("gpu-check")
    res = subprocess.run([sys.executable, "-m", "course", "gpu-check", "--out", str(out)],
                         capture_output=True, text=True, timeout=600)
    return res, out


@pytest.mark.slow
def test_without_a_gpu_the_check_says_so_first_and_exits_with_its_own_status(no_gpu_run):
    res, out = no_gpu_run
    assert res.returncode == NO_GPU_STATUS, res.stderr[-2000:]
    assert res.stdout.splitlines()[0].startswith("GPU check: NO GPU ANSWERED")
    assert "NO GPU ANSWERED" in res.stdout.splitlines()[-1]
    summary = (out / "summary.md").read_text()
    assert summary.splitlines()[2].startswith("**NO GPU ANSWERED:")
    doc = json.loads((out / "summary.json").read_text())
    assert doc["gpu"] is False and doc["targets"] == {} and doc["no_gpu_reason"]
    assert doc["environment"]["headless_imports"] == []


@pytest.mark.slow
def test_the_listed_gpu_tests_cover_every_experiment_of_the_report(no_gpu_run):
    _, out = no_gpu_run
    listed = (out / "gpu-tests.txt").read_text()
    missing = [name for name in discover()
               if f"test_experiment_runs_on_the_gpu_beside_the_cpu[{name}]" not in listed]
    assert not missing
    assert "test_report_quick_on_the_gpu_has_no_failed_experiment" in listed


def test_one_failing_target_is_recorded_and_the_others_still_measured(monkeypatch):
    import course.gpu_machine as g

    def boom(quick):
        raise RuntimeError("cuDNN said no")

    monkeypatch.setattr(g, "_train_step", lambda quick: g._target(1.1, 1.2, "<=", "x"))
    monkeypatch.setattr(g, "_relu", lambda quick: g._target(0.8, 0.85, ">=", ""))
    monkeypatch.setattr(g, "_block_scan", lambda quick: g._target(None, 0.5, ">=", ""))
    monkeypatch.setattr(g, "_bppsa", boom)
    monkeypatch.setattr(g, "_reported", lambda quick: {"value": None, "met": None})
    out = g.measure_targets(quick=True, progress=lambda s: None)
    assert set(out) == set(TARGETS)
    assert out["train_step_vs_torch"]["met"] is True and out["relu_vs_copy"]["met"] is False
    assert out["block_scan_vs_cumsum"]["met"] is None            # not measured is not "met"
    assert "cuDNN said no" in out["bppsa_vs_sequential"]["error"] and out["bppsa_vs_cudnn"]["met"] is False
    assert all(t["what"] == TARGETS[k] for k, t in out.items())
