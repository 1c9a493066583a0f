"""Lesson 01 benchmark: one training step of a 784-512-512-10 MLP, batch 256, float32, against PyTorch.

The course's step (``course.backprop.MLP.train_step``: NumPy on the CPU, CuPy on a GPU) and the
same step written the usual PyTorch way (same weights) are timed in alternating rounds in one
run; the ratio ours / PyTorch is printed next to the target (CPU <= 0.95, GPU <= 1.2).  A second
peer, the same step written naively in NumPy (new arrays every step), shows what the buffers buy.

    python benchmarks/bench_backprop.py [--quick] [--out FILE.json]

Without PyTorch the peer is skipped and said so.  On a GPU machine the GPU comparison runs too.
"""

from __future__ import annotations

import argparse
import sys

from course.backprop_bench import compare_with_torch, speed_ablation
from course.devices import gpu_available
from course.results import ResultSet

SIZES = (784, 512, 512, 10)
BATCH = 256


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds: a sanity run of a few seconds")
    ap.add_argument("--out", help="write the results (with provenance) to this JSON file")
    args = ap.parse_args(argv)
    rounds, repeat = (2, 5) if args.quick else (10, 20)
    rs = ResultSet("bench_backprop", params={"sizes": list(SIZES), "batch": BATCH, "dtype": "float32",
                                             "rounds": rounds, "repeat": repeat})
    devices = ["cpu"] + (["gpu"] if gpu_available() else [])
    print(f"One SGD training step, MLP {'-'.join(map(str, SIZES))}, batch {BATCH}, float32 "
          f"({rounds} alternating rounds of {repeat} steps)")
    for dev in devices:
        r = compare_with_torch(SIZES, BATCH, "float32", dev, rounds=rounds, repeat=repeat)
        gf = r["flops"] / r["ours_s"] / 1e9
        line = f"  {dev.upper()}: course {r['ours_s'] * 1e3:8.3f} ms ({gf:.1f} GFLOP/s)"
        if r["ratio"] is None:
            line += f"   | {r['note']}"
        else:
            verdict = "meets" if r["ratio"] <= r["target"] else "misses"
            line += (f"   PyTorch {r['torch_s'] * 1e3:8.3f} ms   ratio {r['ratio']:.3f}× "
                     f"(target <= {r['target']}: {verdict} it)")
        print(line)
        rs.add(**r)
        try:
            ab = speed_ablation(SIZES, BATCH, dev, rounds=rounds, repeat=max(repeat // 4, 1), budget_s=None)
        except Exception as exc:  # a second peer must not cost the first one's result
            print(f"        (the naive-step comparison failed on the {dev.upper()}: {type(exc).__name__}: {exc})")
            continue
        lib = "NumPy" if dev == "cpu" else "CuPy"
        print(f"        the same step written naively in {lib}: {ab['allocating'] / ab['course']:.2f}× the course's "
              f"time; with float64 input data: {ab['float64 data'] / ab['course']:.2f}×")
        rs.add(device=dev, peer=f"{lib.lower()}, allocating", **{f"{k.replace(' ', '_')}_s": v for k, v in ab.items()})
    if args.out:
        print(f"wrote {rs.save(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
