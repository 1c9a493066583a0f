"""README.md's layout section names exactly the modules each lesson folder holds."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _layout_modules() -> dict[str, set[str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    folders: dict[str, set[str]] = {}
    current = None
    for line in block.splitlines():
        m = re.match(r"^  (?P<name>[a-z_]+)/\s+\d\d\s", line)
        if m:
            current = m["name"]
            folders[current] = set()
        elif not line.startswith("                       "):  # not a continuation of a lesson's line
            current = None
        if current:
            folders[current] |= set(re.findall(r"\b([a-z_]+\.py)\b", line))
    return folders


def test_the_readme_layout_lists_every_module_of_every_lesson_folder():
    listed = _layout_modules()
    lessons = sorted(p.parent.name for p in (ROOT / "course").glob("*/experiments.py"))
    assert sorted(listed) == lessons, "the README's layout should have one line per lesson folder"
    for name, modules in listed.items():
        actual = {p.name for p in (ROOT / "course" / name).glob("*.py")} - {"__init__.py"}
        assert modules == actual, (f"README's layout for course/{name}/: missing {sorted(actual - modules)}, "
                                   f"not there {sorted(modules - actual)}")
