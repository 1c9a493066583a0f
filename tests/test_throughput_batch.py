"""Lesson 03: batching with Little's law, fusion (fused == unfused), mixed precision."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import course.throughput.batch as TB
from course import throughput as T
from course.errors import BadInputError, DeviceMemoryError, UnsupportedDtypeError


def test_littles_law():
    assert T.littles_law(2000.0, 0.5) == 1000.0
    with pytest.raises(BadInputError, match="-1"):
        T.littles_law(-1, 1.0)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 10 ** 6), st.floats(0, 1e9)), min_size=1, max_size=12,
                unique_by=lambda t: t[0]), st.floats(0.01, 1.0))
def test_batch_for_fraction_is_the_smallest_batch_reaching_the_fraction(pairs, frac):
    b = [p[0] for p in pairs]
    s = [p[1] for p in pairs]
    got = T.batch_for_fraction(b, s, frac)
    best = max(s)
    assert dict(pairs)[got] >= frac * best
    assert all(ss < frac * best for bb, ss in pairs if bb < got)


@pytest.mark.parametrize("args, words", [
    (([], []), "non-empty"), (([1, 2], [3]), "equally long"), (([1], [1], 0.0), "fraction"),
])
def test_batch_for_fraction_bad_input(args, words):
    with pytest.raises(BadInputError, match=words):
        T.batch_for_fraction(*args)


def test_batch_sweep_records_latency_throughput_and_in_flight(monkeypatch):
    from _fixed_clock import fixed_benchmark

    # every step "takes" 10 ms, and so does each run of 2 consecutive steps
    monkeypatch.setattr(TB, "benchmark", fixed_benchmark(0.01))
    rs = T.batch_sweep([1, 8], sizes=(16, 8, 4), repeat=2, stream_steps=2)
    assert [r["batch"] for r in rs.records] == [1, 8]
    one, eight = rs.records
    assert one["samples_per_s"] == pytest.approx(100) and eight["samples_per_s"] == pytest.approx(800)
    # 2 steps of 8 samples in 10 ms: 1,600 samples/s streamed; × 10 ms latency = 16 samples in flight
    assert eight["stream_samples_per_s"] == pytest.approx(1600) and eight["in_flight"] == pytest.approx(16)
    assert one["in_flight"] == pytest.approx(2)
    assert eight["flops"] == pytest.approx(8 * one["flops"]) and eight["gflops"] > 0


def test_batch_sweep_measures_for_real():
    rs = T.batch_sweep([1, 8], sizes=(16, 8, 4), repeat=2, stream_steps=2)
    assert all(r["median_s"] > 0 and r["samples_per_s"] > 0 for r in rs.records)


def test_batch_sweep_budget_stops_early():
    rs = T.batch_sweep([1, 2, 4, 8], sizes=(8, 4), repeat=1, stream_steps=1, total_budget_s=1e-6)
    assert len(rs.records) == 1 and rs.params["stopped_early"] and "Stopped early" in rs.notes[0]


@pytest.mark.parametrize("kw, exc, words", [
    (dict(batch_sizes=[]), BadInputError, "at least 1 whole number"),
    (dict(batch_sizes=[0]), BadInputError, ">= 1"),
    (dict(sizes=[5]), BadInputError, "input and an output"),
    (dict(batch_sizes=[2 ** 40]), DeviceMemoryError, "smaller"),
    (dict(dtype="bfloat16"), UnsupportedDtypeError, "bfloat16"),
])
def test_batch_sweep_bad_input(kw, exc, words):
    with pytest.raises(exc, match=words):
        T.batch_sweep(**({"batch_sizes": [2], "sizes": (4, 2)} | kw))


@pytest.mark.parametrize("steps", [1, 4, 8])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_and_blocked_give_the_unfused_answer(steps, dtype):
    x = np.linspace(-3, 3, 1001, dtype=dtype)
    want = T.unfused(x, steps)
    np.testing.assert_allclose(T.fused(x, steps), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(T.blocked(x, steps, tile=64), want, rtol=1e-6, atol=1e-6)


def test_unfused_matches_a_plain_python_chain():
    x = np.array([-1.0, 0.0, 0.2, 2.0])
    v = np.maximum(x * 1.5 + 0.5, 0) ** 2 - 0.25
    np.testing.assert_allclose(T.unfused(x, 5), v)


def test_fusion_counts_kernels_and_bytes():
    assert T.fusion_counts(1000, 4, 4, "unfused") == {"kernels": 4, "bytes": 32000.0}
    assert T.fusion_counts(1000, 4, 4, "fused") == {"kernels": 1, "bytes": 8000.0}
    assert T.fusion_counts(1000, 4, 4, "blocked", tile=100)["kernels"] == 40


def test_fusion_compare_records_errors_against_the_oracle():
    rs = T.fusion_compare(n=4096, steps=3, repeat=2)
    assert [r["mode"] for r in rs.records] == ["unfused", "blocked", "fused"]
    assert all(r["max_abs_error"] < 1e-5 for r in rs.records)
    assert rs.params["chain"] == T.fusion_chain(3)


def test_fusion_float16_skips_the_numba_loop_with_a_note():
    rs = T.fusion_compare(n=512, steps=2, dtype="float16", repeat=1)
    assert "fused" not in [r["mode"] for r in rs.records] and "numba" in rs.notes[0]
    with pytest.raises(UnsupportedDtypeError, match="float16"):
        T.fused(np.ones(4, np.float16), 2)


@pytest.mark.parametrize("kw, words", [(dict(steps=0), "steps"), (dict(steps=99), "steps"),
                                       (dict(n=0), "n must"), (dict(modes=["magic"]), "modes")])
def test_fusion_bad_input(kw, words):
    with pytest.raises(BadInputError, match=words):
        T.fusion_compare(**({"n": 64, "steps": 2} | kw))


def test_gpu_kernel_source_is_generated_from_the_same_steps():
    src = T.fused_kernel_source(3, "gpu")
    assert src.count("\nv = ") == 3 and "(T)1.5" in src and "y = v;" in src
    assert "v * 1.5" in T.fused_kernel_source(1, "cpu")


def test_precision_sweep_times_each_dtype_and_halves_memory():
    rs = T.precision_sweep([16, 32], dtypes=("float32", "float16"), repeat=1)
    f32 = {r["n"]: r for r in rs.select(dtype="float32")}
    f16 = {r["n"]: r for r in rs.select(dtype="float16")}
    assert set(f32) == set(f16) == {16, 32}
    assert f16[32]["matrix_bytes"] * 2 == f32[32]["matrix_bytes"]


def test_precision_sweep_bfloat16_via_torch_or_a_note():
    rs = T.precision_sweep([16], dtypes=("bfloat16",), repeat=1)
    if T.torch_available():
        (r,) = rs.records
        assert r["library"] == "torch" and r["matrix_bytes"] == 16 * 16 * 2
    else:
        assert not rs.records and "PyTorch" in rs.notes[0]


@pytest.mark.parametrize("kw, exc, words", [(dict(sizes=[]), BadInputError, "at least 1 whole number"),
                                            (dict(dtypes=[]), BadInputError, "dtypes"),
                                            (dict(dtypes=["int3"]), UnsupportedDtypeError, "int3")])
def test_precision_bad_input(kw, exc, words):
    with pytest.raises(exc, match=words):
        T.precision_sweep(**({"sizes": [8]} | kw))


@pytest.mark.gpu
def test_gpu_fused_kernel_matches_numpy():
    import cupy as cp

    x = np.linspace(-3, 3, 10_001, dtype=np.float32)
    for k in (1, 4, 8):
        np.testing.assert_allclose(cp.asnumpy(T.fused(cp.asarray(x), k)), T.unfused(x, k), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(cp.asnumpy(T.unfused(cp.asarray(x), k)), T.unfused(x, k), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_gpu_batch_and_precision_sweeps_run():
    rs = T.batch_sweep([1, 64], devices=["cpu", "gpu"], repeat=2, stream_steps=2)
    assert {r["device"] for r in rs.records} == {"cpu", "gpu"}
    rs = T.precision_sweep([256], dtypes=("float32", "float16"), devices=["gpu"], repeat=2)
    assert {r["dtype"] for r in rs.records} == {"float32", "float16"}


def test_tf32_is_named_and_timed_only_where_a_gpu_has_tensor_cores():
    """TF32, the float32 a Hopper GPU runs when a framework allows it, is a row of its own on a GPU; on a CPU the
    sweep says why it is absent instead of leaving it out silently."""
    from course.throughput.batch import TF32, precision_sweep

    rs = precision_sweep([16], dtypes=("float32", TF32), devices=["cpu"], repeat=2)
    assert {r["dtype"] for r in rs.records} == {"float32"}
    assert any("TF32 was not timed" in n and "tensor-core" in n for n in rs.notes)
