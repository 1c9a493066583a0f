"""The course's whole GPU run, for a short lease on a GPU machine: one command, seven minutes, two files.

    tools/gpu_run.sh OUTDIR             # on the GPU machine
    tools/gpu_run.sh --dry-run OUTDIR   # here, on a CPU: the stand-in GPU, tiny sizes (a test runs it)

A GPU is lent rarely (15 minutes of machine time, start-up included, each command at most 10 minutes,
at most 8 files back).  This script runs, in priority order, each step in its own process under its
own deadline, and stops starting steps once the whole budget (:data:`BUDGET_S`) is spent:

1. ``probe``: Python, NumPy, CuPy (a real device call), numba-cuda, PyTorch, the driver and clocks
   (``nvidia-smi``), the course's own cuBLAS handle (one product against CuPy's) and the CUDA
   driver's graph-node calls; a package the course needs and the machine lacks is installed from
   ``.whl/`` (``tools/gpu_wheels.sh`` fetches them here) when that folder came along;
2. ``gpu-tests``: ``pytest -m gpu``, one process per module of the new GPU code, each with a timeout;
3. ``bench-scan``, ``bench-step``: ``benchmarks/bench_gpu_scan.py`` and ``bench_gpu_step.py`` at quick sizes;
4. ``latency``: the launch-latency rows (``launch_latency``, ``async_chain``), recorded as references;
5. ``record``: the report's ``backprop_train_step``, ``scan_kernel_variants``, ``scan_sweep``, ``bppsa_rnn``,
   ``bppsa_rnn_batch``, ``recurrence_sweep`` and ``attention_sweep`` (last: after the ladder and the scans)
   with ``--gpu-only --record-reference`` (quick sizes; each experiment's reference is written as soon as it
   finishes, so a deadline keeps what finished);
6. ``timelines``: a few steps of each rung of lesson 01's ladder and of PyTorch, kernel by kernel
   (PyTorch's profiler; last, because the profiler slows every later launch in the process);
7. ``full``: the two benchmarks again at full sizes, if time remains.

After every step everything so far is packed into two files in OUTDIR: ``gpu_run.tar.gz`` (each step's
log, the JSON results, the new files of ``course/reference/``, the probe) and ``summary.md`` (one row
per step: status, seconds, the lines that matter), so a kill at any moment still returns what
finished.  ``--dry-run`` runs the same steps on the stand-in GPU (``COURSE_STANDIN_GPU=1``: NumPy
posing as CuPy) at ``--smoke`` sizes, writes its references to a scratch folder (never
``course/reference/``), collects rather than runs the GPU tests, and skips what needs a real GPU
with a line each.  The exit status is 0 when no step failed (a step stopped at its deadline is not a
failure: the summary says it), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Seconds for the whole run, every step included (the lease's command limit is 10 minutes).
BUDGET_S = 420.0
#: The GPU tests of the new GPU code, one pytest process each.
GPU_TEST_MODULES = ("tests/test_capture.py", "tests/test_backprop_fast_step.py", "tests/test_bppsa_fast.py",
                    "tests/test_scan_singlepass.py", "tests/test_timing.py", "tests/test_bppsa_models.py",
                    "tests/test_throughput_latency.py", "tests/test_backprop_bench.py", "tests/test_attention_gpu.py")
#: pytest's exit status when it collected no test (a module without GPU tests): not a failure.
NO_TESTS = 5
#: The experiments re-recorded as references, in two steps.
LATENCY_EXPERIMENTS = ("launch_latency", "async_chain")
RECORD_EXPERIMENTS = ("backprop_train_step", "scan_kernel_variants", "scan_sweep", "bppsa_rnn", "bppsa_rnn_batch",
                      "recurrence_sweep", "attention_sweep")


class Run:
    """The steps so far, their logs and results, packed after each step."""

    def __init__(self, out: Path, dry_run: bool, budget_s: float):
        self.out, self.dry_run, self.budget_s = out, dry_run, budget_s
        self.began = time.monotonic()
        self.work = Path(tempfile.mkdtemp(prefix="gpu_run-"))
        (self.work / "logs").mkdir()
        (self.work / "results").mkdir()
        self.reference_dir = self.work / "reference" if dry_run else ROOT / "course" / "reference"
        self.rows: list[dict] = []
        self.started_wall = time.time()
        self.env = dict(os.environ, PYTHONUNBUFFERED="1", MPLBACKEND="Agg",
                        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        if dry_run:
            self.env["COURSE_STANDIN_GPU"] = "1"
            self.env.pop("COURSE_DISABLE_GPU", None)

    def left(self) -> float:
        return self.budget_s - (time.monotonic() - self.began)

    # ------------------------------------------------------------------ one step
    def step(self, name: str, cmd: list[str] | None, deadline_s: float, why_skipped: str = "",
             env: dict | None = None) -> dict:
        """Run ``cmd`` (a list, run from the repository root) under ``min(deadline_s, what is left)``."""
        log = self.work / "logs" / f"{len(self.rows):02d}-{name}.txt"
        row = {"step": name, "status": "skipped", "seconds": 0.0, "log": log.name, "note": why_skipped}
        if cmd is None:
            log.write_text(f"skipped: {why_skipped}\n", encoding="utf-8")
            print(f"[{name}] skipped: {why_skipped}", flush=True)
            return self._done(row)
        limit = min(deadline_s, self.left())
        if limit < 5:
            row["note"] = f"not started: {self.left():.0f} s of the {self.budget_s:.0f} s budget left"
            log.write_text(row["note"] + "\n", encoding="utf-8")
            print(f"[{name}] {row['note']}", flush=True)
            return self._done(row)
        print(f"[{name}] {' '.join(cmd)}  (deadline {limit:.0f} s)", flush=True)
        t0 = time.monotonic()
        with open(log, "w", encoding="utf-8") as f:
            f.write(f"$ {' '.join(cmd)}\n(deadline {limit:.0f} s)\n")
            f.flush()
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env=env or self.env,
                                    start_new_session=True)
            try:
                rc = proc.wait(timeout=limit)
                row["status"] = "ok" if rc == 0 or (rc == NO_TESTS and "pytest" in cmd) else f"failed (exit {rc})"
            except subprocess.TimeoutExpired:
                _stop(proc)
                row["status"] = "deadline"
                row["note"] = f"stopped at its deadline of {limit:.0f} s; what it finished is kept"
                f.write(f"\n... stopped at its deadline of {limit:.0f} s\n")
        row["seconds"] = round(time.monotonic() - t0, 1)
        row["note"] = row["note"] or _gist(log)
        print(f"[{name}] {row['status']} in {row['seconds']} s{': ' + row['note'] if row['note'] else ''}",
              flush=True)
        return self._done(row)

    def _done(self, row: dict) -> dict:
        self.rows.append(row)
        self.pack()
        return row

    # ------------------------------------------------------------------ two files, after every step
    def pack(self) -> None:
        """``gpu_run.tar.gz`` and ``summary.md`` in OUTDIR, each written whole and then moved into place."""
        self.out.mkdir(parents=True, exist_ok=True)
        (self.work / "summary.json").write_text(json.dumps(
            {"dry_run": self.dry_run, "budget_s": self.budget_s, "steps": self.rows,
             "elapsed_s": round(time.monotonic() - self.began, 1)}, indent=1), encoding="utf-8")
        tmp = self.out / ".gpu_run.tar.gz.part"
        with tarfile.open(tmp, "w:gz") as tar:
            for sub in ("logs", "results", "summary.json", "probe.json"):
                if (self.work / sub).exists():
                    tar.add(self.work / sub, arcname=sub,
                            filter=lambda info: None if info.name.endswith(".png") else info)
            for path in self.new_references():
                tar.add(path, arcname=f"reference/{path.relative_to(self.reference_dir)}")
        os.replace(tmp, self.out / "gpu_run.tar.gz")
        tmp = self.out / ".summary.md.part"
        tmp.write_text(self.summary(), encoding="utf-8")
        os.replace(tmp, self.out / "summary.md")

    def new_references(self) -> list[Path]:
        if not self.reference_dir.is_dir():
            return []
        return sorted(p for p in self.reference_dir.rglob("*.json") if p.stat().st_mtime >= self.started_wall - 1)

    def summary(self) -> str:
        kind = "DRY RUN on the stand-in GPU (NumPy on the CPU): no number here is a GPU measurement" \
            if self.dry_run else "GPU run"
        lines = [f"# tools/gpu_run.sh: {kind}", "",
                 f"{time.strftime('%Y-%m-%d %H:%M:%S')}, {time.monotonic() - self.began:.0f} s of the "
                 f"{self.budget_s:.0f} s budget used; new reference files: {len(self.new_references())}", "",
                 "| step | status | seconds | note |", "|---|---|---|---|"]
        for r in self.rows:
            lines.append(f"| {r['step']} | {r['status']} | {r['seconds']} | {r['note'].replace('|', '/')} |")
        return "\n".join(lines) + "\n"


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the step's whole process group (the report keeps what finished), then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _gist(log: Path, n: int = 3) -> str:
    """The lines of a log that say the most: failures, targets, then its last lines."""
    text = log.read_text(encoding="utf-8", errors="replace").splitlines()
    keys = ("FAILED", "Error", "MISSED", "target", "passed", "failed", "wrote", "error:")
    picked = [ln.strip() for ln in text if any(k in ln for k in keys)]
    picked = picked[-n:] if picked else [ln.strip() for ln in text[-n:] if ln.strip()]
    return " / ".join(picked)[:400]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="the folder for the two files (made if missing)")
    ap.add_argument("--dry-run", action="store_true", help="the stand-in GPU at tiny sizes, on a CPU")
    ap.add_argument("--budget", type=float, default=BUDGET_S, help=f"seconds for everything (default {BUDGET_S:.0f})")
    args = ap.parse_args(argv)
    run = Run(Path(args.out).absolute(), args.dry_run, args.budget)
    py, dry = sys.executable, args.dry_run
    size = ["--smoke"] if dry else ["--quick"]
    results = run.work / "results"

    run.step("probe", [py, "tools/gpu_probe.py", "--out", str(run.work / "probe.json")]
             + (["--dry-run"] if dry else []), 60)
    pytest = [py, "-m", "pytest", "-o", "addopts=", "-p", "no:nbval", "-p", "no:cacheprovider", "-q", "-m", "gpu"]
    for module in GPU_TEST_MODULES:
        if not (ROOT / module).is_file():
            run.step(f"gpu-tests {Path(module).stem}", None, 0, f"{module} is not in this checkout")
        elif dry:      # the stand-in is no GPU for the tests: they are collected, which imports them
            run.step(f"gpu-tests {Path(module).stem}", pytest + ["--collect-only", module], 60)
        else:
            run.step(f"gpu-tests {Path(module).stem}", pytest + [module], 60)
    run.step("bench-scan", [py, "benchmarks/bench_gpu_scan.py", *size, "--out", str(results / "bench_gpu_scan.json")],
             90)
    run.step("bench-step", [py, "benchmarks/bench_gpu_step.py", *size, "--out", str(results / "bench_gpu_step.json")],
             90)
    report = [py, "-m", "course", "report", *size, "--gpu-only", "--record-reference",
              "--reference-dir", str(run.reference_dir)]
    run.step("latency", report + ["--out", str(results / "report-latency"), "--only", *LATENCY_EXPERIMENTS], 60)
    run.step("record", report + ["--out", str(results / "report-record"), "--only", *RECORD_EXPERIMENTS], 180)
    run.step("timelines", [py, "tools/gpu_timelines.py", *(["--dry-run"] if dry else []), "--reference-dir",
                           str(run.reference_dir), "--out", str(results / "step_timelines.json")], 60)
    if not dry:
        run.step("full bench-step", [py, "benchmarks/bench_gpu_step.py", "--out",
                                     str(results / "bench_gpu_step_full.json")], 120)
        run.step("full bench-scan", [py, "benchmarks/bench_gpu_scan.py", "--out",
                                     str(results / "bench_gpu_scan_full.json")], 120)
    run.pack()
    print(run.summary())
    print(f"wrote {run.out / 'gpu_run.tar.gz'} and {run.out / 'summary.md'}")
    shutil.rmtree(run.work, ignore_errors=True)
    return 1 if any(r["status"].startswith("failed") for r in run.rows) else 0


if __name__ == "__main__":
    sys.exit(main())
