"""Lesson 03, part 4: kernel fusion — one pass over memory instead of many.

A chain of elementwise steps written as array expressions, such as
``relu(1.5 * x + 0.5) ** 2 ...``, runs *unfused*: one call (one kernel on a GPU)
per step, each reading its input from memory and writing a temporary back.  For
``k`` steps that is ``k`` launches and ``2 k n`` elements of traffic.  *Fused*, the
whole chain runs in one loop that reads ``x`` once and writes the result once:
one launch, ``2 n`` elements of traffic, whatever ``k``.  Elementwise steps do
about one flop per 8 bytes, so they are memory-bound and fusion's saving in
traffic is the saving in time.

Ways of running the chain here:

* ``"unfused"`` — numpy / CuPy, one call per step (what the expression does);
* ``"fused"`` — one compiled loop: numba ``@njit`` on the CPU, a CuPy
  ``ElementwiseKernel`` on the GPU, both generated from the same step table;
* ``"blocked"`` (CPU) — numpy, one step at a time but on cache-sized tiles, so each
  tile stays in cache between steps: main memory sees one pass, at the price of
  ``k`` calls per tile.

>>> rs = fusion_compare(n=4096, steps=3, repeat=2, modes=("unfused", "blocked"))
>>> [r["kernels"] for r in rs.records]
[3, 3]
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..arguments import Devices, Given, OneOf, Whole, arguments
from ..devices import cupy_module, get_xp, synchronize, to_numpy
from ..errors import BadInputError, UnsupportedDtypeError, whole_number
from ..limits import require_fits, validate_dtype
from ..results import ResultSet
from ..timing import benchmark

__all__ = ["FUSION_STEPS", "fusion_chain", "unfused", "fused", "blocked", "fusion_compare",
           "fusion_counts", "fused_kernel_source"]

#: (name, numpy/cupy step on an array, scalar expression in ``v`` for the compiled loops)
FUSION_STEPS: list[tuple[str, Any, str]] = [
    ("x * 1.5", lambda xp, t, out=None: xp.multiply(t, 1.5, out=out), "v * 1.5"),
    ("+ 0.5", lambda xp, t, out=None: xp.add(t, 0.5, out=out), "v + 0.5"),
    ("relu", lambda xp, t, out=None: xp.maximum(t, 0, out=out), "(v if v > 0 else v * 0)"),
    ("square", lambda xp, t, out=None: xp.multiply(t, t, out=out), "v * v"),
    ("- 0.25", lambda xp, t, out=None: xp.subtract(t, 0.25, out=out), "v - 0.25"),
    ("* 0.5", lambda xp, t, out=None: xp.multiply(t, 0.5, out=out), "v * 0.5"),
    ("+ 1", lambda xp, t, out=None: xp.add(t, 1.0, out=out), "v + 1.0"),
    ("relu", lambda xp, t, out=None: xp.maximum(t, 0, out=out), "(v if v > 0 else v * 0)"),
]

MAX_STEPS = len(FUSION_STEPS)


def validate_steps(steps: Any) -> int:
    """``steps`` as an ``int`` from 1 to :data:`MAX_STEPS`."""
    return whole_number("steps", steps, 1, MAX_STEPS, hint="the chain has that many steps")


def validate_cpu_floats(x: Any) -> np.ndarray:
    """``x`` as a numpy array of floats: :func:`blocked` updates each tile in place, on the CPU."""
    if type(x).__module__.startswith("cupy"):
        raise BadInputError("blocked() is the CPU's way of fusing; on the GPU use fused()")
    x = np.asarray(x)
    if x.dtype.kind != "f":
        raise UnsupportedDtypeError(f"blocked() updates each tile in place, so x must hold floats; got "
                                    f"{x.dtype.name}: convert with x.astype('float32')")
    return x


def fusion_chain(steps: int) -> list[str]:
    """Names of the first ``steps`` steps of the chain."""
    return [name for name, _, _ in FUSION_STEPS[:validate_steps(steps)]]


def unfused(x: Any, steps: int) -> Any:
    """Run the chain one array call per step (``steps`` kernels, a temporary each)."""
    k = validate_steps(steps)
    xp = get_xp("gpu") if type(x).__module__.startswith("cupy") else np
    t = x
    for _, f, _ in FUSION_STEPS[:k]:
        t = f(xp, t)
    return t


@arguments(steps=Given(validate_steps), tile=Whole(hint="elements per tile"), x=Given(validate_cpu_floats))
def blocked(x: np.ndarray, steps: int, tile: int = 2 ** 16, out: np.ndarray | None = None) -> np.ndarray:
    """CPU: the chain tile by tile, each tile going through every step while it is in cache."""
    out = np.empty_like(x) if out is None else out
    buf = np.empty(min(tile, x.size), dtype=x.dtype)
    for i in range(0, x.size, tile):
        j = min(i + tile, x.size)
        t = buf[: j - i]
        np.copyto(t, x[i:j])
        for _, f, _ in FUSION_STEPS[:steps]:
            f(np, t, out=t)  # in place: the tile never leaves the cache
        out[i:j] = t
    return out


def _c_expr(py: str) -> str:
    """The C version of a step's scalar expression (for the GPU kernel)."""
    if " if " in py:
        return "(v > (T)0 ? v : (T)0)"
    head, op, const = py.split(" ")
    return f"{head} {op} " + ("v" if const == "v" else f"(T){const}")


def fused_kernel_source(steps: int, target: str = "cpu") -> str:
    """The generated source of the fused loop: Python for numba (``"cpu"``) or CUDA C (``"gpu"``)."""
    k = validate_steps(steps)
    exprs = [e for _, _, e in FUSION_STEPS[:k]]
    if target == "gpu":
        return "T v = x;\n" + "".join(f"v = {_c_expr(e)};\n" for e in exprs) + "y = v;"
    body = "".join(f"        v = {e}\n" for e in exprs)
    return ("def fused_chain(x, out):\n    for i in range(x.size):\n        v = x[i]\n"
            f"{body}        out[i] = v\n")


@functools.cache
def _numba_fused(k: int):
    import numba

    ns: dict = {}
    exec(fused_kernel_source(k, "cpu"), ns)  # source generated above from FUSION_STEPS
    return numba.njit(cache=False, fastmath=False)(ns["fused_chain"])


@functools.cache
def _cupy_fused(k: int):
    cp = cupy_module()
    return cp.ElementwiseKernel("T x", "T y", fused_kernel_source(k, "gpu"), f"course_fused_chain_{k}")


def fused(x: Any, steps: int, out: Any = None) -> Any:
    """Run the whole chain in one compiled loop: one pass, one kernel."""
    k = validate_steps(steps)
    if type(x).__module__.startswith("cupy"):
        return _cupy_fused(k)(x) if out is None else _cupy_fused(k)(x, out)
    x = np.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        raise UnsupportedDtypeError(f"the CPU's fused loop (numba) handles float32 and float64, got "
                                    f"{x.dtype.name}; choose float32, or the 'blocked' mode")
    out = np.empty_like(x) if out is None else out
    _numba_fused(k)(x.reshape(-1), out.reshape(-1))
    return out


@arguments(steps=Given(validate_steps), n=Whole(lo=0), itemsize=Whole(hint="bytes per element, e.g. 4 for float32"),
           tile=Whole(), mode=OneOf("unfused", "fused", "blocked"))
def fusion_counts(n: int, steps: int, itemsize: int, mode: str, tile: int = 2 ** 16) -> dict:
    """Kernels (calls) launched and bytes moved through main memory by one run of the chain."""
    if mode == "unfused":
        return {"kernels": steps, "bytes": 2.0 * steps * n * itemsize}
    if mode == "fused":
        return {"kernels": 1, "bytes": 2.0 * n * itemsize}
    return {"kernels": steps * -(-n // tile), "bytes": 2.0 * n * itemsize}


def _runner(mode: str, x, k: int, out):
    if mode == "unfused":
        return lambda: unfused(x, k)
    if mode == "fused":
        return lambda: fused(x, k, out=out)
    return lambda: blocked(x, k, out=out)


def _require_fusion_run(n: int, dtype: Any, devices: list[str], modes: Sequence[str]) -> None:
    """Refuse unknown modes, a dtype that is not a float on a device, or a chain that does not fit there."""
    bad = [m for m in modes if m not in ("unfused", "fused", "blocked")]
    if bad or not modes:
        raise BadInputError(f"modes must be some of 'unfused', 'blocked', 'fused'; got {list(modes)!r}")
    for d in devices:
        dt = validate_dtype(dtype, d)
        if dt.kind != "f":
            raise UnsupportedDtypeError(f"dtype must be a floating type (float16, float32, float64): the chain "
                                        f"multiplies by 0.5 in place, got {dt.name}")
    for d in devices:
        dt = validate_dtype(dtype, d)
        require_fits(4 * n * dt.itemsize, d, what=f"the chain on {n:,} {dt.name}")


@arguments(n=Whole(), steps=Given(validate_steps), devices=Devices(), then=_require_fusion_run)
def fusion_compare(n: int = 2 ** 20, steps: int = 4, dtype: Any = "float32", devices: Sequence[Any] | None = None,
                   modes: Sequence[str] = ("unfused", "blocked", "fused"), repeat: int = 5,
                   budget_s: float | None = 0.3) -> ResultSet:
    """Time the chain unfused and fused on each device: a ``ResultSet`` ``"fusion"``.

    Each record: ``mode``, ``median_s``, ``kernels``, ``bytes`` (through main memory),
    ``gb_per_s`` (those bytes over the time) and ``max_abs_error`` against the unfused
    result (the oracle).  ``"blocked"`` runs on the CPU only.
    """
    k = steps
    rs = ResultSet("fusion", params={"n": n, "steps": k, "chain": fusion_chain(k), "dtype": str(dtype),
                                    "devices": devices, "modes": list(modes)})
    for d in devices:
        dt = validate_dtype(dtype, d)
        xp = get_xp(d)
        x = xp.asarray(np.linspace(-2, 2, n, dtype=dt))
        ref = to_numpy(unfused(x, k)).astype(np.float64)
        for mode in modes:
            if mode == "blocked" and d == "gpu":
                continue
            if mode == "fused" and d == "cpu" and dt not in (np.float32, np.float64):
                rs.notes.append(f"CPU fused loop skipped for {dt.name}: numba compiles float32/float64 only.")
                continue
            fn = _runner(mode, x, k, xp.empty_like(x))
            result = fn()  # also compiles the fused loop before timing
            synchronize(d)
            err = float(np.max(np.abs(to_numpy(result).astype(np.float64) - ref))) if n else 0.0
            t = benchmark(fn, device=d, warmup=1, repeat=repeat, budget_s=budget_s, name=f"{mode} k={k}")
            c = fusion_counts(n, k, dt.itemsize, mode)
            rs.add_timing(t, mode=mode, n=n, steps=k, dtype=dt.name, kernels=c["kernels"], bytes=c["bytes"],
                          gb_per_s=c["bytes"] / t.median / 1e9, max_abs_error=err)
    return rs
