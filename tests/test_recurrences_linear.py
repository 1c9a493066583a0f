"""The four forward forms of h_t = a_t ⊙ h_{t-1} + b_t agree with the loop; the backward with finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.errors import BadInputError
from course.recurrences.linear import (
    METHODS,
    recurrence_backward,
    recurrence_closed_form,
    recurrence_log_space,
    recurrence_loop,
    recurrence_scan,
    reverse_recurrence,
    solve_recurrence,
)

TOL = {"float32": 2e-4, "float64": 1e-9}


def _close(got, want, dtype, T):
    scale = max(1.0, float(np.abs(want).max(initial=0)))
    np.testing.assert_allclose(got, want, rtol=0, atol=TOL[dtype] * scale * max(1, np.log2(T)))


@st.composite
def recurrences(draw, a_lo=-1.0, a_hi=1.0):
    T = draw(st.integers(1, 80))
    shape = draw(st.sampled_from([(), (3,), (2, 3)]))
    dtype = draw(st.sampled_from(["float32", "float64"]))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    regime = draw(st.sampled_from(["uniform", "near 0", "near 1"]))
    if regime == "uniform":
        a = rng.uniform(a_lo, a_hi, (T, *shape))
    elif regime == "near 0":
        a = 10.0 ** rng.uniform(-6, -2, (T, *shape)) * rng.choice([-1, 1], (T, *shape))
    else:
        a = 1 - 10.0 ** rng.uniform(-7, -2, (T, *shape))
    a = a.astype(dtype)
    b = rng.normal(size=(T, *shape)).astype(dtype)
    h0 = rng.normal(size=shape).astype(dtype)
    return a, b, h0, dtype, T


@settings(max_examples=60, deadline=None)
@given(recurrences())
def test_scan_equals_loop(case):
    a, b, h0, dtype, T = case
    got = recurrence_scan(a, b, h0)
    assert got.dtype == np.dtype(dtype) and got.shape == a.shape
    _close(got, recurrence_loop(a.astype(np.float64), b.astype(np.float64), h0.astype(np.float64)), dtype, T)


@settings(max_examples=40, deadline=None)
@given(recurrences())
def test_closed_form_and_log_space_equal_loop_at_short_lengths(case):
    a, b, h0, dtype, T = case
    want = recurrence_loop(a.astype(np.float64), b.astype(np.float64), h0.astype(np.float64))
    if T <= 12 and np.abs(a).min() >= 0.3:                      # the closed form divides by prod(a)
        _close(recurrence_closed_form(a, b, h0), want, dtype, T)
    _close(recurrence_log_space(a, b, h0), want, dtype, T)


@pytest.mark.parametrize("a_value", [1e-6, 0.01, 0.999, 1.0, 1 - 1e-7])
@pytest.mark.parametrize("method", ["scan", "log space"])
def test_a_near_zero_and_near_one(a_value, method):
    T = 3000
    rng = np.random.default_rng(0)
    a = np.full((T, 2), a_value) * rng.uniform(0.999, 1.0, (T, 2))
    b = rng.normal(size=(T, 2))
    want = recurrence_loop(a, b)
    got = solve_recurrence(a, b, method=method)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9 * np.abs(want).max())


def test_closed_form_fails_at_long_T_and_log_space_does_not():
    T = 3000
    a, b = np.full((T, 1), 0.5), np.ones((T, 1))
    closed = recurrence_closed_form(a, b)
    assert not np.isfinite(closed).all()                     # 0.5**1075 underflows to 0
    assert np.isfinite(closed[:1000]).all()
    np.testing.assert_allclose(recurrence_log_space(a, b), recurrence_loop(a, b), rtol=1e-12)
    grow = recurrence_closed_form(np.full((T, 1), 1.5), np.zeros((T, 1)), h0=np.ones(1) * 1e-300)
    assert not np.isfinite(grow).all()


def test_log_space_handles_negative_a_and_b_and_rejects_zero():
    rng = np.random.default_rng(3)
    a = rng.choice([-1, 1], (500, 4)) * rng.uniform(0.2, 1.0, (500, 4))
    b = rng.normal(size=(500, 4))
    np.testing.assert_allclose(recurrence_log_space(a, b), recurrence_loop(a, b), atol=1e-10)
    a[7, 1] = 0
    with pytest.raises(BadInputError, match="a_t != 0"):
        recurrence_log_space(a, b)
    np.testing.assert_allclose(recurrence_scan(a, b), recurrence_loop(a, b), atol=1e-12)


def test_scan_trace_has_two_log2_levels():
    h, tr = recurrence_scan(np.full(16, 0.5), np.ones(16), trace=True)
    assert tr.steps == 8 and tr.work == 30
    np.testing.assert_allclose(h, recurrence_loop(np.full(16, 0.5), np.ones(16)))


@pytest.mark.parametrize("method", ["scan", "loop"])
def test_reverse_recurrence_runs_from_the_end(method):
    rng = np.random.default_rng(1)
    a, d = rng.uniform(-1, 1, (9, 3)), rng.normal(size=(9, 3))
    g, want = reverse_recurrence(a, d, method), np.zeros((9, 3))
    acc = np.zeros(3)
    for t in range(8, -1, -1):
        acc = d[t] + a[t] * acc
        want[t] = acc
    np.testing.assert_allclose(g, want, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 30), st.integers(0, 10**6), st.sampled_from(["scan", "loop"]))
def test_backward_equals_finite_differences(T, seed, method):
    rng = np.random.default_rng(seed)
    a, b, h0 = rng.uniform(-1, 1, (T, 2)), rng.normal(size=(T, 2)), rng.normal(size=2)
    w = rng.normal(size=(T, 2))                              # L = Σ w ⊙ h

    def loss(a_, b_, h0_):
        return float((w * recurrence_loop(a_, b_, h0_)).sum())

    ga, gb, gh0 = recurrence_backward(a, recurrence_loop(a, b, h0), w, h0, method)
    eps = 1e-6
    for arr, grad in ((a, ga), (b, gb), (h0, gh0)):
        num = np.zeros_like(arr)
        for i in np.ndindex(arr.shape):
            old = arr[i]
            arr[i] = old + eps
            lp = loss(a, b, h0)
            arr[i] = old - eps
            lm = loss(a, b, h0)
            arr[i] = old
            num[i] = (lp - lm) / (2 * eps)
        np.testing.assert_allclose(grad, num, atol=1e-6 * max(1, np.abs(num).max()))


@pytest.mark.parametrize("args, match", [
    ((np.ones(3), np.ones(4)), "same shape"),
    ((np.ones(0), np.ones(0)), "T >= 1"),
    ((np.ones((3, 2)), np.ones((3, 2)), np.ones(3)), "h0 is the state before step 0"),
    ((np.ones(3, dtype=complex), np.ones(3)), "real numbers"),
])
def test_bad_inputs_name_the_argument(args, match):
    for fn in METHODS.values():
        with pytest.raises(BadInputError, match=match):
            fn(*args)


def test_unknown_method_is_rejected():
    with pytest.raises(BadInputError, match="method must be one of"):
        solve_recurrence(np.ones(2), np.ones(2), method="fft")
    with pytest.raises(BadInputError, match="one of 'scan', 'loop'"):
        reverse_recurrence(np.ones(2), np.ones(2), method="tree")


@pytest.mark.gpu
@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_on_cupy_equals_numpy(method):
    import cupy

    rng = np.random.default_rng(2)
    a, b = rng.uniform(0.5, 1, (300, 8)), rng.normal(size=(300, 8))
    got = solve_recurrence(cupy.asarray(a), cupy.asarray(b), method=method)
    assert isinstance(got, cupy.ndarray)
    np.testing.assert_allclose(cupy.asnumpy(got), recurrence_loop(a, b), rtol=1e-9, atol=1e-9)
