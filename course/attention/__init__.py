"""Lesson 08: attention as a scan -- online softmax, FlashAttention forward and backward, the bytes counted.

A softmax needs the maximum and the sum of a whole row before it can write one output, yet both can be
carried along as the row is read: a running state ``(max, sum)`` -- and ``(max, sum, output)`` for
attention -- with an associative combine.  So attention is a scan over the keys, lesson 04's idea, and
FlashAttention is that scan run tile by tile in on-chip memory, so that the ``n × n`` score matrix never
reaches DRAM; its backward pass recomputes the scores instead of storing them (lesson 01's trade of
memory for arithmetic).  The modules, in reading order:

* :mod:`~course.attention.softmax`: the state and its combine, the softmax three ways (naive, stable,
  online by blocks) and through lesson 04's Blelloch scan;
* :mod:`~course.attention.forward`: attention naive, online over key blocks, in FlashAttention's tiles
  (with the row log-sum-exp it saves), and by the scan;
* :mod:`~course.attention.backward`: the backward pass from stored probabilities, and recomputed from the
  saved log-sum-exp;
* :mod:`~course.attention.traffic`: the bytes each algorithm moves between DRAM and on-chip memory,
  counted by walking its loops, beside the closed forms and the paper's Θ(N d + N²) and Θ(N² d² / M);
  and the memory each one holds;
* :mod:`~course.attention.fused`: a fused forward kernel in CUDA C for a GPU (through CuPy), with the
  NumPy twin the stand-in GPU runs;
* :mod:`~course.attention.timing`, :mod:`~course.attention.plots`, :mod:`~course.attention.widgets`:
  measurements (time, peak memory), figures and apps;
* :mod:`~course.attention.checks`: the exercises' checks (``course.check.<name>``), and
  :mod:`~course.attention.experiments` (``python -m course report``).

>>> import numpy as np
>>> from course import attention as att
>>> q, k, v = np.random.default_rng(0).normal(size=(3, 8, 4))
>>> out, lse = att.flash_attention(q, k, v, block_q=4, block_k=4)
>>> np.allclose(out, att.naive_attention(q, k, v))
True
"""

from __future__ import annotations

from .backward import (
    SAVED_FOR_BACKWARD,
    attention_probabilities,
    flash_attention_backward,
    naive_attention_backward,
    validate_backward,
)
from .forward import (
    ATTENTION_METHODS,
    attention_by_scan,
    flash_attention,
    naive_attention,
    online_attention,
    tile_schedule,
    validate_attention,
)
from .softmax import (
    online_softmax,
    online_softmax_steps,
    sequential_states,
    softmax_by_scan,
    softmax_combine,
    softmax_identity,
    softmax_leaves,
    softmax_naive,
    softmax_stable,
)

__all__ = [
    "softmax_combine", "softmax_identity", "softmax_leaves", "softmax_naive", "softmax_stable", "online_softmax",
    "online_softmax_steps", "softmax_by_scan", "sequential_states",
    "validate_attention", "tile_schedule", "naive_attention", "online_attention", "flash_attention",
    "attention_by_scan", "ATTENTION_METHODS",
    "attention_probabilities", "naive_attention_backward", "flash_attention_backward", "validate_backward",
    "SAVED_FOR_BACKWARD",
]
