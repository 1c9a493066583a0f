"""Record what every simulated CUDA thread reads and writes, and find what is wrong with it.

A kernel run by :func:`course.kernels.simulate` sees its arrays through :class:`TracedArray`, a
thin wrapper that notes each element access as an :class:`Access`: which block and thread made
it, in which *barrier phase* (how many ``cuda.syncthreads()`` that thread had passed), whether it
read or wrote, in global or shared memory, and which element.  :class:`Trace` holds those records
and answers the questions a check asks: per-thread access counts, out-of-bounds accesses, races
(two threads writing one element between two barriers, or one thread reading what another wrote
between the same two barriers), and barriers that not every thread of a block reached.

>>> import numpy as np
>>> t = Trace()
>>> a = TracedArray("a", np.arange(4.0), "global", t)
>>> t.phase_of = lambda: ((0,), (1,), 0)    # outside a kernel: pretend to be block 0, thread 1
>>> float(a[2])
2.0
>>> t.counts()[((0,), (1,))]["global_reads"]
1
"""

from __future__ import annotations

import sys
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


class KernelIndexError(IndexError):
    """A simulated thread touched an element outside its array (on a GPU: silent corruption)."""


class KernelRunawayError(RuntimeError):
    """A simulated launch made more than :data:`MAX_ACCESSES` accesses: most likely an endless loop."""


#: The most element accesses one simulated launch may make (the exercises need a few hundred).
MAX_ACCESSES = 100_000


@dataclass(frozen=True)
class Access:
    """One element access by one thread: ``kind`` is "R" or "W", ``space`` "global" or "shared"."""

    block: tuple
    thread: tuple
    phase: int
    kind: str
    space: str
    array: str
    index: tuple
    in_bounds: bool = True
    site: tuple = ()        # (code, line) of the access in the kernel: with the array, kind and how many
    #                         times the thread got there, which warp instruction made it


def _current() -> tuple[tuple, tuple, int]:
    th = threading.current_thread()
    b, t = getattr(th, "blockIdx", None), getattr(th, "threadIdx", None)
    if b is None or t is None:
        return (0,), (0,), 0
    return (b.x, b.y, b.z), (t.x, t.y, t.z), getattr(th, "course_phase", 0)


@dataclass
class Trace:
    """Every :class:`Access` of one launch, with the arrays' shapes, and the questions asked of them."""

    accesses: list = field(default_factory=list)
    shapes: dict = field(default_factory=dict)       # array name -> (shape, space)
    final_phase: dict = field(default_factory=dict)  # (block, thread) -> barriers passed
    phase_of: Callable[[], tuple] = _current
    ndim: int = 1                                    # dimensions of the launch (1-3), for labels
    itemsizes: dict = field(default_factory=dict)    # array name -> bytes per element

    def record(self, kind: str, space: str, array: str, index: tuple, in_bounds: bool, site: tuple = ()) -> None:
        block, thread, phase = self.phase_of()
        if len(self.accesses) >= MAX_ACCESSES:
            raise KernelRunawayError(f"more than {MAX_ACCESSES:,} memory accesses in one launch: does a loop "
                                     f"never end (a step that is never updated)?")
        self.accesses.append(Access(block, thread, phase, kind, space, array, index, in_bounds, site))

    # ---- questions --------------------------------------------------------------------------
    def counts(self) -> dict:
        """``{(block, thread): {"global_reads", "global_writes", "shared_reads", "shared_writes"}}``."""
        out: dict = defaultdict(lambda: dict.fromkeys(
            ("global_reads", "global_writes", "shared_reads", "shared_writes"), 0))
        for a in self.accesses:
            out[(a.block, a.thread)][f"{a.space}_{'reads' if a.kind == 'R' else 'writes'}"] += 1
        return dict(out)

    def out_of_bounds(self) -> list:
        """The accesses outside their array, in the order they happened."""
        return [a for a in self.accesses if not a.in_bounds]

    def races(self) -> list[str]:
        """Sentences naming each race: two threads that write one element, or a read of an element
        another thread writes, with no barrier between them (shared memory: same block and phase;
        global memory: same block and phase, or different blocks, which no barrier orders)."""
        writers: dict = defaultdict(set)
        readers: dict = defaultdict(set)
        for a in self.accesses:
            if not a.in_bounds:
                continue
            if a.space == "shared":
                key = (a.array, a.index, a.block, a.phase)
            else:
                key = (a.array, a.index)
            who = (a.block, a.thread, a.phase)
            (writers if a.kind == "W" else readers)[key].add(who)
        found = []
        for key, ws in sorted(writers.items(), key=str):
            name, index = key[0], key[1]
            if len({(b, t) for b, t, _ in ws}) > 1 and self._unordered(ws, ws, key):
                who = ", ".join(self.who(b, t) for b, t in sorted({(b, t) for b, t, _ in ws})[:4])
                found.append(f"{len({(b, t) for b, t, _ in ws})} threads write {name}{_ix(index)} ({who}) "
                             f"with no barrier between them")
            rs = readers.get(key, set())
            pairs = [(r, w) for r in rs for w in ws if (r[0], r[1]) != (w[0], w[1]) and _same_epoch(r, w, key)]
            if pairs:
                (rb, rt, rp), (wb, wt, _) = pairs[0]
                found.append(f"{self.who(rb, rt)} reads {name}{_ix(index)} in phase {rp} while {self.who(wb, wt)} "
                             f"writes it, with no barrier between them (a read before the barrier)")
        return found

    def who(self, block: tuple, thread: tuple) -> str:
        """This launch's name for a thread (see :func:`who`)."""
        return who(block, thread, self.ndim)

    @staticmethod
    def _unordered(ws, _ws2, key) -> bool:
        ws = list(ws)
        return any(_same_epoch(x, y, key) for i, x in enumerate(ws) for y in ws[i + 1:]
                   if (x[0], x[1]) != (y[0], y[1]))

    def divergent_barriers(self) -> list[str]:
        """Blocks whose threads passed different numbers of ``syncthreads()`` (a barrier in a branch)."""
        per_block: dict = defaultdict(set)
        for (block, _thread), n in self.final_phase.items():
            per_block[block].add(n)
        return [f"in {self.who(block, block).split(' thread')[0]} threads passed {sorted(ns)} barriers: "
                f"a cuda.syncthreads() sits "
                f"in a branch not every thread takes (on a GPU the block can hang)"
                for block, ns in sorted(per_block.items()) if len(ns) > 1]


def _same_epoch(x: tuple, y: tuple, key: tuple) -> bool:
    """Two accesses no barrier orders: different blocks (global memory), or same block and phase."""
    return x[0] != y[0] or x[2] == y[2]


def who(block: tuple, thread: tuple, ndim: int = 1) -> str:
    """``"block 2 thread 1"``: a thread named with as many coordinates as the launch has.

    >>> who((1, 0, 0), (0, 1, 0), 2)
    'block (1, 0) thread (0, 1)'
    """
    def coords(v: tuple) -> str:
        return str(v[0]) if ndim == 1 else str(tuple(v[:ndim]))
    return f"block {coords(block)} thread {coords(thread)}"


def _ix(index: tuple) -> str:
    return "[" + ", ".join(str(i) for i in index) + "]"


class TracedArray:
    """An array a simulated kernel indexes as usual; every element access is recorded in ``trace``.

    Only whole-element indexing (``a[i]``, ``a[i, j]``) is allowed, as in most CUDA kernels.  An
    index outside the array (negative ones included: CUDA does not wrap them) is recorded and
    raises :class:`KernelIndexError` naming the array, the index and the shape.
    """

    def __init__(self, name: str, data: np.ndarray, space: str, trace: Trace):
        self.name, self.data, self.space, self.trace = name, data, space, trace
        trace.shapes[name] = (data.shape, space)
        trace.itemsizes[name] = data.dtype.itemsize

    shape = property(lambda self: self.data.shape)
    size = property(lambda self: self.data.size)
    ndim = property(lambda self: self.data.ndim)
    dtype = property(lambda self: self.data.dtype)

    def __len__(self) -> int:
        return len(self.data)

    def _index(self, key: Any, kind: str) -> tuple:
        key = key if isinstance(key, tuple) else (key,)
        if len(key) != self.data.ndim or not all(isinstance(k, (int, np.integer)) for k in key):
            raise TypeError(f"index {self.name} with {self.data.ndim} integer(s), one per dimension; "
                            f"got {key!r}")
        key = tuple(int(k) for k in key)
        ok = all(0 <= k < s for k, s in zip(key, self.data.shape))
        caller = sys._getframe(2)           # the kernel's frame (under __getitem__ / __setitem__)
        self.trace.record(kind, self.space, self.name, key, ok, (caller.f_code, caller.f_lineno))
        if not ok:
            verb = "read" if kind == "R" else "write"
            raise KernelIndexError(f"out of bounds: {verb} of {self.name}{_ix(key)}, but {self.name} has "
                                   f"shape {self.data.shape}")
        return key

    def __getitem__(self, key: Any):
        return self.data[self._index(key, "R")]

    def __setitem__(self, key: Any, value: Any) -> None:
        self.data[self._index(key, "W")] = value

    def __repr__(self) -> str:
        return f"TracedArray({self.name!r}, shape={self.data.shape}, {self.space})"
