"""Lesson 01, the fast step's kernels in bfloat16 and float16: the numerics of :mod:`course.backprop.mixed` on a GPU.

A mixed-precision step keeps float32 master weights and computes in a 16-bit type ``ct``: each step rounds the
masters to ``ct`` (``cast_to``), the products take ``ct`` inputs and add in float32 (``cublasGemmEx``,
:func:`course.capture.matmul_into`), every elementwise result is rounded to ``ct``, the softmax and the loss are
float32, and the update is made on the masters.  The kernels, each in a bfloat16 (``_bf16``) and a float16
(``_f16``) version, both holding ``ct`` values as 16-bit patterns:

* ``cast_to``: float32 -> ``ct``, rounded to nearest even;
* ``bias_relu``: ``h = max(ct(h + b), 0)``, in place;
* ``softmax_xent``: the logits ``ct(z + b)`` read as float32, the row's softmax and cross-entropy in float32, the
  gradient ``(softmax - one_hot) / rows`` multiplied by the loss scale (a device number) and rounded to ``ct``;
* ``mask_bias_grad``: ``dz *= [h > 0]`` and ``db = ct(Σ_rows dz)``, added in float32;
* ``find_inf``: a flag set on the device when a gradient, divided by the scale, is inf or NaN;
* ``sgd_masters``: ``p -= lr · g / scale`` on the float32 masters, unless the flag is set (the step is skipped);
* ``scale_update`` (one thread, no ``ct``): dynamic loss scaling's decision, made on the device: after an
  overflow, halve the scale and note the skip; after ``interval`` clean steps in a row, double it; clear the flag.

No value goes back to the host: a captured graph replays the decision too.  :data:`MIXED_REFERENCE` holds each
kernel's NumPy version (``ml_dtypes.bfloat16`` and ``numpy.float16``); the stand-in GPU runs them as twins.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..arguments import OneOf, arguments
from ..standin import register_kernel

__all__ = ["MIXED_SOURCE", "MIXED_KERNEL_NAMES", "CT_SUFFIX", "MIXED_REFERENCE", "storage_dtype",
           "mixed_cupy_kernels"]

#: compute precision -> the suffix of its kernels
CT_SUFFIX = {"bfloat16": "bf16", "float16": "f16"}

_TEMPLATES = r"""
__device__ __forceinline__ float ld_bf16(unsigned short v) { return __uint_as_float(((unsigned int)v) << 16); }
__device__ __forceinline__ unsigned short st_bf16(float f)
{   // round to nearest even; a NaN stays a quiet NaN
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}
__device__ __forceinline__ float ld_f16(unsigned short v)
{ float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v)); return f; }
__device__ __forceinline__ unsigned short st_f16(float f)
{ unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
template <int F16> __device__ __forceinline__ float ld(unsigned short v) { return F16 ? ld_f16(v) : ld_bf16(v); }
template <int F16> __device__ __forceinline__ unsigned short st(float f) { return F16 ? st_f16(f) : st_bf16(f); }

template <int F16> __device__ void cast_to(const float* __restrict__ src, unsigned short* __restrict__ dst,
                                           const long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        dst[i] = st<F16>(src[i]);
}

template <int F16> __device__ void bias_relu(unsigned short* __restrict__ h, const unsigned short* __restrict__ b,
                                             const long long rows, const int cols)
{   // h = max(ct(h + b), 0), in place
    long long n = rows * cols;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        float v = ld<F16>(st<F16>(ld<F16>(h[i]) + ld<F16>(b[i % cols])));
        h[i] = v > 0.0f ? st<F16>(v) : (unsigned short)0;
    }
}

template <int F16> __device__ void softmax_xent(const unsigned short* __restrict__ z,
                                                const unsigned short* __restrict__ b,
                                                const long long* __restrict__ labels,
                                                unsigned short* __restrict__ dlogits,
                                                float* __restrict__ row_loss, int* __restrict__ bad_label,
                                                const float* __restrict__ scale, const int rows, const int cols)
{   // one warp per row: logits ct(z + b) in float32; dlogits = ct(scale * (softmax - one_hot(y)) / rows)
    int r = blockIdx.x;
    if (r >= rows) return;
    const unsigned short* zr = z + (long long)r * cols;
    unsigned short* gr = dlogits + (long long)r * cols;
    long long y = labels[r];
    bool ok = y >= 0 && y < cols;
    float m = __int_as_float(0xff800000);
    for (int c = threadIdx.x; c < cols; c += 32) m = fmaxf(m, ld<F16>(st<F16>(ld<F16>(zr[c]) + ld<F16>(b[c]))));
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += 32) s += expf(ld<F16>(st<F16>(ld<F16>(zr[c]) + ld<F16>(b[c]))) - m);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    float inv_rows = 1.0f / rows, sc = scale[0];
    for (int c = threadIdx.x; c < cols; c += 32) {
        float p = expf(ld<F16>(st<F16>(ld<F16>(zr[c]) + ld<F16>(b[c]))) - m) / s;
        gr[c] = st<F16>(((p - (ok && c == y ? 1.0f : 0.0f)) * inv_rows) * sc);
    }
    if (threadIdx.x == 0) {
        if (ok) row_loss[r] = logf(s) - (ld<F16>(st<F16>(ld<F16>(zr[y]) + ld<F16>(b[y]))) - m);
        else { row_loss[r] = __int_as_float(0x7fc00000); bad_label[0] = 1; }
    }
}

template <int F16> __device__ void mask_bias_grad(unsigned short* __restrict__ dz, const unsigned short* __restrict__ h,
                                                  unsigned short* __restrict__ db, const int rows, const int cols,
                                                  const int use_mask)
{   // blocks of 32 columns x 8 row lanes: dz *= [h > 0] in place, db[j] = ct(sum over rows of dz[:, j])
    __shared__ float part[8][33];
    int j = blockIdx.x * 32 + threadIdx.x;
    float acc = 0.0f;
    if (j < cols) {
        for (int i = threadIdx.y; i < rows; i += 8) {
            long long k = (long long)i * cols + j;
            float v = ld<F16>(dz[k]);
            if (use_mask && !(ld<F16>(h[k]) > 0.0f)) { v = 0.0f; dz[k] = 0; }
            acc += v;
        }
    }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && j < cols) {
        float s = 0.0f;
        for (int r = 0; r < 8; ++r) s += part[r][threadIdx.x];
        db[j] = st<F16>(s);
    }
}

template <int F16> __device__ void find_inf(const unsigned short* __restrict__ g, const float* __restrict__ scale,
                                            int* __restrict__ found, const long long n)
{   // found[0] = 1 when any g / scale is inf or NaN (a benign race: every writer writes 1)
    float inv = 1.0f / scale[0];
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        if (!isfinite(ld<F16>(g[i]) * inv)) found[0] = 1;
}

template <int F16> __device__ void sgd_masters(float* __restrict__ p, const unsigned short* __restrict__ g,
                                               const float lr, const float* __restrict__ scale,
                                               const int* __restrict__ found, const long long n)
{   // the float32 masters: p -= lr * (g / scale), unless the step is skipped
    if (found[0]) return;
    float sc = scale[0];
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        p[i] -= lr * (ld<F16>(g[i]) / sc);
}

extern "C" __global__ void scale_update(float* scale, int* clean, int* found, int* skipped, const float growth,
                                        const float backoff, const int interval)
{   // one thread: dynamic loss scaling's decision (PyTorch's GradScaler), on the device
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    if (found[0]) { scale[0] *= backoff; clean[0] = 0; skipped[0] = 1; skipped[1] += 1; }
    else {
        skipped[0] = 0;
        if (++clean[0] >= interval) { scale[0] *= growth; clean[0] = 0; }
    }
    found[0] = 0;
}
"""

#: Each templated kernel's parameters, for its two extern "C" entry points (``_bf16``: F16 = 0; ``_f16``: F16 = 1).
_PARAMS = {
    "cast_to": "const float* src, unsigned short* dst, const long long n",
    "bias_relu": "unsigned short* h, const unsigned short* b, const long long rows, const int cols",
    "softmax_xent": "const unsigned short* z, const unsigned short* b, const long long* labels, "
                    "unsigned short* dlogits, float* row_loss, int* bad_label, const float* scale, const int rows, "
                    "const int cols",
    "mask_bias_grad": "unsigned short* dz, const unsigned short* h, unsigned short* db, const int rows, "
                      "const int cols, const int use_mask",
    "find_inf": "const unsigned short* g, const float* scale, int* found, const long long n",
    "sgd_masters": "float* p, const unsigned short* g, const float lr, const float* scale, const int* found, "
                   "const long long n"}
_BASE = tuple(_PARAMS)


def _entry(base: str, suffix: str, f16: int) -> str:
    args = ", ".join(p.split()[-1].lstrip("*") for p in _PARAMS[base].split(","))
    return f'extern "C" __global__ void {base}_{suffix}({_PARAMS[base]}) {{ {base}<{f16}>({args}); }}\n'


#: Every kernel of the 16-bit step in one CUDA C translation unit: the templates, then their entry points.
MIXED_SOURCE = _TEMPLATES + "".join(_entry(b, s, f) for s, f in (("bf16", 0), ("f16", 1)) for b in _BASE)
MIXED_KERNEL_NAMES = tuple(f"{k}_{s}" for s in ("bf16", "f16") for k in _BASE) + ("scale_update",)


# ----------------------------------------------------------------------------- the same math in NumPy

@arguments(precision=OneOf("bfloat16", "float16"))
def storage_dtype(precision: str) -> np.dtype:
    """How a ``ct`` value is held in memory: bfloat16 as uint16 bit patterns (CuPy has no bfloat16), float16 as is."""
    return np.dtype(np.uint16 if precision == "bfloat16" else np.float16)


def _widen(a: np.ndarray) -> np.ndarray:
    """A ``ct`` array (uint16 bfloat16 bits, or float16) as float32, exactly."""
    a = np.asarray(a)
    if a.dtype == np.uint16:
        return (a.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return a.astype(np.float32)


def _store(dst: np.ndarray, values: np.ndarray) -> None:
    """``dst[...] = values`` rounded to ``dst``'s ``ct`` (to nearest even; past float16's range: inf)."""
    import ml_dtypes

    with np.errstate(over="ignore", invalid="ignore"):
        if dst.dtype == np.uint16:
            dst[...] = np.asarray(values, np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
        else:
            dst[...] = np.asarray(values, np.float32).astype(np.float16)


def _rounded(a: np.ndarray, like: np.ndarray) -> np.ndarray:
    tmp = np.empty(np.shape(a), like.dtype)
    _store(tmp, a)
    return _widen(tmp)


def cast_to_reference(src: np.ndarray, dst: np.ndarray) -> None:
    _store(dst, src)


def bias_relu_mixed_reference(h: np.ndarray, b: np.ndarray) -> None:
    _store(h, np.maximum(_rounded(_widen(h) + _widen(b), h), 0))


def softmax_xent_mixed_reference(z: np.ndarray, b: np.ndarray, labels: np.ndarray, dlogits: np.ndarray,
                                 row_loss: np.ndarray, bad_label: np.ndarray, scale: np.ndarray) -> None:
    from .step_kernels import softmax_xent_reference

    logits = _rounded(_widen(z) + _widen(b), z)
    g = np.empty(logits.shape, np.float32)
    softmax_xent_reference(logits, np.zeros(logits.shape[1], np.float32), labels, g, row_loss, bad_label)
    _store(dlogits, g * np.float32(scale[0]))


def mask_bias_grad_mixed_reference(dz: np.ndarray, h: np.ndarray, db: np.ndarray, use_mask: bool = True) -> None:
    g = _widen(dz)
    if use_mask:
        g = np.where(_widen(h) > 0, g, np.float32(0))
        _store(dz, g)
    with np.errstate(over="ignore", invalid="ignore"):       # an overflowed gradient is what the scaler watches for
        _store(db, g.sum(axis=0, dtype=np.float32))


def find_inf_reference(g: np.ndarray, scale: np.ndarray, found: np.ndarray) -> None:
    with np.errstate(over="ignore", invalid="ignore"):
        if not np.isfinite(_widen(g) / np.float32(scale[0])).all():
            found[0] = 1


def sgd_masters_reference(p: np.ndarray, g: np.ndarray, lr: float, scale: np.ndarray, found: np.ndarray) -> None:
    if not found[0]:
        p -= np.float32(lr) * (_widen(g) / np.float32(scale[0]))


def scale_update_reference(scale: np.ndarray, clean: np.ndarray, found: np.ndarray, skipped: np.ndarray,
                           growth: float, backoff: float, interval: int) -> None:
    if found[0]:
        scale[0] *= np.float32(backoff)
        clean[0], skipped[0] = 0, 1
        skipped[1] += 1
    else:
        skipped[0] = 0
        clean[0] += 1
        if clean[0] >= interval:
            scale[0] *= np.float32(growth)
            clean[0] = 0
    found[0] = 0


#: kernel base name -> its NumPy version (the ``ct`` is read from the arrays' dtype; no sizes).
MIXED_REFERENCE = {"cast_to": cast_to_reference, "bias_relu": bias_relu_mixed_reference,
                   "softmax_xent": softmax_xent_mixed_reference, "mask_bias_grad": mask_bias_grad_mixed_reference,
                   "find_inf": find_inf_reference, "sgd_masters": sgd_masters_reference,
                   "scale_update": scale_update_reference}
_SIZES = {"cast_to": 1, "bias_relu": 2, "softmax_xent": 2, "mask_bias_grad": 3, "find_inf": 1, "sgd_masters": 1,
          "scale_update": 0}


def _twin(name: str) -> Any:
    """The NumPy version of kernel ``name`` with the launch's own arguments (the sizes the CUDA C needs dropped;
    a ``_f16`` kernel's 16-bit buffers read as float16)."""
    base = name.rsplit("_", 1)[0] if name != "scale_update" else name
    f16 = name.endswith("_f16")

    def twin(grid: tuple, block: tuple, args: tuple) -> None:
        plain = [(np.asarray(a).view(np.float16) if f16 and a.dtype == np.uint16 else np.asarray(a))
                 if isinstance(a, np.ndarray) else a for a in args]
        if base == "mask_bias_grad":
            MIXED_REFERENCE[base](*plain[:3], bool(plain[5]))
        elif base == "sgd_masters":               # (p, g, lr, scale, found, n)
            MIXED_REFERENCE[base](plain[0], plain[1], float(plain[2]), plain[3], plain[4])
        elif base == "scale_update":
            MIXED_REFERENCE[base](*plain[:4], float(plain[4]), float(plain[5]), int(plain[6]))
        else:
            MIXED_REFERENCE[base](*plain[:len(plain) - _SIZES[base]])
    return twin


for _name in MIXED_KERNEL_NAMES:
    register_kernel(_name, _twin(_name))


# ----------------------------------------------------------------------------- on a GPU

@arguments(precision=OneOf("bfloat16", "float16"))
def mixed_cupy_kernels(precision: str) -> dict[str, Any]:
    """The kernels of ``precision`` ("bfloat16" or "float16") compiled by CuPy, as base name -> function with the
    arguments of :data:`MIXED_REFERENCE` (16-bit buffers passed as they are held: uint16 bits, or float16)."""
    from ..devices import cupy_module

    cp = cupy_module()
    suffix = CT_SUFFIX[precision]
    mod = cp.RawModule(code=MIXED_SOURCE, options=("--std=c++14",))
    k = {base: mod.get_function(f"{base}_{suffix}") for base in _BASE}
    k["scale_update"] = mod.get_function("scale_update")

    def grid(n: int, threads: int = 256) -> int:
        return max(1, min((n + threads - 1) // threads, 65536))

    def cast_to(src, dst):
        k["cast_to"]((grid(src.size),), (256,), (src, dst, np.int64(src.size)))

    def bias_relu(h, b):
        rows, cols = h.shape
        k["bias_relu"]((grid(h.size),), (256,), (h, b, np.int64(rows), np.int32(cols)))

    def softmax_xent(z, b, labels, dlogits, row_loss, bad_label, scale):
        rows, cols = z.shape
        k["softmax_xent"]((rows,), (32,), (z, b, labels, dlogits, row_loss, bad_label, scale, np.int32(rows),
                                          np.int32(cols)))

    def mask_bias_grad(dz, h, db, use_mask=True):
        rows, cols = dz.shape
        k["mask_bias_grad"](((cols + 31) // 32,), (32, 8), (dz, h, db, np.int32(rows), np.int32(cols),
                                                           np.int32(bool(use_mask))))

    def find_inf(g, scale, found):
        k["find_inf"]((grid(g.size),), (256,), (g, scale, found, np.int64(g.size)))

    def sgd_masters(p, g, lr, scale, found):
        k["sgd_masters"]((grid(p.size),), (256,), (p, g, np.float32(lr), scale, found, np.int64(p.size)))

    def scale_update(scale, clean, found, skipped, growth, backoff, interval):
        k["scale_update"]((1,), (32,), (scale, clean, found, skipped, np.float32(growth), np.float32(backoff),
                                        np.int32(interval)))

    return {"cast_to": cast_to, "bias_relu": bias_relu, "softmax_xent": softmax_xent,
            "mask_bias_grad": mask_bias_grad, "find_inf": find_inf, "sgd_masters": sgd_masters,
            "scale_update": scale_update}
