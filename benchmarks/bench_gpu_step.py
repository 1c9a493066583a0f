"""Lesson 01's fast step on a GPU, checked and timed in one call: every rung against NumPy, then the ladder
and PyTorch at each width, the float32 GEMM rate of the same run, the four targets, the counts and ptxas.

    python benchmarks/bench_gpu_step.py [--quick | --smoke] [--out FILE.json]

1. **Numerics**: each CUDA C kernel against its NumPy version; each rung's loss and weights after a
   few SGD steps against the teaching MLP in NumPy (float32).
2. **Timing**: every rung (``course.backprop.fast_step``) and PyTorch eager / ``torch.cuda.graph``
   (TF32 off, and on, labelled) at widths 64 … 4,096 (784-w-w-10, batch 256), in alternating rounds.
3. **The float32 GEMM rate** (4,096² CuPy matmul) measured in this run, for target 3.
4. **Targets** (issue: a GPU step that uses the GPU), each printed with its measured value.
5. **Counts**: launches and reads back per step, and ``ptxas -v``'s registers and spills for sm_90.

Without a GPU only the counts and the ptxas report are printed (they need none), and it says so.
``--smoke`` runs every step at tiny sizes, as ``tools/gpu_run.sh --dry-run`` does on the stand-in GPU
(``COURSE_STANDIN_GPU=1``: NumPy posing as CuPy), so that the GPU branch meets its bugs on a CPU.
``python -m course gpu-check`` runs this script with the other benchmarks.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from course.backprop import MLP
from course.backprop.fast_step import FastStep
from course.backprop.readers import ladder_table
from course.backprop.step_kernels import REFERENCE, ptxas_report
from course.backprop.timing import GPU_RUNGS, ladder_sweep, step_counts
from course.capture import cublas_status
from course.devices import gpu_available, gpu_info, gpu_unavailable_reason, to_device, to_numpy

WIDTHS = (64, 128, 256, 512, 1024, 2048, 4096)
BATCH = 256


def check_kernels() -> list[str]:
    """Each CUDA C kernel against its NumPy version on random data: a list of failures (empty: all agree)."""
    from course.backprop.step_kernels import cupy_kernels
    from course.devices import cupy_module

    cp = cupy_module()
    k, rng, bad = cupy_kernels(), np.random.default_rng(0), []
    rows, cols = 256, 523
    h, b = rng.standard_normal((rows, cols)).astype(np.float32), rng.standard_normal(cols).astype(np.float32)
    y = rng.integers(0, cols, rows)
    host = {"h": h.copy(), "dz": rng.standard_normal((rows, cols)).astype(np.float32),
            "db": np.empty(cols, np.float32), "g": np.empty_like(h), "loss": np.empty(rows, np.float32),
            "bad": np.zeros(1, np.int32), "p": rng.standard_normal(4099).astype(np.float32),
            "gr": rng.standard_normal(4099).astype(np.float32), "mean": np.zeros(1, np.float32)}
    dev = {name: cp.asarray(v) for name, v in host.items()}
    for side, ks in ((host, REFERENCE), (dev, k)):
        xp = np if side is host else cp
        ks["bias_relu"](side["h"], xp.asarray(b))
        ks["mask_bias_grad"](side["dz"], side["h"], side["db"], True)
        ks["softmax_xent"](side["h"], xp.asarray(b), xp.asarray(y), side["g"], side["loss"], side["bad"])
        ks["mean_loss"](side["loss"], side["mean"])
        ks["sgd_flat"](side["p"], side["gr"], 0.3)
    for name in host:
        if not np.allclose(dev[name].get(), host[name], rtol=1e-4, atol=1e-5):
            bad.append(f"{name}: max |GPU - NumPy| = {np.abs(dev[name].get() - host[name]).max():.3g}")
    return bad


def check_rungs(width: int = 256, steps: int = 3, batch: int = BATCH) -> list[str]:
    """Each GPU rung against the teaching MLP in NumPy after ``steps`` SGD steps: a list of failures."""
    sizes, bad = [784, width, width, 10], []
    rng = np.random.default_rng(1)
    batches = [(rng.standard_normal((batch, 784)).astype(np.float32), rng.integers(0, 10, batch))
               for _ in range(steps)]
    for rung in GPU_RUNGS:
        host = MLP(sizes, seed=5)
        fast = FastStep(MLP(sizes, device="gpu", seed=5), rung, batch=batch, lr=0.05)

        for x, y in batches:
            want = host.train_step(x, y, 0.05)
            fast.load(to_device(x, "gpu"), to_device(y, "gpu"))
            fast.step()
            if abs(fast.loss() - want) > 1e-4 * max(1.0, abs(want)):
                bad.append(f"{rung}: loss {fast.loss():.6g}, NumPy {want:.6g}")
        if fast.capture_failed:
            bad.append(f"{rung}: not captured as a CUDA graph ({fast.capture_failed}); it ran as rung 'fused'")
        err = max(float(np.abs(to_numpy(p) - q).max()) for p, q in zip(fast.parameters(), host.parameters()))
        print(f"  {rung:12} after {steps} steps: max |weight - NumPy's| = {err:.2e}")
        if err > 1e-4:
            bad.append(f"{rung}: weights differ from NumPy's by {err:.3g}")
    return bad


def targets(rs, gemm_gflops: float) -> list[tuple[str, float | None, str, bool | None]]:
    """The issue's four figures: (what, value, bound, met)."""
    def t(rung: str, w: int) -> float | None:
        r = rs.select(device="gpu", width=w, rung=rung)
        return r[0]["median_s"] if r else None

    def best(w: int, rungs=GPU_RUNGS) -> float | None:
        ts = [v for r in rungs if (v := t(r, w)) is not None]
        return min(ts) if ts else None

    out = []
    g, tg = t("graph", 512), t("torch graph", 512)
    out.append(("width 512: our graph step / PyTorch graph step, TF32 off", g / tg if g and tg else None,
                "<= 1.2 (and ours <= 0.15 ms: " + (f"{g * 1e3:.3f} ms" if g else "not measured") + ")",
                None if not (g and tg) else g / tg <= 1.2 and g <= 0.15e-3))
    e, te = best(512, ("no_readback", "fused")), t("torch eager", 512)
    out.append(("width 512: our best eager step / PyTorch eager", e / te if e and te else None, "<= 0.6",
                None if not (e and te) else e / te <= 0.6))
    b4 = best(4096)
    flops = rs.select(device="gpu", width=4096, rung="fused")
    frac = flops[0]["flops"] / b4 / 1e9 / gemm_gflops if b4 and flops and gemm_gflops else None
    out.append((f"width 4096: step FLOP/s / float32 GEMM rate ({gemm_gflops:,.0f} GFLOP/s in this run)", frac,
                ">= 0.5", None if frac is None else frac >= 0.5))
    b64 = best(64)
    out.append(("best step at width 4096 / at width 64", b4 / b64 if b4 and b64 else None, ">= 3",
                None if not (b4 and b64) else b4 / b64 >= 3))
    return out


#: Sizes of each mode: (widths, batch, check width, GEMM n, repeat, budget per job in seconds).
MODES = {"full": (WIDTHS, BATCH, 256, 4096, 20, 4.0), "quick": ((64, 512, 4096), BATCH, 256, 4096, 5, 1.0),
         "smoke": ((16, 32), 8, 16, 128, 3, 0.05)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="widths 64, 512, 4096 and fewer rounds")
    size.add_argument("--smoke", action="store_true", help="tiny sizes: every step runs, nothing is worth timing "
                      "(the stand-in GPU's dry run)")
    ap.add_argument("--out", help="write the ladder's results (with provenance) to this JSON file")
    args = ap.parse_args(argv)
    widths, batch, check_width, gemm_n, repeat, budget = MODES["smoke" if args.smoke else
                                                               "quick" if args.quick else "full"]
    print("Launches and reads back per step, 784-512-512-10 (array calls counted on the CPU: a lower bound of "
          "a GPU's kernels; the graph rung's are declared):")
    for rung in GPU_RUNGS:
        c = step_counts(rung)
        inside = f", {c['kernels']} kernels inside the graph" if "kernels" in c else ""
        print(f"  {rung:12} launches {c['launches']:3}  reads back {c['reads']}  ({c['how']}{inside})")
    print(ptxas_report())
    if not gpu_available():
        print(f"No GPU answered ({gpu_unavailable_reason()}): nothing was checked or timed on a GPU.")
        return 0
    from course.hardware import time_matmul

    print(f"GPU: {gpu_info()[0]['name']}")
    failures = []
    print("Numerics: each CUDA C kernel against its NumPy version ...")
    failures += check_kernels()
    print(f"Numerics: each rung against the teaching MLP in NumPy (784-{check_width}-{check_width}-10, batch {batch}, "
          "float32) ...")
    failures += check_rungs(check_width, batch=batch)
    for f in failures:
        print("  NUMERICS FAILED:", f)
    print(f"GEMMs of rungs (c) and (d): {cublas_status()}")
    gemm = time_matmul(gemm_n, device="gpu", repeat=10, budget_s=5.0 * budget)
    print(f"float32 GEMM {gemm_n}²: {gemm['gflops']:,.0f} GFLOP/s (CuPy matmul, TF32 "
          f"{'on' if os.environ.get('CUPY_TF32', '0') not in ('', '0') else 'off'}, this run)")
    rs = ladder_sweep(widths=widths, batch=batch, devices=["gpu"], repeat=repeat, budget_s=budget)
    rs.params["gemm_gflops"] = gemm["gflops"]
    rs.params["fused_gemms"] = cublas_status()
    rs.params["gemm_n"] = gemm_n
    for w in (512, 4096) if 4096 in widths else widths[-1:]:
        print(ladder_table(rs, w, "gpu"))
    print(f"{'width':>6} " + " ".join(f"{r['rung'][:14]:>14}" for r in rs.select(device="gpu", width=widths[0])))
    for w in widths:
        print(f"{w:6} " + " ".join(f"{r['median_s'] * 1e3:12.3f}ms" for r in rs.select(device="gpu", width=w)))
    missed = 0
    for what, value, bound, met in targets(rs, gemm["gflops"]):
        verdict = "not measured" if met is None else ("met" if met else "MISSED")
        missed += met is False
        print(f"target: {what}: {'–' if value is None else f'{value:.3g}'} (target {bound}): {verdict}")
    for note in rs.notes:
        print("note:", note)
    if args.out:
        rs.save(args.out)
        print(f"wrote {args.out}")
    return 1 if failures or (missed and not args.smoke) else 0


if __name__ == "__main__":
    sys.exit(main())
