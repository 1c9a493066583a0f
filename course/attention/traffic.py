"""Lesson 08: the numbers attention moves between DRAM and on-chip memory, counted by walking its loops.

The model is the FlashAttention paper's IO analysis (Dao et al., 2022, §3.2 and Theorem 2): a GPU has
a large, slow memory (HBM, the DRAM on the package) and, per streaming multiprocessor, a small, fast
on-chip memory (SRAM: shared memory and registers) of ``M`` numbers.  Arithmetic happens on chip; what
counts is how many numbers cross between the two.  Sequence length ``N`` (queries and keys alike), head
size ``d`` (keys and values alike), one head:

* ``"naive"``, the paper's standard attention (its Algorithm 0): load Q and K, write ``S = Q Kᵀ``
  (N² numbers); read S, write ``P = softmax(S)``; read P and V, write O.  Each matrix crosses once per
  line -- the paper's idealisation, which ignores how a blocked product re-reads its inputs --
  so ``4 N d + 4 N²`` numbers: Θ(N d + N²).
* ``"flash, K/V outer"``, the paper's Algorithm 1: O, ℓ and m are written once (zeros, -inf); each block
  of ``B_c`` keys and values is loaded once, and for it every block of ``B_r`` queries loads its Q, O, ℓ
  and m and writes O, ℓ and m back.  With the paper's tiles, ``B_c = ⌈M / 4d⌉`` and
  ``B_r = min(B_c, d)`` (so that Q, K, V and O tiles each take about a quarter of M), that is
  ``3 N d + 2 N + ⌈N / B_c⌉ (3 N d + 4 N)`` numbers: Θ(N² d² / M).
* ``"flash, Q outer"``, the order of FlashAttention-2 and of this course (:func:`~course.attention.flash_attention`,
  the fused kernel, the exercise): each block of queries is loaded once and runs over every key block,
  writing its output and log-sum-exp once.  K and V are re-read once per query block.  With the same
  rule, roles swapped (the re-read tiles as large as M allows: ``B_r = ⌈M / 4d⌉``, ``B_c = min(B_r, d)``),
  ``2 N d + N + 2 ⌈N / B_r⌉ N d`` numbers: Θ(N² d² / M) again.

:func:`count_traffic` walks each algorithm's loops (the tiles come from
:func:`~course.attention.forward.tile_schedule`, the loop the code runs) and adds up what each line
loads and stores; :func:`traffic_formula` is the closed form above, and :func:`traffic_bound` the
paper's Θ expression without its constant.  The tests hold the count to the formula for every N, d, M.

>>> r = count_traffic("flash, Q outer", n=1024, d=64, sram=16384)
>>> r["block_q"], r["block_k"], r["numbers"] == traffic_formula("flash, Q outer", 1024, 64, 16384)
(64, 64, True)
"""

from __future__ import annotations

import functools
import math
from collections import Counter

from ..arguments import OneOf, Whole, arguments
from ..errors import BadInputError
from .forward import memory_held, tile_schedule

__all__ = ["TRAFFIC_ALGORITHMS", "paper_blocks", "count_traffic", "traffic_formula", "traffic_bound",
           "tile_traffic", "memory_held", "tiles_walked", "MAX_WALK_TILES"]

#: The algorithms counted, in the order the figures list them.
TRAFFIC_ALGORITHMS = ("naive", "flash, K/V outer", "flash, Q outer")
#: The most tiles :func:`count_traffic` walks (about a second of Python); beyond, it refuses and names the
#: closed form, :func:`traffic_formula`, which gives the same number.
MAX_WALK_TILES = 2**20


@arguments(algorithm=OneOf(*TRAFFIC_ALGORITHMS), d=Whole(hint="the head size"),
           sram=Whole(hint="numbers the on-chip memory holds (M)"))
def paper_blocks(algorithm: str, d: int, sram: int) -> tuple[int, int]:
    """``(block_q, block_k)``, the tile sizes the paper derives from M: the tiles an algorithm re-reads as
    large as a quarter of M allows (``⌈M / 4d⌉`` rows), the others ``min(that, d)``.

    >>> paper_blocks("flash, K/V outer", 64, 100_000), paper_blocks("flash, Q outer", 64, 100_000)
    ((64, 391), (391, 64))
    """
    big = math.ceil(sram / (4 * d))
    small = min(big, d)
    return (small, big) if algorithm == "flash, K/V outer" else (big, small)


@functools.lru_cache(maxsize=256)
def _walk(algorithm: str, n: int, d: int, block_q: int, block_k: int) -> tuple[Counter, Counter]:
    """What each line of ``algorithm`` loads from DRAM and stores to it, per array, in numbers."""
    reads, writes = Counter(), Counter()
    if algorithm == "naive":
        reads["Q"] += n * d
        reads["K"] += n * d
        writes["S"] += n * n               # S = Q Kᵀ
        reads["S"] += n * n
        writes["P"] += n * n               # P = softmax(S)
        reads["P"] += n * n
        reads["V"] += n * d
        writes["O"] += n * d               # O = P V
        return reads, writes
    if algorithm == "flash, K/V outer":
        writes["O"] += n * d
        writes["l"] += n
        writes["m"] += n                   # O = 0, l = 0, m = -inf, in DRAM
        current = None
        for i0, i1, j0, j1 in tile_schedule(n, n, block_q, block_k, order="key"):
            if (j0, j1) != current:        # a new key block: K_j and V_j come on chip, once
                current = (j0, j1)
                reads["K"] += (j1 - j0) * d
                reads["V"] += (j1 - j0) * d
            rows = i1 - i0
            for name, size in (("Q", d), ("O", d), ("l", 1), ("m", 1)):
                reads[name] += rows * size
            for name, size in (("O", d), ("l", 1), ("m", 1)):
                writes[name] += rows * size
        return reads, writes
    last_key = (n - 1) // block_k * block_k
    for i0, i1, j0, j1 in tile_schedule(n, n, block_q, block_k, order="query"):
        rows = i1 - i0
        if j0 == 0:                        # a new query block: Q_i comes on chip, once
            reads["Q"] += rows * d
        reads["K"] += (j1 - j0) * d
        reads["V"] += (j1 - j0) * d
        if j0 == last_key:                 # its last key block: O_i and lse_i go back, once
            writes["O"] += rows * d
            writes["lse"] += rows
    return reads, writes


@arguments(algorithm=OneOf(*TRAFFIC_ALGORITHMS), n=Whole(hint="the sequence length N"), d=Whole(hint="the head size"),
           sram=Whole(hint="numbers the on-chip memory holds (M)"))
def tiles_walked(algorithm: str, n: int, d: int, sram: int = 100_000) -> int:
    """How many tiles :func:`count_traffic` walks for these sizes (a figure walks the small ones and draws the
    closed form beyond: the count equals it, as the tests hold).

    >>> tiles_walked("flash, Q outer", 1024, 64, 16384)
    256
    """
    if algorithm == "naive":
        return 1
    block_q, block_k = paper_blocks(algorithm, d, sram)
    return math.ceil(n / block_q) * math.ceil(n / block_k)


@arguments(algorithm=OneOf(*TRAFFIC_ALGORITHMS), n=Whole(hint="the sequence length N"), d=Whole(hint="the head size"),
           sram=Whole(hint="numbers the on-chip memory holds (M)"), itemsize=Whole(hint="bytes per number"))
def count_traffic(algorithm: str, n: int, d: int, sram: int = 100_000, itemsize: int = 4) -> dict:
    """Walk ``algorithm``'s loops for one head (N = ``n`` queries and keys, head size ``d``, on-chip memory
    ``sram`` numbers, tiles by :func:`paper_blocks`) and count what crosses between DRAM and chip.

    Returns ``{"algorithm", "n", "d", "sram", "block_q", "block_k", "reads", "writes", "numbers", "bytes"}``;
    ``reads`` and ``writes`` are per array (Q, K, V, S, P, O, l, m, lse).

    >>> count_traffic("naive", 4, 2)["numbers"]                  # 4·N·d + 4·N²
    96
    """
    block_q, block_k = (n, n) if algorithm == "naive" else paper_blocks(algorithm, d, sram)
    if algorithm != "naive" and (tiles := math.ceil(n / block_q) * math.ceil(n / block_k)) > MAX_WALK_TILES:
        raise BadInputError(f"count_traffic would walk {tiles:,} tiles here (N = {n:,}, tiles {block_q} x {block_k}), "
                            f"more than the {MAX_WALK_TILES:,} it walks in about a second: use traffic_formula"
                            f"({algorithm!r}, {n}, {d}, {sram}), the closed form the walk equals, or a larger sram")
    reads, writes = _walk(algorithm, n, d, block_q, block_k)       # cached: a redraw walks nothing twice
    numbers = sum(reads.values()) + sum(writes.values())
    return {"algorithm": algorithm, "n": n, "d": d, "sram": sram, "block_q": block_q, "block_k": block_k,
            "reads": dict(reads), "writes": dict(writes), "numbers": numbers, "bytes": numbers * itemsize}


@arguments(algorithm=OneOf(*TRAFFIC_ALGORITHMS), n=Whole(hint="the sequence length N"), d=Whole(hint="the head size"),
           sram=Whole(hint="numbers the on-chip memory holds (M)"))
def traffic_formula(algorithm: str, n: int, d: int, sram: int = 100_000) -> int:
    """The closed form of :func:`count_traffic`'s numbers (see the module's docstring).

    >>> traffic_formula("flash, K/V outer", 1024, 64, 100_000)
    800768
    """
    if algorithm == "naive":
        return 4 * n * d + 4 * n * n
    block_q, block_k = paper_blocks(algorithm, d, sram)
    if algorithm == "flash, K/V outer":
        return 3 * n * d + 2 * n + math.ceil(n / block_k) * (3 * n * d + 4 * n)
    return 2 * n * d + n + 2 * math.ceil(n / block_q) * n * d


@arguments(algorithm=OneOf(*TRAFFIC_ALGORITHMS), n=Whole(hint="the sequence length N"), d=Whole(hint="the head size"),
           sram=Whole(hint="numbers the on-chip memory holds (M)"))
def traffic_bound(algorithm: str, n: int, d: int, sram: int = 100_000) -> float:
    """The paper's Θ expression without its constant: ``N d + N²`` for the naive algorithm, ``N² d² / M``
    for the tiled ones (Theorem 2).

    >>> traffic_bound("naive", 1024, 64), traffic_bound("flash, Q outer", 1024, 64, 65536)
    (1114112.0, 65536.0)
    """
    return float(n * d + n * n) if algorithm == "naive" else n * n * d * d / sram


@arguments(n=Whole(hint="queries"), n_k=Whole(hint="keys"), d=Whole(hint="the head size"),
           d_v=Whole(hint="the value size"), block_q=Whole(hint="query rows per tile"),
           block_k=Whole(hint="keys per tile"))
def tile_traffic(n: int, n_k: int, d: int, d_v: int, block_q: int, block_k: int, causal: bool = False) -> dict:
    """What the course's tiled forward (query blocks outer, any tile sizes) reads and writes for one head, in
    numbers, summed over the tiles it visits (a causal pass skips those above the diagonal): Q once, K and V
    once per (visited) tile, O and lse once.  A closed form, equal to walking :func:`tile_schedule` (the tests
    hold it), so any size answers at once.

    >>> tile_traffic(128, 128, 64, 64, 64, 64)
    {'Q': 8192, 'K': 16384, 'V': 16384, 'O': 8192, 'lse': 128, 'numbers': 49280}
    """
    keys = _keys_visited(n, n_k, block_q, block_k) if causal else math.ceil(n / block_q) * n_k
    out = {"Q": n * d, "K": keys * d, "V": keys * d_v, "O": n * d_v, "lse": n}
    return out | {"numbers": sum(out.values())}


def _floor_sum(n: int, m: int, a: int, b: int) -> int:
    """``Σ_{i=0}^{n-1} ⌊(a·i + b) / m⌋`` for whole numbers ``a, b >= 0``, ``m >= 1``, in O(log) steps (the
    Euclid-like reduction of the floor sum; exact in Python's integers)."""
    total = 0
    while True:
        if a >= m:
            total += n * (n - 1) // 2 * (a // m)
            a %= m
        if b >= m:
            total += n * (b // m)
            b %= m
        top = a * n + b
        if top < m:
            return total
        n, b = top // m, top % m
        m, a = a, m


def _keys_visited(n: int, n_k: int, block_q: int, block_k: int) -> int:
    """Keys a causal pass reads, summed over its query blocks: query rows up to ``i1`` meet the key blocks
    that start before ``i1``, ``min(block_k · ⌈i1 / block_k⌉, n_k)`` keys.  A closed form over the blocks (no
    walk: N = 2^20 in tiles of 1 is as quick as N = 128)."""
    blocks = -(-n // block_q)
    full = -(-n_k // block_k)                                  # key blocks in all
    cap = (full - 1) * block_k // block_q + 1                  # from this query block on, every key is read
    uncapped = min(cap - 1, blocks - 1)                        # query blocks 1.. whose i1 = i · block_q is not capped
    total = block_k * _floor_sum(uncapped, block_k, block_q, block_q + block_k - 1)
    total += n_k * max(0, blocks - 1 - uncapped)
    return total + min(block_k * -(-n // block_k), n_k)       # the last query block ends at n
