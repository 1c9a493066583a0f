"""Lesson 02's exercises: the loops a learner vectorizes, and the course's vectorized answers.

The checks in :mod:`course.check` compare a learner's function with these answers
and time it against these loops.

>>> import numpy as np
>>> x = np.array([-2.0, 3.0])
>>> leaky_relu(x, 0.5).tolist() == leaky_relu_loop(x, 0.5).tolist()
True
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..arguments import Real, arguments
from ..devices import xp_of
from ..errors import BadInputError

__all__ = ["leaky_relu", "leaky_relu_loop", "softmax_rows", "softmax_rows_loop"]


@arguments(slope=Real(hint="the slope below zero, e.g. 0.01"))
def leaky_relu_loop(x: np.ndarray, slope: float = 0.01) -> np.ndarray:
    """Leaky ReLU, one element at a time: ``v if v > 0 else slope * v``.  Exercise 1 starts here."""
    x = _floats(np.asarray(x), "leaky_relu")
    out = np.empty_like(x)
    for i in range(x.size):
        v = x.flat[i]
        out.flat[i] = v if v > 0 else slope * v
    return out


@arguments(slope=Real(hint="the slope below zero, e.g. 0.01"))
def leaky_relu(x: Any, slope: float = 0.01) -> Any:
    """Leaky ReLU, vectorized for numpy or CuPy arrays."""
    xp = xp_of(x)
    x = _floats(xp.asarray(x), "leaky_relu")
    return xp.where(x > 0, x, x * x.dtype.type(slope))


def softmax_rows_loop(x: np.ndarray) -> np.ndarray:
    """Row-wise softmax with loops, subtracting each row's maximum first.  Exercise 2 starts here."""
    x = _validate_rows(np.asarray(x))
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        m = max(x[i, j] for j in range(x.shape[1]))
        total = 0.0
        for j in range(x.shape[1]):
            out[i, j] = math.exp(x[i, j] - m)
            total += out[i, j]
        for j in range(x.shape[1]):
            out[i, j] /= total
    return out


def softmax_rows(x: Any) -> Any:
    """Row-wise softmax, vectorized: subtract the row maximum (no overflow), exp, normalise."""
    x = _validate_rows(xp_of(x).asarray(x))
    xp = xp_of(x)
    e = xp.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)




def _validate_rows(x: Any) -> Any:
    """``x`` if it is a 2-D float array (one softmax per row); else a clear error."""
    if x.ndim != 2:
        raise BadInputError(f"softmax_rows takes a 2-D array (one softmax per row), got shape {x.shape}; "
                            "for a single vector use x.reshape(1, -1)")
    return _floats(x, "softmax_rows")


def _floats(x: Any, what: str) -> Any:
    """``x`` if its dtype is a float one; else a clear error (an integer result would be truncated)."""
    if x.dtype.kind != "f":
        raise BadInputError(f"{what} takes a float array, got dtype {x.dtype}; convert it first, "
                            "e.g. x.astype('float64')")
    return x
