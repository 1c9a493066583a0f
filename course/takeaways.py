"""A figure's one-sentence takeaway, read off the numbers it plots: printed under it by ``LiveApp`` and
stored as its PNG's alt text by :func:`course.plots.figure_to_png`.

>>> from matplotlib.figure import Figure
>>> fig = Figure()
>>> ax = fig.add_subplot()
>>> _ = ax.plot([1, 2, 4], [3.0, 2.0, 1.5], label="CPU (live)")
>>> _ = ax.set_xlabel("n"), ax.set_ylabel("time (s)")
>>> figure_takeaway(fig)
'At the end of each curve, time: CPU (live) 1.5 s at n = 4.'
"""

from __future__ import annotations

import re

import numpy as np
from matplotlib.figure import Figure

from .arguments import Whole, arguments
from .errors import BadInputError

__all__ = ["set_takeaway", "figure_takeaway", "value_text", "power_text", "quantity_and_unit"]


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


@arguments(base=Whole(lo=2, hint="the base, e.g. 2 or 10"), exponent=Whole(lo=-10**6, hi=10**6))
def power_text(base: int, exponent: int, coefficient: str = "") -> str:
    """``base`` to the power ``exponent`` in plain text with superscript digits: ``power_text(10, -3)`` is
    ``"10⁻³"``, with ``coefficient="2"`` ``"2×10⁻³"``.  No mathtext: a redraw lays it out much faster.

    >>> power_text(2, 14), power_text(10, -3, "2")
    ('2¹⁴', '2×10⁻³')
    """
    return (f"{coefficient}×" if coefficient else "") + f"{base}{str(exponent).translate(_SUPERSCRIPT)}"


def set_takeaway(fig: Figure, text: str) -> Figure:
    """Attach the figure's one-sentence takeaway (``fig.takeaway``), written from the numbers it plots.

    :class:`course.widgets.LiveApp` prints it under the figure, and :func:`course.plots.figure_to_png` stores it as the
    PNG's description (its alt text)."""
    if not isinstance(text, str):
        raise BadInputError(f"a takeaway is one sentence, a string; got {text!r:.80}")
    fig.takeaway = " ".join(str(text).split())
    return fig


def figure_takeaway(fig: Figure) -> str:
    """The figure's takeaway: the one its builder attached, else one read off its plotted data (the values
    at the end of each labelled curve of its first panel, or its largest and smallest bars); "" if neither."""
    text = getattr(fig, "takeaway", None)
    if text is not None:
        return text
    try:
        return " ".join(_read_off(fig).split())
    except (TypeError, ValueError):   # data that are not numbers (categories, dates): nothing to read off
        return ""


def value_text(v: float, unit: str = "") -> str:
    """A number with three significant digits and thousands separators (a whole number as it is; powers of
    ten beyond a million), times in s/ms/µs/ns.

    >>> value_text(0.00123, "s"), value_text(48213.5, "GFLOP/s"), value_text(4096), value_text(9.17e14, "FLOP/s")
    ('1.23 ms', '48,200 GFLOP/s', '4,096', '9.17×10¹⁴ FLOP/s')
    """
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise BadInputError(f"value_text needs a real number, got {v!r:.80}")
    v = float(v)
    if unit != "s" and v.is_integer() and abs(v) < 1e9:
        return f"{int(v):,} {unit}".strip()
    if unit != "s" and v != 0 and not 1e-3 <= abs(v) < 1e6:
        mantissa, k = f"{v:.2e}".split("e")     # rounded first, so 9.999e-4 reads 1×10⁻³
        return f"{power_text(10, int(k), f'{float(mantissa):.3g}')} {unit}".strip()
    if unit == "s":
        for scale, name in ((1, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
            if abs(v) >= scale or scale == 1e-9:
                return f"{float(f'{v / scale:.3g}'):,.4g} {name}"
    rounded = float(f"{v:.3g}")
    text = f"{rounded:,.0f}" if abs(rounded) >= 1000 else f"{rounded:.3g}"
    return f"{text} {unit}".strip()


def quantity_and_unit(label: str) -> tuple[str, str]:
    """Split an axis label into what it measures and its unit: ``"peak memory (MiB)"`` gives
    ``("peak memory", "MiB")``, ``"GB/s (read + write)"`` ``("bandwidth", "GB/s")``, ``"time (µs, log scale)"``
    ``("time", "µs")``; a unit longer than eight characters is left out.

    >>> quantity_and_unit("peak memory (MiB)"), quantity_and_unit("GB/s (read + write)")
    (('peak memory', 'MiB'), ('rate', 'GB/s'))
    """
    if not isinstance(label, str):
        raise BadInputError(f"label must be an axis label, a string such as 'time (s)'; got {label!r:.80}")
    label = " ".join(label.split())
    m = re.match(r"\s*([^(]*?)\s*\(([^)]*)\)", label)
    quantity, inner = (m[1], m[2].split(",")[0].strip()) if m else (label, "")
    if inner and len(inner) <= 8 and inner not in ("log", "median", "mean", "counted"):   # words, not units
        return quantity or "value", inner
    if "/" in quantity and " " not in quantity and len(quantity) <= 8:      # the label starts with its unit
        return "rate", quantity
    return quantity or "value", ""


def _read_off(fig: Figure) -> str:
    for ax in fig.axes:
        curves = [ln for ln in ax.lines if not ln.get_label().startswith(("_", "hollow:"))
                  and len(ln.get_xdata()) > 1 and ln.get_transform().contains_branch(ax.transData)]
        if curves:
            quantity, unit = quantity_and_unit(ax.get_ylabel())
            xname = quantity_and_unit(ax.get_xlabel())[0] if ax.get_xlabel() else "x"
            ends = []
            for ln in curves[:4]:
                x, y = np.asarray(ln.get_xdata(), dtype=float), np.asarray(ln.get_ydata(), dtype=float)
                ok = np.isfinite(x) & np.isfinite(y)
                if ok.any():
                    i = np.flatnonzero(ok)[np.argmax(x[ok])]
                    ends.append(f"{ln.get_label().split(chr(10))[0]} {value_text(y[i], unit)} at {xname} = "
                                f"{value_text(x[i])}")
            if ends:
                return f"At the end of each curve, {quantity}: " + "; ".join(ends) + "."
        bars = [p for p in ax.patches if type(p).__name__ == "Rectangle" and p.get_transform().contains_branch(
            ax.transData) and p.get_width() > 0 and p.get_height() > 0]
        upright = bars and all(abs(b.get_y()) < 1e-12 for b in bars) and not all(abs(b.get_x()) < 1e-12
                                                                              for b in bars)
        ticks = ax.get_xticks() if upright else ax.get_yticks()
        labels = [t.get_text() for t in (ax.get_xticklabels() if upright else ax.get_yticklabels())]
        if bars and len(labels) == len(ticks) and any(labels):
            vals = []
            for b in bars:     # each bar named by the tick nearest its middle (grouped bars share a tick)
                mid = b.get_x() + b.get_width() / 2 if upright else b.get_y() + b.get_height() / 2
                name = labels[int(np.argmin(np.abs(np.asarray(ticks, dtype=float) - mid)))]
                vals.append((b.get_height() if upright else b.get_width(), name + (f" ({b.get_label()})" if
                                                                                   not b.get_label().startswith("_")
                                                                                   else "")))
            (hi, hi_name), (lo, lo_name) = max(vals), min(vals)
            quantity, unit = quantity_and_unit(ax.get_ylabel() if upright else ax.get_xlabel())
            return (f"Largest {quantity}: {hi_name}, {value_text(hi, unit)}; smallest: {lo_name}, "
                    f"{value_text(lo, unit)}.")
    return ""
