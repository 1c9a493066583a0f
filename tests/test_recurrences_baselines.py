"""Lesson 07's sequential baseline (issue 46): the diagonal loop with ``a`` and ``b`` staged a tile ahead, one thread
per channel (CUDA C).  Its tiles checked per thread in NumPy, its twin against the plain loop, the timing path
reached on the stand-in GPU, and on a real GPU against NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.errors import BadInputError
from course.recurrences import kernels as rk
from course.recurrences import timing as rt


def _loop(a, b, h0):
    h, state = np.empty_like(a, dtype=np.float64), h0.astype(np.float64)
    for t in range(a.shape[0]):
        state = a[t] * state + b[t]
        h[t] = state
    return h


@settings(max_examples=30, deadline=None)
@given(T=st.integers(1, 200), stage=st.integers(1, 40))
def test_every_step_is_loaded_once_a_tile_before_its_fma(T, stage):
    plan = rk.staged_schedule(T, stage)
    loaded = {}
    for i, e in enumerate(plan):
        for t in e["computes"]:                    # computed only once loaded, in an earlier iteration
            assert loaded[t] < i
        for t in e["loads"]:
            assert t not in loaded
            loaded[t] = i
    assert sorted(loaded) == list(range(T))
    assert [t for e in plan for t in e["computes"]] == list(range(T))
    assert all(len(e["loads"]) <= stage for e in plan)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("T", [1, 31, 32, 33, 100])
def test_the_twin_equals_the_plain_loop(dtype, T):
    a, b = (x.astype(dtype) for x in rt.recurrence_input(T, 5, "diagonal", "float64", "cpu", seed=T))
    h0 = np.random.default_rng(T).normal(size=5).astype(dtype)
    h = np.empty_like(a)
    rk.staged_walk_reference(a, b, h0, h, rk.STAGE[dtype])
    np.testing.assert_allclose(h, _loop(a, b, h0), rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-5)


@pytest.mark.slow
def test_the_kernel_compiles_without_spills_for_each_architecture():
    from course.cuda_c import ARCHS, ptxas_rows

    try:
        rows = [r for arch in ARCHS for r in ptxas_rows(rk.STAGED_SOURCE, arch)]
    except Exception as exc:  # noqa: BLE001 - no nvcc nor NVRTC here
        pytest.skip(f"no CUDA compiler here: {exc}")
    assert {r["kernel"] for r in rows} == set(rk.STAGED_KERNELS.values())
    assert all(r["spill_stores"] == 0 and r["spill_loads"] == 0 for r in rows)


def test_the_staged_scan_runs_as_one_launch_on_the_standin(standin_gpu):
    a, b = rt.recurrence_input(70, 9, "diagonal", "float32", "gpu", seed=2)
    h0 = standin_gpu.asarray(np.linspace(-1, 1, 9).astype(np.float32))
    rk.staged_diagonal_scan(a, b, h0)            # the device probe and the compile, before the count
    standin_gpu.counter.reset()
    out = standin_gpu.empty_like(a)
    h = rk.staged_diagonal_scan(a, b, h0, out=out)
    assert h is out and standin_gpu.counter.launches == 1
    np.testing.assert_allclose(np.asarray(h), _loop(np.asarray(a), np.asarray(b), np.asarray(h0)), rtol=1e-5,
                               atol=1e-5)


def test_the_staged_scan_refuses_host_arrays_and_a_wrong_out(standin_gpu):
    a, b = rt.recurrence_input(8, 3, "diagonal", "float32", "cpu")
    with pytest.raises(BadInputError, match="CuPy arrays"):
        rk.staged_diagonal_scan(a, b)
    ga, gb = standin_gpu.asarray(a), standin_gpu.asarray(b)
    with pytest.raises(BadInputError, match="out must be"):
        rk.staged_diagonal_scan(ga, gb, out=standin_gpu.empty((8, 4), np.float32))


def test_the_sweep_times_the_staged_loop_and_names_it_the_fastest_sequential_baseline(standin_gpu):
    rs = rt.recurrence_sweep([64, 256], [16], kinds=["diagonal"], methods=["staged per-channel", "scan"],
                             devices=["gpu"], repeat=2, budget_s=0.2)
    staged = rs.select(method="staged per-channel")
    assert [r["T"] for r in staged] == [64, 256] and all(r["median_s"] > 0 for r in staged)
    assert rt.fastest_loop(rs, "gpu", "diagonal", 16) == "staged per-channel"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_staged_kernel_equals_numpy_on_the_gpu(dtype):
    from course.devices import require_gpu, to_numpy

    require_gpu()
    a, b = rt.recurrence_input(1000, 300, "diagonal", dtype, "gpu", seed=4)
    h = rk.staged_diagonal_scan(a, b)
    np.testing.assert_allclose(to_numpy(h), _loop(to_numpy(a), to_numpy(b), np.zeros(300)),
                               rtol=1e-4 if dtype == "float32" else 1e-10, atol=1e-4)
