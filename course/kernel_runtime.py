"""Where the course's ``numba.cuda`` kernels can run: on a GPU, on numba's CUDA simulator, or not here.

Lessons 02-04's kernel exercises (:mod:`course.kernels`), lesson 04's block scan and lesson 07's
diagonal scan all ask the same question, answered here once:

* :func:`simulator_enabled`: is numba's CUDA simulator on (``NUMBA_ENABLE_CUDASIM=1``, set before
  numba is imported; the tests run the kernels on it);
* :func:`numba_cuda`: ``numba.cuda``, imported on first use, with a clear error where numba is missing;
* :func:`kernels_unavailable_reason`: None when the kernels can run, why not otherwise;
* :func:`gpu_kernels_available`: a real GPU answers ``numba.cuda`` (the simulator does not count).

>>> kernels_unavailable_reason() is None or isinstance(kernels_unavailable_reason(), str)
True
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .errors import GPUUnavailableError
from .standin import standin_active

__all__ = ["simulator_enabled", "numba_cuda", "kernels_unavailable_reason", "gpu_kernels_available"]


def simulator_enabled() -> bool:
    """True when numba's CUDA simulator is switched on (``NUMBA_ENABLE_CUDASIM=1``)."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") == "1"


def numba_cuda() -> Any:
    """``numba.cuda`` (the simulator's, when it is on), imported on first use.

    A kernel module binds it to its own global ``cuda`` (``global cuda; cuda = numba_cuda()``) before
    it compiles or launches: the simulator swaps that global inside the kernels it runs.  On the
    stand-in GPU (:mod:`course.standin`) it is numba's CUDA simulator, whose ``as_cuda_array`` wraps
    the stand-in's arrays in place, so a kernel writes into them as it would into CuPy's.
    """
    if standin_active():
        return _standin_numba()
    try:
        from numba import cuda
    except ImportError as exc:  # pragma: no cover - numba is a dependency of the course
        raise GPUUnavailableError("numba is not installed: `pip install numba numba-cuda` to run "
                                  "the hand-written kernels.") from exc
    return cuda


def kernels_unavailable_reason() -> str | None:
    """None when the kernels can run (a GPU answers numba, or the simulator is on); why not otherwise.

    ``COURSE_DISABLE_GPU=1`` switches the kernels off as it switches off CuPy (the simulator,
    which runs on the CPU, stays allowed).
    """
    if simulator_enabled() or standin_active():
        return None
    if os.environ.get("COURSE_DISABLE_GPU", "").strip() not in ("", "0"):
        return "the GPU is switched off by COURSE_DISABLE_GPU"
    try:
        if numba_cuda().is_available():
            return None
    except Exception as exc:  # a broken driver must not break the lesson
        return f"numba.cuda could not start: {exc}"
    return ("no CUDA GPU answers numba here. Run on a GPU machine (Colab: Runtime > Change "
            "runtime type > GPU) to run and check these kernels. The course's tests run them on numba's "
            "CUDA simulator, which is switched on only as Python starts (NUMBA_ENABLE_CUDASIM=1), never "
            "from a running notebook: nothing to set or restart here.")


def gpu_kernels_available() -> bool:
    """True when a CUDA GPU answers ``numba.cuda`` here (and ``COURSE_DISABLE_GPU`` is not set); never on
    the simulator or the stand-in GPU."""
    return not simulator_enabled() and not standin_active() and kernels_unavailable_reason() is None


class _StandinNumba:
    """numba's CUDA simulator for the stand-in GPU's arrays: ``as_cuda_array`` wraps one without a copy.

    Inside a simulated kernel, names resolve to the simulator's per-launch module (``cuda.threadIdx``,
    ``cuda.shared``, ...), as the simulator does for a global that is ``numba.cuda`` itself.
    """

    def __init__(self, sim: Any) -> None:
        self._sim = sim

    def __getattr__(self, name: str) -> Any:
        from numba.cuda.simulator.kernel import _get_kernel_context

        inside = _get_kernel_context()
        return getattr(inside if inside is not None else self._sim, name)

    def as_cuda_array(self, obj: Any, sync: bool = True) -> Any:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        return FakeCUDAArray(np.asarray(obj))


def _standin_numba() -> Any:
    from numba.cuda import simulator

    return _StandinNumba(simulator)
