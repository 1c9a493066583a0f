"""The interactive apps of lesson 07 (ipywidgets 7.7 and 8).

* :func:`closed_form_app`: T, a and dtype: watch the cumprod/cumsum closed form fail and the
  log-space form hold (computed, not timed);
* :func:`work_app`: T and n: the scan's extra work and its span, diagonal against dense;
* :func:`timing_app`: T, n, diagonal / dense / both, device: every implementation timed live.
  Measurements are cached by the parameters that change them, so switching the view between
  times and speedups redraws without measuring again.

>>> app = work_app()
>>> app.last_error is None and app.image.value[:4] == b"\\x89PNG"
True
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np

from ..arguments import OneOf, Real, arguments
from ..devices import gpu_available, gpu_unavailable_reason
from ..errors import BadInputError, GPUUnavailableError
from ..plots import COLORS, add_footer, new_figure
from ..results import ResultSet, load_reference
from ..timing import noisy_note
from ..widgets import LiveApp, MeasurementCache, device_buttons, escape, log2_slider, no_gpu_html
from .plots import closed_form_figure, timing_figure, work_figure
from .timing import METHODS, fastest_loop, time_recurrence
from .work import KINDS, work_counts

__all__ = ["closed_form_app", "work_app", "timing_app", "A_CHOICES", "N_CHOICES"]

#: Values of a offered by the closed-form app: near 0, in between, near 1, and just above 1.
A_CHOICES = (0.01, 0.5, 0.9, 0.99, 0.999, 1.01, 1.1)
#: Channel counts offered by the work and timing apps.
N_CHOICES = (4, 16, 64, 256)


def _powers(lo: int, hi: int) -> list[int]:
    return [2**k for k in range(lo, hi + 1)]


@arguments(T=OneOf(*_powers(6, 14)), a=OneOf(*A_CHOICES), dtype=OneOf("float32", "float64"))
def closed_form_app(T: int = 2048, a: float = 0.5, dtype: str = "float64") -> LiveApp:
    """The closed form against the loop and the log-space form, for a constant a."""
    controls = {"T": log2_slider(6, 14, T, "T"),
                "a": widgets.Dropdown(options=list(A_CHOICES), value=a, description="a"),
                "dtype": widgets.Dropdown(options=["float32", "float64"], value=dtype, description="dtype")}

    def update(T: int, a: float, dtype: str):
        fig = closed_form_figure(T, a, dtype)
        tiny = np.finfo(dtype).tiny
        steps = int(np.log(tiny) / np.log(abs(a))) if abs(a) < 1 else int(np.log(np.finfo(dtype).max) / np.log(a))
        return fig, (f"{a:g}<sup>t</sup> leaves the normal range of {dtype} after about <b>{steps:,}</b> steps "
                     f"(computed: log of the limit / log a).")

    return LiveApp(update, controls, title="The closed form, and its fix in log space")


@arguments(T=OneOf(*_powers(3, 20)), n=OneOf(*N_CHOICES))
def work_app(T: int = 2**12, n: int = 16) -> LiveApp:
    """Counted work and span of the scan, diagonal against dense, as T and n change."""
    controls = {"T": log2_slider(3, 20, T, "T"),
                "n": widgets.Dropdown(options=list(N_CHOICES), value=n, description="n")}

    def update(T: int, n: int):
        rows = {k: work_counts(T, n, k) for k in KINDS}
        cells = "".join(f"<tr><td>{k}</td><td>{r['steps_loop']:,}</td><td>{r['steps_scan']}</td>"
                        f"<td>{r['combines']:,}</td><td>{r['work_ratio']:.3g}×</td><td>{r['work_ratio_min']:.3g}×</td>"
                        f"<td>{r['bytes_scan'] / 2**20:.3g} MiB</td></tr>" for k, r in rows.items())
        html = ("<table><tr><th>transition</th><th>loop steps</th><th>scan levels</th><th>combines</th>"
                "<th>scan flops / loop flops (full combines both ways)</th>"
                "<th>the least (down-sweep on states)</th><th>scan elements (float32)</th></tr>"
                + cells + "</table>")
        return work_figure(max(T, 2**16), n, highlight=T), html

    return LiveApp(update, controls, title="Work and span: dense against diagonal")


def _reference_note(refs) -> str:
    if refs:
        return "Dashed: " + "; ".join(escape(r.label) for r in refs) + "."
    return ("No reference GPU results recorded yet for this experiment: they appear here once "
            "<code>python -m course report --record-reference</code> has run on a GPU machine.")


@arguments(T=OneOf(*_powers(4, 16)), n=OneOf(*N_CHOICES), kind=OneOf("diagonal", "dense", "both"),
           budget_s=Real(above=0, hi=60, hint="seconds each timing may take"))
def timing_app(T: int = 1024, n: int = 16, kind: str = "both", budget_s: float = 0.08) -> LiveApp:
    """Time every implementation at one (T, n) on one device; bars of time or of speedup over the loop.

    The PyTorch loop is timed when its box is ticked (importing PyTorch takes seconds the first time).
    """
    controls = {"T": log2_slider(4, 16, T, "T"),
                "n": widgets.Dropdown(options=list(N_CHOICES), value=n, description="n"),
                "kind": widgets.ToggleButtons(options=[("diagonal", "diagonal"), ("dense", "dense"),
                                                       ("both", "both")], value=kind, description="transition"),
                "device": device_buttons(),
                "torch": widgets.Checkbox(value=False, description="PyTorch loop too", indent=False),
                "view": widgets.ToggleButtons(options=[("time", "time"), ("speedup over the loop", "speedup")],
                                              value="time", description="show")}
    cache = MeasurementCache(maxsize=128)      # by (device, kind, method, T, n); "show" only redraws

    def measure(dev: str, k: str, method: str, T: int, n: int) -> tuple[dict | None, str]:
        def run() -> tuple[dict | None, str]:
            try:
                return time_recurrence(k, method, T, n, dev, repeat=5, budget_s=budget_s), ""
            except (BadInputError, GPUUnavailableError) as exc:
                return None, str(exc)           # kept too: a skip is not retried at every redraw
        return cache.get((dev, k, method, T, n), run)

    def update(T: int, n: int, kind: str, device: str, torch: bool, view: str):
        if device == "gpu" and not gpu_available():
            refs = load_reference("recurrence_sweep")
            if not refs:
                raise GPUUnavailableError(
                    f"No GPU here ({gpu_unavailable_reason()}), and no reference GPU results recorded "
                    f"yet for the recurrences. Choose CPU, or run this notebook on a GPU "
                    f"(Colab: Runtime > Change runtime type > GPU).")
            return timing_figure(None, refs, n=n, highlight=T), no_gpu_html(_reference_note(refs))
        rs = ResultSet("recurrence_timing_app", params={"T": T, "n": n})
        notes = []
        for k in (KINDS if kind == "both" else (kind,)):
            for method in METHODS[(device, k)]:
                if method == "torch loop" and not torch:
                    continue
                rec, why = measure(device, k, method, T, n)
                if rec is None:
                    notes.append(f"{k} {method}: {why}")
                else:
                    rs.add(**rec)
        return _bars(rs, device, T, n, view), _summary(rs, T, n, notes)

    app = LiveApp(update, controls, title="Loop or scan? Diagonal or dense? (float32, timed live)",
                  view_only=("view",))
    app.cache = cache
    return app


def _summary(rs: ResultSet, T: int, n: int, notes: list) -> str:
    parts = []
    for k in KINDS:
        t = {r["method"]: r["median_s"] for r in rs.select(kind=k)}
        base = fastest_loop(rs, rs.records[0]["device"], k, n) if rs.records else None
        if base in t and "scan" in t:
            faster = "faster" if t["scan"] < t[base] else "slower"
            name = _BASE_NAMES.get(base, base)
            parts.append(f"<b>{k}</b>: the scan took {t['scan'] / t[base]:.2g}× the time of {name}, the fastest "
                         f"sequential loop timed here (measured: {faster}), while doing "
                         f"{work_counts(T, n, k)['work_ratio']:.3g}× the loop's flops (counted).")
    noise = noisy_note(rs.records)
    if noise:
        parts.append(escape(noise))
    if notes:
        parts.append("Not timed: " + "; ".join(escape(s) for s in notes) + ".")
    return "<br>".join(parts)


#: The sequential loops as the summary names them (on a GPU the Python loop is bound by its launches).
_BASE_NAMES = {"loop": "the Python loop", "torch loop": "PyTorch's loop",
               "numba per-channel": "the per-channel kernel (one thread per channel walks all T steps)"}


def _bars(rs: ResultSet, device: str, T: int, n: int, view: str):
    recs = rs.records
    fig, (ax,) = new_figure(1, height=0.9 + 0.42 * max(len(recs), 1))
    base = {k: fastest_loop(rs, device, k, n) for k in KINDS}
    loop = {r["kind"]: r["median_s"] for r in recs if r["method"] == base[r["kind"]]}
    if view == "speedup":
        vals = [loop.get(r["kind"], np.nan) / r["median_s"] for r in recs]
        unit, xlabel = "×", "fastest sequential loop's time / this time (above 1: faster than it)"
    else:
        vals = [r["median_s"] * 1e3 for r in recs]
        unit, xlabel = "ms", "time per call (ms), median"
    ax.barh(range(len(recs)), vals, color=[COLORS[device] if r["kind"] == "diagonal" else "0.55" for r in recs])
    ax.set_yticks(range(len(recs)), [f"{r['kind']} {r['method']}" for r in recs], fontsize=9)
    ax.invert_yaxis()
    for i, v in enumerate(vals):
        ax.text(v, i, f" {v:.3g} {unit}" + (" (noisy)" if recs[i].get("noisy") else ""), va="center", fontsize=9)
    if view == "speedup":
        ax.axvline(1.0, color="k", lw=1)
    ax.set_xlabel(xlabel)
    ax.set_title(f"{device.upper()}: T = {T:,} steps, n = {n} channels", fontsize=10)
    ax.margins(x=0.35)
    add_footer(fig, rs)
    return fig
