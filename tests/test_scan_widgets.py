"""The lesson 04 apps redraw when a control moves, and show clear messages instead of dying."""

from __future__ import annotations

import pytest

from course.errors import GPUUnavailableError

pytestmark = pytest.mark.widgets


def test_tree_app_redraws_when_step_moves():
    from course.scan.widgets import tree_app

    app = tree_app(n=8)
    assert app.last_error is None
    first = app.image.value
    app.controls["step"].value = 2
    assert app.last_error is None and app.image.value != first
    assert "Result equals the sequential scan: <b>yes</b>" in app.html.value


@pytest.mark.slow
def test_tree_app_resizes_the_stepper_when_n_changes():
    from course.scan.widgets import tree_app

    app = tree_app(n=8)
    app.controls["n"].value = 3            # padded to 4: input, 2 up, root, 2 down = 6 frames
    assert app.controls["step"].max == 5 and app.controls["step"].value == 5
    assert app.play.max == 5
    app.controls["n"].value = 9            # padded to 16: 1 + 4 + 1 + 4 frames
    assert app.controls["step"].max == 9
    assert app.last_error is None and "n = 9" in app.html.value


@pytest.mark.parametrize("op", ["max", "matmul", "affine"])
def test_tree_app_scans_every_operator_correctly(op):
    from course.scan.widgets import tree_app

    app = tree_app(n=6)
    app.controls["op"].value = op
    assert app.last_error is None
    assert "<b>yes</b>" in app.html.value
    if op in ("matmul", "affine"):
        assert "show only which inputs" in app.html.value


@pytest.mark.slow
def test_counts_app_prints_counts_of_chosen_n():
    from course.scan.widgets import counts_app

    app = counts_app(n=2**10)
    assert "<td>blelloch</td><td>2,046</td><td>20</td>" in app.html.value
    app.controls["n"].value = 2**4
    assert "<td>blelloch</td><td>30</td><td>8</td>" in app.html.value


@pytest.mark.slow
def test_timing_app_times_cpu_scans_and_says_what_it_skipped():
    from course.scan.widgets import timing_app

    app = timing_app(n=2**10, budget_s=0.05)
    app.controls["device"].value = "cpu"
    assert app.last_error is None and app.image.value[:4] == b"\x89PNG"
    app.controls["op"].value = "matmul"
    assert app.last_error is None
    assert "numpy has no built-in scan for" in app.html.value


def test_timing_app_on_gpu_without_gpu_explains(monkeypatch):
    from course.scan import widgets as scan_widgets
    from course.scan.widgets import timing_app

    monkeypatch.setattr(scan_widgets, "gpu_available", lambda: False)
    monkeypatch.setattr(scan_widgets, "load_reference", lambda name: [])
    app = timing_app(n=2**10, budget_s=0.05)
    app.controls["device"].value = "cpu"
    app.controls["device"].value = "gpu"
    assert isinstance(app.last_error, GPUUnavailableError)
    assert "no reference GPU results" in str(app.last_error)
    assert "Choose CPU" in app.shown_error() and "course-no-gpu" in app.notice.value


def test_timing_app_on_gpu_without_gpu_shows_labelled_references(monkeypatch):
    from course.results import ResultSet
    from course.scan import widgets as scan_widgets
    from course.scan.widgets import timing_app

    ref = ResultSet("scan_sweep", source="reference")
    ref.provenance["gpus"] = [{"name": "NVIDIA Test GPU"}]
    ref.add(device="gpu", algorithm="cupy", n=1024, median_s=1e-5, gb_per_s=1.0)
    monkeypatch.setattr(scan_widgets, "gpu_available", lambda: False)
    monkeypatch.setattr(scan_widgets, "load_reference", lambda name: [ref])
    app = timing_app(n=2**10, budget_s=0.05)
    app.controls["device"].value = "cpu"
    app.controls["device"].value = "gpu"
    assert app.last_error is None
    assert "recorded on NVIDIA Test GPU" in app.html.value


def test_tree_app_switches_to_hillis_steele_and_resizes_stepper():
    from course.scan.widgets import tree_app

    app = tree_app(n=8)
    app.controls["algorithm"].value = "hillis-steele"
    assert app.controls["step"].max == 3 and app.controls["step"].value == 3
    assert app.last_error is None and "<b>yes</b>" in app.html.value
    assert "17 applications" in app.html.value
