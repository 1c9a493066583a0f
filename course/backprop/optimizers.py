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

import numpy as np

from ..arguments import Given, OneOf, Real, Whole, arguments
from ..errors import BadInputError

__all__ = ["OPTIMIZERS", "STATE_ARRAYS", "optimizer_state", "update", "adam_step", "ADAM_BETAS", "ADAM_EPS",
           "validate_parameter_array", "require_update_arrays"]

#: The optimisers, and how many arrays of the weights' size each keeps.
OPTIMIZERS = ("sgd", "momentum", "adam")
STATE_ARRAYS = {"sgd": 0, "momentum": 1, "adam": 2}
#: PyTorch's defaults for Adam.
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


def validate_parameter_array(a: Any, name: str = "params") -> Any:
    """``a`` if it is an array of floats (NumPy or CuPy), which an update can change in place; a list, a
    scalar or an integer array is refused (``params * 0`` of a list is an empty list)."""
    if not (hasattr(a, "shape") and hasattr(a, "dtype")) or isinstance(a, np.generic):
        raise BadInputError(f"{name} must be an array of floats (numpy or cupy), got {type(a).__name__}: "
                            "wrap a list with np.asarray(..., dtype=np.float32)")
    if a.dtype.kind != "f":
        raise BadInputError(f"{name} must hold floats, got dtype {a.dtype}: an update of integers would round "
                            "every step away")
    if isinstance(a, np.ndarray) and not a.flags.writeable and name in ("params", "p", "param", "m", "v"):
        raise BadInputError(f"{name} is read-only, and an update changes it in place: pass a copy")
    return a


def require_update_arrays(p: Any, g: Any, state: dict | None = None, optimizer: str = "sgd") -> None:
    """Refuse what an in-place update cannot do: ``p`` and ``g`` float arrays of one shape, and the
    ``state`` that :func:`optimizer_state` made for ``optimizer``."""
    for name, a in (("p", p), ("g", g)):
        validate_parameter_array(a, name)
    if tuple(p.shape) != tuple(g.shape):
        raise BadInputError(f"p {tuple(p.shape)} and its gradient g {tuple(g.shape)} must have one shape")
    if state is None:
        return
    want = {"sgd": set(), "momentum": {"velocity"}, "adam": {"m", "v", "t"}}[optimizer]
    if not isinstance(state, dict) or not want <= set(state):
        raise BadInputError(f"state must be optimizer_state({optimizer!r}, p): a dict with {sorted(want)}, got "
                            f"{sorted(state) if isinstance(state, dict) else type(state).__name__}")


@arguments(optimizer=OneOf(*OPTIMIZERS), params=Given(validate_parameter_array))
def optimizer_state(optimizer: str, params: Any) -> dict:
    """A fresh state for ``optimizer`` over arrays shaped like ``params`` (same dtype and device):
    ``{}`` for SGD, ``{"velocity"}`` for momentum, ``{"m", "v", "t"}`` for Adam."""
    zeros = params * 0                         # same namespace, shape and dtype as the parameters
    if optimizer == "sgd":
        return {}
    if optimizer == "momentum":
        return {"velocity": zeros}
    return {"m": zeros, "v": zeros.copy(), "t": 0}


def _require_adam_arrays(param: Any, grad: Any, m: Any, v: Any) -> None:
    for name, a in (("param", param), ("grad", grad), ("m", m), ("v", v)):
        validate_parameter_array(a, name)
    shapes = {name: tuple(a.shape) for name, a in (("param", param), ("grad", grad), ("m", m), ("v", v))}
    if len(set(shapes.values())) != 1:
        raise BadInputError(f"param, grad, m and v must have one shape, got {shapes}")


@arguments(t=Whole(hint="Adam's steps count from 1"), lr=Real(above=0, hint="the learning rate"),
           beta1=Real(lo=0, hi=1 - 1e-12), beta2=Real(lo=0, hi=1 - 1e-12), eps=Real(above=0),
           then=_require_adam_arrays)
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


@arguments(optimizer=OneOf(*OPTIMIZERS), lr=Real(above=0, hint="the learning rate"),
           momentum=Real(lo=0, hi=1 - 1e-12, hint="the momentum factor, from 0 (none) to below 1"),
           then=require_update_arrays)
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
