"""Lesson 01, the fast step's kernels: CUDA C for a GPU, and the same math in NumPy beside each one.

A training step of a ReLU MLP is a few GEMMs (cuBLAS does those well) and many small elementwise
and row operations between them.  Launched one CuPy call at a time, those small operations cost
more host time than the GPU needs for the GEMMs.  Here each one is a single kernel:

* ``bias_relu``: ``h = max(h + b, 0)`` after a GEMM, in place;
* ``mask_bias_grad``: ``dz = dh · [h > 0]`` in place and ``db = Σ_rows dz`` (the mask is optional,
  for the output layer's bias);
* ``softmax_xent``: one block per row: the logits plus their bias, the row's softmax, its
  cross-entropy and the gradient ``(softmax - one_hot) / batch``; a label out of range sets a flag
  instead of reading memory it should not;
* ``mean_loss``: one block adds the rows' losses into the batch's mean loss, on the device (what a
  framework's step computes too; it is read back only when asked for);
* ``sgd_flat``: ``p -= lr · g`` over every parameter at once (they are views of one flat buffer).

:data:`REFERENCE` holds the NumPy version of each kernel (the oracle the GPU tests compare with,
and what the fast step runs on a CPU).  :func:`ptxas_report` prints the registers and spills
``ptxas`` gives each kernel for a GPU architecture, without a GPU, where ``nvcc`` is installed.

>>> import numpy as np
>>> h = np.array([[-1.0, 2.0]], np.float32)
>>> REFERENCE["bias_relu"](h, np.array([0.5, 0.5], np.float32))
>>> h.tolist()
[[0.0, 2.5]]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..arguments import Given, arguments
from ..cuda_c import ptxas_text
from ..errors import BadInputError
from ..standin import register_kernel

__all__ = ["KERNEL_SOURCE", "KERNEL_NAMES", "REFERENCE", "bias_relu_reference", "mask_bias_grad_reference",
           "softmax_xent_reference", "mean_loss_reference", "sgd_flat_reference", "cupy_kernels", "ptxas_report",
           "require_kernel_shapes"]

#: Every kernel of the fast step, float32, in one CUDA C translation unit.
KERNEL_SOURCE = r"""
extern "C" __global__ void bias_relu(float* __restrict__ h, const float* __restrict__ b,
                                     const long long rows, const int cols)
{   // h = max(h + b, 0), in place; b is broadcast over the rows
    long long n = rows * cols;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        float v = h[i] + b[i % cols];
        h[i] = v > 0.0f ? v : 0.0f;
    }
}

extern "C" __global__ void mask_bias_grad(float* __restrict__ dz, const float* __restrict__ h,
                                          float* __restrict__ db, const int rows, const int cols,
                                          const int use_mask)
{   // blocks of 32 columns x 8 row lanes: dz *= [h > 0] in place, db[j] = sum over rows of dz[:, j]
    __shared__ float part[8][33];
    int j = blockIdx.x * 32 + threadIdx.x;
    float acc = 0.0f;
    if (j < cols) {
        for (int i = threadIdx.y; i < rows; i += 8) {
            long long k = (long long)i * cols + j;
            float v = dz[k];
            if (use_mask && !(h[k] > 0.0f)) { v = 0.0f; dz[k] = 0.0f; }
            acc += v;
        }
    }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && j < cols) {
        float s = 0.0f;
        for (int r = 0; r < 8; ++r) s += part[r][threadIdx.x];
        db[j] = s;
    }
}

extern "C" __global__ void softmax_xent(const float* __restrict__ z, const float* __restrict__ b,
                                        const long long* __restrict__ labels, float* __restrict__ dlogits,
                                        float* __restrict__ row_loss, int* __restrict__ bad_label,
                                        const int rows, const int cols)
{   // one warp-sized block per row: logits = z + b, loss = log(sum exp(l - max)) - (l[y] - max),
    // dlogits = (softmax - one_hot(y)) / rows
    int r = blockIdx.x;
    if (r >= rows) return;
    const float* zr = z + (long long)r * cols;
    float* gr = dlogits + (long long)r * cols;
    long long y = labels[r];
    bool ok = y >= 0 && y < cols;
    float m = __int_as_float(0xff800000);   // -infinity (NVRTC has no INFINITY macro)
    for (int c = threadIdx.x; c < cols; c += 32) m = fmaxf(m, zr[c] + b[c]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += 32) s += expf(zr[c] + b[c] - m);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    float inv_rows = 1.0f / rows;
    for (int c = threadIdx.x; c < cols; c += 32) {
        float p = expf(zr[c] + b[c] - m) / s;
        gr[c] = (p - (ok && c == y ? 1.0f : 0.0f)) * inv_rows;
    }
    if (threadIdx.x == 0) {
        if (ok) row_loss[r] = logf(s) - (zr[y] + b[y] - m);
        else { row_loss[r] = __int_as_float(0x7fc00000); bad_label[0] = 1; }
    }
}

extern "C" __global__ void mean_loss(const float* __restrict__ row_loss, float* __restrict__ loss, const int rows)
{   // one block of 256: the mean of the rows' losses into loss[0] (a NaN row, a bad label, stays NaN)
    __shared__ float part[8];
    float s = 0.0f;
    for (int r = threadIdx.x; r < rows; r += blockDim.x) s += row_loss[r];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int w = 0; w < blockDim.x / 32; ++w) t += part[w];
        loss[0] = t / rows;
    }
}

extern "C" __global__ void sgd_flat(float* __restrict__ p, const float* __restrict__ g, const float lr,
                                    const long long n)
{   // every parameter at once: p -= lr * g over one flat buffer
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        p[i] -= lr * g[i];
}
"""

KERNEL_NAMES = ("bias_relu", "mask_bias_grad", "softmax_xent", "mean_loss", "sgd_flat")


# ----------------------------------------------------------------------------- the same math in NumPy

#: Each kernel's arrays, and the shape each must have: ``rc`` (rows, cols) of the first, ``c`` (cols,), ``r``
#: (rows,), ``1`` at least one element, ``=`` the first's shape.
_SHAPES = {"bias_relu": {"h": "rc", "b": "c"}, "mask_bias_grad": {"dz": "rc", "h": "rc", "db": "c"},
           "softmax_xent": {"z": "rc", "b": "c", "labels": "r", "dlogits": "rc", "row_loss": "r", "bad_label": "1"},
           "mean_loss": {"row_loss": "r", "loss": "1"}, "sgd_flat": {"p": "=", "g": "="}}


def require_kernel_shapes(kernel: str, *arrays: Any) -> None:
    """Refuse arrays whose shapes kernel ``kernel``'s NumPy version does not take: numpy would broadcast some
    (a ``(rows, 1)`` bias over a ``(rows, cols)`` output) and answer for another problem, without a word."""
    spec = _SHAPES[kernel]
    first = getattr(arrays[0], "shape", None)
    if first is None or spec[next(iter(spec))] != "=" and len(first) != len(spec[next(iter(spec))]):
        raise BadInputError(f"{kernel}: {next(iter(spec))} must be a {len(spec[next(iter(spec))])}-D array, got "
                            f"{getattr(arrays[0], 'shape', type(arrays[0]).__name__)}")
    r, c = first[0] if first else None, first[-1] if len(first) > 1 else None
    want = {"rc": (r, c), "c": (c,), "r": (r,), "=": tuple(first)}
    for (name, kind), a in zip(spec.items(), arrays):
        shape = getattr(a, "shape", None)
        if shape is None or (kind == "1" and int(np.prod(shape)) < 1) or (kind != "1" and tuple(shape) != want[kind]):
            raise BadInputError(f"{kernel}: {name} must be an array of shape "
                                f"{'at least one element' if kind == '1' else want[kind]}, got "
                                f"{'no array' if shape is None else tuple(shape)}")


def bias_relu_reference(h: np.ndarray, b: np.ndarray) -> None:
    """``h = max(h + b, 0)`` in place."""
    require_kernel_shapes("bias_relu", h, b)
    h += b
    np.maximum(h, 0, out=h)


def mask_bias_grad_reference(dz: np.ndarray, h: np.ndarray, db: np.ndarray, use_mask: bool = True) -> None:
    """``dz *= [h > 0]`` in place (when ``use_mask``), then ``db = dz`` summed over the rows."""
    require_kernel_shapes("mask_bias_grad", dz, h, db)
    if use_mask:
        dz *= h > 0
    np.sum(dz, axis=0, out=db)


def softmax_xent_reference(z: np.ndarray, b: np.ndarray, labels: np.ndarray, dlogits: np.ndarray,
                           row_loss: np.ndarray, bad_label: np.ndarray) -> None:
    """Per row: the cross-entropy of ``softmax(z + b)`` against its label, and the gradient
    ``(softmax - one_hot) / rows`` into ``dlogits``; a label out of range: NaN loss and ``bad_label[0] = 1``."""
    require_kernel_shapes("softmax_xent", z, b, labels, dlogits, row_loss, bad_label)
    rows, cols = z.shape
    logits = z + b
    shifted = logits - logits.max(axis=1, keepdims=True)
    total = np.exp(shifted).sum(axis=1)
    ok = (labels >= 0) & (labels < cols)
    safe = np.where(ok, labels, 0)
    picked = shifted[np.arange(rows), safe]
    row_loss[...] = np.where(ok, np.log(total) - picked, np.nan)
    dlogits[...] = np.exp(shifted) / total[:, None]
    dlogits[np.arange(rows)[ok], safe[ok]] -= 1
    dlogits *= 1.0 / rows
    if not ok.all():
        bad_label[0] = 1


def mean_loss_reference(row_loss: np.ndarray, loss: np.ndarray) -> None:
    """``loss[0]`` = the mean of ``row_loss``."""
    require_kernel_shapes("mean_loss", row_loss, loss)
    loss[0] = row_loss.mean()


def sgd_flat_reference(p: np.ndarray, g: np.ndarray, lr: float) -> None:
    """``p -= lr · g`` in place."""
    require_kernel_shapes("sgd_flat", p, g)
    p -= p.dtype.type(lr) * g


#: kernel name -> its NumPy version (same arguments, minus the sizes the CUDA C needs).
REFERENCE = {"bias_relu": bias_relu_reference, "mask_bias_grad": mask_bias_grad_reference,
             "softmax_xent": softmax_xent_reference, "mean_loss": mean_loss_reference,
             "sgd_flat": sgd_flat_reference}


def _twin(name: str) -> Any:
    """The NumPy version of kernel ``name`` called with the CUDA launch's own arguments (the stand-in GPU
    runs it in place of the kernel): the sizes the CUDA C needs are dropped."""
    sizes = {"bias_relu": 2, "mask_bias_grad": 3, "softmax_xent": 2, "mean_loss": 1, "sgd_flat": 1}[name]

    def twin(grid: tuple, block: tuple, args: tuple) -> None:
        plain = [np.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
        if name == "mask_bias_grad":                  # (dz, h, db, rows, cols, use_mask)
            REFERENCE[name](*plain[:3], bool(plain[5]))
        elif name == "sgd_flat":                      # (p, g, lr, n)
            REFERENCE[name](plain[0], plain[1], float(plain[2]))
        else:
            REFERENCE[name](*plain[:len(plain) - sizes])
    return twin


for _name in KERNEL_NAMES:
    register_kernel(_name, _twin(_name))


# ----------------------------------------------------------------------------- on a GPU

def cupy_kernels() -> dict[str, Any]:
    """The kernels compiled by CuPy (``RawModule``), as name -> function with the arguments of
    :data:`REFERENCE` (each call is one launch on the current stream).  Needs a GPU."""
    from ..devices import cupy_module

    cp = cupy_module()
    mod = cp.RawModule(code=KERNEL_SOURCE, options=("--std=c++14",))
    k = {name: mod.get_function(name) for name in KERNEL_NAMES}

    def grid(n: int, threads: int = 256) -> int:
        return max(1, min((n + threads - 1) // threads, 65536))

    def bias_relu(h, b):
        rows, cols = h.shape
        k["bias_relu"]((grid(h.size),), (256,), (h, b, np.int64(rows), np.int32(cols)))

    def mask_bias_grad(dz, h, db, use_mask=True):
        rows, cols = dz.shape
        k["mask_bias_grad"](((cols + 31) // 32,), (32, 8), (dz, h, db, np.int32(rows), np.int32(cols),
                                                           np.int32(bool(use_mask))))

    def softmax_xent(z, b, labels, dlogits, row_loss, bad_label):
        rows, cols = z.shape
        k["softmax_xent"]((rows,), (32,), (z, b, labels, dlogits, row_loss, bad_label, np.int32(rows),
                                          np.int32(cols)))

    def mean_loss(row_loss, loss):
        k["mean_loss"]((1,), (256,), (row_loss, loss, np.int32(row_loss.size)))

    def sgd_flat(p, g, lr):
        k["sgd_flat"]((grid(p.size),), (256,), (p, g, np.float32(lr), np.int64(p.size)))

    return {"bias_relu": bias_relu, "mask_bias_grad": mask_bias_grad, "softmax_xent": softmax_xent,
            "mean_loss": mean_loss, "sgd_flat": sgd_flat}


def _validate_cuda_text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadInputError(f"{what} must be a non-empty string, got {value!r:.80}")
    return value


@arguments(arch=Given(_validate_cuda_text, what="arch, a GPU architecture such as 'sm_90',"),
           source=Given(_validate_cuda_text, what="source, the CUDA C++ source,"))
def ptxas_report(arch: str = "sm_90", source: str = KERNEL_SOURCE) -> str:
    """``ptxas -v``'s registers, shared memory and spills for each kernel of ``source`` on ``arch``
    (:func:`course.cuda_c.ptxas_text`: no GPU needed; without ``nvcc`` the answer says so)."""
    return ptxas_text(source, arch)
