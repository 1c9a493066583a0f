"""The course's exceptions: each says what was wrong and what to do about it.

Every error the course raises on purpose derives from :class:`CourseError`, and
also from the built-in exception a Python programmer would expect (``ValueError``
for a bad argument, ``MemoryError`` for a size that does not fit, ...), so both
``except CourseError`` and ``except ValueError`` catch them.
"""

from __future__ import annotations

__all__ = [
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
