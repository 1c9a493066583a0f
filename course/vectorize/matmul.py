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
==========  ===============================================================  ==========

numpy has float16 arrays but no half-precision BLAS: its float16 product runs its
own generic loop and is *slower* than float32 -- a measurement worth seeing.
numpy has no bfloat16 at all (:func:`course.validate_dtype` says so); PyTorch has it,
on the CPU and on the GPU, so :mod:`course.vectorize.timing` times PyTorch's product as one
more rung, ``torch``, when PyTorch is installed.  :func:`course.vectorize.timing.wrapper_overhead`
shows that :func:`matmul` (the course's wrapper) costs nothing measurable over calling
``numpy.matmul`` directly; the rungs are timed there too (:func:`~course.vectorize.timing.matmul_ladder`).

>>> a = np.arange(4.0).reshape(2, 2)
>>> matmul(a, a, rung="loop").tolist()
[[2.0, 3.0], [6.0, 11.0]]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..arguments import Dtype, Given, Seed, Whole, arguments
from ..devices import get_xp, normalize_device, xp_of
from ..errors import BadInputError
from ..limits import require_fits

__all__ = ["MATMUL_RUNGS", "MATMUL_LIMITS", "CPU_FLOAT16_MATMUL_MAX_N", "matmul", "matmul_loop", "matmul_dots",
           "matmul_blas", "random_matrices", "matmul_tolerance"]

MATMUL_RUNGS = ("loop", "dots", "blas", "gpu")
#: The largest n each slow rung accepts (the loop takes n³ Python steps).
MATMUL_LIMITS = {"loop": 96, "dots": 384}
#: The largest n the ladder times numpy's float16 product at on the CPU: numpy has no float16 BLAS and
#: runs its own loop at well under 1 GFLOP/s, so one product of n = 1,024 already takes many seconds.
CPU_FLOAT16_MATMUL_MAX_N = 512


def validate_product_shapes(a: Any, b: Any, rung: str) -> tuple[Any, Any]:
    """``(a, b)`` as arrays (nested lists become numpy arrays; the loop takes numpy arrays only); refused when
    they are not an (m, k) and a (k, n) matrix, or too big for a slow ``rung``."""
    if rung == "loop" or not hasattr(a, "ndim") or not hasattr(b, "ndim"):
        a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise BadInputError(f"matmul needs a (m, k) and a (k, n) matrix, got shapes {a.shape} and {b.shape}")
    limit = MATMUL_LIMITS[rung]
    if max(a.shape + b.shape) > limit:
        why, instead = (("the triple loop takes n³ Python steps", "rung='dots' or 'blas'") if rung == "loop"
                        else ("rung 'dots' makes n² calls", "rung='blas'"))
        raise BadInputError(f"{why}; shapes {a.shape}, {b.shape} are too big for it (at most {limit}). Use {instead}.")
    return a, b


def matmul_loop(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """SISD: three nested loops, one multiply-add per step (accumulated in float64)."""
    a, b = validate_product_shapes(a, b, "loop")
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
    a, b = validate_product_shapes(a, b, "dots")    # nested lists: as numpy arrays
    xp = xp_of(a)
    out = xp.empty((a.shape[0], b.shape[1]), dtype=xp.result_type(a, b))
    bt = xp.ascontiguousarray(b.T)  # each column of b as a contiguous row
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            out[i, j] = xp.dot(a[i], bt[j])
    return out


def matmul_blas(a: Any, b: Any, out: Any = None) -> Any:
    """The whole product in one library call: BLAS on the CPU, cuBLAS on the GPU."""
    if not all(isinstance(m, (list, tuple)) or getattr(m, "ndim", None) == 2 for m in (a, b)):
        raise BadInputError(f"matmul multiplies two matrices (2-D arrays), got {type(a).__name__} of shape "
                            f"{getattr(a, 'shape', '?')} and {type(b).__name__} of shape {getattr(b, 'shape', '?')}")
    return xp_of(a).matmul(a, b, out=out)


def matmul(a: Any, b: Any, rung: str = "blas", out: Any = None) -> Any:
    """``a @ b`` at the given rung (``loop``, ``dots``, ``blas``/``gpu``).

    >>> a = np.ones((3, 3), dtype=np.float32)
    >>> float(matmul(a, a, rung="dots")[0, 0])
    3.0
    """
    if not isinstance(rung, str) or rung not in MATMUL_RUNGS:
        raise BadInputError(f"rung must be one of {MATMUL_RUNGS}, got {rung!r:.80}"
                            + ("; PyTorch's product is timed by course.vectorize.timing" if rung == "torch" else ""))
    if rung == "blas" or rung == "gpu":
        return matmul_blas(a, b, out=out)
    if rung == "loop":
        return matmul_loop(a, b)
    return matmul_dots(a, b)


def require_float_matrices_fit(n: int, dtype: np.dtype, device: str) -> None:
    """Refuse a dtype that is not a float, or three n×n matrices (and the two float64 draws) that do not fit."""
    if dtype.kind != "f":
        raise BadInputError(f"the matrix ladder times float dtypes, got {dtype.name}")
    require_fits(2 * n * n * 8, "cpu", what=f"two {n}×{n} float64 random matrices")
    require_fits(3 * n * n * dtype.itemsize, device, what=f"three {n}×{n} {dtype.name} matrices")


@arguments(n=Whole(hint="the matrix size n (n×n matrices)"), device=Given(normalize_device),
           dtype=Dtype(device="device"), seed=Seed(), then=require_float_matrices_fit)
def random_matrices(n: int, dtype: Any = "float32", device: Any = "cpu", seed: int = 0) -> tuple[Any, Any, Any]:
    """Two random n×n matrices (values in [-1, 1), drawn in float64) and an output, on ``device``.

    ``dtype`` goes through :func:`course.validate_dtype`, which explains that numpy and CuPy have
    no bfloat16 (PyTorch's tensors are made by :func:`course.vectorize.timing.torch_matrices`).
    """
    xp = get_xp(device)
    a, b = (xp.asarray(seed.uniform(-1, 1, (n, n)).astype(dtype)) for _ in range(2))
    return a, b, xp.empty((n, n), dtype=dtype)


@arguments(n=Whole(hint="the matrix size n (n×n matrices)"))
def matmul_tolerance(dtype: Any, n: int) -> float:
    """Relative error allowed against a float64 product: rounding grows like sqrt(n)."""
    eps = {"float16": 2**-10, "bfloat16": 2**-7, "float32": 2**-23, "float64": 2**-52}.get(str(dtype), 1e-3)
    return 8 * eps * max(1.0, float(n) ** 0.5)
