"""Lesson 01, the fast training step: the same SGD step as :class:`~course.backprop.MLP`, a ladder
of rungs that each remove one host cost.

A ReLU MLP's step at batch 256 does little arithmetic between its GEMMs, so on a GPU its time is
mostly the host's: launching dozens of small kernels and waiting for reads back.  The rungs:

* ``"eager"``: the teaching :meth:`MLP.train_step` itself (labels checked and the loss read back
  every step);
* ``"no_readback"``: the same layers, no device→host read per step: labels checked once when the
  batch (or dataset) is loaded, the loss kept on the device and read only by :meth:`FastStep.loss`;
  the update ``p -= lr·g`` is one operation over one flat buffer that holds every parameter;
* ``"fused"``: the small operations fused into the kernels of :mod:`~course.backprop.step_kernels`
  (bias + ReLU, ReLU mask + bias gradient, softmax–cross-entropy with its gradient, the mean loss,
  SGD over the flat buffer); GEMMs stay cuBLAS's, called through the course's own handle
  (:func:`course.capture.matmul_into`; NumPy's BLAS on a CPU, with the kernels' NumPy versions);
* ``"graph"``: the fused step captured once as a CUDA graph and replayed: one launch per step
  (needs a GPU).  CuPy's own ``matmul`` cannot be captured (its cuBLAS wrapper refuses a capturing
  stream), which is why rung (c) multiplies through the course's handle.  Where the capture still
  fails (an old driver, a library that refuses), the step says why once, runs as rung (c), and
  :attr:`FastStep.title` says so.

**Precision** (``precision=``, :data:`STEP_PRECISIONS`) is a second axis of rungs (c) and (d); the eager rungs are
float32 only:

* ``"float32"`` (the default): strict float32, the GEMMs as :func:`~course.capture.matmul_into` makes them;
* ``"tf32"``: the same step, its GEMMs on the tensor cores with TF32 inputs (``CUBLAS_COMPUTE_32F_FAST_TF32``);
* ``"bfloat16"``, ``"float16"``, ``"float16 scaled"``: the numerics of :mod:`course.backprop.mixed` -- float32
  master weights rounded to the compute type at the start of each step, products with 16-bit inputs and float32
  accumulation (``cublasGemmEx``), the loss and its softmax in float32, the update on the masters
  (:mod:`~course.backprop.mixed_kernels`).  ``"float16 scaled"`` adds dynamic loss scaling decided on the device:
  a flag set by any inf or NaN gradient, the update skipped and the scale halved (or doubled after a run of clean
  steps) by kernels, so a captured graph holds the decision and nothing is read back.

Every rung computes the batch's mean loss on the device, as a framework's step does; :meth:`FastStep.loss`
reads it back (the one read, and only when asked).

Every rung keeps the parameters as views of one flat buffer (``params``) and the gradients of
another (``grads``), and starts from a copy of the given model's weights (the model is untouched).

>>> import numpy as np
>>> from course.backprop import MLP
>>> teacher = MLP([6, 5, 3], dtype="float64", seed=1)
>>> x, y = np.ones((4, 6)), np.array([0, 1, 2, 1])
>>> fast = FastStep(teacher, "fused", batch=4, lr=0.1)
>>> fast.load(x, y)
>>> fast.step()
>>> abs(fast.loss() - teacher.train_step(x, y, lr=0.1)) < 1e-12
True
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..arguments import OneOf, Whole, arguments
from ..capture import capture_graph, matmul_into
from ..devices import cupy_module, to_numpy
from ..errors import BadInputError
from .layers import MLP, Linear
from .mixed_kernels import CT_SUFFIX, MIXED_REFERENCE, mixed_cupy_kernels, storage_dtype
from .step_kernels import REFERENCE, cupy_kernels
from .validate import validate_fast_step, validate_step_batch

__all__ = ["RUNGS", "RUNG_TITLES", "STEP_PRECISIONS", "PRECISION_RUNGS", "FastStep", "declared_counts"]

RUNGS = ("eager", "no_readback", "fused", "graph")
RUNG_TITLES = {"eager": "(a) eager: the teaching step", "no_readback": "(b) no read back per step",
               "fused": "(c) fused kernels, one flat SGD", "graph": "(d) CUDA graph of (c), replayed"}
#: The precisions of the fast step (rungs (c) and (d)); "float16" is unscaled, for the lesson's curves.
STEP_PRECISIONS = ("float32", "tf32", "bfloat16", "float16", "float16 scaled")
#: precision -> the rungs it applies to: the eager rungs are the teaching layers' float32 arithmetic.
PRECISION_RUNGS = {p: (RUNGS if p == "float32" else ("fused", "graph")) for p in STEP_PRECISIONS}
_COMPUTE = {"bfloat16": "bfloat16", "float16": "float16", "float16 scaled": "float16"}


@arguments(rung=OneOf(*RUNGS), n_layers=Whole(hint="the model's Linear layers"), precision=OneOf(*STEP_PRECISIONS))
def declared_counts(rung: str, n_layers: int, precision: str = "float32") -> dict | None:
    """Kernel launches and reads back per step that a rung is built to make, for ``n_layers`` Linear
    layers (GEMMs counted one launch each); None for the rungs whose count is only measured.  A 16-bit
    precision adds the masters' cast; "float16 scaled" also the overflow check and the scale's update."""
    # forward: L GEMMs, L-1 bias_relu, 1 softmax_xent, 1 mean_loss; backward: L mask_bias_grad, L dW + L-1 dx
    # GEMMs; 1 sgd_flat
    kernels = 5 * n_layers + 1 + (precision in _COMPUTE) + 2 * (precision == "float16 scaled")
    if rung == "fused":
        return {"launches": kernels, "reads": 0}
    if rung == "graph":
        return {"launches": 1, "reads": 0, "kernels": kernels}
    return None


def _validate_step(model: Any, rung: Any, batch: Any, lr: Any, precision: Any, loss_scale: Any,
                   growth_interval: Any) -> int:
    """The batch of a fast step, checked with its precision: what rungs it applies to, float32 masters."""
    if not isinstance(precision, str) or precision not in STEP_PRECISIONS:
        raise BadInputError(f"precision must be one of {list(STEP_PRECISIONS)}, got {precision!r:.60}")
    batch = validate_fast_step(model, rung, batch, lr, MLP, RUNGS)
    if rung not in PRECISION_RUNGS[precision]:
        raise BadInputError(f"precision {precision!r} is a precision of rungs {list(PRECISION_RUNGS[precision])}: "
                            f"rung {rung!r} is the teaching layers' own float32 arithmetic (use rung 'fused' or "
                            "'graph', or precision 'float32')")
    if precision != "float32" and model.dtype != np.float32:
        raise BadInputError(f"precision {precision!r} keeps float32 master weights; this model is {model.dtype.name} "
                            "(build it with dtype='float32')")
    if isinstance(loss_scale, bool) or not isinstance(loss_scale, (int, float)) or not 0 < loss_scale < 2.0**127:
        raise BadInputError(f"loss_scale must be a positive number below 2**127, e.g. 2.0**16; got {loss_scale!r:.60}")
    if isinstance(growth_interval, bool) or not isinstance(growth_interval, int) or growth_interval < 1:
        raise BadInputError(f"growth_interval must be a whole number of clean steps >= 1, got {growth_interval!r:.60}")
    return batch


def _copy_into(dst: Any, src: Any) -> None:
    dst[...] = src


class FastStep:
    """One SGD step of a copy of ``model`` (ReLU, softmax cross-entropy) at one rung of the ladder.

    Parameters
    ----------
    model : a ReLU :class:`MLP`; its weights are copied, the model itself is left alone.
    rung : one of :data:`RUNGS`.
    batch : the rows of every batch :meth:`load` takes (the buffers are made for it).
    lr : the learning rate, fixed (a captured graph holds it).
    precision : one of :data:`STEP_PRECISIONS` (see the module's docstring; :data:`PRECISION_RUNGS` says where).
    loss_scale, growth_interval : "float16 scaled"'s dynamic loss scale: its first value, and the clean steps
        after which it doubles (as :func:`~course.backprop.mixed.mixed_precision_train`'s default scaler).
    namespace : the array namespace to allocate with (default the model's device's); a
        :class:`~course.backprop.counting.CountingNumpy` counts what a step asks for.

    Use: :meth:`load` a batch (checked once), :meth:`step` any number of times, :meth:`loss` when
    the number is wanted.
    """

    def __init__(self, model: MLP, rung: str = "fused", batch: int = 256, lr: float = 1e-3,
                 namespace: Any = None, precision: str = "float32", loss_scale: float = 2.0 ** 16,
                 growth_interval: int = 200):
        self.batch = _validate_step(model, rung, batch, lr, precision, loss_scale, growth_interval)
        self.rung, self.lr, self.precision = rung, float(lr), precision
        self.growth_interval = int(growth_interval)
        #: the GEMMs' named precision (None: matmul_into's default, strict float32 unless CUPY_TF32 says so)
        self._gemm = {"float32": None, "tf32": "tf32"}.get(precision, _COMPUTE.get(precision))
        self.sizes, self.device, self.dtype = list(model.sizes), model.device, model.dtype
        self.net = MLP(model.sizes, activation=model.activation, dtype=model.dtype, device=model.device)
        xp = namespace if namespace is not None else self.net.xp
        self.xp = self.net.xp = xp
        self.linears: list[Linear] = self.net.linear_layers()
        n = sum(int(p.size) for p in model.parameters())
        self.params = xp.empty(n, dtype=self.dtype)     # every W and b, one after the other
        self.grads = xp.zeros(n, dtype=self.dtype)
        self._update = xp.empty(n, dtype=self.dtype)
        off = 0
        for lin, src in zip(self.linears, model.linear_layers()):
            for name, grad in (("W", "dW"), ("b", "db")):
                p = getattr(src, name)
                view, gview = (a[off:off + p.size].reshape(p.shape) for a in (self.params, self.grads))
                _copy_into(view, xp.asarray(to_numpy(p)))
                setattr(lin, name, view)
                setattr(lin, grad, gview)
                off += int(p.size)
        rows, dt = self.batch, self.dtype
        self._x = xp.zeros((rows, self.sizes[0]), dtype=dt)
        self._y = xp.zeros(rows, dtype=np.int64)
        self._onehot = xp.zeros((rows, self.sizes[-1]), dtype=dt)
        self._z = [xp.empty((rows, w), dtype=dt) for w in self.sizes[1:]]      # each layer's output
        self._g = [xp.empty((rows, w), dtype=dt) for w in self.sizes[1:]]      # d loss / d that output
        self._mask = [xp.empty((rows, w), dtype=bool) for w in self.sizes[1:]]
        self._row_loss = xp.zeros(rows, dtype=dt)
        self._loss = xp.zeros(1, dtype=dt)                                     # the batch's mean loss
        self._bad = xp.zeros(1, dtype=np.int32)
        self._eager_loss = math.nan
        if model.device == "gpu":
            self.kernels = cupy_kernels()
        else:
            self.kernels = {k: _on_plain_arrays(f, k, getattr(xp, "counter", None)) for k, f in REFERENCE.items()}
        self._compute = _COMPUTE.get(precision)
        if self._compute is not None:
            self._mixed_buffers(xp, n, float(loss_scale) if precision == "float16 scaled" else 1.0)
        self._graph = None
        #: why rung "graph" runs uncaptured here (None: it is captured, or another rung)
        self.capture_failed: str | None = None
        self._loaded = False
        self._steps = 0

    def _mixed_buffers(self, xp: Any, n: int, scale: float) -> None:
        """A 16-bit step's own buffers: the weights rounded from the masters, the gradients, the activations,
        and the loss scale's state on the device."""
        sd, rows = storage_dtype(self._compute), self.batch
        self._params_ct, self._grads_ct = xp.empty(n, dtype=sd), xp.zeros(n, dtype=sd)
        self._Wc, self._bc, self._dWc, self._dbc = [], [], [], []
        off = 0
        for lin in self.linears:
            for name, keep, gkeep in (("W", self._Wc, self._dWc), ("b", self._bc, self._dbc)):
                shape, size = getattr(lin, name).shape, int(getattr(lin, name).size)
                keep.append(self._params_ct[off:off + size].reshape(shape))
                gkeep.append(self._grads_ct[off:off + size].reshape(shape))
                off += size
        self._xc = xp.zeros((rows, self.sizes[0]), dtype=sd)
        self._z = [xp.zeros((rows, w), dtype=sd) for w in self.sizes[1:]]
        self._g = [xp.zeros((rows, w), dtype=sd) for w in self.sizes[1:]]
        self._scale = xp.zeros(1, dtype=np.float32)
        self._scale.fill(scale)
        self._clean, self._found = xp.zeros(1, dtype=np.int32), xp.zeros(1, dtype=np.int32)
        self._skipped = xp.zeros(2, dtype=np.int32)             # [the last step skipped?, steps skipped so far]
        if self.device == "gpu":
            self.mixed_kernels = mixed_cupy_kernels(self._compute)
        else:
            suffix, counter = CT_SUFFIX[self._compute], getattr(xp, "counter", None)
            self.mixed_kernels = {k: _on_plain_arrays(f, f"{k}_{suffix}" if k != "scale_update" else k, counter)
                                  for k, f in MIXED_REFERENCE.items()}

    # ------------------------------------------------------------ data
    def load(self, x: Any, y: Any, check: bool = True) -> None:
        """Copy a batch into the step's own buffers.  ``check``: validate the labels here (one read
        back); pass False for slices of a dataset whose labels were checked once as a whole."""
        x, y = validate_step_batch(self, x, y, check)
        _copy_into(self._x, x)
        _copy_into(self._y, y)
        self._bad.fill(0)                                       # the flag speaks of the batch loaded now
        if self._compute is not None:
            self.mixed_kernels["cast_to"](self._x, self._xc)    # the inputs in the compute type, once per batch
        if self.rung == "no_readback":
            xp = self.xp
            _copy_into(self._onehot, xp.equal(xp.arange(self.sizes[-1])[None, :], self._y[:, None]))
        self._loaded = True
        if self.rung == "graph" and self._graph is None and self.capture_failed is None:
            self._capture()

    # ------------------------------------------------------------ the rungs
    def step(self) -> None:
        """One SGD step on the loaded batch (no read back, except at rung ``"eager"``)."""
        if not self._loaded:
            raise BadInputError("load a batch first: fast.load(x, y)")
        if self.rung == "eager":
            self._eager_loss = self.net.train_step(self._x, self._y, self.lr)
        elif self.rung == "no_readback":
            self._layers_step()
        elif self.rung == "fused" or self._graph is None:
            self._one_step()
        else:
            self._graph.launch(cupy_module().cuda.get_current_stream())
        self._steps += 1

    def _layers_step(self) -> None:
        """Rung (b): the teaching layers' arithmetic into the step's buffers, the loss on the device, a
        flat update."""
        xp, lin, last, h = self.xp, self.linears, len(self.linears) - 1, self._x
        for j, layer in enumerate(lin):
            h = xp.matmul(h, layer.W, out=self._z[j])
            h += layer.b
            if j < last:
                xp.maximum(h, 0, out=h)                         # the ReLU overwrites its Linear's output
        probs, g = self._g[-1], self._g[-1]
        top = h.max(axis=1, keepdims=True)
        xp.subtract(h, top, out=probs)                          # shifted logits
        picked = (probs * self._onehot).sum(axis=1)             # the label's shifted logit
        xp.exp(probs, out=probs)
        total = probs.sum(axis=1, keepdims=True)
        xp.subtract(xp.log(total[:, 0]), picked, out=self._row_loss)
        xp.mean(self._row_loss, keepdims=True, out=self._loss)
        probs /= total
        xp.subtract(probs, self._onehot, out=g)                 # softmax - one_hot
        g *= 1.0 / self.batch
        for j in range(last, -1, -1):
            g = self._g[j]
            if j < last:                                        # the ReLU's backward: dout · [out > 0]
                xp.multiply(g, xp.greater(self._z[j], 0, out=self._mask[j]), out=g)
            xp.matmul((self._z[j - 1] if j else self._x).T, g, out=lin[j].dW)
            xp.sum(g, axis=0, out=lin[j].db)
            if j:
                xp.matmul(g, lin[j].W.T, out=self._g[j - 1])
        xp.multiply(self.grads, self.lr, out=self._update)
        self.params -= self._update

    def _one_step(self) -> None:
        """Rung (c) at this step's precision."""
        if self._compute is None:
            self._fused_step()
        else:
            self._mixed_step()

    def _fused_step(self) -> None:
        """Rung (c): GEMMs, and one kernel for each thing between them."""
        k, lin, last, gemm = self.kernels, self.linears, len(self.linears) - 1, self._gemm
        h = self._x
        for j, layer in enumerate(lin):
            matmul_into(h, layer.W, self._z[j], gemm)
            if j < last:
                k["bias_relu"](self._z[j], layer.b)
            h = self._z[j]
        k["softmax_xent"](self._z[last], lin[last].b, self._y, self._g[last], self._row_loss, self._bad)
        k["mean_loss"](self._row_loss, self._loss)
        for j in range(last, -1, -1):
            g = self._g[j]
            k["mask_bias_grad"](g, self._z[j] if j < last else g, lin[j].db, j < last)
            matmul_into((self._z[j - 1] if j else self._x).T, g, lin[j].dW, gemm)
            if j:
                matmul_into(g, lin[j].W.T, self._g[j - 1], gemm)
        k["sgd_flat"](self.params, self.grads, self.lr)

    def _mixed_step(self) -> None:
        """Rung (c) in bfloat16 or float16: :func:`course.backprop.mixed`'s step, one kernel per thing between
        the GEMMs, the loss scale's decision on the device."""
        m, last, ct = self.mixed_kernels, len(self.linears) - 1, self._compute
        scaled = self.precision == "float16 scaled"
        m["cast_to"](self.params, self._params_ct)             # the masters, rounded to the compute type
        h = self._xc
        for j in range(last + 1):
            matmul_into(h, self._Wc[j], self._z[j], ct)         # 16-bit inputs, float32 sums, rounded to ct
            if j < last:
                m["bias_relu"](self._z[j], self._bc[j])
            h = self._z[j]
        m["softmax_xent"](self._z[last], self._bc[last], self._y, self._g[last], self._row_loss, self._bad, self._scale)
        self.kernels["mean_loss"](self._row_loss, self._loss)
        for j in range(last, -1, -1):
            g = self._g[j]
            m["mask_bias_grad"](g, self._z[j] if j < last else g, self._dbc[j], j < last)
            matmul_into((self._z[j - 1] if j else self._xc).T, g, self._dWc[j], ct)
            if j:
                matmul_into(g, self._Wc[j].T, self._g[j - 1], ct)
        if scaled:
            m["find_inf"](self._grads_ct, self._scale, self._found)
        m["sgd_masters"](self.params, self._grads_ct, self.lr, self._scale, self._found)
        if scaled:
            m["scale_update"](self._scale, self._clean, self._found, self._skipped, 2.0, 0.5, self.growth_interval)

    def _capture(self) -> None:
        """Rung (d): run the fused step once (compiling, cuBLAS set-up), restore the weights, then
        capture one fused step on a side stream as a CUDA graph; where that fails, say why once and run
        the fused step instead."""
        kept = [self.params] + ([self._scale, self._clean, self._skipped] if self._compute else [])
        before = [a.copy() for a in kept]

        def warm_up() -> None:
            self._one_step()
            for a, b in zip(kept, before):
                _copy_into(a, b)

        captured = capture_graph(self._one_step, what="the training step (rung 'graph')", warmup=warm_up)
        self._graph, self.capture_failed = captured.graph, captured.reason

    @property
    def title(self) -> str:
        """The rung's title, saying so where rung (d) could not be captured and runs as (c)."""
        at = "" if self.precision == "float32" else f", {self.precision}"
        if self.capture_failed:
            return RUNG_TITLES["graph"] + at + " -- NOT captured here, runs as (c)"
        return RUNG_TITLES[self.rung] + at

    # ------------------------------------------------------------ reading back
    def loss(self) -> float:
        """The mean loss of the last step's batch (before its update): the one read back."""
        if self._steps == 0:
            raise BadInputError("no step has run yet: call fast.step() before fast.loss()")
        if self.rung == "eager":
            return self._eager_loss
        if self.rung in ("fused", "graph") and int(self._bad[0]):
            raise BadInputError("a label was out of range in a batch loaded with check=False: labels must lie "
                                f"in 0..{self.sizes[-1] - 1}; check the dataset's labels once before training")
        return float(self._loss[0])

    def loss_scaling(self) -> dict:
        """``{"scale", "skipped_last", "skipped"}``: "float16 scaled"'s loss scale now, whether the last step was
        skipped for an overflow, and how many were; read back from the device (three reads), only when asked."""
        if self.precision != "float16 scaled":
            raise BadInputError(f"precision {self.precision!r} does not scale its loss: only 'float16 scaled' does")
        return {"scale": float(self._scale[0]), "skipped_last": bool(int(self._skipped[0])),
                "skipped": int(self._skipped[1])}

    @property
    def graph(self) -> Any:
        """The captured CUDA graph (rung ``"graph"``, once a batch is loaded), else None."""
        return self._graph

    def parameters(self) -> list:
        """``[W1, b1, W2, b2, ...]``, views of the flat buffer ``params``."""
        return self.net.parameters()


def _on_plain_arrays(fn: Any, name: str, counter: Any) -> Any:
    """A NumPy reference kernel called on plain arrays, counted as one launch (recorded, not run, while a
    counting namespace captures)."""
    def launch(*args: Any) -> None:
        plain = [np.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
        if counter is None:
            fn(*plain)
        else:
            counter.launch(name, lambda: fn(*plain))
    return launch
