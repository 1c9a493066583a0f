"""Lesson 01: backpropagation, one layer at a time, for any array namespace.

Every layer has a ``forward`` and a ``backward`` written next to each other.
``forward(x) -> (out, cache)`` returns what the layer computes and an explicit
*cache*: the few arrays its backward pass will need.  ``backward(dout, cache)
-> dx`` takes the gradient of the loss with respect to the layer's output and
returns the gradient with respect to its input (a :class:`Linear` layer also
keeps the gradients of its weight and bias in ``dW`` and ``db``).  That is
the chain rule, applied one layer at a time from the loss back to the input.

The same code runs on the CPU (NumPy) and on a GPU (CuPy): each function asks
its input which namespace it lives in.  Every bad input is refused once, at the
door, by :mod:`~course.backprop.validate`.  The same step written for speed (every
array made once and reused) is :class:`course.backprop.bench.PreallocatedMLP`.

>>> import numpy as np
>>> model = MLP([4, 8, 3], seed=0)
>>> x = np.ones((5, 4), dtype=np.float32)
>>> y = np.array([0, 1, 2, 1, 0])
>>> model.forward(x).shape
(5, 3)
>>> loss = model.train_step(x, y, lr=0.1)
>>> [g.shape for g in model.gradients()]
[(4, 8), (8,), (8, 3), (3,)]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..devices import get_xp, xp_of
from .counting import mlp_flops
from .validate import (
    require_logits,
    validate_dlogits,
    validate_finite_loss,
    validate_inputs,
    validate_kind,
    validate_linear,
    validate_loss_cache,
    validate_mlp,
    validate_same_shape,
)

__all__ = ["Linear", "ReLU", "Sigmoid", "Tanh", "ACTIVATIONS", "softmax_cross_entropy",
           "softmax_cross_entropy_backward", "mse", "mse_backward", "MLP", "xp_of",
           "validate_model"]


# ----------------------------------------------------------------------------- layers

class Linear:
    """A fully connected layer: ``out = x @ W + b``.

    ``W`` has shape ``(n_in, n_out)``, ``b`` shape ``(n_out,)``.  Weights start as
    Gaussian noise scaled by ``sqrt(gain / n_in)`` (He initialisation for ReLU,
    gain 2; Glorot-like gain 1 for sigmoid and tanh), biases at zero.

    ``seed``: a whole number, or a numpy ``Generator`` to draw from (as :class:`MLP` passes its own).

    >>> layer = Linear(3, 2, seed=0)
    >>> out, cache = layer.forward(np.ones((4, 3), np.float32))
    >>> dx = layer.backward(np.ones((4, 2), np.float32), cache)
    >>> layer.dW.shape, dx.shape
    ((3, 2), (4, 3))
    """

    def __init__(self, n_in: int, n_out: int, *, dtype: Any = "float32", device: str = "cpu",
                 seed: int | np.random.Generator = 0, gain: float = 2.0):
        n_in, n_out, dtype, rng = validate_linear(n_in, n_out, dtype, device, seed)
        w = rng.standard_normal((n_in, n_out)) * math.sqrt(gain / n_in)
        xp = get_xp(device)
        self.W = xp.asarray(w.astype(dtype))                 # weights, (n_in, n_out)
        self.b = xp.zeros(n_out, dtype=dtype)                # bias, (n_out,)
        self.dW, self.db = xp.zeros_like(self.W), xp.zeros_like(self.b)   # set by backward
        self.n_in, self.n_out = n_in, n_out

    def forward(self, x):
        out = x @ self.W + self.b                # (batch, n_in) @ (n_in, n_out); b broadcast over the batch
        return out, (x,)                         # backward needs the input

    def backward(self, dout, cache, need_dx: bool = True):
        (x,) = cache
        self.dW = x.T @ dout                     # dW = xᵀ @ dout: (n_in, batch) @ (batch, n_out)
        self.db = dout.sum(axis=0)               # db = dout summed over the batch
        if not need_dx:                          # the first layer: nothing upstream needs dx
            return None
        return dout @ self.W.T                   # dx = dout @ Wᵀ: (batch, n_out) @ (n_out, n_in)

    def parameters(self) -> list:
        return [self.W, self.b]

    def gradients(self) -> list:
        return [self.dW, self.db]

    def __repr__(self) -> str:
        return f"Linear({self.n_in} -> {self.n_out})"


class ReLU:
    """``out = max(x, 0)``; the gradient passes where the output is positive."""

    gain = 2.0

    def forward(self, x):
        out = xp_of(x).maximum(x, 0)
        return out, (out,)                       # out > 0 exactly where x > 0

    def backward(self, dout, cache):
        (y,) = cache
        return dout * (y > 0)                    # dx = dout · [x > 0]

    def __repr__(self) -> str:
        return "ReLU()"


class Sigmoid:
    """``out = 1 / (1 + exp(-x))``, computed as ``(1 + tanh(x / 2)) / 2`` (no overflow)."""

    gain = 1.0

    def forward(self, x):
        out = xp_of(x).tanh(x * 0.5) * 0.5 + 0.5
        return out, (out,)                       # σ'(x) = σ(x)(1 - σ(x)) needs only the output

    def backward(self, dout, cache):
        (y,) = cache
        return dout * (y * (1 - y))              # dx = dout · σ(1 - σ)

    def __repr__(self) -> str:
        return "Sigmoid()"


class Tanh:
    """``out = tanh(x)``."""

    gain = 1.0

    def forward(self, x):
        out = xp_of(x).tanh(x)
        return out, (out,)                       # tanh'(x) = 1 - tanh(x)²

    def backward(self, dout, cache):
        (y,) = cache
        return dout * (1 - y * y)                # dx = dout · (1 - out²)

    def __repr__(self) -> str:
        return "Tanh()"


ACTIVATIONS = {"relu": ReLU, "sigmoid": Sigmoid, "tanh": Tanh}


# ----------------------------------------------------------------------------- losses

def softmax_cross_entropy(logits: Any, labels: Any) -> tuple[Any, tuple[Any, Any]]:
    """Mean cross-entropy of ``softmax(logits)`` against integer ``labels``; returns ``(loss, cache)``.

    Stable for any logits: the row maximum is subtracted before ``exp`` (the
    softmax does not change), so nothing overflows, and the log of the softmax
    is taken as ``shifted - log(sum(exp(shifted)))``, never as ``log(0)``.

    >>> loss, _ = softmax_cross_entropy(np.array([[1000.0, 0.0]]), np.array([0]))
    >>> float(loss)
    0.0
    """
    require_logits(logits, labels)               # an out-of-range label would pick another class
    xp, n = xp_of(logits), logits.shape[0]
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = xp.exp(shifted)
    total = exp.sum(axis=1, keepdims=True)
    loss = (xp.log(total[:, 0]) - shifted[xp.arange(n), labels]).mean()
    exp /= total                                 # now the softmax probabilities
    return loss, (exp, labels)


def softmax_cross_entropy_backward(cache: tuple[Any, Any]) -> Any:
    """d loss / d logits = (softmax - one_hot(labels)) / batch."""
    probs, labels = validate_loss_cache(cache)
    n = probs.shape[0]
    dlogits = probs.copy()
    dlogits[xp_of(probs).arange(n), labels] -= 1
    dlogits *= 1.0 / n
    return dlogits


def mse(pred: Any, target: Any) -> tuple[Any, tuple[Any]]:
    """Mean squared error over every element; returns ``(loss, cache)``.

    ``pred`` and ``target`` must have the same shape: numpy would broadcast a ``(4, 1)`` against a
    ``(4,)`` into a ``(4, 4)`` difference and return a wrong loss without a word.
    """
    pred, target = validate_same_shape(pred, target)
    diff = pred - target
    return (diff * diff).mean(), (diff,)


def mse_backward(cache: tuple[Any]) -> Any:
    """d loss / d pred = 2 (pred - target) / number of elements."""
    (diff,) = validate_loss_cache(cache, "mse")
    return diff * (2.0 / diff.size)


# ----------------------------------------------------------------------------- the model

class MLP:
    """A multilayer perceptron: Linear, activation, Linear, ..., Linear (logits).

    ``sizes``: widths from input to output, e.g. ``[64, 128, 10]``; ``activation``: ``"relu"``, ``"sigmoid"`` or
    ``"tanh"``; ``dtype``: ``"float32"``, or ``"float64"`` for gradient checks; ``device``: ``"cpu"`` or ``"gpu"``
    (inputs must live there); ``seed``: the weights are a function of it alone.
    """

    def __init__(self, sizes: Sequence[int], activation: str = "relu", dtype: Any = "float32",
                 device: Any = "cpu", seed: int = 0):
        self.sizes, self.dtype, self.device = validate_mlp(sizes, activation, dtype, device, ACTIVATIONS)
        self.activation, self.xp = activation, get_xp(self.device)
        rng, act = np.random.default_rng(seed), ACTIVATIONS[activation]
        self.layers: list = []                   # Linear, activation, ..., Linear: none after the logits
        for n_in, n_out in zip(self.sizes[:-1], self.sizes[1:]):
            self.layers += [Linear(n_in, n_out, dtype=self.dtype, device=self.device, seed=rng, gain=act.gain), act()]
        self.layers.pop()
        self.caches: list = []                   # one per layer, from the last forward

    def forward(self, x):
        """Logits of shape ``(batch, sizes[-1])``; keeps each layer's cache for :meth:`backward`."""
        h, _ = validate_inputs(self, x)
        self.caches = []
        for layer in self.layers:
            h, cache = layer.forward(h)
            self.caches.append(cache)
        return h

    def backward(self, dlogits, need_input_grad: bool = False):
        """Backpropagate ``dlogits`` (d loss / d logits) through the last forward pass: fills every
        layer's ``dW``/``db``; returns d loss / d x when ``need_input_grad`` (else None)."""
        g = validate_dlogits(self, dlogits)
        for layer, cache in zip(self.layers[:0:-1], self.caches[:0:-1]):
            g = layer.backward(g, cache)
        return self.layers[0].backward(g, self.caches[0], need_dx=need_input_grad)

    def train_step(self, x, y, lr: float) -> float:
        """One step of plain SGD: forward, loss, backward, ``p -= lr * dp``; returns the loss before the
        update.  A loss that is not finite (lr too big) raises, leaving the weights untouched."""
        x, y = validate_inputs(self, x, y, lr)
        with np.errstate(over="ignore", invalid="ignore"):  # a diverging run gets validate_finite_loss's message
            loss, cache = softmax_cross_entropy(self.forward(x), y)
        loss = validate_finite_loss(loss, x, lr)
        self.backward(softmax_cross_entropy_backward(cache))
        for p, dp in zip(self.parameters(), self.gradients()):
            p -= lr * dp
        return loss

    def linear_layers(self) -> list[Linear]:
        return self.layers[::2]                  # Linear, activation, Linear, ...

    def parameters(self) -> list:
        """``[W1, b1, W2, b2, ...]``: the live arrays (updating them changes the model)."""
        return [p for layer in self.linear_layers() for p in layer.parameters()]

    def gradients(self) -> list:
        """``[dW1, db1, dW2, db2, ...]`` from the last backward, in the order of :meth:`parameters`."""
        return [g for layer in self.linear_layers() for g in layer.gradients()]

    def n_parameters(self) -> int:
        return sum(int(p.size) for p in self.parameters())

    def flops_per_step(self, batch: int) -> float:
        return mlp_flops(self.sizes, batch)     # one forward + backward on ``batch`` examples

    def __repr__(self) -> str:
        return f"MLP({'-'.join(map(str, self.sizes))}, {self.activation}, {self.dtype.name}, {self.device})"


def validate_model(model: Any, name: str = "model") -> MLP:
    """``model`` if it is a teaching :class:`MLP`; else a clear error naming ``name``."""
    return validate_kind(model, MLP, name, "a course.backprop.MLP (e.g. MLP([64, 32, 10]))")
