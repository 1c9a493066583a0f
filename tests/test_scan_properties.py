"""Property tests: every scan equals the sequential oracle for every operator, length and dtype.

Data are chosen so that the arithmetic is exact (integer-valued floats, integers that
wrap around modulo 2**64) or well conditioned (rotations), so the tree's different
bracketing can be compared with the sequential one tightly.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.scan.algorithms import affine, blelloch_scan, hillis_steele_scan, matmul, maximum, sequential_scan

SEEDS = st.integers(0, 2**32 - 1)
LENGTHS = st.integers(0, 10**4)
EXCLUSIVE = st.booleans()
FLOATS = ["float32", "float64"]
INTS = ["int32", "int64", "uint8"]


def _values(rng, n, dtype, elem_shape=()):
    if np.dtype(dtype).kind == "u":
        return rng.integers(0, 255, (n, *elem_shape)).astype(dtype)
    return rng.integers(-9, 10, (n, *elem_shape)).astype(dtype)   # integer values: exact sums


def _rotations(rng, n, k=2):
    t = rng.uniform(-np.pi, np.pi, n)
    r = np.zeros((n, k, k))
    r[:, 0, 0], r[:, 0, 1], r[:, 1, 0], r[:, 1, 1] = np.cos(t), -np.sin(t), np.sin(t), np.cos(t)
    r[rng.random(n) < 0.5, :, 0] *= -1                # reflections too: not commutative
    return r


@settings(max_examples=30, deadline=None)
@given(seed=SEEDS, n=LENGTHS, exclusive=EXCLUSIVE, dtype=st.sampled_from(FLOATS + INTS))
def test_addition_scans_equal_oracle_and_cumsum(seed, n, exclusive, dtype):
    x = _values(np.random.default_rng(seed), n, dtype)
    want = sequential_scan(x, exclusive=exclusive)
    inclusive = np.cumsum(x, dtype=x.dtype)
    np.testing.assert_array_equal(want, inclusive if not exclusive else
                                  np.concatenate([[0], inclusive[:-1]]).astype(x.dtype)[:n])
    for scan in (blelloch_scan, hillis_steele_scan):
        got = scan(x, exclusive=exclusive)
        assert got.dtype == x.dtype and got.shape == x.shape
        np.testing.assert_array_equal(got, want)


@settings(max_examples=20, deadline=None)
@given(seed=SEEDS, n=LENGTHS, exclusive=EXCLUSIVE, dtype=st.sampled_from(FLOATS + INTS))
def test_maximum_scans_equal_oracle(seed, n, exclusive, dtype):
    x = _values(np.random.default_rng(seed), n, dtype, (3,))
    want = sequential_scan(x, op=maximum, exclusive=exclusive)
    if not exclusive:
        np.testing.assert_array_equal(want, np.maximum.accumulate(x, axis=0))
    for scan in (blelloch_scan, hillis_steele_scan):
        np.testing.assert_array_equal(scan(x, op=maximum, exclusive=exclusive), want)


@settings(max_examples=15, deadline=None)
@given(seed=SEEDS, n=st.integers(0, 3000), exclusive=EXCLUSIVE, dtype=st.sampled_from(["int64", "int32"]))
def test_integer_matrix_products_are_exact_in_sequence_order(seed, n, exclusive, dtype):
    x = np.random.default_rng(seed).integers(-3, 4, (n, 3, 3)).astype(dtype)   # wraps: still exact
    want = sequential_scan(x, op=matmul, exclusive=exclusive)
    for scan in (blelloch_scan, hillis_steele_scan):
        np.testing.assert_array_equal(scan(x, op=matmul, exclusive=exclusive), want)


@settings(max_examples=15, deadline=None)
@given(seed=SEEDS, n=st.integers(0, 3000), exclusive=EXCLUSIVE, dtype=st.sampled_from(FLOATS))
def test_float_matrix_products_follow_sequence_order(seed, n, exclusive, dtype):
    x = _rotations(np.random.default_rng(seed), n).astype(dtype)
    want = sequential_scan(x, op=matmul, exclusive=exclusive)
    tol = 1e-3 if dtype == "float32" else 1e-9
    for scan in (blelloch_scan, hillis_steele_scan):
        np.testing.assert_allclose(scan(x, op=matmul, exclusive=exclusive), want, atol=tol)


@settings(max_examples=20, deadline=None)
@given(seed=SEEDS, n=LENGTHS, exclusive=EXCLUSIVE, dtype=st.sampled_from(FLOATS + ["int64"]))
def test_affine_compositions_follow_sequence_order(seed, n, exclusive, dtype):
    rng = np.random.default_rng(seed)
    if dtype == "int64":
        x = rng.integers(-2, 3, (n, 2))                # wraps modulo 2**64: still exact
    else:
        x = np.stack([rng.uniform(-1, 1, n), rng.normal(size=n)], axis=-1).astype(dtype)
    want = sequential_scan(x, op=affine, exclusive=exclusive)
    for scan in (blelloch_scan, hillis_steele_scan):
        got = scan(x, op=affine, exclusive=exclusive)
        if dtype == "int64":
            np.testing.assert_array_equal(got, want)
        else:
            tol = 2e-3 if dtype == "float32" else 1e-9
            np.testing.assert_allclose(got, want, atol=tol, rtol=tol)


@pytest.mark.parametrize("n", [2**20 - 1, 2**20 + 3, 10**6])
@pytest.mark.parametrize("dtype", ["int64", "float64"])
def test_large_addition_and_maximum_match_numpy(n, dtype):
    x = _values(np.random.default_rng(n), n, dtype)
    np.testing.assert_array_equal(blelloch_scan(x, exclusive=False), np.cumsum(x))
    np.testing.assert_array_equal(blelloch_scan(x, exclusive=True)[1:], np.cumsum(x)[:-1])
    np.testing.assert_array_equal(blelloch_scan(x, op=maximum, exclusive=False),
                                  np.maximum.accumulate(x))


@pytest.mark.slow
def test_large_affine_scan_matches_sequential_oracle():
    n = 2 * 10**5
    rng = np.random.default_rng(5)
    x = np.stack([rng.uniform(-1, 1, n), rng.normal(size=n)], axis=-1)
    np.testing.assert_allclose(blelloch_scan(x, op=affine, exclusive=False),
                               sequential_scan(x, op=affine, exclusive=False), atol=1e-9)


@settings(max_examples=25, deadline=None)
@given(n=LENGTHS, exclusive=EXCLUSIVE)
def test_every_scan_combines_exactly_the_right_input_ranges_in_order(n, exclusive):
    from course.scan.algorithms import interval, interval_leaves

    want = np.stack([np.zeros(n, dtype=np.int64), np.arange(n) + (not exclusive)], axis=-1)
    for scan in (blelloch_scan, hillis_steele_scan):
        got = scan(interval_leaves(n), op=interval, exclusive=exclusive)
        empty = got[:, 0] == got[:, 1]                 # the identity: any empty range
        got = np.where(empty[:, None], 0, got)
        np.testing.assert_array_equal(got, want)
