"""Registers, spills and shared memory of the course's CUDA C kernels for one GPU architecture, with no GPU.

    python tools/ptxas_report.py [--arch sm_90]

Compiles each source with ``nvcc -arch=ARCH -cubin -Xptxas -v`` and prints one line per kernel.
The exit status is 1 when a kernel spills registers to local memory, 2 when nvcc is missing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: (name, module, attribute) of every CUDA C source compiled by CuPy's RawModule in the course.
SOURCES = [("single-pass scan", "course.scan.singlepass", "SINGLE_PASS_SOURCE"),
           ("training step", "course.backprop.step_kernels", "KERNEL_SOURCE"),
           ("vector ReLU", "course.vectorize.gpu", "VECTOR_RELU_SOURCE")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="sm_90")
    args = parser.parse_args(argv)
    import importlib

    from course.cuda_c import ptxas_rows

    spills = False
    for name, module, attr in SOURCES:
        try:
            rows = ptxas_rows(getattr(importlib.import_module(module), attr), args.arch)
        except FileNotFoundError as exc:
            print(exc)
            return 2
        print(f"{name} ({module}.{attr}), {args.arch}:")
        for r in rows:
            print(f"  {r['kernel']:<30} {r.get('registers', '?'):>3} registers, {r.get('smem_bytes', 0)} bytes smem, "
                  f"{r.get('stack', 0)} bytes stack, spills {r.get('spill_stores', 0)} stores / "
                  f"{r.get('spill_loads', 0)} loads")
            spills |= bool(r.get("spill_stores") or r.get("spill_loads"))
    return 1 if spills else 0


if __name__ == "__main__":
    raise SystemExit(main())
