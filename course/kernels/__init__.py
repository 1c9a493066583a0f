"""Kernel exercises (lessons 02-04, lesson 08's attention tile, lesson 09's register tile): write small
``numba.cuda`` kernels, run them on the CUDA simulator inside the notebook (no environment variable, no
restart) or on a GPU, see what each thread read and wrote, and have them checked.  Read in this order:

* :mod:`~course.kernels.exercises`: each exercise as data (inputs, launch shape, numpy oracle, budget),
  lesson 09's register-blocked product in :mod:`~course.kernels.gemm_exercises`;
* :mod:`~course.kernels.reference`: the course's own answer to each;
* :mod:`~course.kernels.simulator` runs a kernel on the CUDA simulator (or a GPU) and
  :mod:`~course.kernels.trace` records what every thread read and wrote;
* :mod:`~course.kernels.grading`: what is wrong with a learner's kernel, said precisely, and
  :mod:`~course.kernels.checks`: the exercises' checks (``course.check.<name>``);
* :mod:`~course.kernels.plots`: what every thread read and wrote, drawn per barrier phase;
* :mod:`~course.kernels.counts`: what a GPU would pay (sectors, bank conflicts, divergent warps, barriers);
* :mod:`~course.kernels.tuning` and :mod:`~course.kernels.tuned`: three slow kernels made fast against
  those counts; :mod:`~course.kernels.warps`: the counted warp-level demonstrations.

>>> from course import kernels
>>> sorted(kernels.EXERCISES)[:3]
['blelloch', 'block_sum', 'guard']
"""

from __future__ import annotations

from .counts import Counts, count, counts_table, hardware_counts
from .exercises import ATT_D, ATT_TILE, EXERCISES, TILE, TPB, Exercise, exercise
from .grading import Grade, grade
from .plots import draw_trace, show
from .simulator import KernelFailed, gpu_kernels_available, python_function, run_on_gpu, simulate
from .trace import Access, KernelIndexError, Trace, TracedArray

__all__ = ["EXERCISES", "TILE", "TPB", "ATT_TILE", "ATT_D", "Exercise", "exercise", "Grade", "grade", "draw_trace",
           "show",
           "KernelFailed", "gpu_kernels_available", "python_function", "run_on_gpu", "simulate",
           "Access", "KernelIndexError", "Trace", "TracedArray", "Counts", "count", "counts_table", "hardware_counts"]
