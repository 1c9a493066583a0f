"""The first rungs of the GPU ladder as ``numba.cuda`` kernels, small enough for the CUDA simulator to
*count* what each one asks of the memory system.

:mod:`course.gemm.ladder` runs these rungs in CUDA C on a GPU, and :mod:`course.gemm.counts` predicts their
loads from the tile sizes alone.  Here the same indexing (thread ``t`` of a block, tile origins, which
thread copies which element: the CUDA C kernels' and :mod:`course.gemm.emulate`'s) runs thread by thread on
numba's simulator (:func:`course.kernels.simulate`), and :func:`course.kernels.hardware_counts` counts the
32-byte sectors each warp's request touches, the shared-memory loads and the bank conflicts.  The tiles are
shrunk (:data:`SIMT_SPECS`: at most 256 simulated threads) but every warp is full, so each count per FMA
is the one the rung's structure gives at any size with those tiles:

==============  ===========================================================================================
naive           threadIdx.x on the *row*: a warp reads 32 rows of A (32 sectors) and one float of B
coalesced       threadIdx.x on the column: a warp reads one float of A (broadcast) and 32 neighbours of B
shared          16 x 16 tiles of A and B copied once into shared memory, then 2 shared loads per FMA
blocktile_1d    each thread 4 outputs down a column: one load of B feeds 4 FMAs ((1 + TM) / TM loads per FMA)
blocktile_2d    each thread a 4 x 4 patch: 4 + 4 shared loads feed 16 FMAs ((TM + TN) / (TM TN) per FMA)
==============  ===========================================================================================

>>> row = simt_rung_counts(["blocktile_2d"])[0]
>>> row["shared_loads_per_fma"], row["bank_conflicts"] > 0
(0.5, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numba import cuda, float32

from ..arguments import Given, OneOf, Optional, arguments
from ..errors import BadInputError

__all__ = ["SIMT_RUNGS", "SIMT_SPECS", "SIMT_KERNELS", "simt_inputs", "simt_trace", "simt_rung_counts"]

SIMT_RUNGS = ("naive", "coalesced", "shared", "blocktile_1d", "blocktile_2d")

#: Tile constants the kernels read (module globals, so ``numba.cuda.jit`` compiles them in).
SH = 16                                      # shared: SH x SH threads, SH x SH tiles
B1_BM, B1_BN, B1_BK, B1_TM = 16, 16, 4, 4    # blocktile_1d: 64 threads, each TM outputs of one column
B2_BM, B2_BN, B2_BK, B2_TM, B2_TN = 32, 32, 4, 4, 4   # blocktile_2d: 64 threads, each a TM x TN patch
B2_THREADS = (B2_BM // B2_TM) * (B2_BN // B2_TN)

#: Per rung: the launch (one block), the product's m, n, k, and the tiles (as ``GPU_RUNG_SPECS`` names them).
SIMT_SPECS: dict[str, dict] = {
    "naive": dict(threads=(32, 8), m=32, n=8, k=8, bm=32, bn=8, bk=1, tm=1, tn=1),
    "coalesced": dict(threads=(32, 8), m=8, n=32, k=8, bm=8, bn=32, bk=1, tm=1, tn=1),
    "shared": dict(threads=(SH, SH), m=SH, n=SH, k=2 * SH, bm=SH, bn=SH, bk=SH, tm=1, tn=1),
    "blocktile_1d": dict(threads=B1_BM * B1_BN // B1_TM, m=B1_BM, n=B1_BN, k=4 * B1_BK, bm=B1_BM, bn=B1_BN,
                         bk=B1_BK, tm=B1_TM, tn=1),
    "blocktile_2d": dict(threads=B2_THREADS, m=B2_BM, n=B2_BN, k=2 * B2_BK, bm=B2_BM, bn=B2_BN, bk=B2_BK,
                         tm=B2_TM, tn=B2_TN),
}


def _naive(c, a, b, k):
    row = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x     # x on the row: a warp spans 32 rows
    col = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    acc = 0.0
    for i in range(k):
        acc += a[row, i] * b[i, col]
    c[row, col] = acc


def _coalesced(c, a, b, k):
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x     # x on the column: neighbours in memory
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    acc = 0.0
    for i in range(k):
        acc += a[row, i] * b[i, col]
    c[row, col] = acc


def _shared(c, a, b, k):
    sa = cuda.shared.array((SH, SH), float32)
    sb = cuda.shared.array((SH, SH), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row, col = cuda.blockIdx.y * SH + ty, cuda.blockIdx.x * SH + tx
    acc = 0.0
    for k0 in range(0, k, SH):
        sa[ty, tx] = a[row, k0 + tx]
        sb[ty, tx] = b[k0 + ty, col]
        cuda.syncthreads()
        for kk in range(SH):
            acc += sa[ty, kk] * sb[kk, tx]                          # two shared loads per FMA
        cuda.syncthreads()
    c[row, col] = acc


def _blocktile_1d(c, a, b, k):
    sa = cuda.shared.array((B1_BM, B1_BK), float32)
    sb = cuda.shared.array((B1_BK, B1_BN), float32)
    acc = cuda.local.array(B1_TM, float32)
    t = cuda.threadIdx.x
    row0, col0 = cuda.blockIdx.y * B1_BM, cuda.blockIdx.x * B1_BN
    tr, tc = t // B1_BN, t % B1_BN                                  # outputs rows tr * TM + i of column tc
    for i in range(B1_TM):
        acc[i] = 0.0
    for k0 in range(0, k, B1_BK):
        sa[t // B1_BK, t % B1_BK] = a[row0 + t // B1_BK, k0 + t % B1_BK]
        sb[t // B1_BN, t % B1_BN] = b[k0 + t // B1_BN, col0 + t % B1_BN]
        cuda.syncthreads()
        for kk in range(B1_BK):
            bv = sb[kk, tc]                                         # one load of b, reused TM times
            for i in range(B1_TM):
                acc[i] += sa[tr * B1_TM + i, kk] * bv
        cuda.syncthreads()
    for i in range(B1_TM):
        c[row0 + tr * B1_TM + i, col0 + tc] = acc[i]


def _blocktile_2d(c, a, b, k):
    sa = cuda.shared.array((B2_BM, B2_BK), float32)
    sb = cuda.shared.array((B2_BK, B2_BN), float32)
    acc = cuda.local.array((B2_TM, B2_TN), float32)
    ra = cuda.local.array(B2_TM, float32)
    rb = cuda.local.array(B2_TN, float32)
    t = cuda.threadIdx.x
    row0, col0 = cuda.blockIdx.y * B2_BM, cuda.blockIdx.x * B2_BN
    tr, tc = t // (B2_BN // B2_TN), t % (B2_BN // B2_TN)            # a TM x TN patch at (tr * TM, tc * TN)
    for i in range(B2_TM):
        for j in range(B2_TN):
            acc[i, j] = 0.0
    for k0 in range(0, k, B2_BK):
        for r in range(0, B2_BM, B2_THREADS // B2_BK):
            sa[t // B2_BK + r, t % B2_BK] = a[row0 + t // B2_BK + r, k0 + t % B2_BK]
        for r in range(0, B2_BK, B2_THREADS // B2_BN):
            sb[t // B2_BN + r, t % B2_BN] = b[k0 + t // B2_BN + r, col0 + t % B2_BN]
        cuda.syncthreads()
        for kk in range(B2_BK):
            for i in range(B2_TM):                                  # TM + TN shared loads ...
                ra[i] = sa[tr * B2_TM + i, kk]
            for j in range(B2_TN):
                rb[j] = sb[kk, tc * B2_TN + j]
            for i in range(B2_TM):                                  # ... feed TM x TN FMAs
                for j in range(B2_TN):
                    acc[i, j] += ra[i] * rb[j]
        cuda.syncthreads()
    for i in range(B2_TM):
        for j in range(B2_TN):
            c[row0 + tr * B2_TM + i, col0 + tc * B2_TN + j] = acc[i, j]


#: Each rung's kernel (a plain function using ``cuda``: the simulator runs it, ``numba.cuda.jit`` compiles it).
SIMT_KERNELS = {"naive": _naive, "coalesced": _coalesced, "shared": _shared, "blocktile_1d": _blocktile_1d,
                "blocktile_2d": _blocktile_2d}


@arguments(rung=OneOf(*SIMT_RUNGS))
def simt_inputs(rung: str, seed: int = 0) -> dict:
    """The arguments of one rung's tiny launch, by name: ``c`` (NaN, so a missed element shows), ``a``, ``b``
    (small integers: the sums are exact) and ``k``.

    >>> {k: getattr(v, "shape", v) for k, v in simt_inputs("naive").items()}
    {'c': (32, 8), 'a': (32, 8), 'b': (8, 8), 'k': 8}
    """
    s = SIMT_SPECS[rung]
    rng = np.random.default_rng(seed)
    return {"c": np.full((s["m"], s["n"]), np.nan, np.float32),
            "a": rng.integers(-4, 5, (s["m"], s["k"])).astype(np.float32),
            "b": rng.integers(-4, 5, (s["k"], s["n"])).astype(np.float32), "k": s["k"]}


def _run(rung: str) -> tuple[dict, Any, dict]:
    from ..kernels import simulate
    args = simt_inputs(rung)
    res, trace = simulate(SIMT_KERNELS[rung], (1, 1), SIMT_SPECS[rung]["threads"], **args)
    return res, trace, args


@arguments(rung=OneOf(*SIMT_RUNGS))
def simt_trace(rung: str) -> Any:
    """The simulator's :class:`~course.kernels.Trace` of one rung's launch, for
    :func:`course.kernels.draw_trace` (what each thread read and wrote, per barrier phase).

    >>> len(simt_trace("coalesced").accesses)
    4352
    """
    return _run(rung)[1]


def validate_rungs(rungs: Any) -> list[str]:
    """``rungs`` as a list of :data:`SIMT_RUNGS` names (None: all of them, in teaching order)."""
    if rungs is None:
        return list(SIMT_RUNGS)
    if isinstance(rungs, str) or not isinstance(rungs, Sequence) or not rungs:
        raise BadInputError(f"rungs must be a list of names from {SIMT_RUNGS}, or None for all; got {rungs!r:.80}")
    bad = [r for r in rungs if r not in SIMT_RUNGS]
    if bad:
        raise BadInputError(f"rungs must be names from {SIMT_RUNGS}; got {bad[0]!r:.40}")
    return list(rungs)


@arguments(rungs=Optional(Given(validate_rungs)))
def simt_rung_counts(rungs: Sequence[str] | None = None) -> list[dict]:
    """Each rung simulated and counted: one row per rung, in teaching order.

    A row holds the rung, its tiny launch (``threads``, ``m``, ``n``, ``k``, ``tm``, ``tn``), ``fma`` (the
    product's multiply-adds), ``global_sectors`` and ``sectors_per_fma`` (reads and writes),
    ``read_bytes_per_fma`` (bytes the loads ask for, per FMA), ``read_sector_bytes_per_fma`` (bytes of the
    32-byte sectors those loads touch: more, where a warp's request is not coalesced),
    ``shared_loads_per_fma`` (shared-memory loads, per FMA), ``bank_conflicts`` (replayed wavefronts, whole
    launch), ``worst_conflict`` (the most wavefronts one request took) and ``correct`` (c = a @ b).  The
    simulator runs one Python thread per CUDA thread: all five take a few seconds.
    """
    from ..kernels import hardware_counts
    from ..kernels.counts import SECTOR_BYTES
    rows = []
    for rung in rungs if rungs is not None else SIMT_RUNGS:
        s = SIMT_SPECS[rung]
        res, trace, args = _run(rung)
        counts = hardware_counts(trace, s["threads"])
        fma = s["m"] * s["n"] * s["k"]
        reads = sum(r["cost"] for r in counts.requests if r["space"] == "global" and r["kind"] == "R")
        shared_loads = sum(1 for a in trace.accesses if a.space == "shared" and a.kind == "R")
        asked = sum(4 for a in trace.accesses if a.space == "global" and a.kind == "R")
        rows.append({"rung": rung, "threads": int(np.prod(s["threads"])), "m": s["m"], "n": s["n"], "k": s["k"],
                     "tm": s["tm"], "tn": s["tn"], "fma": fma, "global_sectors": counts.global_sectors,
                     "sectors_per_fma": counts.global_sectors / fma,
                     "read_bytes_per_fma": asked / fma, "read_sector_bytes_per_fma": reads * SECTOR_BYTES / fma,
                     "shared_loads_per_fma": shared_loads / fma, "bank_conflicts": counts.bank_conflicts,
                     "worst_conflict": counts.worst_conflict,
                     "correct": bool(np.array_equal(res["c"], args["a"] @ args["b"]))})
    return rows
