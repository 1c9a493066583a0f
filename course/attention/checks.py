"""Checks for lesson 08's exercises: the softmax combine, FlashAttention's backward pass, and the attention kernel.

Each check feeds your function fresh inputs (copies: writing into them changes nothing the check compares
with), compares with an oracle that does not share its code -- plain NumPy softmax in float64, centred finite
differences of a naive forward pass, numba's CUDA simulator with counted memory sectors -- and says what is
wrong, naming the typical slips, or that it is right.  They appear as ``course.check.<name>``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..grading import array_mismatch, verdict
from .backward import flash_attention_backward
from .forward import flash_attention
from .softmax import softmax_combine

__all__ = ["check_softmax_combine", "check_flash_backward", "check_kernel_online_softmax"]


def _call(fn: Callable, *args: Any, context: str = "") -> tuple[bool, Any]:
    """:func:`course.grading.call_learner` on copies of ``args``; a ``sys.exit()`` inside is reported, not obeyed.

    (``course.check`` imports this module while it collects the checks, so the grading helper is imported here.)
    """
    from ..grading import call_learner

    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    try:
        return call_learner(fn, *copies, context=context)
    except SystemExit as exc:
        print(f"Your function called sys.exit({exc.code!r}) (or raised SystemExit); return a result instead"
              + (f" ({context})." if context else "."))
        return False, None


# ------------------------------------------------------------------ exercise 1: the combine

def _sums_added(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.stack([np.maximum(a[..., 0], b[..., 0]), a[..., 1] + b[..., 1]], axis=-1)


def _wrong_sign(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    m = np.maximum(a[..., 0], b[..., 0])
    return np.stack([m, a[..., 1] * np.exp(m - a[..., 0]) + b[..., 1] * np.exp(m - b[..., 0])], axis=-1)


def check_softmax_combine(fn: Callable) -> bool:
    """Check ``fn(a, b)``: the combine of two stacks of softmax states ``[m, s]`` (last axis), ``a`` earlier.

    >>> check_softmax_combine(softmax_combine)
    check_softmax_combine: right: the sums meet at the larger max, (-inf, 0) changes nothing, a scan gives the softmax.
    True
    """
    name = "check_softmax_combine"
    rng = np.random.default_rng(808)
    for shape in ((6,), (3, 4), (1,)):
        a = np.stack([rng.normal(0, 3, shape), rng.uniform(0.5, 3, shape)], axis=-1)
        b = np.stack([rng.normal(0, 3, shape), rng.uniform(0.5, 3, shape)], axis=-1)
        ok, got = _call(fn, a, b, context=f"stacks of shape {a.shape}")
        if not ok:
            return verdict(name, "", "")
        suspects = [(_sums_added(a, b), "the two sums were added as they are; each must first be rescaled to the "
                                        "common maximum M: s·exp(m - M)."),
                    (_wrong_sign(a, b), "the rescaling factor is upside down: a sum taken below the maximum m moves "
                                        "to M = max(m, m') by exp(m - M), a number at most 1."),
                    (softmax_combine(b, a), "")]
        problem = array_mismatch(f"stacks of shape {a.shape}", got, softmax_combine(a, b), suspects[:2])
        if problem:
            return verdict(name, problem, "")
    empty = np.array([[-np.inf, 0.0], [-np.inf, 0.0]])
    some = np.array([[1.5, 2.0], [-np.inf, 0.0]])
    with np.errstate(all="ignore"):
        ok, got = _call(fn, empty, some, context="the empty state (-inf, 0) on the left")
    if not ok:
        return verdict(name, "", "")
    got = np.asarray(got, dtype=float) if got is not None else got
    if got is None or np.shape(got) != some.shape or np.isnan(got).any():
        return verdict(name, "combining with the empty state (m = -inf, s = 0) must give the other state back, "
                             "and two empty states an empty one; -inf - (-inf) is NaN, so give a side whose maximum "
                             "is -inf the factor 0 (e.g. np.where(M == -inf, 0, M) inside the exponent).", "")
    problem = array_mismatch("the empty state (-inf, 0) combined with a state", got, some)
    if problem:
        return verdict(name, problem, "")
    from ..scan.algorithms import blelloch_scan

    for n in (1, 5, 16):
        x = rng.normal(0, 2, n) + (1000.0 if n == 16 else 0.0)
        leaves = np.stack([x, np.ones(n)], axis=-1)
        ok, states = _call(blelloch_scan, leaves, fn, np.array([-np.inf, 0.0]), False,
                           context=f"a Blelloch scan of {n} scores built on your combine")
        if not ok:
            return verdict(name, "", "")
        m, s = states[-1]
        want = np.exp(x - x.max()) / np.exp(x - x.max()).sum()
        problem = array_mismatch(f"the softmax of {n} scores{' near 1000' if n == 16 else ''} from a scan of your "
                                 f"combine", np.exp(x - m) / s, want)
        if problem:
            return verdict(name, problem, "")
    return verdict(name, None, "right: the sums meet at the larger max, (-inf, 0) changes nothing, a scan gives "
                               "the softmax.")


# ------------------------------------------------------------------ exercise 2 (long): the backward pass

def _naive_loss(q, k, v, dout, scale, causal):
    s = q @ k.T * scale
    if causal:
        s = np.where(np.tri(*s.shape, dtype=bool), s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return float(np.sum((p / p.sum(axis=1, keepdims=True)) @ v * dout))


def _finite_differences(q, k, v, dout, scale, causal, h=1e-6):
    """∂L/∂q, ∂L/∂k, ∂L/∂v of ``L = Σ out ⊙ dout`` through a plain NumPy forward pass, by centred differences."""
    grads = []
    arrays = [q.copy(), k.copy(), v.copy()]
    for a in arrays:
        g = np.zeros_like(a)
        for ix in np.ndindex(a.shape):
            keep = a[ix]
            a[ix] = keep + h
            up = _naive_loss(*arrays, dout, scale, causal)
            a[ix] = keep - h
            down = _naive_loss(*arrays, dout, scale, causal)
            a[ix] = keep
            g[ix] = (up - down) / (2 * h)
        grads.append(g)
    return grads


def _slip(q, k, v, out, lse, dout, scale, causal, block, without_d=False, no_lse=False, no_scale=False):
    """The tiled backward with one typical slip switched on (the check's suspects)."""
    n = q.shape[0]
    big_d = 0.0 if without_d else (dout * out).sum(axis=1)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    s = q @ k.T * scale
    if causal:
        s = np.where(np.tri(n, dtype=bool), s, -np.inf)
    p = np.exp(s) if no_lse else np.exp(s - lse[:, None])
    dv = p.T @ dout
    ds = p * (dout @ v.T - (big_d if without_d else big_d[:, None]))
    f = 1.0 if no_scale else scale
    dq, dk = ds @ k * f, ds.T @ q * f
    return dq, dk, dv


def check_flash_backward(fn: Callable) -> bool:
    """Check ``fn(q, k, v, out, lse, dout, causal, block)`` -> ``(dq, dk, dv)``: attention's backward pass from
    the forward's output and log-sum-exp, tile by tile (``block`` rows and keys per tile), for one head.

    The gradients are compared with centred finite differences of ``L = Σ out ⊙ dout`` through a plain NumPy
    forward pass (no backward pass involved), with and without a causal mask, for tiles that do and do not
    divide the sequence; then at a size where finite differences are too slow, with the course's own
    :func:`~course.attention.flash_attention_backward`.
    """
    name = "check_flash_backward"
    rng = np.random.default_rng(88)
    cases = [(5, 3, 2, False, 2), (6, 4, 3, True, 4), (1, 2, 2, False, 3), (7, 2, 3, True, 3), (40, 8, 8, True, 16)]
    for n, d, d_v, causal, block in cases:
        q, k, dout = rng.normal(size=(n, d)), rng.normal(size=(n, d)), rng.normal(size=(n, d_v))
        v = rng.normal(size=(n, d_v))
        scale = 1 / np.sqrt(d)
        out, lse = flash_attention(q, k, v, causal, block_q=n, block_k=n)
        where = f"n = {n}, d = {d}, d_v = {d_v}, causal={causal}, block = {block}"
        ok, got = _call(fn, q, k, v, out, lse, dout, causal, block, context=where)
        if not ok:
            return verdict(name, "", "")
        if not (isinstance(got, (tuple, list)) and len(got) == 3):
            return verdict(name, f"return the three gradients (dq, dk, dv); got {type(got).__name__}"
                                 + (f" of length {len(got)}" if isinstance(got, (tuple, list)) else "") + ".", "")
        if n <= 8:
            want = _finite_differences(q, k, v, dout, scale, causal)
            tol = {"rtol": 1e-5, "atol": 1e-7}
        else:
            want = flash_attention_backward(q, k, v, out, lse, dout, causal, block_q=block, block_k=block)
            tol = {"rtol": 1e-9, "atol": 1e-11}
        slips = {"without_d": "the softmax's backward subtracts D_i = Σ_j dout_ij · out_ij from every dP_ij of "
                              "row i: dS = P ⊙ (dP - D).",
                 "no_lse": "P must be rebuilt as exp(S - lse): without lse the probabilities do not sum to 1.",
                 "no_scale": "S = q kᵀ · scale, so dq = dS k · scale and dk = dSᵀ q · scale."}
        for part, g, w in zip(("dq", "dk", "dv"), got, want):
            suspects = [(_slip(q, k, v, out, lse, dout, scale, causal, block, **{key: True})["dq dk dv".split()
                                                                                                 .index(part)], msg)
                        for key, msg in slips.items()]
            suspects.append((np.asarray(w).T, f"{part} is transposed."))
            problem = array_mismatch(f"{part} ({where})", g, w, suspects, **tol)
            if problem:
                return verdict(name, problem, "")
    return verdict(name, None, "right: the tiles' gradients match finite differences of the forward pass, "
                               "with and without the causal mask, the probabilities rebuilt from lse.")


# ------------------------------------------------------------------ the kernel: counted sectors

def _sectors(requests: list, array: str) -> int:
    return sum(r["cost"] for r in requests if r["space"] == "global" and r["array"] == array and r["kind"] == "R")


def check_kernel_online_softmax(kernel: Any) -> bool:
    """Check the attention kernel ``kernel(out, lse, q, k, v, n_k, scale)``: one block of ``ATT_TILE`` threads
    per query tile, K and V staged tile by tile in shared memory, an online softmax per row.

    Right values (out and lse against NumPy in float64), no race, every index in bounds, and the counted
    global-memory sectors of K and V: each read once per query tile, and coalesced (neighbouring threads on
    neighbouring floats).
    """
    from ..kernels.counts import SECTOR_BYTES, hardware_counts
    from ..kernels.exercises import ATT_D, ATT_KEYS, ATT_QUERIES, ATT_TILE, exercise
    from ..kernels.grading import grade, worst_counts
    from ..kernels.simulator import python_function

    ex = exercise("online_softmax")
    try:
        python_function(kernel)
    except Exception as exc:
        print(f"Not yet: {exc}.")
        return False
    try:
        g = grade("online_softmax", kernel)
    except SystemExit as exc:
        print(f"Not yet: your kernel called sys.exit({exc.code!r}); a kernel cannot end the program.")
        return False
    if not g.ok:
        if g.problems and g.problems[0].startswith("Not done yet"):
            print(g.problems[0])
            return False
        many = len(g.problems) > 1
        print("Not yet:", *g.problems, sep="\n  - " if many else " ")
        return False
    counts = hardware_counts(g.trace, ex.threads)
    tiles = ATT_QUERIES // ATT_TILE
    target = tiles * ATT_KEYS * ATT_D * 4 // SECTOR_BYTES            # every K (or V) sector once per query tile
    worst = worst_counts(g.trace)
    for array in ("k", "v"):
        got = _sectors(counts.requests, array)
        if got > target:
            print(f"Not yet: {got} global sectors of {array.upper()} read, the target is {target} (each of its "
                  f"{ATT_KEYS * ATT_D * 4 // SECTOR_BYTES} sectors once per query tile, {tiles} tiles). Your loads "
                  f"are not coalesced: in one load instruction the {ATT_TILE} threads should read {ATT_TILE} "
                  f"neighbouring floats (thread t takes elements t, t + {ATT_TILE}, ... of the flattened tile), not "
                  f"a column each.")
            return False
    used = ", ".join(f"{worst.get(k, (0,))[0]} {k.replace('_', ' ')}" for k in ex.budget)
    print(f"Correct: right values, no race, every index in bounds; K and V each cost {target} global sectors, "
          f"once per query tile; the busiest thread made {used} (within the budget).", *g.notes)
    return True
