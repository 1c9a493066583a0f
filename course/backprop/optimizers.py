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
>>> update("adam", p, g, state, lr=0.1)
>>> np.round(p, 6).tolist()                        # the first Adam step moves each weight by about lr
[0.9, 1.1, 0.9]
"""

from __future__ import annotations

import math
from typing import Any

from ..arguments import OneOf, arguments

__all__ = ["OPTIMIZERS", "STATE_ARRAYS", "optimizer_state", "update", "adam_step", "ADAM_BETAS", "ADAM_EPS"]

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


def adam_step(param: Any, grad: Any, m: Any, v: Any, t: int, lr: float, beta1: float = ADAM_BETAS[0],
              beta2: float = ADAM_BETAS[1], eps: float = ADAM_EPS) -> None:
    """One Adam step, in place on ``param``, ``m`` and ``v`` (``t`` counts steps from 1): the operations of
    ``torch.optim.Adam`` with its defaults, in its order.  Elementwise, so a shard of the parameters updates
    alone (lesson 06's ZeRO checks its arrays at the door and calls this).

    >>> import numpy as np
    >>> w, m, v = np.ones(2), np.zeros(2), np.zeros(2)
    >>> adam_step(w, np.array([0.5, -2.0]), m, v, t=1, lr=0.1); w.round(6).tolist()
    [0.9, 1.1]
    """
    m += (1 - beta1) * (grad - m)                        # torch: exp_avg.lerp_(grad, 1 - beta1)
    v *= beta2
    v += (1 - beta2) * grad * grad
    step_size = lr / (1 - beta1 ** t)                    # the bias corrections of the first steps
    denom = v ** 0.5 / math.sqrt(1 - beta2 ** t) + eps
    param -= step_size * (m / denom)


def update(optimizer: str, p: Any, g: Any, state: dict, lr: float, momentum: float = 0.9) -> None:
    """One step of ``optimizer`` on ``p`` by its gradient ``g``, in place, with the ``state`` of
    :func:`optimizer_state`: SGD ``p -= lr · g``; momentum as PyTorch's ``SGD(momentum=μ)`` (``v = μ v + g``,
    ``p -= lr · v``); Adam by :func:`adam_step`."""
    if optimizer == "sgd":
        p -= lr * g
    elif optimizer == "momentum":
        vel = state["velocity"]
        vel *= momentum
        vel += g
        p -= lr * vel
    else:
        state["t"] += 1
        adam_step(p, g, state["m"], state["v"], state["t"], lr)
