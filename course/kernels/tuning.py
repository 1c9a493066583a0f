"""Optimisation exercises graded without a GPU: keep a kernel correct and bring what the hardware would
pay for (:mod:`course.kernels.counts`) under a target.

Each :class:`Tuning` names a slow starting kernel (correct, given), the course's fast answer, a numpy
oracle and targets on the counts.  :func:`grade_tuning` runs a learner's kernel on the simulator, checks
it against the oracle and the targets, and says what is over target and by how much.  The counts are a
pure function of the trace, so CI grades them.  On a GPU, :func:`time_tuning` times the same kernels at
a large size against a device-to-device copy of the same bytes.

>>> g = grade_tuning("transpose", tuned.transpose_naive)
>>> g.ok, g.problems[0][:38]
(False, 'global sectors: 2304, the target is at')
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..arguments import Given, OneOf, Seed, arguments
from ..errors import BadInputError, GPUUnavailableError
from . import tuned
from .counts import Counts, hardware_counts
from .simulator import KernelFailed, gpu_kernels_available, python_function, simulate
from .trace import KernelIndexError

__all__ = ["Tuning", "TUNINGS", "GPU_SCALE", "tuning", "TuningGrade", "grade_tuning", "report_tuning", "time_tuning"]


@dataclass(frozen=True, kw_only=True)
class Tuning:
    """One optimisation exercise: launch shape, inputs, oracle, targets (count -> most allowed) and hints."""

    name: str
    title: str
    blocks: Any
    threads: Any
    make: Callable[[np.random.Generator, int], dict]
    oracle: Callable[[dict], dict]
    targets: dict
    hints: dict
    slow: Callable
    answer: Callable
    gpu_blocks: Callable[[int], Any]       # grid for the GPU timing at scale k

    def inputs(self, seed: int = 0, scale: int = 1) -> dict:
        """The kernel's arguments, by name, in order (outputs first, NaN-filled)."""
        return self.make(np.random.default_rng(seed), scale)


def _ints(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.integers(-9, 10, size=shape).astype(np.float32)       # small integers: sums are exact


def _exclusive_tiles(a: np.ndarray, tile: int) -> np.ndarray:
    t = a.reshape(-1, tile)
    return (np.cumsum(t, axis=1) - t).reshape(-1).astype(np.float32)


_TR, _SCAN_TILE = tuned.TR_TILE, tuned.SCAN_T * tuned.SCAN_ITEMS

def _transpose_inputs(r: np.random.Generator, k: int) -> dict:
    return {"out": np.full((2 * _TR * k, _TR * k), np.nan, np.float32), "a": _ints(r, _TR * k, 2 * _TR * k)}


def _transpose_oracle(g: dict) -> dict:
    return {"out": g["a"].T}


def _transpose_blocks(k: int) -> tuple[int, int]:
    return (2 * k, k)


def _reduction_inputs(r: np.random.Generator, k: int) -> dict:
    return {"out": np.full(2 * k, np.nan, np.float32), "a": _ints(r, 2 * k * tuned.RED_T)}


def _reduction_oracle(g: dict) -> dict:
    return {"out": g["a"].reshape(-1, tuned.RED_T).sum(axis=1).astype(np.float32)}


def _scan_inputs(r: np.random.Generator, k: int) -> dict:
    return {"out": np.full(2 * k * _SCAN_TILE, np.nan, np.float32), "a": _ints(r, 2 * k * _SCAN_TILE)}


def _scan_oracle(g: dict) -> dict:
    return {"out": _exclusive_tiles(g["a"], _SCAN_TILE)}


def _two_blocks_per_scale(k: int) -> int:
    return 2 * k


TUNINGS: dict[str, Tuning] = {t.name: t for t in [
    Tuning(name="transpose",
           title=f"Matrix transpose of a {_TR} x {2 * _TR} matrix, blocks of {_TR} x {tuned.TR_ROWS}",
           blocks=(2, 1), threads=(_TR, tuned.TR_ROWS), make=_transpose_inputs, oracle=_transpose_oracle,
           targets={"global_sectors": 2 * 2 * _TR * _TR * 4 // 32, "bank_conflicts": 0},
           hints={"global_sectors": "a warp's 32 lanes should touch 32 consecutive floats (4 sectors) on both the "
                                    "read and the write: stage the tile in shared memory and write it out row by row",
                  "bank_conflicts": "a column of a 32 x 32 float32 tile lies in one bank; give the tile one spare "
                                    "column"},
           slow=tuned.transpose_naive, answer=tuned.transpose_tiled_padded, gpu_blocks=_transpose_blocks),
    Tuning(name="reduction", title=f"Block reduction: one sum per block of {tuned.RED_T}, 2 blocks",
           blocks=2, threads=tuned.RED_T, make=_reduction_inputs, oracle=_reduction_oracle,
           targets={"divergent_warps": 12, "bank_conflicts": 0},
           hints={"divergent_warps": "keep the active threads together (if t < s, s halving from the middle) so "
                                     "that whole warps are busy or idle until fewer than 32 threads are left",
                  "bank_conflicts": "active lanes should read consecutive words: cache[t] and cache[t + s], not "
                                    "cache[2 * s * t]"},
           slow=tuned.reduce_interleaved, answer=tuned.reduce_sequential, gpu_blocks=_two_blocks_per_scale),
    Tuning(name="scan", title=f"Block scan: a tile of {tuned.SCAN_T} threads x {tuned.SCAN_ITEMS} items, 2 blocks",
           blocks=2, threads=tuned.SCAN_T, make=_scan_inputs, oracle=_scan_oracle,
           targets={"global_sectors": 2 * 2 * _SCAN_TILE * 4 // 32, "bank_conflicts": 0},
           hints={"global_sectors": "keep the load and the store coalesced: lane t takes k * SCAN_T + t",
                  "bank_conflicts": "the runs (stride SCAN_ITEMS) and the tree (stride 2, 4, ...) pile lanes into "
                                    "few banks: store shared index i at i + i // 32 (size the arrays for it)"},
           slow=tuned.scan_plain, answer=tuned.scan_padded, gpu_blocks=_two_blocks_per_scale),
]}


def tuning(name: str) -> Tuning:
    """The :class:`Tuning` called ``name`` (one of :data:`TUNINGS`).

    >>> tuning("scan").targets
    {'global_sectors': 128, 'bank_conflicts': 0}
    """
    if name not in TUNINGS:
        raise BadInputError(f"optimisation exercise must be one of {sorted(TUNINGS)}, got {name!r}")
    return TUNINGS[name]


@dataclass
class TuningGrade:
    """``ok``; the problems (sentences); the learner's counts and the starting kernel's."""

    ok: bool
    problems: list = field(default_factory=list)
    counts: Counts | None = None
    slow_counts: Counts | None = None


def _counted(t: Tuning, kernel: Any, args: dict) -> tuple[dict, Counts, list]:
    res, trace = simulate(kernel, t.blocks, t.threads, **args)
    return res, hardware_counts(trace, t.threads), trace.divergent_barriers() + trace.races()[:3]


@arguments(seed=Seed())
def grade_tuning(name: str, kernel: Any, seed: int = 1) -> TuningGrade:
    """Run ``kernel`` on exercise ``name`` under the simulator: right values, no race, counts on target."""
    t = tuning(name)
    python_function(kernel)
    args = t.inputs(seed)
    try:
        res, c, problems = _counted(t, kernel, args)
    except KernelFailed as exc:
        if isinstance(exc.cause, NotImplementedError):
            return TuningGrade(False, ["Not done yet: your kernel still raises NotImplementedError. Start from "
                                       "the slow kernel printed above."])
        where = ""
        if isinstance(exc.cause, KernelIndexError) and exc.trace and exc.trace.out_of_bounds():
            bad = exc.trace.out_of_bounds()[0]
            where = f" ({exc.trace.who(bad.block, bad.thread)})"
        return TuningGrade(False, [f"your kernel raised {exc}{where}."])
    for out, want in t.oracle(args).items():
        got = np.asarray(res[out])
        bad = ~np.isclose(got, want, rtol=1e-5, atol=1e-5)
        if bad.any():
            ix = tuple(int(i) for i in np.argwhere(bad)[0])
            problems.append(f"{out}{list(ix)} is {got[ix]:g}, expected {want[ix]:g} ({int(bad.sum())} element(s) "
                            f"wrong): keep the kernel correct first.")
    _r, slow, _p = _counted(t, t.slow, args)                 # the same inputs (the simulator copies them)
    have = c.as_dict()
    for k, limit in t.targets.items():
        if have[k] > limit:
            over = f"{have[k] / limit:.1f}x the target" if limit else f"{have[k]} over"
            problems.append(f"{k.replace('_', ' ')}: {have[k]}, the target is at most {limit} ({over}; the "
                            f"starting kernel has {slow.as_dict()[k]}). Hint: {t.hints[k]}.")
    return TuningGrade(not problems, problems, c, slow)


def _validate_kernel(kernel: Any) -> Any:
    """``kernel`` as it is, if it is a Python function (optionally under ``@cuda.jit``), or a clear error."""
    python_function(kernel)
    return kernel


@arguments(name=OneOf(*sorted(TUNINGS)), kernel=Given(_validate_kernel))
def report_tuning(name: str, kernel: Any) -> bool:
    """Print :func:`grade_tuning`'s verdict with the counts beside the starting kernel's; True when on target."""
    g = grade_tuning(name, kernel)
    if g.counts is None:
        print(*g.problems)
        return False
    t = tuning(name)
    rows = [f"  {k:<18}{g.slow_counts.as_dict()[k]:>8}{g.counts.as_dict()[k]:>8}"
            f"{'  <= ' + str(t.targets[k]) if k in t.targets else '':>10}" for k in g.counts.as_dict()]
    print(f"{'':<20}{'start':>8}{'yours':>8}{'target':>10}", *rows, sep="\n")
    if g.ok:
        print("On target: right values, no race, every count within its target.")
    else:
        many = len(g.problems) > 1
        print("Not yet:", *g.problems, sep="\n  - " if many else " ")
    return g.ok


#: How many times larger the GPU timing's grid is than the simulator's (each way, for the transpose).
GPU_SCALE = {"transpose": 64, "reduction": 4096, "scan": 4096}


def time_tuning(name: str, kernel: Any, scale: int | None = None, repeat: int = 20) -> dict:
    """On a GPU: the median time of ``kernel``, of the starting kernel and of a device-to-device copy of the
    same bytes (the baseline), with exercise ``name``'s grid ``scale`` times larger (:data:`GPU_SCALE`).

    Raises GPUUnavailableError where no GPU answers (nothing is estimated).
    """
    if not gpu_kernels_available():
        raise GPUUnavailableError("no CUDA GPU answers numba here: the optimisation exercises are graded by "
                                  "their counts instead")
    from numba import cuda

    from ..devices import quiet_numba_launches
    t = tuning(name)
    scale = GPU_SCALE[name] if scale is None else scale
    args = t.inputs(0, scale)
    dev = {k: cuda.to_device(v) for k, v in args.items()}
    src, out = dev["a"], dev["out"]
    copy = cuda.device_array_like(src)

    def median(run: Callable[[], None]) -> float:
        run()
        cuda.synchronize()
        times = []
        for _ in range(repeat):
            start, stop = cuda.event(), cuda.event()
            start.record()
            run()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) / 1e3)            # ms -> s
        return float(np.median(times))

    record = {"exercise": name, "scale": scale, "bytes_read": int(args["a"].nbytes)}
    with quiet_numba_launches():
        for label, k in (("yours", kernel), ("start", t.slow)):
            compiled = cuda.jit(python_function(k))
            record[f"{label}_s"] = median(lambda c=compiled: c[t.gpu_blocks(scale), t.threads](out, src))
        record["copy_s"] = median(lambda: copy.copy_to_device(src))
    return record
