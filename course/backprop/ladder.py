"""Lesson 01: the fast step's ladder timed, its launches and reads back counted, PyTorch beside it.

:func:`ladder_sweep` times each rung of :class:`~course.backprop.fast_step.FastStep` at several hidden
widths (784-w-w-10, batch 256, float32) and, on a GPU, PyTorch's eager step and its step captured
with ``torch.cuda.graph`` (TF32 off, and on, labelled).  Each record says per step:

* ``launches``: array calls counted on the CPU by :mod:`~course.backprop.counting` (a lower bound of
  a GPU's kernels: an array made inside a function is not seen), or the rung's declared count;
* ``gpu_kernels``: on a GPU, the kernel nodes of one step captured as a CUDA graph (rungs without a
  read back), or the CUDA kernels PyTorch's profiler saw (its peers);
* ``reads``: device→host reads, counted on the CPU.

On a CPU only rungs (a) and (b) are timed (the fused kernels are CUDA C; their NumPy versions are
the GPU tests' oracle, not a CPU speed-up).

>>> rs = ladder_sweep(widths=(16,), batch=8, devices=["cpu"], repeat=3, budget_s=0.05)
>>> sorted({r["rung"] for r in rs.records})
['eager', 'no_readback']
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from ..devices import cupy_module, resolve_devices
from ..errors import whole_number
from ..results import ResultSet
from ..timing import interleaved_rounds
from ..torch_peer import benchmark_torch, torch_cuda_available
from .bench import torch_mlp_step
from .counting import CountingNumpy
from .fast_step import RUNG_TITLES, FastStep, declared_counts
from .layers import MLP
from .trace import random_batch

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["CPU_RUNGS", "GPU_RUNGS", "PEER_TITLES", "step_counts", "captured_kernels", "torch_steps",
           "torch_kernels", "ladder_sweep", "ladder_table", "ladder_figure"]

CPU_RUNGS = ("eager", "no_readback")
GPU_RUNGS = ("eager", "no_readback", "fused", "graph")
PEER_TITLES = {"torch eager": "PyTorch eager, TF32 off", "torch graph": "PyTorch, torch.cuda.graph, TF32 off",
               "torch eager tf32": "PyTorch eager, TF32 ON", "torch graph tf32": "PyTorch, torch.cuda.graph, TF32 ON"}


def step_counts(rung: str, sizes: Sequence[int] = (784, 512, 512, 10), batch: int = 8) -> dict:
    """``{"launches", "reads", "names", "how"}`` of one step of ``rung``, counted on the CPU (the
    graph rung: declared, since only a GPU captures one)."""
    if rung == "graph":
        return declared_counts("graph", len(sizes) - 1) | {"names": {}, "how": "declared"}
    ns = CountingNumpy()
    fast = FastStep(MLP(list(sizes), seed=0), rung, batch=batch, lr=1e-3, namespace=ns)
    fast.load(*_host_batch(sizes, batch))
    fast.step()                       # the teaching MLP makes its buffers on its first step
    ns.counter.reset()
    fast.step()
    c = ns.counter
    return {"launches": c.launches, "reads": c.reads, "names": dict(c.names), "how": "counted on the CPU"}


def _host_batch(sizes: Sequence[int], batch: int) -> tuple[Any, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    return (rng.standard_normal((batch, sizes[0])).astype(np.float32), rng.integers(0, sizes[-1], batch))


def captured_kernels(fast: FastStep) -> int | None:
    """Kernel nodes in one step of ``fast`` captured as a CUDA graph (GPU, rungs without a read back);
    None where CuPy cannot print a graph.  The weights are restored afterwards."""
    if fast.device != "gpu" or fast.rung == "eager":
        return None
    if fast.rung == "graph":
        return _kernel_nodes(fast.graph)
    cp = cupy_module()
    before = fast.params.copy()
    stream = cp.cuda.Stream(non_blocking=True)
    try:
        with stream:
            stream.begin_capture()
            try:
                fast.step()
            finally:
                graph = stream.end_capture()
    except Exception:             # e.g. a CuPy that cannot allocate while capturing: no count, no failure
        return None
    finally:
        stream.synchronize()
        fast.params[...] = before
    return _kernel_nodes(graph)


def _kernel_nodes(graph: Any) -> int | None:
    dot = getattr(graph, "debug_dot_str", None)
    if dot is None:
        return None
    try:
        text = dot()
    except Exception:
        return None
    return sum(1 for line in text.splitlines() if "label=" in line and "KERNEL" in line.upper())


def torch_steps(model: MLP, x: Any, y: Any, lr: float = 1e-3) -> dict[str, Callable[[], None]]:
    """PyTorch's step of a copy of ``model`` on a GPU: eager, and captured with ``torch.cuda.graph``,
    each with TF32 off and on (the TF32 setting in force when a graph is captured is the one it keeps)."""
    import torch

    out = {}
    for tf32 in (False, True):
        mm = torch.backends.cuda.matmul
        old = mm.allow_tf32
        mm.allow_tf32 = tf32
        try:
            eager, _ = torch_mlp_step(model, x, y, lr)
            _, net = torch_mlp_step(model, x, y, lr)          # its own copy: the graph keeps its grads
            graphed = _torch_graph(net, x, y, lr)
        finally:
            mm.allow_tf32 = old
        suffix = " tf32" if tf32 else ""
        out["torch eager" + suffix] = partial(_with_tf32, eager, tf32)
        out["torch graph" + suffix] = graphed
    return out


def _with_tf32(fn: Callable[[], None], tf32: bool) -> None:
    import torch

    mm = torch.backends.cuda.matmul
    old, mm.allow_tf32 = mm.allow_tf32, tf32
    try:
        fn()
    finally:
        mm.allow_tf32 = old


def _torch_graph(net: Any, x: Any, y: Any, lr: float) -> Callable[[], None]:
    """The usual recipe: warm up on a side stream, then capture zero-grad-free forward, backward, step."""
    import torch

    from ..devices import to_numpy

    opt = torch.optim.SGD(net.parameters(), lr=lr)
    tx = torch.as_tensor(to_numpy(x), device="cuda")
    ty = torch.as_tensor(to_numpy(y), device="cuda")
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
        torch.nn.functional.cross_entropy(net(tx), ty).backward()
        opt.step()
    return graph.replay


def torch_kernels(fn: Callable[[], None]) -> int | None:
    """CUDA kernels of one call of ``fn`` as PyTorch's profiler sees them; None if it cannot say."""
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile

        fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        return sum(1 for e in prof.events() if str(getattr(e, "device_type", "")).endswith("CUDA"))
    except Exception:
        return None


def ladder_sweep(widths: Sequence[int] = (64, 128, 256, 512, 1024, 2048, 4096), batch: int = 256,
                 devices: Sequence[str] | None = None, peers: bool = True, repeat: int = 10,
                 budget_s: float | None = 1.0, progress: Callable | None = None) -> ResultSet:
    """Each rung's step time at each width (784-w-w-10, float32), with its counts; PyTorch beside them.

    Records: ``device``, ``width``, ``rung`` (a rung of :data:`GPU_RUNGS`, or a key of
    :data:`PEER_TITLES`), ``title``, the timing, ``flops``, ``launches``, ``reads``, ``gpu_kernels``
    and ``tf32``.  (No ``dtype`` field: the plain ``backprop_train_step`` curves select on it.)
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
                info[key] = {"device": d, "width": int(w), "rung": rung, "title": RUNG_TITLES[rung],
                             "flops": model.flops_per_step(batch), "launches": counts[rung]["launches"],
                             "reads": counts[rung]["reads"], "count_how": counts[rung]["how"],
                             "gpu_kernels": captured_kernels(fast) if d == "gpu" else None,
                             "tf32": os.environ.get("CUPY_TF32", "0") == "1" if d == "gpu" else False}
            if d == "gpu" and peers and torch_cuda_available():
                for name, fn in torch_steps(model, x, y).items():
                    key = f"{d} {w} {name}"
                    jobs[key], devs[key], timers[key] = fn, d, benchmark_torch
                    info[key] = {"device": d, "width": int(w), "rung": name, "title": PEER_TITLES[name],
                                 "flops": model.flops_per_step(batch), "launches": None, "reads": None,
                                 "count_how": "PyTorch's profiler", "gpu_kernels": torch_kernels(fn),
                                 "tf32": name.endswith("tf32")}
    t = interleaved_rounds(jobs, devs, warmup=1, repeat=max(int(repeat), 3), min_rounds=3, timer=timers or None,
                           budget_s=None if budget_s is None else budget_s * len(jobs), progress=progress,
                           desc="step ladder")
    for key, rec in info.items():
        rs.add_timing(t[key], **rec, gflops=rec["flops"] / t[key].median / 1e9)
    if any(v.stopped_early for v in t.values()):
        rs.notes.append(f"timing stopped after {min(v.repeat for v in t.values())} rounds by the time budget")
    return rs


def ladder_table(rs: ResultSet, width: int = 512, device: str = "gpu") -> str:
    """A plain-text table of the ladder at one width: time, ratio to rung (a), launches, reads."""
    recs = rs.select(device=device, width=width)
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


def ladder_figure(live: ResultSet | None, references: Sequence[ResultSet] = ()) -> Figure:
    """Step time against width, one line per rung and peer: ``live`` solid, each reference dashed.

    Draws only records with a ``rung``; a reference without any says so in the footer instead.
    """
    from ..plots import add_footer, log2_x, new_figure, place_legend, series_style

    fig, (ax,) = new_figure(1, width=9, height=4)
    missing, drawn, styles = [], [], {}
    for rs in ([live] if live is not None else []) + list(references):
        ref = rs.source == "reference"
        recs = [r for r in rs.records if r.get("rung")]
        if not recs:
            missing.append(rs.label)
            continue
        drawn += [rs] if ref else []
        for dev in ("cpu", "gpu"):
            for rung in dict.fromkeys(r["rung"] for r in recs if r["device"] == dev):
                pts = sorted((r["width"], r["median_s"], r["title"]) for r in recs
                             if r["device"] == dev and r["rung"] == rung)
                # one colour and marker per rung, live and recorded alike (solid and dashed)
                style = series_style(styles.setdefault((dev, rung), len(styles)), recorded=ref)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], ms=4, **style,
                        label=f"{dev.upper()} {pts[0][2]}" + (f" ({rs.label})" if ref else " (live)"))
    log2_x(ax)
    ax.set_yscale("log")
    ax.set_xlabel("hidden width w (784-w-w-10, batch 256, float32)")
    ax.set_ylabel("time per training step (s)")
    ax.set_title("The step's ladder: each rung removes a host cost")
    place_legend(ax)
    # one footer (a second one would be written over the first)
    add_footer(fig, live, drawn, extra="No ladder (records with a rung) in: " + "; ".join(missing) if missing else "")
    return fig
