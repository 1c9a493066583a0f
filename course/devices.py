"""Which devices this machine has, and how array code reaches them.

The CPU is always there and is driven through NumPy. A GPU counts only when it
answers a *real* device call through CuPy: importing ``cupy`` succeeds on many
machines that have no GPU (or no driver), so the probe allocates an array, runs
a kernel and reads the answer back before it believes a GPU is present.

Array code in the lessons takes a *device* name (``"cpu"`` or ``"gpu"``) and asks
for its array namespace with :func:`get_xp`; data crosses between host and
device only through :func:`to_device` / :func:`to_numpy`, so every transfer is
visible in the code.

>>> import course
>>> course.devices()[0].kind
'cpu'
>>> xp = course.get_xp("cpu")
>>> float(xp.ones(3).sum())
3.0
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .cpu import cpu_info
from .errors import BadInputError, GPUUnavailableError
from .standin import standin_active, standin_cupy

__all__ = [
    "Device",
    "devices",
    "gpu_info",
    "gpu_available",
    "gpu_unavailable_reason",
    "require_gpu",
    "normalize_device",
    "validate_device",
    "get_xp",
    "array_device",
    "xp_of",
    "to_device",
    "to_numpy",
    "synchronize",
    "quiet_numba_launches",
    "cupy_module",
    "resolve_devices",
]

#: Devices the lessons understand.  ``"cuda"`` is accepted as a synonym of ``"gpu"``.
DEVICE_NAMES = ("cpu", "gpu")

# FP32 lanes ("CUDA cores") per streaming multiprocessor, by compute capability.
# Source: the CUDA C++ Programming Guide, table "Throughput of native arithmetic
# instructions" (32-bit floating-point add/multiply per clock per SM).
_FP32_LANES_PER_SM = {
    (6, 0): 64, (6, 1): 128, (6, 2): 128,
    (7, 0): 64, (7, 2): 64, (7, 5): 64,
    (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128,
    (9, 0): 128, (10, 0): 128, (10, 3): 128, (12, 0): 128, (12, 1): 128,
}


@dataclass(frozen=True)
class Device:
    """One device the course can run on.

    Attributes
    ----------
    kind : ``"cpu"`` or ``"gpu"``.
    index : the CUDA device ordinal for a GPU, 0 for the CPU.
    name : the marketing name (``"NVIDIA H200"``, ``"AMD EPYC 7B13"``).
    details : everything else that was found out (cores, memory, versions...).
    """

    kind: str
    index: int
    name: str
    details: dict = field(default_factory=dict, compare=False)

    def __repr__(self) -> str:  # one readable line per device
        d = self.details
        if self.kind == "cpu":
            simd = d.get("simd_width_bits")
            return (f"Device(cpu: {self.name}, {d.get('logical_cores')} logical cores, "
                    f"SIMD {simd}-bit, {_gib(d.get('memory_bytes'))} RAM)")
        return (f"Device(gpu:{self.index}: {self.name}, {d.get('multiprocessors')} SMs, "
                f"compute capability {d.get('compute_capability')}, "
                f"{_gib(d.get('memory_bytes'))} memory)")

    @property
    def label(self) -> str:
        """Short label for plots: ``"CPU: AMD EPYC (2 cores)"``, ``"GPU: NVIDIA H200"``."""
        if self.kind == "cpu":
            return f"CPU: {self.name} ({self.details.get('logical_cores')} cores)"
        return f"GPU: {self.name}"


def _gib(n: Any) -> str:
    return "?" if not n else f"{n / 2**30:.1f} GiB"


# --------------------------------------------------------------------------- GPU

def cupy_module() -> Any:
    """Import cupy, or return None (not installed, or switched off by ``COURSE_DISABLE_GPU``): never raises.

    With ``COURSE_STANDIN_GPU=1`` it returns the stand-in GPU instead (:mod:`course.standin`: NumPy posing
    as CuPy, so that the GPU code paths run on a CPU; its name says it is no GPU).
    """
    if os.environ.get("COURSE_DISABLE_GPU", "").strip() not in ("", "0"):
        return None
    if standin_active():
        return standin_cupy()
    try:
        import cupy  # noqa: F401
    except Exception:
        return None
    return cupy


@functools.lru_cache(maxsize=1)
def _probe() -> tuple[tuple[dict, ...], str]:
    """Find GPUs by real device calls.  Returns (infos, reason-if-none)."""
    if os.environ.get("COURSE_DISABLE_GPU", "").strip() not in ("", "0"):
        return (), "the GPU is switched off by COURSE_DISABLE_GPU"
    cp = cupy_module()
    if cp is None:
        return (), "CuPy is not installed"
    try:
        count = cp.cuda.runtime.getDeviceCount()
    except Exception as exc:  # no driver, no device: cupy raises here
        return (), f"CuPy found no usable CUDA device ({type(exc).__name__}: {exc})"
    infos = []
    reason = ""
    for i in range(count):
        try:
            with cp.cuda.Device(i):
                # A real round trip: allocate, launch a kernel, copy back.
                if int(cp.arange(8, dtype=cp.int32).sum().get()) != 28:
                    raise RuntimeError("a test kernel returned a wrong answer")
                infos.append(_gpu_props(cp, i))
        except Exception as exc:
            reason = f"GPU {i} did not answer a device call ({type(exc).__name__}: {exc})"
    if not infos and not reason:
        reason = "no CUDA device was found"
    return tuple(infos), reason


def _gpu_props(cp, i: int) -> dict:
    rt = cp.cuda.runtime
    p = rt.getDeviceProperties(i)
    name = p.get("name", b"GPU")
    name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
    cc = (int(p.get("major", 0)), int(p.get("minor", 0)))
    sms = int(p.get("multiProcessorCount", 0))
    lanes = _FP32_LANES_PER_SM.get(cc)
    mem_clock_khz = p.get("memoryClockRate")
    bus_bits = p.get("memoryBusWidth")
    if not mem_clock_khz:
        try:  # CUDA 13 removed it from the properties struct; ask the attribute
            mem_clock_khz = rt.deviceGetAttribute(36, i)  # cudaDevAttrMemoryClockRate
        except Exception:
            mem_clock_khz = None
    bandwidth = None
    if mem_clock_khz and bus_bits:
        bandwidth = 2.0 * mem_clock_khz * 1e3 * bus_bits / 8  # double data rate
    free, total = cp.cuda.Device(i).mem_info
    return {
        "index": i,
        "name": name,
        "compute_capability": f"{cc[0]}.{cc[1]}",
        "multiprocessors": sms,
        "fp32_lanes_per_sm": lanes,
        "fp32_lanes": sms * lanes if lanes else None,
        "warp_size": int(p.get("warpSize", 32)),
        "clock_mhz": _clock_mhz(p, rt, i),
        "memory_bytes": int(total),
        "memory_free_bytes": int(free),
        "memory_bus_bits": bus_bits,
        "memory_clock_mhz": mem_clock_khz / 1e3 if mem_clock_khz else None,
        "memory_bandwidth_bytes_per_s": bandwidth,
        "shared_memory_per_block": p.get("sharedMemPerBlock"),
        "driver_version": _cuda_version(rt.driverGetVersion()),
        "runtime_version": _cuda_version(rt.runtimeGetVersion()),
        "cupy_version": cp.__version__,
    }


def _clock_mhz(props: dict, rt: Any, i: int) -> float | None:
    """The SM clock in MHz: from the properties struct, or (CUDA 13 removed ``clockRate`` from it)
    from the device attribute ``cudaDevAttrClockRate`` (13), which still reports it in kHz."""
    khz = props.get("clockRate")
    if not khz:
        try:
            khz = rt.deviceGetAttribute(13, i)  # cudaDevAttrClockRate
        except Exception:
            khz = None
    return float(khz) / 1e3 if khz else None


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def gpu_info() -> list[dict]:
    """Details of every GPU that answered a real device call (empty without one)."""
    return [dict(d) for d in _probe()[0]]


def gpu_available() -> bool:
    """True when at least one GPU answered a real device call through CuPy.

    Never raises and never hangs: the probe runs once and is cached.
    """
    return bool(_probe()[0])


def gpu_unavailable_reason() -> str:
    """Why there is no GPU (empty string when there is one)."""
    return "" if gpu_available() else _probe()[1]


_WHAT_TO_DO = (
    "On Colab: Runtime > Change runtime type > a GPU (T4 is free), then run the notebook again. "
    "On your own machine with an NVIDIA GPU: pip install -e '.[cuda12]' (or '.[cuda13]' for a "
    "CUDA 13 driver). Without a GPU, choose the CPU (device='cpu')."
)


def require_gpu() -> None:
    """Raise :class:`GPUUnavailableError` (saying what to do) unless a GPU answers."""
    if not gpu_available():
        raise GPUUnavailableError(f"No GPU is available here: {gpu_unavailable_reason()}. {_WHAT_TO_DO}")


def devices() -> list[Device]:
    """The devices present: always the CPU, then every GPU that really answers.

    >>> [d.kind for d in devices()][:1]
    ['cpu']
    """
    info = cpu_info()
    out = [Device("cpu", 0, info["model"], dict(info))]
    for g in gpu_info():
        out.append(Device("gpu", g["index"], g["name"], g))
    return out


# ------------------------------------------------------------------ array helpers

def normalize_device(device: Any) -> str:
    """Turn ``"cpu"``, ``"gpu"``, ``"cuda"``, ``"gpu:0"`` or a :class:`Device` into ``"cpu"``/``"gpu"``.

    The course runs on one GPU, the current CUDA device (ordinal 0 unless ``CUDA_VISIBLE_DEVICES``
    says otherwise).  Naming another ordinal (``"cuda:1"``) is refused rather than silently run on
    GPU 0.

    >>> normalize_device("cuda:0")
    'gpu'
    """
    if not isinstance(device, (str, Device)):
        raise BadInputError(f"device must be 'cpu' or 'gpu', got {device!r:.80}")
    if isinstance(device, Device):
        if device.kind == "gpu" and device.index != 0:
            raise BadInputError(_other_gpu_message(f"{device.kind}:{device.index}"))
        return device.kind
    d, _, index = device.strip().lower().partition(":")
    if d == "cuda":
        d = "gpu"
    if d not in DEVICE_NAMES:
        raise BadInputError(f"device must be 'cpu' or 'gpu', got {device!r}")
    if index:
        if not index.isdigit() or (d == "cpu" and int(index) != 0):
            raise BadInputError(f"device {device!r}: the part after ':' must be a device number "
                                f"({'0 for the CPU' if d == 'cpu' else 'e.g. gpu:0'})")
        if d == "gpu" and int(index) != 0:
            raise BadInputError(_other_gpu_message(device))
    return d


#: The same check under the name every validator has (``d = validate_device(device)`` opens a function).
validate_device = normalize_device


def _other_gpu_message(device: str) -> str:
    n = device.rsplit(":", 1)[-1]
    count = len(gpu_info())
    if count == 0:
        return (f"device {device!r}: no GPU answers on this machine ({gpu_unavailable_reason()}), so there is "
                f"no GPU {n} either; use device='cpu'. (On a machine with several GPUs, CUDA_VISIBLE_DEVICES={n} "
                f"makes GPU {n} the course's GPU 0.)")
    if int(n) >= count:
        return (f"device {device!r}: there is no GPU {n} here: {count} GPU(s) answer, numbered from 0 "
                f"to {count - 1}. The course runs on GPU 0 (CUDA_VISIBLE_DEVICES chooses which one that is); "
                "pass device='gpu'.")
    return (f"device {device!r}: the course runs on one GPU, number 0. To use GPU {n}, start Python with "
            f"CUDA_VISIBLE_DEVICES={n} (it then appears as GPU 0) and pass device='gpu'.")


def get_xp(device: Any = "cpu") -> Any:
    """The array namespace for a device: ``numpy`` for the CPU, ``cupy`` for the GPU.

    Asking for the GPU where none answers raises :class:`GPUUnavailableError`
    with instructions.
    """
    d = validate_device(device)
    if d == "cpu":
        return np
    require_gpu()
    return cupy_module()


def resolve_devices(devices: Any = None) -> list[str]:
    """The devices a sweep runs on: ``None`` means every device that answers (the CPU, and the GPU
    where one does); otherwise each name normalised, duplicates dropped, and a GPU asked for where none
    answers refused with :class:`GPUUnavailableError` saying what to do.

    >>> resolve_devices(["cpu", "CPU"])
    ['cpu']
    """
    if devices is not None and (isinstance(devices, (bytes, np.ndarray)) or not isinstance(devices, (str, Iterable))):
        raise BadInputError(f"devices must be None (every device that answers) or device names such as "
                            f"['cpu', 'gpu'], got {devices!r:.80}")
    if devices is None:
        return ["cpu", "gpu"] if gpu_available() else ["cpu"]
    if isinstance(devices, str):
        devices = [devices]
    devs = [normalize_device(d) for d in devices]
    if not devs:
        raise BadInputError("devices is empty; give at least one of 'cpu', 'gpu' (or None for all)")
    for d in devs:
        if d == "gpu":
            require_gpu()
    return list(dict.fromkeys(devs))


def array_device(x: Any) -> str:
    """``"gpu"`` for a CuPy array (or one of the stand-in GPU's), ``"cpu"`` for anything else."""
    posing = getattr(type(x), "__course_device__", None)
    if posing is not None:
        return posing
    return "gpu" if type(x).__module__.split(".")[0] == "cupy" else "cpu"


def xp_of(x: Any) -> Any:
    """The array namespace (numpy or cupy) that ``x`` lives in: the one way the course asks for it."""
    return get_xp("gpu") if array_device(x) == "gpu" else np


def to_device(x: Any, device: Any = "cpu", dtype: Any = None) -> Any:
    """Copy ``x`` to ``device`` (a no-op when it is already there).  An explicit transfer."""
    d = validate_device(device)
    if d == "cpu":
        out = to_numpy(x)
        return out if dtype is None else out.astype(dtype, copy=False)
    xp = get_xp("gpu")
    return xp.asarray(x, dtype=dtype)


def to_numpy(x: Any) -> np.ndarray:
    """Bring ``x`` back to host memory as a numpy array (an explicit device-to-host copy)."""
    if array_device(x) == "gpu":
        return x.get()
    return np.asarray(x)


def synchronize(device: Any = "gpu") -> None:
    """Wait until all work queued on ``device`` has finished (a no-op for the CPU).

    GPU calls return as soon as the work is *queued*; a timer read before this
    wait measures the queueing, not the work.
    """
    d = validate_device(device)
    if d == "gpu" and gpu_available():
        cupy_module().cuda.get_current_stream().synchronize()


@contextlib.contextmanager
def quiet_numba_launches() -> Iterator[None]:
    """Inside: numba-cuda's ``NumbaPerformanceWarning`` (a grid too small to fill the GPU) is not shown.

    The course launches small grids on purpose (tiny arrays, a scan's tile totals); the
    warning would reach every learner's output.  Other warnings pass through.

    >>> with quiet_numba_launches():
    ...     pass
    """
    with warnings.catch_warnings():
        # numba-cuda has its own copy of the class (numba.cuda.core.errors) beside numba's; the
        # message catches both, and whichever module a version raises it from
        warnings.filterwarnings("ignore", message=r".*GPU under-utilization")
        yield


# numba-cuda (0.30.4, the newest at the time of writing) registers ``np.row_stack`` when it compiles
# its first kernel, and NumPy 2.5 removed that old alias of ``np.vstack``: every numba.cuda kernel then
# fails with "module 'numpy' has no attribute 'row_stack'".  The alias is put back, as it always was.
if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack
