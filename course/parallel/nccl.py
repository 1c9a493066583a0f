"""The ring on GPUs: NCCL through ``cupyx.distributed``, one MPI rank per GPU.

On a machine where two or more GPUs answer, :func:`nccl_ring_check` starts one MPI rank per GPU
(through :func:`course.parallel.mpi.run_mpi`); each rank binds its own GPU, joins an NCCL
communicator (``cupyx.distributed.init_process_group``, using MPI for the rendezvous) and runs

* the course's ring over NCCL point-to-point messages (send right and receive from the left in one
  NCCL group, so the pair never deadlocks), the very schedule of :func:`course.parallel.collectives.ring_chunks`;
* NCCL's own ``all_reduce`` (itself a ring, or a tree, chosen by NCCL),

checks that they agree and times both with CUDA events (:func:`course.parallel.timing.task_nccl_ring`).
With fewer than two GPUs it raises a clear error and nothing is started: the course never pretends
one GPU is two.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..arguments import Given, Optional, Real, Whole, Wholes, arguments
from ..devices import gpu_info, gpu_unavailable_reason
from ..errors import GPUUnavailableError
from .collectives import chunk_bounds, ring_chunks, validate_workers
from .data_parallel import validate_callable

__all__ = ["gpus_answering", "nccl_unavailable_reason", "ring_allreduce_nccl", "nccl_ring_check"]


def gpus_answering() -> int:
    """How many GPUs answered a real device call here."""
    return len(gpu_info())


@arguments(p=Given(validate_workers))
def nccl_unavailable_reason(p: int = 2) -> str | None:
    """Why an NCCL run on p GPUs cannot happen here (None when it can)."""
    n = gpus_answering()
    if n >= p >= 2:
        return None
    if n == 0:
        return f"no GPU answers here ({gpu_unavailable_reason()}); NCCL needs two or more GPUs."
    return f"{n} GPU(s) answer here; an NCCL all-reduce over p = {p} needs p >= 2 GPUs."


@arguments(p=Given(validate_workers), r=Whole(0, "p - 1", hint="this rank, one of the p GPUs"))
def ring_allreduce_nccl(comm: Any, p: int, r: int, x: Any, out: Any = None) -> Any:
    """The course's ring on a ``cupyx.distributed`` NCCL communicator of p GPUs, from rank r."""
    import cupy
    from cupy.cuda import nccl

    buf = x.copy() if out is None else out
    if out is not None:
        buf[...] = x
    if p == 1:
        return buf
    bounds = chunk_bounds(int(buf.shape[0]), p)
    scratch = cupy.empty(int(np.max(np.diff(bounds))), dtype=buf.dtype)
    right, left = (r + 1) % p, (r - 1) % p
    for step in range(2 * (p - 1)):
        send, recv = ring_chunks(r, step, p)
        lo, hi = int(bounds[recv]), int(bounds[recv + 1])
        target = scratch[:hi - lo] if step < p - 1 else buf[lo:hi]
        nccl.groupStart()
        comm.send(buf[int(bounds[send]):int(bounds[send + 1])], right)
        comm.recv(target, left)
        nccl.groupEnd()
        if step < p - 1:
            buf[lo:hi] += target
    return buf


@arguments(p=Whole(2, 1024, hint="GPUs, one MPI rank each: NCCL's ring needs two or more"),
           nbytes=Wholes(4, hint="message sizes in bytes: float32 vectors, so at least 4"),
           repeat=Whole(1, 1000, hint="timed runs on every rank"), timeout_s=Real(above=0, hint="seconds"),
           progress=Optional(Given(validate_callable, what="progress")))
def nccl_ring_check(p: int = 2, nbytes: tuple[int, ...] = (2**12, 2**20, 2**24), repeat: int = 10,
                    timeout_s: float = 300, progress: Callable | None = print) -> dict:
    """Run :func:`course.parallel.timing.task_nccl_ring` on ``p`` GPUs (one MPI rank each); raises without
    p GPUs."""
    from .mpi import run_mpi

    why = nccl_unavailable_reason(p)
    if why:
        raise GPUUnavailableError(why)
    return run_mpi("nccl_ring", p, {"nbytes": list(nbytes), "repeat": repeat}, timeout_s, progress)
