"""Lesson 03's generated CUDA C (the fused elementwise chain) compiles with NVRTC.

NVRTC compiles without a GPU.  It is reached through CuPy when installed, else through
``cuda.bindings`` when a libnvrtc can be loaded; otherwise the test skips and says why.
"""

from __future__ import annotations

import numpy as np
import pytest
from _nvrtc import compile_cuda

from course import throughput as T

WRAPPER = """
template <typename T> __device__ void chain(const T& x, T& y) {{
{body}
}}
extern "C" __global__ void fused_f32(const float* x, float* y, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) chain<float>(x[i], y[i]);
}}
extern "C" __global__ void fused_f64(const double* x, double* y, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) chain<double>(x[i], y[i]);
}}
"""


def _compile(src: str) -> tuple[bool, str]:
    return compile_cuda(src, "fused.cu")


@pytest.mark.parametrize("steps", [1, 3, 8])
def test_generated_fused_kernel_compiles_with_nvrtc(steps):
    body = T.fused_kernel_source(steps, "gpu")
    ok, log = _compile(WRAPPER.format(body=body))
    assert ok, f"the generated kernel body does not compile:\n{body}\n{log}"


@pytest.mark.gpu
def test_gpu_fused_kernel_in_float16_matches_numpy():
    import cupy as cp

    x = np.linspace(-3, 3, 4097).astype(np.float16)
    got = cp.asnumpy(T.fused(cp.asarray(x), 4)).astype(np.float64)
    want = T.unfused(x.astype(np.float64), 4)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
