"""Figures of lesson 08: the online softmax block by block, its Blelloch tree, the bytes counted, memory, time.

Figures of a measurement name the device it came from (:func:`course.plots.add_footer`); results recorded
on another machine are drawn dashed; counted figures say that nothing was timed.

>>> fig = stepper_figure(np.array([0.0, 2.0, 1.0, 5.0, 0.5]), block=2, step=1)
>>> len(fig.axes)
2
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..arguments import Given, Optional, Whole, arguments
from ..devices import normalize_device
from ..errors import BadInputError, shown_value
from ..plots import (
    COLORS,
    PALETTE,
    add_footer,
    figure_legend,
    footer_text,
    log2_x,
    mark_noisy,
    new_figure,
    place_legend,
    set_takeaway,
    source_tag,
    value_text,
)
from ..results import ResultSet, validate_references, validate_results
from .softmax import online_softmax_steps, softmax_by_scan
from .traffic import TRAFFIC_ALGORITHMS, count_traffic, tiles_walked, traffic_bound, traffic_formula

__all__ = ["stepper_figure", "scan_tree_figure", "traffic_figure", "memory_figure", "timing_figure",
           "roofline_points", "roofline_placement_figure", "METHOD_STYLE", "MAX_TREE", "WALK_TILES"]

#: The most tiles :func:`traffic_figure` walks for one point (beyond, the closed form, equal to the count, is drawn).
WALK_TILES = 20_000
#: The most scores :func:`scan_tree_figure` draws (the boxes must stay readable).
MAX_TREE = 16
#: A colour and a marker per method: told apart without colour too.
METHOD_STYLE = {"naive": (PALETTE["vermillion"], "o"), "online": (PALETTE["orange"], "v"),
                "flash": (PALETTE["blue"], "s"), "fused": (PALETTE["green"], "D"),
                "torch sdpa": (PALETTE["black"], "^"), "torch math": (PALETTE["purple"], "P"),
                "torch efficient": (PALETTE["sky blue"], "X"), "torch flash (float16)": ("0.45", "*"),
                "torch flash (bfloat16)": ("0.25", "p")}
_ALGORITHM_STYLE = {"naive": (PALETTE["vermillion"], "o"), "flash, K/V outer": (PALETTE["purple"], "^"),
                    "flash, Q outer": (PALETTE["blue"], "s")}


def _validate_caches(caches: Any) -> dict:
    """``caches`` as ``{"L2": bytes, ...}`` (what :func:`course.attention.timing.cache_sizes` returns)."""
    if not isinstance(caches, dict) or not all(isinstance(k, str) and isinstance(v, (int, np.integer))
                                               and not isinstance(v, bool) and v > 0 for k, v in caches.items()):
        raise BadInputError(f"caches must map cache names to their sizes in bytes, e.g. {{'L2': 2**20}} (what "
                            f"course.attention.timing.cache_sizes() returns), got {shown_value(caches)}")
    return caches


_HIGHLIGHT = Optional(Whole(hint="a sequence length to mark"))


@arguments(block=Whole(hint="scores per block"), step=Whole(0, hint="blocks are numbered from 0"))
def stepper_figure(x: np.ndarray, block: int, step: int) -> Figure:
    """The online softmax of one row of scores after ``step + 1`` blocks: left, the scores with the blocks read
    so far and the running maximum; right, the running sum after each block, each block's own sum rescaled."""
    steps = online_softmax_steps(x, block)
    if not 0 <= step < len(steps):
        raise BadInputError(f"step must be between 0 and {len(steps) - 1} for {len(x)} scores in blocks of {block}; "
                            f"got {step}.")
    x = np.asarray(x, dtype=float)
    now = steps[step]
    fig, (left, right) = new_figure(2, width=10, height=3.4)
    j = np.arange(x.size)
    seen = j < now["stop"]
    left.bar(j[seen], x[seen], color=PALETTE["blue"], label="scores read")
    left.bar(j[~seen], x[~seen], color="0.85", label="not read yet")
    left.bar(j[now["start"]:now["stop"]], x[now["start"]:now["stop"]], color=PALETTE["orange"],
             label=f"block {step} (this step)")
    edges = [s["start"] - 0.5 for s in steps] + [x.size - 0.5]
    runs = [s["running_max"] for s in steps[:step + 1]]
    left.step(edges[:step + 2], runs + runs[-1:], where="post", color="k", lw=1.6, label="running max m")
    for e in edges[1:-1]:
        left.axvline(e, color="0.6", lw=0.8, ls=":")
    left.set_xlabel("key j")
    left.set_ylabel("score x_j")
    left.set_title(f"block {step}: its max {now['block_max']:.3g}, running max {now['running_max']:.3g}",
                   fontsize=9.5)
    place_legend(left)
    sums = [s["running_sum"] for s in steps]
    right.bar(range(step), sums[:step], color="0.75", label="running sum s after each earlier block")
    old = sums[step - 1] if step else 0.0
    kept = old * now["rescale"]
    mine = now["block_sum"] * np.exp(now["block_max"] - now["running_max"])
    if step:
        right.bar([step], [old], fill=False, edgecolor="k", ls="--", lw=1.2, label="old sum, before rescaling")
    right.bar([step], [kept], color=PALETTE["blue"], label="old sum × exp(m_old − m_new)")
    right.bar([step], [mine], bottom=[kept], color=PALETTE["orange"], label="this block: Σ exp(x_j − m_new)")
    right.set_xlim(-0.6, len(steps) - 0.4)
    right.set_xlabel("block")
    right.set_ylabel("running sum s")
    right.set_xticks(range(len(steps)))
    right.set_title(f"s = {kept:.3g} + {mine:.3g} = {now['running_sum']:.4g}; rescale factor {now['rescale']:.3g}",
                    fontsize=9.5)
    place_legend(right)
    p_final = np.exp(x - steps[-1]["running_max"]) / steps[-1]["running_sum"]
    err = float(np.abs(p_final - np.exp(x - x.max()) / np.exp(x - x.max()).sum()).max())
    footer_text(fig, f"Nothing timed. After the last block, softmax = exp(x − m) / s differs from the two-pass "
                     f"softmax by at most {err:.1e}.")
    set_takeaway(fig, f"After block {step} of {len(steps) - 1} the running max is {now['running_max']:.3g} and the "
                      f"running sum {now['running_sum']:.4g}; the old sum was multiplied by {now['rescale']:.3g}.")
    return fig


@arguments(step=Optional(Whole(0, hint="levels are numbered from 0; None for the last")))
def scan_tree_figure(x: np.ndarray, step: int | None = None) -> Figure:
    """The softmax states ``(m, s)`` of ``x`` (at most :data:`MAX_TREE` scores) combined by lesson 04's Blelloch
    scan, level by level up to ``step``: each box is one state of the in-place array, the pairs of the current
    level coloured (up-sweep purple, down-sweep orange)."""
    x = np.asarray(x, dtype=float)
    if x.ndim != 1 or not 1 <= x.size <= MAX_TREE:
        raise BadInputError(f"scan_tree_figure draws 1 to {MAX_TREE} scores; got shape {x.shape}.")
    _p, states, tr = softmax_by_scan(x, trace=True)
    rows = [("scores", tr.initial, None)] + [(f"{lv.phase}-sweep {lv.depth}", lv.state, lv) for lv in tr.levels]
    last = len(rows) - 1
    step = last if step is None else int(step)
    if not 0 <= step <= last:
        raise BadInputError(f"step must be between 0 and {last} for {x.size} scores; got {step}.")
    width = tr.padded_n
    fig = Figure(figsize=(max(6.5, 1.05 * width + 2.2), 0.75 * (step + 1) + 1.3))
    ax = fig.add_axes((0.01, 0.04, 0.98, 0.84))
    for r, (title, state, lv) in enumerate(rows[:step + 1]):
        y = -r
        written = set() if lv is None else set(lv.right.tolist()) | (set(lv.left.tolist()) if lv.phase == "down"
                                                                         else set())
        colour = PALETTE["purple"] if lv is not None and lv.phase == "up" else PALETTE["orange"]
        for i in range(width):
            m, s = state[i]
            fill = (colour if r == step else "0.88") if i in written else ("0.95" if i >= x.size else "white")
            ax.add_patch(Rectangle((i - 0.45, y - 0.34), 0.9, 0.68, facecolor=fill, edgecolor="0.4", lw=0.8,
                                   alpha=0.6 if fill == colour else 1.0))
            text = "(−∞, 0)" if np.isneginf(m) else f"m {m:.2g}\ns {s:.3g}"
            ax.text(i, y, text, ha="center", va="center", fontsize=9, color="k" if r == step else "0.45")
        ax.text(-0.6, y, title, ha="right", va="center", fontsize=9)
    ax.set_xlim(-2.2, width - 0.4)
    ax.set_ylim(-step - 0.6, 0.6)
    ax.axis("off")
    ax.set_title(f"Blelloch scan of {x.size} softmax states (m, s), step {step} of {last}", fontsize=10)
    total = states[-1]
    footer_text(fig, "Nothing timed. Each box holds a state (m = max, s = Σ exp(x − m)); (−∞, 0) is the identity, "
                     "pale boxes padding.\nColoured: written by this step; grey: by an earlier one. The up-sweep's "
                     "last box holds the state of all the scores; after the down-sweep each box holds the state of "
                     f"the scores before it.\nThe scan's state of all the scores: m = {total[0]:.3g}, "
                     f"s = {total[1]:.4g}.")
    set_takeaway(fig, f"After step {step} of {last} of the tree; the state of all {x.size} scores is m = "
                      f"{total[0]:.3g}, s = {total[1]:.4g}.")
    return fig


@arguments(d=Whole(hint="the head size"), sram=Whole(hint="numbers the on-chip memory holds (M)"),
           n_max=Whole(64, 2**40, hint="the longest sequence drawn"), highlight=_HIGHLIGHT,
           itemsize=Whole(hint="bytes per number, 4 for float32"))
def traffic_figure(d: int = 64, sram: int = 100_000, n_max: int = 2**16, highlight: int | None = None,
                   itemsize: int = 4) -> Figure:
    """Left: numbers moved between DRAM and chip against N, counted by walking each algorithm's loops.  Right:
    the count over the paper's Θ expression (N d + N², or N² d² / M), which levels off where Θ holds."""
    ns = [2**k for k in range(6, int(np.log2(max(n_max, 64))) + 1)]
    fig, (left, right) = new_figure(2, width=10, height=3.6)
    ends = []
    for alg in TRAFFIC_ALGORITHMS:
        color, marker = _ALGORITHM_STYLE[alg]
        formula = np.array([traffic_formula(alg, n, d, sram) for n in ns], dtype=float)
        walked = [n for n in ns if tiles_walked(alg, n, d, sram) <= WALK_TILES]
        counted = np.array([count_traffic(alg, n, d, sram)["numbers"] for n in walked], dtype=float)
        bound = np.array([traffic_bound(alg, n, d, sram) for n in ns])
        left.plot(ns, formula * itemsize, color=color, lw=1.4, label=alg)
        left.plot(walked, counted * itemsize, ls="none", marker=marker, ms=5, color=color)
        right.plot(ns, formula / bound, marker=marker, ms=4, color=color,
                   label=f"{alg} / {'(N d + N²)' if alg == 'naive' else '(N² d² / M)'}")
        ends.append((alg, formula[-1] * itemsize))
    for ax in (left, right):
        log2_x(ax)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length N")
        ax.grid(True, which="both", alpha=0.25)
        if highlight:
            ax.axvline(highlight, color="0.3", lw=1, ls=":")
    left.set_ylabel(f"bytes moved ({itemsize} B/number)")
    left.set_title(f"one head, d = {d}, on-chip memory M = {sram:,} numbers", fontsize=9.5)
    right.set_ylabel("count / Θ expression")
    right.set_title("flat: the count grows as the Θ says", fontsize=9.5)
    place_legend(left)
    place_legend(right)
    add_footer(fig, measured=False, devices=["cpu"], extra="Markers: counted by walking each algorithm's loops "
               "(course.attention.traffic), where that takes at most 20,000 tiles; lines: the closed forms. Tiles "
               "from M as the paper derives them.")
    naive = dict(ends)["naive"]
    set_takeaway(fig, f"At N = {ns[-1]:,}, the naive algorithm moves {naive / 2**20:,.0f} MiB and the tiled ones "
                      + " and ".join(f"{b / 2**20:,.1f} MiB ({alg})" for alg, b in ends[1:])
                      + f": {naive / min(b for _, b in ends[1:]):.1f}× less at best.")
    return fig


@arguments(rs=Given(validate_results, what="rs"))
def memory_figure(rs: ResultSet) -> Figure:
    """Peak memory measured above the inputs (tracemalloc) against N, beside one n × n array and what the code
    was expected to hold."""
    fig, (ax,) = new_figure(1, width=8, height=3.8)
    said = []
    for method in sorted({r["method"] for r in rs.records}, key=list(METHOD_STYLE).index):
        recs = sorted(rs.select(method=method), key=lambda r: r["n"])
        color, marker = METHOD_STYLE[method]
        ns = [r["n"] for r in recs]
        ax.plot(ns, [r["peak_bytes"] for r in recs], marker=marker, color=color, lw=1.2,
                label=f"{method}: measured peak")
        ax.plot(ns, [r["expected_bytes"] for r in recs], ls=":", color="k", lw=1.6, zorder=3,
                label="what the code makes (counted)" if not said else "_nolegend_")
        said.append(f"{method} {recs[-1]['peak_bytes'] / 2**20:,.2f} MiB")
    sq = sorted({(r["n"], r["square_bytes"]) for r in rs.records})
    if sq:
        ax.plot([n for n, _ in sq], [b for _, b in sq], color="0.5", lw=1, ls="-.", label="one n × n array")
    log2_x(ax)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length n (one head, float32)")
    ax.set_ylabel("bytes above the inputs")
    ax.set_title("Peak memory of one forward pass (NumPy, measured with tracemalloc)", fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    place_legend(ax)
    add_footer(fig, rs)
    if said:
        set_takeaway(fig, f"At n = {max(n for n, _ in sq):,}: " + ", ".join(said) + " at their peak.")
    return fig


def _copy_rate(rs: ResultSet, dev: str) -> float | None:
    copies = rs.select(kind="copy", device=dev)
    return copies[-1]["bytes_per_s"] if copies else None


@arguments(live=Optional(Given(validate_results, what="live")), references=Given(validate_references),
           caches=Optional(Given(_validate_caches)), highlight=_HIGHLIGHT)
def timing_figure(live: ResultSet | None, references: Sequence[ResultSet] = (), caches: dict | None = None,
                  highlight: int | None = None) -> Figure:
    """Left: time per forward pass against n for every (device, method).  Right: counted bytes per second
    against the device copy measured in the same run (dotted line; the bar a memory-bound pass is held to).
    ``caches`` (``{"L2": bytes, ...}``) marks where one n × n float32 array outgrows each CPU cache."""
    sources = ([live] if live is not None else []) + [r for r in references if r.records]
    fig, (left, right) = new_figure(2, width=10, height=4.0)
    said = []
    for rs in sources:
        ref = rs.source == "reference"
        for dev in ("cpu", "gpu"):
            for method, (color, marker) in METHOD_STYLE.items():
                recs = sorted(rs.select(kind="time", device=dev, method=method), key=lambda r: r["n"])
                if not recs:
                    continue
                ns, ts = [r["n"] for r in recs], [r["median_s"] for r in recs]
                label = f"{dev.upper()} {method}" + source_tag(rs, dev, live="")
                kw = dict(color=color, marker=marker, ms=4, ls="--" if ref else "-", lw=1.1 if dev == "cpu" else 2,
                          alpha=0.6 if ref else 1.0)
                left.plot(ns, ts, label=label, **kw)
                mark_noisy(left, ns, ts, [r.get("noisy", False) for r in recs], color)
                said.append(f"{label} {value_text(ts[-1], 's')} at n = {ns[-1]:,}")
                rated = [r for r in recs if r.get("gb_per_s")]
                if rated:
                    right.plot([r["n"] for r in rated], [r["gb_per_s"] for r in rated], label=label, **kw)
            bw = _copy_rate(rs, dev)
            if bw:
                right.axhline(bw / 1e9, color=COLORS[dev], ls=":", lw=1.4,
                              label=f"{dev.upper()} copy, same run: {bw / 1e9:,.1f} GB/s"
                              + source_tag(rs, dev, live=""))
    drawn = [r["n"] for rs in sources for r in rs.select(kind="time", device="cpu")]
    for name, size in (caches or {}).items():
        n_fit = int(np.sqrt(size / 4))
        if not drawn or not min(drawn) / 1.5 <= n_fit <= 1.5 * max(drawn):
            continue                               # only the caches the measured sizes cross
        left.axvline(n_fit, color="0.5", lw=1, ls="-.")
        left.text(n_fit, 0.98, f" n×n float32 = {name}", transform=left.get_xaxis_transform(), fontsize=9,
                  rotation=90, va="top", ha="right", color="0.35")
    if not said:
        left.text(0.5, 0.5, "nothing measured yet", ha="center", va="center", transform=left.transAxes)
    for ax in (left, right):
        log2_x(ax)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length n")
        ax.grid(True, which="both", alpha=0.25)
        if highlight:
            ax.axvline(highlight, color="0.3", lw=1, ls=":")
    figure_legend(fig, (left, right))      # one legend for both panels: under each, the two ran into each other
    left.set_ylabel("time per forward pass (s), median")
    left.set_title("Attention forward: time against n", fontsize=9.5)
    right.set_ylabel("counted memory bytes / time (GB/s)")
    right.set_title("the course's counted bytes per second, and the copy", fontsize=9.5)
    add_footer(fig, live, [r for r in references if r.records])
    if said:
        set_takeaway(fig, "; ".join(said[:6]) + ".")
    return fig


@arguments(rs=Given(validate_results, what="rs"), device=Given(normalize_device),
           n=Optional(Whole(hint="the sequence length; None for the largest timed")))
def roofline_points(rs: ResultSet, device: str = "cpu", n: int | None = None) -> list[dict]:
    """Point records (lesson 03's ``kind="point"``) for the timed attention passes that have counted bytes, at
    sequence length ``n`` (None: the largest timed for every such method): intensity = FLOPs / counted bytes,
    rate = FLOPs / measured time."""
    timed = [r for r in rs.select(kind="time", device=device) if r.get("counted_bytes")]
    if n is None and timed:
        n = min(max(r["n"] for r in timed if r["method"] == m) for m in {r["method"] for r in timed})
    out = []
    for r in timed:
        if r["n"] == n:
            out.append({"device": device, "kind": "point", "op": r["method"], "n": r["n"],
                        "name": f"attention {r['method']} n={r['n']:,}", "flops": r["flops"],
                        "bytes": r["counted_bytes"], "intensity": r["flops"] / r["counted_bytes"],
                        "flops_per_s": r["flops"] / r["median_s"], "noisy": r.get("noisy", False)})
    return out


@arguments(peaks=Given(validate_results, what="peaks"), rs=Given(validate_results, what="rs"),
           references=Given(validate_references),
           n=Optional(Whole(hint="the sequence length; None for the largest timed")))
def roofline_placement_figure(peaks: ResultSet, rs: ResultSet, references: Sequence[ResultSet] = (),
                              n: int | None = None) -> Figure:
    """Lesson 03's roofline of this machine (``peaks``: its measured roofs) with the attention passes of ``rs`` at
    sequence length ``n`` placed on it by counted intensity and measured rate; ``references``' roofs (recorded on
    other machines, e.g. lesson 03's GPU roofline) drawn dashed, without their points."""
    from ..throughput.plots import roofline_figure

    def roofs(source: ResultSet) -> ResultSet:
        only = ResultSet.from_dict(source.to_dict(), source=source.source)
        only.records = [r for r in only.records if r.get("kind") in ("peak_bandwidth", "peak_flops")]
        return only

    live = roofs(peaks)
    for dev in live.devices():
        for point in roofline_points(rs, dev, n):
            live.add(**point)
    fig = roofline_figure(live, [roofs(r) for r in references])
    fig.axes[0].set_xlabel("arithmetic intensity (FLOP per byte; attention: its algorithm's counted traffic)")
    return fig
