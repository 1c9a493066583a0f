"""Lesson 02's live apps: the ladder, the lanes animation, ReLU bandwidth, the matmul rungs.

Each builder returns a :class:`course.widgets.LiveApp`; display it as the last
expression of a cell.  Big sizes are behind the sliders, and each app keeps its
measurements by the controls that change them (:class:`course.widgets.MeasurementCache`),
so coming back to a setting redraws without measuring again.

>>> app = lanes_app()
>>> app.controls["step"].value = 2
>>> app.last_error is None
True
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as w
import numpy as np

from ..arguments import Dtype, Given, OneOf, Optional, Real, Whole, Wholes, arguments
from ..cpu import cpu_info
from ..devices import gpu_available, normalize_device
from ..errors import BadInputError, GPUUnavailableError
from ..limits import validate_dtype
from ..results import ResultSet, load_reference, validate_results
from ..torch_peer import torch_available
from ..widgets import (
    WIDGET_LIMIT_S,
    LiveApp,
    MeasurementCache,
    device_buttons,
    estimate_s,
    log2_slider,
    measured_rate,
    no_gpu_html,
    noise_html,
    require_affordable,
    size_slider,
)
from .matmul import CPU_FLOAT16_MATMUL_MAX_N, MATMUL_LIMITS
from .plots import bandwidth_figure, ladder_figure, lanes_figure, matmul_figure
from .rungs import OPS, lane_steps, validate_lanes, validate_op
from .simd import ufunc_dispatch
from .timing import ladder, matmul_ladder, matmul_operands, relu_bandwidth

__all__ = ["ladder_app", "lanes_app", "bandwidth_app", "matmul_app", "lane_sweep", "ladder_table", "matmul_rate",
           "matmul_plan", "MATMUL_CALLS", "ladder_cost_s"]

_DTYPES = ("float32", "float64", "float16", "bfloat16")


def _pow2_options(lo: int, hi: int) -> list[int]:
    return [2 ** k for k in range(lo, hi + 1)]


def _dtype_name(dtype: Any) -> str:
    """``dtype``'s name: one numpy knows, or ``"bfloat16"`` (timed through PyTorch)."""
    if dtype is None or isinstance(dtype, (list, tuple, np.ndarray)):   # numpy reads None as float64
        raise BadInputError(f"dtype must name one dtype, such as 'float32', got {dtype!r:.60}")
    return "bfloat16" if isinstance(dtype, str) and dtype == "bfloat16" else validate_dtype(dtype).name


def _dtype_names(dtypes: Any) -> tuple[str, ...]:
    if isinstance(dtypes, (str, bytes)) or not isinstance(dtypes, (list, tuple)) or not dtypes:
        raise BadInputError(f"dtypes must be a non-empty tuple of dtype names such as ('float32',), got {dtypes!r:.80}")
    return tuple(_dtype_name(d) for d in dtypes)


def _matmul_rungs(rungs: Any) -> tuple[str, ...]:
    if isinstance(rungs, (str, bytes)) or not isinstance(rungs, (list, tuple)) or not all(
            isinstance(r, str) and r in MATMUL_CALLS for r in rungs):
        raise BadInputError(f"rungs must be a tuple of CPU matrix-product rungs from {tuple(MATMUL_CALLS)}, got "
                            f"{rungs!r:.80}")
    return tuple(rungs)


_OP, _DEVICE = Given(validate_op), Optional(Given(normalize_device))


@arguments(rs=Given(validate_results))
def ladder_table(rs: ResultSet) -> str:
    """The ladder's records as an HTML table (time, elements/s, GB/s, % of copy, speedup, check)."""
    head = ("<tr><th>rung</th><th>Flynn</th><th>device</th><th>elements timed</th><th>time</th>"
            "<th>elements/s</th><th>GB/s</th><th>% of copy</th><th>× loop</th><th>= numpy?</th></tr>")
    rows = []
    for r in rs.records:
        if r.get("rung") == "copy":
            rows.append(f"<tr><td><i>copy (the limit)</i></td><td></td><td>{r['device'].upper()}</td>"
                        f"<td>{r['n_timed']:,}</td><td>{r['median_s'] * 1e3:.3g} ms</td><td></td>"
                        f"<td>{r['gb_per_s']:.3g}</td><td>100 %</td><td></td><td></td></tr>")
            continue
        frac = r.get("copy_fraction")
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in (
            html.escape(r["label"]), r["flynn"], r["device"].upper(), f"{r['n_timed']:,}",
            f"{r['median_s'] * 1e3:.3g} ms", f"{r['elements_per_s']:.3g}", f"{r['gb_per_s']:.3g}",
            f"{frac:.1%}" if frac is not None else "", f"{r.get('speedup_vs_loop', 0):,.1f}",
            "yes" if r["agrees"] else f"<b>NO</b> (max diff {r['max_abs_diff']:.3g})")) + "</tr>")
    notes = "".join(f"<br><small>{html.escape(n)}</small>" for n in rs.notes)
    return f"<table>{head}{''.join(rows)}</table>{notes}"


def _gpu_note(device: str, experiment: str) -> tuple[list[str], str]:
    """(devices to measure, an HTML note) for the device buttons' value."""
    if device != "gpu":
        return ["cpu"], ""
    if gpu_available():
        return ["cpu", "gpu"], ""
    refs = load_reference(experiment)
    from ..devices import require_gpu

    try:
        require_gpu()
    except GPUUnavailableError as exc:
        msg = str(exc)
    ref = ("Reference GPU results are drawn hatched: " + "; ".join(r.label for r in refs) if refs else
           "No reference GPU results recorded yet for this experiment, so no GPU numbers are shown.")
    return ["cpu"], no_gpu_html(f"{html.escape(msg)}<br>{ref} Below: the CPU rungs, measured live.", head=False)


_LADDER_REF_N = (2 ** 18, 2 ** 20)


@arguments(op=_OP, n=Whole(hint="elements"), dtype=Dtype(), lanes=Given(validate_lanes))
def ladder_cost_s(op: str, n: int, dtype: str, lanes: int) -> float:
    """Estimated seconds of the CPU ladder at ``n``: a straight line (fixed cost + cost per element) through
    the same ladder timed once at 2^18 and 2^20 elements (the slow rungs time a sample, so the line errs long)."""
    from .timing import ladder as measure  # the module's own (the app's name may be replaced in tests)

    (n1, n2) = _LADDER_REF_N
    t1, t2 = (m / measured_rate(("ladder", op, dtype, lanes, m), m, lambda m=m: measure(
        op, n=m, dtype=dtype, devices=["cpu"], lanes=lanes, budget_s=0.07, repeat=5)) for m in (n1, n2))
    per_element = max(t2 - t1, 0.25 * t2) / (n2 - n1)
    return t2 + per_element * max(n - n2, 0)


@arguments(op=_OP, n=OneOf(*_pow2_options(4, 24)), dtype=OneOf(*_DTYPES), lanes=Optional(OneOf(*_pow2_options(0, 12))),
           device=_DEVICE)
def ladder_app(op: str = "relu", n: int = 2**16, dtype: str = "float32", lanes: int | None = None,
               device: str | None = None) -> LiveApp:
    """Operation, size, dtype, device and lane width → time, elements/s, GB/s vs copy, speedup.

    Choosing GPU without one shows the clear reason (and reference results if any were
    recorded), then the CPU rungs.
    """
    lanes = lanes or cpu_info()["float32_lanes"] or 8
    controls = {
        "op": w.Dropdown(options=list(OPS), value=op, description="op", layout=w.Layout(width="200px")),
        "n": log2_slider(4, 24, n, "elements"),
        "dtype": w.Dropdown(options=list(_DTYPES), value=dtype, description="dtype",
                            layout=w.Layout(width="200px")),
        "lanes": size_slider(_pow2_options(0, 12), lanes, "lane width W"),
        "device": device_buttons(device),
    }

    cache = MeasurementCache()

    def update(op, n, dtype, lanes, device):
        devs, note = _gpu_note(device, "vectorize_ladder")
        if n > _LADDER_REF_N[-1] and (op, n, dtype, lanes, tuple(devs)) not in cache:
            cost = ladder_cost_s(op, n, dtype, lanes)
            if cost > WIDGET_LIMIT_S:
                fits = max((2 ** k for k in range(4, n.bit_length()) if ladder_cost_s(op, 2 ** k, dtype, lanes)
                            <= WIDGET_LIMIT_S), default=None)
                require_affordable(f"Every rung of {op} on {n:,} {dtype} values", cost,
                                   f"a straight line through the same ladder timed at {_LADDER_REF_N[0]:,} and "
                                   f"{_LADDER_REF_N[1]:,} elements",
                                   (f"Choose at most {fits:,} elements" if fits else "Choose fewer elements")
                                   + (" or float32." if dtype == "float16" else "."))
        rs = cache.get((op, n, dtype, lanes, tuple(devs)), lambda: ladder(
            op, n=n, dtype=dtype, devices=devs, lanes=lanes, budget_s=0.07, repeat=5))
        refs = load_reference("vectorize_ladder") if "gpu" not in devs else []
        runs = ", ".join(f"np.{k} → {d['current']}" for k, d in ufunc_dispatch(op, dtype).items())
        simd = f"<small>numpy's SIMD code for {op} ({dtype}) on this CPU: {html.escape(runs)}</small><br>"
        return ladder_figure(rs, refs), note + (simd if runs else "") + ladder_table(rs) + noise_html(rs.records)

    app = LiveApp(update, controls, title="Lesson 02: one elementwise op at every rung")
    app.cache = cache
    return app


@arguments(n=Whole(1, 48, hint="the elements drawn"), lanes=OneOf(1, 2, 4, 8, 16, 32), op=_OP)
def lanes_app(n: int = 24, lanes: int = 8, op: str = "relu") -> LiveApp:
    """Press play (or drag 'step') to watch W lanes work through n elements, W at a time."""
    step = w.IntSlider(value=0, min=0, max=lane_steps(n, lanes), description="step",
                       continuous_update=True)
    play = w.Play(value=0, min=0, max=step.max, interval=700, description="play")
    w.jslink((play, "value"), (step, "value"))
    controls = {
        "n": w.IntSlider(value=n, min=1, max=48, description="elements", continuous_update=False),
        "lanes": w.SelectionSlider(options=[1, 2, 4, 8, 16, 32], value=lanes, description="lanes W",
                                   continuous_update=False),
        "op": w.Dropdown(options=list(OPS), value=op, description="op", layout=w.Layout(width="200px")),
        "step": step,
    }

    def update(n, lanes, op, step):
        steps = lane_steps(n, lanes)
        for ctl in (controls["step"], play):
            if ctl.max != steps:
                ctl.max = steps
        return lanes_figure(n, lanes, step, op)

    app = LiveApp(update, controls, title="W lanes per step: the steps fall from n to ceil(n/W)")
    app.play = play
    app.widget.children = (w.HBox([play]),) + tuple(app.widget.children)
    return app


@arguments(op=_OP, n=Whole(hint="elements"), widths=Wholes(hint="lane widths W, e.g. (1, 8, 64)"), dtype=Dtype(),
           budget_s=Real(above=0, hint="seconds of measuring per rung"))
def lane_sweep(op: str = "relu", n: int = 2**14, widths: tuple[int, ...] = (1, 2, 4, 8, 16, 64, 256, 1024, 4096),
               dtype: str = "float32", budget_s: float = 0.08) -> ResultSet:
    """The ``lanes`` rung at several lane widths W (plus the loop and numpy), on the same input."""
    rs = ladder(op, n=n, dtype=dtype, rungs=("loop", "numpy"), copy=False, budget_s=budget_s, repeat=3)
    for width in widths:
        part = ladder(op, n=n, dtype=dtype, rungs=("lanes",), lanes=width, copy=False, budget_s=budget_s,
                      repeat=3)
        rs.records.extend(part.records)
    rs.params["widths"] = list(widths)
    return rs


@arguments(n=OneOf(*_pow2_options(12, 26)), device=_DEVICE)
def bandwidth_app(n: int = 2**22, device: str | None = None) -> LiveApp:
    """ReLU with ``out=`` vs a new array per call vs threads, against the copy limit."""
    controls = {"n": log2_slider(12, 26, n, "elements"), "device": device_buttons(device)}

    cache = MeasurementCache()

    def update(n, device):
        devs, note = _gpu_note(device, "vectorize_bandwidth")
        bws = [cache.get((n, d), lambda d=d: relu_bandwidth(n, device=d, rounds=2, repeat=3, budget_s=0.4))
               for d in devs]
        bw = bws[-1]
        text = (f"<p>{devs[-1].upper()}, {n:,} float32 values: ReLU with <code>out=</code> reached "
                f"{bw['out_fraction']:.0%} of the copy's {bw['copy_gb_per_s']:.1f} GB/s; a new array per call "
                f"{bw['new_fraction']:.0%}.</p>")
        return bandwidth_figure(bw), note + text
    app = LiveApp(update, controls, title="ReLU against the copy limit")
    app.cache = cache
    return app


#: Products one rung's timing runs at the least, however slow: the check against float64, the
#: warm-up calls, and the one timed call a time budget always lets through.
MATMUL_CALLS = {"loop": 2, "dots": 2, "blas": 4, "torch": 4}
_MATMUL_SIZES = (16, 32, 48, 64, 96, 128, 256, 384, 512, 1024, 2048)   # the sizes matmul_app's slider offers
_RATE_N = {"loop": 16, "dots": 48, "blas": 256, "torch": 256}  # float16 without BLAS: 128 (see matmul_rate)


def _matmul_work(rung: str, n: int) -> float:
    """The unit a rung's rate is counted in: dot-product calls for ``dots``, FLOPs (2n³) for the others."""
    return float(n) ** 2 if rung == "dots" else 2.0 * float(n) ** 3


@arguments(rung=OneOf(*MATMUL_CALLS), dtype=Given(_dtype_name))
def matmul_rate(rung: str, dtype: str) -> float:
    """The CPU rate of one rung in ``dtype`` (units of :func:`_matmul_work` per second), measured once at a small n."""
    n = 128 if dtype == "float16" and rung == "blas" else _RATE_N[rung]
    return measured_rate(("matmul", rung, dtype), _matmul_work(rung, n), matmul_operands(rung, n, dtype)[2])


@arguments(n=Whole(hint="the matrix side"), dtypes=Given(_dtype_names), rungs=Given(_matmul_rungs),
           limit_s=Real(lo=0, hint="seconds one refresh may take"))
def matmul_plan(n: int, dtypes: tuple[str, ...], rungs: tuple[str, ...],
                limit_s: float = WIDGET_LIMIT_S) -> tuple[dict[str, list[str]], list[str]]:
    """Which CPU (rung, dtype) pairs fit in ``limit_s`` at size n, cheapest first; and the ones left out, with why.

    Each pair's time is estimated as :data:`MATMUL_CALLS` products of its counted work over the rate
    measured at a small n (:func:`matmul_rate`).  Pairs :func:`matmul_ladder` skips anyway (the size
    limits of the slow rungs, float16 beyond :data:`CPU_FLOAT16_MATMUL_MAX_N`) cost nothing here.
    """
    jobs = []
    for rung in rungs:
        for dt in dtypes:
            if (rung in MATMUL_LIMITS and n > MATMUL_LIMITS[rung]) or (
                    rung != "torch" and dt == "float16" and n > CPU_FLOAT16_MATMUL_MAX_N) or (
                    rung != "torch" and dt == "bfloat16"):
                continue
            est = estimate_s(MATMUL_CALLS[rung] * _matmul_work(rung, n), matmul_rate(rung, dt))
            jobs.append((est, rung, dt))
    plan: dict[str, list[str]] = {dt: [] for dt in dtypes}
    left_out, total = [], 0.0
    for est, rung, dt in sorted(jobs):
        if total + est > limit_s:
            left_out.append(f"{rung} {dt} (about {est:,.1f} s: {MATMUL_CALLS[rung]} products at the rate "
                            f"measured at a small n)")
            continue
        total += est
        plan[dt].append(rung)
    return plan, left_out


@arguments(n=OneOf(*_MATMUL_SIZES), device=_DEVICE)
def matmul_app(n: int = 48, device: str | None = None) -> LiveApp:
    """Matrix product rungs at size n in float32/float16 (+bfloat16 with PyTorch), in GFLOP/s.

    Each rung's time is estimated first (counted work over a rate measured at a small n); the
    rungs that would push one refresh past :data:`course.widgets.WIDGET_LIMIT_S` are left out and
    listed, so no size on the slider freezes the notebook.
    """
    controls = {"n": size_slider(_MATMUL_SIZES, n, "n"),
                "device": device_buttons(device)}

    cache = MeasurementCache()

    def measure(n, devs):
        dtypes = ("float32", "float16") + (("bfloat16",) if torch_available() else ())
        cpu_rungs = ("loop", "dots", "blas") + (("torch",) if torch_available() else ())
        plan, left_out = matmul_plan(n, dtypes, cpu_rungs)
        gpu = ["gpu"] if "gpu" in devs else []
        rs = None
        for dt in dtypes:
            rungs = [r for r in cpu_rungs if r in plan[dt]] + gpu
            if not rungs:
                continue
            part = matmul_ladder(n, dtypes=(dt,), devices=devs, rungs=rungs, repeat=3, budget_s=0.15)
            if rs is None:
                rs = part
            else:
                rs.records.extend(part.records)
                rs.notes.extend(x for x in part.notes if x not in rs.notes)
        if rs is None:
            rs = ResultSet("vectorize_matmul", params={"n": int(n)})
        rs.params["dtypes"] = list(dtypes)
        return rs, left_out

    def update(n, device):
        devs, note = _gpu_note(device, "vectorize_matmul")
        rs, left_out = cache.get((n, tuple(devs)), lambda: measure(n, devs))
        skipped = [f"{r} (n > {lim})" for r, lim in MATMUL_LIMITS.items() if n > lim]
        if n > CPU_FLOAT16_MATMUL_MAX_N:
            skipped.append(f"numpy float16 (n > {CPU_FLOAT16_MATMUL_MAX_N}: emulated without BLAS)")
        extra = f"<br><small>Too slow at this size, skipped: {', '.join(skipped)}.</small>" if skipped else ""
        if left_out:
            extra += (f"<br><small>Left out to keep this refresh under {WIDGET_LIMIT_S:g} s (estimated from "
                      f"counted work): {html.escape('; '.join(left_out))}.</small>")
        notes = "".join(f"<br><small>{html.escape(x)}</small>" for x in rs.notes if "skipped" not in x)
        refs = load_reference("vectorize_matmul") if "gpu" not in devs else []
        return matmul_figure(rs, refs), note + extra + notes + noise_html(rs.records)
    app = LiveApp(update, controls, title="The matrix product at each rung")
    app.cache = cache
    return app
