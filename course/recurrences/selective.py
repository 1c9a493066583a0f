"""A small selective state-space layer: forward by scan, backward by scan.

In the spirit of Mamba's selective scan (Gu & Dao 2023), cut down to one screen.  For an input
sequence ``x`` of shape ``(T, B, d_in)`` (T steps, a batch of B sequences) and ``n`` channels::

    Δ_t = softplus(x_t W_Δ + c_Δ)             (T, B, n)  how strongly step t writes: input-dependent
    a_t = exp(-Δ_t ⊙ λ),  λ = exp(log_λ) > 0   (T, B, n)  the decay: in (0, 1), input-dependent
    b_t = Δ_t ⊙ (x_t W_B)                      (T, B, n)  what step t writes
    h_t = a_t ⊙ h_{t-1} + b_t,  h_{-1} = 0     (T, B, n)  a diagonal linear recurrence: a scan
    y_t = h_t W_C + c_y                        (T, B, d_out)

Because ``a_t`` and ``b_t`` depend on the input, the layer can *select*: keep its state (Δ ≈ 0,
so a ≈ 1 and b ≈ 0) through steps that do not matter, and write (Δ large) where one does.  The
recurrence is linear in h, so it stays a scan however a and b were computed.

The backward pass runs the same recurrence in reverse (:func:`course.recurrences.linear.
recurrence_backward`): ``g_t = ∂L/∂h_t`` obeys ``g_t = (∂L/∂y_t) W_Cᵀ + a_{t+1} ⊙ g_{t+1}``.
Every other piece is elementwise or a matrix product over all T·B rows at once.

>>> import numpy as np
>>> p = init_params(d_in=2, n=4, d_out=1, seed=0)
>>> x = np.random.default_rng(0).normal(size=(5, 3, 2))
>>> y, cache = forward(p, x)
>>> y.shape, sorted(backward(np.ones_like(y), cache))[:3]
((5, 3, 1), ['W_B', 'W_C', 'W_delta'])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..arguments import Dtype, Given, OneOf, Optional, Seed, Whole, arguments
from ..backprop.gradcheck import central_differences, rel_error
from ..devices import array_device, get_xp, normalize_device, xp_of
from ..errors import BadInputError, shown_value, whole_number
from ..limits import require_fits
from .linear import recurrence_backward, recurrence_loop, recurrence_scan

__all__ = ["PARAM_NAMES", "init_params", "forward", "backward", "mse_loss", "loss_and_grads",
           "gradient_check", "torch_gradients"]

PARAM_NAMES = ("W_delta", "c_delta", "log_lam", "W_B", "W_C", "c_y")


@arguments(d_in=Whole(hint="inputs per step"), n=Whole(hint="the state size"), d_out=Whole(hint="outputs per step"),
           seed=Seed(), device=Given(normalize_device), dtype=Dtype(device="device", floating=True))
def init_params(d_in: int = 2, n: int = 16, d_out: int = 1, seed: int = 0, dtype: Any = "float64",
                device: Any = "cpu") -> dict:
    """Small random weights; ``λ`` spread over [0.01, 1] (slow to fast decays) as in S4/Mamba.

    >>> sorted(init_params(2, 4, 1))
    ['W_B', 'W_C', 'W_delta', 'c_delta', 'c_y', 'log_lam']
    """
    require_fits(8 * (2 * d_in * n + n * d_out + 2 * n + d_out), "cpu",
                 what=f"the weights of a selective scan with d_in={d_in:,}, n={n:,}, d_out={d_out:,}")
    rng = np.random.default_rng(seed)
    p = {"W_delta": rng.normal(0, 1 / np.sqrt(d_in), (d_in, n)), "c_delta": np.full(n, -2.0),
         "log_lam": np.log(np.geomspace(0.01, 1.0, n)), "W_B": rng.normal(0, 1 / np.sqrt(d_in), (d_in, n)),
         "W_C": rng.normal(0, 1 / np.sqrt(n), (n, d_out)), "c_y": np.zeros(d_out)}
    xp = get_xp(device)
    return {k: xp.asarray(v, dtype=dtype) for k, v in p.items()}


def _validate(params: dict, x: Any) -> Any:
    missing = [k for k in PARAM_NAMES if k not in params]
    if missing:
        raise BadInputError(f"params lack {missing}; build them with init_params(d_in, n, d_out).")
    if getattr(x, "ndim", None) != 3 or x.shape[-1] != params["W_delta"].shape[0]:
        raise BadInputError(f"x must have shape (T, B, d_in) with d_in = {params['W_delta'].shape[0]}; "
                            f"got {tuple(getattr(x, 'shape', ()))}.")
    if array_device(x) != array_device(params["W_C"]):
        raise BadInputError("x and the parameters live on different devices: move one with "
                            "course.to_device(x, device).")
    T, B, n = x.shape[0], x.shape[1], params["W_delta"].shape[1]      # the cache: six (T, B, n) arrays and y,
    require_fits(10 * T * B * (n + params["W_C"].shape[1]) * np.dtype(params["W_C"].dtype).itemsize,  # + the scan's
                 array_device(x), what=f"the selective layer over T = {T:,} steps, batch {B:,}, n = {n}")
    return xp_of(x)


def _validate_params(params: Any) -> dict:
    """``params`` as the dict :func:`init_params` returns (every name of :data:`PARAM_NAMES`), or a clear error."""
    if not isinstance(params, dict):
        raise BadInputError(f"params must be the dict init_params(d_in, n, d_out) returns, got {shown_value(params)}")
    missing = [k for k in PARAM_NAMES if k not in params]
    if missing:
        raise BadInputError(f"params lack {missing}; build them with init_params(d_in, n, d_out).")
    return params


def _validate_array(x: Any, what: str) -> Any:
    """``x`` if it is a non-empty numpy or CuPy array of numbers, or a clear error naming ``what``."""
    if not (hasattr(x, "shape") and hasattr(x, "dtype")) or getattr(x.dtype, "kind", "") not in "iuf" \
            or not getattr(x, "size", 0):
        raise BadInputError(f"{what} must be a non-empty array of numbers, got {shown_value(x)}")
    return x


def _validate_cache(cache: Any) -> dict:
    if not isinstance(cache, dict) or not {"params", "x", "h", "a", "method"} <= cache.keys():
        raise BadInputError(f"cache must be the dict forward(params, x) returns beside y, got {shown_value(cache)}")
    return cache


def _require_target(y_last: Any, target: Any) -> None:
    """One target per output: a target of another shape would broadcast, a (B, B) difference, and a wrong loss."""
    if tuple(y_last.shape) != tuple(target.shape):
        raise BadInputError(f"target must have the shape of the outputs it is compared with, {tuple(y_last.shape)}; "
                            f"got {tuple(target.shape)} (reshape it, e.g. target.reshape({tuple(y_last.shape)}))")


def _require_layer_input(params: dict, x: Any) -> None:
    """``x`` of shape (T, B, d_in) for ``params``, on their device, fitting in memory (what forward checks)."""
    _validate(params, x)


def _softplus(z, xp):
    return xp.logaddexp(0, z) if xp is np else xp.maximum(z, 0) + xp.log1p(xp.exp(-xp.abs(z)))


@arguments(method=OneOf("scan", "loop"))
def forward(params: dict, x: Any, method: str = "scan") -> tuple[Any, dict]:
    """The layer's outputs ``y`` (T, B, d_out) and the cache its backward pass needs.

    ``method``: ``"scan"`` (the Blelloch scan) or ``"loop"`` for the recurrence.

    >>> p = init_params(2, 3, 1); x = np.zeros((4, 1, 2))
    >>> forward(p, x)[0].shape
    (4, 1, 1)
    """
    xp = _validate(params, x)
    z = x @ params["W_delta"] + params["c_delta"]        # (T, B, n)
    delta = _softplus(z, xp)
    lam = xp.exp(params["log_lam"])                      # (n,)
    a = xp.exp(-delta * lam)                             # (T, B, n), in (0, 1)
    u = x @ params["W_B"]                                # (T, B, n)
    b = delta * u
    h = (recurrence_scan if method == "scan" else recurrence_loop)(a, b)
    y = h @ params["W_C"] + params["c_y"]                # (T, B, d_out)
    cache = {"x": x, "z": z, "delta": delta, "lam": lam, "a": a, "u": u, "h": h,
             "params": params, "method": method}
    return y, cache


@arguments(dy=Given(_validate_array, what="dy"), cache=Given(_validate_cache),
           method=Optional(OneOf("scan", "loop")))
def backward(dy: Any, cache: dict, method: str | None = None) -> dict:
    """Gradients of every parameter and of ``x`` from ``dy = ∂L/∂y`` (T, B, d_out).

    Read it bottom-up against :func:`forward`: each line undoes one line there.
    ``method`` (default: the forward's) runs the reverse recurrence by ``"scan"`` or ``"loop"``.
    """
    p, x, h, a = cache["params"], cache["x"], cache["h"], cache["a"]
    xp = xp_of(x)
    if tuple(dy.shape) != tuple(h.shape[:2]) + (p["W_C"].shape[1],):
        raise BadInputError(f"dy must have the shape of y, {tuple(h.shape[:2]) + (p['W_C'].shape[1],)}; "
                            f"got {tuple(dy.shape)}.")
    n = h.shape[-1]
    g = {"W_C": h.reshape(-1, n).T @ dy.reshape(-1, dy.shape[-1]),   # y = h W_C + c_y
         "c_y": dy.sum(axis=(0, 1))}
    dh = dy @ p["W_C"].T                                               # ∂L/∂h_t, direct part
    da, db, _ = recurrence_backward(a, h, dh, method=method or cache["method"])  # the reverse scan
    delta, lam, u = cache["delta"], cache["lam"], cache["u"]
    du = db * delta                                                    # b = Δ ⊙ u
    ddelta = db * u
    da_pre = da * a                                                    # a = exp(-Δ ⊙ λ)
    ddelta = ddelta - da_pre * lam
    g["log_lam"] = -(da_pre * delta).sum(axis=(0, 1)) * lam            # λ = exp(log_λ)
    dz = ddelta / (1 + xp.exp(-cache["z"]))                            # Δ = softplus(z)
    rows = x.reshape(-1, x.shape[-1])
    g["W_B"] = rows.T @ du.reshape(-1, n)                              # u = x W_B
    g["W_delta"] = rows.T @ dz.reshape(-1, n)                          # z = x W_Δ + c_Δ
    g["c_delta"] = dz.sum(axis=(0, 1))
    g["x"] = du @ p["W_B"].T + dz @ p["W_delta"].T
    return g


@arguments(y_last=Given(_validate_array, what="y_last"), target=Given(_validate_array, what="target"),
           then=_require_target)
def mse_loss(y_last: Any, target: Any) -> tuple[float, Any]:
    """Mean squared error of the last step's outputs ``(B, d_out)``, and its gradient.

    >>> mse_loss(np.array([[1.0], [3.0]]), np.array([[0.0], [3.0]]))
    (0.5, array([[1.],
           [0.]]))
    """
    diff = y_last - target
    return float((diff ** 2).mean()), 2 * diff / diff.size


@arguments(params=Given(_validate_params), target=Given(_validate_array, what="target"),
           method=OneOf("scan", "loop"))
def loss_and_grads(params: dict, x: Any, target: Any, method: str = "scan") -> tuple[float, dict]:
    """Loss on the last step's output (a sequence-to-one task) and the gradients of everything."""
    y, cache = forward(params, x, method)
    loss, d_last = mse_loss(y[-1], target)
    dy = xp_of(y).zeros_like(y)
    dy[-1] = d_last
    return loss, backward(dy, cache, method)


def gradient_check(params: dict, x: Any, target: Any, method: str = "scan", eps: float = 1e-6,
                   entries: int = 6, seed: int = 0) -> dict:
    """Central finite differences of the loss against :func:`backward`, for every array.

    Checks ``entries`` random entries of each parameter and of ``x`` (float64 needed);
    returns ``{name: relative error}`` (:func:`course.backprop.gradcheck.rel_error`).  Values
    near 1e-7 or below mean the gradient is right; a wrong formula gives 1e-2 or more.
    """
    entries = whole_number("entries", entries, lo=1, hint="the number of entries of each array to check")
    arrays = dict(params) | {"x": x}
    if any(np.dtype(v.dtype) != np.float64 for v in arrays.values()):
        raise BadInputError("finite differences need float64 parameters and x: "
                            "init_params(..., dtype='float64') and x.astype('float64').")
    _, grads = loss_and_grads(params, x, target, method)
    rng = np.random.default_rng(seed)
    out = {}
    for name, arr in arrays.items():                     # each nudged in place: params and x see it
        idx = rng.choice(arr.size, size=min(entries, arr.size), replace=False)
        numeric = central_differences(lambda: mse_loss(forward(params, x, method)[0][-1], target)[0], arr, eps, idx)
        out[name] = rel_error(grads[name].reshape(-1)[idx], numeric)
    return out


@arguments(params=Given(_validate_params), x=Given(_validate_array, what="x"),
           target=Given(_validate_array, what="target"), then=_require_layer_input)
def torch_gradients(params: dict, x: Any, target: Any) -> dict | None:
    """The same loss differentiated by PyTorch's autograd (a loop over time), or None without PyTorch."""
    try:
        import torch
    except ImportError:
        return None
    t = {k: torch.tensor(np.asarray(v), requires_grad=True) for k, v in (dict(params) | {"x": x}).items()}
    delta = torch.nn.functional.softplus(t["x"] @ t["W_delta"] + t["c_delta"])
    a = torch.exp(-delta * torch.exp(t["log_lam"]))
    b = delta * (t["x"] @ t["W_B"])
    h, hs = torch.zeros_like(b[0]), []
    for s in range(b.shape[0]):
        h = a[s] * h + b[s]
        hs.append(h)
    y = torch.stack(hs) @ t["W_C"] + t["c_y"]
    loss = ((y[-1] - torch.tensor(np.asarray(target))) ** 2).mean()
    loss.backward()
    return {k: v.grad.numpy() for k, v in t.items()}
