"""Lesson 06: training on many workers, on a real MPI engine.

Read in this order:

* :mod:`~course.parallel.collectives`: all-reduce three ways (naive, tree, ring) on p simulated
  workers in numpy, one step at a time, with the bytes each worker sends;
* :mod:`~course.parallel.ring_mpi`: the same ring over MPI point-to-point messages (``Sendrecv``),
  checked against MPI's own ``Allreduce``; :mod:`~course.parallel.worker` is what every rank runs;
* :mod:`~course.parallel.data_parallel`: lesson 01's MLP trained on p ranks, each on a slice of the
  batch, gradients averaged by the ring; DDP-style buckets overlapped with backward;
* :mod:`~course.parallel.pipeline`: the MLP's layers split over p ranks, GPipe's micro-batches,
  every stage's busy intervals and the bubble;
* :mod:`~course.parallel.tensor_parallel`: one pair of layers split *inside* over p ranks (Megatron-LM's
  column- then row-parallel weights), one all-reduce forward and one backward; simulated and on MPI;
* :mod:`~course.parallel.zero`: ZeRO's stages 1, 2 and 3 (FSDP), data parallelism whose ranks each keep only a
  shard of Adam's moments, then of the gradients, then of the parameters, with the ring's reduce-scatter and
  all-gather; one generator for the simulated and the MPI ranks, every rank's bytes measured;
  :mod:`~course.parallel.zero_costs` is its formulas (bytes per rank, bytes sent, the α–β model's step time);
* :mod:`~course.parallel.mpi` starts ``mpiexec`` from Python (timeouts, clear errors) and
  :mod:`~course.parallel.runs` wraps each checking run with its oracle; :mod:`~course.parallel.model`
  is the α–β model, extrapolated;
* :mod:`~course.parallel.nccl`: the ring on several GPUs with NCCL (``cupyx.distributed``);
* :mod:`~course.parallel.timing`: the runs that time, the α–β fit to their times, and the timing
  tasks the ranks run;
* :mod:`~course.parallel.plots`, :mod:`~course.parallel.widgets`, :mod:`~course.parallel.checks`
  and :mod:`~course.parallel.experiments` (``python -m course report``).

Every rank imports this package, so it imports neither matplotlib nor ipywidgets: the plots and
widgets are their own modules (``from course.parallel import plots, widgets``).

>>> ring_allreduce(np.ones((4, 6))).result[0].tolist()
[4.0, 4.0, 4.0, 4.0, 4.0, 4.0]
"""

from __future__ import annotations

import numpy as np  # noqa: F401  (the doctest above)

from .collectives import (
    ALGORITHMS,
    AllreduceRun,
    allreduce,
    bytes_per_worker,
    chunk_bounds,
    message_counts,
    naive_allreduce,
    ring_all_gather,
    ring_allreduce,
    ring_chunks,
    ring_reduce_scatter,
    shard_chunks,
    tree_allreduce,
)
from .data_parallel import average_gradients, single_process_gradients, single_process_train
from .model import INTERCONNECTS, AlphaBeta, model_time
from .mpi import MPIError, cores, find_mpiexec, max_ranks, mpi_available, mpi_unavailable_reason, run_mpi
from .pipeline import bubble_fraction, ideal_timeline, measured_bubble
from .runs import ring_check, shard_collectives_check, sharded_train, tensor_parallel_check, train_data_parallel
from .tensor_parallel import data_parallel_bytes, simulate_tensor_parallel, tensor_parallel_bytes
from .timing import (
    allreduce_sweep,
    data_parallel_timing,
    fit_alpha_beta,
    pipeline_runs,
    tensor_parallel_sweep,
    zero_sweep,
)
from .zero import STAGES, adam_update, simulate_sharded, single_process_adam
from .zero_costs import zero_bytes_per_rank, zero_bytes_sent, zero_state_bytes, zero_step_model

__all__ = ["ALGORITHMS", "AllreduceRun", "allreduce", "naive_allreduce", "tree_allreduce", "ring_allreduce",
           "ring_chunks", "chunk_bounds", "bytes_per_worker", "message_counts",
           "average_gradients", "single_process_gradients", "single_process_train",
           "INTERCONNECTS", "AlphaBeta", "fit_alpha_beta", "model_time",
           "MPIError", "cores", "find_mpiexec", "max_ranks", "mpi_available", "mpi_unavailable_reason", "run_mpi",
           "bubble_fraction", "ideal_timeline", "measured_bubble",
           "ring_check", "allreduce_sweep", "train_data_parallel", "data_parallel_timing", "pipeline_runs",
           "simulate_tensor_parallel", "tensor_parallel_bytes", "data_parallel_bytes", "tensor_parallel_check",
           "tensor_parallel_sweep", "ring_reduce_scatter", "ring_all_gather", "shard_chunks", "STAGES", "adam_update",
           "sharded_train", "simulate_sharded", "single_process_adam", "shard_collectives_check", "zero_sweep",
           "zero_bytes_per_rank", "zero_state_bytes", "zero_bytes_sent", "zero_step_model"]
