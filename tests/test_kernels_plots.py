"""The per-thread pictures: one panel per barrier phase, one row per thread, the arrays side by side."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from course.errors import BadInputError
from course.kernels import EXERCISES, draw_trace, show, simulate
from course.kernels.plots import MAX_DRAWN_THREADS
from course.plots import PALETTE


def _drawn_thread_by_thread(name):
    t = EXERCISES[name].threads
    return int(np.prod(t if isinstance(t, tuple) else (t,))) <= MAX_DRAWN_THREADS


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(n for n in EXERCISES if _drawn_thread_by_thread(n)))
def test_each_reference_is_drawn_with_a_panel_per_phase(name):
    ex = EXERCISES[name]
    _, tr = simulate(ex.reference, ex.blocks, ex.threads, **ex.inputs(1))
    fig = show(name)
    assert len(fig.axes) == min(len({a.phase for a in tr.accesses}), 10)
    rows = len(tr.final_phase)
    assert len(fig.axes[0].get_yticklabels()) == rows
    assert "simulator" in " ".join(t.get_text() for t in fig.texts)


def test_a_launch_of_many_threads_is_drawn_warp_by_warp():
    """256 threads would be 256 rows: the figure colours each element by the warp that read it instead, and says
    how many sectors a warp touched (4 coalesced, 16 with threadIdx.x on the row)."""
    def x_on_row(out, a, s):
        row, col = cuda.grid(2)
        out[row, col] = a[row, col] * s[row]
    good, bad = show("scale_rows"), show("scale_rows", x_on_row)
    assert len(good.axes) == 1 and "at most 4 sectors" in good.takeaway
    assert "at most 16 sectors" in bad.takeaway


def test_a_stub_draws_nothing_and_says_why(capsys):
    def stub(out, a):
        raise NotImplementedError
    assert show("map", stub) is None
    assert "NotImplementedError" in capsys.readouterr().out


def test_a_failing_kernel_is_drawn_up_to_its_failure_with_the_bad_access_marked():
    def unguarded(out, a, n):
        i = cuda.grid(1)
        out[i] = a[i]
    fig = show("guard", unguarded)
    assert "stopped" in fig._suptitle.get_text()
    reds = [ln for ln in fig.axes[0].lines if ln.get_color() == PALETTE["vermillion"]]
    assert reds


def test_draw_trace_of_a_two_dimensional_launch():
    def transpose(out, a):
        i, j = cuda.grid(2)
        out[j, i] = a[i, j]
    _, tr = simulate(transpose, 1, (2, 2), out=np.zeros((2, 2)), a=np.ones((2, 2)))
    fig = draw_trace(tr, "transpose")
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()][1] == "b(0,0) t(0,1)"


def test_an_unknown_exercise_is_refused():
    with pytest.raises(BadInputError, match="exercise must be one of"):
        show("nope")
