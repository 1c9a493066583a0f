"""Lesson 07 on a GPU: a hand-written ``numba.cuda`` kernel for the diagonal scan.

``h_t = a_t ⊙ h_{t-1} + b_t`` over T steps and n channels, arrays of shape ``(T, n)`` with the
channels contiguous.  Channels never talk to each other, so they are the easy parallelism: one
thread per channel, a block of threads per *channel block*.  Neighbouring threads take neighbouring
channels, so a warp reading step t reads one contiguous run of memory (coalesced).

With only n threads a GPU idles when n is small, so the sequence is also cut into *chunks* of L
steps, one thread per (channel, chunk), the way the fused scan kernels of state-space models work
through long sequences chunk by chunk, with the state in registers.  Three phases, as in lesson 04's
reduce-then-scan:

1. ``chunk_summaries``: each thread composes the affine maps of its chunk into one, ``(A, B)``
   with ``A = a_first ⋯ a_last`` and ``B`` the state the chunk reaches from 0: reads a and b once;
2. ``chunk_carries``: one thread per channel runs the short recurrence over the T/L chunk
   summaries, giving the state each chunk starts from (the scan of the chunk totals);
3. ``chunk_apply``: each thread reruns its chunk from its start state and writes every h_t.

With ``chunk >= T`` only phase 3 runs: one thread per channel walks the whole sequence, the GPU
version of the sequential loop, which the timings compare against.

The kernels run on a GPU (numpy inputs are copied over and back; CuPy arrays are used in place)
and, at tiny sizes, on numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1`` set before numba is
imported).  :func:`chunk_plan` shows on the CPU which steps each thread touches.

>>> chunk_plan(T=10, n=3, chunk=4)["threads"]
9
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..arguments import Whole, arguments
from ..devices import array_device, cupy_module, quiet_numba_launches
from ..errors import BadInputError, GPUUnavailableError, whole_number
from ..kernel_runtime import kernels_unavailable_reason, numba_cuda

__all__ = ["kernels_available", "kernels_unavailable_reason", "diagonal_scan_kernels",
           "diagonal_scan", "chunk_plan", "KERNEL_DTYPES"]

#: Element types the kernels are compiled for.
KERNEL_DTYPES = ("float32", "float64")

cuda: Any = None   # numba.cuda, bound on first use (course.kernel_runtime.numba_cuda)


def kernels_available() -> bool:
    """True when :func:`diagonal_scan` can run here."""
    return kernels_unavailable_reason() is None


@functools.cache
def diagonal_scan_kernels(dtype: str = "float32"):
    """Compile ``(chunk_summaries, chunk_carries, chunk_apply)`` for one element type."""
    global cuda    # the simulator swaps this module global inside the kernels
    cuda = numba_cuda()
    if np.dtype(dtype).name not in KERNEL_DTYPES:
        raise BadInputError(f"the diagonal-scan kernels are compiled for {KERNEL_DTYPES}; got {dtype}.")
    ONE, ZERO = np.dtype(dtype).type(1), np.dtype(dtype).type(0)

    @cuda.jit
    def chunk_summaries(a, b, A, B, T, n, L):      # 1. compose each chunk's maps: (A, B)
        c = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x     # channel
        k = cuda.blockIdx.y                                          # chunk
        if c < n:
            prod, state = ONE, ZERO
            for t in range(k * L, min(k * L + L, T)):
                prod = a[t, c] * prod              # later map applied after the earlier ones
                state = a[t, c] * state + b[t, c]
            A[k, c] = prod
            B[k, c] = state

    @cuda.jit
    def chunk_carries(A, B, h0, carry, n, K):      # 2. the state each chunk starts from
        c = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        if c < n:
            state = h0[c]
            for k in range(K):
                carry[k, c] = state
                state = A[k, c] * state + B[k, c]

    @cuda.jit
    def chunk_apply(a, b, carry, h, T, n, L):      # 3. rerun each chunk from its start state
        c = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        k = cuda.blockIdx.y
        if c < n:
            state = carry[k, c]
            for t in range(k * L, min(k * L + L, T)):
                state = a[t, c] * state + b[t, c]
                h[t, c] = state

    return chunk_summaries, chunk_carries, chunk_apply


def _validate(a, b, h0, chunk, threads):
    if array_device(a) != array_device(b):
        raise BadInputError("a and b live on different devices: move one with course.to_device.")
    if a.ndim != 2 or a.shape != b.shape or a.shape[0] == 0:
        raise BadInputError(f"the kernel takes a and b of one shape (T, n) with T >= 1; got "
                            f"{tuple(a.shape)} and {tuple(b.shape)}. Reshape a batch to (T, B*n).")
    if a.dtype != b.dtype or np.dtype(a.dtype).name not in KERNEL_DTYPES:
        raise BadInputError(f"a and b must share one dtype of {KERNEL_DTYPES}; got {a.dtype} and {b.dtype}.")
    if h0 is not None and tuple(np.shape(h0)) != (a.shape[1],):
        raise BadInputError(f"h0 must have shape (n,) = ({a.shape[1]},); got {tuple(np.shape(h0))}.")
    whole_number("chunk", chunk, hint="steps per thread")
    whole_number("threads", threads, 1, 1024, hint="threads per block")


def diagonal_scan(a: Any, b: Any, h0: Any = None, chunk: int = 64, threads: int = 128) -> Any:
    """``h_t = a_t ⊙ h_{t-1} + b_t`` for ``(T, n)`` arrays with the three chunked kernels.

    Parameters
    ----------
    a, b : ``(T, n)`` numpy arrays (copied to the GPU and back) or CuPy arrays (stay there).
    h0 : the state before step 0, shape ``(n,)``; None = zeros.
    chunk : steps per thread (L).  ``chunk >= T``: one thread per channel walks all T steps.
    threads : threads per block (channels per block).

    Returns
    -------
    h, ``(T, n)``, on the device ``a`` came from.
    """
    on_gpu = array_device(a) == "gpu"
    if not on_gpu:
        a, b = np.asarray(a), np.asarray(b)
    _validate(a, b, h0, chunk, threads)
    reason = kernels_unavailable_reason()
    if reason:
        raise GPUUnavailableError(f"diagonal_scan cannot run: {reason}")
    global cuda    # the simulator swaps this module global inside the kernels
    cuda = numba_cuda()
    summaries, carries, apply = diagonal_scan_kernels(np.dtype(a.dtype).name)
    T, n = (int(s) for s in a.shape)
    K = -(-T // chunk)
    grid_c = -(-n // threads)
    if on_gpu:
        cupy = cupy_module()

        def dev(x):
            return cuda.as_cuda_array(cupy.ascontiguousarray(x), sync=False)

        def empty(shape):
            return cupy.empty(shape, dtype=a.dtype)

        h = empty((T, n))
        d_a, d_b, d_h = dev(a), dev(b), cuda.as_cuda_array(h, sync=False)
        h0_ = cupy.zeros(n, dtype=a.dtype) if h0 is None else cupy.asarray(h0, dtype=a.dtype)
    else:
        def dev(x):
            return cuda.to_device(np.ascontiguousarray(x))

        def empty(shape):
            return cuda.device_array(shape, dtype=a.dtype)

        d_a, d_b, d_h = dev(a), dev(b), empty((T, n))
        h0_ = np.zeros(n, dtype=a.dtype) if h0 is None else np.asarray(h0, dtype=a.dtype)
    with quiet_numba_launches():  # small grids on purpose: no performance warning for learners
        if K == 1:
            carry = dev(h0_.reshape(1, n))
        else:
            A, B, carry = (dev(empty((K, n))) if on_gpu else empty((K, n)) for _ in range(3))
            summaries[(grid_c, K), threads](d_a, d_b, A, B, T, n, chunk)
            carries[grid_c, threads](A, B, dev(h0_), carry, n, K)
        apply[(grid_c, K), threads](d_a, d_b, carry, d_h, T, n, chunk)
    return h if on_gpu else d_h.copy_to_host()


@arguments(T=Whole(hint="steps of the recurrence"), n=Whole(hint="the channels"),
           chunk=Whole(hint="steps per thread"), threads=Whole(hi=1024, hint="threads per block"),
           itemsize=Whole(hint="bytes per number, e.g. 4 for float32"))
def chunk_plan(T: int, n: int, chunk: int = 64, threads: int = 128, itemsize: int = 4) -> dict:
    """What the kernels launch for a ``(T, n)`` scan: grid, threads, and each thread's steps.

    Returns ``{"chunks", "grid", "threads", "launched", "idle_fraction", "steps_per_thread",
    "dependent_steps", "tree_levels", "reads", "bytes"}``: ``threads`` is the threads that do work
    (one per channel and chunk), ``launched`` the threads the grid starts (whole blocks of
    ``threads`` channels), so ``idle_fraction`` is the share that only checks ``c < n`` and stops;
    ``dependent_steps`` is the longest chain one thread walks (phase 1 + phase 2 + phase 3), to set
    against the T steps of one thread per channel and the ``tree_levels`` (2·⌈log2 T⌉) of a Blelloch
    tree; ``reads`` counts elements of a and b read; ``bytes`` is what the three phases move in all
    (a and b read twice, h written once, the chunk summaries and carries), at ``itemsize`` bytes a number.

    >>> p = chunk_plan(T=4096, n=16, chunk=64)
    >>> p["chunks"], p["threads"], p["dependent_steps"], p["idle_fraction"]
    (64, 1024, 192, 0.875)
    """
    K = -(-T // chunk)
    grid = (-(-n // threads), K)
    steps = min(chunk, T)
    launched = grid[0] * threads * (K if K > 1 else 1)
    numbers = 3 * T * n if K == 1 else 5 * T * n + 6 * K * n
    return {"chunks": K, "grid": grid, "threads": n * K, "launched": launched,
            "idle_fraction": 1 - n * K / launched, "steps_per_thread": steps,
            "dependent_steps": steps if K == 1 else 2 * steps + K,
            "tree_levels": 2 * max(1, (T - 1).bit_length()),
            "reads": 2 * T * n * (1 if K == 1 else 2), "bytes": numbers * itemsize}
