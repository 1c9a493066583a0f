"""Lesson 02: the same elementwise operation at every rung of a ladder of parallelism.

An activation such as ReLU applies one rule to every element independently: the
textbook "embarrassingly parallel" job.  This module computes it at each rung of
Flynn's taxonomy and checks that every rung gives numpy's answer:

=============  ==========================================================  =========
rung           what runs                                                   Flynn
=============  ==========================================================  =========
``loop``       a pure-Python loop, one element per step                    SISD
``lanes``      one numpy call per W-element slice: call overhead / W       (none)
``numpy_new``  one numpy call that allocates a new output every time       SIMD
``numpy``      one numpy call writing into a preallocated ``out=``         SIMD
``threads``    chunks on several CPU cores, numpy ufuncs with ``out=``     MIMD
``gpu``        the same numpy-style code on CuPy arrays                    SIMT
``gpu_fused``  one hand-written CUDA kernel (:mod:`course.vectorize.gpu`)  SIMT
=============  ==========================================================  =========

Such operations do almost no arithmetic per byte, so the physical limit is the
memory: reading ``x`` and writing ``y`` once is ``2 × n × itemsize`` bytes.
:func:`effective_bandwidth` divides that by the time, and :func:`ladder` compares
it with the copy bandwidth measured by :func:`course.hardware.copy_bandwidth`.
The matrix-product ladder is in :mod:`course.vectorize.matmul`.

>>> import numpy as np
>>> x = np.array([-1.0, 0.5, 2.0], dtype=np.float32)
>>> elementwise("relu", x, rung="loop").tolist()
[0.0, 0.5, 2.0]
>>> elementwise("relu", x, rung="lanes", lanes=2).tolist()
[0.0, 0.5, 2.0]
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ..arguments import Dtype, Given, Optional, Real, Whole, arguments
from ..cpu import cpu_info
from ..devices import array_device, get_xp, normalize_device, xp_of
from ..errors import BadInputError, whole_number
from ..limits import require_fits

__all__ = ["OPS", "RUNGS", "CPU_RUNGS", "GPU_RUNGS", "FLOAT_DTYPES", "RUNG_INFO", "elementwise",
           "loop_elementwise", "lanes_elementwise", "lane_trace", "numpy_elementwise", "threaded_elementwise",
           "lane_steps", "bytes_moved", "effective_bandwidth", "tolerance", "simd_summary",
           "compiled_relu", "random_input", "default_workers"]

#: The elementwise operations: ReLU, the logistic sigmoid, and ReLU(a·x + b) in one pass.
OPS = ("relu", "sigmoid", "affine_relu")
CPU_RUNGS = ("loop", "lanes", "numpy_new", "numpy", "threads")
GPU_RUNGS = ("gpu", "gpu_fused")
RUNGS = CPU_RUNGS + GPU_RUNGS
FLOAT_DTYPES = ("float16", "float32", "float64")

#: For each rung: a label for plots, its class in Flynn's taxonomy, and the device it runs on.
RUNG_INFO = {
    "loop": ("Python loop", "SISD", "cpu"),
    "lanes": ("W elements per numpy call", "call overhead / W", "cpu"),
    "numpy_new": ("numpy, new array", "SIMD", "cpu"),
    "numpy": ("numpy, out=", "SIMD", "cpu"),
    "threads": ("threads, out=", "MIMD (+SIMD)", "cpu"),
    "gpu": ("CuPy, out=", "SIMT", "gpu"),
    "gpu_fused": ("fused CUDA kernel", "SIMT", "gpu"),
}

DEFAULT_A, DEFAULT_B = 2.0, -0.5  # affine_relu: max(a*x + b, 0)
#: The most steps :func:`lane_trace` lists (a trace is drawn; a longer one would only fill memory).
LANE_TRACE_MAX_STEPS = 100_000
#: The most threads :func:`threaded_elementwise` starts (more than the cores only adds overhead).
MAX_WORKERS = 1024


# ----------------------------------------------------------------- validation

def validate_op(op: Any) -> str:
    """``op`` if it is one of :data:`OPS`."""
    if not isinstance(op, str) or op not in OPS:      # an array would be compared element by element
        raise BadInputError(f"op must be one of {OPS}, got {op!r:.80}")
    return op


def validate_floats(x: Any, cpu: bool = False) -> Any:
    """``x`` if its dtype is float16, float32 or float64; with ``cpu=True`` as a numpy array (a list too)."""
    x = np.asarray(x) if cpu else x
    name = str(getattr(x, "dtype", type(x).__name__))
    if name not in FLOAT_DTYPES:
        raise BadInputError(f"elementwise ops take a float16/float32/float64 array, got dtype {name}; "
                            "convert it first, e.g. x.astype('float32')")
    return x


def validate_lanes(lanes: Any) -> int:
    """``lanes`` as an ``int`` >= 1 (the elements of one step of the ``lanes`` rung)."""
    return whole_number("lanes", lanes, hint=f"try {cpu_info()['float32_lanes'] or 8}, the float32 lanes of this "
                                             "CPU's widest SIMD register")


def validate_out(out: Any, x: Any) -> Any:
    """``out`` (or None) if it has ``x``'s shape, dtype and device."""
    if out is None:
        return None
    if getattr(out, "shape", None) != x.shape or getattr(out, "dtype", None) != x.dtype:
        raise BadInputError(f"out must have x's shape {x.shape} and dtype {x.dtype}, got shape "
                            f"{getattr(out, 'shape', None)} dtype {getattr(out, 'dtype', None)}")
    if array_device(out) != array_device(x):
        raise BadInputError(f"out is on the {array_device(out).upper()} but x is on the "
                            f"{array_device(x).upper()}: move one of them with course.to_device")
    return out


def validate_elementwise(op: Any, x: Any, out: Any = None, cpu: bool = False) -> Any:
    """``x``, checked for ``op``: :func:`validate_op`, :func:`validate_floats` (``cpu``: as a numpy array),
    :func:`validate_out`.  One call, so that the rungs timed in a loop pay for one."""
    validate_op(op)
    x = validate_floats(x, cpu)
    validate_out(out, x)
    return x


def require_rung(op: Any, x: Any, rung: Any, lanes: Any, workers: Any, out: Any) -> None:
    """Refuse an unknown ``op`` or ``rung``, a bad ``lanes`` or ``workers`` (checked whatever the rung, so a
    typo never goes unnoticed), an ``x`` on another device than the rung runs on, or a bad ``out``."""
    validate_op(op)
    if rung not in RUNGS:
        raise BadInputError(f"rung must be one of {RUNGS}, got {rung!r}")
    validate_lanes(lanes)
    if workers is not None:
        whole_number("workers", workers, hi=MAX_WORKERS, hint="the threads of the 'threads' rung")
    want = RUNG_INFO[rung][2]
    if array_device(x) != want:
        raise BadInputError(f"rung {rung!r} runs on the {want.upper()}, but x is on the "
                            f"{array_device(x).upper()}: use course.to_device(x, {want!r}) first")
    validate_out(out, x)


# ----------------------------------------------------------------- rung: SISD

def _scalar_rule(op: str, a: float, b: float) -> Callable[[float], float]:
    if op == "relu":
        return lambda v: 0.0 if v <= 0.0 else v  # NaN stays NaN, as with numpy's maximum

    if op == "sigmoid":
        def sig(v: float) -> float:
            if v >= 0.0:
                return 1.0 / (1.0 + math.exp(-v))
            e = math.exp(v)  # never overflows for v < 0
            return e / (1.0 + e)
        return sig

    def aff(v: float) -> float:
        z = a * v + b
        return 0.0 if z <= 0.0 else z
    return aff


def loop_elementwise(op: str, x: np.ndarray, a: float = DEFAULT_A, b: float = DEFAULT_B) -> np.ndarray:
    """SISD: one element per step, in a pure-Python loop.  The reference every rung must match.

    >>> loop_elementwise("sigmoid", np.zeros(2)).tolist()
    [0.5, 0.5]
    """
    x = validate_elementwise(op, x, cpu=True)
    rule = _scalar_rule(op, a, b)
    values = x.ravel().tolist()
    out = [0.0] * len(values)
    for i in range(len(values)):  # one instruction stream, one data element at a time
        out[i] = rule(values[i])
    return np.asarray(out, dtype=np.float64).astype(x.dtype, copy=False).reshape(x.shape)


# ----------------------------------------------------------------- rung: SIMD (numpy / CuPy)

def _kernel(op: str, xp: Any, dtype: Any, a: float = DEFAULT_A, b: float = DEFAULT_B) -> Callable:
    """``kernel(x, out) -> out`` for ``op``, with no checks: the inner step every rung shares."""
    t = np.dtype(dtype).type
    zero, one, a_, b_ = t(0), t(1), t(a), t(b)
    maximum = xp.maximum
    if op == "relu":
        return lambda x, out: maximum(x, zero, out=out)
    if op == "affine_relu":  # three passes over memory: the GPU's fused kernel needs one
        def affine(x, out):
            xp.multiply(x, a_, out=out)
            xp.add(out, b_, out=out)
            return maximum(out, zero, out=out)
        return affine

    def sigmoid(x, out):  # 1 / (1 + exp(-x)) in place; exp overflows to inf -> 1/inf = 0, as it should
        xp.negative(x, out=out)
        xp.exp(out, out=out)
        xp.add(out, one, out=out)
        return xp.reciprocal(out, out=out)
    return sigmoid


def numpy_elementwise(op: str, x: Any, out: Any = None, a: float = DEFAULT_A,
                      b: float = DEFAULT_B) -> Any:
    """SIMD: the whole array in one library call (numpy on the CPU, CuPy on the GPU).

    With ``out=`` the result goes into an existing array and no memory is allocated:
    the call then only streams ``x`` in and ``y`` out.  Without it, each call asks
    for a fresh array, whose pages the operating system must find and zero first.

    >>> numpy_elementwise("affine_relu", np.array([0.0, 1.0])).tolist()
    [0.0, 1.5]
    """
    x = validate_elementwise(op, x, out)
    xp = xp_of(x)
    if out is None:
        out = xp.empty_like(x)
    with np.errstate(over="ignore"):
        return _kernel(op, xp, x.dtype, a, b)(x, out)


# ----------------------------------------------------------------- rung: W lanes per step

@arguments(lanes=Given(validate_lanes), n=Whole(lo=0, hint="the number of elements"))
def lane_steps(n: int, lanes: int) -> int:
    """Steps needed for ``n`` elements at ``lanes`` per step: ``ceil(n / lanes)``.

    >>> lane_steps(10, 4)
    3
    """
    return -(-n // lanes)


def require_short_trace(n: int, lanes: int) -> None:
    """Refuse a trace of more than :data:`LANE_TRACE_MAX_STEPS` steps."""
    if lane_steps(n, lanes) > LANE_TRACE_MAX_STEPS:
        raise BadInputError(f"lane_trace(n={n}, lanes={lanes}) would list {lane_steps(n, lanes):,} steps; a trace "
                            f"is for a picture, so n / lanes may be at most {LANE_TRACE_MAX_STEPS:,} (use lane_steps "
                            "for the count)")


@arguments(lanes=Given(validate_lanes), n=Whole(lo=0, hint="the number of elements"), then=require_short_trace)
def lane_trace(n: int, lanes: int) -> list[tuple[int, int]]:
    """The ``(start, stop)`` slice each step of the ``lanes`` rung handles: the picture's steps.

    >>> lane_trace(10, 4)
    [(0, 4), (4, 8), (8, 10)]
    """
    return [(s, min(s + lanes, n)) for s in range(0, n, lanes)]


@arguments(op=Given(validate_op), x=Given(validate_floats, cpu=True), lanes=Given(validate_lanes),
           out=Given(validate_out, earlier=("x",)))
def lanes_elementwise(op: str, x: np.ndarray, lanes: int = 8, out: np.ndarray | None = None,
                      a: float = DEFAULT_A, b: float = DEFAULT_B) -> np.ndarray:
    """One numpy call per slice of ``lanes`` elements: the picture of SIMD, not SIMD itself.

    Each step applies the rule to a slice of ``lanes`` elements, as one vector
    instruction applies it to the lanes of a register.  What the time measures is the
    Python and numpy overhead of a call, paid once per step, so the steps -- and
    roughly the time -- fall by a factor of ``lanes``; inside each call numpy runs
    its own compiled (and vectorised) loop whatever ``lanes`` is.  The last step may
    be partly empty when ``lanes`` does not divide ``n``.

    >>> lanes_elementwise("relu", np.array([-1.0, 2.0, -3.0]), lanes=2).tolist()
    [0.0, 2.0, 0.0]
    """
    flat = x.reshape(-1)
    res = np.empty_like(flat) if out is None else out.reshape(-1)
    step = _kernel(op, np, x.dtype, a, b)
    with np.errstate(over="ignore"):
        for start in range(0, flat.size, lanes):  # one step = one "vector instruction"
            step(flat[start:start + lanes], res[start:start + lanes])
    return res.reshape(x.shape)


# ----------------------------------------------------------------- rung: MIMD (threads)

_POOLS: dict[int, ThreadPoolExecutor] = {}


def _pool(workers: int) -> ThreadPoolExecutor:
    if workers not in _POOLS:
        _POOLS[workers] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="course-simd")
    return _POOLS[workers]


def default_workers() -> int:
    """The cores this process may use (``os.sched_getaffinity``), at least 1."""
    return int(cpu_info().get("usable_cores") or os.cpu_count() or 1)


@arguments(op=Given(validate_op), x=Given(validate_floats, cpu=True), out=Given(validate_out, earlier=("x",)),
           workers=Optional(Whole(hi=MAX_WORKERS, hint="the threads to start, at most default_workers() are useful")),
           chunk=Whole(hint="the elements each thread handles at a time, e.g. 16384"))
def threaded_elementwise(op: str, x: np.ndarray, out: np.ndarray | None = None,
                         workers: int | None = None, chunk: int = 2**14,
                         a: float = DEFAULT_A, b: float = DEFAULT_B) -> np.ndarray:
    """MIMD: several CPU threads, each running numpy's SIMD loop on its own chunks.

    numpy releases Python's global interpreter lock inside a ufunc's loop, so the
    threads really run at once, one per core.  Chunks of ``chunk`` elements stay in
    the core's cache, which also lets the three passes of ``affine_relu`` reuse
    cached data.  A memory-bound op gains little from more cores once one core
    already saturates the memory bus; a compute-bound one (``sigmoid``) gains more.

    >>> threaded_elementwise("relu", np.array([-2.0, 3.0]), workers=2).tolist()
    [0.0, 3.0]
    """
    workers = workers or default_workers()
    flat = x.reshape(-1)
    res = np.empty_like(flat) if out is None else out.reshape(-1)
    step = _kernel(op, np, x.dtype, a, b)

    def work(lo: int, hi: int) -> None:  # one worker: its own contiguous part, chunk by chunk
        with np.errstate(over="ignore"):
            for s in range(lo, hi, chunk):
                step(flat[s:min(s + chunk, hi)], res[s:min(s + chunk, hi)])

    parts = min(workers, -(-flat.size // chunk))
    if parts <= 1:
        work(0, flat.size)
        return res.reshape(x.shape)
    bounds = np.linspace(0, flat.size, parts + 1).astype(int)
    futures = [_pool(workers).submit(work, int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:])]
    for f in futures:
        f.result()  # re-raises a worker's exception here
    return res.reshape(x.shape)


# ----------------------------------------------------------------- compiled: at the copy limit

@functools.cache
def _relu_kernel():
    from numba import njit, prange  # imported on first use: numba takes a moment to load

    @njit(parallel=True, cache=True)
    def relu(x, out):
        for i in prange(x.shape[0]):  # one comparison per element, split across the cores
            v = x[i]
            out[i] = 0 if v <= 0 else v   # NaN stays NaN, as with numpy's maximum
    return relu


@arguments(x=Given(validate_floats, cpu=True), out=Given(validate_out, earlier=("x",)), threads=Optional(Whole()))
def compiled_relu(x: np.ndarray, out: np.ndarray | None = None, threads: int | None = None) -> np.ndarray:
    """ReLU as one compiled loop over all cores: as fast as copying the array.

    numpy 2's ``maximum(x, 0)`` handles a scalar operand in a loop that is not
    vectorized; a loop compiled for this CPU (numba) is turned into SIMD instructions
    and run on every core with ``prange``, like the STREAM copy of :mod:`course.memory_bandwidth`,
    so it reads ``x`` and writes ``out`` at the memory's speed.

    >>> compiled_relu(np.array([-1.0, 2.0], dtype=np.float32)).tolist()
    [0.0, 2.0]
    """
    import numba

    res = np.empty_like(x) if out is None else out
    workers = threads or default_workers()
    before = numba.get_num_threads()
    numba.set_num_threads(max(1, min(workers, numba.config.NUMBA_NUM_THREADS)))
    try:
        _relu_kernel()(x.reshape(-1), res.reshape(-1))
    finally:
        numba.set_num_threads(before)
    return res


# ----------------------------------------------------------------- one entry point

def elementwise(op: str, x: Any, rung: str = "numpy", *, lanes: int = 8, out: Any = None,
                workers: int | None = None, a: float = DEFAULT_A, b: float = DEFAULT_B) -> Any:
    """Apply ``op`` to ``x`` at the given rung of the ladder (see the module's table).

    CPU rungs take a numpy array; ``"gpu"`` and ``"gpu_fused"`` take a CuPy array
    (move it with :func:`course.to_device` first: transfers are explicit).

    >>> elementwise("relu", np.array([-1.0, 1.0]), rung="threads").tolist()
    [0.0, 1.0]
    """
    require_rung(op, x, rung, lanes, workers, out)
    if rung == "loop":
        res = loop_elementwise(op, x, a=a, b=b)
        if out is None:
            return res
        out[...] = res
        return out
    if rung == "lanes":
        return lanes_elementwise(op, x, lanes=lanes, out=out, a=a, b=b)
    if rung == "threads":
        return threaded_elementwise(op, x, out=out, workers=workers, a=a, b=b)
    if rung == "gpu_fused":
        from .gpu import fused_elementwise

        return fused_elementwise(op, x, out=out, a=a, b=b)
    if rung == "numpy_new":
        return numpy_elementwise(op, x, a=a, b=b)
    return numpy_elementwise(op, x, out=out, a=a, b=b)  # "numpy" and "gpu"


# ----------------------------------------------------------------- bandwidth and checks

@arguments(n=Whole(lo=0, hint="the number of elements"), dtype=Dtype())
def bytes_moved(n: int, dtype: Any) -> int:
    """The least memory traffic of an elementwise op: read ``n`` values and write ``n``.

    >>> bytes_moved(1000, "float32")
    8000
    """
    return 2 * n * dtype.itemsize


@arguments(seconds=Real(above=0, hint="the time of one call, in seconds"))
def effective_bandwidth(seconds: float, n: int, dtype: Any) -> float:
    """Useful bytes per second: :func:`bytes_moved` divided by the time of one call."""
    return bytes_moved(n, dtype) / seconds


@arguments(dtype=Dtype())
def tolerance(dtype: Any) -> dict:
    """``rtol``/``atol`` for comparing two rungs in ``dtype`` (rounding differs by pass count)."""
    name = np.dtype(dtype).name
    return {"float16": {"rtol": 1e-2, "atol": 2e-3}, "float32": {"rtol": 1e-5, "atol": 1e-6},
            "float64": {"rtol": 1e-12, "atol": 1e-14}}.get(name, {"rtol": 0, "atol": 0})


def simd_summary() -> str:
    """One line: the SIMD extensions numpy dispatches to on this CPU, and the lane count."""
    c = cpu_info()
    used = ", ".join(c["simd_used"]) or "none reported"
    lanes = c["float32_lanes"]
    return (f"{c['model']}: numpy dispatches to {used}; widest register {c['simd_width_bits']} bits "
            f"= {lanes} float32 lanes per instruction" if lanes else f"{c['model']}: numpy uses {used}")


def require_float_input_fits(n: int, dtype: np.dtype, device: str) -> None:
    """Refuse a dtype that is not a float, or ``n`` values (input, output, check) that do not fit on ``device``."""
    if dtype.name not in FLOAT_DTYPES:
        raise BadInputError(f"elementwise ops need a float dtype ({', '.join(FLOAT_DTYPES)}), got {dtype.name}")
    require_fits(3 * n * dtype.itemsize, device, what=f"{n:,} {dtype.name} values (input, output, check)")


@arguments(n=Whole(lo=0, hint="the size n: how many values to draw"), device=Given(normalize_device),
           dtype=Dtype(device="device"), then=require_float_input_fits)
def random_input(n: int, dtype: Any = "float32", device: Any = "cpu", seed: int = 0) -> Any:
    """``n`` standard-normal values (half of them negative) on ``device``."""
    x = np.random.default_rng(seed).standard_normal(n).astype(dtype)
    return x if device == "cpu" else get_xp(device).asarray(x)

