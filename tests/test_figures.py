"""Every figure the course draws is readable: no legend over data, no text off the canvas or on other text,
no text under 9 pt, no colour outside the palette (``tests/_figure_checks.py`` says exactly what is checked).

The figures are found without a list: every registered experiment's plot, drawn from the reference results
shipped in ``course/reference`` (so the recorded curves are there, beside a live CPU-only set made from them),
and the figure every app (each public ``*_app`` of the widget modules, as the widget fuzz finds them) draws
at its defaults.
"""

from __future__ import annotations

import html
import re
import warnings

import numpy as np
import pytest
from _figure_checks import figure_problems, has_data, live_like
from matplotlib.figure import Figure
from numba import cuda

from course.plots import PALETTE, add_footer, figure_takeaway, figure_to_png, new_figure, place_legend, sweep_figure
from course.report import discover
from course.results import ResultSet, load_reference

EXPERIMENTS = [(name, exp) for name, exp in discover().items() if exp.plotter is not None]


def _no_progress(iterable, **_):
    return iterable


def _experiment_figures(exp) -> list[Figure]:
    refs = load_reference(exp.name)
    if not refs:   # nothing recorded yet (a new experiment, or lesson 06's CPU-only ones): draw a quick live run
        return [exp.plotter(exp.run(devices=["cpu"], quick=True, progress=_no_progress), [])]
    live = live_like(refs[0])
    figs = []
    try:
        figs.append(exp.plotter(live, refs))
    except (AttributeError, IndexError, KeyError, ValueError):  # a plot of one set that needs its GPU records
        figs.append(exp.plotter(ResultSet.from_dict(refs[0].to_dict(), source="live"), refs))
    # as the report draws it on the GPU machine: every device live, nothing recorded beside it
    figs.append(exp.plotter(ResultSet.from_dict(refs[0].to_dict(), source="live"), []))
    return figs


@pytest.mark.slow
@pytest.mark.parametrize("name,exp", EXPERIMENTS, ids=[n for n, _ in EXPERIMENTS])
def test_experiment_figures_are_readable(name, exp):
    for fig in _experiment_figures(exp):
        said = figure_takeaway(fig)
        assert re.search(r"\d", said) or not has_data(fig), f"{name}: no takeaway read off its numbers ({said!r})"
        assert figure_problems(fig) == [], name


def test_most_experiments_have_a_reference_to_draw():
    drawn = [n for n, e in EXPERIMENTS if load_reference(n)]
    assert len(drawn) >= 20, drawn


# ----------------------------------------------------------------- the apps, at their defaults

def _apps():
    from test_widget_fuzz import APPS

    return APPS


APPS = _apps()


@pytest.mark.slow
@pytest.mark.widgets
@pytest.mark.parametrize("name,builder", APPS, ids=[n for n, _ in APPS])
def test_app_figure_is_readable(name, builder, monkeypatch):
    import course.widgets as cw

    drawn: list[list[str]] = []
    real = cw.figure_to_png

    def checked(fig, *args, **kwargs):
        drawn.append(figure_problems(fig))
        return real(fig, *args, **kwargs)

    monkeypatch.setattr(cw, "figure_to_png", checked)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        app = builder()
    if not drawn:
        pytest.skip(f"{name} draws no figure at its defaults ({app.last_error or 'text only'})")
    assert drawn[-1] == [], name
    said = html.unescape(app.takeaway.value)
    assert re.search(r"\d", said), f"{name}: no takeaway printed under its figure ({said!r})"


# ----------------------------------------------------------------- figures a notebook draws from no measurement

def _notebook_figures():
    from course.bppsa import plots as bppsa_plots
    from course.parallel import plots as pp
    from course.recurrences import plots as rp
    from course.scan import plots as sp
    from course.vectorize import plots as vp

    return {"02 flynn_figure": lambda: vp.flynn_figure(highlight="SIMD"),
            "04 counts_figure": lambda: sp.counts_figure(2**20, highlight=2**10),
            "05 tree_figure": lambda: bppsa_plots.tree_figure(7),
            "05 work_figure": lambda: bppsa_plots.work_figure(T_max=30000, n=20, batch=16),
            "06 bytes_figure": lambda: pp.bytes_figure(n=1_000_000, p_max=16),
            "07 closed_form_figure": lambda: rp.closed_form_figure(2000, a=0.5),
            "07 chunk_figure": lambda: rp.chunk_figure(T=32, n=6, chunk=8),
            "01 digits_figure": lambda: _digits(False), "01 digits_figure, predicted": lambda: _digits(True),
            "06 tensor_parallel_figure": _tensor_parallel, "01 ladder_figure": _step_ladder,
            "04 scan_kernel_variants, single pass": _scan_variants,
            "03 kernels.show blelloch": lambda: _kernel_picture("blelloch"),
            "03 kernels.show guard, out of bounds": lambda: _kernel_picture("guard", unguarded=True)}


def _no_guard(out, a, n):
    """The guard exercise without its guard: the last block's spare threads step out of bounds."""
    i = cuda.grid(1)
    out[i] = a[i]


def _kernel_picture(name: str, unguarded: bool = False):
    from course.kernels import show

    return show(name, _no_guard if unguarded else None)


def _scan_variants():
    """Lesson 04's kernel-variant bars with the single-pass scan among them (its rate made up from the
    library's: only the drawing is checked)."""
    rs = ResultSet.from_dict(load_reference("scan_kernel_variants")[0].to_dict())
    lib = rs.select(variant="cupy.cumsum")[0]
    rs.records.insert(1, {**lib, "variant": "single-pass (look-back)", "gb_per_s": 0.8 * lib["gb_per_s"],
                          "of_copy": 0.6})
    return discover()["scan_kernel_variants"].plotter(rs, [])


def _step_ladder():
    """Lesson 01's training-step ladder, live CPU rungs beside recorded GPU ones (made-up times)."""
    from course.backprop.ladder_plots import ladder_figure

    live = ResultSet("backprop_train_step")
    for w in (128, 512):
        for k, rung in enumerate(("eager", "no_readback")):
            live.add(device="cpu", rung=rung, title=f"({'ab'[k]}) {rung}", width=w,
                     median_s=1e-3 * w / 128 * (1 - 0.3 * k))
    ref = ResultSet.from_dict(live.to_dict(), source="reference")
    ref.records = [{**r, "device": "gpu", "median_s": r["median_s"] / 50} for r in ref.records]
    return ladder_figure(live, [ref, ResultSet.from_dict(ResultSet("backprop_train_step").to_dict(),
                                                         source="reference")])


def _tensor_parallel():
    """The measured tensor- against data-parallel bars (made-up times: only the drawing is checked)."""
    from course.parallel.model import AlphaBeta
    from course.parallel.plots import tensor_parallel_figure

    rs = ResultSet("tensor_parallel_mpi", params={"cores": 2, "sizes": [256, 1024, 256], "batch": 64})
    for p in (1, 2, 4):
        for k, scheme in enumerate(("tensor", "data")):
            rs.add(device="cpu", p=p, scheme=scheme, part="step", median_s=(2 + k) * 1e-3 / p, allreduced_bytes=64)
            rs.add(device="cpu", p=p, scheme=scheme, part="communicate", median_s=1e-5 * (1 + 30 * k) * p,
                   allreduced_bytes=64)
    return tensor_parallel_figure(rs, AlphaBeta(1e-6, 1e-9, 4, 0.1))


def _digits(predicted: bool):
    from course.backprop.data import load_digits
    from course.backprop.plots import digits_figure

    data = load_digits()
    labels = np.asarray(data.y_test[:12])
    return digits_figure(data, 12, predictions=np.where(np.arange(12) % 5 == 0, (labels + 1) % 10, labels)
                         if predicted else None)


NOTEBOOK_FIGURES = _notebook_figures()


@pytest.mark.parametrize("name", sorted(NOTEBOOK_FIGURES))
def test_notebook_figures_are_readable(name):
    fig = NOTEBOOK_FIGURES[name]()
    assert re.search(r"\d", figure_takeaway(fig)), name
    assert figure_problems(fig) == [], name


def test_a_notebook_shows_a_figure_with_its_takeaway_as_caption_and_alt_text():
    from course.plots import figure_html

    fig = NOTEBOOK_FIGURES["07 chunk_figure"]()
    said = html.escape(figure_takeaway(fig), quote=True)
    page = figure_html(fig)
    assert f"alt='{said}'" in page and f"<figcaption>{said}</figcaption>" in page and "base64," in page


# ----------------------------------------------------------------- the checks themselves can fail

def _curve_figure(**legend) -> Figure:
    fig, (ax,) = new_figure()
    x = np.linspace(0, 1, 50)
    ax.plot(x, x, color=PALETTE["blue"], label="rising")
    ax.plot(x, 1 - x, color=PALETTE["vermillion"], label="falling")
    if legend:
        ax.legend(**legend)
    add_footer(fig, devices=["cpu"])
    return fig


def test_a_legend_over_crossing_lines_is_caught():
    problems = figure_problems(_curve_figure(loc="center", fontsize=9))
    assert any("legend covers data" in p for p in problems), problems


def test_place_legend_finds_the_empty_corner_or_goes_under():
    fig = _curve_figure()
    place_legend(fig.axes[0])
    assert figure_problems(fig) == []


def test_small_text_off_palette_colour_and_collisions_are_caught():
    fig, (ax,) = new_figure()
    ax.plot([1, 2], [1, 2], color="#1f77b4")
    ax.text(1.5, 1.5, "small", fontsize=7)
    ax.text(1.5, 1.5, "on top", fontsize=9)
    ax.set_title("a title far too long for its axes " * 6, fontsize=10)
    problems = " | ".join(figure_problems(fig))
    for expected in ("at 7.0 pt", "colour", "collides with", "leaves the canvas"):
        assert expected in problems, (expected, problems)


def test_greys_and_tints_of_the_palette_pass():
    from course.plots import tint

    fig, (ax,) = new_figure()
    ax.bar([0, 1], [1, 2], color=[tint("green"), "0.6"])
    assert figure_problems(fig) == []


# ----------------------------------------------------------------- takeaways are read off the data

def test_a_sweep_takeaway_says_the_plotted_numbers():
    rs = ResultSet("demo")
    for n, t in ((256, 2e-3), (512, 1.5e-2), (1024, 0.125)):
        rs.add(device="cpu", n=n, median_s=t)
    fig = sweep_figure(rs, x="n", y="median_s", xlabel="n (size)")
    said = figure_takeaway(fig)
    assert "125 ms" in said and "n = 1,024" in said, said


def test_a_sweep_takeaway_compares_devices_at_a_size_both_have():
    """A CPU measured up to width 256 and a GPU recorded up to 4,096 are compared at 256, the GPU's further
    point said apart: one sentence never sets one device's time at one size beside another's at another."""
    rs = ResultSet("demo")
    for n, t in ((64, 1e-3), (256, 1.2e-2)):
        rs.add(device="cpu", width=n, median_s=t)
    for n, t in ((64, 3.0e-3), (256, 3.1e-3), (4096, 3.06e-3)):
        rs.add(device="gpu", width=n, median_s=t)
    said = figure_takeaway(sweep_figure(rs, x="width", y="median_s", xlabel="hidden width"))
    first = said.split("Further on")[0]
    assert "width = 256" in first and "12 ms" in first and "3.1 ms" in first and "4,096" not in first, said
    assert "3.06 ms per call at hidden width = 4,096" in said.split("Further on")[1], said


def test_the_takeaway_is_the_pngs_alt_text():
    from io import BytesIO

    from PIL import Image

    rs = ResultSet("demo")
    for n in (1, 2, 4):
        rs.add(device="cpu", n=n, gflops=10.0 * n)
    fig = sweep_figure(rs, x="n", y="gflops", ylabel="GFLOP/s", higher_is_better=True, speedup=False)
    said = figure_takeaway(fig)
    assert "peaks at 40 GFLOP/s at n = 4" in said, said
    assert Image.open(BytesIO(figure_to_png(fig))).text["Description"] == said
