"""Checks for lesson 07's exercises: the affine combine and its order, the reverse recurrence.

Each check feeds your function fresh inputs (several shapes, a single step, negative numbers),
compares it with the course's answer and says what is wrong: the operands swapped, a step off by
one, the recurrence run the wrong way.  They appear as ``course.check.<name>``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..backprop.gradcheck import central_differences
from ..grading import array_mismatch, real_array, verdict
from ..scan.algorithms import blelloch_scan
from .linear import recurrence_loop, reverse_recurrence
from .selective import PARAM_NAMES, forward, init_params

__all__ = ["check_affine_combine", "check_reverse_recurrence", "check_selective_backward"]


# ------------------------------------------------------------------ the course's answers

def affine_combine(first: tuple, second: tuple) -> tuple:
    """Compose two stacks of steps ``h -> a·h + b``: ``first`` (earlier), then ``second``.

    ``a₂·(a₁·h + b₁) + b₂ = (a₂a₁)·h + (a₂b₁ + b₂)``.

    >>> affine_combine((np.array([2.0]), np.array([1.0])), (np.array([3.0]), np.array([5.0])))
    (array([6.]), array([8.]))
    """
    (a1, b1), (a2, b2) = first, second
    return a2 * a1, a2 * b1 + b2


def state_gradients(a: Any, grad_h: Any) -> Any:
    """``g_t = grad_h_t + a_{t+1}·g_{t+1}`` from the last step back: the total ∂L/∂h_t.

    >>> state_gradients(np.array([9.0, 0.5, 0.5]), np.ones(3))
    array([1.75, 1.5 , 1.  ])
    """
    a = np.asarray(a)
    a_next = np.concatenate([a[1:], np.zeros_like(a[:1])])
    return reverse_recurrence(a_next, grad_h, method="loop")


# ------------------------------------------------------------------ helpers

def call_learner(fn: Callable, *args: Any, context: str = "") -> tuple[bool, Any]:
    """:func:`course.grading.call_learner`, imported when a check runs: ``course.check`` imports
    this module while it collects the checks, so importing it here at load time would be circular."""
    from ..grading import call_learner as call

    return call(fn, *args, context=context)


def _report(problem: str | None, ok_text: str) -> bool:
    print(problem or ok_text)
    return problem is None


def _differs(got: Any, want: np.ndarray, what: str) -> str | None:
    if got is None:
        return f"{what}: your function returned None; return the result."
    got, unreadable = real_array(what, got)
    if unreadable:
        return unreadable
    if got.shape != want.shape:
        return f"{what}: the result has shape {got.shape}, expected {want.shape}."
    if not np.allclose(got, want, atol=1e-9):
        i = np.unravel_index(int(np.argmax(np.abs(got - want))), want.shape)
        return f"{what}: at index {tuple(int(k) for k in i)} you have {got[i]:.6g}, expected {want[i]:.6g}."
    return None


def _as_op(fn: Callable) -> Callable:
    """A scan operator on stacked (…, 2) pairs made from a learner's combine of (a, b) tuples."""
    def op(x, y):
        a, b = fn((x[..., 0], x[..., 1]), (y[..., 0], y[..., 1]))
        return np.stack([np.broadcast_to(a, x[..., 0].shape), np.broadcast_to(b, x[..., 0].shape)], -1)
    return op


# ------------------------------------------------------------------ the checks

def check_affine_combine(fn: Callable) -> bool:
    """Check ``fn(first, second) -> (a, b)``: the step ``first`` followed by the step ``second``.

    ``first`` and ``second`` are ``(a, b)`` tuples of arrays of one shape (stacks of steps, any
    channel shape); the function must work elementwise on whole stacks (one call per tree level).

    >>> check_affine_combine(affine_combine)
    Correct: (a₂a₁, a₂b₁ + b₂), earlier step first; a Blelloch scan built on it solves the recurrence.
    True
    """
    rng = np.random.default_rng(7)
    for shape in ((5,), (4, 3), (1,)):
        first = (rng.uniform(-2, 2, shape), rng.normal(size=shape))
        second = (rng.uniform(-2, 2, shape), rng.normal(size=shape))
        done, got = call_learner(fn, first, second, context=f"stacks of shape {shape}")
        if not done:
            return False
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            return _report(f"Return a pair (a, b); got {type(got).__name__}.", "")
        for part, g in zip("ab", got):
            if g is not None and real_array("", g)[1]:
                return _report(real_array(f"the {part} part, stacks of shape {shape}", g)[1], "")
        want = affine_combine(first, second)
        swapped = affine_combine(second, first)
        if all(np.shape(g) == w.shape for g, w in zip(got, want)):
            if all(np.allclose(g, s) for g, s in zip(got, swapped)) and not np.allclose(got[1], want[1]):
                return _report("Operand order: you composed `second` first and then `first`. The result "
                               "must apply the EARLIER step first: h -> a₂·(a₁·h + b₁) + b₂, so the new b is "
                               "a₂·b₁ + b₂ (the later a multiplies the earlier b).", "")
            if np.allclose(got[0], want[0]) and np.allclose(got[1], first[1] + second[1]):
                return _report("Your b part is b₁ + b₂: the later step also scales what the earlier one "
                               "wrote. It should be a₂·b₁ + b₂.", "")
        for part, g, w in zip("ab", got, want):
            problem = _differs(g, w, f"the {part} part, stacks of shape {shape}")
            if problem:
                return _report(problem, "")
    for T in (1, 2, 13):
        a, b = rng.uniform(-1, 1, (T, 2)), rng.normal(size=(T, 2))
        maps = np.stack([a, b], -1)
        ident = np.stack([np.ones(2), np.zeros(2)], -1)                # (1, 0) in each channel
        done, scanned = call_learner(blelloch_scan, maps, _as_op(fn), ident, False,
                                     context=f"a Blelloch scan of {T} steps built on your combine")
        if not done:
            return False
        problem = _differs(scanned[..., 1], recurrence_loop(a, b), f"a Blelloch scan of {T} steps")
        if problem:
            return _report(problem, "")
    return _report(None, "Correct: (a₂a₁, a₂b₁ + b₂), earlier step first; a Blelloch scan built on it "
                         "solves the recurrence.")


def check_reverse_recurrence(fn: Callable) -> bool:
    """Check ``fn(a, grad_h) -> g``: the total gradient of every state, ``g_t = grad_h_t + a_{t+1}·g_{t+1}``.

    ``a`` are the forward recurrence's coefficients, shape ``(T, *channels)``, and ``grad_h[t]``
    the gradient that reaches ``h_t`` directly from the output.  Nothing comes after the last step.

    >>> check_reverse_recurrence(state_gradients)
    Correct: the gradient runs backwards through the same a, one step later (a_{t+1}), from the last step.
    True
    """
    rng = np.random.default_rng(8)
    for shape in ((6,), (5, 3), (1, 2), (17, 4)):
        a, d = rng.uniform(-1, 1, shape), rng.normal(size=shape)
        done, got = call_learner(fn, a.copy(), d.copy(), context=f"a of shape {shape}")
        if not done:
            return False
        want = state_gradients(a, d)
        if got is not None and real_array("", got)[1]:
            return _report(real_array(f"a of shape {shape}", got)[1], "")
        if got is not None and np.shape(got) == want.shape and not np.allclose(got, want) and shape[0] > 1:
            got = np.asarray(got, dtype=float)
            if np.allclose(got, reverse_recurrence(a, d, "loop")):
                return _report(f"Off by one step (T = {shape[0]}): you used a_t, but h_t reaches h_(t+1) "
                               f"through a_(t+1) (h_(t+1) = a_(t+1)·h_t + b_(t+1)). So g_t = grad_h_t + "
                               f"a_(t+1)·g_(t+1), and the last step gets grad_h only.", "")
            if np.allclose(got, recurrence_loop(a, d)) or np.allclose(got, recurrence_loop(
                    np.concatenate([np.zeros_like(a[:1]), a[1:]]), d)):
                return _report(f"Direction (T = {shape[0]}): you ran the recurrence forwards in time. A "
                               f"gradient flows from the loss back: start at the LAST step, g_(T-1) = "
                               f"grad_h_(T-1), and go towards t = 0.", "")
        problem = _differs(got, want, f"a of shape {shape}")
        if problem:
            return _report(problem, "")
    return _report(None, "Correct: the gradient runs backwards through the same a, one step later "
                         "(a_{t+1}), from the last step.")


def _selective_variant(dy: np.ndarray, cache: dict, recurrence: bool = True, sigmoid: bool = True,
                       decay_path: bool = True) -> dict:
    """The selective layer's parameter gradients with one typical slip switched on (the check's suspects)."""
    p, x, h, a = cache["params"], cache["x"], cache["h"], cache["a"]
    delta, lam, u, n = cache["delta"], cache["lam"], cache["u"], h.shape[-1]
    rows = x.reshape(-1, x.shape[-1])
    dh = dy @ p["W_C"].T
    g = reverse_recurrence(np.concatenate([a[1:], np.zeros_like(a[:1])]), dh, "loop") if recurrence else dh
    da = g * np.concatenate([np.zeros_like(h[:1]), h[:-1]])
    da_pre = da * a
    ddelta = g * u - (da_pre * lam if decay_path else 0)
    dz = ddelta / (1 + np.exp(-cache["z"])) if sigmoid else ddelta
    return {"W_C": h.reshape(-1, n).T @ dy.reshape(-1, dy.shape[-1]), "c_y": dy.sum(axis=(0, 1)),
            "log_lam": -(da_pre * delta).sum(axis=(0, 1)) * lam, "W_B": rows.T @ (g * delta).reshape(-1, n),
            "W_delta": rows.T @ dz.reshape(-1, n), "c_delta": dz.sum(axis=(0, 1))}


def check_selective_backward(fn: Callable) -> bool:
    """Check ``fn(dy, cache)`` -> ``{name: gradient}`` for every parameter of the selective layer.

    ``cache`` is what :func:`course.recurrences.forward` returned, ``dy = ∂L/∂y``. Each gradient is
    compared with centred finite differences of ``L = Σ y · dy`` through the forward pass (no backward
    pass involved), in the order a backward pass finds them: ``W_C, c_y`` (the output layer), then
    ``W_B`` (needs the state gradients g), ``log_lam``, ``W_delta``, ``c_delta``.
    """
    name = "check_selective_backward"
    rng = np.random.default_rng(707)
    order = ("W_C", "c_y", "W_B", "log_lam", "W_delta", "c_delta")
    hints = {"W_B": "W_B only needs g = ∂L/∂h (the reverse recurrence g_t = dh_t + a_{t+1} g_{t+1}) and b = Δ ⊙ u.",
             "log_lam": "a = exp(-Δ ⊙ λ) and λ = exp(log_λ): ∂L/∂log_λ = -Σ (∂L/∂a ⊙ a ⊙ Δ) ⊙ λ, with "
                        "∂L/∂a_t = g_t ⊙ h_{t-1} (h_{-1} = 0).",
             "W_delta": "Δ reaches the loss two ways, through b = Δ ⊙ u and through a = exp(-Δ ⊙ λ); then "
                        "Δ = softplus(z), whose derivative is the sigmoid of z."}
    for T, B, d_in, n, d_out in [(5, 2, 2, 3, 2), (1, 1, 1, 2, 1), (7, 3, 3, 4, 1)]:
        params = init_params(d_in=d_in, n=n, d_out=d_out, seed=int(rng.integers(1 << 30)))
        x = rng.normal(size=(T, B, d_in))
        y, cache = forward(params, x, method="loop")
        dy = rng.normal(size=y.shape)

        def loss(params=params, x=x, dy=dy) -> float:
            return float(np.sum(forward(params, x, method="loop")[0] * dy))

        want = {k: central_differences(loss, params[k]).reshape(np.shape(params[k])) for k in PARAM_NAMES}
        ok, got = call_learner(fn, dy.copy(), {k: v for k, v in cache.items()}, context=f"T = {T}, batch {B}")
        if not ok:
            return False
        if not isinstance(got, dict):
            return verdict(name, f"return a dict {{name: gradient}} with the keys {', '.join(order)}; got a "
                                 f"{type(got).__name__}.", "")
        missing = [k for k in order if k not in got]
        if missing:
            return verdict(name, f"your dict lacks {missing} (it needs {', '.join(order)}).", "")
        slips = {"the reverse recurrence is missing: g_t also receives a_{t+1} ⊙ g_{t+1} from the next step "
                 "(your my_state_gradients).": _selective_variant(dy, cache, recurrence=False),
                 "the softplus derivative is missing: dz = dΔ ⊙ sigmoid(z).":
                     _selective_variant(dy, cache, sigmoid=False),
                 "Δ also reaches the loss through a = exp(-Δ ⊙ λ): subtract ∂L/∂a ⊙ a ⊙ λ from dΔ.":
                     _selective_variant(dy, cache, decay_path=False)}
        for k in order:
            suspects = [(v[k], msg) for msg, v in slips.items() if not np.allclose(v[k], want[k], rtol=1e-5, atol=1e-8)]
            if k == "W_C":
                suspects.append((want[k].T, "it is transposed: ∂L/∂W_C = hᵀ · dy over all T·B rows, shape (n, d_out)."))
            problem = array_mismatch(f"{k} (T = {T}, batch {B}, n = {n})", got[k], want[k], suspects,
                                     rtol=1e-5, atol=1e-8)
            if problem:
                hint = f" Hint: {hints[k]}" if k in hints and "wrong values" in problem else ""
                return verdict(name, problem + hint, "")
    return verdict(name, None, "right: every parameter's gradient matches finite differences of the forward "
                               "pass, the state gradients coming from one reverse recurrence.")
