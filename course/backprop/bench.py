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

import contextlib
import os
import time
import tracemalloc
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from ..arguments import Dtype, Given, OneOf, Optional, Real, Whole, Wholes, arguments
from ..capture import matmul_into
from ..devices import gpu_available, gpu_info, gpu_unavailable_reason, normalize_device, synchronize, to_numpy
from ..errors import BadInputError
from ..results import ResultSet
from ..timing import benchmark, interleaved_rounds
from ..torch_peer import (
    TORCH_INSTALL,
    benchmark_torch,
    cupy_tf32,
    torch_available,
    torch_cuda_available,
    torch_synchronize,
    torch_tf32,
)
from .checkpointing import checkpointed_backward
from .counting import mlp_flops
from .fast_step import STEP_PRECISIONS, FastStep, declared_counts
from .layers import MLP, softmax_cross_entropy, softmax_cross_entropy_backward, validate_model
from .mfu import GEMM_PRECISION, data_sheet_peak, model_flops_utilisation, validate_step_precisions
from .trace import random_batch
from .validate import validate_finite_loss, validate_inputs, validate_lr

__all__ = ["PreallocatedMLP", "torch_available", "torch_mlp_step", "torch_sgd", "TorchStep", "SGD_KINDS",
           "compare_with_torch", "naive_train_step", "speed_ablation", "checkpoint_sweep", "TARGET_CPU", "TARGET_GPU",
           "time_gemm_rate", "precision_sweep", "precision_peer_sweep", "COURSE_PRECISION_STEPS"]

#: The issue's targets for ours / PyTorch: faster on the CPU, within 20 % on a GPU.
TARGET_CPU = 0.95
TARGET_GPU = 1.2


class PreallocatedMLP(MLP):
    """:class:`MLP` with the same weights, layers and arithmetic, whose :meth:`train_step` is written
    for speed: every array a step needs is made once per batch size and reused (each Linear's output
    is overwritten in place by its activation), the update is done in place, and every array keeps the
    model's dtype.  This, not the algorithm, is what makes a plain NumPy step as fast as a framework's.

    >>> import numpy as np
    >>> x, y = np.ones((4, 6)), np.array([0, 1, 2, 1])
    >>> fast, plain = PreallocatedMLP([6, 5, 3], dtype="float64"), MLP([6, 5, 3], dtype="float64")
    >>> fast.train_step(x, y, lr=0.1) == plain.train_step(x, y, lr=0.1)
    True
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._rows = -1

    def _buffers(self, rows: int) -> None:
        """Each Linear's output (then its activation's, in place), the gradient at each Linear's output,
        the ReLU masks and the update: made for ``rows`` rows, reused while the batch size stays."""
        if rows == self._rows:
            return
        xp, dt = self.xp, self.dtype
        self._z = [xp.empty((rows, n), dtype=dt) for n in self.sizes[1:]]
        self._g = [xp.empty((rows, n), dtype=dt) for n in self.sizes[1:]]
        self._mask = [xp.empty((rows, n), dtype=bool) for n in self.sizes[1:]]
        self._update = [xp.empty_like(p) for p in self.parameters()]
        self._rows = rows

    def _activate(self, z: Any) -> None:
        xp = self.xp
        if self.activation == "relu":
            xp.maximum(z, 0, out=z)
        elif self.activation == "tanh":
            xp.tanh(z, out=z)
        else:                                         # sigmoid as (1 + tanh(z / 2)) / 2, as Sigmoid does
            xp.multiply(z, 0.5, out=z)
            xp.tanh(z, out=z)
            z *= 0.5
            z += 0.5

    def _activation_backward(self, g: Any, y: Any, mask: Any) -> None:
        xp = self.xp
        if self.activation == "relu":
            xp.multiply(g, xp.greater(y, 0, out=mask), out=g)
        elif self.activation == "tanh":
            xp.multiply(g, 1 - y * y, out=g)
        else:
            xp.multiply(g, y * (1 - y), out=g)

    def train_step(self, x: Any, y: Any, lr: float) -> float:
        """The teaching :meth:`MLP.train_step`'s numbers, into the buffers; returns the loss before the update."""
        x, y = validate_inputs(self, x, y, lr)
        self._buffers(x.shape[0])
        xp, lin, last, h = self.xp, self.linear_layers(), len(self.sizes) - 2, x
        for j, layer in enumerate(lin):               # forward, each output into its buffer
            h = xp.matmul(h, layer.W, out=self._z[j])
            h += layer.b
            if j < last:
                self._activate(h)
        with np.errstate(over="ignore", invalid="ignore"):   # a diverging run gets validate_finite_loss's message
            loss, (probs, labels) = softmax_cross_entropy(h, y)
        loss = validate_finite_loss(loss, x, lr)
        g = self._g[last]                             # d loss / d logits = (softmax - one_hot) / batch
        g[...] = probs
        g[xp.arange(g.shape[0]), labels] -= 1
        g *= 1.0 / g.shape[0]
        for j in range(last, -1, -1):                 # backward, each gradient into its buffer
            g = self._g[j]
            if j < last:
                self._activation_backward(g, self._z[j], self._mask[j])
            xp.matmul((self._z[j - 1] if j else x).T, g, out=lin[j].dW)
            xp.sum(g, axis=0, out=lin[j].db)
            if j:
                xp.matmul(g, lin[j].W.T, out=self._g[j - 1])
        for p, dp, step in zip(self.parameters(), self.gradients(), self._update):
            xp.multiply(dp, lr, out=step)             # in place: no new arrays in the update
            p -= step
        return loss


#: The optimisers :func:`torch_sgd` tries, best first: ``name -> torch.optim.SGD`` keywords.
SGD_KINDS = {"fused": {"fused": True}, "foreach": {"foreach": True}, "for-loop": {"foreach": False}}


@arguments(lr=Real(lo=0, hint="the learning rate"))
def torch_sgd(params: Any, lr: float) -> tuple[Any, str]:
    """``(torch.optim.SGD over params, which ran)``: the fused kernel where this PyTorch has it for the
    parameters' device and dtype (one launch for every parameter), else the ``foreach`` kernels (on a
    GPU), else the plain loop.  Each is tried on a throwaway tensor first, since PyTorch checks its
    fused kernel only at the first ``step()``; the peer is then the best PyTorch does here."""
    import torch

    params = list(params)
    probe = torch.zeros(1, device=params[0].device, dtype=params[0].dtype, requires_grad=True)
    probe.grad = torch.zeros_like(probe)
    for kind, options in SGD_KINDS.items():
        if kind == "foreach" and params[0].device.type != "cuda":
            continue                                # on the CPU PyTorch's own default is the loop
        try:
            torch.optim.SGD([probe], lr=0.0, **options).step()
        except (TypeError, RuntimeError, ValueError):   # an older PyTorch, or no such kernel for the device
            continue
        return torch.optim.SGD(params, lr=lr, **options), kind
    raise RuntimeError("torch.optim.SGD refused every implementation on a probe tensor")  # pragma: no cover


class TorchStep:
    """One SGD step of a PyTorch copy of a course MLP, holding everything the step reads and writes.

    Attributes: ``net`` (``torch.nn.Sequential``), ``optimizer``, ``inputs`` and ``labels`` (tensors on
    the device), ``sgd`` (which optimiser implementation runs: ``"fused"``, ``"foreach"`` or
    ``"for-loop"``) and ``tf32`` (the TF32 setting it is meant to run under; None: whatever is in
    force.  A caller sets it outside the timed call, as :func:`course.backprop.timing.ladder_sweep` does).
    """

    @arguments(sgd=OneOf(*SGD_KINDS), tf32=Optional(OneOf(True, False)))
    def __init__(self, net: Any, optimizer: Any, inputs: Any, labels: Any, sgd: str, tf32: bool | None = None):
        self.net, self.optimizer, self.inputs, self.labels = net, optimizer, inputs, labels
        self.sgd, self.tf32 = sgd, tf32

    def __call__(self) -> None:
        """What a PyTorch user writes: ``zero_grad``, forward, ``cross_entropy``, ``backward``, ``step``."""
        import torch

        self.optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(self.net(self.inputs), self.labels)
        loss.backward()
        self.optimizer.step()


@arguments(model=Given(validate_model), lr=Given(validate_lr))
def torch_mlp_step(model: MLP, x: Any, y: Any, lr: float = 1e-3) -> tuple[TorchStep, Any]:
    """A PyTorch copy of ``model`` (same weights) and a :class:`TorchStep` doing one SGD step of it on
    ``(x, y)``, with PyTorch's best SGD here (:func:`torch_sgd`).  Returns ``(step, torch_module)``.
    """
    x, y = validate_inputs(model, x, y)
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
    opt, kind = torch_sgd(net.parameters(), lr)
    tx = torch.as_tensor(to_numpy(x), device=dev)
    ty = torch.as_tensor(to_numpy(y), device=dev)
    return TorchStep(net, opt, tx, ty, kind), net


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


@arguments(device=Given(normalize_device), dtype=Dtype(device="device", floating=True),
           batch=Whole(hint="the examples in one step"),
           rounds=Whole(hi=1000, hint="alternating rounds of timed steps, e.g. 5"),
           repeat=Whole(hi=10_000, hint="timed steps per round, e.g. 10"),
           budget_s=Optional(Real(above=0, hint="seconds before no new round starts")),
           settle_s=Real(lo=0, hint="seconds each side runs untimed before its turn"))
def compare_with_torch(sizes: Sequence[int] = (784, 512, 512, 10), batch: int = 256, dtype: Any = "float32",
                       device: Any = "cpu", rounds: int = 5, repeat: int = 10,
                       budget_s: float | None = None, settle_s: float = 0.3) -> dict:
    """Median time of one training step, ours and PyTorch's, and their ratio.

    ``rounds`` alternating rounds (:func:`course.timing.interleaved_rounds`) of ``repeat`` timed
    steps each, each side first running untimed for ``settle_s`` seconds (see :func:`_settle`); the
    medians are over all the timed steps of each side.  ``budget_s`` stops starting
    new rounds once that many seconds have passed (one round always runs).  Returns ``{"ours_s",
    "torch_s", "ratio", "target", "ours_noisy", ...}``, with ``torch_s`` None (and a ``note``)
    when PyTorch or its CUDA build is missing.  ``torch_sgd`` names PyTorch's optimiser
    (:func:`torch_sgd`); ``ours_tf32`` and ``torch_tf32`` the TF32 setting of each side (on a GPU,
    PyTorch's switches are off for the whole measurement, set outside the timed calls).
    """
    dev = device
    model = PreallocatedMLP(sizes, dtype=dtype, device=dev, seed=0)
    x, y = random_batch(model, batch)
    out = {"sizes": list(sizes), "batch": batch, "dtype": model.dtype.name, "device": dev,
           "flops": model.flops_per_step(batch), "target": TARGET_GPU if dev == "gpu" else TARGET_CPU,
           "torch_s": None, "ratio": None, "note": ""}
    step = None
    if not torch_available():
        out["note"] = f"PyTorch is not installed: no peer to compare with (to add it, {TORCH_INSTALL})."
    else:
        import torch

        if dev == "gpu" and not torch_cuda_available():
            out["note"] = "This PyTorch has no CUDA: no GPU peer to compare with."
        else:
            step, _ = torch_mlp_step(model, x, y)
            out["torch_version"] = torch.__version__
            out["torch_threads"] = torch.get_num_threads()
            out["torch_sgd"] = step.sgd
    # TF32 applies on a GPU only: PyTorch's switches are set off for the whole measurement, outside every
    # timed call, so that both sides run strict float32 (unless CUPY_TF32 asks CuPy for TF32: said below).
    gpu_peer = step is not None and dev == "gpu"
    out |= {"ours_tf32": cupy_tf32() if dev == "gpu" else False} | ({"torch_tf32": False} if step is not None else {})
    fns = {"ours": partial(model.train_step, x, y, 1e-3)} | ({"torch": step} if step is not None else {})
    settle = {"ours": lambda: _settle(fns["ours"], (), dev, settle_s),
              "torch": lambda: _settle(step, (), dev, settle_s, sync=torch_synchronize)}
    with torch_tf32(False) if gpu_peer else contextlib.nullcontext():
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


@arguments(model=Given(validate_model), lr=Given(validate_lr))
def naive_train_step(model: MLP, x: Any, y: Any, lr: float) -> float:
    """The same SGD step written the obvious way: every layer allocates its outputs, ``p -= lr * dp``
    makes a temporary, and whatever dtype ``x`` has spreads through the step.

    The arithmetic is identical to :meth:`PreallocatedMLP.train_step`; only the memory traffic differs.
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


@arguments(batch=Whole(hint="the examples in one step"), device=Given(normalize_device),
           rounds=Whole(hi=1000, hint="alternating rounds, e.g. 5"),
           repeat=Whole(hi=10_000, hint="timed steps per round, e.g. 3"),
           budget_s=Optional(Real(above=0, hint="seconds before no new round starts")))
def speed_ablation(sizes: Sequence[int] = (784, 512, 512, 10), batch: int = 256, device: Any = "cpu",
                   rounds: int = 5, repeat: int = 3, budget_s: float | None = 2.0) -> dict:
    """Median step time of three versions of one float32 SGD step, timed in alternating rounds.

    ``"course"``: :meth:`PreallocatedMLP.train_step` (buffers reused, in-place update, float32);
    ``"allocating"``: :func:`naive_train_step` on the same float32 data;
    ``"float64 data"``: the allocating step fed float64 inputs, which NumPy silently
    promotes to float64 arithmetic in every layer.  Returns name -> seconds.
    """
    dev = device
    model = PreallocatedMLP(sizes, dtype="float32", device=dev, seed=0)
    x, y = random_batch(model, batch)
    x64 = x.astype("float64")
    jobs = {"course": (model.train_step, (x, y, 1e-6)),
            "allocating": (naive_train_step, (model, x, y, 1e-6)),
            "float64 data": (naive_train_step, (model, x64, y, 1e-6))}
    t = interleaved_rounds({k: partial(fn, *args) for k, (fn, args) in jobs.items()}, dev, warmup=1,
                           repeat=max(int(rounds), 1), per_round=int(repeat), budget_s=budget_s)
    return {k: v.median for k, v in t.items()}


def _traced_peak(fn: Callable[[], Any]) -> int:
    """Peak bytes numpy held beyond what it held before ``fn`` ran (tracemalloc sees numpy's buffers).

    ``fn`` runs twice under tracing and the second run is measured: the first replaces the gradients
    allocated before tracing began, so that in the second each new gradient frees the one it replaces
    and the peak is the step's own working memory, not one copy of every gradient."""
    was = tracemalloc.is_tracing()
    if not was:
        tracemalloc.start()
    fn()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    fn()
    peak = tracemalloc.get_traced_memory()[1] - base
    if not was:
        tracemalloc.stop()
    return int(peak)


def _require_a_k_within(depth: int, ks: list[int] | None) -> None:
    """Refuse ``ks`` with no k from 1 to the blocks (``depth + 1``): the sweep would have nothing to time."""
    if ks is not None and not any(k <= depth + 1 for k in ks):
        raise BadInputError(f"ks must hold at least one k from 1 to {depth + 1} (the blocks of a depth-{depth} "
                            f"network), got {ks}")


@arguments(depth=Whole(hint="the hidden layers of the network"), width=Whole(hint="the units of each hidden layer"),
           batch=Whole(hint="the examples in one step"),
           ks=Optional(Wholes(hint="a checkpoint every k blocks, k >= 1")), device=Given(normalize_device),
           dtype=Dtype(device="device", floating=True), repeat=Whole(hi=10_000, hint="timed rounds, e.g. 5"),
           budget_s=Optional(Real(above=0, hint="seconds before no new round starts")), then=_require_a_k_within)
def checkpoint_sweep(depth: int = 16, width: int = 256, batch: int = 128, ks: Sequence[int] | None = None,
                     device: Any = "cpu", dtype: Any = "float32", repeat: int = 5, budget_s: float | None = 2.0,
                     progress: Callable | None = None) -> ResultSet:
    """Peak activation memory, recomputed work and measured step time for each k.

    ``depth`` hidden layers of ``width`` units, input 784 and 10 classes.  On the
    CPU the peak of all memory numpy allocated during the step (tracemalloc) is
    recorded too, as a cross-check of the activation count.
    """
    dev = device
    model = MLP([784] + [width] * depth + [10], dtype=dtype, device=dev)
    L = depth + 1
    ks = sorted(set(int(k) for k in (ks or [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, L]) if 1 <= int(k) <= L))
    x, y = random_batch(model, batch)
    rs = ResultSet("backprop_checkpointing", params={"depth": depth, "width": width, "batch": batch,
                                                     "blocks": L, "dtype": str(dtype), "ks": ks})
    runs = {k: checkpointed_backward(model, x, y, k) for k in ks}     # also the warm-up
    # Time the values of k in turns (k1, k2, ..., then again), so a slow moment of a
    # shared machine hits them all alike; the median over the rounds is kept per k.
    t = interleaved_rounds({k: partial(checkpointed_backward, model, x, y, k) for k in ks}, dev, warmup=0,
                           repeat=max(int(repeat), 3), min_rounds=3, budget_s=budget_s, progress=progress,
                           desc="checkpointing")
    if t[ks[0]].stopped_early:
        rs.notes.append(f"timing stopped after {t[ks[0]].repeat} rounds by the {budget_s} s budget")
    synchronize(dev)
    base = t[ks[0]].median
    for k in ks:
        run = runs[k]
        traced = (_traced_peak(lambda k=k: checkpointed_backward(model, x, y, k)) if dev == "cpu"
                  else run.device_peak_bytes)
        rs.add_timing(t[k], every=k, blocks=L, peak_activation_bytes=run.peak_activation_bytes,
                      checkpoints=run.checkpoints, recomputed_blocks=run.recomputed_blocks,
                      extra_compute=run.extra_compute, traced_peak_bytes=traced, time_ratio=t[k].median / base,
                      traced_by="tracemalloc" if dev == "cpu" else "CuPy memory pool")
    return rs


# ----------------------------------------------------------------------------- the fast step at each precision: MFU

def _operands(xp: Any, n: int, precision: str) -> tuple[Any, Any, Any]:
    """Two ``n × n`` operands and an output at the products' precision (bfloat16 as uint16 bits)."""
    rng = np.random.default_rng(0)
    host = [rng.standard_normal((n, n)).astype(np.float32) for _ in range(2)]
    g = GEMM_PRECISION[precision]
    if g == "bfloat16":
        import ml_dtypes

        host = [h.astype(ml_dtypes.bfloat16).view(np.uint16) for h in host]
    elif g == "float16":
        host = [h.astype(np.float16) for h in host]
    out_dtype = np.float32 if g in (None, "tf32") else host[0].dtype
    return xp.asarray(host[0]), xp.asarray(host[1]), xp.zeros((n, n), dtype=out_dtype)


@arguments(precision=OneOf(*STEP_PRECISIONS), n=Whole(lo=16, hi=32768, hint="the side of the square products"),
           repeat=Whole(hint="timed products"))
def time_gemm_rate(precision: str, n: int = 4096, repeat: int = 10) -> dict:
    """The GPU's matrix-product rate for the products of a ``precision`` step, measured now: ``{"precision",
    "gemm", "n", "flops_per_s", "median_s", "tf32", "how"}``.  Needs a GPU (the stand-in GPU's figure is its own)."""
    from ..devices import cupy_module, require_gpu

    require_gpu()

    a, b, out = _operands(cupy_module(), n, precision)
    g = GEMM_PRECISION[precision]
    t = benchmark(lambda: matmul_into(a, b, out, g), device="gpu", warmup=2, repeat=repeat, per_event=4)
    return {"precision": precision, "gemm": g or "float32", "n": int(n), "flops_per_s": 2.0 * n ** 3 / t.median,
            "median_s": t.median, "tf32": cupy_tf32() if g is None else g == "tf32",
            "how": f"matmul_into {n}x{n}x{n}, " + ("cublasSgemm" if g is None else f"cublasGemmEx ({g})")}


@arguments(widths=Wholes(lo=1, hi=65536, hint="hidden widths"), batches=Wholes(lo=1, hi=65536, hint="batch sizes"),
           precisions=Given(validate_step_precisions),
           rungs=Given(validate_step_precisions, allowed=("fused", "graph")),
           depth=Whole(hi=64, hint="hidden layers"), gemm_n=Whole(lo=16, hi=32768, hint="the GEMM rate's side"),
           repeat=Whole(hint="timed rounds"), budget_s=Optional(Real(above=0, hint="seconds per job")),
           per_event=Whole(hint="steps between one pair of CUDA events"))
def precision_sweep(widths: Sequence[int] = (512, 4096), batches: Sequence[int] = (256, 4096),
                    precisions: Sequence[str] = STEP_PRECISIONS, rungs: Sequence[str] = ("fused", "graph"),
                    depth: int = 2, gemm_n: int = 4096, repeat: int = 10, budget_s: float | None = 1.0,
                    progress: Callable | None = None, per_event: int = 10) -> ResultSet:
    """Each precision's step time and MFU at each width × batch (784-w-…-w-10), on the GPU.

    Records: ``device``, ``width``, ``batch``, ``rung``, ``precision``, ``title``, the timing, ``flops`` (counted,
    :func:`~course.backprop.counting.mlp_flops`), ``launches``/``kernels`` (declared), ``gemm_rate`` (this run's,
    at the products' precision), ``mfu_measured``, ``peak_flops``/``mfu_peak``/``peak_source`` (the data sheet's,
    None where it has no figure) and ``tf32``.  Without a GPU: no records, a note saying why.
    """
    rs = ResultSet("backprop_step_precisions", params={"widths": [int(w) for w in widths],
                                                       "batches": [int(b) for b in batches], "depth": int(depth),
                                                       "precisions": list(precisions), "rungs": list(rungs),
                                                       "gemm_n": int(gemm_n)})
    if not gpu_available():
        rs.notes.append(f"no GPU here ({gpu_unavailable_reason()}): the precisions are timed on a GPU only (on a "
                        "CPU they are emulated, and slower than float32)")
        return rs
    name = gpu_info()[0]["name"]
    rates = {p: time_gemm_rate(p, gemm_n, repeat=max(3, repeat // 2)) for p in
             (progress(precisions, desc="GEMM rates") if progress else precisions)}
    jobs, info = {}, {}
    for w in widths:
        for b in batches:
            sizes = [784] + [int(w)] * depth + [10]
            model = MLP(sizes, device="gpu", seed=0)
            x, y = random_batch(model, int(b))
            flops = mlp_flops(sizes, int(b))
            for p in precisions:
                for rung in rungs:
                    fast = FastStep(model, rung, batch=int(b), lr=1e-3, precision=p)
                    fast.load(x, y)
                    key = f"{w} {b} {p} {rung}"
                    jobs[key] = fast.step
                    peak = data_sheet_peak(name, p)
                    counts = declared_counts(rung, len(sizes) - 1, p)
                    info[key] = {"device": "gpu", "width": int(w), "batch": int(b), "rung": rung, "precision": p,
                                 "title": fast.title, "capture_failed": fast.capture_failed, "flops": flops,
                                 "launches": counts["launches"], "kernels": counts.get("kernels", counts["launches"]),
                                 "reads": counts["reads"], "gemm_rate": rates[p]["flops_per_s"],
                                 "gemm_how": rates[p]["how"], "tf32": rates[p]["tf32"],
                                 "peak_flops": None if peak is None else peak[0],
                                 "peak_source": None if peak is None else peak[1]}
    t = interleaved_rounds(jobs, "gpu", warmup=1, repeat=max(int(repeat), 3), min_rounds=3, progress=progress,
                           budget_s=None if budget_s is None else budget_s * len(jobs), desc="step precisions",
                           per_event=per_event)
    for key, rec in info.items():
        rate = rec["flops"] / t[key].median
        rs.add_timing(t[key], **rec, gflops=rate / 1e9,
                      mfu_measured=model_flops_utilisation(rec["flops"], t[key].median, rec["gemm_rate"]),
                      mfu_peak=None if rec["peak_flops"] is None
                      else model_flops_utilisation(rec["flops"], t[key].median, rec["peak_flops"]))
    if any(v.stopped_early for v in t.values()):
        rs.notes.append(f"timing stopped after {min(v.repeat for v in t.values())} rounds by the time budget")
    return rs


#: The course's steps set against PyTorch's best at each reduced precision: (precision, rung).
COURSE_PRECISION_STEPS = (("tf32", "graph"), ("bfloat16", "fused"), ("bfloat16", "graph"), ("float16 scaled", "fused"),
                          ("float16 scaled", "graph"))


@arguments(widths=Wholes(lo=1, hi=65536, hint="hidden widths"), batch=Whole(hi=65536, hint="the batch"),
           repeat=Whole(hint="timed rounds"), budget_s=Optional(Real(above=0, hint="seconds per job")),
           compile_peers=OneOf(True, False), per_event=Whole(hint="steps between one pair of CUDA events"))
def precision_peer_sweep(widths: Sequence[int] = (512, 4096), batch: int = 256, repeat: int = 10,
                         budget_s: float | None = 1.0, progress: Callable | None = None, compile_peers: bool = True,
                         per_event: int = 10) -> ResultSet:
    """The course's TF32, bfloat16 and float16-scaled steps against PyTorch's best at the same precision, in one
    run, interleaved (:mod:`~course.backprop.precision_peers`).

    Records: ``width``, ``batch``, ``peer`` (``"course"`` or a key of ``PEER_PRECISION``), ``precision``, ``rung``
    (the course's; for a peer, the rung it is set against), ``title``, the timing, ``flops``, ``gflops``; a peer's
    also ``torch_sgd`` and ``course_over_peer`` (the course's time at the same precision and rung / the peer's).
    Without a GPU: no records; without PyTorch's CUDA: the course's steps alone, and a note saying the peers
    were skipped.
    """
    from .precision_peers import PEER_PRECISION, torch_precision_peers

    rs = ResultSet("backprop_step_precision_peers", params={"widths": [int(w) for w in widths], "batch": int(batch),
                                                            "sizes": "784-w-w-10"})
    if not gpu_available():
        rs.notes.append(f"no GPU here ({gpu_unavailable_reason()}): the peers are timed on a GPU only")
        return rs
    peers = torch_cuda_available()
    if not peers:
        line = "PyTorch precision peers skipped: PyTorch with CUDA is not here (the course's steps are timed alone)"
        rs.notes.append(line)
        print(line)
    jobs, info, timers = {}, {}, {}
    for w in (progress(widths, desc="precision peers") if progress else widths):
        sizes = [784, int(w), int(w), 10]
        model = MLP(sizes, device="gpu", seed=0)
        x, y = random_batch(model, int(batch))
        flops = mlp_flops(sizes, int(batch))
        for p, rung in COURSE_PRECISION_STEPS:
            fast = FastStep(model, rung, batch=int(batch), lr=1e-3, precision=p)
            fast.load(x, y)
            jobs[f"{w} course {p} {rung}"] = fast.step
            info[f"{w} course {p} {rung}"] = {"width": int(w), "peer": "course", "precision": p, "rung": rung,
                                              "title": fast.title, "capture_failed": fast.capture_failed}
        if peers:
            for name, step in torch_precision_peers(lambda m=model, a=x, b=y: torch_mlp_step(m, a, b)[0],
                                                    compile_peers).items():
                key = f"{w} {name}"
                jobs[key], timers[key] = step, benchmark_torch
                p, rung = PEER_PRECISION[name]
                info[key] = {"width": int(w), "peer": name, "precision": p, "rung": rung, "torch_sgd": step.sgd,
                             "title": f"PyTorch, {name}"}
        for k in [k for k in info if k.startswith(f"{w} ")]:
            info[k] |= {"device": "gpu", "batch": int(batch), "flops": flops}
    t = interleaved_rounds(jobs, "gpu", warmup=1, repeat=max(int(repeat), 3), min_rounds=3, timer=timers or None,
                           budget_s=None if budget_s is None else budget_s * len(jobs), progress=progress,
                           desc="precision peers", per_event=per_event)
    for key, rec in info.items():
        extra = {}
        if rec["peer"] != "course":
            ours = t[f"{rec['width']} course {rec['precision']} {rec['rung']}"].median
            extra["course_over_peer"] = ours / t[key].median
        rs.add_timing(t[key], **rec, **extra, gflops=rec["flops"] / t[key].median / 1e9)
    if any(v.stopped_early for v in t.values()):
        rs.notes.append(f"timing stopped after {min(v.repeat for v in t.values())} rounds by the time budget")
    return rs
