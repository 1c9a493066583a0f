"""Lesson 09's exercise checks, collected as ``course.check.<name>`` (see ``course/check.py``).

* :func:`check_mma_fragment`: which 4 elements of A each lane of a warp holds for ``mma.m16n8k8`` with
  TF32, in register order, graded against the PTX ISA's table (:mod:`course.gemm.fragments`) for all 32
  lanes, with the typical slips named;
* :func:`check_kernel_register_tile`: the register-blocked ``numba.cuda`` product (lesson 09's kernel
  exercise in :mod:`course.kernels.gemm_exercises`), graded by the kernel machinery's counted events, its
  shared loads per FMA said as such.

>>> check_mma_fragment(tf32_a_fragment)
check_mma_fragment: right: ...
True
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np

from ..grading import NOT_DONE, real_array, run_learner, verdict
from .fragments import fragment_layout

__all__ = ["check_mma_fragment", "check_kernel_register_tile"]

SHAPE = "m16n8k8.tf32"
#: The most Python lines one call of the learner's fragment function may run, and the most seconds for all 32.
MAX_LINES, MAX_SECONDS = 20_000, 10.0


def tf32_a_fragment(lane: int) -> list[tuple[int, int]]:
    """The worked answer: (row, col) of a0..a3, the A elements lane ``lane`` holds (m16n8k8, .tf32)."""
    group, tig = lane >> 2, lane % 4
    return [(group, tig), (group + 8, tig), (group, tig + 4), (group + 8, tig + 4)]


def _table(rows_of, cols_of) -> np.ndarray:
    """A whole (32, 4, 2) table from per-(groupID, threadID_in_group, register) formulas."""
    lane = np.arange(32)[:, None]
    i = np.arange(4)[None, :]
    g, t = lane >> 2, lane % 4
    return np.stack(np.broadcast_arrays(rows_of(g, t, i), cols_of(g, t, i)), axis=-1)


def _slips(want: np.ndarray) -> list[tuple[np.ndarray, str]]:
    """The typical wrong tables, each with what it means."""
    return [
        (want[..., ::-1], "rows and columns are swapped: row comes from groupID (lane >> 2), col from "
                          "threadID_in_group (lane % 4); A is 16 rows x 8 columns"),
        (_table(lambda g, t, i: t + 8 * (i % 2), lambda g, t, i: g + 4 * (i // 2)),
         "groupID and threadID_in_group are swapped: groupID = lane >> 2 (0..7) picks the row, "
         "threadID_in_group = lane % 4 (0..3) the column"),
        (_table(lambda g, t, i: g + 8 * (i // 2), lambda g, t, i: t + 4 * (i % 2)),
         "the +8 row offset is on the wrong registers: for .tf32 it is on a1 and a3 (a1 sits 8 rows below "
         "a0), and the +4 column offset on a2 and a3; you have a1 and a2 swapped"),
        (_table(lambda g, t, i: g + 0 * i, lambda g, t, i: t + 4 * (i // 2)),
         "rows 8..15 are never held: a1 and a3 are 8 rows below a0 and a2 (row = groupID + 8)"),
        (_table(lambda g, t, i: g + 8 * (i % 2), lambda g, t, i: t + 0 * i),
         "columns 4..7 are never held: a2 and a3 are 4 columns right of a0 and a1 (col = threadID_in_group + 4)"),
        (_table(lambda g, t, i: g + 8 * (i % 2), lambda g, t, i: 2 * t + (i // 2)),
         "that is the column rule of the 16-bit layouts (threadID_in_group * 2 + ...); for .tf32 each lane's "
         "two columns are 4 apart: threadID_in_group and threadID_in_group + 4"),
        (np.roll(want, 1, axis=0), "off by one lane: your lane L holds what the table gives lane L - 1"),
        (np.roll(want, -1, axis=0), "off by one lane: your lane L holds what the table gives lane L + 1"),
    ]


def _bounded(fn: Any, lane: int) -> tuple[Any, str | None]:
    """``run_learner(fn, lane)``, stopped past :data:`MAX_LINES` lines (an endless loop says so)."""
    lines, steps = 0, [0]

    class Stop(Exception):
        pass

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        nonlocal lines
        frame.f_trace_opcodes = True            # a one-line endless loop runs no new line: count operations
        if event in ("line", "opcode"):
            lines += event == "line"
            steps[0] += 1
            if steps[0] > 20 * MAX_LINES:
                lines = MAX_LINES + 1
                raise Stop
        return tracer

    def traced(x: int) -> Any:
        before = sys.gettrace()
        sys.settrace(tracer)
        try:
            return fn(x)
        finally:
            sys.settrace(before)

    got, problem = run_learner(traced, lane) if callable(fn) else run_learner(fn, lane)
    if lines > MAX_LINES:
        return None, (f"for lane {lane} your function ran more than {MAX_LINES:,} lines without returning; it "
                      "needs a handful (look for a loop that never ends)")
    return got, problem


def _read(lane: int, got: Any) -> tuple[np.ndarray | None, str | None]:
    what = f"my_a_fragment({lane})"
    if isinstance(got, dict):
        return None, f"{what} returned a dict; return 4 (row, col) pairs, one per register a0, a1, a2, a3"
    arr, problem = real_array(what, got)
    if problem:
        return None, problem
    if arr.shape != (4, 2):
        return None, (f"{what} has shape {arr.shape}; return 4 (row, col) pairs, one per register a0, a1, a2, "
                      "a3, e.g. [(row0, col0), (row1, col1), (row2, col2), (row3, col3)]")
    if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
        return None, f"{what} holds {arr.tolist()}: rows and columns are whole numbers"
    return arr.astype(np.int64), None


def _out_of_range(got: np.ndarray) -> str | None:
    bad = (got[..., 0] < 0) | (got[..., 0] > 15) | (got[..., 1] < 0) | (got[..., 1] > 7)
    if not bad.any():
        return None
    lane = int(np.argwhere(bad)[0][0])
    return (f"my_a_fragment({lane}) holds {got[lane].tolist()}: A is 16 x 8, so rows are 0..15 and columns "
            "0..7")


def _first_wrong(got: np.ndarray, want: np.ndarray) -> str:
    lane = int(np.argmax(np.any(got != want, axis=(1, 2))))
    g, t = lane >> 2, lane % 4
    same_set = sorted(map(tuple, got[lane].tolist())) == sorted(map(tuple, want[lane].tolist()))
    said = (f"lane {lane} (groupID {g}, threadID_in_group {t}): you gave {[tuple(p) for p in got[lane].tolist()]}, "
            f"the ISA's table says {[tuple(p) for p in want[lane].tolist()]}")
    if same_set:
        return said + ": the right elements, in the wrong register order (a0, a1, a2, a3)"
    held = np.zeros((16, 8), int)
    np.add.at(held, (got[..., 0].ravel(), got[..., 1].ravel()), 1)
    if (held != 1).any():
        r, c = map(int, np.argwhere(held != 1)[0])
        said += (f"; and A[{r}, {c}] is held {held[r, c]} times by the warp (each element of A must sit in "
                 "exactly one register of one lane)")
    return said


def check_mma_fragment(my_a_fragment: Any) -> bool:
    """Check ``my_a_fragment(lane)``: the (row, col) of A's a0..a3 for mma.m16n8k8 .tf32, for all 32 lanes."""
    want = fragment_layout(SHAPE, "a")
    got = np.zeros_like(want)
    start = time.monotonic()
    for lane in range(32):
        if time.monotonic() - start > MAX_SECONDS:
            return verdict("check_mma_fragment", f"your function took more than {MAX_SECONDS:g} s for 32 lanes; it "
                           "needs microseconds", "")
        result, problem = _bounded(my_a_fragment, lane)
        if problem == NOT_DONE:
            print(NOT_DONE)
            return False
        if problem is None:
            arr, problem = _read(lane, result)
        if problem:
            return verdict("check_mma_fragment", problem.rstrip("."), "")
        got[lane] = arr
    if np.array_equal(got, want):
        return verdict("check_mma_fragment", None, "right: all 32 lanes hold the elements the PTX ISA gives them, "
                       "in register order (a0, a1: rows groupID and groupID + 8; a2, a3: 4 columns to the right).")
    for table, meaning in _slips(want):
        if np.array_equal(got, table):
            return verdict("check_mma_fragment", meaning + ".", "")
    if _out_of_range(got):
        return verdict("check_mma_fragment", _out_of_range(got) + ".", "")
    return verdict("check_mma_fragment", _first_wrong(got, want) + ".", "")


def _per_fma(problem: str, fmas: int) -> str:
    """The kernel machinery's "too many shared reads" said as shared loads per FMA."""
    from ..kernels.gemm_exercises import TM, TN, shared_loads_per_fma_allowed
    made = int(problem.split(" made ")[1].split(",")[0])
    who = problem.split(": ")[1].split(" made ")[0]
    return (f"too many shared-memory loads per FMA: {who} made {made} shared loads for its {fmas} FMAs, "
            f"{made / fmas:.2f} per FMA; register blocking needs at most (TM + TN) / (TM * TN) = "
            f"{shared_loads_per_fma_allowed():.2f}. Per k, copy the TM = {TM} values of sa and the TN = {TN} values "
            f"of sb this thread needs into registers (cuda.local.array) once, then do the TM x TN multiply-adds "
            f"from those registers alone.")


def check_kernel_register_tile(kernel: Any) -> bool:
    """Check the register-blocked product ``kernel(c, a, b, n)``: each thread a TM x TN tile of c = a @ b."""
    from ..kernels.gemm_exercises import RT_N, TM, TN
    from ..kernels.grading import grade, worst_counts
    g = grade("register_tile", kernel)
    if not g.ok and g.problems and g.problems[0].startswith("Not done yet"):
        print(g.problems[0])
        return False
    fmas = RT_N * TM * TN
    problems = [_per_fma(p, fmas) if p.startswith("too many shared reads") else p for p in g.problems]
    if not g.ok:
        many = len(problems) > 1
        print("Not yet (register_tile):" if many else "Not yet:", *problems, sep="\n  - " if many else " ")
        return False
    loads = worst_counts(g.trace).get("shared_reads", (0,))[0]
    print(f"Correct: right values, no race, every index in bounds; the busiest thread made {loads} shared loads "
          f"for its {fmas} FMAs ({loads / fmas:.2f} per FMA: each value of sa loaded once per k and used TN = "
          f"{TN} times from a register, each of sb TM = {TM} times).", *g.notes)
    return True
