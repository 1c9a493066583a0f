"""The optimisation exercises' kernels: each slow starting kernel (given to the learner, correct but
costly) and the course's fast answer.  See :mod:`course.kernels.tuning` for the targets.

Plain Python functions using the CUDA API through the global ``cuda``, so the simulator can trace them
and ``numba.cuda.jit`` can compile them; shared arrays are sized by module constants.  Every kernel
handles its part of any grid, so the same code runs at the simulator's tiny size and at a GPU's.
"""

from __future__ import annotations

from collections.abc import Callable

from numba import cuda, float32

from ..arguments import OneOf, Whole, arguments

__all__ = ["TR_TILE", "TR_ROWS", "TR_TILE_PADDED", "RED_T", "SCAN_T", "SCAN_ITEMS", "SCAN_TILE", "SCAN_TILE_PADDED",
           "SCAN_T_PADDED", "transpose_naive", "transpose_tiled",
           "transpose_tiled_padded", "reduce_interleaved", "reduce_strided_index", "reduce_sequential",
           "block_scan_kernel", "scan_plain", "scan_padded"]

#: Transpose: a block of TR_TILE x TR_ROWS threads moves one TR_TILE x TR_TILE tile (TR_TILE / TR_ROWS rows each).
TR_TILE, TR_ROWS = 32, 4
#: Reduction: threads per block, one element each.
RED_T = 128
#: Block scan: threads per block and elements per thread (a tile of SCAN_TILE = SCAN_T * SCAN_ITEMS).
SCAN_T, SCAN_ITEMS = 64, 4
SCAN_TILE = SCAN_T * SCAN_ITEMS
#: Sizes with one spare word per 32 (numba.cuda.jit needs a shared array's size as one constant, not a sum).
TR_TILE_PADDED, SCAN_TILE_PADDED, SCAN_T_PADDED = TR_TILE + 1, SCAN_TILE + SCAN_TILE // 32, SCAN_T + SCAN_T // 32


def transpose_naive(out, a):
    x = cuda.blockIdx.x * TR_TILE + cuda.threadIdx.x       # column of a
    y = cuda.blockIdx.y * TR_TILE + cuda.threadIdx.y       # row of a
    for j in range(0, TR_TILE, TR_ROWS):
        out[x, y + j] = a[y + j, x]                        # lanes read along a row, write down a column


def transpose_tiled(out, a):
    tile = cuda.shared.array((TR_TILE, TR_TILE), float32)
    x = cuda.blockIdx.x * TR_TILE + cuda.threadIdx.x
    y = cuda.blockIdx.y * TR_TILE + cuda.threadIdx.y
    for j in range(0, TR_TILE, TR_ROWS):
        tile[cuda.threadIdx.y + j, cuda.threadIdx.x] = a[y + j, x]
    cuda.syncthreads()
    x = cuda.blockIdx.y * TR_TILE + cuda.threadIdx.x       # the block's tile, transposed
    y = cuda.blockIdx.x * TR_TILE + cuda.threadIdx.y
    for j in range(0, TR_TILE, TR_ROWS):
        out[y + j, x] = tile[cuda.threadIdx.x, cuda.threadIdx.y + j]


def transpose_tiled_padded(out, a):
    tile = cuda.shared.array((TR_TILE, TR_TILE_PADDED), float32)   # a spare column: a column spans all banks
    x = cuda.blockIdx.x * TR_TILE + cuda.threadIdx.x
    y = cuda.blockIdx.y * TR_TILE + cuda.threadIdx.y
    for j in range(0, TR_TILE, TR_ROWS):
        tile[cuda.threadIdx.y + j, cuda.threadIdx.x] = a[y + j, x]
    cuda.syncthreads()
    x = cuda.blockIdx.y * TR_TILE + cuda.threadIdx.x
    y = cuda.blockIdx.x * TR_TILE + cuda.threadIdx.y
    for j in range(0, TR_TILE, TR_ROWS):
        out[y + j, x] = tile[cuda.threadIdx.x, cuda.threadIdx.y + j]


def reduce_interleaved(out, a):
    cache = cuda.shared.array(RED_T, float32)
    t = cuda.threadIdx.x
    cache[t] = a[cuda.grid(1)]
    cuda.syncthreads()
    s = 1
    while s < RED_T:
        if t % (2 * s) == 0:                               # active threads spread over every warp
            cache[t] = cache[t] + cache[t + s]
        cuda.syncthreads()
        s *= 2
    if t == 0:
        out[cuda.blockIdx.x] = cache[0]


def reduce_strided_index(out, a):
    cache = cuda.shared.array(RED_T, float32)
    t = cuda.threadIdx.x
    cache[t] = a[cuda.grid(1)]
    cuda.syncthreads()
    s = 1
    while s < RED_T:
        i = 2 * s * t                                      # active threads packed, but stride-2s indices
        if i < RED_T:
            cache[i] = cache[i] + cache[i + s]
        cuda.syncthreads()
        s *= 2
    if t == 0:
        out[cuda.blockIdx.x] = cache[0]


def reduce_sequential(out, a):
    cache = cuda.shared.array(RED_T, float32)
    t = cuda.threadIdx.x
    cache[t] = a[cuda.grid(1)]
    cuda.syncthreads()
    s = RED_T // 2
    while s > 0:
        if t < s:                                          # whole warps active or idle until s < 32
            cache[t] = cache[t] + cache[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        out[cuda.blockIdx.x] = cache[0]


@arguments(threads=Whole(lo=32, hi=1024, hint="threads per block, a multiple of 32"),
           items=Whole(hi=32, hint="elements per thread"), padded=OneOf(True, False))
def block_scan_kernel(threads: int, items: int, padded: bool) -> Callable:
    """Lesson 04's ``scan_tiles`` for one tile shape: each block writes the exclusive scan of its tile of
    ``threads * items`` float32.  ``padded`` stores shared index ``i`` at ``i + i // 32``."""
    T, ITEMS, TILE = threads, items, threads * items
    PAD = 1 if padded else 0
    TILE_WORDS, PART_WORDS = TILE + PAD * (TILE // 32), T + PAD * (T // 32)

    def block_scan(out, a):
        tile = cuda.shared.array(TILE_WORDS, float32)
        part = cuda.shared.array(PART_WORDS, float32)
        t = cuda.threadIdx.x
        base = cuda.blockIdx.x * TILE
        for k in range(ITEMS):                             # coalesced load
            i = k * T + t
            tile[i + PAD * (i // 32)] = a[base + i]
        cuda.syncthreads()
        acc = 0.0
        for j in range(ITEMS):                             # each thread: its own run of ITEMS
            i = t * ITEMS + j
            acc += tile[i + PAD * (i // 32)]
        part[t + PAD * (t // 32)] = acc
        cuda.syncthreads()
        stride, active = 1, T // 2
        while active > 0:                                  # up-sweep over the T partial sums
            if t < active:
                left = stride * (2 * t + 1) - 1
                right = left + stride
                part[right + PAD * (right // 32)] = part[left + PAD * (left // 32)] + part[right + PAD * (right // 32)]
            stride *= 2
            active //= 2
            cuda.syncthreads()
        if t == 0:
            part[T - 1 + PAD * ((T - 1) // 32)] = 0.0
        cuda.syncthreads()
        active = 1
        while active < T:                                  # down-sweep
            stride //= 2
            if t < active:
                left = stride * (2 * t + 1) - 1
                right = left + stride
                prefix = part[right + PAD * (right // 32)]
                left_total = part[left + PAD * (left // 32)]
                part[left + PAD * (left // 32)] = prefix
                part[right + PAD * (right // 32)] = prefix + left_total
            active *= 2
            cuda.syncthreads()
        acc = part[t + PAD * (t // 32)]
        for j in range(ITEMS):                             # rescan the run from its prefix
            i = t * ITEMS + j
            v = tile[i + PAD * (i // 32)]
            tile[i + PAD * (i // 32)] = acc
            acc += v
        cuda.syncthreads()
        for k in range(ITEMS):                             # coalesced store
            i = k * T + t
            out[base + i] = tile[i + PAD * (i // 32)]

    block_scan.__name__ = f"block_scan_{threads}x{items}_{'padded' if padded else 'plain'}"
    return block_scan


def scan_plain(out, a):
    tile = cuda.shared.array(SCAN_TILE, float32)
    part = cuda.shared.array(SCAN_T, float32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * SCAN_TILE
    for k in range(SCAN_ITEMS):                            # coalesced load
        tile[k * SCAN_T + t] = a[base + k * SCAN_T + t]
    cuda.syncthreads()
    acc = 0.0
    for j in range(SCAN_ITEMS):                            # own run: lanes SCAN_ITEMS words apart
        acc += tile[t * SCAN_ITEMS + j]
    part[t] = acc
    cuda.syncthreads()
    stride, active = 1, SCAN_T // 2
    while active > 0:                                      # up-sweep: lanes 2 * stride words apart
        if t < active:
            left = stride * (2 * t + 1) - 1
            part[left + stride] = part[left] + part[left + stride]
        stride *= 2
        active //= 2
        cuda.syncthreads()
    if t == 0:
        part[SCAN_T - 1] = 0.0
    cuda.syncthreads()
    active = 1
    while active < SCAN_T:                                 # down-sweep
        stride //= 2
        if t < active:
            left = stride * (2 * t + 1) - 1
            prefix = part[left + stride]
            left_total = part[left]
            part[left] = prefix
            part[left + stride] = prefix + left_total
        active *= 2
        cuda.syncthreads()
    acc = part[t]
    for j in range(SCAN_ITEMS):                            # rescan the run from its prefix
        v = tile[t * SCAN_ITEMS + j]
        tile[t * SCAN_ITEMS + j] = acc
        acc += v
    cuda.syncthreads()
    for k in range(SCAN_ITEMS):                            # coalesced store
        out[base + k * SCAN_T + t] = tile[k * SCAN_T + t]


#: The course's answer to the scan exercise: :func:`scan_plain` with every shared index i at i + i // 32.
scan_padded = block_scan_kernel(SCAN_T, SCAN_ITEMS, True)
