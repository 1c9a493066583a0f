"""Release the lessons' exercises as nbgrader assignments, and autograde what learners hand in.

Two commands, run from the repository root (nbgrader comes with the instructor extra:
``pip install -e '.[instructor]'``)::

    python tools/nbgrader_assignments.py release   [LESSON ...]   # make release/<lesson>/ for learners
    python tools/nbgrader_assignments.py autograde [LESSON ...]   # grade submitted/<student>/<lesson>/

``make release-exercises`` and ``make autograde`` run them for every lesson 01-09.  Everything lives in
nbgrader's usual course directory (``--course-dir``, ``build/nbgrader`` by default)::

    source/<lesson>/<lesson>.ipynb       the instructor's version, made here from the solutions notebook
    release/<lesson>/<lesson>.ipynb      what learners get: answers replaced by stubs (nbgrader)
    submitted/<student>/<lesson>/...     put each learner's notebook here, then run autograde
    autograded/, gradebook.db            nbgrader's results; grades.csv, one row per submission

The source notebook is the solutions notebook with nbgrader's cell metadata added: each cell with
``### BEGIN SOLUTION`` markers becomes an answer cell, and each check cell (a single
``course.check.check_<name>(...)`` call) a locked, graded test cell whose call is asserted, so a check
that prints what is wrong also fails the cell and scores nothing.  ``LONG_EXERCISES`` score more.
A lesson is named by its number or its notebook name: ``05`` or ``05_bppsa``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "notebooks" / "solutions"
TITLE_SUFFIX = " — solutions"
BEGIN = "### BEGIN SOLUTION"
#: The checks of the exercises where the learner writes a lesson's core: worth more points.
LONG_EXERCISES = {"check_mlp_backward", "check_lane_dot", "check_linear_roofline", "check_down_sweep_inplace",
                  "check_kernel_register_tile", "check_bppsa_backward", "check_ring_allreduce",
                  "check_selective_backward", "check_flash_backward"}
POINTS, LONG_POINTS = 1, 3
_CHECK_CALL = re.compile(r"^course\.check\.(?P<name>check_\w+)\((?P<args>.*)\)$", re.S)


def lessons(names: list[str] | None = None) -> list[str]:
    """The lesson notebook names (``05_bppsa``, ...) for the given numbers or names; all when none given."""
    every = sorted(p.name[: -len("_solutions.ipynb")] for p in SOLUTIONS.glob("*_solutions.ipynb"))
    if not names:
        return every
    out = []
    for name in names:
        found = [lesson for lesson in every if lesson == name or lesson.split("_", 1)[0] == name]
        if not found:
            raise SystemExit(f"no lesson {name!r}; the lessons with exercises are: {', '.join(every)}")
        out.extend(found)
    return out


def _meta(grade_id: str, *, solution: bool, grade: bool, points: int = 0) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": not solution, "schema_version": 3,
            "solution": solution, "task": False}
    if grade:
        meta["points"] = points
    return meta


def source_notebook(lesson: str) -> dict:
    """The solutions notebook of ``lesson`` with nbgrader's metadata: answer cells and graded check cells."""
    nb = json.loads((SOLUTIONS / f"{lesson}_solutions.ipynb").read_text(encoding="utf-8"))
    title = nb["cells"][0]["source"]
    if title and title[0].rstrip("\n").endswith(TITLE_SUFFIX):
        title[0] = title[0].replace(TITLE_SUFFIX, "", 1)
    graded = 0
    for n, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        cell_id = cell.get("id") or str(n)
        call = _CHECK_CALL.match(source.strip())
        if BEGIN in source:
            cell["metadata"]["nbgrader"] = _meta(f"answer-{cell_id}", solution=True, grade=False)
        elif call:
            graded += 1
            points = LONG_POINTS if call["name"] in LONG_EXERCISES else POINTS
            cell["source"] = [f"assert {source.strip()}, \"{call['name']} found a problem: its message is above\""]
            cell["metadata"]["nbgrader"] = _meta(f"check-{cell_id}", solution=False, grade=True, points=points)
    if not graded:
        raise SystemExit(f"{lesson}: no check cell (course.check.check_...(...)) to grade")
    return nb


def _api(course_dir: Path):
    try:
        from nbgrader.apps import NbGraderAPI
        from traitlets.config import Config
    except ImportError as exc:
        raise SystemExit(f"nbgrader is not installed ({exc}); install the instructor extra: "
                         "pip install -e '.[instructor]'") from exc
    scripts = str(Path(sys.executable).parent)       # nbgrader runs `alembic` from PATH: use this Python's
    if scripts not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")
    config = Config()
    config.CourseDirectory.root = str(course_dir.resolve())
    config.ExecutePreprocessor.timeout = 600           # a lesson's measurement cells take seconds each
    config.Execute.timeout = 600
    return NbGraderAPI(config=config)


def release(names: list[str] | None, course_dir: Path) -> list[Path]:
    """Write ``source/`` from the solutions notebooks, then run nbgrader's generate_assignment into ``release/``."""
    api = _api(course_dir)
    out = []
    for lesson in lessons(names):
        src = course_dir / "source" / lesson / f"{lesson}.ipynb"
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_text(json.dumps(source_notebook(lesson), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        result = api.generate_assignment(lesson, force=True, create=True)
        if not result["success"]:
            raise SystemExit(f"nbgrader could not release {lesson}:\n{result.get('log', '')}\n"
                             f"{result.get('error', '')}")
        out.append(course_dir / "release" / lesson / f"{lesson}.ipynb")
        print(f"released {lesson}: {out[-1].relative_to(course_dir)}")
    return out


def autograde(names: list[str] | None, course_dir: Path) -> list[dict]:
    """Autograde every ``submitted/<student>/<lesson>/`` and write ``grades.csv``; returns its rows."""
    api = _api(course_dir)
    from nbgrader.api import Gradebook, MissingEntry

    rows = []
    for lesson in lessons(names):
        if not (course_dir / "source" / lesson).is_dir():
            raise SystemExit(f"{lesson} was never released here: run `release {lesson}` first")
        students = sorted(p.parent.name for p in (course_dir / "submitted").glob(f"*/{lesson}") if p.is_dir())
        for student in students:
            result = api.autograde(lesson, student, force=True, create=True)
            if not result["success"]:
                raise SystemExit(f"nbgrader could not grade {student}/{lesson}:\n"
                                 f"{result.get('log', '')}\n{result.get('error', '')}")
    with Gradebook(api.coursedir.db_url) as gb:
        for lesson in lessons(names):
            for student in sorted(p.parent.name for p in (course_dir / "submitted").glob(f"*/{lesson}")):
                try:
                    sub = gb.find_submission(lesson, student)
                except MissingEntry:
                    continue
                rows.append({"lesson": lesson, "student": student, "score": sub.score, "max_score": sub.max_score})
                print(f"{lesson:28s} {student:20s} {sub.score:g} / {sub.max_score:g}")
    with open(course_dir / "grades.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["lesson", "student", "score", "max_score"])
        writer.writeheader()
        writer.writerows(rows)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["release", "autograde", "clean"])
    parser.add_argument("lessons", nargs="*", help="lesson numbers or names (default: every lesson 01-09)")
    parser.add_argument("--course-dir", type=Path, default=ROOT / "build" / "nbgrader",
                        help="nbgrader's course directory (default: build/nbgrader)")
    args = parser.parse_args(argv)
    if args.command == "clean":
        shutil.rmtree(args.course_dir, ignore_errors=True)
    elif args.command == "release":
        release(args.lessons, args.course_dir)
    else:
        autograde(args.lessons, args.course_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
