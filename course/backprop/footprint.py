"""Lesson 01: what training holds in memory, per parameter and in all.

A parameter costs more than its weight.  Training keeps, for every parameter:

=====================  ==========================  ==========================================
what                   float32 training            mixed precision (float16 or bfloat16)
=====================  ==========================  ==========================================
the weight             4 bytes                     2 bytes (the copy the step computes with)
its gradient           4 bytes                     2 bytes
a float32 master copy  --                          4 bytes (the update is made on it)
optimiser state        SGD 0, momentum 4, Adam 8   the same, in float32
=====================  ==========================  ==========================================

So Adam costs 16 bytes per parameter in float32 *and* in mixed precision (2 + 2 + 4 + 4 + 4): mixed
precision saves time and activation memory, not the weights' share (the ZeRO paper's "16Ψ").  Beside
the parameters, the step holds its activations: every layer's input and every ReLU's output, for the
backward pass, which grow with the batch and the depth (lesson 01's checkpointing trades them for a
second forward pass).

:func:`training_state` makes the arrays a step really holds and :func:`held_bytes` adds up their
``nbytes``; :func:`bytes_per_parameter` is the formula they are checked against.

>>> bytes_per_parameter("mixed float16", "adam")["total"]
16
>>> from course.backprop import MLP
>>> state = training_state(MLP([64, 32, 10]), "mixed float16", "adam")
>>> held_bytes(state)["total"] == 16 * MLP([64, 32, 10]).n_parameters()
True
"""

from __future__ import annotations

import numpy as np

from ..arguments import Given, OneOf, Whole, Wholes, arguments
from ..errors import BadInputError
from .layers import MLP, validate_model
from .mixed import compute_dtype
from .optimizers import OPTIMIZERS, STATE_ARRAYS, optimizer_state

__all__ = ["MEMORY_PRECISIONS", "bytes_per_parameter", "training_state", "held_bytes", "activation_bytes",
           "largest_model"]

#: Precisions whose memory is counted: float32 training, and mixed precision in float16 or bfloat16.
MEMORY_PRECISIONS = ("float32", "mixed float16", "mixed bfloat16")


@arguments(precision=OneOf(*MEMORY_PRECISIONS), optimizer=OneOf(*OPTIMIZERS))
def bytes_per_parameter(precision: str, optimizer: str) -> dict:
    """The formula: bytes per parameter of ``weights``, ``gradients``, ``master`` (float32 copy) and
    ``optimizer`` state, and their ``total``."""
    mixed = precision != "float32"
    w = 2 if mixed else 4
    parts = {"weights": w, "gradients": w, "master": 4 if mixed else 0, "optimizer": 4 * STATE_ARRAYS[optimizer]}
    return parts | {"total": sum(parts.values())}


def validate_state(state: object) -> dict:
    """``state`` if it maps each part's name to a list of arrays, as :func:`training_state` makes it."""
    if not isinstance(state, dict) or not all(isinstance(v, (list, tuple)) and all(hasattr(a, "nbytes") for a in v)
                                              for v in state.values()):
        raise BadInputError("state must be what training_state(model, precision, optimizer) returns: a dict of "
                            f"lists of arrays; got {type(state).__name__}")
    return state


@arguments(model=Given(validate_model), precision=OneOf(*MEMORY_PRECISIONS), optimizer=OneOf(*OPTIMIZERS))
def training_state(model: MLP, precision: str, optimizer: str) -> dict[str, list]:
    """The arrays a training step of ``model`` holds for its parameters, made as the step makes them:
    ``weights`` and ``gradients`` in the compute type, the float32 ``master`` copies (mixed precision),
    and the optimiser's state arrays (float32)."""
    ct = compute_dtype(precision.split()[-1])
    mixed = precision != "float32"
    master = [np.array(p, dtype=np.float32) for p in model.parameters()]
    state = {"weights": [p.astype(ct) for p in master], "gradients": [np.zeros(p.shape, ct) for p in master],
             "master": master if mixed else [], "optimizer": []}
    for p in master:
        state["optimizer"] += [a for a in optimizer_state(optimizer, p).values() if isinstance(a, np.ndarray)]
    return state


@arguments(state=Given(validate_state))
def held_bytes(state: dict[str, list]) -> dict:
    """The bytes the arrays of :func:`training_state` hold, by part and in ``total`` (their ``nbytes``)."""
    parts = {k: int(sum(a.nbytes for a in arrays)) for k, arrays in state.items()}
    return parts | {"total": sum(parts.values())}


@arguments(sizes=Wholes(min_len=2, hint="the layer widths, e.g. [64, 128, 10]"),
           batch=Whole(hint="the examples in one step"),
           itemsize=Whole(hi=16, hint="bytes per number: 4 for float32, 2 for float16"))
def activation_bytes(sizes: list[int], batch: int, itemsize: int = 4) -> int:
    """Bytes of the activations a ReLU MLP keeps for its backward pass at the end of its forward pass:
    the input (``batch × n_in``) and every hidden ReLU's output (``batch × width``; it is also the next
    Linear layer's input, one array held once), ``itemsize`` bytes each (4 for float32, 2 for float16).

    >>> activation_bytes([64, 32, 10], batch=8)          # 8 x (64 + 32) floats of 4 bytes
    3072
    """
    return int(itemsize * batch * sum(sizes[:-1]))


@arguments(memory_bytes=Whole(hint="the memory, in bytes"), precision=OneOf(*MEMORY_PRECISIONS),
           optimizer=OneOf(*OPTIMIZERS))
def largest_model(memory_bytes: int, precision: str, optimizer: str) -> int:
    """The most parameters whose weights, gradients, master copies and optimiser state fit in
    ``memory_bytes`` (activations not counted: they depend on the batch).

    >>> largest_model(80 * 10**9, "mixed float16", "adam") == 5 * 10**9      # an 80 GB GPU: 5 billion
    True
    """
    return int(memory_bytes // bytes_per_parameter(precision, optimizer)["total"])
