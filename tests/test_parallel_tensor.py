"""Lesson 06, tensor parallelism: the block split by columns then rows gives exactly the unsplit block's
outputs and gradients (simulated for many shapes, and on 2 and 3 real MPI ranks), two all-reduces a
step, the bytes counted by the simulated ring equal the formula, and bad input is refused."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.backprop.layers import MLP, softmax_cross_entropy
from course.errors import BadInputError
from course.parallel import mpi_unavailable_reason
from course.parallel.collectives import bytes_per_worker
from course.parallel.runs import tensor_parallel_check
from course.parallel.tensor_parallel import (
    column_bounds,
    communication_model_s,
    data_parallel_bytes,
    rank_step,
    run_rank_step,
    simulate_tensor_parallel,
    split_block,
    tensor_parallel_bytes,
)
from course.parallel.timing import tensor_parallel_sweep

needs_mpi = pytest.mark.skipif(mpi_unavailable_reason() is not None,
                               reason=f"MPI cannot start here: {mpi_unavailable_reason()}")


def _numeric_gradients(sizes, x, y, seed, activation, eps=1e-6):
    """Central differences of the unsplit block's mean loss: an oracle that shares no backward code."""
    model = MLP(sizes, activation=activation, dtype="float64", seed=seed)

    def loss(x, y):
        return float(softmax_cross_entropy(model.forward(x), y)[0])

    out = []
    for q in model.parameters():
        g = np.zeros_like(q)
        for i in np.ndindex(q.shape):
            old = q[i]
            q[i] = old + eps
            up = loss(x, y)
            q[i] = old - eps
            down = loss(x, y)
            q[i] = old
            g[i] = (up - down) / (2 * eps)
        out.append(g)
    return out


@settings(max_examples=40, deadline=None)
@given(d_in=st.integers(1, 6), hidden=st.integers(1, 12), d_out=st.integers(2, 5), batch=st.integers(1, 7),
       p=st.integers(1, 6), activation=st.sampled_from(["relu", "tanh", "sigmoid"]), seed=st.integers(0, 2**16))
def test_the_split_block_gives_the_unsplit_blocks_outputs_and_gradients(d_in, hidden, d_out, batch, p,
                                                                        activation, seed):
    p = min(p, hidden)
    sizes = [d_in, hidden, d_out]
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal((batch, d_in)), rng.integers(0, d_out, batch)
    run = simulate_tensor_parallel(sizes, x, y, p, seed=seed, activation=activation)
    model = MLP(sizes, activation=activation, dtype="float64", seed=seed)
    # the oracle: plain numpy on the unsplit weights, written out here
    w1, b1, w2, b2 = model.parameters()
    a = x @ w1 + b1
    h = {"relu": np.maximum(a, 0), "tanh": np.tanh(a), "sigmoid": 1 / (1 + np.exp(-a))}[activation]
    logits = h @ w2 + b2
    np.testing.assert_allclose(run.logits, logits, rtol=1e-12, atol=1e-12)
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    prob = e / e.sum(axis=1, keepdims=True)
    assert run.loss == pytest.approx(float(-np.mean(np.log(prob[np.arange(batch), y]))), rel=1e-12, abs=1e-12)
    dz = (prob - np.eye(d_out)[y]) / batch
    dh = dz @ w2.T
    da = {"relu": dh * (a > 0), "tanh": dh * (1 - h ** 2), "sigmoid": dh * h * (1 - h)}[activation]
    want = [x.T @ da, da.sum(0), h.T @ dz, dz.sum(0)]
    for got, w in zip(run.gradients, want):
        np.testing.assert_allclose(got, w, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(run.dx, da @ w1.T, rtol=1e-10, atol=1e-12)
    assert run.allreduces == 2


def test_the_gradients_match_central_differences_of_the_loss():
    sizes, seed = [3, 5, 4], 7
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((6, 3)), rng.integers(0, 4, 6)
    run = simulate_tensor_parallel(sizes, x, y, p=3, seed=seed, activation="tanh")
    for got, want in zip(run.gradients, _numeric_gradients(sizes, x, y, seed, "tanh")):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("p", [1, 2, 3, 5])
def test_the_shards_are_the_columns_of_w1_and_the_rows_of_w2_and_cover_them_once(p):
    sizes = [4, 11, 3]
    model = MLP(sizes, dtype="float64", seed=2)
    w1, b1, w2, b2 = model.parameters()
    shards = split_block(sizes, p, seed=2)
    np.testing.assert_array_equal(np.concatenate([s.W1 for s in shards], axis=1), w1)
    np.testing.assert_array_equal(np.concatenate([s.b1 for s in shards]), b1)
    np.testing.assert_array_equal(np.concatenate([s.W2 for s in shards], axis=0), w2)
    assert all(np.array_equal(s.b2, b2) for s in shards)
    widths = [s.hi - s.lo for s in shards]
    assert sum(widths) == 11 and max(widths) - min(widths) <= 1
    assert [s.W1.shape for s in split_block(sizes, p, rank=p - 1, seed=2)] == [shards[-1].W1.shape]


@pytest.mark.parametrize("p", [2, 3, 4, 7])
def test_the_bytes_counted_by_the_simulated_ring_equal_the_formula(p):
    sizes, batch = [5, 14, 3], 6
    rng = np.random.default_rng(p)
    run = simulate_tensor_parallel(sizes, rng.standard_normal((batch, 5)), rng.integers(0, 3, batch), p)
    # one all-reduce of the logits' shares (batch x d_out) and one of dx's (batch x d_in)
    want = bytes_per_worker("ring", batch * 3, p) + bytes_per_worker("ring", batch * 5, p)
    assert tensor_parallel_bytes(sizes, batch, p) == want
    assert abs(run.bytes_sent.max() - want) < 8 * p and abs(run.bytes_sent.min() - want) < 8 * p
    assert data_parallel_bytes(sizes, p) == bytes_per_worker("ring", 5 * 14 + 14 + 14 * 3 + 3, p)


def test_tensor_parallel_bytes_do_not_grow_with_the_width_and_data_parallel_bytes_do():
    assert tensor_parallel_bytes([64, 128, 64], 32, 4) == tensor_parallel_bytes([64, 8192, 64], 32, 4)
    assert data_parallel_bytes([64, 8192, 64], 4) > 60 * data_parallel_bytes([64, 128, 64], 4)
    assert communication_model_s("data", [64, 8192, 64], 32, 4, 0.0, 1e-9) == pytest.approx(
        data_parallel_bytes([64, 8192, 64], 4) * 1e-9)
    assert communication_model_s("tensor", [64, 8192, 64], 32, 4, 1e-6, 0.0) == pytest.approx(2 * 6 * 1e-6)


def test_one_rank_step_yields_exactly_two_shares_and_one_rank_alone_needs_no_sum():
    sizes = [4, 6, 3]
    x, y = np.ones((2, 4)), np.array([0, 2])
    (shard,) = split_block(sizes, 1)
    shares = []

    def identity(v):
        shares.append(v.size)
        return v

    loss, logits, dx = run_rank_step(rank_step(shard, x, y), identity)
    assert shares == [2 * 3, 2 * 4] and logits.shape == (2, 3) and dx.shape == (2, 4) and np.isfinite(loss)


@pytest.mark.parametrize("call, match", [
    (lambda: column_bounds(3, 4), "at least one column"),
    (lambda: split_block([4, 6], 2), "three widths"),
    (lambda: split_block([4, 6, 3], 2, activation="gelu"), "activation"),
    (lambda: simulate_tensor_parallel([4, 6, 3], np.ones((2, 5)), np.array([0, 1]), 2), r"\(batch, 4\)"),
    (lambda: simulate_tensor_parallel([4, 6, 3], np.ones((2, 4)), np.array([0, 3]), 2), "labels"),
    (lambda: communication_model_s("pipe", [4, 6, 3], 2, 2, 0.0, 0.0), "tensor"),
    (lambda: tensor_parallel_check(3, sizes=(4, 2, 3)), "at least one column"),
    (lambda: tensor_parallel_sweep((1, 4), sizes=(4, 8, 3), batch=3), "batch >= p"),
])
def test_bad_input_gets_a_clear_error_before_anything_runs(call, match):
    with pytest.raises(BadInputError, match=match):
        call()


@needs_mpi
@pytest.mark.parametrize("p", [2, 3])
def test_on_real_mpi_ranks_outputs_and_gradients_equal_one_process(p):
    out = tensor_parallel_check(p, sizes=(7, 10, 4), batch=9, progress=None)
    assert out["max_abs_diff_logits"] < 1e-12
    assert out["max_abs_diff_dx"] < 1e-12
    assert out["max_abs_diff_gradients"] < 1e-12
    assert out["ranks_agree"]


@needs_mpi
def test_the_timing_run_records_both_schemes_with_their_bytes():
    rs = tensor_parallel_sweep((2,), sizes=(8, 16, 8), batch=8, repeat=1, progress=None)
    assert {(r["scheme"], r["part"]) for r in rs.records} == {
        (s, part) for s in ("tensor", "data") for part in ("step", "communicate")}
    for r in rs.records:
        assert r["median_s"] > 0 and r["p"] == 2
        tp, dp = tensor_parallel_bytes([8, 16, 8], 8, 2), data_parallel_bytes([8, 16, 8], 2)
        assert r["bytes_sent"] == (tp if r["scheme"] == "tensor" else dp)
