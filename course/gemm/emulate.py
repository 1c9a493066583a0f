"""Every thread of every ladder kernel, emulated in NumPy: the index arithmetic checked on a CPU.

A kernel that indexes one tile wrongly still compiles; on a GPU it returns a wrong product, or a right
one that races.  So each CUDA C rung of :mod:`course.gemm.cuda_sources` has its emulation here, line by
line in the same order as the CUDA C and with the same constants (from
:data:`~course.gemm.ladder.GPU_RUNG_SPECS`): ``blockIdx``, ``threadIdx``, the loop over k-tiles, which
shared cell each thread writes and reads, float4 lanes, A's transposed tile, the two ``cp.async``
stages, the per-lane fragment loads and ``ldmatrix`` of the mma rungs, and ``mma.sync`` itself through
the PTX ISA's fragment tables (:func:`course.gemm.fragments.fragment_layout`).  Each line runs for all
threads of a block at once; :class:`course.gemm.machine.Launch` keeps the books (races, out-of-range
and misaligned accesses, bank conflicts, counts per thread).

Read a rung here beside its CUDA C: ``e.gload``/``e.gstore`` are global loads and stores,
``e.sload``/``e.sstore`` shared ones, ``X.at(i, j)`` is ``X[i][j]``, ``e.sync()`` is ``__syncthreads()``,
``e.cp_async``/``e.commit``/``e.wait`` the asynchronous copies, ``e.fma(n)`` counts n FMAs per thread.

>>> rng = np.random.default_rng(0)
>>> a, b = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((32, 64)).astype(np.float32)
>>> e = emulate_launch("shared", a, b)
>>> e.ok, e.max_rel_error < 1e-12, e.counts["shared_loads"], e.bank_conflict_factor
(True, True, 64.0, 1.0)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import BadInputError
from ..standin import kernel_twin, register_kernel
from .fragments import round_to_tf32
from .ladder import (
    GPU_RUNG_SPECS,
    GPU_RUNGS,
    RungSpec,
    bfloat16_bits_numpy,
    from_bfloat16_bits,
    padded_sizes,
    require_launch,
)
from .machine import Emulation, Launch

__all__ = ["emulate_launch", "emulate_matmul", "emulated_kernels", "RUNG_EMULATIONS"]


def tf32(v: np.ndarray) -> np.ndarray:
    """``cvt.rna.tf32.f32`` of float32 values held in float64."""
    return round_to_tf32(v.astype(np.float32)).astype(np.float64)


def naive(e: Launch, s: RungSpec) -> None:
    BM, BN, M, N, K = s.bm, s.bn, e.M, e.N, e.K
    for bx, by in e.blocks():
        row = bx * BM + e.tx
        col = by * BN + e.ty
        inside = (row < M) & (col < N)
        acc = np.zeros(e.t.size)
        for i in range(K):
            acc += e.gload("A", row * K + i, mask=inside) * e.gload("B", i * N + col, mask=inside)
            e.fma(1)
        e.gstore(row * N + col, acc, mask=inside)


def coalesced(e: Launch, s: RungSpec) -> None:
    BM, BN, M, N, K = s.bm, s.bn, e.M, e.N, e.K
    for bx, by in e.blocks():
        col = bx * BN + e.tx
        row = by * BM + e.ty
        inside = (row < M) & (col < N)
        acc = np.zeros(e.t.size)
        for i in range(K):
            acc += e.gload("A", row * K + i, mask=inside) * e.gload("B", i * N + col, mask=inside)
            e.fma(1)
        e.gstore(row * N + col, acc, mask=inside)


def shared(e: Launch, s: RungSpec) -> None:
    BM, BN, BK, N, K = s.bm, s.bn, s.bk, e.N, e.K
    for bx, by in e.blocks():
        As, Bs = e.smem("As", (BM, BK)), e.smem("Bs", (BK, BN))
        tx, ty = e.tx, e.ty
        row, col = by * BM + ty, bx * BN + tx
        acc = np.zeros(e.t.size)
        for k0 in range(0, K, BK):
            e.sstore(As, As.at(ty, tx), e.gload("A", row * K + k0 + tx))
            e.sstore(Bs, Bs.at(ty, tx), e.gload("B", (k0 + ty) * N + col))
            e.sync()
            for kk in range(BK):
                acc += e.sload(As, As.at(ty, kk)) * e.sload(Bs, Bs.at(kk, tx))
                e.fma(1)
            e.sync()
        e.gstore(row * N + col, acc)


def blocktile_1d(e: Launch, s: RungSpec) -> None:
    BM, BN, BK, TM, N, K = s.bm, s.bn, s.bk, s.tm, e.N, e.K
    for bx, by in e.blocks():
        As, Bs = e.smem("As", (BM * BK,)), e.smem("Bs", (BK * BN,))
        t = e.t
        row0, col0 = by * BM, bx * BN
        tr, tc = t // BN, t % BN
        ar, ac = t // BK, t % BK
        br, bc = t // BN, t % BN
        acc = np.zeros((t.size, TM))
        for k0 in range(0, K, BK):
            e.sstore(As, As.at(ar * BK + ac), e.gload("A", (row0 + ar) * K + k0 + ac))
            e.sstore(Bs, Bs.at(br * BN + bc), e.gload("B", (k0 + br) * N + col0 + bc))
            e.sync()
            for kk in range(BK):
                b = e.sload(Bs, Bs.at(kk * BN + tc))
                for i in range(TM):
                    acc[:, i] += e.sload(As, As.at((tr * TM + i) * BK + kk)) * b
                e.fma(TM)
            e.sync()
        for i in range(TM):
            e.gstore((row0 + tr * TM + i) * N + col0 + tc, acc[:, i])


def blocktile_2d(e: Launch, s: RungSpec) -> None:
    BM, BN, BK, TM, TN, THREADS, N, K = s.bm, s.bn, s.bk, s.tm, s.tn, s.threads, e.N, e.K
    for bx, by in e.blocks():
        As, Bs = e.smem("As", (BM * BK,)), e.smem("Bs", (BK * BN,))
        t = e.t
        row0, col0 = by * BM, bx * BN
        tr, tc = t // (BN // TN), t % (BN // TN)
        ar, ac = t // BK, t % BK
        br, bc = t // BN, t % BN
        acc = np.zeros((t.size, TM, TN))
        for k0 in range(0, K, BK):
            for r in range(0, BM, THREADS // BK):
                e.sstore(As, As.at((ar + r) * BK + ac), e.gload("A", (row0 + ar + r) * K + k0 + ac))
            for r in range(0, BK, THREADS // BN):
                e.sstore(Bs, Bs.at((br + r) * BN + bc), e.gload("B", (k0 + br + r) * N + col0 + bc))
            e.sync()
            for kk in range(BK):
                rm = np.stack([e.sload(As, As.at((tr * TM + i) * BK + kk)) for i in range(TM)], axis=1)
                rn = np.stack([e.sload(Bs, Bs.at(kk * BN + tc * TN + j)) for j in range(TN)], axis=1)
                acc += rm[:, :, None] * rn[:, None, :]
                e.fma(TM * TN)
            e.sync()
        for i in range(TM):
            for j in range(TN):
                e.gstore((row0 + tr * TM + i) * N + col0 + tc * TN + j, acc[:, i, j])


def vectorized(e: Launch, s: RungSpec) -> None:
    BM, BN, BK, TM, TN, N, K = s.bm, s.bn, s.bk, s.tm, s.tn, e.N, e.K
    for bx, by in e.blocks():
        As, Bs = e.smem("As", (BK * BM,)), e.smem("Bs", (BK * BN,))      # As transposed: As[k * BM + m]
        t = e.t
        row0, col0 = by * BM, bx * BN
        tr, tc = t // (BN // TN), t % (BN // TN)
        ar, ac = t // (BK // 4), t % (BK // 4)
        br, bc = t // (BN // 4), t % (BN // 4)
        acc = np.zeros((t.size, TM, TN))
        for k0 in range(0, K, BK):
            a = e.gload("A", (row0 + ar) * K + k0 + 4 * ac, width=4)
            for q in range(4):                                              # a.x, a.y, a.z, a.w
                e.sstore(As, As.at((4 * ac + q) * BM + ar), a[:, q])
            e.sstore(Bs, Bs.at(br * BN + 4 * bc), e.gload("B", (k0 + br) * N + col0 + 4 * bc, width=4), width=4)
            e.sync()
            for kk in range(BK):
                rm = np.concatenate([e.sload(As, As.at(kk * BM + tr * TM + i), width=4) for i in range(0, TM, 4)], 1)
                rn = np.concatenate([e.sload(Bs, Bs.at(kk * BN + tc * TN + j), width=4) for j in range(0, TN, 4)], 1)
                acc += rm[:, :, None] * rn[:, None, :]
                e.fma(TM * TN)
            e.sync()
        for i in range(TM):
            for j in range(0, TN, 4):
                e.gstore((row0 + tr * TM + i) * N + col0 + tc * TN + j, acc[:, i, j:j + 4], width=4)


def _load_tiles(e: Launch, s: RungSpec, As: Any, Bs: Any, st: int, k0: int, row0: int, col0: int, per: int) -> None:
    """The ``load_tiles`` lambda of the cp.async rungs: ``per`` elements (16 bytes) per copy."""
    BM, BN, BK, THREADS, N, K, t = s.bm, s.bn, s.bk, s.threads, e.N, e.K, e.t
    for c0 in range(0, BM * BK // per, THREADS):
        c = c0 + t
        r, q = c // (BK // per), c % (BK // per)
        e.cp_async(As, As.at(st, r, per * q), "A", (row0 + r) * K + k0 + per * q)
    for c0 in range(0, BK * BN // per, THREADS):
        c = c0 + t
        r, q = c // (BN // per), c % (BN // per)
        e.cp_async(Bs, Bs.at(st, r, per * q), "B", (k0 + r) * N + col0 + per * q)
    e.commit()


def warptile(e: Launch, s: RungSpec) -> None:
    BM, BN, BK, TM, TN, N, K = s.bm, s.bn, s.bk, s.tm, s.tn, e.N, e.K
    (WM, WN), PAD = s.warp_tile, s.pad_a
    ROW_STEP, COL_STEP = WM // TM, WN // (TN // 4)
    for bx, by in e.blocks():
        As, Bs = e.smem("As", (2, BM, BK + PAD)), e.smem("Bs", (2, BK, BN))
        warp, lane = e.warp, e.lane
        row0, col0 = by * BM, bx * BN
        wm, wn = (warp // (BN // WN)) * WM, (warp % (BN // WN)) * WN
        lr, lc = lane // (COL_STEP // 4), lane % (COL_STEP // 4)
        acc = np.zeros((e.t.size, TM, TN))
        tiles = K // BK
        _load_tiles(e, s, As, Bs, 0, 0, row0, col0, 4)
        for tile in range(tiles):
            st = tile & 1
            if tile + 1 < tiles:
                _load_tiles(e, s, As, Bs, st ^ 1, (tile + 1) * BK, row0, col0, 4)
                e.wait(1)
            else:
                e.wait(0)
            e.sync()
            for kk in range(BK):
                rm = np.stack([e.sload(As, As.at(st, wm + lr + ROW_STEP * i, kk)) for i in range(TM)], axis=1)
                rn = np.concatenate([e.sload(Bs, Bs.at(st, kk, wn + COL_STEP * j + 4 * lc), width=4)
                                     for j in range(TN // 4)], axis=1)
                acc += rm[:, :, None] * rn[:, None, :]
                e.fma(TM * TN)
            e.sync()
        for i in range(TM):
            for j in range(TN // 4):
                e.gstore((row0 + wm + lr + ROW_STEP * i) * N + col0 + wn + COL_STEP * j + 4 * lc,
                         acc[:, i, 4 * j:4 * j + 4], width=4)


def mma_tf32(e: Launch, s: RungSpec) -> None:
    BM, BN, BK, N, K = s.bm, s.bn, s.bk, e.N, e.K
    (WM, WN) = s.warp_tile
    MI, NI = WM // 16, WN // 8
    for bx, by in e.blocks():
        As, Bs = e.smem("As", (2, BM, BK + s.pad_a)), e.smem("Bs", (2, BK, BN + s.pad_b))
        warp, lane = e.warp, e.lane
        row0, col0 = by * BM, bx * BN
        wm, wn = (warp // (BN // WN)) * WM, (warp % (BN // WN)) * WN
        g, q = lane // 4, lane % 4
        acc = np.zeros((MI, NI, e.t.size, 4))
        tiles = K // BK
        _load_tiles(e, s, As, Bs, 0, 0, row0, col0, 4)
        for tile in range(tiles):
            st = tile & 1
            if tile + 1 < tiles:
                _load_tiles(e, s, As, Bs, st ^ 1, (tile + 1) * BK, row0, col0, 4)
                e.wait(1)
            else:
                e.wait(0)
            e.sync()
            for kk in range(0, BK, 8):
                a, b = np.zeros((MI, e.t.size, 4)), np.zeros((NI, e.t.size, 2))
                for mi in range(MI):
                    r = wm + 16 * mi + g
                    a[mi, :, 0] = tf32(e.sload(As, As.at(st, r, kk + q)))
                    a[mi, :, 1] = tf32(e.sload(As, As.at(st, r + 8, kk + q)))
                    a[mi, :, 2] = tf32(e.sload(As, As.at(st, r, kk + q + 4)))
                    a[mi, :, 3] = tf32(e.sload(As, As.at(st, r + 8, kk + q + 4)))
                for ni in range(NI):
                    c = wn + 8 * ni + g
                    b[ni, :, 0] = tf32(e.sload(Bs, Bs.at(st, kk + q, c)))
                    b[ni, :, 1] = tf32(e.sload(Bs, Bs.at(st, kk + q + 4, c)))
                for mi in range(MI):
                    for ni in range(NI):
                        acc[mi, ni] = e.mma("m16n8k8.tf32", acc[mi, ni], a[mi], b[ni])
            e.sync()
        for mi in range(MI):
            for ni in range(NI):
                r, c = row0 + wm + 16 * mi + g, col0 + wn + 8 * ni + 2 * q
                e.gstore(r * N + c, acc[mi, ni][:, 0:2], width=2)
                e.gstore((r + 8) * N + c, acc[mi, ni][:, 2:4], width=2)


def mma_bf16(e: Launch, s: RungSpec) -> None:
    BM, BN, BK, N = s.bm, s.bn, s.bk, e.N
    (WM, WN) = s.warp_tile
    MI, NI = WM // 16, WN // 8
    for bx, by in e.blocks():
        As, Bs = e.smem("As", (2, BM, BK + s.pad_a), esize=2), e.smem("Bs", (2, BK, BN + s.pad_b), esize=2)
        warp, lane = e.warp, e.lane
        row0, col0 = by * BM, bx * BN
        wm, wn = (warp // (BN // WN)) * WM, (warp % (BN // WN)) * WN
        acc = np.zeros((MI, NI, e.t.size, 4))
        tiles = e.K // BK
        _load_tiles(e, s, As, Bs, 0, 0, row0, col0, 8)
        for tile in range(tiles):
            st = tile & 1
            if tile + 1 < tiles:
                _load_tiles(e, s, As, Bs, st ^ 1, (tile + 1) * BK, row0, col0, 8)
                e.wait(1)
            else:
                e.wait(0)
            e.sync()
            for kk in range(0, BK, 16):
                a, b = np.zeros((MI, e.t.size, 8)), np.zeros((NI, e.t.size, 4))
                for mi in range(MI):
                    a[mi] = e.ldmatrix(As, As.at(st, wm + 16 * mi + lane % 16, kk + 8 * (lane // 16)),
                                       trans=False).reshape(-1, 8)
                for ni in range(0, NI, 2):
                    r = e.ldmatrix(Bs, Bs.at(st, kk + lane % 16, wn + 8 * ni + 8 * (lane // 16)), trans=True)
                    b[ni], b[ni + 1] = r[:, 0:2].reshape(-1, 4), r[:, 2:4].reshape(-1, 4)
                for mi in range(MI):
                    for ni in range(NI):
                        acc[mi, ni] = e.mma("m16n8k16.bf16", acc[mi, ni], a[mi], b[ni])
            e.sync()
        g, q = lane // 4, lane % 4
        for mi in range(MI):
            for ni in range(NI):
                r, c = row0 + wm + 16 * mi + g, col0 + wn + 8 * ni + 2 * q
                e.gstore(r * N + c, acc[mi, ni][:, 0:2], width=2)
                e.gstore((r + 8) * N + c, acc[mi, ni][:, 2:4], width=2)


#: rung -> its emulation, in teaching order.
RUNG_EMULATIONS = {name: globals()[name] for name in GPU_RUNGS}


def _inputs(x: Any, precision: str) -> np.ndarray:
    """A matrix as the rung's kernel reads it, as float32 values: bfloat16 (bits or rounded), else float32."""
    x = np.asarray(x)
    if precision == "bfloat16":
        return from_bfloat16_bits(x if x.dtype == np.uint16 else bfloat16_bits_numpy(x))
    return x.astype(np.float32)


def emulate_launch(rung: str, a: Any, b: Any, arch: int = 80) -> Emulation:
    """Emulate one launch of ``rung``'s kernel on ``a (m, k) @ b (k, n)``, sizes multiples of its tile.

    ``arch`` below 80 takes the plain-copy path of the cp.async rungs.  The float64 product it is compared
    with uses the inputs as the rung reads them (TF32 rounding happens in the fragment loads, as in the
    kernel, and in the expected product)."""
    if rung not in GPU_RUNG_SPECS:
        raise BadInputError(f"rung must be one of {', '.join(GPU_RUNGS)}; got {rung!r:.60}")
    spec = GPU_RUNG_SPECS[rung]
    A, B = _inputs(a, spec.precision), _inputs(b, spec.precision)
    (m, k), (k2, n) = A.shape, B.shape
    if k != k2 or padded_sizes(rung, m, n, k) != (m, n, k):
        raise BadInputError(f"emulate_launch takes sizes the kernel takes: multiples {spec.multiple} of (m, n, k), "
                            f"got a {A.shape} @ b {B.shape}; emulate_matmul pads as gpu_matmul does")
    e = Launch(spec, A, B, m, n, k, arch)
    RUNG_EMULATIONS[rung](e, spec)
    if spec.precision == "tf32":
        A, B = round_to_tf32(A), round_to_tf32(B)
    expected = A.astype(np.float64) @ B.astype(np.float64)
    if (e.writes == 0).any():
        e.problem("outputs", f"{int((e.writes == 0).sum())} outputs never written")
    if (e.writes > 1).any():
        e.problem("outputs", f"{int((e.writes > 1).sum())} outputs written more than once")
    gx, gy, _ = spec.grid(m, n)
    threads = spec.threads * gx * gy
    counts = {key: e.totals[key] / threads for key in ("fma", "global_loads", "global_load_bytes", "shared_loads",
                                                         "shared_load_bytes", "global_stores")}
    counts["mma_per_warp"] = e.totals["mma"] / (threads / 32)
    counts["sectors_per_warp_load"] = e.totals["sectors"] / max(1, e.totals["warp_loads"])
    return Emulation(rung, e.C.reshape(m, n), expected, e.problems, counts, e.wavefronts, e.ideal)


def emulate_matmul(a: Any, b: Any, rung: str, arch: int = 80) -> Emulation:
    """:func:`emulate_launch` after the padding :func:`~course.gemm.ladder.gpu_matmul` does: any sizes, the
    inputs copied into zero-filled buffers of the tile's multiples, ``out`` and ``expected`` cut back."""
    if rung not in GPU_RUNG_SPECS:
        raise BadInputError(f"rung must be one of {', '.join(GPU_RUNGS)}; got {rung!r:.60}")
    a, b = np.asarray(a), np.asarray(b)
    (m, k), n = a.shape, b.shape[1]
    pm, pn, pk = padded_sizes(rung, m, n, k)
    pa, pb = np.zeros((pm, pk), a.dtype), np.zeros((pk, pn), b.dtype)
    pa[:m, :k], pb[:k, :n] = a, b
    e = emulate_launch(rung, pa, pb, arch)
    e.out, e.expected = e.out[:m, :n], e.expected[:m, :n]
    return e


def _emulated_twin(spec: RungSpec) -> Any:
    def twin(grid: tuple, block: tuple, args: tuple) -> None:
        a, b, c = (np.asarray(x) for x in args[:3])
        m, n, k = (int(v) for v in args[3:6])
        require_launch(spec, grid, block, m, n, k)
        e = emulate_launch(spec.name, a.reshape(m, k), b.reshape(k, n))
        if any(e.problems.values()):
            raise RuntimeError(f"{spec.kernel}, emulated thread by thread: {e.problems}")
        c.reshape(m, n)[...] = e.out
    return twin


@contextlib.contextmanager
def emulated_kernels() -> Iterator[None]:
    """Inside, the stand-in GPU runs every ladder kernel thread by thread (:func:`emulate_launch`; slow: small
    sizes only) instead of its NumPy product, and a launch whose threads race or step out of range raises."""
    saved = {s.kernel: kernel_twin(s.kernel) for s in GPU_RUNG_SPECS.values()}
    for s in GPU_RUNG_SPECS.values():
        register_kernel(s.kernel, _emulated_twin(s))
    try:
        yield
    finally:
        for name, twin in saved.items():
            register_kernel(name, twin)
