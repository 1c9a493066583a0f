"""The emulated thread block behind :mod:`course.gemm.emulate`: its threads, shared memory, and the books.

:class:`Launch` runs one kernel's lines for every thread of a block at once (NumPy arrays over
``threadIdx``), one block after another, and keeps the books while it does:

* **races**: two threads writing one shared cell between two barriers, a thread reading a cell another
  wrote since the last barrier, a ``cp.async`` copy read or overwritten before ``cp.async.wait_group``
  (and a barrier) made it visible, a copy never waited for;
* **out of range**: an index outside its array (each dimension of a shared array on its own), a
  misaligned vector access, a read of a shared cell nobody wrote, an output written twice or never;
* **bank conflicts** of every shared load: per warp, the wavefronts 32 banks of 4 bytes need (a vector
  load split into half- or quarter-warps as the hardware does; an ``ldmatrix`` one phase per matrix),
  against one per group;
* **counts**: FMAs, ``mma.sync``, global and shared load instructions and bytes, 32-byte sectors per
  warp-wide global load.

Values are float64, so an emulation equals a float64 product of the same (rounded) inputs to ~1e-15
and any index slip shows at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .fragments import fragment_layout
from .ladder import RungSpec

__all__ = ["Emulation", "Launch", "SharedArray"]


@dataclass
class Emulation:
    """What one emulated launch did: ``out`` (float64, m × n), the problems found, counts per thread, and the
    shared-memory wavefronts of its loads (``bank_wavefronts`` against ``bank_ideal``)."""

    rung: str
    out: np.ndarray
    expected: np.ndarray
    problems: dict[str, list[str]]
    counts: dict[str, float]
    bank_wavefronts: int
    bank_ideal: int

    @property
    def max_rel_error(self) -> float:
        return float(np.nanmax(np.abs(self.out - self.expected)) / max(1e-300, float(np.max(np.abs(self.expected))))
                     if np.isfinite(self.out).all() else np.inf)

    @property
    def bank_conflict_factor(self) -> float:
        """Wavefronts per ideal wavefront of the shared loads (1.0: conflict-free)."""
        return self.bank_wavefronts / max(1, self.bank_ideal)

    @property
    def ok(self) -> bool:
        return not any(self.problems.values()) and self.max_rel_error < 1e-12


@dataclass
class SharedArray:
    """One ``__shared__`` array: its shape, element size, and byte offset in the block's shared memory."""

    name: str
    shape: tuple[int, ...]
    esize: int
    base: int
    data: np.ndarray = field(repr=False, default=None)

    def at(self, *index: Any) -> np.ndarray:
        """The flat element index of ``[i][j]...`` (row-major), each index checked against its dimension."""
        flat = np.zeros(np.broadcast(*index).shape, dtype=np.int64)
        for dim, (i, size) in enumerate(zip(index, self.shape)):
            i = np.asarray(i, dtype=np.int64)
            if ((i < 0) | (i >= size)).any():
                self.launch.problem("out_of_range", f"{self.name} index {dim} outside 0..{size - 1}")
            flat = flat * size + i
        return flat


class Launch:
    """The emulated launch of one rung: global arrays, the current block's threads and shared memory, the books."""

    def __init__(self, spec: RungSpec, a: np.ndarray, b: np.ndarray, m: int, n: int, k: int, arch: int = 80):
        self.spec, self.M, self.N, self.K, self.arch = spec, m, n, k, arch
        self.glob = {"A": np.asarray(a, np.float64).ravel(), "B": np.asarray(b, np.float64).ravel()}
        self.C = np.full(m * n, np.nan)
        self.writes = np.zeros(m * n, dtype=np.int64)
        self.problems: dict[str, list[str]] = {"races": [], "out_of_range": [], "uninitialised": [],
                                               "misaligned": [], "outputs": []}
        self.totals = {k: 0 for k in ("fma", "global_loads", "global_load_bytes", "shared_loads", "shared_load_bytes",
                                      "global_stores", "mma", "sectors", "warp_loads")}
        self.wavefronts = self.ideal = 0
        self.t = np.arange(spec.threads)
        self.tx, self.ty = self.t % spec.block[0], self.t // spec.block[0]
        self.warp, self.lane = self.t // 32, self.t % 32

    # ------------------------------------------------------------------ books
    def problem(self, kind: str, what: str) -> None:
        if len(self.problems[kind]) < 20 and what not in self.problems[kind]:
            self.problems[kind].append(what)

    def blocks(self) -> Any:
        """Each block of the grid in turn (``blockIdx.x``, ``blockIdx.y``), with fresh shared memory."""
        gx, gy, _ = self.spec.grid(self.M, self.N)
        for by in range(gy):
            for bx in range(gx):
                self.shared: list[SharedArray] = []
                self.size = 0
                self.phase_w: list[tuple[np.ndarray, np.ndarray]] = []
                self.phase_r: list[tuple[np.ndarray, np.ndarray]] = []
                self.groups = 0
                yield bx, by
                self.finish_block()

    def smem(self, name: str, shape: tuple[int, ...], esize: int = 4) -> SharedArray:
        """Declare ``__shared__ __align__(16) T name[shape]`` (T of ``esize`` bytes)."""
        base = -(-self.size // 16) * 16
        arr = SharedArray(name, tuple(shape), esize, base, np.full(int(np.prod(shape)), np.nan))
        arr.launch = self
        self.shared.append(arr)
        self.size = base + arr.data.size * esize
        return arr

    def _cells(self, arr: SharedArray, flat: np.ndarray, width: int) -> np.ndarray:
        """(threads, width) cell ids across the block's shared arrays, for the race books."""
        flat = np.asarray(flat, np.int64).reshape(-1, 1) + np.arange(width)
        if (flat % width != 0)[:, 0].any() and width > 1:
            self.problem("misaligned", f"a {width * arr.esize}-byte access of {arr.name} is not aligned")
        if ((flat < 0) | (flat >= arr.data.size)).any():
            self.problem("out_of_range", f"{arr.name} accessed outside its {arr.data.size} elements")
        return np.clip(flat, 0, arr.data.size - 1)

    # ------------------------------------------------------------------ global memory
    def gload(self, name: str, idx: Any, width: int = 1, mask: Any = True) -> np.ndarray:
        """Each thread loads ``width`` neighbouring elements of ``A`` or ``B`` from ``idx`` (a float4 for 4)."""
        g, mask = self.glob[name], np.broadcast_to(mask, self.t.shape)
        idx = np.broadcast_to(np.asarray(idx, np.int64), self.t.shape).reshape(-1, 1) + np.arange(width)
        if width > 1 and (idx[mask, 0] % width).any():
            self.problem("misaligned", f"a {4 * width}-byte load of {name} is not aligned")
        bad = mask[:, None] & ((idx < 0) | (idx >= g.size))
        if bad.any():
            self.problem("out_of_range", f"{name} read at {int(idx[bad][0])}, outside 0..{g.size - 1}")
        active = int(mask.sum())
        self.totals["global_loads"] += active
        self.totals["global_load_bytes"] += active * 4 * width
        sectors = np.where(mask[:, None], idx * 4 // 32, -1).reshape(-1, 32 * width)
        self.totals["sectors"] += sum(len(np.unique(s[s >= 0])) for s in sectors)
        self.totals["warp_loads"] += int(mask.reshape(-1, 32).any(axis=1).sum())
        vals = np.where(mask[:, None] & ~bad, g[np.clip(idx, 0, g.size - 1)], 0.0)
        return vals[:, 0] if width == 1 else vals

    def gstore(self, idx: Any, values: Any, width: int = 1, mask: Any = True) -> None:
        """Each thread stores ``width`` neighbouring floats of C at ``idx``."""
        mask = np.broadcast_to(mask, self.t.shape)
        idx = (np.broadcast_to(np.asarray(idx, np.int64), self.t.shape).reshape(-1, 1) + np.arange(width))[mask]
        values = np.broadcast_to(np.asarray(values, np.float64).reshape(self.t.size, width), (self.t.size, width))
        if ((idx < 0) | (idx >= self.C.size)).any():
            self.problem("out_of_range", "C written outside its elements")
            keep = (idx >= 0) & (idx < self.C.size)
            idx, values = idx[keep.all(axis=1)], values[mask][keep.all(axis=1)]
        else:
            values = values[mask]
        self.totals["global_stores"] += int(mask.sum())
        np.add.at(self.writes, idx.ravel(), 1)
        self.C[idx.ravel()] = values.ravel()

    # ------------------------------------------------------------------ shared memory
    def sstore(self, arr: SharedArray, flat: Any, values: Any, width: int = 1) -> None:
        """Each thread stores ``width`` neighbouring elements into ``arr`` at ``flat``."""
        cells = self._cells(arr, np.broadcast_to(flat, self.t.shape), width)
        self._require_settled(arr, cells, "stored over")
        arr.data[cells] = np.asarray(values, np.float64).reshape(self.t.size, width)
        self.phase_w.append((arr.base // arr.esize + cells, np.repeat(self.t[:, None], width, axis=1)))

    def sload(self, arr: SharedArray, flat: Any, width: int = 1, lane_rows: bool = False) -> np.ndarray:
        """Each thread loads ``width`` neighbouring elements of ``arr`` from ``flat``; counted, bank-checked."""
        cells = self._cells(arr, np.broadcast_to(flat, self.t.shape), width)
        self._require_settled(arr, cells, "read")
        if np.isnan(arr.data[cells]).any():
            self.problem("uninitialised", f"{arr.name} read where nobody wrote")
        self.phase_r.append((arr.base // arr.esize + cells, np.repeat(self.t[:, None], width, axis=1)))
        if not lane_rows:
            self.totals["shared_loads"] += self.t.size
            self.totals["shared_load_bytes"] += self.t.size * width * arr.esize
        self._banks(arr.base + cells[:, 0] * arr.esize, width * arr.esize)
        return arr.data[cells][:, 0] if width == 1 else arr.data[cells]

    def _banks(self, byte_addr: np.ndarray, nbytes: int) -> None:
        """Wavefronts of one warp-wide shared load: per group of 128/nbytes threads, the most distinct 4-byte
        words any one of the 32 banks must deliver."""
        per = max(1, nbytes // 4)
        group = 32 // per if nbytes >= 4 else 32
        words = (byte_addr.reshape(-1, 1) // 4 + np.arange(per)).reshape(-1, group * per)
        ws = np.sort(words, axis=1)
        first = np.ones_like(ws, dtype=bool)
        first[:, 1:] = ws[:, 1:] != ws[:, :-1]
        rows = np.broadcast_to(np.arange(ws.shape[0])[:, None], ws.shape)[first]
        counts = np.bincount(rows * 32 + ws[first] % 32, minlength=ws.shape[0] * 32).reshape(-1, 32)
        self.wavefronts += int(counts.max(axis=1).sum())
        self.ideal += ws.shape[0]

    def _require_settled(self, arr: SharedArray, cells: np.ndarray, what: str) -> None:
        inflight = getattr(arr, "inflight", None)
        if inflight is not None and (inflight[cells] >= 0).any():
            self.problem("races", f"{arr.name} {what} while a cp.async into it was still in flight")

    def cp_async(self, arr: SharedArray, flat: Any, name: str, gidx: Any) -> None:
        """``cp.async.cg`` of 16 bytes, global ``name[gidx]`` -> ``arr[flat]``; below sm_80 a plain copy."""
        width = 16 // arr.esize
        g = self.glob[name]
        gidx = np.broadcast_to(np.asarray(gidx, np.int64), self.t.shape)
        if (gidx % width).any():
            self.problem("misaligned", f"a 16-byte copy from {name} is not aligned")
        src = gidx.reshape(-1, 1) + np.arange(width)
        if ((src < 0) | (src >= g.size)).any():
            self.problem("out_of_range", f"{name} copied from outside 0..{g.size - 1}")
        vals = g[np.clip(src, 0, g.size - 1)]
        self.totals["global_loads"] += self.t.size
        self.totals["global_load_bytes"] += self.t.size * 16
        self.totals["warp_loads"] += self.t.size // 32
        self.totals["sectors"] += sum(len(np.unique(s)) for s in (src * arr.esize // 32).reshape(-1, 32 * width))
        if self.arch < 80:
            return self.sstore(arr, flat, vals, width)
        cells = self._cells(arr, np.broadcast_to(flat, self.t.shape), width)
        if getattr(arr, "inflight", None) is None:
            arr.inflight, arr.pending, arr.owner = (np.full(arr.data.size, -1), np.zeros(arr.data.size),
                                                    np.zeros(arr.data.size, np.int64))
        self._require_settled(arr, cells, "copied into")
        cell_ids = arr.base // arr.esize + cells
        copier = np.full(self.size + 1, -1, dtype=np.int64)
        copier[cell_ids] = self.t[:, None]
        for rc, rt in self.phase_r:                     # a read of this cell by another thread, this phase
            c = copier[rc]
            if ((c >= 0) & (c != rt)).any():
                self.problem("races", f"cp.async into {arr.name} overwrites a cell another thread read since the "
                                      "last barrier")
                break
        arr.inflight[cells], arr.pending[cells] = self.groups, vals
        arr.owner[cells] = self.t[:, None]

    def commit(self) -> None:
        """``cp.async.commit_group``: the copies issued so far form one group."""
        self.groups += 1

    def wait(self, pending: int) -> None:
        """``cp.async.wait_group pending``: every group but the newest ``pending`` has landed (for its thread)."""
        for arr in self.shared:
            inflight = getattr(arr, "inflight", None)
            if inflight is None:
                continue
            done = (inflight >= 0) & (inflight < self.groups - pending)
            arr.data[done], inflight[done] = arr.pending[done], -1
            cells = np.flatnonzero(done)
            self.phase_w.append((arr.base // arr.esize + cells, arr.owner[cells]))

    def sync(self) -> None:
        """``__syncthreads()``: check the phase that ends for races, then start a new one."""
        if self.phase_w:
            wc = np.concatenate([c.ravel() for c, _ in self.phase_w])
            wt = np.concatenate([t.ravel() for _, t in self.phase_w])
            pairs = np.unique(np.stack([wc, wt]), axis=1)
            cell, n = np.unique(pairs[0], return_counts=True)
            if (n > 1).any():
                self.problem("races", f"{int((n > 1).sum())} shared cells written by two threads between barriers")
            writer = np.full(self.size + 1, -1, dtype=np.int64)      # one slot per byte covers every cell id
            writer[pairs[0]] = pairs[1]
            for rc, rt in self.phase_r:
                w = writer[rc.ravel()]
                if ((w >= 0) & (w != rt.ravel())).any():
                    self.problem("races", "a shared cell read by one thread while another wrote it, between barriers")
                    break
        self.phase_w, self.phase_r = [], []

    def finish_block(self) -> None:
        self.sync()
        if any(getattr(a, "inflight", None) is not None and (a.inflight >= 0).any() for a in self.shared):
            self.problem("races", "a cp.async was never waited for")

    def fma(self, per_thread: int) -> None:
        self.totals["fma"] += self.t.size * per_thread

    # ------------------------------------------------------------------ the tensor core
    def mma(self, shape: str, d: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``mma.sync`` of every warp: the lanes' registers placed by the PTX ISA's fragment tables."""
        m, n, k = (16, 8, 8) if shape == "m16n8k8.tf32" else (16, 8, 16)
        la, lb, lc = (fragment_layout(shape, op) for op in "abc")
        w = self.t.size // 32
        A, B, C = np.zeros((w, m, k)), np.zeros((w, k, n)), np.zeros((w, m, n))
        A[:, la[..., 0], la[..., 1]] = a.reshape(w, 32, -1)
        B[:, lb[..., 0], lb[..., 1]] = b.reshape(w, 32, -1)
        C[:, lc[..., 0], lc[..., 1]] = d.reshape(w, 32, -1)
        D = A @ B + C
        self.totals["mma"] += w
        self.totals["fma"] += w * m * n * k
        return D[:, lc[..., 0], lc[..., 1]].reshape(self.t.size, 4)

    def ldmatrix(self, arr: SharedArray, flat: Any, trans: bool) -> np.ndarray:
        """``ldmatrix.x4(.trans)``: lane l points at one 8-element row of matrix l // 8; each lane gets, per
        matrix j, two neighbouring elements of row l // 4 (``trans``: of column l // 4).  (threads, 4, 2)."""
        rows = self.sload(arr, flat, 8, lane_rows=True).reshape(-1, 4, 8, 8)    # warp, matrix, row, column
        self.totals["shared_loads"] += self.t.size
        self.totals["shared_load_bytes"] += self.t.size * 16
        g, q = self.lane // 4, self.lane % 4
        mats = rows[self.warp][:, :, :, :]                                      # (threads, 4, 8, 8)
        mats = np.swapaxes(mats, 2, 3) if trans else mats
        idx = np.arange(self.t.size)
        return np.stack([mats[idx, :, g, 2 * q], mats[idx, :, g, 2 * q + 1]], axis=-1)


