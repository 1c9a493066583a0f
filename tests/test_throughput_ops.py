"""Lesson 03: op counts, sweeps, the crossover, and clear errors for bad sweeps."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course import throughput as T
from course.errors import BadInputError, DeviceMemoryError, GPUUnavailableError, UnsupportedDtypeError
from course.results import ResultSet
from course.throughput.ops import _prepare


@pytest.mark.parametrize("op", T.op_names())
def test_each_op_computes_what_numpy_computes(op):
    o = T.get_op(op)
    n = 5 if o.kind == "matmul" else 37
    fn, args, kwargs = _prepare(o, np, n, np.dtype("float64"))
    got = fn(*args, **kwargs)
    got = kwargs.get("out", got)
    want = {"add": lambda: args[0] + args[1], "relu": lambda: np.maximum(args[0], 0),
            "sum": lambda: args[0].sum(), "matmul": lambda: args[0] @ args[1]}[op]()
    np.testing.assert_allclose(got, want)


def test_counts_give_the_textbook_intensities():
    assert T.get_op("add").intensity(1000, 4) == pytest.approx(1 / 12)
    assert T.get_op("relu").intensity(1000, 4) == pytest.approx(1 / 8)
    assert T.get_op("matmul").intensity(600, 4) == pytest.approx(600 / 6)
    assert T.get_op("matmul").intensity(600, 2) == pytest.approx(2 * T.get_op("matmul").intensity(600, 4))


def test_time_op_record_rates_are_counts_over_median():
    r = T.time_op("add", 4096, repeat=3)
    assert r["device"] == "cpu" and r["n"] == 4096 and r["dtype"] == "float32"
    assert r["gb_per_s"] == pytest.approx(3 * 4096 * 4 / r["median_s"] / 1e9)
    assert r["gflops"] == pytest.approx(4096 / r["median_s"] / 1e9)
    assert r["q25_s"] <= r["median_s"] <= r["q75_s"]


def test_sweep_measures_every_size_in_order_with_provenance():
    rs = T.throughput_sweep("relu", [8, 64, 512], repeat=2)
    assert [r["n"] for r in rs.records] == [8, 64, 512]
    assert rs.experiment == "throughput_sweep" and rs.params["stopped_early"] is False
    assert "cpu" in rs.provenance and rs.provenance["cpu"]["model"]


def test_sweep_interrupted_by_its_budget_keeps_what_it_measured_and_says_so():
    rs = T.throughput_sweep("matmul", [8, 16, 32, 64, 128, 256], repeat=50, budget_s=0.05,
                            total_budget_s=1e-6)
    assert 1 <= len(rs.records) < 6
    assert rs.params["stopped_early"] is True
    assert any("Stopped early" in n and "not measured" in n for n in rs.notes)


@pytest.mark.parametrize("bad, exc, words", [
    (dict(sizes=[]), BadInputError, "empty"),
    (dict(sizes=[0, 4]), BadInputError, "got 0"),
    (dict(sizes=[2.5]), BadInputError, "2.5"),
    (dict(op="divide"), BadInputError, "divide"),
    (dict(sizes=[2 ** 40]), DeviceMemoryError, "smaller size"),
    (dict(dtype="bfloat16"), UnsupportedDtypeError, "bfloat16"),
    (dict(dtype="float128x"), UnsupportedDtypeError, "float128x"),
    (dict(devices=[]), BadInputError, "devices is empty"),
    (dict(devices=["tpu"]), BadInputError, "tpu"),
    (dict(total_budget_s=-1), BadInputError, "total_budget_s"),
])
def test_bad_sweeps_get_a_clear_message(bad, exc, words):
    kw = {"op": "add", "sizes": [16]} | bad
    with pytest.raises(exc, match=words):
        T.throughput_sweep(**kw)


def test_gpu_asked_for_without_one_says_what_to_do(monkeypatch):
    import sys

    devmod = sys.modules["course.devices"]
    monkeypatch.setenv("COURSE_DISABLE_GPU", "1")
    devmod._probe.cache_clear()
    try:
        with pytest.raises(GPUUnavailableError, match="Colab"):
            T.throughput_sweep("add", [16], devices=["gpu"])
    finally:
        monkeypatch.delenv("COURSE_DISABLE_GPU")
        devmod._probe.cache_clear()


def test_crossover_interpolates_between_the_last_cpu_win_and_the_first_gpu_win():
    n = [1, 10, 100, 1000]
    cpu = [1e-6, 1e-5, 1e-4, 1e-3]
    gpu = [1e-5, 1e-5 * 2, 2e-5, 5e-5]
    x, status = T.crossover_size(n, cpu, n, gpu)
    assert status == "crossed" and 10 < x < 100
    # exactly where log(cpu/gpu) crosses 0 on the log-n axis
    r0, r1 = np.log(0.5), np.log(5.0)
    assert x == pytest.approx(10 ** (1 + -r0 / (r1 - r0)))


def test_crossover_statuses():
    assert T.crossover_size([1, 2], [1, 1], [1, 2], [0.5, 0.5]) == (1.0, "gpu_always_faster")
    assert T.crossover_size([1, 2], [1, 1], [1, 2], [2, 2]) == (None, "cpu_always_faster")
    assert T.crossover_size([1], [1], [2], [1]) == (None, "no_data")
    # the GPU must stay ahead: a late CPU win moves the crossover past it
    assert T.crossover_size([1, 2, 4, 8], [2, 2, 2, 2], [1, 2, 4, 8], [1, 3, 1, 1])[0] > 2


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(1e-7, 1e-1), min_size=2, max_size=8), st.lists(st.floats(1e-7, 1e-1), min_size=8,
                                                                          max_size=8))
def test_crossover_is_inside_the_measured_range_and_gpu_wins_from_the_next_size_on(cpu, gpu):
    n = [2.0 ** k for k in range(len(cpu))]
    gpu = gpu[:len(cpu)]
    x, status = T.crossover_size(n, cpu, n, gpu)
    if status == "crossed":
        assert n[0] <= x <= n[-1]
        assert all(g < c for nn, c, g in zip(n, cpu, gpu) if nn >= x * (1 + 1e-9) and nn > n[0])
    elif status == "gpu_always_faster":
        assert all(g < c for c, g in zip(cpu, gpu))
    else:
        assert status == "cpu_always_faster" and gpu[-1] >= cpu[-1]


def test_find_crossover_without_gpu_or_reference_says_so():
    rs = T.throughput_sweep("add", [16], repeat=1)
    cx = T.find_crossover(rs, [])
    assert cx.n is None and cx.status == "no_data"
    assert "no reference GPU results" in cx.message and "--record-reference" in cx.message


def test_find_crossover_uses_a_reference_and_labels_it():
    ref = ResultSet("throughput_add", provenance={"date": "2026-01-01T00:00:00", "cpu": {"model": "X"},
                                                  "libraries": {}, "gpus": [{"name": "NVIDIA H200"}]},
                    source="reference")
    for n, c, g in ((1, 1e-6, 5e-6), (1024, 4e-6, 5e-6), (2 ** 20, 1e-3, 2e-5)):
        ref.add(device="cpu", op="add", n=n, median_s=c)
        ref.add(device="gpu", op="add", n=n, median_s=g)
    cx = T.find_crossover(None, [ref], {"op": "add"})
    assert cx.status == "crossed" and 1024 < cx.n < 2 ** 20
    assert "recorded on NVIDIA H200" in cx.message


def test_default_sizes_are_powers_of_two_and_grow():
    for op in T.op_names():
        s = T.default_sizes(op)
        assert s == sorted(s) and all(x & (x - 1) == 0 for x in s)
        assert len(T.default_sizes(op, quick=False)) > len(s)


def test_cpu_float16_matmul_too_big_to_emulate_is_refused_with_an_estimate():
    with pytest.raises(BadInputError, match="float16.*would take about"):
        T.time_op("matmul", 4096, "float16")


def test_precision_sweep_skips_huge_cpu_float16_with_a_note():
    rs = T.precision_sweep([8, 2048], dtypes=("float16",), repeat=1)
    assert [r["n"] for r in rs.records] == [8] and "skipped" in rs.notes[0]


def test_sweep_refuses_an_emulated_float16_matmul_range_before_measuring():
    with pytest.raises(BadInputError, match="n <= 512"):
        T.throughput_sweep("matmul", [8, 4096], "float16")
