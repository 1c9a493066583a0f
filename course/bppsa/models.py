"""Two chains to back-propagate through: a vanilla tanh RNN and a deep MLP.

Both keep, in their forward pass, exactly what the backward pass needs (the
hidden states / layer outputs) in an explicit ``cache``, cs231n style, and both
back-propagate either way:

* ``method="sequential"``: the classic loop, one matrix-vector step per time
  step / layer, never forming a Jacobian (what deep-learning frameworks do);
* ``method="jacobian"``: form every Jacobian, then :func:`course.bppsa.backprop_sequential`;
* ``method="scan"``: form every Jacobian, then :func:`course.bppsa.backprop_scan` (BPPSA);
* ``method="fast"``: the same scan without copies, reduce-then-scan over chunks
  (:mod:`course.bppsa.fast`); the RNN forms its Jacobians per step, never all at once.

All three give the same gradients for every weight and input; the tests check
them against finite differences (:func:`finite_difference_check`).  The loss is lesson 01's
stable softmax cross-entropy and the error measure lesson 01's ``rel_error``
(:mod:`course.backprop`).

The RNN is the paper's workload (input size 1, hidden size 20, batch 16, a
readout of the last hidden state into classes, softmax cross-entropy):

    h_t = tanh(x_t W_ihᵀ + b_ih + h_{t-1} W_hhᵀ + b_hh),   t = 1..T,
    ∂h_t/∂h_{t-1} = diag(1 - h_t²) · W_hh.

>>> rnn = TanhRNN(input_size=1, hidden_size=4, seed=0, dtype="float64")
>>> x, y = rnn.example_data(T=5, batch=2)
>>> loss, cache = rnn.forward(x, y)
>>> g1 = rnn.backward(cache, "sequential"); g2 = rnn.backward(cache, "scan")
>>> bool(np.allclose(g1["W_hh"], g2["W_hh"]))
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..arguments import Given, OneOf, Whole, arguments
from ..backprop.gradcheck import central_differences, rel_error
from ..backprop.layers import softmax_cross_entropy, softmax_cross_entropy_backward
from ..devices import get_xp, normalize_device, to_device, to_numpy
from ..errors import BadInputError
from ..limits import require_fits, validate_dtype
from .algorithm import backprop_scan, backprop_scan_elements, backprop_sequential, scan_memory
from .fast import RNNBackwardPlan, backprop_chunked

__all__ = ["TanhRNN", "MLPChain", "METHODS", "finite_difference_check", "validate_float_dtype"]

#: The ways a model can back-propagate through its chain.
METHODS = ("sequential", "jacobian", "scan", "fast")


def _validate_draw(count: int, device: str, dtype: np.dtype, what: str) -> None:
    """Refuse before drawing ``count`` random numbers (float64 on the host, then ``dtype`` on ``device``)."""
    require_fits(8 * count, "cpu", what=what)
    if device != "cpu":
        require_fits(count * dtype.itemsize, device, what=what)


def validate_float_dtype(dtype: Any, device: str = "cpu") -> np.dtype:
    """``dtype`` as a ``numpy.dtype`` the device holds, floating point (integer weights would round to zero)."""
    return validate_dtype(dtype, device, floating=True)


#: What a model's constructor checks first: its device, then a floating-point dtype the device holds.
_DEVICE_AND_DTYPE = {"device": Given(normalize_device), "dtype": Given(validate_float_dtype, earlier=["device"])}
_CLASSES = Whole(2, hint="a classifier needs two classes or more")


def _method(method: str) -> str:
    if method not in METHODS:
        raise BadInputError(f"method must be one of {METHODS}, got {method!r}")
    return method


def _chain_backward(jac_fn: Callable[[], Any], G_T: Any, method: str, step: Callable[[int, Any], Any],
                    T: int, xp: Any, elements_fn: Callable[[], Any] | None = None) -> Any:
    """G (T+1, B, n) by the chosen method; ``step(t, G[t+1]) -> G[t]`` for the classic loop;
    ``elements_fn()`` builds the scan's sequence directly (else it is made from ``jac_fn()``)."""
    if method == "sequential":
        G = xp.empty((T + 1,) + G_T.shape, dtype=G_T.dtype)
        G[T] = G_T
        for t in range(T - 1, -1, -1):          # T dependent steps, no Jacobian formed
            G[t] = step(t, G[t + 1])
        return G
    if method == "scan" and elements_fn is not None:
        return backprop_scan_elements(elements_fn())
    J = jac_fn()
    if method == "fast":
        return backprop_chunked(J, G_T)
    return backprop_sequential(J, G_T) if method == "jacobian" else backprop_scan(J, G_T)


# ------------------------------------------------------------------ the RNN

class TanhRNN:
    """A vanilla tanh RNN with a linear readout of its last hidden state.

    Parameters
    ----------
    input_size, hidden_size, n_classes : sizes (the paper: 1, 20, 10).
    seed : weights are drawn from ``U(-1/sqrt(h), 1/sqrt(h))`` (PyTorch's default) by this seed.
    device : ``"cpu"`` or ``"gpu"``; ``dtype``: ``"float32"`` (timing) or ``"float64"`` (checks).

    Attributes
    ----------
    params : dict of arrays ``W_ih (h, d)``, ``W_hh (h, h)``, ``b_ih``, ``b_hh (h,)``,
        ``W_out (c, h)``, ``b_out (c,)`` on ``device`` (PyTorch's ``nn.RNN`` layout).
    """

    #: On a GPU, ``backward(cache, "fast")`` records its scan once as a CUDA graph and replays it.
    capture_graph = True

    @arguments(input_size=Whole(hint="numbers per input step"), hidden_size=Whole(hint="the state size"),
               n_classes=_CLASSES, **_DEVICE_AND_DTYPE)
    def __init__(self, input_size: int = 1, hidden_size: int = 20, n_classes: int = 10, seed: int = 0,
                 device: str = "cpu", dtype: Any = "float32"):
        self._plans: dict = {}
        self.input_size, self.hidden_size, self.n_classes = input_size, hidden_size, n_classes
        self.device, self.dtype, h = device, dtype, hidden_size
        _validate_draw(h * (self.input_size + h + 2) + self.n_classes * (h + 1), self.device, self.dtype,
                       what=f"the weights of an RNN with hidden_size={h:,}, input_size={self.input_size:,}, "
                            f"n_classes={self.n_classes:,}")
        self.xp = get_xp(self.device)
        rng = np.random.default_rng(seed)
        k = 1.0 / np.sqrt(h)
        shapes = {"W_ih": (h, self.input_size), "W_hh": (h, h), "b_ih": (h,), "b_hh": (h,),
                  "W_out": (self.n_classes, h), "b_out": (self.n_classes,)}
        self.params = {name: to_device(rng.uniform(-k, k, s), self.device, self.dtype)
                       for name, s in shapes.items()}

    @arguments(T=Whole(hint="the sequence length"), batch=Whole())
    def example_data(self, T: int, batch: int = 16, seed: int = 1) -> tuple[Any, Any]:
        """Random inputs ``x (T, batch, input_size)`` and labels ``(batch,)`` on the model's device."""
        _validate_draw(T * batch * self.input_size, self.device, self.dtype,
                       what=f"inputs of T={T:,} steps x batch {batch:,} x {self.input_size:,} numbers")
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((T, batch, self.input_size))
        y = rng.integers(0, self.n_classes, batch)
        return to_device(x, self.device, self.dtype), to_device(y, self.device)

    def forward(self, x: Any, labels: Any, h0: Any = None) -> tuple[float, dict]:
        """Run the RNN over ``x (T, B, input_size)``; return ``(loss, cache)``.

        The cache keeps the inputs and every hidden state ``hs (T+1, B, h)``
        (``hs[0] = h0``): all that any of the three backward methods needs.
        """
        xp, p = self.xp, self.params
        x = xp.asarray(x)
        if x.ndim != 3 or x.shape[2] != self.input_size or x.shape[0] < 1:
            raise BadInputError(f"x must have shape (T, batch, {self.input_size}) with T >= 1, "
                                f"got {tuple(x.shape)}")
        T, B = int(x.shape[0]), int(x.shape[1])
        h = self.hidden_size
        require_fits((T + 1) * B * h * self.dtype.itemsize, self.device, what="the RNN's hidden states")
        labels = xp.asarray(labels)
        if labels.shape != (B,):
            raise BadInputError(f"labels must have shape ({B},), one class per sequence; got "
                                f"{tuple(labels.shape)}")
        hs = xp.empty((T + 1, B, h), dtype=self.dtype)
        hs[0] = 0 if h0 is None else h0
        xin = x @ p["W_ih"].T + (p["b_ih"] + p["b_hh"])   # the input part of every step at once
        W_hh_T = p["W_hh"].T
        for t in range(T):                                 # T dependent steps
            hs[t + 1] = xp.tanh(xin[t] + hs[t] @ W_hh_T)
        logits = hs[T] @ p["W_out"].T + p["b_out"]
        loss, lcache = softmax_cross_entropy(logits, labels)        # lesson 01's loss
        return float(loss), {"x": x, "hs": hs, "dlogits": softmax_cross_entropy_backward(lcache)}

    def jacobians(self, cache: dict) -> Any:
        """``J (T, B, h, h)``: ``J[t] = ∂h_{t+1}/∂h_t = diag(1 - h_{t+1}²) · W_hh`` per sequence."""
        hs = cache["hs"]
        T, B, h = hs.shape[0] - 1, hs.shape[1], hs.shape[2]
        require_fits(2 * T * B * h * h * self.dtype.itemsize, self.device,
                     what=f"{T:,} × {B} Jacobians of {h}×{h}")
        return (1 - hs[1:] ** 2)[..., :, None] * self.params["W_hh"]

    def scan_elements(self, cache: dict, G_T: Any) -> Any:
        """The scan's sequence ``[G_T as a column, J_{T-1}ᵀ, ..., J_0ᵀ]``, written in one pass.

        Equal to ``course.bppsa.scan_elements(self.jacobians(cache), G_T)``, but each
        ``J_tᵀ = W_hhᵀ · diag(1 - h_{t+1}²)`` goes straight into its slot: no separate
        Jacobian array, no second copy (this is BPPSA's "Jacobian generation").
        """
        hs, W = cache["hs"], self.params["W_hh"]
        T, B, h = hs.shape[0] - 1, hs.shape[1], hs.shape[2]
        require_fits(scan_memory(T, h, B, self.dtype.itemsize)["peak"], self.device,
                     what=f"the scan over {T + 1:,} × {B} matrices of {h}×{h}")
        elems = self.xp.empty((T + 1, B, h, h), dtype=self.dtype)
        elems[0] = 0
        elems[0, :, :, 0] = G_T
        d = (1 - hs[:0:-1] ** 2)[..., None, :]             # tanh' at steps T, T-1, ..., 1
        self.xp.multiply(W.T, d, out=elems[1:])             # W_hhᵀ · diag(d): scale the columns
        return elems

    def backward(self, cache: dict, method: str = "sequential") -> dict:
        """Gradients of the loss for every parameter, ``x`` and ``h0``; also ``G`` = dL/dh_t.

        ``method``: ``"sequential"`` (classic), ``"jacobian"``, ``"scan"`` (BPPSA) or ``"fast"`` (BPPSA
        without copies: :func:`course.bppsa.fast.rnn_hidden_gradients`, and every reduction one GEMM).
        """
        if method == "fast":
            return self._backward_fast(cache)
        _method(method)
        xp, p = self.xp, self.params
        hs, x = cache["hs"], cache["x"]
        T = hs.shape[0] - 1
        dlogits = cache["dlogits"]
        grads = {"W_out": dlogits.T @ hs[T], "b_out": dlogits.sum(axis=0)}
        G_T = dlogits @ p["W_out"]                          # dL/dh_T
        W_hh = p["W_hh"]
        d = 1 - hs[1:] ** 2                                 # tanh' at every step, all at once

        def step(t, g):                                     # G[t] = W_hhᵀ (d_t ⊙ G[t+1])
            return (g * d[t]) @ W_hh

        G = _chain_backward(lambda: self.jacobians(cache), G_T, method, step, T, xp,
                            elements_fn=lambda: self.scan_elements(cache, G_T))
        da = G[1:] * d                                      # dL/d(pre-activation) at steps 1..T
        both = ([0, 1], [0, 1])                             # sum over time steps and the batch
        grads["W_hh"] = xp.tensordot(da, hs[:-1], axes=both)
        grads["W_ih"] = xp.tensordot(da, x, axes=both)
        grads["b_ih"] = grads["b_hh"] = da.sum(axis=(0, 1))
        grads["x"] = da @ p["W_ih"]
        grads["h0"] = G[0]
        grads["G"] = G
        return grads

    def _backward_fast(self, cache: dict) -> dict:
        """``backward(cache, "fast")``: the hidden-state gradients by :class:`~course.bppsa.fast.RNNBackwardPlan`
        (on a GPU replayed as one CUDA graph when ``capture_graph``), and each reduction over time and batch
        one GEMM on a contiguous ``(T·B, h)`` array (no ``sum(axis=(0, 1))``, which CuPy runs without its
        one-pass library path)."""
        xp, p = self.xp, self.params
        hs, x, dlogits = cache["hs"], cache["x"], cache["dlogits"]
        T, B, h = hs.shape[0] - 1, hs.shape[1], hs.shape[2]
        G_T = dlogits @ p["W_out"]
        d = 1 - hs[1:] ** 2
        key = (T, B, id(p["W_hh"]))
        if key not in self._plans:                          # buffers (and on a GPU the CUDA graph) made once
            self._plans = {key: RNNBackwardPlan(T, B, h, p["W_hh"], graph=self.device == "gpu" and self.capture_graph)}
        G = self._plans[key](d, G_T).copy()                 # the plan's buffer is reused by its next call
        da = (G[1:] * d).reshape(T * B, h)
        ones = xp.ones((1, T * B), dtype=da.dtype)
        grads = {"W_out": dlogits.T @ hs[T], "b_out": dlogits.sum(axis=0),
                 "W_hh": da.T @ hs[:-1].reshape(T * B, h), "W_ih": da.T @ x.reshape(T * B, self.input_size)}
        grads["b_ih"] = grads["b_hh"] = (ones @ da)[0]
        grads["x"] = (da @ p["W_ih"]).reshape(T, B, self.input_size)
        grads["h0"] = G[0]
        grads["G"] = G
        return grads

    def loss(self, x: Any, labels: Any, h0: Any = None) -> float:
        return self.forward(x, labels, h0)[0]


# ------------------------------------------------------------------ the deep MLP

class MLPChain:
    """``depth`` square layers ``x_{l+1} = act(x_l W_lᵀ + b_l)``, then a linear readout.

    The framing of the seed: a deep network is a chain of layers, and its
    Jacobians ``∂x_{l+1}/∂x_l = diag(act'(z_l)) · W_l`` are the matrices BPPSA scans
    over (here each layer has its own W, unlike the RNN).

    Parameters
    ----------
    width, depth, n_classes : sizes.  ``activation``: ``"tanh"`` or ``"relu"``.
    """

    @arguments(width=Whole(hint="numbers per layer"), depth=Whole(hint="the number of layers"), n_classes=_CLASSES,
               activation=OneOf("tanh", "relu"), **_DEVICE_AND_DTYPE)
    def __init__(self, width: int = 16, depth: int = 8, n_classes: int = 10, activation: str = "tanh",
                 seed: int = 0, device: str = "cpu", dtype: Any = "float32"):
        self.width, self.depth, self.n_classes, self.activation = width, depth, n_classes, activation
        self.device, self.dtype, n, L = device, dtype, width, depth
        _validate_draw(L * n * (n + 1) + self.n_classes * (n + 1), self.device, self.dtype,
                       what=f"the weights of {L:,} layers of width {n:,}")
        self.xp = get_xp(self.device)
        rng = np.random.default_rng(seed)
        gain = np.sqrt(2.0 / n) if activation == "relu" else 1.0 / np.sqrt(n)
        self.params = {
            "W": to_device(rng.standard_normal((L, n, n)) * gain, self.device, self.dtype),
            "b": to_device(rng.standard_normal((L, n)) * 0.1, self.device, self.dtype),
            "W_out": to_device(rng.standard_normal((self.n_classes, n)) / np.sqrt(n), self.device, self.dtype),
            "b_out": to_device(np.zeros(self.n_classes), self.device, self.dtype),
        }

    @arguments(batch=Whole())
    def example_data(self, batch: int = 16, seed: int = 1) -> tuple[Any, Any]:
        _validate_draw(batch * self.width, self.device, self.dtype,
                       what=f"inputs of batch {batch:,} x width {self.width:,}")
        rng = np.random.default_rng(seed)
        return (to_device(rng.standard_normal((batch, self.width)), self.device, self.dtype),
                to_device(rng.integers(0, self.n_classes, batch), self.device))

    def _act(self, z):
        return self.xp.tanh(z) if self.activation == "tanh" else self.xp.maximum(z, 0)

    def _dact(self, y):                                     # act'(z) from the output y = act(z)
        return 1 - y ** 2 if self.activation == "tanh" else (y > 0).astype(y.dtype)

    def forward(self, x: Any, labels: Any) -> tuple[float, dict]:
        """Run the layers; the cache keeps every layer output ``xs (L+1, B, n)``."""
        xp, p = self.xp, self.params
        x = xp.asarray(x)
        if x.ndim != 2 or x.shape[1] != self.width:
            raise BadInputError(f"x must have shape (batch, {self.width}), got {tuple(x.shape)}")
        xs = xp.empty((self.depth + 1,) + x.shape, dtype=self.dtype)
        xs[0] = x
        for l in range(self.depth):
            xs[l + 1] = self._act(xs[l] @ p["W"][l].T + p["b"][l])
        logits = xs[-1] @ p["W_out"].T + p["b_out"]
        loss, lcache = softmax_cross_entropy(logits, xp.asarray(labels))
        return float(loss), {"xs": xs, "dlogits": softmax_cross_entropy_backward(lcache)}

    def jacobians(self, cache: dict) -> Any:
        """``J (L, B, n, n)``: ``J[l] = diag(act'(z_l)) · W_l`` for each example."""
        xs = cache["xs"]
        return self._dact(xs[1:])[..., :, None] * self.params["W"][:, None]

    def backward(self, cache: dict, method: str = "sequential") -> dict:
        """Gradients of ``W (L, n, n)``, ``b``, ``W_out``, ``b_out`` and the input ``x``; also ``G``."""
        _method(method)
        xp, p = self.xp, self.params
        xs, dlogits = cache["xs"], cache["dlogits"]
        L = self.depth
        grads = {"W_out": dlogits.T @ xs[-1], "b_out": dlogits.sum(axis=0)}
        G_L = dlogits @ p["W_out"]
        d = self._dact(xs[1:])

        def step(l, g):
            return (g * d[l]) @ p["W"][l]

        G = _chain_backward(lambda: self.jacobians(cache), G_L, method, step, L, xp)
        dz = G[1:] * d
        grads["W"] = xp.einsum("lbi,lbj->lij", dz, xs[:-1])
        grads["b"] = dz.sum(axis=1)
        grads["x"] = G[0]
        grads["G"] = G
        return grads


# ------------------------------------------------------------------ gradient checking

def _require_float64(model: Any) -> None:
    if np.dtype(model.dtype) != np.float64:
        raise BadInputError(f"finite differences need a float64 model (got {model.dtype}); build it "
                            "with dtype='float64'.")


@arguments(n_checks=Whole(hint="0 would check nothing and report an error of 0"), then=_require_float64)
def finite_difference_check(model: Any, x: Any, labels: Any, method: str = "scan", n_checks: int = 12,
                            eps: float = 1e-6, seed: int = 0) -> dict:
    """Compare ``model.backward(..., method)`` with central differences of the loss.

    Checks ``n_checks`` randomly chosen entries of every parameter (and of ``x``)
    on a float64 model; returns ``{name: relative error}`` (:func:`course.backprop.rel_error`: the
    largest entry's error over the largest entry).  Values near 1e-7 or below mean the analytic
    gradient is right.
    """
    x = model.xp.asarray(x)  # perturbed in place below, so a list becomes an array first
    loss, cache = model.forward(x, labels)
    grads = model.backward(cache, _method(method))
    rng = np.random.default_rng(seed)
    out = {}
    for name, arr in (dict(model.params) | {"x": x}).items():
        idx = rng.choice(arr.size, size=min(n_checks, arr.size), replace=False)
        numeric = central_differences(lambda: model.forward(x, labels)[0], arr, eps, idx)
        out[name] = rel_error(numeric, to_numpy(grads[name]).reshape(-1)[idx])
    return out
