"""Timing BPPSA against sequential back-propagation.

The paper times a whole training step (forward + backward) and the forward pass
alone, and calls the difference the backward time.  That difference fails where the
forward pass dominates: on an H100 at T = 30,000 the forward pass takes over a second
and the scan's backward about 20 ms, so the round-to-round noise of the two large
times swamps the small one, and the course's first GPU recording of the difference
came out negative.  Here the backward pass is timed on its own instead: the forward
pass runs once, and each method's backward pass reruns from its saved values, in
alternating rounds with the forward pass (:func:`course.timing.interleaved_rounds`),
so that a slow drift of a busy machine hits every method alike.

Here both methods run the same :class:`~course.bppsa.models.TanhRNN` forward pass
and differ only in how the hidden-state gradients are found (the classic loop or
the scan, or the scan without copies, ``"fast"``: :mod:`course.bppsa.fast`).  Every speedup names its
baseline: ``speedups(rs, dev, over="sequential")`` is against the course's own loop (one CuPy call per
step on a GPU, bound by launches), ``over="torch"`` against PyTorch.
PyTorch's ``nn.RNN`` is timed the same way as an outside peer when
PyTorch is installed (on the GPU, that is its cuDNN kernel): its ``backward`` reruns
on one saved graph (``retain_graph=True``).

>>> r = rnn_timings(T=20, hidden_size=4, batch=2, repeat=3)
>>> sorted(r["backward_s"])
['scan', 'sequential']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..devices import get_xp, normalize_device, resolve_devices, synchronize
from ..errors import BadInputError, GPUUnavailableError, whole_number
from ..limits import out_of_memory_errors, require_fits
from ..results import ResultSet
from ..timing import interleaved_rounds
from ..torch_peer import benchmark_torch, torch_available, torch_device, torch_threads
from .algorithm import work_counts
from .fast import chunked_steps
from .models import METHODS, TanhRNN

__all__ = ["rnn_timings", "torch_rnn_timings", "torch_available", "rnn_sweep", "speedups",
           "PAPER", "SWEEP_T", "QUICK_T"]

#: The paper's RNN workload (Wang, Bai, Pekhimenko).  ``backward_speedup`` is the best backward-pass
#: speed-up in the abstract of the arXiv version (1907.10134); the MLSys 2020 proceedings' abstract
#: reports 8.8x for the backward pass (2.75x for the whole training run in both).
PAPER = {"input_size": 1, "hidden_size": 20, "batch": 16, "n_classes": 10,
         "T_max": 30000, "backward_speedup": 108.0}

SWEEP_T = (10, 30, 100, 300, 1000, 3000, 10000, 30000)
QUICK_T = (10, 100, 1000)


def rnn_timings(T: int, hidden_size: int = 20, batch: int = 16, input_size: int = 1, device: Any = "cpu",
             methods: Sequence[str] = ("sequential", "scan"), dtype: Any = "float32", repeat: int = 5,
             budget_s: float | None = None, seed: int = 0, warmup: int = 1) -> dict:
    """Time the forward pass and each method's backward pass of the tanh RNN.

    The forward pass, and each method's backward pass from one saved forward, run in
    alternating rounds (:func:`course.timing.interleaved_rounds`).  Returns
    ``{"forward": Timing, "backward": {method: Timing}, "backward_s": {method: median s},
    "max_grad_diff": float}``.  ``max_grad_diff`` is the largest difference between the
    methods' ``W_hh`` gradients: they must compute the same thing for the times to mean anything.
    """
    dev = normalize_device(device)
    T, batch, hidden_size, input_size = _rnn_sizes(T, batch, hidden_size, input_size)
    repeat = whole_number("repeat", repeat, hint="timed rounds; 0 would time nothing")
    warmup = whole_number("warmup", warmup, 0, 100, hint="untimed rounds first")
    if isinstance(methods, str) or not len(methods):
        raise BadInputError(f"methods must be a non-empty list of {', '.join(map(repr, METHODS))}, got {methods!r}")
    for m in methods:
        if m not in METHODS:
            raise BadInputError(f"method {m!r} is not one of {', '.join(map(repr, METHODS))}")
    rnn = TanhRNN(input_size, hidden_size, seed=seed, device=dev, dtype=dtype)
    require_fits(3 * (T + 1) * batch * (hidden_size + input_size) * rnn.dtype.itemsize, dev,
                 what=f"the inputs and hidden states of T={T:,} steps, batch {batch:,}, hidden {hidden_size:,}")
    x, y = rnn.example_data(T, batch, seed=seed + 1)
    _, cache = rnn.forward(x, y)       # every backward pass starts from these saved values
    grads: dict[str, Any] = {}

    def backward(m):
        def run():
            grads[m] = rnn.backward(cache, m)["W_hh"]
        return run

    fns = {"forward": lambda: rnn.forward(x, y)} | {m: backward(m) for m in methods}
    t = interleaved_rounds(fns, dev, warmup=warmup, repeat=repeat, budget_s=budget_s)
    for m in methods:                  # warmup=0 and no round reached it: run it once to compare
        if m not in grads:
            backward(m)()
    diff = 0.0
    if len(grads) > 1:
        ref = grads[methods[0]]
        diff = max(float(rnn.xp.abs(g - ref).max()) for g in grads.values())
    return {"forward": t["forward"], "backward": {m: t[m] for m in methods},
            "backward_s": {m: t[m].median for m in methods}, "max_grad_diff": diff}


# ------------------------------------------------------------------ the PyTorch peer

def torch_rnn_timings(T: int, hidden_size: int = 20, batch: int = 16, input_size: int = 1,
                   device: Any = "cpu", repeat: int = 3, budget_s: float | None = None,
                   seed: int = 0, threads: int | None = 1) -> dict:
    """Forward and backward times of PyTorch's ``nn.RNN`` (tanh) + readout + cross-entropy.

    On the GPU this is cuDNN's RNN.  The backward pass reruns on one saved graph
    (``retain_graph=True``).  Returns ``{"forward": Timing, "backward": Timing,
    "backward_s": float}`` like :func:`rnn_timings`.  Raises :class:`BadInputError` when
    PyTorch is missing and :class:`GPUUnavailableError` when PyTorch sees no GPU.

    ``threads``: CPU threads PyTorch may use while timed (restored afterwards).  One by
    default, like the NumPy code it is compared with: for 20-wide matrices extra
    threads only add synchronisation, and on a busy machine they can make each step
    many times slower.  ``None`` leaves PyTorch's own setting.
    """
    dev = normalize_device(device)
    T, batch, hidden_size, input_size = _rnn_sizes(T, batch, hidden_size, input_size)
    repeat = whole_number("repeat", repeat, hint="timed rounds; 0 would time nothing")
    require_fits(4 * (T + 1) * batch * (hidden_size + input_size) * 4, dev,
                 what=f"PyTorch's inputs and hidden states of T={T:,} steps, batch {batch:,}, hidden {hidden_size:,}")
    tdev = torch_device(dev)        # a clear error without PyTorch, or without its CUDA build
    import torch

    torch.manual_seed(seed)
    rnn = torch.nn.RNN(input_size, hidden_size, nonlinearity="tanh").to(tdev)
    head = torch.nn.Linear(hidden_size, 10).to(tdev)
    x = torch.randn(T, batch, input_size, device=tdev)
    y = torch.randint(0, 10, (batch,), device=tdev)
    loss_fn = torch.nn.CrossEntropyLoss()

    def forward():
        out, h = rnn(x)
        return loss_fn(head(h[-1]), y)

    # PyTorch is timed as every PyTorch peer is (course.torch_peer.benchmark_torch: its own CUDA events on
    # a GPU), in the same alternating rounds as rnn_timings.
    with torch_threads(threads):
        loss = forward()

        def backward():
            rnn.zero_grad(set_to_none=True)
            head.zero_grad(set_to_none=True)
            loss.backward(retain_graph=True)

        t = interleaved_rounds({"forward": forward, "backward": backward}, dev, warmup=1, repeat=repeat,
                               budget_s=budget_s, timer=benchmark_torch)
    f, b = t["forward"], t["backward"]
    return {"forward": f, "backward": b, "backward_s": b.median}


# ------------------------------------------------------------------ the sweep

def _rnn_sizes(T: Any, batch: Any, hidden_size: Any, input_size: Any) -> tuple[int, int, int, int]:
    return (whole_number("T", T, hint="the sequence length"), whole_number("batch", batch),
            whole_number("hidden_size", hidden_size, hint="the state size"),
            whole_number("input_size", input_size, hint="numbers per input step"))


def _sizes(name: str, v: Any) -> list[int]:
    vals = list(v) if isinstance(v, (list, tuple, range, np.ndarray)) else [v]
    if not vals:
        raise BadInputError(f"{name} must be a non-empty list of whole numbers >= 1, got {v!r}")
    return sorted({whole_number(name, x) for x in vals})


def rnn_sweep(Ts: Sequence[int] = QUICK_T, hidden_size: int | Sequence[int] = 20, batch: int | Sequence[int] = 16,
              input_size: int = 1, devices: Sequence[str] | None = None,
              methods: Sequence[str] = ("sequential", "scan"), include_torch: bool = True,
              dtype: Any = "float32", repeat: int = 3, budget_s: float | None = 30.0,
              progress: Callable | None = None, experiment: str = "bppsa_rnn") -> ResultSet:
    """Backward time of each method against sequence length T (batch size, hidden size), on each device.

    One record per (device, T, batch, hidden size, method) with ``forward_s``,
    ``backward_s`` (and its quartiles), ``full_s`` (their sum: one training step) and the work counts;
    ``method="torch"`` for the PyTorch peer when ``include_torch`` and it is
    installed.  ``batch`` and ``hidden_size`` may each be one size or several.
    ``budget_s`` bounds the whole sweep: settings not reached are listed in the notes.
    A setting that does not fit in the device's memory (the scan keeps its whole tree:
    about 3 GB at the paper's T = 30,000) is listed in the notes too, and the sweep goes on.
    """
    import time

    Ts = _sizes("Ts (sequence lengths)", Ts)
    batches = _sizes("batch", batch)
    hiddens = _sizes("hidden_size", hidden_size)
    devs = resolve_devices(devices or None)
    torch_ok = include_torch and torch_available()
    rs = ResultSet(experiment, params={"Ts": Ts, "hidden_sizes": hiddens, "batches": batches,
                                       "input_size": input_size, "dtype": str(dtype), "devices": devs,
                                       "methods": list(methods) + (["torch"] if torch_ok else []),
                                       "repeat": repeat, "budget_s": budget_s, "torch_threads": 1,
                                       "backward": "median of the backward pass timed alone (from one saved forward), "
                                                   "in rounds alternating with the forward pass"})
    began = time.perf_counter()
    jobs = [(d, T, B, h) for d in devs for T in Ts for B in batches for h in hiddens]
    it = progress(jobs, total=len(jobs), desc="BPPSA sweep") if progress else jobs
    skipped: list[str] = []
    refused: list[str] = []
    for d, T, B, h in it:
        if budget_s is not None and time.perf_counter() - began > budget_s:
            skipped.append(f"{d} T={T} batch={B} hidden={h}")
            continue
        try:
            r = rnn_timings(T, h, B, input_size, d, methods, dtype, repeat)
        except out_of_memory_errors() as exc:     # one refused size must not end the sweep
            refused.append(f"{d} T={T} batch={B} hidden={h} ({type(exc).__name__}: {exc})")
            _release_pool(d)
            continue
        counts = work_counts(T, h, B)
        for m in methods:
            back = r["backward"][m]
            rs.add(device=d, T=T, method=m, hidden_size=h, batch=B,
                   forward_s=r["forward"].median, backward_s=back.median, backward_q25_s=back.q25,
                   backward_q75_s=back.q75, full_s=r["forward"].median + back.median, noisy=bool(back.noisy),
                   steps={"scan": counts["steps_scan"], "fast": chunked_steps(T)}.get(m, T),
                   flops={"scan": counts["flops_scan"], "fast": 2.0 * T * B * h**3}.get(m, counts["flops_sequential"]),
                   max_grad_diff=r["max_grad_diff"])
        if torch_ok:
            try:
                tr = torch_rnn_timings(T, h, B, input_size, d, repeat)
            except GPUUnavailableError as exc:
                if f"PyTorch peer not timed on {d}: {exc}" not in rs.notes:
                    rs.notes.append(f"PyTorch peer not timed on {d}: {exc}")
            except Exception as exc:
                if type(exc).__name__ != "OutOfMemoryError" and not isinstance(exc, MemoryError):
                    raise
                refused.append(f"{d} T={T} batch={B} hidden={h} with PyTorch ({type(exc).__name__})")
            else:
                rs.add(device=d, T=T, method="torch", hidden_size=h, batch=B,
                       forward_s=tr["forward"].median, backward_s=tr["backward"].median,
                       backward_q25_s=tr["backward"].q25, backward_q75_s=tr["backward"].q75,
                       full_s=tr["forward"].median + tr["backward"].median, noisy=bool(tr["backward"].noisy))
        synchronize(d)
    if skipped:
        rs.notes.append(f"stopped by the {budget_s:.0f} s budget before: {', '.join(skipped)}")
    if refused:
        rs.notes.append(f"did not fit in memory, so not timed: {'; '.join(refused)}")
    return rs


def _release_pool(device: str) -> None:
    """After a refused size, hand CuPy's cached blocks back so that the next size starts clean."""
    if device == "gpu":
        try:
            get_xp("gpu").get_default_memory_pool().free_all_blocks()
        except Exception:
            pass


def speedups(rs: ResultSet, device: str, over: str = "sequential", method: str = "scan",
             x: str = "T", **where: Any) -> tuple[np.ndarray, np.ndarray]:
    """(x values, backward time of ``over`` / backward time of ``method``) for one device.

    ``x`` is ``"T"``, ``"batch"`` or ``"hidden_size"``; ``where`` filters records
    (``batch=16``).  Points where either backward time is not positive (lost in
    noise) are left out.
    """
    out = []
    for r in rs.select(device=device, method=method, **where):
        base = rs.select(device=device, method=over, T=r["T"], batch=r.get("batch"),
                         hidden_size=r.get("hidden_size"))
        if base and r["backward_s"] > 0 and base[0]["backward_s"] > 0:
            out.append((r[x], base[0]["backward_s"] / r["backward_s"]))
    out.sort()
    return np.array([o[0] for o in out], dtype=float), np.array([o[1] for o in out], dtype=float)
