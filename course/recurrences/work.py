"""Work and span of a linear recurrence, dense against diagonal: why the diagonal one scans cheaply.

Lesson 05 ran back-propagation through an RNN as a scan whose elements are dense n×n Jacobians.
Composing two steps ``h -> A h + b`` is a matrix product, ``2n³`` flops, where the loop spends
``2n²`` on a step.  The down-sweep hands on prefixes that already hold a state, so its combines
need only matrix-vector products: the least a dense scan needs is about **n + 1 times** the loop's
arithmetic, and a scan that multiplies full matrices in both sweeps (lesson 05's teaching scan)
does about **2n times**.  When the transition is *diagonal*, ``h -> a ⊙ h + b``, composing two
steps is ``(a₂a₁, a₂b₁ + b₂)``: ``3n`` flops, against the loop's ``2n`` per step.  The tree still
does about twice as many combines as the loop has steps, so the extra work is a constant (≈2× the
combines, ≈3× the flops; ≈2.5× at the least, ``a ⊙ h + b`` in the down-sweep), whatever n is.

The counts come from the scan's own level loop (:func:`course.scan.operation_counts`), and the dense
ones are lesson 05's (:func:`course.bppsa.work_counts`), not formulas restated here.

>>> c = work_counts(1024, 16, "diagonal")
>>> c["steps_loop"], c["steps_scan"], round(c["combine_ratio"], 2)
(1024, 20, 2.0)
"""

from __future__ import annotations

import math

from ..arguments import OneOf, Whole, Wholes, arguments
from ..bppsa.algorithm import work_counts as bppsa_work_counts
from ..scan.algorithms import operation_counts

__all__ = ["KINDS", "work_counts", "work_table", "combine_flops"]

#: The two transitions compared in this lesson.
KINDS = ("diagonal", "dense")


@arguments(n=Whole(hint="the channels"), kind=OneOf(*KINDS))
def combine_flops(n: int, kind: str = "diagonal") -> int:
    """Flops of one combine of two steps with n channels.

    Diagonal: ``a₂·a₁`` (n) and ``a₂·b₁ + b₂`` (2n), so ``3n``.  Dense: ``A₂·A₁`` (2n³; the
    vector part is left out, as lesson 05 counts it).

    >>> combine_flops(4, "diagonal"), combine_flops(4, "dense")
    (12, 128)
    """
    return 3 * n if kind == "diagonal" else 2 * n ** 3


@arguments(T=Whole(hint="steps of the recurrence"), n=Whole(hint="the channels"), kind=OneOf(*KINDS),
           itemsize=Whole(hint="bytes per number, e.g. 4 for float32"))
def work_counts(T: int, n: int, kind: str = "diagonal", itemsize: int = 4) -> dict:
    """Steps, combines, flops and memory of the loop and the Blelloch scan over T steps.

    Parameters
    ----------
    T : steps of the recurrence.  n : channels (the state size).
    kind : ``"diagonal"`` (``h -> a ⊙ h + b``) or ``"dense"`` (``h -> A h + b``, lesson 05's
        numbers, where the scan runs over T+1 elements: the gradient and T Jacobians).
    itemsize : bytes per number, for the memory the scan's elements take.

    Returns
    -------
    dict with ``steps_loop``, ``steps_scan`` (levels: the span), ``combines``, ``flops_loop``,
    ``flops_scan``, ``work_ratio`` (scan flops / loop flops, every combine a full one),
    ``flops_scan_min`` and ``work_ratio_min`` (the least: a down-sweep combine meets a prefix that
    already holds a state, so it is a matrix-vector product, or ``a ⊙ h + b``), ``combine_ratio``
    (combines / loop steps), ``step_ratio`` (loop steps / scan levels: the most unlimited lanes could
    gain), ``bytes_loop`` and ``bytes_scan``.

    Examples
    --------
    >>> round(work_counts(1024, 16, "dense")["work_ratio"])
    32
    """
    if kind == "dense":
        c = bppsa_work_counts(T, n, 1, itemsize)
        return {"kind": kind, "T": T, "n": n, "steps_loop": c["steps_sequential"],
                "steps_scan": c["steps_scan"], "combines": c["combines_scan"],
                "flops_loop": c["flops_sequential"], "flops_scan": c["flops_scan"],
                "work_ratio": c["work_ratio"], "flops_scan_min": c["flops_scan_min"],
                "work_ratio_min": c["work_ratio_min"], "combine_ratio": c["combines_scan"] / T,
                "step_ratio": c["step_ratio"], "bytes_loop": c["bytes_sequential"],
                "bytes_scan": c["bytes_scan"]}
    counts = operation_counts("blelloch", T)
    combines, levels = int(counts["work"]), int(counts["steps"])
    flops_loop, flops_scan = 2.0 * n * T, float(combine_flops(n, kind)) * combines
    flops_min = float(combine_flops(n, kind)) * (combines // 2) + 2.0 * n * (combines - combines // 2)
    return {"kind": kind, "T": T, "n": n, "steps_loop": T, "steps_scan": levels,
            "combines": combines, "flops_loop": flops_loop, "flops_scan": flops_scan,
            "work_ratio": flops_scan / flops_loop, "flops_scan_min": flops_min,
            "work_ratio_min": flops_min / flops_loop, "combine_ratio": combines / T,
            "step_ratio": T / levels if levels else math.inf,
            "bytes_loop": 2 * T * n * itemsize, "bytes_scan": 2 * T * n * itemsize}


@arguments(Ts=Wholes(hint="each is a number of steps"), n=Whole(hint="the channels"))
def work_table(Ts: list[int], n: int) -> list[dict]:
    """:func:`work_counts` for both kinds at each T (rows for a table or a plot).

    >>> [r["kind"] for r in work_table([8], 4)]
    ['diagonal', 'dense']
    """
    return [work_counts(T, n, kind) for T in Ts for kind in KINDS]
