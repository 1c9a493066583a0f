"""Lesson 05's experiment: backward time of the tanh RNN, sequential backprop vs BPPSA, against T."""

from __future__ import annotations

from ..bppsa_plots import speedup_figure
from ..bppsa_timing import PAPER, QUICK_T, SWEEP_T, rnn_sweep
from ..report import experiment


@experiment("bppsa_rnn", title="BPPSA: backward pass of a tanh RNN, Blelloch scan vs sequential backprop",
            lesson="05")
def run(devices, quick, progress):
    """The paper's workload (input 1, hidden 20, batch 16, float32): backward time = full step − forward
    for sequential backprop, the scan, and PyTorch's nn.RNN when installed, at T = 10 … 1,000 (quick)
    or 10 … 30,000 (full).  The paper reports up to 108× for the scan on an RTX 2070 at T = 30,000."""
    return rnn_sweep(QUICK_T if quick else SWEEP_T, hidden_size=PAPER["hidden_size"], batch=PAPER["batch"],
                     devices=devices, repeat=3 if quick else 5, budget_s=20.0 if quick else 600.0,
                     progress=progress)


@run.plot
def plot(rs, references):
    return speedup_figure(rs, references)
