"""Compile CUDA C with NVRTC, which needs no GPU: CuPy's binding if present, else cuda.bindings.

Tests call :func:`compile_cuda`; where no libnvrtc can be loaded the calling test skips and says why.
"""

from __future__ import annotations

import pytest


def compile_cuda(src: str, name: str = "kernel.cu", options: tuple[str, ...] = ("--std=c++14",)) -> tuple[bool, str]:
    """(compiled, log) for the CUDA C++ source ``src``."""
    try:
        from cupy.cuda import nvrtc as cnv
    except Exception:
        cnv = None
    if cnv is not None:
        prog = cnv.createProgram(src, name, [], [])
        try:
            cnv.compileProgram(prog, list(options))
            return True, ""
        except cnv.NVRTCError:
            return False, cnv.getProgramLog(prog)
        finally:
            cnv.destroyProgram(prog)
    try:
        from cuda.bindings import nvrtc

        err, prog = nvrtc.nvrtcCreateProgram(src.encode(), name.encode(), 0, [], [])
    except Exception as exc:
        pytest.skip(f"no NVRTC here to compile CUDA C with (install CuPy, or nvidia-cuda-nvrtc): {exc}")
    (res,) = nvrtc.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options])
    log = ""
    if res != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        buf = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, buf)
        log = buf.decode(errors="replace")
    nvrtc.nvrtcDestroyProgram(prog)
    return res == nvrtc.nvrtcResult.NVRTC_SUCCESS, log
