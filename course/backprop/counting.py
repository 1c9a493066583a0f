"""Lesson 01's counts: what one training step asks of a device, and its floating-point work.

The counting array namespace itself is the spine's (:mod:`course.counting`): :class:`CountingNumpy`
counts each array operation (a kernel launch on a GPU), each allocation, each library call and each
read back of a step run on it, and holds a capture to the rules CUDA graphs follow.  This module adds
:func:`mlp_flops`, the arithmetic of one forward and backward pass, to set beside those counts.

>>> mlp_flops([784, 512, 512, 10], batch=256) / 1e9       # GFLOP in one training step
0.822625792
"""

from __future__ import annotations

from ..arguments import Whole, Wholes, arguments
from ..counting import CallCounter, CountingArray, CountingNumpy

__all__ = ["CallCounter", "CountingArray", "CountingNumpy", "mlp_flops"]


@arguments(sizes=Wholes(min_len=2, hint="the layer widths, input first, e.g. [784, 128, 10]"),
           batch=Whole(hint="the examples in one step"))
def mlp_flops(sizes: list[int], batch: int) -> float:
    """Floating-point operations of one forward + backward of an MLP of ``sizes`` on ``batch`` examples.

    A multiply-add counts 2.  Per Linear layer (n_in -> n_out): forward
    2·batch·n_in·n_out + batch·n_out (bias); backward 2·batch·n_in·n_out for dW,
    the same for dx (skipped for the first layer), batch·n_out for db.  One per
    element for each activation forward and backward; 5 per logit for the loss.
    """
    b = batch
    total = 0.0
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        mm = 2.0 * b * n_in * n_out
        total += mm + b * n_out + mm + b * n_out + (mm if i > 0 else 0.0)
        if i < len(sizes) - 2:
            total += 2.0 * b * n_out
    return total + 5.0 * b * sizes[-1]
