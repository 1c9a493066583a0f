"""How long each notebook takes to run top to bottom, against its target.

The tests run every notebook too, but never judge its time: a test that asserts a speed fails on
a busy machine.  Here each lesson notebook and each solution notebook runs in a fresh kernel the
way the tests run it (outputs thrown away; BLAS/OpenMP threads and the other settings from
``conftest.py``; in a solutions notebook, the cells tagged ``lesson-only`` left out, as the tests
deselect them, since they run in the lesson notebook), and its wall time is printed against the
targets: 30 s per notebook and 120 s for the whole set, on a quiet 2-core machine.  The machine's
load per core is printed beside the times, so a slow row on a busy machine reads as what it is,
and so is the CPU time the notebook's kernel (and the MPI ranks it started) used: on a busy machine
that figure grows far less than the wall time does.

    python benchmarks/bench_notebooks.py [--only 01 05] [--timeout 600] [--threads N]

``--threads`` sets BLAS/OpenMP threads in the kernels (default: the tests' setting, one thread
unless the environment says otherwise); ``--every-cell`` runs the solutions notebooks' tagged
cells too.  Exit status 0 whatever the times; 1 only when a notebook fails.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PER_NOTEBOOK_TARGET_S = 30.0
SUITE_TARGET_S = 120.0


def notebooks(only: list[str] | None) -> list[Path]:
    paths = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    paths += sorted((ROOT / "notebooks" / "solutions").glob("[0-9][0-9]_*.ipynb"))
    if only:
        paths = [p for p in paths if any(p.name.startswith(o) for o in only)]
    return paths


def run_one(path: Path, timeout: float) -> tuple[float, float, str | None, int]:
    """Execute ``path`` in a fresh kernel of this Python, leaving out the cells the tests leave
    out; (wall seconds, CPU seconds of the kernel and the processes it started, error or None,
    cells left out)."""
    import nbformat
    from nbclient import NotebookClient

    from conftest import runs_in_lesson_only

    nb = nbformat.read(path, as_version=4)
    kept = [c for c in nb.cells if c.cell_type != "code"
            or not runs_in_lesson_only(path, c.get("metadata", {}).get("tags"))]
    left_out, nb.cells = len(nb.cells) - len(kept), kept
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    t0, c0 = time.perf_counter(), os.times()
    try:
        client.execute()
        err = None
    except Exception as exc:  # a failing cell: say which, keep going with the others
        err = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:200] if str(exc).strip() else ''}"
    wall, c1 = time.perf_counter() - t0, os.times()
    cpu = c1.children_user + c1.children_system - c0.children_user - c0.children_system
    return wall, cpu, err, left_out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", help="notebook name prefixes, e.g. 01 05")
    ap.add_argument("--timeout", type=float, default=600, help="seconds one cell may take")
    ap.add_argument("--threads", type=int, help="BLAS/OpenMP threads in the kernels")
    ap.add_argument("--every-cell", action="store_true", help="run the solutions' lesson-only cells too")
    args = ap.parse_args(argv)
    if args.threads:
        for var in ("COURSE_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(args.threads)
    if args.every_cell:
        os.environ["COURSE_NOTEBOOKS_EVERY_CELL"] = "1"
    sys.path.insert(0, str(ROOT))
    import conftest  # noqa: F401  the tests' environment: threads (unless set above), backend
    from course.cpu import machine_load, usable_cores

    paths = notebooks(args.only)
    if not paths:
        print("no notebook matches", args.only)
        return 1
    print(f"{len(paths)} notebooks, {usable_cores()} usable cores, load at start "
          f"{machine_load() or 0:.2f} per core; target {PER_NOTEBOOK_TARGET_S:.0f} s each, "
          f"{SUITE_TARGET_S:.0f} s in all")
    print(f"run as the tests run them: {os.environ['OPENBLAS_NUM_THREADS']} BLAS thread(s); "
          + ("every cell" if args.every_cell else
             "solutions notebooks without their 'lesson-only' cells (these run in the lesson notebooks)"))
    total, total_cpu, failed = 0.0, 0.0, []
    for p in paths:
        secs, cpu, err, left_out = run_one(p, args.timeout)
        total += secs
        total_cpu += cpu
        verdict = "FAILED" if err else ("PASS" if secs <= PER_NOTEBOOK_TARGET_S else "MISS")
        print(f"{secs:7.1f} s  {verdict:6s} load {machine_load() or 0:4.2f}  cpu {cpu:5.1f} s  {p.relative_to(ROOT)}"
              + (f"  ({left_out} lesson-only cells left out)" if left_out else "")
              + (f"\n          {err}" if err else ""), flush=True)
        if err:
            failed.append(p.name)
    verdict = "PASS" if total <= SUITE_TARGET_S else "MISS"
    print(f"{total:7.1f} s  {verdict:6s} all notebooks (target {SUITE_TARGET_S:.0f} s); the kernels and the "
          f"processes they started used {total_cpu:.1f} CPU seconds")
    if failed:
        print("failed:", ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
