"""Lesson 06, ZeRO and FSDP: every stage on p = 2, 3, 4 ranks, simulated and on real MPI ranks, trains exactly as
one process does with Adam (the course's Adam equal to ``torch.optim.Adam``); the ring reduce-scatter and
all-gather equal MPI's own; each rank's measured bytes sit on ZeRO's formulas; the bytes sent per step are an
all-reduce's for stages 0-2 and 1.5x that for stage 3; the stage-2 exercise's check passes the answer and names
each typical mistake; bad input is refused before anything runs."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import course.check
from course.errors import BadInputError
from course.parallel import mpi_unavailable_reason
from course.parallel.collectives import (
    chunk_bounds,
    ring_all_gather,
    ring_allreduce,
    ring_chunks,
    ring_reduce_scatter,
    shard_chunks,
)
from course.parallel.runs import shard_collectives_check, sharded_train
from course.parallel.zero import adam_update, layer_lengths, simulate_sharded, single_process_adam
from course.parallel.zero_costs import (
    collective_counts,
    in_flight_bytes,
    zero_bytes_per_rank,
    zero_bytes_sent,
    zero_state_bytes,
    zero_step_model,
)

needs_mpi = pytest.mark.skipif(mpi_unavailable_reason() is not None,
                               reason=f"MPI cannot start here: {mpi_unavailable_reason()}")

SIZES = [5, 9, 7, 3]
STEPS, LR = 4, 0.01


def _data(batch=11, seed=1):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((batch, SIZES[0])), rng.integers(0, SIZES[-1], batch)


def _max_diff(a, b):
    return max(float(np.max(np.abs(u - v))) for u, v in zip(a, b))


# ---------------------------------------------------------------------------- Adam, against PyTorch's

def test_the_courses_adam_equals_torch_optim_adam_step_by_step():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    w = rng.standard_normal(50)
    m, v = np.zeros(50), np.zeros(50)
    tw = torch.tensor(w.copy(), requires_grad=True)
    opt = torch.optim.Adam([tw], lr=0.03)
    for t in range(1, 21):
        g = rng.standard_normal(50) * 10.0 ** rng.integers(-6, 2, 50)      # gradients over eight decades
        adam_update(w, g, m, v, t, 0.03)
        tw.grad = torch.tensor(g)
        opt.step()
        np.testing.assert_allclose(w, tw.detach().numpy(), rtol=1e-14, atol=1e-15)


def test_one_process_adam_training_equals_torch_autograd_with_torch_optim_adam():
    torch = pytest.importorskip("torch")
    x, y = _data()
    want = single_process_adam(SIZES, x, y, STEPS, LR)
    from course.backprop.layers import MLP

    params = [torch.tensor(q.copy(), requires_grad=True) for q in MLP(SIZES, dtype="float64").parameters()]
    opt = torch.optim.Adam(params, lr=LR)
    losses = []
    for _ in range(STEPS):
        h = torch.tensor(x)
        for j in range(0, len(params), 2):
            h = h @ params[j] + params[j + 1]
            if j < len(params) - 2:
                h = torch.relu(h)
        loss = torch.nn.functional.cross_entropy(h, torch.tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    assert _max_diff(want["params"], [q.detach().numpy() for q in params]) < 1e-12
    np.testing.assert_allclose(want["losses"], losses, rtol=1e-12)


# ---------------------------------------------------------------------------- the ring's two halves

@settings(max_examples=30, deadline=None)
@given(p=st.integers(1, 7), n=st.integers(1, 40), seed=st.integers(0, 2**16))
def test_reduce_scatter_then_all_gather_is_the_all_reduce_and_sends_what_it_sends(p, n, seed):
    x = np.random.default_rng(seed).integers(-9, 9, (p, n)).astype(float)   # whole numbers: sums exact
    bounds = chunk_bounds(n, p)
    rs = ring_reduce_scatter(x)
    for r in range(p):                                 # rank r holds the sum of its own chunk r
        np.testing.assert_array_equal(rs.result[r, bounds[r]:bounds[r + 1]], x.sum(0)[bounds[r]:bounds[r + 1]])
    ag = ring_all_gather(rs.result)
    np.testing.assert_array_equal(ag.result, np.tile(x.sum(0), (p, 1)))
    ar = ring_allreduce(x)
    assert (rs.sent + ag.sent).sum() == ar.sent.sum() and (rs.sent + ag.sent).max() - ar.sent.max() <= 1


def test_the_shard_schedule_is_the_rings_turned_by_one_chunk():
    for p in (2, 3, 5):
        for r in range(p):
            for s in range(2 * (p - 1)):
                assert shard_chunks(r, s, p) == ring_chunks((r - 1) % p, s, p)
            assert shard_chunks(r, p - 1, p)[0] == r      # the all-gather starts by sending the rank's own chunk


@needs_mpi
@pytest.mark.parametrize("p", [2, 3, 4])
def test_the_courses_mpi_reduce_scatter_and_all_gather_equal_mpis_own(p):
    for c in shard_collectives_check(p, [1, 2, 7, 1000, 4099], progress=None):
        assert c["reduce_scatter_max_rel_error"] < 1e-12, c
        assert c["all_gather_equals_mpi"] and c["identical_on_every_rank"], c


# ---------------------------------------------------------------------------- equal to one process

@pytest.mark.parametrize("stage", [0, 1, 2, 3])
@pytest.mark.parametrize("p", [2, 3, 4])
def test_every_stage_simulated_trains_as_one_process_does_with_adam(stage, p):
    x, y = _data()
    want = single_process_adam(SIZES, x, y, STEPS, LR)
    out = sharded_train(stage, p, SIZES, x, y, STEPS, LR)
    assert _max_diff(out["params"], want["params"]) < 1e-12
    np.testing.assert_allclose(out["losses"], want["losses"], rtol=1e-12)
    assert _max_diff(out["initial_params"], single_process_adam(SIZES, x, y, 1, 1e-300)["params"]) < 1e-12
    assert _max_diff(out["params"], out["initial_params"]) > 1e-3         # it did train
    assert out["ranks_agree"] is (None if stage == 3 else True)


@needs_mpi
@pytest.mark.parametrize("stage", [0, 1, 2, 3])
@pytest.mark.parametrize("p", [2, 3, 4])
def test_every_stage_on_mpi_ranks_trains_as_one_process_and_as_the_simulation(stage, p):
    x, y = _data()
    want = single_process_adam(SIZES, x, y, STEPS, LR)
    out = sharded_train(stage, p, SIZES, x, y, STEPS, LR, engine="mpi", progress=None)
    sim = sharded_train(stage, p, SIZES, x, y, STEPS, LR)
    assert _max_diff(out["params"], want["params"]) < 1e-12
    np.testing.assert_allclose(out["losses"], want["losses"], rtol=1e-12)
    assert all(np.array_equal(a, b) for a, b in zip(out["params"], sim["params"]))   # one schedule, the same bits
    for key in ("peak_bytes_per_rank", "held_bytes_per_rank", "bytes_sent_per_rank"):
        assert out[key] == sim[key], key            # measured at Sendrecv = counted in the simulation
    assert out["ranks_agree"] is (None if stage == 3 else True)


@settings(max_examples=25, deadline=None)
@given(stage=st.integers(0, 3), p=st.integers(1, 6), widths=st.lists(st.integers(1, 9), min_size=2, max_size=4),
       extra=st.integers(0, 5), activation=st.sampled_from(["relu", "tanh", "sigmoid"]), seed=st.integers(0, 2**16))
def test_any_stage_any_ranks_any_mlp_trains_as_one_process(stage, p, widths, extra, activation, seed):
    sizes = widths + [2]
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal((p + extra, sizes[0])), rng.integers(0, 2, p + extra)     # unequal shards too
    out = simulate_sharded(stage, p, sizes, x, y, 2, 0.05, seed=seed, activation=activation)
    want = single_process_adam(sizes, x, y, 2, 0.05, seed=seed, activation=activation)
    assert _max_diff(out["params"], want["params"]) < 1e-12
    assert out["held_bytes_per_rank"] == [zero_state_bytes(stage, sizes, p, r) for r in range(p)]


def test_a_batch_per_step_and_one_batch_for_every_step_both_train_as_one_process():
    rng = np.random.default_rng(4)
    xs, ys = rng.standard_normal((3, 8, SIZES[0])), rng.integers(0, SIZES[-1], (3, 8))
    out = simulate_sharded(3, 4, SIZES, xs, ys, 3, LR, activation="tanh")
    assert _max_diff(out["params"], single_process_adam(SIZES, xs, ys, 3, LR, activation="tanh")["params"]) < 1e-12


# ---------------------------------------------------------------------------- bytes held and bytes sent

@pytest.mark.parametrize("p", [2, 3, 4])
def test_each_ranks_measured_bytes_sit_on_zeros_formulas(p):
    x, y = _data()
    psi = sum(layer_lengths(SIZES))
    held = {}
    for stage in (0, 1, 2, 3):
        out = simulate_sharded(stage, p, SIZES, x, y, 2, LR)
        for r in range(p):
            formula = zero_state_bytes(stage, SIZES, p, r)
            assert out["held_bytes_per_rank"][r] == formula                       # between steps: exactly
            assert formula <= out["peak_bytes_per_rank"][r] <= formula + in_flight_bytes(stage, SIZES)
        held[stage] = np.array(out["held_bytes_per_rank"])
        # Ψ/p rounded per layer: within one number per layer of the textbook formula
        assert np.all(np.abs(held[stage] - zero_bytes_per_rank(stage, psi, p)) <= 32 * len(SIZES))
    assert np.all(held[0] == 32 * psi)                            # data parallelism: everything on every rank
    assert np.all(held[0] > held[1]) and np.all(held[1] > held[2]) and np.all(held[2] > held[3])


def test_the_formulas_are_zeros_and_fall_as_p_grows():
    psi = 1_000_000
    assert zero_bytes_per_rank(0, psi, 64) == 32 * psi
    assert zero_bytes_per_rank(1, psi, 4) == (16 + 16 / 4) * psi
    assert zero_bytes_per_rank(2, psi, 4) == (8 + 24 / 4) * psi
    assert zero_bytes_per_rank(3, psi, 4) == 32 / 4 * psi
    assert zero_bytes_per_rank(1, psi, 1000) > 16 * psi and zero_bytes_per_rank(2, psi, 1000) > 8 * psi
    assert zero_bytes_per_rank(3, 7_500_000_000, 64, 2, 2, 12) == 1.875e9             # the paper's example


@pytest.mark.parametrize("p", [2, 3, 4])
def test_stages_0_to_2_send_an_all_reduces_bytes_and_stage_3_one_and_a_half_times_that(p):
    x, y = _data()
    sent = {s: np.array(simulate_sharded(s, p, SIZES, x, y, 1, LR)["bytes_sent_per_rank"]) for s in (0, 1, 2, 3)}
    all_reduce = sum(ring_allreduce(np.zeros((p, n)), trace=False).sent * 8 for n in layer_lengths(SIZES))
    np.testing.assert_array_equal(sent[0], all_reduce)               # one ring all-reduce per layer
    for s in (1, 2):                                                 # reduce-scatter + all-gather, rank by rank
        assert sent[s].sum() == all_reduce.sum() and np.all(np.abs(sent[s] - all_reduce) <= 8 * len(SIZES))
    assert sent[3].sum() == pytest.approx(1.5 * all_reduce.sum(), abs=8 * p * len(SIZES))
    for s in (0, 1, 2, 3):          # the ring's formula, to less than a chunk per collective
        assert np.all(np.abs(sent[s] - zero_bytes_sent(s, SIZES, p)) <= 8 * 3 * len(SIZES))
    assert zero_bytes_sent(3, SIZES, p) == 1.5 * zero_bytes_sent(0, SIZES, p)
    assert collective_counts(3, SIZES)["all-gather"] == 2 * (len(SIZES) - 1)


def test_the_step_model_turns_communication_bound_as_ranks_are_added_to_a_fixed_batch():
    sizes, kw = [1024] * 5, dict(batch=256, alpha=1e-5, beta=1e-10, flops_per_s=5e10)
    bound = [zero_step_model(3, sizes, p=p, **kw)["bound"] for p in (1, 2, 4, 8, 16, 32)]
    assert bound[0] == "compute" and bound[-1] == "communication"
    assert bound == sorted(bound, key=lambda b: b == "communication")            # and stays so
    m0, m3 = (zero_step_model(s, sizes, p=8, **kw) for s in (0, 3))
    assert m3["communication_s"] == pytest.approx(1.5 * m0["communication_s"]) and m3["compute_s"] == m0["compute_s"]


# ---------------------------------------------------------------------------- the exercise

def _answer(mistake=None):
    from course.parallel.checks import chunk_bounds as bounds_of

    def step(params, grads, m, v, t, lr, reduce_scatter, all_gather):
        p, n = params.shape
        b = bounds_of(n, p)
        if mistake == "gather first":
            out = all_gather([params[r, b[r]:b[r + 1]] for r in range(p)])
            for r, total in enumerate(reduce_scatter(grads)):
                adam_update(out[r, b[r]:b[r + 1]], total / p, m[r], v[r], t, lr)
            return out, m, v
        if mistake == "whole vector":
            full = all_gather([c / p for c in reduce_scatter(grads)])
            ms = [np.zeros(n) for _ in range(p)] if t == 1 else m
            vs = [np.zeros(n) for _ in range(p)] if t == 1 else v
            for r in range(p):
                adam_update(params[r], full[r], ms[r], vs[r], t, lr)
            return params, ms, vs
        mine = []
        for r, total in enumerate(reduce_scatter(grads)):
            w = params[r, b[r]:b[r + 1]]              # a view: an in-place write into the input
            adam_update(w, total if mistake == "sum" else total / p, m[r], v[r], t, lr)
            mine.append(w)
        return all_gather(mine), m, v

    return step


def test_the_stage_2_check_passes_the_answer_and_names_each_typical_mistake(capsys):
    assert course.check.check_zero2_step(_answer())
    assert "right" in capsys.readouterr().out
    for mistake, said in (("sum", "SUM of the ranks' gradients"), ("whole vector", "updated the whole vector"),
                          ("gather first", "gathered before updating")):
        assert not course.check.check_zero2_step(_answer(mistake)), mistake
        assert said in capsys.readouterr().out, mistake


def _no_network(params, grads, m, v, t, lr, reduce_scatter, all_gather):
    return params - lr * grads.mean(0), m, v


def _extra_all_gather(params, grads, m, v, t, lr, reduce_scatter, all_gather):
    all_gather(reduce_scatter(grads))
    return _answer()(params, grads, m, v, t, lr, reduce_scatter, all_gather)


def _nan(*args):
    out, m, v = _answer()(*args)
    out[0, 0] = np.nan
    return out, m, v


@pytest.mark.parametrize("fn, said", [
    (lambda *a: sys.exit(3), "sys.exit(3)"),
    (lambda *a: 1 / 0, "ZeroDivisionError"),
    (lambda *a: (_ for _ in ()).throw(NotImplementedError), "Not done yet"),
    (_no_network, "nothing went through"),
    (_extra_all_gather, "4 collectives"),
    (_nan, "NaN"),
    (lambda *a: (_answer()(*a)[0].astype(np.float32),) + _answer()(*a)[1:], "float32"),
    (lambda *a: (_answer()(*a)[0][0],) + _answer()(*a)[1:], "shape"),
    (lambda *a: (a[7](list(a[0])), a[2], a[3]), "chunk r only"),
    (lambda *a: (_answer()(*a)[0] + 1j,) + _answer()(*a)[1:], "complex"),
    (lambda *a: (a[6]("grads"), a[2], a[3]), "reduce_scatter takes"),
    (lambda *a: "params", "nothing went through"),
])
def test_the_stage_2_check_survives_adversarial_answers(fn, said, capsys):
    assert course.check.check_zero2_step(fn) is False
    assert said in capsys.readouterr().out


def test_the_learners_in_place_writes_never_reach_the_checks_own_arrays(capsys):
    def right_then_writes_into_its_inputs(params, grads, m, v, t, lr, reduce_scatter, all_gather):
        new, m2, v2 = _answer()(params, grads, m, v, t, lr, reduce_scatter, all_gather)
        new, m2, v2 = new.copy(), [a.copy() for a in m2], [a.copy() for a in v2]
        for a in [params, grads] + m + v:
            a[...] = np.nan
        return new, m2, v2
    assert course.check.check_zero2_step(right_then_writes_into_its_inputs)
    assert "right" in capsys.readouterr().out


# ---------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("call, match", [
    (lambda: sharded_train(4, 2, SIZES, *_data(), 2, LR), "stage must be 0"),
    (lambda: sharded_train(True, 2, SIZES, *_data(), 2, LR), "stage must be 0"),
    (lambda: sharded_train(2, 0, SIZES, *_data(), 2, LR), "p must be"),
    (lambda: sharded_train(2, 12, SIZES, *_data(), 2, LR), "batch >= p"),
    (lambda: sharded_train(2, 2, SIZES, *_data(), 2, -0.1), "lr"),
    (lambda: sharded_train(2, 2, SIZES, *_data(), 2, LR, engine="gpu"), "engine"),
    (lambda: sharded_train(2, 2, SIZES, np.ones((4, 3)), np.zeros(4, int), 2, LR), "x must"),
    (lambda: sharded_train(2, 2, SIZES, np.full((4, 5), np.nan), np.zeros(4, int), 2, LR), "finite"),
    (lambda: sharded_train(2, 2, SIZES, np.ones((4, 5)), np.array([0, 1, 2, 3]), 2, LR), "labels 0 .. 2"),
    (lambda: sharded_train(2, 2, SIZES, np.ones((4, 5)), np.zeros(4), 2, LR), "integer labels"),
    (lambda: sharded_train(2, 2, [5], np.ones((4, 5)), np.zeros(4, int), 2, LR), "sizes"),
    (lambda: sharded_train(2, 2, SIZES, *_data(), 2, LR, activation="gelu"), "activation"),
    (lambda: zero_bytes_per_rank(2, 0, 4), "Ψ"),
    (lambda: adam_update(np.zeros(3), np.zeros(5), np.zeros(3), np.zeros(3), 1, 0.1), "one shape"),
    (lambda: adam_update(np.zeros(3, int), np.zeros(3), np.zeros(3), np.zeros(3), 1, 0.1), "floats"),
    (lambda: adam_update(np.zeros(3), np.zeros(3), np.zeros(3), np.zeros(3), 0, 0.1), "t must"),
    (lambda: zero_step_model(1, SIZES, 8, 2, -1.0, 1e-9, 1e9), "alpha"),
    (lambda: zero_state_bytes(1, SIZES, 2, 2), "rank"),
])
def test_bad_input_gets_a_clear_error_before_anything_runs(call, match):
    with pytest.raises(BadInputError, match=match):
        call()


# ---------------------------------------------------------------------------- the app and the figures

@pytest.mark.slow
@pytest.mark.widgets
def test_the_zero_app_follows_ranks_width_stage_and_batch_and_names_the_turn_to_communication():
    from _figure_checks import figure_problems

    from course.parallel.model import AlphaBeta
    from course.parallel.plots import zero_model_figure
    from course.parallel.widgets import zero_app

    app = zero_app()
    assert app.last_error is None and app.image.value[:4] == b"\x89PNG" and "α–β" not in app.html.value
    app = zero_app(AlphaBeta(5e-6, 2e-10, 4, 0.1), 3e10)
    assert app.last_error is None and "communication-bound" in app.html.value and "from p = 64" in app.html.value
    for key, value in (("p", 2), ("width", 128), ("stage", 0), ("batch", 2**14), ("stage", 2)):
        app.controls[key].value = value
        assert app.last_error is None, (key, value)
    assert "compute-bound" in app.html.value and "Stage 2 on p = 2" in app.html.value
    for fig in (zero_model_figure([512] * 4, 256, 1, 8), zero_model_figure([512] * 4, 256, 3, 8,
                                                                             AlphaBeta(5e-6, 2e-10, 4, 0.1), 3e10)):
        assert figure_problems(fig) == [] and "GB" in fig.takeaway


def test_the_measured_zero_figure_draws_every_stage_and_reads_its_takeaway_off_the_numbers():
    from _figure_checks import figure_problems

    from course.parallel.plots import zero_figure
    from course.results import ResultSet

    rs = ResultSet("zero_mpi", params={"cores": 2, "sizes": SIZES, "batch": 12, "n_params": 148})
    for p in (2, 3):
        for stage in (0, 1, 2, 3):
            held, sent = zero_state_bytes(stage, SIZES, p, 0), zero_bytes_sent(stage, SIZES, p)
            for part, t in (("step", 2e-3 * (1 + stage)), ("compute", 1e-3)):
                rs.add(device="cpu", p=p, stage=stage, part=part, median_s=t, q25_s=t, q75_s=t, peak_bytes=held + 10,
                       state_formula=held, bytes_sent=sent, bytes_formula=sent)
    fig = zero_figure(rs)
    assert figure_problems(fig) == []
    assert "sent 1.5× stage 0's bytes" in fig.takeaway
