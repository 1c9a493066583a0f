"""The lesson 07 apps redraw when a control moves, cache their measurements, and show clear messages."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.widgets


@pytest.mark.slow
def test_timing_app_measures_once_and_redraws_the_view_from_its_cache(monkeypatch):
    from course.recurrences import widgets as w

    calls = []
    real = w.time_recurrence

    def counting(*args, **kwargs):
        calls.append(args[:5])
        return real(*args, **kwargs)

    monkeypatch.setattr(w, "time_recurrence", counting)
    app = w.timing_app(T=64, n=4)
    assert app.last_error is None, app.last_error
    measured = len(calls)
    assert measured == 4                                     # loop and scan, diagonal and dense
    assert "the scan took" in app.html.value and "flops (counted)" in app.html.value
    first = app.image.value
    app.controls["view"].value = "speedup"
    assert len(calls) == measured and app.image.value != first and app.last_error is None
    assert app.view_only == ("view",)
    app.controls["T"].value = 128
    assert len(calls) == measured + 4
    app.controls["T"].value = 64
    assert len(calls) == measured + 4                        # back to a cached size: no new measurement


def test_timing_app_times_pytorch_only_when_asked():
    pytest.importorskip("torch")
    from course.recurrences.widgets import timing_app

    app = timing_app(T=16, n=4, kind="diagonal")
    key = ("cpu", "diagonal", "torch loop", 16, 4)
    assert key not in app.cache and app.cache.measured == 2
    app.controls["torch"].value = True
    assert app.last_error is None and key in app.cache and app.cache.measured == 3
    assert app.cache.get(key, lambda: None)[0]["median_s"] > 0


def test_timing_app_on_gpu_without_one_or_a_reference_says_what_to_do(monkeypatch):
    from course.devices import gpu_available
    from course.recurrences import widgets

    if gpu_available():
        pytest.skip("a GPU answers here")
    monkeypatch.setattr(widgets, "load_reference", lambda name: [])   # the branch without references
    app = widgets.timing_app(T=16, n=4, kind="diagonal")
    app.controls["device"].value = "gpu"
    assert app.last_error is not None and "No GPU here" in str(app.last_error)
    assert "Colab" in str(app.last_error)


@pytest.mark.slow
def test_timing_app_on_gpu_without_one_shows_the_shipped_reference():
    from course.devices import gpu_available
    from course.recurrences.widgets import timing_app
    from course.results import load_reference

    if gpu_available() or not load_reference("recurrence_sweep"):
        pytest.skip("a GPU answers here, or no reference results ship in this checkout")
    app = timing_app(T=16, n=4, kind="diagonal")
    app.controls["device"].value = "gpu"
    assert app.last_error is None and "No GPU here" in app.html.value and app.image.value


def test_timing_app_lists_what_it_could_not_time():
    from course.recurrences.widgets import timing_app

    app = timing_app(T=16, n=4, kind="dense")
    app.controls["n"].value = 256
    app.controls["T"].value = 2**16
    assert app.last_error is None
    assert "Not timed" in app.html.value and "Python loop" in app.html.value


@pytest.mark.parametrize("a, dtype", [(0.5, "float64"), (0.01, "float32"), (1.1, "float32"), (0.999, "float64")])
def test_closed_form_app_draws_every_choice(a, dtype):
    from course.recurrences.widgets import closed_form_app

    app = closed_form_app(T=256)
    app.controls["a"].value = a
    app.controls["dtype"].value = dtype
    assert app.last_error is None and app.image.value[:4] == b"\x89PNG"
    assert dtype in app.html.value


def test_work_app_tabulates_both_transitions():
    from course.recurrences.widgets import work_app

    app = work_app()
    app.controls["n"].value = 64
    assert app.last_error is None
    assert "diagonal" in app.html.value and "dense" in app.html.value and "128×" in app.html.value
