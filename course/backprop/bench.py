"""The course's training step against PyTorch's, measured in the same run.

:func:`compare_with_torch` builds the same MLP twice: once as
:class:`course.backprop.MLP` (NumPy on the CPU, CuPy on a GPU) and once in
PyTorch with the same weights, then times one SGD step of each in alternating
rounds, so that a busy moment of the machine hits both alike.  It reports the
ratio ``ours / torch`` (below 1: the course's step is faster).  PyTorch is an
optional peer: without it the function says so instead of guessing a number.

>>> r = compare_with_torch((20, 16, 4), batch=8, rounds=1, repeat=2)
>>> r["ours_s"] > 0 and "ratio" in r
True
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from ..devices import normalize_device, synchronize, to_numpy
from ..errors import whole_number
from ..timing import interleaved_rounds
from ..torch_peer import benchmark_torch, torch_available, torch_cuda_available, torch_synchronize
from .layers import MLP, softmax_cross_entropy, softmax_cross_entropy_backward
from .trace import random_batch

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["torch_available", "torch_mlp_step", "compare_with_torch", "naive_train_step", "speed_ablation",
           "ablation_figure", "TARGET_CPU", "TARGET_GPU"]

#: The issue's targets for ours / PyTorch: faster on the CPU, within 20 % on a GPU.
TARGET_CPU = 0.95
TARGET_GPU = 1.2


def torch_mlp_step(model: MLP, x: Any, y: Any, lr: float = 1e-3) -> tuple[Callable[[], None], Any]:
    """A PyTorch copy of ``model`` (same weights) and a function doing one SGD step of it on ``(x, y)``.

    The step is what a PyTorch user writes: ``zero_grad``, forward, ``cross_entropy``,
    ``backward``, ``optimizer.step()`` (plain SGD).  Returns ``(step_fn, torch_module)``.
    """
    import torch

    dev = "cuda" if model.device == "gpu" else "cpu"
    if dev == "cpu":
        torch.set_num_threads(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                              else os.cpu_count() or 1)
    acts = {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh, "sigmoid": torch.nn.Sigmoid}
    mods = []
    for i, lin in enumerate(model.linear_layers()):
        t = torch.nn.Linear(lin.n_in, lin.n_out, dtype=getattr(torch, model.dtype.name), device=dev)
        with torch.no_grad():
            t.weight.copy_(torch.from_numpy(to_numpy(lin.W).T.copy()))
            t.bias.copy_(torch.from_numpy(to_numpy(lin.b)))
        mods.append(t)
        if i < len(model.sizes) - 2:
            mods.append(acts[model.activation]())
    net = torch.nn.Sequential(*mods)
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    tx = torch.as_tensor(to_numpy(x), device=dev)
    ty = torch.as_tensor(to_numpy(y), device=dev)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(net(tx), ty)
        loss.backward()
        opt.step()

    return step, net


def _settle(fn, args: tuple, device: str, seconds: float, sync: Callable[[str], None] = synchronize) -> None:
    """Run ``fn`` for ``seconds`` (at least twice) before it is timed.

    NumPy's BLAS and PyTorch each keep worker threads that spin for a while after
    a call.  Right after switching from one library to the other, those threads
    still compete for the cores and the first calls run slowly; without this
    pause, alternating rounds would charge that to whichever side comes second.
    """
    t0, n = time.perf_counter(), 0
    while n < 2 or time.perf_counter() - t0 < seconds:
        fn(*args)
        n += 1
    sync(device)


def compare_with_torch(sizes: Sequence[int] = (784, 512, 512, 10), batch: int = 256, dtype: Any = "float32",
                       device: Any = "cpu", rounds: int = 5, repeat: int = 10,
                       budget_s: float | None = None, settle_s: float = 0.3) -> dict:
    """Median time of one training step, ours and PyTorch's, and their ratio.

    ``rounds`` alternating rounds (:func:`course.timing.interleaved_rounds`) of ``repeat`` timed
    steps each, each side first running untimed for ``settle_s`` seconds (see :func:`_settle`); the
    medians are over all the timed steps of each side.  ``budget_s`` stops starting
    new rounds once that many seconds have passed (one round always runs).  Returns ``{"ours_s",
    "torch_s", "ratio", "target", "ours_noisy", ...}``, with ``torch_s`` None (and a ``note``)
    when PyTorch or its CUDA build is missing.
    """
    dev = normalize_device(device)
    rounds = whole_number("rounds", rounds, hi=1000, hint="alternating rounds of timed steps, e.g. 5")
    repeat = whole_number("repeat", repeat, hi=10_000, hint="timed steps per round, e.g. 10")
    model = MLP(sizes, dtype=dtype, device=dev, seed=0)
    x, y = random_batch(model, batch)
    out = {"sizes": list(sizes), "batch": batch, "dtype": model.dtype.name, "device": dev,
           "flops": model.flops_per_step(batch), "target": TARGET_GPU if dev == "gpu" else TARGET_CPU,
           "torch_s": None, "ratio": None, "note": ""}
    step = None
    if not torch_available():
        out["note"] = "PyTorch is not installed: no peer to compare with (pip install torch)."
    else:
        import torch

        if dev == "gpu" and not torch_cuda_available():
            out["note"] = "This PyTorch has no CUDA: no GPU peer to compare with."
        else:
            step, _ = torch_mlp_step(model, x, y)
            out["torch_version"] = torch.__version__
            out["torch_threads"] = torch.get_num_threads()
    fns = {"ours": partial(model.train_step, x, y, 1e-3)} | ({"torch": step} if step is not None else {})
    settle = {"ours": lambda: _settle(fns["ours"], (), dev, settle_s),
              "torch": lambda: _settle(step, (), dev, settle_s, sync=torch_synchronize)}
    t = interleaved_rounds(fns, dev, warmup=0, repeat=int(rounds), per_round=int(repeat), budget_s=budget_s,
                           timer={"torch": benchmark_torch}, before=lambda k: settle[k]())
    if t["ours"].stopped_early:
        done = t["ours"].repeat // int(repeat)
        out["note"] += f" Stopped after {done} of {rounds} rounds by the {budget_s} s budget."
    for k, v in t.items():
        out.update({f"{k}_s": v.median, f"{k}_q25_s": v.q25, f"{k}_q75_s": v.q75, f"{k}_noisy": v.noisy})
    if "torch" in t:
        out["ratio"] = out["ours_s"] / out["torch_s"]
    return out


def naive_train_step(model: MLP, x: Any, y: Any, lr: float) -> float:
    """The same SGD step written the obvious way: every layer allocates its outputs, ``p -= lr * dp``
    makes a temporary, and whatever dtype ``x`` has spreads through the step.

    The arithmetic is identical to :meth:`MLP.train_step`; only the memory traffic differs.
    """
    h, caches = x, []
    for layer in model.layers:
        h, cache = layer.forward(h)              # a new output array per layer and per step
        caches.append(cache)
    loss, cache = softmax_cross_entropy(h, y)
    g = softmax_cross_entropy_backward(cache)
    for i in range(len(model.layers) - 1, -1, -1):
        layer = model.layers[i]
        g = layer.backward(g, caches[i], need_dx=False) if i == 0 else layer.backward(g, caches[i])
    for p, dp in zip(model.parameters(), model.gradients()):
        p -= lr * dp                             # lr * dp is a temporary as big as p
    return float(loss)


def speed_ablation(sizes: Sequence[int] = (784, 512, 512, 10), batch: int = 256, device: Any = "cpu",
                   rounds: int = 5, repeat: int = 3, budget_s: float | None = 2.0) -> dict:
    """Median step time of three versions of one float32 SGD step, timed in alternating rounds.

    ``"course"``: :meth:`MLP.train_step` (buffers reused, in-place update, float32);
    ``"allocating"``: :func:`naive_train_step` on the same float32 data;
    ``"float64 data"``: the allocating step fed float64 inputs, which NumPy silently
    promotes to float64 arithmetic in every layer.  Returns name -> seconds.
    """
    dev = normalize_device(device)
    rounds = whole_number("rounds", rounds, hi=1000, hint="alternating rounds, e.g. 5")
    repeat = whole_number("repeat", repeat, hi=10_000, hint="timed steps per round, e.g. 3")
    model = MLP(sizes, dtype="float32", device=dev, seed=0)
    x, y = random_batch(model, batch)
    x64 = x.astype("float64")
    jobs = {"course": (model.train_step, (x, y, 1e-6)),
            "allocating": (naive_train_step, (model, x, y, 1e-6)),
            "float64 data": (naive_train_step, (model, x64, y, 1e-6))}
    t = interleaved_rounds({k: partial(fn, *args) for k, (fn, args) in jobs.items()}, dev, warmup=1,
                           repeat=max(int(rounds), 1), per_round=int(repeat), budget_s=budget_s)
    return {k: v.median for k, v in t.items()}


def ablation_figure(times: dict, title: str = "") -> Figure:
    """Bars of :func:`speed_ablation`'s times, each labelled with its ratio to the course's step."""
    from ..plots import bar_figure

    what = {"course": "course: buffers reused, float32", "allocating": "new arrays every step, float32",
            "float64 data": "new arrays, float64 input data"}
    base = times["course"]
    items = [(f"{what.get(k, k)} ({v / base:.2f}×)", v * 1e3, "cpu") for k, v in times.items()]
    return bar_figure(items, title=title or "One SGD step of 784-512-512-10, batch 256: what makes it fast",
                      unit="ms")
