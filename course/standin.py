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
* streams, events and CUDA graphs behave as CuPy's do, on the host clock: ``stream.begin_capture()``
  records launches instead of running them, refuses what a capture cannot hold (CuPy's cuBLAS calls,
  CUB-backed reductions, pool allocations, reads back, synchronisation), and ``end_capture()``
  returns a graph whose ``launch()`` replays them;
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

import itertools
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .counting import CallCounter, CapturedGraph, CountingArray, CountingNumpy, StreamCaptureError

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
    _TWINS[name] = twin


def kernel_twin(name: str) -> Callable[[tuple, tuple, tuple], None]:
    """The twin registered for ``name``, or a clear error naming what to register."""
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


# ----------------------------------------------------------------------------- streams, events, graphs

class _Stream:
    _ptrs = itertools.count(0x1000, 0x10)

    def __init__(self, cuda: _Cuda, null: bool = False, non_blocking: bool = False, ptr: int | None = None):
        self._cuda = cuda
        self.ptr = 0 if null else (ptr if ptr is not None else next(self._ptrs))
        self.non_blocking = non_blocking
        self._capture: CapturedGraph | None = None

    def __enter__(self) -> _Stream:
        self._cuda.stack.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._cuda.stack.pop()

    def use(self) -> _Stream:
        self._cuda.stack[:] = [self]
        return self

    def synchronize(self) -> None:
        if self._capture is not None:
            reason = ("synchronising the capturing stream: CUDA refuses it (cudaErrorStreamCaptureUnsupported) "
                      "and the capture is invalidated. Synchronise before begin_capture or after end_capture.")
            self._capture.invalidated = reason
            raise StreamCaptureError(reason)
        self._cuda.counter.syncs += 1

    def is_capturing(self) -> bool:
        return self._capture is not None

    def begin_capture(self, mode: Any = None) -> None:
        if self.ptr in (0, 1):
            raise RuntimeError("cannot capture on the default (legacy) stream")
        counter = self._cuda.counter
        if counter.capture is not None:
            raise StreamCaptureError("another stream is already capturing on the stand-in GPU")
        self._capture = CapturedGraph(counter)
        counter.capture = self._capture

    def end_capture(self) -> StandinGraph:
        if self._capture is None:
            raise RuntimeError("end_capture without begin_capture on this stream")
        graph, self._capture = self._capture, None
        self._cuda.counter.capture = None
        graph.complete = True
        if graph.invalidated:
            raise StreamCaptureError(f"cudaErrorStreamCaptureInvalidated: {graph.invalidated}")
        return StandinGraph(graph)

    def record(self, event: Any = None) -> _Event:
        event = event if event is not None else _Event()
        event.record(self)
        return event

    def wait_event(self, event: Any) -> None:
        return None

    def launch_host_func(self, callback: Callable, arg: Any) -> None:
        callback(arg)


class StandinGraph:
    """A captured graph: ``launch`` replays what was recorded, as one launch."""

    def __init__(self, graph: CapturedGraph):
        self._graph = graph

    def launch(self, stream: Any = None) -> None:
        self._graph.launch(stream)

    def upload(self, stream: Any = None) -> None:
        return None

    def debug_dot_str(self, flags: int = 0) -> str:
        return self._graph.debug_dot_str(flags)

    @property
    def kernels(self) -> int:
        return self._graph.kernels

    def kernel_names(self) -> list[str]:
        return self._graph.kernel_names()


class _Event:
    def __init__(self, block: bool = False, disable_timing: bool = False, interprocess: bool = False):
        self.t: float | None = None

    def record(self, stream: Any = None) -> None:
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        return None

    @property
    def done(self) -> bool:
        return True


class _Device:
    def __init__(self, cuda: _Cuda, device: int = 0):
        self._cuda, self.id = cuda, int(device)

    def __enter__(self) -> _Device:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def use(self) -> None:
        return None

    def synchronize(self) -> None:
        self._cuda.counter.sync("synchronising the device")

    @property
    def mem_info(self) -> tuple[int, int]:
        return _host_memory()

    @property
    def compute_capability(self) -> str:
        return "90"


def _host_memory() -> tuple[int, int]:
    """(free, total) of the stand-in's "device memory": the host's available and physical memory."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        free = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = free = 8 * 2**30
    return int(free), int(total)


class _Runtime:
    """The few ``cupy.cuda.runtime`` calls the course makes."""

    def __init__(self, cuda: _Cuda):
        self._cuda = cuda

    def getDeviceCount(self) -> int:  # noqa: N802 - CuPy's names
        return 1

    def getDeviceProperties(self, i: int) -> dict:  # noqa: N802
        return {"name": STANDIN_NAME.encode(), "major": 9, "minor": 0, "multiProcessorCount": 132,
                "warpSize": 32, "clockRate": 1_980_000, "memoryClockRate": 2_619_000, "memoryBusWidth": 5120,
                "sharedMemPerBlock": 49152, "totalGlobalMem": _host_memory()[1], "l2CacheSize": 50 * 2**20}

    def deviceGetAttribute(self, attr: int, device: int) -> int:  # noqa: N802
        return {13: 1_980_000, 36: 2_619_000}.get(int(attr), 0)

    def driverGetVersion(self) -> int:  # noqa: N802
        return 0

    def runtimeGetVersion(self) -> int:  # noqa: N802
        return 0

    def memGetInfo(self) -> tuple[int, int]:  # noqa: N802
        return _host_memory()

    def streamIsCapturing(self, ptr: int) -> bool:  # noqa: N802
        return any(s.ptr == ptr and s.is_capturing() for s in self._cuda.streams())

    def deviceSynchronize(self) -> None:  # noqa: N802
        self._cuda.counter.sync("synchronising the device")


class _Namespace:
    def __init__(self, **attrs: Any):
        self.__dict__.update(attrs)


class _Cuda:
    """``cupy.cuda`` on the stand-in: streams, events, devices, graphs and the runtime calls."""

    def __init__(self, counter: CallCounter):
        self.counter = counter
        self.null = _Stream(self, null=True)
        self.stack: list[_Stream] = []
        self._made: list[_Stream] = []
        self.runtime = _Runtime(self)
        self.Event = _Event
        self.Graph = StandinGraph
        self.memory = _Namespace(OutOfMemoryError=type("OutOfMemoryError", (MemoryError,), {}))
        self.device = _Namespace(get_cublas_handle=lambda: 0, get_device_id=lambda: 0)
        self.cublas = _Namespace(getVersion=lambda handle=0: 0)
        self.cudnn = _Namespace(getVersion=lambda: 0)
        self.counter.captures_now = self.captures_now

        cuda = self

        class Stream(_Stream):
            null = self.null

            def __init__(self, null: bool = False, non_blocking: bool = False, priority: int = 0):
                super().__init__(cuda, null=null, non_blocking=non_blocking)
                cuda._made.append(self)

        class ExternalStream(_Stream):
            def __init__(self, ptr: int, device_id: int = -1):
                super().__init__(cuda, ptr=int(ptr))
                cuda._made.append(self)

        self.Stream, self.ExternalStream = Stream, ExternalStream

    def streams(self) -> list[_Stream]:
        return [self.null, *self._made]

    def captures_now(self) -> bool:
        cap = self.counter.capture
        return cap is not None and any(s._capture is cap for s in [self.get_current_stream()])

    def get_current_stream(self, device_id: int = -1) -> _Stream:
        return self.stack[-1] if self.stack else self.null

    def get_elapsed_time(self, start: _Event, end: _Event) -> float:
        if start.t is None or end.t is None:
            raise RuntimeError("an event was not recorded")
        return (end.t - start.t) * 1e3

    def Device(self, device: int = 0) -> _Device:  # noqa: N802 - CuPy's name
        return _Device(self, device)

    def get_device_id(self) -> int:
        return 0


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
        self.cuda = _Cuda(self.counter)
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
