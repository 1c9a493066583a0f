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
version of the sequential loop *unstaged*: each step waits for its own pair of global loads (about
half a microsecond of memory latency a step), so it measures latency, not what a sequential GPU loop
costs.  :func:`staged_diagonal_scan` is the loop a GPU programmer would write, and the baseline the
timings name: CUDA C (:data:`STAGED_SOURCE`), one thread per channel walking T steps, with ``a`` and
``b`` staged a tile of :data:`STAGE` steps ahead in registers: the next tile's loads are issued before
the dependent FMA chain of this tile runs, so a tile's memory latency hides behind the previous tile's
arithmetic.  Its NumPy twin :func:`staged_walk_reference` runs the same tiles in the same order (the
oracle of the tests and what the stand-in GPU runs), and :func:`staged_schedule` lists, per tile, the
steps each thread loads and the steps it computes, so the prefetch distance is checked on the CPU.

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
from ..standin import register_kernel

__all__ = ["kernels_available", "kernels_unavailable_reason", "diagonal_scan_kernels",
           "diagonal_scan", "chunk_plan", "KERNEL_DTYPES", "STAGED_SOURCE", "STAGED_KERNELS", "STAGE",
           "STAGED_THREADS", "staged_walk_reference", "validate_staged_arrays", "staged_schedule",
           "staged_diagonal_scan"]

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


@arguments(chunk=Whole(hint="steps per thread"), threads=Whole(hi=1024, hint="threads per block"))
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


# ----------------------------------------------------------------------------- the staged sequential loop

#: Steps of ``a`` and ``b`` each thread holds in registers ahead of its FMA chain, per element type.
STAGE = {"float32": 32, "float64": 16}
#: Threads per block of the staged kernel (one channel each).
STAGED_THREADS = 128
STAGED_KERNELS = {"float32": "course_staged_diagonal_f32", "float64": "course_staged_diagonal_f64"}

STAGED_SOURCE = r"""
template <typename T, int S>
__device__ void staged_walk(const T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ h0,
                            T* __restrict__ h, const long long steps, const int n)
{   // one thread per channel c walks t = 0 .. steps-1: h_t = a_t * h_{t-1} + b_t.  The S steps of a and b of
    // the next tile are loaded (independent loads, all in flight at once) before the S dependent FMAs of this
    // tile run, so a tile's memory latency hides behind the previous tile's arithmetic.
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n) return;
    T ra[S], rb[S];
    #pragma unroll
    for (int k = 0; k < S; ++k) {                        // the first tile
        const long long t = k;
        ra[k] = t < steps ? __ldg(a + t * n + c) : T(0);
        rb[k] = t < steps ? __ldg(b + t * n + c) : T(0);
    }
    T state = h0[c];
    for (long long t0 = 0; t0 < steps; t0 += S) {
        T na[S], nb[S];
        #pragma unroll
        for (int k = 0; k < S; ++k) {                    // issue the next tile's loads first
            const long long t = t0 + S + k;
            na[k] = t < steps ? __ldg(a + t * n + c) : T(0);
            nb[k] = t < steps ? __ldg(b + t * n + c) : T(0);
        }
        #pragma unroll
        for (int k = 0; k < S; ++k) {                    // then this tile's dependent chain
            const long long t = t0 + k;
            if (t < steps) {
                state = fma(ra[k], state, rb[k]);
                h[t * n + c] = state;
            }
        }
        #pragma unroll
        for (int k = 0; k < S; ++k) { ra[k] = na[k]; rb[k] = nb[k]; }
    }
}

extern "C" __global__ void __launch_bounds__(128)
course_staged_diagonal_f32(const float* a, const float* b, const float* h0, float* h, long long steps, int n)
{ staged_walk<float, 32>(a, b, h0, h, steps, n); }

extern "C" __global__ void __launch_bounds__(128)
course_staged_diagonal_f64(const double* a, const double* b, const double* h0, double* h, long long steps, int n)
{ staged_walk<double, 16>(a, b, h0, h, steps, n); }
"""


@arguments(T=Whole(hint="steps of the recurrence"), stage=Whole(hint="steps staged ahead"))
def staged_schedule(T: int, stage: int = 32) -> list[dict]:
    """What each thread does tile by tile in the staged kernel: ``{"tile", "computes", "loads"}``, the steps
    whose FMAs it runs in that iteration and the steps whose ``a`` and ``b`` loads it issues *before* those FMAs
    (the first entry, tile -1, is the prologue).  Every step is loaded once, one tile before it is computed.

    >>> [(e["tile"], e["loads"], e["computes"]) for e in staged_schedule(5, 2)]
    [(-1, [0, 1], []), (0, [2, 3], [0, 1]), (1, [4], [2, 3]), (2, [], [4])]
    """
    plan = [{"tile": -1, "loads": [t for t in range(stage) if t < T], "computes": []}]
    for i, t0 in enumerate(range(0, T, stage)):
        plan.append({"tile": i, "loads": [t for t in range(t0 + stage, t0 + 2 * stage) if t < T],
                     "computes": [t for t in range(t0, t0 + stage) if t < T]})
    return plan


def staged_walk_reference(a: np.ndarray, b: np.ndarray, h0: np.ndarray, h: np.ndarray, stage: int) -> None:
    """The staged kernel in NumPy, every channel's thread at once: the same tiles, the same order (the next
    tile's values read before this tile's steps), fused multiply-adds in the kernel's dtype.  Writes ``h``."""
    validate_staged_arrays(a, b, h0, h, stage)
    T = a.shape[0]
    ra, rb = a[:stage].copy(), b[:stage].copy()
    state = h0.astype(a.dtype, copy=True)
    for t0 in range(0, T, stage):
        na, nb = a[t0 + stage:t0 + 2 * stage].copy(), b[t0 + stage:t0 + 2 * stage].copy()
        for k in range(min(stage, T - t0)):
            state = ra[k] * state + rb[k]
            h[t0 + k] = state
        ra, rb = na, nb


def validate_staged_arrays(a: Any, b: Any, h0: Any, h: Any, stage: Any) -> int:
    """``stage`` as an int when ``a``, ``b`` and ``h`` share one ``(T, n)`` shape and ``h0`` is ``(n,)``."""
    stage = whole_number("stage", stage, hint="steps staged ahead")
    shapes = [tuple(getattr(x, "shape", ())) for x in (a, b, h)]
    if len(shapes[0]) != 2 or len(set(shapes)) != 1 or tuple(getattr(h0, "shape", ())) != shapes[0][1:]:
        raise BadInputError(f"a, b and h must share one (T, n) shape and h0 be (n,); got {shapes} and "
                            f"{tuple(getattr(h0, 'shape', ()))}")
    return stage


def _staged_twin(grid: tuple, block: tuple, args: tuple) -> None:
    a, b, h0, h, steps, n = (np.asarray(x) for x in args)
    steps, n = int(steps), int(n)
    if tuple(block)[:1] != (STAGED_THREADS,) or tuple(grid)[0] * STAGED_THREADS < n or a.shape != (steps, n):
        raise RuntimeError(f"staged diagonal kernel launched with grid {grid}, block {block} for {a.shape}; "
                           f"needs ({-(-n // STAGED_THREADS)},), ({STAGED_THREADS},)")
    staged_walk_reference(a, b, h0, h, STAGE[a.dtype.name])


for _dtype, _name in STAGED_KERNELS.items():            # the stand-in GPU runs the twin instead
    register_kernel(_name, _staged_twin)

_STAGED: list = [None, {}]


def _staged_kernels() -> dict:
    cp = cupy_module()
    if _STAGED[0] is not cp:
        mod = cp.RawModule(code=STAGED_SOURCE, options=("--std=c++14",))
        _STAGED[:] = [cp, {dt: mod.get_function(name) for dt, name in STAGED_KERNELS.items()}]
    return _STAGED[1]


def staged_diagonal_scan(a: Any, b: Any, h0: Any = None, out: Any = None) -> Any:
    """``h_t = a_t ⊙ h_{t-1} + b_t`` for ``(T, n)`` CuPy arrays by the staged sequential kernel: one launch,
    one thread per channel, ``a`` and ``b`` loaded a tile of :data:`STAGE` steps ahead of the FMA chain.

    ``h0``: the state before step 0, shape ``(n,)`` (None: zeros); ``out``: a contiguous ``(T, n)`` array to
    write (None: a new one).  Returns ``h``.
    """
    _validate_staged(a, b, h0, out)
    cp = cupy_module()
    T, n = (int(s) for s in a.shape)
    a, b = cp.ascontiguousarray(a), cp.ascontiguousarray(b)
    h0 = cp.zeros(n, dtype=a.dtype) if h0 is None else cp.ascontiguousarray(cp.asarray(h0, dtype=a.dtype))
    out = cp.empty((T, n), dtype=a.dtype) if out is None else out
    _staged_kernels()[a.dtype.name]((-(-n // STAGED_THREADS),), (STAGED_THREADS,),
                                    (a, b, h0, out, np.int64(T), np.int32(n)))
    return out


def _validate_staged(a, b, h0, out) -> None:
    from ..devices import require_gpu

    require_gpu()
    if array_device(a) != "gpu" or array_device(b) != "gpu":
        raise BadInputError("staged_diagonal_scan takes CuPy arrays a and b; move them with "
                            "course.to_device(x, 'gpu').")
    _validate(a, b, h0, 1, STAGED_THREADS)
    if a.shape[1] >= 2**31:
        raise BadInputError(f"n = {a.shape[1]:,} channels is more than the kernel's int index covers.")
    if out is not None and (array_device(out) != "gpu" or tuple(out.shape) != tuple(a.shape)
                            or out.dtype != a.dtype or not out.flags.c_contiguous):
        raise BadInputError(f"out must be a contiguous CuPy array of shape {tuple(a.shape)} and dtype {a.dtype}.")
