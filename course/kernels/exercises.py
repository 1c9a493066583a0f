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


@dataclass(frozen=True)
class Exercise:
    """One kernel exercise.

    ``make(rng)`` gives the kernel's arguments in order (outputs first, filled with NaN so that an
    element never written shows); ``oracle(args)`` the expected outputs by name; ``budget`` the most
    accesses of each kind one thread may make; ``mistakes`` pairs of (what went wrong, numpy
    function giving the output that mistake produces).
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


EXERCISES: dict[str, Exercise] = {e.name: e for e in [
    Exercise(
        "map", "Map: ReLU, one thread per element", "02", 1, 8,
        lambda r: {"out": _nan(8), "a": _f32(r, 8)},
        lambda g: {"out": np.maximum(g["a"], 0)},
        {"global_reads": 1, "global_writes": 1}, reference.relu_map,
        (("you copied a without clipping the negatives to 0", lambda g: g["a"]),),
        "thread i = cuda.grid(1) handles element i"),
    Exercise(
        "guard", "Guard: 10 elements, 3 blocks of 4 threads", "02", 3, 4,
        lambda r: {"out": _nan(10), "a": _f32(r, 10), "n": 10},
        lambda g: {"out": np.maximum(g["a"], 0)},
        {"global_reads": 1, "global_writes": 1}, reference.relu_guard, (),
        "12 threads, 10 elements: the last two threads must do nothing (if i < n)"),
    Exercise(
        "zip", "Zip: fused multiply-add out = w * x + b", "02", 3, 4,
        lambda r: {"out": _nan(10), "w": _f32(r, 10), "x": _f32(r, 10), "b": _f32(r, 10), "n": 10},
        lambda g: {"out": g["w"] * g["x"] + g["b"]},
        {"global_reads": 3, "global_writes": 1}, reference.fma_zip,
        (("wrong operand order: you computed w * b + x", lambda g: g["w"] * g["b"] + g["x"]),
         ("wrong operand order: you computed w + x * b", lambda g: g["w"] + g["x"] * g["b"]),
         ("wrong operand order: you computed x * b + w", lambda g: g["x"] * g["b"] + g["w"])),
        "the multiply comes first, then the add: w[i] * x[i] + b[i]"),
    Exercise(
        "block_sum", f"Block reduction in shared memory: one sum per block of {TPB}", "03", 2, TPB,
        lambda r: {"out": _nan(2), "a": _f32(r, 13), "n": 13},
        lambda g: {"out": _blocks(g["a"], g["n"])},
        {"global_reads": 1, "global_writes": 1, "shared_reads": 2 * 3 + 1, "shared_writes": 1 + 3},
        reference.block_sum,
        (("every block summed the whole array: sum only your block's tile", lambda g: np.full(2, g["a"].sum())),),
        "read one element per thread into shared memory, then halve the active threads each step"),
    Exercise(
        "matmul_tiled", f"Tiled matrix product: {TILE}x{TILE} tiles in shared memory", "03", (2, 2), (TILE, TILE),
        lambda r: {"c": _nan(4, 4), "a": _f32(r, 4, 4), "b": _f32(r, 4, 4), "n": 4},
        lambda g: {"c": g["a"] @ g["b"]},
        {"global_reads": 2 * 4 // TILE, "global_writes": 1, "shared_reads": 2 * 4, "shared_writes": 2 * 4 // TILE},
        reference.matmul_tiled,
        (("wrong operand order: you computed b @ a", lambda g: g["b"] @ g["a"]),
         ("a transposed index: you computed a.T @ b", lambda g: g["a"].T @ g["b"]),
         ("a transposed index: you computed a @ b.T", lambda g: g["a"] @ g["b"].T)),
        "each thread loads ONE element of a's tile and one of b's tile per step; all threads then read "
        "the tiles from shared memory"),
    Exercise(
        "hillis_steele", f"Hillis-Steele inclusive scan of one block of {TPB}", "04", 1, TPB,
        lambda r: {"out": _nan(TPB), "a": _f32(r, TPB)},
        lambda g: {"out": np.cumsum(g["a"]).astype(np.float32)},
        {"global_reads": 1, "global_writes": 1, "shared_reads": 2 * 3 + 1, "shared_writes": 1 + 3},
        reference.hillis_steele,
        (("off by one: that is the exclusive scan; Hillis-Steele here is inclusive", lambda g: _excl(g["a"])),),
        "at step d every thread t >= d adds the value d places to its left; read, barrier, write, barrier"),
    Exercise(
        "blelloch", f"Blelloch exclusive scan of one block of {TPB}", "04", 1, TPB,
        lambda r: {"out": _nan(TPB), "a": _f32(r, TPB)},
        lambda g: {"out": _excl(g["a"])},
        {"global_reads": 1, "global_writes": 1, "shared_reads": 2 * 3 + 3 * 3 + 1, "shared_writes": 1 + 3 + 1 + 2 * 3},
        reference.blelloch,
        (("off by one: that is the inclusive scan; Blelloch's down-sweep gives the exclusive one",
          lambda g: np.cumsum(g["a"]).astype(np.float32)),),
        "up-sweep (t + 1) % (2d) == 0 adds cache[t - d]; set the last to 0; down-sweep swaps and adds"),
]}


def exercise(name: str) -> Exercise:
    """The :class:`Exercise` called ``name`` (one of :data:`EXERCISES`).

    >>> exercise("blelloch").lesson
    '04'
    """
    if name not in EXERCISES:
        raise BadInputError(f"exercise must be one of {sorted(EXERCISES)}, got {name!r}")
    return EXERCISES[name]
