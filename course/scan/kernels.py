"""Lesson 04 on a GPU: a hand-written block scan kernel in ``numba.cuda``.

A GPU scan of a long array works in three phases, because threads can only
cooperate (shared memory, barriers) inside one *block*:

1. **per-tile scans** (:func:`block_scan_kernels`, kernel ``scan_tiles``): each block
   loads a tile of ``threads * items`` elements into shared memory with coalesced
   reads (neighbouring threads read neighbouring addresses), each thread combines
   its ``items`` consecutive elements sequentially, a Blelloch up-sweep/down-sweep
   over the ``threads`` partial results (in shared memory, a barrier after each
   level) gives every thread its prefix, each thread rescans its elements from that
   prefix, and the block writes the tile back and its total to ``tile_sums``;
2. **a scan of the tile totals**, by the same routine (recursively, until one tile
   holds them all);
3. **a uniform add** (kernel ``add_offsets``): every element of tile ``b`` gets the
   scanned total of the tiles before it combined in front.

That reads and writes every element twice.  ``strategy="reduce-then-scan"`` moves less
data: phase 1 only *sums* each tile (``reduce_tiles``: the up-sweep alone, nothing
written but the total), and phase 3 scans each tile again, starting from the scanned
total of the tiles before it: every element is read twice and written once.  Libraries
go further with a single pass (each tile waits for its predecessor's running total),
which reads and writes each element once.

Shared memory is split into 32 *banks*; when several threads of a warp touch
different addresses of the same bank in one instruction, the accesses are
serialised (a *bank conflict*).  The tree's strided accesses (stride 2, 4, 8, ...)
and the per-thread runs (thread t reads ``t * items + j``) hit the same banks over
and over.  With ``conflict_free=True`` every shared-memory index ``i`` is stored at
``i + i // 32`` (one padding word after every 32), which spreads those strides over
all banks; ``conflict_free=False`` keeps the plain layout, so the two can be timed
against each other.

The kernels run on a real GPU (inputs: numpy arrays, which are copied over and
back, or CuPy arrays, used in place) and, at small sizes, on the CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1`` set before numba is imported: one Python thread per CUDA
thread, so only for checking correctness).

>>> import numpy as np
>>> if kernels_available():
...     out = block_scan(np.arange(10, dtype=np.int32), threads=4, items=2)
...     print(out.tolist())
... else:
...     print([0, 0, 1, 3, 6, 10, 15, 21, 28, 36])
[0, 0, 1, 3, 6, 10, 15, 21, 28, 36]
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..arguments import Whole, arguments
from ..devices import array_device, cupy_module, quiet_numba_launches
from ..errors import BadInputError, GPUUnavailableError
from ..kernel_runtime import kernels_unavailable_reason, numba_cuda, simulator_enabled

__all__ = ["simulator_enabled", "kernels_available", "kernels_unavailable_reason",
           "block_scan_kernels", "block_scan", "KERNEL_DTYPES", "KERNEL_OPS", "BANKS", "STRATEGIES",
           "SHARED_MEMORY_LIMIT", "shared_memory_bytes", "require_shared_memory",
           "conflict_degree", "kernel_bank_conflicts"]

#: Element types the kernels are compiled for, and the operators they know.
KERNEL_DTYPES = ("float32", "float64", "int32", "int64")
KERNEL_OPS = ("add", "max")
#: Shared-memory banks per streaming multiprocessor (every NVIDIA GPU since Fermi).
BANKS = 32


cuda: Any = None   # numba.cuda, bound on first use (course.kernel_runtime.numba_cuda)


def kernels_available() -> bool:
    """True when :func:`block_scan` can run here."""
    return kernels_unavailable_reason() is None


#: Static shared memory one block may declare (48 KiB on every NVIDIA GPU; more needs dynamic
#: shared memory and an opt-in the course does not use).
SHARED_MEMORY_LIMIT = 48 * 1024


@arguments(threads=Whole(hi=1024, hint="threads per block"), items=Whole(hint="elements per thread"))
def shared_memory_bytes(dtype: Any = "float32", threads: int = 256, items: int = 8,
                        conflict_free: bool = True) -> int:
    """Bytes of static shared memory one block of ``scan_tiles`` declares: the tile and the partials.

    The tile holds ``threads * items`` elements and the partials ``threads``, each with one
    padding word per 32 when ``conflict_free``, plus one spare slot each.

    >>> shared_memory_bytes("float32", 256, 8)
    9512
    >>> shared_memory_bytes("float64", 1024, 8) > SHARED_MEMORY_LIMIT
    True
    """
    pad, tile = (1 if conflict_free else 0), threads * items
    slots = (tile + pad * (tile // BANKS) + 1) + (threads + pad * (threads // BANKS) + 1)
    return slots * np.dtype(dtype).itemsize


def require_shared_memory(dtype: Any = "float32", threads: int = 256, items: int = 8,
                          conflict_free: bool = True) -> int:
    """Refuse a tile shape whose shared memory exceeds :data:`SHARED_MEMORY_LIMIT`, before compiling.

    The CUDA simulator would run it; a real GPU refuses to launch it.  Returns the bytes used.

    >>> require_shared_memory("float32", 256, 8)
    9512
    """
    need = shared_memory_bytes(dtype, threads, items, conflict_free)
    if need > SHARED_MEMORY_LIMIT:
        dt = np.dtype(dtype)
        fit = max(1, SHARED_MEMORY_LIMIT // (dt.itemsize * int(threads)) - 2)
        raise BadInputError(
            f"a tile of {threads} threads x {items} items of {dt.name} needs {need / 1024:.1f} KiB of shared "
            f"memory per block, more than the {SHARED_MEMORY_LIMIT // 1024} KiB a block may declare. "
            f"Use fewer items per thread (at most about {fit} with {threads} threads) or fewer threads.")
    return need


def _identity(op: str, dtype: np.dtype):
    if op == "add":
        return dtype.type(0)
    return dtype.type(-np.inf) if dtype.kind == "f" else np.iinfo(dtype).min


@functools.cache
def block_scan_kernels(dtype: str = "float32", op: str = "add", threads: int = 256,
                       items: int = 8, conflict_free: bool = True):
    """Compile ``(scan_tiles, reduce_tiles, add_offsets)`` for one type, operator and tile shape.

    ``threads`` must be a power of two (the in-block tree is a full binary tree);
    a tile holds ``threads * items`` elements.
    """
    dt = np.dtype(dtype)
    if dt.name not in KERNEL_DTYPES:
        raise BadInputError(f"the block-scan kernel is compiled for {KERNEL_DTYPES}; got {dt.name}.")
    if op not in KERNEL_OPS:
        raise BadInputError(f"the block-scan kernel knows the operators {KERNEL_OPS}; got {op!r}.")
    if threads < 2 or threads & (threads - 1) or threads > 1024:
        raise BadInputError(f"threads must be a power of two between 2 and 1024; got {threads}.")
    if items < 1:
        raise BadInputError(f"items per thread must be at least 1; got {items}.")
    require_shared_memory(dt, threads, items, conflict_free)
    global cuda    # the simulator swaps this module global inside the kernels
    cuda = numba_cuda()
    T, ITEMS, TILE = threads, items, threads * items
    PAD = 1 if conflict_free else 0
    TILE_SMEM, PART_SMEM = TILE + PAD * (TILE // BANKS) + 1, T + PAD * (T // BANKS) + 1
    IDENT = _identity(op, dt)
    SCALAR = dt.type

    @cuda.jit(device=True)
    def slot(i):                     # where shared-memory index i lives
        return i + PAD * (i // BANKS)

    if op == "add":
        @cuda.jit(device=True)
        def combine(a, b):           # a: earlier, b: later
            return a + b
    else:
        @cuda.jit(device=True)
        def combine(a, b):
            return a if a > b else b

    @cuda.jit
    def scan_tiles(x, out, tile_sums, offsets, n, inclusive, use_offsets):
        tile = cuda.shared.array(TILE_SMEM, SCALAR)
        part = cuda.shared.array(PART_SMEM, SCALAR)
        tid = cuda.threadIdx.x
        base = cuda.blockIdx.x * TILE
        for k in range(ITEMS):                       # 1. coalesced load of the tile
            i = k * T + tid
            tile[slot(i)] = x[base + i] if base + i < n else IDENT
        cuda.syncthreads()
        acc = IDENT                                  # 2. each thread: its items in a row
        for j in range(ITEMS):
            acc = combine(acc, tile[slot(tid * ITEMS + j)])
        part[slot(tid)] = acc
        cuda.syncthreads()
        stride = 1                                   # 3a. up-sweep over the T partials
        active = T // 2
        while active > 0:
            if tid < active:
                left = stride * (2 * tid + 1) - 1
                right = left + stride
                part[slot(right)] = combine(part[slot(left)], part[slot(right)])
            stride *= 2
            active //= 2
            cuda.syncthreads()
        if tid == 0:                                 # the root: the tile's total
            tile_sums[cuda.blockIdx.x] = part[slot(T - 1)]
            part[slot(T - 1)] = IDENT
        cuda.syncthreads()
        active = 1                                   # 3b. down-sweep
        while active < T:
            stride //= 2
            if tid < active:
                left = stride * (2 * tid + 1) - 1
                right = left + stride
                prefix = part[slot(right)]             # what comes before the parent
                left_total = part[slot(left)]
                part[slot(left)] = prefix
                part[slot(right)] = combine(prefix, left_total)   # prefix FIRST
            active *= 2
            cuda.syncthreads()
        acc = part[slot(tid)]                        # 4. rescan own items from the prefix
        if use_offsets:                              #    (after all tiles before this one)
            acc = combine(offsets[cuda.blockIdx.x], acc)
        for j in range(ITEMS):
            s = slot(tid * ITEMS + j)
            v = tile[s]
            if inclusive:
                acc = combine(acc, v)
                tile[s] = acc
            else:
                tile[s] = acc
                acc = combine(acc, v)
        cuda.syncthreads()
        for k in range(ITEMS):                       # 5. coalesced store
            i = k * T + tid
            if base + i < n:
                out[base + i] = tile[slot(i)]

    @cuda.jit
    def reduce_tiles(x, tile_sums, n):
        part = cuda.shared.array(PART_SMEM, SCALAR)
        tid = cuda.threadIdx.x
        base = cuda.blockIdx.x * TILE
        acc = IDENT                                  # coalesced: thread t takes t, t+T, ...
        for k in range(ITEMS):                       # (any order: add and max commute)
            i = base + k * T + tid
            if i < n:
                acc = combine(acc, x[i])
        part[slot(tid)] = acc
        cuda.syncthreads()
        stride = 1                                   # the up-sweep alone: a reduction tree
        active = T // 2
        while active > 0:
            if tid < active:
                left = stride * (2 * tid + 1) - 1
                part[slot(left + stride)] = combine(part[slot(left)], part[slot(left + stride)])
            stride *= 2
            active //= 2
            cuda.syncthreads()
        if tid == 0:
            tile_sums[cuda.blockIdx.x] = part[slot(T - 1)]

    @cuda.jit
    def add_offsets(out, offsets, n):
        base = cuda.blockIdx.x * TILE
        offset = offsets[cuda.blockIdx.x]            # everything before this tile
        for k in range(ITEMS):
            i = base + k * T + cuda.threadIdx.x
            if i < n:
                out[i] = combine(offset, out[i])

    return scan_tiles, reduce_tiles, add_offsets


#: How a long array is split over tiles (see the module docstring).
STRATEGIES = ("scan-then-add", "reduce-then-scan")


def _scan_on_device(d_x, d_out, n, inclusive, alloc, kernels, tile, threads, strategy):
    scan_tiles, reduce_tiles, add_offsets = kernels
    tiles = -(-n // tile)
    sums = alloc(tiles)
    if tiles == 1:                                   # one tile: one block does it all
        scan_tiles[1, threads](d_x, d_out, sums, sums, n, inclusive, False)
        return
    offsets = alloc(tiles)
    if strategy == "scan-then-add":                  # scan tiles, scan totals, uniform add
        scan_tiles[tiles, threads](d_x, d_out, sums, sums, n, inclusive, False)
        _scan_on_device(sums, offsets, tiles, False, alloc, kernels, tile, threads, strategy)
        add_offsets[tiles, threads](d_out, offsets, n)
    else:                                            # reduce tiles, scan totals, scan tiles
        reduce_tiles[tiles, threads](d_x, sums, n)
        _scan_on_device(sums, offsets, tiles, False, alloc, kernels, tile, threads, strategy)
        scan_tiles[tiles, threads](d_x, d_out, sums, offsets, n, inclusive, True)


def block_scan(x: Any, exclusive: bool = True, op: str = "add", threads: int = 256,
               items: int = 8, conflict_free: bool = True, strategy: str = "scan-then-add") -> Any:
    """Scan a 1-d array with the hand-written block-scan kernels.

    Parameters
    ----------
    x : 1-d numpy array (copied to the GPU and the result copied back) or CuPy array
        (scanned on the GPU, result stays there); dtype one of :data:`KERNEL_DTYPES`.
    exclusive : exclusive (default) or inclusive scan.
    op : ``"add"`` or ``"max"``.
    threads, items : threads per block (a power of two) and elements per thread.
    conflict_free : pad shared memory against bank conflicts.
    strategy : ``"scan-then-add"`` (scan every tile, scan the tile totals, add them in:
        the data is read and written twice) or ``"reduce-then-scan"`` (only sum every tile,
        scan the totals, then scan every tile starting from its offset: read twice,
        written once).

    Returns
    -------
    The scan, on the device ``x`` came from.
    """
    if strategy not in STRATEGIES:
        raise BadInputError(f"strategy must be one of {STRATEGIES}; got {strategy!r}.")
    on_gpu = array_device(x) == "gpu"
    if not on_gpu:
        x = np.asarray(x)
    if x.ndim != 1:
        raise BadInputError(f"block_scan scans 1-d arrays; got shape {tuple(x.shape)}. "
                            f"Use course.scan.blelloch_scan for stacks of elements.")
    if np.dtype(x.dtype).name in KERNEL_DTYPES:      # refused here, not by the GPU at launch
        require_shared_memory(x.dtype, threads, items, conflict_free)
    reason = kernels_unavailable_reason()
    if reason:
        raise GPUUnavailableError(f"block_scan cannot run: {reason}")
    global cuda    # the simulator swaps this module global inside the kernels
    cuda = numba_cuda()
    kernels = block_scan_kernels(np.dtype(x.dtype).name, op, threads, items, conflict_free)
    n = int(x.shape[0])
    with quiet_numba_launches():
        return _launch(x, n, on_gpu, exclusive, kernels, threads, items, strategy)


def _launch(x, n, on_gpu, exclusive, kernels, threads, items, strategy):
    if on_gpu:
        cupy = cupy_module()
        out = cupy.empty_like(x)
        if n:
            # Wrap CuPy's memory for numba once (synchronising on x's stream once), instead of
            # letting every launch convert, and synchronise on, each argument again.
            def alloc(m):
                return cuda.as_cuda_array(cupy.empty(m, dtype=x.dtype), sync=False)

            _scan_on_device(cuda.as_cuda_array(cupy.ascontiguousarray(x)),
                            cuda.as_cuda_array(out, sync=False), n, not exclusive, alloc, kernels,
                            threads * items, threads, strategy)
        return out
    if n == 0:
        return x.copy()
    d_x = cuda.to_device(np.ascontiguousarray(x))
    d_out = cuda.device_array(n, dtype=x.dtype)
    _scan_on_device(d_x, d_out, n, not exclusive,
                    lambda m: cuda.device_array(m, dtype=x.dtype), kernels, threads * items, threads,
                    strategy)
    return d_out.copy_to_host()


# ------------------------------------------------------------------ bank conflicts, on the CPU

@arguments(banks=Whole(hint="shared-memory banks, 32 on NVIDIA GPUs"))
def conflict_degree(words: Iterable[int], banks: int = BANKS) -> int:
    """How many times one warp's shared-memory access is serialised (1 = conflict-free).

    ``words`` are the 4-byte word indices the threads of one warp touch in one instruction.
    Threads reading the *same* word are served together (a broadcast); different words in
    the same bank take one pass each, so the access costs as many passes as the busiest
    bank has distinct words.

    >>> conflict_degree([0, 32, 64, 1])      # three words in bank 0
    3
    >>> conflict_degree(range(32))           # one word per bank
    1
    """
    words = np.unique(np.asarray(list(words), dtype=np.int64))
    if words.size == 0:
        return 0
    return int(np.bincount(words % banks, minlength=banks).max())


@arguments(threads=Whole(hi=1024, hint="threads per block"), items=Whole(hi=1024, hint="elements per thread"),
           warp=Whole(hi=1024, hint="threads per warp, 32 on NVIDIA GPUs"))
def kernel_bank_conflicts(threads: int = 256, items: int = 8, conflict_free: bool = True,
                          warp: int = 32) -> list[dict]:
    """The worst conflict degree of every shared-memory access step of ``scan_tiles``.

    Replays the kernel's index arithmetic on the CPU (4-byte elements): the coalesced
    load, each thread's run over its ``items`` elements, and every up-sweep and
    down-sweep level of the tree over the thread partials.  Returns one dict per step:
    ``{"step", "threads", "degree"}`` (worst over the warps taking part).
    """
    def slot(i):
        i = np.asarray(i, dtype=np.int64)
        return i + (i // BANKS if conflict_free else 0)

    def worst(idx_of_thread, active):
        tids = np.arange(active)
        return max(conflict_degree(slot(idx_of_thread(tids[w:w + warp])))
                   for w in range(0, active, warp))

    rows = [{"step": "load tile (k = 0)", "threads": threads, "degree": worst(lambda t: t, threads)},
            {"step": "own run (j = 0)", "threads": threads, "degree": worst(lambda t: t * items, threads)}]
    stride, active = 1, threads // 2
    while active > 0:
        rows.append({"step": f"up-sweep, stride {stride} (left reads)", "threads": active,
                     "degree": worst(lambda t, s=stride: s * (2 * t + 1) - 1, active)})
        stride, active = stride * 2, active // 2
    active = 1
    while active < threads:
        stride //= 2
        rows.append({"step": f"down-sweep, stride {stride} (left reads)", "threads": active,
                     "degree": worst(lambda t, s=stride: s * (2 * t + 1) - 1, active)})
        active *= 2
    return rows
