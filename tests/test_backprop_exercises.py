"""Lesson 01: the exercise checks say exactly what is wrong, and the widgets redraw on every change."""

from __future__ import annotations

import numpy as np
import pytest

import course.check as check
from course.backprop.widgets import checkpoint_app, step_sweep_app, step_time_app, training_app


def _stub(*args):
    raise NotImplementedError


def _sig(d, o):
    return d * o * (1 - o)


@pytest.mark.parametrize("fn, expected", [
    (_stub, "not done yet"),
    (lambda d, o: None, "returned None"),
    (lambda d, o: -_sig(d, o), "sign is flipped"),
    (lambda d, o: 3 * _sig(d, o), "constant factor 3"),
    (lambda d, o: o * (1 - o), "multiply by dout"),
    (lambda d, o: d * o, "(1 - out) is missing"),
    (lambda d, o: _sig(d, 1 / (1 + np.exp(-o))), "applied the sigmoid again"),
    (lambda d, o: d * (1 - o * o), "tanh's derivative"),
    (lambda d, o: _sig(d, o).T, "transposed"),
    (lambda d, o: _sig(d, o)[:2], "wrong shape"),
    (lambda d, o: 1 / 0, "raised ZeroDivisionError"),
    (lambda d, o: _sig(d, o) + 0.1 * (o > 0.9), "wrong values. Largest error"),
])
def test_sigmoid_check_names_the_mistake(fn, expected, capsys):
    assert check.check_sigmoid_backward(fn) is False
    assert expected in capsys.readouterr().out


def test_sigmoid_check_passes_a_right_answer_and_flags_a_slow_one(capsys):
    assert check.check_sigmoid_backward(_sig) is True
    assert "right" in capsys.readouterr().out

    def loops(d, o):
        out = np.empty_like(d)
        for i in range(d.shape[0]):
            for j in range(d.shape[1]):
                out[i, j] = d[i, j] * o[i, j] * (1 - o[i, j])
        return out

    assert check.check_sigmoid_backward(loops) is False
    assert "values are right, but" in capsys.readouterr().out


@pytest.mark.parametrize("fn, expected", [
    (_stub, "not done yet"),
    (lambda x, d: d.T @ x, "You computed doutᵀ @ x"),
    (lambda x, d: x.T @ d / x.shape[0], "divided by the batch size"),
    (lambda x, d: -(x.T @ d), "sign is flipped"),
    (lambda x, d: 0.5 * (x.T @ d), "constant factor 0.5"),
    (lambda x, d: x[:1].T @ d[:1], "only the first example"),
    (lambda x, d: x @ d.T, "raised ValueError"),
    (lambda x, d: x.T @ x, "wrong shape"),
])
def test_linear_weight_grad_check_names_the_mistake(fn, expected, capsys):
    assert check.check_linear_weight_grad(fn) is False
    assert expected in capsys.readouterr().out


def test_linear_weight_grad_check_passes_a_right_answer(capsys):
    assert check.check_linear_weight_grad(lambda x, d: x.T @ d) is True
    assert "right" in capsys.readouterr().out


# ----------------------------------------------------------------------- widgets

@pytest.mark.slow
@pytest.mark.widgets
def test_training_app_retrains_when_a_control_moves():
    app = training_app(hidden=16, epochs=2)
    assert app.last_error is None and "Test accuracy" in app.html.value
    first_png, first_html = app.image.value, app.html.value
    app.controls["epochs"].value = 3
    assert app.last_error is None and app.calls == 2
    assert app.html.value != first_html and app.image.value != first_png
    app.controls["activation"].value = "tanh"
    assert "tanh" in app.html.value


@pytest.mark.slow
@pytest.mark.widgets
def test_training_app_on_a_gpu_without_one_explains():
    from course.devices import gpu_available

    if gpu_available():
        pytest.skip("a GPU answers here")
    app = training_app(hidden=16, epochs=1)
    app.controls["lr"].value = 0.1
    app.controls["device"].value = "gpu"
    assert "No GPU" in str(app.last_error) and "Colab" in str(app.last_error)
    # one "no GPU" note (not an error box), no promise of results this app does not draw, and no figure
    # of the previous setting left under the new one
    assert "course-no-gpu" in app.notice.value and not app.errors.outputs
    assert "reference" not in app.shown_error()
    assert app.image.layout.display == "none" and not app.takeaway.value
    app.controls["device"].value = "cpu"
    assert app.last_error is None and not app.notice.value and app.image.layout.display != "none"


@pytest.mark.widgets
def test_training_app_shows_a_diverging_learning_rate_as_an_error():
    app = training_app(hidden=16, epochs=2)
    app.controls["lr"].value = 10.0
    assert "Lower lr" in str(app.last_error)
    assert "Lower lr" in "".join(o.get("text", "") for o in app.errors.outputs)
    app.controls["lr"].value = 0.1
    assert app.last_error is None and app.errors.outputs == ()


@pytest.mark.slow
@pytest.mark.widgets
def test_step_time_app_redraws_and_explains_a_missing_gpu(monkeypatch):
    import course.backprop.widgets as bw
    from course.devices import gpu_available

    monkeypatch.setattr(bw, "load_reference", lambda name: [])   # the branch without references

    app = step_time_app(width=32, depth=1, batch=16)
    assert app.last_error is None and "ms</b>" in app.html.value
    before = app.html.value
    app.controls["depth"].value = 2
    assert app.last_error is None and app.html.value != before and "784-32-32-10" in app.html.value
    app.controls["dtype"].value = "float64"
    assert "float64" in app.html.value
    app.controls["device"].value = "gpu"
    assert app.last_error is None
    if not gpu_available():
        assert "No GPU here" in app.html.value and "no reference" in app.html.value.lower()


@pytest.mark.slow
@pytest.mark.widgets
def test_step_sweep_app_plots_and_names_the_missing_references():
    app = step_sweep_app(depth=1, batch=32)
    assert app.last_error is None and app.image.value
    before = app.image.value
    app.controls["depth"].value = 2
    assert app.last_error is None and app.image.value != before


@pytest.mark.slow
@pytest.mark.widgets
def test_step_sweep_app_starts_at_the_references_settings_and_names_them_elsewhere():
    from course.results import load_reference

    ref = load_reference("backprop_train_step")
    app = step_sweep_app(largest=128)
    assert app.last_error is None
    fig = app.last_result[0]
    if ref:
        assert app.controls["batch"].value == ref[0].params["batch"]
        assert any("vs this CPU (live)" in ln.get_label() for ln in fig.axes[1].lines)
        app.controls["batch"].value = 64
        fig = app.last_result[0]
        assert f"batch {ref[0].params['batch']}" in fig.axes[0].get_title()
        assert not fig.axes[1].lines and "set those" in " ".join(t.get_text() for t in fig.axes[1].texts)


@pytest.mark.slow
@pytest.mark.widgets
def test_checkpoint_app_moves_k_and_clamps_it():
    app = checkpoint_app(depth=4, every=2, width=64, batch=32)
    assert app.last_error is None and "k = 2" in app.html.value
    app.controls["every"].value = 3
    assert "k = 3" in app.html.value
    app.controls["every"].value = 30
    assert app.last_error is None and "showing k = 5" in app.html.value


@pytest.mark.widgets
def test_step_time_app_quotes_a_matching_reference_labelled_as_such(monkeypatch):
    import course.backprop.widgets as bw
    from course.devices import gpu_available
    from course.results import ResultSet

    if gpu_available():
        pytest.skip("a GPU answers here: the app measures it live")
    ref = ResultSet("backprop_train_step", params={"widths": [64, 128], "depth": 2, "batch": 16,
                                                    "dtype": "float32"}, source="reference")
    ref.provenance["gpus"] = [{"name": "NVIDIA H200"}]
    ref.add(device="gpu", width=64, depth=2, batch=16, dtype="float32", median_s=2e-4)
    monkeypatch.setattr(bw, "load_reference", lambda name: [ref])
    app = step_time_app(width=64, depth=2, batch=16)
    app.controls["device"].value = "gpu"
    assert "recorded on NVIDIA H200" in app.html.value and "0.2 ms on the GPU" in app.html.value
    assert "not measured here" in app.html.value
    app.controls["width"].value = 128
    assert "not for this network" in app.html.value


@pytest.mark.gpu
@pytest.mark.widgets
def test_training_app_trains_on_the_gpu():
    app = training_app(hidden=32, epochs=3)
    app.controls["device"].value = "gpu"
    assert app.last_error is None and "gpu" in app.html.value and "Test accuracy" in app.html.value


def test_a_right_answer_that_loops_over_rows_is_told_to_vectorize(capsys):
    from course.check import check_linear_weight_grad

    def looped(x, dout):
        dW = np.zeros((x.shape[1], dout.shape[1]))
        for i in range(x.shape[0]):
            dW += np.outer(x[i], dout[i])
        return dW

    assert check_linear_weight_grad(looped) is False
    assert "lines of Python" in capsys.readouterr().out


def test_checks_say_the_same_thing_every_run(capsys):
    from course.check import check_sigmoid_backward

    wrong = lambda dout, out: dout * out  # noqa: E731
    check_sigmoid_backward(wrong)
    first = capsys.readouterr().out
    check_sigmoid_backward(wrong)
    assert capsys.readouterr().out == first and "missing" in first
