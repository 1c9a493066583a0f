"""Lesson 05's experiments: backward time of the tanh RNN, sequential backprop vs BPPSA."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..report import by_size, experiment
from .plots import speedup_figure
from .timing import PAPER, QUICK_T, SWEEP_T, rnn_sweep

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ..results import ResultSet


@experiment("bppsa_rnn", title="BPPSA: backward pass of a tanh RNN against T, Blelloch scan vs sequential",
            lesson="05")
def run(devices, quick, progress):
    """The paper's workload (input 1, hidden 20, batch 16, float32): each backward pass timed alone
    (from one saved forward) for sequential backprop (the course's own loop), the teaching scan, the
    scan without copies (course.bppsa.fast), and PyTorch's nn.RNN when installed (cuDNN on a GPU), at
    T = 10 … 1,000 (quick) or 10 … 30,000 (full)."""
    return rnn_sweep(by_size(quick, SWEEP_T, QUICK_T, (10, 40)), hidden_size=PAPER["hidden_size"], batch=PAPER["batch"],
                     devices=devices, methods=("sequential", "scan", "fast"), repeat=3 if quick else 5,
                     budget_s=20.0 if quick else 600.0, progress=progress)


@run.plot
def plot(rs: ResultSet, references: Sequence[ResultSet]) -> Figure:
    return speedup_figure(rs, references)


@experiment("bppsa_rnn_batch", title="BPPSA: backward pass of a tanh RNN against batch size", lesson="05")
def run_batch(devices, quick, progress):
    """The same RNN (hidden 20) at a fixed length, T = 300 (quick) or 3,000 (full), for batch sizes
    1 … 256: a larger batch gives the sequential loop more parallel work per step, and the scan more
    work per level."""
    T = by_size(quick, 3000, 300, 40)
    batches = by_size(quick, (1, 4, 16, 64, 256), (1, 16, 64), (1, 4))
    return rnn_sweep((T,), hidden_size=PAPER["hidden_size"], batch=batches, devices=devices,
                     methods=("sequential", "scan", "fast"),
                     repeat=3 if quick else 5, budget_s=10.0 if quick else 300.0, progress=progress,
                     experiment="bppsa_rnn_batch")


@run_batch.plot
def plot_batch(rs: ResultSet, references: Sequence[ResultSet]) -> Figure:
    return speedup_figure(rs, references, x="batch")
