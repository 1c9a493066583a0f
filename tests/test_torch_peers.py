"""The PyTorch peers, reached on the CPU: a captured graph owns what it replays, TF32 is set outside every
timed call and named in every record, no profiler runs before or between timings, the optimiser is the
best PyTorch has here, and provenance reads PyTorch's TF32 switches whenever PyTorch is imported."""

from __future__ import annotations

import contextlib
import gc
import subprocess
import sys
import weakref

import numpy as np
import pytest

from course.backprop.layers import MLP
from course.backprop.trace import random_batch
from course.errors import BadInputError
from course.results import ResultSet
from course.timing import Timing

torch = pytest.importorskip("torch")

from course.backprop import timing as bt  # noqa: E402
from course.backprop.bench import SGD_KINDS, TorchStep, compare_with_torch, torch_mlp_step, torch_sgd  # noqa: E402
from course.torch_peer import set_torch_tf32, torch_tf32, torch_tf32_flags  # noqa: E402

OFF = {"torch_matmul_allow_tf32": False, "torch_cudnn_allow_tf32": False}
ON = {"torch_matmul_allow_tf32": True, "torch_cudnn_allow_tf32": True}


@pytest.fixture(autouse=True)
def tf32_restored():
    """Each test leaves PyTorch's process-wide switches as it found them, even when it fails."""
    before = torch_tf32_flags()
    yield
    torch.backends.cuda.matmul.allow_tf32 = before["torch_matmul_allow_tf32"]
    torch.backends.cudnn.allow_tf32 = before["torch_cudnn_allow_tf32"]


class _FakeGraph:
    """``torch.cuda.CUDAGraph`` on a CPU: counts its replays."""

    def __init__(self):
        self.replays = 0

    def replay(self):
        self.replays += 1


class _SideStream:
    def wait_stream(self, other):
        return None


def _fake_capture(monkeypatch) -> list:
    """``torch.cuda``'s graph and stream calls, faked: the 'capture' runs the step's code once on the CPU
    and notes the TF32 switches in force while it runs."""
    seen: list = []

    @contextlib.contextmanager
    def graph(g, **kwargs):
        seen.append(torch_tf32_flags())
        yield

    monkeypatch.setattr(torch.cuda, "CUDAGraph", _FakeGraph)
    monkeypatch.setattr(torch.cuda, "graph", graph)
    monkeypatch.setattr(torch.cuda, "Stream", _SideStream)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: _SideStream())
    return seen


# ---------------------------------------------------------------- 1. the graph owns what it replays

@pytest.mark.slow
def test_a_captured_step_owns_its_graph_and_every_tensor_the_graph_reads_or_writes(monkeypatch):
    _fake_capture(monkeypatch)
    model = MLP([6, 5, 3], seed=0)
    x, y = random_batch(model, 4)
    step = bt._torch_graph(model, x, y, 0.1, tf32=False)
    held = [step.graph, step.net, step.optimizer, step.inputs, step.labels, step.loss]
    held += [p for p in step.net.parameters()] + [p.grad for p in step.net.parameters()]
    assert all(h is not None for h in held)
    refs = [weakref.ref(h) for h in held]
    del held
    gc.collect()
    assert all(r() is not None for r in refs), "the step must keep alive what its graph replays"
    step()
    step()
    assert refs[0]().replays == 2
    del step
    gc.collect()
    assert all(r() is None for r in refs), "nothing else should hold them: they go with the step"


def test_torch_steps_capture_each_graph_under_its_tf32_setting_and_hand_eager_steps_their_own(monkeypatch):
    seen = _fake_capture(monkeypatch)
    model = MLP([6, 5, 3], seed=0)
    x, y = random_batch(model, 4)
    set_torch_tf32(False)
    torch.backends.cudnn.allow_tf32 = True                # PyTorch's own defaults
    before = torch_tf32_flags()
    steps = bt.torch_steps(model, x, y)
    assert list(steps) == ["torch eager", "torch graph", "torch eager tf32", "torch graph tf32"]
    assert seen == [OFF, ON]                              # what each capture kept
    assert torch_tf32_flags() == before                   # and the switches are back
    assert [s.tf32 for s in steps.values()] == [False, False, True, True]
    assert all(isinstance(steps[k], TorchStep) for k in ("torch eager", "torch eager tf32"))
    assert all(isinstance(steps[k], bt.TorchGraphStep) for k in ("torch graph", "torch graph tf32"))
    assert {s.sgd for s in steps.values()} <= set(SGD_KINDS)


# ---------------------------------------------------------------- 2. and 3. the ladder's peers

def test_the_ladder_runs_no_profiler_and_sets_each_eager_peer_s_tf32_outside_its_timed_calls(standin_gpu, monkeypatch):
    from course.timing import benchmark

    calls, timers = [], []

    class SpyStep(TorchStep):
        def __call__(self):
            calls.append((self.tf32, torch_tf32_flags()))

    def fake_steps(model, x, y, lr=1e-3):
        eager = {tf32: SpyStep(None, None, None, None, "fused", tf32) for tf32 in (False, True)}
        graph = {tf32: bt.TorchGraphStep(_FakeGraph(), SpyStep(None, None, None, None, "fused"), None, tf32)
                 for tf32 in (False, True)}
        return {"torch eager": eager[False], "torch graph": graph[False], "torch eager tf32": eager[True],
                "torch graph tf32": graph[True]}

    def timer(fn, device, warmup, repeat, name, per_event=1):
        timers.append((name, per_event))
        return benchmark(fn, device="cpu", warmup=warmup, repeat=repeat, name=name, per_event=per_event)

    def no_profiler(*args, **kwargs):
        raise AssertionError("a profiler ran before or between timings")

    monkeypatch.setattr(bt, "torch_cuda_available", lambda: True)
    monkeypatch.setattr(bt, "torch_steps", fake_steps)
    monkeypatch.setattr(bt, "benchmark_torch", timer)
    monkeypatch.setattr(torch.profiler, "profile", no_profiler)
    set_torch_tf32(False)
    torch.backends.cudnn.allow_tf32 = True
    before = torch_tf32_flags()
    rs = bt.ladder_sweep(widths=(8,), batch=4, devices=["gpu"], repeat=3, budget_s=0.05)
    assert torch_tf32_flags() == before                    # put back after the rounds
    eager_calls = [(tf32, flags) for tf32, flags in calls if tf32 is not None]
    assert eager_calls and all(flags == (ON if tf32 else OFF) for tf32, flags in eager_calls)
    assert {p for _, p in timers} == {bt.LADDER_PER_EVENT}
    peers = [r for r in rs.records if r["rung"].startswith("torch")]
    assert sorted(r["rung"] for r in peers) == sorted(bt.PEER_TITLES)
    for r in peers:
        assert r["gpu_kernels"] is None and r["count_how"] == bt.PEER_COUNT_HOW and r["torch_sgd"] == "fused"
        assert r["tf32"] is r["rung"].endswith("tf32") and r["calls_per_event"] == bt.LADDER_PER_EVENT
    rungs = [r for r in rs.records if not r["rung"].startswith("torch")]
    assert rungs and all(r["calls_per_event"] == bt.LADDER_PER_EVENT and r["lead_s"] > 0 and r["tf32"] is False
                         for r in rungs)


def test_the_profiler_helper_that_ran_before_the_timings_is_gone():
    assert not hasattr(bt, "torch_kernels") and "torch_kernels" not in bt.__all__


# ---------------------------------------------------------------- 4. the best SGD PyTorch has here

def test_the_eager_peer_uses_pytorch_s_best_sgd_and_says_which():
    model = MLP([6, 5, 3], seed=0)
    step, net = torch_mlp_step(model, *random_batch(model, 4), lr=0.1)
    assert step.sgd in SGD_KINDS and step.net is net
    assert step.optimizer.defaults["fused"] == (step.sgd == "fused")
    r = compare_with_torch((6, 5, 3), batch=4, rounds=1, repeat=1, settle_s=0.0)
    assert r["torch_sgd"] in SGD_KINDS and r["torch_tf32"] is False and r["ours_tf32"] is False


def test_without_a_fused_sgd_the_cpu_peer_falls_back_to_pytorch_s_plain_loop(monkeypatch):
    real = torch.optim.SGD

    class NoFused(real):
        def __init__(self, params, lr=1e-3, **kwargs):
            if kwargs.get("fused"):
                raise TypeError("__init__() got an unexpected keyword argument 'fused'")    # an older PyTorch
            super().__init__(params, lr=lr, **kwargs)

    monkeypatch.setattr(torch.optim, "SGD", NoFused)
    net = torch.nn.Linear(3, 2)
    opt, kind = torch_sgd(net.parameters(), 0.1)
    assert kind == "for-loop" and opt.defaults["foreach"] is False and opt.defaults["lr"] == 0.1


# ---------------------------------------------------------------- 5. cuDNN's RNN runs strict float32 unless asked

def test_the_cudnn_peer_runs_with_tf32_off_unless_asked_and_says_which(monkeypatch):
    import course.bppsa.timing as bp

    seen = []

    def rounds(fns, device, **kwargs):
        for fn in fns.values():
            fn()
        seen.append(torch_tf32_flags())
        return {k: Timing(samples=np.array([1e-3]), device="gpu") for k in fns}

    monkeypatch.setattr(bp, "torch_device", lambda device: "cpu")      # the GPU's flags, on CPU tensors
    monkeypatch.setattr(bp, "require_fits", lambda *a, **k: None)
    monkeypatch.setattr(bp, "interleaved_rounds", rounds)
    set_torch_tf32(False)
    torch.backends.cudnn.allow_tf32 = True                # PyTorch's default lets cuDNN use TF32
    before = torch_tf32_flags()
    assert bp.torch_rnn_timings(6, 3, 2, device="gpu", repeat=1)["tf32"] is False
    assert bp.torch_rnn_timings(6, 3, 2, device="gpu", repeat=1, tf32=True)["tf32"] is True
    assert seen == [OFF, ON] and torch_tf32_flags() == before
    with pytest.raises(BadInputError, match="tf32 must be True"):
        bp.torch_rnn_timings(6, 3, 2, tf32=1)


def test_every_bppsa_record_names_the_tf32_setting_of_its_side():
    from course.bppsa.timing import rnn_sweep, torch_rnn_timings

    assert torch_rnn_timings(6, 3, 2, repeat=1, tf32=True)["tf32"] is False     # no TF32 on a CPU
    rs = rnn_sweep(Ts=[8], hidden_size=3, batch=2, devices=["cpu"], repeat=1)
    assert {r["method"] for r in rs.records} == {"sequential", "scan", "torch"}
    assert all(r["tf32"] is False for r in rs.records) and "tf32" in rs.params


# ---------------------------------------------------------------- TF32 switches, both of PyTorch's APIs

def test_torch_tf32_sets_both_switches_inside_and_restores_them_after():
    set_torch_tf32(False)
    torch.backends.cudnn.allow_tf32 = True
    with torch_tf32(True):
        assert torch_tf32_flags() == ON
        with torch_tf32(False):
            assert torch_tf32_flags() == OFF
        assert torch_tf32_flags() == ON
    assert torch_tf32_flags() == {"torch_matmul_allow_tf32": False, "torch_cudnn_allow_tf32": True}
    with pytest.raises(BadInputError, match="tf32 must be"):
        set_torch_tf32("yes")


@pytest.mark.slow
def test_switches_set_through_pytorch_s_newer_api_are_read_and_restored_through_it():
    if not hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        pytest.skip("this PyTorch has only the legacy TF32 switches")
    code = ("import torch\n"
            "from course.torch_peer import torch_tf32, torch_tf32_flags\n"
            "torch.backends.cuda.matmul.fp32_precision = 'tf32'\n"    # now the legacy read refuses
            "with torch_tf32(False):\n"
            "    inside = torch_tf32_flags()\n"
            "print(inside == {'torch_matmul_allow_tf32': False, 'torch_cudnn_allow_tf32': False},\n"
            "      torch.backends.cuda.matmul.fp32_precision, torch_tf32_flags()['torch_matmul_allow_tf32'])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "tf32", "True"]


# ---------------------------------------------------------------- 6. provenance, whatever the order of imports

def _gpu_set(**env) -> ResultSet:
    return ResultSet("demo", provenance={"date": "2026-01-01", "cpu": {}, "libraries": {}, "gpus": [{"name": "G"}],
                                         "gpu_environment": dict(env)})


def test_provenance_reads_pytorch_s_tf32_switches_at_save_time_when_pytorch_came_later(tmp_path):
    rs = _gpu_set()
    doc = rs.to_dict()
    env = doc["provenance"]["gpu_environment"]
    assert env["tf32"] == torch_tf32_flags() and env["tf32_read"] == "when the results were saved"
    made = _gpu_set(tf32=OFF, tf32_read="when the result set was made")
    assert made.to_dict()["provenance"]["gpu_environment"]["tf32"] == OFF          # an earlier reading stays
    ref = _gpu_set()
    ref.source = "reference"
    assert "tf32" not in ref.to_dict()["provenance"]["gpu_environment"]           # a recording is never touched


def test_provenance_never_imports_pytorch_to_read_its_switches():
    code = ("import sys\n"
            "from course.results import ResultSet\n"
            "rs = ResultSet('demo', provenance={'date': '', 'cpu': {}, 'libraries': {}, 'gpus': [{'name': 'G'}],\n"
            "                                   'gpu_environment': {}})\n"
            "doc = rs.to_dict()\n"
            "print('torch' in sys.modules, 'tf32' in doc['provenance']['gpu_environment'])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "False"]
