"""Tensor parallelism (Megatron-LM's pattern): one MLP block's two weight matrices split over p ranks.

The block is two Linear layers with an activation between them, ``z = act(x @ W1 + b1) @ W2 + b2``
(lesson 01's MLP with ``sizes = [d_in, hidden, d_out]``).  Rank r of p holds one slice of the hidden
width, the columns ``lo:hi`` of :func:`column_bounds`:

* **column-parallel first layer** (``ColumnParallelLinear``): rank r holds ``W1[:, lo:hi]`` and
  ``b1[lo:hi]`` and computes its own columns of the hidden activations, ``h_r = act(x @ W1_r + b1_r)``.
  No message: the activation acts element by element, so each rank applies it to its own columns.
* **row-parallel second layer** (``RowParallelLinear``): rank r holds the rows ``W2[lo:hi, :]``, so
  ``h_r @ W2_r`` is its *share* of ``h @ W2``: one **all-reduce** adds the p shares, and every rank
  adds the bias ``b2`` (which every rank holds) to the sum.

The backward pass is the mirror image.  Every rank holds the same logits, so the same ``dz``; each
computes ``dW2_r = h_rᵀ dz``, ``dh_r = dz W2_rᵀ``, ``dW1_r = xᵀ da_r`` on its own slice, with no
message, and the gradient of the block's *input*, ``dx = Σ_r da_r W1_rᵀ``, is again a sum of p shares:
the second **all-reduce** (the layer before the block needs it; Megatron's ``f`` operator).
So a pair of layers costs one all-reduce forward and one backward, of *activations*: ``batch · d_out``
and ``batch · d_in`` numbers, whatever the hidden width.  Data parallelism all-reduces every
*gradient* instead, ``d_in·hidden + hidden + hidden·d_out + d_out`` numbers, whatever the batch.

One rank's step is a generator, :func:`rank_step`: it *yields* each vector it needs summed over the
ranks and is sent the sum back.  The very same generator runs on real MPI ranks (each sum is the
course's ring, :func:`course.parallel.ring_mpi.ring_allreduce_mpi`, see :func:`run_rank_step`) and in
one process (:func:`simulate_tensor_parallel` steps p generators in lockstep and sums with the
simulated ring, :func:`course.parallel.collectives.ring_allreduce`, counting every byte sent).

>>> run = simulate_tensor_parallel([4, 6, 3], np.ones((5, 4)), np.array([0, 1, 2, 0, 1]), p=2)
>>> [g.shape for g in run.gradients], run.allreduces
([(4, 6), (6,), (6, 3), (3,)], 2)
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..arguments import Given, Whole, arguments
from ..backprop.layers import ACTIVATIONS, MLP, softmax_cross_entropy, softmax_cross_entropy_backward
from ..errors import BadInputError, shown_value, whole_number
from ..limits import require_fits
from .collectives import bytes_per_worker, chunk_bounds, ring_allreduce
from .data_parallel import validate_callable
from .model import model_time

__all__ = ["TensorShard", "TensorParallelRun", "validate_block", "validate_shard", "column_bounds", "split_block",
           "rank_step", "run_rank_step", "simulate_tensor_parallel", "single_process_block", "tensor_parallel_bytes",
           "data_parallel_bytes", "communication_model_s", "gather_gradients"]

#: A rank's step: yields the arrays to sum over the ranks, is sent the sums, returns ``(loss, logits, dx)``.
RankStep = Generator[np.ndarray, np.ndarray, tuple[float, np.ndarray, np.ndarray]]


def validate_block(sizes: Any) -> list[int]:
    """``sizes`` as ``[d_in, hidden, d_out]``, or a clear error: one pair of Linear layers."""
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or len(sizes) != 3:
        raise BadInputError(f"a tensor-parallel block is one pair of Linear layers: sizes must be [d_in, hidden, "
                            f"d_out] (three widths), got {sizes!r}")
    return [whole_number("every width in sizes", s, hint="layer widths are whole numbers >= 1") for s in sizes]


@arguments(hidden=Whole(hint="the width split over the ranks"),
           p=Whole(hi="hidden", hint="p ranks, and each rank needs at least one column: use a wider layer"))
def column_bounds(hidden: int, p: int) -> np.ndarray:
    """The hidden columns of each rank: rank r holds ``[bounds[r], bounds[r+1])``.

    >>> column_bounds(10, 4).tolist()
    [0, 2, 5, 7, 10]
    """
    return chunk_bounds(hidden, p)


@dataclass
class TensorShard:
    """What rank ``rank`` of ``p`` holds: columns ``lo:hi`` of W1 and b1, rows ``lo:hi`` of W2, all of b2;
    and, after a backward pass, the gradients of exactly those (``dW1``, ``db1``, ``dW2``, ``db2``)."""

    rank: int
    p: int
    lo: int
    hi: int
    W1: np.ndarray
    b1: np.ndarray
    W2: np.ndarray
    b2: np.ndarray
    activation: str = "relu"
    dW1: np.ndarray | None = None
    db1: np.ndarray | None = None
    dW2: np.ndarray | None = None
    db2: np.ndarray | None = None


def validate_shard(shard: Any, gradients: bool = False) -> TensorShard:
    """``shard`` if it is a :class:`TensorShard` (what :func:`split_block` returns), with its gradients filled
    in when ``gradients`` (after :func:`rank_step`); or a clear error."""
    if not isinstance(shard, TensorShard):
        raise BadInputError(f"a shard must be a TensorShard, what split_block(sizes, p) returns; got "
                            f"{type(shard).__name__}")
    if gradients and any(g is None for g in (shard.dW1, shard.db1, shard.dW2, shard.db2)):
        raise BadInputError(f"rank {shard.rank}'s shard holds no gradients yet: run its rank_step first")
    return shard


def _validate_shards(shards: Any) -> list[TensorShard]:
    """Every rank's shard once, in rank order, each with its gradients: what gather_gradients stitches together."""
    if isinstance(shards, (str, bytes, TensorShard)) or not isinstance(shards, Sequence) or not shards:
        raise BadInputError(f"shards must list every rank's TensorShard, in rank order, got {shown_value(shards)}")
    shards = [validate_shard(s, gradients=True) for s in shards]
    if [s.rank for s in shards] != list(range(shards[0].p)) or any(
            s.lo != (shards[s.rank - 1].hi if s.rank else 0) for s in shards):
        raise BadInputError(f"shards must be the p = {shards[0].p} ranks' shards 0 .. {shards[0].p - 1}, in rank "
                            f"order, got ranks {[s.rank for s in shards]}")
    return shards


def _validate_step(step: Any) -> RankStep:
    if not (callable(getattr(step, "send", None)) and hasattr(step, "__next__")):
        raise BadInputError(f"step must be a rank's step, the generator rank_step(shard, x, y) returns; got "
                            f"{shown_value(step)}")
    return step


def split_block(sizes: Sequence[int], p: int, rank: int | None = None, seed: int = 0,
                activation: str = "relu") -> list[TensorShard]:
    """The shards of lesson 01's ``MLP(sizes, float64, seed)``: every rank's, or only ``rank``'s (a list of one).

    Every rank builds the same unsplit weights from the seed and keeps its slice, so the p shards
    together are exactly the single-process model.
    """
    sizes = validate_block(sizes)
    bounds = column_bounds(sizes[1], p)
    if activation not in ACTIVATIONS:
        raise BadInputError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
    model = MLP(sizes, activation=activation, dtype="float64", seed=seed)
    first, second = model.linear_layers()
    ranks = range(p) if rank is None else [whole_number("rank", rank, 0, p - 1, hint=f"ranks are 0 .. {p - 1}")]
    return [TensorShard(r, p, int(bounds[r]), int(bounds[r + 1]), first.W[:, bounds[r]:bounds[r + 1]].copy(),
                        first.b[bounds[r]:bounds[r + 1]].copy(), second.W[bounds[r]:bounds[r + 1]].copy(),
                        second.b.copy(), activation) for r in ranks]


@arguments(shard=Given(validate_shard))
def rank_step(shard: TensorShard, x: np.ndarray, y: np.ndarray) -> RankStep:
    """One forward and backward on one rank; ``yield`` marks each all-reduce (the sum comes back).

    ``x`` (batch, d_in) and the labels ``y`` are the same on every rank (tensor parallelism splits the
    weights, not the batch).  Fills the shard's gradients; returns ``(loss, logits, dx)``.
    """
    act = ACTIVATIONS[shard.activation]()
    # forward: column-parallel, then row-parallel; one all-reduce of the output
    a = x @ shard.W1 + shard.b1                     # (batch, hi - lo): this rank's hidden columns
    h, act_cache = act.forward(a)
    z = yield h @ shard.W2                          # the p shares of h @ W2 summed on every rank
    logits = z + shard.b2
    loss, loss_cache = softmax_cross_entropy(logits, y)
    # backward: the same dz on every rank; one all-reduce of the input's gradient
    dz = softmax_cross_entropy_backward(loss_cache)
    shard.dW2, shard.db2 = h.T @ dz, dz.sum(axis=0)
    da = act.backward(dz @ shard.W2.T, act_cache)
    shard.dW1, shard.db1 = x.T @ da, da.sum(axis=0)
    dx = yield da @ shard.W1.T                      # the p shares of dx summed on every rank
    return float(loss), logits, dx


@arguments(step=Given(_validate_step), allreduce=Given(validate_callable, what="allreduce(vector)"))
def run_rank_step(step: RankStep,
                  allreduce: Callable[[np.ndarray], np.ndarray]) -> tuple[float, np.ndarray, np.ndarray]:
    """Drive one rank's :func:`rank_step` with ``allreduce(vector) -> sum over the ranks`` (on MPI:
    ``lambda v: ring_allreduce_mpi(comm, v)``).  Returns what the step returns."""
    share = next(step)
    while True:
        total = allreduce(np.ascontiguousarray(share).ravel()).reshape(share.shape)
        try:
            share = step.send(total)
        except StopIteration as done:
            return done.value


@dataclass
class TensorParallelRun:
    """A simulated tensor-parallel step: the loss, the logits, the input's gradient, the unsplit
    gradients gathered from the shards, and the bytes each rank sent (counted from the ring's messages)."""

    loss: float
    logits: np.ndarray
    dx: np.ndarray
    gradients: list[np.ndarray]
    shards: list[TensorShard]
    bytes_sent: np.ndarray
    allreduces: int


@arguments(shards=Given(_validate_shards))
def gather_gradients(shards: Sequence[TensorShard]) -> list[np.ndarray]:
    """``[dW1, db1, dW2, db2]`` of the unsplit block from the shards' slices (b2's from rank 0; every
    rank computed the same one)."""
    return [np.concatenate([s.dW1 for s in shards], axis=1), np.concatenate([s.db1 for s in shards]),
            np.concatenate([s.dW2 for s in shards], axis=0), shards[0].db2.copy()]


def _validate_batch(sizes: list[int], x: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    shape = np.shape(x)
    if len(shape) != 2 or shape[1] != sizes[0] or shape[0] < 1:
        raise BadInputError(f"x must be a (batch, {sizes[0]}) array, got shape {shape}")
    # the step's float64 activations and gradients: a few arrays of batch × each layer's width, and x itself
    require_fits(8 * shape[0] * 6 * sum(sizes), "cpu", what=f"one tensor-parallel step on a batch of {shape[0]:,}")
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y)
    if y.shape != (x.shape[0],) or y.dtype.kind not in "iu" or (y.size and not 0 <= y.min() <= y.max() < sizes[2]):
        raise BadInputError(f"y must hold {x.shape[0]} integer labels in 0 .. {sizes[2] - 1}, got {y!r}")
    return x, y


@arguments(sizes=Given(validate_block))
def simulate_tensor_parallel(sizes: Sequence[int], x: Any, y: Any, p: int, seed: int = 0,
                             activation: str = "relu") -> TensorParallelRun:
    """One step of the block on p simulated ranks in this process: p :func:`rank_step` generators in
    lockstep, each all-reduce done by the simulated ring on their p shares."""
    x, y = _validate_batch(sizes, x, y)
    shards = split_block(sizes, p, seed=seed, activation=activation)
    steps = [rank_step(s, x, y) for s in shards]
    shares = [next(s) for s in steps]
    sent, count, finished = np.zeros(len(shards)), 0, []
    while not finished:
        stacked = np.stack([s.ravel() for s in shares])
        totals = stacked
        if len(shards) > 1:                 # one rank has nothing to add up, and sends nothing
            run = ring_allreduce(stacked, trace=False)
            totals, sent = run.result, sent + run.bytes_sent()
        count += 1
        following = []
        for step, total, share in zip(steps, totals, shares):
            try:
                following.append(step.send(total.reshape(share.shape)))
            except StopIteration as done:
                finished.append(done.value)
        shares = following
    loss, logits, dx = finished[0]
    return TensorParallelRun(loss, logits, dx, gather_gradients(shards), shards, sent, count)


@arguments(sizes=Given(validate_block))
def single_process_block(sizes: Sequence[int], x: Any, y: Any, seed: int = 0,
                         activation: str = "relu") -> dict:
    """The oracle: lesson 01's unsplit ``MLP`` (float64), one forward and backward with the input's gradient.

    Returns ``{"loss", "logits", "dx", "gradients": [dW1, db1, dW2, db2]}``.
    """
    x, y = _validate_batch(sizes, x, y)
    model = MLP(sizes, activation=activation, dtype="float64", seed=seed)
    logits = model.forward(x)
    loss, cache = softmax_cross_entropy(logits, y)
    dx = model.backward(softmax_cross_entropy_backward(cache), need_input_grad=True)
    return {"loss": float(loss), "logits": logits, "dx": np.array(dx),
            "gradients": [g.copy() for g in model.gradients()]}


@arguments(sizes=Given(validate_block), batch=Whole(hint="samples per step"))
def tensor_parallel_bytes(sizes: Sequence[int], batch: int, p: int, itemsize: int = 8) -> float:
    """Bytes each rank sends per step with tensor parallelism and the ring: one all-reduce of
    ``batch · d_out`` numbers forward, one of ``batch · d_in`` backward.

    >>> tensor_parallel_bytes([512, 2048, 512], batch=64, p=4)
    786432.0
    """
    d_in, _, d_out = sizes
    return bytes_per_worker("ring", batch * d_out, p, itemsize) + bytes_per_worker("ring", batch * d_in, p, itemsize)


def data_parallel_bytes(sizes: Sequence[int], p: int, itemsize: int = 8) -> float:
    """Bytes each rank sends per step with data parallelism and the ring: one all-reduce of every gradient.

    >>> data_parallel_bytes([512, 2048, 512], p=4)
    25196544.0
    """
    d_in, hidden, d_out = validate_block(sizes)
    return bytes_per_worker("ring", d_in * hidden + hidden + hidden * d_out + d_out, p, itemsize)


def communication_model_s(scheme: str, sizes: Sequence[int], batch: int, p: int, alpha: float, beta: float) -> float:
    """The α–β model's seconds for one step's all-reduces (the ring, float64): ``"tensor"`` (two of
    activations) or ``"data"`` (one of every gradient).  A prediction, not a measurement.

    >>> round(communication_model_s("tensor", [256, 1024, 256], 64, 2, 0.0, 1e-9) * 1e3, 3)
    0.262
    """
    d_in, hidden, d_out = validate_block(sizes)
    if scheme == "tensor":
        return sum(model_time("ring", p, 8 * batch * d, alpha, beta) for d in (d_out, d_in))
    if scheme == "data":
        return model_time("ring", p, 8 * (d_in * hidden + hidden + hidden * d_out + d_out), alpha, beta)
    raise BadInputError(f"scheme must be 'tensor' or 'data'; got {scheme!r}.")
