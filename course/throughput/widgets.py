"""Lesson 03's live apps (ipywidgets 7.7 and 8): move a control, see new measurements.

Each builder returns a :class:`course.widgets.LiveApp`; display it as the last
expression of a cell.  Bigger sizes sit behind the sliders, and sweeps keep to a
time budget (they stop early and say so).  Each app keeps its measurements by the
controls that change them (:class:`course.widgets.MeasurementCache`): a control that
only changes the view (what to plot, which batch to mark) redraws without measuring
again.  Choosing the GPU where there is none shows the reference results recorded on
a real GPU, or, when none are recorded yet, says what to do.

>>> app = sweep_app()
>>> app.last_error is None
True
"""

from __future__ import annotations

import html

import ipywidgets as w

from ..arguments import Dtype, Given, OneOf, Optional, Real, Whole, arguments
from ..devices import gpu_available, require_gpu
from ..errors import BadInputError
from ..results import ResultSet, load_reference
from ..results import validate_results as _results
from ..widgets import (
    WIDGET_LIMIT_S,
    LiveApp,
    MeasurementCache,
    device_buttons,
    dtype_dropdown,
    estimate_s,
    log2_slider,
    measured_rate,
    no_gpu_html,
    noise_html,
    progress,
    require_affordable,
)
from .batch import batch_reading, batch_sweep, precision_sweep
from .costs import (
    ASYNC_RATE_WORK,
    FUSION_RATE_N,
    POINT_CALLS,
    POINT_RATE_N,
    async_probe,
    fusion_probe,
    op_probe,
    point_flops,
    point_probe,
    sweep_sizes_within,
)
from .fusion import MAX_STEPS, fusion_compare, validate_steps
from .latency import async_chain, latency_summary, relabel_latency, smallest_op_latency
from .ops import OPS, find_crossover, throughput_sweep
from .plots import (
    async_figure,
    batch_figure,
    fusion_figure,
    latency_figure,
    precision_figure,
    roofline_figure,
    sweep_plot,
)
from .roofline import POINT_NAMES, cached_peaks, classify, peaks_of, roofline_point

__all__ = ["latency_app", "sweep_app", "async_app", "memory_app", "batch_app", "fusion_app", "precision_app",
           "roofline_app", "op_rate", "point_rate", "async_cost_s", "fusion_cost_s"]

_DTYPES = ("float32", "float64", "float16")


@arguments(op=OneOf(*OPS), dtype=Dtype())
def op_rate(op: str, dtype: str) -> float:
    """Units of :func:`~course.throughput.costs.op_work` per second of ``op`` in ``dtype`` on this CPU."""
    return measured_rate(("op", op, dtype), *op_probe(op, dtype))


@arguments(op=OneOf(*POINT_RATE_N), dtype=Dtype(floating=True))
def point_rate(op: str, dtype: str) -> float:
    """FLOP/s of a costly roofline point on this CPU in ``dtype``, measured once at a small size."""
    return measured_rate(("roofline", op, dtype), *point_probe(op, dtype))


@arguments(n=Whole(hint="elements per op"), chain=Whole(1, 10_000, hint="the number of ops in the chain"))
def async_cost_s(n: int, chain: int) -> float:
    """Estimated seconds of the CPU measurement: operations × elements over the rate of a chain of 8."""
    return estimate_s(max(chain * n, ASYNC_RATE_WORK), measured_rate(("async chain",), *async_probe()))


@arguments(n=Whole(hint="elements"), steps=Given(validate_steps), dtype=Dtype(floating=True))
def fusion_cost_s(n: int, steps: int, dtype: str) -> float:
    """Estimated seconds of the CPU comparison at ``n``, scaled linearly from the same comparison at 2^20."""
    rate = measured_rate(("fusion", int(steps), str(dtype)), *fusion_probe(steps, dtype))
    return estimate_s(max(n, FUSION_RATE_N), rate)


def _plan(device: str, experiment: str) -> tuple[list[str], list, str]:
    """(devices to measure live, reference sets, an HTML note) for a device choice.

    GPU chosen without one: no live devices, the references if any (else the clear
    GPUUnavailableError); "both" without a GPU: the CPU live plus the references.
    """
    refs = load_reference(experiment)
    if device == "gpu" and not gpu_available():
        if not refs:
            require_gpu()
        return [], refs, no_gpu_html("Showing the reference results recorded on a real GPU instead.")
    if device == "both":
        return (["cpu", "gpu"] if gpu_available() else ["cpu"]), refs, ""
    return [device], refs, ""


def _notes(rs) -> str:
    """The result set's notes, and a line saying how many of its timings are noisy (if any)."""
    if rs is None:
        return ""
    return "".join(f"<p><i>{html.escape(n)}</i></p>" for n in rs.notes) + noise_html(rs.records)


def _with_cache(app: LiveApp, cache: MeasurementCache) -> LiveApp:
    app.cache = cache
    return app


def _exp_slider(lo: int, hi: int, value: int, description: str) -> w.IntSlider:
    return w.IntSlider(value=value, min=lo, max=hi, description=description, continuous_update=False,
                       style={"description_width": "initial"}, layout=w.Layout(width="260px"))


@arguments(repeat=OneOf(50, 200, 1000, 5000))
def latency_app(repeat: int = 200) -> LiveApp:
    """The smallest operation on the chosen device, timed ``calls`` times: a distribution."""
    cache = MeasurementCache()

    def update(device: str, calls: int):
        devs, refs, note = _plan(device, "launch_latency")
        refs = [relabel_latency(r) for r in refs]  # older recordings' rows named for what they measured
        live = (cache.get((devs[0], calls), lambda: smallest_op_latency(devs[0], repeat=calls, budget_s=0.5))
                if devs else None)
        table = latency_summary(live) if live is not None else ""
        return latency_figure(live, refs), note + table + _notes(live)

    controls = {"device": device_buttons(),
                "calls": w.SelectionSlider(options=[50, 200, 1000, 5000], value=repeat, description="calls",
                                           continuous_update=False)}
    return _with_cache(LiveApp(update, controls, title="Latency of the smallest operation"), cache)


@arguments(op=OneOf(*OPS), lo=Whole(0, 28, hint="the smallest size is 2**lo"),
           hi=Whole(0, 28, hint="the largest size is 2**hi"), budget_s=Real(above=0, hint="seconds per sweep"))
def sweep_app(op: str = "add", lo: int = 0, hi: int = 20, budget_s: float = 1.5) -> LiveApp:
    """Throughput against size for one op on each device, crossover marked (sizes 2^lo … 2^hi).

    The sweep is kept by (op, sizes, dtype, device); "show" only changes the view.
    """
    cache = MeasurementCache()

    def update(op: str, lo: int, hi: int, y: str, dtype: str, device: str):
        if lo > hi:
            raise BadInputError(f"the size range is empty: 'from 2^' ({lo}) is above 'to 2^' ({hi}); "
                                "move 'from' down or 'to' up")
        devs, refs, note = _plan(device, f"throughput_{op}")
        step = 1 if hi - lo <= 12 else 2
        sizes = [2 ** k for k in range(lo, hi + 1, step)]
        if "cpu" in devs:
            sizes, dropped = sweep_sizes_within(op, sizes, op_rate(op, dtype), WIDGET_LIMIT_S)
            if dropped:
                note += (f"<p><i>Not timed: sizes from {dropped[0]:,} up ({dropped[0]:,} alone would take about "
                         f"{dropped[1]:,.1f} s on the CPU, estimated from its counted work at the rate measured at "
                         f"a small size; a refresh here stays under {WIDGET_LIMIT_S:g} s).</i></p>")
            if not sizes:
                raise BadInputError(f"{op} at 2^{lo} in {dtype} alone would take longer than {WIDGET_LIMIT_S:g} s "
                                    "on the CPU; move 'from 2^' down.")
        live = (cache.get((op, lo, hi, dtype, tuple(devs)), lambda: throughput_sweep(
            op, sizes, dtype, devices=devs, repeat=5, budget_s=0.1, total_budget_s=budget_s, progress=progress))
            if devs else None)
        cx = find_crossover(live, refs, {"op": op})
        return sweep_plot(live, refs, y=y, op=op), note + f"<p>{html.escape(cx.message)}</p>" + _notes(live)

    controls = {
        "op": w.Dropdown(options=["add", "relu", "sum", "matmul"], value=op, description="op"),
        "lo": _exp_slider(0, 28, lo, "size from 2^"), "hi": _exp_slider(0, 28, hi, "to 2^"),
        "y": w.Dropdown(options=[("time per call", "median_s"), ("GB/s", "gb_per_s"), ("GFLOP/s", "gflops"),
                                 ("elements/s", "elements_per_s")], value="median_s", description="show"),
        "dtype": dtype_dropdown(_DTYPES), "device": device_buttons(include_both=True),
    }
    controls["device"].value = "both"
    return _with_cache(LiveApp(update, controls, title="Throughput against size, and the crossover",
                               view_only=("y",)), cache)


def async_app() -> LiveApp:
    """A chain of ops: when does the call return, with and without waiting?"""
    cache = MeasurementCache()

    def update(chain: int, n: int, device: str):
        devs, refs, note = _plan(device, "async_chain")
        if "cpu" in devs and chain * n > ASYNC_RATE_WORK and ("cpu", n, chain) not in cache:
            cost = async_cost_s(n, chain)
            if cost > WIDGET_LIMIT_S:
                fits = max((2 ** k for k in range(4, n.bit_length()) if async_cost_s(2 ** k, chain) <= WIDGET_LIMIT_S),
                           default=None)
                require_affordable(f"A chain of {chain} operations on {n:,} elements on the CPU", cost,
                                   f"operations × elements over the rate of a chain of 8 on {2 ** 20:,} elements",
                                   (f"Choose at most {fits:,} elements" if fits else "Choose fewer elements")
                                   + " or a shorter chain.")
        sets = [cache.get((d, n, chain), lambda d=d: async_chain(d, n=n, chain=chain, repeat=5, budget_s=0.5))
                for d in devs]
        sets += [r for r in refs]
        if not sets:
            require_gpu()
        return async_figure(sets), note + "".join(_notes(s) for s in sets)

    controls = {"chain": w.IntSlider(value=20, min=1, max=200, description="ops in chain",
                                     continuous_update=False, style={"description_width": "initial"}),
                "n": log2_slider(4, 24, 2 ** 16, "elements"), "device": device_buttons(include_both=True)}
    controls["device"].value = "both"
    return _with_cache(LiveApp(update, controls, title="Asynchronous launches"), cache)


def memory_app() -> LiveApp:
    """Pointer-chase latency against working-set size (up to the chosen one), and the bytes in flight."""
    cache = MeasurementCache()

    def update(largest: int, device: str):
        from ..hardware.machine import copy_bandwidth
        from .memory import bytes_in_flight, in_flight_text, memory_latency_sweep
        from .plots import memory_latency_figure

        devs, refs, note = _plan(device, "memory_latency")
        sizes = [2 ** k for k in range(12, largest.bit_length(), 2)]
        live = (cache.get((largest, tuple(devs)), lambda: memory_latency_sweep(sizes, devices=devs, hops=2 ** 16,
                                                                              repeat=2, progress=progress))
                if devs else None)
        text = note
        for d in devs:
            far = max(live.select(device=d), key=lambda r: r["nbytes"])
            bw = cache.get(("copy", d), lambda d=d: copy_bandwidth(d, nbytes=2 ** 25))["bytes_per_s"]
            fl = bytes_in_flight(bw, far["seconds_per_hop"], d)
            text += (f"<p>{d.upper()}: at {far['nbytes'] / 2**20:g} MiB a dependent load takes "
                     f"{far['ns_per_hop']:.1f} ns; streaming at {bw / 1e9:.1f} GB/s needs "
                     f"{in_flight_text(fl)} in flight."
                     + (" (This working set may still fit in a cache: choose 64 MiB or more to time main memory.)"
                        if far["nbytes"] < 2 ** 26 else "") + "</p>")
        return memory_latency_figure(live, refs), text + _notes(live)

    controls = {"largest": log2_slider(14, 28, 2 ** 26, "largest working set (bytes)"),
                "device": device_buttons(include_both=True)}
    controls["device"].value = "both"
    return _with_cache(LiveApp(update, controls, title="Memory latency and bytes in flight"), cache)


def batch_app() -> LiveApp:
    """Samples/s and latency against batch size (an MLP step), with Little's law."""
    cache = MeasurementCache()

    def update(largest: int, highlight: int, device: str):
        devs, refs, note = _plan(device, "batching")
        bs = [2 ** k for k in range(0, largest.bit_length(), 2)]
        live = (cache.get((largest, tuple(devs)), lambda: batch_sweep(
            bs, devices=devs, repeat=3, stream_steps=2, budget_s=0.15, total_budget_s=1.0, progress=progress))
            if devs else None)
        text = note
        roofs = _reference_roofs(refs)
        for rs in ([live] if live is not None else []) + refs:
            for d in rs.devices():
                recs = sorted(rs.select(device=d), key=lambda r: r["batch"])
                who = "live" if rs.source != "reference" else rs.label
                peak = roofs.get(rs.gpu_name) if d == "gpu" and rs.source == "reference" else None
                text += f"<p>{d.upper()} ({who}): {_trend(recs)} {batch_reading(recs, peak)}</p>"
                mark = [r for r in recs if r["batch"] == highlight]
                if mark:
                    text += (f"<p>Marked batch {highlight:,}: {mark[0]['samples_per_s']:,.0f} samples/s, "
                             f"{mark[0]['median_s'] * 1e3:.3g} ms per step.</p>")
        return (batch_figure(live, refs, highlight=highlight,
                             roofs={f"GPU float32 roof ({name}, recorded)": f for name, f in roofs.items()}),
                text + _notes(live))

    controls = {"largest": log2_slider(4, 12, 2 ** 6, "largest batch"),
                "highlight": log2_slider(0, 12, 2 ** 4, "mark batch"), "device": device_buttons(include_both=True)}
    controls["device"].value = "both"
    return _with_cache(LiveApp(update, controls, title="Batching: throughput vs latency", view_only=("highlight",)),
                       cache)


def _reference_roofs(refs: list) -> dict:
    """The float32 matrix-product roof recorded on each reference GPU that ``refs`` come from (name -> FLOP/s)."""
    names = {rs.gpu_name for rs in refs}
    return {r.gpu_name: peaks_of(r, "gpu")["flops"].get("float32") for r in load_reference("roofline")
            if r.gpu_name in names and peaks_of(r, "gpu")["flops"].get("float32")}


def _trend(recs: list[dict]) -> str:
    """One sentence on how samples/s moved with the batch in these records (sorted by batch)."""
    if len(recs) < 2:
        return ""
    first, last = recs[0], recs[-1]
    drops = [(a["batch"], b["batch"]) for a, b in zip(recs, recs[1:]) if b["samples_per_s"] < 0.9 * a["samples_per_s"]]
    s = (f"From batch {first['batch']:,} to {last['batch']:,}, samples/s went from "
         f"{first['samples_per_s']:,.0f} to {last['samples_per_s']:,.0f} "
         f"({last['samples_per_s'] / first['samples_per_s']:.1f}×).")
    if drops:
        s += (" It fell by more than 10 % from batch " + ", ".join(f"{a:,} to {b:,}" for a, b in drops)
              + ": on a busy machine, measure again before reading anything into that.")
    return s


def fusion_app() -> LiveApp:
    """A chain of elementwise steps, unfused vs fused: kernels, bytes, time."""
    cache = MeasurementCache()

    def update(steps: int, n: int, dtype: str, device: str):
        devs, refs, note = _plan(device, "fusion")
        if not devs:
            return fusion_figure(ResultSet("fusion", params=dict(refs[0].params)), refs), note
        if "cpu" in devs and n > FUSION_RATE_N and (steps, n, dtype, tuple(devs)) not in cache:
            cost = fusion_cost_s(n, steps, dtype)
            if cost > WIDGET_LIMIT_S:
                fits = max((2 ** k for k in range(10, n.bit_length()) if fusion_cost_s(2 ** k, steps, dtype)
                            <= WIDGET_LIMIT_S), default=None)
                require_affordable(f"The chain of {steps} steps over {n:,} {dtype} values on the CPU", cost,
                                   f"every mode's calls, scaled from the same chain timed at {FUSION_RATE_N:,} values",
                                   (f"Choose at most {fits:,} elements" if fits else "Choose fewer elements")
                                   + (" or fewer steps, or float32." if dtype == "float16" else " or fewer steps."))
        rs = cache.get((steps, n, dtype, tuple(devs)), lambda: fusion_compare(
            n=n, steps=steps, dtype=dtype, devices=devs, repeat=5, budget_s=0.3))
        return fusion_figure(rs, refs), note + _notes(rs)

    controls = {"steps": w.IntSlider(value=4, min=1, max=MAX_STEPS, description="steps", continuous_update=False),
                "n": log2_slider(10, 26, 2 ** 20, "elements"), "dtype": dtype_dropdown(_DTYPES),
                "device": device_buttons(include_both=True)}
    controls["device"].value = "both"
    return _with_cache(LiveApp(update, controls, title="Kernel fusion"), cache)


def precision_app() -> LiveApp:
    """Matrix products in float32 and float16 (and bfloat16 via PyTorch when ticked), sizes 32 … n."""
    cache = MeasurementCache()

    def update(n: int, bfloat16: bool, device: str):
        devs, refs, note = _plan(device, "mixed_precision")
        sizes = [2 ** k for k in range(5, n.bit_length())]
        dtypes = ("float32", "float16", "bfloat16") if bfloat16 else ("float32", "float16")
        live = (cache.get((n, bfloat16, tuple(devs)), lambda: precision_sweep(
            sizes, dtypes=dtypes, devices=devs, repeat=3, budget_s=0.2, total_budget_s=2.0, progress=progress))
            if devs else None)
        return precision_figure(live, refs), note + _precision_lines(live) + _notes(live)

    controls = {"n": log2_slider(5, 12, 2 ** 6, "largest n"),
                "bfloat16": w.Checkbox(value=False, description="bfloat16 (PyTorch; its first import takes seconds)",
                                       indent=False),
                "device": device_buttons(include_both=True)}
    controls["device"].value = "both"
    return _with_cache(LiveApp(update, controls, title="Reduced precision: one matrix product per dtype"), cache)


def _precision_lines(rs) -> str:
    """For each device and size, the measured float16 (and bfloat16) rate against float32, in words."""
    if rs is None:
        return ""
    lines = []
    for d in rs.devices():
        for r32 in sorted(rs.select(device=d, dtype="float32"), key=lambda r: r["n"]):
            for low in ("tf32", "float16", "bfloat16"):
                r = rs.select(device=d, dtype=low, n=r32["n"])
                if not r or not r[0].get("gflops") or not r32.get("gflops"):
                    continue
                ratio = r[0]["gflops"] / r32["gflops"]
                words = f"{ratio:.2f}× float32's rate" + (" (faster)" if ratio > 1 else " (slower)")
                noisy = " — noisy" if r[0].get("noisy") or r32.get("noisy") else ""
                lines.append(f"{d.upper()} n = {r32['n']}: {low} ran at {words}{noisy}")
    return "<p>" + "<br>".join(lines) + "</p>" if lines else ""


_DEFAULT_EXP = {"matmul": 9, "mlp step": 8, "scan": 16}
_MAX_EXP = {"matmul": 13, "mlp step": 16, "scan": 24}  # beyond: minutes per measurement on a laptop


@arguments(op=OneOf(*POINT_NAMES), exponent=Whole(0, 26, hint="the size is 2**exponent"),
           live=Optional(Given(_results)))
def roofline_app(op: str = "add", exponent: int = 20, live: ResultSet | None = None) -> LiveApp:
    """This machine's roofline (measured once) and the chosen op's point, moving with its size.

    ``live``: a ``measure_roofline`` result to reuse (its peaks, and its points drawn behind yours).
    """
    cache = MeasurementCache(maxsize=64)

    def update(op: str, exponent: int, dtype: str, device: str):
        devs, refs, note = _plan(device, "roofline")
        if not devs:
            return roofline_figure(None, refs, dtype=dtype), note
        d = devs[-1]
        if d == "cpu" and op in POINT_RATE_N and (op, exponent, dtype, d) not in cache:
            smaller = max(k for k in range(exponent + 1) if k == 0 or estimate_s(
                POINT_CALLS * point_flops(op, 2 ** k), point_rate(op, dtype)) <= WIDGET_LIMIT_S)
            require_affordable(f"{op} at 2^{exponent} in {dtype} on the CPU",
                               estimate_s(POINT_CALLS * point_flops(op, 2 ** exponent), point_rate(op, dtype)),
                               "counted FLOPs over the rate measured at a small size",
                               f"Choose a size of at most 2^{smaller} for {op} in {dtype}"
                               + (", or float32." if dtype != "float32" else "."))
        point = cache.get((op, exponent, dtype, d), lambda: roofline_point(op, 2 ** exponent, dtype, d))
        peaks = (live if live is not None and peaks_of(live, d)["flops"].get(dtype)
                 else cached_peaks(d, (dtype,)))
        pk = peaks_of(peaks, d)
        f = pk["flops"].get(dtype)
        roof = min(f, point["intensity"] * pk["bandwidth"])
        kind = classify(point["intensity"], f, pk["bandwidth"])
        text = (f"<p><b>{html.escape(point['name'])}</b> on the {d.upper()} in {dtype}: intensity "
                f"{point['intensity']:.3g} FLOP/byte → <b>{kind}</b> on this roofline (ridge at "
                f"{f / pk['bandwidth']:.3g}). Measured {point['flops_per_s'] / 1e9:.3g} GFLOP/s = "
                f"{point['flops_per_s'] / roof:.0%} of the roof above it ({roof / 1e9:.3g} GFLOP/s).</p>")
        if point["flops_per_s"] > 1.05 * roof:
            text += ("<p><i>Above the roof: " + ("its arrays fit in the caches, which are faster than the main "
                     "memory the slanted roof was measured on." if kind == "memory-bound" else
                     "timings vary by several per cent from run to run (other programs, clocks), and the "
                     "peak was measured at another moment.") + "</i></p>")
        return roofline_figure(peaks, refs, dtype=dtype, highlight=point), note + text + _notes(peaks)

    op_dd = w.Dropdown(options=list(POINT_NAMES), value=op, description="op")
    size = _exp_slider(0, 26, exponent, "size 2^")

    def on_op(change) -> None:  # a size range that makes sense for the new op, set before the redraw
        size.value = min(size.value, _DEFAULT_EXP.get(change["new"], 20))
        size.max = _MAX_EXP.get(change["new"], 26)
        size.value = _DEFAULT_EXP.get(change["new"], 20)

    size.max = _MAX_EXP.get(op, 26)
    op_dd.observe(on_op, names="value")
    controls = {"op": op_dd, "exponent": size, "dtype": dtype_dropdown(_DTYPES), "device": device_buttons()}
    return _with_cache(LiveApp(update, controls, title="The roofline of this machine"), cache)
