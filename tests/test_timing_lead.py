"""A GPU sample covers device time only: the lead spin is queued before the start event, on CuPy's stream
and on PyTorch's, and ``per_event`` times N calls between one pair of events.  Reached on the CPU with a
fake CuPy and a patched ``torch.cuda`` (the order of every launch, event and wait is checked), and with
the stand-in GPU; the spin's CUDA C is compiled for each architecture the course meets."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest
from _nvrtc import compile_cuda, no_compiler

import course
import course.timing
from course.errors import BadInputError
from course.lead_spin import LEAD_KERNEL, LEAD_S, LEAD_SPIN_SOURCE

NS = round(LEAD_S * 1e9)


class _FakeCupy:
    """Enough of CuPy for the GPU branch of the stopwatch and the PyTorch lead; every call goes to ``log``."""

    def __init__(self, log: list, fail: bool = False, from_external: bool = True, elapsed_ms: float = 6.0):
        self.log = log
        count = iter(range(1, 1000))

        class Stream:
            def __init__(self, ptr: int = 0x10):
                self.ptr = ptr

        if from_external:
            def make(cls, obj):
                log.append(("from_external", obj.cuda_stream))
                return cls(obj.cuda_stream)
            Stream.from_external = classmethod(make)

        class ExternalStream(Stream):
            def __init__(self, ptr: int, device_id: int = -1):
                log.append(("ExternalStream", ptr, device_id))
                super().__init__(ptr)

        class Event:
            def __init__(self, *args, **kwargs):
                self.id = next(count)

            def record(self, stream=None):
                log.append(("event", self.id, stream.ptr))

            def synchronize(self):
                log.append(("wait", self.id))

        class Device:
            def __init__(self, index: int):
                self.index = index

            def __enter__(self):
                log.append(("device", self.index))

            def __exit__(self, *exc):
                return None

        current = Stream()
        self.cuda = SimpleNamespace(Stream=Stream, ExternalStream=ExternalStream, Event=Event, Device=Device,
                                    get_current_stream=lambda: current,
                                    get_elapsed_time=lambda start, end: elapsed_ms)

        def raw_kernel(code, name):
            assert code == LEAD_SPIN_SOURCE and name == LEAD_KERNEL
            log.append(("compile", name))

            def launch(grid, block, args, stream=None):
                if fail:
                    raise RuntimeError("no NVRTC here")
                assert grid == block == (1,) and isinstance(args[0], np.uint64)
                log.append(("lead", int(args[0]), stream.ptr))
            return launch
        self.RawKernel = raw_kernel


def _fake_gpu(monkeypatch, **kwargs) -> tuple[_FakeCupy, list]:
    log: list = []
    cp = _FakeCupy(log, **kwargs)
    monkeypatch.setattr(course.timing, "cupy_module", lambda: cp)
    monkeypatch.setattr(course.timing, "require_gpu", lambda: None)
    return cp, log


# ---------------------------------------------------------------- CuPy's side: course.timing.benchmark

def test_a_gpu_sample_queues_the_lead_before_its_start_event_and_n_calls_between_one_event_pair(monkeypatch):
    cp, log = _fake_gpu(monkeypatch)
    def sample(start: int, calls: int) -> list:
        return ([("lead", NS, 0x10), ("event", start, 0x10)] + [("fn",)] * calls
                + [("event", start + 1, 0x10), ("wait", start + 1)])

    t = course.benchmark(lambda: log.append(("fn",)), device="gpu", warmup=0, repeat=2, per_event=3)
    # compiled and launched once untimed, then each sample: lead, start, 3 calls, end, wait for the end
    assert log == [("compile", LEAD_KERNEL), ("lead", NS, 0x10)] + sample(1, 3) * 2
    assert np.allclose(t.samples, 6.0 / 1e3 / 3) and t.lead_s == LEAD_S and t.per_event == 3
    rec = t.as_record()
    assert rec["lead_s"] == LEAD_S and rec["calls_per_event"] == 3
    log.clear()
    course.benchmark(lambda: log.append(("fn",)), device="gpu", warmup=1, repeat=1)
    assert log == sample(3, 1) * 2                            # no second compile; the warm-up is a sample's twin


def test_a_lead_of_zero_queues_nothing_and_says_so(monkeypatch):
    cp, log = _fake_gpu(monkeypatch)
    t = course.benchmark(lambda: None, device="gpu", warmup=0, repeat=1, lead_s=0)
    assert not [e for e in log if e[0] in ("lead", "compile")] and t.lead_s == 0.0


def test_a_lead_that_cannot_launch_warns_once_and_the_records_say_lead_s_0(monkeypatch):
    cp, log = _fake_gpu(monkeypatch, fail=True)
    with pytest.warns(RuntimeWarning, match="lead spin could not be launched"):
        t = course.benchmark(lambda: None, device="gpu", warmup=0, repeat=2)
    assert t.lead_s == 0.0 and t.repeat == 2 and t.as_record()["lead_s"] == 0.0
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")                       # said once per process, not at every timing
        course.benchmark(lambda: None, device="gpu", warmup=0, repeat=1)


def test_interleaved_rounds_give_gpu_keys_their_calls_per_event_and_carry_the_lead(monkeypatch):
    from course.timing import interleaved_rounds

    cp, log = _fake_gpu(monkeypatch)
    seen = []

    def timer(fn, device, warmup, repeat, name, per_event=1):
        seen.append((name, per_event))
        return course.benchmark(fn, device=device, warmup=warmup, repeat=repeat, name=name, per_event=per_event)

    t = interleaved_rounds({"gpu": lambda: None, "cpu": lambda: None, "peer": lambda: None},
                           device={"gpu": "gpu", "cpu": "cpu", "peer": "gpu"}, warmup=0, repeat=2,
                           timer={"peer": timer}, per_event={"gpu": 4, "peer": 5})
    assert seen == [("peer", 5)] * 2
    assert (t["gpu"].per_event, t["cpu"].per_event, t["peer"].per_event) == (4, 1, 5)
    assert t["gpu"].lead_s == t["peer"].lead_s == LEAD_S and t["cpu"].lead_s is None
    assert "lead_s" not in t["cpu"].as_record() and "calls_per_event" not in t["cpu"].as_record()


def test_before_runs_before_every_turn_warm_up_turns_included():
    from course.timing import interleaved_rounds

    order = []
    interleaved_rounds({"a": lambda: order.append("a()"), "b": lambda: order.append("b()")}, warmup=1, repeat=1,
                       before=order.append)
    assert order == ["a", "a()", "b", "b()"] * 2


# ---------------------------------------------------------------- on the CPU nothing changes

def test_on_the_cpu_per_event_times_n_calls_and_keeps_their_mean(monkeypatch):
    clock = SimpleNamespace(now=10.0)
    monkeypatch.setattr(course.timing.time, "perf_counter", lambda: clock.now)
    calls = []

    def fn():
        calls.append(1)
        clock.now += 0.25 * len(calls)                       # 0.25, 0.5, 0.75, ... seconds

    t = course.benchmark(fn, warmup=0, repeat=2, per_event=2)
    assert t.samples.tolist() == [(0.25 + 0.5) / 2, (0.75 + 1.0) / 2] and len(calls) == 4
    assert t.lead_s is None and "lead_s" not in t.as_record() and t.as_record()["calls_per_event"] == 2


@pytest.mark.parametrize("kwargs, match", [({"per_event": 0}, "per_event"), ({"per_event": 1.5}, "per_event"),
                                           ({"lead_s": -1e-6}, "lead_s"), ({"lead_s": 1.0}, "lead_s"),
                                           ({"lead_s": True}, "lead_s")])
def test_bad_calls_per_event_or_lead_are_refused_by_name(kwargs, match):
    with pytest.raises(BadInputError, match=match):
        course.benchmark(time.sleep, 0, **kwargs)


# ---------------------------------------------------------------- PyTorch's side: benchmark_torch

class _TorchStream:
    def __init__(self, ptr: int, protocol: bool):
        import torch

        self.cuda_stream, self.device = ptr, torch.device("cuda", 0)
        if protocol:
            self.__cuda_stream__ = lambda: (0, ptr)


def _fake_torch_cuda(monkeypatch, log: list, protocol: bool = True) -> None:
    torch = pytest.importorskip("torch")
    import course.torch_peer as tp

    stream = _TorchStream(0x20, protocol)
    count = iter(range(1, 1000))

    class Event:
        def __init__(self, enable_timing=False):
            assert enable_timing
            self.id = next(count)

        def record(self, s):
            log.append(("torch event", self.id, s.cuda_stream))

        def synchronize(self):
            log.append(("torch wait", self.id))

        def elapsed_time(self, end):
            return 9.0

    monkeypatch.setattr(torch.cuda, "current_stream", lambda: stream)
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: log.append(("torch sync",)))
    monkeypatch.setattr(tp, "torch_device", lambda device="cpu": "cuda")


@pytest.mark.parametrize("protocol", [True, False], ids=["Stream.from_external", "ExternalStream"])
def test_the_torch_peer_queues_the_same_lead_on_pytorch_s_own_stream_before_its_start_event(monkeypatch, protocol):
    import course.torch_peer as tp

    log: list = []
    cp = _FakeCupy(log, from_external=protocol)
    monkeypatch.setattr(tp, "cupy_module", lambda: cp)
    _fake_torch_cuda(monkeypatch, log, protocol)
    t = tp.benchmark_torch(lambda: log.append(("fn",)), device="gpu", warmup=0, repeat=2, per_event=3)
    wrap = ("from_external", 0x20) if protocol else ("ExternalStream", 0x20, 0)
    lead = [("device", 0), ("lead", NS, 0x20)]
    assert log[:4] == [("compile", LEAD_KERNEL), wrap] + lead       # wrapped once, launched once untimed
    sample = lead + [("torch event", 1, 0x20), ("fn",), ("fn",), ("fn",), ("torch event", 2, 0x20), ("torch wait", 2)]
    assert log[4:] == [("torch sync",)] + sample + [(e[0], e[1] + 2, *e[2:]) if e[0].startswith("torch ") else e
                                                    for e in sample]
    assert np.allclose(t.samples, 9.0 / 1e3 / 3) and t.lead_s == LEAD_S and t.per_event == 3
    assert t.host_samples is not None and len(t.host_samples) == 2
    assert t.as_record()["calls_per_event"] == 3


def test_the_torch_peer_without_cupy_times_without_a_lead_and_says_so(monkeypatch):
    import course.torch_peer as tp

    log: list = []
    monkeypatch.setattr(tp, "cupy_module", lambda: None)
    _fake_torch_cuda(monkeypatch, log)
    t = tp.benchmark_torch(lambda: None, device="gpu", warmup=0, repeat=1)
    assert t.lead_s == 0.0 and not [e for e in log if e[0] == "lead"]


def test_the_torch_peer_on_the_cpu_passes_calls_per_event_to_the_course_stopwatch():
    from course.torch_peer import benchmark_torch

    calls = []
    t = benchmark_torch(lambda: calls.append(1), device="cpu", warmup=0, repeat=2, per_event=3)
    assert len(calls) == 6 and t.per_event == 3 and t.lead_s is None


# ---------------------------------------------------------------- the spin itself

def test_the_lead_spin_compiles_for_every_architecture_the_course_meets_without_spills():
    from course.cuda_c import ARCHS, ptxas_rows

    for arch in ARCHS:
        try:
            rows = ptxas_rows(LEAD_SPIN_SOURCE, arch)
        except FileNotFoundError as exc:
            no_compiler(str(exc))
        assert [r["kernel"] for r in rows] == [LEAD_KERNEL], rows
        assert rows[0]["spill_stores"] == rows[0]["spill_loads"] == 0 and "registers" in rows[0]
        # as CuPy's RawKernel compiles it: NVRTC, C++17, for the virtual architecture
        ok, log = compile_cuda(LEAD_SPIN_SOURCE, "lead.cu", ("--std=c++17", f"--gpu-architecture=compute_{arch[3:]}"))
        assert ok, log


def test_the_stand_in_gpu_runs_the_lead_as_a_no_op_twin(standin_gpu):
    from course.standin import kernel_twin

    assert kernel_twin(LEAD_KERNEL)((1,), (1,), (np.uint64(NS),)) is None
    t = course.benchmark(lambda: None, device="gpu", warmup=1, repeat=2, per_event=2)
    assert t.device == "gpu" and t.lead_s == LEAD_S and t.per_event == 2 and t.repeat == 2
