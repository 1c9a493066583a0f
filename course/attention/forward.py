"""Lesson 08: attention three ways -- naive, online over key blocks, and FlashAttention's tiles.

Attention of queries ``q`` (shape ``(..., n, d)``) over keys ``k`` ``(..., n_k, d)`` and values ``v``
``(..., n_k, d_v)`` is, row by row, a softmax of scores followed by a weighted sum:

    S = q kᵀ · scale,   P = softmax(S) along each row,   out = P v.

1. :func:`naive_attention` writes it as it reads: the whole ``n × n_k`` score matrix is made, then the
   whole probability matrix, then the product.  Memory grows with ``n · n_k``.
2. :func:`online_attention` never holds more than one block of keys' scores: for every query row it
   keeps the state ``(m, s, o)`` of :mod:`course.attention.softmax` and folds each key block into it
   with :func:`~course.attention.softmax.softmax_combine`; at the end ``out = o / s``.
3. :func:`flash_attention` also cuts the *queries* into blocks: one query block at a time runs the
   online pass over the key blocks, so only ``block_q × block_k`` scores exist at any moment -- the
   tile that a GPU keeps in on-chip memory (Dao et al., 2022).  It also returns each row's
   log-sum-exp ``lse = m + log s``, all the backward pass needs to rebuild the probabilities
   (:mod:`course.attention.backward`).

:func:`attention_by_scan` runs the same states through lesson 04's Blelloch tree, to show that the
order of combining does not matter.  Every function takes any array namespace (NumPy, CuPy):
``causal=True`` lets query i see keys 0..i only (it needs ``n == n_k``), ``scale`` defaults to 1/√d.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> q, k, v = rng.normal(size=(3, 2, 5, 4))
>>> out, lse = flash_attention(q, k, v, block_q=2, block_k=3)
>>> np.allclose(out, naive_attention(q, k, v))
True
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..arguments import OneOf, Whole, arguments
from ..devices import array_device, xp_of
from ..errors import BadInputError
from ..limits import require_fits
from ..scan.algorithms import blelloch_scan
from .softmax import softmax_combine, softmax_identity

__all__ = ["validate_attention", "memory_held", "tile_schedule", "naive_attention", "online_attention",
           "flash_attention", "attention_by_scan", "ATTENTION_METHODS", "MEMORY_KINDS"]

#: What a method allocates, by name (:func:`memory_held`).
MEMORY_KINDS = ("naive", "tiled", "scan")


def validate_attention(q: Any, k: Any, v: Any, causal: bool = False, scale: float | None = None,
                       memory: str = "tiled", block_q: int = 64, block_k: int = 64) -> tuple[Any, Any, Any, float, Any]:
    """``(q, k, v, scale, xp)``: the three arrays in one float dtype on one device, and the scale.

    ``q (..., n, d)``, ``k (..., n_k, d)``, ``v (..., n_k, d_v)`` with the same leading (batch) shape;
    ``causal`` needs ``n == n_k``; ``scale`` None gives 1/√d.  Integers become float64, float16 float32.
    ``memory`` names what the caller will allocate -- ``"naive"`` (two ``n × n_k`` arrays per head),
    ``"tiled"`` (the output and one tile of ``block_q × block_k``), ``"scan"`` (a state per query and key)
    -- refused (:class:`~course.errors.DeviceMemoryError`) before anything is made when it would not fit.

    >>> q, k, v, scale, xp = validate_attention(np.ones((2, 4)), np.ones((3, 4)), np.ones((3, 1)))
    >>> scale
    0.5
    """
    devs = {array_device(a) for a in (q, k, v)}
    if len(devs) > 1:
        raise BadInputError("q, k and v live on different devices: move them to one with course.to_device(x, device).")
    xp = xp_of(q)
    q, k, v = (xp.asarray(a) for a in (q, k, v))
    for name, a in (("q", q), ("k", k), ("v", v)):
        if a.ndim < 2 or 0 in a.shape[-2:]:
            raise BadInputError(f"{name} must have shape (..., rows, features) with at least one row and one "
                                f"feature; got shape {tuple(a.shape)}.")
        if a.dtype.kind not in "fiu":
            raise BadInputError(f"{name} must hold real numbers; got dtype {a.dtype}.")
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise BadInputError(f"q, k and v must share their leading (batch, head) shape; got {tuple(q.shape[:-2])}, "
                            f"{tuple(k.shape[:-2])} and {tuple(v.shape[:-2])}.")
    if q.shape[-1] != k.shape[-1]:
        raise BadInputError(f"a query and a key must have the same size d to be multiplied: q has d = "
                            f"{q.shape[-1]}, k has d = {k.shape[-1]}.")
    if k.shape[-2] != v.shape[-2]:
        raise BadInputError(f"every key needs one value: k has {k.shape[-2]} rows, v has {v.shape[-2]}.")
    if not isinstance(causal, (bool, np.bool_)):
        raise BadInputError(f"causal must be True or False; got {causal!r}.")
    if causal and q.shape[-2] != k.shape[-2]:
        raise BadInputError(f"causal=True lets query i see keys 0..i, so it needs as many queries as keys; got "
                            f"n = {q.shape[-2]} queries and n_k = {k.shape[-2]} keys.")
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    elif isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating, np.integer)) \
            or not math.isfinite(scale):
        raise BadInputError(f"scale must be a finite number (None: 1/sqrt(d)); got {scale!r}.")
    dtype = np.result_type(*(a.dtype for a in (q, k, v)))
    dtype = np.dtype(np.float64) if dtype.kind in "iu" else np.result_type(dtype, np.float32)
    held = memory_held(memory, q.shape[-2], k.shape[-2], v.shape[-1], block_q, block_k,
                       int(np.prod(q.shape[:-2], dtype=np.int64)))
    require_fits(held * dtype.itemsize, devs.pop(),
                 what=f"{memory} attention's arrays and temporaries")
    return (*(a.astype(dtype, copy=False) for a in (q, k, v)), float(scale), xp)


@arguments(memory=OneOf(*MEMORY_KINDS), n=Whole(hint="queries"), n_k=Whole(hint="keys"),
           d_v=Whole(hint="the value size"), block_q=Whole(hint="query rows per tile"),
           block_k=Whole(hint="keys per tile"), batch=Whole(hint="batch × heads"))
def memory_held(memory: str, n: int, n_k: int, d_v: int, block_q: int = 64, block_k: int = 64,
                batch: int = 1) -> float:
    """How many numbers a method allocates besides its inputs, by what its code makes:

    * ``"naive"``: the scores and the probabilities (two ``n × n_k`` arrays per head) and the output;
    * ``"tiled"``: the output and the log-sum-exp, and for one tile its scores, probabilities and the
      rows' states (:func:`flash_attention`; :func:`online_attention` is one tile of ``n`` rows);
    * ``"scan"``: :func:`attention_by_scan`'s states, about four per query and key.

    >>> round(memory_held("naive", 1024, 1024, 64) / memory_held("tiled", 1024, 1024, 64))
    25
    """
    if memory == "naive":
        return batch * (2.0 * n * n_k + n * d_v)
    if memory == "scan":
        return batch * 4.0 * n * n_k * (d_v + 2)
    rows, keys = min(block_q, n), min(block_k, n_k)
    return batch * (n * (d_v + 1.0) + rows * (2.0 * keys + 3 * (d_v + 2)))


@arguments(n=Whole(hint="queries"), n_k=Whole(hint="keys"), block_q=Whole(hint="query rows per tile"),
           block_k=Whole(hint="keys per tile"), order=OneOf("query", "key"))
def tile_schedule(n: int, n_k: int, block_q: int, block_k: int, causal: bool = False,
                  order: str = "query") -> Iterator[tuple[int, int, int, int]]:
    """The tiles a blocked attention visits: ``(i0, i1, j0, j1)`` = query rows ``i0:i1`` against keys ``j0:j1``.

    ``order="query"``: each query block runs over every key block (the forward pass here, and
    FlashAttention-2's); ``order="key"``: each key block meets every query block (the backward pass, and
    FlashAttention's Algorithm 1).  With ``causal``, a tile whose keys all come after its last query is
    skipped: it would be masked whole.

    >>> list(tile_schedule(4, 4, 2, 2, causal=True))
    [(0, 2, 0, 2), (2, 4, 0, 2), (2, 4, 2, 4)]
    """
    rows = [(i0, min(i0 + block_q, n)) for i0 in range(0, n, block_q)]
    cols = [(j0, min(j0 + block_k, n_k)) for j0 in range(0, n_k, block_k)]
    pairs = [(i, j) for i in rows for j in cols] if order == "query" else [(i, j) for j in cols for i in rows]
    for (i0, i1), (j0, j1) in pairs:
        if not (causal and j0 > i1 - 1):
            yield i0, i1, j0, j1


def _scores(q, k, scale, causal, i0=0, j0=0):
    """``q kᵀ · scale`` for query rows from ``i0`` and keys from ``j0``; with ``causal``, key > query is -inf."""
    xp = xp_of(q)
    s = (q @ xp.swapaxes(k, -1, -2)) * scale
    if causal and j0 + k.shape[-2] - 1 > i0:                          # the tile reaches above the diagonal
        rows = xp.arange(i0, i0 + q.shape[-2])[:, None]
        cols = xp.arange(j0, j0 + k.shape[-2])[None, :]
        s = xp.where(cols <= rows, s, -xp.inf)
    return s


def _block_state(s, v):
    """The state ``[m, s, o...]`` of one block of scores ``s (..., rows, keys)`` with values ``v (..., keys, d_v)``."""
    xp = xp_of(s)
    m = s.max(axis=-1, keepdims=True)
    p = xp.exp(s - xp.where(xp.isneginf(m), 0.0, m))                  # a row masked whole: p = 0, not NaN
    return xp.concatenate([m, p.sum(axis=-1, keepdims=True), p @ v], axis=-1)


# ------------------------------------------------------------------ 1. naive

def naive_attention(q: Any, k: Any, v: Any, causal: bool = False, scale: float | None = None) -> Any:
    """``softmax(q kᵀ · scale) v`` with the whole score matrix in memory (two ``n × n_k`` arrays per head).

    Returns ``out`` of shape ``(..., n, d_v)``.

    >>> naive_attention(np.zeros((1, 2)), np.zeros((2, 2)), np.array([[1.0], [3.0]]))
    array([[2.]])
    """
    q, k, v, scale, xp = validate_attention(q, k, v, causal, scale, memory="naive")
    s = _scores(q, k, scale, causal)                                  # (..., n, n_k): all of it
    s -= s.max(axis=-1, keepdims=True)
    p = xp.exp(s)                                                     # a second n × n_k array
    p /= p.sum(axis=-1, keepdims=True)
    return p @ v


# ------------------------------------------------------------------ 2. and 3.: online over key blocks, in tiles

def _tiled(q, k, v, scale, causal, block_q, block_k):
    """For each block of query rows, fold every key block's state into the rows' running one: ``(out, lse)``."""
    xp = xp_of(q)
    n, n_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    out = xp.empty(q.shape[:-1] + (d_v,), dtype=q.dtype)
    lse = xp.empty(q.shape[:-1], dtype=q.dtype)
    for i0 in range(0, n, block_q):
        i1 = min(i0 + block_q, n)
        qi = q[..., i0:i1, :]
        state = xp.broadcast_to(softmax_identity(2 + d_v, q.dtype, xp), qi.shape[:-1] + (2 + d_v,))
        for j0 in range(0, i1 if causal else n_k, block_k):         # causal: keys after the last row are skipped
            j1 = min(j0 + block_k, n_k)
            s = _scores(qi, k[..., j0:j1, :], scale, causal, i0, j0)  # block_q × block_k scores, no more
            state = softmax_combine(state, _block_state(s, v[..., j0:j1, :]))
        m, total, o = state[..., 0], state[..., 1], state[..., 2:]
        out[..., i0:i1, :] = o / total[..., None]
        lse[..., i0:i1] = m + xp.log(total)
    return out, lse


@arguments(block_k=Whole(hint="keys per block"))
def online_attention(q: Any, k: Any, v: Any, causal: bool = False, scale: float | None = None,
                     block_k: int = 64) -> tuple[Any, Any]:
    """One pass over the keys in blocks of ``block_k``, every query row at once: ``(out, lse)``.

    Each block's scores (``n × block_k``) give a state ``(m, s, o)`` per row, folded into the running
    one with :func:`~course.attention.softmax.softmax_combine`: :func:`flash_attention` with a single
    query block.

    >>> out, lse = online_attention(np.zeros((1, 2)), np.zeros((2, 2)), np.array([[1.0], [3.0]]), block_k=1)
    >>> out, np.round(lse, 4)
    (array([[2.]]), array([0.6931]))
    """
    q, k, v, scale, xp = validate_attention(q, k, v, causal, scale, block_q=2**62, block_k=block_k)
    return _tiled(q, k, v, scale, causal, q.shape[-2], block_k)


@arguments(block_q=Whole(hint="query rows per tile"), block_k=Whole(hint="keys per tile"))
def flash_attention(q: Any, k: Any, v: Any, causal: bool = False, scale: float | None = None, block_q: int = 64,
                    block_k: int = 64) -> tuple[Any, Any]:
    """Attention tile by tile: for each block of ``block_q`` queries, the online pass over key blocks of
    ``block_k``.  At most ``block_q × block_k`` scores exist at once.  Returns ``(out, lse)``: the output
    ``(..., n, d_v)`` and each row's log-sum-exp ``(..., n)``, ``lse_i = log Σ_j exp(S_ij)``.

    >>> q = k = np.eye(3)
    >>> out, lse = flash_attention(q, k, np.arange(3.0)[:, None], causal=True, block_q=2, block_k=2)
    >>> np.round(out[:, 0], 4)
    array([0.    , 0.6405, 1.2066])
    """
    q, k, v, scale, xp = validate_attention(q, k, v, causal, scale, block_q=block_q, block_k=block_k)
    return _tiled(q, k, v, scale, causal, block_q, block_k)


# ------------------------------------------------------------------ the same states, combined by a tree

def attention_by_scan(q: Any, k: Any, v: Any, causal: bool = False, scale: float | None = None) -> Any:
    """Attention as lesson 04's Blelloch scan over the keys: one state ``(S_ij, 1, v_j)`` per key and query,
    combined by the tree in about 2·log2(n_k) levels, each one vectorized call over all pairs and all rows.
    The last inclusive prefix is the state of every key.  It holds ``n × n_k × (d_v + 2)`` numbers: a
    demonstration for small sizes, not a method.

    >>> x = np.eye(2)
    >>> np.allclose(attention_by_scan(x, x, x), naive_attention(x, x, x))
    True
    """
    q, k, v, scale, xp = validate_attention(q, k, v, causal, scale, memory="scan")
    d_v = v.shape[-1]
    s = xp.moveaxis(_scores(q, k, scale, causal), -1, 0)             # (n_k, ..., n): the keys first
    vals = xp.moveaxis(v, -2, 0)[..., None, :]                       # (n_k, ..., 1, d_v)
    leaves = xp.concatenate([s[..., None], xp.ones_like(s)[..., None],
                             xp.broadcast_to(vals, s.shape + (d_v,))], axis=-1)
    ident = xp.broadcast_to(softmax_identity(2 + d_v, q.dtype, xp), leaves.shape[1:])   # one whole element
    states = blelloch_scan(leaves, op=softmax_combine, identity=ident, exclusive=False)
    last = states[-1]
    return last[..., 2:] / last[..., 1:2]


#: The forward methods by name (the timings and the widgets use these names).
ATTENTION_METHODS = ("naive", "online", "flash")
