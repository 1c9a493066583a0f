"""Kernel exercises: write small ``numba.cuda`` kernels, run them on the CUDA simulator inside the
notebook (no environment variable, no restart) or on a GPU, see what each thread read and wrote,
and have them checked; count what a GPU would pay for them (:mod:`~course.kernels.counts`: sectors, bank
conflicts, divergent warps, barriers) and make three slow kernels fast against those counts
(:mod:`~course.kernels.tuning`); :mod:`~course.kernels.warps` holds the counted warp-level demonstrations.

>>> from course import kernels
>>> sorted(kernels.EXERCISES)[:3]
['blelloch', 'block_sum', 'guard']
"""

from __future__ import annotations

from .counts import Counts, count, counts_table, hardware_counts
from .exercises import EXERCISES, TILE, TPB, Exercise, exercise
from .grading import Grade, grade
from .pictures import draw_trace, show
from .simulator import KernelFailed, gpu_kernels_available, python_function, run_on_gpu, simulate
from .trace import Access, KernelIndexError, Trace, TracedArray

__all__ = ["EXERCISES", "TILE", "TPB", "Exercise", "exercise", "Grade", "grade", "draw_trace", "show",
           "KernelFailed", "gpu_kernels_available", "python_function", "run_on_gpu", "simulate",
           "Access", "KernelIndexError", "Trace", "TracedArray", "Counts", "count", "counts_table", "hardware_counts"]
