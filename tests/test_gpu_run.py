"""The GPU run, rehearsed on the CPU: the benchmarks' GPU branches and the report's on the stand-in GPU, and
``tools/gpu_run.sh --dry-run`` end to end (its steps, its deadlines, its two files); the dry runs start when
collection ends and run beside the rest of the suite (``tests/_early.py``)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tarfile
from pathlib import Path

import _early
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


def _dry_run(out: Path, *args: str, timeout: float = 1500):
    """``tools/gpu_run.sh --dry-run out *args``, ready to run (the environment read now)."""
    env = dict(os.environ, PYTHON=sys.executable)
    env.pop("COURSE_STANDIN_GPU", None)
    argv = ["bash", str(ROOT / "tools" / "gpu_run.sh"), "--dry-run", str(out), *args]
    return lambda: _early.run(argv, timeout=timeout, env=env, cwd=ROOT)


def _prepare_dry_run(*args: str, timeout: float = 1500):
    def prepare():
        out = _early.scratch("gpu-run") / "out"
        run = _dry_run(out, *args, timeout=timeout)
        return lambda: (out, run())
    return prepare


# Both dry runs start when collection ends and run beside the rest of the suite (tests/_early.py).
_early.job("gpu-run dry run", _prepare_dry_run())
_early.job("gpu-run out of budget", _prepare_dry_run("--budget", "1", timeout=600))


def _references() -> dict:
    return {p: p.stat().st_mtime for p in (ROOT / "course" / "reference").rglob("*.json")}


_REFERENCES_AT_START = _references()    # before any dry run could start


@pytest.mark.slow
@pytest.mark.early("gpu-run dry run")
def test_the_dry_run_runs_every_step_on_the_stand_in_and_leaves_two_files():
    out, res = _early.result("gpu-run dry run")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["gpu_run.tar.gz", "summary.md"]
    summary = (out / "summary.md").read_text()
    assert "DRY RUN" in summary and "no number here is a GPU measurement" in summary
    for step in ("probe", "gpu-tests", "bench-scan", "bench-step", "latency", "record backprop_train_step",
                 "record bppsa_rnn", "record scan_sweep", "timelines"):
        assert f"| {step} |" in summary, step
    assert "| failed" not in summary
    with tarfile.open(out / "gpu_run.tar.gz") as tar:
        names = tar.getnames()
    assert "probe.json" in names and "summary.json" in names
    assert any(n.startswith("logs/") and n.endswith("-record backprop_train_step.txt") for n in names)
    recorded = {n.split("/")[-1].split("__")[0] for n in names if n.startswith("reference/")}
    assert {"backprop_train_step", "launch_latency", "bppsa_rnn", "scan_sweep"} <= recorded
    assert _references() == _REFERENCES_AT_START              # the shipped references are untouched


@pytest.mark.early("gpu-run out of budget")
def test_a_run_out_of_budget_starts_no_more_steps_and_still_leaves_its_two_files():
    out, res = _early.result("gpu-run out of budget")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    summary = (out / "summary.md").read_text()
    assert summary.count("not started") >= 5 and "| record bppsa_rnn | skipped |" in summary
    assert sorted(p.name for p in out.iterdir()) == ["gpu_run.tar.gz", "summary.md"]
