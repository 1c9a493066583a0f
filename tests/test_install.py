"""Two installs: a learner's (requirements.txt, Binder) without the test tooling, and the test extra
that `make test` and `.ci/run` add to it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
TEST_TOOLING = ("pytest", "playwright", "ruff", "hypothesis", "nbval", "nvidia-cuda-nvrtc", "nbstripout")


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement.strip(), maxsplit=1)[0].lower()


def _installs(requirements: Path) -> set[str]:
    """Every distribution a requirements file asks for, the course's extras resolved from pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names: set[str] = set()
    for line in requirements.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"-e \.(?:\[(?P<extras>[a-z0-9_,]+)\])?", line)
        if m:
            names |= {_name(r) for r in project["dependencies"]}
            for extra in (m["extras"] or "").split(","):
                names |= {_name(r) for r in project["optional-dependencies"].get(extra, [])} if extra else set()
        else:
            names.add(_name(line))
    return names


def test_a_learners_install_holds_the_notebooks_needs_and_no_test_tooling():
    for requirements in (ROOT / "requirements.txt", ROOT / "binder" / "requirements.txt"):
        names = _installs(requirements)
        assert {"jupyterlab", "ipywidgets", "numpy", "matplotlib", "numba-cuda"} <= names, requirements
        assert not names & set(TEST_TOOLING), f"{requirements.relative_to(ROOT)} installs {names & set(TEST_TOOLING)}"


def test_make_test_and_ci_add_the_test_extra():
    extra = {_name(r) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
             ["test"]}
    assert set(TEST_TOOLING) <= extra
    makefile = (ROOT / "Makefile").read_text()
    stamp = re.search(r"^\$\(VENV\)/\.installed-test:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert stamp and ".[test" in stamp.group(1), "the Makefile's test stamp should install the test extra"
    assert re.search(r"^test: .*\$\(VENV\)/\.installed-test", makefile, re.MULTILINE)
    assert "make .venv/.installed-test" in (ROOT / ".ci" / "run").read_text()
