"""BPPSA without copies: reduce-then-scan over chunks of the chain, on contiguous buffers.

:mod:`course.bppsa.algorithm` keeps the paper's in-place Blelloch tree, readable level by level.
Its pairs are strided views of one buffer, and a matrix product of strided views makes CuPy copy
both operands and the result; on an H100 those copies were 45 % of the scan's time, and every
level multiplied full n×n matrices even on the way down, where a vector would do.  This module
computes the same gradients with the same associativity, arranged so that every step is one
library call on contiguous memory:

1. **up-sweep, per chunk** (the reduce): the T steps are cut into C chunks of L steps, laid out
   ``(L, C, B, n)`` so that step k of every chunk is one contiguous slab.  Each chunk's product of
   Jacobians ``M_c`` is built one step at a time, all chunks and the whole batch in one GEMM per
   step: L dependent steps.  For the RNN the Jacobians ``diag(d_t)·W`` are formed on the fly from
   ``d_t`` (memory O(T·B·n), not O(T·B·n²)).
2. **scan of the chunk totals**: the suffix products of the C matrices ``M_c`` by doubling
   (Hillis-Steele), each level one batched product of two *shifted* contiguous slices: log2(C)
   steps.  Then one batched vector-matrix product gives the gradient at every chunk's start.
3. **down-sweep, per chunk** (the scan): from its boundary gradient, each chunk walks its L steps
   with vector-matrix products (the paper's ``mvmul``), all chunks in one GEMM per step.

About ``4L + log2(C)`` library calls and ``2·T·B·n³`` flops (the classic loop does ``2·T·B·n²`` in
T dependent calls).  ``chunk=None`` picks L near ``sqrt(T)/2``.

>>> rng = np.random.default_rng(0)
>>> J = rng.standard_normal((50, 3, 4, 4)) / 2; g = rng.standard_normal((3, 4))
>>> from course.bppsa.algorithm import backprop_sequential
>>> bool(np.allclose(backprop_chunked(J, g, chunk=7), backprop_sequential(J, g)))
True
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..arguments import Given, Optional, Whole, arguments
from ..capture import capture_graph, matmul_into
from ..devices import array_device, cupy_module, get_xp, xp_of
from ..errors import BadInputError, whole_number
from ..limits import require_fits
from ..standin import register_kernel
from .algorithm import validate_chain
from .chunk_kernels import MAX_STATE, chunk_products, chunk_walk, fused_available

__all__ = ["backprop_chunked", "rnn_hidden_gradients", "default_chunk", "chunked_steps", "RNNBackwardPlan",
           "validate_plan_weight", "SEQUENTIAL_SOURCE", "SEQUENTIAL_KERNELS", "SEQUENTIAL_STAGE",
           "sequential_walk_reference", "SequentialBackwardPlan", "validate_walk_arrays"]


def default_chunk(T: int) -> int:
    """Steps per chunk when none is given: about ``sqrt(T)/2``, at least 1.

    >>> default_chunk(30000), default_chunk(1)
    (87, 1)
    """
    T = whole_number("T", T, hint="the chain's length")
    return max(1, math.ceil(math.sqrt(T) / 2))


@arguments(T=Whole(hint="the chain's length"), chunk=Optional(Whole(hint="steps per chunk")))
def chunked_steps(T: int, chunk: int | None = None) -> int:
    """Dependent library calls of :func:`backprop_chunked`: ``4L + 2 ceil(log2 C) + 3``.

    >>> chunked_steps(30000)
    369
    """
    L = _chunk_length(T, chunk)                      # as the run clips it: a chunk is at most the chain
    C = -(-T // L)
    return 4 * L + 2 * math.ceil(math.log2(C)) + 3 if C > 1 else 4 * L + 3


def _layout(a: Any, xp: Any, L: int, C: int) -> Any:
    """``a (T, ...)`` padded at the front to C·L steps and laid out ``(L, C, ...)``, contiguous.

    The padding steps come before step 0, so in the backward pass they are applied last: they touch
    no gradient that is returned.
    """
    T = a.shape[0]
    padded = xp.zeros((C * L,) + a.shape[1:], dtype=a.dtype)
    padded[C * L - T:] = a
    return xp.ascontiguousarray(xp.swapaxes(padded.reshape((C, L) + a.shape[1:]), 0, 1))


def _chunked(times_jacobian: Any, grad: Any, T: int, L: int, xp: Any) -> Any:
    """The three phases; ``times_jacobian(M, k, out)`` writes ``M · J`` for step k of every chunk.

    ``M`` is ``(C, B, r, n)`` (r = n in the up-sweep, 1 in the down-sweep).  Returns G ``(T+1, B, n)``.
    """
    B, n = grad.shape
    C = -(-T // L)
    # 1. up-sweep: each chunk's product M_c = J_{b-1}ᵀ-side first, in row form g·M_c
    M = xp.empty((C, B, n, n), dtype=grad.dtype)
    M[...] = xp.eye(n, dtype=grad.dtype)
    spare = xp.empty_like(M)
    for k in range(L - 1, -1, -1):
        times_jacobian(M, k, spare)
        M, spare = spare, M
    # 2. suffix products S_c = M_{C-1} ··· M_c by doubling, on shifted contiguous slices
    s = 1
    while s < C:
        xp.matmul(M[s:], M[:C - s], out=spare[:C - s])
        spare[C - s:] = M[C - s:]
        M, spare = spare, M
        s *= 2
    starts = xp.matmul(xp.broadcast_to(grad[None, :, None, :], (C, B, 1, n)), M)   # G at each chunk's start
    # 3. down-sweep: from the gradient where each chunk ends, L vector-matrix steps
    G = xp.empty((L, C, B, 1, n), dtype=grad.dtype)
    cur = xp.empty((C, B, 1, n), dtype=grad.dtype)
    cur[:C - 1] = starts[1:]
    cur[C - 1] = grad[:, None, :]
    for k in range(L - 1, -1, -1):
        times_jacobian(cur, k, G[k])
        cur = G[k]
    out = xp.empty((T + 1, B, n), dtype=grad.dtype)
    out[:T] = xp.swapaxes(G, 0, 1).reshape(C * L, B, n)[C * L - T:]
    out[T] = grad
    return out


def _chunk_length(T: int, chunk: int | None) -> int:
    if chunk is None:
        return default_chunk(T)
    return min(whole_number("chunk", chunk, hint="steps per chunk, e.g. default_chunk(T)"), T)


def _chunked_numbers(T: int, B: int, n: int, L: int, per_step: int) -> int:
    """Numbers the three phases build for a chain of T steps in chunks of L: the inputs laid out per chunk
    (``per_step`` numbers a step: n² Jacobians, or n for ``d``), three (C, B, n, n) products, the
    down-sweep's rows and G."""
    C = -(-T // L)
    return C * L * B * per_step + 3 * C * B * n * n + 2 * C * L * B * n + 2 * (T + 1) * B * n


def _require_finite(G: Any, J: Any, g: Any, xp: Any, L: int) -> None:
    """Refuse to return NaN or inf made by the chunk products where the inputs were finite."""
    if not bool(xp.isfinite(G).all()) and bool(xp.isfinite(J).all()) and bool(xp.isfinite(g).all()):
        raise BadInputError(f"the chunked backward overflowed {G.dtype}: it multiplies Jacobians together (L = {L} "
                            "in a chunk, then the chunks' products) before they meet the gradient, and those products "
                            f"exceed the largest {G.dtype} even where the gradients themselves may not. Use "
                            "backprop_sequential, which multiplies each Jacobian by a vector only, or float64.")


def backprop_chunked(jacobians: Any, grad: Any, chunk: int | None = None) -> Any:
    """Same contract as :func:`course.bppsa.backprop_sequential`, by reduce-then-scan over chunks.

    Parameters
    ----------
    jacobians : ``(T, n, n)`` or ``(T, B, n, n)``, ``jacobians[t] = ∂x_{t+1}/∂x_t``.
    grad : ``(n,)`` or ``(B, n)``.
    chunk : steps per chunk (default :func:`default_chunk`).

    Returns
    -------
    G : ``(T+1, n)`` or ``(T+1, B, n)``.
    """
    J, g, xp, T, B, n = validate_chain(jacobians, grad)
    L = _chunk_length(T, chunk)
    dtype = xp.result_type(J.dtype, g.dtype)
    require_fits(_chunked_numbers(T, B or 1, n, L, n * n) * np.dtype(dtype).itemsize, array_device(J),
                 what=f"the chunked backward of {T:,} Jacobians of {n}×{n}" + (f", batch {B:,}" if B else ""))
    J = J.astype(dtype, copy=False)
    if B is None:
        J, g = J[:, None], g[None]
    C = -(-T // L)
    Jl = _layout(J, xp, L, C)                                     # (L, C, B, n, n)

    def times_jacobian(M, k, out):
        xp.matmul(M, Jl[k], out=out)

    G = _chunked(times_jacobian, g.astype(dtype, copy=False), T, L, xp)
    _require_finite(G, J, g, xp, L)
    return G[:, 0] if B is None else G


@arguments(chunk=Optional(Whole(hint="steps per chunk, e.g. default_chunk(T)")))
def rnn_hidden_gradients(d: Any, W: Any, grad: Any, chunk: int | None = None) -> Any:
    """G = dL/dh_t of a chain whose Jacobians are ``J_t = diag(d_t) · W`` (a tanh RNN: d = 1 - h²).

    The Jacobians are never stored: each step scales by ``d_t`` and multiplies by ``W`` (one GEMM
    for all chunks and the whole batch).  Equal to ``backprop_sequential(d[..., :, None] * W, grad)``.

    Parameters
    ----------
    d : ``(T, B, n)``, the derivative of the nonlinearity at steps 1..T.
    W : ``(n, n)``, the recurrent weight.
    grad : ``(B, n)``, dL/dh_T.
    chunk : steps per chunk (default :func:`default_chunk`).

    Returns
    -------
    G : ``(T+1, B, n)``.

    >>> rng = np.random.default_rng(1)
    >>> d = rng.uniform(0, 1, (9, 2, 3)); W = rng.standard_normal((3, 3)); g = rng.standard_normal((2, 3))
    >>> from course.bppsa.algorithm import backprop_sequential
    >>> bool(np.allclose(rnn_hidden_gradients(d, W, g, chunk=4), backprop_sequential(d[..., :, None] * W, g)))
    True
    """
    dev = array_device(d)
    if array_device(W) != dev or array_device(grad) != dev:
        raise BadInputError("d, W and grad must live on the same device; move them with course.to_device.")
    xp = get_xp(dev)
    d, W, grad = xp.asarray(d), xp.asarray(W), xp.asarray(grad)
    if d.ndim != 3 or d.shape[0] < 1 or W.shape != (d.shape[2], d.shape[2]) or grad.shape != d.shape[1:]:
        raise BadInputError(f"need d (T, B, n) with T >= 1, W (n, n) and grad (B, n); got d {tuple(d.shape)}, "
                            f"W {tuple(W.shape)}, grad {tuple(grad.shape)}.")
    if not all(np.issubdtype(a.dtype, np.floating) for a in (d, W, grad)):
        raise BadInputError(f"d, W and grad must be floating point, got {d.dtype}, {W.dtype}, {grad.dtype}.")
    dtype = xp.result_type(d.dtype, W.dtype, grad.dtype)
    d, W, grad = d.astype(dtype, copy=False), W.astype(dtype, copy=False), grad.astype(dtype, copy=False)
    T, n = int(d.shape[0]), int(d.shape[2])
    L = _chunk_length(T, chunk)
    require_fits(_chunked_numbers(T, int(d.shape[1]), n, L, n) * np.dtype(dtype).itemsize, dev,
                 what=f"the chunked backward of {T:,} steps, batch {d.shape[1]:,}, n = {n}")
    C = -(-T // L)
    dl = _layout(d, xp, L, C)                                      # (L, C, B, n)

    def times_jacobian(M, k, out):                                 # M · diag(d_t) · W
        scaled = M * dl[k][:, :, None, :]
        rows = scaled.reshape(-1, n)
        xp.matmul(rows, W, out=out.reshape(-1, n))

    return _chunked(times_jacobian, grad, T, L, xp)


# ------------------------------------------------------------------ every buffer once, and a CUDA graph

def validate_plan_weight(W: Any, n: int) -> Any:
    """``W``, the recurrent weight of an :class:`RNNBackwardPlan`: a numpy or CuPy array of floats, ``(n, n)``."""
    if not hasattr(W, "shape") or not hasattr(W, "dtype") or isinstance(W, np.generic):
        raise BadInputError(f"W must be the recurrent weight, an array of shape ({n}, {n}) (numpy or CuPy); got "
                            f"{type(W).__name__}. Pass np.asarray(W, dtype=np.float64) for a list.")
    if tuple(W.shape) != (n, n):
        raise BadInputError(f"W must have shape ({n}, {n}), got {tuple(W.shape)}.")
    if W.dtype.kind != "f":
        raise BadInputError(f"W must hold floating-point numbers (float32 or float64), got {W.dtype}: the plan's "
                            "buffers take W's dtype, and integer gradients would be rounded.")
    return W


def _require_plan_fits(T: int, B: int, n: int, W: Any, chunk: int | None, graph: bool) -> None:
    if graph and array_device(W) != "gpu":
        raise BadInputError("graph=True records a CUDA graph: it needs W on the GPU (course.to_device(W, 'gpu')).")
    L = _chunk_length(T, chunk)
    require_fits(_chunked_numbers(T, B, n, L, 3 * n) * W.dtype.itemsize, array_device(W),
                 what=f"an RNN backward plan for T = {T:,}, batch {B:,}, n = {n}")


class RNNBackwardPlan:
    """:func:`rnn_hidden_gradients` for one shape, with every buffer allocated once and reused.

    Each call copies ``d`` and ``grad`` into the plan's inputs and runs the three phases with
    ``out=`` everywhere, so nothing is allocated while it runs; its matrix products go through the
    course's own cuBLAS handle (:func:`course.capture.matmul_into`).  On a GPU, ``graph=True`` records
    the whole computation once as a CUDA graph (CuPy stream capture) and each call replays it on the
    current stream: one launch from the host instead of about ``4L + 2 log2 C`` (:func:`chunked_steps`).
    Where the capture fails, it says why once (``plan.capture_failed``) and runs uncaptured.

    The returned G ``(T+1, B, n)`` is the plan's own buffer: the next call overwrites it.

    >>> rng = np.random.default_rng(2)
    >>> d = rng.uniform(0, 1, (11, 2, 3)); W = rng.standard_normal((3, 3)); g = rng.standard_normal((2, 3))
    >>> plan = RNNBackwardPlan(11, 2, 3, W, chunk=4)
    >>> bool(np.allclose(plan(d, g), rnn_hidden_gradients(d, W, g, chunk=4)))
    True
    """

    @arguments(T=Whole(hint="the chain's length"), B=Whole(hint="the batch"), n=Whole(hint="the state size"),
               W=Given(validate_plan_weight, earlier=["n"]), chunk=Optional(Whole(hint="steps per chunk")),
               then=_require_plan_fits)
    def __init__(self, T: int, B: int, n: int, W: Any, chunk: int | None = None, graph: bool = False,
                 fused: bool | None = None):
        on_gpu = array_device(W) == "gpu"
        if fused is None:
            fused = on_gpu and fused_available(n, W.dtype)
        elif fused and not (on_gpu and fused_available(n, W.dtype)):
            raise BadInputError(f"fused=True runs the chunk kernels (course.bppsa.chunk_kernels): they need W on the "
                                f"GPU, float32 or float64, and a state of at most {MAX_STATE}; got W on "
                                f"{array_device(W)}, {W.dtype}, n = {n}. Leave fused=None to choose by itself.")
        #: the two chunk phases run as one kernel each (True) or as library calls, two per step (False)
        self.fused = bool(fused)
        self.T, self.B, self.n = T, B, n
        self.xp = xp = xp_of(W)
        self.L = L = _chunk_length(self.T, chunk)
        self.C = C = -(-self.T // L)
        self.pad = C * L - self.T
        B, n, dt = self.B, self.n, W.dtype
        self.W = self.xp.ascontiguousarray(W) if self.fused else W
        self.d_in = xp.zeros((C * L, B, n), dtype=dt)         # the padding steps stay zero
        self.grad_in = xp.zeros((B, n), dtype=dt)
        self.M, self.spare = (xp.empty((C, B, n, n), dtype=dt) for _ in range(2))
        if not self.fused:                                  # the library-call path's own buffers
            self.eye = xp.eye(n, dtype=dt)
            self.dl = xp.empty((L, C, B, n), dtype=dt)
            self.scaled = xp.empty((C, B, n, n), dtype=dt)
            self.grads = xp.empty((C, B, 1, n), dtype=dt)
            self.starts, self.cur, self.scaled_rows = (xp.empty((C, B, 1, n), dtype=dt) for _ in range(3))
            self.G = xp.empty((L, C, B, 1, n), dtype=dt)
        self.out = xp.empty((C * L + 1, B, n), dtype=dt)
        self.graph = None
        #: why ``graph=True`` runs uncaptured here (None: captured, or not asked for)
        self.capture_failed: str | None = None
        if graph:
            self._capture()

    def _run(self) -> None:
        if self.fused:
            self._run_fused()
            return
        xp, L, C, n = self.xp, self.L, self.C, self.n
        xp.copyto(self.dl, xp.swapaxes(self.d_in.reshape(C, L, self.B, n), 0, 1))
        M, spare = self.M, self.spare
        xp.copyto(M, self.eye)
        for k in range(L - 1, -1, -1):                      # 1. up-sweep: M = M · diag(d_t) · W
            xp.multiply(M, self.dl[k][:, :, None, :], out=self.scaled)
            matmul_into(self.scaled.reshape(-1, n), self.W, spare.reshape(-1, n))
            M, spare = spare, M
        M = self._suffix_products(M, spare)                 # 2. suffix products by doubling
        xp.copyto(self.grads, self.grad_in[None, :, None, :])
        matmul_into(self.grads, M, self.starts)
        xp.copyto(self.cur[:C - 1], self.starts[1:])
        xp.copyto(self.cur[C - 1], self.grad_in[:, None, :])
        cur = self.cur
        for k in range(L - 1, -1, -1):                      # 3. down-sweep: vector-matrix products
            xp.multiply(cur, self.dl[k][:, :, None, :], out=self.scaled_rows)
            matmul_into(self.scaled_rows.reshape(-1, n), self.W, self.G[k].reshape(-1, n))
            cur = self.G[k]
        xp.copyto(self.out[:C * L].reshape(C, L, self.B, n), xp.swapaxes(self.G[:, :, :, 0], 0, 1))
        xp.copyto(self.out[C * L], self.grad_in)

    def _suffix_products(self, M: Any, spare: Any) -> Any:
        """The chunk totals M ``(C, B, n, n)`` scanned by doubling; returns the buffer that holds the result."""
        s, C = 1, self.C
        while s < C:
            matmul_into(M[s:], M[:C - s], spare[:C - s])
            self.xp.copyto(spare[C - s:], M[C - s:])
            M, spare = spare, M
            s *= 2
        return M

    def _run_fused(self) -> None:
        """The same three phases with each chunk phase one kernel (:mod:`course.bppsa.chunk_kernels`)."""
        chunk_products(self.d_in, self.W, self.M, self.L)                        # 1. every chunk's product
        S = self._suffix_products(self.M, self.spare)                            # 2. scanned by doubling
        chunk_walk(self.d_in, self.W, S, self.grad_in, self.out, self.L)          # 3. each chunk's L steps back
        self.xp.copyto(self.out[self.C * self.L], self.grad_in)

    def _capture(self) -> None:
        """Run once on a side stream (kernels compiled, cuBLAS's workspace made), then capture a run."""
        captured = capture_graph(self._run, what="BPPSA's backward (RNNBackwardPlan)", warmup=self._run)
        self.graph, self.capture_failed = captured.graph, captured.reason

    def __call__(self, d: Any, grad: Any) -> Any:
        """G = dL/dh_t ``(T+1, B, n)`` for ``d (T, B, n)`` and ``grad (B, n)``, in the plan's own buffer."""
        xp = self.xp
        if tuple(d.shape) != (self.T, self.B, self.n) or tuple(grad.shape) != (self.B, self.n):
            raise BadInputError(f"this plan is for d of shape {(self.T, self.B, self.n)} and grad "
                                f"{(self.B, self.n)}; got {tuple(d.shape)} and {tuple(grad.shape)}: make a new plan.")
        xp.copyto(self.d_in[self.pad:], d)
        xp.copyto(self.grad_in, grad)
        if self.graph is None:
            self._run()
        else:                                               # on the current stream, after the copies
            self.graph.launch(cupy_module().cuda.get_current_stream())
        return self.out[self.pad:]


# ----------------------------------------------------------------------------- the sequential GPU baseline

#: Steps of the Jacobians' diagonals ``d_t`` each lane holds in registers ahead of its chain, per element type.
SEQUENTIAL_STAGE = {"float32": 16, "float64": 8}
SEQUENTIAL_KERNELS = {"float32": "rnn_sequential_walk_f32", "float64": "rnn_sequential_walk_f64"}

SEQUENTIAL_SOURCE = r"""
#define MAX_STATE 32

template <typename T, int S>
__device__ void sequential_walk(const T* __restrict__ d, const T* __restrict__ W, const T* __restrict__ g,
                                T* __restrict__ out, const long long steps, const int B, const int n)
{   // the sequential backward a GPU programmer writes: one warp per batch row b walks the T steps back,
    // v <- (v * d_t) W, lane l holding v_l and column l of W in registers; u_j = v_j d_tj reaches every lane
    // by a warp shuffle.  The next S steps of d are loaded before this tile's dependent steps run, and the
    // n products of a step are summed in four independent chains.
    const int l = threadIdx.x;
    const long long b = blockIdx.x;
    if (b >= B) return;
    T w[MAX_STATE];
    #pragma unroll
    for (int j = 0; j < MAX_STATE; ++j) w[j] = (j < n && l < n) ? W[j * n + l] : T(0);
    T v = l < n ? g[b * n + l] : T(0);
    T dp[S];
    #pragma unroll
    for (int k = 0; k < S; ++k) {
        const long long t = steps - 1 - k;
        dp[k] = (t >= 0 && l < n) ? __ldg(d + (t * B + b) * n + l) : T(0);
    }
    for (long long t0 = steps - 1; t0 >= 0; t0 -= S) {
        T nd[S];
        #pragma unroll
        for (int k = 0; k < S; ++k) {                   // the next tile's diagonals, issued first
            const long long t = t0 - S - k;
            nd[k] = (t >= 0 && l < n) ? __ldg(d + (t * B + b) * n + l) : T(0);
        }
        #pragma unroll
        for (int k = 0; k < S; ++k) {
            const long long t = t0 - k;
            if (t >= 0) {                               // warp-uniform: every lane takes the same branch
                const T u = v * dp[k];
                T acc[4] = {T(0), T(0), T(0), T(0)};
                #pragma unroll
                for (int j = 0; j < MAX_STATE; ++j) acc[j & 3] += __shfl_sync(0xffffffffu, u, j) * w[j];
                v = (acc[0] + acc[1]) + (acc[2] + acc[3]);
                if (l < n) out[(t * B + b) * n + l] = v;
            }
        }
        #pragma unroll
        for (int k = 0; k < S; ++k) dp[k] = nd[k];
    }
}

extern "C" __global__ void __launch_bounds__(32)
rnn_sequential_walk_f32(const float* d, const float* W, const float* g, float* out, long long steps, int B, int n)
{ sequential_walk<float, 16>(d, W, g, out, steps, B, n); }

extern "C" __global__ void __launch_bounds__(32)
rnn_sequential_walk_f64(const double* d, const double* W, const double* g, double* out, long long steps, int B,
                        int n)
{ sequential_walk<double, 8>(d, W, g, out, steps, B, n); }
"""


def sequential_walk_reference(d: np.ndarray, W: np.ndarray, g: np.ndarray, out: np.ndarray, stage: int) -> None:
    """The sequential kernel in NumPy, every batch row's warp at once, tile by tile as the kernel walks: the
    diagonals of the next ``stage`` steps read before this tile's steps, ``v ← (v · d_t) W`` back from ``g``,
    ``out[t] = v`` for t = T-1 … 0 (``d (T, B, n)``, ``out (≥ T, B, n)``)."""
    validate_walk_arrays(d, W, g, out, stage)
    T = d.shape[0]
    v = g.astype(out.dtype, copy=True)
    tiles = list(range(T - 1, -1, -stage))
    dp = d[max(T - stage, 0):T][::-1].copy()
    for t0 in tiles:
        lo = t0 - 2 * stage + 1
        nd = d[max(lo, 0):max(t0 - stage + 1, 0)][::-1].copy()
        for k in range(min(stage, t0 + 1)):
            v = (v * dp[k]) @ W
            out[t0 - k] = v
        dp = nd


def validate_walk_arrays(d: Any, W: Any, g: Any, out: Any, stage: Any) -> int:
    """``stage`` as an int when ``d (T, B, n)``, ``W (n, n)``, ``g (B, n)`` and ``out (>= T, B, n)`` fit each other."""
    stage = whole_number("stage", stage, hint="steps prefetched")
    ds, ws, gs, os_ = (tuple(getattr(x, "shape", ())) for x in (d, W, g, out))
    if len(ds) != 3 or ws != (ds[2], ds[2]) or gs != ds[1:] or len(os_) != 3 or os_[1:] != ds[1:] or os_[0] < ds[0]:
        raise BadInputError(f"d must be (T, B, n), W (n, n), g (B, n) and out (>= T, B, n); got {ds}, {ws}, {gs}, "
                            f"{os_}")
    return stage


def _sequential_twin(grid: tuple, block: tuple, args: tuple) -> None:
    d, W, g, out, steps, B, n = (np.asarray(a) for a in args)
    steps, B, n = int(steps), int(B), int(n)
    if tuple(block)[:1] != (32,) or tuple(grid)[0] != B or not 1 <= n <= MAX_STATE:
        raise RuntimeError(f"rnn_sequential_walk launched with grid {grid}, block {block}; needs ({B},), (32,)")
    sequential_walk_reference(d[:steps], W, g.reshape(B, n), out, SEQUENTIAL_STAGE[out.dtype.name])


for _dtype, _name in SEQUENTIAL_KERNELS.items():        # the stand-in GPU runs the twin instead
    register_kernel(_name, _sequential_twin)

_SEQUENTIAL: list = [None, {}]


def _sequential_kernels() -> dict:
    cp = cupy_module()
    if _SEQUENTIAL[0] is not cp:
        mod = cp.RawModule(code=SEQUENTIAL_SOURCE, options=("--std=c++14",))
        _SEQUENTIAL[:] = [cp, {dt: mod.get_function(name) for dt, name in SEQUENTIAL_KERNELS.items()}]
    return _SEQUENTIAL[1]


def _require_sequential_plan(T: int, B: int, n: int, W: Any, graph: bool) -> None:
    if array_device(W) != "gpu" or not fused_available(n, W.dtype):
        raise BadInputError(f"SequentialBackwardPlan runs a CUDA C kernel: it needs W on the GPU, float32 or float64, "
                            f"and a state of at most {MAX_STATE}; got W on {array_device(W)}, {W.dtype}, n = {n}.")
    require_fits((2 * T + 2) * B * n * W.dtype.itemsize, "gpu", what=f"a sequential backward plan for T = {T:,}")


class SequentialBackwardPlan:
    """The sequential GPU backward of the tanh RNN, the baseline BPPSA is held to: G = dL/dh_t ``(T+1, B, n)`` for
    ``d (T, B, n)`` and ``grad (B, n)``, by one kernel (:data:`SEQUENTIAL_SOURCE`): one warp per batch row walks
    the T steps back with its state and W's columns in registers and the diagonals prefetched a tile ahead.
    ``graph=True`` records the kernel (and the copy of ``grad`` into ``G[T]``) as a CUDA graph, replayed on each
    call.  The returned G is the plan's own buffer.
    """

    @arguments(T=Whole(hint="the chain's length"), B=Whole(hint="the batch"), n=Whole(hint="the state size"),
               W=Given(validate_plan_weight, earlier=["n"]), then=_require_sequential_plan)
    def __init__(self, T: int, B: int, n: int, W: Any, graph: bool = True):
        xp = self.xp = xp_of(W)
        self.T, self.B, self.n = T, B, n
        self.W = xp.ascontiguousarray(W)
        self.d_in = xp.zeros((T, B, n), dtype=W.dtype)
        self.grad_in = xp.zeros((B, n), dtype=W.dtype)
        self.out = xp.empty((T + 1, B, n), dtype=W.dtype)
        self.graph, self.capture_failed = None, None
        if graph:
            captured = capture_graph(self._run, what="the sequential RNN backward (SequentialBackwardPlan)",
                                     warmup=self._run)
            self.graph, self.capture_failed = captured.graph, captured.reason

    def _run(self) -> None:
        kernel = _sequential_kernels()[np.dtype(self.W.dtype).name]
        kernel((self.B,), (32,), (self.d_in, self.W, self.grad_in, self.out, np.int64(self.T), np.int32(self.B),
                                  np.int32(self.n)))
        self.xp.copyto(self.out[self.T], self.grad_in)

    def __call__(self, d: Any, grad: Any) -> Any:
        """G for ``d (T, B, n)`` and ``grad (B, n)``, in the plan's own buffer (the next call overwrites it)."""
        if tuple(d.shape) != (self.T, self.B, self.n) or tuple(grad.shape) != (self.B, self.n):
            raise BadInputError(f"this plan is for d of shape {(self.T, self.B, self.n)} and grad "
                                f"{(self.B, self.n)}; got {tuple(d.shape)} and {tuple(grad.shape)}: make a new plan.")
        self.xp.copyto(self.d_in, d)
        self.xp.copyto(self.grad_in, grad)
        if self.graph is None:
            self._run()
        else:
            self.graph.launch(cupy_module().cuda.get_current_stream())
        return self.out
