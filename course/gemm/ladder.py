"""Lesson 09 on a GPU: the matrix product as a ladder of CUDA C kernels, one optimisation per rung.

Each rung changes one thing and says why it is faster (:data:`GPU_RUNG_SPECS`); the kernels are in
:mod:`course.gemm.cuda_sources`, their tile sizes filled in from the specs.  Read them in order:

1. ``naive``: one thread per output, ``threadIdx.x`` on the row: every load of a warp is 32 transactions;
2. ``coalesced``: ``threadIdx.x`` on the column: a warp's loads of B and stores of C are one transaction;
3. ``shared``: 32×32 tiles staged in shared memory: each global float is read by 32 threads from chip;
4. ``blocktile_1d``: each thread 8 outputs of a column: one shared load of B feeds 8 FMAs;
5. ``blocktile_2d``: each thread an 8×8 patch: 16 shared loads feed 64 FMAs;
6. ``vectorized``: float4 loads from DRAM and from shared memory (A's tile stored transposed);
7. ``warptile``: warps own 64×32 tiles, conflict-free shared reads, ``cp.async`` double buffering;
8. ``mma_tf32``: tensor cores, ``mma.sync m16n8k8`` on TF32 inputs (float32 accumulate);
9. ``mma_bf16``: tensor cores on bfloat16 inputs, ``ldmatrix``, ``mma.sync m16n8k16`` (float32 accumulate).

:func:`gpu_matmul` runs a rung (one launch per product), :func:`course.gemm.cublas.cublas_matmul` its
library peer at the same precision.  On the stand-in GPU (:mod:`course.standin`) every kernel has a
NumPy twin that checks the launch against the spec and multiplies at the rung's precision; inside
``with course.gemm.emulate.emulated_kernels():`` it runs the per-thread emulation instead.

>>> GPU_RUNG_SPECS["blocktile_2d"].grid(512, 256), GPU_RUNG_SPECS["blocktile_2d"].threads
((2, 4, 1), 256)
>>> GPU_RUNG_SPECS["naive"].grid(100, 40)            # naive: blockIdx.x walks the rows
(4, 2, 1)
"""

from __future__ import annotations

import functools
import json
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..arguments import Given, OneOf, Whole, arguments
from ..devices import array_device, cupy_module, require_gpu
from ..errors import BadInputError, UnsupportedDtypeError
from ..limits import require_fits
from ..standin import register_kernel
from .cuda_sources import COMMON, RUNG_SOURCES, TO_BF16_SOURCE
from .fragments import round_to_tf32

__all__ = ["GPU_RUNGS", "GPU_RUNG_SPECS", "PRECISIONS", "RungSpec", "GEMM_SOURCE", "kernel_source", "device_arch",
           "validate_gemm", "require_device_matrices", "gpu_matmul", "padded_sizes", "to_bfloat16_bits",
           "from_bfloat16_bits",
           "bfloat16_bits_numpy", "product_at_precision", "validate_host_floats",
           "validate_bfloat16_bits", "validate_host_product", "validate_device_floats", "require_launch",
           "ptxas_table", "PTXAS_RECORD", "recorded_ptxas_table"]

GPU_RUNGS = ("naive", "coalesced", "shared", "blocktile_1d", "blocktile_2d", "vectorized", "warptile", "mma_tf32",
             "mma_bf16")
PRECISIONS = ("float32", "tf32", "bfloat16")


@dataclass(frozen=True)
class RungSpec:
    """One rung: its kernel, precision and tiles.  ``bm × bn`` outputs per block, ``bk`` the k-tile; ``tm × tn``
    outputs per thread (0 on the mma rungs, where the fragment tables decide); ``warp_tile`` ``(wm, wn)``;
    ``pad_a``/``pad_b`` elements added to each shared row; ``mma`` the ``(m, n, k)`` of one ``mma.sync``."""

    name: str
    kernel: str
    precision: str
    threads: int
    block: tuple[int, int, int]
    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    warp_tile: tuple[int, int] | None
    min_arch: int
    why: str
    bounds_checked: bool = False
    pad_a: int = 0
    pad_b: int = 0
    mma: tuple[int, int, int] | None = None

    def grid(self, m: int, n: int) -> tuple[int, int, int]:
        """The launch grid for an ``m × n`` output (``naive`` puts the rows on ``blockIdx.x``)."""
        rows, cols = -(-m // self.bm), -(-n // self.bn)
        return (rows, cols, 1) if self.name == "naive" else (cols, rows, 1)

    @property
    def multiple(self) -> tuple[int, int, int]:
        """``(m, n, k)`` multiples the kernel needs (1: it checks its bounds)."""
        return (1, 1, 1) if self.bounds_checked else (self.bm, self.bn, self.bk)

    @property
    def input_dtype(self) -> str:
        """What the kernel reads: ``"float32"``, or ``"uint16"`` (bfloat16 bit patterns)."""
        return "uint16" if self.precision == "bfloat16" else "float32"


def _spec(name: str, precision: str, threads: int, bm: int, bn: int, bk: int, tm: int, tn: int, why: str,
          **kw: Any) -> RungSpec:
    block = (32, 32, 1) if threads == 1024 else (threads, 1, 1)
    return RungSpec(name, f"gemm_{name}", precision, threads, block, bm, bn, bk, tm, tn, why=why,
                    warp_tile=kw.pop("warp_tile", None), min_arch=kw.pop("min_arch", 75), **kw)


GPU_RUNG_SPECS: dict[str, RungSpec] = {s.name: s for s in (
    _spec("naive", "float32", 1024, 32, 32, 1, 1, 1, bounds_checked=True,
          why="the first version: a warp's 32 threads read 32 rows of A, so no load is coalesced"),
    _spec("coalesced", "float32", 1024, 32, 32, 1, 1, 1, bounds_checked=True,
          why="threadIdx.x on the column: a warp reads 32 neighbouring floats of B in one transaction"),
    _spec("shared", "float32", 1024, 32, 32, 32, 1, 1,
          why="tiles staged in shared memory: each float from DRAM/L2 serves 32 threads"),
    _spec("blocktile_1d", "float32", 512, 64, 64, 8, 8, 1,
          why="8 outputs per thread: one shared load of B feeds 8 FMAs (2 loads per FMA become 1.1)"),
    _spec("blocktile_2d", "float32", 256, 128, 128, 8, 8, 8,
          why="an 8x8 patch per thread: 16 shared loads feed 64 FMAs, and bigger tiles halve DRAM traffic"),
    _spec("vectorized", "float32", 256, 128, 128, 8, 8, 8,
          why="float4 loads (A's tile stored transposed): a quarter of the load instructions"),
    _spec("warptile", "float32", 256, 128, 128, 16, 8, 8, warp_tile=(64, 32), pad_a=4,
          why="warp tiles with conflict-free shared reads, and cp.async double buffering that hides DRAM latency"),
    _spec("mma_tf32", "tf32", 256, 128, 128, 16, 0, 0, warp_tile=(64, 32), pad_a=4, pad_b=8, mma=(16, 8, 8),
          min_arch=80, why="tensor cores: one mma.sync does 16x8x8 FMAs on TF32 inputs, 8x an FMA lane's rate"),
    _spec("mma_bf16", "bfloat16", 256, 128, 128, 32, 0, 0, warp_tile=(64, 32), pad_a=8, pad_b=8, mma=(16, 8, 16),
          min_arch=80, why="bfloat16 inputs: half the bytes per element, and twice TF32's tensor-core rate"),
)}


def kernel_source(rung: str) -> str:
    """The CUDA C of one rung's kernel, its tile sizes filled in from :data:`GPU_RUNG_SPECS`.

    >>> print(kernel_source("coalesced").splitlines()[1])
    extern "C" __global__ void __launch_bounds__(1024)
    """
    if rung not in GPU_RUNG_SPECS:
        raise BadInputError(f"rung must be one of {', '.join(GPU_RUNGS)}; got {rung!r:.60}")
    s = GPU_RUNG_SPECS[rung]
    wm, wn = s.warp_tile or (0, 0)
    return string.Template(RUNG_SOURCES[rung]).substitute(
        THREADS=s.threads, BM=s.bm, BN=s.bn, BK=s.bk, TM=s.tm, TN=s.tn, WM=wm, WN=wn, PAD_A=s.pad_a, PAD_B=s.pad_b)


#: The whole translation unit CuPy compiles (every rung, and the float32 -> bfloat16 conversion).
GEMM_SOURCE = COMMON + TO_BF16_SOURCE + "".join(kernel_source(r) for r in GPU_RUNGS)


# ----------------------------------------------------------------------------- precision, in NumPy

def validate_host_floats(x: Any) -> np.ndarray:
    """``x`` as a NumPy float32 array if it holds real numbers (a list, a float array), else a clear error; one
    that would not fit in memory is refused before it is made."""
    if array_device(x) == "gpu":
        raise BadInputError("this function works on the host: pass a NumPy array (course.to_numpy(x))")
    size = getattr(x, "size", None)
    if size is not None:
        require_fits(int(size) * 8, "cpu", what="a float32 copy of x")
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiu":
        raise UnsupportedDtypeError(f"x must hold real numbers (float or integer), got dtype {arr.dtype}")
    return arr.astype(np.float32, copy=False)


def validate_bfloat16_bits(bits: Any) -> np.ndarray:
    """``bits`` as a NumPy uint16 array (bfloat16 bit patterns), else a clear error."""
    if array_device(bits) == "gpu":
        raise BadInputError("bits must be a NumPy array on the host (course.to_numpy(bits))")
    arr = np.asarray(bits)
    if arr.dtype != np.uint16:
        raise UnsupportedDtypeError("bits must be uint16 bfloat16 bit patterns (bfloat16_bits_numpy(x) makes "
                                    f"them), got dtype {arr.dtype}")
    return arr


def validate_host_product(a: Any, b: Any, precision: Any) -> tuple[np.ndarray, np.ndarray, str]:
    """``(a, b, precision)`` for :func:`product_at_precision`: NumPy matrices that multiply (float32, or uint16
    bfloat16 bits for ``"bfloat16"``) and a precision of :data:`PRECISIONS`."""
    if precision not in PRECISIONS:
        raise BadInputError(f"precision must be one of {PRECISIONS}, got {precision!r:.60}")
    out = []
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, np.ndarray) or x.ndim != 2 or 0 in x.shape:
            raise BadInputError(f"{name} must be a non-empty NumPy matrix (2-D), got {type(x).__name__} "
                                f"{getattr(x, 'shape', '')}")
        if x.dtype != np.float32 and not (precision == "bfloat16" and x.dtype == np.uint16):
            raise UnsupportedDtypeError(f"{name} must be float32 (or uint16 bfloat16 bits for 'bfloat16'), "
                                        f"got {x.dtype}")
        out.append(x)
    if a.shape[1] != b.shape[0]:
        raise BadInputError(f"a {a.shape} @ b {b.shape} does not multiply: a's columns must equal b's rows")
    require_fits(a.shape[0] * b.shape[1] * 4 + (a.size + b.size) * 8, "cpu", what="the product and its inputs")
    return out[0], out[1], precision


@arguments(x=Given(validate_host_floats))
def bfloat16_bits_numpy(x: Any) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even: what ``gemm_to_bf16`` does.

    >>> bfloat16_bits_numpy(np.float32([1.0, 1 + 2**-8, 1 + 3 * 2**-8])).tolist()   # a tie rounds to even
    [16256, 16256, 16258]
    """
    import ml_dtypes

    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)


@arguments(bits=Given(validate_bfloat16_bits))
def from_bfloat16_bits(bits: Any) -> np.ndarray:
    """bfloat16 bit patterns (uint16) -> the float32 values they hold (exactly)."""
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


@arguments(then=validate_host_product)
def product_at_precision(a: np.ndarray, b: np.ndarray, precision: str) -> np.ndarray:
    """``a @ b`` as the rung reads its inputs: float32 as given, TF32 rounded (``cvt.rna``), or bfloat16 (bits
    or float32 rounded to nearest even); float32 accumulation and output."""
    if precision == "bfloat16":
        a, b = (from_bfloat16_bits(x if x.dtype == np.uint16 else bfloat16_bits_numpy(x)) for x in (a, b))
    elif precision == "tf32":
        a, b = round_to_tf32(a), round_to_tf32(b)
    return np.matmul(np.asarray(a, np.float32), np.asarray(b, np.float32))


# ----------------------------------------------------------------------------- the stand-in twins

def require_launch(spec: RungSpec, grid: tuple, block: tuple, m: int, n: int, k: int) -> None:
    """Raise ``RuntimeError`` unless a launch of ``spec``'s kernel for ``m × n × k`` has the spec's grid and block
    and sizes the kernel takes (what a stand-in twin checks before it computes)."""
    mm, mn, mk = spec.multiple
    if tuple(block) != spec.block or tuple(grid) + (1,) * (3 - len(grid)) != spec.grid(m, n) \
            or m % mm or n % mn or k % mk:
        raise RuntimeError(f"{spec.kernel} launched with grid {grid}, block {block} for M, N, K = {m}, {n}, {k}; "
                           f"its spec needs grid {spec.grid(m, n)}, block {spec.block}, multiples {spec.multiple}")


def _make_twin(spec: RungSpec) -> Any:
    def twin(grid: tuple, block: tuple, args: tuple) -> None:
        a, b, c = (np.asarray(x) for x in args[:3])
        m, n, k = (int(v) for v in args[3:6])
        require_launch(spec, grid, block, m, n, k)
        c.reshape(m, n)[...] = product_at_precision(a.reshape(m, k), b.reshape(k, n), spec.precision)
    return twin


def _to_bf16_twin(grid: tuple, block: tuple, args: tuple) -> None:
    x, y, n = np.asarray(args[0]), np.asarray(args[1]), int(args[2])
    if int(grid[0]) * int(block[0]) < n:
        raise RuntimeError(f"gemm_to_bf16 launched with grid {grid}, block {block}: fewer threads than {n} elements")
    y.reshape(-1)[:n] = bfloat16_bits_numpy(x.reshape(-1)[:n])


for _s in GPU_RUNG_SPECS.values():                         # the stand-in GPU runs the twin instead
    register_kernel(_s.kernel, _make_twin(_s))
register_kernel("gemm_to_bf16", _to_bf16_twin)


# ----------------------------------------------------------------------------- on a GPU

#: (the CuPy module the kernels were compiled by, its RawModule): compiled once per module, so that a fresh
#: stand-in GPU never launches through the kernels of an earlier one.
_COMPILED: list = [None, None]


def _module() -> Any:
    cp = cupy_module()
    if _COMPILED[0] is not cp:
        _COMPILED[:] = [cp, cp.RawModule(code=GEMM_SOURCE, options=("--std=c++14",))]
    return _COMPILED[1]


def device_arch() -> int:
    """The current GPU's compute capability as one number (75 for a T4, 80 for an A100, 90 for an H100)."""
    return int(str(cupy_module().cuda.Device().compute_capability))


@arguments(rung=OneOf(*GPU_RUNGS), m=Whole(hint="rows of a"), n=Whole(hint="columns of b"),
           k=Whole(hint="the inner size"))
def padded_sizes(rung: str, m: int, n: int, k: int) -> tuple[int, int, int]:
    """``(m, n, k)`` rounded up to the multiples the rung's kernel needs.

    >>> padded_sizes("warptile", 100, 130, 20), padded_sizes("naive", 100, 130, 20)
    ((128, 256, 32), (100, 130, 20))
    """
    mults = GPU_RUNG_SPECS[rung].multiple
    return tuple(-(-int(v) // q) * q for v, q in zip((m, n, k), mults))


def require_device_matrices(a: Any, b: Any, precision: str, what: str) -> None:
    """Raise a clear error unless ``a`` and ``b`` are CuPy matrices of a dtype ``precision`` reads (float32, or
    uint16 bfloat16 bits for ``"bfloat16"``); ``what`` names the reader in the message."""
    ok = ("float32", "uint16") if precision == "bfloat16" else ("float32",)
    for name, x in (("a", a), ("b", b)):
        if array_device(x) != "gpu":
            raise BadInputError(f"{name} must be a CuPy array on the GPU: move it with course.to_device({name}, 'gpu')")
        if x.ndim != 2:
            raise BadInputError(f"{name} must be a matrix (2-D), got shape {tuple(x.shape)}")
        if np.dtype(x.dtype).name not in ok:
            raise BadInputError(f"{name} must be {' or '.join(ok)} for {what} (uint16: bfloat16 bits), got "
                                f"{x.dtype}; convert with {name}.astype('float32')")


def validate_gemm(a: Any, b: Any, rung: str) -> tuple[RungSpec, int, int, int]:
    """``(spec, m, n, k)`` for ``a (m, k) @ b (k, n)`` on this rung, or a clear error naming what is wrong:
    an unknown rung, no GPU, a host array, not 2-D, a dtype the rung does not read, shapes that do not
    multiply, a product too large for the kernels' 32-bit indices, or a rung this GPU's architecture lacks."""
    if not isinstance(rung, str) or rung not in GPU_RUNG_SPECS:
        raise BadInputError(f"rung must be one of {', '.join(GPU_RUNGS)}; got {rung!r:.60}")
    spec = GPU_RUNG_SPECS[rung]
    require_gpu()
    require_device_matrices(a, b, spec.precision, f"rung {rung!r}")
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2 or min(m, n, k) < 1:
        raise BadInputError(f"a {tuple(a.shape)} @ b {tuple(b.shape)} does not multiply: a's columns must equal b's "
                            "rows, every size at least 1")
    pm, pn, pk = padded_sizes(rung, m, n, k)
    if max(pm * pk, pk * pn, pm * pn) >= 2**31:
        raise BadInputError(f"a {m}x{k} @ {k}x{n} product is too large for the kernels' 32-bit indices")
    arch = device_arch()
    if arch < spec.min_arch:
        raise BadInputError(f"rung {rung!r} needs a GPU of compute capability {spec.min_arch / 10:.1f} or newer "
                            f"(mma.sync with {spec.precision}, cp.async); this one is {arch / 10:.1f}. "
                            f"Choose one of {', '.join(r for r in GPU_RUNGS if GPU_RUNG_SPECS[r].min_arch <= arch)}")
    return spec, m, n, k


def validate_device_floats(x: Any) -> Any:
    """``x`` if it is a CuPy float32 array on the GPU, else a clear error."""
    require_gpu()
    if array_device(x) != "gpu":
        raise BadInputError("x must be a CuPy array on the GPU: move it with course.to_device(x, 'gpu')")
    if np.dtype(x.dtype) != np.float32:
        raise UnsupportedDtypeError(f"x must be float32, got {x.dtype}; convert with x.astype('float32')")
    return x


@arguments(x=Given(validate_device_floats))
def to_bfloat16_bits(x: Any) -> Any:
    """A CuPy float32 array as bfloat16 bit patterns (uint16, round to nearest even): one launch."""
    cp = cupy_module()
    x = cp.ascontiguousarray(x)
    out = cp.empty(x.shape, dtype=cp.uint16)
    _module().get_function("gemm_to_bf16")((-(-x.size // 256),), (256,), (x, out, np.int64(x.size)))
    return out


def _operand(cp: Any, x: Any, rows: int, cols: int, bits: bool) -> Any:
    """``x`` as the kernel reads it: bfloat16 bits if asked, zero-padded to ``rows × cols``, 16-byte aligned."""
    if bits and x.dtype != np.uint16:
        x = to_bfloat16_bits(x)
    if tuple(x.shape) != (rows, cols):
        padded = cp.zeros((rows, cols), dtype=x.dtype)
        padded[:x.shape[0], :x.shape[1]] = x
        return padded
    x = cp.ascontiguousarray(x)
    return x if int(x.data.ptr) % 16 == 0 else x.copy()


def gpu_matmul(a: Any, b: Any, rung: str) -> Any:
    """``a @ b`` by one rung's kernel, on the GPU: a new float32 CuPy array ``(m, n)``.

    ``a (m, k)`` and ``b (k, n)`` are CuPy float32 arrays; the ``mma_bf16`` rung also takes uint16 arrays of
    bfloat16 bits (:func:`to_bfloat16_bits`), and rounds float32 inputs to bfloat16 on the GPU first (one
    more launch each).  Sizes that are not multiples of the rung's tile (:func:`padded_sizes`) are copied
    into zero-filled buffers first, and the result cut out of a padded one; with multiples the product is
    one launch.  ``mma_tf32`` and ``mma_bf16`` need sm_80 or newer.
    """
    spec, m, n, k = validate_gemm(a, b, rung)
    cp = cupy_module()
    pm, pn, pk = padded_sizes(rung, m, n, k)
    bits = spec.precision == "bfloat16"
    A, B = _operand(cp, a, pm, pk, bits), _operand(cp, b, pk, pn, bits)
    C = cp.empty((pm, pn), dtype=cp.float32)
    _module().get_function(spec.kernel)(spec.grid(pm, pn), spec.block,
                                        (A, B, C, np.int32(pm), np.int32(pn), np.int32(pk)))
    return C if (pm, pn) == (m, n) else cp.ascontiguousarray(C[:m, :n])


# ----------------------------------------------------------------------------- registers and spills, no GPU

@functools.cache
def ptxas_table(archs: tuple[str, ...] = ("sm_75", "sm_80", "sm_90")) -> tuple[dict, ...]:
    """``ptxas -v`` of every rung for each architecture: rows ``{rung, arch, registers, smem_bytes, spills}``
    (``spills``: bytes stored plus loaded to local memory).  Compiles the module once per architecture
    with nvcc (or NVRTC): seconds each, cached for the process."""
    from ..cuda_c import ptxas_rows

    by_kernel = {s.kernel: r for r, s in GPU_RUNG_SPECS.items()}
    rows = []
    for arch in archs:
        for row in ptxas_rows(GEMM_SOURCE, arch):
            if row["kernel"] in by_kernel:
                rows.append({"rung": by_kernel[row["kernel"]], "arch": arch, "registers": row.get("registers"),
                             "smem_bytes": row.get("smem_bytes", 0),
                             "spills": row.get("spill_stores", 0) + row.get("spill_loads", 0)})
    order = {r: i for i, r in enumerate(GPU_RUNGS)}
    return tuple(sorted(rows, key=lambda r: (order[r["rung"]], r["arch"])))


#: :func:`ptxas_table` as last recorded on a machine with nvcc (``python tools/ptxas_report.py --record-gemm``),
#: with the compiler that made it: what the lesson prints, instead of compiling for 20 s.  A test compiles
#: again and compares, so the record cannot drift from the sources.
PTXAS_RECORD = Path(__file__).resolve().parent.parent / "data" / "gemm_ptxas.json"


def recorded_ptxas_table() -> dict:
    """The recorded ``ptxas -v`` report of every rung: ``{"compiler": ..., "rows": [...]}`` (rows as
    :func:`ptxas_table` gives them), or ``{"compiler": None, "rows": []}`` with no record."""
    try:
        return json.loads(PTXAS_RECORD.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"compiler": None, "rows": []}
