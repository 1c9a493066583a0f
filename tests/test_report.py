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
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    assert "index.html" in out.stdout and (tmp_path / "results.json").exists()
    lst = subprocess.run([sys.executable, "-m", "course", "report", "--list"], capture_output=True,
                         text=True, timeout=600)
    assert "matmul_sweep" in lst.stdout


def _folder_with(folder, name):
    folder.mkdir()
    (folder / name).write_text("x")
    return folder


@pytest.mark.parametrize("make_out, match", [
    (lambda tmp: "", "must name a folder"),
    (lambda tmp: (tmp / "a_file").write_text("x") and tmp / "a_file", "is a file"),
    (lambda tmp: _folder_with(tmp / "mine", "thesis.tex"), "not a report of this course"),
    (lambda tmp: (tmp / "f").write_text("x") and tmp / "f" / "sub", "cannot be written|is a file"),
])
def test_a_bad_out_folder_is_refused_before_anything_is_measured(tmp_path, monkeypatch, make_out, match):
    import course.report as report

    ran = []
    monkeypatch.setattr(report, "discover", lambda: {"x": report.Experiment("x", "x", "00", lambda **k: ran.append(1))})
    with pytest.raises(BadInputError, match=match):
        run_report(make_out(tmp_path), only=["x"], show_progress=False)
    assert ran == []


def test_only_with_no_names_is_refused(tmp_path):
    with pytest.raises(BadInputError, match="at least one experiment"):
        run_report(tmp_path, only=[], show_progress=False)


def _fake_experiments(monkeypatch, names_and_runs):
    import course.report as report

    exps = {name: report.Experiment(name, name, "00", run) for name, run in names_and_runs}
    monkeypatch.setattr(report, "discover", lambda: exps)


def _ok_run(devices, quick, progress):
    from course.results import ResultSet

    rs = ResultSet("fine")
    rs.add(device="cpu", n=1, median_s=0.1)
    return rs


def _failing_run(devices, quick, progress):
    raise RuntimeError("this experiment breaks")


def test_a_failing_experiment_and_a_nan_reference_lose_nothing(tmp_path, monkeypatch):
    import course.results as results
    from course.results import ResultSet

    refdir = tmp_path / "refs"
    refdir.mkdir()
    ref = ResultSet("fine", provenance=results.provenance() | {"gpus": [{"name": "Test GPU"}]})
    ref.add(device="gpu", n=1, median_s=float("nan"))
    ref.save(refdir / "fine__test-gpu.json")
    monkeypatch.setattr(results, "REFERENCE_DIR", refdir)
    _fake_experiments(monkeypatch, [("broken", _failing_run), ("fine", _ok_run)])
    out = tmp_path / "out"
    run_report(out, quick=True, show_progress=False)
    doc = json.loads((out / "results.json").read_text())
    assert doc["failures"] == ["broken"]
    assert {s["experiment"] for s in doc["result_sets"]} == {"fine"}
    assert any(s["source"] == "reference" and s["records"][0]["median_s"] == "NaN" for s in doc["result_sets"])
    assert (out / "results" / "fine.json").is_file() and "this experiment breaks" in (out / "index.html").read_text()


def test_a_second_run_into_the_same_folder_replaces_the_first_whole(tmp_path, monkeypatch):
    _fake_experiments(monkeypatch, [("fine", _ok_run)])
    out = tmp_path / "out"
    run_report(out, quick=True, show_progress=False)
    (out / "stale_experiment.png").write_bytes(b"old")
    (out / "results" / "stale_experiment.json").write_text("{}")
    run_report(out, quick=True, show_progress=False)
    assert not (out / "stale_experiment.png").exists() and not (out / "results" / "stale_experiment.json").exists()
    assert (out / "results" / "fine.json").is_file()
