"""What a setting of lesson 03's apps will cost before it runs: each costly measurement's rate is
measured once at a small size on this CPU (:func:`course.widgets.measured_rate`), and the counted
work of a setting over that rate estimates its seconds.  The apps refuse, or shrink, a setting that
would take longer than :data:`course.widgets.WIDGET_LIMIT_S`, and say so.
"""

from __future__ import annotations

from ..widgets import WIDGET_LIMIT_S, estimate_s, measured_rate
from .batch import DEFAULT_MLP_SIZES
from .ops import OPS

__all__ = ["POINT_CALLS", "POINT_RATE_N", "SWEEP_CALLS", "OP_RATE_N", "ASYNC_RATE_WORK", "FUSION_RATE_N",
           "op_work", "op_rate", "sweep_sizes_within", "async_cost_s", "fusion_cost_s", "point_flops",
           "point_rate"]

#: Calls one roofline point makes at the least, however slow: a warm-up and one timed call.
POINT_CALLS = 2
#: The costly points (their work grows faster than their data) and the small size their rate is measured at.
POINT_RATE_N = {"matmul": 256, "mlp step": 64}

#: Calls one size of a sweep makes at the least: filling the inputs, a warm-up and one timed call.
SWEEP_CALLS = 3
OP_RATE_N = {"matmul": 128}      # the elementwise ops: 2^22 elements (past the caches, as big sweeps are)


def op_work(op: str, n: int) -> float:
    """The unit an op's rate is counted in: FLOPs (2n³) for ``matmul``, elements for the others."""
    return OPS[op].flops(n) if op == "matmul" else float(n)


def op_rate(op: str, dtype: str) -> float:
    """Units of :func:`op_work` per second of ``op`` in ``dtype`` on this CPU, measured once at a small size."""
    import numpy as np

    n = OP_RATE_N.get(op, 2 ** 22)
    if op == "matmul":
        a = np.full((n, n), 0.5, dtype=dtype)
        out = np.empty_like(a)
        fn = lambda: np.matmul(a, a, out=out)  # noqa: E731
    else:
        x, out = np.full(n, 2.0 ** -12, dtype=dtype), np.empty(n, dtype=dtype)   # a sum that fits float16
        fn = {"add": lambda: np.add(x, x, out=out), "relu": lambda: np.maximum(x, 0, out=out),
              "sum": lambda: x.sum()}[op]
    return measured_rate(("op", op, dtype), op_work(op, n), fn)


def sweep_sizes_within(op: str, sizes: list[int], dtype: str,
                       limit_s: float = WIDGET_LIMIT_S) -> tuple[list[int], tuple[int, float] | None]:
    """The ascending ``sizes`` whose CPU sweep fits in ``limit_s`` (estimated: :data:`SWEEP_CALLS` calls of the
    counted work at :func:`op_rate`), and ``(first size left out, its estimated seconds)``, or None."""
    total = 0.0
    for i, n in enumerate(sizes):
        cost = estimate_s(SWEEP_CALLS * op_work(op, n), op_rate(op, dtype))
        if total + cost > limit_s:
            return sizes[:i], (n, cost)
        total += cost
    return sizes, None


ASYNC_RATE_WORK = 8 * 2 ** 20    # a chain of 8 operations on 2^20 elements


def async_cost_s(n: int, chain: int) -> float:
    """Estimated seconds of the CPU measurement: operations × elements over the rate of the same measurement
    (warm-up and timed calls, waiting and not) made once for a chain of 8 on 2^20 elements."""
    from .latency import async_chain as measure  # the module's own (the app's name may be replaced in tests)

    rate = measured_rate(("async chain",), ASYNC_RATE_WORK, lambda: measure(
        "cpu", n=2 ** 20, chain=8, repeat=1, budget_s=1e-3))
    return estimate_s(max(chain * n, ASYNC_RATE_WORK), rate)


FUSION_RATE_N = 2 ** 20     # past the caches, like the big sizes


def fusion_cost_s(n: int, steps: int, dtype: str) -> float:
    """Estimated seconds of the CPU comparison at ``n``: the least it runs (a warm-up and one timed call of
    every mode), scaled linearly from the same comparison timed once at 2^20 elements."""
    from .fusion import fusion_compare as compare  # the module's own (the app's name may be replaced in tests)

    ref = measured_rate(("fusion", int(steps), str(dtype)), FUSION_RATE_N, lambda: compare(
        n=FUSION_RATE_N, steps=steps, dtype=dtype, devices=["cpu"], repeat=1, budget_s=1e-3))
    return estimate_s(max(n, FUSION_RATE_N), ref)


def point_flops(op: str, n: int) -> float:
    """Counted FLOPs of one call of a costly roofline point (``matmul``: 2n³; ``mlp step``: a step at batch n)."""
    if op == "matmul":
        return OPS["matmul"].flops(n)
    from ..backprop.widgets import step_flops

    return step_flops(list(DEFAULT_MLP_SIZES), n)


def point_rate(op: str, dtype: str) -> float:
    """FLOP/s of a costly point on this CPU in ``dtype``, measured once at a small size."""
    import numpy as np

    n = 128 if op == "matmul" and dtype == "float16" else POINT_RATE_N[op]
    if op == "matmul":
        a = np.full((n, n), 0.5, dtype=dtype)
        out = np.empty_like(a)
        return measured_rate(("roofline", op, dtype), point_flops(op, n), lambda: np.matmul(a, a, out=out))
    from ..backprop import MLP

    model = MLP(list(DEFAULT_MLP_SIZES), dtype=dtype, seed=0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, DEFAULT_MLP_SIZES[0])).astype(dtype)
    y = rng.integers(0, DEFAULT_MLP_SIZES[-1], size=n)
    return measured_rate(("roofline", op, dtype), point_flops(op, n), lambda: model.train_step(x, y, 1e-12))
