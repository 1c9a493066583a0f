"""Bad input to lessons 03-07: a clear course error naming the argument, raised before any allocation.

Every public function of lessons 03-07 that takes a size or a count gets the bad-input classes
(0, -1, 2.5, True, "8", None and 10**12): each must give a :class:`course.errors.CourseError`
whose message names the argument, or (where the value is allowed) the right answer.  A huge size
must be refused before anything big is allocated: each call runs under ``tracemalloc`` (numpy
reports its buffers to it) and may peak at :data:`PEAK_LIMIT`; an alarm turns a hang into a
failure.  Functions that launch MPI are only fed values that must fail before the launch
(``run_mpi`` is replaced by a trap).  Counting functions are checked against an independent
computation (numpy, a traced run, the real sparse matrix), with hypothesis.
"""

from __future__ import annotations

import importlib
import math
import signal
import tracemalloc
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.bppsa import algorithm as bp_algorithm
from course.bppsa import models as bp_models
from course.bppsa import plots as bp_plots
from course.bppsa import sparse as bp_sparse
from course.bppsa import timing as bp_timing
from course.errors import CourseError
from course.parallel import data_parallel as par_dp
from course.parallel import model as par_model
from course.parallel import mpi as par_mpi
from course.parallel import pipeline as par_pipeline
from course.parallel import runs as par_runs
from course.parallel import timing as par_timing
from course.recurrences import kernels as rec_kernels
from course.recurrences import linear as rec_linear
from course.recurrences import plots as rec_plots
from course.recurrences import selective as rec_selective
from course.recurrences import task as rec_task
from course.recurrences import timing as rec_timing
from course.recurrences import work as rec_work
from course.scan import algorithms as scan_alg
from course.scan import blocked as scan_blocked
from course.scan import kernels as scan_kernels
from course.scan import timing as scan_timing
from course.throughput import batch as tp_batch
from course.throughput import fusion as tp_fusion
from course.throughput import latency as tp_latency
from course.throughput import memory as tp_memory
from course.throughput import ops as tp_ops
from course.throughput import roofline as tp_roofline

par_allreduce = importlib.import_module("course.parallel.collectives")

PEAK_LIMIT = 100 * 2**20     # bytes one refused call may allocate
ALARM_S = 90   # a call still running after this long has hung (numba may compile first, on a busy machine)
HUGE = 10**12
NOT_WHOLE = [2.5, True, "8", None, float("nan")]


def _fail_on_alarm(signum, frame):
    raise TimeoutError(f"no answer in {ALARM_S} s: a loop ran before the size check")


def guarded(call: Callable[[], object]) -> tuple[object, BaseException | None, int]:
    """Run ``call`` under tracemalloc and an alarm: (result, exception, peak bytes)."""
    old = signal.signal(signal.SIGALRM, _fail_on_alarm)
    signal.alarm(ALARM_S)
    tracemalloc.start()
    try:
        try:
            return call(), None, tracemalloc.get_traced_memory()[1]
        except TimeoutError:
            raise
        except Exception as exc:  # noqa: BLE001 - classified by the caller
            return None, exc, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def assert_refused(call: Callable[[], object], name: str) -> CourseError:
    """``call`` raises a course error whose message names ``name``, having allocated little."""
    result, exc, peak = guarded(call)
    assert exc is not None, f"expected a course error naming {name!r}, got the result {result!r:.200}"
    assert isinstance(exc, CourseError), f"{type(exc).__name__}: {exc} (not a course error)"
    assert name in str(exc), f"the message does not name {name!r}: {exc}"
    assert peak < PEAK_LIMIT, f"{peak / 2**20:.0f} MiB allocated before refusing"
    return exc


# --------------------------------------------------------------------------- the size arguments
# (id, call taking the value, the name the message must carry, smallest allowed value,
#  what 10**12 must give: "error", or "ok" when a count of that size is fine to compute)

X4 = np.linspace(-1, 1, 4, dtype=np.float32)


def _rnn():
    return bp_models.TanhRNN(hidden_size=3, dtype="float64")


SIZE_ARGS: list[tuple[str, Callable[[object], object], str, int, str]] = [
    # lesson 03
    ("time_op.n", lambda v: tp_ops.time_op("add", v, repeat=1, budget_s=0.05), "n", 1, "error"),
    ("throughput_sweep.sizes", lambda v: tp_ops.throughput_sweep("add", [v], repeat=1), "sizes", 1, "error"),
    ("fusion_chain.steps", lambda v: tp_fusion.fusion_chain(v), "steps", 1, "error"),
    ("unfused.steps", lambda v: tp_fusion.unfused(X4, v), "steps", 1, "error"),
    ("fused.steps", lambda v: tp_fusion.fused(X4, v), "steps", 1, "error"),
    ("blocked.steps", lambda v: tp_fusion.blocked(X4, v), "steps", 1, "error"),
    ("blocked.tile", lambda v: tp_fusion.blocked(X4, 2, tile=v), "tile", 1, "ok"),
    ("fused_kernel_source.steps", lambda v: tp_fusion.fused_kernel_source(v), "steps", 1, "error"),
    ("fusion_compare.n", lambda v: tp_fusion.fusion_compare(n=v, repeat=1, modes=("unfused",)), "n", 1, "error"),
    ("fusion_compare.steps", lambda v: tp_fusion.fusion_compare(n=8, steps=v, repeat=1), "steps", 1, "error"),
    ("fusion_counts.n", lambda v: tp_fusion.fusion_counts(v, 2, 4, "unfused"), "n", 0, "ok"),
    ("fusion_counts.itemsize", lambda v: tp_fusion.fusion_counts(8, 2, v, "fused"), "itemsize", 1, "ok"),
    ("fusion_counts.tile", lambda v: tp_fusion.fusion_counts(8, 2, 4, "blocked", tile=v), "tile", 1, "ok"),
    ("smallest_op_latency.repeat", lambda v: tp_latency.smallest_op_latency(repeat=v, budget_s=0.02), "repeat", 1,
     "ok"),
    ("async_chain.n", lambda v: tp_latency.async_chain(n=v, repeat=1), "n", 1, "error"),
    ("async_chain.chain", lambda v: tp_latency.async_chain(n=8, chain=v, repeat=1), "chain", 1, "error"),
    ("transfer_bandwidth.sizes", lambda v: tp_latency.transfer_bandwidth([v]), "sizes", 4, "gpu"),
    ("random_cycle.nbytes", lambda v: tp_memory.random_cycle(v), "nbytes", 128, "error"),
    ("chase.hops", lambda v: tp_memory.chase(tp_memory.random_cycle(256), v), "hops", 1, "error"),
    ("memory_latency.hops", lambda v: tp_memory.memory_latency(4096, hops=v, repeat=1), "hops", 1, "error"),
    ("memory_latency.nbytes", lambda v: tp_memory.memory_latency(v, hops=64, repeat=1), "nbytes", 128, "error"),
    ("memory_latency_sweep.sizes", lambda v: tp_memory.memory_latency_sweep([v], hops=64, repeat=1), "sizes", 128,
     "error"),
    ("memory_latency_sweep.hops", lambda v: tp_memory.memory_latency_sweep([4096], hops=v), "hops", 1, "error"),
    ("batch_sweep.batch_sizes", lambda v: tp_batch.batch_sweep([v], sizes=(4, 3), repeat=1), "batch_sizes", 1,
     "error"),
    ("batch_sweep.sizes", lambda v: tp_batch.batch_sweep([2], sizes=(v, 3), repeat=1), "sizes", 1, "error"),
    ("batch_sweep.stream_steps", lambda v: tp_batch.batch_sweep([2], sizes=(4, 3), stream_steps=v, repeat=1),
     "stream_steps", 1, "error"),
    ("precision_sweep.sizes", lambda v: tp_batch.precision_sweep([v], dtypes=("float32",), repeat=1), "sizes", 1,
     "error"),
    ("time_torch_matmul.n", lambda v: tp_batch.time_torch_matmul(v, "bfloat16", "cpu", 1, 0.05), "n", 1, "error"),
    ("theoretical_peak.fma_units", lambda v: tp_roofline.theoretical_peak("float32", v), "fma_units", 1,
     "error"),
    ("blelloch_levels.n (at the call)", lambda v: scan_alg.blelloch_levels(v), "n", 0, "ok"),
    ("roofline_point.n", lambda v: tp_roofline.roofline_point("add", v, repeat=1, budget_s=0.05), "n", 1, "error"),
    # lesson 04
    ("operation_counts.n", lambda v: scan_alg.operation_counts("blelloch", v), "n", 0, "ok"),
    ("blelloch_levels.n", lambda v: list(scan_alg.blelloch_levels(v)), "n", 0, "ok"),
    ("block_bounds.n", lambda v: scan_blocked.block_bounds(v, 2), "n", 0, "ok"),
    ("block_bounds.blocks", lambda v: scan_blocked.block_bounds(10, v), "blocks", 1, "error"),
    ("blocked_scan.blocks", lambda v: scan_blocked.blocked_scan(np.arange(8.0), blocks=v), "blocks", 1, "error"),
    ("blocked_scan.tile", lambda v: scan_blocked.blocked_scan(np.arange(8.0), tile=v), "tile", 1, "ok"),
    ("scan_threads.threads", lambda v: scan_blocked.scan_threads(v), "threads", 1, "ok"),
    ("make_input.n", lambda v: scan_timing.make_input(v), "n", 0, "error"),
    ("time_scan.n", lambda v: scan_timing.time_scan("blelloch", v, repeat=1, budget_s=0.05), "n", 0, "error"),
    ("shared_memory_bytes.threads", lambda v: scan_kernels.shared_memory_bytes("float32", v, 8), "threads", 1,
     "error"),
    ("shared_memory_bytes.items", lambda v: scan_kernels.shared_memory_bytes("float32", 32, v), "items", 1, "ok"),
    ("kernel_bank_conflicts.threads", lambda v: scan_kernels.kernel_bank_conflicts(v, 2), "threads", 1, "error"),
    ("kernel_bank_conflicts.items", lambda v: scan_kernels.kernel_bank_conflicts(32, v), "items", 1, "error"),
    # lesson 05
    ("work_counts.T", lambda v: bp_algorithm.work_counts(v, 4, 2), "T", 1, "ok"),
    ("work_counts.itemsize", lambda v: bp_algorithm.work_counts(8, 4, 2, v), "itemsize", 1, "ok"),
    ("scan_memory.n", lambda v: bp_algorithm.scan_memory(8, v), "n", 1, "ok"),
    ("scan_memory.batch", lambda v: bp_algorithm.scan_memory(8, 4, v), "batch", 1, "ok"),
    ("TanhRNN.hidden_size", lambda v: bp_models.TanhRNN(hidden_size=v), "hidden_size", 1, "error"),
    ("TanhRNN.input_size", lambda v: bp_models.TanhRNN(input_size=v), "input_size", 1, "error"),
    ("TanhRNN.n_classes", lambda v: bp_models.TanhRNN(n_classes=v), "n_classes", 2, "error"),
    ("TanhRNN.example_data.T", lambda v: _rnn().example_data(v), "T", 1, "error"),
    ("TanhRNN.example_data.batch", lambda v: _rnn().example_data(3, v), "batch", 1, "error"),
    ("MLPChain.width", lambda v: bp_models.MLPChain(width=v, depth=2), "width", 1, "error"),
    ("MLPChain.depth", lambda v: bp_models.MLPChain(width=4, depth=v), "depth", 1, "error"),
    ("MLPChain.example_data.batch", lambda v: bp_models.MLPChain(width=4, depth=2).example_data(v), "batch", 1,
     "error"),
    ("finite_difference_check.n_checks",
     lambda v: bp_models.finite_difference_check(_rnn(), *_rnn().example_data(2, 2), n_checks=v), "n_checks", 1,
     "ok"),
    ("random_chain.T", lambda v: bp_timing.random_chain(v, 2), "T", 1, "error"),
    ("random_chain.n", lambda v: bp_timing.random_chain(4, v), "n", 1, "error"),
    ("regime_sweep.repeat", lambda v: bp_timing.regime_sweep(ns=(2,), Ts=(4,), repeat=v), "repeat", 1, "ok"),
    ("regime_sweep.ns", lambda v: bp_timing.regime_sweep(ns=(v,), Ts=(4,), repeat=1), "ns", 1, "ok"),
    ("conv2d_jacobian.H", lambda v: bp_sparse.conv2d_jacobian(np.ones((2, 2, 3, 3)), v, 4), "H", 1, "error"),
    ("conv2d_jacobian.W", lambda v: bp_sparse.conv2d_jacobian(np.ones((2, 2, 3, 3)), 4, v), "W", 1, "error"),
    ("conv2d.padding", lambda v: bp_sparse.conv2d(np.ones((2, 4, 4)), np.ones((3, 2, 3, 3)), padding=v), "padding",
     0, "error"),
    ("conv2d_jacobian.stride", lambda v: bp_sparse.conv2d_jacobian(np.ones((2, 2, 3, 3)), 4, 4, stride=v),
     "stride", 1, "ok"),
    ("dense_bytes.shape", lambda v: bp_sparse.dense_bytes((v, 3)), "shape", 0, "ok"),
    ("dense_bytes.itemsize", lambda v: bp_sparse.dense_bytes((3, 3), v), "itemsize", 1, "ok"),
    ("conv_jacobian_memory.H", lambda v: bp_sparse.conv_jacobian_memory(v, 8, 3, 4), "H", 1, "ok"),
    ("conv_jacobian_memory.k", lambda v: bp_sparse.conv_jacobian_memory(8, 8, 3, 4, k=v), "k", 1, "error"),
    ("conv_jacobian_memory.stride", lambda v: bp_sparse.conv_jacobian_memory(8, 8, 3, 4, stride=v), "stride", 1,
     "ok"),
    ("chain_fill_in.depth", lambda v: bp_sparse.chain_fill_in(v, size=4), "depth", 1, "error"),
    ("chain_fill_in.size", lambda v: bp_sparse.chain_fill_in(2, size=v), "size", 2, "error"),
    ("chain_fill_in.channels", lambda v: bp_sparse.chain_fill_in(2, size=4, channels=v), "channels", 1, "error"),
    ("rnn_timings.T", lambda v: bp_timing.rnn_timings(v, 3, 2, repeat=1), "T", 1, "error"),
    ("rnn_timings.hidden_size", lambda v: bp_timing.rnn_timings(4, v, 2, repeat=1), "hidden_size", 1, "error"),
    ("rnn_timings.batch", lambda v: bp_timing.rnn_timings(4, 3, v, repeat=1), "batch", 1, "error"),
    ("rnn_timings.repeat", lambda v: bp_timing.rnn_timings(4, 3, 2, repeat=v, budget_s=0.05), "repeat", 1, "ok"),
    ("rnn_timings.warmup", lambda v: bp_timing.rnn_timings(4, 3, 2, repeat=1, warmup=v), "warmup", 0, "error"),
    ("rnn_sweep.Ts", lambda v: bp_timing.rnn_sweep((v,), 3, 2, repeat=1, include_torch=False), "Ts", 1, "ok"),
    ("torch_rnn_timings.T", lambda v: bp_timing.torch_rnn_timings(v, 3, 2), "T", 1, "error"),
    ("symbolic_scan.T", lambda v: bp_plots.symbolic_scan(v), "T", 1, "error"),
    # lesson 06
    ("validate_workers.p", lambda v: par_allreduce.validate_workers(v), "p", 1, "ok"),
    ("chunk_bounds.n", lambda v: par_allreduce.chunk_bounds(v, 3), "N", 1, "ok"),
    ("chunk_bounds.p", lambda v: par_allreduce.chunk_bounds(10, v), "p", 1, "error"),
    ("ring_chunks.p", lambda v: par_allreduce.ring_chunks(0, 0, v), "p", 1, "ok"),
    ("ring_chunks.step", lambda v: par_allreduce.ring_chunks(0, v, 4), "step", 0, "error"),
    ("ring_chunks.rank", lambda v: par_allreduce.ring_chunks(v, 0, 4), "rank", 0, "error"),
    ("bytes_per_worker.p", lambda v: par_allreduce.bytes_per_worker("ring", 100, v), "p", 1, "ok"),
    ("bytes_per_worker.itemsize", lambda v: par_allreduce.bytes_per_worker("ring", 100, 4, v), "itemsize", 1, "ok"),
    ("message_counts.p", lambda v: par_allreduce.message_counts("tree", v), "p", 1, "ok"),
    ("make_batches.batch", lambda v: par_dp.make_batches([4, 3], v, 2), "batch", 1, "error"),
    ("make_batches.steps", lambda v: par_dp.make_batches([4, 3], 2, v), "steps", 1, "error"),
    ("shard.batch", lambda v: par_dp.shard(v, 2, 0), "batch", 1, "ok"),
    ("shard.rank", lambda v: par_dp.shard(10, 2, v), "rank", 0, "error"),
    ("model_terms.p", lambda v: par_model.model_terms("ring", v, 1000), "p", 1, "ok"),
    ("stage_bounds.n_linear", lambda v: par_pipeline.stage_bounds(v, 2), "n_linear", 1, "ok"),
    ("bubble_fraction.m", lambda v: par_pipeline.bubble_fraction(2, v), "m", 1, "ok"),
    ("ideal_timeline.p", lambda v: par_pipeline.ideal_timeline(v, 2), "p", 1, "error"),
    ("ideal_timeline.m", lambda v: par_pipeline.ideal_timeline(2, v), "m", 1, "error"),
    # lesson 07
    ("combine_flops.n", lambda v: rec_work.combine_flops(v), "n", 1, "ok"),
    ("rec_work_counts.T", lambda v: rec_work.work_counts(v, 4), "T", 1, "ok"),
    ("rec_work_counts.itemsize", lambda v: rec_work.work_counts(8, 4, itemsize=v), "itemsize", 1, "ok"),
    ("recurrence_input.T", lambda v: rec_timing.recurrence_input(v, 4), "T", 1, "error"),
    ("recurrence_input.n", lambda v: rec_timing.recurrence_input(4, v, "dense"), "n", 1, "error"),
    ("time_recurrence.T", lambda v: rec_timing.time_recurrence("diagonal", "scan", v, 4, repeat=1, budget_s=0.05),
     "T", 1, "error"),
    ("recurrence_sweep.ns", lambda v: rec_timing.recurrence_sweep([8], [v], kinds=["diagonal"], methods=["scan"],
                                                                   repeat=1), "ns", 1, "ok"),
    ("init_params.n", lambda v: rec_selective.init_params(2, v), "n", 1, "error"),
    ("init_params.d_in", lambda v: rec_selective.init_params(v, 4), "d_in", 1, "error"),
    ("adding_problem.T", lambda v: rec_task.adding_problem(v, 4), "T", 2, "error"),
    ("adding_problem.batch", lambda v: rec_task.adding_problem(8, v), "batch", 1, "error"),
    ("train_adding.steps", lambda v: rec_task.train_adding(T=4, n=2, steps=v, batch=2), "steps", 1, "error"),
    ("chunk_plan.chunk", lambda v: rec_kernels.chunk_plan(64, 4, chunk=v), "chunk", 1, "ok"),
    ("chunk_plan.threads", lambda v: rec_kernels.chunk_plan(64, 4, threads=v), "threads", 1, "error"),
    ("closed_form_figure.T", lambda v: rec_plots.closed_form_figure(v), "T", 1, "error"),
]

NONE_MEANS_DEFAULT = {"blocked_scan.blocks", "blocked_scan.tile", "scan_threads.threads", "theoretical_peak.fma_units"}
_BAD_CASES = [(case_id, call, name, lo, huge, bad) for case_id, call, name, lo, huge in SIZE_ARGS
              for bad in [lo - 1, -1, *NOT_WHOLE] if not (isinstance(bad, int) and bad >= lo)
              and not (bad is None and case_id in NONE_MEANS_DEFAULT)]
_BAD_CASES = list({(c[0], repr(c[5])): c for c in _BAD_CASES}.values())   # lo - 1 may be -1


@pytest.mark.parametrize("case_id, call, name, lo, huge, bad", _BAD_CASES,
                         ids=[f"{c[0]}={c[5]!r}" for c in _BAD_CASES])
def test_a_size_that_is_not_a_whole_number_in_range_is_refused_naming_its_argument(case_id, call, name, lo, huge,
                                                                                  bad):
    assert_refused(lambda: call(bad), name)


_HUGE_CASES = [c for c in SIZE_ARGS if c[4] != "gpu"]


@pytest.mark.slow
@pytest.mark.parametrize("case_id, call, name, lo, huge", _HUGE_CASES, ids=[c[0] for c in _HUGE_CASES])
def test_a_huge_size_is_refused_before_anything_is_allocated_or_looped_over(case_id, call, name, lo, huge):
    result, exc, peak = guarded(lambda: call(HUGE))
    assert peak < PEAK_LIMIT, f"{peak / 2**20:.0f} MiB allocated for {name} = 10**12"
    if huge == "error":
        assert isinstance(exc, CourseError), f"{name} = 10**12 gave {exc!r} / {result!r:.100}"
    else:   # a count of that size is fine to compute, or refused clearly
        assert exc is None or isinstance(exc, CourseError), repr(exc)


def test_transfer_sizes_are_checked_before_asking_for_a_gpu():
    assert_refused(lambda: tp_latency.transfer_bandwidth([2.5]), "sizes")
    assert_refused(lambda: tp_latency.transfer_bandwidth([1024], memory=("swap",)), "memory")


# --------------------------------------------------------------------------- MPI: refused before the launch

@pytest.fixture
def no_launch(monkeypatch):
    def trap(*args, **kwargs):
        raise AssertionError("an MPI job was launched for arguments that should have been refused")
    monkeypatch.setattr(par_runs, "run_mpi", trap)
    monkeypatch.setattr(par_timing, "run_mpi", trap)
    monkeypatch.setattr(par_mpi.subprocess, "Popen", trap)


MPI_CALLS = [
    ("run_mpi.p", lambda v: par_mpi.run_mpi("ring_check", v, {}), "p"),
    ("ring_check.p", lambda v: par_runs.ring_check(v), "p"),
    ("ring_check.lengths", lambda v: par_runs.ring_check(2, [v]), "vector length"),
    ("allreduce_sweep.ps", lambda v: par_timing.allreduce_sweep([v]), "p"),
    ("allreduce_sweep.nbytes", lambda v: par_timing.allreduce_sweep([2], [v]), "nbytes"),
    ("allreduce_sweep.repeat", lambda v: par_timing.allreduce_sweep([2], [64], repeat=v), "repeat"),
    ("train_data_parallel.p", lambda v: par_runs.train_data_parallel(v), "p"),
    ("train_data_parallel.batch", lambda v: par_runs.train_data_parallel(2, batch=v), "batch"),
    ("train_data_parallel.steps", lambda v: par_runs.train_data_parallel(2, steps=v), "steps"),
    ("data_parallel_timing.batch", lambda v: par_timing.data_parallel_timing([2], batch=v), "batch"),
    ("data_parallel_timing.bucket_bytes", lambda v: par_timing.data_parallel_timing([2], bucket_bytes=v),
     "bucket_bytes"),
    ("pipeline_runs.ms", lambda v: par_timing.pipeline_runs(2, ms=[v]), "ms"),
    ("pipeline_runs.batch", lambda v: par_timing.pipeline_runs(2, ms=[1], batch=v), "batch"),
]
_MPI_CASES = [(i, c, n, bad) for i, c, n in MPI_CALLS for bad in [0, -1, *NOT_WHOLE]]


@pytest.mark.parametrize("case_id, call, name, bad", _MPI_CASES, ids=[f"{c[0]}={c[3]!r}" for c in _MPI_CASES])
def test_mpi_runs_refuse_bad_sizes_before_launching(no_launch, case_id, call, name, bad):
    assert_refused(lambda: call(bad), name)


_MPI_HUGE = [c for c in MPI_CALLS[1:] if c[0] != "data_parallel_timing.bucket_bytes"]   # one big bucket is fine


@pytest.mark.parametrize("case_id, call, name", _MPI_HUGE, ids=[c[0] for c in _MPI_HUGE])
def test_mpi_runs_refuse_a_huge_size_before_launching(no_launch, case_id, call, name):
    result, exc, peak = guarded(lambda: call(HUGE))
    assert isinstance(exc, CourseError), repr(exc)
    assert peak < PEAK_LIMIT


@pytest.mark.parametrize("timeout_s", [0, -1.0, float("nan"), float("inf"), "60", True])
def test_run_mpi_refuses_a_timeout_that_is_not_a_positive_number_of_seconds(no_launch, timeout_s):
    assert_refused(lambda: par_mpi.run_mpi("ring_check", 2, {}, timeout_s=timeout_s), "timeout_s")


# --------------------------------------------------------------------------- NaN where a number is expected

NUMBER_ARGS = [
    ("littles_law", lambda v: tp_batch.littles_law(v, 0.1), "throughput"),
    ("bytes_in_flight", lambda v: tp_memory.bytes_in_flight(1e9, v), "latency"),
    ("batch_for_fraction.fraction", lambda v: tp_batch.batch_for_fraction([1, 2], [1.0, 2.0], v), "fraction"),
    ("finite_difference_check.eps",
     lambda v: bp_models.finite_difference_check(_rnn(), *_rnn().example_data(2, 2), eps=v), "eps"),
    ("model_terms.nbytes", lambda v: par_model.model_terms("ring", 4, v), "nbytes"),
    ("ideal_timeline.forward", lambda v: par_pipeline.ideal_timeline(2, 2, forward=v), "forward"),
    ("closed_form_figure.a", lambda v: rec_plots.closed_form_figure(8, v), "a"),
]


@pytest.mark.parametrize("case_id, call, name", NUMBER_ARGS, ids=[c[0] for c in NUMBER_ARGS])
@pytest.mark.parametrize("bad", [float("nan"), "0.5", None])
def test_a_number_argument_refuses_nan_strings_and_none(case_id, call, name, bad):
    assert_refused(lambda: call(bad), name)


def test_batch_for_fraction_refuses_nan_throughputs():
    assert_refused(lambda: tp_batch.batch_for_fraction([1, 2, 4], [1.0, float("nan"), 3.0]), "finite")


# --------------------------------------------------------------------------- the silent wrong answers

def test_a_wrong_identity_is_refused_instead_of_spoiling_every_prefix():
    x = np.array([3.0, 1.0, 7.0, 0.0, 4.0])
    for exclusive in (True, False):
        assert_refused(lambda e=exclusive: scan_alg.blelloch_scan(x, identity=1.0, exclusive=e), "identity")
    # with the true identity given explicitly the answer is numpy's
    np.testing.assert_array_equal(scan_alg.blelloch_scan(x, identity=0.0, exclusive=False), np.cumsum(x))


@pytest.mark.parametrize("scan", [scan_alg.sequential_scan, scan_alg.hillis_steele_scan, scan_alg.blelloch_scan])
def test_a_scalar_identity_for_a_matrix_product_is_refused_not_turned_into_all_ones(scan):
    m = np.random.default_rng(0).standard_normal((5, 2, 2))
    exc = assert_refused(lambda: scan(m, op=scan_alg.matmul, identity=1.0, exclusive=True), "identity")
    assert "np.eye(2)" in str(exc)
    got = scan(m, op=scan_alg.matmul, identity=np.eye(2), exclusive=False)
    want, acc = [], np.eye(2)
    for a in m:                                  # the oracle: a plain loop of matrix products
        acc = acc @ a
        want.append(acc)
    np.testing.assert_allclose(got, np.array(want), rtol=1e-12)


@pytest.mark.parametrize("scan", [scan_alg.sequential_scan, scan_alg.hillis_steele_scan, scan_alg.blelloch_scan])
@pytest.mark.parametrize("returns", [None, "a list", "a wrong shape"])
def test_an_op_that_returns_no_stack_is_refused_instead_of_giving_nans(scan, returns):
    def op(a, b):
        if returns == "a list":
            return (a + b).tolist()
        return None if returns is None else (a + b)[None]
    assert_refused(lambda: scan(np.arange(6.0), op=op, identity=0.0), "op must return")


def test_an_exclusive_hillis_steele_scan_of_python_objects_starts_with_the_identity_itself():
    out = scan_alg.hillis_steele_scan(np.array([1, 2, 3], dtype=object), exclusive=True)
    assert [type(v) for v in out] == [int, int, int] and out.tolist() == [0, 1, 3]


def test_backprop_scan_and_the_sequential_one_refuse_an_empty_state_alike():
    J, g = np.zeros((3, 0, 0)), np.zeros(0)
    assert_refused(lambda: bp_algorithm.backprop_scan(J, g), "state size")
    assert_refused(lambda: bp_algorithm.backprop_sequential(J, g), "state size")


def test_rnn_timings_refuses_zero_rounds_instead_of_returning_nan():
    for repeat in (0, -1):
        assert_refused(lambda r=repeat: bp_timing.rnn_timings(4, 3, 2, repeat=r), "repeat")


def test_finite_differences_refuse_to_check_nothing():
    assert_refused(lambda: bp_models.finite_difference_check(_rnn(), *_rnn().example_data(2, 2), n_checks=0),
                   "n_checks")


def test_finite_differences_take_a_list_input_and_still_find_the_gradient_right():
    rnn = _rnn()
    x, y = rnn.example_data(3, 2)
    errs = bp_models.finite_difference_check(rnn, x.tolist(), y, method="scan", n_checks=3)
    assert max(errs.values()) < 1e-6


@pytest.mark.parametrize("n", [-5, 2.5, True, "8"])
def test_counts_refuse_sizes_that_would_give_negative_or_fractional_work(n):
    assert_refused(lambda: scan_alg.operation_counts("sequential", n), "n")
    assert_refused(lambda: tp_fusion.fusion_counts(n, 2, 4, "unfused"), "n")
    assert_refused(lambda: bp_sparse.dense_bytes((n, 3)), "shape")


# --------------------------------------------------------------------------- integer dtypes, lists

@pytest.mark.parametrize("call, name", [
    (lambda: tp_fusion.fusion_compare(n=64, dtype="int32", repeat=1), "dtype"),
    (lambda: tp_latency.async_chain(n=64, dtype="int32", repeat=1), "dtype"),
    (lambda: tp_fusion.blocked(np.arange(8, dtype=np.int32), 2), "float"),
    (lambda: tp_fusion.fused(np.arange(8, dtype=np.int32), 2), "float"),
    (lambda: bp_models.TanhRNN(dtype="int32"), "floating"),
    (lambda: bp_models.MLPChain(dtype="int32"), "floating"),
    (lambda: bp_algorithm.backprop_scan(np.ones((2, 2, 2), dtype=int), np.ones(2, dtype=int)), "floating"),
], ids=["fusion_compare", "async_chain", "blocked", "fused", "TanhRNN", "MLPChain", "backprop_scan"])
def test_an_integer_dtype_where_floats_are_needed_is_refused(call, name):
    assert_refused(call, name)


def test_the_fusion_chain_takes_a_list_and_agrees_with_numpy_step_by_step():
    x = [-1.5, -0.25, 0.0, 0.75, 2.0]
    want = np.asarray(x, dtype=np.float64)
    for _, f, _ in tp_fusion.FUSION_STEPS[:3]:
        want = f(np, want)
    for run in (tp_fusion.unfused, tp_fusion.fused, tp_fusion.blocked):
        np.testing.assert_allclose(run(x, 3), want, rtol=1e-12)


def test_the_scans_take_lists_and_agree_with_numpy():
    x = [4, -1, 3, 0, 2, 7]
    for scan in (scan_alg.sequential_scan, scan_alg.hillis_steele_scan, scan_alg.blelloch_scan):
        np.testing.assert_array_equal(scan(x, exclusive=False), np.cumsum(x))
    np.testing.assert_array_equal(scan_blocked.blocked_scan(np.array(x, dtype=np.float64)), np.cumsum(x))


def test_backprop_and_the_recurrences_take_lists_and_agree_with_a_loop():
    rng = np.random.default_rng(3)
    J, g = rng.standard_normal((4, 3, 3)), rng.standard_normal(3)
    G, want = bp_algorithm.backprop_scan(J.tolist(), g.tolist()), [g]
    for t in range(3, -1, -1):
        want.insert(0, J[t].T @ want[0])
    np.testing.assert_allclose(G, np.array(want), rtol=1e-10)
    a, b = rng.uniform(0.5, 1, (6, 2)), rng.standard_normal((6, 2))
    h, loop = np.zeros(2), []
    for t in range(6):
        h = a[t] * h + b[t]
        loop.append(h)
    np.testing.assert_allclose(rec_linear.recurrence_scan(a.tolist(), b.tolist()), np.array(loop), rtol=1e-10)


# --------------------------------------------------------------------------- counts against independent computations

@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 70), algorithm=st.sampled_from(["hillis-steele", "blelloch"]))
def test_operation_counts_match_a_traced_run(n, algorithm):
    counts = scan_alg.operation_counts(algorithm, n)
    scan = scan_alg.blelloch_scan if algorithm == "blelloch" else scan_alg.hillis_steele_scan
    if n == 0:
        assert counts == {"work": 0, "steps": 0}
        return
    _, tr = scan(np.ones(n), trace=True)
    assert (counts["work"], counts["steps"]) == (tr.work, tr.steps)


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(0, 50), cols=st.integers(0, 50), dtype=st.sampled_from(["float16", "float32", "float64"]))
def test_dense_bytes_match_numpy(rows, cols, dtype):
    assert bp_sparse.dense_bytes((rows, cols), np.dtype(dtype).itemsize) == np.zeros((rows, cols), dtype).nbytes


@settings(max_examples=30, deadline=None)
@given(H=st.integers(1, 9), W=st.integers(1, 9), k=st.sampled_from([1, 3, 5]), padding=st.integers(0, 2),
       stride=st.integers(1, 3))
def test_the_counted_conv_jacobian_matches_the_built_one(H, W, k, padding, stride):
    if (H + 2 * padding - k) // stride + 1 < 1 or (W + 2 * padding - k) // stride + 1 < 1:
        assert_refused(lambda: bp_sparse.conv_jacobian_memory(H, W, 2, 3, k, padding, stride), "kernel")
        return
    w = np.random.default_rng(0).uniform(1, 2, (3, 2, k, k))      # no zero weights: nnz counts every tap
    m = bp_sparse.conv2d_jacobian_t(w, H, W, padding, stride)
    c = bp_sparse.conv_jacobian_memory(H, W, 2, 3, k, padding, stride)
    assert (c["shape"], c["nnz"]) == (m.shape, m.nnz)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 200), blocks=st.integers(1, 20))
def test_block_bounds_match_numpy_array_split(n, blocks):
    sizes = [b - a for a, b in scan_blocked.block_bounds(n, blocks)]
    assert sorted(sizes) == sorted(len(s) for s in np.array_split(np.arange(n), blocks))
    assert sum(sizes) == n


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 60), p=st.integers(2, 6))
def test_ring_bytes_per_worker_match_the_simulation(n, p):
    run = par_allreduce.ring_allreduce(np.ones((p, n)))
    formula = par_allreduce.bytes_per_worker("ring", n, p, 8)
    assert abs(run.bytes_sent().max() - formula) < 8 * math.ceil(n / p) + 1e-9


@settings(max_examples=30, deadline=None)
@given(p=st.integers(1, 6), m=st.integers(1, 8))
def test_bubble_fraction_matches_the_ideal_timeline(p, m):
    events = par_pipeline.ideal_timeline(p, m, forward=1.0, backward=1.0)
    assert par_pipeline.measured_bubble(events, p) == pytest.approx(par_pipeline.bubble_fraction(p, m))


@settings(max_examples=30, deadline=None)
@given(steps=st.integers(1, tp_fusion.MAX_STEPS), n=st.integers(0, 300), tile=st.integers(1, 64))
def test_fusion_kernel_counts_match_the_calls_a_run_makes(steps, n, tile):
    calls = []
    original = tp_fusion.FUSION_STEPS

    def counted(f):
        def call(*args, **kwargs):
            calls.append(1)
            return f(*args, **kwargs)
        return call
    tp_fusion.FUSION_STEPS = [(name, counted(f), expr) for name, f, expr in original]
    try:
        x = np.linspace(-1, 1, n, dtype=np.float32)
        for mode, run in (("unfused", lambda: tp_fusion.unfused(x, steps)),
                          ("blocked", lambda: tp_fusion.blocked(x, steps, tile=tile))):
            calls.clear()
            run()
            assert tp_fusion.fusion_counts(n, steps, 4, mode, tile=tile)["kernels"] == len(calls)
    finally:
        tp_fusion.FUSION_STEPS = original
    assert tp_fusion.fusion_counts(n, steps, 4, "fused")["bytes"] == x.nbytes * 2
