"""Lesson 06, the simulated all-reduces: every algorithm gives the sum on every worker, the ring's
schedule, the bytes each worker sends, and the errors for bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.errors import BadInputError
from course.parallel import (
    ALGORITHMS,
    allreduce,
    bytes_per_worker,
    chunk_bounds,
    message_counts,
    ring_allreduce,
    ring_chunks,
)


@settings(max_examples=60, deadline=None)
@given(p=st.integers(1, 8), n=st.integers(1, 40), alg=st.sampled_from(ALGORITHMS),
       dtype=st.sampled_from(["float32", "float64"]), seed=st.integers(0, 2**16))
def test_every_algorithm_leaves_the_sum_on_every_worker(p, n, alg, dtype, seed):
    x = np.random.default_rng(seed).standard_normal((p, n)).astype(dtype)
    run = allreduce(x, alg)
    want = x.astype(np.float64).sum(axis=0)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(run.result, np.broadcast_to(want, (p, n)), rtol=tol, atol=tol * p)
    assert run.result.dtype == x.dtype


@pytest.mark.parametrize("p", range(1, 9))
def test_the_ring_takes_2_p_minus_1_steps_and_every_worker_ends_with_identical_bits(p):
    run = ring_allreduce(np.random.default_rng(p).standard_normal((p, 11)))
    assert len(run.steps) == 2 * (p - 1) == message_counts("ring", p)
    assert all(np.array_equal(run.result[0], row) for row in run.result)
    if p > 1:
        assert run.steps[p - 2].phase == "reduce-scatter" and run.steps[-1].phase == "all-gather"
        assert (run.steps[-1].contributions == p).all()


@pytest.mark.parametrize("p", range(2, 9))
def test_after_the_reduce_scatter_worker_r_holds_the_full_sum_of_chunk_r_plus_1(p):
    n = 3 * p + 1
    run = ring_allreduce(np.random.default_rng(0).standard_normal((p, n)))
    b = chunk_bounds(n, p)
    contrib = run.steps[p - 2].contributions
    for r in range(p):
        c = (r + 1) % p
        assert (contrib[r, b[c]:b[c + 1]] == p).all()


def test_ring_chunks_sends_right_what_the_left_neighbour_sent_one_step_earlier():
    for p in range(2, 9):
        for step in range(1, 2 * (p - 1)):
            for r in range(p):
                if step == p - 1:          # the all-gather starts with the chunk just completed
                    continue
                assert ring_chunks(r, step, p)[0] == ring_chunks((r - 1) % p, step - 1, p)[0]


@pytest.mark.parametrize("p", [1, 2, 3, 4, 8])
def test_bytes_counted_in_the_simulation_match_the_formulas(p):
    n = 840                                   # divisible by every p here: the ring formula is exact
    for alg in ALGORITHMS:
        run = allreduce(np.zeros((p, n)), alg, trace=False)
        assert run.bytes_sent().max() == pytest.approx(bytes_per_worker(alg, n, p, 8))
    assert bytes_per_worker("ring", n, p, 8) <= 2 * n * 8
    assert bytes_per_worker("naive", n, p, 8) == (p - 1) * n * 8


def test_with_n_not_divisible_by_p_the_ring_still_sends_about_2_p_minus_1_over_p_n():
    run = ring_allreduce(np.zeros((4, 10)), trace=False)
    assert run.sent.sum() == 2 * 3 * 10                   # every element crosses 2(p-1) links in all
    assert abs(run.sent.max() - bytes_per_worker("ring", 10, 4, 1)) < 10 / 4 + 1


def test_chunks_cover_the_vector_and_differ_by_at_most_one():
    for n in (1, 5, 10, 33):
        for p in range(1, 9):
            b = chunk_bounds(n, p)
            assert b[0] == 0 and b[-1] == n and np.ptp(np.diff(b)) <= 1


@pytest.mark.parametrize("bad, match", [
    (np.zeros((0, 4)), "p .* >= 1"),
    (np.zeros((3, 0)), "N .* >= 1"),
    (np.ones((3, 4), dtype=np.int64), "floating-point"),
    (np.ones(4), "2-D"),
])
def test_bad_vectors_get_a_clear_error(bad, match):
    with pytest.raises(BadInputError, match=match):
        ring_allreduce(bad)


def test_bad_counts_and_names_get_a_clear_error():
    with pytest.raises(BadInputError, match="p"):
        bytes_per_worker("ring", 10, 0)
    with pytest.raises(BadInputError, match="N"):
        bytes_per_worker("ring", 0, 4)
    with pytest.raises(BadInputError, match="algorithm must be one of 'naive', 'tree', 'ring'"):
        allreduce(np.ones((2, 2)), "butterfly")
    with pytest.raises(BadInputError, match="step"):
        ring_chunks(0, 6, 4)


class _Rank:
    """A communicator's size and rank, no messages: enough for the MPI collectives' door, which refuses first."""

    def __init__(self, p, r):
        self.p, self.r = p, r

    def Get_size(self):
        return self.p

    def Get_rank(self):
        return self.r

    def Sendrecv(self, *args, **kwargs):           # never reached: the door refuses before a message
        raise AssertionError("a refused call sent a message")


def test_the_mpi_collectives_refuse_a_shard_or_out_buffer_that_would_be_broadcast():
    from course.parallel.ring_mpi import ring_all_gather_mpi, ring_allreduce_mpi

    # rank 0 of 2 owns 3 of n = 6 elements: one number used to be broadcast over its whole chunk
    with pytest.raises(BadInputError, match="holds 3 elements"):
        ring_all_gather_mpi(_Rank(2, 0), np.ones(1), 6)
    with pytest.raises(BadInputError, match="out must have x's shape"):
        ring_allreduce_mpi(_Rank(2, 0), np.ones(4), np.empty(8))
    with pytest.raises(BadInputError, match="comm must be an MPI communicator"):
        ring_allreduce_mpi(None, np.ones(4))
    with pytest.raises(BadInputError, match="contiguous 1-D numpy array of floats"):
        ring_allreduce_mpi(_Rank(2, 0), np.ones((2, 2)))
    assert ring_allreduce_mpi(_Rank(1, 0), np.arange(3.0)).tolist() == [0.0, 1.0, 2.0]   # one rank: x itself
