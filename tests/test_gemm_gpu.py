"""On a GPU: every rung of lesson 09's CUDA C ladder, and cuBLAS at each precision, against a float64 product of
the same inputs rounded as the rung rounds them (TF32, bfloat16), at tile multiples and at odd sizes (the padding
path).  Skipped where no GPU answers: the stand-in GPU runs the host side in tests/test_gemm_ladder.py, the
per-thread emulation the kernels' indexing in tests/test_gemm_emulate.py."""

from __future__ import annotations

import numpy as np
import pytest

from course.devices import cupy_module, to_numpy
from course.gemm import GPU_RUNG_SPECS, GPU_RUNGS, PRECISIONS, cublas_matmul, gpu_matmul, round_to_tf32
from course.gemm.ladder import device_arch, from_bfloat16_bits, to_bfloat16_bits

pytestmark = pytest.mark.gpu

#: The largest error allowed against the float64 product of the rounded inputs, relative to the largest
#: output: float32 accumulation over k = 512 terms of unit size (the rounded inputs are exact in float64).
TOLERANCE = 2e-5
SIZES = [(512, 512, 512), (257, 130, 70), (1, 1, 1)]


def _rounded(x: np.ndarray, precision: str) -> np.ndarray:
    if precision == "tf32":
        return round_to_tf32(x).astype(np.float64)
    if precision == "bfloat16":
        import ml_dtypes

        return x.astype(ml_dtypes.bfloat16).astype(np.float64)
    return x.astype(np.float64)


def _error(got, a: np.ndarray, b: np.ndarray, precision: str) -> float:
    want = _rounded(a, precision) @ _rounded(b, precision)
    got = to_numpy(got).astype(np.float64)
    assert got.shape == want.shape and np.isfinite(got).all()
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("rung", GPU_RUNGS)
def test_every_rung_equals_a_float64_product_of_its_rounded_inputs(rung, size):
    spec = GPU_RUNG_SPECS[rung]
    if spec.precision != "float32" and device_arch() < 80:
        pytest.skip(f"{rung} needs compute capability 8.0; this GPU has {device_arch() / 10:.1f}")
    cp = cupy_module()
    m, n, k = size
    rng = np.random.default_rng(m * 7 + n)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (k, n)))
    c = gpu_matmul(cp.asarray(a), cp.asarray(b), rung)
    cp.cuda.Device().synchronize()
    assert _error(c, a, b, spec.precision) < TOLERANCE


@pytest.mark.parametrize("precision", PRECISIONS)
def test_cublas_at_each_precision_equals_a_float64_product_of_its_rounded_inputs(precision):
    if precision != "float32" and device_arch() < 80:
        pytest.skip("TF32 and bfloat16 tensor-core products need compute capability 8.0")
    cp = cupy_module()
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((384, 384)).astype(np.float32) for _ in range(2))
    got = cublas_matmul(cp.asarray(a), cp.asarray(b), precision)
    # cuBLAS may round TF32 inputs by another rule than cvt.rna (undocumented): allow TF32's own rounding there
    limit = 2e-3 if precision == "tf32" else TOLERANCE
    assert _error(got, a, b, precision) < limit


def test_the_strict_float32_peer_is_not_tf32():
    cp = cupy_module()
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((256, 256)).astype(np.float32) for _ in range(2))
    err = _error(cublas_matmul(cp.asarray(a), cp.asarray(b), "float32"), a, b, "float32")
    assert err < 1e-5, f"the float32 peer is off by {err:.1e}: that is TF32's rounding, not float32's"


def test_bfloat16_bits_made_on_the_device_round_as_numpy_does():
    cp = cupy_module()
    x = np.random.default_rng(3).standard_normal(10_000).astype(np.float32)
    import ml_dtypes

    got = from_bfloat16_bits(to_numpy(to_bfloat16_bits(cp.asarray(x))))
    np.testing.assert_array_equal(got, x.astype(ml_dtypes.bfloat16).astype(np.float32))
