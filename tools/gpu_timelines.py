"""Kernel timelines of lesson 01's training step on a GPU: each rung of the ladder and PyTorch's eager and
graph-captured steps, a few steps each, recorded with PyTorch's profiler.  The last step of
``tools/gpu_run.sh`` (the profiler slows every launch after it, so nothing is timed afterwards).

    python tools/gpu_timelines.py [--width 512] [--out FILE.json] [--reference-dir DIR] [--dry-run]

Writes the ``step_timelines`` result set to ``--out`` and, on a GPU, as a reference in ``--reference-dir``
(default ``course/reference/``), where lessons 01 and 03 find it.  ``--dry-run`` (the stand-in GPU)
builds and runs every step once, then says that the recording itself needs PyTorch with CUDA.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def step_functions(width: int, batch: int) -> tuple[dict, dict]:
    """name -> one training step, and name -> its title: every GPU rung, and PyTorch's eager and graph
    steps (TF32 off) where PyTorch has CUDA."""
    from course.backprop import MLP
    from course.backprop.fast_step import RUNGS, FastStep
    from course.backprop.timing import PEER_TITLES, torch_steps
    from course.backprop.trace import random_batch
    from course.torch_peer import torch_cuda_available

    model = MLP([784, width, width, 10], device="gpu", seed=0)
    x, y = random_batch(model, batch)
    fns, titles = {}, {}
    for rung in RUNGS:
        fast = FastStep(model, rung, batch=batch, lr=1e-3)
        fast.load(x, y)
        fns[rung], titles[rung] = fast.step, f"{fast.title}, 784-{width}-{width}-10, batch {batch}"
    if torch_cuda_available():
        peers = torch_steps(model, x, y, lr=1e-3)
        for name in ("torch eager", "torch graph"):
            fns[name], titles[name] = peers[name], f"{PEER_TITLES[name]}, 784-{width}-{width}-10, batch {batch}"
    return fns, titles


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--out", default=None, help="write the result set here (JSON)")
    ap.add_argument("--reference-dir", default=None, help="store it as a reference here (default course/reference/)")
    ap.add_argument("--dry-run", action="store_true", help="the stand-in GPU: build and run each step once")
    args = ap.parse_args(argv)
    from course.devices import gpu_available, gpu_unavailable_reason
    from course.results import save_reference
    from course.timeline import record_timelines
    from course.torch_peer import torch_cuda_available, torch_tf32

    if not gpu_available():
        print(f"no GPU answers ({gpu_unavailable_reason()}): no timeline recorded")
        return 0
    width, batch = (16, 8) if args.dry_run else (args.width, args.batch)
    fns, titles = step_functions(width, batch)
    if not torch_cuda_available():
        for name, fn in fns.items():
            fn()
            print(f"  {name}: built and run once")
        print("skipped the recording: it needs PyTorch built with CUDA and a GPU it sees (its profiler reads the "
              "kernels through CUPTI)")
        return 0
    with torch_tf32(False):                    # the eager peer runs under the switches in force when called
        rs = record_timelines(fns, steps=args.steps, titles=titles)
    rs.params |= {"width": width, "batch": batch, "tf32": False}
    for name in fns:
        kernels = rs.select(timeline=name, kind="kernel")
        print(f"  {name:12} {len(kernels) // max(args.steps, 1):4d} kernels per step")
    if args.out:
        rs.save(args.out)
        print(f"wrote {args.out}")
    print(f"stored {save_reference(rs, args.reference_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
