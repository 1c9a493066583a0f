"""Work and span counts, dense vs diagonal, and the timing harness (no speed is asserted)."""

from __future__ import annotations

import numpy as np
import pytest

from course.bppsa.algorithm import work_counts as bppsa_work_counts
from course.errors import BadInputError
from course.recurrences.timing import (
    DENSE_SCAN_MAX_FLOPS,
    LOOP_MAX_T,
    crossover,
    recurrence_function,
    recurrence_input,
    recurrence_sweep,
    time_recurrence,
)
from course.recurrences.work import combine_flops, work_counts, work_table
from course.scan.algorithms import blelloch_scan


@pytest.mark.parametrize("T", [1, 2, 7, 64, 1000, 2**16])
def test_diagonal_scan_does_a_constant_factor_more_work(T):
    c = work_counts(T, 32, "diagonal")
    assert c["steps_loop"] == T and c["flops_loop"] == 2 * 32 * T
    if T >= 64:
        assert 1.9 < c["combine_ratio"] <= 2 and 2.8 < c["work_ratio"] <= 3
    assert c["steps_scan"] == 2 * int(np.ceil(np.log2(T))) if T > 1 else c["steps_scan"] == 0


def test_combine_count_is_what_the_scan_really_does():
    T = 100
    _, tr = blelloch_scan(np.ones((T, 2)), op=lambda a, b: a + b, identity=0, exclusive=False, trace=True)
    c = work_counts(T, 4, "diagonal")
    assert c["combines"] == tr.work and c["steps_scan"] == tr.steps


@pytest.mark.parametrize("n", [2, 16, 64])
def test_dense_scan_work_grows_with_n_and_matches_lesson_05(n):
    dense, diag = work_counts(4096, n, "dense"), work_counts(4096, n, "diagonal")
    assert dense["flops_scan"] == bppsa_work_counts(4096, n)["flops_scan"]
    assert dense["work_ratio"] == pytest.approx(2 * n, rel=0.01)
    assert dense["work_ratio"] / diag["work_ratio"] == pytest.approx(2 * n / 3, rel=0.01)


def test_combine_flops_and_table():
    assert combine_flops(8) == 24 and combine_flops(8, "dense") == 1024
    assert [(r["T"], r["kind"]) for r in work_table([4, 8], 2)] == [
        (4, "diagonal"), (4, "dense"), (8, "diagonal"), (8, "dense")]


@pytest.mark.parametrize("call, match", [
    (lambda: work_counts(0, 4), "T must be"),
    (lambda: work_counts(8, 4, "sparse"), "kind must be"),
    (lambda: combine_flops(True), "n must be"),
    (lambda: recurrence_input(4, 2, "banded"), "kind must be"),
    (lambda: recurrence_function("dense", "torch loop", recurrence_input(4, 2, "dense")), "no dense"),
    (lambda: time_recurrence("diagonal", "loop", LOOP_MAX_T + 1, 2), "Python loop"),
    (lambda: time_recurrence("diagonal", "torch loop", LOOP_MAX_T + 1, 2), "PyTorch loop"),
    (lambda: time_recurrence("dense", "scan", 8192, 512), "flops per call"),
])
def test_bad_requests_get_clear_errors(call, match):
    with pytest.raises(BadInputError, match=match):
        call()


def test_every_cpu_implementation_computes_the_recurrence():
    a, b = recurrence_input(50, 3, "diagonal", "float64")
    want = recurrence_function("diagonal", "loop", (a, b))()
    for method in ("scan", "torch loop"):
        try:
            got = recurrence_function("diagonal", method, (a, b))()
        except BadInputError:
            continue                                      # no PyTorch here
        np.testing.assert_allclose(np.asarray(got), want, atol=1e-10)
    J, g = recurrence_input(20, 4, "dense", "float64")
    np.testing.assert_allclose(recurrence_function("dense", "scan", (J, g))(),
                               recurrence_function("dense", "loop", (J, g))(), atol=1e-10)


def test_sweep_records_work_ratio_and_notes_what_it_skipped():
    rs = recurrence_sweep([16, 64], [4], methods=["loop", "scan"], repeat=1, budget_s=0.05)
    assert {(r["kind"], r["method"]) for r in rs.records} == {
        ("diagonal", "loop"), ("diagonal", "scan"), ("dense", "loop"), ("dense", "scan")}
    assert all(r["work_ratio"] > 1 and r["device"] == "cpu" for r in rs.records)
    assert DENSE_SCAN_MAX_FLOPS["cpu"] > 0
    big = recurrence_sweep([LOOP_MAX_T * 2], [2], kinds=["diagonal"], methods=["loop"], repeat=1)
    assert not big.records and "Python loop" in big.notes[0]


def test_crossover_needs_the_scan_to_stay_ahead():
    from course.results import ResultSet

    rs = ResultSet("demo")
    for T, loop, scan in [(8, 1, 2), (64, 4, 3), (512, 30, 40)]:
        rs.add(device="cpu", kind="diagonal", n=4, T=T, method="loop", median_s=loop)
        rs.add(device="cpu", kind="diagonal", n=4, T=T, method="scan", median_s=scan)
    assert crossover(rs, "cpu", "diagonal", 4) is None
    assert crossover(rs, "gpu", "diagonal", 4) is None

