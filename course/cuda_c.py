"""The course's CUDA C sources on a machine without a GPU: ``ptxas -v``'s registers, shared memory and spills.

Every CUDA C kernel the course hands to CuPy's ``RawModule`` is compiled here by ``nvcc -arch=ARCH
-cubin -Xptxas -v`` (no GPU needed) so that its register use and any spill to local memory are read
before a GPU is at hand.  ``tools/ptxas_report.py`` prints the report for every source;
``benchmarks/bench_gpu_step.py`` prints it beside its timings.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["ptxas_rows", "ptxas_text"]


def ptxas_rows(source: str, arch: str = "sm_90") -> list[dict]:
    """One dict per kernel of ``source``: ``kernel``, ``registers``, ``smem_bytes``, ``stack``,
    ``spill_stores``, ``spill_loads``.

    Raises ``FileNotFoundError`` without ``nvcc`` on the PATH and ``RuntimeError`` (with nvcc's
    message) when the source does not compile.
    """
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise FileNotFoundError("nvcc is not on the PATH: install the CUDA toolkit to see registers and spills")
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


def ptxas_text(source: str, arch: str = "sm_90") -> str:
    """:func:`ptxas_rows` as lines to print, one per kernel; without nvcc, or when the source does not
    compile, a line that starts "no ptxas report:" and says why."""
    try:
        rows = ptxas_rows(source, arch)
    except (FileNotFoundError, RuntimeError, OSError, subprocess.SubprocessError) as exc:
        return f"no ptxas report: {exc}"
    lines = [f"ptxas -v for {arch}:"]
    for r in rows:
        lines.append(f"  '{r['kernel']}': {r.get('registers', '?')} registers, {r.get('smem_bytes', 0)} bytes smem, "
                     f"{r.get('stack', 0)} bytes stack, spills {r.get('spill_stores', 0)} stores / "
                     f"{r.get('spill_loads', 0)} loads")
    return "\n".join(lines)
