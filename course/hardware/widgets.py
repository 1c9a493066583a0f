"""Lesson 00's live app: time a matrix product of the size, dtype and device a learner picks, against the
whole sweep of :func:`~course.hardware.machine.matmul_sweep`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..arguments import Whole, Wholes, arguments
from ..devices import gpu_available
from ..results import ResultSet
from ..timing import noisy_note
from .machine import matmul_sweep, time_matmul
from .plots import matmul_figure

if TYPE_CHECKING:
    from ..widgets import LiveApp

__all__ = ["matmul_app"]


_SWEEPS: dict[tuple[str, str], ResultSet] = {}


def _cached_sweep(device: str, dtype: str, sizes: Sequence[int]) -> ResultSet:
    key = (device, dtype)
    if key not in _SWEEPS:
        _SWEEPS[key] = matmul_sweep(sizes, dtype=dtype, devices=[device], repeat=3, budget_s=0.1)
    return _SWEEPS[key]


@arguments(sizes=Wholes(hint="the matrix sizes of the sweep"), size=Whole(hint="the size the slider starts at"))
def matmul_app(sizes: Sequence[int] = tuple(2 ** k for k in range(4, 12)), size: int = 256) -> LiveApp:
    """The lesson-00 widget: pick a size, dtype and device; see the time, GFLOP/s and the sweep.

    The sweep for each (device, dtype) is measured once and kept; moving the
    slider times only the chosen size, so it answers in well under a second.
    """
    from ..results import load_reference
    from ..widgets import LiveApp, control_panel, no_gpu_html

    sweep_sizes = [s for s in sizes if s <= 1024]
    refs = load_reference("matmul_sweep")

    def update(n: int, dtype: str, device: str):
        notes = []
        devs = ["cpu"]
        if device == "gpu":
            if gpu_available():
                devs.append("gpu")
            else:
                ref_text = (f"the dashed curves are reference results {refs[0].label}" if refs else
                            "no reference GPU results have been recorded for this experiment yet, "
                            "so only the CPU is shown")
                notes.append(no_gpu_html("On Colab: Runtime &gt; Change runtime type &gt; GPU. Locally: "
                                         f"<code>pip install -e '.[cuda12]'</code>. Meanwhile {ref_text}."))
        live = ResultSet("matmul_sweep", params={"dtype": dtype})
        lines, points = [], []
        for d in devs:
            live.extend(_cached_sweep(d, dtype, sweep_sizes))
            r = time_matmul(n, dtype, d, repeat=5, budget_s=0.3)
            points.append((d, r["gflops"]))
            lines.append(f"<b>{d.upper()}</b>: {n}×{n} {dtype} product in {r['median_s'] * 1e3:.3g} ms "
                         f"(IQR {r['q25_s'] * 1e3:.3g}–{r['q75_s'] * 1e3:.3g} ms) = <b>{r['gflops']:,.1f} "
                         f"GFLOP/s</b>" + (f" <i>{noisy_note([r])}</i>" if r["noisy"] else ""))
        fig = matmul_figure(live, refs if "gpu" not in devs else [], dtype=dtype, highlight=n, points=points)
        return fig, "".join(notes) + "<br>".join(lines)

    controls = control_panel(sizes=sizes, size=size, dtypes=("float32", "float64"), device=True)
    return LiveApp(update, controls, title="Time a matrix product")
