"""Make each lesson notebook from its solutions notebook: one source for both.

The solutions notebook (``notebooks/solutions/NN_name_solutions.ipynb``) is the source.  In it,
the worked answer of every exercise sits between nbgrader's solution markers::

    def my_leaky_relu(x, slope=0.01):
        \"\"\"Leaky ReLU ...\"\"\"
        ### BEGIN SOLUTION
        return np.where(x > 0, x, x * x.dtype.type(slope))
        ### END SOLUTION

The lesson notebook (``notebooks/NN_name.ipynb``) is that notebook with each marked block
replaced by a stub at the same indentation (``raise NotImplementedError  # your code here``),
with " — solutions" taken off its title, and without outputs.  Everything else is the same, cell
for cell, so a change is made once, in the solutions notebook, and this script carries it over:

    python tools/release_notebooks.py          # rewrite every lesson notebook
    python tools/release_notebooks.py --check  # exit 1 and name the notebooks that are out of step

``tests/test_notebooks_format.py`` runs the check, so a lesson notebook edited by hand, or a
solutions notebook changed without releasing it, fails the tests.

A code cell tagged ``lesson-only`` (cell metadata ``tags``) is one the test suite runs in the
lesson notebook only: the solutions notebook repeats the lesson's measurements cell for cell, and
running each costly measurement twice doubles the suite's time without testing anything new.  A
learner running the solutions notebook still runs every cell.  The tag is allowed only where
skipping the cell cannot change what the notebook's other cells do: ``lesson_only_problems``
checks, by reading the cells' source, that a tagged cell holds no exercise or exercise check and
defines (assigns, imports, or changes by item or attribute) no name that a later cell reads
before assigning it itself.  ``--check`` reports a tag that breaks this rule.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "notebooks" / "solutions"
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = "raise NotImplementedError  # your code here"
TITLE_SUFFIX = " — solutions"
_MARKER = re.compile(r"^(?P<indent>[ \t]*)### (?P<which>BEGIN|END) SOLUTION[ \t]*$")


LESSON_ONLY = "lesson-only"


class ReleaseError(ValueError):
    """A solutions notebook whose markers don't pair up, or whose title lacks the suffix."""


def strip_solutions(source: str, where: str = "") -> str:
    """``source`` with every BEGIN/END SOLUTION block replaced by a stub at the block's indentation."""
    out, indent, inside = [], "", False
    for n, line in enumerate(source.split("\n"), 1):
        m = _MARKER.match(line)
        if m and m["which"] == "BEGIN":
            if inside:
                raise ReleaseError(f"{where} line {n}: {BEGIN} inside another solution block")
            inside, indent = True, m["indent"]
            out.append(indent + STUB)
        elif m:
            if not inside:
                raise ReleaseError(f"{where} line {n}: {END} without a {BEGIN}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ReleaseError(f"{where}: a {BEGIN} block is never closed")
    return "\n".join(out)


class _Names(ast.NodeVisitor):
    """The names one cell defines, the names it reads before defining them itself (in evaluation
    order), and the names it surely defines at its top level (not inside a branch or a loop)."""

    def __init__(self) -> None:
        self.defines: set[str] = set()
        self.free: set[str] = set()
        self.bound: list[set[str]] = [set()]  # names surely bound at this point, one set per block

    def _bind(self, name: str) -> None:
        self.defines.add(name)
        self.bound[-1].add(name)

    def _read(self, name: str) -> None:
        if not any(name in b for b in self.bound):
            self.free.add(name)

    def _block(self, stmts, bind: tuple[str, ...] = ()) -> None:
        self.bound.append(set(bind))  # what a branch or a loop body binds may never be bound
        for s in stmts:
            self.visit(s)
        self.bound.pop()

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self._read(node.id)
        else:
            self._bind(node.id)

    def _changed(self, node: ast.expr) -> None:  # x[i] = ..., x.a = ...: x is changed, not bound
        base = node
        while isinstance(base, (ast.Attribute, ast.Subscript, ast.Starred)):
            base = base.value
        if isinstance(base, ast.Name):
            self.defines.add(base.id)
            self._read(base.id)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute | ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Load):
            self.generic_visit(node)
        else:
            self._changed(node)

    visit_Subscript = visit_Attribute

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for t in node.targets:
            self.visit(t)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        if isinstance(node.target, ast.Name):
            self._read(node.target.id)
        self.visit(node.target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self.visit(node.target)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self.visit(node.target)

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for a in node.names:
            self._bind((a.asname or a.name).split(".")[0])

    visit_ImportFrom = visit_Import

    def _function(self, node, name: str | None) -> None:
        args = node.args
        for d in [*args.defaults, *args.kw_defaults, *getattr(node, "decorator_list", [])]:
            if d is not None:
                self.visit(d)
        local = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}
        inner = _Names()  # the body runs later, in its own scope: what it reads from outside is read
        inner.bound = [set(local)]
        for s in node.body if isinstance(node.body, list) else [node.body]:
            inner.visit(s)
        for n in inner.free:
            self._read(n)
        if name:
            self._bind(name)

    def visit_FunctionDef(self, node) -> None:
        self._function(node, node.name)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._function(node, None)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for d in [*node.bases, *node.decorator_list]:
            self.visit(d)
        self._block(node.body)
        self._bind(node.name)

    def _comprehension(self, node) -> None:
        inner = _Names()
        inner.bound = [set()]
        for k, gen in enumerate(node.generators):
            (self if k == 0 else inner).visit(gen.iter)  # the first iterable is read outside
            inner.visit(gen.target)
            for cond in gen.ifs:
                inner.visit(cond)
        for part in ("elt", "key", "value"):
            if hasattr(node, part):
                inner.visit(getattr(node, part))
        for n in inner.free:
            self._read(n)

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self.bound.append(set())
        self.visit(node.target)
        for s in node.body:
            self.visit(s)
        self.bound.pop()
        self._block(node.orelse)

    visit_AsyncFor = visit_For

    def visit_While(self, node: ast.While) -> None:
        self.visit(node.test)
        self._block(node.body)
        self._block(node.orelse)

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        self._block(node.body)
        self._block(node.orelse)

    def visit_Try(self, node: ast.Try) -> None:
        self._block(node.body)
        for h in node.handlers:
            self._block(h.body, (h.name,) if h.name else ())
            if h.name:
                self.defines.add(h.name)
        self._block(node.orelse)
        self._block(node.finalbody)

    visit_TryStar = visit_Try

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self.visit(item.optional_vars)
        for s in node.body:
            self.visit(s)

    visit_AsyncWith = visit_With

    def visit_Global(self, node: ast.Global) -> None:
        self.defines.update(node.names)


def cell_names(source: str) -> tuple[set[str], set[str], set[str]]:
    """(defines, reads before defining, surely binds at top level) of one code cell's source;
    IPython's ``%magic`` and ``!shell`` lines count as reading and defining nothing."""
    lines = [(ln[: len(ln) - len(ln.lstrip())] + "pass") if ln.lstrip().startswith(("%", "!")) else ln
             for ln in source.split("\n")]
    visitor = _Names()
    for stmt in ast.parse("\n".join(lines)).body:
        visitor.visit(stmt)
    return visitor.defines, visitor.free, visitor.bound[0]


def lesson_only_problems(nb: dict, where: str = "") -> list[str]:
    """Why each ``lesson-only`` cell of notebook ``nb`` could not be skipped safely (empty: all can).

    A tagged cell may hold no exercise (a solution block) and no exercise check (``check.``), may
    use no name an exercise cell defines (the solutions notebook runs the answers), and may define
    no name that a later untagged cell reads before that cell, or an untagged one between them,
    binds it again (tagged cells do not run in the solutions notebook: what they read or bind does
    not count).  Reading the source cannot see everything (a method that changes its object in
    place, ``x.append(1)``, counts as a read only): keep the tag for cells that measure and show."""
    code = [(k, "".join(c["source"]), LESSON_ONLY in c.get("metadata", {}).get("tags", []))
            for k, c in enumerate(nb["cells"]) if c["cell_type"] == "code"]
    names = [cell_names(src) for _, src, _ in code]
    answers = set().union(*[d for (_, src, _), (d, _, _) in zip(code, names) if BEGIN in src])
    problems = []
    for i, (k, src, tagged) in enumerate(code):
        if not tagged:
            continue
        if BEGIN in src or "check." in src:
            problems.append(f"{where} cell {k}: tagged {LESSON_ONLY!r} but holds an exercise or its check")
        if names[i][1] & answers:
            problems.append(f"{where} cell {k}: tagged {LESSON_ONLY!r} but uses the exercise answer "
                            f"{', '.join(sorted(names[i][1] & answers))}")
        pending = set(names[i][0])
        for j in range(i + 1, len(code)):
            if not pending:
                break
            if code[j][2]:
                continue
            read = sorted(pending & names[j][1])
            if read:
                problems.append(f"{where} cell {k}: tagged {LESSON_ONLY!r} but defines {', '.join(read)}, "
                                f"which cell {code[j][0]} reads")
            pending -= names[j][2] | set(read)
    return problems


def lesson_path(solutions: Path) -> Path:
    return ROOT / "notebooks" / solutions.name.replace("_solutions.ipynb", ".ipynb")


def release(nb: dict, where: str = "", stem: str = "") -> dict:
    """The lesson notebook made from solutions notebook ``nb`` (a dict as stored in .ipynb JSON);
    ``stem`` (``"04_blelloch_scan"``) points the title cell's Colab/Binder links at the lesson."""
    nb = copy.deepcopy(nb)
    cells = nb["cells"]
    title = "".join(cells[0]["source"]).split("\n", 1)
    if cells[0]["cell_type"] != "markdown" or not title[0].endswith(TITLE_SUFFIX):
        raise ReleaseError(f"{where}: the first cell must be the markdown title ending in {TITLE_SUFFIX!r}")
    marked = 0
    for k, cell in enumerate(cells):
        src = "".join(cell["source"])
        if k == 0:
            src = "\n".join([title[0][: -len(TITLE_SUFFIX)], *title[1:]])
            if stem:
                for sep in ("/", "%2F"):
                    src = src.replace(f"solutions{sep}{stem}_solutions.ipynb", f"{stem}.ipynb")
        elif cell["cell_type"] == "code" and BEGIN in src:
            marked += 1
            src = strip_solutions(src, f"{where} cell {k}")
        cell["source"] = src.splitlines(keepends=True)
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    if not marked:
        raise ReleaseError(f"{where}: no exercise is marked with {BEGIN} / {END}")
    return nb


def _dump(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a lesson notebook is out of step")
    args = ap.parse_args(argv)
    stale, problems = [], []
    for sol in sorted(SOLUTIONS.glob("*_solutions.ipynb")):
        stem = sol.name.removesuffix("_solutions.ipynb")
        nb = json.loads(sol.read_text(encoding="utf-8"))
        problems += lesson_only_problems(nb, sol.name)
        text = _dump(release(nb, sol.name, stem))
        target = lesson_path(sol)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            stale.append(target.relative_to(ROOT))
            if not args.check:
                target.write_text(text, encoding="utf-8")
    if problems:
        print(f"cells tagged {LESSON_ONLY!r} that the solutions notebooks cannot skip:", *problems,
              sep="\n  ", file=sys.stderr)
        return 1
    if args.check and stale:
        print("out of step with their solutions notebooks (run python tools/release_notebooks.py):",
              *stale, sep="\n  ", file=sys.stderr)
        return 1
    if not args.check:
        print(f"released {len(stale)} lesson notebook(s)" + ("" if stale else ": all were in step"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
