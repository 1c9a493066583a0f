"""The tanh RNN and the deep MLP chain: every backward method matches finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course import BadInputError
from course.backprop import rel_error
from course.bppsa.models import METHODS, MLPChain, TanhRNN, finite_difference_check
from course.bppsa.timing import rnn_timings, torch_available


@pytest.mark.parametrize("method", METHODS)
def test_rnn_gradients_match_finite_differences(method):
    rnn = TanhRNN(input_size=2, hidden_size=5, n_classes=3, seed=1, dtype="float64")
    x, y = rnn.example_data(T=9, batch=3)
    errors = finite_difference_check(rnn, x, y, method=method)
    assert set(errors) == {"W_ih", "W_hh", "b_ih", "b_hh", "W_out", "b_out", "x"}
    assert max(errors.values()) < 1e-6, errors


@pytest.mark.parametrize("activation", ["tanh", "relu"])
@pytest.mark.parametrize("method", METHODS)
def test_mlp_gradients_match_finite_differences(activation, method):
    mlp = MLPChain(width=6, depth=5, n_classes=4, activation=activation, seed=2, dtype="float64")
    x, y = mlp.example_data(batch=4)
    errors = finite_difference_check(mlp, x, y, method=method)
    assert max(errors.values()) < 1e-6, errors


@settings(max_examples=15, deadline=None)
@given(T=st.integers(1, 300), h=st.integers(1, 12), B=st.integers(1, 6), seed=st.integers(0, 999))
def test_rnn_methods_agree_on_every_gradient(T, h, B, seed):
    rnn = TanhRNN(1, h, seed=seed, dtype="float64")
    x, y = rnn.example_data(T, B, seed=seed)
    _, cache = rnn.forward(x, y)
    ref = rnn.backward(cache, "sequential")
    for method in ("jacobian", "scan"):
        g = rnn.backward(cache, method)
        for name, v in ref.items():
            assert np.allclose(g[name], v, rtol=1e-9, atol=1e-12), (method, name)


def test_rnn_jacobian_is_the_derivative_of_one_step():
    rnn = TanhRNN(1, 4, seed=0, dtype="float64")
    x, y = rnn.example_data(3, 1)
    _, cache = rnn.forward(x, y)
    J = rnn.jacobians(cache)
    p, hs, eps = rnn.params, cache["hs"], 1e-6

    def step(h_prev, t):
        return np.tanh(x[t] @ p["W_ih"].T + p["b_ih"] + p["b_hh"] + h_prev @ p["W_hh"].T)

    num = np.stack([(step(hs[1] + eps * e, 1) - step(hs[1] - eps * e, 1))[0] / (2 * eps)
                    for e in np.eye(4)], axis=1)
    assert rel_error(num, J[1, 0]) < 1e-8


def test_rnn_matches_pytorch_when_installed():
    if not torch_available():
        pytest.skip("PyTorch is not installed (an optional oracle)")
    import torch

    rnn = TanhRNN(1, 6, n_classes=4, seed=3, dtype="float64")
    x, y = rnn.example_data(12, 5)
    _, cache = rnn.forward(x, y)
    ours = rnn.backward(cache, "scan")
    t = torch.nn.RNN(1, 6, nonlinearity="tanh").double()
    head = torch.nn.Linear(6, 4).double()
    with torch.no_grad():
        for name, src in (("weight_ih_l0", "W_ih"), ("weight_hh_l0", "W_hh"), ("bias_ih_l0", "b_ih"),
                          ("bias_hh_l0", "b_hh")):
            getattr(t, name).copy_(torch.from_numpy(rnn.params[src]))
        head.weight.copy_(torch.from_numpy(rnn.params["W_out"]))
        head.bias.copy_(torch.from_numpy(rnn.params["b_out"]))
    _, h = t(torch.from_numpy(x))
    torch.nn.functional.cross_entropy(head(h[-1]), torch.from_numpy(y)).backward()
    np.testing.assert_allclose(ours["W_hh"], t.weight_hh_l0.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ours["W_ih"], t.weight_ih_l0.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_rnn_timings_reports_each_backward_pass_timed_alone():
    r = rnn_timings(T=30, hidden_size=4, batch=2, repeat=2)
    for m in ("sequential", "scan"):
        assert r["backward_s"][m] == r["backward"][m].median > 0 and r["backward"][m].repeat == 2
    assert r["max_grad_diff"] < 1e-4


def test_bad_model_inputs_get_messages():
    with pytest.raises(BadInputError, match="hidden_size must be a whole number"):
        TanhRNN(hidden_size=0)
    rnn = TanhRNN(1, 3)
    with pytest.raises(BadInputError, match=r"x must have shape \(T, batch, 1\)"):
        rnn.forward(np.zeros((5, 2)), np.zeros(2, dtype=int))
    with pytest.raises(BadInputError, match="labels must have shape"):
        rnn.forward(np.zeros((5, 2, 1), dtype=np.float32), np.zeros(3, dtype=int))
    _, cache = rnn.forward(*rnn.example_data(4, 2))
    with pytest.raises(BadInputError, match="method must be one of"):
        rnn.backward(cache, "magic")
    with pytest.raises(BadInputError, match="activation must be"):
        MLPChain(activation="sigmoid")
    with pytest.raises(BadInputError, match="float64"):
        finite_difference_check(rnn, *rnn.example_data(3, 1))


@pytest.mark.gpu
def test_rnn_scan_on_gpu_matches_cpu():
    import course

    cpu = TanhRNN(1, 8, seed=4, dtype="float64")
    gpu = TanhRNN(1, 8, seed=4, dtype="float64", device="gpu")
    x, y = cpu.example_data(200, 4)
    _, c_cpu = cpu.forward(x, y)
    _, c_gpu = gpu.forward(course.to_device(x, "gpu"), course.to_device(y, "gpu"))
    ref = cpu.backward(c_cpu, "sequential")
    for method in ("sequential", "scan"):
        g = gpu.backward(c_gpu, method)
        np.testing.assert_allclose(course.to_numpy(g["W_hh"]), ref["W_hh"], rtol=1e-9, atol=1e-12)


def test_interleaved_rounds_alternate_the_functions_and_respect_the_budget():
    import time

    from course.timing import interleaved_rounds

    order = []
    t = interleaved_rounds({"a": lambda: order.append("a"), "b": lambda: order.append("b")},
                           warmup=1, repeat=3)
    assert order == ["a", "b"] * 4                       # one warm-up round, then three timed ones
    assert len(t["a"].samples) == len(t["b"].samples) == 3
    slow = interleaved_rounds({"s": lambda: time.sleep(0.02)}, warmup=0, repeat=50, budget_s=0.05)
    assert 1 <= slow["s"].repeat < 50 and slow["s"].stopped_early


def test_rnn_writes_the_same_scan_elements_as_the_generic_builder():
    from course.bppsa.algorithm import scan_elements

    rnn = TanhRNN(1, 5, seed=2, dtype="float64")
    x, y = rnn.example_data(T=9, batch=3)
    _, cache = rnn.forward(x, y)
    G_T = cache["dlogits"] @ rnn.params["W_out"]
    np.testing.assert_array_equal(rnn.scan_elements(cache, G_T), scan_elements(rnn.jacobians(cache), G_T))
