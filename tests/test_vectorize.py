"""Lesson 02: every elementwise rung gives numpy's answer; bad input gets a clear message."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import course
from course import vectorize as v
from course.errors import BadInputError, DeviceMemoryError, GPUUnavailableError, UnsupportedDtypeError
from course.vectorize.rungs import DEFAULT_A, DEFAULT_B

CPU_RUNGS = ("loop", "lanes", "numpy_new", "numpy", "threads")


def _oracle(op, x):
    """The operations written out here in float64 with the math module, sharing no code with the rungs."""
    import math

    def one(t):
        if op == "relu":
            return max(t, 0.0)
        if op == "sigmoid":
            return 0.5 * (1.0 + math.tanh(0.5 * t))  # another formula for the same function
        return max(DEFAULT_A * t + DEFAULT_B, 0.0)

    return np.array([one(float(t)) for t in x.ravel()], dtype=np.float64).reshape(x.shape)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(0, 300), lanes=st.integers(1, 40), op=st.sampled_from(v.OPS),
       dtype=st.sampled_from(v.FLOAT_DTYPES), workers=st.integers(1, 3))
def test_every_cpu_rung_matches_numpy_for_any_size_and_lane_width(n, lanes, op, dtype, workers):
    x = (np.random.default_rng(n).standard_normal(n) * 4).astype(dtype)
    want = _oracle(op, x)
    for rung in CPU_RUNGS:
        got = v.elementwise(op, x, rung, lanes=lanes, workers=workers)
        assert got.shape == x.shape and got.dtype == x.dtype, rung
        np.testing.assert_allclose(got.astype(float), want.astype(float), **v.tolerance(dtype), err_msg=rung)


def test_threads_split_into_many_chunks_still_match():
    x = np.random.default_rng(1).standard_normal(10_007).astype(np.float32)
    got = v.threaded_elementwise("sigmoid", x, workers=3, chunk=100)
    np.testing.assert_allclose(got, v.numpy_elementwise("sigmoid", x), rtol=1e-6)


def test_rungs_write_into_out_and_return_it():
    x = np.linspace(-2, 2, 33, dtype=np.float32)
    for rung in ("loop", "lanes", "numpy", "threads"):
        out = np.full_like(x, 7.0)
        res = v.elementwise("relu", x, rung, out=out, lanes=5)
        np.testing.assert_array_equal(out, np.maximum(x, 0), err_msg=rung)
        assert np.shares_memory(res, out), rung


def test_values_are_the_textbook_ones():
    x = np.array([-3.0, 0.0, 0.25, 2.0])
    np.testing.assert_array_equal(v.elementwise("relu", x), [0, 0, 0.25, 2])
    np.testing.assert_allclose(v.elementwise("sigmoid", x), 1 / (1 + np.exp(-x)))
    np.testing.assert_array_equal(v.elementwise("affine_relu", x, a=2.0, b=-0.5), [0, 0, 0, 3.5])


def test_sigmoid_saturates_without_nan_for_huge_inputs():
    x = np.array([-1e4, -100.0, 100.0, 1e4], dtype=np.float32)
    for rung in ("loop", "numpy", "lanes"):
        y = v.elementwise("sigmoid", x, rung, lanes=3)
        assert np.all(np.isfinite(y)), rung
        np.testing.assert_allclose(y, [0, 0, 1, 1], atol=1e-30, err_msg=rung)


def test_lane_steps_is_the_ceiling_of_n_over_w():
    assert [v.lane_steps(n, 4) for n in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]


def test_lane_width_zero_says_what_to_use():
    with pytest.raises(BadInputError, match=r"lanes must be a whole number >= 1.*got 0"):
        v.lanes_elementwise("relu", np.ones(4), lanes=0)
    with pytest.raises(BadInputError, match="lanes must be a whole number"):
        v.ladder("relu", n=8, lanes=0, copy=False)
    with pytest.raises(BadInputError, match="lanes must be a whole number|lanes"):
        v.lane_steps(8, 2.5)


def test_unknown_op_and_rung_are_named():
    with pytest.raises(BadInputError, match="'tanh'"):
        v.elementwise("tanh", np.ones(2))
    with pytest.raises(BadInputError, match="'simd'"):
        v.elementwise("relu", np.ones(2), rung="simd")


def test_integer_input_is_refused_with_a_fix():
    with pytest.raises(BadInputError, match=r"int64.*astype\('float32'\)"):
        v.elementwise("relu", np.arange(3))


def test_mismatched_out_is_refused():
    with pytest.raises(BadInputError, match="out must have x's shape"):
        v.elementwise("relu", np.ones(3), out=np.ones(4))


def test_gpu_rung_with_a_numpy_array_says_to_move_it():
    with pytest.raises(BadInputError, match="to_device"):
        v.elementwise("relu", np.ones(3), rung="gpu")


def test_bfloat16_is_refused_by_the_course_dtype_check():
    with pytest.raises(UnsupportedDtypeError, match="bfloat16"):
        v.random_input(8, "bfloat16")
    with pytest.raises(UnsupportedDtypeError, match="bfloat16"):
        v.ladder("relu", n=8, dtype="bfloat16", copy=False)


def test_size_that_does_not_fit_in_memory_is_refused_before_allocating():
    with pytest.raises(DeviceMemoryError, match="Choose a smaller size"):
        v.random_input(2**62, "float32")


def test_negative_size_is_refused():
    with pytest.raises(BadInputError, match="size n"):
        v.random_input(-1)


@pytest.mark.skipif(course.gpu_available(), reason="checks the message shown without a GPU")
def test_gpu_ladder_without_a_gpu_explains_what_to_do():
    with pytest.raises(GPUUnavailableError, match="Colab"):
        v.ladder("relu", n=16, devices=("cpu", "gpu"), copy=False)


def test_ladder_records_every_rung_checked_and_rated():
    rs = v.ladder("affine_relu", n=5000, lanes=16, loop_max=1000, repeat=2, budget_s=0.05)
    rungs = [r["rung"] for r in rs.records]
    assert rungs == ["copy", *CPU_RUNGS]
    timed = [r for r in rs.records if r["rung"] != "copy"]
    assert all(r["agrees"] for r in timed)
    loop = rs.select(rung="loop")[0]
    assert loop["n_timed"] == 1000 and loop["speedup_vs_loop"] == 1.0
    assert rs.select(rung="lanes")[0]["n_timed"] == 5000
    for r in timed:
        assert r["gb_per_s"] == pytest.approx(2 * 4 * r["n_timed"] / r["median_s"] / 1e9)
        assert r["copy_fraction"] > 0
    assert any("first 1,000 elements" in n for n in rs.notes)


def test_ladder_flags_a_rung_that_gives_a_wrong_answer(monkeypatch):
    import course.vectorize.timing as vl

    real = vl.elementwise

    def broken(op, x, rung, **kw):
        out = real(op, x, rung, **kw)
        return out * 1.01 + 0.01 if rung == "numpy" else out

    monkeypatch.setattr(vl, "elementwise", broken)
    rs = v.ladder("relu", n=3000, rungs=("loop", "numpy", "threads"), loop_max=500, repeat=1, copy=False)
    assert {r["rung"]: r["agrees"] for r in rs.records} == {"loop": True, "numpy": False, "threads": True}


def test_ladder_of_zero_elements_runs():
    rs = v.ladder("relu", n=0, rungs=("loop", "numpy"), copy=False)
    assert all(r["agrees"] for r in rs.records)


def test_effective_bandwidth_counts_one_read_and_one_write():
    assert v.bytes_moved(10, "float16") == 40
    assert v.effective_bandwidth(2.0, 10, "float64") == 80.0
    with pytest.raises(BadInputError, match="seconds"):
        v.effective_bandwidth(0, 10, "float32")


def test_relu_bandwidth_reports_fractions_of_the_copy_limit():
    r = v.relu_bandwidth(n=2**14, rounds=2, repeat=2, budget_s=0.2)
    assert set(r["samples"]) == {"copy", "out", "new", "threads"}
    for k in ("out", "new", "threads"):
        assert r[f"{k}_fraction"] > 0 and len(r["samples"][k]) == 2


def test_simd_summary_names_what_numpy_dispatches_to():
    text = v.simd_summary()
    for ext in course.cpu_info()["simd_used"]:
        assert ext in text


def test_exercise_references_agree_with_their_loops():
    x = np.random.default_rng(0).standard_normal((6, 5))
    np.testing.assert_allclose(v.softmax_rows(x), v.softmax_rows_loop(x))
    np.testing.assert_allclose(v.leaky_relu(x, 0.1), v.leaky_relu_loop(x, 0.1))
    assert v.softmax_rows(x + 1000).sum(axis=1) == pytest.approx(np.ones(6))


@settings(max_examples=30, deadline=None)
@given(n=st.integers(0, 500), lanes=st.integers(1, 64))
def test_lane_trace_covers_every_element_once_in_order(n, lanes):
    trace = v.lane_trace(n, lanes)
    assert len(trace) == v.lane_steps(n, lanes)
    covered = [i for lo, hi in trace for i in range(lo, hi)]
    assert covered == list(range(n))
    assert all(0 < hi - lo <= lanes for lo, hi in trace)


# ------------------------------------------------------------------ the compiled ReLU (at the copy limit)

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("threads", [1, 2])
def test_compiled_relu_equals_numpy(dtype, threads):
    from course.vectorize.rungs import compiled_relu

    x = np.random.default_rng(3).standard_normal(10_001).astype(dtype)
    x[:4] = [0.0, -0.0, np.inf, np.nan]
    out = np.empty_like(x)
    assert compiled_relu(x, out, threads=threads) is out
    np.testing.assert_array_equal(out, np.maximum(x, 0))   # NaNs compare equal here


def test_compiled_relu_keeps_shape_and_refuses_bad_input():
    from course.vectorize.rungs import compiled_relu

    x = np.array([[-1.0, 2.0], [3.0, -4.0]], dtype=np.float32)
    np.testing.assert_array_equal(compiled_relu(x), [[0, 2], [3, 0]])
    with pytest.raises(BadInputError, match="dtype"):
        compiled_relu(np.array([1, -1]))
    with pytest.raises(BadInputError, match="out must have"):
        compiled_relu(x, out=np.empty(3, dtype=np.float32))
