"""Which lane of a warp holds which element of A, B and C in one tensor-core ``mma.sync``.

A tensor core multiplies small matrices, but nobody hands it a matrix: each of the 32 lanes of a
warp brings a few registers, and the PTX ISA fixes which element of A, B and C sits in which
register of which lane.  Those tables are this module.  They come from the PTX ISA (release 8.x,
section 9.7.14.5, "Matrix Fragments for mma.m16n8k8" with ``.tf32`` (Figures 72, 75, 77) and
"Matrix Fragments for mma.m16n8k16 with floating point type" with ``.bf16`` (Figures 79, 81, 83));
CUTLASS's ``include/cutlass/arch/mma_sm80.h`` passes its registers in the same order.  With

    groupID           = laneid >> 2        (0..7: which row of C, which column of B)
    threadID_in_group = laneid % 4         (0..3: which pair of columns of C, which k)

the ISA's rules are, for register ``i`` of a lane:

==================  =======================================  =======================================
shape / operand     row                                      col
==================  =======================================  =======================================
m16n8k8 tf32, A     groupID (+8 for a1, a3)                  threadID_in_group (+4 for a2, a3)
m16n8k8 tf32, B     threadID_in_group (+4 for b1)            groupID
m16n8k16 bf16, A    groupID (+8 for a2, a3, a6, a7)          threadID_in_group*2 + (i & 1) (+8, i>=4)
m16n8k16 bf16, B    threadID_in_group*2 + (i & 1) (+8, i>=2) groupID
C and D (both)      groupID (+8 for c2, c3)                  threadID_in_group*2 + (i & 1)
==================  =======================================  =======================================

A is M x K (``.row``), B is K x N (``.col``), C and D are M x N, and D has C's layout.
:func:`mma_by_lanes` computes D = A B + C the way the warp does: it hands out the registers by
the tables, and each lane's D element is summed from registers *other* lanes hold (a product
needs a whole row of A and a whole column of B; a lane holds a few elements of each).  Inputs are
rounded as the hardware reads them (TF32: 10 mantissa bits, ``cvt.rna.tf32.f32``; bf16: 7), and the
sum is float32.

>>> layout = fragment_layout("m16n8k8.tf32", "a")
>>> layout.shape
(32, 4, 2)
>>> [tuple(int(v) for v in rc) for rc in layout[5]]   # lane 5: groupID 1, threadID_in_group 1
[(1, 1), (9, 1), (1, 5), (9, 5)]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..arguments import OneOf, arguments
from ..errors import BadInputError, UnsupportedDtypeError

__all__ = ["MMA_SHAPES", "OPERANDS", "mma_dims", "operand_shape", "fragment_layout", "fragment_owners",
           "lane_registers", "from_lane_registers", "round_to_tf32", "round_inputs", "mma_by_lanes"]

MMA_SHAPES = ("m16n8k8.tf32", "m16n8k16.bf16")
OPERANDS = ("a", "b", "c")
WARP = 32
_DIMS = {"m16n8k8.tf32": (16, 8, 8), "m16n8k16.bf16": (16, 8, 16)}


def _rows_cols(shape: str, operand: str) -> tuple[np.ndarray, np.ndarray]:
    """The ISA's formulas, for every lane (axis 0) and register index ``i`` (axis 1)."""
    lane = np.arange(WARP)[:, None]
    group, tig = lane >> 2, lane % 4
    if operand == "c":                                   # c0..c3, the same for both shapes
        i = np.arange(4)[None, :]
        return group + 8 * (i // 2), tig * 2 + (i & 1)
    if shape == "m16n8k8.tf32":
        if operand == "a":                               # a0, a1, a2, a3
            i = np.arange(4)[None, :]
            return group + 8 * (i % 2), tig + 4 * (i // 2)
        i = np.arange(2)[None, :]                        # b0, b1
        return tig + 4 * i, group + 0 * i
    if operand == "a":                                   # a0..a7: two bf16 in each of four .b32
        i = np.arange(8)[None, :]
        return group + 8 * ((i // 2) % 2), tig * 2 + (i & 1) + 8 * (i // 4)
    i = np.arange(4)[None, :]                            # b0..b3: two bf16 in each of two .b32
    return tig * 2 + (i & 1) + 8 * (i // 2), group + 0 * i


@arguments(shape=OneOf(*MMA_SHAPES))
def mma_dims(shape: str) -> tuple[int, int, int]:
    """``(M, N, K)`` of one ``mma.sync`` of this shape.

    >>> mma_dims("m16n8k16.bf16")
    (16, 8, 16)
    """
    return _DIMS[shape]


@arguments(shape=OneOf(*MMA_SHAPES), operand=OneOf(*OPERANDS))
def operand_shape(shape: str, operand: str) -> tuple[int, int]:
    """``(rows, cols)`` of operand ``"a"`` (M x K), ``"b"`` (K x N) or ``"c"`` (M x N).

    >>> operand_shape("m16n8k8.tf32", "b")
    (8, 8)
    """
    m, n, k = _DIMS[shape]
    return {"a": (m, k), "b": (k, n), "c": (m, n)}[operand]


@arguments(shape=OneOf(*MMA_SHAPES), operand=OneOf(*OPERANDS))
def fragment_layout(shape: str, operand: str) -> np.ndarray:
    """Where each lane's registers sit in the matrix: an int array ``(32 lanes, registers, 2)``.

    ``layout[lane, i] = (row, col)`` of the element register ``i`` of lane ``lane`` holds, in the
    ISA's register order (a0, a1, ...; for bf16, two elements share one 32-bit register: a0 and a1
    are the low and high halves of the first).

    >>> fragment_layout("m16n8k8.tf32", "c")[0].tolist()   # lane 0 holds C[0,0], C[0,1], C[8,0], C[8,1]
    [[0, 0], [0, 1], [8, 0], [8, 1]]
    """
    rows, cols = _rows_cols(shape, operand)
    return np.stack(np.broadcast_arrays(rows, cols), axis=-1).astype(np.int64)


@arguments(shape=OneOf(*MMA_SHAPES), operand=OneOf(*OPERANDS))
def fragment_owners(shape: str, operand: str) -> np.ndarray:
    """The inverse table: ``owners[row, col] = (lane, register)`` that holds that element.

    >>> fragment_owners("m16n8k8.tf32", "a")[9, 5].tolist()   # A[9, 5] is register a3 of lane 5
    [5, 3]
    """
    layout = fragment_layout(shape, operand)
    owners = np.full(operand_shape(shape, operand) + (2,), -1, dtype=np.int64)
    lanes, regs = np.meshgrid(np.arange(WARP), np.arange(layout.shape[1]), indexing="ij")
    owners[layout[..., 0], layout[..., 1]] = np.stack([lanes, regs], axis=-1)
    return owners


def _validate_matrix(name: str, x: Any, rows: int, cols: int) -> np.ndarray:
    """``x`` as a float32 numpy matrix of exactly ``rows`` x ``cols``."""
    if type(x).__module__.startswith("cupy"):
        raise BadInputError(f"{name} is a CuPy array; the fragment tables run on the CPU: pass cupy.asnumpy({name})")
    try:
        arr = np.asarray(x)
    except Exception as e:  # noqa: BLE001 - a ragged list, an object numpy cannot read
        raise BadInputError(f"{name} must be a {rows} x {cols} matrix of numbers; numpy could not read it "
                            f"({e})") from None
    if arr.dtype.kind not in "fiu" and arr.dtype.name != "bfloat16":
        raise UnsupportedDtypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if arr.shape != (rows, cols):
        raise BadInputError(f"{name} must be a {rows} x {cols} matrix for this mma shape, got shape {arr.shape}")
    return arr.astype(np.float32)


@arguments(shape=OneOf(*MMA_SHAPES), operand=OneOf(*OPERANDS))
def lane_registers(matrix: Any, shape: str, operand: str) -> np.ndarray:
    """Hand a matrix out to the warp: ``regs[lane, i]`` = the element register ``i`` of ``lane`` holds.

    Returns a float32 array ``(32, registers)``; :func:`from_lane_registers` undoes it.

    >>> a = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    >>> lane_registers(a, "m16n8k8.tf32", "a")[5].tolist()   # A[1,1], A[9,1], A[1,5], A[9,5]
    [9.0, 73.0, 13.0, 77.0]
    """
    m = _validate_matrix("matrix", matrix, *operand_shape(shape, operand))
    layout = fragment_layout(shape, operand)
    return m[layout[..., 0], layout[..., 1]]


@arguments(shape=OneOf(*MMA_SHAPES), operand=OneOf(*OPERANDS))
def from_lane_registers(registers: Any, shape: str, operand: str) -> np.ndarray:
    """Gather the warp's registers ``(32, registers)`` back into the matrix they came from.

    >>> c = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    >>> bool((from_lane_registers(lane_registers(c, "m16n8k8.tf32", "c"), "m16n8k8.tf32", "c") == c).all())
    True
    """
    layout = fragment_layout(shape, operand)
    regs = _validate_matrix("registers", registers, WARP, layout.shape[1])
    out = np.empty(operand_shape(shape, operand), dtype=np.float32)
    out[layout[..., 0], layout[..., 1]] = regs
    return out


def _validate_operands(a: Any, b: Any, c: Any, shape: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A, B, C as float32 matrices of the shape's sizes."""
    m, n, k = _DIMS[shape]
    return _validate_matrix("a", a, m, k), _validate_matrix("b", b, k, n), _validate_matrix("c", c, m, n)


def round_to_tf32(x: Any) -> np.ndarray:
    """float32 values rounded to TF32 (10 mantissa bits), to nearest with ties away from zero.

    That is ``cvt.rna.tf32.f32``: add half of the lowest kept bit to the magnitude, then drop the 13
    low bits.  Infinities and NaN pass unchanged.

    >>> float(round_to_tf32(np.float32(1 + 2**-11)))    # a tie: rounds away from zero
    1.0009765625
    >>> float(round_to_tf32(np.float32(-(1 + 2**-12))))  # below half: rounds to -1
    -1.0
    """
    arr = _validate_floats("x", x)
    bits = arr.reshape(-1).view(np.uint32)
    rounded = (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    out = np.where(np.isfinite(arr.reshape(-1)), rounded, bits).astype(np.uint32).view(np.float32)
    return out.reshape(arr.shape)


def _validate_floats(name: str, x: Any) -> np.ndarray:
    if type(x).__module__.startswith("cupy"):
        raise BadInputError(f"{name} is a CuPy array; pass cupy.asnumpy({name})")
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiu" and arr.dtype.name != "bfloat16":
        raise UnsupportedDtypeError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    return np.array(arr, dtype=np.float32)


@arguments(shape=OneOf(*MMA_SHAPES))
def round_inputs(x: Any, shape: str) -> np.ndarray:
    """``x`` as the tensor core reads a multiplicand of this shape: TF32 or bf16, returned as float32.

    >>> float(round_inputs(np.float32(1 + 2**-9), "m16n8k16.bf16"))   # bf16 keeps 7 bits
    1.0
    """
    arr = _validate_floats("x", x)
    if shape == "m16n8k8.tf32":
        return round_to_tf32(arr)
    import ml_dtypes

    return arr.astype(ml_dtypes.bfloat16).astype(np.float32)


@arguments(shape=OneOf(*MMA_SHAPES))
def mma_by_lanes(a: Any, b: Any, c: Any, shape: str = "m16n8k8.tf32") -> np.ndarray:
    """D = A B + C computed as one warp's ``mma.sync`` does: register by register, lane by lane.

    1. Round A and B as the tensor core reads them (TF32 or bf16) and hand A, B and C out to the
       32 lanes by the ISA's tables (:func:`lane_registers`).
    2. For each of its C registers, a lane needs a row of A and a column of B: read each of those
       K elements from the register of the lane that holds it (:func:`fragment_owners`) -- that
       exchange inside the warp is what the tensor core does for us.
    3. Multiply and accumulate in float32, k in order, and gather D back from the lanes' registers.

    Parameters
    ----------
    a, b, c : array_like
        A (M x K), B (K x N), C (M x N) for the shape, e.g. 16 x 8, 8 x 8, 16 x 8 for m16n8k8.
    shape : str
        One of :data:`MMA_SHAPES`.

    Returns
    -------
    numpy.ndarray
        D, float32, M x N.

    >>> rng = np.random.default_rng(0)
    >>> a, b, c = rng.standard_normal((16, 8)), rng.standard_normal((8, 8)), rng.standard_normal((16, 8))
    >>> d = mma_by_lanes(a, b, c, "m16n8k8.tf32")
    >>> bool(np.allclose(d, a @ b + c, rtol=0, atol=1e-2))
    True
    """
    a, b, c = _validate_operands(a, b, c, shape)
    k = _DIMS[shape][2]
    a, b = round_inputs(a, shape), round_inputs(b, shape)    # what the tensor core reads
    a_regs, b_regs = lane_registers(a, shape, "a"), lane_registers(b, shape, "b")
    d_regs = lane_registers(c, shape, "c").copy()           # D starts as C, in C's layout
    own_a, own_b = fragment_owners(shape, "a"), fragment_owners(shape, "b")
    rows, cols = fragment_layout(shape, "c")[..., 0], fragment_layout(shape, "c")[..., 1]
    for kk in range(k):
        a_lane, a_reg = own_a[rows, kk, 0], own_a[rows, kk, 1]     # who holds A[row, kk]
        b_lane, b_reg = own_b[kk, cols, 0], own_b[kk, cols, 1]     # who holds B[kk, col]
        d_regs += a_regs[a_lane, a_reg] * b_regs[b_lane, b_reg]   # float32 multiply-add
    return from_lane_registers(d_regs, shape, "c")
