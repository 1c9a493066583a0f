"""Lesson 03's exercise checks accept right answers and explain the usual wrong ones."""

from __future__ import annotations

import numpy as np

import course.check as check


def _stub(*args):
    raise NotImplementedError


def test_matmul_intensity_check(capsys):
    assert check.check_matmul_intensity(lambda n, s: 2 * n ** 3 / (3 * n * n * s))
    assert not check.check_matmul_intensity(lambda n, s: n ** 3 / (3 * n * n * s))
    assert "multiply-add is 2 flops" in capsys.readouterr().out
    assert not check.check_matmul_intensity(lambda n, s: 2 * n ** 3 / (2 * n * n * s))
    assert "three" in capsys.readouterr().out
    assert not check.check_matmul_intensity(lambda n, s: 2 * n ** 3 / (3 * n * n))
    assert "bytes" in capsys.readouterr().out
    assert not check.check_matmul_intensity(lambda n, s: [1.0])
    assert "one number" in capsys.readouterr().out


def test_roofline_bound_check(capsys):
    right = lambda f, b, pf, pb: "memory-bound" if f / b < pf / pb else "compute-bound"  # noqa: E731
    assert check.check_roofline_bound(right)
    assert not check.check_roofline_bound(lambda f, b, pf, pb: "compute-bound" if f / b < pf / pb else "memory-bound")
    assert "reversed" in capsys.readouterr().out
    assert not check.check_roofline_bound(lambda f, b, pf, pb: "memory-bound" if f / b < 1 else "compute-bound")
    assert "ridge point" in capsys.readouterr().out
    assert not check.check_roofline_bound(lambda f, b, pf, pb: True)
    assert "Return the string" in capsys.readouterr().out


def test_batch_for_fraction_check(capsys):
    def right(b, s, fraction):
        best = max(s)
        return min(bb for bb, ss in zip(b, s) if ss >= fraction * best)

    assert check.check_batch_for_fraction(right)
    assert not check.check_batch_for_fraction(lambda b, s, f: b[int(np.argmax(s))])
    assert "SMALLEST" in capsys.readouterr().out

    def assumes_sorted(b, s, fraction):
        return next(bb for bb, ss in zip(b, s) if ss >= fraction * max(s))

    assert not check.check_batch_for_fraction(assumes_sorted)
    assert "expected" in capsys.readouterr().out


def test_checks_say_not_done_yet_for_a_stub(capsys):
    for c in (check.check_matmul_intensity, check.check_roofline_bound, check.check_batch_for_fraction):
        assert c(_stub) is False
        assert "Not done yet" in capsys.readouterr().out


def test_checks_report_an_exception_from_the_learner(capsys):
    assert not check.check_roofline_bound(lambda *a: 1 / 0)
    assert "ZeroDivisionError" in capsys.readouterr().out
