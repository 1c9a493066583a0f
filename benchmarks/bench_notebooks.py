"""How long each notebook takes to run top to bottom, against its target.

The tests run every notebook too, but never judge its time: a test that asserts a speed fails on
a busy machine.  Here each lesson notebook and each solution notebook runs in a fresh kernel (as
nbval runs them, outputs thrown away), and its wall time is printed against the targets: 30 s per
notebook and 120 s for the whole set, on a quiet 2-core machine.  The machine's load per core is
printed beside the times, so a slow row on a busy machine reads as what it is.

    python benchmarks/bench_notebooks.py [--only 01 05] [--timeout 600] [--threads N]

``--threads`` sets BLAS/OpenMP threads in the kernels (default: the course's own default, i.e.
the cores this process may use).  Exit status 0 whatever the times; 1 only when a notebook fails.
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


def run_one(path: Path, timeout: float) -> tuple[float, str | None]:
    """Execute ``path`` in a fresh kernel of this Python; (seconds, error or None)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    t0 = time.perf_counter()
    try:
        client.execute()
        err = None
    except Exception as exc:  # a failing cell: say which, keep going with the others
        err = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:200] if str(exc).strip() else ''}"
    return time.perf_counter() - t0, err


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", help="notebook name prefixes, e.g. 01 05")
    ap.add_argument("--timeout", type=float, default=600, help="seconds one cell may take")
    ap.add_argument("--threads", type=int, help="BLAS/OpenMP threads in the kernels")
    args = ap.parse_args(argv)
    os.environ.setdefault("MPLBACKEND", "Agg")
    if args.threads:
        for var in ("COURSE_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(args.threads)

    from course.devices import machine_load, usable_cores

    paths = notebooks(args.only)
    if not paths:
        print("no notebook matches", args.only)
        return 1
    print(f"{len(paths)} notebooks, {usable_cores()} usable cores, load at start "
          f"{machine_load() or 0:.2f} per core; target {PER_NOTEBOOK_TARGET_S:.0f} s each, "
          f"{SUITE_TARGET_S:.0f} s in all")
    total, failed = 0.0, []
    for p in paths:
        secs, err = run_one(p, args.timeout)
        total += secs
        verdict = "FAILED" if err else ("PASS" if secs <= PER_NOTEBOOK_TARGET_S else "MISS")
        print(f"{secs:7.1f} s  {verdict:6s} load {machine_load() or 0:4.2f}  {p.relative_to(ROOT)}"
              + (f"\n          {err}" if err else ""), flush=True)
        if err:
            failed.append(p.name)
    verdict = "PASS" if total <= SUITE_TARGET_S else "MISS"
    print(f"{total:7.1f} s  {verdict:6s} all notebooks (target {SUITE_TARGET_S:.0f} s)")
    if failed:
        print("failed:", ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
