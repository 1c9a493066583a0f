"""Lesson 09's kernel exercise, declared as data like lessons 02-04's (:mod:`course.kernels.exercises` merges it
into ``EXERCISES``): the register-blocked matrix product.

Each thread computes a ``TM`` x ``TN`` tile of ``c``; a block a ``BM`` x ``BN`` tile, walking ``k`` in
steps of ``BK`` through shared memory.  The one idea graded: per ``k``, a thread reads its ``TM`` values of
``a`` and ``TN`` values of ``b`` from shared memory *once*, into registers, and does ``TM * TN``
multiply-adds from them, so it needs at most ``(TM + TN) / (TM * TN)`` shared loads per FMA (lesson 03's
kernel needs 2).  The budget says so per thread: ``n * (TM + TN)`` shared reads for ``n * TM * TN`` FMAs.

>>> ex, at_scale = register_tile_fields()
>>> ex["blocks"], ex["threads"], ex["budget"]["shared_reads"]
((2, 2), (2, 2), 32)
"""

from __future__ import annotations

import numpy as np

from ..arguments import Whole, arguments
from . import reference
from .reference import BK, BM, BN, TM, TN

__all__ = ["TM", "TN", "BM", "BN", "BK", "RT_N", "RT_SCALE", "RT_SCALE_CONSTANTS", "register_tile_fields",
           "shared_loads_per_fma_allowed"]

#: The grading size: c = a @ b for RT_N x RT_N matrices, on (RT_N / BN) x (RT_N / BM) blocks.
RT_N = 8
#: The size at which the memory traffic is counted (every warp full): 16 x 16, one block of 8 x 8 threads.
RT_SCALE = 16
RT_SCALE_CONSTANTS = {"TM": 2, "TN": 2, "BM": 16, "BN": 16, "BK": 4}


@arguments(tm=Whole(hi=64, hint="outputs per thread along a column"), tn=Whole(hi=64, hint="along a row"))
def shared_loads_per_fma_allowed(tm: int = TM, tn: int = TN) -> float:
    """The most shared-memory loads per FMA a register-blocked thread needs: ``(tm + tn) / (tm * tn)``.

    >>> shared_loads_per_fma_allowed(2, 2), shared_loads_per_fma_allowed(4, 4)
    (1.0, 0.5)
    """
    return (tm + tn) / (tm * tn)


def _ints(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.integers(-9, 10, size=shape).astype(np.float32)   # small integers: sums are exact


def _inputs(rng: np.random.Generator, n: int) -> dict:
    return {"c": np.full((n, n), np.nan, np.float32), "a": _ints(rng, n, n), "b": _ints(rng, n, n), "n": n}


def _grading_inputs(rng: np.random.Generator) -> dict:
    return _inputs(rng, RT_N)


def _scale_inputs(rng: np.random.Generator) -> dict:
    return _inputs(rng, RT_SCALE)


def _product(g: dict) -> dict:
    return {"c": g["a"] @ g["b"]}


def _b_at_a(g: dict) -> np.ndarray:
    return g["b"] @ g["a"]


def _a_transposed_at_b(g: dict) -> np.ndarray:
    return g["a"].T @ g["b"]


def _a_at_b_transposed(g: dict) -> np.ndarray:
    return g["a"] @ g["b"].T


def _last_k_step_only(g: dict) -> np.ndarray:
    return g["a"][:, -BK:] @ g["b"][-BK:, :]


def _scale_targets() -> tuple[dict, dict]:
    """The course's answer's counts at RT_SCALE, with what to change when a count is over."""
    # a: per k step each warp copies 8 rows of 4 floats (8 sectors), b: 2 rows of 16 (4 sectors), 2 warps,
    # 4 k steps: 96; c: each of a warp's 4 writes covers 4 rows x 8 floats (8 sectors), 2 warps: 64
    targets = {"global_sectors": 160, "bank_conflicts": 0}
    hints = {"global_sectors": "the 32 lanes of a warp are consecutive threadIdx.x values and the arrays are "
                               "row-major: number the threads t = threadIdx.y * blockDim.x + threadIdx.x and let "
                               "thread t copy elements t, t + threads, ... of each tile (neighbouring threads, "
                               "neighbouring floats), and put threadIdx.x on the column of c's tile",
             "bank_conflicts": "a warp's lanes must read one row of sb (consecutive words) and few rows of sa: "
                               "put threadIdx.x on the column, ty * TM + i on the row of sa and tx * TN + j on "
                               "the column of sb"}
    return targets, hints


def register_tile_fields() -> tuple[dict, dict]:
    """The register-blocked product's :class:`~course.kernels.exercises.Exercise` fields and its
    :class:`~course.kernels.exercises.AtScale` fields, by keyword (``exercises.py`` builds the two from them)."""
    steps, threads = RT_N // BK, (BN // TN) * (BM // TM)
    targets, hints = _scale_targets()
    return dict(
        name="register_tile", title=f"Register-blocked product: a {TM}x{TN} tile of c per thread", lesson="09",
        blocks=(RT_N // BN, RT_N // BM), threads=(BN // TN, BM // TM), make=_grading_inputs, oracle=_product,
        budget={"global_reads": steps * (BM * BK + BK * BN) // threads, "global_writes": TM * TN,
                "shared_reads": RT_N * (TM + TN), "shared_writes": steps * (BM * BK + BK * BN) // threads},
        reference=reference.matmul_register_tile,
        mistakes=(("wrong operand order: you computed b @ a", _b_at_a),
                  ("a transposed index: you computed a.T @ b", _a_transposed_at_b),
                  ("a transposed index: you computed a @ b.T", _a_at_b_transposed),
                  ("only the last k step counts: set the accumulator to 0 once, before the loop over k0, and "
                   "add to it at every step", _last_k_step_only)),
        hint="the thread (tx, ty) owns rows ty * TM + i and columns tx * TN + j of its block's tile; the block's "
             "threads copy the BM x BK tile of a and the BK x BN tile of b between two barriers"), dict(
        constants=RT_SCALE_CONSTANTS, blocks=(1, 1), threads=(8, 8), make=_scale_inputs,
        label=f"one {RT_SCALE}x{RT_SCALE} block tile of 8x8 threads, 2 full warps", targets=targets, hints=hints)
