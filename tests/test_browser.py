"""A real browser drives JupyterLab (one server for the module): open notebook 00, run every cell, move the
size slider, see the plot change.  And it reads the executed book (``tools/build_book.py``, built once per
session with the GPU switched off, the build ``tests/test_book.py`` holds every lesson to):
every lesson page is there, every figure loads, no cell failed, nothing is fetched from the network,
and the shipped reference GPU curves are on the pages.

Needs Debian's chromium (``/usr/bin/chromium``) and Playwright for Python (never ``playwright
install``).  On a learner's machine without them it skips with the reason; under CI (``CI=true``)
it must run, so a missing browser fails instead.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import _early
import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("COURSE_CHROMIUM", "/usr/bin/chromium")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
TOKEN = "course-browser-test"


def _missing() -> str | None:
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        return f"no chromium at {CHROMIUM} (Debian: apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed (pip install playwright)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read().decode())


def _need_browser() -> None:
    why = _missing()
    if why:
        if IN_CI:
            pytest.fail(f"the browser test must run under CI, but {why}")
        pytest.skip(why)


def _launch(p):
    return p.chromium.launch(
        executable_path=CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium"),
        headless=True,
        args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--no-first-run"])


def _announcements_plugin() -> str:
    """The JupyterLab plugin `make course` switches off (its news question, its update check)."""
    line = next(x for x in (ROOT / "Makefile").read_text().splitlines() if x.startswith("LAB_ANNOUNCEMENTS"))
    return line.split("=", 1)[1].strip()


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory):
    """One JupyterLab server for this module's notebooks (each test opens its own notebook, in its own kernel)."""
    _need_browser()
    tmp_path = tmp_path_factory.mktemp("lab")
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(ROOT / "notebooks" / "00_your_hardware.ipynb", work)  # never touch the stored notebook
    (tmp_path / "settings").mkdir()   # a learner's fresh settings
    env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
               COURSE_DISABLE_GPU=os.environ.get("COURSE_DISABLE_GPU", ""))
    # what `make course` does in the venv, here in this test's own configuration folder
    subprocess.run([sys.executable, "-m", "jupyter", "labextension", "disable", "--level=user",
                    _announcements_plugin()], env=env, check=True, capture_output=True, timeout=120)
    port = _free_port()
    log = open(tmp_path / "jupyterlab.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={work}",
         "--ServerApp.open_browser=False", "--ContentsManager.allow_hidden=True"]
        + (["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),
        cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                _get(f"{base}/api/status?token={TOKEN}")
                break
            except Exception:
                if proc.poll() is not None or time.time() > deadline:
                    log_text = (tmp_path / "jupyterlab.log").read_text()
                    raise RuntimeError(f"JupyterLab did not start:\n{log_text}") from None
                time.sleep(0.5)
        yield base, tmp_path
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _shutdown_kernels(base: str) -> None:
    for kernel in _get(f"{base}/api/kernels?token={TOKEN}"):
        req = urllib.request.Request(f"{base}/api/kernels/{kernel['id']}", method="DELETE",
                                     headers={"Authorization": f"token {TOKEN}"})
        with urllib.request.urlopen(req, timeout=30):
            pass


@pytest.fixture
def jupyterlab(lab_server):
    """The module's JupyterLab, its kernels shut down after each test (the next test waits on its own)."""
    yield lab_server
    _shutdown_kernels(lab_server[0])


def _wait_kernel_idle(base: str, timeout: float = 120, settle: float = 1.5) -> None:
    """Wait until a kernel exists and has been idle for `settle` seconds."""
    deadline = time.time() + timeout
    idle_since = None
    kernels: list = []
    while time.time() < deadline:
        try:
            kernels = _get(f"{base}/api/kernels?token={TOKEN}")
        except urllib.error.HTTPError as exc:  # jupyter-server can answer 500 while a kernel starts
            if exc.code < 500:
                raise
            time.sleep(0.25)
            continue
        if kernels and all(k["execution_state"] == "idle" for k in kernels):
            idle_since = idle_since or time.time()
            if time.time() - idle_since >= settle:
                return
        else:
            idle_since = None
        time.sleep(0.25)
    raise TimeoutError(f"kernel not idle after {timeout} s: {kernels}")


def test_notebook_00_runs_in_jupyterlab_and_its_slider_redraws_the_plot(jupyterlab):
    from playwright.sync_api import sync_playwright

    base, tmp = jupyterlab
    shots = Path(os.environ.get("COURSE_BROWSER_SHOTS", tmp))
    with sync_playwright() as p:
        browser = _launch(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            page.goto(f"{base}/lab/tree/00_your_hardware.ipynb?token={TOKEN}", wait_until="domcontentloaded")
            page.wait_for_selector(".jp-Notebook", timeout=90_000)
            _wait_kernel_idle(base)

            page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
            page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()

            image = page.locator("img.widget-image").first
            image.wait_for(state="visible", timeout=120_000)
            _wait_kernel_idle(base)
            assert "Jupyter news" not in page.inner_text("body"), "JupyterLab's news pop-up came up"
            # JupyterLab renders a traceback as application/vnd.jupyter.error and text on stderr as
            # application/vnd.jupyter.stderr, each on a .jp-RenderedText node.
            tracebacks = page.locator("[data-mime-type='application/vnd.jupyter.error']")
            assert tracebacks.count() == 0, tracebacks.first.inner_text()
            stderr = page.locator("[data-mime-type='application/vnd.jupyter.stderr']")
            for i in range(stderr.count()):
                assert "Error" not in stderr.nth(i).inner_text(), stderr.nth(i).inner_text()
            image.scroll_into_view_if_needed()
            page.screenshot(path=str(shots / "browser_before.png"))
            src_before = image.get_attribute("src")
            slider = page.locator(".widget-slider").filter(has_text="n").first
            readout = slider.locator(".widget-readout").first
            before_text = readout.inner_text()

            handle = slider.locator(".noUi-handle, .ui-slider-handle").first
            handle.click()
            page.keyboard.press("ArrowRight")
            deadline = time.time() + 60
            while time.time() < deadline:
                if image.get_attribute("src") != src_before and readout.inner_text() != before_text:
                    break
                time.sleep(0.25)
            _wait_kernel_idle(base)
            page.screenshot(path=str(shots / "browser_after.png"))
            assert readout.inner_text() != before_text, "the slider did not move"
            assert image.get_attribute("src") != src_before, "moving the slider did not redraw the plot"
            html_out = page.locator(".widget-html-content").filter(has_text="GFLOP/s").first.inner_text()
            assert readout.inner_text().replace(",", "") in html_out.replace(",", "")
        finally:
            browser.close()


# ----------------------------------------------------------------- the executed book

@pytest.fixture(scope="session")
def book():
    """The whole book, built once, CPU only (so every reference curve is an overlay), in a fresh folder:
    the build ``tests/test_book.py`` holds each lesson to (``tests/_early.py`` starts it when collection
    ends, so it runs beside the rest of the suite; it is the suite's one top-to-bottom run of each lesson)."""
    _need_browser()
    out, run = _early.result("book")
    assert run.returncode == 0, f"the book did not build:\n{run.stdout[-3000:]}\n{run.stderr[-6000:]}"
    return out


def _reference_devices() -> set[str]:
    names = set()
    for path in (ROOT / "course" / "reference").glob("*.json"):
        for gpu in json.loads(path.read_text(encoding="utf-8"))["provenance"].get("gpus", []):
            names.add(gpu["name"])
    return names


def _lesson_has_references(lesson: str) -> bool:
    """Whether any of the lesson's report experiments ships a GPU reference."""
    from course.report import discover
    from course.results import load_reference

    return any(load_reference(name) for name, exp in discover().items() if exp.lesson == lesson)


@pytest.mark.slow
@pytest.mark.early("book")
def test_the_executed_book_shows_every_lesson_with_its_figures_and_the_reference_curves(book):
    from playwright.sync_api import sync_playwright

    lessons = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    devices = _reference_devices()
    assert devices, "no reference results ship in course/reference/"
    fetched: list[str] = []
    with sync_playwright() as p:
        browser = _launch(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.route("**/*", lambda route: route.continue_()
                   if route.request.url.startswith(("file:", "data:", "about:"))
                   else (fetched.append(route.request.url), route.abort()))
        try:
            page.goto((book / "index.html").as_uri())
            links = page.locator("a[href$='.html']").evaluate_all("els => els.map(e => e.getAttribute('href'))")
            for name in lessons:
                assert name.replace(".ipynb", ".html") in links, f"the front page does not link lesson {name}"
            front = page.inner_text("body")
            assert all(d in front for d in devices), "the front page should name the reference devices"
            for name in lessons:
                page.goto((book / name.replace(".ipynb", ".html")).as_uri())
                page.wait_for_load_state("load")
                images = page.locator("img").evaluate_all(
                    "els => els.map(e => ({ok: e.complete && e.naturalWidth > 0, alt: e.alt}))")
                assert images, f"{name}: no figure on the page"
                broken = [i for i, img in enumerate(images) if not img["ok"]]
                assert not broken, f"{name}: figures {broken} of {len(images)} did not load"
                failed = page.locator("[data-mime-type='application/vnd.jupyter.error']")
                assert failed.count() == 0, f"{name}: {failed.first.inner_text()[:2000]}"
                stderr = page.locator("[data-mime-type='application/vnd.jupyter.stderr']").all_inner_texts()
                assert not [t for t in stderr if "Error" in t or "Traceback" in t], f"{name}: {stderr}"
                # a figure's alt text is the words on it (course.widgets.figure_words): its legend names
                # the device each curve was recorded on
                on_figures = " ".join(img["alt"] for img in images)
                if name.startswith("06_"):              # lesson 06's MPI runs have no GPU side (README)
                    continue
                if _lesson_has_references(name[:2]):
                    assert any(d in on_figures for d in devices), f"{name}: no figure shows {sorted(devices)}"
                else:                                   # no GPU run has recorded it yet: a figure must say so
                    assert "recorded yet" in on_figures, f"{name}: no figure says no GPU reference is recorded yet"
                if (book / "mathjax").is_dir() and "$" in (ROOT / "notebooks" / name).read_text(encoding="utf-8"):
                    page.wait_for_selector(".MathJax", timeout=30_000)   # formulas typeset from the local copy
                    assert page.locator(".MathJax_Error, .merror").count() == 0, f"{name}: a formula failed"
        finally:
            browser.close()
    assert not fetched, f"the book fetched from the network: {fetched[:5]}"


# ----------------------------------------------------------------- apps with progress bars, after Run All

#: A notebook of two apps whose updates draw progress bars (as the lessons' sweeps do), run top to bottom:
#: the bars close when their loops end, and the app's progress area must not keep a view of them.
_PROGRESS_NOTEBOOK = {
    "cells": [
        {"cell_type": "code", "id": "first", "metadata": {}, "execution_count": None, "outputs": [], "source": [
            "import ipywidgets as w\n",
            "from course.widgets import LiveApp, progress\n",
            "def update(n):\n",
            "    return f'<b>sum of {n}: {sum(progress(range(n), desc=\"counting\"))}</b>'\n",
            "first = LiveApp(update, {'n': w.IntSlider(value=50, min=1, max=100)}, title='first')\n",
            "first"]},
        {"cell_type": "code", "id": "second", "metadata": {}, "execution_count": None, "outputs": [], "source": [
            "second = LiveApp(update, {'n': w.IntSlider(value=60, min=1, max=100)}, title='second')\n",
            "second"]},
        {"cell_type": "code", "id": "redraw", "metadata": {}, "execution_count": None, "outputs": [], "source": [
            "first.controls['n'].value = 70   # a redraw after Run All draws and closes a bar again\n",
            "print('done')"]},
    ],
    "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
    "nbformat": 4, "nbformat_minor": 5,
}


def test_apps_leave_no_closed_progress_bar_behind_after_run_all(jupyterlab):
    """ipywidgets 8: an Output whose ``outputs`` is assigned ``()`` kept the view of the closed progress bar
    ("Error displaying widget: model not found"); LiveApp clears its progress area with ``clear_output()``."""
    from playwright.sync_api import sync_playwright

    base, tmp = jupyterlab
    (tmp / "work" / "progress_apps.ipynb").write_text(json.dumps(_PROGRESS_NOTEBOOK), encoding="utf-8")
    with sync_playwright() as p:
        browser = _launch(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            page.goto(f"{base}/lab/tree/progress_apps.ipynb?token={TOKEN}", wait_until="domcontentloaded")
            page.wait_for_selector(".jp-Notebook", timeout=90_000)
            _wait_kernel_idle(base)
            page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
            page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
            page.locator(".jp-OutputArea-output", has_text="done").first.wait_for(timeout=120_000)
            _wait_kernel_idle(base)
            time.sleep(2)       # let the front end render what the last messages asked for
            body = page.inner_text("body")
            page.screenshot(path=str(tmp / "progress_apps.png"))
            assert "sum of 70: 2415" in body and "sum of 60: 1770" in body, "the apps did not draw"
            assert "model not found" not in body, "a closed progress bar's view was left in an app"
            assert "Error displaying widget" not in body
        finally:
            browser.close()
