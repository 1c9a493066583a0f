"""Lesson 00's experiment: matrix multiply time vs size on every device."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..report import experiment
from .machine import matmul_sweep
from .plots import matmul_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ..results import ResultSet


@experiment("matmul_sweep", title="Matrix multiply: GFLOP/s against size, CPU vs GPU", lesson="00")
def run(devices, quick, progress):
    """A square float32 matrix product timed at sizes 16 … 1024 (quick) or 16 … 4096 (full); the
    GPU needs large matrices before its thousands of lanes pay off."""
    sizes = [2 ** k for k in range(4, 11 if quick else 13)]
    return matmul_sweep(sizes, dtype="float32", devices=devices, repeat=5 if quick else 10,
                        budget_s=0.3 if quick else 2.0, progress=progress)


@run.plot
def plot(rs: ResultSet, references: Sequence[ResultSet]) -> Figure:
    return matmul_figure(rs, references, dtype="float32")
