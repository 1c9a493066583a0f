"""Validation at the door, declared once: ``@arguments(n=Whole(), seed=Seed())`` above a function.

Every public entry point of the course refuses a bad argument with a message that says what was
wrong and what to do, before anything is allocated.  Written as checks at the top of each function,
that took more lines than some algorithms it guarded.  Here the rules are declared above the
function instead, so its body reads as the algorithm alone:

>>> @arguments(n=Whole(hint="the vector length"), p=Whole(hi="n", hint="one chunk per worker"))
... def chunk_starts(n, p):
...     return [c * n // p for c in range(p)]
>>> chunk_starts(10, 4)
[0, 2, 5, 7]
>>> chunk_starts(4, 8)
Traceback (most recent call last):
...
course.errors.BadInputError: p must be a whole number from 1 to 4, got 8; one chunk per worker

Each rule takes the argument's name, its value and the arguments validated so far, and returns
the value the function receives (a numpy integer becomes an ``int``, a seed a ``Generator``).  Rules
run in the order they are declared, so a bound can name an earlier argument (``hi="n"``, or
``hi="p - 1"``).  ``then=`` names one function for what no single argument can say (``batch >=
p``, a size that must fit in memory); it is called with the validated arguments it names.

A lesson's own validators (``validate_workers``, ``validate_dtype``, ...) join in with
:class:`Given`.
"""

from __future__ import annotations

import functools
import inspect
import numbers
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .errors import BadInputError, finite_number, random_generator, shown_value, whole_number

__all__ = ["arguments", "Whole", "Wholes", "Real", "OneOf", "Seed", "Dtype", "Devices", "Given", "Optional"]

#: The most numbers a :class:`Wholes` argument holds (sizes, widths, sweeps: a few dozen in the course).
MAX_WHOLES = 100_000

_BOUND = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?:([+-])\s*(\d+))?\s*$")


def _parse_bound(limit: int | str | None) -> int | tuple[str, int] | None:
    """An int, None, or ``"name"`` / ``"name - k"`` / ``"name + k"`` as (name, k), read once."""
    if limit is None or isinstance(limit, int):
        return limit
    name, sign, k = _BOUND.match(limit).groups()
    return name, 0 if sign is None else int(k) * (1 if sign == "+" else -1)


def _bound(limit: int | tuple[str, int] | None, known: dict[str, Any]) -> int | None:
    return known[limit[0]] + limit[1] if isinstance(limit, tuple) else limit


class Rule:
    """What a rule is: ``rule(name, value, known) -> value``; ``known`` holds the arguments before it."""

    def __call__(self, name: str, value: Any, known: dict[str, Any]) -> Any:  # pragma: no cover
        raise NotImplementedError

    def names(self) -> list[str]:
        """The earlier arguments this rule reads (checked when the function is declared)."""
        return []


class Whole(Rule):
    """A whole number in ``[lo, hi]`` (see :func:`~course.errors.whole_number`); ``bool``, floats and
    strings are refused.  ``lo``/``hi`` may name an earlier argument: ``hi="n"``, ``hi="p - 1"``."""

    def __init__(self, lo: int | str = 1, hi: int | str | None = None, hint: str = ""):
        self.lo, self.hi, self.hint = _parse_bound(lo), _parse_bound(hi), hint

    def __call__(self, name, value, known):
        return whole_number(name, value, _bound(self.lo, known), _bound(self.hi, known), self.hint)

    def names(self):
        return [b[0] for b in (self.lo, self.hi) if isinstance(b, tuple)]


class Wholes(Rule):
    """A non-empty sequence of whole numbers, each in ``[lo, hi]``, as a list of ``int``; at least
    ``min_len`` of them (a string is refused: ``"64"`` is not a list of sizes)."""

    def __init__(self, lo: int = 1, hi: int | None = None, min_len: int = 1, hint: str = ""):
        self.rule, self.min_len, self.hint = Whole(lo, hi, hint), min_len, hint

    def __call__(self, name, value, known):
        if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
            raise BadInputError(f"{name} must be a list of whole numbers, got {shown_value(value)}"
                                + (f"; {self.hint}" if self.hint else ""))
        if len(value) > MAX_WHOLES:                 # checked before one is read: 10**12 of them would never end
            raise BadInputError(f"{name} must hold at most {MAX_WHOLES:,} whole numbers, got {len(value):,}"
                                + (f"; {self.hint}" if self.hint else ""))
        out = [self.rule(name, v, known) for v in value]
        if len(out) < self.min_len:
            raise BadInputError(f"{name} must hold at least {self.min_len} whole number"
                                f"{'s' if self.min_len > 1 else ''}, got {list(value)!r}"
                                + (f"; {self.hint}" if self.hint else ""))
        return out


class Real(Rule):
    """A finite real number (``bool`` refused) as a ``float``, ``lo <= x <= hi``; ``above=`` is a strict
    lower bound (a learning rate above 0)."""

    def __init__(self, lo: float | None = None, hi: float | None = None, above: float | None = None,
                 hint: str = ""):
        self.lo, self.hi, self.above, self.hint = lo, hi, above, hint

    def __call__(self, name, value, known):
        try:
            v = finite_number(name, value)
            ok = ((self.lo is None or v >= self.lo) and (self.hi is None or v <= self.hi)
                  and (self.above is None or v > self.above))
        except BadInputError:
            ok = False
        if not ok:
            span = [f"> {self.above:g}" if self.above is not None else "",
                    f">= {self.lo:g}" if self.lo is not None else "", f"<= {self.hi:g}" if self.hi is not None else ""]
            span = " and ".join(s for s in span if s)
            raise BadInputError(f"{name} must be a finite number{' ' + span if span else ''}, got {shown_value(value)}"
                                + (f"; {self.hint}" if self.hint else ""))
        return v


class OneOf(Rule):
    """One of the given choices (compared as given; strings also case-insensitively)."""

    def __init__(self, *choices: Any):
        self.choices = choices

    def __call__(self, name, value, known):
        if isinstance(value, np.ndarray) and value.ndim:          # never compared element by element
            raise BadInputError(f"{name} must be one of {', '.join(map(repr, self.choices))}; got an array of shape "
                                f"{value.shape}")
        for c in self.choices:
            if isinstance(value, type(c)) or isinstance(value, numbers.Number) and isinstance(c, numbers.Number):
                same = value == c or isinstance(value, str) and value.lower() == c.lower()
                if isinstance(same, (bool, np.bool_)) and same:
                    return c
        raise BadInputError(f"{name} must be one of {', '.join(map(repr, self.choices))}; got {value!r:.120}")


class Seed(Rule):
    """``seed=``: a whole number >= 0, or a numpy ``Generator`` used as it is (see
    :func:`~course.errors.random_generator`); the function receives the ``Generator``."""

    def __call__(self, name, value, known):
        return random_generator(value)


class Dtype(Rule):
    """A dtype the device can hold, as a ``numpy.dtype``; ``device=`` names the argument holding the device
    (validated first), else the CPU.  ``floating=True`` refuses integer, boolean and complex dtypes (weights
    and random inputs need fractions)."""

    def __init__(self, device: str | None = None, floating: bool = False):
        self.device, self.floating = device, floating

    def __call__(self, name, value, known):
        from .limits import validate_dtype

        return validate_dtype(value, known[self.device] if self.device else "cpu", floating=self.floating)

    def names(self):
        return [self.device] if self.device else []


class Devices(Rule):
    """``devices=``: None for every device that answers, else a list of names (a GPU asked for where
    none answers is refused; see :func:`~course.devices.resolve_devices`)."""

    def __call__(self, name, value, known):
        from .devices import resolve_devices

        if value is not None and not isinstance(value, (str, list, tuple)):
            raise BadInputError(f"{name} must be None (every device that answers) or device names such as "
                                f"['cpu', 'gpu'], got {shown_value(value)}")
        return resolve_devices(value)


class Given(Rule):
    """An existing validator, ``validate(value) -> value`` (a lesson's ``validate_workers``); ``**kwargs``
    are passed to it, and ``earlier=`` names arguments passed to it by keyword as well."""

    def __init__(self, validate: Callable[..., Any], *, earlier: Sequence[str] = (), **kwargs: Any):
        self.validate, self.earlier, self.kwargs = validate, tuple(earlier), kwargs

    def __call__(self, name, value, known):
        return self.validate(value, **self.kwargs, **{k: known[k] for k in self.earlier})

    def names(self):
        return list(self.earlier)


class Optional(Rule):
    """``None`` passes as it is; anything else must pass ``rule``."""

    def __init__(self, rule: Rule):
        self.rule = rule

    def __call__(self, name, value, known):
        return None if value is None else self.rule(name, value, known)

    def names(self):
        return self.rule.names()


def arguments(then: Callable[..., Any] | None = None, **rules: Rule) -> Callable:
    """Declare the rules a function's arguments must pass; they run before its body, in order.

    ``then``: a function called last with the validated arguments it names (by parameter name),
    for a condition on several arguments; it raises, or returns None.  The function keeps its name,
    docstring and signature; ``fn.rules`` lists what it checks.
    """
    def declare(fn: Callable) -> Callable:
        sig = inspect.signature(fn)
        params = list(sig.parameters)
        for name, rule in rules.items():
            if name not in params:
                raise TypeError(f"@arguments names {name!r}, which {fn.__qualname__} does not take")
            for other in rule.names():
                if other not in params or other in rules and list(rules).index(other) > list(rules).index(name):
                    raise TypeError(f"@arguments: {name!r}'s rule reads {other!r}, which must be an argument "
                                    f"of {fn.__qualname__} declared before it")
        wanted = [] if then is None else list(inspect.signature(then).parameters)
        if set(wanted) - set(params):
            raise TypeError(f"@arguments: then={then.__name__} takes {sorted(set(wanted) - set(params))}, "
                            f"which {fn.__qualname__} does not")

        kinds = {p.kind for p in sig.parameters.values()}
        by_name = kinds <= {inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY}
        positional = [n for n, p in sig.parameters.items() if p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD]
        defaults = {n: p.default for n, p in sig.parameters.items() if p.default is not inspect.Parameter.empty}
        names = frozenset(params)

        def bind(args: tuple, kwargs: dict) -> dict[str, Any]:
            """The arguments by name, defaults filled in: a dict built directly where every parameter can
            be passed by name (a few times faster than Signature.bind, which the ring's schedule notices),
            else, or on a call Python would refuse, Signature.bind and its TypeError."""
            if by_name and len(args) <= len(positional):
                known = dict(zip(positional, args))
                if not kwargs or kwargs.keys() <= names and not kwargs.keys() & known.keys():
                    known.update(kwargs)
                    if len(known) < len(names):
                        for n, d in defaults.items():
                            known.setdefault(n, d)
                    if len(known) == len(names):
                        return known
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            return dict(bound.arguments)

        @functools.wraps(fn)
        def door(*args: Any, **kwargs: Any) -> Any:
            known = bind(args, kwargs)
            for name, rule in rules.items():
                known[name] = rule(name, known[name], known)
            if then is not None:
                then(**{k: known[k] for k in wanted})
            if by_name:
                return fn(**known)
            bound = sig.bind_partial()
            bound.arguments.update(known)
            return fn(*bound.args, **bound.kwargs)

        door.rules = dict(rules)
        return door

    return declare
