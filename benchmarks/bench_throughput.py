"""Lesson 03 benchmark: the roofline's two measured peaks against plain peers, in one run.

* **Copy bandwidth** — the figure the roofline uses (``course.hardware.copy_bandwidth``, through
  ``course.roofline.measure_peaks``) against a plain ``numpy.copyto`` (CuPy device-to-device copy on
  a GPU) of the same large array, timed here with ``time.perf_counter`` (CUDA events on a GPU).
  Target: ratio course / peer >= 0.90 — the tool must not understate the limit it teaches.
* **Peak FLOP/s** — the roofline's peak against the BLAS matrix product (``numpy.matmul`` /
  cuBLAS through CuPy) at its best size over a wider range of sizes, timed here.  Target >= 0.90.
* For information: PyTorch's float32 matrix product at the same sizes (when installed), and the
  fused / unfused ratio of lesson 03's elementwise chain.

The two sides are measured in alternating rounds, and each side's best round is compared
(a peak is what the machine can do).

    python benchmarks/bench_throughput.py [--quick] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from course.devices import get_xp, gpu_available, synchronize
from course.results import ResultSet
from course.roofline import measure_peaks, peak_matmul_sizes, peaks_of
from course.throughput_batch import torch_available
from course.throughput_fusion import fusion_compare
from course.timing import benchmark

TARGET = 0.90


def peer_copy(dev: str, nbytes: int, repeat: int) -> tuple[float, float]:
    """(best, median) bytes/s (read + write) of a plain copy of a large array."""
    xp = get_xp(dev)
    src = xp.ones(nbytes // 4, dtype=xp.float32)
    dst = xp.empty_like(src)
    t = benchmark(xp.copyto, dst, src, device=dev, warmup=2, repeat=repeat, name="plain copy")
    return 2 * src.nbytes / t.min, 2 * src.nbytes / t.median


def peer_matmul(dev: str, sizes: list[int], repeat: int) -> tuple[float, int]:
    """(best FLOP/s, its size) of a plain BLAS product over ``sizes``."""
    xp = get_xp(dev)
    best = (0.0, 0)
    for n in sizes:
        a = xp.full((n, n), 0.5, dtype=xp.float32)
        b = xp.full((n, n), 0.25, dtype=xp.float32)
        c = xp.empty((n, n), dtype=xp.float32)
        synchronize(dev)
        t = benchmark(xp.matmul, a, b, out=c, device=dev, warmup=2, repeat=repeat, budget_s=3.0)
        best = max(best, (2.0 * n ** 3 / t.min, n))
    return best


def torch_matmul(dev: str, sizes: list[int], repeat: int) -> float | None:
    if not torch_available():
        return None
    import torch

    tdev = "cuda" if dev == "gpu" else "cpu"
    if tdev == "cuda" and not torch.cuda.is_available():
        return None
    best = 0.0
    for n in sizes:
        a = torch.full((n, n), 0.5, device=tdev)
        b = torch.full((n, n), 0.25, device=tdev)
        times = []
        for _ in range(repeat + 2):
            if tdev == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            torch.matmul(a, b)
            if tdev == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        best = max(best, 2.0 * n ** 3 / min(times[2:]))
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller arrays and fewer rounds: a few seconds")
    ap.add_argument("--out", help="write the results (with provenance) to this JSON file")
    args = ap.parse_args(argv)
    rounds, repeat = (2, 3) if args.quick else (5, 7)
    devices = ["cpu"] + (["gpu"] if gpu_available() else [])
    rs = ResultSet("bench_throughput", params={"rounds": rounds, "repeat": repeat, "quick": args.quick,
                                               "target": TARGET})
    ok = True
    for dev in devices:
        nbytes = (2 ** 26 if args.quick else 2 ** 28) if dev == "cpu" else 2 ** 30
        quick_sizes = peak_matmul_sizes(dev, "float32", quick=True)
        wide = sorted(set(peak_matmul_sizes(dev, "float32", quick=args.quick)) | {quick_sizes[0] // 2})
        ours_bw, ours_med, peer_bw, peer_med, ours_fl, peer_fl, peer_n = [], [], [], [], [], [], 0
        for _ in range(rounds):  # alternate the two sides so that noise hits both alike
            roof = measure_peaks(dev, ("float32",), quick=True, copy_nbytes=nbytes, repeat=repeat)
            pk = peaks_of(roof, dev)
            ours_bw.append(pk["bandwidth"])
            ours_med.append(roof.select(kind="peak_bandwidth")[0]["median_bytes_per_s"])
            ours_fl.append(pk["flops"]["float32"])
            best, med = peer_copy(dev, nbytes, repeat)
            peer_bw.append(best)
            peer_med.append(med)
            f, peer_n = peer_matmul(dev, wide, repeat)
            peer_fl.append(f)
        r_bw = max(ours_bw) / max(peer_bw)
        r_med = float(np.median(ours_med) / np.median(peer_med))
        r_fl = max(ours_fl) / max(peer_fl)
        ok &= r_bw >= TARGET and r_med >= TARGET and r_fl >= TARGET
        print(f"{dev.upper()} ({rounds} alternating rounds, {nbytes / 2**20:.0f} MiB copies)")
        print(f"  roofline bandwidth (best run): course {max(ours_bw) / 1e9:8.2f} GB/s   plain copyto "
              f"{max(peer_bw) / 1e9:8.2f} GB/s   ratio {r_bw:.3f} (target >= {TARGET}: "
              f"{'meets' if r_bw >= TARGET else 'misses'} it)")
        print(f"  copy_bandwidth (median run):   course {np.median(ours_med) / 1e9:8.2f} GB/s   plain copyto "
              f"{np.median(peer_med) / 1e9:8.2f} GB/s   ratio {r_med:.3f} (target >= {TARGET}: "
              f"{'meets' if r_med >= TARGET else 'misses'} it)")
        print(f"  peak FLOP/s:    course {max(ours_fl) / 1e9:8.1f} GFLOP/s (sizes {quick_sizes})   BLAS best "
              f"{max(peer_fl) / 1e9:8.1f} GFLOP/s (n={peer_n}, sizes {wide})   ratio {r_fl:.3f} "
              f"(target >= {TARGET}: {'meets' if r_fl >= TARGET else 'misses'} it)")
        rs.add(device=dev, what="roofline_bandwidth_best", ours=max(ours_bw), peer=max(peer_bw), ratio=r_bw,
               target=TARGET, nbytes=nbytes)
        rs.add(device=dev, what="copy_bandwidth_median", ours=float(np.median(ours_med)),
               peer=float(np.median(peer_med)), ratio=r_med, target=TARGET, nbytes=nbytes)
        rs.add(device=dev, what="peak_flops_float32", ours=max(ours_fl), peer=max(peer_fl), ratio=r_fl,
               target=TARGET, peer_best_n=peer_n)
        tf = torch_matmul(dev, wide, repeat)
        if tf is None:
            print("  PyTorch peer: not installed here (skipped)")
        else:
            print(f"  PyTorch float32 matmul best {tf / 1e9:8.1f} GFLOP/s: course peak / PyTorch = "
                  f"{max(ours_fl) / tf:.3f} (information, no target)")
            rs.add(device=dev, what="peak_flops_vs_torch", ours=max(ours_fl), peer=tf, ratio=max(ours_fl) / tf)
        fus = fusion_compare(n=2 ** 22 if args.quick else 2 ** 25, steps=4, devices=[dev],
                             modes=("unfused", "fused"), repeat=repeat)
        t = {r["mode"]: r["median_s"] for r in fus.records}
        if "fused" in t:
            print(f"  fusion, 4 elementwise steps: unfused / fused time = {t['unfused'] / t['fused']:.2f}× "
                  "(information: 4× fewer bytes moved)")
            rs.add(device=dev, what="fusion_speedup", ratio=t["unfused"] / t["fused"])
    if args.out:
        print(f"wrote {rs.save(args.out)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
