"""The interactive apps of lesson 04 (ipywidgets 7.7 and 8).

* :func:`tree_app`: n, operator, algorithm (Blelloch or Hillis-Steele) and a level stepper
  (slider + play button), with the result checked against the sequential scan;
* :func:`counts_app`: work and steps of the three scans against n;
* :func:`timing_app`: n, operator, device: every scan timed live, against the
  library's own scan and the copy limit (or the reference GPU results, labelled).

>>> app = tree_app()
>>> app.last_error is None and app.image.value[:4] == b"\\x89PNG"
True
"""

from __future__ import annotations

import time

import ipywidgets as widgets
import numpy as np

from ..arguments import OneOf, Real, Seed, Whole, arguments
from ..devices import gpu_available, gpu_unavailable_reason
from ..errors import BadInputError, GPUUnavailableError
from ..plots import PALETTE, add_footer, new_figure
from ..results import ResultSet, load_reference
from ..widgets import (
    WIDGET_LIMIT_S,
    LiveApp,
    MeasurementCache,
    device_buttons,
    escape,
    estimate_s,
    log2_slider,
    measured_rate,
    no_gpu_html,
    noise_html,
)
from .algorithms import OPERATORS, blelloch_scan, hillis_steele_scan, operation_counts, sequential_scan
from .plots import FRAMES, MAX_DRAWN, MAX_FRAMED, counts_figure, timing_figure, tree_figure
from .timing import ALGORITHMS, SEQUENTIAL_MAX_N, make_input, scan_function, time_scan

__all__ = ["OPERATOR_CHOICES", "tree_input", "tree_app", "counts_app", "timing_app", "scan_rate", "scan_cost_s",
           "input_cost_s", "SCAN_CALLS"]

#: Scans one timing makes at the least, however slow: a warm-up, the one timed call a budget lets through,
#: and one more for a call just under the budget (the input is made once for all: :func:`input_cost_s`).
SCAN_CALLS = 3
_RATE_N = 2**16     # out of the first-level caches for the matrix operators, as big inputs are
_BIG_RATE_N = 2**20  # past the caches: a big n pays temporaries and page faults per element too

#: Dropdown label -> operator name in :data:`course.scan.OPERATORS`.
OPERATOR_CHOICES = [("add (+)", "add"), ("max", "max"), ("2×2 matrix product", "matmul"),
                    ("affine map h → m·h + c", "affine")]


#: The rules of the apps' settings.
_OP, _APP_OP = OneOf(*OPERATORS), OneOf(*(name for _, name in OPERATOR_CHOICES))
_CPU_SCAN = OneOf(*ALGORITHMS["cpu"])


@arguments(n=Whole(hi=MAX_FRAMED, hint="the elements drawn"), op=_OP, seed=Seed())
def tree_input(n: int, op: str, seed: int = 0) -> np.ndarray:
    """A small, readable input for the tree picture: digits, or random matrices / maps."""
    rng = np.random.default_rng(seed)
    if op in ("add", "max"):
        return rng.integers(0, 10, n)
    return make_input(n, op, "float64", "cpu", seed)


def _steps(n: int, algorithm: str = "blelloch") -> int:
    return len(FRAMES[algorithm](np.zeros(max(n, 1)))) - 1


@arguments(n=Whole(hi=MAX_DRAWN, hint="the elements drawn"), op=_APP_OP, algorithm=OneOf("blelloch", "hillis-steele"))
def tree_app(n: int = 8, op: str = "add", algorithm: str = "blelloch") -> LiveApp:
    """Step through a scan of ``n`` elements, level by level (Blelloch or Hillis-Steele)."""
    n_slider = widgets.IntSlider(value=n, min=1, max=MAX_DRAWN, description="n",
                                 continuous_update=False)
    op_menu = widgets.Dropdown(options=OPERATOR_CHOICES, value=op, description="operator")
    alg_menu = widgets.Dropdown(options=[("Blelloch (exclusive)", "blelloch"),
                                         ("Hillis-Steele (inclusive)", "hillis-steele")],
                                value=algorithm, description="algorithm")
    last = _steps(n, algorithm)
    step = widgets.IntSlider(value=last, min=0, max=last, description="step",
                             continuous_update=False)
    play = widgets.Play(value=last, min=0, max=last, interval=900, description="play")
    widgets.jslink((play, "value"), (step, "value"))

    def resize(_change):       # registered before the app's own observers, so it runs first
        top = _steps(n_slider.value, alg_menu.value)
        step.max = play.max = top
        step.value = top

    n_slider.observe(resize, names="value")
    alg_menu.observe(resize, names="value")

    def update(n: int, op: str, algorithm: str, step: int):
        x = tree_input(n, op)
        fn = OPERATORS[op]
        top = _steps(n, algorithm)
        fig = tree_figure(x, op=fn, step=min(step, top), algorithm=algorithm)
        exclusive = algorithm == "blelloch"
        scan = blelloch_scan if exclusive else hillis_steele_scan
        ok = np.allclose(scan(x, op=fn, exclusive=exclusive), sequential_scan(x, op=fn, exclusive=exclusive))
        counts = operation_counts(algorithm, n)
        text = (f"n = {n}: {counts['steps']} levels with operator applications "
                f"(sequential loop: {n}), {counts['work']} applications in all "
                f"(sequential loop: {n}). Result equals the sequential scan: "
                f"<b>{'yes' if ok else 'NO'}</b>.")
        if op in ("matmul", "affine"):
            text += (" Elements are matrices / maps, so the boxes show only which inputs each "
                     "one combines; the order inside every box is the order of the sequence.")
        return fig, text

    app = LiveApp(update, {"n": n_slider, "op": op_menu, "algorithm": alg_menu, "step": step},
                  title="A scan, one level at a time")
    app.add_player(play, "press play to step through the levels")
    return app


@arguments(n=OneOf(*(2**k for k in range(1, 25))))      # the slider's sizes, 2 to 2**24
def counts_app(n: int = 2**10) -> LiveApp:
    """Work and steps of the three scans; the slider marks one n and prints its counts."""
    slider = log2_slider(1, 24, n, "n")

    def update(n: int):
        rows = "".join(
            f"<tr><td>{alg}</td><td>{c['work']:,}</td><td>{c['steps']:,}</td></tr>"
            for alg in ("sequential", "hillis-steele", "blelloch")
            for c in [operation_counts(alg, n)])
        html = ("<table><tr><th>scan</th><th>work (operator applications)</th>"
                f"<th>steps (levels)</th></tr>{rows}</table>")
        return counts_figure(2**24, highlight=n), html

    return LiveApp(update, {"n": slider}, title="Work and steps against n")


def _reference_note(refs) -> str:
    if refs:
        return "Dashed: " + "; ".join(escape(r.label) for r in refs) + "."
    return ("No reference GPU results recorded yet for this experiment: they appear here once "
            "<code>python -m course report --record-reference</code> has run on a GPU machine.")


@arguments(n=OneOf(*(2**k for k in range(6, 25))), op=_APP_OP,      # n: the slider's sizes, 2**6 to 2**24
           budget_s=Real(above=0, hint="seconds of measuring per scan"))
def timing_app(n: int = 2**16, op: str = "add", budget_s: float = 0.25) -> LiveApp:
    """Time every scan at one n, on the CPU or the GPU; bars of time and effective bandwidth."""
    controls = {"n": log2_slider(6, 24, n, "n"),
                "op": widgets.Dropdown(options=OPERATOR_CHOICES, value=op, description="operator"),
                "device": device_buttons()}

    cache = MeasurementCache()

    def update(n: int, op: str, device: str):
        refs = load_reference("scan_sweep")
        if device == "gpu" and not gpu_available():
            if not refs:
                raise GPUUnavailableError(
                    f"No GPU here ({gpu_unavailable_reason()}), and no reference GPU results "
                    f"recorded yet for the scans. Choose CPU, or run this notebook on a GPU "
                    f"(Colab: Runtime > Change runtime type > GPU).")
            return timing_figure(None, refs, highlight=n), no_gpu_html(_reference_note(refs))
        rs, skipped = cache.get((n, op, device), lambda: _time_all(n, op, device, budget_s))
        fig = _bars(rs, device, n, op)
        html = ""
        if skipped:
            html = "Not timed: " + "; ".join(escape(s) for s in skipped) + "."
        return fig, html + noise_html(rs.records)

    app = LiveApp(update, controls, title="How long does a scan take? (float32, inclusive)")
    app.cache = cache
    return app


@arguments(algorithm=_CPU_SCAN, op=_OP)
def scan_rate(algorithm: str, op: str) -> float:
    """Operator applications per second of one CPU scan with ``op``, measured once at n = 65,536 (4,096 for the
    Python loop)."""
    n = 2**12 if algorithm == "sequential" else _RATE_N     # a Python loop: its rate does not depend on n
    f = scan_function(algorithm, op, "cpu")
    x = make_input(n, op, "float32", "cpu")
    work = n if algorithm in ("numpy", "sequential") else operation_counts(algorithm, n)["work"]
    return measured_rate(("scan", algorithm, op), work, lambda: f(x))


@arguments(n=Whole(0, hint="the length of the scan"), op=_OP)
def input_cost_s(n: int, op: str) -> float:
    """Estimated seconds of making a CPU scan's random input of ``n`` elements for ``op`` (rate at 2^20)."""
    rate = measured_rate(("scan input", op), _BIG_RATE_N, lambda: make_input(_BIG_RATE_N, op, "float32", "cpu"))
    return estimate_s(n, rate)


def _work(algorithm: str, n: int) -> int:
    return n if algorithm in ("numpy", "sequential") else operation_counts(algorithm, n)["work"]


@arguments(algorithm=_CPU_SCAN, n=Whole(0, hint="the length of the scan"), op=_OP)
def scan_cost_s(algorithm: str, n: int, op: str) -> float:
    """Estimated seconds of timing one CPU scan at ``n``: :data:`SCAN_CALLS` scans of its counted work.

    Past n = 2^20 the rate is also measured at n = 2^20 (once, when the small-n estimate leaves room),
    and the slower of the two is used: per element, a big scan pays more than a cached one (at
    n = 2^24 with the affine map, several times more).
    """
    cost = estimate_s(SCAN_CALLS * _work(algorithm, n), scan_rate(algorithm, op))
    if n > _BIG_RATE_N and algorithm != "sequential" and cost <= WIDGET_LIMIT_S:
        f = scan_function(algorithm, op, "cpu")
        x = make_input(_BIG_RATE_N, op, "float32", "cpu")
        big = measured_rate(("scan past the caches", algorithm, op), _work(algorithm, _BIG_RATE_N), lambda: f(x))
        cost = max(cost, estimate_s(SCAN_CALLS * _work(algorithm, n), big))
    return cost


def _time_all(n: int, op: str, device: str, budget_s: float) -> tuple[ResultSet, list[str]]:
    """Every scan of :data:`ALGORITHMS` timed once at ``n``; the ones left out, with why.

    On the CPU each scan's time is estimated first (counted operator applications over the rates
    measured at a small n and, past 2^20, at 2^20: :func:`scan_cost_s`); a scan that would take the
    whole refresh (the time the scans before it took, and its estimate) past
    :data:`course.widgets.WIDGET_LIMIT_S` is left out, with its estimate.
    """
    rs = ResultSet("scan_timing_app", params={"n": n, "op": op})
    skipped, chosen, costs = [], [], {}
    planned = input_cost_s(n, op) if device == "cpu" else 0.0   # the input, made once for all of them
    for alg in ALGORITHMS[device]:
        if alg == "sequential" and n > SEQUENTIAL_MAX_N:
            skipped.append(f"sequential (a Python loop: timed only up to n = {SEQUENTIAL_MAX_N:,})")
            continue
        if device == "cpu":
            try:
                costs[alg] = scan_cost_s(alg, n, op)
            except BadInputError as exc:
                skipped.append(f"{alg} ({exc})")
                continue
            if planned + costs[alg] > WIDGET_LIMIT_S:
                skipped.append(f"{alg} (about {costs[alg]:,.0f} s at n = {n:,} with {op}, estimated from its counted "
                               "operator applications and the rate measured at a smaller n: choose a smaller n)")
                continue
            planned += costs[alg]
        chosen.append(alg)
    if not chosen:
        return rs, skipped
    t0 = time.perf_counter()
    x = make_input(n, op, "float32", device)
    for alg in chosen:
        spent = time.perf_counter() - t0
        if device == "cpu" and spent + costs[alg] > WIDGET_LIMIT_S:   # the machine is slower than estimated
            skipped.append(f"{alg} (the scans before it took {spent:,.0f} s, and it would take about "
                           f"{costs[alg]:,.0f} s more: choose a smaller n)")
            continue
        try:
            rs.add(**time_scan(alg, n, op, "float32", device, repeat=5, budget_s=budget_s, x=x))
        except BadInputError as exc:
            skipped.append(f"{alg} ({exc})")
    return rs, skipped


def _bars(rs: ResultSet, device: str, n: int, op: str):
    fig, (ax,) = new_figure(1, height=0.9 + 0.5 * max(len(rs.records), 1))
    recs = rs.records
    labels = [r["algorithm"] for r in recs]
    t = np.array([r["median_s"] for r in recs], float)
    ax.barh(range(len(recs)), t, color=[PALETTE["blue"] if device == "cpu" else PALETTE["vermillion"]] * len(recs))
    ax.set_yticks(range(len(recs)), labels)
    ax.invert_yaxis()
    lib = {r["algorithm"]: r["median_s"] for r in recs}.get("numpy" if device == "cpu" else "cupy")
    for i, r in enumerate(recs):
        note = f" {r['median_s'] * 1e3:.3g} ms"
        if lib:
            note += f"  ({r['median_s'] / lib:.1f}× the library)"
        ax.text(r["median_s"], i, note, va="center", fontsize=9)
    ax.set_xlabel("time per inclusive scan (s), median")
    ax.set_title(f"{device.upper()}: scans of n = {n:,} with {op}", fontsize=10)
    ax.margins(x=0.45)
    add_footer(fig, rs)
    return fig
