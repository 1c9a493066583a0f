"""The code of the last turn never silently wrong (issue 49): mixed precision trains the model's own activation,
the online softmax survives a block masked whole, and every bad input found there is refused in words, by name,
before anything is allocated.  Numeric answers are held to independent float64 oracles."""

from __future__ import annotations

import math
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from course.errors import BadInputError, GPUUnavailableError

ROOT = Path(__file__).resolve().parents[1]
NAN = float("nan")


class _Hang(Exception):
    pass


def _within(seconds: int):
    """Turn a hang into a failure: an alarm after ``seconds``."""
    def ring(signum, frame):
        raise _Hang(f"no answer in {seconds} s")

    signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)


@pytest.fixture
def alarm():
    old = signal.getsignal(signal.SIGALRM)
    yield _within
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


# ----------------------------------------------------------------------------- mixed precision

def _mlp_oracle(params, x, y, activation, lr):
    """One full-batch SGD step of an MLP in float64, written out here: (loss, params after the step)."""
    f = {"tanh": np.tanh, "sigmoid": lambda h: 1 / (1 + np.exp(-h)), "relu": lambda h: np.maximum(h, 0)}[activation]
    df = {"tanh": lambda a: 1 - a * a, "sigmoid": lambda a: a * (1 - a), "relu": lambda a: (a > 0) * 1.0}[activation]
    Ws, bs = [np.float64(p) for p in params[0::2]], [np.float64(p) for p in params[1::2]]
    hs = [np.float64(x)]
    for j, (W, b) in enumerate(zip(Ws, bs)):
        z = hs[-1] @ W + b
        hs.append(f(z) if j < len(Ws) - 1 else z)
    z = hs[-1] - hs[-1].max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    loss = -logp[np.arange(len(y)), y].mean()
    g = np.exp(logp)
    g[np.arange(len(y)), y] -= 1
    g /= len(y)
    new = []
    for j in range(len(Ws) - 1, -1, -1):
        new[:0] = [Ws[j] - lr * hs[j].T @ g, bs[j] - lr * g.sum(axis=0)]
        if j:
            g = (g @ Ws[j].T) * df(hs[j])
    return loss, new


@pytest.mark.parametrize("activation", ["tanh", "sigmoid", "relu"])
def test_mixed_precision_trains_the_models_own_activation(activation):
    from course.backprop import MLP
    from course.backprop.mixed import mixed_precision_train

    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((24, 6)), rng.integers(0, 4, 24)
    model = MLP([6, 8, 5, 4], activation=activation, seed=2)
    run = mixed_precision_train(model, x, y, steps=1, lr=0.5, precision="float32", batch=24)
    loss, want = _mlp_oracle(model.parameters(), x.astype(np.float32), y, activation, 0.5)
    assert run["losses"][0] == pytest.approx(loss, rel=1e-5)
    for got, w in zip(run["params"], want):
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("call, match", [
    (lambda mpt, MLP: mpt(MLP([4, 3]), np.ones((0, 4)), np.zeros(0, int), steps=2, lr=0.1), "no examples"),
    (lambda mpt, MLP: mpt(MLP([4, 3]), np.ones((8, 4)), np.zeros(5, int), steps=2, lr=0.1), "labels"),
    (lambda mpt, MLP: mpt(None, np.ones((8, 4)), np.zeros(8, int), steps=2, lr=0.1), "model"),
    (lambda mpt, MLP: mpt(MLP([4, 3]), np.ones((8, 4)), np.zeros(8, int), steps=2, lr=0.1, scaler=0.5), "scaler"),
    (lambda mpt, MLP: mpt(MLP([4, 3]), np.ones((8, 4)) + 1j, np.zeros(8, int), steps=2, lr=0.1), "imaginary"),
    (lambda mpt, MLP: mpt(MLP([4, 3]), np.ones((8, 4)), np.zeros(8, int), steps=2, lr=0.1, loss_weight=NAN),
     "loss_weight"),
])
def test_mixed_precision_train_refuses_bad_data_in_words(call, match):
    from course.backprop import MLP
    from course.backprop.mixed import mixed_precision_train

    with pytest.raises(BadInputError, match=match):
        call(mixed_precision_train, MLP)


@pytest.mark.parametrize("kwargs, name", [({"scale": 0}, "scale"), ({"scale": NAN}, "scale"), ({"scale": -1}, "scale"),
                                          ({"backoff": 1.5}, "backoff"), ({"backoff": 0}, "backoff"),
                                          ({"growth": 0.5}, "growth"), ({"growth_interval": 0}, "growth_interval")])
def test_a_loss_scaler_that_would_learn_nothing_is_refused(kwargs, name):
    from course.backprop.mixed import LossScaler

    with pytest.raises(BadInputError, match=name):
        LossScaler(**kwargs)


def test_underflow_share_follows_float16s_ties_to_even_at_its_edges():
    from course.backprop.mixed import underflow_share

    edges = np.array([2.0**-25, 2.0**-25 * (1 + 2.0**-40), 2.0**-14 - 2.0**-25, (2.0**-14 - 2.0**-25) * (1 - 2.0**-40),
                      2.0**-14, 2.0**-26, 1.0])
    as16 = np.abs(edges.astype(np.float16))                       # numpy rounds float64 to half directly
    for v in edges:
        got = underflow_share(np.array([v]))
        h = float(np.float64(v).astype(np.float16))
        assert got["zero"] == (h == 0), v
        assert got["subnormal"] == (0 < h < 2.0**-14), v
    share = underflow_share(edges)
    assert share["zero"] == pytest.approx(np.mean(as16 == 0))
    assert share["subnormal"] == pytest.approx(np.mean((as16 > 0) & (as16 < 2.0**-14)))


@pytest.mark.parametrize("scale", [NAN, -1.0, 0.0, "8"])
def test_underflow_share_refuses_a_scale_that_is_no_loss_scale(scale):
    from course.backprop.mixed import underflow_share

    with pytest.raises(BadInputError, match="scale"):
        underflow_share(np.ones(3), scale=scale)


def test_compute_dtype_refuses_a_precision_it_does_not_compute_in():
    from course.backprop.mixed import compute_dtype

    assert compute_dtype("float16 scaled") == np.float16
    with pytest.raises(BadInputError, match="precision"):
        compute_dtype("float64")


@pytest.mark.parametrize("call, match", [
    (lambda o: o.update("sgd", np.ones(3), np.ones(3), {}, lr=NAN), "lr"),
    (lambda o: o.update("sgd", np.ones(3), np.ones(3), {}, lr=-0.1), "lr"),
    (lambda o: o.update("lion", np.ones(3), np.ones(3), {}, lr=0.1), "optimizer"),
    (lambda o: o.update("sgd", [1.0, 2.0], np.ones(2), {}, lr=0.1), "array"),
    (lambda o: o.update("adam", np.ones(3), np.ones(3), {}, lr=0.1), "state"),
    (lambda o: o.update("sgd", np.ones(3), np.ones(2), {}, lr=0.1), "shape"),
    (lambda o: o.optimizer_state("adam", [1.0, 2.0]), "array"),
    (lambda o: o.optimizer_state("lion", np.ones(2)), "optimizer"),
    (lambda o: o.adam_step(np.ones(2), np.ones(2), np.zeros(2), np.zeros(2), t=0, lr=0.1), "t must"),
    (lambda o: o.adam_step(np.ones(2), np.ones(2), np.zeros(2), np.zeros(2), t=1, lr=NAN), "lr"),
])
def test_the_optimisers_refuse_what_they_cannot_update_by_name(call, match):
    import course.backprop.optimizers as o

    with pytest.raises(BadInputError, match=match):
        call(o)


@pytest.mark.parametrize("itemsize", [-4, 0, "4", 2.5, True, 10**500])
def test_activation_bytes_refuses_an_itemsize_that_is_no_size(itemsize):
    from course.backprop.footprint import activation_bytes

    with pytest.raises(BadInputError, match="itemsize"):
        activation_bytes([64, 32, 10], 8, itemsize=itemsize)


# ----------------------------------------------------------------------------- attention: softmax and traffic

@pytest.mark.parametrize("x, block", [([-np.inf, -np.inf, 1.0], 2), ([-np.inf, -np.inf, -np.inf, 2.0, 0.5], 3),
                                      ([0.5, -np.inf, -np.inf, -np.inf, -np.inf], 1), ([-np.inf] * 4 + [3.0], 2)])
def test_the_online_softmax_survives_a_block_masked_whole(x, block):
    from course.attention.softmax import online_softmax, online_softmax_steps

    x = np.array(x)
    live = x[np.isfinite(x)]
    m_want, s_want = live.max(), math.fsum(np.exp(live - live.max()))       # the float64 oracle
    m, s = online_softmax(x, block=block)
    assert (float(m), float(s)) == pytest.approx((m_want, s_want))
    last = online_softmax_steps(x, block=block)[-1]
    assert (last["running_max"], last["running_sum"]) == pytest.approx((m_want, s_want))


def test_a_row_masked_whole_gives_the_empty_state():
    from course.attention.softmax import online_softmax, online_softmax_steps

    m, s = online_softmax(np.full((5, 3), -np.inf), block=2)
    assert np.all(np.isneginf(m)) and np.all(s == 0)
    assert all(r["running_max"] == -np.inf and r["running_sum"] == 0.0
               for r in online_softmax_steps(np.full(5, -np.inf), block=2))


@pytest.mark.parametrize("x", [[1.0, np.nan], [np.inf, 1.0]])
def test_scores_that_are_no_scores_are_refused(x):
    from course.attention.softmax import online_softmax

    with pytest.raises(BadInputError, match="NaN or \\+inf"):
        online_softmax(np.array(x))


def test_softmax_combine_refuses_states_of_different_widths():
    from course.attention.softmax import softmax_combine

    with pytest.raises(BadInputError, match="width"):
        softmax_combine(np.zeros((3, 2)), np.zeros((3, 3)))
    with pytest.raises(BadInputError, match="width"):
        softmax_combine(np.zeros((3, 1)), np.zeros((3, 1)))


@pytest.mark.parametrize("causal", [False, True])
def test_tile_traffic_is_its_walk_for_any_tiles_and_answers_at_a_million_keys(causal, alarm):
    from course.attention.forward import tile_schedule
    from course.attention.traffic import tile_traffic

    rng = np.random.default_rng(0)
    for _ in range(300):
        n, n_k, bq, bk = (int(v) for v in rng.integers(1, 70, 4))
        keys = sum(j1 - j0 for _, _, j0, j1 in tile_schedule(n, n_k, bq, bk, causal))   # the walk: the oracle
        got = tile_traffic(n, n_k, 3, 5, bq, bk, causal)
        assert (got["K"], got["V"], got["Q"], got["O"], got["lse"]) == (3 * keys, 5 * keys, 3 * n, 5 * n, n)
    alarm(20)
    big = tile_traffic(2**20, 2**20, 64, 64, 16, 16, causal)
    blocks = 2**20 // 16
    want = blocks * 2**20 if not causal else 16 * blocks * (blocks + 1) // 2        # keys read, summed
    assert big["K"] == 64 * want


def test_count_traffic_refuses_a_walk_too_long_and_names_the_closed_form(alarm):
    from course.attention.traffic import count_traffic, traffic_formula

    alarm(20)
    with pytest.raises(BadInputError, match="traffic_formula"):
        count_traffic("flash, Q outer", 2**20, 64, 256)
    assert traffic_formula("flash, Q outer", 2**20, 64, 256) > 0
    assert count_traffic("flash, Q outer", 4096, 64, 16384)["numbers"] == traffic_formula("flash, Q outer", 4096, 64,
                                                                                            16384)


@pytest.mark.widgets
def test_the_traffic_app_walks_no_more_tiles_than_its_figure_at_its_extremes(monkeypatch):
    import course.attention.traffic as traffic
    from course.attention.plots import WALK_TILES
    from course.attention.widgets import traffic_app

    walked = []
    real = traffic.tile_schedule

    def counting(*args, **kwargs):
        for tile in real(*args, **kwargs):
            walked.append(1)
            if len(walked) > 4 * WALK_TILES:
                raise AssertionError("the app walks every tile pair")
            yield tile

    monkeypatch.setattr(traffic, "tile_schedule", counting)
    traffic._walk.cache_clear()
    app = traffic_app(n=2**16, d=32, sram=12_288, tile=16, timed=False)
    assert app.last_error is None and len(walked) <= 3 * WALK_TILES
    with pytest.raises(BadInputError, match="tile"):
        traffic_app(tile=17)


# ----------------------------------------------------------------------------- ZeRO's check, capture, chunk kernels

def test_check_zero2_step_says_why_when_the_parameters_are_off_by_a_little(capsys):
    import course.check
    from course.parallel.checks import chunk_bounds
    from course.parallel.zero import adam_update

    def off(params, grads, m, v, t, lr, reduce_scatter, all_gather):
        p, n = params.shape
        b, mine = chunk_bounds(n, p), []
        for r, total in enumerate(reduce_scatter(grads)):
            w = params[r, b[r]:b[r + 1]].copy()
            adam_update(w, total / p, m[r], v[r], t, lr)
            mine.append(w + 1e-9)
        return all_gather(mine), m, v

    assert course.check.check_zero2_step(off) is False
    out = capsys.readouterr().out
    assert "✗" in out and "off by up to" in out and "params" in out


def test_matmul_into_multiplies_an_empty_inner_dimension_into_zeros():
    from course.capture import matmul_into

    for a, b in ((np.ones((2, 0)), np.ones((0, 3))), (np.ones((0, 2)), np.ones((2, 3))),
                 (np.ones((4, 2, 0)), np.ones((0, 3)))):
        out = np.full(a.shape[:-1] + b.shape[-1:], 7.0)
        np.testing.assert_array_equal(matmul_into(a, b, out), np.matmul(a, b))


def test_capture_and_the_chunk_kernels_say_no_gpu_on_a_cpu(monkeypatch):
    import course.capture as capture
    from course.bppsa import chunk_kernels as ck

    monkeypatch.setattr(capture, "gpu_available", lambda: False)
    monkeypatch.setenv("COURSE_DISABLE_GPU", "1")
    with pytest.raises(GPUUnavailableError, match="no GPU"):
        capture.capture_graph(lambda: None)
    with pytest.raises(BadInputError, match="fn"):
        capture.capture_graph(None)
    monkeypatch.setattr(sys.modules["course.devices"], "gpu_available", lambda: False)
    d, W, M = np.ones((4, 1, 2)), np.eye(2), np.zeros((2, 1, 2, 2))
    with pytest.raises(GPUUnavailableError, match="GPU"):
        ck.chunk_products(d, W, M, 2)
    with pytest.raises(GPUUnavailableError, match="GPU"):
        ck.chunk_walk(d, W, M, np.ones((1, 2)), np.zeros((4, 1, 2)), 2)
    with pytest.raises(BadInputError, match="shape"):
        ck.chunk_products_reference(d, W, np.zeros((3, 1, 2, 2)), 2)


# ----------------------------------------------------------------------------- timelines

@pytest.mark.parametrize("kwargs, name", [({"launch_s": -1e-6}, "launch_s"), ({"kernel_s": NAN}, "kernel_s"),
                                          ({"sync_s": float("inf")}, "sync_s"), ({"steps": 10**8}, "events"),
                                          ({"kernels": 0}, "kernels")])
def test_a_synthetic_timeline_refuses_times_that_are_no_times_and_sizes_that_never_end(kwargs, name, alarm):
    from course.timeline import synthetic_timeline

    alarm(20)
    with pytest.raises(BadInputError, match=name):
        synthetic_timeline(**kwargs)


def test_an_event_refuses_a_negative_duration_and_the_loader_leaves_it_out():
    from course.timeline import Event, synthetic_timeline, timelines_from_results, timelines_to_results

    with pytest.raises(BadInputError, match="duration_s"):
        Event("gpu", "k", 0.0, -1.0, "kernel")
    rs = timelines_to_results([synthetic_timeline(kernels=2, steps=1)])
    rs.records[0]["duration_s"] = -1.0
    (tl,) = timelines_from_results(rs)
    assert len(tl.events) == len(rs.records) - 1 and "left out" in tl.notes[0]


@pytest.mark.parametrize("width", [1, 2, 5, 60])
def test_a_short_kernel_name_fits_its_width(width):
    from course.timeline import short_kernel_name

    assert len(short_kernel_name("void at::native::vectorized_elementwise_kernel<4, float>(int)", width)) <= width


@pytest.mark.parametrize("width", [0, -3, 2.5])
def test_a_short_kernel_name_refuses_a_width_that_holds_nothing(width):
    from course.timeline import short_kernel_name

    with pytest.raises(BadInputError, match="width"):
        short_kernel_name("kernel", width)


@pytest.mark.parametrize("kwargs, name", [({"first_call": 2.5}, "first_call"), ({"first_call": 0}, "first_call")])
def test_timeline_figure_refuses_a_first_call_that_is_no_call(kwargs, name):
    from course.timeline import synthetic_timeline
    from course.timeline_plots import timeline_figure

    with pytest.raises(BadInputError, match=name):
        timeline_figure(synthetic_timeline(), **kwargs)
    with pytest.raises(BadInputError, match="Timeline"):
        timeline_figure("not a timeline")


# ----------------------------------------------------------------------------- the checks' shared rules

@pytest.mark.parametrize("got", [[1.5, True], [[1.0, 2.0], [np.True_, 3.0]], (0.0, False)])
def test_real_array_refuses_a_bool_inside_a_list(got):
    from course.grading import real_array

    arr, why = real_array("x", got)
    assert arr is None and "True/False" in why


# ----------------------------------------------------------------------------- the tools: words, never a traceback

def _tool(name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("text, match", [("no markers here", "has 0"), ("{end} x {begin}", "end before the begin"),
                                         ("{begin} {begin} {end}", "has 2")])
def test_reference_figures_refuses_a_readme_without_its_block_in_words(text, match):
    rf = _tool("reference_figures")
    with pytest.raises(SystemExit, match=match):
        rf.readme_with_figures(text.format(begin=rf.BEGIN, end=rf.END))


def test_reference_figures_says_when_there_is_no_readme(tmp_path, monkeypatch):
    rf = _tool("reference_figures")
    monkeypatch.setattr(rf, "README", tmp_path / "README.md")
    with pytest.raises(SystemExit, match="cannot read"):
        rf.main([])


@pytest.mark.parametrize("how", ["a file", "below a file", "budget -5", "budget nan"])
def test_gpu_run_refuses_an_out_or_a_budget_it_cannot_use_in_words(how, tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    args = {"a file": [str(a_file)], "below a file": [str(a_file / "below")],
            "budget -5": ["--budget", "-5", str(tmp_path / "out")],
            "budget nan": ["--budget", "nan", str(tmp_path / "out")]}[how]
    run = subprocess.run(["bash", str(ROOT / "tools" / "gpu_run.sh"), "--dry-run", *args], capture_output=True,
                         text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable})
    assert run.returncode == 2 and "Traceback" not in run.stderr and "error:" in run.stderr, run.stderr
    assert a_file.read_text() == "mine" and not (tmp_path / "out" / "summary.md").exists()


@pytest.mark.parametrize("bad", [{"n_params": -10}, {"n_params": 0}, {"n_params": 2.5}, {"memory_bytes": -1},
                                 {"highlight": ("float64", "adam")}])
def test_the_footprint_figure_refuses_a_model_or_memory_that_cannot_be(bad):
    from course.backprop.plots import footprint_figure
    from course.errors import CourseError

    with pytest.raises(CourseError):
        footprint_figure(**({"n_params": 10**6} | bad))
