"""Lesson 08's exercise checks: the worked answers pass, the stubs are not done, each typical slip gets its own
message, and adversarial answers (NaN, a wrong type, an exception, sys.exit, writing into the inputs) fail with
a message instead of breaking the check."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import course.check as check
from course import attention as att

ROOT = Path(__file__).resolve().parents[1]


def _answer(cell_id: str, name: str, solutions: bool = True):
    path = ROOT / "notebooks" / ("solutions/08_attention_as_a_scan_solutions.ipynb" if solutions
                                 else "08_attention_as_a_scan.ipynb")
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    ns = {"np": np}
    exec("".join(next(c for c in cells if c.get("id") == cell_id)["source"]), ns)  # noqa: S102  (the course's cell)
    return ns[name]


def test_the_worked_combine_passes_and_the_stub_is_not_done(capsys):
    assert check.check_softmax_combine(_answer("a09", "my_softmax_combine")) is True
    assert "right" in capsys.readouterr().out
    assert check.check_softmax_combine(_answer("a09", "my_softmax_combine", solutions=False)) is False
    assert "Not done yet" in capsys.readouterr().out


def _sums_added(a, b):
    return np.stack([np.maximum(a[..., 0], b[..., 0]), a[..., 1] + b[..., 1]], axis=-1)


def _upside_down(a, b):
    m = np.maximum(a[..., 0], b[..., 0])
    return np.stack([m, a[..., 1] * np.exp(m - a[..., 0]) + b[..., 1] * np.exp(m - b[..., 0])], axis=-1)


def _nan_at_the_identity(a, b):
    m = np.maximum(a[..., 0], b[..., 0])
    return np.stack([m, a[..., 1] * np.exp(a[..., 0] - m) + b[..., 1] * np.exp(b[..., 0] - m)], axis=-1)


@pytest.mark.parametrize("fn, message", [(_sums_added, "rescaled to the common maximum"),
                                         (_upside_down, "upside down"), (_nan_at_the_identity, "-inf - (-inf)"),
                                         (lambda a, b: a, "wrong values"), (lambda a, b: None, "None")])
def test_each_slip_in_the_combine_is_named(fn, message, capsys):
    with np.errstate(all="ignore"):
        assert check.check_softmax_combine(fn) is False
    assert message in capsys.readouterr().out


def _backward(q, k, v, out, lse, dout, causal, block):
    return att.flash_attention_backward(q, k, v, out, lse, dout, causal, block_q=block, block_k=block)


def test_the_worked_backward_passes_the_course_s_too(capsys):
    assert check.check_flash_backward(_answer("x08-flash-backward", "my_flash_backward")) is True
    assert check.check_flash_backward(_backward) is True


def _no_lse(q, k, v, out, lse, dout, causal, block):
    return _backward(q, k, v, out, np.zeros_like(lse), dout, causal, block)


def _no_scale(q, k, v, out, lse, dout, causal, block):
    dq, dk, dv = _backward(q, k, v, out, lse, dout, causal, block)
    return dq * np.sqrt(q.shape[1]), dk * np.sqrt(q.shape[1]), dv


def _transposed_dv(q, k, v, out, lse, dout, causal, block):
    dq, dk, dv = _backward(q, k, v, out, lse, dout, causal, block)
    return dq, dk, dv.T


def _in_place(q, k, v, out, lse, dout, causal, block):
    result = _backward(q, k, v, out, lse, dout, causal, block)
    q[:], k[:], v[:], lse[:] = 0.0, 0.0, 0.0, 0.0       # vandalises its inputs after computing
    return result


@pytest.mark.parametrize("fn, message", [
    (_no_lse, "exp(S - lse)"), (_no_scale, "· scale"), (_transposed_dv, "transposed"),
    (lambda *a: tuple(np.full_like(x, np.nan) for x in _backward(*a)), "NaN"),
    (lambda *a: "dq dk dv", "three gradients"), (lambda *a: (1, 2), "three gradients"),
    (lambda *a: tuple(x.astype(str) for x in _backward(*a)), "numbers"),
    (lambda *a: 1 / 0, "ZeroDivisionError"), (lambda *a: sys.exit(2), "sys.exit"),
])
def test_each_slip_and_each_adversarial_backward_fails_with_a_message(fn, message, capsys):
    assert check.check_flash_backward(fn) is False
    assert message in capsys.readouterr().out


def test_writing_into_the_inputs_changes_nothing_the_check_compares_with(capsys):
    assert check.check_flash_backward(_in_place) is True


def test_the_stub_backward_is_not_done(capsys):
    assert check.check_flash_backward(_answer("x08-flash-backward", "my_flash_backward", solutions=False)) is False
    assert "Not done yet" in capsys.readouterr().out
