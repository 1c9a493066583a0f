"""Lesson 08: attention's backward pass, naive (store the probabilities) and FlashAttention's (recompute them).

The forward pass, row by row: ``S = q kᵀ · scale``, ``P = softmax(S)``, ``out = P v``.  Going back from
``dout = ∂L/∂out`` (lesson 01's rules, one line per line of the forward):

    dv = Pᵀ dout                         out = P v
    dP = dout vᵀ
    dS = P ⊙ (dP - D),  D_i = Σ_j P_ij dP_ij     the softmax's backward, row by row
    dq = dS k · scale,  dk = dSᵀ q · scale       S = q kᵀ · scale

The softmax's row sum has a shortcut: ``D_i = Σ_j P_ij (dout_i · v_j) = dout_i · out_i``, so it needs
the output, not P.

* :func:`naive_attention_backward` uses the probabilities the forward pass stored
  (:func:`attention_probabilities`): two ``n × n_k`` arrays per head kept from the forward to the backward.
* :func:`flash_attention_backward` stores nothing of that size.  The forward pass saved each row's
  log-sum-exp, ``lse_i = log Σ_j exp(S_ij)``, so a tile of probabilities is rebuilt exactly where it is
  needed: ``P_ij = exp(S_ij - lse_i)``, one ``block_q × block_k`` tile at a time (the scores are computed
  again: FLOPs spent to save memory, lesson 01's checkpointing at the scale of one layer).  The key blocks
  are the outer loop, so each key block's ``dk`` and ``dv`` are summed in place while ``dq`` gathers over
  the outer loop (FlashAttention-2's order).

>>> import numpy as np  # noqa: F401  (the examples below use it)
>>> from course.attention.forward import flash_attention
>>> rng = np.random.default_rng(1)
>>> q, k, v, dout = rng.normal(size=(4, 6, 3))
>>> out, lse = flash_attention(q, k, v, block_q=4, block_k=4)
>>> flash = flash_attention_backward(q, k, v, out, lse, dout, block_q=4, block_k=4)
>>> naive = naive_attention_backward(q, k, v, attention_probabilities(q, k), dout)
>>> all(np.allclose(a, b) for a, b in zip(flash, naive))
True
"""

from __future__ import annotations

from typing import Any

import numpy as np  # noqa: F401  (the examples below use it)

from ..arguments import Whole, arguments
from ..errors import BadInputError
from .forward import tile_schedule, validate_attention

__all__ = ["attention_probabilities", "naive_attention_backward", "flash_attention_backward", "validate_backward",
           "SAVED_FOR_BACKWARD"]

#: What each backward pass needs kept from the forward pass.
SAVED_FOR_BACKWARD = {"naive": "the probabilities P: n × n_k numbers per head",
                      "flash": "the output and the log-sum-exp: n × (d_v + 1) numbers per head"}


def validate_backward(q: Any, k: Any, v: Any, saved: dict, dout: Any, causal: bool = False,
                      scale: float | None = None, memory: str = "tiled", block_q: int = 64,
                      block_k: int = 64) -> tuple[Any, ...]:
    """``(q, k, v, *saved arrays, dout, scale, xp)``, checked as :func:`~course.attention.forward.validate_attention`
    checks the forward's arguments, and each saved array (``saved``: name -> array) and ``dout`` against the
    shape the forward gave it: ``out`` and ``dout`` ``(..., n, d_v)``, ``lse`` ``(..., n)``, ``probs``
    ``(..., n, n_k)``.

    >>> validate_backward(np.ones((2, 1)), np.ones((2, 1)), np.ones((2, 1)), {}, np.ones((2, 1)))[-2]
    1.0
    """
    q, k, v, scale, xp = validate_attention(q, k, v, causal, scale, memory, block_q, block_k)
    lead, n, n_k, d_v = q.shape[:-2], q.shape[-2], k.shape[-2], v.shape[-1]
    want = {"out": lead + (n, d_v), "lse": lead + (n,), "probs": lead + (n, n_k), "dout": lead + (n, d_v)}
    arrays = []
    for name, a in [*saved.items(), ("dout", dout)]:
        a = xp.asarray(a)
        if tuple(a.shape) != want[name]:
            raise BadInputError(f"{name} must have shape {want[name]} (what the forward pass gave for these q, k "
                                f"and v); got {tuple(a.shape)}.")
        if a.dtype.kind not in "fiu":
            raise BadInputError(f"{name} must hold real numbers; got dtype {a.dtype}.")
        arrays.append(a.astype(q.dtype, copy=False))
    return (q, k, v, *arrays, scale, xp)


def attention_probabilities(q: Any, k: Any, causal: bool = False, scale: float | None = None) -> Any:
    """``P = softmax(q kᵀ · scale)`` row by row, ``(..., n, n_k)``: what a naive forward pass keeps for its backward.

    >>> attention_probabilities(np.zeros((1, 2)), np.zeros((3, 2)))
    array([[0.33333333, 0.33333333, 0.33333333]])
    """
    q, k, _, scale, xp = validate_attention(q, k, k, causal, scale, memory="naive")
    s = (q @ xp.swapaxes(k, -1, -2)) * scale
    if causal:
        s = xp.where(xp.tri(q.shape[-2], k.shape[-2], dtype=bool), s, -xp.inf)
    p = xp.exp(s - s.max(axis=-1, keepdims=True))
    return p / p.sum(axis=-1, keepdims=True)


def naive_attention_backward(q: Any, k: Any, v: Any, probs: Any, dout: Any,
                             scale: float | None = None) -> tuple[Any, Any, Any]:
    """``(dq, dk, dv)`` from the stored probabilities ``probs`` (masked entries of a causal P are 0, so the
    mask needs no second mention).

    >>> p = attention_probabilities(np.zeros((1, 1)), np.zeros((2, 1)))
    >>> naive_attention_backward(np.zeros((1, 1)), np.zeros((2, 1)), np.eye(2)[:, :1], p, np.ones((1, 1)))[2]
    array([[0.5],
           [0.5]])
    """
    q, k, v, p, dout, scale, xp = validate_backward(q, k, v, {"probs": probs}, dout, scale=scale, memory="naive")
    t = xp.swapaxes
    dv = t(p, -1, -2) @ dout                                    # out = P v
    dp = dout @ t(v, -1, -2)
    ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True))        # the softmax, row by row
    return (ds @ k) * scale, (t(ds, -1, -2) @ q) * scale, dv    # S = q kᵀ · scale


@arguments(block_q=Whole(hint="query rows per tile"), block_k=Whole(hint="keys per tile"))
def flash_attention_backward(q: Any, k: Any, v: Any, out: Any, lse: Any, dout: Any, causal: bool = False,
                             scale: float | None = None, block_q: int = 64,
                             block_k: int = 64) -> tuple[Any, Any, Any]:
    """``(dq, dk, dv)`` from the forward's output and log-sum-exp, recomputing each tile of P.

    ``out`` and ``lse`` are what :func:`~course.attention.forward.flash_attention` returned for the same
    ``q, k, v, causal, scale``; ``dout`` is ∂L/∂out.  At most ``block_q × block_k`` probabilities exist at once.

    >>> q = k = v = np.eye(2)
    >>> dq, dk, dv = flash_attention_backward(q, k, v, *__import__("course").attention.flash_attention(q, k, v),
    ...                                       np.ones((2, 2)), block_q=1, block_k=1)
    >>> np.round(dv, 6)
    array([[1., 1.],
           [1., 1.]])
    """
    q, k, v, out, lse, dout, scale, xp = validate_backward(q, k, v, {"out": out, "lse": lse}, dout, causal, scale,
                                                           block_q=block_q, block_k=block_k)
    t = xp.swapaxes
    big_d = (dout * out).sum(axis=-1)                           # D_i = dout_i · out_i: no P needed
    dq, dk, dv = xp.zeros_like(q), xp.zeros_like(k), xp.zeros_like(v)
    for i0, i1, j0, j1 in tile_schedule(q.shape[-2], k.shape[-2], block_q, block_k, causal, order="key"):
        qi, kj, vj, doi = q[..., i0:i1, :], k[..., j0:j1, :], v[..., j0:j1, :], dout[..., i0:i1, :]
        s = (qi @ t(kj, -1, -2)) * scale
        if causal and j1 - 1 > i0:                              # the tile reaches above the diagonal
            s = xp.where(xp.arange(j0, j1)[None, :] <= xp.arange(i0, i1)[:, None], s, -xp.inf)
        p = xp.exp(s - lse[..., i0:i1, None])                   # the forward's probabilities, rebuilt
        dv[..., j0:j1, :] += t(p, -1, -2) @ doi
        ds = p * (doi @ t(vj, -1, -2) - big_d[..., i0:i1, None])
        dq[..., i0:i1, :] += (ds @ kj) * scale
        dk[..., j0:j1, :] += (t(ds, -1, -2) @ qi) * scale
    return dq, dk, dv

