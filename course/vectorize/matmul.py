"""Lesson 02: the matrix product at every rung, in GFLOP/s.

An n×n product is n² independent dot products of length n: ``2 n³`` floating-point
operations.  The rungs:

==========  ===============================================================  ==========
rung        what runs                                                        sizes
==========  ===============================================================  ==========
``loop``    three nested Python loops, one multiply-add per step (SISD)      n ≤ 96
``dots``    one vectorized dot product per output element (SIMD per dot)     n ≤ 384
``blas``    one call to the BLAS library numpy links (SIMD + all cores)      any
``gpu``     CuPy's matmul: cuBLAS, tensor cores for float16                  any
``torch``   PyTorch's matmul, the one place here with bfloat16 (optional)   any
==========  ===============================================================  ==========

numpy has float16 arrays but no half-precision BLAS: its float16 product runs its
own generic loop and is *slower* than float32 -- a measurement worth seeing.
numpy has no bfloat16 at all (:func:`course.validate_dtype` says so); PyTorch has it,
on the CPU and on the GPU, so the ``torch`` rung times it when PyTorch is
installed.  :func:`wrapper_overhead` shows that :func:`matmul` (the course's
wrapper) costs nothing measurable over calling ``numpy.matmul`` directly.

>>> a = np.arange(4.0).reshape(2, 2)
>>> matmul(a, a, rung="loop").tolist()
[[2.0, 3.0], [6.0, 11.0]]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from ..devices import get_xp, normalize_device, resolve_devices, synchronize, to_numpy, xp_of
from ..errors import BadInputError, UnsupportedDtypeError, whole_number
from ..hardware.machine import matmul_flops
from ..limits import require_fits, validate_dtype
from ..results import ResultSet
from ..timing import benchmark, interleaved_rounds
from ..torch_peer import benchmark_torch, torch_available, torch_cuda_available
from .simd import fastest_call_s

__all__ = ["MATMUL_RUNGS", "MATMUL_LIMITS", "CPU_FLOAT16_MATMUL_MAX_N", "matmul", "matmul_loop", "matmul_dots",
           "matmul_blas", "torch_available", "random_matrices", "time_matmul_rung", "matmul_ladder",
           "wrapper_overhead", "matmul_tolerance"]

MATMUL_RUNGS = ("loop", "dots", "blas", "gpu", "torch")
#: The largest n each slow rung accepts (the loop takes n³ Python steps).
MATMUL_LIMITS = {"loop": 96, "dots": 384}
#: The largest n the ladder times numpy's float16 product at on the CPU: numpy has no float16 BLAS and
#: runs its own loop at well under 1 GFLOP/s, so one product of n = 1,024 already takes many seconds.
CPU_FLOAT16_MATMUL_MAX_N = 512


def _check_square(a: Any, b: Any) -> None:
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise BadInputError(f"matmul needs a (m, k) and a (k, n) matrix, got shapes {a.shape} and {b.shape}")


def matmul_loop(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """SISD: three nested loops, one multiply-add per step (accumulated in float64)."""
    a, b = np.asarray(a), np.asarray(b)
    _check_square(a, b)
    if max(a.shape + b.shape) > MATMUL_LIMITS["loop"]:
        raise BadInputError(f"the triple loop takes n³ Python steps; shapes {a.shape}, {b.shape} are "
                            f"too big for it (at most {MATMUL_LIMITS['loop']}). Use rung='dots' or 'blas'.")
    A, B = a.tolist(), b.tolist()
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    out = [[0.0] * n for _ in range(m)]
    for i in range(m):
        for j in range(n):
            s = 0.0
            for p in range(k):
                s += A[i][p] * B[p][j]
            out[i][j] = s
    return np.asarray(out, dtype=np.float64).reshape(m, n).astype(np.result_type(a, b))


def matmul_dots(a: Any, b: Any) -> Any:
    """One vectorized dot product per output element: n² library calls of length n."""
    if not hasattr(a, "ndim") or not hasattr(b, "ndim"):  # nested lists: as numpy arrays
        a, b = np.asarray(a), np.asarray(b)
    _check_square(a, b)
    if max(a.shape + b.shape) > MATMUL_LIMITS["dots"]:
        raise BadInputError(f"rung 'dots' makes n² calls; shapes {a.shape}, {b.shape} are too big for it "
                            f"(at most {MATMUL_LIMITS['dots']}). Use rung='blas'.")
    xp = xp_of(a)
    out = xp.empty((a.shape[0], b.shape[1]), dtype=xp.result_type(a, b))
    bt = xp.ascontiguousarray(b.T)  # each column of b as a contiguous row
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            out[i, j] = xp.dot(a[i], bt[j])
    return out


def matmul_blas(a: Any, b: Any, out: Any = None) -> Any:
    """The whole product in one library call: BLAS on the CPU, cuBLAS on the GPU."""
    return xp_of(a).matmul(a, b, out=out)


def matmul(a: Any, b: Any, rung: str = "blas", out: Any = None) -> Any:
    """``a @ b`` at the given rung (``loop``, ``dots``, ``blas``/``gpu``, ``torch``).

    >>> a = np.ones((3, 3), dtype=np.float32)
    >>> float(matmul(a, a, rung="dots")[0, 0])
    3.0
    """
    if rung == "blas" or rung == "gpu":
        return matmul_blas(a, b, out=out)
    if rung == "loop":
        return matmul_loop(a, b)
    if rung == "dots":
        return matmul_dots(a, b)
    if rung == "torch":
        if not torch_available():
            raise UnsupportedDtypeError("rung 'torch' needs PyTorch (pip install torch), which is not installed "
                                        "here; use rung='blas'")
        import torch

        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            raise BadInputError(f"rung 'torch' multiplies PyTorch tensors, got {type(a).__name__} and "
                                f"{type(b).__name__}; make them with random_matrices(n, rung='torch') or "
                                "torch.as_tensor(a)")
        return torch.matmul(a, b, out=out)
    raise BadInputError(f"rung must be one of {MATMUL_RUNGS}, got {rung!r}")


def random_matrices(n: int, dtype: Any = "float32", device: Any = "cpu", rung: str = "blas",
                    seed: int = 0) -> tuple[Any, Any, Any]:
    """Two random n×n matrices (values in [-1, 1)) and an output, on the device the rung uses.

    For ``rung="torch"`` they are PyTorch tensors (the only way to get bfloat16);
    otherwise ``dtype`` goes through :func:`course.validate_dtype`, which explains that
    numpy and CuPy have no bfloat16.
    """
    n = whole_number("n", n, hint="the matrix size n (n×n matrices)")
    dev = normalize_device(device)
    # the two float64 draws, made on the CPU before any conversion, must fit first
    require_fits(2 * n * n * 8, "cpu", what=f"two {n}×{n} float64 random matrices")
    rng = np.random.default_rng(seed)

    def draw() -> tuple[np.ndarray, np.ndarray]:
        return rng.uniform(-1, 1, (n, n)), rng.uniform(-1, 1, (n, n))

    if rung == "torch":
        if not torch_available():
            raise UnsupportedDtypeError("the 'torch' rung needs PyTorch (pip install torch); "
                                        "numpy and CuPy have no bfloat16")
        import torch

        tdt = getattr(torch, str(dtype), None)
        if not isinstance(tdt, torch.dtype):
            raise UnsupportedDtypeError(f"PyTorch has no dtype {dtype!r}; try bfloat16, float16 or float32")
        tdev = "cuda" if dev == "gpu" else "cpu"
        if tdev == "cuda" and not torch_cuda_available():
            raise UnsupportedDtypeError("this PyTorch build sees no CUDA GPU; install a CUDA build of "
                                        "PyTorch or use device='cpu'")
        require_fits(3 * int(n) ** 2 * torch.tensor([], dtype=tdt).element_size(), dev, what="three matrices")
        a, b = (torch.as_tensor(m).to(device=tdev, dtype=tdt) for m in draw())
        return a, b, torch.empty((int(n), int(n)), dtype=tdt, device=tdev)
    dt = validate_dtype(dtype, dev)
    if dt.kind != "f":
        raise BadInputError(f"the matrix ladder times float dtypes, got {dt.name}")
    require_fits(3 * int(n) ** 2 * dt.itemsize, dev, what=f"three {n}×{n} {dt.name} matrices")
    xp = get_xp(dev)
    a64, b64 = draw()
    a, b = xp.asarray(a64.astype(dt)), xp.asarray(b64.astype(dt))
    return a, b, xp.empty((int(n), int(n)), dtype=dt)


def matmul_tolerance(dtype: Any, n: int) -> float:
    """Relative error allowed against a float64 product: rounding grows like sqrt(n)."""
    n = whole_number("n", n, hint="the matrix size n (n×n matrices)")
    eps = {"float16": 2**-10, "bfloat16": 2**-7, "float32": 2**-23, "float64": 2**-52}.get(str(dtype), 1e-3)
    return 8 * eps * max(1.0, float(n) ** 0.5)


def time_matmul_rung(rung: str, n: int, dtype: Any = "float32", device: Any = "cpu", repeat: int = 5,
                     budget_s: float | None = 0.5, check: bool = True) -> dict:
    """Time one rung at size n: a record (:meth:`course.timing.Timing.as_record`) with the rung, n,
    dtype, ``gflops`` and (with ``check``) ``rel_error`` against float64 and whether it ``agrees``."""
    if rung not in MATMUL_RUNGS:
        raise BadInputError(f"rung must be one of {MATMUL_RUNGS}, got {rung!r}")
    n = whole_number("n", n, hint="the matrix size n (n×n matrices)")
    dev = "gpu" if rung == "gpu" else normalize_device(device)
    if rung in MATMUL_LIMITS and n > MATMUL_LIMITS[rung]:
        raise BadInputError(f"rung {rung!r} is limited to n <= {MATMUL_LIMITS[rung]} (got n={n}): "
                            "it would take too long")
    a, b, out = random_matrices(n, dtype, dev, rung=rung)
    kw = {"out": out} if rung in ("blas", "gpu", "torch") else {}
    err = None
    if check:
        got = matmul(a, b, rung, **kw)
        if rung == "torch":
            got, a_np, b_np = (t.float().cpu().numpy() for t in (got, a, b))
        else:
            got, a_np, b_np = to_numpy(got), to_numpy(a), to_numpy(b)
        exact = a_np.astype(np.float64) @ b_np.astype(np.float64)
        err = float(np.max(np.abs(got - exact)) / max(np.max(np.abs(exact)), 1e-30))
    if rung == "torch":
        t = benchmark_torch(matmul, a, b, "torch", device=dev, warmup=2, repeat=repeat, budget_s=budget_s,
                            name="torch matmul", **kw)
    else:
        synchronize(dev)
        slow = rung in MATMUL_LIMITS
        t = benchmark(matmul, a, b, rung, device=dev, warmup=0 if slow else 2, repeat=2 if slow else repeat,
                      budget_s=budget_s, name=f"matmul {rung}", **kw)
    return t.as_record(rung=rung, n=int(n), dtype=str(dtype), gflops=matmul_flops(n) / t.median / 1e9,
                       rel_error=err, agrees=None if err is None else err <= matmul_tolerance(dtype, n))


def matmul_ladder(n: int = 64, dtypes: Sequence[str] = ("float32", "float16"), devices: Sequence[str] | None = None,
                  rungs: Sequence[str] | None = None, repeat: int = 5, budget_s: float = 0.4,
                  progress: Callable | None = None) -> ResultSet:
    """Every matmul rung that applies, for each dtype, at size n; GFLOP/s and error per record.

    Rungs too slow for n (see :data:`MATMUL_LIMITS`) are skipped, with a note; the
    ``torch`` rung runs only when PyTorch is installed; dtypes a rung cannot hold
    (bfloat16 in numpy) are skipped with the device's own error message as a note.  ``devices``
    defaults to the CPU plus the GPU when one answers, as every sweep.
    """
    n = whole_number("n", n, hint="the matrix size n (n×n matrices)")
    devs = resolve_devices(devices)
    rungs = list(rungs) if rungs is not None else (
        ["loop", "dots", "blas"] + (["gpu"] if "gpu" in devs else []) + (["torch"] if torch_available() else []))
    rs = ResultSet("vectorize_matmul", params={"n": int(n), "dtypes": list(dtypes), "rungs": rungs})
    jobs = [(r, d, dt) for r in rungs for d in (devs if r == "torch" else ["gpu" if r == "gpu" else "cpu"])
            for dt in dtypes]
    it = progress(jobs, total=len(jobs), desc="matmul ladder") if progress else jobs
    for rung, dev, dt in it:
        if rung in MATMUL_LIMITS and n > MATMUL_LIMITS[rung]:
            note = f"{rung}: skipped at n={n} (limit {MATMUL_LIMITS[rung]})"
            if note not in rs.notes:
                rs.notes.append(note)
            continue
        if dev == "cpu" and rung != "torch" and str(dt) == "float16" and n > CPU_FLOAT16_MATMUL_MAX_N:
            note = (f"{rung} float16: skipped at n={n} (numpy emulates float16 on the CPU, without BLAS: "
                    f"at most n = {CPU_FLOAT16_MATMUL_MAX_N} here)")
            if note not in rs.notes:
                rs.notes.append(note)
            continue
        try:
            r = time_matmul_rung(rung, n, dt, dev, repeat=repeat, budget_s=budget_s)
        except UnsupportedDtypeError as exc:
            note = f"{dt} on {dev}" + (" with PyTorch" if rung == "torch" else "") + f": {exc}"
            if note not in rs.notes:
                rs.notes.append(note)
            continue
        rs.add(**r)
    return rs


def wrapper_overhead(n: int = 256, dtype: Any = "float32", rounds: int = 30) -> dict:
    """The course wrapper :func:`matmul` against ``numpy.matmul`` itself, calls interleaved.

    Alternating the two calls (ABBA order) puts both under the same machine conditions;
    ``overhead`` compares the median times, ``overhead_best`` the fastest ones, and
    ``added_s`` is the wrapper's own cost per call, measured on 1×1 matrices where
    the product itself costs almost nothing (``added_fraction`` = its share of the
    fastest direct call at size n, ``direct_best_s``): on a busy machine the last is the
    steadiest figure.

    >>> r = wrapper_overhead(n=32, rounds=5)       # a timing, so only its shape is shown here
    >>> r["n"], r["rounds"], r["direct_s"] > 0
    (32, 5, True)
    """
    rounds = whole_number("rounds", rounds, hi=10_000, hint="pairs of calls to time, e.g. 30")
    a, b, out = random_matrices(n, dtype, "cpu")
    t = interleaved_rounds({"direct": partial(np.matmul, a, b, out=out), "wrapper": partial(matmul, a, b, out=out)},
                           warmup=1, repeat=rounds, alternate=True)   # ABBA: order effects cancel
    d, w = t["direct"], t["wrapper"]
    # The wrapper's own cost, seen directly: both calls on 1×1 matrices, best of many.
    a1, b1, o1 = random_matrices(1, dtype, "cpu")
    tiny_d = fastest_call_s(lambda: np.matmul(a1, b1, out=o1), calls=600, per_sample=20)
    tiny_w = fastest_call_s(lambda: matmul(a1, b1, out=o1), calls=600, per_sample=20)
    added = max(tiny_w - tiny_d, 0.0)
    return {"n": int(n), "dtype": str(dtype), "rounds": int(rounds),
            "direct_s": d.median, "wrapper_s": w.median, "direct_best_s": d.min,
            "overhead": w.median / d.median - 1.0, "overhead_best": w.min / d.min - 1.0,
            "added_s": added, "added_fraction": added / d.min,
            "direct_gflops": matmul_flops(n) / d.median / 1e9, "wrapper_gflops": matmul_flops(n) / w.median / 1e9,
            "noisy": d.noisy or w.noisy}
