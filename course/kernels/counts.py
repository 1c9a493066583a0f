"""What the hardware would pay for a simulated kernel: memory transactions, bank conflicts, divergent
warps and barriers, counted from the per-thread access trace.

The simulator (:func:`course.kernels.simulate`) records every element access with the thread that made
it, its barrier phase and its *site* (the kernel's source line).  A GPU runs the 32 threads of a
*warp* (consecutive thread ids, ``x`` fastest) in lock-step, so one instruction of a warp is the
accesses of its lanes to the same array, of the same kind (read or write), on the same line, the
``k``-th time each lane makes such an access in the phase (two reads of one array on one line are
the ``k``-th and ``k + 1``-th).  From those warp instructions (*requests*) :func:`hardware_counts` counts:

* **global memory**: the distinct 32-byte *sectors* a request touches (arrays start at a 256-byte
  boundary, as ``cudaMalloc`` gives them).  32 lanes reading consecutive float32 touch 4 sectors
  (coalesced); 32 lanes reading a column of a float32 matrix touch 32.
* **shared memory**: 32 banks of 4-byte words.  A request costs as many *wavefronts* as the busiest
  bank has distinct words (lanes reading the same word share it: a broadcast); ``bank_conflicts`` is
  the wavefronts beyond one per request.  An element wider than 4 bytes covers several words.
* **divergent warps**: a warp *diverges* in a barrier phase when its lanes did not all make the same
  sequence of accesses (sites) in it, i.e. some lanes took a branch or ran a loop iteration the
  others did not, so the warp ran both paths one after the other with lanes masked off.  A branch
  whose two sides touch no memory is not seen; every branch in the course's kernels guards an access.
  Counted once per (block, warp, phase), however many branches split it.
* **barriers**: the ``cuda.syncthreads()`` each block passed, summed over blocks.

All of it is a pure function of the trace, so it is deterministic and a check can grade by it.

>>> import numpy as np
>>> from numba import cuda
>>> def copy(out, a):
...     i = cuda.grid(1)
...     out[i] = a[i]
>>> c = count(copy, 1, 32, out=np.zeros(32, np.float32), a=np.ones(32, np.float32))
>>> c.global_sectors, c.global_requests, c.bank_conflicts, c.divergent_warps
(8, 2, 0, 0)
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import BadInputError
from .simulator import simulate, validate_kernel
from .trace import Trace

__all__ = ["WARP", "SECTOR_BYTES", "BANKS", "Counts", "hardware_counts", "count", "counts_table"]

#: Threads per warp, bytes per global-memory sector, shared-memory banks (4 bytes each): NVIDIA's
#: figures since compute capability 5.0 (programming guide), H100 included.
WARP, SECTOR_BYTES, BANKS = 32, 32, 32

COUNT_NAMES = ("global_sectors", "global_requests", "shared_wavefronts", "shared_requests",
               "bank_conflicts", "divergent_warps", "barriers")


@dataclass
class Counts:
    """What one simulated launch would cost a GPU (see the module doc for each count's definition).

    ``requests`` lists every warp instruction: ``{"space", "kind", "array", "block", "warp",
    "phase", "lanes", "cost"}`` where ``cost`` is sectors (global) or wavefronts (shared).
    """

    global_sectors: int = 0
    global_requests: int = 0
    global_ideal_sectors: int = 0
    shared_wavefronts: int = 0
    shared_requests: int = 0
    worst_conflict: int = 0
    divergent_warps: int = 0
    warp_phases: int = 0
    barriers: int = 0
    requests: list = field(default_factory=list, repr=False)

    @property
    def bank_conflicts(self) -> int:
        """Shared-memory wavefronts beyond one per request: the replays conflicts cost."""
        return self.shared_wavefronts - self.shared_requests

    def as_dict(self) -> dict:
        """The counts by name (:data:`COUNT_NAMES`), for a table or a check."""
        return {k: getattr(self, k) for k in COUNT_NAMES}

    def summary(self) -> str:
        """A few lines a learner can read."""
        g = self.global_sectors / self.global_requests if self.global_requests else 0.0
        ideal = self.global_ideal_sectors / self.global_requests if self.global_requests else 0.0
        s = self.shared_wavefronts / self.shared_requests if self.shared_requests else 0.0
        return "\n".join([
            f"global memory : {self.global_sectors} sectors of {SECTOR_BYTES} B in {self.global_requests} warp "
            f"requests ({g:.1f} per request; {ideal:.1f} if every request were coalesced)",
            f"shared memory : {self.shared_wavefronts} wavefronts in {self.shared_requests} warp requests "
            f"({s:.2f} per request): {self.bank_conflicts} bank-conflict replays, worst {self.worst_conflict}-way",
            f"divergence    : {self.divergent_warps} of {self.warp_phases} warp-phases had lanes on different paths",
            f"barriers      : {self.barriers} cuda.syncthreads() passed (summed over blocks)"])

    def __str__(self) -> str:
        return self.summary()


def _linear(thread: tuple, block_shape: tuple) -> int:
    return thread[0] + block_shape[0] * (thread[1] + block_shape[1] * thread[2])


def _flat(index: tuple, shape: tuple) -> int:
    return int(np.ravel_multi_index(index, shape)) if len(shape) > 1 else index[0]


def _cost(space: str, flat: set, itemsize: int) -> tuple[int, int]:
    """(cost, ideal cost) of one warp request touching the elements ``flat``."""
    if space == "global":
        sectors = {b // SECTOR_BYTES for i in flat for b in (i * itemsize, i * itemsize + itemsize - 1)}
        return len(sectors), -(-len(flat) * itemsize // SECTOR_BYTES)
    words_per = max(1, itemsize // 4)
    words = {i * words_per + w for i in flat for w in range(words_per)}
    per_bank = np.bincount(np.fromiter((w % BANKS for w in words), dtype=np.int64), minlength=BANKS)
    return int(per_bank.max()), -(-len(words) // BANKS)


def hardware_counts(trace: Trace, threads: Any) -> Counts:
    """Count ``trace`` (one launch with blocks of shape ``threads``) as the module doc says."""
    if not isinstance(trace, Trace):
        raise BadInputError(f"trace must be the Trace that simulate() returned, got {type(trace).__name__}")
    shape = tuple(threads) if isinstance(threads, (tuple, list)) else (threads,)
    if not 1 <= len(shape) <= 3 or not all(isinstance(v, (int, np.integer)) and v >= 1 for v in shape):
        raise BadInputError(f"threads must be the launch's block shape: a positive int or 1-3 positive ints, "
                            f"got {threads!r}")
    shape = tuple(int(v) for v in shape) + (1,) * (3 - len(shape))
    seen: dict = defaultdict(int)
    groups: dict = defaultdict(list)
    paths: dict = defaultdict(list)
    for a in trace.accesses:
        if not a.in_bounds:
            continue
        tid = _linear(a.thread, shape)
        key = (a.block, a.thread, a.phase, a.site, a.array, a.kind)
        k = seen[key]
        seen[key] += 1
        groups[(a.block, tid // WARP, a.phase, a.site, a.array, a.kind, k)].append(
            _flat(a.index, trace.shapes[a.array][0]))
        paths[(a.block, tid // WARP, a.phase, tid % WARP)].append((a.site, a.array, a.kind))
    c = Counts()
    for (block, warp, phase, _site, array, kind, _k), elements in sorted(groups.items(), key=lambda kv: str(kv[0])):
        space = trace.shapes[array][1]
        cost, ideal = _cost(space, set(elements), trace.itemsizes.get(array, 4))
        c.requests.append({"space": space, "kind": kind, "array": array, "block": block, "warp": warp,
                           "phase": phase, "lanes": len(elements), "cost": cost})
        if space == "global":
            c.global_sectors += cost
            c.global_requests += 1
            c.global_ideal_sectors += ideal
        else:
            c.shared_wavefronts += cost
            c.shared_requests += 1
            c.worst_conflict = max(c.worst_conflict, cost)
    lanes_of: dict = defaultdict(set)
    last_phase: dict = defaultdict(int)
    for (block, thread), n in trace.final_phase.items():
        tid = _linear(thread, shape)
        lanes_of[(block, tid // WARP)].add(tid % WARP)
        last_phase[(block, tid // WARP)] = max(last_phase[(block, tid // WARP)], n)
    for (block, warp), lanes in sorted(lanes_of.items()):
        for phase in range(last_phase[(block, warp)] + 1):
            c.warp_phases += 1
            if len({tuple(paths.get((block, warp, phase, lane), ())) for lane in lanes}) > 1:
                c.divergent_warps += 1
    per_block: dict = defaultdict(int)
    for (block, _thread), n in trace.final_phase.items():
        per_block[block] = max(per_block[block], n)
    c.barriers = sum(per_block.values())
    return c


def count(kernel: Any, blocks: Any, threads: Any, **arrays: Any) -> Counts:
    """Simulate ``kernel[blocks, threads](**arrays)`` (see :func:`~course.kernels.simulate`) and count it.

    >>> from numba import cuda
    >>> def column(out, a):                    # lane i reads row i of a 32 x 32 matrix: 32 sectors
    ...     i = cuda.grid(1)
    ...     out[i] = a[i, 0]
    >>> count(column, 1, 32, out=np.zeros(32, np.float32), a=np.ones((32, 32), np.float32)).global_sectors
    36
    """
    validate_kernel(kernel)
    _res, trace = simulate(kernel, blocks, threads, **arrays)
    return hardware_counts(trace, threads)


def counts_table(named: dict) -> str:
    """The counts of several launches side by side, one column each (``{"name": Counts}``).

    >>> counts_table({"empty": Counts()}).split()[:3]
    ['empty', 'global_sectors', '0']
    """
    if not isinstance(named, dict) or not named or not all(isinstance(c, Counts) for c in named.values()):
        raise BadInputError(f"counts_table takes a dict of name -> Counts (from count(...)), got {named!r:.80}")
    names = list(named)
    width = max([10] + [len(n) + 2 for n in names])
    lines = [" " * 18 + "".join(f"{n:>{width}}" for n in names)]
    for k in COUNT_NAMES:
        lines.append(f"{k:<18}" + "".join(f"{named[n].as_dict()[k]:>{width}}" for n in names))
    return "\n".join(lines)
