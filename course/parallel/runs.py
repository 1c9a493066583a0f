"""Lesson 06's MPI runs as one call each, from a notebook cell: launch, read back, check, record.

Each function starts ``mpiexec`` through :func:`course.parallel.mpi.run_mpi`, compares what the
ranks computed with an oracle computed here in one process (MPI's own ``Allreduce`` inside the run,
single-process training, unsplit gradients), and returns plain dicts or a
:class:`~course.results.ResultSet` whose records name the rank count and whether the ranks were
oversubscribed (more ranks than cores).

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

from ..errors import BadInputError, whole_number
from ..limits import require_fits
from ..results import ResultSet
from .collectives import validate_length, validate_workers
from .data_parallel import single_process_train
from .mpi import cores, oversubscribed, run_mpi
from .pipeline import bubble_fraction, measured_bubble, stage_bounds
from .tensor_parallel import (
    column_bounds,
    data_parallel_bytes,
    single_process_block,
    tensor_parallel_bytes,
    validate_block,
)

__all__ = ["SIZES_BYTES", "DP_SIZES", "PIPE_SIZES", "TP_SIZES", "ring_check", "allreduce_sweep",
           "train_data_parallel", "data_parallel_timing", "pipeline_runs", "tensor_parallel_check",
           "tensor_parallel_sweep"]

#: Message sizes of the full sweep: 1 KB to 64 MB.
SIZES_BYTES = [2**k for k in range(10, 27, 2)]
#: The MLP the data-parallel timings train (lesson 01's kind, wide enough for the compute to matter).
DP_SIZES = [256, 512, 512, 512, 10]
#: The MLP the pipeline splits: six Linear layers, five of equal width, so 2 and 3 stages are nearly balanced.
PIPE_SIZES = [256, 256, 256, 256, 256, 256, 10]
#: The block tensor parallelism splits: one wide hidden layer (a transformer's MLP is 4x its width).
TP_SIZES = [256, 1024, 256]

Progress = Callable[[str], None] | None
#: The most timed repeats an MPI run takes (each rank repeats the whole measurement).
MAX_MPI_REPEAT = 1000


def _ranks_list(ps: Any) -> list[int]:
    if isinstance(ps, (str, bytes)) or not isinstance(ps, Sequence) or not len(ps):
        raise BadInputError(f"ps must be a non-empty list of rank counts, got {ps!r}")
    return [validate_workers(p) for p in ps]


def _validate_sizes(sizes: Any) -> None:
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or len(sizes) < 2:
        raise BadInputError(f"sizes must list the layer widths, input first and classes last, got {sizes!r}")
    for s in sizes:
        whole_number("sizes", s, hint="each is a layer width")


def _note(rs: ResultSet, ps: Sequence[int]) -> None:
    over = [p for p in ps if oversubscribed(p)]
    if over:
        rs.notes.append(f"Oversubscribed: this machine has {cores()} cores, so the runs with "
                        f"p = {', '.join(map(str, over))} ranks shared cores and their times are stretched.")


def ring_check(p: int, lengths: Sequence[int] = (1, 7, 1000, 12345), chunks: Callable | None = None,
               timeout_s: float = 60, progress: Progress = print) -> list[dict]:
    """The course's ring and naive all-reduce on ``p`` ranks, each compared with MPI's ``Allreduce``.

    ``chunks``: your ``f(rank, step, p) -> (send, add)`` for the reduce-scatter (exercise 1); then
    the ring runs on the ranks with *your* schedule instead (its source is sent to every rank, so it
    must be a plain function defined in a cell or a file, using nothing but numpy as ``np``).
    Returns one dict per (algorithm, length): ``max_rel_error`` and ``identical_on_every_rank``.
    """
    p = validate_workers(p)
    lengths = [validate_length(n, "every vector length") for n in lengths]
    longest = max(lengths, default=0)
    require_fits(4 * p * 8 * longest, "cpu", what=f"{p} ranks' vectors of {longest:,} float64")
    params: dict = {"lengths": lengths}
    if chunks is not None:
        if not callable(chunks):
            raise BadInputError(f"chunks must be a function f(rank, step, p) -> (send, add); got {chunks!r}.")
        chunks(0, 0, max(p, 2))                   # a stub raises NotImplementedError here, not on the ranks
        try:
            params["chunks_source"] = textwrap.dedent(inspect.getsource(chunks))
        except (OSError, TypeError):
            raise BadInputError("the ranks need your function's source: define it with def in a notebook cell "
                                "or a file (not a lambda typed at a prompt).") from None
        params["chunks_name"] = chunks.__name__
    return run_mpi("ring_check", p, params, timeout_s, progress)["checks"]


def allreduce_sweep(ps: Sequence[int] = (2, 3, 4), nbytes: Sequence[int] = tuple(SIZES_BYTES),
                    algorithms: Sequence[str] = ("ring (course)", "naive (course)", "MPI Allreduce"),
                    repeat: int = 3, timeout_s: float = 300, progress: Progress = print) -> ResultSet:
    """Time the three MPI all-reduces for each message size (float64 vectors) on p ranks, each p."""
    ps = _ranks_list(ps)
    repeat = whole_number("repeat", repeat, 1, MAX_MPI_REPEAT, hint="timed runs on every rank")
    for b in nbytes:
        whole_number("nbytes", b, 8, hint="message sizes are float64 vectors, so at least 8 bytes")
    require_fits(4 * max(ps) * max(nbytes, default=0), "cpu", what=f"{max(ps)} ranks' messages")
    rs = ResultSet("allreduce_mpi", params={"ps": list(ps), "nbytes": list(nbytes), "repeat": repeat,
                                            "algorithms": list(algorithms), "cores": cores()})
    for p in ps:
        out = run_mpi("allreduce_timing", p, {"nbytes": list(nbytes), "algorithms": list(algorithms),
                                               "repeat": repeat}, timeout_s, progress)
        rs.params["mpi_library"] = out["mpi_library"]
        for rec in out["records"]:
            rs.add(**rec, p=p, oversubscribed=oversubscribed(p))
    _note(rs, ps)
    return rs


def train_data_parallel(p: int, sizes: Sequence[int] = (16, 32, 32, 10), batch: int = 48, steps: int = 5,
                        lr: float = 0.1, seed: int = 0, mode: str = "ring", timeout_s: float = 60,
                        progress: Progress = print) -> dict:
    """Data-parallel SGD on ``p`` ranks against single-process training on the whole batch.

    ``mode="ring"``: the course's ring after each backward; ``"ddp"``: MPI's Iallreduce per bucket
    of gradients, started during backward (small buckets, so even a small model has several).

    Returns ``{"max_abs_diff": ..., "ranks_agree": ..., "weights": rank 0's weights, "oracle": ...}``.
    """
    if mode not in ("ring", "ddp"):
        raise BadInputError(f"mode must be 'ring' or 'ddp'; got {mode!r}.")
    p, batch = validate_workers(p), whole_number("batch", batch, hint="samples per step, split over the ranks")
    steps = whole_number("steps", steps, hint="training steps")
    _validate_sizes(sizes)
    require_fits(2 * p * 16 * steps * batch * (sizes[0] + 1), "cpu", what=f"{p} ranks' copies of {steps} batches")
    if batch < p:
        raise BadInputError(f"batch = {batch} cannot be split over p = {p} ranks: use batch >= p.")
    out = run_mpi("data_parallel", p, {"sizes": list(sizes), "batch": batch, "steps": steps, "lr": lr,
                                        "seed": seed, "mode": mode}, timeout_s, progress)
    oracle = single_process_train(sizes, batch, steps, lr, seed)
    ranks = [[np.asarray(w) for w in rank] for rank in out["weights"]]
    diff = max(float(np.max(np.abs(w - o))) for rank in ranks for w, o in zip(rank, oracle))
    agree = all(np.array_equal(a, b) for rank in ranks for a, b in zip(rank, ranks[0]))
    return {"p": p, "steps": steps, "max_abs_diff": diff, "ranks_agree": agree, "weights": ranks[0],
            "oracle": oracle, "oversubscribed": oversubscribed(p)}


def data_parallel_timing(ps: Sequence[int] = (1, 2, 3), sizes: Sequence[int] = tuple(DP_SIZES),
                         batch: int = 256, repeat: int = 5, bucket_bytes: int = 2**20,
                         timeout_s: float = 300, progress: Progress = print) -> ResultSet:
    """Per step on p ranks: compute, ring communication, and whole DDP steps without/with overlap."""
    ps = _ranks_list(ps)
    batch = whole_number("batch", batch)
    repeat = whole_number("repeat", repeat, 1, MAX_MPI_REPEAT, hint="timed steps on every rank")
    bucket_bytes = whole_number("bucket_bytes", bucket_bytes, hint="bytes of gradients per bucket")
    _validate_sizes(sizes)
    require_fits(4 * max(ps) * 8 * batch * max(sizes), "cpu", what=f"{max(ps)} ranks' activations at batch {batch:,}")
    rs = ResultSet("data_parallel_mpi", params={"ps": list(ps), "sizes": list(sizes), "batch": batch,
                                                "repeat": repeat, "bucket_bytes": bucket_bytes,
                                                "cores": cores()})
    for p in ps:
        out = run_mpi("dp_timing", p, {"sizes": list(sizes), "batch": batch, "repeat": repeat,
                                       "bucket_bytes": bucket_bytes}, timeout_s, progress)
        rs.params["gradient_bytes"] = out["gradient_bytes"]
        for rec in out["records"]:
            rs.add(**rec, p=p, oversubscribed=oversubscribed(p))
    _note(rs, ps)
    return rs


def pipeline_runs(p: int = 2, ms: Sequence[int] = (1, 2, 4, 8), sizes: Sequence[int] = tuple(PIPE_SIZES),
                  batch: int = 512, repeat: int = 2, timeout_s: float = 120,
                  progress: Progress = print) -> ResultSet:
    """GPipe on ``p`` stages for each micro-batch count m: timelines, bubbles, gradient check.

    Each record: ``m``, ``bubble_measured`` (from the recorded intervals), ``bubble_formula``
    (``(p-1)/(m+p-1)``), ``max_abs_diff`` of the gradients against unsplit training, the span of the
    step, and ``events`` (every stage's busy intervals).
    """
    _validate_sizes(sizes)
    stage_bounds(len(sizes) - 1, p)                      # a clear error before anything starts
    batch = whole_number("batch", batch)
    repeat = whole_number("repeat", repeat, 1, MAX_MPI_REPEAT, hint="timed steps on every rank")
    if isinstance(ms, (str, bytes)) or not len(ms):
        raise BadInputError(f"ms must list the micro-batch counts to run, got {ms!r}")
    for m in ms:
        whole_number("ms", m, 1, batch, hint="each is a number of micro-batches cut from the batch")
    require_fits(4 * p * 8 * batch * max(sizes), "cpu", what=f"{p} stages' activations at batch {batch:,}")
    out = run_mpi("pipeline", p, {"sizes": list(sizes), "batch": batch, "ms": list(ms), "repeat": repeat},
                  timeout_s, progress)
    rs = ResultSet("pipeline_mpi", params={"p": p, "ms": list(ms), "sizes": list(sizes), "batch": batch,
                                           "cores": cores()})
    for run in out["runs"]:
        span = max(e["t1"] for e in run["events"]) - min(e["t0"] for e in run["events"])
        rs.add(device="cpu", p=p, m=run["m"], bubble_measured=measured_bubble(run["events"], p),
               bubble_formula=bubble_fraction(p, run["m"]), max_abs_diff=run["max_abs_diff"], span_s=span,
               events=run["events"], oversubscribed=oversubscribed(p))
    _note(rs, [p])
    return rs


def tensor_parallel_check(p: int, sizes: Sequence[int] = (16, 24, 10), batch: int = 12, seed: int = 0,
                          activation: str = "relu", timeout_s: float = 60, progress: Progress = print) -> dict:
    """One tensor-parallel step of the block on ``p`` MPI ranks against the unsplit block in this process.

    Returns the largest absolute differences of the logits, the input's gradient ``dx`` and the
    parameters' gradients (``max_abs_diff_*``), and whether every rank ended with the same logits
    and ``dx`` (``ranks_agree``: each all-reduce leaves identical bits on every rank).
    """
    sizes = validate_block(sizes)
    p, batch = validate_workers(p), whole_number("batch", batch, hint="samples per step (every rank takes them all)")
    column_bounds(sizes[1], p)                           # a clear error before anything starts
    require_fits(4 * p * 8 * batch * max(sizes) + 16 * p * sizes[1] * (sizes[0] + sizes[2]), "cpu",
                 what=f"{p} ranks' slices of a {sizes} block at batch {batch:,}")
    out = run_mpi("tensor_parallel", p, {"sizes": sizes, "batch": batch, "seed": seed, "activation": activation},
                  timeout_s, progress)
    from .data_parallel import make_batches

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


def tensor_parallel_sweep(ps: Sequence[int] = (1, 2, 3), sizes: Sequence[int] = tuple(TP_SIZES), batch: int = 64,
                          repeat: int = 5, timeout_s: float = 300, progress: Progress = print) -> ResultSet:
    """Tensor against data parallelism for the same block and batch on p ranks, each p: a whole step
    and its all-reduces alone (the course's ring), the slowest rank's time; the bytes each rank sends
    per step (``bytes_sent``, from the ring's formula, which the simulation's count matches)."""
    ps = _ranks_list(ps)
    sizes = validate_block(sizes)
    batch = whole_number("batch", batch, hint="samples per step")
    repeat = whole_number("repeat", repeat, 1, MAX_MPI_REPEAT, hint="timed steps on every rank")
    for p in ps:
        column_bounds(sizes[1], p)
        if batch < p:
            raise BadInputError(f"batch = {batch} cannot be split over p = {p} ranks for data parallelism: "
                                f"use batch >= p.")
    require_fits(4 * max(ps) * 8 * (batch * max(sizes) + sizes[1] * (sizes[0] + sizes[2])), "cpu",
                 what=f"{max(ps)} ranks' copies of a {sizes} block at batch {batch:,}")
    rs = ResultSet("tensor_parallel_mpi", params={"ps": list(ps), "sizes": sizes, "batch": batch,
                                                  "repeat": repeat, "cores": cores()})
    for p in ps:
        out = run_mpi("tp_timing", p, {"sizes": sizes, "batch": batch, "repeat": repeat}, timeout_s, progress)
        sent = {"tensor": tensor_parallel_bytes(sizes, batch, p), "data": data_parallel_bytes(sizes, p)}
        for rec in out["records"]:
            rs.add(**rec, p=p, bytes_sent=sent[rec["scheme"]], oversubscribed=oversubscribed(p))
    _note(rs, ps)
    return rs
