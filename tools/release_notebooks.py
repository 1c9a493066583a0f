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
"""

from __future__ import annotations

import argparse
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
    stale = []
    for sol in sorted(SOLUTIONS.glob("*_solutions.ipynb")):
        stem = sol.name.removesuffix("_solutions.ipynb")
        text = _dump(release(json.loads(sol.read_text(encoding="utf-8")), sol.name, stem))
        target = lesson_path(sol)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            stale.append(target.relative_to(ROOT))
            if not args.check:
                target.write_text(text, encoding="utf-8")
    if args.check and stale:
        print("out of step with their solutions notebooks (run python tools/release_notebooks.py):",
              *stale, sep="\n  ", file=sys.stderr)
        return 1
    if not args.check:
        print(f"released {len(stale)} lesson notebook(s)" + ("" if stale else ": all were in step"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
