"""Lesson 06 benchmark: the course's MPI ring all-reduce against MPI's own ``Allreduce``, and the α–β fit.

On real MPI processes (MPICH through mpi4py, started by ``course.parallel.run_mpi``):

* float64 vectors of 16 MB summed on 2 and 4 ranks by the course's ring (``Sendrecv``, 2(p-1) steps)
  and by MPICH's ``MPI_Allreduce``, in the same run; the slowest rank's time per call, median of the
  repeats.  Target: the ring takes at most 1.5x MPI's own time.  With more ranks than cores the run is
  oversubscribed (ranks take turns on the cores) and the line says so;
* α (latency) and β (seconds per byte) fitted to the ring and naive timings from 1 KB to 16 MB at p = 2
  (and at every p that has a core per rank);
* ZeRO's collectives: the course's ring reduce-scatter then all-gather against MPI's own ``Reduce_scatter``
  then ``Allgatherv`` on the same 16 MB, same target;
* a ZeRO step of lesson 01's MLP 256-512-512-512-10 (float64, Adam, batch 64) at stages 0-3 on 2 ranks: the
  slowest rank's step and its compute alone, and the bytes each rank sent (no target: what sharding costs
  in time here, printed beside stage 0's).

    python benchmarks/bench_parallel.py [--quick] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import sys

from course.parallel import allreduce_sweep, cores, fit_alpha_beta, mpi_unavailable_reason, zero_sweep

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
    pairs = (("ring (course)", "MPI Allreduce"),
             ("reduce-scatter + all-gather (course)", "MPI Reduce_scatter + Allgatherv"))
    rs = allreduce_sweep((2, 4), [TARGET_BYTES], algorithms=[a for pair in pairs for a in pair], repeat=repeat,
                         progress=None)
    ok = True
    for ours, theirs in pairs:
        for p in (2, 4):
            t = {r["algorithm"]: r for r in rs.select(p=p)}
            mine, mpi = t[ours]["median_s"], t[theirs]["median_s"]
            ratio = mine / mpi
            over = f"  (oversubscribed: {p} ranks on {cores()} cores)" if p > cores() else ""
            verdict = "meets" if ratio <= TARGET_RATIO else "MISSES"
            ok &= ratio <= TARGET_RATIO
            print(f"p = {p}, {TARGET_BYTES / 2**20:g} MiB: {ours} {mine * 1e3:.2f} ms, {theirs} {mpi * 1e3:.2f} ms: "
                  f"ratio {ratio:.2f} ({verdict} the target <= {TARGET_RATIO}){over}"
                  + ("  NOISY: runs disagree by more than 25 %" if t[ours].get("noisy") or t[theirs].get("noisy")
                     else ""))
    sweep = allreduce_sweep((2,), [2**k for k in range(10, 25, 2)], algorithms=("ring (course)", "naive (course)"),
                            repeat=repeat, progress=None)
    fit = fit_alpha_beta(sweep)
    print(f"α–β fit (p = 2, 1 KB to 16 MB): {fit}")
    zero = zero_sweep((2,), repeat=repeat, progress=None)
    base = {r["part"]: r["median_s"] for r in zero.select(stage=0)}
    for stage in (0, 1, 2, 3):
        t = {r["part"]: r for r in zero.select(stage=stage)}
        print(f"ZeRO stage {stage}, p = 2: step {t['step']['median_s'] * 1e3:.2f} ms "
              f"({t['step']['median_s'] / base['step']:.2f}x stage 0's), compute alone "
              f"{t['compute']['median_s'] * 1e3:.2f} ms; {t['step']['bytes_sent'] / 1e6:.3g} MB sent and at most "
              f"{t['step']['peak_bytes'] / 1e6:.3g} MB held per rank" + ("  NOISY" if t["step"].get("noisy") else ""))
    if args.out:
        rs.extend(sweep)
        rs.extend(zero)
        rs.params.update(alpha_s=fit.alpha, beta_s_per_byte=fit.beta)
        rs.save(args.out)
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
