"""Pipeline parallelism (GPipe's schedule): the MLP's layers split over p ranks, m micro-batches.

Stage s holds a contiguous run of the MLP's Linear layers (each with the activation after it).
The batch is cut into m micro-batches.  Forward: stage s receives micro-batch j's activations from
stage s - 1, runs its layers and sends the result to stage s + 1; the last stage computes the loss.
After all m forwards, the backward passes run in reverse (micro-batch m-1 first), gradients
flowing from stage s + 1 back to stage s; each stage *adds up* its layers' gradients over the
micro-batches.  The result is the gradient of the whole batch, the same as unsplit training
(the tests check it to 1e-12 in float64).

While the pipeline fills and drains, some stages have nothing to do: with equal stages the idle
share of the timeline, the **bubble**, is ``(p - 1) / (m + p - 1)``.  More micro-batches shrink it.
:func:`gpipe_step` records every stage's busy intervals so the timeline can be drawn and its bubble
measured.

Sends do not block (``Isend``): a stage hands its output on and goes straight to the next micro-batch.
A waiting stage polls its receive and yields its core between polls, so on a machine with fewer
cores than ranks a stage that waits lets one that works run (as an idle GPU would).

>>> stage_bounds(6, 3).tolist()
[0, 2, 4, 6]
>>> round(bubble_fraction(4, 8), 3)
0.273
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..arguments import Given, Real, Whole, arguments
from ..backprop.layers import MLP, Linear, softmax_cross_entropy, softmax_cross_entropy_backward
from ..errors import BadInputError, shown_value, whole_number
from .collectives import chunk_bounds, validate_workers
from .data_parallel import validate_model, validate_sizes
from .ring_mpi import validate_comm

__all__ = ["validate_events", "stage_bounds", "stage_layers", "bubble_fraction", "measured_bubble", "gpipe_step",
           "ideal_timeline"]

MAX_TIMELINE_EVENTS = 10 ** 5  # stages x micro-batches drawn by ideal_timeline


@arguments(n_linear=Whole(hint="the number of Linear layers"),
           p=Whole(hi="n_linear", hint="p stages, and each stage needs at least one layer: use a deeper model"))
def stage_bounds(n_linear: int, p: int) -> np.ndarray:
    """Which Linear layers each of p stages holds: stage s has layers ``bounds[s] .. bounds[s+1]-1``."""
    return chunk_bounds(n_linear, p)


@arguments(model=Given(validate_model), p=Given(validate_workers),
           stage=Whole(0, "p - 1", hint="stages are numbered 0 .. p - 1"))
def stage_layers(model: MLP, stage: int, p: int) -> list:
    """The layers (Linear, activation, ...) of one stage, in order, taken from ``model``."""
    bounds = stage_bounds(len(model.linear_layers()), p)
    out, j = [], -1
    for layer in model.layers:
        j += isinstance(layer, Linear)
        if bounds[stage] <= j < bounds[stage + 1]:
            out.append(layer)
    return out


def bubble_fraction(p: int, m: int) -> float:
    """GPipe's idle share with p equal stages and m micro-batches: ``(p - 1) / (m + p - 1)``.

    >>> bubble_fraction(1, 4), bubble_fraction(4, 1)
    (0.0, 0.75)
    """
    p, m = validate_workers(p), whole_number("m", m, hint="the number of micro-batches")
    return (p - 1) / (m + p - 1)


_EVENT_KEYS = ("stage", "kind", "micro", "t0", "t1")


def validate_events(events: Any) -> list[dict]:
    """``events`` as a non-empty list of busy intervals (dicts with ``stage, kind, micro, t0, t1``, what
    :func:`gpipe_step` and :func:`ideal_timeline` record), or a clear error."""
    if isinstance(events, (str, bytes, dict)) or not isinstance(events, Sequence) or not len(events) or not all(
            isinstance(e, dict) and all(k in e for k in _EVENT_KEYS) for e in events):
        raise BadInputError(f"events must be a non-empty list of busy intervals, dicts with keys "
                            f"{', '.join(_EVENT_KEYS)} (what gpipe_step records), got {shown_value(events)}")
    return list(events)


def _require_events(events: Sequence[dict]) -> None:
    if not len(events):
        raise BadInputError("events is empty: pass the busy intervals that gpipe_step recorded")


def _require_timeline_fits(p: int, m: int) -> None:
    if p * m > MAX_TIMELINE_EVENTS:
        raise BadInputError(f"p x m must be at most {MAX_TIMELINE_EVENTS:,} (two events each), got {p:,} x {m:,}")


@arguments(p=Given(validate_workers), then=_require_events)
def measured_bubble(events: Sequence[dict], p: int) -> float:
    """Idle share of a recorded timeline: ``1 - busy time / (p * makespan)``."""
    start = min(e["t0"] for e in events)
    end = max(e["t1"] for e in events)
    busy = sum(e["t1"] - e["t0"] for e in events)
    return 1.0 - busy / (p * (end - start))


@arguments(p=Given(validate_workers), m=Whole(hint="the number of micro-batches"),
           forward=Real(above=0, hint="a duration"), backward=Real(above=0, hint="a duration"),
           then=_require_timeline_fits)
def ideal_timeline(p: int, m: int, forward: float = 1.0, backward: float = 2.0) -> list[dict]:
    """GPipe's schedule with equal stages and no communication cost: the formula's picture."""
    ev = []
    for s in range(p):
        for j in range(m):
            t0 = (s + j) * forward
            ev.append({"stage": s, "kind": "F", "micro": j, "t0": t0, "t1": t0 + forward})
    fwd_end = (m + p - 1) * forward
    for s in range(p):
        for k, j in enumerate(reversed(range(m))):
            t0 = fwd_end + (p - 1 - s + k) * backward
            ev.append({"stage": s, "kind": "B", "micro": j, "t0": t0, "t1": t0 + backward})
    return ev


_yield = getattr(os, "sched_yield", lambda: time.sleep(0))


def _recv(comm: Any, buf: np.ndarray, source: int, tag: int) -> None:
    """Receive into ``buf``, yielding the core between polls: a waiting rank lets a working one run."""
    req = comm.Irecv(buf, source=source, tag=tag)
    while not req.Test():
        _yield()


def _progress(sends: list) -> None:
    """Let MPI move the messages in flight.  A message too large to be sent eagerly waits until its
    receiver is ready *and* its sender makes its next MPI call (the rendezvous protocol): a stage
    busy computing its next micro-batch would otherwise hold back the stage that waits for it."""
    if sends:
        from mpi4py import MPI

        MPI.Request.Testall(sends)


@arguments(comm=Given(validate_comm), sizes=Given(validate_sizes), m=Whole(hint="the number of micro-batches"),
           seed=Whole(lo=0, hint="the seed every stage builds the same model from"))
def gpipe_step(comm: Any, sizes: Sequence[int], x: np.ndarray, y: np.ndarray, m: int,
               seed: int = 0) -> tuple[list[np.ndarray], list[dict]]:
    """One GPipe forward/backward of the batch ``(x, y)`` on the ranks of ``comm`` (rank = stage).

    Every rank passes the same full batch; stage 0 reads the inputs, the last stage the labels.
    Returns this stage's gradients (``[dW, db, ...]`` of its Linear layers, summed over the
    micro-batches: the whole batch's mean-loss gradient) and its busy intervals (dicts with
    ``stage, kind ("F"/"B"), micro, t0, t1`` in seconds on ``time.perf_counter``'s clock: on one
    machine all processes read the same monotonic clock, so the stages' intervals line up; each
    rank's own start after a barrier would not, as ranks leave a barrier at different moments).
    """
    p, s = comm.Get_size(), comm.Get_rank()
    batch = x.shape[0]
    m = whole_number("m", m, hint="the number of micro-batches")
    if m > batch:
        raise BadInputError(f"m = {m} micro-batches cannot be cut from a batch of {batch}: use m <= {batch}.")
    model = MLP(sizes, dtype="float64", seed=seed)
    layers = stage_layers(model, s, p)
    linears = [layer for layer in layers if isinstance(layer, Linear)]
    grads = [np.zeros_like(q) for lin in linears for q in lin.parameters()]
    width_in, width_out = linears[0].n_in, linears[-1].n_out
    mb = chunk_bounds(batch, m)
    caches: list[list] = [[] for _ in range(m)]
    top: list[Any] = [None] * m
    events: list[dict] = []
    sends: list[Any] = []                                     # messages in flight (their buffers stay alive)
    comm.Barrier()
    t_start = 0.0      # times on the monotonic clock, which every process on one machine shares

    for j in range(m):                                        # all forwards
        lo, hi = int(mb[j]), int(mb[j + 1])
        if s == 0:
            h = x[lo:hi]
        else:
            h = np.empty((hi - lo, width_in))
            _recv(comm, h, s - 1, j)
        t0 = time.perf_counter()
        for layer in layers:
            h, cache = layer.forward(h)
            caches[j].append(cache)
            _progress(sends)
        if s == p - 1:                                        # the loss of the whole batch is the
            _, lcache = softmax_cross_entropy(h, y[lo:hi])    # micro-batches' losses weighted by size
            top[j] = softmax_cross_entropy_backward(lcache) * ((hi - lo) / batch)
        t1 = time.perf_counter()
        events.append({"stage": s, "kind": "F", "micro": j, "t0": t0 - t_start, "t1": t1 - t_start})
        if s < p - 1:                                         # hand it on and carry on at once
            sends.append(comm.Isend(np.ascontiguousarray(h), dest=s + 1, tag=j))

    for j in reversed(range(m)):                              # all backwards, last micro-batch first
        lo, hi = int(mb[j]), int(mb[j + 1])
        if s == p - 1:
            g = top[j]
        else:
            g = np.empty((hi - lo, width_out))
            _recv(comm, g, s + 1, m + j)
        t0 = time.perf_counter()
        k = len(grads)
        for layer, cache in zip(reversed(layers), reversed(caches[j])):
            if isinstance(layer, Linear):
                g = layer.backward(g, cache, need_dx=not (s == 0 and layer is linears[0]))
                k -= 2
                grads[k] += layer.dW
                grads[k + 1] += layer.db
            else:
                g = layer.backward(g, cache)
            _progress(sends)
        t1 = time.perf_counter()
        events.append({"stage": s, "kind": "B", "micro": j, "t0": t0 - t_start, "t1": t1 - t_start})
        if s > 0:
            sends.append(comm.Isend(np.ascontiguousarray(g), dest=s - 1, tag=m + j))
    for req in sends:
        while not req.Test():
            _yield()
    return grads, events
