"""The copy-free BPPSA backward (course.bppsa.fast) against the sequential backward and the teaching scan."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.bppsa.algorithm import backprop_scan, backprop_sequential
from course.bppsa.fast import backprop_chunked, chunked_steps, default_chunk, rnn_hidden_gradients
from course.bppsa.models import MLPChain, TanhRNN
from course.errors import BadInputError

CHUNKS = st.one_of(st.none(), st.integers(1, 40))


def _close(a, b, tol=1e-12):
    scale = max(1.0, float(np.max(np.abs(b))))
    assert np.max(np.abs(a - b)) <= tol * scale, np.max(np.abs(a - b))


@settings(max_examples=40, deadline=None)
@given(T=st.integers(1, 200), n=st.integers(1, 7), B=st.integers(1, 5), chunk=CHUNKS, seed=st.integers(0, 999))
def test_chunked_backward_equals_sequential_and_the_teaching_scan(T, n, B, chunk, seed):
    rng = np.random.default_rng(seed)
    J = rng.standard_normal((T, B, n, n)) / np.sqrt(n)
    g = rng.standard_normal((B, n))
    got = backprop_chunked(J, g, chunk=chunk)
    _close(got, backprop_sequential(J, g))
    _close(got, backprop_scan(J, g))


@settings(max_examples=20, deadline=None)
@given(T=st.integers(1, 120), n=st.integers(1, 6), chunk=CHUNKS, seed=st.integers(0, 999))
def test_an_unbatched_chain_keeps_its_shape(T, n, chunk, seed):
    rng = np.random.default_rng(seed)
    J, g = rng.standard_normal((T, n, n)) / np.sqrt(n), rng.standard_normal(n)
    got = backprop_chunked(J, g, chunk=chunk)
    assert got.shape == (T + 1, n)
    _close(got, backprop_sequential(J, g))


@settings(max_examples=40, deadline=None)
@given(T=st.integers(1, 300), n=st.integers(1, 8), B=st.integers(1, 6), chunk=CHUNKS, seed=st.integers(0, 999))
def test_rnn_gradients_without_jacobians_equal_sequential(T, n, B, chunk, seed):
    rng = np.random.default_rng(seed)
    d = rng.uniform(0, 1, (T, B, n))
    W = rng.standard_normal((n, n)) / np.sqrt(n)
    g = rng.standard_normal((B, n))
    _close(rnn_hidden_gradients(d, W, g, chunk=chunk), backprop_sequential(d[..., :, None] * W, g))


@settings(max_examples=15, deadline=None)
@given(T=st.integers(1, 300), h=st.integers(1, 12), B=st.integers(1, 6), seed=st.integers(0, 999))
def test_rnn_fast_backward_gives_every_gradient_of_the_sequential_one(T, h, B, seed):
    rnn = TanhRNN(1, h, seed=seed, dtype="float64")
    x, y = rnn.example_data(T, B, seed=seed)
    _, cache = rnn.forward(x, y)
    ref, got = rnn.backward(cache, "sequential"), rnn.backward(cache, "fast")
    assert set(got) == set(ref)
    for name in ref:
        assert got[name].shape == ref[name].shape, name
        _close(got[name], ref[name])


def test_mlp_fast_backward_equals_sequential():
    mlp = MLPChain(width=6, depth=9, seed=3, dtype="float64")
    x, y = mlp.example_data(batch=4)
    _, cache = mlp.forward(x, y)
    ref, got = mlp.backward(cache, "sequential"), mlp.backward(cache, "fast")
    for name in ref:
        _close(got[name], ref[name])


def test_a_wrong_chunk_is_caught_by_the_checker():
    """The oracle can fail: reversing the Jacobians' order changes the gradients."""
    rng = np.random.default_rng(0)
    J, g = rng.standard_normal((20, 2, 3, 3)), rng.standard_normal((2, 3))
    assert not np.allclose(backprop_chunked(J[::-1], g, chunk=4), backprop_sequential(J, g))


def test_counts_and_default_chunk():
    assert default_chunk(30000) == 87 and chunked_steps(30000) < 30000 // 50
    assert chunked_steps(1) == 7


def test_bad_input_is_refused_with_the_shapes_named():
    with pytest.raises(BadInputError, match="W"):
        rnn_hidden_gradients(np.ones((3, 2, 4)), np.ones((3, 3)), np.ones((2, 4)))
    with pytest.raises(BadInputError, match="chunk"):
        backprop_chunked(np.ones((3, 2, 2)), np.ones(2), chunk=0)
    with pytest.raises(BadInputError, match="floating"):
        rnn_hidden_gradients(np.ones((3, 2, 4), dtype=int), np.ones((4, 4)), np.ones((2, 4)))


@settings(max_examples=30, deadline=None)
@given(T=st.integers(1, 150), n=st.integers(1, 6), B=st.integers(1, 4), chunk=CHUNKS, seed=st.integers(0, 999))
def test_a_plan_reused_for_new_inputs_gives_the_gradients_of_each(T, n, B, chunk, seed):
    from course.bppsa.fast import RNNBackwardPlan

    rng = np.random.default_rng(seed)
    W = rng.standard_normal((n, n)) / np.sqrt(n)
    plan = RNNBackwardPlan(T, B, n, W, chunk=chunk)
    for _ in range(2):
        d, g = rng.uniform(0, 1, (T, B, n)), rng.standard_normal((B, n))
        _close(plan(d, g), backprop_sequential(d[..., :, None] * W, g))


def test_a_plan_refuses_another_shape_and_a_graph_on_the_cpu():
    from course.bppsa.fast import RNNBackwardPlan

    plan = RNNBackwardPlan(5, 2, 3, np.eye(3))
    with pytest.raises(BadInputError, match="new plan"):
        plan(np.ones((6, 2, 3)), np.ones((2, 3)))
    with pytest.raises(BadInputError, match="GPU"):
        RNNBackwardPlan(5, 2, 3, np.eye(3), graph=True)


@pytest.mark.gpu
@pytest.mark.parametrize("T", [1, 37, 3000])
def test_the_cuda_graph_replays_the_same_gradients(T):
    import cupy as cp

    from course.bppsa.fast import RNNBackwardPlan

    rng = np.random.default_rng(T)
    W = cp.asarray(rng.standard_normal((20, 20)) / np.sqrt(20))
    plan = RNNBackwardPlan(T, 16, 20, W, graph=True)
    for _ in range(2):                       # a second replay with new inputs
        d, g = cp.asarray(rng.uniform(0, 1, (T, 16, 20))), cp.asarray(rng.standard_normal((16, 20)))
        got = cp.asnumpy(plan(d, g))
        _close(got, cp.asnumpy(rnn_hidden_gradients(d, W, g)))
    assert plan.fused                        # n = 20: the chunk kernels (course.bppsa.chunk_kernels)


@pytest.mark.gpu
def test_rnn_fast_backward_on_the_gpu_equals_numpy():
    import course

    cpu = TanhRNN(1, 20, seed=4, dtype="float64")
    gpu = TanhRNN(1, 20, seed=4, device="gpu", dtype="float64")
    x, y = cpu.example_data(500, 16, seed=5)
    _, cache_c = cpu.forward(x, y)
    _, cache_g = gpu.forward(course.to_device(x, "gpu"), course.to_device(y, "gpu"))
    ref, got = cpu.backward(cache_c, "sequential"), gpu.backward(cache_g, "fast")
    for name in ref:
        _close(course.to_numpy(got[name]), ref[name], 1e-10)


def test_the_sweep_records_the_fast_backward_with_its_baselines():
    from course.bppsa.timing import rnn_sweep, speedups

    rs = rnn_sweep((20, 50), hidden_size=4, batch=2, devices=["cpu"], methods=("sequential", "scan", "fast"),
                   include_torch=False, repeat=2, budget_s=None)
    fast = rs.select(method="fast")
    assert [r["T"] for r in fast] == [20, 50]
    assert all(r["max_grad_diff"] < 1e-4 for r in fast)       # float32: every method's W_hh gradient agrees
    Ts, ratios = speedups(rs, "cpu", over="sequential", method="fast")
    assert list(Ts) == [20, 50] and (ratios > 0).all()
