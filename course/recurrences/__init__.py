"""Lesson 07: the scan inside today's sequence models.

Linear recurrences ``h_t = a_t ⊙ h_{t-1} + b_t`` with a *diagonal* transition are what linear
RNNs, diagonal state spaces (S5) and Mamba's selective scan run.  Composing two of their steps
costs O(n) instead of lesson 05's n×n matrix product, so the parallel scan's extra work drops
from between (n+1)× and 2n× to a small constant.  The modules, in reading order:

* :mod:`~course.recurrences.linear`: the recurrence four ways (loop, Blelloch scan with the
  affine operator, closed form, closed form in log space) and its backward pass, a reverse scan;
* :mod:`~course.recurrences.work`: work and span, dense against diagonal;
* :mod:`~course.recurrences.selective`: a small selective state-space layer, forward and
  backward by scan, checked against finite differences and PyTorch;
* :mod:`~course.recurrences.task`: the adding problem, and training the layer on it;
* :mod:`~course.recurrences.kernels`: a numba.cuda kernel for the diagonal scan, in chunks;
* :mod:`~course.recurrences.timing`, :mod:`~course.recurrences.plots`,
  :mod:`~course.recurrences.widgets`: measurements, figures and apps;
* :mod:`~course.recurrences.checks`: the exercises' checks (``course.check.<name>``), and
  :mod:`~course.recurrences.experiments` (``python -m course report``).

>>> import numpy as np
>>> from course import recurrences as rec
>>> a, b = np.full(4, 0.5), np.ones(4)
>>> np.allclose(rec.recurrence_scan(a, b), rec.recurrence_loop(a, b))
True
"""

from __future__ import annotations

from .linear import (
    METHODS,
    recurrence_backward,
    recurrence_closed_form,
    recurrence_log_space,
    recurrence_loop,
    recurrence_scan,
    reverse_recurrence,
    solve_recurrence,
    validate_recurrence,
)
from .selective import backward, forward, gradient_check, init_params, loss_and_grads, torch_gradients
from .task import BASELINE_MSE, TrainingRun, adding_problem, train_adding
from .work import KINDS, combine_flops, work_counts, work_table

__all__ = [
    "METHODS", "validate_recurrence", "recurrence_loop", "recurrence_scan", "recurrence_closed_form",
    "recurrence_log_space", "reverse_recurrence", "recurrence_backward", "solve_recurrence",
    "KINDS", "combine_flops", "work_counts", "work_table",
    "init_params", "forward", "backward", "loss_and_grads", "gradient_check", "torch_gradients",
    "adding_problem", "train_adding", "TrainingRun", "BASELINE_MSE",
]
