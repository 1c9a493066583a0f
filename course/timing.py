"""An honest stopwatch for CPU and GPU code.

Two traps make naive timings lie, and :func:`benchmark` avoids both.

**Warm-up.** The first call of a function pays for things later calls do not:
compiling a GPU kernel (CuPy compiles on first use and caches), loading a BLAS
library, allocating and touching memory, waking a GPU from its power-saving
clocks, filling the CPU's caches.  Timing it tells you about start-up, not about
the operation.  So a few un-timed warm-up calls run first.

**Asynchrony.** A CuPy call returns as soon as its kernel is *queued* on the GPU,
usually long before it finishes.  ``perf_counter`` around it measures the few
microseconds of queueing.  On a GPU, :func:`benchmark` records a CUDA event on
the current stream before and after the call and waits for the second event,
so the GPU itself reports how long the work took (as
``cupyx.profiler.benchmark`` does for its GPU times).  Ahead of the first event it
queues a short spin kernel, the *lead* (:mod:`course.lead_spin`), so that the GPU
reaches that event only once the host has queued the call's work: the host's
Python overhead before the first launch stays outside the sample.  It costs
``lead_s`` (100 µs) of GPU time per sample, outside the measured interval.  A
step whose host cannot queue its work within the lead still shows its host-bound
gaps between the events, which is the honest answer for such a step; for its
steady-state time per call, ``per_event=N`` times N calls between one pair of
events and keeps their mean.

Times vary from run to run (other processes, turbo clocks, caches), so it
repeats the call and reports the **median** with the spread (the 25th and 75th
percentiles), never a single number.  A time **budget** stops the repeats early,
which keeps interactive widgets responsive; the result says when that happened.

**A busy machine.**  On a shared 2-core machine (Binder, Colab's free tier, a laptop
with a browser open) other processes take turns on the cores, and a BLAS library
that starts one thread per core then waits for its own threads.  So the number of
BLAS/OpenMP threads is set explicitly for every measurement (:mod:`course.threads`;
the default is the cores this process may really use, one when the machine is
oversubscribed, or ``COURSE_THREADS``), each
:class:`Timing` records the threads and the machine's load, and its ``noisy`` flag
says when the runs disagree too much or the cores were oversubscribed for the
number to be trusted; :meth:`Timing.noise_note` says what to do about it.

>>> import time
>>> t = benchmark(time.sleep, 0.01, repeat=5)
>>> t.median >= 0.01, t.repeat             # a sleep never ends early (on a busy machine, it ends late)
(True, 5)
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .cpu import machine_load
from .devices import cupy_module, normalize_device, require_gpu, synchronize
from .errors import BadInputError, whole_number
from .lead_spin import cupy_lead, validate_lead
from .threads import get_threads, thread_limit, threads_note, validate_threads

__all__ = ["Timing", "benchmark", "interleaved_rounds", "sweep_within_budget", "noisy_note", "NOISY_SPREAD",
           "BUSY_LOAD", "MAX_REPEAT"]

#: A timing whose interquartile range exceeds this fraction of its median is flagged noisy.
NOISY_SPREAD = 0.25
#: A timing taken while the 1-minute load average per usable core exceeds this is flagged noisy:
#: more processes wanted a core than there were cores.
BUSY_LOAD = 1.25

#: Without a time budget, :func:`benchmark` makes at most this many timed calls (and a tenth of it
#: as warm-up): a larger count would run for hours; give ``budget_s`` to ask for more.
MAX_REPEAT = 10_000


@dataclass
class Timing:
    """Timings of repeated calls of one function on one device.

    Attributes
    ----------
    samples : per-call times in seconds (warm-up calls excluded).
    device : ``"cpu"`` or ``"gpu"``.
    name : what was timed.
    warmup : warm-up calls actually made.
    stopped_early : True when the time budget cut the repeats short.
    budget_s : the budget that applied (None for none).
    threads : BLAS/OpenMP threads the calls ran with (CPU).
    load : the 1-minute load average per usable core when the measurement began (None: unknown).
    threads_why : why the default gave ``threads`` (one thread on an oversubscribed machine), else ``""``.
    lead_s : on a GPU, the spin queued ahead of each start event (:mod:`course.lead_spin`); None: not said.
    per_event : calls between one pair of events (or clock readings); each sample is their mean.
    """

    samples: np.ndarray
    device: str = "cpu"
    name: str = ""
    warmup: int = 0
    stopped_early: bool = False
    budget_s: float | None = None
    host_samples: np.ndarray | None = field(default=None, repr=False)
    threads: int | None = None
    load: float | None = None
    threads_why: str = ""
    lead_s: float | None = None
    per_event: int = 1

    def __post_init__(self) -> None:
        """A Timing holds at least one finite time: every statistic below is computed from them."""
        try:
            samples = np.asarray(self.samples, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise BadInputError(f"samples must be times in seconds, got {self.samples!r:.80}") from None
        if samples.size == 0 or not np.all(np.isfinite(samples)):
            raise BadInputError(f"a Timing needs at least one finite time in seconds; got samples {samples!r:.80}. "
                                "Time at least one call (repeat >= 1).")
        self.samples = samples

    @property
    def median(self) -> float:
        """Median time per call, in seconds."""
        return float(np.median(self.samples))

    @property
    def q25(self) -> float:
        return float(np.percentile(self.samples, 25))

    @property
    def q75(self) -> float:
        return float(np.percentile(self.samples, 75))

    @property
    def spread(self) -> float:
        """Interquartile range (q75 - q25), in seconds: how much the runs disagree."""
        return self.q75 - self.q25

    @property
    def min(self) -> float:
        return float(np.min(self.samples))

    @property
    def mean(self) -> float:
        return float(np.mean(self.samples))

    @property
    def std(self) -> float:
        return float(np.std(self.samples))

    @property
    def repeat(self) -> int:
        return int(len(self.samples))

    @property
    def rel_spread(self) -> float:
        """The interquartile range as a fraction of the median (0.1: the runs spread 10 %)."""
        med = self.median
        return self.spread / med if med > 0 else 0.0

    @property
    def busy(self) -> bool:
        """True when more processes wanted a core than there were cores as the measurement began."""
        return self.load is not None and self.load > BUSY_LOAD

    @property
    def noisy(self) -> bool:
        """True when this number can't be trusted: the runs disagree by more than
        :data:`NOISY_SPREAD` of the median, or the machine was busy (:data:`BUSY_LOAD`)."""
        return (self.repeat >= 3 and self.rel_spread > NOISY_SPREAD) or self.busy

    def noise_note(self) -> str:
        """One sentence on why this timing is noisy and what to do, or ``""`` when it is not."""
        if not self.noisy:
            return ""
        why = []
        if self.repeat >= 3 and self.rel_spread > NOISY_SPREAD:
            why.append(f"its runs spread {100 * self.rel_spread:.0f} % around the median")
        if self.busy:
            why.append(f"the machine was busy (load {self.load:.1f} per core: more processes wanted a core "
                       f"than it has)")
        return f"Noisy: {' and '.join(why)}. {_advice(self.busy, self.threads)}"

    def as_record(self, **fields: Any) -> dict:
        """A JSON-ready dict: median, quartiles, min, count, device, early stop (and, where said, the
        GPU's ``lead_s`` and the ``calls_per_event``); then ``fields`` (what was timed: sizes, rates), so
        that ``ResultSet.add(**record)`` stores it as it is."""
        how = ({"lead_s": self.lead_s} if self.lead_s is not None else {}) | (
            {"calls_per_event": self.per_event} if self.per_event != 1 else {})
        return {
            "device": self.device,
            "median_s": self.median,
            "q25_s": self.q25,
            "q75_s": self.q75,
            "min_s": self.min,
            "repeat": self.repeat,
            "stopped_early": bool(self.stopped_early),
            "threads": self.threads,
            "load": None if self.load is None else round(float(self.load), 2),
            "noisy": bool(self.noisy),
        } | ({"threads_why": self.threads_why} if self.threads_why else {}) | how | fields

    def __repr__(self) -> str:
        early = ", stopped early by its budget" if self.stopped_early else ""
        noisy = ", NOISY" if self.noisy else ""
        return (f"Timing({self.name or 'fn'} on {self.device}: median {_fmt(self.median)} "
                f"[IQR {_fmt(self.q25)} – {_fmt(self.q75)}] over {self.repeat} runs{early}{noisy})")


def noisy_note(timings: Iterable[Any]) -> str:
    """One sentence for a group of timings (or their records): how many are noisy, why (a busy machine,
    or runs that disagree) and what to do; then whether they ran with one BLAS thread because the
    machine was oversubscribed.  ``""`` when there is nothing to say.  Use it under a table or a plot.

    >>> noisy_note([{"median_s": 1.0, "noisy": False}])
    ''
    >>> noisy_note([{"median_s": 1.0, "q25_s": 0.99, "q75_s": 1.01, "load": 0.5, "noisy": True}])[:91]
    '1 of 1 measurements are noisy: 1 was flagged by the timer while other work shared the cores'
    """
    items = [t if isinstance(t, dict) else t.as_record() for t in timings]
    one_thread = next((t["threads_why"] for t in items if t.get("threads_why")), "")
    noisy = [t for t in items if t.get("noisy")]
    if not noisy:
        return one_thread
    busy = [t["load"] for t in noisy if t.get("load") is not None and t["load"] > BUSY_LOAD]
    causes = []
    if busy:
        causes.append(f"{len(busy)} {'was' if len(busy) == 1 else 'were'} taken while the machine was busy "
                      f"(load up to {max(busy):.1f} per core: more processes wanted a core than it has)")
    spread = [t for t in noisy if _disagree(t) or (_disagree(t) is None and not (t.get("load") or 0) > BUSY_LOAD)]
    if spread:
        causes.append(f"{len(spread)} {'has' if len(spread) == 1 else 'have'} runs that disagree "
                      f"(spread over {100 * NOISY_SPREAD:.0f} % of the median)")
    rest = len(noisy) - len(busy) - len(spread)
    if rest > 0:                  # flagged by the timer from what the record no longer holds (its load, unrounded)
        causes.append(f"{rest} {'was' if rest == 1 else 'were'} flagged by the timer while other work shared the cores")
    threads = max((t.get("threads") or 1 for t in noisy), default=1)
    return (f"{len(noisy)} of {len(items)} measurements are noisy: {'; '.join(causes)}. Small differences "
            f"between them mean nothing. {_advice(bool(busy), threads)}" + (f" {one_thread}" if one_thread else ""))


def _disagree(rec: dict) -> bool | None:
    """Whether a record's runs spread more than :data:`NOISY_SPREAD` (None: the record cannot say)."""
    try:
        med, spread = rec["median_s"], rec["q75_s"] - rec["q25_s"]
    except (KeyError, TypeError):
        return None
    return (rec.get("repeat") or 0) >= 3 and med > 0 and spread / med > NOISY_SPREAD


def _advice(busy: bool, threads: int | None) -> str:
    """What to do about noisy timings."""
    if busy and (threads or 1) > 1:
        return ("Set COURSE_THREADS=1 (or call course.threads.set_threads(1)) so that BLAS does not wait for "
                "its own threads on cores other processes hold, and rerun when the machine is quieter.")
    return "Rerun when the machine is quieter."


def _fmt(s: float) -> str:
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    if s >= 1e-6:
        return f"{s * 1e6:.3g} µs"
    return f"{s * 1e9:.3g} ns"


def benchmark(fn: Callable, *args: Any, device: Any = "cpu", warmup: int = 1, repeat: int = 7,
              budget_s: float | None = None, name: str | None = None, blas_threads: int | None = None,
              fn_kwargs: dict | None = None, per_event: int = 1, lead_s: float | None = None,
              **kwargs: Any) -> Timing:
    """Time ``fn(*args, **kwargs, **fn_kwargs)`` on ``device``: warm-up, repeats, median and spread.

    Parameters
    ----------
    fn : the function to time.  Its arguments must already live on ``device``.
    device : ``"cpu"`` (wall clock, ``time.perf_counter``) or ``"gpu"`` (CUDA events on
        the current stream, behind a lead spin, then a synchronize).
    warmup : un-timed calls first (compilation, clocks, caches).  0 allowed.
    repeat : timed calls wanted (at least 1; without a finite ``budget_s`` at most
        :data:`MAX_REPEAT`, and ``warmup`` at most a tenth of that).
    budget_s : seconds the whole measurement may take, warm-up included.  When the
        budget is spent no further call starts (one timed call always runs), and the
        result's ``stopped_early`` is True.  ``None``: no budget.
    name : a label for the result (defaults to the function's name).
    blas_threads : BLAS/OpenMP threads for the calls (default :func:`get_threads`).
    fn_kwargs : keyword arguments for ``fn`` whose names ``benchmark`` uses itself (``repeat``,
        ``device``, ``name``, ...): ``benchmark(f, x, fn_kwargs={"repeat": 3})`` calls ``f(x, repeat=3)``.
        Any other keyword goes to ``fn`` directly.
    per_event : calls per sample, between one pair of events (on the CPU: clock readings); the sample
        is their mean.  1 (the default) times each call alone; N > 1 gives a host-bound GPU step's
        steady-state time per call (see :mod:`course.lead_spin`).
    lead_s : on a GPU, seconds of spin queued ahead of each start event (default
        :data:`course.lead_spin.LEAD_S`; 0: none).  Ignored on the CPU.

    Returns
    -------
    Timing : ``.samples`` (seconds), ``.median``, ``.spread`` (IQR), ``.q25``, ``.q75``.

    Examples
    --------
    >>> import numpy as np
    >>> a = np.ones((64, 64), dtype=np.float32)
    >>> benchmark(np.matmul, a, a, repeat=3).repeat
    3
    """
    if not callable(fn):
        raise BadInputError(f"benchmark needs a function to call, got {type(fn).__name__} {fn!r}")
    dev = normalize_device(device)
    if budget_s is not None:
        if isinstance(budget_s, bool) or not isinstance(budget_s, numbers.Real) or math.isnan(budget_s) \
                or budget_s <= 0:
            raise BadInputError(
                f"budget_s must be a positive number of seconds (or None for no budget), got {budget_s!r}")
        budget_s = float(budget_s)
    bounded = budget_s is not None and math.isfinite(budget_s)
    more = "" if bounded else "; for more, give a time budget such as budget_s=10"
    repeat = whole_number("repeat", repeat, hi=None if bounded else MAX_REPEAT, hint="timed calls" + more)
    warmup = whole_number("warmup", warmup, lo=0, hi=None if bounded else MAX_REPEAT // 10,
                          hint="un-timed calls first" + more)
    per_event = _per_event(per_event)
    lead_s = validate_lead(lead_s)
    if fn_kwargs is not None:
        if not isinstance(fn_kwargs, dict):
            raise BadInputError(f"fn_kwargs must be a dict of keyword arguments for fn, got {fn_kwargs!r}")
        both = sorted(set(fn_kwargs) & set(kwargs))
        if both:
            raise BadInputError(f"keyword(s) {both} given both directly and in fn_kwargs; give each once")
        kwargs = {**kwargs, **fn_kwargs}
    label = name or getattr(fn, "__name__", None) or type(fn).__name__
    n_threads = get_threads() if blas_threads is None else validate_threads(blas_threads, "blas_threads")
    with thread_limit(n_threads):
        timing = _measure(fn, args, kwargs, dev, warmup, repeat, budget_s, label, n_threads, per_event, lead_s)
    timing.threads_why = threads_note() if blas_threads is None and dev == "cpu" else ""
    return timing


def _per_event(per_event: Any) -> int:
    return whole_number("per_event", per_event, hi=MAX_REPEAT,
                        hint="calls between one pair of events, whose mean is one sample; 1 times each call alone")


def _measure(fn: Callable, args: tuple, kwargs: dict, dev: str, warmup: int, repeat: int,
             budget_s: float | None, label: str, n_threads: int, per_event: int = 1,
             lead_s: float | None = None) -> Timing:
    load = machine_load()
    lead_used = None

    if dev == "gpu":
        require_gpu()
        cp = cupy_module()
        stream = cp.cuda.get_current_stream()
        start_ev, end_ev = cp.cuda.Event(), cp.cuda.Event()
        # The lead: a spin queued ahead of the start event, so that the GPU reaches that event only after
        # the host has queued the call's work (course.lead_spin says why, and what it costs).
        wanted = validate_lead(lead_s)
        lead = cupy_lead(cp, wanted, stream)
        lead_used = wanted if lead is not None else 0.0

        def call_once() -> tuple[float, float]:
            if lead is not None:
                lead()
            t0 = time.perf_counter()
            start_ev.record(stream)
            for _ in range(per_event):
                fn(*args, **kwargs)
            end_ev.record(stream)
            end_ev.synchronize()
            t1 = time.perf_counter()
            return cp.cuda.get_elapsed_time(start_ev, end_ev) / 1e3 / per_event, (t1 - t0) / per_event
    else:
        def call_once() -> tuple[float, float]:
            t0 = time.perf_counter()
            for _ in range(per_event):
                fn(*args, **kwargs)
            t = (time.perf_counter() - t0) / per_event
            return t, t

    began = time.perf_counter()

    def over_budget() -> bool:
        return budget_s is not None and time.perf_counter() - began >= budget_s

    done_warmup = 0
    for _ in range(warmup):
        call_once()
        done_warmup += 1
        if over_budget():
            break

    samples, host = [], []
    stopped = False
    for i in range(repeat):
        if i > 0 and over_budget():
            stopped = True
            break
        dev_t, host_t = call_once()
        samples.append(dev_t)
        host.append(host_t)

    return Timing(samples=np.asarray(samples, dtype=np.float64), device=dev, name=label,
                  warmup=done_warmup, stopped_early=stopped, budget_s=budget_s,
                  host_samples=np.asarray(host, dtype=np.float64), threads=n_threads, load=load,
                  lead_s=lead_used, per_event=per_event)


def sweep_within_budget(jobs: Any, rs: Any, total_budget_s: float | None = None,
                        progress: Callable | None = None, desc: str | None = None,
                        skipped: Callable[[list], str] | None = None) -> Iterator[Any]:
    """Yield each job of a sweep until ``total_budget_s`` seconds have passed, then stop and say so.

    The first job always runs.  When the budget cuts the sweep short, ``rs.params["stopped_early"]``
    becomes True and ``rs.notes`` says how many of the measurements were made (and, given
    ``skipped(remaining_jobs) -> str``, what was left out), so a plot of a partial sweep never
    passes for a whole one.  ``progress`` (e.g. :func:`course.widgets.progress`) draws a bar.

    >>> from course.results import ResultSet
    >>> rs = ResultSet("demo")
    >>> [j for j in sweep_within_budget([1, 2, 3], rs)]
    [1, 2, 3]
    """
    jobs = list(jobs)
    rs.params.setdefault("stopped_early", False)
    it = progress(jobs, total=len(jobs), desc=desc) if progress else jobs
    began = time.perf_counter()
    try:
        for k, job in enumerate(it):
            if total_budget_s is not None and k and time.perf_counter() - began >= total_budget_s:
                rs.params["stopped_early"] = True
                rest = f"; {skipped(jobs[k:])}" if skipped else ""
                rs.notes.append(f"Stopped early: the time budget of {total_budget_s:g} s ran out after {k} of "
                                f"{len(jobs)} measurements{rest}.")
                return
            yield job
    finally:
        if hasattr(it, "close"):  # take the progress bar away, however the sweep ended
            it.close()


def interleaved_rounds(fns: dict[str, Callable[[], Any]], device: Any = "cpu", warmup: int = 1,
                       repeat: int = 5, budget_s: float | None = None, min_rounds: int = 1,
                       per_round: int = 1, timer: Callable[..., Timing] | dict[str, Callable] | None = None,
                       before: Callable[[str], Any] | None = None, alternate: bool = False,
                       blas_threads: int | None = None, progress: Callable | None = None,
                       desc: str | None = None, per_event: int | dict[str, int] = 1) -> dict[str, Timing]:
    """Time several functions in alternating rounds: f1, f2, f3, then f1, f2, f3 again, ...

    A slow drift of a shared machine (another process starting, clocks changing) then hits
    every function alike: use this whenever two timings will be compared or subtracted.

    Parameters
    ----------
    fns : name -> a function of no arguments.
    device : where they run, or a dict name -> device (a sweep over CPU and GPU).
    warmup : untimed rounds first.
    repeat : timed rounds, each timing every function ``per_round`` times.
    budget_s : seconds for the whole measurement, warm-up included: no round starts once it is
        spent, but ``min_rounds`` rounds always run.
    timer : ``timer(fn, device=, warmup=0, repeat=per_round, name=)`` takes the samples: the course's
        stopwatch by default (CUDA events on a GPU), :func:`course.torch_peer.benchmark_torch` for PyTorch;
        a dict gives one timer per name.  Where ``per_event`` is not 1 it is passed on as ``per_event=``.
    before : ``before(name)`` runs untimed before each function's turn, warm-up turns included (e.g.
        letting the other library's worker threads go quiet, or setting the flags a peer runs under).
    alternate : reverse the order every other round (ABBA), so going first costs all alike.
    blas_threads : BLAS/OpenMP threads for the whole measurement (default :func:`get_threads`).
    progress, desc : a progress bar over the rounds (e.g. :func:`course.widgets.progress`).
    per_event : calls per sample between one pair of events (see :func:`benchmark`), or a dict name ->
        calls (names left out: 1).

    Returns one :class:`Timing` per name, ``samples`` in round order, with ``stopped_early``
    (the budget cut the rounds short) and ``noisy``.

    >>> order = []
    >>> t = interleaved_rounds({"a": lambda: order.append("a"), "b": lambda: order.append("b")},
    ...                        warmup=0, repeat=2, alternate=True)
    >>> order, t["a"].repeat
    (['a', 'b', 'b', 'a'], 2)
    """
    if not fns or not all(callable(f) for f in fns.values()):
        raise BadInputError(f"interleaved_rounds needs a dict of name -> function, got {fns!r}")
    devs = {k: normalize_device(device[k] if isinstance(device, dict) else device) for k in fns}
    bounded = budget_s is not None
    if bounded and (isinstance(budget_s, bool) or not isinstance(budget_s, (int, float, np.integer, np.floating))
                    or not 0 < float(budget_s) < float("inf")):
        raise BadInputError(f"budget_s must be a positive number of seconds or None, got {budget_s!r}")
    cap = None if bounded else MAX_REPEAT
    hint = "" if bounded else f"without a budget_s at most {MAX_REPEAT:,} rounds run; pass budget_s= for more"
    warmup = whole_number("warmup", warmup, lo=0, hi=None if bounded else MAX_REPEAT // 10, hint=hint)
    min_rounds, per_round = whole_number("min_rounds", min_rounds, hi=cap, hint=hint), whole_number(
        "per_round", per_round, hi=MAX_REPEAT)
    repeat = whole_number("repeat", repeat, hi=cap, hint=hint)
    n_threads = get_threads() if blas_threads is None else validate_threads(blas_threads, "blas_threads")
    timers = timer if isinstance(timer, dict) else dict.fromkeys(fns, timer)
    calls = {k: _per_event(per_event.get(k, 1) if isinstance(per_event, dict) else per_event) for k in fns}
    leads: dict[str, float | None] = dict.fromkeys(fns)
    samples: dict[str, list[float]] = {k: [] for k in fns}
    load, began, stopped = machine_load(), time.perf_counter(), False
    it = progress(range(repeat), total=repeat, desc=desc) if progress else range(repeat)
    try:
        with thread_limit(n_threads):
            for _ in range(warmup):
                for k, fn in fns.items():
                    if before is not None:
                        before(k)
                    fn()
            for d in set(devs.values()):
                synchronize(d)
            for i in it:
                if i >= min_rounds and budget_s is not None and time.perf_counter() - began >= budget_s:
                    stopped = True
                    break
                for k in (list(fns)[::-1] if alternate and i % 2 else fns):
                    if before is not None:
                        before(k)
                    more = {"per_event": calls[k]} if calls[k] != 1 else {}
                    t = (timers[k](fns[k], device=devs[k], warmup=0, repeat=per_round, name=k, **more)
                         if timers.get(k) else _measure(fns[k], (), {}, devs[k], 0, per_round, None, k, n_threads,
                                                        calls[k]))
                    samples[k] += np.asarray(t.samples).tolist()
                    leads[k] = getattr(t, "lead_s", None)
    finally:
        if hasattr(it, "close"):  # take the progress bar away, however the rounds ended
            it.close()
    why = threads_note() if blas_threads is None else ""
    return {k: Timing(samples=np.asarray(v, dtype=np.float64), device=devs[k], name=k, warmup=warmup,
                      stopped_early=stopped, budget_s=budget_s, threads=n_threads, load=load,
                      threads_why=why if devs[k] == "cpu" else "", lead_s=leads[k], per_event=calls[k])
            for k, v in samples.items()}
