"""GPU-Puzzles-style pictures of a kernel: what every thread read and wrote, per barrier phase.

One panel per barrier phase (the accesses between two ``cuda.syncthreads()``); in a panel, one row
per thread (grouped by block) and one column per array element, the arrays side by side (2-D ones
row-major).  A cell is blue where the thread read the element, orange where it wrote it, purple
where it did both; a red cross marks an access out of bounds.

>>> from course.kernels import reference
>>> fig = show("map", reference.relu_map)
>>> len(fig.axes)
1
"""

from __future__ import annotations

import textwrap
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from ..plots import PALETTE, add_footer, new_figure, set_takeaway
from .exercises import exercise
from .simulator import KernelFailed, simulate
from .trace import Trace, who

__all__ = ["show", "draw_trace"]

# the palette's, and a write hatched as well, so the kinds are told apart without their colours
_COLOURS = {"R": PALETTE["blue"], "W": PALETTE["orange"], "RW": PALETTE["purple"]}
_HATCHES = {"R": None, "W": "////", "RW": "xxxx"}


def draw_trace(trace: Trace, title: str = "", max_phases: int = 10) -> Figure:
    """Draw ``trace`` (see the module doc); at most ``max_phases`` panels, the first ones."""
    names = list(trace.shapes)
    offsets, x0 = {}, 0
    for name in names:
        offsets[name] = x0
        x0 += int(np.prod(trace.shapes[name][0])) + 1
    threads = sorted({(a.block, a.thread) for a in trace.accesses} | set(trace.final_phase))
    row = {bt: k for k, bt in enumerate(threads)}
    phases = sorted({a.phase for a in trace.accesses})[:max_phases] or [0]
    width = min(2.0 + len(phases) * (0.6 + 0.11 * x0), 18)
    fig, axes = new_figure(len(phases), width=width, height=1.6 + 0.26 * len(threads))
    cells: dict = {}
    for a in trace.accesses:
        if a.phase in phases:
            shape = trace.shapes[a.array][0]
            flat = int(np.ravel_multi_index(a.index, shape)) if a.in_bounds else int(np.prod(shape))
            key = (a.phase, row[(a.block, a.thread)], offsets[a.array] + flat, a.in_bounds)
            cells[key] = cells.get(key, "") + ("" if a.kind in cells.get(key, "") else a.kind)
    for ax, ph in zip(axes, phases):
        for (p, y, x, ok), kinds in cells.items():
            if p != ph:
                continue
            if not ok:
                ax.plot(x, y, marker="x", color=PALETTE["vermillion"], ms=9, mew=2)
                continue
            kind = "RW" if len(kinds) > 1 else kinds
            ax.add_patch(_square(x, y, kind))
        for name in names:
            n = int(np.prod(trace.shapes[name][0]))
            ax.add_patch(_frame(offsets[name], len(threads), n))
            ax.text(offsets[name] + (n - 1) / 2, -1.0, name, ha="center", va="bottom", fontsize=9)
        ax.set_xlim(-0.8, x0 - 0.2)
        ax.set_ylim(len(threads) - 0.4, -1.6)
        ax.set_xticks([])
        ax.set_yticks(range(len(threads)))
        # the rows are the same threads in every panel: named once, at the left
        ax.set_yticklabels([_label(b, t, trace.ndim) for b, t in threads] if ax is axes[0] else [], fontsize=9)
        ax.tick_params(axis="y", length=0)
        ax.set_title(f"phase {ph}" + (" (before the first barrier)" if ph == 0 and len(phases) > 1 else ""), fontsize=9)
        for s in ax.spines.values():
            s.set_visible(False)
    key = "blue: read, orange hatched: write, purple cross-hatched: both, vermillion x: out of bounds"
    fits = int(width * 72 / (0.55 * 9)) - 2          # characters of 9 pt across the figure: a narrow one wraps
    fig.suptitle("\n".join(textwrap.fill(line, fits) for line in (title, key)), fontsize=9)
    add_footer(fig, extra="Run on numba's CUDA simulator (one Python thread per CUDA thread).", measured=False,
               devices=["cpu"])
    drawn = [a for a in trace.accesses if a.phase in phases]
    oob = sum(not a.in_bounds for a in drawn)
    set_takeaway(fig, f"{len(threads)} thread(s) over {len(phases)} barrier phase(s): "
                      f"{sum(a.kind == 'R' for a in drawn)} reads and {sum(a.kind == 'W' for a in drawn)} writes"
                      + (f"; {oob} of these accesses out of bounds." if oob else "; none out of bounds."))
    return fig


def _square(x: float, y: float, kind: str):
    from matplotlib.patches import Rectangle
    return Rectangle((x - 0.45, y - 0.4), 0.9, 0.8, fc=_COLOURS[kind], ec="w", lw=0.5, hatch=_HATCHES[kind])


def _frame(x0: int, rows: int, n: int):
    from matplotlib.patches import Rectangle
    return Rectangle((x0 - 0.5, -0.5), n, rows, fill=False, ec="0.7", lw=0.8)


def _label(block: tuple, thread: tuple, ndim: int) -> str:
    return who(block, thread, ndim).replace("block ", "b").replace(" thread ", " t").replace(", ", ",")


def show(name: str, kernel: Any = None, seed: int = 1) -> Figure | None:
    """Run exercise ``name``'s kernel (yours, or the course's reference when None) on the simulator and
    draw what each thread read and wrote.  A kernel that fails is drawn up to its failure; a stub that
    raises NotImplementedError draws nothing (it says so).

    >>> show("blelloch") is not None
    True
    """
    ex = exercise(name)
    fn = ex.reference if kernel is None else kernel
    try:
        _res, trace = simulate(fn, ex.blocks, ex.threads, **ex.inputs(seed))
        failed = ""
    except KernelFailed as exc:
        if isinstance(exc.cause, NotImplementedError):
            print("Nothing to draw yet: your kernel still raises NotImplementedError.")
            return None
        trace, failed = exc.trace, f" (stopped: {exc})"
    who = "the course's kernel" if kernel is None else "your kernel"
    return draw_trace(trace, f"{ex.title}: {who}{failed}")
