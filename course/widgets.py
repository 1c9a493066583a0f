"""Widget builders the lessons share; they work with ipywidgets 7.7 (Colab) and 8.

The pattern every lesson uses is :class:`LiveApp`: some controls, and an
``update(**values)`` function that returns a matplotlib figure and/or an HTML
string.  The app draws the figure into an ``Image`` widget, the text into an
``HTML`` widget, and any exception into its error area (an ``Output``) with a
message that says what to do: a callback never dies silently and never kills
the kernel.

Because the app renders with plain widget values (PNG bytes, HTML text) rather
than through the notebook's display machinery, a test can drive it in pytest by
setting ``app.controls["n"].value`` and reading ``app.image.value``.

>>> import ipywidgets as w
>>> app = LiveApp(lambda n: f"<b>{n * 2}</b>", {"n": w.IntSlider(value=2)})
>>> app.html.value
'<b>4</b>'
>>> app.controls["n"].value = 5
>>> app.html.value
'<b>10</b>'

Measurements are slow and redraws are cheap, so an app keeps what it measured in a
:class:`MeasurementCache`, keyed by the controls that change the measurement; a control
that only changes the view (a marker, a highlight, a log scale) is named in ``view_only``
and redraws from the cache.  ``benchmarks/bench_widgets.py`` times every app's first
draw, a rerun, and a move of each view-only control.

A page read without a kernel (the executed book, ``tools/build_book.py``) cannot draw a
widget, so where ``COURSE_STATIC=1`` an app displayed in a notebook also leaves its current
figure as a plain PNG (described in words by :func:`figure_words`: titles, legend entries, notes)
and its printed lines as HTML and text (:meth:`LiveApp.static_outputs`).
"""

from __future__ import annotations

import base64
import html
import math
import numbers
import os
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar

import ipywidgets as widgets
import numpy as np

from .arguments import Given, OneOf, Optional, Real, Whole, Wholes, arguments
from .devices import gpu_available, gpu_unavailable_reason
from .errors import BadInputError, CourseError, GPUUnavailableError, validate_function, validate_text
from .measurement import noisy_note, validate_timing_records
from .plots import figure_takeaway, figure_to_png, validate_figure
from .timing import benchmark

__all__ = ["LiveApp", "MeasurementCache", "size_slider", "log2_slider", "dtype_dropdown", "device_buttons",
           "control_panel", "progress", "error_message", "noise_html", "IPYWIDGETS_MAJOR", "WIDGET_LIMIT_S",
           "measured_rate", "estimate_s", "require_affordable", "cost_error", "STATIC_ENV",
           "figure_words", "describe_figures", "clear_area", "no_gpu_html"]

_T = TypeVar("_T")

#: Set to 1 by the book build: a displayed app also leaves a static copy of what it shows.
STATIC_ENV = "COURSE_STATIC"

IPYWIDGETS_MAJOR = int(widgets.__version__.split(".")[0])

_FLAG = OneOf(True, False)


def _text(what: str, empty: bool = True) -> Given:
    return Given(validate_text, what=what, empty=empty)


def _validate_exception(exc: Any) -> BaseException:
    if not isinstance(exc, BaseException):
        raise BadInputError(f"exc must be the exception a callback raised, got {type(exc).__name__} {exc!r:.60}")
    return exc


def _validate_output(out: Any) -> widgets.Output:
    if not isinstance(out, widgets.Output):
        raise BadInputError(f"out must be an ipywidgets Output, got {type(out).__name__} {out!r:.60}")
    return out


def _validate_controls(controls: Any) -> dict:
    """``controls`` as a dict name -> widget, each widget with a ``value`` (a slider, a dropdown, buttons)."""
    if not isinstance(controls, dict):
        raise BadInputError(f"controls must be a dict of name -> widget (such as {{'n': size_slider([64, 128])}}), "
                            f"got {type(controls).__name__} {controls!r:.60}")
    bad = [k for k, w in controls.items() if not isinstance(k, str) or not isinstance(w, widgets.Widget)
           or not hasattr(w, "value")]
    if bad:
        raise BadInputError(f"controls must map names (strings) to widgets with a value; these do not: {bad!r:.80}")
    return dict(controls)


def _validate_names(names: Any, what: str = "names", empty: bool = True) -> list[str]:
    """``names`` as a list of strings (a bare string is refused: "float32" is not a list of dtypes)."""
    if isinstance(names, (str, bytes, dict)) or not isinstance(names, (list, tuple)):
        raise BadInputError(f"{what} must be a list of names (such as ['float32', 'float64']), got {names!r:.60}")
    if not all(isinstance(n, str) for n in names) or not (empty or names):
        raise BadInputError(f"{what} must hold at least one name, each a string; got {names!r:.80}")
    return list(names)


def _validate_key(key: Any) -> Hashable:
    try:
        hash(key)
    except TypeError:
        raise BadInputError(f"key must be hashable (a tuple of the settings the rate depends on), got "
                            f"{type(key).__name__} {key!r:.60}") from None
    return key


def _validate_seconds(seconds: Any) -> float:
    """A duration: a number >= 0 (an estimate may be infinite; NaN is refused)."""
    if isinstance(seconds, (bool, np.bool_)) or not isinstance(seconds, numbers.Real) or math.isnan(seconds) \
            or seconds < 0:
        raise BadInputError(f"seconds must be a number of seconds >= 0, got {seconds!r:.60}")
    return float(seconds)


@arguments(exc=Given(_validate_exception))
def error_message(exc: BaseException) -> str:
    """What a learner should read when a callback fails."""
    if isinstance(exc, CourseError):
        return str(exc)
    if isinstance(exc, MemoryError):
        return f"Out of memory ({exc}). Choose a smaller size."
    return (f"{type(exc).__name__}: {exc}\n(This looks like a bug in the course, not in what you "
            "did: please report it with the values of the controls.)")


#: How "no GPU here" looks in every app and lesson: one note, the same everywhere, in words that wrap.
NO_GPU_STYLE = ("border-left:4px solid #0072B2;background:#eef4fa;padding:6px 10px;margin:4px 0;"
                "white-space:normal;word-break:normal;overflow-wrap:anywhere;font-family:inherit")


@arguments(text=_text("text"), head=_FLAG)
def no_gpu_html(text: str = "", head: bool = True) -> str:
    """The note every app shows where a GPU was asked for and none answers: one look, everywhere.

    ``text`` (HTML) says what the app shows instead; with ``head`` the note opens with "No GPU here"
    and the reason.  An app that raises :class:`~course.errors.GPUUnavailableError` gets the same note
    from :class:`LiveApp`, with the error's message as its text.

    >>> "No GPU here" in no_gpu_html("The CPU ran instead.")
    True
    """
    why = gpu_unavailable_reason() if head else ""
    lead = ("<b>No GPU here</b>" + (f" ({html.escape(why)})" if why else "") + ". ") if head else ""
    return f"<div class='course-no-gpu' role='note' style='{NO_GPU_STYLE}'>{lead}{text}</div>"


@arguments(out=Given(_validate_output))
def clear_area(out: widgets.Output) -> None:
    """Empty an ``Output`` widget, the views of the widgets it showed included.

    In a kernel this is ``clear_output()``: under ipywidgets 8, assigning ``outputs = ()`` left the view of
    a closed progress bar in the front end ("Error displaying widget: model not found" after Run All).
    Without a kernel (pytest, a script) nothing was sent to a front end, and the outputs are emptied.
    """
    try:
        from IPython import get_ipython
        kernel = getattr(get_ipython(), "kernel", None)
    except ImportError:
        kernel = None
    if kernel is not None:
        out.clear_output()
    else:
        out.outputs = ()


class MeasurementCache:
    """Measurements kept by the parameters that change them (the most recent ``maxsize``).

    ``cache.get(key, measure)`` returns what ``measure()`` returned the first time it was
    asked for ``key``; later calls with the same key redraw from it without measuring
    again.  ``measured`` counts the calls of ``measure`` (a test can check that a view-only
    control does not re-measure).

    >>> cache = MeasurementCache()
    >>> cache.get(("cpu", 64), lambda: 1.5), cache.get(("cpu", 64), lambda: 9.9)
    (1.5, 1.5)
    >>> cache.measured
    1
    """

    def __init__(self, maxsize: int = 16):
        if not isinstance(maxsize, int) or maxsize < 1:
            raise ValueError(f"maxsize must be a whole number >= 1, got {maxsize!r}")
        self.maxsize = maxsize
        self.measured = 0
        self._items: OrderedDict = OrderedDict()

    def get(self, key: Hashable, measure: Callable[[], _T]) -> _T:
        """The measurement for ``key``: kept from before, or made now by ``measure()``."""
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        value = measure()
        self.measured += 1
        self._items[key] = value
        while len(self._items) > self.maxsize:
            self._items.popitem(last=False)
        return value

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        """Forget every measurement (the next draw measures again)."""
        self._items.clear()


@arguments(timings=Given(validate_timing_records))
def noise_html(timings: Iterable[Any]) -> str:
    """An HTML line saying how many of these timings (or records) are noisy, or ``""`` if none is.

    >>> noise_html([{"median_s": 1e-3, "noisy": False}])
    ''
    """
    note = noisy_note(timings)
    return f"<p style='color:#a40'><i>{html.escape(note)}</i></p>" if note else ""


@arguments(fig=Given(validate_figure))
def figure_words(fig: Any) -> str:
    """The words a figure shows (titles, legend entries, notes), one line each: its text description.

    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> _ = ax.plot([1, 2], label="GPU (recorded on Test GPU)"); _ = ax.set_title("speed"); _ = ax.legend()
    >>> figure_words(fig).splitlines()
    ['speed', 'GPU (recorded on Test GPU)']
    """
    words: list[str] = []
    legends = list(getattr(fig, "legends", []))
    for ax in getattr(fig, "axes", []):
        words.append(ax.get_title())
        if ax.get_legend() is not None:
            legends.append(ax.get_legend())
    words += [t.get_text() for legend in legends for t in legend.get_texts()]
    words += [t.get_text() for t in getattr(fig, "texts", [])]
    return "\n".join(w.strip() for w in words if w and w.strip())


def describe_figures() -> None:
    """Give every matplotlib figure shown in this IPython its words (:func:`figure_words`) as its text copy.

    The book build runs it in each kernel it starts: a figure's text copy becomes the page's alt
    text, naming the devices its curves come from.  ``%matplotlib inline`` drops every printer of
    figures, so it is registered again before and after each cell.  Outside IPython it does nothing.
    """
    try:
        from IPython import get_ipython
        from matplotlib.figure import Figure
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return

    def register() -> None:
        shell.display_formatter.formatters["text/plain"].for_type(
            Figure, lambda fig, printer, cycle: printer.text(figure_words(fig) or repr(fig)))

    register()
    shell.events.register("pre_execute", register)
    shell.events.register("post_execute", register)


def _known_view_only(controls: dict, view_only: list[str]) -> None:
    unknown = [k for k in view_only if k not in controls]
    if unknown:
        raise BadInputError(f"view_only names controls this app does not have: {unknown}; "
                            f"its controls are {list(controls)}")


class LiveApp:
    """Controls + a function of their values, redrawn whenever a value changes.

    Parameters
    ----------
    update : ``update(**values)`` returns a ``Figure``, an HTML ``str``, a
        ``(Figure, str)`` pair, or None.
    controls : name -> widget; ``update`` is called with each widget's ``.value``
        under that name.
    title : optional HTML heading above the controls.
    run_now : call ``update`` once straight away (default True).
    view_only : names of the controls that only change the view (markers, highlights,
        scales): the app's ``update`` must redraw them from cached measurements.  The
        widget benchmark times a move of each one.

    Attributes
    ----------
    image, html, errors : the output widgets (``errors`` is an ``Output``).
    last_error : the last exception (None after a successful update).
    calls : how many updates have run; ``last_seconds``: how long the last took, of which
        ``last_render_seconds`` went to drawing its figure into PNG bytes.
    status : an ``HTML`` line that says "measuring ..." while an update runs.
    progress_area : an ``Output`` where progress bars drawn during an update appear.
    """

    @arguments(update=Given(validate_function, what="update"), controls=Given(_validate_controls),
               title=Optional(_text("title")), run_now=_FLAG, view_only=Given(_validate_names, what="view_only"),
               then=_known_view_only)
    def __init__(self, update: Callable[..., Any], controls: dict[str, widgets.Widget],
                 title: str | None = None, run_now: bool = True, view_only: Iterable[str] = ()):
        self.update_fn = update
        self.controls = dict(controls)
        self.view_only = tuple(view_only)
        self.status = widgets.HTML()
        self.progress_area = widgets.Output()
        self.image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        self.image.layout.display = "none"
        self.html = widgets.HTML()
        self.takeaway = widgets.HTML()   # the figure's one-sentence takeaway, printed under it (its alt text)
        self.notice = widgets.HTML()     # "no GPU here" (no_gpu_html), when a GPU was asked for and none answers
        self.errors = widgets.Output()
        self.last_error: BaseException | None = None
        self.last_result: Any = None
        self.figure_words = ""
        self.calls = 0
        self.last_seconds = 0.0
        self.last_render_seconds = 0.0
        parts: list[widgets.Widget] = []
        if title:
            parts.append(widgets.HTML(f"<b>{title}</b>"))
        parts.append(widgets.HBox(list(self.controls.values()),
                                  layout=widgets.Layout(flex_flow="row wrap")))
        parts += [self.status, self.progress_area, self.notice, self.errors, self.html, self.image, self.takeaway]
        self.widget = widgets.VBox(parts)
        for w in self.controls.values():
            w.observe(self._on_change, names="value")
        if run_now:
            self.refresh()

    def values(self) -> dict[str, Any]:
        return {k: w.value for k, w in self.controls.items()}

    def _on_change(self, _change: Any) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Run ``update`` with the current values and show what it returns (or its error)."""
        t0 = time.perf_counter()
        clear_area(self.errors)
        self.status.value = "<small><i>measuring ...</i></small>"
        result, error = None, None
        try:
            # The try sits inside the ``with``: in a running kernel, an Output widget's ``__exit__``
            # prints an exception into itself and swallows it, so an error raised through it would
            # vanish with the progress area cleared below.
            with self.progress_area:
                try:
                    result = self.update_fn(**self.values())
                except Exception as exc:  # shown, never raised into the widget machinery
                    error = exc
            if error is None:
                self.last_result = result
                t_render = time.perf_counter()
                try:
                    self._show(result)
                except Exception as exc:  # a drawing error is shown the same way
                    error = exc
                self.last_render_seconds = time.perf_counter() - t_render
            self.last_error = error
            self.notice.value = ""
            if error is not None:   # what is left on screen belongs to the previous setting: hide it
                self.html.value, self.takeaway.value = "", ""
                self.image.layout.display = "none"
                if isinstance(error, GPUUnavailableError):
                    self.notice.value = no_gpu_html(html.escape(str(error)), head=False)
                else:
                    self.errors.append_stderr(error_message(error) + "\n")
        finally:
            clear_area(self.progress_area)     # the progress bars drawn during the update, closed by now
            self.status.value = ""
            self.calls += 1
            self.last_seconds = time.perf_counter() - t0

    def shown_error(self) -> str:
        """The text of what the app shows for its last error: its error area, or its "no GPU here" note."""
        text = "".join(o.get("text", "") for o in self.errors.outputs)
        note = html.unescape(re.sub(r"<[^>]+>", "", self.notice.value))
        return "\n".join(t for t in (text, note) if t)

    def _show(self, result: Any) -> None:
        fig, text = None, None
        if isinstance(result, tuple):
            for item in result:
                if isinstance(item, str):
                    text = item
                elif item is not None:
                    fig = item
        elif isinstance(result, str):
            text = result
        elif result is not None:
            fig = result
        self.html.value = text or ""
        if fig is not None:
            said = figure_takeaway(fig)
            self.takeaway.value = f"<p role='note'>{html.escape(said)}</p>" if said else ""
            self.figure_words = "\n".join(w for w in (said, figure_words(fig)) if w)   # the takeaway first
            self.image.value = figure_to_png(fig)
            self.image.layout.display = None
        else:
            self.takeaway.value = ""
            self.image.layout.display = "none"

    # Display as the VBox in ipywidgets 7 and 8.
    def add_player(self, play: widgets.Play, hint: str = "press play to step through") -> None:
        """Show ``play`` (a ``Play`` widget already linked to a step slider) under the title, with a hint."""
        self.widget.children = (self.widget.children[0], widgets.HBox([play, widgets.HTML(f"&nbsp;{hint}")]),
                                *self.widget.children[1:])
        self.play = play

    def static_outputs(self) -> list[dict[str, str]]:
        """What the app shows now, as display bundles a page without a kernel can render.

        Its error (text), its printed lines (HTML, with a plain-text copy) and its figure
        (``image/png``, base64), in the order the app shows them.
        """
        bundles: list[dict[str, str]] = []
        if self.notice.value:
            bundles.append({"text/html": self.notice.value, "text/plain": self.shown_error()})
        elif self.last_error is not None:
            bundles.append({"text/plain": error_message(self.last_error)})
        if self.html.value:
            text = html.unescape(re.sub(r"<[^>]+>", " ", self.html.value))
            bundles.append({"text/html": self.html.value, "text/plain": re.sub(r"[ \t]+", " ", text).strip()})
        if self.image.value and self.image.layout.display != "none":
            bundles.append({"image/png": base64.b64encode(bytes(self.image.value)).decode("ascii"),
                            "text/plain": self.figure_words or "the app's figure"})
        return bundles

    def _ipython_display_(self, **kwargs: Any) -> None:
        from IPython.display import display

        display(self.widget)
        if os.environ.get(STATIC_ENV, "") not in ("", "0"):
            for bundle in self.static_outputs():
                display(bundle, raw=True)

    def _repr_mimebundle_(self, **kwargs: Any):
        rep = getattr(self.widget, "_repr_mimebundle_", None)
        return rep(**kwargs) if rep else None


# ----------------------------------------------------------------- cost bounds

#: The longest one refresh of an app may take on a busy 2-core laptop.  A setting whose
#: estimated time is longer is refused up front (or its slow part skipped), with the
#: estimate and what to choose instead: no reachable slider value freezes the kernel.
WIDGET_LIMIT_S = 10.0

_RATES: dict = {}


@arguments(key=Given(_validate_key), work=Real(above=0, hint="units of work one call of fn does"),
           fn=Given(validate_function, what="fn"))
def measured_rate(key: Hashable, work: float, fn: Callable[[], Any]) -> float:
    """Units of ``work`` per second: ``work`` over the fastest of a few calls of ``fn()``, measured once per ``key``.

    ``fn`` runs the same kind of work at a *small* size (a fraction of a second); the rate
    is kept for the session, so a cost estimate costs one small measurement, once.  The
    fastest of a few calls is used: the rate of a quiet machine (a busy one only takes
    longer, and one slow moment must not refuse a setting for the whole session).

    >>> import numpy as np
    >>> a = np.ones(1000)
    >>> measured_rate(("doctest sum", 1000), 1000, lambda: a.sum()) > 0
    True
    """
    if key not in _RATES:
        t = benchmark(fn, warmup=1, repeat=5, budget_s=0.5, name=f"rate of {key}")
        _RATES[key] = work / max(float(t.samples.min()), 1e-9)
    return _RATES[key]


@arguments(work=Real(lo=0, hint="units of work"), rate=Real(above=0, hint="units of work per second"))
def estimate_s(work: float, rate: float) -> float:
    """Estimated seconds of ``work`` at a measured ``rate`` (work per second)."""
    return float(work) / max(float(rate), 1e-30)


@arguments(what=_text("what"), seconds=Given(_validate_seconds), how=_text("how"), instead=_text("instead"),
           limit_s=Real(above=0, hint="seconds one refresh may take"))
def cost_error(what: str, seconds: float, how: str, instead: str,
               limit_s: float = WIDGET_LIMIT_S) -> BadInputError:
    """The error an app shows for a setting estimated to take ``seconds`` (over ``limit_s``)."""
    return BadInputError(f"{what} would take about {seconds:,.0f} s on this machine ({how}); an app here keeps "
                         f"each refresh under {limit_s:g} s. {instead}")


def require_affordable(what: str, seconds: float, how: str, instead: str, limit_s: float = WIDGET_LIMIT_S) -> None:
    """Refuse (with :func:`cost_error`) a setting estimated to take more than ``limit_s`` seconds."""
    if seconds > limit_s:
        raise cost_error(what, seconds, how, instead, limit_s)


# ----------------------------------------------------------------- control builders

def _fmt_size(n: int) -> str:
    return f"{n:,}"


def _value_among(sizes: list[int], value: int | None) -> None:
    if value is not None and value not in sizes:
        raise BadInputError(f"value must be one of the slider's sizes {sizes!r:.120}, got {value}")


@arguments(sizes=Wholes(hint="the sizes the slider offers, e.g. powers of two"), value=Optional(Whole()),
           description=_text("description"), then=_value_among)
def size_slider(sizes: Sequence[int], value: int | None = None, description: str = "n") -> widgets.SelectionSlider:
    """A slider over the given sizes (e.g. powers of two), labelled with thousands separators."""
    sizes = [int(s) for s in sizes]
    if not sizes:
        raise ValueError("size_slider needs at least one size")
    value = sizes[len(sizes) // 2] if value is None else int(value)
    return widgets.SelectionSlider(options=[(_fmt_size(s), s) for s in sizes], value=value,
                                   description=description, continuous_update=False,
                                   style={"description_width": "initial"},
                                   layout=widgets.Layout(width="360px"))


@arguments(lo=Whole(lo=0, hi=62, hint="the smallest size is 2**lo"),
           hi=Whole(lo="lo", hi=62, hint="the largest size is 2**hi"), value=Optional(Whole()),
           description=_text("description"))
def log2_slider(lo: int, hi: int, value: int | None = None, description: str = "n") -> widgets.SelectionSlider:
    """A slider over 2**lo ... 2**hi."""
    return size_slider([2 ** k for k in range(lo, hi + 1)],
                       None if value is None else value, description)


def _dtype_among(dtypes: list[str], value: str | None) -> None:
    if value and value not in dtypes:
        raise BadInputError(f"value must be one of the dropdown's dtypes {dtypes}, got {value!r}")


@arguments(dtypes=Given(_validate_names, what="dtypes", empty=False), value=Optional(_text("value")),
           description=_text("description"), then=_dtype_among)
def dtype_dropdown(dtypes: Iterable[str] = ("float32", "float64"), value: str | None = None,
                   description: str = "dtype") -> widgets.Dropdown:
    dtypes = list(dtypes)
    return widgets.Dropdown(options=dtypes, value=value or dtypes[0], description=description,
                            layout=widgets.Layout(width="200px"))


def _both_offered(value: str | None, include_both: bool) -> None:
    if value == "both" and not include_both:
        raise BadInputError("value 'both' needs include_both=True: the buttons offer only CPU and GPU otherwise")


@arguments(value=Optional(OneOf("cpu", "gpu", "both")), include_both=_FLAG, then=_both_offered)
def device_buttons(value: str | None = None, include_both: bool = False) -> widgets.ToggleButtons:
    """CPU / GPU buttons.  GPU is offered even without one: choosing it then explains
    what to do and shows the reference results instead."""
    opts = [("CPU", "cpu"), ("GPU", "gpu")]
    if include_both:
        opts.append(("both", "both"))
    default = value or ("both" if include_both and gpu_available() else
                        "gpu" if gpu_available() else "cpu")
    return widgets.ToggleButtons(options=opts, value=default, description="device",
                                 style={"button_width": "70px"})


@arguments(sizes=Optional(Wholes()), size=Optional(Whole()), dtypes=Optional(Given(_validate_names, what="dtypes")),
           device=_FLAG, size_name=_text("size_name", empty=False))
def control_panel(sizes: Sequence[int] | None = None, size: int | None = None,
                  dtypes: Iterable[str] | None = ("float32", "float64"), device: bool = True,
                  size_name: str = "n") -> dict[str, widgets.Widget]:
    """The common size / dtype / device controls, as a dict ready for :class:`LiveApp`."""
    out: dict[str, widgets.Widget] = {}
    if sizes is not None:
        out[size_name] = size_slider(sizes, size, size_name)
    if dtypes:
        out["dtype"] = dtype_dropdown(dtypes)
    if device:
        out["device"] = device_buttons()
    return out


@arguments(total=Optional(Whole(lo=0)), desc=Optional(_text("desc")), disable=Optional(_FLAG))
def progress(iterable: Iterable | None = None, total: int | None = None, desc: str | None = None,
             disable: bool | None = None, **kwargs: Any) -> Any:
    """A progress bar for sweeps: a widget in notebooks, text in a terminal (``tqdm.auto``)."""
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, disable=disable, leave=False, **kwargs)


def escape(s: Any) -> str:
    return html.escape(str(s))
