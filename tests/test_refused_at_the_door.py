"""Every big allocation refused by its size first, no hang, errors in words for bad arguments and command
lines, and a report that keeps what it saved (issue 38's calls, and more of each class)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from course.errors import BadInputError, DeviceMemoryError

ROOT = Path(__file__).resolve().parents[1]
HUGE = 10**400


# ----------------------------------------------------------------- sizes refused before anything is built

def _memory_calls():
    from course.backprop import MLP
    from course.backprop.fast_step import FastStep
    from course.bppsa import backprop_sequential
    from course.bppsa.fast import RNNBackwardPlan, backprop_chunked, rnn_hidden_gradients
    from course.kernels.reference import relu_map
    from course.kernels.simulator import simulate
    from course.parallel.tensor_parallel import simulate_tensor_parallel
    from course.recurrences import forward, init_params
    from course.scan import interval_leaves
    from course.scan.lookback import lookback_model

    big = np.broadcast_to
    return {
        "FastStep fused": lambda: FastStep(MLP([64, 10]), "fused", batch=10**9),
        "FastStep no_readback": lambda: FastStep(MLP([784, 1000, 10]), "no_readback", batch=10**7),
        "lookback_model": lambda: lookback_model(big(1.0, (10**10,)), tile=10**9),
        "backprop_chunked": lambda: backprop_chunked(big(np.eye(64), (10**8, 64, 64)), np.ones(64)),
        "rnn_hidden_gradients": lambda: rnn_hidden_gradients(big(0.5, (10**6, 1000, 64)), np.eye(64),
                                                             np.ones((1000, 64))),
        "RNNBackwardPlan": lambda: RNNBackwardPlan(10**6, 64, 64, np.eye(64)),
        "simulate_tensor_parallel": lambda: simulate_tensor_parallel([4, 6, 3], big(1.0, (10**9, 4)),
                                                                     big(0, (10**9,)), 2),
        "interval_leaves": lambda: interval_leaves(10**12),
        "backprop_sequential": lambda: backprop_sequential(big(np.eye(4), (10**10, 4, 4)), np.ones(4)),
        "selective forward": lambda: forward(init_params(2, 4, 1), big(0.0, (10**6, 10**6, 2))),
        "kernel simulator": lambda: simulate(relu_map, 1, 4, out=np.zeros(4), a=big(np.float32(1), (10**12,))),
    }


MEMORY = ["FastStep fused", "FastStep no_readback", "RNNBackwardPlan", "backprop_chunked", "backprop_sequential",
          "interval_leaves", "kernel simulator", "lookback_model", "rnn_hidden_gradients", "selective forward",
          "simulate_tensor_parallel"]


def test_the_memory_cases_are_the_calls_listed():
    assert sorted(_memory_calls()) == MEMORY


@pytest.mark.parametrize("name", MEMORY)
def test_an_allocation_too_big_is_refused_by_its_size_first(name):
    with pytest.raises(DeviceMemoryError, match="GiB"):
        _memory_calls()[name]()


def test_full_nbytes_counts_a_broadcast_view_by_its_size():
    from course.limits import full_nbytes

    assert full_nbytes(np.broadcast_to(np.float64(1), (1000, 1000)), np.zeros(3, np.float32), [1, 2]) == 8_000_012


# ----------------------------------------------------------------- no hang: refused past an estimate

@pytest.mark.slow
def test_the_lookback_model_refuses_more_tiles_than_it_steps_through_quickly_and_names_the_tile():
    from course.scan.lookback import MAX_TILES, lookback_model

    with pytest.raises(BadInputError, match=r"tile=16 or more"):
        lookback_model(np.ones(10**6))
    out, stats = lookback_model(np.arange(MAX_TILES * 2), tile=2, seed=1)      # the most it takes: exact
    np.testing.assert_array_equal(out, np.cumsum(np.arange(MAX_TILES * 2)))
    assert stats["waits"] > 0


def test_the_lookback_model_keeps_a_bounded_number_of_tiles_running():
    from course.scan.lookback import RESIDENT, lookback_model

    _, stats = lookback_model(np.ones(40_000, dtype=np.int64), tile=4, window=1, seed=1)
    assert 1 < stats["longest_lookback"] <= RESIDENT                   # a look-back passes only running tiles


@pytest.mark.widgets
def test_the_checkpoint_app_counts_a_busy_machine_in_its_estimate(monkeypatch):
    import course.backprop.widgets as bw

    monkeypatch.setattr(bw, "step_rate", lambda sizes, dtype: 1e12)
    monkeypatch.setattr(bw, "machine_load", lambda: 1e6)             # a million processes per core
    app = bw.checkpoint_app(depth=4, every=2, width=64, batch=32)
    assert isinstance(app.last_error, BadInputError) and "busy machine" in str(app.last_error)


# ----------------------------------------------------------------- argument rules: in words, by name

@pytest.mark.parametrize("call, match", [
    (lambda: __import__("course.parallel", fromlist=["x"]).model_time("ring", 4, 1e6, HUGE, 1e-9), "alpha.*digits"),
    (lambda: __import__("course.throughput.batch", fromlist=["x"]).littles_law(HUGE, 1.0), "throughput_per_s"),
    (lambda: __import__("course.predictions", fromlist=["x"]).predict("x", HUGE), "prediction"),
    (lambda: __import__("course.predictions", fromlist=["x"]).predict("x", np.array([1.0])), "prediction"),
    (lambda: __import__("course.recurrences", fromlist=["x"]).solve_recurrence(
        np.ones(3), np.ones(3), method=np.array(["scan", "loop"])), "method must be one of"),
    (lambda: __import__("course.scan.lookback", fromlist=["x"]).lookback_model(np.arange(1, 11), seed=-1), "seed"),
    (lambda: __import__("course.kernels", fromlist=["x"]).grade("map", None, seed=-1), "seed"),
    (lambda: __import__("course.kernels.tuning", fromlist=["x"]).grade_tuning("reduction", None, seed="x"), "seed"),
    (lambda: __import__("course.recurrences", fromlist=["x"]).init_params(seed="x"), "seed"),
])
def test_an_argument_rule_refuses_overflows_non_scalars_and_bad_seeds_by_name(call, match):
    with pytest.raises(BadInputError, match=match):
        call()


@pytest.mark.parametrize("W, match", [("list", "array"), (None, "array"), ("int", "floating-point"),
                                      ("wrong shape", "shape")])
def test_an_rnn_backward_plan_refuses_a_weight_that_is_not_a_float_array(W, match):
    from course.bppsa.fast import RNNBackwardPlan

    given = {"list": np.eye(3).tolist(), None: None, "int": np.eye(3, dtype=int), "wrong shape": np.eye(2)}[W]
    with pytest.raises(BadInputError, match=match):
        RNNBackwardPlan(9, 2, 3, given)


# ----------------------------------------------------------------- command lines: a message, never a traceback

def _run(*args, cwd=None):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600, cwd=cwd)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["report", "gpu-check"])
def test_a_command_refuses_an_out_that_cannot_be_a_folder_in_words(command, tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    extra = ["--quick", "--only", "matmul_sweep"] if command == "report" else ["--skip", "tests", "benchmarks"]
    for out in (str(a_file), str(tmp_path / ("r" * 300)), str(a_file / "below")):
        run = _run("-m", "course", command, *extra, "--out", out, cwd=tmp_path)
        assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
        assert "error: --out" in run.stderr
    assert a_file.read_text() == "mine"


def test_validate_output_folder_names_what_is_wrong(tmp_path):
    from course.errors import validate_output_folder

    assert validate_output_folder(tmp_path / "new" / "report") == (tmp_path / "new" / "report").absolute()
    for out, match in (("", "must name a folder"), (None, "must name a folder"), ("x" * 300, "characters"),
                       (tmp_path, None)):
        if match is None:
            validate_output_folder(out)
        else:
            with pytest.raises(BadInputError, match=match):
                validate_output_folder(out)


@pytest.mark.slow
def test_build_book_refuses_a_file_as_its_out(tmp_path):
    pytest.importorskip("nbconvert")
    a_file = tmp_path / "book"
    a_file.write_text("mine")
    run = _run(str(ROOT / "tools" / "build_book.py"), "--out", str(a_file), "--lessons", "00")
    assert run.returncode == 1 and "Traceback" not in run.stderr and "is a file" in run.stderr
    assert a_file.read_text() == "mine"


def test_repository_links_stops_in_words_on_a_missing_or_damaged_file(tmp_path):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import repository_links as links
    finally:
        sys.path.remove(str(ROOT / "tools"))
    url = "https://github.com/owner/name"
    (tmp_path / "junk.toml").write_text("[[[")
    (tmp_path / "urls.toml").write_text("[project]\nurls = 3\n")
    (tmp_path / "junk.ipynb").write_text("{not json")
    (tmp_path / "list.ipynb").write_text("[1, 2]")
    (tmp_path / "binary.md").write_bytes(b"\xff\xfe\x00")
    calls = [lambda: links.repository_url(tmp_path / "missing.toml"),
             lambda: links.repository_url(tmp_path / "junk.toml"), lambda: links.repository_url(tmp_path / "urls.toml"),
             lambda: links.notebook_text(tmp_path / "junk.ipynb", url),
             lambda: links.notebook_text(tmp_path / "list.ipynb", url),
             lambda: links.readme_text(url, tmp_path / "binary.md"), lambda: links.readme_text(url, tmp_path / "no.md")]
    for call in calls:
        with pytest.raises(SystemExit) as stop:
            call()
        assert isinstance(stop.value.code, str) and ("tmp" in stop.value.code or ".toml" in stop.value.code)


# ----------------------------------------------------------------- the report keeps what it saved

def test_a_report_stopped_after_saving_a_result_but_before_its_figure_keeps_that_result(tmp_path, monkeypatch):
    import course.report as report
    from course.report import ReportInterrupted, run_report
    from course.results import ResultSet

    def run(devices, quick, progress):
        rs = ResultSet("saved_then_stopped")
        rs.add(device="cpu", n=1, median_s=0.1)
        return rs

    def plot(rs, refs):
        raise KeyboardInterrupt                            # as a Ctrl-C while the figure is drawn

    exp = report.Experiment("saved_then_stopped", "saved then stopped", "00", run, plotter=plot)
    monkeypatch.setattr(report, "discover", lambda: {exp.name: exp})
    with pytest.raises(ReportInterrupted) as stop:
        run_report(tmp_path / "out", quick=True, show_progress=False)
    assert "before any experiment finished" not in str(stop.value)
    assert "saved_then_stopped" in str(stop.value) and stop.value.saved_to is not None
    assert (stop.value.saved_to / "results" / "saved_then_stopped.json").is_file()
    assert not (tmp_path / "out").exists()                 # nothing of an earlier report was there to change
