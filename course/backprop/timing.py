"""Lesson 01's measurements of the training step: one step traced layer by layer
(:func:`trace_step`, on :func:`~course.backprop.trace.describe_step`'s records), one step timed
(:func:`time_train_step`), whole steps against the hidden width (:func:`step_time_sweep`, for the
report and the notebook's CPU-versus-GPU plot), and the fast step's ladder (:func:`ladder_sweep`): each
rung of :class:`~course.backprop.fast_step.FastStep` at several hidden widths and, on a GPU, PyTorch's
eager and ``torch.cuda.graph`` steps beside them (TF32 off, and on, labelled), each with its launches
per step (array calls counted on the CPU by :mod:`~course.backprop.counting`: a lower bound of a GPU's
kernels), its ``gpu_kernels`` (the kernel nodes of a captured step; PyTorch's are counted from the
timeline recorded at the end of a GPU run, since a profiler would slow every timing after it) and
its reads back.  On a CPU only rungs (a) and (b) run: the fused kernels are CUDA C.  A ladder, measured or
recorded, is read by :func:`ladder_table` (one width), :func:`ladder_widths_table` (every width) and
:func:`ladder_lines` (the GPU's speed-up from its fastest step, PyTorch beside it, the growth with the work).

>>> rs = ladder_sweep(widths=(16,), batch=8, devices=["cpu"], repeat=3, budget_s=0.05)
>>> sorted({r["rung"] for r in rs.records})
['eager', 'no_readback']
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

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
from .layers import MLP
from .trace import LayerTrace, StepTrace, describe_step, random_batch
from .validate import validate_inputs

__all__ = ["trace_step", "time_train_step", "step_time_sweep", "trace_to_results", "trace_from_results",
           "step_ratio_lines", "CPU_RUNGS", "GPU_RUNGS", "PEER_TITLES", "step_counts", "captured_kernels",
           "torch_steps", "TorchGraphStep", "ladder_sweep", "ladder_table", "ladder_widths_table", "ladder_lines",
           "float32_gemm_rate", "LADDER_PER_EVENT", "PEER_COUNT_HOW"]


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


def trace_to_results(tr: StepTrace, rs: ResultSet | None = None) -> ResultSet:
    """Store a trace as records (one per layer, plus the whole step) of a ``backprop_layer_trace`` set."""
    rs = rs if rs is not None else ResultSet("backprop_layer_trace", params={"model": tr.model, "batch": tr.batch})
    for i, r in enumerate(tr.layers):
        rs.add(device=tr.device, layer=i, name=r.name, kind=r.kind, in_shape=list(r.in_shape),
               out_shape=list(r.out_shape), forward_ops=r.forward_ops, backward_ops=r.backward_ops,
               forward_flops=r.forward_flops, backward_flops=r.backward_flops, matmul_flops=r.matmul_flops,
               forward_s=r.forward_s, backward_s=r.backward_s, model=tr.model, batch=tr.batch)
    rs.add(device=tr.device, layer=-1, name="whole step", step_s=tr.step_s, model=tr.model, batch=tr.batch,
           noisy=tr.noisy)
    return rs


def trace_from_results(rs: ResultSet, device: str = "cpu") -> StepTrace | None:
    """Rebuild the :class:`StepTrace` of ``device`` from :func:`trace_to_results` records (None if absent)."""
    recs = sorted((r for r in rs.select(device=device) if r.get("layer", -1) >= 0), key=lambda r: r["layer"])
    if not recs:
        return None
    step = [r for r in rs.select(device=device) if r.get("layer") == -1]
    fields = ("name", "kind", "forward_ops", "backward_ops", "forward_flops", "backward_flops",
              "matmul_flops", "forward_s", "backward_s")
    layers = [LayerTrace(in_shape=tuple(r["in_shape"]), out_shape=tuple(r["out_shape"]),
                         **{k: r[k] for k in fields}) for r in recs]
    return StepTrace(layers=layers, step_s=step[0]["step_s"] if step else float("nan"), device=device,
                     model=recs[0]["model"], batch=recs[0]["batch"], noisy=bool(step and step[0].get("noisy")))


def _gflops(rs: ResultSet, device: str, n: int) -> tuple[float, int] | None:
    recs = [r for r in rs.select(device=device, n=n) if r.get("gflops")]
    return (recs[0]["gflops"], recs[0].get("threads", 0)) if recs else None


def step_ratio_lines(cpu: StepTrace, gpu: StepTrace, flops: float, peak_flops: float | None = None,
                     matmul: ResultSet | None = None, n: int = 512) -> list[str]:
    """What the ratio of a CPU step to a recorded GPU step measures, in sentences printed from the numbers.

    ``cpu`` and ``gpu`` are traces of the same step; ``flops`` its counted FLOPs; ``peak_flops`` the
    float32 matrix-product rate recorded on that GPU (the roofline reference), and ``matmul`` the
    reference's square matrix-product sweep (CPU and GPU), read at ``n`` and at its largest size: the
    speed-up of the products alone, beside the step's.  A whole step that took far more or less than the
    sum of its layers timed alone is flagged.
    """
    lines = [f"The teaching step, run eagerly: this CPU's time over the GPU's, {cpu.step_s / gpu.step_s:.1f}× "
             f"({cpu.step_s * 1e3:.3f} ms on this CPU, {gpu.step_s * 1e3:.3f} ms on the GPU; the same step, float32)."]
    for who, tr in (("this CPU", cpu), ("the GPU", gpu)):
        parts = tr.forward_s + tr.backward_s
        if not 0.8 <= tr.step_s / parts <= 1.25:
            lines.append(f"  Flag: on {who} the whole step took {tr.step_s / parts:.2f}× the sum of its layers timed "
                         f"alone ({parts * 1e3:.3f} ms): the whole step also runs the update and its allocations, and "
                         "a busy moment moves it; the ratio above carries that difference.")
    rate = flops / gpu.step_s
    loss = [r for r in gpu.layers if r.kind == "loss"]
    lines.append("What that ratio measures: the cost of each call on the host, not the GPU's arithmetic, nor its "
                 "training speed-up (the ladder below prints that from its fastest step). The "
                 f"GPU step ran at {rate / 1e9:,.0f} GFLOP/s"
                 + (f", {100 * rate / peak_flops:.2f} % of the {peak_flops / 1e12:,.0f} TFLOP/s float32 "
                    "matrix-product rate recorded on the same GPU" if peak_flops else "")
                 + "; its element-wise layers and loss, a sliver of the FLOPs, took "
                 f"{100 * (1 - gpu.matmul_share):.0f} % of the layer-by-layer time"
                 + (f", the loss alone {1e3 * (loss[0].forward_s + loss[0].backward_s):.2f} ms (its label check "
                    "reads the labels' smallest and largest value back to the host, and each read waits for the GPU)"
                    if loss else "") + ".")
    g, c = (_gflops(matmul, d, n) for d in ("gpu", "cpu")) if matmul is not None else (None, None)
    if g:
        here = sum(r.matmul_flops for r in cpu.layers) / max(sum(r.forward_s + r.backward_s for r in cpu.layers
                                                                  if r.kind == "linear"), 1e-30)
        top = max(r["n"] for r in matmul.select(device="gpu"))
        g_top, c_top = _gflops(matmul, "gpu", top), _gflops(matmul, "cpu", top)
        lines.append(f"The matrix products alone (float32): the reference GPU's {n}×{n} product, about this step's "
                     f"size, ran at {g[0]:,.0f} GFLOP/s, {g[0] * 1e9 / here:,.0f}× this CPU's Linear layers above "
                     f"({here / 1e9:,.0f} GFLOP/s)"
                     + (f" and {g[0] / c[0]:.1f}× the GPU machine's own CPU ({c[1]} threads)" if c else "")
                     + (f"; at {top:,}×{top:,}, {g_top[0] / c_top[0]:.0f}× that CPU" if g_top and c_top else "")
                     + ". That is what a step can approach once the per-call costs are gone (the ladder below).")
    return lines


def time_train_step(sizes: Sequence[int], batch: int = 256, dtype: Any = "float32", device: Any = "cpu",
                    activation: str = "relu", repeat: int = 5, budget_s: float | None = 1.0) -> dict:
    """Time one ``train_step`` of ``MLP(sizes)`` on a random batch: a record
    (:meth:`course.timing.Timing.as_record`) with the sizes, batch, dtype and activation."""
    dev = normalize_device(device)
    batch = whole_number("batch", batch, hint="the examples in one step")
    model = MLP(sizes, activation=activation, dtype=dtype, device=dev)
    widest = max(sizes)
    require_fits(int(3 * batch * sum(sizes) * model.dtype.itemsize + 3 * model.n_parameters()
                   * model.dtype.itemsize + batch * widest), dev,
               what=f"an MLP {list(sizes)} step on a batch of {batch:,}")
    x, y = random_batch(model, batch)
    t = benchmark(model.train_step, x, y, 1e-3, device=dev, warmup=2, repeat=repeat, budget_s=budget_s,
                  name=f"train step {'-'.join(map(str, sizes))} batch {batch}")
    return t.as_record(sizes=[int(s) for s in sizes], batch=batch, dtype=model.dtype.name, activation=activation)


def step_time_sweep(widths: Sequence[int] = (64, 128, 256, 512, 1024), depth: int = 2, batch: int = 256,
                    n_in: int = 784, n_out: int = 10, dtype: Any = "float32",
                    devices: Sequence[str] | None = None, repeat: int = 5, budget_s: float = 0.5,
                    progress: Callable | None = None) -> ResultSet:
    """Training-step time against hidden width (``depth`` hidden layers) on each device.

    Every network is built first; then rounds time one step of each in turn (at
    most ``repeat`` rounds, at least 3, no new round once ``budget_s`` seconds per
    network have passed), and each record keeps the median and quartiles.
    """
    devs = resolve_devices(devices or None)
    batch = whole_number("batch", batch, hint="the examples in one step")
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


def ladder_table(rs: ResultSet, width: int = 512, device: str = "gpu") -> str:
    """A plain-text table of the ladder at one width: time, ratio to rung (a), launches, reads."""
    recs = [r for r in rs.select(device=device, width=width) if r.get("rung")]   # not the plain step's curve
    if not recs:
        return f"(no {device.upper()} ladder at width {width} in {rs.label})"
    base = next((r["median_s"] for r in recs if r["rung"] == "eager"), None)
    lines = [f"{device.upper()} ladder, 784-{width}-{width}-10, batch {rs.params.get('batch')}, float32 "
             f"({rs.label}); ratio = rung (a)'s time / this time",
             f"{'':46} {'ms':>8} {'× (a)':>7} {'launches':>9} {'GPU kernels':>12} {'reads':>6}"]
    for r in recs:
        ratio = f"{base / r['median_s']:.2f}" if base else "–"
        cells = [("–" if r.get(k) is None else str(r[k])) for k in ("launches", "gpu_kernels", "reads")]
        lines.append(f"{r['title'][:46]:46} {r['median_s'] * 1e3:8.3f} {ratio:>7} {cells[0]:>9} {cells[1]:>12} "
                     f"{cells[2]:>6}")
    return "\n".join(lines)


#: A short column head per rung and peer, for :func:`ladder_widths_table`.
_SHORT = {"eager": "(a) eager", "no_readback": "(b) no read", "fused": "(c) fused", "graph": "(d) graph",
          "torch eager": "torch eager", "torch graph": "torch graph", "torch eager tf32": "t. eager TF32",
          "torch graph tf32": "t. graph TF32"}


def _ladder(rs: ResultSet, device: str, **where: Any) -> list[dict]:
    return [r for r in rs.select(device=device, **where) if r.get("rung")]


def ladder_widths_table(rs: ResultSet, device: str = "gpu") -> str:
    """Every rung's step time (ms) at every width of ``rs``: a row per width, a column per rung and peer."""
    recs = _ladder(rs, device)
    if not recs:
        return f"(no {device.upper()} ladder in {rs.label})"
    rungs = list(dict.fromkeys(r["rung"] for r in recs))
    t = {(r["width"], r["rung"]): r["median_s"] for r in recs}
    lines = [f"{device.upper()} ladder, ms per step of 784-w-w-10, batch {rs.params.get('batch')}, float32, TF32 off "
             f"except the columns marked TF32 ({rs.label})",
             f"{'width':>6} " + " ".join(f"{_SHORT.get(k, k)[:13]:>13}" for k in rungs)]
    for w in sorted({r["width"] for r in recs}):
        lines.append(f"{w:>6,} " + " ".join(f"{t[w, k] * 1e3:13.3f}" if (w, k) in t else f"{'–':>13}" for k in rungs))
    return "\n".join(lines)


def _per_step(r: dict) -> str:
    """``"51 launches and 5 reads back per step"`` of a rung's record."""
    n, k = r.get("launches"), r.get("reads")
    return f"{n} launch{'' if n == 1 else 'es'} and {k} read{'' if k == 1 else 's'} back per step"


def ladder_lines(cpu: ResultSet | None, gpu: ResultSet, width: int = 512, gemm_gflops: float | None = None,
                 gemm_label: str = "") -> list[str]:
    """What the GPU ladder ``gpu`` (measured live or recorded) says, in sentences printed from its records
    (a time whose runs the timer flagged as noisy is marked so).

    At ``width``: the GPU's training speed-up over this CPU from the fastest rung, against the fastest CPU
    rung of ``cpu`` (named, with its threads), beside the teaching step's (rung (a)) ratio to the same
    baseline, and PyTorch's eager and graph steps from the same run.  Across the widths: how the fastest
    rung's time grows with the work, and at the largest width what share of ``gemm_gflops`` (a float32
    matrix-product rate on the same GPU, described by ``gemm_label``) the step reaches.
    """
    g = {r["rung"]: r for r in _ladder(gpu, "gpu", width=width)}
    ours = [g[k] for k in GPU_RUNGS if k in g]
    if not ours:
        return [f"No GPU ladder at width {width} in {gpu.label}."]
    best, eager = min(ours, key=lambda r: r["median_s"]), g.get("eager")

    def ms(r: dict) -> str:                 # a noisy timing says so wherever it is printed
        return f"{r['median_s'] * 1e3:.3f} ms" + (" (noisy)" if r.get("noisy") else "")

    def tf32(r: dict) -> str:
        return "TF32 ON" if r.get("tf32") else "TF32 off"

    lines = []
    base = min(_ladder(cpu, "cpu", width=width), key=lambda r: r["median_s"], default=None) if cpu else None
    if base is None:
        lines.append(f"No CPU step at width {width} was measured here, so no speed-up over this CPU is printed.")
    else:
        lines.append(f"Baseline: this CPU's fastest step at width {width}, {base['title']}: {ms(base)} (NumPy, "
                     f"float32, {base.get('threads', '?')} BLAS thread(s), {cpu.label}).")
        lines.append(f"The GPU's training speed-up over this CPU, from the course's fastest GPU step, {best['title']}: "
                     f"{base['median_s'] / best['median_s']:,.1f}× ({ms(best)}, float32, {tf32(best)}, {gpu.label}).")
        if eager is not None and eager is not best:
            lines.append(f"The teaching step (a), run eagerly on the same GPU: {ms(eager)}, "
                         f"{base['median_s'] / eager['median_s']:,.1f}× this CPU. The factor between the two ratios, "
                         f"{eager['median_s'] / best['median_s']:,.1f}×, is what the rungs above (a) removed: "
                         f"{_per_step(eager)} in (a), {_per_step(best)} in {best['title'][:3]}, and the passes over "
                         "memory that fused kernels no longer make.")
    te, tg = g.get("torch eager"), g.get("torch graph")
    if te or tg:
        nograph = min((r for r in ours if r["rung"] != "graph"), key=lambda r: r["median_s"], default=None)
        parts = [f"{who} {ms(r)}" for who, r in (("eager", te), ("torch.cuda.graph", tg)) if r]
        text = f"PyTorch in the same run, float32, TF32 off: {', '.join(parts)}."
        if tg and "graph" in g:
            text += (f" The course's graph step takes {g['graph']['median_s'] / tg['median_s']:.2f}× PyTorch's "
                     "graph step's time")
        if te and nograph:
            text += (("; its" if tg and "graph" in g else " The course's") + f" fastest step without a graph, "
                     f"{nograph['title']}, {nograph['median_s'] / te['median_s']:.2f}× PyTorch eager's")
        lines.append(text + ("." if not text.endswith(".") else ""))
    on = [r for r in (g.get("torch eager tf32"), g.get("torch graph tf32")) if r]
    if on:
        lines.append("With TF32 ON (products rounded to TF32's 10-bit mantissa on the tensor cores: another "
                     "arithmetic, not compared with the float32 steps above), PyTorch: "
                     + ", ".join(f"{'eager' if 'eager' in r['rung'] else 'torch.cuda.graph'} {ms(r)}"
                                 for r in on) + ".")
    steps = sorted(_ladder(gpu, "gpu", rung=best["rung"]), key=lambda r: r["width"])
    if len(steps) > 1:
        lo, hi = steps[0], steps[-1]
        text = (f"The fastest step, {best['title']}, grows with the work: {ms(lo)} at width {lo['width']:,}, "
                f"{ms(hi)} at width {hi['width']:,}, {hi['median_s'] / lo['median_s']:.1f}× the time for "
                f"{hi['flops'] / lo['flops']:,.0f}× the FLOPs")
        ends = [r for r in _ladder(gpu, "gpu", rung="eager") if r["width"] in (lo["width"], hi["width"])]
        if len(ends) == 2 and best["rung"] != "eager":
            a_lo, a_hi = sorted(ends, key=lambda r: r["width"])
            text += (f"; the teaching step (a) takes {ms(a_lo)} and {ms(a_hi)}: "
                     f"{a_hi['median_s'] / a_lo['median_s']:.2f}×")
        lines.append(text + ".")
        if not gemm_gflops and gemm_label:
            lines.append(f"(No share of a matrix-product rate is printed: {gemm_label}.)")
        if gemm_gflops:
            rate = hi["flops"] / hi["median_s"] / 1e9
            lines.append(f"At width {hi['width']:,} it runs at {rate / 1e3:,.1f} TFLOP/s: "
                         f"{100 * rate / gemm_gflops:.0f} % of the float32 matrix-product rate {gemm_label}, "
                         f"{gemm_gflops / 1e3:,.1f} TFLOP/s.")
    return lines


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
