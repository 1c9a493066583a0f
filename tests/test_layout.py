"""The package's layout, checked: one folder per lesson, no import cycle, no private name crossing a module.

The imports are read from the source with :mod:`ast` (every ``import`` and ``from ... import``,
including those inside functions), so the check sees what a reader sees, whether or not the import
ever runs.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "course"

LESSONS = {"hardware": "00", "backprop": "01", "vectorize": "02", "throughput": "03", "scan": "04",
           "bppsa": "05", "parallel": "06", "recurrences": "07", "attention": "08",
           "gemm": "09"}
#: The spine; ``report``, ``check``, ``gpu_machine`` and ``__main__`` gather the lessons at run time.
SPINE = {"__init__", "__main__", "errors", "cpu", "devices", "limits", "threads", "timing", "results", "plots",
         "widgets", "report", "check", "grading", "torch_peer", "memory_bandwidth", "gpu_machine", "predictions",
         "cuda_c", "kernel_runtime", "legends", "takeaways", "arguments", "counting", "standin", "standin_cuda",
         "capture", "timeline", "timeline_plots", "lead_spin", "environment", "measurement"}
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


def _import_statements(name: str):
    """Yield (module, the names taken from it or None for ``import module``, line) for every import in
    ``name``, third-party ones too, relative imports resolved."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    package = name if _is_package(name) else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            yield mod, [alias.name for alias in node.names], node.lineno


def _imports(name: str):
    """Yield (imported module, imported name or None, line) for each import of a course module."""
    for mod, names, line in _import_statements(name):
        if mod.split(".")[0] != "course":
            continue
        if names is None:
            yield mod, None, line
        for n in names or ():
            sub = f"{mod}.{n}"
            yield (sub, None, line) if sub in MODULES else (mod, n, line)


def test_one_folder_per_lesson_and_a_small_spine():
    top = {p.stem for p in PKG.glob("*.py")}
    assert top <= SPINE, f"modules at the top of course/ that belong in a lesson's folder: {sorted(top - SPINE)}"
    for lesson in LESSONS:
        assert (PKG / lesson / "__init__.py").is_file(), f"lesson folder course/{lesson}/ is missing"
    for lesson in set(LESSONS) - {"hardware"}:
        assert (PKG / lesson / "checks.py").is_file(), f"course/{lesson}/ has no checks.py"
    for lesson in LESSONS:      # the shape the README promises every lesson: its figures, apps and experiments
        for room in ("plots.py", "widgets.py", "experiments.py"):
            assert (PKG / lesson / room).is_file(), f"course/{lesson}/ has no {room}"


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


#: Where a lesson's apparatus lives: only these modules draw (matplotlib, ipywidgets, tqdm, course.plots,
#: course.widgets, or a lesson's own plots/widgets/experiments).
DRAWING_ROOMS = {"plots", "widgets", "experiments"}
#: In the lessons whose subject is an algorithm, only these also measure (course.timing and course.measurement,
#: course.torch_peer, course.results and course.environment, course.report): a lesson's timing.py, lesson 01's
#: benchmark code (bench.py), the exercise checks (checks.py), which time a learner's function where the
#: exercise is about speed, and lesson 01's readers (readers.py), which turn recorded result sets into tables and
#: sentences.  A room split by job keeps the room's name last: ``ladder_plots.py`` is a plots room.
MEASURING_ROOMS = DRAWING_ROOMS | {"timing", "bench", "checks", "readers"}
#: The lessons whose subject is measurement (00: this machine, 03: latency and throughput): any module may
#: time, none but the drawing rooms may draw.
MEASURING_LESSONS = {"hardware", "throughput"}
DRAWING = ("matplotlib", "ipywidgets", "tqdm", "course.plots", "course.widgets")
MEASURING = ("course.timing", "course.measurement", "course.torch_peer", "course.results", "course.environment",
             "course.report")
def _all_imports(name: str):
    """Yield (module, line) for every import of ``name``, third-party ones too (``from a import b`` yields
    ``a`` and ``a.b``)."""
    for mod, names, line in _import_statements(name):
        yield mod, line
        for n in names or ():
            yield f"{mod}.{n}", line


def _room(module: str) -> str:
    """The room of a module's last name: itself, or the room it ends with (``ladder_plots`` -> ``plots``)."""
    last = module.rsplit(".", 1)[-1]
    suffix = last.rsplit("_", 1)[-1]
    return suffix if last not in MEASURING_ROOMS and suffix in MEASURING_ROOMS else last


def _apparatus(name: str) -> dict[str, int]:
    """What apparatus ``name`` imports that its room does not allow: {what: line}."""
    parts = name.split(".")
    lesson, room = parts[1], _room(name)
    if room in DRAWING_ROOMS or name == f"course.{lesson}":
        return {}
    measuring = lesson in MEASURING_LESSONS or room in MEASURING_ROOMS
    found = {}
    for mod, line in _all_imports(name):
        for root in DRAWING + (() if measuring else MEASURING):
            if mod == root or mod.startswith(root + "."):
                found.setdefault(root, line)
        bits = mod.split(".")
        if len(bits) >= 3 and bits[0] == "course" and bits[1] != lesson and _room(bits[2]) in DRAWING_ROOMS:
            found.setdefault(".".join(bits[:3]), line)       # another lesson's figures or apps
        elif len(bits) >= 3 and bits[:2] == ["course", lesson] and _room(bits[2]) in DRAWING_ROOMS:
            found.setdefault(".".join(bits[:3]), line)       # this lesson's
    return found


def _lesson_modules() -> list[str]:
    return [n for n in MODULES if n.split(".")[1:2] and (PKG / n.split(".")[1]).is_dir()]


def test_apparatus_stays_in_its_rooms():
    """Figures and apps only in plots/widgets/experiments; in an algorithm lesson, measurement only in
    timing/bench as well: the module a learner opens reads as the algorithm."""
    bad = []
    for name in _lesson_modules():
        bad += [f"{name} line {line} imports {what}" for what, line in sorted(_apparatus(name).items())]
    assert not bad, "apparatus outside its rooms (move it to the lesson's plots/widgets/timing):\n" + "\n".join(bad)


def _private_calls(path: Path) -> list[str]:
    """``obj._method(...)`` where obj is neither ``self``/``cls``/``super()`` nor a standard-library module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    stdlib = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
              for alias in node.names if not alias.name.startswith("course")}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        attr, owner = node.func.attr, node.func.value
        if not attr.startswith("_") or attr.startswith("__"):
            continue
        if isinstance(owner, ast.Name) and owner.id in {"self", "cls"} | stdlib:
            continue
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
            continue
        found.append(f"line {node.lineno}: {ast.unparse(node.func)}()")
    return found


def test_no_module_calls_a_private_method_of_another_object():
    """A private method is its class's own business: other modules use the public API (``model._forward``
    from a training loop would tie the loop to the model's insides)."""
    found = [f"{name} {hit}" for name, path in MODULES.items() for hit in _private_calls(path)]
    assert not found, "private methods called from outside their class:\n" + "\n".join(found)


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
    (tmp_path / "course" / "a" / "z.py").write_text("import matplotlib\nfrom ..timing import benchmark\n"
                                                    "def f(model):\n    return model._forward(1)\n")
    monkeypatch.setattr(__import__("sys").modules[__name__], "MODULES", _modules())
    assert set(_apparatus("course.a.z")) == {"matplotlib", "course.timing"}
    assert _private_calls(tmp_path / "course" / "a" / "z.py") == ["line 4: model._forward()"]


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


#: Modules that are not the algorithm a learner reads: the rooms above, the exercise checks, lesson 01's
#: validators.
NOT_ALGORITHM = MEASURING_ROOMS | {"validate", "__init__"}
#: What a validation is: a call to one of these, or an ``if ...: raise`` (a bare ``raise`` too).
VALIDATION_CALL = re.compile(r"^_?(validate_\w*|require_\w*|validate|whole_number|random_generator)$")


def _is_validation(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Raise) or isinstance(stmt, ast.If) and any(isinstance(s, ast.Raise) for s in stmt.body):
        return True
    if not isinstance(stmt, ast.Expr | ast.Assign | ast.AnnAssign):
        return False
    return any(isinstance(n, ast.Call) and VALIDATION_CALL.match(getattr(n.func, "id", getattr(n.func, "attr", "")))
               for n in ast.walk(stmt.value))


def _openings(path: Path) -> list[tuple[str, int, int]]:
    """(public function or method, line, validation statements it opens with) for each in ``path``."""
    out = []

    def visit(body, prefix=""):
        for node in body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                visit(node.body, node.name + ".")
            elif (isinstance(node, ast.FunctionDef) and (node.name == "__init__" or not node.name.startswith("_"))
                  and not VALIDATION_CALL.match(node.name)):
                stmts = node.body[1:] if ast.get_docstring(node) is not None else node.body
                k = next((i for i, s in enumerate(stmts) if not _is_validation(s)), len(stmts))
                out.append((prefix + node.name, node.lineno, k))

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return out


@pytest.mark.parametrize("folder", sorted(set(LESSONS) | {"kernels"}))
def test_an_algorithm_function_opens_with_at_most_one_validation(folder):
    """Validation at the door: a public function of a module a learner reads opens with at most one
    validation (one ``validate_*`` call, or none, its rules declared above it with ``@arguments``), so the
    body reads as the algorithm."""
    bad = [f"{path.relative_to(ROOT)}:{line} {name} opens with {k} validations"
           for path in sorted((PKG / folder).glob("*.py")) if path.stem not in NOT_ALGORITHM
           for name, line, k in _openings(path) if k > 1]
    assert not bad, ("declare the rules with course.arguments.arguments (or gather them in one validate_* "
                     "function):\n" + "\n".join(bad))


def test_the_opening_count_sees_validations(tmp_path):
    (tmp_path / "m.py").write_text('def f(n, p):\n    """Doc."""\n    n = whole_number("n", n)\n'
                                   '    if p > n:\n        raise ValueError("p")\n    return n\n\n'
                                   '@arguments(n=Whole())\ndef g(n):\n    return n\n')
    assert _openings(tmp_path / "m.py") == [("f", 1, 2), ("g", 9, 0)]
