"""The live apps of lesson 05.

* :func:`tree_app`: the Blelloch tree of backprop for a chosen T (symbols, instant).
* :func:`timing_app`: the paper's RNN at a chosen T, hidden size, batch and device:
  forward, sequential backward and scan backward timed live, with the gradients
  compared and the work counted.  Each setting is measured once and kept; long
  sequences (T above :data:`LONG_T`) are timed round by round under a progress bar.
* :func:`memory_app`: dense vs CSR bytes of a convolution's Jacobian.

Every app is a :class:`course.widgets.LiveApp`; errors (a GPU that is not there,
a size that does not fit) appear in its error area with what to do.

>>> app = tree_app()
>>> app.last_error is None
True
"""

from __future__ import annotations

import html
import time
from typing import TYPE_CHECKING

import ipywidgets as widgets
import numpy as np

from ..arguments import Given, OneOf, Real, Whole, arguments
from ..devices import gpu_available, normalize_device, require_gpu
from ..errors import GPUUnavailableError
from ..results import load_reference
from ..timing import Timing, noisy_note
from ..widgets import (
    WIDGET_LIMIT_S,
    LiveApp,
    MeasurementCache,
    device_buttons,
    estimate_s,
    measured_rate,
    no_gpu_html,
    progress,
    require_affordable,
    size_slider,
)
from .algorithm import work_counts
from .plots import memory_figure, speedup_figure, timing_bars, tree_figure
from .sparse import conv_jacobian_memory
from .timing import SWEEP_T, rnn_timings, torch_available, torch_rnn_timings

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["tree_app", "timing_app", "memory_app", "timing_update", "EXPERIMENT", "LONG_T", "round_rate",
           "timing_cost_s", "TIMING_BUDGET_S"]

EXPERIMENT = "bppsa_rnn"
#: Above this T the timing app measures round by round, with a progress bar.
LONG_T = 3000
#: The time budget the timing app gives one measurement (more rounds stop once it is spent).
TIMING_BUDGET_S = 0.4 * WIDGET_LIMIT_S
#: The T at which one round's rate is measured first; then at 10× and 100× that while such a round is cheap
#: (a round's fixed costs weigh less at a larger T, so the estimate gets closer).
_RATE_T = (30, 300, 3000)
_CHEAP_ROUND_S = 0.3
#: The timing app's hidden sizes and batches (its sliders).
_HIDDEN = (4, 8, 16, 20, 32, 64)
_BATCHES = (1, 4, 16, 64)


@arguments(hidden=Whole(hint="the state size"), batch=Whole(hint="the chains in a batch"))
def round_rate(hidden: int, batch: int) -> float:
    """Time steps per second of one CPU round of :func:`rnn_timings` (every round is Θ(T)): measured once at
    T = 30, then at the larger T of ``_RATE_T`` while a round there is estimated to take under 0.3 s."""
    from .timing import rnn_timings as measure  # the module's own (the app's name may be replaced in tests)

    rate = 0.0
    for T in _RATE_T:
        if rate and T / rate > _CHEAP_ROUND_S:
            break
        rate = measured_rate(("bppsa round", int(hidden), int(batch), T), T,
                             lambda T=T: measure(T, hidden, batch, device="cpu", repeat=1, warmup=0))
    return rate


@arguments(T=Whole(hint="the sequence length"), hidden=Whole(hint="the state size"),
           batch=Whole(hint="the chains in a batch"), budget_s=Real(lo=0, hint="the measurement's seconds"))
def timing_cost_s(T: int, hidden: int, batch: int, budget_s: float = TIMING_BUDGET_S) -> float:
    """Estimated seconds of one CPU measurement: two rounds at least (a warm-up and a timed one; the long-T
    path also runs two), each T steps at the measured :func:`round_rate`; more rounds start only while the
    budget lasts, so at most one round runs past it."""
    one = estimate_s(T, round_rate(hidden, batch))
    return max(2 * one, budget_s + one)


@arguments(T=Whole(hi=15, hint="the slider's T"))
def tree_app(T: int = 7) -> LiveApp:
    """A slider over T (1..15) redrawing the scan tree of backprop through T steps."""
    slider = widgets.IntSlider(value=T, min=1, max=15, description="T", continuous_update=False)
    return LiveApp(lambda T: tree_figure(T), {"T": slider},
                   title="Backprop as a Blelloch scan: the tree for T steps")


def _summary(T: int, h: int, B: int, dev: str, r: dict, torch_r: dict | None) -> str:
    c = work_counts(T, h, B)
    seq, scan = r["backward_s"]["sequential"], r["backward_s"]["scan"]
    if seq > 0 and scan > 0:
        ratio = seq / scan
        verdict = (f"the scan is <b>{ratio:.2f}× faster</b>" if ratio >= 1 else
                   f"the scan is <b>{1 / ratio:.1f}× slower</b>")
    else:
        verdict = "one backward time is lost in the timing noise (try a larger T)"
    lines = [
        f"<b>{dev.upper()}, T = {T:,}, hidden {h}, batch {B}</b>: {verdict} than sequential backprop "
        "(each backward pass timed alone from the same saved forward; median over alternating rounds).",
        f"Dependent steps: {c['steps_sequential']:,} (sequential) vs {c['steps_scan']} levels (scan) "
        f"— at most {c['step_ratio']:.0f}× fewer waits.",
        f"Work: {c['flops_sequential'] / 1e6:,.1f} MFLOP (loop) vs {c['flops_scan'] / 1e6:,.1f} MFLOP (the "
        f"teaching scan timed here, n×n·n×n products in both sweeps: {c['work_ratio']:.0f}× the loop); the "
        f"least a scan needs, matrix-vector products in the down-sweep, is {c['flops_scan_min'] / 1e6:,.1f} "
        f"MFLOP ({c['work_ratio_min']:.0f}×).",
        f"Memory: the scan stores {c['bytes_scan'] / 2**20:,.1f} MiB of Jacobians (float32).",
        f"Largest difference between the two methods' W_hh gradients: {r['max_grad_diff']:.2e}.",
    ]
    if torch_r is not None:
        tb = torch_r["backward_s"]
        lines.append(f"PyTorch nn.RNN backward on the {dev.upper()}: {tb * 1e3:.3g} ms"
                     + (f" ({tb / scan:.2f}× the scan's time)" if tb > 0 and scan > 0 else ""))
    if dev == "cpu" and seq > 0 and scan > 0:
        if scan >= seq:
            lines.append(f"<i>Here, on this CPU, the scan's {c['work_ratio']:.0f}× extra arithmetic was not paid "
                         "back: a few cores cannot run a level's many small products at once, so the shorter "
                         "critical path buys little.</i>")
        else:
            lines.append(f"<i>Here the scan came out ahead despite its {c['work_ratio']:.0f}× extra arithmetic. "
                         f"With hidden size {h} and batch {B} each step of the loop is a tiny product, so the loop's "
                         f"time is mostly the fixed cost of its {T:,} steps (one NumPy call or more each), while the "
                         "scan makes a few large calls per level. Raise the hidden size or the batch and watch the "
                         "arithmetic take over.</i>")
    note = noisy_note([r["forward"], *r["backward"].values()])
    if note:
        lines.append(f"<span style='color:#a40'><i>{html.escape(note)}</i></span>")
    return "<br>".join(lines)


def _merge_rounds(parts: list[dict]) -> dict:
    """One ``rnn_timings`` result from several one-round results: samples joined, medians retaken."""
    def join(ts: list[Timing]) -> Timing:
        return Timing(samples=np.concatenate([t.samples for t in ts]), device=ts[0].device, name=ts[0].name,
                      threads=ts[0].threads, load=max((t.load for t in ts if t.load is not None), default=None))

    forward = join([p["forward"] for p in parts])
    back = {m: join([p["backward"][m] for p in parts]) for m in parts[0]["backward"]}
    return {"forward": forward, "backward": back, "backward_s": {m: t.median for m, t in back.items()},
            "max_grad_diff": max(p["max_grad_diff"] for p in parts)}


def _rnn_timings_rounds(T: int, hidden: int, batch: int, dev: str, rounds: int, budget_s: float) -> dict:
    """``rnn_timings`` one round at a time under a progress bar, stopping once ``budget_s`` is spent."""
    parts, began = [], time.perf_counter()
    for i in progress(range(rounds), desc=f"timing T = {T:,}"):
        parts.append(rnn_timings(T, hidden, batch, device=dev, repeat=1, warmup=0))
        if i >= 1 and time.perf_counter() - began > budget_s:
            break
    return _merge_rounds(parts)


@arguments(T=Whole(hint="the sequence length"), hidden=Whole(hint="the state size"),
           batch=Whole(hint="the chains in a batch"), device=Given(normalize_device), torch=OneOf(True, False),
           budget_s=Real(above=0, hint="seconds of timing"))
def timing_update(T: int = 100, hidden: int = 20, batch: int = 16, device: str = "cpu",
                  torch: bool = False, budget_s: float = 10.0) -> tuple[Figure, str]:
    """The timing app's update: time the RNN's two backward passes at one setting."""
    dev = device
    if dev == "gpu" and not gpu_available():
        refs = load_reference(EXPERIMENT)
        if not refs:
            try:
                require_gpu()
            except GPUUnavailableError as exc:
                raise GPUUnavailableError(f"{exc} No reference GPU results are recorded for this "
                                          "experiment yet, so there is nothing to show instead.") from None
        note = no_gpu_html("Showing reference GPU results recorded elsewhere (dashed, labelled with their "
                           f"device and date); your slider's T is marked. {html.escape(refs[0].label)}")
        return speedup_figure(None, refs, highlight=T), note
    if dev == "cpu" and T > LONG_T:
        r = _rnn_timings_rounds(T, hidden, batch, dev, rounds=3, budget_s=budget_s)
    else:
        r = rnn_timings(T, hidden, batch, device=dev, repeat=5, budget_s=budget_s, warmup=1)
    torch_r = None
    if torch and torch_available():
        try:
            torch_r = torch_rnn_timings(T, hidden, batch, device=dev, repeat=3, budget_s=budget_s / 2)
        except GPUUnavailableError:
            torch_r = None
    return timing_bars(r, T, dev, torch_r), _summary(T, hidden, batch, dev, r, torch_r)


@arguments(T=OneOf(*SWEEP_T), hidden=OneOf(*_HIDDEN), batch=OneOf(*_BATCHES))
def timing_app(T: int = 100, hidden: int = 20, batch: int = 16) -> LiveApp:
    """Sliders for T (10 … 30,000), hidden size, batch; CPU/GPU buttons; PyTorch peer checkbox.

    Each setting is measured once and kept (``app.cache``), so coming back to it redraws at once.
    """
    controls = {
        "T": size_slider(SWEEP_T, T, "T"),
        "hidden": size_slider(_HIDDEN, hidden, "hidden size"),
        "batch": size_slider(_BATCHES, batch, "batch"),
        "device": device_buttons(),
        "torch": widgets.Checkbox(value=False, description="time PyTorch too",
                                  disabled=not torch_available()),
    }
    cache = MeasurementCache()

    def update(T, hidden, batch, device, torch):
        dev = normalize_device(device)
        key = (T, hidden, batch, dev, bool(torch))
        if dev == "cpu" and key not in cache:
            cost = timing_cost_s(T, hidden, batch)
            if cost > WIDGET_LIMIT_S:
                fits = [t for t in SWEEP_T if t < T and timing_cost_s(t, hidden, batch) <= WIDGET_LIMIT_S]
                require_affordable(f"Timing T = {T:,} with hidden size {hidden} and batch {batch}", cost,
                                   f"rounds of T steps at the rate measured at a small T, plus a {TIMING_BUDGET_S:g} s "
                                   "budget", (f"Choose T = {fits[-1]:,} or less here" if fits else "Choose a smaller T")
                                   + ", or a smaller hidden size or batch.")
        return cache.get(key, lambda: timing_update(T, hidden, batch, device, torch, budget_s=TIMING_BUDGET_S))

    app = LiveApp(update, controls, title="Backward pass of a tanh RNN: sequential backprop vs BPPSA, measured live")
    app.cache = cache
    return app


def memory_update(size: int = 32, c_in: int = 3, c_out: int = 64, dtype: str = "float32") -> tuple[Figure, str]:
    itemsize = 4 if dtype == "float32" else 8
    m = conv_jacobian_memory(size, size, c_in, c_out, itemsize=itemsize)
    fig = memory_figure(m)
    fig.axes[0].set_title(f"Jacobian of a 3×3 convolution, {size}×{size}×{c_in} → {size}×{size}×{c_out} "
                          f"({100 * m['density']:.3f}% non-zero)", fontsize=9)
    text = (f"dense: {m['dense_bytes'] / 2**20:,.1f} MiB ({m['dense_bytes'] / 1e6:,.1f} MB); CSR: "
            f"{m['csr_bytes'] / 2**20:,.2f} MiB — {m['ratio']:,.0f}× smaller; {m['nnz']:,} non-zeros.")
    return fig, text


def memory_app() -> LiveApp:
    """Sliders for image size and channels: dense vs CSR memory of the conv Jacobian."""
    controls = {
        "size": size_slider((8, 16, 32, 64, 128, 224), 32, "image size"),
        "c_in": size_slider((1, 3, 16, 64, 128), 3, "C_in"),
        "c_out": size_slider((8, 16, 64, 128, 256), 64, "C_out"),
        "dtype": widgets.Dropdown(options=["float32", "float64"], value="float32", description="dtype"),
    }
    return LiveApp(memory_update, controls, title="How big is a convolution's Jacobian?")
