"""Pictures of lesson 04: the Blelloch tree level by level, work and steps, timings.

* :func:`blelloch_frames` runs a traced Blelloch scan (and the same scan of index
  ranges, so every box can say which inputs it combines) and returns one frame per
  step: the input, each up-sweep level, the root set to the identity, each
  down-sweep level.
* :func:`tree_figure` draws the frames up to a step: one row of boxes per step (the
  classic in-place array, padded to a power of two), lines from the boxes a level
  reads to the boxes it writes.
* :func:`counts_figure`: work and steps of the three scans against n, n log2 n, log2 n.
* :func:`timing_figure`: time and effective bandwidth of the scans per device, with
  the copy limit and the reference GPU results, when there are any.
* :func:`single_pass_figure`: the single-pass scan against the device copy, CUB (through
  ``torch.cumsum`` and ``cupy.cumsum``) and the numba block scans, against n and at one size.

>>> fig = tree_figure(np.arange(1, 9), step=3)
>>> len(blelloch_frames(np.arange(1, 9)))
8
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import NullLocator

from ..arguments import Given, Optional, Whole, arguments
from ..errors import BadInputError
from ..plots import (
    COLORS,
    PALETTE,
    add_footer,
    figure_legend,
    footer_text,
    log2_x,
    mark_noisy,
    new_figure,
    noisy_flags,
    place_legend,
    set_takeaway,
    source_tag,
)
from ..results import ResultSet
from ..results import validate_references as _references
from ..results import validate_results as _results
from .algorithms import blelloch_scan, hillis_steele_scan, interval, interval_leaves, operation_counts, prepare_scan
from .ops import Op, validate_operator
from .timing import PEERS, best_block_scans

__all__ = ["Frame", "blelloch_frames", "hillis_steele_frames", "FRAMES", "tree_figure", "counts_figure",
           "timing_figure", "single_pass_figure", "MAX_DRAWN"]

#: The largest n :func:`tree_figure` draws (the boxes must stay readable).
MAX_DRAWN = 32
#: The largest n the frames are made for (each step keeps a copy of the padded array: pictures, not sweeps).
MAX_FRAMED = 2**12

# One meaning per colour across the lesson: blue and vermillion are the CPU and the GPU (course.plots.COLORS),
# so the algorithms and the tree's phases take the palette's other colours, the same in every figure.
_UP, _DOWN, _ROOT, _STEP = PALETTE["purple"], PALETTE["orange"], "#8c8c8c", PALETTE["green"]
ALGORITHM_COLORS = {"sequential": "0.3", "numpy": "0.3", "hillis-steele": _STEP, "blelloch": _UP,
                    "cupy": PALETTE["sky blue"], "torch": PALETTE["yellow"], "single-pass": PALETTE["black"],
                    "numba kernel": "0.55", "numba reduce-then-scan": _DOWN}
_SPARE_COLORS = ("0.55", PALETTE["yellow"])


@dataclass
class Frame:
    """One step of the Blelloch scan as drawn: the in-place array after the step."""

    title: str
    phase: str            # "input", "up", "root", "down"
    values: np.ndarray    # padded in-place array (elements of x)
    ranges: np.ndarray    # the same array as index ranges (lo, hi), shape (padded, 2)
    left: np.ndarray      # pairs combined at this step (positions)
    right: np.ndarray
    work: int
    written: np.ndarray   # positions this step wrote (pairs, and odd nodes moved up or down)

    def __post_init__(self):
        if self.phase not in ("input", "up", "root", "down", "step"):
            raise BadInputError(f"a Frame's phase is 'input', 'up', 'root', 'down' or 'step', got {self.phase!r:.40}")


def _validate_drawn(x: Any, most: int = MAX_FRAMED, who: str = "the frames") -> np.ndarray:
    """``x`` as a numpy array of 1 to ``most`` elements (a leading axis): what a picture of a scan can show."""
    try:
        x = np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise BadInputError(f"x must be a sequence of elements (an array with a leading axis), got one numpy cannot "
                            f"read ({exc})") from None
    if x.ndim and x.shape[0] == 0:
        raise BadInputError("there is no tree to draw for an empty input; give at least one element.")
    if x.ndim == 0 or x.shape[0] > most or x.dtype.kind in "SUV":
        raise BadInputError(f"{who} draws 1 to {most} elements (numbers, matrices or maps); got "
                            f"{f'{x.shape[0]:,} elements of {x.dtype}' if x.ndim else 'a 0-d value'}. Use a "
                            "smaller n here; the counts and timing plots take large n.")
    return x


_X, _OP = Given(_validate_drawn), Optional(Given(validate_operator))


@arguments(x=_X, op=_OP)
def blelloch_frames(x: Any, op: Op | None = None, identity: Any = None) -> list[Frame]:
    """The Blelloch scan of ``x`` step by step (exclusive), as :class:`Frame` objects."""
    x = np.asarray(x)
    n = x.shape[0] if x.ndim else 0
    if n == 0:
        raise BadInputError("there is no tree to draw for an empty input; give at least one element.")
    _, _, _, ident = prepare_scan(x, op, identity)
    _, tr = blelloch_scan(x, op=op, identity=identity, trace=True)
    _, tr_r = blelloch_scan(interval_leaves(n), op=interval, trace=True)
    empty = np.array([], dtype=int)
    frames = [Frame("input (padded with identities)" if tr.padded_n > n else "input", "input",
                    tr.initial, tr_r.initial, empty, empty, 0, empty)]
    ups = [lv for lv in tr.levels if lv.phase == "up"]
    for lv, lr in zip(tr.levels, tr_r.levels):
        if lv.phase == "down" and frames[-1].phase == "up":
            vals, rng = frames[-1].values.copy(), frames[-1].ranges.copy()
            vals[-1], rng[-1] = ident, (0, 0)
            root = np.array([tr.padded_n - 1])
            frames.append(Frame("root := identity (nothing comes before the whole array)", "root",
                                vals, rng, root, empty, 0, root))
        name = (f"up-sweep level {lv.depth}: right := left op right (stride {lv.stride})"
                if lv.phase == "up" else
                f"down-sweep level {lv.depth}: left := parent, right := parent op left")
        d = lv.depth + (lv.phase == "up")                  # the level whose nodes were written
        nodes = -(-n // 2 ** d)
        written = (np.arange(nodes) + 1) * 2 ** d - 1
        frames.append(Frame(name, lv.phase, lv.state, lr.state, lv.left, lv.right, lv.work, written))
    if len(ups) == 0:   # n == 1: no levels; the exclusive scan is just the identity
        vals = frames[0].values.copy()
        vals[0] = ident
        frames.append(Frame("root := identity", "root", vals, np.zeros_like(frames[0].ranges),
                            np.array([0]), empty, 0, np.array([0])))
    return frames


@arguments(x=_X, op=_OP)
def hillis_steele_frames(x: Any, op: Op | None = None, identity: Any = None) -> list[Frame]:
    """The Hillis-Steele scan of ``x`` step by step (inclusive), as :class:`Frame` objects."""
    x = np.asarray(x)
    n = x.shape[0] if x.ndim else 0
    if n == 0:
        raise BadInputError("there is nothing to draw for an empty input; give at least one element.")
    _, tr = hillis_steele_scan(x, op=op, identity=identity, trace=True)
    _, tr_r = hillis_steele_scan(interval_leaves(n), op=interval, trace=True)
    empty = np.array([], dtype=int)
    frames = [Frame("input", "input", tr.initial, tr_r.initial, empty, empty, 0, empty)]
    for lv, lr in zip(tr.levels, tr_r.levels):
        frames.append(Frame(f"step {lv.depth}: x[i] := x[i - {lv.stride}] op x[i] for i >= {lv.stride}",
                            "step", lv.state, lr.state, lv.left, lv.right, lv.work, lv.right))
    return frames


FRAMES = {"blelloch": blelloch_frames, "hillis-steele": hillis_steele_frames}


def _range_text(lo: int, hi: int) -> str:
    if lo > hi:
        return "order!"
    if lo == hi:
        return "∅"
    return f"{lo}" if hi == lo + 1 else f"{lo}..{hi - 1}"


def _value_text(v) -> str | None:
    v = np.asarray(v)
    if v.ndim:
        return None
    if v.dtype.kind in "iub":
        return str(int(v))
    return f"{float(v):.3g}"


_PHASE_COLOR = {"up": _UP, "down": _DOWN, "root": _ROOT, "step": _STEP}
_BOX_W, _BOX_H = 0.84, 0.62


@arguments(x=Given(_validate_drawn, most=MAX_DRAWN, who="tree_figure"), op=_OP,
           step=Optional(Whole(0, hint="a step of the scan, 0 is the input; None: every step")))
def tree_figure(x: Any, op: Op | None = None, identity: Any = None, step: int | None = None,
                algorithm: str = "blelloch") -> Figure:
    """Draw a scan of ``x`` (at most :data:`MAX_DRAWN` elements) up to ``step``.

    Each row is the array after one step; a box shows its value (for scalar elements)
    and the input positions it combines (``2..5`` means x[2] op ... op x[5], ``∅`` the
    identity).  Lines show what the current step read and wrote: purple for Blelloch's
    up-sweep, orange for its down-sweep, green for Hillis-Steele's steps.
    ``step=None`` draws every step; ``algorithm`` is ``"blelloch"`` (exclusive) or
    ``"hillis-steele"`` (inclusive).
    """
    frames, step = _frames_to_draw(x, op, identity, step, algorithm)
    n, padded, last = np.asarray(x).shape[0], frames[0].values.shape[0], len(frames) - 1
    shown = frames[:step + 1]
    fig = Figure(figsize=(max(6.5, 0.62 * padded + 3.2), 0.62 * len(shown) + 1.1))
    ax = fig.add_axes((0.01, 0.04, 0.98, 0.86))
    for r, fr in enumerate(shown):
        _draw_row(ax, fr, -r, r == step, n, padded)
        if r and r == step:
            _draw_arrows(ax, fr, -r)
    for i in range(padded):
        ax.text(i, 0.55, str(i), ha="center", va="bottom", fontsize=9, color="0.4")
    ax.set_xlim(-3.6, padded - 0.4)
    ax.set_ylim(-len(shown) + 0.4, 1.0)
    ax.axis("off")
    done, total = sum(f.work for f in frames[:step + 1]), sum(f.work for f in frames)
    name = "Blelloch" if algorithm == "blelloch" else "Hillis-Steele"
    ax.set_title(f"{name} scan of n = {n}" + (f" (padded to {padded})" if padded > n else "")
                 + f": step {step} of {last}, operator applications so far {done} of {total}\n"
                 + f"this step: {frames[step].title}", fontsize=9.5)
    note = ("pale: padding up to a power of two (not needed once the down-sweep starts: drawn as –)."
            if algorithm == "blelloch" else "each step reads the previous row only (double buffering).")
    footer_text(fig, "Each box: its value (when elements are numbers) and, small, which inputs "
                "it combines (2..5 = x[2] op ... op x[5]; ∅ = the identity).\nColoured: written by "
                f"this step; light grey: written earlier; {note}")
    if step == last and step > 0:
        done_text = ("leaves now hold the exclusive scan" if algorithm == "blelloch"
                     else "every position now holds the inclusive scan")
        ax.text(padded - 0.4, -step - 0.55, done_text, ha="right", va="top", fontsize=9,
                color=_PHASE_COLOR.get(frames[step].phase, "0.5"))
    set_takeaway(fig, f"{name} scan of n = {n}: after step {step} of {last}, {done} of {total} operator "
                      "applications are done.")
    return fig


def _frames_to_draw(x: Any, op: Op | None, identity: Any, step: int | None, algorithm: str) -> tuple[list, int]:
    """The algorithm's frames for ``x`` and the step to draw up to, or a clear error."""
    if algorithm not in FRAMES:
        raise BadInputError(f"tree_figure draws {sorted(FRAMES)}; got {algorithm!r}.")
    x = np.asarray(x)
    if x.ndim == 0 or x.shape[0] > MAX_DRAWN:
        raise BadInputError(f"tree_figure draws 1 to {MAX_DRAWN} elements; got "
                            f"{x.shape[0] if x.ndim else 'a 0-d value'}. Use a smaller n here; "
                            f"the counts and timing plots take large n.")
    frames = FRAMES[algorithm](x, op, identity)
    last = len(frames) - 1
    step = last if step is None else int(step)
    if not 0 <= step <= last:
        raise BadInputError(f"step must be between 0 and {last} for n = {x.shape[0]}; got {step}.")
    return frames, step


def _draw_row(ax: Any, fr: Any, y: float, current: bool, n: int, padded: int) -> None:
    """One row of boxes: the array after the step ``fr``; the current step's writes coloured."""
    color = _PHASE_COLOR.get(fr.phase, "0.5")
    written = set(fr.written.tolist())
    tc = "k" if current else "0.45"
    for i in range(padded):
        unneeded = fr.phase == "down" and i >= n       # padding: no longer needed, not computed
        fill = (color if current else "0.88") if i in written and not unneeded else \
            "0.95" if i >= n else "white"
        ax.add_patch(Rectangle((i - _BOX_W / 2, y - _BOX_H / 2), _BOX_W, _BOX_H, facecolor=fill,
                               edgecolor="0.3" if current else "0.7", lw=0.8,
                               alpha=0.55 if (i in written and current) else 1.0))
        if unneeded:
            ax.text(i, y, "–", ha="center", va="center", fontsize=9, color="0.6")
            continue
        val, rng = _value_text(fr.values[i]), _range_text(*fr.ranges[i])
        if val is not None:
            ax.text(i, y + 0.1, val, ha="center", va="center", fontsize=9, color=tc,
                    fontweight="bold" if current else "normal")
            if current or padded <= 16:      # earlier rows of big trees: values only
                ax.text(i, y - 0.19, rng, ha="center", va="center", fontsize=9, color=tc)
        elif current or padded <= 16:
            ax.text(i, y, rng, ha="center", va="center", fontsize=9, color=tc)
    ax.text(-0.7, y, fr.title.split(":")[0].replace(" (nothing comes before the whole array)", ""),
            ha="right", va="center", fontsize=9, color=tc, fontweight="bold" if current else "normal")


def _draw_arrows(ax: Any, fr: Any, y: float) -> None:
    """What the step ``fr`` read (from the row above) and wrote; the down-sweep's swap dashed."""
    color = _PHASE_COLOR.get(fr.phase, "0.5")
    yt, yb = y + 1 - _BOX_H / 2, y + _BOX_H / 2
    for a, b in zip(fr.left.tolist(), fr.right.tolist()):
        ax.annotate("", (b, yb), (a, yt), arrowprops=dict(arrowstyle="->", color=color, lw=1.1))
        ax.annotate("", (b, yb), (b, yt), arrowprops=dict(arrowstyle="->", color=color, lw=1.1))
        if fr.phase == "down":
            ax.annotate("", (a, yb), (b, yt), arrowprops=dict(arrowstyle="->", color=color, lw=1.1, ls="--"))


@arguments(n_max=Whole(lo=2, hi=2**40, hint="the largest n drawn"),
           highlight=Optional(Whole(hint="the n to mark, or None")))
def counts_figure(n_max: int = 2**20, highlight: int | None = None) -> Figure:
    """Work (operator applications) and steps (levels) of the three scans against n."""
    ns = np.unique(np.round(np.logspace(0, np.log2(n_max), 60, base=2)).astype(int))
    ns = ns[ns >= 2]
    fig, (aw, ast) = new_figure(2, height=3.6)
    styles = {alg: (ALGORITHM_COLORS[alg], "-") for alg in ("sequential", "hillis-steele", "blelloch")}
    for alg, (c, ls) in styles.items():
        counts = [operation_counts(alg, int(n)) for n in ns]
        aw.plot(ns, [k["work"] for k in counts], color=c, ls=ls, label=alg, lw=1.8)
        ast.plot(ns, [k["steps"] for k in counts], color=c, ls=ls, label=alg, lw=1.8)
    lg = np.log2(ns)
    aw.plot(ns, ns * lg, color="0.6", ls=":", label="n log2 n")
    aw.plot(ns, ns, color="0.6", ls="--", label="n")
    ast.plot(ns, lg, color="0.6", ls=":", label="log2 n")
    for ax, what in ((aw, "work: operator applications"), (ast, "steps: dependent levels")):
        log2_x(ax)
        ax.set_yscale("log")
        ax.set_xlabel("n (elements)")
        ax.set_ylabel(what)
        ax.yaxis.set_minor_locator(NullLocator())
        ax.grid(True, which="major", alpha=0.25)
        if highlight:
            ax.axvline(highlight, color="0.3", lw=1, ls=":")
    aw.set_title("Work: Blelloch stays linear (about 2n),\nHillis-Steele pays n log2 n", fontsize=9)
    ast.set_title("Steps: the tree scans need about log2 n levels\n(Blelloch 2 log2 n), the loop n",
                  fontsize=9)
    place_legend(aw)
    place_legend(ast)
    footer_text(fig, "Counted by the scans' own level loops (course.scan.operation_counts), not measured times.")
    return fig


@arguments(live=Optional(Given(_results)), references=Given(_references),
           highlight=Optional(Whole(hint="the n to mark, or None")))
def timing_figure(live: ResultSet | None, references: Sequence[ResultSet] = (),
                  highlight: int | None = None, title: str = "") -> Figure:
    """Time per scan and effective bandwidth (2 n itemsize bytes moved / time) per device.

    Records need ``device``, ``algorithm``, ``n``, ``median_s`` and optionally
    ``gb_per_s``; the copy limit comes from records with ``algorithm == "copy"``.
    """
    fig, (at, ab) = new_figure(2, height=3.8)
    sources = ([live] if live is not None else []) + list(references)
    algs: list[str] = []
    for rs in sources:
        for r in rs.records:
            if r.get("algorithm") not in algs and r.get("algorithm") != "copy":
                algs.append(r.get("algorithm"))
    for rs in sources:
        ref = rs.source == "reference"
        for dev in ("cpu", "gpu"):
            for k, alg in enumerate(algs):
                recs = sorted(rs.select(device=dev, algorithm=alg), key=lambda r: r["n"])
                if not recs:
                    continue
                n = np.array([r["n"] for r in recs], float)
                t = np.array([r["median_s"] for r in recs], float)
                lab = f"{dev.upper()} {alg}" + source_tag(rs, dev, live="")
                kw = dict(color=ALGORITHM_COLORS.get(alg, _SPARE_COLORS[k % 2]), marker="o" if dev == "cpu" else "s",
                          ms=3.5 if dev == "cpu" else 4.5, ls="--" if ref else "-",
                          alpha=0.7 if ref else 1.0, lw=1.3)
                at.plot(n, t, label=lab, **kw)
                gb = np.array([r.get("gb_per_s", np.nan) for r in recs], float)
                ab.plot(n, gb, label=lab, **kw)
                if not ref:
                    mark_noisy(at, n, t, noisy_flags(recs), kw["color"])
                    mark_noisy(ab, n, gb, noisy_flags(recs), kw["color"])
            copy = rs.select(device=dev, algorithm="copy")
            if copy:
                ab.axhline(copy[0]["gb_per_s"], color=COLORS[dev], lw=1.2, ls=":" if not ref else "-.")
                # live above its line, recorded below it: the two labels of one device never overlap; at the
                # left, where the scans of small n run far below any copy limit, no curve runs under them
                ab.annotate(f" {dev.upper()} copy limit {copy[0]['gb_per_s']:.0f} GB/s" + (" (ref.)" if ref else ""),
                            (0.01, copy[0]["gb_per_s"]), xycoords=ab.get_yaxis_transform(), textcoords="offset points",
                            xytext=(0, -3 if ref else 3), fontsize=9, va="top" if ref else "bottom", ha="left",
                            color=COLORS[dev])
    for ax in (at, ab):
        log2_x(ax)
        ax.set_yscale("log")
        ax.set_xlabel("n (elements)")
        ax.grid(True, which="both", alpha=0.25)
        if highlight:
            ax.axvline(highlight, color="0.3", lw=1, ls=":")
    at.set_ylabel("time per scan (s)")
    ab.set_ylabel("bandwidth (GB/s)")
    ab.margins(y=0.2)
    at.set_title(title or "Scan time (colour: algorithm; circles: CPU, squares: GPU)", fontsize=9.5)
    ab.set_title("effective bandwidth: 2 n itemsize bytes / time", fontsize=9)
    figure_legend(fig, [at, ab])   # one legend for both panels, above them: under each it made the figure tall
    has_gpu = any(rs.select(device="gpu") for rs in sources)
    extra = "" if has_gpu else ("No GPU here and no reference GPU results recorded yet: "
                                "GPU curves appear once `python -m course report --record-reference` "
                                "has run on a GPU machine.")
    add_footer(fig, live, [r for r in references], extra=extra)
    return fig


@arguments(variants=Optional(Given(_results)), sweep=Optional(Given(_results)))
def single_pass_figure(variants: ResultSet | None, sweep: ResultSet | None = None) -> Figure:
    """Left: each GPU scan's GB/s as a share of the device copy against n (``scan_sweep``'s ``of_copy``).
    Right: at one size (``scan_kernel_variants``), the copy, the single pass, torch.cumsum, cupy.cumsum and
    the fastest numba block scan of each strategy, in GB/s = (bytes read + written) / time."""
    fig, (al, ar) = new_figure(2, width=10, height=4.2)
    sources = [s for s in (sweep, variants) if s is not None and s.select(device="gpu")]
    if sweep is not None:
        ref = sweep.source == "reference"
        for alg, label in (("single-pass", "single-pass (look-back)"), ("torch", "torch.cumsum"),
                           ("cupy", "cupy.cumsum"), ("numba kernel", "numba block scan, scan-then-add"),
                           ("numba reduce-then-scan", "numba block scan, reduce-then-scan")):
            recs = sorted((r for r in sweep.select(device="gpu", algorithm=alg) if r.get("of_copy")),
                          key=lambda r: r["n"])
            if recs:
                al.plot([r["n"] for r in recs], [100 * r["of_copy"] for r in recs], marker="s", ms=4,
                        ls="--" if ref else "-", color=ALGORITHM_COLORS[alg], label=label)
        al.axhline(100, color=COLORS["gpu"], lw=1.2, ls="-.", label="device copy")
        log2_x(al)
    al.set(xlabel="n (float32 elements)", ylabel="% of the device copy's GB/s", ylim=(0, 115))
    al.set_title("each scan's rate as a share of the copy, against n", fontsize=9.5)
    al.grid(True, which="both", alpha=0.25)
    gpu = {r["variant"]: r for r in (variants.select(device="gpu") if variants else []) if r.get("variant")}
    bars = [(what.split(" (")[0] if name != "cupy.cumsum" else what, gpu[name]) for name, what in PEERS.items()
            if name in gpu] + [(f"numba {r['variant']}", r) for r in best_block_scans(variants or ResultSet(""))]
    copy = gpu.get("copy")
    if bars and copy:
        colors = {"copy": COLORS["gpu"], "single-pass (look-back)": ALGORITHM_COLORS["single-pass"],
                  "torch.cumsum": ALGORITHM_COLORS["torch"], "cupy.cumsum": ALGORITHM_COLORS["cupy"],
                  "scan-then-add": ALGORITHM_COLORS["numba kernel"],
                  "reduce-then-scan": ALGORITHM_COLORS["numba reduce-then-scan"]}
        vals = [r["gb_per_s"] for _, r in bars]
        ar.barh(range(len(bars)), vals, color=[colors.get(r.get("strategy") or r["variant"], "0.5") for _, r in bars])
        ar.set_yticks(range(len(bars)), [label for label, _ in bars], fontsize=9)
        ar.invert_yaxis()
        for i, v in enumerate(vals):
            ar.text(v, i, f" {v:,.0f} ({v / copy['gb_per_s']:.0%})", va="center", fontsize=9)
        ar.margins(x=0.35)
        ar.set_xlabel("GB/s = (bytes read + written) / time\n(% of the device copy)")
        ar.set_title(f"at n = {copy['n']:,} float32", fontsize=9.5)
        single = gpu.get("single-pass (look-back)")
        if single:
            set_takeaway(fig, f"At n = {copy['n']:,} float32 the single-pass scan moves {single['gb_per_s']:,.0f} "
                              f"GB/s, {single['gb_per_s'] / copy['gb_per_s']:.0%} of the device copy"
                         + "".join(f"; {name} {gpu[name]['gb_per_s'] / copy['gb_per_s']:.0%}"
                                   for name in ("torch.cumsum", "cupy.cumsum") if name in gpu) + ".")
    else:
        ar.text(0.5, 0.5, "No GPU record of the scans at one size", ha="center", va="center",
                transform=ar.transAxes, fontsize=9, color="0.3")
        ar.axis("off")
    if al.lines:
        figure_legend(fig, [al])
    live = next((s for s in sources if s.source != "reference"), None)
    refs = list({s.label: s for s in sources if s.source == "reference"}.values())
    add_footer(fig, live, refs, extra="" if sources else "No GPU here and no reference GPU results recorded yet.")
    return fig
