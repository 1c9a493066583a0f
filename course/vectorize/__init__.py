"""Lesson 02: SIMD vectorization, one elementwise operation at every rung of parallelism.

Read in this order:

* :mod:`~course.vectorize.rungs`: ReLU and friends as a Python loop, in explicit SIMD lanes, as
  one numpy call, on threads, on a GPU; the bytes each moves;
* :mod:`~course.vectorize.simd`: which SIMD code numpy really runs for each operation;
* :mod:`~course.vectorize.timing`: the ladder, every rung timed and checked against numpy, ReLU against
  the copy bandwidth, the matrix product's rungs and numpy's operand probe;
* :mod:`~course.vectorize.gpu`: the GPU rungs, one thread per element and a fused kernel;
* :mod:`~course.vectorize.matmul`: the matrix product at every rung, in GFLOP/s;
* :mod:`~course.vectorize.exercises`: the loops a learner vectorizes, with the course's answers;
* :mod:`~course.vectorize.plots`, :mod:`~course.vectorize.widgets`,
  :mod:`~course.vectorize.checks` and :mod:`~course.vectorize.experiments`.
"""

from __future__ import annotations

from .exercises import (
    leaky_relu,
    leaky_relu_loop,
    softmax_rows,
    softmax_rows_loop,
)
from .rungs import (
    CPU_RUNGS,
    FLOAT_DTYPES,
    GPU_RUNGS,
    OPS,
    RUNG_INFO,
    RUNGS,
    bytes_moved,
    compiled_relu,
    default_workers,
    effective_bandwidth,
    elementwise,
    lane_steps,
    lane_trace,
    lanes_elementwise,
    loop_elementwise,
    numpy_elementwise,
    random_input,
    simd_summary,
    threaded_elementwise,
    tolerance,
)
from .timing import (
    ladder,
    relu_bandwidth,
)

__all__ = [
    "OPS", "RUNGS", "CPU_RUNGS", "GPU_RUNGS", "FLOAT_DTYPES", "RUNG_INFO", "elementwise", "loop_elementwise",
    "lanes_elementwise", "lane_trace", "numpy_elementwise", "threaded_elementwise", "lane_steps",
    "bytes_moved", "effective_bandwidth", "tolerance", "simd_summary", "compiled_relu", "random_input",
    "default_workers",
    "leaky_relu", "leaky_relu_loop", "softmax_rows", "softmax_rows_loop",
    "ladder", "relu_bandwidth",
]
