"""Lesson 01's live widgets: training on the digits, the cost of a step, checkpointing.

Each builder returns a :class:`course.widgets.LiveApp`; display it as the last
expression of a cell.  Tests drive them by setting ``app.controls[...].value``.
Every app keeps its measurements in a :class:`course.widgets.MeasurementCache` keyed by
the controls that change them, so coming back to a setting, or moving a control that
only changes the view, redraws without measuring again.

* :func:`training_app` trains an MLP on the 8×8 digits and redraws the loss and
  accuracy curves after every epoch;
* :func:`step_time_app` times one training step for a hidden width, depth, batch
  size, dtype and device and shows where the time goes, layer by layer;
* :func:`step_sweep_app` plots step time against width on the CPU and the GPU (or
  the GPU's reference results, labelled, where no GPU answers);
* :func:`checkpoint_app` moves k in gradient checkpointing and shows memory
  against recomputation;
* :func:`footprint_app`: a model's size, precision and optimiser give the bytes its training state
  holds, and a memory the largest model it can train.
"""

from __future__ import annotations

import functools
import html
import math
import time
from collections.abc import Sequence

import ipywidgets as widgets

from ..arguments import Dtype, Given, OneOf, Real, Whole, Wholes, arguments
from ..cpu import machine_load
from ..devices import gpu_available
from ..plots import figure_to_png, sweep_figure
from ..results import load_reference
from ..timeline import validate_experiment_name
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
    size_slider,
)
from .bench import checkpoint_sweep
from .checkpointing import checkpointed_backward
from .data import load_digits
from .footprint import MEMORY_PRECISIONS, bytes_per_parameter, largest_model
from .layers import MLP
from .optimizers import OPTIMIZERS
from .plots import checkpoint_figure, footprint_figure, trace_figure, training_figure
from .timing import step_time_sweep, trace_step
from .trace import random_batch
from .train import train

__all__ = ["training_app", "step_time_app", "step_sweep_app", "checkpoint_app", "footprint_app", "reference_note",
           "step_rate", "step_flops", "STEP_CALLS", "TRAIN_BUDGET_S", "MEMORIES"]

#: Seconds of training one run of the training app may take (it stops after the epoch that passes it).
TRAIN_BUDGET_S = 0.6 * WIDGET_LIMIT_S
#: Training steps each measurement runs at the least, in units of one whole step: the trace (one real
#: step, then at least 3 rounds of every layer's forward and backward plus a whole step), the sweep
#: (a warm-up and at least 3 rounds), and checkpointing (per k: a warm-up, at least 3 rounds, one run
#: under tracemalloc, which about doubles its time, and the app's own counted run, each with up to a
#: whole extra forward of recomputation: 7 runs of up to 2 steps).
STEP_CALLS = {"trace": 7, "sweep": 4, "checkpoint": 7 * 2}

_NO_REF = ("No reference GPU results have been recorded for this experiment yet. On a GPU machine, "
           "<code>python -m course report --record-reference</code> records them.")


@functools.lru_cache(maxsize=4)
def _digits(device: str, dtype: str):
    return load_digits(device=device, dtype=dtype)


@arguments(experiment=Given(validate_experiment_name))
def reference_note(experiment: str) -> str:
    """One HTML line naming the reference results for ``experiment``, or saying there are none."""
    refs = load_reference(experiment)
    if not refs:
        return f"<p><i>{_NO_REF}</i></p>"
    return "<p><i>" + "; ".join(f"Reference results {html.escape(r.label)}" for r in refs) + ".</i></p>"


@arguments(sizes=Wholes(min_len=2, hint="the layer widths, input first"), batch=Whole(hint="the examples in one step"))
def step_flops(sizes: Sequence[int], batch: int) -> float:
    """FLOPs of one training step of an MLP with these layer sizes (counted as :meth:`MLP.flops_per_step` does)."""
    total = 0.0
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        mm = 2.0 * batch * n_in * n_out
        total += 2 * mm + 2 * batch * n_out + (mm if i > 0 else 0.0)
    return total


#: The batch at which a network's step rate is measured (a small fraction of a big step's time).
_RATE_BATCH = 32


@arguments(sizes=Wholes(min_len=2, hint="the layer widths, input first"), dtype=Dtype(floating=True))
def step_rate(sizes: Sequence[int], dtype: str) -> float:
    """FLOP/s of a training step of this very network on this CPU, measured once at batch 32.

    The same network, not a smaller one: a deep one can run many times slower per FLOP (its
    activations shrink into subnormal numbers), and a small batch only runs slower per FLOP than a
    big one, so the estimate errs on the long side.
    """
    def run():
        model = MLP(sizes, dtype=dtype, seed=0)
        x, y = random_batch(model, _RATE_BATCH)
        return measured_rate(("mlp step", tuple(sizes), str(dtype)), model.flops_per_step(_RATE_BATCH),
                             lambda: model.train_step(x, y, 1e-12))
    return run()


def _require_quick(what: str, sizes, steps: float, batch: int, dtype: str, instead: str) -> None:
    """Refuse ``steps`` training steps of this network at ``batch`` whose estimated time is over the widget limit.

    The rate is a quiet machine's (the fastest of a few calls); on a busy one, where more processes want a
    core than there are cores, every step takes that many times longer, and the estimate says so."""
    busy = max(1.0, machine_load() or 0.0)
    require_affordable(what, busy * estimate_s(steps * step_flops(sizes, batch), step_rate(sizes, dtype)),
                       f"counted FLOPs over this network's {dtype} step rate measured at batch {_RATE_BATCH}"
                       + (f", times {busy:.1f} for this busy machine's load" if busy > 1 else ""), instead)


#: The training app's hidden widths and batches (its sliders).
_HIDDEN = (16, 32, 64, 128, 256)
_TRAIN_BATCHES = (8, 16, 32, 64, 128, 256)


def _slider(description: str, lo: int, hi: int, value: int) -> widgets.IntSlider:
    return widgets.IntSlider(value=value, min=lo, max=hi, description=description, continuous_update=False,
                             style={"description_width": "initial"})


def _iqr_noisy(rec: dict) -> bool:
    """True when a record's quartiles spread more than a quarter of its median (or it says it is noisy)."""
    if rec.get("noisy"):
        return True
    med, q25, q75 = rec.get("median_s"), rec.get("q25_s"), rec.get("q75_s")
    return bool(med and q25 is not None and q75 is not None and (q75 - q25) > 0.25 * med)


@arguments(hidden=OneOf(*_HIDDEN), epochs=Whole(hi=40, hint="the slider's epochs"), batch=OneOf(*_TRAIN_BATCHES),
           lr=Real(lo=1e-3, hi=10**1.5, hint="the slider's learning rate"))
def training_app(hidden: int = 64, epochs: int = 8, batch: int = 32, lr: float = 0.05) -> LiveApp:
    """Train ``MLP([64, hidden, 10])`` on the digits; the curves redraw after each epoch.

    The device buttons offer the GPU even without one: choosing it then shows why not.
    A training run is kept by its settings (training from the same seed gives the same
    curves), so coming back to a setting redraws it without training again.
    """
    controls = {
        "hidden": size_slider(_HIDDEN, hidden, "hidden units"),
        "epochs": _slider("epochs", 1, 40, epochs),
        "batch": size_slider(_TRAIN_BATCHES, batch, "batch size"),
        "lr": widgets.FloatLogSlider(value=lr, base=10, min=-3, max=1.5, step=0.25, description="learning rate",
                                     continuous_update=False, style={"description_width": "initial"}),
        "activation": widgets.Dropdown(options=["relu", "tanh", "sigmoid"], value="relu",
                                       description="activation", layout=widgets.Layout(width="200px")),
        "device": device_buttons("cpu"),
    }
    holder: dict = {}
    runs = MeasurementCache(maxsize=32)

    def run(hidden, epochs, batch, lr, activation, device):
        data = _digits(device, "float32")        # on a GPU: copied there once, explicitly
        model = MLP([data.n_features, hidden, data.n_classes], activation=activation, device=device, seed=0)
        app = holder.get("app")
        last = [time.perf_counter()]

        def redraw(h):  # the live curve: at most one redraw a second, so drawing never dominates
            if app is not None and time.perf_counter() - last[0] > 1.0 and h.epoch[-1] < epochs:
                app.image.value = figure_to_png(training_figure(h))
                app.image.layout.display = None
                last[0] = time.perf_counter()

        h = train(model, data, epochs=epochs, batch_size=batch, lr=lr, callback=redraw, budget_s=TRAIN_BUDGET_S)
        return h, repr(model), model.n_parameters(), int(data.y_test.shape[0])

    def update(hidden, epochs, batch, lr, activation, device):
        key = (hidden, epochs, batch, lr, activation, device)
        kept = key in runs
        h, name, n_params, n_test = runs.get(key, lambda: run(*key))
        steps_s = sum(h.seconds) / max(h.steps, 1)
        note = f" (stopped early by its {TRAIN_BUDGET_S:g} s budget)" if h.stopped_early else ""
        again = " (trained earlier with these settings; the same seed gives the same curves)" if kept else ""
        text = (f"<p>{name}: {n_params:,} parameters, {h.steps} SGD steps of batch {batch} "
                f"in {sum(h.seconds):.2f} s ({steps_s * 1e3:.2f} ms per step){note}{again}. "
                f"Test accuracy <b>{100 * h.test_acc[-1]:.1f} %</b> on {n_test} images "
                f"it never trained on.</p>")
        return training_figure(h), text

    app = LiveApp(update, controls, title="Train an MLP on the 8×8 digits", run_now=False)
    app.cache = runs
    holder["app"] = app
    app.refresh()
    return app


#: The step-time app's hidden widths (its slider).
_STEP_WIDTHS = (32, 64, 128, 256, 512, 1024, 2048)


def _gpu_fallback_html(width: int, depth: int, batch: int, dtype: str) -> str:
    """Why the CPU ran instead, and what the reference GPU results say for this network (if recorded)."""
    out = no_gpu_html("The breakdown below is the CPU's. On Colab choose Runtime &gt; Change runtime type &gt; GPU.")
    refs = load_reference("backprop_train_step")
    if not refs:
        return out + f"<p><i>{_NO_REF}</i></p>"
    for ref in refs:
        recs = [r for r in ref.select(device="gpu", width=width, depth=depth, batch=batch, dtype=dtype)]
        cpu = [r for r in ref.select(device="cpu", width=width, depth=depth, batch=batch, dtype=dtype)]
        if recs:
            line = (f"Reference, {html.escape(ref.label)}: one step of this network took "
                    f"{recs[0]['median_s'] * 1e3:.3g} ms on the GPU")
            if cpu:
                line += f" against {cpu[0]['median_s'] * 1e3:.3g} ms on that machine's CPU"
            out += f"<p><i>{line} (not measured here).</i></p>"
        else:
            p = ref.params
            out += (f"<p><i>Reference results {html.escape(ref.label)} exist, but not for this network: "
                    f"they cover widths {p.get('widths')}, {p.get('depth')} hidden layers, batch "
                    f"{p.get('batch')}, {p.get('dtype')}.</i></p>")
    return out


@arguments(width=OneOf(*_STEP_WIDTHS), depth=Whole(hi=6, hint="the slider's hidden layers"),
           batch=OneOf(*[2**k for k in range(4, 12)]))
def step_time_app(width: int = 128, depth: int = 2, batch: int = 256) -> LiveApp:
    """One training step of a 784-width×depth-10 MLP: time per step and the per-layer breakdown."""
    controls = {
        "width": size_slider(_STEP_WIDTHS, width, "hidden width"),
        "depth": _slider("hidden layers", 1, 6, depth),
        "batch": log2_slider(4, 11, batch, "batch size"),
        "dtype": dtype_dropdown(("float32", "float64")),
        "device": device_buttons(),
    }

    traces = MeasurementCache()

    def measure(width, depth, batch, dtype, device):
        model = MLP([784] + [width] * depth + [10], dtype=dtype, device=device)
        x, y = random_batch(model, batch)
        return trace_step(model, x, y, repeat=3, budget_s=0.6), repr(model), model.flops_per_step(batch)

    def update(width, depth, batch, dtype, device):
        note = ""
        if device == "gpu" and not gpu_available():
            device, note = "cpu", _gpu_fallback_html(width, depth, batch, dtype)
        key = (width, depth, batch, dtype, device)
        if device == "cpu" and key not in traces:
            _require_quick(f"Tracing a step of width {width}, {depth} hidden layers, batch {batch} in {dtype}",
                           [784] + [width] * depth + [10], STEP_CALLS["trace"], batch, dtype,
                           "Choose a smaller width, batch or depth (or float32).")
        tr, name, flops = traces.get(key, lambda: measure(*key))
        t_ratio = tr.backward_s / max(tr.forward_s, 1e-30)
        closer = ("above the counted ratio: the backward's products "
                  "ran at a lower rate (FLOP/s) than the forward's" if t_ratio > 1.1 * tr.flop_ratio else
                  "below the counted ratio: the backward's products ran at a higher rate than the forward's"
                  if t_ratio < tr.flop_ratio / 1.1 else "within 10 % of the counted ratio")
        text = (f"<p>{name}, batch {batch}: one training step takes <b>{tr.step_s * 1e3:.3g} ms</b> on the "
                f"{tr.device.upper()}: {flops / 1e9:.3g} GFLOP, so {flops / tr.step_s / 1e9:.3g} GFLOP/s. "
                f"Here the backward pass took {t_ratio:.2f}× the forward's time for {tr.flop_ratio:.2f}× its "
                f"FLOPs ({closer}); the Linear layers took {100 * tr.matmul_share:.1f} % of the layer-by-layer "
                "time. Each layer is timed alone, a few runs each: on a busy machine, run it again and see "
                "which numbers hold.</p>")
        return trace_figure(tr), note + text

    app = LiveApp(update, controls, title="Where the time of one training step goes")
    app.cache = traces
    return app


_SWEEP_WIDTHS = (32, 64, 128, 256, 512, 1024, 2048)


@arguments(depth=Whole(hi=4, hint="the slider's hidden layers"), batch=OneOf(*[2**k for k in range(5, 11)]),
           largest=OneOf(*_SWEEP_WIDTHS[2:]))
def step_sweep_app(depth: int = 2, batch: int = 256, largest: int = 256) -> LiveApp:
    """Step time against hidden width (32 … ``largest``) on each device here, plus reference GPU results.

    Each sweep is measured once per (depth, batch, dtype, largest width) and kept.  The defaults are
    the reference's settings (depth 2, batch 256), so the GPU's speed-up over this CPU is drawn from
    the start; at other settings the nearest recorded ones are drawn, labelled with their own.
    """
    controls = {
        "depth": _slider("hidden layers", 1, 4, depth),
        "batch": log2_slider(5, 10, batch, "batch size"),
        "dtype": dtype_dropdown(("float32", "float64")),
        "largest": size_slider(_SWEEP_WIDTHS[2:], largest, "largest width"),
    }
    sweeps = MeasurementCache()

    def update(depth, batch, dtype, largest):
        widths = tuple(wd for wd in _SWEEP_WIDTHS if wd <= largest)
        if (depth, batch, dtype, widths) not in sweeps:
            require_affordable(f"The sweep up to width {largest} ({depth} hidden layers, batch {batch}, {dtype})",
                       sum(estimate_s(STEP_CALLS["sweep"] * step_flops([784] + [wd] * depth + [10], batch),
                                      step_rate([784] + [wd] * depth + [10], dtype)) for wd in widths),
                       f"counted FLOPs over each network's step rate measured at batch {_RATE_BATCH}",
                       "Choose a smaller largest width, batch or depth (or float32).")
        rs = sweeps.get((depth, batch, dtype, widths), lambda: step_time_sweep(
            widths=widths, depth=depth, batch=batch, dtype=dtype, repeat=3, budget_s=0.1, progress=progress))
        every = [r for r in load_reference("backprop_train_step") if r.select(dtype=dtype)]
        same = [r for r in every if r.params.get("depth") == depth and r.params.get("batch") == batch]
        near = same or sorted(every, key=lambda r: (abs(r.params.get("depth", 0) - depth),
                                                    abs(math.log2(r.params.get("batch", 1) / batch))))[:1]
        other = "" if same or not near else (f"\n(dashed: recorded at {near[0].params.get('depth')} hidden layers, "
                                             f"batch {near[0].params.get('batch')})")
        fig = sweep_figure(rs, near, x="width", y="median_s", xlabel="hidden width",
                           ylabel="time per training step (s)", where={"dtype": dtype},
                           title=f"The teaching step (a): 784-width×{depth}-10, batch {batch}, {dtype}{other}",
                           speedup_sources=same,
                           speedup_note=None if not near or same else
                           f"The reference GPU was recorded at {near[0].params.get('depth')} hidden layers, batch "
                           f"{near[0].params.get('batch')} only: set those to see its speed-up over this CPU.")
        text = "" if gpu_available() else reference_note("backprop_train_step")
        return fig, text + noise_html(rs.records)

    app = LiveApp(update, controls, title="Training-step time against width: CPU and GPU")
    app.cache = sweeps
    return app


@arguments(depth=Whole(lo=2, hi=32, hint="the slider's hidden layers"), every=Whole(hi=33, hint="the slider's k"),
           width=OneOf(64, 128, 256, 512), batch=OneOf(*[2**k for k in range(5, 10)]))
def checkpoint_app(depth: int = 15, every: int = 4, width: int = 64, batch: int = 64) -> LiveApp:
    """Gradient checkpointing: k moves the vertical line and the kept/recomputed strip."""
    controls = {
        "depth": _slider("hidden layers", 2, 32, depth),
        "every": _slider("k (keep every k-th)", 1, 33, every),
        "width": size_slider([64, 128, 256, 512], width, "width"),
        "batch": log2_slider(5, 9, batch, "batch size"),
    }
    sweeps = MeasurementCache(maxsize=4)
    runs = MeasurementCache(maxsize=64)

    def counted(depth, width, batch, every):   # memory and work are counted, not timed
        model = MLP([784] + [width] * depth + [10])
        return checkpointed_backward(model, *random_batch(model, batch), every)

    def update(depth, every, width, batch):
        if (depth, width, batch) not in sweeps:
            n_ks = len({k for k in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, depth + 1) if k <= depth + 1})
            _require_quick(f"Checkpointing {depth} hidden layers of width {width} at batch {batch} "
                           f"({n_ks} values of k)", [784] + [width] * depth + [10], STEP_CALLS["checkpoint"] * n_ks,
                           batch, "float32", "Choose a smaller width, batch or depth.")
        rs = sweeps.get((depth, width, batch), lambda: checkpoint_sweep(
            depth=depth, width=width, batch=batch, repeat=5, budget_s=0.4, progress=progress))
        L = depth + 1
        clamp = ""
        if every > L:
            clamp = (f"<p><i>k = {every} is more than this network's {L} blocks: showing k = {L} "
                     "(everything kept).</i></p>")
            every = L
        rec = min(rs.records, key=lambda r: abs(r["every"] - every))
        base = min(rs.records, key=lambda r: r["every"])
        run = runs.get((depth, width, batch, every), lambda: counted(depth, width, batch, every))
        plural = "" if run.checkpoints == 1 else "s"
        extra_t = rec["median_s"] / base["median_s"] - 1
        noisy = [r for r in (rec, base) if _iqr_noisy(r)]
        timed = (f"Measured step time at k = {rec['every']}: {rec['median_s'] * 1e3:.3g} ms, "
                 f"{100 * extra_t:+.0f} % against k = {base['every']}")
        if rec["every"] != every:
            timed = (f"k = {every} was not timed (the sweep times k = "
                     f"{', '.join(str(r['every']) for r in sorted(rs.records, key=lambda r: r['every']))}), so the "
                     f"nearest timed value is shown. " + timed)
        if noisy:
            timed += (" (noisy: the runs of " + " and ".join(f"k = {r['every']}" for r in noisy)
                      + " spread more than 25 % around their median, so this difference may be noise; "
                      "the counted work is the reliable number)")
        elif extra_t < 0 < run.extra_compute:
            timed += (" (faster despite the extra work: a difference this small is within what a shared "
                      "machine varies between runs)")
        text = (f"<p>k = {every}: {run.checkpoints} checkpoint{plural} kept through the forward pass, "
                f"{run.recomputed_blocks} block forwards recomputed ({100 * run.extra_compute:.0f} % more "
                f"matrix-product work than plain backprop), peak activation memory "
                f"<b>{run.peak_activation_bytes / 2**20:.2f} MiB</b> against "
                f"{base['peak_activation_bytes'] / 2**20:.2f} MiB with everything kept "
                f"(k = 1). {timed}.</p>")
        return checkpoint_figure(rs, highlight=every, pattern=True), clamp + text

    app = LiveApp(update, controls, title="Gradient checkpointing: memory against recomputation",
                  view_only=("every",))
    app.cache = sweeps
    return app


#: Memories to train in: data-sheet figures, labelled as such.
MEMORIES = {"T4: 16 GB (data sheet)": 16 * 10**9, "A100: 40 GB (data sheet)": 40 * 10**9,
            "H100: 80 GB (data sheet)": 80 * 10**9, "H200: 141 GB (data sheet)": 141 * 10**9}


#: The footprint app's model sizes (its slider).
_FOOTPRINT_SIZES = tuple(sorted([10**k for k in range(6, 13)] + [3 * 10**k for k in range(6, 12)]))


@arguments(n_params=OneOf(*_FOOTPRINT_SIZES), precision=OneOf(*MEMORY_PRECISIONS), optimizer=OneOf(*OPTIMIZERS),
           memory=OneOf(*MEMORIES))
def footprint_app(n_params: int = 10**9, precision: str = "mixed float16", optimizer: str = "adam",
                  memory: str = "H100: 80 GB (data sheet)") -> LiveApp:
    """Bytes of training state (weights, gradients, master copies, optimiser state) for a model size,
    precision and optimiser, against a memory; and the largest model that memory holds.  Nothing is timed."""
    controls = {
        "n_params": widgets.SelectionSlider(options=[(f"{n:.0e}".replace("+", ""), n) for n in _FOOTPRINT_SIZES],
                                            value=n_params, description="parameters"),
        "precision": widgets.Dropdown(options=MEMORY_PRECISIONS, value=precision, description="precision"),
        "optimizer": widgets.Dropdown(options=OPTIMIZERS, value=optimizer, description="optimiser"),
        "memory": widgets.Dropdown(options=list(MEMORIES), value=memory, description="memory"),
    }

    def update(n_params, precision, optimizer, memory):
        mem = MEMORIES[memory]
        per = bytes_per_parameter(precision, optimizer)
        most = largest_model(mem, precision, optimizer)
        text = (f"<p>{precision} with {optimizer}: {per['total']} bytes per parameter ("
                + ", ".join(f"{k} {v}" for k, v in per.items() if k != "total" and v)
                + f"). {memory} holds the training state of at most <b>{most / 1e9:.3g} billion</b> parameters, "
                "before a single activation: the activations, which grow with the batch, need room too.</p>")
        return footprint_figure(n_params, mem, (precision, optimizer), memory), text

    return LiveApp(update, controls, title="What training holds: bytes per parameter, and the largest model that fits")
