"""The longer exercises of lessons 01-09: the solutions notebook's answer passes its check, the lesson
notebook's stub does not, and a typical wrong answer fails with the message meant for it.

Each answer is read from the notebook cell that holds it, so the test also checks the notebooks.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import course.check
from course import parallel as par
from course.backprop import Linear

ROOT = Path(__file__).resolve().parents[1]
NB = ROOT / "notebooks"

#: check name -> (lesson notebook stem, the cells to run in order: earlier exercises first, the exercise last)
EXERCISES = {
    "check_mlp_backward": ("01_backprop_step_by_step", ["x01-mlp-backward"], "my_mlp_backward"),
    "check_lane_dot": ("02_simd_vectorization", ["x02-lane-dot"], "my_lane_dot"),
    "check_linear_roofline": ("03_latency_vs_throughput", ["x03-linear-roofline"], "my_linear_roofline"),
    "check_down_sweep_inplace": ("04_blelloch_scan", ["x04-down-sweep"], "my_down_sweep_inplace"),
    "check_bppsa_backward": ("05_bppsa", ["6", "19", "x05-bppsa-backward"], "my_bppsa_backward"),
    "check_ring_allreduce": ("06_many_workers", ["10", "x06-ring-allreduce"], "my_ring_allreduce"),
    "check_selective_backward": ("07_linear_recurrences", ["c29", "x07-selective-backward"], "my_selective_backward"),
    "check_flash_backward": ("08_attention_as_a_scan", ["x08-flash-backward"], "my_flash_backward"),
    "check_kernel_register_tile": ("09_matrix_product", ["b19-imports", "b20"], "register_tile_kernel"),
}


def _cell(path: Path, cell_id: str) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "".join(next(c for c in cells if c.get("id") == cell_id)["source"])


def learner_namespace(check: str, solutions: bool = True, replace: dict | None = None) -> dict:
    """The namespace after running the exercise's cells (from the solutions or the lesson notebook)."""
    stem, cells, _ = EXERCISES[check]
    path = NB / "solutions" / f"{stem}_solutions.ipynb" if solutions else NB / f"{stem}.ipynb"
    from course import backprop as bp
    ns = {"np": np, "bp": bp, "par": par}
    for cell_id in cells:
        exec(_cell(path, cell_id), ns)  # noqa: S102  (the course's own notebook cells)
        ns.update(replace or {})
    return ns


def answer(check: str, solutions: bool = True, replace: dict | None = None):
    return learner_namespace(check, solutions, replace)[EXERCISES[check][2]]


def test_every_lesson_has_a_long_exercise_of_ten_lines_or_more():
    for check, (stem, cells, fn) in EXERCISES.items():
        source = _cell(NB / "solutions" / f"{stem}_solutions.ipynb", cells[-1])
        body = source.split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0]
        lines = [ln for ln in body.splitlines() if ln.strip() and not ln.strip().startswith("#")]
        assert len(lines) >= 10, f"{stem}: the answer of {fn} is {len(lines)} lines"
        assert check in course.check.__all__


@pytest.mark.parametrize("check", sorted(EXERCISES))
def test_the_worked_answer_passes(check, capsys):
    assert getattr(course.check, check)(answer(check)) is True
    assert "right" in capsys.readouterr().out


@pytest.mark.parametrize("check", sorted(EXERCISES))
def test_the_stub_is_not_done(check, capsys):
    assert getattr(course.check, check)(answer(check, solutions=False)) is False
    assert "Not done yet" in capsys.readouterr().out


def _mlp_backward_without_activations(layers, caches, dlogits):
    grads, g = [], dlogits
    for layer, cache in zip(reversed(layers), reversed(caches)):
        if isinstance(layer, Linear):
            grads.append((cache[0].T @ g, g.sum(axis=0)))
            g = g @ layer.W.T
    return grads[::-1]


def _lane_dot_float64(a, b, lanes):
    n = a.shape[0]
    acc, full = np.zeros(lanes), n - n % lanes
    for s in range(0, full, lanes):
        acc += a[s:s + lanes] * b[s:s + lanes]
    acc[:n - full] += a[full:] * b[full:]
    while acc.shape[0] > 1:
        acc = acc[:acc.shape[0] // 2] + acc[acc.shape[0] // 2:]
    return acc[0]


def _lane_dot_scalar(a, b, lanes):
    s = np.float32(0)
    for x, y in zip(a, b):
        s = np.float32(s + x * y)
    return s


def _roofline_summing_times(*args):
    d = answer("check_linear_roofline")(*args)
    return d | {"min_time_s": d["flops"] / args[4] + d["bytes"] / args[5]}


def _down_sweep_swapped(tree, op, identity):
    t, n = tree.copy(), tree.shape[0]
    t[n - 1] = identity
    d = n // 2
    while d >= 1:
        r = np.arange(2 * d - 1, n, 2 * d)
        left = t[r - d].copy()
        t[r - d] = t[r]
        t[r] = op(left, t[r])
        d //= 2
    return t


def _ring_reduce_scatter_only(vectors, exchange):
    p, n = vectors.shape
    buf, b = vectors.astype(float), par.chunk_bounds(n, p)
    for step in range(2 * (p - 1)):
        plan = [par.ring_chunks(r, min(step, p - 2), p) for r in range(p)]
        got = exchange([buf[r, b[s]:b[s + 1]] for r, (s, _) in enumerate(plan)])
        if step < p - 1:
            for r, (_, a) in enumerate(plan):
                buf[r, b[a]:b[a + 1]] += got[r]
    return buf


def _flash_backward_without_d(q, k, v, out, lse, dout, causal, block):
    """The backward pass with the softmax's row term D left out (dS = P ⊙ dP)."""
    s = q @ k.T / np.sqrt(q.shape[1])
    if causal:
        s = np.where(np.tri(len(q), dtype=bool), s, -np.inf)
    p = np.exp(s - lse[:, None])
    ds = p * (dout @ v.T)
    return ds @ k / np.sqrt(q.shape[1]), ds.T @ q / np.sqrt(q.shape[1]), p.T @ dout


WRONG = {
    "check_mlp_backward": (lambda: _mlp_backward_without_activations, "derivative is missing"),
    "check_lane_dot": (lambda: _lane_dot_float64, "float64"),
    "check_linear_roofline": (lambda: _roofline_summing_times, "not their sum"),
    "check_down_sweep_inplace": (lambda: _down_sweep_swapped, "operands are swapped"),
    "check_bppsa_backward": (lambda: answer("check_bppsa_backward", replace={"my_bppsa_operator": lambda a, b: a @ b}),
                             "wrong order"),
    "check_ring_allreduce": (lambda: _ring_reduce_scatter_only, "all-gather"),
    "check_selective_backward": (lambda: answer("check_selective_backward",
                                                replace={"my_state_gradients": lambda a, grad_h: grad_h}),
                                 "reverse recurrence is missing"),
    "check_flash_backward": (lambda: _flash_backward_without_d, "subtracts D_i"),
    "check_kernel_register_tile": (lambda: _lesson_03s_tile(), "per FMA"),
}


def _lesson_03s_tile():
    """The register tile's right numbers with lesson 03's inner loop: two shared loads per FMA."""
    from test_gemm_exercises import plain_tile

    return plain_tile


@pytest.mark.parametrize("check", sorted(EXERCISES))
def test_a_typical_wrong_answer_fails_with_its_message(check, capsys):
    make, message = WRONG[check]
    assert getattr(course.check, check)(make()) is False
    out = capsys.readouterr().out
    assert message in out, out


def test_lane_dot_names_the_scalar_loop(capsys):
    assert course.check.check_lane_dot(_lane_dot_scalar) is False
    assert "one element at a time" in capsys.readouterr().out


def test_ring_allreduce_refuses_a_sum_that_skips_the_ring(capsys):
    assert course.check.check_ring_allreduce(lambda v, exchange: np.tile(v.sum(axis=0), (len(v), 1))) is False
    assert "nothing went through" in capsys.readouterr().out


def test_mlp_backward_names_the_layer_order(capsys):
    assert course.check.check_mlp_backward(lambda *a: answer("check_mlp_backward")(*a)[::-1]) is False
    assert "backward order" in capsys.readouterr().out



def test_array_mismatch_says_what_is_wrong_with_an_array():
    from course.grading import array_mismatch

    want = np.arange(1.0, 7.0).reshape(2, 3)
    assert array_mismatch("dW", want.copy(), want) is None
    assert "returned None" in array_mismatch("dW", None, want)
    assert "shape (3, 2), expected (2, 3). it is transposed" in array_mismatch("dW", want.T, want,
                                                                               [(want.T, "it is transposed")])
    assert "NaN or inf" in array_mismatch("dW", want * np.nan, want)
    assert "sign is flipped" in array_mismatch("dW", -want, want)
    assert "2 × the right one" in array_mismatch("dW", 2 * want, want)
    wrong = want.copy()
    wrong[1, 2] = 0
    assert "index (1, 2): you gave 0, expected 6" in array_mismatch("dW", wrong, want)
