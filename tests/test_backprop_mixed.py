"""Lesson 01's training memory: the optimisers against PyTorch's, mixed-precision training against the
teaching MLP, loss scaling's rules, and the bytes a parameter costs against the arrays really held."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.backprop import MLP
from course.backprop.data import load_digits
from course.backprop.footprint import (
    MEMORY_PRECISIONS,
    activation_bytes,
    bytes_per_parameter,
    held_bytes,
    largest_model,
    training_state,
)
from course.backprop.mixed import (
    FLOAT16_MIN_NORMAL,
    FLOAT16_MIN_SUBNORMAL,
    PRECISIONS,
    LossScaler,
    compute_dtype,
    mixed_precision_train,
    underflow_share,
)
from course.backprop.optimizers import OPTIMIZERS, optimizer_state, update
from course.errors import BadInputError

# ----------------------------------------------------------------------------- the optimisers, against PyTorch

@pytest.mark.parametrize("name", ["sgd", "momentum", "adam"])
def test_each_optimiser_takes_pytorch_s_steps(name):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    p0 = rng.standard_normal(7)
    grads = [rng.standard_normal(7) for _ in range(6)]
    p, state = p0.copy(), optimizer_state(name, p0)
    tp = torch.tensor(p0, dtype=torch.float64, requires_grad=True)
    opt = {"sgd": lambda: torch.optim.SGD([tp], lr=0.05),
           "momentum": lambda: torch.optim.SGD([tp], lr=0.05, momentum=0.9),
           "adam": lambda: torch.optim.Adam([tp], lr=0.05)}[name]()
    for g in grads:
        update(name, p, g, state, 0.05)
        tp.grad = torch.tensor(g)
        opt.step()
    np.testing.assert_allclose(p, tp.detach().numpy(), rtol=1e-12, atol=1e-12)


def test_an_unknown_optimiser_is_refused_by_name():
    with pytest.raises(BadInputError, match="optimizer"):
        optimizer_state("adagrad", np.ones(3))


# ----------------------------------------------------------------------------- loss scaling

def test_dynamic_scaling_skips_and_halves_on_overflow_and_doubles_after_clean_steps():
    s = LossScaler(1024.0, growth_interval=3)
    assert s.update(True) and s.scale == 512.0
    assert [s.update(False) for _ in range(3)] == [False] * 3 and s.scale == 1024.0
    assert not s.update(False) and s.scale == 1024.0           # the count starts again after growing
    static = LossScaler(8.0, dynamic=False)
    assert not static.update(True) and static.scale == 8.0


# ----------------------------------------------------------------------------- mixed-precision training

def _digits():
    d = load_digits()
    return d.x_train, d.y_train


def test_the_float32_path_trains_exactly_as_the_teaching_mlp():
    x, y = _digits()
    run = mixed_precision_train(MLP([64, 32, 10], seed=1), x, y, steps=20, lr=0.1, precision="float32", batch=32)
    teacher = MLP([64, 32, 10], seed=1)
    order = np.random.default_rng(0).permutation(len(x))
    want = [teacher.train_step(x[order[i * 32:(i + 1) * 32]], y[order[i * 32:(i + 1) * 32]], 0.1) for i in range(20)]
    np.testing.assert_allclose(run["losses"], want, rtol=1e-5)
    for p, q in zip(run["params"], teacher.parameters()):
        np.testing.assert_allclose(p, q, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_every_precision_trains_the_digits_close_to_float32(precision):
    x, y = _digits()
    ref = mixed_precision_train(MLP([64, 32, 10], seed=0), x, y, steps=60, lr=0.1, precision="float32")
    run = mixed_precision_train(MLP([64, 32, 10], seed=0), x, y, steps=60, lr=0.1, precision=precision)
    assert run["dtype"] == compute_dtype(precision).name
    assert all(p.dtype == np.float32 for p in run["params"])                     # the master weights
    assert abs(np.mean(run["losses"][-10:]) - np.mean(ref["losses"][-10:])) < 0.05


def test_loss_scaling_rescues_float16_when_gradients_are_small_and_bfloat16_needs_none():
    x, y = _digits()
    runs = {p: mixed_precision_train(MLP([64, 64, 64, 10], seed=0), x, y, steps=200, lr=3e-3, precision=p,
                                     optimizer="adam", loss_weight=2.0 ** -16, probe_every=100) for p in PRECISIONS}
    final = {p: float(np.mean(r["losses"][-20:])) for p, r in runs.items()}
    assert final["float16"] > 2 * final["float32"]                  # unscaled: most small gradients flushed
    assert final["float16 scaled"] < 1.2 * final["float32"] and final["bfloat16"] < 1.2 * final["float32"]
    lost = underflow_share(runs["float32"]["probes"][-1])["zero"]
    kept = underflow_share(runs["float32"]["probes"][-1], scale=runs["float16 scaled"]["scales"][-1])["zero"]
    assert lost > 0.5 > 0.1 > kept


def test_an_overflowing_scale_skips_the_step_and_halves():
    x, y = _digits()
    run = mixed_precision_train(MLP([64, 32, 10], seed=0), x, y, steps=40, lr=0.1, precision="float16 scaled",
                                scaler=LossScaler(2.0 ** 40, growth_interval=5))
    assert run["skipped"] >= 1 and run["skipped_steps"][0] == 0
    assert run["scales"][1] == run["scales"][0] / 2
    assert all(np.isfinite(p).all() for p in run["params"])            # a skipped step changes nothing


def test_the_teaching_model_is_left_alone():
    m = MLP([8, 4, 3], seed=0)
    before = [p.copy() for p in m.parameters()]
    rng = np.random.default_rng(0)
    mixed_precision_train(m, rng.standard_normal((16, 8)), rng.integers(0, 3, 16), steps=3, lr=0.1, batch=8)
    for p, q in zip(m.parameters(), before):
        np.testing.assert_array_equal(p, q)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(1e-12, 1e3), min_size=1, max_size=50), st.floats(1.0, 2.0 ** 20))
def test_the_underflow_share_counts_what_float16_rounds_to_zero(values, scale):
    v = np.array(values, dtype=np.float32)
    share = underflow_share(v, scale)
    with np.errstate(over="ignore"):
        as16 = (v.astype(np.float64) * scale).astype(np.float16)
    assert share["zero"] == pytest.approx(np.mean(as16 == 0), abs=1e-12) or np.any(
        np.isclose(v * scale, FLOAT16_MIN_SUBNORMAL / 2, rtol=1e-3))           # ties at the rounding edge
    assert 0 <= share["subnormal"] <= 1 and FLOAT16_MIN_NORMAL == np.finfo(np.float16).smallest_normal


@pytest.mark.parametrize("kwargs, word", [({"precision": "float8"}, "precision"), ({"lr": 0}, "lr"),
                                          ({"steps": 0}, "steps"), ({"optimizer": "lion"}, "optimizer")])
def test_bad_settings_are_refused_by_name(kwargs, word):
    args = {"steps": 2, "lr": 0.1} | kwargs
    with pytest.raises(BadInputError, match=word):
        mixed_precision_train(MLP([4, 3]), np.ones((8, 4)), np.zeros(8, int), **args)


# ----------------------------------------------------------------------------- bytes per parameter

@pytest.mark.parametrize("precision", MEMORY_PRECISIONS)
@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_the_arrays_held_cost_what_the_formula_says_part_by_part(precision, optimizer):
    model = MLP([64, 48, 32, 10], seed=0)
    held = held_bytes(training_state(model, precision, optimizer))
    per = bytes_per_parameter(precision, optimizer)
    for part in ("weights", "gradients", "master", "optimizer", "total"):
        assert held[part] == per[part] * model.n_parameters(), part


def test_mixed_precision_adam_costs_sixteen_bytes_a_parameter_as_float32_adam_does():
    mixed, plain = bytes_per_parameter("mixed float16", "adam"), bytes_per_parameter("float32", "adam")
    assert mixed["total"] == plain["total"] == 16
    assert bytes_per_parameter("mixed bfloat16", "sgd")["total"] == 8
    assert largest_model(16 * 10**9, "float32", "adam") == 10**9


@pytest.mark.parametrize("sizes, batch", [([64, 32, 10], 8), ([20, 16, 16, 16, 5], 33)])
def test_the_activation_formula_equals_what_the_teaching_mlp_keeps(sizes, batch):
    model = MLP(sizes, seed=0)
    model.forward(np.ones((batch, sizes[0]), np.float32))
    arrays = {id(a): a for cache in model.caches for a in cache}
    assert sum(a.nbytes for a in arrays.values()) == activation_bytes(sizes, batch, itemsize=4)


def test_the_mixed_precision_figure_says_what_float16_loses_from_its_own_runs():
    from course.backprop.plots import mixed_precision_figure
    from course.takeaways import figure_takeaway

    x, y = _digits()
    runs = {p: mixed_precision_train(MLP([64, 32, 10], seed=0), x, y, steps=30, lr=3e-3, precision=p,
                                     optimizer="adam", probe_every=10) for p in PRECISIONS}
    fig = mixed_precision_figure(runs)
    lost = underflow_share(runs["float32"]["probes"][-1])["zero"]
    text = figure_takeaway(fig)
    assert f"{100 * lost:.0f} %" in text and "float16 scaled" in text
    assert len(fig.axes) >= 3 and fig.axes[0].get_yscale() == "log"
