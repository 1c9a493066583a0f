"""Lesson 08: softmax as a scan.  A running (max, sum) -- and (max, sum, output) -- combined block by block.

``softmax(x)_j = exp(x_j) / Σ_i exp(x_i)`` needs two things from *all* of x before it can write one
output: the sum, and (to keep ``exp`` in range) the maximum.  Both can be carried along as x is read,
as a *state* ``(m, s)``: ``m`` the largest score seen so far, ``s = Σ exp(x_i - m)`` over the scores
seen so far.  Two states made from neighbouring pieces of x combine into the state of the whole:

    (m, s) ⊕ (m', s') = (M, s·e^(m - M) + s'·e^(m' - M)),   M = max(m, m').

Each side's sum is rescaled to the new maximum before they are added.  The operator is associative
(exactly in real arithmetic, up to rounding in floating point) with the identity ``(-inf, 0)``, so a
sequential fold, a fold over blocks, and lesson 04's Blelloch tree all give the same state, and the
softmax is ``exp(x_j - m) / s`` with the final state.  Attention carries one more part, the output
``o = Σ exp(x_i - m) · v_i``, rescaled the same way:

    (m, s, o) ⊕ (m', s', o') = (M, s·a + s'·b, o·a + o'·b),   a = e^(m - M), b = e^(m' - M).

That is the whole idea behind FlashAttention's forward pass (:mod:`course.attention.attention`).

A state is stored in the last axis of an array, ``[m, s, o_0, ..., o_{d-1}]`` (``d = 0`` for the
softmax alone), so that :func:`softmax_combine` is one vectorized call over a whole stack of pairs:
lesson 04's operator contract, earlier states in ``a``, later ones in ``b``.

>>> import numpy as np
>>> x = np.array([1.0, 3.0, 2.0, 0.5])
>>> m, s = online_softmax(x, block=2)
>>> np.allclose(np.exp(x - m) / s, np.exp(x) / np.exp(x).sum())
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..arguments import Whole, arguments
from ..devices import xp_of
from ..errors import BadInputError
from ..scan.algorithms import blelloch_scan, sequential_scan

__all__ = ["softmax_combine", "softmax_identity", "softmax_leaves", "softmax_naive", "softmax_stable",
           "online_softmax", "online_softmax_steps", "softmax_by_scan", "sequential_states", "validate_scores",
           "require_same_width"]


def validate_scores(x: Any, one_row: str = "") -> tuple[Any, Any]:
    """``(x, xp)``: the scores as a 1-D (or ``(n, ...)``) array of floats, at least one of them; ``one_row``, the
    caller's name, asks for one row (1-D) only.

    >>> validate_scores([1, 2])[0]
    array([1., 2.])
    """
    xp = xp_of(x)
    x = xp.asarray(x)
    if x.ndim == 0 or x.shape[0] == 0:
        raise BadInputError(f"scores must be a sequence of at least one number (shape (n,) or (n, ...)); got "
                            f"shape {tuple(x.shape)}.")
    if x.dtype.kind not in "fiu":
        raise BadInputError(f"scores must be real numbers; got dtype {x.dtype}.")
    if x.dtype.kind == "f" and not bool(x.max() < np.inf):          # NaN propagates through max; +inf is the max
        raise BadInputError("scores must be finite numbers or -inf (a masked score); these hold NaN or +inf.")
    if one_row and x.ndim != 1:
        raise BadInputError(f"{one_row} follows one row of scores: shape (n,); got {tuple(x.shape)}.")
    return x.astype(np.result_type(x.dtype, np.float32) if x.dtype.kind == "f" else np.float64, copy=False), xp


# ------------------------------------------------------------------ the operator

def require_same_width(a: Any, b: Any) -> None:
    """Refuse two stacks of states that are not states of one kind: each ``[m, s, o...]`` in its last axis,
    at least 2 wide, the same width on both sides (a narrower one would be broadcast into a wrong output)."""
    wa, wb = (getattr(v, "shape", ())[-1:] or (0,) for v in (a, b))
    if getattr(a, "ndim", 0) < 1 or getattr(b, "ndim", 0) < 1 or wa[0] < 2 or wa != wb:
        raise BadInputError(f"softmax_combine combines states [m, s, o...] of one width (at least 2) in their last "
                            f"axis; got shapes {tuple(getattr(a, 'shape', ()))} and {tuple(getattr(b, 'shape', ()))}")


def softmax_combine(a: Any, b: Any) -> Any:
    """Combine two stacks of states ``[m, s, o...]`` (last axis): ``a`` covers earlier scores, ``b`` later.

    Each side is rescaled from its own maximum to the common one, ``M = max(m_a, m_b)``; a side that has
    seen nothing (``m = -inf``) gets the factor 0, so the identity ``(-inf, 0, 0...)`` never makes a NaN.

    >>> softmax_combine(np.array([[0.0, 1.0]]), np.array([[np.log(2.0), 1.0]]))   # exp(0) + exp(log 2)
    array([[0.69314718, 1.5       ]])
    """
    require_same_width(a, b)
    xp = xp_of(a)
    ma, mb = a[..., :1], b[..., :1]
    m = xp.maximum(ma, mb)
    finite = xp.where(xp.isneginf(m), 0.0, m)        # both sides empty: keep exp's argument at -inf
    fa, fb = xp.exp(ma - finite), xp.exp(mb - finite)
    return xp.concatenate([m, fa * a[..., 1:] + fb * b[..., 1:]], axis=-1)


@arguments(width=Whole(lo=2, hint="2 + the output's size: [m, s, o...]"))
def softmax_identity(width: int = 2, dtype: Any = np.float64, xp: Any = np) -> Any:
    """The state of nothing seen: ``[-inf, 0, 0, ...]``, ``width`` = 2 + the output's size.

    >>> softmax_identity(3)
    array([-inf,   0.,   0.])
    """
    ident = xp.zeros(width, dtype=dtype)
    ident[0] = -np.inf
    return ident


def softmax_leaves(x: Any, v: Any = None) -> Any:
    """One state per score: ``[x_j, 1, v_j...]`` (the max of one score is itself, its sum ``e^0 = 1``).

    ``x`` has shape ``(n, *rows)``; ``v``, if given, anything that broadcasts to ``(n, *rows, d)``.

    >>> softmax_leaves(np.array([2.0, 5.0]))
    array([[2., 1.],
           [5., 1.]])
    """
    x, xp = validate_scores(x)
    parts = [x[..., None], xp.ones_like(x)[..., None]]
    if v is not None:
        v = xp.asarray(v, dtype=x.dtype)
        parts.append(xp.broadcast_to(v, x.shape + v.shape[-1:]))
    return xp.concatenate(parts, axis=-1)


# ------------------------------------------------------------------ softmax, three ways

def softmax_naive(x: Any) -> Any:
    """``exp(x) / Σ exp(x)`` along axis 0, as written on paper: ``exp`` overflows past ~709 (float64),
    ~88 (float32), and the answer becomes ``nan``.

    >>> softmax_naive(np.array([1000.0, 1000.0]))
    array([nan, nan])
    """
    x, xp = validate_scores(x)
    with np.errstate(over="ignore", invalid="ignore"):
        e = xp.exp(x)
        return e / e.sum(axis=0)


def softmax_stable(x: Any) -> Any:
    """Two passes: the maximum first, then ``exp(x - max) / Σ exp(x - max)`` (no argument of exp above 0).

    >>> softmax_stable(np.array([1000.0, 1000.0]))
    array([0.5, 0.5])
    """
    x, xp = validate_scores(x)
    e = xp.exp(x - x.max(axis=0))
    return e / e.sum(axis=0)


@arguments(block=Whole(hint="scores per block"))
def online_softmax(x: Any, block: int = 1) -> tuple[Any, Any]:
    """One pass over ``x`` in blocks of ``block`` scores: the final state ``(m, s)``.

    Each block's own state (its max and its sum of ``exp(x - max)``) is folded into the running one
    with :func:`softmax_combine`; the softmax is then ``exp(x - m) / s``.

    >>> m, s = online_softmax(np.array([1000.0, 1000.0, 999.0]), block=2)
    >>> float(m), round(float(s), 6)
    (1000.0, 2.367879)
    """
    x, xp = validate_scores(x)
    state = xp.broadcast_to(softmax_identity(2, x.dtype, xp), x.shape[1:] + (2,))   # nothing seen yet
    for j0 in range(0, x.shape[0], block):
        piece = x[j0:j0 + block]
        m = piece.max(axis=0)
        finite = xp.where(xp.isneginf(m), 0.0, m)                       # a block masked whole: (-inf, 0), not NaN
        mine = xp.stack([m, xp.exp(piece - finite).sum(axis=0)], axis=-1)    # the block's own state
        state = softmax_combine(state, mine)
    return state[..., 0], state[..., 1]


@arguments(block=Whole(hint="scores per block"))
def online_softmax_steps(x: Any, block: int = 4) -> list[dict]:
    """What :func:`online_softmax` does, block by block, for a 1-D ``x``: one dict per block with its range,
    its own max and sum, the running max and sum after it, and the factor the old sum was rescaled by.

    >>> [round(r["running_max"], 2) for r in online_softmax_steps(np.array([0.0, 2.0, 1.0, 5.0]), block=2)]
    [2.0, 5.0]
    """
    x, xp = validate_scores(x, one_row="online_softmax_steps")
    x = np.asarray(x.get() if hasattr(x, "get") else x, dtype=np.float64)
    m, s, steps = -np.inf, 0.0, []
    for j0 in range(0, x.size, block):
        piece = x[j0:j0 + block]
        bm = float(piece.max())
        bs = float(np.exp(piece - bm).sum()) if np.isfinite(bm) else 0.0    # masked whole: the empty state (-inf, 0)
        new_m = max(m, bm)
        rescale = float(np.exp(m - new_m)) if np.isfinite(m) else 0.0
        m, s = new_m, s * rescale + (bs * float(np.exp(bm - new_m)) if np.isfinite(bm) else 0.0)
        steps.append({"start": j0, "stop": min(j0 + block, x.size), "block_max": bm, "block_sum": bs,
                      "rescale": rescale, "running_max": m, "running_sum": s})
    return steps


def softmax_by_scan(x: Any, trace: bool = False) -> Any:
    """The softmax of a 1-D ``x`` through lesson 04's Blelloch scan with :func:`softmax_combine`.

    The inclusive scan of the leaves ``(x_j, 1)`` holds, at position j, the state of ``x[:j+1]``; its last
    element is the state of all of x.  Returns the probabilities, or ``(probabilities, states, trace)``
    with the running states ``(n, 2)`` and lesson 04's :class:`~course.scan.ScanTrace`.

    >>> p = softmax_by_scan(np.array([1.0, 2.0, 3.0]))
    >>> np.allclose(p, np.exp([1, 2, 3]) / np.exp([1, 2, 3]).sum())
    True
    """
    x, xp = validate_scores(x, one_row="softmax_by_scan")
    leaves = softmax_leaves(x)
    out = blelloch_scan(leaves, op=softmax_combine, identity=softmax_identity(2, x.dtype, xp), exclusive=False,
                        trace=trace)
    states, tr = out if trace else (out, None)
    m, s = states[-1, 0], states[-1, 1]
    p = xp.exp(x - m) / s
    return (p, states, tr) if trace else p


def sequential_states(x: Any) -> Any:
    """The running states of a 1-D ``x`` by lesson 04's sequential scan (the oracle for the tree's).

    >>> sequential_states(np.array([0.0, 0.0]))[-1]
    array([0., 2.])
    """
    x, xp = validate_scores(x)
    return sequential_scan(softmax_leaves(x), op=softmax_combine, identity=softmax_identity(2, x.dtype, xp),
                           exclusive=False)

