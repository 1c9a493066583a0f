"""One meaning per name, plumbing written once, and one reading order per lesson folder.

"check" means an exercise check (``course.check.<name>``, kept in each lesson's ``checks.py``); what the
checks share is :mod:`course.grading`; input validation is ``validate_*`` / ``require_*``; the GPU machine's
end-to-end run is :mod:`course.gpu_machine` (the ``gpu-check`` command).  Each lesson folder's modules are
named in one reading order by its ``__init__`` docstring and by the README's layout section.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COURSE = ROOT / "course"
#: Names the course no longer uses, and what replaced them.
RETIRED_MODULES = {"checking": "grading", "gpu_check": "gpu_machine", "stream": "memory_bandwidth",
                   "peers": "torch_peer"}
#: Folders whose reading order the README and the package docstring both give.
FOLDERS = sorted({p.parent.name for p in COURSE.glob("*/experiments.py")} | {"kernels"})


def _python_files() -> list[Path]:
    return sorted(p for d in ("course", "tests", "benchmarks", "tools") for p in (ROOT / d).rglob("*.py"))


def _trees() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text(encoding="utf-8")) for p in sorted(COURSE.rglob("*.py"))}


# ----------------------------------------------------------------------------- one meaning per name

def test_no_spine_module_keeps_a_retired_name():
    for old, new in RETIRED_MODULES.items():
        assert not (COURSE / f"{old}.py").exists(), f"course/{old}.py is course/{new}.py now"


def test_nothing_imports_a_retired_module():
    pattern = re.compile(r"\bcourse\.(" + "|".join(RETIRED_MODULES) + r")\b|from \.\.?(" + "|".join(RETIRED_MODULES)
                         + r") import")
    texts = {p: p.read_text(encoding="utf-8") for p in _python_files()}
    texts |= {p: p.read_text(encoding="utf-8") for p in sorted((ROOT / "notebooks").rglob("*.ipynb"))}
    texts |= {ROOT / n: (ROOT / n).read_text(encoding="utf-8") for n in ("README.md", "INSTRUCTORS.md")}
    stale = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p, t in texts.items() for m in pattern.finditer(t)
             if p.name != "test_names.py"]
    assert not stale, f"these still name a retired module: {stale}"


def test_only_exercise_checks_are_called_check():
    """A function named ``check_*`` is an exercise check, defined in a lesson's ``checks.py``."""
    wrong = [f"{p.relative_to(ROOT)}:{n.lineno} {n.name}" for p, tree in _trees().items() if p.name != "checks.py"
             for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
             and re.match(r"_?check_", n.name) and not n.name.startswith("check_kernel")]
    assert not wrong, f"validation is validate_*/require_*; check_* is an exercise check only: {wrong}"


def test_the_exercise_checks_are_in_checks_files_and_named_check():
    import course.check

    assert course.check.__all__ and all(n.startswith("check_") for n in course.check.__all__)


def test_the_gpu_check_command_still_runs_the_gpu_machine():
    text = (COURSE / "__main__.py").read_text(encoding="utf-8")
    assert '"gpu-check"' in text and "from .gpu_machine import" in text


# ----------------------------------------------------------------------------- plumbing written once

def test_one_helper_for_the_array_namespace():
    offenders = [str(p.relative_to(ROOT)) for p in _python_files()
                 if "get_xp(array_device(" in p.read_text(encoding="utf-8") and p.name != "test_names.py"]
    assert not offenders, f"use course.devices.xp_of(x): {offenders}"
    defs = [p for p, tree in _trees().items() for n in tree.body
            if isinstance(n, ast.FunctionDef) and n.name == "xp_of"]
    assert [p.relative_to(ROOT).as_posix() for p in defs] == ["course/devices.py"]


@pytest.mark.parametrize("name", ["_cuda", "numba_cuda", "simulator_enabled", "kernels_unavailable_reason",
                                  "gpu_kernels_available"])
def test_the_numba_cuda_plumbing_is_written_once_in_the_spine(name):
    defs = [p.relative_to(ROOT).as_posix() for p, tree in _trees().items() for n in tree.body
            if isinstance(n, ast.FunctionDef) and n.name == name]
    assert defs == ([] if name == "_cuda" else ["course/kernel_runtime.py"]), defs


def test_the_kernel_lessons_ask_the_spine_whether_numba_cuda_runs():
    for rel in ("scan/kernels.py", "recurrences/kernels.py", "kernels/simulator.py"):
        text = (COURSE / rel).read_text(encoding="utf-8")
        assert "from ..kernel_runtime import" in text and "from ..scan" not in text, rel


@pytest.mark.parametrize("module, table", [("course.kernels.exercises", "EXERCISES"),
                                           ("course.kernels.tuning", "TUNINGS")])
def test_exercises_are_declared_by_keyword(module, table):
    path = COURSE / (module.removeprefix("course.").replace(".", "/") + ".py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and n.func.id in ("Exercise", "Tuning")]
    assert calls, f"{module} declares no exercise"
    for c in calls:
        assert not c.args, f"{module}:{c.lineno}: declare each field by name"
        assert not any(isinstance(k.value, ast.Lambda) for k in c.keywords), f"{module}:{c.lineno}: no lambdas"
    import importlib

    spec = getattr(importlib.import_module(module), table)
    cls = type(next(iter(spec.values())))
    assert cls.__dataclass_params__.frozen and cls.__dataclass_fields__["name"].kw_only


def test_each_gpu_target_bound_is_written_once():
    from course import gpu_machine

    assert 0 < gpu_machine.BLOCK_SCAN_VS_CUMSUM < 1 and 0 < gpu_machine.RELU_VS_COPY < 1
    assert f"{gpu_machine.BLOCK_SCAN_VS_CUMSUM:.0%}" in gpu_machine.TARGETS["block_scan_vs_cumsum"]
    assert f"{gpu_machine.RELU_VS_COPY:.0%}" in gpu_machine.TARGETS["relu_vs_copy"]
    for rel, name in (("benchmarks/bench_scan.py", "BLOCK_SCAN_VS_CUMSUM"),
                      ("benchmarks/bench_vectorize.py", "RELU_VS_COPY"), ("course/gpu_machine.py", None)):
        text = (ROOT / rel).read_text(encoding="utf-8")
        code = "\n".join(line.split("#")[0] for line in text.splitlines())
        assert not re.search(r"(>=|<=|, )\s*0\.(5|85)\b(?!\d)", code), f"{rel} types a target bound in"
        if name:
            assert f"from course.gpu_machine import {name}" in text, rel


# ----------------------------------------------------------------------------- one reading order per folder

def _readme_orders() -> dict[str, list[str]]:
    block = (ROOT / "README.md").read_text(encoding="utf-8").split("## Layout", 1)[1].split("```", 2)[1]
    orders: dict[str, list[str]] = {}
    current, indent = None, ""
    for line in block.splitlines():
        m = re.match(r"^  (?P<name>[a-z_]+)/\s+(?P<lesson>\d\d\s)?", line)
        if m:
            current, indent = m["name"], " " * (23 if m["lesson"] else 19)   # a lesson's line, or the kernels'
            orders[current] = []
        elif not line.startswith(indent) or line[len(indent):len(indent) + 1] in ("", " "):
            current = None
        if current:
            for name in re.findall(r"\b([a-z_]+)\.py\b", line):
                if name not in orders[current]:
                    orders[current].append(name)
    return orders


def _docstring_order(folder: str) -> list[str]:
    doc = ast.get_docstring(ast.parse((COURSE / folder / "__init__.py").read_text(encoding="utf-8"))) or ""
    order: list[str] = []
    for name in re.findall(r":mod:`~?course\." + folder + r"\.([a-z_]+)`", doc):
        if name not in order:
            order.append(name)
    return order


@pytest.mark.parametrize("folder", FOLDERS)
def test_a_folders_docstring_and_the_readme_give_one_reading_order(folder):
    modules = {p.stem for p in (COURSE / folder).glob("*.py")} - {"__init__"}
    doc, readme = _docstring_order(folder), _readme_orders().get(folder, [])
    assert set(doc) == modules, (f"course/{folder}/__init__'s docstring: name {sorted(modules - set(doc))}, "
                                 f"drop {sorted(set(doc) - modules)}")
    assert doc == readme, f"course/{folder}/: the docstring reads {doc}, the README's layout {readme}"


@pytest.mark.parametrize("notebook", sorted((ROOT / "notebooks").glob("0*.ipynb")), ids=lambda p: p.stem)
def test_every_module_a_notebook_names_exists(notebook):
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    text = "\n".join("".join(c["source"]) for c in cells)
    named = set(re.findall(r"\bcourse[./](" + "|".join(FOLDERS) + r")[./]([a-z_]+)\b", text))
    missing = sorted(f"course.{f}.{m}" for f, m in named
                     if not (COURSE / f / f"{m}.py").exists() and not hasattr(__import__(f"course.{f}",
                                                                                           fromlist=["_"]), m))
    assert not missing, f"{notebook.name} names modules the course does not have: {missing}"
