"""Gradient checks: backprop's answer against centred finite differences.

A gradient check is the oracle of this lesson.  Nudge one number ``p`` of the
model (or of a layer's input) to ``p + eps`` and ``p - eps``, recompute the
loss, and ``(L(p + eps) - L(p - eps)) / (2 eps)`` approximates ``dL/dp`` with
an error of order ``eps²``.  Backprop must agree with it for every entry.  In
float64 the two agree to about 1e-9; a wrong backward pass is off by order 1.

* :func:`gradient_check` and :func:`gradient_errors`: a whole MLP, per parameter;
* :func:`layer_gradient_check`: one layer alone (Linear, ReLU, Sigmoid, Tanh), with
  the scalar loss ``sum(out * dout)`` for a random ``dout``;
* :func:`loss_gradient_check`: the losses' own backward passes.

>>> from course.backprop import Tanh
>>> errs = layer_gradient_check(Tanh(), np.random.default_rng(0).standard_normal((4, 3)))
>>> errs["dx"] < 1e-7
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..arguments import Given, Seed, arguments
from ..devices import to_numpy
from .layers import (
    MLP,
    Linear,
    mse,
    mse_backward,
    softmax_cross_entropy,
    softmax_cross_entropy_backward,
    validate_model,
)
from .validate import validate_compared, validate_eps, validate_gradient_inputs

__all__ = ["rel_error", "central_differences", "gradient_check", "gradient_errors", "layer_gradient_check",
           "loss_gradient_check",
           "FULL_CHECK_LIMIT", "SAMPLE_ENTRIES"]


def rel_error(a: Any, b: Any) -> float:
    """``max|a - b| / max(max|a|, max|b|)``: the worst entry's error relative to the gradient's scale.

    The course's one relative error (lesson 05's and 07's gradient checks use it too).  Max-norms,
    for two reasons: an entry whose true gradient is ~0 is measured against the largest entry, so
    rounding noise there does not become a huge ratio (cs231n's per-entry ``|a-b| / (|a|+|b|)``
    does), and the worst entry decides, so one wrong entry among thousands cannot hide in an
    average as it would in a Euclidean norm.  0 for equal arrays (and when both are 0), 2 for
    opposite ones, a few 1e-9 for a right backward pass checked in float64.

    >>> rel_error([1.0, 2.0], [1.0, 2.0]), rel_error([1.0, 0.0], [-1.0, 0.0])
    (0.0, 2.0)
    """
    a, b = validate_compared(a, b)
    scale = max(np.abs(a).max(initial=0.0), np.abs(b).max(initial=0.0))
    return 0.0 if scale == 0 else float(np.abs(a - b).max() / scale)


#: Models with more parameters than this are checked on a random sample of entries by default.
FULL_CHECK_LIMIT = 20_000
#: Entries drawn per parameter array for such models.
SAMPLE_ENTRIES = 200


def gradient_errors(model: MLP, x: Any, y: Any, eps: float = 1e-6, max_entries: int | None | str = "auto",
                    seed: int = 0) -> list[dict]:
    """Backprop against centred finite differences, one record per parameter array.

    Each checked entry ``p[i]`` is nudged to ``p[i] ± eps`` and the loss is
    recomputed: ``(L(p + eps) - L(p - eps)) / (2 eps)``.  ``max_entries``: ``None``
    checks every entry; an integer checks that many entries per array, drawn at
    random (with ``seed``); ``"auto"`` (the default) checks every entry of a model
    with at most ``FULL_CHECK_LIMIT`` parameters and ``SAMPLE_ENTRIES`` per array of
    a bigger one (two forward passes per entry would take minutes).  Use a float64
    model: in float32 the rounding of the loss alone limits the agreement to about 1e-3.
    """
    x, y, eps, max_entries = validate_gradient_inputs(model, x, y, eps, max_entries)
    if max_entries == "auto":
        max_entries = None if model.n_parameters() <= FULL_CHECK_LIMIT else SAMPLE_ENTRIES
    loss, cache = softmax_cross_entropy(model.forward(x), y)
    model.backward(softmax_cross_entropy_backward(cache))
    analytic = [to_numpy(g).copy() for g in model.gradients()]
    rng = np.random.default_rng(seed)
    out = []
    names = [f"{w}{i + 1}" for i in range(len(model.sizes) - 1) for w in ("W", "b")]     # W1, b1, W2, ...
    for name, p, g in zip(names, model.parameters(), analytic):
        n = p.size                               # p is nudged in place: the model sees it
        idx = np.arange(n) if max_entries is None or max_entries >= n else \
            np.sort(rng.choice(n, size=max_entries, replace=False))
        numeric = central_differences(lambda: softmax_cross_entropy(model.forward(x), y)[0], p, eps, idx)
        out.append({"parameter": name, "shape": tuple(p.shape), "checked": len(idx), "of": n,
                    "rel_error": rel_error(g.reshape(-1)[idx], numeric)})
    return out


@arguments(model=Given(validate_model), eps=Given(validate_eps), seed=Seed())
def gradient_check(model: MLP, x: Any, y: Any, eps: float = 1e-6, max_entries: int | None | str = "auto",
                   seed: int = 0) -> float:
    """The largest relative error between backprop and finite differences over every parameter.

    Each parameter entry is nudged by ``±eps`` and the loss recomputed; see
    :func:`gradient_errors` for the method and the
    per-parameter numbers.  Below 1e-7 in float64 means the backward pass is right.
    By default every entry of a small model is checked and a random sample of 200
    entries per parameter of a big one (over 20,000 parameters); ``max_entries=None``
    checks them all, an integer that many per parameter.

    >>> m = MLP([3, 4, 2], dtype="float64", seed=1)
    >>> x = np.random.default_rng(0).standard_normal((5, 3))
    >>> gradient_check(m, x, np.array([0, 1, 1, 0, 1])) < 1e-7
    True
    """
    return max(r["rel_error"] for r in gradient_errors(model, x, y, eps, max_entries, seed))


def central_differences(f: Callable[[], float], a: Any, eps: float = 1e-6, idx: Any = None) -> np.ndarray:
    """``(f() at a[i] + eps  -  f() at a[i] - eps) / (2 eps)`` for the flat entries ``idx`` of ``a``
    (every entry when None): the numerical gradient of the scalar ``f()``, whose value depends on ``a``.

    ``a`` (NumPy or CuPy) is nudged in place, one entry at a time, and put back.  The course's one
    finite-difference loop: lessons 01, 05 and 07 check their backward passes with it.

    >>> a = np.array([1.0, 2.0, 3.0])
    >>> np.round(central_differences(lambda: float((a ** 2).sum()), a), 6).tolist()   # d/da of a² = 2a
    [2.0, 4.0, 6.0]
    """
    eps = validate_eps(eps)
    flat = a.reshape(-1)                          # a view: nudging it nudges a
    idx = range(flat.size) if idx is None else [int(i) for i in idx]
    out = np.empty(len(idx))
    for k, i in enumerate(idx):
        old = flat[i].item()
        flat[i] = old + eps
        lp = float(f())
        flat[i] = old - eps
        lm = float(f())
        flat[i] = old
        out[k] = (lp - lm) / (2 * eps)
    return out


def layer_gradient_check(layer: Any, x: np.ndarray, eps: float = 1e-6, seed: int = 0) -> dict:
    """Relative errors of one layer's backward (``dx``, and ``dW``, ``db`` for a Linear) on host float64 data.

    The scalar checked is ``sum(layer.forward(x) * dout)`` for a random ``dout``,
    whose gradient with respect to the output is exactly ``dout``.
    """
    eps = validate_eps(eps)
    x = np.array(x, dtype=np.float64)
    dout_shape = (x.shape[0], layer.n_out) if isinstance(layer, Linear) else x.shape
    dout = np.random.default_rng(seed).standard_normal(dout_shape)

    def f():
        return np.sum(layer.forward(x)[0] * dout)

    _, cache = layer.forward(x)
    dx = layer.backward(dout, cache)
    out = {"dx": rel_error(dx, central_differences(f, x, eps).reshape(x.shape))}
    if isinstance(layer, Linear):
        dW, db = layer.dW.copy(), layer.db.copy()
        out["dW"] = rel_error(dW, central_differences(f, layer.W, eps).reshape(layer.W.shape))
        out["db"] = rel_error(db, central_differences(f, layer.b, eps).reshape(layer.b.shape))
    return out


def loss_gradient_check(eps: float = 1e-6, seed: int = 0) -> dict:
    """Relative errors of the softmax cross-entropy and MSE backward passes on random float64 data."""
    eps = validate_eps(eps)
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((6, 5)) * 3
    labels = rng.integers(0, 5, size=6)
    d_ce = softmax_cross_entropy_backward(softmax_cross_entropy(logits, labels)[1])
    pred, target = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    d_mse = mse_backward(mse(pred, target)[1])
    return {
        "softmax_cross_entropy": rel_error(d_ce.reshape(-1), central_differences(
            lambda: softmax_cross_entropy(logits, labels)[0], logits, eps)),
        "mse": rel_error(d_mse.reshape(-1), central_differences(lambda: mse(pred, target)[0], pred, eps)),
    }
