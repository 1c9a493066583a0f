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

import html
import importlib
import json
import os
import pkgutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .cpu import cpu_info
from .devices import gpu_available, gpu_info, gpu_unavailable_reason
from .errors import BadInputError
from .plots import figure_to_png
from .results import ResultSet, load_reference, merge, provenance, save_reference

__all__ = ["Experiment", "experiment", "registry", "discover", "run_report", "prepare_out"]


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


def experiment(name: str, title: str, lesson: str) -> Callable[[Callable[..., ResultSet]], Experiment]:
    """Register ``run(devices, quick, progress) -> ResultSet`` under ``name``."""
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
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


_REPORT_FILES = ("index.html", "results.json")


def prepare_out(out: str | os.PathLike) -> Path:
    """Check the report folder before anything is measured, and empty it of an earlier report.

    ``out`` may not exist yet, may be empty, or may hold an earlier report of this course (its
    ``index.html``, ``results.json``, ``results/`` and PNGs are then removed, so two runs never mix).
    Anything else (a file, a folder of other things, a folder that can't be written) is refused
    with a :class:`BadInputError` saying why.
    """
    if out is None or str(out).strip() == "":
        raise BadInputError("--out must name a folder for the report (e.g. --out report)")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise BadInputError(f"--out {out} is a file, not a folder: name a folder for the report")
    if out.is_dir() and any(out.iterdir()):
        earlier = all((out / f).is_file() for f in _REPORT_FILES)
        if not earlier:
            raise BadInputError(f"--out {out} already holds files that are not a report of this course: "
                                "name a new or empty folder, so nothing of yours is overwritten")
        for p in out.iterdir():
            if p.name in _REPORT_FILES or (p.suffix == ".png" and p.is_file()):
                p.unlink()
            elif p.name == "results" and p.is_dir():
                for q in p.glob("*.json"):
                    q.unlink()
                p.rmdir()
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=out, prefix=".write-test-", delete=True)
        probe.close()
    except OSError as exc:
        raise BadInputError(f"--out {out} cannot be written ({exc.strerror or exc}): choose another folder") from None
    return out


def run_report(out: str | os.PathLike, quick: bool = True, only: list[str] | None = None,
               devices: list[str] | None = None, record_reference: bool = False,
               show_progress: bool = True) -> Path:
    """Run the registered experiments and write ``index.html`` + ``results.json`` + PNGs to ``out``.

    Returns the path of ``index.html``.  ``out`` is checked before anything is measured
    (:func:`prepare_out`).  Each experiment's result set is saved to ``out/results/<name>.json``
    as soon as it finishes; an experiment that fails is reported in the page with its error and
    the others still run; ``results.json`` and ``index.html`` are written atomically at the end.
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
    (out / "results").mkdir()

    def prog(iterable=None, total=None, desc=None):
        return tqdm(iterable, total=total, desc=desc, leave=False, disable=not show_progress,
                    file=sys.stderr)

    sections, sets, failures = [], [], []
    bar = tqdm(list(exps.values()), desc="experiments", disable=not show_progress, file=sys.stderr)
    for exp in bar:
        bar.set_postfix_str(exp.name)
        t0 = time.perf_counter()
        try:
            rs = exp.run(devices=devices, quick=quick, progress=prog)
            rs.save(out / "results" / f"{exp.name}.json")  # kept, whatever happens to the rest
            refs = load_reference(exp.name)
            sets.append(rs)
            sets.extend(refs)
            png = None
            if exp.plotter is not None:
                png_bytes = figure_to_png(exp.plotter(rs, refs), dpi=100)
                png = f"{exp.name}.png"
                (out / png).write_bytes(png_bytes)
            if record_reference and rs.select(device="gpu"):
                save_reference(rs)
            sections.append((exp, rs, refs, png, time.perf_counter() - t0, None))
        except Exception as exc:
            failures.append(exp.name)
            sections.append((exp, None, [], None, time.perf_counter() - t0,
                             "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))))

    prov = provenance()
    doc = {"provenance": prov, "quick": quick, "devices": devices, "failures": failures,
           "result_sets": merge(sets)}
    _write_text_atomic(out / "results.json", json.dumps(doc, indent=1, allow_nan=False) + "\n")
    _write_text_atomic(out / "index.html", _html(sections, prov, quick, devices))
    return out / "index.html"


def _html(sections, prov, quick, devices) -> str:
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
    parts = [
        "<!doctype html><meta charset='utf-8'><title>How GPUs accelerate backpropagation: report</title>",
        "<style>body{font-family:sans-serif;max-width:1000px;margin:auto;padding:1em}"
        "img{max-width:100%}pre{background:#fee;padding:.5em;overflow:auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px}</style>",
        "<h1>How GPUs accelerate backpropagation: measurement report</h1>",
        f"<p>Run {e(prov['date'])} ({'quick' if quick else 'full'} sizes) on devices {e(', '.join(devices))}.</p>",
        f"<ul>{''.join(rows)}</ul><p><small>Python {e(prov['python'])}; {libs}</small></p>",
        "<p>All numbers are in <code>results.json</code> with their provenance.</p>",
    ]
    for exp, rs, refs, png, secs, err in sections:
        parts.append(f"<h2>Lesson {e(exp.lesson)}: {e(exp.title)}</h2>")
        if exp.description:
            parts.append(f"<p>{e(exp.description)}</p>")
        if err:
            parts.append(f"<p><b>This experiment failed</b> after {secs:.1f} s:</p><pre>{e(err)}</pre>")
            continue
        if png:
            parts.append(f"<img src='{e(png)}' alt='{e(exp.title)}'>")
        for ref in refs:
            parts.append(f"<p><small>Dashed curves: reference results {e(ref.label)}.</small></p>")
        for note in rs.notes:
            parts.append(f"<p><i>{e(note)}</i></p>")
        parts.append(f"<p><small>{len(rs.records)} records, {secs:.1f} s.</small></p>")
    return "\n".join(parts) + "\n"
