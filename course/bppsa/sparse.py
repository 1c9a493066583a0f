"""Sparse transposed Jacobians: why BPPSA can afford to store them.

A Jacobian ``∂y/∂x`` of a layer mapping N inputs to M outputs is an M×N matrix:
stored densely it is enormous, but most of its entries are structurally zero.

* An elementwise activation (ReLU, tanh) touches each input once: its Jacobian
  is **diagonal**, N numbers instead of N².
* A 3×3 convolution makes each output depend on at most ``3·3·C_in`` inputs: its
  Jacobian has at most that many non-zeros per row, and their values are just
  the kernel's weights.  In **CSR** form (compressed sparse rows: the values, their
  column indices, and where each row starts) it takes a tiny fraction of the dense size.

The seed's example is the first convolution of VGG-11 on a CIFAR-10 image
(32×32×3 in, 64 channels out, padding 1): :func:`vgg11_first_conv_claim` builds
that Jacobian as CSR, counts its bytes, and computes the dense size the seed
quotes as 768 MB.

Everything builds with ``scipy.sparse`` on the host; :func:`to_device_sparse`
moves a matrix to the GPU as a ``cupyx.scipy.sparse`` matrix (an explicit transfer).

>>> import numpy as np
>>> y = np.tanh(np.array([0.0, 1.0]))
>>> tanh_jacobian_t(y).toarray().round(3)
array([[1.  , 0.  ],
       [0.  , 0.42]])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from ..arguments import Dtype, Given, Seed, Whole, arguments
from ..devices import get_xp, normalize_device
from ..errors import BadInputError, whole_number
from ..limits import require_fits

__all__ = ["tanh_jacobian_t", "relu_jacobian_t", "conv2d", "conv2d_jacobian", "conv2d_jacobian_t",
           "csr_bytes", "dense_bytes", "jacobian_memory", "conv_jacobian_memory", "vgg11_first_conv_claim",
           "chain_fill_in", "to_device_sparse", "MIB", "MB", "validate_csr", "validate_claim"]

MIB = 2 ** 20   #: a mebibyte
MB = 10 ** 6    #: a megabyte
MAX_KERNEL_SIDE = 1024  #: the widest kernel conv_jacobian_memory counts
MAX_FILL_IN_DEPTH = 64  #: the most Jacobians chain_fill_in multiplies (one product per depth)


def _validate_vector(v: Any, name: str) -> np.ndarray:
    a = _validate_numbers(v, name)
    if a.ndim != 1 or a.size == 0:
        raise BadInputError(f"{name} must be a non-empty 1-d array (one layer's flattened values), "
                            f"got shape {a.shape}; flatten it with .ravel() first.")
    return a


def _validate_numbers(v: Any, name: str, dtype: Any = None) -> np.ndarray:
    """``v`` as a numpy array of real numbers (``dtype`` if given); or a clear error naming it."""
    try:
        a = np.asarray(v, dtype=dtype)
    except (TypeError, ValueError):
        raise BadInputError(f"{name} must be an array of numbers, got {type(v).__name__}") from None
    if not (np.issubdtype(a.dtype, np.number) or a.dtype == bool) or np.issubdtype(a.dtype, np.complexfloating):
        raise BadInputError(f"{name} must be an array of real numbers, got dtype {a.dtype}")
    return a


def validate_csr(m: Any) -> Any:
    """``m`` if it is a CSR matrix (scipy's, or ``cupyx.scipy.sparse``'s: its data, indices and row pointers)."""
    if not all(hasattr(m, k) for k in ("data", "indices", "indptr", "shape", "nnz")):
        raise BadInputError(f"m must be a CSR matrix (scipy.sparse.csr_matrix, e.g. conv2d_jacobian_t(...)), got "
                            f"{type(m).__name__}")
    return m


def validate_claim(claim: Any) -> dict:
    """``claim`` if it holds ``dense_bytes`` and ``csr_bytes`` above 0 (what :func:`vgg11_first_conv_claim` or
    :func:`conv_jacobian_memory` returns); or a clear error."""
    ok = isinstance(claim, dict) and all(
        isinstance(claim.get(k), (int, np.integer)) and not isinstance(claim.get(k), bool) and claim[k] > 0
        for k in ("dense_bytes", "csr_bytes"))
    if not ok:
        raise BadInputError(f"claim must be what vgg11_first_conv_claim() returns (its dense_bytes and csr_bytes), "
                            f"got {type(claim).__name__}")
    return claim


def tanh_jacobian_t(y: Any) -> sp.csr_matrix:
    """Transposed Jacobian of ``y = tanh(x)``, from the *output* y: ``diag(1 - y²)`` (CSR).

    Diagonal, so it is its own transpose; N stored values instead of N².
    """
    y = _validate_vector(y, "y")
    return sp.diags(1.0 - y.astype(float) ** 2, format="csr")


def relu_jacobian_t(x: Any) -> sp.csr_matrix:
    """Transposed Jacobian of ``relu(x)``: ``diag(x > 0)`` (CSR; the zeros are not stored)."""
    x = _validate_vector(x, "x")
    d = sp.diags((x > 0).astype(float), format="csr")
    d.eliminate_zeros()
    return d


def _validate_conv(x_shape: tuple, weight: np.ndarray, padding: int, stride: int) -> tuple[int, ...]:
    if weight.ndim != 4:
        raise BadInputError(f"weight must have shape (C_out, C_in, kh, kw), got {weight.shape}")
    if len(x_shape) != 3:
        raise BadInputError(f"the input must have shape (C_in, H, W), got {tuple(x_shape)}")
    c_out, c_in, kh, kw = weight.shape
    C, H, W = x_shape
    if C != c_in:
        raise BadInputError(f"the input has {C} channels but the weight expects {c_in} (weight shape "
                            f"{weight.shape}); they must match.")
    H, W = whole_number("H", H, hint="the image height"), whole_number("W", W, hint="the image width")
    padding = whole_number("padding", padding, 0)
    stride = whole_number("stride", stride)
    Ho = (H + 2 * padding - kh) // stride + 1
    Wo = (W + 2 * padding - kw) // stride + 1
    if Ho < 1 or Wo < 1:
        raise BadInputError(f"a {kh}×{kw} kernel does not fit a {H}×{W} image with padding {padding}")
    return c_out, c_in, kh, kw, H, W, Ho, Wo


@arguments(x=Given(_validate_numbers, name="x", dtype=float),
           weight=Given(_validate_numbers, name="weight", dtype=float),
           padding=Whole(0, hint="pixels of zeros around the image"), stride=Whole(hint="pixels between taps"))
def conv2d(x: Any, weight: Any, padding: int = 1, stride: int = 1) -> np.ndarray:
    """A plain cross-correlation (what deep-learning libraries call convolution), no bias.

    ``x (C_in, H, W)``, ``weight (C_out, C_in, kh, kw)`` -> ``(C_out, H_out, W_out)``.
    The reference the sparse Jacobian is checked against.
    """
    w = weight
    c_out, c_in, kh, kw, H, W, Ho, Wo = _validate_conv(x.shape, w, padding, stride)
    padding, stride = int(padding), int(stride)
    require_fits(8 * (c_in * (H + 2 * padding) * (W + 2 * padding) + 2 * c_out * Ho * Wo), "cpu",
                 what=f"a {H}x{W} image padded by {padding} and its {c_out}x{Ho}x{Wo} output")
    xp_ = np.pad(x, ((0, 0), (padding, padding), (padding, padding)))
    out = np.zeros((c_out, Ho, Wo))
    for di in range(kh):
        for dj in range(kw):
            patch = xp_[:, di:di + stride * Ho:stride, dj:dj + stride * Wo:stride]   # (C_in, Ho, Wo)
            out += np.einsum("oc,chw->ohw", w[:, :, di, dj], patch)
    return out


_CONV = {"weight": Given(_validate_numbers, name="weight"), "H": Whole(hint="the image height"),
         "W": Whole(hint="the image width"), "padding": Whole(0, hint="pixels of zeros around the image"),
         "stride": Whole(hint="pixels between taps"), "dtype": Dtype(floating=True)}


@arguments(**_CONV)
def conv2d_jacobian(weight: Any, H: int, W: int, padding: int = 1, stride: int = 1,
                    dtype: Any = np.float32) -> sp.csr_matrix:
    """The Jacobian ``∂y/∂x`` of :func:`conv2d` as a CSR matrix, ``(C_out·H_out·W_out, C_in·H·W)``.

    Rows and columns follow the C-order flattening of ``(C, H, W)``.  Entry
    ``[(o, i, j), (c, i·s+di-p, j·s+dj-p)] = weight[o, c, di, dj]`` wherever that
    input pixel exists (the padding contributes nothing).  The values are the
    kernel's weights: nothing depends on the input, so the Jacobian can be
    generated without any forward data.
    """
    w = np.asarray(weight)
    c_out, c_in, kh, kw, H, W, Ho, Wo = _validate_conv((w.shape[1] if w.ndim == 4 else -1, H, W), w,
                                                        padding, stride)
    padding, stride = int(padding), int(stride)
    # building it indexes a (C_out, H_out, W_out, C_in, kh, kw) grid: ~100 bytes per entry at the peak
    require_fits(100 * c_out * Ho * Wo * c_in * kh * kw, "cpu",
                 what=f"the Jacobian of a {c_out}x{c_in}x{kh}x{kw} convolution on a {H}x{W} image")
    o, i, j, c, di, dj = np.meshgrid(np.arange(c_out), np.arange(Ho), np.arange(Wo), np.arange(c_in),
                                     np.arange(kh), np.arange(kw), indexing="ij", sparse=True)
    ii = i * stride + di - padding
    jj = j * stride + dj - padding
    valid = (ii >= 0) & (ii < H) & (jj >= 0) & (jj < W)
    shape6 = (c_out, Ho, Wo, c_in, kh, kw)
    valid = np.broadcast_to(valid, shape6)
    rows = np.broadcast_to((o * Ho + i) * Wo + j, shape6)[valid]
    cols = np.broadcast_to((c * H + ii) * W + jj, shape6)[valid]
    vals = np.broadcast_to(w[o, c, di, dj], shape6)[valid].astype(dtype)
    m = sp.csr_matrix((vals, (rows, cols)), shape=(c_out * Ho * Wo, c_in * H * W))
    m.sort_indices()
    return m


@arguments(**_CONV)
def conv2d_jacobian_t(weight: Any, H: int, W: int, padding: int = 1, stride: int = 1,
                      dtype: Any = np.float32) -> sp.csr_matrix:
    """The transposed Jacobian (what back-propagation multiplies the gradient by), as CSR.

    ``Jᵀ · g`` is the gradient of the convolution's input: a "transposed convolution".
    """
    return conv2d_jacobian(weight, H, W, padding, stride, dtype).T.tocsr()


# ------------------------------------------------------------------ memory

def _matrix_shape(shape: Any) -> tuple[int, int]:
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__len__") or len(shape) != 2:
        raise BadInputError(f"shape must be (rows, columns), got {shape!r}")
    rows, cols = (whole_number("shape", s, 0, hint="rows and columns of the matrix") for s in shape)
    return rows, cols


_ITEMSIZE = Whole(hint="bytes per number, e.g. 4 for float32")


@arguments(shape=Given(_matrix_shape), itemsize=_ITEMSIZE)
def dense_bytes(shape: tuple[int, int], itemsize: int = 4) -> int:
    """Bytes of a dense matrix of ``shape``."""
    return shape[0] * shape[1] * itemsize


@arguments(m=Given(validate_csr))
def csr_bytes(m: Any) -> int:
    """Bytes a CSR matrix really holds: values + column indices + row pointers."""
    return int(m.data.nbytes + m.indices.nbytes + m.indptr.nbytes)


@arguments(m=Given(validate_csr))
def jacobian_memory(m: Any) -> dict:
    """Dense vs CSR memory of one sparse Jacobian ``m`` (same dtype for both)."""
    itemsize = m.data.dtype.itemsize
    dense = dense_bytes(m.shape, itemsize)
    sparse = csr_bytes(m)
    return {"shape": tuple(int(s) for s in m.shape), "nnz": int(m.nnz),
            "density": m.nnz / (m.shape[0] * m.shape[1]), "itemsize": itemsize,
            "dense_bytes": dense, "csr_bytes": sparse, "ratio": dense / sparse}


def _taps(size: int, k: int, padding: int, stride: int) -> tuple[int, int]:
    """(output length, total valid taps summed over the output positions) along one axis."""
    out = (size + 2 * padding - k) // stride + 1
    taps = 0
    for d in range(k):      # tap d of output o reads input o*stride + d - padding: count the o that land inside
        first = max(0, -(-(padding - d) // stride))
        last = min(out - 1, (size - 1 + padding - d) // stride)
        taps += max(0, last - first + 1)
    return int(out), taps


@arguments(H=Whole(), W=Whole(), c_in=Whole(), c_out=Whole(), k=Whole(1, MAX_KERNEL_SIDE, hint="the kernel side"),
           padding=Whole(0), stride=Whole(), itemsize=_ITEMSIZE)
def conv_jacobian_memory(H: int, W: int, c_in: int, c_out: int, k: int = 3, padding: int = 1,
                         stride: int = 1, itemsize: int = 4) -> dict:
    """Dense vs CSR bytes of a k×k convolution's transposed Jacobian, counted without building it.

    Fast for any size (the notebook's sliders); :func:`conv2d_jacobian_t` builds the
    real matrix and the tests check that both agree.
    """
    Ho, th = _taps(H, k, padding, stride)
    Wo, tw = _taps(W, k, padding, stride)
    if Ho < 1 or Wo < 1:
        raise BadInputError(f"a {k}×{k} kernel does not fit a {H}×{W} image with padding {padding}")
    rows, cols = c_in * H * W, c_out * Ho * Wo          # the transposed Jacobian's shape
    nnz = th * tw * c_in * c_out
    dense = rows * cols * itemsize
    sparse = nnz * (itemsize + 4) + (rows + 1) * 4      # values + int32 column indices + row pointers
    return {"shape": (rows, cols), "nnz": nnz, "density": nnz / (rows * cols), "itemsize": itemsize,
            "dense_bytes": dense, "csr_bytes": sparse, "ratio": dense / sparse,
            "weights_bytes": c_out * c_in * k * k * itemsize}


@arguments(seed=Seed(), dtype=Dtype(floating=True))
def vgg11_first_conv_claim(seed: int = 0, dtype: Any = np.float32) -> dict:
    """The seed's claim, computed: the first VGG-11 convolution's Jacobian on a 32×32×3 image.

    64 output channels, 3×3 kernel, padding 1: y has 64·32·32 = 65,536 values and x
    has 3·32·32 = 3,072, so the dense Jacobian holds 201,326,592 numbers.  Returns
    :func:`jacobian_memory` plus ``dense_mib``, ``dense_mb``, ``csr_mib``, and a
    ``verdict`` sentence on "768 MB".
    """
    w = np.random.default_rng(seed).standard_normal((64, 3, 3, 3))
    m = conv2d_jacobian_t(w, 32, 32, padding=1, dtype=dtype)
    r = jacobian_memory(m)
    r.update(dense_mib=r["dense_bytes"] / MIB, dense_mb=r["dense_bytes"] / MB,
             csr_mib=r["csr_bytes"] / MIB, csr_mb=r["csr_bytes"] / MB)
    holds = abs(r["dense_mib"] - 768) < 0.5
    r["verdict"] = (
        f"Dense, the Jacobian is {r['shape'][0]:,} × {r['shape'][1]:,} = "
        f"{r['shape'][0] * r['shape'][1]:,} numbers; at {r['itemsize']} bytes each that is "
        f"{r['dense_bytes']:,} bytes = {r['dense_mib']:.0f} MiB ({r['dense_mb']:.0f} MB in powers of ten). "
        + ("So the seed's '768 MB' holds for float32, counting MB as MiB (2^20 bytes). "
           if holds else "So the seed's '768 MB' does not match this dtype (it holds for float32, "
                         "counting MB as 2^20 bytes). ")
        + f"Only {r['nnz']:,} entries ({100 * r['density']:.2f}%) are non-zero: in CSR it takes "
        f"{r['csr_mib']:.1f} MiB, {r['ratio']:.0f}× less. And every value is one of the kernel's "
        f"{w.size:,} weights ({w.size * r['itemsize']:,} bytes): the Jacobian can be generated from "
        "the weights when it is needed instead of being stored.")
    r["weights_bytes"] = int(w.size * r["itemsize"])
    r["claim_holds"] = bool(holds)
    return r


@arguments(size=Whole(2, hint="the image side"), channels=Whole(),
           depth=Whole(1, MAX_FILL_IN_DEPTH, hint="the product is already dense once depth reaches size - 1"))
def chain_fill_in(depth: int, size: int = 16, channels: int = 2, seed: int = 0) -> list[dict]:
    """How products of convolution Jacobians fill in: nnz of ``J_1ᵀ · ... · J_kᵀ`` for k = 1..depth.

    BPPSA's up-sweep multiplies Jacobians together; the product of k 3×3
    convolutions is a (2k+1)×(2k+1) convolution, so its rows hold ever more
    non-zeros and sparse storage pays off less the higher a node sits in the tree.
    """
    n = channels * size * size                      # rows of each Jacobian
    reach = min(2 * depth + 1, 2 * size - 1) ** 2   # taps of the widest product, per channel pair
    require_fits(3 * 12 * n * min(n, channels * reach), "cpu",
                 what=f"products of {depth} convolution Jacobians on {channels}x{size}x{size} images")
    rng = np.random.default_rng(seed)
    prod = None
    out = []
    for k in range(1, int(depth) + 1):
        jt = conv2d_jacobian_t(rng.standard_normal((channels, channels, 3, 3)), size, size, dtype=np.float64)
        prod = jt if prod is None else (jt @ prod).tocsr()
        out.append({"k": k, "nnz": int(prod.nnz), "density": prod.nnz / (prod.shape[0] * prod.shape[1]),
                    "csr_bytes": csr_bytes(prod), "dense_bytes": dense_bytes(prod.shape, 8)})
    return out


@arguments(m=Given(validate_csr), device=Given(normalize_device))
def to_device_sparse(m: Any, device: Any = "cpu") -> Any:
    """Move a scipy CSR matrix to ``device``: itself on the CPU, ``cupyx.scipy.sparse`` on the GPU."""
    if device == "cpu":
        return m
    get_xp("gpu")                       # raises GPUUnavailableError with what to do
    import cupyx.scipy.sparse as csp

    return csp.csr_matrix(sp.csr_matrix(m))
