"""Plot builders the lessons share: timing sweeps, speedups, bars.

Every figure names the device(s) it was measured on in a footer, and results
recorded elsewhere (reference GPU results) are drawn dashed and labelled
"recorded on <device>, <date>" so they can never pass for a live measurement.

>>> from course.results import ResultSet
>>> rs = ResultSet("demo")
>>> for n in (1, 2, 4):
...     rs.add(device="cpu", n=n, median_s=1e-3 * n)
>>> fig = sweep_figure(rs, x="n", y="median_s")
>>> "Measured live" in fig.texts[-1].get_text()
True
"""

from __future__ import annotations

import io
import re
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.ticker import FuncFormatter, LogFormatterSciNotation
from matplotlib.transforms import offset_copy
from PIL import Image

from .cpu import cpu_info
from .devices import gpu_info
from .results import ResultSet

__all__ = ["COLORS", "sweep_figure", "speedup_axes", "bar_figure", "add_footer", "live_device_text",
           "figure_to_png", "new_figure", "mark_point", "mark_noisy", "noisy_flags", "NOISY_LABEL", "log2_x",
           "power_text", "plain_tick_labels", "footer_text", "place_legend"]

COLORS = {"cpu": "#1f77b4", "gpu": "#d95f02"}

#: The legend entry of the hollow markers :func:`mark_noisy` draws.
NOISY_LABEL = "hollow: noisy (runs disagree or machine busy)"


def noisy_flags(records: Sequence[dict]) -> np.ndarray:
    """One bool per record: True where the record says its timing was noisy."""
    return np.array([bool(r.get("noisy")) for r in records], dtype=bool)


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


def place_legend(ax: Any, fontsize: float = 7.5, loc: str = "best") -> Any:
    """The axes' legend inside them (at ``loc``) where it fits, else under them with its labels wrapped.

    Long labels ("CPU: <model> (recorded on <GPU>, <date>)") made legends wider than their axes, and the
    constrained layout then squeezed the axes to a sliver to make room.  The fit is estimated from the
    labels' lengths, so no drawing is needed.  Returns the legend, or None when nothing is labelled.
    """
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    fig, box = ax.figure, ax.get_position()
    width_in, height_in = fig.get_figwidth() * box.width, fig.get_figheight() * box.height
    char_in = 0.55 * fontsize / 72
    rows_in = len(labels) * 1.5 * fontsize / 72
    if max(map(len, labels)) * char_in + 0.45 <= 0.8 * width_in and rows_in <= 0.6 * height_in:
        return ax.legend(handles, labels, fontsize=fontsize, loc=loc)
    fits = max(int((1.15 * width_in - 0.45) / char_in), 30)
    under = offset_copy(ax.transAxes, fig=fig, y=-0.5, units="inches")   # clear of tick labels and x label
    return ax.legend(handles, [textwrap.fill(label, fits) for label in labels], fontsize=fontsize,
                     loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=under)


def new_figure(ncols: int = 1, width: float = 9.0, height: float = 3.6) -> tuple[Figure, list]:
    """A figure with ``ncols`` axes side by side (not registered with pyplot)."""
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]
    return fig, axes


def live_device_text(devices: Iterable[str] | None = None) -> str:
    """``"CPU: <model> (N cores)"`` plus ``"GPU: <name>"`` for each GPU answering here; only the
    ``devices`` named (``"cpu"``, ``"gpu"``) when given, so that a CPU figure names no GPU."""
    devs = {"cpu", "gpu"} if devices is None else {str(d).lower() for d in devices}
    c = cpu_info()
    parts = [f"CPU: {c['model']} ({c['logical_cores']} cores)"] if "cpu" in devs else []
    parts += [f"GPU: {g['name']}" for g in gpu_info()] if "gpu" in devs else []
    return " + ".join(parts) or "no device"


def add_footer(fig: Figure, live: ResultSet | None = None, references: Iterable[ResultSet] = (),
               extra: str = "", devices: Iterable[str] | None = None, measured: bool = True) -> None:
    """Name the devices behind a figure at its foot: those of ``live``'s records, else ``devices``
    (the ones measured, e.g. ``["cpu"]``), else every device answering here.

    ``measured=False`` is for a figure that times nothing (a diagram, a count, a computed curve):
    its footer then says so instead of "Measured live".
    """
    lines = []
    if not measured:
        lines.append(f"Nothing timed. This machine: {live_device_text(devices)}")
    elif live is not None:
        prov = live.provenance
        devs = [f"CPU: {prov.get('cpu', {}).get('model', '?')}"]
        if any(r.get("device") == "gpu" for r in live.records):
            devs += [f"GPU: {g.get('name')}" for g in prov.get("gpus", [])]
        verb = "Recorded (not measured in this run) on" if live.source == "reference" else "Measured live on"
        lines.append(f"{verb} {' + '.join(devs)} ({live.date})")
    else:
        lines.append(f"Measured live on {live_device_text(devices)}")
    for ref in references:
        lines.append(f"Dashed: reference results {ref.label} (not measured in this run)")
    if extra:
        lines.append(extra)
    footer_text(fig, "\n".join(lines))


_FOOTER_PT = 7.5


def footer_text(fig: Figure, text: str, color: str = "0.35") -> None:
    """Write small grey ``text`` under everything else in ``fig``, left-aligned.

    A constrained-layout figure grows by the footer's height and its layout keeps that band free, so
    the footer lies inside the canvas and :func:`figure_to_png` needs no second, "tight" layout pass
    (which made a widget's redraw a third slower).  Any other figure gets it just below its canvas.
    """
    if not isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine):
        fig.text(0.01, 0.0, text, fontsize=_FOOTER_PT, color=color, ha="left", va="top", transform=fig.transFigure)
        return
    band_in = (1.25 * _FOOTER_PT * (text.count("\n") + 1) + 6) / 72
    height = fig.get_figheight()
    fig.set_figheight(height + band_in)
    band = band_in / (height + band_in)
    fig.get_layout_engine().set(rect=(0, band, 1, 1 - band))
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


def _device_name(rs: ResultSet, device: str) -> str:
    if device == "gpu":
        return rs.gpu_name or "GPU"
    return rs.cpu_name


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
    for rs in sources:
        ref = rs.source == "reference"
        for dev in ("cpu", "gpu"):
            xs, ys, lo, hi, noisy = _series(rs, dev, x, y, where)
            if not len(xs):
                continue
            who = _device_name(rs, dev)
            label = f"{dev.upper()}: {who}" + (f" ({rs.label})" if ref else " (live)")
            ax.plot(xs, ys, ls="--" if ref else "-", marker="o", ms=3.5, color=COLORS[dev],
                    alpha=0.75 if ref else 1.0, label=label)
            mark_noisy(ax, xs, ys, noisy, COLORS[dev])
            if lo is not None and not ref:
                ax.fill_between(xs, lo, hi, color=COLORS[dev], alpha=0.2, lw=0)
    log2_x(ax)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(ylabel or ("time per call (s)" if y == "median_s" else y))
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
    return fig


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
        gx, gy, _, _, gn = _series(ref, "gpu", x, y, where)
        for lv in live_cpu:
            cx, cy, _, _, cn = _series(lv, "cpu", x, y, where)
            common = np.intersect1d(cx, gx)
            if not len(common):
                continue
            c = np.array([cy[cx == v][0] for v in common])
            g = np.array([gy[gx == v][0] for v in common])
            ratio = g / c if higher_is_better else c / g
            ax.plot(common, ratio, ls="-.", marker="s", ms=3.5, color="k", alpha=0.8,
                    label=f"{ref.gpu_name} (recorded {ref.date}) vs this CPU (live)")
            mark_noisy(ax, common, ratio, np.array([cn[cx == v][0] or gn[gx == v][0] for v in common]), "k")
            drawn = True
    for rs in sources:
        cx, cy, _, _, cn = _series(rs, "cpu", x, y, where)
        gx, gy, _, _, gn = _series(rs, "gpu", x, y, where)
        common = np.intersect1d(cx, gx)
        if not len(common):
            continue
        c = np.array([cy[cx == v][0] for v in common])
        g = np.array([gy[gx == v][0] for v in common])
        noisy = np.array([cn[cx == v][0] or gn[gx == v][0] for v in common])
        ratio = g / c if higher_is_better else c / g
        ref = rs.source == "reference"
        ax.plot(common, ratio, ls="--" if ref else "-", marker="o", ms=3.5, color="k",
                alpha=0.7 if ref else 1.0,
                label=f"{rs.gpu_name} vs its host CPU" + (f" ({rs.label})" if ref else " (live)"))
        mark_noisy(ax, common, ratio, noisy, "k")
        drawn = True
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel("GPU speedup over CPU (×)")
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
        ax.text(0.5, 0.5, empty_note or ("Reference GPU results were recorded at other settings than\nthose "
                                         "measured here: no ratio to show at these." if recorded else
                                         "No GPU here and no reference GPU results\nrecorded for this experiment "
                                         "yet:\nno speedup to show. Run on Colab (GPU runtime)\nor a GPU machine "
                                         "to see it."),
                ha="center", va="center", transform=ax.transAxes, fontsize=8.5, color="0.3", wrap=True)
        ax.set_xticks([])
        ax.set_yticks([])


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


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
_MATHTEXT_POWER = re.compile(r"\$\\mathdefault\{(?:([\d.]+)\\times)?(\d+)\^\{(-?\d+)\}\}\$")


def power_text(base: int, exponent: int, coefficient: str = "") -> str:
    """``base`` to the power ``exponent`` in plain text with superscript digits: ``power_text(10, -3)`` is
    ``"10⁻³"``, with ``coefficient="2"`` ``"2×10⁻³"``.  No mathtext: a redraw lays it out much faster.

    >>> power_text(2, 14), power_text(10, -3, "2")
    ('2¹⁴', '2×10⁻³')
    """
    return (f"{coefficient}×" if coefficient else "") + f"{base}{str(exponent).translate(_SUPERSCRIPT)}"


class _PlainLogFormatter(LogFormatterSciNotation):
    """Matplotlib's log-axis labels (the same ticks labelled), written as :func:`power_text` instead of mathtext."""

    def __call__(self, x: float, pos: object = None) -> str:
        label = super().__call__(x, pos)
        m = _MATHTEXT_POWER.fullmatch(label)
        return power_text(int(m[2]), int(m[3]), m[1] or "") if m else label


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


def mark_point(fig: Figure, x: float, y: float, label: str = "this run", color: str = "k") -> None:
    """Mark the measurement just made on the figure's first axes (a star)."""
    ax = fig.axes[0]
    ax.plot([x], [y], marker="*", ms=13, color=color, ls="none", label=label, zorder=5)
    place_legend(ax)


def bar_figure(items: Sequence[tuple[str, float, str]], title: str = "", unit: str = "s",
               live: ResultSet | None = None, references: Sequence[ResultSet] = ()) -> Figure:
    """Horizontal bars, one per ``(label, value, device)``; colour by device, value printed."""
    fig, (ax,) = new_figure(1, height=0.5 + 0.45 * max(len(items), 1))
    labels = [i[0] for i in items]
    vals = np.array([i[1] for i in items], dtype=float)
    colors = [COLORS.get(i[2], "0.5") for i in items]
    ax.barh(range(len(items)), vals, color=colors)
    ax.set_yticks(range(len(items)), labels, fontsize=8.5)
    ax.invert_yaxis()
    for i, v in enumerate(vals):
        ax.text(v, i, f" {v:.3g} {unit}", va="center", fontsize=8)
    ax.set_xlabel(unit)
    ax.set_title(title, fontsize=10)
    ax.margins(x=0.2)
    add_footer(fig, live, references)
    return fig


def figure_to_png(fig: Figure, dpi: int = 90) -> bytes:
    """Render a figure to PNG bytes and release it.

    A constrained-layout figure is drawn once; only if something sticks out of its canvas (a title
    longer than its axes) is it drawn again with matplotlib's "tight" box, which takes everything in.
    """
    plain_tick_labels(fig)
    buf = io.BytesIO()
    if isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine):
        fig.set_dpi(dpi)
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        box, (width, height) = fig.get_tightbbox(canvas.get_renderer()), fig.get_size_inches()
        if box.x0 >= -0.01 and box.y0 >= -0.01 and box.x1 <= width + 0.01 and box.y1 <= height + 0.01:
            Image.fromarray(np.asarray(canvas.buffer_rgba())).save(buf, format="png", dpi=(dpi, dpi))
            plt.close(fig)
            return buf.getvalue()
        fig.set_layout_engine("none")   # keep the layout just made: a second pass can squeeze it further
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()
