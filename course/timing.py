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
``cupyx.profiler.benchmark`` does for its GPU times).

Times vary from run to run (other processes, turbo clocks, caches), so it
repeats the call and reports the **median** with the spread (the 25th and 75th
percentiles), never a single number.  A time **budget** stops the repeats early,
which keeps interactive widgets responsive; the result says when that happened.

**A busy machine.**  On a shared 2-core machine (Binder, Colab's free tier, a laptop
with a browser open) other processes take turns on the cores, and a BLAS library
that starts one thread per core then waits for its own threads.  So the number of
BLAS/OpenMP threads is set explicitly for every measurement (:func:`set_threads`;
the default is the cores this process may really use, or ``COURSE_THREADS``), each
:class:`Timing` records the threads and the machine's load, and its ``noisy`` flag
says when the runs disagree too much or the cores were oversubscribed for the
number to be trusted; :meth:`Timing.noise_note` says what to do about it.

>>> import time
>>> t = benchmark(time.sleep, 0.01, repeat=5)
>>> abs(t.median - 0.01) < 0.002
True
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .devices import cupy_module, machine_load, normalize_device, require_gpu, usable_cores
from .errors import BadInputError

__all__ = ["Timing", "benchmark", "sweep_within_budget", "set_threads", "get_threads", "thread_limit",
           "noisy_note", "NOISY_SPREAD", "BUSY_LOAD"]

#: A timing whose interquartile range exceeds this fraction of its median is flagged noisy.
NOISY_SPREAD = 0.25
#: A timing taken while the 1-minute load average per usable core exceeds this is flagged noisy:
#: more processes wanted a core than there were cores.
BUSY_LOAD = 1.25

_threads: int | None = None


def _check_threads(n: Any, what: str = "threads") -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise BadInputError(f"{what} must be a whole number of threads >= 1, got {n!r}")
    return int(n)


def _default_threads() -> int:
    env = os.environ.get("COURSE_THREADS", "").strip()
    if env:
        try:
            return _check_threads(int(env), "COURSE_THREADS")
        except ValueError:
            raise BadInputError(f"COURSE_THREADS must be a whole number >= 1, got {env!r}") from None
    return usable_cores()


def get_threads() -> int:
    """The BLAS/OpenMP threads every measurement uses unless told otherwise.

    The default is the number of cores this process may really use
    (:func:`course.devices.usable_cores`: affinity and a container's CPU quota), or the
    environment variable ``COURSE_THREADS``; :func:`set_threads` changes it.

    >>> get_threads() >= 1
    True
    """
    return _threads if _threads is not None else _default_threads()


def set_threads(n: int | None = None) -> int:
    """Use ``n`` BLAS/OpenMP threads for every later measurement (``None``: back to the default).

    Try ``course.timing.set_threads(1)`` on a busy machine: a BLAS that runs one thread per core
    while other processes want those cores spends its time waiting for its own threads.
    Returns the number now in force.

    >>> before = get_threads()
    >>> set_threads(1)
    1
    >>> set_threads(None) == before
    True
    """
    global _threads
    _threads = None if n is None else _check_threads(n)
    return get_threads()


class thread_limit:
    """Context manager: run the block with ``n`` BLAS/OpenMP threads (numpy's BLAS, OpenMP, and
    PyTorch's intra-op pool when PyTorch is loaded), then put back what was there.

    >>> import numpy as np
    >>> with thread_limit(1):
    ...     _ = np.ones((8, 8)) @ np.ones((8, 8))
    """

    def __init__(self, n: int | None = None):
        self.n = get_threads() if n is None else _check_threads(n)
        self._limits = None
        self._torch_before: int | None = None

    def __enter__(self) -> thread_limit:
        from threadpoolctl import threadpool_limits

        self._limits = threadpool_limits(limits=self.n)
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "get_num_threads"):
            self._torch_before = torch.get_num_threads()
            torch.set_num_threads(self.n)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._torch_before is not None:
            sys.modules["torch"].set_num_threads(self._torch_before)
        if self._limits is not None:
            self._limits.restore_original_limits()


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
            why.append(f"the machine was busy (load {self.load:.1f} per core)")
        return (f"Noisy: {' and '.join(why)}. Rerun when the machine is quieter"
                + (", or try course.timing.set_threads(1)." if self.busy and (self.threads or 1) > 1 else "."))

    def as_record(self) -> dict:
        """A JSON-ready dict: median, quartiles, min, count, device, early stop."""
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
        }

    def __repr__(self) -> str:
        early = ", stopped early by its budget" if self.stopped_early else ""
        noisy = ", NOISY" if self.noisy else ""
        return (f"Timing({self.name or 'fn'} on {self.device}: median {_fmt(self.median)} "
                f"[IQR {_fmt(self.q25)} – {_fmt(self.q75)}] over {self.repeat} runs{early}{noisy})")


def noisy_note(timings: Iterable[Any]) -> str:
    """One sentence for a group of timings (or their records): how many are noisy and what to do,
    or ``""`` when none is.  Use it under a table or a plot of several measurements.

    >>> noisy_note([{"median_s": 1.0, "noisy": False}])
    ''
    """
    items = list(timings)
    flags = [bool(t.get("noisy")) if isinstance(t, dict) else bool(t.noisy) for t in items]
    if not any(flags):
        return ""
    loads = [t.get("load") if isinstance(t, dict) else t.load for t in items]
    loads = [x for x in loads if x is not None]
    busy = f" (the machine was busy: load up to {max(loads):.1f} per core)" if loads and max(loads) > BUSY_LOAD else ""
    return (f"{sum(flags)} of {len(items)} measurements are noisy{busy}: their runs disagree, so small "
            "differences between them mean nothing. Rerun when the machine is quieter.")


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
              **kwargs: Any) -> Timing:
    """Time ``fn(*args, **kwargs)`` on ``device``: warm-up, repeats, median and spread.

    Parameters
    ----------
    fn : the function to time.  Its arguments must already live on ``device``.
    device : ``"cpu"`` (wall clock, ``time.perf_counter``) or ``"gpu"`` (CUDA events on
        the current stream, then a synchronize).
    warmup : un-timed calls first (compilation, clocks, caches).  0 allowed.
    repeat : timed calls wanted (at least 1).
    budget_s : seconds the whole measurement may take, warm-up included.  When the
        budget is spent no further call starts (one timed call always runs), and the
        result's ``stopped_early`` is True.  ``None``: no budget.
    name : a label for the result (defaults to the function's name).
    blas_threads : BLAS/OpenMP threads for the calls (default :func:`get_threads`).

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
    if not isinstance(repeat, (int, np.integer)) or repeat < 1:
        raise BadInputError(f"repeat must be a whole number >= 1, got {repeat!r}")
    if not isinstance(warmup, (int, np.integer)) or warmup < 0:
        raise BadInputError(f"warmup must be a whole number >= 0, got {warmup!r}")
    if budget_s is not None:
        if not isinstance(budget_s, (int, float)) or math.isnan(budget_s) or budget_s <= 0:
            raise BadInputError(
                f"budget_s must be a positive number of seconds (or None for no budget), got {budget_s!r}")
    label = name or getattr(fn, "__name__", None) or type(fn).__name__
    n_threads = get_threads() if blas_threads is None else _check_threads(blas_threads, "blas_threads")
    with thread_limit(n_threads):
        return _measure(fn, args, kwargs, dev, int(warmup), int(repeat), budget_s, label, n_threads)


def _measure(fn: Callable, args: tuple, kwargs: dict, dev: str, warmup: int, repeat: int,
             budget_s: float | None, label: str, n_threads: int) -> Timing:
    load = machine_load()

    if dev == "gpu":
        require_gpu()
        cp = cupy_module()
        stream = cp.cuda.get_current_stream()
        start_ev, end_ev = cp.cuda.Event(), cp.cuda.Event()

        def call_once() -> tuple[float, float]:
            t0 = time.perf_counter()
            start_ev.record(stream)
            fn(*args, **kwargs)
            end_ev.record(stream)
            end_ev.synchronize()
            t1 = time.perf_counter()
            return cp.cuda.get_elapsed_time(start_ev, end_ev) / 1e3, t1 - t0
    else:
        def call_once() -> tuple[float, float]:
            t0 = time.perf_counter()
            fn(*args, **kwargs)
            t = time.perf_counter() - t0
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
                  host_samples=np.asarray(host, dtype=np.float64), threads=n_threads, load=load)


def sweep_within_budget(jobs: Any, rs: Any, total_budget_s: float | None = None,
                        progress: Callable | None = None, desc: str | None = None,
                        skipped: Callable[[list], str] | None = None):
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
