"""Lesson 03: the pointer chase visits every line once, its latency, and Little's law for bytes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course import throughput as T
from course.errors import BadInputError, DeviceMemoryError
from course.throughput.memory import CHASE_KERNEL, LINE_BYTES, chase


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 600), st.integers(0, 10 ** 6))
def test_random_cycle_visits_every_line_once_and_returns(lines, seed):
    nxt = T.random_cycle(lines * LINE_BYTES, seed=seed)
    stride = LINE_BYTES // 8
    i, seen = 0, []
    for _ in range(lines):
        seen.append(i)
        i = int(nxt[i])
    assert i == 0 and sorted(seen) == list(range(0, lines * stride, stride))


def test_compiled_chase_agrees_with_a_python_loop():
    nxt = T.random_cycle(64 * LINE_BYTES, seed=3)
    i = 0
    for _ in range(1000):
        i = int(nxt[i])
    assert chase(nxt, 1000) == i


def test_memory_latency_sweep_records_ns_per_hop():
    rs = T.memory_latency_sweep([2 ** 12, 2 ** 20], hops=2 ** 12, repeat=2)
    for r in rs.records:
        assert r["ns_per_hop"] == pytest.approx(r["min_s"] / r["hops"] * 1e9)
        assert r["ns_per_hop"] > 0


def test_bytes_in_flight_is_bandwidth_times_latency():
    fl = T.bytes_in_flight(4e12, 500e-9)
    assert fl["bytes"] == pytest.approx(2e6) and fl["lines"] == pytest.approx(2e6 / 64)
    with pytest.raises(BadInputError, match="bandwidth_bytes_per_s must be a finite number > 0"):
        T.bytes_in_flight(0, 1e-7)


@pytest.mark.parametrize("kw, exc, words", [(dict(nbytes=64), BadInputError, "at least"),
                                            (dict(nbytes=2 ** 42), DeviceMemoryError, "smaller"),
                                            (dict(hops=0), BadInputError, "hops")])
def test_memory_latency_bad_input(kw, exc, words):
    with pytest.raises(exc, match=words):
        T.memory_latency(**({"nbytes": 2 ** 12} | kw))


def test_memory_latency_sweep_empty_range():
    with pytest.raises(BadInputError, match="at least 1 whole number"):
        T.memory_latency_sweep([])


def test_memory_latency_figure_names_the_device():
    from course.throughput import plots as P

    fig = P.memory_latency_figure(T.memory_latency_sweep([2 ** 12], hops=256, repeat=1))
    assert any("Measured live on" in t.get_text() for t in fig.texts)


def test_chase_kernel_compiles_with_nvrtc():
    from _nvrtc import compile_cuda

    ok, log = compile_cuda(CHASE_KERNEL, "chase.cu")
    assert ok, log


@pytest.mark.gpu
def test_gpu_chase_agrees_with_the_cpu():
    import cupy as cp

    nxt = T.random_cycle(256 * LINE_BYTES, seed=1)
    assert chase(cp.asarray(nxt), 777) == chase(nxt, 777)
    r = T.memory_latency(2 ** 24, "gpu", hops=2 ** 12, repeat=2)
    assert r["ns_per_hop"] > 0 and np.isfinite(r["ns_per_hop"])
