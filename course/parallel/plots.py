"""Lesson 06's figures: ring steps, bytes per worker, MPI timings, the α–β model, DDP, pipelines, tensor
parallelism, ZeRO.

Figures of measurements name the machine in their footer (:func:`course.plots.add_footer`) and say
when ranks were oversubscribed; figures of the simulation or of the model say that they are not
measurements.

>>> from course.parallel.collectives import ring_allreduce
>>> fig = ring_step_figure(ring_allreduce(np.ones((3, 7))), 2)
>>> "step 2 of 4" in fig.axes[0].get_title()
True
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..arguments import Given, Optional, Real, Whole, arguments
from ..errors import BadInputError, whole_number
from ..plots import PALETTE, SERIES_COLORS, add_footer, footer_text, new_figure, place_legend, set_takeaway
from ..results import ResultSet, validate_results
from .collectives import (
    ALGORITHMS,
    MAX_SIMULATED_MESSAGES,
    AllreduceRun,
    allreduce,
    bytes_per_worker,
    validate_run,
    validate_workers,
)
from .data_parallel import validate_sizes
from .model import INTERCONNECTS, AlphaBeta, model_time, validate_fit
from .pipeline import bubble_fraction, measured_bubble, validate_events
from .tensor_parallel import communication_model_s, data_parallel_bytes, tensor_parallel_bytes
from .zero import layer_lengths, validate_stage
from .zero_costs import zero_bytes_per_rank, zero_bytes_sent, zero_step_model

__all__ = ["ALGO_COLORS", "ring_step_figure", "bytes_figure", "allreduce_timing_figure", "model_figure",
           "data_parallel_figure", "pipeline_figure", "tensor_parallel_bytes_figure", "tensor_parallel_figure",
           "STAGE_COLORS", "zero_figure", "zero_model_figure"]

ALGO_COLORS = {"ring": PALETTE["green"], "naive": PALETTE["vermillion"], "tree": PALETTE["purple"], "MPI": "#444444"}


def _require_records(rs: ResultSet) -> None:
    if not rs.records:
        raise BadInputError(f"the result set {rs.name!r} holds no records to draw"
                            + (f" ({'; '.join(rs.notes)})" if rs.notes else "") + ": run its sweep first")


def _require_stages(events: list[dict], p: int) -> None:
    bad = sorted({e["stage"] for e in events} - set(range(p)))
    if bad:
        raise BadInputError(f"events name stages {bad} that a pipeline of p = {p} stages does not have")


_RS = Given(validate_results, what="rs")
_FIT = Optional(Given(validate_fit))
_MEASURED = Optional(Given(validate_results, what="measured"))
_P_MAX = Whole(2, 2**20, hint="the most workers drawn")


def _color(name: str) -> str:
    return ALGO_COLORS.get(name.split()[0], "0.4")


def _over_text(rs: ResultSet, ps: Sequence[int]) -> str:
    cores = rs.params.get("cores", "?")
    over = [p for p in ps if isinstance(cores, int) and p > cores]
    return (f"Oversubscribed: p = {', '.join(map(str, over))} ranks on {cores} cores (ranks take turns)"
            if over else f"{cores} cores: every rank had a core of its own")


@arguments(run=Given(validate_run), step=Whole(0, MAX_SIMULATED_MESSAGES, hint="0 is the start"))
def ring_step_figure(run: AllreduceRun, step: int) -> Figure:
    """Every worker's vector after ``step`` (0 = the start; a step past the last is drawn as the last, titled so),
    coloured by how many inputs each element already sums; the messages of that step outlined (red: sent, green:
    received) and listed."""
    p, n = run.result.shape
    total = len(run.steps)
    step = min(step, total)
    fig, (ax,) = new_figure(1, width=9.5, height=1.2 + 0.42 * p)
    contrib = run.steps[step - 1].contributions if step else np.ones((p, n))
    ax.imshow(contrib, cmap="Greens", vmin=0, vmax=p, aspect="auto",
              extent=(-0.5, n - 0.5, p - 0.5, -0.5))
    if n <= 40:
        for w in range(p):
            for i in range(n):
                ax.text(i, w, f"{int(contrib[w, i])}", ha="center", va="center", fontsize=9,
                        color="w" if contrib[w, i] > 0.6 * p else "k")
    lines = []
    if step:
        s = run.steps[step - 1]
        for m in s.messages:
            ax.add_patch(Rectangle((m.lo - 0.5, m.src - 0.45), m.size, 0.9, fill=False, ec=PALETTE["vermillion"], lw=2))
            ax.add_patch(Rectangle((m.lo - 0.5, m.dst - 0.4), m.size, 0.8, fill=False, ec=PALETTE["green"], lw=2,
                                   ls="--"))
            what = f"chunk {m.chunk} " if m.chunk >= 0 else ""
            lines.append(f"w{m.src} → w{m.dst}: {what}[{m.lo}:{m.hi}] ({m.action})")
        title = f"{run.algorithm}: step {step} of {total} ({s.phase})"
    else:
        title = f"{run.algorithm}: step 0 of {total} (the start: every worker holds only its own vector)"
    ax.set_title(title, fontsize=10)
    ax.set_yticks(range(p), [f"worker {w}" for w in range(p)], fontsize=9)
    ax.set_xlabel(f"element of the vector (N = {n})")
    if run.algorithm == "ring":
        from .collectives import chunk_bounds

        for b in chunk_bounds(n, p)[1:-1]:
            ax.axvline(b - 0.5, color="0.2", lw=1)
    shown = lines if len(lines) <= 8 else lines[:8] + [f"... {len(lines) - 8} more"]
    ax.text(1.01, 1.0, "\n".join(shown) or "no message yet", transform=ax.transAxes, va="top",
            fontsize=9, family="monospace")
    footer_text(fig, "Simulated in numpy: numbers in the cells = how many workers' inputs each element sums "
                       f"(p = {p} when it is complete). Red box: sent this step; dashed green: where it lands.")
    complete = int((np.asarray(contrib) >= p).sum())
    set_takeaway(fig, f"{title}: {complete:,} of {p * n:,} elements already sum all {p} workers' inputs, "
                      f"after {len(lines)} message{'s' if len(lines) != 1 else ''} in this step.")
    return fig


BYTES_FIGURE_MAX_P = 64  # the most workers bytes_figure simulates (a ring of p makes 2 p (p - 1) messages)


def bytes_figure(n: int = 1_000_000, p_max: int = 8, itemsize: int = 8, p_mark: int | None = None) -> Figure:
    """Bytes the busiest worker sends per all-reduce against p: formulas (lines) and counts taken
    from the simulated messages (dots).  ``p_max`` is at most :data:`BYTES_FIGURE_MAX_P`: every p up to
    it is simulated."""
    n = whole_number("n", n, hint="the vector length")
    p_max = whole_number("p_max", p_max, hi=BYTES_FIGURE_MAX_P,
                         hint=f"every p up to it is simulated; the curves' trend shows by p = {BYTES_FIGURE_MAX_P}")
    itemsize = whole_number("itemsize", itemsize, hint="bytes per number, e.g. 8 for float64")
    fig, (ax,) = new_figure(1, height=3.2)
    ps = np.arange(1, p_max + 1)
    for alg in ALGORITHMS:
        ax.plot(ps, [bytes_per_worker(alg, n, int(p), itemsize) / 1e6 for p in ps], color=_color(alg),
                label=f"{alg} (formula)")
        small = min(n, 4 * p_max)          # simulate a short vector, scale its count to n
        counts = [allreduce(np.zeros((int(p), small)), alg, trace=False).sent.max() * itemsize * n / small / 1e6
                  for p in ps]
        ax.plot(ps, counts, "o", color=_color(alg), ms=4, label=f"{alg} (counted in the simulation)")
    if p_mark:
        ax.axvline(p_mark, color="0.3", ls=":", lw=1)
    ax.axhline(2 * n * itemsize / 1e6, color="0.5", ls="--", lw=1, label="2 N · itemsize: the ring's ceiling")
    ax.set_xlabel("workers p")
    ax.set_ylabel("MB sent by the busiest worker")
    ax.set_title(f"One all-reduce of N = {n:,} elements of {itemsize} bytes", fontsize=10)
    ax.legend(fontsize=9, ncol=2)
    ax.grid(alpha=0.25)
    footer_text(fig, "Counted, not timed: formulas and the simulation's messages (dots: a short vector "
                       "simulated, scaled to N).")
    return fig


@arguments(rs=_RS, fit=_FIT, then=_require_records)
def allreduce_timing_figure(rs: ResultSet, fit: AlphaBeta | None = None) -> Figure:
    """Time per all-reduce against message size, one panel per p; the fitted model dotted."""
    ps = sorted({r["p"] for r in rs.records})
    fig, axes = new_figure(len(ps), width=min(4.0 * len(ps), 13), height=3.4)
    for ax, p in zip(axes, ps):
        for alg in sorted({r["algorithm"] for r in rs.records}):
            recs = sorted(rs.select(p=p, algorithm=alg), key=lambda r: r["nbytes"])
            x = np.array([r["nbytes"] for r in recs], dtype=float)
            ax.plot(x, [r["median_s"] for r in recs], "o-", ms=3, color=_color(alg), label=alg)
            ax.fill_between(x, [r["q25_s"] for r in recs], [r["q75_s"] for r in recs], color=_color(alg),
                            alpha=0.2, lw=0)
            if fit is not None and not alg.startswith("MPI"):
                ax.plot(x, [fit.predict(alg.split()[0], p, b) for b in x], ":", color=_color(alg), lw=1)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        over = " (oversubscribed)" if p > rs.params.get("cores", p) else ""
        ax.set_title(f"p = {p} ranks{over}", fontsize=9.5)
        ax.set_xlabel("message (bytes)")
        ax.grid(alpha=0.25, which="both")
    axes[0].set_ylabel("seconds per all-reduce")
    place_legend(axes[0])
    extra = _over_text(rs, ps) + (f". Dotted: α–β model fitted to these points, {fit}" if fit else "")
    add_footer(fig, rs, extra=extra)
    return fig


def _size(nbytes: float) -> str:
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 2**k:
            return f"{nbytes / 2**k:.3g} {unit}"
    return f"{nbytes:.0f} bytes"


@arguments(fit=Given(validate_fit), nbytes=Real(above=0, hint="the message size in bytes"), p_max=_P_MAX,
           measured=_MEASURED)
def model_figure(fit: AlphaBeta, nbytes: float = 100e6, p_max: int = 1024, measured: ResultSet | None = None) -> Figure:
    """The α–β model against p (to ``p_max`` workers) for one message size: the fit from this machine,
    and the same α with data-sheet bandwidths (labelled as a model)."""
    fig, (ax,) = new_figure(1, width=10, height=3.8)
    ps = np.unique(np.round(np.geomspace(2, p_max, 40)).astype(int))
    links = [("this machine (fitted β)", fit.beta, "-", None)] + [
        (ic.name + " (data-sheet β" + (f", to its {ic.max_workers} GPUs)" if ic.max_workers else ")"),
         1 / ic.bytes_per_s, ls, ic.max_workers) for ic, ls in zip(INTERCONNECTS, ("--", "-."))]
    for label, beta, ls, most in links:
        reach = ps[ps <= most] if most else ps          # a link is drawn only as far as it reaches
        for alg in ("ring", "naive"):
            ax.plot(reach, [model_time(alg, int(p), nbytes, fit.alpha, beta) for p in reach], ls=ls,
                    color=_color(alg), label=f"{alg}, {label}")
    if measured is not None:
        for alg in ("ring (course)", "naive (course)"):
            pts = [(r["p"], r["median_s"]) for r in measured.select(algorithm=alg) if r["nbytes"] == nbytes]
            if pts:
                ax.plot(*zip(*sorted(pts)), "o", color=_color(alg), ms=5, label=f"{alg}: measured here")
    for p in (8, 1024):
        if p <= p_max:
            ax.axvline(p, color="0.5", lw=0.8, ls=":")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("workers p")
    ax.set_ylabel("seconds per all-reduce (model)")
    ax.set_title(f"α–β MODEL of an all-reduce of {_size(nbytes)} (α = {fit.alpha * 1e6:.3g} µs, fitted here)",
                 fontsize=10)
    ax.legend(fontsize=9, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(alpha=0.25, which="both")
    footer_text(fig, "A MODEL, not a measurement. Bandwidths from data sheets:\n" + "\n".join(
        ic.label for ic in INTERCONNECTS) + "\nLatency α is the one fitted on this machine (real links differ).")
    return fig


@arguments(rs=_RS, then=_require_records)
def data_parallel_figure(rs: ResultSet) -> Figure:
    """Per step on p ranks: compute vs communication, and a whole step without vs with overlap."""
    ps = sorted({r["p"] for r in rs.records})
    fig, (a1, a2) = new_figure(2, height=3.3)
    w = 0.38
    for k, (ax, parts) in enumerate(((a1, ("compute", "communicate (ring)")),
                                     (a2, ("step: one all-reduce after backward",
                                           "step: bucketed, overlapped with backward")))):
        for i, part in enumerate(parts):
            vals = [rs.select(p=p, part=part)[0]["median_s"] * 1e3 for p in ps]
            ax.bar(np.arange(len(ps)) + (i - 0.5) * w, vals, w, label=part.replace("step: ", ""),
                   color=SERIES_COLORS[i + 2 * (k != 0)])
        ax.set_xticks(range(len(ps)), [f"p = {p}" for p in ps])
        ax.set_ylabel("ms (median)")
        place_legend(ax)
        ax.grid(alpha=0.25, axis="y")
    sizes = "-".join(map(str, rs.params.get("sizes", [])))
    a1.set_title(f"One step of MLP {sizes}, batch {rs.params.get('batch')} split over p", fontsize=9.5)
    a2.set_title(f"Whole step with MPI's all-reduce (buckets of {rs.params.get('bucket_bytes', 0) / 2**20:g} MiB)",
                 fontsize=9.5)
    add_footer(fig, rs, extra=_over_text(rs, ps))
    ms = {part: rs.select(p=ps[-1], part=part)[0]["median_s"] * 1e3 for part in
          ("compute", "communicate (ring)", "step: one all-reduce after backward",
           "step: bucketed, overlapped with backward")}
    set_takeaway(fig, f"On p = {ps[-1]} ranks one step computes for {ms['compute']:.3g} ms and spends "
                      f"{ms['communicate (ring)']:.3g} ms in the ring all-reduce; overlapping the all-reduce "
                      f"with backward takes the whole step from "
                      f"{ms['step: one all-reduce after backward']:.3g} ms to "
                      f"{ms['step: bucketed, overlapped with backward']:.3g} ms (medians).")
    return fig


@arguments(events=Given(validate_events), p=Given(validate_workers), m=Whole(hint="the number of micro-batches"),
           measured=_MEASURED, then=_require_stages)
def pipeline_figure(events: Sequence[dict], p: int, m: int, measured: ResultSet | None = None,
                    title: str = "") -> Figure:
    """A GPipe timeline: one row per stage, forward (F) and backward (B) boxes per micro-batch."""
    fig, (ax,) = new_figure(1, height=1.3 + 0.5 * p)
    start = min(e["t0"] for e in events)
    span = max(e["t1"] for e in events) - start
    scale = 1e3 if measured is not None else 1.0
    for e in events:
        t0, t1 = (e["t0"] - start) * scale, (e["t1"] - start) * scale
        ax.barh(e["stage"], t1 - t0, left=t0, height=0.7, color=PALETTE["sky blue" if e["kind"] == "F" else "orange"],
                edgecolor="k", lw=0.4)
        if (e["t1"] - e["t0"]) > 0.025 * span:               # label the boxes wide enough to read
            ax.text((t0 + t1) / 2, e["stage"], f"{e['kind']}{e['micro']}", ha="center", va="center", fontsize=9)
    ax.set_yticks(range(p), [f"stage {s}" for s in range(p)], fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("ms since the step began" if measured is not None else "time (units: one forward = 1)")
    ax.set_title(title, fontsize=9.5)
    ax.grid(alpha=0.25, axis="x")
    if measured is not None:
        add_footer(fig, measured, extra=_over_text(measured, [p]) + ". Blue: forward, orange: backward of "
                   "micro-batch k (F k, B k); a box stretches when the OS hands its core to another process.")
    else:
        footer_text(fig, "The ideal schedule (equal stages, backward = 2 forwards, free messages): "
                           "not a measurement.")
    set_takeaway(fig, f"With m = {m} micro-batches on p = {p} stages, the stages stand idle "
                      f"{measured_bubble(events, p):.0%} of the step; GPipe's formula (p - 1)/(m + p - 1) "
                      f"gives {bubble_fraction(p, m):.0%}.")
    return fig


TP_COLORS = {"tensor": PALETTE["vermillion"], "data": PALETTE["blue"]}
TP_MARKERS = {"tensor": "s", "data": "o"}      # told apart by shape as well as colour


@arguments(p=Given(validate_workers), hidden=Whole("p", 2**24, hint="the hidden width, at least one column per rank"),
           batch=Whole(hint="samples per step"), d_in=Whole(hint="the block's input width"),
           d_out=Optional(Whole(hint="the block's output width")), fit=_FIT)
def tensor_parallel_bytes_figure(p: int, hidden: int, batch: int, d_in: int = 256, d_out: int | None = None,
                                 fit: AlphaBeta | None = None) -> Figure:
    """Bytes each rank sends per step, tensor against data parallelism, against the hidden width
    (the block ``[d_in, hidden, d_out]``, float64, the ring); with ``fit``, the α–β model's time beside."""
    d_out = d_in if d_out is None else d_out
    widths = np.unique(np.round(np.geomspace(max(p, 16), 2**17, 40)).astype(int))
    fig, axes = new_figure(2 if fit is not None else 1, width=10 if fit is not None else 7.5, height=3.4)
    blocks = [[d_in, int(h), d_out] for h in widths]
    curves = {"tensor": [tensor_parallel_bytes(b, batch, p) / 1e6 for b in blocks],
              "data": [data_parallel_bytes(b, p) / 1e6 for b in blocks]}
    panels = [(axes[0], curves, "MB sent per rank per step", "Bytes (the ring's count)")]
    if fit is not None:
        modelled = {k: [communication_model_s(k, b, batch, p, fit.alpha, fit.beta) * 1e3 for b in blocks]
                    for k in curves}
        panels.append((axes[1], modelled,
                       "ms per step (α–β MODEL)", "Time of the all-reduces: α–β MODEL fitted here"))
    for ax, ys, ylabel, title in panels:
        for scheme, y in ys.items():
            ax.plot(widths, y, color=TP_COLORS[scheme], marker=TP_MARKERS[scheme], ms=4, markevery=4,
                    label=f"{scheme} parallel")
        ax.axvline(hidden, color="0.3", ls=":", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("hidden width")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=9.5)
        ax.grid(alpha=0.25, which="both")
        place_legend(ax, loc="upper left")
    fig.suptitle(f"Block {d_in}-hidden-{d_out}, batch {batch}, p = {p} ranks, float64", fontsize=10)
    footer_text(fig, "Counted, not timed: tensor parallelism all-reduces activations (batch · (d_in + d_out) "
                       "numbers per step), data parallelism every gradient (it grows with the width)."
                + ("\nThe right panel is a MODEL (α and β fitted to this machine's MPI timings)." if fit else ""))
    at = [d_in, hidden, d_out]
    tp, dp = tensor_parallel_bytes(at, batch, p) / 1e6, data_parallel_bytes(at, p) / 1e6
    set_takeaway(fig, f"At hidden width {hidden:,}, each of the {p} ranks sends {tp:.3g} MB per step under tensor "
                      f"parallelism and {dp:.3g} MB under data parallelism (counted, not timed); "
                      + ("tensor parallelism sends less." if tp < dp else "data parallelism sends less."
                         if dp < tp else "the two send the same."))
    return fig


@arguments(rs=_RS, fit=_FIT, then=_require_records)
def tensor_parallel_figure(rs: ResultSet, fit: AlphaBeta | None = None) -> Figure:
    """Measured per step on p ranks, tensor against data parallelism: the whole step and its all-reduces
    alone; with ``fit``, the α–β model's prediction of the all-reduces (hollow diamonds)."""
    ps = sorted({r["p"] for r in rs.records})
    fig, axes = new_figure(2, height=3.3)
    w = 0.38
    sizes, batch = rs.params.get("sizes", [0, 0, 0]), rs.params.get("batch", 0)
    for ax, part in zip(axes, ("step", "communicate")):
        # the all-reduces span decades: on a log axis (small bars would vanish), standing on a floor under the
        # smallest, as a bar from 0 has no bottom there
        log = part == "communicate"
        floor = min(r["median_s"] for r in rs.select(part=part)) * 1e3 / 3 if log else 0.0
        for i, scheme in enumerate(("tensor", "data")):
            recs = [rs.select(p=p, scheme=scheme, part=part)[0] for p in ps]
            xs = np.arange(len(ps)) + (i - 0.5) * w
            ax.bar(xs, [r["median_s"] * 1e3 - floor for r in recs], w, bottom=floor, color=TP_COLORS[scheme],
                   label=f"{scheme} parallel", hatch="//" if scheme == "tensor" else None, edgecolor="w")
            if log:
                ax.set_yscale("log")
            if fit is not None and part == "communicate":
                pred = [communication_model_s(scheme, sizes, batch, p, fit.alpha, fit.beta) for p in ps]
                ax.plot(xs, np.array(pred) * 1e3, "D", mfc="none", color="k", ms=6,
                        label="α–β model" if i == 0 else None)
        ax.set_xticks(range(len(ps)), [f"p = {p}" for p in ps])
        ax.set_ylabel("ms (median)" + (", log scale" if part == "communicate" else ""))
        place_legend(ax)
        ax.grid(alpha=0.25, axis="y")
    axes[0].set_title(f"One step of the block {'-'.join(map(str, sizes))}, batch {batch}", fontsize=9.5)
    axes[1].set_title("Its all-reduces alone (the course's ring)", fontsize=9.5)
    add_footer(fig, rs, extra=_over_text(rs, ps))
    step = {k: rs.select(p=ps[-1], scheme=k, part="step")[0]["median_s"] * 1e3 for k in ("tensor", "data")}
    set_takeaway(fig, f"On p = {ps[-1]} ranks one step takes {step['tensor']:.3g} ms with tensor parallelism and "
                      f"{step['data']:.3g} ms with data parallelism (median, measured here; "
                      f"tensor takes {step['tensor'] / step['data']:.2g}× data parallelism's time).")
    return fig


STAGE_COLORS = {0: PALETTE["blue"], 1: PALETTE["orange"], 2: PALETTE["green"], 3: PALETTE["vermillion"]}
STAGE_NAMES = {0: "stage 0 (data parallel)", 1: "stage 1 (Adam's moments)", 2: "stage 2 (+ gradients)",
               3: "stage 3 (+ parameters: FSDP)"}


@arguments(rs=_RS, then=_require_records)
def zero_figure(rs: ResultSet) -> Figure:
    """ZeRO measured on MPI ranks (:func:`course.parallel.timing.zero_sweep`): each rank's peak model-state bytes
    (bars; the formula's bytes between steps as diamonds), the bytes each rank sent per step (diamonds: the
    ring's formula), and a step against its compute alone, per stage and p."""
    ps, stages = sorted({r["p"] for r in rs.records}), sorted({r["stage"] for r in rs.records})
    fig, axes = new_figure(3, width=12, height=3.4)
    w = 0.8 / len(stages)
    rec = {(r["p"], r["stage"], r["part"]): r for r in rs.records}
    for i, st in enumerate(stages):
        xs = np.arange(len(ps)) + (i - (len(stages) - 1) / 2) * w
        for ax, key, formula in ((axes[0], "peak_bytes", "state_formula"), (axes[1], "bytes_sent", "bytes_formula")):
            ax.bar(xs, [rec[p, st, "step"][key] / 1e6 for p in ps], w, color=STAGE_COLORS[st], label=STAGE_NAMES[st])
            ax.plot(xs, [rec[p, st, "step"][formula] / 1e6 for p in ps], "D", mfc="none", color="k", ms=5,
                    label="formula" if i == 0 else None)
        axes[2].bar(xs, [rec[p, st, "step"]["median_s"] * 1e3 for p in ps], w, color=STAGE_COLORS[st],
                    label=STAGE_NAMES[st])
        axes[2].plot(xs, [rec[p, st, "compute"]["median_s"] * 1e3 for p in ps], "_", color="k", ms=12, mew=2,
                     label="its compute alone" if i == 0 else None)
    for ax, ylabel, title in ((axes[0], "MB per rank", "Model states per rank: peak; ◇ formula"),
                              (axes[1], "MB sent per rank per step", "Bytes sent (at Sendrecv); ◇ formula"),
                              (axes[2], "ms per step (median)", "One step (slowest rank)")):
        ax.set_xticks(range(len(ps)), [f"p = {p}" for p in ps])
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=9.5)
        ax.grid(alpha=0.25, axis="y")
    place_legend(axes[2])
    fig.suptitle(f"ZeRO on MPI ranks: MLP {'-'.join(map(str, rs.params.get('sizes', [])))}, "
                 f"{rs.params.get('n_params', 0):,} parameters, float64 + Adam, batch {rs.params.get('batch')}",
                 fontsize=10)
    add_footer(fig, rs, extra=_over_text(rs, ps) + "; bars: measured (bytes held and sent counted, time timed)")
    p, lo, hi = ps[-1], stages[0], stages[-1]
    held = {s: rec[p, s, "step"]["peak_bytes"] / 1e6 for s in (lo, hi)}
    sent = {s: rec[p, s, "step"]["bytes_sent"] for s in (lo, hi)}
    set_takeaway(fig, f"On p = {p} ranks each rank held at most {held[lo]:.3g} MB at stage {lo} and {held[hi]:.3g} MB "
                      f"at stage {hi} (measured), and sent {sent[hi] / sent[lo]:.3g}× stage {lo}'s bytes per step.")
    return fig


@arguments(sizes=Given(validate_sizes), batch=Whole(hint="samples per step, over all ranks"),
           stage=Given(validate_stage), p=Given(validate_workers), fit=_FIT,
           flops_per_s=Optional(Real(above=0, hint="the arithmetic rate measured here")), p_max=_P_MAX)
def zero_model_figure(sizes: Sequence[int], batch: int, stage: int, p: int, fit: AlphaBeta | None = None,
                      flops_per_s: float | None = None, p_max: int = 1024) -> Figure:
    """ZeRO's formulas against the ranks p (2 to ``p_max``) for an MLP of ``sizes``: model-state bytes per rank at
    each stage; with ``fit`` and ``flops_per_s``, the α–β MODEL's time of a step at ``stage`` (compute
    against communication, the batch split over the ranks), else the bytes each rank sends per step."""
    psi = sum(layer_lengths(sizes))
    ps = np.unique(np.round(np.geomspace(2, p_max, 40)).astype(int))
    fig, (a1, a2) = new_figure(2, width=10, height=3.5)
    for st in (0, 1, 2, 3):
        a1.plot(ps, [zero_bytes_per_rank(st, psi, int(q)) / 1e9 for q in ps], color=STAGE_COLORS[st],
                lw=2.5 if st == stage else 1.2, label=STAGE_NAMES[st])
    timed = fit is not None and flops_per_s is not None
    if timed:
        model = [zero_step_model(stage, sizes, batch, int(q), fit.alpha, fit.beta, flops_per_s) for q in ps]
        a2.plot(ps, [m["compute_s"] * 1e3 for m in model], color=PALETTE["blue"], label="compute (measured rate)")
        a2.plot(ps, [m["communication_s"] * 1e3 for m in model], color=STAGE_COLORS[stage], ls="--",
                label=f"collectives, {STAGE_NAMES[stage]}")
        a2.set_ylabel("ms per step (α–β MODEL)")
    else:
        for st in (0, 3):
            a2.plot(ps, [zero_bytes_sent(st, sizes, int(q)) / 1e6 for q in ps], color=STAGE_COLORS[st],
                    label=STAGE_NAMES[st] + (" = stages 1, 2" if st == 0 else ""))
        a2.set_ylabel("MB sent per rank per step")
    for ax in (a1, a2):
        ax.axvline(p, color="0.3", ls=":", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("ranks p")
        ax.grid(alpha=0.25, which="both")
        place_legend(ax, loc="lower left")
    a1.set_ylabel("GB of model states per rank")
    a1.set_title(f"{psi:,} parameters, float64 + Adam", fontsize=9.5)
    a2.set_title(f"Batch {batch} split over p" if timed else "The ring's bytes (counted by formula)", fontsize=9.5)
    footer_text(fig, "Formulas, not measurements (the measured bytes above match them). " + (
        "Right: a MODEL (α, β fitted to this machine's MPI timings, the compute rate measured here); "
        "nothing overlapped." if timed else "Give fit and flops_per_s for the α–β model's step time."))
    held = zero_bytes_per_rank(stage, psi, p) / 1e9
    text = (f"At p = {p}, stage {stage} keeps {held:.3g} GB per rank against "
            f"{zero_bytes_per_rank(0, psi, p) / 1e9:.3g} GB for data parallelism.")
    if timed:
        m = zero_step_model(stage, sizes, batch, p, fit.alpha, fit.beta, flops_per_s)
        text += (f" The model gives {m['compute_s'] * 1e3:.3g} ms of compute and {m['communication_s'] * 1e3:.3g} ms "
                 f"of collectives: {m['bound']}-bound.")
    set_takeaway(fig, text)
    return fig
