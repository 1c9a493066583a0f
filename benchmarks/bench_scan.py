"""Lesson 04 benchmark: the scans against the array libraries' own, as ratios measured in one run.

CPU: ``course.scan.blelloch_scan`` (one vectorized numpy call per tree level), float32 addition,
n = 2^22, against ``numpy.cumsum`` (target: at most 2.5x its time), with PyTorch's ``torch.cumsum``
as a second peer when installed and the copy bandwidth as the floor no scan can beat.
GPU (when one answers): the hand-written numba block-scan kernel at n = 2^26 against
``cupy.cumsum`` (target: at least 50 % of its throughput), and the level-by-level ``blelloch_scan``
on CuPy arrays.  Peers are timed in alternating rounds so that both see the same machine state.

    python benchmarks/bench_scan.py [--quick] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from course.devices import gpu_available
from course.hardware import copy_bandwidth
from course.results import ResultSet
from course.scan import blelloch_scan, hillis_steele_scan
from course.scan_timing import make_input
from course.timing import benchmark

CPU_N, GPU_N = 2**22, 2**26
CPU_TARGET_RATIO = 2.5      # blelloch time / numpy.cumsum time, at most
GPU_TARGET_FRACTION = 0.5   # numba kernel throughput / cupy.cumsum throughput, at least


def alternate(fns: dict, x, device: str, rounds: int, repeat: int) -> dict:
    """Median time of each function over ``rounds`` alternating rounds of ``repeat`` calls."""
    samples: dict = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name].extend(benchmark(fn, x, device=device, warmup=1, repeat=repeat).samples)
    return {k: float(np.median(v)) for k, v in samples.items()}


def torch_cumsum():
    try:
        import torch
    except ImportError:
        return None
    return lambda x: torch.cumsum(torch.from_numpy(x), 0)


def report(rs: ResultSet, device: str, n: int, times: dict, peer: str, copy_gbps: float) -> None:
    nbytes = 2 * n * 4
    for name, t in times.items():
        gbps = nbytes / t / 1e9
        rs.add(device=device, n=n, dtype="float32", op="add", algorithm=name, median_s=t,
               gb_per_s=gbps, ratio_to_peer=t / times[peer], copy_fraction=gbps / copy_gbps)
        print(f"  {name:>22}: {t * 1e3:9.3f} ms  {gbps:7.2f} GB/s ({gbps / copy_gbps:5.1%} of copy)"
              f"  {t / times[peer]:6.2f}× the time of {peer}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds: a sanity run of a few seconds")
    ap.add_argument("--out", help="write the results (with provenance) to this JSON file")
    args = ap.parse_args(argv)
    rounds, repeat = (2, 3) if args.quick else (5, 10)
    rs = ResultSet("bench_scan", params={"cpu_n": CPU_N, "gpu_n": GPU_N, "rounds": rounds,
                                         "repeat": repeat, "dtype": "float32", "op": "add"})

    x = make_input(CPU_N, "add", "float32", "cpu")
    fns = {"numpy.cumsum": np.cumsum, "blelloch_scan": lambda a: blelloch_scan(a, exclusive=False),
           "blelloch_scan exclusive": blelloch_scan}
    if not args.quick:
        fns["hillis_steele_scan"] = hillis_steele_scan
    tc = torch_cumsum()
    if tc is not None:
        fns["torch.cumsum"] = tc
    copy = copy_bandwidth("cpu", nbytes=CPU_N * 4 * 4, repeat=repeat)["gb_per_s"]
    print(f"CPU, inclusive float32 addition scan, n = 2^{CPU_N.bit_length() - 1} "
          f"(copy limit measured now: {copy:.1f} GB/s)" + ("" if tc else "; PyTorch not installed"))
    times = alternate(fns, x, "cpu", rounds, repeat)
    report(rs, "cpu", CPU_N, times, "numpy.cumsum", copy)
    ratio = times["blelloch_scan"] / times["numpy.cumsum"]
    verdict = "meets" if ratio <= CPU_TARGET_RATIO else "misses"
    print(f"  => blelloch_scan / numpy.cumsum = {ratio:.2f}× (target <= {CPU_TARGET_RATIO}×: {verdict} it)")
    rs.add(device="cpu", n=CPU_N, algorithm="target", ratio=ratio, target=CPU_TARGET_RATIO,
           met=ratio <= CPU_TARGET_RATIO)

    if gpu_available():
        import cupy

        from course.scan_kernels import block_scan

        n = 2**24 if args.quick else GPU_N
        xg = make_input(n, "add", "float32", "gpu")
        gfns = {"cupy.cumsum": cupy.cumsum,
                "numba block scan": lambda a: block_scan(a, exclusive=False),
                "numba, no padding": lambda a: block_scan(a, exclusive=False, conflict_free=False),
                "numba reduce-then-scan": lambda a: block_scan(a, exclusive=False,
                                                               strategy="reduce-then-scan"),
                "blelloch_scan (cupy)": lambda a: blelloch_scan(a, exclusive=False)}
        xi = (xg[:2**20] * 100).astype(cupy.int32)
        ok = all(np.array_equal(cupy.asnumpy(block_scan(xi, exclusive=False, strategy=st)),
                                np.cumsum(cupy.asnumpy(xi), dtype=np.int32))
                 for st in ("scan-then-add", "reduce-then-scan"))
        gcopy = copy_bandwidth("gpu", nbytes=n * 4, repeat=repeat)["gb_per_s"]
        print(f"GPU, same scan, n = 2^{n.bit_length() - 1} (copy limit measured now: {gcopy:.0f} GB/s; "
              f"kernel equal to numpy on int32: {ok})")
        gtimes = alternate(gfns, xg, "gpu", rounds, repeat)
        report(rs, "gpu", n, gtimes, "cupy.cumsum", gcopy)
        for name in ("numba block scan", "numba reduce-then-scan"):
            frac = gtimes["cupy.cumsum"] / gtimes[name]
            verdict = "meets" if frac >= GPU_TARGET_FRACTION else "misses"
            print(f"  => {name} throughput / cupy.cumsum = {frac:.0%} (target >= "
                  f"{GPU_TARGET_FRACTION:.0%}: {verdict} it)")
            rs.add(device="gpu", n=n, algorithm="target", kernel=name, fraction=frac,
                   target=GPU_TARGET_FRACTION, met=frac >= GPU_TARGET_FRACTION, kernel_correct=ok)
    else:
        print("GPU: none answers here; the kernel target (>= 50 % of cupy.cumsum at n = 2^26) is "
              "measured on a GPU machine.")
    if args.out:
        print(f"wrote {rs.save(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
