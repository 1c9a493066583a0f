"""Scan timing helpers (what runs, what is refused) and the exercise checks (what they catch)."""

from __future__ import annotations

import numpy as np
import pytest

import course.check as check
from course.errors import BadInputError
from course.scan import checks as answers
from course.scan.algorithms import interval
from course.scan.timing import SEQUENTIAL_MAX_N, make_input, scan_function, scan_sweep, time_scan


@pytest.mark.parametrize("op, shape", [("add", (5,)), ("max", (5,)), ("matmul", (5, 2, 2)), ("affine", (5, 2))])
def test_make_input_gives_elements_of_each_operator(op, shape):
    x = make_input(5, op, "float32")
    assert x.shape == shape and x.dtype == np.float32


@pytest.mark.parametrize("alg", ["numpy", "blelloch", "hillis-steele", "sequential"])
def test_every_cpu_scan_function_is_inclusive_and_right(alg):
    x = make_input(100, "add", "float64")
    np.testing.assert_allclose(scan_function(alg, "add")(x), np.cumsum(x))


def test_bad_timing_requests_are_refused_with_reasons():
    with pytest.raises(BadInputError, match="unknown CPU scan 'cub'"):
        scan_function("cub")
    with pytest.raises(BadInputError, match="numpy has no built-in scan for 'matmul'"):
        scan_function("numpy", "matmul")
    with pytest.raises(BadInputError, match="timed only up to"):
        time_scan("sequential", SEQUENTIAL_MAX_N + 1)
    with pytest.raises(BadInputError, match="unknown operator 'mul'"):
        make_input(4, "mul")
    with pytest.raises(BadInputError, match="whole number"):
        make_input(-1)


def test_scan_sweep_records_bandwidth_copy_limit_and_skips():
    rs = scan_sweep([2**8], algorithms=["numpy", "blelloch"], op="matmul", repeat=2, budget_s=0.05,
                    copy_nbytes=2**20)
    algs = {r["algorithm"] for r in rs.records}
    assert algs == {"blelloch", "copy"}
    assert any("numpy" in note and "skipped" in note for note in rs.notes)
    rec = rs.select(algorithm="blelloch")[0]
    assert rec["gb_per_s"] == pytest.approx(2 * 2**8 * 4 * 4 / rec["median_s"] / 1e9)


def _stub(*args):
    raise NotImplementedError


def _loop_up_sweep_level(nodes, op):
    """Written here, one pair at a time, sharing no code with the course's answer."""
    parents = [op(nodes[i:i + 1], nodes[i + 1:i + 2])[0] for i in range(0, len(nodes) - 1, 2)]
    if len(nodes) % 2:
        parents.append(nodes[-1])
    return np.stack(parents) if parents else nodes[:0]


def _loop_down_sweep_level(parent_prefix, nodes, op):
    out = []
    for i in range(len(nodes)):
        p = parent_prefix[i // 2:i // 2 + 1]
        out.append(p[0] if i % 2 == 0 else op(p, nodes[i - 1:i])[0])
    return np.stack(out) if out else nodes[:0]


def _loop_exclusive_from_inclusive(inclusive, identity):
    out = np.empty_like(inclusive)
    for i in range(len(inclusive)):
        out[i] = identity if i == 0 else inclusive[i - 1]
    return out


def _indexed_up_sweep_level(nodes, op):
    """One call of op, with index arrays instead of the course's slices."""
    m = len(nodes)
    pairs = op(nodes[np.arange(0, m - 1, 2)], nodes[np.arange(1, m, 2)])
    return np.concatenate([pairs, nodes[[m - 1]]]) if m % 2 else pairs


def _indexed_down_sweep_level(parent_prefix, nodes, op):
    m = len(nodes)
    out = parent_prefix[np.arange(m) // 2].copy()
    out[np.arange(1, m, 2)] = op(parent_prefix[np.arange(m // 2)], nodes[np.arange(0, m - 1, 2)])
    return out


def test_checks_pass_independent_answers_and_the_course_answers(capsys):
    assert check.check_up_sweep_level(_indexed_up_sweep_level)
    assert check.check_down_sweep_level(_indexed_down_sweep_level)
    assert check.check_exclusive_from_inclusive(_loop_exclusive_from_inclusive)
    assert check.check_up_sweep_level(answers.up_sweep_level)
    assert capsys.readouterr().out.count("Correct") == 4


def test_the_course_answers_agree_with_the_loops_written_here():
    from course.scan.algorithms import add, matmul

    rng = np.random.default_rng(0)
    for m in (1, 2, 5, 8):
        x = rng.integers(0, 9, m)
        np.testing.assert_array_equal(answers.up_sweep_level(x, add), _loop_up_sweep_level(x, add))
        A = rng.standard_normal((m, 2, 2))
        np.testing.assert_allclose(answers.up_sweep_level(A, matmul), _loop_up_sweep_level(A, matmul))
        pp = rng.integers(0, 9, (m + 1) // 2)
        np.testing.assert_array_equal(answers.down_sweep_level(pp, x, add), _loop_down_sweep_level(pp, x, add))
        np.testing.assert_array_equal(answers.exclusive_from_inclusive(x, 0), _loop_exclusive_from_inclusive(x, 0))


def test_checks_refuse_a_wrong_operand_order(capsys):
    def swapped(nodes, op):
        m = nodes.shape[0]
        parents = op(nodes[1:m:2], nodes[0:m - 1:2])
        return np.concatenate([parents, nodes[m - 1:]]) if m % 2 else parents

    assert check.check_up_sweep_level(swapped) is False


@pytest.mark.parametrize("fn", [check.check_up_sweep_level, check.check_down_sweep_level,
                                check.check_exclusive_from_inclusive])
def test_checks_say_not_done_yet_for_a_stub(fn, capsys):
    assert fn(_stub) is False
    assert "Not done yet" in capsys.readouterr().out


def test_up_sweep_check_names_swapped_operands(capsys):
    assert not check.check_up_sweep_level(lambda a, op: op(a[1::2], a[0::2]))
    assert "Operand order" in capsys.readouterr().out


def test_up_sweep_check_wants_one_call_per_level(capsys):
    def per_pair(a, op):
        parts = [op(a[i:i + 1], a[i + 1:i + 2]) for i in range(0, len(a) - 1, 2)]
        if len(a) % 2:
            parts.append(a[-1:])
        return np.concatenate(parts)
    assert not check.check_up_sweep_level(per_pair)
    assert "call it ONCE" in capsys.readouterr().out


def test_up_sweep_check_wants_odd_node_moved_up(capsys):
    assert not check.check_up_sweep_level(lambda a, op: op(a[0:len(a) - 1:2], a[1::2]))
    assert "move up unchanged" in capsys.readouterr().out


def test_down_sweep_check_names_swapped_operands(capsys):
    def swapped(p, a, op):
        out = np.empty_like(a)
        m = len(a)
        out[0::2] = p[:(m + 1) // 2]
        out[1::2] = op(a[0:m - 1:2], p[:m // 2])
        return out
    assert not check.check_down_sweep_level(swapped)
    assert "Operand order" in capsys.readouterr().out


def test_down_sweep_check_names_wrong_sibling(capsys):
    def wrong_sibling(p, a, op):
        out = np.empty_like(a)
        m = len(a)
        out[0::2] = p[:(m + 1) // 2]
        out[1::2] = op(p[:m // 2], a[1::2])
        return out
    assert not check.check_down_sweep_level(wrong_sibling)
    assert "the left sibling is nodes[0::2]" in capsys.readouterr().out


def test_exclusive_check_names_left_shift(capsys):
    assert not check.check_exclusive_from_inclusive(
        lambda inc, e: np.concatenate([inc[1:], inc[:1]]) if len(inc) else inc)
    assert "shifted LEFT" in capsys.readouterr().out


def test_exclusive_check_catches_missing_identity(capsys):
    assert not check.check_exclusive_from_inclusive(lambda inc, e: inc)
    assert "expected" in capsys.readouterr().out


def test_interval_operator_marks_out_of_order_combinations():
    a = np.array([[2, 4]])
    b = np.array([[0, 2]])
    np.testing.assert_array_equal(interval(a, b), [[-1, -2]])
    np.testing.assert_array_equal(interval(b, a), [[0, 4]])
