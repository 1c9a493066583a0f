"""Checks for lesson 04's exercises: one up-sweep level, one down-sweep level, exclusive from inclusive,
and the whole in-place down-sweep over an up-swept array.

Each check feeds your function fresh inputs (odd and even lengths, length 1,
numbers and 2x2 matrices), compares with the course's answer and says what is
wrong.  The operand order is tested with the :func:`course.scan.interval`
operator, whose elements are index ranges: combining them in the wrong order
leaves a tell-tale marker, so the message can say exactly which operands were
swapped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..grading import call_learner, real_array, verdict
from .algorithms import add, blelloch_levels, identity_for, interval, interval_leaves, matmul, sequential_scan
from .ops import Op

__all__ = ["check_up_sweep_level", "check_down_sweep_level", "check_exclusive_from_inclusive",
           "check_down_sweep_inplace"]


# ------------------------------------------------------------------ the course's answers

def up_sweep_level(nodes: np.ndarray, op: Op) -> np.ndarray:
    """The parents of one level: ``op(left, right)`` for each pair, an odd node out moved up.

    >>> up_sweep_level(np.array([3, 1, 7, 0, 4]), add)
    array([4, 7, 4])
    """
    m = nodes.shape[0]
    parents = op(nodes[0:m - 1:2], nodes[1:m:2])
    if m % 2:
        parents = np.concatenate([parents, nodes[m - 1:]])
    return parents


def down_sweep_level(parent_prefix: np.ndarray, nodes: np.ndarray, op: Op) -> np.ndarray:
    """The prefixes of one level's nodes from their parents' prefixes.

    A left child starts where its parent starts: it gets the parent's prefix.  A
    right child comes after its left sibling: ``op(parent_prefix, left_sibling)``.

    >>> down_sweep_level(np.array([0, 11]), np.array([3, 1, 7, 0]), add)
    array([ 0,  3, 11, 18])
    """
    m = nodes.shape[0]
    out = np.empty_like(nodes)
    out[0::2] = parent_prefix[: (m + 1) // 2]
    out[1::2] = op(parent_prefix[: m // 2], nodes[0:m - 1:2])
    return out


def exclusive_from_inclusive(inclusive: np.ndarray, identity: Any) -> np.ndarray:
    """Shift right by one and start with the identity.

    >>> exclusive_from_inclusive(np.array([3, 4, 11]), 0)
    array([0, 3, 4])
    """
    out = np.empty_like(inclusive)
    if inclusive.shape[0]:
        out[0] = identity
        out[1:] = inclusive[:-1]
    return out


# ------------------------------------------------------------------ helpers

def _call(fn: Callable, *args: Any) -> tuple[bool, Any]:
    """(True, the result as an array of real numbers) or (False, None) after saying why not."""
    where = f"first input of shape {getattr(args[0], 'shape', '?')}"
    done, got = call_learner(fn, *args, context=where)
    if not done:
        return False, None
    _, unreadable = real_array(f"Your result ({where})", got)
    if unreadable:
        print(unreadable)
        return False, None
    return True, np.asarray(got)


def _differs(got: Any, want: np.ndarray, what: str) -> str | None:
    if got is None:
        return f"{what}: your function returned None; return the new array."
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"{what}: result has shape {got.shape}, expected {want.shape}."
    if not np.allclose(got, want, atol=1e-9):
        i = int(np.flatnonzero(~np.isclose(got, want, atol=1e-9).reshape(len(want), -1).any(1))[0])
        return f"{what}: element {i} is {got[i].tolist()}, expected {want[i].tolist()}."
    return None


def _ranges(a) -> str:
    a = np.asarray(a)
    return ", ".join("order!" if lo > hi else "∅" if lo == hi else f"x[{lo}:{hi}]" for lo, hi in a)


def _swapped(a, b):
    return interval(b, a)


def _same(got: Any, want: np.ndarray) -> bool:
    return got is not None and np.shape(got) == want.shape and np.array_equal(np.asarray(got), want)


def _counting(calls: list):
    def op(a, b):
        calls.append(a.shape[0])
        return matmul(a, b)
    return op


def _report(problem: str | None, ok_text: str) -> bool:
    if problem:
        print(problem)
        return False
    print(ok_text)
    return True


def _blelloch_with(x, op, up=up_sweep_level, down=down_sweep_level):
    """A whole exclusive Blelloch scan built from one up-level and one down-level function."""
    tree = [x]
    for _ in blelloch_levels(x.shape[0]):
        tree.append(np.asarray(up(tree[-1], op)))
    prefix = identity_for(op, x.shape[1:], x.dtype)[None]
    for nodes in reversed(tree[:-1]):
        prefix = np.asarray(down(prefix, nodes, op))
    return prefix if x.shape[0] else x.copy()


# ------------------------------------------------------------------ the checks

def check_up_sweep_level(fn: Callable) -> bool:
    """Check ``fn(nodes, op) -> parents`` (one up-sweep level, one call of ``op``).

    >>> check_up_sweep_level(up_sweep_level)
    Correct: one call of op combines every pair, in order, and an odd node moves up unchanged.
    True
    """
    for m in (8, 5, 2):
        leaves = interval_leaves(m)
        done, got = _call(fn, leaves, interval)
        if not done:
            return False
        want = up_sweep_level(leaves, interval)
        if _same(got, up_sweep_level(leaves, _swapped)) and not _same(got, want):
            return _report(f"Operand order: with {m} nodes you produced [{_ranges(got)}] but the "
                           f"parents cover [{_ranges(want)}]. Call op(left, right) with the "
                           f"EARLIER node (even positions, nodes[0::2]) first.", "")
        if got is not None and np.shape(got) == (m // 2, 2) and m % 2:
            return _report(f"With an odd number of nodes ({m}) the last one has no partner; it "
                           f"must move up unchanged. You returned {m // 2} parents, expected "
                           f"{(m + 1) // 2}.", "")
        problem = _differs(got, want, f"{m} interval nodes")
        if problem:
            return _report(problem, "")
    rng = np.random.default_rng(4)
    for m in (7, 16):
        mats = rng.normal(size=(m, 2, 2))
        calls: list[int] = []
        done, got = _call(fn, mats, _counting(calls))
        if not done:
            return False
        problem = _differs(got, up_sweep_level(mats, matmul), f"{m} 2x2 matrices")
        if problem:
            return _report(problem, "")
        if len(calls) != 1:
            return _report(f"Correct values, but op was called {len(calls)} times for one level; "
                           f"call it ONCE on all pairs (nodes[0:m-1:2], nodes[1:m:2]): that one "
                           f"vectorized call is what makes a level fast.", "")
    return _report(None, "Correct: one call of op combines every pair, in order, and an odd node "
                         "moves up unchanged.")


def check_down_sweep_level(fn: Callable) -> bool:
    """Check ``fn(parent_prefix, nodes, op) -> prefixes`` (one down-sweep level).

    >>> check_down_sweep_level(down_sweep_level)  # doctest: +ELLIPSIS
    Correct: left children get the parent's prefix, right children prefix op left sibling; ...
    True
    """
    for m in (8, 5, 1):
        nodes = interval_leaves(m)
        j = np.arange((m + 1) // 2)
        parent = np.stack([0 * j, 2 * j], axis=-1)            # parent j's prefix: x[0:2j]
        done, got = _call(fn, parent, nodes, interval)
        if not done:
            return False
        want = down_sweep_level(parent, nodes, interval)
        if _same(got, down_sweep_level(parent, nodes, _swapped)) and not _same(got, want):
            return _report(f"Operand order: for {m} nodes you produced [{_ranges(got)}], expected "
                           f"[{_ranges(want)}]. The right child's prefix is op(parent_prefix, "
                           f"left_sibling): the parent's prefix covers the EARLIER elements, so it "
                           f"goes first.", "")
        if got is not None and np.shape(got) == want.shape and not _same(got, want):
            return _report(f"For {m} nodes you produced [{_ranges(got)}], expected "
                           f"[{_ranges(want)}]. Left children (even positions) take the parent's "
                           f"prefix unchanged; right children take op(parent_prefix, "
                           f"left_sibling), where the left sibling is nodes[0::2].", "")
        problem = _differs(got, want, f"{m} interval nodes")
        if problem:
            return _report(problem, "")
    rng = np.random.default_rng(5)
    for n in (1, 6, 13):
        x = rng.normal(size=(n, 2, 2))
        done, got = _call(_blelloch_with, x, matmul, up_sweep_level, fn)
        if not done:
            return False
        problem = _differs(got, sequential_scan(x, op=matmul), f"a full scan of {n} matrices")
        if problem:
            return _report(problem, "")
    x = rng.integers(-9, 9, 11)
    done, got = _call(_blelloch_with, x, add, up_sweep_level, fn)
    if not done:
        return False
    problem = _differs(got, sequential_scan(x), "a full scan of 11 integers")
    return _report(problem, "Correct: left children get the parent's prefix, right children "
                            "prefix op left sibling; a full Blelloch scan built on it matches the "
                            "sequential scan for matrices.")


def check_exclusive_from_inclusive(fn: Callable) -> bool:
    """Check ``fn(inclusive, identity) -> exclusive`` on numbers, matrices, lengths 0 and 1.

    >>> check_exclusive_from_inclusive(exclusive_from_inclusive)
    Correct: shifted right by one, with the identity in front, for every length.
    True
    """
    rng = np.random.default_rng(6)
    cases = [(rng.integers(-9, 9, 7), 0, "7 integers"),
             (rng.normal(size=(5, 2, 2)), np.eye(2), "5 2x2 matrices"),
             (np.array([4.0]), 0.0, "length 1"),
             (np.zeros((0, 2, 2)), np.eye(2), "length 0")]
    for x, ident, what in cases:
        op = matmul if x.ndim == 3 else add
        inclusive = sequential_scan(x, op=op, exclusive=False)
        done, got = _call(fn, inclusive.copy(), ident)
        if not done:
            return False
        want = sequential_scan(x, op=op, exclusive=True)
        if (got is not None and np.shape(got) == want.shape and len(want) > 1
                and np.allclose(np.asarray(got)[:-1], inclusive[1:])):
            return _report(f"{what}: you shifted LEFT. The exclusive scan at i leaves x[i] out, "
                           f"so it equals the inclusive scan at i - 1: shift right, identity first.", "")
        problem = _differs(got, want, what)
        if problem:
            return _report(problem, "")
    return _report(None, "Correct: shifted right by one, with the identity in front, for every "
                         "length.")


def up_swept(x: np.ndarray, op: Op) -> np.ndarray:
    """The in-place up-sweep of a power-of-two-long stack: ``t[k·2d + 2d - 1]`` ends up holding its block of 2d.

    >>> up_swept(np.array([3, 1, 7, 0, 4, 1, 6, 3]), add).tolist()
    [3, 4, 7, 11, 4, 5, 6, 25]
    """
    t, n, d = x.copy(), x.shape[0], 1
    while d < n:
        right = np.arange(2 * d - 1, n, 2 * d)
        t[right] = op(t[right - d], t[right])
        d *= 2
    return t


def _down_sweep(tree: np.ndarray, op: Op, identity: Any, clear_root: bool = True, swap: bool = False) -> np.ndarray:
    """The check's own in-place down-sweep (and two typical wrong ones)."""
    t, n = tree.copy(), tree.shape[0]
    if clear_root:
        t[n - 1] = identity
    d = n // 2
    while d >= 1:
        right = np.arange(2 * d - 1, n, 2 * d)
        left_sum = t[right - d].copy()
        t[right - d] = t[right]
        t[right] = op(left_sum, t[right]) if swap else op(t[right], left_sum)
        d //= 2
    return t


def _down_sweep_problem(fn: Callable, x: np.ndarray, op: Op, identity: Any, what: str) -> str | None:
    tree = up_swept(x, op)
    ok, got = _call(fn, tree.copy(), op, identity)
    if not ok:
        return ""
    want = sequential_scan(x, op, identity, exclusive=True)
    if _same(got, want):
        return None
    where = f"{what}, n = {x.shape[0]}"
    if got is None:
        return f"({where}) your function returned None; return the array of prefixes."
    if np.shape(got) != want.shape:
        return f"({where}) the result has shape {np.shape(got)}, expected {want.shape}: one prefix per element."
    got = np.asarray(got)
    if _same(got, _down_sweep(tree, op, identity, clear_root=False)):
        return (f"({where}) the root must start as the identity: nothing comes before the whole sequence. "
                "Set tree[n - 1] = identity before the first level.")
    if _same(got, sequential_scan(x, op, identity, exclusive=False)):
        return (f"({where}) that is the inclusive scan; the down-sweep gives the exclusive one (element i "
                "combines x[0:i], identity first).")
    if _same(got, _down_sweep(tree, op, identity, swap=True)):
        return (f"({where}) the operands are swapped: a right child's prefix is op(parent_prefix, left_sum), the "
                "parent's prefix FIRST, because it covers the earlier elements.")
    if op is interval:
        bad = [i for i in range(len(want)) if not np.array_equal(got[i], want[i])]
        return (f"({where}) position {bad[0]} holds {_ranges(got[bad[0]:bad[0] + 1])}, expected "
                f"{_ranges(want[bad[0]:bad[0] + 1])} (all of x before it); 'order!' means op combined a later "
                "range with an earlier one in the wrong order.")
    return _differs(got, want, f"({where}) prefixes")


def check_down_sweep_inplace(fn: Callable) -> bool:
    """Check ``fn(tree, op, identity)``: the exclusive scan from the array an in-place up-sweep left.

    ``tree`` comes from :func:`up_swept` (a power-of-two length); ``fn`` clears the root to ``identity``
    and walks the levels down: at stride ``d`` each right node ``r`` (``r = 2d-1, 4d-1, ...``) passes its
    prefix to its left partner ``r - d`` and becomes ``op(its prefix, the left partner's old sum)``.
    Tried with additions, 2x2 matrix products and :func:`course.scan.interval`, which names swapped operands.
    """
    name = "check_down_sweep_inplace"
    rng = np.random.default_rng(404)
    cases = [(rng.integers(-9, 10, n), add, 0, "add") for n in (1, 2, 8, 64)]
    cases += [(interval_leaves(n), interval, np.zeros(2, dtype=np.int64), "interval") for n in (2, 16)]
    cases += [(rng.integers(-2, 3, (n, 2, 2)).astype(np.float64), matmul, np.eye(2), "2x2 matrices") for n in (4, 32)]
    for x, op, identity, what in cases:
        problem = _down_sweep_problem(fn, x, op, identity, what)
        if problem is not None:
            return verdict(name, problem, "")
    return verdict(name, None, "right: the root cleared, then at each level the prefix handed left and "
                               "op(prefix, left sum) kept right. With the up-sweep, a whole Blelloch scan in place.")
