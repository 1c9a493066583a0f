"""Lesson 05's apps, plots, exercise checks and report registration."""

from __future__ import annotations

import numpy as np
import pytest

import course
from course.bppsa import plots as bppsa_plots
from course.bppsa import widgets as bppsa_widgets
from course.bppsa.timing import rnn_sweep, speedups


@pytest.mark.widgets
def test_tree_app_redraws_when_t_changes():
    app = bppsa_widgets.tree_app(T=3)
    first = app.image.value
    assert app.last_error is None and first
    app.controls["T"].value = 12
    assert app.last_error is None and app.calls == 2
    assert app.image.value != first


@pytest.mark.widgets
def test_timing_app_measures_and_reports_the_ratio():
    app = bppsa_widgets.timing_app(T=10, hidden=4, batch=1)
    assert app.last_error is None
    assert "T = 10," in app.html.value and "sequential backprop" in app.html.value
    before = app.image.value
    app.controls["T"].value = 30
    assert app.last_error is None and "T = 30," in app.html.value
    assert app.image.value != before


@pytest.mark.widgets
def test_timing_app_without_gpu_or_reference_says_what_to_do(monkeypatch):
    if course.gpu_available():
        pytest.skip("a GPU answers here")
    monkeypatch.setattr(bppsa_widgets, "load_reference", lambda name: [])
    app = bppsa_widgets.timing_app(T=10, hidden=4, batch=1)
    app.controls["device"].value = "gpu"
    assert isinstance(app.last_error, course.GPUUnavailableError)
    text = app.shown_error()
    assert "No GPU is available" in text and "no reference" in text.lower()
    assert app.notice.value and not app.errors.outputs     # the one "no GPU" note, not an error box


@pytest.mark.slow
@pytest.mark.widgets
def test_timing_app_without_gpu_shows_the_shipped_reference_results():
    if course.gpu_available():
        pytest.skip("a GPU answers here")
    refs = course.load_reference("bppsa_rnn")
    if not refs:
        pytest.skip("no reference results ship in this checkout")
    app = bppsa_widgets.timing_app(T=10, hidden=4, batch=1)
    app.controls["device"].value = "gpu"
    assert app.last_error is None and app.image.value
    assert "No GPU here" in app.html.value and refs[0].gpu_name in app.html.value


@pytest.mark.widgets
def test_timing_app_refuses_a_size_that_does_not_fit(monkeypatch):
    import course.bppsa.models as models

    def tiny(nbytes, device="cpu", what="", fraction=0.5):
        raise course.DeviceMemoryError(f"{what} need too much")
    monkeypatch.setattr(models, "require_fits", tiny)
    app = bppsa_widgets.timing_app(T=10, hidden=4, batch=1)
    assert isinstance(app.last_error, course.DeviceMemoryError)
    assert "need too much" in "".join(o.get("text", "") for o in app.errors.outputs)


@pytest.mark.widgets
def test_memory_app_follows_the_sliders():
    app = bppsa_widgets.memory_app()
    assert app.last_error is None and "768.0 MiB" in app.html.value      # VGG-11's first conv
    app.controls["c_out"].value = 128
    assert "1,536.0 MiB" in app.html.value


def test_speedup_figure_draws_live_ratios_and_says_there_is_no_gpu():
    rs = rnn_sweep((8, 16), hidden_size=3, batch=2, repeat=1, include_torch=False)
    assert {r["method"] for r in rs.records} == {"sequential", "scan"}
    fig = bppsa_plots.speedup_figure(rs, [])
    texts = " ".join(t.get_text() for ax in fig.axes for t in ax.texts) + fig.texts[-1].get_text()
    assert "Measured live" in texts
    if not course.gpu_available():
        assert "no reference GPU results recorded yet" in texts
    Ts, s = speedups(rs, "cpu")
    assert set(Ts) <= {8, 16} and np.all(s > 0)


def test_tree_labels_end_with_every_gradient():
    labels, tr = bppsa_plots.symbolic_scan(5)
    assert labels == ["G₅", "G₄", "G₃", "G₂", "G₁", "G₀"]
    assert tr.steps == 2 * 3


def test_tree_refuses_unreadable_sizes():
    with pytest.raises(course.BadInputError, match="1 <= T <= 63"):
        bppsa_plots.tree_figure(0)


def test_checks_accept_the_solutions_and_explain_mistakes(capsys):
    from course import check

    assert check.check_bppsa_operator(lambda a, b: b @ a)
    assert not check.check_bppsa_operator(lambda a, b: a @ b)
    assert "operand order" in capsys.readouterr().out

    def stub(*args):
        raise NotImplementedError
    assert not check.check_rnn_jacobian_t(stub)
    assert "not done yet" in capsys.readouterr().out.lower()
    assert check.check_rnn_jacobian_t(lambda W, h: W.T[None] * (1 - h ** 2)[:, None, :])
    assert not check.check_rnn_jacobian_t(lambda W, h: (1 - h ** 2)[:, :, None] * W)
    assert "transpose" in capsys.readouterr().out

    def loop(J, g):
        G = np.empty((len(J) + 1, len(g)))
        G[-1] = g
        for t in range(len(J) - 1, -1, -1):
            G[t] = J[t].T @ G[t + 1]
        return G
    assert check.check_backprop_sequential(loop)
    assert not check.check_backprop_sequential(lambda J, g: loop(np.swapaxes(J, 1, 2), g))
    assert "transpose" in capsys.readouterr().out


def test_bppsa_experiment_is_registered_for_the_report():
    from course.report import discover

    exp = discover()["bppsa_rnn"]
    assert exp.lesson == "05" and exp.plotter is not None


@pytest.mark.slow
def test_bppsa_batch_experiment_runs_in_the_report(tmp_path):
    import json

    from course.report import run_report

    index = run_report(tmp_path, quick=True, only=["bppsa_rnn_batch"], show_progress=False)
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["failures"] == []
    (rs,) = [s for s in doc["result_sets"] if s["experiment"] == "bppsa_rnn_batch" and s["source"] == "live"]
    assert {r["batch"] for r in rs["records"]} == {1, 16, 64}
    assert (tmp_path / "bppsa_rnn_batch.png").stat().st_size > 10_000
    assert "Lesson 05" in index.read_text()


def test_sweep_over_hidden_sizes_and_batches_records_each_setting():
    rs = rnn_sweep((6,), hidden_size=(2, 3), batch=(1, 2), repeat=1, include_torch=False)
    got = {(r["hidden_size"], r["batch"], r["method"]) for r in rs.records}
    assert got == {(h, b, m) for h in (2, 3) for b in (1, 2) for m in ("sequential", "scan")}
    ns, _ = speedups(rs, "cpu", x="hidden_size", batch=2)
    assert set(ns) <= {2, 3}
    fig = bppsa_plots.speedup_figure(rs, [], x="hidden_size", where={"batch": 2})
    assert fig.axes[0].get_xlabel() == "hidden size n"
    with pytest.raises(course.BadInputError, match="batch must be a whole number"):
        rnn_sweep((6,), batch=(0,))


@pytest.mark.gpu
@pytest.mark.widgets
def test_timing_app_on_the_gpu_measures_both_methods():
    app = bppsa_widgets.timing_app(T=10, hidden=4, batch=1)
    app.controls["device"].value = "gpu"
    assert app.last_error is None, app.last_error
    assert "GPU, T = 10," in app.html.value and app.image.value


def _fake_rnn_result(seq_s: float, scan_s: float) -> dict:
    from course.timing import Timing

    def t(v):
        return Timing(samples=np.array([v, v, v]))

    return {"forward": t(1e-3), "backward": {"sequential": t(seq_s), "scan": t(scan_s)},
            "backward_s": {"sequential": seq_s, "scan": scan_s}, "max_grad_diff": 1e-9}


@pytest.mark.widgets
@pytest.mark.parametrize("seq_s, scan_s, expect, absent", [
    (1e-3, 5e-3, "was not paid back", "came out ahead"),
    (5e-3, 1e-3, "came out ahead", "was not paid back"),
])
def test_timing_summary_follows_the_measurement_not_a_fixed_sentence(monkeypatch, seq_s, scan_s, expect, absent):
    monkeypatch.setattr(bppsa_widgets, "rnn_timings", lambda *a, **k: _fake_rnn_result(seq_s, scan_s))
    _, text = bppsa_widgets.timing_update(T=100, hidden=4, batch=1, device="cpu")
    assert expect in text and absent not in text


@pytest.mark.widgets
def test_timing_app_keeps_each_setting_and_times_long_sequences_round_by_round(monkeypatch):
    calls = []

    def fake(T, *a, **k):
        calls.append((T, k.get("repeat")))
        return _fake_rnn_result(2e-3, 1e-3)

    monkeypatch.setattr(bppsa_widgets, "rnn_timings", fake)
    app = bppsa_widgets.timing_app(T=100, hidden=4, batch=1)
    app.controls["T"].value = 30
    app.controls["T"].value = 100                        # seen before: no new measurement
    assert [c[0] for c in calls] == [100, 30] and app.last_error is None
    app.controls["T"].value = 30000                      # long: one round per call, under a progress bar
    assert app.last_error is None and all(c == (30000, 1) for c in calls[2:]) and len(calls) >= 4
