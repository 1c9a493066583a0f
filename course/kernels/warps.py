"""The warp-level ideas, counted: coalescing, divergence, bank conflicts (each a good and a bad kernel
under :mod:`course.kernels.counts`), occupancy (a calculator against H100 data-sheet limits), and lesson
04's bank-conflict padding counted (:func:`course.kernels.plots.scan_padding_report` sets the counts beside
the times each recorded GPU reference holds: why the padding did not pay there).

>>> d = coalescing()
>>> d["coalesced"].global_sectors, d["strided"].global_sectors
(32, 144)
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np
from numba import cuda

from ..arguments import Given, Seed, arguments
from ..errors import BadInputError, shown_value, whole_number
from . import tuned
from .counts import Counts, count, hardware_counts
from .simulator import python_function, simulate

__all__ = ["H100_LIMITS", "coalescing", "divergence", "bank_conflicts", "occupancy", "scan_padding_rows",
           "scale_counts"]

#: Per-SM limits of compute capability 9.0 (H100), data-sheet figures: NVIDIA CUDA C++ Programming Guide,
#: "Technical Specifications per Compute Capability", and its occupancy calculator's allocation units.
H100_LIMITS = {"threads_per_sm": 2048, "warps_per_sm": 64, "blocks_per_sm": 32, "registers_per_sm": 65536,
               "registers_per_thread": 255, "register_unit": 256, "shared_per_sm": 228 * 1024,
               "shared_per_block": 227 * 1024, "shared_unit": 128, "shared_reserved_per_block": 1024,
               "threads_per_block": 1024}


def _copy_rows(out, a):                 # lane i reads a[row, i]: neighbours in memory
    i = cuda.grid(1)
    for r in range(a.shape[0]):
        out[r, i] = a[r, i]


def _copy_columns(out, a):              # lane i reads a[i, c]: 128 bytes apart
    i = cuda.grid(1)
    for c in range(out.shape[0]):
        out[c, i] = a[i, c]


def coalescing(n: int = 4) -> dict[str, Counts]:
    """One warp copies ``n`` rows of 32 float32 (coalesced: lane i takes element i of a row), or ``n``
    columns of a 32 x 32 float32 matrix into rows (strided: lane i reads row i, 128 bytes from its neighbour).

    Each coalesced request touches 4 sectors; a column read touches one per lane, 32.
    """
    n = whole_number("n", n, 1, 32, hint="rows (or columns) copied")
    a = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    return {"coalesced": count(_copy_rows, 1, 32, out=np.zeros((n, 32), np.float32), a=a[:n].copy()),
            "strided": count(_copy_columns, 1, 32, out=np.zeros((n, 32), np.float32), a=a)}


def divergence() -> dict[str, Counts]:
    """The reduction exercise's interleaved kernel (active threads spread over every warp) and its
    sequential-addressing answer (whole warps idle until fewer than 32 threads are left)."""
    return {name: _exercise_counts("reduction", k) for name, k in
            (("interleaved", tuned.reduce_interleaved), ("sequential", tuned.reduce_sequential))}


def bank_conflicts() -> dict[str, Counts]:
    """The transpose through a 32 x 32 shared tile (a column read is a 32-way conflict) and a 32 x 33 one."""
    return {name: _exercise_counts("transpose", k) for name, k in
            (("32 x 32 tile", tuned.transpose_tiled), ("32 x 33 tile", tuned.transpose_tiled_padded))}


def _exercise_counts(name: str, kernel) -> Counts:
    from .tuning import tuning
    t = tuning(name)
    _res, trace = simulate(kernel, t.blocks, t.threads, **t.inputs(0))
    return hardware_counts(trace, t.threads)


def _rebound(kernel, constants: dict):
    """A copy of the kernel's function whose module constants (``TILE``, ...) are ``constants``."""
    fn = python_function(kernel)
    names = dict(fn.__globals__)
    names.update(constants)
    return types.FunctionType(fn.__code__, names, fn.__name__, fn.__defaults__, fn.__closure__)


def _validate_exercise(name: Any) -> str:
    """``name`` if it names a kernel exercise (:data:`course.kernels.exercises.EXERCISES`), or a clear error."""
    from .exercises import EXERCISES  # imported here: the exercises' table imports this module

    if not isinstance(name, str) or name not in EXERCISES:
        raise BadInputError(f"name must be one of the kernel exercises {sorted(EXERCISES)}, got {shown_value(name)}")
    return name


def _validate_kernel(kernel: Any) -> Any:
    """``kernel`` as it is, if it is a Python function (optionally under ``@cuda.jit``), or a clear error."""
    python_function(kernel)
    return kernel


@arguments(name=Given(_validate_exercise), kernel=Given(_validate_kernel), seed=Seed())
def scale_counts(name: str, kernel: Any, seed: int | np.random.Generator = 1) -> tuple[dict, list[str]]:
    """A kernel exercise's hardware counts at the size its :class:`~course.kernels.exercises.AtScale` names
    (warps full, the module constants rebound), and the problems found there: wrong values, a count over
    its target.  ``({}, [])`` for an exercise graded at its own size only.

    >>> from course.kernels import reference
    >>> scale_counts("matmul_tiled", reference.matmul_tiled)[0]["global_sectors"]
    96
    """
    from .exercises import exercise
    from .simulator import KernelFailed
    ex = exercise(name)
    at = ex.at_scale
    if at is None:
        return {}, []
    where = f"at {at.label}" + (f" ({', '.join(f'{k} = {v}' for k, v in at.constants.items())})" if at.constants
                                else "")
    args = at.make(np.random.default_rng(seed))
    try:
        res, trace = simulate(_rebound(kernel, at.constants), at.blocks, at.threads, **args)
    except KernelFailed as exc:
        return {}, [f"{where} your kernel raised {exc}. Use the module's constants (TILE, ...) rather than their "
                    "values, so that the kernel works at any size."]
    problems = [f"{where} {out} is wrong: use the module's constants (TILE, ...) rather than their values, so the "
                "kernel works at any size." for out, want in ex.oracle(args).items()
                if not np.allclose(np.asarray(res[out]), want, rtol=1e-5, atol=1e-5)]
    counts = hardware_counts(trace, at.threads).as_dict()
    problems += [f"{k.replace('_', ' ')} {where}: {counts[k]}, the target is at most {limit}. Hint: {at.hints[k]}."
                 for k, limit in at.targets.items() if counts[k] > limit]
    return counts, problems


def occupancy(threads_per_block: int, registers_per_thread: int = 32, shared_bytes_per_block: int = 0,
              limits: dict | None = None) -> dict:
    """Resident blocks and warps per SM and what limits them, against :data:`H100_LIMITS` (data-sheet).

    >>> occupancy(256, registers_per_thread=64)["limited_by"], occupancy(256, 64)["occupancy"]
    ('registers', 0.5)
    """
    t, r, s, lim = _validate_occupancy(threads_per_block, registers_per_thread, shared_bytes_per_block, limits)
    warps = -(-t // 32)
    per_warp = -(-r * 32 // lim["register_unit"]) * lim["register_unit"]
    smem = -(-(s + lim["shared_reserved_per_block"]) // lim["shared_unit"]) * lim["shared_unit"]
    by = {"warps": lim["warps_per_sm"] // warps, "registers": (lim["registers_per_sm"] // per_warp) // warps,
          "shared memory": lim["shared_per_sm"] // smem, "blocks": lim["blocks_per_sm"]}
    blocks = min(by.values())
    return {"blocks_per_sm": blocks, "warps_per_sm": blocks * warps,
            "occupancy": blocks * warps / lim["warps_per_sm"],
            "limited_by": min(by, key=lambda k: (by[k], k != "warps")), "blocks_by_limit": by}


def _validate_occupancy(threads_per_block: Any, registers_per_thread: Any, shared_bytes_per_block: Any,
                        limits: Any) -> tuple[int, int, int, dict]:
    """The three sizes as ints within the limits (:data:`H100_LIMITS` for None), and the limits."""
    lim = H100_LIMITS if limits is None else limits
    if not isinstance(lim, dict) or set(H100_LIMITS) - set(lim):
        raise BadInputError(f"limits must be None (the H100's) or a dict with the keys of H100_LIMITS "
                            f"({', '.join(sorted(H100_LIMITS))}); got {limits!r:.80}")
    t = whole_number("threads_per_block", threads_per_block, 1, lim["threads_per_block"],
                     hint="threads in one block")
    r = whole_number("registers_per_thread", registers_per_thread, 1, lim["registers_per_thread"],
                     hint="nvcc -Xptxas -v prints it")
    s = whole_number("shared_bytes_per_block", shared_bytes_per_block, 0, lim["shared_per_block"],
                     hint="static plus dynamic shared memory of one block")
    return t, r, s, lim


def _validate_shapes(shapes: Any) -> list[tuple[int, int]]:
    """``shapes`` as a list of ``(threads, items)`` the simulator can run; else a :class:`BadInputError`."""
    if isinstance(shapes, (str, bytes, np.ndarray)) or not hasattr(shapes, "__iter__") or not all(
            isinstance(p, (tuple, list)) and len(p) == 2 for p in shapes):
        raise BadInputError(f"shapes must be (threads, items) pairs such as ((128, 4), (256, 4)); got {shapes!r:.80}")
    for threads, items in shapes:
        if not (isinstance(threads, int) and 32 <= threads <= 256 and threads & (threads - 1) == 0):
            raise BadInputError(f"threads must be a power of two from 32 to 256 (the simulator runs one Python "
                                f"thread each), got {threads!r}")
        whole_number("items", items, 1, 32, hint="elements per thread")
    return [tuple(p) for p in shapes]


def scan_padding_rows(shapes: tuple = ((128, 4), (256, 4), (128, 16))) -> list[dict]:
    """Lesson 04's tile scan, plain and padded, counted for one tile of each ``(threads, items)`` shape.

    Per element of the tile: the shared-memory wavefronts of each layout, the global sectors (the same in
    both), and the blocks per SM each layout allows on an H100 (data-sheet limits, 32 registers assumed).
    """
    shapes = _validate_shapes(shapes)
    rows = []
    for threads, items in shapes:
        n = threads * items
        c = {}
        for padded in (False, True):
            a = np.ones(n, np.float32)
            _res, trace = simulate(tuned.block_scan_kernel(threads, items, padded), 1, threads,
                                   out=np.zeros(n, np.float32), a=a)
            c[padded] = hardware_counts(trace, threads)
        smem = {p: 4 * (n + p * (n // 32) + threads + p * (threads // 32)) for p in (0, 1)}
        rows.append({"threads": threads, "items": items, "elements": n,
                     "plain_wavefronts_per_element": c[False].shared_wavefronts / n,
                     "padded_wavefronts_per_element": c[True].shared_wavefronts / n,
                     "worst_conflict_plain": c[False].worst_conflict,
                     "global_sectors_per_element": c[False].global_sectors / n,
                     "same_global_sectors": c[False].global_sectors == c[True].global_sectors,
                     "shared_requests_per_element": c[True].shared_requests / n,
                     "blocks_per_sm_plain": occupancy(threads, 32, smem[0])["blocks_per_sm"],
                     "blocks_per_sm_padded": occupancy(threads, 32, smem[1])["blocks_per_sm"]})
    return rows
