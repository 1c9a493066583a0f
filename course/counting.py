"""Count what code asks of a device, on a CPU, and hold it to CUDA's stream-capture rules.

:class:`CountingNumpy` is an array namespace: the arrays it makes are :class:`CountingArray`, a NumPy
array that reports to a :class:`CallCounter` each operation on it (a kernel launch on a GPU: a ufunc,
a NumPy function, ``a += b``, ``a.max()``, an assignment into it, a fancy-indexed read), each new
array (an allocation from the memory pool), each library call (a matrix product is cuBLAS's, a
reduction CUB's) and each conversion to a Python number or truth value (a read back: a
device→host copy and a wait).  Arrays made elsewhere (``numpy.arange`` inside a function, say) are
not seen, so a count is a lower bound of the kernels a GPU would launch.

**Capture.**  Inside ``with ns.capturing() as graph:`` the namespace behaves as CuPy does while a
stream is being captured into a CUDA graph: nothing runs, each launch is recorded into ``graph``
(``graph.launch()`` replays them, in order, as one launch), and what CuPy or CUDA refuse during a
capture is refused here, with the reason:

* a library call: CuPy's cuBLAS, cuRAND, cuSOLVER and cuSPARSE wrappers raise
  ``NotImplementedError`` when the stream is capturing, and its reductions and scans run through
  CUB, which takes temporary storage from the memory pool (``NotImplementedError`` here);
* an allocation from the memory pool: the block goes back to the pool when the array is freed,
  while every replay of the graph still writes into it (:class:`StreamCaptureError`);
* a read back (``float(x)``, ``x.get()``, ``if flag:``): CuPy refuses device→host copies on a
  capturing stream (``RuntimeError``);
* a synchronisation of the capturing stream: CUDA refuses it and invalidates the capture.

The matrix product the course *can* capture goes through its own cuBLAS handle
(:func:`course.capture.matmul_into`), which reaches this namespace as :meth:`CountingArray.__course_gemm__`.

``CountingNumpy(record=True)`` also keeps ``counter.events``: ``(name, start_s, end_s)`` of every
operation and read back, from :func:`time.perf_counter`, for a timeline of a CPU step.

>>> ns = CountingNumpy()
>>> a = ns.ones(3, dtype="float32")
>>> a += 1
>>> float(a.sum())
6.0
>>> ns.counter.launches, ns.counter.reads
(2, 1)
>>> with ns.capturing() as graph:
...     a *= 2                           # recorded, not run
>>> a.tolist()
[2.0, 2.0, 2.0]
>>> graph.launch(); a.tolist()
[4.0, 4.0, 4.0]
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .errors import BadInputError

__all__ = ["CallCounter", "CountingArray", "CountingNumpy", "CapturedGraph", "StreamCaptureError",
           "VIEW_FUNCTIONS", "REDUCTIONS", "LIBRARY_FUNCTIONS"]


class StreamCaptureError(RuntimeError):
    """Something that cannot be put into a CUDA graph was asked for while a stream was capturing."""


#: NumPy functions that make a view (no kernel, no allocation) when the result shares the input's memory.
VIEW_FUNCTIONS = frozenset({"reshape", "swapaxes", "transpose", "broadcast_to", "expand_dims", "squeeze",
                            "moveaxis", "ravel", "atleast_1d", "atleast_2d", "atleast_3d", "ascontiguousarray",
                            "shape", "ndim", "size", "result_type", "shares_memory", "may_share_memory"})
#: Reductions and scans: on a GPU, CuPy runs them through CUB when it can (temporary storage from the pool).
REDUCTIONS = frozenset({"sum", "prod", "max", "min", "amax", "amin", "mean", "std", "var", "any", "all",
                        "argmax", "argmin", "cumsum", "cumprod", "nansum", "nanmax", "nanmin", "count_nonzero",
                        "median", "percentile", "quantile", "average", "ptp"})
#: Functions that are library calls on a GPU (cuBLAS, cuSOLVER, sorting).
LIBRARY_FUNCTIONS = frozenset({"dot", "vdot", "tensordot", "einsum", "inner", "outer", "kron", "sort", "argsort",
                               "unique", "searchsorted", "partition", "argpartition", "convolve", "correlate"})
_NO_LAUNCH_ALLOCATORS = frozenset({"empty_like"})


class CallCounter:
    """Launches, reads back, allocations and library calls so far, the name of each launch, and the
    capture in progress (if any)."""

    def __init__(self, record: bool = False) -> None:
        if not isinstance(record, (bool, np.bool_)):
            raise BadInputError(f"record must be True (keep each launch's name and times) or False, got {record!r:.80}")
        self.launches, self.reads, self.allocations, self.library_calls, self.syncs = 0, 0, 0, 0, 0
        self.graph_kernels = 0
        self.names: Counter = Counter()
        self.events: list[tuple[str, float, float]] | None = [] if record else None
        self.capture: CapturedGraph | None = None
        self.array_type: type = CountingArray
        #: ``() -> bool``: whether the work issued now goes into :attr:`capture` (the stand-in GPU
        #: asks whether the current stream is the capturing one); None: all work does.
        self.captures_now: Callable[[], bool] | None = None

    # ------------------------------------------------------------------ the capture in progress
    def capturing(self) -> bool:
        """True when the work issued now would go into a CUDA graph rather than run."""
        return self.capture is not None and (self.captures_now is None or self.captures_now())

    def _refuse(self, exc: Exception, invalidate: bool = False) -> None:
        if invalidate and self.capture is not None:
            self.capture.invalidated = str(exc)
        raise exc

    # ------------------------------------------------------------------ what code asks for
    def launch(self, name: str, run: Callable[[], Any] | None = None) -> Any:
        """One kernel launch named ``name``; ``run`` does its work (recorded, not run, while capturing)."""
        if self.capturing():
            self.capture.calls.append((name, run))
            return None
        self.launches += 1
        self.names[name] += 1
        return self.timed(name, run)

    def timed(self, name: str, run: Callable[[], Any] | None) -> Any:
        if run is None:
            return None
        if self.events is None:
            return run()
        t0 = time.perf_counter()
        try:
            return run()
        finally:
            self.events.append((name, t0, time.perf_counter()))

    def read(self, what: str = "a read back", run: Callable[[], Any] | None = None) -> Any:
        """One device→host read (a copy and a wait on a GPU); refused while capturing."""
        if self.capturing():
            self._refuse(RuntimeError(
                f"{what} during stream capture: the current stream is capturing, so device-to-host transfers "
                "are disallowed (CuPy refuses them). Read the value after the graph has been launched."))
        self.reads += 1
        return self.timed("read back", run)

    def upload(self, what: str) -> None:
        """One host→device copy from pageable memory (a synchronous copy); refused while capturing."""
        if self.capturing():
            self._refuse(RuntimeError(
                f"{what} during stream capture: the current stream is capturing, so host-to-device transfers "
                "are disallowed (CuPy refuses them). Copy into the device buffer before the capture."))

    def allocate(self, what: str) -> None:
        """One new array from the memory pool; refused while capturing."""
        if self.capturing():
            self._refuse(StreamCaptureError(
                f"{what} allocates a new array during stream capture: the memory pool takes the block back "
                "when the array is freed, while every replay of the graph still writes into it. Allocate "
                "every buffer before the capture and write into it (out=...)."))
        self.allocations += 1

    def library(self, what: str, kind: str = "cuBLAS") -> None:
        """One call into a CUDA library; refused while capturing, as CuPy refuses it."""
        if self.capturing():
            if kind == "CUB":
                why = ("CuPy runs it through CUB, which takes temporary storage from the memory pool; write it as "
                       "a kernel of your own (a RawKernel) or move it out of the capture")
            else:
                why = (f"CuPy's {kind} wrappers raise NotImplementedError('calling {kind} API during stream "
                       f"capture is currently unsupported'); use a handle the course owns and binds to the "
                       "capturing stream (course.capture.matmul_into for a matrix product)")
            self._refuse(NotImplementedError(f"{what} during stream capture: {why}."))
        self.library_calls += 1

    def sync(self, what: str = "synchronising the stream") -> None:
        """One wait for the device; refused while capturing (CUDA invalidates the capture)."""
        if self.capturing():
            self._refuse(StreamCaptureError(
                f"{what} during stream capture: CUDA refuses it (cudaErrorStreamCaptureUnsupported) and the "
                "capture is invalidated. Synchronise before begin_capture or after end_capture."), invalidate=True)
        self.syncs += 1

    def reset(self) -> None:
        """Counts back to zero (a capture in progress and the recorded events are kept)."""
        self.launches, self.reads, self.allocations, self.library_calls, self.syncs = 0, 0, 0, 0, 0
        self.graph_kernels = 0
        self.names.clear()


class CapturedGraph:
    """The launches recorded while capturing: :meth:`launch` replays them in order, as one launch."""

    def __init__(self, counter: CallCounter) -> None:
        self.counter = counter
        self.calls: list[tuple[str, Callable[[], Any] | None]] = []
        self.invalidated: str | None = None
        self.complete = False

    @property
    def kernels(self) -> int:
        """The kernel nodes of the graph (one per recorded launch)."""
        return len(self.calls)

    def kernel_names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def _replay(self) -> None:
        for name, run in self.calls:
            self.counter.graph_kernels += 1
            self.counter.timed(name, run)

    def launch(self, stream: Any = None) -> None:
        """Replay every recorded launch in order: one launch from the host."""
        if not self.complete:
            raise StreamCaptureError("this graph is still being captured: end the capture before launching it")
        self.counter.launch("graph launch", self._replay)

    def debug_dot_str(self, flags: int = 0) -> str:
        """The graph in the DOT form ``cudaGraphDebugDotPrint`` writes: one node per kernel, its name and
        launch configuration on lines of their own inside the label."""
        lines = ["digraph dot {", "subgraph cluster_1 {", 'label="graph_1" graph[style="dashed"];']
        for i, (name, _) in enumerate(self.calls):
            lines.append(f'"graph_1_node_{i}"[style="solid" shape="rectangle" label="{i}\n{name}\n'
                         '\\<\\<\\<(1,1,1),(256,1,1),0\\>\\>\\>"];')
            if i:
                lines.append(f'"graph_1_node_{i - 1}" -> "graph_1_node_{i}";')
        lines += ["}", "}"]
        return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- the arrays

def _plain(a: Any) -> Any:
    if isinstance(a, CountingArray):
        return a.view(np.ndarray)
    if isinstance(a, (tuple, list)):
        return type(a)(_plain(v) for v in a)
    return a


def _counter(values: Any) -> CallCounter | None:
    for v in values:
        if isinstance(v, CountingArray) and v.counter is not None:
            return v.counter
        if isinstance(v, (tuple, list)) and (c := _counter(v)) is not None:
            return c
    return None


def _wrap(r: Any, counter: CallCounter | None) -> Any:
    if isinstance(r, (np.ndarray, np.generic)) and not isinstance(r, CountingArray):
        r = np.asarray(r).view(counter.array_type if counter is not None else CountingArray)
        r.counter = counter
    return r


def _fancy(key: Any) -> bool:
    keys = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, (np.ndarray, list)) for k in keys)


def _shares(r: Any, args: Any) -> bool:
    return isinstance(r, np.ndarray) and any(isinstance(a, np.ndarray) and np.shares_memory(r, a) for a in args)


class CountingArray(np.ndarray):
    """A NumPy array that reports each operation on it to its :class:`CallCounter`."""

    counter: CallCounter | None = None
    #: The device this array poses as (``"gpu"`` for the stand-in GPU's arrays).
    __course_device__ = "cpu"

    def __array_finalize__(self, obj: Any) -> None:
        self.counter = getattr(obj, "counter", None)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, out: Any = None, **kwargs: Any) -> Any:
        c = _counter(inputs + (out or ()))
        name = ufunc.__name__ + ("" if method == "__call__" else f".{method}")
        plain_in = _plain(inputs)
        if out is not None:
            kwargs["out"] = _plain(out)

        def run() -> Any:
            return getattr(ufunc, method)(*plain_in, **kwargs)

        if c is None:
            r = run()
        else:
            if ufunc is np.matmul:
                c.library(f"{name} (CuPy's matmul, a cuBLAS call)")
            elif method in ("reduce", "accumulate", "reduceat"):
                c.library(f"{name} (a reduction)", kind="CUB")
            if out is None:
                c.allocate(name)
            r = c.launch(name, run)
        if out is not None:
            return out[0] if len(out) == 1 else out
        return _wrap(r, c)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        c = _counter(tuple(args) + tuple(kwargs.values()))
        name = func.__name__
        plain_args, plain_kwargs = _plain(args), {k: _plain(v) for k, v in kwargs.items()}

        def run() -> Any:
            return func(*plain_args, **plain_kwargs)

        if c is None:
            return _wrap(run(), c)
        if name in VIEW_FUNCTIONS:
            r = run()                                        # a view costs nothing ... unless it copied
            if not isinstance(r, np.ndarray) or _shares(r, plain_args):
                return _wrap(r, c)
            c.allocate(f"{name} (it had to copy)")
            c.launch(name)
            return _wrap(r, c)
        if name in REDUCTIONS:
            c.library(f"{name} (a reduction)", kind="CUB")
        elif name in LIBRARY_FUNCTIONS or getattr(func, "__module__", "").startswith(("numpy.linalg", "numpy.random",
                                                                                         "numpy.fft")):
            c.library(name, kind="cuSOLVER" if "linalg" in getattr(func, "__module__", "") else "cuBLAS")
        has_out = kwargs.get("out") is not None or name == "copyto"
        if not has_out:
            c.allocate(name)
        if name in _NO_LAUNCH_ALLOCATORS:
            return _wrap(run(), c)
        r = c.launch(name, run)
        if kwargs.get("out") is not None:
            return kwargs["out"]
        return _wrap(r, c)

    def __getitem__(self, key: Any) -> Any:
        if _fancy(key) and self.counter is not None:
            self.counter.allocate("a fancy-indexed read (a gather)")
            c, plain, k = self.counter, self.view(np.ndarray), _plain(key)
            return _wrap(c.launch("gather", lambda: plain[k]), c)
        return _wrap(super().__getitem__(_plain(key)), self.counter)

    def __setitem__(self, key: Any, value: Any) -> None:
        plain, k, v = self.view(np.ndarray), _plain(key), _plain(value)
        if self.counter is not None and isinstance(value, np.ndarray) and not isinstance(value, CountingArray):
            self.counter.upload("assigning a host array into a device array")

        def run() -> None:
            plain[k] = v

        if self.counter is None:
            run()
            return
        self.counter.launch("scatter" if _fancy(key) else ("copy" if isinstance(v, np.ndarray) else "fill"), run)

    def copy(self, order: str = "C") -> CountingArray:
        plain = self.view(np.ndarray)
        if self.counter is None:
            return _wrap(plain.copy(order), None)
        self.counter.allocate("copy()")
        return _wrap(self.counter.launch("copy", lambda: plain.copy(order)), self.counter)

    def astype(self, dtype: Any, order: str = "K", casting: str = "unsafe", subok: bool = True,
               copy: bool = True) -> CountingArray:
        plain = self.view(np.ndarray)
        if not copy and np.dtype(dtype) == self.dtype:
            return self
        if self.counter is None:
            return _wrap(plain.astype(dtype, order=order, casting=casting), None)
        self.counter.allocate(f"astype({np.dtype(dtype).name})")
        return _wrap(self.counter.launch("astype", lambda: plain.astype(dtype, order=order, casting=casting)),
                     self.counter)

    def fill(self, value: Any) -> None:
        plain = self.view(np.ndarray)
        if self.counter is None:
            plain.fill(value)
        else:
            self.counter.launch("fill", lambda: plain.fill(value))

    def _read(self, what: str) -> np.ndarray:
        plain = self.view(np.ndarray)
        if self.counter is not None:
            self.counter.read(what, run=lambda: None)
        return plain

    def __float__(self) -> float:
        return float(self._read("float(x)"))

    def __int__(self) -> int:
        return int(self._read("int(x)"))

    def __index__(self) -> int:
        return int(self._read("using x as an index"))

    def __bool__(self) -> bool:
        return bool(self._read("a truth value (if x:)"))

    def item(self, *args: Any) -> Any:
        return self._read("x.item()").item(*args)

    def tolist(self) -> Any:
        return self._read("x.tolist()").tolist()

    @classmethod
    def __course_gemm__(cls, a: Any, b: Any, out: Any) -> Any:
        """``out = a @ b`` through the course's own cuBLAS handle (:func:`course.capture.matmul_into`):
        one launch, no allocation, and allowed while capturing, since that handle is bound to the
        capturing stream."""
        c = _counter((a, b, out))
        pa, pb, po = _plain(a), _plain(b), _plain(out)
        if c is None:
            np.matmul(pa, pb, out=po)
            return out
        c.launch("gemm", lambda: np.matmul(pa, pb, out=po))
        return out


class CountingNumpy:
    """NumPy as an array namespace whose new arrays count (``ns.counter``); anything else is NumPy's.

    ``record=True`` keeps ``ns.counter.events``, ``(name, start_s, end_s)`` of every operation.
    """

    def __init__(self, record: bool = False) -> None:
        if not isinstance(record, (bool, np.bool_)):
            raise BadInputError(f"record must be True (keep every operation's times) or False, got {record!r:.80}")
        self.counter = CallCounter(record=record)

    def own(self, a: np.ndarray, what: str) -> CountingArray:
        self.counter.allocate(what)
        out = a.view(self.counter.array_type)
        out.counter = self.counter
        return out

    def asarray(self, a: Any, dtype: Any = None) -> CountingArray:
        return self.own(np.array(_plain(a), dtype=dtype), "asarray")     # a copy: the step's own buffer

    def empty(self, shape: Any, dtype: Any = float) -> CountingArray:
        return self.own(np.empty(shape, dtype), "empty")

    def zeros(self, shape: Any, dtype: Any = float) -> CountingArray:
        return self.own(np.zeros(shape, dtype), "zeros")

    def ones(self, shape: Any, dtype: Any = float) -> CountingArray:
        return self.own(np.ones(shape, dtype), "ones")

    def empty_like(self, a: Any, dtype: Any = None) -> CountingArray:
        return self.own(np.empty_like(_plain(a), dtype=dtype), "empty_like")

    def zeros_like(self, a: Any, dtype: Any = None) -> CountingArray:
        return self.own(np.zeros_like(_plain(a), dtype=dtype), "zeros_like")

    @contextlib.contextmanager
    def capturing(self) -> Iterator[CapturedGraph]:
        """Inside, launches are recorded into the graph this yields, as CUDA stream capture records them,
        and what a capture cannot hold is refused (see the module docstring)."""
        if self.counter.capture is not None:
            raise StreamCaptureError("a capture is already in progress on this namespace")
        graph = CapturedGraph(self.counter)
        self.counter.capture = graph
        try:
            yield graph
        finally:
            self.counter.capture = None
            graph.complete = True
        if graph.invalidated:
            raise StreamCaptureError(f"the capture was invalidated: {graph.invalidated}")

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)
