"""Lesson 07 benchmark: the diagonal scan against the loop, with the counted work ratio beside it.

h_t = a_t ⊙ h_{t-1} + b_t, float32, n = 16 channels.  Peers are timed in alternating rounds in one run,
so that all see the same machine state; every ratio is printed next to the work ratio of the scan
(flops of the scan / flops of the loop, counted by ``course.recurrences.work_counts``).

* CPU, T = 2^14: ``recurrence_scan`` (Blelloch, affine operator) against ``recurrence_loop`` (a Python
  loop of vectorized steps): target, the scan takes at most 0.5× the loop's time.  Reported beside it:
  a compiled sequential loop (``numba.njit``), the PyTorch loop where installed, and lesson 05's dense
  chain (``backprop_sequential`` against ``backprop_scan``) at the same T and n.
* GPU (when one answers), T = 2^20: the chunked numba kernel against the one-thread-per-channel kernel
  (the loop on a GPU): target, the chunked kernel at least 4× faster; ``recurrence_scan`` on CuPy and the
  PyTorch loop on the GPU are reported (the Python loops at T = 2^14).

    python benchmarks/bench_recurrences.py [--quick] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from course.bppsa.algorithm import backprop_scan, backprop_sequential
from course.devices import gpu_available, gpu_unavailable_reason
from course.recurrences import recurrence_loop, recurrence_scan, work_counts
from course.recurrences.timing import recurrence_input
from course.results import ResultSet
from course.timing import benchmark
from course.torch_peer import benchmark_torch, torch_available, torch_cuda_available

N = 16
CPU_T, GPU_T, GPU_LOOP_T = 2**14, 2**20, 2**14
CPU_TARGET = 0.5        # scan time / Python-loop time, at most
GPU_TARGET = 4.0        # per-channel kernel time / chunked kernel time, at least


def alternate(fns: dict, device: str, rounds: int, repeat: int) -> dict:
    """Median time of each no-argument function over ``rounds`` alternating rounds of ``repeat`` calls.

    PyTorch's functions (names starting with "PyTorch") are timed with ``course.torch_peer.benchmark_torch``.
    """
    samples: dict = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            timer = benchmark_torch if name.startswith("PyTorch") else benchmark
            samples[name].extend(timer(fn, device=device, warmup=1, repeat=repeat).samples)
    return {k: float(np.median(v)) for k, v in samples.items()}


def compiled_loop():
    """A compiled sequential loop (numba.njit on the CPU), or None without numba."""
    try:
        from numba import njit
    except ImportError:
        return None

    @njit(cache=False)
    def loop(a, b):
        h = np.empty_like(b)
        state = np.zeros(b.shape[1], dtype=b.dtype)
        for t in range(a.shape[0]):
            state = a[t] * state + b[t]
            h[t] = state
        return h
    return loop


def torch_loop(a, b, dev: str):
    import torch

    ta, tb = (torch.as_tensor(np.asarray(x.get() if hasattr(x, "get") else x), device=dev) for x in (a, b))

    def run():
        h = torch.zeros_like(tb[0])
        out = torch.empty_like(tb)
        for t in range(tb.shape[0]):
            h = ta[t] * h + tb[t]
            out[t] = h
        return out
    return run


def show(rs: ResultSet, device: str, T: int, times: dict, peer: str, kinds: dict) -> None:
    for name, t in times.items():
        kind = kinds.get(name, "diagonal")
        w = work_counts(T, N, kind)["work_ratio"]
        rs.add(device=device, T=T, n=N, implementation=name, kind=kind, median_s=t, ratio_to_peer=t / times[peer],
               work_ratio=w)
        work = f"   (work ratio of this {kind} scan: {w:.3g}× the loop's flops)" if "scan" in name else ""
        print(f"  {name:>34}: {t * 1e3:10.3f} ms  {t / times[peer]:8.3f}× the time of {peer}{work}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds: a sanity run")
    ap.add_argument("--out", help="write the results (with provenance) to this JSON file")
    args = ap.parse_args(argv)
    rounds, repeat = (2, 2) if args.quick else (5, 5)
    rs = ResultSet("bench_recurrences", params={"n": N, "cpu_T": CPU_T, "gpu_T": GPU_T, "dtype": "float32",
                                                "rounds": rounds, "repeat": repeat})

    a, b = recurrence_input(CPU_T, N, "diagonal", "float32", "cpu")
    J, g = recurrence_input(CPU_T, N, "dense", "float32", "cpu")
    fns = {"loop (Python, vectorized steps)": lambda: recurrence_loop(a, b),
           "scan (Blelloch, affine)": lambda: recurrence_scan(a, b)}
    njit_loop = compiled_loop()
    if njit_loop is not None:
        njit_loop(a, b)                                    # compile once, outside the timings
        fns["compiled loop (numba.njit)"] = lambda: njit_loop(a, b)
    if torch_available():
        fns["PyTorch loop"] = torch_loop(a, b, "cpu")
    fns["dense loop (lesson 05)"] = lambda: backprop_sequential(J, g)
    fns["dense scan (lesson 05, BPPSA)"] = lambda: backprop_scan(J, g)
    kinds = {"dense loop (lesson 05)": "dense", "dense scan (lesson 05, BPPSA)": "dense"}
    print(f"CPU, T = {CPU_T:,}, n = {N}, float32 (median over {rounds} alternating rounds of {repeat})")
    times = alternate(fns, "cpu", rounds, repeat)
    show(rs, "cpu", CPU_T, times, "loop (Python, vectorized steps)", kinds)
    ratio = times["scan (Blelloch, affine)"] / times["loop (Python, vectorized steps)"]
    verdict = "PASS" if ratio <= CPU_TARGET else "MISS"
    print(f"  diagonal scan / Python loop = {ratio:.3f} (target <= {CPU_TARGET}): {verdict}")
    if "compiled loop (numba.njit)" in times:
        print(f"  diagonal scan / compiled loop = "
              f"{times['scan (Blelloch, affine)'] / times['compiled loop (numba.njit)']:.3g} (reported, no target)")

    if not gpu_available():
        print(f"\nGPU: not measured ({gpu_unavailable_reason()})")
    else:
        import cupy

        from course.recurrences.kernels import diagonal_scan

        ga, gb = recurrence_input(GPU_T, N, "diagonal", "float32", "gpu")
        fns = {"numba per-channel kernel": lambda: diagonal_scan(ga, gb, chunk=GPU_T),
               "numba chunked kernel (64 steps)": lambda: diagonal_scan(ga, gb, chunk=64),
               "scan (Blelloch on CuPy)": lambda: recurrence_scan(ga, gb)}
        print(f"\nGPU, T = {GPU_T:,}, n = {N}, float32")
        times = alternate(fns, "gpu", rounds, repeat)
        show(rs, "gpu", GPU_T, times, "numba per-channel kernel", {})
        gain = times["numba per-channel kernel"] / times["numba chunked kernel (64 steps)"]
        print(f"  per-channel / chunked = {gain:.2f}× (target >= {GPU_TARGET}): "
              f"{'PASS' if gain >= GPU_TARGET else 'MISS'}")
        sa, sb = ga[:GPU_LOOP_T], gb[:GPU_LOOP_T]
        fns = {"loop (Python, CuPy steps)": lambda: recurrence_loop(sa, sb),
               "scan (Blelloch on CuPy)": lambda: recurrence_scan(sa, sb),
               "numba chunked kernel (64 steps)": lambda: diagonal_scan(sa, sb, chunk=64)}
        if torch_cuda_available():
            fns["PyTorch loop (GPU)"] = torch_loop(sa, sb, "cuda")
        print(f"GPU, T = {GPU_LOOP_T:,}: against the Python loops")
        show(rs, "gpu", GPU_LOOP_T, alternate(fns, "gpu", rounds, max(1, repeat // 2)),
             "loop (Python, CuPy steps)", {})
        cupy.cuda.get_current_stream().synchronize()
    if args.out:
        print(f"wrote {rs.save(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
