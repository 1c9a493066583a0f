"""Lessons 00-02 and the spine: bad input gets a course error naming the argument, or the right answer.

Every public function that takes a size or a count is fed the usual mistakes (0, -1, 2.5, True, "8",
None), a huge size (10**12), NaN where a float is wanted, a list instead of an array and an integer
dtype where floats are needed.  A huge size must be refused before anything is allocated or looped
over: those calls run under tracemalloc (numpy reports its allocations to it) with a bound on the peak,
and under an alarm that turns a hang into a failure.  Widget apps are fuzzed elsewhere.
"""

from __future__ import annotations

import importlib
import math
import signal
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course import check
from course.backprop import checks as backprop_checks
from course.backprop.bench import checkpoint_sweep, compare_with_torch, speed_ablation
from course.backprop.checkpointing import checkpointed_backward, kept_pattern
from course.backprop.data import batches
from course.backprop.gradcheck import gradient_check, gradient_errors, layer_gradient_check, loss_gradient_check
from course.backprop.layers import MLP, Linear, mse, softmax_cross_entropy
from course.backprop.timing import step_time_sweep, time_train_step, trace_step
from course.backprop.trace import random_batch
from course.backprop.train import train
from course.backprop.validate import validate_batch, validate_labels
from course.errors import CourseError
from course.hardware.machine import copy_bandwidth, matmul_flops, matmul_sweep, time_matmul
from course.memory_bandwidth import stream_bandwidth, stream_threads
from course.threads import set_threads, thread_limit
from course.timing import benchmark
from course.vectorize.exercises import leaky_relu, leaky_relu_loop, softmax_rows, softmax_rows_loop
from course.vectorize.gpu import blocks_for
from course.vectorize.matmul import (
    matmul,
    matmul_dots,
    matmul_tolerance,
    random_matrices,
)
from course.vectorize.plots import lanes_figure
from course.vectorize.rungs import (
    bytes_moved,
    compiled_relu,
    effective_bandwidth,
    elementwise,
    lane_steps,
    lane_trace,
    lanes_elementwise,
    loop_elementwise,
    random_input,
    threaded_elementwise,
)
from course.vectorize.timing import (
    fastest_call_s,
    ladder,
    matmul_ladder,
    operand_probe,
    relu_bandwidth,
    time_matmul_rung,
    torch_available,
    wrapper_overhead,
)

devices = importlib.import_module("course.devices")   # the module (course.devices is also a function)
limits = importlib.import_module("course.limits")

HUGE = 10**12
PEAK_LIMIT = 100 * 2**20          # bytes a refusal may allocate (tracemalloc's peak)
ALARM_S = 90   # a refusal is immediate; this only turns a hang into a failure (numba may compile first)


def _rng():
    return np.random.default_rng(0)


def _model():
    return MLP([3, 4, 2], dtype="float64", seed=1)


def _xy():
    return np.random.default_rng(0).standard_normal((5, 3)), np.array([0, 1, 1, 0, 1])


def _not_none(v):
    """For arguments where None means "the default": feed the string "none" instead, a bad value."""
    return "none" if v is None else v


def refused(call, name: str) -> CourseError:
    """``call()`` raises a course error whose message names ``name``."""
    with pytest.raises(CourseError) as info:
        call()
    assert name in str(info.value), f"the message does not name {name!r}: {info.value}"
    return info.value


class _Hang(Exception):
    pass


def refused_at_once(call, name: str) -> CourseError:
    """Like :func:`refused`, and nothing big was allocated and nothing hung on the way."""
    def alarm(signum, frame):
        raise _Hang(f"no answer within {ALARM_S} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(ALARM_S)
    tracemalloc.start()
    try:
        err = refused(call, name)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert peak < PEAK_LIMIT, f"{peak / 2**20:.0f} MiB were allocated before the refusal"
    return err


@pytest.fixture
def one_gib_free(monkeypatch):
    """A laptop's memory: require_fits sees 1 GiB free, whatever this machine has."""
    monkeypatch.setattr(limits, "available_memory", lambda device="cpu": 2**30)


# ----------------------------------------------------------------------------- whole numbers

# (label, call taking the value, the argument's name, smallest allowed value, values that are valid)
WHOLE = [
    ("copy_bandwidth nbytes", lambda v: copy_bandwidth(nbytes=v, repeat=1), "nbytes", 4),
    ("copy_bandwidth threads", lambda v: copy_bandwidth(nbytes=4096, repeat=1, threads=_not_none(v)), "threads", 1),
    ("matmul_flops", lambda v: matmul_flops(v), "n", 1),
    ("time_matmul n", lambda v: time_matmul(v, repeat=1), "n", 1),
    ("time_matmul repeat", lambda v: time_matmul(4, repeat=v), "repeat", 1),
    ("matmul_sweep sizes", lambda v: matmul_sweep(sizes=[v], repeat=1), "sizes", 1),
    ("Linear n_in", lambda v: Linear(v, 3), "n_in", 1),
    ("Linear n_out", lambda v: Linear(3, v), "n_out", 1),
    ("MLP sizes", lambda v: MLP([v, 3]), "sizes", 1),
    ("MLP flops_per_step", lambda v: _model().flops_per_step(v), "batch", 1),
    ("gradient_errors max_entries", lambda v: gradient_errors(_model(), *_xy(), max_entries=_not_none(v)),
     "max_entries", 1),
    ("batches n", lambda v: list(batches(v, 2, _rng())), "n", 0),
    ("batches batch_size", lambda v: list(batches(5, v, _rng())), "batch_size", 1),
    ("train epochs", lambda v: train(MLP([64, 10]), None, epochs=v), "epochs", 1),
    ("random_batch", lambda v: random_batch(_model(), v), "batch", 1),
    ("time_train_step batch", lambda v: time_train_step([3, 2], batch=v, repeat=1), "batch", 1),
    ("step_time_sweep batch", lambda v: step_time_sweep(widths=[4], batch=v, repeat=1), "batch", 1),
    ("kept_pattern n_blocks", lambda v: kept_pattern(v, 2), "n_blocks", 1),
    ("kept_pattern every", lambda v: kept_pattern(5, v), "every", 1),
    ("checkpointed_backward every", lambda v: checkpointed_backward(_model(), *_xy(), v), "every", 1),
    ("checkpoint_sweep depth", lambda v: checkpoint_sweep(depth=v, width=4, batch=2, repeat=1), "depth", 1),
    ("checkpoint_sweep width", lambda v: checkpoint_sweep(depth=2, width=v, batch=2, repeat=1), "width", 1),
    ("trace_step repeat", lambda v: trace_step(_model(), *_xy(), repeat=v), "repeat", 1),
    ("speed_ablation rounds", lambda v: speed_ablation((3, 2), batch=2, rounds=v), "rounds", 1),
    ("speed_ablation repeat", lambda v: speed_ablation((3, 2), batch=2, repeat=v), "repeat", 1),
    ("compare_with_torch rounds", lambda v: compare_with_torch((3, 2), batch=2, rounds=v), "rounds", 1),
    ("lane_steps n", lambda v: lane_steps(v, 4), "n", 0),
    ("lane_steps lanes", lambda v: lane_steps(10, v), "lanes", 1),
    ("lane_trace n", lambda v: lane_trace(v, 4), "n", 0),
    ("lane_trace lanes", lambda v: lane_trace(10, v), "lanes", 1),
    ("lanes_elementwise lanes", lambda v: lanes_elementwise("relu", np.ones(4), lanes=v), "lanes", 1),
    ("threaded_elementwise workers", lambda v: threaded_elementwise("relu", np.ones(4), workers=_not_none(v)),
     "workers", 1),
    ("threaded_elementwise chunk", lambda v: threaded_elementwise("relu", np.ones(4), chunk=v), "chunk", 1),
    ("elementwise lanes", lambda v: elementwise("relu", np.ones(8), lanes=v), "lanes", 1),
    ("fastest_call_s calls", lambda v: fastest_call_s(lambda: None, calls=v), "calls", 1),
    ("fastest_call_s per_sample", lambda v: fastest_call_s(lambda: None, per_sample=v), "per_sample", 1),
    ("validate_labels n_classes", lambda v: validate_labels(np.array([0]), 1, v, "cpu"), "n_classes", 1),
    ("validate_batch n_in", lambda v: validate_batch(np.ones((1, 3)), v, "cpu", np.dtype("float64")), "n_in", 1),
    ("elementwise workers", lambda v: elementwise("relu", np.ones(8), rung="threads", workers=_not_none(v)),
     "workers", 1),
    ("compiled_relu threads", lambda v: compiled_relu(np.ones(4), threads=_not_none(v)), "threads", 1),
    ("bytes_moved", lambda v: bytes_moved(v, "float32"), "n", 0),
    ("effective_bandwidth n", lambda v: effective_bandwidth(1.0, v, "float32"), "n", 0),
    ("random_input", lambda v: random_input(v), "n", 0),
    ("operand_probe n", lambda v: operand_probe(n=v, calls=10), "n", 1),
    ("operand_probe calls", lambda v: operand_probe(n=64, calls=v), "calls", 10),
    ("ladder n", lambda v: ladder("relu", n=v, copy=False), "n", 0),
    ("ladder loop_max", lambda v: ladder("relu", n=8, loop_max=v, copy=False), "loop_max", 1),
    ("relu_bandwidth rounds", lambda v: relu_bandwidth(n=64, rounds=v, repeat=1), "rounds", 1),
    ("blocks_for n", lambda v: blocks_for(v), "n", 0),
    ("blocks_for threads_per_block", lambda v: blocks_for(10, v), "threads_per_block", 1),
    ("random_matrices", lambda v: random_matrices(v), "n", 1),
    ("time_matmul_rung", lambda v: time_matmul_rung("blas", v, repeat=1), "n", 1),
    ("matmul_ladder", lambda v: matmul_ladder(n=v, repeat=1), "n", 1),
    ("matmul_tolerance", lambda v: matmul_tolerance("float32", v), "n", 1),
    ("wrapper_overhead n", lambda v: wrapper_overhead(n=v, rounds=1), "n", 1),
    ("wrapper_overhead rounds", lambda v: wrapper_overhead(n=4, rounds=v), "rounds", 1),
    ("lanes_figure n", lambda v: lanes_figure(n=v), "n", 1),
    ("lanes_figure step", lambda v: lanes_figure(n=8, step=v), "step", 0),
    ("benchmark repeat", lambda v: benchmark(lambda: None, repeat=v), "repeat", 1),
    ("benchmark warmup", lambda v: benchmark(lambda: None, warmup=v), "warmup", 0),
    ("set_threads", lambda v: set_threads(_not_none(v)), "threads", 1),
    ("thread_limit", lambda v: thread_limit(_not_none(v)), "threads", 1),
    ("stream_threads", lambda v: stream_threads(_not_none(v)), "threads", 1),
    ("stream_bandwidth n", lambda v: stream_bandwidth(n=v, repeat=1), "n", 1),
]

BAD_WHOLE = [0, -1, 2.5, True, "8", None]


def _bad_cases():
    for label, call, name, lo in WHOLE:
        for v in BAD_WHOLE:
            if isinstance(v, int) and not isinstance(v, bool) and v >= lo:
                continue                                   # 0 is a valid size for some of them
            yield pytest.param(call, name, v, id=f"{label}={v!r}")


@pytest.mark.parametrize("call, name, value", list(_bad_cases()))
def test_a_size_that_is_not_a_whole_number_in_range_is_refused_by_name(call, name, value):
    refused_at_once(lambda: call(value), name)


def test_the_whole_number_checks_in_lessons_00_to_02_are_the_shared_one():
    err = refused(lambda: lane_steps(2.5, 4), "n")
    assert "must be a whole number >= 0, got 2.5" in str(err)


# ----------------------------------------------------------------------------- huge sizes

HUGE_REFUSED = [
    ("MLP 30000x30000", lambda: MLP([30000, 30000]), "30000"),
    ("MLP huge input", lambda: MLP([HUGE, 2]), "weights"),
    ("Linear 30000x30000", lambda: Linear(30000, 30000), "30000"),
    ("random_matrices 20000", lambda: random_matrices(20000), "20000"),
    ("time_matmul_rung blas 20000", lambda: time_matmul_rung("blas", 20000), "20000"),
    ("time_matmul", lambda: time_matmul(10**6), "matri"),
    ("batches", lambda: list(batches(HUGE, 3, _rng())), "examples"),
    ("random_batch", lambda: random_batch(_model(), HUGE), "batch"),
    ("time_train_step", lambda: time_train_step([3, 2], batch=HUGE), "batch"),
    ("checkpoint_sweep width", lambda: checkpoint_sweep(depth=2, width=10**6, batch=2), "weights"),
    ("checkpoint_sweep batch", lambda: checkpoint_sweep(depth=2, width=4, batch=HUGE), "batch"),
    ("lane_trace", lambda: lane_trace(HUGE, 1), "n"),
    ("kept_pattern", lambda: kept_pattern(HUGE, 2), "n_blocks"),
    ("benchmark repeat", lambda: benchmark(lambda: None, repeat=HUGE), "repeat"),
    ("benchmark warmup", lambda: benchmark(lambda: None, warmup=HUGE), "warmup"),
    ("benchmark repeat, infinite budget", lambda: benchmark(lambda: None, repeat=HUGE, budget_s=math.inf), "repeat"),
    ("random_input", lambda: random_input(HUGE), "values"),
    ("copy_bandwidth", lambda: copy_bandwidth(nbytes=HUGE), "arrays"),
    ("stream_bandwidth", lambda: stream_bandwidth(n=HUGE), "arrays"),
    ("threaded_elementwise workers", lambda: threaded_elementwise("relu", np.ones(4), workers=HUGE), "workers"),
    ("wrapper_overhead rounds", lambda: wrapper_overhead(n=4, rounds=HUGE), "rounds"),
    ("relu_bandwidth rounds", lambda: relu_bandwidth(n=64, rounds=HUGE), "rounds"),
    ("operand_probe n", lambda: operand_probe(n=HUGE), "n"),
    ("lanes_figure n", lambda: lanes_figure(n=HUGE), "n"),
    ("set_threads", lambda: set_threads(HUGE), "threads"),
    ("train epochs", lambda: train(MLP([64, 10]), None, epochs=HUGE), "epochs"),
    ("speed_ablation repeat", lambda: speed_ablation((3, 2), batch=2, repeat=HUGE), "repeat"),
    ("trace_step repeat", lambda: trace_step(_model(), *_xy(), repeat=HUGE), "repeat"),
]


@pytest.mark.parametrize("call, name", [pytest.param(c, n, id=label) for label, c, n in HUGE_REFUSED])
def test_a_huge_size_is_refused_before_anything_is_allocated_or_looped_over(one_gib_free, call, name):
    refused_at_once(call, name)


def test_a_huge_size_that_costs_nothing_gets_the_right_answer():
    assert matmul_flops(HUGE) == 2.0 * HUGE ** 3
    assert bytes_moved(HUGE, "float64") == 2 * HUGE * 8
    assert lane_steps(HUGE, 8) == HUGE // 8
    assert blocks_for(HUGE, 256) == -(-HUGE // 256)
    assert effective_bandwidth(2.0, HUGE, "float32") == 2 * HUGE * 4 / 2.0
    assert matmul_tolerance("float32", HUGE) == pytest.approx(8 * 2**-23 * HUGE ** 0.5)
    t = benchmark(lambda: None, repeat=HUGE, budget_s=0.05)      # a budget bounds any repeat
    assert t.stopped_early and 1 <= t.repeat < HUGE


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 5000), lanes=st.integers(1, 64))
def test_lane_counts_match_the_ceiling_for_any_whole_size(n, lanes):
    assert lane_steps(n, lanes) == math.ceil(n / lanes)
    trace = lane_trace(n, lanes)
    assert len(trace) == lane_steps(n, lanes)
    assert sum(stop - start for start, stop in trace) == n


@settings(max_examples=40, deadline=None)
@given(v=st.one_of(st.floats(allow_nan=True), st.text(max_size=3), st.booleans(), st.integers(max_value=-1)))
def test_any_non_whole_or_negative_size_is_refused_by_the_counting_functions(v):
    for call, name in ((lambda: bytes_moved(v, "float32"), "n"), (lambda: lane_steps(v, 4), "n"),
                       (lambda: kept_pattern(v, 2), "n_blocks"), (lambda: matmul_flops(v), "n")):
        refused(call, name)


# ----------------------------------------------------------------------------- NaN and floats

NAN = float("nan")


@pytest.mark.parametrize("call, name", [
    pytest.param(lambda: gradient_check(_model(), *_xy(), eps=0.0), "eps", id="gradient_check eps=0"),
    pytest.param(lambda: gradient_check(_model(), *_xy(), eps=NAN), "eps", id="gradient_check eps=nan"),
    pytest.param(lambda: layer_gradient_check(Linear(2, 2), np.ones((2, 2)), eps=0.0), "eps", id="layer eps=0"),
    pytest.param(lambda: loss_gradient_check(eps=-1e-6), "eps", id="loss eps<0"),
    pytest.param(lambda: benchmark(lambda: None, budget_s=NAN), "budget_s", id="benchmark budget nan"),
    pytest.param(lambda: benchmark(lambda: None, budget_s=True), "budget_s", id="benchmark budget True"),
    pytest.param(lambda: effective_bandwidth(NAN, 8, "float32"), "seconds", id="effective_bandwidth nan"),
    pytest.param(lambda: effective_bandwidth(0.0, 8, "float32"), "seconds", id="effective_bandwidth 0"),
    pytest.param(lambda: limits.require_fits(NAN), "nbytes", id="require_fits nan"),
    pytest.param(lambda: limits.require_fits("8"), "nbytes", id="require_fits str"),
    pytest.param(lambda: limits.require_fits(8, fraction=0.0), "fraction", id="require_fits fraction 0"),
    pytest.param(lambda: _model().train_step(*_xy(), lr=NAN), "lr", id="train_step lr nan"),
])
def test_a_nan_or_zero_where_a_positive_float_is_wanted_is_refused_by_name(call, name):
    refused(call, name)


def test_numpy_scalars_are_accepted_as_a_budget():
    assert benchmark(lambda: None, repeat=2, budget_s=np.float32(1.0)).repeat == 2
    assert benchmark(lambda: None, repeat=2, budget_s=np.int64(1)).repeat == 2
    assert benchmark(lambda: None, repeat=np.int32(2)).repeat == 2


def test_benchmark_passes_the_timed_functions_own_keywords_through_fn_kwargs():
    seen = []

    def fr(x, *, repeat, device):
        seen.append((x, repeat, device))

    t = benchmark(fr, 1, repeat=2, warmup=0, fn_kwargs={"repeat": 3, "device": "mine"})
    assert t.repeat == 2 and seen == [(1, 3, "mine")] * 2
    refused(lambda: benchmark(fr, 1, fn_kwargs=[("repeat", 3)]), "fn_kwargs")
    refused(lambda: benchmark(lambda **k: None, out=1, fn_kwargs={"out": 2}), "fn_kwargs")


# ----------------------------------------------------------------------------- NaN in the data

@settings(max_examples=30, deadline=None)
@given(values=st.lists(st.sampled_from([NAN, math.inf, -math.inf, 0.0, -0.0, 1.5, -2.0]), min_size=1, max_size=12),
       op=st.sampled_from(["relu", "affine_relu", "sigmoid"]))
def test_every_cpu_rung_keeps_nan_as_nan_like_numpy(values, op):
    x = np.array(values)
    want = np.maximum(x, 0.0) if op == "relu" else (np.maximum(2.0 * x - 0.5, 0.0) if op == "affine_relu"
                                                     else None)
    got = {r: elementwise(op, x, rung=r) for r in ("loop", "lanes", "numpy", "threads")}
    assert np.array_equal(loop_elementwise(op, x), got["loop"], equal_nan=True)
    for r, y in got.items():
        assert np.array_equal(np.isnan(y), np.isnan(got["numpy"])), r
        if want is not None:
            assert np.array_equal(y, want, equal_nan=True), r


# ----------------------------------------------------------------------------- lists, dimensions, dtypes

def test_lists_get_the_right_answer_where_the_meaning_is_plain():
    rows = [[1.0, 2.0], [3.0, 5.0]]
    e = np.exp(np.array(rows) - np.max(rows, axis=1, keepdims=True))
    np.testing.assert_allclose(softmax_rows(rows), e / e.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(softmax_rows_loop(rows), e / e.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(leaky_relu([-1.0, 2.0], 0.5), [-0.5, 2.0])
    np.testing.assert_allclose(leaky_relu_loop([-1.0, 2.0], 0.5), [-0.5, 2.0])
    assert float(mse([1.0, 2.0], [1.0, 4.0])[0]) == 2.0
    assert matmul_dots([[1.0, 2.0]], [[3.0], [4.0]]).tolist() == [[11.0]]
    assert matmul([[1.0, 2.0]], [[3.0], [4.0]]).tolist() == [[11.0]]
    assert lane_trace(10, 4) == [(0, 4), (4, 8), (8, 10)]


@pytest.mark.parametrize("call, name", [
    pytest.param(lambda: softmax_rows(np.ones(5)), "2-D", id="softmax_rows 1-D"),
    pytest.param(lambda: softmax_rows_loop(np.ones(5)), "2-D", id="softmax_rows_loop 1-D"),
    pytest.param(lambda: softmax_cross_entropy(np.ones(5), np.array([0])), "logits", id="cross-entropy 1-D"),
    pytest.param(lambda: softmax_cross_entropy([[1.0, 2.0]], np.array([0])), "logits", id="cross-entropy list"),
    pytest.param(lambda: mse(np.zeros((4, 1)), np.zeros(4)), "same shape", id="mse broadcast"),
    pytest.param(lambda: elementwise("relu", [1.0, -1.0]), "array", id="elementwise list"),
    pytest.param(lambda: list(batches(5, 2, seed=None)), "seed", id="batches seed None"),
])
def test_a_wrong_kind_of_array_is_refused_with_what_to_pass(call, name):
    refused(call, name)


@pytest.mark.parametrize("call", [
    pytest.param(lambda: softmax_rows(np.ones((2, 2), dtype=np.int64)), id="softmax_rows"),
    pytest.param(lambda: softmax_rows_loop(np.ones((2, 2), dtype=np.int64)), id="softmax_rows_loop"),
    pytest.param(lambda: leaky_relu(np.array([-1, 2])), id="leaky_relu"),
    pytest.param(lambda: leaky_relu_loop(np.array([-1, 2])), id="leaky_relu_loop"),
    pytest.param(lambda: elementwise("relu", np.array([-1, 2])), id="elementwise"),
    pytest.param(lambda: MLP([3, 2], dtype="int32"), id="MLP"),
    pytest.param(lambda: Linear(3, 2, dtype="int32"), id="Linear"),
    pytest.param(lambda: random_input(8, dtype="int32"), id="random_input"),
    pytest.param(lambda: random_matrices(4, dtype="int32"), id="random_matrices"),
    pytest.param(lambda: time_matmul(4, dtype="int32"), id="time_matmul"),
    pytest.param(lambda: operand_probe(n=64, dtype="int32", calls=10), id="operand_probe"),
])
def test_an_integer_dtype_where_floats_are_needed_is_refused_not_truncated(call):
    err = refused(call, "int")
    assert "float" in str(err)


# ----------------------------------------------------------------------------- devices and optional peers

def test_a_gpu_that_is_not_there_is_refused_and_the_message_says_why():
    err = refused(lambda: devices.normalize_device("gpu:7"), "gpu:7")
    if not devices.gpu_available():
        assert "no GPU answers" in str(err)
    elif len(devices.gpu_info()) <= 7:
        assert "no GPU 7" in str(err)


@pytest.mark.skipif(torch_available(), reason="PyTorch is installed here")
def test_the_torch_rung_without_pytorch_says_to_install_it():
    refused(lambda: time_matmul_rung("torch", 2), "PyTorch")


# ----------------------------------------------------------------------------- exercise checks

@pytest.mark.parametrize("run", [
    pytest.param(lambda f: check.check_softmax_rows(f, speed=False), id="check_softmax_rows"),
    pytest.param(lambda f: check.check_leaky_relu(f, speed=False), id="check_leaky_relu"),
    pytest.param(lambda f: backprop_checks.check_sigmoid_backward(f), id="check_sigmoid_backward"),
    pytest.param(lambda f: backprop_checks.check_linear_weight_grad(f), id="check_linear_weight_grad"),
])
@pytest.mark.parametrize("returned", ["oops", {"a": 1}, None])
def test_a_learner_function_returning_no_array_gets_a_sentence_not_a_traceback(run, returned, capsys):
    assert run(lambda *a, **k: returned) is False
    said = capsys.readouterr().out
    assert "returned" in said or "None" in said
