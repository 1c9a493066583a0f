"""The repository's address is written once (pyproject.toml); the README's badges and every notebook's
badges and Colab install cell are written from it, and a failed clone stops with one clear message."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import repository_links as links  # noqa: E402


def test_readme_and_every_notebook_take_their_links_from_the_one_url():
    stale = links.out_of_step()
    assert not stale, f"out of step with pyproject's Repository URL: {[p.name for p in stale]}; " \
                      "run python tools/repository_links.py"


def test_every_link_to_the_repository_names_the_url_in_pyproject():
    slug = links.repository_url().removeprefix("https://github.com/")
    found = 0
    for path in links.targets():
        text = path.read_text(encoding="utf-8")
        for other in re.findall(r"(?:colab\.research\.google\.com/github|mybinder\.org/v2/gh|https://github\.com)/"
                                r"([A-Za-z0-9_.-]+/[A-Za-z0-9_-]+)", text):
            found += 1
            assert other == slug, f"{path.name} links to {other}, not to {slug} (pyproject's Repository)"
    assert found >= 2 * 8 + 15                           # the README's badges, and each notebook's install cell


def test_a_changed_url_rewrites_badges_and_install_cells(tmp_path):
    url = "https://github.com/someone/elsewhere"
    nb_path = ROOT / "notebooks" / "00_your_hardware.ipynb"
    nb = json.loads(links.notebook_text(nb_path, url))
    first, install = "".join(nb["cells"][0]["source"]), "".join(nb["cells"][1]["source"])
    assert "colab.research.google.com/github/someone/elsewhere/blob/main/notebooks/00_your_hardware.ipynb" in first
    assert "mybinder.org/v2/gh/someone/elsewhere/main?labpath=notebooks%2F00_your_hardware.ipynb" in first
    assert f'"{url}"' in install and "gpu-backprop-course" not in install
    readme = links.readme_text(url)
    assert readme.count("github/someone/elsewhere/blob/main/notebooks/") == 10     # lessons 00 to 09
    with pytest.raises(SystemExit, match="Repository must be"):
        (tmp_path / "pyproject.toml").write_text('[project.urls]\nRepository = "not a url"\n')
        links.repository_url(tmp_path / "pyproject.toml")


def test_a_failed_clone_stops_the_install_cell_with_the_url_and_what_to_do_instead(monkeypatch):
    from IPython.core.inputtransformer2 import TransformerManager

    url = "https://github.com/someone/gone"
    code = TransformerManager().transform_cell(links.install_cell(url))
    magics = []
    shell = types.SimpleNamespace(run_line_magic=lambda *a: magics.append(a))
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    monkeypatch.setattr("os.path.isdir", lambda p: False)
    failed = subprocess.CompletedProcess([], 128, "", "fatal: repository 'https://github.com/someone/gone/' not found")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: failed)
    with pytest.raises(SystemExit) as stop:
        exec(code, {"get_ipython": lambda: shell})
    message = str(stop.value)
    assert url in message and "not found" in message and "upload" in message and "/content/course/course/" in message
    assert magics == []                                     # nothing installed from a folder that is not there

    ok = subprocess.CompletedProcess([], 0, "", "")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: ok)
    namespace = {"get_ipython": lambda: shell}
    exec(code, namespace)
    assert magics == [("pip", "install -q -e {HOME}")] and namespace["HOME"] == "/content/course"  # IPython expands
