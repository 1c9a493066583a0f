"""A stand-in GPU: NumPy posing as CuPy, so that every GPU code path runs on a CPU.

A GPU is lent to this course rarely and briefly, so code behind "if a GPU answers" must not meet its
first bug there.  With ``COURSE_STANDIN_GPU=1`` in the environment (and no ``COURSE_DISABLE_GPU``),
:func:`course.devices.cupy_module` returns :func:`standin_cupy`, an object with the part of CuPy's
interface the course uses, and the rest of the course believes a GPU answers: its name says what it
is (:data:`STANDIN_NAME`), and it is refused wherever a GPU *measurement* would be kept
(``--record-reference``, :func:`course.results.save_reference`).

What it does, and what it does not:

* arrays are :class:`StandinArray`, NumPy arrays that count each launch, allocation, library call and
  read back (:mod:`course.counting`); ``x.get()`` and ``cupy.asnumpy(x)`` are reads back;
* streams, events and CUDA graphs behave as CuPy's do, on the host clock (:mod:`course.standin_cuda`,
  its ``cupy.cuda``): ``stream.begin_capture()`` records launches instead of running them, refuses what a
  capture cannot hold (CuPy's cuBLAS calls, CUB-backed reductions, pool allocations, reads back,
  synchronisation), and ``end_capture()`` returns a graph whose ``launch()`` replays them;
* a ``RawModule``/``RawKernel`` runs the NumPy twin registered for each CUDA C kernel name
  (:func:`register_kernel`); CUDA C itself is compile-checked elsewhere (``tools/ptxas_report.py``);
* every timing is the host's: a stand-in number says nothing about any GPU.

>>> cp = StandinCupy()
>>> x = cp.arange(8, dtype="int32")
>>> int(x.sum().get())
28
>>> s = cp.cuda.Stream(non_blocking=True)
>>> with s:
...     s.begin_capture()
...     x *= 2
...     g = s.end_capture()
>>> int(x[1]), (g.launch(s), int(x[1]))[1]
(1, 2)
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from .counting import CallCounter, CountingArray, CountingNumpy
from .errors import validate_function, validate_text
from .standin_cuda import StandinCuda

__all__ = ["STANDIN_NAME", "StandinArray", "StandinCupy", "standin_active", "standin_cupy", "reset_standin",
           "register_kernel", "kernel_twin", "STANDIN_ENV"]

#: The environment variable that switches the stand-in GPU on.
STANDIN_ENV = "COURSE_STANDIN_GPU"
#: What the stand-in calls itself wherever a GPU's name is shown or stored.
STANDIN_NAME = "Stand-in GPU (NumPy on the CPU; not a GPU measurement)"

_TWINS: dict[str, Callable[[tuple, tuple, tuple], None]] = {}


def register_kernel(name: str, twin: Callable[[tuple, tuple, tuple], None]) -> None:
    """Let the stand-in run CUDA C kernel ``name``: ``twin(grid, block, args)`` does in NumPy what the
    kernel does (``args`` is the launch's argument tuple; arrays in it are :class:`StandinArray`,
    ``numpy.asarray(a)`` gives a plain view to write into)."""
    name, twin = validate_text(name, "name", empty=False), validate_function(twin, "twin")
    _TWINS[name] = twin


def kernel_twin(name: str) -> Callable[[tuple, tuple, tuple], None]:
    """The twin registered for ``name``, or a clear error naming what to register."""
    name = validate_text(name, "name", empty=False)
    try:
        return _TWINS[name]
    except KeyError:
        raise NotImplementedError(
            f"the stand-in GPU has no NumPy twin for the CUDA kernel {name!r}: register one with "
            "course.standin.register_kernel(name, twin) beside the kernel's source") from None


def standin_active() -> bool:
    """True when ``COURSE_STANDIN_GPU=1`` asks for the stand-in (and ``COURSE_DISABLE_GPU`` does not switch
    every GPU off)."""
    if os.environ.get("COURSE_DISABLE_GPU", "").strip() not in ("", "0"):
        return False
    return os.environ.get(STANDIN_ENV, "").strip() not in ("", "0")


class StandinArray(CountingArray):
    """A NumPy array posing as a CuPy array on the stand-in GPU."""

    __course_device__ = "gpu"

    def get(self, stream: Any = None, out: Any = None) -> np.ndarray:
        """A host copy (a read back)."""
        host = self._read("x.get()").copy()
        if out is not None:
            out[...] = host
            return out
        return host

    def set(self, arr: Any, stream: Any = None) -> None:
        """Copy a host array in (a host→device copy)."""
        plain, host = self.view(np.ndarray), np.asarray(arr)
        if self.counter is not None:
            self.counter.upload("x.set(host array)")
        plain[...] = host

    @property
    def data(self) -> Any:  # CuPy's MemoryPointer: the address, for alignment checks
        return _Pointer(int(self.__array_interface__["data"][0]))

    def __repr__(self) -> str:
        return "stand-in " + np.asarray(self).__repr__()


class _Pointer:
    def __init__(self, ptr: int):
        self.ptr = ptr


# ----------------------------------------------------------------------------- kernels

class _Kernel:
    """One CUDA C kernel on the stand-in: a launch runs its registered NumPy twin."""

    def __init__(self, counter: CallCounter, name: str):
        self._counter, self.name = counter, name
        self.num_regs, self.max_threads_per_block, self.shared_size_bytes = 0, 1024, 0
        self.attributes: dict = {}

    def __call__(self, grid: Any, block: Any, args: tuple, shared_mem: int = 0, **kwargs: Any) -> None:
        twin = kernel_twin(self.name)
        grid = grid if isinstance(grid, tuple) else (grid,)
        block = block if isinstance(block, tuple) else (block,)
        self._counter.launch(self.name, lambda: twin(grid, block, tuple(args)))


class _RawModule:
    def __init__(self, counter: CallCounter, code: str | None = None, **kwargs: Any):
        self._counter, self.code = counter, code

    def get_function(self, name: str) -> _Kernel:
        kernel_twin(name)                            # a missing twin is said at once, as a missing kernel would be
        return _Kernel(self._counter, name)

    def compile(self, *args: Any, **kwargs: Any) -> None:
        return None


class _MemoryPool:
    def used_bytes(self) -> int:
        return 0

    def total_bytes(self) -> int:
        return 0

    def free_bytes(self) -> int:
        return 0

    def n_free_blocks(self) -> int:
        return 0

    def free_all_blocks(self, stream: Any = None) -> None:
        return None

    def set_limit(self, size: int | None = None, fraction: float | None = None) -> None:
        return None

    def get_limit(self) -> int:
        return 0


# ----------------------------------------------------------------------------- the module

_CREATORS = ("empty", "zeros", "ones", "full", "arange", "eye", "identity", "linspace", "empty_like", "zeros_like",
             "ones_like", "full_like", "array", "frombuffer", "tri", "indices")


class StandinCupy(CountingNumpy):
    """The stand-in's ``cupy``: NumPy's functions on :class:`StandinArray`, and ``cupy.cuda``."""

    __version__ = "stand-in"
    __name__ = "course.standin.cupy"

    def __init__(self) -> None:
        super().__init__()
        self.counter.array_type = StandinArray
        self.cuda = StandinCuda(self.counter, STANDIN_NAME)
        self.ndarray = StandinArray
        self.random = _Random(self)
        self._pool = _MemoryPool()

    # arrays from the host, and back
    def asarray(self, a: Any, dtype: Any = None, order: Any = None) -> StandinArray:
        if isinstance(a, StandinArray):
            return a if dtype is None or np.dtype(dtype) == a.dtype else a.astype(dtype)
        if isinstance(a, np.ndarray) and not isinstance(a, CountingArray):
            self.counter.upload("cupy.asarray(a host array)")
        return self.own(np.array(a, dtype=dtype, order=order or "K"), "asarray")

    array = asarray

    def ascontiguousarray(self, a: Any, dtype: Any = None) -> StandinArray:
        a = self.asarray(a, dtype)
        return a if a.flags.c_contiguous else a.copy()

    def asnumpy(self, a: Any, stream: Any = None, out: Any = None) -> np.ndarray:
        return a.get(out=out) if isinstance(a, StandinArray) else np.asarray(a)

    def get_array_module(self, *args: Any) -> Any:
        return self if any(isinstance(a, StandinArray) for a in args) else np

    def get_default_memory_pool(self) -> _MemoryPool:
        return self._pool

    def get_default_pinned_memory_pool(self) -> _MemoryPool:
        return self._pool

    def RawModule(self, code: str | None = None, **kwargs: Any) -> _RawModule:  # noqa: N802 - CuPy's name
        return _RawModule(self.counter, code=code, **kwargs)

    def RawKernel(self, code: str, name: str, **kwargs: Any) -> _Kernel:  # noqa: N802
        return _RawModule(self.counter, code=code).get_function(name)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(np, name)
        if name in _CREATORS:
            def make(*args: Any, **kwargs: Any) -> StandinArray:
                return self.own(np.asarray(attr(*_host(args), **_host(kwargs))), name)
            return make
        return attr


def _host(v: Any) -> Any:
    if isinstance(v, CountingArray):
        return v.view(np.ndarray)
    if isinstance(v, (tuple, list)):
        return type(v)(_host(x) for x in v)
    if isinstance(v, dict):
        return {k: _host(x) for k, x in v.items()}
    return v


class _Random:
    """``cupy.random`` on the stand-in: NumPy's generators, their arrays on the stand-in."""

    def __init__(self, cp: StandinCupy):
        self._cp = cp

    def default_rng(self, seed: Any = None) -> Any:
        cp, rng = self._cp, np.random.default_rng(seed)

        class _Generator:
            def __getattr__(self, name: str) -> Any:
                fn = getattr(rng, name)

                def call(*args: Any, **kwargs: Any) -> Any:
                    cp.counter.library(f"random {name}", kind="cuRAND")
                    return cp.own(np.asarray(fn(*args, **kwargs)), f"random {name}")
                return call
        return _Generator()

    def __getattr__(self, name: str) -> Any:
        fn = getattr(np.random, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self._cp.counter.library(f"random {name}", kind="cuRAND")
            r = fn(*args, **kwargs)
            return self._cp.own(np.asarray(r), f"random {name}") if isinstance(r, np.ndarray) else r
        return call


_STANDIN: StandinCupy | None = None


def standin_cupy() -> StandinCupy:
    """The stand-in's one ``cupy`` object (made on first use)."""
    global _STANDIN
    if _STANDIN is None:
        _STANDIN = StandinCupy()
    return _STANDIN


def reset_standin() -> None:
    """Forget the stand-in's state (its streams, a capture in progress, its counts): the next use starts
    a fresh one.  For tests that switch it on and off."""
    global _STANDIN
    _STANDIN = None
