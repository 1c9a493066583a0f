"""The operators a scan combines with, their identities, and an associativity check.

Every operator takes two *stacks* of elements, ``a`` and ``b`` of shape
``(m, *elem_shape)``, and combines them pairwise in one vectorized call; ``a`` holds
the EARLIER elements and ``b`` the LATER ones.  They are re-exported by
:mod:`course.scan`.

>>> import numpy as np
>>> matmul(np.eye(2)[None], np.ones((1, 2, 2)))[0]
array([[1., 1.],
       [1., 1.]])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..arguments import Given, OneOf, Optional, Real, Whole, Wholes, arguments
from ..devices import array_device, xp_of
from ..errors import BadInputError
from ..limits import full_nbytes, require_fits

__all__ = ["add", "maximum", "matmul", "affine", "affine_apply", "interval", "interval_leaves",
           "identity_for", "OPERATORS", "associative_on_samples", "require_associative", "Op",
           "validate_operator"]

Op = Callable[[Any, Any], Any]


def _xp(a):
    return xp_of(a)


def _not_stacks(who: str, *stacks: Any, names: str = "ab", pairs: bool = False, matrices: bool = False):
    """The error for what is not a stack of elements, raised by an operator's first line: an array (numpy, CuPy)
    with a leading axis, ``pairs``: whose last axis holds the 2 numbers of an element, ``matrices``: whose
    elements are matrices.  A list would be concatenated by ``+``, not added, and a pair read from the wrong axis
    would be another map: both silently.  The check itself is one line in each operator (a few attribute reads):
    the sequential loop calls an operator once per element."""
    what = ("(m, ..., 2), each element's pair in the last axis" if pairs else
            "(m, k, k), a stack of matrices" if matrices else "(m, *elem_shape), with a leading axis")
    for name, s in zip(names.split() if " " in names else names, stacks):
        shape = getattr(s, "shape", None)
        if getattr(s, "ndim", 0) < (2 if matrices else 1) or pairs and shape[-1] != 2:
            got = f"an array of shape {tuple(shape)}" if shape is not None else f"{type(s).__name__} {s!r:.60}"
            return BadInputError(f"{who}: {name} must be a stack of elements, an array of shape {what}; got {got}. "
                                 "Pass numpy (or CuPy) arrays, e.g. np.asarray(...).")
    return BadInputError(f"{who} takes stacks of elements, arrays of shape {what}")  # pragma: no cover


def add(a: Any, b: Any) -> Any:
    """Elementwise sum of two stacks; identity 0."""
    if not (getattr(a, "ndim", 0) and getattr(b, "ndim", 0)):
        raise _not_stacks("add", a, b)
    return a + b


def maximum(a: Any, b: Any) -> Any:
    """Elementwise maximum of two stacks; identity -inf (or the dtype's minimum for integers)."""
    if not (getattr(a, "ndim", 0) and getattr(b, "ndim", 0)):
        raise _not_stacks("maximum", a, b)
    return _xp(a).maximum(a, b)


def matmul(a: Any, b: Any) -> Any:
    """Matrix product of two stacks of k x k matrices, ``a[i] @ b[i]`` (earlier on the left).

    The inclusive scan of ``M0, M1, M2`` is ``M0, M0 @ M1, M0 @ M1 @ M2``; identity ``eye(k)``.
    """
    if getattr(a, "ndim", 0) < 2 or getattr(b, "ndim", 0) < 2:
        raise _not_stacks("matmul", a, b, matrices=True)
    return a @ b


def affine(a: Any, b: Any) -> Any:
    """Compose two stacks of affine maps: first ``a`` (earlier), then ``b`` (later).

    An element is a pair ``(m, c)`` stored in the last axis (shape ``(..., 2)``) and
    stands for the map ``h -> m * h + c`` (elementwise over any leading element axes).
    Applying ``a`` then ``b`` gives ``h -> b_m * (a_m * h + a_c) + b_c``, i.e. the pair
    ``(a_m * b_m, b_m * a_c + b_c)``; identity ``(1, 0)``.  So the inclusive scan of
    the maps ``(m_t, c_t)`` solves the linear recurrence ``h_t = m_t * h_{t-1} + c_t``
    (with ``h_{-1} = 0`` it is the ``c`` part); see :func:`affine_apply`.
    """
    if not (getattr(a, "ndim", 0) and getattr(b, "ndim", 0)) or a.shape[-1] != 2 or b.shape[-1] != 2:
        raise _not_stacks("affine", a, b, pairs=True)
    am, ac = a[..., 0], a[..., 1]
    bm, bc = b[..., 0], b[..., 1]
    return _xp(a).stack([am * bm, bm * ac + bc], axis=-1)


def affine_apply(maps: Any, h: Any) -> Any:
    """Apply affine maps ``(m, c)`` (last axis of size 2) to values ``h``: ``m * h + c``."""
    if not getattr(maps, "ndim", 0) or maps.shape[-1] != 2:
        raise _not_stacks("affine_apply", maps, names="maps ", pairs=True)
    return maps[..., 0] * h + maps[..., 1]


def interval(a: Any, b: Any) -> Any:
    """Concatenate index ranges: a bookkeeping operator that shows what a scan combined.

    An element is a half-open range ``(lo, hi)`` of positions of the input (last axis
    of size 2, integers); leaf ``i`` is ``(i, i + 1)`` (see :func:`interval_leaves`).
    An empty range (``lo == hi``) is the identity.  ``op(a, b)`` is ``(a.lo, b.hi)``
    when ``a`` ends where ``b`` starts, and the marker ``(-1, -2)`` ("combined out of
    order") otherwise, which then sticks.  So the exclusive scan of the leaves must be
    ``(0, i)`` at position ``i``: anything else names the operand-order bug.

    >>> import numpy as np
    >>> interval(np.array([[0, 2], [2, 3]]), np.array([[2, 5], [0, 2]]))
    array([[ 0,  5],
           [-1, -2]])
    """
    if not (getattr(a, "ndim", 0) and getattr(b, "ndim", 0)) or a.shape[-1] != 2 or b.shape[-1] != 2:
        raise _not_stacks("interval", a, b, pairs=True)
    xp = _xp(a)
    a_empty = (a[..., 0] == a[..., 1])[..., None]
    b_empty = (b[..., 0] == b[..., 1])[..., None]
    joined = xp.stack([a[..., 0], b[..., 1]], axis=-1)
    ok = (a[..., 1] == b[..., 0]) & (a[..., 0] <= a[..., 1]) & (b[..., 0] <= b[..., 1])
    bad = xp.full_like(joined, -1)
    bad[..., 1] = -2
    out = xp.where(ok[..., None], joined, bad)
    return xp.where(a_empty, b, xp.where(b_empty, a, out))


@arguments(n=Whole(0, hint="the number of leaves"))
def interval_leaves(n: int, xp: Any = np) -> Any:
    """The leaves ``(i, i + 1)`` of :func:`interval`, shape ``(n, 2)``."""
    require_fits(8 * 4 * n, "gpu" if xp is not np else "cpu", what=f"{n:,} interval leaves")
    i = xp.arange(n, dtype=np.int64)
    return xp.stack([i, i + 1], axis=-1)


def _min_value(dtype: np.dtype):
    if dtype.kind == "f" or dtype.kind == "c":
        return -np.inf
    if dtype.kind in "iu":
        return np.iinfo(dtype).min
    if dtype.kind == "b":
        return False
    raise BadInputError(f"maximum has no identity for dtype {dtype}; pass identity=... explicitly.")


def validate_operator(op: Any) -> Op:
    """``op`` if it can be a scan's operator, a function ``op(a, b)`` on stacks of elements; else a clear error.

    >>> validate_operator("add")
    Traceback (most recent call last):
    ...
    course.errors.BadInputError: op must be a function op(a, b) on stacks (course.scan.add, ...), got 'add'
    """
    if not callable(op) or isinstance(op, type):
        raise BadInputError(f"op must be a function op(a, b) on stacks (course.scan.add, ...), got {op!r:.80}")
    return op


def _validate_elem_dtype(dtype: Any) -> np.dtype:
    """``numpy.dtype(dtype)`` for the elements' dtype (object arrays included: the scans take them)."""
    try:
        dt = None if dtype is None or isinstance(dtype, (list, tuple, np.ndarray)) else np.dtype(dtype)
    except (TypeError, ValueError):
        dt = None
    if dt is None or dt.kind == "V":
        raise BadInputError(f"dtype must be the dtype of the elements (e.g. 'float32', x.dtype), got {dtype!r:.60}")
    return dt


@arguments(op=Optional(Given(validate_operator)),
           elem_shape=Wholes(lo=0, min_len=0, hint="the shape of one element, x.shape[1:], e.g. (2, 2)"),
           dtype=Given(_validate_elem_dtype))
def identity_for(op: Op | None, elem_shape: tuple = (), dtype: Any = np.float64, xp: Any = np) -> Any:
    """The identity element of a ready operator, as an array of shape ``elem_shape``.

    Parameters
    ----------
    op : one of :data:`OPERATORS` (``None`` means :func:`add`).
    elem_shape : shape of one element (``x.shape[1:]`` for a stack ``x``).
    dtype, xp : dtype and array namespace (numpy or cupy) of the result.

    Examples
    --------
    >>> identity_for(matmul, (2, 2))
    array([[1., 0.],
           [0., 1.]])
    >>> identity_for(affine, (2,))
    array([1., 0.])
    """
    dtype = np.dtype(dtype)
    elem_shape = tuple(elem_shape)
    if op is None or op is add:
        return xp.zeros(elem_shape, dtype=dtype)
    if op is maximum:
        return xp.full(elem_shape, _min_value(dtype), dtype=dtype)
    if op is matmul:
        if len(elem_shape) != 2 or elem_shape[0] != elem_shape[1]:
            raise BadInputError(f"matmul scans stacks of square k x k matrices; got elements of "
                                f"shape {elem_shape}. Pass x with shape (n, k, k).")
        return xp.eye(elem_shape[0], dtype=dtype)
    if op is interval:
        return xp.zeros(elem_shape, dtype=dtype)
    if op is affine:
        if len(elem_shape) == 0 or elem_shape[-1] != 2:
            raise BadInputError(f"affine elements are (m, c) pairs in the last axis; got elements "
                                f"of shape {elem_shape}. Pass x with shape (n, ..., 2).")
        ident = xp.zeros(elem_shape, dtype=dtype)
        ident[..., 0] = 1
        return ident
    name = getattr(op, "__name__", repr(op))
    raise BadInputError(f"no identity is known for the operator {name!r}; pass identity=... "
                        f"(one element of shape {elem_shape}, or a scalar).")


#: The ready operators by name (the notebook's dropdown uses these names).
OPERATORS: dict[str, Op] = {"add": add, "max": maximum, "matmul": matmul, "affine": affine,
                            "interval": interval}


def _validate_samples(samples: Any) -> Any:
    """``samples`` as an array (numpy or CuPy) of at least 3 numeric elements, that fits the few copies the test
    makes."""
    xp = xp_of(samples)
    try:
        s = xp.asarray(samples)
    except (TypeError, ValueError) as exc:
        raise BadInputError(f"samples must be a stack of elements (an array of shape (m, *elem_shape), m >= 3); "
                            f"numpy cannot read it as one ({exc})") from None
    if s.ndim == 0 or s.shape[0] < 3 or s.dtype.kind in "SUV":
        raise BadInputError(f"associative_on_samples needs at least 3 sample elements (an array of numbers of "
                            f"shape (m, *elem_shape), m >= 3); got {s.dtype} of shape {getattr(s, 'shape', ())}.")
    require_fits(8 * full_nbytes(s), array_device(s), what=f"the associativity test on {s.shape[0]:,} samples")
    return s


@arguments(op=Given(validate_operator), samples=Given(_validate_samples),
           rtol=Real(lo=0, hint="the relative tolerance"), atol=Real(lo=0, hint="the absolute tolerance"),
           verbose=OneOf(True, False))
def associative_on_samples(op: Op, samples: Any, *, rtol: float = 1e-6, atol: float = 1e-9,
                           verbose: bool = True) -> bool:
    """Test ``op(op(a, b), c) == op(a, op(b, c))`` on sampled triples.

    ``samples`` is a stack of elements (shape ``(m, *elem_shape)``, m >= 3); triples are
    taken as consecutive rolls of it.  Returns True when every triple agrees within the
    tolerances; prints the first failing triple otherwise.  Passing is evidence, not proof.

    >>> associative_on_samples(lambda a, b: a - b, np.arange(5.0), verbose=False)
    False
    """
    xp = xp_of(samples)
    s = samples
    a, b, c = s, xp.roll(s, -1, axis=0), xp.roll(s, -2, axis=0)
    lhs, rhs = op(op(a, b), c), op(a, op(b, c))
    diff = xp.abs(lhs - rhs) > atol + rtol * xp.abs(rhs)
    bad = diff.reshape(diff.shape[0], -1).any(axis=1)
    if bool(bad.any()):
        i = int(xp.argmax(bad))
        if verbose:
            print(f"not associative: for sample {i}, op(op(a, b), c) = {lhs[i].tolist()} but "
                  f"op(a, op(b, c)) = {rhs[i].tolist()}. A tree scan would disagree with the "
                  f"sequential scan.")
        return False
    return True


def _tolerance(dtype: np.dtype, elem_size: int) -> float:
    """How far ``op(op(a, b), c)`` and ``op(a, op(b, c))`` may differ, relative to the triple's largest
    magnitude, for an operator associative up to rounding: 0 for integers (exact), and for floats a few hundred
    roundings (more for larger elements: a matrix product sums k terms per entry), never over 5 %."""
    if dtype.kind not in "fc":
        return 0.0
    return min(0.05, 256 * float(np.finfo(dtype).eps) * max(1.0, float(elem_size)) ** 0.5)


def require_associative(op: Op, x: Any, triples: int = 8) -> None:
    """Refuse an ``op`` that is not associative on ``x``'s own elements, before a tree scan brackets them.

    A tree scan (Hillis-Steele, Blelloch) combines ``(x0 op x1) op (x2 op x3)`` where the loop combines
    ``((x0 op x1) op x2) op x3``: the same answer only for an associative ``op``.  This tries ``triples``
    triples of elements of ``x`` (fixed positions, in one vectorized call of ``op`` per side) and raises a
    :class:`~course.errors.BadInputError` when the two bracketings differ by more than rounding: subtraction
    and averaging are refused, an operator associative only up to floating-point rounding (an online
    softmax's ``(max, sum, out)`` combine, ``logaddexp``, matrix products) passes.  Entries that are
    inf or NaN on either side are not compared.  The ready operators, object arrays and fewer than 3
    elements are not tried.

    >>> require_associative(lambda a, b: a - b, np.array([5.0, 3, 1, 4, 2, 7]))
    Traceback (most recent call last):
    ...
    course.errors.BadInputError: op is not associative: ...
    """
    xp = xp_of(x)
    n = x.shape[0]
    if n < 3 or op in OPERATORS.values() or x.dtype.kind == "O" or x[0].size == 0:
        return
    i, j, k = (xp.asarray(v) for v in np.random.default_rng(0).integers(0, n, (3, triples)))
    a, b, c = x[i], x[j], x[k]
    ab, bc = op(a, b), op(b, c)
    if getattr(ab, "shape", None) != a.shape or getattr(bc, "shape", None) != a.shape:
        return                                  # the scan itself refuses an op that returns another shape
    left, right = xp.asarray(op(ab, c)), xp.asarray(op(a, bc))
    if left.shape != a.shape or right.shape != a.shape or left.dtype.kind not in "iufcb":
        return
    rows = [v.reshape(triples, -1).astype(np.float64 if v.dtype.kind in "iub" else v.dtype) for v in (a, b, c)]
    l_rows, r_rows = (v.reshape(triples, -1) for v in (left, right))
    finite = xp.isfinite(l_rows) & xp.isfinite(r_rows)
    scale = xp.stack([xp.where(xp.isfinite(v), xp.abs(v), 0).max(axis=1) for v in rows + [l_rows, r_rows]]).max(0)
    tol = _tolerance(np.dtype(left.dtype), int(np.prod(x.shape[1:], dtype=np.int64))) * scale
    with np.errstate(invalid="ignore", over="ignore"):
        off = finite & (l_rows != r_rows if left.dtype.kind in "iub" else xp.abs(l_rows - r_rows) > tol[:, None])
    bad = off.any(axis=1)
    if bool(bad.any()):
        t = int(xp.argmax(bad))

        def show(v: Any) -> Any:
            return np.asarray(v.get() if hasattr(v, "get") else v)[t].tolist()
        raise BadInputError(
            f"op is not associative: with a = x[{int(i[t])}], b = x[{int(j[t])}], c = x[{int(k[t])}], "
            f"op(op(a, b), c) = {show(left)!r:.80} but op(a, op(b, c)) = {show(right)!r:.80}. A tree scan brackets "
            "the elements differently from the loop, so it would return another answer (subtraction and "
            "averaging are like this). Use an associative operator (add, max, a matrix product, the composition "
            "of maps), or sequential_scan, the loop, for this one.")
