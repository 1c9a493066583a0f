"""What a setting of lesson 03's apps will cost before it runs: the counted work of each costly measurement,
and a probe that does the same kind of work at a small size.  The apps (:mod:`course.throughput.widgets`)
time each probe once on this CPU; the counted work of a setting over that rate estimates its seconds, and
they refuse, or shrink, a setting that would take longer than their limit, and say so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..arguments import Dtype, Given, OneOf, Real, Whole, Wholes, arguments
from ..backprop import MLP
from ..backprop.counting import mlp_flops
from .batch import DEFAULT_MLP_SIZES
from .fusion import validate_steps
from .ops import OPS

__all__ = ["POINT_CALLS", "POINT_RATE_N", "SWEEP_CALLS", "OP_RATE_N", "ASYNC_RATE_WORK", "FUSION_RATE_N",
           "op_work", "op_probe", "sweep_sizes_within", "async_probe", "fusion_probe", "point_flops",
           "point_probe"]

#: Calls one roofline point makes at the least, however slow: a warm-up and one timed call.
POINT_CALLS = 2
#: The costly points (their work grows faster than their data) and the small size their rate is measured at.
POINT_RATE_N = {"matmul": 256, "mlp step": 64}

#: Calls one size of a sweep makes at the least: filling the inputs, a warm-up and one timed call.
SWEEP_CALLS = 3
OP_RATE_N = {"matmul": 128}      # the elementwise ops: 2^22 elements (past the caches, as big sweeps are)

#: A probe: (its counted work, a call that does it).
Probe = tuple[float, Callable[[], Any]]


_OP, _N = OneOf(*OPS), Whole(hint="the size of the operation")


@arguments(op=_OP, n=_N)
def op_work(op: str, n: int) -> float:
    """The unit an op's rate is counted in: FLOPs (2n³) for ``matmul``, elements for the others."""
    return OPS[op].flops(n) if op == "matmul" else float(n)


@arguments(op=_OP, dtype=Dtype())
def op_probe(op: str, dtype: str) -> Probe:
    """``op`` in ``dtype`` at a small size, its work in :func:`op_work`'s units."""
    n = OP_RATE_N.get(op, 2 ** 22)
    if op == "matmul":
        a = np.full((n, n), 0.5, dtype=dtype)
        out = np.empty_like(a)
        return op_work(op, n), lambda: np.matmul(a, a, out=out)
    x, out = np.full(n, 2.0 ** -12, dtype=dtype), np.empty(n, dtype=dtype)   # a sum that fits float16
    return op_work(op, n), {"add": lambda: np.add(x, x, out=out), "relu": lambda: np.maximum(x, 0, out=out),
                            "sum": lambda: x.sum()}[op]


@arguments(op=_OP, sizes=Wholes(min_len=0, hint="ascending operation sizes"),
           rate=Real(above=0, hint="work per second, in op_work's units"), limit_s=Real(lo=0, hint="seconds"))
def sweep_sizes_within(op: str, sizes: list[int], rate: float,
                       limit_s: float) -> tuple[list[int], tuple[int, float] | None]:
    """The ascending ``sizes`` whose CPU sweep fits in ``limit_s`` (:data:`SWEEP_CALLS` calls of the counted
    work at ``rate``, in :func:`op_work`'s units per second), and ``(first size left out, its estimated
    seconds)``, or None."""
    total = 0.0
    for i, n in enumerate(sizes):
        cost = SWEEP_CALLS * op_work(op, n) / rate
        if total + cost > limit_s:
            return sizes[:i], (n, cost)
        total += cost
    return sizes, None


ASYNC_RATE_WORK = 8 * 2 ** 20    # a chain of 8 operations on 2^20 elements


def async_probe() -> Probe:
    """The CPU measurement of an async chain (warm-up and timed calls, waiting and not) for a chain of 8 on
    2^20 elements, its work counted as operations × elements."""
    from .latency import async_chain as measure  # the module's own (the app's name may be replaced in tests)

    return ASYNC_RATE_WORK, lambda: measure("cpu", n=2 ** 20, chain=8, repeat=1, budget_s=1e-3)


FUSION_RATE_N = 2 ** 20     # past the caches, like the big sizes


@arguments(steps=Given(validate_steps), dtype=Dtype(floating=True))
def fusion_probe(steps: int, dtype: str) -> Probe:
    """The least the CPU comparison of fusion runs (a warm-up and one timed call of every mode) at 2^20
    elements, its work counted in elements."""
    from .fusion import fusion_compare as compare  # the module's own (the app's name may be replaced in tests)

    return FUSION_RATE_N, lambda: compare(n=FUSION_RATE_N, steps=steps, dtype=dtype, devices=["cpu"], repeat=1,
                                          budget_s=1e-3)


@arguments(op=OneOf(*POINT_RATE_N), n=_N)
def point_flops(op: str, n: int) -> float:
    """Counted FLOPs of one call of a costly roofline point (``matmul``: 2n³; ``mlp step``: a step at batch n)."""
    return OPS["matmul"].flops(n) if op == "matmul" else mlp_flops(list(DEFAULT_MLP_SIZES), n)


@arguments(op=OneOf(*POINT_RATE_N), dtype=Dtype(floating=True))
def point_probe(op: str, dtype: str) -> Probe:
    """A costly roofline point in ``dtype`` at a small size, its work in FLOPs."""
    n = 128 if op == "matmul" and dtype == "float16" else POINT_RATE_N[op]
    if op == "matmul":
        a = np.full((n, n), 0.5, dtype=dtype)
        out = np.empty_like(a)
        return point_flops(op, n), lambda: np.matmul(a, a, out=out)
    model = MLP(list(DEFAULT_MLP_SIZES), dtype=dtype, seed=0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, DEFAULT_MLP_SIZES[0])).astype(dtype)
    y = rng.integers(0, DEFAULT_MLP_SIZES[-1], size=n)
    return point_flops(op, n), lambda: model.train_step(x, y, 1e-12)
