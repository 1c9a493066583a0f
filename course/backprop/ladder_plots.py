"""Lesson 01's figures of what makes the step fast: :func:`ablation_figure` (the course's step against the same
step allocating, or fed float64 data), :func:`ladder_figure` (the fast step's ladder: step time against the width,
one line per rung and PyTorch beside them), and the rungs' timelines: :func:`cpu_step_timeline`, the timeline of
the rungs run on this CPU, each array operation timed, which :func:`course.timeline_plots.timeline_figure` draws,
and :func:`ladder_timeline_figure`, the GPU's timelines of the rungs (recorded by ``tools/gpu_timelines.py``, last
in a GPU run) under a caption that says what each rung removed.  The training, trace, checkpointing and precision
figures are :mod:`~course.backprop.plots`'.

>>> ablation_figure({"course": 1e-3, "allocating": 2e-3}).axes[0].get_xlabel()
'ms'
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure
from matplotlib.transforms import offset_copy

from ..arguments import Given, Optional, Real, Whole, arguments
from ..counting import CountingNumpy
from ..cpu import cpu_info
from ..errors import BadInputError, whole_number
from ..plots import (
    SERIES_COLORS,
    add_footer,
    bar_figure,
    log2_x,
    mark_noisy,
    new_figure,
    series_style,
    set_takeaway,
    source_tag,
    value_text,
)
from ..results import ResultSet
from ..timeline import Timeline, busy_share, counted_timeline, timelines_to_results, validate_timelines
from ..timeline_plots import call_counts, from_call, timeline_figure
from .fast_step import RUNG_TITLES, RUNGS, FastStep
from .layers import MLP
from .readers import validate_references, validate_results
from .trace import random_batch
from .validate import validate_step_times

__all__ = ["ablation_figure", "ladder_figure", "cpu_step_timeline", "ladder_timeline_figure", "timeline_devices"]


@arguments(times=Given(validate_step_times))
def ablation_figure(times: dict, title: str = "") -> Figure:
    """Bars of :func:`speed_ablation`'s times, each labelled with its ratio to the course's step."""
    what = {"course": "course: buffers reused, float32", "allocating": "new arrays every step, float32",
            "float64 data": "new arrays, float64 input data"}
    base = times["course"]
    items = [(f"{what.get(k, k)} ({v / base:.2f}×)", v * 1e3, "cpu") for k, v in times.items()]
    return bar_figure(items, title=title or "One SGD step of 784-512-512-10, batch 256: what makes it fast",
                      unit="ms")


#: The ladder's series in a fixed order: one colour and marker each, on every device and in every figure.
_LADDER_ORDER = (*RUNGS, "torch eager", "torch graph", "torch eager tf32", "torch graph tf32")


@arguments(live=Optional(Given(validate_results, name="live")), references=Given(validate_references),
           gemm_gflops=Optional(Real(above=0, hint="a float32 matrix-product rate, GFLOP/s")))
def ladder_figure(live: ResultSet | None, references: Sequence[ResultSet] = (), gemm_gflops: float | None = None,
                  gemm_label: str = "") -> Figure:
    """Step time against width, one line per rung and peer: ``live`` solid, each reference dashed, in up to three
    panels that share their time axis: the CPU's rungs; the GPU's rungs (a) to (d); the GPU's best rung (d)
    against PyTorch's steps.  On one axes they were fourteen series.

    A rung keeps its colour and marker on every device and in every panel.  With ``gemm_gflops`` (a float32
    matrix-product rate, ``gemm_label`` saying where it was measured) a grey dotted line in each GPU panel marks
    the time the step's FLOPs would take at that rate.  Draws only records with a ``rung``; a reference without
    any says so in the footer.
    """
    missing, drawn, flops = [], [], {}
    sources = ([live] if live is not None else []) + list(references)
    several = sum(1 for rs in sources if rs.source == "reference" and any(r.get("rung") for r in rs.records)) > 1
    curves: dict[str, list] = {"cpu": [], "gpu rungs": [], "gpu peers": []}
    peers = False
    for rs in sources:
        ref = rs.source == "reference"
        recs = [r for r in rs.records if r.get("rung")]
        if not recs:
            missing.append(rs.label)
            continue
        drawn += [rs] if ref else []
        for dev in ("cpu", "gpu"):
            for rung in dict.fromkeys(r["rung"] for r in recs if r["device"] == dev):
                pts = sorted((r["width"], r["median_s"], r["title"], bool(r.get("noisy"))) for r in recs
                             if r["device"] == dev and r["rung"] == rung)
                order = _LADDER_ORDER.index(rung) if rung in _LADDER_ORDER else len(_LADDER_ORDER)
                where = source_tag(rs, dev, live="") if ref and several else ""   # the caption says it once
                curve = (pts, order, ref, f"{dev.upper()} {pts[0][2]}" + where + ("" if ref else " (live)"))
                if dev == "cpu":
                    curves["cpu"].append(curve)
                else:
                    peers = peers or rung.startswith("torch")
                    curves["gpu peers" if rung.startswith("torch") else "gpu rungs"].append(curve)
                    if rung == "graph":               # the course's best rung, beside PyTorch's steps
                        curves["gpu peers"].append(curve)
                flops |= {r["width"]: r["flops"] for r in recs if r.get("flops")}
    if not peers:
        curves["gpu peers"] = []                      # no PyTorch step: no panel to set the best rung beside
    names = [k for k, v in curves.items() if v] or ["gpu rungs"]
    titles = {"cpu": "CPU: the rungs", "gpu rungs": "GPU: each rung removes a host cost",
              "gpu peers": "GPU: the best rung (d) beside PyTorch"}
    fig, axes = new_figure(len(names), width=4.3 * len(names) + 0.8, height=5.6)
    for ax in axes[1:]:
        ax.sharey(axes[0])
    for ax, name in zip(axes, names):
        for pts, order, ref, label in curves[name]:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], ms=4, **series_style(order, recorded=ref), label=label)
            mark_noisy(ax, [p[0] for p in pts], [p[1] for p in pts], [p[3] for p in pts],
                       SERIES_COLORS[order % len(SERIES_COLORS)])
        if name != "cpu" and gemm_gflops and flops:
            ws = sorted(flops)
            ax.plot(ws, [flops[w] / (gemm_gflops * 1e9) for w in ws], color="0.45", ls=":", lw=1.5,
                    label=f"the step's FLOPs at the float32 GEMM rate{', ' + gemm_label if gemm_label else ''}")
        if not curves[name]:
            ax.text(0.5, 0.5, "no ladder recorded yet", ha="center", va="center", transform=ax.transAxes,
                    fontsize=9, color="0.3")
        log2_x(ax)
        ax.set_yscale("log")
        ax.set_xlabel("hidden width w\n(784-w-w-10, batch 256, float32)")
        ax.set_title(titles[name], fontsize=9.5)
        ax.grid(True, which="both", alpha=0.25)
        handles, labels = ax.get_legend_handles_labels()
        if handles:
            under = offset_copy(ax.transAxes, fig=fig, y=-0.7, units="inches")   # below the ticks and the x label
            ax.legend(handles, [textwrap.fill(lab, 38) for lab in labels], loc="upper center", ncol=1, fontsize=9,
                      bbox_to_anchor=(0.5, 0.0), bbox_transform=under)
    axes[0].set_ylabel("time per training step (s)")
    # one footer (a second one would be written over the first)
    add_footer(fig, live, drawn, extra="No ladder (records with a rung) in: " + "; ".join(missing) if missing else "")
    return set_takeaway(fig, _ladder_takeaway([rs for rs in sources if any(r.get("rung") for r in rs.records)]))


def _rung_name(r: dict) -> str:
    """``"rung d"`` for a record titled ``"(d) CUDA graph ..."``, else its title."""
    m = re.match(r"\(([a-z])\)", r.get("title", ""))
    return f"rung {m[1]}" if m else r.get("title", r["rung"])


def _ladder_takeaway(sources: Sequence[ResultSet]) -> str:
    """Per device of each source: its fastest rung at the smallest and the largest width drawn."""
    said = []
    for rs in sources:
        for dev in ("gpu", "cpu"):
            recs = [r for r in rs.records if r.get("rung") and r["device"] == dev and r["rung"] in RUNGS]
            if not recs:
                continue
            lo, hi = min(r["width"] for r in recs), max(r["width"] for r in recs)
            best = {w: min((r for r in recs if r["width"] == w), key=lambda r: r["median_s"]) for w in (lo, hi)}
            who = (rs.gpu_name if dev == "gpu" else rs.cpu_name) or dev.upper()
            said.append(f"{dev.upper()} {who} ({'recorded' if rs.source == 'reference' else 'live'}): fastest step "
                        + ", ".join(f"{value_text(best[w]['median_s'], 's')} at width {w:,} ({_rung_name(best[w])})"
                                    for w in dict.fromkeys((lo, hi))))
    return ("; ".join(said) + ".") if said else "No ladder to draw: no records with a rung."


# ----------------------------------------------------------------------------- the rungs' timelines

def cpu_step_timeline(rungs: Sequence[str] = ("eager", "fused"), sizes: Sequence[int] = (784, 256, 256, 10),
                      batch: int = 256, steps: int = 3) -> ResultSet:
    """The timeline of ``steps`` training steps of each rung on this CPU: every array operation of the
    step timed (``CountingNumpy(record=True)``), and the Python time between them.

    On a GPU each array operation would be one kernel launch; here the "host" row is the Python that
    a GPU would have to wait for.  Rungs ``"eager"``, ``"no_readback"`` and ``"fused"`` (its kernels'
    NumPy versions) run on a CPU.

    >>> rs = cpu_step_timeline(("fused",), sizes=(8, 4, 3), batch=4, steps=1)
    >>> sorted({r["kind"] for r in rs.records})
    ['host', 'op', 'step']
    """
    batch = whole_number("batch", batch, hint="the examples in one step")
    bad = [r for r in rungs if r not in RUNGS[:3]]
    if bad or not rungs:
        raise BadInputError(f"a CPU timeline takes rungs from {RUNGS[:3]}, got {list(rungs)!r}; the graph rung needs "
                            "a GPU (its timeline is recorded by tools/gpu_timelines.py)")
    model = MLP(list(sizes), seed=0)
    x, y = random_batch(model, batch)
    timelines = []
    for rung in rungs:
        ns = CountingNumpy(record=True)
        fast = FastStep(model, rung, batch=batch, lr=1e-3, namespace=ns)
        fast.load(x, y)
        timelines.append(counted_timeline(fast.step, ns.counter, rung, RUNG_TITLES[rung], steps=steps,
                                          device_name=cpu_info()["model"]))
    return timelines_to_results(timelines, params={"sizes": "-".join(map(str, sizes)), "batch": batch,
                                                   "dtype": "float32", "steps": steps})



#: What each rung does to the step before it, for the timelines' caption.
_REMOVES = {"no_readback": "stops reading back", "fused": "fuses the small operations",
            "graph": "replays (c) as one CUDA graph"}


def _validate_device_name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadInputError(f"device must be a device's name, a string (see timeline_devices); got {value!r:.80}")
    return value


@arguments(timelines=Given(validate_timelines))
def timeline_devices(timelines: Sequence[Timeline]) -> list[str]:
    """The devices ``timelines`` were recorded on, each once, in order: one figure of
    :func:`ladder_timeline_figure` each."""
    return list(dict.fromkeys(t.device_name or t.device for t in timelines))


@arguments(timelines=Given(validate_timelines), first_call=Whole(hint="the first call drawn, from 1"),
           device=Optional(Given(_validate_device_name)))
def ladder_timeline_figure(timelines: Sequence[Timeline], first_call: int = 2, device: str | None = None) -> Figure:
    """The GPU timelines of the ladder's rungs (and PyTorch's steps beside them), each drawn from call
    ``first_call`` on, under a caption that says what each rung removed: kernels, launch calls and waits
    per step, read off every call recorded, and the GPU's busy share and kernel time.

    One device's timelines per figure: ``device`` names it (a GPU's name, as :func:`timeline_devices` lists
    them); None draws the first device's.  Timelines of two GPUs in one figure doubled its panels and mixed
    their counts."""
    names = timeline_devices(timelines)
    device = names[0] if device is None and names else device
    if device is not None and device not in names:
        raise BadInputError(f"device must name a device of these timelines ({', '.join(names) or 'none'}); "
                            f"got {device!r}")
    tls = [t for t in timelines if (t.device_name or t.device) == device] if device is not None else list(timelines)
    start = [e.duration_s for t in tls for e in t.events if e.name == "Activity Buffer Request"]
    n = max((t.steps for t in tls), default=0)
    left = "Call 1" if first_call == 2 else f"Calls 1 to {first_call - 1}"
    note = (f"{left} of each timeline left out of the drawing"
            + (": the profiler's start-up ran there (an Activity Buffer Request of up to "
               f"{value_text(max(start), 's')} on the host)" if start else "")
            + f"; the counts per step are read off all {n} calls.")
    fig = timeline_figure(tls, first_call=first_call, note=note if first_call > 1 else "")
    by = {t.label: t for t in tls}
    counts = {k: call_counts(t) for k, t in by.items()}
    busy = {k: round(100 * busy_share(from_call(t, first_call))) for k, t in by.items()}

    def many(v: float, word: str) -> str:
        return f"{v:.0f} {word}" + ("" if round(v) == 1 else "s")

    def name(k: str) -> str:            # the title without the network and the batch it ran on
        return re.sub(r", \d+(-\d+)+, batch \d+$", "", by[k].title)

    def per_step(k: str) -> str:
        c = counts[k]
        return (f"{many(c['kernels'], 'kernel')} ({value_text(c['kernel_s'], 's')} of kernel time), "
                f"{many(c['launches'], 'launch call')}, {many(c['waits'], 'wait')} for the GPU per step; "
                f"GPU busy {busy[k]} %")

    said, before = [], None
    for rung in RUNGS:
        if rung not in by:
            continue
        if before is None:
            said.append(f"{name(rung)}: {per_step(rung)}")
        else:
            moved = [f"{what} {counts[before][key]:.0f} → {counts[rung][key]:.0f}"
                     for key, what in (("kernels", "kernels"), ("launches", "launch calls"), ("waits", "waits"))
                     if round(counts[before][key]) != round(counts[rung][key])]
            moved.append(f"kernel time {value_text(counts[before]['kernel_s'], 's')} → "
                         f"{value_text(counts[rung]['kernel_s'], 's')}")
            said.append(f"{by[rung].title[:3]} {_REMOVES.get(rung, 'changes the step')}: " + ", ".join(moved)
                        + f" per step, GPU busy {busy[before]} → {busy[rung]} %")
        before = rung
    peers = [k for k in by if k not in RUNGS]
    said += [f"{name(k)}: {per_step(k)}" for k in peers]
    if said:
        set_takeaway(fig, "; ".join(said) + ".")
    return fig
