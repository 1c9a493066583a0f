"""Timing BPPSA against sequential back-propagation.

The paper times a whole training step (forward + backward) and the forward pass
alone, and calls the difference the backward time.  That difference fails where the
forward pass dominates: on an H100 at T = 30,000 the course's forward pass (its own
loop, one CuPy step per time step; cuDNN's takes milliseconds) took over a second and
the scan's backward about 20 ms, so the round-to-round noise of the two large times
swamped the small one, and the course's first GPU recording of the difference came
out negative.  Here the backward pass is timed on its own instead: the forward
pass runs once, and each method's backward pass reruns from its saved values, in
alternating rounds with the forward pass (:func:`course.timing.interleaved_rounds`),
so that a slow drift of a busy machine hits every method alike.

Here both methods run the same :class:`~course.bppsa.models.TanhRNN` forward pass
and differ only in how the hidden-state gradients are found (the classic loop or
the scan, or the scan without copies, ``"fast"``: :mod:`course.bppsa.fast`).  Every speedup names its
baseline: ``speedups(rs, dev, over="sequential")`` is against the course's own loop (one CuPy call per
step on a GPU, bound by launches), ``over="torch"`` against PyTorch.
PyTorch's ``nn.RNN`` is timed the same way as an outside peer when
PyTorch is installed (on the GPU, that is its cuDNN kernel, run with TF32 off as the course's
strict float32 is; each record's ``tf32`` names the setting of its side): its ``backward`` reruns
on one saved graph (``retain_graph=True``).

Where the scan wins on a CPU (:func:`regime_sweep`): sequential backprop takes T dependent steps, each
one small matrix-vector product, so for a thin chain (small n) each step is mostly the fixed cost of a
numpy call, the CPU's analogue of a kernel launch.  The scan takes about 2·log₂(T+1) levels, each one
batched call over thousands of products, but the course's scan makes every combine an n×n matrix
*product*: about 2n times the loop's arithmetic (the least a scan needs is about n+1 times:
:func:`course.bppsa.work_counts`).  So the scan wins where the per-step overhead dominates (small n, long T) and
loses where the arithmetic does (large n); :func:`crossover_n` reads off, for each T, the largest n at
which the scan still won.

>>> r = rnn_timings(T=20, hidden_size=4, batch=2, repeat=3)
>>> sorted(r["backward_s"])
['scan', 'sequential']
>>> rs = regime_sweep(ns=[2], Ts=[64], repeat=1, budget_s=0.05)
>>> sorted({r["method"] for r in rs.records})
['scan', 'sequential']
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..arguments import Devices, Dtype, Given, OneOf, Optional, Real, Whole, Wholes, arguments
from ..backprop.readers import validate_results
from ..devices import get_xp, normalize_device, synchronize
from ..errors import BadInputError, GPUUnavailableError, whole_number
from ..limits import out_of_memory_errors, require_fits
from ..results import ResultSet
from ..timing import benchmark, interleaved_rounds, sweep_within_budget
from ..torch_peer import (
    benchmark_torch,
    cupy_tf32,
    torch_available,
    torch_device,
    torch_tf32,
    torch_threads,
    validate_tf32,
)
from .algorithm import backprop_scan, backprop_sequential, work_counts
from .fast import RNNBackwardPlan, SequentialBackwardPlan, chunked_steps
from .models import METHODS, TanhRNN

__all__ = ["rnn_timings", "torch_rnn_timings", "chain_peer_timings", "torch_rnn_graph_timings", "CHAIN_PEERS",
           "best_peer", "torch_available", "rnn_sweep", "speedups", "tf32_setting",
           "PAPER", "SWEEP_T", "QUICK_T", "random_chain", "regime_sweep", "speedup_grid", "crossover_n",
           "REGIME_NS", "REGIME_TS", "validate_timings", "validate_torch_timings"]

#: The paper's RNN workload (Wang, Bai, Pekhimenko).  ``backward_speedup`` is the best backward-pass
#: speed-up in the abstract of the arXiv version (1907.10134); the MLSys 2020 proceedings' abstract
#: reports 8.8x for the backward pass (2.75x for the whole training run in both).  Its baseline is
#: cuDNN's RNN: the authors' ``rnn_grid_run.sh`` runs every length with ``--rnn-type=cuDNN``, on the
#: GPUs named in ``gpus``.
PAPER = {"input_size": 1, "hidden_size": 20, "batch": 16, "n_classes": 10,
         "T_max": 30000, "backward_speedup": 108.0, "baseline": "cuDNN's nn.RNN",
         "gpus": "RTX 2070, RTX 2080 Ti"}

SWEEP_T = (10, 30, 100, 300, 1000, 3000, 10000, 30000)
QUICK_T = (10, 100, 1000)
#: The regime map's default grid: thin to moderately wide chains, short to long.
REGIME_NS = (2, 4, 8, 16, 32)
REGIME_TS = (1_000, 10_000, 30_000)
#: The largest chain the regime map measures: T · n² numbers of float32 (the scan keeps about twice that).
MAX_ELEMENTS = 2**25


#: The RNN's sizes, as the timings check them.
_RNN_SIZES = {"T": Whole(hint="the sequence length"), "hidden_size": Whole(hint="the state size"), "batch": Whole(),
              "input_size": Whole(hint="numbers per input step")}
_REPEAT = Whole(hint="timed rounds; 0 would time nothing")


def _validate_methods(methods: Any) -> list[str]:
    """``methods`` as a list, or a clear error: a non-empty list of :data:`~course.bppsa.models.METHODS`."""
    if isinstance(methods, (str, bytes)) or not isinstance(methods, Sequence) or not len(methods):
        raise BadInputError(f"methods must be a non-empty list of {', '.join(map(repr, METHODS))}, got {methods!r}")
    for m in methods:
        if m not in METHODS:
            raise BadInputError(f"method {m!r} is not one of {', '.join(map(repr, METHODS))}")
    return list(methods)


def validate_timings(result: Any) -> dict:
    """``result`` if it is what :func:`rnn_timings` returns (its ``forward`` Timing and ``backward_s`` by method);
    or a clear error."""
    ok = isinstance(result, dict) and hasattr(result.get("forward"), "median") and \
        isinstance(result.get("backward_s"), dict) and all(m in METHODS for m in result["backward_s"])
    if not ok:
        raise BadInputError(f"result must be what rnn_timings(...) returns (its forward Timing, backward_s by "
                            f"method), got {type(result).__name__}")
    return result


def validate_torch_timings(result: Any) -> dict:
    """``result`` if it is what :func:`torch_rnn_timings` returns (its ``backward_s``, in seconds); or a clear
    error."""
    b = result.get("backward_s") if isinstance(result, dict) else None
    if not isinstance(b, (int, float)) or isinstance(b, bool) or not np.isfinite(b):
        raise BadInputError(f"torch_result must be what torch_rnn_timings(...) returns (its backward_s), got "
                            f"{type(result).__name__}")
    return result


@arguments(**_RNN_SIZES, device=Given(normalize_device), methods=Given(_validate_methods), repeat=_REPEAT,
           warmup=Whole(0, 100, hint="untimed rounds first"))
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
    rnn = TanhRNN(input_size, hidden_size, seed=seed, device=device, dtype=dtype)
    require_fits(3 * (T + 1) * batch * (hidden_size + input_size) * rnn.dtype.itemsize, device,
                 what=f"the inputs and hidden states of T={T:,} steps, batch {batch:,}, hidden {hidden_size:,}")
    x, y = rnn.example_data(T, batch, seed=seed + 1)
    _, cache = rnn.forward(x, y)       # every backward pass starts from these saved values
    grads: dict[str, Any] = {}

    def backward(m):
        def run():
            grads[m] = rnn.backward(cache, m)["W_hh"]
        return run

    fns = {"forward": lambda: rnn.forward(x, y)} | {m: backward(m) for m in methods}
    t = interleaved_rounds(fns, device, warmup=warmup, repeat=repeat, budget_s=budget_s)
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

@arguments(**_RNN_SIZES, device=Given(normalize_device), repeat=_REPEAT, tf32=Given(validate_tf32))
def torch_rnn_timings(T: int, hidden_size: int = 20, batch: int = 16, input_size: int = 1,
                   device: Any = "cpu", repeat: int = 3, budget_s: float | None = None,
                   seed: int = 0, threads: int | None = 1, tf32: bool = False) -> dict:
    """Forward and backward times of PyTorch's ``nn.RNN`` (tanh) + readout + cross-entropy.

    On the GPU this is cuDNN's RNN.  The backward pass reruns on one saved graph
    (``retain_graph=True``).  Returns ``{"forward": Timing, "backward": Timing,
    "backward_s": float, "tf32": bool}`` like :func:`rnn_timings`.  Raises :class:`BadInputError` when
    PyTorch is missing and :class:`GPUUnavailableError` when PyTorch sees no GPU.

    ``threads``: CPU threads PyTorch may use while timed (restored afterwards).  One by
    default, like the NumPy code it is compared with: for 20-wide matrices extra
    threads only add synchronisation, and on a busy machine they can make each step
    many times slower.  ``None`` leaves PyTorch's own setting.

    ``tf32``: whether cuDNN and cuBLAS may round float32 inputs to TF32 on a GPU.  PyTorch allows it
    for cuDNN by default; here it is off unless asked, so that cuDNN's RNN does the strict float32 the
    course's side does (CuPy: strict unless ``CUPY_TF32``, :func:`course.torch_peer.cupy_tf32`).  Both
    switches are set before the rounds, outside every timed call, and put back afterwards; the result's
    ``tf32`` says what ran (always False on the CPU, where TF32 does not apply).
    """
    require_fits(4 * (T + 1) * batch * (hidden_size + input_size) * 4, device,
                 what=f"PyTorch's inputs and hidden states of T={T:,} steps, batch {batch:,}, hidden {hidden_size:,}")
    tdev = torch_device(device)        # a clear error without PyTorch, or without its CUDA build
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
    # a GPU), in the same alternating rounds as rnn_timings, under the TF32 setting chosen here.
    gpu = device == "gpu"                # TF32 is a GPU matter: on the CPU the switches are left alone
    with torch_threads(threads), torch_tf32(tf32) if gpu else contextlib.nullcontext():
        loss = forward()

        def backward():
            rnn.zero_grad(set_to_none=True)
            head.zero_grad(set_to_none=True)
            loss.backward(retain_graph=True)

        t = interleaved_rounds({"forward": forward, "backward": backward}, device, warmup=1, repeat=repeat,
                               budget_s=budget_s, timer=benchmark_torch)
    f, b = t["forward"], t["backward"]
    return {"forward": f, "backward": b, "backward_s": b.median, "tf32": tf32 and gpu}


# ------------------------------------------------------------------ the GPU peers, each a CUDA graph

#: The GPU baselines beside the eager ones, each replayed from a CUDA graph: method -> what it times.
CHAIN_PEERS = {"fast chain": "BPPSA's hidden-state gradients alone (RNNBackwardPlan, fused, one CUDA graph)",
               "sequential kernel": "the sequential GPU backward's hidden-state gradients (SequentialBackwardPlan: one "
                                    "warp per batch row walks T steps, W in registers, d prefetched; one CUDA graph)",
               "cudnn graph": "cuDNN's whole nn.RNN backward (PyTorch, TF32 off), captured in torch.cuda.graph"}


@arguments(**{k: _RNN_SIZES[k] for k in ("T", "hidden_size", "batch")}, repeat=_REPEAT, seed=Whole(lo=0))
def chain_peer_timings(T: int, hidden_size: int = 20, batch: int = 16, repeat: int = 5, seed: int = 0) -> dict:
    """On the GPU, the hidden-state gradients of one tanh-RNN chain (``d (T, B, n)`` in (0, 1), W scaled by 1/√n)
    by BPPSA's plan and by the sequential kernel, both replayed from CUDA graphs, in alternating rounds on the same
    inputs.  Returns ``{"backward_s": {method: s}, "backward": {method: Timing}, "max_grad_diff", "captured"}``
    (``captured``: method -> None, or why it ran uncaptured)."""
    from ..devices import require_gpu

    require_gpu()
    xp, n, B = get_xp("gpu"), hidden_size, batch
    rng = np.random.default_rng(seed)
    W = xp.asarray((rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32))
    d = xp.asarray(rng.uniform(0.0, 1.0, (T, B, n)).astype(np.float32))
    g = xp.asarray(rng.standard_normal((B, n)).astype(np.float32))
    plans = {"fast chain": RNNBackwardPlan(T, B, n, W, graph=True),
             "sequential kernel": SequentialBackwardPlan(T, B, n, W, graph=True)}
    got = {m: plan(d, g).copy() for m, plan in plans.items()}
    scale = float(xp.abs(got["sequential kernel"]).max()) or 1.0
    diff = float(xp.abs(got["fast chain"] - got["sequential kernel"]).max()) / scale
    t = interleaved_rounds({m: (lambda p=p: p(d, g)) for m, p in plans.items()}, "gpu", warmup=1, repeat=repeat)
    return {"backward_s": {m: t[m].median for m in plans}, "backward": {m: t[m] for m in plans},
            "max_grad_diff": diff, "captured": {m: p.capture_failed for m, p in plans.items()}}


@arguments(**_RNN_SIZES, repeat=_REPEAT, seed=Whole(lo=0))
def torch_rnn_graph_timings(T: int, hidden_size: int = 20, batch: int = 16, input_size: int = 1, repeat: int = 5,
                            seed: int = 0) -> dict:
    """cuDNN's backward of PyTorch's ``nn.RNN`` (tanh) + readout + cross-entropy, TF32 off, captured once in
    ``torch.cuda.graph`` and timed as graph replays: the forward runs eagerly on a side stream, two backward
    passes warm it up there (gradients allocated), then one backward (``retain_graph=True``) is captured on that
    stream.  Returns ``{"backward": Timing, "backward_s": float, "tf32": False}``; :class:`GPUUnavailableError`
    where PyTorch has no CUDA device."""
    tdev = torch_device("gpu")                        # a clear error without PyTorch's CUDA build
    import torch

    with torch_tf32(False):
        torch.manual_seed(seed)
        rnn = torch.nn.RNN(input_size, hidden_size, nonlinearity="tanh").to(tdev)
        head = torch.nn.Linear(hidden_size, 10).to(tdev)
        x = torch.randn(T, batch, input_size, device=tdev)
        y = torch.randint(0, 10, (batch,), device=tdev)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            _, h = rnn(x)
            loss = torch.nn.functional.cross_entropy(head(h[-1]), y)
            for _ in range(2):
                loss.backward(retain_graph=True)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=side):
                loss.backward(retain_graph=True)
        torch.cuda.current_stream().wait_stream(side)
        t = benchmark_torch(graph.replay, device="gpu", warmup=1, repeat=repeat, name=f"cuDNN graph T={T}")
    return {"backward": t, "backward_s": t.median, "tf32": False}


def best_peer(record_times: dict[str, float]) -> tuple[str, float] | None:
    """The fastest of the peers' backward times ``{method: seconds}`` (None and non-positive times left out).

    >>> best_peer({"torch": 2e-3, "sequential kernel": 1e-3, "cudnn graph": None})
    ('sequential kernel', 0.001)
    """
    if not isinstance(record_times, dict):
        raise BadInputError(f"record_times must map method names to seconds, got {type(record_times).__name__}")
    times = [(s, m) for m, s in record_times.items() if isinstance(s, (int, float)) and s > 0]
    return (min(times)[1], min(times)[0]) if times else None


def _gpu_peers(rs: ResultSet, T: int, h: int, B: int, input_size: int, repeat: int) -> None:
    """The graph-replayed GPU peers at one size, then the headline of ``fast`` against the best peer."""
    peers: dict[str, float] = {}
    try:
        c = chain_peer_timings(T, h, B, repeat)
    except Exception as exc:  # noqa: BLE001 - a peer that cannot run here is said, the sweep goes on
        rs.notes.append(f"gpu T={T}: the graph-replayed chain peers not timed ({type(exc).__name__}: {exc})")
    else:
        for m, t in c["backward"].items():
            rs.add(device="gpu", T=T, method=m, hidden_size=h, batch=B, backward_s=t.median, backward_q25_s=t.q25,
                   backward_q75_s=t.q75, noisy=bool(t.noisy), max_grad_diff=c["max_grad_diff"],
                   graph=c["captured"][m] is None, what=CHAIN_PEERS[m], tf32=cupy_tf32())
        peers["sequential kernel"] = c["backward_s"]["sequential kernel"]
        fast_chain = rs.select(device="gpu", T=T, method="fast chain", hidden_size=h, batch=B)[-1]
        fast_chain["vs_sequential_kernel"] = c["backward_s"]["sequential kernel"] / c["backward_s"]["fast chain"]
    try:
        g = torch_rnn_graph_timings(T, h, B, input_size, repeat)
    except Exception as exc:  # noqa: BLE001 - PyTorch without CUDA, or a capture it refuses: said, not timed
        note = f"cuDNN's graph-captured backward not timed ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
        if note not in rs.notes:
            rs.notes.append(note)
    else:
        t = g["backward"]
        rs.add(device="gpu", T=T, method="cudnn graph", hidden_size=h, batch=B, backward_s=t.median,
               backward_q25_s=t.q25, backward_q75_s=t.q75, noisy=bool(t.noisy), graph=True,
               what=CHAIN_PEERS["cudnn graph"], tf32=False)
        peers["cudnn graph"] = t.median
    eager = rs.select(device="gpu", T=T, method="torch", hidden_size=h, batch=B)
    if eager:
        peers["torch"] = eager[-1]["backward_s"]
    fast = rs.select(device="gpu", T=T, method="fast", hidden_size=h, batch=B)
    best = best_peer(peers)
    if fast and best:
        f = fast[-1]
        f.update(best_peer=best[0], best_peer_s=best[1], vs_best_peer=best[1] / f["backward_s"],
                 vs_peers={m: s / f["backward_s"] for m, s in peers.items()},
                 headline=f"BPPSA's backward ({f['backward_s'] * 1e3:.3g} ms) is {best[1] / f['backward_s']:.2f}× "
                          f"the best peer, {best[0]} ({best[1] * 1e3:.3g} ms; the sequential kernel's time is its "
                          "hidden-state chain alone, a lower bound of its whole backward)")


# ------------------------------------------------------------------ the sweep

def _validate_sizes(name: str, v: Any) -> list[int]:
    vals = list(v) if isinstance(v, (list, tuple, range, np.ndarray)) else [v]
    if not vals:
        raise BadInputError(f"{name} must be a non-empty list of whole numbers >= 1, got {v!r}")
    return sorted({whole_number(name, x) for x in vals})


@arguments(input_size=Whole(hint="numbers per input step"), devices=Devices(), methods=Given(_validate_methods),
           include_torch=OneOf(True, False), dtype=Dtype(floating=True), repeat=_REPEAT,
           budget_s=Optional(Real(above=0, hint="seconds for the whole sweep")), gpu_peers=OneOf(True, False))
def rnn_sweep(Ts: Sequence[int] = QUICK_T, hidden_size: int | Sequence[int] = 20, batch: int | Sequence[int] = 16,
              input_size: int = 1, devices: Sequence[str] | None = None,
              methods: Sequence[str] = ("sequential", "scan"), include_torch: bool = True,
              dtype: Any = "float32", repeat: int = 3, budget_s: float | None = 30.0,
              progress: Callable | None = None, experiment: str = "bppsa_rnn", gpu_peers: bool = True) -> ResultSet:
    """Backward time of each method against sequence length T (batch size, hidden size), on each device.

    One record per (device, T, batch, hidden size, method) with ``forward_s``,
    ``backward_s`` (and its quartiles), ``full_s`` (their sum: one training step) and the work counts;
    ``method="torch"`` for the PyTorch peer when ``include_torch`` and it is
    installed.  ``batch`` and ``hidden_size`` may each be one size or several.
    ``budget_s`` bounds the whole sweep: settings not reached are listed in the notes.
    A setting that does not fit in the device's memory (the scan keeps its whole tree:
    about 3 GB at the paper's T = 30,000) is listed in the notes too, and the sweep goes on.

    On a GPU with ``gpu_peers`` (and ``"fast"`` among the methods) each size also gets the graph-replayed
    peers of :data:`CHAIN_PEERS` (``method="fast chain"``, ``"sequential kernel"``, ``"cudnn graph"``), and
    the ``fast`` record its ratio to the best of them (``best_peer``, ``vs_best_peer``, ``headline``).
    """
    Ts = _validate_sizes("Ts (sequence lengths)", Ts)
    batches = _validate_sizes("batch", batch)
    hiddens = _validate_sizes("hidden_size", hidden_size)
    devs = devices
    import time

    torch_ok = include_torch and torch_available()
    rs = ResultSet(experiment, params={"Ts": Ts, "hidden_sizes": hiddens, "batches": batches,
                                       "input_size": input_size, "dtype": str(dtype), "devices": devs,
                                       "methods": list(methods) + (["torch"] if torch_ok else []),
                                       "repeat": repeat, "budget_s": budget_s, "torch_threads": 1,
                                       "tf32": "each record's tf32: the course's side follows CuPy (strict "
                                               "float32 unless CUPY_TF32), PyTorch's runs with TF32 off",
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
                   max_grad_diff=r["max_grad_diff"], tf32=cupy_tf32() if d == "gpu" else False)
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
                       full_s=tr["forward"].median + tr["backward"].median, noisy=bool(tr["backward"].noisy),
                       tf32=tr["tf32"])
        if d == "gpu" and gpu_peers and "fast" in methods:
            _gpu_peers(rs, T, h, B, input_size, repeat)
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


@arguments(rs=Given(validate_results), device=Given(normalize_device), x=OneOf("T", "batch", "hidden_size"))
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


@arguments(rs=Given(validate_results), device=Given(normalize_device))
def tf32_setting(rs: ResultSet, device: str, method: str) -> str:
    """How ``method``'s records on ``device`` ran their float32 products, in words, from each record's ``tf32``.

    ``"TF32 off"`` (strict float32), ``"TF32 on"``, ``"TF32 on in some records, off in others"``, or
    ``"TF32 not recorded"`` where the records predate the field.

    >>> rs = ResultSet("demo"); rs.add(device="gpu", method="torch", T=10, tf32=False)
    >>> tf32_setting(rs, "gpu", "torch"), tf32_setting(rs, "gpu", "fast")
    ('TF32 off', 'TF32 not recorded')
    """
    seen = {r.get("tf32") for r in rs.select(device=device, method=method)}
    if seen == {False}:
        return "TF32 off"
    if seen == {True}:
        return "TF32 on"
    if seen == {True, False}:
        return "TF32 on in some records, off in others"
    return "TF32 not recorded"


# ------------------------------------------------------------------ where the scan wins on a CPU

def _require_chain_fits(T: int, n: int, dtype: Any) -> None:
    if T * n * n > MAX_ELEMENTS:
        raise BadInputError(f"T = {T:,} steps of {n}×{n} Jacobians is {T * n * n:,} numbers, more than the "
                            f"{MAX_ELEMENTS:,} this sweep allows; choose a smaller T or n")
    require_fits(3 * T * n * n * np.dtype(dtype).itemsize, "cpu", what=f"a chain of {T:,} {n}×{n} Jacobians")


@arguments(T=Whole(hint="the chain length"), n=Whole(hint="the state size"), then=_require_chain_fits)
def random_chain(T: int, n: int, seed: int = 0, dtype: Any = "float32") -> tuple[np.ndarray, np.ndarray]:
    """``T`` random rotations ``(T, n, n)`` (their products neither blow up nor vanish) and a gradient ``(n,)``.

    >>> J, g = random_chain(3, 2)
    >>> J.shape, g.shape
    ((3, 2, 2), (2,))
    """
    rng = np.random.default_rng(seed)
    q, r = np.linalg.qr(rng.standard_normal((T, n, n)))
    q = q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[..., None, :]
    return q.astype(dtype), rng.standard_normal(n).astype(dtype)


@arguments(ns=Wholes(hint="each is a state size"), Ts=Wholes(hint="each is a chain length"), repeat=Whole())
def regime_sweep(ns: Sequence[int] = REGIME_NS, Ts: Sequence[int] = REGIME_TS, repeat: int = 3,
                 budget_s: float = 1.0, total_budget_s: float | None = 30.0,
                 progress: Callable | None = None) -> ResultSet:
    """Time sequential backprop and the scan on random chains, for every (n, T), on the CPU.

    Each record: ``method`` (``"sequential"`` or ``"scan"``), ``n``, ``T``, the timing, and ``flops``
    (the work the method does: 2n² per step for the loop, 2n³ per combine for the scan).  Chains
    larger than :data:`MAX_ELEMENTS` are skipped with a note; ``total_budget_s`` stops the sweep
    early, and says so.
    """
    rs = ResultSet("bppsa_regime", params={"ns": ns, "Ts": Ts, "dtype": "float32"})
    jobs = [(n, T) for T in Ts for n in ns]
    too_big = [(n, T) for n, T in jobs if T * n * n > MAX_ELEMENTS]
    if too_big:
        rs.notes.append(f"Not measured, over {MAX_ELEMENTS:,} numbers: " +
                        ", ".join(f"n = {n}, T = {T:,}" for n, T in too_big))
    jobs = [j for j in jobs if j not in too_big]
    for n, T in sweep_within_budget(jobs, rs, total_budget_s, progress, "n × T",
                                    skipped=lambda rest: f"{len(rest)} (n, T) pairs not measured"):
        J, g = random_chain(T, n, seed=n * 7919 + T)
        combines = 2 * T  # the Blelloch tree: about T up-sweep and T down-sweep combines
        for method, fn, flops in (("sequential", backprop_sequential, 2.0 * n * n * T),
                                  ("scan", backprop_scan, 2.0 * n ** 3 * combines)):
            t = benchmark(fn, J, g, warmup=1, repeat=repeat, budget_s=budget_s, name=f"{method} n={n} T={T}")
            rs.add_timing(t, method=method, n=n, T=T, flops=flops)
    return rs


@arguments(rs=Given(validate_results))
def speedup_grid(rs: ResultSet) -> dict[tuple[int, int], float]:
    """``{(n, T): sequential time / scan time}`` (above 1: the scan won) for every measured pair."""
    out = {}
    for r in rs.select(method="scan"):
        seq = rs.select(method="sequential", n=r["n"], T=r["T"])
        if seq and r["median_s"] > 0:
            out[(r["n"], r["T"])] = seq[0]["median_s"] / r["median_s"]
    return out


@arguments(rs=Given(validate_results))
def crossover_n(rs: ResultSet) -> dict[int, int | None]:
    """For each T: the largest n at which the scan was faster than the loop (None: at no n measured).

    >>> rs = ResultSet("bppsa_regime")
    >>> for n, seq, scan in ((2, 1.0, 0.2), (8, 1.0, 0.9), (32, 1.0, 3.0)):
    ...     rs.add(device="cpu", method="sequential", n=n, T=100, median_s=seq)
    ...     rs.add(device="cpu", method="scan", n=n, T=100, median_s=scan)
    >>> crossover_n(rs)
    {100: 8}
    """
    grid = speedup_grid(rs)
    out: dict[int, int | None] = {}
    for T in sorted({T for _, T in grid}):
        wins = [n for (n, t), s in grid.items() if t == T and s > 1.0]
        out[T] = max(wins) if wins else None
    return out
