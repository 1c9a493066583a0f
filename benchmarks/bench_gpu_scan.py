"""Lessons 04 and 05 at the GPU's limit: checks, then times, the scans and BPPSA's backward in one call.

GPU only (without one it says so and exits 0, like the other benchmarks):

1. **numerics** against NumPy: the single-pass scan (float32 against ``numpy.cumsum`` in float64,
   int32 exactly) at sizes with partial tiles, and the copy-free BPPSA backward
   (``course.bppsa.fast``) against the sequential backward in float64;
2. **scans** of one 1-D contiguous float32 array of 2^26 elements, in alternating rounds: the
   device-to-device copy, the course's single-pass scan (decoupled look-back), the numba block scans
   (scan-then-add, reduce-then-scan), CUB's DeviceScan in place on a buffer copied before the timing
   (``cupy.cuda.cub.cub_scan``: the library at its limit), ``cupy.cumsum(x)`` (a copy, then CUB in place)
   and ``torch.cumsum`` (PyTorch's wrapper, which hands the scan to CUB); each in GB/s
   ((bytes read + written) / time) and as a fraction of the copy measured in the same rounds;
3. **BPPSA**, the paper's tanh RNN (hidden 20, batch 16, float32) at T = 1,000 ... 30,000: the
   backward pass of the scan without copies (``method="fast"``) against two baselines, named every
   time: the course's sequential loop (``method="sequential"``) and PyTorch's ``nn.RNN`` backward
   (cuDNN);
4. the issue's target table, each figure against its target.

    python benchmarks/bench_gpu_scan.py [--quick | --smoke] [--out FILE.json]

``--smoke`` runs every step at tiny sizes, as ``tools/gpu_run.sh --dry-run`` does on the stand-in GPU
(``COURSE_STANDIN_GPU=1``: NumPy posing as CuPy), so that this script meets its bugs on a CPU.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from course.devices import gpu_available, gpu_info, gpu_unavailable_reason
from course.results import ResultSet

N = 2**26
TS = (1000, 3000, 10000, 30000)
QUICK_TS = (1000, 10000)
#: Sizes of each mode: (scan length, BPPSA lengths, numerics sizes, rounds, repeats, BPPSA repeats).
MODES = {"full": (N, TS, (1, 4097, 3 * 4096 + 5, 2**22 + 1), 7, 10, 5),
         "quick": (2**24, QUICK_TS, (1, 4097, 3 * 4096 + 5, 2**22 + 1), 3, 5, 3),
         "smoke": (2**10, (40, 100), (1, 33, 4097), 1, 2, 3)}
#: (figure, bound): fraction of the copy, or a speedup over cuDNN's backward.
TARGETS = {"single-pass": 0.80, "single-pass vs CUB in place": 1.0, "scan-then-add": 0.40, "reduce-then-scan": 0.50,
           "fast vs cuDNN, T = 30,000": 10.0, "fast vs cuDNN, every T >= 1,000": 1.0,
           "fast chain vs sequential kernel, T = 30,000": 3.0, "fast vs cuDNN graph, T = 30,000": 20.0,
           "fast vs cuDNN graph, every T >= 1,000": 1.0}


def check_numerics(rs: ResultSet, sizes: tuple = MODES["full"][2], Ts: tuple = (1, 37, 1000)) -> bool:
    from course.bppsa.models import TanhRNN
    from course.devices import cupy_module
    from course.scan.singlepass import single_pass_scan

    cp = cupy_module()
    ok = True
    for n in sizes:
        rng = np.random.default_rng(n)
        xf = rng.standard_normal(n).astype(np.float32)
        ref = np.cumsum(xf.astype(np.float64))
        err = float(np.max(np.abs(cp.asnumpy(single_pass_scan(cp.asarray(xf))) - ref)) / max(1.0, np.abs(ref).max()))
        xi = rng.integers(-9, 10, n).astype(np.int32)
        exact = bool(np.array_equal(cp.asnumpy(single_pass_scan(cp.asarray(xi))), np.cumsum(xi, dtype=np.int32)))
        good = err < 1e-4 and exact
        ok &= good
        print(f"  single-pass scan, n = {n:>9,}: float32 max error / max |sum| = {err:.1e}, int32 exact: {exact}")
        rs.add(device="gpu", check="single-pass", n=n, relative_error=err, int32_exact=exact, ok=good)
    for T in Ts:
        rnn = TanhRNN(1, 20, seed=T, device="gpu", dtype="float64")
        x, y = rnn.example_data(T, 16, seed=T)
        _, cache = rnn.forward(x, y)
        ref, got = rnn.backward(cache, "sequential"), rnn.backward(cache, "fast")
        err = max(float(cp.abs(got[k] - ref[k]).max() / max(1.0, float(cp.abs(ref[k]).max()))) for k in ref)
        ok &= err < 1e-10
        print(f"  BPPSA fast backward, T = {T:>5,}: largest relative gradient difference to sequential = {err:.1e}")
        rs.add(device="gpu", check="bppsa fast", T=T, relative_error=err, ok=err < 1e-10)
    return ok


def time_scans(rs: ResultSet, n: int, rounds: int, repeat: int) -> dict:
    from course.devices import cupy_module
    from course.scan.kernels import block_scan
    from course.scan.singlepass import single_pass_scan
    from course.scan.timing import cub_inclusive_sum_in_place, make_input
    from course.timing import benchmark
    from course.torch_peer import torch_cuda_available

    cp = cupy_module()
    x = make_input(n, "add", "float32", "gpu")
    out = cp.empty_like(x)
    fns = {"copy": lambda a: cp.copyto(out, a),
           "single-pass": lambda a: single_pass_scan(a, out=out),
           "scan-then-add": lambda a: block_scan(a, exclusive=False),
           "reduce-then-scan": lambda a: block_scan(a, exclusive=False, strategy="reduce-then-scan"),
           "cupy.cumsum (copy + CUB)": cp.cumsum}
    buf = x.copy()                          # CUB's scan in place on a copy made before any timing
    try:
        cub_inclusive_sum_in_place(buf)
        fns["CUB in place"] = lambda a: cub_inclusive_sum_in_place(buf)
    except (ImportError, AttributeError) as exc:
        print(f"  CUB in place: not timed ({type(exc).__name__}: {exc})")
    samples: dict = {k: [] for k in fns}
    torch_x = None
    if torch_cuda_available():
        import torch

        from course.torch_peer import benchmark_torch

        torch_x = torch.from_dlpack(x)
        samples["torch.cumsum"] = []
    for _ in range(rounds):                 # alternating rounds: every scan sees the same GPU state
        for name, fn in fns.items():
            samples[name] += benchmark(fn, x, device="gpu", warmup=1, repeat=repeat).samples.tolist()
        if torch_x is not None:
            samples["torch.cumsum"] += benchmark_torch(torch.cumsum, torch_x, 0, device="gpu", warmup=1,
                                                       repeat=repeat).samples.tolist()
    med = {k: float(np.median(v)) for k, v in samples.items()}
    copy_gbps = 8 * n / med["copy"] / 1e9
    print(f"\n  scans of n = 2^{n.bit_length() - 1} float32 (1-D, contiguous), {rounds} alternating rounds of "
          f"{repeat}; GB/s = (bytes read + written) / time")
    for name, t in med.items():
        gbps = 8 * n / t / 1e9
        print(f"  {name:>20}: {t * 1e3:8.3f} ms  {gbps:7.1f} GB/s  {gbps / copy_gbps:6.1%} of the copy")
        rs.add(device="gpu", n=n, algorithm=name, median_s=t, gb_per_s=gbps, of_copy=gbps / copy_gbps)
    if torch_x is None:
        print("  torch.cumsum: not timed (PyTorch with CUDA is not installed here)")
    return {k: (8 * n / t / 1e9) / copy_gbps for k, t in med.items()}


def time_bppsa_peers(rs: ResultSet, Ts: tuple, fast_s: dict, repeat: int) -> tuple[dict, dict]:
    """The graph-replayed baselines: BPPSA's chain against the sequential kernel (same work, both CUDA graphs),
    and the fast backward against cuDNN's backward captured in torch.cuda.graph."""
    from course.bppsa.timing import chain_peer_timings, torch_rnn_graph_timings

    vs_seq, vs_graph = {}, {}
    print("\n  graph-replayed baselines: ratio = baseline time / BPPSA's time")
    for T in Ts:
        c = chain_peer_timings(T, 20, 16, repeat=repeat)
        vs_seq[T] = c["backward_s"]["sequential kernel"] / c["backward_s"]["fast chain"]
        try:
            g = torch_rnn_graph_timings(T, 20, 16, repeat=repeat)["backward_s"]
        except Exception as exc:  # noqa: BLE001 - PyTorch without CUDA, or a capture it refuses: said
            print(f"  T = {T:,}: cuDNN's graph-captured backward not timed ({type(exc).__name__}: {exc})")
            g = None
        if g:
            vs_graph[T] = g / fast_s[T]
        print(f"  T = {T:>6,}: chain {c['backward_s']['fast chain'] * 1e3:8.3f} ms, sequential kernel "
              f"{c['backward_s']['sequential kernel'] * 1e3:8.3f} ms ({vs_seq[T]:.2f}×), cuDNN graph "
              f"{g * 1e3 if g else float('nan'):8.3f} ms ({vs_graph.get(T, float('nan')):.2f}× the fast backward)")
        rs.add(device="gpu", T=T, algorithm="graph peers", fast_chain_s=c["backward_s"]["fast chain"],
               sequential_kernel_s=c["backward_s"]["sequential kernel"], cudnn_graph_s=g,
               chain_vs_sequential_kernel=vs_seq[T], fast_vs_cudnn_graph=vs_graph.get(T),
               max_grad_diff=c["max_grad_diff"])
    return vs_seq, vs_graph


def time_bppsa(rs: ResultSet, Ts: tuple, repeat: int) -> dict:
    from course.bppsa.timing import rnn_timings, torch_rnn_timings
    from course.torch_peer import cupy_tf32, torch_cuda_available

    print("\n  BPPSA backward, tanh RNN hidden 20, batch 16, float32; each ratio = baseline time / fast time; "
          f"TF32: ours {'on' if cupy_tf32() else 'off'} (CUPY_TF32), cuDNN's off")
    print(f"  {'T':>7} {'fast ms':>9} {'sequential ms':>14} {'cuDNN ms':>9} {'vs course loop':>15} {'vs cuDNN':>9}")
    vs_cudnn, fast_s = {}, {}
    for T in Ts:
        r = rnn_timings(T, 20, 16, device="gpu", methods=("sequential", "fast"), repeat=repeat)
        fast, seq = r["backward_s"]["fast"], r["backward_s"]["sequential"]
        fast_s[T] = fast
        peer = torch_rnn_timings(T, 20, 16, device="gpu", repeat=repeat) if torch_cuda_available() else None
        cudnn = peer["backward_s"] if peer else None
        if cudnn is not None:
            vs_cudnn[T] = cudnn / fast
        print(f"  {T:>7,} {fast * 1e3:9.3f} {seq * 1e3:14.3f} {cudnn * 1e3 if cudnn else float('nan'):9.3f} "
              f"{seq / fast:14.1f}× {vs_cudnn.get(T, float('nan')):8.2f}×")
        rs.add(device="gpu", T=T, fast_backward_s=fast, sequential_backward_s=seq, cudnn_backward_s=cudnn,
               fast_vs_sequential=seq / fast, fast_vs_cudnn=vs_cudnn.get(T), max_grad_diff=r["max_grad_diff"],
               fast_tf32=cupy_tf32(), cudnn_tf32=peer["tf32"] if peer else None)
    return vs_cudnn, fast_s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="2^24 elements, T = 1,000 and 10,000 only")
    size.add_argument("--smoke", action="store_true", help="tiny sizes: every step runs, nothing is worth timing "
                      "(the stand-in GPU's dry run)")
    ap.add_argument("--out", help="write the results (with provenance) to this JSON file")
    args = ap.parse_args(argv)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    n, Ts, sizes, rounds, repeat, bppsa_repeat = MODES[mode]
    rs = ResultSet("bench_gpu_scan", params={"n": n, "Ts": list(Ts), "mode": mode})
    if not gpu_available():
        print(f"GPU: none answers here ({gpu_unavailable_reason()}); nothing measured. On a GPU machine: "
              "python benchmarks/bench_gpu_scan.py")
        return 0
    print(f"GPU: {gpu_info()[0]['name']}")
    print("numerics against NumPy:")
    ok = check_numerics(rs, sizes, Ts=(1, 37, 1000) if mode != "smoke" else (1, 37))
    fractions = time_scans(rs, n, rounds, repeat)
    vs_cudnn, fast_s = time_bppsa(rs, Ts, bppsa_repeat)
    vs_seq, vs_graph = time_bppsa_peers(rs, Ts, fast_s, bppsa_repeat)
    big = Ts[-1]
    cub = fractions.get("CUB in place")
    rows = [(f"single-pass scan, 2^{n.bit_length() - 1} float32, of the copy", fractions["single-pass"],
             TARGETS["single-pass"], "%"),
            ("single-pass scan vs CUB's scan in place (rate / rate)", fractions["single-pass"] / cub if cub else None,
             TARGETS["single-pass vs CUB in place"], "x"),
            ("scan-then-add (numba), of the copy", fractions["scan-then-add"], TARGETS["scan-then-add"], "%"),
            ("reduce-then-scan (numba), of the copy", fractions["reduce-then-scan"], TARGETS["reduce-then-scan"], "%"),
            (f"BPPSA fast backward vs cuDNN backward, T = {big:,}", vs_cudnn.get(big),
             TARGETS["fast vs cuDNN, T = 30,000"], "x"),
            (f"BPPSA fast backward vs cuDNN backward, every T >= {Ts[0]:,} (the smallest)",
             min(vs_cudnn.values()) if vs_cudnn else None, TARGETS["fast vs cuDNN, every T >= 1,000"], "x"),
            (f"BPPSA chain vs the sequential GPU kernel (both CUDA graphs), T = {big:,}", vs_seq.get(big),
             TARGETS["fast chain vs sequential kernel, T = 30,000"], "x"),
            (f"BPPSA fast backward vs cuDNN's graph-captured backward, T = {big:,}", vs_graph.get(big),
             TARGETS["fast vs cuDNN graph, T = 30,000"], "x"),
            (f"BPPSA fast backward vs cuDNN's graph-captured backward, every T >= {Ts[0]:,}",
             min(vs_graph.values()) if vs_graph else None, TARGETS["fast vs cuDNN graph, every T >= 1,000"], "x")]
    print(f"\n  numerics: {'all equal to NumPy' if ok else 'SOME DIFFER FROM NUMPY (see above)'}")
    print("\n  | figure | measured | target | met |\n  |---|---|---|---|")
    for name, value, bound, unit in rows:
        shown = "not measured" if value is None else (f"{value:.0%}" if unit == "%" else f"{value:.2f}×")
        met = None if value is None else value >= bound
        print(f"  | {name} | {shown} | target >= {f'{bound:.0%}' if unit == '%' else f'{bound:g}×'} | {met} |")
        rs.add(device="gpu", algorithm="target", figure=name, value=value, target=bound, met=met)
    if args.out:
        print(f"wrote {rs.save(args.out)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
