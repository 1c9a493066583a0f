"""Grade a learner's kernel against its exercise: run it on the simulator, then say precisely what is
wrong (out of bounds, a race, a barrier in a branch, a wrong value or operand order, an element never
written, too many accesses for the budget), or that it is right, and on a GPU where one answers.

>>> from course.kernels import reference
>>> grade("map", reference.relu_map).ok
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..arguments import Seed, arguments
from .exercises import Exercise, exercise
from .simulator import KernelFailed, gpu_kernels_available, run_on_gpu, simulate
from .trace import KernelIndexError, KernelRunawayError, Trace

__all__ = ["Grade", "grade", "worst_counts"]

NOT_DONE = "Not done yet: your kernel still raises NotImplementedError. Write its body, then run this cell again."


@dataclass
class Grade:
    """What a check found: ``ok``, the problems (sentences), the trace and the outputs of the run."""

    ok: bool
    problems: list = field(default_factory=list)
    trace: Trace | None = None
    outputs: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)


def worst_counts(trace: Trace) -> dict:
    """For each access kind, the most one thread made, and which thread: ``{kind: (count, (block, thread))}``."""
    worst: dict = {}
    for who, c in trace.counts().items():
        for k, v in c.items():
            if v > worst.get(k, (-1, None))[0]:
                worst[k] = (v, who)
    return worst


def _first_difference(got: np.ndarray, want: np.ndarray) -> tuple:
    bad = ~np.isclose(got, want, rtol=1e-5, atol=1e-5) | np.isnan(got)
    return tuple(int(i) for i in np.argwhere(bad)[0]), int(bad.sum())


def _outputs(ex: Exercise, res: dict, want: dict, args: dict) -> list[str]:
    problems = []
    for name, w in want.items():
        got = np.asarray(res[name])
        if np.allclose(got, w, rtol=1e-5, atol=1e-5):
            continue
        for what, fn in ex.mistakes:
            wrong = np.asarray(fn(args))
            if wrong.shape == got.shape and np.allclose(got, wrong, rtol=1e-5, atol=1e-5):  # a mistake of this output
                problems.append(f"{name} is wrong: {what}.")
                break
        else:
            ix, nbad = _first_difference(got, w)
            s = "[" + ", ".join(map(str, ix)) + "]"
            if np.isnan(got[ix]):
                problems.append(f"{name}{s} was never written ({nbad} element(s) wrong in all); expected {w[ix]:g}.")
            else:
                problems.append(f"{name}{s} is {got[ix]:g}, expected {w[ix]:g} ({nbad} element(s) wrong in all).")
    return problems


def _budget(ex: Exercise, trace: Trace) -> list[str]:
    problems = []
    worst = worst_counts(trace)
    for kind, limit in ex.budget.items():
        n, who = worst.get(kind, (0, None))
        if n > limit:
            problems.append(f"too many {kind.replace('_', ' ')}: {trace.who(*who)} made {n}, the budget "
                            f"is {limit} per thread.")
    for kind in ("shared_reads", "shared_writes"):
        if kind not in ex.budget and worst.get(kind, (0,))[0] > 0:
            problems.append("this exercise needs no shared memory; read and write the global arrays directly.")
            break
    return problems


@arguments(seed=Seed())
def grade(name: str, kernel: Any, seed: int = 1, on_gpu: bool | None = None) -> Grade:
    """Run ``kernel`` on exercise ``name``'s inputs under the simulator and judge it (see module doc).

    ``on_gpu=None`` also runs it on the GPU when one answers (no trace there: only the outputs).
    """
    ex = exercise(name)
    args = ex.inputs(seed)
    want = ex.oracle(args)
    try:
        res, trace = simulate(kernel, ex.blocks, ex.threads, **args)
    except KernelFailed as exc:
        if isinstance(exc.cause, NotImplementedError):
            return Grade(False, [NOT_DONE], exc.trace)
        if isinstance(exc.cause, KernelIndexError):
            oob = exc.trace.out_of_bounds() if exc.trace else []
            tip = f" Hint: {ex.hint}." if ex.hint else ""
            if oob:      # one access, one thread: the simulator's "tid=... ctaid=..." may name another
                first = oob[0]
                verb = "read" if first.kind == "R" else "write"
                shape = exc.trace.shapes.get(first.array, ("?",))[0]
                said = (f"out of bounds: {verb} of {first.array}[{', '.join(map(str, first.index))}], but "
                        f"{first.array} has shape {shape} ({exc.trace.who(first.block, first.thread)})")
            else:
                said = str(exc.cause)
            return Grade(False, [f"{said}.{tip}".replace("..", ".")], exc.trace)
        if isinstance(exc.cause, KernelRunawayError):
            return Grade(False, [f"{exc.cause}."], exc.trace)
        return Grade(False, [f"your kernel raised {exc}"], exc.trace)
    problems = trace.divergent_barriers() + trace.races()[:3] + _outputs(ex, res, want, args) + _budget(ex, trace)
    notes = []
    if not problems and ex.at_scale is not None:       # graded on its memory traffic too, with full warps
        from .warps import scale_counts
        counts, at_scale = scale_counts(name, kernel, seed)
        problems += at_scale
        if counts and not at_scale:
            notes.append(f"At {ex.at_scale.label}: " + ", ".join(f"{counts[k]} {k.replace('_', ' ')} (target at "
                                                                 f"most {v})" for k, v in ex.at_scale.targets.items())
                         + ": on target, every warp's memory requests as few as the data allow.")
    g = Grade(not problems, problems, trace, res, notes)
    if g.ok and (on_gpu or (on_gpu is None and gpu_kernels_available())):
        out = run_on_gpu(kernel, ex.blocks, ex.threads, **args)
        same = all(np.allclose(out[k], v, rtol=1e-5, atol=1e-5) for k, v in want.items())
        verdict = "the same answer." if same else "a DIFFERENT answer"
        g.notes.append(f"And on the GPU, compiled with numba.cuda.jit: {verdict}")
        g.ok = g.ok and same
    return g
