"""Learner kernels that never end, or that kill a simulated thread, to the simulator and to the checks:
each returns within its budget with a message saying what happened, never a hang and never a success."""

from __future__ import annotations

import time

import numpy as np
import pytest
from numba import cuda

from course.kernels import KernelFailed, simulate
from course.kernels import simulator as sim
from course.kernels.checks import check_kernel_block_sum, check_kernel_map
from course.kernels.trace import KernelRunawayError

NEVER_ENDS = "did not finish within"


def spins(out, a):
    while True:
        pass


def one_thread_spins_the_others_wait(out, a, n):
    if cuda.threadIdx.x == 0:
        k = 0
        while k < 10:
            out[0] = 0.0 * k       # k is never updated
    cuda.syncthreads()


def sleeps_in_a_loop(out, a):
    while True:
        time.sleep(0.01)


def doubles(out, a):
    i = cuda.grid(1)
    out[i] = a[i] * 2.0


def test_while_true_pass_stops_within_its_step_budget():
    with pytest.raises(KernelFailed, match=NEVER_ENDS + ".*look for a loop whose condition never changes") as exc:
        simulate(spins, 1, 4, out=np.zeros(4), a=np.ones(4))
    assert isinstance(exc.value.cause, KernelRunawayError)


def test_a_slow_endless_loop_stops_at_the_deadline(monkeypatch):
    monkeypatch.setattr(sim, "MAX_SECONDS", 0.5)
    with pytest.raises(KernelFailed, match=NEVER_ENDS + r" 0.5 s"):
        simulate(sleeps_in_a_loop, 1, 2, out=np.zeros(2), a=np.ones(2))


def test_a_check_given_an_endless_kernel_says_so(capsys):
    assert check_kernel_map(spins) is False
    out = capsys.readouterr().out
    assert NEVER_ENDS in out and "look for a loop whose condition never changes" in out
    assert "Traceback" not in out


@pytest.mark.slow
def test_one_thread_looping_while_its_block_waits_at_the_barrier_is_stopped(capsys):
    assert check_kernel_block_sum(one_thread_spins_the_others_wait) is False
    assert "look for a loop whose condition never changes" in capsys.readouterr().out


def test_a_thread_that_dies_on_a_datetime64_array_is_a_failure_not_a_success():
    """numba's simulator rebuilds a thread's exception from its message; numpy's ufunc type errors
    cannot be rebuilt so, and the thread used to die silently with the outputs untouched."""
    with pytest.raises(KernelFailed, match="multiply") as exc:
        simulate(doubles, 1, 4, out=np.zeros(4), a=np.arange(4).astype("datetime64[D]"))
    assert isinstance(exc.value.cause, TypeError)


def test_a_kernel_that_ends_is_unaffected_by_the_budget():
    res, trace = simulate(doubles, 1, 4, out=np.zeros(4), a=np.arange(4.0))
    np.testing.assert_array_equal(res["out"], 2 * np.arange(4.0))
    assert len(trace.accesses) == 8


def test_an_endless_loop_in_a_helper_from_another_file_stops_too(tmp_path, monkeypatch):
    (tmp_path / "learner_helpers.py").write_text("def wait_forever():\n    while True:\n        pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import learner_helpers

    def calls_a_helper(out, a):
        learner_helpers.wait_forever()

    with pytest.raises(KernelFailed, match=NEVER_ENDS):
        simulate(calls_a_helper, 1, 2, out=np.zeros(2), a=np.ones(2))
