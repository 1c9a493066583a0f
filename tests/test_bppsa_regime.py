"""Lesson 05's CPU regime: both methods timed on the same chains, the grid and crossover read right."""

from __future__ import annotations

import numpy as np
import pytest

from course.bppsa.algorithm import backprop_scan, backprop_sequential
from course.bppsa.timing import crossover_n, random_chain, regime_sweep, speedup_grid
from course.errors import BadInputError
from course.results import ResultSet


def test_the_random_chain_is_rotations_and_both_methods_agree_on_it():
    J, g = random_chain(50, 4, dtype="float64")
    np.testing.assert_allclose(J @ np.swapaxes(J, -1, -2), np.broadcast_to(np.eye(4), J.shape), atol=1e-12)
    np.testing.assert_allclose(backprop_scan(J, g), backprop_sequential(J, g), atol=1e-10)


def test_the_sweep_times_both_methods_for_every_pair_and_counts_their_work():
    rs = regime_sweep(ns=[2, 3], Ts=[16, 40], repeat=1, budget_s=0.05)
    assert {(r["method"], r["n"], r["T"]) for r in rs.records} == {
        (m, n, T) for m in ("sequential", "scan") for n in (2, 3) for T in (16, 40)}
    seq = rs.select(method="sequential", n=3, T=40)[0]
    scan = rs.select(method="scan", n=3, T=40)[0]
    assert seq["flops"] == 2 * 9 * 40 and scan["flops"] == 2 * 27 * 80
    assert set(speedup_grid(rs)) == {(2, 16), (3, 16), (2, 40), (3, 40)}


def test_the_crossover_is_the_widest_winning_n_per_length():
    rs = ResultSet("bppsa_regime")
    for T, rows in {10: [(2, 0.5), (4, 2.0)], 20: [(2, 0.1), (4, 0.2), (8, 0.9), (16, 1.5)]}.items():
        for n, scan in rows:
            rs.add(device="cpu", method="sequential", n=n, T=T, median_s=1.0)
            rs.add(device="cpu", method="scan", n=n, T=T, median_s=scan)
    assert crossover_n(rs) == {10: 2, 20: 8}
    assert speedup_grid(rs)[(4, 10)] == pytest.approx(0.5)


@pytest.mark.parametrize("T, n", [(0, 2), (10, 0), (2.5, 2), (10**7, 32)])
def test_bad_or_huge_chains_are_refused_before_allocating(T, n):
    with pytest.raises(BadInputError, match="T|n|numbers"):
        random_chain(T, n)


def test_too_big_pairs_are_noted_not_measured():
    rs = regime_sweep(ns=[2, 4096], Ts=[8], repeat=1, budget_s=0.05)
    assert {r["n"] for r in rs.records} == {2} and "Not measured" in rs.notes[0]
