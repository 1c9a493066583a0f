"""The course's CUDA C sources on a machine without a GPU: ``ptxas -v``'s registers, shared memory and spills.

Every CUDA C kernel the course hands to CuPy's ``RawModule`` is compiled here for the GPUs learners
meet -- :data:`ARCHS`: sm_75 (Colab's T4), sm_80 (A100), sm_90 (H100/H200) -- with ``ptxas -v`` (no
GPU needed), so that its register use and any spill to local memory are read before a GPU is at
hand.  The compiler is ``nvcc -arch=ARCH -cubin -Xptxas -v`` where ``nvcc`` is on the PATH, else
NVRTC (CuPy's binding, or ``cuda.bindings`` with the ``nvidia-cuda-nvrtc`` wheel: what CuPy itself
compiles with) asked for a cubin with ``--ptxas-options=-v``.  ``tools/ptxas_report.py`` prints the
report for every source; ``benchmarks/bench_gpu_step.py`` prints it beside its timings.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from .errors import BadInputError

__all__ = ["ARCHS", "nvrtc_compile", "parse_ptxas", "ptxas_rows", "ptxas_text"]

def _validate_source(source: Any, arch: Any = "sm_90") -> None:
    """Raise a :class:`~course.errors.BadInputError` unless ``source`` is CUDA C++ text and ``arch`` an
    architecture name such as ``"sm_90"``."""
    if not isinstance(source, str) or not source.strip():
        raise BadInputError(f"source must be the CUDA C++ source as a non-empty string; got {source!r:.80}")
    if not isinstance(arch, str) or not re.fullmatch(r"(sm|compute)_\d+[af]?", arch):
        raise BadInputError(f"arch must name a GPU architecture such as 'sm_90' (the H100); got {arch!r:.80}")


#: The architectures every source is checked for: Colab's T4, the A100, the H100 and H200.
ARCHS = ("sm_75", "sm_80", "sm_90")


def nvrtc_compile(source: str, name: str = "kernel.cu",
                  options: tuple[str, ...] = ("--std=c++14",)) -> tuple[bool, str]:
    """(compiled, log) for the CUDA C++ ``source`` compiled by NVRTC with ``options``.

    Raises ``FileNotFoundError`` (saying what to install) where no NVRTC can be loaded.
    """
    if not isinstance(source, str) or not isinstance(name, str) or isinstance(options, str) or not all(
            isinstance(o, str) for o in options):
        raise BadInputError(f"nvrtc_compile needs the source and its name as strings and options as a tuple of "
                            f"strings; got {type(source).__name__}, {name!r:.40}, {options!r:.60}")
    try:
        from cupy.cuda import nvrtc as cnv

        prog = cnv.createProgram(source, name, [], [])
    except Exception:                     # no CuPy, or a CuPy that cannot load its libnvrtc
        cnv = None
    if cnv is not None:
        try:
            cnv.compileProgram(prog, list(options))
            return True, cnv.getProgramLog(prog)
        except cnv.NVRTCError:
            return False, cnv.getProgramLog(prog)
        finally:
            cnv.destroyProgram(prog)
    try:
        from cuda.bindings import nvrtc

        _, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    except Exception as exc:
        raise FileNotFoundError("no NVRTC here to compile CUDA C with: install CuPy, or cuda-bindings and "
                                f"nvidia-cuda-nvrtc (the test extra: pip install -e .[test]); {exc}") from exc
    (res,) = nvrtc.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options])
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    buf = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, buf)
    nvrtc.nvrtcDestroyProgram(prog)
    return res == nvrtc.nvrtcResult.NVRTC_SUCCESS, buf.decode(errors="replace").rstrip("\x00 ")


def parse_ptxas(log: str) -> list[dict]:
    """One dict per kernel in a ``ptxas -v`` log: ``kernel``, ``registers``, ``smem_bytes``, ``stack``,
    ``spill_stores``, ``spill_loads``.

    >>> parse_ptxas("ptxas info    : Compiling entry function 'k' for 'sm_75'\\n"
    ...             "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\\n"
    ...             "ptxas info    : Used 8 registers, used 0 barriers, 368 bytes cmem[0]")
    [{'kernel': 'k', 'stack': 0, 'spill_stores': 0, 'spill_loads': 0, 'registers': 8, 'smem_bytes': 0}]
    """
    if not isinstance(log, str):
        raise BadInputError(f"log must be the text ptxas -v printed, a string; got {log!r:.80}")
    out: list[dict] = []
    for line in log.splitlines():
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


def ptxas_rows(source: str, arch: str = "sm_90") -> list[dict]:
    """One dict per kernel of ``source`` compiled for ``arch`` (:func:`parse_ptxas`'s keys, and
    ``compiler``: ``"nvcc"`` or ``"nvrtc"``).

    Raises ``FileNotFoundError`` where neither ``nvcc`` nor NVRTC is at hand, and ``RuntimeError``
    (with the compiler's message) when the source does not compile.
    """
    _validate_source(source, arch)
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        ok, log = nvrtc_compile(source, "kernel.cu", (f"--gpu-architecture={arch}", "--ptxas-options=-v"))
        if not ok:
            raise RuntimeError(f"NVRTC failed for {arch}:\n{log}")
        return [dict(r, compiler="nvrtc") for r in parse_ptxas(log)]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "kernel.cu"
        src.write_text(source, encoding="utf-8")
        res = subprocess.run([nvcc, f"-arch={arch}", "-cubin", "-Xptxas", "-v", "-o", str(Path(tmp) / "k.cubin"),
                              str(src)], capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        raise RuntimeError(f"nvcc failed for {arch}:\n{res.stderr}")
    return [dict(r, compiler="nvcc") for r in parse_ptxas(res.stderr)]


def ptxas_text(source: str, arch: str = "sm_90") -> str:
    """:func:`ptxas_rows` as lines to print, one per kernel; without a compiler, or when the source does
    not compile, a line that starts "no ptxas report:" and says why."""
    _validate_source(source, arch)
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
