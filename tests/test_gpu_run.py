"""The GPU run, rehearsed on the CPU: the benchmarks' GPU branches and the report's on the stand-in GPU, and
``tools/gpu_run.sh --dry-run`` end to end (its steps, its deadlines, its two files)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script(name: str):
    path = ROOT / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_gpu_step_benchmark_runs_its_gpu_branch_on_the_stand_in(standin_gpu, tmp_path, capsys):
    out = tmp_path / "step.json"
    assert _script("bench_gpu_step").main(["--smoke", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Stand-in GPU" in text and "NUMERICS FAILED" not in text
    doc = json.loads(out.read_text())
    rungs = {r["rung"] for r in doc["records"]}
    assert {"eager", "no_readback", "fused", "graph"} <= rungs
    graph = [r for r in doc["records"] if r["rung"] == "graph"]
    assert all(r["gpu_kernels"] == 16 for r in graph)          # 5 per layer + the mean loss, 3 layers
    assert "Stand-in" in doc["provenance"]["gpus"][0]["name"]


@pytest.mark.slow
def test_the_gpu_scan_benchmark_runs_its_gpu_branch_on_the_stand_in(standin_gpu, tmp_path, capsys):
    out = tmp_path / "scan.json"
    assert _script("bench_gpu_scan").main(["--smoke", "--out", str(out)]) == 0
    assert "SOME DIFFER" not in capsys.readouterr().out
    records = json.loads(out.read_text())["records"]
    assert all(r["device"] == "gpu" for r in records)
    assert {r.get("check") for r in records} >= {"single-pass", "bppsa fast"}
    assert {r.get("algorithm") for r in records} >= {"copy", "single-pass", "scan-then-add", "target"}


def test_the_stand_in_s_results_never_join_the_shipped_references(standin_gpu, tmp_path):
    from course.errors import ResultsError
    from course.results import ResultSet, save_reference

    rs = ResultSet("some_experiment")
    rs.add(device="gpu", n=1, median_s=1e-3)
    with pytest.raises(ResultsError, match="stand-in"):
        save_reference(rs)
    saved = save_reference(rs, tmp_path / "ref")            # a rehearsal of the saving, elsewhere
    assert saved.parent == tmp_path / "ref" and "stand-in" in saved.name


def _dry_run(out: Path, *args: str, timeout: float = 1500) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHON=sys.executable)
    env.pop("COURSE_STANDIN_GPU", None)
    return subprocess.run(["bash", str(ROOT / "tools" / "gpu_run.sh"), "--dry-run", str(out), *args],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


def _references() -> dict:
    return {p: p.stat().st_mtime for p in (ROOT / "course" / "reference").rglob("*.json")}


@pytest.mark.slow
def test_the_dry_run_runs_every_step_on_the_stand_in_and_leaves_two_files(tmp_path):
    before = _references()
    res = _dry_run(tmp_path / "out")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["gpu_run.tar.gz", "summary.md"]
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "DRY RUN" in summary and "no number here is a GPU measurement" in summary
    for step in ("probe", "gpu-tests", "bench-scan", "bench-step", "latency", "record backprop_train_step",
                 "record bppsa_rnn", "record scan_sweep", "timelines"):
        assert f"| {step} |" in summary, step
    assert "| failed" not in summary
    with tarfile.open(tmp_path / "out" / "gpu_run.tar.gz") as tar:
        names = tar.getnames()
    assert "probe.json" in names and "summary.json" in names
    assert any(n.startswith("logs/") and n.endswith("-record backprop_train_step.txt") for n in names)
    recorded = {n.split("/")[-1].split("__")[0] for n in names if n.startswith("reference/")}
    assert {"backprop_train_step", "launch_latency", "bppsa_rnn", "scan_sweep"} <= recorded
    assert _references() == before                          # the shipped references are untouched


def test_a_run_out_of_budget_starts_no_more_steps_and_still_leaves_its_two_files(tmp_path):
    res = _dry_run(tmp_path / "out", "--budget", "1", timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert summary.count("not started") >= 5 and "| record bppsa_rnn | skipped |" in summary
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["gpu_run.tar.gz", "summary.md"]
