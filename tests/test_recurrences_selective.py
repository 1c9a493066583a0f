"""The selective layer: gradients by the reverse scan equal finite differences and PyTorch; it learns."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.backprop.gradcheck import rel_error
from course.errors import BadInputError
from course.recurrences.selective import (
    PARAM_NAMES,
    backward,
    forward,
    gradient_check,
    init_params,
    loss_and_grads,
    torch_gradients,
)
from course.recurrences.task import BASELINE_MSE, adding_problem, train_adding


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 12), st.integers(1, 3), st.integers(1, 5), st.integers(0, 10**6),
       st.sampled_from(["scan", "loop"]))
def test_gradients_equal_finite_differences(T, B, n, seed, method):
    rng = np.random.default_rng(seed)
    p = init_params(2, n, 2, seed=seed)
    x, target = rng.normal(size=(T, B, 2)), rng.normal(size=(B, 2))
    errors = gradient_check(p, x, target, method=method, entries=4, seed=seed)
    assert set(errors) == set(PARAM_NAMES) | {"x"}
    _, grads = loss_and_grads(p, x, target, method)
    for name, err in errors.items():
        # central differences in float64 carry ~1e-10 of rounding: relative to a gradient near zero
        # (a decay rate near 0, say) that is large, so such a gradient is held to 1e-9 absolute
        scale = float(np.abs(grads[name]).max())
        assert err < 1e-5 or err * scale < 1e-9, (name, err, scale)


def test_scan_and_loop_give_the_same_outputs_and_gradients():
    rng = np.random.default_rng(0)
    p = init_params(3, 6, 2)
    x = rng.normal(size=(40, 4, 3))
    y_scan, c_scan = forward(p, x, "scan")
    y_loop, c_loop = forward(p, x, "loop")
    np.testing.assert_allclose(y_scan, y_loop, atol=1e-12)
    dy = rng.normal(size=y_scan.shape)
    g_scan, g_loop = backward(dy, c_scan), backward(dy, c_loop)
    for k in g_scan:
        np.testing.assert_allclose(g_scan[k], g_loop[k], atol=1e-10)


def test_gradients_equal_pytorch_autograd():
    pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    p = init_params(2, 8, 1, seed=5)
    x, target = rng.normal(size=(25, 3, 2)), rng.normal(size=(3, 1))
    _, ours = loss_and_grads(p, x, target)
    theirs = torch_gradients(p, x, target)
    for k, v in theirs.items():
        assert rel_error(ours[k], v) < 1e-10, k


def test_adding_problem_marks_two_steps_one_in_each_half():
    x, y = adding_problem(T=20, batch=50, seed=1)
    marks = x[..., 1]
    assert (marks.sum(0) == 2).all()
    assert (marks[:10].sum(0) == 1).all() and (marks[10:].sum(0) == 1).all()
    np.testing.assert_allclose(y[:, 0], (x[..., 0] * marks).sum(0))


def test_training_beats_always_answering_the_mean():
    run = train_adding(T=16, n=8, steps=120, batch=32, lr=0.03)
    assert np.isfinite(run.losses).all()
    assert run.test_loss < BASELINE_MSE / 5, run.test_loss
    assert run.improvement > 5


@pytest.mark.parametrize("call, match", [
    (lambda p: forward(p, np.zeros((3, 2))), r"shape \(T, B, d_in\)"),
    (lambda p: forward(p, np.zeros((3, 1, 5))), "d_in = 2"),
    (lambda p: forward({"W_C": p["W_C"]}, np.zeros((3, 1, 2))), "params lack"),
    (lambda p: forward(p, np.zeros((3, 1, 2)), method="fft"), "one of 'scan', 'loop'"),
    (lambda p: backward(np.zeros((2, 1, 1)), forward(p, np.zeros((3, 1, 2)))[1]), "dy must have the shape"),
    (lambda p: init_params(0), "d_in must be"),
    (lambda p: gradient_check({k: v.astype("float32") for k, v in p.items()}, np.zeros((3, 1, 2)),
                              np.zeros((1, 1))), "float64"),
    (lambda p: adding_problem(T=1), "T must be"),
    (lambda p: train_adding(steps=0), "steps must be"),
])
def test_bad_inputs_get_clear_errors(call, match):
    with pytest.raises(BadInputError, match=match):
        call(init_params(2, 3, 1))


@pytest.mark.gpu
def test_layer_on_cupy_equals_numpy():
    import cupy

    from course.devices import to_device

    rng = np.random.default_rng(0)
    p = init_params(2, 8, 1)
    x, t = rng.normal(size=(50, 4, 2)), rng.normal(size=(4, 1))
    loss, g = loss_and_grads(p, x, t)
    pg = {k: to_device(v, "gpu") for k, v in p.items()}
    loss_g, g_g = loss_and_grads(pg, cupy.asarray(x), cupy.asarray(t))
    assert abs(loss - loss_g) < 1e-9
    for k in g:
        np.testing.assert_allclose(cupy.asnumpy(g_g[k]), g[k], atol=1e-9)


def test_mse_loss_refuses_a_target_that_would_broadcast():
    from course.recurrences.selective import mse_loss

    y_last = np.array([[1.0], [3.0]])
    with pytest.raises(BadInputError, match=r"target must have the shape"):   # (2,) against (2, 1): a (2, 2) diff
        mse_loss(y_last, np.array([0.0, 3.0]))
    loss, grad = mse_loss(y_last, np.array([[0.0], [3.0]]))
    assert loss == 0.5 and grad.shape == (2, 1)
