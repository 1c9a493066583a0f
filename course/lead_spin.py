"""The lead: a short spin kernel queued ahead of a timed GPU call, so that CUDA events time device work only.

A GPU timing (:func:`course.timing.benchmark`, :func:`course.torch_peer.benchmark_torch`) records a
CUDA event, calls a Python function, then records a second event.  Without a lead, the GPU reaches the
first event as soon as the host queues it, while the host is still inside Python on its way to the
function's first launch: that host time (tens of µs, and different for every function) lands inside
the measured interval.  Against a 0.19 ms scan that is a large, unequal share.

**What the lead does.**  Before the start event, the harness queues one kernel on the same stream:
:data:`LEAD_SPIN_SOURCE`, one thread that busy-waits on the GPU's nanosecond clock (``%globaltimer``)
for ``lead_s`` seconds (:data:`LEAD_S` by default).  The GPU reaches the start event only after the
spin, by which time the host has queued the work that follows it.  A sleep on the host would not do
this: the GPU, idle, would still reach the event at once.

**What it costs.**  ``lead_s`` of GPU time per sample, outside the measured interval: each sample takes
that much longer in wall-clock time (a 10,000-sample sweep about one second more at 100 µs), and one
thread spins on one SM while the lead runs.  The first use compiles the kernel (NVRTC, cached by CuPy).

**What it does not hide.**  A step the host cannot queue within the lead (a Python loop of many small
launches, a read back that waits for the GPU) still shows its host-bound gaps between the two events:
that is the honest answer for a host-bound step.  At most ``lead_s`` of its host time is hidden per
sample; ``per_event=N`` (one event pair around N calls) divides even that by N and gives the
steady-state time per call.

On the CPU nothing is queued: the host clock times the call.  On the stand-in GPU
(:mod:`course.standin`) the spin's twin does nothing.

>>> LEAD_KERNEL in LEAD_SPIN_SOURCE and 0 < LEAD_S <= MAX_LEAD_S
True
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import BadInputError

__all__ = ["LEAD_KERNEL", "LEAD_SPIN_SOURCE", "LEAD_S", "MAX_LEAD_S", "validate_lead", "cupy_lead",
           "torch_lead"]

#: The spin kernel's name (CuPy's ``RawKernel`` and the stand-in's twin know it by this name).
LEAD_KERNEL = "course_lead_spin"

#: One thread reads the GPU's global nanosecond timer until ``ns`` nanoseconds have passed.
LEAD_SPIN_SOURCE = r"""
extern "C" __global__ void course_lead_spin(const unsigned long long ns)
{
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
"""

#: The default lead, in seconds: longer than the host's overhead of a Python call up to its first launch.
LEAD_S = 100e-6
#: The longest lead accepted (a lead is a head start, not a measurement).
MAX_LEAD_S = 0.01


def _register_twin() -> None:
    """Let the stand-in GPU run the spin: its twin does nothing (there is no GPU to keep busy)."""
    try:
        from .standin import register_kernel
    except ImportError:           # a course without the stand-in: nothing to register
        return
    register_kernel(LEAD_KERNEL, lambda grid, block, args: None)


_register_twin()


def validate_lead(lead_s: Any) -> float:
    """``lead_s`` as seconds in ``[0, MAX_LEAD_S]`` (``None``: :data:`LEAD_S`), or a clear error.

    >>> validate_lead(None) == LEAD_S, validate_lead(0)
    (True, 0.0)
    """
    if lead_s is None:
        return LEAD_S
    if isinstance(lead_s, bool) or not isinstance(lead_s, numbers.Real) or not 0 <= float(lead_s) <= MAX_LEAD_S:
        raise BadInputError(f"lead_s must be seconds between 0 and {MAX_LEAD_S:g} (the GPU's head start before "
                            f"the start event, e.g. 1e-4), or None for the default {LEAD_S:g}; got {lead_s!r}")
    return float(lead_s)


#: id(cupy module) -> (the module, its RawKernel of the spin): one kernel object per CuPy (or stand-in).
_KERNELS: dict[int, tuple[Any, Any]] = {}
#: (id(cupy module), "cupy" or "torch") -> whether the spin launched there (tried once per process).
_LAUNCHED: dict[tuple[int, str], bool] = {}


def _launcher(cp: Any, lead_s: float) -> Callable[[Any], None]:
    if id(cp) not in _KERNELS:
        _KERNELS[id(cp)] = cp, cp.RawKernel(LEAD_SPIN_SOURCE, LEAD_KERNEL)
    kernel = _KERNELS[id(cp)][1]
    ns = np.uint64(round(lead_s * 1e9))

    def queue(stream: Any) -> None:
        kernel((1,), (1,), (ns,), stream=stream)
    return queue


def _launches(cp: Any, path: str, queue: Callable[[], None]) -> bool:
    """Whether the spin launches on ``path``: the first time, one untimed launch (NVRTC compiles the
    kernel here); if that fails, a warning, and no lead on that path for the rest of the process."""
    key = (id(cp), path)
    if key not in _LAUNCHED:
        try:
            queue()
            _LAUNCHED[key] = True
        except Exception as exc:   # no NVRTC, an old driver: time without a lead rather than not at all
            _LAUNCHED[key] = False
            warnings.warn(f"the lead spin could not be launched on {path}'s stream ({type(exc).__name__}: "
                          f"{exc}); timing without it, so host time before the first launch is inside each "
                          "GPU sample (the records say lead_s=0)", RuntimeWarning, stacklevel=3)
    return _LAUNCHED[key]


def cupy_lead(cp: Any, lead_s: float, stream: Any) -> Callable[[], None] | None:
    """A function queueing a ``lead_s`` spin on CuPy ``stream``; None for no lead (``lead_s`` 0, or the
    spin cannot be launched here: a warning says so, once)."""
    if lead_s <= 0:
        return None
    launch = _launcher(cp, lead_s)

    def queue() -> None:
        launch(stream)
    return queue if _launches(cp, "cupy", queue) else None


def _cupy_stream_of(cp: Any, torch_stream: Any) -> Any:
    """A CuPy stream object for a PyTorch stream: ``Stream.from_external`` (CuPy 14, the CUDA stream
    protocol) where both sides have it, else ``ExternalStream(pointer, device)`` (older CuPy)."""
    from_external = getattr(cp.cuda.Stream, "from_external", None)
    if from_external is not None and hasattr(torch_stream, "__cuda_stream__"):
        return from_external(torch_stream)
    with warnings.catch_warnings():           # deprecated in CuPy 14 in favour of from_external
        warnings.simplefilter("ignore", DeprecationWarning)
        return cp.cuda.ExternalStream(int(torch_stream.cuda_stream), int(torch_stream.device.index or 0))


def torch_lead(cp: Any, lead_s: float) -> Callable[[Any], None] | None:
    """A function queueing a ``lead_s`` spin on a PyTorch CUDA stream (``queue(torch_stream)``), launched
    through CuPy on that very stream; None without CuPy, for ``lead_s`` 0, or where the spin cannot be
    launched (a warning says so, once)."""
    if cp is None or lead_s <= 0:
        return None
    import torch

    launch = _launcher(cp, lead_s)
    wrapped: dict[tuple[int, int], Any] = {}

    def queue(torch_stream: Any) -> None:
        index = int(torch_stream.device.index or 0)
        key = (int(torch_stream.cuda_stream), index)
        if key not in wrapped:
            wrapped[key] = _cupy_stream_of(cp, torch_stream)
        with cp.cuda.Device(index):           # the kernel is loaded on, and launched from, that device
            launch(wrapped[key])

    return queue if _launches(cp, "torch", lambda: queue(torch.cuda.current_stream())) else None
