"""Lesson 04, on real cores: the blocked parallel scan a multi-core CPU (and a GPU) actually runs.

:func:`course.scan.blelloch_scan` shows the idea with one numpy call per tree level:
about ``2 log2 n`` passes over memory, each a fresh array.  That is the right picture
for *thousands* of lanes, but a CPU has a handful of cores, and each pass through
memory costs more than the additions it carries.  Real scans therefore apply the
same associativity trick only **at the scale of the cores**: cut the sequence into
``p`` blocks, one per core, and build a tree with ``p`` leaves instead of ``n``.

Scan-then-add (three phases; ``p`` cores)::

    1. each core scans its own block sequentially        (n/p dependent steps, in parallel)
    2. the p block totals are scanned                     (p steps: tiny)
    3. each core adds its block's offset to its block     (n/p independent adds, in parallel)

Reduce-then-scan (the same split, the other order)::

    1. each core only *sums* its block (no writes)        (a reduction: SIMD-friendly)
    2. the p block totals are scanned
    3. each core scans its block again, starting from its offset

Phase 2 is the Blelloch scan with ``p`` leaves: the up-sweep's totals are the block
sums and the down-sweep's prefixes are the block offsets.  With two cores the whole
"tree" is one addition; the lesson is that the associative regrouping is what lets
independent cores work at once.  The GPU kernel of :mod:`course.scan.kernels` does
the same thing with thread blocks instead of cores.

**Tiles, as a GPU block uses shared memory.**  Done over whole blocks, phase 3 of
scan-then-add reads and writes the output a second time from main memory.  With
``tile=`` the scan walks the array in tiles of ``p × tile`` elements instead: in each
round a core scans its part of the tile and, in the next round, adds that part's offset
while the part is still in its cache.  Phase 3 then costs no memory traffic, and only
the carry (the sum of all earlier tiles) passes from one tile to the next; the price is
one synchronisation of the cores per tile.

Memory traffic per element (``s`` = itemsize), the figure a scan's speed is bound by
(STREAM's convention: a write counts once):

============================  ==========================  =====
algorithm                     passes through memory       bytes
============================  ==========================  =====
sequential loop               read x, write y             2 s
scan-then-add (whole blocks)  read x, write y; r+w y      4 s
scan-then-add, tiled          read x, write y             2 s
reduce-then-scan              read x; read x, write y     3 s
============================  ==========================  =====

The compiled sequential loop :func:`sequential_cumsum` is the honest peer: it does
the fewest bytes and the fewest additions, but every addition waits for the one
before it (a dependency chain a core cannot overlap), so it runs at one element per
floating-point-add latency, not at the memory's speed.  The blocked scans win by
running several such chains at once: one per core, and two inside each core
(:func:`_scan_block`: the two halves of a block scanned interleaved, then joined --
the same split once more, at the scale of one core's pipeline).  The tiles' rounds
cost a synchronisation each, which a busy machine (a core taken by another program)
makes expensive.  Only addition is compiled here; the generic operators of lesson 04
stay with :func:`course.scan.blelloch_scan`.

Every function is compiled with numba (``cache=True``: a learner's second session
skips the compile); call :func:`warm_up` before timing so compilation never lands in
a measurement.

>>> import numpy as np
>>> blocked_scan(np.array([3, 1, 7, 0, 4, 1, 6, 3]), blocks=3)
array([ 3,  4, 11, 11, 15, 16, 22, 25])
>>> blocked_scan(np.array([3, 1, 7, 0]), exclusive=True, strategy="reduce-then-scan")
array([ 0,  3,  4, 11])
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import njit, prange

from ..arguments import Given, OneOf, Optional, Whole, arguments
from ..errors import BadInputError, whole_number

__all__ = ["STRATEGIES", "SCAN_DTYPES", "BYTES_PER_ELEMENT", "TILE_BYTES", "blocked_scan", "sequential_cumsum",
           "block_bounds", "bytes_per_element", "warm_up", "scan_threads"]

STRATEGIES = ("scan-then-add", "reduce-then-scan")
SCAN_DTYPES = ("int32", "int64", "float32", "float64")
#: Memory passes of each algorithm, in multiples of the itemsize (see the module's table).
BYTES_PER_ELEMENT = {"sequential": 2, "scan-then-add": 4, "scan-then-add, tiled": 2, "reduce-then-scan": 3}
#: Bytes of ``x`` each core scans per round of the tiled scan-then-add (``tile="cache"``): with the same
#: of ``out`` it stays in the core's cache (L2, or its share of L3) until the add.
TILE_BYTES = 2**20
MAX_BLOCKS = 2**16  # blocks a scan may be split into (a few per core is plenty)
#: Elements one core scans as two chains before joining them (:func:`_scan_two`): the join then
#: finds the chunk in the core's nearest caches.
CHUNK = 2**13


# ------------------------------------------------------------------ compiled kernels

@njit(cache=True)
def _part(lo, hi, parts, b):
    """Start and stop of part ``b`` of ``parts`` nearly equal parts of ``[lo, hi)``."""
    return lo + ((hi - lo) * b) // parts, lo + ((hi - lo) * (b + 1)) // parts


@njit(cache=True)
def _scan_range(x, out, lo, hi, start, exclusive):
    """Sequential scan of ``x[lo:hi]`` into ``out[lo:hi]``, starting from ``start``; returns the total."""
    acc = start
    if exclusive:
        for i in range(lo, hi):
            v = x[i]
            out[i] = acc
            acc += v
    else:
        for i in range(lo, hi):
            acc += x[i]
            out[i] = acc
    return acc


@njit(cache=True)
def _scan_block(x, out, lo, hi, start, exclusive):
    """What one core does with its block: scan ``x[lo:hi]`` from ``start``, a cache-sized chunk at a
    time (:data:`CHUNK` elements), each chunk as two chains (:func:`_scan_two`); returns the total."""
    acc = start
    for c in range(lo, hi, CHUNK):
        acc = _scan_two(x, out, c, min(c + CHUNK, hi), acc, exclusive)
    return acc


@njit(cache=True)
def _scan_two(x, out, lo, hi, start, exclusive):
    """Scan ``x[lo:hi]`` from ``start`` as two chains, then join them; returns the total.

    A single chain waits one floating-point-add latency per element (several cycles), while a
    core could start an addition every cycle.  So the chunk's two halves are scanned at once,
    interleaved, and the second half then adds the first half's total (still in the cache):
    scan-then-add once more, at the scale of one core's pipeline.
    """
    m = (hi - lo) // 2
    xa, xb, oa, ob = x[lo:lo + m], x[lo + m:lo + 2 * m], out[lo:lo + m], out[lo + m:lo + 2 * m]
    a, b = start, x.dtype.type(0)
    if exclusive:
        for i in range(m):
            va, vb = xa[i], xb[i]
            oa[i] = a
            ob[i] = b
            a += va
            b += vb
    else:
        for i in range(m):
            a += xa[i]
            b += xb[i]
            oa[i] = a
            ob[i] = b
    b = _scan_range(x, out, lo + 2 * m, hi, b, exclusive)   # the odd element out, if any
    second = out[lo + m:hi]
    for i in range(second.shape[0]):                         # join: the second half adds the first's total
        second[i] += a
    return a + b


@njit(cache=True)
def _sequential(x, out, exclusive):
    _scan_range(x, out, 0, x.shape[0], x.dtype.type(0), exclusive)
    return out


@njit(cache=True)
def _offsets(totals):
    """Phase 2: the exclusive scan of the block totals (the tree over p leaves; p is small)."""
    offsets = np.empty_like(totals)
    acc = totals.dtype.type(0)
    for b in range(totals.shape[0]):
        offsets[b] = acc
        acc += totals[b]
    return offsets


@njit(parallel=True, cache=True)
def _tile_round(x, out, lo, hi, prev_lo, prev_hi, prev_offsets, totals, carry, exclusive):
    """One parallel round: each core first finishes its part of the previous tile (3. add its offset,
    while that part is still in the core's cache), then scans its part of this tile (1.)."""
    parts = totals.shape[0]
    for b in prange(parts):
        if b > 0 and prev_hi > prev_lo:
            p_lo, p_hi = _part(prev_lo, prev_hi, parts, b)
            done, off = out[p_lo:p_hi], prev_offsets[b]
            for i in range(done.shape[0]):
                done[i] += off
        s_lo, s_hi = _part(lo, hi, parts, b)
        start = carry if b == 0 else x.dtype.type(0)   # part 0 starts from everything before the tile
        totals[b] = _scan_block(x, out, s_lo, s_hi, start, exclusive)


@njit(cache=True)
def _scan_then_add(x, out, parts, tile, exclusive):
    """Tile by tile (``parts * tile`` elements): scan the parts in parallel, scan their totals (2.),
    and add the offsets in the next round.  ``carry`` is the sum of every earlier tile."""
    n = x.shape[0]
    totals = np.zeros(parts, dtype=x.dtype)
    offsets = np.zeros(parts, dtype=x.dtype)
    carry = x.dtype.type(0)
    prev_lo, prev_hi, lo = 0, 0, 0
    while True:
        hi = min(lo + parts * tile, n)
        _tile_round(x, out, lo, hi, prev_lo, prev_hi, offsets, totals, carry, exclusive)
        if lo >= n:                                 # that round only finished the last tile
            return out
        offsets[0] = carry                          # 2. scan the parts' totals (part 0 includes the carry)
        acc = totals[0]
        for b in range(1, parts):
            offsets[b] = acc
            acc += totals[b]
        carry = acc
        prev_lo, prev_hi, lo = lo, hi, hi


@njit(cache=True, fastmath=True)
def _sum_range(x, lo, hi):
    """The sum of ``x[lo:hi]``.  ``fastmath`` lets the compiler regroup the additions into SIMD lanes
    (associativity again); the slice lets it see that no index is negative."""
    part = x[lo:hi]
    acc = x.dtype.type(0)
    for i in range(part.shape[0]):
        acc += part[i]
    return acc


@njit(parallel=True, cache=True)
def _block_sums(x, blocks):
    """Phase 1 of reduce-then-scan: each core sums its block."""
    n = x.shape[0]
    totals = np.empty(blocks, dtype=x.dtype)
    for b in prange(blocks):
        lo, hi = _part(0, n, blocks, b)
        totals[b] = _sum_range(x, lo, hi)
    return totals


@njit(parallel=True, cache=True)
def _scan_from_offsets(x, out, offsets, exclusive):
    n, blocks = x.shape[0], offsets.shape[0]
    for b in prange(blocks):                       # 3. each core scans its block from its offset
        lo, hi = _part(0, n, blocks, b)
        _scan_block(x, out, lo, hi, offsets[b], exclusive)
    return out


def _reduce_then_scan(x, out, blocks, exclusive):
    totals = _block_sums(x, blocks)                # 1. each core sums its block
    offsets = _offsets(totals)                     # 2. scan the block totals
    return _scan_from_offsets(x, out, offsets, exclusive)


# ------------------------------------------------------------------ checks and public API

def _validate_x(x: Any) -> np.ndarray:
    if not isinstance(x, np.ndarray):
        if hasattr(x, "__cuda_array_interface__"):
            raise BadInputError("blocked_scan runs on the CPU's cores; x is a GPU array. Use "
                                "course.scan.kernels.block_scan on the GPU, or course.to_numpy(x) first.")
        x = np.asarray(x)
    if x.ndim != 1:
        raise BadInputError(f"x must be a 1-d array (a sequence of numbers), got shape {x.shape}; "
                            "flatten it with x.ravel() or scan each row separately.")
    if x.dtype.name not in SCAN_DTYPES:
        raise BadInputError(f"x must have one of the dtypes {SCAN_DTYPES}, got {x.dtype}; convert it, "
                            "e.g. x.astype('float32').")
    if not x.flags.c_contiguous:                 # a strided or broadcast view is copied first: it must fit
        from ..limits import full_nbytes, require_fits

        require_fits(full_nbytes(x), "cpu", what=f"a contiguous copy of x ({x.shape[0]:,} elements)")
    return np.ascontiguousarray(x)


def _validate_out(out: Any, x: np.ndarray) -> np.ndarray:
    if out is None:
        return np.empty_like(x)
    if not isinstance(out, np.ndarray) or out.shape != x.shape or out.dtype != x.dtype \
            or not out.flags.c_contiguous:
        raise BadInputError(f"out must be a contiguous numpy array of x's shape {x.shape} and dtype {x.dtype}, "
                            f"got {type(out).__name__} {getattr(out, 'shape', '')} {getattr(out, 'dtype', '')}")
    if np.may_share_memory(out, x):
        raise BadInputError("out must not overlap x: the scan reads x while it writes out.")
    return out


def _validate_tile(tile: Any) -> int | str:
    if isinstance(tile, str) and tile == "cache":
        return tile
    return whole_number("tile", tile, hint="elements per tile, 'cache' or None")


@arguments(threads=Optional(Whole(hint="or None for the default")))
def scan_threads(threads: int | None = None) -> int:
    """The threads numba's parallel loops will use: ``threads``, or the course's default.

    The default is :func:`course.threads.core_threads` (the cores this process may use),
    capped at the threads numba started with.

    >>> scan_threads(1)
    1
    """
    from ..threads import core_threads

    want = core_threads() if threads is None else threads
    return max(1, min(want, numba.config.NUMBA_NUM_THREADS))


@arguments(n=Whole(0), blocks=Whole(hi=MAX_BLOCKS, hint="one block per thread: a few per core is plenty"))
def block_bounds(n: int, blocks: int) -> list[tuple[int, int]]:
    """The ``(start, stop)`` of each block: ``blocks`` nearly equal, contiguous parts of ``n``.

    >>> block_bounds(10, 3)
    [(0, 3), (3, 6), (6, 10)]
    """
    return [((n * b) // blocks, (n * (b + 1)) // blocks) for b in range(blocks)]


def bytes_per_element(algorithm: str, dtype: Any = "float32") -> int:
    """Bytes each algorithm moves through memory per element (see the module's table).

    >>> bytes_per_element("reduce-then-scan", "float32")
    12
    """
    if algorithm not in BYTES_PER_ELEMENT:
        raise BadInputError(f"algorithm must be one of {sorted(BYTES_PER_ELEMENT)}, got {algorithm!r}")
    return BYTES_PER_ELEMENT[algorithm] * np.dtype(dtype).itemsize


@arguments(x=Given(_validate_x), out=Given(_validate_out, earlier=("x",)))
def sequential_cumsum(x: Any, exclusive: bool = False, out: np.ndarray | None = None) -> np.ndarray:
    """The compiled sequential loop: one addition after the other, on one core (the peer).

    Parameters
    ----------
    x : 1-d numpy array of int32, int64, float32 or float64.
    exclusive : ``out[i]`` sums ``x[:i]`` (True) or ``x[:i+1]`` (False, like ``numpy.cumsum``).
    out : an array like ``x`` to write into (no allocation), or None.

    Examples
    --------
    >>> sequential_cumsum(np.array([1, 2, 3, 4]))
    array([ 1,  3,  6, 10])
    """
    return _sequential(x, out, bool(exclusive))


@arguments(x=Given(_validate_x), strategy=OneOf(*STRATEGIES),
           blocks=Optional(Whole(hi=MAX_BLOCKS, hint="or None for one per thread")),
           threads=Optional(Whole(hint="or None for the default")), out=Given(_validate_out, earlier=("x",)),
           tile=Optional(Given(_validate_tile)))
def blocked_scan(x: Any, exclusive: bool = False, strategy: str = "scan-then-add", blocks: int | None = None,
                 threads: int | None = None, out: np.ndarray | None = None,
                 tile: int | str | None = None) -> np.ndarray:
    """Prefix sums on all cores: blocks scanned in parallel, then joined by the scan of their totals.

    Parameters
    ----------
    x : 1-d numpy array of int32, int64, float32 or float64 (addition is the operator).
    exclusive : ``out[i]`` sums ``x[:i]`` (True) or ``x[:i+1]`` (False, like ``numpy.cumsum``).
    strategy : ``"scan-then-add"`` (scan blocks, scan totals, add offsets) or
        ``"reduce-then-scan"`` (sum blocks, scan totals, scan blocks from their offsets).
    blocks : how many blocks (default: one per thread).  More blocks than threads
        balance the load when another process takes a core; one block is the sequential scan.
    threads : cores to use (default :func:`scan_threads`).
    out : an array like ``x`` to write into, or None for a new one.
    tile : scan-then-add only: ``None`` (default) scans whole blocks in one round, and the add
        is a second pass through memory; a number of elements (or ``"cache"``: :data:`TILE_BYTES`
        of ``x``) walks the array in tiles, each core scanning that many per round, so the add
        finds its part still in the core's cache.  Each round ends in a synchronisation of the
        cores, which costs little on a quiet machine and a lot on a busy one.

    Returns
    -------
    The scan, with ``x``'s dtype.  Floating-point sums are grouped differently from
    ``numpy.cumsum``, so they agree up to rounding; integer sums agree exactly.

    Examples
    --------
    >>> blocked_scan(np.arange(1, 7), blocks=2, strategy="reduce-then-scan")
    array([ 1,  3,  6, 10, 15, 21])
    >>> blocked_scan(np.arange(1, 8), blocks=2, tile=2)     # tiles of 2 x 2: the carry joins them
    array([ 1,  3,  6, 10, 15, 21, 28])
    """
    nthreads = scan_threads(threads)
    if tile == "cache":
        tile = max(1, TILE_BYTES // x.dtype.itemsize)
    nblocks = max(1, min(nthreads if blocks is None else blocks, x.shape[0]))
    before = numba.get_num_threads()
    numba.set_num_threads(nthreads)
    try:
        if strategy == "reduce-then-scan":
            return _reduce_then_scan(x, out, nblocks, bool(exclusive))
        per_round = -(-x.shape[0] // nblocks) if tile is None else tile
        return _scan_then_add(x, out, nblocks, max(1, per_round), bool(exclusive))
    finally:
        numba.set_num_threads(before)


def _validate_dtypes(dtypes: Any) -> tuple[str, ...]:
    """``dtypes`` as a tuple of names of :data:`SCAN_DTYPES` (one name alone is one dtype)."""
    names = (dtypes,) if isinstance(dtypes, str) else dtypes
    if not isinstance(names, (list, tuple)) or not names:
        raise BadInputError(f"dtypes must be a tuple of dtype names from {SCAN_DTYPES}, e.g. ('float32',), got "
                            f"{dtypes!r:.60}")
    out = []
    for d in names:
        try:
            name = np.dtype(d).name if isinstance(d, (str, np.dtype, type)) else None
        except TypeError:
            name = None
        if name not in SCAN_DTYPES:
            raise BadInputError(f"dtypes must be names from {SCAN_DTYPES} (the scans compiled here), got {d!r:.60}")
        out.append(name)
    return tuple(out)


@arguments(dtypes=Given(_validate_dtypes))
def warm_up(dtypes: tuple[str, ...] = ("float32",)) -> None:
    """Compile (or load from numba's cache) every kernel for ``dtypes``, so no timing pays for it.

    >>> warm_up(("int64",))
    """
    for name in dtypes:
        x = np.ones(8, dtype=name)
        sequential_cumsum(x)
        for strategy in STRATEGIES:
            for exclusive in (False, True):
                blocked_scan(x, exclusive=exclusive, strategy=strategy, blocks=2)
