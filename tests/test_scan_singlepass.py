"""The single-pass scan (decoupled look-back): the protocol's CPU model against numpy.cumsum for any
interleaving, the CUDA C compiled for sm_90 without a GPU, and the kernel against NumPy on a GPU."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _nvrtc import compile_cuda
from hypothesis import given, settings
from hypothesis import strategies as st

from course.errors import BadInputError
from course.scan.singlepass import (
    SINGLE_PASS_SOURCE,
    TILE_ITEMS,
    TILE_THREADS,
    lookback_model,
    single_pass_scan,
    single_pass_tiles,
)

ROOT = Path(__file__).resolve().parent.parent


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 400), tile=st.integers(1, 17), window=st.integers(1, 40),
       seed=st.one_of(st.none(), st.integers(0, 2**32 - 1)))
def test_lookback_model_equals_cumsum_in_any_interleaving(n, tile, window, seed):
    x = np.random.default_rng(seed or 0).integers(-9, 10, n)       # integers: exact sums
    out, stats = lookback_model(x, tile=tile, window=window, seed=seed)
    np.testing.assert_array_equal(out, np.cumsum(x))
    assert stats["tiles"] == -(-n // tile)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 300), tile=st.integers(1, 9), seed=st.integers(0, 2**32 - 1))
def test_lookback_model_float_sums_match_float64_cumsum(n, tile, seed):
    x = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    out, _ = lookback_model(x, tile=tile, window=32, seed=seed)
    ref = np.cumsum(x.astype(np.float64))
    assert np.max(np.abs(out - ref)) <= 1e-5 * max(1.0, float(np.max(np.abs(ref)))) * n


def test_in_order_tiles_never_wait_and_each_reads_one_flag():
    _, stats = lookback_model(np.ones(40, dtype=np.int64), tile=4, window=1, seed=None)
    assert stats["waits"] == 0 and stats["flag_reads"] == stats["tiles"] - 1
    assert stats["longest_lookback"] == 1


def test_a_random_interleaving_makes_tiles_wait_and_look_further_back():
    _, stats = lookback_model(np.ones(4000, dtype=np.int64), tile=4, window=1, seed=1)
    assert stats["waits"] > 0 and stats["longest_lookback"] > 1


def test_lookback_model_refuses_a_2d_array_and_a_zero_tile():
    with pytest.raises(BadInputError, match="1-D"):
        lookback_model(np.ones((3, 3)))
    with pytest.raises(BadInputError, match="tile"):
        lookback_model(np.ones(3), tile=0)


def test_tiles_cover_the_input():
    tile = TILE_THREADS * TILE_ITEMS
    assert [single_pass_tiles(n) for n in (0, 1, tile, tile + 1)] == [0, 1, 1, 2]


def test_single_pass_source_compiles_for_sm_90_with_nvrtc():
    ok, log = compile_cuda(SINGLE_PASS_SOURCE, "single_pass.cu", ("--std=c++14", "--gpu-architecture=compute_90"))
    assert ok, log


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_ptxas_report_lists_both_kernels_without_spills():
    res = subprocess.run([sys.executable, str(ROOT / "tools" / "ptxas_report.py"), "--arch", "sm_90"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "course_single_pass_scan_f32" in res.stdout and "course_single_pass_scan_i32" in res.stdout


def test_single_pass_scan_refuses_numpy_input_before_touching_a_gpu(monkeypatch):
    import course.scan.singlepass as sp

    monkeypatch.setattr(sp, "require_gpu", lambda: None)
    with pytest.raises(BadInputError, match="CuPy array"):
        single_pass_scan(np.ones(4, dtype=np.float32))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("n", [1, 5, 4095, 4096, 4097, 3 * 4096 + 7, 2**20 + 3, 2**24])
def test_single_pass_scan_matches_numpy(n, dtype):
    import cupy as cp

    rng = np.random.default_rng(n)
    x = rng.integers(-9, 10, n).astype(dtype) if dtype == "int32" else rng.standard_normal(n).astype(dtype)
    for _ in range(3):                       # repeated calls: the flags of earlier launches must not leak
        got = cp.asnumpy(single_pass_scan(cp.asarray(x)))
    ref = np.cumsum(x.astype(np.float64 if dtype == "float32" else np.int64))
    if dtype == "int32":
        np.testing.assert_array_equal(got, ref.astype(np.int32))
    else:
        assert np.max(np.abs(got - ref)) <= 1e-4 * max(1.0, float(np.max(np.abs(ref))))


@pytest.mark.gpu
def test_single_pass_scan_of_an_unaligned_view_and_into_out():
    import cupy as cp

    x = cp.arange(10_001, dtype=cp.int32)
    out = cp.empty(10_000, dtype=cp.int32)
    single_pass_scan(x[1:], out=out)         # 4 bytes past an aligned start: the scalar path
    np.testing.assert_array_equal(cp.asnumpy(out), np.cumsum(np.arange(1, 10_001)).astype(np.int32))
    with pytest.raises(BadInputError, match="float32"):
        single_pass_scan(cp.ones(4, dtype=cp.float64))


def test_the_library_scan_of_a_1d_array_is_called_without_axis(monkeypatch):
    """CuPy sends only ``cumsum(x)`` to CUB; ``cumsum(x, axis=0)`` takes its own, slower kernels."""
    import types

    import course.scan.timing as st

    calls = []
    fake = types.SimpleNamespace(cumsum=lambda x, **kw: calls.append(kw) or np.cumsum(x, **kw))
    monkeypatch.setattr(st, "get_xp", lambda dev: fake)
    st.library_scan(np.arange(5))
    st.library_scan(np.ones((3, 2)))
    assert calls == [{}, {"axis": 0}]


def test_the_gpu_sweep_lists_the_single_pass_scan_torch_and_the_library():
    from course.scan.timing import ALGORITHMS, scan_function

    assert {"cupy", "torch", "single-pass"} <= set(ALGORITHMS["gpu"])
    with pytest.raises(BadInputError, match="instead"):
        scan_function("single-pass", "max", "gpu")
