"""Lesson 04 at the GPU's limit: a single-pass scan with decoupled look-back (Merrill & Garland, 2016).

The block scans of :mod:`course.scan.kernels` read and write every element twice (or read it
twice): the tiles cannot know what comes before them until every earlier tile is done, so a
second pass adds it.  A single-pass scan reads each element once and writes it once, so it can
run at the speed of a device-to-device copy.  Each tile, in one launch:

1. takes the next tile number from a ticket counter on the device (so a tile only starts once
   every earlier tile has started: nobody waits for a tile that is not running), and reads the
   launch's *epoch*;
2. loads its tile with 16-byte loads (``float4``), scans it in registers and with warp
   shuffles (``__shfl_up_sync``), and **publishes its aggregate** (flag ``A``) at once;
3. **looks back**: one warp reads the flags of the 32 tiles before it at a time.  Every
   ``A`` it passes adds that tile's aggregate; the first inclusive prefix (flag ``P``) ends
   the walk.  A tile whose predecessor has published nothing yet (``X``) waits for it;
4. publishes its own inclusive prefix (``P``) for the tiles after it, and writes its output;
5. counts itself finished: the last tile of the launch resets the ticket and the count to 0
   and advances the epoch, so the next launch starts clean with no work on the host.

A flag and its value share one 64-bit word, stored and read in one piece, so a reader never
sees a flag without its value.  The high 32 bits also carry the epoch (the launch number modulo
2^30): words left over from an earlier launch count as ``X``, so the flags are not cleared between
calls and a scan is one launch (only when the epoch wraps does that launch's last tile clear them).
Because all the bookkeeping lives on the device, a launch replayed from a CUDA graph, with the very
arguments it was captured with, is as good as a fresh call.

:mod:`course.scan.lookback` runs the same protocol in plain Python, tile by tile in a random
interleaving and launch after launch on one device state, so it can be read, traced and tested
without a GPU; :func:`single_pass_scan` runs the CUDA C (:data:`SINGLE_PASS_SOURCE`) through
CuPy's ``RawModule``.

>>> single_pass_tiles(10_000)
3
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..devices import array_device, cupy_module, require_gpu
from ..errors import BadInputError, whole_number
from ..standin import register_kernel
from .lookback import EPOCHS, lookback_model  # noqa: F401  (notebook 04 calls singlepass.lookback_model)

__all__ = ["SINGLE_PASS_SOURCE", "SINGLE_PASS_DTYPES", "SINGLE_PASS_KERNELS", "TILE_THREADS", "TILE_ITEMS",
           "single_pass_scan", "single_pass_tiles"]

#: Threads per tile and elements per thread of the CUDA kernel (a tile holds 256 x 16 = 4,096).
TILE_THREADS = 256
TILE_ITEMS = 16
#: Element types the kernel is compiled for (a value must fit beside its flag in 64 bits), and its names.
SINGLE_PASS_DTYPES = ("float32", "int32")
SINGLE_PASS_KERNELS = {"float32": "course_single_pass_scan_f32", "int32": "course_single_pass_scan_i32"}
#: The device state words: the tile ticket, the tiles finished, the epoch (and one word of padding).
COUNTER, FINISHED, EPOCH, STATE_WORDS = 0, 1, 2, 4

SINGLE_PASS_SOURCE = r"""
#define THREADS 256
#define ITEMS 16
#define TILE (THREADS * ITEMS)
#define WARPS (THREADS / 32)
#define FLAG_A 1u
#define FLAG_P 2u
#define FULL 0xffffffffu
#define EPOCHS (1u << 30)   // course.scan.lookback.EPOCHS
#define COUNTER 0
#define FINISHED 1
#define EPOCH 2
// a thread's ITEMS elements are one row of ITEMS + 1 words: the rows' reads hit 32 different banks
#define SLOT(i) ((i) / ITEMS * (ITEMS + 1) + (i) % ITEMS)

__device__ __forceinline__ unsigned int to_bits(float v) { return __float_as_uint(v); }
__device__ __forceinline__ unsigned int to_bits(int v) { return (unsigned int)v; }
__device__ __forceinline__ void from_bits(unsigned int b, float& v) { v = __uint_as_float(b); }
__device__ __forceinline__ void from_bits(unsigned int b, int& v) { v = (int)b; }

// one 64-bit word per tile: high = epoch * 4 + flag, low = the value's bits
__device__ __forceinline__ void publish(unsigned long long* status, long long tile, unsigned int epoch,
                                        unsigned int flag, unsigned int bits) {
    unsigned long long word = ((unsigned long long)(epoch * 4u + flag) << 32) | bits;
    atomicExch(status + tile, word);
}

// Step 5, run by thread 0 of every tile after the barrier that ends the look-back: by then the tile
// has taken its ticket, read the epoch, and made every status read and write it will make (warp 0's,
// ordered before thread 0 by that __syncthreads); only its own output stores remain.
// Why the last tile may reset the state while no tile of this launch can notice:
//  (a) the fence before the count orders everything this tile did so far before its count;
//  (b) the tile whose count returns gridDim.x - 1 has observed every other tile's count; the fence
//      after it orders the resets (and a wrap's clearing of the status words) after all of them.
//  Through FINISHED, (a) and (b) synchronise: every ticket was taken and every tile of this launch
//  had read the epoch before the reset, so none can take a reset ticket, read the next epoch, or
//  read a cleared status word.
// The next launch on the stream, or the next replay of a graph, sees the reset: a kernel's writes
// are visible to the kernels after it in the same stream.
// The epoch wraps after EPOCHS = 2^30 launches, and a status word written 2^30 launches earlier would
// carry the coming launch's tag; so the wrapping launch's last tile clears every status word (finish
// returns 1) and the workspace is as new: no host counter is needed.
__device__ __forceinline__ int finish(unsigned int* state, unsigned int epoch) {
    __threadfence();                                                      // (a)
    if (atomicAdd(state + FINISHED, 1u) != gridDim.x - 1) return 0;
    __threadfence();                                                      // (b)
    unsigned int next = (epoch + 1u) % EPOCHS;
    atomicExch(state + COUNTER, 0u);
    atomicExch(state + FINISHED, 0u);
    atomicExch(state + EPOCH, next);
    return next == 0u;
}

template <typename T>
__device__ __forceinline__ T warp_inclusive(T v, int lane) {
    #pragma unroll
    for (int d = 1; d < 32; d *= 2) {
        T up = __shfl_up_sync(FULL, v, d);
        if (lane >= d) v += up;
    }
    return v;
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
    #pragma unroll
    for (int d = 16; d > 0; d /= 2) v += __shfl_xor_sync(FULL, v, d);
    return v;
}

template <typename T, typename V4>
__device__ void single_pass(const T* __restrict__ x, T* __restrict__ out, long long n,
                            unsigned long long* status, unsigned int* state, long long capacity, int vec) {
    __shared__ T tile_data[THREADS * (ITEMS + 1)];
    __shared__ T warp_totals[WARPS];
    __shared__ T tile_prefix;
    __shared__ unsigned int tile_ticket, tile_epoch;
    __shared__ int wrapped;
    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    if (t == 0) {
        tile_ticket = atomicAdd(state + COUNTER, 1u);                     // tiles start in order
        tile_epoch = *(volatile unsigned int*)(state + EPOCH);            // this launch's epoch
    }
    __syncthreads();
    const long long tile = tile_ticket;
    const unsigned int epoch = tile_epoch;
    const long long base = tile * TILE;
    const bool full = base + TILE <= n;

    // 1. load: 16-byte loads, neighbouring threads on neighbouring addresses
    if (full && vec) {
        const V4* x4 = reinterpret_cast<const V4*>(x + base);
        #pragma unroll
        for (int j = 0; j < ITEMS / 4; j++) {
            V4 v = x4[j * THREADS + t];
            int s = SLOT(4 * (j * THREADS + t));
            tile_data[s] = v.x; tile_data[s + 1] = v.y; tile_data[s + 2] = v.z; tile_data[s + 3] = v.w;
        }
    } else {
        for (int j = 0; j < ITEMS; j++) {
            long long i = base + j * THREADS + t;
            tile_data[SLOT(j * THREADS + t)] = i < n ? x[i] : (T)0;
        }
    }
    __syncthreads();

    // 2. scan: each thread its ITEMS consecutive elements, then the threads by warp shuffles
    T items[ITEMS];
    T run = 0;
    #pragma unroll
    for (int j = 0; j < ITEMS; j++) { run += tile_data[t * (ITEMS + 1) + j]; items[j] = run; }
    T incl = warp_inclusive(run, lane);
    if (lane == 31) warp_totals[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        T w = lane < WARPS ? warp_totals[lane] : (T)0;
        w = warp_inclusive(w, lane);
        if (lane < WARPS) warp_totals[lane] = w;
    }
    __syncthreads();
    const T aggregate = warp_totals[WARPS - 1];
    T before = __shfl_up_sync(FULL, incl, 1);                             // exclusive within the warp
    if (lane == 0) before = 0;
    before += warp > 0 ? warp_totals[warp - 1] : (T)0;                    // ... and within the tile

    // 3. publish the aggregate, look back, publish the inclusive prefix
    if (warp == 0) {
        T exclusive = 0;
        if (tile == 0) {
            if (lane == 0) publish(status, 0, epoch, FLAG_P, to_bits(aggregate));
        } else {
            if (lane == 0) publish(status, tile, epoch, FLAG_A, to_bits(aggregate));
            long long window = tile - 1;            // lane k reads tile window - k
            while (true) {
                long long pred = window - lane;
                unsigned long long word;
                unsigned int flag;
                do {
                    word = pred >= 0 ? *(volatile unsigned long long*)(status + pred)
                                     : ((unsigned long long)(epoch * 4u + FLAG_P) << 32);
                    unsigned int hi = (unsigned int)(word >> 32);
                    flag = (hi >> 2) == epoch ? (hi & 3u) : 0u;          // another launch's word is X
                } while (__any_sync(FULL, flag == 0u));
                T v;
                from_bits((unsigned int)word, v);
                unsigned int inclusive = __ballot_sync(FULL, flag == FLAG_P);
                if (inclusive) {
                    int nearest = __ffs(inclusive) - 1;   // the closest tile with its inclusive prefix
                    exclusive += warp_sum(lane <= nearest ? v : (T)0);
                    break;
                }
                exclusive += warp_sum(v);
                window -= 32;
            }
            if (lane == 0) publish(status, tile, epoch, FLAG_P, to_bits(exclusive + aggregate));
        }
        if (lane == 0) tile_prefix = exclusive;
    }
    __syncthreads();

    // 4. write: the scanned items back through shared memory, then 16-byte stores
    const T offset = tile_prefix + before;
    #pragma unroll
    for (int j = 0; j < ITEMS; j++) tile_data[t * (ITEMS + 1) + j] = items[j] + offset;
    if (t == 0) wrapped = finish(state, epoch);                           // 5. (see finish)
    __syncthreads();
    if (full && vec) {
        V4* o4 = reinterpret_cast<V4*>(out + base);
        #pragma unroll
        for (int j = 0; j < ITEMS / 4; j++) {
            int s = SLOT(4 * (j * THREADS + t));
            V4 v;
            v.x = tile_data[s]; v.y = tile_data[s + 1]; v.z = tile_data[s + 2]; v.w = tile_data[s + 3];
            o4[j * THREADS + t] = v;
        }
    } else {
        for (int j = 0; j < ITEMS; j++) {
            long long i = base + j * THREADS + t;
            if (i < n) out[i] = tile_data[SLOT(j * THREADS + t)];
        }
    }
    if (wrapped)                              // every other tile is done: no one reads status any more
        for (long long i = t; i < capacity; i += THREADS) status[i] = 0ull;
}

extern "C" __global__ void __launch_bounds__(THREADS)
course_single_pass_scan_f32(const float* x, float* out, long long n, unsigned long long* status,
                            unsigned int* state, long long capacity, int vec) {
    single_pass<float, float4>(x, out, n, status, state, capacity, vec);
}

extern "C" __global__ void __launch_bounds__(THREADS)
course_single_pass_scan_i32(const int* x, int* out, long long n, unsigned long long* status,
                            unsigned int* state, long long capacity, int vec) {
    single_pass<int, int4>(x, out, n, status, state, capacity, vec);
}
"""


# ------------------------------------------------------------------ the host side

@functools.cache
def _kernels() -> dict:                                   # CuPy loads each kernel once per device itself
    mod = cupy_module().RawModule(code=SINGLE_PASS_SOURCE, options=("--std=c++14",))
    return {dtype: mod.get_function(name) for dtype, name in SINGLE_PASS_KERNELS.items()}


class _Workspace:
    """One stream's status words and state words (ticket, finished, epoch) on the device.

    Never freed while the process lives, because a captured CUDA graph may still replay a launch
    that points at it; it also keeps its stream alive, so that no other stream gets its handle.
    """

    def __init__(self, cp: Any, tiles: int, stream: Any) -> None:
        self.status = cp.zeros(1 << max(10, (tiles - 1).bit_length()), dtype=cp.uint64)
        self.state = cp.zeros(STATE_WORDS, dtype=cp.uint32)
        self.stream = stream


#: The workspace of each (device, stream handle), and those a bigger one replaced (kept for graphs).
_WORKSPACES: dict[tuple[int, int], _Workspace] = {}
_RETIRED: list[_Workspace] = []


def _workspace(cp: Any, tiles: int) -> _Workspace:
    """The current stream's workspace, with room for ``tiles`` (allocated, never while capturing)."""
    stream = cp.cuda.get_current_stream()
    key = (cp.cuda.Device().id, stream.ptr)
    ws = _WORKSPACES.get(key)
    if ws is not None and ws.status.size >= tiles:
        return ws
    if stream.is_capturing():
        raise BadInputError(f"single_pass_scan needs a workspace for {tiles:,} tiles on this stream, and cannot "
                            "allocate one while the stream is capturing a CUDA graph: call single_pass_scan once "
                            "on this stream, at this size or larger, before capturing.")
    if ws is not None:
        _RETIRED.append(ws)                               # a captured graph may still replay it
    ws = _WORKSPACES[key] = _Workspace(cp, tiles, stream)
    return ws


def _address(a: Any) -> int:
    data = getattr(a, "data", None)
    return data.ptr if hasattr(data, "ptr") else a.__array_interface__["data"][0]


def _launch_args(x: Any, out: Any, ws: _Workspace) -> tuple:
    """The kernel's arguments, in the order of its C signature: no per-call bookkeeping, so a graph
    that captured them replays correctly."""
    vec = int(_address(x) % 16 == 0 and _address(out) % 16 == 0)
    return (x, out, np.int64(x.size), ws.status, ws.state, np.int64(ws.status.size), np.int32(vec))


def _single_pass_twin(grid: tuple, block: tuple, args: tuple) -> None:
    """What one launch of the kernel does, in NumPy, for :mod:`course.standin`: the scan into
    ``out``, each tile's status word (``P`` and its inclusive prefix, tagged with the epoch), and
    the state words reset with the epoch advanced (the status words cleared when it wraps)."""
    x, out, n, status, state, capacity, _ = (np.asarray(a) for a in args)
    tiles, n, capacity = int(grid[0]), int(n), int(capacity)
    if (tuple(block) != (TILE_THREADS,) or tiles != single_pass_tiles(n) or tiles > capacity
            or status.size != capacity or state[COUNTER] or state[FINISHED]):
        raise RuntimeError(f"single-pass launch out of order: grid {grid}, block {block}, n {n}, capacity "
                           f"{capacity}, state {state.tolist()} (the kernel needs a clean state and room)")
    epoch = int(state[EPOCH])
    out[:n] = np.cumsum(x[:n], dtype=x.dtype)
    ends = np.minimum(np.arange(1, tiles + 1) * (TILE_THREADS * TILE_ITEMS), n) - 1
    status[:tiles] = (np.uint64(epoch * 4 + 2) << np.uint64(32)) | out[ends].view(np.uint32).astype(np.uint64)
    state[COUNTER] = state[FINISHED] = 0
    state[EPOCH] = (epoch + 1) % EPOCHS
    if state[EPOCH] == 0:
        status[:] = 0


for _kernel in SINGLE_PASS_KERNELS.values():                   # the stand-in GPU runs the twin instead
    register_kernel(_kernel, _single_pass_twin)


def single_pass_tiles(n: int) -> int:
    """Tiles (thread blocks) the kernel launches for ``n`` elements.

    >>> single_pass_tiles(2**26)
    16384
    """
    n = whole_number("n", n, 0, hint="the length of the scan")
    return -(-n // (TILE_THREADS * TILE_ITEMS))


def single_pass_scan(x: Any, out: Any = None) -> Any:
    """Inclusive sum of a 1-D CuPy array in one kernel launch (decoupled look-back).

    ``x``: float32 or int32, 1-D (a non-contiguous one is copied first).  ``out``: optional
    contiguous array of the same shape and dtype.  Each stream has its own workspace on the
    device, so calls on different streams never share tile tickets.  The call can be captured in
    a CUDA graph (pass ``out``, a contiguous ``x``, and call it once on that stream before
    capturing, so that its workspace exists); replaying the graph is a correct scan each time, but
    never replay it on two streams at once, nor beside calls on the stream it was captured on.

    Float32 sums are added in a different order than a sequential loop, so they differ from
    ``numpy.cumsum`` by rounding (compare in float64 with a tolerance).
    """
    _validate_single_pass(x, out)
    cp = cupy_module()
    x = cp.ascontiguousarray(x)
    if out is None:
        out = cp.empty_like(x)
    if x.size == 0:
        return out
    tiles = single_pass_tiles(x.size)
    ws = _workspace(cp, tiles)
    _kernels()[str(x.dtype)]((tiles,), (TILE_THREADS,), _launch_args(x, out, ws))
    return out


def _validate_single_pass(x: Any, out: Any) -> None:
    require_gpu()
    if array_device(x) != "gpu":
        raise BadInputError("single_pass_scan needs a CuPy array; move x with course.to_device(x, 'gpu').")
    if x.ndim != 1:
        raise BadInputError(f"single_pass_scan scans a 1-D array, got shape {tuple(x.shape)}; "
                            "flatten it with x.ravel() or scan each row with cupy.cumsum(x, axis=...).")
    if str(x.dtype) not in SINGLE_PASS_DTYPES:
        raise BadInputError(f"single_pass_scan is compiled for {list(SINGLE_PASS_DTYPES)}, got {x.dtype}; "
                            "convert with x.astype('float32').")
    if x.size >= 2**31 * TILE_THREADS:
        raise BadInputError(f"x has {x.size:,} elements, more than the kernel's grid can cover.")
    if out is not None and (array_device(out) != "gpu" or out.shape != x.shape or out.dtype != x.dtype
                            or not out.flags.c_contiguous):
        raise BadInputError(f"out must be a contiguous CuPy array of shape {tuple(x.shape)} and dtype {x.dtype}.")
    if (out is None or not x.flags.c_contiguous) and cupy_module().cuda.get_current_stream().is_capturing():
        raise BadInputError("single_pass_scan cannot allocate while the stream is capturing a CUDA graph: pass "
                            "out= (allocated before the capture) and a contiguous x.")
