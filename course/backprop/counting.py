"""Count what a step asks of the device, on a CPU: array operations (each a kernel launch on a GPU)
and reads back to the host (each a device→host copy and a wait on a GPU).

:class:`CountingNumpy` is an array namespace: the arrays it makes are :class:`CountingArray`, a
NumPy array that counts each ufunc or NumPy function called on it (``a += b`` and ``a.max()``
included), each assignment into it, each fancy-indexed read, and each conversion to a Python
number or truth value (``float(loss)``, ``int(y.min())``, ``if flag:``).  Arrays made elsewhere
(``numpy.arange`` inside a function, say) are not seen, so a count is a lower bound of the kernels a
GPU would launch; the GPU's own count comes from a captured CUDA graph.

>>> ns = CountingNumpy()
>>> a = ns.ones(3, dtype="float32")
>>> a += 1
>>> float(a.sum())
6.0
>>> ns.counter.launches, ns.counter.reads
(2, 1)
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from ..errors import whole_number

__all__ = ["CallCounter", "CountingArray", "CountingNumpy", "mlp_flops"]


class CallCounter:
    """Launches and reads back so far, and the name of each launch."""

    def __init__(self) -> None:
        self.launches, self.reads = 0, 0
        self.names: Counter = Counter()

    def launch(self, name: str) -> None:
        self.launches += 1
        self.names[name] += 1

    def read(self) -> None:
        self.reads += 1

    def reset(self) -> None:
        self.launches, self.reads = 0, 0
        self.names.clear()


def _plain(a: Any) -> Any:
    if isinstance(a, CountingArray):
        return a.view(np.ndarray)
    if isinstance(a, (tuple, list)):
        return type(a)(_plain(v) for v in a)
    return a


def _counter(values: Any) -> CallCounter | None:
    for v in values:
        if isinstance(v, CountingArray) and v.counter is not None:
            return v.counter
        if isinstance(v, (tuple, list)) and (c := _counter(v)) is not None:
            return c
    return None


def _wrap(r: Any, counter: CallCounter | None) -> Any:
    if isinstance(r, (np.ndarray, np.generic)) and not isinstance(r, CountingArray):
        r = np.asarray(r).view(CountingArray)
        r.counter = counter
    return r


def _fancy(key: Any) -> bool:
    keys = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, (np.ndarray, list)) for k in keys)


class CountingArray(np.ndarray):
    """A NumPy array that reports each operation on it to its :class:`CallCounter`."""

    counter: CallCounter | None = None

    def __array_finalize__(self, obj: Any) -> None:
        self.counter = getattr(obj, "counter", None)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, out: Any = None, **kwargs: Any) -> Any:
        c = _counter(inputs + (out or ()))
        if c is not None:
            c.launch(ufunc.__name__ + ("" if method == "__call__" else f".{method}"))
        if out is not None:
            kwargs["out"] = _plain(out)
        r = getattr(ufunc, method)(*_plain(inputs), **kwargs)
        if out is not None:
            return out[0] if len(out) == 1 else out
        return _wrap(r, c)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        c = _counter(tuple(args) + tuple(kwargs.values()))
        if c is not None:
            c.launch(func.__name__)
        r = func(*_plain(args), **{k: _plain(v) for k, v in kwargs.items()})
        if kwargs.get("out") is not None:
            return kwargs["out"]
        return _wrap(r, c)

    def __getitem__(self, key: Any) -> Any:
        if _fancy(key) and self.counter is not None:
            self.counter.launch("gather")
        return _wrap(super().__getitem__(_plain(key)), self.counter)

    def __setitem__(self, key: Any, value: Any) -> None:
        if self.counter is not None:
            self.counter.launch("scatter" if _fancy(key) else "copy")
        self.view(np.ndarray)[_plain(key)] = _plain(value)

    def copy(self, order: str = "C") -> CountingArray:
        if self.counter is not None:
            self.counter.launch("copy")
        return _wrap(self.view(np.ndarray).copy(order), self.counter)

    def _read(self) -> np.ndarray:
        if self.counter is not None:
            self.counter.read()
        return self.view(np.ndarray)

    def __float__(self) -> float:
        return float(self._read())

    def __int__(self) -> int:
        return int(self._read())

    def __index__(self) -> int:
        return int(self._read())

    def __bool__(self) -> bool:
        return bool(self._read())

    def item(self, *args: Any) -> Any:
        return self._read().item(*args)

    def tolist(self) -> Any:
        return self._read().tolist()


class CountingNumpy:
    """NumPy as an array namespace whose new arrays count (``ns.counter``); anything else is NumPy's."""

    def __init__(self) -> None:
        self.counter = CallCounter()

    def _own(self, a: np.ndarray) -> CountingArray:
        out = a.view(CountingArray)
        out.counter = self.counter
        return out

    def asarray(self, a: Any, dtype: Any = None) -> CountingArray:
        return self._own(np.array(_plain(a), dtype=dtype))     # a copy: the step's own buffer

    def empty(self, shape: Any, dtype: Any = float) -> CountingArray:
        return self._own(np.empty(shape, dtype))

    def zeros(self, shape: Any, dtype: Any = float) -> CountingArray:
        return self._own(np.zeros(shape, dtype))

    def ones(self, shape: Any, dtype: Any = float) -> CountingArray:
        return self._own(np.ones(shape, dtype))

    def empty_like(self, a: Any, dtype: Any = None) -> CountingArray:
        return self._own(np.empty_like(_plain(a), dtype=dtype))

    def zeros_like(self, a: Any, dtype: Any = None) -> CountingArray:
        return self._own(np.zeros_like(_plain(a), dtype=dtype))

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)


def mlp_flops(sizes: list[int], batch: int) -> float:
    """Floating-point operations of one forward + backward of an MLP of ``sizes`` on ``batch`` examples.

    A multiply-add counts 2.  Per Linear layer (n_in -> n_out): forward
    2·batch·n_in·n_out + batch·n_out (bias); backward 2·batch·n_in·n_out for dW,
    the same for dx (skipped for the first layer), batch·n_out for db.  One per
    element for each activation forward and backward; 5 per logit for the loss.
    """
    b = whole_number("batch", batch, hint="the examples in one step")
    total = 0.0
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        mm = 2.0 * b * n_in * n_out
        total += mm + b * n_out + mm + b * n_out + (mm if i > 0 else 0.0)
        if i < len(sizes) - 2:
            total += 2.0 * b * n_out
    return total + 5.0 * b * sizes[-1]
