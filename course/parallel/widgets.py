"""Lesson 06's interactive apps (ipywidgets 7.7 and 8).

* :func:`ring_app`: p workers, N elements, naive / tree / ring, and a step slider with a play button:
  which chunk each worker sends, receives and adds, with the bytes counted and checked against the sum;
* :func:`model_app`: the α–β model fitted to this machine's MPI timings, extrapolated to many workers
  for a message size you choose (a model, labelled as one; nothing is re-measured);
* :func:`pipeline_app`: the measured GPipe timelines, one per micro-batch count m, against the ideal
  schedule and the bubble formula (redrawn from the recorded runs, never re-measured);
* :func:`tensor_parallel_app`: tensor against data parallelism over ranks, hidden width and batch: the
  bytes each rank sends per step (counted), and with a fitted α–β model the time they would take;
* :func:`zero_app`: ZeRO over ranks, model size and stage: model-state bytes per rank, bytes sent per step,
  and with a fitted α–β model and a measured compute rate, where the step turns communication-bound.

>>> app = ring_app()
>>> app.last_error is None and app.image.value[:4] == b"\\x89PNG"
True
"""

from __future__ import annotations

from functools import lru_cache

import ipywidgets as widgets
import numpy as np

from ..arguments import Given, OneOf, Optional, Real, Whole, arguments
from ..errors import BadInputError
from ..results import ResultSet, validate_results
from ..widgets import LiveApp, size_slider
from .collectives import ALGORITHMS, AllreduceRun, allreduce, bytes_per_worker
from .model import AlphaBeta, validate_fit
from .pipeline import bubble_fraction, ideal_timeline
from .plots import model_figure, pipeline_figure, ring_step_figure, tensor_parallel_bytes_figure, zero_model_figure
from .tensor_parallel import communication_model_s, data_parallel_bytes, tensor_parallel_bytes
from .timing import fit_alpha_beta
from .zero import layer_lengths
from .zero_costs import zero_bytes_per_rank, zero_bytes_sent, zero_step_model

__all__ = ["ring_app", "model_app", "pipeline_app", "tensor_parallel_app", "zero_app"]


def _simulate_inputs(p: int, n: int) -> np.ndarray:
    """Small whole numbers (easy to add up by eye), the same for the same p and N."""
    return np.random.default_rng(p * 1000 + n).integers(0, 10, (p, n)).astype(np.float64)


@lru_cache(maxsize=64)
def _simulate(p: int, n: int, algorithm: str) -> AllreduceRun:
    return allreduce(_simulate_inputs(p, n), algorithm)


@arguments(p=Whole(2, 8, hint="the slider's workers"), n=Whole(1, 40, hint="the slider's vector length N"),
           algorithm=OneOf(*ALGORITHMS))
def ring_app(p: int = 4, n: int = 10, algorithm: str = "ring") -> LiveApp:
    """Step through an all-reduce on p simulated workers (p from 2 to 8, N from 1 to 40)."""
    p_slider = widgets.IntSlider(value=p, min=2, max=8, description="workers p", continuous_update=False)
    n_slider = widgets.IntSlider(value=n, min=1, max=40, description="N", continuous_update=False)
    alg = widgets.Dropdown(options=list(ALGORITHMS), value=algorithm, description="algorithm")
    last = len(_simulate(p, n, algorithm).steps)
    step = widgets.IntSlider(value=0, min=0, max=last, description="step", continuous_update=False)
    play = widgets.Play(value=0, min=0, max=last, interval=1000, description="play")
    widgets.jslink((play, "value"), (step, "value"))

    def resize(_change):          # registered before the app's observers, so it runs first
        top = len(_simulate(p_slider.value, n_slider.value, alg.value).steps)
        step.max = play.max = top
        step.value = min(step.value, top)

    for w in (p_slider, n_slider, alg):
        w.observe(resize, names="value")

    def update(p: int, n: int, algorithm: str, step: int):
        run = _simulate(p, n, algorithm)
        fig = ring_step_figure(run, step)
        ok = np.allclose(run.result, run.result[0][None]) and np.allclose(
            run.result[0], _simulate_inputs(p, n).sum(0))
        sent = run.bytes_sent()
        formula = bytes_per_worker(algorithm, n, p, 8)
        text = (f"{algorithm}, p = {p}, N = {n} float64: {len(run.steps)} steps. Bytes sent per worker "
                f"(counted): {', '.join(f'{int(b)}' for b in sent)}; busiest {int(sent.max())}, formula "
                f"{formula:g}. Every worker ends with the sum: <b>{'yes' if ok else 'NO'}</b>.")
        return fig, text

    app = LiveApp(update, {"p": p_slider, "n": n_slider, "algorithm": alg, "step": step},
                  title="All-reduce on p simulated workers, one step at a time")
    app.add_player(play, "press play to step through")
    return app


@arguments(rs=Given(validate_results, what="rs"), p_max=Whole(2, 2**20, hint="the most workers the model is drawn to"))
def model_app(rs: ResultSet, p_max: int = 1024) -> LiveApp:
    """The α–β model fitted to ``rs`` (from :func:`course.parallel.timing.allreduce_sweep`), for a
    message size on a slider, extrapolated to ``p_max`` workers."""
    fit = fit_alpha_beta(rs)
    sizes = [2**k for k in range(16, 31, 2)]
    size = size_slider(sizes, 2**22, "message (bytes)")

    def update(nbytes: int):
        fig = model_figure(fit, float(nbytes), p_max, measured=rs)
        ring8, naive8 = fit.predict("ring", 8, nbytes), fit.predict("naive", 8, nbytes)
        text = (f"Fitted here: {fit}. Model for {nbytes:,} bytes on 8 workers: ring {ring8 * 1e3:.3g} ms, "
                f"naive {naive8 * 1e3:.3g} ms; on {p_max:,}: ring {fit.predict('ring', p_max, nbytes) * 1e3:.3g} ms, "
                f"naive {fit.predict('naive', p_max, nbytes) * 1e3:.3g} ms (model, not measured).")
        return fig, text

    return LiveApp(update, {"nbytes": size}, title="The α–β model, extrapolated")


@arguments(rs=Given(validate_results, what="rs"))
def pipeline_app(rs: ResultSet) -> LiveApp:
    """The recorded GPipe timelines of ``rs`` (from :func:`course.parallel.timing.pipeline_runs`):
    a slider over m, and the ideal schedule beside the measured one."""
    ms = sorted({r["m"] for r in rs.records})
    if not ms:
        raise BadInputError("the result set holds no pipeline runs: run course.parallel.pipeline_runs first.")
    p = rs.params["p"]
    m_slider = widgets.SelectionSlider(options=ms, value=ms[len(ms) // 2], description="micro-batches m",
                                       continuous_update=False, style={"description_width": "initial"})
    view = widgets.ToggleButtons(options=["measured", "ideal"], value="measured", description="timeline")

    def update(m: int, view: str):
        rec = rs.select(m=m)[0]
        formula = bubble_fraction(p, m)
        if view == "measured":
            fig = pipeline_figure(rec["events"], p, m, measured=rs,
                                  title=f"GPipe on {p} MPI ranks, m = {m}: measured bubble "
                                        f"{rec['bubble_measured']:.0%}, formula {formula:.0%}")
        else:
            fig = pipeline_figure(ideal_timeline(p, m), p, m,
                                  title=f"Ideal GPipe schedule, p = {p}, m = {m}: bubble {formula:.0%}")
        text = (f"m = {m}: bubble from the formula (p-1)/(m+p-1) = {formula:.3f}; measured from the "
                f"recorded intervals = {rec['bubble_measured']:.3f}. Gradients against unsplit training: "
                f"largest difference {rec['max_abs_diff']:.1e}.")
        return fig, text

    return LiveApp(update, {"m": m_slider, "view": view}, title="A GPipe pipeline, micro-batch by micro-batch")


TP_RANKS = [2, 3, 4, 8, 16, 32, 64]
TP_WIDTHS = [2**k for k in range(6, 18)]
TP_BATCHES = [2**k for k in range(3, 13)]


@arguments(fit=Optional(Given(validate_fit)), d_in=Whole(hi=2**16, hint="the block's input and output width"),
           p=OneOf(*TP_RANKS), hidden=OneOf(*TP_WIDTHS), batch=OneOf(*TP_BATCHES))
def tensor_parallel_app(fit: AlphaBeta | None = None, d_in: int = 256, p: int = 4, hidden: int = 1024,
                        batch: int = 64) -> LiveApp:
    """Tensor against data parallelism for the block ``[d_in, hidden, d_in]``: sliders over the ranks p,
    the hidden width and the batch; bytes per rank per step (counted), and with ``fit`` (from
    :func:`course.parallel.timing.fit_alpha_beta`) the α–β model's time of those all-reduces."""
    p_slider = widgets.SelectionSlider(options=TP_RANKS, value=p, description="ranks p", continuous_update=False)
    width = size_slider(TP_WIDTHS, hidden, "hidden width")
    batches = size_slider(TP_BATCHES, batch, "batch")

    def update(p: int, hidden: int, batch: int):
        if hidden < p:
            raise BadInputError(f"a hidden width of {hidden} cannot be split over p = {p} ranks: pick a wider "
                                f"layer or fewer ranks.")
        sizes = [d_in, hidden, d_in]
        tp, dp = tensor_parallel_bytes(sizes, batch, p), data_parallel_bytes(sizes, p)
        even = (2 * batch * d_in - d_in) / (2 * d_in + 1)      # the width where both send the same
        fig = tensor_parallel_bytes_figure(p, hidden, batch, d_in, fit=fit)
        text = (f"Block {d_in}-{hidden}-{d_in}, batch {batch}, p = {p}, float64: tensor parallel sends "
                f"{tp / 1e6:.3g} MB per rank per step (two all-reduces of activations), data parallel "
                f"{dp / 1e6:.3g} MB (one all-reduce of every gradient): data / tensor = {dp / tp:.3g}×. "
                f"Below a hidden width of about {even:,.0f} data parallelism sends less.")
        if fit is not None:
            tp_s, dp_s = (communication_model_s(k, sizes, batch, p, fit.alpha, fit.beta) for k in ("tensor", "data"))
            text += (f" The α–β model fitted here predicts {tp_s * 1e3:.3g} ms (tensor) and {dp_s * 1e3:.3g} ms "
                     f"(data) of all-reduces per step: a model, not a measurement.")
        return fig, text

    return LiveApp(update, {"p": p_slider, "hidden": width, "batch": batches},
                   title="Tensor or data parallelism: what each rank sends per step")


ZERO_RANKS = [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
ZERO_WIDTHS = [2**k for k in range(7, 16)]
ZERO_BATCHES = [2**k for k in range(6, 15)]


@arguments(fit=Optional(Given(validate_fit)),
           flops_per_s=Optional(Real(above=0, hint="an arithmetic rate measured here")),
           depth=Whole(hi=64, hint="square layers in the MLP"), width=OneOf(*ZERO_WIDTHS), p=OneOf(*ZERO_RANKS),
           stage=OneOf(0, 1, 2, 3), batch=OneOf(*ZERO_BATCHES))

def zero_app(fit: AlphaBeta | None = None, flops_per_s: float | None = None, depth: int = 4, width: int = 4096,
             p: int = 64, stage: int = 3, batch: int = 1024) -> LiveApp:
    """ZeRO for an MLP of ``depth`` square layers: sliders over the ranks p, the width (the model's size), the
    stage and the batch; bytes per rank and bytes sent per step (formulas, float64 + Adam), and with ``fit``
    (:func:`course.parallel.timing.fit_alpha_beta`) and ``flops_per_s`` (a rate measured here) the α–β model's
    compute and collectives per step, and the p from which the collectives take longer."""
    p_slider = widgets.SelectionSlider(options=ZERO_RANKS, value=p, description="ranks p", continuous_update=False)
    width_slider = size_slider(ZERO_WIDTHS, width, "layer width")
    stage_pick = widgets.Dropdown(options=[("0: data parallel", 0), ("1: Adam's moments", 1), ("2: + gradients", 2),
                                           ("3: + parameters (FSDP)", 3)], value=stage, description="ZeRO stage")
    batches = size_slider(ZERO_BATCHES, batch, "batch")

    def update(p: int, width: int, stage: int, batch: int):
        sizes = [width] * (depth + 1)
        psi = sum(layer_lengths(sizes))
        held, plain = zero_bytes_per_rank(stage, psi, p), zero_bytes_per_rank(0, psi, p)
        sent, dp = zero_bytes_sent(stage, sizes, p), zero_bytes_sent(0, sizes, p)
        text = (f"{depth} layers of width {width:,}: Ψ = {psi / 1e6:,.4g} M parameters. Stage {stage} on p = {p} ranks "
                f"keeps {held / 1e9:.3g} GB of model states per rank (data parallelism: {plain / 1e9:.3g} GB, "
                f"{plain / held:.3g}× as much) and sends {sent / 1e6:,.4g} MB per rank per step "
                f"({sent / dp:.3g}× data parallelism's). Formulas, float64 + Adam.")
        if fit is not None and flops_per_s is not None:
            m = zero_step_model(stage, sizes, batch, p, fit.alpha, fit.beta, flops_per_s)
            turn = next((q for q in ZERO_RANKS if zero_step_model(stage, sizes, batch, q, fit.alpha, fit.beta,
                                                                   flops_per_s)["bound"] == "communication"), None)
            text += (f" The α–β model (α and β as fitted, compute at {flops_per_s / 1e9:.3g} GFLOP/s) gives "
                     f"{m['compute_s'] * 1e3:.3g} ms of compute and {m['communication_s'] * 1e3:.3g} ms of collectives "
                     f"per step: {m['bound']}-bound; "
                     + (f"from p = {turn} the collectives take longer (batch {batch})." if turn else
                        f"compute-bound up to p = {ZERO_RANKS[-1]} (batch {batch}).") + " A model, not a measurement.")
        return zero_model_figure(sizes, batch, stage, p, fit, flops_per_s), text

    return LiveApp(update, {"p": p_slider, "width": width_slider, "stage": stage_pick, "batch": batches},
                   title="ZeRO: memory per rank, bytes per step, and when the step turns communication-bound")
