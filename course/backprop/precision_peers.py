"""Lesson 01, PyTorch's best step at each reduced precision: the peers of the fast step's precision rungs.

What a practitioner would write for a bfloat16 or float16 step of the same MLP (same weights, PyTorch's best SGD,
:func:`~course.backprop.bench.torch_sgd`), each named for its peer and precision:

* ``"torch autocast bf16"``: eager, ``torch.autocast("cuda", torch.bfloat16)`` around the forward and the loss;
* ``"torch autocast bf16 graph"``: the same step captured once with ``torch.cuda.graph`` and replayed (autocast's
  weight cache off, as a capture needs);
* ``"torch autocast fp16 GradScaler"``: float16 autocast with dynamic loss scaling (``torch.amp.GradScaler``),
  eager: its ``step`` reads the overflow flag back to the host, so it cannot be captured;
* ``"torch.compile bf16"`` and ``"torch.compile bf16 reduce-overhead"``: the network compiled (Inductor; the
  second also replays CUDA graphs), autocast bfloat16, the fused SGD eager.

:data:`PEER_PRECISION` says each peer's precision and the course rung it is set against.  Needs PyTorch with CUDA.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..arguments import Given, OneOf, arguments
from ..errors import BadInputError

__all__ = ["PEER_PRECISION", "TorchAmpStep", "TorchAmpGraphStep", "torch_precision_peers", "validate_step_factory",
           "validate_torch_step"]

#: peer -> (its precision, the course's rung it is set against)
PEER_PRECISION = {"torch autocast bf16": ("bfloat16", "fused"), "torch autocast bf16 graph": ("bfloat16", "graph"),
                  "torch autocast fp16 GradScaler": ("float16 scaled", "fused"),
                  "torch.compile bf16": ("bfloat16", "fused"),
                  "torch.compile bf16 reduce-overhead": ("bfloat16", "graph")}


def validate_torch_step(step: Any) -> Any:
    """``step`` if it holds what a PyTorch step reads and writes (``net``, ``optimizer``, ``inputs``, ``labels``,
    ``sgd``: a :class:`~course.backprop.bench.TorchStep`); else a clear error."""
    missing = [a for a in ("net", "optimizer", "inputs", "labels", "sgd") if not hasattr(step, a)]
    if missing:
        raise BadInputError(f"step must be a TorchStep (course.backprop.bench.torch_mlp_step(model, x, y)[0]); "
                            f"{type(step).__name__} lacks {missing}")
    return step


class TorchAmpStep:
    """One autocast SGD step of a PyTorch copy of a course MLP (``forward``: the net, or its compiled form)."""

    def __init__(self, step: Any, dtype: Any, forward: Any = None, scaler: Any = None, cache: bool = True):
        validate_torch_step(step)
        self.step, self.dtype, self.scaler, self.cache = step, dtype, scaler, cache
        self.forward = forward if forward is not None else step.net
        self.net, self.optimizer, self.inputs, self.labels, self.sgd = (step.net, step.optimizer, step.inputs,
                                                                        step.labels, step.sgd)
        self.loss = None

    def __call__(self) -> None:
        import torch

        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=self.dtype, cache_enabled=self.cache):
            loss = torch.nn.functional.cross_entropy(self.forward(self.inputs), self.labels)
        if self.scaler is None:
            loss.backward()
            self.optimizer.step()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        self.loss = loss


class TorchAmpGraphStep:
    """An autocast step captured with ``torch.cuda.graph``; it owns the step (and so every tensor the graph reads
    and writes) while the graph may be replayed."""

    def __init__(self, graph: Any, amp: TorchAmpStep):
        validate_torch_step(amp)
        self.graph, self.amp, self.sgd = graph, amp, amp.sgd

    def __call__(self) -> None:
        self.graph.replay()


def _captured(amp: TorchAmpStep) -> TorchAmpGraphStep:
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            amp()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    amp.optimizer.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        amp()
    return TorchAmpGraphStep(graph, amp)


def validate_step_factory(new_step: Any) -> Callable[[], Any]:
    """``new_step`` if it can be called to make a fresh PyTorch step; else a clear error."""
    if not callable(new_step):
        raise BadInputError("new_step must make a TorchStep when called: e.g. lambda: torch_mlp_step(model, x, y)[0]")
    return new_step


@arguments(new_step=Given(validate_step_factory), compile_peers=OneOf(True, False))
def torch_precision_peers(new_step: Callable[[], Any], compile_peers: bool = True) -> dict:
    """Each peer of :data:`PEER_PRECISION` (``compile_peers=False``: without the ``torch.compile`` ones), each on
    its own fresh :class:`~course.backprop.bench.TorchStep` from ``new_step()`` (a copy of the course's model and
    batch), warmed up (compiled, captured) before any timing.  Needs PyTorch with CUDA."""
    import torch

    bf16, fp16 = torch.bfloat16, torch.float16
    out: dict[str, Any] = {}
    out["torch autocast bf16"] = TorchAmpStep(new_step(), bf16)
    out["torch autocast bf16 graph"] = _captured(TorchAmpStep(new_step(), bf16, cache=False))
    out["torch autocast fp16 GradScaler"] = TorchAmpStep(new_step(), fp16,
                                                         scaler=torch.amp.GradScaler("cuda"))
    if compile_peers:
        for name, mode in (("torch.compile bf16", "default"),
                           ("torch.compile bf16 reduce-overhead", "reduce-overhead")):
            step = new_step()
            out[name] = TorchAmpStep(step, bf16, forward=torch.compile(step.net, mode=mode))
            for _ in range(3):                   # compiled (and, reduce-overhead, its graphs recorded) now
                out[name]()
    torch.cuda.synchronize()
    return out
