"""Lesson 09's speed targets, each a ratio against its library measured in the same run.

    python benchmarks/bench_gemm.py [--quick] [--smoke] [--out FILE.json]

* CPU, n = 1,024 float32 (``--quick``: 512): the best numba rung of ``course.gemm.cpu`` against NumPy's BLAS
  in alternating rounds, on one thread (the ``microkernel`` rung against BLAS on one thread) and on every usable
  core (``parallel`` against BLAS on as many threads): target >= 0.5x on both.
* GPU (when one answers), n = 4,096: the best SIMT rung against cuBLAS in strict float32 (target >= 85 %), the
  TF32 ``mma.sync`` rung against cuBLAS TF32 (>= 60 %) and the bfloat16 rung against cuBLAS bfloat16 with float32
  accumulation (>= 60 %), every pair in the same alternating rounds (``course.gemm.timing.gpu_ladder_sweep``).

A missed target is reported, never an error; every ratio names its baseline and precision.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import course
from course.cpu import usable_cores
from course.gemm.timing import cpu_ladder_sweep, gpu_ladder_sweep
from course.results import ResultSet
from course.standin import standin_active

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks' shared helpers, however run
from _adaptive import load_line  # noqa: E402

#: (what, target share of the library): the SIMT rungs against strict float32, each mma rung at its precision.
GPU_TARGETS = {"float32": 0.85, "tf32": 0.60, "bfloat16": 0.60}
CPU_TARGET = 0.5


def _line(what: str, measured: float, target: float, noisy: bool, standin: bool = False) -> None:
    if standin:                         # NumPy posing as a GPU: the path ran, nothing was measured on a GPU
        print(f"{what:72s} {measured:6.2f}x   (stand-in GPU: NumPy on the CPU, no verdict)")
        return
    flag = " (noisy: rerun on a quieter machine)" if noisy else ""
    print(f"{what:72s} {measured:6.2f}x   target >= {target:.2f}x  "
          f"{'PASS' if measured >= target else 'BELOW TARGET'}{flag}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller matrices, fewer rounds (a sanity run)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: only that every path runs")
    ap.add_argument("--out", help="write the results (with provenance) to this JSON file")
    args = ap.parse_args(argv)
    n_cpu = 64 if args.smoke else 512 if args.quick else 1024
    repeat = 2 if args.smoke else 3 if args.quick else 7
    print(load_line())
    every = usable_cores()
    cpu = cpu_ladder_sweep([n_cpu], rungs=("microkernel", "parallel"), threads=sorted({1, every}), repeat=repeat,
                           budget_s=60.0 if args.smoke else 300.0)
    out = ResultSet("bench_gemm", params={"n_cpu": n_cpu, "quick": args.quick, "smoke": args.smoke})
    out.extend(cpu)
    for threads, rung in ((1, "microkernel"), (every, "parallel" if every > 1 else "microkernel")):
        rec = next((r for r in cpu.records if r["rung"] == rung and r["threads"] == threads), None)
        if rec is not None:
            _line(f"CPU n = {n_cpu:,} float32, {rung} / NumPy's BLAS, {threads} thread{'s' * (threads > 1)}",
                  rec["of_blas"], CPU_TARGET, bool(rec.get("noisy")))
    if not course.gpu_available():
        print(f"No GPU: {course.gpu_unavailable_reason()} (GPU targets not measured)")
    else:
        n_gpu = 256 if args.smoke else 1024 if args.quick else 4096
        gpu = gpu_ladder_sweep([n_gpu], repeat=repeat)
        out.extend(gpu)
        for precision, target in GPU_TARGETS.items():
            rungs = [r for r in gpu.records if r.get("precision") == precision and r["rung"] != "cublas"]
            if rungs:
                best = max(rungs, key=lambda r: r["of_cublas"])
                _line(f"GPU n = {n_gpu:,} {precision}: best rung ({best['rung']}) / cuBLAS {precision}",
                      best["of_cublas"], target, bool(best.get("noisy")), standin_active())
        for note in gpu.notes:
            print(note)
    if args.out:
        out.save(args.out)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
