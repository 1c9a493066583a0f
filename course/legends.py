"""Where a figure's legends and point labels go: in a corner no plotted data passes through, else beside the axes.

Sizes are estimated from the labels' lengths and the data placed in axes fractions from the axes' limits, so
nothing is drawn twice (a widget redraws in well under a second).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.transforms import offset_copy

__all__ = ["MIN_FONT_PT", "REFERENCE_STYLES", "place_legend", "figure_legend", "label_points", "devices_to_caption"]

#: The smallest text a figure may carry, in points, at the size it is drawn in the notebook.
MIN_FONT_PT = 9.0


def _data_in_axes_fraction(ax: Any) -> tuple[np.ndarray, list]:
    """The plotted data of ``ax`` in axes fractions (0..1), without drawing: points (line vertices, with
    points every 1/50 along each segment, and scatter offsets) and bar rectangles ``(x0, y0, x1, y1)``."""
    ax.autoscale_view()
    to_frac = ax.transScale + ax.transLimits
    pts, rects = [np.empty((0, 2))], []
    for line in ax.lines:
        if not line.get_visible() or not line.get_transform().contains_branch(ax.transData):
            continue
        xy = np.column_stack([np.asarray(line.get_xdata(), dtype=float), np.asarray(line.get_ydata(), dtype=float)])
        keep = np.all(np.isfinite(xy), axis=1)
        for k, scale in enumerate((ax.get_xscale(), ax.get_yscale())):
            keep &= (xy[:, k] > 0) if scale == "log" else True
        xy = xy[keep]
        if not len(xy):
            continue
        f = to_frac.transform(xy)
        if len(f) > 1 and line.get_linestyle() not in ("None", "none", "", " "):
            t = np.linspace(0, 1, 50)[:, None, None]
            f = (f[:-1][None] * (1 - t) + f[1:][None] * t).reshape(-1, 2)
        pts.append(f)
    for coll in ax.collections:
        offsets = np.asarray(coll.get_offsets(), dtype=float) if hasattr(coll, "get_offsets") else np.empty((0, 2))
        if len(offsets) and coll.get_offset_transform().contains_branch(ax.transData):
            pts.append(to_frac.transform(offsets))
    for patch in ax.patches:
        if isinstance(patch, Rectangle) and patch.get_transform().contains_branch(ax.transData):
            (x0, y0), (x1, y1) = to_frac.transform(np.array(patch.get_bbox().get_points()))
            rects.append((min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)))
    return np.concatenate(pts), rects


_CORNERS = {"upper right": (1, 1), "upper left": (0, 1), "lower right": (1, 0), "lower left": (0, 0)}


def place_legend(ax: Any, fontsize: float = MIN_FONT_PT, loc: str = "best") -> Any:
    """The axes' legend in a corner of them that no plotted data passes through, else under them with its
    labels wrapped to the axes' width.

    Long labels ("CPU: <model> (recorded on <GPU>, <date>)") made legends wider than their axes, and the
    constrained layout then squeezed the axes to a sliver to make room; a legend left to matplotlib's "best"
    spot still covered curves when none was free.  The legend's size is estimated from its labels and the
    data are placed in axes fractions from the axes' limits, so no drawing is needed.  ``loc`` names the
    corner to try first.  Returns the legend, or None when nothing is labelled.
    """
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    fig, box = ax.figure, ax.get_position()
    # the layout still takes the tick labels off the axes: count on 85 % of the width and 80 % of the height
    width_in, height_in = 0.85 * fig.get_figwidth() * box.width, 0.8 * fig.get_figheight() * box.height
    char_in = 0.6 * fontsize / 72          # DejaVu Sans' mean advance, digits and capitals included
    handle_in = 0.7                         # the line sample, its padding and the frame
    rows_in = sum(lab.count("\n") + 1 for lab in labels) * 1.45 * fontsize / 72 + 0.15
    legend_w, legend_h = (max(len(x) for lab in labels for x in lab.split("\n")) * char_in + handle_in) / width_in, \
        rows_in / height_in
    if legend_w <= 0.9 and legend_h <= 0.8:
        order = [loc] + [c for c in _CORNERS if c != loc] if loc in _CORNERS else list(_CORNERS)
        data = _data_in_axes_fraction(ax)
        corner = next((c for c in order if _empty_corner_at(data, c, legend_w, legend_h)), None)
        if corner is not None:
            return ax.legend(handles, labels, fontsize=fontsize, loc=corner)
    fits = max(int((width_in / 0.85 - handle_in) / char_in), 24)
    lines = (ax.xaxis.label.get_text().count("\n") + 1) if ax.xaxis.label.get_text() else 0
    drop_in = (1.4 * 10 * (1 + lines) + 8) / 72     # the tick labels and the x label above it, with their pads
    under = offset_copy(ax.transAxes, fig=fig, y=-drop_in, units="inches")
    return ax.legend(handles, [textwrap.fill(label, fits) for label in labels], fontsize=fontsize,
                     loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=under)


def _empty_corner_at(data: tuple[np.ndarray, list], corner: str, width: float, height: float) -> bool:
    """True if a box of ``width`` x ``height`` (axes fractions) in ``corner`` covers none of ``data``."""
    pts, rects = data
    pad = 0.02
    cx, cy = _CORNERS[corner]
    x0 = 1 - pad - width if cx else pad
    y0 = 1 - pad - height if cy else pad
    x1, y1 = x0 + width, y0 + height
    inside = (pts[:, 0] > x0) & (pts[:, 0] < x1) & (pts[:, 1] > y0) & (pts[:, 1] < y1)
    return not inside.any() and not any(r[0] < x1 and r[2] > x0 and r[1] < y1 and r[3] > y0 for r in rects)


def figure_legend(fig: Figure, axes: Sequence, heading: str = "", fontsize: float = MIN_FONT_PT) -> bool:
    """One legend for all ``axes``, above them (headed by ``heading``), with labels wrapped to fit the figure's
    width, so no panel is squeezed and no curve hidden.  Each axes' own legend is removed.  False when
    nothing is labelled.
    """
    handles, labels = [], []
    for a in axes:
        for h, lab in zip(*a.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
        if a.get_legend() is not None:
            a.get_legend().remove()
    if not handles:
        return False
    ncol = 2 if len(labels) > 1 else 1
    fits = max(int((fig.get_figwidth() / ncol - 0.7) / (0.6 * fontsize / 72)), 24)
    fig.legend(handles, [textwrap.fill(lab, fits) for lab in labels], loc="outside upper center", ncol=ncol,
               fontsize=fontsize, frameon=False, title=heading or None, title_fontsize=fontsize)
    return True


def label_points(ax: Any, points: Sequence[tuple[float, float, str]], fontsize: float = MIN_FONT_PT,
                 color: str = "k") -> None:
    """Name each ``(x, y, text)`` point of ``ax`` beside it, on the first side where its label overlaps no label
    placed before and no other point's marker (right, left, above or below, then further out), so that
    neighbours' names stay readable.  Sizes come from the axes' size on the figure (call it after the figure's
    legends are added: a drawn layout gives the axes' final size) and the text's length.
    """
    ax.autoscale_view()
    fig = ax.figure
    try:
        fig.draw_without_rendering()          # the constrained layout settles the axes' final size
    except Exception:                         # a figure without a canvas: fall back on its nominal box
        pass
    to_frac = ax.transScale + ax.transLimits
    box = ax.get_position()
    w_in, h_in = fig.get_figwidth() * box.width, fig.get_figheight() * box.height
    mw, mh = 4.5 / 72 / w_in, 4.5 / 72 / h_in              # half a marker, in axes fractions
    marks = [to_frac.transform((x, y)) for x, y, _ in points]
    placed: list[tuple[float, float, float, float]] = []
    offsets = [(6, 3), (6, -3), (-6, 3), (-6, -3), (0, 8), (0, -8), (6, 13), (6, -13), (-6, 13), (-6, -13),
               (0, 18), (0, -18), (14, 22), (14, -22), (-14, 22), (-14, -22)]
    for k, (x, y, text) in enumerate(points):
        fx, fy = marks[k]
        tw, th = len(text) * 0.58 * fontsize / 72 / w_in, 1.25 * fontsize / 72 / h_in
        others = [(mx - mw, my - mh, mx + mw, my + mh) for j, (mx, my) in enumerate(marks) if j != k]
        best = None
        for dx, dy in offsets:
            x0 = fx + dx / 72 / w_in - (tw if dx < 0 else tw / 2 if dx == 0 else 0)
            y0 = fy + dy / 72 / h_in - (th if dy < 0 else 0)
            hits = sum(x0 < b[2] and x0 + tw > b[0] and y0 < b[3] and y0 + th > b[1] for b in placed + others)
            inside = 0 <= x0 and x0 + tw <= 1 and 0 <= y0 and y0 + th <= 1
            if best is None or (hits, not inside) < best[0]:
                best = ((hits, not inside), dx, dy, x0, y0)
            if not hits and inside:
                break
        _, dx, dy, x0, y0 = best
        placed.append((x0, y0, x0 + tw, y0 + th))
        ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=fontsize, color=color,
                    ha="left" if dx > 0 else "right" if dx < 0 else "center", va="bottom" if dy > 0 else "top")


#: How one figure tells the references of different devices apart: the first device's curves dashed, the next
#: dotted, then dash-dotted; the caption (:func:`course.plots.add_footer`) says which is which, once.
REFERENCE_STYLES = (("--", "Dashed"), (":", "Dotted"), ("-.", "Dash-dotted"))


def _tags(ref: Any) -> list[tuple[str, str]]:
    """The texts by which a legend entry names ``ref``'s device and date, longest first, each with what takes its
    place: nothing, or "GPU" where the device's name is the subject of the entry ("<GPU> vs its host CPU")."""
    gpu = ref.gpu_name or ""
    tags = [(f" ({ref.label})", ""), (f"({ref.label})", ""), (ref.label, "")]
    if gpu:
        tags += [(f" (host of the {gpu} reference machine, recorded {ref.date})", ""),
                 (f"{gpu} (recorded {ref.date})", "GPU"), (f": {gpu}", ""), (f", {gpu}", ""), (f"GPU {gpu}", "GPU"),
                 (gpu, "GPU")]
    return tags


def _strip(label: str, tags: Sequence[tuple[str, str]]) -> str | None:
    """``label`` with each of ``tags`` it holds replaced (and what that leaves dangling tidied), or None if it holds
    none."""
    out = label
    for tag, by in tags:
        if tag and tag in out:
            out = out.replace(tag, by).replace("()", "").replace(" ,", ",").strip(" ,:")
    return None if out == label else out or label


def devices_to_caption(fig: Figure, references: Sequence[Any]) -> list[str | None]:
    """Take every reference's device and date out of ``fig``'s legend entries, to be said once in the caption.

    A legend of fourteen entries each ending "(recorded on NVIDIA H100 80GB HBM3, 2026-11-27)" was larger than
    its plots.  Each curve labelled with a reference's device loses that text; where the figure draws more than
    one device's references, the second device's curves are dotted and the third's dash-dotted
    (:data:`REFERENCE_STYLES`), and a curve that looks like the same series of an earlier device shares its legend
    entry.  Legends already drawn are placed again.  Returns, per reference, the word the caption uses for its
    style ("Dashed", "Dotted", ...), or None for a reference none of whose curves is labelled.
    """
    refs = list(references)
    words: list[str | None] = [None] * len(refs)
    found: list[list[Any]] = [[] for _ in refs]
    changed = set()
    before = {ax: ax.get_legend_handles_labels()[1] for ax in fig.axes}
    for ax in fig.axes:
        for artist in list(ax.lines) + list(ax.collections):
            label = artist.get_label()
            if not label or label.startswith("_"):
                continue
            for k, ref in enumerate(refs):      # an entry of this reference carries its date (not another set's)
                base = _strip(label, _tags(ref)) if ref.date and ref.date in label else None
                if base is not None:
                    artist.set_label(base)
                    found[k].append((ax, artist))
                    changed.add(ax)
                    break
    drawn = [k for k in range(len(refs)) if found[k]]
    for order, k in enumerate(drawn):
        ls, word = REFERENCE_STYLES[min(order, len(REFERENCE_STYLES) - 1)]
        if any(getattr(a, "get_linestyle", lambda: None)() == "--" for _, a in found[k]):
            words[k] = word
        for ax, artist in found[k]:
            if order and hasattr(artist, "get_linestyle") and artist.get_linestyle() == "--":
                artist.set_linestyle(ls)
            if order:
                _share_entry(ax, artist, refs[k])
    for ax in changed:
        _relegend(ax, before[ax])
    if changed and fig.legends:
        heading = fig.legends[0].get_title().get_text()
        for leg in list(fig.legends):
            leg.remove()
        figure_legend(fig, [a for a in fig.axes if a.get_legend_handles_labels()[0]], heading=heading)
    return words


def _relegend(ax: Any, labels_before: list[str]) -> None:
    """Draw ``ax``'s legend again from its curves' new labels, where it stood, with as many columns and lines as
    wide; a legend of handles made by hand (its entries are not the curves' labels) is left as it is."""
    old = ax.get_legend()
    if old is None or [t.get_text().replace("\n", " ") for t in old.get_texts()] != \
            [lab.replace("\n", " ") for lab in labels_before]:
        return
    width = max((len(x) for t in old.get_texts() for x in t.get_text().split("\n")), default=40)
    size = old.get_texts()[0].get_fontsize() if old.get_texts() else MIN_FONT_PT
    anchor, loc, ncols, frame = old._bbox_to_anchor, old._loc, old._ncols, old.get_frame_on()
    where = {} if anchor is None else {"bbox_to_anchor": anchor._bbox.bounds, "bbox_transform": anchor._transform}
    old.remove()
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, [textwrap.fill(lab, max(width, 24)) for lab in labels], loc=loc, ncols=ncols,
                  fontsize=max(size, MIN_FONT_PT), frameon=frame, **where)


def _share_entry(ax: Any, artist: Any, ref: Any) -> None:
    """Hide ``artist``'s legend entry where an earlier curve of ``ax`` has its label and look (the same series of
    another device); name its device where the label is taken by a curve that looks different."""
    label = artist.get_label()
    for other in ax.lines:
        if other is artist or other.get_label() != label:
            continue
        same = (getattr(other, "get_color", lambda: None)() == getattr(artist, "get_color", lambda: None)()
                and getattr(other, "get_marker", lambda: None)() == getattr(artist, "get_marker", lambda: None)())
        model = next((w for w in (ref.gpu_name or "").split() if any(c.isdigit() for c in w)), ref.gpu_name or "GPU")
        artist.set_label("_" + label if same else f"{label} ({model})")
        return
