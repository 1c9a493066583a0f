"""Lesson 05: back-propagation as a parallel scan (BPPSA).

Back-propagation through a chain ``x_0 -> x_1 -> ... -> x_T`` (the time steps of
an RNN, the layers of a deep network) is a sequence of dependent products:

    G[T] = dL/dx_T,        G[t] = J_tᵀ · G[t+1],     J_t = ∂x_{t+1}/∂x_t.

Done one after the other that is T dependent steps, each a cheap matrix-vector
product: a GPU with thousands of lanes waits on a chain of tiny jobs.  Wang, Bai
and Pekhimenko (MLSys 2020) noticed that the chain is a *scan*: the gradients are
the running products of the sequence ``grad, J_{T-1}ᵀ, ..., J_0ᵀ`` under the
operator ``A ◇ B = B · A`` (the later factor multiplies on the left), which is
associative, so the Blelloch scan of lesson 04 computes all of them in about
2·log2(T) levels, each level one batched matrix product.

The price is work.  An up-sweep combine multiplies two n×n matrices (2n³ flops)
where the sequential step multiplied a matrix by a vector (2n²).  Every prefix the
down-sweep hands on already contains the gradient, so a down-sweep combine needs only
a matrix-vector product: the least a scan can do is about T matrix products and T
matrix-vector products, (n+1) times the loop's arithmetic.  The teaching scan here
keeps every element an n×n matrix and multiplies full matrices in both sweeps, about
2n times the loop's arithmetic (:func:`work_counts` gives both).  Either way the
scan wins only where the hardware would otherwise idle: a GPU with a long, thin chain.

This module holds the two algorithms with one contract, and their costs:

* :func:`backprop_sequential` and :func:`backprop_scan` (jacobians, grad) -> G;
* :func:`inplace_scan`, the Blelloch scan done in place over the element buffer, as the
  paper's implementation does, and :func:`scan_memory`, what that costs in bytes;
* :func:`bppsa_operator`, the operator ``◇`` with its operand order;
* :func:`scan_elements`, the sequence the scan runs over (the gradient embedded
  as the first column of an n×n matrix);
* :func:`work_counts`: dependent steps, flops and memory of both.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> J = rng.standard_normal((6, 3, 3)); g = rng.standard_normal(3)
>>> np.allclose(backprop_scan(J, g), backprop_sequential(J, g))
True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..arguments import Given, OneOf, Whole, arguments
from ..devices import array_device, get_xp, xp_of
from ..errors import BadInputError
from ..limits import require_fits

__all__ = ["backprop_sequential", "backprop_scan", "backprop_scan_elements", "bppsa_operator", "scan_elements",
           "gradients_from_scan", "inplace_scan", "work_counts", "scan_memory", "validate_chain", "CHUNK_FRACTION",
           "validate_scan_elements", "require_matrix_stacks"]


# ------------------------------------------------------------------ input checks

def validate_chain(jacobians: Any, grad: Any) -> tuple[Any, Any, Any, int, int | None, int]:
    """Check a (jacobians, grad) pair; return ``(J, g, xp, T, B, n)``.

    ``jacobians`` has shape ``(T, n, n)`` (one chain) or ``(T, B, n, n)`` (a batch
    of B chains); ``grad`` has shape ``(n,)`` or ``(B, n)`` to match.  ``B`` is
    None for an unbatched chain.  Raises :class:`BadInputError` naming the bad
    shape and what to pass instead.
    """
    dev_j, dev_g = array_device(jacobians), array_device(grad)
    if dev_j != dev_g:
        raise BadInputError(f"jacobians live on the {dev_j.upper()} but grad on the {dev_g.upper()}: "
                            "move one with course.to_device(x, device) so both are on the same device.")
    xp = get_xp(dev_j)
    J, g = xp.asarray(jacobians), xp.asarray(grad)
    if J.ndim not in (3, 4):
        raise BadInputError(f"jacobians must have shape (T, n, n) or (T, B, n, n); got {tuple(J.shape)} "
                            f"({J.ndim} axes). jacobians[t] is the n×n matrix ∂x_(t+1)/∂x_t.")
    if J.shape[-1] != J.shape[-2]:
        raise BadInputError(f"each Jacobian must be square (n×n: a step keeps the state size), got "
                            f"{J.shape[-2]}×{J.shape[-1]} in jacobians of shape {tuple(J.shape)}. "
                            "For layers that change width, pad the states to a common size.")
    T, n = int(J.shape[0]), int(J.shape[-1])
    if T == 0:
        raise BadInputError(f"the chain is empty: jacobians has shape {tuple(J.shape)} (T = 0 steps). "
                            "Pass at least one Jacobian.")
    if n == 0 or (J.ndim == 4 and J.shape[1] == 0):
        raise BadInputError(f"jacobians has shape {tuple(J.shape)}: the state size n and the batch B must be "
                            "at least 1 (an empty state has nothing to back-propagate).")
    B = int(J.shape[1]) if J.ndim == 4 else None
    want = (n,) if B is None else (B, n)
    if tuple(g.shape) != want:
        raise BadInputError(f"grad has shape {tuple(g.shape)} but jacobians of shape {tuple(J.shape)} "
                            f"need grad of shape {want} (dL/dx_T for each chain of the batch).")
    if not (np.issubdtype(J.dtype, np.floating) and np.issubdtype(g.dtype, np.floating)):
        raise BadInputError(f"jacobians and grad must be floating point, got {J.dtype} and {g.dtype}; "
                            "convert with .astype('float32') or 'float64'.")
    return J, g, xp, T, B, n


def validate_scan_elements(elems: Any, least: int = 2, name: str = "elems") -> Any:
    """``elems`` if it is a stack of square matrices ``(T+1, [B,] n, n)`` of floats, at least ``least`` of
    them (what :func:`scan_elements` builds); or a clear error."""
    shape = getattr(elems, "shape", None)
    if shape is None or len(shape) not in (3, 4) or shape[-1] != shape[-2] or shape[0] < least or not shape[-1]:
        raise BadInputError(f"{name} must have shape (T+1, [B,] n, n) with T >= {least - 1}, got "
                            f"{tuple(shape) if shape is not None else type(elems).__name__}; build them with "
                            "scan_elements(jacobians, grad).")
    if not np.issubdtype(elems.dtype, np.floating):
        raise BadInputError(f"{name} must be floating point, got {elems.dtype}")
    return elems


def require_matrix_stacks(a: Any, b: Any) -> None:
    """Refuse operands of ``◇`` that are not stacks of the same square matrices (a ``(n, 1)`` against an
    ``(n, n)`` would broadcast into another product without a word)."""
    sa, sb = getattr(a, "shape", None), getattr(b, "shape", None)
    if sa is None or sb is None or len(sa) < 2 or len(sb) < 2 or sa[-1] != sa[-2] or tuple(sa[-2:]) != tuple(sb[-2:]):
        raise BadInputError(f"a and b must be stacks of n×n matrices of one n, got shapes "
                            f"{tuple(sa) if sa is not None else type(a).__name__} and "
                            f"{tuple(sb) if sb is not None else type(b).__name__}")


def _require_scan_buffer(buf: Any, op: Any) -> None:
    if getattr(buf, "ndim", 0) < 1 or buf.shape[0] < 1:
        raise BadInputError(f"buf must be an array of at least one element along its first axis, got "
                            f"{getattr(buf, 'shape', type(buf).__name__)}")
    if not callable(op):
        raise BadInputError(f"op must be the scan's operator, a function op(a, b), got {type(op).__name__}")


# ------------------------------------------------------------------ sequential

def backprop_sequential(jacobians: Any, grad: Any) -> Any:
    """Back-propagate ``grad`` through the chain one step after the other.

    Parameters
    ----------
    jacobians : array ``(T, n, n)`` or ``(T, B, n, n)``; ``jacobians[t] = ∂x_{t+1}/∂x_t``.
    grad : array ``(n,)`` or ``(B, n)``: ``dL/dx_T``.

    Returns
    -------
    G : array ``(T+1, n)`` or ``(T+1, B, n)``, ``G[T] = grad`` and
        ``G[t] = jacobians[t]ᵀ · G[t+1]``: T dependent matrix-vector products.

    Examples
    --------
    >>> J = np.array([[[2.0, 0.0], [1.0, 1.0]]])          # T = 1
    >>> backprop_sequential(J, np.array([1.0, 1.0]))
    array([[3., 1.],
           [1., 1.]])
    """
    J, g, xp, T, B, n = validate_chain(jacobians, grad)
    dtype = xp.result_type(J.dtype, g.dtype)
    require_fits((T + 1) * (B or 1) * n * np.dtype(dtype).itemsize, array_device(J),
                 what=f"the gradients of a chain of {T:,} steps" + (f", batch {B:,}" if B else ""))
    G = xp.empty((T + 1,) + g.shape, dtype=dtype)
    G[T] = g
    for t in range(T - 1, -1, -1):      # each step needs the one before: T dependent steps
        # Jᵀ·v for every chain of the batch: (Jᵀ v)_i = Σ_j J_ji v_j
        G[t] = xp.matmul(G[t + 1][..., None, :], J[t])[..., 0, :]
    return G


# ------------------------------------------------------------------ the scan

def bppsa_operator(a: Any, b: Any) -> Any:
    """The BPPSA operator ``a ◇ b = b · a`` on stacks of matrices.

    In a scan, ``a`` holds the earlier elements and ``b`` the later ones.  The
    sequence is ``grad, J_{T-1}ᵀ, ..., J_0ᵀ``, and each later transposed Jacobian
    must multiply the product so far *from the left*:
    ``grad ◇ J_{T-1}ᵀ ◇ J_{T-2}ᵀ = J_{T-2}ᵀ · J_{T-1}ᵀ · grad``.  Matrix products are
    associative, so ``◇`` is too; it is not commutative, so the order matters.

    >>> a = np.array([[[1.0, 2.0], [0.0, 1.0]]]); b = np.array([[[0.0, 1.0], [1.0, 0.0]]])
    >>> bppsa_operator(a, b)[0]
    array([[0., 1.],
           [1., 2.]])
    """
    require_matrix_stacks(a, b)
    return b @ a


def scan_elements(jacobians: Any, grad: Any) -> Any:
    """The sequence the scan runs over: ``[grad as a matrix, J_{T-1}ᵀ, ..., J_0ᵀ]``.

    Every element of a scan must have the same shape, so the gradient vector is
    embedded as the **first column** of an otherwise zero n×n matrix ``E``.  A
    product ``M · E`` keeps that shape: its first column is ``M · grad`` and the
    rest stays zero, so the running products carry the gradients in column 0.
    (In the up-sweep only the leftmost branch touches ``E``: the other combines are
    Jacobian-Jacobian products.  In the down-sweep every prefix handed on contains
    ``E``, so each combine there needs only a matrix-vector product; this teaching
    scan still multiplies the full n×n matrices.)

    Returns an array ``(T+1, n, n)`` or ``(T+1, B, n, n)``.
    """
    J, g, xp, T, B, n = validate_chain(jacobians, grad)
    dtype = xp.result_type(J.dtype, g.dtype)
    require_fits(scan_memory(T, n, B or 1, np.dtype(dtype).itemsize)["peak"], array_device(J),
                 what=f"the scan over {T + 1} matrices of {n}×{n}" + (f" for a batch of {B}" if B else ""))
    elems = xp.empty((T + 1,) + J.shape[1:], dtype=dtype)
    elems[0] = 0
    elems[0, ..., :, 0] = g                          # grad -> first column of element 0
    elems[1:] = xp.swapaxes(J[::-1], -1, -2)         # J_{T-1}ᵀ, ..., J_0ᵀ
    return elems


def gradients_from_scan(products: Any) -> Any:
    """Read G out of the inclusive scan: ``products[k]`` holds ``G[T-k]`` in its first column."""
    validate_scan_elements(products, least=1, name="products")
    return products[::-1, ..., :, 0]


@arguments(trace=OneOf(True, False))
def backprop_scan(jacobians: Any, grad: Any, trace: bool = False) -> Any:
    """Back-propagate ``grad`` with the Blelloch scan of lesson 04 (BPPSA).

    Same contract as :func:`backprop_sequential`; the T dependent steps become
    about 2·log2(T+1) levels, each level one batched matrix product.  The scan runs
    in place over the element buffer (:func:`inplace_scan`), as the paper's
    implementation does, so its memory is that buffer -- about the Jacobians' own
    size -- plus a small working chunk (:func:`scan_memory` says how much).

    The paper runs an *exclusive* scan, whose first output is the identity and
    whose outputs stop one short of the total; the missing last one is the
    up-sweep's total (the root before the down-sweep clears it), kept aside so that
    ``G[0] = dL/dx_0`` comes out too.

    Parameters
    ----------
    jacobians : array ``(T, n, n)`` or ``(T, B, n, n)``; ``jacobians[t] = ∂x_{t+1}/∂x_t``.
    grad : array ``(n,)`` or ``(B, n)``.
    trace : also return the scan's :class:`course.scan.ScanTrace`; the trace is drawn by
        the level-by-level :func:`course.scan.blelloch_scan` (same tree, same pairs; it
        copies the whole buffer after every level: small T only).

    Returns
    -------
    G, or ``(G, trace)``; G has shape ``(T+1, n)`` or ``(T+1, B, n)``.

    Examples
    --------
    >>> J = np.array([[[2.0, 0.0], [1.0, 1.0]]])
    >>> backprop_scan(J, np.array([1.0, 1.0]))
    array([[3., 1.],
           [1., 1.]])
    """
    return backprop_scan_elements(scan_elements(jacobians, grad), trace=trace)


@arguments(elems=Given(validate_scan_elements), trace=OneOf(True, False))
def backprop_scan_elements(elems: Any, trace: bool = False) -> Any:
    """The scan of :func:`backprop_scan` on a sequence already built like :func:`scan_elements`.

    A model that can write its transposed Jacobians straight into the scan's
    buffer (``TanhRNN.scan_elements``) saves forming J and copying it once more.
    **The buffer is overwritten** (the scan works in place); with ``trace=True`` it
    is left alone.  Returns G ``(T+1, [B,] n)``, or ``(G, trace)``.
    """
    xp = xp_of(elems)
    n = elems.shape[-1]
    identity = xp.eye(n, dtype=elems.dtype)
    if elems.ndim == 4:
        identity = xp.broadcast_to(identity, elems.shape[1:])
    if trace:
        from ..scan.algorithms import blelloch_scan

        products, tr = blelloch_scan(elems, op=bppsa_operator, identity=identity, exclusive=False, trace=True)
        return xp.ascontiguousarray(gradients_from_scan(products)), tr
    total = inplace_scan(elems, bppsa_operator, identity)
    # exclusive[k + 1] = inclusive[k] holds G[T - k] in its first column; the total holds G[0]
    G = xp.empty((elems.shape[0],) + elems.shape[1:-1], dtype=elems.dtype)
    G[1:] = elems[:0:-1, ..., :, 0]
    G[0] = total[..., :, 0]
    return G


# ------------------------------------------------------------------ the scan, in place

#: The in-place scan combines at most this fraction of the buffer at once (its working memory).
CHUNK_FRACTION = 1 / 32


def _chunk(buf: Any) -> int:
    """Elements combined per call of ``op``: ``CHUNK_FRACTION`` of the buffer, at least 64."""
    return min(int(buf.shape[0]), max(64, int(buf.shape[0] * CHUNK_FRACTION)))


def _pairs(n: int, stride: int) -> tuple[int, int]:
    """(pairs, pairs whose right node is complete) at the level of nodes covering ``stride`` leaves."""
    nodes = -(-n // stride)
    return nodes // 2, n // (2 * stride)


def inplace_scan(buf: Any, op: Callable, identity: Any) -> Any:
    """Exclusive Blelloch scan of ``buf`` in place (up-sweep, then down-sweep); returns the total.

    The classic layout: node ``j`` of level ``d`` (covering ``2**d`` leaves) lives at the
    position of the last leaf it covers, ``min((j + 1) * 2**d, n) - 1``, so a level's
    pairs are two strided views of the same buffer and nothing but the buffer is kept.
    Any length works: a node whose partner is missing moves up unchanged, and a last,
    partial right node sits at ``n - 1``.  Each level combines its pairs a chunk at a
    time (``CHUNK_FRACTION`` of the buffer), so ``op``'s results never need a second
    buffer.

    * up-sweep: ``right = op(left, right)`` (earlier on the left);
    * the root's value is the total; it is replaced by ``identity``;
    * down-sweep: ``left, right = right, op(right, left)`` -- a left child inherits its
      parent's prefix, a right child gets the parent's prefix combined with its left sibling.

    Parameters
    ----------
    buf : array ``(n, *elem_shape)`` (numpy or cupy), overwritten with the exclusive scan.
    op : associative ``op(a, b)`` on stacks of elements, ``a`` earlier (lesson 04's contract).
    identity : one element (shape ``elem_shape``).

    Examples
    --------
    >>> from course.scan import add
    >>> x = np.array([3, 1, 7, 0, 4, 1, 6])
    >>> total = inplace_scan(x, add, 0)
    >>> x.tolist(), int(total)
    ([0, 3, 4, 11, 11, 15, 16], 22)
    """
    _require_scan_buffer(buf, op)
    n, c = int(buf.shape[0]), _chunk(buf)
    strides = []
    s = 1
    while -(-n // s) > 1:                     # levels with more than one node
        strides.append(s)
        s *= 2
    for s in strides:                         # up-sweep: a reduction tree, in place
        for left, right in _level_views(buf, n, s):
            for k in range(0, left.shape[0], c):
                right[k:k + c] = op(left[k:k + c], right[k:k + c])
    total = buf[n - 1].copy()
    buf[n - 1] = identity                     # the root's prefix: nothing comes before it
    for s in reversed(strides):               # down-sweep: hand the prefixes down
        for left, right in _level_views(buf, n, s):
            for k in range(0, left.shape[0], c):
                earlier = left[k:k + c].copy()
                left[k:k + c] = right[k:k + c]                  # left child: the parent's prefix
                right[k:k + c] = op(right[k:k + c], earlier)    # right child: prefix op left sibling
    return total


def _level_views(buf: Any, n: int, s: int) -> list[tuple[Any, Any]]:
    """The (left, right) views of one level's pairs: the complete pairs, then a partial last one."""
    pairs, full = _pairs(n, s)
    views = [(buf[s - 1:s - 1 + 2 * s * full:2 * s], buf[2 * s - 1:2 * s * full:2 * s])] if full else []
    if pairs > full:                                             # right node cut short by the end
        lpos = (2 * full + 1) * s - 1
        views.append((buf[lpos:lpos + 1], buf[n - 1:n]))
    return views


# ------------------------------------------------------------------ costs

def _blelloch_combines(m: int) -> tuple[int, int]:
    """(combines, levels) of the Blelloch scan of m elements, as course.scan counts them; half of each is
    the up-sweep's, half the down-sweep's."""
    from ..scan.algorithms import operation_counts

    c = operation_counts("blelloch", m)
    return int(c["work"]), int(c["steps"])


# the sizes a count takes: steps, state size, batch and bytes per number
_SIZES = {"T": Whole(), "n": Whole(), "batch": Whole(), "itemsize": Whole(hint="bytes per number, e.g. 4 for float32")}


@arguments(**_SIZES)
def work_counts(T: int, n: int, batch: int = 1, itemsize: int = 4) -> dict:
    """Dependent steps, flops and memory of sequential back-propagation vs BPPSA.

    Sequential: T dependent matrix-vector products, ``2n²`` flops each per chain.
    Scan: the Blelloch tree over T+1 elements, about ``2·log2(T+1)`` levels and about
    ``T`` combines in each sweep.  Two costs of the scan, named apart:

    * ``flops_scan``, the **teaching scan** (:func:`inplace_scan`, :func:`backprop_scan`):
      every combine an n×n by n×n product, ``2n³`` flops: about ``2n`` times the loop;
    * ``flops_scan_min``, the **least a scan needs**: an up-sweep combine off the leftmost
      branch multiplies two Jacobian products (``2n³``), but one on that branch meets the
      gradient, and every prefix the down-sweep hands on contains the gradient, so those
      combines are matrix-vector products (``2n²``): about ``n + 1`` times the loop.  The
      paper's CUDA scan and :mod:`course.bppsa.fast` work this way.

    Memory: the sequential pass keeps T+1 gradient vectors; the scan keeps T+1 n×n
    matrices (the Jacobians), about n times more.

    Returns a dict with ``steps_sequential``, ``steps_scan``, ``combines_scan`` (both
    sweeps), ``combines_up``, ``combines_down``, ``flops_sequential``, ``flops_scan``,
    ``work_ratio`` (teaching scan / sequential flops), ``flops_scan_min``,
    ``work_ratio_min`` (least scan / sequential flops), ``step_ratio`` (sequential / scan
    steps: the most the scan can gain with unlimited lanes), ``bytes_sequential`` and
    ``bytes_scan``.

    >>> c = work_counts(30000, 20, 16)
    >>> c["steps_sequential"], c["steps_scan"]
    (30000, 30)
    >>> round(c["work_ratio"]), round(c["work_ratio_min"])
    (40, 21)
    """
    combines, levels = _blelloch_combines(T + 1)
    up, up_levels = combines // 2, levels // 2
    flops_seq = 2.0 * n * n * T * batch
    flops_scan = 2.0 * n ** 3 * combines * batch
    # least: up-sweep off the leftmost branch matrix x matrix; that branch and the whole down-sweep matrix x vector
    flops_min = (2.0 * n ** 3 * (up - up_levels) + 2.0 * n * n * (combines - up + up_levels)) * batch
    return {
        "T": T, "n": n, "batch": batch,
        "steps_sequential": T,
        "steps_scan": levels,
        "combines_scan": combines,
        "combines_up": up,
        "combines_down": combines - up,
        "flops_sequential": flops_seq,
        "flops_scan": flops_scan,
        "work_ratio": flops_scan / flops_seq,
        "flops_scan_min": flops_min,
        "work_ratio_min": flops_min / flops_seq,
        "step_ratio": T / levels if levels else math.inf,
        "bytes_sequential": (T + 1) * batch * n * itemsize,
        "bytes_scan": (T + 1) * batch * n * n * itemsize,
    }


@arguments(**_SIZES)
def scan_memory(T: int, n: int, batch: int = 1, itemsize: int = 4) -> dict:
    """The memory :func:`backprop_scan` needs beyond its inputs, in bytes, part by part.

    * ``buffer``: the T+1 scan elements (the transposed Jacobians and the gradient):
      about the Jacobians' own size, since the scan runs in place over it;
    * ``working``: one chunk of the level being combined, twice (the saved left
      siblings and ``op``'s result; :data:`CHUNK_FRACTION` of the buffer, at least 64 elements);
    * ``gradients``: the result G, written after the scan while the buffer is still held.

    ``peak = buffer + max(working, gradients)``; ``jacobians`` (T matrices) is given
    for comparison.  :func:`scan_elements` checks that ``peak`` fits before allocating.

    >>> m = scan_memory(30000, 20, 16)
    >>> round(m["peak"] / m["jacobians"], 2)
    1.06
    """
    elem, m = batch * n * n * itemsize, T + 1
    chunk = min(m, max(64, int(m * CHUNK_FRACTION)))
    buffer, working, grads = m * elem, 2 * chunk * elem, m * batch * n * itemsize
    return {"buffer": buffer, "working": working, "gradients": grads, "peak": buffer + max(working, grads),
            "jacobians": T * elem}
