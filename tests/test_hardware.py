"""Lesson 00's measurements: copy bandwidth and the matrix-product sweep."""

from __future__ import annotations

import numpy as np
import pytest

import course
from course.errors import BadInputError, DeviceMemoryError, UnsupportedDtypeError
from course.hardware import machine as hardware


def test_copy_bandwidth_counts_read_and_write_bytes(monkeypatch):
    from _fixed_clock import fixed_benchmark

    monkeypatch.setattr(hardware, "benchmark", fixed_benchmark(0.001))
    bw = hardware.copy_bandwidth("cpu", nbytes=2**20, repeat=3)
    # 1 MiB read + 1 MiB written in 1 ms: 2,097,152 bytes / 0.001 s
    assert bw["nbytes"] == 2**20
    assert bw["bytes_per_s"] == pytest.approx(2_097_152_000.0) and bw["gb_per_s"] == pytest.approx(2.097152)


def test_matmul_flops_is_two_n_cubed():
    assert hardware.matmul_flops(10) == 2000.0


def test_matmul_sweep_records_each_size_with_gflops_and_provenance(monkeypatch):
    from _fixed_clock import fixed_benchmark

    monkeypatch.setattr(hardware, "benchmark", fixed_benchmark(1e-6))
    rs = hardware.matmul_sweep([8, 16], devices=["cpu"], repeat=2, budget_s=0.05)
    assert [r["n"] for r in rs.records] == [8, 16]
    r = rs.records[1]
    assert r["median_s"] == 1e-6 and r["gflops"] == pytest.approx(8.192)  # 2 · 16³ = 8,192 FLOP in 1 µs
    assert rs.provenance["cpu"]["model"] and rs.params["dtype"] == "float32"


@pytest.mark.parametrize("call, err, match", [
    (lambda: hardware.time_matmul(0), BadInputError, "n must be a whole number"),
    (lambda: hardware.time_matmul(4, dtype="bfloat16"), UnsupportedDtypeError, "bfloat16"),
    (lambda: hardware.time_matmul(10**7), DeviceMemoryError, "Choose a smaller size"),
    (lambda: hardware.matmul_sweep([]), BadInputError, "at least one size"),
    (lambda: hardware.copy_bandwidth(nbytes=1), BadInputError, "at least 4"),
])
def test_bad_input_gets_a_clear_message(call, err, match):
    with pytest.raises(err, match=match):
        call()


def test_hardware_summary_compares_lanes():
    rows = hardware.hardware_summary()
    assert rows[0]["device"] == "CPU" and rows[0]["parallel_lanes"] >= 1
    html = hardware.hardware_html(rows, measured_cpu_gbps=12.3, measured_how="the faster copy, one core copying")
    assert "12.3 GB/s (measured here: the faster copy, one core copying" in html   # says which copy gave it
    assert "H200" in hardware.vendor_gpus_html() and "not measured" in hardware.vendor_gpus_html()


@pytest.mark.gpu
def test_gpu_matmul_matches_numpy_and_is_timed():
    a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    cp = course.get_xp("gpu")
    np.testing.assert_allclose(course.to_numpy(cp.asarray(a) @ cp.asarray(a)), a @ a, rtol=1e-4, atol=1e-4)
    rs = hardware.matmul_sweep([64, 128], devices=["gpu"], repeat=2)
    assert len(rs.select(device="gpu")) == 2 and rs.provenance["gpus"]


def test_a_copy_on_several_threads_reports_them_and_zero_threads_is_refused():
    bw = hardware.copy_bandwidth("cpu", nbytes=4 * 1001, repeat=1, threads=3)
    assert bw["threads"] == 3 and bw["nbytes"] == 4004 and bw["bytes_per_s"] > 0
    with pytest.raises(BadInputError, match="threads"):
        hardware.copy_bandwidth("cpu", nbytes=64, threads=0)
