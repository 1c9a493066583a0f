"""Checks for lesson 05's exercises (BPPSA).

* :func:`check_bppsa_operator` -- ``op(a, b)``, the scan operator with the right operand order;
* :func:`check_rnn_jacobian_t` -- the transposed Jacobian of one tanh RNN step;
* :func:`check_backprop_sequential` -- the sequential backprop loop over given Jacobians.

Each runs the learner's function on fresh random inputs, compares it with the
course's implementation, prints what is wrong (or that it is right) and returns a bool.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..backprop.gradcheck import central_differences
from ..grading import array_mismatch, call_learner, real_array, verdict
from ..scan import blelloch_scan

__all__ = ["check_bppsa_operator", "check_rnn_jacobian_t", "check_backprop_sequential", "check_bppsa_backward"]


def _call(fn: Callable, *args: Any) -> tuple[bool, Any]:
    """(ok, the result as an array of real numbers); prints the right message for a stub, a crash, or a
    result that is not real numbers (complex, strings, ...)."""
    ok, out = call_learner(fn, *args)
    if not ok:
        return False, None
    _, unreadable = real_array("✗ your result", out)
    if unreadable:
        print(unreadable)
        return False, None
    return True, np.asarray(out)


def _shape_ok(out: Any, want: tuple) -> bool:
    shape = getattr(out, "shape", None)
    if shape is None:
        print(f"✗ expected an array of shape {want}, got {type(out).__name__}.")
        return False
    if tuple(shape) != tuple(want):
        print(f"✗ wrong shape: expected {want}, got {tuple(shape)}.")
        return False
    return True


def check_bppsa_operator(fn: Callable) -> bool:
    """Check ``fn(a, b)``: stacks of matrices, ``a`` earlier, ``b`` later -> ``b @ a`` (A ◇ B = B·A)."""
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((5, 3, 3)), rng.standard_normal((5, 3, 3))
    ok, out = _call(fn, a, b)
    if not ok:
        return False
    if not _shape_ok(out, (5, 3, 3)):
        return False
    want = b @ a
    if np.allclose(out, want):
        from ..scan.algorithms import blelloch_scan
        from .algorithm import backprop_sequential, gradients_from_scan, scan_elements

        J, g = rng.standard_normal((9, 3, 3)) * 0.6, rng.standard_normal(3)
        ok, prods = _call(blelloch_scan, scan_elements(J, g), fn, np.eye(3), False)
        if not ok:
            return False
        if np.allclose(gradients_from_scan(prods), backprop_sequential(J, g)):
            print("✓ right: b @ a — the later transposed Jacobian multiplies from the left, and the "
                  "Blelloch scan with your operator reproduces sequential backprop.")
            return True
        print("✗ right on one pair, but the scan with it disagrees with sequential backprop.")
        return False
    if np.allclose(out, a @ b):
        print("✗ operand order: you computed a @ b. In the scan `a` is the EARLIER part of the chain "
              "(it contains the gradient), so the LATER factor `b` must multiply from the left: b @ a.")
    elif np.allclose(out, np.swapaxes(a @ b, -1, -2)) or np.allclose(out, np.swapaxes(b @ a, -1, -2)):
        print("✗ you transposed the product. The elements are already transposed Jacobians; "
              "just multiply them, later one on the left.")
    elif np.allclose(out, a * b) or np.allclose(out, b * a):
        print("✗ that is the elementwise product (*); use the matrix product (@).")
    else:
        print("✗ not the product b @ a (nor a @ b). Use the matrix product of the two stacks.")
    return False


def check_rnn_jacobian_t(fn: Callable) -> bool:
    """Check ``fn(W_hh, h_next)`` -> ``(B, h, h)``: ``J_tᵀ = W_hhᵀ · diag(1 - h_next²)`` per sequence.

    ``h_next (B, h)`` is the hidden state *after* the step, ``tanh(a)``.
    """
    rng = np.random.default_rng(11)
    B, h = 4, 5
    W = rng.standard_normal((h, h)) / np.sqrt(h)
    h_next = np.tanh(rng.standard_normal((B, h)))
    ok, out = _call(fn, W, h_next)
    if not ok:
        return False
    if out.shape == (h, h):
        print(f"✗ shape {(h, h)}: one matrix for the whole batch. Each of the {B} sequences has its own "
              f"tanh', so return a stack of shape {(B, h, h)}.")
        return False
    if not _shape_ok(out, (B, h, h)):
        return False
    d = 1 - h_next ** 2
    want = W.T[None] * d[:, None, :]                       # Wᵀ · diag(d): scales the columns
    if np.allclose(out, want):
        print("✓ right: Jᵀ = W_hhᵀ · diag(1 − h²) for every sequence of the batch.")
        return True
    J = d[:, :, None] * W[None]
    if np.allclose(out, J):
        print("✗ that is the Jacobian J = diag(1 − h²) · W_hh itself; backprop needs its transpose Jᵀ.")
    elif np.allclose(out, W.T[None] * (1 - np.tanh(h_next) ** 2)[:, None, :]):
        print("✗ you applied tanh' to h_next, but h_next is already tanh(a): tanh'(a) = 1 − h_next².")
    elif np.allclose(out, W.T[None] * (1 - h_next)[:, None, :]):
        print("✗ tanh'(a) = 1 − tanh(a)², squared: use 1 − h_next**2.")
    elif np.allclose(out, np.broadcast_to(W.T, out.shape)) or np.allclose(out, np.broadcast_to(W, out.shape)):
        print("✗ the tanh factor diag(1 − h_next²) is missing.")
    elif np.allclose(out, W[None] * d[:, None, :]):
        print("✗ close: you scaled the columns of W_hh, but it must be W_hh transposed (W_hh.T).")
    else:
        print("✗ not Jᵀ = W_hhᵀ · diag(1 − h_next²). Hint: (W.T * d[:, None, :]) scales the columns of W.T.")
    return False


def check_backprop_sequential(fn: Callable) -> bool:
    """Check ``fn(jacobians (T, n, n), grad (n,))`` -> ``G (T+1, n)`` with ``G[t] = J[t]ᵀ G[t+1]``."""
    from .algorithm import backprop_sequential

    rng = np.random.default_rng(5)
    T, n = 6, 4
    J, g = rng.standard_normal((T, n, n)) / 2, rng.standard_normal(n)
    ok, out = _call(fn, J, g)
    if not ok:
        return False
    if out.shape == (T, n):
        print(f"✗ shape {(T, n)}: keep G[T] = grad as the last row too, so G has T+1 = {T + 1} rows.")
        return False
    if not _shape_ok(out, (T + 1, n)):
        return False
    want = backprop_sequential(J, g)
    if np.allclose(out, want):
        print("✓ right: T dependent steps, each G[t] = J[t]ᵀ · G[t+1].")
        return True
    if not np.allclose(out[T], g):
        print("✗ G[T] must be the incoming gradient `grad` itself.")
        return False
    if np.allclose(out, backprop_sequential(np.swapaxes(J, -1, -2), g)):
        print("✗ you multiplied by J[t], not by its transpose: use J[t].T @ G[t+1].")
    else:
        print("✗ wrong values. Walk t from T-1 down to 0, and use G[t+1] (the step after t).")
    return False


def _rnn_chain(T: int, B: int, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A tanh RNN's ``W_hh``, its inputs' contributions ``u`` and its states: ``h_{t+1} = tanh(h_t W_hhᵀ + u_t)``."""
    W = rng.standard_normal((n, n)) / np.sqrt(n)
    u = rng.standard_normal((T, B, n)) * 0.5
    hs = np.empty((T + 1, B, n))
    hs[0] = np.tanh(rng.standard_normal((B, n)))
    for t in range(T):
        hs[t + 1] = np.tanh(hs[t] @ W.T + u[t])
    return W, u, hs


def _rnn_gradients_fd(W: np.ndarray, u: np.ndarray, hs: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """The oracle: dL/dh_t for L = sum(grad · h_T), by centred finite differences of the forward pass."""
    T = u.shape[0]
    G = np.empty_like(hs)
    for t in range(T + 1):
        h = hs[t].copy()

        def loss(h=h, t=t) -> float:
            state = h
            for s in range(t, T):
                state = np.tanh(state @ W.T + u[s])
            return float(np.sum(grad * state))

        G[t] = central_differences(loss, h).reshape(h.shape)
    return G


def _bppsa_variant(W: np.ndarray, hs: np.ndarray, grad: np.ndarray, op: Callable, transpose: bool = True,
                   exclusive: bool = False) -> np.ndarray:
    """The scan's answer built with a given operator and Jacobian orientation (typical wrong answers)."""
    T, (B, n) = hs.shape[0] - 1, grad.shape
    elems = np.zeros((T + 1, B, n, n))
    elems[0, :, :, 0] = grad
    for k in range(1, T + 1):
        J = (1 - hs[T - k + 1] ** 2)[:, :, None] * W[None]           # dh_{t+1}/dh_t, t = T - k
        elems[k] = np.swapaxes(J, -1, -2) if transpose else J
    products = blelloch_scan(elems, op=op, identity=np.broadcast_to(np.eye(n), (B, n, n)), exclusive=exclusive)
    return products[::-1, :, :, 0]


def _rnn_weight_gradient_fd(W: np.ndarray, u: np.ndarray, hs: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """The oracle for dL/dW_hh: centred finite differences of L = sum(grad · h_T), run from h_0."""
    W = W.copy()

    def loss() -> float:
        state = hs[0]
        for s in range(u.shape[0]):
            state = np.tanh(state @ W.T + u[s])
        return float(np.sum(grad * state))

    return central_differences(loss, W).reshape(W.shape)


def check_bppsa_backward(fn: Callable) -> bool:
    """Check ``fn(W_hh, hs, grad, scan)`` -> ``(G, dW_hh)``: a tanh RNN's backward pass as one scan.

    ``hs`` holds the states ``h_0 .. h_T`` (T+1, B, n) of ``h_{t+1} = tanh(h_t W_hhᵀ + u_t)``, ``grad`` is
    ``dL/dh_T`` (B, n), and ``scan`` is :func:`course.scan.blelloch_scan`, which ``fn`` must call.
    ``G[t] = dL/dh_t`` (T+1, B, n) and ``dW_hh = dL/dW_hh`` (n, n) are compared with centred finite
    differences of the forward pass.
    """
    name = "check_bppsa_backward"
    rng = np.random.default_rng(505)
    for T, B, n in [(6, 2, 3), (1, 1, 2), (9, 3, 4)]:
        W, u, hs = _rnn_chain(T, B, n, rng)
        grad = rng.standard_normal((B, n))
        calls = []

        def scan(*args, calls=calls, **kwargs):
            calls.append(kwargs.get("exclusive", args[3] if len(args) > 3 else True))
            return blelloch_scan(*args, **kwargs)

        ok, got = call_learner(fn, W.copy(), hs.copy(), grad.copy(), scan, context=f"T = {T}, batch {B}, n = {n}")
        if not ok:
            return verdict(name, "", "")
        if not calls:
            return verdict(name, "your function never called `scan`: build the sequence grad, J_{T-1}ᵀ, ..., J_0ᵀ "
                                 "and let one scan compute every gradient.", "")
        if not isinstance(got, tuple) or len(got) != 2:
            return verdict(name, f"return the pair (G, dW_hh); got a {type(got).__name__}.", "")
        where = f"(T = {T}, batch {B}, n = {n})"
        want = _rnn_gradients_fd(W, u, hs, grad)
        later_first = lambda a, b: a @ b  # noqa: E731  (the operands of ◇ the wrong way round)
        problem = array_mismatch(f"G {where}", got[0], want, [
            (want[::-1], "G comes out reversed: the scan's element k holds G[T - k], so read the products "
                         "backwards (products[::-1])."),
            (_bppsa_variant(W, hs, grad, later_first), "the operator multiplies in the wrong order: a ◇ b = b @ a, "
                                                       "each later transposed Jacobian from the left."),
            (_bppsa_variant(W, hs, grad, lambda a, b: b @ a, transpose=False),
             "those are products of the Jacobians J_t, not of their transposes J_tᵀ (my_rnn_jacobian_t gives Jᵀ)."),
            (_bppsa_variant(W, hs, grad, lambda a, b: b @ a, exclusive=True),
             "an exclusive scan stops one short; run the inclusive one (exclusive=False)."),
        ], rtol=1e-5, atol=1e-8)
        if problem:
            return verdict(name, problem, "")
        dW = _rnn_weight_gradient_fd(W, u, hs, grad)
        pre = want[1:] * (1 - hs[1:] ** 2)
        problem = array_mismatch(f"dW_hh {where}", got[1], dW, [
            (dW.T, "it is transposed: with h_{t+1} = tanh(h_t W_hhᵀ + u_t), dW_hh = Σ_t D_tᵀ h_t where D_t is "
                   "the gradient of step t's pre-activation, (batch, n)."),
            (np.einsum("tbi,tbj->ij", want[1:], hs[:-1]), "the tanh derivative is missing: the pre-activation's "
                                                            "gradient is D_t = G[t+1] ⊙ (1 - h_{t+1}²)."),
            (np.einsum("tbi,tbj->ij", pre, hs[1:]), "pair each step's D_t with the state it READ, h_t = hs[t], "
                                                      "not the one it wrote."),
        ], rtol=1e-5, atol=1e-8)
        if problem:
            return verdict(name, problem, "")
    return verdict(name, None, "right: every G[t] and dW_hh match finite differences of the forward pass; the G "
                               "came from one inclusive scan over your Jacobians with your operator, and dW_hh from "
                               "one product over all steps at once.")
