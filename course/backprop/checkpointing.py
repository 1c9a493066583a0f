"""Gradient checkpointing: keep every k-th activation, recompute the rest in the backward pass.

Backpropagation needs, for every layer, the values its forward pass produced,
so plain backprop keeps all of them alive until the backward pass reaches that
layer: activation memory grows with depth.  Checkpointing keeps only the input
of every k-th block (a *checkpoint*), drops the rest, and when the backward
pass reaches a segment it runs that segment's forward again from its
checkpoint.  The last segment is kept from the forward pass (the backward pass
starts there at once), as ``torch.utils.checkpoint.checkpoint_sequential`` does.

With ``L`` blocks the peak is about ``L / k`` checkpoints plus one segment of
``k`` activations, smallest near ``k = sqrt(L)``; the price is up to one extra
forward pass.  :func:`checkpointed_backward` computes exactly the gradients of
plain backprop (a test checks it) and reports what it held and recomputed.

>>> import numpy as np
>>> from course.backprop import MLP
>>> from course.backprop.trace import random_batch
>>> m = MLP([16] + [32] * 8 + [4])
>>> x, y = random_batch(m, 8)
>>> full = checkpointed_backward(m, x, y, every=1)
>>> sqrt = checkpointed_backward(m, x, y, every=3)
>>> sqrt.peak_activation_bytes < full.peak_activation_bytes, sqrt.recomputed_blocks
(True, 4)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..arguments import Whole, arguments
from .layers import MLP, Linear, softmax_cross_entropy, softmax_cross_entropy_backward
from .memory import ActivationLedger
from .validate import validate_checkpointing

__all__ = ["CheckpointRun", "checkpointed_backward", "kept_pattern"]


@dataclass
class CheckpointRun:
    """What one checkpointed forward + backward held and recomputed."""

    every: int
    blocks: int
    loss: float
    peak_activation_bytes: int      # forward values alive at once, at the worst moment
    checkpoints: int                # block inputs kept through the forward pass
    recomputed_blocks: int          # block forwards run a second time
    step_flops: float               # matrix-product FLOPs of one plain forward + backward
    recompute_flops: float
    device_peak_bytes: int | None = None   # GPU: most CuPy pool bytes in use at any allocation of the step
    events: list = field(default_factory=list, repr=False)   # ("hold"/"drop", index, bytes)

    @property
    def extra_compute(self) -> float:
        """Recomputed FLOPs as a share of a plain step's (forward + backward) matrix products."""
        return self.recompute_flops / self.step_flops


def _blocks(model: MLP) -> list[tuple[Linear, Any]]:
    """Block b = (Linear b, its activation or None for the last)."""
    out, layers = [], model.layers
    for i in range(0, len(layers), 2):
        out.append((layers[i], layers[i + 1] if i + 1 < len(layers) else None))
    return out


#: The most blocks :func:`kept_pattern` lists (it labels a picture, one entry per block).
KEPT_PATTERN_MAX_BLOCKS = 100_000


@arguments(n_blocks=Whole(hi=KEPT_PATTERN_MAX_BLOCKS, hint="the blocks (layers) of a network"),
           every=Whole(hint="a checkpoint every k blocks, k >= 1"))
def kept_pattern(n_blocks: int, every: int) -> list[str]:
    """For each block input 0..n_blocks-1: "checkpoint", "last segment" or "recomputed".

    >>> kept_pattern(5, 2)
    ['checkpoint', 'recomputed', 'checkpoint', 'recomputed', 'checkpoint']
    """
    last = ((n_blocks - 1) // every) * every
    return ["checkpoint" if i % every == 0 else "last segment" if i >= last else "recomputed"
            for i in range(n_blocks)]


def checkpointed_backward(model: MLP, x: Any, y: Any, every: int) -> CheckpointRun:
    """Forward, loss and backward of ``model`` on ``(x, y)`` with a checkpoint every ``every`` blocks.

    Fills the model's gradients (equal to plain backprop's) and leaves the weights
    unchanged.  ``every=1`` keeps everything: plain backprop.
    """
    x, y, every = validate_checkpointing(model, x, y, every)
    with ActivationLedger(model.device, x, model.xp) as held:    # counts the bytes of what is held
        return _checkpointed(model, x, y, int(every), held)


def _checkpointed(model: MLP, x, y, k: int, held: ActivationLedger) -> CheckpointRun:
    blocks = _blocks(model)
    L = len(blocks)
    pattern = kept_pattern(L, k)
    hold, drop = held.hold, held.drop

    def block_forward(b: int, h):
        lin, act = blocks[b]
        z, _ = lin.forward(h)
        return z if act is None else act.forward(z)[0]

    flops = [2.0 * x.shape[0] * lin.n_in * lin.n_out for lin, _ in blocks]
    hold(0, x)
    for b in range(L):                           # forward: keep checkpoints and the last segment
        out = block_forward(b, held[b])
        hold(b + 1, out)
        if b > 0 and pattern[b] == "recomputed":
            drop(b)                              # block b's input is not kept
    loss, cache = softmax_cross_entropy(held[L], y)
    drop(L)                                      # the logits are not needed by the backward pass
    g = softmax_cross_entropy_backward(cache)
    recomputed, re_flops = 0, 0.0
    for start in reversed(range(0, L, k)):
        end = min(start + k, L)
        for b in range(start, end - 1):          # rebuild this segment's dropped inputs
            if b + 1 not in held:
                hold(b + 1, block_forward(b, held[b]))
                recomputed += 1
                re_flops += flops[b]
        for b in range(end - 1, start - 1, -1):  # then backprop through it
            lin, act = blocks[b]
            if act is not None:
                g = act.backward(g, (held[b + 1],))
                drop(b + 1)
            g = lin.backward(g, (held[b],), need_dx=b > 0)
    drop(0)
    return CheckpointRun(every=k, blocks=L, loss=float(loss), peak_activation_bytes=held.peak,
                         checkpoints=sum(p == "checkpoint" for p in pattern), recomputed_blocks=recomputed,
                         step_flops=3 * sum(flops) - flops[0], recompute_flops=re_flops, events=held.events,
                         device_peak_bytes=held.device_peak_bytes)
