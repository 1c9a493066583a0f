"""Lesson 06: the alpha-beta model, its fit, and the data-parallel and pipeline pieces in one process."""

from __future__ import annotations

import numpy as np
import pytest

from course.backprop.layers import MLP
from course.errors import BadInputError
from course.parallel import AlphaBeta, average_gradients, bubble_fraction, fit_alpha_beta, model_time
from course.parallel.data_parallel import bucket_plan, make_batches, shard, single_process_gradients
from course.parallel.model import INTERCONNECTS, model_terms
from course.parallel.pipeline import ideal_timeline, measured_bubble, stage_bounds, stage_layers
from course.results import ResultSet


def _synthetic(alpha, beta, noise=0.0):
    rs = ResultSet("allreduce_mpi")
    rng = np.random.default_rng(0)
    for p in (2, 3, 4):
        for nbytes in (2**10, 2**16, 2**22):
            for alg in ("ring (course)", "naive (course)"):
                t = model_time(alg.split()[0], p, nbytes, alpha, beta) * (1 + noise * rng.standard_normal())
                rs.add(device="cpu", algorithm=alg, p=p, nbytes=nbytes, median_s=t)
    return rs


def test_the_fit_recovers_alpha_and_beta_from_model_times():
    fit = fit_alpha_beta(_synthetic(5e-6, 1e-9))
    assert fit.alpha == pytest.approx(5e-6, rel=1e-6) and fit.beta == pytest.approx(1e-9, rel=1e-6)
    assert fit.rel_rms < 1e-9 and isinstance(fit, AlphaBeta)
    assert "α" in str(fit)


def test_the_fit_is_close_with_noise_and_never_negative():
    fit = fit_alpha_beta(_synthetic(5e-6, 1e-9, noise=0.05))
    assert 3e-6 < fit.alpha < 8e-6 and 0.8e-9 < fit.beta < 1.2e-9
    assert fit_alpha_beta(_synthetic(0.0, 1e-9, noise=0.05)).alpha >= 0


def test_the_model_ring_hardly_grows_with_p_for_large_messages_while_naive_grows_linearly():
    ring = [model_time("ring", p, 1e9, 1e-6, 1 / 50e9) for p in (8, 1024)]
    naive = [model_time("naive", p, 1e9, 1e-6, 1 / 50e9) for p in (8, 1024)]
    assert ring[1] / ring[0] < 1.2 and naive[1] / naive[0] > 100
    assert model_terms("ring", 4, 1000) == (6, 1500.0)


def test_data_sheet_figures_are_labelled_with_their_source():
    for ic in INTERCONNECTS:
        assert "data sheet" in ic.label and ic.source and ic.bytes_per_s > 0


def test_too_few_timings_to_fit_is_a_clear_error():
    with pytest.raises(BadInputError, match="at least two"):
        fit_alpha_beta(ResultSet("empty"))


def test_the_weighted_gradient_average_equals_the_whole_batch_gradient():
    sizes = [5, 7, 3]
    x, y = (a[0] for a in make_batches(sizes, 11, 1, 4))
    rows = [shard(11, 3, r) for r in range(3)]
    grads = [single_process_gradients(sizes, x[s], y[s]) for s in rows]
    got = average_gradients(grads, [s.stop - s.start for s in rows])
    for g, w in zip(got, single_process_gradients(sizes, x, y)):
        np.testing.assert_allclose(g, w, atol=1e-14)


def test_a_batch_smaller_than_p_cannot_be_sharded():
    with pytest.raises(BadInputError, match="batch >= p"):
        shard(2, 3, 0)


def test_buckets_cover_every_layer_once_last_layer_first():
    model = MLP([8, 16, 16, 16, 4], dtype="float64")
    plan = bucket_plan(model, 16 * 17 * 8)
    assert [j for b in plan for j in b] == [3, 2, 1, 0] and len(plan) > 1
    with pytest.raises(BadInputError, match="bucket_bytes"):
        bucket_plan(model, 0)


def test_stages_split_the_layers_and_the_bubble_formula():
    assert stage_bounds(6, 4).tolist() == [0, 1, 3, 4, 6]
    model = MLP([4, 4, 4, 4], dtype="float64")
    assert sum(len(stage_layers(model, s, 3)) for s in range(3)) == len(model.layers)
    assert bubble_fraction(1, 8) == 0 and bubble_fraction(4, 4) == pytest.approx(3 / 7)
    with pytest.raises(BadInputError, match="at least one layer"):
        stage_bounds(3, 4)
    with pytest.raises(BadInputError):
        bubble_fraction(0, 4)


@pytest.mark.parametrize("p, m", [(1, 1), (2, 4), (3, 8), (4, 2)])
def test_the_ideal_timeline_has_exactly_the_formula_bubble(p, m):
    assert measured_bubble(ideal_timeline(p, m), p) == pytest.approx(bubble_fraction(p, m))


def test_apply_update_refuses_a_flat_vector_of_another_length():
    from course.parallel.data_parallel import apply_update

    model = MLP([3, 4, 2], dtype="float64", seed=0)
    before = [q.copy() for q in model.parameters()]
    longer = np.ones(model.n_parameters() + 5)         # used to be read in part, the rest silently ignored
    with pytest.raises(BadInputError, match=f"model's {model.n_parameters()} parameters"):
        apply_update(model, longer, 0.1)
    assert all((q == b).all() for q, b in zip(model.parameters(), before))
    apply_update(model, np.ones(model.n_parameters()), 0.1)
    assert np.allclose(model.parameters()[0], before[0] - 0.1)


def test_gather_gradients_refuses_shards_out_of_rank_order():
    from course.parallel.tensor_parallel import gather_gradients, simulate_tensor_parallel

    run = simulate_tensor_parallel([4, 6, 3], np.ones((5, 4)), np.array([0, 1, 2, 0, 1]), p=2)
    for got, want in zip(gather_gradients(run.shards), run.gradients):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(BadInputError, match="in rank order"):      # used to stitch the columns in the wrong order
        gather_gradients(run.shards[::-1])
