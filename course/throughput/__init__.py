"""Lesson 03: latency vs throughput, measured on this machine.

A GPU trades latency for throughput: each call costs microseconds before any
work starts, but once started it does a great deal of work at once.  This lesson
measures both sides and where they meet.

1. **Latency** (:mod:`course.throughput.latency`): the smallest operation's cost as
   a distribution — numpy's call overhead on the CPU; kernel launch, synchronize and
   tiny copies on the GPU (:func:`smallest_op_latency`); the invisible queue of
   asynchronous launches (:func:`async_chain`); host↔device copies, pageable vs
   pinned (:func:`transfer_bandwidth`); memory latency by pointer chasing, and Little's law for
   the bytes that must be in flight (:mod:`course.throughput.memory`).
2. **Throughput against size** (:mod:`course.throughput.ops`): elementwise ops,
   reductions and matrix products swept over sizes (:func:`throughput_sweep`), and
   the **crossover** size from which the GPU wins (:func:`find_crossover`).
3. **Batching** (:mod:`course.throughput.batch`): an MLP training step across batch
   sizes, samples/s vs latency, tied by Little's law (:func:`batch_sweep`); **mixed
   precision**: matrix products in float32, float16, bfloat16 (:func:`precision_sweep`).
4. **Fusion** (:mod:`course.throughput.fusion`): a chain of elementwise steps run
   unfused and fused, counting kernels and bytes (:func:`fusion_compare`).
5. **The roofline** (:mod:`course.throughput.roofline`): measured peaks and the course's own
   operations placed on it (:func:`measure_roofline`, :func:`roofline_point`).

What a widget setting will cost before it runs is in :mod:`course.throughput.costs`, figures in
:mod:`course.throughput.plots`, widgets in :mod:`course.throughput.widgets`, the exercises' checks in
:mod:`course.throughput.checks` and the report's experiments in :mod:`course.throughput.experiments`.

>>> from course import throughput
>>> throughput.classify(0.1, peak_flops=1e11, peak_bandwidth=1e10)
'memory-bound'
"""

from __future__ import annotations

from .batch import (
    DEFAULT_MLP_SIZES,
    batch_for_fraction,
    batch_reading,
    batch_sweep,
    littles_law,
    precision_sweep,
    torch_available,
)
from .fusion import (
    FUSION_STEPS,
    blocked,
    fused,
    fused_kernel_source,
    fusion_chain,
    fusion_compare,
    fusion_counts,
    unfused,
)
from .latency import async_chain, latency_summary, smallest_op_latency, transfer_bandwidth
from .memory import bytes_in_flight, in_flight_text, memory_latency, memory_latency_sweep, random_cycle
from .ops import (
    OPS,
    Crossover,
    Op,
    crossover,
    crossover_size,
    default_sizes,
    find_crossover,
    get_op,
    op_names,
    throughput_sweep,
    time_op,
)
from .roofline import (
    POINT_NAMES,
    attainable,
    cached_peaks,
    classify,
    compare_predictions,
    measure_peaks,
    measure_roofline,
    peaks_of,
    ridge_point,
    roof_shares,
    roofline_point,
)

__all__ = [
    "smallest_op_latency", "latency_summary", "async_chain", "transfer_bandwidth",
    "random_cycle", "memory_latency", "memory_latency_sweep", "bytes_in_flight", "in_flight_text",
    "Op", "OPS", "op_names", "get_op", "default_sizes", "time_op", "throughput_sweep",
    "Crossover", "crossover_size", "crossover", "find_crossover",
    "DEFAULT_MLP_SIZES", "batch_sweep", "littles_law", "batch_for_fraction", "batch_reading", "precision_sweep",
    "torch_available",
    "FUSION_STEPS", "fusion_chain", "unfused", "fused", "blocked", "fusion_counts", "fusion_compare",
    "fused_kernel_source",
    "POINT_NAMES", "compare_predictions", "attainable", "ridge_point", "classify", "measure_peaks",
    "cached_peaks", "peaks_of", "roofline_point", "measure_roofline", "roof_shares",
]
