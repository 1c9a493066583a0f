"""Lesson 05 benchmark: backward pass of the paper's tanh RNN, BPPSA scan vs sequential backprop.

The workload of Wang, Bai, Pekhimenko (MLSys 2020): a vanilla tanh RNN, input size 1, hidden size
20, batch 16, float32.  Backward time = full step - forward, the paper's definition (median over
rounds that alternate the forward pass and the full steps),
for ``method="sequential"`` (the classic loop) and ``method="scan"`` (``course.bppsa.backprop_scan``)
on the same device in the same run; PyTorch's ``nn.RNN`` (cuDNN on a GPU) is timed the same way when
installed.  Ratios printed next to the issue's target:

* GPU: scan speedup over sequential at T = 30,000, target >= 108× (the paper's best, on RTX 2070 / 2080 Ti);
* PyTorch backward / scan backward at T = 1,000, 10,000, 30,000 (reported, no target);
* CPU: the same ratios, reported honestly (the scan does ~40× more arithmetic: expect < 1).

    python benchmarks/bench_bppsa.py [--quick] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import sys

from course.bppsa import work_counts
from course.bppsa_timing import PAPER, time_rnn, time_torch_rnn, torch_available
from course.devices import gpu_available, gpu_unavailable_reason
from course.errors import GPUUnavailableError
from course.results import ResultSet

TARGET_T = 30000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="T = 100 and 1,000 only, 3 repeats (a sanity run)")
    ap.add_argument("--out", help="write the results (with provenance) to this JSON file")
    args = ap.parse_args(argv)
    Ts = (100, 1000) if args.quick else (1000, 10000, 30000)
    repeat = 3 if args.quick else 5
    h, B = PAPER["hidden_size"], PAPER["batch"]
    devices = ["cpu"] + (["gpu"] if gpu_available() else [])
    rs = ResultSet("bench_bppsa", params={"Ts": list(Ts), "hidden_size": h, "batch": B, "input_size": 1,
                                          "dtype": "float32", "repeat": repeat, "torch_threads": 1,
                                          "backward": "median over interleaved rounds of (full step - forward)"})
    print(f"tanh RNN, input 1, hidden {h}, batch {B}, float32; backward = full step - forward "
          f"(median over {repeat} alternating rounds)")
    if "gpu" not in devices:
        print(f"No GPU: {gpu_unavailable_reason()} (the GPU target is not measured)")
    if not torch_available():
        print("PyTorch is not installed: no PyTorch peer (pip install torch to add it)")
    for dev in devices:
        print(f"\n{dev.upper()}")
        print(f"  {'T':>6}  {'forward':>10}  {'seq bwd':>10}  {'scan bwd':>10}  {'torch bwd':>10}  "
              f"{'seq/scan':>9}  {'torch/scan':>10}  target")
        for T in Ts:
            r = time_rnn(T, h, B, device=dev, repeat=repeat, warmup=1)
            seq, scan = r["backward_s"]["sequential"], r["backward_s"]["scan"]
            torch_b = None
            if torch_available():
                try:
                    torch_b = time_torch_rnn(T, h, B, device=dev, repeat=repeat)["backward_s"]
                except GPUUnavailableError as exc:
                    rs.notes.append(f"PyTorch not timed on {dev}: {exc}")
            ratio = seq / scan if seq > 0 and scan > 0 else None
            t_ratio = torch_b / scan if torch_b and torch_b > 0 and scan > 0 else None
            if dev == "gpu" and T == TARGET_T:
                target = (f">= {PAPER['backward_speedup']:.0f}× "
                          + ("PASS" if ratio and ratio >= PAPER["backward_speedup"] else "BELOW TARGET"))
            else:
                target = "(report)"

            def ms(s):
                return f"{s * 1e3:9.2f}ms" if s is not None else f"{'-':>11}"

            def x(v):
                return f"{v:8.3f}×" if v is not None else f"{'n/a':>9}"
            print(f"  {T:>6}  {ms(r['forward'].median)}  {ms(seq)}  {ms(scan)}  {ms(torch_b)}  {x(ratio)}  "
                  f"{x(t_ratio):>10}  {target}")
            c = work_counts(T, h, B)
            rs.add(device=dev, T=T, forward_s=r["forward"].median, backward_sequential_s=seq,
                   backward_scan_s=scan, backward_torch_s=torch_b, speedup_over_sequential=ratio,
                   speedup_over_torch=t_ratio, max_grad_diff=r["max_grad_diff"],
                   steps_sequential=c["steps_sequential"], steps_scan=c["steps_scan"],
                   work_ratio=c["work_ratio"])
    print("\nseq/scan and torch/scan above 1: the scan's backward pass is faster.")
    if args.out:
        print(f"wrote {rs.save(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
