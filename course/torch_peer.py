"""PyTorch as a peer: is it here, and the one way the course times a PyTorch call.

PyTorch is optional.  Where it is installed, several lessons time the same work in
PyTorch next to the course's NumPy/CuPy code (a training step, a matrix product,
a bfloat16 product, cuDNN's RNN).  Every such comparison times PyTorch with
:func:`benchmark_torch`, so that "ours / PyTorch" means the same thing everywhere.

**Why CUDA events on PyTorch's own stream.**  :func:`course.timing.benchmark` times
CuPy work with two CUDA events recorded on CuPy's current stream: the GPU itself
reports the time between the moment it reached the first event and the moment it
finished the last kernel queued before the second.  :func:`benchmark_torch` takes the
same measurement for PyTorch: events from ``torch.cuda.Event`` recorded on
``torch.cuda.current_stream()``, the stream PyTorch queues its kernels on.  Both
sides of a ratio are then measured alike, and:

* CuPy's events cannot be trusted to see PyTorch's work: they sit on *CuPy's*
  current stream, which is PyTorch's only while both happen to use the legacy
  default stream (not under ``CUPY_CUDA_PER_THREAD_DEFAULT_STREAM``, nor inside a
  ``torch.cuda.stream(...)`` block);
* a host clock around the call plus ``torch.cuda.synchronize()`` would charge the
  synchronisation's round trip (several microseconds) to PyTorch's side only, which
  distorts every small operation, and waits for *all* streams, not the work timed.

On the CPU there are no streams: the host clock of :func:`course.timing.benchmark`
times both sides.  Warm-up, repeats, the budget and the median are
:func:`~course.timing.benchmark`'s in both cases.

>>> import time
>>> t = benchmark_torch(time.sleep, 0.001, device="cpu", repeat=3)
>>> t.repeat, t.device
(3, 'cpu')
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .devices import normalize_device
from .errors import BadInputError, GPUUnavailableError
from .timing import Timing, benchmark

__all__ = ["torch_available", "torch_cuda_available", "torch_device", "torch_threads", "torch_synchronize",
           "benchmark_torch"]


def torch_available() -> bool:
    """True when PyTorch is installed (an optional peer, never required); does not import it.

    ``COURSE_DISABLE_TORCH=1`` makes the course behave as if it were not installed.

    >>> isinstance(torch_available(), bool)
    True
    """
    if os.environ.get("COURSE_DISABLE_TORCH", "").strip() not in ("", "0"):
        return False
    return importlib.util.find_spec("torch") is not None


def torch_cuda_available() -> bool:
    """True when PyTorch is installed *and* its CUDA build sees a GPU (never raises).

    >>> torch_cuda_available() in (True, False)
    True
    """
    if not torch_available():
        return False
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def torch_device(device: Any = "cpu") -> str:
    """PyTorch's name for a course device: ``"cpu"`` or ``"cuda"``, with a clear error where it cannot run.

    >>> torch_device("cpu") if torch_available() else "cpu"
    'cpu'
    """
    dev = normalize_device(device)
    if not torch_available():
        raise BadInputError("PyTorch is not installed, so there is no PyTorch peer to time "
                            "(pip install torch to add it).")
    if dev == "gpu" and not torch_cuda_available():
        raise GPUUnavailableError("PyTorch here has no CUDA device (a CPU-only wheel, or no GPU); install a "
                                  "CUDA build of PyTorch to time it on the GPU.")
    return "cuda" if dev == "gpu" else "cpu"


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Inside: PyTorch uses ``n`` CPU threads (``None``: leave its setting); restored afterwards.

    >>> with torch_threads(None):
    ...     pass
    """
    if n is None or not torch_available():
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(max(1, int(n)))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def torch_synchronize(device: Any = "gpu") -> None:
    """Wait for PyTorch's queued GPU work (a no-op on the CPU or without PyTorch's CUDA)."""
    if normalize_device(device) == "gpu" and torch_cuda_available():
        import torch

        torch.cuda.synchronize()


def benchmark_torch(fn: Callable, *args: Any, device: Any = "cpu", warmup: int = 1, repeat: int = 7,
               budget_s: float | None = None, name: str | None = None, **kwargs: Any) -> Timing:
    """Time a PyTorch call ``fn(*args, **kwargs)`` on ``device``, the way the course times its own.

    Parameters
    ----------
    fn : the call to time; its tensors must already be on ``device``.
    device : ``"cpu"`` (host clock) or ``"gpu"`` (CUDA events on ``torch.cuda.current_stream()``,
        see the module docstring for why).
    warmup, repeat, budget_s, name : as for :func:`course.timing.benchmark`.

    Returns
    -------
    Timing : device times in ``samples`` (on a GPU: what the events measured), the host clock's
        times of the same calls in ``host_samples``.

    Examples
    --------
    >>> t = benchmark_torch(sum, [1, 2, 3], device="cpu", repeat=2)
    >>> t.repeat
    2
    """
    dev = normalize_device(device)
    label = name or getattr(fn, "__name__", None) or type(fn).__name__
    if dev == "cpu":
        return benchmark(fn, *args, device="cpu", warmup=warmup, repeat=repeat, budget_s=budget_s,
                         name=label, **kwargs)
    torch_device("gpu")
    if not callable(fn):
        raise BadInputError(f"benchmark_torch needs a function to call, got {type(fn).__name__} {fn!r}")
    import torch

    measured: list[float] = []

    def call() -> None:
        stream = torch.cuda.current_stream()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        fn(*args, **kwargs)
        end.record(stream)
        end.synchronize()                 # the host waits, so the budget counts the real work
        measured.append(start.elapsed_time(end) / 1e3)

    torch.cuda.synchronize()              # nothing queued earlier runs inside the first sample
    host = benchmark(call, device="cpu", warmup=warmup, repeat=repeat, budget_s=budget_s, name=label)
    return Timing(samples=np.asarray(measured[host.warmup:], dtype=np.float64), device="gpu", name=label,
                  warmup=host.warmup, stopped_early=host.stopped_early, budget_s=budget_s,
                  host_samples=host.samples)
