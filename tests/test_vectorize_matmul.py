"""Lesson 02: the matrix-product rungs agree with numpy; GFLOP/s, dtypes and the wrapper's cost."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.errors import BadInputError, UnsupportedDtypeError
from course.vectorize import matmul as vm
from course.vectorize import timing as vt


@settings(max_examples=15, deadline=None)
@given(m=st.integers(1, 9), k=st.integers(1, 9), n=st.integers(1, 9), dtype=st.sampled_from(["float32", "float64"]))
def test_loop_dots_and_blas_agree_on_any_shape(m, k, n, dtype):
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
    want = a.astype(np.float64) @ b.astype(np.float64)
    for rung in ("loop", "dots", "blas"):
        got = vm.matmul(a, b, rung=rung)
        assert got.shape == (m, n) and got.dtype == np.dtype(dtype), rung
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=rung)


def test_float16_products_are_correct_within_half_precision():
    r = vt.time_matmul_rung("blas", 32, "float16", repeat=1, budget_s=0.05)
    assert r["agrees"] and 0 < r["rel_error"] < vm.matmul_tolerance("float16", 32)


def test_gflops_is_two_n_cubed_over_time(monkeypatch):
    from _fixed_clock import fixed_benchmark

    monkeypatch.setattr(vt, "benchmark", fixed_benchmark(1e-4))
    r = vt.time_matmul_rung("blas", 40, "float32", repeat=2, budget_s=0.05)
    assert r["gflops"] == pytest.approx(1.28)  # 2 · 40³ = 128,000 FLOP in 0.1 ms


def test_slow_rungs_refuse_big_sizes_and_say_which_rung_to_use():
    big = np.ones((200, 200))
    with pytest.raises(BadInputError, match="rung='dots' or 'blas'"):
        vm.matmul_loop(big, big)
    huge = np.ones((500, 500))
    with pytest.raises(BadInputError, match="rung='blas'"):
        vm.matmul_dots(huge, huge)


def test_shape_mismatch_names_both_shapes():
    with pytest.raises(BadInputError, match=r"\(2, 3\) and \(2, 3\)"):
        vm.matmul(np.ones((2, 3)), np.ones((2, 3)), rung="loop")


def test_unknown_rung_is_named():
    with pytest.raises(BadInputError, match="'strassen'"):
        vm.matmul(np.ones((2, 2)), np.ones((2, 2)), rung="strassen")


def test_bfloat16_in_numpy_gets_the_clear_dtype_error():
    with pytest.raises(UnsupportedDtypeError, match="no bfloat16"):
        vm.random_matrices(4, "bfloat16")


def test_ladder_skips_what_cannot_run_and_says_why():
    rs = vt.matmul_ladder(100, dtypes=("float32", "bfloat16"), rungs=("loop", "dots", "blas"),
                          repeat=1, budget_s=0.05)
    assert {r["rung"] for r in rs.records} == {"dots", "blas"}
    assert all(r["dtype"] == "float32" and r["agrees"] for r in rs.records)
    assert any("loop: skipped at n=100" in n for n in rs.notes)
    assert any("bfloat16" in n for n in rs.notes)


def test_wrapper_overhead_measures_both_calls():
    r = vt.wrapper_overhead(n=64, rounds=6)
    assert r["direct_s"] > 0 and r["wrapper_s"] > 0 and r["added_s"] >= 0
    assert r["direct_best_s"] <= r["direct_s"]
    assert r["added_fraction"] == pytest.approx(r["added_s"] / r["direct_best_s"], rel=1e-12)


def test_torch_bfloat16_product_agrees_with_float64():
    pytest.importorskip("torch")
    r = vt.time_matmul_rung("torch", 48, "bfloat16", repeat=1, budget_s=0.05)
    assert r["agrees"], r["rel_error"]


def test_torch_rung_with_unknown_dtype_is_refused():
    pytest.importorskip("torch")
    with pytest.raises(UnsupportedDtypeError, match="no dtype 'float7'"):
        vt.torch_matrices(4, "float7")
