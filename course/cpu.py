"""The CPU this process runs on: its model, the SIMD extensions numpy really uses, the cores this
process may use (affinity and a container's quota, not the host's count), the machine's load and
its memory.  Every timing records the cores and the load; lesson 00 shows the rest.

>>> info = cpu_info()
>>> info["usable_cores"] >= 1 and info["usable_cores"] <= info["logical_cores"]
True
"""

from __future__ import annotations

import functools
import os
import platform

__all__ = ["cpu_info", "usable_cores", "machine_load", "runnable_processes", "memory_bytes"]

_SIMD_BITS = [  # widest vector register a numpy-dispatched extension uses
    ("AVX512F", 512), ("AVX2", 256), ("AVX", 256), ("SSE2", 128),
    ("ASIMD", 128), ("NEON", 128), ("SVE", 128), ("VSX", 128), ("VX", 128), ("LSX", 128),
]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if platform.system() == "Darwin":
        try:
            import subprocess

            out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"],
                                 capture_output=True, text=True, timeout=2)
            if out.stdout.strip():
                return out.stdout.strip()
        except Exception:
            pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _numpy_simd() -> tuple[list[str], list[str]]:
    """(extensions this CPU has, extensions numpy was built to dispatch to)."""
    mod = None
    for path in ("numpy._core._multiarray_umath", "numpy.core._multiarray_umath"):
        try:
            mod = __import__(path, fromlist=["__cpu_features__"])
            break
        except Exception:
            continue
    if mod is None:
        return [], []
    features = getattr(mod, "__cpu_features__", {}) or {}
    built = list(getattr(mod, "__cpu_baseline__", [])) + list(getattr(mod, "__cpu_dispatch__", []))
    present = [k for k, v in features.items() if v]
    return present, built


def memory_bytes() -> int | None:
    """The machine's physical memory in bytes, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _cgroup_cpu_limit() -> float | None:
    """CPUs' worth of time a container's cgroup allows this process (None: no limit found)."""
    try:  # cgroup v2: "max 100000" or "<quota> <period>"
        with open("/sys/fs/cgroup/cpu.max", encoding="ascii") as f:
            quota, period = f.read().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:  # cgroup v1
        with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", encoding="ascii") as f:
            quota = int(f.read())
        with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us", encoding="ascii") as f:
            period = int(f.read())
        return None if quota <= 0 or period <= 0 else quota / period
    except (OSError, ValueError):
        return None


def usable_cores() -> int:
    """Cores this process may really use: the CPUs it is allowed to run on (``sched_getaffinity``),
    capped by a container's CPU quota (cgroup ``cpu.max``), never less than 1.

    ``os.cpu_count()`` counts every core of the host, so on a 2-CPU container on a 64-core server
    it says 64, and 64 BLAS threads then fight over 2 CPUs.

    >>> usable_cores() >= 1
    True
    """
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    quota = _cgroup_cpu_limit()
    if quota is not None:
        n = min(n, max(1, int(quota + 0.5)))
    return max(1, n)


def machine_load() -> float | None:
    """The 1-minute load average per usable core (1.0: every core busy), or None where unknown.

    Above 1, processes are queueing for a core, and timings taken now are slower and more
    scattered than on a quiet machine.

    >>> load = machine_load()
    >>> load is None or load >= 0
    True
    """
    try:
        return os.getloadavg()[0] / usable_cores()
    except (AttributeError, OSError):
        return None


def runnable_processes() -> float | None:
    """Processes that want a core, this one included: the larger of the number runnable right now
    (the fourth field of ``/proc/loadavg``) and the 1-minute load average; None where unknown.

    More of them than :func:`usable_cores` means the machine is *oversubscribed*: someone waits
    for a core, and a BLAS that starts one thread per core waits for its own threads.

    >>> n = runnable_processes()
    >>> n is None or n >= 0
    True
    """
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            fields = f.read().split()
        return max(float(fields[0]), float(fields[3].split("/")[0]))
    except (OSError, ValueError, IndexError):
        try:
            return os.getloadavg()[0]
        except (AttributeError, OSError):
            return None


@functools.lru_cache(maxsize=1)
def cpu_info() -> dict:
    """Describe the CPU: model, cores, SIMD extensions numpy uses, memory.

    ``simd_used`` lists the extensions that this CPU supports *and* numpy was
    built to dispatch to at run time: the vector units your numpy code really
    runs on.  ``simd_width_bits`` is the widest of them and ``float32_lanes``
    how many float32 numbers one such instruction handles.
    """
    present, built = _numpy_simd()
    used = [f for f in present if f in built or f in ("SSE", "SSE2", "ASIMD", "NEON")]
    width = 0
    for feat, bits in _SIMD_BITS:
        if feat in present:
            width = max(width, bits)
    return {
        "model": _cpu_model(),
        "architecture": platform.machine(),
        "logical_cores": os.cpu_count(),
        "usable_cores": usable_cores(),
        "simd_extensions": present,
        "simd_used": used,
        "simd_width_bits": width or None,
        "float32_lanes": (width // 32) if width else None,
        "memory_bytes": memory_bytes(),
    }
