"""Build the executed book: every lesson notebook run on this machine and written as a static page.

    python tools/build_book.py                       # every lesson into book/_build/ (make book)
    python tools/build_book.py --lessons 00 03       # a smaller book (the browser test's)
    python tools/build_book.py --out /tmp/book

Each lesson notebook (``notebooks/NN_*.ipynb``, exercises as a learner meets them) is executed top
to bottom by nbclient in a fresh kernel, with ``COURSE_STATIC=1``: every widget app then also leaves
its default figure as a PNG and its printed lines as text (``course.widgets.LiveApp``), so a page
shows every figure without a kernel; each figure's text copy (its alt text) is the words on it
(``course.widgets.describe_figures``): titles, legend entries naming each device, notes.  Where no
GPU answers, the shipped reference results (``course/reference/``) are overlaid, dashed and
labelled, exactly as in a live notebook.
nbconvert's HTML exporter writes each page with the template in ``tools/book_template/`` (the lab
template without the scripts it would fetch from the network).  The front page, ``index.html``, is
made from README.md (what the course is, the lessons and what each measures) and from the
provenance inside each reference file.  A cell that raises stops the build with its notebook's name;
with ``--keep-going`` the other lessons are still built and the build exits 1 at the end.  Either way
``build.json`` beside the pages says, for each lesson, how long it ran and the error that stopped it
(the tests read it: the book's build is the suite's one top-to-bottom run of each lesson notebook).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import sys
import time
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter
from nbconvert.preprocessors import ExecutePreprocessor, Preprocessor

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
REFERENCE = ROOT / "course" / "reference"
TEMPLATE = Path(__file__).resolve().parent / "book_template"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_LESSON_ROW = re.compile(r"^\| (?P<num>\d\d) \| \[(?P<title>[^\]]+)\]\(notebooks/(?P<file>[^)]+\.ipynb)\) "
                         r"\| (?P<measures>[^|]+) \|")
_BADGE = re.compile(r"\[!\[(?P<alt>[^\]]*)\]\([^)]*\)\]\((?P<href>[^)]*)\)")
_LESSON_LINK = re.compile(r"\]\((?:\.\./)?(?P<stem>\d\d_[A-Za-z0-9_]+)\.ipynb(?P<anchor>#[^)]*)?\)")


class StaticPage(Preprocessor):
    """Make an executed notebook readable without a kernel or the network.

    Widget views are dropped (nothing can draw them without a kernel; the app's static copy
    follows each one), and so is the saved widget state; the Colab and Binder badges (images
    fetched from the network) become plain links; links to another lesson point at its page.
    """

    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = _BADGE.sub(lambda m: f"[{m['alt']}]({m['href']})", cell.source)
                cell.source = _LESSON_LINK.sub(lambda m: f"]({m['stem']}.html{m['anchor'] or ''})", cell.source)
            elif cell.cell_type == "code":
                cell.outputs = [out for out in cell.get("outputs", []) if WIDGET_VIEW not in out.get("data", {})]
        return nb, resources


def lessons() -> list[dict]:
    """The lessons as README.md's table lists them: number, title, notebook, what it measures."""
    rows = [m.groupdict() for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
            if (m := _LESSON_ROW.match(line))]
    if not rows:
        raise SystemExit("README.md has no lessons table (rows like '| 00 | [title](notebooks/00_x.ipynb) | ... |')")
    for row in rows:
        if not (NOTEBOOKS / row["file"]).exists():
            raise SystemExit(f"README.md lists {row['file']}, which is not in notebooks/")
        row["page"] = Path(row["file"]).stem + ".html"
    return rows


def _readme_intro() -> str:
    """README.md's text between its title and its first section."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("\n## ", 1)[0].split("\n", 1)[1].strip()


def reference_table() -> str:
    """A markdown table of the shipped reference results: experiment, device, date, versions."""
    rows = ["| experiment | recorded on | date (UTC) | driver / CUDA runtime | libraries |", "|---|---|---|---|---|"]
    for path in sorted(REFERENCE.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        prov = data.get("provenance", {})
        gpus = prov.get("gpus") or [{}]
        gpu = gpus[0]
        libs = prov.get("libraries", {})
        lib_text = ", ".join(f"{k} {v}" for k, v in libs.items() if k in ("cupy-cuda12x", "cupy-cuda13x",
                                                                          "numba-cuda", "torch", "numpy"))
        rows.append(f"| {data.get('experiment', path.stem)} | {gpu.get('name', '?')} | "
                    f"{str(prov.get('date', '?'))[:16].replace('T', ' ')} | "
                    f"{gpu.get('driver_version', '?')} / {gpu.get('runtime_version', '?')} | {lib_text} |")
    return "\n".join(rows)


def _this_machine() -> str:
    from course.cpu import cpu_info
    from course.devices import gpu_available, gpu_info, gpu_unavailable_reason

    cpu = cpu_info()
    gpu = (", ".join(g["name"] for g in gpu_info()) if gpu_available()
           else f"none ({gpu_unavailable_reason()})")
    return (f"CPU {cpu.get('model', '?')} ({cpu.get('logical_cores', '?')} logical cores); GPU: {gpu}; "
            f"Python {platform.python_version()}")


def front_page(rows: list[dict], built: list[dict]) -> nbformat.NotebookNode:
    """The front page, as a notebook of markdown cells (nbconvert renders it like the lessons)."""
    done = {row["file"] for row in built}
    table = ["| # | lesson | what you measure | run time here |", "|---|---|---|---|"]
    for row in rows:
        title = f"[{row['title']}]({row['page']})" if row["file"] in done else f"{row['title']} (not in this build)"
        seconds = next((f"{b['seconds']:.0f} s" for b in built if b["file"] == row["file"]), "")
        table.append(f"| {row['num']} | {title} | {row['measures'].strip()} | {seconds} |")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cells = [
        "# How GPUs accelerate backpropagation: the executed book\n\n" + _readme_intro(),
        "## The lessons\n\nEach page is a lesson notebook run top to bottom, exercises as a learner first "
        "meets them (their checks say what is still to do). A widget's figure and printed lines are "
        "shown as they were first drawn; to move the sliders, run the notebook itself (README: "
        "`make course`).\n\n" + "\n".join(table),
        "## Where the numbers come from\n\n"
        f"**Measured live** on the machine that built this book, on {stamp}: {_this_machine()}. "
        "A measurement taken on a busy machine says so beside it.\n\n"
        "**Reference results**, drawn dashed and labelled with their device and date, come from the files "
        "in `course/reference/`, recorded by `python -m course report --record-reference` on a real GPU; "
        "each file holds the date, driver, CUDA runtime and library versions shown here. No number is typed "
        "in.\n\n" + reference_table(),
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(c) for c in cells]
    nb.metadata["title"] = "How GPUs accelerate backpropagation"
    return nb


def _nav(rows: list[dict], built: list[dict], current: str) -> list[dict]:
    done = {row["file"] for row in built}
    links = [{"href": "index.html", "label": "Contents", "current": current == "index.html"}]
    links += [{"href": row["page"], "label": f"{row['num']} {row['title']}", "current": current == row["page"]}
              for row in rows if row["file"] in done]
    return links


def local_mathjax(out: Path) -> str:
    """MathJax copied next to the pages (jupyter-server-mathjax's copy, where installed): its URL, or "".

    Without it a page shows its formulas as TeX source: a page never loads MathJax from the network.
    """
    try:
        import jupyter_server_mathjax
    except ImportError:
        return ""
    static = Path(jupyter_server_mathjax.__file__).parent / "static"
    shutil.copytree(static, out / "mathjax", dirs_exist_ok=True, ignore=shutil.ignore_patterns("localization"))
    return "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"


def _exporter(mathjax_url: str) -> HTMLExporter:
    exporter = HTMLExporter(template_name="book_template", extra_template_basedirs=[str(TEMPLATE.parent)],
                            mathjax_url=mathjax_url)
    exporter.register_preprocessor(StaticPage(), enabled=True)
    return exporter


def execute(path: Path, timeout_s: float) -> nbformat.NotebookNode:
    """``path`` run top to bottom in a fresh kernel, from its own folder, apps leaving static copies."""
    nb = nbformat.read(path, as_version=4)
    ExecutePreprocessor(timeout=timeout_s, kernel_name="python3", extra_arguments=[
        "--IPKernelApp.exec_lines=from course.widgets import describe_figures; describe_figures()"],
    ).preprocess(nb, {"metadata": {"path": str(path.parent)}})
    return nb


def build(out: Path, wanted: list[str] | None = None, timeout_s: float = 600, keep_going: bool = False) -> list[Path]:
    """Execute the chosen lessons (all by default) and write their pages and the front page to ``out``.

    ``out/build.json`` lists each lesson with its run time and its error (None when it ran through); a
    lesson that fails stops the build, or with ``keep_going`` is left out of the book after the others
    are built (``SystemExit`` then, naming the failed lessons).
    """
    rows = lessons()
    if wanted:
        unknown = sorted(set(wanted) - {row["num"] for row in rows})
        if unknown:
            raise SystemExit(f"no lesson {unknown}; the lessons are {[row['num'] for row in rows]}")
    chosen = [row for row in rows if not wanted or row["num"] in wanted]
    os.environ["COURSE_STATIC"] = "1"       # read by LiveApp in the kernels started below
    os.environ.pop("MPLBACKEND", None)      # the kernel's inline backend draws the figures
    out.mkdir(parents=True, exist_ok=True)
    executed, built, record = [], [], []
    for row in chosen:
        t0 = time.perf_counter()
        print(f"running {row['file']} ...", flush=True)
        try:
            nb, error = execute(NOTEBOOKS / row["file"], timeout_s), None
        except Exception as exc:
            nb, error = None, f"{type(exc).__name__}: {exc}"
        seconds = time.perf_counter() - t0
        record.append({"file": row["file"], "seconds": seconds, "error": error})
        (out / "build.json").write_text(json.dumps(record, indent=1), encoding="utf-8")
        if error:
            message = f"{row['file']} failed while the book was built:\n{error}"
            if not keep_going:
                raise SystemExit(message)
            print(message, file=sys.stderr, flush=True)
            continue
        print(f"  {seconds:.0f} s", flush=True)
        executed.append((row, nb))
        built.append({"file": row["file"], "seconds": seconds})
    pages = []
    mathjax_url = local_mathjax(out)
    if not mathjax_url:
        print("jupyter-server-mathjax is not installed: formulas stay as TeX source", flush=True)
    exporter = _exporter(mathjax_url)
    for row, nb in executed:
        html, _ = exporter.from_notebook_node(nb, resources={"book_nav": _nav(rows, built, row["page"]),
                                                             "book_mathjax": bool(mathjax_url)})
        pages.append(out / row["page"])
        pages[-1].write_text(html, encoding="utf-8")
    html, _ = exporter.from_notebook_node(front_page(rows, built),
                                          resources={"book_nav": _nav(rows, built, "index.html")})
    pages.append(out / "index.html")
    pages[-1].write_text(html, encoding="utf-8")
    failed = [r["file"] for r in record if r["error"]]
    if failed:
        raise SystemExit(f"the book was built without {', '.join(failed)}, which failed (see above)")
    return pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "book" / "_build", help="where the pages go")
    parser.add_argument("--lessons", nargs="+", metavar="NN", help="only these lessons (e.g. 00 03)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds one cell may take")
    parser.add_argument("--keep-going", action="store_true", help="a failed lesson does not stop the others")
    args = parser.parse_args(argv)
    from course.errors import BadInputError, validate_output_folder

    try:
        out = validate_output_folder(args.out, "--out")
    except BadInputError as exc:
        raise SystemExit(f"error: {exc}") from None
    pages = build(out, args.lessons, args.timeout, args.keep_going)
    print(f"wrote {len(pages)} pages; open {out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
