"""Lesson 09's figures.

* :func:`fragment_figure`: one operand of an ``mma.sync`` with each element labelled by the lane that holds
  it (``T0`` .. ``T31``) and coloured by its register (a0, a1, ...), one lane highlighted if asked;
* :func:`tile_hierarchy_figure`: how the tensor-core rung cuts C, zoom by zoom: the grid of block tiles,
  a block tile's warp tiles, a warp tile's mma tiles, and the 4 elements of one mma tile a lane holds;
* :func:`ladder_figure`: GFLOP/s of every CPU rung (live) and every GPU rung (live or recorded), against
  BLAS / cuBLAS and the measured FMA peak, each rung's counted bytes per FMA beside it; :func:`gpu_ladder_figure`
  the GPU panel alone;
* :func:`backprop_products_figure`: the three products of one MLP layer's step, the course's rung against the
  library, per device.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import NullLocator

from ..arguments import Given, OneOf, Optional, Whole, arguments
from ..plots import COLORS, PALETTE, add_footer, new_figure, place_legend, set_takeaway, tint
from ..results import ResultSet
from .fragments import MMA_SHAPES, OPERANDS, fragment_layout, mma_dims, operand_shape

__all__ = ["fragment_figure", "tile_hierarchy_figure", "ladder_figure", "gpu_ladder_figure",
           "backprop_products_figure", "validate_results", "validate_references"]

#: A register's colour (its index in the lane's fragment: a0, a1, ...), by palette name.
_REGISTER_COLOURS = ("blue", "vermillion", "green", "orange", "purple", "sky blue", "yellow", "black")
_OPERAND_NAMES = {"a": "A (M × K, .row)", "b": "B (K × N, .col)", "c": "C and D (M × N)"}


@arguments(shape=OneOf(*MMA_SHAPES), operand=OneOf(*OPERANDS), highlight_lane=Optional(Whole(0, 31)))
def fragment_figure(shape: str = "m16n8k8.tf32", operand: str = "a", highlight_lane: int | None = None) -> Any:
    """The operand's matrix, each element labelled with the lane holding it and coloured by its register.

    With ``highlight_lane`` that lane's elements keep their colours and every other lane's are grey.

    >>> fig = fragment_figure("m16n8k8.tf32", "a", highlight_lane=5)
    >>> len(fig.axes)
    1
    """
    layout = fragment_layout(shape, operand)
    rows, cols = operand_shape(shape, operand)
    regs = layout.shape[1]
    cell_w, cell_h = (0.62, 0.42) if cols <= 8 else (0.5, 0.42)
    fig, (ax,) = new_figure(1, width=max(4.8, 1.6 + cols * cell_w), height=1.9 + rows * cell_h)
    names = [f"{operand}{i}" if operand != "c" else f"c{i}" for i in range(regs)]
    for lane in range(32):
        for i in range(regs):
            r, c = (int(v) for v in layout[lane, i])
            lit = highlight_lane is None or lane == highlight_lane
            colour = _REGISTER_COLOURS[i]
            face = tint(colour, 0.35 if highlight_lane is None else 0.6) if lit else tint("black", 0.08)
            ax.add_patch(Rectangle((c, r), 1, 1, facecolor=face, edgecolor="white", linewidth=1.0))
            ax.text(c + 0.5, r + 0.5, f"T{lane}\n{names[i]}", ha="center", va="center", fontsize=9,
                    color="black" if lit else "0.45", linespacing=0.95)
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_xticks([c + 0.5 for c in range(cols)], [str(c) for c in range(cols)], fontsize=9)
    ax.set_yticks([r + 0.5 for r in range(rows)], [str(r) for r in range(rows)], fontsize=9)
    ax.tick_params(length=0, labeltop=True, labelbottom=False)
    ax.set_xlabel("column", fontsize=10)
    ax.xaxis.set_label_position("top")
    ax.set_ylabel("row", fontsize=10)
    for side in ax.spines.values():
        side.set_visible(False)
    m, n, k = mma_dims(shape)
    who = "" if highlight_lane is None else f": lane T{highlight_lane}'s {regs} registers"
    ax.set_title(f"mma.{shape}, {_OPERAND_NAMES[operand]}{who}", fontsize=10)
    handles = [Patch(facecolor=tint(_REGISTER_COLOURS[i], 0.6), label=names[i]) for i in range(regs)]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(regs, 4), fontsize=9, frameon=False,
               title="colour: the register of its lane that holds the element", title_fontsize=9)
    return fig


def _require_tile_multiple(n: int) -> None:
    from ..errors import BadInputError

    if n % 128:
        raise BadInputError(f"n must be a multiple of the block tile, 128; got {n}")


def validate_results(rs: Any) -> ResultSet:
    """``rs`` if it is a :class:`~course.results.ResultSet` (what the lesson's sweeps return), else a clear error."""
    from ..errors import BadInputError

    if not isinstance(rs, ResultSet):
        raise BadInputError(f"expected a course.results.ResultSet (what the lesson's sweeps return), got "
                            f"{type(rs).__name__}")
    return rs


def validate_references(sets: Any) -> list[ResultSet]:
    """``sets`` as a list of ResultSets (recorded references: ``course.results.load_reference(name)``)."""
    import numpy as np

    from ..errors import BadInputError

    if isinstance(sets, (str, bytes, ResultSet, np.ndarray)) or not isinstance(sets, (list, tuple)):
        raise BadInputError(f"references must be a list of ResultSets (course.results.load_reference(name)), got "
                            f"{type(sets).__name__}")
    sets = list(sets)
    for s in sets:
        validate_results(s)
    return sets


def _box(ax: Any, x: float, y: float, w: float, h: float, colour: str, fill: float = 0.0, lw: float = 1.0) -> None:
    ax.add_patch(Rectangle((x, y), w, h, facecolor=tint(colour, fill) if fill else "none", edgecolor=PALETTE[colour],
                           linewidth=lw))


def _frame(ax: Any, w: float, h: float, title: str) -> None:
    ax.set_xlim(-0.5, w + 0.5)
    ax.set_ylim(h + 0.5, -0.5)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_title(title, fontsize=10)


@arguments(n=Whole(lo=128, hi=8192, hint="the side of C: a multiple of the 128-wide block tile"),
           then=lambda n: _require_tile_multiple(n))
def tile_hierarchy_figure(n: int = 512) -> Any:
    """The tensor-core rung's tiles on one ``n × n`` C, zoom by zoom (sizes from ``GPU_RUNG_SPECS["mma_tf32"]``).

    Panel 1: C cut into block tiles (one block of threads each); 2: one block tile cut into warp tiles;
    3: one warp tile cut into mma tiles (one ``mma.sync`` each per k-step); 4: one mma tile, and the 4
    elements of it lane T0 holds.  The highlighted (orange) tile of each panel is the next panel.

    >>> len(tile_hierarchy_figure().axes)
    4
    """
    from .ladder import GPU_RUNG_SPECS
    s = GPU_RUNG_SPECS["mma_tf32"]
    bm, bn, (wm, wn), (mm, mn, _mk) = s.bm, s.bn, s.warp_tile, s.mma
    n = Whole(bm, 8192, hint=f"C's side: at least one {bm}-row block tile")("n", n, {})
    fig, axes = new_figure(4, width=12.5, height=4.2)
    levels = [(n, n, bm, bn, f"C, {n} × {n}:\n{(n // bm) * (n // bn)} block tiles of {bm} × {bn}"),
              (bm, bn, wm, wn, f"one block tile, {bm} × {bn}:\n{(bm // wm) * (bn // wn)} warps, "
                               f"each {wm} × {wn}"),
              (wm, wn, mm, mn, f"one warp tile, {wm} × {wn}:\n{(wm // mm) * (wn // mn)} mma tiles of "
                               f"{mm} × {mn}")]
    for ax, (h, w, th, tw, title) in zip(axes, levels):
        scale = 16.0 / max(h, w)                       # every panel drawn 16 units across
        for r in range(0, h, th):
            for c in range(0, w, tw):
                _box(ax, c * scale, r * scale, tw * scale, th * scale, "blue", 0.12, 0.8)
        _box(ax, 0, 0, tw * scale, th * scale, "orange", 0.55, 2.0)
        _frame(ax, w * scale, h * scale, title)
    ax = axes[3]
    scale = 16.0 / max(mm, mn)
    layout = fragment_layout("m16n8k8.tf32", "c")
    for r in range(mm):
        for c in range(mn):
            _box(ax, c * scale, r * scale, scale, scale, "blue", 0.12, 0.5)
    for r, c in layout[0]:
        _box(ax, int(c) * scale, int(r) * scale, scale, scale, "vermillion", 0.7, 1.2)
    _frame(ax, mn * scale, mm * scale, f"one mma tile, {mm} × {mn}:\nlane T0 holds the 4 dark cells")
    return fig


# ----------------------------------------------------------------- the ladders (CPU helper)


_RUNG_TICKS = {"loops": "loops (i, j, k)", "reordered": "reordered (i, k, j)", "blocked": "cache blocks",
               "microkernel": "3×4 micro-kernel", "parallel": "micro-kernel, {t} cores", "blas": "NumPy's BLAS"}
#: A GPU bar's colour by the precision it computes in (float32 strict: the GPU's own colour).
_PRECISION_COLOURS = {"float32": COLORS["gpu"], "tf32": PALETTE["orange"], "bfloat16": PALETTE["purple"]}


def _largest(records: list[dict]) -> int | None:
    return max((r["n"] for r in records), default=None)


def _bar_text(ax, i: int, value: float, text: str) -> None:
    """A bar's value and counts at its end, on a white ground (the roof lines pass behind it)."""
    ax.text(value, i, f" {text}", va="center", fontsize=9, bbox={"fc": "w", "ec": "none", "alpha": 0.85, "pad": 0.3})


def _cpu_panel(ax, rs: ResultSet) -> str:
    """The CPU rungs of ``rs`` at its largest n as bars, BLAS and the FMA peak as lines; the takeaway's sentence."""
    recs = [r for r in rs.select(device="cpu") if r.get("gflops")]
    n = _largest(recs)
    if n is None:
        ax.text(0.5, 0.5, "CPU: not measured in this run", ha="center", va="center", fontsize=10,
                transform=ax.transAxes)
        ax.axis("off")
        return ""
    rows = [r for r in recs if r["n"] == n and r["rung"] != "blas"]
    labels = [_RUNG_TICKS.get(r["rung"], r["rung"]).format(t=r.get("threads")) for r in rows]
    vals = [r["gflops"] for r in rows]
    ax.barh(range(len(rows)), vals, color=COLORS["cpu"])
    for i, r in enumerate(rows):
        _bar_text(ax, i, r["gflops"], f"{r['gflops']:.3g}  ·  {r['bytes_per_fma']:.3g} B/FMA into L1")
    ax.set_yticks(range(len(rows)), labels, fontsize=9)
    ax.invert_yaxis()
    styles = ("-", "-.", ":")
    for j, blas in enumerate(sorted(rs.select(device="cpu", rung="blas", n=n), key=lambda r: r.get("threads") or 1)):
        t = blas.get("threads") or 1
        ax.axvline(blas["gflops"], color="0.25", ls=styles[j % 3], lw=1.3,
                   label=f"NumPy's BLAS, {t} thread{'s' * (t > 1)}: {blas['gflops']:.3g}")
        if blas.get("roof_gflops"):
            ax.axvline(blas["roof_gflops"], color=PALETTE["green"], ls=styles[j % 3], lw=1.6,
                       label=f"FMA peak, {t} core{'s' * (t > 1)} (measured): {blas['roof_gflops']:.3g}")
    ax.set_xscale("log")
    ax.xaxis.set_minor_locator(NullLocator())   # no minor ticks: a third faster to draw
    right = max(vals + [line.get_xdata()[0] for line in ax.lines])
    ax.set_xlim(min(vals) / 2, right * 30)
    ax.set_xlabel("GFLOP/s (2·n³ / time), log scale")
    ax.set_title(f"CPU, n = {n:,} {rs.params.get('dtype', 'float32')}: every rung against BLAS\n"
                 "bars: the course's rungs; lines: BLAS and the FMA roof", fontsize=9.5)
    ax.grid(True, axis="x", which="major", alpha=0.25)
    place_legend(ax)
    best = max(rows, key=lambda r: r.get("of_blas") or 0)
    t = best.get("threads") or 1
    return (f"On this CPU the best rung ({_RUNG_TICKS[best['rung']].format(t=t)}) reached {best['of_blas']:.0%} of "
            f"NumPy's BLAS at n = {n:,} ({best['gflops']:.3g} against {best['gflops'] / best['of_blas']:.3g} GFLOP/s "
            f"on {t} thread{'s' * (t > 1)}) and {best['of_roof']:.0%} of the measured FMA peak")


def _gpu_sources(sets: Sequence[ResultSet]) -> list[ResultSet]:
    """The sets with GPU records, one per GPU (the first of each name): live first, then each recorded device."""
    out: dict[str, ResultSet] = {}
    for s in sets:
        if s.select(device="gpu"):
            out.setdefault(s.gpu_name or s.label, s)
    return list(out.values())


def _grid(panels: int, width: float, height: float) -> tuple[Figure, list]:
    """``panels`` axes, two to a row (one row for two or fewer), each ``width`` × ``height`` inches."""
    cols = min(panels, 2)
    rows = -(-panels // cols)
    fig = Figure(figsize=(width * cols, height * rows), layout="constrained")
    axes = [fig.add_subplot(rows, cols, i + 1) for i in range(panels)]
    return fig, axes


def _gpu_title(src: ResultSet) -> str:
    """"GPU: <name> (recorded <date>)" or "(measured live)": each GPU panel says whose it is."""
    when = f"recorded {src.date}" if src.source == "reference" else "measured live"
    return textwrap.fill(f"GPU: {src.gpu_name or 'GPU'} ({when})", 48)


def _gpu_panel(ax, src: ResultSet | None) -> str:
    """The GPU rungs of ``src`` (live, or recorded: hatched), cuBLAS as lines."""
    if src is None:
        ax.set_title("GPU: no GPU here, and no reference\nresults recorded yet", fontsize=10, y=0.45)
        ax.axis("off")
        return ""
    recorded = src.source == "reference"
    recs = [r for r in src.select(device="gpu") if r.get("tflops")]
    n = _largest(recs)
    rows = [r for r in recs if r["n"] == n and r["rung"] != "cublas"]
    bars = ax.barh(range(len(rows)), [r["tflops"] for r in rows], color=[_PRECISION_COLOURS[r["precision"]]
                                                                          for r in rows])
    for b in bars if recorded else ():
        b.set_hatch("//")
        b.set_alpha(0.6)
    for i, r in enumerate(rows):
        counted = f"  ·  {r['bytes_per_fma']:.2g} B/FMA" if r.get("bytes_per_fma") is not None else ""
        _bar_text(ax, i, r["tflops"], f"{r['tflops']:.3g}  ·  {r['of_cublas']:.0%}{counted}")
    ax.set_yticks(range(len(rows)), [r["rung"] for r in rows], fontsize=9)
    ax.invert_yaxis()
    for lib in src.select(device="gpu", rung="cublas", n=n):
        ax.axvline(lib["tflops"], color=_PRECISION_COLOURS[lib["precision"]], lw=1.4, ls="-.",
                   label=f"cuBLAS {lib['precision']}: {lib['tflops']:.3g}")
    ax.set_xscale("log")
    ax.xaxis.set_minor_locator(NullLocator())   # no minor ticks: a third faster to draw
    vals = [r["tflops"] for r in rows] + [line.get_xdata()[0] for line in ax.lines]
    ax.set_xlim(min(vals) / 2, max(vals) * 40)
    ax.set_xlabel("TFLOP/s, log scale  (% of cuBLAS at the same precision)")
    ax.set_title(f"{_gpu_title(src)}\nn = {n:,}; bars: the CUDA C rungs by precision; lines: cuBLAS", fontsize=9.5)
    ax.grid(True, axis="x", which="major", alpha=0.25)
    place_legend(ax)
    best = max(rows, key=lambda r: r["of_cublas"])
    return (f"on the {src.gpu_name or 'GPU'} ({f'recorded {src.date}' if recorded else 'live'}) the best rung, "
            f"{best['rung']}, "
            f"reached {best['of_cublas']:.0%} of cuBLAS {best['precision']} at n = {n:,}")


@arguments(cpu=Optional(Given(validate_results)), gpu=Given(validate_references))
def ladder_figure(cpu: ResultSet | None, gpu: Sequence[ResultSet] = ()) -> Figure:
    """Two panels: the CPU ladder of ``cpu`` (``"gemm_cpu_ladder"``, live) and the GPU ladder of the first
    of ``gpu`` (``"gemm_gpu_ladder"`` sets, live or recorded) that has GPU records; "not recorded yet" if none.

    >>> from course.gemm.timing import cpu_ladder_sweep
    >>> fig = ladder_figure(cpu_ladder_sweep([16], rungs=("reordered",), threads=(1,), repeat=1))
    >>> len(fig.axes)
    2
    """
    cpu = cpu if cpu is not None else ResultSet("gemm_cpu_ladder")
    rows = max(len({r["rung"] for r in cpu.records}), *(len({r["rung"] for r in s.records}) for s in gpu), 3)
    srcs = _gpu_sources(gpu)
    fig, axes = _grid(1 + max(len(srcs), 1), width=6.5, height=1.9 + 0.36 * rows)
    said = [_cpu_panel(axes[0], cpu)] + [_gpu_panel(ax, s) for ax, s in zip(axes[1:], srcs or [None])]
    src = srcs[0] if srcs else None
    refs = [s for s in srcs if s.source == "reference"]
    notes = [n for n in cpu.notes if "skipped" in n]
    noisy = sum(bool(r.get("noisy")) for r in cpu.records)
    if noisy:
        notes.append(f"noisy: {noisy} of {len(cpu.records)} CPU timings (a busy machine or runs that disagree): "
                     "small differences mean nothing")
    extra = "; ".join(notes + ([] if src is not None else
                               ["GPU: run `python -m course report --record-reference` on a GPU machine to record it"]))
    add_footer(fig, cpu if cpu.records else (src if src is not None and not refs else None), refs, extra=extra)
    set_takeaway(fig, "; ".join(s for s in said if s) + "." if any(said) else "Nothing measured yet.")
    return fig


@arguments(rs=Given(validate_results), references=Given(validate_references))
def gpu_ladder_figure(rs: ResultSet, references: Sequence[ResultSet] = ()) -> Figure:
    """The GPU ladder alone, one panel per GPU: ``rs``'s GPU records when it has some, beside every reference that
    has GPU records (each device once)."""
    srcs = _gpu_sources([rs, *references])
    fig, axes = new_figure(max(len(srcs), 1), width=8.5 if len(srcs) < 2 else 6.5 * len(srcs),
                           height=1.9 + 0.36 * GPU_LADDER_ROWS)
    said = "; ".join(x for x in (_gpu_panel(ax, s) for ax, s in zip(axes, srcs or [None])) if x)
    refs = [s for s in srcs if s.source == "reference"]
    add_footer(fig, rs if rs.select(device="gpu") else None, refs, extra="; ".join(rs.notes[:2]))
    set_takeaway(fig, (said[0].upper() + said[1:] + ".") if said else "No GPU here and no GPU ladder recorded yet.")
    return fig


GPU_LADDER_ROWS = 9   # bars a GPU ladder draws (its rungs), for the figure's height

_PRODUCT_TEXT = {"forward": "Y = X @ W", "input_grad": "dX = dY @ W.T", "weight_grad": "dW = X.T @ dY"}


def _products_panel(ax, src: ResultSet | None, device: str) -> str:
    recs = [] if src is None else [r for r in src.select(device=device) if r.get("gflops")]
    if not recs:
        ax.set_title(f"{device.upper()}: " + ("no GPU here, and no reference\nresults recorded yet"
                                              if device == "gpu" else "not measured"), fontsize=10, y=0.45)
        ax.axis("off")
        return ""
    w = max(r["width"] for r in recs)
    rows = [r for r in recs if r["width"] == w]
    recorded = src.source == "reference"
    colours = [("0.45" if r["library"] else COLORS[device]) for r in rows]
    bars = ax.barh(range(len(rows)), [r["gflops"] for r in rows], color=colours)
    for b in bars if recorded else ():
        b.set_hatch("//")
        b.set_alpha(0.6)
    for i, r in enumerate(rows):
        copy = f" (copies {r['transposed']}ᵀ)" if r["transposed"] and not r["library"] else ""
        _bar_text(ax, i, r["gflops"], f"{r['gflops']:.3g}{copy}")
    ax.set_yticks(range(len(rows)), [f"{_PRODUCT_TEXT[r['product']]}: {r['method']}" for r in rows], fontsize=9)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.xaxis.set_minor_locator(NullLocator())   # no minor ticks: a third faster to draw
    ax.set_xlim(min(r["gflops"] for r in rows) / 2, max(r["gflops"] for r in rows) * 12)
    ax.set_xlabel("GFLOP/s, log scale (grey: the library)")
    batch = rows[0]["batch"]
    head = _gpu_title(src) if device == "gpu" else f"CPU ({'recorded ' + src.date if recorded else 'live'})"
    ax.set_title(f"{head}\none {w:,} → {w:,} layer, batch {batch:,}", fontsize=9.5)
    ax.grid(True, axis="x", which="major", alpha=0.25)
    lib = {r["product"]: r["gflops"] for r in rows if r["library"]}
    slow = min(lib, key=lib.get)
    who = src.gpu_name or "GPU" if device == "gpu" else "CPU"
    return (f"{who}: with the library the {slow.replace('_', ' ')} product is the slowest of the three "
            f"({lib[slow]:.3g} GFLOP/s against {max(lib.values()):.3g}) at width {w:,}, batch {batch:,}")


@arguments(rs=Given(validate_results), references=Given(validate_references))
def backprop_products_figure(rs: ResultSet, references: Sequence[ResultSet] = ()) -> Figure:
    """One panel per device: the forward, input-gradient and weight-gradient products of one layer, the course's
    best rung against the library (``"gemm_backprop_products"``); the GPU from ``rs`` and every reference with
    GPU records, one panel per GPU."""
    srcs = _gpu_sources([rs, *references])
    fig, axes = _grid(1 + max(len(srcs), 1), width=6.5, height=3.6)
    said = [_products_panel(axes[0], rs, "cpu")] + [_products_panel(ax, s, "gpu")
                                                     for ax, s in zip(axes[1:], srcs or [None])]
    refs = [s for s in srcs if s is not rs]
    add_footer(fig, rs if rs.records else None, refs, extra="Same FMAs in each product; the course's rungs copy a "
               "transposed operand into row order first, BLAS reads it as it is.")
    set_takeaway(fig, "; ".join(s for s in said if s) + "." if any(said) else "Nothing measured yet.")
    return fig
