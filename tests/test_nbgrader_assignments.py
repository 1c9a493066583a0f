"""The exercises as nbgrader assignments: the source notebooks carry the right metadata, and nbgrader's
release (generate_assignment) and autograde, run on the smallest lesson, give a correct submission full
marks and the released stubs none.  The second part needs nbgrader (the instructor extra) and skips without it.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import nbgrader_assignments as nga  # noqa: E402

SMALLEST = "01_backprop_step_by_step"   # the quickest lesson notebook to run (see INSTRUCTORS.md)


def test_lessons_are_named_by_number_or_name_and_a_wrong_name_is_refused():
    every = nga.lessons()
    assert len(every) == 8 and every[0] == SMALLEST and every[-1] == "08_attention_as_a_scan"
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


@pytest.mark.slow
def test_nbgrader_releases_and_autogrades_the_smallest_lesson(tmp_path):
    pytest.importorskip("nbgrader", reason="nbgrader is not installed (pip install -e '.[instructor]')")
    course_dir = tmp_path / "course"
    (released,) = nga.release([SMALLEST], course_dir)
    text = released.read_text(encoding="utf-8")
    assert "### BEGIN SOLUTION" not in text and "raise NotImplementedError" in text
    assert "x.T @ dout" not in text, "the released notebook still holds an answer"
    for student, notebook in (("correct", course_dir / "source" / SMALLEST / f"{SMALLEST}.ipynb"),
                              ("stubbed", released)):
        target = course_dir / "submitted" / student / SMALLEST
        target.mkdir(parents=True)
        shutil.copy(notebook, target / f"{SMALLEST}.ipynb")
    rows = {r["student"]: r for r in nga.autograde([SMALLEST], course_dir)}
    assert rows["correct"]["max_score"] > 0
    assert rows["correct"]["score"] == rows["correct"]["max_score"]
    assert rows["stubbed"]["score"] == 0
    assert (course_dir / "grades.csv").read_text(encoding="utf-8").count(SMALLEST) == 2
