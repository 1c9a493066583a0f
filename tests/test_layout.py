"""The package's layout, checked: one folder per lesson, no import cycle, no private name crossing a module.

The imports are read from the source with :mod:`ast` (every ``import`` and ``from ... import``,
including those inside functions), so the check sees what a reader sees, whether or not the import
ever runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "course"

LESSONS = {"hardware": "00", "backprop": "01", "vectorize": "02", "throughput": "03", "scan": "04",
           "bppsa": "05", "parallel": "06", "recurrences": "07"}
#: The spine; ``report``, ``check``, ``gpu_machine`` and ``__main__`` gather the lessons at run time.
SPINE = {"__init__", "__main__", "errors", "cpu", "devices", "limits", "threads", "timing", "results", "plots",
         "widgets", "report", "check", "grading", "torch_peer", "memory_bandwidth", "gpu_machine", "predictions",
         "cuda_c", "kernel_runtime", "legends", "takeaways"}
GATHERERS = {"course.__main__", "course.gpu_machine"}
#: The one place a lesson reaches forward, on purpose: lesson 03's roofline can place lesson 04's
#: scan among its points (imported only when that point is asked for).
FORWARD = {("course.throughput.roofline", "course.scan.algorithms")}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _imports(name: str):
    """Yield (imported module, imported name or None, line) for each import of a course module."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    package = name if _is_package(name) else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "course":
                    yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "course":
                continue
            for alias in node.names:
                sub = f"{mod}.{alias.name}"
                if sub in MODULES:
                    yield sub, None, node.lineno
                else:
                    yield mod, alias.name, node.lineno


def test_one_folder_per_lesson_and_a_small_spine():
    top = {p.stem for p in PKG.glob("*.py")}
    assert top <= SPINE, f"modules at the top of course/ that belong in a lesson's folder: {sorted(top - SPINE)}"
    for lesson in LESSONS:
        assert (PKG / lesson / "__init__.py").is_file(), f"lesson folder course/{lesson}/ is missing"
    for lesson in set(LESSONS) - {"hardware"}:
        assert (PKG / lesson / "checks.py").is_file(), f"course/{lesson}/ has no checks.py"
    for lesson in LESSONS:
        assert (PKG / lesson / "experiments.py").is_file(), f"course/{lesson}/ has no experiments.py"


def test_no_package_exports_a_name_its_submodule_has():
    """``import course.x.y as m`` must give the module y, not a function y that the package re-exports."""
    import importlib
    import pkgutil

    clashes = []
    for name, path in MODULES.items():
        if path.name == "__init__.py" and name != "course":   # course's __all__ lists its lessons on purpose
            subs = {m.name for m in pkgutil.iter_modules([str(path.parent)])}
            exported = set(getattr(importlib.import_module(name), "__all__", []))
            clashes += [f"{name}.{s}" for s in sorted(subs & exported)]
    assert not clashes, "a package's export hides its submodule of the same name: " + ", ".join(clashes)


def test_no_private_name_is_imported_from_another_module():
    crossings = [f"{name} line {line}: from {mod} import {what}"
                 for name in MODULES for mod, what, line in _imports(name)
                 if (what or "").startswith("_") or mod.rpartition(".")[2].startswith("_")]
    assert not crossings, "private names used outside their module:\n" + "\n".join(crossings)


def test_no_private_attribute_of_another_module_is_used():
    found = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if node.level or (node.module or "").startswith("course"):
                        aliases.add(alias.asname or alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("course"):
                        aliases.add(alias.asname or alias.name.split(".")[0])
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and isinstance(node.value, ast.Name) and node.value.id in aliases):
                found.append(f"{name} line {node.lineno}: {node.value.id}.{node.attr}")
    assert not found, "private attributes of other modules:\n" + "\n".join(found)


def test_the_spine_imports_no_lesson():
    bad = [f"{name} line {line} imports {mod}" for name in MODULES
           if MODULES[name].parent == PKG and name not in GATHERERS
           for mod, _, line in _imports(name) if mod.split(".")[1:2] and mod.split(".")[1] in LESSONS]
    assert not bad, "\n".join(bad)


def _cycle():
    graph = {name: sorted({mod for mod, _, _ in _imports(name) if mod in MODULES and mod != name})
             for name in MODULES}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in graph:
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_cycle():
    cycle = _cycle()
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize("lesson", sorted(LESSONS))
def test_a_lesson_imports_only_earlier_lessons(lesson):
    order = sorted(LESSONS, key=LESSONS.get)
    later = set(order[order.index(lesson) + 1:])
    bad = [f"{name} line {line} imports {mod}" for name in MODULES if name.split(".")[1:2] == [lesson]
           for mod, _, line in _imports(name) if mod.split(".")[1:2] and mod.split(".")[1] in later
           and (name, mod) not in FORWARD]
    assert not bad, "\n".join(bad)


def test_the_checks_catch_what_they_look_for(tmp_path, monkeypatch):
    """The checks above can fail: a cycle and a private import planted in a fake package are found."""
    (tmp_path / "course" / "a").mkdir(parents=True)
    (tmp_path / "course" / "__init__.py").write_text("")
    (tmp_path / "course" / "a" / "__init__.py").write_text("")
    (tmp_path / "course" / "a" / "x.py").write_text("from .y import _hidden\n")
    (tmp_path / "course" / "a" / "y.py").write_text("def f():\n    from . import x\n")
    monkeypatch.setattr(__import__("sys").modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(__import__("sys").modules[__name__], "PKG", tmp_path / "course")
    monkeypatch.setattr(__import__("sys").modules[__name__], "MODULES", _modules())
    assert _cycle() == ["course.a.x", "course.a.y", "course.a.x"]
    with pytest.raises(AssertionError, match="_hidden"):
        test_no_private_name_is_imported_from_another_module()


def test_every_exercise_check_is_named_check_something_and_found_lazily():
    import subprocess
    import sys

    import course.check

    assert course.check.__all__, "no exercise checks found"
    odd = [n for n in course.check.__all__ if not n.startswith("check_")]
    assert not odd, f"exercise checks not named check_<what>: {odd}"
    code = "import sys, course.check; print(sorted(m for m in sys.modules if m.endswith('.checks')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.stdout.strip() == "[]", "importing course.check imported a lesson's checks: " + out.stdout + out.stderr
