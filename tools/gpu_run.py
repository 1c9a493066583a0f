"""The course's whole GPU run, for a short lease on a GPU machine: one command, nine minutes, two files.

    tools/gpu_run.sh OUTDIR             # on the GPU machine (a 600 s command)
    tools/gpu_run.sh --dry-run OUTDIR   # here, on a CPU: the stand-in GPU, tiny sizes (a test runs it)

A GPU is lent rarely (15 minutes of machine time, start-up included, each command at most 10 minutes,
at most 8 files back).  This script runs, in priority order, each step in its own process under its
own deadline, and stops starting steps once the whole budget (:data:`BUDGET_S`) is spent:

1. ``probe``: Python, NumPy, CuPy (a real device call), numba-cuda, PyTorch, the driver and clocks
   (``nvidia-smi``), the course's own cuBLAS handle (one product against CuPy's) and the CUDA
   driver's graph-node calls; a package the course needs and the machine lacks is installed from
   ``.whl/`` (``tools/gpu_wheels.sh`` fetches them here) when that folder came along;
2. ``record <experiment>``: the report's experiments at the lessons' own (full) sizes with ``--gpu-only
   --record-reference``, one process each, in the order the lessons need them: lesson 09's CUDA C ladder
   against cuBLAS (``gemm_gpu_ladder``), lesson 01's ladder (``backprop_train_step``) and its precisions
   (``backprop_step_precisions``), BPPSA
   (``bppsa_rnn``), the scans (``scan_kernel_variants``), the diagonal recurrence (``recurrence_sweep``),
   then the launch latency, ``scan_sweep``, ``attention_sweep``, ``bppsa_rnn_batch`` and lesson 09's
   backprop products; each reference is written as soon as its experiment finishes, so a deadline costs
   only the experiment it stops;
3. ``timelines`` (after the ladder): a few steps of each rung of lesson 01's ladder and of PyTorch, kernel
   by kernel (PyTorch's profiler, in its own process: the profiler slows every later launch in a process);
4. ``bench-step`` (full sizes: every rung, PyTorch, the float32 GEMM rate of the same run and the targets)
   and ``bench-scan`` (quick sizes: the single-pass scan against the copy and CUB, BPPSA against cuDNN);
5. ``gpu-tests``: ``pytest -m gpu`` over the modules of the new GPU code, in one process, last.

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
import importlib.util
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
BUDGET_S = 540.0
#: The GPU tests of the new GPU code, one pytest process each.
GPU_TEST_MODULES = ("tests/test_capture.py", "tests/test_backprop_fast_step.py", "tests/test_bppsa_fast.py",
                    "tests/test_scan_singlepass.py", "tests/test_timing.py", "tests/test_bppsa_models.py",
                    "tests/test_throughput_latency.py", "tests/test_backprop_bench.py", "tests/test_attention_gpu.py",
                    "tests/test_gemm_gpu.py", "tests/test_scan_baselines.py", "tests/test_attention_baselines.py",
                    "tests/test_recurrences_baselines.py", "tests/test_bppsa_baselines.py",
                    "tests/test_backprop_precision.py", "tests/test_backprop_precision_timing.py")
#: pytest's exit status when it collected no test (a module without GPU tests): not a failure.
NO_TESTS = 5
#: Where the probe installs the wheels of ``.whl/`` (tools/gpu_probe.py).
WHEEL_SITE = "/tmp/course-site"
#: The launch-latency rows, recorded together as one step.
LATENCY_EXPERIMENTS = ("launch_latency", "async_chain")


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

    def _env(self) -> dict:
        """The steps' environment, with the probe's wheels (installed into :data:`WHEEL_SITE`) on the path."""
        env = dict(self.env)
        if Path(WHEEL_SITE).is_dir():
            env["PYTHONPATH"] = os.pathsep.join([WHEEL_SITE, env["PYTHONPATH"]])
        return env

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
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env=env or self._env(),
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


def _unusable_folder(out: Path) -> str:
    """Why ``out`` cannot be the folder the two files go into ("" when it can): it is a file, or it cannot be made
    or written.  Made here, so that a bad OUT stops the run before its first step, not after it."""
    if out.exists() and not out.is_dir():
        return "is a file, not a folder: name a folder (a new one is made)"
    try:
        out.mkdir(parents=True, exist_ok=True)
        tempfile.NamedTemporaryFile(dir=out, prefix=".write-test-").close()
    except OSError as exc:
        return f"cannot be made or written ({exc.strerror or exc}): choose another folder"
    return ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="the folder for the two files (made if missing)")
    ap.add_argument("--dry-run", action="store_true", help="the stand-in GPU at tiny sizes, on a CPU")
    ap.add_argument("--budget", type=float, default=BUDGET_S, help=f"seconds for everything (default {BUDGET_S:.0f})")
    args = ap.parse_args(argv)
    if not 0 < args.budget <= 86_400:                   # NaN too: every comparison with it is False
        ap.error(f"--budget must be a number of seconds above 0 and at most 86400 (a day), got {args.budget:g}: "
                 f"the default, {BUDGET_S:.0f}, fits a lease's 10-minute command")
    why = _unusable_folder(Path(args.out).absolute())
    if why:
        ap.error(f"OUT {args.out}: {why}")
    run = Run(Path(args.out).absolute(), args.dry_run, args.budget)
    py, dry = sys.executable, args.dry_run
    results = run.work / "results"

    run.step("probe", [py, "tools/gpu_probe.py", "--out", str(run.work / "probe.json")]
             + (["--dry-run"] if dry else []), 40)
    # The references at the lessons' own (full) sizes, one experiment per process in the order the lessons
    # need them (each is written as soon as it finishes; a deadline costs only the experiment it stops).
    size = ["--smoke"] if dry else []
    report = [py, "-m", "course", "report", *size, "--gpu-only", "--record-reference",
              "--reference-dir", str(run.reference_dir)]

    def record(names: tuple[str, ...], deadline_s: float, step: str | None = None) -> None:
        run.step(step or f"record {names[0]}",
                 report + ["--out", str(results / f"report-{names[0]}"), "--only", *names], deadline_s)

    def bench(name: str, deadline_s: float, quick: bool = False) -> None:
        flag = ["--smoke"] if dry else ["--quick"] if quick else []
        run.step(name, [py, f"benchmarks/{name.replace('-', '_gpu_')}.py", *flag, "--out",
                        str(results / f"{name}.json")], deadline_s)

    record(("gemm_gpu_ladder",), 90)
    record(("backprop_train_step",), 120)
    record(("backprop_step_precisions",), 90)         # lesson 01's precisions and MFU (issue 45)
    run.step("timelines", [py, "tools/gpu_timelines.py", *(["--dry-run"] if dry else []), "--reference-dir",
                           str(run.reference_dir), "--out", str(results / "step_timelines.json")], 60)
    record(("bppsa_rnn",), 150)
    record(("scan_kernel_variants",), 60)
    record(("recurrence_sweep",), 90)
    bench("bench-step", 100)
    record(LATENCY_EXPERIMENTS, 60, step="latency")
    record(("scan_sweep",), 60)
    bench("bench-scan", 90, quick=True)
    record(("attention_sweep",), 60)
    record(("bppsa_rnn_batch",), 60)
    record(("gemm_backprop_products",), 45)
    record(("backprop_step_precision_peers",), 120)   # PyTorch's autocast and compile peers (issue 45)
    # The GPU tests of the new GPU code last, in one process (each test under pytest-timeout's limit where
    # that plugin is installed); the dry run only collects them, which imports every module.
    here = [m for m in GPU_TEST_MODULES if (ROOT / m).is_file()]
    pytest = [py, "-m", "pytest", "-o", "addopts=", "-p", "no:nbval", "-p", "no:cacheprovider", "-q", "-m", "gpu"]
    if dry:
        pytest.append("--collect-only")
    elif importlib.util.find_spec("pytest_timeout") is not None:
        pytest += ["--timeout", "60"]
    run.step("gpu-tests", pytest + here, 150)
    run.pack()
    print(run.summary())
    print(f"wrote {run.out / 'gpu_run.tar.gz'} and {run.out / 'summary.md'}")
    shutil.rmtree(run.work, ignore_errors=True)
    return 1 if any(r["status"].startswith("failed") for r in run.rows) else 0


if __name__ == "__main__":
    sys.exit(main())
