"""Lesson 07's experiments for ``python -m course report``: loop against scan for diagonal and dense
recurrences as T grows (with the hand-written kernels on a GPU), and the selective layer's training."""

from __future__ import annotations

import numpy as np

from ..plots import add_footer, new_figure, place_legend
from ..report import by_size, experiment
from ..results import ResultSet
from ..timing import benchmark
from .plots import timing_figure
from .selective import init_params, loss_and_grads
from .task import BASELINE_MSE, adding_problem, train_adding
from .timing import recurrence_sweep


@experiment("recurrence_sweep", title="Linear recurrences: loop vs scan, diagonal vs dense, against T",
            lesson="07")
def sweep(devices, quick, progress):
    """float32, n = 16 channels (and 256 in the full run): the diagonal recurrence by a Python loop,
    by the Blelloch scan with the affine operator, by a PyTorch loop and, on a GPU, by the numba
    kernels (one thread per channel; chunks of 64 steps); the dense one as in lesson 05 (n×n
    Jacobians, sequential backward vs BPPSA).  Each record carries the counted work ratio."""
    Ts = [2**k for k in range(6, by_size(quick, 20, 14, 8) + 1, 2)]
    ns = by_size(quick, (16, 256), (16,), (16,))
    return recurrence_sweep(Ts, ns, devices=devices, repeat=3 if quick else 7,
                            budget_s=0.2 if quick else 2.0, total_budget_s=120 if quick else 1800,
                            progress=progress)


@sweep.plot
def _(rs, references):
    return timing_figure(rs, references, n=16)


@experiment("selective_training", title="A selective state-space layer trained on the adding problem",
            lesson="07")
def training(devices, quick, progress):
    """The selective layer (n = 16, float64) trained with Adam on the adding problem, T = 32, batch
    64, for 300 steps (quick: 150); forward and backward by the scan.  Also the time of one training
    step, by scan and by loop, at T = 32 and T = 1024 on each device."""
    steps = 150 if quick else 300
    rs = ResultSet("selective_training", params={"T": 32, "n": 16, "steps": steps, "batch": 64})
    for dev in devices:
        run = train_adding(T=32, n=16, steps=steps, batch=64, device=dev, progress=progress)
        rs.add(device=dev, what="training", losses=[float(v) for v in run.losses], test_loss=run.test_loss,
               baseline=BASELINE_MSE)
        for T in (32, 1024):
            x, y = adding_problem(T, 64, device=dev)
            p = init_params(2, 16, 1, device=dev)
            for method in ("scan", "loop"):
                t = benchmark(loss_and_grads, p, x, y, method, device=dev, repeat=3 if quick else 10,
                              budget_s=2.0 if quick else 20.0, name=f"training step {method} T={T}")
                rs.add_timing(t, what="step time", method=method, T=T)
    return rs


@training.plot
def _(rs, references):
    fig, (left, right) = new_figure(2, width=10, height=3.4)
    for r in rs.select(what="training"):
        left.plot(np.arange(1, len(r["losses"]) + 1), r["losses"], lw=1.1,
                  label=f"{r['device'].upper()}: test loss {r['test_loss']:.2g}")
    left.axhline(BASELINE_MSE, color="0.25", ls="--", lw=1, label="always answer 1.0")
    left.set_yscale("log")
    left.set_xlabel("training step")
    left.set_ylabel("mean squared error")
    place_legend(left)
    recs = rs.select(what="step time")
    labels = [f"{r['device'].upper()} {r['method']} T={r['T']}" for r in recs]
    right.barh(range(len(recs)), [r["median_s"] * 1e3 for r in recs], color="0.5")
    right.set_yticks(range(len(recs)), labels, fontsize=9)
    right.invert_yaxis()
    right.set_xlabel("one training step (forward + backward), ms, median")
    add_footer(fig, rs)
    return fig
