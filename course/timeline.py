"""Timelines of a step: what the host did and what the device ran, event by event, with the gaps between.

A :class:`Timeline` is a list of :class:`Event`\\ s (a row, ``"host"``, ``"gpu"`` or ``"cpu"``, a name, a start,
a duration and a kind: ``kernel``, ``memcpy``, ``memset``, ``launch``, ``sync``, ``runtime``, ``op``,
``read``, ``host`` or ``step``), plus what it is: which step, on what, how many steps, how recorded.  Times
are seconds from the timeline's first event.  Timelines are stored as a :class:`~course.results.ResultSet`
(one record per event, ``"step_timelines"`` by default) so they are saved, shipped as references in
``course/reference/`` and loaded with their provenance like any result.

Three ways to make one:

* :func:`record_timelines` profiles callables on a GPU with PyTorch's profiler (kernels from CUPTI, the
  host's CUDA runtime calls), through :func:`from_torch_profiler`;
* :func:`counted_timeline` times a step run on ``CountingNumpy(record=True)`` (:mod:`course.counting`) on
  this CPU: each array operation, and the Python time between them;
* :func:`synthetic_timeline` makes one up, for tests only: it is labelled synthetic everywhere it is drawn.

:func:`timeline_figure` (in :mod:`course.timeline_plots`) draws them.

>>> from course.counting import CountingNumpy
>>> ns = CountingNumpy(record=True)
>>> a = ns.ones(1000)
>>> tl = counted_timeline(lambda: a.__iadd__(1.0), ns.counter, label="add one", steps=2)
>>> [e.kind for e in tl.select(row="cpu")], 0 < busy_share(tl) < 1
(['op', 'op'], True)
>>> rs = timelines_to_results([tl])
>>> [(t.label, len(t.events) == len(tl.events)) for t in timelines_from_results(rs)]
[('add one', True)]
"""

from __future__ import annotations

import math
import re
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .arguments import Given, Real, Whole, arguments
from .errors import BadInputError, GPUUnavailableError, ResultsError, finite_number, whole_number
from .results import ResultSet, load_reference

__all__ = ["Event", "Timeline", "KINDS", "DEVICE_KINDS", "STEP_PREFIX", "busy_share", "short_kernel_name",
           "timelines_to_results", "timelines_from_results", "from_torch_profiler", "record_timelines",
           "counted_timeline", "synthetic_timeline", "load_timelines", "validate_timeline", "validate_timelines",
           "MAX_SYNTHETIC_EVENTS"]

#: What an event is.  On the device: ``kernel``, ``memcpy``, ``memset`` (a GPU) or ``op`` (a NumPy array
#: operation, on the CPU).  On the host: ``launch`` (asking for a kernel or a graph), ``sync`` (waiting for
#: the GPU), ``memcpy`` (a copy call), ``runtime`` (any other CUDA call), ``op`` (a PyTorch op: Python and
#: dispatch), ``host`` (the Python between two array operations), ``read`` (a value read back) and ``step``
#: (one call of the step, from start to end: a boundary, not work).
KINDS = ("kernel", "memcpy", "memset", "op", "launch", "sync", "runtime", "host", "read", "step")
#: The kinds that keep a device row busy.
DEVICE_KINDS = frozenset({"kernel", "memcpy", "memset", "op"})
#: The name each profiled call of a step is wrapped in (``torch.profiler.record_function``): ``course step 1``.
STEP_PREFIX = "course step "
#: The most events :func:`synthetic_timeline` makes (a test's timeline is a few dozen).
MAX_SYNTHETIC_EVENTS = 10**6


@dataclass
class Event:
    """One thing that took time: on ``row`` (``"host"``, ``"gpu"``, ``"gpu stream 7"``, ``"cpu"``), from
    ``start_s`` for ``duration_s`` seconds."""

    row: str
    name: str
    start_s: float
    duration_s: float
    kind: str

    def __post_init__(self) -> None:
        require_event(self)

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s


def require_event(e: Event) -> None:
    """Refuse an event that is no event: a kind outside :data:`KINDS`, a start or a duration that is no finite
    number, or a negative duration."""
    if e.kind not in KINDS:
        raise BadInputError(f"an event's kind must be one of {', '.join(KINDS)}; got {e.kind!r:.60}")
    finite_number("start_s", e.start_s, hint="seconds from the timeline's first event")
    if finite_number("duration_s", e.duration_s, hint="how long the event took, in seconds") < 0:
        raise BadInputError(f"an event's duration_s must be >= 0 seconds, got {e.duration_s!r}")


@dataclass
class Timeline:
    """The events of ``steps`` calls of one step (``label``: a rung such as ``"eager"``, or ``"torch graph"``).

    ``device`` is ``"gpu"`` or ``"cpu"``; ``device_name`` names it; ``recorded`` is ``"live"``,
    ``"reference"`` (recorded elsewhere) or ``"synthetic"`` (made up, for tests); ``how`` says how the
    events were taken; ``notes`` what was left out and why.
    """

    label: str
    events: list[Event]
    device: str = "cpu"
    title: str = ""
    steps: int = 1
    how: str = ""
    device_name: str = ""
    recorded: str = "live"
    date: str = ""
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        validate_events(self.events)
        self.steps = whole_number("steps", self.steps, hint="the calls of the step the timeline holds")

    def select(self, row: str | None = None, kind: str | None = None) -> list[Event]:
        return [e for e in self.events if (row is None or e.row == row) and (kind is None or e.kind == kind)]

    def rows(self) -> list[str]:
        """``"host"`` first, then the device rows in the order they appear."""
        rows = list(dict.fromkeys(e.row for e in self.events))
        return sorted(rows, key=lambda r: r != "host")

    @property
    def span_s(self) -> float:
        """From the first event's start to the last event's end."""
        return max((e.end_s for e in self.events), default=0.0) - min((e.start_s for e in self.events), default=0.0)


def validate_events(events: object) -> list:
    """``events`` if it is a list of :class:`Event`."""
    if not isinstance(events, list) or not all(isinstance(e, Event) for e in events):
        raise BadInputError(f"a timeline's events must be a list of course.timeline.Event, got "
                            f"{type(events).__name__}")
    return events


def validate_timeline(tl: object) -> Timeline:
    """``tl`` if it is a :class:`Timeline` (what :func:`counted_timeline` and the loaders return)."""
    if not isinstance(tl, Timeline):
        raise BadInputError(f"expected a course.timeline.Timeline, got {type(tl).__name__}: make one with "
                            "counted_timeline(...) or load the recorded ones with load_timelines()")
    return tl


def validate_timelines(timelines: object) -> list[Timeline]:
    """``timelines`` as a list of :class:`Timeline` (one timeline alone is refused: wrap it in a list)."""
    if isinstance(timelines, (str, bytes, Timeline)) or not isinstance(timelines, Sequence):
        raise BadInputError(f"expected a list of Timeline, got {type(timelines).__name__}")
    return [validate_timeline(t) for t in timelines]


def validate_experiment_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise BadInputError(f"experiment must name the recorded experiment (e.g. 'step_timelines'), got {name!r:.60}")
    return name


def validate_result_set(rs: object) -> ResultSet:
    if not isinstance(rs, ResultSet):
        raise BadInputError(f"expected a course.results.ResultSet of timelines, got {type(rs).__name__}")
    return rs


def _union_s(intervals: Iterable[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


@arguments(tl=Given(validate_timeline))
def busy_share(tl: Timeline, row: str | None = None) -> float:
    """The share of the timeline's span in which ``row`` (default: every row but the host's) runs
    something: kernels and copies on a GPU, array operations on a CPU.  Overlaps count once.

    >>> tl = Timeline("demo", [Event("gpu", "k", 0.0, 1.0, "kernel"), Event("host", "launch", 0.0, 4.0, "launch")])
    >>> busy_share(tl)
    0.25
    """
    busy = [(e.start_s, e.end_s) for e in tl.events if e.kind in DEVICE_KINDS
            and (e.row == row if row is not None else e.row != "host")]
    return _union_s(busy) / tl.span_s if tl.span_s > 0 else 0.0


@arguments(width=Whole(hint="the most characters the name may take"))
def short_kernel_name(name: str, width: int = 60) -> str:
    """A kernel's name without its return type, arguments, namespaces and lambdas, cut to ``width``.

    >>> short_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, "
    ...                   "at::detail::Array<char*, 3> >(int, at::native::AddFunctor<float>, "
    ...                   "at::detail::Array<char*, 3>)")
    'vectorized_elementwise_kernel<4, AddFunctor<float>, Array<c…'
    """
    s = re.sub(r"^void\s+", "", str(name).strip())
    while (t := re.sub(r"\([^()]*\)", "", s)) != s:          # every (...) at any depth: arguments, "(anonymous ...)"
        s = t
    while (t := re.sub(r"\{[^{}]*\}", "", s)) != s:          # {lambda#1} and the like
        s = t
    s = re.sub(r"(::)+", "::", re.sub(r"\boperator\b(\s*const)?", "", s))
    s = re.sub(r"::(?=[\s,>]|$)", "", s)                      # what a lambda left: "functor::" -> "functor"
    s = re.sub(r"[A-Za-z_]\w*::|::", "", s)                   # namespaces
    s = re.sub(r"\s+", " ", s).strip(" ,")
    return s if len(s) <= width else s[:width - 1].rstrip() + "…"


# ----------------------------------------------------------------------------- stored as a ResultSet

_FIELDS = ("row", "name", "kind", "start_s", "duration_s")


@arguments(timelines=Given(validate_timelines))
def timelines_to_results(timelines: Sequence[Timeline], experiment: str = "step_timelines",
                         params: Mapping | None = None) -> ResultSet:
    """One record per event (``device``, ``timeline`` and the event's fields, times to the nanosecond); the
    timelines' order and what each is (``title``, ``how``, ``steps``) in ``params``, their notes in ``notes``."""
    about = {t.label: {"title": t.title, "how": t.how, "steps": t.steps} for t in timelines}
    rs = ResultSet(experiment, params=dict(params or {}) | {"timelines": list(about), "about": about})
    for tl in timelines:
        for e in tl.events:
            rs.add(device=tl.device, timeline=tl.label, row=e.row, name=e.name, kind=e.kind,
                   start_s=round(float(e.start_s), 9), duration_s=round(float(e.duration_s), 9))
        rs.notes += [f"{tl.label}: {n}" for n in tl.notes]
    return rs


def _event(r: Mapping) -> Event | None:
    try:                               # an Event refuses a kind it does not know, and a time that is no number
        return Event(str(r["row"]), str(r["name"]), float(r["start_s"]), float(r["duration_s"]), str(r["kind"]))
    except (KeyError, TypeError, ValueError):
        return None


@arguments(rs=Given(validate_result_set))
def timelines_from_results(rs: ResultSet) -> list[Timeline]:
    """The timelines stored in ``rs`` (by :func:`timelines_to_results`), in their order.  A record that is
    not an event (a field missing, a kind unknown, a time that is no number) is left out, with a note on its
    timeline: a damaged file degrades, it does not raise."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rs.records:
        groups.setdefault((str(r.get("device")), str(r.get("timeline", "?"))), []).append(r)
    order = {label: i for i, label in enumerate(rs.params.get("timelines") or [])}
    about = rs.params.get("about") if isinstance(rs.params.get("about"), dict) else {}
    out = []
    for (device, label), recs in sorted(groups.items(), key=lambda kv: order.get(kv[0][1], len(order))):
        events = [e for e in map(_event, recs) if e is not None]
        what = about.get(label) if isinstance(about.get(label), dict) else {}
        steps = what.get("steps")
        tl = Timeline(label, events, device=device, title=str(what.get("title") or label),
                      how=str(what.get("how") or ""), recorded=rs.source, date=rs.date,
                      device_name=(rs.gpu_name or "GPU") if device == "gpu" else rs.cpu_name,
                      steps=steps if isinstance(steps, int) and steps > 0 else 1)
        if len(events) < len(recs):
            tl.notes.append(f"{len(recs) - len(events)} of its {len(recs)} records are not events (a field "
                            "missing, or not a number) and are left out")
        tl.notes += [n.split(": ", 1)[1] for n in rs.notes if n.startswith(f"{label}: ")]
        tl.notes += [n for n in rs.notes if "left out of its figures" in n]
        out.append(tl)
    return out


@arguments(experiment=Given(validate_experiment_name))
def load_timelines(experiment: str = "step_timelines", directory: Any = None) -> tuple[list[Timeline], list[str]]:
    """The timelines recorded on real GPUs and shipped in ``course/reference/`` (maybe none), and a note
    for each file that could not be read: a missing or damaged reference never raises.

    >>> timelines, notes = load_timelines("no_such_timelines")
    >>> timelines, notes
    ([], [])
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            sets = load_reference(experiment, directory)
        except (OSError, ResultsError) as exc:
            return [], [f"the recorded timelines could not be read: {exc}"]
    notes = [str(w.message) for w in caught]
    return [tl for rs in sets for tl in timelines_from_results(rs)], notes


# ----------------------------------------------------------------------------- from PyTorch's profiler

def _host_kind(name: str) -> str:
    low = name.lower()
    if "launch" in low:
        return "launch"
    if "synchronize" in low:
        return "sync"
    if "memcpy" in low or "memset" in low:
        return "memcpy"
    return "runtime"


def _classify(e: Any) -> tuple[str, str] | None:
    """(``"host"`` or ``"device"``, kind) of one profiler event, or None for one the timeline leaves out
    (a nested PyTorch op, an annotation on the device, a Python function)."""
    name = str(e.name)
    device = str(getattr(e, "device_type", "CPU")).upper().endswith(("CUDA", "HIP"))
    act = str(getattr(e, "activity_type", None) or "").lower()
    if device:
        if name.startswith(STEP_PREFIX) or act not in ("", "kernel", "gpu_memcpy", "gpu_memset"):
            return None
        low = name.lower()
        return "device", ("memcpy" if act == "gpu_memcpy" or low.startswith("memcpy") else
                          "memset" if act == "gpu_memset" or low.startswith("memset") else "kernel")
    if name.startswith(STEP_PREFIX):
        return "host", "step"
    if act in ("cuda_runtime", "cuda_driver") or (not act and re.match(r"cu(da)?[A-Z]", name)):
        return "host", _host_kind(name)
    parent = getattr(e, "cpu_parent", None)             # top-level ops only: those inside them are their parts
    top = parent is None or str(parent.name).startswith(STEP_PREFIX)
    if act in ("", "cpu_op") and top and not getattr(e, "is_async", False):
        return "host", "op"
    return None


@arguments(steps=Whole(hint="the calls the profile holds"))
def from_torch_profiler(prof: Any, label: str = "step", title: str = "", steps: int = 1,
                        how: str = "PyTorch's profiler") -> Timeline:
    """The timeline of a ``torch.profiler.profile`` result (or of its ``events()``).

    Device events (CUDA kernels, copies, fills, read by CUPTI) go on a ``"gpu"`` row, one row per stream
    where there are several; on the host row go the CUDA runtime and driver calls (``cudaLaunchKernel``,
    ``cudaGraphLaunch``, ``cudaMemcpyAsync``, ``cudaStreamSynchronize``, ...), the top-level PyTorch ops
    and the ``course step N`` ranges that :func:`record_timelines` wraps each call in.  CUPTI sees every
    library's kernels in the process (CuPy's as well as PyTorch's), so profile one step at a time.

    >>> from types import SimpleNamespace as E
    >>> span = lambda a, b: E(start=a, end=b)             # microseconds, as the profiler gives them
    >>> events = [E(name="cudaLaunchKernel", device_type="DeviceType.CPU", activity_type="cuda_runtime",
    ...             time_range=span(10, 15)),
    ...           E(name="void relu_kernel<float>(float*, int)", device_type="DeviceType.CUDA",
    ...             activity_type="kernel", time_range=span(20, 22), device_resource_id=7)]
    >>> [(e.row, e.name, e.kind, e.start_s) for e in from_torch_profiler(events).events]
    [('host', 'cudaLaunchKernel', 'launch', 0.0), ('gpu', 'relu_kernel<float>', 'kernel', 1e-05)]
    """
    raw = prof.events() if hasattr(prof, "events") else prof
    kept = [(e, c) for e in raw if (c := _classify(e)) is not None]
    streams = sorted({getattr(e, "device_resource_id", 0) for e, (where, _) in kept if where == "device"},
                     key=str)
    t0 = min((float(e.time_range.start) for e, _ in kept), default=0.0)
    events = []
    for e, (where, kind) in kept:
        a, b = float(e.time_range.start), float(e.time_range.end)
        row = "host" if where == "host" else ("gpu" if len(streams) < 2 else
                                               f"gpu stream {getattr(e, 'device_resource_id', 0)}")
        name = short_kernel_name(e.name) if kind == "kernel" else str(e.name)
        events.append(Event(row, name, (a - t0) / 1e6, max(b - a, 0.0) / 1e6, kind))
    events.sort(key=lambda e: (e.start_s, -e.duration_s))
    gpu = any(e.row != "host" for e in events)
    return Timeline(label, events, device="gpu" if gpu else "cpu", title=title or label,
                    steps=steps, how=how)


def record_timelines(fns: Mapping[str, Callable[[], None]], steps: int = 3, warmup: int = 2,
                     titles: Mapping[str, str] | None = None, experiment: str = "step_timelines") -> ResultSet:
    """The GPU timeline of each callable: ``warmup`` calls, then ``steps`` calls under PyTorch's profiler
    (CPU and CUDA activities), synchronised before and after, each call wrapped in a ``course step N`` range.

    **Call it last in a GPU run.**  The profiler leaves CUPTI attached to the process when it stops, and
    every later kernel launch then costs 10-20 % more host time (PyTorch issue 144455): any timing taken
    after it would be slower than the truth.  The timelines themselves carry the profiler's own small cost
    per launch, which their ``how`` says.

    Raises :class:`~course.errors.GPUUnavailableError` without PyTorch built with CUDA and a GPU it sees.

    >>> rs = record_timelines({"noop": lambda: None}, steps=2)      # doctest: +SKIP
    """
    steps, warmup = whole_number("steps", steps, hi=100), whole_number("warmup", warmup, lo=0, hi=1000)
    from .torch_peer import torch_cuda_available

    if not torch_cuda_available():
        raise GPUUnavailableError("record_timelines needs PyTorch built with CUDA and a GPU it sees (its profiler "
                                  "reads the kernels through CUPTI). Here, draw the CPU timeline of the step, or "
                                  "the timelines recorded on a GPU: course.timeline.load_timelines().")
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    how = (f"PyTorch {torch.__version__}'s profiler: kernels and copies from CUPTI, the host's CUDA runtime and "
           f"driver calls; {steps} calls after {warmup} warm-up calls, synchronised before and after (the profiler "
           "adds a little host time to each launch)")
    timelines = []
    for label, fn in fns.items():
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for i in range(steps):
                with record_function(f"{STEP_PREFIX}{i + 1}"):
                    fn()
            torch.cuda.synchronize()
        timelines.append(from_torch_profiler(prof, label, (titles or {}).get(label, label), steps, how))
    rs = timelines_to_results(timelines, experiment, params={"steps": steps, "warmup": warmup})
    rs.notes.append("recorded with PyTorch's profiler, which leaves CUPTI attached: run last in a GPU session")
    return rs


# ----------------------------------------------------------------------------- a CPU step, counted

def counted_timeline(step: Callable[[], None], counter: Any, label: str = "step", title: str = "",
                     steps: int = 3, warmup: int = 2, device_name: str = "") -> Timeline:
    """The CPU timeline of ``steps`` calls of ``step``, whose array operations ``counter`` records (the
    ``counter`` of ``CountingNumpy(record=True)``, whose ``events`` are ``(name, start_s, end_s)`` from
    :func:`time.perf_counter`).

    Rows: ``"cpu"``, each array operation (on a GPU, each would be a kernel); ``"host"``, the Python time
    between them (``host``), the values read back (``read``) and each call (``step``).  An operation timed
    inside another (a kernel that times its own work) is kept once, as the outer one.  Steps whose times
    differ by more than half are noted as noisy (another program took the CPU during the longer ones).
    """
    steps, warmup = whole_number("steps", steps, hi=1000), whole_number("warmup", warmup, lo=0, hi=1000)
    if getattr(counter, "events", None) is None:
        raise BadInputError("the counter records no events: make the namespace with CountingNumpy(record=True) "
                            "and pass its .counter")
    for _ in range(warmup):
        step()
    del counter.events[:]
    marks = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        marks.append((t, time.perf_counter()))
    ops: list[tuple[str, float, float]] = []
    for name, a, b in sorted(counter.events, key=lambda ev: (ev[1], -ev[2])):
        if not ops or b > ops[-1][2] or name == "read back":        # not nested in the previous operation
            ops.append((name, a, b))
    t0 = marks[0][0]
    events = [Event("host", f"step {i + 1}", a - t0, b - a, "step") for i, (a, b) in enumerate(marks)]
    for name, a, b in ops:
        read = name == "read back"
        events.append(Event("host" if read else "cpu", name, a - t0, max(b - a, 0.0), "read" if read else "op"))
    for a, b in marks:                                              # the Python between operations
        work = [(s, e) for name, s, e in ops if a <= s <= b and name != "read back"]
        edges = [a] + [x for s, e in work for x in (s, e)] + [b]
        events += [Event("host", "Python", s - t0, e - s, "host") for s, e in zip(edges[::2], edges[1::2]) if e > s]
    events.sort(key=lambda e: (e.start_s, e.row))
    tl = Timeline(label, events, device="cpu", title=title or label, steps=steps, device_name=device_name,
                  how=f"CountingNumpy(record=True): time.perf_counter() around each array operation; {steps} "
                      f"calls after {warmup} warm-up (the counting's own bookkeeping is part of the Python time)")
    took = [b - a for a, b in marks]
    if max(took) > 1.5 * min(took):
        tl.notes.append(f"noisy: its steps took from {min(took) * 1e3:.3g} to {max(took) * 1e3:.3g} ms, so the machine "
                        "was busy with something else during the longer ones; read the shortest step")
    return tl


def require_synthetic_fits(kernels: int, steps: int) -> None:
    if (2 * kernels + 2) * steps > MAX_SYNTHETIC_EVENTS:
        raise BadInputError(f"synthetic_timeline would make {(2 * kernels + 2) * steps:,} events for kernels = "
                            f"{kernels:,} and steps = {steps:,}; a test needs a few dozen (at most "
                            f"{MAX_SYNTHETIC_EVENTS:,})")


@arguments(kernels=Whole(hint="launches per step"), steps=Whole(hint="calls of the step"),
           launch_s=Real(lo=0, hint="seconds"), kernel_s=Real(lo=0, hint="seconds"), sync_s=Real(lo=0, hint="seconds"),
           then=require_synthetic_fits)
def synthetic_timeline(kernels: int = 6, steps: int = 2, launch_s: float = 4e-6, kernel_s: float = 2e-6,
                       sync_s: float = 20e-6, label: str = "synthetic") -> Timeline:
    """A made-up GPU-shaped timeline, the same every time, FOR TESTS: ``kernels`` launches per step, each
    kernel starting 1 µs after its launch call ends; one wait at the end.  Labelled ``synthetic`` wherever it
    is drawn; never show it as a measurement.
    """
    events, t = [], 0.0
    for s in range(steps):
        start = t
        for k in range(kernels):
            events += [Event("host", "cudaLaunchKernel", t, launch_s, "launch"),
                       Event("gpu", f"kernel_{k}", t + launch_s + 1e-6, kernel_s, "kernel")]
            t += launch_s + 1e-6                                    # a microsecond of Python between launches
        events.append(Event("host", "cudaStreamSynchronize", t, sync_s, "sync"))
        t += sync_s
        events.append(Event("host", f"{STEP_PREFIX}{s + 1}", start, t - start, "step"))
    return Timeline(label, sorted(events, key=lambda e: e.start_s), device="gpu", title=f"SYNTHETIC ({label})",
                    steps=steps, how="synthetic: made up for tests, not a measurement", device_name="no device",
                    recorded="synthetic")
