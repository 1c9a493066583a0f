"""Blelloch and Hillis-Steele scans agree with the sequential oracle, in operand order."""

import numpy as np
import pytest

from course.scan.algorithms import add, affine, blelloch_scan, hillis_steele_scan, matmul, maximum, sequential_scan

LENGTHS = [0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 33, 100]


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("exclusive", [True, False])
def test_matrix_product_scan_keeps_operand_order(n, exclusive):
    m = np.random.default_rng(n).normal(size=(n, 3, 3))
    want = sequential_scan(m, op=matmul, exclusive=exclusive)
    np.testing.assert_allclose(blelloch_scan(m, op=matmul, exclusive=exclusive), want, rtol=1e-9,
                               atol=1e-9)
    np.testing.assert_allclose(hillis_steele_scan(m, op=matmul, exclusive=exclusive), want,
                               rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("exclusive", [True, False])
def test_affine_composition_scan_keeps_operand_order(n, exclusive):
    f = np.random.default_rng(n).normal(size=(n, 2))
    want = sequential_scan(f, op=affine, exclusive=exclusive)
    np.testing.assert_allclose(blelloch_scan(f, op=affine, exclusive=exclusive), want, rtol=1e-9,
                               atol=1e-12)


def test_sequential_matrix_scan_is_left_to_right_product():
    m = np.random.default_rng(1).normal(size=(4, 2, 2))
    inc = sequential_scan(m, op=matmul, exclusive=False)
    np.testing.assert_allclose(inc[3], m[0] @ m[1] @ m[2] @ m[3])
    exc = sequential_scan(m, op=matmul)
    np.testing.assert_allclose(exc[0], np.eye(2))


def test_inclusive_affine_scan_solves_linear_recurrence():
    f = np.random.default_rng(2).normal(size=(20, 2))
    h, hs = 0.0, []
    for m, c in f:
        h = m * h + c
        hs.append(h)
    np.testing.assert_allclose(blelloch_scan(f, op=affine, exclusive=False)[:, 1], hs)


@pytest.mark.parametrize("n", LENGTHS)
def test_addition_and_maximum_match_numpy(n):
    x = np.random.default_rng(n).integers(-50, 50, n)
    np.testing.assert_array_equal(blelloch_scan(x, exclusive=False), np.cumsum(x))
    np.testing.assert_array_equal(blelloch_scan(x, op=add, exclusive=False), np.cumsum(x))
    np.testing.assert_array_equal(blelloch_scan(x, op=maximum, exclusive=False),
                                  np.maximum.accumulate(x))
