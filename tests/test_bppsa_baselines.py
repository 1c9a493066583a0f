"""Lesson 05's baselines (issue 46): the sequential GPU backward (one warp per batch row, W in registers, the
diagonals prefetched, one CUDA graph) and cuDNN's backward captured in torch.cuda.graph, beside BPPSA in
``bppsa_rnn``, with the headline ratio against the best peer.  Reached on the stand-in GPU; checked on a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from course.bppsa import fast as bf
from course.bppsa import timing as bt
from course.errors import BadInputError


def _chain(T, B, n, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return (rng.uniform(0, 1, (T, B, n)).astype(dtype), (rng.standard_normal((n, n)) / np.sqrt(n)).astype(dtype),
            rng.standard_normal((B, n)).astype(dtype))


@pytest.mark.parametrize("T, stage", [(1, 16), (15, 16), (16, 16), (17, 16), (40, 8), (33, 1)])
def test_the_twin_walks_the_tiles_to_the_sequential_backward(T, stage):
    d, W, g = _chain(T, 3, 5, seed=T)
    out = np.empty((T + 1, 3, 5))
    bf.sequential_walk_reference(d, W, g, out, stage)
    out[T] = g
    np.testing.assert_allclose(out, bf.rnn_hidden_gradients(d, W, g), rtol=1e-10, atol=1e-12)


@pytest.mark.slow
def test_the_kernel_compiles_without_spills_for_each_architecture():
    from course.cuda_c import ARCHS, ptxas_rows

    try:
        rows = [r for arch in ARCHS for r in ptxas_rows(bf.SEQUENTIAL_SOURCE, arch)]
    except Exception as exc:  # noqa: BLE001 - no nvcc nor NVRTC here
        pytest.skip(f"no CUDA compiler here: {exc}")
    assert {r["kernel"] for r in rows} == set(bf.SEQUENTIAL_KERNELS.values())
    assert all(r["spill_stores"] == 0 and r["spill_loads"] == 0 for r in rows)


def test_the_sequential_plan_is_one_captured_kernel_and_equals_the_oracle_on_the_standin(standin_gpu):
    d, W, g = _chain(37, 4, 20, dtype=np.float32)
    plan = bf.SequentialBackwardPlan(37, 4, 20, standin_gpu.asarray(W))
    assert plan.capture_failed is None and plan.graph is not None and plan.graph.kernels >= 1
    got = plan(standin_gpu.asarray(d), standin_gpu.asarray(g))
    np.testing.assert_allclose(np.asarray(got), bf.rnn_hidden_gradients(d.astype(np.float64), W.astype(np.float64),
                                                                        g.astype(np.float64)), rtol=1e-4, atol=1e-5)


def test_the_sequential_plan_refuses_a_host_weight_and_a_wide_state(standin_gpu):
    with pytest.raises(BadInputError, match="on the GPU"):
        bf.SequentialBackwardPlan(10, 2, 4, np.eye(4, dtype=np.float32))
    with pytest.raises(BadInputError, match="at most 32"):
        bf.SequentialBackwardPlan(10, 2, 40, standin_gpu.eye(40, dtype=np.float32))


def test_the_chain_peers_agree_and_are_timed_on_the_standin(standin_gpu):
    r = bt.chain_peer_timings(50, 20, 4, repeat=2)
    assert set(r["backward_s"]) == {"fast chain", "sequential kernel"} and r["max_grad_diff"] < 1e-4
    assert r["captured"] == {"fast chain": None, "sequential kernel": None}


def test_the_sweep_records_the_graph_peers_and_states_fast_against_the_best(standin_gpu):
    rs = bt.rnn_sweep((40,), hidden_size=20, batch=4, devices=["gpu"], methods=("fast",), repeat=2,
                      include_torch=False)
    methods = {r["method"] for r in rs.records}
    assert {"fast", "fast chain", "sequential kernel"} <= methods
    fast = rs.select(method="fast")[0]
    assert fast["best_peer"] == "sequential kernel" and fast["vs_best_peer"] > 0 and "best peer" in fast["headline"]
    assert rs.select(method="fast chain")[0]["vs_sequential_kernel"] > 0
    assert any("cuDNN's graph-captured backward not timed" in n for n in rs.notes)


def test_best_peer_picks_the_fastest_time_and_refuses_a_list():
    assert bt.best_peer({"a": None, "b": 0.0}) is None
    with pytest.raises(BadInputError):
        bt.best_peer([1.0])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_sequential_kernel_equals_the_oracle_on_the_gpu(dtype):
    from course.devices import cupy_module, require_gpu

    require_gpu()
    cp = cupy_module()
    d, W, g = _chain(1000, 16, 20, seed=3, dtype=dtype)
    plan = bf.SequentialBackwardPlan(1000, 16, 20, cp.asarray(W))
    got = cp.asnumpy(plan(cp.asarray(d), cp.asarray(g)))
    want = bf.rnn_hidden_gradients(d.astype(np.float64), W.astype(np.float64), g.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-3 if dtype == np.float32 else 1e-9,
                               atol=1e-4 if dtype == np.float32 else 1e-11)
    assert plan.capture_failed is None


@pytest.mark.gpu
def test_cudnns_backward_replays_from_a_cuda_graph():
    from course.torch_peer import torch_cuda_available

    if not torch_cuda_available():
        pytest.skip("PyTorch here has no CUDA device")
    r = bt.torch_rnn_graph_timings(200, 20, 16, repeat=2)
    assert r["backward_s"] > 0 and r["tf32"] is False
