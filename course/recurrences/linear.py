"""Lesson 07: the first-order linear recurrence ``h_t = a_t ⊙ h_{t-1} + b_t``, four ways.

A *diagonal* linear recurrence updates every channel on its own: ``a_t``, ``b_t`` and ``h_t``
all have shape ``(n,)`` (or any channel shape, ``(B, n)`` for a batch), and ``⊙`` multiplies
element by element.  It is the heart of linear RNNs (Martin & Cundy 2018), of diagonal state
spaces (S5) and of Mamba's selective scan.  This module computes it

1. :func:`recurrence_loop`: one step after the other, T dependent steps: the oracle;
2. :func:`recurrence_scan`: the Blelloch scan of lesson 04 with the affine operator.  A step is
   the map ``h -> a·h + b``, written as the pair ``(a, b)``; doing ``(a₁, b₁)`` first and then
   ``(a₂, b₂)`` is again such a map, ``(a₂a₁, a₂b₁ + b₂)`` (:func:`course.scan.ops.affine`),
   and that composition is associative, so the tree may re-bracket it: about 2·log2 T levels;
3. :func:`recurrence_closed_form`: unroll the loop, ``h_t = P_t · Σ_{s≤t} b_s / P_s`` with the
   running product ``P_t = a_0 ⋯ a_t``: two library calls (``cumprod``, ``cumsum``), but ``P_t``
   underflows to 0 (|a| < 1) or overflows (|a| > 1) once T is long, and the result turns into
   ``nan`` and ``inf``;
4. :func:`recurrence_log_space`: the same closed form with logarithms (Heinsen 2023):
   ``log|P_t|`` is a running *sum* that never underflows, and the running sum of ``b_s/P_s``
   becomes a running log-sum-exp.  Signs are carried apart.

The backward pass (:func:`recurrence_backward`) is the same kind of recurrence, run in reverse
with the same ``a``: see :func:`reverse_recurrence`.

>>> import numpy as np
>>> a = np.array([0.5, 0.5, 2.0]); b = np.array([1.0, 1.0, 1.0])
>>> recurrence_loop(a, b)
array([1. , 1.5, 4. ])
>>> recurrence_scan(a, b)
array([1. , 1.5, 4. ])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..arguments import OneOf, arguments
from ..devices import array_device, get_xp, to_numpy, xp_of
from ..errors import BadInputError
from ..limits import require_fits
from ..scan.algorithms import affine, blelloch_scan

__all__ = ["validate_recurrence", "recurrence_loop", "recurrence_scan", "recurrence_closed_form",
           "recurrence_log_space", "reverse_recurrence", "recurrence_backward", "METHODS",
           "solve_recurrence"]


# ------------------------------------------------------------------ input checks

def validate_recurrence(a: Any, b: Any, h0: Any = None, arrays: int = 2,
                        nonzero_a: bool = False) -> tuple[Any, Any, Any, Any]:
    """Check ``a``, ``b`` (and ``h0``); return ``(a, b, h0, xp)`` as arrays of one float dtype.

    ``a`` and ``b`` have the same shape ``(T, *channels)`` with T >= 1 and live on one device;
    ``h0`` (the state before step 0) has shape ``channels``, or is a scalar (every channel starts
    there), or is None (zeros); it is returned with shape ``channels``.  ``arrays``: how many arrays
    of a's size the method holds at once (the result and a temporary; the scan's pairs take 4);
    ``nonzero_a``: refuse an ``a_t`` of 0 (the log-space method).  Raises
    :class:`~course.errors.BadInputError` naming the argument, and
    :class:`~course.errors.DeviceMemoryError` when the result would not fit (broadcast views
    included), before anything is allocated.

    >>> a, b, h0, xp = validate_recurrence([0.5, 0.5], [1.0, 2.0])
    >>> h0
    array(0.)
    """
    devs = {array_device(a), array_device(b)} | ({array_device(h0)} if h0 is not None else set())
    if len(devs) > 1:
        raise BadInputError("a, b and h0 live on different devices: move them to one with "
                            "course.to_device(x, device).")
    xp = get_xp(devs.pop())
    a, b = xp.asarray(a), xp.asarray(b)
    if a.ndim == 0 or a.shape[0] == 0:
        raise BadInputError(f"a must have shape (T, *channels) with T >= 1 steps; got shape "
                            f"{tuple(a.shape)}.")
    if a.shape != b.shape:
        raise BadInputError(f"a and b must have the same shape (T, *channels); got a "
                            f"{tuple(a.shape)} and b {tuple(b.shape)}.")
    for name, v in (("a", a), ("b", b)):
        if v.dtype.kind not in "fiub":
            raise BadInputError(f"{name} must hold real numbers; got dtype {v.dtype}.")
    dtype = np.result_type(a.dtype, b.dtype, np.float32 if a.dtype.kind in "iub" else a.dtype)
    if h0 is None:
        h0 = xp.zeros(a.shape[1:], dtype=dtype)
    else:
        h0 = xp.asarray(h0)
        if h0.ndim and tuple(h0.shape) != tuple(a.shape[1:]):
            raise BadInputError(f"h0 is the state before step 0: shape {tuple(a.shape[1:])} (one "
                                f"value per channel) or a scalar; got shape {tuple(h0.shape)}.")
        dtype = np.result_type(dtype, h0.dtype)
        h0 = xp.broadcast_to(h0, a.shape[1:])
    require_fits(arrays * a.size * np.dtype(dtype).itemsize, array_device(a),
                 what=f"{arrays} arrays of {a.shape[0]:,} steps of shape {tuple(a.shape[1:])} (the result and "
                      "the method's temporaries)")
    if nonzero_a and bool(xp.any(a == 0)):
        raise BadInputError("recurrence_log_space needs every a_t != 0 (log 0 is -inf): a zero "
                            "resets the state, so split the sequence there, or use "
                            "recurrence_scan, which has no such limit.")
    return a.astype(dtype, copy=False), b.astype(dtype, copy=False), h0.astype(dtype), xp


# ------------------------------------------------------------------ 1. the loop (the oracle)

def recurrence_loop(a: Any, b: Any, h0: Any = None) -> Any:
    """``h_t = a_t · h_{t-1} + b_t`` one step after the other (T dependent steps).

    Parameters
    ----------
    a, b : arrays ``(T, *channels)``, numpy or cupy.
    h0 : the state before step 0, shape ``channels`` or a scalar; None = 0.

    Returns
    -------
    h : array ``(T, *channels)``: ``h[t]`` is the state after step t.

    Examples
    --------
    >>> recurrence_loop([2.0, 2.0], [1.0, 1.0], h0=1.0)
    array([3., 7.])
    """
    a, b, h0, xp = validate_recurrence(a, b, h0)
    h = xp.empty_like(b)
    state = h0
    for t in range(a.shape[0]):          # each step needs the one before
        state = a[t] * state + b[t]
        h[t] = state
    return h


# ------------------------------------------------------------------ 2. the scan

def recurrence_scan(a: Any, b: Any, h0: Any = None, trace: bool = False) -> Any:
    """The recurrence as an inclusive Blelloch scan of the affine maps ``(a_t, b_t)``.

    The start state folds into the first map: ``(a_0, a_0·h0 + b_0)`` maps 0 to ``h_0``.  The
    inclusive scan then holds at position t the composition of maps 0..t, whose ``b`` part is
    that composition applied to 0, i.e. ``h_t``.  Each tree level is one vectorized call of
    :func:`course.scan.ops.affine` (earlier map first) over all its pairs and all channels.

    Parameters
    ----------
    a, b, h0 : as for :func:`recurrence_loop`.
    trace : also return the scan's :class:`course.scan.ScanTrace` (small T only).

    Returns
    -------
    h, or ``(h, trace)``.

    Examples
    --------
    >>> recurrence_scan([2.0, 2.0], [1.0, 1.0], h0=1.0)
    array([3., 7.])
    """
    a, b, h0, xp = validate_recurrence(a, b, h0, arrays=4)
    maps = xp.stack([a, b], axis=-1)                 # (T, *channels, 2): the pairs (a_t, b_t)
    maps[0, ..., 1] += a[0] * h0                     # start from h0 instead of 0
    out = blelloch_scan(maps, op=affine, exclusive=False, trace=trace)
    composed, tr = out if trace else (out, None)
    h = xp.ascontiguousarray(composed[..., 1])       # the maps 0..t applied to 0
    return (h, tr) if trace else h


# ------------------------------------------------------------------ 3. the closed form

def recurrence_closed_form(a: Any, b: Any, h0: Any = None) -> Any:
    """``h_t = P_t · (h0 + Σ_{s≤t} b_s / P_s)`` with ``P_t = a_0·a_1⋯a_t``: cumprod and cumsum.

    Exact in exact arithmetic; in floating point ``P_t`` leaves the representable range at long
    T (``0.5**1075 == 0.0`` in float64, ``0.5**150`` in float32) and the result becomes
    ``nan``/``inf`` from there on.  That failure is the point: see :func:`recurrence_log_space`.
    An ``a_t`` that *is* zero resets the state (``h_t = b_t``); the products then restart after it,
    as the loop does, instead of dividing by zero.

    >>> recurrence_closed_form([2.0, 2.0], [1.0, 1.0], h0=1.0)
    array([3., 7.])
    """
    a, b, h0, xp = validate_recurrence(a, b, h0)
    zero = a == 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        if not bool(xp.any(zero)):
            P = xp.cumprod(a, axis=0)
            return P * (h0 + xp.cumsum(b / P, axis=0))
        # a_r = 0: h_t = Q_t · Σ_{r≤s≤t} b_s / Q_s after the last zero r, Q the products with the zeros as 1
        Q = xp.cumprod(xp.where(zero, 1, a), axis=0)
        C = xp.cumsum(b / Q, axis=0)
        steps = xp.arange(a.shape[0]).reshape((-1,) + (1,) * (a.ndim - 1))
        last = np.maximum.accumulate(to_numpy(xp.where(zero, steps, -1)), axis=0)   # last zero up to t
        last = xp.asarray(last)
        before = xp.concatenate([xp.zeros_like(C[:1]), C[:-1]])                    # C_{r-1}, C_{-1} = 0
        start = xp.where(last < 0, h0, 0) - xp.take_along_axis(before, xp.maximum(last, 0), axis=0)
        return Q * (start + C)


# ------------------------------------------------------------------ 4. the closed form in log space

def _logaddexp(p, q):
    """``log(exp(p) + exp(q))`` without overflow, and -inf for two -inf (an associative operator)."""
    xp = xp_of(p)
    m = xp.maximum(p, q)
    with np.errstate(invalid="ignore"):
        return xp.where(xp.isinf(m) & (m < 0), m, m + xp.log1p(xp.exp(-xp.abs(p - q))))


def _log_cumsum_exp(x, xp):
    """Running ``log(Σ_{s≤t} exp(x_s))`` along axis 0: numpy's accumulate, a scan on the GPU."""
    if xp is np:
        return np.logaddexp.accumulate(x, axis=0)
    return blelloch_scan(x, op=_logaddexp, identity=-np.inf, exclusive=False)


def recurrence_log_space(a: Any, b: Any, h0: Any = None) -> Any:
    """The closed form computed with logarithms, so that long products cannot under- or overflow.

    Write ``P_t = σ_t · exp(α_t)`` with the running sum ``α_t = Σ_{r≤t} log|a_r|`` and the sign
    ``σ_t`` (a running product of ±1).  Then ``h_t = σ_t · exp(α_t) · Σ_{s≤t} c_s`` with
    ``c_s = σ_s · b_s · exp(-α_s)`` (``h0`` enters as one more term, at s = -1).  The terms are
    split by sign, each group summed as ``log Σ exp(log|c_s|)`` (a running log-sum-exp), and
    ``α_t`` is added back *before* exponentiating, so that no intermediate leaves the range.
    Every ``a_t`` must be nonzero (a zero resets the state: split the sequence there).  A NaN in
    ``b`` or ``h0`` makes every later ``h_t`` NaN, as in the loop.

    >>> np.round(recurrence_log_space([2.0, 2.0], [1.0, 1.0], h0=1.0), 12)
    array([3., 7.])
    """
    a, b, h0, xp = validate_recurrence(a, b, h0, nonzero_a=True)
    alpha = xp.cumsum(xp.log(xp.abs(a)), axis=0)                 # log|P_t|
    sigma = xp.cumprod(xp.sign(a), axis=0)                       # sign of P_t
    T = a.shape[0]
    with np.errstate(divide="ignore"):          # log 0 = -inf is fine: exp(-inf) = 0
        # the terms c_s for s = -1 (h0, with P_{-1} = 1) and s = 0..T-1
        log_c = xp.concatenate([xp.log(xp.abs(h0))[None], xp.log(xp.abs(b)) - alpha])
        sign_c = xp.concatenate([xp.sign(h0)[None], sigma * xp.sign(b)])
        neg_inf = xp.asarray(-np.inf, dtype=a.dtype)
        pos = _log_cumsum_exp(xp.where(sign_c > 0, log_c, neg_inf), xp)[1:T + 1]
        neg = _log_cumsum_exp(xp.where(sign_c < 0, log_c, neg_inf), xp)[1:T + 1]
        h = sigma * (xp.exp(alpha + pos) - xp.exp(alpha + neg))
    nan_since = xp.cumsum(xp.isnan(b), axis=0) > 0                # sign(NaN) is neither > 0 nor < 0:
    return xp.where(nan_since | xp.isnan(h0), xp.asarray(np.nan, dtype=h.dtype), h)   # put it back


# ------------------------------------------------------------------ the backward pass

@arguments(method=OneOf("scan", "loop"))
def reverse_recurrence(a_next: Any, d: Any, method: str = "scan") -> Any:
    """``g_t = d_t + a_next_t · g_{t+1}`` from the end (``g_{T-1} = d_{T-1} + a_next_{T-1}·0``).

    A linear recurrence run backwards in time: flip the sequence, run it forwards, flip back.
    ``method`` is ``"scan"`` (Blelloch, about 2·log2 T levels) or ``"loop"``.

    >>> reverse_recurrence([0.5, 0.5, 0.5], [1.0, 1.0, 1.0], method="loop")
    array([1.75, 1.5 , 1.  ])
    """
    a_next, d, _, xp = validate_recurrence(a_next, d)
    run = recurrence_scan if method == "scan" else recurrence_loop
    return xp.ascontiguousarray(run(a_next[::-1], d[::-1])[::-1])


def recurrence_backward(a: Any, h: Any, grad_h: Any, h0: Any = None,
                        method: str = "scan") -> tuple[Any, Any, Any]:
    """Gradients of a loss through ``h_t = a_t · h_{t-1} + b_t``, by a reverse recurrence.

    ``grad_h[t]`` is ∂L/∂h_t from whatever reads ``h_t`` directly (the output layer).  The
    total gradient ``g_t`` of ``h_t`` adds what flows back from ``h_{t+1} = a_{t+1}·h_t + …``:
    ``g_t = grad_h_t + a_{t+1}·g_{t+1}``, a linear recurrence in reverse with the *same* a
    (shifted by one step).  Then ``∂L/∂b_t = g_t``, ``∂L/∂a_t = g_t · h_{t-1}`` and
    ``∂L/∂h0 = a_0 · g_0``.  With the scan that is BPPSA (lesson 05) for a diagonal Jacobian:
    each combine costs O(n) instead of an n×n matrix product.

    Returns
    -------
    ``(grad_a, grad_b, grad_h0)``.

    Examples
    --------
    >>> a = np.array([0.5, 0.5]); h = recurrence_loop(a, [1.0, 1.0])
    >>> grad_a, grad_b, grad_h0 = recurrence_backward(a, h, np.array([0.0, 1.0]))  # L = h_1
    >>> grad_a, grad_b, float(grad_h0)          # h_1 = a_1·h_0 + b_1 and h_0 = a_0·h0 + b_0
    (array([0., 1.]), array([0.5, 1. ]), 0.25)
    """
    a, h, h0, xp = validate_recurrence(a, h, h0)
    grad_h = xp.asarray(grad_h, dtype=a.dtype)
    if grad_h.shape != a.shape:
        raise BadInputError(f"grad_h must have the shape of a and h, {tuple(a.shape)}; got "
                            f"{tuple(grad_h.shape)}.")
    a_next = xp.concatenate([a[1:], xp.zeros_like(a[:1])])      # a_{t+1}; nothing after the end
    g = reverse_recurrence(a_next, grad_h, method)
    h_prev = xp.concatenate([h0[None] + xp.zeros_like(a[:1]), h[:-1]])
    return g * h_prev, g, a[0] * g[0]


#: The forward methods by name (the widgets and the timings use these names).
METHODS = {"loop": recurrence_loop, "scan": recurrence_scan, "closed form": recurrence_closed_form,
           "log space": recurrence_log_space}


@arguments(method=OneOf(*METHODS))
def solve_recurrence(a: Any, b: Any, h0: Any = None, method: str = "scan") -> Any:
    """Run one of :data:`METHODS` by name.

    >>> solve_recurrence([0.5], [2.0], method="closed form")
    array([2.])
    """
    return METHODS[method](a, b, h0)
