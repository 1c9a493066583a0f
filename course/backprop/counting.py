"""Lesson 01's counts: what one training step asks of a device, and its floating-point work.

The counting array namespace itself is the spine's (:mod:`course.counting`): :class:`CountingNumpy`
counts each array operation (a kernel launch on a GPU), each allocation, each library call and each
read back of a step run on it, and holds a capture to the rules CUDA graphs follow.  This module adds
:func:`mlp_flops`, the arithmetic of one forward and backward pass, to set beside those counts.

>>> ns = CountingNumpy()
>>> a = ns.ones(3, dtype="float32")
>>> a += 1
>>> float(a.sum())
6.0
>>> ns.counter.launches, ns.counter.reads
(2, 1)
"""

from __future__ import annotations

from ..counting import CallCounter, CountingArray, CountingNumpy
from ..errors import whole_number

__all__ = ["CallCounter", "CountingArray", "CountingNumpy", "mlp_flops"]


def mlp_flops(sizes: list[int], batch: int) -> float:
    """Floating-point operations of one forward + backward of an MLP of ``sizes`` on ``batch`` examples.

    A multiply-add counts 2.  Per Linear layer (n_in -> n_out): forward
    2·batch·n_in·n_out + batch·n_out (bias); backward 2·batch·n_in·n_out for dW,
    the same for dx (skipped for the first layer), batch·n_out for db.  One per
    element for each activation forward and backward; 5 per logit for the loss.
    """
    b = whole_number("batch", batch, hint="the examples in one step")
    total = 0.0
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        mm = 2.0 * b * n_in * n_out
        total += mm + b * n_out + mm + b * n_out + (mm if i > 0 else 0.0)
        if i < len(sizes) - 2:
            total += 2.0 * b * n_out
    return total + 5.0 * b * sizes[-1]
