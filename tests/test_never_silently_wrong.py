"""Answers that are never silently wrong: the checks' shared rules (copies, words for anything the learner's
code does, real numbers only), tree scans only with associative operators, values where only one kind
makes sense, and damaged reference records left out by the loader (issue 38's calls, and more of each class)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from course.errors import BadInputError

HUGE = 10**400


# ----------------------------------------------------------------- the checks' shared rules (course.grading)

def test_array_mismatch_refuses_complex_strings_and_booleans_by_name():
    from course.grading import array_mismatch, real_array, real_number

    want = np.array([1.0, 2.0])
    assert "complex" in array_mismatch("x", np.array([1 + 5j, 2]), want)
    assert "complex" in array_mismatch("x", want + 1e-12j, want)           # even a tiny imaginary part
    assert "strings" in array_mismatch("x", np.array(["1.0", "2.0"]), want)
    assert "strings" in array_mismatch("x", np.array(["1.0", 2.0], dtype=object), want)
    assert "True/False" in array_mismatch("x", np.array([True, True]), np.ones(2))
    assert "cannot read" in array_mismatch("x", [[1.0], [2.0, 3.0]], want)
    assert array_mismatch("x", np.array([1, 2], dtype=object), want) is None   # Python numbers are numbers
    assert real_array("x", np.float32([1, 2]))[1] is None
    assert real_number("b", np.complex128(3 + 1e-9j))[1] and real_number("b", "3")[1]
    assert real_number("b", np.array(3.0)) == (3.0, None) and real_number("b", True)[1]


def test_call_learner_hands_copies_and_says_sys_exit_in_words(capsys):
    from course.grading import call_learner

    x = np.arange(3.0)
    nested = {"a": [x]}

    def writes(v, d):
        v[:] = -1
        d["a"][0][:] = -1
        return v

    assert call_learner(writes, x, nested)[0] is True
    np.testing.assert_array_equal(x, np.arange(3.0))
    assert call_learner(lambda: sys.exit(3)) == (False, None)
    assert call_learner(lambda: exec("raise SystemExit")) == (False, None)
    out = capsys.readouterr().out
    assert "sys.exit(3)" in out and "return the result instead of exiting" in out
    with pytest.raises(KeyboardInterrupt):                  # the learner can still stop a check
        call_learner(lambda: (_ for _ in ()).throw(KeyboardInterrupt))


def test_a_relu_that_writes_into_its_input_is_not_passed_as_leaky_relu(capsys):
    import course.check

    def relu_in_place(x, slope=0.01):
        x[x < 0] = 0
        return x

    assert course.check.check_leaky_relu(relu_in_place, speed=False) is False
    assert "plain ReLU" in capsys.readouterr().out


def test_issue_calls_of_the_checks_answer_in_words(capsys):
    import course.check

    def raises_on_the_speed_test(d, o):
        if d.size > 1000:
            raise ValueError("x")
        return d * o * (1 - o)

    assert course.check.check_sigmoid_backward(lambda d, o: d * o * (1 - o) + 1e-3j) is False
    assert course.check.check_sigmoid_backward(lambda d, o: (d * o * (1 - o)).astype(str)) is False
    assert course.check.check_linear_weight_grad(lambda x, dout: x.T @ dout + 1e-9j) is False
    assert course.check.check_sigmoid_backward(raises_on_the_speed_test) is False
    assert course.check.check_ring_chunks(lambda *a: np.full(np.shape(a[0]), np.nan)) is False
    out = capsys.readouterr().out
    assert out.count("complex") == 2 and "strings" in out and "speed test" in out and "pair of chunk" in out


# ----------------------------------------------------------------- scans: associative operators only

def _online_softmax_combine(p, q):
    """(max, sum) of two stacks of softmax states: associative up to rounding, -inf for 'nothing yet'."""
    m = np.maximum(p[..., 0], q[..., 0])
    with np.errstate(invalid="ignore"):
        sp = np.where(np.isneginf(p[..., 0]), 0.0, p[..., 1] * np.exp(p[..., 0] - m))
        sq = np.where(np.isneginf(q[..., 0]), 0.0, q[..., 1] * np.exp(q[..., 0] - m))
    return np.stack([m, sp + sq], axis=-1)


@pytest.mark.parametrize("op", [np.subtract, lambda a, b: (a + b) / 2, lambda a, b: a * b + 1,
                                lambda a, b: np.maximum(a, b) - 1])
def test_a_tree_scan_refuses_an_operator_that_is_not_associative(op):
    from course.scan import blelloch_scan, hillis_steele_scan, sequential_scan

    x = np.array([5.0, 3, 1, 4, 2, 7])
    for scan in (blelloch_scan, hillis_steele_scan):
        with pytest.raises(BadInputError, match="not associative"):
            scan(x, op=op, identity=0.0, exclusive=False)
    sequential_scan(x, op=op, identity=0.0, exclusive=False)          # the loop: one bracketing, as asked


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_operators_associative_up_to_rounding_are_never_refused(dtype):
    from course.scan import blelloch_scan, hillis_steele_scan

    rng = np.random.default_rng(0)
    for _ in range(40):
        v = (rng.standard_normal(300) * 10 ** rng.uniform(-3, 3)).astype(dtype)
        v[rng.random(300) < 0.2] = -np.inf                              # masked scores: nothing yet
        leaves = np.stack([v, np.ones_like(v)], axis=-1)
        ident = np.array([-np.inf, 0.0], dtype=dtype)
        for scan in (blelloch_scan, hillis_steele_scan):
            scan(leaves, op=_online_softmax_combine, identity=ident, exclusive=False)
        big = np.array([1e4, -1e4, 1, 3e3, -2e-3, 5] * 5, dtype=dtype)  # sums that cancel
        blelloch_scan(big, op=lambda a, b: a + b, identity=0, exclusive=False)
    k = 8 if dtype == "float16" else 64
    m = (rng.standard_normal((40, k, k)) / np.sqrt(k)).astype(dtype)
    blelloch_scan(m, op=lambda a, b: a @ b, identity=np.eye(k, dtype=dtype), exclusive=False)
    blelloch_scan(rng.standard_normal(50), op=lambda a, b: np.logaddexp(a, b), identity=-np.inf)


# ----------------------------------------------------------------- values where only one kind makes sense

@pytest.mark.parametrize("dtype", ["int32", "bool", "complex128", "uint8"])
def test_weights_and_random_inputs_refuse_a_dtype_without_fractions(dtype):
    from course.recurrences import adding_problem, init_params
    from course.recurrences.timing import recurrence_input

    for call in (lambda: init_params(dtype=dtype), lambda: adding_problem(dtype=dtype),
                 lambda: recurrence_input(T=8, n=4, dtype=dtype)):
        with pytest.raises(BadInputError, match="floating-point"):
            call()


@pytest.mark.parametrize("lr", [float("nan"), -0.1, 0.0, 1e6, "0.1", HUGE])
def test_train_adding_refuses_a_learning_rate_that_cannot_train(lr):
    from course.recurrences import train_adding

    with pytest.raises(BadInputError, match="lr"):
        train_adding(steps=3, T=8, n=4, lr=lr)


def test_train_adding_stops_with_words_when_the_loss_diverges(monkeypatch):
    import course.recurrences.task as task

    real = task.loss_and_grads
    calls = []

    def blows_up(*args, **kwargs):
        loss, grads = real(*args, **kwargs)
        calls.append(loss)
        return (float("nan") if len(calls) == 3 else loss), grads

    monkeypatch.setattr(task, "loss_and_grads", blows_up)
    with pytest.raises(BadInputError, match="diverged.*step 3.*lr"):
        task.train_adding(steps=5, T=8, n=4, batch=4)


@pytest.mark.parametrize("call, match", [
    (lambda: __import__("course.backprop.fast_step", fromlist=["x"]).declared_counts("fused", -2), "n_layers"),
    (lambda: __import__("course.backprop.fast_step", fromlist=["x"]).declared_counts("fused", 2.5), "n_layers"),
    (lambda: __import__("course.backprop.fast_step", fromlist=["x"]).declared_counts("turbo", 2), "rung"),
    (lambda: __import__("course.backprop.counting", fromlist=["x"]).mlp_flops([64, -10], 4), "sizes"),
    (lambda: __import__("course.backprop.counting", fromlist=["x"]).mlp_flops([64], 4), "sizes"),
    (lambda: __import__("course.scan.kernels", fromlist=["x"]).conflict_degree([0, 1, 2], banks=0), "banks"),
    (lambda: __import__("course.timing", fromlist=["x"]).Timing(samples=np.array([])), "at least one"),
    (lambda: __import__("course.timing", fromlist=["x"]).Timing(samples=np.array([np.nan])), "finite"),
])
def test_counts_and_timings_refuse_what_would_be_a_wrong_number(call, match):
    with pytest.raises(BadInputError, match=match):
        call()


def test_chunked_steps_counts_the_chunk_the_run_uses():
    from course.bppsa.fast import chunked_steps

    assert chunked_steps(10, chunk=100) == chunked_steps(10, chunk=10) == 43


def test_an_overflowing_chunk_product_is_said_not_returned_as_nan():
    from course.bppsa import backprop_sequential
    from course.bppsa.fast import backprop_chunked

    J = np.broadcast_to(np.diag(np.float32([1e30, 1.0])), (100, 2, 2))
    g = np.float32([0.0, 1.0])
    assert np.all(np.isfinite(backprop_sequential(J, g)))
    for chunk in (None, 1, 7):
        with np.errstate(all="ignore"), pytest.raises(BadInputError, match="overflowed float32.*backprop_sequential"):
            backprop_chunked(J, g, chunk=chunk)
    J64, g64 = J[:9].astype(np.float64), g.astype(np.float64)                 # 1e30**9 fits a float64
    np.testing.assert_allclose(backprop_chunked(J64, g64), backprop_sequential(J64, g64))


def test_a_prediction_error_never_overflows():
    from course.predictions import prediction_error

    assert prediction_error(-1e308, 1e308)["percent"] == -200.0
    assert prediction_error(1e308, -1e308)["percent"] == 200.0
    assert prediction_error(10, 40) == {"factor": 4.0, "percent": -75.0, "direction": "low"}


# ----------------------------------------------------------------- damaged references: one rule at the loader

def _damaged(tmp_path, name, index, key, how):
    import json

    from course.results import REFERENCE_DIR

    (src,) = sorted(REFERENCE_DIR.glob(f"{name}__*.json"))
    doc = json.loads(src.read_text())
    if how == "drop":
        del doc["records"][index][key]
    else:
        doc["records"][index][key] = {"nan": "NaN", "none": None, "inf": "Infinity"}[how]
    (tmp_path / src.name).write_text(json.dumps(doc))
    return src


#: damage that broke a figure before the loader's rule (issue 38's sweep and this one's), and some like it.
#: Not here: a record of a kind the file holds once losing a field no other record has (roofline's
#: peak-bandwidth record without bytes_per_s): only its figure knows it needs that field.
DAMAGE = [("launch_latency", 0, "samples_s", "nan"), ("launch_latency", 3, "median_s", "none"),
          ("roofline", 0, "bytes_per_s", "nan"), ("roofline", 28, "name", "none"),
          ("roofline", 28, "intensity", "drop"), ("roofline", 28, "flops_per_s", "drop"),
          ("scan_sweep", 36, "gb_per_s", "none"), ("scan_sweep", 36, "gb_per_s", "nan"),
          ("async_chain", 1, "per_op_s", "drop"), ("batching", 5, "in_flight", "inf"),
          ("matmul_sweep", 4, "gflops", "nan"), ("throughput_add", 2, "gb_per_s", "drop")]


@pytest.mark.parametrize("name, index, key, how", DAMAGE, ids=["-".join(map(str, d)) for d in DAMAGE])
def test_a_damaged_reference_record_is_left_out_with_a_note_and_the_figure_draws(tmp_path, name, index, key, how):
    import matplotlib.pyplot as plt

    from course.report import discover
    from course.results import ResultSet, load_reference

    src = _damaged(tmp_path, name, index, key, how)
    live = ResultSet.load(src)                             # a run of the same experiment, as the report has
    (ref,) = load_reference(name, tmp_path)
    assert any("left out" in note for note in ref.notes) and len(ref.records) == len(live.records) - 1
    plt.close(discover()[name].plotter(live, [ref]))


@pytest.mark.slow
def test_the_shipped_references_lose_no_record_to_the_rule():
    from course.results import REFERENCE_DIR, ResultSet

    for path in sorted(REFERENCE_DIR.glob("*.json")):
        assert ResultSet.load(path, source="reference").incomplete_records() == [], path.name
