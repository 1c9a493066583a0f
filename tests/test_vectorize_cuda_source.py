"""Lesson 02's fused elementwise bodies are valid CUDA C: compiled with NVRTC, no GPU needed.

CuPy pastes each body into an ElementwiseKernel whose arguments are ``T x, float64 a, float64 b``
and output ``T y``; the same frame is built here so that NVRTC sees what CuPy would compile.
"""

from __future__ import annotations

import pytest
from _nvrtc import compile_cuda

from course.vectorize.gpu import CUDA_BODIES, cuda_source

FRAME = """
template <typename T>
__device__ void body(const T& x, const double& a, const double& b, T& y) {{ {body} }}
extern "C" __global__ void k(const {t}* xs, {t}* ys, int n, double a, double b) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) body<{t}>(xs[i], a, b, ys[i]);
}}
"""


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", sorted(CUDA_BODIES))
def test_fused_kernel_body_compiles_with_nvrtc(op, dtype):
    t = "float" if dtype == "float32" else "double"
    ok, log = compile_cuda(FRAME.format(body=cuda_source(op, dtype), t=t), f"{op}_{dtype}.cu")
    assert ok, log


def test_vector_relu_kernels_compile_with_nvrtc():
    from course.vectorize.gpu import VECTOR_RELU_SOURCE

    ok, log = compile_cuda(VECTOR_RELU_SOURCE, "vector_relu.cu")
    assert ok, log


def test_a_broken_body_is_caught_by_the_compiler():
    ok, log = compile_cuda(FRAME.format(body="y = undefined_name(x);", t="float"), "broken.cu")
    assert not ok and "undefined_name" in log
