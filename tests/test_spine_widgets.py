"""Shared widgets and plots: callbacks redraw, errors show in the output area, figures name devices."""

from __future__ import annotations

import ipywidgets as w
import pytest

import course
from course.errors import BadInputError
from course.plots import bar_figure, sweep_figure
from course.results import ResultSet
from course.widgets import LiveApp, control_panel, device_buttons, log2_slider, progress, size_slider


def _texts(fig):
    return " ".join(t.get_text() for t in fig.texts) + " ".join(
        t.get_text() for ax in fig.axes for t in ax.texts)


def _labels(fig):
    return [line.get_label() for ax in fig.axes for line in ax.lines]


def _sweep(source="live", gpu=False):
    rs = ResultSet("demo", source=source)
    if gpu:
        rs.provenance["gpus"] = [{"name": "Test GPU"}]
        rs.provenance["date"] = "2026-01-02T00:00:00+00:00"
    for n in (1, 2, 4, 8):
        rs.add(device="cpu", n=n, median_s=1e-3 * n, q25_s=0.9e-3 * n, q75_s=1.1e-3 * n)
        if gpu:
            rs.add(device="gpu", n=n, median_s=1e-4 * n)
    return rs


def test_sweep_figure_names_the_live_device_and_says_when_there_is_no_speedup():
    fig = sweep_figure(_sweep(), [], x="n")
    text = _texts(fig)
    assert "Measured live on CPU" in text
    assert "no reference GPU results" in text


def test_reference_overlay_is_dashed_and_labelled_recorded_on():
    fig = sweep_figure(_sweep(), [_sweep("reference", gpu=True)], x="n")
    labels = _labels(fig)
    # the device and date are said once, in the caption, not in every legend entry
    assert not any("Test GPU" in lab or "2026-01-02" in lab for lab in labels), labels
    live = sweep_figure(_sweep(), [], x="n")
    dashed = fig.axes[0].lines[len(live.axes[0].lines):]
    assert dashed and all(ln.get_linestyle() == "--" for ln in dashed if len(ln.get_xdata()) > 1)
    assert "Dashed: reference results recorded on Test GPU, 2026-01-02" in _texts(fig)
    speed = [ln for ln in fig.axes[1].lines if "vs its host CPU" in ln.get_label()]
    assert speed and list(speed[0].get_ydata()) == pytest.approx([10.0] * 4)


def test_a_reference_with_gpu_records_only_gives_its_speedup_over_this_cpu_unless_left_out():
    ref = _sweep("reference", gpu=True)
    ref.records = ref.select(device="gpu")                   # no CPU record: only the live CPU to compare with
    fig = sweep_figure(_sweep(), [ref], x="n")
    speed = [ln for ln in fig.axes[1].lines if "vs this CPU (live)" in ln.get_label()]
    assert speed and speed[0].get_label() == "GPU vs this CPU (live)"
    assert list(speed[0].get_ydata()) == pytest.approx([10.0] * 4)
    fig = sweep_figure(_sweep(), [ref], x="n", speedup_sources=[], speedup_note="recorded at batch 256 only")
    assert not fig.axes[1].lines and "recorded at batch 256 only" in _texts(fig)
    assert any(ln.get_linestyle() == "--" for ln in fig.axes[0].lines)     # still drawn on the left
    assert "recorded on Test GPU" in _texts(fig)


def test_a_footer_names_only_the_devices_measured_even_where_a_gpu_answers(monkeypatch):
    import course.plots as plots
    from course.plots import add_footer, new_figure

    monkeypatch.setattr(plots, "gpu_info", lambda: [{"name": "Test GPU"}])
    fig, _ = new_figure(1)
    add_footer(fig, devices=["cpu"])                  # a CPU-only figure on a GPU machine
    assert "Measured live on CPU" in _texts(fig) and "Test GPU" not in _texts(fig)
    fig, _ = new_figure(1)
    add_footer(fig, devices=["gpu"])
    assert "GPU: Test GPU" in _texts(fig) and "CPU:" not in _texts(fig)
    fig, _ = new_figure(1)
    add_footer(fig)                                   # unknown: every device answering here
    assert "CPU:" in _texts(fig) and "GPU: Test GPU" in _texts(fig)


def test_bar_figure_prints_each_value():
    fig = bar_figure([("numpy", 0.5, "cpu"), ("cupy", 0.01, "gpu")], unit="ms")
    assert "0.5 ms" in _texts(fig) and "0.01 ms" in _texts(fig)


@pytest.mark.widgets
def test_live_app_redraws_when_a_control_moves():
    seen = []

    def update(n, dtype, device):
        seen.append((n, dtype, device))
        return sweep_figure(_sweep(), [], x="n", highlight=n), f"<b>{n}</b>"

    controls = control_panel(sizes=[16, 32, 64], size=32)
    app = LiveApp(update, controls)
    first = app.image.value
    assert app.calls == 1 and app.html.value == "<b>32</b>" and len(first) > 1000
    app.controls["n"].value = 64
    assert app.calls == 2 and app.html.value == "<b>64</b>"
    assert app.image.value != first
    assert seen[-1][0] == 64 and app.last_error is None


@pytest.mark.widgets
def test_live_app_shows_errors_in_its_output_area_and_stays_alive():
    def update(n):
        if n > 5:
            raise BadInputError(f"n={n} is too big for this demo; choose n <= 5")
        if n < 0:
            raise ZeroDivisionError("boom")
        return f"ok {n}"

    app = LiveApp(update, {"n": w.IntSlider(value=1, min=-3, max=10)})
    assert app.errors.outputs == () and app.html.value == "ok 1"
    app.controls["n"].value = 7
    assert isinstance(app.last_error, BadInputError)
    assert app.errors.outputs[0]["name"] == "stderr"
    assert "n=7 is too big" in app.errors.outputs[0]["text"]
    app.controls["n"].value = -1  # an unexpected error says it is a bug of the course
    assert "ZeroDivisionError: boom" in app.errors.outputs[0]["text"]
    assert "bug in the course" in app.errors.outputs[0]["text"]
    app.controls["n"].value = 2  # recovers and clears the error area
    assert app.errors.outputs == () and app.html.value == "ok 2" and app.last_error is None


@pytest.mark.widgets
def test_live_app_shows_an_error_where_the_output_widget_swallows_it_as_in_a_kernel():
    """In a running kernel an Output widget's ``__exit__`` swallows the exception it prints."""
    class Swallowing(w.Output):
        def __exit__(self, *exc):
            super().__exit__(*exc)
            return True

    calls = []

    def update(n):
        calls.append(n)
        if n > 5:
            raise BadInputError(f"n={n} is too big for this demo; choose n <= 5")
        return f"ok {n}"

    app = LiveApp(update, {"n": w.IntSlider(value=1, min=0, max=10)}, run_now=False)
    app.progress_area = Swallowing()
    app.controls["n"].value = 7
    assert calls == [7] and isinstance(app.last_error, BadInputError)
    assert "n=7 is too big" in app.errors.outputs[0]["text"]
    app.controls["n"].value = 2
    assert app.last_error is None and app.html.value == "ok 2"


@pytest.mark.widgets
def test_control_builders_give_sliders_over_the_sizes():
    s = log2_slider(4, 8, 64)
    assert s.options == (("16", 16), ("32", 32), ("64", 64), ("128", 128), ("256", 256))
    assert s.value == 64 and s.continuous_update is False
    assert size_slider([1000, 2000]).options[0][0] == "1,000"
    d = device_buttons()
    assert d.value == ("gpu" if course.gpu_available() else "cpu")
    assert "gpu" in [v for _, v in d.options]


def test_progress_counts_a_sweep():
    assert list(progress(range(3), disable=True)) == [0, 1, 2]


@pytest.mark.slow
@pytest.mark.widgets
def test_matmul_app_times_the_chosen_size_and_explains_a_missing_gpu():
    from course.hardware.widgets import matmul_app

    app = matmul_app(sizes=(16, 32, 64), size=32)
    assert app.last_error is None and "32×32 float32" in app.html.value
    before = app.image.value
    app.controls["n"].value = 64
    assert "64×64 float32" in app.html.value and app.image.value != before
    app.controls["dtype"].value = "float64"
    assert "64×64 float64" in app.html.value
    app.controls["device"].value = "gpu"
    assert app.last_error is None
    if not course.gpu_available():
        assert "No GPU here" in app.html.value and "Change runtime type" in app.html.value
    else:
        assert "GPU</b>" in app.html.value


# ----------------------------------------------------- caches, view-only controls and noisy points

def test_measurement_cache_measures_each_key_once_and_forgets_the_oldest():
    from course.widgets import MeasurementCache

    cache = MeasurementCache(maxsize=2)
    calls = []

    def measure(k):
        calls.append(k)
        return k * 10

    assert cache.get("a", lambda: measure(1)) == 10
    assert cache.get("a", lambda: measure(99)) == 10          # kept: not measured again
    cache.get("b", lambda: measure(2))
    cache.get("c", lambda: measure(3))                        # "a" is the oldest: forgotten
    assert calls == [1, 2, 3] and cache.measured == 3 and "a" not in cache and len(cache) == 2
    with pytest.raises(ValueError, match="maxsize"):
        MeasurementCache(maxsize=0)


@pytest.mark.widgets
def test_live_app_rejects_an_unknown_view_only_control_and_keeps_the_known_ones():
    with pytest.raises(ValueError, match="view_only names controls"):
        LiveApp(lambda n: "x", {"n": w.IntSlider(value=1)}, view_only=("mark",))
    app = LiveApp(lambda n, mark: f"{n} {mark}", {"n": w.IntSlider(value=1), "mark": w.IntSlider(value=2)},
                  view_only=("mark",))
    assert app.view_only == ("mark",) and app.html.value == "1 2" and app.status.value == ""


@pytest.mark.widgets
def test_a_view_only_control_redraws_from_the_cache_without_measuring():
    from course.widgets import MeasurementCache

    cache = MeasurementCache()
    measured = []

    def update(n, mark):
        value = cache.get(n, lambda: measured.append(n) or n * 2)
        return f"n={n} value={value} mark={mark}"

    app = LiveApp(update, {"n": w.IntSlider(value=3), "mark": w.IntSlider(value=0)}, view_only=("mark",))
    for m in (1, 2, 3):
        app.controls["mark"].value = m
    assert measured == [3] and app.html.value == "n=3 value=6 mark=3"
    app.controls["n"].value = 4
    assert measured == [3, 4]


def test_noise_html_is_empty_for_steady_timings_and_says_why_for_noisy_ones():
    from course.widgets import noise_html

    assert noise_html([{"median_s": 1.0, "noisy": False}]) == ""
    text = noise_html([{"median_s": 1.0, "noisy": True, "load": 3.0}, {"median_s": 1.0, "noisy": False}])
    assert "1 of 2 measurements are noisy" in text and "busy" in text


def test_sweep_figure_draws_noisy_points_hollow_with_a_legend_entry():
    from course.plots import NOISY_LABEL

    rs = _sweep()
    rs.records[2]["noisy"] = True
    fig = sweep_figure(rs, [], x="n")
    hollow = [ln for ln in fig.axes[0].lines if ln.get_label() == NOISY_LABEL]
    assert len(hollow) == 1 and list(hollow[0].get_xdata()) == [4.0]
    assert hollow[0].get_markerfacecolor() == "white"
    clean = sweep_figure(_sweep(), [], x="n")
    assert NOISY_LABEL not in _labels(clean)


def test_a_figure_that_times_nothing_does_not_say_measured_live():
    from course.vectorize.plots import flynn_figure

    text = _texts(flynn_figure())
    assert "Measured live" not in text and "Nothing timed. This machine: CPU:" in text


def test_figure_to_png_keeps_the_footer_and_anything_longer_than_the_canvas():
    import io

    from PIL import Image

    from course.plots import add_footer, figure_to_png, new_figure

    def png_size(title):
        fig, (ax,) = new_figure(1, width=4.0, height=3.0)
        ax.plot([1, 10, 100], [1e-3, 1e-2, 1e-1])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(title)
        add_footer(fig, devices=["cpu"])
        return fig.get_size_inches(), Image.open(io.BytesIO(figure_to_png(fig, dpi=50))).size

    (w, h), size = png_size("short")
    assert size == (int(w * 50), int(h * 50)) and h > 3.0           # drawn once; the footer's band added
    (w, h), size = png_size("a title far longer than these small axes, which would be cut at the edge " * 2)
    assert size[0] > w * 50                                         # the tight box took the whole title in


def test_log_axes_are_labelled_in_plain_text():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from course.plots import new_figure, plain_tick_labels

    fig, (ax,) = new_figure()
    ax.plot([1e-3, 1e3], [0.2, 0.5])
    ax.set_xscale("log")
    ax.set_yscale("log")
    FigureCanvasAgg(plain_tick_labels(fig)).draw()
    major = [t.get_text() for t in ax.get_xticklabels()]
    minor = [t.get_text() for t in ax.get_yticklabels(minor=True)]
    assert "10⁻³" in major and "10³" in major and "2×10⁻¹" in minor
    assert not any("$" in t for t in major + minor)


def test_a_legend_too_wide_for_its_axes_goes_under_them_and_the_axes_keep_their_width():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from course.plots import new_figure, place_legend

    fig, (left, right) = new_figure(2, width=8.0, height=3.5)
    left.plot([1, 2], [1, 2], label="short")
    right.plot([1, 2], [1, 2], label="CPU: a long processor name (recorded on a long GPU name, 2026-01-02) " * 2)
    place_legend(left)
    place_legend(right)
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.canvas.draw()
    inside, under = left.get_legend(), right.get_legend()
    assert inside.get_bbox_to_anchor().y0 >= left.get_window_extent(renderer).y0        # kept inside
    assert under.get_window_extent(renderer).y1 < right.get_window_extent(renderer).y0  # under the axes
    assert right.get_window_extent(renderer).width > 0.8 * left.get_window_extent(renderer).width
    assert place_legend(new_figure()[1][0]) is None                                     # nothing labelled


def test_a_figure_drawn_from_a_reference_alone_never_says_measured_live():
    from course.plots import add_footer, new_figure

    fig, _ = new_figure(1)
    add_footer(fig, _sweep("reference", gpu=True))
    text = _texts(fig)
    assert "Measured live" not in text and "Recorded (not measured in this run) on" in text


@pytest.mark.widgets
def test_a_displayed_app_leaves_its_figure_and_lines_as_static_outputs_only_for_the_book(monkeypatch):
    import base64

    import IPython.display
    import matplotlib.pyplot as plt

    def update(n):
        fig, ax = plt.subplots()
        ax.plot(range(n), label="GPU (recorded on Test GPU)")
        ax.legend()
        return fig, f"<b>n = {n}</b> &amp; more"

    app = LiveApp(update, {"n": w.IntSlider(value=3)})
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj, raw=False: shown.append((obj, raw)))
    monkeypatch.delenv("COURSE_STATIC", raising=False)
    app._ipython_display_()
    assert shown == [(app.widget, False)]                 # a live notebook: the widget alone

    shown.clear()
    monkeypatch.setenv("COURSE_STATIC", "1")
    app._ipython_display_()
    assert shown[0] == (app.widget, False)
    bundles = [obj for obj, raw in shown[1:] if raw]
    assert [sorted(b) for b in bundles] == [["text/html", "text/plain"], ["image/png", "text/plain"]]
    assert bundles[0]["text/plain"] == "n = 3 & more"
    png = base64.b64decode(bundles[1]["image/png"])
    assert png.startswith(b"\x89PNG") and png == bytes(app.image.value)
    # the figure in words, the page's alt text: its takeaway first, then its titles and legend entries
    takeaway, *words = bundles[1]["text/plain"].splitlines()
    assert "GPU (recorded on Test GPU)" in takeaway and "2" in takeaway    # read off the curve's numbers
    assert words == ["GPU (recorded on Test GPU)"]

    app.update_fn = lambda n: (_ for _ in ()).throw(BadInputError("n must be >= 0"))
    app.controls["n"].value = -1                            # an error: its message comes first
    assert app.static_outputs()[0] == {"text/plain": "n must be >= 0"}


def test_describe_figures_makes_a_figures_words_its_text_copy_in_ipython(monkeypatch):
    import types

    import IPython
    import matplotlib.pyplot as plt
    from IPython.core.formatters import PlainTextFormatter

    from course.widgets import describe_figures

    fig, ax = plt.subplots()
    ax.set_title("bandwidth")
    formatter = PlainTextFormatter()
    assert formatter(fig).startswith("<Figure size")
    hooks = []
    shell = types.SimpleNamespace(display_formatter=types.SimpleNamespace(formatters={"text/plain": formatter}),
                                  events=types.SimpleNamespace(register=lambda event, fn: hooks.append((event, fn))))
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    describe_figures()
    assert formatter(fig) == "bandwidth"
    formatter.pop(type(fig))                               # what %matplotlib inline does
    assert formatter(fig).startswith("<Figure size")
    assert sorted(event for event, _ in hooks) == ["post_execute", "pre_execute"]
    hooks[0][1]()                                          # the next cell
    assert formatter(fig) == "bandwidth"
    plt.close(fig)
