"""The all-reduces of lesson 06 on real MPI processes: the code that runs *inside* each rank.

The ring here follows exactly the schedule of the simulation (:func:`course.parallel.collectives.ring_chunks`):
each step is one ``Sendrecv`` (send a chunk to the right-hand neighbour, receive one from the left
at the same time, so no pair of ranks can deadlock), then an add (reduce-scatter) or nothing more
(all-gather: the chunk was received straight into place).  The naive all-reduce uses plain
``Send``/``Recv`` to and from rank 0.  Both are checked against MPI's own ``Allreduce``.

These functions need ``mpi4py`` and a communicator; run them under ``mpiexec`` (see
:func:`course.parallel.mpi.run_mpi`), e.g. ``mpiexec -n 3 python -m course.parallel.worker ...``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .collectives import chunk_bounds, ring_chunks

__all__ = ["ring_allreduce_mpi", "naive_allreduce_mpi", "mpi_allreduce", "ALLREDUCES"]


def _start(x: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """The buffer the all-reduce works in: a copy of ``x`` (in ``out`` when given)."""
    if out is None:
        return x.copy()
    np.copyto(out, x)
    return out


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


def mpi_allreduce(comm: Any, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """MPI's own ``Allreduce`` (sum): the oracle, and the time to beat."""
    from mpi4py import MPI

    buf = np.empty_like(x) if out is None else out
    comm.Allreduce(x, buf, op=MPI.SUM)
    return buf


#: Name -> function, as the timing runs and the plots name them.
ALLREDUCES = {"ring (course)": ring_allreduce_mpi, "naive (course)": naive_allreduce_mpi,
              "MPI Allreduce": mpi_allreduce}
