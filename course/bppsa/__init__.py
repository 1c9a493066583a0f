"""Lesson 05: back-propagation as a parallel scan (BPPSA).

Read in this order:

* :mod:`~course.bppsa.algorithm`: sequential back-propagation and the same gradients by the
  Blelloch scan, in place over the element buffer, with their work and memory;
* :mod:`~course.bppsa.fast`: the same gradients without copies, reduce-then-scan over chunks on
  contiguous buffers (the one to time on a GPU);
* :mod:`~course.bppsa.chunk_kernels`: on a GPU, each of its two chunk phases as one CUDA C kernel that
  keeps a chunk's product in shared memory for all its steps;
* :mod:`~course.bppsa.models`: two chains to back-propagate through, a tanh RNN and a deep MLP;
* :mod:`~course.bppsa.sparse`: sparse transposed Jacobians, and why the scan can afford them;
* :mod:`~course.bppsa.timing`: the two backward passes timed the way the paper does, and where the
  scan wins on a CPU;
* :mod:`~course.bppsa.plots`, :mod:`~course.bppsa.widgets`, :mod:`~course.bppsa.checks` and
  :mod:`~course.bppsa.experiments`.
"""

from __future__ import annotations

from .algorithm import (
    CHUNK_FRACTION,
    backprop_scan,
    backprop_scan_elements,
    backprop_sequential,
    bppsa_operator,
    gradients_from_scan,
    inplace_scan,
    scan_elements,
    scan_memory,
    validate_chain,
    work_counts,
)

__all__ = [
    "backprop_sequential", "backprop_scan", "backprop_scan_elements", "bppsa_operator", "scan_elements",
    "gradients_from_scan", "inplace_scan", "work_counts", "scan_memory", "validate_chain", "CHUNK_FRACTION",
]
