"""Plot builders the lessons share: timing sweeps, speedups, bars.

Every figure names the device(s) it was measured on in a footer, and results
recorded elsewhere (reference GPU results) are drawn dashed and labelled
"recorded on <device>, <date>" so they can never pass for a live measurement.

Every figure is readable without telling colours apart: it draws with :data:`PALETTE` (Okabe–Ito),
each series has a marker as well as a colour (:func:`device_style`, :func:`series_style`), solid
means measured here, dashed recorded elsewhere, hollow noisy; no text is under :data:`MIN_FONT_PT`;
legends sit where no data is (:func:`place_legend`, :func:`figure_legend`).  Each figure carries a
one-sentence takeaway read off its numbers (:func:`set_takeaway`, :func:`figure_takeaway`), which
``LiveApp`` prints under it and :func:`figure_to_png` stores as the PNG's alt text.
``tests/test_figures.py`` holds every figure of the course to these rules.

>>> from course.results import ResultSet
>>> rs = ResultSet("demo")
>>> for n in (1, 2, 4):
...     rs.add(device="cpu", n=n, median_s=1e-3 * n)
>>> fig = sweep_figure(rs, x="n", y="median_s")
>>> "Measured live" in fig.texts[-1].get_text()
True
"""

from __future__ import annotations

import base64
import html
import io
import re
import sys
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from cycler import cycler
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import is_color_like
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.ticker import FuncFormatter, LogFormatterSciNotation
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from .arguments import Given, OneOf, Optional, Real, Whole, arguments
from .cpu import cpu_info
from .devices import gpu_info
from .errors import BadInputError, validate_text
from .legends import MIN_FONT_PT, devices_to_caption, figure_legend, label_points, place_legend
from .results import ResultSet, validate_references, validate_results
from .takeaways import figure_takeaway, power_text, set_takeaway, value_text

__all__ = ["COLORS", "PALETTE", "MARKERS", "LIVE_LS", "REFERENCE_LS", "SERIES_MARKERS", "SERIES_COLORS",
           "MIN_FONT_PT", "series_style", "tint", "device_style", "sweep_figure", "speedup_axes", "bar_figure",
           "add_footer", "live_device_text",
           "figure_to_png", "new_figure", "mark_point", "mark_noisy", "noisy_flags", "NOISY_LABEL", "log2_x",
           "power_text", "plain_tick_labels", "footer_text", "place_legend", "figure_legend", "label_points",
           "set_takeaway", "figure_takeaway", "value_text", "figure_html", "source_tag", "validate_figure",
           "validate_axes", "MAX_POINTS"]

#: The Okabe–Ito palette: eight colours told apart with every common colour-vision deficiency.  Every
#: figure of the course draws with these (and greys); a colour never carries meaning alone: each
#: device or series also has its own marker, and line style says where a number comes from
#: (:data:`LIVE_LS` measured in this run, :data:`REFERENCE_LS` recorded elsewhere; hollow markers: noisy).
PALETTE = {"blue": "#0072B2", "vermillion": "#D55E00", "green": "#009E73", "orange": "#E69F00",
           "purple": "#CC79A7", "sky blue": "#56B4E9", "black": "#000000", "yellow": "#F0E442"}
COLORS = {"cpu": PALETTE["blue"], "gpu": PALETTE["vermillion"]}
MARKERS = {"cpu": "o", "gpu": "s"}
LIVE_LS, REFERENCE_LS = "-", "--"
#: Markers for series beyond the two devices, in order (with :data:`SERIES_COLORS`, see :func:`series_style`).
SERIES_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "*")
SERIES_COLORS = tuple(PALETTE[k] for k in ("blue", "vermillion", "green", "orange", "purple", "sky blue", "black"))

# A curve drawn without a colour takes the palette's, in order; legends and ticks never go under 9 pt.
matplotlib.rcParams["axes.prop_cycle"] = cycler(color=SERIES_COLORS)
matplotlib.rcParams["legend.fontsize"] = MIN_FONT_PT


# ----------------------------------------------------------------------------- the arguments a figure takes

#: The most points one curve of a figure may hold (a sweep holds dozens): more is a mistake, refused unread.
MAX_POINTS = 10_000_000


def validate_figure(fig: Any, what: str = "fig") -> Figure:
    """``fig`` if it is a matplotlib ``Figure`` (what :func:`new_figure` and every figure function return)."""
    if not isinstance(fig, Figure):
        raise BadInputError(f"{what} must be a matplotlib Figure (new_figure() makes one), got {type(fig).__name__} "
                            f"{fig!r:.60}")
    return fig


def validate_axes(ax: Any, what: str = "ax") -> Axes:
    """``ax`` if it is one matplotlib ``Axes`` (one of the list :func:`new_figure` returns)."""
    if not isinstance(ax, Axes):
        raise BadInputError(f"{what} must be one matplotlib Axes (fig, (ax,) = new_figure()), got "
                            f"{type(ax).__name__} {ax!r:.60}")
    return ax


def _require_points(values: Any, what: str) -> None:
    """A list, tuple, range or array of at most :data:`MAX_POINTS` entries (its size read, not its entries)."""
    size = values.size if isinstance(values, np.ndarray) else (
        len(values) if isinstance(values, (list, tuple, range)) else None)
    if size is None or size > MAX_POINTS:
        raise BadInputError(f"{what} must be a list of at most {MAX_POINTS:,} entries, one per point, got "
                            f"{type(values).__name__} {values!r:.60}")


def _validate_values(values: Any, what: str) -> np.ndarray:
    """``values`` as a 1-D float array of at most :data:`MAX_POINTS` numbers (NaN allowed: a gap)."""
    _require_points(values, what)
    try:
        out = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise BadInputError(f"{what} must be a list of numbers, got {values!r:.60}") from None
    if out.ndim != 1:
        raise BadInputError(f"{what} must be one list of numbers, got an array of shape {out.shape}")
    return out


def _validate_flags(flags: Any) -> np.ndarray:
    """``flags`` as one bool per point (None, as a record may hold, is False)."""
    _require_points(flags, "noisy")
    try:
        out = np.asarray(flags, dtype=bool)
    except (TypeError, ValueError):
        raise BadInputError(f"noisy must be one True/False per point, got {flags!r:.60}") from None
    if out.ndim != 1:
        raise BadInputError(f"noisy must be one True/False per point, got an array of shape {out.shape}")
    return out


def _same_length(xs: np.ndarray, ys: np.ndarray, noisy: np.ndarray) -> None:
    if not len(xs) == len(ys) == len(noisy):
        raise BadInputError(f"xs, ys and noisy must hold one entry per point; got {len(xs)}, {len(ys)} and "
                            f"{len(noisy)}")


def _validate_records(records: Any) -> list[dict]:
    if isinstance(records, (str, bytes, dict, np.ndarray)) or not isinstance(records, Iterable):
        raise BadInputError(f"records must be a list of records (dicts), got {type(records).__name__} "
                            f"{records!r:.60}")
    records = list(records)
    if not all(isinstance(r, dict) for r in records):
        raise BadInputError("records must hold only records (dicts), as ResultSet.select(...) returns")
    return records


def _validate_devices(devices: Any) -> list[str]:
    """``devices`` as a list of "cpu" / "gpu" (a bare string is refused: "cpu" is not a list of devices)."""
    if isinstance(devices, (str, bytes, dict, np.ndarray)) or not isinstance(devices, Iterable):
        raise BadInputError(f"devices must be a list such as ['cpu'] or ['cpu', 'gpu'], got {devices!r:.60}")
    out = [d.strip().lower() if isinstance(d, str) else d for d in devices]
    if not all(d in ("cpu", "gpu") for d in out):
        raise BadInputError(f"devices must name 'cpu' or 'gpu' only, got {list(devices)!r:.80}")
    return out


def _validate_color(color: Any) -> Any:
    if isinstance(color, np.ndarray) or not is_color_like(color):
        raise BadInputError(f"color must be a matplotlib colour (a name such as 'k', a grey such as '0.35', or "
                            f"'#0072B2'), got {color!r:.60}")
    return color


def _validate_where(where: Any) -> dict:
    if not isinstance(where, dict):
        raise BadInputError(f"where must be a dict of record fields and values (such as {{'dtype': 'float32'}}), "
                            f"got {where!r:.60}")
    return where


def _validate_items(items: Any) -> list[tuple[str, float, str]]:
    """``items`` as a list of (label, value, device): a string, a finite number, a device name."""
    if isinstance(items, (str, bytes, dict, np.ndarray)) or not isinstance(items, Iterable):
        raise BadInputError(f"items must be a list of (label, value, device), got {items!r:.60}")
    items = list(items)
    for item in items:
        ok = isinstance(item, (tuple, list)) and len(item) == 3 and isinstance(item[0], str) \
            and isinstance(item[2], str)
        try:
            ok = ok and bool(np.isfinite(float(item[1])))
        except (TypeError, ValueError, OverflowError):
            ok = False
        if not ok:
            raise BadInputError(f"items must hold (label, value, device) with a finite value, got {item!r:.80}")
    return items


def _has_axes(fig: Figure) -> None:
    if not fig.axes:
        raise BadInputError("fig has no axes to mark a point on: draw the curve first (fig, (ax,) = new_figure())")


_FIG = Given(validate_figure)
_AX = Given(validate_axes)
_FLAG = OneOf(True, False)
_COLOR = Given(_validate_color)
_INCHES = Real(above=0, hi=400, hint="inches")


def _text(what: str, empty: bool = True) -> Given:
    return Given(validate_text, what=what, empty=empty)


def tint(name: str, amount: float = 0.25) -> str:
    """A light shade of a :data:`PALETTE` colour (``amount`` of it on white), for the fill of a diagram's box.

    >>> tint("black", 0.5)
    '#808080'
    """
    if name not in PALETTE:
        raise ValueError(f"tint takes a palette colour's name, one of {sorted(PALETTE)}; got {name!r}")
    if not 0 < amount <= 1:
        raise ValueError(f"amount must be in (0, 1], got {amount!r}")
    rgb = [int(PALETTE[name][i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(255 - amount * (255 - c)):02x}" for c in rgb)


@arguments(i=Whole(lo=0, hint="the series' number in its figure, from 0"), recorded=_FLAG)
def series_style(i: int, recorded: bool = False) -> dict:
    """Colour, marker and line style of the ``i``-th series of a figure: no two of the first 77 look alike.

    Colours cycle through :data:`SERIES_COLORS` and markers through :data:`SERIES_MARKERS` at different
    periods, so a series is told apart by its marker even where colours cannot be.  ``recorded`` makes it
    dashed (a reference result) instead of solid (measured live).

    >>> series_style(0)["marker"], series_style(7)["marker"], series_style(7)["color"] == series_style(0)["color"]
    ('o', '<', True)
    """
    return {"color": SERIES_COLORS[i % len(SERIES_COLORS)], "marker": SERIES_MARKERS[i % len(SERIES_MARKERS)],
            "ls": REFERENCE_LS if recorded else LIVE_LS}


@arguments(device=OneOf("cpu", "gpu"), recorded=_FLAG)
def device_style(device: str, recorded: bool = False) -> dict:
    """Colour, marker and line style of a device's curve: blue circles for the CPU, vermillion squares for
    the GPU; solid when measured live, dashed when recorded elsewhere.

    >>> device_style("gpu", recorded=True)["ls"]
    '--'
    """
    dev = str(device).lower()
    return {"color": COLORS.get(dev, "0.4"), "marker": MARKERS.get(dev, "^"),
            "ls": REFERENCE_LS if recorded else LIVE_LS}

#: The legend entry of the hollow markers :func:`mark_noisy` draws.
NOISY_LABEL = "hollow: noisy (runs disagree or machine busy)"


@arguments(records=Given(_validate_records))
def noisy_flags(records: Sequence[dict]) -> np.ndarray:
    """One bool per record: True where the record says its timing was noisy."""
    return np.array([bool(r.get("noisy")) for r in records], dtype=bool)


@arguments(ax=_AX, xs=Given(_validate_values, what="xs"), ys=Given(_validate_values, what="ys"),
           noisy=Given(_validate_flags), color=_COLOR, ms=Real(above=0, hi=100, hint="the marker size in points"),
           then=_same_length)
def mark_noisy(ax: Any, xs: Sequence[float], ys: Sequence[float], noisy: Sequence[bool], color: str = "k",
               ms: float = 6.0) -> bool:
    """Draw hollow markers over the noisy points of a curve, labelled once per axes with :data:`NOISY_LABEL`.

    A noisy curve then does not look as confident as a clean one.  Returns True if any point was noisy.

    >>> fig, (ax,) = new_figure()
    >>> mark_noisy(ax, [1, 2], [1.0, 2.0], [False, True])
    True
    """
    noisy = np.asarray(noisy, dtype=bool)
    if not noisy.any():
        return False
    xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    labelled = any(line.get_label() == NOISY_LABEL for line in ax.lines)
    ax.plot(xs[noisy], ys[noisy], ls="none", marker="o", ms=ms, markerfacecolor="white",
            markeredgecolor=color, markeredgewidth=1.4, zorder=4, label="_nolegend_" if labelled else NOISY_LABEL)
    return True


@arguments(ncols=Whole(hi=32, hint="axes side by side"), width=_INCHES, height=_INCHES)
def new_figure(ncols: int = 1, width: float = 9.0, height: float = 4.0) -> tuple[Figure, list]:
    """A figure with ``ncols`` axes side by side (not registered with pyplot)."""
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]
    return fig, axes


@arguments(devices=Optional(Given(_validate_devices)))
def live_device_text(devices: Iterable[str] | None = None) -> str:
    """``"CPU: <model> (N cores)"`` plus ``"GPU: <name>"`` for each GPU answering here; only the
    ``devices`` named (``"cpu"``, ``"gpu"``) when given, so that a CPU figure names no GPU."""
    devs = {"cpu", "gpu"} if devices is None else {str(d).lower() for d in devices}
    c = cpu_info()
    parts = [f"CPU: {c['model']} ({c['logical_cores']} cores)"] if "cpu" in devs else []
    parts += [f"GPU: {g['name']}" for g in gpu_info()] if "gpu" in devs else []
    return " + ".join(parts) or "no device"


@arguments(fig=_FIG, live=Optional(Given(validate_results, what="live")), references=Given(validate_references),
           extra=_text("extra"), devices=Optional(Given(_validate_devices)), measured=_FLAG)
def add_footer(fig: Figure, live: ResultSet | None = None, references: Iterable[ResultSet] = (),
               extra: str = "", devices: Iterable[str] | None = None, measured: bool = True) -> None:
    """Name the devices behind a figure at its foot: those of ``live``'s records, else ``devices``
    (the ones measured, e.g. ``["cpu"]``), else every device answering here.

    ``measured=False`` is for a figure that times nothing (a diagram, a count, a computed curve):
    its footer then says so instead of "Measured live".
    """
    lines, references = [], list(references)
    if not measured:
        lines.append(f"Nothing timed. This machine: {live_device_text(devices)}")
    elif live is not None:
        prov = live.provenance
        devs = [f"CPU: {prov.get('cpu', {}).get('model', '?')}"]
        if any(r.get("device") == "gpu" for r in live.records):
            devs += [f"GPU: {g.get('name')}" for g in prov.get("gpus", [])]
        verb = "Recorded (not measured in this run) on" if live.source == "reference" else "Measured live on"
        lines.append(f"{verb} {' + '.join(devs)} ({live.date})")
    elif references:        # drawn from recorded results alone: nothing here was measured
        lines.append(f"Nothing measured in this run. This machine: {live_device_text(devices)}")
    else:
        lines.append(f"Measured live on {live_device_text(devices)}")
    # each reference's device and date said here once, not in every legend entry; its curves' style named
    words = devices_to_caption(fig, references)
    # "Dashed" only where a dashed curve is drawn: bars and dots from a reference are labelled as such instead
    dashed = len(references) == 1 and any(line.get_linestyle() == REFERENCE_LS for ax in fig.axes for line in ax.lines)
    for ref, word in zip(references, words):
        word = word or ("Dashed" if dashed else None)
        lines.append(f"{word}: reference results {ref.label} (not measured in this run)" if word else
                     f"Reference results {ref.label}, labelled as such (not measured in this run)")
    if extra:
        lines.append(extra)
    footer_text(fig, "\n".join(lines))


_FOOTER_PT = 9.0


@arguments(fig=_FIG, text=_text("text"), color=_COLOR)
def footer_text(fig: Figure, text: str, color: str = "0.35") -> None:
    """Write small grey ``text`` under everything else in ``fig``, left-aligned.

    A constrained-layout figure grows by the footer's height and its layout keeps that band free, so
    the footer lies inside the canvas and :func:`figure_to_png` needs no second, "tight" layout pass
    (which made a widget's redraw a third slower).  Any other figure grows the same way, its axes moved
    up over the band.  Long lines are wrapped to the figure's width.
    """
    fits = max(int((fig.get_figwidth() - 0.25) / (0.56 * _FOOTER_PT / 72)), 40)
    text = "\n".join(textwrap.fill(line, fits) for line in text.split("\n"))
    band_in = (1.25 * _FOOTER_PT * (text.count("\n") + 1) + 6) / 72
    height = fig.get_figheight()
    fig.set_figheight(height + band_in)
    band = band_in / (height + band_in)
    if isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine):
        fig.get_layout_engine().set(rect=(0, band, 1, 1 - band))
    else:   # axes placed by hand keep their size in inches, moved up over the band
        for ax in fig.axes:
            x0, y0, w, h = ax.get_position().bounds
            ax.set_position((x0, band + y0 * (1 - band), w, h * (1 - band)))
    fig.text(0.01, band - 2 / 72 / (height + band_in), text, fontsize=_FOOTER_PT, color=color, ha="left",
             va="top", transform=fig.transFigure)


def _series(rs: ResultSet, device: str, x: str, y: str, where: dict | None):
    recs = [r for r in rs.select(device=device, **(where or {}))
            if r.get(x) is not None and r.get(y) is not None]
    recs.sort(key=lambda r: r[x])
    xs = np.array([r[x] for r in recs], dtype=float)
    ys = np.array([r[y] for r in recs], dtype=float)
    lo = hi = None
    if y == "median_s" and recs and all("q25_s" in r and "q75_s" in r for r in recs):
        lo = np.array([r["q25_s"] for r in recs], dtype=float)
        hi = np.array([r["q75_s"] for r in recs], dtype=float)
    return xs, ys, lo, hi, noisy_flags(recs)


@arguments(rs=Given(validate_results, what="rs"), device=OneOf("cpu", "gpu"), live=_text("live"))
def source_tag(rs: ResultSet, device: str, live: str = " (live)") -> str:
    """What follows a curve's device name in a legend: ``live`` for a live set; for a reference, where and
    when it was recorded.  A reference's CPU curve names the GPU machine it is the host of, so that
    "CPU: Xeon" never reads as a CPU recorded *on* a GPU.

    >>> source_tag(ResultSet("demo"), "cpu")
    ' (live)'
    """
    if rs.source != "reference":
        return live
    if device == "cpu" and rs.gpu_name:
        return f" (host of the {rs.gpu_name} reference machine, recorded {rs.date})"
    return f" ({rs.label})"


def _device_name(rs: ResultSet, device: str) -> str:
    if device == "gpu":
        return rs.gpu_name or "GPU"
    return rs.cpu_name


@arguments(live=Optional(Given(validate_results, what="live")), references=Given(validate_references),
           x=_text("x", empty=False), y=_text("y", empty=False), xlabel=Optional(_text("xlabel")),
           ylabel=Optional(_text("ylabel")), title=_text("title"), highlight=Optional(Real()), speedup=_FLAG,
           where=Optional(Given(_validate_where)), higher_is_better=_FLAG, logy=_FLAG,
           speedup_sources=Optional(Given(validate_references, what="speedup_sources")),
           speedup_note=Optional(_text("speedup_note")))
def sweep_figure(live: ResultSet | None, references: Sequence[ResultSet] = (), x: str = "n",
                 y: str = "median_s", xlabel: str | None = None, ylabel: str | None = None,
                 title: str = "", highlight: float | None = None, speedup: bool = True,
                 where: dict | None = None, higher_is_better: bool = False,
                 logy: bool = True, speedup_sources: Sequence[ResultSet] | None = None,
                 speedup_note: str | None = None) -> Figure:
    """Log-log plot of ``y`` against ``x`` for each device, plus GPU-over-CPU speedup.

    Parameters
    ----------
    live : results measured here (CPU, and GPU when one answers), or None.
    references : reference result sets; drawn dashed with their "recorded on" label.
    x, y : record keys.  When ``y`` is ``"median_s"`` the interquartile band is shaded.
    highlight : an ``x`` value to mark (the slider's current position).
    speedup : add a right-hand panel with CPU time / GPU time (or GPU rate / CPU rate
        when ``higher_is_better``), from each source that has both devices.
    where : extra record filters (``{"dtype": "float32"}``).
    speedup_sources : the sources the speed-up panel may use (default: all); leave out a reference
        recorded at other settings than the live run, which the left panel still draws.
    speedup_note : what the speed-up panel says when it has nothing to draw (default: that nothing
        was recorded).
    """
    fig, axes = new_figure(2 if speedup else 1)
    ax = axes[0]
    sources = ([live] if live is not None else []) + list(references)
    said = []
    for rs in sources:
        ref = rs.source == "reference"
        for dev in ("cpu", "gpu"):
            xs, ys, lo, hi, noisy = _series(rs, dev, x, y, where)
            if not len(xs):
                continue
            who = _device_name(rs, dev)
            label = f"{dev.upper()}: {who}" + source_tag(rs, dev)
            ax.plot(xs, ys, ms=4, **device_style(dev, recorded=ref), alpha=0.75 if ref else 1.0, label=label)
            mark_noisy(ax, xs, ys, noisy, COLORS[dev])
            said.append((f"{dev.upper()} {who}" + source_tag(rs, dev), xs, ys))
            if lo is not None and not ref:
                ax.fill_between(xs, lo, hi, color=COLORS[dev], alpha=0.2, lw=0)
    log2_x(ax)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(textwrap.fill(ylabel or ("time per call (s)" if y == "median_s" else y), 24))
    if highlight is not None:
        ax.axvline(highlight, color="0.3", lw=1, ls=":")
    place_legend(ax)
    ax.grid(True, which="both", alpha=0.25)
    ax.set_title(title, fontsize=10)
    if speedup:
        speedup_axes(axes[1], sources if speedup_sources is None else [live] + list(speedup_sources),
                     x=x, y=y, where=where, higher_is_better=higher_is_better, xlabel=xlabel, highlight=highlight,
                     empty_note=speedup_note)
    add_footer(fig, live, [r for r in references])
    if said:
        set_takeaway(fig, _sweep_takeaway(said, xlabel or x, y, higher_is_better, ylabel))
    return fig


def _sweep_takeaway(curves: list[tuple[str, np.ndarray, np.ndarray]], xlabel: str, y: str,
                    higher_is_better: bool, ylabel: str | None) -> str:
    """A sweep's takeaway.  Times are compared at the largest size every curve has, so one sentence never sets
    one device's time at one size beside another's at another; a curve that goes further says so apart."""
    shared = set.intersection(*(set(np.asarray(xs).tolist()) for _, xs, _ in curves))
    if y != "median_s" or len(curves) < 2 or not shared:
        return "; ".join(_curve_sentence(who, xs, ys, xlabel, y, higher_is_better, ylabel)
                         for who, xs, ys in curves) + "."
    at = max(shared)
    name = xlabel.split("(")[0].strip() or "n"
    text = f"At {name} = {value_text(at)} (the largest {name} measured on every curve): " + "; ".join(
        f"{who} {value_text(float(ys[list(xs).index(at)]), 's')}" for who, xs, ys in curves) + " per call"
    further = [_curve_sentence(who, xs, ys, xlabel, y, higher_is_better, ylabel) for who, xs, ys in curves
               if max(xs) > at]
    return text + (". Further on, " + "; ".join(further) if further else "") + "."


def _curve_sentence(who: str, xs: np.ndarray, ys: np.ndarray, xlabel: str, y: str, higher_is_better: bool,
                    ylabel: str | None) -> str:
    """One clause of a sweep's takeaway: a time curve read at its largest size, a rate curve at its peak."""
    name = xlabel.split("(")[0].strip() or "n"
    if y == "median_s":
        i = int(np.argmax(xs))
        return f"{who} takes {value_text(ys[i], 's')} per call at {name} = {value_text(xs[i])}"
    i = int(np.argmax(ys) if higher_is_better else np.argmin(ys))
    unit = ylabel.split("(")[0].strip() if ylabel else y
    return f"{who} {'peaks' if higher_is_better else 'is lowest'} at {value_text(ys[i], unit)} at {name} = " \
           f"{value_text(xs[i])}"


def _gpu_over_cpu(cpu: tuple, gpu: tuple, higher_is_better: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the sizes both series have, the GPU's speed-up over the CPU there, whether either point is noisy),
    from two :func:`_series` results."""
    cx, cy, _, _, cn = cpu
    gx, gy, _, _, gn = gpu
    common = np.intersect1d(cx, gx)
    c = np.array([cy[cx == v][0] for v in common])
    g = np.array([gy[gx == v][0] for v in common])
    noisy = np.array([bool(cn[cx == v][0] or gn[gx == v][0]) for v in common], dtype=bool)
    return common, (g / c if higher_is_better else c / g), noisy


@arguments(ax=_AX, sources=Given(validate_references, what="sources", none=True), x=_text("x", empty=False),
           y=_text("y", empty=False), where=Optional(Given(_validate_where)), higher_is_better=_FLAG,
           xlabel=Optional(_text("xlabel")), highlight=Optional(Real()), empty_note=Optional(_text("empty_note")))
def speedup_axes(ax: Any, sources: Sequence[ResultSet], x: str = "n", y: str = "median_s",
                 where: dict | None = None, higher_is_better: bool = False,
                 xlabel: str | None = None, highlight: float | None = None, empty_note: str | None = None) -> None:
    """Draw GPU-over-CPU speedup on ``ax``: from each source that has both devices, and each reference
    with GPU records only against this machine's live CPU (the caller passes only references recorded
    at the live run's settings)."""
    drawn = False
    sources = [rs for rs in sources if rs is not None]
    live_cpu = [rs for rs in sources if rs.source != "reference" and len(_series(rs, "cpu", x, y, where)[0])]
    for ref in [rs for rs in sources if rs.source == "reference" and not len(_series(rs, "cpu", x, y, where)[0])]:
        for lv in live_cpu:
            common, ratio, noisy = _gpu_over_cpu(_series(lv, "cpu", x, y, where), _series(ref, "gpu", x, y, where),
                                                 higher_is_better)
            if not len(common):
                continue
            ax.plot(common, ratio, ls="-.", marker="s", ms=3.5, color="k", alpha=0.8,
                    label=f"{ref.gpu_name} (recorded {ref.date}) vs this CPU (live)")
            mark_noisy(ax, common, ratio, noisy, "k")
            drawn = True
    for rs in sources:
        common, ratio, noisy = _gpu_over_cpu(_series(rs, "cpu", x, y, where), _series(rs, "gpu", x, y, where),
                                             higher_is_better)
        if not len(common):
            continue
        ref = rs.source == "reference"
        ax.plot(common, ratio, ls=REFERENCE_LS if ref else LIVE_LS, marker="D", ms=4, color="k",
                alpha=0.7 if ref else 1.0,
                label=f"{rs.gpu_name} vs its host CPU" + (f" ({rs.label})" if ref else " (live)"))
        mark_noisy(ax, common, ratio, noisy, "k")
        drawn = True
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel("GPU speedup (×)")
    if drawn:
        ax.axhline(1.0, color="0.5", lw=1)
        log2_x(ax)
        ax.grid(True, which="both", alpha=0.25)
        if highlight is not None:
            ax.axvline(highlight, color="0.3", lw=1, ls=":")
        ax.set_yscale("log")
        place_legend(ax)
        ax.set_title("above 1: the GPU is faster", fontsize=9)
    else:
        recorded = any(rs.source == "reference" and rs.select(device="gpu") for rs in sources)
        ax.text(0.5, 0.5, empty_note or ("Reference GPU results were\nrecorded at other settings\nthan those "
                                         "measured here:\nno ratio to show at these." if recorded else
                                         "No GPU here and no reference GPU results\nrecorded for this experiment "
                                         "yet:\nno speedup to show. Run on Colab (GPU runtime)\nor a GPU machine "
                                         "to see it."),
                ha="center", va="center", transform=ax.transAxes, fontsize=9, color="0.3")
        ax.set_xticks([])
        ax.set_yticks([])


@arguments(ax=_AX)
def log2_x(ax: Any) -> None:
    """Log-2 x axis labelled with plain numbers (1,024 rather than 2^10)."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(_pow2_label))


def _pow2_label(v: float, _pos: object = None) -> str:
    """Plain numbers up to 8,192; 2^k beyond, where long numbers would collide."""
    if v >= 2**14:
        k = np.log2(v)
        return power_text(2, int(round(k))) if abs(k - round(k)) < 1e-9 else f"{v:.3g}"
    return f"{v:,.0f}" if v >= 1 else f"{v:g}"


_MATHTEXT_POWER = re.compile(r"\$\\mathdefault\{(?:([\d.]+)\\times)?(\d+)\^\{(-?\d+)\}\}\$")


class _PlainLogFormatter(LogFormatterSciNotation):
    """Matplotlib's log-axis labels (the same ticks labelled), written as :func:`power_text` instead of mathtext."""

    def __call__(self, x: float, pos: object = None) -> str:
        label = super().__call__(x, pos)
        m = _MATHTEXT_POWER.fullmatch(label)
        return power_text(int(m[2]), int(m[3]), m[1] or "") if m else label


@arguments(fig=_FIG)
def plain_tick_labels(fig: Figure) -> Figure:
    """Give every log axis of ``fig`` plain-text labels (``10³`` drawn as text, not mathtext).

    Laying out mathtext labels was a third of the time a widget took to redraw a log-log figure.
    Custom formatters are left alone.
    """
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for fmt, setter in ((axis.get_major_formatter(), axis.set_major_formatter),
                                (axis.get_minor_formatter(), axis.set_minor_formatter)):
                if type(fmt) is LogFormatterSciNotation:
                    setter(_PlainLogFormatter(base=fmt._base, labelOnlyBase=fmt.labelOnlyBase))
    return fig


@arguments(fig=_FIG, x=Real(), y=Real(), label=_text("label"), color=_COLOR, then=_has_axes)
def mark_point(fig: Figure, x: float, y: float, label: str = "this run", color: str = "k") -> None:
    """Mark the measurement just made on the figure's first axes (a star)."""
    ax = fig.axes[0]
    ax.plot([x], [y], marker="*", ms=13, color=color, ls="none", label=label, zorder=5)
    place_legend(ax)


@arguments(items=Given(_validate_items), title=_text("title"), unit=_text("unit"),
           live=Optional(Given(validate_results, what="live")), references=Given(validate_references))
def bar_figure(items: Sequence[tuple[str, float, str]], title: str = "", unit: str = "s",
               live: ResultSet | None = None, references: Sequence[ResultSet] = ()) -> Figure:
    """Horizontal bars, one per ``(label, value, device)``; colour by device, value printed."""
    fig, (ax,) = new_figure(1, height=0.5 + 0.45 * max(len(items), 1))
    labels = [i[0] for i in items]
    vals = np.array([i[1] for i in items], dtype=float)
    colors = [COLORS.get(i[2], "0.5") for i in items]
    ax.barh(range(len(items)), vals, color=colors)
    ax.set_yticks(range(len(items)), labels, fontsize=9)
    ax.invert_yaxis()
    for i, v in enumerate(vals):
        ax.text(v, i, f" {v:.3g} {unit}", va="center", fontsize=9)
    ax.set_xlabel(unit)
    ax.set_title(title, fontsize=10)
    ax.margins(x=0.2)
    add_footer(fig, live, references)
    return fig


@arguments(fig=_FIG, dpi=Whole(lo=10, hi=600, hint="dots per inch"))
def figure_to_png(fig: Figure, dpi: int = 90) -> bytes:
    """Render a figure to PNG bytes and release it; its takeaway (:func:`figure_takeaway`) is stored as the
    PNG's description, so the picture carries its own alt text.

    A constrained-layout figure is drawn once; only if something sticks out of its canvas (a title
    longer than its axes) is it drawn again with matplotlib's "tight" box, which takes everything in.
    """
    plain_tick_labels(fig)
    alt = figure_takeaway(fig)
    info = PngInfo()
    if alt:
        info.add_itxt("Description", alt)
    buf = io.BytesIO()
    if isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine):
        fig.set_dpi(dpi)
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        box, (width, height) = fig.get_tightbbox(canvas.get_renderer()), fig.get_size_inches()
        if box.x0 >= -0.01 and box.y0 >= -0.01 and box.x1 <= width + 0.01 and box.y1 <= height + 0.01:
            Image.fromarray(np.asarray(canvas.buffer_rgba())).save(buf, format="png", dpi=(dpi, dpi), pnginfo=info)
            plt.close(fig)
            return buf.getvalue()
        fig.set_layout_engine("none")   # keep the layout just made: a second pass can squeeze it further
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", metadata={"Description": alt} if alt else None)
    plt.close(fig)
    return buf.getvalue()


@arguments(fig=_FIG)
def figure_html(fig: Figure) -> str:
    """``fig`` as HTML: its PNG with the takeaway as alt text, and the takeaway printed under it."""
    said = figure_takeaway(fig)
    data = base64.b64encode(figure_to_png(fig)).decode("ascii")
    alt = html.escape(said, quote=True)
    return (f"<figure style='margin:0'><img src='data:image/png;base64,{data}' alt='{alt}' style='max-width:100%'>"
            + (f"<figcaption>{alt}</figcaption>" if said else "") + "</figure>")


def _show_figures_with_takeaways() -> None:
    """In a notebook, a figure left as a cell's value shows as :func:`figure_html` (drawn once): the
    takeaway under it and as its alt text, as in a ``LiveApp``."""
    ipython = sys.modules.get("IPython")     # only where IPython already runs: a headless run never imports it
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    formatters = getattr(getattr(shell, "display_formatter", None), "formatters", None)
    if not formatters or "text/html" not in formatters:
        return
    formatters["text/html"].for_type(Figure, figure_html)
    if "image/png" in formatters:       # the HTML holds the PNG: do not draw the figure a second time
        formatters["image/png"].for_type(Figure, lambda _fig: None)


_show_figures_with_takeaways()
