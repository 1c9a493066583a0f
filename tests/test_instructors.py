"""INSTRUCTORS.md's table of checked exercises and points agrees with the notebooks nbgrader grades, and the
guide keeps the sections a teacher plans with (a two-week plan, a reading list, misconceptions, what to do
when a demo disagrees with the text)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "INSTRUCTORS.md").read_text(encoding="utf-8")


def _graded(lesson: str) -> tuple[int, int]:
    """(checked exercises, points) of a lesson's solutions notebook, as tools/nbgrader_assignments.py grades it."""
    spec = importlib.util.spec_from_file_location("nbgrader_assignments", ROOT / "tools" / "nbgrader_assignments.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    path = next((ROOT / "notebooks" / "solutions").glob(f"{lesson}_*_solutions.ipynb"))
    names = [m["name"] for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"
             for m in [tool._CHECK_CALL.match("".join(c["source"]).strip())] if m]
    return len(names), sum(3 if n in tool.LONG_EXERCISES else 1 for n in names)


ROWS = {m["lesson"]: (int(m["n"]), int(m["points"])) for m in
        re.finditer(r"^\| (?P<lesson>\d\d) [^|]+\|[^|]+\| (?P<n>\d+) \((?P<points>\d+)\) \|", GUIDE, re.M)}


@pytest.mark.parametrize("lesson", sorted(ROWS))
def test_the_table_counts_each_lessons_graded_checks_and_points(lesson):
    assert ROWS[lesson] == _graded(lesson), (
        f"INSTRUCTORS.md says lesson {lesson} has {ROWS[lesson][0]} checked exercises worth {ROWS[lesson][1]} points; "
        f"its solutions notebook has {_graded(lesson)[0]} check cells worth {_graded(lesson)[1]}: update the table")


def test_the_guide_has_the_sections_a_teacher_plans_with():
    for heading in ("## A two-week plan", "## Reading list", "## Common misconceptions",
                    "## When a live demo on a shared machine contradicts the text"):
        assert heading in GUIDE
    for work in ("Programming Massively Parallel Processors", "1907.10134", "MLSys 2020", "GPipe", "Megatron-LM",
                 "ZeRO"):
        assert work in GUIDE, f"the reading list should name {work}"
