"""Lesson 03's live apps: moving a control redraws with new measurements; errors show in the app."""

from __future__ import annotations

import pytest

import course
from course import throughput as T
from course.devices import gpu_available
from course.throughput import widgets as TW

pytestmark = pytest.mark.widgets


def _err(app) -> str:
    return app.shown_error()


def test_sweep_app_redraws_for_a_new_op_and_marks_no_crossover_without_gpu(monkeypatch):
    monkeypatch.setattr(TW, "load_reference", lambda name: [])   # the branch without references
    app = TW.sweep_app(lo=0, hi=8)
    assert app.last_error is None and app.image.value
    before, calls = app.image.value, app.calls
    app.controls["op"].value = "sum"
    assert app.calls == calls + 1 and app.last_error is None and app.image.value != before
    if not gpu_available():
        assert "cannot be measured" in app.html.value


def test_sweep_app_empty_range_shows_a_clear_message():
    app = TW.sweep_app(lo=0, hi=4)
    app.controls["lo"].value = 10
    assert "size range is empty" in _err(app) and "10" in _err(app)


@pytest.mark.slow
def test_sweep_app_leaves_out_the_sizes_past_its_cost_bound_and_says_so():
    app = TW.sweep_app(op="matmul", lo=2, hi=4)
    app.controls["hi"].value = 28     # a 2^28 x 2^28 product: neither memory nor time allows it
    assert app.last_error is None
    assert "Not timed: sizes from" in app.html.value


@pytest.mark.slow
def test_sweep_app_time_budget_says_it_stopped_early():
    app = TW.sweep_app(op="matmul", lo=2, hi=4, budget_s=1e-6)
    app.controls["hi"].value = 6
    assert "Stopped early" in app.html.value


def test_sweep_app_dtype_the_device_lacks_is_explained():
    app = TW.sweep_app(lo=0, hi=4)
    app.controls["dtype"].options = [*app.controls["dtype"].options, "bfloat16"]
    app.controls["dtype"].value = "bfloat16"
    assert "bfloat16" in _err(app)


@pytest.mark.skipif(gpu_available(), reason="checks the no-GPU message")
def test_choosing_the_gpu_without_one_or_a_reference_explains_what_to_do(monkeypatch):
    monkeypatch.setattr(TW, "load_reference", lambda name: [])
    app = TW.latency_app()
    app.controls["device"].value = "gpu"
    assert "No GPU is available here" in _err(app) and "Colab" in _err(app)


def test_choosing_the_gpu_without_one_shows_the_shipped_reference():
    if gpu_available() or not course.load_reference("launch_latency"):
        pytest.skip("a GPU answers here, or no reference results ship in this checkout")
    app = TW.latency_app()
    app.controls["device"].value = "gpu"
    assert app.last_error is None and "No GPU here" in app.html.value and app.image.value


@pytest.mark.slow
def test_latency_app_shows_a_table_of_distributions():
    app = TW.latency_app(repeat=50)
    assert "median µs" in app.html.value and app.image.value
    app.controls["calls"].value = 200
    assert app.last_error is None and "200" in app.html.value


@pytest.mark.slow
def test_roofline_app_moves_the_point_with_the_size_and_classifies_it():
    app = TW.roofline_app(op="add", exponent=10)
    assert "memory-bound" in app.html.value
    first = app.image.value
    app.controls["op"].value = "matmul"  # the size follows to a sensible matrix side
    assert app.controls["exponent"].value == 9
    assert "compute-bound" in app.html.value and "matmul n=512" in app.html.value
    assert app.image.value != first and app.last_error is None


@pytest.mark.slow
def test_batch_app_reports_the_batch_reaching_90_percent():
    app = TW.batch_app()
    assert "90 %" in app.html.value and app.last_error is None
    app.controls["highlight"].value = 64
    assert app.last_error is None


def test_a_batch_sweep_still_rising_at_its_largest_batch_is_not_called_a_plateau():
    """The H100 reference rises 1.7x per doubling up to batch 8,192, at a few % of its roof: "90 % of the best at
    8,192" is the edge of the sweep, and the reading says so, with the share of the roof."""
    rising = [{"batch": b, "samples_per_s": 1000.0 * b, "gflops": 0.002 * b} for b in (1024, 2048, 4096, 8192)]
    said = T.batch_reading(rising, peak_flops=5.5e13)
    assert "still rising" in said and "edge of the sweep" in said and "% of the float32 roof" in said
    flat = [{"batch": b, "samples_per_s": s} for b, s in ((64, 500.0), (128, 950.0), (256, 1000.0), (512, 1020.0))]
    said = T.batch_reading(flat)
    assert "levelled off" in said and "batch 128 already reaches 90 %" in said


@pytest.mark.slow
def test_fusion_async_precision_apps_run_and_react():
    fa = TW.fusion_app()
    fa.controls["steps"].value = 2
    assert fa.last_error is None and fa.calls == 2
    aa = TW.async_app()
    aa.controls["chain"].value = 5
    assert aa.last_error is None and aa.image.value
    pa = TW.precision_app()
    pa.controls["n"].value = 64
    assert pa.last_error is None and pa.image.value


def test_memory_app_reports_bytes_in_flight_and_redraws():
    app = TW.memory_app()
    assert app.last_error is None and "in flight" in app.html.value
    before = app.image.value
    app.controls["largest"].value = 2 ** 16
    assert app.last_error is None and app.image.value != before


@pytest.mark.slow
def test_batch_app_marks_another_batch_without_measuring_again(monkeypatch):
    calls = []
    real = TW.batch_sweep

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(TW, "batch_sweep", counting)
    app = TW.batch_app()
    app.controls["device"].value = "cpu"
    measured = len(calls)
    assert app.view_only == ("highlight",) and app.last_error is None
    for b in (1, 4, 64):
        app.controls["highlight"].value = b
        assert app.last_error is None
    assert len(calls) == measured and app.cache.measured == measured
    assert "Marked batch 64" in app.html.value and "samples/s" in app.html.value


@pytest.mark.slow
def test_sweep_app_changes_what_it_shows_without_measuring_again(monkeypatch):
    calls = []
    real = TW.throughput_sweep
    monkeypatch.setattr(TW, "throughput_sweep", lambda *a, **k: calls.append(a) or real(*a, **k))
    app = TW.sweep_app(lo=0, hi=6)
    app.controls["y"].value = "gb_per_s"
    app.controls["y"].value = "median_s"
    assert len(calls) == 1 and app.last_error is None


@pytest.mark.slow
def test_precision_app_prints_each_measured_ratio_in_words():
    app = TW.precision_app()
    app.controls["device"].value = "cpu"
    assert app.last_error is None and "float16 ran at" in app.html.value and "float32's rate" in app.html.value
