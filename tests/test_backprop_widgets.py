"""Lesson 01's apps keep what they measured: a view-only control and a setting seen before redraw from it."""

from __future__ import annotations

import pytest

import course.backprop.widgets as bw

pytestmark = pytest.mark.widgets


@pytest.mark.slow
def test_checkpoint_app_moves_k_without_timing_the_network_again(monkeypatch):
    calls = []
    real = bw.checkpoint_sweep
    monkeypatch.setattr(bw, "checkpoint_sweep", lambda **kw: calls.append(kw) or real(**kw))
    app = bw.checkpoint_app(depth=4, every=2, width=64, batch=32)
    assert app.view_only == ("every",) and len(calls) == 1
    for k in (1, 3, 5, 2):
        app.controls["every"].value = k
        assert app.last_error is None and f"k = {k}:" in app.html.value
    assert len(calls) == 1
    assert "Measured step time at k = 2" in app.html.value
    app.controls["depth"].value = 5                     # a new network: measured once more
    assert len(calls) == 2


def test_checkpoint_app_says_which_k_it_timed_and_its_strip_says_its_own_takeaway():
    app = bw.checkpoint_app(depth=15, every=5, width=64, batch=32)
    assert app.last_error is None
    assert "k = 5 was not timed" in app.html.value and "Measured step time at k = 4" in app.html.value
    said = app.takeaway.value
    # the figure's own sentence, not the fallback reading the strip of blocks as a bar chart ("9 (), 1")
    assert "The strip shows k = 5" in said and "()" not in said and "Largest value" not in said, said
    assert "holds the least activation memory" in said
    app.controls["every"].value = 4
    assert "was not timed" not in app.html.value and "The strip shows k = 4" in app.takeaway.value


def test_checkpointing_memory_measured_by_tracemalloc_follows_the_activations_held():
    """The traced peak falls where the counted activations fall (it once stayed flat: it counted one new
    copy of every gradient)."""
    from course.backprop.bench import checkpoint_sweep

    rs = checkpoint_sweep(depth=15, width=64, batch=64, ks=[1, 4], repeat=3, budget_s=0.2)
    full, sqrt = sorted(rs.records, key=lambda r: r["every"])
    assert sqrt["peak_activation_bytes"] < full["peak_activation_bytes"]
    assert sqrt["traced_peak_bytes"] < 0.85 * full["traced_peak_bytes"]


@pytest.mark.slow
def test_training_app_redraws_a_setting_it_trained_before_without_training_again(monkeypatch):
    calls = []
    real = bw.train
    monkeypatch.setattr(bw, "train", lambda *a, **k: calls.append(1) or real(*a, **k))
    app = bw.training_app(hidden=16, epochs=1)
    app.controls["epochs"].value = 2
    app.controls["epochs"].value = 1
    assert len(calls) == 2 and app.last_error is None
    assert "trained earlier with these settings" in app.html.value


def test_step_time_app_says_how_the_measured_ratio_compares_with_the_counted_one():
    app = bw.step_time_app(width=32, depth=1, batch=16)
    assert app.last_error is None
    text = app.html.value
    assert "the counted ratio" in text and "× the forward's time" in text


@pytest.mark.slow
@pytest.mark.widgets
def test_the_footprint_app_prints_the_bytes_and_the_largest_model_from_the_formula():
    from course.backprop.footprint import bytes_per_parameter, largest_model
    from course.backprop.widgets import MEMORIES, footprint_app

    app = footprint_app()
    for precision, optimizer, memory in (("float32", "momentum", "T4: 16 GB (data sheet)"),
                                         ("mixed bfloat16", "adam", "H200: 141 GB (data sheet)")):
        app.controls["precision"].value, app.controls["optimizer"].value = precision, optimizer
        app.controls["memory"].value = memory
        assert app.last_error is None
        per = bytes_per_parameter(precision, optimizer)["total"]
        assert f"{per} bytes per parameter" in app.html.value
        assert f"{largest_model(MEMORIES[memory], precision, optimizer) / 1e9:.3g} billion" in app.html.value
    app.controls["n_params"].value = 10**12
    assert app.last_error is None and "does not fit" in app.takeaway.value
