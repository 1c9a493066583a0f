"""What a CUDA graph can capture, and how the course captures one.

A CUDA graph replays a recorded sequence of kernels with one launch from the host, so a step of many
small kernels stops paying the host's cost per kernel.  CuPy records a graph by *stream capture*
(``stream.begin_capture()`` ... ``stream.end_capture()``), with rules:

* **no cuBLAS through CuPy.**  Every CuPy cuBLAS wrapper first binds its handle to the current stream
  and raises ``NotImplementedError('calling cuBLAS API during stream capture is currently
  unsupported')`` when that stream is capturing (``cupy_backends/cuda/libs/cublas.pyx``,
  ``setStream``).  cuBLAS itself can be captured.  So the course keeps a cuBLAS handle of its own,
  through ``ctypes`` on the same ``libcublas`` CuPy loaded, binds it to the current stream with a
  workspace of its own (kept alive as long as the process, so every graph that used it stays valid),
  and calls ``cublasSgemm``/``cublasDgemm`` (and their strided-batched forms) itself:
  :func:`matmul_into`.  It follows CuPy's TF32 switch (``CUPY_TF32=1``) so both ways of multiplying
  do the same arithmetic; given a named precision (``precision="tf32"``, ``"bfloat16"``, ``"float16"``,
  ``"float32"``) it calls ``cublasGemmEx`` with that compute type instead, float32 accumulation, capturable
  alike (:func:`emulated_product` is its NumPy version, what a CPU and the stand-in GPU run).
* **no allocation, no reduction through CUB, no read back, no synchronisation** while capturing:
  every buffer is made before, and the work is written into it (``out=``).
  :mod:`course.counting` holds code run on the CPU to the same rules.

:func:`capture_graph` captures a function on a side stream and, when the capture fails, ends it,
throws the partial graph away (a graph of half the work would replay silently) and returns the
reason, said once as a warning; the caller runs uncaptured and labels it so.
:func:`graph_kernels` counts a graph's kernel nodes (the CUDA driver's own node list; the DOT text of
``cudaGraphDebugDotPrint`` where the driver cannot be asked).

>>> import numpy as np
>>> a, b = np.arange(6.0).reshape(2, 3), np.ones((3, 2))
>>> matmul_into(a, b, np.empty((2, 2))).tolist()
[[3.0, 3.0], [12.0, 12.0]]
>>> matmul_into(a.T, a, np.empty((3, 3)))[0].tolist()      # a transposed view: no copy
[9.0, 12.0, 15.0]
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .devices import array_device, cupy_module, gpu_available, gpu_unavailable_reason
from .errors import BadInputError, GPUUnavailableError
from .standin import standin_active

__all__ = ["matmul_into", "GEMM_PRECISIONS", "emulated_product", "gemm_plan", "validate_matmul_operands",
           "capture_graph", "Captured", "graph_kernels", "dot_kernel_nodes",
           "cublas_library_path", "cublas_status", "WORKSPACE_BYTES", "validate_capture"]

#: The workspace each stream's binding of the course's cuBLAS handle gets (cuBLAS's advice: 32 MiB on
#: Hopper and newer, 4 MiB before).
WORKSPACE_BYTES = {"hopper+": 32 * 2**20, "older": 4 * 2**20}

_OP_N, _OP_T = 0, 1
_DEFAULT_MATH, _TF32_TENSOR_OP_MATH = 0, 3
#: The precisions :func:`matmul_into` can be told to multiply at (``cublasGemmEx``, the compute type named):
#: precision -> (the inputs' dtype, the outputs' dtypes).  bfloat16 travels as uint16 bit patterns (CuPy has no
#: bfloat16 dtype); the products accumulate in float32 at every precision.
GEMM_PRECISIONS = {"float32": ("float32", ("float32",)), "tf32": ("float32", ("float32",)),
                   "bfloat16": ("uint16", ("uint16", "float32")), "float16": ("float16", ("float16", "float32"))}
_CUDA_TYPE = {"float32": 0, "float16": 2, "uint16": 14}            # CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF
_COMPUTE = {"float32": 68, "tf32": 77, "bfloat16": 68, "float16": 68}   # CUBLAS_COMPUTE_32F(_FAST_TF32)


# ----------------------------------------------------------------------------- the layout of one product

@dataclass(frozen=True)
class GemmPlan:
    """One ``out = a @ b`` as cuBLAS's column-major call: ``C = op(A) op(B)`` with A the memory of ``b``
    and B the memory of ``a`` (a row-major matrix *is* its transpose in column-major order)."""

    transa: int
    transb: int
    m: int
    n: int
    k: int
    lda: int
    ldb: int
    ldc: int
    stride_a: int
    stride_b: int
    stride_c: int
    batch: int


def _inner(x: Any, rows: int, cols: int, name: str) -> tuple[str, int]:
    """("C" or "F", leading dimension in elements) of ``x``'s last two axes, or a clear error."""
    item = x.dtype.itemsize
    if x.size == 0:                      # an empty matrix has no layout (NumPy gives it strides of 0): any will do
        return "C", max(1, cols)
    s0, s1 = (s // item for s in x.strides[-2:])
    if any(s % item for s in x.strides[-2:]):
        raise BadInputError(f"{name}'s strides {x.strides} are not whole elements: pass a contiguous array")
    if s1 == 1 or cols == 1:
        ld = s0 if rows > 1 else cols
        if ld >= max(1, cols):
            return "C", max(1, ld)
    if s0 == 1 or rows == 1:
        ld = s1 if cols > 1 else rows
        if ld >= max(1, rows):
            return "F", max(1, ld)
    raise BadInputError(f"{name} {tuple(x.shape)} with strides {x.strides} is neither a row-major matrix nor the "
                        "transpose of one in its last two axes: pass ascontiguousarray(...) of it")


def _batch_stride(x: Any, batch_shape: tuple, name: str) -> int:
    """The stride, in elements, between the matrices of ``x`` over ``batch_shape`` (0: one matrix
    shared by all), or a clear error when its batch axes are not one regular run."""
    bshape = tuple(x.shape[:-2])
    if not bshape or all(s == 1 for s in bshape):
        return 0
    if bshape != batch_shape:
        raise BadInputError(f"{name} has batch shape {bshape}, the output {batch_shape}: give both the same "
                            "batch axes (or a single matrix)")
    item = x.dtype.itemsize
    strides = [s // item for s, n in zip(x.strides[:-2], bshape) if n > 1]
    sizes = [n for n in bshape if n > 1]
    for i in range(len(strides) - 1):
        if strides[i] != strides[i + 1] * sizes[i + 1]:
            raise BadInputError(f"{name}'s batch axes {bshape} (strides {x.strides[:-2]}) are not one regular run "
                                "of matrices: pass ascontiguousarray(...) of it")
    return strides[-1]


def gemm_plan(a: Any, b: Any, out: Any) -> GemmPlan:
    """The cuBLAS call that computes ``out[...] = a @ b`` in place: :func:`validate_matmul_operands`, which
    checks the operands and returns it.

    >>> gemm_plan(np.ones((4, 3)), np.ones((3, 2)), np.empty((4, 2))).k
    3
    """
    return validate_matmul_operands(a, b, out)


def validate_matmul_operands(a: Any, b: Any, out: Any, precision: str | None = None) -> GemmPlan:
    """The cuBLAS call that computes ``out[...] = a @ b`` in place, checked: ``a (..., m, k)``, ``b (..., k, n)``,
    ``out (..., m, n)`` row-major, all of one float dtype; ``a`` and ``b`` row-major or transposed views,
    their batch axes those of ``out`` or none.

    >>> p = gemm_plan(np.ones((4, 3)), np.ones((3, 2)), np.empty((4, 2)))
    >>> (p.m, p.n, p.k, p.transa, p.transb, p.lda, p.ldb, p.ldc)
    (2, 4, 3, 0, 0, 2, 3, 2)
    """
    for name, x in (("a", a), ("b", b), ("out", out)):
        if not all(hasattr(x, attr) for attr in ("ndim", "shape", "strides", "dtype")) or x.ndim < 2:
            raise BadInputError(f"matmul_into multiplies matrices: {name} must have at least 2 axes, got shape "
                                f"{tuple(getattr(x, 'shape', ()))}")
    if precision is not None:
        _require_precision_dtypes(a, b, out, precision)
    elif not (a.dtype == b.dtype == out.dtype) or a.dtype not in (np.float32, np.float64):
        raise BadInputError(f"matmul_into needs a, b and out of one dtype, float32 or float64; got {a.dtype}, "
                            f"{b.dtype}, {out.dtype} (convert with .astype('float32'))")
    m, k = a.shape[-2:]
    k2, n = b.shape[-2:]
    if k != k2 or tuple(out.shape[-2:]) != (m, n):
        raise BadInputError(f"shapes do not multiply: a {tuple(a.shape)} @ b {tuple(b.shape)} into out "
                            f"{tuple(out.shape)}")
    batch_shape = tuple(out.shape[:-2])
    try:
        joint = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]), batch_shape)
    except ValueError:
        joint = None
    if joint != batch_shape:
        raise BadInputError(f"the batch axes of a {tuple(a.shape)} and b {tuple(b.shape)} do not give out's "
                            f"{batch_shape}")
    layout_c, ldc = _inner(out, m, n, "out")
    if layout_c != "C":
        raise BadInputError(f"out must be row-major (C-contiguous) in its last two axes, got strides {out.strides}")
    la, lda_a = _inner(a, m, k, "a")
    lb, ldb_b = _inner(b, k, n, "b")
    batch = int(np.prod(batch_shape)) if batch_shape else 1
    stride_c = _batch_stride(out, batch_shape, "out") if batch > 1 else 0
    if batch > 1 and stride_c == 0 and out.size:
        raise BadInputError("out's batch axes must not be broadcast: every product needs its own output")
    sa, sb = _batch_stride(a, batch_shape, "a"), _batch_stride(b, batch_shape, "b")
    if precision is not None and batch > 1:
        raise BadInputError(f"matmul_into multiplies one matrix at a time at a named precision ({precision!r}); got "
                            f"batch axes {batch_shape}: loop over them, or leave precision=None")
    dims = (m, n, k, lda_a, ldb_b, ldc, batch)
    if max(dims) >= 2**31:
        raise BadInputError(f"a dimension of this product ({max(dims):,}) does not fit cuBLAS's 32-bit int")
    # cuBLAS (column-major): C (n x m) = op(b's memory) (n x k) . op(a's memory) (k x m)
    return GemmPlan(transa=_OP_N if lb == "C" else _OP_T, transb=_OP_N if la == "C" else _OP_T,
                    m=int(n), n=int(m), k=int(k), lda=int(ldb_b), ldb=int(lda_a), ldc=int(ldc),
                    stride_a=int(sb), stride_b=int(sa), stride_c=int(stride_c), batch=batch)


def _require_precision_dtypes(a: Any, b: Any, out: Any, precision: Any) -> None:
    if not isinstance(precision, str) or precision not in GEMM_PRECISIONS:
        raise BadInputError(f"precision must be None (the dtype's own product) or one of {list(GEMM_PRECISIONS)}, "
                            f"got {precision!r:.60}")
    inputs, outputs = GEMM_PRECISIONS[precision]
    if not (np.dtype(a.dtype).name == np.dtype(b.dtype).name == inputs) or np.dtype(out.dtype).name not in outputs:
        raise BadInputError(f"at precision {precision!r} matmul_into multiplies {inputs} a and b into "
                            f"{' or '.join(outputs)} out (bfloat16 as uint16 bit patterns); got {a.dtype}, {b.dtype}, "
                            f"{out.dtype}")


def _bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def _f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns, rounded to nearest even (NaN stays a quiet NaN), as the GPU stores them."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), rounded)


def _round_tf32(x: np.ndarray) -> np.ndarray:
    """float32 -> TF32 (10 mantissa bits), to nearest, ties away from zero (``cvt.rna.tf32.f32``)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    out = ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)
    return np.where(np.isfinite(x), out, x)


def emulated_product(a: np.ndarray, b: np.ndarray, out: np.ndarray, precision: str) -> np.ndarray:
    """``out[...] = a @ b`` in NumPy as cuBLAS computes it at ``precision`` (:data:`GEMM_PRECISIONS`): the
    inputs read at that precision (TF32 rounded; bfloat16 bits or float16 widened exactly), float32
    accumulation, the result rounded to ``out``'s type.  What the stand-in GPU and a CPU run in place of
    ``cublasGemmEx``.

    >>> a = np.full((1, 1), 1 + 2**-12, np.float32)
    >>> float(emulated_product(a, np.ones((1, 1), np.float32), np.empty((1, 1), np.float32), "tf32")[0, 0])
    1.0
    """
    _require_precision_dtypes(a, b, out, precision)
    wide = [_bf16_to_f32(x) if precision == "bfloat16" else np.asarray(x, np.float32) for x in (a, b)]
    if precision == "tf32":
        wide = [_round_tf32(x) for x in wide]
    with np.errstate(over="ignore", invalid="ignore"):
        prod = np.matmul(wide[0], wide[1])
        if out.dtype == np.uint16:
            out[...] = _f32_to_bf16(prod)
        else:
            out[...] = prod.astype(out.dtype)     # float16: past its range is inf, as the GPU rounds it
    return out


def matmul_into(a: Any, b: Any, out: Any, precision: str | None = None) -> Any:
    """``out[...] = a @ b``, allocating nothing; on a GPU through the course's own cuBLAS handle, so that a
    CUDA graph can capture it (CuPy's ``matmul`` cannot be captured).  Returns ``out``.

    ``precision=None`` (the default): ``cublasSgemm``/``cublasDgemm`` by the dtype, following CuPy's TF32
    switch (``CUPY_TF32``).  A named precision (:data:`GEMM_PRECISIONS`: ``"float32"`` strict, ``"tf32"``,
    ``"bfloat16"``, ``"float16"``) calls ``cublasGemmEx`` with that compute type and float32 accumulation
    on a handle in ``CUBLAS_DEFAULT_MATH``, whatever ``CUPY_TF32`` says; one matrix per call (no batch axes).

    ``a (..., m, k)``, ``b (..., k, n)``, ``out (..., m, n)``: one float dtype; ``out`` row-major; ``a`` and
    ``b`` row-major or transposed views (``x.T``), with the batch axes of ``out`` or none (one matrix used
    for every product).  NumPy arrays are multiplied by NumPy; an array namespace that counts
    (:mod:`course.counting`, the stand-in GPU) counts it as one launch.
    """
    plan = validate_matmul_operands(a, b, out, precision)
    hook = getattr(type(out), "__course_gemm__", None)
    if precision is not None and (hook is not None or array_device(out) != "gpu"):
        pa, pb, po = (np.asarray(x).view(np.ndarray) for x in (a, b, out))
        counter = getattr(out, "counter", None)
        if counter is None:
            emulated_product(pa, pb, po, precision)
        else:                                   # one counted launch (recorded, not run, while capturing)
            counter.launch(f"gemm_ex {precision}", lambda: emulated_product(pa, pb, po, precision))
        return out
    if hook is not None:
        return hook(a, b, out)
    if array_device(out) != "gpu":
        np.matmul(a, b, out=out)
        return out
    if not (array_device(a) == array_device(b) == "gpu"):
        raise BadInputError("a, b and out must all be on the GPU; move them with course.to_device(x, 'gpu')")
    if out.size == 0:
        return out
    if plan.k == 0:
        out.fill(0)
        return out
    handle = _handle()
    if handle is None and precision is not None:
        raise RuntimeError(f"a product at precision {precision!r} needs the course's cuBLAS handle, which could not "
                           f"be made here ({_FAILED[0] if _FAILED else 'unknown'})")
    if handle is None:                       # CuPy's own matmul then (it cannot be captured: capture_graph says so)
        cupy_module().matmul(a, b, out=out)
        return out
    if precision is None:
        handle.gemm(plan, a, b, out)
    else:
        handle.gemm_ex(plan, a, b, out, precision)
    return out


def cublas_status() -> str:
    """Which way :func:`matmul_into` multiplies on this machine's GPU: ``"the course's cuBLAS handle"``,
    ``"CuPy's matmul (...why...)"`` where that handle could not be made, or ``"not yet used"``."""
    if getattr(_LOCAL, "handle", None) is not None:
        return "the course's cuBLAS handle"
    if _FAILED:
        return f"CuPy's matmul (the course's cuBLAS handle could not be made: {_FAILED[0]})"
    if standin_active():
        return "the stand-in GPU's counted NumPy product"
    return "not yet used"


# ----------------------------------------------------------------------------- the course's cuBLAS handle

def cublas_library_path() -> str:
    """The ``libcublas`` this process uses: the one CuPy loaded (read from ``/proc/self/maps``), else what
    ``cuda.pathfinder`` or the system finds.  Raises ``OSError`` when there is none."""
    cp = cupy_module()
    if cp is not None:
        try:
            cp.cuda.device.get_cublas_handle()              # CuPy loads its libcublas now
        except Exception:
            pass
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if re.match(r"libcublas\.so", os.path.basename(path)):
                    return path
    except OSError:
        pass
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        return load_nvidia_dynamic_lib("cublas").abs_path
    except Exception:
        pass
    found = ctypes.util.find_library("cublas")
    if found:
        return found
    raise OSError("no libcublas was found: install the CUDA toolkit or the nvidia-cublas wheel CuPy uses")


def _bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    """Declare the argument types of the cuBLAS entry points the course calls (cublas_api.h)."""
    vp, i32, i64, size = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong, ctypes.c_size_t
    sig = {"cublasCreate_v2": [ctypes.POINTER(vp)], "cublasDestroy_v2": [vp],
           "cublasSetStream_v2": [vp, vp], "cublasSetWorkspace_v2": [vp, vp, size],
           "cublasSetMathMode": [vp, i32],
           "cublasGemmEx": [vp, i32, i32, i32, i32, i32, vp, vp, i32, i32, vp, i32, i32, vp, vp, i32, i32, i32, i32]}
    for t in ("S", "D"):
        sig[f"cublas{t}gemm_v2"] = [vp, i32, i32, i32, i32, i32, vp, vp, i32, vp, i32, vp, vp, i32]
        sig[f"cublas{t}gemmStridedBatched"] = [vp, i32, i32, i32, i32, i32, vp, vp, i32, i64, vp, i32, i64, vp, vp,
                                               i32, i64, i32]
    for name, argtypes in sig.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, ctypes.c_int
    return lib


def _check(status: int, call: str) -> None:
    if status != 0:
        raise RuntimeError(f"cuBLAS {call} returned status {status} (cublasStatus_t; 0 is success)")


class _Handle:
    """A cuBLAS handle of the course's own, bound on each call to CuPy's current stream."""

    def __init__(self) -> None:
        cp = cupy_module()
        self.cp = cp
        self.lib = _bind(ctypes.CDLL(cublas_library_path()))
        self.handle = ctypes.c_void_p()
        _check(self.lib.cublasCreate_v2(ctypes.byref(self.handle)), "cublasCreate")
        major = int(cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id).get("major", 0))
        self.workspace_bytes = WORKSPACE_BYTES["hopper+" if major >= 9 else "older"]
        self.workspaces: dict[int, Any] = {}        # stream -> its workspace, kept while the process lives
        self.bound: tuple[int, int] | None = None

    def _bind_stream(self, mode: int | None = None) -> None:
        stream = int(self.cp.cuda.get_current_stream().ptr)
        if mode is None:
            mode = _TF32_TENSOR_OP_MATH if int(os.environ.get("CUPY_TF32", "0") or 0) > 0 else _DEFAULT_MATH
        if self.bound == (stream, mode):
            return
        ws = self.workspaces.get(stream)
        if ws is None:
            ws = self.workspaces[stream] = self.cp.empty(self.workspace_bytes, dtype=np.uint8)
        _check(self.lib.cublasSetStream_v2(self.handle, ctypes.c_void_p(stream)), "cublasSetStream")
        # setting the stream resets the workspace to cuBLAS's own pool: give it ours again
        _check(self.lib.cublasSetWorkspace_v2(self.handle, ctypes.c_void_p(int(ws.data.ptr)), ws.nbytes),
               "cublasSetWorkspace")
        _check(self.lib.cublasSetMathMode(self.handle, mode), "cublasSetMathMode")
        self.bound = (stream, mode)

    def gemm(self, p: GemmPlan, a: Any, b: Any, out: Any) -> None:
        self._bind_stream()
        single = out.dtype == np.float32
        scalar = ctypes.c_float if single else ctypes.c_double
        one, zero = scalar(1.0), scalar(0.0)
        ptr = [ctypes.c_void_p(int(x.data.ptr)) for x in (b, a, out)]
        t = "S" if single else "D"
        if p.batch == 1:
            _check(getattr(self.lib, f"cublas{t}gemm_v2")(
                self.handle, p.transa, p.transb, p.m, p.n, p.k, ctypes.byref(one), ptr[0], p.lda, ptr[1], p.ldb,
                ctypes.byref(zero), ptr[2], p.ldc), f"cublas{t}gemm")
        else:
            _check(getattr(self.lib, f"cublas{t}gemmStridedBatched")(
                self.handle, p.transa, p.transb, p.m, p.n, p.k, ctypes.byref(one), ptr[0], p.lda, p.stride_a, ptr[1],
                p.ldb, p.stride_b, ctypes.byref(zero), ptr[2], p.ldc, p.stride_c, p.batch),
                f"cublas{t}gemmStridedBatched")


    def gemm_ex(self, p: GemmPlan, a: Any, b: Any, out: Any, precision: str) -> None:
        """``cublasGemmEx``: the inputs' and output's types and the compute type named, float32 scalars."""
        self._bind_stream(_DEFAULT_MATH)
        one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
        ptr = [ctypes.c_void_p(int(x.data.ptr)) for x in (b, a, out)]
        t_in, t_out = _CUDA_TYPE[np.dtype(a.dtype).name], _CUDA_TYPE[np.dtype(out.dtype).name]
        _check(self.lib.cublasGemmEx(self.handle, p.transa, p.transb, p.m, p.n, p.k, ctypes.byref(one), ptr[0], t_in,
                                     p.lda, ptr[1], t_in, p.ldb, ctypes.byref(zero), ptr[2], t_out, p.ldc,
                                     _COMPUTE[precision], -1), f"cublasGemmEx ({precision})")


_LOCAL = threading.local()
_FAILED: list[str] = []


def _handle() -> _Handle | None:
    """This thread's handle (cuBLAS handles must not be shared between host threads); None, said once as a
    warning, where it cannot be made (no libcublas found, a missing entry point, a failing create)."""
    h = getattr(_LOCAL, "handle", None)
    if h is None and not _FAILED:
        try:
            h = _LOCAL.handle = _Handle()
        except (OSError, AttributeError, RuntimeError) as exc:
            _FAILED.append(f"{type(exc).__name__}: {exc}")
            warnings.warn(f"the course's own cuBLAS handle could not be made ({_FAILED[0]}): matrix products use "
                          "CuPy's matmul, which a CUDA graph cannot capture, so the captured paths run uncaptured",
                          RuntimeWarning, stacklevel=3)
    return h


# ------------------------------------------------------------------------ capturing, and counting what was captured

@dataclass
class Captured:
    """The result of :func:`capture_graph`: ``graph`` (None when the capture failed, with ``reason``) and
    the ``stream`` it was captured on."""

    graph: Any
    stream: Any
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.graph is not None


_WARNED: set[str] = set()


def validate_capture(fn: Any, warmup: Any = None) -> Any:
    """The CuPy module (or the stand-in GPU) a capture runs on, when a GPU answers and ``fn`` (and ``warmup``)
    can be called; else the course's :class:`~course.errors.GPUUnavailableError` or a :class:`BadInputError`."""
    for name, f in (("fn", fn), ("warmup", warmup)):
        if not callable(f) and not (name == "warmup" and f is None):
            raise BadInputError(f"capture_graph: {name} must be a function of no arguments, got {type(f).__name__}")
    if not gpu_available():
        raise GPUUnavailableError(f"capture_graph captures a CUDA graph, and no GPU answers here "
                                  f"({gpu_unavailable_reason()}): run the step uncaptured on this machine")
    return cupy_module()


def capture_graph(fn: Callable[[], Any], what: str = "this step", warmup: Callable[[], Any] | None = None) -> Captured:
    """Capture ``fn()`` as a CUDA graph on a side stream of the current device.

    The current stream is synchronised first (the side stream does not wait for it); ``warmup()``, when
    given, runs on the side stream before the capture (a first call of ``fn`` compiles its kernels, makes
    cuBLAS's workspace for that stream and allocates what it keeps; it then puts back what that call
    changed) and is waited for.  If anything in ``fn`` cannot be captured, the capture is ended, its
    partial graph thrown away, and the reason returned (and said once per ``what`` as a warning): the
    caller then runs uncaptured and labels its result so.  Replay the graph with
    ``captured.graph.launch(stream)`` on any stream.
    """
    cp = validate_capture(fn, warmup)
    cp.cuda.get_current_stream().synchronize()
    stream = cp.cuda.Stream(non_blocking=True)
    graph, reason = None, None
    with stream:
        if warmup is not None:
            warmup()
            stream.synchronize()
        stream.begin_capture()
        try:
            fn()
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
        finally:
            try:
                ended = stream.end_capture()
            except Exception as exc:            # an invalidated capture: CUDA's error says why
                ended, reason = None, reason or f"{type(exc).__name__}: {exc}"
        graph = ended if reason is None else None
    if reason is not None and what not in _WARNED:
        _WARNED.add(what)
        warnings.warn(f"{what} could not be captured as a CUDA graph here ({reason}); it runs uncaptured, and its "
                      "results say so", RuntimeWarning, stacklevel=2)
    return Captured(graph=graph, stream=stream, reason=reason)


_NODE_TYPES = {0: "kernels", 1: "memcpy", 2: "memset", 3: "host", 4: "child graphs", 5: "empty"}


def graph_kernels(graph: Any) -> dict | None:
    """``{"kernels": n, ..., "how": ...}``: the nodes of a captured graph by kind; None where nobody can say.

    A stand-in graph knows what it recorded; a CuPy graph is asked through the CUDA driver
    (``cuGraphGetNodes``, ``cuGraphNodeGetType``, child graphs included); failing that, its DOT text
    (:func:`dot_kernel_nodes`).
    """
    if graph is None:
        return None
    if hasattr(graph, "kernels") and not hasattr(graph, "graph"):
        return {"kernels": int(graph.kernels), "how": "recorded by the stand-in GPU"}
    handle = getattr(graph, "graph", None)
    if handle:
        try:
            counts = _driver_nodes(int(handle))
            return counts | {"how": "the CUDA driver's node list"}
        except (OSError, RuntimeError, AttributeError):
            pass
    dot = getattr(graph, "debug_dot_str", None)
    if dot is None:
        return None
    try:
        return {"kernels": dot_kernel_nodes(dot()), "how": "the graph's DOT text"}
    except Exception:
        return None


def _driver_nodes(graph: int) -> dict:
    cu = ctypes.CDLL("libcuda.so.1")
    get_nodes, get_type, child = cu.cuGraphGetNodes, cu.cuGraphNodeGetType, cu.cuGraphChildGraphNodeGetGraph
    get_nodes.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)]
    get_type.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    child.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    counts: dict[str, int] = {"kernels": 0}

    def walk(g: int, depth: int) -> None:
        n = ctypes.c_size_t(0)
        if get_nodes(ctypes.c_void_p(g), None, ctypes.byref(n)) != 0:
            raise RuntimeError("cuGraphGetNodes failed")
        nodes = (ctypes.c_void_p * n.value)()
        if n.value and get_nodes(ctypes.c_void_p(g), nodes, ctypes.byref(n)) != 0:
            raise RuntimeError("cuGraphGetNodes failed")
        for node in nodes[:n.value]:
            t = ctypes.c_int(-1)
            if get_type(ctypes.c_void_p(node), ctypes.byref(t)) != 0:
                raise RuntimeError("cuGraphNodeGetType failed")
            kind = _NODE_TYPES.get(t.value, "other")
            counts[kind] = counts.get(kind, 0) + 1
            if t.value == 4 and depth < 8:
                sub = ctypes.c_void_p()
                if child(ctypes.c_void_p(node), ctypes.byref(sub)) == 0 and sub.value:
                    walk(sub.value, depth + 1)

    walk(graph, 0)
    return counts


def dot_kernel_nodes(text: str) -> int:
    """Kernel nodes in the DOT text of ``cudaGraphDebugDotPrint``, however its labels are laid out.

    A node's statement runs to its ``];`` and may span lines; it is a kernel when its label names the
    node type ``KERNEL`` (verbose output) or a launch configuration ``<<<...>>>`` (plain output).

    >>> dot_kernel_nodes('"n0"[shape="record" label="{KERNEL\\n| {ID | 0}}"];\\n"n1"[label="1\\nk\\n'
    ...                  '\\\\<\\\\<\\\\<(1,1,1),(32,1,1),0\\\\>\\\\>\\\\>"];\\n"n2"[label="MEMSET"];\\n"n0" -> "n1";')
    2
    """
    if not isinstance(text, str):
        raise BadInputError(f"dot_kernel_nodes reads the DOT text of a graph (a str), got {type(text).__name__}")
    count = 0
    for m in re.finditer(r'"[^"]*"\s*\[(.*?)\]\s*;', text, re.S):     # "node"[attributes];
        label = m.group(1).split("label=", 1)[1] if "label=" in m.group(1) else ""
        if re.search(r"\bKERNEL\b", label) or "<<<" in label.replace("\\", ""):
            count += 1
    return count
