"""The GPU-only bugs, each caught on the CPU where its logic allows (the rest: test_gpu_paths.py)."""

from __future__ import annotations

import importlib
import inspect
import warnings

import numpy as np
import pytest

import course
from course.errors import BadInputError, DeviceMemoryError, GPUUnavailableError
from course.scan import kernels as sk

dv = importlib.import_module("course.devices")   # `course.devices` the attribute is the function


# ---------------------------------------------------------------- scans: refused up front, right kernel

def test_cupy_has_no_max_scan_so_that_pair_is_refused_up_front_naming_what_does_it():
    from course.scan.timing import LIBRARY_OPS, scan_function

    assert "max" not in LIBRARY_OPS["gpu"] and "max" in LIBRARY_OPS["cpu"]
    with pytest.raises(BadInputError, match="numba kernel"):
        scan_function("cupy", "max", "gpu")        # no GPU needed to refuse it
    assert scan_function("numpy", "max", "cpu")(np.array([1, 3, 2])).tolist() == [1, 3, 3]


@pytest.mark.parametrize("algorithm, strategy", [("numba kernel", "scan-then-add"),
                                                 ("numba reduce-then-scan", "reduce-then-scan")])
def test_each_numba_algorithm_runs_its_own_strategy(algorithm, strategy):
    from course.scan.timing import scan_function

    f = scan_function(algorithm, "add", "gpu")
    assert f.func is sk.block_scan and f.keywords["strategy"] == strategy


def test_every_gpu_algorithm_and_operator_is_either_accepted_or_refused_by_name():
    from course.scan.algorithms import OPERATORS
    from course.scan.timing import ALGORITHMS, scan_function

    for alg in ALGORITHMS["gpu"]:
        for op in OPERATORS:
            try:
                assert callable(scan_function(alg, op, "gpu"))
            except BadInputError as exc:
                assert alg in str(exc) or "numba kernel" in str(exc)


# ---------------------------------------------------------------- the block scan's shared memory

def test_shared_memory_of_a_tile_is_counted_as_the_kernel_declares_it():
    # tile 2048 + 64 padding + 1, partials 256 + 8 + 1, four bytes each
    assert sk.shared_memory_bytes("float32", 256, 8) == (2048 + 64 + 1 + 256 + 8 + 1) * 4
    assert sk.shared_memory_bytes("float32", 256, 8, conflict_free=False) == (2048 + 1 + 256 + 1) * 4


def test_a_tile_over_48_kib_is_refused_before_anything_is_compiled_or_launched():
    x = np.zeros(10, dtype=np.float64)              # 1024 threads x 8 items of float64: ~74 KiB
    with pytest.raises(BadInputError, match="shared memory.*48 KiB"):
        sk.block_scan(x, threads=1024, items=8)    # refused here, with no GPU and no simulator
    with pytest.raises(BadInputError, match="fewer items"):
        sk.block_scan_kernels("float64", "add", 1024, 8)


def test_every_tile_shape_the_course_uses_fits_in_shared_memory():
    for dtype in sk.KERNEL_DTYPES:
        sk.require_shared_memory(dtype, 256, 8)      # the default
    for t, i in [(128, 4), (256, 4), (256, 8), (512, 8), (128, 16), (1024, 4)]:   # the report's shapes
        sk.require_shared_memory("float32", t, i)


def test_course_disable_gpu_switches_the_numba_kernels_off_too(monkeypatch):
    class AlwaysThere:
        @staticmethod
        def is_available():
            return True

    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    import course.kernel_runtime as kr

    monkeypatch.setattr(kr, "numba_cuda", AlwaysThere)
    assert sk.kernels_unavailable_reason() is None
    monkeypatch.setenv("COURSE_DISABLE_GPU", "1")
    assert "COURSE_DISABLE_GPU" in sk.kernels_unavailable_reason()
    with pytest.raises(GPUUnavailableError, match="COURSE_DISABLE_GPU"):
        sk.block_scan(np.arange(4, dtype=np.int32))


def test_numba_performance_warnings_are_kept_from_learners_but_other_warnings_are_not():
    from numba.core.errors import NumbaPerformanceWarning

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with dv.quiet_numba_launches():
            warnings.warn(NumbaPerformanceWarning("Grid size 1: GPU under-utilization"), stacklevel=1)
            warnings.warn(UserWarning("this one stays"), stacklevel=1)
    assert [type(w.message) for w in seen] == [UserWarning]


# ---------------------------------------------------------------- BPPSA: a refused size is one note

def test_rnn_sweep_notes_a_size_that_does_not_fit_and_goes_on(monkeypatch):
    from course.bppsa import timing as bt

    real = bt.rnn_timings

    def refuse_100(T, *args, **kwargs):
        if T == 100:
            raise DeviceMemoryError("the scan tree needs 3.00 GiB, but only 1.00 GiB is free")
        return real(T, *args, **kwargs)

    monkeypatch.setattr(bt, "rnn_timings", refuse_100)
    rs = bt.rnn_sweep([10, 100, 200], hidden_size=4, batch=2, include_torch=False, repeat=1, budget_s=None)
    assert sorted({r["T"] for r in rs.records}) == [10, 200]
    assert any("did not fit" in n and "T=100" in n for n in rs.notes)


# ---------------------------------------------------------------- PyTorch: one way to time it

PEER_MODULES = ("course.backprop.bench", "course.bppsa.timing", "course.vectorize.timing",
                "course.throughput.batch")


@pytest.mark.parametrize("name", PEER_MODULES)
def test_every_pytorch_comparison_times_pytorch_through_course_peers(name):
    src = inspect.getsource(importlib.import_module(name))
    assert "benchmark_torch" in src
    assert "torch.cuda.synchronize" not in src        # no host clock + synchronize of its own
    assert "def torch_available" not in src           # one answer to "is PyTorch here?"


def test_benchmark_torch_on_the_cpu_is_the_course_stopwatch():
    from course.torch_peer import benchmark_torch

    t = benchmark_torch(sum, [1, 2], device="cpu", warmup=1, repeat=3)
    assert t.repeat == 3 and t.device == "cpu" and t.warmup == 1


def test_benchmark_torch_on_a_gpu_without_one_says_why():
    from course.torch_peer import benchmark_torch, torch_cuda_available

    if torch_cuda_available():
        pytest.skip("PyTorch sees a GPU here")
    with pytest.raises((GPUUnavailableError, BadInputError), match="PyTorch"):
        benchmark_torch(lambda: None, device="gpu")


def test_course_disable_torch_hides_pytorch(monkeypatch):
    from course.torch_peer import torch_available

    monkeypatch.setenv("COURSE_DISABLE_TORCH", "1")
    assert torch_available() is False


# ---------------------------------------------------------------- numba elementwise kernels stay float32

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_numba_elementwise_arithmetic_stays_in_the_data_type(dtype):
    numba = pytest.importorskip("numba")
    from course.vectorize.gpu import ELEMENT_FUNCTIONS

    t = getattr(numba, dtype)
    for op, body in ELEMENT_FUNCTIONS.items():
        f = numba.njit(body)
        f.compile((t,) * 5)                      # v, a, b, zero, one: as the kernel passes them
        assert f.nopython_signatures[0].return_type == t, f"{op} computes in {f.nopython_signatures[0]}"


# ---------------------------------------------------------------- small ones

def test_clock_rate_falls_back_to_the_device_attribute_where_cuda_13_removed_it():
    class Runtime:
        @staticmethod
        def deviceGetAttribute(attr, device):
            assert attr == 13 and device == 0       # cudaDevAttrClockRate, in kHz
            return 1_410_000

    assert dv._clock_mhz({"clockRate": 1_590_000}, Runtime, 0) == 1590.0
    assert dv._clock_mhz({}, Runtime, 0) == 1410.0


@pytest.mark.parametrize("name, gbps", [("NVIDIA L4", 300), ("NVIDIA L40S", 864), ("Tesla T4", 320),
                                        ("NVIDIA H100 80GB HBM3", 3350), ("NVIDIA H100 PCIe", 2000),
                                        ("NVIDIA A100-SXM4-80GB", 2039), ("Some Future GPU", None)])
def test_vendor_bandwidth_matches_whole_names(name, gbps):
    from course.hardware.machine import vendor_bandwidth

    got = vendor_bandwidth(name)
    assert (got / 1e9 if got else None) == gbps


def test_checkpointing_pool_watch_is_a_no_op_on_the_cpu():
    from course.backprop.memory import PoolPeak

    with PoolPeak(None) as w:
        pass
    assert w.peak == 0


def test_a_device_out_of_memory_is_recognised_as_one():
    from course.limits import out_of_memory_errors

    assert DeviceMemoryError in out_of_memory_errors() and MemoryError in out_of_memory_errors()
    assert course.normalize_device("gpu:0") == "gpu"
