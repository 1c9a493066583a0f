"""BPPSA's chunk phases as one kernel each (course.bppsa.chunk_kernels): the NumPy twins against the plain
sequential backward, the plan's choice of path, and on a GPU the CUDA C against the library-call path."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from course.bppsa.algorithm import backprop_sequential
from course.bppsa.chunk_kernels import MAX_STATE, chunk_products_reference, chunk_walk_reference, fused_available
from course.bppsa.fast import RNNBackwardPlan, rnn_hidden_gradients
from course.errors import BadInputError


def _rel(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a) - b)) / max(1e-30, float(np.max(np.abs(b)))))


def test_the_products_twin_multiplies_each_chunk_s_steps_in_order():
    rng = np.random.default_rng(0)
    L, C, B, n = 4, 3, 2, 5
    d, W = rng.uniform(0, 1, (C * L, B, n)), rng.standard_normal((n, n))
    M = np.full((C, B, n, n), np.nan)
    chunk_products_reference(d, W, M, L)
    for c in range(C):
        for b in range(B):
            want = np.eye(n)
            for k in range(L - 1, -1, -1):
                want = want @ np.diag(d[c * L + k, b]) @ W
            np.testing.assert_allclose(M[c, b], want, rtol=1e-12, atol=1e-12)


def test_the_walk_twin_is_the_sequential_backward_inside_each_chunk():
    rng = np.random.default_rng(1)
    L, C, B, n = 5, 3, 2, 4
    d, W = rng.uniform(0, 1, (C * L, B, n)), rng.standard_normal((n, n)) / 2
    S, g = rng.standard_normal((C, B, n, n)), rng.standard_normal((B, n))
    out = np.full((C * L + 1, B, n), np.nan)
    chunk_walk_reference(d, W, S, g, out, L)
    for c in range(C):
        start = g if c == C - 1 else np.einsum("bj,bjl->bl", g, S[c + 1])
        want = backprop_sequential(d[c * L:(c + 1) * L, :, :, None] * W, start)
        np.testing.assert_allclose(out[c * L:(c + 1) * L], want[:L], rtol=1e-12, atol=1e-12)
    assert np.isnan(out[C * L]).all()                   # the last row is the caller's


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(T=st.integers(1, 120), n=st.integers(1, MAX_STATE), B=st.integers(1, 4),
       chunk=st.one_of(st.none(), st.integers(1, 30)), graph=st.booleans(), seed=st.integers(0, 999))
def test_the_fused_plan_on_the_stand_in_equals_the_sequential_backward(standin_gpu, T, n, B, chunk, graph, seed):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((n, n)) / np.sqrt(n)
    d, g = rng.uniform(0, 1, (T, B, n)), rng.standard_normal((B, n))
    plan = RNNBackwardPlan(T, B, n, standin_gpu.asarray(W), chunk=chunk, graph=graph)
    assert plan.fused
    got = plan(standin_gpu.asarray(d), standin_gpu.asarray(g))
    assert _rel(got, backprop_sequential(d[..., :, None] * W, g)) < 1e-12


def test_the_plan_chooses_the_kernels_only_where_they_run(standin_gpu):
    assert not RNNBackwardPlan(5, 2, 3, np.eye(3)).fused                                  # NumPy: library calls
    assert RNNBackwardPlan(5, 2, 3, standin_gpu.eye(3)).fused
    assert not RNNBackwardPlan(5, 2, MAX_STATE + 1, standin_gpu.eye(MAX_STATE + 1)).fused  # too large a state
    assert not RNNBackwardPlan(5, 2, 3, standin_gpu.eye(3), fused=False).fused
    for W in (np.eye(3), standin_gpu.eye(MAX_STATE + 1, dtype=np.float32)):
        with pytest.raises(BadInputError, match="fused=True"):
            RNNBackwardPlan(5, 2, W.shape[0], W, fused=True)
    assert fused_available(20, "float32") and not fused_available(20, "float16") and not fused_available(0, "float64")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, tol", [("float64", 1e-12), ("float32", 1e-5)])
@pytest.mark.parametrize("T, B, n", [(1, 1, 1), (37, 3, 5), (3000, 16, 20), (500, 4, 32)])
def test_the_cuda_kernels_equal_the_library_path_and_numpy(T, B, n, dtype, tol):
    import cupy as cp

    rng = np.random.default_rng(T + n)
    W = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(dtype)
    for graph in (False, True):
        fused = RNNBackwardPlan(T, B, n, cp.asarray(W), graph=graph)
        assert fused.fused and fused.capture_failed is None
        fused.out[...] = cp.nan                            # poisoned: every element must be written
        for _ in range(2):                                 # a second call (or replay) with new inputs
            d, g = rng.uniform(0, 1, (T, B, n)).astype(dtype), rng.standard_normal((B, n)).astype(dtype)
            got = cp.asnumpy(fused(cp.asarray(d), cp.asarray(g)))
            assert np.isfinite(got).all()
            assert _rel(got, backprop_sequential(d.astype(np.float64)[..., :, None] * W, g.astype(np.float64))) < tol
            library = cp.asnumpy(rnn_hidden_gradients(cp.asarray(d), cp.asarray(W), cp.asarray(g)))
            assert _rel(got, library) < tol
