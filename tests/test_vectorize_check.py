"""Lesson 02's exercise checks: they accept a right and fast answer and say what is wrong otherwise."""

from __future__ import annotations

import numpy as np

import course.check as check
from course.vectorize.exercises import leaky_relu_loop, softmax_rows_loop


def good_leaky(x, slope=0.01):
    return np.where(x > 0, x, x * x.dtype.type(slope))


def good_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_stub_prints_not_done_yet_instead_of_raising(capsys):
    def stub(x, slope=0.01):
        raise NotImplementedError

    assert check.check_leaky_relu(stub) is False
    assert check.check_softmax_rows(lambda x: (_ for _ in ()).throw(NotImplementedError())) is False
    assert capsys.readouterr().out.count("Not done yet") == 2


def test_right_and_vectorized_answers_pass(capsys):
    assert check.check_leaky_relu(good_leaky) is True
    assert check.check_softmax_rows(good_softmax) is True
    assert capsys.readouterr().out.count("Correct and vectorized") == 2


def test_a_correct_loop_is_refused_as_not_vectorized(capsys):
    assert check.check_leaky_relu(lambda x, slope=0.01: leaky_relu_loop(x, slope)) is False
    assert "not vectorized: on a (65536,) input your function ran" in capsys.readouterr().out


def test_a_softmax_loop_over_rows_is_refused_as_not_vectorized(capsys):
    assert check.check_softmax_rows(softmax_rows_loop) is False
    assert "not vectorized" in capsys.readouterr().out


def test_lines_are_counted_not_timed():
    from course.grading import python_lines_run

    x = np.ones(1000)
    assert python_lines_run(np.maximum, x, 0.0) == 0
    assert python_lines_run(lambda v: [float(e) for e in v], x) >= 1000


def test_plain_relu_is_diagnosed(capsys):
    assert check.check_leaky_relu(lambda x, slope=0.01: np.maximum(x, 0), speed=False) is False
    assert "plain ReLU" in capsys.readouterr().out


def test_ignored_slope_is_diagnosed(capsys):
    assert check.check_leaky_relu(lambda x, slope=0.01: np.where(x > 0, x, 0.01 * x), speed=False) is False
    assert "ignore the slope" in capsys.readouterr().out


def test_changed_dtype_is_diagnosed(capsys):
    assert check.check_leaky_relu(lambda x, slope=0.01: good_leaky(x, slope).astype(np.float64),
                                  speed=False) is False
    assert "keep the input's dtype" in capsys.readouterr().out


def test_softmax_without_max_subtraction_overflows_and_is_told(capsys):
    def naive(x):
        with np.errstate(over="ignore", invalid="ignore"):
            e = np.exp(x)
            return e / e.sum(axis=1, keepdims=True)

    assert check.check_softmax_rows(naive, speed=False) is False
    assert "subtract each row's maximum" in capsys.readouterr().out


def test_softmax_over_the_wrong_axis_is_told(capsys):
    def columns(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=0, keepdims=True)

    assert check.check_softmax_rows(columns, speed=False) is False
    assert "columns* sum to 1" in capsys.readouterr().out


def test_a_crashing_function_is_reported_with_the_input(capsys):
    assert check.check_softmax_rows(lambda x: x.reshape(-1, 7), speed=False) is False
    assert "raised ValueError" in capsys.readouterr().out
