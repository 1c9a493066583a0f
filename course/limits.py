"""What a device can hold: the dtypes its arrays support (:func:`validate_dtype`) and the memory it
has left (:func:`available_memory`).  :func:`require_fits` is called before every big allocation, so
that a slider pushed too far gives a message saying what to choose instead of a dead kernel.

>>> validate_dtype("float32", "cpu")
dtype('float32')
"""

from __future__ import annotations

import math
import numbers
import re
from typing import Any

import numpy as np

from .cpu import memory_bytes
from .devices import cupy_module, normalize_device, require_gpu, validate_device
from .errors import BadInputError, DeviceMemoryError, UnsupportedDtypeError

__all__ = ["validate_dtype", "require_fits", "available_memory", "out_of_memory_errors", "full_nbytes"]

_CPU_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64",
               "uint8", "uint16", "uint32", "uint64", "bool", "complex64", "complex128")


def validate_dtype(dtype: Any, device: Any = "cpu", floating: bool = False) -> np.dtype:
    """Return ``numpy.dtype(dtype)`` if ``device`` can hold it; else a clear error.

    ``floating=True`` (weights, random inputs, anything with fractions) also refuses integer, boolean
    and complex dtypes with a :class:`BadInputError`: an ``int32`` weight rounds to 0, a ``bool`` one to True.
    ``bfloat16`` has no numpy or CuPy array type; lessons that time bfloat16
    matrix products do it through a library that has one and say so.

    >>> validate_dtype("int32", floating=True)
    Traceback (most recent call last):
    ...
    course.errors.BadInputError: dtype must be a floating-point type (float16, float32 or float64), got 'int32': ...
    """
    d = normalize_device(device)
    name = str(getattr(dtype, "__name__", dtype)).lower()
    if name in ("bfloat16", "bf16"):
        raise UnsupportedDtypeError(
            f"dtype {dtype!r}: numpy and CuPy arrays have no bfloat16 type. Use float16 or "
            "float32 here; the mixed-precision lessons time bfloat16 through PyTorch when it is installed.")
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise UnsupportedDtypeError(f"{dtype!r} is not a dtype numpy knows ({exc}); "
                                    f"try one of {', '.join(_CPU_DTYPES[:3])}") from None
    if dt.name not in _CPU_DTYPES:
        raise UnsupportedDtypeError(f"dtype {dt.name!r} is not supported on {d}; "
                                    f"use one of: {', '.join(_CPU_DTYPES)}")
    if floating and dt.kind != "f":
        raise BadInputError(f"dtype must be a floating-point type (float16, float32 or float64), got {dt.name!r}: "
                            "these values have fractions, which integers and booleans would round away (most "
                            "to 0), and complex numbers are not meant here.")
    if d == "gpu":
        require_gpu()
    return dt


def available_memory(device: Any = "cpu") -> int | None:
    """Bytes that can still be allocated on ``device`` (None if unknown)."""
    d = validate_device(device)
    if d == "gpu":
        require_gpu()
        free, _total = cupy_module().cuda.Device().mem_info
        pool = cupy_module().get_default_memory_pool()
        return int(free + pool.free_bytes())
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(re.findall(r"\d+", line)[0]) * 1024
    except OSError:
        pass
    return memory_bytes()


def out_of_memory_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that mean "this size did not fit": the course's own refusal made before
    allocating (:class:`DeviceMemoryError`), NumPy's ``MemoryError``, and CuPy's
    ``OutOfMemoryError`` where CuPy is installed.  A sweep catches these to note a refused size
    and go on with the next one.

    >>> DeviceMemoryError in out_of_memory_errors()
    True
    """
    errs: list[type[BaseException]] = [DeviceMemoryError, MemoryError]
    cp = cupy_module()
    if cp is not None:
        try:
            errs.append(cp.cuda.memory.OutOfMemoryError)
        except AttributeError:
            pass
    return tuple(errs)


def full_nbytes(*arrays: Any) -> int:
    """Bytes the arrays take once written out in full: ``size × itemsize`` each, so a broadcast view
    (``np.broadcast_to``, which holds one element) counts as the copy any computation on it makes.
    Anything without a ``dtype`` and a ``size`` counts 0.

    >>> full_nbytes(np.broadcast_to(np.float32(1), (10**12,)))
    4000000000000
    """
    return sum(int(a.size) * int(a.dtype.itemsize) for a in arrays if hasattr(a, "dtype") and hasattr(a, "size"))


def require_fits(nbytes: int, device: Any = "cpu", what: str = "these arrays",
                 fraction: float = 0.5) -> None:
    """Raise :class:`DeviceMemoryError` if ``nbytes`` exceeds ``fraction`` of free memory.

    Called before a big allocation so that a slider pushed too far gives a
    message instead of a dead kernel.  Count what will be built from the shapes, before building it;
    for inputs that may be broadcast views, :func:`full_nbytes` counts them by their size.
    """
    if isinstance(nbytes, bool) or not isinstance(nbytes, numbers.Real) or math.isnan(nbytes) or nbytes < 0:
        raise BadInputError(f"{what}: nbytes must be a number of bytes >= 0, got {nbytes!r}")
    if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real) or not 0 < fraction <= 1:
        raise BadInputError(f"fraction must be a share of the free memory in (0, 1], got {fraction!r}")
    avail = available_memory(device)
    if math.isinf(nbytes) or (avail is not None and nbytes > fraction * avail):
        raise DeviceMemoryError(
            f"{what} need {nbytes / 2**30:.2f} GiB, but only {avail / 2**30:.2f} GiB is free on "
            f"the {normalize_device(device).upper()} (the course uses at most {fraction:.0%} of it). "
            "Choose a smaller size.")
