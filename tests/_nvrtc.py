"""Compile CUDA C with NVRTC, which needs no GPU (:func:`course.cuda_c.nvrtc_compile`).

Where no NVRTC can be loaded the calling test skips and says why -- except in CI (``CI=true``) on
Linux x86-64, where the test extra installs ``nvidia-cuda-nvrtc``: there it fails, so that no CUDA C
check goes quietly unrun.
"""

from __future__ import annotations

import os
import platform
import sys

import pytest

from course.cuda_c import nvrtc_compile

#: CI must compile every CUDA C source: the test extra installs NVRTC on Linux x86-64.
MUST_COMPILE = (os.environ.get("CI", "").lower() == "true" and sys.platform == "linux"
                and platform.machine() in ("x86_64", "AMD64"))


def no_compiler(reason: str) -> None:
    """Skip the calling test for ``reason``, or fail it where CI must compile CUDA C."""
    if MUST_COMPILE:
        pytest.fail(f"{reason}. CI=true must compile CUDA C: the test extra (pip install -e .[test]) installs "
                    "nvidia-cuda-nvrtc.")
    pytest.skip(reason)


def compile_cuda(src: str, name: str = "kernel.cu", options: tuple[str, ...] = ("--std=c++14",)) -> tuple[bool, str]:
    """(compiled, log) for the CUDA C++ source ``src``."""
    try:
        return nvrtc_compile(src, name, options)
    except FileNotFoundError as exc:
        no_compiler(str(exc))
