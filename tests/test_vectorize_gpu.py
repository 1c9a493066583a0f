"""Lesson 02 on a GPU: CuPy rungs and fused kernels give numpy's answer (skipped without a GPU);
the numba.cuda kernels are checked under the CUDA simulator everywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from course import vectorize as v
from course.errors import BadInputError
from course.vectorize import gpu as vg


def test_cuda_bodies_use_the_right_compute_type():
    assert vg.cuda_source("sigmoid", "float16").startswith("typedef float C;")
    assert vg.cuda_source("sigmoid", "float64").startswith("typedef double C;")
    with pytest.raises(BadInputError, match="'gelu'"):
        vg.cuda_source("gelu")


def test_blocks_cover_every_element():
    assert [vg.blocks_for(n, 128) for n in (0, 1, 128, 129)] == [1, 1, 1, 2]
    with pytest.raises(BadInputError, match="1..1024"):
        vg.blocks_for(10, 2048)


_SIM = r"""
import json, numpy as np
from course.vectorize.gpu import numba_elementwise
from course.vectorize import numpy_elementwise
out = {}
for op in ("relu", "sigmoid", "affine_relu"):
    for n, tpb in ((1, 32), (45, 16)):  # 45 = not a multiple of the block: the last block is partial
        x = np.random.default_rng(n).standard_normal(n).astype("float32")
        y = numba_elementwise(op, x, threads_per_block=tpb)
        out[f"{op}-{n}"] = bool(np.allclose(y, numpy_elementwise(op, x), rtol=1e-5, atol=1e-7))
print(json.dumps(out))
"""


@pytest.mark.slow
def test_numba_cuda_kernels_match_numpy_under_the_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", COURSE_DISABLE_GPU="1")
    res = subprocess.run([sys.executable, "-c", _SIM], env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    results = json.loads(res.stdout.strip().splitlines()[-1])
    assert len(results) == 6 and all(results.values()), results


@pytest.mark.gpu
@pytest.mark.parametrize("op", v.OPS)
@pytest.mark.parametrize("dtype", v.FLOAT_DTYPES)
@pytest.mark.parametrize("n", [0, 1, 1000, 2**20 + 3])
def test_gpu_rungs_match_numpy(op, dtype, n):
    import course

    x = v.random_input(n, dtype, "cpu", seed=n)
    want = v.numpy_elementwise(op, x)
    xg = course.to_device(x, "gpu")
    for rung in ("gpu", "gpu_fused"):
        got = course.to_numpy(v.elementwise(op, xg, rung))
        np.testing.assert_allclose(got.astype(float), want.astype(float), **v.tolerance(dtype), err_msg=rung)
        out = course.get_xp("gpu").empty_like(xg)
        v.elementwise(op, xg, rung, out=out)
        np.testing.assert_allclose(course.to_numpy(out).astype(float), want.astype(float),
                                   **v.tolerance(dtype), err_msg=rung + " out=")


@pytest.mark.gpu
def test_numba_kernels_on_the_gpu_match_numpy():
    import course

    x = v.random_input(10_001, "float32", "cpu")
    for op in v.OPS:
        got = course.to_numpy(vg.numba_elementwise(op, course.to_device(x, "gpu")))
        np.testing.assert_allclose(got, v.numpy_elementwise(op, x), rtol=1e-5, atol=1e-7)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [1, 3, 4, 5, 1023, 2**20 + 3])
def test_vector_relu_equals_numpy_with_every_tail_length(dtype, n):
    import course

    x = np.random.default_rng(n).standard_normal(n).astype(dtype)
    x[:: max(n // 3, 1)] = np.nan                       # NaN stays NaN, as numpy's maximum keeps it
    want = np.maximum(x, np.dtype(dtype).type(0))
    got = course.to_numpy(vg.vector_relu(course.to_device(x, "gpu")))
    np.testing.assert_array_equal(got, want)
    xg = course.to_device(x, "gpu")
    out = course.get_xp("gpu").empty_like(xg[1:])         # an odd offset: the cupy.maximum fallback
    np.testing.assert_array_equal(course.to_numpy(vg.vector_relu(xg[1:], out)), want[1:])


@pytest.mark.gpu
def test_relu_bandwidth_on_the_gpu_measures_the_vector_kernel():
    r = v.relu_bandwidth(n=2**20, device="gpu", rounds=1, repeat=3)
    assert 0 < r["vector_fraction"] and 0 < r["out_fraction"] and "threads_fraction" not in r


def test_vector_relu_without_a_gpu_says_what_to_do():
    import course

    if course.gpu_available():
        pytest.skip("a GPU answers here")
    with pytest.raises(course.GPUUnavailableError):
        vg.vector_relu(np.ones(4, np.float32))


@pytest.mark.gpu
def test_gpu_ladder_records_gpu_rungs_that_agree():
    rs = v.ladder("sigmoid", n=2**16, devices=("cpu", "gpu"), repeat=2, budget_s=0.1)
    gpu = [r for r in rs.records if r["device"] == "gpu" and r["rung"] != "copy"]
    assert {r["rung"] for r in gpu} == {"gpu", "gpu_fused"} and all(r["agrees"] for r in gpu)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cublas_matmul_matches_float64(dtype):
    from course.vectorize import timing as vt

    r = vt.time_matmul_rung("gpu", 256, dtype, repeat=2, budget_s=0.2)
    assert r["agrees"], r["rel_error"]


@pytest.mark.gpu
def test_torch_bfloat16_on_the_gpu_when_torch_sees_it():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this PyTorch build has no CUDA")
    from course.vectorize import timing as vt

    r = vt.time_matmul_rung("torch", 256, "bfloat16", "gpu", repeat=2, budget_s=0.2)
    assert r["agrees"], r["rel_error"]
