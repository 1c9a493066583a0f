"""Where the time of one training step goes, layer by layer, on a chosen device.

:func:`trace_step` runs one training step of an :class:`~course.backprop.MLP`
and then times every layer's forward and backward on its own (warm-up,
repeats, median; CUDA events on a GPU), next to the shapes it works on, the
operations it runs and their FLOPs.  Two facts show up in every trace:

* the backward pass costs about **twice** the forward pass: a Linear layer's
  forward is one matrix product, its backward two (``dW = xᵀ @ dout`` and
  ``dx = dout @ Wᵀ``) of the same size;
* the **matrix products dominate**: the element-wise activations and the loss
  are a small share of the time, and every output element of a product is
  independent of the others, which is the parallelism a GPU feeds on.

:func:`step_time_sweep` times whole steps against the hidden width for the
report and the notebook's CPU-versus-GPU plot.

>>> import numpy as np
>>> from course.backprop import MLP
>>> m = MLP([64, 32, 10])
>>> t = trace_step(m, np.ones((16, 64), np.float32), np.zeros(16, dtype=np.int64), repeat=2)
>>> [r.name for r in t.layers]
['Linear 1 (64→32)', 'ReLU 1', 'Linear 2 (32→10)', 'softmax cross-entropy']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from ..devices import normalize_device, resolve_devices, synchronize, to_device
from ..errors import whole_number
from ..limits import check_fits
from ..results import ResultSet
from ..timing import benchmark, interleaved_rounds
from .layers import MLP, Linear, softmax_cross_entropy, softmax_cross_entropy_backward
from .validate import check_inputs

__all__ = ["LayerTrace", "StepTrace", "trace_step", "time_train_step", "step_time_sweep",
           "random_batch", "trace_html", "trace_to_results", "trace_from_results"]


@dataclass
class LayerTrace:
    """One layer of a traced step: what it computes, how much work, how long it took."""

    name: str
    kind: str                      # "linear", "activation" or "loss"
    in_shape: tuple
    out_shape: tuple
    forward_ops: list
    backward_ops: list
    forward_flops: float
    backward_flops: float
    matmul_flops: float            # the part of forward + backward done by matrix products
    forward_s: float = 0.0
    backward_s: float = 0.0


@dataclass
class StepTrace:
    """A traced training step: the layers in forward order, and the whole step timed as one."""

    layers: list = field(default_factory=list)
    step_s: float = 0.0
    device: str = "cpu"
    model: str = ""
    batch: int = 0
    noisy: bool = False            # some of the timings disagreed across rounds, or the machine was busy

    @property
    def forward_s(self) -> float:
        return sum(r.forward_s for r in self.layers)

    @property
    def backward_s(self) -> float:
        return sum(r.backward_s for r in self.layers)

    @property
    def flop_ratio(self) -> float:
        """Backward FLOPs over forward FLOPs (counted): 2 for a hidden Linear layer, 1 for the first."""
        return sum(r.backward_flops for r in self.layers) / max(sum(r.forward_flops for r in self.layers), 1.0)

    @property
    def matmul_share(self) -> float:
        """Share of the layer-by-layer time spent in Linear layers (their matrix products)."""
        lin = sum(r.forward_s + r.backward_s for r in self.layers if r.kind == "linear")
        return lin / max(self.forward_s + self.backward_s, 1e-30)


def _mm(a: Sequence[int], b: Sequence[int]) -> str:
    return f"({a[0]}×{a[1]}) @ ({b[0]}×{b[1]})"


def trace_step(model: MLP, x: Any, y: Any, repeat: int = 5, budget_s: float = 2.0) -> StepTrace:
    """Trace one training step of ``model`` on ``(x, y)``: per-layer ops, FLOPs and times.

    The weights are left as they were (no update is applied).  Each layer is
    timed on copies of the inputs it saw in the step, as the teaching step
    runs it (each call makes its output).  The timings run in rounds, each timing every operation once, so a
    moment when the machine is busy hits one sample of every operation rather than
    all samples of one; ``repeat`` rounds at most (at least 3), the median of each
    operation is kept, and no new round starts after ``budget_s`` seconds.
    """
    repeat = whole_number("repeat", repeat, hi=10_000, hint="rounds of timed operations, e.g. 5")
    x, y = check_inputs(model, x, y)
    b = int(x.shape[0])
    inputs, caches, upstream, logits, lcache = _run_step(model, x, y)
    tr = StepTrace(device=model.device, model=repr(model), batch=b)
    jobs: dict[str, tuple[Any, str, Callable[[], Any]]] = {}   # name -> (record, field, call), timed below
    for i, layer in enumerate(model.layers):
        n = sum(isinstance(o, Linear) == isinstance(layer, Linear) for o in model.layers[:i + 1])  # "Linear 2"
        rec = (_linear_trace(layer, n, b, first=i == 0) if isinstance(layer, Linear)
               else _activation_trace(layer, n, inputs[i]))
        forward, backward = _layer_calls(layer, inputs[i], caches[i], upstream[i], first=i == 0)
        jobs |= {f"{i} forward": (rec, "forward_s", forward), f"{i} backward": (rec, "backward_s", backward)}
        tr.layers.append(rec)
    rec = _loss_trace(b, model.sizes[-1])
    jobs |= {"loss forward": (rec, "forward_s", partial(softmax_cross_entropy, logits, y)),
             "loss backward": (rec, "backward_s", partial(softmax_cross_entropy_backward, lcache)),
             "whole step": (tr, "step_s", partial(model.train_step, x, y, 1e-12))}
    tr.layers.append(rec)
    tr.noisy = _time_jobs(model, jobs, repeat, budget_s)
    return tr


def _run_step(model: MLP, x, y) -> tuple[list, list, list, Any, Any]:
    """One real step: each layer's input (a copy) and cache, the gradient arriving at each layer's
    output, the logits and the loss's cache."""
    inputs, caches, h = [], [], x
    for layer in model.layers:
        inputs.append(h.copy())
        h, cache = layer.forward(h)
        caches.append(cache)
    loss, lcache = softmax_cross_entropy(h, y)
    g = softmax_cross_entropy_backward(lcache)
    upstream: list = [None] * len(model.layers)
    for i in range(len(model.layers) - 1, -1, -1):
        upstream[i] = g.copy()
        layer = model.layers[i]
        g = layer.backward(g, caches[i], need_dx=i > 0) if isinstance(layer, Linear) else layer.backward(g, caches[i])
    return inputs, caches, upstream, h, lcache


def _linear_trace(layer: Linear, n: int, b: int, first: bool) -> LayerTrace:
    """What Linear layer number ``n`` computes on a batch of ``b``, and its FLOPs (no dx for the first)."""
    ni, no = layer.n_in, layer.n_out
    mm = 2.0 * b * ni * no                           # one (b×ni) @ (ni×no) product
    return LayerTrace(
        name=f"Linear {n} ({ni}→{no})", kind="linear", in_shape=(b, ni), out_shape=(b, no),
        forward_ops=[f"out = x @ W: {_mm((b, ni), (ni, no))}", f"out += b: ({no},) over {b} rows"],
        backward_ops=[f"dW = xᵀ @ dout: {_mm((ni, b), (b, no))}", f"db = dout summed over {b} rows",
                      "dx: not needed for the first layer (x is data)" if first else
                      f"dx = dout @ Wᵀ: {_mm((b, no), (no, ni))}"],
        forward_flops=mm + b * no, backward_flops=mm * (1 if first else 2) + b * no,
        matmul_flops=mm * (2 if first else 3))


def _activation_trace(layer: Any, n: int, xin) -> LayerTrace:
    """What activation number ``n`` computes element-wise on ``xin``, and its FLOPs."""
    nm = type(layer).__name__
    return LayerTrace(
        name=f"{nm} {n}", kind="activation", in_shape=tuple(xin.shape), out_shape=tuple(xin.shape),
        forward_ops=[f"{nm.lower()}(x) element-wise on {xin.shape[0]}×{xin.shape[1]}"],
        backward_ops=[f"dx = dout · {nm.lower()}'(x), element-wise"],
        forward_flops=float(xin.size), backward_flops=float(2 * xin.size), matmul_flops=0.0)


def _loss_trace(b: int, c: int) -> LayerTrace:
    """What the softmax cross-entropy computes on ``b`` rows of ``c`` logits, and its FLOPs."""
    return LayerTrace(name="softmax cross-entropy", kind="loss", in_shape=(b, c), out_shape=(),
                      forward_ops=[f"softmax of ({b}×{c}) logits, mean -log p[label]"],
                      backward_ops=["dlogits = (softmax - one_hot) / batch"],
                      forward_flops=4.0 * b * c, backward_flops=1.0 * b * c, matmul_flops=0.0)


def _layer_calls(layer: Any, xin, cache, dout, first: bool) -> tuple[Callable, Callable]:
    """The layer's forward and backward on the step's values (the first layer computes no dx)."""
    forward = partial(layer.forward, xin)
    if isinstance(layer, Linear):
        return forward, partial(layer.backward, dout, cache, need_dx=not first)
    return forward, partial(layer.backward, dout, cache)


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


def random_batch(model: MLP, batch: int, seed: int = 0) -> tuple[Any, Any]:
    """A random standard-normal batch and random labels for ``model``, on its device."""
    batch = whole_number("batch", batch, hint="the examples in one step")
    check_fits(batch * (model.sizes[0] * (8 + model.dtype.itemsize) + 8), "cpu",
               what=f"a random batch of {batch:,} examples of {model.sizes[0]:,} features")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, model.sizes[0])).astype(model.dtype)
    y = rng.integers(0, model.sizes[-1], size=batch)
    return to_device(x, model.device), to_device(y, model.device)


def time_train_step(sizes: Sequence[int], batch: int = 256, dtype: Any = "float32", device: Any = "cpu",
                    activation: str = "relu", repeat: int = 5, budget_s: float | None = 1.0) -> dict:
    """Time one ``train_step`` of ``MLP(sizes)`` on a random batch: a record
    (:meth:`course.timing.Timing.as_record`) with the sizes, batch, dtype and activation."""
    dev = normalize_device(device)
    batch = whole_number("batch", batch, hint="the examples in one step")
    model = MLP(sizes, activation=activation, dtype=dtype, device=dev)
    widest = max(sizes)
    check_fits(int(3 * batch * sum(sizes) * model.dtype.itemsize + 3 * model.n_parameters()
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
            check_fits(int(3 * batch * sum(sizes) * model.dtype.itemsize
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


def trace_html(tr: StepTrace) -> str:
    """The trace as an HTML table: shapes, the operations of each pass, FLOPs, times."""
    import html

    rows = []
    for r in tr.layers:
        fops = "<br>".join(html.escape(o) for o in r.forward_ops)
        bops = "<br>".join(html.escape(o) for o in r.backward_ops)
        rows.append(f"<tr><td>{html.escape(r.name)}</td><td>{r.in_shape}→{r.out_shape}</td>"
                    f"<td>{fops}</td><td>{r.forward_flops / 1e6:,.2f}</td><td>{r.forward_s * 1e3:.3f}</td>"
                    f"<td>{bops}</td><td>{r.backward_flops / 1e6:,.2f}</td><td>{r.backward_s * 1e3:.3f}</td></tr>")
    head = ("<tr><th>layer</th><th>shape</th><th>forward</th><th>MFLOP</th><th>ms</th>"
            "<th>backward</th><th>MFLOP</th><th>ms</th></tr>")
    return (f"<table style='font-size:12px'>{head}{''.join(rows)}</table>"
            f"<p>Sum of the layers: forward {tr.forward_s * 1e3:.3f} ms, backward {tr.backward_s * 1e3:.3f} ms; "
            f"the whole step timed as one: {tr.step_s * 1e3:.3f} ms on the {tr.device.upper()}.</p>")
