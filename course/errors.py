"""The course's exceptions, each saying what was wrong and what to do, and the argument check they share.

Every error the course raises on purpose derives from :class:`CourseError`, and
also from the built-in exception a Python programmer would expect (``ValueError``
for a bad argument, ``MemoryError`` for a size that does not fit, ...), so both
``except CourseError`` and ``except ValueError`` catch them.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = [
    "whole_number",
    "random_generator",
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


def random_generator(seed: object) -> np.random.Generator:
    """The numpy random ``Generator`` that ``seed=`` names everywhere in the course: a whole number
    >= 0 starts a new one; a ``Generator`` is used as it is (so several layers can draw from one in
    turn, as ``np.random.default_rng`` does).  Anything else is a :class:`BadInputError`.

    >>> int(random_generator(0).integers(10)) == int(random_generator(0).integers(10))
    True
    >>> g = np.random.default_rng(1); random_generator(g) is g
    True
    """
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(whole_number("seed", seed, lo=0, hint="a whole number such as 0, or a "
                                              "numpy Generator from np.random.default_rng(0)"))
