"""Lesson 01's figures of training: the digits, a training run, one step's trace, checkpointing's trade, mixed
precision's losses and scales, and the bytes a parameter costs.  The modules they draw (data, train, trace,
checkpointing, mixed, footprint) draw nothing.  What makes the step fast (the ablation, the fast step's ladder and
its rungs' timelines) is drawn by :mod:`~course.backprop.ladder_plots`.

>>> from course.backprop.data import load_digits
>>> digits_figure(load_digits(), 3).axes[0].get_title()
'label 1'
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..arguments import Given, OneOf, Optional, Real, Whole, arguments
from ..devices import to_numpy
from ..errors import BadInputError, whole_number
from ..plots import (
    COLORS,
    PALETTE,
    add_footer,
    footer_text,
    mark_noisy,
    new_figure,
    place_legend,
    series_style,
    set_takeaway,
    tint,
)
from ..results import ResultSet
from .checkpointing import kept_pattern
from .data import Dataset
from .footprint import MEMORY_PRECISIONS, bytes_per_parameter
from .mixed import FLOAT16_MIN_NORMAL, FLOAT16_MIN_SUBNORMAL, underflow_share
from .optimizers import OPTIMIZERS
from .readers import validate_results
from .trace import StepTrace, validate_trace
from .train import History
from .validate import validate_kind, validate_mixed_runs

__all__ = ["digits_figure", "training_figure", "trace_figure", "checkpoint_figure", "mixed_precision_figure",
           "footprint_figure"]


def digits_figure(data: Dataset, n: int = 12, predictions: Any = None) -> Figure:
    """The first ``n`` test images with their labels (and predictions, red where wrong)."""
    n = min(whole_number("n", n, hint="the test images to draw"), len(data.images_test))
    fig = Figure(figsize=(1.0 * n, 1.35), layout="constrained")
    labels = to_numpy(data.y_test)
    preds = None if predictions is None else to_numpy(predictions)
    for i in range(n):
        ax = fig.add_subplot(1, n, i + 1)
        ax.imshow(data.images_test[i], cmap="gray_r", interpolation="nearest")
        ax.set_xticks([])
        ax.set_yticks([])
        title = f"label {labels[i]}"
        wrong = preds is not None and preds[i] != labels[i]
        if preds is not None:
            title += f"\nsaid {preds[i]}" + (" ✗" if wrong else "")   # a mark, not only a colour
        ax.set_title(title, fontsize=9, color=PALETTE["vermillion"] if wrong else "black",
                     fontweight="bold" if wrong else "normal")
    if preds is None:
        set_takeaway(fig, f"The first {n} test images, each with its label.")
    else:
        wrong = int((preds[:n] != labels[:n]).sum())
        set_takeaway(fig, f"The model gets {n - wrong} of these {n} test images right; the {wrong} it gets wrong "
                          "are marked ✗.")
    return fig


@arguments(h=Given(validate_kind, kind=History, name="h", what="a History (what course.backprop.train.train returns)"))
def training_figure(h: History, title: str = "") -> Figure:
    """Loss (train and test) and accuracy (train and test) against epoch, side by side."""
    fig, (ax1, ax2) = new_figure(2, height=3.2)
    ax1.plot(h.epoch, h.train_loss, "o-", ms=3, label="train (mean over the epoch's steps)")
    ax1.plot(h.epoch, h.test_loss, "s--", ms=3, label="test")
    ax1.set_yscale("log")
    ax1.set_xlabel("epoch")
    ax1.set_ylabel("cross-entropy loss")
    place_legend(ax1)
    ax1.grid(True, alpha=0.3)
    ax2.plot(h.epoch, np.asarray(h.train_acc) * 100, "o-", ms=3, label="train")
    ax2.plot(h.epoch, np.asarray(h.test_acc) * 100, "s--", ms=3, label="test")
    ax2.axhline(95, color="0.6", lw=0.8, ls=":")
    ax2.set_xlabel("epoch")
    ax2.set_ylabel("accuracy (%)")
    ax2.set_ylim(min(80.0, 100 * min(h.test_acc + h.train_acc, default=0.8) - 2), 100.5)
    place_legend(ax2, loc="lower right")
    ax2.grid(True, alpha=0.3)
    if h.epoch:
        ax2.set_title(f"test accuracy {100 * h.test_acc[-1]:.1f} % after {h.epoch[-1]} epochs "
                      f"({sum(h.seconds):.2f} s of training)", fontsize=9)
    fig.suptitle(title or h.description, fontsize=10)
    add_footer(fig, devices=[h.device])
    return fig


@arguments(tr=Given(validate_trace), reference=Optional(Given(validate_results, name="reference")))
def trace_figure(tr: StepTrace, title: str = "", reference: ResultSet | None = None) -> Figure:
    """Per-layer forward and backward times (bars), and how the step splits up.

    ``reference``: the result set ``tr`` was rebuilt from when it was recorded on
    another machine; the footer then says so instead of "measured live".
    """
    fig, (ax, ax2) = new_figure(2, width=10, height=0.9 + 0.42 * len(tr.layers))
    names = [r.name for r in tr.layers]
    fw = np.array([r.forward_s for r in tr.layers]) * 1e3
    bw = np.array([r.backward_s for r in tr.layers]) * 1e3
    yy = np.arange(len(names))
    ax.barh(yy - 0.2, fw, 0.4, color=COLORS[tr.device], alpha=0.55, label="forward")
    ax.barh(yy + 0.2, bw, 0.4, color=COLORS[tr.device], label="backward")
    for i in range(len(names)):
        ax.text(max(fw[i], bw[i]), i, f"  ×{bw[i] / fw[i]:.1f}" if fw[i] > 0 else "", va="center", fontsize=9)
    ax.set_yticks(yy, names, fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("time (ms, median)")
    place_legend(ax, loc="lower right")
    ax.set_title("each layer alone (label: backward ÷ forward)", fontsize=9)
    ax.margins(x=0.15)
    parts = [("forward: Linear (products)", sum(f for f, r in zip(fw, tr.layers) if r.kind == "linear")),
             ("forward: activations + loss", sum(f for f, r in zip(fw, tr.layers) if r.kind != "linear")),
             ("backward: Linear (products)", sum(v for v, r in zip(bw, tr.layers) if r.kind == "linear")),
             ("backward: activations + loss", sum(v for v, r in zip(bw, tr.layers) if r.kind != "linear"))]
    ax2.barh(range(4), [p[1] for p in parts], color=[COLORS[tr.device]] * 4,
             alpha=1.0)
    for i, (_, v) in enumerate(parts):
        ax2.text(v, i, f" {v:.3g} ms", va="center", fontsize=9)
    ax2.barh([4.2], [tr.step_s * 1e3], color="0.4")
    ax2.text(tr.step_s * 1e3, 4.2, f" {tr.step_s * 1e3:.3g} ms", va="center", fontsize=9)
    ax2.set_yticks(list(range(4)) + [4.2], [p[0] for p in parts] + ["whole train_step\n(with the SGD update)"],
                   fontsize=9)
    ax2.invert_yaxis()
    ax2.margins(x=0.25)
    ax2.set_xlabel("time (ms)")
    ax2.set_title(f"backward ÷ forward: time {tr.backward_s / max(tr.forward_s, 1e-30):.2f}, "
                  f"FLOPs {tr.flop_ratio:.2f}\n"
                  f"Linear layers: {100 * tr.matmul_share:.1f} % of the time", fontsize=9)
    fig.suptitle(title or f"One training step of {tr.model}, batch {tr.batch}", fontsize=10)
    how = "" if tr.device == "cpu" else "Timed on the GPU with CUDA events."
    if reference is not None and reference.source == "reference":
        footer_text(fig, f"Reference results {reference.label}: NOT measured on this machine. {how}", color="#a40")
    else:
        add_footer(fig, extra=how)
    return fig


_PATTERN_COLORS = {"checkpoint": PALETTE["green"], "last segment": PALETTE["purple"],
                   "recomputed": PALETTE["vermillion"]}


#: A hatch per kind as well, so the pattern reads without telling the colours apart.
_PATTERN_HATCH = {"checkpoint": "", "last segment": "..", "recomputed": "//"}


def _draw_pattern(ax, n_blocks: int, every: int) -> None:
    """One box per block input, coloured by what k = ``every`` does with it."""
    pat = kept_pattern(n_blocks, every)
    for i, p in enumerate(pat):
        ax.add_patch(Rectangle((i, 0), 0.9, 1, fc=_PATTERN_COLORS[p], ec="white", hatch=_PATTERN_HATCH[p]))
    ax.set_xlim(-0.1, n_blocks)
    ax.set_ylim(0, 1)
    ax.set_yticks([])
    ax.set_xticks(np.arange(n_blocks) + 0.45, [str(i) for i in range(n_blocks)], fontsize=9)
    ax.tick_params(length=0)
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    handles = [Rectangle((0, 0), 1, 1, fc=c, ec="white", hatch=_PATTERN_HATCH[k]) for k, c in _PATTERN_COLORS.items()]
    ax.legend(handles, ["kept: checkpoint", "kept: last segment", "dropped, recomputed in backward"],
              ncol=3, fontsize=9, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    ax.set_xlabel(f"block inputs 0..{n_blocks - 1} with k = {every}", fontsize=9)


def _require_checkpoint_records(rs: ResultSet) -> None:
    if not any("every" in r and "blocks" in r for r in rs.records):
        raise BadInputError(f"rs must hold checkpoint_sweep's records (every k, its blocks), got none in {rs.label}")


@arguments(rs=Given(validate_results), highlight=Optional(Whole(hint="the k to mark")), pattern=OneOf(True, False),
           then=_require_checkpoint_records)
def checkpoint_figure(rs: ResultSet, highlight: int | None = None, pattern: bool = False) -> Figure:
    """Peak activation memory and extra compute (counted and timed) against k.

    With ``pattern`` and a ``highlight`` k, a strip on top shows which block inputs
    that k keeps (checkpoints, the last segment) and which it recomputes.
    """
    recs = sorted((r for r in rs.records if "every" in r), key=lambda r: r["every"])
    ks = [r["every"] for r in recs]
    L = recs[0]["blocks"]
    strip = pattern and highlight is not None
    fig = Figure(figsize=(9.0, 4.6 if strip else 3.4), layout="constrained")
    if strip:
        axd = fig.subplot_mosaic([["strip", "strip"], ["mem", "work"]], height_ratios=[1, 4.5])
        _draw_pattern(axd["strip"], L, int(highlight))
    else:
        axd = fig.subplot_mosaic([["mem", "work"]])
    ax, ax2 = axd["mem"], axd["work"]
    mem = np.array([r["peak_activation_bytes"] for r in recs]) / 2**20
    ax.plot(ks, mem, "o-", label="activations held (counted)")
    if all(r.get("traced_peak_bytes") for r in recs):
        what = ("numpy memory the step added, at its peak\n(tracemalloc; the input batch was there before)"
                if recs[0].get("traced_by") != "CuPy memory pool" else "CuPy memory pool in use (sampled at each hold)")
        ax.plot(ks, np.array([r["traced_peak_bytes"] for r in recs]) / 2**20, "s--", ms=4, color="0.5",
                label=what)
    ax.axvline(np.sqrt(L), color="0.6", lw=0.8, ls=":", label=f"k = √L = {np.sqrt(L):.1f}")
    ax.set_xlabel("k (keep every k-th block input)")
    ax.set_ylabel("peak memory (MiB)")
    ax.set_ylim(bottom=0)
    place_legend(ax)
    ax.grid(True, alpha=0.3)
    ax2.plot(ks, [100 * r["extra_compute"] for r in recs], "o-", color=PALETTE["green"],
             label="counted: recomputed FLOPs (% of a plain step)")
    extra = [100 * (r["time_ratio"] - 1) for r in recs]
    ax2.plot(ks, extra, "s--", color="0.25", label="measured: extra time over k = 1 (%)")
    spread = [bool(r.get("noisy")) or (r.get("q75_s", 0) - r.get("q25_s", 0)) > 0.25 * r["median_s"] for r in recs]
    mark_noisy(ax2, ks, extra, [s or spread[0] for s in spread], "0.25")   # a ratio is as noisy as either side
    ax2.axhline(0, color="0.5", lw=0.8)
    ax2.set_xlabel("k")
    ax2.set_ylabel("extra work (%)")
    place_legend(ax2)
    ax2.grid(True, alpha=0.3)
    for a in (ax, ax2):
        if highlight is not None:
            a.axvline(highlight, color="k", lw=1)
    p = rs.params
    fig.suptitle(f"Gradient checkpointing: {p['depth']} hidden layers of {p['width']}, batch {p['batch']} "
                 f"({L} blocks)", fontsize=10)
    add_footer(fig, rs)
    return set_takeaway(fig, _checkpoint_takeaway(recs, L, int(highlight) if strip else None, spread))


def _checkpoint_takeaway(recs: list[dict], L: int, shown: int | None, noisy: list[bool]) -> str:
    """The checkpointing figure's sentence: the k that holds the least, what it saves and costs, and the strip's k."""
    i = min(range(len(recs)), key=lambda j: (recs[j]["peak_activation_bytes"], recs[j]["every"]))
    best, first = recs[i], recs[0]
    text = (f"Of the k timed, k = {best['every']} (√L = {np.sqrt(L):.1f}) holds the least activation memory, "
            f"{best['peak_activation_bytes'] / 2**20:.3g} MiB against {first['peak_activation_bytes'] / 2**20:.3g} MiB "
            f"with every block input kept (k = {first['every']}), for {100 * best['extra_compute']:.0f} % more "
            f"matrix-product work (counted) and {100 * (best['time_ratio'] - 1):+.0f} % step time (measured"
            + (", noisy" if noisy[i] or noisy[0] else "") + ").")
    if shown is not None:
        pat = kept_pattern(L, shown)
        text += (f" The strip shows k = {shown}: {pat.count('checkpoint')} block inputs kept as checkpoints, "
                 f"{pat.count('last segment')} kept in the last segment, {pat.count('recomputed')} recomputed.")
    return text


def _power_of_two(v: float) -> str:
    e = np.log2(v)
    return f"2^{int(e)}" if v > 0 and e == int(e) else f"{v:g}"


@arguments(runs=Given(validate_mixed_runs), loss_weight=Real(above=0, hint="the weight the loss was multiplied by"))
def mixed_precision_figure(runs: dict[str, dict], loss_weight: float = 1.0) -> Figure:
    """Three panels from :func:`~course.backprop.mixed.mixed_precision_train` runs (name -> run): each
    precision's loss against the step (every 10 steps averaged); the loss scale of the scaled run, its
    skipped steps marked; and where the float32 run's last probed gradients lie against float16's range,
    as they are and multiplied by the scaled run's last scale."""
    fig, (ax1, ax2, ax3) = new_figure(3, width=12, height=3.4)
    for i, (name, run) in enumerate(runs.items()):
        losses = np.asarray(run["losses"], dtype=float)
        k = max(1, len(losses) // 60)
        smooth = losses[: len(losses) // k * k].reshape(-1, k).mean(axis=1)
        ax1.plot(np.arange(len(smooth)) * k, smooth, label=f"{name}: ends at {np.mean(losses[-2 * k:]):.3g}",
                 markevery=max(1, len(smooth) // 8), **series_style(i))
    ax1.set(yscale="log", xlabel="step", ylabel="training loss")
    ax1.set_title("loss" + (f", the loss weighted by {_power_of_two(loss_weight)}" if loss_weight != 1 else ""),
                  fontsize=9)
    place_legend(ax1)
    scaled = next((r for n, r in runs.items() if "scaled" in n), None)
    if scaled is not None:
        ax2.plot(scaled["scales"], color=PALETTE["blue"])
        for s in scaled["skipped_steps"]:
            ax2.axvline(s, color=PALETTE["vermillion"], lw=0.8, ls=":")
        ax2.set(yscale="log", xlabel="step", ylabel="loss scale")
        ax2.set_title(f"dynamic scale: {scaled['skipped']} step(s) skipped (dotted lines)", fontsize=9)
    ref = runs.get("float32")
    probes = ref["probes"] if ref is not None else []
    if probes:
        g = np.abs(np.concatenate(probes[-1]))
        g = np.log2(g[g > 0])
        shift = np.log2(scaled["scales"][-1]) if scaled is not None else 0.0
        ax3.hist(g, bins=50, color=COLORS["cpu"], alpha=0.7, label="as they are")
        if shift:
            ax3.hist(g + shift, bins=50, histtype="step", color=PALETTE["green"], lw=1.5,
                     label=f"× the loss scale 2^{shift:.0f}")
        ax3.axvspan(ax3.get_xlim()[0], np.log2(FLOAT16_MIN_SUBNORMAL / 2), color="0.85", zorder=0,
                    label="float16 rounds to 0")
        ax3.axvspan(np.log2(FLOAT16_MIN_SUBNORMAL / 2), np.log2(FLOAT16_MIN_NORMAL), color="0.93", zorder=0,
                    label="float16 subnormal")
        if ax3.get_xlim()[1] > 16:
            ax3.axvspan(16, ax3.get_xlim()[1], color=tint("vermillion"), zorder=0, label="float16 overflows (inf)")
        lost, kept = underflow_share(probes[-1]), underflow_share(probes[-1], 2.0 ** shift)
        ax3.set(xlabel="log2 |gradient value| (float32 run, last probe)", ylabel="values")
        ax3.set_title(f"float16 flushes {100 * lost['zero']:.0f} % to zero; scaled, {100 * kept['zero']:.0f} %",
                      fontsize=9)
        place_legend(ax3)
        set_takeaway(fig, f"Without loss scaling float16 rounds {100 * lost['zero']:.0f} % of these gradient values "
                          f"to zero ({100 * kept['zero']:.0f} % once scaled); the runs end at losses of "
                          + ", ".join(f"{n} {np.mean(r['losses'][-20:]):.3g}" for n, r in runs.items()) + ".")
    add_footer(fig, devices=["cpu"], extra="float16 and bfloat16 arithmetic emulated by NumPy on the CPU: "
                                           "their times here say nothing about a GPU's tensor cores")
    return fig


def validate_highlight(highlight: Any) -> tuple[str, str]:
    """``highlight`` if it is one (precision, optimiser) pair the figure draws, else a clear error."""
    pairs = [(p, o) for p in MEMORY_PRECISIONS for o in OPTIMIZERS]
    if not isinstance(highlight, tuple) or highlight not in pairs:
        raise BadInputError(f"highlight must be a (precision, optimiser) pair such as {pairs[0]}, got "
                            f"{highlight!r:.60}")
    return highlight


@arguments(n_params=Whole(hint="the model's parameters"), memory_bytes=Optional(Whole(hint="bytes of a memory")),
           highlight=Optional(Given(validate_highlight)))
def footprint_figure(n_params: int, memory_bytes: int | None = None, highlight: tuple[str, str] | None = None,
                     memory_label: str = "") -> Figure:
    """The bytes of training state of a model of ``n_params`` parameters, for every precision and optimiser,
    stacked by part (weights, gradients, float32 master copies, optimiser state), against ``memory_bytes``."""
    combos = [(p, o) for p in MEMORY_PRECISIONS for o in OPTIMIZERS]
    fig, (ax,) = new_figure(1, width=9, height=3.6)
    parts = ("weights", "gradients", "master", "optimizer")
    left = np.zeros(len(combos))
    for i, part in enumerate(parts):
        widths = np.array([bytes_per_parameter(p, o)[part] * n_params / 1e9 for p, o in combos])
        ax.barh(range(len(combos)), widths, left=left, color=PALETTE[("blue", "sky blue", "orange", "green")[i]],
                label={"master": "float32 master copy", "optimizer": "optimiser state"}.get(part, part))
        left += widths
    labels = [f"{p}, {o}" + ("  ◀" if highlight == (p, o) else "") for p, o in combos]
    ax.set_yticks(range(len(combos)), labels, fontsize=9)
    ax.invert_yaxis()
    for i, (p, o) in enumerate(combos):
        ax.text(left[i], i, f" {bytes_per_parameter(p, o)['total']} B/param", va="center", fontsize=9)
    if memory_bytes:
        ax.axvline(memory_bytes / 1e9, color=PALETTE["vermillion"], ls="--", lw=1.2,
                   label=memory_label or f"{memory_bytes / 1e9:g} GB")
    ax.set_xlabel(f"GB for {n_params:,} parameters (activations not included)")
    ax.margins(x=0.2)
    place_legend(ax)
    if highlight is not None:
        total = bytes_per_parameter(*highlight)["total"] * n_params
        fits = "" if not memory_bytes else ("; that fits in" if total <= memory_bytes else "; that does not fit in") \
            + f" {memory_label or f'{memory_bytes / 1e9:g} GB'}"
        set_takeaway(fig, f"{n_params:,} parameters trained in {highlight[0]} with {highlight[1]} hold "
                          f"{total / 1e9:.3g} GB of weights, gradients and optimiser state{fits}.")
    add_footer(fig, measured=False, devices=["cpu"])
    return fig
