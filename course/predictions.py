"""Predictions that are checked: the learner writes a guess down, the measurement says how far off it was.

A lesson's predict cell asks for the guess and records it; the cell that measures reveals it next to the
measurement, with how far off it was (a factor and a percentage of the measurement) and one line, written
by the lesson, on why the gap is worth a thought.  A prediction is the learner's to make, so a lesson's
predict cell ships with ``None`` in its place: run as it stands (Run All, the executed book), it records
nothing and asks for a number, and the reveal says to make the prediction first::

    course.predictions.predict("numpy_speedup", None, unit="×")    # the learner writes a number for None
    ...                                                           # the measurement
    course.predictions.reveal("numpy_speedup", speedup, why="each loop step runs tens of bytecodes")

>>> predict("doc_example", 10, unit=" µs")
Your prediction: doc_example = 10 µs. The measurement below says how far off it is.
>>> reveal("doc_example", 25.0, why="a launch costs more than the work of a small kernel.")
You predicted 10 µs; measured 25 µs: 2.5× too low (60 % under the measurement).
Why it matters: a launch costs more than the work of a small kernel.
"""

from __future__ import annotations

import math
from typing import Any

from .errors import BadInputError, finite_number

__all__ = ["predict", "reveal", "prediction_error", "recorded"]

#: Close enough to call a prediction right: within this fraction of the measurement.
WELL_PREDICTED = 0.1

_GUESSES: dict[str, tuple[float, str]] = {}
_UNITS: dict[str, str] = {}          # the unit a predict cell names, kept even while its guess is None


def _validate_number(what: str, value: Any) -> float:
    return finite_number(what, value, hint="e.g. 10 or 2.5e6")


def _validate_name(name: Any) -> str:
    """``name`` if it can name a prediction (a non-empty string), else a :class:`BadInputError`."""
    if not isinstance(name, str) or not name:
        raise BadInputError(f"name must be the quantity's name, a non-empty string such as 'relu_gbs'; "
                            f"got {name!r:.80}")
    return name


def _shown(x: float) -> str:
    """A number as a reader writes it: whole numbers with thousands separators, others to 3 figures."""
    if x == int(x) and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:,.3g}" if 1e-3 <= abs(x) < 1e6 else f"{x:.3g}"


def predict(name: str, guess: float | None, unit: str = "") -> None:
    """Record the learner's ``guess`` for the quantity ``name`` (a later :func:`reveal` compares with it).

    Recording again under the same name replaces the earlier guess; ``None`` (the value a lesson's predict
    cell ships with) records nothing, forgets an earlier guess, and asks for one.  Nothing is returned, so
    a notebook cell that ends with the call shows only the sentence it prints.

    >>> predict("doc_none", None, unit="×")
    No prediction recorded for doc_none: write your guess (a number) in place of None in this cell and run it again.
    """
    if not isinstance(name, str) or not name:
        raise BadInputError(f"name must be a non-empty string naming what is predicted; got {name!r}")
    _UNITS[name] = unit
    if guess is None:
        _GUESSES.pop(name, None)
        print(f"No prediction recorded for {name}: write your guess (a number) in place of None in this cell and "
              "run it again.")
        return
    value = _validate_number(f"the prediction for {name!r}", guess)
    _GUESSES[name] = (value, unit)
    print(f"Your prediction: {name} = {_shown(value)}{unit}. The measurement below says how far off it is.")


def recorded(name: str) -> float | None:
    """The guess recorded for ``name``, or None if its predict cell has not run."""
    name = _validate_name(name)
    return _GUESSES[name][0] if name in _GUESSES else None


def prediction_error(guess: float, measured: float) -> dict:
    """How far ``guess`` is from ``measured``: the factor and the signed percentage of the measurement.

    ``factor`` is ``max(measured/guess, guess/measured)`` (1 = exact; None unless both are positive);
    ``percent`` is ``100 (guess - measured) / measured`` (None when the measurement is 0);
    ``direction`` is ``"low"``, ``"high"`` or ``"exact"``.

    >>> prediction_error(10, 40)
    {'factor': 4.0, 'percent': -75.0, 'direction': 'low'}
    """
    guess, measured = _validate_number("guess", guess), _validate_number("the measurement", measured)
    factor = max(measured / guess, guess / measured) if guess > 0 and measured > 0 else None
    percent = 100.0 * (guess / abs(measured) - math.copysign(1.0, measured)) if measured else None  # no overflow
    direction = "exact" if guess == measured else "low" if guess < measured else "high"
    return {"factor": factor, "percent": percent, "direction": direction}


def reveal(name: str, measured: float | None, why: str = "", unit: str | None = None,
           unmeasured: str = "", source: str = "", verb: str = "measured") -> None:
    """Print the guess recorded for ``name`` against ``measured``, how far off it was, and ``why`` it matters.

    ``measured`` may be None when the quantity could not be measured here; ``unmeasured`` says why.
    ``unit`` defaults to the one given to :func:`predict`. ``source`` says where the number comes from
    when it is not a live measurement (a reference run on another device); ``verb`` is "counted" for a
    number that is counted, not measured.
    """
    name = _validate_name(name)
    guess, recorded_unit = _GUESSES.get(name, (None, _UNITS.get(name, "")))
    unit = recorded_unit if unit is None else unit
    if measured is not None:
        measured = _validate_number(f"the measurement of {name!r}", measured)
    if measured is None:
        print(f"{name} could not be measured here" + (f" ({unmeasured})" if unmeasured else "")
              + (f"; keep your prediction of {_shown(guess)}{unit} for a machine where it can be." if guess is not None
                 else "."))
    elif guess is None:
        print(f"{verb.capitalize()} {name} = {_shown(measured)}{unit}. Make your prediction first: write a number "
              f"in place of None in course.predictions.predict(\"{name}\", ...) (the predict line before this "
              "measurement), run it, then run this cell again to see how far off you were.")
    else:
        err = prediction_error(guess, measured)
        head = (f"You predicted {_shown(guess)}{unit}; {verb} {_shown(measured)}{unit}"
                + (f" ({source})" if source else ""))
        if err["direction"] == "exact":
            print(f"{head}: exactly right.")
        elif err["percent"] is not None and abs(err["percent"]) <= 100 * WELL_PREDICTED:
            print(f"{head}: within {abs(err['percent']):.0f} % of the measurement, well predicted.")
        else:
            factor = f"{err['factor']:.2g}× too {err['direction']}" if err["factor"] else f"too {err['direction']}"
            pct = (f" ({abs(err['percent']):,.0f} % {'under' if err['percent'] < 0 else 'over'} the measurement)"
                   if err["percent"] is not None else "")
            print(f"{head}: {factor}{pct}.")
    if why:
        print(f"Why it matters: {why}")
