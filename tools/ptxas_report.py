"""Registers, spills and shared memory of the course's CUDA C kernels for one GPU architecture, with no GPU.

    python tools/ptxas_report.py [--arch sm_90]

Compiles each source with ``nvcc -arch=ARCH -cubin -Xptxas -v`` and prints one line per kernel.
The exit status is 1 when a kernel spills registers to local memory, 2 when nvcc is missing.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: (name, module, attribute) of every CUDA C source compiled by CuPy's RawModule in the course.
SOURCES = [("single-pass scan", "course.scan.singlepass", "SINGLE_PASS_SOURCE"),
           ("vector ReLU", "course.vectorize.gpu", "VECTOR_RELU_SOURCE")]


def ptxas_report(source: str, arch: str = "sm_90") -> list[dict]:
    """One dict per kernel: ``kernel``, ``registers``, ``spill_stores``, ``spill_loads``, ``smem_bytes``, ``stack``."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise FileNotFoundError("nvcc is not on PATH: install the CUDA toolkit to compile CUDA C here")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "kernel.cu"
        src.write_text(source, encoding="utf-8")
        res = subprocess.run([nvcc, f"-arch={arch}", "-cubin", "-Xptxas", "-v", "-o", str(Path(tmp) / "k.cubin"),
                              str(src)], capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        raise RuntimeError(f"nvcc failed:\n{res.stderr}")
    out: list[dict] = []
    for line in res.stderr.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            out.append({"kernel": m.group(1)})
        elif out and "bytes stack frame" in line:
            nums = [int(v) for v in re.findall(r"(\d+) bytes", line)]
            out[-1].update(stack=nums[0], spill_stores=nums[1], spill_loads=nums[2])
        elif out and "Used" in line and "registers" in line:
            out[-1]["registers"] = int(re.search(r"Used (\d+) registers", line).group(1))
            smem = re.search(r"(\d+) bytes smem", line)
            out[-1]["smem_bytes"] = int(smem.group(1)) if smem else 0
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="sm_90")
    args = parser.parse_args(argv)
    import importlib

    spills = False
    for name, module, attr in SOURCES:
        try:
            rows = ptxas_report(getattr(importlib.import_module(module), attr), args.arch)
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
