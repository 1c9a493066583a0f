"""The interactive apps of lesson 08 (ipywidgets 7.7 and 8).

* :func:`stepper_app`: one row of scores read block by block: the running max and sum, and how the old sum
  is rescaled when the max grows (computed, not timed);
* :func:`tree_app`: the same states combined by lesson 04's Blelloch tree, level by level;
* :func:`traffic_app`: sequence length × head size × the NumPy pass's tile × on-chip memory → the bytes each
  algorithm moves (counted), the memory each holds (counted), and the time of the naive and tiled passes on this CPU
  (measured, cached by size; a size estimated over 10 s is not timed, with the estimate).

>>> app = stepper_app()
>>> app.last_error is None and app.image.value[:4] == b"\\x89PNG"
True
"""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np

from ..arguments import OneOf, Seed, Whole, arguments
from ..errors import BadInputError
from ..timing import noisy_note
from ..widgets import WIDGET_LIMIT_S, LiveApp, MeasurementCache, escape, estimate_s, log2_slider, measured_rate
from .forward import memory_held
from .plots import MAX_TREE, WALK_TILES, scan_tree_figure, stepper_figure, traffic_figure
from .timing import attention_flops, attention_function, attention_input, time_attention
from .traffic import (
    TRAFFIC_ALGORITHMS,
    count_traffic,
    paper_blocks,
    tile_traffic,
    tiles_walked,
    traffic_bound,
    traffic_formula,
)

__all__ = ["stepper_app", "tree_app", "traffic_app", "PATTERNS", "SRAM_CHOICES", "TILE_CHOICES", "attention_cost_s",
           "step_scores"]

#: Rows of scores the stepper offers.
PATTERNS = ("random", "rising", "a spike late", "large (near 1000)")
#: On-chip memories offered, in float32 numbers, with where each figure comes from (data sheets).
SRAM_CHOICES = (("48 KiB: shared memory one block may take by default", 12_288),
                ("64 KiB: shared memory of an SM on Colab's T4 (data sheet)", 16_384),
                ("164 KiB: shared memory of an SM on an A100 (data sheet)", 41_984),
                ("228 KiB: shared memory of an SM on an H100 (data sheet)", 58_368))
#: Tile sizes offered for the course's NumPy pass (query rows = keys per tile).
TILE_CHOICES = (16, 32, 64, 128, 256)
#: Calls one timing makes at most at a size whose single call outlasts its budget: a warm-up and one timed call.
_CALLS = 2


@arguments(pattern=OneOf(*PATTERNS), n=Whole(hint="scores in the row"), seed=Seed())
def step_scores(pattern: str, n: int, seed: int = 8) -> np.ndarray:
    """The row of ``n`` scores the stepper shows for ``pattern`` (one of :data:`PATTERNS`).

    >>> step_scores("rising", 4)
    array([0., 1., 2., 3.])
    """
    rng = np.random.default_rng(seed)
    if pattern == "rising":
        return np.arange(float(n))
    x = rng.normal(0, 2, n)
    if pattern == "a spike late":
        x[int(0.8 * (n - 1))] = 8.0
    elif pattern == "large (near 1000)":
        x += 1000.0
    elif pattern != "random":
        raise BadInputError(f"pattern must be one of {PATTERNS}; got {pattern!r}.")
    return x


@arguments(n=Whole(lo=2, hi=64, hint="the stepper's slider"), block=Whole(hi=16, hint="scores per block"),
           pattern=OneOf(*PATTERNS))
def stepper_app(n: int = 16, block: int = 4, pattern: str = "a spike late") -> LiveApp:
    """Step through the online softmax of one row: the block read, the running max, the rescaled sum."""
    n_slider = widgets.IntSlider(value=n, min=2, max=64, description="scores", continuous_update=False)
    b_slider = widgets.IntSlider(value=block, min=1, max=16, description="block", continuous_update=False)
    top = -(-n // block) - 1
    step = widgets.IntSlider(value=min(1, top), min=0, max=top, description="block read", continuous_update=False)
    play = widgets.Play(value=step.value, min=0, max=top, interval=1100, description="play")
    widgets.jslink((play, "value"), (step, "value"))

    def resize(_change) -> None:          # registered before the app's own observers, so it runs first
        last = -(-n_slider.value // b_slider.value) - 1
        step.max = play.max = last
        step.value = min(step.value, last)

    n_slider.observe(resize, names="value")
    b_slider.observe(resize, names="value")

    def update(pattern: str, n: int, block: int, step: int):
        x = step_scores(pattern, n)
        last = -(-n // block) - 1
        step = min(step, last)
        fig = stepper_figure(x, block, step)
        with np.errstate(over="ignore", invalid="ignore"):
            naive = np.exp(x) / np.exp(x).sum()
        note = ("" if np.isfinite(naive).all() else
                " <b>The one-pass formula exp(x) / Σ exp(x) gives NaN here</b> (exp overflows past 709); the running "
                "state never takes exp of a positive number.")
        return fig, (f"{n} scores in blocks of {block}: {last + 1} blocks, one pass, two numbers of state "
                     f"(m, s) per row.{note}")

    controls = {"pattern": widgets.Dropdown(options=list(PATTERNS), value=pattern, description="scores"),
                "n": n_slider, "block": b_slider, "step": step}
    app = LiveApp(update, controls, title="The online softmax, block by block", view_only=("step",))
    app.add_player(play)
    return app


@arguments(n=Whole(hi=MAX_TREE, hint="scores the tree draws"))
def tree_app(n: int = 8) -> LiveApp:
    """The softmax states of ``n`` scores combined by lesson 04's Blelloch scan, one level per step."""
    n_slider = widgets.IntSlider(value=n, min=1, max=MAX_TREE, description="scores", continuous_update=False)

    def levels(k: int) -> int:
        return 2 * max(k - 1, 0).bit_length()

    step = widgets.IntSlider(value=levels(n), min=0, max=levels(n), description="step", continuous_update=False)

    def resize(_change) -> None:
        step.max = levels(n_slider.value)
        step.value = step.max

    n_slider.observe(resize, names="value")

    def update(n: int, step: int):
        x = step_scores("a spike late", n)
        fig = scan_tree_figure(x, min(step, levels(n)))
        return fig, (f"{n} scores: {levels(n)} levels of the tree (lesson 04), each one call of the combine over all "
                     f"its pairs; a loop would take {n} dependent steps.")

    return LiveApp(update, {"n": n_slider, "step": step}, title="The softmax states by Blelloch's tree",
                   view_only=("step",))


@arguments(n=Whole(hint="queries and keys"), d=Whole(hint="the head size"), block=Whole(hint="the tile"))
def attention_cost_s(method: str, n: int, d: int = 64, block: int = 64) -> float:
    """Estimated seconds :func:`~course.attention.timing.time_attention` takes for ``method`` at ``(n, d)`` (tiles of
    ``block``) on this CPU: its FLOPs over the rate measured once at n = 256, for a warm-up and one timed call.
    (The tiles' count grows with n² as the FLOPs do, so the rate at 256 carries their overhead along.)"""
    fn = attention_function(method, attention_input(256, d), "cpu", block=block)
    rate = measured_rate(("attention", method, d, block), attention_flops(256, d), fn)
    return _CALLS * estimate_s(attention_flops(n, d), rate)


@arguments(n=OneOf(*[2**k for k in range(8, 17)]), d=OneOf(32, 64, 128),
           sram=OneOf(*[m for _, m in SRAM_CHOICES]), tile=OneOf(*TILE_CHOICES), timed=OneOf(True, False))
def traffic_app(n: int = 1024, d: int = 64, sram: int = 58_368, tile: int = 64, timed: bool = True) -> LiveApp:
    """N × d × on-chip memory × the course's tile → bytes moved (counted), memory held (counted), time on this CPU
    (measured)."""
    controls = {"n": log2_slider(8, 16, n, "N"),
                "d": widgets.Dropdown(options=[32, 64, 128], value=d, description="head size d"),
                "tile": widgets.Dropdown(options=list(TILE_CHOICES), value=tile, description="NumPy tile"),
                "sram": widgets.Dropdown(options=list(SRAM_CHOICES), value=sram, description="on-chip M",
                                         layout=widgets.Layout(width="520px")),
                "timed": widgets.Checkbox(value=timed, description="time it on this CPU", indent=False)}
    cache = MeasurementCache(maxsize=64)

    def measure(method: str, n: int, d: int, tile: int) -> tuple[dict | None, str]:
        def run() -> tuple[dict | None, str]:
            seconds = attention_cost_s(method, n, d, tile)
            if seconds > WIDGET_LIMIT_S:
                return None, (f"{method}: not timed, about {seconds:,.0f} s here (counted FLOPs over the rate measured "
                              f"at n = 256; an app keeps a refresh under {WIDGET_LIMIT_S:g} s)")
            try:
                return time_attention(method, n, d, repeat=3, budget_s=0.3, block=tile), ""
            except (BadInputError, MemoryError) as exc:
                return None, f"{method}: not timed ({str(exc).splitlines()[0]})"
        return cache.get((method, n, d, tile if method == "flash" else None), run)

    def update(n: int, d: int, tile: int, sram: int, timed: bool):
        rows = []
        for alg in TRAFFIC_ALGORITHMS:
            walk = tiles_walked(alg, n, d, sram) <= WALK_TILES
            numbers = count_traffic(alg, n, d, sram)["numbers"] if walk else traffic_formula(alg, n, d, sram)
            tiles = "—" if alg == "naive" else " × ".join(map(str, paper_blocks(alg, d, sram)))
            rows.append(f"<tr><td>{alg}</td><td>{tiles}</td><td>{numbers * 4 / 2**20:,.2f} MiB"
                        f"{'' if walk else ' (closed form)'}</td>"
                        f"<td>{numbers / traffic_bound(alg, n, d, sram):.3g}</td></tr>")
        mine = tile_traffic(n, n, d, d, tile, tile)["numbers"]
        rows.append(f"<tr><td>flash, Q outer, the tile you chose</td><td>{tile} × {tile}</td>"
                    f"<td>{mine * 4 / 2**20:,.2f} MiB"
                    f"</td><td>{mine / traffic_bound('flash, Q outer', n, d, sram):.3g}</td></tr>")
        held = {m: memory_held(m, n, n, d, tile, tile) * 4 for m in ("naive", "tiled")}
        html = ("<table><tr><th>algorithm</th><th>tiles (queries × keys)</th><th>DRAM traffic (counted)</th>"
                "<th>count / Θ</th></tr>" + "".join(rows) + "</table>"
                f"<p>Memory held besides q, k, v (counted, one head, float32): naive {held['naive'] / 2**20:,.2f} MiB "
                f"(two N × N arrays), tiled {held['tiled'] / 2**20:,.3f} MiB (the output and one {tile} × {tile} "
                "tile).</p>")
        if timed:
            recs, notes = {}, []
            for method in ("naive", "flash"):
                rec, why = measure(method, n, d, tile)
                if rec is None:
                    notes.append(why)
                else:
                    recs[method] = rec
            if recs:
                html += "<p>On this CPU (NumPy, float32, measured): " + ", ".join(
                    f"{m}{f' ({tile} × {tile} tiles)' if m == 'flash' else ''} {r['median_s'] * 1e3:,.2f} ms"
                    for m, r in recs.items()) + (
                    f"; the tiled pass takes {recs['flash']['median_s'] / recs['naive']['median_s']:.2f}× the naive "
                    "one's time" if len(recs) == 2 else "") + ".</p>"
                noise = noisy_note(list(recs.values()))
                if noise:
                    html += f"<p><i>{escape(noise)}</i></p>"
            if notes:
                html += "<p>" + "; ".join(escape(s) for s in notes) + ".</p>"
        return traffic_figure(d, sram, max(2**16, n), highlight=n), html

    app = LiveApp(update, controls, title="Bytes moved, memory held, time: naive against tiled attention")
    app.cache = cache
    return app
