"""Lesson 00: what this machine has, and a first live CPU-vs-GPU experiment.

* :mod:`~course.hardware.machine`: the CPU and each GPU side by side (cores and SIMD lanes against
  multiprocessors and FP32 lanes, memory, bandwidth), the copy bandwidth measured here, GPU
  data-sheet figures (labelled as such), and the first experiment: a matrix product against its
  size on every device;
* :mod:`~course.hardware.plots`: its figure, GFLOP/s against size on every device;
* :mod:`~course.hardware.widgets`: that experiment's live app;
* :mod:`~course.hardware.experiments`: the same sweep for ``python -m course report``.

The memory's speed measured on every core at once (STREAM) is in :mod:`course.memory_bandwidth`: lessons
02 and 03 compare with it too.
"""

from __future__ import annotations

from .machine import (
    DEFAULT_SIZES,
    VENDOR_BANDWIDTH_GBPS,
    VENDOR_GPUS,
    copy_bandwidth,
    hardware_html,
    hardware_summary,
    matmul_flops,
    matmul_sweep,
    time_matmul,
    vendor_bandwidth,
    vendor_gpus_html,
)
from .widgets import matmul_app

__all__ = [
    "VENDOR_BANDWIDTH_GBPS", "VENDOR_GPUS", "vendor_bandwidth", "vendor_gpus_html", "copy_bandwidth",
    "matmul_flops", "time_matmul", "matmul_sweep", "hardware_summary", "hardware_html", "matmul_app",
    "DEFAULT_SIZES",
]
