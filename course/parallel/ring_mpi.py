"""The collectives of lesson 06 on real MPI processes: the code that runs *inside* each rank.

The ring here follows exactly the schedule of the simulation (:func:`course.parallel.collectives.ring_chunks`):
each step is one ``Sendrecv`` (send a chunk to the right-hand neighbour, receive one from the left
at the same time, so no pair of ranks can deadlock), then an add (reduce-scatter) or nothing more
(all-gather: the chunk was received straight into place).  The naive all-reduce uses plain
``Send``/``Recv`` to and from rank 0.  Both are checked against MPI's own ``Allreduce``.  The ring's two
halves alone, :func:`ring_reduce_scatter_mpi` and :func:`ring_all_gather_mpi` (ZeRO's collectives), follow
:func:`~course.parallel.collectives.shard_chunks` as their simulations do, checked against MPI's own
``Reduce_scatter`` and ``Allgatherv``.

These functions need ``mpi4py`` and a communicator; run them under ``mpiexec`` (see
:func:`course.parallel.mpi.run_mpi`), e.g. ``mpiexec -n 3 python -m course.parallel.worker ...``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..arguments import Given, Optional, arguments
from ..errors import BadInputError, shown_value
from .collectives import chunk_bounds, ring_chunks, shard_chunks, validate_length

__all__ = ["validate_comm", "validate_vector", "ring_allreduce_mpi", "naive_allreduce_mpi", "mpi_allreduce",
           "ALLREDUCES", "ring_reduce_scatter_mpi", "ring_all_gather_mpi", "mpi_reduce_scatter", "mpi_all_gather",
           "ByteCounter", "halves_allreduce_mpi", "mpi_halves_allreduce"]


def validate_comm(comm: Any) -> Any:
    """``comm`` if it is a communicator (``Get_size`` and ``Get_rank``: mpi4py's, or a :class:`ByteCounter`
    round one), or a clear error."""
    if not (callable(getattr(comm, "Get_size", None)) and callable(getattr(comm, "Get_rank", None))):
        raise BadInputError(f"comm must be an MPI communicator (mpi4py's MPI.COMM_WORLD, as the course's worker "
                            f"passes it), got {shown_value(comm)}; run these functions inside mpiexec ranks")
    return comm


def validate_vector(x: Any, what: str = "x", empty: bool = False) -> np.ndarray:
    """``x`` if it is a contiguous 1-D float numpy array (at least one element unless ``empty``), what the
    ring's ``Sendrecv`` sends in slices; or a clear error."""
    if not isinstance(x, np.ndarray) or x.ndim != 1 or x.dtype.kind != "f" or not x.flags.c_contiguous:
        raise BadInputError(f"{what} must be a contiguous 1-D numpy array of floats (one vector per rank, e.g. "
                            f"np.ascontiguousarray(v, dtype=np.float64).ravel()), got {shown_value(x)}")
    if not empty:
        validate_length(x.size, f"the length of {what}")
    return x


def _require_out(x: np.ndarray, out: np.ndarray | None) -> None:
    """``out`` must be shaped like ``x``: a longer or shorter one would take a broadcast copy, not the sum."""
    if out is not None and (out.shape != x.shape or out.dtype != x.dtype):
        raise BadInputError(f"out must have x's shape {x.shape} and dtype {x.dtype.name}, got shape {out.shape} "
                            f"and dtype {out.dtype.name}")


def _require_shard(comm: Any, shard: np.ndarray, n: int) -> None:
    """``shard`` must be exactly this rank's chunk of the n-vector (:func:`chunk_bounds`), not one broadcast."""
    bounds, r = chunk_bounds(n, comm.Get_size()), comm.Get_rank()
    want = int(bounds[r + 1] - bounds[r])
    if shard.shape != (want,):
        raise BadInputError(f"rank {r}'s shard of an n = {n:,} vector over {comm.Get_size()} ranks holds {want:,} "
                            f"elements (chunk_bounds(n, p)), got shape {shard.shape}")


def _require_gather(comm: Any, shard: np.ndarray, n: int, out: np.ndarray | None) -> None:
    _require_shard(comm, shard, n)
    if out is not None and out.shape != (n,):
        raise BadInputError(f"out must hold the gathered n = {n:,} elements, got shape {out.shape}")


_COMM = Given(validate_comm)
_X = Given(validate_vector)
_OUT = Optional(Given(validate_vector, what="out"))
_SHARD = Given(validate_vector, what="shard", empty=True)
_N = Given(validate_length, what="n (the length of the gathered vector)")


def _start(x: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """The buffer the all-reduce works in: a copy of ``x`` (in ``out`` when given)."""
    if out is None:
        return x.copy()
    np.copyto(out, x)
    return out


@arguments(comm=_COMM, x=_X, out=_OUT, then=_require_out)
def ring_allreduce_mpi(comm: Any, x: np.ndarray, out: np.ndarray | None = None,
                       reduce_scatter_chunks: Callable[[int, int, int], tuple[int, int]] | None = None) -> np.ndarray:
    """Sum ``x`` over every rank of ``comm`` with the ring: ``2 (p - 1)`` ``Sendrecv`` steps.

    ``x`` is a contiguous 1-D float array (the same length on every rank); the sum is written
    into ``out`` (a new array if None) and returned.  Every rank ends with identical bits: the
    all-gather copies each finished chunk, it never re-adds.  ``reduce_scatter_chunks(rank, step, p)
    -> (send, add)`` replaces :func:`~course.parallel.collectives.ring_chunks` in the reduce-scatter
    steps (the learner's exercise, run on real processes).
    """
    p, r = comm.Get_size(), comm.Get_rank()
    buf = _start(x, out)
    if p == 1:
        return buf
    bounds = chunk_bounds(buf.shape[0], p)
    right, left = (r + 1) % p, (r - 1) % p
    scratch = np.empty(int(np.max(np.diff(bounds))), dtype=buf.dtype)
    for step in range(2 * (p - 1)):
        chooser = reduce_scatter_chunks if (reduce_scatter_chunks and step < p - 1) else ring_chunks
        send, recv = (int(c) for c in chooser(r, step, p))
        lo, hi = bounds[recv], bounds[recv + 1]
        outgoing = buf[bounds[send]:bounds[send + 1]]
        if step < p - 1:                        # reduce-scatter: receive beside, then add
            incoming = scratch[:hi - lo]
            comm.Sendrecv(outgoing, dest=right, sendtag=step, recvbuf=incoming, source=left, recvtag=step)
            buf[lo:hi] += incoming
        else:                                   # all-gather: receive straight into place
            comm.Sendrecv(outgoing, dest=right, sendtag=step, recvbuf=buf[lo:hi], source=left,
                          recvtag=step)
    return buf


@arguments(comm=_COMM, x=_X, out=_OUT, then=_require_out)
def naive_allreduce_mpi(comm: Any, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Gather every vector at rank 0 one message at a time, add, send the sum back to each rank."""
    p, r = comm.Get_size(), comm.Get_rank()
    buf = _start(x, out)
    if r == 0:
        incoming = np.empty_like(buf)
        for src in range(1, p):
            comm.Recv(incoming, source=src, tag=1)
            buf += incoming
        for dst in range(1, p):
            comm.Send(buf, dest=dst, tag=2)
    else:
        comm.Send(buf, dest=0, tag=1)
        comm.Recv(buf, source=0, tag=2)
    return buf


@arguments(comm=_COMM, x=_X, out=_OUT, then=_require_out)
def mpi_allreduce(comm: Any, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """MPI's own ``Allreduce`` (sum): the oracle, and the time to beat."""
    from mpi4py import MPI

    buf = np.empty_like(x) if out is None else out
    comm.Allreduce(x, buf, op=MPI.SUM)
    return buf


# ---------------------------------------------------------------------------- the ring's two halves, alone

@arguments(comm=_COMM, x=_X)
def ring_reduce_scatter_mpi(comm: Any, x: np.ndarray) -> np.ndarray:
    """Rank r's chunk r (:func:`~course.parallel.collectives.chunk_bounds`) of the sum of ``x`` over the
    ranks: the ring's ``p - 1`` reduce-scatter steps, each one ``Sendrecv`` and an add.  ``x`` is a
    contiguous 1-D float array, the same length on every rank, and is left as it was."""
    p, r = comm.Get_size(), comm.Get_rank()
    bounds = chunk_bounds(x.shape[0], p)
    if p == 1:
        return x.copy()
    buf = x.copy()
    right, left = (r + 1) % p, (r - 1) % p
    scratch = np.empty(int(np.max(np.diff(bounds))), dtype=buf.dtype)
    for step in range(p - 1):
        send, recv = shard_chunks(r, step, p)
        incoming = scratch[:bounds[recv + 1] - bounds[recv]]
        comm.Sendrecv(buf[bounds[send]:bounds[send + 1]], dest=right, sendtag=step, recvbuf=incoming,
                      source=left, recvtag=step)
        buf[bounds[recv]:bounds[recv + 1]] += incoming
    return buf[bounds[r]:bounds[r + 1]].copy()


@arguments(comm=_COMM, shard=_SHARD, n=_N, out=_OUT, then=_require_gather)
def ring_all_gather_mpi(comm: Any, shard: np.ndarray, n: int, out: np.ndarray | None = None) -> np.ndarray:
    """The n-vector whose chunk c is rank c's ``shard``, on every rank: the ring's ``p - 1`` all-gather
    steps, each chunk received straight into place (into ``out`` when given)."""
    p, r = comm.Get_size(), comm.Get_rank()
    bounds = chunk_bounds(n, p)
    buf = np.empty(n, dtype=shard.dtype) if out is None else out
    buf[bounds[r]:bounds[r + 1]] = shard
    right, left = (r + 1) % p, (r - 1) % p
    for step in range(p - 1, 2 * (p - 1)):
        send, recv = shard_chunks(r, step, p)
        comm.Sendrecv(buf[bounds[send]:bounds[send + 1]], dest=right, sendtag=step,
                      recvbuf=buf[bounds[recv]:bounds[recv + 1]], source=left, recvtag=step)
    return buf


@arguments(comm=_COMM, x=_X)
def mpi_reduce_scatter(comm: Any, x: np.ndarray) -> np.ndarray:
    """MPI's own ``Reduce_scatter`` (sum) with the course's chunks: the oracle."""
    from mpi4py import MPI

    bounds = chunk_bounds(x.shape[0], comm.Get_size())
    out = np.empty(int(bounds[comm.Get_rank() + 1] - bounds[comm.Get_rank()]), dtype=x.dtype)
    comm.Reduce_scatter(x, out, recvcounts=np.diff(bounds).tolist(), op=MPI.SUM)
    return out


@arguments(comm=_COMM, shard=_SHARD, n=_N, then=_require_shard)
def mpi_all_gather(comm: Any, shard: np.ndarray, n: int) -> np.ndarray:
    """MPI's own ``Allgatherv`` of the ranks' chunks: the oracle."""
    bounds = chunk_bounds(n, comm.Get_size())
    out = np.empty(n, dtype=shard.dtype)
    comm.Allgatherv(np.ascontiguousarray(shard), [out, (np.diff(bounds).tolist(), bounds[:-1].tolist())])
    return out


class ByteCounter:
    """``comm`` as it is, counting the bytes this rank sends through ``Sendrecv`` (``sent``): what the
    ring's messages really carried, measured at the MPI call rather than taken from a formula."""

    @arguments(comm=_COMM)
    def __init__(self, comm: Any):
        self.comm, self.sent = comm, 0

    def Get_size(self) -> int:
        return self.comm.Get_size()

    def Get_rank(self) -> int:
        return self.comm.Get_rank()

    def Sendrecv(self, sendbuf: np.ndarray, **kwargs: Any) -> None:
        self.sent += int(np.asarray(sendbuf).nbytes)
        self.comm.Sendrecv(sendbuf, **kwargs)


@arguments(comm=_COMM, x=_X, out=_OUT, then=_require_out)
def halves_allreduce_mpi(comm: Any, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """An all-reduce as ZeRO's two collectives: the course's ring reduce-scatter, then its all-gather."""
    return ring_all_gather_mpi(comm, ring_reduce_scatter_mpi(comm, x), x.shape[0], out)


@arguments(comm=_COMM, x=_X, out=_OUT, then=_require_out)
def mpi_halves_allreduce(comm: Any, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The same with MPI's own ``Reduce_scatter`` and ``Allgatherv``: the time to beat."""
    gathered = mpi_all_gather(comm, mpi_reduce_scatter(comm, x), x.shape[0])
    if out is None:
        return gathered
    np.copyto(out, gathered)
    return out


#: Name -> function, as the timing runs and the plots name them.
ALLREDUCES = {"ring (course)": ring_allreduce_mpi, "naive (course)": naive_allreduce_mpi,
              "MPI Allreduce": mpi_allreduce, "reduce-scatter + all-gather (course)": halves_allreduce_mpi,
              "MPI Reduce_scatter + Allgatherv": mpi_halves_allreduce}
