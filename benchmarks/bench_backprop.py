"""Lesson 01 benchmark: one training step of a 784-512-512-10 MLP, batch 256, float32, against PyTorch.

The course's step (``course.backprop.MLP.train_step``: NumPy on the CPU, CuPy on a GPU) and the
same step written the usual PyTorch way (same weights) are timed in alternating rounds in one
run; the ratio ours / PyTorch is printed next to the target (CPU <= 0.95, GPU <= 1.2).  A second
peer, the same step written naively in NumPy (new arrays every step), shows what the buffers buy.

    python benchmarks/bench_backprop.py [--quick] [--out FILE.json]

Rounds go on (adaptive) until the per-round ratio's interquartile range is under 10 % of its median,
or the time budget ends and the ratio is reported as noisy.  BLAS threads (numpy's and PyTorch's) are
set explicitly, 1 by default (``--threads``), and printed.

Without PyTorch the peer is skipped and said so.  On a GPU machine the GPU comparison runs too.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from course.backprop.bench import compare_with_torch, speed_ablation
from course.devices import gpu_available
from course.results import ResultSet
from course.threads import set_threads

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks' shared helpers, however run
from _adaptive import TARGET_IQR, load_line  # noqa: E402

SIZES = (784, 512, 512, 10)
BATCH = 256


def main(argv: list[str] | None = None) -> int:
    try:
        return _run(argv)
    finally:
        set_threads(None)  # leave the process's default as it was (this runs inside pytest too)


def _run(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds: a sanity run of a few seconds")
    ap.add_argument("--out", help="write the results (with provenance) to this JSON file")
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads for numpy and PyTorch (default 1)")
    args = ap.parse_args(argv)
    rounds, repeat = (2, 5) if args.quick else (10, 20)
    threads = set_threads(args.threads)
    budget = 10.0 if args.quick else 40.0
    rs = ResultSet("bench_backprop", params={"sizes": list(SIZES), "batch": BATCH, "dtype": "float32",
                                             "max_rounds": rounds, "repeat": repeat, "blas_threads": threads})
    devices = ["cpu"] + (["gpu"] if gpu_available() else [])
    print(load_line())
    print(f"One SGD training step, MLP {'-'.join(map(str, SIZES))}, batch {BATCH}, float32, {threads} BLAS "
          f"thread(s) for numpy and PyTorch (alternating rounds of {repeat} steps, until the ratio's IQR < 10 %)")
    for dev in devices:
        per_round, began = [], time.perf_counter()
        while True:
            r = compare_with_torch(SIZES, BATCH, "float32", dev, rounds=1, repeat=repeat, settle_s=0.1)
            if r["ratio"] is None:
                break
            per_round.append(r)
            ratios = np.array([p["ratio"] for p in per_round])
            rel_iqr = float(np.subtract(*np.percentile(ratios, [75, 25])) / np.median(ratios))
            if len(per_round) >= 3 and (rel_iqr < TARGET_IQR or len(per_round) >= rounds
                                        or time.perf_counter() - began > budget):
                break
        if per_round:
            r = dict(per_round[0])
            r["ours_s"] = float(np.median([p["ours_s"] for p in per_round]))
            r["torch_s"] = float(np.median([p["torch_s"] for p in per_round]))
            r["ratio"] = float(np.median(ratios))
            r["rel_iqr"], r["rounds"], r["noisy"] = rel_iqr, len(per_round), rel_iqr >= TARGET_IQR
        gf = r["flops"] / r["ours_s"] / 1e9
        line = f"  {dev.upper()}: course {r['ours_s'] * 1e3:8.3f} ms ({gf:.1f} GFLOP/s)"
        if r["ratio"] is None:
            line += f"   | {r['note']}"
        else:
            verdict = "meets" if r["ratio"] <= r["target"] else "misses"
            line += (f"   PyTorch {r['torch_s'] * 1e3:8.3f} ms   ratio {r['ratio']:.3f}× (IQR {r['rel_iqr']:.0%} over "
                     f"{r['rounds']} rounds{', noisy' if r['noisy'] else ''}; target <= {r['target']}: {verdict} it)")
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
