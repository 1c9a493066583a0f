"""Where and with what a measurement was made: the provenance every result set carries.

:func:`provenance` names the date, the CPU, every GPU that answers, the Python and library versions and,
for a GPU run, what else its numbers depend on (:func:`gpu_environment`: the driver, clocks and power
limits, cuBLAS and cuDNN versions, PyTorch's TF32 switches, the environment variables that change a GPU
run), and the checkout's commit (:func:`git_commit`).  Reading it never stops a run and never imports a
library that is not imported already.  :class:`course.results.ResultSet` fills it in when it is made.

>>> {"date", "cpu", "gpus", "libraries"} <= set(provenance(gpu=False))
True
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from .arguments import Given, OneOf, Optional, arguments
from .cpu import cpu_info
from .devices import gpu_info
from .errors import BadInputError, validate_function
from .torch_peer import torch_tf32_flags

__all__ = ["provenance", "gpu_environment", "git_commit"]

_LIBRARIES = ("numpy", "scipy", "matplotlib", "ipywidgets", "numba", "numba-cuda", "cupy",
              "cupy-cuda12x", "cupy-cuda13x", "torch", "jax", "course")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _validate_mapping(value: object, what: str) -> Mapping:
    if not isinstance(value, Mapping):
        raise BadInputError(f"{what} must be a mapping (a dict), got {type(value).__name__}")
    return value


def _validate_folder(value: object) -> Path:
    if not isinstance(value, (str, os.PathLike)):
        raise BadInputError(f"root must be a folder's path (a str or Path), got {type(value).__name__}")
    return Path(value)


@arguments(gpu=Optional(OneOf(True, False)))
def provenance(gpu: bool | None = None) -> dict:
    """Where and with what a measurement is made: date, CPU, GPUs, versions.

    ``gpu=None`` describes the GPUs that answer now; ``False`` leaves them out.
    """
    cpu = cpu_info()
    gpus = gpu_info() if (gpu is None or gpu) else []
    libs = {name: v for name in _LIBRARIES if (v := _version(name))}
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "cpu": {k: cpu[k] for k in ("model", "architecture", "logical_cores", "simd_width_bits",
                                    "memory_bytes")} | {"simd_used": cpu["simd_used"]},
        "gpus": [{k: g.get(k) for k in ("name", "compute_capability", "multiprocessors",
                                         "memory_bytes", "driver_version", "runtime_version",
                                         "memory_bandwidth_bytes_per_s")} for g in gpus],
        "libraries": libs,
    } | ({"gpu_environment": gpu_environment()} if gpus else {}) | ({"git": g} if (g := _git_once()) else {})


@functools.lru_cache(maxsize=1)
def _git_once() -> dict:
    """The checkout's commit, read once per process (every result set asks)."""
    return git_commit()


def _run_quietly(cmd: list[str]) -> str | None:
    """``cmd``'s output, or None if it is not installed or fails (provenance never stops a run)."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


#: nvidia-smi's fields read (never set) for each GPU: clocks now and at most, power limits, persistence.
_SMI_FIELDS = ("driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem", "power.limit",
               "power.default_limit", "persistence_mode")
#: Environment variables that change what a GPU run computes or how fast.
_GPU_ENV = ("CUPY_ACCELERATORS", "CUPY_TF32", "NVIDIA_TF32_OVERRIDE", "CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING")


def _attempt(fn: Callable[[], Any]) -> Any:
    """``fn()``, or None where it raises: a reading provenance may lack, never an error that stops a run."""
    try:
        return fn()
    except Exception:
        return None


@arguments(run=Given(validate_function, what="run"), env=Optional(Given(_validate_mapping, what="env")),
           modules=Optional(Given(_validate_mapping, what="modules")))
def gpu_environment(run: Callable[[list[str]], str | None] = _run_quietly, env: Mapping[str, str] | None = None,
                    modules: Mapping[str, Any] | None = None) -> dict:
    """What a GPU record also depends on, each item as read and left out where nothing says.

    The driver release and each GPU's clocks and power limits (``nvidia-smi``, read only); cuBLAS's
    and cuDNN's versions as CuPy and PyTorch report them; PyTorch's process-wide TF32 switches
    (:func:`course.torch_peer.torch_tf32_flags`); the environment variables of :data:`_GPU_ENV`.  Only
    libraries already imported (``modules``, default ``sys.modules``) are asked: describing a run never
    imports PyTorch (that costs seconds).  PyTorch imported later is read when the results are saved
    (:meth:`course.results.ResultSet.to_dict`).  Each PyTorch record's own ``tf32`` field, which says the
    setting it ran under, is the authoritative one.  ``run`` and ``env`` are there for tests.
    """
    env = os.environ if env is None else env
    mods = sys.modules if modules is None else modules
    out: dict[str, Any] = {}
    smi = run(["nvidia-smi", f"--query-gpu={','.join(_SMI_FIELDS)}", "--format=csv,noheader,nounits"])
    rows = [[v.strip() for v in line.split(",")] for line in (smi or "").splitlines() if line.strip()]
    rows = [dict(zip(_SMI_FIELDS, r)) for r in rows if len(r) == len(_SMI_FIELDS)]
    if rows:
        out["driver_release"] = rows[0]["driver_version"]
        out["clocks_and_power"] = [{k: v for k, v in r.items() if k != "driver_version"} for r in rows]
    cp, torch = mods.get("cupy"), mods.get("torch")
    if cp is not None:
        v = _attempt(lambda: cp.cuda.cublas.getVersion(cp.cuda.device.get_cublas_handle()))
        out |= {"cublas_version": v} if v is not None else {}
        v = _attempt(lambda: cp.cuda.cudnn.getVersion())
        out |= {"cudnn_version_cupy": v} if v is not None else {}
    if torch is not None:
        v = _attempt(lambda: torch.backends.cudnn.version())
        out |= {"cudnn_version_torch": v} if v is not None else {}
        tf32 = _attempt(lambda: torch_tf32_flags(torch))
        out |= {"tf32": tf32, "tf32_read": "when the result set was made"} if tf32 else {}
    set_env = {k: env[k] for k in _GPU_ENV if k in env}
    out |= {"environment": set_env} if set_env else {}
    return out


@arguments(run=Given(validate_function, what="run"), root=Optional(Given(_validate_folder)))
def git_commit(run: Callable[[list[str]], str | None] = _run_quietly, root: Path | None = None) -> dict:
    """``{"commit", "dirty"}`` of the course's checkout, or ``{}`` outside one (an installed wheel)."""
    root = Path(__file__).resolve().parent.parent if root is None else root
    if not (root / ".git").exists():
        return {}
    commit = run(["git", "-C", str(root), "rev-parse", "HEAD"])
    if not commit:
        return {}
    status = run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"])
    return {"commit": commit} | ({"dirty": bool(status)} if status is not None else {})
