"""Input checks for :class:`course.backprop.MLP`: each bad input gets a message naming the value.

Kept apart from the model so that the algorithm reads top to bottom without them.

>>> import numpy as np
>>> check_batch(np.zeros((2, 3), np.float32), 3, "cpu", np.dtype("float32")).shape
(2, 3)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..devices import array_device
from ..errors import BadInputError, whole_number

__all__ = ["check_batch", "check_labels"]


def check_batch(x: Any, n_in: int, device: str, dtype: np.dtype) -> Any:
    """``x`` as a ``(batch, n_in)`` array of ``dtype`` on ``device`` (cast if needed), or a clear error."""
    n_in = whole_number("n_in", n_in, hint="the input width of the model")
    if array_device(x) != device:
        raise BadInputError(f"x is on the {array_device(x).upper()} but the model is on the "
                            f"{device.upper()}: move it first with course.to_device(x, {device!r})")
    if getattr(x, "ndim", None) != 2 or x.shape[1] != n_in:
        raise BadInputError(f"x must have shape (batch, {n_in}) for this model, "
                            f"got {getattr(x, 'shape', type(x).__name__)}")
    if x.shape[0] == 0:
        raise BadInputError("x is an empty batch (0 rows): give at least one example")
    return x if x.dtype == dtype else x.astype(dtype)


def check_labels(y: Any, batch: int, n_classes: int, device: str) -> Any:
    """``y`` as ``batch`` integer labels in ``0..n_classes-1`` on ``device``, or a clear error."""
    batch = whole_number("batch", batch, lo=0, hint="the rows of x")
    n_classes = whole_number("n_classes", n_classes, hint="the classes of the model")
    if array_device(y) != device:
        raise BadInputError(f"labels y are on the {array_device(y).upper()} but the model is on "
                            f"the {device.upper()}: use course.to_device(y, {device!r})")
    if getattr(y, "ndim", None) != 1 or y.shape[0] != batch:
        raise BadInputError(f"labels y must have shape ({batch},), one class per row of x; "
                            f"got {getattr(y, 'shape', type(y).__name__)}")
    if y.dtype.kind not in "iu":
        raise BadInputError(f"labels y must be integer class numbers, got dtype {y.dtype.name}")
    lo, hi = int(y.min()), int(y.max())
    if lo < 0 or hi >= n_classes:
        bad = lo if lo < 0 else hi
        raise BadInputError(f"label {bad} is out of range: this model has {n_classes} classes, "
                            f"so labels must lie in 0..{n_classes - 1}")
    return y
