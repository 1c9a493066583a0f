"""The memory's speed, measured the way the STREAM benchmark does it: on every core at once.

A streaming operation (ReLU, a copy, a scan) moves bytes and does almost no
arithmetic, so its limit is the memory's bandwidth.  Which bandwidth?  One numpy
call runs on one core, and one core often cannot keep every memory channel busy;
John McCalpin's STREAM benchmark therefore runs its four tiny loops on *all* cores
(OpenMP in the original) over arrays far larger than the caches, and reports the
best of several runs.  This module does the same with numba's ``prange``:

=======  ======================  ====================
kernel   loop                    bytes per element
=======  ======================  ====================
copy     ``c[i] = a[i]``         2 words (read, write)
scale    ``b[i] = q * c[i]``     2 words
add      ``c[i] = a[i] + b[i]``  3 words
triad    ``a[i] = b[i] + q*c[i]``  3 words
=======  ======================  ====================

The byte counts follow STREAM's convention: the extra read a CPU makes to bring a
line it is about to overwrite into its cache ("write-allocate") is not counted, so
the figures compare directly with STREAM results published elsewhere.  This is a
peer that shares no code with what the lessons measure: ``numpy.copyto``, ReLU and
the scans are compared *against* it, so it must not be one of them.

>>> r = stream_bandwidth(n=2**16, repeat=2, kernels=("copy",))
>>> r["copy"]["bytes_per_s"] > 0
True
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import njit, prange

from .errors import BadInputError, finite_number, whole_number
from .limits import require_fits, validate_dtype
from .timing import benchmark

__all__ = ["KERNELS", "WORDS", "stream_copy", "stream_scale", "stream_add", "stream_triad", "stream_bandwidth",
           "stream_threads", "warm_up", "DEFAULT_N"]

KERNELS = ("copy", "scale", "add", "triad")
#: Words moved per element by each kernel (STREAM's count: write-allocate traffic not included).
WORDS = {"copy": 2, "scale": 2, "add": 3, "triad": 3}
#: Elements per array by default: 2^25 float64 = 256 MiB per array, many times any CPU's last-level cache.
DEFAULT_N = 2**25


@njit(parallel=True, cache=True)
def _copy(a, c):
    for i in prange(a.shape[0]):
        c[i] = a[i]


@njit(parallel=True, cache=True)
def _scale(c, b, q):
    for i in prange(c.shape[0]):
        b[i] = q * c[i]


@njit(parallel=True, cache=True)
def _add(a, b, c):
    for i in prange(a.shape[0]):
        c[i] = a[i] + b[i]


@njit(parallel=True, cache=True)
def _triad(b, c, a, q):
    for i in prange(b.shape[0]):
        a[i] = b[i] + q * c[i]


def _validate_streams(*arrays: Any, q: Any = 1.0) -> None:
    """Raise a :class:`BadInputError` unless the arrays are contiguous 1-d numpy arrays of one shape and dtype,
    and the scalar ``q`` a finite number."""
    finite_number("q", q, hint="the scalar the kernel multiplies by, e.g. 3.0")
    first = arrays[0]
    for arr in arrays:
        if not isinstance(arr, np.ndarray) or arr.ndim != 1 or not arr.flags.c_contiguous:
            raise BadInputError(f"STREAM kernels take contiguous 1-d numpy arrays, got {type(arr).__name__} "
                                f"of shape {getattr(arr, 'shape', None)}")
        if arr.shape != first.shape or arr.dtype != first.dtype:
            raise BadInputError(f"all arrays must have the same shape and dtype, got {first.shape} {first.dtype} "
                                f"and {arr.shape} {arr.dtype}")


def stream_copy(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    """STREAM Copy on all cores: ``c[i] = a[i]``.  Returns ``c``.

    >>> stream_copy(np.arange(3.0), np.zeros(3))
    array([0., 1., 2.])
    """
    _validate_streams(a, c)
    _copy(a, c)
    return c


def stream_scale(c: np.ndarray, b: np.ndarray, q: float = 3.0) -> np.ndarray:
    """STREAM Scale on all cores: ``b[i] = q * c[i]``.  Returns ``b``.

    >>> stream_scale(np.arange(3.0), np.zeros(3), 2.0)
    array([0., 2., 4.])
    """
    _validate_streams(c, b, q=q)
    _scale(c, b, c.dtype.type(q))
    return b


def stream_add(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """STREAM Add on all cores: ``c[i] = a[i] + b[i]``.  Returns ``c``.

    >>> stream_add(np.ones(2), np.ones(2), np.zeros(2))
    array([2., 2.])
    """
    _validate_streams(a, b, c)
    _add(a, b, c)
    return c


def stream_triad(b: np.ndarray, c: np.ndarray, a: np.ndarray, q: float = 3.0) -> np.ndarray:
    """STREAM Triad on all cores: ``a[i] = b[i] + q * c[i]``.  Returns ``a``.

    >>> stream_triad(np.ones(2), np.ones(2), np.zeros(2), 3.0)
    array([4., 4.])
    """
    _validate_streams(b, c, a, q=q)
    _triad(b, c, a, b.dtype.type(q))
    return a


def stream_threads(threads: int | None = None) -> int:
    """The threads the kernels run on: ``threads``, or the course's default (the usable cores),
    capped at the threads numba started with.

    >>> stream_threads(1)
    1
    """
    want = None if threads is None else whole_number("threads", threads, hint="the cores to run on")
    from .threads import core_threads

    if want is None:
        want = core_threads()
    return max(1, min(want, numba.config.NUMBA_NUM_THREADS))


def warm_up(dtype: Any = "float64") -> None:
    """Compile (or load from numba's cache) the four kernels, so that no timing pays for it."""
    dtype = validate_dtype(dtype)
    a, b, c = (np.ones(16, dtype=dtype) for _ in range(3))
    stream_copy(a, c), stream_scale(c, b), stream_add(a, b, c), stream_triad(b, c, a)


def stream_bandwidth(n: int = DEFAULT_N, dtype: Any = "float64", kernels: tuple[str, ...] = ("copy", "triad"),
                     threads: int | None = None, repeat: int = 10, budget_s: float | None = 10.0) -> dict:
    """Measure STREAM's kernels on all cores: bytes per second for each, best run and median.

    Parameters
    ----------
    n : elements per array (three arrays are allocated).  STREAM's rule: each array at
        least four times the last-level cache, so that no run is served from cache.
    dtype : ``"float64"`` (STREAM's own) or ``"float32"``.
    kernels : which of :data:`KERNELS` to run.
    threads : cores to run on (default :func:`stream_threads`).
    repeat, budget_s : timed runs per kernel, and the seconds all of them may take.

    Returns
    -------
    dict : one entry per kernel, ``{"bytes_per_s", "gb_per_s", "median_bytes_per_s", "timing"}``
    (``bytes_per_s`` from the best run, as STREAM reports; the median beside it), plus
    ``"threads"``, ``"n"`` and ``"dtype"``.

    Examples
    --------
    >>> stream_bandwidth(n=2**12, repeat=1, kernels=("triad",), threads=1)["threads"]
    1
    """
    n = whole_number("n", n, hint="elements per array (three arrays are allocated)")
    if isinstance(kernels, str):
        kernels = (kernels,)
    if validate_dtype(dtype, "cpu").name not in ("float32", "float64"):
        raise BadInputError(f"dtype must be float32 or float64, got {dtype!r}")
    bad = [k for k in kernels if k not in KERNELS]
    if bad or not kernels:
        raise BadInputError(f"kernels must be a non-empty selection of {KERNELS}, got {kernels!r}")
    dt = np.dtype(dtype)
    require_fits(3 * int(n) * dt.itemsize, "cpu", what=f"three arrays of {int(n):,} {dt.name}")
    nthreads = stream_threads(threads)
    a = np.full(int(n), 1.0, dtype=dt)        # touched once here, so no page fault is timed
    b = np.full(int(n), 2.0, dtype=dt)
    c = np.zeros(int(n), dtype=dt)
    calls = {"copy": (stream_copy, (a, c)), "scale": (stream_scale, (c, b)), "add": (stream_add, (a, b, c)),
             "triad": (stream_triad, (b, c, a))}
    per_kernel = None if budget_s is None else budget_s / len(kernels)
    before = numba.get_num_threads()
    numba.set_num_threads(nthreads)
    out: dict = {"threads": nthreads, "n": int(n), "dtype": dt.name}
    try:
        warm_up(dt)
        for k in kernels:
            fn, args = calls[k]
            t = benchmark(fn, *args, warmup=1, repeat=repeat, budget_s=per_kernel, name=f"STREAM {k}",
                          blas_threads=nthreads)
            moved = WORDS[k] * int(n) * dt.itemsize
            out[k] = {"bytes_per_s": moved / t.min, "gb_per_s": moved / t.min / 1e9,
                      "median_bytes_per_s": moved / t.median, "timing": t}
    finally:
        numba.set_num_threads(before)
    return out
