"""Lesson 01's measurements of the training step: one step traced layer by layer
(:func:`trace_step`, on :func:`~course.backprop.trace.describe_step`'s records), one step timed
(:func:`time_train_step`), and whole steps against the hidden width (:func:`step_time_sweep`, for the
report and the notebook's CPU-versus-GPU plot), stored as result sets.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from ..devices import normalize_device, resolve_devices, synchronize
from ..errors import whole_number
from ..limits import require_fits
from ..results import ResultSet
from ..timing import benchmark, interleaved_rounds
from .layers import MLP
from .trace import LayerTrace, StepTrace, describe_step, random_batch
from .validate import check_inputs

__all__ = ["trace_step", "time_train_step", "step_time_sweep", "trace_to_results", "trace_from_results"]


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
    x, y = check_inputs(model, x, y)
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
