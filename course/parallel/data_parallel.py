"""Data-parallel training of lesson 01's MLP: every rank holds the model and takes a slice of the batch.

One step on p ranks:

1. rank r takes its shard of the batch (``batch / p`` samples, give or take one);
2. forward and backward on the shard give the *shard's* mean-loss gradient ``g_r``;
3. the full batch's gradient is the shard gradients weighted by their share of the batch,
   ``sum_r (n_r / batch) * g_r`` (a plain mean when the shards are equal): each rank scales its
   own, then one all-reduce (the course's ring) adds them up on every rank;
4. every rank applies the same update, so the p copies of the model never drift apart.

After k steps the weights equal single-process training on the whole batch (up to the rounding of
summing in another order): :func:`single_process_train` is the oracle the tests compare with.

:func:`ddp_step` is the same step the way PyTorch's DistributedDataParallel does it: gradients are
grouped in *buckets* (last layer first, as backward produces them), and each bucket's all-reduce
starts (``Iallreduce``, non-blocking) as soon as its gradients are ready, while backward goes on with
the earlier layers.

>>> params = single_process_train([4, 6, 3], batch=8, steps=2, lr=0.1, seed=0)
>>> [p.shape for p in params]
[(4, 6), (6,), (6, 3), (3,)]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..arguments import Given, Optional, Real, Whole, Wholes, arguments
from ..backprop.layers import MLP, Linear, softmax_cross_entropy, softmax_cross_entropy_backward
from ..backprop.validate import validate_dlogits
from ..errors import BadInputError, shown_value, whole_number
from ..limits import require_fits
from .collectives import chunk_bounds, validate_workers
from .ring_mpi import validate_comm, validate_vector

__all__ = ["validate_sizes", "validate_model", "validate_callable", "require_batch_splits", "make_batches", "shard",
           "flat_gradients", "apply_update",
           "average_gradients", "single_process_train", "single_process_gradients", "data_parallel_train",
           "backward_with_hook", "bucket_plan", "ddp_step"]


def validate_sizes(sizes: Any) -> list[int]:
    """``sizes`` as a list of ints, or a clear error: an MLP's layer widths, input first and classes last."""
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or len(sizes) < 2:
        raise BadInputError(f"sizes must list the layer widths, input first and classes last, got {sizes!r}")
    return [whole_number("sizes", s, hint="each is a layer width") for s in sizes]


def require_batch_splits(batch: int, p: int) -> None:
    """Refuse a batch that p ranks cannot share: each needs at least one sample."""
    if batch < p:
        raise BadInputError(f"a batch of {batch} samples cannot be split over p = {p} ranks: each rank "
                            f"needs at least one sample. Use batch >= p.")


def validate_model(model: Any) -> MLP:
    """``model`` if it is lesson 01's :class:`~course.backprop.layers.MLP`, or a clear error."""
    if not isinstance(model, MLP):
        raise BadInputError(f"model must be lesson 01's MLP (course.backprop.MLP(sizes, dtype='float64')), got "
                            f"{type(model).__name__}")
    return model


def validate_callable(fn: Any, what: str = "the callback") -> Callable:
    """``fn`` if it can be called, or a clear error naming ``what`` it is."""
    if not callable(fn):
        raise BadInputError(f"{what} must be a function, got {shown_value(fn)}")
    return fn


def _require_flat(model: MLP, flat: np.ndarray | None) -> None:
    """A flat gradient vector holds exactly the model's parameters: a longer one would be read only in part."""
    if flat is not None and flat.shape != (model.n_parameters(),):
        raise BadInputError(f"the flat gradient vector must hold the model's {model.n_parameters():,} parameters "
                            f"(shape ({model.n_parameters()},)), got shape {flat.shape}")


def _require_buckets(model: MLP, buckets: list[list[int]] | None, flat: np.ndarray) -> None:
    """``buckets`` (None, or :func:`bucket_plan`'s runs of Linear layers) must hold every layer once, each
    bucket a contiguous run; and ``flat`` the model's parameters."""
    _require_flat(model, flat)
    if buckets is None:
        return
    layers = len(model.linear_layers())
    runs = [sorted(b) for b in buckets] if isinstance(buckets, (list, tuple)) and all(
        isinstance(b, (list, tuple)) and b for b in buckets) else None
    if runs is None or sorted(j for b in runs for j in b) != list(range(layers)) or any(
            b != list(range(b[0], b[-1] + 1)) for b in runs):
        raise BadInputError(f"buckets must group the model's {layers} Linear layers 0 .. {layers - 1}, each once, "
                            f"in runs of neighbours (what bucket_plan(model, bucket_bytes) returns), got "
                            f"{shown_value(buckets)}")


def _validate_gradient_lists(grads: Any) -> list[list[Any]]:
    if isinstance(grads, (str, bytes, np.ndarray)) or not isinstance(grads, Sequence) or not all(
            isinstance(g, Sequence) and not isinstance(g, (str, bytes)) for g in grads):
        raise BadInputError(f"grads must list each worker's gradients, [[dW1, db1, ...], ...], got "
                            f"{shown_value(grads)}")
    return [list(g) for g in grads]


_BATCH = Whole(hint="samples per step")
_MODEL = Given(validate_model)
_SEED = Whole(lo=0, hint="the seed every rank builds the same model and data from")
_LR = Real(above=0, hint="the learning rate")
_COMM = Given(validate_comm)


@arguments(sizes=Given(validate_sizes), batch=_BATCH, steps=Whole(hint="training steps"))
def make_batches(sizes: Sequence[int], batch: int, steps: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``steps`` batches of random float64 inputs ``(steps, batch, sizes[0])`` and integer labels.

    Every rank calls it with the same seed, so all hold the same data and each takes its own shard.
    """
    d_in, classes = sizes[0], sizes[-1]
    require_fits(16 * steps * batch * (d_in + 1), "cpu", what=f"{steps:,} batches of {batch:,} x {d_in:,} inputs")
    rng = np.random.default_rng(seed + 1)
    x = rng.standard_normal((steps, batch, d_in))
    y = rng.integers(0, classes, (steps, batch))
    return x, y


@arguments(batch=_BATCH, p=Given(validate_workers), rank=Whole(0, "p - 1", hint="ranks are numbered 0 .. p - 1"),
           then=require_batch_splits)
def shard(batch: int, p: int, rank: int) -> slice:
    """The rows of the batch that rank ``rank`` of ``p`` trains on (sizes differ by at most one).

    >>> [shard(10, 3, r) for r in range(3)]
    [slice(0, 3, None), slice(3, 6, None), slice(6, 10, None)]
    """
    b = chunk_bounds(batch, p)
    return slice(int(b[rank]), int(b[rank + 1]))


@arguments(model=_MODEL, weight=Real(above=0, hint="the share of the batch: n_r / batch"),
           out=Optional(Given(validate_vector, what="out")), then=lambda model, out: _require_flat(model, out))
def flat_gradients(model: MLP, x: np.ndarray, y: np.ndarray, weight: float = 1.0,
                   out: np.ndarray | None = None) -> np.ndarray:
    """Forward and backward on ``(x, y)``; every gradient times ``weight``, in one flat vector.

    One flat vector means one all-reduce for the whole model (and one buffer to send).
    """
    loss, cache = softmax_cross_entropy(model.forward(x), y)
    model.backward(softmax_cross_entropy_backward(cache))
    grads = model.gradients()
    out = np.empty(sum(g.size for g in grads), dtype=model.dtype) if out is None else out
    at = 0
    for g in grads:
        np.multiply(g.ravel(), weight, out=out[at:at + g.size])
        at += g.size
    return out


@arguments(model=_MODEL, flat=Given(validate_vector, what="flat"), lr=_LR, then=_require_flat)
def apply_update(model: MLP, flat: np.ndarray, lr: float) -> None:
    """Plain SGD, ``p -= lr * g``, with the gradients read from one flat vector."""
    at = 0
    for p in model.parameters():
        p -= lr * flat[at:at + p.size].reshape(p.shape)
        at += p.size


@arguments(grads=Given(_validate_gradient_lists),
           shard_sizes=Wholes(min_len=0, hint="the samples each worker's gradients were computed on"))
def average_gradients(grads: Sequence[Sequence[np.ndarray]], shard_sizes: Sequence[int]) -> list[np.ndarray]:
    """The full batch's gradient from each shard's mean-loss gradient: ``sum_r n_r / n * g_r``.

    ``grads[r]`` lists rank r's gradients (``[dW1, db1, ...]``), computed on ``shard_sizes[r]``
    samples.  This is what the all-reduce computes, written for one process (the exercise).

    >>> average_gradients([[np.array([1.0])], [np.array([4.0])]], [1, 2])[0].tolist()
    [3.0]
    """
    grads, shard_sizes = list(grads), list(shard_sizes)
    if not grads or len(grads) != len(shard_sizes):
        raise BadInputError(f"average_gradients needs one list of gradients and one shard size per worker: got "
                            f"{len(grads)} gradient list(s) and {len(shard_sizes)} shard size(s)")
    sizes = [whole_number(f"shard_sizes[{r}]", n, lo=1) for r, n in enumerate(shard_sizes)]
    if len({len(g) for g in grads}) != 1:
        raise BadInputError(f"every worker must hold the same gradients: the lists have lengths "
                            f"{[len(g) for g in grads]}")
    for i in range(len(grads[0])):
        shapes = {np.shape(g[i]) for g in grads}
        if len(shapes) != 1:
            raise BadInputError(f"gradient {i} has different shapes on different workers: {sorted(shapes)}")
    total = float(sum(sizes))
    return [sum(n / total * g[i] for g, n in zip(grads, sizes)) for i in range(len(grads[0]))]


@arguments(sizes=Given(validate_sizes), seed=_SEED)
def single_process_gradients(sizes: Sequence[int], x: np.ndarray, y: np.ndarray, seed: int = 0) -> list[np.ndarray]:
    """The oracle's gradients: one unsplit forward and backward on the whole batch, float64."""
    model = MLP(sizes, dtype="float64", seed=seed)
    flat = flat_gradients(model, x, y)
    return _unflatten(flat, model)


@arguments(sizes=Given(validate_sizes), batch=_BATCH, steps=Whole(hint="training steps"), lr=_LR, seed=_SEED)
def single_process_train(sizes: Sequence[int], batch: int, steps: int, lr: float, seed: int = 0) -> list[np.ndarray]:
    """The oracle: ``steps`` SGD steps on whole batches in one process (``MLP.train_step``), float64."""
    model = MLP(sizes, dtype="float64", seed=seed)
    xs, ys = make_batches(sizes, batch, steps, seed)
    for x, y in zip(xs, ys):
        model.train_step(x, y, lr)
    return [p.copy() for p in model.parameters()]


def _unflatten(flat: np.ndarray, model: MLP) -> list[np.ndarray]:
    out, at = [], 0
    for p in model.parameters():
        out.append(flat[at:at + p.size].reshape(p.shape).copy())
        at += p.size
    return out


@arguments(comm=_COMM, sizes=Given(validate_sizes), batch=_BATCH, steps=Whole(hint="training steps"), lr=_LR,
           seed=_SEED, allreduce=Optional(Given(validate_callable, what="allreduce(comm, x, out)")))
def data_parallel_train(comm: Any, sizes: Sequence[int], batch: int, steps: int, lr: float,
                        seed: int = 0, allreduce: Callable | None = None) -> list[np.ndarray]:
    """``steps`` data-parallel SGD steps on the ranks of ``comm``; returns this rank's weights.

    ``allreduce(comm, x, out)`` sums a vector over the ranks (default: the course's ring).
    """
    from .ring_mpi import ring_allreduce_mpi

    allreduce = allreduce or ring_allreduce_mpi
    p, r = comm.Get_size(), comm.Get_rank()
    model = MLP(sizes, dtype="float64", seed=seed)
    xs, ys = make_batches(sizes, batch, steps, seed)
    rows = shard(batch, p, r)
    local = np.empty(model.n_parameters(), dtype=np.float64)
    total = np.empty_like(local)
    for x, y in zip(xs, ys):
        n_r = rows.stop - rows.start
        flat_gradients(model, x[rows], y[rows], weight=n_r / batch, out=local)
        allreduce(comm, local, total)
        apply_update(model, total, lr)
    return [q.copy() for q in model.parameters()]


# ---------------------------------------------------------------------------- DDP: buckets, overlap

@arguments(model=_MODEL, dlogits=Given(lambda d, model: validate_dlogits(model, d), earlier=["model"]),
           on_ready=Given(validate_callable, what="on_ready(j)"))
def backward_with_hook(model: MLP, dlogits: np.ndarray, on_ready: Callable[[int], None]) -> None:
    """Backward through ``model``'s last forward, calling ``on_ready(j)`` as soon as Linear layer j's
    ``dW`` and ``db`` are final (last layer first): where DDP launches its all-reduces."""
    linear_index = len(model.linear_layers())
    g = dlogits
    for i in range(len(model.layers) - 1, -1, -1):
        layer, cache = model.layers[i], model.caches[i]
        if isinstance(layer, Linear):
            linear_index -= 1
            g = layer.backward(g, cache, need_dx=i > 0)
            on_ready(linear_index)
        else:
            g = layer.backward(g, cache)


def bucket_plan(model: MLP, bucket_bytes: int) -> list[list[int]]:
    """Group the Linear layers into buckets of about ``bucket_bytes`` of gradients, last layer first.

    >>> bucket_plan(MLP([8, 8, 8, 8]), 10**9)
    [[2, 1, 0]]
    """
    bucket_bytes = whole_number("bucket_bytes", bucket_bytes, hint="bytes of gradients per bucket")
    buckets: list[list[int]] = [[]]
    filled = 0
    layers = model.linear_layers()
    for j in range(len(layers) - 1, -1, -1):
        if filled >= bucket_bytes:
            buckets.append([])
            filled = 0
        buckets[-1].append(j)
        filled += (layers[j].W.nbytes + layers[j].b.nbytes)
    return buckets


@arguments(comm=_COMM, model=_MODEL, weight=Real(above=0, hint="the share of the batch: n_r / batch"), lr=_LR,
           flat=Given(validate_vector, what="flat"), then=_require_buckets)
def ddp_step(comm: Any, model: MLP, x: np.ndarray, y: np.ndarray, weight: float, lr: float,
             buckets: list[list[int]] | None, flat: np.ndarray) -> None:
    """One data-parallel step with MPI's all-reduce: ``buckets=None`` waits for the whole backward
    and then reduces everything at once; with buckets, each bucket's ``Iallreduce`` starts the moment
    its layers' gradients are ready and overlaps the rest of the backward pass."""
    from mpi4py import MPI

    layers = model.linear_layers()
    offsets = np.cumsum([0] + [q.size for q in model.parameters()])     # W1, b1, W2, b2, ...
    loss, cache = softmax_cross_entropy(model.forward(x), y)
    dlogits = softmax_cross_entropy_backward(cache)
    requests: list[Any] = []
    waiting = {j: k for k, bucket in enumerate(buckets or []) for j in bucket}
    left = [len(b) for b in (buckets or [])]

    def on_ready(j: int) -> None:
        lo = offsets[2 * j]
        flat[lo:lo + layers[j].W.size] = layers[j].dW.ravel()
        flat[offsets[2 * j + 1]:offsets[2 * j + 2]] = layers[j].db
        flat[lo:offsets[2 * j + 2]] *= weight
        if buckets is None:
            return
        k = waiting[j]
        left[k] -= 1
        if left[k] == 0:            # the bucket is complete: its layers are contiguous in `flat`
            a, b = offsets[2 * min(buckets[k])], offsets[2 * max(buckets[k]) + 2]
            requests.append(comm.Iallreduce(MPI.IN_PLACE, flat[a:b], op=MPI.SUM))
        if requests:
            MPI.Request.Testall(requests)    # let MPI make progress while backward goes on

    backward_with_hook(model, dlogits, on_ready)
    if buckets is None:
        comm.Allreduce(MPI.IN_PLACE, flat, op=MPI.SUM)
    else:
        MPI.Request.Waitall(requests)
    apply_update(model, flat, lr)
