"""Notebooks are stored without outputs, and each one offers the Colab install cell."""

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
