"""The kernels' figures: GPU-Puzzles-style pictures of what every thread read and wrote, per barrier
phase, and lesson 04's padded tile scan, counted, beside the times each recorded GPU reference holds.

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

from ..arguments import Given, Optional, Whole, arguments
from ..errors import BadInputError, validate_function, validate_text
from ..plots import PALETTE, add_footer, new_figure, set_takeaway
from .exercises import EXERCISES, exercise
from .simulator import KernelFailed, simulate
from .trace import Trace, who
from .warps import scan_padding_rows

__all__ = ["show", "draw_trace", "draw_warps", "scan_padding_report", "MAX_DRAWN_THREADS"]

# the palette's, and a write hatched as well, so the kinds are told apart without their colours
_COLOURS = {"R": PALETTE["blue"], "W": PALETTE["orange"], "RW": PALETTE["purple"]}
_HATCHES = {"R": None, "W": "////", "RW": "xxxx"}


def _validate_trace(trace: Any) -> Trace:
    if not isinstance(trace, Trace):
        raise BadInputError(f"trace must be a Trace (what course.kernels.simulator.simulate returns), got "
                            f"{type(trace).__name__}")
    return trace


def _validate_threads(threads: Any) -> Any:
    """A block's threads: a whole number, or a tuple of one to three of them (x, y, z)."""
    dims = threads if isinstance(threads, tuple) else (threads,)
    if not 1 <= len(dims) <= 3 or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not
                                      1 <= d <= 1024 for d in dims):
        raise BadInputError(f"threads must be a block's threads, a whole number from 1 to 1,024 or a tuple of up "
                            f"to three, e.g. (16, 16); got {threads!r:.60}")
    return threads


def _validate_exercise_name(name: Any) -> str:
    if not isinstance(name, str) or name not in EXERCISES:
        raise BadInputError(f"exercise must be one of {sorted(EXERCISES)} (the name of a kernel exercise), got "
                            f"{name!r:.60}")
    return name


_PADDING_KEYS = ("threads", "items", "plain_wavefronts_per_element", "padded_wavefronts_per_element",
                 "global_sectors_per_element", "blocks_per_sm_plain", "blocks_per_sm_padded", "same_global_sectors")


def _validate_padding_rows(rows: Any) -> list[dict]:
    """A non-empty list of :func:`~course.kernels.warps.scan_padding_rows`' rows."""
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) and all(k in r for k in _PADDING_KEYS)
                                                          for r in rows):
        raise BadInputError("rows must be a non-empty list of scan_padding_rows() rows (dicts with "
                            f"{', '.join(_PADDING_KEYS)}); got {rows!r:.80}")
    return rows


@arguments(trace=Given(_validate_trace), title=Given(validate_text, what="title"),
           max_phases=Whole(lo=1, hi=100, hint="panels to draw, the first phases"))
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


@arguments(name=Given(_validate_exercise_name), kernel=Optional(Given(validate_function, what="kernel")),
           seed=Whole(lo=0, hi=2**32 - 1, hint="the seed of the exercise's inputs"))
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
    threads = int(np.prod(ex.threads if isinstance(ex.threads, tuple) else (ex.threads,)))
    if threads > MAX_DRAWN_THREADS:      # a row per thread would be metres tall: draw which warp read what
        return draw_warps(trace, ex.threads, f"{ex.title}: {who}{failed}")
    return draw_trace(trace, f"{ex.title}: {who}{failed}")


#: Launches with more threads per block than this are drawn warp by warp (:func:`draw_warps`).
MAX_DRAWN_THREADS = 64


@arguments(trace=Given(_validate_trace), threads=Given(_validate_threads), title=Given(validate_text, what="title"))
def draw_warps(trace: Trace, threads: Any, title: str = "") -> Figure:
    """For each 2-D array the kernel read: every element coloured by the warp whose lane read it, and the
    number of 32-byte sectors each warp's reads of that array touched.  A coalesced warp covers a
    horizontal band of a row-major array (a few sectors), a strided one a vertical band (a sector a lane)."""
    from matplotlib.colors import ListedColormap

    from .counts import SECTOR_BYTES, WARP
    shape = tuple(threads) + (1,) * (3 - len(threads)) if isinstance(threads, tuple) else (threads, 1, 1)
    names = [n for n, (shp, space) in trace.shapes.items() if len(shp) == 2 and space == "global"
             and any(a.array == n and a.kind == "R" for a in trace.accesses)]
    fig, axes = new_figure(max(len(names), 1), width=4.5 * max(len(names), 1) + 1, height=5.2)
    colours = ListedColormap([PALETTE[k] for k in ("blue", "orange", "green", "vermillion", "sky blue", "purple",
                                                   "yellow", "black")])
    said = []
    for ax, name in zip(axes, names):
        shp, itemsize = trace.shapes[name][0], 4          # the exercises' arrays are float32
        grid = np.full(shp, np.nan)
        sectors: dict[int, set] = {}
        for a in trace.accesses:
            if a.array != name or a.kind != "R" or not a.in_bounds:
                continue
            t = a.thread
            warp = (t[0] + shape[0] * (t[1] + shape[1] * t[2])) // WARP
            grid[a.index] = warp
            flat = int(np.ravel_multi_index(a.index, shp))
            sectors.setdefault(warp, set()).add(flat * itemsize // SECTOR_BYTES)
        ax.imshow(grid % len(colours.colors), cmap=colours, vmin=0, vmax=len(colours.colors) - 1)
        for (r, c), w in np.ndenumerate(grid):
            if not np.isnan(w):
                ax.text(c, r, f"{int(w)}", ha="center", va="center", fontsize=9,
                        color="w" if int(w) % len(colours.colors) in (3, 7) else "k")
        per = sorted(len(v) for v in sectors.values())
        ax.set_title(f"{name}: warp of each element read\n{per[-1] if per else 0} sectors per warp at most",
                     fontsize=9)
        ax.set_xlabel("column (neighbours in memory)")
        ax.set_ylabel("row")
        said.append(f"{name}: each warp's reads touched at most {per[-1] if per else 0} sectors of 32 bytes")
    fig.suptitle(textwrap.fill(title, 90), fontsize=9)
    add_footer(fig, extra="Run on numba's CUDA simulator; a warp is 32 threads of consecutive threadIdx.x.",
               measured=False, devices=["cpu"])
    set_takeaway(fig, "; ".join(said) + "." if said else "No 2-D array was read.")
    return fig


@arguments(rows=Optional(Given(_validate_padding_rows)))
def scan_padding_report(rows: list[dict] | None = None) -> str:
    """:func:`~course.kernels.warps.scan_padding_rows` beside the reference times of lesson 04's scan
    (scan-then-add, the whole 67M-element scan, medians) recorded on each GPU: what the padding saves in counts,
    and what it did to the time there.

    The sentences are printed from the numbers, each device's under its name; where no reference is stored,
    only the counts are shown.
    """
    from ..results import load_reference

    rows = scan_padding_rows() if rows is None else rows
    refs = []                       # (label, {(threads, items, padded): median_s}) per recorded GPU
    for rs in load_reference("scan_kernel_variants"):
        times = {(r["threads"], r["items"], bool(r["conflict_free"])): r["median_s"]
                 for r in rs.select(strategy="scan-then-add")}
        if times:
            refs.append((rs.gpu_name or "a GPU", rs.date, times))
    lines = [f"{'tile':>8} {'wavefronts/element':>19} {'saved':>6} {'sectors/elem':>12} {'blocks/SM':>10}",
             f"{'':>8} {'plain -> padded':>19}"]
    for r in rows:
        saved = r["plain_wavefronts_per_element"] - r["padded_wavefronts_per_element"]
        lines.append(f"{r['threads']:>5}x{r['items']:<2} {r['plain_wavefronts_per_element']:>8.2f} -> "
                     f"{r['padded_wavefronts_per_element']:<8.2f} {saved:>6.2f} "
                     f"{r['global_sectors_per_element']:>12.2f} "
                     f"{r['blocks_per_sm_plain']:>4} -> {r['blocks_per_sm_padded']:<3}")
    small = min(rows, key=lambda r: r["plain_wavefronts_per_element"] - r["padded_wavefronts_per_element"])
    large = max(rows, key=lambda r: r["plain_wavefronts_per_element"] - r["padded_wavefronts_per_element"])
    ds = small["plain_wavefronts_per_element"] - small["padded_wavefronts_per_element"]
    dl = large["plain_wavefronts_per_element"] - large["padded_wavefronts_per_element"]
    unchanged = all(r["same_global_sectors"] and r["blocks_per_sm_plain"] == r["blocks_per_sm_padded"] for r in rows)
    lines += ["", f"Padding saves {ds:.2f} shared-memory wavefronts per element at "
              f"{small['threads']}x{small['items']} and "
              f"{dl:.2f} at {large['threads']}x{large['items']} (each thread's run of items "
              f"consecutive words is an items-way conflict without it).",
              "It costs an index computation (i + i // 32: a shift and an add) on every shared access of the padded "
              "kernel; " + ("it changes no global sector and no block count per SM (32 registers a thread assumed)."
                            if unchanged else "it also changes the global sectors or the blocks per SM above."),
              "So where the saving is small, padding has little to win and its extra instructions can lose; the "
              "counts do not say how much time either side is: that is what the recorded times below measure."
              if refs else "No GPU has recorded the scan's times yet: the counts cannot say how much time either "
                           "side is."]
    for gpu, date, times in refs:
        lines += ["", f"Recorded on {gpu} ({date}), scan-then-add, medians:",
                  f"{'tile':>8} {'plain':>10} {'padded':>10} {'padded/plain':>13}"]
        ratios = {}
        for r in rows:
            t, i = r["threads"], r["items"]
            plain, padded = times.get((t, i, False)), times.get((t, i, True))
            if plain and padded:
                ratios[f"{t}x{i}"] = padded / plain
            lines.append(f"{t:>5}x{i:<2} " + (f"{plain * 1e3:>8.3f}ms {padded * 1e3:>8.3f}ms {padded / plain:>13.2f}"
                                              if plain and padded else f"{'not recorded':>34}"))
        if ratios and max(ratios.values()) > 1.2:
            worst = max(ratios, key=ratios.get)
            lines.append(f"On {gpu}, at {worst} the padded kernel took {ratios[worst]:.2f}x the plain one's time, "
                         "more than these counts account for: an open question for a profiler (Nsight Compute), "
                         "not a guess.")
    return "\n".join(lines)
