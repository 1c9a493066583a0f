"""The figure of :mod:`course.timeline`: one panel per step, a host row above the device's row, a bar per event.

The device row is drawn over a grey band: wherever the grey shows, the device had nothing to run.  Each
panel's title prints the device's busy share read off the events (:func:`~course.timeline.busy_share`), and
the figure's title says where the events come from: measured live here, recorded on a named GPU on a date
(a reference), or SYNTHETIC (made up, for tests).

>>> from course.timeline import synthetic_timeline
>>> fig = timeline_figure(synthetic_timeline(kernels=4, steps=2))
>>> "SYNTHETIC" in fig.get_suptitle(), "GPU busy 20 %" in fig.axes[0].get_title("left")
(True, True)
"""

from __future__ import annotations

import dataclasses
import math
import textwrap
from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.transforms import offset_copy

from .arguments import Given, OneOf, Whole, arguments
from .errors import BadInputError
from .legends import MIN_FONT_PT
from .plots import PALETTE, add_footer, footer_text, set_takeaway, tint, value_text
from .results import ResultSet
from .timeline import Event, Timeline, busy_share, timelines_from_results, validate_timeline, validate_timelines

__all__ = ["timeline_figure", "call_counts", "from_call", "STYLE", "IDLE_COLOR", "validate_timeline_source"]

#: (colour, legend entry) of each kind of event, on the host row and on a device row.
STYLE = {
    ("host", "launch"): (PALETTE["green"], "host: a launch call (cudaLaunchKernel, cudaGraphLaunch, ...)"),
    ("host", "sync"): (PALETTE["purple"], "host: waiting for the GPU to finish (synchronise)"),
    ("host", "memcpy"): (PALETTE["orange"], "host: a copy call (cudaMemcpy...; a copy to the host waits too)"),
    ("host", "runtime"): ("0.5", "host: another CUDA runtime call"),
    ("host", "op"): (tint("sky blue", 0.45), "host: a PyTorch op (Python and dispatch, its launch calls inside)"),
    ("host", "host"): (PALETTE["sky blue"], "host: Python between two array operations"),
    ("host", "read"): (PALETTE["black"], "host: a value read back (on a GPU: a copy and a wait)"),
    ("device", "kernel"): (PALETTE["vermillion"], "GPU: a kernel running"),
    ("device", "memcpy"): (PALETTE["orange"], "GPU: a copy or a fill"),
    ("device", "memset"): (PALETTE["orange"], "GPU: a copy or a fill"),
    ("device", "op"): (PALETTE["blue"], "CPU: one NumPy array operation (on a GPU, one kernel)"),
}
IDLE_COLOR = "0.88"
_UNDER = {("host", "op")}          # drawn under the calls made inside it


def validate_timeline_source(source: object) -> tuple[list[Timeline], ResultSet | None]:
    """``(timelines, result set or None)`` of what :func:`timeline_figure` draws: a result set of timelines, one
    timeline, or a list of them."""
    if isinstance(source, ResultSet):
        return timelines_from_results(source), source
    if isinstance(source, Timeline):
        return [source], None
    try:
        return validate_timelines(source), None
    except BadInputError:
        raise BadInputError("timeline_figure draws a ResultSet of timelines, a Timeline or a list of them; got "
                            f"{type(source).__name__}") from None


def _where(tls: list[Timeline], rs: ResultSet | None) -> str:
    """Where the events come from, for the figure's title."""
    if any(t.recorded == "synthetic" for t in tls):
        return "SYNTHETIC timeline, made up for tests: not a measurement"
    dates: dict[str, str] = {}          # each device once, with its own date
    for t in tls:
        dates.setdefault(t.device_name or t.device.upper(), t.date or (rs.date if rs is not None else ""))
    verb = "recorded on" if any(t.recorded == "reference" for t in tls) else "measured live on"
    if len(dates) == 1:
        (name, date), = dates.items()
        return f"{verb} {name}" + (f", {date}" if date else "")
    return f"{verb} " + ", ".join(f"{name} ({date})" if date else name for name, date in dates.items())


@arguments(tl=Given(validate_timeline))
def call_counts(tl: Timeline) -> dict[str, float]:
    """Per call of the step, on average: ``kernels`` (every kernel recorded: a recording is synchronised
    before and after its calls, so each kernel belongs to one of them), and the ``launches`` and ``waits``
    (synchronisations) the host made *inside* the calls, so that the recording's own synchronise after its
    last call is not counted as the step's; ``kernel_s``, the kernels' summed time."""
    n = max(tl.steps, 1)
    calls = [(e.start_s, e.end_s) for e in tl.select("host", "step")]

    def inside(e: Event) -> bool:
        return not calls or any(a <= e.start_s < b for a, b in calls)

    kernels = [e for e in tl.events if e.row != "host" and e.kind == "kernel"]
    return {"kernels": len(kernels) / n, "kernel_s": sum(e.duration_s for e in kernels) / n,
            "launches": sum(map(inside, tl.select("host", "launch"))) / n,
            "waits": sum(map(inside, tl.select("host", "sync"))) / n}


@arguments(tl=Given(validate_timeline), first=Whole(hint="the call to start from, 1 for the first"))
def from_call(tl: Timeline, first: int) -> Timeline:
    """``tl`` from the start of its call number ``first`` on (times shifted to start there, ``steps`` reduced):
    the events that begin before it are left out.  ``tl`` itself when it has fewer calls, or ``first`` <= 1."""
    starts = sorted(e.start_s for e in tl.select("host", "step"))
    if first <= 1 or len(starts) < first:
        return tl
    t0 = starts[first - 1]
    events = [dataclasses.replace(e, start_s=e.start_s - t0) for e in tl.events if e.start_s >= t0]
    return dataclasses.replace(tl, events=events, steps=max(tl.steps - (first - 1), 1))


def _row_name(row: str, tl: Timeline) -> str:
    if row == "host":
        return "host\n(CPU thread)" if tl.device == "gpu" else "host\n(Python)"
    return row.replace("gpu", "GPU").replace("cpu", "CPU:\narray ops")


def _count(n: float, what: str) -> str:
    return f"{n:.0f} {what}" + ("" if round(n) == 1 else "s")


def _title(tl: Timeline, whole: Timeline | None = None) -> str:
    """The panel's title: what it drew (``tl``), with the counts per step read off ``whole`` (the recording
    ``tl`` was cut from, if it was)."""
    n, span = max(tl.steps, 1), tl.span_s
    cut = whole is not None and whole.steps > tl.steps
    head = (f"{tl.title} ({'last ' if cut else ''}{_count(n, 'step')} in {value_text(span, 's')}"
            + (f" of {whole.steps} recorded)" if cut else ")"))
    if not any(e.row != "host" for e in tl.events):
        return head + ": no device events recorded"
    share = round(100 * busy_share(tl))
    if tl.device == "gpu":
        c = call_counts(whole if whole is not None else tl)
        return (f"{head}: GPU busy {share} % of the time\nper step: {_count(c['kernels'], 'kernel')} "
                f"({value_text(c['kernel_s'], 's')} of kernel time), {_count(c['launches'], 'launch call')}, "
                f"{_count(c['waits'], 'wait')} inside the step")
    return (f"{head}: CPU busy in array operations {share} % of the time\nper step: "
            f"{_count(len(tl.select('cpu', 'op')) / n, 'array operation')}, "
            f"{_count(len(tl.select('host', 'read')) / n, 'value')} read back")


def _panel(ax, tl: Timeline, scale: float, unit: str, labelled: set, whole: Timeline | None = None) -> None:
    rows = tl.rows() or ["host"]
    ys = {row: len(rows) - 1 - i for i, row in enumerate(rows)}

    def label(text: str) -> str:
        if text in labelled:
            return "_nolegend_"
        labelled.add(text)
        return text

    end = tl.span_s * scale
    for row, y in ys.items():
        if row != "host":
            idle = "GPU idle: nothing running" if tl.device == "gpu" else "CPU row empty: Python is running"
            ax.broken_barh([(0, end)], (y - 0.35, 0.7), facecolors=IDLE_COLOR, label=label(idle), zorder=1)
        where = "host" if row == "host" else "device"
        for kind in dict.fromkeys(e.kind for e in tl.select(row)):
            events = tl.select(row, kind)
            if kind == "step":
                for e in events:
                    ax.axvline(e.start_s * scale, color="0.3", ls=":", lw=1, zorder=4,
                               label=label("dotted line: a call of the step begins"))
                continue
            color, text = STYLE.get((where, kind), ("0.5", f"{where}: {kind}"))
            if kind == "read":
                ax.plot([e.start_s * scale for e in events], [y + 0.42] * len(events), ls="none", marker="v",
                        ms=6, color=color, zorder=5, label=label(text))
                continue
            under = (where, kind) in _UNDER
            h = 0.7 if under else 0.5
            ax.broken_barh([(e.start_s * scale, e.duration_s * scale) for e in events], (y - h / 2, h),
                           facecolors=color, edgecolors=color, linewidth=0.6, zorder=2 if under else 3,
                           gid=f"{row}|{kind}", label=label(text))
    ax.set_yticks(list(ys.values()), [_row_name(r, tl) for r in ys], fontsize=9)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlim(0, end if end > 0 else 1)
    ax.set_xlabel(f"time since the first event ({unit})", fontsize=9)
    ax.set_title(_title(tl, whole), fontsize=9.5, loc="left")
    ax.grid(True, axis="x", alpha=0.3)


def _legend_below(fig: Figure, axes: list) -> None:
    """One legend for every panel, under them, in two columns."""
    handles, labels = [], []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fits = max(int((fig.get_figwidth() / 2 - 0.7) / (0.6 * MIN_FONT_PT / 72)), 24)
    under = offset_copy(axes[-1].transAxes, fig=fig, y=-0.45, units="inches")    # below the time axis' label
    axes[-1].legend(handles, [textwrap.fill(lab, fits) for lab in labels], loc="upper center", ncol=2,
                    fontsize=MIN_FONT_PT, frameon=False, bbox_to_anchor=(0.5, 0.0), bbox_transform=under)


@arguments(source=Given(validate_timeline_source), same_scale=OneOf(True, False),
           first_call=Whole(hint="the call of the step to draw from, 1 for the first"))
def timeline_figure(source: ResultSet | Timeline | Sequence[Timeline], same_scale: bool = False,
                    title: str = "", first_call: int = 1, note: str = "") -> Figure:
    """One panel per timeline of ``source`` (a result set of timelines, one timeline, or several): the
    host's row above the device's, a bar per event, the device's idle time in grey, its busy share in
    the panel's title.  ``same_scale`` gives every panel the longest one's time axis (otherwise each panel
    fills the width, and its title gives its length).  ``first_call`` > 1 draws each timeline from that
    call of its step on (:func:`from_call`: a first call that carries a profiler's start-up is left out),
    while the counts per step in each title are still read off every call recorded.  ``note`` is added
    to the footer.
    """
    whole, rs = source
    tls = [from_call(t, first_call) for t in whole]
    if not tls:
        fig = Figure(figsize=(9, 1.6), layout="constrained")
        fig.text(0.5, 0.5, "No timeline to draw: none was measured here and none was recorded on a GPU.",
                 ha="center", va="center", fontsize=10)
        set_takeaway(fig, "No timeline: 0 events to draw.")
        return fig
    longest = max(t.span_s for t in tls)
    entries = {(e.row == "host", e.kind) for t in tls for e in t.events} | {(False, "idle") for t in tls
                                                                           if len(t.rows()) > 1}
    legend_in = 0.4 * math.ceil(len(entries) / 2)          # two columns, a label may take two lines
    fig = Figure(figsize=(10, 0.9 + legend_in + sum(1.05 + 0.42 * len(t.rows()) for t in tls)), layout="constrained")
    axes = fig.subplots(len(tls), 1, squeeze=False)[:, 0]
    labelled: set = set()
    for ax, tl, w in zip(axes, tls, whole):
        span = longest if same_scale else tl.span_s
        scale, unit = (1e6, "µs") if span < 2e-3 else (1e3, "ms")
        _panel(ax, tl, scale, unit, labelled, w)
        if same_scale:
            ax.set_xlim(0, longest * scale)
    what = ("What the host (a CPU thread) and the GPU do in each training step" if tls[0].device == "gpu" else
            "The training step on a CPU, array operation by array operation")
    fig.suptitle(title or f"{what}: {_where(tls, rs)}", fontsize=10)
    _legend_below(fig, list(axes))
    how = "; ".join(dict.fromkeys(t.how for t in tls if t.how))
    notes = [f"{t.label}: {n}" for t in tls for n in t.notes]
    extra = "\n".join(textwrap.shorten(x, 400) for x in [how] + notes + [note] if x)
    if any(t.recorded == "synthetic" for t in tls):
        footer_text(fig, "SYNTHETIC: made up for tests; nothing here was measured.")
    elif rs is not None:
        add_footer(fig, rs, extra=extra)
    elif any(t.recorded == "reference" for t in tls):      # recorded elsewhere: never "measured live" here
        where = _where(tls, None)
        footer_text(fig, "\n".join(x for x in [f"{where[0].upper()}{where[1:]}: not measured in this run", extra] if x))
    else:
        add_footer(fig, devices=sorted({t.device for t in tls}), extra=extra)
    gpu = tls[0].device == "gpu"
    set_takeaway(fig, ("The GPU runs kernels " if gpu else "The CPU runs array operations ") + "; ".join(
        f"{round(100 * busy_share(t))} % of {t.label}'s {value_text(t.span_s / max(t.steps, 1), 's')} per step"
        for t in tls) + ("; the rest of the time it is idle, waiting for the host." if gpu else
                         "; the rest of the time goes to the Python between them."))
    return fig
