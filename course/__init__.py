"""How GPUs accelerate backpropagation: the course's package.

The spine every lesson uses:

* devices: :func:`devices`, :func:`gpu_available`, :func:`get_xp`, :func:`to_device`,
  :func:`to_numpy`, :func:`synchronize`; the CPU itself in :mod:`course.cpu` (:func:`cpu_info`);
* timing: :func:`benchmark` -> :class:`Timing` (warm-up, repeats, median and spread,
  CUDA events on a GPU), with the BLAS threads of :mod:`course.threads`;
* results: :class:`ResultSet` (JSON with provenance), :func:`load_reference`;
* shared plots (:mod:`course.plots`) and widgets (:mod:`course.widgets`);
* the headless report: ``python -m course report``.

One folder per lesson, imported on first use: ``course.hardware`` (00), ``course.backprop`` (01),
``course.vectorize`` (02), ``course.throughput`` (03), ``course.scan`` (04), ``course.bppsa`` (05),
``course.parallel`` (06), ``course.recurrences`` (07), ``course.attention`` (08), and the kernel exercises
of lessons 02-04 and 08 in ``course.kernels``.  Each folder has the same shape: the algorithm a learner
reads first, then its timing, plots, widgets, exercise checks and report experiments.  ``course.check.<name>`` gathers
every lesson's exercise checks.
"""

from __future__ import annotations

import importlib

from .cpu import cpu_info
from .devices import (
    Device,
    array_device,
    devices,
    get_xp,
    gpu_available,
    gpu_info,
    gpu_unavailable_reason,
    normalize_device,
    require_gpu,
    synchronize,
    to_device,
    to_numpy,
)
from .errors import (
    BadInputError,
    CourseError,
    DeviceMemoryError,
    GPUUnavailableError,
    ResultsError,
    UnsupportedDtypeError,
)
from .limits import require_fits, validate_dtype
from .results import ResultSet, load_reference, provenance, save_reference
from .timing import Timing, benchmark

__version__ = "0.1.0"

_LAZY = ("hardware", "backprop", "vectorize", "throughput", "scan", "bppsa", "parallel", "recurrences",
         "attention", "kernels", "check", "plots", "widgets", "report")

__all__ = [
    "Device", "devices", "cpu_info", "gpu_info", "gpu_available", "gpu_unavailable_reason",
    "require_gpu", "normalize_device", "get_xp", "array_device", "to_device", "to_numpy",
    "synchronize", "validate_dtype", "require_fits",
    "Timing", "benchmark",
    "ResultSet", "provenance", "load_reference", "save_reference",
    "CourseError", "BadInputError", "GPUUnavailableError", "DeviceMemoryError",
    "UnsupportedDtypeError", "ResultsError",
    *_LAZY,
]


def __getattr__(name: str):
    """Import a lesson module on first use: ``course.scan``, ``course.bppsa``, ..."""
    if not name.startswith("_"):
        try:
            return importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module 'course' has no attribute {name!r}")
