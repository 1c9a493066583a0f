"""Lesson 01's readers of its recorded steps: what a trace or a ladder says, from its records, measured live or
recorded on a GPU elsewhere.  Nothing here times anything (the measurements are :mod:`~course.backprop.timing`'s).

* :func:`trace_to_results` and :func:`trace_from_results`: a step's trace as records of a ResultSet, and back;
* :func:`step_ratio_lines`: what the ratio of a CPU step to a GPU step measures, in sentences;
* :func:`ladder_table` (one width), :func:`ladder_widths_table` (every width) and :func:`ladder_lines` (the GPU's
  speed-up from its fastest step, PyTorch beside it, the growth with the work): the fast step's ladder read.

>>> from course.results import ResultSet
>>> rs = ResultSet("backprop_step_ladder", params={"batch": 8})
>>> rs.add(device="cpu", width=16, rung="eager", title="(a) eager", median_s=2e-3, launches=51, reads=5)
>>> print(ladder_widths_table(rs, "cpu").splitlines()[-1])
    16         2.000
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..arguments import Given, Optional, Real, Whole, arguments
from ..devices import normalize_device
from ..errors import BadInputError
from ..results import ResultSet
from .fast_step import RUNGS
from .trace import LayerTrace, StepTrace, validate_trace
from .validate import validate_kind

__all__ = ["trace_to_results", "trace_from_results", "step_ratio_lines", "ladder_table", "ladder_widths_table",
           "ladder_lines", "validate_results", "validate_references"]


def validate_results(rs: Any, name: str = "rs") -> Any:
    """``rs`` if it is a :class:`~course.results.ResultSet` (what the lesson's sweeps return, or a recorded one)."""
    return validate_kind(rs, ResultSet, name, "a course.results.ResultSet (a sweep's result, or load_reference's)")


def validate_references(sets: Any, name: str = "references") -> list:
    """``sets`` as a list of ResultSets (recorded references: ``course.results.load_reference(name)``)."""
    if isinstance(sets, (str, bytes, ResultSet, np.ndarray)) or not isinstance(sets, (list, tuple)):
        raise BadInputError(f"{name} must be a list of ResultSets (course.results.load_reference(name)), got "
                            f"{type(sets).__name__}")
    return [validate_results(s, name) for s in sets]


@arguments(tr=Given(validate_trace), rs=Optional(Given(validate_results)))
def trace_to_results(tr: StepTrace, rs: ResultSet | None = None) -> ResultSet:
    """Store a trace as records (one per layer, plus the whole step) of a ``backprop_layer_trace`` set."""
    rs = rs if rs is not None else ResultSet("backprop_layer_trace", params={"model": tr.model, "batch": tr.batch})
    for i, r in enumerate(tr.layers):
        rs.add(device=tr.device, layer=i, name=r.name, kind=r.kind, in_shape=list(r.in_shape),
               out_shape=list(r.out_shape), forward_ops=r.forward_ops, backward_ops=r.backward_ops,
               forward_flops=r.forward_flops, backward_flops=r.backward_flops, matmul_flops=r.matmul_flops,
               forward_s=r.forward_s, backward_s=r.backward_s, model=tr.model, batch=tr.batch)
    rs.add(device=tr.device, layer=-1, name="whole step", step_s=tr.step_s, model=tr.model, batch=tr.batch,
           noisy=tr.noisy)
    return rs


@arguments(rs=Given(validate_results), device=Given(normalize_device))
def trace_from_results(rs: ResultSet, device: str = "cpu") -> StepTrace | None:
    """Rebuild the :class:`StepTrace` of ``device`` from :func:`trace_to_results` records (None if absent)."""
    recs = sorted((r for r in rs.select(device=device) if r.get("layer", -1) >= 0), key=lambda r: r["layer"])
    if not recs:
        return None
    step = [r for r in rs.select(device=device) if r.get("layer") == -1]
    fields = ("name", "kind", "forward_ops", "backward_ops", "forward_flops", "backward_flops",
              "matmul_flops", "forward_s", "backward_s")
    layers = [LayerTrace(in_shape=tuple(r["in_shape"]), out_shape=tuple(r["out_shape"]),
                         **{k: r[k] for k in fields}) for r in recs]
    return StepTrace(layers=layers, step_s=step[0]["step_s"] if step else float("nan"), device=device,
                     model=recs[0]["model"], batch=recs[0]["batch"], noisy=bool(step and step[0].get("noisy")))


def _gflops(rs: ResultSet, device: str, n: int) -> tuple[float, int] | None:
    recs = [r for r in rs.select(device=device, n=n) if r.get("gflops")]
    return (recs[0]["gflops"], recs[0].get("threads", 0)) if recs else None


@arguments(cpu=Given(validate_trace, name="cpu"), gpu=Given(validate_trace, name="gpu"),
           flops=Real(above=0, hint="the step's counted FLOPs"),
           peak_flops=Optional(Real(above=0, hint="the GPU's float32 matrix-product rate, FLOP/s")),
           matmul=Optional(Given(validate_results, name="matmul")), n=Whole(hint="the product's side to read"))
def step_ratio_lines(cpu: StepTrace, gpu: StepTrace, flops: float, peak_flops: float | None = None,
                     matmul: ResultSet | None = None, n: int = 512) -> list[str]:
    """What the ratio of a CPU step to a recorded GPU step measures, in sentences printed from the numbers.

    ``cpu`` and ``gpu`` are traces of the same step; ``flops`` its counted FLOPs; ``peak_flops`` the
    float32 matrix-product rate recorded on that GPU (the roofline reference), and ``matmul`` the
    reference's square matrix-product sweep (CPU and GPU), read at ``n`` and at its largest size: the
    speed-up of the products alone, beside the step's.  A whole step that took far more or less than the
    sum of its layers timed alone is flagged.
    """
    lines = [f"The teaching step, run eagerly: this CPU's time over the GPU's, {cpu.step_s / gpu.step_s:.1f}× "
             f"({cpu.step_s * 1e3:.3f} ms on this CPU, {gpu.step_s * 1e3:.3f} ms on the GPU; the same step, float32)."]
    for who, tr in (("this CPU", cpu), ("the GPU", gpu)):
        parts = tr.forward_s + tr.backward_s
        if not 0.8 <= tr.step_s / parts <= 1.25:
            lines.append(f"  Flag: on {who} the whole step took {tr.step_s / parts:.2f}× the sum of its layers timed "
                         f"alone ({parts * 1e3:.3f} ms): the whole step also runs the update and its allocations, and "
                         "a busy moment moves it; the ratio above carries that difference.")
    rate = flops / gpu.step_s
    loss = [r for r in gpu.layers if r.kind == "loss"]
    lines.append("What that ratio measures: the cost of each call on the host, not the GPU's arithmetic, nor its "
                 "training speed-up (the ladder below prints that from its fastest step). The "
                 f"GPU step ran at {rate / 1e9:,.0f} GFLOP/s"
                 + (f", {100 * rate / peak_flops:.2f} % of the {peak_flops / 1e12:,.0f} TFLOP/s float32 "
                    "matrix-product rate recorded on the same GPU" if peak_flops else "")
                 + "; its element-wise layers and loss, a sliver of the FLOPs, took "
                 f"{100 * (1 - gpu.matmul_share):.0f} % of the layer-by-layer time"
                 + (f", the loss alone {1e3 * (loss[0].forward_s + loss[0].backward_s):.2f} ms (its label check "
                    "reads the labels' smallest and largest value back to the host, and each read waits for the GPU)"
                    if loss else "") + ".")
    g, c = (_gflops(matmul, d, n) for d in ("gpu", "cpu")) if matmul is not None else (None, None)
    if g:
        here = sum(r.matmul_flops for r in cpu.layers) / max(sum(r.forward_s + r.backward_s for r in cpu.layers
                                                                  if r.kind == "linear"), 1e-30)
        top = max(r["n"] for r in matmul.select(device="gpu"))
        g_top, c_top = _gflops(matmul, "gpu", top), _gflops(matmul, "cpu", top)
        lines.append(f"The matrix products alone (float32): the reference GPU's {n}×{n} product, about this step's "
                     f"size, ran at {g[0]:,.0f} GFLOP/s, {g[0] * 1e9 / here:,.0f}× this CPU's Linear layers above "
                     f"({here / 1e9:,.0f} GFLOP/s)"
                     + (f" and {g[0] / c[0]:.1f}× the GPU machine's own CPU ({c[1]} threads)" if c else "")
                     + (f"; at {top:,}×{top:,}, {g_top[0] / c_top[0]:.0f}× that CPU" if g_top and c_top else "")
                     + ". That is what a step can approach once the per-call costs are gone (the ladder below).")
    return lines


@arguments(rs=Given(validate_results), width=Whole(hint="a hidden width of the ladder, e.g. 512"),
           device=Given(normalize_device))
def ladder_table(rs: ResultSet, width: int = 512, device: str = "gpu") -> str:
    """A plain-text table of the ladder at one width: time, ratio to rung (a), launches, reads."""
    recs = [r for r in rs.select(device=device, width=width) if r.get("rung")]   # not the plain step's curve
    if not recs:
        return f"(no {device.upper()} ladder at width {width} in {rs.label})"
    base = next((r["median_s"] for r in recs if r["rung"] == "eager"), None)
    lines = [f"{device.upper()} ladder, 784-{width}-{width}-10, batch {rs.params.get('batch')}, float32 "
             f"({rs.label}); ratio = rung (a)'s time / this time",
             f"{'':46} {'ms':>8} {'× (a)':>7} {'launches':>9} {'GPU kernels':>12} {'reads':>6}"]
    for r in recs:
        ratio = f"{base / r['median_s']:.2f}" if base else "–"
        cells = [("–" if r.get(k) is None else str(r[k])) for k in ("launches", "gpu_kernels", "reads")]
        lines.append(f"{r['title'][:46]:46} {r['median_s'] * 1e3:8.3f} {ratio:>7} {cells[0]:>9} {cells[1]:>12} "
                     f"{cells[2]:>6}")
    return "\n".join(lines)


#: A short column head per rung and peer, for :func:`ladder_widths_table`.
_SHORT = {"eager": "(a) eager", "no_readback": "(b) no read", "fused": "(c) fused", "graph": "(d) graph",
          "torch eager": "torch eager", "torch graph": "torch graph", "torch eager tf32": "t. eager TF32",
          "torch graph tf32": "t. graph TF32"}


def _ladder(rs: ResultSet, device: str, **where: Any) -> list[dict]:
    return [r for r in rs.select(device=device, **where) if r.get("rung")]


@arguments(rs=Given(validate_results), device=Given(normalize_device))
def ladder_widths_table(rs: ResultSet, device: str = "gpu") -> str:
    """Every rung's step time (ms) at every width of ``rs``: a row per width, a column per rung and peer."""
    recs = _ladder(rs, device)
    if not recs:
        return f"(no {device.upper()} ladder in {rs.label})"
    rungs = list(dict.fromkeys(r["rung"] for r in recs))
    t = {(r["width"], r["rung"]): r["median_s"] for r in recs}
    lines = [f"{device.upper()} ladder, ms per step of 784-w-w-10, batch {rs.params.get('batch')}, float32, TF32 off "
             f"except the columns marked TF32 ({rs.label})",
             f"{'width':>6} " + " ".join(f"{_SHORT.get(k, k)[:13]:>13}" for k in rungs)]
    for w in sorted({r["width"] for r in recs}):
        lines.append(f"{w:>6,} " + " ".join(f"{t[w, k] * 1e3:13.3f}" if (w, k) in t else f"{'–':>13}" for k in rungs))
    return "\n".join(lines)


def _per_step(r: dict) -> str:
    """``"51 launches and 5 reads back per step"`` of a rung's record."""
    n, k = r.get("launches"), r.get("reads")
    return f"{n} launch{'' if n == 1 else 'es'} and {k} read{'' if k == 1 else 's'} back per step"


@arguments(cpu=Optional(Given(validate_results, name="cpu")), gpu=Given(validate_results, name="gpu"),
           width=Whole(hint="a hidden width of the ladder, e.g. 512"),
           gemm_gflops=Optional(Real(above=0, hint="a float32 matrix-product rate, GFLOP/s")))
def ladder_lines(cpu: ResultSet | None, gpu: ResultSet, width: int = 512, gemm_gflops: float | None = None,
                 gemm_label: str = "") -> list[str]:
    """What the GPU ladder ``gpu`` (measured live or recorded) says, in sentences printed from its records
    (a time whose runs the timer flagged as noisy is marked so).

    At ``width``: the GPU's training speed-up over this CPU from the fastest rung, against the fastest CPU
    rung of ``cpu`` (named, with its threads), beside the teaching step's (rung (a)) ratio to the same
    baseline, and PyTorch's eager and graph steps from the same run.  Across the widths: how the fastest
    rung's time grows with the work, and at the largest width what share of ``gemm_gflops`` (a float32
    matrix-product rate on the same GPU, described by ``gemm_label``) the step reaches.
    """
    g = {r["rung"]: r for r in _ladder(gpu, "gpu", width=width)}
    ours = [g[k] for k in RUNGS if k in g]
    if not ours:
        return [f"No GPU ladder at width {width} in {gpu.label}."]
    best, eager = min(ours, key=lambda r: r["median_s"]), g.get("eager")

    def ms(r: dict) -> str:                 # a noisy timing says so wherever it is printed
        return f"{r['median_s'] * 1e3:.3f} ms" + (" (noisy)" if r.get("noisy") else "")

    def tf32(r: dict) -> str:
        return "TF32 ON" if r.get("tf32") else "TF32 off"

    lines = []
    base = min(_ladder(cpu, "cpu", width=width), key=lambda r: r["median_s"], default=None) if cpu else None
    if base is None:
        lines.append(f"No CPU step at width {width} was measured here, so no speed-up over this CPU is printed.")
    else:
        lines.append(f"Baseline: this CPU's fastest step at width {width}, {base['title']}: {ms(base)} (NumPy, "
                     f"float32, {base.get('threads', '?')} BLAS thread(s), {cpu.label}).")
        lines.append(f"The GPU's training speed-up over this CPU, from the course's fastest GPU step, {best['title']}: "
                     f"{base['median_s'] / best['median_s']:,.1f}× ({ms(best)}, float32, {tf32(best)}, {gpu.label}).")
        if eager is not None and eager is not best:
            lines.append(f"The teaching step (a), run eagerly on the same GPU: {ms(eager)}, "
                         f"{base['median_s'] / eager['median_s']:,.1f}× this CPU. The factor between the two ratios, "
                         f"{eager['median_s'] / best['median_s']:,.1f}×, is what the rungs above (a) removed: "
                         f"{_per_step(eager)} in (a), {_per_step(best)} in {best['title'][:3]}, and the passes over "
                         "memory that fused kernels no longer make.")
    te, tg = g.get("torch eager"), g.get("torch graph")
    if te or tg:
        nograph = min((r for r in ours if r["rung"] != "graph"), key=lambda r: r["median_s"], default=None)
        parts = [f"{who} {ms(r)}" for who, r in (("eager", te), ("torch.cuda.graph", tg)) if r]
        text = f"PyTorch in the same run, float32, TF32 off: {', '.join(parts)}."
        if tg and "graph" in g:
            text += (f" The course's graph step takes {g['graph']['median_s'] / tg['median_s']:.2f}× PyTorch's "
                     "graph step's time")
        if te and nograph:
            text += (("; its" if tg and "graph" in g else " The course's") + f" fastest step without a graph, "
                     f"{nograph['title']}, {nograph['median_s'] / te['median_s']:.2f}× PyTorch eager's")
        lines.append(text + ("." if not text.endswith(".") else ""))
    on = [r for r in (g.get("torch eager tf32"), g.get("torch graph tf32")) if r]
    if on:
        lines.append("With TF32 ON (products rounded to TF32's 10-bit mantissa on the tensor cores: another "
                     "arithmetic, not compared with the float32 steps above), PyTorch: "
                     + ", ".join(f"{'eager' if 'eager' in r['rung'] else 'torch.cuda.graph'} {ms(r)}"
                                 for r in on) + ".")
    steps = sorted(_ladder(gpu, "gpu", rung=best["rung"]), key=lambda r: r["width"])
    if len(steps) > 1:
        lo, hi = steps[0], steps[-1]
        text = (f"The fastest step, {best['title']}, grows with the work: {ms(lo)} at width {lo['width']:,}, "
                f"{ms(hi)} at width {hi['width']:,}, {hi['median_s'] / lo['median_s']:.1f}× the time for "
                f"{hi['flops'] / lo['flops']:,.0f}× the FLOPs")
        ends = [r for r in _ladder(gpu, "gpu", rung="eager") if r["width"] in (lo["width"], hi["width"])]
        if len(ends) == 2 and best["rung"] != "eager":
            a_lo, a_hi = sorted(ends, key=lambda r: r["width"])
            text += (f"; the teaching step (a) takes {ms(a_lo)} and {ms(a_hi)}: "
                     f"{a_hi['median_s'] / a_lo['median_s']:.2f}×")
        lines.append(text + ".")
        if not gemm_gflops and gemm_label:
            lines.append(f"(No share of a matrix-product rate is printed: {gemm_label}.)")
        if gemm_gflops:
            rate = hi["flops"] / hi["median_s"] / 1e9
            lines.append(f"At width {hi['width']:,} it runs at {rate / 1e3:,.1f} TFLOP/s: "
                         f"{100 * rate / gemm_gflops:.0f} % of the float32 matrix-product rate {gemm_label}, "
                         f"{gemm_gflops / 1e3:,.1f} TFLOP/s.")
    return lines
