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

from ..checking import call_learner

__all__ = ["check_bppsa_operator", "check_rnn_jacobian_t", "check_backprop_sequential"]


def _call(fn: Callable, *args: Any) -> tuple[bool, Any]:
    """(ok, result); prints the right message for a stub or a crash."""
    return call_learner(fn, *args)


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
    out = np.asarray(out)
    if not _shape_ok(out, (5, 3, 3)):
        return False
    want = b @ a
    if np.allclose(out, want):
        from ..scan.algorithms import blelloch_scan
        from .algorithm import backprop_sequential, gradients_from_scan, scan_elements

        J, g = rng.standard_normal((9, 3, 3)) * 0.6, rng.standard_normal(3)
        prods = blelloch_scan(scan_elements(J, g), op=fn, identity=np.eye(3), exclusive=False)
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
    out = np.asarray(out)
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
    out = np.asarray(out)
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
