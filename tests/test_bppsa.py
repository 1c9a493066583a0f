"""BPPSA: backprop_scan equals backprop_sequential; costs; bad input gets a clear message."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from course import BadInputError
from course.bppsa.algorithm import (
    backprop_scan,
    backprop_sequential,
    bppsa_operator,
    gradients_from_scan,
    inplace_scan,
    scan_elements,
    validate_chain,
    work_counts,
)


def orthogonal_chain(T, n, B, seed):
    """Jacobians that neither blow up nor vanish over thousands of steps (random rotations)."""
    rng = np.random.default_rng(seed)
    shape = (T, n, n) if B is None else (T, B, n, n)
    q, r = np.linalg.qr(rng.standard_normal(shape))
    q = q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[..., None, :]
    g = rng.standard_normal((n,) if B is None else (B, n))
    return q, g


def test_sequential_follows_the_chain_rule_by_hand():
    J = np.array([[[1.0, 2.0], [3.0, 4.0]], [[0.0, 1.0], [1.0, 0.0]]])   # T = 2
    g = np.array([1.0, -1.0])
    G = backprop_sequential(J, g)
    assert np.array_equal(G[2], g)
    assert np.allclose(G[1], J[1].T @ g)
    assert np.allclose(G[0], J[0].T @ J[1].T @ g)


def test_scan_equals_sequential_on_a_small_batched_chain():
    rng = np.random.default_rng(3)
    J = rng.standard_normal((9, 4, 3, 3)) * 0.5
    g = rng.standard_normal((4, 3))
    np.testing.assert_allclose(backprop_scan(J, g), backprop_sequential(J, g), rtol=1e-12, atol=1e-13)


@settings(max_examples=25, deadline=None)
@given(T=st.integers(1, 5000), n=st.integers(1, 6), B=st.one_of(st.none(), st.integers(1, 3)),
       seed=st.integers(0, 2**16))
@example(T=5000, n=6, B=3, seed=1)
@example(T=4095, n=5, B=None, seed=2)
def test_scan_equals_sequential_to_1e10_for_long_chains(T, n, B, seed):
    J, g = orthogonal_chain(T, n, B, seed)
    a, b = backprop_scan(J, g), backprop_sequential(J, g)
    assert a.shape == b.shape == (T + 1,) + g.shape
    assert np.max(np.abs(a - b)) <= 1e-10 * max(1.0, float(np.max(np.abs(b))))


@settings(max_examples=40, deadline=None)
@given(T=st.integers(1, 40), n=st.integers(1, 8), B=st.one_of(st.none(), st.integers(1, 5)),
       seed=st.integers(0, 2**16))
def test_scan_equals_sequential_for_general_matrices(T, n, B, seed):
    rng = np.random.default_rng(seed)
    J = rng.standard_normal((T, n, n) if B is None else (T, B, n, n)) / np.sqrt(n)
    g = rng.standard_normal((n,) if B is None else (B, n))
    a, b = backprop_scan(J, g), backprop_sequential(J, g)
    assert np.max(np.abs(a - b)) <= 1e-10 * max(1.0, float(np.max(np.abs(b))))


def test_float32_chains_stay_float32_and_close():
    J, g = orthogonal_chain(300, 5, 2, 1)
    J, g = J.astype(np.float32), g.astype(np.float32)
    a = backprop_scan(J, g)
    assert a.dtype == np.float32
    np.testing.assert_allclose(a, backprop_sequential(J, g), atol=1e-4)


def test_operator_puts_the_later_element_on_the_left():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 3)), rng.standard_normal((2, 3, 3))
    assert np.allclose(bppsa_operator(a, b), b @ a)
    assert not np.allclose(bppsa_operator(a, b), a @ b)
    c = rng.standard_normal((2, 3, 3))
    assert np.allclose(bppsa_operator(bppsa_operator(a, b), c), bppsa_operator(a, bppsa_operator(b, c)))


def test_scan_elements_embed_grad_as_first_column_then_reversed_transposes():
    rng = np.random.default_rng(1)
    J, g = rng.standard_normal((3, 2, 4, 4)), rng.standard_normal((2, 4))
    E = scan_elements(J, g)
    assert E.shape == (4, 2, 4, 4)
    assert np.array_equal(E[0, :, :, 0], g) and not E[0, :, :, 1:].any()
    assert np.array_equal(E[1], np.swapaxes(J[2], -1, -2))
    assert np.array_equal(E[3], np.swapaxes(J[0], -1, -2))
    # The running products E_k ... E_0, made one by one here, carry the chain rule's gradients:
    # G_T = g and G_t = J_tᵀ G_{t+1}, written out with einsum as the independent oracle.
    P = [E[0]]
    for k in range(1, 4):
        P.append(E[k] @ P[-1])
    want = [g]
    for t in (2, 1, 0):
        want.insert(0, np.einsum("bji,bj->bi", J[t], want[0]))
    np.testing.assert_allclose(gradients_from_scan(np.stack(P)), np.stack(want), rtol=1e-12, atol=1e-12)


def test_scan_trace_has_two_log_levels():
    J, g = orthogonal_chain(15, 2, None, 0)           # 16 elements: 4 up + 4 down levels
    G, tr = backprop_scan(J, g, trace=True)
    assert tr.steps == 8
    assert np.allclose(G, backprop_sequential(J, g))


def test_work_counts_scan_has_log_steps_and_more_flops():
    c = work_counts(30000, 20, 16)
    assert c["steps_sequential"] == 30000
    assert c["steps_scan"] == 2 * int(np.ceil(np.log2(30001)))
    assert c["flops_sequential"] == 2 * 20 * 20 * 30000 * 16
    assert c["flops_scan"] == 2 * 20 ** 3 * c["combines_scan"] * 16
    assert 30000 * 2 <= c["combines_scan"] <= 2 * 30001
    assert c["work_ratio"] > 20 * 1.9                   # the teaching scan: about 2n times the arithmetic
    assert 20 < c["work_ratio_min"] < 21.5               # the least scan: about n + 1 times
    assert c["combines_up"] + c["combines_down"] == c["combines_scan"]
    assert c["bytes_scan"] == 20 * c["bytes_sequential"]


@pytest.mark.parametrize("T", [1, 2, 3, 7, 8, 31, 100, 257])
def test_least_scan_count_is_what_the_scan_multiplies(T):
    """Every combine whose operand holds only the gradient column (the leftmost up-sweep branch, every
    down-sweep combine) is a matrix-vector product; work_counts' least count says exactly how many."""
    n = 3
    J, g = orthogonal_chain(T, n, None, 1)
    kinds = {"matrix": 0, "vector": 0}

    def counting_op(a, b):
        for k in range(a.shape[0]):
            vector = not a[k][:, 1:].any() or not b[k][:, 1:].any()
            kinds["vector" if vector else "matrix"] += 1
        return bppsa_operator(a, b)

    inplace_scan(scan_elements(J, g), counting_op, np.eye(n))
    c = work_counts(T, n)
    assert kinds["matrix"] + kinds["vector"] == c["combines_scan"]
    assert c["flops_scan_min"] == 2 * n ** 3 * kinds["matrix"] + 2 * n ** 2 * kinds["vector"]
    assert kinds["vector"] >= c["combines_down"]          # the whole down-sweep meets the gradient


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_work_counts_rejects_bad_sizes(bad):
    with pytest.raises(BadInputError, match="T must be a whole number"):
        work_counts(bad, 4)


@pytest.mark.parametrize("fn", [backprop_sequential, backprop_scan])
def test_empty_chain_is_refused_with_a_message(fn):
    with pytest.raises(BadInputError, match=r"T = 0"):
        fn(np.zeros((0, 3, 3)), np.zeros(3))


@pytest.mark.parametrize("fn", [backprop_sequential, backprop_scan])
def test_non_square_jacobians_are_refused(fn):
    with pytest.raises(BadInputError, match=r"square.*3×4"):
        fn(np.zeros((5, 3, 4)), np.zeros(3))


@pytest.mark.parametrize("fn", [backprop_sequential, backprop_scan])
@pytest.mark.parametrize("jshape,gshape,needed", [((5, 3, 3), (4,), r"\(3,\)"),
                                                  ((5, 2, 3, 3), (3,), r"\(2, 3\)"),
                                                  ((5, 2, 3, 3), (4, 3), r"\(2, 3\)")])
def test_mismatched_grad_names_the_shape_it_needs(fn, jshape, gshape, needed):
    with pytest.raises(BadInputError, match=needed):
        fn(np.zeros(jshape), np.zeros(gshape))


def test_wrong_number_of_axes_is_refused():
    with pytest.raises(BadInputError, match=r"\(T, n, n\) or \(T, B, n, n\)"):
        backprop_scan(np.zeros((3, 3)), np.zeros(3))


def test_integer_arrays_are_refused():
    with pytest.raises(BadInputError, match="floating point"):
        validate_chain(np.zeros((2, 3, 3), dtype=int), np.zeros(3, dtype=int))


@pytest.mark.gpu
def test_scan_on_gpu_matches_numpy():
    import course

    J, g = orthogonal_chain(777, 8, 4, 5)
    Jd, gd = course.to_device(J, "gpu"), course.to_device(g, "gpu")
    ref = backprop_sequential(J, g)
    np.testing.assert_allclose(course.to_numpy(backprop_scan(Jd, gd)), ref, atol=1e-10)
    np.testing.assert_allclose(course.to_numpy(backprop_sequential(Jd, gd)), ref, atol=1e-10)


@pytest.mark.gpu
def test_mixed_devices_are_refused():
    import course

    with pytest.raises(BadInputError, match="to_device"):
        backprop_scan(course.to_device(np.zeros((2, 3, 3)), "gpu"), np.zeros(3))


@pytest.mark.parametrize("module", ["bppsa.algorithm", "bppsa.models", "bppsa.sparse", "bppsa.timing", "bppsa.plots"])
def test_docstring_examples_still_hold(module):
    import doctest
    import importlib

    mod = importlib.import_module(f"course.{module}")
    result = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) of course.{module} fail"


def test_scan_elements_of_the_wrong_shape_are_refused():
    from course.bppsa.algorithm import backprop_scan_elements

    with pytest.raises(BadInputError, match=r"\(T\+1, \[B,\] n, n\)"):
        backprop_scan_elements(np.zeros((1, 3, 3)))
    with pytest.raises(BadInputError, match="scan_elements"):
        backprop_scan_elements(np.zeros((4, 3, 2)))


@pytest.mark.parametrize("T", [1, 2, 6, 7, 20])
def test_work_counts_match_what_the_scan_really_did(T):
    J, g = orthogonal_chain(T, 2, None, T)
    _, tr = backprop_scan(J, g, trace=True)
    c = work_counts(T, 2)
    assert tr.work == c["combines_scan"] and tr.steps == c["steps_scan"]


# ------------------------------------------------------------------ the in-place scan and its memory

@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 200), seed=st.integers(0, 2**31 - 1))
def test_inplace_scan_equals_the_sequential_oracle_for_any_length(n, seed):
    from course.bppsa.algorithm import inplace_scan
    from course.scan.algorithms import add, sequential_scan

    x = np.random.default_rng(seed).integers(-50, 50, n)
    buf = x.copy()
    total = inplace_scan(buf, add, 0)
    np.testing.assert_array_equal(buf, sequential_scan(x))
    assert total == x.sum()


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 64, 65, 200])
def test_inplace_scan_keeps_the_operand_order_of_matrix_products(n):
    from course.bppsa.algorithm import inplace_scan
    from course.scan.algorithms import matmul, sequential_scan

    m = np.random.default_rng(n).normal(size=(n, 3, 3))
    buf = m.copy()
    total = inplace_scan(buf, matmul, np.eye(3))
    np.testing.assert_allclose(buf, sequential_scan(m, op=matmul), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(total, sequential_scan(m, op=matmul, exclusive=False)[-1], rtol=1e-9, atol=1e-9)


def test_inplace_scan_and_level_by_level_scan_give_the_same_gradients():
    from course.bppsa.algorithm import backprop_scan_elements

    rng = np.random.default_rng(5)
    J, g = rng.normal(size=(300, 2, 4, 4)) * 0.4, rng.normal(size=(2, 4))
    in_place = backprop_scan(J, g)
    traced, _ = backprop_scan_elements(scan_elements(J, g), trace=True)
    np.testing.assert_allclose(in_place, traced, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("T,n,B", [(1000, 20, 16), (4097, 8, 4), (200, 5, 1)])
def test_scan_memory_estimate_matches_the_measured_peak(T, n, B):
    import tracemalloc

    from course.bppsa.algorithm import scan_memory

    rng = np.random.default_rng(0)
    J = (rng.standard_normal((T, B, n, n)) * 0.2).astype(np.float32)
    g = rng.standard_normal((B, n)).astype(np.float32)
    tracemalloc.start()
    try:
        backprop_scan(J, g)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    est = scan_memory(T, n, B, 4)
    assert abs(est["peak"] - peak) <= 0.10 * peak
    if T >= 1000:  # a short chain pays a fixed minimum chunk of 64 elements
        assert peak <= 1.5 * J.nbytes


def test_scan_memory_at_the_papers_size_stays_near_the_jacobians():
    from course.bppsa.algorithm import scan_memory

    m = scan_memory(30000, 20, 16, 4)
    assert m["jacobians"] == 30000 * 16 * 20 * 20 * 4
    assert m["peak"] <= 1.5 * m["jacobians"]
    with pytest.raises(BadInputError, match="batch"):
        scan_memory(10, 4, 0)


def test_backprop_scan_elements_overwrites_its_buffer_but_not_the_jacobians():
    from course.bppsa.algorithm import backprop_scan_elements

    rng = np.random.default_rng(1)
    J, g = rng.normal(size=(9, 3, 3)), rng.normal(size=3)
    keep = J.copy()
    elems = scan_elements(J, g)
    G = backprop_scan_elements(elems)
    np.testing.assert_array_equal(J, keep)
    np.testing.assert_allclose(G, backprop_sequential(J, g), rtol=1e-10, atol=1e-12)
