"""Lesson 01: the digits data, training to 95 %, the per-layer trace, checkpointing, the report."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.backprop.bench import checkpoint_sweep
from course.backprop.checkpointing import checkpointed_backward, kept_pattern
from course.backprop.data import batches, load_digits
from course.backprop.layers import MLP, softmax_cross_entropy, softmax_cross_entropy_backward
from course.backprop.plots import checkpoint_figure, digits_figure, trace_figure, training_figure
from course.backprop.readers import trace_from_results, trace_to_results
from course.backprop.timing import step_time_sweep, time_train_step, trace_step
from course.backprop.trace import random_batch, trace_html
from course.backprop.train import accuracy, train
from course.errors import BadInputError

# ----------------------------------------------------------------------- data


def test_digits_split_is_deterministic_stratified_and_standardised():
    a, b = load_digits(seed=0), load_digits(seed=0)
    assert np.array_equal(a.y_test, b.y_test) and np.array_equal(a.x_train, b.x_train)
    assert a.x_train.shape == (1347, 64) and a.x_test.shape == (450, 64)
    assert a.x_train.dtype == np.float32 and a.y_train.dtype == np.int64
    # every class appears in the test set in about its share
    counts = np.bincount(a.y_test, minlength=10)
    assert counts.min() >= 40
    # standardised with the training statistics: mean 0, std 1 except constant pixels
    assert np.allclose(a.x_train.mean(axis=0), 0, atol=1e-5)
    std = a.x_train.std(axis=0)
    assert np.all((np.abs(std - 1) < 1e-4) | (std == 0))
    assert not np.array_equal(load_digits(seed=1).y_test, a.y_test)


@pytest.mark.parametrize("kwargs, match", [({"test_fraction": 1.5}, "test_fraction"),
                                           ({"dtype": "int8"}, "floating-point"),
                                           ({"device": "tpu"}, "device must be")])
def test_digits_bad_arguments(kwargs, match):
    with pytest.raises(BadInputError, match=match):
        load_digits(**kwargs)


def test_batches_cover_every_index_once():
    idx = np.concatenate(list(batches(10, 3, np.random.default_rng(0))))
    assert sorted(idx.tolist()) == list(range(10))
    with pytest.raises(BadInputError, match="batch_size"):
        list(batches(10, 0, np.random.default_rng(0)))


def test_training_reaches_95_percent_on_unseen_digits():
    d = load_digits()
    m = MLP([64, 64, 10], seed=0)
    h = train(m, d, epochs=10, batch_size=32, lr=0.05)
    assert h.test_acc[-1] >= 0.95
    assert h.train_loss[-1] < h.train_loss[0]
    assert accuracy(m, d.x_test, d.y_test) == pytest.approx(h.test_acc[-1])
    assert h.steps == 10 * int(np.ceil(1347 / 32))
    fig = training_figure(h)
    assert "95" in fig.axes[1].get_title() or "96" in fig.axes[1].get_title() or "97" in fig.axes[1].get_title()


def test_training_is_deterministic_and_calls_back_each_epoch():
    d = load_digits()
    seen = []
    h1 = train(MLP([64, 16, 10]), d, epochs=3, callback=lambda h: seen.append(len(h.epoch)))
    h2 = train(MLP([64, 16, 10]), d, epochs=3)
    assert seen == [1, 2, 3]
    assert h1.train_loss == h2.train_loss and h1.test_acc == h2.test_acc


def test_training_refuses_a_model_that_does_not_fit_the_data():
    with pytest.raises(BadInputError, match="needs 64 inputs and 10 outputs"):
        train(MLP([32, 10]), load_digits(), epochs=1)
    with pytest.raises(BadInputError, match="epochs"):
        train(MLP([64, 10]), load_digits(), epochs=0)


# ----------------------------------------------------------------------- the per-layer trace

def test_trace_names_shapes_ops_and_flops():
    m = MLP([784, 512, 512, 10])
    x, y = random_batch(m, 32)
    tr = trace_step(m, x, y, repeat=1, budget_s=0.5)
    assert [r.kind for r in tr.layers] == ["linear", "activation", "linear", "activation", "linear", "loss"]
    first, second = tr.layers[0], tr.layers[2]
    assert first.in_shape == (32, 784) and first.out_shape == (32, 512)
    assert "xᵀ @ dout" in second.backward_ops[0] and "dout @ Wᵀ" in second.backward_ops[2]
    assert "not needed" in first.backward_ops[2]
    # a hidden Linear layer: backward does exactly twice the matrix-product work of forward
    assert second.backward_flops - 32 * 512 == pytest.approx(2 * (second.forward_flops - 32 * 512))
    # the products are nearly all the FLOPs
    total = sum(r.forward_flops + r.backward_flops for r in tr.layers)
    assert sum(r.matmul_flops for r in tr.layers) / total > 0.99
    assert all(r.forward_s > 0 and r.backward_s > 0 for r in tr.layers) and tr.step_s > 0
    assert "dW = xᵀ @ dout" in trace_html(tr)
    assert len(trace_figure(tr).axes) == 2


def test_trace_leaves_the_model_unchanged():
    m = MLP([20, 16, 4])
    before = [p.copy() for p in m.parameters()]
    trace_step(m, *random_batch(m, 8), repeat=1, budget_s=0.2)
    assert all(np.array_equal(a, b) for a, b in zip(before, m.parameters()))


def test_trace_survives_a_round_trip_through_results(tmp_path):
    m = MLP([20, 16, 4])
    tr = trace_step(m, *random_batch(m, 8), repeat=1, budget_s=0.2)
    rs = trace_to_results(tr)
    rs.save(tmp_path / "t.json")
    back = trace_from_results(type(rs).load(tmp_path / "t.json"), "cpu")
    assert [r.name for r in back.layers] == [r.name for r in tr.layers]
    assert back.step_s == tr.step_s and back.layers[0].backward_ops == tr.layers[0].backward_ops
    assert trace_from_results(rs, "gpu") is None


def test_step_time_sweep_records_each_width():
    rs = step_time_sweep(widths=(16, 32), depth=1, batch=8, n_in=20, repeat=1, budget_s=0.05)
    assert [r["width"] for r in rs.select(device="cpu")] == [16, 32]
    assert all(r["median_s"] > 0 and r["gflops"] > 0 for r in rs.records)
    with pytest.raises(BadInputError, match="batch"):
        time_train_step([4, 2], batch=0)


# ----------------------------------------------------------------------- checkpointing

@pytest.mark.parametrize("every", [1, 2, 3, 4, 5, 9, 10, 20])
def test_checkpointed_gradients_equal_plain_backprop(every):
    m = MLP([12] + [10] * 8 + [3], dtype="float64", seed=4)
    x, y = random_batch(m, 6)
    _, cache = softmax_cross_entropy(m.forward(x), y)
    m.backward(softmax_cross_entropy_backward(cache))
    plain = [g.copy() for g in m.gradients()]
    before = [p.copy() for p in m.parameters()]
    run = checkpointed_backward(m, x, y, every)
    assert all(np.allclose(a, b, rtol=0, atol=1e-14) for a, b in zip(plain, m.gradients()))
    assert all(np.array_equal(a, b) for a, b in zip(before, m.parameters()))
    assert run.loss == pytest.approx(float(softmax_cross_entropy(m.forward(x), y)[0]))


@settings(max_examples=20, deadline=None)
@given(depth=st.integers(1, 10), every=st.integers(1, 12), batch=st.integers(1, 4),
       activation=st.sampled_from(["relu", "tanh", "sigmoid"]))
def test_any_checkpointing_schedule_gives_plain_backprops_gradients(depth, every, batch, activation):
    m = MLP([5] + [6] * depth + [3], activation=activation, dtype="float64", seed=depth)
    x, y = random_batch(m, batch, seed=every)
    _, cache = softmax_cross_entropy(m.forward(x), y)
    m.backward(softmax_cross_entropy_backward(cache))
    plain = [g.copy() for g in m.gradients()]
    run = checkpointed_backward(m, x, y, every)
    assert all(np.allclose(a, b, rtol=1e-12, atol=1e-15) for a, b in zip(plain, m.gradients()))
    assert run.recomputed_blocks == sum(p == "recomputed" for p in kept_pattern(depth + 1, every))
    assert sum(b if e == "hold" else -b for e, _, b in run.events) == 0


def test_checkpointing_trades_memory_for_recomputation():
    m = MLP([16] + [32] * 15 + [4])        # 16 blocks
    x, y = random_batch(m, 8)
    runs = {k: checkpointed_backward(m, x, y, k) for k in (1, 2, 4, 8, 16)}
    act = 8 * 32 * 4                       # bytes of one hidden activation
    assert runs[1].recomputed_blocks == 0 and runs[16].recomputed_blocks == 0
    assert runs[4].peak_activation_bytes < runs[2].peak_activation_bytes < runs[1].peak_activation_bytes
    assert runs[4].peak_activation_bytes <= runs[1].peak_activation_bytes - 6 * act
    assert runs[4].recomputed_blocks == 9 and 0 < runs[4].extra_compute < 1 / 3
    # every array held is released again
    for run in runs.values():
        held = sum(b if e == "hold" else -b for e, _, b in run.events)
        assert held == 0


def test_kept_pattern():
    assert kept_pattern(7, 3) == ["checkpoint", "recomputed", "recomputed", "checkpoint", "recomputed",
                                  "recomputed", "checkpoint"]
    assert kept_pattern(5, 2)[-1] == "checkpoint" and kept_pattern(5, 5) == ["checkpoint"] + ["last segment"] * 4


def test_checkpoint_sweep_and_figure():
    rs = checkpoint_sweep(depth=5, width=16, batch=8, ks=[1, 2, 6, 50], repeat=2, budget_s=1.0)
    assert [r["every"] for r in rs.records] == [1, 2, 6]
    assert rs.records[0]["time_ratio"] == 1.0 and all(r["traced_peak_bytes"] > 0 for r in rs.records)
    fig = checkpoint_figure(rs, highlight=2, pattern=True)
    assert len(fig.axes) == 3


@pytest.mark.parametrize("every", [0, -1, 1.5, True])
def test_checkpoint_bad_k(every):
    m = MLP([4, 4, 2])
    with pytest.raises(BadInputError, match="every"):
        checkpointed_backward(m, *random_batch(m, 2), every)


# ----------------------------------------------------------------------- the report

def test_lesson_experiments_are_registered_and_plot():
    import course.backprop.experiments  # noqa: F401  (registers this lesson's experiments)
    from course.report import registry

    exps = registry()
    for name in ("backprop_train_step", "backprop_layer_trace", "backprop_checkpointing"):
        assert exps[name].lesson == "01" and exps[name].plotter is not None
    rs = exps["backprop_layer_trace"].run(devices=["cpu"], quick=True, progress=None)
    assert rs.select(device="cpu", layer=-1)[0]["step_s"] > 0
    assert exps["backprop_layer_trace"].plotter(rs, []).axes


@pytest.mark.gpu
def test_gpu_trace_and_checkpointing_match_cpu_gradients():
    from course.devices import to_device, to_numpy

    c = MLP([12] + [10] * 6 + [3], dtype="float64", seed=4)
    g = MLP([12] + [10] * 6 + [3], dtype="float64", seed=4, device="gpu")
    x, y = random_batch(c, 6)
    checkpointed_backward(c, x, y, 3)
    checkpointed_backward(g, to_device(x, "gpu"), to_device(y, "gpu"), 3)
    for a, b in zip(c.gradients(), g.gradients()):
        assert np.allclose(a, to_numpy(b), rtol=1e-9, atol=1e-12)
    tr = trace_step(g, to_device(x, "gpu"), to_device(y, "gpu"), repeat=2)
    assert tr.device == "gpu" and tr.step_s > 0
    big = MLP([64] + [256] * 15 + [4], device="gpu")
    xb, yb = random_batch(big, 256)
    full, some = checkpointed_backward(big, xb, yb, 1), checkpointed_backward(big, xb, yb, 4)
    assert some.device_peak_bytes < full.device_peak_bytes   # the GPU's own pool agrees with the count


def test_a_reference_trace_is_labelled_as_not_measured_here():
    from course.results import ResultSet

    m = MLP([20, 16, 4])
    rs = trace_to_results(trace_step(m, *random_batch(m, 8), repeat=1, budget_s=0.1))
    d = rs.to_dict()
    for r in d["records"]:
        r["device"] = "gpu"
    d["provenance"]["gpus"] = [{"name": "NVIDIA H200"}]
    ref = ResultSet.from_dict(d, source="reference")
    fig = trace_figure(trace_from_results(ref, "gpu"), reference=ref)
    footer = fig.texts[-1].get_text()
    assert "recorded on NVIDIA H200" in footer and "NOT measured on this machine" in footer
    assert "Measured live" not in " ".join(t.get_text() for t in fig.texts)


def test_digits_figure_marks_wrong_predictions_in_red():
    from course.plots import PALETTE

    d = load_digits()
    preds = d.y_test[:4].copy()
    preds[1] = (preds[1] + 1) % 10
    fig = digits_figure(d, 4, predictions=preds)
    titles = [ax.title for ax in fig.axes]
    assert len(titles) == 4 and f"label {d.y_test[0]}" in titles[0].get_text()
    assert titles[1].get_color() == PALETTE["vermillion"] and "✗" in titles[1].get_text()   # a mark besides colour
    assert titles[0].get_color() == "black" and "✗" not in titles[0].get_text()
