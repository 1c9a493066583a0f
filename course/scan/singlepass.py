"""Lesson 04 at the GPU's limit: a single-pass scan with decoupled look-back (Merrill & Garland, 2016).

The block scans of :mod:`course.scan.kernels` read and write every element twice (or read it
twice): the tiles cannot know what comes before them until every earlier tile is done, so a
second pass adds it.  A single-pass scan reads each element once and writes it once, so it can
run at the speed of a device-to-device copy.  Each tile, in one launch:

1. takes the next tile number from a global counter (so a tile only starts once every earlier
   tile has started: nobody waits for a tile that is not running);
2. loads its tile with 16-byte loads (``float4``), scans it in registers and with warp
   shuffles (``__shfl_up_sync``), and **publishes its aggregate** (flag ``A``) at once;
3. **looks back**: one warp reads the flags of the 32 tiles before it at a time.  Every
   ``A`` it passes adds that tile's aggregate; the first inclusive prefix (flag ``P``) ends
   the walk.  A tile whose predecessor has published nothing yet (``X``) waits for it;
4. publishes its own inclusive prefix (``P``) for the tiles after it, and writes its output.

A flag and its value share one 64-bit word, stored and read in one piece, so a reader never
sees a flag without its value.  The high 32 bits also carry a launch number: words left over
from an earlier launch count as ``X``, so the flags are never cleared between calls and a scan
is one launch.

:func:`lookback_model` runs the same protocol in plain Python, tile by tile in a random
interleaving, so it can be read, traced and tested without a GPU; :func:`single_pass_scan`
runs the CUDA C (:data:`SINGLE_PASS_SOURCE`) through CuPy's ``RawModule``.

>>> out, stats = lookback_model(np.arange(1, 11), tile=3, seed=0)
>>> out.tolist()
[1, 3, 6, 10, 15, 21, 28, 36, 45, 55]
>>> stats["tiles"]
4
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..devices import array_device, cupy_module, require_gpu
from ..errors import BadInputError, whole_number

__all__ = ["SINGLE_PASS_SOURCE", "SINGLE_PASS_DTYPES", "TILE_THREADS", "TILE_ITEMS", "FLAG_NAMES",
           "lookback_model", "single_pass_scan", "single_pass_tiles"]

#: Threads per tile and elements per thread of the CUDA kernel (a tile holds 256 x 16 = 4,096).
TILE_THREADS = 256
TILE_ITEMS = 16
#: Element types the kernel is compiled for (a value must fit beside its flag in 64 bits).
SINGLE_PASS_DTYPES = ("float32", "int32")
#: The tile states: not yet published, aggregate of the tile alone, inclusive prefix.
FLAG_NAMES = {0: "X", 1: "A", 2: "P"}

SINGLE_PASS_SOURCE = r"""
#define THREADS 256
#define ITEMS 16
#define TILE (THREADS * ITEMS)
#define WARPS (THREADS / 32)
#define FLAG_A 1u
#define FLAG_P 2u
#define FULL 0xffffffffu
// a thread's ITEMS elements are one row of ITEMS + 1 words: the rows' reads hit 32 different banks
#define SLOT(i) ((i) / ITEMS * (ITEMS + 1) + (i) % ITEMS)

__device__ __forceinline__ unsigned int to_bits(float v) { return __float_as_uint(v); }
__device__ __forceinline__ unsigned int to_bits(int v) { return (unsigned int)v; }
__device__ __forceinline__ void from_bits(unsigned int b, float& v) { v = __uint_as_float(b); }
__device__ __forceinline__ void from_bits(unsigned int b, int& v) { v = (int)b; }

// one 64-bit word per tile: high = launch * 4 + flag, low = the value's bits
__device__ __forceinline__ void publish(unsigned long long* status, long long tile, unsigned int launch,
                                        unsigned int flag, unsigned int bits) {
    unsigned long long word = ((unsigned long long)(launch * 4u + flag) << 32) | bits;
    atomicExch(status + tile, word);
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
                            unsigned long long* status, unsigned long long* counter,
                            unsigned long long first_tile, unsigned int launch, int vec) {
    __shared__ T tile_data[THREADS * (ITEMS + 1)];
    __shared__ T warp_totals[WARPS];
    __shared__ T tile_prefix;
    __shared__ long long tile_id;
    const int t = threadIdx.x, lane = t % 32, warp = t / 32;
    if (t == 0) tile_id = (long long)(atomicAdd(counter, 1ull) - first_tile);   // tiles start in order
    __syncthreads();
    const long long tile = tile_id;
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
            if (lane == 0) publish(status, 0, launch, FLAG_P, to_bits(aggregate));
        } else {
            if (lane == 0) publish(status, tile, launch, FLAG_A, to_bits(aggregate));
            long long window = tile - 1;            // lane k reads tile window - k
            while (true) {
                long long pred = window - lane;
                unsigned long long word;
                unsigned int flag;
                do {
                    word = pred >= 0 ? *(volatile unsigned long long*)(status + pred)
                                     : ((unsigned long long)(launch * 4u + FLAG_P) << 32);
                    unsigned int hi = (unsigned int)(word >> 32);
                    flag = (hi >> 2) == launch ? (hi & 3u) : 0u;        // an older launch's word is X
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
            if (lane == 0) publish(status, tile, launch, FLAG_P, to_bits(exclusive + aggregate));
        }
        if (lane == 0) tile_prefix = exclusive;
    }
    __syncthreads();

    // 4. write: the scanned items back through shared memory, then 16-byte stores
    const T offset = tile_prefix + before;
    #pragma unroll
    for (int j = 0; j < ITEMS; j++) tile_data[t * (ITEMS + 1) + j] = items[j] + offset;
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
}

extern "C" __global__ void __launch_bounds__(THREADS)
course_single_pass_scan_f32(const float* x, float* out, long long n, unsigned long long* status,
                            unsigned long long* counter, unsigned long long first_tile, unsigned int launch,
                            int vec) {
    single_pass<float, float4>(x, out, n, status, counter, first_tile, launch, vec);
}

extern "C" __global__ void __launch_bounds__(THREADS)
course_single_pass_scan_i32(const int* x, int* out, long long n, unsigned long long* status,
                            unsigned long long* counter, unsigned long long first_tile, unsigned int launch,
                            int vec) {
    single_pass<int, int4>(x, out, n, status, counter, first_tile, launch, vec);
}
"""


# ------------------------------------------------------------------ the protocol, on the CPU

def lookback_model(x: Any, tile: int = 4, window: int = 1, seed: int | None = 0) -> tuple[np.ndarray, dict]:
    """Inclusive sum of ``x`` by the decoupled look-back protocol, tiles interleaved at random.

    Each tile is a Python generator that pauses after every read of another tile's flag, so
    a random scheduler can run the tiles in any interleaving a GPU might: a tile that finds
    ``X`` (nothing published yet) pauses and reads again later.  Tiles *start* in order (the
    kernel's global counter) but run, publish and finish in any order.

    Parameters
    ----------
    x : 1-D array of numbers.
    tile : elements per tile (the kernel's is :data:`TILE_THREADS` x :data:`TILE_ITEMS`).
    window : predecessors read at once (the kernel's warp reads 32).
    seed : the random interleaving (``None``: tiles run one after the other, no waiting).

    Returns
    -------
    (out, stats): the inclusive scan, and ``tiles``, ``flag_reads`` (flags read in all),
    ``waits`` (reads that found ``X``) and ``longest_lookback`` (most tiles one look-back passed).
    """
    x = np.asarray(x)
    if x.ndim != 1:
        raise BadInputError(f"lookback_model scans a 1-D array, got shape {x.shape}; flatten it with x.ravel().")
    tile = whole_number("tile", tile, hint="elements per tile")
    window = whole_number("window", window, hint="predecessor flags read at once (the kernel's warp: 32)")
    n = x.size
    tiles = -(-n // tile)
    flags = ["X"] * tiles
    values: list[Any] = [None] * tiles
    out = np.empty_like(x)
    stats = {"tiles": tiles, "flag_reads": 0, "waits": 0, "longest_lookback": 0}

    def run(b: int):
        part = np.cumsum(x[b * tile:(b + 1) * tile])
        aggregate = part[-1]
        flags[b], values[b] = ("P" if b == 0 else "A"), aggregate        # publish at once
        exclusive, k = x.dtype.type(0), b - 1
        while k >= 0:                                                    # look back
            seen = list(range(k, max(k - window, -1), -1))
            yield                                                        # the reads take time
            stats["flag_reads"] += len(seen)
            if any(flags[j] == "X" for j in seen):
                stats["waits"] += 1
                continue                                                 # read the window again
            nearest = next((i for i, j in enumerate(seen) if flags[j] == "P"), None)
            for j in seen[:None if nearest is None else nearest + 1]:
                exclusive = exclusive + values[j]
            if nearest is not None:
                k = seen[nearest]
                break
            k -= window
        stats["longest_lookback"] = max(stats["longest_lookback"], b - max(k, 0))
        if b:
            flags[b], values[b] = "P", exclusive + aggregate
        out[b * tile:(b + 1) * tile] = part + exclusive

    rng = None if seed is None else np.random.default_rng(seed)
    running: list[tuple[int, Any]] = []
    started = 0
    while started < tiles or running:
        if started < tiles and (rng is None or not running or rng.random() < 0.5):
            running.append((started, run(started)))                      # the counter hands out the next tile
            started += 1
        pick = 0 if rng is None else int(rng.integers(len(running)))
        b, gen = running[pick]
        try:
            next(gen)
        except StopIteration:
            running.pop(pick)
    return out, stats


# ------------------------------------------------------------------ the kernel, on the GPU

@functools.cache
def _kernels() -> dict:
    mod = cupy_module().RawModule(code=SINGLE_PASS_SOURCE, options=("--std=c++14",))
    return {"float32": mod.get_function("course_single_pass_scan_f32"),
            "int32": mod.get_function("course_single_pass_scan_i32")}


class _Workspace:
    """The tile flags and the tile counter of one device, kept between calls (never cleared)."""

    def __init__(self) -> None:
        self.status = None
        self.counter = None
        self.launch = 0
        self.next_tile = 0

    def take(self, tiles: int) -> tuple[Any, Any, int, int]:
        cp = cupy_module()
        if self.status is None or self.status.size < tiles or self.launch >= 2**30 - 1:
            self.status = cp.zeros(max(tiles, 1024), dtype=cp.uint64)
            self.counter = cp.zeros(1, dtype=cp.uint64)
            self.launch, self.next_tile = 0, 0
        self.launch += 1
        first = self.next_tile
        self.next_tile += tiles
        return self.status, self.counter, first, self.launch


_WORKSPACES: dict[int, _Workspace] = {}


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
    contiguous array of the same shape and dtype.  Calls on one device must come from one
    stream (the tile flags are shared between calls).

    Float32 sums are added in a different order than a sequential loop, so they differ from
    ``numpy.cumsum`` by rounding (compare in float64 with a tolerance).
    """
    require_gpu()
    cp = cupy_module()
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
    x = cp.ascontiguousarray(x)
    if out is None:
        out = cp.empty_like(x)
    n = x.size
    if n == 0:
        return out
    tiles = single_pass_tiles(n)
    ws = _WORKSPACES.setdefault(cp.cuda.Device().id, _Workspace())
    status, counter, first, launch = ws.take(tiles)
    vec = int(x.data.ptr % 16 == 0 and out.data.ptr % 16 == 0)
    _kernels()[str(x.dtype)]((tiles,), (TILE_THREADS,),
                             (x, out, np.int64(n), status, counter, np.uint64(first), np.uint32(launch),
                              np.int32(vec)))
    return out
