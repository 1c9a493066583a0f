"""One command that checks a GPU machine end to end: ``python -m course gpu-check --out DIR``.

It runs, in order, writing everything under ``DIR``:

1. **the environment**: the devices, the library versions, and a check that the headless
   paths (the report, this command, every experiment module) import no widget or notebook
   package (``environment.json``);
2. **the GPU tests**: ``pytest -m gpu`` over the course's ``tests/`` folder, with the
   project's pytest options switched off so that neither nbval nor Jupyter is needed
   (``gpu-tests.txt``, ``gpu-tests.xml``);
3. **every benchmark** in ``benchmarks/`` (they time the course against its GPU peers:
   CuPy's own routines, PyTorch CUDA, cuDNN's ``nn.RNN``, the device-to-device copy):
   ``bench/<name>.txt`` and ``bench/<name>.json``;
4. **the GPU targets**, measured here (:data:`TARGETS`): each figure against its target
   (``targets.json``), and the launch latency, crossover size and roofline peaks reported
   next to the device's data-sheet figures;
5. **the full report** with ``--record-reference`` (``report/``; the GPU results are stored
   in ``course/reference/`` for learners without a GPU).

``summary.md`` and ``summary.json`` list each step and each figure against its target.
The exit status is 0 when everything passed, 1 when a step failed or a target was missed,
and 3 when no GPU answered: then only step 1 runs, the GPU tests are listed (not run), and
the summary says, first of all, that no GPU answered and why.  Nothing needs the network.

>>> sorted(TARGETS)[:2]
['block_scan_vs_cumsum', 'bppsa_vs_cudnn']
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .arguments import OneOf, arguments
from .devices import gpu_available, gpu_info, gpu_unavailable_reason
from .errors import validate_output_folder

__all__ = ["TARGETS", "BLOCK_SCAN_VS_CUMSUM", "RELU_VS_COPY", "NO_GPU_STATUS", "HEADLESS_FORBIDDEN",
           "headless_imports", "pytest_gpu_command", "measure_targets", "run_gpu_check"]

#: Exit status when no GPU answered.
NO_GPU_STATUS = 3
#: Packages the headless paths must not import (a bare GPU box has none of them).
HEADLESS_FORBIDDEN = ("ipywidgets", "IPython", "ipykernel", "jupyter_client", "nbformat", "nbval",
                      "jupyterlab", "notebook", "comm")
#: The bounds, defined here once: ``benchmarks/bench_scan.py`` and ``bench_vectorize.py`` judge the same
#: figures against them (the training step's bound is lesson 01's ``TARGET_GPU``).
BLOCK_SCAN_VS_CUMSUM = 0.5   # numba block scan's throughput / cupy.cumsum's, at least
RELU_VS_COPY = 0.85          # ReLU's bandwidth / the device-to-device copy's, at least
#: The GPU targets: what is measured, and the bound it must meet.
TARGETS = {
    "train_step_vs_torch": "one SGD step 784-512-512-10, batch 256: CuPy time / PyTorch CUDA time <= 1.2",
    "relu_vs_copy": "ReLU into a preallocated output, 2^26 float32 (the course's kernel with 16-byte loads; "
                    f"cupy.maximum beside it): >= {RELU_VS_COPY:.0%} of the device-to-device copy bandwidth",
    "block_scan_vs_cumsum": f"numba block scan, 2^26 float32: >= {BLOCK_SCAN_VS_CUMSUM:.0%} of cupy.cumsum's "
                            "throughput",
    "bppsa_vs_sequential": "BPPSA backward without copies (course.bppsa.fast) vs the course's sequential loop, "
                           "T = 30,000, hidden 20, batch 16: >= 108x (reported beside the cuDNN baseline)",
    "bppsa_vs_cudnn": "BPPSA backward without copies faster than cuDNN's nn.RNN backward at T = 10,000 and 30,000 "
                      "(benchmarks/bench_gpu_scan.py: >= 1x from T = 1,000, >= 10x at 30,000)",
    "latency_crossover_roofline": "launch latency, add crossover size, roofline peaks: reported beside the "
                                  "device's data-sheet figures (no target)",
}
_HEADLESS_CODE = (
    "import sys, json\n"
    "import course.gpu_machine, course.__main__, course.report as r\n"
    "r.discover()\n"
    "bad = sorted({m.split('.')[0] for m in sys.modules} & set(json.loads(sys.argv[1])))\n"
    "print(json.dumps(bad))\n"
)


def headless_imports() -> list[str]:
    """The widget/notebook packages that importing the headless paths pulls in (should be ``[]``).

    Runs in a fresh interpreter, so that what this process already imported does not count.

    >>> headless_imports()
    []
    """
    res = subprocess.run([sys.executable, "-c", _HEADLESS_CODE, json.dumps(HEADLESS_FORBIDDEN)],
                         capture_output=True, text=True, timeout=300, env=_env())
    if res.returncode != 0:
        raise RuntimeError(f"importing the headless paths failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _env() -> dict:
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONUNBUFFERED="1")
    return env


def _project_root() -> Path | None:
    """The checkout this course runs from (it has ``tests/`` and ``benchmarks/``), if any."""
    root = Path(__file__).resolve().parent.parent
    return root if (root / "tests").is_dir() else None


def _versions() -> dict:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for dist in ("numpy", "scipy", "matplotlib", "scikit-learn", "numba", "numba-cuda", "torch", "pytest",
                 "hypothesis", "ipywidgets", "nbval", "jupyterlab"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    cupy = [d.metadata["Name"] for d in metadata.distributions() if (d.metadata["Name"] or "").startswith("cupy")]
    out["cupy"] = {name: metadata.version(name) for name in cupy} or None
    return out


def _run(cmd: list[str], log: Path, timeout: float) -> dict:
    """Run one command, its output into ``log``; returns ``{"cmd", "status", "seconds", "log"}``."""
    t0 = time.perf_counter()
    with open(log, "w", encoding="utf-8") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        try:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout, env=_env(),
                                cwd=_project_root()).returncode
        except subprocess.TimeoutExpired:
            f.write(f"\n... stopped after {timeout:.0f} s\n")
            rc = 124
    return {"cmd": " ".join(cmd), "status": rc, "seconds": round(time.perf_counter() - t0, 1), "log": log.name}


@arguments(collect_only=OneOf(True, False))
def pytest_gpu_command(junit: Path | None = None, collect_only: bool = False) -> list[str]:
    """``pytest -m gpu`` over the course's tests, needing neither nbval nor Jupyter.

    ``-o addopts=`` drops the project's own options (nbval's among them) and ``-p no:nbval``
    keeps nbval out where it is installed; no notebook is collected.  A test module that cannot
    be imported here (one that needs ipywidgets on a box without it) is reported as an error
    and the others still run.

    >>> "addopts=" in pytest_gpu_command()
    True
    """
    root = _project_root()
    cmd = [sys.executable, "-m", "pytest", "-m", "gpu", str(root / "tests") if root else "tests",
           "-o", "addopts=", "-p", "no:cacheprovider", "-q", "-rfEs", "--continue-on-collection-errors"]
    if _has("pytest_randomly"):
        cmd += ["-p", "no:randomly"]
    if _has("nbval"):
        cmd += ["-p", "no:nbval"]
    if collect_only:
        cmd.append("--collect-only")
    if junit is not None:
        cmd.append(f"--junitxml={junit}")
    return cmd


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


# ------------------------------------------------------------------ the targets, measured on the GPU

def _target(value: float | None, bound: float, kind: str, unit: str, **extra: Any) -> dict:
    met = None if value is None else (value <= bound if kind == "<=" else value >= bound)
    return {"value": value, "target": f"{kind} {bound:g}{unit}", "met": met, "unit": unit, **extra}


def _train_step(quick: bool) -> dict:
    from .backprop.bench import TARGET_GPU, compare_with_torch

    r = compare_with_torch(device="gpu", rounds=2 if quick else 5, repeat=5 if quick else 10)
    if r["ratio"] is None:
        return _target(None, TARGET_GPU, "<=", "x", note=r["note"].strip(), ours_s=r["ours_s"])
    return _target(r["ratio"], TARGET_GPU, "<=", "x", ours_s=r["ours_s"], torch_s=r["torch_s"])


def _relu(quick: bool) -> dict:
    from .vectorize.timing import relu_bandwidth

    r = relu_bandwidth(n=2**26, dtype="float32", device="gpu", rounds=2 if quick else 5, repeat=5 if quick else 10,
                       budget_s=10.0)
    return _target(r.get("vector_fraction"), RELU_VS_COPY, ">=", "", relu_gb_per_s=r.get("vector_gb_per_s"),
                   copy_gb_per_s=r["copy_gb_per_s"], cupy_maximum_fraction=r["out_fraction"],
                   new_array_fraction=r.get("new_fraction"))


def _block_scan(quick: bool) -> dict:
    import numpy as np

    from .devices import get_xp, to_numpy
    from .scan.kernels import block_scan
    from .scan.timing import make_input
    from .timing import benchmark

    cp = get_xp("gpu")
    n = 2**26
    x = make_input(n, "add", "float32", "gpu")
    ref = to_numpy(cp.cumsum(x.astype(cp.float64)))
    got = to_numpy(block_scan(x, exclusive=False))
    err = float(np.max(np.abs(got - ref)) / max(float(np.max(np.abs(ref))), 1.0))
    times: dict[str, list] = {"cupy.cumsum": [], "scan-then-add": [], "reduce-then-scan": []}
    for _ in range(2 if quick else 5):             # alternating rounds: both see the same GPU state
        times["cupy.cumsum"] += benchmark(cp.cumsum, x, device="gpu", repeat=5).samples.tolist()
        for st in ("scan-then-add", "reduce-then-scan"):
            times[st] += benchmark(block_scan, x, exclusive=False, strategy=st, device="gpu",
                                   repeat=5).samples.tolist()
    med = {k: float(np.median(v)) for k, v in times.items()}
    best = min(("scan-then-add", "reduce-then-scan"), key=med.get)
    return _target(med["cupy.cumsum"] / med[best], BLOCK_SCAN_VS_CUMSUM, ">=", "", kernel=best, medians_s=med,
                   max_relative_error=err, agrees=err < 1e-3)


def _bppsa(quick: bool) -> tuple[dict, dict]:
    from .bppsa.timing import PAPER, rnn_timings, torch_rnn_timings
    from .torch_peer import cupy_tf32, torch_cuda_available

    seq_over_scan, torch_vs_scan, notes = None, {}, []
    for T in (10000, 30000):
        r = rnn_timings(T, 20, 16, device="gpu", methods=("sequential", "fast"), repeat=3 if quick else 5)
        back = r["backward_s"] | {"scan": r["backward_s"]["fast"]}
        if T == 30000 and back["scan"] > 0:
            seq_over_scan = back["sequential"] / back["scan"]
        if torch_cuda_available():
            tr = torch_rnn_timings(T, 20, 16, device="gpu", repeat=3 if quick else 5)
            torch_vs_scan[T] = {"torch_backward_s": tr["backward_s"], "scan_backward_s": back["scan"],
                                "scan_faster": back["scan"] < tr["backward_s"], "torch_tf32": tr["tf32"],
                                "scan_tf32": cupy_tf32()}
        else:
            notes.append("PyTorch has no CUDA here: cuDNN's RNN was not timed")
    a = _target(seq_over_scan, PAPER["backward_speedup"], ">=", "x")
    met = all(v["scan_faster"] for v in torch_vs_scan.values()) if len(torch_vs_scan) == 2 else None
    b = {"value": None, "target": "scan backward < cuDNN backward at T = 10,000 and 30,000", "met": met,
         "unit": "", "per_T": torch_vs_scan, "note": "; ".join(notes)}
    return a, b


def _reported(quick: bool) -> dict:
    from .hardware.machine import VENDOR_GPUS, vendor_bandwidth
    from .throughput.latency import smallest_op_latency
    from .throughput.ops import crossover, throughput_sweep
    from .throughput.roofline import measure_peaks, peaks_of

    g = gpu_info()[0]
    lat = smallest_op_latency("gpu", repeat=100 if quick else 300)
    sweep = throughput_sweep("add", devices=["cpu", "gpu"], repeat=3 if quick else 5)
    cross = crossover(sweep)
    peaks = peaks_of(measure_peaks("gpu", dtypes=("float32", "float16"), quick=quick), "gpu")
    sheet = next((v for v in VENDOR_GPUS if _same_model(v["name"], g["name"])), None)
    lanes, clock = g.get("fp32_lanes"), g.get("clock_mhz")
    return {"value": None, "target": "reported", "met": None, "unit": "",
            "launch_latency_us": {r["what"]: r["median_s"] * 1e6 for r in lat.records},
            "add_crossover_n": cross.n, "add_crossover": cross.message,
            "peak_bandwidth_gb_per_s": (peaks["bandwidth"] or 0) / 1e9,
            "peak_gflops": {k: v / 1e9 for k, v in peaks["flops"].items()},
            "datasheet_bandwidth_gb_per_s": (vendor_bandwidth(g["name"]) or 0) / 1e9 or None,
            "datasheet_entry": sheet,
            "fp32_gflops_from_properties": 2 * lanes * clock / 1e3 if lanes and clock else None,
            "datasheet_source": "vendors' data sheets, as listed in course.hardware (labelled, not measured)"}


def _same_model(sheet_name: str, device_name: str) -> bool:
    """True when the model number of a data-sheet entry (T4, 2080, A100, H100...) is a word of the device's name.

    >>> h100 = "NVIDIA H100 80GB HBM3"
    >>> _same_model("NVIDIA H100 SXM5", h100), _same_model("NVIDIA A100 SXM4 80GB", h100)
    (True, False)
    """
    import re

    model = next((t for t in sheet_name.split() if re.fullmatch(r"[A-Z]+\d+|\d{4}", t)), None)
    return bool(model and re.search(rf"(?<![A-Za-z0-9]){model}(?![A-Za-z0-9])", device_name, re.IGNORECASE))


@arguments(quick=OneOf(True, False))
def measure_targets(quick: bool = False, progress: Callable[[str], None] = print) -> dict:
    """Measure every GPU target (:data:`TARGETS`); one failure is recorded and the rest still run."""
    out: dict[str, dict] = {}
    steps = [("train_step_vs_torch", _train_step), ("relu_vs_copy", _relu), ("block_scan_vs_cumsum", _block_scan),
             ("bppsa", _bppsa), ("latency_crossover_roofline", _reported)]
    for name, fn in steps:
        progress(f"  measuring {name} ...")
        try:
            res = fn(quick)
            if name == "bppsa":
                out["bppsa_vs_sequential"], out["bppsa_vs_cudnn"] = res
            else:
                out[name] = res
        except Exception as exc:
            err = {"value": None, "met": False, "error": "".join(traceback.format_exception_only(type(exc), exc))}
            for key in (("bppsa_vs_sequential", "bppsa_vs_cudnn") if name == "bppsa" else (name,)):
                out[key] = dict(err)
    for key, what in TARGETS.items():
        out.setdefault(key, {"value": None, "met": None})["what"] = what
    return out


# ------------------------------------------------------------------ the command

def _fmt(v: Any) -> str:
    if v is None:
        return "not measured"
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def _summary_md(doc: dict) -> str:
    lines = ["# GPU check", ""]
    if not doc["gpu"]:
        lines += [f"**NO GPU ANSWERED: {doc['no_gpu_reason']}.** Nothing was measured on a GPU; only the "
                  "environment was checked and the GPU tests were listed (not run).", ""]
    else:
        lines += [f"GPU: {', '.join(g['name'] for g in doc['gpus'])}; driver {doc['gpus'][0]['driver_version']}, "
                  f"CUDA runtime {doc['gpus'][0]['runtime_version']}.", ""]
    lines += [f"Run {doc['date']} ({'quick' if doc['quick'] else 'full'}), status {doc['status']}.", "",
              "## Steps", "", "| step | status | seconds | log |", "|---|---|---|---|"]
    for name, st in doc["steps"].items():
        lines.append(f"| {name} | {st.get('status')} | {st.get('seconds', '')} | {st.get('log', '')} |")
    if doc["targets"]:
        lines += ["", "## GPU targets", "", "| target | measured | bound | met |", "|---|---|---|---|"]
        for name, t in doc["targets"].items():
            lines.append(f"| {t.get('what', name)} | {_fmt(t.get('value'))} | {t.get('target', '')} | "
                         f"{'error: ' + t['error'].strip() if t.get('error') else t.get('met')} |")
    if doc.get("benchmark_targets"):
        lines += ["", "## Benchmarks: their figures against their targets (a benchmark exits 1 when it "
                  "misses one)", ""]
        for name, found in doc["benchmark_targets"].items():
            lines += [f"### {name}", "", "```", *(found or ["(no line mentions a target)"]), "```", ""]
    lines += ["", "## Environment", "", "```", json.dumps(doc["environment"], indent=1, default=str), "```", ""]
    return "\n".join(lines)


def run_gpu_check(out: str | os.PathLike, quick: bool = False, skip: tuple[str, ...] = (),
                  timeout_s: float = 3600.0, progress: Callable[[str], None] = print) -> int:
    """Run the whole check (see the module docstring), write ``out/summary.md``; return the exit status.

    ``skip`` may name steps to leave out: ``"tests"``, ``"benchmarks"``, ``"targets"``, ``"report"``.
    """
    out = validate_output_folder(out, "--out")      # refused at once: a file, a name too long, no way to write
    (out / "bench").mkdir(parents=True, exist_ok=True)
    gpu = gpu_available()
    doc: dict[str, Any] = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "quick": quick, "gpu": gpu,
                           "no_gpu_reason": "" if gpu else gpu_unavailable_reason(), "gpus": gpu_info(),
                           "steps": {}, "targets": {}, "benchmark_targets": {}, "environment": {}}
    root = _project_root()
    progress("GPU check: " + (f"GPU {gpu_info()[0]['name']} answers" if gpu else
                              f"NO GPU ANSWERED ({gpu_unavailable_reason()})"))
    env = {"versions": _versions(), "platform": platform.platform(), "project_checkout": bool(root)}
    try:
        env["headless_imports"] = headless_imports()
        ok = not env["headless_imports"]
    except Exception as exc:
        env["headless_imports"], ok = f"failed: {exc}", False
    doc["environment"] = env
    doc["steps"]["environment"] = {"status": 0 if ok else 1, "log": "environment.json"}
    (out / "environment.json").write_text(json.dumps(env, indent=1, default=str) + "\n", encoding="utf-8")

    if not gpu:
        if root is not None and _has("pytest"):
            progress("listing the GPU tests (they are not run without a GPU) ...")
            doc["steps"]["gpu tests (listed only)"] = _run(pytest_gpu_command(collect_only=True),
                                                           out / "gpu-tests.txt", 600)
        doc["status"] = NO_GPU_STATUS
    else:
        if "tests" not in skip:
            if root is None or not _has("pytest"):
                doc["steps"]["gpu tests"] = {"status": "skipped: no tests/ folder or no pytest here"}
            else:
                progress("running the GPU tests ...")
                doc["steps"]["gpu tests"] = _run(pytest_gpu_command(out / "gpu-tests.xml"),
                                                 out / "gpu-tests.txt", timeout_s)
        if "benchmarks" not in skip and root is not None:
            for bench in sorted((root / "benchmarks").glob("bench_*.py")):
                src = bench.read_text(encoding="utf-8")
                needs = [m for m in ("ipywidgets", "nbformat", "nbclient", "jupyter") if m in src and not _has(m)]
                if bench.stem == "bench_notebooks" or needs:   # Jupyter's: not part of a bare GPU box
                    doc["steps"][bench.stem] = {"status": f"skipped: needs {', '.join(needs) or 'Jupyter'}"}
                    continue
                progress(f"running {bench.name} ...")
                log = out / "bench" / f"{bench.stem}.txt"
                cmd = [sys.executable, str(bench), "--out", str(out / "bench" / f"{bench.stem}.json")]
                doc["steps"][bench.stem] = _run(cmd + (["--quick"] if quick and "--quick" in src else []), log,
                                                timeout_s)
                doc["steps"][bench.stem]["log"] = f"bench/{bench.stem}.txt"
                doc["benchmark_targets"][bench.stem] = [ln.strip() for ln in log.read_text(encoding="utf-8")
                                                        .splitlines() if "target" in ln.lower()][:40]
        if "targets" not in skip:
            progress("measuring the GPU targets ...")
            t0 = time.perf_counter()
            doc["targets"] = measure_targets(quick, progress)
            failed = any(t.get("met") is False for t in doc["targets"].values())
            doc["steps"]["targets"] = {"status": 1 if failed else 0, "seconds": round(time.perf_counter() - t0, 1),
                                       "log": "targets.json"}
            (out / "targets.json").write_text(json.dumps(doc["targets"], indent=1, default=str) + "\n",
                                              encoding="utf-8")
        if "report" not in skip:
            progress("running the full report with --record-reference ...")
            cmd = [sys.executable, "-m", "course", "report", "--out", str(out / "report"), "--record-reference"]
            doc["steps"]["report"] = _run(cmd + (["--quick"] if quick else []), out / "report.txt", timeout_s)
        doc["status"] = 0 if all(s.get("status") in (0, None) or str(s.get("status")).startswith("skipped")
                                 for s in doc["steps"].values()) else 1
    (out / "summary.json").write_text(json.dumps(doc, indent=1, default=str) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(_summary_md(doc), encoding="utf-8")
    progress(f"wrote {out / 'summary.md'}")
    if not gpu:
        progress(f"NO GPU ANSWERED: {doc['no_gpu_reason']}. Nothing was measured on a GPU "
                 f"(exit status {NO_GPU_STATUS}).")
    return int(doc["status"])
