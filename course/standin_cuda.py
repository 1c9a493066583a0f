"""The stand-in GPU's ``cupy.cuda``: streams, events, CUDA graphs, the device and the runtime calls, on the host.

:class:`StandinCuda` is what ``cupy.cuda`` is on the stand-in (:mod:`course.standin`): streams and events
behave as CuPy's do, on the host clock; ``stream.begin_capture()`` records launches into the counter's
:class:`~course.counting.CapturedGraph` instead of running them, refuses what a capture cannot hold, and
``end_capture()`` returns a :class:`StandinGraph` whose ``launch()`` replays them; the device and the
runtime answer the few questions the course asks (its name, its memory: the host's), as one Hopper-like GPU.

>>> from course.counting import CallCounter
>>> cuda = StandinCuda(CallCounter(), "a stand-in")
>>> cuda.runtime.getDeviceProperties(0)["name"]
b'a stand-in'
>>> cuda.get_current_stream() is cuda.null
True
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable
from typing import Any

from .counting import CallCounter, CapturedGraph, StreamCaptureError
from .errors import BadInputError

__all__ = ["StandinCuda", "StandinGraph"]


class _Stream:
    _ptrs = itertools.count(0x1000, 0x10)

    def __init__(self, cuda: StandinCuda, null: bool = False, non_blocking: bool = False, ptr: int | None = None):
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
        if not isinstance(graph, CapturedGraph):
            raise BadInputError(f"a StandinGraph replays a course.counting.CapturedGraph (what end_capture() "
                                f"makes), got {type(graph).__name__}")
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
    def __init__(self, cuda: StandinCuda, device: int = 0):
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

    def __init__(self, cuda: StandinCuda):
        self._cuda = cuda

    def getDeviceCount(self) -> int:  # noqa: N802 - CuPy's names
        return 1

    def getDeviceProperties(self, i: int) -> dict:  # noqa: N802
        return {"name": self._cuda.name.encode(), "major": 9, "minor": 0, "multiProcessorCount": 132,
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


class StandinCuda:
    """``cupy.cuda`` on the stand-in: streams, events, devices, graphs and the runtime calls.

    ``counter`` is the stand-in's :class:`~course.counting.CallCounter` (the one its arrays count into);
    ``name`` is what the device calls itself.
    """

    def __init__(self, counter: CallCounter, name: str):
        if not isinstance(counter, CallCounter) or not isinstance(name, str):
            raise BadInputError(f"StandinCuda takes the stand-in's CallCounter and the device's name, got "
                                f"{type(counter).__name__} and {type(name).__name__}")
        self.counter, self.name = counter, name
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
