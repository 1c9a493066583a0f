"""Registers, spills and shared memory of the course's CUDA C kernels for the GPUs learners meet, with no GPU.

    python tools/ptxas_report.py [--arch sm_75 sm_80 sm_90]

Compiles each source of :data:`SOURCES` for each architecture (default: all of
:data:`course.cuda_c.ARCHS` -- sm_75 for Colab's T4, sm_80, sm_90) with ``nvcc -cubin -Xptxas -v``,
or NVRTC where nvcc is missing, and prints one line per kernel and architecture.
The exit status is 1 when a kernel spills registers to local memory or does not compile, 2 when
neither nvcc nor NVRTC is at hand.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: (name, module, attribute) of every CUDA C translation unit the course hands to CuPy's RawModule or
#: RawKernel.  (The ElementwiseKernel bodies of course.vectorize.gpu and course.throughput.fusion are
#: not whole translation units: tests/test_vectorize_cuda_source.py and tests/test_throughput_kernels.py
#: compile them inside a small kernel.)
SOURCES = [("single-pass scan", "course.scan.singlepass", "SINGLE_PASS_SOURCE"),
           ("training step", "course.backprop.step_kernels", "KERNEL_SOURCE"),
           ("training step, bfloat16 and float16", "course.backprop.mixed_kernels", "MIXED_SOURCE"),
           ("vector ReLU", "course.vectorize.gpu", "VECTOR_RELU_SOURCE"),
           ("launch latency", "course.throughput.latency", "LAUNCH_SOURCE"),
           ("memory chase", "course.throughput.memory", "CHASE_KERNEL"),
           ("timing lead spin", "course.lead_spin", "LEAD_SPIN_SOURCE"),
           ("fused attention forward", "course.attention.fused", "FUSED_FORWARD_SOURCE"),
           ("BPPSA chunk phases", "course.bppsa.chunk_kernels", "CHUNK_SOURCE"),
           ("staged diagonal loop", "course.recurrences.kernels", "STAGED_SOURCE"),
           ("BPPSA's sequential baseline", "course.bppsa.fast", "SEQUENTIAL_SOURCE"),
           ("GEMM ladder", "course.gemm.ladder", "GEMM_SOURCE")]


def source_text(module: str, attr: str) -> str:
    """The CUDA C source ``module.attr``, read when asked (never a copy)."""
    import importlib

    return getattr(importlib.import_module(module), attr)


def main(argv: list[str] | None = None) -> int:
    from course.cuda_c import ARCHS, ptxas_rows

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", nargs="+", default=list(ARCHS), metavar="SM",
                        help=f"architectures to compile for (default: {' '.join(ARCHS)})")
    parser.add_argument("--record-gemm", action="store_true",
                        help="write lesson 09's table (course/data/gemm_ptxas.json) from this compiler, then stop")
    args = parser.parse_args(argv)
    if args.record_gemm:
        return record_gemm()
    bad = False
    for name, module, attr in SOURCES:
        source = source_text(module, attr)
        for arch in args.arch:
            try:
                rows = ptxas_rows(source, arch)
            except FileNotFoundError as exc:
                print(exc)
                return 2
            except RuntimeError as exc:
                print(f"{name} ({module}.{attr}), {arch}: does not compile\n{exc}")
                bad = True
                continue
            print(f"{name} ({module}.{attr}), {arch}, {rows[0]['compiler'] if rows else '?'}:")
            for r in rows:
                print(f"  {r['kernel']:<30} {r.get('registers', '?'):>3} registers, {r.get('smem_bytes', 0)} bytes "
                      f"smem, {r.get('stack', 0)} bytes stack, spills {r.get('spill_stores', 0)} stores / "
                      f"{r.get('spill_loads', 0)} loads")
                bad |= bool(r.get("spill_stores") or r.get("spill_loads"))
    return 1 if bad else 0


def compiler_version() -> str:
    """``nvcc X.Y.Z`` where nvcc is on the PATH, else ``nvrtc`` (the version NVRTC reports)."""
    import re
    import shutil
    import subprocess

    nvcc = shutil.which("nvcc")
    if nvcc:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
        m = re.search(r"V(\d+\.\d+\.\d+)", out)
        return f"nvcc {m.group(1) if m else '?'}"
    return "nvrtc"


def record_gemm() -> int:
    """Write lesson 09's ptxas table with the compiler that made it; 1 if a rung spills."""
    import json

    from course.gemm.ladder import PTXAS_RECORD, ptxas_table

    rows = [dict(r) for r in ptxas_table()]
    PTXAS_RECORD.parent.mkdir(parents=True, exist_ok=True)
    PTXAS_RECORD.write_text(json.dumps({"compiler": compiler_version(), "rows": rows}, indent=1) + "\n",
                            encoding="utf-8")
    print(f"wrote {PTXAS_RECORD} ({len(rows)} rows)")
    return 1 if any(r["spills"] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
