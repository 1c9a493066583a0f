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
