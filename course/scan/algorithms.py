"""Lesson 04: prefix sums (scans) three ways -- sequential, Hillis-Steele, Blelloch.

A *scan* combines every prefix of a sequence with an associative operator ``op``:

* exclusive: ``out[i] = x[0] op x[1] op ... op x[i-1]`` and ``out[0] = identity``;
* inclusive: ``out[i] = x[0] op x[1] op ... op x[i]``.

Each function's ``exclusive`` default is the scan its algorithm produces without a final shift,
on purpose: the Blelloch down-sweep and the sequential loop here give the exclusive scan, while
Hillis-Steele (and ``numpy.cumsum``, the blocked CPU scan of :mod:`course.scan.blocked`) give
the inclusive one.  Pass ``exclusive=`` explicitly when comparing two of them.

The sequential loop needs n dependent steps.  Because ``op`` is associative, the
brackets can be moved freely, and a balanced tree of combinations needs only
about log2(n) *levels*; all combinations inside one level are independent, so each
level is ONE vectorized call of ``op`` over all its pairs (SIMD lanes on a CPU,
threads on a GPU).

Operator contract (used by every function here)
------------------------------------------------
``op(a, b)`` receives two *stacks* of elements, ``a`` and ``b`` of shape
``(m, *elem_shape)``, and returns the stack of the ``m`` pairwise combinations.
``a`` always holds the EARLIER (left) elements and ``b`` the LATER (right) ones,
so non-commutative operators (matrix products, composition of maps) come out in
the order of the sequence.  ``op`` must be associative; it need not be commutative.
A non-associative ``op`` (subtraction, averaging) gives a result that depends on the
bracketing, so a tree scan would disagree with the loop: the tree scans try a few triples
of ``x``'s own elements first (:func:`require_associative`) and refuse such an ``op``,
while an operator associative up to floating-point rounding passes.
:func:`associative_on_samples` tests it on samples of your choice.  Likewise ``identity`` must be a true identity,
``op(identity, a) == a``: the down-sweep starts from it, so a wrong one shows up in
every result.  For the ready operators, and for a scalar identity spread over non-scalar
elements (a scalar ``1`` for a matrix product), the scans test ``op(identity, x[0])`` once
and refuse an identity that changes ``x[0]``; ``op`` must return an array of the shape of
its arguments, or the scan stops with a message saying so.  Results have the dtype of
``x`` (what ``op`` returns is stored into it).

Ready operators (defined in :mod:`course.scan.ops`, importable from here):
:func:`add`, :func:`maximum`, :func:`matmul`, :func:`affine`, and :func:`interval`
(which records which input positions a result combines: the operand-order detector);
:func:`identity_for` returns the identity element of each.

>>> import numpy as np
>>> from course.scan import blelloch_scan, sequential_scan
>>> blelloch_scan(np.array([3, 1, 7, 0, 4, 1, 6, 3]))
array([ 0,  3,  4, 11, 11, 15, 16, 22])
>>> blelloch_scan(np.array([3, 1, 7]), exclusive=False)
array([ 3,  4, 11])
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..arguments import Given, OneOf, Optional, arguments
from ..devices import xp_of
from ..errors import BadInputError, whole_number
from .ops import (
    OPERATORS,
    Op,
    add,
    affine,
    affine_apply,
    associative_on_samples,
    identity_for,
    interval,
    interval_leaves,
    matmul,
    maximum,
    require_associative,
    validate_operator,
)

__all__ = [
    "add", "maximum", "matmul", "affine", "affine_apply", "interval", "interval_leaves",
    "identity_for", "prepare_scan", "OPERATORS",
    "sequential_scan", "hillis_steele_scan", "blelloch_scan", "SCANS",
    "ScanTrace", "Level", "blelloch_levels", "operation_counts", "associative_on_samples", "require_associative",
]

# ------------------------------------------------------------------ input checks

#: The rules every scan's door declares: ``op`` a function (or None for addition), the flags True or False.
_OP = Optional(Given(validate_operator))
_FLAG = OneOf(True, False)


@arguments(op=_OP, tree=_FLAG)
def prepare_scan(x: Any, op: Op | None, identity: Any, *, tree: bool = False) -> tuple[Any, Any, Op, Any]:
    """Check a scan's input and return ``(x, xp, op, identity element)``; every scan here starts with it.

    ``tree=True`` (the tree scans) also refuses an ``op`` that is not associative on ``x``'s elements
    (see :func:`require_associative`): the loop brackets from the left, a tree differently."""
    xp = xp_of(x)
    x = xp.asarray(x)
    if x.ndim == 0:
        raise BadInputError(f"a scan needs a sequence (an array with a leading axis); got a "
                            f"0-d value {x!r}. Pass e.g. x.reshape(1) or a list.")
    op = add if op is None else op
    elem_shape = x.shape[1:]
    if identity is None:
        ident = identity_for.__wrapped__(op, elem_shape, x.dtype, xp)   # its door: x and op are checked
    else:
        ident = xp.asarray(identity)
        if ident.ndim != 0 and tuple(ident.shape) != tuple(elem_shape):
            raise BadInputError(f"identity has shape {tuple(ident.shape)} but one element of x "
                                f"has shape {tuple(elem_shape)}; pass one element of that shape "
                                f"(or a scalar).")
        if x.dtype.kind in "iub" and ident.dtype.kind in "fc":
            if not bool(xp.all(xp.isfinite(ident))) or bool(xp.any(ident != xp.round(ident))):
                raise BadInputError(f"identity {ident!r} cannot be stored in x's integer dtype "
                                    f"{x.dtype}; use an integer (e.g. the dtype's minimum for a "
                                    f"maximum, np.iinfo({x.dtype}).min) or convert x to floats.")
        ident = xp.broadcast_to(ident.astype(x.dtype), elem_shape)
        if x.shape[0] and x.dtype.kind != "O" and (op in OPERATORS.values() or ident.ndim != xp.asarray(identity).ndim):
            _validate_identity(x, xp, op, ident, identity)
    if tree:
        require_associative(op, x)
    return x, xp, op, ident


_prepare = prepare_scan.__wrapped__     # the scans' own call: their doors have checked op already


def _validate_identity(x, xp, op, ident, given) -> None:
    """One ``op(identity, x[0])`` must give ``x[0]`` back; a wrong identity would spoil every prefix.

    Run for the ready operators and for a scalar identity spread over non-scalar elements
    (a scalar ``1`` for a matrix product becomes the all-ones matrix, not the identity matrix).
    """
    first = x[:1]
    got = _combine(op, ident[None], first)
    got = xp.asarray(got).astype(x.dtype)
    if x.dtype.kind in "fc":
        same = bool(xp.allclose(got, first, rtol=1e-6 if x.dtype.itemsize > 2 else 1e-3, atol=0.0,
                                equal_nan=True))
    else:
        same = bool(xp.array_equal(got, first))
    if not same:
        hint = (f"a matrix product's identity is the identity matrix, np.eye({x.shape[1]})"
                if op is matmul else "the operator's identity e has op(e, a) == a for every a")
        raise BadInputError(f"identity={given!r} is not an identity of this op: op(identity, x[0]) gives "
                            f"{_snapshot(got[0]).tolist()!r}, not x[0] = {_snapshot(first[0]).tolist()!r}; {hint}. "
                            f"Pass identity=None to use the operator's own.")


def _combine(op, a, b):
    """``op(a, b)``, checked: the stack of pairwise combinations, with the shape of ``a``."""
    r = op(a, b)
    if getattr(r, "shape", None) is None or tuple(r.shape) != tuple(a.shape):
        got = f"an array of shape {tuple(r.shape)}" if hasattr(r, "shape") else f"{type(r).__name__} {r!r}"
        raise BadInputError(f"op must return the stack of pairwise combinations, an array of shape "
                            f"{tuple(a.shape)} here; it returned {got}. End it with e.g. `return a + b`.")
    return r


# ------------------------------------------------------------------ traces

@dataclass
class Level:
    """One tree level: which pairs were combined, and the array after the level.

    ``left[j]`` and ``right[j]`` are the positions of pair ``j`` (``left < right``) in
    the working array; ``state`` is a numpy copy of that array after the level (for
    Blelloch, the classic in-place array padded to a power of two); ``nodes`` holds the
    values this level produced (Blelloch: the level's node array; Hillis-Steele: the
    whole array).
    """

    phase: str            # "up", "down" (Blelloch) or "step" (Hillis-Steele)
    depth: int            # 0 = the level next to the leaves
    stride: int           # distance between consecutive pairs (Blelloch) / offset (H-S)
    left: np.ndarray
    right: np.ndarray
    state: np.ndarray | None = None
    nodes: np.ndarray | None = None

    def __post_init__(self):
        whole_number("depth", self.depth, 0, hint="a Level's depth: 0 next to the leaves")
        whole_number("stride", self.stride, 0)
        if self.phase not in ("up", "down", "step"):
            raise BadInputError(f"a Level's phase is 'up', 'down' or 'step', got {self.phase!r:.40}")

    @property
    def work(self) -> int:
        return int(len(self.right))


@dataclass
class ScanTrace:
    """Everything a scan did: levels in order, and the work/step counts."""

    algorithm: str
    n: int
    padded_n: int
    initial: np.ndarray | None = None
    levels: list[Level] = field(default_factory=list)

    def __post_init__(self):
        whole_number("padded_n", self.padded_n, whole_number("n", self.n, 0), hint="at least n")

    @property
    def work(self) -> int:
        """Number of elementwise operator applications (one per combined pair)."""
        return sum(lv.work for lv in self.levels)

    @property
    def steps(self) -> int:
        """Number of levels that applied the operator (the span of the algorithm)."""
        return sum(1 for lv in self.levels if lv.work > 0)


def _snapshot(buf):
    return np.asarray(buf.get() if hasattr(buf, "get") else buf).copy()


# ------------------------------------------------------------------ the scans

@arguments(op=_OP, exclusive=_FLAG)
def sequential_scan(x: Any, op: Op | None = None, identity: Any = None, exclusive: bool = True) -> Any:
    """The oracle: one element after the other, n dependent steps.

    Parameters
    ----------
    x : array of shape ``(n, *elem_shape)`` (numpy or cupy).
    op : associative ``op(a, b)`` on stacks, ``a`` earlier and ``b`` later; ``None`` = addition.
    identity : one element (shape ``elem_shape``) or a scalar; ``None`` = the operator's own.
    exclusive : ``out[i]`` combines ``x[:i]`` (True) or ``x[:i+1]`` (False).

    Examples
    --------
    >>> sequential_scan([1, 2, 3, 4], exclusive=False)
    array([ 1,  3,  6, 10])
    """
    x, xp, op, ident = _prepare(x, op, identity)
    out = xp.empty_like(x)
    acc = ident[None]
    for i in range(x.shape[0]):
        if exclusive:
            out[i] = acc[0]
        acc = op(acc, x[i:i + 1]) if i else _combine(op, acc, x[:1])   # what op returns: checked once
        if not exclusive:
            out[i] = acc[0]
    return out


@arguments(op=_OP, exclusive=_FLAG, trace=_FLAG)
def hillis_steele_scan(x: Any, op: Op | None = None, identity: Any = None, exclusive: bool = False,
                       trace: bool = False) -> Any:
    """Hillis-Steele scan: ceil(log2 n) steps, about n log2 n work.

    At step ``d`` every position ``i >= 2**d`` combines with position ``i - 2**d``
    (double-buffered, one vectorized ``op`` per step).  Naturally inclusive; with
    ``exclusive=True`` the result is shifted right by one and starts with ``identity``.
    Returns ``out`` or ``(out, ScanTrace)`` when ``trace`` is true.

    >>> hillis_steele_scan([1, 2, 3, 4])
    array([ 1,  3,  6, 10])
    """
    x, xp, op, ident = _prepare(x, op, identity, tree=True)
    n = x.shape[0]
    cur = x.copy()
    tr = ScanTrace("hillis-steele", n, n, _snapshot(x) if trace else None)
    offset, depth = 1, 0
    while offset < n:
        nxt = cur.copy()
        nxt[offset:] = _combine(op, cur[:-offset], cur[offset:])   # earlier element on the left
        cur = nxt
        if trace:
            snap = _snapshot(cur)
            tr.levels.append(Level("step", depth, offset, np.arange(0, n - offset),
                                   np.arange(offset, n), snap, snap))
        offset, depth = 2 * offset, depth + 1
    if exclusive and n:
        shifted = xp.empty_like(cur)
        shifted[:1] = ident[None]        # a slice: an object array would store the 0-d array itself
        shifted[1:] = cur[:-1]
        cur = shifted
    return (cur, tr) if trace else cur


def blelloch_levels(n: int) -> Iterator[tuple[int, int, int]]:
    """The shape of the Blelloch tree over ``n`` leaves, level by level (up-sweep order).

    Level 0 holds the ``n`` leaves; level ``d + 1`` holds one node per pair of level
    ``d``, ``ceil(m / 2)`` nodes for ``m`` below.  When ``m`` is odd the last node has no
    partner and moves up unchanged (as if it were combined with an identity from a
    padding up to a power of two).  Returns an iterator of ``(depth, nodes, pairs)`` with
    ``pairs = nodes // 2`` operator applications; the down-sweep walks them backwards.
    A bad ``n`` is refused at the call, not at the first step.

    >>> list(blelloch_levels(5))
    [(0, 5, 2), (1, 3, 1), (2, 2, 1)]
    """
    return _levels(whole_number("n", n, 0, hint="the number of leaves"))


def _levels(m: int):
    depth = 0
    while m > 1:
        yield depth, m, m // 2
        m, depth = -(-m // 2), depth + 1


def _padded(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


@arguments(op=_OP, exclusive=_FLAG, trace=_FLAG)
def blelloch_scan(x: Any, op: Op | None = None, identity: Any = None, exclusive: bool = True,
                  trace: bool = False) -> Any:
    """Work-efficient (Blelloch) scan: an up-sweep and a down-sweep, 2 log2 n levels, 2(n-1) work.

    * **up-sweep** (a reduction tree): level ``d + 1`` combines the pairs of level ``d``,
      ``op(left, right)``; the single node at the top is the total;
    * **down-sweep**: the root's prefix is ``identity`` (nothing comes before the whole
      sequence).  Going down, a left child gets its parent's prefix (it starts where the
      parent starts) and a right child gets ``op(parent_prefix, left_sibling)`` -- the
      prefix FIRST, because it covers the earlier elements (swapping them is the classic
      bug with non-commutative operators).  The prefixes of the leaves are the
      exclusive scan.

    Each level is one vectorized call of ``op`` over all its pairs, on strided views
    (``a[0::2]``, ``a[1::2]``).  The levels are kept as separate, shrinking arrays
    rather than updated in place in one array: the same tree and the same pairs, but
    every level after the first reads contiguous memory, which the cache likes (the
    in-place picture, the one a GPU kernel uses in shared memory, is in the trace).
    The down-sweep writes each level's prefixes over that level's array, whose values
    it no longer needs, so only the result is freshly allocated.  Any length works:
    an odd node out moves up a level unchanged.

    Parameters
    ----------
    x : array ``(n, *elem_shape)``, numpy or cupy; any n >= 0.  Not modified.
    op : associative ``op(a, b)`` on stacks (``a`` earlier, ``b`` later); ``None`` = addition.
    identity : one element or a scalar; ``None`` = the ready operator's identity.
    exclusive : exclusive (default) or inclusive scan.
    trace : also return a :class:`ScanTrace` (copies arrays after every level: small n only).

    Returns
    -------
    out, or ``(out, trace)``.  ``out`` has the shape and dtype of ``x``.

    Examples
    --------
    >>> import numpy as np
    >>> m = np.array([[[1, 1], [0, 1]], [[2, 0], [0, 1]], [[1, 0], [3, 1]]])
    >>> blelloch_scan(m, op=matmul, exclusive=False)[-1]   # m[0] @ m[1] @ m[2]
    array([[5, 1],
           [3, 1]])
    """
    x, xp, op, ident = _prepare(x, op, identity, tree=True)
    n = x.shape[0]
    rec = _InPlacePicture(x, ident, trace)
    if n <= 1:
        out = x.copy() if (n == 0 or not exclusive) else xp.asarray(ident)[None].copy()
        return (out, rec.trace) if trace else out

    tree = [x]                                          # tree[d]: the nodes of level d
    for depth, m, _ in blelloch_levels(n):              # up-sweep: a reduction tree
        a = tree[-1]
        sums = _owned(xp, _combine(op, a[0:m - 1:2], a[1:m:2]), a)  # earlier (left) op later (right)
        if m % 2:                                       # odd node out: moves up unchanged
            sums = xp.concatenate([sums, a[m - 1:]])
        tree.append(sums)
        rec.up(depth, m, sums)

    prefix = xp.asarray(ident)[None]                    # the root's prefix: nothing before it
    for depth, m, _ in reversed(list(blelloch_levels(n))):  # down-sweep: hand prefixes down
        a = tree[depth]
        right = _owned(xp, _combine(op, prefix[:m // 2], a[0:m - 1:2]), a)  # prefix op left sibling
        if depth:
            out = a               # the level's own values are used up: reuse its memory
        else:                     # the leaves' prefixes are the result (+1 slot for the total)
            out = xp.empty((m + (not exclusive),) + x.shape[1:], dtype=x.dtype)
        out[0:m:2] = prefix                             # left child: the parent's prefix
        out[1:m:2] = right
        prefix = out
        rec.down(depth, m, out[:m])

    if exclusive:
        return (prefix, rec.trace) if trace else prefix
    prefix[n] = tree[-1][0]                             # inclusive[i] = exclusive[i + 1]
    return (prefix[1:], rec.trace) if trace else prefix[1:]


def _owned(xp, result, source):
    """``result``, copied if ``op`` handed back a view of ``source`` (the scan overwrites levels)."""
    return result.copy() if xp.may_share_memory(result, source) else result


class _InPlacePicture:
    """Record a Blelloch run as the classic in-place array (padded to a power of two).

    Node ``j`` of level ``d`` lives at position ``(j + 1) * 2**d - 1``: the last leaf it
    covers.  That is where the in-place algorithm (and the GPU kernel) keeps it.
    """

    def __init__(self, x, ident, on: bool):
        self.on = on
        n = x.shape[0]
        self.trace = ScanTrace("blelloch", n, _padded(n))
        if on:
            state = np.empty((_padded(n),) + x.shape[1:], dtype=x.dtype)
            state[:n] = _snapshot(x)
            state[n:] = _snapshot(ident)
            self.state, self.ident = state, _snapshot(ident)
            self.trace.initial = state.copy()

    def _put(self, depth, nodes):
        self.state[(np.arange(nodes.shape[0]) + 1) * 2 ** depth - 1] = _snapshot(nodes)

    def _level(self, phase, depth, m, nodes):
        j = np.arange(m // 2)
        self.trace.levels.append(Level(phase, depth, 2 ** (depth + 1), (2 * j + 1) * 2 ** depth - 1,
                                       (2 * j + 2) * 2 ** depth - 1, self.state.copy(),
                                       _snapshot(nodes)))

    def up(self, depth, m, sums):
        if self.on:
            self._put(depth + 1, sums)
            self._level("up", depth, m, sums)

    def down(self, depth, m, prefixes):
        if self.on:
            if len(self.trace.levels) and self.trace.levels[-1].phase == "up":
                self.state[-1] = self.ident                 # the root's prefix
            self._put(depth, prefixes)
            self._level("down", depth, m, prefixes)


#: The scans by name (the notebook's dropdown uses these names).
SCANS: dict[str, Callable] = {"sequential": sequential_scan, "hillis-steele": hillis_steele_scan,
                              "blelloch": blelloch_scan}


def operation_counts(algorithm: str, n: int) -> dict:
    """Work (operator applications) and steps (levels) of a scan of length ``n``, without running it.

    >>> operation_counts("blelloch", 8)
    {'work': 14, 'steps': 6}
    >>> operation_counts("hillis-steele", 8)
    {'work': 17, 'steps': 3}
    """
    n = whole_number("n", n, 0, hint="the length of the scan")
    if algorithm == "sequential":
        return {"work": n, "steps": n}
    if algorithm == "hillis-steele":
        offsets = [1 << d for d in range(max(n - 1, 0).bit_length())]
        return {"work": sum(n - o for o in offsets), "steps": len(offsets)}
    if algorithm == "blelloch":
        pairs = [p for _, _, p in blelloch_levels(n)]
        return {"work": 2 * sum(pairs), "steps": 2 * len(pairs)}
    raise BadInputError(f"unknown scan algorithm {algorithm!r}; choose one of {sorted(SCANS)}.")
