"""The exercise checks of lesson 07 accept the answers and name the classic mistakes; the experiments run."""

from __future__ import annotations

import numpy as np
import pytest

import course.check
from course.recurrences.checks import affine_combine, state_gradients
from course.recurrences.linear import recurrence_loop, reverse_recurrence


def test_checks_are_exported_through_course_check():
    assert {"check_affine_combine", "check_reverse_recurrence"} <= set(course.check.__all__)


def test_affine_combine_check_accepts_the_answer(capsys):
    assert course.check.check_affine_combine(affine_combine)
    assert "Correct" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, says", [
    (lambda f, s: affine_combine(s, f), "Operand order"),
    (lambda f, s: (f[0] * s[0], f[1] + s[1]), "b₁ + b₂"),
    (lambda f, s: (f[0] * s[0], f[0] * s[1] + f[1] * 0), "the b part"),
    (lambda f, s: f[0], "Return a pair"),
    (lambda f, s: 1 / 0, "ZeroDivisionError"),
])
def test_affine_combine_check_names_the_mistake(wrong, says, capsys):
    assert not course.check.check_affine_combine(wrong)
    assert says in capsys.readouterr().out


def test_a_stub_is_not_done_yet(capsys):
    def stub(*args):
        raise NotImplementedError

    assert not course.check.check_affine_combine(stub)
    assert not course.check.check_reverse_recurrence(stub)
    assert capsys.readouterr().out.count("Not done yet") == 2


def test_reverse_recurrence_check_accepts_the_answers(capsys):
    assert course.check.check_reverse_recurrence(state_gradients)

    def by_scan(a, grad_h):
        a_next = np.concatenate([a[1:], np.zeros_like(a[:1])])
        return reverse_recurrence(a_next, grad_h, method="scan")

    assert course.check.check_reverse_recurrence(by_scan)


@pytest.mark.parametrize("wrong, says", [
    (lambda a, d: reverse_recurrence(a, d, "loop"), "Off by one"),
    (lambda a, d: recurrence_loop(a, d), "Direction"),
    (lambda a, d: d, "expected"),
    (lambda a, d: d[:-1], "shape"),
])
def test_reverse_recurrence_check_names_the_mistake(wrong, says, capsys):
    assert not course.check.check_reverse_recurrence(wrong)
    assert says in capsys.readouterr().out


@pytest.mark.slow
def test_lesson_07_experiments_are_registered_and_run_quickly():
    from course.plots import figure_to_png
    from course.report import discover

    exps = discover()
    assert exps["recurrence_sweep"].lesson == exps["selective_training"].lesson == "07"
    rs = exps["recurrence_sweep"].run(devices=["cpu"], quick=True, progress=None)
    assert {r["kind"] for r in rs.records} == {"diagonal", "dense"}
    assert figure_to_png(exps["recurrence_sweep"].plotter(rs, []))[:4] == b"\x89PNG"
