"""Every lesson notebook run top to bottom, once: the executed book's build (``tools/build_book.py``).

The book's build executes each lesson notebook in a fresh kernel, as a learner meets it (exercises
unanswered), with the apps leaving their static copies (``COURSE_STATIC=1``) and the figures' words
read out: everything nbval's run of the same notebook does, and more.  So in a session that runs
this module, ``conftest.py`` leaves out nbval's run of the lesson notebooks (where no GPU answers:
the book is built CPU only) and each lesson is executed once, not twice; ``python -m pytest
notebooks/04_blelloch_scan.ipynb`` still runs one lesson under nbval.  The build starts when
collection ends, beside the rest of the suite (``tests/_early.py``); ``tests/test_browser.py``
reads the same pages in a real browser.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import _early
import pytest

ROOT = Path(__file__).resolve().parents[1]
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")    # the terminal colours of an IPython traceback
LESSONS = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

pytestmark = pytest.mark.early("book")


def _built() -> tuple[Path, object, list[dict]]:
    out, run = _early.result("book")
    record = json.loads((out / "build.json").read_text(encoding="utf-8")) if (out / "build.json").exists() else []
    return out, run, record


@pytest.mark.parametrize("lesson", LESSONS)
def test_the_lesson_notebook_runs_top_to_bottom(lesson):
    out, run, record = _built()
    row = next((r for r in record if r["file"] == lesson), None)
    assert row is not None, (f"the book's build never ran {lesson} (is it in README.md's lessons table?):\n"
                             f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    error = _COLOUR.sub("", row["error"] or "")
    assert row["error"] is None, f"{lesson} failed, run top to bottom in a fresh kernel:\n{error[-8000:]}"
    assert (out / lesson.replace(".ipynb", ".html")).is_file(), f"{lesson} ran, but its page was not written"


def test_the_book_builds_every_page_and_its_front_page():
    out, run, record = _built()
    assert run.returncode == 0, f"the book did not build:\n{run.stdout[-3000:]}\n{run.stderr[-6000:]}"
    assert sorted(r["file"] for r in record) == LESSONS
    assert (out / "index.html").is_file()
