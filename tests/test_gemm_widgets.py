"""Lesson 09's live CPU ladder: it draws at its defaults, redraws when a control changes (measuring only what it
has not measured yet), refuses a size it estimates too slow with what to choose instead, and its figure is readable."""

from __future__ import annotations

import pytest
from _figure_checks import figure_problems

from course.gemm import widgets as gw

pytestmark = pytest.mark.widgets


@pytest.fixture
def app():
    return gw.cpu_ladder_app(n=32)


def test_the_app_draws_its_ladder_and_table(app):
    assert app.last_error is None and app.image.value
    assert "NumPy&#x27;s BLAS" in app.html.value or "NumPy's BLAS" in app.html.value
    assert "3×4 micro-kernel" in app.html.value and "of NumPy's BLAS at n = 32" in app.takeaway.value.replace(
        "&#x27;", "'")


def test_the_app_redraws_when_each_control_changes(app):
    for name, value in (("n", 64), ("dtype", "float64"), ("cores", "all")):
        before, calls, measured = app.image.value, app.calls, app.cache.measured
        app.controls[name].value = value
        assert app.last_error is None, app.shown_error()
        assert app.calls == calls + 1 and app.cache.measured == measured + 1
        assert app.image.value != before
    assert "micro-kernel, all cores" in app.html.value


def test_coming_back_to_a_setting_redraws_without_measuring_again(app):
    app.controls["n"].value = 64
    measured = app.cache.measured
    app.controls["n"].value = 32
    assert app.last_error is None and app.cache.measured == measured


def test_a_size_estimated_too_slow_is_refused_with_what_to_choose(app, monkeypatch):
    monkeypatch.setattr(gw, "_rate", lambda rung, dtype, threads: 1e6)   # a machine a thousand times slower
    app.controls["n"].value = 1024
    assert app.last_error is not None and "Choose n =" in app.shown_error()
    assert "under 10 s" in app.shown_error()


def test_the_apps_figure_is_readable(app):
    fig = app.last_result[0]
    assert figure_problems(fig) == []
    assert "no reference" in fig.axes[1].get_title() or fig.axes[1].patches
