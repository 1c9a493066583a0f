"""The course's exceptions, each saying what was wrong and what to do, and the argument check they share.

Every error the course raises on purpose derives from :class:`CourseError`, and
also from the built-in exception a Python programmer would expect (``ValueError``
for a bad argument, ``MemoryError`` for a size that does not fit, ...), so both
``except CourseError`` and ``except ValueError`` catch them.
"""

from __future__ import annotations

import math
import numbers
import os
import tempfile
from pathlib import Path

import numpy as np

__all__ = [
    "whole_number",
    "finite_number",
    "shown_value",
    "validate_output_folder",
    "validate_text",
    "validate_function",
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


def finite_number(name: str, value: object, hint: str = "") -> float:
    """``value`` as a ``float`` if it is one finite real number; else a :class:`BadInputError` naming it.

    ``bool``, strings, arrays (even of one element), complex numbers, NaN and infinities are refused, and so
    is a Python integer too large for a float (``10**400``), which ``float()`` cannot convert.

    >>> finite_number("bandwidth", 10**400)
    Traceback (most recent call last):
    ...
    course.errors.BadInputError: bandwidth must be a finite number, got an integer of 401 digits, too large for a float
    """
    def refuse() -> BadInputError:
        said = f"{name} must be a finite number, got {shown_value(value)}"
        return BadInputError(said + (f"; {hint}" if hint else ""))

    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise refuse()
    try:
        v = float(value)
    except OverflowError:
        raise refuse() from None
    if not math.isfinite(v):
        raise refuse()
    return v


def shown_value(value: object) -> str:
    """``value`` as an error message shows it: its repr, cut to 80 characters; an integer too large for a
    float by its number of digits."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and abs(int(value)) > 2**1023:
        return f"an integer of {len(str(abs(int(value))))} digits, too large for a float"
    return f"{value!r:.80}"


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


def validate_text(value: object, what: str = "text", empty: bool = True) -> str:
    """``value`` if it is a string (a non-empty one unless ``empty``); else a :class:`BadInputError` naming
    ``what``: a label, a record's key, a name.

    >>> validate_text(3, "title")
    Traceback (most recent call last):
    ...
    course.errors.BadInputError: title must be a string, got 3
    """
    if not isinstance(value, str) or not (empty or value.strip()):
        raise BadInputError(f"{what} must be a{'' if empty else ' non-empty'} string, got {shown_value(value)}")
    return value


def validate_function(fn: object, what: str = "fn") -> object:
    """``fn`` if it can be called; else a :class:`BadInputError` naming ``what``."""
    if not callable(fn):
        raise BadInputError(f"{what} must be a function to call, got {type(fn).__name__} {shown_value(fn)}")
    return fn


def validate_output_folder(out: object, flag: str = "--out", room: int = 48) -> Path:
    """``out`` as an absolute ``Path`` if it can be a folder that a command writes into; else a
    :class:`BadInputError` saying why and what to choose instead.

    Refused: an empty name, an existing file, a name longer than the file system allows (less ``room``
    characters for the working and interrupted folders named after it, ``.<name>.running-<pid>-...``), and
    a place whose folder cannot be made or written.  Nothing is created but the parent folders; the
    folder itself may exist (the command decides what it may hold).

    >>> validate_output_folder("x" * 300)
    Traceback (most recent call last):
    ...
    course.errors.BadInputError: --out: the name ... is 300 characters; the file system allows 207 here. ...
    """
    if out is None or not isinstance(out, (str, os.PathLike)) or str(out).strip() == "":
        raise BadInputError(f"{flag} must name a folder (e.g. {flag} report); got {out!r}")
    path = Path(out).absolute()
    for part in path.parts[1:]:
        limit = 255 - (room if part == path.name else 0)
        if len(os.fsencode(part)) > limit:
            raise BadInputError(f"{flag}: the name {part[:48]!r}... is {len(part)} characters; the file system "
                                f"allows {limit} here. Choose a shorter name.")
    try:
        if path.exists() and not path.is_dir():
            raise BadInputError(f"{flag} {path} is a file, not a folder: name a folder (a new one is made)")
        path.parent.mkdir(parents=True, exist_ok=True)
        tempfile.NamedTemporaryFile(dir=path.parent, prefix=".write-test-", delete=True).close()
    except OSError as exc:
        raise BadInputError(f"{flag} {path} cannot be written ({exc.strerror or exc}): choose another folder") from None
    return path
