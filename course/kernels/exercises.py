"""The kernel exercises: for each, its inputs, launch shape, numpy oracle, access budget and the
mistakes a check recognises by their output.

An :class:`Exercise` is data, so a check (:mod:`course.kernels.checks`) and a picture
(:func:`course.kernels.show`) read the same spec.  The oracle never runs a kernel: it is numpy.

>>> ex = exercise("guard")
>>> ex.blocks * ex.threads, ex.inputs(0)["n"]
(12, 10)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import BadInputError
from . import reference
from .reference import ATT_D, ATT_TILE, TILE, TPB

__all__ = ["Exercise", "AtScale", "EXERCISES", "exercise", "TPB", "TILE", "ATT_TILE", "ATT_D", "ATT_QUERIES",
           "ATT_KEYS"]


@dataclass(frozen=True, kw_only=True)
class AtScale:
    """The hardware counts an exercise is also graded on (:mod:`course.kernels.counts`), at a size whose
    warps are full: the kernel runs again with its module constants rebound (``constants``, e.g. a
    bigger ``TILE``) on ``blocks`` x ``threads`` and the arguments ``make(rng)`` gives; each of
    ``targets`` (count -> most allowed) must hold, and ``hints`` say what to change when one does not."""

    constants: dict
    blocks: object
    threads: object
    make: Callable[[np.random.Generator], dict]
    targets: dict
    hints: dict
    label: str = ""


@dataclass(frozen=True, kw_only=True)
class Exercise:
    """One kernel exercise.

    Declared by keyword: ``make(rng)`` gives the kernel's arguments in order (outputs first, filled
    with NaN so that an element never written shows); ``oracle(args)`` the expected outputs by name;
    ``budget`` the most accesses of each kind one thread may make; ``mistakes`` pairs of (what went
    wrong, numpy function giving the output that mistake produces).
    """

    name: str
    title: str
    lesson: str
    blocks: object
    threads: object
    make: Callable[[np.random.Generator], dict]
    oracle: Callable[[dict], dict]
    budget: dict
    reference: Callable
    mistakes: tuple = field(default=())
    hint: str = ""
    at_scale: AtScale | None = None

    def inputs(self, seed: int = 0) -> dict:
        """The kernel's arguments, by name, in order, drawn with ``seed``."""
        return self.make(np.random.default_rng(seed))


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.integers(-9, 10, size=shape).astype(np.float32)   # small integers: sums are exact


def _nan(*shape: int) -> np.ndarray:
    return np.full(shape, np.nan, dtype=np.float32)


def _excl(a: np.ndarray) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(a)[:-1]]).astype(np.float32)


def _blocks(a: np.ndarray, n: int) -> np.ndarray:
    pad = np.zeros(-n % TPB, np.float32)
    return np.concatenate([a[:n], pad]).reshape(-1, TPB).sum(axis=1).astype(np.float32)


# ----------------------------------------------------------------------------- each exercise's inputs and oracle

def _map_inputs(r: np.random.Generator) -> dict:
    return {"out": _nan(8), "a": _f32(r, 8)}


def _relu_oracle(g: dict) -> dict:
    return {"out": np.maximum(g["a"], 0)}


def _copied_without_clipping(g: dict) -> np.ndarray:
    return g["a"]


def _guard_inputs(r: np.random.Generator) -> dict:
    return {"out": _nan(10), "a": _f32(r, 10), "n": 10}


def _zip_inputs(r: np.random.Generator) -> dict:
    return {"out": _nan(10), "w": _f32(r, 10), "x": _f32(r, 10), "b": _f32(r, 10), "n": 10}


def _fma_oracle(g: dict) -> dict:
    return {"out": g["w"] * g["x"] + g["b"]}


def _w_times_b_plus_x(g: dict) -> np.ndarray:
    return g["w"] * g["b"] + g["x"]


def _w_plus_x_times_b(g: dict) -> np.ndarray:
    return g["w"] + g["x"] * g["b"]


def _x_times_b_plus_w(g: dict) -> np.ndarray:
    return g["x"] * g["b"] + g["w"]


def _block_sum_inputs(r: np.random.Generator) -> dict:
    return {"out": _nan(2), "a": _f32(r, 13), "n": 13}


def _block_sum_oracle(g: dict) -> dict:
    return {"out": _blocks(g["a"], g["n"])}


def _whole_array_in_every_block(g: dict) -> np.ndarray:
    return np.full(2, g["a"].sum())


#: The row-scaling exercise's matrix side: 16 x 16 threads, 8 full warps of 2 rows each.
SCALE_SIDE = 16


def _scale_rows_inputs(r: np.random.Generator) -> dict:
    return {"out": _nan(SCALE_SIDE, SCALE_SIDE), "a": _f32(r, SCALE_SIDE, SCALE_SIDE), "s": _f32(r, SCALE_SIDE)}


def _scale_rows_oracle(g: dict) -> dict:
    return {"out": g["a"] * g["s"][:, None]}


def _scaled_by_column(g: dict) -> np.ndarray:
    return g["a"] * g["s"][None, :]


def _matmul_inputs(r: np.random.Generator) -> dict:
    return {"c": _nan(4, 4), "a": _f32(r, 4, 4), "b": _f32(r, 4, 4), "n": 4}


def _matmul_oracle(g: dict) -> dict:
    return {"c": g["a"] @ g["b"]}


#: The tile side at which the tiled product's memory traffic is counted: 16 x 16 threads, 8 full warps.
SCALE_TILE = 16


def _matmul_scale_inputs(r: np.random.Generator) -> dict:
    n = SCALE_TILE
    return {"c": _nan(n, n), "a": _f32(r, n, n), "b": _f32(r, n, n), "n": n}


def _b_at_a(g: dict) -> np.ndarray:
    return g["b"] @ g["a"]


def _a_transposed_at_b(g: dict) -> np.ndarray:
    return g["a"].T @ g["b"]


def _a_at_b_transposed(g: dict) -> np.ndarray:
    return g["a"] @ g["b"].T


def _one_block_inputs(r: np.random.Generator) -> dict:
    return {"out": _nan(TPB), "a": _f32(r, TPB)}


def _inclusive(g: dict) -> np.ndarray:
    return np.cumsum(g["a"]).astype(np.float32)


def _exclusive(g: dict) -> np.ndarray:
    return _excl(g["a"])


def _inclusive_oracle(g: dict) -> dict:
    return {"out": _inclusive(g)}


def _exclusive_oracle(g: dict) -> dict:
    return {"out": _exclusive(g)}


#: Lesson 08's attention exercise: queries (two query tiles) and keys (three key tiles).
ATT_QUERIES, ATT_KEYS = 2 * ATT_TILE, 3 * ATT_TILE


def _attention_inputs(r: np.random.Generator) -> dict:
    def normal(*shape: int) -> np.ndarray:
        return r.standard_normal(shape).astype(np.float32)
    return {"out": _nan(ATT_QUERIES, ATT_D), "lse": _nan(ATT_QUERIES), "q": normal(ATT_QUERIES, ATT_D),
            "k": normal(ATT_KEYS, ATT_D), "v": normal(ATT_KEYS, ATT_D), "n_k": ATT_KEYS,
            "scale": np.float32(1 / np.sqrt(ATT_D))}


def _attention_tiles(g: dict, scaled: bool = True, rescale: bool = True,
                     width: int = ATT_TILE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The kernel's pass over ``width`` keys at a time in float64, ``(acc, total, m)`` per query row; a slip can be
    switched on."""
    s = g["q"].astype(np.float64) @ g["k"].astype(np.float64).T * (float(g["scale"]) if scaled else 1.0)
    v = g["v"].astype(np.float64)
    m = np.full(s.shape[0], -np.inf)
    total, acc = np.zeros(s.shape[0]), np.zeros((s.shape[0], v.shape[1]))
    for k0 in range(0, s.shape[1], width):
        tile = s[:, k0:k0 + width]
        new_m = np.maximum(m, tile.max(axis=1))
        factor = np.exp(m - new_m)
        p = np.exp(tile - new_m[:, None])
        total = total * factor + p.sum(axis=1)
        acc = (acc * factor[:, None] if rescale else acc) + p @ v[k0:k0 + width]
        m = new_m
    return acc, total, m


def _attention_oracle(g: dict) -> dict:
    s = g["q"].astype(np.float64) @ g["k"].astype(np.float64).T * float(g["scale"])
    lse = np.log(np.exp(s - s.max(axis=1, keepdims=True)).sum(axis=1)) + s.max(axis=1)
    return {"out": np.exp(s - lse[:, None]) @ g["v"].astype(np.float64), "lse": lse}


def _unscaled(g: dict) -> np.ndarray:
    acc, total, _ = _attention_tiles(g, scaled=False)
    return acc / total[:, None]


def _not_rescaled(g: dict) -> np.ndarray:
    acc, total, _ = _attention_tiles(g, rescale=False)
    return acc / total[:, None]


def _not_rescaled_per_key(g: dict) -> np.ndarray:
    acc, total, _ = _attention_tiles(g, rescale=False, width=1)
    return acc / total[:, None]


def _not_divided(g: dict) -> np.ndarray:
    return _attention_tiles(g)[0]


def _lse_without_log_sum(g: dict) -> np.ndarray:
    return _attention_tiles(g)[2]


def _lse_without_max(g: dict) -> np.ndarray:
    return np.log(_attention_tiles(g)[1])


# ----------------------------------------------------------------------------- the exercises, by name

EXERCISES: dict[str, Exercise] = {e.name: e for e in [
    Exercise(
        name="map", title="Map: ReLU, one thread per element", lesson="02", blocks=1, threads=8,
        make=_map_inputs, oracle=_relu_oracle,
        budget={"global_reads": 1, "global_writes": 1}, reference=reference.relu_map,
        mistakes=(("you copied a without clipping the negatives to 0", _copied_without_clipping),),
        hint="thread i = cuda.grid(1) handles element i"),
    Exercise(
        name="guard", title="Guard: 10 elements, 3 blocks of 4 threads", lesson="02", blocks=3, threads=4,
        make=_guard_inputs, oracle=_relu_oracle,
        budget={"global_reads": 1, "global_writes": 1}, reference=reference.relu_guard,
        hint="12 threads, 10 elements: the last two threads must do nothing (if i < n)"),
    Exercise(
        name="zip", title="Zip: fused multiply-add out = w * x + b", lesson="02", blocks=3, threads=4,
        make=_zip_inputs, oracle=_fma_oracle,
        budget={"global_reads": 3, "global_writes": 1}, reference=reference.fma_zip,
        mistakes=(("wrong operand order: you computed w * b + x", _w_times_b_plus_x),
                  ("wrong operand order: you computed w + x * b", _w_plus_x_times_b),
                  ("wrong operand order: you computed x * b + w", _x_times_b_plus_w)),
        hint="the multiply comes first, then the add: w[i] * x[i] + b[i]"),
    Exercise(
        name="scale_rows", title=f"Scale each row of a {SCALE_SIDE}x{SCALE_SIDE} matrix (a 2-D grid)",
        lesson="02", blocks=(1, 1), threads=(SCALE_SIDE, SCALE_SIDE), make=_scale_rows_inputs,
        oracle=_scale_rows_oracle, budget={"global_reads": 2, "global_writes": 1}, reference=reference.scale_rows,
        mistakes=(("every column was scaled by s[col]: the factor belongs to the row, s[row]", _scaled_by_column),),
        hint="one thread per element: out[row, col] = a[row, col] * s[row]",
        at_scale=AtScale(
            constants={}, blocks=(1, 1), threads=(SCALE_SIDE, SCALE_SIDE), make=_scale_rows_inputs,
            label=f"the {SCALE_SIDE}x{SCALE_SIDE} launch, 8 full warps",
            # coalesced: each warp reads two 64-byte runs of a (4 sectors), one sector of s, writes 4 sectors
            targets={"global_sectors": 8 * 9},
            hints={"global_sectors": "the 32 lanes of a warp are consecutive threadIdx.x values, so threadIdx.x "
                                     "must walk along a row of the row-major arrays: col, row = cuda.grid(2) "
                                     "(x on the column), not row, col = cuda.grid(2)"})),
    Exercise(
        name="block_sum", title=f"Block reduction in shared memory: one sum per block of {TPB}", lesson="03",
        blocks=2, threads=TPB, make=_block_sum_inputs, oracle=_block_sum_oracle,
        budget={"global_reads": 1, "global_writes": 1, "shared_reads": 2 * 3 + 1, "shared_writes": 1 + 3},
        reference=reference.block_sum,
        mistakes=(("every block summed the whole array: sum only your block's tile", _whole_array_in_every_block),),
        hint="read one element per thread into shared memory, then halve the active threads each step"),
    Exercise(
        name="matmul_tiled", title=f"Tiled matrix product: {TILE}x{TILE} tiles in shared memory", lesson="03",
        blocks=(2, 2), threads=(TILE, TILE), make=_matmul_inputs, oracle=_matmul_oracle,
        budget={"global_reads": 2 * 4 // TILE, "global_writes": 1, "shared_reads": 2 * 4,
                "shared_writes": 2 * 4 // TILE},
        reference=reference.matmul_tiled,
        mistakes=(("wrong operand order: you computed b @ a", _b_at_a),
                  ("a transposed index: you computed a.T @ b", _a_transposed_at_b),
                  ("a transposed index: you computed a @ b.T", _a_at_b_transposed)),
        hint="each thread loads ONE element of a's tile and one of b's tile per step; all threads then read "
             "the tiles from shared memory",
        at_scale=AtScale(
            constants={"TILE": SCALE_TILE}, blocks=(1, 1), threads=(SCALE_TILE, SCALE_TILE),
            make=_matmul_scale_inputs, label=f"one {SCALE_TILE}x{SCALE_TILE} tile, 8 full warps",
            # the coalesced answer's counts: every warp request reads two rows of 16 consecutive floats
            targets={"global_sectors": 96, "bank_conflicts": 0},
            hints={"global_sectors": "the 32 lanes of a warp are consecutive threadIdx.x values, so threadIdx.x "
                                     "must walk along a row of the row-major arrays: col, row = cuda.grid(2) and "
                                     "tc, tr = cuda.threadIdx.x, cuda.threadIdx.y (x on the column)",
                   "bank_conflicts": "with threadIdx.x on the row, a warp reads a column of the shared tile, "
                                     "TILE words apart: put threadIdx.x on the column, so that a warp reads one "
                                     "row of sa (a broadcast) and consecutive words of sb"})),
    Exercise(
        name="hillis_steele", title=f"Hillis-Steele inclusive scan of one block of {TPB}", lesson="04",
        blocks=1, threads=TPB, make=_one_block_inputs, oracle=_inclusive_oracle,
        budget={"global_reads": 1, "global_writes": 1, "shared_reads": 2 * 3 + 1, "shared_writes": 1 + 3},
        reference=reference.hillis_steele,
        mistakes=(("off by one: that is the exclusive scan; Hillis-Steele here is inclusive", _exclusive),),
        hint="at step d every thread t >= d adds the value d places to its left; read, barrier, write, barrier"),
    Exercise(
        name="blelloch", title=f"Blelloch exclusive scan of one block of {TPB}", lesson="04",
        blocks=1, threads=TPB, make=_one_block_inputs, oracle=_exclusive_oracle,
        budget={"global_reads": 1, "global_writes": 1, "shared_reads": 2 * 3 + 3 * 3 + 1,
                "shared_writes": 1 + 3 + 1 + 2 * 3},
        reference=reference.blelloch,
        mistakes=(("off by one: that is the inclusive scan; Blelloch's down-sweep gives the exclusive one",
                   _inclusive),),
        hint="up-sweep (t + 1) % (2d) == 0 adds cache[t - d]; set the last to 0; down-sweep swaps and adds"),
    Exercise(
        name="online_softmax", title=f"Attention for one query tile of {ATT_TILE} rows, online over key tiles "
                                     f"in shared memory", lesson="08",
        blocks=ATT_QUERIES // ATT_TILE, threads=ATT_TILE, make=_attention_inputs, oracle=_attention_oracle,
        budget={"global_reads": ATT_D + 2 * ATT_D * ATT_KEYS // ATT_TILE, "global_writes": ATT_D + 1,
                "shared_reads": 3 * ATT_D * ATT_KEYS, "shared_writes": 2 * ATT_D * ATT_KEYS // ATT_TILE},
        reference=reference.online_softmax_tile,
        mistakes=(("the scores are not multiplied by scale (1/sqrt(d))", _unscaled),
                  ("when the maximum grows, the output accumulator must be rescaled by exp(m_old - m_new), as "
                   "the sum is", _not_rescaled),
                  ("when the maximum grows, the output accumulator must be rescaled by exp(m_old - m_new), as "
                   "the sum is", _not_rescaled_per_key),
                  ("the output is the accumulator divided by the sum of the weights: divide by it at the end",
                   _not_divided),
                  ("lse is the log-sum-exp, m + log(sum), not the maximum alone", _lse_without_log_sum),
                  ("lse is m + log(sum): the sum was taken after subtracting m, so add m back",
                   _lse_without_max)),
        hint="thread t owns query row blockIdx.x * ATT_TILE + t; per key tile: load K and V into shared memory "
             "(thread t takes elements t, t + ATT_TILE, ... of the tile), barrier, update m, the sum and the "
             "accumulator, barrier"),
]}


def exercise(name: str) -> Exercise:
    """The :class:`Exercise` called ``name`` (one of :data:`EXERCISES`).

    >>> exercise("blelloch").lesson
    '04'
    """
    if name not in EXERCISES:
        raise BadInputError(f"exercise must be one of {sorted(EXERCISES)}, got {name!r}")
    return EXERCISES[name]


def _lesson_09() -> Exercise:
    from .gemm_exercises import register_tile_fields
    fields, at_scale = register_tile_fields()
    return Exercise(**fields, at_scale=AtScale(**at_scale))


EXERCISES["register_tile"] = _lesson_09()
