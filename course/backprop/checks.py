"""Checks for lesson 01's exercises: the backward pass of a sigmoid, the weight gradient of a Linear layer,
and the whole backward pass of an MLP.

Each check calls your function on fresh random inputs, compares it with the
course's implementation (:mod:`course.backprop`) and prints what is wrong:
shape, a flipped sign, a constant factor, a missing factor of the chain rule,
swapped operands, or that it is right but loops in Python where one array operation would do
(counted in lines of Python run, not timed, so a busy machine cannot fail a right answer).

>>> import numpy as np
>>> check_sigmoid_backward(lambda dout, out: dout * out * (1 - out))
check_sigmoid_backward: right. dx = dout · out · (1 - out) for every shape tried.
True
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..grading import NOT_DONE, array_mismatch, call_learner, python_lines_run, real_array, run_learner, verdict
from .gradcheck import central_differences
from .layers import MLP, Linear, Sigmoid, softmax_cross_entropy, softmax_cross_entropy_backward

__all__ = ["check_sigmoid_backward", "check_linear_weight_grad", "check_mlp_backward"]

_MAX_LINES = 64  # lines of Python one call may run on a large input: a loop over rows runs hundreds


def _call(name: str, fn: Callable, *args):
    """(result, None) or (None, message) when the learner's function gave no result (see :func:`run_learner`)."""
    got, problem = run_learner(fn, *args)
    if problem == NOT_DONE:
        return None, (f"{name}: not done yet (the function still raises NotImplementedError). "
                      "Fill it in and run this cell again.")
    return got, problem and f"{name}: {problem}"


def _scale(got: np.ndarray, want: np.ndarray) -> float | None:
    """c if got ≈ c · want for one constant c (else None)."""
    denom = float(np.vdot(want, want))
    if denom == 0:
        return None
    c = float(np.vdot(got, want)) / denom
    return c if np.allclose(got, c * want, rtol=1e-5, atol=1e-8) else None


def _close(a, b) -> bool:
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-5, atol=1e-8)


def _compare(name: str, got, want: np.ndarray, shape_hint: str,
             suspects: list[tuple[np.ndarray, str]]) -> str | None:
    """None when right, else the message saying what is wrong."""
    if got is None:
        return f"{name}: your function returned None. Did you forget the `return`?"
    got, unreadable = real_array(name, got)
    if unreadable:
        return unreadable
    if got.shape != want.shape:
        for alt, msg in suspects:
            if _close(got, alt):
                return f"{name}: wrong shape {got.shape}, expected {want.shape}. {msg}"
        return f"{name}: wrong shape {got.shape}, expected {want.shape}. {shape_hint}"
    if _close(got, want):
        return None
    if not np.all(np.isfinite(got)):
        return f"{name}: your result contains NaN or inf"
    if _close(got, -want):
        return (f"{name}: the sign is flipped (you return minus the gradient). Backprop passes the "
                "gradient on; the minus sign belongs to the update p -= lr · dp.")
    for alt, msg in suspects:
        if _close(got, alt):
            return f"{name}: {msg}"
    c = _scale(got, want)
    if c is not None:
        return f"{name}: right direction but off by a constant factor {c:.4g} (every entry is {c:.4g} × the right one)."
    i = np.unravel_index(np.argmax(np.abs(got - want)), want.shape)
    return (f"{name}: wrong values. Largest error at index {tuple(int(j) for j in i)}: you gave {got[i]:.6g}, "
            f"expected {want[i]:.6g}.")


def _loops(name: str, fn: Callable, args) -> str | None:
    """A message when ``fn`` runs a Python loop over rows or elements (counted, not timed)."""
    lines, problem = run_learner(python_lines_run, fn, *args)
    if problem:
        return f"{name}: on the speed test's {np.shape(args[0])} input: {problem}"
    if lines > _MAX_LINES:
        return (f"{name}: the values are right, but on a {np.shape(args[0])} input your function ran {lines:,} "
                "lines of Python, where one array operation runs a handful. Replace Python loops by "
                "whole-array operations: that is what lets a GPU run every element at once.")
    return None


def _report(msg: str | None, ok_text: str) -> bool:
    print(ok_text if msg is None else msg)
    return msg is None


def check_sigmoid_backward(fn: Callable) -> bool:
    """Check ``fn(dout, out) -> dx``, the backward pass of a sigmoid whose forward output is ``out``.

    ``out = σ(x)`` is what the forward pass cached; ``dout`` is d loss / d out.
    The answer is ``dx = dout · σ'(x)`` with ``σ'(x) = σ(x)(1 - σ(x))``.
    """
    name = "check_sigmoid_backward"
    rng = np.random.default_rng(101)  # fixed: a check says the same thing every time it runs
    for shape in [(5, 7), (3, 11)]:
        x = rng.standard_normal(shape) * 2
        dout = rng.standard_normal(shape)
        layer = Sigmoid()
        out, cache = layer.forward(x)
        want = layer.backward(dout, cache)
        got, err = _call(name, fn, dout.copy(), out.copy())
        if err:
            return _report(err, "")
        s_out = 1 / (1 + np.exp(-out))
        msg = _compare(name, got, want, "dx must have the shape of x (and of out and dout).", [
            (want.T, "It is transposed: an element-wise gradient keeps the shape, no .T needed."),
            (out * (1 - out), "you returned σ'(x) alone: multiply by dout (the chain rule: dx = dout · σ'(x))."),
            (dout * out, "the factor (1 - out) is missing: σ'(x) = σ(x)(1 - σ(x)) = out · (1 - out)."),
            (dout * (1 - out), "the factor out is missing: σ'(x) = out · (1 - out)."),
            (dout * s_out * (1 - s_out), "you applied the sigmoid again: out already is σ(x), use it as it is."),
            (dout * (1 - out * out), "that is tanh's derivative (1 - out²); the sigmoid's is out · (1 - out)."),
            (dout * out * (1 - out) * out.shape[0], "you multiplied by the batch size: nothing to average here."),
            (dout * out * (1 - out) / out.shape[0], "you divided by the batch size: the loss's backward already did."),
        ])
        if msg:
            return _report(msg, "")
    big = (rng.standard_normal((256, 400)), 1 / (1 + np.exp(-rng.standard_normal((256, 400)))))
    slow = _loops(name, fn, big)
    return _report(slow, f"{name}: right. dx = dout · out · (1 - out) for every shape tried.")


def check_linear_weight_grad(fn: Callable) -> bool:
    """Check ``fn(x, dout) -> dW`` for a Linear layer ``out = x @ W + b``.

    ``x`` is ``(batch, n_in)``, ``dout`` is ``(batch, n_out)``; ``dW`` must have W's
    shape ``(n_in, n_out)``: ``dW = xᵀ @ dout`` (each example's contribution, summed).
    """
    name = "check_linear_weight_grad"
    rng = np.random.default_rng(102)
    for batch, n_in, n_out in [(6, 4, 3), (5, 8, 2)]:
        x = rng.standard_normal((batch, n_in))
        dout = rng.standard_normal((batch, n_out))
        layer = Linear(n_in, n_out, dtype="float64", seed=rng)
        layer.backward(dout, (x,), need_dx=False)
        want = layer.dW.copy()
        got, err = _call(name, fn, x.copy(), dout.copy())
        if err:
            return _report(err, "")
        msg = _compare(name, got, want, f"dW must have W's shape (n_in, n_out) = {want.shape}: x is "
                       f"(batch, n_in) = {x.shape} and dout is (batch, n_out) = {dout.shape}, so "
                       "contract over the batch: xᵀ @ dout.", [
                           (want.T, f"You computed doutᵀ @ x, which is dWᵀ with shape {want.T.shape}; swap the "
                                    "operands: dW = xᵀ @ dout has W's shape (n_in, n_out)."),
                           (dout @ (layer.W.T), "that is dx = dout @ Wᵀ, the gradient for the layer's input; "
                                                "the weight gradient is xᵀ @ dout."),
                           (want / batch, f"you divided by the batch size ({batch}): the 1/batch of the mean "
                                          "loss is already inside dout, which the loss's backward produced."),
                           (x[:1].T @ dout[:1], "only the first example counts: dW sums every example's "
                                                "contribution, xᵀ @ dout does that."),
                       ])
        if msg:
            return _report(msg, "")
    x, dout = rng.standard_normal((64, 100)), rng.standard_normal((64, 50))
    slow = _loops(name, fn, (x, dout))
    return _report(slow, f"{name}: right. dW = xᵀ @ dout has W's shape (n_in, n_out) for every shape tried.")


def _backward_without_activations(layers: list, caches: list, dlogits: np.ndarray) -> list:
    """A typical wrong answer: the chain rule through the Linear layers only (the activations skipped)."""
    grads, g = [], dlogits
    for layer, cache in zip(reversed(layers), reversed(caches)):
        if isinstance(layer, Linear):
            grads.append((cache[0].T @ g, g.sum(axis=0)))
            g = g @ layer.W.T
    return grads[::-1]


def _mlp_backward_problem(fn: Callable, activation: str, rng: np.random.Generator) -> str | None:
    model = MLP([5, 7, 6, 3], activation=activation, dtype="float64", seed=int(rng.integers(1 << 30)))
    x, y = rng.standard_normal((4, 5)), rng.integers(0, 3, 4)
    logits = model.forward(x)
    caches = [tuple(np.array(a) for a in c) for c in model.caches]     # copies: the learner may write on them
    dlogits = softmax_cross_entropy_backward(softmax_cross_entropy(logits, y)[1])
    linears = [layer for layer in model.layers if isinstance(layer, Linear)]

    def loss() -> float:
        return float(softmax_cross_entropy(model.forward(x), y)[0])

    # the oracle: centred finite differences of the loss, independent of any backward pass
    want = [(central_differences(loss, L.W).reshape(L.W.shape), central_differences(loss, L.b)) for L in linears]
    ok, got = call_learner(fn, list(model.layers), caches, dlogits.copy(), context=f"activation {activation!r}")
    if not ok:
        return ""
    if not isinstance(got, (list, tuple)) or len(got) != len(linears):
        n = len(got) if isinstance(got, (list, tuple)) else type(got).__name__
        return (f"return a list with one (dW, db) pair per Linear layer ({len(linears)} here, the first layer "
                f"first); got {n}.")
    shapes = [np.shape(pair[0]) if isinstance(pair, (list, tuple)) and pair else None for pair in got]
    if shapes[::-1] == [w.shape for w, _ in want] and shapes != [w.shape for w, _ in want]:
        return "your pairs are in backward order (last layer first): reverse the list before returning it."
    skipped = _backward_without_activations(model.layers, caches, dlogits)
    for k in range(len(linears) - 1, -1, -1):          # from the top: the first wrong layer is the one to fix
        pair = got[k]
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            return f"entry {k} must be a pair (dW, db) for Linear layer {k}; got a {type(pair).__name__}."
        W_want, b_want = want[k]
        where = f"Linear layer {k} ({linears[k].n_in} -> {linears[k].n_out}, activation {activation!r})"
        hint_down = ("" if k == len(linears) - 1 else
                     f" Layer {k + 1} is right, so look at what you pass down from it: dx = dout @ Wᵀ, "
                     f"then the {activation} derivative, read from the activation's cache (its output).")
        problem = array_mismatch(f"dW of {where}", pair[0], W_want, [
            (W_want.T, "it is transposed: dW = xᵀ @ dout has W's shape (n_in, n_out)."),
            (W_want / x.shape[0], "divided by the batch size: dlogits already holds the 1/batch of the mean loss."),
            (skipped[k][0], f"the {activation} derivative is missing: multiply the gradient by it on the way down."),
        ], rtol=1e-5, atol=1e-7)
        if problem:
            return problem + hint_down
        problem = array_mismatch(f"db of {where}", pair[1], b_want, [
            (np.ones((x.shape[0], 1)) * b_want[None], "sum it over the batch: db = dout.sum(axis=0)."),
            (b_want / x.shape[0], "you took the mean over the batch; dlogits is already divided by it: sum."),
        ], rtol=1e-5, atol=1e-7)
        if problem:
            return problem
    return None


def check_mlp_backward(fn: Callable) -> bool:
    """Check ``fn(layers, caches, dlogits) -> [(dW, db), ...]``, the whole backward pass of an :class:`MLP`.

    ``layers`` and ``caches`` are an MLP's ``model.layers`` and ``model.caches`` after a forward pass,
    ``dlogits`` is d loss / d logits.  The gradients are compared with centred finite differences of the
    loss (no backward pass involved) for a ReLU, a sigmoid and a tanh network of three Linear layers.
    """
    name = "check_mlp_backward"
    rng = np.random.default_rng(103)
    for activation in ("relu", "sigmoid", "tanh"):
        problem = _mlp_backward_problem(fn, activation, rng)
        if problem is not None:
            return verdict(name, problem, "")
    return verdict(name, None, "right. Every layer's dW and db match finite differences of the loss, "
                               "for ReLU, sigmoid and tanh networks.")
