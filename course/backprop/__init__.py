"""Lesson 01: backpropagation, step by step, for any array namespace.

Read in this order:

* :mod:`~course.backprop.layers`: each layer's ``forward`` and ``backward`` side by side, the
  losses, and :class:`MLP` (its step written for speed is :class:`~course.backprop.bench.PreallocatedMLP`);
* :mod:`~course.backprop.gradcheck`: the oracle, centred finite differences;
* :mod:`~course.backprop.validate`: the validators that give each bad input a clear message;
* :mod:`~course.backprop.data` and :mod:`~course.backprop.train`: real data and a training loop;
* :mod:`~course.backprop.trace`: one training step, layer by layer: shapes, operations, FLOPs; timed by
  :mod:`~course.backprop.timing`, which also times whole steps against the width and the fast step's ladder,
  and read by :mod:`~course.backprop.readers` (a trace or a ladder, live or recorded, as tables and sentences);
* :mod:`~course.backprop.checkpointing`: memory traded for recomputation, its bytes counted by
  :mod:`~course.backprop.memory`;
* :mod:`~course.backprop.optimizers` (SGD, momentum, Adam, and the state each keeps),
  :mod:`~course.backprop.mixed` (mixed-precision training: float16 and bfloat16 compute, float32 master
  weights, loss scaling) and :mod:`~course.backprop.footprint` (the bytes a parameter costs in training);
* :mod:`~course.backprop.bench`: the course's training step, buffers reused, against PyTorch's;
* :mod:`~course.backprop.fast_step`: the same step as a ladder of rungs that remove host costs (no read back,
  fused kernels from :mod:`~course.backprop.step_kernels` and, in bfloat16 and float16,
  :mod:`~course.backprop.mixed_kernels`, a CUDA graph), their launches counted by
  :mod:`~course.backprop.counting`; how much of the GPU a step uses in :mod:`~course.backprop.mfu`, and
  PyTorch's best step at each precision in :mod:`~course.backprop.precision_peers`;
* :mod:`~course.backprop.plots` (the figures of training), :mod:`~course.backprop.ladder_plots` (what makes
  the step fast: the ablation, the ladder, the rungs' timelines), :mod:`~course.backprop.widgets`,
  :mod:`~course.backprop.checks` (the exercises) and
  :mod:`~course.backprop.experiments` (``python -m course report``).
"""

from __future__ import annotations

from .gradcheck import (
    gradient_check,
    gradient_errors,
    layer_gradient_check,
    loss_gradient_check,
    rel_error,
)
from .layers import (
    ACTIVATIONS,
    MLP,
    Linear,
    ReLU,
    Sigmoid,
    Tanh,
    mse,
    mse_backward,
    softmax_cross_entropy,
    softmax_cross_entropy_backward,
    xp_of,
)

__all__ = [
    "Linear", "ReLU", "Sigmoid", "Tanh", "ACTIVATIONS", "softmax_cross_entropy",
    "softmax_cross_entropy_backward", "mse", "mse_backward", "MLP", "xp_of",
    "rel_error", "gradient_check", "gradient_errors", "layer_gradient_check", "loss_gradient_check",
]
