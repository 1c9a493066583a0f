"""The live apps of lesson 05.

* :func:`tree_app`: the Blelloch tree of backprop for a chosen T (symbols, instant).
* :func:`timing_app`: the paper's RNN at a chosen T, hidden size, batch and device:
  forward, sequential backward and scan backward timed live, with the gradients
  compared and the work counted.
* :func:`memory_app`: dense vs CSR bytes of a convolution's Jacobian.

Every app is a :class:`course.widgets.LiveApp`; errors (a GPU that is not there,
a size that does not fit) appear in its error area with what to do.

>>> app = tree_app()
>>> app.last_error is None
True
"""

from __future__ import annotations

import html

import ipywidgets as widgets

from .bppsa import work_counts
from .bppsa_plots import memory_figure, speedup_figure, timing_bars, tree_figure
from .bppsa_sparse import conv_jacobian_memory
from .bppsa_timing import SWEEP_T, time_rnn, time_torch_rnn, torch_available
from .devices import gpu_available, normalize_device, require_gpu
from .errors import GPUUnavailableError
from .results import load_reference
from .widgets import LiveApp, device_buttons, size_slider

__all__ = ["tree_app", "timing_app", "memory_app", "timing_update", "EXPERIMENT"]

EXPERIMENT = "bppsa_rnn"


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
        "(backward = full step − forward, median over alternating rounds).",
        f"Dependent steps: {c['steps_sequential']:,} (sequential) vs {c['steps_scan']} levels (scan) "
        f"— at most {c['step_ratio']:.0f}× fewer waits.",
        f"Work: {c['flops_sequential'] / 1e6:,.1f} MFLOP vs {c['flops_scan'] / 1e6:,.1f} MFLOP — the scan "
        f"does {c['work_ratio']:.0f}× more arithmetic (n×n·n×n products instead of n×n·vector).",
        f"Memory: the scan stores {c['bytes_scan'] / 2**20:,.1f} MiB of Jacobians (float32).",
        f"Largest difference between the two methods' W_hh gradients: {r['max_grad_diff']:.2e}.",
    ]
    if torch_r is not None:
        tb = torch_r["backward_s"]
        lines.append(f"PyTorch nn.RNN backward on the {dev.upper()}: {tb * 1e3:.3g} ms"
                     + (f" ({tb / scan:.2f}× the scan's time)" if tb > 0 and scan > 0 else ""))
    if dev == "cpu":
        lines.append("<i>On a CPU with a few cores, the scan's extra work is not paid back: there are "
                     "too few parallel workers to run a level's thousands of small products at once.</i>")
    return "<br>".join(lines)


def timing_update(T: int = 100, hidden: int = 20, batch: int = 16, device: str = "cpu",
                  torch: bool = False, budget_s: float = 10.0):
    """The timing app's update: time the RNN's two backward passes at one setting."""
    dev = normalize_device(device)
    if dev == "gpu" and not gpu_available():
        refs = load_reference(EXPERIMENT)
        if not refs:
            try:
                require_gpu()
            except GPUUnavailableError as exc:
                raise GPUUnavailableError(f"{exc} No reference GPU results are recorded for this "
                                          "experiment yet, so there is nothing to show instead.") from None
        note = ("<b>No GPU here.</b> Showing reference GPU results recorded elsewhere (dashed, labelled "
                f"with their device and date); your slider's T is marked. {html.escape(refs[0].label)}")
        return speedup_figure(None, refs, highlight=T), note
    warmup = 1 if (dev == "gpu" or T <= 3000) else 0
    r = time_rnn(T, hidden, batch, device=dev, repeat=5, budget_s=budget_s, warmup=warmup)
    torch_r = None
    if torch and torch_available():
        try:
            torch_r = time_torch_rnn(T, hidden, batch, device=dev, repeat=3, budget_s=budget_s / 2)
        except GPUUnavailableError:
            torch_r = None
    return timing_bars(r, T, dev, torch_r), _summary(T, hidden, batch, dev, r, torch_r)


def timing_app(T: int = 100, hidden: int = 20, batch: int = 16) -> LiveApp:
    """Sliders for T (10 … 30,000), hidden size, batch; CPU/GPU buttons; PyTorch peer checkbox."""
    controls = {
        "T": size_slider(SWEEP_T, T, "T"),
        "hidden": size_slider((4, 8, 16, 20, 32, 64), hidden, "hidden size"),
        "batch": size_slider((1, 4, 16, 64), batch, "batch"),
        "device": device_buttons(),
        "torch": widgets.Checkbox(value=False, description="time PyTorch too",
                                  disabled=not torch_available()),
    }
    return LiveApp(timing_update, controls,
                   title="Backward pass of a tanh RNN: sequential backprop vs BPPSA, measured live")


def memory_update(size: int = 32, c_in: int = 3, c_out: int = 64, dtype: str = "float32"):
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
