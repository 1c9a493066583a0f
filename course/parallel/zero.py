"""ZeRO's three stages (and FSDP): data parallelism in which each rank keeps only a shard of the model states.

Data parallelism (:mod:`~course.parallel.data_parallel`) gives every rank a whole copy of what training
holds.  Counted here in float64 (no mixed precision: every number 8 bytes) with Adam, Ψ parameters cost
8Ψ bytes, their gradients 8Ψ, Adam's two moments 16Ψ: 32Ψ on *every* rank, however many share the work.
ZeRO (Rajbhandari et al., 2020) cuts each layer's parameters, flattened (``[W.ravel(), b]``), into p
chunks (:func:`~course.parallel.collectives.chunk_bounds`); rank r *owns* chunk r of every layer and keeps:

* **stage 1**: Adam's moments of its chunks only, ``8Ψ + 8Ψ + 16Ψ/p``.  Each layer's gradient is
  *reduce-scattered* (rank r receives the batch's gradient of its chunk), rank r updates its chunk of the
  parameters with Adam, and an *all-gather* hands every rank the whole updated layer;
* **stage 2**: the gradients too, ``8Ψ + 24Ψ/p``: the moment backward has a layer's gradient it is
  reduce-scattered, and all but the rank's chunk dropped;
* **stage 3** (PyTorch's FSDP): the parameters too, ``32Ψ/p``: before a layer's forward, and again before its
  backward, an all-gather assembles it, and it is dropped after use.

Stage 0 here is plain data parallelism (an all-reduce per layer), for comparison.  A reduce-scatter and an
all-gather are the ring all-reduce cut in two (:func:`~course.parallel.collectives.ring_reduce_scatter`,
:func:`~course.parallel.collectives.ring_all_gather`), so stages 1 and 2 send what data parallelism sends;
stage 3 adds one all-gather per layer in the backward: 1.5× the bytes.

What a rank holds is kept in :class:`Holdings` (arrays by name: its peak is *measured*, the sum of the
``nbytes`` of what it held at once); activations are left out (the same in every stage), and so are the
collectives' own buffers.  One rank's step is a generator, :func:`rank_step`: it *yields* each collective
it takes part in and is sent its result, so the very same code runs in this process (:func:`simulate_sharded`,
p generators in lockstep on the simulated ring, every byte counted) and on MPI ranks (the course's ring
over ``Sendrecv``, see :func:`course.parallel.runs.sharded_train`).

>>> x, y = np.random.default_rng(0).standard_normal((6, 4)), np.arange(6) % 3
>>> out = simulate_sharded(3, 2, [4, 8, 3], x, y, steps=2, lr=0.01)
>>> [q.shape for q in out["params"]], out["held_bytes_per_rank"]   # 32 bytes per owned number: 33 and 34
([(4, 8), (8,), (8, 3), (3,)], [1056, 1088])
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..arguments import Given, OneOf, Real, Whole, Wholes, arguments
from ..backprop.layers import ACTIVATIONS, MLP, softmax_cross_entropy, softmax_cross_entropy_backward
from ..backprop.optimizers import adam_step
from ..errors import BadInputError, whole_number
from ..limits import require_fits
from .collectives import chunk_bounds, ring_all_gather, ring_allreduce, ring_reduce_scatter, validate_workers
from .data_parallel import require_batch_splits, shard, validate_sizes
from .ring_mpi import ring_all_gather_mpi, ring_allreduce_mpi, ring_reduce_scatter_mpi

__all__ = ["STAGES", "ITEMSIZE", "require_adam_arrays", "adam_update", "layer_lengths", "Holdings", "Collective",
           "ZeroRank", "rank_step", "drive", "mpi_collective", "simulated_collective", "simulate_sharded",
           "single_process_adam", "validate_stage", "validate_data", "require_sharded_fits", "TRAIN_RULES",
           "assemble"]

STAGES = (0, 1, 2, 3)
ITEMSIZE = 8                      # float64: parameters, gradients and Adam's moments alike

#: A rank's step: yields the collectives it takes part in, is sent their results, returns its shard's loss.
ZeroStep = Generator["Collective", np.ndarray, float]


# ---------------------------------------------------------------------------- Adam, as torch.optim.Adam

def require_adam_arrays(param: Any, grad: Any, m: Any, v: Any) -> None:
    """Refuse what one Adam step cannot update in place: four float arrays of one shape, ``param``, ``m`` and
    ``v`` writable."""
    arrays = {"param": param, "grad": grad, "m": m, "v": v}
    for name, a in arrays.items():
        if not isinstance(a, np.ndarray) or a.dtype.kind != "f":
            raise BadInputError(f"adam_update: {name} must be a numpy array of floats, got "
                                f"{type(a).__name__} {getattr(a, 'dtype', '')}")
    shapes = {name: a.shape for name, a in arrays.items()}
    if len(set(shapes.values())) != 1:
        raise BadInputError(f"adam_update: param, grad, m and v must have one shape, got {shapes}: update a chunk "
                            "with that chunk's gradient and moments")
    for name in ("param", "m", "v"):
        if not arrays[name].flags.writeable:
            raise BadInputError(f"adam_update updates {name} in place, but it is read-only: pass a copy")


@arguments(t=Whole(hint="Adam's steps count from 1"), lr=Real(above=0, hint="the step size"),
           beta1=Real(lo=0, hi=1 - 1e-12), beta2=Real(lo=0, hi=1 - 1e-12), eps=Real(above=0),
           then=require_adam_arrays)
def adam_update(param: np.ndarray, grad: np.ndarray, m: np.ndarray, v: np.ndarray, t: int, lr: float,
                beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8) -> None:
    """One Adam step, in place on ``param``, ``m`` and ``v`` (``t`` counts steps from 1), its arrays checked at
    the door: lesson 01's :func:`~course.backprop.optimizers.adam_step` (``torch.optim.Adam`` with its defaults).
    Elementwise, so a shard updates alone.

    >>> w, m, v = np.ones(2), np.zeros(2), np.zeros(2)
    >>> adam_update(w, np.array([0.5, -2.0]), m, v, t=1, lr=0.1); w.round(6).tolist()
    [0.9, 1.1]
    """
    adam_step(param, grad, m, v, t, lr, beta1, beta2, eps)


# ---------------------------------------------------------------------------- what a rank holds

@arguments(sizes=Wholes(min_len=2, hint="the layer widths, e.g. [4, 8, 3]"))
def layer_lengths(sizes: Sequence[int]) -> list[int]:
    """Numbers in each Linear layer's flat vector ``[W.ravel(), b]``: ``n_in * n_out + n_out``.

    >>> layer_lengths([4, 8, 3])
    [40, 27]
    """
    return [n_in * n_out + n_out for n_in, n_out in zip(sizes[:-1], sizes[1:])]


class Holdings:
    """The arrays a rank holds, by name: ``now`` and ``peak`` are the sums of their ``nbytes`` (the model-state
    counterpart of lesson 01's :class:`~course.backprop.memory.ActivationLedger`).  Holding a name again
    replaces its array; the rank keeps no other reference, so what is dropped here is freed."""

    def __init__(self) -> None:
        self.arrays: dict[tuple[str, int], np.ndarray] = {}
        self.now, self.peak = 0, 0

    def hold(self, name: tuple[str, int], a: np.ndarray) -> None:
        if name in self.arrays:
            self.drop(name)
        self.arrays[name] = a
        self.now += int(a.nbytes)
        self.peak = max(self.peak, self.now)

    def drop(self, name: tuple[str, int]) -> None:
        self.now -= int(self.arrays.pop(name).nbytes)

    def __getitem__(self, name: tuple[str, int]) -> np.ndarray:
        return self.arrays[name]


@dataclass
class Collective:
    """What a rank asks of the others: ``"all-reduce"`` or ``"reduce-scatter"`` of ``data`` (its whole
    n-vector), or ``"all-gather"`` of ``data`` (its chunk of the n-vector)."""

    kind: str
    data: np.ndarray
    n: int

    def __post_init__(self) -> None:
        require_collective(self)


COLLECTIVES = ("all-reduce", "reduce-scatter", "all-gather")


def require_collective(c: Collective) -> None:
    """Refuse a collective no ring runs: a kind outside :data:`COLLECTIVES`, data that is no float vector, a
    vector length that is no whole number."""
    if c.kind not in COLLECTIVES:
        raise BadInputError(f"a collective's kind must be one of {', '.join(COLLECTIVES)}; got {c.kind!r:.60}")
    if not isinstance(c.data, np.ndarray) or c.data.ndim != 1 or c.data.dtype.kind != "f":
        raise BadInputError(f"a collective's data must be a 1-D numpy array of floats, got {type(c.data).__name__} "
                            f"{getattr(c.data, 'shape', '')}")
    whole_number("n", c.n, hint="the length of the whole vector")


def validate_rank(state: Any) -> ZeroRank:
    if not isinstance(state, ZeroRank):
        raise BadInputError(f"state must be a ZeroRank (one rank's holdings), got {type(state).__name__}")
    return state


def validate_collective(c: Any) -> Collective:
    if not isinstance(c, Collective):
        raise BadInputError(f"c must be a Collective (what a rank's step yields), got {type(c).__name__}")
    return c


def validate_asks(asks: Any) -> list[Collective]:
    """``asks`` as a list of one :class:`Collective` per rank, all of one kind and one vector length."""
    if isinstance(asks, (str, bytes)) or not isinstance(asks, Sequence) or not asks or \
            not all(isinstance(a, Collective) for a in asks):
        raise BadInputError(f"asks must be a list of one Collective per rank, got {type(asks).__name__}")
    if len({(a.kind, a.n) for a in asks}) != 1:
        raise BadInputError(f"every rank must ask for the same collective of the same vector; got "
                            f"{sorted({(a.kind, a.n) for a in asks})}")
    return list(asks)


def validate_stage(stage: Any) -> int:
    """``stage`` as an int, or a clear error: 0 (plain data parallelism), 1, 2 or 3 (FSDP)."""
    if isinstance(stage, bool) or not isinstance(stage, (int, np.integer)) or int(stage) not in STAGES:
        raise BadInputError(f"stage must be 0 (plain data parallelism), 1 (optimizer state sharded), 2 (and "
                            f"gradients) or 3 (and parameters: FSDP); got {stage!r}")
    return int(stage)


class ZeroRank:
    """Rank ``rank`` of ``p`` at ZeRO stage ``stage``: its :class:`Holdings` and its step count.

    Every rank builds lesson 01's ``MLP(sizes, float64, seed)`` and keeps what its stage keeps: every layer's
    flat parameters (``("param", j)``; stage 3: its chunk of them), Adam's moments (``("m", j)``, ``("v", j)``;
    from stage 1: its chunk), and after a backward pass the gradients (``("grad", j)``; from stage 2: its chunk).
    """

    @arguments(stage=Given(validate_stage), sizes=Given(validate_sizes), p=Given(validate_workers),
               rank=Whole(lo=0, hi="p - 1", hint="ranks count from 0"), seed=Whole(0, hint="a whole number such as 0"),
               activation=OneOf(*ACTIVATIONS))
    def __init__(self, stage: int, sizes: Sequence[int], p: int, rank: int, seed: int = 0,
                 activation: str = "relu"):
        self.stage, self.sizes, self.p, self.rank, self.t = stage, list(sizes), p, rank, 0
        self.act = ACTIVATIONS[activation]()
        self.lengths = layer_lengths(self.sizes)
        self.chunks = [tuple(int(b) for b in chunk_bounds(n, p)[rank:rank + 2]) for n in self.lengths]
        self.held = Holdings()
        model = MLP(self.sizes, activation=activation, dtype="float64", seed=seed)
        for j, layer in enumerate(model.linear_layers()):
            flat, (lo, hi) = np.concatenate([layer.W.ravel(), layer.b]), self.chunks[j]
            self.held.hold(("param", j), flat[lo:hi].copy() if stage == 3 else flat)
            mine = flat.size if stage == 0 else hi - lo
            self.held.hold(("m", j), np.zeros(mine))
            self.held.hold(("v", j), np.zeros(mine))

    def layer(self, j: int) -> Generator[Collective, np.ndarray, tuple[np.ndarray, np.ndarray]]:
        """Layer j's ``(W, b)``, views of its flat vector; stage 3 all-gathers it first (and holds it)."""
        flat = self.held["param", j]
        if self.stage == 3:
            flat = yield Collective("all-gather", flat, self.lengths[j])
            self.held.hold(("gathered", j), flat)
        n_in, n_out = self.sizes[j], self.sizes[j + 1]
        return flat[:n_in * n_out].reshape(n_in, n_out), flat[n_in * n_out:]

    def release(self, j: int) -> None:
        """Stage 3: drop layer j's gathered parameters (the other stages keep the whole layer)."""
        if self.stage == 3:
            self.held.drop(("gathered", j))

    def keep_gradient(self, j: int, grad: np.ndarray) -> Generator[Collective, np.ndarray, None]:
        """Layer j's flat gradient from this rank's shard of the batch, combined over the ranks: all-reduced
        (stage 0); reduce-scattered into the rank's chunk of it (stage 1); reduce-scattered and the rest
        dropped (stages 2 and 3)."""
        n, (lo, hi) = self.lengths[j], self.chunks[j]
        if self.stage == 0:
            self.held.hold(("grad", j), grad)
            np.copyto(grad, (yield Collective("all-reduce", grad, n)))
        elif self.stage == 1:
            self.held.hold(("grad", j), grad)
            grad[lo:hi] = yield Collective("reduce-scatter", grad, n)
        else:
            self.held.hold(("layer grad", j), grad)
            self.held.hold(("grad", j), (yield Collective("reduce-scatter", grad, n)))
            self.held.drop(("layer grad", j))

    def update(self, lr: float) -> Generator[Collective, np.ndarray, None]:
        """Adam on what this rank owns (stage 0: everything); stages 1 and 2 then all-gather each layer."""
        self.t += 1
        for j in range(len(self.lengths)):
            (lo, hi), param, grad = self.chunks[j], self.held["param", j], self.held["grad", j]
            mine = param[lo:hi] if self.stage in (1, 2) else param
            adam_update(mine, grad[lo:hi] if self.stage == 1 else grad, self.held["m", j], self.held["v", j],
                        self.t, lr)
            if self.stage in (1, 2):
                np.copyto(param, (yield Collective("all-gather", mine, self.lengths[j])))

    def zero_grad(self) -> None:
        """Drop the gradients of the last step (PyTorch's ``zero_grad(set_to_none=True)``)."""
        for j in range(len(self.lengths)):
            if ("grad", j) in self.held.arrays:
                self.held.drop(("grad", j))

    def own_params(self) -> list[np.ndarray]:
        """This rank's chunk of each layer's flat parameters (copies)."""
        return [(self.held["param", j] if self.stage == 3 else self.held["param", j][lo:hi]).copy()
                for j, (lo, hi) in enumerate(self.chunks)]


@arguments(state=Given(validate_rank), weight=Real(lo=0, hi=1, hint="the shard's share of the batch"),
           lr=Real(above=0, hint="Adam's step size"))
def rank_step(state: ZeroRank, x: np.ndarray, y: np.ndarray, weight: float, lr: float) -> ZeroStep:
    """One training step on one rank: forward and backward on its shard ``(x, y)`` of the batch, the loss's
    gradient times ``weight`` (the shard's share of the batch, so the ranks' gradients *sum* to the
    batch's), the collectives of its stage (each a ``yield``), Adam.  Returns the shard's mean loss."""
    state.zero_grad()
    h, inputs, act_caches = x, [], []
    for j in range(len(state.lengths)):                  # forward, layer by layer
        W, b = yield from state.layer(j)
        inputs.append(h)
        h = h @ W + b
        state.release(j)
        if j < len(state.lengths) - 1:
            h, cache = state.act.forward(h)
            act_caches.append(cache)
    loss, loss_cache = softmax_cross_entropy(h, y)
    g = softmax_cross_entropy_backward(loss_cache) * weight
    for j in reversed(range(len(state.lengths))):        # backward: each layer's gradient, then its collective
        W, b = yield from state.layer(j)
        grad = np.concatenate([(inputs[j].T @ g).ravel(), g.sum(axis=0)])
        if j > 0:
            g = state.act.backward(g @ W.T, act_caches[j - 1])
        state.release(j)
        yield from state.keep_gradient(j, grad)
    yield from state.update(lr)
    return float(loss)


def require_drivable(step: Any, collective: Any) -> None:
    if not (hasattr(step, "send") and hasattr(step, "__next__")):
        raise BadInputError(f"step must be a rank's step, rank_step(...) (a generator), got {type(step).__name__}")
    if not callable(collective):
        raise BadInputError(f"collective must be a function of one Collective, got {type(collective).__name__}")


@arguments(then=require_drivable)
def drive(step: ZeroStep, collective: Callable[[Collective], np.ndarray]) -> float:
    """Run one rank's :func:`rank_step` alone, each collective answered by ``collective(c)`` (on MPI: the
    course's ring on the rank's communicator).  Returns the step's loss."""
    try:
        ask = next(step)
        while True:
            ask = step.send(collective(ask))
    except StopIteration as done:
        return done.value


@arguments(c=Given(validate_collective))
def mpi_collective(comm: Any, c: Collective) -> np.ndarray:
    """One collective answered on MPI ranks by the course's ring over ``comm``
    (:mod:`course.parallel.ring_mpi`): what :func:`drive` is given on each rank."""
    if c.kind == "all-reduce":
        return ring_allreduce_mpi(comm, c.data)
    if c.kind == "reduce-scatter":
        return ring_reduce_scatter_mpi(comm, c.data)
    return ring_all_gather_mpi(comm, c.data, c.n)


@arguments(asks=Given(validate_asks))
def simulated_collective(asks: Sequence[Collective]) -> tuple[list[np.ndarray], np.ndarray]:
    """Every rank's answer to one collective, from the simulated ring, and the bytes each rank sent."""
    kind, n, p = asks[0].kind, asks[0].n, len(asks)
    bounds = chunk_bounds(n, p)
    if kind == "all-gather":
        x = np.zeros((p, n))
        for r, a in enumerate(asks):
            x[r, bounds[r]:bounds[r + 1]] = a.data
        run = ring_all_gather(x, trace=False)
        return list(run.result), run.bytes_sent()
    run = (ring_allreduce if kind == "all-reduce" else ring_reduce_scatter)(np.stack([a.data for a in asks]),
                                                                            trace=False)
    if kind == "all-reduce":
        return list(run.result), run.bytes_sent()
    return [run.result[r, bounds[r]:bounds[r + 1]].copy() for r in range(p)], run.bytes_sent()


def require_chunks(sizes: list[int], chunks: Any) -> None:
    lengths = [n_in * n_out + n_out for n_in, n_out in zip(sizes[:-1], sizes[1:])]
    try:
        got = [sum(int(np.size(c[j])) for c in chunks) for j in range(len(lengths))]
    except (TypeError, IndexError, KeyError):
        got = None
    if isinstance(chunks, (str, bytes)) or got != lengths:
        raise BadInputError(f"chunks must hold, per rank, one chunk of each layer's flat vector, adding up to "
                            f"{lengths} numbers; got {got if got is not None else type(chunks).__name__}")


@arguments(sizes=Wholes(min_len=2, hint="the layer widths"), then=require_chunks)
def assemble(sizes: Sequence[int], chunks: Sequence[Sequence[np.ndarray]]) -> list[np.ndarray]:
    """``[W1, b1, W2, b2, ...]`` (``MLP.parameters()`` order) from every rank's own chunks (``chunks[r][j]``)."""
    out = []
    for j, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        flat = np.concatenate([c[j] for c in chunks])
        out += [flat[:n_in * n_out].reshape(n_in, n_out), flat[n_in * n_out:]]
    return out


# ---------------------------------------------------------------------------- the door, the engines, the oracle

def validate_data(sizes: list[int], x: Any, y: Any, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """``(xs, ys)`` of shapes ``(steps, batch, sizes[0])`` and ``(steps, batch)``, or a clear error.  ``x`` is
    one batch ``(batch, sizes[0])``, used at every step, or one per step ``(steps, batch, sizes[0])``."""
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim == 2:
        x, y = x[None], y[None]
    if (x.ndim != 3 or x.shape[0] not in (1, steps) or x.shape[2] != sizes[0] or x.shape[1] < 1
            or x.dtype.kind not in "fiu" or not np.isfinite(x).all()):
        raise BadInputError(f"x must hold finite numbers, one batch (batch, {sizes[0]}) or one per step "
                            f"({steps}, batch, {sizes[0]}); got shape {x.shape}, dtype {x.dtype}")
    if y.shape != x.shape[:2] or y.dtype.kind not in "iu" or not (0 <= y.min() and y.max() < sizes[-1]):
        raise BadInputError(f"y must hold integer labels 0 .. {sizes[-1] - 1}, one per row of x (shape "
                            f"{x.shape[:2]}); got shape {y.shape}, dtype {y.dtype}")
    shape = (steps,) + x.shape[1:]
    return np.broadcast_to(x.astype(np.float64), shape), np.broadcast_to(y.astype(np.int64), shape[:2])


def require_sharded_fits(p: int, sizes: list[int], x: Any) -> None:
    """Refuse a batch the p ranks cannot share, or p ranks' model states that would not fit in memory."""
    require_batch_splits(int(np.shape(x)[-2]) if np.ndim(x) in (2, 3) else p, p)
    require_fits(ITEMSIZE * (4 * sum(layer_lengths(sizes)) * p + 3 * np.size(x)), "cpu",
                 what=f"{p} ranks' model states for an MLP {sizes}")


#: The rules every door of ZeRO training declares (:func:`simulate_sharded`, ``runs.sharded_train``).
TRAIN_RULES = dict(stage=Given(validate_stage), p=Given(validate_workers), sizes=Given(validate_sizes),
                   steps=Whole(hint="training steps"), lr=Real(above=0, hint="Adam's step size, e.g. 0.01"),
                   seed=Whole(0, hint="a whole number such as 0"), activation=OneOf(*ACTIVATIONS))


@arguments(**TRAIN_RULES, then=require_sharded_fits)
def simulate_sharded(stage: int, p: int, sizes: Sequence[int], x: Any, y: Any, steps: int, lr: float,
                     seed: int = 0, activation: str = "relu") -> dict:
    """Train with ZeRO ``stage`` on p ranks simulated in this process (``engine="simulated"`` of
    :func:`course.parallel.runs.sharded_train`, which describes the dict returned)."""
    xs, ys = validate_data(sizes, x, y, steps)
    ranks = [ZeroRank(stage, sizes, p, r, seed, activation) for r in range(p)]
    batch = xs.shape[1]
    rows = [shard(batch, p, r) for r in range(p)]
    weights = [(s.stop - s.start) / batch for s in rows]
    sent, losses = np.zeros(p), []
    for x_t, y_t in zip(xs, ys):
        steps_ = [rank_step(k, x_t[s], y_t[s], w, lr) for k, s, w in zip(ranks, rows, weights)]
        asks, done = [next(s) for s in steps_], []
        while not done:
            answers, by_rank = simulated_collective(asks)
            sent += by_rank
            asks = []
            for s, a in zip(steps_, answers):
                try:
                    asks.append(s.send(a))
                except StopIteration as end:
                    done.append(end.value)
        losses.append(float(sum(w * loss for w, loss in zip(weights, done))))
    full = [[k.held["param", j] for j in range(len(k.lengths))] for k in ranks] if stage < 3 else None
    return {"stage": stage, "p": p, "engine": "simulated", "initial_params": MLP(sizes, activation=activation,
            dtype="float64", seed=seed).parameters(), "params": assemble(sizes, [k.own_params() for k in ranks]),
            "losses": losses, "peak_bytes_per_rank": [k.held.peak for k in ranks],
            "held_bytes_per_rank": [k.held.now for k in ranks], "bytes_sent_per_rank": (sent / steps).tolist(),
            "ranks_agree": None if full is None else all(np.array_equal(a, b) for f in full
                                                          for a, b in zip(f, full[0]))}


@arguments(sizes=Given(validate_sizes), steps=Whole(hint="training steps"),
           lr=Real(above=0, hint="Adam's step size, e.g. 0.01"), seed=Whole(0, hint="a whole number such as 0"),
           activation=OneOf(*ACTIVATIONS))
def single_process_adam(sizes: Sequence[int], x: Any, y: Any, steps: int, lr: float, seed: int = 0,
                        activation: str = "relu") -> dict:
    """The oracle: lesson 01's unsplit ``MLP`` (float64) on the whole batch, :func:`adam_update` on each of
    its parameters.  Returns ``{"params": [W1, b1, ...], "losses": [...]}``."""
    xs, ys = validate_data(sizes, x, y, steps)
    model = MLP(sizes, activation=activation, dtype="float64", seed=seed)
    moments = [(np.zeros_like(q), np.zeros_like(q)) for q in model.parameters()]
    losses = []
    for t, (x_t, y_t) in enumerate(zip(xs, ys), start=1):
        loss, cache = softmax_cross_entropy(model.forward(x_t), y_t)
        model.backward(softmax_cross_entropy_backward(cache))
        for q, g, (m, v) in zip(model.parameters(), model.gradients(), moments):
            adam_update(q, g, m, v, t, lr)
        losses.append(float(loss))
    return {"params": [q.copy() for q in model.parameters()], "losses": losses}
