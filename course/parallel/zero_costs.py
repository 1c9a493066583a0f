"""ZeRO's costs as formulas, to set beside the measurements of :mod:`course.parallel.zero`: the model-state
bytes each rank holds, the bytes it sends per step, and the α–β model's time for those bytes against the
time of the arithmetic (when does a step turn communication-bound?).

Memory (Rajbhandari et al., 2020): with Ψ parameters, each stage divides one more term by the p ranks:

=========  ===================  ==================  =====================
stage      parameters           gradients           Adam's two moments
=========  ===================  ==================  =====================
0 (DP)     8Ψ                   8Ψ                  16Ψ
1          8Ψ                   8Ψ                  16Ψ / p
2          8Ψ                   8Ψ / p              16Ψ / p
3 (FSDP)   8Ψ / p               8Ψ / p              16Ψ / p
=========  ===================  ==================  =====================

in float64 (every number 8 bytes; the paper's mixed precision counts 2 + 2 + 12 bytes per parameter).
Traffic: per layer, a reduce-scatter or an all-gather of its ``n`` numbers sends ``(p - 1) / p · n`` of them
from each rank (half the ring all-reduce); stages 0-2 send two such halves per layer, stage 3 three.

>>> zero_bytes_sent(2, [4, 8, 3], 4) == zero_bytes_sent(0, [4, 8, 3], 4)
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..arguments import Given, Real, Whole, arguments
from ..backprop.counting import mlp_flops
from .collectives import chunk_bounds, validate_workers
from .data_parallel import validate_sizes
from .model import model_time
from .zero import ITEMSIZE, STAGES, layer_lengths, validate_stage

__all__ = ["HALVES", "zero_bytes_per_rank", "zero_state_bytes", "in_flight_bytes", "collective_counts",
           "zero_bytes_sent", "zero_step_model"]

#: Each layer's ring halves (a reduce-scatter or an all-gather) per step, by stage: an all-reduce is two.
HALVES = {0: 2, 1: 2, 2: 2, 3: 3}
_STAGE = Given(validate_stage)


@arguments(stage=_STAGE, n_params=Whole(hint="Ψ, the model's parameters"), p=Given(validate_workers),
           param_bytes=Real(lo=0), grad_bytes=Real(lo=0), optimizer_bytes=Real(lo=0))
def zero_bytes_per_rank(stage: int, n_params: int, p: int, param_bytes: float = 8, grad_bytes: float = 8,
                        optimizer_bytes: float = 16) -> float:
    """ZeRO's model-state bytes per rank (Rajbhandari et al., 2020, figure 1).  The defaults count float64
    with Adam (8 + 8 + 16 bytes per parameter); the paper's mixed precision is ``2, 2, 12``.

    >>> [zero_bytes_per_rank(s, 7_500_000_000, 64, 2, 2, 12) / 1e9 for s in (0, 1, 2, 3)]
    [120.0, 31.40625, 16.640625, 1.875]
    """
    return n_params * (param_bytes / (p if stage >= 3 else 1) + grad_bytes / (p if stage >= 2 else 1)
                       + optimizer_bytes / (p if stage >= 1 else 1))


def _owned(sizes: Sequence[int], p: int, rank: int) -> int:
    return sum(int(np.diff(chunk_bounds(n, p))[rank]) for n in layer_lengths(sizes))


@arguments(stage=_STAGE, sizes=Given(validate_sizes), p=Given(validate_workers),
           rank=Whole(0, "p - 1", hint="ranks are numbered 0 .. p - 1"))
def zero_state_bytes(stage: int, sizes: Sequence[int], p: int, rank: int) -> int:
    """The formula with rank ``rank``'s exact chunks (Ψ/p rounded as :func:`chunk_bounds` cuts each layer):
    what it holds between steps, float64 with Adam.

    >>> zero_state_bytes(0, [4, 8, 3], 2, 0) == 32 * 67, zero_state_bytes(3, [4, 8, 3], 2, 0) == 32 * (20 + 13)
    (True, True)
    """
    total, own = sum(layer_lengths(sizes)), _owned(sizes, p, rank)
    return ITEMSIZE * ((own if stage >= 3 else total) + (own if stage >= 2 else total)
                       + 2 * (own if stage >= 1 else total))


@arguments(stage=_STAGE, sizes=Given(validate_sizes))
def in_flight_bytes(stage: int, sizes: Sequence[int]) -> int:
    """The most a step holds *above* :func:`zero_state_bytes` for a moment: one layer's whole gradient before
    its reduce-scatter (stages 2 and 3), and its gathered parameters beside it (stage 3); a bound.

    >>> in_flight_bytes(3, [4, 8, 3]) == 2 * 8 * 40
    True
    """
    return ITEMSIZE * max(layer_lengths(sizes)) * {0: 0, 1: 0, 2: 1, 3: 2}[stage]


@arguments(stage=_STAGE, sizes=Given(validate_sizes))
def collective_counts(stage: int, sizes: Sequence[int]) -> dict:
    """The collectives of one step, one per layer each: ``{"all-reduce", "reduce-scatter", "all-gather"}`` -> calls.

    >>> collective_counts(3, [4, 8, 8, 3])
    {'all-reduce': 0, 'reduce-scatter': 3, 'all-gather': 6}
    """
    layers = len(sizes) - 1
    return {"all-reduce": layers if stage == 0 else 0, "reduce-scatter": layers if stage else 0,
            "all-gather": {0: 0, 1: layers, 2: layers, 3: 2 * layers}[stage]}


@arguments(stage=_STAGE, sizes=Given(validate_sizes), p=Given(validate_workers),
           itemsize=Whole(hint="bytes per number, 8 for float64"))
def zero_bytes_sent(stage: int, sizes: Sequence[int], p: int, itemsize: int = ITEMSIZE) -> float:
    """Bytes each rank sends per step, the ring's formula: ``(p - 1) / p`` of each layer per reduce-scatter or
    all-gather; two per layer in stages 0-2, three in stage 3.  (The simulation's count differs by less
    than a chunk per collective where p does not divide a layer.)

    >>> zero_bytes_sent(3, [4, 8, 3], 2) / zero_bytes_sent(0, [4, 8, 3], 2)
    1.5
    """
    return HALVES[stage] * (p - 1) / p * sum(layer_lengths(sizes)) * itemsize


@arguments(stage=_STAGE, sizes=Given(validate_sizes), batch=Whole(hint="samples per step, over all ranks"),
           p=Given(validate_workers), alpha=Real(lo=0, hint="seconds per message"),
           beta=Real(lo=0, hint="seconds per byte"), flops_per_s=Real(above=0, hint="the arithmetic rate"))
def zero_step_model(stage: int, sizes: Sequence[int], batch: int, p: int, alpha: float, beta: float,
                    flops_per_s: float) -> dict:
    """A MODEL of one step on p ranks: the busiest rank's forward and backward on ``ceil(batch / p)`` samples
    at ``flops_per_s``, against its collectives under the α–β model (each ring half is half of
    :func:`~course.parallel.model.model_time`'s all-reduce), nothing overlapped.  Adam's own arithmetic,
    a few operations per owned number, is left out.  Returns seconds and which one bounds the step.

    >>> m = zero_step_model(3, [1024] * 5, batch=64, p=8, alpha=1e-5, beta=1e-10, flops_per_s=1e11)
    >>> m["bound"], round(m["communication_s"] / m["compute_s"], 2)
    ('communication', 5.23)
    """
    comm = HALVES[stage] * sum(model_time("ring", p, ITEMSIZE * n, alpha, beta) / 2 for n in layer_lengths(sizes))
    compute = mlp_flops(sizes, math.ceil(batch / p)) / flops_per_s
    return {"stage": stage, "p": p, "compute_s": compute, "communication_s": comm,
            "bound": "communication" if comm > compute else "compute"}


assert set(HALVES) == set(STAGES)
