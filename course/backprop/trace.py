"""Where the time of one training step goes, layer by layer.

:func:`describe_step` runs one training step of an :class:`~course.backprop.MLP` and describes each
layer: the shapes it works on, the operations it runs and their FLOPs, and its forward and backward as
calls that :func:`course.backprop.timing.trace_step` times on their own (warm-up, repeats, median;
CUDA events on a GPU).  Two facts show up in every trace:

* the backward pass costs about **twice** the forward pass: a Linear layer's
  forward is one matrix product, its backward two (``dW = xᵀ @ dout`` and
  ``dx = dout @ Wᵀ``) of the same size;
* the **matrix products dominate**: the element-wise activations and the loss
  are a small share of the time, and every output element of a product is
  independent of the others, which is the parallelism a GPU feeds on.

>>> import numpy as np
>>> from course.backprop import MLP
>>> m = MLP([64, 32, 10])
>>> t, calls = describe_step(m, np.ones((16, 64), np.float32), np.zeros(16, dtype=np.int64))
>>> [r.name for r in t.layers]
['Linear 1 (64→32)', 'ReLU 1', 'Linear 2 (32→10)', 'softmax cross-entropy']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..arguments import Given, Seed, Whole, arguments
from ..devices import to_device
from .layers import MLP, Linear, softmax_cross_entropy, softmax_cross_entropy_backward
from .validate import require_random_batch_fits, validate_inputs, validate_kind

__all__ = ["LayerTrace", "StepTrace", "describe_step", "random_batch", "trace_html", "validate_trace"]


@dataclass
class LayerTrace:
    """One layer of a traced step: what it computes, how much work, how long it took."""

    name: str
    kind: str                      # "linear", "activation" or "loss"
    in_shape: tuple
    out_shape: tuple
    forward_ops: list
    backward_ops: list
    forward_flops: float
    backward_flops: float
    matmul_flops: float            # the part of forward + backward done by matrix products
    forward_s: float = 0.0
    backward_s: float = 0.0


@dataclass
class StepTrace:
    """A traced training step: the layers in forward order, and the whole step timed as one."""

    layers: list = field(default_factory=list)
    step_s: float = 0.0
    device: str = "cpu"
    model: str = ""
    batch: int = 0
    noisy: bool = False            # some of the timings disagreed across rounds, or the machine was busy

    @property
    def forward_s(self) -> float:
        return sum(r.forward_s for r in self.layers)

    @property
    def backward_s(self) -> float:
        return sum(r.backward_s for r in self.layers)

    @property
    def flop_ratio(self) -> float:
        """Backward FLOPs over forward FLOPs (counted): 2 for a hidden Linear layer, 1 for the first."""
        return sum(r.backward_flops for r in self.layers) / max(sum(r.forward_flops for r in self.layers), 1.0)

    @property
    def matmul_share(self) -> float:
        """Share of the layer-by-layer time spent in Linear layers (their matrix products)."""
        lin = sum(r.forward_s + r.backward_s for r in self.layers if r.kind == "linear")
        return lin / max(self.forward_s + self.backward_s, 1e-30)


def _mm(a: Sequence[int], b: Sequence[int]) -> str:
    return f"({a[0]}×{a[1]}) @ ({b[0]}×{b[1]})"


def validate_trace(tr: Any, name: str = "tr") -> StepTrace:
    """``tr`` if it is a :class:`StepTrace` (what ``course.backprop.timing.trace_step`` returns)."""
    return validate_kind(tr, StepTrace, name, "a StepTrace (what course.backprop.timing.trace_step returns)")


def describe_step(model: MLP, x: Any, y: Any) -> tuple[StepTrace, list[tuple[LayerTrace, Callable, Callable]]]:
    """One real step of ``model`` on ``(x, y)`` (weights not updated), described layer by layer: a
    :class:`StepTrace` of what each layer computes and its FLOPs, and per layer (the loss last) a record
    with its forward and its backward as calls on copies of the values it saw in the step."""
    x, y = validate_inputs(model, x, y)
    b = int(x.shape[0])
    inputs, caches, upstream, logits, lcache = _run_step(model, x, y)
    tr = StepTrace(device=model.device, model=repr(model), batch=b)
    calls = []
    for i, layer in enumerate(model.layers):
        n = sum(isinstance(o, Linear) == isinstance(layer, Linear) for o in model.layers[:i + 1])  # "Linear 2"
        rec = (_linear_trace(layer, n, b, first=i == 0) if isinstance(layer, Linear)
               else _activation_trace(layer, n, inputs[i]))
        calls.append((rec, *_layer_calls(layer, inputs[i], caches[i], upstream[i], first=i == 0)))
    calls.append((_loss_trace(b, model.sizes[-1]), partial(softmax_cross_entropy, logits, y),
                  partial(softmax_cross_entropy_backward, lcache)))
    tr.layers = [rec for rec, _, _ in calls]
    return tr, calls


def _run_step(model: MLP, x, y) -> tuple[list, list, list, Any, Any]:
    """One real step: each layer's input (a copy) and cache, the gradient arriving at each layer's
    output, the logits and the loss's cache."""
    inputs, caches, h = [], [], x
    for layer in model.layers:
        inputs.append(h.copy())
        h, cache = layer.forward(h)
        caches.append(cache)
    loss, lcache = softmax_cross_entropy(h, y)
    g = softmax_cross_entropy_backward(lcache)
    upstream: list = [None] * len(model.layers)
    for i in range(len(model.layers) - 1, -1, -1):
        upstream[i] = g.copy()
        layer = model.layers[i]
        g = layer.backward(g, caches[i], need_dx=i > 0) if isinstance(layer, Linear) else layer.backward(g, caches[i])
    return inputs, caches, upstream, h, lcache


def _linear_trace(layer: Linear, n: int, b: int, first: bool) -> LayerTrace:
    """What Linear layer number ``n`` computes on a batch of ``b``, and its FLOPs (no dx for the first)."""
    ni, no = layer.n_in, layer.n_out
    mm = 2.0 * b * ni * no                           # one (b×ni) @ (ni×no) product
    return LayerTrace(
        name=f"Linear {n} ({ni}→{no})", kind="linear", in_shape=(b, ni), out_shape=(b, no),
        forward_ops=[f"out = x @ W: {_mm((b, ni), (ni, no))}", f"out += b: ({no},) over {b} rows"],
        backward_ops=[f"dW = xᵀ @ dout: {_mm((ni, b), (b, no))}", f"db = dout summed over {b} rows",
                      "dx: not needed for the first layer (x is data)" if first else
                      f"dx = dout @ Wᵀ: {_mm((b, no), (no, ni))}"],
        forward_flops=mm + b * no, backward_flops=mm * (1 if first else 2) + b * no,
        matmul_flops=mm * (2 if first else 3))


def _activation_trace(layer: Any, n: int, xin) -> LayerTrace:
    """What activation number ``n`` computes element-wise on ``xin``, and its FLOPs."""
    nm = type(layer).__name__
    return LayerTrace(
        name=f"{nm} {n}", kind="activation", in_shape=tuple(xin.shape), out_shape=tuple(xin.shape),
        forward_ops=[f"{nm.lower()}(x) element-wise on {xin.shape[0]}×{xin.shape[1]}"],
        backward_ops=[f"dx = dout · {nm.lower()}'(x), element-wise"],
        forward_flops=float(xin.size), backward_flops=float(2 * xin.size), matmul_flops=0.0)


def _loss_trace(b: int, c: int) -> LayerTrace:
    """What the softmax cross-entropy computes on ``b`` rows of ``c`` logits, and its FLOPs."""
    return LayerTrace(name="softmax cross-entropy", kind="loss", in_shape=(b, c), out_shape=(),
                      forward_ops=[f"softmax of ({b}×{c}) logits, mean -log p[label]"],
                      backward_ops=["dlogits = (softmax - one_hot) / batch"],
                      forward_flops=4.0 * b * c, backward_flops=1.0 * b * c, matmul_flops=0.0)


def _layer_calls(layer: Any, xin, cache, dout, first: bool) -> tuple[Callable, Callable]:
    """The layer's forward and backward on the step's values (the first layer computes no dx)."""
    forward = partial(layer.forward, xin)
    if isinstance(layer, Linear):
        return forward, partial(layer.backward, dout, cache, need_dx=not first)
    return forward, partial(layer.backward, dout, cache)


@arguments(batch=Whole(hint="the examples in one step"), seed=Seed(), then=require_random_batch_fits)
def random_batch(model: MLP, batch: int, seed: int = 0) -> tuple[Any, Any]:
    """A random standard-normal batch and random labels for ``model``, on its device."""
    x = seed.standard_normal((batch, model.sizes[0])).astype(model.dtype)
    y = seed.integers(0, model.sizes[-1], size=batch)
    return to_device(x, model.device), to_device(y, model.device)


@arguments(tr=Given(validate_trace))
def trace_html(tr: StepTrace) -> str:
    """The trace as an HTML table: shapes, the operations of each pass, FLOPs, times."""
    import html

    rows = []
    for r in tr.layers:
        fops = "<br>".join(html.escape(o) for o in r.forward_ops)
        bops = "<br>".join(html.escape(o) for o in r.backward_ops)
        rows.append(f"<tr><td>{html.escape(r.name)}</td><td>{r.in_shape}→{r.out_shape}</td>"
                    f"<td>{fops}</td><td>{r.forward_flops / 1e6:,.2f}</td><td>{r.forward_s * 1e3:.3f}</td>"
                    f"<td>{bops}</td><td>{r.backward_flops / 1e6:,.2f}</td><td>{r.backward_s * 1e3:.3f}</td></tr>")
    head = ("<tr><th>layer</th><th>shape</th><th>forward</th><th>MFLOP</th><th>ms</th>"
            "<th>backward</th><th>MFLOP</th><th>ms</th></tr>")
    return (f"<table style='font-size:12px'>{head}{''.join(rows)}</table>"
            f"<p>Sum of the layers: forward {tr.forward_s * 1e3:.3f} ms, backward {tr.backward_s * 1e3:.3f} ms; "
            f"the whole step timed as one: {tr.step_s * 1e3:.3f} ms on the {tr.device.upper()}.</p>")
