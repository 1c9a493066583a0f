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

**The same lead on both sides.**  Ahead of the start event, :func:`benchmark_torch` queues the
course's lead spin (:mod:`course.lead_spin`) on PyTorch's current stream, launched through CuPy on
that very stream (``cupy.cuda.Stream.from_external``, or ``ExternalStream`` on an older CuPy), as
:func:`course.timing.benchmark` does on CuPy's: the GPU reaches the start event only after the host
has queued the call's kernels, so PyTorch's Python overhead before its first launch stays outside
the sample, as the course's does.  ``per_event=N`` times N calls between one pair of events, for a
step whose host cannot keep ahead of the GPU.  Without CuPy there is no lead (the Timing says
``lead_s=0``).

**TF32.**  PyTorch's switches for TF32 (``torch.backends.cuda.matmul.allow_tf32`` and
``torch.backends.cudnn.allow_tf32``) are process-wide, and cuDNN's is on by default.  A peer runs
under a setting chosen *outside* the timed call (:func:`torch_tf32` around the rounds, or
:func:`set_torch_tf32` in :func:`~course.timing.interleaved_rounds`'s ``before`` hook) and its record
names it (``tf32``); :func:`cupy_tf32` says the course's own side (CuPy: strict float32 unless
``CUPY_TF32``).

On the CPU there are no streams: the host clock of :func:`course.timing.benchmark`
times both sides, and TF32 does not apply.  Warm-up, repeats, the budget and the median are
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
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .arguments import Optional, Whole, arguments
from .devices import cupy_module, validate_device
from .errors import BadInputError, GPUUnavailableError, whole_number
from .lead_spin import torch_lead, validate_lead
from .timing import MAX_REPEAT, Timing, benchmark

__all__ = ["TORCH_INSTALL", "torch_available", "torch_cuda_available", "torch_device", "torch_threads",
           "torch_synchronize", "benchmark_torch", "torch_tf32_flags", "set_torch_tf32", "torch_tf32", "validate_tf32",
           "cupy_tf32"]

#: How to add PyTorch, said the same way everywhere: into the environment the course's kernel runs in (a bare
#: ``pip`` in a terminal may be another Python's).
TORCH_INSTALL = ("in a notebook cell: %pip install torch; in a terminal, with the course's environment active: "
                 "python -m pip install torch")


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
    dev = validate_device(device)
    if not torch_available():
        raise BadInputError(f"PyTorch is not installed, so there is no PyTorch peer to time (to add it, "
                            f"{TORCH_INSTALL}).")
    if dev == "gpu" and not torch_cuda_available():
        raise GPUUnavailableError("PyTorch here has no CUDA device (a CPU-only wheel, or no GPU); install a "
                                  "CUDA build of PyTorch to time it on the GPU.")
    return "cuda" if dev == "gpu" else "cpu"


@arguments(n=Optional(Whole(hint="CPU threads PyTorch may use, or None to leave its setting")))
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
    dev = validate_device(device)
    if dev == "gpu" and torch_cuda_available():
        import torch

        torch.cuda.synchronize()


def benchmark_torch(fn: Callable, *args: Any, device: Any = "cpu", warmup: int = 1, repeat: int = 7,
                    budget_s: float | None = None, name: str | None = None, per_event: int = 1,
                    lead_s: float | None = None, **kwargs: Any) -> Timing:
    """Time a PyTorch call ``fn(*args, **kwargs)`` on ``device``, the way the course times its own.

    Parameters
    ----------
    fn : the call to time; its tensors must already be on ``device``.
    device : ``"cpu"`` (host clock) or ``"gpu"`` (CUDA events on ``torch.cuda.current_stream()``,
        behind the lead spin on that stream: see the module docstring for why).
    warmup, repeat, budget_s, name, per_event, lead_s : as for :func:`course.timing.benchmark`.

    Returns
    -------
    Timing : device times in ``samples`` (on a GPU: what the events measured), the host clock's
        times of the same calls in ``host_samples`` (from the start event until the end event was
        reached: they include what was left of the lead), ``lead_s`` the lead that ran.

    Examples
    --------
    >>> t = benchmark_torch(sum, [1, 2, 3], device="cpu", repeat=2)
    >>> t.repeat
    2
    """
    dev = validate_device(device)
    label = name or getattr(fn, "__name__", None) or type(fn).__name__
    if dev == "cpu":
        return benchmark(fn, *args, device="cpu", warmup=warmup, repeat=repeat, budget_s=budget_s,
                         name=label, per_event=per_event, **kwargs)
    torch_device("gpu")
    if not callable(fn):
        raise BadInputError(f"benchmark_torch needs a function to call, got {type(fn).__name__} {fn!r}")
    calls = whole_number("per_event", per_event, hi=MAX_REPEAT, hint="calls between one pair of events")
    wanted = validate_lead(lead_s)
    import torch

    lead = torch_lead(cupy_module(), wanted)
    measured: list[float] = []

    def call() -> None:
        stream = torch.cuda.current_stream()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if lead is not None:
            lead(stream)                  # the GPU spins while the host queues what follows
        start.record(stream)
        for _ in range(calls):
            fn(*args, **kwargs)
        end.record(stream)
        end.synchronize()                 # the host waits, so the budget counts the real work
        measured.append(start.elapsed_time(end) / 1e3 / calls)

    torch.cuda.synchronize()              # nothing queued earlier runs inside the first sample
    host = benchmark(call, device="cpu", warmup=warmup, repeat=repeat, budget_s=budget_s, name=label)
    return Timing(samples=np.asarray(measured[host.warmup:], dtype=np.float64), device="gpu", name=label,
                  warmup=host.warmup, stopped_early=host.stopped_early, budget_s=budget_s,
                  host_samples=np.asarray(host.samples) / calls, lead_s=wanted if lead is not None else 0.0,
                  per_event=calls)


# ----------------------------------------------------------------------------- TF32, on both sides of a ratio

def validate_tf32(tf32: Any) -> bool:
    """``tf32`` if it is True or False, else a clear error (1 and "yes" are refused: say what you mean).

    >>> validate_tf32(False)
    False
    """
    if not isinstance(tf32, (bool, np.bool_)):
        raise BadInputError(f"tf32 must be True (let cuBLAS and cuDNN round float32 inputs to TF32) or False "
                            f"(strict float32); got {tf32!r}")
    return bool(tf32)


def torch_tf32_flags(torch: Any = None) -> dict | None:
    """PyTorch's process-wide TF32 switches as they stand: ``{"torch_matmul_allow_tf32": bool,
    "torch_cudnn_allow_tf32": bool}`` (and ``"torch_cudnn_conv_allow_tf32"`` where cuDNN's convolutions
    differ from its RNNs); None when PyTorch is not imported (never imports it: that costs seconds).

    Where PyTorch refuses to read its legacy flags (PyTorch 2.9 and later, after its newer
    ``fp32_precision`` API set them), they are read from that API instead.

    >>> flags = torch_tf32_flags()
    >>> flags is None or sorted(flags)[:2] == ["torch_cudnn_allow_tf32", "torch_matmul_allow_tf32"]
    True
    """
    mod = sys.modules.get("torch") if torch is None else torch
    if mod is None:
        return None
    back = mod.backends
    try:
        return {"torch_matmul_allow_tf32": bool(back.cuda.matmul.allow_tf32),
                "torch_cudnn_allow_tf32": bool(back.cudnn.allow_tf32)}
    except RuntimeError:                    # a mix of the legacy and the fp32_precision API
        rnn, conv = (getattr(back.cudnn, op).fp32_precision == "tf32" for op in ("rnn", "conv"))
        return ({"torch_matmul_allow_tf32": back.cuda.matmul.fp32_precision == "tf32",
                 "torch_cudnn_allow_tf32": rnn} | ({"torch_cudnn_conv_allow_tf32": conv} if conv != rnn else {}))


def set_torch_tf32(enabled: bool) -> None:
    """Set both of PyTorch's TF32 switches (cuBLAS's matmul and cuDNN's) to ``enabled``: call it outside
    any timed call (as :func:`~course.timing.interleaved_rounds`'s ``before`` hook)."""
    enabled = validate_tf32(enabled)
    import torch

    torch.backends.cuda.matmul.allow_tf32 = enabled     # the legacy setters keep the newer API's state in step
    torch.backends.cudnn.allow_tf32 = enabled


@contextlib.contextmanager
def torch_tf32(enabled: bool) -> Iterator[None]:
    """Inside: both TF32 switches set to ``enabled``; afterwards, both as they were (by whichever of
    PyTorch's two APIs can read them).

    >>> import torch  # doctest: +SKIP
    >>> with torch_tf32(False):  # doctest: +SKIP
    ...     step()
    """
    enabled = validate_tf32(enabled)
    import torch

    back = torch.backends
    try:
        before: tuple = ("legacy", bool(back.cuda.matmul.allow_tf32), bool(back.cudnn.allow_tf32))
    except RuntimeError:                    # set through the fp32_precision API: restore through it
        before = ("precision", back.cuda.matmul.fp32_precision, back.cudnn.rnn.fp32_precision,
                  back.cudnn.conv.fp32_precision)
    set_torch_tf32(enabled)
    try:
        yield
    finally:
        if before[0] == "legacy":
            back.cuda.matmul.allow_tf32, back.cudnn.allow_tf32 = before[1], before[2]
        else:
            back.cuda.matmul.fp32_precision = before[1]
            back.cudnn.rnn.fp32_precision, back.cudnn.conv.fp32_precision = before[2], before[3]


def cupy_tf32() -> bool:
    """Whether the course's own float32 matrix products on a GPU may use TF32: CuPy's rule,
    ``CUPY_TF32`` read as a number above 0 (CuPy reads it at its first float32 product and keeps it).

    >>> isinstance(cupy_tf32(), bool)
    True
    """
    cp = cupy_module()
    get = getattr(getattr(cp, "_core", None), "get_compute_type", None)
    if get is not None:
        try:
            return int(get(np.float32)) == 7          # cupy._core._routines_linalg.COMPUTE_TYPE_TF32
        except Exception:
            pass
    try:
        return int(os.environ.get("CUPY_TF32", "0")) > 0
    except ValueError:
        return False
