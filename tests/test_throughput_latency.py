"""Lesson 03: latency distributions, the asynchronous chain, transfers (GPU), and their errors."""

from __future__ import annotations

import numpy as np
import pytest

from course import throughput as T
from course.errors import BadInputError, DeviceMemoryError, GPUUnavailableError, UnsupportedDtypeError
from course.results import ResultSet


def test_cpu_latency_is_a_distribution_of_every_call():
    rs = T.smallest_op_latency("cpu", repeat=40, budget_s=2.0)
    whats = [r["what"] for r in rs.records]
    assert any("ufunc call overhead" in w for w in whats) and any("timer itself" in w for w in whats)
    for r in rs.records:
        s = np.asarray(r["samples_s"])
        assert len(s) == r["repeat"] == 40 and (s > 0).all()
        assert r["median_s"] == pytest.approx(np.median(s))


def test_latency_budget_stops_early_and_says_so():
    rs = T.smallest_op_latency("cpu", repeat=10 ** 7, budget_s=0.01)
    assert all(r["stopped_early"] for r in rs.records)
    assert any("stopped early" in n for n in rs.notes)


def test_latency_summary_lists_each_operation():
    rs = T.smallest_op_latency("cpu", repeat=20)
    html = T.latency_summary(rs)
    assert html.count("<tr>") == len(rs.records) + 1 and "median µs" in html


@pytest.mark.parametrize("kw, exc, words", [
    (dict(repeat=0), BadInputError, "repeat"),
    (dict(device="tpu"), BadInputError, "tpu"),
])
def test_latency_bad_input(kw, exc, words):
    with pytest.raises(exc, match=words):
        T.smallest_op_latency(**({"device": "cpu"} | kw))


def test_async_chain_on_cpu_has_three_modes_that_agree_roughly():
    rs = T.async_chain("cpu", n=2 ** 14, chain=10, repeat=5)
    modes = {r["mode"]: r for r in rs.records}
    assert set(modes) == {"return without waiting", "wait once at the end", "wait after every op"}
    assert all(r["per_op_s"] == pytest.approx(r["median_s"] / 10) for r in rs.records)


@pytest.mark.parametrize("kw, exc, words", [
    (dict(chain=0), BadInputError, "chain"),
    (dict(n=0), BadInputError, "n must be"),
    (dict(n=2 ** 42), DeviceMemoryError, "smaller"),
    (dict(dtype="bfloat16"), UnsupportedDtypeError, "bfloat16"),
])
def test_async_chain_bad_input(kw, exc, words):
    with pytest.raises(exc, match=words):
        T.async_chain(**({"device": "cpu"} | kw))


def test_transfer_bandwidth_needs_a_gpu():
    from course.devices import gpu_available

    if gpu_available():
        pytest.skip("a GPU answers here: covered by the gpu tests")
    with pytest.raises(GPUUnavailableError, match="No GPU"):
        T.transfer_bandwidth()


# ----------------------------------------------------------------------------- GPU

@pytest.mark.gpu
def test_gpu_latency_has_launch_sync_and_copies():
    rs = T.smallest_op_latency("gpu", repeat=50)
    whats = " ".join(r["what"] for r in rs.records)
    for w in ("launch", "synchronize", "host→device", "device→host", "CUDA events"):
        assert w in whats
    launch = next(r for r in rs.records if r["what"].startswith("CuPy add of 1 element: host time"))
    round_trip = next(r for r in rs.records if r["what"].startswith("launch +"))
    assert launch["median_s"] > 0 and round_trip["median_s"] > 0
    hardware = [r for r in rs.records if r["what"].startswith("GPU launch:")]
    assert len(hardware) == 2 and all(0 < r["median_s"] < 1e-3 for r in hardware)


def test_the_launch_kernels_compile_for_sm_90_without_a_gpu():
    from _nvrtc import compile_cuda

    ok, log = compile_cuda(T.latency.LAUNCH_SOURCE, "launch.cu", ("--gpu-architecture=compute_90",))
    assert ok, log


def test_older_recordings_are_relabelled_with_what_they_measured():
    from course.results import ResultSet

    rs = ResultSet("launch_latency", records=[{"device": "gpu", "what": old, "median_s": 1e-5}
                                              for old in T.latency.RELABELLED] + [{"device": "gpu", "what": "x"}])
    whats = [r["what"] for r in T.latency.relabel_latency(rs).records]
    assert whats[-1] == "x" and all("not" in w for w in whats[:-1])
    assert not any("the kernel itself" in w for w in whats)


@pytest.mark.gpu
def test_gpu_async_chain_returns_before_the_work_is_done():
    rs = T.async_chain("gpu", n=2 ** 24, chain=50, repeat=5)
    m = {r["mode"]: r["median_s"] for r in rs.records}
    assert m["return without waiting"] < m["wait once at the end"]


@pytest.mark.gpu
def test_gpu_transfers_pageable_and_pinned():
    rs = T.transfer_bandwidth([2 ** 12, 2 ** 20], repeat=3)
    assert {r["memory"] for r in rs.records} == {"pageable", "pinned"}
    assert all(r["gb_per_s"] > 0 for r in rs.records)


def test_an_events_row_timed_behind_a_lead_says_it_holds_no_host_time():
    from course.results import ResultSet

    old = "the kernel itself (GPU time, CUDA events)"
    rs = ResultSet("launch_latency", records=[{"device": "gpu", "what": old, "median_s": 1e-5},
                                              {"device": "gpu", "what": T.latency.RELABELLED[old], "lead_s": 1e-4,
                                               "median_s": 3e-6}])
    whats = [r["what"] for r in T.latency.relabel_latency(rs).records]
    assert "host call included" in whats[0] and whats[1] == T.latency.EVENTS_BEHIND_LEAD


def _launch_rows(host_bound_note: bool) -> ResultSet:
    queued = "GPU launch: 200 empty kernels queued back to back, device time per kernel (CUDA events)"
    rs = ResultSet("launch_latency", source="reference", records=[
        {"device": "gpu", "what": queued, "median_s": 2e-6, "repeat": 10, "samples_s": [2e-6] * 8 + [3e-5] * 2},
        {"device": "gpu", "what": "GPU launch: a CUDA graph of 200 empty kernels, device time per node (CUDA events)",
         "median_s": 1e-6},
        {"device": "gpu", "what": "CuPy add of 1 element: host time per call, no wait (not the GPU's launch)",
         "median_s": 8e-6},
        {"device": "gpu", "what": "launch + synchronize (round trip)", "median_s": 2e-5},
        {"device": "gpu", "what": "synchronize an idle stream", "median_s": 3e-6}])
    rs.provenance["gpus"] = [{"name": "NVIDIA Test GPU"}]
    if host_bound_note:
        rs.notes.append(f"'{queued}': in 2 of 10 runs the host took longer to queue the 200 kernels than the GPU's "
                        "head start, so those times include host time.")
    return rs


def test_launch_reading_sets_the_gpus_launch_apart_from_the_host_cost():
    text = "\n".join(T.latency.launch_reading(_launch_rows(False)))
    assert "2.00 µs per kernel queued back to back, 1.00 µs per node of a CUDA graph" in text
    assert "CuPy 8.00 µs = 4.0× the GPU's time per kernel" in text
    assert "20.00 µs = the call (8.00) + a synchronize with nothing to wait for (3.00) + 9.00 µs" in text
    assert "ran dry" not in text and "NVIDIA Test GPU" in text


def test_launch_reading_counts_the_runs_the_host_could_not_keep_ahead():
    text = "\n".join(T.latency.launch_reading(_launch_rows(True)))
    assert "in 2 of 10 runs" in text and "up to 30.0 µs per kernel" in text and "one of the other 8 runs" in text


def test_launch_reading_is_empty_without_the_gpus_own_launch():
    assert T.latency.launch_reading(T.smallest_op_latency("cpu", repeat=5)) == []
