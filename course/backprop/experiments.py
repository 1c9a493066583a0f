"""Lesson 01's experiments: the time of a training step against width, where it goes layer by
layer, and gradient checkpointing's memory against recomputation.

On a GPU machine ``python -m course report --record-reference`` records them as reference results,
which the lesson's notebook then overlays (labelled) where no GPU answers.
"""

from __future__ import annotations

from ..plots import sweep_figure
from ..report import by_size, experiment
from ..results import ResultSet
from .bench import checkpoint_sweep
from .layers import MLP
from .plots import checkpoint_figure, trace_figure
from .readers import trace_from_results, trace_to_results
from .timing import ladder_sweep, step_time_sweep, trace_step
from .trace import random_batch

#: The network of the lesson's benchmark: 784 inputs, two hidden layers of 512, 10 classes.
BENCH_SIZES = (784, 512, 512, 10)


@experiment("backprop_train_step", title="One training step (forward, backward, SGD) against hidden width",
            lesson="01")
def train_step_sweep(devices, quick, progress):
    """Time of one training step of a 784-w-w-10 MLP at batch 256, float32, for several widths w; beside it
    the fast step's ladder (records with a ``rung``: (a) and (b) on a CPU, every rung and PyTorch on a GPU)."""
    widths = by_size(quick, (64, 128, 256, 512, 1024, 2048, 4096), (64, 128, 256, 512), (16, 32))
    batch = by_size(quick, 256, 256, 16)
    rs = step_time_sweep(widths=widths, depth=2, batch=batch, devices=devices, repeat=3 if quick else 10,
                         budget_s=0.3 if quick else 2.0, progress=progress)
    rs.extend(ladder_sweep(widths=widths, batch=batch, devices=devices, repeat=3 if quick else 10,
                           budget_s=0.3 if quick else 2.0, progress=progress))
    return rs


@train_step_sweep.plot
def _(rs, references):
    return sweep_figure(rs, references, x="width", y="median_s", xlabel="hidden width w (784-w-w-10, batch 256)",
                        ylabel="time per training step (s)", where={"dtype": "float32"},
                        title="One SGD step: forward + backward + update")


@experiment("backprop_step_precisions", title="The fast step at each precision (float32, TF32, bfloat16, float16): "
            "time and MFU", lesson="01")
def step_precisions(devices, quick, progress):
    """Rungs (c) and (d) of the ladder at each precision over width x batch, each step's counted FLOPs over the same
    run's matrix-product rate at that precision and over the data sheet's peak (GPU only; no records without one)."""
    from .bench import precision_sweep

    if "gpu" not in devices:
        return precision_sweep(widths=(16,), batches=(16,))        # no GPU: no records, a note saying why
    return precision_sweep(widths=by_size(quick, (512, 4096), (512,), (16,)),
                           batches=by_size(quick, (256, 4096), (256,), (16,)),
                           gemm_n=by_size(quick, 4096, 2048, 64), repeat=3 if quick else 10,
                           budget_s=0.3 if quick else 1.0, progress=progress)


@experiment("backprop_step_precision_peers", title="The fast step's bfloat16, float16 and TF32 rungs against "
            "PyTorch's best at the same precision", lesson="01")
def step_precision_peers(devices, quick, progress):
    """The course's reduced-precision steps against PyTorch autocast (eager, CUDA graph, GradScaler) and
    torch.compile (default, reduce-overhead), in one run, at batch 256 (GPU only; no records without one)."""
    from .bench import precision_peer_sweep

    if "gpu" not in devices:
        return precision_peer_sweep(widths=(16,), batch=16)        # no GPU: no records, a note saying why
    return precision_peer_sweep(widths=by_size(quick, (512, 4096), (512,), (16,)), batch=by_size(quick, 256, 256, 16),
                                repeat=3 if quick else 10, budget_s=0.3 if quick else 1.0, progress=progress)


@experiment("backprop_layer_trace", title="Where a training step's time goes, layer by layer", lesson="01")
def layer_trace(devices, quick, progress):
    """Each layer's forward and backward of a 784-512-512-10 MLP at batch 256, timed alone."""
    rs = ResultSet("backprop_layer_trace", params={"sizes": list(BENCH_SIZES), "batch": 256})
    for d in (progress(devices, desc="layer trace") if progress else devices):
        model = MLP(BENCH_SIZES, device=d)
        x, y = random_batch(model, 256)
        trace_to_results(trace_step(model, x, y, repeat=7 if quick else 15, budget_s=2.0 if quick else 10.0),
                         rs)
    return rs


@layer_trace.plot
def _(rs, references):
    dev = "gpu" if rs.select(device="gpu") else "cpu"
    return trace_figure(trace_from_results(rs, dev))


@experiment("backprop_checkpointing", title="Gradient checkpointing: peak activation memory against "
            "recomputation as k moves", lesson="01")
def checkpointing(devices, quick, progress):
    """Keep every k-th block input of a deep MLP, recompute the rest; memory counted, time measured."""
    d = "gpu" if "gpu" in devices else "cpu"
    if quick:
        return checkpoint_sweep(depth=8, width=128, batch=128, device=d, repeat=15, budget_s=1.5)
    width, batch = (2048, 1024) if d == "gpu" else (512, 256)    # a GPU gets a network worth its size
    return checkpoint_sweep(depth=32, width=width, batch=batch, device=d, repeat=7, budget_s=20.0,
                            ks=[1, 2, 3, 4, 5, 6, 8, 11, 16, 22, 33])


@checkpointing.plot
def _(rs, references):
    return checkpoint_figure(rs)
