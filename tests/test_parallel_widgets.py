"""Lesson 06's apps and figures: callbacks driven by setting widget values (ipywidgets 7 and 8)."""

from __future__ import annotations

import numpy as np
import pytest

from course.parallel.collectives import ring_allreduce
from course.parallel.model import model_time
from course.parallel.pipeline import bubble_fraction, ideal_timeline, measured_bubble
from course.parallel.plots import (
    allreduce_timing_figure,
    bytes_figure,
    data_parallel_figure,
    ring_step_figure,
    tensor_parallel_figure,
)
from course.parallel.widgets import model_app, pipeline_app, ring_app, tensor_parallel_app
from course.results import ResultSet

PNG = b"\x89PNG"


def _timings():
    rs = ResultSet("allreduce_mpi", params={"cores": 2})
    for p in (2, 3, 4):
        for nbytes in (2**10, 2**20):
            for alg in ("ring (course)", "naive (course)", "MPI Allreduce"):
                t = model_time("ring" if alg.startswith("MPI") else alg.split()[0], p, nbytes, 5e-6, 1e-9)
                rs.add(device="cpu", algorithm=alg, p=p, nbytes=nbytes, median_s=t, q25_s=t, q75_s=t)
    return rs


def _pipeline(p=2):
    rs = ResultSet("pipeline_mpi", params={"p": p, "cores": 2})
    for m in (1, 2, 4):
        ev = ideal_timeline(p, m, 1e-3, 2e-3)
        rs.add(device="cpu", p=p, m=m, events=ev, bubble_measured=measured_bubble(ev, p),
               bubble_formula=bubble_fraction(p, m), max_abs_diff=0.0)
    return rs


@pytest.mark.slow
@pytest.mark.widgets
def test_the_ring_app_steps_through_and_follows_p_n_and_the_algorithm():
    app = ring_app()
    assert app.last_error is None and app.image.value[:4] == PNG
    assert app.controls["step"].max == 6
    app.controls["step"].value = 3
    assert "step 3 of 6" in app.html.value or "yes" in app.html.value
    app.controls["p"].value = 8
    assert app.controls["step"].max == 14 and app.last_error is None
    app.controls["algorithm"].value = "tree"
    assert app.controls["step"].max == 6 and "<b>yes</b>" in app.html.value
    app.controls["n"].value = 1
    assert app.last_error is None and "<b>yes</b>" in app.html.value


@pytest.mark.slow
@pytest.mark.widgets
def test_the_model_app_redraws_without_measuring():
    app = model_app(_timings())
    assert app.last_error is None and app.image.value[:4] == PNG
    app.controls["nbytes"].value = 2**30
    assert app.last_error is None and "model, not measured" in app.html.value


@pytest.mark.widgets
def test_the_pipeline_app_switches_m_and_view():
    app = pipeline_app(_pipeline())
    assert app.last_error is None and app.image.value[:4] == PNG
    app.controls["m"].value = 4
    assert "0.200" in app.html.value
    app.controls["view"].value = "ideal"
    assert app.last_error is None


@pytest.mark.slow
@pytest.mark.widgets
def test_the_tensor_parallel_app_follows_ranks_width_and_batch():
    from course.parallel.timing import fit_alpha_beta

    app = tensor_parallel_app(fit_alpha_beta(_timings()))
    assert app.last_error is None and app.image.value[:4] == PNG and "a model, not a measurement" in app.html.value
    app.controls["hidden"].value = 64
    assert app.last_error is None and "Block 256-64-256" in app.html.value
    app.controls["p"].value = 64
    app.controls["hidden"].value = 2**15
    app.controls["batch"].value = 8
    assert app.last_error is None and "p = 64" in app.html.value
    assert tensor_parallel_app().last_error is None


def test_the_tensor_parallel_figure_draws_both_schemes_and_the_model():
    from course.parallel.model import AlphaBeta

    rs = ResultSet("tensor_parallel_mpi", params={"cores": 2, "sizes": [4, 8, 4], "batch": 8})
    for p in (1, 2, 3):
        for scheme in ("tensor", "data"):
            for part in ("step", "communicate"):
                rs.add(device="cpu", p=p, scheme=scheme, part=part, median_s=1e-3, allreduced_bytes=64)
    fig = tensor_parallel_figure(rs, AlphaBeta(1e-6, 1e-9, 4, 0.1))
    assert len(fig.axes) == 2 and "Oversubscribed" in " ".join(t.get_text() for t in fig.texts)
    assert "α–β model" in [t.get_text() for t in fig.axes[1].get_legend().get_texts()]


@pytest.mark.parametrize("step", [0, 1, 6, 99])
def test_ring_step_figures_name_the_step(step):
    fig = ring_step_figure(ring_allreduce(np.ones((4, 10))), step)
    assert f"step {min(step, 6)} of 6" in fig.axes[0].get_title()
    assert any("Simulated" in t.get_text() for t in fig.texts)


def test_measurement_figures_name_the_machine_and_oversubscription():
    fig = allreduce_timing_figure(_timings())
    foot = " ".join(t.get_text() for t in fig.texts)
    assert "Measured live" in foot and "Oversubscribed" in foot
    rs = ResultSet("data_parallel_mpi", params={"cores": 2, "sizes": [4, 4], "batch": 8, "bucket_bytes": 2**20})
    for p in (1, 2):
        for part in ("compute", "communicate (ring)", "step: one all-reduce after backward",
                     "step: bucketed, overlapped with backward"):
            rs.add(device="cpu", p=p, part=part, median_s=1e-3)
    assert data_parallel_figure(rs).texts
    assert "Counted, not timed" in bytes_figure(1000, 8).texts[-1].get_text()


def test_the_lesson_registers_its_report_experiments_and_explains_a_missing_mpi(monkeypatch):
    from course.parallel import experiments
    from course.report import discover

    exps = discover()
    names = ("allreduce_mpi", "data_parallel_mpi", "pipeline_mpi", "tensor_parallel_mpi")
    assert all(exps[n].lesson == "06" and exps[n].plotter is not None for n in names)
    monkeypatch.setattr(experiments, "mpi_unavailable_reason", lambda: "mpi4py is not installed (test)")
    for n in names:
        rs = exps[n].run(devices=["cpu"], quick=True, progress=None)
        assert not rs.records and "MPI unavailable" in rs.notes[0] and len(rs.notes) == 1
        fig = exps[n].plotter(rs, [])
        assert "mpi4py is not installed" in fig.axes[0].texts[0].get_text()
        # asked for the GPU too (a GPU machine whose MPI cannot start): both reasons are given
        rs = getattr(experiments, n)(devices=["cpu", "gpu"], quick=True, progress=None)
        assert "MPI unavailable" in rs.notes[0] and "No GPU records" in rs.notes[1]
    fig = exps["pipeline_mpi"].plotter(_pipeline(), [])
    assert fig.axes[0].get_title().startswith("GPipe")
    assert exps["allreduce_mpi"].plotter(_timings(), []).axes


def test_the_model_figure_draws_nvlink_only_as_far_as_an_nvlink_domain_reaches():
    from course.parallel.model import INTERCONNECTS
    from course.parallel.plots import model_figure
    from course.parallel.timing import fit_alpha_beta

    fig = model_figure(fit_alpha_beta(_timings()), 2**20, p_max=1024)
    most = {ic.name: ic.max_workers for ic in INTERCONNECTS}
    for line in fig.axes[0].get_lines():
        for name, limit in most.items():
            if name in line.get_label():
                top = max(line.get_xdata())
                assert (top <= limit) if limit else (top == 1024), (line.get_label(), top)
    assert any("NVLink" in line.get_label() for line in fig.axes[0].get_lines())
