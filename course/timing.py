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
from typing import Any

import numpy as np

from .arguments import Given, Optional, arguments
from .cpu import machine_load
from .devices import cupy_module, normalize_device, require_gpu, synchronize
from .errors import BadInputError, validate_function, validate_text, whole_number
from .lead_spin import cupy_lead, validate_lead
from .measurement import BUSY_LOAD as BUSY_LOAD
from .measurement import NOISY_SPREAD as NOISY_SPREAD
from .measurement import Timing
from .measurement import noisy_note as noisy_note
from .threads import get_threads, thread_limit, threads_note, validate_threads

__all__ = ["benchmark", "interleaved_rounds", "sweep_within_budget", "validate_budget", "MAX_REPEAT"]

#: Without a time budget, :func:`benchmark` makes at most this many timed calls (and a tenth of it
#: as warm-up): a larger count would run for hours; give ``budget_s`` to ask for more.
MAX_REPEAT = 10_000


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


def validate_budget(budget_s: Any, what: str = "budget_s") -> float | None:
    """``budget_s`` as a float of seconds: a positive number (``math.inf``: no limit), or None for none."""
    if budget_s is None:
        return None
    if isinstance(budget_s, (bool, np.bool_)) or not isinstance(budget_s, numbers.Real) or math.isnan(budget_s) \
            or budget_s <= 0:
        raise BadInputError(f"{what} must be a positive number of seconds (or None for no budget), got "
                            f"{budget_s!r:.60}")
    return float(budget_s)


def _validate_jobs(jobs: Any) -> list:
    if isinstance(jobs, (str, bytes, dict, np.ndarray)) or not isinstance(jobs, Iterable):
        raise BadInputError(f"jobs must be a list of the sweep's jobs (sizes, settings), got {type(jobs).__name__} "
                            f"{jobs!r:.60}")
    return list(jobs)


def _validate_sweep_results(rs: Any) -> Any:
    """``rs`` if it holds ``params`` (a dict) and ``notes`` (a list), as a ResultSet does (course.results imports
    this module's peers, so the class is not imported here)."""
    if not (isinstance(getattr(rs, "params", None), dict) and isinstance(getattr(rs, "notes", None), list)):
        raise BadInputError(f"rs must be the course.results.ResultSet the sweep fills in, got {type(rs).__name__} "
                            f"{rs!r:.60}")
    return rs


@arguments(jobs=Given(_validate_jobs), rs=Given(_validate_sweep_results),
           total_budget_s=Given(validate_budget, what="total_budget_s"),
           progress=Optional(Given(validate_function, what="progress")),
           desc=Optional(Given(validate_text, what="desc")),
           skipped=Optional(Given(validate_function, what="skipped")))
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
