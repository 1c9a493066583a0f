"""Run a learner's ``numba.cuda`` kernel on the CUDA simulator, inside a running notebook, or on a GPU.

numba's CUDA simulator runs one Python thread per CUDA thread and replaces the ``cuda`` module a
kernel sees with a fake one whose ``threadIdx``, ``syncthreads()`` and ``shared.array`` act for the
current simulated thread.  numba normally switches it on for the whole process with
``NUMBA_ENABLE_CUDASIM=1`` set before numba is imported, which in a notebook means a restart.

How this module avoids that (the choice, and why): the simulator's pieces live in their own
module, ``numba.cuda.simulator``, which can be imported next to the real ``numba.cuda`` (the
variable only decides which of the two ``numba.cuda`` *is*).  :func:`simulate` builds the launch
from them: a ``FakeCUDAModule`` for the grid, ``swapped_cuda_module`` to put it in place of the
kernel's ``cuda`` global while it runs, and one ``BlockManager`` per block, exactly as the
simulator's own ``FakeCUDAKernel`` does.  Two things are added: the arrays are passed as
:class:`~course.kernels.trace.TracedArray` (so every access is recorded), and the fake module's
``syncthreads`` and ``shared.array`` are wrapped (so each access knows its barrier phase, and
shared memory is traced and fresh for every block).  The test suite checks this works in a process
where the real ``numba.cuda`` was imported first.  Had it not been possible, the fallback would be
a subprocess with ``NUMBA_ENABLE_CUDASIM=1``; it is not needed.

The same kernel runs on a GPU with ``numba.cuda.jit`` (:func:`run_on_gpu`): no tracing there, the
arrays are copied over and back.

>>> import numpy as np
>>> from numba import cuda
>>> def double(out, a):
...     i = cuda.grid(1)
...     out[i] = 2 * a[i]
>>> out, trace = simulate(double, 1, 4, out=np.zeros(4), a=np.arange(4.0))
>>> out["out"].tolist()
[0.0, 2.0, 4.0, 6.0]
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import BadInputError, GPUUnavailableError
from ..kernel_runtime import gpu_kernels_available
from ..limits import full_nbytes, require_fits
from .trace import KernelRunawayError, Trace, TracedArray

__all__ = ["simulate", "run_on_gpu", "gpu_kernels_available", "python_function", "KernelFailed"]

#: The most threads one simulated launch may have (each one is an operating-system thread).
MAX_SIMULATED_THREADS = 256
#: The most lines of the kernel (and of the helpers it calls) one simulated thread may run, and the most
#: seconds a launch may take: a kernel past either is stopped (the exercises need a few hundred lines per thread).
MAX_STEPS_PER_THREAD = 200_000
MAX_SECONDS = 20.0


class KernelFailed(RuntimeError):
    """The learner's kernel raised inside a simulated thread; ``trace`` holds what it did until then."""

    def __init__(self, message: str, cause: BaseException | None = None, trace: Trace | None = None):
        super().__init__(message)
        self.cause, self.trace = cause, trace


def python_function(kernel: Any) -> Callable:
    """The plain Python function behind ``kernel`` (a function, or a ``numba.cuda.jit`` dispatcher).

    >>> def k(out): pass
    >>> python_function(k) is k
    True
    """
    if not callable(getattr(kernel, "py_func", kernel)) or not hasattr(getattr(kernel, "py_func", kernel),
                                                                      "__globals__"):
        raise BadInputError(f"kernel must be a Python function (optionally under @cuda.jit), got "
                            f"{type(kernel).__name__}")
    return getattr(kernel, "py_func", kernel)


#: The same check under the name every validator has (``fn = validate_kernel(kernel)`` opens a function).
validate_kernel = python_function


def _dims(shape: Any, what: str) -> tuple[int, int, int]:
    t = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if not 1 <= len(t) <= 3 or not all(isinstance(v, (int, np.integer)) and v >= 1 for v in t):
        raise BadInputError(f"{what} must be a positive int or a tuple of 1-3 positive ints, got {shape!r}")
    return tuple(int(v) for v in t) + (1,) * (3 - len(t))


def _numpy_dtype(dtype: Any) -> np.dtype:
    try:
        return np.dtype(dtype)
    except TypeError:
        return np.dtype(str(dtype))     # numba's types (numba.float32) print as numpy's names


def _shared_name(frame: Any, k: int) -> str:
    """The variable a ``cuda.shared.array`` line assigns to (``cache = cuda.shared.array(...)``)."""
    import linecache
    import re
    m = re.match(r"\s*(\w+)\s*=", linecache.getline(frame.f_code.co_filename, frame.f_lineno))
    return m.group(1) if m else f"shared{k}"


class _TracingShared:
    """``cuda.shared``: one traced array per (block, source line), filled with a marker value
    (NaN, or -999999 for integers) so that a read of an element nobody wrote shows in the output."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.allocations: dict = {}
        self.names: dict = {}
        self.lock = threading.Lock()

    def array(self, shape: Any, dtype: Any, alignment: Any = None) -> TracedArray:
        caller = sys._getframe(1)
        key = (tuple(threading.current_thread().blockIdx), caller.f_code.co_filename, caller.f_lineno)
        with self.lock:
            if key not in self.allocations:
                name = self.names.setdefault(key[1:], _shared_name(caller, len(self.names)))
                dt = _numpy_dtype(dtype)
                fill = np.nan if dt.kind == "f" else -999_999
                self.allocations[key] = TracedArray(name, np.full(shape, fill, dtype=dt), "shared", self.trace)
            return self.allocations[key]


class _ThreadFailed(Exception):
    """What a simulated thread raises to the simulator (it rebuilds the exception from its message alone,
    which some exceptions cannot survive); the original is kept in ``_Budget.failures``."""


class _Budget:
    """Runs each simulated thread under a step budget and a deadline (a trace function on the lines of the
    kernel and of the helpers it calls, so ``while True: pass`` stops too; the lines of numba, numpy, the
    standard library and the course's tracing are not counted), and keeps any exception a thread raised."""

    def __init__(self, fn: Callable) -> None:
        import numba
        self.fn, self.file = fn, fn.__code__.co_filename
        self.skip = tuple(os.path.dirname(m.__file__) + os.sep for m in (numba, np, os, sys.modules[__package__]))
        self.skip += ("<string>", "<frozen")   # code made by exec (a dataclass's __init__), frozen modules
        # installed packages too: a garbage-collector callback of one (hypothesis has one) may run in a
        # simulated thread, and a stop raised there would be swallowed, and the thread's tracing with it
        self.skip += tuple({os.path.join(sysconfig.get_paths()[k], "") for k in ("purelib", "platlib")})
        self.deadline = time.monotonic() + MAX_SECONDS
        self.failures: list[BaseException] = []

    def _stop(self, why: str) -> None:
        raise KernelRunawayError(f"your kernel did not finish within {why}; look for a loop whose condition "
                                 "never changes")

    def run_thread(self, *args: Any) -> None:
        steps = 0

        def lines(frame: Any, event: str, arg: Any) -> Any:
            nonlocal steps
            if event == "line":
                steps += 1
                if steps > MAX_STEPS_PER_THREAD:
                    self._stop(f"{MAX_STEPS_PER_THREAD:,} steps (lines run by one thread)")
                if time.monotonic() > self.deadline or getattr(threading.current_thread(), "abort", False):
                    self._stop(f"{MAX_SECONDS:g} s")
            return lines

        def calls(frame: Any, event: str, arg: Any) -> Any:
            file = frame.f_code.co_filename
            return lines if file == self.file or not file.startswith(self.skip) else None

        sys.settrace(calls)
        try:
            self.fn(*args)
        except BaseException as exc:
            self.failures.append(exc)
            raise _ThreadFailed(f"{type(exc).__name__}: {exc}") from None
        finally:
            sys.settrace(None)


def _tracing_module(base: type, trace: Trace) -> type:
    """A subclass of the simulator's fake ``cuda`` module (``base``) whose shared arrays are traced and
    whose ``syncthreads`` counts each thread's barriers (its *phase*)."""

    class TracingModule(base):
        def __init__(self, *a: Any) -> None:
            super().__init__(*a)
            self._tracing_shared = _TracingShared(trace)

        @property
        def shared(self) -> _TracingShared:
            return self._tracing_shared

        def syncthreads(self) -> None:
            th = threading.current_thread()
            th.course_phase = getattr(th, "course_phase", 0) + 1
            trace.final_phase[(tuple(th.blockIdx), tuple(th.threadIdx))] = th.course_phase
            super().syncthreads()

    return TracingModule


def simulate(kernel: Any, blocks: Any, threads: Any, **arrays: Any) -> tuple[dict, Trace]:
    """Run ``kernel[blocks, threads](*arrays.values())`` on the CUDA simulator, recording every access.

    Parameters
    ----------
    kernel : function or numba.cuda dispatcher
        Its arguments, in order, are the keyword arguments given here; it uses the CUDA API through a
        global named ``cuda`` (``from numba import cuda``).
    blocks, threads : int or tuple of int
        The grid and the block shape.  At most :data:`MAX_SIMULATED_THREADS` threads in all.
    **arrays : numpy arrays or scalars
        Arrays are copied (the caller's are not changed) and traced under their keyword's name;
        scalars are passed as they are.

    Returns
    -------
    (dict, Trace)
        The arrays after the launch, by name, and the :class:`~course.kernels.trace.Trace`.

    Raises
    ------
    KernelFailed
        When a simulated thread raised (an out-of-bounds index, the stub's NotImplementedError, ...),
        or ran past :data:`MAX_STEPS_PER_THREAD` lines or the launch past :data:`MAX_SECONDS` (a
        :class:`~course.kernels.trace.KernelRunawayError`: "your kernel did not finish within ...");
        its ``trace`` holds the accesses made until then and ``cause`` the original exception.

    Examples
    --------
    >>> from numba import cuda
    >>> def first(out, a):
    ...     if cuda.threadIdx.x == 0:
    ...         out[0] = a[0]
    >>> res, tr = simulate(first, 1, 2, out=np.zeros(1), a=np.ones(1))
    >>> len(tr.accesses)
    2
    """
    fn = validate_kernel(kernel)
    grid, block = _dims(blocks, "blocks"), _dims(threads, "threads")
    total = int(np.prod(grid) * np.prod(block))
    if total > MAX_SIMULATED_THREADS:
        raise BadInputError(f"blocks x threads = {total} simulated threads; the simulator runs one Python "
                            f"thread each, so at most {MAX_SIMULATED_THREADS} are allowed")
    from numba.cuda.simulator.kernel import BlockManager
    from numba.cuda.simulator.kernelapi import FakeCUDAModule, swapped_cuda_module

    require_fits(full_nbytes(*arrays.values()), "cpu", what="the simulator's copies of the kernel's arrays")
    trace = Trace()
    trace.ndim = max(len(t) if isinstance(t, (tuple, list)) else 1 for t in (blocks, threads))
    data = {k: np.array(v, copy=True) if isinstance(v, np.ndarray) else v for k, v in arrays.items()}
    args = [TracedArray(k, v, "global", trace) if isinstance(v, np.ndarray) else v for k, v in data.items()]

    module = _tracing_module(FakeCUDAModule, trace)(grid, block, 0)
    budget = _Budget(fn)
    try:
        with swapped_cuda_module(fn, module):
            for grid_point in np.ndindex(*grid):
                for tp in np.ndindex(*block):
                    trace.final_phase.setdefault((tuple(grid_point), tuple(tp)), 0)
                BlockManager(budget.run_thread, grid, block, False).run(grid_point, *args)
                if budget.failures:
                    raise budget.failures[0]
    except Exception as exc:
        exc = budget.failures[0] if budget.failures else exc  # the thread's own exception, not its copy
        raise KernelFailed(f"{type(exc).__name__}: {exc}", exc, trace) from exc
    return data, trace


def run_on_gpu(kernel: Any, blocks: Any, threads: Any, **arrays: Any) -> dict:
    """Compile ``kernel`` with ``numba.cuda.jit`` and run it on the GPU; the arrays after it, by name.

    The same kernel :func:`simulate` runs, with nothing traced.  Raises GPUUnavailableError where no
    GPU answers.

    >>> gpu_kernels_available() or True
    True
    """
    fn = validate_kernel(kernel)
    grid, block = _dims(blocks, "blocks"), _dims(threads, "threads")
    if not gpu_kernels_available():
        raise GPUUnavailableError("no CUDA GPU answers numba here: the kernels run on the simulator instead")
    from numba import cuda

    from ..devices import quiet_numba_launches
    compiled = kernel if hasattr(kernel, "py_func") else cuda.jit(fn)
    dev = {k: cuda.to_device(np.ascontiguousarray(v)) if isinstance(v, np.ndarray) else v for k, v in arrays.items()}
    with quiet_numba_launches():
        compiled[grid, block](*dev.values())
    cuda.synchronize()
    return {k: v.copy_to_host() if hasattr(v, "copy_to_host") else v for k, v in dev.items()}
