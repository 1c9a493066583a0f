"""Lesson 06's MPI runs that check, as one call each from a notebook cell: launch, read back, compare.

Each function starts ``mpiexec`` through :func:`course.parallel.mpi.run_mpi` and compares what the
ranks computed with an oracle computed here in one process (MPI's own ``Allreduce`` inside the run,
single-process training, unsplit gradients).  The runs that time (the all-reduce sweep, the
data-parallel, pipeline and tensor-parallel timings) are in :mod:`course.parallel.timing`.

>>> from course.parallel.mpi import mpi_available
>>> mpi_available() is False or ring_check(2, [5], progress=None)[0]["identical_on_every_rank"]
True
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..arguments import Given, OneOf, Optional, Whole, Wholes, arguments
from ..errors import BadInputError
from ..limits import require_fits
from .collectives import validate_workers
from .data_parallel import make_batches, require_batch_splits, single_process_train, validate_sizes
from .mpi import oversubscribed, run_mpi
from .tensor_parallel import column_bounds, single_process_block, validate_block
from .zero import TRAIN_RULES, assemble, require_sharded_fits, simulate_sharded, validate_data

__all__ = ["ring_check", "train_data_parallel", "tensor_parallel_check", "validate_schedule", "shard_collectives_check",
           "sharded_train"]

Progress = Callable[[str], None] | None


def validate_schedule(chunks: Any) -> Callable:
    """``chunks``, the learner's ``f(rank, step, p) -> (send, add)``, or a clear error: a plain function
    whose source the ranks can run (a stub raises its ``NotImplementedError`` here, not on the ranks)."""
    if not callable(chunks):
        raise BadInputError(f"chunks must be a function f(rank, step, p) -> (send, add); got {chunks!r}.")
    chunks(0, 0, 2)
    try:
        inspect.getsource(chunks)
    except (OSError, TypeError):
        raise BadInputError("the ranks need your function's source: define it with def in a notebook cell "
                            "or a file (not a lambda typed at a prompt).") from None
    return chunks


def _require_vectors_fit(p: int, lengths: list[int]) -> None:
    require_fits(4 * p * 8 * max(lengths), "cpu", what=f"{p} ranks' vectors of {max(lengths):,} float64")


@arguments(p=Given(validate_workers), lengths=Wholes(hint="every vector length: an all-reduce of nothing has "
                                                          "nothing to send"),
           chunks=Optional(Given(validate_schedule)), then=_require_vectors_fit)
def ring_check(p: int, lengths: Sequence[int] = (1, 7, 1000, 12345), chunks: Callable | None = None,
               timeout_s: float = 60, progress: Progress = print) -> list[dict]:
    """The course's ring and naive all-reduce on ``p`` ranks, each compared with MPI's ``Allreduce``.

    ``chunks``: your ``f(rank, step, p) -> (send, add)`` for the reduce-scatter (exercise 1); then
    the ring runs on the ranks with *your* schedule instead (its source is sent to every rank, so it
    must be a plain function defined in a cell or a file, using nothing but numpy as ``np``).
    Returns one dict per (algorithm, length): ``max_rel_error`` and ``identical_on_every_rank``.
    """
    params: dict = {"lengths": lengths}
    if chunks is not None:
        params.update(chunks_source=textwrap.dedent(inspect.getsource(chunks)), chunks_name=chunks.__name__)
    return run_mpi("ring_check", p, params, timeout_s, progress)["checks"]


def _require_batches_fit(p: int, sizes: list[int], batch: int, steps: int) -> None:
    require_fits(2 * p * 16 * steps * batch * (sizes[0] + 1), "cpu", what=f"{p} ranks' copies of {steps} batches")
    require_batch_splits(batch, p)


@arguments(p=Given(validate_workers), sizes=Given(validate_sizes),
           batch=Whole(hint="samples per step, split over the ranks"), steps=Whole(hint="training steps"),
           mode=OneOf("ring", "ddp"), then=_require_batches_fit)
def train_data_parallel(p: int, sizes: Sequence[int] = (16, 32, 32, 10), batch: int = 48, steps: int = 5,
                        lr: float = 0.1, seed: int = 0, mode: str = "ring", timeout_s: float = 60,
                        progress: Progress = print) -> dict:
    """Data-parallel SGD on ``p`` ranks against single-process training on the whole batch.

    ``mode="ring"``: the course's ring after each backward; ``"ddp"``: MPI's Iallreduce per bucket
    of gradients, started during backward (small buckets, so even a small model has several).

    Returns ``{"max_abs_diff": ..., "ranks_agree": ..., "weights": rank 0's weights, "oracle": ...}``.
    """
    out = run_mpi("data_parallel", p, {"sizes": sizes, "batch": batch, "steps": steps, "lr": lr,
                                        "seed": seed, "mode": mode}, timeout_s, progress)
    oracle = single_process_train(sizes, batch, steps, lr, seed)
    ranks = [[np.asarray(w) for w in rank] for rank in out["weights"]]
    diff = max(float(np.max(np.abs(w - o))) for rank in ranks for w, o in zip(rank, oracle))
    agree = all(np.array_equal(a, b) for rank in ranks for a, b in zip(rank, ranks[0]))
    return {"p": p, "steps": steps, "max_abs_diff": diff, "ranks_agree": agree, "weights": ranks[0],
            "oracle": oracle, "oversubscribed": oversubscribed(p)}


def _require_block_fits(sizes: list[int], p: int, batch: int) -> None:
    column_bounds(sizes[1], p)
    require_fits(4 * p * 8 * batch * max(sizes) + 16 * p * sizes[1] * (sizes[0] + sizes[2]), "cpu",
                 what=f"{p} ranks' slices of a {sizes} block at batch {batch:,}")


@arguments(sizes=Given(validate_block), p=Given(validate_workers),
           batch=Whole(hint="samples per step (every rank takes them all)"), then=_require_block_fits)
def tensor_parallel_check(p: int, sizes: Sequence[int] = (16, 24, 10), batch: int = 12, seed: int = 0,
                          activation: str = "relu", timeout_s: float = 60, progress: Progress = print) -> dict:
    """One tensor-parallel step of the block on ``p`` MPI ranks against the unsplit block in this process.

    Returns the largest absolute differences of the logits, the input's gradient ``dx`` and the
    parameters' gradients (``max_abs_diff_*``), and whether every rank ended with the same logits
    and ``dx`` (``ranks_agree``: each all-reduce leaves identical bits on every rank).
    """
    out = run_mpi("tensor_parallel", p, {"sizes": sizes, "batch": batch, "seed": seed, "activation": activation},
                  timeout_s, progress)
    xs, ys = make_batches(sizes, batch, 1, seed)
    want = single_process_block(sizes, xs[0], ys[0], seed, activation)
    logits, dx = [np.asarray(v) for v in out["logits"]], [np.asarray(v) for v in out["dx"]]
    return {"p": p, "sizes": sizes, "batch": batch,
            "max_abs_diff_logits": max(float(np.max(np.abs(v - want["logits"]))) for v in logits),
            "max_abs_diff_dx": max(float(np.max(np.abs(v - want["dx"]))) for v in dx),
            "max_abs_diff_gradients": max(float(np.max(np.abs(np.asarray(g) - w)))
                                          for g, w in zip(out["gradients"], want["gradients"])),
            "ranks_agree": all(np.array_equal(v, logits[0]) for v in logits) and all(
                np.array_equal(v, dx[0]) for v in dx) and out["db2_equal_on_every_rank"],
            "oversubscribed": oversubscribed(p)}


@arguments(p=Given(validate_workers), lengths=Wholes(hint="every vector length"), then=_require_vectors_fit)
def shard_collectives_check(p: int, lengths: Sequence[int] = (1, 7, 1000, 12345), timeout_s: float = 60,
                            progress: Progress = print) -> list[dict]:
    """The course's ring reduce-scatter and all-gather (ZeRO's collectives) on ``p`` ranks, each compared with
    MPI's own ``Reduce_scatter`` and ``Allgatherv``: one dict per length with ``reduce_scatter_max_rel_error``,
    ``all_gather_equals_mpi`` and ``identical_on_every_rank``."""
    return run_mpi("shard_collectives", p, {"lengths": lengths}, timeout_s, progress)["checks"]


@arguments(**TRAIN_RULES, engine=OneOf("simulated", "mpi"), then=require_sharded_fits)
def sharded_train(stage: int, p: int, sizes: Sequence[int], x: Any, y: Any, steps: int, lr: float, seed: int = 0,
                  engine: str = "simulated", activation: str = "relu", timeout_s: float = 120,
                  progress: Progress = print) -> dict:
    """Train lesson 01's MLP with Adam at ZeRO ``stage`` on ``p`` ranks (:mod:`course.parallel.zero`).

    Parameters
    ----------
    stage : 1 (Adam's moments sharded), 2 (and the gradients), 3 (and the parameters: FSDP); 0 is plain data
        parallelism, for comparison.
    p : ranks; each takes its shard of the batch (:func:`course.parallel.data_parallel.shard`).
    sizes : the MLP's widths, input first; float64 throughout.
    x, y : one batch ``(batch, sizes[0])`` and its integer labels, used at every step, or one per step
        ``(steps, batch, sizes[0])``.
    steps, lr, seed : Adam's steps (``torch.optim.Adam``'s defaults otherwise), its step size, the weights' seed.
    engine : ``"simulated"`` (p ranks stepped in lockstep in this process, the simulated ring) or ``"mpi"`` (p
        processes under ``mpiexec``, the course's ring over ``Sendrecv``): the same generator runs in both.

    Returns
    -------
    dict : ``initial_params`` and ``params`` (the MLP's parameters before and after, gathered, in
        ``MLP.parameters()`` order), ``losses`` (the batch's loss before each step), ``peak_bytes_per_rank``
        (the most model-state bytes each rank held at once), ``held_bytes_per_rank`` (what it holds between
        steps), ``bytes_sent_per_rank`` (per step: the simulated ring's messages, or on MPI the bytes passed to
        ``Sendrecv``), ``ranks_agree`` (every rank holds identical parameters; None at stage 3, where none
        holds them all), ``stage``, ``p``, ``engine``.

    Examples
    --------
    >>> x, y = np.ones((4, 3)), np.array([0, 1, 0, 1])
    >>> out = sharded_train(2, 2, [3, 5, 2], x, y, steps=3, lr=0.01)
    >>> len(out["losses"]), [q.shape for q in out["params"]]
    (3, [(3, 5), (5,), (5, 2), (2,)])
    """
    if engine == "simulated":
        return simulate_sharded(stage, p, sizes, x, y, steps, lr, seed, activation)
    xs, ys = validate_data(sizes, x, y, steps)
    one = xs.strides[0] == 0                           # the same batch at every step: send it once
    out = run_mpi("zero_train", p, {"stage": stage, "sizes": sizes, "steps": steps, "lr": lr, "seed": seed,
                                    "activation": activation, "x": (xs[0] if one else xs).tolist(),
                                    "y": (ys[0] if one else ys).tolist()}, timeout_s, progress)
    from ..backprop.layers import MLP

    chunks = [[np.asarray(c, dtype=np.float64) for c in rank] for rank in out["chunks"]]
    return {"stage": stage, "p": p, "engine": "mpi",
            "initial_params": MLP(sizes, activation=activation, dtype="float64", seed=seed).parameters(),
            "params": assemble(sizes, chunks), "losses": out["losses"],
            **{k: out[k] for k in ("peak_bytes_per_rank", "held_bytes_per_rank", "bytes_sent_per_rank",
                                   "ranks_agree")}, "oversubscribed": oversubscribed(p)}
