"""Notebooks are stored without outputs, each one offers the Colab install cell, each lesson
notebook is released from its solutions notebook, and the cells the suite runs in the lesson
notebook only (tagged ``lesson-only``) can be left out of the solutions notebook safely."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").rglob("*.ipynb"))
NOTEBOOKS = [p for p in NOTEBOOKS if ".ipynb_checkpoints" not in p.parts]


def test_there_are_notebooks():
    assert any(p.name.startswith("00_") for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_without_outputs(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    dirty = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
             and (c.get("outputs") or c.get("execution_count"))]
    assert not dirty, f"{path.name}: cells {dirty} hold outputs; run nbstripout on it"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_installs_itself_on_colab_and_imports_the_course(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    src = ["".join(c["source"]) for c in nb["cells"]]
    assert any('"google.colab" in sys.modules' in s and "pip install" in s for s in src), path.name
    assert any("import course" in s or "from course" in s for s in src), path.name
    if "solutions" not in path.parts:
        assert "colab-badge" in src[0], f"{path.name}: the first cell should carry the Open-in-Colab badge"


def test_each_lesson_notebook_is_released_from_its_solutions_notebook():
    """One source: the solutions notebook, with nbgrader's solution markers; the lesson notebook is
    made from it by tools/release_notebooks.py, and must not be edited by hand."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, str(ROOT / "tools" / "release_notebooks.py"), "--check"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr + out.stdout
    solutions = sorted((ROOT / "notebooks" / "solutions").glob("*_solutions.ipynb"))
    lessons = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert len(solutions) >= len(lessons) - 1  # lesson 00 has no exercise, so no solutions notebook


def test_release_replaces_each_marked_block_by_a_stub_at_its_indentation():
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    from release_notebooks import ReleaseError, strip_solutions

    src = "def f(x):\n    '''doc'''\n    ### BEGIN SOLUTION\n    y = x + 1\n    return y\n    ### END SOLUTION\n"
    assert strip_solutions(src) == "def f(x):\n    '''doc'''\n    raise NotImplementedError  # your code here\n"
    with pytest.raises(ReleaseError, match="never closed"):
        strip_solutions("### BEGIN SOLUTION\nx = 1\n")
    with pytest.raises(ReleaseError, match="without a"):
        strip_solutions("x = 1\n### END SOLUTION\n")


def _release_tool():
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    import release_notebooks

    return release_notebooks


def _notebook(*cells):
    """A notebook dict from (source, tagged) pairs; a source holding a solution block is an exercise."""
    tool = _release_tool()
    return {"cells": [{"cell_type": "code", "source": src,
                       "metadata": {"tags": [tool.LESSON_ONLY]} if tagged else {}} for src, tagged in cells]}


SOLUTIONS = sorted((ROOT / "notebooks" / "solutions").glob("*_solutions.ipynb"))


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_lesson_only_cells_can_be_left_out_of_the_solutions_run(path):
    """The suite skips a solutions notebook's lesson-only cells (they run in the lesson notebook):
    none of them may hold an exercise, its check or a use of an answer, or define a name that a cell
    still running reads; so the exercises, their checks and all they need still run."""
    tool = _release_tool()
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert tool.lesson_only_problems(nb, path.name) == []
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    tagged = [c for c in code if tool.LESSON_ONLY in c.get("metadata", {}).get("tags", [])]
    running = [c for c in code if c not in tagged]
    assert any(tool.BEGIN in "".join(c["source"]) for c in running), f"{path.name}: no exercise runs"
    assert any("check." in "".join(c["source"]) for c in running), f"{path.name}: no exercise check runs"


def test_the_lesson_only_rule_finds_each_kind_of_unsafe_tag():
    tool = _release_tool()
    answer = "def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n"

    def problems(*cells):
        return tool.lesson_only_problems(_notebook(*cells))

    assert problems(("x = 1", True), ("print(x)", False))                     # defines what runs later
    assert problems(("x = [1]", False), ("x[0] = 2", True), ("print(x)", False))  # changes it in place
    assert problems(("import numpy as np", True), ("np.ones(2)", False))
    assert problems(("def g(): return 1", True), ("def h():\n    return g()", False))  # read in a body
    assert problems(("for k in range(3): pass", True), ("print(k)", False))
    assert problems(("k = 1", True), ("if True:\n    k = 2\nprint(k)", False))   # only maybe rebound
    assert problems((answer, True), ("course.check.f(f)", False))               # the exercise itself
    assert problems((answer, False), ("course.check.f(f)", True))               # its check
    assert problems((answer, False), ("print(f(2))", True))                     # a use of the answer
    assert not problems(("x = 1", True), ("x = 2\nprint(x)", False))            # rebound before read
    assert not problems(("x = 1", True), ("x = 2", False), ("print(x)", False))
    assert not problems(("x = 1", True), ("print(x)", True))                    # both left out
    assert not problems(("%matplotlib inline\ny = 1", True), ("!echo hi\nprint(2)", False))
    assert not problems(("t = [k for k in range(3)]", True), ("print(sorted({k: 1 for k in 'ab'}))", False))


def test_the_suite_leaves_out_tagged_cells_of_solutions_notebooks_only(monkeypatch):
    import conftest

    monkeypatch.delenv("COURSE_NOTEBOOKS_EVERY_CELL", raising=False)
    sol = ROOT / "notebooks" / "solutions" / "05_bppsa_solutions.ipynb"
    lesson = ROOT / "notebooks" / "05_bppsa.ipynb"
    assert conftest.runs_in_lesson_only(sol, [conftest.LESSON_ONLY])
    assert not conftest.runs_in_lesson_only(sol, ["other"])
    assert not conftest.runs_in_lesson_only(lesson, [conftest.LESSON_ONLY])
    assert _release_tool().LESSON_ONLY == conftest.LESSON_ONLY
    monkeypatch.setenv("COURSE_NOTEBOOKS_EVERY_CELL", "1")
    assert not conftest.runs_in_lesson_only(sol, [conftest.LESSON_ONLY])
