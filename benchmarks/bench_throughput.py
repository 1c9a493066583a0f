"""Lesson 03 benchmark: the roofline's two measured peaks against plain peers, in one run.

* **Copy bandwidth** — the figure the roofline uses (``course.hardware.copy_bandwidth``, through
  ``course.throughput.roofline.measure_peaks``) against code that shares nothing with it: on the CPU the STREAM
  copy on all cores (``course.memory_bandwidth``, numba ``prange``); on a GPU the device-to-device copy and the
  vendor's data-sheet bandwidth (labelled as such).  Target: ratio course / peer >= 0.90 — the tool
  must not understate the limit it teaches.
* **Peak FLOP/s** — the roofline's peak against the best BLAS matrix product (``numpy.matmul`` /
  cuBLAS through CuPy) over a wider range of sizes, timed here (target >= 0.90), and on the CPU against
  the theoretical peak cores × SIMD lanes × FMA units × 2 × clock (``course.throughput.roofline.theoretical_peak``:
  each factor printed with where it was read, the FMA units labelled an assumption; no target).
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
from pathlib import Path

import numpy as np

from course.devices import get_xp, gpu_available, synchronize
from course.hardware.machine import vendor_bandwidth
from course.memory_bandwidth import stream_bandwidth
from course.results import ResultSet
from course.throughput.batch import torch_available
from course.throughput.fusion import fusion_compare
from course.throughput.roofline import measure_peaks, peak_matmul_sizes, peaks_of, theoretical_peak
from course.timing import benchmark

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benchmarks' shared helpers, however run
from _adaptive import load_line  # noqa: E402

TARGET = 0.90


def peer_copy(dev: str, nbytes: int, repeat: int) -> tuple[float, float]:
    """(best, median) bytes/s (read + write) of a copy of a large array that is not the course's:
    the STREAM copy on all cores (CPU), a plain device-to-device copy (GPU)."""
    if dev == "cpu":
        r = stream_bandwidth(n=nbytes // 4, dtype="float32", kernels=("copy",), repeat=repeat, budget_s=None)
        return r["copy"]["bytes_per_s"], r["copy"]["median_bytes_per_s"]
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
    print(load_line())
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
        peer_name = "STREAM copy, all cores" if dev == "cpu" else "device copy"
        print(f"  peer for the bandwidth: {peer_name}")
        print(f"  roofline bandwidth (best run): course {max(ours_bw) / 1e9:8.2f} GB/s   peer "
              f"{max(peer_bw) / 1e9:8.2f} GB/s   ratio {r_bw:.3f} (target >= {TARGET}: "
              f"{'meets' if r_bw >= TARGET else 'misses'} it)")
        print(f"  copy_bandwidth (median run):   course {np.median(ours_med) / 1e9:8.2f} GB/s   peer "
              f"{np.median(peer_med) / 1e9:8.2f} GB/s   ratio {r_med:.3f} (target >= {TARGET}: "
              f"{'meets' if r_med >= TARGET else 'misses'} it)")
        print(f"  peak FLOP/s:    course {max(ours_fl) / 1e9:8.1f} GFLOP/s (sizes {quick_sizes})   BLAS best "
              f"{max(peer_fl) / 1e9:8.1f} GFLOP/s (n={peer_n}, sizes {wide})   ratio {r_fl:.3f} "
              f"(target >= {TARGET}: {'meets' if r_fl >= TARGET else 'misses'} it)")
        if dev == "cpu":
            tri = stream_bandwidth(n=nbytes // 4, dtype="float32", kernels=("triad",), repeat=repeat, budget_s=None)
            tri_bps = tri["triad"]["bytes_per_s"]
            print(f"  STREAM triad on {tri['threads']} cores (3 words counted per element): {tri_bps / 1e9:8.2f} GB/s; "
                  f"roofline bandwidth / triad = {max(ours_bw) / tri_bps:.3f} (information)")
            print("  the memory's own limit (channels × transfer rate) is not something this machine reports: "
                  "no data-sheet figure is assumed")
            rs.add(device=dev, what="stream_triad", peer=tri_bps, ours=max(ours_bw), ratio=max(ours_bw) / tri_bps)
            tp = theoretical_peak("float32")
            for name, value, source in tp["factors"]:
                print(f"    {name:>20}: {value if value is not None else 'unknown'}   ({source})")
            if tp["flops_per_s"]:
                print(f"  theoretical float32 peak {tp['flops_per_s'] / 1e9:8.1f} GFLOP/s: roofline peak / theoretical "
                      f"= {max(ours_fl) / tp['flops_per_s']:.3f}, best BLAS / theoretical = "
                      f"{max(peer_fl) / tp['flops_per_s']:.3f} (information: one factor is an assumption)")
                rs.add(device=dev, what="peak_flops_vs_theoretical", ours=max(ours_fl), peer=tp["flops_per_s"],
                       ratio=max(ours_fl) / tp["flops_per_s"],
                       factors=[[n, v, src] for n, v, src in tp["factors"]])
        else:
            import cupy

            name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
            name = name.decode() if isinstance(name, bytes) else name
            vb = vendor_bandwidth(name)
            if vb:
                print(f"  data sheet ({name}): {vb / 1e9:,.0f} GB/s; roofline bandwidth / data sheet = "
                      f"{max(ours_bw) / vb:.3f} (information)")
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
    print("all targets met" if ok else "some targets missed (see above)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
