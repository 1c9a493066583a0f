"""The course's exceptions, each saying what was wrong and what to do, and the argument check they share.

Every error the course raises on purpose derives from :class:`CourseError`, and
also from the built-in exception a Python programmer would expect (``ValueError``
for a bad argument, ``MemoryError`` for a size that does not fit, ...), so both
``except CourseError`` and ``except ValueError`` catch them.
"""

from __future__ import annotations

import numbers

__all__ = [
    "whole_number",
    "CourseError",
    "BadInputError",
    "GPUUnavailableError",
    "DeviceMemoryError",
    "UnsupportedDtypeError",
    "ResultsError",
]


class CourseError(Exception):
    """Base class of every error the course raises on purpose."""


class BadInputError(CourseError, ValueError):
    """An argument has a value the function cannot work with."""


class GPUUnavailableError(CourseError, RuntimeError):
    """A GPU was asked for, and none answered a real device call."""


class DeviceMemoryError(CourseError, MemoryError):
    """The arrays asked for would not fit in the device's memory."""


class UnsupportedDtypeError(CourseError, TypeError):
    """The device (or its array library) has no such dtype."""


class ResultsError(CourseError, ValueError):
    """A results file is missing, malformed or fails validation."""


def whole_number(name: str, value: object, lo: int = 1, hi: int | None = None, hint: str = "") -> int:
    """``value`` as an ``int`` if it is a whole number in ``[lo, hi]``; else a :class:`BadInputError` naming it.

    Python and numpy integers pass; ``bool``, floats (even ``4.0``), strings and ``None`` do not, so
    a size typed as ``2.5``, ``True`` or ``"8"`` is refused before any array is allocated.  ``hint``
    says what to try instead.

    >>> whole_number("n", 8)
    8
    >>> whole_number("n", 2.5)
    Traceback (most recent call last):
    ...
    course.errors.BadInputError: n must be a whole number >= 1, got 2.5
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < lo or (
            hi is not None and value > hi):
        span = f">= {lo}" if hi is None else f"from {lo} to {hi}"
        raise BadInputError(f"{name} must be a whole number {span}, got {value!r}" + (f"; {hint}" if hint else ""))
    return int(value)
