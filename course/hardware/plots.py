"""Lesson 00's figure: a matrix product's GFLOP/s against its size, live and recorded, on every device."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..arguments import Optional, Whole, arguments
from ..plots import COLORS, mark_point, sweep_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ..results import ResultSet

__all__ = ["matmul_figure"]


@arguments(highlight=Optional(Whole(hint="the size the slider marks")))
def matmul_figure(live: ResultSet | None, references: Sequence[ResultSet] = (), dtype: str = "float32",
                  highlight: int | None = None, points: Sequence[tuple[str, float]] = ()) -> Figure:
    """GFLOP/s of an n×n product against n for each device (references dashed), with the GPU's
    speed-up over the CPU; ``highlight`` marks the slider's size and ``points`` each device's rate
    there, measured just now."""
    fig = sweep_figure(live, references, x="n", y="gflops", xlabel="matrix size n (n×n @ n×n)",
                       ylabel="GFLOP/s (higher is faster)", title=f"Matrix multiply, {dtype}",
                       highlight=highlight, higher_is_better=True, where={"dtype": dtype})
    for device, rate in points:
        mark_point(fig, highlight, rate, label=f"{device.upper()} at n={highlight} (just now)", color=COLORS[device])
    return fig
