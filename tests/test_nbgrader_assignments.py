"""The exercises as nbgrader assignments: the source notebooks carry the right metadata, and nbgrader's
release (generate_assignment) and autograde, run on the smallest lesson, give a correct submission full
marks and the released stubs none (the tool's own commands, run beside the rest of the suite: ``tests/_early.py``).
The second part needs nbgrader (the instructor extra) and skips without it.
"""

from __future__ import annotations

import csv
import os
import shutil
import sys
from importlib.util import find_spec
from pathlib import Path

import _early
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import nbgrader_assignments as nga  # noqa: E402

SMALLEST = "01_backprop_step_by_step"   # the quickest lesson notebook to run (see INSTRUCTORS.md)


def test_lessons_are_named_by_number_or_name_and_a_wrong_name_is_refused():
    every = nga.lessons()
    assert len(every) >= 8 and every[0] == SMALLEST and "08_attention_as_a_scan" in every and every == sorted(every)
    assert nga.lessons(["05"]) == nga.lessons(["05_bppsa"]) == ["05_bppsa"]
    with pytest.raises(SystemExit, match="no lesson '99'"):
        nga.lessons(["99"])


@pytest.mark.parametrize("lesson", nga.lessons())
def test_every_answer_cell_and_every_check_cell_is_marked_for_nbgrader(lesson):
    nb = nga.source_notebook(lesson)
    assert not nb["cells"][0]["source"][0].rstrip().endswith(nga.TITLE_SUFFIX)
    answers = checks = 0
    for cell in nb["cells"]:
        source, meta = "".join(cell["source"]), cell["metadata"].get("nbgrader")
        if cell["cell_type"] != "code":
            continue
        if nga.BEGIN in source:
            answers += 1
            assert meta["solution"] and not meta["grade"] and not meta["locked"]
        elif "course.check.check_" in source and meta:
            checks += 1
            assert source.startswith("assert course.check.check_"), source
            assert meta["grade"] and meta["locked"] and meta["points"] in (nga.POINTS, nga.LONG_POINTS)
    assert answers >= checks >= 1
    ids = [c["metadata"]["nbgrader"]["grade_id"] for c in nb["cells"] if "nbgrader" in c["metadata"]]
    assert len(ids) == len(set(ids)), "nbgrader needs a unique grade_id per cell"


def test_the_long_exercises_are_worth_more():
    points = {}
    for lesson in nga.lessons():
        for cell in nga.source_notebook(lesson)["cells"]:
            meta = cell["metadata"].get("nbgrader", {})
            if meta.get("grade"):
                name = "".join(cell["source"]).split("course.check.")[1].split("(")[0]
                points[name] = meta["points"]
    assert {name for name, p in points.items() if p == nga.LONG_POINTS} == nga.LONG_EXERCISES


def _prepare_grading():
    """The tool's own two commands on the smallest lesson, a correct and a stubbed submission between them."""
    if find_spec("nbgrader") is None:
        return None
    course_dir = _early.scratch("nbgrader") / "course"
    tool = [sys.executable, str(ROOT / "tools" / "nbgrader_assignments.py")]
    env = dict(os.environ)

    def run():
        release = _early.run(tool + ["release", SMALLEST, "--course-dir", str(course_dir)], timeout=1500,
                             cwd=ROOT, env=env)
        if release.returncode:
            return course_dir, release, None
        for student, notebook in (("correct", course_dir / "source" / SMALLEST / f"{SMALLEST}.ipynb"),
                                  ("stubbed", course_dir / "release" / SMALLEST / f"{SMALLEST}.ipynb")):
            target = course_dir / "submitted" / student / SMALLEST
            target.mkdir(parents=True)
            shutil.copy(notebook, target / f"{SMALLEST}.ipynb")
        grade = _early.run(tool + ["autograde", SMALLEST, "--course-dir", str(course_dir)], timeout=1500,
                           cwd=ROOT, env=env)
        return course_dir, release, grade
    return run


# nbgrader's release and autograde run when collection ends, beside the rest of the suite (tests/_early.py)
_early.job("nbgrader", _prepare_grading)


@pytest.mark.slow
@pytest.mark.early("nbgrader")
def test_nbgrader_releases_and_autogrades_the_smallest_lesson():
    pytest.importorskip("nbgrader", reason="nbgrader is not installed (pip install -e '.[instructor]')")
    course_dir, release, grade = _early.result("nbgrader")
    assert release.returncode == 0, f"release failed:\n{release.stdout[-3000:]}\n{release.stderr[-3000:]}"
    assert f"released {SMALLEST}" in release.stdout
    text = (course_dir / "release" / SMALLEST / f"{SMALLEST}.ipynb").read_text(encoding="utf-8")
    assert "### BEGIN SOLUTION" not in text and "raise NotImplementedError" in text
    assert "x.T @ dout" not in text, "the released notebook still holds an answer"
    assert grade.returncode == 0, f"autograde failed:\n{grade.stdout[-3000:]}\n{grade.stderr[-3000:]}"
    with open(course_dir / "grades.csv", newline="", encoding="utf-8") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert float(rows["correct"]["max_score"]) > 0
    assert float(rows["correct"]["score"]) == float(rows["correct"]["max_score"])
    assert float(rows["stubbed"]["score"]) == 0
    assert (course_dir / "grades.csv").read_text(encoding="utf-8").count(SMALLEST) == 2
