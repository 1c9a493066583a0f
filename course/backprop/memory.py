"""Lesson 01's memory accounting for gradient checkpointing: the activations a step holds, their bytes
alive at the worst moment, and on a GPU what CuPy's memory pool really has in use.

:mod:`~course.backprop.checkpointing` holds and drops its activations through an
:class:`ActivationLedger`, so the algorithm reads apart from the counting.

>>> import numpy as np
>>> ledger = ActivationLedger("cpu")
>>> ledger.hold(0, np.zeros(4)); ledger.hold(1, np.zeros(2)); ledger.drop(0)
>>> ledger.peak, ledger.now, 1 in ledger
(48, 16, True)
"""

from __future__ import annotations

from typing import Any

from ..arguments import OneOf, Whole, arguments
from ..errors import BadInputError

__all__ = ["ActivationLedger", "PoolPeak"]


def _require_gpu_parts(device: str, x: Any, xp: Any) -> None:
    if device == "gpu" and (x is None or not hasattr(x, "nbytes") or not hasattr(xp, "get_default_memory_pool")):
        raise BadInputError("ActivationLedger('gpu', x, xp) needs the input batch x (an array already in the pool) "
                            "and the array namespace xp (cupy) whose memory pool it reads")


class ActivationLedger:
    """The activations a step keeps, by index: :meth:`hold` and :meth:`drop` count the bytes alive
    (``now``), their ``peak`` and each event; on a GPU also the pool's bytes in use at each hold.

    ``x``: the input batch, already in the GPU pool when the step starts; it is counted as held
    (the first :meth:`hold`), so the pool's baseline leaves it out.
    """

    @arguments(device=OneOf("cpu", "gpu"), then=_require_gpu_parts)
    def __init__(self, device: str, x: Any = None, xp: Any = None) -> None:
        self.held: dict[int, Any] = {}
        self.now, self.peak, self.pool_peak = 0, 0, 0
        self.events: list = []
        self.pool = xp.get_default_memory_pool() if device == "gpu" else None
        self.pool_base = self.pool.used_bytes() - int(x.nbytes) if self.pool is not None else 0
        self._watch = PoolPeak(self.pool, self.pool_base)

    def hold(self, i: int, a: Any) -> None:
        self.held[i] = a
        self.now += int(a.nbytes)
        self.peak = max(self.peak, self.now)
        if self.pool is not None:                # what the GPU really has in use, at this moment
            self.pool_peak = max(self.pool_peak, self.pool.used_bytes() - self.pool_base)
        self.events.append(("hold", i, int(a.nbytes)))

    def drop(self, i: int) -> None:
        a = self.held.pop(i)
        self.now -= int(a.nbytes)
        self.events.append(("drop", i, int(a.nbytes)))

    def __getitem__(self, i: int) -> Any:
        return self.held[i]

    def __contains__(self, i: int) -> bool:
        return i in self.held

    def __enter__(self) -> ActivationLedger:
        self._watch.__enter__()                  # on a GPU, sample the pool after every allocation too
        return self

    def __exit__(self, *exc: Any) -> None:
        self._watch.__exit__(*exc)

    @property
    def device_peak_bytes(self) -> int | None:
        """GPU: the most pool bytes in use at any hold or allocation of the step; None on the CPU."""
        return None if self.pool is None else max(self.pool_peak, self._watch.peak)


class PoolPeak:
    """Inside ``with PoolPeak(pool, base) as w``: ``w.peak`` is the most bytes CuPy's pool had in use
    (above ``base``) right after any allocation, the backward pass's temporaries included.

    A CuPy memory hook samples the pool after every allocation; sampling only when an
    activation is kept would miss the gradients and scratch arrays the backward allocates
    between two such moments.  With ``pool=None`` (the CPU) it does nothing.
    """

    @arguments(base=Whole(lo=-(2**63), hint="the pool's bytes in use before the step"))
    def __init__(self, pool: Any, base: int = 0) -> None:
        self.pool, self.base, self.peak, self._hook = pool, int(base), 0, None

    def __enter__(self) -> PoolPeak:
        if self.pool is not None:
            from cupy.cuda import memory_hook

            watch = self

            class _Hook(memory_hook.MemoryHook):
                name = "course_pool_peak"

                def malloc_postprocess(self, **kwargs: Any) -> None:
                    watch.peak = max(watch.peak, watch.pool.used_bytes() - watch.base)

            self._hook = _Hook()
            self._hook.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._hook is not None:
            self._hook.__exit__(*exc)
            self._hook = None
