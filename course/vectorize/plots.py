"""Lesson 02's pictures: Flynn's taxonomy, lanes at work, the ladder, bandwidth and GFLOP/s.

Every figure that shows a measurement names the device it came from (a footer),
and GPU results recorded elsewhere are drawn hatched and labelled as such.

>>> fig = flynn_figure()
>>> [t.get_text() for t in fig.axes[0].texts if t.get_text() in ("SISD", "SIMD", "MISD", "MIMD")]
['SISD', 'SIMD', 'MISD', 'MIMD']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Rectangle

from ..arguments import Given, arguments
from ..cpu import cpu_info
from ..devices import gpu_info
from ..errors import BadInputError, whole_number
from ..plots import COLORS, PALETTE, add_footer, mark_noisy, new_figure, noisy_flags, place_legend, set_takeaway, tint
from ..results import ResultSet, validate_references, validate_results
from .rungs import RUNG_INFO, lane_trace, numpy_elementwise

__all__ = ["flynn_figure", "lanes_figure", "ladder_figure", "bandwidth_figure", "matmul_figure",
           "lane_sweep_figure", "bandwidth_sweep_figure", "where_things_sit"]

_CELLS = {  # name: (column, row, instruction streams, data streams, meaning)
    "SISD": (0, 1, 1, 1, "single instruction, single data"),
    "SIMD": (1, 1, 1, 4, "single instruction, multiple data"),
    "MISD": (0, 0, 3, 1, "multiple instruction, single data"),
    "MIMD": (1, 0, 3, 3, "multiple instruction, multiple data"),
}


def where_things_sit() -> dict[str, list[str]]:
    """For each of Flynn's classes, the hardware of this machine (and any GPU) that belongs there."""
    c = cpu_info()
    widest = next((e for e in ("AVX512F", "AVX2", "AVX", "SSE2", "SVE", "ASIMD", "NEON", "VSX", "VX", "LSX")
                   if e in c["simd_extensions"]), None)  # the widest register, named as the CPU reports it
    simd = f"widest: {widest}, {c['simd_width_bits']}-bit" if widest else "its vector unit"
    gpus = gpu_info()
    gname = gpus[0]["name"] if gpus else "a GPU"
    sms = f"{gpus[0]['multiprocessors']} SMs" if gpus else "dozens of SMs"
    return {
        "SISD": ["one CPU core running a Python loop:", "one value per step (rung 'loop')"],
        "SIMD": [f"CPU SIMD unit ({simd}):", f"{c['float32_lanes'] or '?'} float32 lanes per instruction",
                 f"GPU warp on {gname}: 32 threads", "in lockstep (SIMT)"],
        "MISD": ["rare in practice: e.g. redundant", "flight computers checking one input"],
        "MIMD": [f"the CPU's {c['logical_cores']} cores (rung 'threads'),",
                 f"each with its own SIMD unit; {gname}:", f"{sms} running different warps"],
    }


def _box(ax, x, y, w, h, text, color, fs=9.0):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.005,rounding_size=0.01",
                                fc=color, ec="0.3", lw=0.8))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fs)


def _flynn_classes(highlight: Any) -> set[str]:
    """``highlight`` as a set of Flynn classes (one name, or several)."""
    if isinstance(highlight, str):
        hl = {highlight}
    elif isinstance(highlight, (list, tuple, set, frozenset)) and all(isinstance(h, str) for h in highlight):
        hl = set(highlight)
    else:
        raise BadInputError(f"highlight must name Flynn classes {tuple(_CELLS)} (one, or a list), got "
                            f"{highlight!r:.80}")
    bad = hl - set(_CELLS)
    if bad:
        raise BadInputError(f"highlight must name Flynn classes {tuple(_CELLS)}, got {sorted(bad)}")
    return hl


def _bandwidth_result(result: Any) -> dict:
    """What :func:`course.vectorize.relu_bandwidth` returns: a dict with n, dtype, rounds and the GB/s."""
    if not isinstance(result, dict) or not {"n", "dtype", "rounds", "copy_gb_per_s"} <= result.keys():
        raise BadInputError(f"result must be what course.vectorize.relu_bandwidth returns (a dict with n, dtype, "
                            f"rounds and copy_gb_per_s), got {type(result).__name__} {result!r:.60}")
    return result


_RS, _REFS = Given(validate_results), Given(validate_references)


@arguments(highlight=Given(_flynn_classes))
def flynn_figure(highlight: str | Sequence[str] = ()) -> Figure:
    """Flynn's four classes as a 2×2 grid, each with a small diagram and this machine's hardware.

    ``highlight`` names class(es) to emphasise (e.g. the one the current rung belongs to).
    """
    hl = highlight
    fig, (ax,) = new_figure(1, width=9.5, height=6.2)
    ax.set_xlim(0, 2)
    ax.set_ylim(0, 2.08)
    ax.axis("off")
    sits = where_things_sit()
    for name, (col, row, n_i, n_d, meaning) in _CELLS.items():
        x0, y0 = col, row
        ax.add_patch(Rectangle((x0 + 0.01, y0 + 0.01), 0.98, 0.98, fc=tint("orange", 0.15) if name in hl else "white",
                               ec="0.2", lw=2 if name in hl else 0.8))
        ax.text(x0 + 0.04, y0 + 0.93, name, fontsize=15, weight="bold", va="top")
        ax.text(x0 + 0.04, y0 + 0.80, meaning, fontsize=9, va="top", color="0.3")
        # diagram: instruction streams -> processing units -> data
        ys_i = np.linspace(y0 + 0.66, y0 + 0.40, n_i) if n_i > 1 else [y0 + 0.53]
        ys_pu = np.linspace(y0 + 0.70, y0 + 0.36, max(n_i, n_d)) if max(n_i, n_d) > 1 else [y0 + 0.53]
        ys_d = np.linspace(y0 + 0.70, y0 + 0.36, n_d) if n_d > 1 else [y0 + 0.53]
        for k, yi in enumerate(ys_i):
            _box(ax, x0 + 0.05, yi - 0.035, 0.17, 0.07, f"instr. {k + 1}" if n_i > 1 else "instr.",
                 tint("sky blue", 0.3))
        for k, yp in enumerate(ys_pu):
            _box(ax, x0 + 0.38, yp - 0.03, 0.12, 0.06, "PU",
                 tint("vermillion" if name != "SIMD" else "orange", 0.25))
            src = ys_i[0] if n_i == 1 else ys_i[min(k, n_i - 1)]
            ax.annotate("", (x0 + 0.38, yp), (x0 + 0.22, src), arrowprops={"arrowstyle": "->", "lw": 0.7})
            dst = ys_d[0] if n_d == 1 else ys_d[min(k, n_d - 1)]
            ax.annotate("", (x0 + 0.66, dst), (x0 + 0.50, yp), arrowprops={"arrowstyle": "<->", "lw": 0.7})
        for k, yd in enumerate(ys_d):
            _box(ax, x0 + 0.66, yd - 0.03, 0.12, 0.06, f"x[{k}]" if n_d > 1 else "x", tint("green", 0.2))
        ax.text(x0 + 0.04, y0 + 0.28, "\n".join(sits[name]), fontsize=9, va="top", color="0.1")
    ax.text(0.5, 2.05, "one data stream", ha="center", fontsize=9, color="0.35")
    ax.text(1.5, 2.05, "many data streams", ha="center", fontsize=9, color="0.35")
    ax.text(-0.02, 1.5, "one instruction stream", rotation=90, va="center", ha="right", fontsize=9, color="0.35")
    ax.text(-0.02, 0.5, "many instruction streams", rotation=90, va="center", ha="right", fontsize=9,
            color="0.35")
    ax.set_title("Flynn's taxonomy (1966), and where this machine's hardware sits (PU = processing unit)",
                 fontsize=10)
    add_footer(fig, measured=False)
    set_takeaway(fig, "On this machine, SIMD: " + " ".join(sits["SIMD"]) + "; MIMD: " + " ".join(sits["MIMD"]))
    return fig


def lanes_figure(n: int = 24, lanes: int = 8, step: int = 0, op: str = "relu", seed: int = 1) -> Figure:
    """``n`` inputs and outputs as boxes; step ``step`` works on ``lanes`` of them at once.

    Steps before ``step`` are done (outputs filled in), the current one is highlighted,
    later ones wait.  ``step`` beyond the last step shows everything done.
    """
    n = whole_number("n", n, hi=64, hint="the lanes picture draws 1 to 64 elements")
    step = whole_number("step", step, lo=0, hint="the step to highlight, 0 for the first")
    trace = lane_trace(n, lanes)  # (start, stop) of each step
    steps = len(trace)
    step = int(min(max(step, 0), steps))
    x = np.round(np.random.default_rng(seed).standard_normal(n) * 2, 1).astype(np.float32)
    y = numpy_elementwise(op, x)
    lo, hi = trace[step] if step < steps else (n, n)
    fig, (ax,) = new_figure(1, width=min(1.0 + 0.42 * n, 13.5), height=2.6)
    for i in range(n):
        current = lo <= i < hi and step < steps
        done = i < lo
        ax.add_patch(Rectangle((i, 1.2), 0.92, 0.8, fc=tint("orange", 0.25) if current else "#eeeeee", ec="0.4"))
        ax.text(i + 0.46, 1.6, f"{x[i]:g}", ha="center", va="center", fontsize=9)
        fc = tint("green", 0.2) if done else (tint("orange", 0.5) if current else "white")
        ax.add_patch(Rectangle((i, 0.0), 0.92, 0.8, fc=fc, ec="0.4"))
        if done or current:
            ax.text(i + 0.46, 0.4, f"{y[i]:.2g}", ha="center", va="center", fontsize=9)
    if step < steps:
        ax.add_patch(Rectangle((lo - 0.06, -0.1), hi - lo + 0.04, 2.2, fill=False, ec=COLORS["gpu"], lw=2))
        ax.annotate(f"one step: {hi - lo} lane{'s' if hi - lo > 1 else ''}", ((lo + hi) / 2, 1.05),
                    ha="center", va="center", fontsize=9, color=COLORS["gpu"])
    ax.text(-0.3, 1.6, "x", ha="right", va="center", fontsize=10)
    ax.text(-0.3, 0.4, f"{op}(x)", ha="right", va="center", fontsize=10)
    ax.set_xlim(-1.6, n + 0.2)
    ax.set_ylim(-0.3, 2.5)
    ax.axis("off")
    status = f"step {step + 1} of {steps}" if step < steps else f"done in {steps} steps"
    c = cpu_info()
    ax.set_title(f"{status}: {lanes} element{'s' if lanes > 1 else ''} per step, so {n} elements take "
                 f"ceil({n}/{lanes}) = {steps} steps (a loop takes {n}).  This CPU's SIMD: "
                 f"{c['float32_lanes'] or '?'} float32 lanes; a GPU warp: 32.", fontsize=9)
    set_takeaway(fig, f"With {lanes} lane{'s' if lanes > 1 else ''} per step, {n} elements take {steps} steps "
                      f"instead of the loop's {n} ({status}).")
    return fig


def _reference_gpu_rows(references: Sequence[ResultSet], op: str | None, dtype: str | None) -> list[dict]:
    rows = []
    for ref in references:
        for r in ref.select(device="gpu"):
            if (op is None or r.get("op") in (op, "copy")) and (dtype is None or r.get("dtype") == dtype):
                rows.append(r | {"_ref": ref.label})
    return rows


def _pct(frac: float) -> str:
    """A fraction as a percentage with enough digits to be non-zero (0.05 % rather than 0 %)."""
    return f"{frac:.0%}" if frac >= 0.1 else f"{frac * 100:.2g} %"


_MM_LABELS = {"loop": "triple loop", "dots": "one dot per output", "blas": "numpy → BLAS",
              "gpu": "CuPy → cuBLAS", "torch": "PyTorch"}


def _mm_label(r: dict) -> str:
    """numpy has no half-precision BLAS: its float16 product is a generic loop, and says so."""
    if r["rung"] == "blas" and r.get("dtype") == "float16":
        return "numpy (no float16 BLAS: a generic loop)"
    return _MM_LABELS.get(r["rung"], r["rung"])


@arguments(rs=_RS, references=_REFS)
def ladder_figure(rs: ResultSet, references: Sequence[ResultSet] = ()) -> Figure:
    """Two panels: elements per second of each rung (speedup over the loop printed), and
    effective bandwidth with the copy limit drawn, for the ladder in ``rs``."""
    op, dtype = rs.params.get("op"), rs.params.get("dtype")
    live = [r for r in rs.records if r.get("rung") != "copy"]
    refs = [r for r in _reference_gpu_rows(references, op, dtype) if r.get("rung") != "copy"]
    rows = live + ([] if rs.select(device="gpu") else refs)
    fig, (ax1, ax2) = new_figure(2, width=11, height=1.2 + 0.48 * max(len(rows), 3))
    n = rs.params.get("n")
    labels = [f"{r['label']} [{r['flynn']}]" + ((f"\n(recorded, n = {r['n']:,})" if r.get("n") not in (None, n)
                                                 else " (recorded)") if "_ref" in r else "") for r in rows]
    ypos = np.arange(len(rows))
    for ax, key in ((ax1, "elements_per_s"), (ax2, "gb_per_s")):
        vals = np.array([r.get(key) or np.nan for r in rows], dtype=float)
        colors = [COLORS[r["device"]] for r in rows]
        bars = ax.barh(ypos, vals, color=colors)
        for b, r in zip(bars, rows):
            if "_ref" in r:
                b.set_hatch("//")
                b.set_alpha(0.6)
        ax.set_xscale("log")
        ax.set_yticks(ypos, labels if ax is ax1 else [""] * len(rows), fontsize=9)
        ax.invert_yaxis()
        ax.grid(True, axis="x", which="both", alpha=0.25)
        for i, (v, r) in enumerate(zip(vals, rows)):
            if not np.isfinite(v):
                continue
            if key == "elements_per_s":
                sp = r.get("speedup_vs_loop")
                txt = f" {v:.3g}/s" + (f"  ×{sp:,.0f}" if sp and r["rung"] != "loop" else "")
            else:
                frac = r.get("copy_fraction")
                txt = f" {v:.3g} GB/s" + (f"\n {_pct(frac)} of copy" if frac else "")   # short lines: on the canvas
            # on a white ground: the copy limits' lines and the grid pass behind the numbers, not through them
            ax.text(v, i, txt, va="center", fontsize=9, bbox={"fc": "w", "ec": "none", "alpha": 0.85, "pad": 0.3})
        ax.margins(x=0.35)
    ax1.set_xlabel("elements per second (log)\n×N = speedup over the Python loop")
    ax2.set_xlabel("effective bandwidth, GB/s (log)\nread x + write y")
    # the copy limits named in a legend (labels beside the lines wrote over the bars and over each other);
    # solid when measured in this run, dashed when recorded elsewhere, as every curve of the course
    for c in [r for r in rs.records if r.get("rung") == "copy"] + [
            r for r in _reference_gpu_rows(references, None, dtype) if r.get("rung") == "copy"]:
        ax2.axvline(c["gb_per_s"], color=COLORS[c["device"]], ls="--" if "_ref" in c else "-", lw=1.4,
                    label=f"copy limit, {c['device'].upper()}: {c['gb_per_s']:.3g} GB/s"
                          + (" (recorded)" if "_ref" in c else ""))
    place_legend(ax2)
    other_n = sorted({r["n"] for r in rows if "_ref" in r and r.get("n") not in (None, n)})
    ax1.set_title(f"{op} on {n:,} {dtype} values:\nevery rung checked equal to numpy" + (
        f"\n(hatched GPU bars: recorded at n = {', '.join(f'{k:,}' for k in other_n)})" if other_n else ""),
        fontsize=9.5)
    ax2.set_title("how close each rung gets to the memory's limit", fontsize=9.5)
    extra = ""
    if not rs.select(device="gpu") and not refs:
        extra = ("GPU rungs: no GPU here and no reference results recorded yet "
                 "(run `python -m course report --record-reference` on a GPU machine).")
    elif not rs.select(device="gpu"):
        extra = "Hatched bars: GPU rungs recorded elsewhere, not measured here."
    add_footer(fig, rs, references if refs and not rs.select(device="gpu") else (), extra=extra)
    return fig


@arguments(rs=_RS)
def lane_sweep_figure(rs: ResultSet) -> Figure:
    """Time per element of the ``lanes`` rung against the lane width W, next to the loop and numpy."""
    lanes = rs.select(rung="lanes")
    if not lanes:
        raise BadInputError("this result set has no 'lanes' records; run vectorize_widgets.lane_sweep first")
    fig, (ax,) = new_figure(1, width=7.5, height=3.8)
    w = np.array([r["lanes"] for r in lanes], dtype=float)
    t = np.array([r["s_per_element"] for r in lanes]) * 1e9
    ax.loglog(w, t, "o-", color=COLORS["cpu"], label="W elements per numpy call")
    mark_noisy(ax, w, t, noisy_flags(lanes), COLORS["cpu"])
    ax.loglog(w, t[0] * w[0] / w, ":", color="0.4", label="1/W: each step costs the same")
    for rung, ls in (("loop", "--"), ("numpy", "-.")):
        rec = rs.select(rung=rung)
        if rec:
            ax.axhline(rec[0]["s_per_element"] * 1e9, ls=ls, color="0.3", lw=1,
                       label=f"{RUNG_INFO[rung][0]} ({rec[0]['s_per_element'] * 1e9:.3g} ns)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("lane width W (elements per step)")
    ax.set_ylabel("time per element (ns, log)")
    ax.set_title("Wider lanes, fewer steps: the prediction (dotted) is a time falling like 1/W", fontsize=9.5)
    ax.grid(True, which="both", alpha=0.25)
    place_legend(ax)
    add_footer(fig, rs)
    return fig


@arguments(result=Given(_bandwidth_result))
def bandwidth_figure(result: dict) -> Figure:
    """Bars from :func:`course.vectorize.relu_bandwidth`: copy, ReLU with ``out=``, ReLU
    allocating a new array, threads; each as GB/s and as a fraction of the copy limit."""
    names = {"copy": "copy (the limit)", "out": "ReLU, out= (no allocation)",
             "new": "ReLU, new array per call", "threads": "ReLU, threads, out=",
             "vector": "ReLU, 16-byte loads, out="}
    keys = [k for k in names if f"{k}_gb_per_s" in result]
    vals = [result[f"{k}_gb_per_s"] for k in keys]
    fig, (ax,) = new_figure(1, width=8, height=0.8 + 0.45 * len(keys))
    dev = result.get("device", "cpu")
    ax.barh(range(len(keys)), vals, color=[("0.6" if k == "copy" else COLORS[dev]) for k in keys])
    ax.set_yticks(range(len(keys)), [names[k] for k in keys], fontsize=9)
    ax.invert_yaxis()
    for i, k in enumerate(keys):
        frac = result.get(f"{k}_fraction")
        ax.text(vals[i], i, f" {vals[i]:.1f} GB/s" + (f" = {frac:.0%} of copy" if frac else ""),
                va="center", fontsize=9)
    ax.margins(x=0.3)
    ax.set_xlabel("GB/s (bytes read + bytes written per second)")
    ax.set_title(f"ReLU on {result['n']:,} {result['dtype']} values on the {dev.upper()} "
                 f"(median of {result['rounds']} rounds)", fontsize=9.5)
    add_footer(fig, devices=[dev])
    return fig


@arguments(rs=_RS, references=_REFS)
def matmul_figure(rs: ResultSet, references: Sequence[ResultSet] = ()) -> Figure:
    """GFLOP/s of each matmul rung and dtype (log scale), value printed on each bar."""
    rows = list(rs.records)
    n = rs.params.get("n")
    recorded = [r for ref in references for r in ref.select(device="gpu")]
    if recorded and not rs.select(device="gpu"):      # the recorded size nearest this one, named on its bars
        near = min({r["n"] for r in recorded}, key=lambda k: (abs(np.log2(k / n)) if n else 0, k))
        rows += [r | {"_ref": True} for r in recorded if r.get("n") == near]
    fig, (ax,) = new_figure(1, width=8.5, height=1.0 + 0.38 * max(len(rows), 2))
    labels = [f"{_mm_label(r)} ({r['device'].upper()}), {r['dtype']}"
              + ((" (recorded)" if r.get("n") == n else f" (recorded at n = {r['n']})") if r.get("_ref") else "")
              for r in rows]
    vals = [r["gflops"] for r in rows]
    bars = ax.barh(range(len(rows)), vals, color=[COLORS[r["device"]] for r in rows])
    for b, r in zip(bars, rows):
        if r.get("_ref"):
            b.set_hatch("//")
            b.set_alpha(0.6)
    ax.set_yticks(range(len(rows)), labels, fontsize=9)
    ax.invert_yaxis()
    ax.set_xscale("log")
    for i, v in enumerate(vals):
        ax.text(v, i, f" {v:.3g}", va="center", fontsize=9)
    ax.margins(x=0.2)
    ax.set_xlabel("GFLOP/s (2n³ operations / time), log scale")
    ax.set_title(f"{rs.params.get('n')}×{rs.params.get('n')} matrix product at each rung", fontsize=9.5)
    extra = "; ".join(n for n in rs.notes if "skipped" in n)
    if not rs.select(device="gpu") and not any(r.get("_ref") for r in rows):
        extra = (extra + "; " if extra else "") + "GPU: no GPU here and no reference results recorded yet"
    add_footer(fig, rs, references if any(r.get("_ref") for r in rows) else (), extra=extra)
    return fig


#: Name, colour and marker of each kind of pass.  Line style keeps the course's one meaning: solid measured
#: here, dashed recorded elsewhere (it once told the kinds apart, so live CPU curves were drawn dashed).
_KIND_STYLE = {"copy": ("copy (the limit)", "0.45", "o"), "out": ("ReLU, out=", PALETTE["green"], "s"),
               "new": ("ReLU, new array", PALETTE["orange"], "^"),
               "threads": ("ReLU, threads, out=", PALETTE["purple"], "D"),
               "vector": ("ReLU, 16-byte loads, out=", PALETTE["sky blue"], "v")}


@arguments(rs=_RS, references=_REFS)
def bandwidth_sweep_figure(rs: ResultSet, references: Sequence[ResultSet] = ()) -> Figure:
    """GB/s against size for copy, ReLU ``out=``, new array and threads (left), and each as a
    fraction of the copy measured at the same size (right).  Reference GPU runs drawn faded,
    labelled with where they were recorded."""
    fig, (ax1, ax2) = new_figure(2, width=11, height=4.0)
    sources = [(rs, "")] + ([] if rs.select(device="gpu") else [(r, r.label) for r in references])
    for src, label in sources:
        for dev in ("cpu", "gpu"):
            if label and dev == "cpu":
                continue  # a reference's CPU is another machine's: only its GPU curves are shown
            for kind, (name, color, marker) in _KIND_STYLE.items():
                recs = sorted(src.select(device=dev, kind=kind), key=lambda r: r["n"])
                if not recs:
                    continue
                n = np.array([r["n"] for r in recs], dtype=float)
                kw = {"color": color, "ls": "--" if label else "-", "marker": marker, "ms": 4,
                      "alpha": 0.5 if label else 1.0,
                      "label": f"{dev.upper()}: {name}" + (f" ({label})" if label else "")}
                ax1.plot(n, [r["gb_per_s"] for r in recs], **kw)
                if kind != "copy":
                    ax2.plot(n, [r["copy_fraction"] for r in recs], **kw)
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("elements (float32)")
        ax.grid(True, which="both", alpha=0.25)
        if ax.lines:
            place_legend(ax)
    ax1.set_yscale("log")
    ax1.set_ylabel("GB/s (read + write)")
    ax1.set_title("ReLU and copy: effective bandwidth against size", fontsize=9.5)
    ax2.axhline(1.0, color="0.45", lw=1)
    ax2.axhline(0.85, color="0.45", lw=1, ls=":")
    ax2.text(ax2.get_xlim()[0], 0.86, " target 85 %", fontsize=9, color="0.35", va="bottom")
    ax2.set_ylim(0, max(1.15, ax2.get_ylim()[1]))
    ax2.set_ylabel("fraction of the copy")
    ax2.set_title("how close to the copy limit (copy at the same size = 1)", fontsize=9.5)
    has_ref = len(sources) > 1
    extra = "" if rs.select(device="gpu") or has_ref else (
        "GPU: no GPU here and no reference results recorded yet "
        "(`python -m course report --record-reference` on a GPU machine).")
    add_footer(fig, rs, [s for s, _ in sources[1:]], extra=extra)
    return fig
