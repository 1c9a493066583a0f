"""Figures of lesson 03.  Each names the device it was measured on (a footer); reference
GPU results, when shipped, are drawn dashed and labelled "recorded on <GPU>, <date>".

>>> from course.throughput.ops import throughput_sweep
>>> fig = sweep_plot(throughput_sweep("add", [64, 256], repeat=2))
>>> fig.axes[0].get_title().startswith("add")
True
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from ..arguments import Given, Optional, Real, Whole, arguments
from ..errors import BadInputError
from ..plots import (
    COLORS,
    PALETTE,
    add_footer,
    figure_legend,
    figure_takeaway,
    label_points,
    mark_noisy,
    new_figure,
    noisy_flags,
    place_legend,
    power_text,
    set_takeaway,
    source_tag,
    sweep_figure,
)
from ..results import ResultSet
from ..results import validate_references as _references
from ..results import validate_results as _results
from .ops import find_crossover, get_op, validate_field, validate_op
from .roofline import dtype_name, peaks_of, ridge_point

_LIVE, _REFS = Optional(Given(_results)), Given(_references)


def _rates(rates: Any) -> dict:
    """A dict of label -> a positive rate (bytes/s, FLOP/s): the lines a figure draws beside its curves."""
    if not isinstance(rates, dict) or not all(isinstance(k, str) and isinstance(v, (int, float, np.number))
                                              and not isinstance(v, bool) and np.isfinite(v) and v > 0
                                              for k, v in rates.items()):
        raise BadInputError(f"expected a dict of label -> a positive rate, e.g. {{'cpu': 2e10}}, got {rates!r:.80}")
    return rates


def _point(record: Any) -> dict:
    """One roofline point record (what roofline_point returns): a dict with its intensity and rate."""
    if not isinstance(record, dict) or not {"intensity", "flops_per_s"} <= record.keys():
        raise BadInputError(f"highlight must be a point record from roofline_point (with 'intensity' and "
                            f"'flops_per_s'), or None, got {record!r:.80}")
    return record

__all__ = ["sweep_plot", "memory_latency_figure", "latency_figure", "async_figure", "batch_figure", "fusion_figure",
           "precision_figure", "transfer_figure", "roofline_figure"]

_Y = {"median_s": ("time per call (s)", False), "gflops": ("GFLOP/s", True),
      "gb_per_s": ("GB/s (compulsory bytes / time)", True), "elements_per_s": ("elements per second", True)}


def _no_gpu_note(live: ResultSet | None, references: Sequence[ResultSet]) -> str:
    has_gpu = (live is not None and live.select(device="gpu")) or any(r.select(device="gpu") for r in references)
    return "" if has_gpu else "No GPU here and no reference GPU results recorded yet: CPU only."


@arguments(live=_LIVE, references=_REFS, y=Given(validate_field), highlight=Optional(Real(above=0)),
           op=Optional(Given(validate_op)), bandwidth=Optional(Given(_rates)))
def sweep_plot(live: ResultSet | None, references: Sequence[ResultSet] = (), y: str = "median_s",
               highlight: float | None = None, op: str | None = None,
               bandwidth: dict | None = None) -> Figure:
    """One op's sweep (log-log per device, GPU speedup beside it) with the crossover marked.

    ``bandwidth`` (``{"cpu": bytes/s, ...}``, e.g. from ``course.hardware.copy_bandwidth``) draws
    each device's main-memory copy bandwidth as a line when ``y`` is ``"gb_per_s"``.
    """
    src = live if live is not None else (references[0] if references else None)
    op = op or (src.params.get("op") if src is not None else "add")
    o = get_op(op)
    where = {"op": o.name}
    ylabel, better = _Y.get(y, (y, True))
    refs = [r for r in references if r.select(**where)]
    cx = find_crossover(live, refs, where)
    title = f"{o.name}: {o.description}"
    fig = sweep_figure(live, refs, x="n", y=y, xlabel=f"n ({o.size_meaning})", ylabel=ylabel, title=title,
                       highlight=highlight, where=where, higher_is_better=better)
    ax = fig.axes[0]
    if cx.n is not None:          # the line on both panels, its value in the right panel's title: no label on curves
        for a in fig.axes[:2]:
            a.axvline(cx.n, color="k", lw=1.3, ls="-.", alpha=0.8)
        if len(fig.axes) > 1:
            fig.axes[1].set_title(f"above 1: the GPU is faster; dash-dot: crossover ≈ {cx.n:,.0f}", fontsize=9)
    if y == "gb_per_s":
        for dev, bw in (bandwidth or {}).items():
            # dotted: measured here, yet neither a live curve (solid) nor a recorded one (dashed)
            ax.axhline(bw / 1e9, color=COLORS.get(dev, "0.5"), ls=":", lw=1.4,
                       label=f"{dev.upper()} copy bandwidth (large arrays, main memory): {bw / 1e9:.1f} GB/s")
    for a in fig.axes[:2]:
        if a.lines:
            _pow2_axis(a)
    msg = cx.message if cx.status != "no_data" else (_no_gpu_note(live, refs) or cx.message)
    ax.set_title(textwrap.fill(title, 60), fontsize=9)
    if _legend_above(fig, fig.axes[:2], ""):      # the plots keep their height under the legend
        rows = sum(len(t.get_text().splitlines()) for t in fig.legends[0].get_texts())
        fig.set_figheight(fig.get_figheight() + 0.11 * rows)
    set_takeaway(fig, msg + " " + figure_takeaway(fig))     # the crossover first, then the curves read off
    return fig


def _short_name(name: str) -> str:
    """A point's name with a large power-of-two size written as one (``add n=2²²``), so neighbours' labels fit."""
    op, _, n = name.rpartition(" n=")
    try:
        k = int(n.replace(",", "")).bit_length() - 1
    except ValueError:
        return name
    return f"{op} n={power_text(2, k)}" if op and k >= 12 and int(n.replace(",", "")) == 2 ** k else name


def _legend_above(fig: Figure, axes: Sequence, heading: str) -> bool:
    """One legend for all panels, above them and headed by ``heading`` (:func:`course.plots.figure_legend`)."""
    return figure_legend(fig, axes, heading)


def _size_label(v: float, _pos: object = None) -> str:
    for unit, div in (("G", 2 ** 30), ("M", 2 ** 20), ("K", 2 ** 10)):
        if v >= div:
            return f"{v / div:g}{unit}"
    return f"{v:g}"


def _pow2_axis(ax) -> None:
    """Ticks at powers of two, at most ~8 of them, labelled 1, 16, 256, 4K, 64K, 1M..."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    lo, hi = ax.get_xlim()
    ks = list(range(max(int(np.ceil(np.log2(max(lo, 1e-9)))), 0), int(np.floor(np.log2(hi))) + 1))
    step = max(1, -(-len(ks) // 8))
    ax.xaxis.set_major_locator(FixedLocator([2.0 ** k for k in ks[::step]]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(_size_label))


@arguments(live=_LIVE, references=_REFS)
def memory_latency_figure(live: ResultSet | None, references: Sequence[ResultSet] = ()) -> Figure:
    """Pointer-chase latency (ns per dependent load) against working-set size: the memory hierarchy."""
    fig, (ax,) = new_figure(1, width=8, height=3.8)
    for rs in ([live] if live is not None else []) + list(references):
        ref = rs.source == "reference"
        for dev in ("cpu", "gpu"):
            recs = sorted((r for r in rs.select(device=dev) if "ns_per_hop" in r), key=lambda r: r["nbytes"])
            if recs:
                who = (rs.gpu_name if dev == "gpu" else rs.cpu_name) or dev
                ax.plot([r["nbytes"] for r in recs], [r["ns_per_hop"] for r in recs], marker="o", ms=3.5,
                        ls="--" if ref else "-", color=COLORS[dev],
                        label=f"{dev.upper()}: {who}" + source_tag(rs, dev))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("working set (bytes): small ones fit in the caches, large ones only in main memory")
    ax.set_ylabel("ns per dependent load")
    ax.set_title("Memory latency: a pointer chase, one load waiting for the last", fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    if ax.lines:
        _pow2_axis(ax)
        place_legend(ax)
    add_footer(fig, live, references, extra=_no_gpu_note(live, references))
    return fig


@arguments(live=_LIVE, references=_REFS)
def latency_figure(live: ResultSet | None, references: Sequence[ResultSet] = ()) -> Figure:
    """Each smallest operation as a distribution: every call a dot, the median a bar, the IQR a box."""
    rows = []
    for rs in ([live] if live is not None else []) + list(references):
        ref = rs.source == "reference"
        for r in rs.records:
            dev = r["device"].upper()   # "GPU launch: ..." names its device already
            label = r["what"] if r["what"].startswith(dev) else f"{dev}: {r['what']}"
            label += " [reference]" if ref else ""
            # the rows say what each one measures at length: in short lines, so the plot keeps its width
            label = textwrap.fill(label, 46)
            rows.append((label, np.asarray(r.get("samples_s") or [r["median_s"]], float) * 1e6, r, ref))
    lines = sum(row[0].count("\n") + 1 for row in rows)
    fig, (ax,) = new_figure(1, width=9.5, height=0.9 + 0.2 * lines + 0.22 * max(len(rows), 1))
    rng = np.random.default_rng(0)
    for i, (_, s, r, ref) in enumerate(rows):
        color = COLORS.get(r["device"], "0.5")
        ax.scatter(s, i + rng.uniform(-0.18, 0.18, len(s)), s=4, alpha=0.25 if not ref else 0.15,
                   color=color, lw=0)
        q25, med, q75 = np.percentile(s, [25, 50, 75])
        ax.add_patch(_box(q25, q75, i, color))
        ax.plot([med, med], [i - 0.3, i + 0.3], color="k", lw=2)
        ax.text(1.01, i, f"median {med:.2f} µs", va="center", fontsize=9,
                transform=ax.get_yaxis_transform())
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=9)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("time per call (µs, log scale)\neach dot one call; box = middle half; bar = median")
    ax.set_title("Latency of the smallest operations" + ("" if any(r[2]["device"] == "gpu" for r in rows) else
                 " — no GPU here and no reference recorded yet: CPU only"), fontsize=10)
    ax.margins(x=0.25)
    ax.grid(True, axis="x", which="both", alpha=0.25)
    add_footer(fig, live, references)
    if rows:   # read off the medians (read off the bars, it would quote the boxes' widths)
        medians = [float(np.median(s)) for _, s, _, _ in rows]
        lo, hi = int(np.argmin(medians)), int(np.argmax(medians))
        set_takeaway(fig, f"Median time per call: slowest {' '.join(rows[hi][0].split())}, {medians[hi]:.3g} µs; "
                          f"fastest {' '.join(rows[lo][0].split())}, {medians[lo]:.3g} µs.")
    return fig


def _box(lo: float, hi: float, y: float, color: str):
    from matplotlib.patches import Rectangle

    return Rectangle((lo, y - 0.25), max(hi - lo, 1e-9), 0.5, fill=False, ec=color, lw=1.5)


@arguments(sets=_REFS)
def async_figure(sets: Sequence[ResultSet]) -> Figure:
    """Bars: the chain's host time per mode, per device."""
    fig, (ax,) = new_figure(1, height=0.8 + 0.5 * sum(len(s.records) for s in sets))
    labels, vals, colors = [], [], []
    sizes = {(r.get("chain"), r.get("n")) for rs in sets for r in rs.records}
    for rs in sets:
        for r in rs.records:      # each bar names its chain where the sets timed different ones
            labels.append(f"{r['device'].upper()} ({'reference' if rs.source == 'reference' else 'live'}"
                          + (f", n = {r.get('n', 0):,}" if len(sizes) > 1 else "") + f"): {r['mode']}")
            vals.append(r["median_s"] * 1e6)
            colors.append(COLORS.get(r["device"], "0.5"))
    ax.barh(range(len(vals)), vals, color=colors)
    for i, v in enumerate(vals):
        ax.text(v, i, f" {v:,.0f} µs", va="center", fontsize=9)
    ax.set_yticks(range(len(vals)), labels, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("host time for the whole chain (µs)")
    if len(sizes) == 1:
        chain, n = next(iter(sizes))
        ax.set_title(f"A chain of {chain} ops on {n or 0:,} elements: when does the call return?", fontsize=10)
    else:
        chains = sorted({c for c, _ in sizes if c})
        ax.set_title(f"A chain of {' or '.join(map(str, chains))} ops (sizes on the bars): "
                     "when does the call return?", fontsize=10)
    ax.margins(x=0.25)
    add_footer(fig, sets[0] if sets else None, [s for s in sets if s.source == "reference"])
    return fig


@arguments(live=_LIVE, references=_REFS, highlight=Optional(Whole(hint="the batch to mark, or None")),
           roofs=Optional(Given(_rates)))
def batch_figure(live: ResultSet | None, references: Sequence[ResultSet] = (),
                 highlight: int | None = None, roofs: dict | None = None) -> Figure:
    """Throughput (samples/s) and latency per batch against batch size; on the right how busy the device got:
    the step's GFLOP/s against ``roofs`` (label -> FLOP/s, each device's float32 matrix-product roof, dotted)."""
    fig, axes = new_figure(3, width=12, height=3.6)
    for rs in ([live] if live is not None else []) + list(references):
        ref = rs.source == "reference"
        for dev in ("cpu", "gpu"):
            recs = sorted(rs.select(device=dev), key=lambda r: r["batch"])
            if not recs:
                continue
            b = np.array([r["batch"] for r in recs], float)
            style = {"ls": "--" if ref else "-", "marker": "o", "ms": 3.5, "color": COLORS[dev],
                     "label": f"{dev.upper()}" + source_tag(rs, dev)}
            ys = ([r["samples_per_s"] for r in recs], [r["median_s"] * 1e3 for r in recs],
                  [r["gflops"] for r in recs])
            for ax, y in zip(axes, ys):
                ax.plot(b, y, **style)
                if not ref:
                    mark_noisy(ax, b, y, noisy_flags(recs), COLORS[dev])
    for (label, flops), color in zip((roofs or {}).items(), ("0.35", "0.6")):
        axes[2].axhline(flops / 1e9, color=color, lw=1, ls=":", label=label)
    titles = ("throughput: samples per second", "latency: ms per batch (one step)",
              "how busy: the step's rate against the roof")
    ylabels = ("samples/s", "ms per step", "GFLOP/s of the step")
    for ax, t, yl in zip(axes, titles, ylabels):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.yaxis.set_minor_formatter(NullFormatter())   # a narrow range labels its minor ticks on top of each other
        ax.set_xlabel("batch size")
        ax.set_ylabel(yl)
        ax.set_title(t, fontsize=9.5)
        ax.grid(True, which="both", alpha=0.25)
        if highlight is not None:
            ax.axvline(highlight, color="0.3", lw=1, ls=":")
        place_legend(ax, fontsize=9)
    add_footer(fig, live, references, extra=_no_gpu_note(live, references))
    return fig


def _model(name: str | None) -> str:
    """The model word of a GPU's name ("H100" of "NVIDIA H100 80GB HBM3"): a bar's short label; the caption
    names the device in full."""
    return next((w for w in (name or "").split() if any(c.isdigit() for c in w)), name or "GPU")


@arguments(rs=Given(_results), references=_REFS)
def fusion_figure(rs: ResultSet, references: Sequence[ResultSet] = ()) -> Figure:
    """Time per run of the chain, by mode and device, with kernels launched and bytes moved; where no
    GPU ran here, the references' GPU runs (hatched, labelled with their own size and where recorded)."""
    refs = [] if rs.select(device="gpu") else [ref for ref in references if ref.select(device="gpu")]
    recs = list(rs.records) + [r | {"_ref": ref} for ref in refs for r in ref.select(device="gpu")]
    fig, (ax,) = new_figure(1, height=0.9 + 0.55 * max(len(recs), 1))
    ms = [r["median_s"] * 1e3 for r in recs]
    # CPU and GPU side by side can differ a thousandfold: on a linear axis the GPU's bars vanish
    wide = bool(ms) and min(ms) > 0 and max(ms) / min(ms) > 20
    bars = ax.barh(range(len(recs)), ms, color=[COLORS.get(r["device"], "0.5") for r in recs], log=wide)
    for b, r in zip(bars, recs):
        if "_ref" in r:
            b.set_hatch("//")
            b.set_alpha(0.6)
    for i, r in enumerate(recs):          # two short lines each, so the label stays on the canvas
        ax.text(r["median_s"] * 1e3, i, f" {r['median_s'] * 1e3:.3g} ms, {r['kernels']:,} kernel(s)\n"
                f" {r['bytes'] / 1e6:,.1f} MB moved, {r['gb_per_s']:.1f} GB/s", va="center", fontsize=9)
    ax.set_yticks(range(len(recs)), [f"{r['device'].upper()}: {r['mode']}" + (
        f"\n(recorded on {_model(r['_ref'].gpu_name)}, n = {r['n']:,}"
        + ("" if r["steps"] == rs.params.get("steps") else f", {r['steps']} steps")
        + ")" if "_ref" in r else "") for r in recs], fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("ms per run of the whole chain" + (" (log scale)" if wide else ""))
    p = rs.params
    ax.set_title(f"{p['steps']} elementwise steps ({' → '.join(p['chain'])}) on {p['n']:,} {p['dtype']}",
                 fontsize=9.5)
    if wide:
        ax.set_xlim(min(ms) / 3, max(ms) * 40)       # room on the right for the labels
    else:
        ax.margins(x=0.9)
    add_footer(fig, rs, refs, extra=(_no_gpu_note(rs, refs) + (
        " Hatched: recorded elsewhere, at its own size; compare GB/s, not ms." if refs else "")).strip())
    said = []
    for dev in dict.fromkeys(r["device"] for r in recs):
        by_mode = {r["mode"]: r for r in recs if r["device"] == dev}
        if "fused" in by_mode and "unfused" in by_mode:
            f, u = by_mode["fused"], by_mode["unfused"]
            where = f" (recorded, n = {f['n']:,})" if "_ref" in f else ""
            said.append(f"on the {dev.upper()}{where} the fused chain takes {f['median_s'] * 1e3:.3g} ms against "
                        f"{u['median_s'] * 1e3:.3g} ms unfused ({u['median_s'] / f['median_s']:.2g}× faster than "
                        f"unfused, {f['kernels']:,} kernel(s) instead of {u['kernels']:,})")
    if said:
        text = "; ".join(said)
        set_takeaway(fig, text[0].upper() + text[1:] + ".")
    return fig


@arguments(live=_LIVE, references=_REFS)
def precision_figure(live: ResultSet | None, references: Sequence[ResultSet] = ()) -> Figure:
    """Matrix-product GFLOP/s against size, one line per dtype and device."""
    fig, axes = new_figure(2, width=11)
    styles = {"float32": "o", "tf32": "D", "float16": "s", "bfloat16": "^"}
    for rs in ([live] if live is not None else []) + list(references):
        ref = rs.source == "reference"
        for dev in ("cpu", "gpu"):
            for dtn in styles:
                recs = sorted(rs.select(device=dev, dtype=dtn), key=lambda r: r["n"])
                if not recs:
                    continue
                lbl = f"{dev.upper()} {dtn} ({recs[0].get('library', '')})" + (f" [{rs.label}]" if ref else "")
                n = [r["n"] for r in recs]
                kw = {"ls": "--" if ref else "-", "marker": styles[dtn], "color": COLORS[dev], "label": lbl,
                      "alpha": 0.7 if dtn != "float32" else 1.0}
                axes[0].plot(n, [r["gflops"] for r in recs], **kw)
                axes[1].plot(n, [r["matrix_bytes"] / 2**20 for r in recs], **kw)
                if not ref:
                    mark_noisy(axes[0], n, [r["gflops"] for r in recs], noisy_flags(recs), COLORS[dev])
    axes[0].set_ylabel("GFLOP/s")
    axes[0].set_title("matrix product speed per dtype", fontsize=9.5)
    axes[1].set_ylabel("MiB per n×n matrix")
    axes[1].set_title("memory: half precision halves it", fontsize=9.5)
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("matrix side n")
        ax.grid(True, which="both", alpha=0.25)
        place_legend(ax, fontsize=9)
    add_footer(fig, live, references, extra=_no_gpu_note(live, references))
    return fig


@arguments(live=_LIVE, references=_REFS)
def transfer_figure(live: ResultSet | None, references: Sequence[ResultSet] = ()) -> Figure:
    """Host↔device bandwidth against size, pageable vs pinned."""
    fig, (ax,) = new_figure(1)
    for rs in ([live] if live is not None else []) + list(references):
        ref = rs.source == "reference"
        for mem, marker in (("pageable", "o"), ("pinned", "s")):
            for direction, color in (("host→device", PALETTE["purple"]), ("device→host", PALETTE["green"])):
                recs = sorted(rs.select(memory=mem, direction=direction), key=lambda r: r["nbytes"])
                if recs:
                    ax.plot([r["nbytes"] for r in recs], [r["gb_per_s"] for r in recs], marker=marker,
                            ls="--" if ref else "-", color=color,
                            label=f"{direction}, {mem}" + (f" ({rs.label})" if ref else " (live)"))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("bytes copied")
    ax.set_ylabel("GB/s")
    ax.grid(True, which="both", alpha=0.25)
    if ax.lines:
        place_legend(ax)
        ax.set_title("host↔device copies: pageable vs pinned host memory", fontsize=10)
    else:
        ax.text(0.5, 0.5, "Host↔device copies need a GPU. None answers here and no reference\n"
                "results are recorded yet, so there is nothing to show.", ha="center", va="center",
                transform=ax.transAxes, fontsize=9, color="0.3")
    add_footer(fig, live, references)
    return fig


def _flops_text(f: float) -> str:
    return f"{f / 1e12:,.3g} TFLOP/s" if f >= 1e12 else f"{f / 1e9:,.3g} GFLOP/s"


@arguments(live=_LIVE, references=_REFS, dtype=Given(dtype_name, torch=True), highlight=Optional(Given(_point)))
def roofline_figure(live: ResultSet | None, references: Sequence[ResultSet] = (), dtype: str = "float32",
                    highlight: dict | None = None) -> Figure:
    """The measured roofline of each device, with the course's operations placed on it.

    ``highlight`` is one more point record (the widget's current op and size), drawn large.
    """
    fig, (ax,) = new_figure(1, width=9.5, height=5.2)
    xs = np.logspace(-2, 3.5, 200)
    markers = {"add": "o", "relu": "o", "sum": "v", "matmul": "s", "scan": "D", "mlp step": "P"}
    lines, names, said = [], [], []
    for rs in ([live] if live is not None else []) + list(references):
        ref = rs.source == "reference"
        for dev in rs.devices():
            pk = peaks_of(rs, dev)
            bw = pk["bandwidth"]
            if not bw:
                continue
            who = (rs.gpu_name if dev == "gpu" else rs.cpu_name) or dev
            for dtn, f in sorted(pk["flops"].items()):
                ls = "--" if ref else {"float32": "-", "float16": "-.", "bfloat16": ":"}.get(dtn, "-")
                mark = {"float16": "^", "bfloat16": "v", "float64": "D"}.get(dtn, "none")   # not by line alone
                ax.plot(xs, np.minimum(f, xs * bw), color=COLORS[dev], ls=ls, lw=2 if dtn == dtype else 1.2,
                        marker=mark, markevery=(7 * len(lines) % 20, 20), ms=5,
                        label=f"{dev.upper()} {who}: {dtn} roof {_flops_text(f)}"
                              + (f" [{rs.label}]" if ref else ""))
            ridge = ridge_point(pk["flops"].get(dtype) or max(pk["flops"].values() or [bw]), bw)
            lines.append(f"{dev.upper()}: copy bandwidth {bw / 1e9:,.1f} GB/s, ridge at {ridge:.2g} FLOP/byte"
                         + (" (reference)" if ref else ""))
            points = sorted(rs.select(device=dev, kind="point"), key=lambda r: (r["intensity"], r["flops_per_s"]))
            for r in points:
                ax.scatter(r["intensity"], r["flops_per_s"], marker=markers.get(r.get("op"), "o"), s=40,
                           color=COLORS[dev], alpha=0.5 if ref else 0.95, edgecolor="k", lw=0.5, zorder=3)
                names.append((r["intensity"], r["flops_per_s"], _short_name(r["name"])))
            if points and (pk["flops"].get(dtype) or pk["flops"]):
                best = max(points, key=lambda r: r["flops_per_s"])
                roof = min(pk["flops"].get(dtype) or max(pk["flops"].values()), best["intensity"] * bw)
                said.append(f"on the {dev.upper()} {who}" + source_tag(rs, dev, live="") + f", {best['name']} "
                            f"reaches {_flops_text(best['flops_per_s'])}, {100 * best['flops_per_s'] / roof:.0f} % "
                            f"of the roof at its intensity")
    if highlight:
        dev = highlight.get("device", "cpu")
        ax.scatter(highlight["intensity"], highlight["flops_per_s"], marker="*", s=320, color=COLORS.get(dev),
                   edgecolor="k", zorder=4, label=f"your choice: {highlight['name']} ({dev.upper()})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte of compulsory memory traffic)")
    ax.set_ylabel("FLOP/s")
    ax.grid(True, which="both", alpha=0.2)
    ax.set_title(("Roofline measured on this machine" if not references else
                  "Roofline: solid measured here, dashed recorded elsewhere")
                 + ": slanted = memory-bound, flat = compute-bound\n"
                 + "; ".join(lines), fontsize=9)
    figure_legend(fig, [ax])   # above the axes: inside, it covered the float16 and bfloat16 roofs
    add_footer(fig, live, references, extra=_no_gpu_note(live, references))
    label_points(ax, names)   # last, on the axes' final size: each name where it overlaps no other name or point
    if said:
        set_takeaway(fig, "Fastest point " + "; ".join(said) + ".")
    return fig
