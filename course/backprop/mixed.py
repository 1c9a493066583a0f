"""Lesson 01: mixed-precision training of the MLP, as the frameworks do it (Micikevicius et al., 2018).

A float16 number has 5 exponent bits: the smallest normal value is 2^-14 (about 6.1e-5) and the
smallest subnormal 2^-24 (about 6.0e-8); anything smaller rounds to zero.  Gradients are often that
small, so training in float16 needs three things, each here:

* **float32 master weights**: the update ``w -= lr · g`` is made on a float32 copy, because in float16 a
  small update to a large weight is lost to rounding; each step starts by rounding the master weights
  to float16;
* **float32 accumulation**: every matrix product takes float16 inputs, adds in float32 and rounds its
  result to float16, as a tensor core does; the loss (softmax and log) is computed in float32;
* **loss scaling**: the loss's gradient is multiplied by a scale S before the backward pass, so that
  small gradients land inside float16's range, and the float32 gradients are divided by S before the
  update.  *Static* scaling fixes S; *dynamic* scaling (PyTorch's ``GradScaler``) starts high, skips the
  step and halves S when a gradient overflows to inf or NaN, and doubles S after a run of clean steps.

bfloat16 keeps float32's 8 exponent bits and 7 mantissa bits (float16 has 10): its range is
float32's, so nothing underflows and no scaling is needed, but each value carries about 3 significant
digits.  NumPy has no bfloat16; ``ml_dtypes`` gives it a real one.

The teaching MLP (:class:`~course.backprop.MLP`) is left alone: :func:`mixed_precision_train` trains a
copy of it, one rounding to the compute type after every operation.  On a CPU this arithmetic is
emulated and *slower* than float32: the speed of reduced precision is a GPU's tensor cores (lesson 03).

>>> from course.backprop import MLP
>>> rng = np.random.default_rng(0)
>>> x, y = rng.standard_normal((32, 8)), rng.integers(0, 3, 32)
>>> run = mixed_precision_train(MLP([8, 16, 3], seed=0), x, y, steps=5, lr=0.1, precision="float16 scaled")
>>> len(run["losses"]), run["skipped"]
(5, 0)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..arguments import Given, OneOf, Optional, Real, Seed, Whole, arguments
from ..errors import BadInputError
from ..limits import require_fits
from .layers import MLP, softmax_cross_entropy, softmax_cross_entropy_backward
from .optimizers import OPTIMIZERS, optimizer_state, update
from .validate import validate_labels

__all__ = ["PRECISIONS", "LossScaler", "mixed_precision_train", "compute_dtype", "FLOAT16_MIN_NORMAL",
           "FLOAT16_MIN_SUBNORMAL", "underflow_share"]

#: The four ways to train: float32 throughout; float16 compute without and with (dynamic) loss scaling;
#: bfloat16 compute.  The last three keep float32 master weights and accumulate products in float32.
PRECISIONS = ("float32", "float16", "float16 scaled", "bfloat16")
FLOAT16_MIN_NORMAL = 2.0 ** -14
FLOAT16_MIN_SUBNORMAL = 2.0 ** -24


@arguments(precision=OneOf(*PRECISIONS))
def compute_dtype(precision: str) -> np.dtype:
    """The dtype a precision computes in: float32, float16 or ``ml_dtypes.bfloat16``."""
    if precision == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype("float32" if precision == "float32" else "float16")


class LossScaler:
    """Loss scaling: ``scale`` multiplies the loss's gradient before the backward pass.

    ``dynamic=True`` is PyTorch's ``GradScaler``: a step whose unscaled gradients hold an inf or NaN is
    skipped and the scale halved (``backoff``); after ``growth_interval`` clean steps in a row the scale
    doubles (``growth``).  ``dynamic=False`` keeps the scale fixed and never skips.

    >>> s = LossScaler(2.0**16, growth_interval=2)
    >>> [s.update(bad) for bad in (True, False, False, False)], s.scale
    ([True, False, False, False], 65536.0)
    """

    @arguments(scale=Real(above=0, hint="the loss scale, e.g. 2.0**16 (0 would scale every gradient to 0)"),
               dynamic=OneOf(True, False), growth=Real(lo=1, hint="the factor after a run of clean steps (>= 1)"),
               backoff=Real(above=0, hi=1, hint="the factor after an overflow, in (0, 1]: 0.5 halves the scale"),
               growth_interval=Whole(hint="clean steps before the scale grows"))
    def __init__(self, scale: float = 2.0 ** 16, dynamic: bool = True, growth: float = 2.0, backoff: float = 0.5,
                 growth_interval: int = 2000):
        self.scale, self.dynamic = float(scale), bool(dynamic)
        self.growth, self.backoff, self.growth_interval = float(growth), float(backoff), int(growth_interval)
        self.clean = 0

    def update(self, found_inf: bool) -> bool:
        """After a step's gradients are checked: True when the step must be skipped; the scale adapts."""
        if not self.dynamic:
            return False
        if found_inf:
            self.scale *= self.backoff
            self.clean = 0
            return True
        self.clean += 1
        if self.clean >= self.growth_interval:
            self.scale *= self.growth
            self.clean = 0
        return False


def _mm(a: np.ndarray, b: np.ndarray, ct: np.dtype) -> np.ndarray:
    """A product as a tensor core makes it: ``ct`` inputs, float32 accumulation, the result rounded to ``ct``
    (a value past ``ct``'s range becomes inf: the overflow that dynamic loss scaling watches for)."""
    return (a.astype(np.float32) @ b.astype(np.float32)).astype(ct)


def _activate(h: np.ndarray, activation: str, ct: np.dtype) -> np.ndarray:
    """The model's activation of ``h`` (in ``ct``), computed in float32 and rounded to ``ct``, as a GPU's
    elementwise kernel does (the sigmoid as ``(1 + tanh(h / 2)) / 2``, as the teaching MLP computes it)."""
    if activation == "relu":
        return np.maximum(h, 0).astype(ct)
    h32 = h.astype(np.float32)
    out = np.tanh(h32) if activation == "tanh" else np.tanh(h32 * np.float32(0.5)) * np.float32(0.5) + np.float32(0.5)
    return out.astype(ct)


def _activation_backward(dh: np.ndarray, a: np.ndarray, activation: str) -> np.ndarray:
    """d loss / d (the activation's input), in float32, from ``dh`` and the activation's output ``a``."""
    if activation == "relu":
        return np.where(a > 0, dh, 0).astype(np.float32)            # the ReLU's mask, in ct
    a32 = a.astype(np.float32)
    slope = 1 - a32 * a32 if activation == "tanh" else a32 * (1 - a32)
    return (dh.astype(np.float32) * slope).astype(np.float32)


def _step(params: list[np.ndarray], x: np.ndarray, y: np.ndarray, ct: np.dtype, scale: float,
          probe: list | None, weight: float = 1.0, activation: str = "relu") -> tuple[float, list[np.ndarray]]:
    """One forward and backward in ``ct`` from float32 master ``params``: the float32 loss and the
    float32 gradients, still multiplied by ``scale``.  ``probe`` collects each gradient as float32
    before it is rounded to ``ct`` (for the underflow histogram)."""
    Ws, bs = [p.astype(ct) for p in params[0::2]], [p.astype(ct) for p in params[1::2]]
    h, acts = x.astype(ct), []
    for j, (W, b) in enumerate(zip(Ws, bs)):
        acts.append(h)
        h = _mm(h, W, ct) + b                          # the add rounds to ct
        if j < len(Ws) - 1:
            h = _activate(h, activation, ct)
    loss, cache = softmax_cross_entropy(h.astype(np.float32), y)      # the loss in float32
    g32 = softmax_cross_entropy_backward(cache) * np.float32(scale * weight)
    grads: list[np.ndarray] = []
    for j in range(len(Ws) - 1, -1, -1):
        if probe is not None:
            probe.append(np.asarray(g32, np.float32).ravel())
        g = g32.astype(ct)                              # what the backward pass really holds
        dW, db = _mm(acts[j].T, g, ct), g.astype(np.float32).sum(axis=0).astype(ct)
        grads[:0] = [dW.astype(np.float32), db.astype(np.float32)]
        if j:
            g32 = _activation_backward(_mm(g, Ws[j].T, ct), acts[j], activation)
    return float(loss), grads


def validate_mixed_model(model: Any) -> MLP:
    """``model`` if it is a teaching :class:`~course.backprop.MLP` on the CPU (its copy is trained in NumPy)."""
    if not isinstance(model, MLP):
        raise BadInputError(f"model must be a course.backprop.MLP (e.g. MLP([64, 32, 10])), got "
                            f"{type(model).__name__}")
    if model.device != "cpu":
        raise BadInputError("mixed_precision_train emulates the precisions in NumPy: give it a model on the CPU")
    return model


def validate_mixed_data(x: Any, model: MLP) -> np.ndarray:
    """``x`` as a NumPy ``(examples, n_in)`` array of finite real numbers for ``model``, never a complex one
    (casting would drop its imaginary part) nor an empty one."""
    if hasattr(x, "get") or isinstance(x, (str, bytes)) or x is None:
        raise BadInputError(f"x must be a NumPy array of shape (examples, {model.sizes[0]}), got {type(x).__name__}")
    x = np.asarray(x)
    if x.dtype.kind not in "fiu":
        raise BadInputError(f"x must hold real numbers (float or int), got dtype {x.dtype}"
                            + (": a complex x would lose its imaginary part" if x.dtype.kind == "c" else ""))
    if x.ndim != 2 or x.shape[1] != model.sizes[0]:
        raise BadInputError(f"x must have shape (examples, {model.sizes[0]}) for this model, got {x.shape}")
    if x.shape[0] == 0:
        raise BadInputError("x holds no examples (0 rows): give at least one")
    if not np.isfinite(x).all():
        raise BadInputError("x holds NaN or inf: every input must be a finite number")
    return x


def validate_mixed_labels(y: Any, x: np.ndarray, model: MLP) -> np.ndarray:
    """``y`` as one integer class per row of ``x``, each a class of ``model``."""
    if hasattr(y, "get") or isinstance(y, (str, bytes)) or y is None:
        raise BadInputError(f"y must be a NumPy array of {len(x)} integer labels, got {type(y).__name__}")
    return validate_labels(np.asarray(y), len(x), model.sizes[-1], "cpu")


def validate_scaler(scaler: Any) -> LossScaler:
    """``scaler`` if it is a :class:`LossScaler`."""
    if not isinstance(scaler, LossScaler):
        raise BadInputError(f"scaler must be a LossScaler (e.g. LossScaler(2.0**16)) or None, got "
                            f"{type(scaler).__name__}")
    return scaler


@arguments(model=Given(validate_mixed_model), x=Given(validate_mixed_data, earlier=("model",)),
           y=Given(validate_mixed_labels, earlier=("x", "model")),
           steps=Whole(hi=100_000, hint="optimiser steps"), lr=Real(above=0, hint="the learning rate"),
           precision=OneOf(*PRECISIONS), optimizer=OneOf(*OPTIMIZERS), batch=Whole(hint="examples per step"),
           scaler=Optional(Given(validate_scaler)), seed=Seed(),
           probe_every=Whole(lo=0, hint="steps between gradient probes (0: never)"),
           loss_weight=Real(above=0, hint="the loss's weight in the objective"))
def mixed_precision_train(model: MLP, x: Any, y: Any, steps: int, lr: float, precision: str = "float16 scaled",
                          optimizer: str = "sgd", batch: int = 64, scaler: LossScaler | None = None,
                          seed: int = 0, probe_every: int = 0, loss_weight: float = 1.0) -> dict:
    """Train a copy of ``model`` (its activation, softmax cross-entropy) for ``steps`` minibatch steps in
    ``precision``.

    Parameters
    ----------
    model : the MLP to start from (its weights and its activation are copied; it is not changed).
    x, y : the training data (NumPy; batches of ``batch`` rows drawn in order of a permutation by ``seed``; a
        ``batch`` larger than x takes all of x at every step).
    precision : one of :data:`PRECISIONS`.  ``"float16 scaled"`` uses ``scaler`` (default: dynamic, from
        2^16, doubling after 200 clean steps); the others use none.
    optimizer : ``"sgd"``, ``"momentum"`` or ``"adam"``, on the float32 master weights.
    probe_every : every so many steps, keep the step's gradients (as float32, before rounding) for
        :func:`underflow_share` and the histogram (0: never).
    loss_weight : the loss's weight in the objective (the gradient is multiplied by it; the loss reported is
        not): a loss term weighted down, or a loss divided by the number of accumulated micro-batches,
        gives gradients that much smaller.  Adam's steps do not depend on it; float16's range does.

    Returns
    -------
    dict : ``losses`` (float32 loss of each step's batch), ``scales`` (the loss scale each step used),
    ``skipped`` (steps skipped for an overflow), ``skipped_steps``, ``params`` (the float32 master
    weights after training), ``probes`` (lists of gradient arrays), ``precision``, ``dtype``.
    """
    ct = compute_dtype(precision)
    scaling = precision == "float16 scaled"
    scaler = scaler if scaler is not None else LossScaler(2.0 ** 16, dynamic=True, growth_interval=200)
    params = [np.array(p, dtype=np.float32) for p in model.parameters()]            # the master copy
    states = [optimizer_state(optimizer, p) for p in params]
    rng = seed
    order = rng.permutation(len(x))
    losses, scales, skipped_steps, probes = [], [], [], []
    for step in range(steps):
        idx = order[(step * batch) % len(x):][:batch]
        if len(idx) < batch:
            order = rng.permutation(len(x))
            idx = order[:batch]
        scale = scaler.scale if scaling else 1.0
        probe = [] if probe_every and step % probe_every == 0 else None
        with np.errstate(over="ignore", invalid="ignore"):       # an overflow is what the scaler watches for
            loss, grads = _step(params, x[idx], y[idx], ct, scale, probe, loss_weight, model.activation)
        grads = [g / np.float32(scale) for g in grads]
        found_inf = not all(np.isfinite(g).all() for g in grads)
        losses.append(loss)
        scales.append(scale)
        if probe is not None:
            probes.append(probe)
        if scaling and scaler.update(found_inf):
            skipped_steps.append(step)
            continue
        for p, g, st in zip(params, grads, states):
            update(optimizer, p, g, st, lr)
    return {"losses": losses, "scales": scales, "skipped": len(skipped_steps), "skipped_steps": skipped_steps,
            "params": params, "probes": probes, "precision": precision, "dtype": ct.name}


def validate_gradient_values(values: Any) -> np.ndarray:
    """``values`` (an array, or a list of arrays, as a probe keeps them) as one flat float64 array of real
    numbers; complex, string and boolean values are refused, not converted."""
    if isinstance(values, (str, bytes)) or values is None:
        raise BadInputError(f"values must be an array of gradient values (or a list of arrays), got {values!r:.60}")
    parts = [np.asarray(a) for a in values] if isinstance(values, (list, tuple)) else [np.asarray(values)]
    for a in parts:
        if a.dtype.kind not in "fiu":
            raise BadInputError(f"values must hold real numbers, got dtype {a.dtype}")
    require_fits(8 * sum(int(a.size) for a in parts), "cpu", what="the gradient values as float64")
    return np.concatenate([np.ravel(a).astype(np.float64) for a in parts]) if parts else np.zeros(0)


@arguments(values=Given(validate_gradient_values),
           scale=Real(above=0, hint="the loss scale the gradients are multiplied by (1: none)"))
def underflow_share(values: Any, scale: float = 1.0) -> dict:
    """Of the nonzero gradient ``values`` (float32), the share float16 rounds to zero and the share it holds
    only as a subnormal, after multiplying by ``scale``.

    float16 rounds to nearest, ties to even: ``|g|·scale <= 2^-25`` (half the smallest subnormal; exactly
    2^-25 is a tie, which goes to the even neighbour, 0) becomes 0, and ``|g|·scale`` below
    ``2^-14 - 2^-25`` (the midpoint between the largest subnormal and the smallest normal, whose tie goes
    to the normal) stays a subnormal.  NaN and inf values are not counted.

    >>> underflow_share(np.array([1e-9, 1e-6, 1e-3]))["zero"]
    0.3333333333333333
    >>> underflow_share(np.array([2.0**-25, 2.0**-24]))                  # the tie rounds to 0
    {'zero': 0.5, 'subnormal': 0.5, 'n': 2}
    """
    v = np.abs(values)
    v = v[(v > 0) & np.isfinite(v)] * scale
    if v.size == 0:
        return {"zero": 0.0, "subnormal": 0.0, "n": 0}
    zero = v <= FLOAT16_MIN_SUBNORMAL / 2
    return {"zero": float(np.mean(zero)),
            "subnormal": float(np.mean(~zero & (v < FLOAT16_MIN_NORMAL - FLOAT16_MIN_SUBNORMAL / 2))),
            "n": int(v.size)}
