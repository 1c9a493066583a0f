"""Lesson 09's live app: the CPU ladder of the matrix product on your own cores, against NumPy's BLAS.

:func:`cpu_ladder_app` times every CPU rung and BLAS at the size, dtype and cores chosen, in alternating
rounds (:func:`course.gemm.timing.cpu_ladder_sweep`), and draws them beside the GPU ladder recorded on a
real GPU, when one has been.  Big sizes are behind the slider: each is estimated before it runs, from
the rate every rung reached at a small size, and refused with what to choose instead when it would take
more than :data:`course.widgets.WIDGET_LIMIT_S`.  Measurements are kept by their controls
(:class:`course.widgets.MeasurementCache`), so coming back to a setting redraws without measuring again.

>>> app = cpu_ladder_app(n=64)
>>> app.last_error is None
True
"""

from __future__ import annotations

import functools
import html

import ipywidgets as w
import numpy as np

from ..arguments import Given, OneOf, Whole, arguments
from ..cpu import usable_cores
from ..results import ResultSet, load_reference
from ..widgets import (
    WIDGET_LIMIT_S,
    LiveApp,
    MeasurementCache,
    dtype_dropdown,
    estimate_s,
    measured_rate,
    noise_html,
    require_affordable,
    size_slider,
)
from .cpu import CPU_RUNG_LABELS, CPU_RUNGS, cpu_matmul
from .plots import ladder_figure, validate_results
from .timing import LOOPS_COST_LIMIT_S, cpu_ladder_sweep, validate_thread_counts

__all__ = ["cpu_ladder_app", "ladder_table", "ladder_cost_s", "APP_SIZES", "APP_REPEAT"]

#: The sizes the app's slider offers; the default, 256, reruns in well under a second.
APP_SIZES = (32, 64, 128, 256, 512, 1024, 2048)
#: Alternating rounds per measurement (plus one checked call of each rung).
APP_REPEAT = 3
_RATE_N = {"loops": 64, "reordered": 128, "blocked": 128, "microkernel": 128, "parallel": 128, "blas": 128}


def _rate(rung: str, dtype: str, threads: int) -> float:
    """FLOP/s of one rung measured once per session at a small n (:func:`course.widgets.measured_rate`)."""
    n = _RATE_N[rung]
    a = np.ones((n, n), dtype=dtype)
    call = functools.partial(np.matmul, a, a) if rung == "blas" else functools.partial(cpu_matmul, a, a, rung,
                                                                                          threads=threads)
    return measured_rate(("gemm cpu rung", rung, dtype, threads), 2.0 * n**3, call)


@arguments(n=Whole(hi=16384, hint="the matrix size"), dtype=OneOf("float32", "float64"),
           threads=Given(validate_thread_counts))
def ladder_cost_s(n: int, dtype: str, threads: tuple[int, ...]) -> float:
    """Estimated seconds of the app's ladder at size n: (``APP_REPEAT`` + 1) products of every rung timed, at the
    rate each reached at a small n (the ``loops`` rung counted only where the sweep would not skip it)."""
    total = 0.0
    for t in threads:
        for rung in [r for r in CPU_RUNGS if (t == 1) != (r == "parallel")] + ["blas"]:
            one = estimate_s(2.0 * n**3, _rate(rung, dtype, t))
            if rung == "loops" and one > LOOPS_COST_LIMIT_S:
                continue
            total += (APP_REPEAT + 1) * one
    return total


@arguments(rs=Given(validate_results))
def ladder_table(rs: ResultSet) -> str:
    """The ladder's records as an HTML table: GFLOP/s, share of BLAS and of the FMA peak, counted bytes per FMA."""
    head = ("<tr><th>rung</th><th>threads</th><th>n</th><th>GFLOP/s</th><th>of BLAS</th><th>of FMA peak</th>"
            "<th>bytes/FMA into L1</th><th>error vs float64</th></tr>")
    rows = []
    for r in rs.records:
        label = CPU_RUNG_LABELS.get(r["rung"], "NumPy's BLAS")
        per_fma = f"{r['bytes_per_fma']:.3g}" if "bytes_per_fma" in r else "(not ours to count)"
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in (
            html.escape(label), r["threads"], f"{r['n']:,}", f"{r['gflops']:.3g}", f"{r['of_blas']:.0%}",
            f"{r['of_roof']:.0%}", per_fma, f"{r['max_rel_error']:.1e}")) + "</tr>")
    notes = "".join(f"<br><small>{html.escape(n)}</small>" for n in rs.notes if "noisy" not in n)
    return f"<table>{head}{''.join(rows)}</table>{notes}"


@arguments(n=OneOf(*APP_SIZES), dtype=OneOf("float32", "float64"), cores=OneOf("one", "all"))
def cpu_ladder_app(n: int = 256, dtype: str = "float32", cores: str = "one") -> LiveApp:
    """Size n, dtype and one thread / all cores → every CPU rung's GFLOP/s against NumPy's BLAS and the FMA peak.

    On one thread the single-core rungs run against BLAS on one thread; with all cores the micro-kernel on
    every core and BLAS on as many threads join them.  The GPU panel shows the ladder recorded on a real GPU
    (labelled as such), or says that none has been recorded yet.
    """
    every = usable_cores()
    controls = {
        "n": size_slider(APP_SIZES, n, "n"),
        "dtype": dtype_dropdown(("float32", "float64"), dtype),
        "cores": w.ToggleButtons(options=[("one thread", "one"), (f"all {every} cores", "all")], value=cores,
                                 description="cores", style={"button_width": "110px"}),
    }
    cache = MeasurementCache()
    recorded = load_reference("gemm_gpu_ladder")      # read once, not at every redraw

    def update(n, dtype, cores):
        threads = (1,) if cores == "one" or every == 1 else (1, every)
        key = (n, dtype, threads)
        if key not in cache and n > 256:
            cost = ladder_cost_s(n, dtype, threads)
            fits = max((s for s in APP_SIZES if s < n and ladder_cost_s(s, dtype, threads) <= WIDGET_LIMIT_S),
                       default=APP_SIZES[0])
            require_affordable(f"Every rung at n = {n:,} ({dtype}, {cores} cores)", cost,
                               "each rung's products at the rate it reached at a small n",
                               f"Choose n = {fits:,} or less" + (", or float32." if dtype == "float64" else "."))
        rs = cache.get(key, lambda: cpu_ladder_sweep([n], dtype=dtype, threads=threads, repeat=APP_REPEAT,
                                                     budget_s=WIDGET_LIMIT_S))
        return ladder_figure(rs, recorded), ladder_table(rs) + noise_html(rs.records)

    app = LiveApp(update, controls, title="Lesson 09: the matrix product on your CPU, rung by rung")
    app.cache = cache
    return app
