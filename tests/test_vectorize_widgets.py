"""Lesson 02's pictures and live apps: they draw, react to their controls, and show errors clearly."""

from __future__ import annotations

import pytest

import course
from course import vectorize as v
from course.errors import BadInputError
from course.vectorize import plots as vp
from course.vectorize import widgets as vw


def test_flynn_figure_places_this_cpu_and_highlights_a_class():
    fig = vp.flynn_figure(highlight="MIMD")
    text = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert f"{course.cpu_info()['float32_lanes']} float32 lanes" in text
    assert f"{course.cpu_info()['logical_cores']} cores" in text
    with pytest.raises(BadInputError, match="XSID"):
        vp.flynn_figure(highlight="XSID")


def test_lanes_figure_title_counts_steps():
    fig = vp.lanes_figure(n=10, lanes=4, step=1)
    assert "step 2 of 3" in fig.axes[0].get_title()
    assert "done in 3 steps" in vp.lanes_figure(n=10, lanes=4, step=99).axes[0].get_title()
    with pytest.raises(BadInputError, match="1 to 64"):
        vp.lanes_figure(n=500)


def test_ladder_figure_says_there_is_no_gpu_result_without_a_gpu_or_reference():
    rs = v.ladder("relu", n=256, rungs=("loop", "numpy"), repeat=2, budget_s=0.02)
    fig = vp.ladder_figure(rs, [])
    footer = fig.texts[-1].get_text()
    if not course.gpu_available():
        assert "no reference results recorded yet" in footer


def test_lane_sweep_has_one_record_per_width():
    rs = vw.lane_sweep(n=256, widths=(1, 4, 16), budget_s=0.02)
    assert [r["lanes"] for r in rs.select(rung="lanes")] == [1, 4, 16]
    assert len(vp.lane_sweep_figure(rs).axes[0].lines) >= 3


@pytest.mark.slow
@pytest.mark.widgets
def test_ladder_app_redraws_when_the_op_changes():
    app = vw.ladder_app(n=2**10)
    assert app.last_error is None and app.image.value
    before = app.html.value
    app.controls["op"].value = "sigmoid"
    assert app.last_error is None and app.html.value != before
    assert "Python loop" in app.html.value and "<b>NO</b>" not in app.html.value


@pytest.mark.slow
@pytest.mark.widgets
def test_ladder_app_shows_the_bfloat16_message_in_its_error_area():
    app = vw.ladder_app(n=2**10)
    app.controls["dtype"].value = "bfloat16"
    assert isinstance(app.last_error, course.UnsupportedDtypeError)
    assert "bfloat16" in app.errors.outputs[0]["text"]
    app.controls["dtype"].value = "float64"
    assert app.last_error is None


@pytest.mark.slow
@pytest.mark.widgets
@pytest.mark.skipif(course.gpu_available(), reason="checks what is shown without a GPU")
def test_ladder_app_gpu_button_without_gpu_explains_and_still_shows_cpu():
    app = vw.ladder_app(n=2**10, device="cpu")
    app.controls["device"].value = "gpu"
    assert app.last_error is None
    assert "No GPU is available here" in app.html.value
    assert "no reference" in app.html.value.lower() or "recorded on" in app.html.value
    assert "numpy, out=" in app.html.value


@pytest.mark.slow
@pytest.mark.widgets
def test_ladder_app_lane_width_changes_the_lanes_rung():
    app = vw.ladder_app(n=2**10, lanes=2)
    app.controls["lanes"].value = 64
    assert "64 lanes per step" in app.html.value


@pytest.mark.widgets
def test_lanes_app_steps_and_resizes():
    app = vw.lanes_app(n=24, lanes=8)
    first = app.image.value
    app.controls["step"].value = 2
    assert app.image.value != first
    app.controls["lanes"].value = 32
    assert app.controls["step"].max == 1 and app.play.max == 1
    assert app.last_error is None


@pytest.mark.slow
@pytest.mark.widgets
def test_bandwidth_app_draws_and_matmul_app_skips_slow_rungs():
    app = vw.bandwidth_app(n=2**12)
    assert app.last_error is None and app.image.value
    mm = vw.matmul_app(n=16)
    assert mm.last_error is None and mm.image.value
    mm.controls["n"].value = 128
    assert mm.last_error is None and "loop (n > 96)" in mm.html.value


def test_the_matmul_figure_shows_the_nearest_recorded_size_named_on_its_bars():
    from course.results import ResultSet
    from course.vectorize.plots import matmul_figure

    ref = ResultSet("vectorize_matmul", params={"n": 384}, source="reference")
    for n in (128, 384):
        ref.add(device="gpu", rung="gpu", n=n, dtype="float32", gflops=1e3)
    live = ResultSet("vectorize_matmul", params={"n": 48})
    live.add(device="cpu", rung="blas", n=48, dtype="float32", gflops=10.0)
    labels = [t.get_text() for t in matmul_figure(live, [ref]).axes[0].get_yticklabels()]
    assert labels == ["numpy → BLAS (CPU), float32", "CuPy → cuBLAS (GPU), float32 (recorded at n = 128)"]
    live.params["n"] = 384
    assert matmul_figure(live, [ref]).axes[0].get_yticklabels()[-1].get_text().endswith("(recorded)")
