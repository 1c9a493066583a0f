"""Lesson 04: the Blelloch scan, step by step, then on real cores and on a GPU.

Read in this order:

* :mod:`~course.scan.algorithms`: prefix sums three ways (sequential, Hillis-Steele, Blelloch),
  each level one vectorized call of ``op``, with a trace kept out of the algorithm;
* :mod:`~course.scan.ops`: the operators a scan combines with, their identities, and an
  associativity check;
* :mod:`~course.scan.blocked`: the blocked parallel scan a multi-core CPU runs (numba ``prange``);
* :mod:`~course.scan.kernels`: a block scan kernel in ``numba.cuda``, with its bank conflicts;
* :mod:`~course.scan.lookback`: the decoupled look-back protocol in plain Python, tiles in any
  interleaving, launch after launch on one device state;
* :mod:`~course.scan.singlepass`: the single-pass scan that runs it on a GPU (CUDA C through CuPy);
* :mod:`~course.scan.timing`: the scans against the library and the copy limit;
* :mod:`~course.scan.plots`, :mod:`~course.scan.widgets`, :mod:`~course.scan.checks` and
  :mod:`~course.scan.experiments`.
"""

from __future__ import annotations

from .algorithms import (
    OPERATORS,
    SCANS,
    Level,
    ScanTrace,
    add,
    affine,
    affine_apply,
    associative_on_samples,
    blelloch_levels,
    blelloch_scan,
    hillis_steele_scan,
    identity_for,
    interval,
    interval_leaves,
    matmul,
    maximum,
    operation_counts,
    require_associative,
    sequential_scan,
)

__all__ = [
    "add", "maximum", "matmul", "affine", "affine_apply", "interval", "interval_leaves", "identity_for",
    "OPERATORS", "sequential_scan", "hillis_steele_scan", "blelloch_scan", "SCANS", "ScanTrace", "Level",
    "blelloch_levels", "operation_counts", "associative_on_samples", "require_associative",
]
