"""Lesson 06's exercise checks: ``course.check.<name>(your_function)`` prints what is wrong or that it is right.

* :func:`check_ring_chunks`: one reduce-scatter step of the ring, which chunk to send and which to add;
* :func:`check_bytes_per_worker`: the bytes the busiest worker sends, ring and naive;
* :func:`check_gradient_average`: the data-parallel gradient average, with unequal shards.

Every check compares with an oracle that is not the function under test: the sum of the vectors,
the messages counted in the simulation, the gradient of unsplit training on the whole batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .collectives import allreduce, chunk_bounds, ring_chunks
from .data_parallel import make_batches, shard, single_process_gradients

__all__ = ["check_ring_chunks", "check_bytes_per_worker", "check_gradient_average", "check_ring_allreduce"]


def call_learner(fn: Callable, *args: Any, context: str = "") -> tuple[bool, Any]:
    """:func:`course.grading.call_learner`, imported late: ``course.check`` imports this module."""
    from ..grading import call_learner as call

    return call(fn, *args, context=context)


def _say(problem: str | None, ok: str) -> bool:
    print(problem or ok)
    return problem is None


def _ring_with(fn: Callable, x: np.ndarray) -> np.ndarray:
    """A whole ring all-reduce whose reduce-scatter uses ``fn`` for the chunk choice."""
    p, n = x.shape
    buf = x.copy()
    b = chunk_bounds(n, p)
    for step in range(p - 1):
        moves = []
        for r in range(p):
            send, _ = fn(r, step, p)
            moves.append(((r + 1) % p, send, buf[r, b[send]:b[send + 1]].copy()))
        for dst, c, data in moves:
            buf[dst, b[c]:b[c + 1]] += data
    for step in range(p - 1, 2 * (p - 1)):
        moves = [((r + 1) % p, ring_chunks(r, step, p)[0]) for r in range(p)]
        new = buf.copy()
        for r, (dst, c) in enumerate(moves):
            new[dst, b[c]:b[c + 1]] = buf[r, b[c]:b[c + 1]]
        buf = new
    return buf


def _chunk_pair(got: object, p: int) -> tuple[int, int] | None:
    """``got`` as two chunk numbers in ``[0, p)``, or None when it is anything else (an int, a string, ...)."""
    if isinstance(got, (str, bytes, dict)) or not isinstance(got, (tuple, list, np.ndarray)) or len(got) != 2:
        return None
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and 0 <= v < p for v in got):
        return None
    return int(got[0]), int(got[1])


def check_ring_chunks(fn: Callable) -> bool:
    """Check ``fn(rank, step, p) -> (send, add)`` for the reduce-scatter steps ``0 .. p-2``.

    >>> check_ring_chunks(lambda r, s, p: ring_chunks(r, s, p))   # doctest: +ELLIPSIS
    Correct: ...
    True
    """
    for p in range(2, 9):
        for step in range(p - 1):
            for r in range(p):
                done, got = call_learner(fn, r, step, p, context=f"rank={r}, step={step}, p={p}")
                if not done:
                    return False
                want = ring_chunks(r, step, p)
                pair = _chunk_pair(got, p)
                if pair is None:
                    return _say(f"rank={r}, step={step}, p={p}: return a pair of chunk numbers (send, add), each "
                                f"from 0 to {p - 1}; got {got!r}.", "")
                send, add = pair
                if (send, add) == want:
                    continue
                hint = ""
                if send != want[0] and send == (r + step) % p:
                    hint = (" The partial sums travel to the RIGHT (rank r sends to r + 1), so the chunk "
                            "to pass on was received one step earlier from the left: (rank - step) % p.")
                elif send == want[0] and add == send:
                    hint = (" You add into the chunk you send. The chunk that arrives from the left neighbour "
                            "r - 1 is the one it sends: (rank - 1 - step) % p.")
                elif send == want[0]:
                    hint = " The chunk that arrives is the one your LEFT neighbour, rank r - 1, sends at this step."
                return _say(f"rank={r}, step={step}, p={p}: you said send chunk {send}, add chunk {add}; "
                            f"expected send {want[0]}, add {want[1]}.{hint}", "")
    x = np.random.default_rng(3).standard_normal((5, 13))
    got = _ring_with(fn, x)
    if not np.allclose(got, x.sum(0)[None].repeat(5, 0)):
        return _say("Your chunks give a ring whose result is not the sum of the vectors.", "")
    return _say(None, "Correct: at step s rank r passes chunk (r - s) mod p to the right and adds the chunk "
                      "(r - 1 - s) mod p from the left; a whole ring built on it (p = 5, N = 13) gives the sum "
                      "on every worker.")


def check_bytes_per_worker(fn: Callable) -> bool:
    """Check ``fn(algorithm, n, p, itemsize) -> bytes`` (``"ring"`` and ``"naive"``) against the
    messages counted in the simulation.

    >>> from course.parallel.collectives import bytes_per_worker
    >>> check_bytes_per_worker(bytes_per_worker)                   # doctest: +ELLIPSIS
    Correct: ...
    True
    """
    for alg in ("ring", "naive"):
        for p in (1, 2, 3, 4, 8):
            for n, itemsize in ((24 * 35, 8), (24 * 35, 4)):
                done, got = call_learner(fn, alg, n, p, itemsize, context=f"{alg}, n={n}, p={p}")
                if not done:
                    return False
                counted = allreduce(np.zeros((p, n)), alg, trace=False).sent.max() * itemsize
                try:
                    value = float(got)
                except (TypeError, ValueError):
                    return _say(f"{alg}, n={n}, p={p}: return a number of bytes, got {got!r}.", "")
                if np.isclose(value, counted):
                    continue
                hint = ""
                if np.isclose(value * itemsize, counted):
                    hint = " You counted elements: multiply by itemsize for bytes."
                elif alg == "ring" and np.isclose(2 * value, counted):
                    hint = " The ring has TWO phases (reduce-scatter and all-gather), each sending (p - 1) chunks."
                elif alg == "naive" and p > 1 and np.isclose(value * (p - 1) / p, counted):
                    hint = " The root sends the sum to the OTHER p - 1 workers, not to itself."
                return _say(f"{alg}, n={n}, p={p}, itemsize={itemsize}: you said {value:,.0f} bytes; the busiest "
                            f"worker sends {counted:,.0f}.{hint}", "")
    return _say(None, "Correct: the ring sends 2 (p - 1) / p · N · itemsize bytes per worker (never more than "
                      "2 N · itemsize), the naive root (p - 1) · N · itemsize, growing with p.")


def check_gradient_average(fn: Callable) -> bool:
    """Check ``fn(grads, shard_sizes) -> averaged grads`` against unsplit training's gradients.

    >>> from course.parallel.data_parallel import average_gradients
    >>> check_gradient_average(average_gradients)                  # doctest: +ELLIPSIS
    Correct: ...
    True
    """
    sizes = [6, 9, 4]
    for batch, p in ((12, 3), (10, 3), (7, 2)):
        xs, ys = make_batches(sizes, batch, 1, seed=batch)
        x, y = xs[0], ys[0]
        rows = [shard(batch, p, r) for r in range(p)]
        grads = [single_process_gradients(sizes, x[s], y[s]) for s in rows]
        n = [s.stop - s.start for s in rows]
        done, got = call_learner(fn, [list(g) for g in grads], list(n), context=f"batch={batch}, p={p}")
        if not done:
            return False
        want = single_process_gradients(sizes, x, y)
        if isinstance(got, (str, bytes)) or not hasattr(got, "__len__") or len(got) != len(want):
            return _say(f"batch={batch}, p={p}: return one array per parameter ({len(want)}), got "
                        f"{type(got).__name__}.", "")
        for i, (g, w) in enumerate(zip(got, want)):
            if np.asarray(g).shape != w.shape or np.asarray(g).dtype.kind not in "fiu":
                return _say(f"batch={batch}, p={p}: parameter {i} must be an array of numbers of shape {w.shape}, "
                            f"like the ranks' gradients; got {type(g).__name__} {np.asarray(g).shape}.", "")
        if all(np.allclose(g, w, atol=1e-12) for g, w in zip(got, want)):
            continue
        mean = [sum(g[i] for g in grads) / p for i in range(len(want))]
        total = [sum(g[i] for g in grads) for i in range(len(want))]
        hint = ""
        if all(np.allclose(g, w) for g, w in zip(got, mean)):
            hint = (f" That is the plain mean over ranks, right only when the shards are equal; here they hold "
                    f"{n} samples. Weight each rank's gradient by its share of the batch, n_r / batch.")
        elif all(np.allclose(g, w) for g, w in zip(got, total)):
            hint = " That is the sum: each rank's gradient is already a mean over its own shard."
        return _say(f"batch={batch} over p={p} ranks (shards {n}): your average is not the gradient of the "
                    f"whole batch.{hint}", "")
    return _say(None, "Correct: the shards' gradients weighted by n_r / batch give exactly the gradient of the "
                      "whole batch, for equal and unequal shards.")


class RingNetwork:
    """What the learner's ring all-reduce talks through: ``exchange(sends)`` runs one step of the ring.

    ``sends[r]`` is the array worker r sends to its right neighbour r + 1; the returned list holds, for
    each worker, the array it received from its left neighbour r - 1. Every step is logged.
    """

    def __init__(self, p: int):
        self.p = p
        self.steps: list[list[int]] = []      # per step, the elements each worker sent

    def exchange(self, sends: list) -> list:
        if len(sends) != self.p:
            raise ValueError(f"exchange takes one array per worker ({self.p}), got {len(sends)}")
        arrays = [np.array(a, dtype=np.float64, copy=True).reshape(-1) for a in sends]
        self.steps.append([a.size for a in arrays])
        return [arrays[(r - 1) % self.p] for r in range(self.p)]


def _ring_allreduce_problem(fn: Callable, p: int, n: int, rng: np.random.Generator) -> str | None:
    x = rng.integers(-50, 50, (p, n)).astype(np.float64)     # whole numbers: every order of adds is exact
    net = RingNetwork(p)
    ok, got = call_learner(fn, x.copy(), net.exchange, context=f"p = {p} workers, n = {n}")
    if not ok:
        return ""
    where = f"(p = {p} workers, n = {n})"
    if not net.steps:
        return (f"{where} nothing went through `exchange`: each worker only sees its own vector, so the sums "
                "must travel round the ring, one chunk per step.")
    total = x.sum(axis=0)
    bounds = chunk_bounds(n, p)
    sizes = np.diff(bounds)
    for s, sent in enumerate(net.steps):
        for r, m in enumerate(sent):
            if m not in sizes:
                return (f"{where} at step {s} worker {r} sent {m} elements; in the ring each step moves ONE chunk "
                        f"(chunk c is x[{bounds[0]}:{bounds[1]}], x[{bounds[1]}:{bounds[2]}], ...: "
                        f"{sorted(set(sizes.tolist()))} elements).")
    got = None if got is None else np.asarray(got, dtype=np.float64)
    if got is None or got.shape != x.shape:
        return f"{where} return every worker's buffer, shape {x.shape}; got {None if got is None else got.shape}."
    if len(net.steps) != 2 * (p - 1):
        return (f"{where} the ring takes 2(p - 1) = {2 * (p - 1)} steps (p - 1 to reduce-scatter, p - 1 to "
                f"all-gather); you called exchange {len(net.steps)} times.")
    wrong = ~np.isclose(got, total[None])
    if not wrong.any():
        return None
    chunk_ok = np.array([[not wrong[r, bounds[c]:bounds[c + 1]].any() for c in range(p)] for r in range(p)])
    if all(chunk_ok[r].sum() == 1 and chunk_ok[r, (r + 1) % p] for r in range(p)):
        return (f"{where} after the reduce-scatter worker r holds the whole sum of chunk r + 1, and nothing else: "
                "the all-gather must then pass those finished chunks round, copying, not adding.")
    r, c = next((r, c) for r in range(p) for c in range(p) if not chunk_ok[r, c])
    lo, hi = bounds[c], bounds[c + 1]
    return (f"{where} worker {r}'s chunk {c} (elements {lo}:{hi}) is {got[r, lo:hi][:4].tolist()}"
            f"{'...' if hi - lo > 4 else ''}, expected the sum over workers {total[lo:hi][:4].tolist()}"
            f"{'...' if hi - lo > 4 else ''}. Check which chunk each worker adds at each step: it must be the "
            "one its left neighbour sent (my_reduce_scatter_chunks says which).")


def check_ring_allreduce(fn: Callable) -> bool:
    """Check ``fn(vectors, exchange)`` -> every worker's buffer after a ring all-reduce of ``vectors`` (p, n).

    ``exchange`` (a :class:`RingNetwork`'s) is the only way data moves between workers: one call per step,
    each worker sending one chunk to its right neighbour. Right means 2(p - 1) steps, a chunk per worker
    per step, and every worker ending with the sum, for p from 2 to 5 and n not a multiple of p.
    """
    rng = np.random.default_rng(606)
    for p, n in [(2, 6), (3, 7), (4, 4), (5, 23), (4, 3)]:
        problem = _ring_allreduce_problem(fn, p, n, rng)
        if problem is not None:
            if problem:
                print(f"check_ring_allreduce: ✗ {problem}")
            return False
    return _say(None, "check_ring_allreduce: right. Every worker ends with the sum after 2(p - 1) steps, each "
                      "moving one chunk per worker: 2(p - 1)/p · n elements sent by each, whatever p.")
