"""Pictures for lesson 05: the scan tree with Jacobians at its leaves, speedups, work, memory.

* :func:`tree_figure` runs lesson 04's real ``blelloch_scan`` on *symbols* (each
  element is the range of the chain it covers) and draws every level: the
  leaves are ``∇x_T`` and the transposed Jacobians, the up-sweep builds products
  of Jacobians, the down-sweep hands out the gradients ``G_t``.
* :func:`speedup_figure` is the paper's figure: backward-pass speedup of the scan
  over sequential back-propagation against T, log scale, live and reference.
* :func:`work_figure`: dependent steps and flops of both, against T.
* :func:`memory_figure`: a Jacobian stored dense vs CSR (the VGG-11 example).
* :func:`timing_bars`: forward and backward times at one T, from :func:`course.bppsa.timing.rnn_timings`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.figure import Figure

from ..arguments import Given, OneOf, Optional, Real, Whole, arguments
from ..backprop.readers import validate_references, validate_results
from ..devices import normalize_device
from ..errors import whole_number
from ..plots import (
    COLORS,
    PALETTE,
    add_footer,
    figure_legend,
    mark_noisy,
    new_figure,
    noisy_flags,
    place_legend,
    series_style,
    set_takeaway,
    source_tag,
    tint,
)
from ..results import ResultSet
from .algorithm import work_counts
from .sparse import validate_claim
from .timing import PAPER, crossover_n, speedup_grid, speedups, tf32_setting, validate_timings, validate_torch_timings

if TYPE_CHECKING:
    from ..scan.algorithms import ScanTrace

__all__ = ["symbolic_scan", "tree_figure", "speedup_figure", "work_figure", "memory_figure",
           "timing_bars", "METHOD_STYLE"]

_SUB = str.maketrans("0123456789-", "₀₁₂₃₄₅₆₇₈₉₋")

#: A colour per method; blue and vermillion stay the CPU's and the GPU's (the speed-up panel beside it).
METHOD_STYLE = {"sequential": (PALETTE["black"], "sequential backprop (T steps)"),
                "jacobian": (PALETTE["purple"], "sequential over formed Jacobians"),
                "scan": (PALETTE["orange"], "BPPSA: Blelloch scan (2·log2 T levels)"),
                "fast": (PALETTE["sky blue"], "BPPSA without copies: chunked reduce-then-scan"),
                "torch": (PALETTE["green"], "PyTorch nn.RNN backward (cuDNN on a GPU)"),
                "sequential kernel": (PALETTE["vermillion"], "sequential GPU kernel, one CUDA graph"),
                "cudnn graph": (PALETTE["blue"], "cuDNN nn.RNN backward in a CUDA graph"),
                "fast chain": (PALETTE["yellow"], "BPPSA's chain alone, one CUDA graph")}


class _Span:
    """A symbol for the product of the chain's elements lo..hi (None: the identity)."""

    __slots__ = ("lo", "hi")

    def __init__(self, lo: int | None, hi: int | None):
        self.lo, self.hi = lo, hi

    def label(self, T: int) -> str:
        if self.lo is None:
            return "I"
        if self.lo == 0:                       # includes the gradient: it IS a gradient
            return f"G{T - self.hi}".translate(_SUB)
        a, b = T - self.hi, T - self.lo        # element p is J_{T-p}ᵀ
        return f"J{a}ᵀ".translate(_SUB) if a == b else f"J{a}ᵀ⋯J{b}ᵀ".translate(_SUB)


def _combine(a: _Span, b: _Span) -> _Span:
    if a.lo is None:
        return b
    if b.lo is None:
        return a
    return _Span(a.lo, b.hi)


_TREE_T = Whole(1, 63, hint="the tree is drawn for 1 <= T <= 63 (a readable picture)")


@arguments(T=_TREE_T)
def symbolic_scan(T: int) -> tuple[list[str], ScanTrace]:
    """Run ``course.scan.blelloch_scan`` (inclusive, with the BPPSA order) on symbols.

    Returns ``(labels_out, trace)``: ``labels_out[k]`` names what the scan left at
    position k (``G_T, G_{T-1}, ..., G_0``), and the trace holds every level of the
    in-place picture, as symbols (use ``_Span.label``).
    """
    from ..scan.algorithms import blelloch_scan

    x = np.empty(T + 1, dtype=object)
    for p in range(T + 1):
        x[p] = _Span(p, p)
    op = np.frompyfunc(_combine, 2, 1)
    out, tr = blelloch_scan(x, op=op, identity=_Span(None, None), exclusive=False, trace=True)
    return [s.label(T) for s in out], tr


@arguments(T=_TREE_T)
def tree_figure(T: int = 7) -> Figure:
    """The Blelloch tree of backprop through T steps, with Jacobians at the leaves."""
    labels, tr = symbolic_scan(T)
    N = tr.padded_n
    rows = [("leaves", tr.initial, None)] + [(f"{lv.phase}-sweep, level {lv.depth}", lv.state, lv)
                                            for lv in tr.levels]
    rows.append(("result (inclusive)", np.array(labels + [""] * (N - len(labels)), dtype=object), None))
    height = 1.0 + 0.5 * len(rows)
    # the notebook shows a figure at about 9 inches: wider ones shrink, and their labels with them
    fig, (ax,) = new_figure(1, width=9.0 if N <= 8 else 0.75 * N + 2.5, height=height)
    fs = 11 if N <= 8 else 9
    for r, (name, state, lv) in enumerate(rows):
        y = -r
        ax.text(-0.6, y, name, ha="right", va="center", fontsize=10, color="0.3")
        changed = set()
        if lv is not None:
            changed = set(lv.right.tolist()) | (set(lv.left.tolist()) if lv.phase == "down" else set())
            color = PALETTE["blue"] if lv.phase == "up" else PALETTE["orange"]
            for a, b in zip(lv.left.tolist(), lv.right.tolist()):
                if lv.phase == "up":           # right = left ◇ right
                    ax.annotate("", (b, y + 0.2), (a, y + 0.8), arrowprops=dict(arrowstyle="->", color=color, lw=0.9))
                    ax.annotate("", (b, y + 0.2), (b, y + 0.8), arrowprops=dict(arrowstyle="->", color=color, lw=0.9))
                else:                          # left <- prefix; right <- prefix ◇ left
                    ax.annotate("", (a, y + 0.2), (b, y + 0.8), arrowprops=dict(arrowstyle="->", color=color, lw=0.9))
                    ax.annotate("", (b, y + 0.2), (a, y + 0.8), arrowprops=dict(arrowstyle="->", color=color,
                                                                                lw=0.9, ls="--"))
                    ax.annotate("", (b, y + 0.2), (b, y + 0.8), arrowprops=dict(arrowstyle="->", color=color, lw=0.9))
        for p in range(N):
            s = state[p]
            text = s.label(T) if isinstance(s, _Span) else str(s)
            if not text:
                continue
            pad = p >= T + 1 and name != "result (inclusive)"
            hot = p in changed
            down = lv is not None and lv.phase == "down"
            face = (tint("orange", 0.25) if down else tint("sky blue", 0.3)) if hot else "white"
            if name.startswith("result"):
                face = tint("green", 0.2)
            ax.text(p, y, text, ha="center", va="center", fontsize=fs, color="0.6" if pad else "k",
                    bbox=dict(boxstyle="round,pad=0.25", fc=face, ec="0.6" if pad else "0.3", lw=0.6))
    ax.set_xlim(-0.8 - 0.12 * 30 / max(N, 4) * 4, N - 0.4)
    ax.set_ylim(-len(rows) + 0.4, 0.8)
    ax.axis("off")
    levels = sum(1 for lv in tr.levels if lv.work)
    ax.set_title(f"Backprop through T = {T} steps as a Blelloch scan over [G_T, J_{T - 1}ᵀ, …, J_0ᵀ] "
                 "(G_T: the loss's gradient at step T), "
                 f"a ◇ b = b·a:\n{levels} levels of combines ({tr.work} products) instead of {T} dependent steps.\n"
                 "Blue: up-sweep (products of Jacobians); orange: down-sweep (prefixes handed down); grey: padding.",
                 fontsize=9)
    set_takeaway(fig, f"Backprop through T = {T} steps as a scan needs {levels} levels of combines ({tr.work} "
                      f"products) instead of {T} dependent steps.")
    return fig


# ------------------------------------------------------------------ timing pictures

def _sources(live: ResultSet | None, references: Sequence[ResultSet]) -> list[ResultSet]:
    return ([live] if live is not None and live.records else []) + list(references)


def _backward(rs: ResultSet, device: str, method: str, x: str = "T",
              where: dict | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    recs = sorted(rs.select(device=device, method=method, **(where or {})), key=lambda r: r[x])
    return (np.array([r[x] for r in recs], dtype=float), np.array([r["backward_s"] for r in recs], dtype=float),
            noisy_flags(recs))


def _peer_name(rs: ResultSet, device: str, method: str) -> str:
    """PyTorch's nn.RNN with its engine and, on a GPU, the TF32 setting of both sides, read from the records."""
    if device != "gpu":
        return "PyTorch nn.RNN"
    ours, theirs = tf32_setting(rs, device, method), tf32_setting(rs, device, "torch")
    return "cuDNN nn.RNN, " + (f"both {ours}" if ours == theirs else f"scan {ours}, cuDNN {theirs}")


@arguments(live=Optional(Given(validate_results, name="live")), references=Given(validate_references),
           highlight=Optional(Real(above=0, hint="the x to mark")),
           paper=Optional(Real(above=0, hint="the paper's speed-up, drawn as a line")),
           x=OneOf("T", "batch", "hidden_size"))
def speedup_figure(live: ResultSet | None, references: Sequence[ResultSet] = (),
                   highlight: float | None = None, paper: float | None = 108.0, x: str = "T",
                   where: dict | None = None) -> Figure:
    """Left: backward time against T (or batch, or hidden size) per method and device.  Right: the speedup.

    Speedup = backward time of the sequential method (or PyTorch) / backward time
    of the scan, measured in the same run on the same device; log y, like the paper.
    ``x``: ``"T"``, ``"batch"`` or ``"hidden_size"``; ``where`` filters the records (``{"batch": 16}``).
    """
    xlabels = {"T": "sequence length T", "batch": "batch size", "hidden_size": "hidden size n"}
    xlabel = xlabels[x]
    fig, (ax, bx) = new_figure(2, width=11, height=4.2)
    sources = _sources(live, references)
    drawn = False
    for rs in sources:
        ref = rs.source == "reference"
        for dev in ("cpu", "gpu"):
            who = (rs.gpu_name or "GPU") if dev == "gpu" else rs.cpu_name
            tag = f"{dev.upper()}" + source_tag(rs, dev)
            for m, (color, label) in METHOD_STYLE.items():
                X, b, noisy = _backward(rs, dev, m, x, where)
                keep = b > 0
                if keep.any():   # solid: measured live, dashed: recorded; noisy live points hollow
                    ax.plot(X[keep], b[keep], marker="o" if dev == "cpu" else "s", ms=4, color=color,
                            ls="--" if ref else "-", alpha=0.7 if ref else 1.0, label=f"{label}, {tag}")
                    if not ref:
                        mark_noisy(ax, X[keep], b[keep], noisy[keep], color)
            for method, over in (("scan", "sequential"), ("scan", "torch"), ("fast", "sequential"), ("fast", "torch")):
                px, py = speedups(rs, dev, over=over, method=method, x=x, **(where or {}))
                if len(px):   # marker: which baseline; colour: which scan (the device's, or the copy-free one's)
                    mark = ("o" if dev == "cpu" else "s") if over == "sequential" else "^"
                    headline = method == "fast" and over == "torch"    # the paper's comparison: drawn thicker
                    bx.plot(px, py, marker=mark, ms=5 if headline else 4, ls="--" if ref else "-",
                            lw=2.4 if headline else 1.5,
                            color=COLORS[dev] if method == "scan" else METHOD_STYLE["fast"][0],
                            alpha=0.9 if headline else 0.7 if ref else 1.0,
                            label=f"{'scan' if method == 'scan' else 'scan without copies'} vs "
                                  f"{'the course loop' if over == 'sequential' else _peer_name(rs, dev, method)}, "
                                  f"{dev.upper()}: {who}" + source_tag(rs, dev, live=""))
                    drawn = True
    for a in (ax, bx):
        a.set_xscale("log")
        a.set_yscale("log")
        a.set_xlabel(xlabel)
        a.grid(True, which="both", alpha=0.25)
        if highlight is not None:
            a.axvline(highlight, color="0.3", lw=1, ls=":")
    ax.set_ylabel("backward pass, timed alone (s)")
    ax.set_title("backward pass of the tanh RNN" + "".join(f", {k} = {v}" for k, v in (where or {}).items()),
                 fontsize=10)
    bx.axhline(1.0, color="0.4", lw=1)
    if paper and x == "T":  # one measured point of the paper, drawn where it was measured: not a line
        T_paper = PAPER["T_max"]
        peers = {m for rs in sources for dev in ("cpu", "gpu") for m in ("fast", "scan")
                 if len(speedups(rs, dev, over="torch", method=m, x="T", **(where or {}))[0])}
        like = ("the thick ▲ curve" if "fast" in peers else "the ▲ curves" if peers else
                "none drawn here (PyTorch's nn.RNN not timed)")
        bx.plot([T_paper], [paper], marker="*", ms=11, color="0.35", ls="none",
                label=f"paper (arXiv): up to {paper:.0f}× vs {PAPER['baseline']}, on its GPUs ({PAPER['gpus']}); "
                      f"like for like: {like}")
        for rs in sources:   # a dotted line from the star to the same comparison here, at the same T
            for dev in ("cpu", "gpu"):
                for method in ("fast", "scan"):      # the copy-free scan where it was timed, else the teaching one
                    px, py = speedups(rs, dev, over="torch", method=method, x="T", **(where or {}))
                    at = [v for t, v in zip(px, py) if t == T_paper]
                    if at:
                        bx.plot([T_paper, T_paper], [paper, at[0]], ls=":", lw=1, color="0.35")
                        break
    bx.set_ylabel("backward speed-up (×)")
    bx.set_title("above 1: the scan is faster" + (" (like the paper's figure)" if x == "T" else ""), fontsize=9)
    has_gpu = any(rs.select(device="gpu") for rs in sources)
    if not has_gpu:
        bx.text(0.5, 0.78, "No GPU here and no reference GPU results recorded yet:\nthe GPU curve, "
                "where the scan should win, cannot be shown.\nRun on Colab (GPU) or record references with\n"
                "python -m course report --record-reference", transform=bx.transAxes, ha="center",
                va="center", fontsize=9, color="0.3",
                bbox=dict(fc="white", ec="0.8", alpha=0.85))
    # one legend above both panels: inside, it hid curves once reference results were drawn too
    figure_legend(fig, (ax, bx))
    if not drawn:
        bx.set_ylim(0.01, 1000)
    add_footer(fig, live, list(references))
    return fig


def work_figure(T_max: int = 30000, n: int = 20, batch: int = 16, highlight: float | None = None) -> Figure:
    """Dependent steps (left) and flops (right) of sequential backprop vs the scan, against T."""
    T_max = whole_number("T_max", T_max, 2)
    Ts = np.unique(np.round(np.logspace(0, np.log10(T_max), 40)).astype(int))
    c = [work_counts(int(t), n, batch) for t in Ts]
    fig, (ax, bx) = new_figure(2, width=10, height=3.6)
    ax.plot(Ts, [r["steps_sequential"] for r in c], color=METHOD_STYLE["sequential"][0], label="sequential: T")
    ax.plot(Ts, [r["steps_scan"] for r in c], color=METHOD_STYLE["scan"][0], label="scan: 2·⌈log2(T+1)⌉")
    ax.set_ylabel("dependent steps (levels)")
    ax.set_title("the critical path: what parallel hardware waits on", fontsize=9.5)
    bx.plot(Ts, [r["flops_sequential"] for r in c], color=METHOD_STYLE["sequential"][0],
            label="loop: 2n²·T·B")
    bx.plot(Ts, [r["flops_scan"] for r in c], color=METHOD_STYLE["scan"][0],
            label=f"teaching scan: 2n³·2T·B ({c[-1]['work_ratio']:.0f}×)")
    bx.plot(Ts, [r["flops_scan_min"] for r in c], color=METHOD_STYLE["scan"][0], ls="--",
            label=f"least scan: (2n³ + 2n²)·T·B ({c[-1]['work_ratio_min']:.0f}×)")
    bx.set_ylabel("floating-point operations")
    bx.set_title(f"the work, n = {n}, B = {batch}: least scan matrix × vector down", fontsize=9.5)
    for a in (ax, bx):
        a.set_xscale("log")
        a.set_yscale("log")
        a.set_xlabel("sequence length T")
        a.minorticks_off()                     # ten decades of minor ticks cost a second to draw
        a.grid(True, alpha=0.25)
        place_legend(a)
        if highlight is not None:
            a.axvline(highlight, color="0.3", lw=1, ls=":")
    return fig


@arguments(claim=Given(validate_claim))
def memory_figure(claim: dict) -> Figure:
    """Bars: the VGG-11 first-conv Jacobian dense vs CSR vs the kernel's weights (log scale)."""
    items = [("dense Jacobian", claim["dense_bytes"]), ("CSR Jacobian", claim["csr_bytes"]),
             ("the weights it is made of", claim.get("weights_bytes", 0))]
    items = [i for i in items if i[1]]
    fig, (ax,) = new_figure(1, width=8, height=2.4)
    ax.barh(range(len(items)), [i[1] for i in items],
            color=["0.73", PALETTE["vermillion"], PALETTE["green"]][:len(items)])
    ax.set_yticks(range(len(items)), [i[0] for i in items], fontsize=9)
    ax.invert_yaxis()
    ax.set_xscale("log")
    for k, (_, v) in enumerate(items):
        ax.text(v, k, f"  {v / 2**20:,.2f} MiB" if v > 2**20 else f"  {v:,} bytes", va="center", fontsize=9)
    ax.set_xlabel("bytes (log scale)")
    ax.set_xlim(1e3, claim["dense_bytes"] * 20)
    ax.set_title(f"Jacobian of VGG-11's first convolution on one 32×32×3 image "
                 f"({claim['shape'][0]:,} × {claim['shape'][1]:,}, {100 * claim['density']:.2f}% non-zero)",
                 fontsize=9)
    return fig


@arguments(result=Given(validate_timings), T=Whole(hint="the sequence length"), device=Given(normalize_device),
           torch_result=Optional(Given(validate_torch_timings)))
def timing_bars(result: dict, T: int, device: str, torch_result: dict | None = None) -> Figure:
    """Forward and backward times at one T (from ``rnn_timings``), plus the PyTorch peer if given."""
    items = [("forward (shared)", result["forward"].median, "0.6")]
    for m, b in result["backward_s"].items():
        items.append((f"backward: {METHOD_STYLE[m][1]}", b, METHOD_STYLE[m][0]))
    if torch_result is not None:
        items.append(("backward: PyTorch nn.RNN", torch_result["backward_s"], METHOD_STYLE["torch"][0]))
    fig, (ax,) = new_figure(1, width=8.5, height=0.8 + 0.42 * len(items))
    vals = np.array([max(i[1], 0.0) for i in items]) * 1e3          # milliseconds: "0.00200 s" reads badly
    ax.barh(range(len(items)), vals, color=[i[2] for i in items])
    ax.set_yticks(range(len(items)), [i[0] for i in items], fontsize=9)
    ax.invert_yaxis()
    for k, (_, v, _) in enumerate(items):
        ax.text(max(v, 0) * 1e3, k, f" {v * 1e3:.3g} ms" if v > 0 else " lost in noise", va="center", fontsize=9)
    ax.margins(x=0.25)
    ax.set_xlabel("median time (ms)")
    ax.set_title(f"tanh RNN, T = {T:,}, on the {device.upper()}: each backward pass timed alone\n"
                 "from one saved forward", fontsize=9.5)
    add_footer(fig, devices=[device])
    return fig


def regime_figure(rs: ResultSet) -> Figure:
    """The scan's speedup over the loop against the chain's width n, one line per T (measured on the CPU),
    with the 1× line and each T's crossover marked; the right panel, the extra work the scan does."""
    grid = speedup_grid(rs)
    fig, (ax, bx) = new_figure(2, width=10, height=3.6)
    Ts = sorted({T for _, T in grid})
    cross = crossover_n(rs)
    for k, T in enumerate(Ts):
        pts = sorted((n, s) for (n, t), s in grid.items() if t == T)
        ns, ss = [p[0] for p in pts], [p[1] for p in pts]
        color, marker = series_style(k)["color"], series_style(k)["marker"]
        ax.plot(ns, ss, marker=marker, color=color, label=f"T = {T:,}")
        noisy = [p for p, r in zip(pts, sorted(rs.select(method="scan", T=T), key=lambda r: r["n"]))
                 if r.get("noisy")]
        if noisy:
            ax.plot([p[0] for p in noisy], [p[1] for p in noisy], marker=marker, ls="none", mfc="white",
                    color=color)
        if cross.get(T):
            ax.axvline(cross[T], color=color, lw=0.8, ls=":")
    ax.axhline(1.0, color="0.4", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("chain width n (n×n Jacobians)")
    ax.set_ylabel("sequential time / scan time")
    ax.set_title("above 1: the scan won (dotted: the widest n where it did)", fontsize=9)
    ax.grid(True, which="both", alpha=0.25)
    if Ts:
        place_legend(ax)
    n_all = sorted({n for n, _ in grid})
    if n_all:
        T0 = Ts[-1]
        counts = [work_counts(T0, n, 1) for n in n_all]
        bx.plot(n_all, [c["work_ratio"] for c in counts], marker="s", color="0.3",
                label="the scan timed here: about 2n×")
        bx.plot(n_all, [c["work_ratio_min"] for c in counts], marker="^", color="0.3", ls="--",
                label="the least a scan needs: about (n+1)×")
        bx.legend(loc="upper left", fontsize=9)      # the curves rise to the right: that corner stays empty
        bx.set_xscale("log", base=2)
        bx.set_yscale("log")
        bx.set_xlabel("chain width n")
        bx.set_ylabel("scan flops / loop flops")
        bx.set_title(f"the scan's extra arithmetic (counted, T = {T0:,})", fontsize=9)
        bx.grid(True, which="both", alpha=0.25)
    add_footer(fig, rs)
    return fig
