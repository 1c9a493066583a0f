"""The library peer of each GPU rung: cuBLAS at the same precision, with nothing left to a default.

``cublasGemmEx`` through the course's own small ``ctypes`` binding (on the ``libcublas`` CuPy loaded,
:func:`course.capture.cublas_library_path`), so the compute type is said in every call rather than read
from CuPy's ``CUPY_TF32`` switch or a handle's math mode:

* ``"float32"``: float32 inputs, ``CUBLAS_COMPUTE_32F`` on a handle in ``CUBLAS_DEFAULT_MATH``: strict
  float32, no TF32 tensor cores (the peer of the FMA rungs);
* ``"tf32"``: float32 inputs, ``CUBLAS_COMPUTE_32F_FAST_TF32``: TF32 tensor cores, float32 accumulation
  (the peer of ``mma_tf32``);
* ``"bfloat16"``: bfloat16 inputs (``CUDA_R_16BF``; uint16 bit patterns, or float32 rounded to nearest
  even on the GPU first), ``CUBLAS_COMPUTE_32F``, float32 output (the peer of ``mma_bf16``).

Row-major ``C = A B`` is column-major ``Cᵀ = Bᵀ Aᵀ``: cuBLAS is handed B's memory first.  On the
stand-in GPU (:mod:`course.standin`) it is one counted launch of a NumPy product at the same precision.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from ..capture import cublas_library_path
from ..devices import cupy_module, require_gpu
from ..errors import BadInputError
from ..standin import standin_active
from .ladder import PRECISIONS, product_at_precision, require_device_matrices, to_bfloat16_bits

__all__ = ["COMPUTE_TYPES", "validate_cublas", "cublas_matmul"]

_CUDA_R_32F, _CUDA_R_16BF = 0, 14
_COMPUTE_32F, _COMPUTE_32F_FAST_TF32 = 68, 77
_DEFAULT_MATH, _GEMM_DEFAULT, _OP_N = 0, -1, 0
#: precision -> (input type, cuBLAS compute type), as cublas_api.h and library_types.h number them.
COMPUTE_TYPES = {"float32": (_CUDA_R_32F, _COMPUTE_32F), "tf32": (_CUDA_R_32F, _COMPUTE_32F_FAST_TF32),
                 "bfloat16": (_CUDA_R_16BF, _COMPUTE_32F)}


def validate_cublas(a: Any, b: Any, precision: str) -> tuple[int, int, int]:
    """``(m, n, k)`` of ``a (m, k) @ b (k, n)`` for :func:`cublas_matmul`, or a clear error naming the argument."""
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise BadInputError(f"precision must be one of {', '.join(PRECISIONS)}; got {precision!r:.60}")
    require_gpu()
    require_device_matrices(a, b, precision, f"precision {precision!r}")
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2 or min(m, n, k) < 1 or max(m, n, k) >= 2**31:
        raise BadInputError(f"a {tuple(a.shape)} @ b {tuple(b.shape)} does not multiply: a's columns must equal b's "
                            "rows, every size at least 1")
    return int(m), int(n), int(k)


class _Cublas:
    """One cuBLAS handle (per host thread), its stream set to CuPy's current one on each call."""

    def __init__(self) -> None:
        vp, i32 = ctypes.c_void_p, ctypes.c_int
        self.lib = lib = ctypes.CDLL(cublas_library_path())
        lib.cublasCreate_v2.argtypes = [ctypes.POINTER(vp)]
        lib.cublasSetStream_v2.argtypes = [vp, vp]
        lib.cublasSetMathMode.argtypes = [vp, i32]
        lib.cublasGemmEx.argtypes = [vp, i32, i32, i32, i32, i32, vp, vp, i32, i32, vp, i32, i32, vp, vp, i32, i32,
                                     i32, i32]
        for fn in (lib.cublasCreate_v2, lib.cublasSetStream_v2, lib.cublasSetMathMode, lib.cublasGemmEx):
            fn.restype = ctypes.c_int
        self.handle = vp()
        _check(lib.cublasCreate_v2(ctypes.byref(self.handle)), "cublasCreate")
        _check(lib.cublasSetMathMode(self.handle, _DEFAULT_MATH), "cublasSetMathMode")   # no TF32 unless asked

    def gemm(self, a: Any, b: Any, out: Any, precision: str) -> None:
        m, k = a.shape
        n = b.shape[1]
        dtype, compute = COMPUTE_TYPES[precision]
        stream = cupy_module().cuda.get_current_stream().ptr
        _check(self.lib.cublasSetStream_v2(self.handle, ctypes.c_void_p(int(stream))), "cublasSetStream")
        one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
        ptr = [ctypes.c_void_p(int(x.data.ptr)) for x in (b, a, out)]
        _check(self.lib.cublasGemmEx(self.handle, _OP_N, _OP_N, n, m, k, ctypes.byref(one), ptr[0], dtype, n,
                                     ptr[1], dtype, k, ctypes.byref(zero), ptr[2], _CUDA_R_32F, n, compute,
                                     _GEMM_DEFAULT), "cublasGemmEx")


def _check(status: int, call: str) -> None:
    if status != 0:
        raise RuntimeError(f"cuBLAS {call} returned status {status} (cublasStatus_t; 0 is success)")


_LOCAL = threading.local()


def cublas_matmul(a: Any, b: Any, precision: str) -> Any:
    """``a @ b`` by cuBLAS at ``precision`` ("float32" strict, "tf32", "bfloat16"): a new float32 CuPy array.

    ``a (m, k)`` and ``b (k, n)`` are CuPy float32 arrays; for "bfloat16" also uint16 arrays of bfloat16 bits
    (float32 inputs are rounded on the GPU first, one launch each).  Any sizes.  On the stand-in GPU: one
    counted launch of the NumPy product at the same precision.
    """
    m, n, k = validate_cublas(a, b, precision)
    cp = cupy_module()
    if precision == "bfloat16":
        a, b = (x if x.dtype == np.uint16 else to_bfloat16_bits(x) for x in (a, b))
    a, b = cp.ascontiguousarray(a), cp.ascontiguousarray(b)
    out = cp.empty((m, n), dtype=cp.float32)
    if standin_active():
        pa, pb, po = (np.asarray(x) for x in (a, b, out))
        cp.counter.launch("cublasGemmEx", lambda: po.__setitem__(Ellipsis, product_at_precision(pa, pb, precision)))
        return out
    handle = getattr(_LOCAL, "cublas", None)
    if handle is None:
        handle = _LOCAL.cublas = _Cublas()
    handle.gemm(a, b, out, precision)
    return out
