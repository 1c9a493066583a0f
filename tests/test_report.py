"""The headless report: every registered experiment, index.html + results.json with provenance."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time

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


@pytest.mark.slow
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
    assert any(s["source"] == "reference" and not s["records"] and any("has nan in 'median_s'" in n for n in s["notes"])
               for s in doc["result_sets"])          # a NaN is no measurement: left out of the figure, with a note
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


def test_files_of_the_report_are_as_readable_as_its_pngs(tmp_path, monkeypatch):
    _fake_experiments(monkeypatch, [("fine", _ok_run)])
    out = tmp_path / "out"
    run_report(out, quick=True, show_progress=False)
    mode = os.umask(0o022)
    os.umask(mode)
    for p in [out / "index.html", out / "results.json", out / "results" / "fine.json"]:
        assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~mode, p
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~mode


def test_user_files_beside_an_earlier_report_are_kept(tmp_path, monkeypatch):
    _fake_experiments(monkeypatch, [("fine", _ok_run)])
    out = tmp_path / "out"
    run_report(out, quick=True, show_progress=False)
    (out / "my_notes.txt").write_text("mine")
    run_report(out, quick=True, show_progress=False)
    assert (out / "my_notes.txt").read_text() == "mine" and (out / "results" / "fine.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no working folder left behind


# A real report run, from the command line, with one fast experiment (matmul_sweep) and one that waits
# to be stopped: the test signals it once the first has finished.
_RUN_UNTIL_STOPPED = """
import pathlib, sys, time
import course.report as report
from course.results import ResultSet

@report.experiment("zz_waits_to_be_stopped", title="waits", lesson="99")
def waits(devices, quick, progress):
    pathlib.Path(sys.argv[1]).write_text("started")
    time.sleep(300)
    return ResultSet("zz_waits_to_be_stopped")

from course.__main__ import main
sys.exit(main(["report", "--quick", "--only", "matmul_sweep", "zz_waits_to_be_stopped", "--out", sys.argv[2]]))
"""


def _folder_contents(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_report_keeps_the_earlier_one_and_its_own_results(tmp_path, monkeypatch, sig):
    _fake_experiments(monkeypatch, [("fine", _ok_run)])
    out = tmp_path / "report"
    run_report(out, quick=True, show_progress=False)
    earlier = _folder_contents(out)
    marker = tmp_path / "second_experiment_started"
    proc = subprocess.Popen([sys.executable, "-c", _RUN_UNTIL_STOPPED, str(marker), str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(6000):
            if marker.exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert marker.exists(), proc.communicate()[1]
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 128 + sig, err
    assert _folder_contents(out) == earlier  # the earlier report, byte for byte
    saved = [p for p in tmp_path.iterdir() if p.name.startswith("report.interrupted-")]
    assert len(saved) == 1 and str(saved[0]) in err and "was not changed" in err
    assert (saved[0] / "results" / "matmul_sweep.json").is_file()
    assert "stopped by SIG" in (saved[0] / "index.html").read_text()
    assert json.loads((saved[0] / "results.json").read_text())["interrupted"]
    rerun = subprocess.run([sys.executable, "-m", "course", "report", "--quick", "--only", "matmul_sweep",
                            "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stderr
    assert (out / "results" / "matmul_sweep.json").is_file() and not (out / "results" / "fine.json").exists()
    assert not list(tmp_path.glob(".report.*"))  # no working folder left behind


def test_a_run_killed_outright_leaves_its_working_folder_to_the_next_run(tmp_path, monkeypatch):
    _fake_experiments(monkeypatch, [("fine", _ok_run)])
    out = tmp_path / "report"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = tmp_path / f".report.running-{int(dead.stdout)}-abc123"
    (left / "results").mkdir(parents=True)
    (left / "results" / "done.json").write_text("{}")
    run_report(out, quick=True, show_progress=False)
    assert (out / "results" / "fine.json").is_file() and not left.exists()
    kept = list(tmp_path.glob("report.interrupted-*"))
    assert len(kept) == 1 and (kept[0] / "results" / "done.json").read_text() == "{}"


def test_a_folder_that_cannot_be_moved_gets_its_report_replaced_in_place(tmp_path, monkeypatch):
    import course.report as report

    _fake_experiments(monkeypatch, [("fine", _ok_run)])
    out = tmp_path / "out"
    run_report(out, quick=True, show_progress=False)
    (out / "stale.png").write_bytes(b"old")
    (out / "mine.txt").write_text("mine")
    real_rename = os.rename

    def rename(src, dst):           # as for a mount point: the folder itself cannot move
        if str(src) == str(out):
            raise OSError(16, "Device or resource busy")
        return real_rename(src, dst)

    monkeypatch.setattr(report.os, "rename", rename)
    run_report(out, quick=True, show_progress=False)
    assert sorted(p.name for p in out.iterdir()) == ["index.html", "mine.txt", "results", "results.json"]
    assert (out / "results" / "fine.json").is_file() and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_an_experiment_whose_results_carry_another_name_fails_with_the_fix(tmp_path, monkeypatch):
    """Its references would be recorded under one name and looked for under another: refused, saying how."""
    _fake_experiments(monkeypatch, [("misnamed", _ok_run)])
    out = tmp_path / "out"
    run_report(out, quick=True, show_progress=False)
    assert json.loads((out / "results.json").read_text())["failures"] == ["misnamed"]
    assert "name it &#x27;misnamed&#x27;" in (out / "index.html").read_text()
