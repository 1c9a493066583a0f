"""What one measurement says: a :class:`Timing`'s samples, median and spread, and whether to trust them.

:func:`course.timing.benchmark` returns a :class:`Timing`: the per-call times of repeated calls (warm-up
left out), their median, quartiles and spread, the BLAS threads and the machine's load they ran under,
and a ``noisy`` flag where the runs disagree by more than :data:`NOISY_SPREAD` of the median or the
machine was busy (:data:`BUSY_LOAD`); :meth:`Timing.noise_note` says why and what to do.  :func:`noisy_note`
says the same of a group of timings, or of the records they were stored as.

>>> t = Timing(samples=[1.0, 1.1, 0.9, 3.0], name="demo")
>>> t.median, t.noisy
(1.05, True)
>>> t.noise_note()[:47]
'Noisy: its runs spread 57 % around the median. '
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import BadInputError

__all__ = ["Timing", "noisy_note", "validate_timing_records", "NOISY_SPREAD", "BUSY_LOAD"]

#: A timing whose interquartile range exceeds this fraction of its median is flagged noisy.
NOISY_SPREAD = 0.25
#: A timing taken while the 1-minute load average per usable core exceeds this is flagged noisy:
#: more processes wanted a core than there were cores.
BUSY_LOAD = 1.25


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
        self.samples = _validate_samples(self.samples)

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
    items = validate_timing_records(timings)
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


def _validate_samples(samples: Any) -> np.ndarray:
    """``samples`` as a flat float64 array of at least one time, every one finite."""
    if isinstance(samples, (str, bytes)) or samples is None:
        raise BadInputError(f"samples must be times in seconds, got {samples!r:.80}")
    try:
        out = np.asarray(samples, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise BadInputError(f"samples must be times in seconds, got {samples!r:.80}") from None
    if out.size == 0 or not np.all(np.isfinite(out)):
        raise BadInputError(f"a Timing needs at least one finite time in seconds; got samples {out!r:.80}. "
                            "Time at least one call (repeat >= 1).")
    return out


def validate_timing_records(timings: Any) -> list[dict]:
    """``timings`` (a list of :class:`Timing`, or of the records they were stored as) as a list of records."""
    if isinstance(timings, (str, bytes, dict, np.ndarray, Timing)) or not isinstance(timings, Iterable):
        raise BadInputError(f"timings must be a list of Timing or of their records (dicts), got "
                            f"{type(timings).__name__} {timings!r:.60}")
    out = []
    for t in timings:
        if isinstance(t, dict):
            out.append(t)
        elif callable(getattr(t, "as_record", None)):
            out.append(t.as_record())
        else:
            raise BadInputError(f"timings must hold Timing or their records (dicts), got a {type(t).__name__}")
    return out
