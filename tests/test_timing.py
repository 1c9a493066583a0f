"""The stopwatch: medians, spread, warm-up, budgets and bad arguments."""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

import course
import course.timing
from course.errors import BadInputError


class _FakeClock:
    """A perf_counter that moves only when the timed function says so: exact, whatever the load."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_each_sample_is_exactly_the_time_the_call_took(monkeypatch):
    clock = _FakeClock()
    monkeypatch.setattr(course.timing.time, "perf_counter", clock)
    durations = iter([0.5, 0.001, 0.002, 0.003, 0.004, 0.005])  # the warm-up call is the slow one

    def work():
        clock.now += next(durations)

    t = course.benchmark(work, warmup=1, repeat=5)
    assert t.samples.tolist() == pytest.approx([0.001, 0.002, 0.003, 0.004, 0.005], abs=1e-12)
    assert t.median == pytest.approx(0.003) and t.q25 == pytest.approx(0.002) and t.q75 == pytest.approx(0.004)
    assert t.spread == pytest.approx(0.002) and t.rel_spread == pytest.approx(2 / 3)
    assert t.warmup == 1 and t.repeat == 5


def test_the_budget_counts_warmup_and_stops_the_repeats(monkeypatch):
    clock = _FakeClock()
    monkeypatch.setattr(course.timing.time, "perf_counter", clock)

    def work():
        clock.now += 0.03

    t = course.benchmark(work, warmup=1, repeat=100, budget_s=0.1)
    # 0.03 warm-up, then calls until 0.1 s have passed since the start: 3 timed calls (0.12 s)
    assert t.repeat == 3 and t.stopped_early and t.samples.tolist() == pytest.approx([0.03] * 3)


def test_a_real_sleep_of_10_ms_measures_at_least_10_ms_and_not_wildly_more():
    # time.sleep never wakes early; on a busy machine it may wake late, so only a loose upper bound
    t = course.benchmark(time.sleep, 0.01)
    assert t.repeat == 7 and len(t.samples) == 7 and t.warmup == 1
    assert t.q25 <= t.median <= t.q75 and t.spread >= 0
    assert 0.0099 <= t.median < 0.05, t


def test_warmup_calls_are_made_but_not_timed():
    calls = []

    def f():
        calls.append(1)
        time.sleep(0.05 if len(calls) == 1 else 0.0)  # an expensive first call

    t = course.benchmark(f, warmup=1, repeat=3)
    assert len(calls) == 4
    assert t.median < 0.04 and t.warmup == 1


def test_budget_stops_the_repeats_and_says_so():
    t = course.benchmark(time.sleep, 0.02, warmup=0, repeat=100, budget_s=0.1)
    assert t.stopped_early
    assert 1 <= t.repeat < 100
    assert "stopped early" in repr(t)


def test_one_timed_call_always_runs_even_when_warmup_spends_the_budget():
    t = course.benchmark(time.sleep, 0.03, warmup=3, repeat=5, budget_s=0.01)
    assert t.repeat == 1 and t.warmup == 1 and t.stopped_early is True


def test_arguments_and_keywords_reach_the_function():
    seen = {}

    def f(a, b=0):
        seen["args"] = (a, b)

    course.benchmark(f, 1, b=2, repeat=1)
    assert seen["args"] == (1, 2)


def test_record_is_json_ready():
    rec = course.benchmark(np.add, 1, 2, repeat=3).as_record()
    assert set(rec) >= {"device", "median_s", "q25_s", "q75_s", "min_s", "repeat", "stopped_early",
                        "threads", "load", "noisy"}
    assert rec["device"] == "cpu" and rec["repeat"] == 3
    json.dumps(rec, allow_nan=False)


def _timing(samples, load=0.1):
    from course.timing import Timing

    return Timing(samples=np.asarray(samples, dtype=float), load=load, threads=2)


def test_a_wide_spread_or_a_busy_machine_makes_a_timing_noisy():
    assert not _timing([1.0, 1.0, 1.01, 1.02, 0.99]).noisy
    spread = _timing([1.0, 1.5, 2.0, 0.5, 1.0])
    assert spread.noisy and "spread" in spread.noise_note() and "busy" not in spread.noise_note()
    busy = _timing([1.0] * 5, load=3.0)
    assert busy.noisy and busy.busy and "busy (load 3.0 per core" in busy.noise_note()
    assert "COURSE_THREADS=1" in busy.noise_note() and "course.threads.set_threads(1)" in busy.noise_note()
    assert _timing([1.0] * 5, load=None).noise_note() == ""
    assert "NOISY" in repr(busy)


def test_noisy_note_counts_the_noisy_ones():
    from course.timing import noisy_note

    recs = [{"noisy": False, "load": 0.2}, {"noisy": True, "load": 2.0}, {"noisy": True, "load": 0.5}]
    assert noisy_note(recs).startswith("2 of 3 measurements are noisy: 1 was taken while the machine was busy "
                                       "(load up to 2.0 per core")
    assert noisy_note(recs[:1]) == ""


def test_noisy_note_names_the_real_cause_and_what_to_do():
    from course.timing import noisy_note

    busy = [_timing([1.0] * 5, load=3.0)]
    note = noisy_note(busy)
    assert "busy (load up to 3.0 per core" in note and "disagree" not in note
    assert "COURSE_THREADS=1" in note and "rerun" in note
    spread = [_timing([1.0, 1.5, 2.0, 0.5, 1.0])]
    note = noisy_note(spread)
    assert "runs that disagree" in note and "busy" not in note and "COURSE_THREADS" not in note
    assert "Rerun" in note
    one = [course.timing.Timing(samples=np.ones(5), load=3.0, threads=1)]
    assert "COURSE_THREADS=1" not in noisy_note(one)       # it already ran with one thread


def test_an_oversubscribed_machine_measures_with_one_blas_thread_and_says_so(monkeypatch):
    import course.threads as threads
    from course.timing import noisy_note

    monkeypatch.delenv("COURSE_THREADS", raising=False)
    try:
        with monkeypatch.context() as m:
            m.setattr(threads, "usable_cores", lambda: 2)
            m.setattr(threads, "runnable_processes", lambda: 5.0)      # a faked busy machine
            n, why = threads.default_threads(recheck=True)
            assert n == 1 and "oversubscribed (5 runnable processes for its 2 cores)" in why
            assert threads.get_threads() == 1 and "COURSE_THREADS=2" in why
            t = course.benchmark(np.add, 1, 2, repeat=3)
            assert t.threads == 1 and "Measured with 1 BLAS thread by default" in t.threads_why
            assert t.as_record()["threads_why"] == t.threads_why
            assert "oversubscribed" in noisy_note([t])          # said even when no timing is noisy
            m.setattr(threads, "runnable_processes", lambda: 1.5)      # quiet again, but the default stays
            assert threads.get_threads() == 1
            assert threads.default_threads(recheck=True) == (2, "")
            assert "threads_why" not in course.benchmark(np.add, 1, 2, repeat=1).as_record()
            m.setattr(threads, "runnable_processes", lambda: None)     # unknown load: every core
            assert threads.default_threads(recheck=True) == (2, "")
            m.setattr(threads, "runnable_processes", lambda: 9.0)
            m.setattr(threads, "usable_cores", lambda: 1)              # one core: nothing to lower
            assert threads.default_threads(recheck=True) == (1, "")
            m.setattr(threads, "usable_cores", lambda: 2)
            threads.default_threads(recheck=True)
            m.setenv("COURSE_THREADS", "2")                            # the learner's choice wins
            assert threads.get_threads() == 2 and threads.threads_note() == ""
    finally:
        threads.default_threads(recheck=True)


def test_runnable_processes_reads_a_number_or_none():
    from course.cpu import runnable_processes

    n = runnable_processes()
    assert n is None or n >= 1          # this process is running as it asks


def test_threads_are_set_for_the_measurement_and_put_back():
    from threadpoolctl import threadpool_info

    from course.threads import get_threads, set_threads, thread_limit

    seen = []
    t = course.benchmark(lambda: seen.append([i["num_threads"] for i in threadpool_info()]), repeat=1,
                         warmup=0, blas_threads=1)
    assert t.threads == 1 and all(n == 1 for n in seen[0])
    before = get_threads()
    try:
        assert set_threads(1) == 1 and course.benchmark(np.add, 1, 2, repeat=1).threads == 1
    finally:
        set_threads(None)
    assert get_threads() == before
    with thread_limit(1):
        assert all(i["num_threads"] == 1 for i in threadpool_info())
    with pytest.raises(BadInputError, match="whole number of threads"):
        set_threads(0)


def test_usable_cores_honour_a_cgroup_quota(monkeypatch):
    from course import cpu

    monkeypatch.setattr(cpu, "_cgroup_cpu_limit", lambda: 1.5)
    assert cpu.usable_cores() == min(2, len(os.sched_getaffinity(0)))
    monkeypatch.setattr(cpu, "_cgroup_cpu_limit", lambda: 0.25)
    assert cpu.usable_cores() == 1
    monkeypatch.setattr(cpu, "_cgroup_cpu_limit", lambda: None)
    assert cpu.usable_cores() == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("kwargs, match", [
    ({"budget_s": 0}, "budget_s must be a positive"),
    ({"budget_s": -1}, "budget_s must be a positive"),
    ({"budget_s": float("nan")}, "budget_s must be a positive"),
    ({"repeat": 0}, "repeat must be"),
    ({"warmup": -1}, "warmup must be"),
    ({"device": "tpu"}, "'cpu' or 'gpu'"),
])
def test_bad_arguments_get_clear_messages(kwargs, match):
    with pytest.raises(BadInputError, match=match):
        course.benchmark(time.sleep, 0, **kwargs)


def test_a_non_function_is_refused_by_name():
    with pytest.raises(BadInputError, match="needs a function"):
        course.benchmark(42)


@pytest.mark.gpu
def test_gpu_timing_uses_events_and_waits_for_the_work():
    cp = course.get_xp("gpu")
    a = cp.ones((2048, 2048), dtype=cp.float32)
    t = course.benchmark(cp.matmul, a, a, device="gpu", repeat=5)
    # the event time covers the kernel: a 2048^3 product cannot take under 2 µs
    assert t.median > 2e-6 and t.device == "gpu"
    assert np.all(t.host_samples >= t.samples * 0.5)


def test_sweep_within_budget_stops_and_says_what_it_left_out():
    from course.results import ResultSet
    from course.timing import sweep_within_budget

    rs = ResultSet("demo")
    done = []
    for n in sweep_within_budget([1, 2, 3, 4], rs, total_budget_s=0.05,
                                 skipped=lambda rest: f"sizes not measured: {rest}"):
        done.append(n)
        time.sleep(0.06)
    assert done == [1]
    assert rs.params["stopped_early"] is True
    assert "ran out after 1 of 4 measurements; sizes not measured: [2, 3, 4]" in rs.notes[0]
    whole = ResultSet("demo")
    assert list(sweep_within_budget(range(3), whole)) == [0, 1, 2]
    assert whole.params["stopped_early"] is False and whole.notes == []


def test_interleaved_rounds_keep_min_rounds_take_per_round_samples_and_use_each_timer():
    from course.timing import interleaved_rounds

    seen, befores = [], []

    def timer(fn, device, warmup, repeat, name):
        seen.append((name, repeat))
        return course.benchmark(fn, device=device, warmup=warmup, repeat=repeat, name=name)

    t = interleaved_rounds({"a": lambda: None, "b": lambda: None}, warmup=0, repeat=5, budget_s=1e-9,
                           min_rounds=3, per_round=2, timer={"b": timer}, before=befores.append)
    assert t["a"].repeat == t["b"].repeat == 6 and t["a"].stopped_early   # 3 rounds of 2, then the budget
    assert seen == [("b", 2)] * 3 and befores == ["a", "b"] * 3
    with pytest.raises(BadInputError, match="per_round"):
        interleaved_rounds({"a": lambda: None}, per_round=0)


def test_runs_that_spread_over_the_cores_keep_every_core_on_a_busy_machine(monkeypatch):
    import course.threads as threads

    monkeypatch.delenv("COURSE_THREADS", raising=False)
    try:
        with monkeypatch.context() as m:
            m.setattr(threads, "usable_cores", lambda: 2)
            m.setattr(threads, "runnable_processes", lambda: 5.0)
            threads.default_threads(recheck=True)
            assert threads.get_threads() == 1 and threads.core_threads() == 2
            m.setenv("COURSE_THREADS", "1")
            assert threads.core_threads() == 1
    finally:
        threads.default_threads(recheck=True)
