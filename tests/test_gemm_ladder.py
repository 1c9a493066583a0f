"""Lesson 09's GPU ladder (course.gemm.ladder, course.gemm.cublas) on the stand-in GPU: each rung's launch checked
against its spec and counted, its product at its precision against a float64 one, the padding path at odd sizes
through the per-thread emulation, bad input refused at the door, and the CUDA C compiled for sm_75/80/90."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from course.errors import BadInputError, CourseError
from course.gemm import ladder
from course.gemm.cublas import cublas_matmul
from course.gemm.emulate import emulated_kernels
from course.gemm.ladder import GPU_RUNG_SPECS, GPU_RUNGS, gpu_matmul, kernel_source, padded_sizes

#: The relative error a product at each precision stays within (against float64, K of at most a few hundred).
TOL = {"float32": 1e-5, "tf32": 5e-3, "bfloat16": 4e-2}


def _rel(got, want) -> float:
    return float(np.max(np.abs(np.asarray(got, np.float64) - want)) / max(1e-30, float(np.max(np.abs(want)))))


def _inputs(rng, m, k, n):
    return rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)


def test_the_rungs_are_in_teaching_order_and_their_tiles_fit_their_threads():
    assert tuple(GPU_RUNG_SPECS) == GPU_RUNGS and GPU_RUNGS[0] == "naive" and GPU_RUNGS[-1] == "mma_bf16"
    for name, s in GPU_RUNG_SPECS.items():
        assert s.kernel == f"gemm_{name}" and s.block[0] * s.block[1] * s.block[2] == s.threads and s.why
        assert s.precision in ladder.PRECISIONS and s.min_arch == (80 if name.startswith("mma") else 75)
        if s.tm:                                         # every output of the block owned by exactly one thread
            assert s.bm * s.bn == s.threads * s.tm * s.tn or name == "shared"
        if s.warp_tile:                                  # warps tile the block; 16-byte copies share out evenly
            assert (s.bm // s.warp_tile[0]) * (s.bn // s.warp_tile[1]) * 32 == s.threads
            per = 8 if s.precision == "bfloat16" else 4
            assert (s.bm * s.bk // per) % s.threads == 0 and (s.bk * s.bn // per) % s.threads == 0
    v = GPU_RUNG_SPECS["vectorized"]                     # one float4 of A and one of B per thread per k-tile
    assert v.bm * v.bk == 4 * v.threads == v.bk * v.bn
    assert GPU_RUNG_SPECS["coalesced"].grid(100, 40) == (2, 4, 1) and GPU_RUNG_SPECS["naive"].grid(100, 40) == (4, 2, 1)


@pytest.mark.parametrize("rung", GPU_RUNGS)
def test_each_kernel_source_is_one_small_kernel_with_its_spec_s_numbers(rung):
    src = kernel_source(rung)
    assert "$" not in src and src.count("__global__") == 1 and re.search(rf"\b{GPU_RUNG_SPECS[rung].kernel}\(", src)
    assert 12 <= len(src.strip().splitlines()) <= 80
    assert f"__launch_bounds__({GPU_RUNG_SPECS[rung].threads})" in src
    if GPU_RUNG_SPECS[rung].bk > 1:
        assert f"BK = {GPU_RUNG_SPECS[rung].bk}" in src
    if rung.startswith("mma"):                           # compiles everywhere, computes only on sm_80+
        assert "#if __CUDA_ARCH__ >= 800" in src and "0x7fc00000" in src
    assert src in ladder.GEMM_SOURCE


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rung=st.sampled_from(GPU_RUNGS), m=st.integers(1, 300), k=st.integers(1, 70), n=st.integers(1, 300),
       seed=st.integers(0, 99))
def test_every_rung_on_the_stand_in_equals_a_float64_product_at_its_precision(standin_gpu, rung, m, k, n, seed):
    a, b = _inputs(np.random.default_rng(seed), m, k, n)
    got = gpu_matmul(standin_gpu.asarray(a), standin_gpu.asarray(b), rung)
    assert got.shape == (m, n) and got.dtype == np.float32
    assert _rel(got.get(), a.astype(np.float64) @ b) < TOL[GPU_RUNG_SPECS[rung].precision]


@pytest.mark.parametrize("rung", GPU_RUNGS)
def test_a_product_of_tile_multiples_is_one_launch_with_the_spec_s_grid(standin_gpu, rung):
    s = GPU_RUNG_SPECS[rung]
    m, n, k = 2 * s.bm, 3 * s.bn, 2 * max(s.bk, 8)
    seen = []
    from course.standin import kernel_twin, register_kernel

    real = kernel_twin(s.kernel)
    register_kernel(s.kernel, lambda grid, block, args: (seen.append((grid, block, args)), real(grid, block, args)))
    try:
        a = standin_gpu.asarray(np.ones((m, k), np.float32))
        b = standin_gpu.asarray(np.ones((k, n), np.float32))
        bits = [ladder.to_bfloat16_bits(x) for x in (a, b)] if s.precision == "bfloat16" else [a, b]
        gpu_matmul(*bits, rung)                          # warm-up: the device probe's own launches
        standin_gpu.counter.reset()
        out = gpu_matmul(*bits, rung)
    finally:
        register_kernel(s.kernel, real)
    assert standin_gpu.counter.launches == 1 and standin_gpu.counter.names[s.kernel] == 1
    grid, block, args = seen[-1]
    assert tuple(grid) == s.grid(m, n) and tuple(block) == s.block
    assert [type(x) for x in args[3:]] == [np.int32] * 3 and tuple(int(x) for x in args[3:]) == (m, n, k)
    assert np.allclose(out.get(), k)


def test_the_bfloat16_rung_reads_bits_or_rounds_float32_on_the_gpu_first(standin_gpu):
    rng = np.random.default_rng(3)
    a, b = _inputs(rng, 128, 64, 128)
    A, B = standin_gpu.asarray(a), standin_gpu.asarray(b)
    bits = [ladder.to_bfloat16_bits(x) for x in (A, B)]
    assert bits[0].dtype == np.uint16 and np.array_equal(bits[0].get(), ladder.bfloat16_bits_numpy(a))
    standin_gpu.counter.reset()
    from_float = gpu_matmul(A, B, "mma_bf16")
    assert standin_gpu.counter.names["gemm_to_bf16"] == 2 and standin_gpu.counter.names["gemm_mma_bf16"] == 1
    want = ladder.from_bfloat16_bits(bits[0].get()).astype(np.float64) @ ladder.from_bfloat16_bits(bits[1].get())
    assert _rel(from_float.get(), want) < 1e-5 and _rel(gpu_matmul(*bits, "mma_bf16").get(), want) < 1e-5


@pytest.mark.parametrize("rung", GPU_RUNGS)
def test_odd_sizes_through_the_padding_path_equal_a_float64_product_thread_by_thread(standin_gpu, rung):
    """The stand-in's twin runs the per-thread emulation: gpu_matmul's padding, grid and kernel together."""
    s = GPU_RUNG_SPECS[rung]
    m, n, k = (s.bm + 3, max(1, s.bn - 5), 2 * s.bk + 1) if not s.bounds_checked else (37, 45, 11)
    a, b = _inputs(np.random.default_rng(7), m, k, n)
    with emulated_kernels():
        got = gpu_matmul(standin_gpu.asarray(a), standin_gpu.asarray(b), rung).get()
    assert padded_sizes(rung, m, n, k) != (m, n, k) or s.bounds_checked
    want = ladder.product_at_precision(a, b, s.precision).astype(np.float64)
    assert _rel(got, want) < 1e-5


def test_a_launch_that_does_not_match_the_spec_is_refused_by_the_twin(standin_gpu):
    from course.standin import kernel_twin

    a, b, c = np.ones((128, 8), np.float32), np.ones((8, 128), np.float32), np.empty((128, 128), np.float32)
    twin = kernel_twin("gemm_blocktile_2d")
    with pytest.raises(RuntimeError, match="grid"):
        twin((2, 1, 1), (256, 1, 1), (a, b, c, np.int32(128), np.int32(128), np.int32(8)))
    with pytest.raises(RuntimeError, match="block"):
        twin((1, 1, 1), (128, 1, 1), (a, b, c, np.int32(128), np.int32(128), np.int32(8)))


def test_a_fresh_stand_in_compiles_its_own_module(standin_gpu):
    import importlib

    from course.standin import reset_standin

    devices = importlib.import_module("course.devices")    # `course.devices` the attribute is a function

    x = standin_gpu.asarray(np.ones((32, 32), np.float32))
    gpu_matmul(x, x, "shared")
    reset_standin()
    devices._probe.cache_clear()
    fresh = devices.cupy_module()
    assert fresh is not standin_gpu
    y = fresh.asarray(np.ones((32, 32), np.float32))
    fresh.counter.reset()
    gpu_matmul(y, y, "shared")
    assert fresh.counter.names["gemm_shared"] == 1


def test_bad_input_is_refused_at_the_door_before_anything_is_allocated(standin_gpu, monkeypatch):
    cp = standin_gpu
    a = cp.asarray(np.ones((64, 32), np.float32))
    gpu_matmul(a, a.T.copy(), "shared")
    cases = [((np.ones((4, 4), np.float32), a, "naive"), "a must be a CuPy array"),
             ((a, a.astype(np.float64), "naive"), "b must be float32"),
             ((a, cp.asarray(np.ones(32, np.float32)), "naive"), "b must be a matrix"),
             ((a, a, "naive"), "does not multiply"),
             ((a, a.T.copy(), "fastest"), "rung must be one of"),
             ((a, a.T.copy(), 3), "rung must be one of"),
             ((cp.asarray(np.ones((4, 4), np.uint16)), cp.asarray(np.ones((4, 4), np.uint16)), "warptile"),
              "a must be float32")]
    allocated = cp.counter.allocations
    for args, message in cases:
        with pytest.raises(BadInputError, match=message):
            gpu_matmul(*args)
    assert cp.counter.allocations == allocated
    monkeypatch.setattr(ladder, "device_arch", lambda: 75)            # a T4
    for rung in ("mma_tf32", "mma_bf16"):
        with pytest.raises(CourseError, match=r"compute capability 8\.0.*this one is 7\.5"):
            gpu_matmul(a, a.T.copy(), rung)
    assert gpu_matmul(a, a.T.copy(), "warptile").shape == (64, 64)
    for args, message in [((a, a.T.copy(), "double"), "precision must be one of"),
                          ((a.get(), a.T.copy(), "tf32"), "a must be a CuPy array")]:
        with pytest.raises(BadInputError, match=message):
            cublas_matmul(*args)


def test_the_gpu_is_needed_here_without_one():
    from course.devices import cupy_module
    from course.errors import GPUUnavailableError

    if cupy_module() is None:
        with pytest.raises(GPUUnavailableError):
            gpu_matmul(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32), "naive")


@pytest.mark.parametrize("precision", ["float32", "tf32", "bfloat16"])
def test_the_cublas_peer_on_the_stand_in_is_one_launch_at_its_precision(standin_gpu, precision):
    rng = np.random.default_rng(5)
    a, b = _inputs(rng, 70, 33, 41)
    A, B = standin_gpu.asarray(a), standin_gpu.asarray(b)
    if precision == "bfloat16":
        A, B = ladder.to_bfloat16_bits(A), ladder.to_bfloat16_bits(B)
    cublas_matmul(A, B, precision)                     # warm-up: the device probe's own launches
    standin_gpu.counter.reset()
    got = cublas_matmul(A, B, precision).get()
    assert standin_gpu.counter.launches == 1 and standin_gpu.counter.names["cublasGemmEx"] == 1
    assert np.allclose(got, ladder.product_at_precision(A.get(), B.get(), precision), rtol=1e-6, atol=1e-5)
    assert _rel(got, a.astype(np.float64) @ b) < TOL[precision]
    if precision != "float32":                        # and the rounding really happened
        assert _rel(got, a.astype(np.float64) @ b) > 1e-6


def test_the_cublas_compute_types_are_the_library_s_numbers():
    from course.gemm.cublas import COMPUTE_TYPES

    # cublas_api.h: CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77; library_types.h: CUDA_R_16BF = 14
    assert COMPUTE_TYPES == {"float32": (0, 68), "tf32": (0, 77), "bfloat16": (14, 68)}


@pytest.mark.slow
def test_every_rung_compiles_for_each_arch_without_spills():
    from _nvrtc import no_compiler

    try:
        rows = ladder.ptxas_table()
    except FileNotFoundError as exc:
        no_compiler(str(exc))
    assert {(r["rung"], r["arch"]) for r in rows} == {(g, a) for g in GPU_RUNGS for a in ("sm_75", "sm_80", "sm_90")}
    for r in rows:
        assert r["spills"] == 0 and 0 < r["registers"] <= 255, r
        if r["arch"] != "sm_75" or not r["rung"].startswith("mma"):
            assert r["smem_bytes"] <= 48 * 1024
    sm80 = {r["rung"]: r for r in rows if r["arch"] == "sm_80"}
    assert sm80["mma_tf32"]["smem_bytes"] > 0 and re.search("mma.sync", ladder.GEMM_SOURCE)
    # the table the lesson prints is this compiler's report of these sources (re-record it when they change)
    record = ladder.recorded_ptxas_table()
    assert record["rows"], "no recorded ptxas table: python tools/ptxas_report.py --record-gemm"
    import importlib.util

    spec = importlib.util.spec_from_file_location("ptxas_report", Path(__file__).parents[1] / "tools/ptxas_report.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    if tool.compiler_version() == record["compiler"]:
        assert [dict(r) for r in rows] == record["rows"], (
            "course/data/gemm_ptxas.json is out of date: python tools/ptxas_report.py --record-gemm")
    assert all(r["spills"] == 0 for r in record["rows"])
