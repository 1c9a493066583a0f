"""Lesson 06: all-reduce three ways, on p *simulated* workers, one step at a time.

An **all-reduce** starts with one vector of N numbers on each of p workers (their local gradients)
and ends with the element-wise sum of all p vectors on *every* worker.  Data-parallel training
does one after every backward pass.  Three ways to do it:

* **naive**: every worker sends its whole vector to a root, the root adds them up and sends the
  sum back.  The root sends and receives ``(p - 1) * N`` numbers: it is the bottleneck.
* **tree**: pairs add up in ``ceil(log2 p)`` rounds towards the root, then the sum fans out
  along the same tree.  Fewer rounds, but the root still moves ``2 * ceil(log2 p) * N`` numbers.
* **ring**: cut every vector into p chunks; workers stand in a ring and each passes one chunk
  to its right-hand neighbour per step.  ``p - 1`` *reduce-scatter* steps (the received chunk is
  added) leave each worker holding one chunk of the sum; ``p - 1`` *all-gather* steps (the
  received chunk overwrites) spread those chunks round the ring.  ``2 (p - 1)`` steps in all,
  each moving ``N / p`` numbers per worker: ``2 (p - 1) / p * N`` per worker, less than ``2 N``
  however large p grows.  NCCL's ring is this algorithm.

Here the p workers are rows of one numpy array, so every step can be drawn and checked; the very
same chunk schedule (:func:`ring_chunks`) drives the MPI version in :mod:`course.parallel.ring_mpi`.
Each half also runs alone (:func:`ring_reduce_scatter`, :func:`ring_all_gather`): they are the
collectives of ZeRO's sharded training (:mod:`course.parallel.zero`).

>>> x = np.arange(12.0).reshape(3, 4)            # 3 workers, N = 4 (not divisible by 3)
>>> run = ring_allreduce(x)
>>> run.result[0].tolist(), len(run.steps)
([12.0, 15.0, 18.0, 21.0], 4)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..arguments import Given, OneOf, Whole, arguments
from ..errors import BadInputError, whole_number
from ..limits import require_fits

__all__ = ["ALGORITHMS", "Message", "Step", "AllreduceRun", "validate_workers", "validate_length",
           "validate_ring_step", "validate_run", "chunk_bounds", "ring_chunks", "shard_chunks", "naive_allreduce",
           "tree_allreduce", "ring_allreduce", "ring_reduce_scatter", "ring_all_gather", "allreduce",
           "bytes_per_worker", "message_counts"]

ALGORITHMS = ("naive", "tree", "ring")
MAX_SIMULATED_WORKERS = 2 ** 16  # workers a simulated all-reduce may have (it keeps one vector each)
MAX_SIMULATED_MESSAGES = 500_000  # messages one simulated all-reduce may deliver (each a Python step)


@dataclass
class Message:
    """One message of one step: ``src`` sends elements ``[lo, hi)`` (chunk ``chunk``) to ``dst``,
    which adds them to its own (``"add"``) or overwrites its own with them (``"copy"``)."""

    src: int
    dst: int
    lo: int
    hi: int
    action: str
    chunk: int = -1

    @property
    def size(self) -> int:
        return self.hi - self.lo


@dataclass
class Step:
    """The messages of one step (they travel at the same time), and every worker's vector after it.

    ``contributions[w, i]`` is how many workers' inputs element ``i`` of worker ``w`` now holds
    (1 at the start, p when it is a full sum): what the pictures colour.
    """

    phase: str
    messages: list[Message]
    buffers: np.ndarray
    contributions: np.ndarray


@dataclass
class AllreduceRun:
    """The result of a simulated all-reduce, its steps, and what every worker sent and received."""

    algorithm: str
    result: np.ndarray
    steps: list[Step] = field(default_factory=list)
    sent: np.ndarray | None = None        # elements sent by each worker
    received: np.ndarray | None = None    # elements received by each worker

    @property
    def p(self) -> int:
        return int(self.result.shape[0])

    def bytes_sent(self) -> np.ndarray:
        """Bytes each worker sent, from the messages actually simulated."""
        return self.sent * self.result.dtype.itemsize


# ---------------------------------------------------------------------------- checks of the input

def validate_workers(p: Any, most: int | None = None) -> int:
    """``p`` as an int, or a clear error: a whole number of workers >= 1 (and <= ``most``)."""
    return whole_number("p", p, 1, most, hint="p is the number of workers")


def validate_length(n: Any, what: str = "N (the vector length)") -> int:
    """``n`` as an int, or a clear error: a whole number of elements >= 1."""
    return whole_number(what, n, hint="an all-reduce of nothing has nothing to send")


def validate_ring_step(rank: Any, step: Any, p: Any) -> tuple[int, int, int]:
    """``(rank, step, p)`` as ints, or a clear error: worker ``rank`` of a ring of ``p >= 2`` workers, at one
    of its ``2 (p - 1)`` steps.  (Written out, not declared with ``@arguments``: the ring asks for its
    schedule at every step, on every rank, and this is several times faster.)"""
    p = validate_workers(p)
    rank = whole_number("rank", rank, 0, p - 1, hint=f"workers are numbered 0 .. {p - 1}")
    if p == 1:
        raise BadInputError("a ring of p = 1 worker sends nothing: it has no steps; use p >= 2")
    step = whole_number("step", step, 0, 2 * (p - 1) - 1,
                        hint=f"a ring of p = {p} workers takes {2 * (p - 1)} steps, numbered from 0")
    return rank, step, p


def validate_run(run: Any) -> AllreduceRun:
    """``run`` if it is an :class:`AllreduceRun` (what :func:`allreduce` returns), or a clear error."""
    if not isinstance(run, AllreduceRun):
        raise BadInputError(f"run must be an AllreduceRun, what course.parallel.allreduce(x) returns; got "
                            f"{type(run).__name__}")
    return run


def _validate_vectors(x: Any) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 2:
        raise BadInputError(f"the workers' vectors must be a 2-D array (p workers, N elements); got "
                            f"shape {x.shape}.")
    validate_workers(x.shape[0])
    validate_length(x.shape[1])
    if x.dtype.kind != "f":
        raise BadInputError(f"the vectors must hold floating-point numbers (float32 or float64), as "
                            f"gradients do; got dtype {x.dtype.name}. Convert with x.astype('float64').")
    return x


def _validate_simulation(x: np.ndarray, algorithm: str, trace: bool) -> None:
    """Refuse, before anything is allocated, a run with too many messages or whose buffers (and, with
    ``trace``, their copy after every step) would not fit in memory."""
    p, n = x.shape
    messages = {"naive": 2 * (p - 1), "tree": 2 * p, "ring": 2 * (p - 1) * p}[algorithm]
    if messages > MAX_SIMULATED_MESSAGES:
        raise BadInputError(f"a simulated {algorithm} all-reduce of p = {p:,} workers delivers {messages:,} "
                            f"messages, one Python step each; at most {MAX_SIMULATED_MESSAGES:,} are simulated "
                            "here: choose fewer workers")
    copies = 1 + (message_counts(algorithm, p) if trace else 0)      # the buffers, and one per step
    require_fits(copies * p * n * (x.dtype.itemsize + 8), "cpu",
                 what=f"the simulated {algorithm} all-reduce's buffers ({p:,} x {n:,}"
                      f"{f', kept after each of {copies - 1:,} steps: trace=False keeps none' if trace else ''})")


# ---------------------------------------------------------------------------- the chunk schedule

def chunk_bounds(n: int, p: int) -> np.ndarray:
    """Where each of the p chunks of an n-vector starts: chunk c is ``[bounds[c], bounds[c+1])``.

    The chunks differ in size by at most one element when p does not divide n.

    >>> chunk_bounds(10, 4).tolist()
    [0, 2, 5, 7, 10]
    """
    n, p = validate_length(n), validate_workers(p, most=MAX_SIMULATED_WORKERS)
    return (np.arange(p + 1) * n) // p


def ring_chunks(rank: int, step: int, p: int) -> tuple[int, int]:
    """``(send, receive)``: the chunks worker ``rank`` sends right and receives from its left at ``step``.

    Steps ``0 .. p-2`` are the reduce-scatter (the received chunk is *added*), steps
    ``p-1 .. 2p-3`` the all-gather (the received chunk is *copied*).  In the reduce-scatter,
    worker r starts by sending its own chunk r, then passes on the partial sum it just added
    to; after ``p - 1`` steps it holds the whole sum of chunk ``r + 1``, which the all-gather
    then passes round.

    >>> [ring_chunks(0, s, 4) for s in range(6)]
    [(0, 3), (3, 2), (2, 1), (1, 0), (0, 3), (3, 2)]
    """
    rank, step, p = validate_ring_step(rank, step, p)
    if step < p - 1:                                  # reduce-scatter
        send = (rank - step) % p
    else:                                             # all-gather: pass on the finished chunks
        send = (rank + 1 - (step - (p - 1))) % p
    return send, (send - 1) % p


# ---------------------------------------------------------------------------- the three algorithms

class _Sim:
    """The workers' buffers, and a log of steps: the algorithms below stay short."""

    def __init__(self, x: np.ndarray, algorithm: str, trace: bool):
        self.buf = x.astype(x.dtype, copy=True)
        self.contrib = np.ones(x.shape, dtype=np.int64)
        self.sent = np.zeros(x.shape[0], dtype=np.int64)
        self.received = np.zeros(x.shape[0], dtype=np.int64)
        self.run = AllreduceRun(algorithm, self.buf, sent=self.sent, received=self.received)
        self.trace = trace

    def step(self, phase: str, messages: list[Message]) -> None:
        """Deliver every message of one step at once (all read the buffers as they were)."""
        payload = [(m, self.buf[m.src, m.lo:m.hi].copy(), self.contrib[m.src, m.lo:m.hi].copy())
                   for m in messages]
        for m, data, cnt in payload:
            if m.action == "add":
                self.buf[m.dst, m.lo:m.hi] += data
                self.contrib[m.dst, m.lo:m.hi] += cnt
            else:
                self.buf[m.dst, m.lo:m.hi] = data
                self.contrib[m.dst, m.lo:m.hi] = cnt
            self.sent[m.src] += m.size
            self.received[m.dst] += m.size
        if self.trace:
            self.run.steps.append(Step(phase, messages, self.buf.copy(), self.contrib.copy()))


def naive_allreduce(x: Any, root: int = 0, trace: bool = True) -> AllreduceRun:
    """Gather every vector at ``root`` (one message per step), add, then send the sum back.

    >>> naive_allreduce(np.ones((3, 2))).result.tolist()
    [[3.0, 3.0], [3.0, 3.0], [3.0, 3.0]]
    """
    x = _validate_vectors(x)
    p, n = x.shape
    root = whole_number("root", root, 0, p - 1, hint=f"the root is one of the workers, numbered 0 .. {p - 1}")
    _validate_simulation(x, "naive", trace)
    sim = _Sim(x, "naive", trace)
    others = [w for w in range(p) if w != root]
    for w in others:                        # the root can receive one message at a time
        sim.step("gather", [Message(w, root, 0, n, "add")])
    for w in others:                        # ... and send one at a time
        sim.step("broadcast", [Message(root, w, 0, n, "copy")])
    return sim.run


def tree_allreduce(x: Any, trace: bool = True) -> AllreduceRun:
    """Reduce along a binary tree in ``ceil(log2 p)`` rounds, then broadcast back down it.

    In round k, worker ``r`` with ``r % 2**(k+1) == 2**k`` sends its partial sum to ``r - 2**k``.

    >>> len(tree_allreduce(np.ones((5, 3))).steps)   # 3 rounds up, 3 down
    6
    """
    x = _validate_vectors(x)
    p, n = x.shape
    _validate_simulation(x, "tree", trace)
    sim = _Sim(x, "tree", trace)
    rounds = math.ceil(math.log2(p)) if p > 1 else 0
    for k in range(rounds):
        d = 2 ** k
        sim.step(f"reduce round {k + 1}", [Message(r, r - d, 0, n, "add")
                                           for r in range(d, p, 2 * d)])
    for k in reversed(range(rounds)):
        d = 2 ** k
        sim.step(f"broadcast round {rounds - k}", [Message(r - d, r, 0, n, "copy")
                                                   for r in range(d, p, 2 * d)])
    return sim.run


def _ring_steps(sim: _Sim, steps: range, schedule: Callable[[int, int, int], tuple[int, int]]) -> None:
    """Run ``steps`` of the ring on the simulated workers: at each, worker r sends chunk
    ``schedule(r, step, p)[0]`` to worker r + 1, which adds it (steps ``< p - 1``) or copies it."""
    p, n = sim.buf.shape
    bounds = chunk_bounds(n, p)
    for step in steps:
        phase, action = ("reduce-scatter", "add") if step < p - 1 else ("all-gather", "copy")
        msgs = []
        for r in range(p):
            c = schedule(r, step, p)[0]
            msgs.append(Message(r, (r + 1) % p, int(bounds[c]), int(bounds[c + 1]), action, chunk=c))
        sim.step(phase, msgs)


def ring_allreduce(x: Any, trace: bool = True) -> AllreduceRun:
    """Reduce-scatter then all-gather round a ring: ``2 (p - 1)`` steps of one chunk per worker.

    At every step each worker r sends chunk :func:`ring_chunks` ``(r, step, p)[0]`` to worker
    ``r + 1`` (mod p), all at the same time.

    >>> run = ring_allreduce(np.eye(4))
    >>> run.result.tolist()[2], run.sent.tolist()
    ([1.0, 1.0, 1.0, 1.0], [6, 6, 6, 6])
    """
    x = _validate_vectors(x)
    p, n = x.shape
    _validate_simulation(x, "ring", trace)
    sim = _Sim(x, "ring", trace)
    _ring_steps(sim, range(2 * (p - 1)), ring_chunks)
    return sim.run


# ---------------------------------------------------------------------------- the ring's two halves, alone

def shard_chunks(rank: int, step: int, p: int) -> tuple[int, int]:
    """The ring's own schedule with its chunk labels turned by one, so that worker r ends the
    reduce-scatter holding the whole sum of chunk r, *its shard* (ZeRO's layout), and starts the
    all-gather by sending it: :func:`ring_chunks` ``(rank - 1, step, p)``.  The messages still go to the right.

    >>> [shard_chunks(0, s, 4) for s in range(6)]
    [(3, 2), (2, 1), (1, 0), (0, 3), (3, 2), (2, 1)]
    """
    rank, step, p = validate_ring_step(rank, step, p)
    return ring_chunks((rank - 1) % p, step, p)


def ring_reduce_scatter(x: Any, trace: bool = True) -> AllreduceRun:
    """The ring's first half alone: after ``p - 1`` steps worker r holds the sum over the workers of
    chunk r (:func:`chunk_bounds`), ``run.result[r, lo_r:hi_r]``; its other chunks hold partial sums.

    Each worker sends ``(p - 1) / p * N`` elements: half an all-reduce.

    >>> run = ring_reduce_scatter(np.arange(12.0).reshape(3, 4))
    >>> [run.result[r, chunk_bounds(4, 3)[r]:chunk_bounds(4, 3)[r + 1]].tolist() for r in range(3)]
    [[12.0], [15.0], [18.0, 21.0]]
    """
    x = _validate_vectors(x)
    p = x.shape[0]
    _validate_simulation(x, "ring", trace)
    sim = _Sim(x, "reduce-scatter", trace)
    _ring_steps(sim, range(p - 1), shard_chunks)
    return sim.run


def ring_all_gather(x: Any, trace: bool = True) -> AllreduceRun:
    """The ring's second half alone: worker r starts with its chunk r in ``x[r]`` (the rest is ignored)
    and after ``p - 1`` steps every worker holds every worker's chunk.  Each worker sends
    ``(p - 1) / p * N`` elements.

    >>> ring_all_gather(np.diag([1.0, 2.0, 3.0])).result.tolist()[0]
    [1.0, 2.0, 3.0]
    """
    x = _validate_vectors(x)
    p = x.shape[0]
    _validate_simulation(x, "ring", trace)
    sim = _Sim(x, "all-gather", trace)
    _ring_steps(sim, range(p - 1, 2 * (p - 1)), shard_chunks)
    return sim.run


@arguments(algorithm=OneOf(*ALGORITHMS), trace=OneOf(True, False))
def allreduce(x: Any, algorithm: str = "ring", trace: bool = True) -> AllreduceRun:
    """Run one of :data:`ALGORITHMS` on the rows of ``x`` (each algorithm checks ``x``)."""
    fns = {"naive": naive_allreduce, "tree": tree_allreduce, "ring": ring_allreduce}
    return fns[algorithm](x, trace=trace)


# ---------------------------------------------------------------------------- counting

@arguments(n=Given(validate_length), p=Given(validate_workers),
           itemsize=Whole(hint="bytes per number, e.g. 8 for float64"))
def bytes_per_worker(algorithm: str, n: int, p: int, itemsize: int = 8) -> float:
    """Bytes the *busiest* worker sends in one all-reduce of n elements of ``itemsize`` bytes.

    ring: ``2 (p - 1) / p * N`` (every worker the same); naive: ``(p - 1) * N`` at the root
    (it receives as much again); tree: ``ceil(log2 p) * N`` at the root.  For the ring with p not
    dividing N, the simulation's exact count (:attr:`AllreduceRun.sent`) differs from the formula
    by less than one chunk.

    >>> bytes_per_worker("ring", 1000, 4, 8), bytes_per_worker("naive", 1000, 4, 8)
    (12000.0, 24000.0)
    """
    if algorithm == "ring":
        return 2 * (p - 1) / p * n * itemsize
    if algorithm == "naive":
        return float((p - 1) * n * itemsize)
    if algorithm == "tree":
        return float((math.ceil(math.log2(p)) if p > 1 else 0) * n * itemsize)
    raise BadInputError(f"unknown all-reduce {algorithm!r}; choose one of {list(ALGORITHMS)}.")


def message_counts(algorithm: str, p: int) -> int:
    """Steps one after the other (each pays the latency once): naive ``2 (p - 1)``,
    tree ``2 ceil(log2 p)``, ring ``2 (p - 1)``.

    >>> [message_counts(a, 8) for a in ALGORITHMS]
    [14, 6, 14]
    """
    p = validate_workers(p)
    if algorithm in ("naive", "ring"):
        return 2 * (p - 1)
    if algorithm == "tree":
        return 2 * (math.ceil(math.log2(p)) if p > 1 else 0)
    raise BadInputError(f"unknown all-reduce {algorithm!r}; choose one of {list(ALGORITHMS)}.")
