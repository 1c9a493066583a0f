"""What a readable figure must satisfy, checked on a drawn matplotlib figure.

:func:`figure_problems` draws a figure the way :func:`course.plots.figure_to_png` does (constrained layout,
once) and returns one sentence per problem:

* **text off the canvas**: a title, axis label, tick label, annotation, legend or footer whose box is not
  wholly inside the figure (the PNG would clip it, or the slower "tight" pass would have to rescue it);
* **text on text**: two of those boxes overlapping (a legend counts as one box; tick labels of one axis
  count as separate texts, so crowded ticks are caught too);
* **legend over data**: a legend box that contains a plotted data point, is crossed by a plotted line
  segment, or overlaps a bar.  "Data" is what is drawn in an axes' data coordinates (``Line2D`` with
  two or more points or a marker, ``Rectangle`` bars, scatter offsets); reference rules drawn in axes
  coordinates (``axhline``, ``axvline``: they span the whole axes, so no legend could avoid them) and
  shaded bands (``fill_between``: they lie under the line they belong to, which is checked) are not.
  A legend in an empty corner of its axes therefore passes, and a legend under the axes passes unless
  it covers another axes' data;
* **small text**: any visible text under :data:`MIN_PT` points at the figure's own size;
* **too many series**: more than :data:`MAX_SERIES` labelled curves in one axes; **a legend larger than its
  axes**;
* **colour off the palette**: a line, marker, bar or scatter colour that is neither one of
  :data:`course.plots.PALETTE` nor a grey.

Overlaps are measured on the rendered boxes with a tolerance of :data:`SLACK_PX` pixels, so two boxes that
only touch are not a collision.
"""

from __future__ import annotations

import itertools

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from course.plots import PALETTE

MIN_PT = 9.0
SLACK_PX = 1.0
DPI = 90


def _boxes_overlap(a, b, slack: float = SLACK_PX) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > slack) and (min(a.y1, b.y1) - max(a.y0, b.y0) > slack)


def _visible_text(t: Text) -> bool:
    return t.get_visible() and bool(t.get_text().strip()) and t.get_alpha() != 0


def _texts(fig: Figure, renderer) -> list[tuple[str, object, Text]]:
    """(name, box, artist) of every visible text of ``fig``; a legend is one entry (its frame)."""
    out = []
    for t in fig.texts:
        if _visible_text(t):
            out.append((f"figure text {t.get_text()[:40]!r}", t.get_window_extent(renderer), t))
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        where = f"axes {i}"
        labels = (ax.xaxis.label, ax.yaxis.label) if ax.axison else ()
        for t in (ax.title, ax._left_title, ax._right_title, *labels, *ax.texts):
            if _visible_text(t):
                out.append((f"{where} text {t.get_text()[:40]!r}", t.get_window_extent(renderer), t))
        for axis in (ax.xaxis, ax.yaxis) if ax.axison else ():
            if not axis.get_visible():
                continue
            lo, hi = sorted(axis.get_view_interval())
            for tick in (*axis.get_major_ticks(), *axis.get_minor_ticks()):
                loc = tick.get_loc()
                if loc is None or not (lo - 1e-12 * abs(lo) <= loc <= hi + 1e-12 * abs(hi)):
                    continue
                for t in (tick.label1, tick.label2):
                    if _visible_text(t):
                        out.append((f"{where} tick label {t.get_text()!r}", t.get_window_extent(renderer), t))
        for leg in _legends(ax):
            out.append((f"{where} legend", leg.get_window_extent(renderer), leg))
    for leg in fig.legends:
        out.append(("figure legend", leg.get_window_extent(renderer), leg))
    return out


def _legends(ax) -> list:
    leg = ax.get_legend()
    extra = [a for a in ax.artists if type(a).__name__ == "Legend"]
    return ([leg] if leg is not None and leg.get_visible() else []) + extra


def _in_data_coords(artist, ax) -> bool:
    return artist.get_transform().contains_branch(ax.transData)


def _segments_cross_box(pts: np.ndarray, box) -> bool:
    """True if any point of the display-space polyline ``pts`` lies in ``box``, or a segment crosses it."""
    x0, y0, x1, y1 = box.x0 + SLACK_PX, box.y0 + SLACK_PX, box.x1 - SLACK_PX, box.y1 - SLACK_PX
    pts = pts[np.all(np.isfinite(pts), axis=1)]
    if not len(pts):
        return False
    inside = (pts[:, 0] > x0) & (pts[:, 0] < x1) & (pts[:, 1] > y0) & (pts[:, 1] < y1)
    if inside.any() or len(pts) < 2:
        return bool(inside.any())
    # Liang-Barsky clipping of every segment against the box
    p, q = pts[:-1], pts[1:]
    d = q - p
    t0, t1 = np.zeros(len(p)), np.ones(len(p))
    ok = np.ones(len(p), dtype=bool)
    for dk, lo_k, hi_k, pk in ((d[:, 0], x0, x1, p[:, 0]), (d[:, 1], y0, y1, p[:, 1])):
        for num, den in ((pk - lo_k, -dk), (hi_k - pk, dk)):
            with np.errstate(divide="ignore", invalid="ignore"):
                r = num / den
            parallel = den == 0
            ok &= ~(parallel & (num < 0))
            t0 = np.where(~parallel & (den < 0), np.maximum(t0, r), t0)
            t1 = np.where(~parallel & (den > 0), np.minimum(t1, r), t1)
    return bool((ok & (t0 < t1)).any())


def _data_hits(ax, box, renderer) -> list[str]:
    """What of ``ax``'s plotted data lies under ``box`` (display coordinates)."""
    hits = []
    for line in ax.lines:
        if not line.get_visible() or not _in_data_coords(line, ax):
            continue
        xy = np.column_stack([np.asarray(line.get_xdata(), dtype=float), np.asarray(line.get_ydata(), dtype=float)])
        if not len(xy):
            continue
        pts = ax.transData.transform(xy)
        drawn_line = line.get_linestyle() not in ("None", "none", "", " ") and len(xy) > 1
        if drawn_line and _segments_cross_box(pts, box):
            hits.append(f"line {line.get_label()!r}")
        elif line.get_marker() not in (None, "None", "none", "", " "):
            if any(_segments_cross_box(pt[None, :], box) for pt in pts):
                hits.append(f"points {line.get_label()!r}")
    for patch in ax.patches:
        if isinstance(patch, Rectangle) and patch.get_visible() and _in_data_coords(patch, ax):
            if _boxes_overlap(patch.get_window_extent(renderer), box):
                hits.append(f"bar {patch.get_label()!r}")
                break
    for coll in ax.collections:
        if isinstance(coll, PathCollection) and coll.get_visible() and len(coll.get_offsets()):
            pts = coll.get_offset_transform().transform(np.asarray(coll.get_offsets(), dtype=float))
            if any(_segments_cross_box(pt[None, :], box) for pt in pts):
                hits.append(f"scatter {coll.get_label()!r}")
    return hits


def _is_grey(rgb) -> bool:
    return max(rgb) - min(rgb) < 0.02


def _is_tint(rgb, palette) -> bool:
    """True if ``rgb`` is a palette colour mixed with white (a light fill: :func:`course.plots.tint`)."""
    c = np.asarray(rgb)
    for p in palette:
        p = np.asarray(p)
        a = (1 - c) / np.where(p < 1, 1 - p, np.nan)
        a = a[np.isfinite(a)]
        if len(a) and 0 < a.mean() <= 1 and np.ptp(a) < 0.03 and np.allclose(1 - a.mean() * (1 - p), c, atol=0.01):
            return True
    return False


def _colour_problems(fig: Figure) -> list[str]:
    palette = {tuple(np.round(to_rgb(c), 3)) for c in PALETTE.values()}
    bad = set()

    def check(what, colour):
        if colour is None or (isinstance(colour, str) and colour.lower() == "none"):
            return
        arr = np.atleast_2d(np.asarray(colour, dtype=float)) if not isinstance(colour, str) else [to_rgb(colour)]
        for c in arr:
            if len(c) == 4 and c[3] == 0:
                continue
            rgb = tuple(np.round(np.asarray(c[:3], dtype=float), 3))
            if not _is_grey(rgb) and rgb not in palette and not _is_tint(rgb, palette):
                bad.add(f"{what} colour {tuple(float(v) for v in rgb)}")

    for ax in fig.axes:
        for line in ax.lines:
            if line.get_visible():
                check(f"line {line.get_label()!r}", line.get_color())
                check(f"line {line.get_label()!r} marker", line.get_markeredgecolor())
                check(f"line {line.get_label()!r} marker", line.get_markerfacecolor())
        for patch in ax.patches:
            if isinstance(patch, Rectangle) and patch.get_visible() and _in_data_coords(patch, ax):
                check(f"bar {patch.get_label()!r}", patch.get_facecolor())
        for coll in ax.collections:
            if isinstance(coll, PathCollection) and coll.get_visible():
                check(f"scatter {coll.get_label()!r}", coll.get_facecolor())
                check(f"scatter {coll.get_label()!r}", coll.get_edgecolor())
    return sorted(bad)


def draw(fig: Figure, dpi: int = DPI):
    """Draw ``fig`` once, as :func:`course.plots.figure_to_png` does; returns its renderer."""
    from course.plots import plain_tick_labels

    plain_tick_labels(fig)
    fig.set_dpi(dpi)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def figure_problems(fig: Figure, colours: bool = True, sizes: bool = True) -> list[str]:
    """Every readability problem of ``fig`` (see the module docstring), one sentence each; [] if none."""
    renderer = draw(fig)
    width, height = fig.bbox.width, fig.bbox.height
    problems = []
    texts = _texts(fig, renderer)
    for name, box, _ in texts:
        if box.x0 < -SLACK_PX or box.y0 < -SLACK_PX or box.x1 > width + SLACK_PX or box.y1 > height + SLACK_PX:
            problems.append(f"{name} leaves the canvas ({box.x0:.0f}..{box.x1:.0f} x {box.y0:.0f}..{box.y1:.0f} px "
                            f"on a {width:.0f} x {height:.0f} canvas)")
    for (na, ba, _), (nb, bb, __) in itertools.combinations(texts, 2):
        if _boxes_overlap(ba, bb):
            problems.append(f"{na} collides with {nb}")
    for name, box, artist in texts:
        if type(artist).__name__ != "Legend":
            continue
        for j, ax in enumerate(fig.axes):
            hits = _data_hits(ax, box, renderer)
            if hits:
                problems.append(f"{name} covers data of axes {j}: {', '.join(sorted(set(hits))[:4])}")
    if sizes:
        for name, _, artist in texts:
            parts = artist.get_texts() if type(artist).__name__ == "Legend" else [artist]
            for t in parts:
                if _visible_text(t) and t.get_fontsize() < MIN_PT - 1e-9:
                    problems.append(f"{name}: text {t.get_text()[:30]!r} at {t.get_fontsize():.1f} pt "
                                    f"(at least {MIN_PT:g})")
                    break
    for j, ax in enumerate(fig.axes):
        series = _series_of(ax)
        if len(series) > MAX_SERIES:
            problems.append(f"axes {j} draws {len(series)} series (at most {MAX_SERIES}: split it into panels or "
                            f"let a control choose): {', '.join(sorted(series))[:300]}")
        leg = ax.get_legend()
        if leg is not None and leg.get_visible():
            lb, ab = leg.get_window_extent(renderer), ax.get_window_extent(renderer)
            if lb.width * lb.height > ab.width * ab.height:
                problems.append(f"axes {j}'s legend ({lb.width:.0f} x {lb.height:.0f} px) is larger than its axes "
                                f"({ab.width:.0f} x {ab.height:.0f} px)")
    if colours:
        problems += _colour_problems(fig)
    return problems


#: The most series one axes may draw (issue: one idea per figure).
MAX_SERIES = 6


def _series_of(ax) -> set[str]:
    """The series ``ax`` draws: the labels of its curves of two or more points in data coordinates, each once
    (the same series of several devices shares one entry; the noisy markers and rules across the axes are not
    series)."""
    from course.plots import NOISY_LABEL

    out = set()
    for line in ax.lines:
        label = line.get_label() or ""
        if label.startswith("_") or label == NOISY_LABEL or len(line.get_xdata()) < 2 \
                or not _in_data_coords(line, ax):
            continue
        out.add(label)
    return out


def live_like(reference):
    """A live result set made from a reference one, as a CPU-only machine would measure it: its CPU records only,
    every time 1.5 times longer and every rate 1.5 times lower (so live and recorded curves do not coincide)."""
    from course.results import ResultSet

    live = ResultSet.from_dict(reference.to_dict(), source="live")
    records = []
    for r in live.records:
        if r.get("device") not in (None, "cpu"):
            continue
        r = dict(r)
        for k, v in r.items():
            if isinstance(v, float) and not isinstance(v, bool):
                if k.endswith("_s") and "per_s" not in k:
                    r[k] = v * 1.5
                elif "per_s" in k or k in ("gflops", "tflops", "gbps"):
                    r[k] = v / 1.5
        records.append(r)
    live.records = records
    return live


def has_data(fig: Figure) -> bool:
    """True if ``fig`` plots something in data coordinates (a point, a bar, a cell): a figure with no data
    (a message saying nothing was measured) has nothing to take away."""
    for ax in fig.axes:
        if any(len(ln.get_xdata()) and _in_data_coords(ln, ax) for ln in ax.lines) or ax.images:
            return True
        if any(isinstance(p, Rectangle) and _in_data_coords(p, ax) for p in ax.patches):
            return True
        if any(len(c.get_offsets()) for c in ax.collections if isinstance(c, PathCollection)):
            return True
    return False
