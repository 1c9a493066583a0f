"""Lesson 09: the matrix product, from one thread per output to the tensor cores, against BLAS and cuBLAS.

Backpropagation's time is matrix products: three per layer and step (the forward product, the input's
gradient, the weights' gradient).  Every rung of this lesson computes the same ``C = A @ B``; what changes
is the order of its multiply-adds, and so how many bytes each one pulls from memory and how many loads
each one issues.  The modules, in reading order:

* :mod:`~course.gemm.cpu`: the ladder on the learner's own cores (numba): three loops, the loop order
  that reads memory contiguously, cache blocks, a register-blocked micro-kernel, every core; and the bytes
  each rung moves per FMA, counted from its loops;
* :mod:`~course.gemm.ladder`: the ladder on a GPU in CUDA C (CuPy ``RawModule``): one thread per output,
  coalesced, shared-memory tiles, 1-D and 2-D register blocking, float4 loads, warp tiles with
  ``cp.async``, then the tensor cores (``mma.sync`` in TF32 and bfloat16); :mod:`~course.gemm.cuda_sources`
  holds each rung's kernel, :mod:`~course.gemm.cublas` the library peer at the same precision;
* :mod:`~course.gemm.counts`: why each GPU rung is faster, counted from its tiles: loads and FMAs per
  thread, arithmetic intensity, the limiter;
* :mod:`~course.gemm.emulate` (with :mod:`~course.gemm.machine`): every kernel's indexing run thread by
  thread in NumPy, so an index, a race or a bank conflict shows before any GPU sees the kernel;
* :mod:`~course.gemm.simt`: the first rungs as numba.cuda kernels, counted on the CUDA simulator;
* :mod:`~course.gemm.fragments`: which lane of a warp holds which element of a tensor-core fragment
  (the PTX ISA's tables), and a warp's ``mma.sync`` emulated from its lanes' registers;
* :mod:`~course.gemm.timing`, :mod:`~course.gemm.plots`, :mod:`~course.gemm.widgets`: the measurements
  (every rung against BLAS or cuBLAS in the same run, and against the measured FMA peak), figures and apps;
* :mod:`~course.gemm.checks`: the exercises' checks (``course.check.<name>``), and
  :mod:`~course.gemm.experiments` (``python -m course report``).

>>> import numpy as np
>>> from course import gemm
>>> a, b = np.ones((5, 3), np.float32), np.ones((3, 4), np.float32)
>>> bool(np.array_equal(gemm.cpu_matmul(a, b, "reordered"), a @ b))
True
>>> gemm.fragment_layout("m16n8k8.tf32", "a")[5].tolist()     # lane 5's four elements of A: (row, col)
[[1, 1], [9, 1], [1, 5], [9, 5]]
"""

from __future__ import annotations

from .counts import DATA_SHEET, counts_table, limiter, rung_counts
from .cpu import CPU_RUNGS, cpu_matmul, cpu_traffic
from .cublas import cublas_matmul
from .emulate import emulate_launch, emulate_matmul, emulated_kernels
from .fragments import (
    MMA_SHAPES,
    fragment_layout,
    fragment_owners,
    from_lane_registers,
    lane_registers,
    mma_by_lanes,
    round_to_tf32,
)
from .ladder import (
    GPU_RUNG_SPECS,
    GPU_RUNGS,
    PRECISIONS,
    gpu_matmul,
    kernel_source,
    padded_sizes,
    product_at_precision,
    ptxas_table,
    to_bfloat16_bits,
)
from .simt import SIMT_RUNGS, simt_rung_counts, simt_trace

__all__ = ["CPU_RUNGS", "cpu_matmul", "cpu_traffic", "GPU_RUNGS", "GPU_RUNG_SPECS", "PRECISIONS", "gpu_matmul",
           "kernel_source", "padded_sizes", "product_at_precision", "ptxas_table", "to_bfloat16_bits", "cublas_matmul",
           "DATA_SHEET", "counts_table", "limiter", "rung_counts", "emulate_launch", "emulate_matmul",
           "emulated_kernels", "SIMT_RUNGS", "simt_rung_counts", "simt_trace", "MMA_SHAPES", "fragment_layout",
           "fragment_owners", "from_lane_registers", "lane_registers", "mma_by_lanes", "round_to_tf32"]
