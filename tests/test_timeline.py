"""Timelines of a step (course.timeline, course.timeline_plots): PyTorch's profiler events converted, the CPU
step's operations timed, the figure's bars and busy share, the ResultSet round trip, damaged references.

No test here asserts a speed: only order, containment and counts.
"""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import numpy as np
import pytest
from _figure_checks import figure_problems

from course.backprop.ladder_plots import cpu_step_timeline
from course.counting import CountingNumpy
from course.errors import BadInputError, GPUUnavailableError
from course.results import ResultSet
from course.timeline import (
    STEP_PREFIX,
    Event,
    Timeline,
    busy_share,
    counted_timeline,
    from_torch_profiler,
    load_timelines,
    record_timelines,
    short_kernel_name,
    synthetic_timeline,
    timelines_from_results,
    timelines_to_results,
)
from course.timeline_plots import timeline_figure

CUDA, CPU = "DeviceType.CUDA", "DeviceType.CPU"


def _ev(name, device, act, start_us, end_us, stream=7, parent=None):
    """An event shaped like torch.autograd.profiler_util.FunctionEvent (the attributes the conversion reads)."""
    return SimpleNamespace(name=name, device_type=device, activity_type=act, time_range=SimpleNamespace(
        start=start_us, end=end_us), device_resource_id=stream, cpu_parent=parent, is_async=False)


def _cuda_profile(streams=(7,)):
    """One step as PyTorch's profiler reports it on a GPU: ops, runtime and driver calls, kernels, a copy."""
    top = _ev("aten::linear", CPU, "cpu_op", 102, 130)
    s2 = streams[-1]
    return [
        _ev(f"{STEP_PREFIX}1", CPU, "user_annotation", 100, 200),
        _ev(f"{STEP_PREFIX}1", CUDA, "gpu_user_annotation", 110, 190),          # the step's range on the device
        top,
        _ev("aten::addmm", CPU, "cpu_op", 104, 128, parent=top),                 # nested: inside aten::linear
        _ev("cudaLaunchKernel", CPU, "cuda_runtime", 110, 118),
        _ev("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float> >(int)", CUDA,
            "kernel", 120, 124, stream=streams[0]),
        _ev("cuLaunchKernel", CPU, "cuda_driver", 131, 137),                     # CuPy launches through the driver
        _ev("cupy_multiply__float32_float32_float32", CUDA, "kernel", 140, 141, stream=s2),
        _ev("cudaGraphLaunch", CPU, "cuda_runtime", 142, 150),
        _ev("cudaMemcpyAsync", CPU, "cuda_runtime", 151, 160),
        _ev("Memcpy DtoH (Device -> Pageable)", CUDA, "gpu_memcpy", 152, 153, stream=s2),
        _ev("Memset (Device)", CUDA, "gpu_memset", 154, 155, stream=s2),
        _ev("cudaGetDevice", CPU, "cuda_runtime", 161, 162),
        _ev("cudaStreamSynchronize", CPU, "cuda_runtime", 163, 199),
    ]


# ----------------------------------------------------------------------------- from PyTorch's profiler

def test_profiler_events_become_a_host_row_and_a_gpu_row():
    tl = from_torch_profiler(_cuda_profile(), "eager", steps=1)
    assert tl.device == "gpu" and tl.rows() == ["host", "gpu"]
    kinds = [(e.row, e.kind, e.name) for e in tl.events]
    assert ("host", "step", f"{STEP_PREFIX}1") in kinds
    assert ("host", "op", "aten::linear") in kinds and not any(n == "aten::addmm" for _, _, n in kinds)
    host = {e.name: e.kind for e in tl.select("host") if e.kind != "step"}
    assert host == {"aten::linear": "op", "cudaLaunchKernel": "launch", "cuLaunchKernel": "launch",
                    "cudaGraphLaunch": "launch", "cudaMemcpyAsync": "memcpy", "cudaGetDevice": "runtime",
                    "cudaStreamSynchronize": "sync"}
    gpu = [(e.name, e.kind) for e in tl.select("gpu")]
    assert gpu == [("vectorized_elementwise_kernel<4, AddFunctor<float> >", "kernel"),
                   ("cupy_multiply__float32_float32_float32", "kernel"),
                   ("Memcpy DtoH (Device -> Pageable)", "memcpy"), ("Memset (Device)", "memset")]
    # seconds from the first event (the step's range, at 100 µs)
    first = tl.select("gpu", "kernel")[0]
    assert first.start_s == pytest.approx(20e-6) and first.duration_s == pytest.approx(4e-6)
    assert tl.span_s == pytest.approx(100e-6)
    assert busy_share(tl) == pytest.approx((4 + 1 + 1 + 1) / 100)


def test_several_streams_get_a_row_each_and_old_profilers_are_read_by_name():
    tl = from_torch_profiler(_cuda_profile(streams=(7, 13)))
    assert tl.rows() == ["host", "gpu stream 7", "gpu stream 13"]
    assert len(tl.select("gpu stream 13")) == 3
    old = [SimpleNamespace(**{k: v for k, v in vars(e).items() if k != "activity_type"}) for e in _cuda_profile()]
    converted = from_torch_profiler(old)
    assert [e.kind for e in converted.select("gpu")] == ["kernel", "kernel", "memcpy", "memset"]
    assert {e.name: e.kind for e in converted.select("host")}["cudaStreamSynchronize"] == "sync"


def test_a_real_cpu_profile_converts():
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    x = torch.ones(32, 32)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(2):
            with record_function(f"{STEP_PREFIX}{i + 1}"):
                (x @ x).relu().sum()
    tl = from_torch_profiler(prof, "torch on the CPU", steps=2)
    assert tl.device == "cpu" and tl.rows() == ["host"]
    names = [e.name for e in tl.select("host", "op")]
    assert "aten::matmul" in names and "aten::mm" not in names          # top-level ops only
    assert len(tl.select("host", "step")) == 2
    assert all(e.start_s >= 0 and e.duration_s >= 0 for e in tl.events)
    assert [e.start_s for e in tl.events] == sorted(e.start_s for e in tl.events)
    fig = timeline_figure(tl)
    assert "no device events recorded" in fig.axes[0].get_title("left")
    assert figure_problems(fig) == []


def test_recording_without_pytorch_cuda_says_what_to_do():
    from course.torch_peer import torch_cuda_available

    if torch_cuda_available():
        pytest.skip("a GPU answers here: the recording itself is exercised on the GPU machine")
    with pytest.raises(GPUUnavailableError, match="PyTorch built with CUDA.*load_timelines"):
        record_timelines({"noop": lambda: None})


@pytest.mark.filterwarnings("ignore:CUDA is not available")
def test_the_recording_loop_runs_on_the_cpu_profiler(monkeypatch):
    """record_timelines' own code (warm-up, one profile per callable, a range per step, the result set), reached
    without a GPU: PyTorch's profiler drops its CUDA activity and records the CPU ops."""
    torch = pytest.importorskip("torch")
    import course.torch_peer

    monkeypatch.setattr(course.torch_peer, "torch_cuda_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    calls = []
    x = torch.ones(8, 8)
    rs = record_timelines({"mm": lambda: calls.append(x @ x), "sum": lambda: calls.append(x.sum())}, steps=2,
                          warmup=1, titles={"mm": "a product"})
    assert len(calls) == 2 * (1 + 2) and rs.experiment == "step_timelines"
    tls = timelines_from_results(rs)
    assert [(t.label, t.title, t.steps) for t in tls] == [("mm", "a product", 2), ("sum", "sum", 2)]
    assert [e.name for e in tls[0].select("host", "step")] == [f"{STEP_PREFIX}1", f"{STEP_PREFIX}2"]
    assert [e.name for e in tls[1].select("host", "op")] == ["aten::sum", "aten::sum"]
    assert any("CUPTI" in n for n in rs.notes)


def test_kernel_names_are_shortened():
    assert short_kernel_name("cupy_add__float32_float32_float32") == "cupy_add__float32_float32_float32"
    assert short_kernel_name("void (anonymous namespace)::softmax_warp_forward<float, float, 4>(float*, int)") == \
        "softmax_warp_forward<float, float, 4>"
    long = short_kernel_name("sm90_xmma_gemm_" + "f32" * 40)
    assert len(long) == 60 and long.endswith("…")


# ----------------------------------------------------------------------------- the CPU step, counted

@pytest.fixture(scope="module")
def cpu_rs():
    return cpu_step_timeline(("eager", "fused"), sizes=(64, 32, 32, 10), batch=32, steps=2)


def test_the_cpu_timeline_orders_the_operations_and_fills_the_gaps_with_python(cpu_rs):
    tls = {t.label: t for t in timelines_from_results(cpu_rs)}
    assert list(tls) == ["eager", "fused"]
    for tl in tls.values():
        assert tl.rows() == ["host", "cpu"] and tl.steps == 2
        ops = tl.select("cpu", "op")
        starts = [e.start_s for e in ops]
        assert starts == sorted(starts)
        assert all(b.start_s - a.end_s >= 0 for a, b in zip(ops, ops[1:])), "operations overlap"
        steps = tl.select("host", "step")
        assert len(steps) == 2 and steps[0].start_s == 0
        for e in ops + tl.select("host", "host"):
            assert any(s.start_s <= e.start_s and e.end_s <= s.end_s + 1e-9 for s in steps), e
        python = sum(e.duration_s for e in tl.select("host", "host"))
        work = sum(e.duration_s for e in ops)
        assert python + work == pytest.approx(sum(s.duration_s for s in steps), rel=1e-6)   # they tile each step
    eager, fused = tls["eager"], tls["fused"]
    assert len(eager.select("cpu", "op")) > len(fused.select("cpu", "op"))
    assert len(eager.select("host", "read")) > 0 == len(fused.select("host", "read"))   # eager reads back


def test_a_counted_timeline_needs_a_recording_namespace():
    ns = CountingNumpy()
    with pytest.raises(BadInputError, match="record=True"):
        counted_timeline(lambda: None, ns.counter)
    with pytest.raises(BadInputError, match="graph rung needs a GPU"):
        cpu_step_timeline(("graph",))


# ----------------------------------------------------------------------------- the figure

def _bars(fig, gid):
    return sum(len(c.get_paths()) for ax in fig.axes for c in ax.collections if c.get_gid() == gid)


def _printed_share(ax) -> int:
    return int(re.search(r"busy (?:in array operations )?(\d+) %", ax.get_title("left"))[1])


def test_the_figure_draws_a_bar_per_event_and_prints_the_busy_share(cpu_rs):
    fig = timeline_figure(cpu_rs)
    tls = timelines_from_results(cpu_rs)
    assert _bars(fig, "cpu|op") == sum(len(t.select("cpu", "op")) for t in tls)
    assert _bars(fig, "host|host") == sum(len(t.select("host", "host")) for t in tls)
    for ax, tl in zip(fig.axes, tls):
        assert _printed_share(ax) == round(100 * busy_share(tl))
    assert "measured live on" in fig.get_suptitle() and figure_problems(fig) == []

    synth = [synthetic_timeline(kernels=5, steps=3), synthetic_timeline(kernels=2, steps=3, label="other")]
    fig = timeline_figure(synth, same_scale=True)
    assert "SYNTHETIC" in fig.get_suptitle() and "not a measurement" in fig.get_suptitle()
    assert _bars(fig, "gpu|kernel") == 15 + 6 and _bars(fig, "host|launch") == 15 + 6
    for ax, tl in zip(fig.axes, synth):
        assert _printed_share(ax) == round(100 * busy_share(tl))
    assert fig.axes[0].get_xlim() == fig.axes[1].get_xlim()
    assert figure_problems(fig) == []


def test_nothing_to_draw_is_said_not_raised():
    fig = timeline_figure([])
    assert "No timeline" in fig.texts[0].get_text()


# ----------------------------------------------------------------------------- stored and loaded

def test_a_timeline_survives_a_result_set_file(cpu_rs, tmp_path):
    path = cpu_rs.save(tmp_path / "step_timelines.json")
    back = timelines_from_results(ResultSet.load(path))
    for a, b in zip(timelines_from_results(cpu_rs), back):
        assert (a.label, a.title, a.steps, a.device, a.how) == (b.label, b.title, b.steps, b.device, b.how)
        assert [(e.row, e.name, e.kind) for e in a.events] == [(e.row, e.name, e.kind) for e in b.events]
        np.testing.assert_allclose([e.start_s for e in a.events], [e.start_s for e in b.events])
    assert all("device" in r for r in ResultSet.load(path).records)


def _gpu_reference(tmp_path) -> ResultSet:
    """A GPU-shaped set made from the fake profile, saved where load_reference looks (a test directory)."""
    rs = timelines_to_results([from_torch_profiler(_cuda_profile(), "eager", "(a) eager")])
    rs.provenance["gpus"] = [{"name": "Test GPU"}]
    rs.save(tmp_path / "step_timelines__test-gpu.json")
    return rs


def test_a_recorded_gpu_timeline_is_labelled_with_its_gpu_and_date(tmp_path):
    rs = _gpu_reference(tmp_path)
    tls, notes = load_timelines(directory=tmp_path)
    assert notes == [] and [t.label for t in tls] == ["eager"]
    assert tls[0].recorded == "reference" and tls[0].device_name == "Test GPU"
    fig = timeline_figure(tls)
    assert f"recorded on Test GPU, {rs.date}" in fig.get_suptitle()
    assert _printed_share(fig.axes[0]) == round(100 * busy_share(tls[0]))


def test_a_damaged_or_missing_reference_degrades_with_a_note(tmp_path):
    assert load_timelines(directory=tmp_path / "nowhere") == ([], [])
    (tmp_path / "step_timelines__broken.json").write_text("{ not json", encoding="utf-8")
    tls, notes = load_timelines(directory=tmp_path)
    assert tls == [] and any("not valid JSON" in n for n in notes)

    rs = _gpu_reference(tmp_path)
    d = rs.to_dict()
    d["records"][3]["kind"] = "teleport"                  # a kind no timeline has
    del d["records"][5]["start_s"]                        # a field missing
    (tmp_path / "step_timelines__test-gpu.json").write_text(json.dumps(d), encoding="utf-8")
    tls, notes = load_timelines(directory=tmp_path)
    assert len(tls) == 1 and len(tls[0].events) == len(rs.records) - 2
    assert any("left out" in n for n in tls[0].notes)
    fig = timeline_figure(tls)                            # draws, and its footer says what was left out
    assert "left out" in fig.texts[-1].get_text()


def test_busy_share_counts_overlapping_kernels_once():
    tl = Timeline("t", [Event("host", "s", 0.0, 10.0, "step"), Event("gpu", "a", 1.0, 3.0, "kernel"),
                        Event("gpu", "b", 2.0, 3.0, "kernel"), Event("gpu", "c", 8.0, 1.0, "memcpy")], device="gpu")
    assert busy_share(tl) == pytest.approx(0.5)
    assert busy_share(Timeline("empty", [])) == 0.0


# ----------------------------------------------------------------------------- drawn from a later call

def _profiled(label: str, kernels: int, title: str) -> Timeline:
    """A made-up recorded timeline: 3 calls of ``kernels`` launches each, the first carrying a 2 ms profiler
    start-up, a wait inside each call, and the recording's own synchronise after the last call."""
    tl = synthetic_timeline(kernels=kernels, steps=3, label=label)
    first = min(e.start_s for e in tl.select("host", "step"))
    shifted = [Event(e.row, e.name, e.start_s + (2e-3 if e.kind != "step" or e.start_s > first else 0.0),
                     e.duration_s + (2e-3 if e.kind == "step" and e.start_s == first else 0.0), e.kind)
               for e in tl.events]
    shifted += [Event("host", "Activity Buffer Request", 0.0, 2e-3, "op"),
                Event("host", "cudaDeviceSynchronize", max(e.end_s for e in shifted), 5e-6, "sync")]
    return Timeline(label, shifted, device="gpu", title=title, steps=3, how="made up for a test",
                    device_name="Test GPU", recorded="reference", date="2026-01-01")


def test_a_timeline_drawn_from_its_second_call_keeps_the_counts_of_every_call():
    from course.timeline_plots import call_counts, from_call

    tl = _profiled("eager", 5, "(a) eager, 8-4-3, batch 4")
    c = call_counts(tl)
    assert (c["kernels"], c["launches"], c["waits"]) == (5, 5, 1)       # the recording's last synchronise: not counted
    cut = from_call(tl, 2)
    assert cut.steps == 2 and min(e.start_s for e in cut.events) == 0.0
    assert not any(e.name == "Activity Buffer Request" for e in cut.events)
    assert from_call(tl, 9) is tl and from_call(tl, 1) is tl
    fig = timeline_figure([tl], first_call=2, note="call 1 left out")
    title = fig.axes[0].get_title("left")
    assert "last 2 steps" in title and "of 3 recorded" in title and "5 kernels" in title and "1 wait inside" in title
    assert _printed_share(fig.axes[0]) == round(100 * busy_share(cut))
    footer = fig.texts[-1].get_text()
    assert "Recorded on Test GPU, 2026-01-01: not measured in this run" in footer and "call 1 left out" in footer
    assert "Measured live" not in footer and figure_problems(fig) == []


def test_the_ladder_timelines_caption_says_what_each_rung_removed():
    from course.backprop.ladder_plots import ladder_timeline_figure
    from course.plots import figure_takeaway

    tls = [_profiled("eager", 6, "(a) eager: the teaching step, 8-4-3, batch 4"),
           _profiled("fused", 3, "(c) fused kernels, 8-4-3, batch 4"),
           _profiled("torch eager", 4, "PyTorch eager, TF32 off, 8-4-3, batch 4")]
    fig = ladder_timeline_figure(tls)
    said = figure_takeaway(fig)
    assert said.startswith("(a) eager: the teaching step: 6 kernels"), said
    assert "(c) fuses the small operations: kernels 6 → 3, launch calls 6 → 3" in said, said
    assert "PyTorch eager, TF32 off: 4 kernels" in said and "8-4-3" not in said, said
    assert "Activity Buffer Request of up to 2 ms" in fig.texts[-1].get_text()
    assert figure_problems(fig) == []
