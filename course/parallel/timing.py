"""Lesson 06's measurements: the MPI runs that time, the α–β fit to their times, the ranks' timing tasks.

:func:`allreduce_sweep`, :func:`data_parallel_timing`, :func:`pipeline_runs` and :func:`tensor_parallel_sweep`
start ``mpiexec`` (:func:`course.parallel.mpi.run_mpi`) and return a :class:`~course.results.ResultSet`
whose records name the rank count and whether the ranks were oversubscribed (more ranks than cores);
:func:`fit_alpha_beta` fits the α–β model (:mod:`course.parallel.model`) to one.  In the ``task_*`` (run
by :mod:`course.parallel.worker`) every rank times the same calls with :func:`course.timing.benchmark`,
one BLAS thread, a fixed number of repeats and never a time budget (the ranks must all make the same
calls or a collective would hang); each timed call starts with a barrier, and a collective's time is
the *slowest* rank's, per repeat.  :func:`task_nccl_ring` times the ring on GPUs with CUDA events.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..arguments import Given, Optional, Whole, Wholes, arguments
from ..errors import BadInputError, shown_value
from ..limits import require_fits
from ..results import ResultSet, validate_results
from ..timing import Timing, benchmark
from .collectives import chunk_bounds
from .data_parallel import (
    bucket_plan,
    ddp_step,
    flat_gradients,
    make_batches,
    require_batch_splits,
    shard,
    validate_callable,
    validate_sizes,
)
from .model import AlphaBeta, model_terms, validate_model_algorithm
from .mpi import cores, oversubscribed, run_mpi
from .nccl import ring_allreduce_nccl
from .pipeline import bubble_fraction, measured_bubble, stage_bounds
from .ring_mpi import ALLREDUCES, ByteCounter, validate_comm
from .runs import Progress
from .tensor_parallel import (
    column_bounds,
    data_parallel_bytes,
    rank_step,
    run_rank_step,
    split_block,
    tensor_parallel_bytes,
    validate_block,
)
from .zero import STAGES, Collective, ZeroRank, drive, layer_lengths, mpi_collective
from .zero import rank_step as zero_rank_step
from .zero_costs import zero_bytes_sent, zero_state_bytes

__all__ = ["SIZES_BYTES", "DP_SIZES", "PIPE_SIZES", "TP_SIZES", "ZERO_SIZES", "allreduce_sweep",
           "data_parallel_timing", "pipeline_runs", "tensor_parallel_sweep", "zero_sweep", "fit_alpha_beta",
           "task_allreduce_timing", "task_dp_timing", "task_tp_timing", "task_zero_timing", "task_nccl_ring"]

#: Message sizes of the full sweep: 1 KB to 64 MB.
SIZES_BYTES = [2**k for k in range(10, 27, 2)]
#: The MLP the data-parallel timings train (lesson 01's kind, wide enough for the compute to matter).
DP_SIZES = [256, 512, 512, 512, 10]
#: The MLP the pipeline splits: six Linear layers, five of equal width, so 2 and 3 stages are nearly balanced.
PIPE_SIZES = [256, 256, 256, 256, 256, 256, 10]
#: The block tensor parallelism splits: one wide hidden layer (a transformer's MLP is 4x its width).
TP_SIZES = [256, 1024, 256]
#: The MLP the ZeRO timings train: about 0.66 M parameters, 21 MB of model states per rank at stage 0.
ZERO_SIZES = [256, 512, 512, 512, 10]
#: The most timed repeats an MPI run takes (each rank repeats the whole measurement).
MAX_MPI_REPEAT = 1000


_RANKS = Wholes(hint="ps lists the rank counts to run")
_REPEAT = Whole(1, MAX_MPI_REPEAT, hint="timed runs on every rank")


def _note(rs: ResultSet, ps: Sequence[int]) -> None:
    over = [p for p in ps if oversubscribed(p)]
    if over:
        rs.notes.append(f"Oversubscribed: this machine has {cores()} cores, so the runs with "
                        f"p = {', '.join(map(str, over))} ranks shared cores and their times are stretched.")


@arguments(ps=_RANKS, nbytes=Wholes(8, hint="message sizes are float64 vectors, so at least 8 bytes"),
           repeat=_REPEAT)
def allreduce_sweep(ps: Sequence[int] = (2, 3, 4), nbytes: Sequence[int] = tuple(SIZES_BYTES),
                    algorithms: Sequence[str] = ("ring (course)", "naive (course)", "MPI Allreduce"),
                    repeat: int = 3, timeout_s: float = 300, progress: Progress = print) -> ResultSet:
    """Time the three MPI all-reduces for each message size (float64 vectors) on p ranks, each p."""
    require_fits(4 * max(ps) * max(nbytes), "cpu", what=f"{max(ps)} ranks' messages")
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


@arguments(ps=_RANKS, sizes=Given(validate_sizes), batch=Whole(), repeat=_REPEAT,
           bucket_bytes=Whole(hint="bytes of gradients per bucket"))
def data_parallel_timing(ps: Sequence[int] = (1, 2, 3), sizes: Sequence[int] = tuple(DP_SIZES),
                         batch: int = 256, repeat: int = 5, bucket_bytes: int = 2**20,
                         timeout_s: float = 300, progress: Progress = print) -> ResultSet:
    """Per step on p ranks: compute, ring communication, and whole DDP steps without/with overlap."""
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


@arguments(sizes=Given(validate_sizes), batch=Whole(), repeat=_REPEAT,
           ms=Wholes(hi="batch", hint="each is a number of micro-batches cut from the batch"))
def pipeline_runs(p: int = 2, ms: Sequence[int] = (1, 2, 4, 8), sizes: Sequence[int] = tuple(PIPE_SIZES),
                  batch: int = 512, repeat: int = 2, timeout_s: float = 120,
                  progress: Progress = print) -> ResultSet:
    """GPipe on ``p`` stages for each micro-batch count m: timelines, bubbles, gradient check.

    Each record: ``m``, ``bubble_measured`` (from the recorded intervals), ``bubble_formula``
    (``(p-1)/(m+p-1)``), ``max_abs_diff`` of the gradients against unsplit training, the span of the
    step, and ``events`` (every stage's busy intervals).
    """
    stage_bounds(len(sizes) - 1, p)                      # a clear error before anything starts
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


@arguments(ps=_RANKS, sizes=Given(validate_block), batch=Whole(hint="samples per step"), repeat=_REPEAT)
def tensor_parallel_sweep(ps: Sequence[int] = (1, 2, 3), sizes: Sequence[int] = tuple(TP_SIZES), batch: int = 64,
                          repeat: int = 5, timeout_s: float = 300, progress: Progress = print) -> ResultSet:
    """Tensor against data parallelism for the same block and batch on p ranks, each p: a whole step
    and its all-reduces alone (the course's ring), the slowest rank's time; the bytes each rank sends
    per step (``bytes_sent``, from the ring's formula, which the simulation's count matches)."""
    for p in ps:
        column_bounds(sizes[1], p)
        require_batch_splits(batch, p)
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


@arguments(ps=_RANKS, stages=Wholes(0, 3, hint="ZeRO stages, 0 (plain data parallelism) to 3"),
           sizes=Given(validate_sizes), batch=Whole(hint="samples per step, split over the ranks"), repeat=_REPEAT)
def zero_sweep(ps: Sequence[int] = (2, 3, 4), stages: Sequence[int] = STAGES, sizes: Sequence[int] = tuple(ZERO_SIZES),
               batch: int = 64, repeat: int = 5, timeout_s: float = 300, progress: Progress = print) -> ResultSet:
    """ZeRO's stages on p ranks, each p: a whole step (the course's ring) and the same step with every collective
    answered locally (``part="compute"``), the slowest rank's time; the bytes each rank sent per step
    (counted at ``Sendrecv``; ``bytes_formula`` the ring's), its peak and held model-state bytes, and the
    formula's (``state_formula``: what the busiest rank holds between steps)."""
    for p in ps:
        require_batch_splits(batch, p)
    require_fits(4 * max(ps) * (32 * sum(layer_lengths(sizes)) + 8 * batch * max(sizes)), "cpu",
                 what=f"{max(ps)} ranks' model states for an MLP {list(sizes)}")
    rs = ResultSet("zero_mpi", params={"ps": list(ps), "stages": list(stages), "sizes": list(sizes), "batch": batch,
                                       "repeat": repeat, "n_params": sum(layer_lengths(sizes)), "cores": cores()})
    for p in ps:
        out = run_mpi("zero_timing", p, {"stages": list(stages), "sizes": list(sizes), "batch": batch,
                                         "repeat": repeat}, timeout_s, progress)
        for rec in out["records"]:
            st = rec["stage"]
            rs.add(**rec, p=p, bytes_formula=zero_bytes_sent(st, sizes, p), oversubscribed=oversubscribed(p),
                   state_formula=max(zero_state_bytes(st, sizes, p, r) for r in range(p)))
    _note(rs, ps)
    return rs


def _validate_fit_algorithms(algorithms: Any) -> list[str]:
    """The timings' labels to fit, each one of the α–β model's algorithms (``"ring (course)"``, ``"naive ..."``)."""
    if isinstance(algorithms, (str, bytes)) or not isinstance(algorithms, Sequence) or not algorithms:
        raise BadInputError(f"algorithms must list the timings' labels to fit, e.g. ['ring (course)', 'naive "
                            f"(course)'], got {shown_value(algorithms)}")
    for a in algorithms:
        validate_model_algorithm(a)
    return list(algorithms)


def _validate_params(params: Any) -> dict:
    if not isinstance(params, dict):
        raise BadInputError(f"params must be the dict of the task's parameters (run_mpi writes it), got "
                            f"{shown_value(params)}")
    return params


_TASK = {"comm": Given(validate_comm), "params": Given(_validate_params), "say": Given(validate_callable, what="say")}


def _nonnegative_lstsq(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    """argmin ||a·c − y|| over c >= 0, for two columns: the plain least-squares answer when it is
    non-negative, else the better of the two one-column fits (the optimum then lies on an edge)."""
    coef = np.linalg.lstsq(a, y, rcond=None)[0]
    if (coef >= 0).all():
        return coef
    best, best_res = np.zeros(2), float(y @ y)
    for k in range(2):
        col = a[:, k]
        c = max(float(col @ y) / float(col @ col), 0.0) if col @ col > 0 else 0.0
        res = float(np.sum((y - c * col) ** 2))
        if res < best_res:
            best, best_res = np.eye(2)[k] * c, res
    return best


@arguments(rs=Given(validate_results, what="rs"), algorithms=Given(_validate_fit_algorithms),
           ps=Optional(Wholes(hint="the rank counts to fit to")))
def fit_alpha_beta(rs: ResultSet, algorithms: Sequence[str] = ("ring (course)", "naive (course)"),
                   ps: Sequence[int] | None = None) -> AlphaBeta:
    """Fit one α and one β to the timings of the given algorithms in ``rs`` (every size).

    ``ps``: the rank counts to fit to; by default those that were not oversubscribed (a rank that
    waits for a core is not the link's latency), or every p when all were.  Minimises the squared
    *relative* error (times span several decades), with α, β >= 0.
    """
    if ps is None:
        fair = {r["p"] for r in rs.records if r.get("algorithm") in algorithms and not r.get("oversubscribed")}
        ps = fair or {r.get("p") for r in rs.records}
    rows, times = [], []
    for r in rs.records:
        if r.get("algorithm") in algorithms and r.get("p") in ps:
            lat, b = model_terms(r["algorithm"].split()[0], r["p"], r["nbytes"])
            rows.append((lat, b))
            times.append(r["median_s"])
    if len(rows) < 2:
        raise BadInputError(f"fitting α and β needs at least two timings of {list(algorithms)}; "
                            f"the result set has {len(rows)}.")
    a = np.array(rows, dtype=float)
    t = np.array(times, dtype=float)
    scale = np.array([1e-6, 1e-9])                 # work in µs and ns/byte: a well-scaled system
    alpha, beta = _nonnegative_lstsq(a * scale / t[:, None], np.ones_like(t)) * scale
    pred = a @ np.array([alpha, beta])
    rel = float(np.sqrt(np.mean(((pred - t) / t) ** 2)))
    return AlphaBeta(float(alpha), float(beta), len(t), rel, tuple(sorted(ps)))


def _slowest(comm: Any, t: Timing, per_call: int = 1) -> dict:
    """The collective's time: for each repeat, the slowest rank's (divided by the calls timed)."""
    every = comm.allgather((t.samples / per_call, t.load))
    worst = np.max(np.vstack([samples for samples, _ in every]), axis=0)
    loads = [load for _, load in every if load is not None]
    tm = Timing(samples=worst, device="cpu", name=t.name, warmup=t.warmup, threads=t.threads,
                load=max(loads) if loads else None)
    return tm.as_record()


@arguments(**_TASK)
def task_allreduce_timing(comm: Any, params: dict, say: Callable) -> dict:
    """Time the ring, the naive all-reduce and MPI's ``Allreduce`` for each message size."""
    r = comm.Get_rank()
    records = []
    sizes = params["nbytes"]
    for k, nbytes in enumerate(sizes):
        n = max(1, nbytes // 8)
        x = np.random.default_rng(r).standard_normal(n)
        out = np.empty_like(x)
        inner = int(max(1, min(16, 2**16 // nbytes)))       # small messages: time several per call
        for name in params["algorithms"]:
            fn = ALLREDUCES[name]

            def calls(fn=fn, x=x, out=out, inner=inner):
                comm.Barrier()
                for _ in range(inner):
                    fn(comm, x, out)
            t = benchmark(calls, warmup=1, repeat=params["repeat"], name=name, blas_threads=1)
            rec = _slowest(comm, t, inner)
            records.append({"algorithm": name, "nbytes": n * 8, **rec})
        say(f"{k + 1}/{len(sizes)} sizes timed ({nbytes:,} bytes)")
    return {"records": records}


@arguments(**_TASK)
def task_dp_timing(comm: Any, params: dict, say: Callable) -> dict:
    """Per step: compute (forward + backward) vs communication (ring all-reduce of the gradients),
    then a whole step without and with DDP-style bucketed, overlapped all-reduces."""
    from ..backprop.layers import MLP

    p, r = comm.Get_size(), comm.Get_rank()
    sizes, batch, repeat = params["sizes"], params["batch"], params["repeat"]
    model = MLP(sizes, dtype="float64", seed=0)
    xs, ys = make_batches(sizes, batch, 1, 0)
    rows = shard(batch, p, r)
    x, y = xs[0][rows], ys[0][rows]
    weight = (rows.stop - rows.start) / batch
    flat = np.empty(model.n_parameters())
    total = np.empty_like(flat)
    ring = ALLREDUCES["ring (course)"]

    def compute():
        comm.Barrier()
        flat_gradients(model, x, y, weight, out=flat)

    def communicate():
        comm.Barrier()
        ring(comm, flat, total)

    out = {"n_parameters": int(flat.size), "gradient_bytes": int(flat.nbytes), "records": []}
    for part, fn in (("compute", compute), ("communicate (ring)", communicate)):
        out["records"].append({"part": part, **_slowest(comm, benchmark(fn, repeat=repeat, name=part, blas_threads=1))})
    say("compute and communication timed")
    for label, buckets in (("one all-reduce after backward", None),
                           ("bucketed, overlapped with backward", bucket_plan(model, params["bucket_bytes"]))):
        def step(buckets=buckets):
            comm.Barrier()
            ddp_step(comm, model, x, y, weight, 1e-6, buckets, flat)
        rec = _slowest(comm, benchmark(step, repeat=repeat, name=label, blas_threads=1))
        out["records"].append({"part": f"step: {label}", "buckets": len(buckets or [0]), **rec})
    say("DDP steps timed")
    return out


@arguments(**_TASK)
def task_tp_timing(comm: Any, params: dict, say: Callable) -> dict:
    """The same block trained one step at a time, two ways: tensor parallel (every rank the whole
    batch, a slice of the weights, two all-reduces of activations) and data parallel (every rank the
    whole weights, a slice of the batch, one all-reduce of every gradient); each step and its
    communication alone timed.  Both compute the input's gradient (a block inside a deeper network)."""
    from ..backprop.layers import MLP, softmax_cross_entropy, softmax_cross_entropy_backward

    p, r = comm.Get_size(), comm.Get_rank()
    sizes, batch, repeat = params["sizes"], params["batch"], params["repeat"]
    xs, ys = make_batches(sizes, batch, 1, 0)
    x, y = xs[0], ys[0]
    ring = ALLREDUCES["ring (course)"]
    (piece,) = split_block(sizes, p, rank=r)
    acts = [np.empty(batch * sizes[2]), np.empty(batch * sizes[0])]      # the two all-reduces' vectors
    model = MLP(sizes, dtype="float64", seed=0)
    rows = shard(batch, p, r)
    flat = np.empty(model.n_parameters())
    total = np.empty_like(flat)

    def tp_step():
        comm.Barrier()
        run_rank_step(rank_step(piece, x, y), lambda v: ring(comm, v))

    def tp_communicate():
        comm.Barrier()
        for v in acts:
            ring(comm, v, np.empty_like(v))

    def dp_step():
        comm.Barrier()
        loss, cache = softmax_cross_entropy(model.forward(x[rows]), y[rows])
        model.backward(softmax_cross_entropy_backward(cache), need_input_grad=True)
        np.concatenate([g.ravel() for g in model.gradients()], out=flat)
        np.multiply(flat, (rows.stop - rows.start) / batch, out=flat)
        ring(comm, flat, total)

    def dp_communicate():
        comm.Barrier()
        ring(comm, flat, total)

    records = []
    for scheme, part, fn, nbytes in (("tensor", "step", tp_step, 8 * sum(v.size for v in acts)),
                                     ("tensor", "communicate", tp_communicate, 8 * sum(v.size for v in acts)),
                                     ("data", "step", dp_step, flat.nbytes),
                                     ("data", "communicate", dp_communicate, flat.nbytes)):
        t = benchmark(fn, warmup=1, repeat=repeat, name=f"{scheme} parallel: {part}", blas_threads=1)
        records.append({"scheme": scheme, "part": part, "allreduced_bytes": int(nbytes), **_slowest(comm, t)})
        say(f"{scheme} parallel: {part} timed")
    return {"records": records}


@arguments(**_TASK)
def task_nccl_ring(comm: Any, params: dict, say: Callable) -> dict:
    """The ring on GPUs (:mod:`course.parallel.nccl`), inside rank r: bind GPU r, join NCCL, check the
    ring against NCCL's all_reduce, time both."""
    import cupy
    import cupyx.distributed
    from mpi4py import MPI

    p, r = comm.Get_size(), comm.Get_rank()
    cupy.cuda.Device(r).use()
    nc = cupyx.distributed.init_process_group(p, r, use_mpi=True)
    out: dict[str, Any] = {"checks": [], "records": []}
    for nbytes in params["nbytes"]:
        n = max(1, nbytes // 4)
        x = cupy.asarray(np.random.default_rng(r).standard_normal(n).astype(np.float32))
        got, want = cupy.empty_like(x), cupy.empty_like(x)
        ring_allreduce_nccl(nc, p, r, x, got)
        nc.all_reduce(x, want)
        err = float(cupy.max(cupy.abs(got - want)).get()) / max(1.0, float(cupy.max(cupy.abs(want)).get()))
        out["checks"].append({"nbytes": n * 4, "max_rel_error": comm.allreduce(err, op=MPI.MAX)})
        for name, fn, args in (("ring (course, NCCL send/recv)", ring_allreduce_nccl, (nc, p, r, x, got)),
                               ("NCCL all_reduce", nc.all_reduce, (x, want))):
            comm.Barrier()
            t = benchmark(fn, *args, device="gpu", warmup=2, repeat=params.get("repeat", 10), name=name)
            worst = float(np.max(comm.allgather(t.median)))
            out["records"].append({"device": "gpu", "algorithm": name, "nbytes": n * 4, "p": p, "median_s": worst})
        say(f"{nbytes:,} bytes done")
    return out


def _local(c: Collective, p: int, r: int) -> np.ndarray:
    """Rank r's answer to a collective without a message (the shapes right, the values not): to time the
    compute alone."""
    if c.kind == "all-gather":
        return np.resize(c.data, c.n)
    bounds = chunk_bounds(c.n, p)
    return c.data[bounds[r]:bounds[r + 1]].copy() if c.kind == "reduce-scatter" else c.data.copy()


@arguments(**_TASK)
def task_zero_timing(comm: Any, params: dict, say: Callable) -> dict:
    """For each stage: a ZeRO step with the course's ring, and the same step with its collectives answered
    locally; the slowest rank's times, the bytes each rank sent in one step and its peak bytes (the most)."""
    from mpi4py import MPI

    p, r = comm.Get_size(), comm.Get_rank()
    sizes, batch, repeat = params["sizes"], params["batch"], params["repeat"]
    xs, ys = make_batches(sizes, batch, 1, 0)
    rows = shard(batch, p, r)
    x, y, weight = xs[0][rows], ys[0][rows], (rows.stop - rows.start) / batch
    records = []
    for stage in params["stages"]:
        state, counter = ZeroRank(stage, sizes, p, r), ByteCounter(comm)

        def step(answer, state=state):
            comm.Barrier()
            drive(zero_rank_step(state, x, y, weight, 1e-6), answer)
        step(lambda c, counter=counter: mpi_collective(counter, c))           # one step counted, untimed
        sent, peak = (comm.allreduce(v, op=MPI.MAX) for v in (counter.sent, state.held.peak))
        for part, answer in (("step", lambda c: mpi_collective(comm, c)), ("compute", lambda c: _local(c, p, r))):
            t = benchmark(step, answer, warmup=1, repeat=repeat, name=f"stage {stage}: {part}", blas_threads=1)
            records.append({"stage": stage, "part": part, "bytes_sent": sent, "peak_bytes": peak,
                            **_slowest(comm, t)})
        say(f"stage {stage} timed")
    return {"records": records}
