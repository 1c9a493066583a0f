"""BPPSA's two chunk phases as one kernel each: the copy-free backward with a handful of launches.

:class:`course.bppsa.fast.RNNBackwardPlan` arranges the backward pass of a tanh RNN as
reduce-then-scan over C chunks of L steps.  Written with library calls, each chunk phase is L
dependent steps of two calls each (scale by ``d_t``, multiply by ``W``): at the paper's T = 30,000
(L = 87) about 370 small kernels, each reading and writing every chunk's n×n matrix through device
memory, so the step is bound by launches and that traffic, not by its arithmetic.  For a state of at
most 32 numbers a chunk's whole matrix fits in one thread block's shared memory, so each phase
becomes a single kernel in which every block walks its own chunk's L steps on chip:

* ``rnn_chunk_products``: one block of n×n threads per (chunk, batch row); the block keeps the
  chunk's running product ``M ← M · diag(d_t) · W`` in shared memory for its L steps and writes
  ``M_c`` once (the up-sweep: all device traffic is ``d`` read once and C·B matrices written);
* ``rnn_chunk_walk``: blocks of n×8 threads, eight (chunk, batch row) pairs each; each pair starts
  from the gradient where its chunk ends (``grad · S_{c+1}``, the scanned chunk products; ``grad`` for
  the last chunk) and walks the chunk's L steps with vector-matrix products, writing each step's
  gradient straight into the output (the down-sweep).

Between them the scan over the C chunk products stays a few batched cuBLAS products
(:func:`course.capture.matmul_into`).  Each kernel has a NumPy twin (:data:`REFERENCE`): the oracle
the tests compare with, and what the stand-in GPU (:mod:`course.standin`) runs in its place.

>>> rng = np.random.default_rng(0)
>>> L, C, B, n = 3, 2, 2, 4
>>> d = rng.uniform(0, 1, (C * L, B, n)); W = rng.standard_normal((n, n))
>>> M = np.empty((C, B, n, n)); chunk_products_reference(d, W, M, L)
>>> bool(np.allclose(M[1, 0], np.diag(d[5, 0]) @ W @ np.diag(d[4, 0]) @ W @ np.diag(d[3, 0]) @ W))
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import BadInputError, GPUUnavailableError, whole_number
from ..standin import register_kernel

__all__ = ["CHUNK_SOURCE", "CHUNK_KERNELS", "MAX_STATE", "WALK_ROWS", "REFERENCE", "chunk_products_reference",
           "chunk_walk_reference", "fused_available", "chunk_products", "chunk_walk", "validate_chunk_arrays"]

#: The largest state (hidden size) the kernels take: a chunk's n×n matrix lives in one block.
MAX_STATE = 32
#: (chunk, batch row) pairs per block of ``rnn_chunk_walk``.
WALK_ROWS = 8

CHUNK_SOURCE = r"""
#define MAX_STATE 32
#define WALK_ROWS 8

template <typename T>
__device__ void chunk_products(const T* __restrict__ d, const T* __restrict__ W, T* __restrict__ M,
                               const int L, const int C, const int B, const int n)
{   // one block of n x n threads per (chunk c, batch row b): M_c = prod_{k=L-1..0} diag(d_{cL+k}) W,
    // kept in shared memory; x is the column (fastest: coalesced rows), y the row
    __shared__ T Ms[MAX_STATE][MAX_STATE + 1];
    __shared__ T Ws[MAX_STATE][MAX_STATE + 1];
    __shared__ T ds[MAX_STATE];
    const int l = threadIdx.x, i = threadIdx.y;
    const long long pair = blockIdx.x;                  // c * B + b
    const long long c = pair / B, b = pair % B;
    Ws[i][l] = W[i * n + l];
    Ms[i][l] = (i == l) ? T(1) : T(0);
    for (int k = L - 1; k >= 0; --k) {
        if (i == 0) ds[l] = d[((c * L + k) * B + b) * n + l];
        __syncthreads();                                // ds loaded, last step's Ms written
        T acc = T(0);
        for (int j = 0; j < n; ++j) acc += Ms[i][j] * ds[j] * Ws[j][l];
        __syncthreads();                                // every read of Ms done before it changes
        Ms[i][l] = acc;
    }
    M[(pair * n + i) * n + l] = Ms[i][l];
}

template <typename T>
__device__ void chunk_walk(const T* __restrict__ d, const T* __restrict__ W, const T* __restrict__ S,
                           const T* __restrict__ g, T* __restrict__ out,
                           const int L, const int C, const int B, const int n)
{   // WALK_ROWS (chunk, batch row) pairs per block, n threads each: start from the gradient where the
    // chunk ends (g S_{c+1}, or g for the last chunk), then L vector-matrix steps v <- (v * d_t) W,
    // each step's gradient written to out[c L + k, b, :]
    __shared__ T Ws[MAX_STATE][MAX_STATE + 1];
    __shared__ T u[WALK_ROWS][MAX_STATE + 1];
    const int l = threadIdx.x, r = threadIdx.y;
    for (int idx = r * blockDim.x + l; idx < n * n; idx += blockDim.x * blockDim.y)
        Ws[idx / n][idx % n] = W[idx];
    const long long pair = (long long)blockIdx.x * WALK_ROWS + r;
    const bool active = pair < (long long)C * B;
    const long long c = active ? pair / B : 0, b = active ? pair % B : 0;
    T v = T(0);
    if (active) {
        if (c < C - 1) {
            const T* Sm = S + ((c + 1) * B + b) * n * n;
            for (int j = 0; j < n; ++j) v += g[b * n + j] * Sm[j * n + l];
        } else {
            v = g[b * n + l];
        }
    }
    for (int k = L - 1; k >= 0; --k) {
        const long long row = ((c * L + k) * B + b) * n;
        u[r][l] = active ? v * d[row + l] : T(0);
        __syncthreads();                                // the scaled row is whole
        T acc = T(0);
        for (int j = 0; j < n; ++j) acc += u[r][j] * Ws[j][l];
        __syncthreads();                                // every read of u done before it changes
        v = acc;
        if (active) out[row + l] = v;
    }
}

extern "C" __global__ void __launch_bounds__(MAX_STATE * MAX_STATE)
rnn_chunk_products_f32(const float* d, const float* W, float* M, int L, int C, int B, int n)
{ chunk_products<float>(d, W, M, L, C, B, n); }

extern "C" __global__ void __launch_bounds__(MAX_STATE * MAX_STATE)
rnn_chunk_products_f64(const double* d, const double* W, double* M, int L, int C, int B, int n)
{ chunk_products<double>(d, W, M, L, C, B, n); }

extern "C" __global__ void
rnn_chunk_walk_f32(const float* d, const float* W, const float* S, const float* g, float* out,
                   int L, int C, int B, int n)
{ chunk_walk<float>(d, W, S, g, out, L, C, B, n); }

extern "C" __global__ void
rnn_chunk_walk_f64(const double* d, const double* W, const double* S, const double* g, double* out,
                   int L, int C, int B, int n)
{ chunk_walk<double>(d, W, S, g, out, L, C, B, n); }
"""

#: (phase, dtype) -> kernel name.
CHUNK_KERNELS = {("products", "float32"): "rnn_chunk_products_f32", ("products", "float64"): "rnn_chunk_products_f64",
                 ("walk", "float32"): "rnn_chunk_walk_f32", ("walk", "float64"): "rnn_chunk_walk_f64"}


# ----------------------------------------------------------------------------- the door

def validate_chunk_arrays(d: Any, W: Any, M: Any, L: Any, g: Any = None, out: Any = None,
                          gpu: bool = False) -> int:
    """``L`` as an int when the arrays of one chunk phase fit each other: ``M`` (or the scanned ``S``)
    ``(C, B, n, n)``, ``d (>= C·L, B, n)``, ``W (n, n)``, for the walk also ``g (B, n)`` and ``out (>= C·L, B, n)``;
    one float dtype, n at most :data:`MAX_STATE`.  With ``gpu``, a GPU must answer (the kernels run there)."""
    L = whole_number("L", L, hint="steps per chunk")
    arrays = {"d": d, "W": W, "M": M} | ({"g": g, "out": out} if out is not None or g is not None else {})
    for name, a in arrays.items():
        if not (hasattr(a, "shape") and hasattr(a, "dtype")):
            raise BadInputError(f"{name} must be an array, got {type(a).__name__}")
    if len(M.shape) != 4 or M.shape[2] != M.shape[3]:
        raise BadInputError(f"M must hold (chunks C, batch B, n, n) matrices, got shape {tuple(M.shape)}")
    C, B, n = (int(x) for x in M.shape[:3])
    want = {"d": (C * L, B, n), "W": (n, n), "g": (B, n), "out": (C * L, B, n)}
    for name, a in arrays.items():
        if name == "M":
            continue
        shape = tuple(a.shape)
        ok = shape[1:] == want[name][1:] and shape[0] >= want[name][0] if name in ("d", "out") else \
            shape == want[name] or name == "g" and int(np.prod(shape)) == B * n
        if not ok:
            raise BadInputError(f"{name} has shape {shape}; for M {tuple(M.shape)} and L = {L} it must be "
                                f"{'at least ' if name in ('d', 'out') else ''}{want[name]}")
    if not 1 <= n <= MAX_STATE or len({np.dtype(a.dtype).name for a in arrays.values()}) != 1 or \
            np.dtype(M.dtype).name not in ("float32", "float64"):
        raise BadInputError(f"the chunk kernels take n <= {MAX_STATE} and one dtype, float32 or float64; got n = {n}, "
                            f"dtypes {sorted({np.dtype(a.dtype).name for a in arrays.values()})}")
    if gpu:
        from ..devices import gpu_available, gpu_unavailable_reason

        if not gpu_available():
            raise GPUUnavailableError(f"the chunk kernels run on a GPU, and none answers here "
                                      f"({gpu_unavailable_reason()}): use chunk_products_reference / "
                                      "chunk_walk_reference, their NumPy twins")
    return L


# ----------------------------------------------------------------------------- the NumPy twins

def chunk_products_reference(d: np.ndarray, W: np.ndarray, M: np.ndarray, L: int) -> None:
    """``M[c, b] = Π_{k=L-1..0} diag(d[cL+k, b]) · W`` (``d (C·L, B, n)``, ``M (C, B, n, n)``), in place."""
    L = validate_chunk_arrays(d, W, M, L)
    C, B, n = M.shape[0], M.shape[1], M.shape[2]
    dl = d.reshape(C, L, B, n)
    P = np.broadcast_to(np.eye(n, dtype=M.dtype), (C, B, n, n)).copy()
    for k in range(L - 1, -1, -1):
        P = (P * dl[:, k, :, None, :]) @ W
    M[...] = P


def chunk_walk_reference(d: np.ndarray, W: np.ndarray, S: np.ndarray, g: np.ndarray, out: np.ndarray,
                         L: int) -> None:
    """Each chunk's L steps back from ``g · S[c+1]`` (``g`` for the last): ``out[cL+k, b] = v``, in place."""
    L = validate_chunk_arrays(d, W, S, L, g, out)
    C, B, n = S.shape[0], S.shape[1], S.shape[2]
    v = np.empty((C, B, n), dtype=out.dtype)
    v[:C - 1] = np.einsum("bj,cbjl->cbl", g, S[1:])
    v[C - 1] = g
    dl = d.reshape(C, L, B, n)
    rows = out[:C * L].reshape(C, L, B, n)
    for k in range(L - 1, -1, -1):
        v = (v * dl[:, k]) @ W
        rows[:, k] = v


#: kernel phase -> its NumPy version.
REFERENCE = {"products": chunk_products_reference, "walk": chunk_walk_reference}


def _products_twin(grid: tuple, block: tuple, args: tuple) -> None:
    d, W, M, L, C, B, n = (np.asarray(a) for a in args)
    L, C, B, n = int(L), int(C), int(B), int(n)
    if tuple(block) != (n, n, 1) or tuple(grid)[0] != C * B:
        raise RuntimeError(f"rnn_chunk_products launched with grid {grid}, block {block}; needs ({C * B},), ({n}, {n})")
    chunk_products_reference(d[:C * L], W, M.reshape(C, B, n, n), L)


def _walk_twin(grid: tuple, block: tuple, args: tuple) -> None:
    d, W, S, g, out, L, C, B, n = (np.asarray(a) for a in args)
    L, C, B, n = int(L), int(C), int(B), int(n)
    if tuple(block) != (n, WALK_ROWS, 1) or tuple(grid)[0] != -(-C * B // WALK_ROWS):
        raise RuntimeError(f"rnn_chunk_walk launched with grid {grid}, block {block}")
    chunk_walk_reference(d[:C * L], W, S.reshape(C, B, n, n), g.reshape(B, n), out, L)


for (_phase, _dtype), _name in CHUNK_KERNELS.items():      # the stand-in GPU runs the twin instead
    register_kernel(_name, _products_twin if _phase == "products" else _walk_twin)


# ----------------------------------------------------------------------------- on a GPU

def fused_available(n: int, dtype: Any) -> bool:
    """True when the chunk kernels take this state size and dtype (n ≤ :data:`MAX_STATE`, float32/64)."""
    n = whole_number("n", n, lo=0, hint="the state (hidden) size")
    try:
        name = np.dtype(dtype).name
    except TypeError:
        raise BadInputError(f"dtype must name a dtype such as 'float32', got {dtype!r:.60}") from None
    return 1 <= n <= MAX_STATE and name in ("float32", "float64")


#: (the CuPy module the kernels were compiled by, the kernels): compiled once per module, so that a fresh stand-in
#: GPU (tests switch it on and off) never launches through the kernels of an earlier one.
_COMPILED: list = [None, {}]


def _kernels() -> dict:                                   # CuPy loads each kernel once per device itself
    from ..devices import cupy_module

    cp = cupy_module()
    if _COMPILED[0] is not cp:
        mod = cp.RawModule(code=CHUNK_SOURCE, options=("--std=c++14",))
        _COMPILED[:] = [cp, {key: mod.get_function(name) for key, name in CHUNK_KERNELS.items()}]
    return _COMPILED[1]


def chunk_products(d: Any, W: Any, M: Any, L: int) -> None:
    """One launch: ``M (C, B, n, n)`` ← each chunk's product of ``diag(d_t) · W`` (``d (C·L, B, n)``)."""
    L = validate_chunk_arrays(d, W, M, L, gpu=True)
    C, B, n = (int(s) for s in M.shape[:3])
    kernel = _kernels()[("products", np.dtype(M.dtype).name)]
    kernel((C * B,), (n, n, 1), (d, W, M, np.int32(L), np.int32(C), np.int32(B), np.int32(n)))


def chunk_walk(d: Any, W: Any, S: Any, g: Any, out: Any, L: int) -> None:
    """One launch: ``out[cL+k, b]`` ← the gradients of every chunk's L steps, from ``g · S[c+1]``."""
    L = validate_chunk_arrays(d, W, S, L, g, out, gpu=True)
    C, B, n = (int(s) for s in S.shape[:3])
    kernel = _kernels()[("walk", np.dtype(out.dtype).name)]
    kernel((-(-C * B // WALK_ROWS),), (n, WALK_ROWS, 1),
           (d, W, S, g, out, np.int32(L), np.int32(C), np.int32(B), np.int32(n)))
