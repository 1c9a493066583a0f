"""The last bad inputs and edge cases of lessons 06 and 07, one test per example: each gets a clear course
error naming what was wrong (before anything is allocated or looped over), or the right answer, checked
against the sequential loop or a direct computation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.errors import BadInputError, CourseError, DeviceMemoryError
from course.parallel import average_gradients
from course.parallel.checks import check_ring_chunks
from course.parallel.collectives import naive_allreduce, ring_allreduce, tree_allreduce
from course.parallel.model import model_time
from course.parallel.plots import bytes_figure
from course.recurrences import linear as rec
from course.recurrences.selective import gradient_check, init_params
from course.recurrences.timing import recurrence_sweep

SOLVERS = [rec.recurrence_loop, rec.recurrence_scan, rec.recurrence_closed_form, rec.recurrence_log_space]


# ------------------------------------------------------------------------------------------ lesson 06

@pytest.mark.parametrize("grads, sizes, match", [
    ([[np.ones(2)], [np.ones(2)]], [4], "one shard size per worker"),
    ([[np.ones(2)]], [4, 4], "one shard size per worker"),
    ([], [], "got 0 gradient list"),
    ([[np.ones(2)], [np.ones(2), np.ones(1)]], [1, 1], "same gradients"),
    ([[np.ones(2)], [np.ones(3)]], [1, 1], "different shapes"),
    ([[np.ones(2)], [np.ones(2)]], [4, 0], "shard_sizes"),
])
def test_average_gradients_refuses_lists_that_do_not_match(grads, sizes, match):
    with pytest.raises(BadInputError, match=match):
        average_gradients(grads, sizes)


def test_average_gradients_weights_every_worker():
    got = average_gradients([[np.array([1.0])], [np.array([4.0])]], [1, 2])
    assert got[0].tolist() == [3.0]


@pytest.mark.parametrize("alpha, beta", [(1e-6, -1e-9), (-1e-6, 1e-9), (float("nan"), 1e-9), (1e-6, float("inf")),
                                         ("1e-6", 1e-9), (True, 1e-9)])
def test_model_time_refuses_negative_or_non_finite_terms(alpha, beta):
    with pytest.raises(BadInputError, match="alpha|beta"):
        model_time("ring", 4, 1000, alpha, beta)
    assert model_time("ring", 4, 1000, 0.0, 1e-9) == pytest.approx(1500e-9)


def test_naive_allreduce_refuses_a_root_that_is_not_a_worker():
    for root in (3, -1, 1.5):
        with pytest.raises(BadInputError, match="root"):
            naive_allreduce(np.ones((3, 2)), root=root)
    np.testing.assert_array_equal(naive_allreduce(np.eye(3), root=2).result, np.ones((3, 3)))


def test_a_traced_simulation_that_would_not_fit_is_refused_at_once():
    with pytest.raises(DeviceMemoryError, match="trace=False"):   # it used to fail after 48 s of copying
        naive_allreduce(np.ones((100_000, 2)))
    assert naive_allreduce(np.ones((1000, 2)), trace=False).result[0].tolist() == [1000.0, 1000.0]


@pytest.mark.parametrize("run", [ring_allreduce, tree_allreduce, naive_allreduce])
def test_broadcast_views_too_big_for_memory_are_refused_before_allocating(run):
    with pytest.raises(DeviceMemoryError, match="GiB"):
        run(np.broadcast_to(1.0, (2, 10 ** 12)), trace=False)


def test_a_ring_of_too_many_workers_is_refused_instead_of_looping_for_hours():
    with pytest.raises(BadInputError, match="messages"):
        ring_allreduce(np.broadcast_to(1.0, (2000, 2)), trace=False)


def test_bytes_figure_refuses_a_p_max_it_cannot_simulate():
    for p_max in (10 ** 6, 0, 2.5):
        with pytest.raises(BadInputError, match="p_max"):
            bytes_figure(p_max=p_max)


@pytest.mark.parametrize("answer", [3, None, "0 1", (0,), (0, 1, 2), (0.5, 1), (99, 0), (True, False)])
def test_a_ring_chunk_function_returning_the_wrong_type_gets_the_checks_message(answer, capsys):
    assert check_ring_chunks(lambda rank, step, p: answer) is False
    out = capsys.readouterr().out
    assert "return a pair of chunk numbers" in out and "Traceback" not in out


# ------------------------------------------------------------------------------------------ lesson 07

def test_gradient_check_refuses_to_check_no_entries():
    params = init_params(2, 3, dtype="float64", seed=0)
    x = np.random.default_rng(0).standard_normal((5, 2))
    for entries in (0, -1, 2.5):
        with pytest.raises(BadInputError, match="entries"):
            gradient_check(params, x, np.zeros((1, 1)), entries=entries)


def test_the_closed_form_gives_the_loops_values_where_a_is_zero():
    a = np.array([[0.5, 0.0], [0.0, 2.0], [3.0, 0.0], [0.5, 1.5]])
    b = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
    want = rec.recurrence_loop(a, b, h0=np.array([2.0, -1.0]))
    np.testing.assert_allclose(rec.recurrence_closed_form(a, b, h0=np.array([2.0, -1.0])), want)


def test_the_log_space_solver_refuses_a_zero_with_the_reason():
    with pytest.raises(BadInputError, match="a_t != 0.*resets the state"):
        rec.recurrence_log_space([0.5, 0.0, 2.0], [1.0, 1.0, 1.0])


@settings(max_examples=40, deadline=None)
@given(T=st.integers(1, 12), n=st.integers(1, 3), zeros=st.lists(st.integers(0, 35), max_size=6),
       seed=st.integers(0, 10 ** 6))
def test_zeros_anywhere_in_a_give_the_loops_values(T, n, zeros, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(0.5, 1.5, (T, n)), rng.standard_normal((T, n))
    a.reshape(-1)[[z % a.size for z in zeros]] = 0.0
    h0 = rng.standard_normal(n)
    np.testing.assert_allclose(rec.recurrence_closed_form(a, b, h0), rec.recurrence_loop(a, b, h0),
                               rtol=1e-9, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(T=st.integers(1, 12), at=st.integers(0, 11), seed=st.integers(0, 10 ** 6))
def test_a_nan_in_b_propagates_in_log_space_as_in_the_loop(T, at, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(-1.5, 1.5, (T, 2)), rng.standard_normal((T, 2))
    b[at % T, 0] = np.nan
    want = rec.recurrence_loop(a, b)
    got = rec.recurrence_log_space(a, b)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[~np.isnan(want)], want[~np.isnan(want)], rtol=1e-7, atol=1e-9)


def test_a_nan_h0_propagates_in_log_space():
    assert np.isnan(rec.recurrence_log_space([0.5, 0.5], [1.0, 1.0], h0=float("nan"))).all()


@pytest.mark.parametrize("solve", SOLVERS)
def test_every_solver_takes_the_documented_scalar_h0(solve):
    rng = np.random.default_rng(1)
    a, b = rng.uniform(0.5, 1.5, (6, 3)), rng.standard_normal((6, 3))
    want = rec.recurrence_loop(a, b, h0=np.full(3, 1.5))
    np.testing.assert_allclose(solve(a, b, h0=1.5), want, rtol=1e-9)


@pytest.mark.parametrize("solve", SOLVERS)
def test_broadcast_views_too_big_for_memory_are_refused_by_every_solver(solve):
    big = np.broadcast_to(1.0, (10 ** 12,))
    with pytest.raises(DeviceMemoryError, match="GiB"):
        solve(big, big)


@pytest.mark.parametrize("kinds, match", [(["bogus"], "diagonal"), ("diagonal", "list"), ([], "kinds")])
def test_recurrence_sweep_names_the_known_kinds(kinds, match):
    with pytest.raises(BadInputError, match=match):
        recurrence_sweep([8], [2], kinds=kinds)


def test_recurrence_sweep_names_the_known_methods():
    with pytest.raises(CourseError, match="loop"):
        recurrence_sweep([8], [2], kinds=["diagonal"], methods=["bogus"])
