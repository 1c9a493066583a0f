"""Lesson 01's measurements of the training step: one step traced layer by layer
(:func:`trace_step`, on :func:`~course.backprop.trace.describe_step`'s records), one step timed
(:func:`time_train_step`), whole steps against the hidden width (:func:`step_time_sweep`, for the
report and the notebook's CPU-versus-GPU plot), and the fast step's ladder (:func:`ladder_sweep`): each
rung of :class:`~course.backprop.fast_step.FastStep` at several hidden widths and, on a GPU, PyTorch's
eager and ``torch.cuda.graph`` steps beside them (TF32 off, and on, labelled), each with its launches
per step (array calls counted on the CPU by :mod:`~course.backprop.counting`: a lower bound of a GPU's
kernels), its ``gpu_kernels`` (the kernel nodes of a captured step; PyTorch's are counted from the
timeline recorded at the end of a GPU run, since a profiler would slow every timing after it) and
its reads back.  On a CPU only rungs (a) and (b) run: the fused kernels are CUDA C.  A trace or a ladder,
measured or recorded, is read by :mod:`~course.backprop.readers` (tables and sentences from the records);
:func:`float32_gemm_rate` gives the matrix-product rate to read a GPU ladder against.

>>> rs = ladder_sweep(widths=(16,), batch=8, devices=["cpu"], repeat=3, budget_s=0.05)
>>> sorted({r["rung"] for r in rs.records})
['eager', 'no_readback']
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from ..arguments import Devices, Dtype, Given, OneOf, Optional, Real, Whole, Wholes, arguments
from ..capture import capture_graph, graph_kernels
from ..devices import normalize_device, resolve_devices, synchronize
from ..errors import whole_number
from ..limits import require_fits
from ..results import ResultSet
from ..timing import benchmark, interleaved_rounds
from ..torch_peer import benchmark_torch, cupy_tf32, set_torch_tf32, torch_cuda_available, torch_tf32
from .bench import TorchStep, torch_mlp_step
from .counting import CountingNumpy
from .fast_step import RUNGS, FastStep, declared_counts
from .layers import ACTIVATIONS, MLP, validate_model
from .readers import validate_results
from .trace import StepTrace, describe_step, random_batch
from .validate import validate_inputs, validate_kind, validate_lr

__all__ = ["trace_step", "time_train_step", "step_time_sweep", "CPU_RUNGS", "GPU_RUNGS", "PEER_TITLES", "step_counts",
           "captured_kernels", "torch_steps", "TorchGraphStep", "ladder_sweep", "float32_gemm_rate",
           "LADDER_PER_EVENT", "PEER_COUNT_HOW"]


def trace_step(model: MLP, x: Any, y: Any, repeat: int = 5, budget_s: float = 2.0) -> StepTrace:
    """Trace one training step of ``model`` on ``(x, y)``: per-layer ops, FLOPs and times.

    The weights are left as they were (no update is applied).  Each layer is timed on copies of the
    inputs it saw in the step (:func:`~course.backprop.trace.describe_step`), as the teaching step runs
    it.  The timings run in rounds, each timing every operation once, so a moment when the machine is
    busy hits one sample of every operation rather than all samples of one; ``repeat`` rounds at most
    (at least 3), the median of each operation is kept, and no new round starts after ``budget_s``
    seconds.

    >>> import numpy as np
    >>> m = MLP([64, 32, 10])
    >>> t = trace_step(m, np.ones((16, 64), np.float32), np.zeros(16, dtype=np.int64), repeat=2)
    >>> t.step_s > 0 and all(r.forward_s > 0 for r in t.layers)
    True
    """
    repeat = whole_number("repeat", repeat, hi=10_000, hint="rounds of timed operations, e.g. 5")
    tr, calls = describe_step(model, x, y)
    jobs: dict[str, tuple[Any, str, Callable[[], Any]]] = {}   # name -> (record, field, call), timed below
    for i, (rec, forward, backward) in enumerate(calls):
        jobs |= {f"{i} forward": (rec, "forward_s", forward), f"{i} backward": (rec, "backward_s", backward)}
    x, y = validate_inputs(model, x, y)
    jobs["whole step"] = (tr, "step_s", partial(model.train_step, x, y, 1e-12))
    tr.noisy = _time_jobs(model, jobs, repeat, budget_s)
    return tr


def _time_jobs(model: MLP, jobs: dict, repeat: int, budget_s: float) -> bool:
    """Time every job in interleaved rounds (at least 3), store each median on its record, put the
    weights back; True when any of the timings is noisy."""
    saved = [p.copy() for p in model.parameters()]
    t = interleaved_rounds({k: call for k, (_, _, call) in jobs.items()}, model.device, warmup=1,
                           repeat=max(int(repeat), 3), budget_s=budget_s, min_rounds=3)
    for k, (obj, name, _) in jobs.items():
        setattr(obj, name, t[k].median)
    for p, s in zip(model.parameters(), saved):
        p[...] = s                               # leave the model as it was
    synchronize(model.device)
    return any(v.noisy for v in t.values())


@arguments(sizes=Wholes(min_len=2, hint="the layer widths, input first, e.g. [784, 128, 10]"),
           batch=Whole(hint="the examples in one step"), device=Given(normalize_device),
           dtype=Dtype(device="device", floating=True), activation=OneOf(*ACTIVATIONS),
           repeat=Whole(hi=10_000, hint="timed steps, e.g. 5"),
           budget_s=Optional(Real(above=0, hint="seconds of timing")))
def time_train_step(sizes: Sequence[int], batch: int = 256, dtype: Any = "float32", device: Any = "cpu",
                    activation: str = "relu", repeat: int = 5, budget_s: float | None = 1.0) -> dict:
    """Time one ``train_step`` of ``MLP(sizes)`` on a random batch: a record
    (:meth:`course.timing.Timing.as_record`) with the sizes, batch, dtype and activation."""
    dev = device
    model = MLP(sizes, activation=activation, dtype=dtype, device=dev)
    widest = max(sizes)
    require_fits(int(3 * batch * sum(sizes) * model.dtype.itemsize + 3 * model.n_parameters()
                   * model.dtype.itemsize + batch * widest), dev,
               what=f"an MLP {list(sizes)} step on a batch of {batch:,}")
    x, y = random_batch(model, batch)
    t = benchmark(model.train_step, x, y, 1e-3, device=dev, warmup=2, repeat=repeat, budget_s=budget_s,
                  name=f"train step {'-'.join(map(str, sizes))} batch {batch}")
    return t.as_record(sizes=[int(s) for s in sizes], batch=batch, dtype=model.dtype.name, activation=activation)


@arguments(widths=Wholes(hint="the hidden widths, e.g. [64, 128, 256]"), depth=Whole(hint="the hidden layers"),
           batch=Whole(hint="the examples in one step"), n_in=Whole(hint="the input features"),
           n_out=Whole(hint="the classes"), dtype=Dtype(floating=True), devices=Devices(),
           repeat=Whole(hi=10_000, hint="timed rounds, e.g. 5"),
           budget_s=Optional(Real(above=0, hint="seconds per network")))
def step_time_sweep(widths: Sequence[int] = (64, 128, 256, 512, 1024), depth: int = 2, batch: int = 256,
                    n_in: int = 784, n_out: int = 10, dtype: Any = "float32",
                    devices: Sequence[str] | None = None, repeat: int = 5, budget_s: float = 0.5,
                    progress: Callable | None = None) -> ResultSet:
    """Training-step time against hidden width (``depth`` hidden layers) on each device.

    Every network is built first; then rounds time one step of each in turn (at
    most ``repeat`` rounds, at least 3, no new round once ``budget_s`` seconds per
    network have passed), and each record keeps the median and quartiles.
    """
    devs = devices
    rs = ResultSet("backprop_train_step", params={"widths": list(widths), "depth": depth, "batch": batch,
                                                  "n_in": n_in, "n_out": n_out, "dtype": str(dtype)})
    models = {}
    for d in devs:
        for w in widths:
            sizes = [n_in] + [int(w)] * depth + [n_out]
            model = MLP(sizes, dtype=dtype, device=d)
            require_fits(int(3 * batch * sum(sizes) * model.dtype.itemsize
                           + 3 * model.n_parameters() * model.dtype.itemsize), d,
                       what=f"an MLP {sizes} step at batch {batch}")
            models[f"{d} width {w}"] = d, int(w), model, partial(model.train_step, *random_batch(model, batch), 1e-3)
    t = interleaved_rounds({k: m[3] for k, m in models.items()}, {k: m[0] for k, m in models.items()}, warmup=1,
                           repeat=max(int(repeat), 3), min_rounds=3, progress=progress, desc="train-step sweep",
                           budget_s=None if budget_s is None else budget_s * len(models))
    for k, (_, w, model, _) in models.items():
        flops = model.flops_per_step(batch)
        rs.add_timing(t[k], width=w, depth=depth, batch=batch, dtype=str(dtype), flops=flops,
                      gflops=flops / t[k].median / 1e9)
    if any(v.stopped_early for v in t.values()):
        rs.notes.append(f"timing stopped after {min(v.repeat for v in t.values())} rounds by the time budget")
    return rs


# ----------------------------------------------------------------------------- the fast step's ladder

CPU_RUNGS = ("eager", "no_readback")
GPU_RUNGS = RUNGS
PEER_TITLES = {"torch eager": "PyTorch eager, TF32 off", "torch graph": "PyTorch, torch.cuda.graph, TF32 off",
               "torch eager tf32": "PyTorch eager, TF32 ON", "torch graph tf32": "PyTorch, torch.cuda.graph, TF32 ON"}
#: Steps between one pair of CUDA events in a GPU sample of the ladder: each sample is their mean.
LADDER_PER_EVENT = 10


@arguments(rung=OneOf(*GPU_RUNGS), sizes=Wholes(min_len=2, hint="the layer widths, e.g. [784, 512, 512, 10]"),
           batch=Whole(hint="the examples in one step"))
def step_counts(rung: str, sizes: Sequence[int] = (784, 512, 512, 10), batch: int = 8) -> dict:
    """``{"launches", "reads", "names", "how"}`` of one step of ``rung``, counted on the CPU (the
    graph rung: declared, since only a GPU captures one)."""
    if rung == "graph":
        return declared_counts("graph", len(sizes) - 1) | {"names": {}, "how": "declared"}
    ns, model = CountingNumpy(), MLP(list(sizes), seed=0)
    fast = FastStep(model, rung, batch=batch, lr=1e-3, namespace=ns)
    fast.load(*random_batch(model, batch))
    fast.step()                       # the first step makes what later steps reuse: count the second
    ns.counter.reset()
    fast.step()
    c = ns.counter
    return {"launches": c.launches, "reads": c.reads, "names": dict(c.names), "how": "counted on the CPU"}


@arguments(fast=Given(validate_kind, kind=FastStep, name="fast", what="a FastStep (FastStep(model, rung))"))
def captured_kernels(fast: FastStep) -> int | None:
    """Kernel nodes in one step of ``fast`` captured as a CUDA graph: its graph at rung ``"graph"``, a
    capture of one step at rung ``"fused"`` (capturing runs nothing, so the weights stay as they are).
    None on a CPU and for the rungs CUDA cannot capture (``"eager"``, ``"no_readback"``: CuPy's cuBLAS
    and CUB calls, allocations, reads back); their kernels are counted from the timeline recorded at the
    end of a GPU run.  A fused step that fails to capture says why (a warning) and gives None."""
    if fast.device != "gpu" or fast.rung in ("eager", "no_readback"):
        return None
    graph = fast.graph
    if fast.rung == "fused":
        before = fast.params.copy()

        def warm_up() -> None:                  # kernels compiled, cuBLAS's workspace for the side stream made
            fast.step()
            fast.params[...] = before

        graph = capture_graph(fast.step, what="the fused step (counting)", warmup=warm_up).graph
    counts = graph_kernels(graph)
    return None if counts is None else int(counts["kernels"])


@arguments(model=Given(validate_model), lr=Given(validate_lr))
def torch_steps(model: MLP, x: Any, y: Any, lr: float = 1e-3) -> dict[str, TorchStep | TorchGraphStep]:
    """PyTorch's step of a copy of ``model`` on a GPU: eager, and captured with ``torch.cuda.graph``,
    each meant for TF32 off and on.  Every step is a callable that owns what it reads and writes.

    Each step's ``tf32`` says the setting it runs under.  A graph keeps the setting in force when it
    was captured (set here, outside any timing); an eager step runs under whatever is in force when it
    is called, so its caller sets the switches outside the timed call (:func:`ladder_sweep` does, in
    :func:`~course.timing.interleaved_rounds`'s ``before`` hook).  ``sgd`` names the optimiser.
    """
    out: dict[str, TorchStep | TorchGraphStep] = {}
    for tf32 in (False, True):
        suffix = " tf32" if tf32 else ""
        out["torch eager" + suffix], _ = torch_mlp_step(model, x, y, lr)
        out["torch eager" + suffix].tf32 = tf32
        with torch_tf32(tf32):                 # a graph keeps the TF32 setting it was captured with
            out["torch graph" + suffix] = _torch_graph(model, x, y, lr, tf32)
    return out


class TorchGraphStep:
    """A PyTorch training step captured with ``torch.cuda.graph``; calling it replays the graph.

    A ``torch.cuda.CUDAGraph`` holds no reference to the tensors its kernels read and write: once the
    last Python reference to the static inputs, the labels, the parameters, their gradients or the loss
    is gone, the caching allocator hands their blocks to other tensors while every replay still reads
    and writes them (garbage labels then trip ``nll_loss``'s device-side assert, which ends the CUDA
    context for CuPy as well).  So this object owns the graph *and* all of them (``step``: the
    :class:`~course.backprop.bench.TorchStep` whose net, optimiser, inputs and labels were captured;
    ``loss``: the captured loss tensor).  Keep it while the graph may be replayed.
    """

    @arguments(step=Given(validate_kind, kind=TorchStep, name="step", what="the TorchStep whose tensors were captured"),
               tf32=OneOf(True, False))
    def __init__(self, graph: Any, step: TorchStep, loss: Any, tf32: bool):
        self.graph, self.step, self.loss, self.tf32 = graph, step, loss, tf32
        self.net, self.optimizer, self.inputs, self.labels = step.net, step.optimizer, step.inputs, step.labels
        self.sgd = step.sgd

    def __call__(self) -> None:
        self.graph.replay()


def _torch_graph(model: MLP, x: Any, y: Any, lr: float, tf32: bool) -> TorchGraphStep:
    """PyTorch's whole-network recipe: warm up on a side stream, set the gradients to None (so that
    backward makes them in the graph's own memory pool), capture forward, backward and step."""
    import torch

    step, _ = torch_mlp_step(model, x, y, lr)            # its own copy: the graph keeps its grads
    net, opt, tx, ty = step.net, step.optimizer, step.inputs, step.labels
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(net(tx), ty).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        loss = torch.nn.functional.cross_entropy(net(tx), ty)
        loss.backward()
        opt.step()
    step.tf32 = tf32
    return TorchGraphStep(graph, step, loss, tf32)


#: How a PyTorch peer's kernels are counted: never by a profiler before or between timings (CUPTI, once
#: attached, slows every later launch of the process by 10-20 %: PyTorch issue 144455).
PEER_COUNT_HOW = ("not counted here: PyTorch's kernels come from the timeline recorded at the end of the GPU "
                  "run (course.timeline.record_timelines), after every timing")


def ladder_sweep(widths: Sequence[int] = (64, 128, 256, 512, 1024, 2048, 4096), batch: int = 256,
                 devices: Sequence[str] | None = None, peers: bool = True, repeat: int = 10,
                 budget_s: float | None = 1.0, progress: Callable | None = None,
                 per_event: int = LADDER_PER_EVENT) -> ResultSet:
    """Each rung's step time at each width (784-w-w-10, float32), with its counts; PyTorch beside them.

    Records: ``device``, ``width``, ``rung`` (a rung of :data:`GPU_RUNGS`, or a key of
    :data:`PEER_TITLES`), ``title``, the timing, ``flops``, ``launches``, ``reads``, ``gpu_kernels``
    and ``tf32`` (the setting that ran); PyTorch's records also ``torch_sgd`` (its optimiser).  (No
    ``dtype`` field: the plain ``backprop_train_step`` curves select on it.)

    On a GPU each sample is the mean of ``per_event`` steps between one pair of CUDA events (behind the
    lead spin of :mod:`course.lead_spin`): the steady-state time per step, which for a step bound by its
    host includes the host's gaps.  No profiler runs here (it would slow every later launch): PyTorch's
    kernels are counted from the timeline recorded at the end of a GPU run.  PyTorch's TF32 switches are
    set for each eager peer before its turn, outside the timed calls, and put back afterwards.
    """
    batch = whole_number("batch", batch, hint="the examples in one step")
    rs = ResultSet("backprop_step_ladder", params={"widths": [int(w) for w in widths], "batch": batch,
                                                   "sizes": "784-w-w-10", "dtype": "float32"})
    counts = {r: step_counts(r) for r in GPU_RUNGS}
    jobs, devs, timers, info = {}, {}, {}, {}
    for d in resolve_devices(devices or None):
        for w in widths:
            model = MLP([784, int(w), int(w), 10], device=d, seed=0)
            x, y = random_batch(model, batch)
            for rung in (GPU_RUNGS if d == "gpu" else CPU_RUNGS):
                fast = FastStep(model, rung, batch=batch, lr=1e-3)
                fast.load(x, y)
                key = f"{d} {w} {rung}"
                jobs[key], devs[key] = fast.step, d
                info[key] = {"device": d, "width": int(w), "rung": rung, "title": fast.title,
                             "capture_failed": fast.capture_failed,
                             "flops": model.flops_per_step(batch), "launches": counts[rung]["launches"],
                             "reads": counts[rung]["reads"], "count_how": counts[rung]["how"],
                             "gpu_kernels": captured_kernels(fast) if d == "gpu" else None,
                             "tf32": cupy_tf32() if d == "gpu" else False}
            if d == "gpu" and peers and torch_cuda_available():
                for name, step in torch_steps(model, x, y).items():
                    key = f"{d} {w} {name}"
                    jobs[key], devs[key], timers[key] = step, d, benchmark_torch   # jobs keeps each graph's owner
                    info[key] = {"device": d, "width": int(w), "rung": name, "title": PEER_TITLES[name],
                                 "flops": model.flops_per_step(batch), "launches": None, "reads": None,
                                 "count_how": PEER_COUNT_HOW, "gpu_kernels": None, "tf32": step.tf32,
                                 "torch_sgd": step.sgd}
    eager_tf32 = {k: jobs[k].tf32 for k in timers if isinstance(jobs[k], TorchStep)}
    with torch_tf32(False) if timers else contextlib.nullcontext():   # put PyTorch's switches back afterwards
        t = interleaved_rounds(jobs, devs, warmup=1, repeat=max(int(repeat), 3), min_rounds=3, timer=timers or None,
                               budget_s=None if budget_s is None else budget_s * len(jobs), progress=progress,
                               desc="step ladder", before=lambda k: _peer_flags(eager_tf32, k),
                               per_event={k: per_event for k, d in devs.items() if d == "gpu"})
    for key, rec in info.items():
        rs.add_timing(t[key], **rec, gflops=rec["flops"] / t[key].median / 1e9)
    if any(v.stopped_early for v in t.values()):
        rs.notes.append(f"timing stopped after {min(v.repeat for v in t.values())} rounds by the time budget")
    return rs


def _peer_flags(eager_tf32: dict[str, bool], key: str) -> None:
    """Before a PyTorch eager step's turn (untimed): set PyTorch's TF32 switches to its own setting."""
    if key in eager_tf32:
        set_torch_tf32(eager_tf32[key])


@arguments(ladder=Given(validate_results, name="ladder"), n=Whole(lo=16, hi=32768, hint="the product's side"))
def float32_gemm_rate(ladder: ResultSet, n: int = 4096) -> tuple[float | None, str]:
    """``(GFLOP/s, what it is)``: the float32 matrix-product rate to judge ``ladder``'s GPU steps against.

    Measured now (an n×n CuPy product) when ``ladder`` was measured live on this machine's GPU; else the
    n×n point of the matrix-product sweep recorded on the same GPU, labelled with its own date; else
    ``(None, why)``.
    """
    if ladder.source != "reference" and ladder.select(device="gpu"):
        from ..hardware import time_matmul  # lesson 00's timing of one product

        rate = time_matmul(n, "float32", device="gpu", repeat=5, budget_s=0.5)["gflops"]
        return rate, f"of a {n:,}² CuPy product measured now on this GPU, TF32 {'ON' if cupy_tf32() else 'off'}"
    from ..results import load_reference

    for rs in load_reference("matmul_sweep"):
        recs = rs.select(device="gpu", n=n, dtype="float32")
        if rs.gpu_name == ladder.gpu_name and recs:
            return recs[0]["gflops"], f"of a {n:,}² CuPy product (TF32 off, CuPy's default), {rs.label}"
    return None, f"no float32 matrix-product rate recorded on {ladder.gpu_name or 'this GPU'}"
