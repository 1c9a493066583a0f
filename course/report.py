"""Experiments every lesson registers, and the headless report that runs them all.

A lesson registers an experiment in the ``experiments`` module of its folder (``course/scan/experiments.py``)::

    from course.report import experiment

    @experiment("matmul_sweep", title="Matrix multiply: time vs size", lesson="00")
    def matmul_sweep(devices, quick, progress):
        rs = ResultSet("matmul_sweep", params=...)
        ...            # measure on each of `devices` ("cpu", and "gpu" when one answers)
        return rs

    @matmul_sweep.plot
    def _(rs, references):
        return sweep_figure(rs, references, ...)

``python -m course report --quick --out DIR`` then imports every lesson's ``experiments``
module, runs each experiment on every available device and
writes ``DIR/index.html`` (with the PNG plots), ``DIR/results.json`` (every
result set with its provenance) and one PNG per experiment.  On a GPU machine
``--record-reference`` also stores the GPU results in ``course/reference/``.
"""

from __future__ import annotations

import glob
import html
import importlib
import json
import os
import pkgutil
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .arguments import OneOf, arguments
from .cpu import cpu_info
from .devices import gpu_available, gpu_info, gpu_unavailable_reason
from .errors import BadInputError, validate_output_folder
from .plots import figure_takeaway, figure_to_png
from .results import ResultSet, load_reference, merge, provenance, save_reference, shared_file_mode

__all__ = ["Experiment", "experiment", "registry", "discover", "run_report", "prepare_out", "ReportInterrupted",
           "SMOKE", "by_size"]

#: ``quick`` as ``--smoke`` passes it: tiny sizes, so that every step of an experiment runs in seconds and
#: nothing measured is worth keeping (the stand-in GPU's rehearsal, ``tools/gpu_run.sh --dry-run``).
SMOKE = "smoke"


@dataclass
class Experiment:
    name: str
    title: str
    lesson: str
    run: Callable[..., ResultSet]
    plotter: Callable[..., object] | None = None
    description: str = ""

    def plot(self, fn: Callable[..., object]) -> Callable[..., object]:
        """Decorator: register ``fn(result_set, references) -> Figure`` as this experiment's plot."""
        self.plotter = fn
        return fn

    def __call__(self, *args, **kwargs) -> ResultSet:
        return self.run(*args, **kwargs)


_REGISTRY: dict[str, Experiment] = {}


@arguments(quick=OneOf(True, False, SMOKE))
def by_size(quick: bool | str, full: Any, quick_size: Any, smoke: Any = None) -> Any:
    """The value an experiment uses at its size: ``full``, ``quick_size`` (``--quick``) or ``smoke``
    (``--smoke``; where an experiment gives none, its quick value).

    >>> by_size(False, 2**26, 2**22, 2**10), by_size(True, 2**26, 2**22, 2**10), by_size(SMOKE, 2**26, 2**22, 2**10)
    (67108864, 4194304, 1024)
    """
    if quick == SMOKE:
        return quick_size if smoke is None else smoke
    return quick_size if quick else full


def experiment(name: str, title: str, lesson: str) -> Callable[[Callable[..., ResultSet]], Experiment]:
    """Register ``run(devices, quick, progress) -> ResultSet`` under ``name``."""
    if not all(isinstance(v, str) and v for v in (name, title, lesson)):
        raise BadInputError(f"experiment needs a name, a title and a lesson number as non-empty strings; got "
                            f"{name!r:.40}, {title!r:.40}, {lesson!r:.20}")
    def deco(fn: Callable[..., ResultSet]) -> Experiment:
        exp = Experiment(name=name, title=title, lesson=lesson, run=fn,
                         description=(fn.__doc__ or "").strip())
        _REGISTRY[name] = exp
        return exp
    return deco


def discover() -> dict[str, Experiment]:
    """Import every module that registers experiments, so their experiments register.

    Those are the ``experiments`` modules of the lesson folders (``course/scan/experiments.py``, ...).
    """
    root = Path(__file__).resolve().parent
    for mod in pkgutil.iter_modules([str(root)]):
        if mod.ispkg and (root / mod.name / "experiments.py").is_file():
            importlib.import_module(f"{__package__}.{mod.name}.experiments")
    return registry()


def registry() -> dict[str, Experiment]:
    return dict(sorted(_REGISTRY.items(), key=lambda kv: (kv[1].lesson, kv[0])))


def _write_text_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    os.fchmod(fd, shared_file_mode())  # mkstemp makes 0600; the page is as readable as its PNGs
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


_REPORT_FILES = ("index.html", "results.json")


class ReportInterrupted(KeyboardInterrupt):
    """A report run stopped by SIGINT or SIGTERM.  The earlier report is untouched; the experiments
    that finished are in :attr:`saved_to` (None when none had)."""

    def __init__(self, message: str, signum: int, saved_to: Path | None):
        super().__init__(message)
        self.signum = signum
        self.saved_to = saved_to


def prepare_out(out: str | os.PathLike) -> Path:
    """Check the report folder before anything is measured; return it as an absolute path.

    ``out`` may not exist yet, may be empty, or may hold an earlier report of this course.  Nothing in
    it is changed here: :func:`run_report` writes into a fresh working folder beside it and puts the new
    report in its place only once complete.  Anything else (a file, a folder of other things, a
    place whose folder can't be written) is refused with a :class:`BadInputError` saying why.
    """
    out = validate_output_folder(out, "--out")      # a name that fits, not a file, a folder that can be written
    try:
        if out.is_dir() and any(out.iterdir()) and not all((out / f).is_file() for f in _REPORT_FILES):
            raise BadInputError(f"--out {out} already holds files that are not a report of this course: "
                                "name a new or empty folder, so nothing of yours is overwritten")
    except OSError as exc:
        raise BadInputError(f"--out {out} cannot be read ({exc.strerror or exc}): choose another folder") from None
    return out


def _stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


def _keep_unfinished(out: Path) -> None:
    """Working folders of runs killed outright (SIGKILL, a power cut) are renamed ``<out>.interrupted-...``."""
    for work in out.parent.glob(f".{glob.escape(out.name)}.running-*"):
        try:
            pid = int(work.name.rsplit("-", 2)[-2])
            os.kill(pid, 0)
            continue  # that run is still going
        except (ValueError, IndexError, ProcessLookupError):
            pass
        except PermissionError:
            continue
        try:
            os.rename(work, out.parent / f"{out.name}.interrupted-{_stamp()}-{work.name.rsplit('-', 1)[-1]}")
        except OSError:
            pass


def _put_in_place(work: Path, out: Path) -> None:
    """Replace ``out`` by the finished ``work`` folder.  Files of the user's own in an earlier report's
    folder (not the page, its JSON, its PNGs or ``results/``) move into the new one."""
    old = None
    if out.is_dir():
        for p in out.iterdir():
            report_file = p.name in _REPORT_FILES or p.name == "results" or p.suffix == ".png"
            if not report_file and not (work / p.name).exists():
                os.rename(p, work / p.name)
        old = out.parent / f".{out.name}.previous-{os.getpid()}-{_stamp()}"
        try:
            os.rename(out, old)
        except OSError:  # a mount point, the current folder on some systems: replace its contents instead
            for p in out.iterdir():  # only the earlier report's files are left in it
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink()
            for p in work.iterdir():
                os.rename(p, out / p.name)
            work.rmdir()
            return
    os.rename(work, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


class _Signals:
    """SIGINT and SIGTERM raise KeyboardInterrupt while measuring; while ``holding`` (making the working
    folder, putting the finished report in place) they are only recorded."""

    def __init__(self):
        self.received: int | None = None
        self.holding = False
        self.saved: dict[int, object] = {}

    def _handler(self, signum, frame):
        self.received = self.received or signum
        if not self.holding:
            raise KeyboardInterrupt(signal.Signals(signum).name)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.saved[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc):
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)
        return False


@arguments(quick=OneOf(True, False, SMOKE), record_reference=OneOf(True, False),
           show_progress=OneOf(True, False))
def run_report(out: str | os.PathLike, quick: bool | str = True, only: list[str] | None = None,
               devices: list[str] | None = None, record_reference: bool = False,
               show_progress: bool = True, reference_dir: str | os.PathLike | None = None) -> Path:
    """Run the registered experiments and write ``index.html`` + ``results.json`` + PNGs to ``out``.

    Returns the path of ``index.html``.  ``out`` is checked before anything is measured
    (:func:`prepare_out`).  The run writes into a fresh working folder beside ``out``
    (``.<out>.running-<pid>-...``), saving each experiment's result set to ``results/<name>.json`` as soon
    as it finishes (and, with ``record_reference``, its GPU records as a reference in ``reference_dir``,
    by default ``course/reference/``); only when all have run does that folder replace ``out``, so an earlier report
    stays whole until the new one is complete.  An experiment that fails is reported in the page with
    its error and the others still run.  Stopped by SIGINT or SIGTERM, the run leaves ``out`` as it
    was, moves what it finished to ``<out>.interrupted-<date>/`` (with its own page) and raises
    :class:`ReportInterrupted` saying where.
    """
    from tqdm.auto import tqdm

    exps = discover()
    if only is not None:
        if not only:
            raise BadInputError(f"--only needs at least one experiment name; known: {sorted(exps)}")
        unknown = sorted(set(only) - set(exps))
        if unknown:
            raise BadInputError(f"unknown experiment(s) {unknown}; known: {sorted(exps)}")
        exps = {k: v for k, v in exps.items() if k in only}
    if devices is None:
        devices = ["cpu"] + (["gpu"] if gpu_available() else [])
    if record_reference and not gpu_available():
        raise BadInputError("--record-reference needs a GPU that answers; none does here")
    if "gpu" in devices and not gpu_available():
        raise BadInputError(f"--gpu-only needs a GPU that answers; none does here ({gpu_unavailable_reason()})")
    out = prepare_out(out)
    _keep_unfinished(out)

    def prog(iterable=None, total=None, desc=None):
        return tqdm(iterable, total=total, desc=desc, leave=False, disable=not show_progress,
                    file=sys.stderr)

    sections, sets, failures = [], [], []
    with _Signals() as signals:
        signals.holding = True
        work = Path(tempfile.mkdtemp(prefix=f".{out.name}.running-{os.getpid()}-", dir=out.parent))
        os.chmod(work, shared_file_mode() | (shared_file_mode() & 0o444) >> 2)  # mkdtemp makes 0700
        (work / "results").mkdir()
        signals.holding = False
        try:
            if signals.received:
                raise KeyboardInterrupt
            bar = tqdm(list(exps.values()), desc="experiments", disable=not show_progress, file=sys.stderr)
            for exp in bar:
                bar.set_postfix_str(exp.name)
                sections.append(_run_one(exp, work, devices, quick, prog, record_reference and (reference_dir or True),
                                         sets, failures))
        except KeyboardInterrupt:
            signals.holding = True
            signum = signals.received or signal.SIGINT
            raise _interrupted(work, out, sections, sets, failures, quick, devices, signum) from None
        signals.holding = True
        _write_pages(work, sections, sets, failures, quick, devices)
        try:
            _put_in_place(work, out)
        except OSError as exc:
            kept = out.parent / f"{out.name}.new-{_stamp()}-{os.getpid()}"
            os.rename(work, kept)
            raise BadInputError(f"the new report could not replace {out} ({exc.strerror or exc}); it is complete "
                                f"in {kept}") from None
    return out / "index.html"


def _run_one(exp, work, devices, quick, prog, record_reference, sets, failures):
    """Run one experiment; ``record_reference``: False, True (course/reference/) or a folder."""
    t0 = time.perf_counter()
    try:
        rs = exp.run(devices=devices, quick=quick, progress=prog)
        if rs.experiment != exp.name:   # its references are stored and found under the experiment's name
            raise BadInputError(f"experiment {exp.name!r} returned a ResultSet named {rs.experiment!r}; "
                                f"name it {exp.name!r} (ResultSet({exp.name!r}, ...)) so that its GPU "
                                "references are recorded and found under that name")
        rs.save(work / "results" / f"{exp.name}.json")  # kept, whatever happens to the rest
        refs = load_reference(exp.name)
        sets.append(rs)
        sets.extend(refs)
        png, takeaway = None, ""
        if exp.plotter is not None:
            fig = exp.plotter(rs, refs)
            takeaway = figure_takeaway(fig)                  # read before figure_to_png closes it
            png = f"{exp.name}.png"
            (work / png).write_bytes(figure_to_png(fig, dpi=100))
        if record_reference and rs.select(device="gpu"):
            save_reference(rs, None if record_reference is True else record_reference)
        return (exp, rs, refs, (png, takeaway), time.perf_counter() - t0, None)
    except Exception as exc:
        failures.append(exp.name)
        return (exp, None, [], (None, ""), time.perf_counter() - t0,
                "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))


def _write_pages(work, sections, sets, failures, quick, devices, interrupted: str = "") -> None:
    prov = provenance()
    doc = {"provenance": prov, "quick": quick, "devices": devices, "failures": failures,
           "result_sets": merge(sets)}
    if interrupted:
        doc["interrupted"] = interrupted
    _write_text_atomic(work / "results.json", json.dumps(doc, indent=1, allow_nan=False) + "\n")
    _write_text_atomic(work / "index.html", _html(sections, prov, quick, devices, interrupted))


def _interrupted(work, out, sections, sets, failures, quick, devices, signum) -> ReportInterrupted:
    name = signal.Signals(signum).name
    earlier = "the earlier report in it is untouched" if (out / "index.html").is_file() else "nothing was written there"
    drawn = {section[0].name for section in sections}
    undrawn = sorted(p.stem for p in (work / "results").glob("*.json") if p.stem not in drawn)
    if not sections and not undrawn:         # nothing measured was saved: nothing to keep
        shutil.rmtree(work, ignore_errors=True)
        return ReportInterrupted(f"stopped by {name} before any experiment finished: {out} was not changed "
                                 f"({earlier})", signum, None)
    saved = out.parent / f"{out.name}.interrupted-{_stamp()}"
    if saved.exists():
        saved = saved.with_name(f"{saved.name}-{os.getpid()}")
    said = f"stopped by {name} after {len(sections)} experiment(s)" + (
        f"; the results of {', '.join(undrawn)} were saved (results/<name>.json) before the figure was drawn"
        if undrawn else "")
    try:
        _write_pages(work, sections, sets, failures, quick, devices, interrupted=said)
        os.rename(work, saved)
    except OSError:
        saved = work
    return ReportInterrupted(f"{said}: {out} was not changed ({earlier}); what finished is in {saved}", signum, saved)


def _html(sections, prov, quick, devices, interrupted: str = "") -> str:
    e = html.escape
    cpu = cpu_info()
    gpus = gpu_info()
    rows = [f"<li>CPU: {e(cpu['model'])}, {cpu['logical_cores']} logical cores, "
            f"SIMD {cpu['simd_width_bits']}-bit</li>"]
    rows += [f"<li>GPU: {e(g['name'])}, {g['multiprocessors']} SMs, driver {g['driver_version']}, "
             f"runtime {g['runtime_version']}</li>" for g in gpus]
    if not gpus:
        rows.append("<li>No GPU answered here: GPU curves, where shown, are reference results "
                    "recorded elsewhere and labelled so.</li>")
    libs = ", ".join(f"{e(k)} {e(v)}" for k, v in prov["libraries"].items())
    size = quick if isinstance(quick, str) else "quick" if quick else "full"
    parts = [
        "<!doctype html><meta charset='utf-8'><title>How GPUs accelerate backpropagation: report</title>",
        "<style>body{font-family:sans-serif;max-width:1000px;margin:auto;padding:1em}"
        "img{max-width:100%}pre{background:#fee;padding:.5em;overflow:auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px}</style>",
        "<h1>How GPUs accelerate backpropagation: measurement report</h1>",
        f"<p>Run {e(prov['date'])} ({size} sizes) on devices {e(', '.join(devices))}.</p>",
        f"<ul>{''.join(rows)}</ul><p><small>Python {e(prov['python'])}; {libs}</small></p>",
        "<p>All numbers are in <code>results.json</code> with their provenance.</p>",
    ]
    if interrupted:
        parts.append(f"<p><b>This run was {e(interrupted)}: the experiments below are those that finished.</b></p>")
    for exp, rs, refs, (png, takeaway), secs, err in sections:
        parts.append(f"<h2>Lesson {e(exp.lesson)}: {e(exp.title)}</h2>")
        if exp.description:
            parts.append(f"<p>{e(exp.description)}</p>")
        if err:
            parts.append(f"<p><b>This experiment failed</b> after {secs:.1f} s:</p><pre>{e(err)}</pre>")
            continue
        if png:
            parts.append(f"<img src='{e(png)}' alt='{e(takeaway or exp.title)}'>")
            if takeaway:
                parts.append(f"<p><b>{e(takeaway)}</b></p>")
        for ref in refs:
            parts.append(f"<p><small>Dashed curves: reference results {e(ref.label)}.</small></p>")
            parts += [f"<p><small><i>{e(note)}</i></small></p>" for note in ref.notes if "left out" in note]
        for note in rs.notes:
            parts.append(f"<p><i>{e(note)}</i></p>")
        parts.append(f"<p><small>{len(rs.records)} records, {secs:.1f} s.</small></p>")
    return "\n".join(parts) + "\n"
