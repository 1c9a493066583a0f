"""Lesson 01: backpropagation, one layer at a time, for any array namespace.

Every layer has a ``forward`` and a ``backward`` written next to each other.
``forward(x) -> (out, cache)`` returns what the layer computes and an explicit
*cache*: the few arrays its backward pass will need.  ``backward(dout, cache)
-> dx`` takes the gradient of the loss with respect to the layer's output and
returns the gradient with respect to its input (a :class:`Linear` layer also
writes the gradients of its weight and bias into ``dW`` and ``db``).  That is
the chain rule, applied one layer at a time from the loss back to the input.

The same code runs on the CPU (NumPy) and on a GPU (CuPy): each function asks
its input which namespace it lives in.  Each layer takes ``out=`` buffers so
that :class:`MLP` can run a whole training step without allocating: this, and
keeping every array in one dtype, is what makes a plain NumPy step as fast as
a framework's.

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

from ..devices import array_device, get_xp, normalize_device, xp_of
from ..errors import BadInputError, random_generator, whole_number
from ..limits import require_fits, validate_dtype
from .validate import check_batch, check_labels

__all__ = ["Linear", "ReLU", "Sigmoid", "Tanh", "ACTIVATIONS", "softmax_cross_entropy",
           "softmax_cross_entropy_backward", "mse", "mse_backward", "MLP", "xp_of"]


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
        n_in = whole_number("n_in", n_in, hint="the width of the layer's input")
        n_out = whole_number("n_out", n_out, hint="the width of the layer's output")
        dtype = _float_dtype(dtype, device)
        _check_weights_fit([n_in, n_out], dtype, device)
        rng = random_generator(seed)
        xp = get_xp(device)
        w = rng.standard_normal((n_in, n_out)) * math.sqrt(gain / n_in)
        self.W = xp.asarray(w.astype(dtype))                 # weights, (n_in, n_out)
        self.b = xp.zeros(n_out, dtype=dtype)                # bias, (n_out,)
        self.dW = xp.zeros_like(self.W)                      # filled by backward
        self.db = xp.zeros_like(self.b)
        self.n_in, self.n_out = n_in, n_out

    def forward(self, x, out=None):
        xp = xp_of(x)
        out = xp.matmul(x, self.W, out=out)      # (batch, n_in) @ (n_in, n_out)
        out += self.b                            # the bias is broadcast over the batch
        return out, (x,)                         # backward needs the input

    def backward(self, dout, cache, out=None, need_dx: bool = True):
        (x,) = cache
        xp = xp_of(dout)
        xp.matmul(x.T, dout, out=self.dW)        # dW = xᵀ @ dout: (n_in, batch) @ (batch, n_out)
        xp.sum(dout, axis=0, out=self.db)        # db = dout summed over the batch
        if not need_dx:                          # the first layer: nothing upstream needs dx
            return None
        return xp.matmul(dout, self.W.T, out=out)  # dx = dout @ Wᵀ: (batch, n_out) @ (n_out, n_in)

    def parameters(self) -> list:
        return [self.W, self.b]

    def gradients(self) -> list:
        return [self.dW, self.db]

    def __repr__(self) -> str:
        return f"Linear({self.n_in} -> {self.n_out})"


class ReLU:
    """``out = max(x, 0)``; the gradient passes where the output is positive."""

    gain = 2.0

    def forward(self, x, out=None):
        out = xp_of(x).maximum(x, 0, out=out)
        return out, (out,)                       # out > 0 exactly where x > 0

    def backward(self, dout, cache, out=None, mask=None):
        (y,) = cache
        xp = xp_of(dout)
        mask = xp.greater(y, 0, out=mask)
        return xp.multiply(dout, mask, out=out)  # dx = dout · [x > 0]

    def __repr__(self) -> str:
        return "ReLU()"


class Sigmoid:
    """``out = 1 / (1 + exp(-x))``, computed as ``(1 + tanh(x / 2)) / 2`` (no overflow)."""

    gain = 1.0

    def forward(self, x, out=None):
        xp = xp_of(x)
        out = xp.multiply(x, 0.5, out=out)
        xp.tanh(out, out=out)
        out *= 0.5
        out += 0.5
        return out, (out,)                       # σ'(x) = σ(x)(1 - σ(x)) needs only the output

    def backward(self, dout, cache, out=None):
        (y,) = cache
        return xp_of(dout).multiply(dout, y * (1 - y), out=out)   # dx = dout · σ(1 - σ)

    def __repr__(self) -> str:
        return "Sigmoid()"


class Tanh:
    """``out = tanh(x)``."""

    gain = 1.0

    def forward(self, x, out=None):
        out = xp_of(x).tanh(x, out=out)
        return out, (out,)                       # tanh'(x) = 1 - tanh(x)²

    def backward(self, dout, cache, out=None):
        (y,) = cache
        return xp_of(dout).multiply(dout, 1 - y * y, out=out)     # dx = dout · (1 - out²)

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
    if getattr(logits, "ndim", None) != 2:
        raise BadInputError(f"logits must be a 2-D array (batch, classes), got "
                            f"{getattr(logits, 'shape', type(logits).__name__)}")
    xp = xp_of(logits)
    n = logits.shape[0]
    check_labels(labels, n, logits.shape[1], array_device(logits))  # an out-of-range label would pick another class
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = xp.exp(shifted)
    total = exp.sum(axis=1, keepdims=True)
    rows = xp.arange(n)
    loss = (xp.log(total[:, 0]) - shifted[rows, labels]).mean()
    exp /= total                                  # now the softmax probabilities
    return loss, (exp, labels)


def softmax_cross_entropy_backward(cache: tuple[Any, Any], out: Any = None) -> Any:
    """d loss / d logits = (softmax - one_hot(labels)) / batch."""
    probs, labels = cache
    xp = xp_of(probs)
    n = probs.shape[0]
    if out is None:
        out = probs.copy()
    else:
        out[...] = probs
    out[xp.arange(n), labels] -= 1
    out *= 1.0 / n
    return out


def mse(pred: Any, target: Any) -> tuple[Any, tuple[Any]]:
    """Mean squared error over every element; returns ``(loss, cache)``.

    ``pred`` and ``target`` must have the same shape: numpy would broadcast a ``(4, 1)`` against a
    ``(4,)`` into a ``(4, 4)`` difference and return a wrong loss without a word.
    """
    if not hasattr(pred, "shape") and not hasattr(target, "shape"):  # plain lists: as numpy arrays
        pred, target = np.asarray(pred, dtype=np.float64), np.asarray(target, dtype=np.float64)
    if getattr(pred, "shape", None) != getattr(target, "shape", None):
        raise BadInputError(f"pred and target must have the same shape, got {getattr(pred, 'shape', pred)!r} "
                            f"and {getattr(target, 'shape', target)!r} (reshape one of them)")
    diff = pred - target
    return (diff * diff).mean(), (diff,)


def mse_backward(cache: tuple[Any], out: Any = None) -> Any:
    """d loss / d pred = 2 (pred - target) / number of elements."""
    (diff,) = cache
    return xp_of(diff).multiply(diff, 2.0 / diff.size, out=out)


# ----------------------------------------------------------------------------- the model

def _float_dtype(dtype: Any, device: Any) -> np.dtype:
    """``dtype`` as a numpy float dtype the device holds; an integer one would round every weight to 0."""
    dt = validate_dtype(dtype, device)
    if dt.kind != "f":
        raise BadInputError(f"dtype must be a floating-point type (float32 or float64), got {dt.name!r}")
    return dt


def _check_weights_fit(sizes: Sequence[int], dtype: np.dtype, device: Any) -> None:
    """Refuse, before drawing anything, weights that would not fit: on ``device`` the weights, their
    gradients and one update buffer; on the host the float64 draw of the largest layer (and its copy)."""
    pairs = list(zip(sizes[:-1], sizes[1:]))
    params = sum(a * b + b for a, b in pairs)
    arch = "-".join(map(str, sizes))
    require_fits(3 * params * dtype.itemsize, device,
               what=f"the {params:,} {dtype.name} weights of a {arch} network, their gradients and updates")
    require_fits(max(a * b for a, b in pairs) * (16 + dtype.itemsize), "cpu",
               what=f"the float64 draw of the largest layer of {arch}")


class MLP:
    """A multilayer perceptron: Linear, activation, Linear, ..., Linear (logits).

    Parameters
    ----------
    sizes : widths from input to output, e.g. ``[64, 128, 10]``.
    activation : ``"relu"``, ``"sigmoid"`` or ``"tanh"`` between the linear layers.
    dtype : ``"float32"`` (fast) or ``"float64"`` (for gradient checks); ``"float16"`` works too.
    device : ``"cpu"`` or ``"gpu"``; inputs must live there.
    seed : the weights are a function of the seed alone (drawn on the host, then copied).

    Attributes
    ----------
    layers : the layers in order.  caches : the caches of the last forward pass, one per layer.

    Examples
    --------
    >>> m = MLP([784, 512, 512, 10])
    >>> m.flops_per_step(256) > 0.8e9
    True
    """

    def __init__(self, sizes: Sequence[int], activation: str = "relu", dtype: Any = "float32",
                 device: Any = "cpu", seed: int = 0):
        if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__len__") or len(sizes) < 2:
            raise BadInputError(f"sizes must list at least two widths (input and output), e.g. "
                                f"[64, 32, 10]; got {sizes!r}")
        self.sizes = [whole_number("every width in sizes", s, hint=f"got sizes={list(sizes)!r}") for s in sizes]
        if activation not in ACTIVATIONS:
            raise BadInputError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.device = normalize_device(device)
        self.dtype = _float_dtype(dtype, self.device)
        _check_weights_fit(self.sizes, self.dtype, self.device)
        self.xp = get_xp(self.device)
        self.activation, self.seed = activation, seed
        rng = np.random.default_rng(seed)
        act = ACTIVATIONS[activation]
        self.layers: list = []
        for i, (n_in, n_out) in enumerate(zip(self.sizes[:-1], self.sizes[1:])):
            self.layers.append(Linear(n_in, n_out, dtype=self.dtype, device=self.device, seed=rng,
                                      gain=act.gain))
            if i < len(self.sizes) - 2:
                self.layers.append(act())
        self.caches: list = []
        self._batch = -1

    # ------------------------------------------------------------ buffers
    def _buffers(self, batch: int) -> None:
        """One output buffer per Linear layer (its activation overwrites it in place) and
        one gradient buffer per Linear output; reused by every step with this batch size."""
        if batch == self._batch:
            return
        xp, dt = self.xp, self.dtype
        self._out = [xp.empty((batch, n), dtype=dt) for n in self.sizes[1:]]
        self._grad = [xp.empty((batch, n), dtype=dt) for n in self.sizes[1:]]
        self._mask = [xp.empty((batch, n), dtype=bool) for n in self.sizes[1:]]
        self._step = [xp.empty_like(p) for p in self.parameters()]
        self._batch = batch

    # ------------------------------------------------------------ checks (messages in backprop_checks)
    def _check_x(self, x):
        return check_batch(x, self.sizes[0], self.device, self.dtype)

    def _check_y(self, y, batch: int):
        return check_labels(y, batch, self.sizes[-1], self.device)

    # ------------------------------------------------------------ forward, loss, backward
    def _forward(self, x):
        self._buffers(x.shape[0])
        self.caches = []
        h, j = x, -1
        for layer in self.layers:
            j += isinstance(layer, Linear)       # Linear j writes _out[j]; its activation
            h, cache = layer.forward(h, out=self._out[j])  # then overwrites it in place
            self.caches.append(cache)
        return h

    def forward(self, x):
        """Logits of shape ``(batch, sizes[-1])`` (a new array); keeps the caches for ``backward``."""
        return self._forward(self._check_x(x)).copy()

    def loss(self, x, y) -> float:
        """Mean softmax cross-entropy on ``(x, y)`` (a forward pass; no gradients)."""
        x = self._check_x(x)
        loss, _ = softmax_cross_entropy(self._forward(x), self._check_y(y, x.shape[0]))
        return float(loss)

    def backward(self, dlogits, need_input_grad: bool = False):
        """Backpropagate ``dlogits`` (d loss / d logits) through the last forward pass.

        Fills every layer's ``dW``/``db`` (see :meth:`gradients`).  Returns the gradient
        with respect to the input x when ``need_input_grad`` (else None: the first layer
        skips that product, which nothing needs when training).
        """
        if not self.caches:
            raise BadInputError("backward needs a forward pass first: call model.forward(x)")
        if array_device(dlogits) != self.device or tuple(dlogits.shape) != (self._batch, self.sizes[-1]):
            raise BadInputError(f"dlogits must have the logits' shape {(self._batch, self.sizes[-1])} and "
                                f"live on the {self.device.upper()}, got {tuple(dlogits.shape)} on the "
                                f"{array_device(dlogits).upper()}")
        dlogits = dlogits if dlogits.dtype == self.dtype else dlogits.astype(self.dtype)
        g, j = dlogits, len(self.sizes) - 2
        for i in range(len(self.layers) - 1, -1, -1):
            layer, cache = self.layers[i], self.caches[i]
            if isinstance(layer, Linear):
                first = i == 0
                g = layer.backward(g, cache, out=None if first else self._grad[j - 1],
                                   need_dx=need_input_grad or not first)
                j -= 1
            elif isinstance(layer, ReLU):
                g = layer.backward(g, cache, out=g, mask=self._mask[j])
            else:
                g = layer.backward(g, cache, out=g)
        return g

    def train_step(self, x, y, lr: float) -> float:
        """One step of plain SGD on a batch: forward, loss, backward, ``p -= lr * dp``.

        Returns the loss before the update (a float).  Raises :class:`BadInputError`,
        leaving the weights untouched, if the loss is not finite (a learning rate too big).
        """
        if not isinstance(lr, (int, float, np.floating)) or not math.isfinite(lr) or lr <= 0:
            raise BadInputError(f"learning rate lr must be a positive finite number, got {lr!r}")
        x = self._check_x(x)
        y = self._check_y(y, x.shape[0])
        with np.errstate(over="ignore", invalid="ignore"):  # a diverging run gets the message below
            loss, cache = softmax_cross_entropy(self._forward(x), y)
            loss = float(loss)
        if not math.isfinite(loss):
            if not bool(self.xp.isfinite(x).all()):
                raise BadInputError("x contains NaN or infinite values: clean the data before training")
            raise BadInputError(f"the loss is {loss} (not finite): training diverged with learning rate "
                                f"lr={lr:g}. Lower lr (try {lr / 10:g}) and start again from a new model.")
        self.backward(softmax_cross_entropy_backward(cache, out=self._grad[-1]))
        for p, dp, step in zip(self.parameters(), self.gradients(), self._step):
            self.xp.multiply(dp, lr, out=step)      # in place: no new arrays in the update
            p -= step
        return loss

    # ------------------------------------------------------------ parameters
    def linear_layers(self) -> list[Linear]:
        return [layer for layer in self.layers if isinstance(layer, Linear)]

    def parameters(self) -> list:
        """``[W1, b1, W2, b2, ...]``: the live arrays (updating them changes the model)."""
        return [p for layer in self.linear_layers() for p in layer.parameters()]

    def gradients(self) -> list:
        """``[dW1, db1, dW2, db2, ...]`` from the last backward, in the order of :meth:`parameters`."""
        return [g for layer in self.linear_layers() for g in layer.gradients()]

    def parameter_names(self) -> list[str]:
        return [f"{n}{i + 1}" for i in range(len(self.sizes) - 1) for n in ("W", "b")]

    def n_parameters(self) -> int:
        return sum(int(p.size) for p in self.parameters())

    def flops_per_step(self, batch: int) -> float:
        """Floating-point operations of one forward + backward on ``batch`` examples.

        A multiply-add counts 2.  Per Linear layer (n_in -> n_out): forward
        2·batch·n_in·n_out + batch·n_out (bias); backward 2·batch·n_in·n_out for dW,
        the same for dx (skipped for the first layer), batch·n_out for db.  One per
        element for each activation forward and backward; 5 per logit for the loss.
        """
        b = whole_number("batch", batch, hint="the examples in one step")
        total = 0.0
        for i, (n_in, n_out) in enumerate(zip(self.sizes[:-1], self.sizes[1:])):
            mm = 2.0 * b * n_in * n_out
            total += mm + b * n_out + mm + b * n_out + (mm if i > 0 else 0.0)
            if i < len(self.sizes) - 2:
                total += 2.0 * b * n_out
        return total + 5.0 * b * self.sizes[-1]

    def __repr__(self) -> str:
        arch = "-".join(map(str, self.sizes))
        return f"MLP({arch}, {self.activation}, {self.dtype.name}, {self.device})"
