"""Lesson 06's experiments for ``python -m course report``: MPI all-reduces against message size and
p (with the α–β fit), data-parallel compute vs communication with and without DDP-style overlap,
GPipe's bubble against m, tensor against data parallelism for one MLP block, and ZeRO's stages.  They need MPI
(``pip install mpich mpi4py``); without it each records why."""

from __future__ import annotations

from collections.abc import Sequence

from ..plots import new_figure
from ..report import by_size, experiment
from ..results import ResultSet
from .mpi import mpi_unavailable_reason
from .plots import allreduce_timing_figure, data_parallel_figure, pipeline_figure, tensor_parallel_figure, zero_figure


def _no_mpi(name: str, devices: Sequence[str]) -> ResultSet | None:
    why = mpi_unavailable_reason()
    if why is None:
        return None
    rs = ResultSet(name)
    rs.notes.append(f"MPI unavailable: {why}")
    return _cpu_ranks(rs, devices)


def _cpu_ranks(rs: ResultSet, devices: Sequence[str]) -> ResultSet:
    """Say why a run asked for the GPU has no GPU records: the MPI ranks compute with NumPy."""
    if "gpu" in devices:
        rs.notes.append("No GPU records: the MPI ranks compute on the CPU with NumPy. A GPU all-reduce "
                        "goes through NCCL (course.parallel.nccl), which needs two GPUs or more.")
    return rs


def _message(rs: ResultSet):
    """A figure that says why there is nothing to draw (MPI missing)."""
    fig, (ax,) = new_figure(1, height=1.6)
    ax.text(0.5, 0.5, "\n".join(rs.notes) or "no records", ha="center", va="center", fontsize=9,
            color="0.3", transform=ax.transAxes, wrap=True)
    ax.axis("off")
    return fig


@experiment("allreduce_mpi", title="All-reduce on MPI ranks: the course's ring and naive vs MPI's Allreduce",
            lesson="06")
def allreduce_mpi(devices, quick, progress):
    """float64 vectors from 1 KB to 64 MB (16 MB when quick) on p = 2, 3, 4 MPI ranks: the course's
    ring (Sendrecv), the naive gather-add-broadcast and MPI's own Allreduce; the slowest rank's time
    per call; alpha and beta fitted to the ring and naive timings where every rank had a core."""
    rs = _no_mpi("allreduce_mpi", devices)
    if rs is not None:
        return rs
    from .timing import SIZES_BYTES, allreduce_sweep, fit_alpha_beta

    sizes = [b for b in SIZES_BYTES if b <= (2**24 if quick else 2**26)]
    rs = allreduce_sweep((2, 3, 4), sizes, repeat=3 if quick else 7, progress=None)
    fit = fit_alpha_beta(rs)
    rs.params.update(alpha_s=fit.alpha, beta_s_per_byte=fit.beta, fit_rel_rms=fit.rel_rms, fit_ps=list(fit.ps))
    return _cpu_ranks(rs, devices)


@allreduce_mpi.plot
def _(rs, references):
    from .model import AlphaBeta

    fit = AlphaBeta(rs.params["alpha_s"], rs.params["beta_s_per_byte"], len(rs.records),
                    rs.params["fit_rel_rms"], tuple(rs.params.get("fit_ps", ()))) if "alpha_s" in rs.params else None
    return allreduce_timing_figure(rs, fit) if rs.records else _message(rs)


@experiment("data_parallel_mpi", title="Data-parallel MLP training: compute vs communication, and DDP overlap",
            lesson="06")
def data_parallel_mpi(devices, quick, progress):
    """Lesson 01's MLP (float64) with the batch split over p = 1, 2, 3 ranks: forward + backward time,
    the ring all-reduce of the gradients, and a whole step with one all-reduce after backward against
    bucketed Iallreduces overlapped with backward (as PyTorch DDP does)."""
    rs = _no_mpi("data_parallel_mpi", devices)
    if rs is not None:
        return rs
    from .timing import data_parallel_timing

    return _cpu_ranks(data_parallel_timing((1, 2, 3), batch=128 if quick else 256, repeat=3 if quick else 7,
                                           progress=None), devices)


@data_parallel_mpi.plot
def _(rs, references):
    return data_parallel_figure(rs) if rs.records else _message(rs)


@experiment("pipeline_mpi", title="GPipe pipeline on MPI ranks: measured bubble vs (p-1)/(m+p-1)", lesson="06")
def pipeline_mpi(devices, quick, progress):
    """The MLP's six Linear layers split over p = 2 ranks, m = 1, 2, 4, 8 (16) micro-batches: every
    stage's busy intervals, the bubble measured from them and from the formula; gradients compared
    with unsplit training."""
    rs = _no_mpi("pipeline_mpi", devices)
    if rs is not None:
        return rs
    from .timing import pipeline_runs

    return _cpu_ranks(pipeline_runs(2, (1, 2, 4, 8) if quick else (1, 2, 4, 8, 16), repeat=2 if quick else 3,
                                    progress=None), devices)


@pipeline_mpi.plot
def _(rs, references):
    if not rs.records:
        return _message(rs)
    rec = max(rs.records, key=lambda r: r["m"])
    return pipeline_figure(rec["events"], rs.params["p"], rec["m"], measured=rs,
                           title=f"GPipe, p = {rs.params['p']}, m = {rec['m']}: measured bubble "
                                 f"{rec['bubble_measured']:.0%}, formula {rec['bubble_formula']:.0%}")


@experiment("tensor_parallel_mpi", title="Tensor against data parallelism for one MLP block on MPI ranks",
            lesson="06")
def tensor_parallel_mpi(devices, quick, progress):
    """The block 256-1024-256 (float64), batch 64, on p = 1, 2, 3 ranks: tensor parallel (W1 split by
    columns, W2 by rows, two ring all-reduces of activations per step) against data parallel (the
    batch split, one ring all-reduce of every gradient); a whole step and its all-reduces alone, the
    slowest rank's time, and the bytes each rank sends."""
    rs = _no_mpi("tensor_parallel_mpi", devices)
    if rs is not None:
        return rs
    from .timing import tensor_parallel_sweep

    return _cpu_ranks(tensor_parallel_sweep((1, 2, 3), repeat=3 if quick else 7, progress=None), devices)


@tensor_parallel_mpi.plot
def _(rs, references):
    return tensor_parallel_figure(rs) if rs.records else _message(rs)


@experiment("zero_mpi", title="ZeRO stages 0-3 on MPI ranks: bytes held per rank, bytes sent, step time", lesson="06")
def zero_mpi(devices, quick, progress):
    """Lesson 01's MLP 256-512-512-512-10 (about 0.66 M parameters; 128-256-256-10 when quick), float64 with
    Adam, batch 64, on p = 2, 3, 4 MPI ranks at ZeRO stages 0 (plain data parallelism) to 3 (FSDP): each
    rank's peak model-state bytes (measured) against ZeRO's formulas, the bytes it sent per step (counted at
    Sendrecv) against the ring's formula, and a step's time against its compute alone (slowest rank)."""
    rs = _no_mpi("zero_mpi", devices)
    if rs is not None:
        return rs
    from .timing import ZERO_SIZES, zero_sweep

    sizes = by_size(quick, ZERO_SIZES, [128, 256, 256, 10], [16, 32, 10])
    return _cpu_ranks(zero_sweep((2, 3, 4), sizes=sizes, batch=64, repeat=by_size(quick, 7, 3, 1), progress=None),
                      devices)


@zero_mpi.plot
def _(rs, references):
    return zero_figure(rs) if rs.records else _message(rs)
