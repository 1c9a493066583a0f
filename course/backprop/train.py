"""Training an :class:`~course.backprop.MLP` on real data, with a history to plot.

:func:`train` runs minibatch SGD for some epochs and records, after each epoch,
the training loss, the test loss and both accuracies, and the seconds spent.
A ``callback(history)`` runs after each epoch (the notebook redraws its live
curve there), and a time budget stops it early, saying so.

>>> from course.backprop import MLP
>>> from course.backprop.data import load_digits
>>> d = load_digits()
>>> h = train(MLP([64, 64, 10]), d, epochs=3)
>>> h.test_acc[-1] > 0.85
True
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..arguments import Given, arguments
from ..devices import synchronize, to_device
from .data import Dataset, batches
from .layers import MLP, softmax_cross_entropy, validate_model
from .validate import validate_inputs, validate_training

__all__ = ["History", "train", "accuracy", "evaluate", "MAX_EPOCHS"]

#: The most epochs :func:`train` runs (a History keeps a record per epoch; digits needs about 20).
MAX_EPOCHS = 10_000


@dataclass
class History:
    """Per-epoch measurements of one training run."""

    epoch: list = field(default_factory=list)
    train_loss: list = field(default_factory=list)
    test_loss: list = field(default_factory=list)
    train_acc: list = field(default_factory=list)
    test_acc: list = field(default_factory=list)
    seconds: list = field(default_factory=list)       # wall time of the epoch's steps
    steps: int = 0
    stopped_early: bool = False
    description: str = ""
    device: str = "cpu"                                # where the model trained

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("epoch", "train_loss", "test_loss", "train_acc",
                                              "test_acc", "seconds", "steps", "stopped_early")}


def evaluate(model: MLP, x: Any, y: Any) -> tuple[float, float]:
    """``(mean cross-entropy, accuracy)`` of ``model`` on ``(x, y)``, one forward pass."""
    x, y = validate_inputs(model, x, y)
    logits = model.forward(x)
    loss, _ = softmax_cross_entropy(logits, y)
    acc = (logits.argmax(axis=1) == y).mean()
    return float(loss), float(acc)


@arguments(model=Given(validate_model))
def accuracy(model: MLP, x: Any, y: Any) -> float:
    """Share of rows of ``x`` whose largest logit is the true label."""
    return evaluate(model, x, y)[1]


def train(model: MLP, data: Dataset, epochs: int = 10, batch_size: int = 32, lr: float = 0.05,
          seed: int = 0, callback: Callable[[History], Any] | None = None,
          budget_s: float | None = None) -> History:
    """Minibatch SGD on ``data`` for ``epochs`` epochs; returns the :class:`History`.

    The batches are shuffled with ``seed``, so a run is a function of the model's
    seed and this one.  ``budget_s`` stops after the first epoch that ends past it.
    """
    epochs = validate_training(model, data, epochs, MAX_EPOCHS)
    rng = np.random.default_rng(seed)
    shown_lr = f"{lr:.3g}" if isinstance(lr, int | float) else repr(lr)   # the slider's 1.778..., read as 1.78
    h = History(description=f"{model!r}, batch {batch_size}, lr {shown_lr}, SGD", device=model.device)
    began = time.perf_counter()
    n = data.x_train.shape[0]
    for ep in range(1, epochs + 1):
        t0 = time.perf_counter()
        losses = []
        for idx in batches(n, batch_size, rng):
            idx = to_device(idx, model.device)   # the shuffled indices go to the device once
            losses.append(model.train_step(data.x_train[idx], data.y_train[idx], lr))
            h.steps += 1
        synchronize(model.device)
        h.seconds.append(time.perf_counter() - t0)
        _, ta = evaluate(model, data.x_train, data.y_train)
        vl, va = evaluate(model, data.x_test, data.y_test)
        h.epoch.append(ep)
        h.train_loss.append(float(np.mean(losses)))
        h.train_acc.append(ta)
        h.test_loss.append(vl)
        h.test_acc.append(va)
        if callback is not None:
            callback(h)
        if budget_s is not None and time.perf_counter() - began > budget_s and ep < epochs:
            h.stopped_early = True
            break
    return h
