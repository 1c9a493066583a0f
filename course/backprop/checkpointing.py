"""Gradient checkpointing: keep every k-th activation, recompute the rest in the backward pass.

Backpropagation needs, for every layer, the values its forward pass produced,
so plain backprop keeps all of them alive until the backward pass reaches that
layer: activation memory grows with depth.  Checkpointing keeps only the input
of every k-th block (a *checkpoint*), drops the rest, and when the backward
pass reaches a segment it runs that segment's forward again from its
checkpoint.  The last segment is kept from the forward pass (the backward pass
starts there at once), as ``torch.utils.checkpoint.checkpoint_sequential`` does.

With ``L`` blocks the peak is about ``L / k`` checkpoints plus one segment of
``k`` activations, smallest near ``k = sqrt(L)``; the price is up to one extra
forward pass.  :func:`checkpointed_backward` computes exactly the gradients of
plain backprop (a test checks it) and reports what it held and recomputed.

>>> import numpy as np
>>> from course.backprop import MLP
>>> from course.backprop.trace import random_batch
>>> m = MLP([16] + [32] * 8 + [4])
>>> x, y = random_batch(m, 8)
>>> full = checkpointed_backward(m, x, y, every=1)
>>> sqrt = checkpointed_backward(m, x, y, every=3)
>>> sqrt.peak_activation_bytes < full.peak_activation_bytes, sqrt.recomputed_blocks
(True, 4)
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..devices import normalize_device, synchronize
from ..errors import whole_number
from ..plots import PALETTE, place_legend
from ..results import ResultSet
from ..timing import interleaved_rounds
from .layers import MLP, Linear, softmax_cross_entropy, softmax_cross_entropy_backward
from .validate import check_inputs

__all__ = ["CheckpointRun", "PoolPeak", "checkpointed_backward", "kept_pattern", "checkpoint_sweep",
           "checkpoint_figure"]


@dataclass
class CheckpointRun:
    """What one checkpointed forward + backward held and recomputed."""

    every: int
    blocks: int
    loss: float
    peak_activation_bytes: int      # forward values alive at once, at the worst moment
    checkpoints: int                # block inputs kept through the forward pass
    recomputed_blocks: int          # block forwards run a second time
    step_flops: float               # matrix-product FLOPs of one plain forward + backward
    recompute_flops: float
    device_peak_bytes: int | None = None   # GPU: most CuPy pool bytes in use at any allocation of the step
    events: list = field(default_factory=list, repr=False)   # ("hold"/"drop", index, bytes)

    @property
    def extra_compute(self) -> float:
        """Recomputed FLOPs as a share of a plain step's (forward + backward) matrix products."""
        return self.recompute_flops / self.step_flops


def _blocks(model: MLP) -> list[tuple[Linear, Any]]:
    """Block b = (Linear b, its activation or None for the last)."""
    out, layers = [], model.layers
    for i in range(0, len(layers), 2):
        out.append((layers[i], layers[i + 1] if i + 1 < len(layers) else None))
    return out


#: The most blocks :func:`kept_pattern` lists (it labels a picture, one entry per block).
KEPT_PATTERN_MAX_BLOCKS = 100_000


def kept_pattern(n_blocks: int, every: int) -> list[str]:
    """For each block input 0..n_blocks-1: "checkpoint", "last segment" or "recomputed".

    >>> kept_pattern(5, 2)
    ['checkpoint', 'recomputed', 'checkpoint', 'recomputed', 'checkpoint']
    """
    n_blocks = whole_number("n_blocks", n_blocks, hi=KEPT_PATTERN_MAX_BLOCKS, hint="the blocks (layers) of a network")
    every = whole_number("every", every, hint="a checkpoint every k blocks, k >= 1")
    last = ((n_blocks - 1) // every) * every
    return ["checkpoint" if i % every == 0 else "last segment" if i >= last else "recomputed"
            for i in range(n_blocks)]


def checkpointed_backward(model: MLP, x: Any, y: Any, every: int) -> CheckpointRun:
    """Forward, loss and backward of ``model`` on ``(x, y)`` with a checkpoint every ``every`` blocks.

    Fills the model's gradients (equal to plain backprop's) and leaves the weights
    unchanged.  ``every=1`` keeps everything: plain backprop.
    """
    every = whole_number("every", every, hint="a checkpoint every k blocks, k >= 1")
    x, y = check_inputs(model, x, y)
    pool = model.xp.get_default_memory_pool() if model.device == "gpu" else None
    # the input batch is already in the pool; it is counted, as peak_activation_bytes counts it
    pool_base = pool.used_bytes() - int(x.nbytes) if pool is not None else 0
    with PoolPeak(pool, pool_base) as watch:
        run = _checkpointed(model, x, y, int(every), pool, pool_base)
    if pool is not None:
        run.device_peak_bytes = max(run.device_peak_bytes or 0, watch.peak)
    return run


class PoolPeak:
    """Inside ``with PoolPeak(pool, base) as w``: ``w.peak`` is the most bytes CuPy's pool had in use
    (above ``base``) right after any allocation, the backward pass's temporaries included.

    A CuPy memory hook samples the pool after every allocation; sampling only when an
    activation is kept would miss the gradients and scratch arrays the backward allocates
    between two such moments.  With ``pool=None`` (the CPU) it does nothing.
    """

    def __init__(self, pool: Any, base: int = 0) -> None:
        self.pool, self.base, self.peak, self._hook = pool, int(base), 0, None

    def __enter__(self) -> PoolPeak:
        if self.pool is not None:
            from cupy.cuda import memory_hook

            watch = self

            class _Hook(memory_hook.MemoryHook):
                name = "course_pool_peak"

                def malloc_postprocess(self, **kwargs: Any) -> None:
                    watch.peak = max(watch.peak, watch.pool.used_bytes() - watch.base)

            self._hook = _Hook()
            self._hook.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._hook is not None:
            self._hook.__exit__(*exc)
            self._hook = None


def _checkpointed(model: MLP, x, y, k: int, pool: Any, pool_base: int) -> CheckpointRun:
    blocks = _blocks(model)
    L = len(blocks)
    pattern = kept_pattern(L, k)
    held: dict[int, Any] = {}
    live = {"now": 0, "peak": 0, "pool_peak": 0}
    events: list = []

    def hold(i: int, a) -> None:
        held[i] = a
        live["now"] += int(a.nbytes)
        live["peak"] = max(live["peak"], live["now"])
        if pool is not None:                     # what the GPU really has in use, at this moment
            live["pool_peak"] = max(live["pool_peak"], pool.used_bytes() - pool_base)
        events.append(("hold", i, int(a.nbytes)))

    def drop(i: int) -> None:
        a = held.pop(i)
        live["now"] -= int(a.nbytes)
        events.append(("drop", i, int(a.nbytes)))

    def block_forward(b: int, h):
        lin, act = blocks[b]
        z, _ = lin.forward(h)
        return z if act is None else act.forward(z)[0]

    flops = [2.0 * x.shape[0] * lin.n_in * lin.n_out for lin, _ in blocks]
    hold(0, x)
    for b in range(L):                           # forward: keep checkpoints and the last segment
        out = block_forward(b, held[b])
        hold(b + 1, out)
        if b > 0 and pattern[b] == "recomputed":
            drop(b)                              # block b's input is not kept
    loss, cache = softmax_cross_entropy(held[L], y)
    drop(L)                                      # the logits are not needed by the backward pass
    g = softmax_cross_entropy_backward(cache)
    recomputed, re_flops = 0, 0.0
    for start in reversed(range(0, L, k)):
        end = min(start + k, L)
        for b in range(start, end - 1):          # rebuild this segment's dropped inputs
            if b + 1 not in held:
                hold(b + 1, block_forward(b, held[b]))
                recomputed += 1
                re_flops += flops[b]
        for b in range(end - 1, start - 1, -1):  # then backprop through it
            lin, act = blocks[b]
            if act is not None:
                g = act.backward(g, (held[b + 1],))
                drop(b + 1)
            g = lin.backward(g, (held[b],), need_dx=b > 0)
    drop(0)
    return CheckpointRun(every=k, blocks=L, loss=float(loss), peak_activation_bytes=live["peak"],
                         checkpoints=sum(p == "checkpoint" for p in pattern), recomputed_blocks=recomputed,
                         step_flops=3 * sum(flops) - flops[0], recompute_flops=re_flops, events=events,
                         device_peak_bytes=live["pool_peak"] if pool is not None else None)


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


def _traced_peak(fn: Callable[[], Any]) -> int:
    """Peak bytes numpy allocated while ``fn`` ran (tracemalloc sees numpy's buffers)."""
    was = tracemalloc.is_tracing()
    if not was:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    fn()
    peak = tracemalloc.get_traced_memory()[1] - base
    if not was:
        tracemalloc.stop()
    return int(peak)


def checkpoint_sweep(depth: int = 16, width: int = 256, batch: int = 128, ks: Sequence[int] | None = None,
                     device: Any = "cpu", dtype: Any = "float32", repeat: int = 5, budget_s: float | None = 2.0,
                     progress: Callable | None = None) -> ResultSet:
    """Peak activation memory, recomputed work and measured step time for each k.

    ``depth`` hidden layers of ``width`` units, input 784 and 10 classes.  On the
    CPU the peak of all memory numpy allocated during the step (tracemalloc) is
    recorded too, as a cross-check of the activation count.
    """
    from .trace import random_batch

    dev = normalize_device(device)
    depth = whole_number("depth", depth, hint="the hidden layers of the network")
    width = whole_number("width", width, hint="the units of each hidden layer")
    model = MLP([784] + [width] * depth + [10], dtype=dtype, device=dev)
    L = depth + 1
    ks = sorted(set(int(k) for k in (ks or [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, L]) if 1 <= int(k) <= L))
    x, y = random_batch(model, batch)
    rs = ResultSet("backprop_checkpointing", params={"depth": depth, "width": width, "batch": batch,
                                                     "blocks": L, "dtype": str(dtype), "ks": ks})
    runs = {k: checkpointed_backward(model, x, y, k) for k in ks}     # also the warm-up
    # Time the values of k in turns (k1, k2, ..., then again), so a slow moment of a
    # shared machine hits them all alike; the median over the rounds is kept per k.
    t = interleaved_rounds({k: partial(checkpointed_backward, model, x, y, k) for k in ks}, dev, warmup=0,
                           repeat=max(int(repeat), 3), min_rounds=3, budget_s=budget_s, progress=progress,
                           desc="checkpointing")
    if t[ks[0]].stopped_early:
        rs.notes.append(f"timing stopped after {t[ks[0]].repeat} rounds by the {budget_s} s budget")
    synchronize(dev)
    base = t[ks[0]].median
    for k in ks:
        run = runs[k]
        traced = (_traced_peak(lambda k=k: checkpointed_backward(model, x, y, k)) if dev == "cpu"
                  else run.device_peak_bytes)
        rs.add_timing(t[k], every=k, blocks=L, peak_activation_bytes=run.peak_activation_bytes,
                      checkpoints=run.checkpoints, recomputed_blocks=run.recomputed_blocks,
                      extra_compute=run.extra_compute, traced_peak_bytes=traced, time_ratio=t[k].median / base,
                      traced_by="tracemalloc" if dev == "cpu" else "CuPy memory pool")
    return rs


def checkpoint_figure(rs: ResultSet, highlight: int | None = None, pattern: bool = False) -> Figure:
    """Peak activation memory and extra compute (counted and timed) against k.

    With ``pattern`` and a ``highlight`` k, a strip on top shows which block inputs
    that k keeps (checkpoints, the last segment) and which it recomputes.
    """
    from ..plots import add_footer

    recs = sorted(rs.records, key=lambda r: r["every"])
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
        what = ("all new numpy memory during the step (tracemalloc;\nthe input batch was allocated before)"
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
    ax2.plot(ks, [100 * (r["time_ratio"] - 1) for r in recs], "s--", color="0.25",
             label="measured: extra time over k = 1 (%)")
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
    return fig

