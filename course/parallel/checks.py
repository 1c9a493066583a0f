"""Lesson 06's exercise checks: ``course.check.<name>(your_function)`` prints what is wrong or that it is right.

* :func:`check_ring_chunks`: one reduce-scatter step of the ring, which chunk to send and which to add;
* :func:`check_bytes_per_worker`: the bytes the busiest worker sends, ring and naive;
* :func:`check_gradient_average`: the data-parallel gradient average, with unequal shards;
* :func:`check_ring_allreduce`: the whole ring all-reduce, data moving only through ``exchange``;
* :func:`check_zero2_step`: ZeRO stage 2's step (reduce-scatter, Adam on the rank's chunk, all-gather).

Every check compares with an oracle that is not the function under test: the sum of the vectors,
the messages counted in the simulation, the gradient of unsplit training on the whole batch, Adam in
one process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .collectives import allreduce, chunk_bounds, ring_chunks
from .data_parallel import make_batches, shard, single_process_gradients

__all__ = ["check_ring_chunks", "check_bytes_per_worker", "check_gradient_average", "check_ring_allreduce",
           "check_zero2_step"]


def call_learner(fn: Callable, *args: Any, context: str = "") -> tuple[bool, Any]:
    """:func:`course.grading.call_learner`, imported late: ``course.check`` imports this module."""
    from ..grading import call_learner as call

    return call(fn, *args, context=context)


def _real_array(what: str, got: Any) -> tuple[np.ndarray | None, str | None]:
    """:func:`course.grading.real_array`, imported late as :func:`call_learner` is."""
    from ..grading import real_array

    return real_array(what, got)


def _real_number(what: str, got: Any) -> tuple[float | None, str | None]:
    """:func:`course.grading.real_number`, imported late as :func:`call_learner` is."""
    from ..grading import real_number

    return real_number(what, got)


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
    if not isinstance(got, (tuple, list, np.ndarray)) or np.ndim(got) != 1 or len(got) != 2:
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
    done, got = call_learner(_ring_with, fn, x, context="a whole ring built on your chunks, p = 5")
    if not done:
        return False
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
                value, unreadable = _real_number(f"{alg}, n={n}, p={p}: the bytes", got)
                if unreadable:
                    return _say(unreadable, "")
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
            arr, unreadable = _real_array(f"batch={batch}, p={p}: parameter {i}", g)
            if unreadable or arr.shape != w.shape:
                return _say(unreadable or f"batch={batch}, p={p}: parameter {i} must be an array of numbers of shape "
                            f"{w.shape}, like the ranks' gradients; got {type(g).__name__} {arr.shape}.", "")
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
    if got is None:
        return f"{where} return every worker's buffer, shape {x.shape}; got None."
    got, unreadable = _real_array(f"{where} every worker's buffer", got)
    if unreadable:
        return unreadable
    if got.shape != x.shape:
        return f"{where} return every worker's buffer, shape {x.shape}; got {got.shape}."
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


# ---------------------------------------------------------------------------- ZeRO stage 2's step

_ZERO_SIZES, _ZERO_BATCH, _ZERO_STEPS = [6, 8, 5], 12, 3


def _flat_gradient(flat: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The mean-loss gradient at the flat parameters ``flat`` of ``MLP(_ZERO_SIZES)`` on ``(x, y)``, flat."""
    from ..backprop.layers import MLP
    from .data_parallel import flat_gradients

    model, at = MLP(_ZERO_SIZES, dtype="float64"), 0
    for q in model.parameters():
        q[...] = flat[at:at + q.size].reshape(q.shape)
        at += q.size
    return flat_gradients(model, x, y)


def _shard_network(p: int, n: int) -> tuple[Callable, Callable, list]:
    """``reduce_scatter``, ``all_gather`` (the simulated ring) and the log of ``(kind, bytes sent per rank)``."""
    from .collectives import ring_all_gather, ring_reduce_scatter

    bounds, log = chunk_bounds(n, p), []

    def reduce_scatter(vectors: Any) -> list:
        x = np.array(vectors, dtype=np.float64) if not isinstance(vectors, (str, bytes)) else None
        if x is None or x.shape != (p, n):
            raise ValueError(f"reduce_scatter takes one vector of {n} numbers per rank, shape ({p}, {n}); got "
                             f"{getattr(x, 'shape', type(vectors).__name__)}")
        run = ring_reduce_scatter(x, trace=False)
        log.append(("reduce-scatter", run.bytes_sent()))
        return [run.result[r, bounds[r]:bounds[r + 1]].copy() for r in range(p)]

    def all_gather(chunks: Any) -> np.ndarray:
        if isinstance(chunks, (str, bytes)) or len(chunks) != p:
            raise ValueError(f"all_gather takes one chunk per rank ({p} of them); got {chunks!r:.60}")
        x = np.zeros((p, n))
        for r, c in enumerate(chunks):
            c = np.asarray(c, dtype=np.float64).ravel()
            if c.size != bounds[r + 1] - bounds[r]:
                raise ValueError(f"all_gather takes rank r's chunk r only (chunk_bounds: sizes "
                                 f"{np.diff(bounds).tolist()}); rank {r} gave {c.size} numbers")
            x[r, bounds[r]:bounds[r + 1]] = c
        run = ring_all_gather(x, trace=False)
        log.append(("all-gather", run.bytes_sent()))
        return run.result.copy()

    return reduce_scatter, all_gather, log


#: How close a ZeRO-2 step's parameters must be to one process's Adam: rounding of a split sum, no more.
_ZERO_RTOL, _ZERO_ATOL = 1e-10, 1e-12


def _zero2_problem(fn: Callable, p: int) -> str | None:
    """What is wrong with ``fn`` on p ranks over a few Adam steps (None: right; "": already said)."""
    from ..backprop.layers import MLP
    from ..grading import array_mismatch
    from .zero import adam_update

    x, y = make_batches(_ZERO_SIZES, _ZERO_BATCH, 1, seed=p)
    x, y = x[0], y[0]
    flat = np.concatenate([q.ravel() for q in MLP(_ZERO_SIZES, dtype="float64").parameters()])
    n, bounds = flat.size, chunk_bounds(flat.size, p)
    chunk = [slice(int(bounds[r]), int(bounds[r + 1])) for r in range(p)]
    rows = [shard(_ZERO_BATCH, p, r) for r in range(p)]
    want, wm, wv = flat.copy(), np.zeros(n), np.zeros(n)
    params, m = np.tile(flat, (p, 1)), [np.zeros(c.stop - c.start) for c in chunk]
    v = [a.copy() for a in m]
    for t in range(1, _ZERO_STEPS + 1):
        where = f"(p = {p} ranks, step t = {t})"
        grads = np.stack([_flat_gradient(params[r], x[rows[r]], y[rows[r]]) for r in range(p)])
        g = _flat_gradient(want, x, y)
        adam_update(want, g, wm, wv, t, 0.01)
        reduce_scatter, all_gather, log = _shard_network(p, n)
        done, got = call_learner(fn, params, grads, m, v, t, 0.01, reduce_scatter, all_gather, context=where[1:-1])
        if not done:
            return ""
        if not log:
            return (f"{where} nothing went through reduce_scatter or all_gather: rank r sees only its own "
                    "gradient (grads[r]); the sum over the ranks must travel through the network.")
        if not isinstance(got, (tuple, list)) or len(got) != 3:
            return f"{where} return (params, m, v), three things; got {type(got).__name__}."
        new, unreadable = _real_array(f"{where} params", got[0])
        if unreadable:
            return unreadable
        if new.shape != (p, n):
            return f"{where} params: return every rank's copy, shape ({p}, {n}); got {new.shape}."
        if np.asarray(got[0]).dtype != np.float64:
            return f"{where} params hold {np.asarray(got[0]).dtype}; keep float64, as the inputs are."
        moments = []
        for name, have in (("m", got[1]), ("v", got[2])):
            if isinstance(have, (str, bytes)) or not hasattr(have, "__len__") or len(have) != p:
                return f"{where} {name}: return one array per rank ({p}), got {type(have).__name__}."
            for r in range(p):
                arr, unreadable = _real_array(f"{where} {name}[{r}]", have[r])
                if unreadable:
                    return unreadable
                if arr.size == n and n != chunk[r].stop - chunk[r].start:
                    return (f"{where} {name}[{r}] holds {n} numbers: you updated the whole vector. In ZeRO rank r "
                            f"keeps Adam's moments of its own chunk only ({chunk[r].stop - chunk[r].start} "
                            "numbers): that is where the memory goes down. Update params[r][chunk r] alone.")
                if arr.shape != (chunk[r].stop - chunk[r].start,):
                    return (f"{where} {name}[{r}]: shape {arr.shape}; rank {r} keeps the moments of its chunk, "
                            f"shape ({chunk[r].stop - chunk[r].start},).")
            moments.append([np.asarray(have[r], dtype=np.float64) for r in range(p)])
        if not np.isfinite(new).all() or not all(np.isfinite(a).all() for ms in moments for a in ms):
            return f"{where} your params, m or v hold NaN or inf."
        m_ok = all(np.allclose(moments[0][r], wm[chunk[r]], rtol=1e-9, atol=1e-15) for r in range(p))
        if not m_ok and all(np.allclose(moments[0][r], p * wm[chunk[r]], rtol=1e-9, atol=1e-15) for r in range(p)):
            return (f"{where} your m is {p} × the right one (and v {p * p} ×): you used the SUM of the ranks' "
                    f"gradients. Each grads[r] is a mean over rank r's shard, so the batch's gradient is their "
                    f"mean: divide the reduce-scattered chunk by p. (Adam barely notices in the parameters, as "
                    f"m/√v does not change when every gradient is scaled; only eps tells them apart.)")
        if not np.allclose(new, want[None], rtol=_ZERO_RTOL, atol=_ZERO_ATOL):
            early = params.copy()                     # each rank's old copy, its own chunk updated
            for r in range(p):
                early[r, chunk[r]] = want[chunk[r]]
            if np.allclose(new, early, rtol=_ZERO_RTOL, atol=_ZERO_ATOL):
                return (f"{where} each rank's copy is the old parameters with only its own chunk updated: you "
                        "gathered before updating, so the others received the old chunks. Update your chunk "
                        "with Adam first, then all-gather.")
            if not all(np.array_equal(new[r], new[0]) for r in range(p)):
                return (f"{where} the ranks' copies of the parameters differ: after the all-gather every rank must "
                        "hold the same updated vector.")
            i = int(np.argmax(np.abs(new[0] - want)))
            return array_mismatch(f"{where} params", new[0], want) or (
                f"{where} params: off by up to {abs(new[0, i] - want[i]):.3g} (entry {i}: you gave {new[0, i]!r}, "
                f"one process's Adam gives {want[i]!r}), more than rounding explains (relative {_ZERO_RTOL:g}); a "
                "ZeRO step does the same arithmetic as one process, only split: look for a value changed on the way")
        if not m_ok or not all(np.allclose(moments[1][r], wv[chunk[r]], rtol=1e-9, atol=1e-18) for r in range(p)):
            return f"{where} the parameters are right but m or v is not Adam's: return the moments you updated."
        kinds, sent = [k for k, _ in log], np.sum([b for _, b in log], axis=0)
        ring = allreduce(np.zeros((p, n)), "ring", trace=False).sent * 8
        if kinds != ["reduce-scatter", "all-gather"]:
            return (f"{where} you sent {sent.max():,.0f} bytes from the busiest rank in {len(kinds)} collectives "
                    f"({', '.join(kinds)}); ZeRO-2 needs one reduce-scatter of the gradient and one all-gather of "
                    f"the updated parameters, {ring.max():,.0f} bytes: what one all-reduce sends.")
        params, m, v = new, moments[0], moments[1]
    return None


def check_zero2_step(fn: Callable) -> bool:
    """Check ``fn(params, grads, m, v, t, lr, reduce_scatter, all_gather) -> (params, m, v)``: one ZeRO stage-2
    step of p ranks, equal to one process training with Adam, sending one all-reduce's bytes.

    ``params`` (p, N): every rank's copy; ``grads`` (p, N): each rank's mean gradient over its (equal) shard;
    ``m[r]``, ``v[r]``: rank r's Adam moments of its chunk r (:func:`chunk_bounds`).

    >>> from course.parallel.zero import adam_update
    >>> def step(params, grads, m, v, t, lr, reduce_scatter, all_gather):
    ...     p, n = params.shape
    ...     b, mine = chunk_bounds(n, p), []
    ...     for r, total in enumerate(reduce_scatter(grads)):
    ...         w = params[r, b[r]:b[r + 1]].copy()
    ...         adam_update(w, total / p, m[r], v[r], t, lr)
    ...         mine.append(w)
    ...     return all_gather(mine), m, v
    >>> check_zero2_step(step)                                     # doctest: +ELLIPSIS
    check_zero2_step: right. ...
    True
    """
    for p in (2, 3, 4):
        problem = _zero2_problem(fn, p)
        if problem is not None:
            if problem:
                print(f"check_zero2_step: ✗ {problem}")
            return False
    return _say(None, f"check_zero2_step: right. On 2, 3 and 4 ranks, {_ZERO_STEPS} Adam steps equal one process "
                      f"to {_ZERO_RTOL:g} relative, each rank keeps Adam's moments of 1/p of the parameters, and each "
                      "step sends one "
                      "reduce-scatter and one all-gather: one all-reduce's bytes.")
