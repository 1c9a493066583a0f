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
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import ipywidgets as widgets

from .devices import gpu_available
from .errors import CourseError
from .plots import figure_to_png

__all__ = ["LiveApp", "size_slider", "log2_slider", "dtype_dropdown", "device_buttons",
           "control_panel", "progress", "error_message", "IPYWIDGETS_MAJOR"]

IPYWIDGETS_MAJOR = int(widgets.__version__.split(".")[0])


def error_message(exc: BaseException) -> str:
    """What a learner should read when a callback fails."""
    if isinstance(exc, CourseError):
        return str(exc)
    if isinstance(exc, MemoryError):
        return f"Out of memory ({exc}). Choose a smaller size."
    return (f"{type(exc).__name__}: {exc}\n(This looks like a bug in the course, not in what you "
            "did: please report it with the values of the controls.)")


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

    Attributes
    ----------
    image, html, errors : the output widgets (``errors`` is an ``Output``).
    last_error : the last exception (None after a successful update).
    calls : how many updates have run; ``last_seconds``: how long the last took.
    """

    def __init__(self, update: Callable[..., Any], controls: dict[str, widgets.Widget],
                 title: str | None = None, run_now: bool = True):
        self.update_fn = update
        self.controls = dict(controls)
        self.image = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        self.image.layout.display = "none"
        self.html = widgets.HTML()
        self.errors = widgets.Output()
        self.last_error: BaseException | None = None
        self.last_result: Any = None
        self.calls = 0
        self.last_seconds = 0.0
        parts: list[widgets.Widget] = []
        if title:
            parts.append(widgets.HTML(f"<b>{title}</b>"))
        parts.append(widgets.HBox(list(self.controls.values()),
                                  layout=widgets.Layout(flex_flow="row wrap")))
        parts += [self.errors, self.html, self.image]
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
        self.errors.outputs = ()
        try:
            result = self.update_fn(**self.values())
        except Exception as exc:  # shown, never raised into the widget machinery
            self.last_error = exc
            self.errors.append_stderr(error_message(exc) + "\n")
        else:
            self.last_error = None
            self.last_result = result
            self._show(result)
        finally:
            self.calls += 1
            self.last_seconds = time.perf_counter() - t0

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
            self.image.value = figure_to_png(fig)
            self.image.layout.display = None
        else:
            self.image.layout.display = "none"

    # Display as the VBox in ipywidgets 7 and 8.
    def _ipython_display_(self, **kwargs: Any) -> None:
        from IPython.display import display

        display(self.widget)

    def _repr_mimebundle_(self, **kwargs: Any):
        rep = getattr(self.widget, "_repr_mimebundle_", None)
        return rep(**kwargs) if rep else None


# ----------------------------------------------------------------- control builders

def _fmt_size(n: int) -> str:
    return f"{n:,}"


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


def log2_slider(lo: int, hi: int, value: int | None = None, description: str = "n") -> widgets.SelectionSlider:
    """A slider over 2**lo ... 2**hi."""
    return size_slider([2 ** k for k in range(lo, hi + 1)],
                       None if value is None else value, description)


def dtype_dropdown(dtypes: Iterable[str] = ("float32", "float64"), value: str | None = None,
                   description: str = "dtype") -> widgets.Dropdown:
    dtypes = list(dtypes)
    return widgets.Dropdown(options=dtypes, value=value or dtypes[0], description=description,
                            layout=widgets.Layout(width="200px"))


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


def progress(iterable: Iterable | None = None, total: int | None = None, desc: str | None = None,
             disable: bool | None = None, **kwargs: Any):
    """A progress bar for sweeps: a widget in notebooks, text in a terminal (``tqdm.auto``)."""
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, disable=disable, leave=False, **kwargs)


def escape(s: Any) -> str:
    return html.escape(str(s))
