"""Bad input gets a clear message; edge cases give their documented results; traces count right."""

import numpy as np
import pytest

from course.errors import BadInputError
from course.scan.algorithms import (
    add,
    affine,
    associative_on_samples,
    blelloch_scan,
    hillis_steele_scan,
    identity_for,
    matmul,
    maximum,
    operation_counts,
    sequential_scan,
)

SCANS = [sequential_scan, hillis_steele_scan, blelloch_scan]


@pytest.mark.parametrize("scan", SCANS)
@pytest.mark.parametrize("exclusive", [True, False])
def test_empty_input_gives_empty_result_of_same_shape(scan, exclusive):
    out = scan(np.zeros((0, 2, 2)), op=matmul, exclusive=exclusive)
    assert out.shape == (0, 2, 2)


@pytest.mark.parametrize("scan", SCANS)
def test_length_one_exclusive_is_identity_and_inclusive_is_the_element(scan):
    x = np.array([[[2.0, 1.0], [0.0, 3.0]]])
    np.testing.assert_array_equal(scan(x, op=matmul, exclusive=True), [np.eye(2)])
    np.testing.assert_array_equal(scan(x, op=matmul, exclusive=False), x)


@pytest.mark.parametrize("scan", SCANS)
def test_identity_with_wrong_shape_is_rejected_naming_both_shapes(scan):
    with pytest.raises(BadInputError, match=r"identity has shape \(3,\).*shape \(2,\)"):
        scan(np.ones((4, 2)), identity=np.zeros(3))


def test_scalar_identity_broadcasts_to_the_element():
    np.testing.assert_array_equal(blelloch_scan(np.ones((3, 2)), identity=0),
                                  [[0, 0], [1, 1], [2, 2]])


def test_unknown_operator_without_identity_asks_for_one():
    with pytest.raises(BadInputError, match="no identity is known for the operator 'mul'"):
        def mul(a, b):
            return a * b
        blelloch_scan(np.ones(4), op=mul)


def test_unknown_operator_with_identity_works():
    np.testing.assert_array_equal(
        blelloch_scan(np.arange(1.0, 6.0), op=lambda a, b: a * b, identity=1, exclusive=False),
        np.cumprod(np.arange(1.0, 6.0)))


def test_zero_dimensional_input_is_rejected():
    with pytest.raises(BadInputError, match="0-d value"):
        blelloch_scan(np.float64(3.0))


def test_operator_that_is_not_callable_is_rejected():
    with pytest.raises(BadInputError, match="op must be a function"):
        blelloch_scan(np.ones(3), op="add")


def test_matmul_needs_square_matrices():
    with pytest.raises(BadInputError, match=r"square k x k.*\(2, 3\)"):
        blelloch_scan(np.ones((4, 2, 3)), op=matmul)


def test_affine_needs_pairs():
    with pytest.raises(BadInputError, match=r"\(m, c\) pairs.*\(3,\)"):
        blelloch_scan(np.ones((4, 3)), op=affine)


def test_float_identity_that_does_not_fit_integers_is_rejected():
    with pytest.raises(BadInputError, match="cannot be stored in x's integer dtype int64"):
        blelloch_scan(np.arange(4), op=maximum, identity=-np.inf)


def test_maximum_identity_is_the_dtype_minimum():
    assert identity_for(maximum, (), np.int16) == np.iinfo(np.int16).min
    assert identity_for(maximum, (), np.float32) == -np.inf
    np.testing.assert_array_equal(blelloch_scan(np.array([3, -7, 5], dtype=np.int16), op=maximum),
                                  [np.iinfo(np.int16).min, 3, 3])


def test_non_associative_operator_is_detected_and_refused_by_the_tree_scans():
    def minus(a, b):
        return a - b
    assert not associative_on_samples(minus, np.arange(6.0), verbose=False)
    x = np.arange(1.0, 9.0)
    for scan in (blelloch_scan, hillis_steele_scan):
        with pytest.raises(BadInputError, match="not associative"):
            scan(x, op=minus, identity=0.0)
    sequential_scan(x, op=minus, identity=0.0)          # the loop has one bracketing: it is what it is


def test_associativity_check_passes_ready_operators(capsys):
    rng = np.random.default_rng(0)
    assert associative_on_samples(add, rng.normal(size=10))
    assert associative_on_samples(maximum, rng.normal(size=(10, 3)))
    assert associative_on_samples(matmul, rng.normal(size=(10, 3, 3)))
    assert associative_on_samples(affine, rng.normal(size=(10, 2)))
    assert capsys.readouterr().out == ""


def test_associativity_check_explains_the_failure(capsys):
    associative_on_samples(lambda a, b: (a + b) / 2, np.arange(5.0))
    assert "not associative: for sample 0" in capsys.readouterr().out


def test_associativity_check_needs_three_samples():
    with pytest.raises(BadInputError, match="at least 3 sample"):
        associative_on_samples(add, np.ones(2))


def test_input_is_not_modified():
    x = np.arange(10.0)
    blelloch_scan(x)
    hillis_steele_scan(x, exclusive=True)
    np.testing.assert_array_equal(x, np.arange(10.0))


@pytest.mark.parametrize("n", [1, 2, 5, 8, 13, 64, 100])
def test_blelloch_trace_counts_work_and_steps(n):
    _, tr = blelloch_scan(np.ones(n), trace=True)
    counts = operation_counts("blelloch", n)
    assert tr.work == counts["work"] == 2 * (n - 1)
    assert tr.steps == counts["steps"] == 2 * int(np.ceil(np.log2(n)))


@pytest.mark.parametrize("n", [2, 5, 8, 13, 100])
def test_hillis_steele_trace_counts_work_and_steps(n):
    _, tr = hillis_steele_scan(np.ones(n), trace=True)
    counts = operation_counts("hillis-steele", n)
    assert tr.work == counts["work"] and tr.steps == counts["steps"] == int(np.ceil(np.log2(n)))
    assert tr.work > n * (np.log2(n) - 2)


@pytest.mark.parametrize("n", [5, 8, 11])
def test_blelloch_trace_in_place_picture_matches_classic_algorithm(n):
    x = np.arange(1, n + 1)
    out, tr = blelloch_scan(x, trace=True)
    padded = tr.padded_n
    ups = [lv for lv in tr.levels if lv.phase == "up"]
    downs = [lv for lv in tr.levels if lv.phase == "down"]
    assert len(ups) == len(downs) == int(np.log2(padded))
    np.testing.assert_array_equal(ups[-1].state[padded - 1], x.sum())     # the root: the total
    np.testing.assert_array_equal(downs[-1].state[:n], out)               # leaves: the scan
    for lv in ups:                       # each right node now holds left + old right
        assert np.all(lv.right - lv.left == lv.stride // 2) and np.all(lv.right < padded)


def test_unknown_algorithm_in_operation_counts_is_rejected():
    with pytest.raises(BadInputError, match="unknown scan algorithm 'bogus'"):
        operation_counts("bogus", 8)


@pytest.mark.parametrize("exclusive", [True, False])
def test_operator_returning_a_view_of_its_operand_does_not_corrupt_input_or_result(exclusive):
    def last(a, b):              # associative, and returns a view of b
        return b
    x = np.arange(11.0)
    want = sequential_scan(x, op=last, identity=-1.0, exclusive=exclusive)
    np.testing.assert_array_equal(blelloch_scan(x, op=last, identity=-1.0, exclusive=exclusive), want)
    np.testing.assert_array_equal(x, np.arange(11.0))


@pytest.mark.parametrize("n", [2, 7, 64, 1000])
def test_each_tree_level_is_one_operator_call_over_all_its_pairs(n):
    calls = []

    def counting_add(a, b):
        calls.append(a.shape[0])
        return a + b
    blelloch_scan(np.ones(n), op=counting_add, identity=0.0)
    probe = [8, 8, 8, 8] if n >= 3 else []               # first, the associativity probe: 4 calls on 8 triples
    assert calls[:len(probe)] == probe
    del calls[:len(probe)]
    levels = int(np.ceil(np.log2(n)))
    assert len(calls) == 2 * levels                      # one call per level, up and down
    assert sum(calls) == 2 * (n - 1)                     # every pair of the level in that call
    calls.clear()
    hillis_steele_scan(np.ones(n), op=counting_add, identity=0.0)
    assert len(calls) == levels + len(probe)


@pytest.mark.parametrize("op, a, b, words", [
    (add, [1, 2], [3, 4], "add: a must be a stack"),                  # a list: + would concatenate, not add
    (maximum, np.ones(3), 5.0, "maximum: b must be a stack"),
    (matmul, np.ones(2), np.ones(2), "matmul: a must be a stack"),     # 1-d: @ would be a dot product
    (affine, np.ones((4, 3)), np.ones((4, 3)), r"\(m, \.\.\., 2\)"),   # no pairs: columns 0 and 1 read as (m, c)
])
def test_the_ready_operators_refuse_what_is_not_a_stack_instead_of_answering_wrong(op, a, b, words):
    with pytest.raises(BadInputError, match=words):
        op(a, b)


def test_the_scans_doors_refuse_a_bad_operator_or_flag_before_scanning():
    with pytest.raises(BadInputError, match="op must be a function"):
        blelloch_scan(np.ones(4), op="add")
    with pytest.raises(BadInputError, match="exclusive must be one of"):
        sequential_scan(np.ones(4), exclusive="no")              # a truthy string would have meant True
    with pytest.raises(BadInputError, match="at least 3 sample elements"):
        associative_on_samples(add, np.ones(2))
    with pytest.raises(BadInputError, match="dtype must be the dtype"):
        identity_for(add, (2,), None)                            # numpy would read None as float64
