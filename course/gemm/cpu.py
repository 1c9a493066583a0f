"""Lesson 09, on the CPU: the matrix product made fast on your own cores, rung by rung (numba).

Every rung computes the same ``C = A @ B`` for an (m, k) ``A`` and a (k, n) ``B``, float32 or float64:
``m·n·k`` multiply-adds (FMAs), ``2·m·n·k`` floating-point operations.  What changes from rung to rung
is only the *order* in which those FMAs run, and so how many bytes each one drags through the memory
levels (:func:`cpu_traffic` counts them from the loop structure):

===============  =========================================================================================
rung             what runs
===============  =========================================================================================
``loops``        i, j, k: the textbook three loops; the k-loop reads B down a column, n elements apart
``reordered``    i, k, j: the same FMAs in another order; every inner access is contiguous, so it vectorises
``blocked``      ``reordered`` in tiles of A, B and C small enough to stay in L1/L2 while they are reused
``microkernel``  packed panels of A and B, and a 3×4 tile of C held in 12 vector registers (Goto's method)
``parallel``     ``microkernel`` with its loop over blocks of rows of C spread over every core (``prange``)
===============  =========================================================================================

The first three rungs add each product into C in the same order (k = 0, 1, ...), so they round alike;
``microkernel`` and ``parallel`` sum the k-products in another order (``fastmath``: see
``_micro_tile``), which changes the last bits of the rounding, never the value being computed.

>>> import numpy as np
>>> a = np.arange(6, dtype=np.float32).reshape(2, 3)
>>> b = np.ones((3, 2), dtype=np.float32)
>>> cpu_matmul(a, b, "loops").tolist()
[[3.0, 3.0], [12.0, 12.0]]
>>> bool(np.array_equal(cpu_matmul(a, b, "microkernel"), a @ b))
True
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import njit, prange

from ..arguments import OneOf, Whole, arguments
from ..errors import BadInputError, UnsupportedDtypeError, whole_number
from ..limits import require_fits

__all__ = ["CPU_RUNGS", "CPU_RUNG_LABELS", "CPU_DTYPES", "MR", "NR", "KC", "MC", "NC", "BLOCK", "CACHE_LINE",
           "cpu_matmul", "cpu_traffic", "validate_operands", "validate_matmul"]

#: The rungs, in teaching order.
CPU_RUNGS = ("loops", "reordered", "blocked", "microkernel", "parallel")
#: A short label of each rung, for figures and tables.
CPU_RUNG_LABELS = {"loops": "i,j,k loops", "reordered": "i,k,j loops", "blocked": "cache blocks",
                   "microkernel": "3×4 micro-kernel", "parallel": "micro-kernel, all cores"}
CPU_DTYPES = ("float32", "float64")

#: The register tile of C: MR rows × NR columns, 12 accumulators.  An AVX2 core has 16 vector registers:
#: 12 accumulators + 3 values of A + 1 of B fill them exactly (each accumulator holds a whole vector of
#: partial sums along k: 8 float32 or 4 float64 lanes).
MR, NR = 3, 4
#: The packed panels: KC values of k per pass (an MR×KC panel of A and an NR×KC panel of B sit in L1 together),
#: MC rows of A packed per block (MC×KC in L2), NC columns of B packed per panel (KC×NC in the shared L3).
KC, MC, NC = 512, 96, 2048
#: The ``blocked`` rung's tiles of (rows of A, values of k, columns of B): a 128×512 tile of B (256 KiB in
#: float32) stays in L2 while every row of A uses it; a 512-value row of its C tile (2 KiB) stays in L1.
BLOCK = (32, 128, 512)
#: Bytes of one cache line (the unit a cache moves), for :func:`cpu_traffic`.
CACHE_LINE = 64


# ----------------------------------------------------------------- validation

def validate_operands(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(a, b)`` if they are an (m, k) and a (k, n) numpy matrix of one dtype, float32 or float64, no size 0,
    with room for the (m, n) result and the packed panels; as C-ordered arrays (a transposed view is copied)."""
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, np.ndarray):
            raise BadInputError(f"cpu_matmul takes numpy arrays; {name} is a {type(x).__name__}: "
                                f"use np.asarray({name}, dtype=np.float32) first")
        if x.ndim != 2:
            raise BadInputError(f"{name} must be a matrix (2-D), got shape {x.shape}")
        if x.dtype.name not in CPU_DTYPES:
            raise UnsupportedDtypeError(f"{name} has dtype {x.dtype.name}; the CPU rungs compute in float32 or "
                                        f"float64: convert with {name}.astype(np.float32)")
        if 0 in x.shape:
            raise BadInputError(f"{name} has an empty side (shape {x.shape}); every size must be at least 1")
    if a.dtype != b.dtype:
        raise UnsupportedDtypeError(f"a is {a.dtype.name} but b is {b.dtype.name}; give both one dtype "
                                    "(e.g. b.astype(a.dtype)): a rung computes in one precision")
    if a.shape[1] != b.shape[0]:
        raise BadInputError(f"a is {a.shape[0]}×{a.shape[1]} and b is {b.shape[0]}×{b.shape[1]}: a's columns "
                            f"({a.shape[1]}) must equal b's rows ({b.shape[0]})")
    m, n = a.shape[0], b.shape[1]
    panels = (MC + MR) * KC + (NC + NR) * KC
    copies = (0 if a.flags.c_contiguous else a.size) + (0 if b.flags.c_contiguous else b.size)
    require_fits((m * n + panels + copies) * a.itemsize, "cpu", what=f"the {m}×{n} product and its packed panels")
    return np.ascontiguousarray(a), np.ascontiguousarray(b)


def validate_matmul(a: Any, b: Any, rung: Any, threads: Any = None) -> tuple[np.ndarray, np.ndarray, str, int | None]:
    """``(a, b, rung, threads)`` checked for :func:`cpu_matmul`: the operands (:func:`validate_operands`), a rung
    of :data:`CPU_RUNGS`, and None or a whole number of threads."""
    if rung not in CPU_RUNGS:
        raise BadInputError(f"rung must be one of {CPU_RUNGS}, got {rung!r}")
    if threads is not None:
        threads = whole_number("threads", threads, hi=4096, hint="the cores the 'parallel' rung uses")
    return (*validate_operands(a, b), rung, threads)


# ----------------------------------------------------------------- rung 1: i, j, k

@njit(cache=True, boundscheck=False)
def _loops(a, b):
    m, k = a.shape
    n = b.shape[1]
    c = np.empty((m, n), dtype=a.dtype)
    for i in range(m):
        for j in range(n):
            s = a.dtype.type(0)
            for p in range(k):             # down a column of B: n elements apart, a new cache line each time
                s += a[i, p] * b[p, j]
            c[i, j] = s
    return c


# ----------------------------------------------------------------- rung 2: i, k, j

@njit(cache=True, boundscheck=False)
def _reordered(a, b):
    m, k = a.shape
    n = b.shape[1]
    c = np.zeros((m, n), dtype=a.dtype)
    for i in range(m):
        for p in range(k):
            aip = a[i, p]                  # one value of A, held in a register
            for j in range(n):             # a row of B and a row of C, both contiguous: SIMD along j
                c[i, j] += aip * b[p, j]
    return c


# ----------------------------------------------------------------- rung 3: cache blocks

@njit(cache=True, boundscheck=False)
def _blocked(a, b):
    m, k = a.shape
    n = b.shape[1]
    bm, bk, bn = BLOCK
    c = np.zeros((m, n), dtype=a.dtype)
    for j0 in range(0, n, bn):             # a tile of B (bk × bn) ...
        j1 = min(j0 + bn, n)
        for p0 in range(0, k, bk):
            p1 = min(p0 + bk, k)
            for i0 in range(0, m, bm):     # ... used by every row of A before the next tile is read
                for i in range(i0, min(i0 + bm, m)):
                    c_row = c[i, j0:j1]           # this row of the C tile stays in L1 across p
                    for p in range(p0, p1):
                        aip = a[i, p]
                        b_row = b[p, j0:j1]
                        for j in range(j1 - j0):  # (indices from 0: LLVM then knows none is negative)
                            c_row[j] += aip * b_row[j]
    return c


# ----------------------------------------------------------------- rung 4: packed panels + register tile

@njit(cache=True, boundscheck=False)
def _pack_a(a, i0, p0, mc, kc, ap):
    """Rows i0 .. i0+mc of A, columns p0 .. p0+kc, as MR-row panels: ``ap[(r * kc) + p]``, rows past mc zero."""
    rows = (mc + MR - 1) // MR * MR
    for r in range(rows):
        if r < mc:
            for p in range(kc):
                ap[r * kc + p] = a[i0 + r, p0 + p]
        else:
            for p in range(kc):
                ap[r * kc + p] = 0


@njit(cache=True, boundscheck=False)
def _pack_b(b, p0, j0, kc, nc, bp, first, last):
    """Columns j0+first .. j0+last of B (rows p0 .. p0+kc) as contiguous runs along k: ``bp[(col * kc) + p]``
    (B transposed, so the micro-kernel reads both panels with unit stride); columns past nc zero."""
    for col in range(first, last):
        if col < nc:
            for p in range(kc):
                bp[col * kc + p] = b[p0 + p, j0 + col]
        else:
            for p in range(kc):
                bp[col * kc + p] = 0


@njit(cache=True, boundscheck=False, fastmath={"reassoc", "contract"})
def _micro_tile(kc, ap, bp, c, i0, j0, mr, nr):
    """Add the 3×4 tile ``A_panel @ B_panel`` (``kc`` values of k) into ``c[i0:i0+mr, j0:j0+nr]``.

    ``ap`` holds MR = 3 rows of A and ``bp`` NR = 4 columns of B, each a contiguous run of ``kc`` values; the
    12 sums ``c00 .. c23`` are local variables, so LLVM keeps them in registers for the whole loop: each
    step loads 3 + 4 values and does 12 FMAs, (MR + NR) / (MR·NR) = 7/12 loads per FMA.

    ``fastmath={"reassoc", "contract"}`` (and nothing more: no assumption that values are finite) lets LLVM
    *reassociate* each k-sum: it keeps 8 (float32) or 4 (float64) partial sums per accumulator in the lanes
    of one vector register, adds them together at the end, and *contracts* each multiply and add into one
    FMA instruction.  That is the vectorisation.  The sum is the same mathematical sum in a different
    order (and an FMA rounds once instead of twice), so only the rounding of the last bits changes: the
    result stays within the usual rounding bound of a k-term sum (about k·eps·|A|·|B|), as BLAS's does.

    Why 12 dot products along k rather than the textbook outer-product tile (6×16 of C, vectorised along
    its rows): numba runs LLVM's loop vectoriser but not its SLP vectoriser (``NUMBA_SLP_VECTORIZE`` is
    off by default), so 96 scalar accumulators would stay scalar, while a loop of reductions is exactly
    what the loop vectoriser turns into vector registers (3 × 4 × 8 = 96 float32 partial sums).
    """
    zero = ap.dtype.type(0)
    c00 = c01 = c02 = c03 = c10 = c11 = c12 = c13 = c20 = c21 = c22 = c23 = zero
    for p in range(kc):
        a0, a1, a2 = ap[p], ap[kc + p], ap[2 * kc + p]
        b0, b1, b2, b3 = bp[p], bp[kc + p], bp[2 * kc + p], bp[3 * kc + p]
        c00, c01, c02, c03 = c00 + a0 * b0, c01 + a0 * b1, c02 + a0 * b2, c03 + a0 * b3
        c10, c11, c12, c13 = c10 + a1 * b0, c11 + a1 * b1, c12 + a1 * b2, c13 + a1 * b3
        c20, c21, c22, c23 = c20 + a2 * b0, c21 + a2 * b1, c22 + a2 * b2, c23 + a2 * b3
    tile = ((c00, c01, c02, c03), (c10, c11, c12, c13), (c20, c21, c22, c23))
    for i in range(mr):                    # an edge tile writes only the rows and columns C has
        for j in range(nr):
            c[i0 + i, j0 + j] += tile[i][j]


@njit(cache=True, boundscheck=False)
def _row_block(a, bp, c, i0, p0, j0, mc, kc, nc):
    """Pack rows i0 .. i0+mc of A (this pass's kc columns), then run every 3×4 tile of that block of C."""
    ap = np.empty((mc + MR - 1) // MR * MR * kc, dtype=a.dtype)
    _pack_a(a, i0, p0, mc, kc, ap)
    for jr in range((nc + NR - 1) // NR):       # one NR-column panel of B stays in L1 ...
        for ir in range((mc + MR - 1) // MR):   # ... while the MR-row panels of A stream past it from L2
            _micro_tile(kc, ap[ir * MR * kc:], bp[jr * NR * kc:], c, i0 + ir * MR, j0 + jr * NR,
                       min(MR, mc - ir * MR), min(NR, nc - jr * NR))


@njit(cache=True, boundscheck=False)
def _microkernel(a, b):
    m, k = a.shape
    n = b.shape[1]
    c = np.zeros((m, n), dtype=a.dtype)
    bp = np.empty((min(NC, n) + NR - 1) // NR * NR * min(KC, k), dtype=a.dtype)
    for j0 in range(0, n, NC):
        nc = min(NC, n - j0)
        for p0 in range(0, k, KC):
            kc = min(KC, k - p0)
            _pack_b(b, p0, j0, kc, nc, bp, 0, (nc + NR - 1) // NR * NR)
            for i0 in range(0, m, MC):
                _row_block(a, bp, c, i0, p0, j0, min(MC, m - i0), kc, nc)
    return c


# ----------------------------------------------------------------- rung 5: every core

@njit(cache=True, boundscheck=False, parallel=True)
def _parallel(a, b):
    m, k = a.shape
    n = b.shape[1]
    c = np.zeros((m, n), dtype=a.dtype)
    bp = np.empty((min(NC, n) + NR - 1) // NR * NR * min(KC, k), dtype=a.dtype)
    for j0 in range(0, n, NC):
        nc = min(NC, n - j0)
        for p0 in range(0, k, KC):
            kc = min(KC, k - p0)
            for blk in prange((nc + NR - 1) // NR):       # the cores pack B's panels together ...
                _pack_b(b, p0, j0, kc, nc, bp, blk * NR, blk * NR + NR)
            for rb in prange((m + MC - 1) // MC):         # ... then each takes blocks of rows of C: no two
                i0 = rb * MC                              # cores ever write the same element
                _row_block(a, bp, c, i0, p0, j0, min(MC, m - i0), kc, nc)
    return c


_KERNELS = {"loops": _loops, "reordered": _reordered, "blocked": _blocked, "microkernel": _microkernel,
            "parallel": _parallel}


def cpu_matmul(a: np.ndarray, b: np.ndarray, rung: str = "microkernel", threads: int | None = None) -> np.ndarray:
    """``a @ b`` computed by one CPU rung (see the module's table), compiled by numba once and cached on disk.

    Parameters
    ----------
    a, b : an (m, k) and a (k, n) numpy matrix, both float32 or both float64, any sizes from 1 (edge tiles
        are handled); a transposed view is first copied into C order.
    rung : one of :data:`CPU_RUNGS`.
    threads : the cores ``parallel`` uses (default: numba's current setting, every core); the other rungs
        run on one.

    >>> a = np.ones((7, 13), dtype=np.float64)
    >>> float(cpu_matmul(a, a.T, "parallel", threads=1)[6, 6])
    13.0
    """
    a, b, rung, threads = validate_matmul(a, b, rung, threads)
    if rung != "parallel" or threads is None:
        return _KERNELS[rung](a, b)
    before = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        return _parallel(a, b)
    finally:
        numba.set_num_threads(before)


# ----------------------------------------------------------------- counted traffic

@arguments(rung=OneOf(*CPU_RUNGS), m=Whole(), n=Whole(), k=Whole(), itemsize=OneOf(4, 8))
def cpu_traffic(rung: str, m: int, n: int, k: int, itemsize: int = 4) -> dict[str, float]:
    """Bytes each FMA moves between memory levels, counted from the rung's loop structure.

    Three levels, each an average over the ``m·n·k`` FMAs of the whole product:

    * ``"registers"``: what the innermost loop's loads and stores move between L1 and the registers
      (a value held in a register across the loop counts once per loop);
    * ``"l1_fill"``: what comes into L1 from below: a value read with unit stride costs its own bytes, one
      read with a stride of a cache line or more costs a whole line (:data:`CACHE_LINE` bytes); a block
      counts once per reuse only where the loops keep it in L1 (a row of C in ``blocked``, a panel of B in
      ``microkernel``: their sizes are chosen for that);
    * ``"memory"``: what comes from beyond the core's own caches (L3, DRAM): each operand once per pass the
      loops make over it, where the matrices are larger than L2.

    Per rung (E = itemsize, in elements per FMA before the factor E):

    ``loops``: A and B one each, C stored once per k: ``registers = E(2 + 1/k)``; B is read down a column, a
    line per value: ``l1_fill = LINE + E(1/n + 1/k)``; B is passed over once per row of A:
    ``memory = E(1 + 1/n + 1/k)``.  ``reordered``: per FMA a load of B and a load and store of C, A once per
    row of B: ``registers = E(3 + 1/n)``; B streams at unit stride, C's row stays in L1 across k:
    ``l1_fill = E(1 + 1/n + 2/k)``, ``memory`` the same.  ``blocked`` (tiles bm × bk × bn of :data:`BLOCK`):
    ``registers = E(3 + 1/bn)``, ``l1_fill = E(1 + 1/bn + 2/bk)`` (B's tile from L2), ``memory =
    E(1/m + 1/bn + 2/bk)`` (each tile of B read once, A once per column of tiles, C once per k-tile).
    ``microkernel`` and ``parallel`` (MR × NR tile, panels KC, MC, NC): ``registers = E((MR + NR)/(MR·NR) +
    2/kc)``, ``l1_fill = E(1/NR + 1/mc + 2/kc)`` (A's panels stream from L2 once per column panel, B's panel
    once per block of rows), ``memory = E(1/nc + 1/mc + 1/m + 2/kc)`` (A packed once per B panel, the packed B
    panel read once per block of rows from L3, B packed once, C once per pass over k); ``parallel`` moves
    the same bytes per FMA, from every core at once.  Here kc, mc, nc are KC, MC, NC capped by k, m, n.

    >>> cpu_traffic("loops", 4, 4, 4, 4)["registers"]
    9.0
    """
    e, line = float(itemsize), float(CACHE_LINE)
    if rung == "loops":
        return {"registers": e * (2 + 1 / k), "l1_fill": line + e * (1 / n + 1 / k),
                "memory": e * (1 + 1 / n + 1 / k)}
    if rung == "reordered":
        fill = e * (1 + 1 / n + 2 / k)
        return {"registers": e * (3 + 1 / n), "l1_fill": fill, "memory": fill}
    if rung == "blocked":
        bk, bn = min(BLOCK[1], k), min(BLOCK[2], n)
        return {"registers": e * (3 + 1 / bn), "l1_fill": e * (1 + 1 / bn + 2 / bk),
                "memory": e * (1 / m + 1 / bn + 2 / bk)}
    kc, mc, nc = min(KC, k), min(MC, m), min(NC, n)
    return {"registers": e * ((MR + NR) / (MR * NR) + 2 / kc), "l1_fill": e * (1 / NR + 1 / mc + 2 / kc),
            "memory": e * (1 / nc + 1 / mc + 1 / m + 2 / kc)}
