"""Lesson 01's optimisers, each an in-place update of flat arrays, and the state each keeps.

An optimiser's state is memory a training step holds beside the weights and their gradients:
plain SGD keeps nothing, momentum one array the size of the weights, Adam two (its first and second
moments).  Each update works on any arrays of one shape, a whole model's parameters or one rank's
shard of them (lesson 06's ZeRO), in NumPy or CuPy.

Adam is PyTorch's ``torch.optim.Adam`` with its defaults (betas 0.9 and 0.999, eps 1e-8, no weight
decay): ``m = β1 m + (1-β1) g``, ``v = β2 v + (1-β2) g²``, ``p -= lr · (m / (1-β1^t)) / (sqrt(v / (1-β2^t)) + eps)``.

>>> import numpy as np
>>> p, g = np.ones(3), np.array([1.0, -2.0, 0.5])
>>> state = optimizer_state("adam", p)
>>> adam_update(p, g, state, lr=0.1)
>>> np.round(p, 6).tolist()                        # the first Adam step moves each weight by about lr
[0.9, 1.1, 0.9]
"""

from __future__ import annotations

from typing import Any

from ..arguments import OneOf, arguments

__all__ = ["OPTIMIZERS", "STATE_ARRAYS", "UPDATES", "optimizer_state", "sgd_update", "momentum_update",
           "adam_update", "ADAM_BETAS", "ADAM_EPS"]

#: The optimisers, and how many arrays of the weights' size each keeps.
OPTIMIZERS = ("sgd", "momentum", "adam")
STATE_ARRAYS = {"sgd": 0, "momentum": 1, "adam": 2}
#: PyTorch's defaults for Adam.
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


@arguments(optimizer=OneOf(*OPTIMIZERS))
def optimizer_state(optimizer: str, params: Any) -> dict:
    """A fresh state for ``optimizer`` over arrays shaped like ``params`` (same dtype and device):
    ``{}`` for SGD, ``{"velocity"}`` for momentum, ``{"m", "v", "t"}`` for Adam."""
    zeros = params * 0                         # same namespace, shape and dtype as the parameters
    if optimizer == "sgd":
        return {}
    if optimizer == "momentum":
        return {"velocity": zeros}
    return {"m": zeros, "v": zeros.copy(), "t": 0}


def sgd_update(p: Any, g: Any, state: dict, lr: float) -> None:
    """``p -= lr · g``, in place."""
    p -= lr * g


def momentum_update(p: Any, g: Any, state: dict, lr: float, momentum: float = 0.9) -> None:
    """Heavy-ball momentum as PyTorch's SGD(momentum=μ) does it: ``v = μ v + g``, ``p -= lr · v``."""
    v = state["velocity"]
    v *= momentum
    v += g
    p -= lr * v


def adam_update(p: Any, g: Any, state: dict, lr: float, betas: tuple[float, float] = ADAM_BETAS,
                eps: float = ADAM_EPS) -> None:
    """One Adam step of ``p`` by its gradient ``g``, in place (PyTorch's arithmetic, in this order)."""
    b1, b2 = betas
    state["t"] += 1
    t, m, v = state["t"], state["m"], state["v"]
    m *= b1
    m += (1 - b1) * g
    v *= b2
    v += (1 - b2) * g * g
    step = lr / (1 - b1 ** t)
    denom = (v ** 0.5) / (1 - b2 ** t) ** 0.5 + eps
    p -= step * m / denom


#: name -> update function.
UPDATES = {"sgd": sgd_update, "momentum": momentum_update, "adam": adam_update}
