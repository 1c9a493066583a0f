"""Lesson 08's apps redraw when a control moves, keep their measurements, and refuse what would take too long."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.widgets


@pytest.mark.slow
def test_the_stepper_follows_the_block_and_resizes_its_step_slider():
    from course.attention.widgets import stepper_app

    app = stepper_app(n=16, block=4)
    assert app.last_error is None and app.controls["step"].max == 3
    first = app.image.value
    app.controls["step"].value = 3
    assert app.last_error is None and app.image.value != first and "block 3 of 3" in app.takeaway.value
    app.controls["block"].value = 16
    assert app.controls["step"].max == 0 and app.controls["step"].value == 0 and app.last_error is None
    app.controls["pattern"].value = "large (near 1000)"
    assert "gives NaN here" in app.html.value and app.last_error is None


@pytest.mark.slow
def test_the_tree_app_steps_through_the_levels():
    from course.attention.widgets import tree_app

    app = tree_app(n=8)
    assert app.controls["step"].max == 6 and app.last_error is None
    app.controls["step"].value = 2
    assert "step 2 of 6" in app.takeaway.value
    app.controls["n"].value = 5
    assert app.controls["step"].max == 6 and app.last_error is None
    app.controls["n"].value = 1
    assert app.controls["step"].max == 0 and app.last_error is None


@pytest.mark.slow
def test_the_traffic_app_measures_once_per_size_and_counts_the_rest(monkeypatch):
    from course.attention import widgets as w

    calls = []
    real = w.time_attention

    def counting(*args, **kwargs):
        calls.append(args[:3])
        return real(*args, **kwargs)

    monkeypatch.setattr(w, "time_attention", counting)
    app = w.traffic_app(n=256, d=32)
    assert app.last_error is None and len(calls) == 2
    assert "naive" in app.html.value and "MiB" in app.html.value and "On this CPU" in app.html.value
    app.controls["sram"].value = w.SRAM_CHOICES[0][1]
    assert len(calls) == 2                                   # the on-chip memory changes the counts only
    app.controls["tile"].value = 32
    assert len(calls) == 3 and "32 × 32" in app.html.value   # the tiled pass again, at its new tile
    app.controls["timed"].value = False
    assert "On this CPU" not in app.html.value
    app.controls["n"].value = 512
    assert len(calls) == 3                                   # not timed when unticked


def test_the_traffic_app_refuses_to_time_what_would_take_too_long(monkeypatch):
    from course.attention import widgets as w

    monkeypatch.setattr(w, "attention_cost_s", lambda method, n, d=64, block=64: 1e4)
    app = w.traffic_app(n=2**16, d=64)
    assert app.last_error is None and "not timed, about 10,000 s" in app.html.value
