"""Lesson 06 benchmark: the course's MPI ring all-reduce against MPI's own ``Allreduce``, and the α–β fit.

On real MPI processes (MPICH through mpi4py, started by ``course.parallel.run_mpi``):

* float64 vectors of 16 MB summed on 2 and 4 ranks by the course's ring (``Sendrecv``, 2(p-1) steps)
  and by MPICH's ``MPI_Allreduce``, in the same run; the slowest rank's time per call, median of the
  repeats.  Target: the ring takes at most 1.5x MPI's own time.  With more ranks than cores the run is
  oversubscribed (ranks take turns on the cores) and the line says so;
* α (latency) and β (seconds per byte) fitted to the ring and naive timings from 1 KB to 16 MB at p = 2
  (and at every p that has a core per rank).

    python benchmarks/bench_parallel.py [--quick] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import sys

from course.parallel import allreduce_sweep, cores, fit_alpha_beta, mpi_unavailable_reason

TARGET_BYTES = 2**24
TARGET_RATIO = 1.5          # ring time / MPI Allreduce time, at most


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    ap.add_argument("--out", help="write the measurements as JSON")
    args = ap.parse_args(argv)
    why = mpi_unavailable_reason()
    if why:
        print(f"MPI cannot start here: {why}")
        return 1
    repeat = 3 if args.quick else 9
    print(f"{cores()} cores here; MPI ranks use one BLAS thread each.")
    rs = allreduce_sweep((2, 4), [TARGET_BYTES], algorithms=("ring (course)", "MPI Allreduce"), repeat=repeat,
                         progress=None)
    ok = True
    for p in (2, 4):
        t = {r["algorithm"]: r for r in rs.select(p=p)}
        ring, mpi = t["ring (course)"]["median_s"], t["MPI Allreduce"]["median_s"]
        ratio = ring / mpi
        over = f"  (oversubscribed: {p} ranks on {cores()} cores)" if p > cores() else ""
        verdict = "meets" if ratio <= TARGET_RATIO else "MISSES"
        ok &= ratio <= TARGET_RATIO
        print(f"p = {p}, {TARGET_BYTES / 2**20:g} MiB: ring {ring * 1e3:.2f} ms, MPI Allreduce {mpi * 1e3:.2f} ms: "
              f"ratio {ratio:.2f} ({verdict} the target <= {TARGET_RATIO}){over}")
    sweep = allreduce_sweep((2,), [2**k for k in range(10, 25, 2)], algorithms=("ring (course)", "naive (course)"),
                            repeat=repeat, progress=None)
    fit = fit_alpha_beta(sweep)
    print(f"α–β fit (p = 2, 1 KB to 16 MB): {fit}")
    if args.out:
        rs.extend(sweep)
        rs.params.update(alpha_s=fit.alpha, beta_s_per_byte=fit.beta)
        rs.save(args.out)
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
