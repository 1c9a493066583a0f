"""How many BLAS/OpenMP threads a measurement runs with, set explicitly every time.

On a shared 2-core machine (Binder, Colab's free tier, a laptop with a browser open) other
processes take turns on the cores, and a BLAS library that starts one thread per core then waits
for its own threads (a 512 product ran 9x slower with two threads than with one on a 2-core
machine with more runnable processes than cores).  So :func:`course.timing.benchmark` runs every
measurement under :class:`thread_limit` with :func:`get_threads` threads: ``COURSE_THREADS`` or what
:func:`set_threads` chose; else the cores this process may really use
(:func:`course.cpu.usable_cores`), or **one** thread when the machine is oversubscribed (more
runnable processes than those cores, :func:`course.cpu.runnable_processes`).  That default is
decided once, at the first measurement, so that the points of one sweep never change threads midway;
:func:`threads_note` says when it chose one thread and why.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from .arguments import OneOf, arguments
from .cpu import runnable_processes, usable_cores
from .errors import BadInputError, whole_number

__all__ = ["get_threads", "set_threads", "thread_limit", "validate_threads", "default_threads", "threads_note",
           "core_threads"]

_threads: int | None = None
_default: tuple[int, str] | None = None     # (threads, why) decided at the first measurement


def validate_threads(n: Any, what: str = "threads") -> int:
    """``n`` as a count of threads (1 to 4096), or a :class:`BadInputError` naming ``what``."""
    return whole_number(what, n, hi=4096, hint="a whole number of threads, e.g. 1 or the cores this machine has")


def _default_threads() -> int:
    env = os.environ.get("COURSE_THREADS", "").strip()
    if env:
        try:
            return validate_threads(int(env), "COURSE_THREADS")
        except ValueError:
            raise BadInputError(f"COURSE_THREADS must be a whole number >= 1, got {env!r}") from None
    return default_threads()[0]


@arguments(recheck=OneOf(True, False))
def default_threads(recheck: bool = False) -> tuple[int, str]:
    """``(threads, why)``: the cores this process may use, or 1 when the machine is oversubscribed
    (``why`` then says so; it is ``""`` otherwise).  Decided once per process, at the first call;
    ``recheck=True`` looks at the machine again.

    >>> n, why = default_threads()
    >>> n >= 1 and (n == 1 or why == "")
    True
    """
    global _default
    if _default is None or recheck:
        cores, runnable = usable_cores(), runnable_processes()
        if cores > 1 and runnable is not None and runnable > cores:
            _default = (1, f"this machine was oversubscribed ({runnable:.0f} runnable processes for its {cores} "
                           f"cores), where a BLAS with one thread per core waits for its own threads. Set "
                           f"COURSE_THREADS={cores} (or course.threads.set_threads({cores})) to use every core")
        else:
            _default = (cores, "")
    return _default


def core_threads() -> int:
    """The threads a run that spreads its own work over the cores uses (the blocked scan, the STREAM
    kernels): ``COURSE_THREADS`` or :func:`set_threads` when given, else every usable core, even on an
    oversubscribed machine, where those runs are compared with one thread on purpose.

    >>> core_threads() >= 1
    True
    """
    if _threads is not None or os.environ.get("COURSE_THREADS", "").strip():
        return get_threads()
    return usable_cores()


def threads_note() -> str:
    """One sentence when measurements use one BLAS thread because the machine was oversubscribed,
    else ``""`` (also when ``COURSE_THREADS`` or :func:`set_threads` chose the count)."""
    if _threads is not None or os.environ.get("COURSE_THREADS", "").strip():
        return ""
    n, why = default_threads()
    return f"Measured with {n} BLAS thread by default: {why}." if why else ""


def get_threads() -> int:
    """The BLAS/OpenMP threads every measurement uses unless told otherwise.

    The default is the number of cores this process may really use
    (:func:`course.cpu.usable_cores`: affinity and a container's CPU quota), or one when the
    machine is oversubscribed (:func:`default_threads`), or the environment variable
    ``COURSE_THREADS``; :func:`set_threads` changes it.

    >>> get_threads() >= 1
    True
    """
    return _threads if _threads is not None else _default_threads()


def set_threads(n: int | None = None) -> int:
    """Use ``n`` BLAS/OpenMP threads for every later measurement (``None``: back to the default).

    Try ``course.threads.set_threads(1)`` on a busy machine: a BLAS that runs one thread per core
    while other processes want those cores spends its time waiting for its own threads.
    Returns the number now in force.

    >>> before = get_threads()
    >>> set_threads(1)
    1
    >>> set_threads(None) == before
    True
    """
    n = None if n is None else validate_threads(n)
    global _threads
    _threads = n
    return get_threads()


class thread_limit:
    """Context manager: run the block with ``n`` BLAS/OpenMP threads (numpy's BLAS, OpenMP, and
    PyTorch's intra-op pool when PyTorch is loaded), then put back what was there.

    >>> import numpy as np
    >>> with thread_limit(1):
    ...     _ = np.ones((8, 8)) @ np.ones((8, 8))
    """

    def __init__(self, n: int | None = None):
        self.n = get_threads() if n is None else validate_threads(n)
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
