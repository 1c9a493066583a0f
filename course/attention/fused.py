"""Lesson 08 on a GPU: a fused attention forward in CUDA C, one block per query tile (through CuPy).

:func:`~course.attention.flash_attention` in NumPy calls a library for every tile; on a GPU each call is
a kernel launch, and every tile's scores go through DRAM between launches.  Here the whole forward pass
is one kernel, written the way the lesson's exercise is, at full size:

* a block of 128 threads owns 32 query rows; four neighbouring threads share a row, each holding a
  quarter of its query (pre-multiplied by ``scale · log2 e``, so that ``exp2`` can replace ``exp``) and a
  quarter of its output accumulator, in registers;
* the block walks the keys in tiles of 32: it loads a K tile and a V tile into shared memory (each thread
  a strided share, neighbouring threads on neighbouring floats: coalesced), waits at a barrier, and each
  row computes its 32 scores (a dot product split over its four threads, summed by two warp shuffles);
* the row's state ``(m, l, acc)`` takes the tile as :func:`~course.attention.softmax.softmax_combine`
  does: the tile's maximum, the old sum and accumulator rescaled by ``exp2(m_old - m_new)``, the tile's
  probabilities added;
* at the end each row writes ``acc / l`` and its log-sum-exp.  The scores never leave the chip, and K and V
  are read once per query tile (:func:`~course.attention.traffic.tile_traffic` counts them).

It is compiled for head sizes 32, 64 and 128 (float32), checked for sm_75/sm_80/sm_90 without a GPU by
``tools/ptxas_report.py`` (no register spills), and has a NumPy twin that the stand-in GPU runs
(:mod:`course.standin`).  It is a teaching kernel: no tensor cores, no asynchronous copies, no split of
the keys across blocks; the timings set it beside PyTorch's ``scaled_dot_product_attention``.

>>> fused_plan(n=1000, heads=8)
{'grid': (32, 8), 'threads': 128, 'rows_per_block': 32, 'keys_per_tile': 32}
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ..arguments import Whole, arguments
from ..devices import array_device, cupy_module, require_gpu
from ..errors import BadInputError
from ..standin import register_kernel

__all__ = ["FUSED_FORWARD_SOURCE", "FUSED_HEAD_DIMS", "FUSED_KERNELS", "ROWS_PER_BLOCK", "KEYS_PER_TILE",
           "fused_attention", "fused_plan", "validate_fused"]

#: Query rows per block, threads per row, keys per shared-memory tile (the source's ROWS, LPR, BK).
ROWS_PER_BLOCK, LANES_PER_ROW, KEYS_PER_TILE = 32, 4, 32
#: Head sizes the kernel is compiled for, and the kernel of each.
FUSED_HEAD_DIMS = (32, 64, 128)
FUSED_KERNELS = {d: f"course_flash_forward_d{d}" for d in FUSED_HEAD_DIMS}

FUSED_FORWARD_SOURCE = r"""
#define ROWS 32                    // query rows per block
#define LPR 4                      // threads per query row
#define THREADS (ROWS * LPR)
#define BK 32                      // keys per shared-memory tile
#define FULL 0xffffffffu
#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

__device__ __forceinline__ float neg_inf() { return -__int_as_float(0x7f800000); }

template <int D>
__device__ void flash_forward(const float* __restrict__ q, const float* __restrict__ k,
                              const float* __restrict__ v, float* __restrict__ out, float* __restrict__ lse,
                              int n, int n_k, float scale, int causal) {
    constexpr int PER = D / LPR;                           // features of a row each of its threads holds
    __shared__ float sk[BK][D];
    __shared__ float sv[BK][D];
    const int t = threadIdx.x, lane = t % LPR;
    const int row = blockIdx.x * ROWS + t / LPR;
    const long long head = blockIdx.y;
    const float* qh = q + head * (long long)n * D;
    const float* kh = k + head * (long long)n_k * D;
    const float* vh = v + head * (long long)n_k * D;

    float qr[PER], acc[PER];
    #pragma unroll
    for (int c = 0; c < PER; c++) {
        qr[c] = row < n ? qh[(long long)row * D + lane + LPR * c] * (scale * LOG2E) : 0.f;
        acc[c] = 0.f;
    }
    float m = neg_inf(), l = 0.f;                          // the row's state: max (base 2) and sum
    const int last_row = min((int)(blockIdx.x + 1) * ROWS, n) - 1;
    const int key_end = causal ? min(n_k, last_row + 1) : n_k;   // causal: tiles past the last row skipped

    for (int j0 = 0; j0 < key_end; j0 += BK) {
        __syncthreads();                                   // everyone is done with the previous tile
        for (int e = t; e < BK * D; e += THREADS) {        // neighbouring threads, neighbouring floats
            const int j = e / D, c = e % D;
            const bool in = j0 + j < n_k;
            sk[j][c] = in ? kh[(long long)(j0 + j) * D + c] : 0.f;
            sv[j][c] = in ? vh[(long long)(j0 + j) * D + c] : 0.f;
        }
        __syncthreads();

        float s[BK];
        float tile_max = neg_inf();
        #pragma unroll
        for (int j = 0; j < BK; j++) {
            float part = 0.f;
            #pragma unroll
            for (int c = 0; c < PER; c++) part += qr[c] * sk[j][lane + LPR * c];
            part += __shfl_xor_sync(FULL, part, 1);       // the row's four threads add their quarters
            part += __shfl_xor_sync(FULL, part, 2);
            const bool seen = j0 + j < n_k && (!causal || j0 + j <= row);
            s[j] = seen ? part : neg_inf();
            tile_max = fmaxf(tile_max, s[j]);
        }
        const float m_new = fmaxf(m, tile_max);
        if (m_new == neg_inf()) continue;                  // nothing this row may see yet
        const float rescale = exp2f(m - m_new);            // exp2(-inf) = 0 for the first tile
        l *= rescale;
        #pragma unroll
        for (int c = 0; c < PER; c++) acc[c] *= rescale;
        #pragma unroll
        for (int j = 0; j < BK; j++) {
            const float p = exp2f(s[j] - m_new);
            l += p;
            #pragma unroll
            for (int c = 0; c < PER; c++) acc[c] += p * sv[j][lane + LPR * c];
        }
        m = m_new;
    }
    if (row < n) {
        const float inv = 1.f / l;
        #pragma unroll
        for (int c = 0; c < PER; c++) out[(head * n + row) * D + lane + LPR * c] = acc[c] * inv;
        if (lane == 0) lse[head * n + row] = (m + log2f(l)) * LN2;   // back to the natural log
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
course_flash_forward_d32(const float* q, const float* k, const float* v, float* out, float* lse,
                         int n, int n_k, float scale, int causal) {
    flash_forward<32>(q, k, v, out, lse, n, n_k, scale, causal);
}

extern "C" __global__ void __launch_bounds__(THREADS)
course_flash_forward_d64(const float* q, const float* k, const float* v, float* out, float* lse,
                         int n, int n_k, float scale, int causal) {
    flash_forward<64>(q, k, v, out, lse, n, n_k, scale, causal);
}

extern "C" __global__ void __launch_bounds__(THREADS)
course_flash_forward_d128(const float* q, const float* k, const float* v, float* out, float* lse,
                         int n, int n_k, float scale, int causal) {
    flash_forward<128>(q, k, v, out, lse, n, n_k, scale, causal);
}
"""


@functools.cache
def _module(cp: Any) -> Any:                               # compiled once per CuPy (or stand-in)
    return cp.RawModule(code=FUSED_FORWARD_SOURCE, options=("--std=c++14",))


def _twin(grid: tuple, block: tuple, args: tuple) -> None:
    """What one launch does, in NumPy, for the stand-in GPU: the tiled forward of each head into ``out``
    and ``lse`` (float32 throughout)."""
    from .forward import flash_attention

    q, k, v, out, lse = (np.asarray(a) for a in args[:5])
    n, n_k, scale, causal = int(args[5]), int(args[6]), float(args[7]), bool(args[8])
    heads, d = int(grid[1]), q.size // max(int(grid[1]) * n, 1)
    if tuple(block) != (ROWS_PER_BLOCK * LANES_PER_ROW,) or int(grid[0]) != -(-n // ROWS_PER_BLOCK):
        raise RuntimeError(f"fused attention launched with grid {grid}, block {block} for n = {n}")
    o, s = flash_attention(q.reshape(heads, n, d), k.reshape(heads, n_k, d), v.reshape(heads, n_k, d), causal,
                           scale, block_q=ROWS_PER_BLOCK, block_k=KEYS_PER_TILE)
    out.reshape(heads, n, d)[...] = o
    lse.reshape(heads, n)[...] = s


for _name in FUSED_KERNELS.values():                       # the stand-in GPU runs the twin instead
    register_kernel(_name, _twin)


@arguments(n=Whole(hint="query rows"), heads=Whole(hi=65535, hint="batch × heads, the grid's second axis"))
def fused_plan(n: int, heads: int = 1) -> dict:
    """The launch :func:`fused_attention` makes for ``n`` query rows and ``heads`` independent heads."""
    return {"grid": (-(-n // ROWS_PER_BLOCK), heads), "threads": ROWS_PER_BLOCK * LANES_PER_ROW,
            "rows_per_block": ROWS_PER_BLOCK, "keys_per_tile": KEYS_PER_TILE}


def validate_fused(q: Any, k: Any, v: Any, causal: bool, scale: float | None) -> tuple[Any, Any, Any, float, int]:
    """``(q, k, v, scale, heads)`` for the kernel: CuPy float32 arrays ``(..., n, d)`` with ``d`` in
    :data:`FUSED_HEAD_DIMS` (values of the same size), contiguous; a clear error otherwise."""
    require_gpu()
    from .forward import validate_attention

    if any(array_device(a) != "gpu" for a in (q, k, v)):
        raise BadInputError("fused_attention runs on the GPU: pass CuPy arrays (course.to_device(x, 'gpu')).")
    if any(getattr(a, "dtype", None) != np.float32 for a in (q, k, v)):
        raise BadInputError("fused_attention is compiled for float32; convert with x.astype('float32').")
    q, k, v, scale, xp = validate_attention(q, k, v, causal, scale)
    d = q.shape[-1]
    if d not in FUSED_HEAD_DIMS or v.shape[-1] != d:
        raise BadInputError(f"fused_attention is compiled for head sizes {FUSED_HEAD_DIMS}, with values of the "
                            f"same size; got d = {d}, d_v = {v.shape[-1]}. Use flash_attention for other sizes.")
    heads = math.prod(q.shape[:-2])
    if heads > 65535:
        raise BadInputError(f"fused_attention launches one grid row per head, at most 65,535; got {heads:,}.")
    return (*(xp.ascontiguousarray(a) for a in (q, k, v)), scale, heads)


def fused_attention(q: Any, k: Any, v: Any, causal: bool = False, scale: float | None = None) -> tuple[Any, Any]:
    """``(out, lse)`` of attention by the fused kernel, on the GPU (CuPy float32 arrays, ``(..., n, d)``).

    Equal to :func:`~course.attention.flash_attention` up to float32 rounding; ``causal`` and ``scale`` as
    there.
    """
    q, k, v, scale, heads = validate_fused(q, k, v, causal, scale)
    cp = cupy_module()
    n, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    out = cp.empty(q.shape, dtype=cp.float32)
    lse = cp.empty(q.shape[:-1], dtype=cp.float32)
    plan = fused_plan(n, max(heads, 1))
    kernel = _module(cp).get_function(FUSED_KERNELS[d])
    kernel(plan["grid"], (plan["threads"],), (q, k, v, out, lse, np.int32(n), np.int32(n_k), np.float32(scale),
                                              np.int32(bool(causal))))
    return out, lse
