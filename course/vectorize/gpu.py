"""Lesson 02, GPU rungs: one thread per element, and fusing passes into one kernel.

On a GPU, an elementwise op launches one *thread* per element; the hardware
groups 32 consecutive threads into a *warp* that executes each instruction for
all 32 lanes at once (SIMT: single instruction, multiple threads).

Two ways to run the ladder's ops on a GPU:

* :func:`fused_elementwise` -- a CuPy ``ElementwiseKernel`` whose CUDA body does
  the whole op for one element.  ``affine_relu`` as numpy-style code makes three
  passes over memory (multiply, add, maximum); the fused kernel reads ``x`` once
  and writes ``y`` once, which is all a memory-bound op can hope for.
* :func:`numba_elementwise` -- the same kernels written in Python with
  ``numba.cuda``, where the index arithmetic (``cuda.grid(1)``) is visible.  They
  run on a GPU, and without one under numba's CUDA simulator
  (``NUMBA_ENABLE_CUDASIM=1``, tiny sizes: one Python thread per CUDA thread).

>>> sorted(CUDA_BODIES)
['affine_relu', 'relu', 'sigmoid']
"""

from __future__ import annotations

import functools
import inspect
import math
import textwrap
from typing import Any

import numpy as np

from ..arguments import Whole, arguments
from ..devices import array_device, cupy_module, quiet_numba_launches, require_gpu
from ..errors import BadInputError

__all__ = ["CUDA_BODIES", "ELEMENT_FUNCTIONS", "VECTOR_RELU_SOURCE", "cuda_source", "numba_kernel_source",
           "fused_elementwise", "vector_relu",
           "numba_elementwise", "blocks_for"]

#: The body of each fused kernel for one element; ``C`` is the compute type (float or double).
CUDA_BODIES = {
    "relu": "C v = (C)x; y = (T)(v > (C)0 ? v : (C)0);",
    "sigmoid": "C v = (C)x; y = (T)((C)1 / ((C)1 + exp(-v)));",
    "affine_relu": "C z = (C)a * (C)x + (C)b; y = (T)(z > (C)0 ? z : (C)0);",
}


def cuda_source(op: str, dtype: Any = "float32") -> str:
    """The CUDA C++ body of the fused kernel for ``op``: what one GPU thread does to one element.

    float16 and float32 compute in ``float``, float64 in ``double``.

    >>> cuda_source("relu", "float64")
    'typedef double C; C v = (C)x; y = (T)(v > (C)0 ? v : (C)0);'
    """
    if op not in CUDA_BODIES:
        raise BadInputError(f"op must be one of {tuple(CUDA_BODIES)}, got {op!r}")
    c = "double" if np.dtype(dtype) == np.float64 else "float"
    return f"typedef {c} C; {CUDA_BODIES[op]}"


@functools.cache
def _kernel(op: str, dtype_name: str):
    cp = cupy_module()
    return cp.ElementwiseKernel("T x, float64 a, float64 b", "T y", cuda_source(op, dtype_name),
                                f"course_fused_{op}_{dtype_name}")


def require_gpu_floats(x: Any, who: str, dtypes: tuple[str, ...] = ("float16", "float32", "float64"),
                       why: str = "") -> None:
    """Refuse, saying what to do: no GPU (:func:`~course.devices.require_gpu`), an ``x`` that is not a CuPy
    array, or a dtype ``who`` does not take."""
    require_gpu()
    if array_device(x) != "gpu":
        raise BadInputError(f"{who} needs a CuPy array; move x with course.to_device(x, 'gpu')")
    if str(x.dtype) not in dtypes:
        raise BadInputError(f"{who} takes {'/'.join(dtypes)}{why}, got {x.dtype}")


def fused_elementwise(op: str, x: Any, out: Any = None, a: float = 2.0, b: float = -0.5) -> Any:
    """Run ``op`` on a CuPy array in a single fused CUDA kernel (compiled on first use, cached).

    Raises :class:`~course.errors.GPUUnavailableError` (with what to do) without a GPU.
    """
    require_gpu_floats(x, "fused_elementwise")
    k = _kernel(op if op in CUDA_BODIES else cuda_source(op), str(x.dtype))
    if out is None:
        return k(x, float(a), float(b))
    return k(x, float(a), float(b), out)


#: ReLU with 16-byte loads and stores: each thread moves four float32 (``float4``) or two float64
#: (``double2``) per instruction, the GPU's own SIMD width for memory.  ``v <= 0 ? 0 : v`` keeps a
#: NaN a NaN, as numpy's ``maximum`` does.  The last ``n % width`` elements take one thread each.
VECTOR_RELU_SOURCE = r"""
#define RELU(v) ((v) <= 0 ? 0 : (v))
extern "C" __global__ void course_relu_vec_f32(const float4* __restrict__ x, float4* __restrict__ y,
                                               const float* __restrict__ xs, float* __restrict__ ys,
                                               long long nvec, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < nvec) {
        float4 v = x[i];
        v.x = RELU(v.x); v.y = RELU(v.y); v.z = RELU(v.z); v.w = RELU(v.w);
        y[i] = v;
    }
    long long t = nvec * 4 + i;
    if (t < n) ys[t] = RELU(xs[t]);
}
extern "C" __global__ void course_relu_vec_f64(const double2* __restrict__ x, double2* __restrict__ y,
                                               const double* __restrict__ xs, double* __restrict__ ys,
                                               long long nvec, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < nvec) {
        double2 v = x[i];
        v.x = RELU(v.x); v.y = RELU(v.y);
        y[i] = v;
    }
    long long t = nvec * 2 + i;
    if (t < n) ys[t] = RELU(xs[t]);
}
"""


@functools.cache
def _vector_relu_kernels() -> dict:
    mod = cupy_module().RawModule(code=VECTOR_RELU_SOURCE)
    return {"float32": (mod.get_function("course_relu_vec_f32"), 4),
            "float64": (mod.get_function("course_relu_vec_f64"), 2)}


def vector_relu(x: Any, out: Any = None) -> Any:
    """ReLU on the GPU with 16-byte vector loads and stores (float32 or float64, contiguous).

    CuPy's ``maximum`` moves one element per thread per load; on an H100 it reached about 58 % of
    the device-to-device copy at 2^26 float32, while this kernel, like PyTorch's vectorized
    elementwise kernels, moves 16 bytes per load.  Arrays whose address is not a multiple of 16
    bytes (a view such as ``x[1:]``) fall back to ``cupy.maximum``.
    """
    require_gpu_floats(x, "vector_relu", ("float32", "float64"), " (16 bytes = 4 or 2 of them)")
    cp = cupy_module()
    x = cp.ascontiguousarray(x)
    if out is None:
        out = cp.empty_like(x)
    elif (array_device(out) != "gpu" or out.shape != x.shape or out.dtype != x.dtype
          or not out.flags.c_contiguous):
        raise BadInputError(f"out must be a contiguous CuPy array of shape {x.shape} and dtype {x.dtype}")
    if x.data.ptr % 16 or out.data.ptr % 16:
        return cp.maximum(x, x.dtype.type(0), out=out)
    kernel, width = _vector_relu_kernels()[str(x.dtype)]
    n = x.size
    nvec = n // width
    kernel((blocks_for(max(nvec, 1), 256),), (256,), (x, out, x, out, np.int64(nvec), np.int64(n)))
    return out


@arguments(n=Whole(lo=0, hint="the number of elements"),
           threads_per_block=Whole(hi=1024, hint="1..1024 is a CUDA limit"))
def blocks_for(n: int, threads_per_block: int = 256) -> int:
    """Blocks to launch so that ``blocks * threads_per_block >= n`` (at least 1).

    >>> blocks_for(1000, 256)
    4
    """
    return max(1, -(-n // threads_per_block))


#: What one thread does to one element, as plain Python: compiled for the GPU (below) and, in the
#: tests, for the CPU, to check that float32 data stays float32 (the constants are typed by the
#: caller: ``one`` and ``zero`` have the data's dtype, so no double-precision arithmetic creeps in;
#: FP64 runs at 1/32 of the FP32 rate on a T4).
def relu_element(v, a, b, zero, one):
    return v if v > zero else zero


def sigmoid_element(v, a, b, zero, one):
    return one / (one + math.exp(-v))


def affine_relu_element(v, a, b, zero, one):
    z = a * v + b
    return z if z > zero else zero


ELEMENT_FUNCTIONS = {"relu": relu_element, "sigmoid": sigmoid_element, "affine_relu": affine_relu_element}


@functools.lru_cache(maxsize=8)
def _numba_kernels(dtype_name: str) -> dict:
    # ``cuda`` must be a module global: the simulator swaps it in the kernels' globals.
    global cuda
    from numba import cuda

    scalar = np.dtype(dtype_name).type
    ZERO, ONE = scalar(0), scalar(1)     # constants of the data's type, frozen into the kernels

    def make(body):
        element = cuda.jit(device=True)(body)

        @cuda.jit
        def kernel(x, y, a, b):
            i = cuda.grid(1)  # this thread's element: blockIdx.x * blockDim.x + threadIdx.x
            if i < x.size:    # the last block may have threads with nothing to do
                y[i] = element(x[i], a, b, ZERO, ONE)
        return kernel

    return {op: make(body) for op, body in ELEMENT_FUNCTIONS.items()}


def numba_kernel_source() -> str:
    """The Python source of the one ``numba.cuda`` kernel every op shares: one thread per element."""
    body = inspect.getsource(_numba_kernels).split("@cuda.jit")[1].split("return kernel")[0]
    return textwrap.dedent("        @cuda.jit" + body).rstrip() + "\n"


def require_numba_input(op: str, x: Any) -> None:
    """Refuse an unknown ``op``, no GPU (unless numba's CUDA simulator is on), or an ``x`` that is not a
    1-d float16/float32/float64 array."""
    if op not in CUDA_BODIES:
        raise BadInputError(f"op must be one of {tuple(CUDA_BODIES)}, got {op!r}")
    from numba import config

    if not config.ENABLE_CUDASIM:
        require_gpu()
    if x.ndim != 1:
        raise BadInputError(f"numba_elementwise takes a 1-d array, got shape {x.shape}; use x.ravel()")
    if str(x.dtype) not in ("float16", "float32", "float64"):
        raise BadInputError(f"numba_elementwise takes float16/float32/float64, got {x.dtype}")


def numba_elementwise(op: str, x: Any, threads_per_block: int = 128, a: float = 2.0,
                      b: float = -0.5) -> Any:
    """Run ``op`` with a ``numba.cuda`` kernel: one thread per element, warps of 32.

    ``x`` is a CuPy array on a GPU, or a small numpy array under the CUDA simulator.
    The result has ``x``'s type, and so does every step of the arithmetic (``a``, ``b`` and
    the constants are cast to it).  ``blocks_for(n, threads_per_block)`` blocks are
    launched; threads past the end do nothing.
    """
    require_numba_input(op, x)
    dt = np.dtype(x.dtype)
    y = x.copy()
    kernel = _numba_kernels(dt.name)[op]
    with quiet_numba_launches():   # small grids are on purpose here
        kernel[blocks_for(x.size, threads_per_block), threads_per_block](x, y, dt.type(a), dt.type(b))
    return y
