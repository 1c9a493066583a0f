"""Write every link to the course's repository from the one URL in pyproject.toml.

The repository's address is ``[project.urls] Repository`` in ``pyproject.toml``, and nowhere else
by hand.  From it this script writes

* the Colab and Binder badges in README.md's lessons table and in each notebook's first cell (a notebook
  with a Colab badge and no Binder badge gets one);
* each notebook's install cell (its first code cell, run only on Colab: ``"google.colab" in
  sys.modules``), which clones the repository and installs the course, and stops with one clear
  message (the address it tried, and how to upload the folder instead) when the clone fails.

    python tools/repository_links.py           # rewrite them
    python tools/repository_links.py --check   # exit 1 and name what is out of step (a test runs it)

It changes only those badge lines and install cells.  Solutions notebooks are written too, so
``tools/release_notebooks.py --check`` stays satisfied.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from urllib.parse import quote

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
BRANCH = "main"
COLAB_HOME = "/content/course"
_GITHUB = re.compile(r"^https://github\.com/(?P<slug>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?)(?:\.git)?/?$")
_COLAB_BADGE = re.compile(r"\[!\[(?P<alt>[^\]]*)\]\(https://colab\.research\.google\.com/assets/colab-badge\.svg\)\]"
                          r"\((?P<href>[^)]*)\)")
_BINDER_BADGE = re.compile(r"\[!\[(?P<alt>[^\]]*)\]\(https://mybinder\.org/badge_logo\.svg\)\]\((?P<href>[^)]*)\)")
INSTALL_MARK = '"google.colab" in sys.modules'
DEFAULT_NOTE = "on Colab: fetch the course and install it (CuPy is preinstalled)"
_NOTE = re.compile(re.escape(INSTALL_MARK) + r":\s*#\s*(?P<note>.+)$", re.MULTILINE)


def read_text(path: Path) -> str:
    """``path``'s text, or a clear stop naming the file when it is missing or not UTF-8 text."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SystemExit(f"{path}: cannot be read ({getattr(exc, 'strerror', None) or exc}); restore it from git "
                         "(git checkout -- <file>)") from None


def repository_url(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """The repository's address: ``[project.urls] Repository`` in pyproject.toml (a GitHub URL)."""
    try:
        project = tomllib.loads(read_text(pyproject)).get("project", {})
    except tomllib.TOMLDecodeError as exc:
        raise SystemExit(f"{pyproject}: not valid TOML ({exc}); restore it from git") from None
    urls = project.get("urls", {}) if isinstance(project, dict) else {}
    url = urls.get("Repository") if isinstance(urls, dict) else None
    if not isinstance(url, str):
        url = None
    if not url or not _GITHUB.match(url):
        raise SystemExit(f"{pyproject.name}: [project.urls] Repository must be https://github.com/OWNER/NAME, "
                         f"got {url!r}")
    return url.rstrip("/")


def colab_link(url: str, path: str) -> str:
    """Colab's address for the notebook at ``path`` (relative to the repository root)."""
    return f"https://colab.research.google.com/github/{_GITHUB.match(url)['slug']}/blob/{BRANCH}/{path}"


def binder_link(url: str, path: str) -> str:
    """Binder's address opening JupyterLab on the notebook at ``path``."""
    return f"https://mybinder.org/v2/gh/{_GITHUB.match(url)['slug']}/{BRANCH}?labpath={quote(path, safe='')}"


def install_cell(url: str, note: str = DEFAULT_NOTE) -> str:
    """The source of every notebook's first code cell: on Colab, fetch the course and install it.

    ``note`` is the comment on its first line (a notebook may say what else the install brings).
    """
    return f'''import sys
if {INSTALL_MARK}:  # {note}
    import os
    import subprocess
    REPOSITORY, HOME = "{url}", "{COLAB_HOME}"
    if not os.path.isdir(os.path.join(HOME, "course")):
        clone = subprocess.run(["git", "clone", "-q", "--depth", "1", REPOSITORY, HOME],
                               capture_output=True, text=True)
        if clone.returncode != 0:
            raise SystemExit(f"Could not clone {{REPOSITORY}}: {{clone.stderr.strip()}}\\nInstead, upload the course's "
                             f"folder (its zip, through Colab's Files pane, then unzip it) so that {{HOME}}/course/ "
                             "exists, and run this cell again.")
    %pip install -q -e {{HOME}}
    sys.path.insert(0, HOME)'''


def _badges(text: str, url: str, path: str) -> str:
    """``text`` with its Colab and Binder badges pointing at ``path``; a Colab badge without a Binder one gets
    one, on the next line (the README promises both for every lesson)."""
    binder = _BINDER_BADGE.search(text) is not None
    text = _COLAB_BADGE.sub(lambda m: f"[![{m['alt']}](https://colab.research.google.com/assets/colab-badge.svg)]"
                                      f"({colab_link(url, path)})"
                                      + ("" if binder else "\n[![Binder](https://mybinder.org/badge_logo.svg)]"
                                                           f"({binder_link(url, path)})"), text)
    return _BINDER_BADGE.sub(lambda m: f"[![{m['alt']}](https://mybinder.org/badge_logo.svg)]"
                                       f"({binder_link(url, path)})", text)


def _split(source: str) -> list[str]:
    lines = source.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def notebook_text(path: Path, url: str) -> str:
    """The notebook's JSON text with its badges and install cell written from ``url``."""
    try:
        nb = json.loads(read_text(path))
        cells = nb["cells"]
        sources = ["".join(cell["source"]) for cell in cells]
    except (ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"{path}: not a notebook this script can read ({type(exc).__name__}: {exc}); restore it "
                         "from git") from None
    rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    installs = 0
    for cell, source in zip(cells, sources):
        if cell.get("cell_type") == "markdown":
            new = _badges(source, url, rel)
        elif cell.get("cell_type") == "code" and INSTALL_MARK in source and installs == 0:
            note = _NOTE.search(source)
            new, installs = install_cell(url, note["note"].strip() if note else DEFAULT_NOTE), 1
        else:
            continue
        if new != source:
            cell["source"] = _split(new)
    if not installs:
        raise SystemExit(f"{rel}: no install cell (a code cell with {INSTALL_MARK})")
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def readme_text(url: str, readme: Path = ROOT / "README.md") -> str:
    """README.md with each lessons-table row's badges pointing at its notebook in ``url``."""
    lines = read_text(readme).split("\n")
    for i, line in enumerate(lines):
        m = re.search(r"\]\((notebooks/[^)]+\.ipynb)\)", line)
        if m and ("colab-badge" in line or "badge_logo" in line):
            lines[i] = _badges(line, url, m.group(1))
    return "\n".join(lines)


def targets() -> list[Path]:
    """README.md and every notebook (lessons and solutions)."""
    notebooks = sorted(p for p in (ROOT / "notebooks").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    return [ROOT / "README.md", *notebooks]


def out_of_step(url: str | None = None) -> dict[Path, str]:
    """Each file whose links differ from what ``url`` (pyproject's by default) gives, with the text it should hold."""
    url = url or repository_url()
    want = {}
    for path in targets():
        text = readme_text(url, path) if path.suffix == ".md" else notebook_text(path, url)
        if text != read_text(path):
            want[path] = text
    return want


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only report the files that are out of step")
    args = parser.parse_args(argv)
    url = repository_url()
    stale = out_of_step(url)
    if args.check:
        for path in stale:
            print(f"{path.relative_to(ROOT)}: links not written from {url}; run python tools/repository_links.py",
                  file=sys.stderr)
        return 1 if stale else 0
    for path, text in stale.items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
