"""Figures of lesson 07: the closed form failing, work against T, timings, training, the kernel's chunks.

Every figure that shows a measurement names the device it came from (:func:`course.plots.add_footer`);
reference results recorded on another machine are drawn dashed and labelled.

>>> fig = work_figure(2**12, n=16)
>>> len(fig.axes)
2
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from ..arguments import Given, Optional, Whole, arguments
from ..errors import BadInputError, shown_value, whole_number
from ..plots import PALETTE, SERIES_COLORS, add_footer, new_figure, place_legend, power_text, set_takeaway, source_tag
from ..results import ResultSet, validate_references, validate_results
from .kernels import chunk_plan
from .linear import recurrence_closed_form, recurrence_log_space, recurrence_loop
from .task import BASELINE_MSE, TrainingRun, validate_training_run
from .timing import SEQUENTIAL, fastest_loop, speedups
from .work import KINDS, work_counts

__all__ = ["closed_form_figure", "work_figure", "timing_figure", "loss_figure", "chunk_figure",
           "first_bad_step"]

MAX_DRAWN_T = 10 ** 6  # steps closed_form_figure draws

#: A colour and a marker for each (kind, method), so that curves stay told apart without colour too.  Line style
#: says where a number comes from, as everywhere in the course: solid measured live, dashed recorded elsewhere;
#: a GPU's curve is drawn thicker than a CPU's.
_STYLE = {("diagonal", "loop"): (PALETTE["green"], "o"), ("diagonal", "scan"): (PALETTE["sky blue"], "s"),
          ("dense", "loop"): (PALETTE["purple"], "^"), ("dense", "scan"): (PALETTE["orange"], "D"),
          ("diagonal", "torch loop"): (PALETTE["black"], "v"),
          ("diagonal", "numba chunked"): (PALETTE["vermillion"], "P"),
          ("diagonal", "numba per-channel"): (PALETTE["blue"], "X"),
          ("diagonal", "staged per-channel"): (PALETTE["yellow"], "*")}
_KIND_COLOR = {"diagonal": PALETTE["green"], "dense": PALETTE["purple"]}
#: What each method is, in a legend.
_NAMES = {"loop": "Python loop", "scan": "scan", "torch loop": "PyTorch loop",
          "numba per-channel": "per-channel kernel", "numba chunked": "chunked kernel",
          "staged per-channel": "staged kernel"}


class _SpanLogLocator(LogLocator):
    """Ticks at 1, 2 and 5 times each power of ten over at most three decades, at the powers alone beyond
    (where 1-2-5 labels would run into each other)."""

    def tick_values(self, vmin: float, vmax: float):
        wide = vmin > 0 and vmax > 0 and abs(np.log10(vmax / vmin)) > 3
        self.set_params(subs=(1.0,) if wide else (1.0, 2.0, 5.0))
        return super().tick_values(vmin, vmax)


def _log_axes(ax) -> None:
    """Log-2 x and log-10 y with plain tick labels (mathtext labels are slow to draw, and widgets redraw)."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.0f}" if v < 2**14
                                               else power_text(2, round(np.log2(v)))))
    ax.yaxis.set_major_locator(_SpanLogLocator(base=10, subs=(1, 2, 5)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_minor_formatter(NullFormatter())
    ax.grid(True, alpha=0.25)


MAX_CHUNK_CELLS = 4096  # (step, channel) cells chunk_figure draws


def _validate_states(h: Any) -> np.ndarray:
    """``h`` as an array of states, one row per step (at least one), of numbers; or a clear error."""
    arr = h if isinstance(h, np.ndarray) else np.asarray(h) if isinstance(h, (list, tuple)) else None
    if arr is None or arr.ndim < 1 or arr.shape[0] == 0 or arr.dtype.kind not in "biufc":
        raise BadInputError(f"h must be an array of states, one row per step t (at least one), e.g. what "
                            f"recurrence_loop returns; got {shown_value(h)}")
    return arr


def _require_cells(T: int, n: int) -> None:
    if T * n > MAX_CHUNK_CELLS:
        raise BadInputError(f"chunk_figure draws at most {MAX_CHUNK_CELLS:,} cells; got T·n = {T * n:,}. Use smaller "
                            "T or n.")


@arguments(h=Given(_validate_states))
def first_bad_step(h: np.ndarray) -> int | None:
    """The first step t where ``h[t]`` is not finite (any channel), or None.

    >>> first_bad_step(np.array([1.0, np.inf, 2.0]))
    1
    """
    bad = ~np.isfinite(h.reshape(len(h), -1)).all(axis=1)
    return int(np.argmax(bad)) if bad.any() else None


def closed_form_figure(T: int = 2000, a: float = 0.5, dtype: str = "float64", seed: int = 0) -> Figure:
    """The closed form failing at long T, and the log-space form not.

    Left: log10 of the running product ``a^(t+1)``, by ``cumprod`` (it stops where the number
    leaves the dtype's range) and as a running sum of logs.  Right: ``h_t`` of
    ``h_t = a·h_(t-1) + b_t`` (random b) by the loop, the closed form and the log-space form.
    """
    T = whole_number("T", T, 1, MAX_DRAWN_T, hint="steps drawn in the figure")
    if isinstance(a, bool) or not isinstance(a, numbers.Real) or not np.isfinite(a) or a == 0:
        raise BadInputError(f"a must be a finite, nonzero number; got {a!r}.")
    av = np.full(T, a, dtype=dtype)
    bv = np.random.default_rng(seed).normal(size=T).astype(dtype)
    t = np.arange(T)
    fig, (left, right) = new_figure(2, width=10, height=3.4)
    with np.errstate(under="ignore", over="ignore", divide="ignore"):
        prod = np.cumprod(av)
        left.plot(t, np.where((prod != 0) & np.isfinite(prod), np.log10(np.abs(prod)), np.nan), lw=2.5,
                  label="cumprod (0 or inf past the range: not drawn)")
    left.plot(t, np.cumsum(np.log(np.abs(av))) / np.log(10), "--", lw=1.5, label="running sum of logs")
    left.axhline(np.log10(np.finfo(dtype).tiny), color="0.5", lw=1, ls=":", label=f"smallest normal {dtype}")
    left.set_ylabel("log10 |a_0 · a_1 ⋯ a_t|")
    left.set_title(f"the running product, a = {a:g}, {dtype}", fontsize=9.5)
    with np.errstate(over="ignore", invalid="ignore"):   # |a| > 1: h itself may leave the range
        forms = {"loop (the oracle)": recurrence_loop(av, bv), "closed form: cumprod, cumsum":
                 recurrence_closed_form(av, bv), "closed form in log space": recurrence_log_space(av, bv)}
    # |a| > 1: h grows towards the dtype's limit, which a linear axis cannot show (its margins overflow)
    huge = max(np.abs(h[np.isfinite(h)]).max(initial=0.0) for h in forms.values()) > 1e6
    for (label, h), style in zip(forms.items(), ["-", "--", ":"]):
        bad = first_bad_step(h)
        note = "" if bad is None else f" (nan/inf from step {bad:,})"
        y = np.where(np.isfinite(h), h, np.nan).astype(np.float64)
        right.plot(t, np.sign(y) * np.log10(1 + np.abs(y)) if huge else y, style, lw=2.5 if style == "-" else 1.4,
                   label=label + note)
        if bad is not None:
            right.axvline(bad, color="0.25", lw=1, ls="--")
    right.set_ylabel("sign(h_t) · log10(1 + |h_t|)" if huge else "h_t")
    right.set_title("h_t = a·h_(t-1) + b_t, random b", fontsize=9.5)
    for ax in (left, right):
        ax.set_xlabel("step t")
        place_legend(ax)
        ax.grid(True, alpha=0.25)
    add_footer(fig, measured=False, devices=["cpu"])
    return fig


@arguments(T_max=Whole(2, 2**40, hint="the longest T drawn"), n=Whole(hint="the channels"),
           highlight=Optional(Whole(hint="a T to mark")))
def work_figure(T_max: int = 2**16, n: int = 16, highlight: int | None = None) -> Figure:
    """Left: scan flops over loop flops against T, diagonal and dense.  Right: steps (the span)."""
    Ts = [2**k for k in range(1, int(np.log2(max(T_max, 2))) + 1)]
    fig, (left, right) = new_figure(2, height=3.3)
    for kind, color in zip(KINDS, (PALETTE["green"], PALETTE["purple"])):
        rows = [work_counts(T, n, kind) for T in Ts]
        left.plot(Ts, [r["work_ratio"] for r in rows], "o-", ms=3, color=color,
                  label=f"{kind}: full combines both ways")
        left.plot(Ts, [r["work_ratio_min"] for r in rows], "^:", ms=3, color=color,
                  label=f"{kind}: the least (down-sweep on states)")
        right.plot(Ts, [r["steps_scan"] for r in rows], "o--", ms=3, color=color, label=f"{kind} scan: levels")
    right.plot(Ts, Ts, "k-", lw=1, label="loop: T steps")
    left.set_title(f"extra work of the scan, n = {n}: flops(scan) / flops(loop)", fontsize=9.5)
    left.set_ylabel("work ratio (×)")
    right.set_title("span: dependent steps", fontsize=9.5)
    right.set_ylabel("steps")
    for ax in (left, right):
        _log_axes(ax)
        ax.set_xlabel("T (steps of the recurrence)")
        place_legend(ax)
        if highlight:
            ax.axvline(highlight, color="0.3", lw=1, ls=":")
    add_footer(fig, extra="Counted from the scan's own level loop (course.scan.operation_counts).", measured=False,
               devices=["cpu"])
    return fig


@arguments(live=Optional(Given(validate_results, what="live")), references=Given(validate_references),
           n=Optional(Whole(hint="the channels to draw; None for every n measured")),
           highlight=Optional(Whole(hint="a T to mark")))
def timing_figure(live: ResultSet | None, references: Sequence[ResultSet] = (), n: int | None = None,
                  highlight: int | None = None, title: str = "") -> Figure:
    """Time against T for every (device, kind, method) measured; right: each scan's speed-up over the fastest
    sequential loop measured for its device, kind and n (:func:`course.recurrences.timing.fastest_loop`: on a GPU the
    numba per-channel kernel, one launch; where only the Python loop was measured, that loop, named launch-bound on
    a GPU)."""
    sources = ([live] if live is not None else []) + [r for r in references if r.records]
    # diagonal and dense in panels of their own: on one axes they were eight series
    fig, (left, dense, right) = new_figure(3, width=14, height=3.8)
    dense.sharey(left)
    drew = False
    for rs in sources:
        ref = rs.source == "reference"
        ns = sorted({r["n"] for r in rs.records}) if n is None else [n]
        for dev in ("cpu", "gpu"):
            for (kind, method), (color, marker) in _STYLE.items():
                for nn in ns:
                    recs = sorted(rs.select(device=dev, kind=kind, method=method, n=nn), key=lambda r: r["T"])
                    if not recs:
                        continue
                    drew = True
                    label = f"{dev.upper()} {_NAMES.get(method, method)}" + (f", n={nn}" if len(ns) > 1 else "")
                    label += source_tag(rs, dev, live="")          # the footer names the reference, once
                    (left if kind == "diagonal" else dense).plot(
                              [r["T"] for r in recs], [r["median_s"] for r in recs], ls="--" if ref else "-",
                              marker=marker, ms=4, color=color, lw=1.1 if dev == "cpu" else 1.9,
                              alpha=0.6 if ref else 1.0, label=label)
                    if method in ("scan", "numba chunked"):   # against the fastest sequential loop measured
                        over = fastest_loop(rs, dev, kind, nn) or next(
                            m for m in SEQUENTIAL if m == "loop" or rs.select(device=dev, kind=kind, n=nn, method=m))
                        Ts, ratio = speedups(rs, dev, kind, nn, method=method, over=over)
                        if Ts:
                            bound = " (launch-bound)" if dev == "gpu" and "loop" in over else ""
                            base = _NAMES.get(over, over) + bound
                            right.plot(Ts, ratio, ls="--" if ref else "-", marker="o" if dev == "cpu" else "s", ms=3,
                                       color=_KIND_COLOR[kind] if method == "scan" else color,
                                       alpha=0.6 if ref else 1.0,
                                       label=f"{dev.upper()} {kind}" + (f", n={nn}" if len(ns) > 1 else "")
                                       + source_tag(rs, dev, live="") + f": {_NAMES.get(method, method)} vs {base}")
    if not drew:
        left.text(0.5, 0.5, "nothing measured yet", ha="center", va="center", transform=left.transAxes)
    left.set_ylabel("time per call (s), median")
    left.set_title(title or "diagonal recurrence: loops and scans", fontsize=9.5)
    dense.set_title("dense recurrence (n × n matrices)", fontsize=9.5)
    right.set_ylabel("fastest loop's time / scan's (×)")
    right.set_title("above 1: faster than the fastest sequential loop measured", fontsize=9.5)
    right.axhline(1.0, color="0.5", lw=1)
    for ax in (left, dense, right):
        _log_axes(ax)
        ax.set_xlabel("T (steps)")
        if highlight:
            ax.axvline(highlight, color="0.3", lw=1, ls=":")
        handles = ax.get_legend_handles_labels()[0]
        if handles:   # below the axes: inside, a dozen entries hid the curves
            ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.2),
                      ncols=2 if len(handles) > 6 else 1)
    add_footer(fig, live, [r for r in references if r.records])
    return fig


@arguments(run=Given(validate_training_run))
def loss_figure(run: TrainingRun) -> Figure:
    """The training loss after every step, against the loss of always answering the mean."""
    fig, (ax,) = new_figure(1, height=3.2)
    ax.plot(np.arange(1, len(run.losses) + 1), run.losses, lw=1.2, label="training loss (fresh batch each step)")
    ax.axhline(BASELINE_MSE, color="0.25", ls="--", lw=1, label="always answer 1.0 (≈ 1/6)")
    ax.axhline(run.test_loss, color="k", ls=":", lw=1, label=f"test loss after training: {run.test_loss:.2g}")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("training step")
    ax.set_ylabel("mean squared error")
    ax.set_title(f"Selective layer (n = {run.n}) on the adding problem, T = {run.T}", fontsize=9.5)
    place_legend(ax)
    ax.grid(True, alpha=0.25)
    add_footer(fig, measured=False, devices=["cpu"])
    return fig


_LIGHT = {PALETTE["orange"], PALETTE["sky blue"], PALETTE["purple"], PALETTE["yellow"]}


@arguments(T=Whole(hi=MAX_CHUNK_CELLS, hint="steps drawn"), n=Whole(hi=MAX_CHUNK_CELLS, hint="channels drawn"),
           chunk=Whole(hint="steps per thread"), then=_require_cells)
def chunk_figure(T: int = 32, n: int = 6, chunk: int = 8) -> Figure:
    """Which thread of the chunked kernel handles which (step, channel): one colour per thread."""
    plan = chunk_plan(T, n, chunk)
    K = plan["chunks"]
    thread = (np.arange(T)[None, :] // chunk) * n + np.arange(n)[:, None]       # (n, T)
    fig, (ax,) = new_figure(1, height=1.2 + 0.3 * n)
    # the palette's seven colours in turn (twenty look-alike colours told no thread apart); the thread's
    # number is written in its cells where they are large enough to hold it
    ax.imshow(thread % len(SERIES_COLORS), cmap=ListedColormap(SERIES_COLORS), aspect="auto",
              interpolation="nearest", extent=(-0.5, T - 0.5, n - 0.5, -0.5), vmin=0, vmax=len(SERIES_COLORS) - 1)
    if T <= 48 and n <= 16:
        for c in range(n):
            for t in range(0, T, chunk):
                ax.text(min(t + chunk / 2, T) - 0.5, c, str(thread[c, t]), ha="center", va="center", fontsize=9,
                        color="k" if SERIES_COLORS[thread[c, t] % len(SERIES_COLORS)] in _LIGHT else "white")
    for k in range(1, K):
        ax.axvline(k * chunk - 0.5, color="white", lw=3)
    ax.set_xlabel("step t  (white lines: chunk borders; phase 2 carries the state across them)")
    ax.set_ylabel("channel")
    ax.set_title(f"T = {T}, n = {n}, chunk = {chunk}: {plan['threads']} threads, each walks at most "
                 f"{plan['steps_per_thread']} steps; longest dependent chain {plan['dependent_steps']} "
                 f"(one thread per channel: {T})", fontsize=9)
    set_takeaway(fig, f"With chunks of {chunk} steps, {plan['threads']} threads each walk at most "
                      f"{plan['steps_per_thread']} steps, and the longest dependent chain is {plan['dependent_steps']} "
                      f"steps instead of {T} with one thread per channel.")
    return fig
