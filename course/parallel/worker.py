"""What every MPI rank runs: ``mpiexec -n P python -m course.parallel.worker TASK PARAMS.json OUT.json``.

Each task is a function ``task(comm, params, say) -> dict``; every rank runs it, rank 0 writes the
dict it returns to ``OUT.json``, and ``say(text)`` (rank 0 only) prints a progress line the
launcher (:func:`course.parallel.mpi.run_mpi`) shows in the notebook.  Start them from Python with
:func:`course.parallel.mpi.run_mpi`, or by hand from a terminal, e.g. on a cluster under the site's
own ``mpiexec``.  The tasks here compute and check; those that time are in :mod:`course.parallel.timing`.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from .data_parallel import (
    bucket_plan,
    data_parallel_train,
    ddp_step,
    make_batches,
    shard,
    single_process_gradients,
)
from .mpi import TASK_NAMES
from .pipeline import gpipe_step
from .ring_mpi import (
    ALLREDUCES,
    ByteCounter,
    mpi_all_gather,
    mpi_allreduce,
    mpi_reduce_scatter,
    ring_all_gather_mpi,
    ring_reduce_scatter_mpi,
)
from .tensor_parallel import gather_gradients, rank_step, run_rank_step, split_block
from .timing import task_allreduce_timing, task_dp_timing, task_nccl_ring, task_tp_timing, task_zero_timing
from .zero import ZeroRank, drive, mpi_collective, validate_data
from .zero import rank_step as zero_rank_step

PROGRESS_PREFIX = "@@progress "


def task_ring_check(comm: Any, params: dict, say: Callable) -> dict:
    """The course's all-reduces against MPI's own ``Allreduce`` on random vectors of several lengths."""
    p, r = comm.Get_size(), comm.Get_rank()
    out: dict[str, Any] = {"lengths": params["lengths"], "checks": []}
    fns = {"ring (course)": ALLREDUCES["ring (course)"], "naive (course)": ALLREDUCES["naive (course)"]}
    if params.get("chunks_source"):              # the learner's reduce-scatter schedule, from the notebook
        namespace: dict[str, Any] = {"np": np, "numpy": np}
        exec(compile(params["chunks_source"], "<your function>", "exec"), namespace)
        theirs = namespace[params["chunks_name"]]
        fns = {"ring (yours)": lambda comm, x: ALLREDUCES["ring (course)"](comm, x, reduce_scatter_chunks=theirs)}
    for n in params["lengths"]:
        x = np.random.default_rng(100 * n + r).standard_normal(n)
        want = mpi_allreduce(comm, x)
        for name, fn in fns.items():
            got = fn(comm, x)
            every = comm.gather(got, root=0)
            if r == 0:
                same = all(np.array_equal(every[0], g) for g in every)
                err = float(np.max(np.abs(got - want)) / max(1.0, float(np.max(np.abs(want)))))
                out["checks"].append({"algorithm": name, "n": n, "p": p, "max_rel_error": err,
                                      "identical_on_every_rank": bool(same)})
        say(f"checked n = {n:,}")
    return out


def task_data_parallel(comm: Any, params: dict, say: Callable) -> dict:
    """Data-parallel SGD; every rank's final weights.  ``mode``: ``"ring"`` (the course's ring after
    backward) or ``"ddp"`` (MPI's Iallreduce per bucket, overlapped with backward)."""
    from ..backprop.layers import MLP

    sizes, batch, steps, lr, seed = (params["sizes"], params["batch"], params["steps"], params["lr"],
                                     params.get("seed", 0))
    if params.get("mode", "ring") == "ring":
        w = data_parallel_train(comm, sizes, batch, steps, lr, seed)
    else:
        model = MLP(sizes, dtype="float64", seed=seed)
        rows = shard(batch, comm.Get_size(), comm.Get_rank())
        flat = np.empty(model.n_parameters())
        buckets = bucket_plan(model, params.get("bucket_bytes", 256))
        for x, y in zip(*make_batches(sizes, batch, steps, seed)):
            ddp_step(comm, model, x[rows], y[rows], (rows.stop - rows.start) / batch, lr, buckets, flat)
        w = model.parameters()
    every = comm.gather([q.tolist() for q in w], root=0)
    say(f"{params['steps']} steps done on every rank")
    return {"weights": every}


def task_pipeline(comm: Any, params: dict, say: Callable) -> dict:
    """GPipe steps for each m: every stage's busy intervals, and the largest difference between the
    stages' gradients and those of unsplit training (computed on rank 0, after the pipeline)."""
    sizes, batch = params["sizes"], params["batch"]
    xs, ys = make_batches(sizes, batch, 1, params.get("seed", 0))
    want = single_process_gradients(sizes, xs[0], ys[0], params.get("seed", 0)) if comm.Get_rank() == 0 else []
    runs = []
    for m in params["ms"]:
        best = None
        for _ in range(params.get("repeat", 1)):        # keep the fastest of the repeats' timelines
            grads, events = gpipe_step(comm, sizes, xs[0], ys[0], m, params.get("seed", 0))
            every = comm.gather(events, root=0)
            if comm.Get_rank() == 0:
                flat = [e for ev in every for e in ev]
                span = max(e["t1"] for e in flat) - min(e["t0"] for e in flat)
                if best is None or span < best[0]:
                    best = (span, flat)
        all_grads = comm.gather(grads, root=0)
        if comm.Get_rank() == 0:       # the oracle: one unsplit forward and backward on the whole batch
            got = [g for stage in all_grads for g in stage]
            diff = max(float(np.max(np.abs(g - w))) for g, w in zip(got, want))
            runs.append({"m": m, "events": best[1], "max_abs_diff": diff, "n_gradients": len(got)})
        say(f"m = {m} done")
    return {"runs": runs}


def task_tensor_parallel(comm: Any, params: dict, say: Callable) -> dict:
    """One tensor-parallel step of the block (W1 by columns, W2 by rows, the course's ring for each
    all-reduce); rank 0 gathers every rank's gradient slices, logits and input gradient."""
    sizes, batch, seed = params["sizes"], params["batch"], params.get("seed", 0)
    p, r = comm.Get_size(), comm.Get_rank()
    (shard,) = split_block(sizes, p, rank=r, seed=seed, activation=params.get("activation", "relu"))
    xs, ys = make_batches(sizes, batch, 1, seed)
    ring = ALLREDUCES["ring (course)"]
    loss, logits, dx = run_rank_step(rank_step(shard, xs[0], ys[0]), lambda v: ring(comm, v))
    every = comm.gather((shard, logits, dx, loss), root=0)
    say("one step done on every rank")
    if r:
        return {}
    grads = gather_gradients([s for s, *_ in every])
    return {"gradients": [g.tolist() for g in grads], "logits": [e[1].tolist() for e in every],
            "dx": [e[2].tolist() for e in every], "loss": [e[3] for e in every],
            "db2_equal_on_every_rank": all(np.array_equal(s.db2, every[0][0].db2) for s, *_ in every)}


def task_shard_collectives(comm: Any, params: dict, say: Callable) -> dict:
    """The course's ring reduce-scatter and all-gather against MPI's own ``Reduce_scatter`` and
    ``Allgatherv``, on random vectors of several lengths; whether every rank gathered identical bits."""
    p, r = comm.Get_size(), comm.Get_rank()
    checks = []
    for n in params["lengths"]:
        x = np.random.default_rng(100 * n + r).standard_normal(n)
        mine, want = ring_reduce_scatter_mpi(comm, x), mpi_reduce_scatter(comm, x)
        err = float(np.max(np.abs(mine - want), initial=0.0)) / max(1.0, float(np.max(np.abs(want), initial=0.0)))
        gathered = ring_all_gather_mpi(comm, mine, n)
        every = comm.gather((err, gathered, mpi_all_gather(comm, mine, n)), root=0)
        if r == 0:
            checks.append({"n": n, "p": p, "reduce_scatter_max_rel_error": max(e for e, _, _ in every),
                           "all_gather_equals_mpi": all(np.array_equal(g, w) for _, g, w in every),
                           "identical_on_every_rank": all(np.array_equal(g, every[0][1]) for _, g, _ in every)})
        say(f"checked n = {n:,}")
    return {"checks": checks}


def task_zero_train(comm: Any, params: dict, say: Callable) -> dict:
    """ZeRO training at one stage (:mod:`course.parallel.zero`) with the course's ring; rank 0 gathers every
    rank's own chunks, losses, peak and held bytes, and the bytes it sent (counted at ``Sendrecv``)."""
    p, r = comm.Get_size(), comm.Get_rank()
    sizes, steps, stage = params["sizes"], params["steps"], params["stage"]
    xs, ys = validate_data(sizes, np.array(params["x"]), np.array(params["y"]), steps)
    state = ZeroRank(stage, sizes, p, r, params.get("seed", 0), params.get("activation", "relu"))
    rows = shard(xs.shape[1], p, r)
    weight, counter = (rows.stop - rows.start) / xs.shape[1], ByteCounter(comm)
    losses = []
    for k, (x, y) in enumerate(zip(xs, ys)):
        losses.append(weight * drive(zero_rank_step(state, x[rows], y[rows], weight, params["lr"]),
                                     lambda c: mpi_collective(counter, c)))
        say(f"step {k + 1} of {steps} done")
    full = [state.held["param", j] for j in range(len(state.lengths))] if stage < 3 else []
    every = comm.gather((state.own_params(), losses, state.held.peak, state.held.now, counter.sent, full), root=0)
    if r:
        return {}
    return {"chunks": [[c.tolist() for c in e[0]] for e in every], "losses": np.sum([e[1] for e in every], 0).tolist(),
            "peak_bytes_per_rank": [e[2] for e in every], "held_bytes_per_rank": [e[3] for e in every],
            "bytes_sent_per_rank": [e[4] / steps for e in every],
            "ranks_agree": None if stage == 3 else all(np.array_equal(a, b) for e in every
                                                       for a, b in zip(e[5], every[0][5]))}


def task_sleep(comm: Any, params: dict, say: Callable) -> dict:
    """Sleep ``params["seconds"]`` on every rank, then meet at a barrier; rank ``params["die"]`` (if
    given) dies at once instead.  Lets the tests check that a hung run is killed and a dead rank reported."""
    say("sleeping")
    if comm.Get_rank() == params.get("die", -1):
        os._exit(3)
    time.sleep(params["seconds"])
    comm.Barrier()
    return {}


TASKS = {"ring_check": task_ring_check, "allreduce_timing": task_allreduce_timing,
         "data_parallel": task_data_parallel, "dp_timing": task_dp_timing, "pipeline": task_pipeline,
         "tensor_parallel": task_tensor_parallel, "tp_timing": task_tp_timing,
         "nccl_ring": task_nccl_ring, "shard_collectives": task_shard_collectives, "zero_train": task_zero_train,
         "zero_timing": task_zero_timing, "sleep": task_sleep}
assert tuple(TASKS) == TASK_NAMES, "course.parallel.mpi.TASK_NAMES must list the tasks of TASKS"


def main(argv: list[str]) -> int:
    """Run one task on this rank; rank 0 writes its result as JSON."""
    from mpi4py import MPI

    task, params_path, out_path = argv
    comm = MPI.COMM_WORLD
    with open(params_path, encoding="utf-8") as f:
        params = json.load(f)
    rank = comm.Get_rank()

    def say(text: str) -> None:
        if rank == 0:
            print(PROGRESS_PREFIX + text, flush=True)

    t0 = time.perf_counter()
    try:
        result = TASKS[task](comm, params, say)
    except BaseException as exc:        # one failing rank must end them all, not leave them waiting
        # the error in one line first: Abort can cut the traceback short, or interleave the ranks' lines
        print(f"rank {rank}: {type(exc).__name__}: {exc}", flush=True)
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        comm.Abort(1)
        raise
    if rank == 0:
        result.update(task=task, p=comm.Get_size(), seconds=time.perf_counter() - t0,
                      mpi_library=MPI.Get_library_version().splitlines()[0].strip(),
                      cores=os.cpu_count())
        tmp = out_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(result, f)
        os.replace(tmp, out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
