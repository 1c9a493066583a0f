"""The device layer: the CPU is always described, a missing GPU gives one clear message."""

from __future__ import annotations

import importlib
import subprocess
import sys

import numpy as np
import pytest

import course
from course.errors import BadInputError, CourseError, DeviceMemoryError, GPUUnavailableError, UnsupportedDtypeError

dv = importlib.import_module("course.devices")  # the module; course.devices is the function


def test_devices_always_lists_the_cpu_first_with_its_details():
    ds = course.devices()
    cpu = ds[0]
    assert cpu.kind == "cpu" and cpu.index == 0
    assert cpu.name and cpu.name == course.cpu_info()["model"]
    assert cpu.details["logical_cores"] >= 1
    assert cpu.details["memory_bytes"] > 2**20
    assert "cpu" in repr(cpu) and "cores" in repr(cpu)
    assert all(d.kind == "gpu" for d in ds[1:])


def test_cpu_info_reports_the_simd_extensions_numpy_uses():
    info = course.cpu_info()
    assert isinstance(info["simd_used"], list)
    if info["simd_width_bits"]:
        assert info["simd_width_bits"] in (128, 256, 512)
        assert info["float32_lanes"] == info["simd_width_bits"] // 32


def test_importing_course_and_listing_devices_works_in_a_fresh_process_without_a_gpu():
    code = "import course; print(course.devices()); print(course.gpu_available())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         env={"COURSE_DISABLE_GPU": "1", "PATH": ""})
    assert out.returncode == 0, out.stderr
    assert "Device(cpu:" in out.stdout and out.stdout.strip().endswith("False")


def test_gpu_can_be_switched_off_and_then_asking_for_it_says_what_to_do(monkeypatch):
    monkeypatch.setenv("COURSE_DISABLE_GPU", "1")
    dv._probe.cache_clear()
    try:
        assert not course.gpu_available()
        assert "COURSE_DISABLE_GPU" in course.gpu_unavailable_reason()
        with pytest.raises(GPUUnavailableError) as err:
            course.get_xp("gpu")
        msg = str(err.value)
        assert "Colab" in msg and "Change runtime type" in msg and "cuda12" in msg
        assert isinstance(err.value, CourseError) and isinstance(err.value, RuntimeError)
        with pytest.raises(GPUUnavailableError):
            course.to_device(np.ones(3), "gpu")
    finally:
        monkeypatch.delenv("COURSE_DISABLE_GPU")
        dv._probe.cache_clear()


@pytest.mark.parametrize("name, expected", [("cpu", "cpu"), ("CPU", "cpu"), ("gpu", "gpu"),
                                            ("cuda", "gpu"), ("gpu:0", "gpu"), ("cuda:0", "gpu")])
def test_normalize_device_accepts_the_usual_spellings(name, expected):
    assert course.normalize_device(name) == expected


@pytest.mark.parametrize("name", ["cuda:1", "gpu:3", course.Device("gpu", 1, "some GPU")])
def test_another_gpu_than_gpu_0_is_refused_instead_of_silently_running_on_gpu_0(name):
    with pytest.raises(BadInputError, match="CUDA_VISIBLE_DEVICES"):
        course.normalize_device(name)


@pytest.mark.parametrize("name", ["gpu:x", "cpu:1", "cuda:-1"])
def test_a_malformed_device_number_is_refused_by_name(name):
    with pytest.raises(BadInputError, match="device"):
        course.normalize_device(name)


@pytest.mark.parametrize("bad", ["tpu", "", None, 3])
def test_normalize_device_rejects_unknown_devices_by_name(bad):
    with pytest.raises(BadInputError, match="'cpu' or 'gpu'"):
        course.normalize_device(bad)


def test_cpu_namespace_is_numpy_and_transfers_are_explicit_copies():
    assert course.get_xp("cpu") is np
    x = [1.0, 2.0]
    a = course.to_device(x, "cpu", dtype=np.float32)
    assert isinstance(a, np.ndarray) and a.dtype == np.float32
    assert course.array_device(a) == "cpu"
    assert course.to_numpy(a) is a
    course.synchronize("cpu")  # a no-op, must not fail


def test_check_dtype_explains_bfloat16_and_unknown_dtypes():
    assert course.validate_dtype("float32") == np.float32
    with pytest.raises(UnsupportedDtypeError, match="bfloat16"):
        course.validate_dtype("bfloat16")
    with pytest.raises(UnsupportedDtypeError, match="not a dtype"):
        course.validate_dtype("float33")
    with pytest.raises(UnsupportedDtypeError, match="not supported"):
        course.validate_dtype("datetime64[s]")


def test_check_fits_refuses_sizes_beyond_memory_with_the_numbers():
    course.require_fits(1024, "cpu")
    with pytest.raises(DeviceMemoryError) as err:
        course.require_fits(10 * 2**50, "cpu", what="a 10 PiB array")
    assert "a 10 PiB array" in str(err.value) and "smaller size" in str(err.value)
    assert isinstance(err.value, MemoryError)
    with pytest.raises(BadInputError):
        course.require_fits(-1, "cpu")


@pytest.mark.gpu
def test_gpu_is_described_and_round_trips_arrays():
    g = course.devices()[1]
    assert g.details["multiprocessors"] > 0 and g.details["memory_bytes"] > 0
    assert g.details["driver_version"] and g.details["runtime_version"]
    x = np.arange(10, dtype=np.float32)
    d = course.to_device(x, "gpu")
    assert course.array_device(d) == "gpu"
    np.testing.assert_array_equal(course.to_numpy(d * 2), x * 2)
