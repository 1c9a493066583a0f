"""Lesson 04's library peer (issue 46): CUB's DeviceScan in place on a buffer copied before the timing, reached on
the stand-in GPU (NumPy's cumsum into the buffer, one CUB library call) and, on a real GPU, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from course.errors import BadInputError, CourseError
from course.scan import timing as st


def test_cub_in_place_scans_the_buffer_itself_as_one_library_call(standin_gpu):
    x = np.random.default_rng(0).normal(size=5000).astype(np.float32)
    buf = standin_gpu.asarray(x)
    st.validate_cub_buffer(buf)                    # the device probe's own first calls, before the count
    standin_gpu.counter.reset()
    out = st.cub_inclusive_sum_in_place(buf)
    assert out is buf and standin_gpu.counter.library_calls == 1 and standin_gpu.counter.allocations == 0
    np.testing.assert_allclose(np.asarray(buf), np.cumsum(x.astype(np.float64)), rtol=1e-4, atol=1e-3)


def test_cub_in_place_is_refused_while_a_stream_captures(standin_gpu):
    buf = standin_gpu.zeros(64, np.float32)
    st.validate_cub_buffer(buf)                    # the device probe runs once, before the capture
    s = standin_gpu.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        with pytest.raises(Exception, match="CUB"):
            st.cub_inclusive_sum_in_place(buf)
        try:
            s.end_capture()
        except Exception:  # noqa: BLE001 - the refused capture may be invalidated; that is the point
            pass


@pytest.mark.parametrize("bad", [np.zeros(4, np.float32), "x"])
def test_cub_in_place_refuses_a_host_array_with_what_to_do(standin_gpu, bad):
    with pytest.raises(CourseError, match="CuPy array"):
        st.cub_inclusive_sum_in_place(bad)


def test_cub_in_place_refuses_2d_and_float16(standin_gpu):
    with pytest.raises(BadInputError, match="1-D contiguous"):
        st.cub_inclusive_sum_in_place(standin_gpu.zeros((3, 4), np.float32))
    with pytest.raises(BadInputError, match="float32"):
        st.cub_inclusive_sum_in_place(standin_gpu.zeros(8, np.float16))


def test_the_kernel_variants_record_cub_in_place_beside_the_wrappers_on_the_standin(standin_gpu, monkeypatch):
    from course.report import SMOKE
    from course.scan import kernels
    from course.scan.experiments import scan_kernel_variants

    # the numba block scans run in numba's simulator on the stand-in (minutes): the dry run reaches them; here a
    # library scan stands in for them, so that this test times the peers alone
    monkeypatch.setattr(kernels, "block_scan", lambda x, **kw: standin_gpu.cumsum(x))

    rs = scan_kernel_variants.run(["gpu"], SMOKE, None)
    got = {r["variant"]: r for r in rs.records}
    cub = got["CUB scan in place"]
    assert cub["bytes_moved"] == 8 * cub["n"] and cub["gb_per_s"] > 0 and "CUB" in cub["library"]
    assert {"copy", "cupy.cumsum", "single-pass (look-back)"} <= set(got)


def test_the_standing_names_cub_in_place_and_torch_as_a_wrapper():
    from course.results import ResultSet

    rs = ResultSet("scan_kernel_variants", source="reference")
    rs.provenance["gpus"] = [{"name": "NVIDIA Test GPU"}]
    for variant, gb in (("copy", 3000.0), ("single-pass (look-back)", 2700.0), ("CUB scan in place", 2500.0),
                        ("torch.cumsum", 2000.0), ("cupy.cumsum", 1000.0)):
        rs.add(device="gpu", variant=variant, n=2**26, gb_per_s=gb, of_copy=gb / 3000, median_s=1e-3)
    text = "\n".join(st.single_pass_standing(rs))
    assert "CUB's DeviceScan in place (pre-copied buffer)" in text and "1.08× its rate" in text
    assert "torch.cumsum (PyTorch's wrapper of CUB)" in text


@pytest.mark.gpu
def test_cub_in_place_equals_numpy_on_the_gpu():
    from course.devices import cupy_module, require_gpu

    require_gpu()
    cp = cupy_module()
    x = np.random.default_rng(1).normal(size=3 * 4096 + 5).astype(np.float32)
    buf = cp.asarray(x)
    assert st.cub_inclusive_sum_in_place(buf) is not None
    np.testing.assert_allclose(cp.asnumpy(buf), np.cumsum(x.astype(np.float64)), rtol=1e-4, atol=1e-3)
    ints = cp.arange(10_000, dtype=cp.int32)
    st.cub_inclusive_sum_in_place(ints)
    assert np.array_equal(cp.asnumpy(ints), np.cumsum(np.arange(10_000), dtype=np.int32))
