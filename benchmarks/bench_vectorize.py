"""Lesson 02's speed targets, each as a ratio against a peer measured in the same run.

    python benchmarks/bench_vectorize.py [--quick] [--out FILE.json]

* ReLU, float32, 2^24 elements, ``out=``: effective bandwidth / copy bandwidth >= 0.85
  (CPU, and GPU when one answers: CuPy and the fused kernel).  Allocating a new array
  per call is reported next to it (no target: the lesson teaches why it is lower).
* The course's matmul wrapper against ``numpy.matmul`` itself: overhead < 2 %.
* For context: numpy's BLAS against PyTorch's CPU matmul (when installed), and the
  numpy rung against the Python loop.
"""

from __future__ import annotations

import argparse
import sys

import course
from course import vectorize as v
from course import vectorize_matmul as vm
from course.results import ResultSet


def _line(what: str, measured: float, target: str, ok: bool | None) -> None:
    verdict = "" if ok is None else ("  PASS" if ok else "  BELOW TARGET")
    print(f"{what:58s} {measured:8.3f}   target {target:10s}{verdict}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds, smaller matrices (a sanity run)")
    ap.add_argument("--out", help="write the results (with provenance) to this JSON file")
    args = ap.parse_args(argv)
    quick = args.quick
    devices = ["cpu"] + (["gpu"] if course.gpu_available() else [])
    rs = ResultSet("bench_vectorize", params={"quick": quick, "devices": devices})
    print(v.simd_summary())
    if "gpu" not in devices:
        print(f"No GPU: {course.gpu_unavailable_reason()} (GPU targets not measured)")
    failures = 0

    n = 2**24
    for dev in devices:
        r = v.relu_bandwidth(n, "float32", dev, rounds=3 if quick else 7, repeat=5 if quick else 9,
                             budget_s=4.0 if quick else 20.0)
        print(f"\n{dev.upper()}: copy {r['copy_gb_per_s']:.1f} GB/s, ReLU out= {r['out_gb_per_s']:.1f} GB/s, "
              f"new array {r['new_gb_per_s']:.1f} GB/s")
        ok = r["out_fraction"] >= 0.85
        failures += not ok
        _line(f"ReLU out= / copy ({dev}, 2^24 float32)", r["out_fraction"], ">= 0.85", ok)
        _line(f"ReLU new array / copy ({dev}; lesson: about 0.45)", r["new_fraction"], "(none)", None)
        if "threads_fraction" in r:
            _line(f"ReLU threads out= / copy ({v.default_workers()} cores)", r["threads_fraction"], "(none)", None)
        rs.add(device=dev, what="relu_bandwidth", **{k: val for k, val in r.items() if k not in ("samples", "device")})
        if dev == "cpu":  # is ReLU limited by the memory or by numpy's inner loop? Ask in cache.
            from course.vectorize_simd import operand_probe

            p = operand_probe(n=2**14)
            _line("   diagnosis, in cache: maximum(x, 0) / copy", p["scalar_gb_per_s"] / p["copy_gb_per_s"],
                  "(info)", None)
            _line("   diagnosis, in cache: maximum(x, zeros) / copy", p["array_gb_per_s"] / p["copy_gb_per_s"],
                  "(info)", None)
            rs.add(device="cpu", what="operand_probe", **p)
        if dev == "gpu":
            import cupy as cp

            x = course.to_device(v.random_input(n, "float32"), "gpu")
            out = cp.empty_like(x)
            copy = course.hardware.copy_bandwidth("gpu", nbytes=x.nbytes)["bytes_per_s"]
            for rung in ("gpu", "gpu_fused"):
                t = course.benchmark(v.elementwise, "relu", x, rung, out=out, device="gpu", repeat=20)
                frac = v.effective_bandwidth(t.median, n, "float32") / copy
                ok = frac >= 0.85
                failures += not ok
                _line(f"ReLU {rung} / copy (gpu, 2^24 float32)", frac, ">= 0.85", ok)
                rs.add(device="gpu", what=f"relu_{rung}", copy_fraction=frac, median_s=t.median)

    print()
    size = 512 if quick else 1024
    oh = vm.wrapper_overhead(size, "float32", rounds=20 if quick else 60)
    ok = oh["added_fraction"] < 0.02 and oh["overhead_best"] < 0.02
    failures += not ok
    _line(f"course matmul wrapper overhead, n={size} (own cost / BLAS call)", oh["added_fraction"], "< 0.02", ok)
    _line("   same, fastest wrapped call / fastest direct call - 1", oh["overhead_best"], "< 0.02", None)
    _line("   same, median wrapped / median direct - 1 (noisy when shared)", oh["overhead"], "(info)", None)
    rs.add(device="cpu", what="wrapper_overhead", **oh)

    blas = vm.time_matmul_rung("blas", size, "float32", repeat=5 if quick else 15, budget_s=2.0)
    print(f"numpy BLAS float32 n={size}: {blas['gflops']:.1f} GFLOP/s")
    rs.add(device="cpu", what="matmul_blas", n=size, gflops=blas["gflops"])
    if vm.torch_available():
        tor = vm.time_matmul_rung("torch", size, "float32", "cpu", repeat=5 if quick else 15, budget_s=2.0)
        _line(f"numpy BLAS / PyTorch CPU matmul GFLOP/s (n={size})", blas["gflops"] / tor["gflops"], "(peer)", None)
        rs.add(device="cpu", what="matmul_torch", n=size, gflops=tor["gflops"])
    else:
        print("PyTorch not installed: no PyTorch peer")

    lad = v.ladder("relu", n=2**20, rungs=("loop", "numpy"), copy=False, budget_s=1.0)
    sp = lad.select(rung="numpy")[0]["speedup_vs_loop"]
    _line("numpy ReLU / Python loop, per element (2^20 float32)", sp, "(info)", None)
    rs.add(device="cpu", what="numpy_vs_loop", speedup=sp)

    if args.out:
        print(f"wrote {rs.save(args.out)}")
    print(f"\n{failures} target(s) missed" if failures else "\nall targets met")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
