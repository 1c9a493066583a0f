"""Lesson 08's softmax as a scan: the (m, s, o) combine is associative with the identity (-inf, 0, 0), and the
online, blocked and tree softmaxes equal a plain two-pass NumPy softmax, also where exp overflows."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from course import attention as att
from course import scan as sc
from course.errors import BadInputError


def _softmax(x):
    e = np.exp(x - x.max(axis=0))
    return e / e.sum(axis=0)


def _states(draw, n, width):
    m = draw(arrays(np.float64, (n, 1), elements=st.floats(-50, 50)))
    s = draw(arrays(np.float64, (n, 1), elements=st.floats(0.01, 100)))
    o = draw(arrays(np.float64, (n, width - 2), elements=st.floats(-10, 10)))
    return np.concatenate([m, s, o], axis=1)


@st.composite
def state_stacks(draw):
    width = draw(st.integers(2, 5))
    return _states(draw, draw(st.integers(3, 12)), width)


@settings(max_examples=80, deadline=None)
@given(state_stacks())
def test_the_combine_is_associative_up_to_rounding(states):
    assert sc.associative_on_samples(att.softmax_combine, states, rtol=1e-9, atol=1e-9, verbose=False)
    a, b, c = states[:1], states[1:2], states[2:3]
    left = att.softmax_combine(att.softmax_combine(a, b), c)
    right = att.softmax_combine(a, att.softmax_combine(b, c))
    np.testing.assert_allclose(left, right, rtol=1e-10, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(state_stacks())
def test_the_empty_state_is_the_identity_on_both_sides_and_makes_no_nan(states):
    ident = np.broadcast_to(att.softmax_identity(states.shape[1]), states.shape)
    with np.errstate(invalid="raise", divide="raise"):   # no invalid operation, not even a hidden one
        np.testing.assert_allclose(att.softmax_combine(ident, states), states, rtol=1e-12)
        np.testing.assert_allclose(att.softmax_combine(states, ident), states, rtol=1e-12)
        both = att.softmax_combine(ident[:1], ident[:1])
    assert np.isneginf(both[0, 0]) and not np.isnan(both).any() and (both[0, 1:] == 0).all()


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, st.integers(1, 40), elements=st.floats(-30, 30)), st.integers(1, 9), st.floats(0, 1000))
def test_online_softmax_in_blocks_equals_the_two_pass_softmax(x, block, shift):
    x = x + shift
    m, s = att.online_softmax(x, block=block)
    assert m == x.max()
    np.testing.assert_allclose(np.exp(x - m) / s, _softmax(x), rtol=1e-12, atol=1e-15)
    steps = att.online_softmax_steps(x, block)
    ends = [r["stop"] for r in steps]
    np.testing.assert_array_equal([r["running_max"] for r in steps], np.maximum.accumulate(x)[np.array(ends) - 1])
    assert steps[-1]["running_sum"] == pytest.approx(float(s), rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(arrays(np.float64, st.integers(1, 33), elements=st.floats(-20, 20)))
def test_the_blelloch_tree_gives_the_sequential_scan_s_states_and_the_softmax(x):
    p, states, trace = att.softmax_by_scan(x, trace=True)
    np.testing.assert_allclose(states, att.sequential_states(x), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(p, _softmax(x), rtol=1e-12, atol=1e-15)
    running_max = np.maximum.accumulate(x)
    np.testing.assert_array_equal(states[:, 0], running_max)
    np.testing.assert_allclose(states[:, 1], [np.exp(x[:i + 1] - running_max[i]).sum() for i in range(x.size)],
                               rtol=1e-12)
    assert trace.work == sc.operation_counts("blelloch", x.size)["work"]


def test_the_two_line_formula_overflows_where_the_state_does_not():
    x = np.array([1000.0, 1000.0, 999.0])
    assert np.isnan(att.softmax_naive(x)).all()
    np.testing.assert_allclose(att.softmax_stable(x), _softmax(x))
    m, s = att.online_softmax(x, block=1)
    np.testing.assert_allclose(np.exp(x - m) / s, _softmax(x))
    assert np.isnan(att.softmax_naive(np.array([89.0], dtype=np.float32))).all()     # float32's exp limit is ~88.7


@pytest.mark.parametrize("bad, match", [(np.array(3.0), "at least one"), (np.array([]), "at least one"),
                                        (np.array(["a"]), "real numbers"), (np.ones((2, 2)), "one row")])
def test_bad_scores_are_refused_with_what_to_do(bad, match):
    with pytest.raises(BadInputError, match=match):
        (att.online_softmax_steps if bad.ndim == 2 else att.online_softmax)(bad)


def test_a_block_of_zero_is_refused():
    with pytest.raises(BadInputError, match="block"):
        att.online_softmax(np.ones(3), block=0)
