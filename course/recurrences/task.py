"""Training the selective layer on the adding problem: remember two numbers far apart, add them.

The *adding problem* (Hochreiter & Schmidhuber 1997) is a classic test of memory over time.  Each
step carries two inputs: a number drawn uniformly from [0, 1] and a marker, 1 at exactly two steps
(one in each half of the sequence) and 0 elsewhere.  The target, read at the last step, is the
sum of the two marked numbers.  Always answering the mean (1.0) leaves a mean squared error of
about 1/6, the variance of the sum; a model that finds the marked numbers does much better.  For
the selective layer this means: write (Δ large) where the marker is 1, hold (Δ ≈ 0) elsewhere.

>>> x, y = adding_problem(T=10, batch=4, seed=0)
>>> x.shape, y.shape, x[:, :, 1].sum(axis=0).tolist()
((10, 4, 2), (4, 1), [2.0, 2.0, 2.0, 2.0])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..arguments import Dtype, Given, OneOf, Real, Whole, arguments
from ..devices import get_xp, normalize_device, to_numpy
from ..errors import BadInputError, whole_number
from ..limits import require_fits
from .selective import PARAM_NAMES, init_params, loss_and_grads

__all__ = ["adding_problem", "TrainingRun", "validate_training_run", "train_adding", "BASELINE_MSE"]

#: The mean squared error of always answering 1.0: the variance of a sum of two U(0, 1) numbers.
BASELINE_MSE = 1 / 6
MAX_TRAIN_STEPS = 20_000  # Adam steps train_adding may take (each is a forward and a backward)


@arguments(T=Whole(2, hint="one marker in each half"), batch=Whole(hint="sequences per batch"),
           seed=Whole(0, hint="a whole number such as 0"), device=Given(normalize_device),
           dtype=Dtype(device="device", floating=True))
def adding_problem(T: int = 32, batch: int = 64, seed: int = 0, dtype: Any = "float64",
                   device: Any = "cpu") -> tuple[Any, Any]:
    """Inputs ``(T, batch, 2)`` (number, marker) and targets ``(batch, 1)`` of the adding problem."""
    require_fits(8 * 5 * T * batch, "cpu", what=f"an adding problem of T={T:,} steps x batch {batch:,}")
    rng = np.random.default_rng(seed)
    values = rng.uniform(0, 1, (T, batch))
    marks = np.zeros((T, batch))
    cols = np.arange(batch)
    first, second = rng.integers(0, T // 2, batch), rng.integers(T // 2, T, batch)
    marks[first, cols] = marks[second, cols] = 1
    target = (values[first, cols] + values[second, cols])[:, None]
    xp = get_xp(device)
    return xp.asarray(np.stack([values, marks], -1), dtype=dtype), xp.asarray(target, dtype=dtype)


@dataclass
class TrainingRun:
    """What :func:`train_adding` did: the loss after every step, and the trained parameters."""

    T: int
    n: int
    losses: list = field(default_factory=list)
    test_loss: float = float("nan")
    params: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.T = whole_number("T", self.T, 2, hint="the adding problem's steps: one marker in each half")
        self.n = whole_number("n", self.n, hint="the state size")

    @property
    def improvement(self) -> float:
        """Baseline MSE (always answer 1.0) divided by the test loss: above 1 means it learned."""
        return BASELINE_MSE / self.test_loss


def validate_training_run(run: Any) -> TrainingRun:
    """``run`` if it is a :class:`TrainingRun` that trained (what :func:`train_adding` returns), or a clear error."""
    if not isinstance(run, TrainingRun):
        raise BadInputError(f"run must be a TrainingRun, what train_adding(...) returns; got {type(run).__name__}")
    if not len(run.losses):
        raise BadInputError("the run holds no losses: train it first with train_adding(...)")
    return run


def _adam(params: dict, grads: dict, state: dict, lr: float, beta1=0.9, beta2=0.999, eps=1e-8) -> None:
    state["t"] = state.get("t", 0) + 1
    for k in PARAM_NAMES:
        m = state.setdefault(("m", k), 0 * grads[k])
        v = state.setdefault(("v", k), 0 * grads[k])
        m[...] = beta1 * m + (1 - beta1) * grads[k]
        v[...] = beta2 * v + (1 - beta2) * grads[k] ** 2
        m_hat, v_hat = m / (1 - beta1 ** state["t"]), v / (1 - beta2 ** state["t"])
        params[k] -= lr * m_hat / ((v_hat ** 0.5) + eps)


@arguments(T=Whole(2, hint="one marker in each half"), n=Whole(hint="the state size"),
           steps=Whole(1, MAX_TRAIN_STEPS, hint="training steps"), batch=Whole(hint="sequences per batch"),
           lr=Real(above=0, hi=1.0, hint="Adam's step size; 0.001 to 0.05 trains this layer"),
           seed=Whole(0, hint="a whole number such as 0"), method=OneOf("scan", "loop"),
           device=Given(normalize_device))
def train_adding(T: int = 32, n: int = 16, steps: int = 300, batch: int = 64, lr: float = 0.02,
                 seed: int = 0, method: str = "scan", device: Any = "cpu",
                 progress: Callable | None = None) -> TrainingRun:
    """Train the selective layer on fresh batches of the adding problem with Adam.

    Every step draws a new batch (no example is seen twice); the test loss is measured on a
    held-out batch of 512 sequences at the end.  Forward and backward both run by ``method``
    (``"scan"`` or ``"loop"``).  A loss that stops being finite (an ``lr`` so large that the steps
    overshoot) stops the training with a message saying so, instead of training on NaN.

    >>> run = train_adding(T=8, n=4, steps=3, batch=8)
    >>> len(run.losses)
    3
    """
    params = init_params(2, n, 1, seed=seed, device=device)
    run = TrainingRun(T=T, n=n, params=params)
    state: dict = {}
    it = range(steps)
    for step in (progress(it, total=steps, desc="training") if progress else it):
        x, y = adding_problem(T, batch, seed=seed * 100_003 + step + 1, device=device)
        loss, grads = loss_and_grads(params, x, y, method)
        if not np.isfinite(loss):
            raise BadInputError(f"training diverged: the loss became {loss} at step {step + 1} of {steps} (after "
                                f"{run.losses[-1]:.3g} at the step before), so lr = {lr:g} is too large for this "
                                "layer: each step overshoots. Try lr = 0.02, or ten times smaller."
                                if run.losses else
                                f"the loss is {loss} before any training: check the inputs (T = {T}, n = {n}).")
        run.losses.append(loss)
        _adam(params, grads, state, lr)
    x, y = adding_problem(T, 512, seed=seed * 100_003 + 10**9, device=device)
    run.test_loss = loss_and_grads(params, x, y, method)[0]
    run.params = {k: to_numpy(v) for k, v in params.items()}
    return run
