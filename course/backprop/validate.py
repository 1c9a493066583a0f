"""Lesson 01's input validation (``validate_*`` returns the value, ``require_*`` only raises): each bad
input to :class:`course.backprop.MLP` and the lesson's functions gets a message naming the value.

Kept apart from the model so that the algorithm reads top to bottom without them.

>>> import numpy as np
>>> validate_batch(np.zeros((2, 3), np.float32), 3, "cpu", np.dtype("float32")).shape
(2, 3)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..devices import array_device, normalize_device, to_numpy, xp_of
from ..errors import BadInputError, random_generator, shown_value, whole_number
from ..limits import require_fits, validate_dtype

__all__ = ["validate_batch", "validate_labels", "validate_mlp", "validate_linear", "validate_inputs",
           "validate_dlogits", "validate_finite_loss", "require_logits", "validate_same_shape", "validate_lr",
           "validate_eps", "validate_gradient_inputs", "validate_checkpointing", "validate_training",
           "validate_fast_step", "validate_step_batch", "require_order_fits", "require_random_batch_fits",
           "validate_digits", "validate_kind", "validate_compared", "validate_loss_cache",
           "validate_step_times", "validate_mixed_runs"]


def validate_batch(x: Any, n_in: int, device: str, dtype: np.dtype) -> Any:
    """``x`` as a ``(batch, n_in)`` array of ``dtype`` on ``device`` (cast if needed), or a clear error."""
    n_in = whole_number("n_in", n_in, hint="the input width of the model")
    if array_device(x) != device:
        raise BadInputError(f"x is on the {array_device(x).upper()} but the model is on the "
                            f"{device.upper()}: move it first with course.to_device(x, {device!r})")
    if getattr(x, "ndim", None) != 2 or x.shape[1] != n_in:
        raise BadInputError(f"x must have shape (batch, {n_in}) for this model, "
                            f"got {getattr(x, 'shape', type(x).__name__)}")
    if x.shape[0] == 0:
        raise BadInputError("x is an empty batch (0 rows): give at least one example")
    return x if x.dtype == dtype else x.astype(dtype)


def validate_labels(y: Any, batch: int, n_classes: int, device: str) -> Any:
    """``y`` as ``batch`` integer labels in ``0..n_classes-1`` on ``device``, or a clear error."""
    batch = whole_number("batch", batch, lo=0, hint="the rows of x")
    n_classes = whole_number("n_classes", n_classes, hint="the classes of the model")
    if array_device(y) != device:
        raise BadInputError(f"labels y are on the {array_device(y).upper()} but the model is on "
                            f"the {device.upper()}: use course.to_device(y, {device!r})")
    if getattr(y, "ndim", None) != 1 or y.shape[0] != batch:
        raise BadInputError(f"labels y must have shape ({batch},), one class per row of x; "
                            f"got {getattr(y, 'shape', type(y).__name__)}")
    if y.dtype.kind not in "iu":
        raise BadInputError(f"labels y must be integer class numbers, got dtype {y.dtype.name}")
    lo, hi = int(y.min()), int(y.max())
    if lo < 0 or hi >= n_classes:
        bad = lo if lo < 0 else hi
        raise BadInputError(f"label {bad} is out of range: this model has {n_classes} classes, "
                            f"so labels must lie in 0..{n_classes - 1}")
    return y


def validate_lr(lr: Any) -> float:
    """``lr`` if it is a positive finite number, or a clear error."""
    if not isinstance(lr, (int, float, np.floating)) or not math.isfinite(lr) or lr <= 0:
        raise BadInputError(f"learning rate lr must be a positive finite number, got {lr!r}")
    return lr


def _float_dtype(dtype: Any, device: Any) -> np.dtype:
    """``dtype`` as a numpy float dtype the device holds; an integer one would round every weight to 0."""
    return validate_dtype(dtype, device, floating=True)


def _require_weights_fit(sizes: Sequence[int], dtype: np.dtype, device: Any) -> None:
    """Refuse, before drawing anything, weights that would not fit: on ``device`` the weights, their
    gradients and one update buffer; on the host the float64 draw of the largest layer (and its copy)."""
    pairs = list(zip(sizes[:-1], sizes[1:]))
    params = sum(a * b + b for a, b in pairs)
    arch = "-".join(map(str, sizes))
    require_fits(3 * params * dtype.itemsize, device,
                 what=f"the {params:,} {dtype.name} weights of a {arch} network, their gradients and updates")
    require_fits(max(a * b for a, b in pairs) * (16 + dtype.itemsize), "cpu",
                 what=f"the float64 draw of the largest layer of {arch}")


def validate_linear(n_in: Any, n_out: Any, dtype: Any, device: Any,
                    seed: Any) -> tuple[int, int, np.dtype, np.random.Generator]:
    """A Linear layer's ``(n_in, n_out, dtype, random generator)``, checked, with weights that fit on ``device``."""
    n_in = whole_number("n_in", n_in, hint="the width of the layer's input")
    n_out = whole_number("n_out", n_out, hint="the width of the layer's output")
    dtype = _float_dtype(dtype, device)
    _require_weights_fit([n_in, n_out], dtype, device)
    return n_in, n_out, dtype, random_generator(seed)


def validate_mlp(sizes: Any, activation: Any, dtype: Any, device: Any,
                 activations: Mapping) -> tuple[list[int], np.dtype, str]:
    """An MLP's ``(sizes, dtype, device)``, checked, with weights that fit on ``device``."""
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__len__") or len(sizes) < 2:
        raise BadInputError(f"sizes must list at least two widths (input and output), e.g. "
                            f"[64, 32, 10]; got {sizes!r}")
    sizes = [whole_number("every width in sizes", s, hint=f"got sizes={list(sizes)!r}") for s in sizes]
    if activation not in activations:
        raise BadInputError(f"activation must be one of {sorted(activations)}, got {activation!r}")
    device = normalize_device(device)
    dtype = _float_dtype(dtype, device)
    _require_weights_fit(sizes, dtype, device)
    return sizes, dtype, device


def validate_inputs(model: Any, x: Any, y: Any = None, lr: Any = None) -> tuple[Any, Any]:
    """``(x, y)`` for ``model`` (an MLP): x cast to its dtype, the labels (if given) in range, and the
    learning rate (if given) positive; or a clear error."""
    if lr is not None:
        validate_lr(lr)
    x = validate_batch(x, model.sizes[0], model.device, model.dtype)
    if y is not None:
        y = validate_labels(y, x.shape[0], model.sizes[-1], model.device)
    return x, y


def validate_dlogits(model: Any, dlogits: Any) -> Any:
    """``dlogits`` with the shape of ``model``'s last logits, on its device, in its dtype; or a clear error."""
    if not model.caches:
        raise BadInputError("backward needs a forward pass first: call model.forward(x)")
    want = (model.caches[0][0].shape[0], model.sizes[-1])
    if array_device(dlogits) != model.device or tuple(dlogits.shape) != want:
        raise BadInputError(f"dlogits must have the logits' shape {want} and live on the "
                            f"{model.device.upper()}, got {tuple(dlogits.shape)} on the "
                            f"{array_device(dlogits).upper()}")
    return dlogits if dlogits.dtype == model.dtype else dlogits.astype(model.dtype)


def validate_finite_loss(loss: Any, x: Any, lr: float) -> float:
    """A training step's ``loss`` as a float (one read back), or a clear error when it is not finite: bad
    data, or a learning rate too big."""
    loss = float(loss)
    if math.isfinite(loss):
        return loss
    if not bool(xp_of(x).isfinite(x).all()):
        raise BadInputError("x contains NaN or infinite values: clean the data before training")
    raise BadInputError(f"the loss is {loss} (not finite): training diverged with learning rate "
                        f"lr={lr:g}. Lower lr (try {lr / 10:g}) and start again from a new model.")


def require_logits(logits: Any, labels: Any) -> None:
    """``logits`` a ``(batch, classes)`` array and ``labels`` one class in range per row; or a clear error."""
    if getattr(logits, "ndim", None) != 2:
        raise BadInputError(f"logits must be a 2-D array (batch, classes), got "
                            f"{getattr(logits, 'shape', type(logits).__name__)}")
    validate_labels(labels, logits.shape[0], logits.shape[1], array_device(logits))


def validate_same_shape(pred: Any, target: Any) -> tuple[Any, Any]:
    """``(pred, target)`` of one shape (plain lists become float64 arrays); or a clear error."""
    if not hasattr(pred, "shape") and not hasattr(target, "shape"):
        pred, target = np.asarray(pred, dtype=np.float64), np.asarray(target, dtype=np.float64)
    if getattr(pred, "shape", None) != getattr(target, "shape", None):
        raise BadInputError(f"pred and target must have the same shape, got {getattr(pred, 'shape', pred)!r} "
                            f"and {getattr(target, 'shape', target)!r} (reshape one of them)")
    return pred, target


def validate_eps(eps: object) -> float:
    """``eps`` as a float if it is a step in (0, 1); a zero step would divide by zero."""
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not 0 < eps < 1:
        raise BadInputError(f"eps must be a small positive step such as 1e-6, got {eps!r}")
    return float(eps)


def validate_gradient_inputs(model: Any, x: Any, y: Any, eps: Any, max_entries: Any) -> tuple[Any, Any, float, Any]:
    """A gradient check's ``(x, y, eps, max_entries)``: the batch for ``model``, a step in (0, 1), and
    None, ``"auto"`` or a whole number of entries; or a clear error."""
    eps = validate_eps(eps)
    if max_entries is not None and max_entries != "auto":
        max_entries = whole_number("max_entries", max_entries, hint="or None (every entry) or 'auto'")
    x, y = validate_inputs(model, x, y)
    return x, y, eps, max_entries


def validate_checkpointing(model: Any, x: Any, y: Any, every: Any) -> tuple[Any, Any, int]:
    """A checkpointed step's ``(x, y, every)``: the batch for ``model`` and k >= 1; or a clear error."""
    every = whole_number("every", every, hint="a checkpoint every k blocks, k >= 1")
    x, y = validate_inputs(model, x, y)
    return x, y, every


def validate_training(model: Any, data: Any, epochs: Any, max_epochs: int) -> int:
    """``epochs``, checked, for a ``model`` that fits ``data`` (same device, widths); or a clear error."""
    epochs = whole_number("epochs", epochs, hi=max_epochs, hint="passes over the training set, e.g. 10")
    if data.device != model.device:
        raise BadInputError(f"the data is on the {data.device.upper()} but the model is on the "
                            f"{model.device.upper()}: load it with load_digits(device={model.device!r})")
    if data.n_features != model.sizes[0] or data.n_classes != model.sizes[-1]:
        raise BadInputError(f"the model {model.sizes} does not fit the data: it needs "
                            f"{data.n_features} inputs and {data.n_classes} outputs")
    return epochs


def validate_fast_step(model: Any, rung: Any, batch: Any, lr: Any, mlp: type, rungs: Sequence[str]) -> int:
    """A fast step's ``batch``, checked, for a ``model`` (an ``mlp``) that ``rung`` (one of ``rungs``) can
    run; or a clear error."""
    if not isinstance(model, mlp):
        raise BadInputError(f"model must be a course.backprop.MLP, got {type(model).__name__}")
    if rung not in rungs:
        raise BadInputError(f"rung must be one of {list(rungs)}, got {rung!r}")
    if rung != "eager" and model.activation != "relu":
        raise BadInputError(f"the rungs past 'eager' are written for ReLU networks; this model uses "
                            f"{model.activation!r} (use rung='eager', or MLP(..., activation='relu'))")
    if rung == "graph" and model.device != "gpu":
        raise BadInputError("rung 'graph' captures a CUDA graph and needs a GPU model (device='gpu'); "
                            "on a CPU use rung 'fused'")
    if model.device == "gpu" and rung in ("fused", "graph") and model.dtype != np.float32:
        raise BadInputError(f"the fused CUDA kernels are float32; this model is {model.dtype.name} "
                            f"(build it with dtype='float32', or use rung 'no_readback')")
    validate_lr(lr)
    batch = whole_number("batch", batch, hint="the rows of every batch this step takes")
    widths = sum(model.sizes[1:])          # each layer's output, its gradient (dtype) and its ReLU mask (bool)
    per_row = model.sizes[0] * model.dtype.itemsize + 8 + model.sizes[-1] * model.dtype.itemsize \
        + widths * (2 * model.dtype.itemsize + 1) + model.dtype.itemsize
    params = sum(a * b + b for a, b in zip(model.sizes[:-1], model.sizes[1:]))
    require_fits(batch * per_row + 3 * params * model.dtype.itemsize, model.device,
                 what=f"a {rung!r} step's buffers for batches of {batch:,} rows")
    return batch


def validate_step_batch(fast: Any, x: Any, y: Any, check: bool) -> tuple[Any, Any]:
    """A fast step's ``(x, y)``: ``fast.batch`` rows for its model, the labels checked when ``check``; or a
    clear error."""
    x = validate_batch(x, fast.sizes[0], fast.device, fast.dtype)
    if x.shape[0] != fast.batch:
        raise BadInputError(f"this step was built for batches of {fast.batch} rows, got {x.shape[0]}: "
                            f"build FastStep(model, batch={x.shape[0]}) for this size")
    return x, validate_labels(y, fast.batch, fast.sizes[-1], fast.device) if check else y


def require_order_fits(n: int) -> None:
    """Refuse an order of ``n`` examples (int64 indices) that does not fit in host memory."""
    require_fits(8 * n, "cpu", what=f"the order of {n:,} examples")


def require_random_batch_fits(model: Any, batch: int) -> None:
    """Refuse a random batch for ``model`` (drawn in float64, then cast) that does not fit in host memory."""
    require_fits(batch * (model.sizes[0] * (8 + model.dtype.itemsize) + 8), "cpu",
                 what=f"a random batch of {batch:,} examples of {model.sizes[0]:,} features")


def validate_digits(device: Any, dtype: Any, test_fraction: Any) -> tuple[str, np.dtype]:
    """The digits' ``(device, float dtype)``, with ``test_fraction`` in (0, 1); or a clear error."""
    device = normalize_device(device)
    dt = _float_dtype(dtype, device)
    if isinstance(test_fraction, bool) or not isinstance(test_fraction, numbers.Real) or not 0 < test_fraction < 1:
        raise BadInputError(f"test_fraction must lie strictly between 0 and 1, got {test_fraction!r}")
    return device, dt


def validate_kind(value: Any, kind: type | tuple[type, ...], name: str, what: str) -> Any:
    """``value`` if it is a ``kind`` (``what`` says which, for the message); else a clear error naming ``name``."""
    if not isinstance(value, kind):
        raise BadInputError(f"{name} must be {what}, got {type(value).__name__}")
    return value


def validate_compared(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(a, b)`` as float64 host arrays of one shape, for an error between them; or a clear error (numpy would
    broadcast a ``(3, 1)`` against a ``(3,)`` into a ``(3, 3)`` difference and measure the wrong thing)."""
    try:
        a, b = to_numpy(a).astype(np.float64), to_numpy(b).astype(np.float64)
    except (TypeError, ValueError):
        raise BadInputError(f"a and b must be arrays of numbers, got {type(a).__name__} and "
                            f"{type(b).__name__}") from None
    if a.shape != b.shape:
        raise BadInputError(f"a and b must have the same shape, got {a.shape} and {b.shape} (reshape one of them)")
    return a, b


def validate_loss_cache(cache: Any, loss: str = "softmax_cross_entropy") -> tuple:
    """The cache a loss returned, as its tuple: ``(probs, labels)`` of :func:`softmax_cross_entropy` (labels one
    per row of probs), ``(diff,)`` of :func:`mse`; or a clear error naming what to pass."""
    parts = 2 if loss == "softmax_cross_entropy" else 1
    ok = isinstance(cache, tuple) and len(cache) == parts and all(hasattr(c, "shape") for c in cache)
    if ok and parts == 2:
        probs, labels = cache
        ok = len(probs.shape) == 2 and tuple(labels.shape) == (probs.shape[0],)
    if not ok:
        raise BadInputError(f"cache must be the cache {loss}(...) returned (its second value), got "
                            f"{type(cache).__name__}")
    return cache


def validate_step_times(times: Any) -> dict:
    """``times`` if it maps names to seconds (finite, > 0), ``"course"`` among them, as :func:`speed_ablation`
    returns them; or a clear error."""
    ok = isinstance(times, Mapping) and "course" in times and all(
        isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and v > 0 for v in times.values())
    if not ok:
        raise BadInputError(f"times must map each step's name to its seconds, 'course' among them (what "
                            f"speed_ablation returns), got {shown_value(times)}")
    return dict(times)


def validate_mixed_runs(runs: Any) -> dict:
    """``runs`` if it maps names to runs of ``mixed_precision_train`` (each with its ``losses``); or a clear error."""
    ok = isinstance(runs, Mapping) and len(runs) > 0 and all(
        isinstance(r, Mapping) and hasattr(r.get("losses"), "__len__") and len(r["losses"]) > 0
        for r in runs.values())
    if not ok:
        raise BadInputError(f"runs must map names to mixed_precision_train(...) runs, each with its losses, got "
                            f"{shown_value(runs)}")
    return dict(runs)
