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
from .reference import TILE, TPB

__all__ = ["Exercise", "EXERCISES", "exercise", "TPB", "TILE"]


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


def _matmul_inputs(r: np.random.Generator) -> dict:
    return {"c": _nan(4, 4), "a": _f32(r, 4, 4), "b": _f32(r, 4, 4), "n": 4}


def _matmul_oracle(g: dict) -> dict:
    return {"c": g["a"] @ g["b"]}


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
             "the tiles from shared memory"),
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
]}


def exercise(name: str) -> Exercise:
    """The :class:`Exercise` called ``name`` (one of :data:`EXERCISES`).

    >>> exercise("blelloch").lesson
    '04'
    """
    if name not in EXERCISES:
        raise BadInputError(f"exercise must be one of {sorted(EXERCISES)}, got {name!r}")
    return EXERCISES[name]
