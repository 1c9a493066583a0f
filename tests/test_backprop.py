"""Lesson 01: layers, losses and the MLP against finite differences, PyTorch and their contract."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from course.backprop.gradcheck import (
    gradient_check,
    gradient_errors,
    layer_gradient_check,
    loss_gradient_check,
    rel_error,
)
from course.backprop.layers import (
    ACTIVATIONS,
    MLP,
    Linear,
    ReLU,
    Sigmoid,
    Tanh,
    mse,
    softmax_cross_entropy,
    softmax_cross_entropy_backward,
)
from course.errors import BadInputError, GPUUnavailableError

RNG = np.random.default_rng(1234)


def _batch(m: MLP, n: int = 8, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, m.sizes[0])).astype(m.dtype), rng.integers(0, m.sizes[-1], n)


# ----------------------------------------------------------------------- every layer, float64

@pytest.mark.parametrize("layer", [Linear(5, 3, dtype="float64", seed=RNG), ReLU(), Sigmoid(), Tanh()],
                         ids=repr)
def test_each_layer_passes_its_gradient_check_in_float64(layer):
    errs = layer_gradient_check(layer, RNG.standard_normal((6, 5)))
    assert set(errs) == ({"dx", "dW", "db"} if isinstance(layer, Linear) else {"dx"})
    assert max(errs.values()) < 1e-7, errs


def test_both_losses_pass_their_gradient_check():
    errs = loss_gradient_check()
    assert max(errs.values()) < 1e-7, errs


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_whole_mlp_gradient_check_below_1e7(activation):
    m = MLP([6, 9, 7, 4], activation=activation, dtype="float64", seed=2)
    x, y = _batch(m, 10)
    assert gradient_check(m, x, y) < 1e-7


def test_gradient_check_catches_a_broken_backward(monkeypatch):
    m = MLP([4, 5, 3], dtype="float64", seed=0)
    x, y = _batch(m)
    monkeypatch.setattr(Sigmoid, "backward", lambda self, d, c: d * c[0])  # unused: relu model
    broken = ReLU.backward
    monkeypatch.setattr(ReLU, "backward", lambda self, d, c: broken(self, d, c) * 1.5)
    assert gradient_check(m, x, y) > 1e-2


def test_gradient_errors_samples_entries_when_asked():
    m = MLP([20, 30, 5], dtype="float64")
    x, y = _batch(m)
    recs = gradient_errors(m, x, y, max_entries=7)
    assert [r["parameter"] for r in recs] == ["W1", "b1", "W2", "b2"]
    assert [r["checked"] for r in recs] == [7, 7, 7, 5]
    assert max(r["rel_error"] for r in recs) < 1e-7


def test_big_models_are_checked_on_a_sample_by_default():
    m = MLP([300, 80, 10], dtype="float64")            # 24,890 parameters
    x, y = _batch(m, 4)
    recs = gradient_errors(m, x, y)
    assert [r["checked"] for r in recs] == [200, 80, 200, 10]
    assert max(r["rel_error"] for r in recs) < 1e-7
    with pytest.raises(BadInputError, match="max_entries"):
        gradient_errors(m, x, y, max_entries=0)


def test_gradient_check_leaves_the_weights_unchanged():
    m = MLP([4, 6, 3], dtype="float64")
    before = [p.copy() for p in m.parameters()]
    gradient_check(m, *_batch(m))
    assert all(np.array_equal(a, b) for a, b in zip(before, m.parameters()))


@settings(max_examples=15, deadline=None)
@given(sizes=st.lists(st.integers(1, 6), min_size=2, max_size=4), batch=st.integers(1, 5),
       activation=st.sampled_from(sorted(ACTIVATIONS)), seed=st.integers(0, 100))
def test_any_small_mlp_matches_finite_differences(sizes, batch, activation, seed):
    m = MLP(sizes, activation=activation, dtype="float64", seed=seed)
    x, y = _batch(m, batch, seed)
    if activation == "relu":   # finite differences straddling ReLU's kink at 0 measure half a slope
        h = x
        for layer in m.layers:
            h, _ = layer.forward(h)
            if isinstance(layer, Linear):
                assume(np.abs(h).min() > 1e-4)
    # 1e-6, not 1e-7: with one example the gradients can be ~1e-3, and the loss's float64 rounding
    # over eps = 1e-6 (~1e-10 absolute) is then ~1e-7 of that scale; a wrong backward is off by ~1.
    assert gradient_check(m, x, y) < 1e-6


# ----------------------------------------------------------------------- losses

def test_softmax_cross_entropy_is_stable_for_huge_logits():
    logits = np.array([[1e4, 0.0, -1e4], [0.0, 1e4, 0.0]])
    loss, cache = softmax_cross_entropy(logits, np.array([0, 2]))
    assert np.isfinite(loss) and loss == pytest.approx(1e4 / 2)
    d = softmax_cross_entropy_backward(cache)
    assert np.all(np.isfinite(d)) and np.allclose(d.sum(axis=1), 0)


def test_softmax_cross_entropy_of_uniform_logits_is_log_classes():
    loss, _ = softmax_cross_entropy(np.zeros((4, 10)), np.arange(4))
    assert float(loss) == pytest.approx(np.log(10))


def test_mse_value():
    loss, _ = mse(np.array([1.0, 2.0]), np.array([0.0, 0.0]))
    assert float(loss) == pytest.approx(2.5)


def test_sigmoid_does_not_overflow():
    out, _ = Sigmoid().forward(np.array([-1000.0, 0.0, 1000.0]))
    assert np.allclose(out, [0.0, 0.5, 1.0])


# ----------------------------------------------------------------------- the contract lesson 03 uses

def test_mlp_contract_shapes_and_order():
    m = MLP([7, 5, 3], activation="tanh", dtype="float32", device="cpu", seed=0)
    x, y = _batch(m, 4)
    logits = m.forward(x)
    assert logits.shape == (4, 3) and logits.dtype == np.float32
    m.backward(np.ones((4, 3), np.float32))
    assert [p.shape for p in m.parameters()] == [g.shape for g in m.gradients()] == [(7, 5), (5,), (5, 3), (3,)]
    assert isinstance(m.train_step(x, y, 0.1), float)


def test_same_seed_same_model_and_same_training():
    a, b = MLP([6, 8, 3], seed=5), MLP([6, 8, 3], seed=5)
    x, y = _batch(a)
    la = [a.train_step(x, y, 0.1) for _ in range(3)]
    lb = [b.train_step(x, y, 0.1) for _ in range(3)]
    assert la == lb
    assert all(np.array_equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not np.array_equal(MLP([6, 8, 3], seed=6).parameters()[0], MLP([6, 8, 3], seed=5).parameters()[0])


def test_forward_returns_a_new_array_each_call():
    m = MLP([3, 4, 2])
    x, _ = _batch(m)
    a = m.forward(x)
    keep = a.copy()
    m.forward(x * 2)
    assert np.array_equal(a, keep)


def test_train_step_lowers_the_loss_and_updates_by_lr_times_gradient():
    m = MLP([5, 6, 3], dtype="float64")
    x, y = _batch(m, 16)
    before = [p.copy() for p in m.parameters()]
    l0 = m.train_step(x, y, 0.5)
    for p, b, g in zip(m.parameters(), before, m.gradients()):
        assert np.allclose(p, b - 0.5 * g)
    losses = [m.train_step(x, y, 0.5) for _ in range(20)]
    assert losses[-1] < l0


def test_backward_returns_input_gradient_only_when_asked():
    m = MLP([3, 4, 2], dtype="float64")
    x, y = _batch(m)
    logits = m.forward(x)
    _, cache = softmax_cross_entropy(logits, y)
    d = softmax_cross_entropy_backward(cache)
    assert m.backward(d) is None
    dx = m.backward(d, need_input_grad=True)
    assert dx.shape == x.shape


def test_flops_per_step_counts_products():
    m = MLP([784, 512, 512, 10])
    b = 256
    mm = 2 * b * (784 * 512 + 512 * 512 + 512 * 10)
    # forward once, backward twice, less the first layer's dx
    expected_mm = 3 * mm - 2 * b * 784 * 512
    assert expected_mm <= m.flops_per_step(b) < 1.01 * expected_mm


# ----------------------------------------------------------------------- PyTorch as a second oracle

def test_gradients_match_pytorch_autograd():
    torch = pytest.importorskip("torch")
    for act, tact in (("relu", torch.relu), ("tanh", torch.tanh), ("sigmoid", torch.sigmoid)):
        m = MLP([6, 8, 5, 4], activation=act, dtype="float64", seed=3)
        x, y = _batch(m, 9)
        params = [torch.tensor(p, requires_grad=True) for p in m.parameters()]
        h = torch.tensor(x)
        for i in range(0, len(params), 2):
            h = h @ params[i] + params[i + 1]
            if i + 2 < len(params):
                h = tact(h)
        loss = torch.nn.functional.cross_entropy(h, torch.tensor(y))
        loss.backward()
        ours = m.train_step(x, y, 1e-300)  # computes the gradients; the update is negligible
        assert ours == pytest.approx(loss.item(), rel=1e-12)
        for g, p in zip(m.gradients(), params):
            assert rel_error(g, p.grad.numpy()) < 1e-10


# ----------------------------------------------------------------------- bad input

@pytest.mark.parametrize("kwargs, match", [
    ({"sizes": [5]}, "at least two widths"),
    ({"sizes": "784"}, "at least two widths"),
    ({"sizes": [5, 0, 3]}, "whole number >= 1"),
    ({"sizes": [5, 2.5, 3]}, "whole number >= 1"),
    ({"sizes": [5, 3], "activation": "gelu"}, "activation must be one of"),
    ({"sizes": [5, 3], "dtype": "int32"}, "floating-point"),
    ({"sizes": [5, 3], "device": "tpu"}, "device must be"),
])
def test_bad_model_arguments_are_named(kwargs, match):
    with pytest.raises(BadInputError, match=match):
        MLP(**kwargs)


def test_bfloat16_gets_a_clear_message():
    with pytest.raises(Exception, match="bfloat16"):
        MLP([3, 2], dtype="bfloat16")


def test_shape_mismatch_names_the_shapes():
    m = MLP([5, 4, 3])
    with pytest.raises(BadInputError, match=r"shape \(batch, 5\).*got \(2, 6\)"):
        m.forward(np.zeros((2, 6), np.float32))
    with pytest.raises(BadInputError, match=r"shape \(batch, 5\)"):
        m.forward(np.zeros(5, np.float32))


def test_empty_batch_is_refused():
    with pytest.raises(BadInputError, match="empty batch"):
        MLP([5, 3]).train_step(np.zeros((0, 5), np.float32), np.zeros(0, np.int64), 0.1)


def test_labels_out_of_range_are_named():
    m = MLP([5, 3])
    x = np.zeros((2, 5), np.float32)
    with pytest.raises(BadInputError, match=r"label 3 is out of range.*0\.\.2"):
        m.train_step(x, np.array([0, 3]), 0.1)
    with pytest.raises(BadInputError, match="label -1"):
        m.train_step(x, np.array([-1, 0]), 0.1)
    with pytest.raises(BadInputError, match="integer class numbers"):
        m.train_step(x, np.array([0.0, 1.0]), 0.1)
    with pytest.raises(BadInputError, match=r"shape \(2,\)"):
        m.train_step(x, np.array([0, 1, 2]), 0.1)


@pytest.mark.parametrize("lr", [0, -0.1, float("nan"), float("inf"), "0.1"])
def test_bad_learning_rate_is_named(lr):
    m = MLP([5, 3])
    with pytest.raises(BadInputError, match="learning rate"):
        m.train_step(np.zeros((2, 5), np.float32), np.array([0, 1]), lr)


def test_diverging_learning_rate_stops_with_a_message_and_keeps_the_weights():
    m = MLP([10, 32, 3], dtype="float32")
    x, y = _batch(m, 32)
    x *= 50
    with pytest.raises(BadInputError, match=r"not finite.*lr=1e\+06.*Lower lr"):
        for _ in range(50):
            kept = [p.copy() for p in m.parameters()]
            m.train_step(x, y, 1e6)
    assert all(np.array_equal(a, b) for a, b in zip(kept, m.parameters()))


def test_backward_before_forward_and_wrong_dlogits_shape():
    m = MLP([4, 3])
    with pytest.raises(BadInputError, match="forward pass first"):
        m.backward(np.zeros((2, 3)))
    m.forward(np.zeros((2, 4), np.float32))
    with pytest.raises(BadInputError, match=r"logits' shape \(2, 3\)"):
        m.backward(np.zeros((3, 3)))
    m.backward(np.ones((2, 3)))           # float64 into a float32 model: cast, not a crash
    assert m.gradients()[0].dtype == np.float32


def test_nan_in_the_data_is_named_not_blamed_on_the_learning_rate():
    m = MLP([3, 2])
    x = np.zeros((2, 3), np.float32)
    x[1, 2] = np.nan
    with pytest.raises(BadInputError, match="NaN"):
        m.train_step(x, np.array([0, 1]), 0.1)


def test_model_on_gpu_without_one_says_what_to_do():
    from course.devices import gpu_available

    if gpu_available():
        pytest.skip("a GPU answers here")
    with pytest.raises(GPUUnavailableError, match="No GPU"):
        MLP([4, 3], device="gpu")


# ----------------------------------------------------------------------- GPU: the same code on CuPy

@pytest.mark.gpu
def test_gpu_training_step_matches_cpu():
    from course.devices import to_device, to_numpy

    c = MLP([20, 16, 16, 4], dtype="float64", device="cpu", seed=1)
    g = MLP([20, 16, 16, 4], dtype="float64", device="gpu", seed=1)
    x, y = _batch(c, 12)
    lc = c.train_step(x, y, 0.1)
    lg = g.train_step(to_device(x, "gpu"), to_device(y, "gpu"), 0.1)
    assert lg == pytest.approx(lc, rel=1e-10)
    for a, b in zip(c.gradients(), g.gradients()):
        assert np.allclose(a, to_numpy(b), rtol=1e-9, atol=1e-12)
    assert gradient_check(g, to_device(x, "gpu"), to_device(y, "gpu"), max_entries=20) < 1e-7


@pytest.mark.gpu
def test_gpu_model_refuses_host_arrays_with_advice():
    g = MLP([4, 3], device="gpu")
    with pytest.raises(BadInputError, match="to_device"):
        g.forward(np.zeros((2, 4), np.float32))
