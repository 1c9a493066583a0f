"""The single-pass scan (decoupled look-back): the protocol's CPU model against numpy.cumsum for any
interleaving, launch after launch on one device state; the kernel's NumPy twin and the host side (one
workspace per stream, nothing allocated while capturing) on a fake CuPy; the arguments the host passes
against the kernel's C signature; and the kernel against NumPy on a GPU.  The CUDA C is compiled for
sm_75, sm_80 and sm_90 by tests/test_cuda_c.py."""

from __future__ import annotations

import functools
import re
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import course.scan.singlepass as sp
from course.errors import BadInputError
from course.scan.lookback import EPOCHS, lookback_launches, lookback_model
from course.scan.singlepass import (
    SINGLE_PASS_KERNELS,
    SINGLE_PASS_SOURCE,
    TILE_ITEMS,
    TILE_THREADS,
    single_pass_scan,
    single_pass_tiles,
)


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


# ----------------------------------------------------------------------------- several launches, one state

@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 90), min_size=1, max_size=6), tile=st.integers(1, 9),
       window=st.integers(1, 40), seed=st.one_of(st.none(), st.integers(0, 2**32 - 1)),
       epochs=st.sampled_from([2, 3, 5, EPOCHS]))
def test_launches_back_to_back_each_equal_cumsum_and_leave_a_clean_state(sizes, tile, window, seed, epochs):
    """No host reset between launches of different sizes: stale words of a longer earlier launch, and
    (with few epochs) words whose epoch tag has come round again, must never be read as this launch's."""
    rng = np.random.default_rng(seed or 0)
    xs = [rng.integers(-9, 10, n) for n in sizes]
    outs, stats = lookback_launches(xs, tile=tile, window=window, seed=seed, epochs=epochs)
    epoch = 0
    for x, out, s in zip(xs, outs, stats):
        np.testing.assert_array_equal(out, np.cumsum(x))
        assert s["epoch"] == epoch
        if x.size:                                 # an empty scan launches nothing
            epoch = (epoch + 1) % epochs
        assert s["state"] == (0, 0, epoch)


def test_a_later_tile_may_find_an_earlier_launchs_words_and_waits_for_this_ones():
    xs = [np.ones(64, dtype=np.int64), np.arange(64)]
    outs, stats = lookback_launches(xs, tile=1, window=4, seed=7)
    np.testing.assert_array_equal(outs[1], np.cumsum(np.arange(64)))
    assert stats[1]["waits"] > 0 and stats[1]["epoch"] == 1


def test_lookback_launches_refuses_a_2d_array_and_a_one_epoch_cycle():
    with pytest.raises(BadInputError, match="1-D"):
        lookback_launches([np.ones(3), np.ones((2, 2))])
    with pytest.raises(BadInputError, match="epochs"):
        lookback_launches([np.ones(3)], epochs=1)


# ----------------------------------------------------------------------------- the launch the host builds

def _c_parameters(kernel: str) -> list[str]:
    params = re.search(rf"void (?:__launch_bounds__\(\w+\)\s*)?{kernel}\(([^)]*)\)", SINGLE_PASS_SOURCE).group(1)
    return [" ".join(re.sub(r"\b(const|__restrict__)\b", "", p).split()[:-1]) for p in params.split(",")]


def _numpy_workspace(tiles: int) -> types.SimpleNamespace:
    return types.SimpleNamespace(status=np.zeros(max(tiles, 4), np.uint64), state=np.zeros(4, np.uint32))


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_the_launch_arguments_match_the_kernels_c_signature(dtype):
    """A wrong width reads garbage on a GPU, silently: each argument against its C parameter."""
    pointer = {"float*": np.float32, "int*": np.int32, "unsigned long long*": np.uint64, "unsigned int*": np.uint32}
    scalar = {"long long": np.int64, "int": np.int32}
    params = _c_parameters(SINGLE_PASS_KERNELS[dtype])
    x = np.ones(10, dtype)
    args = sp._launch_args(x, np.empty_like(x), _numpy_workspace(1))
    assert len(args) == len(params) == 7
    for a, c in zip(args, params):
        if c.endswith("*"):
            assert isinstance(a, np.ndarray) and a.dtype == pointer[c], (c, a.dtype)
        else:
            assert type(a) is scalar[c], (c, type(a))
    assert args[2] == 10 and args[5] == args[3].size           # n, and the capacity the wrap clears


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_the_twin_scans_launch_after_launch_and_leaves_the_state_clean(dtype):
    tile = TILE_THREADS * TILE_ITEMS
    ws = _numpy_workspace(single_pass_tiles(3 * tile + 5))
    rng = np.random.default_rng(0)
    for epoch, n in enumerate([3 * tile + 5, 7, tile, 2 * tile + 1]):
        x = rng.integers(-9, 10, n).astype(dtype)
        out = np.empty_like(x)
        tiles = single_pass_tiles(n)
        sp._single_pass_twin((tiles,), (TILE_THREADS,), sp._launch_args(x, out, ws))
        np.testing.assert_array_equal(out, np.cumsum(x, dtype=dtype))
        assert ws.state[:3].tolist() == [0, 0, epoch + 1]
        words = ws.status[:tiles]
        assert ((words >> np.uint64(32)) == epoch * 4 + 2).all()               # P, tagged with the epoch
        ends = np.minimum(np.arange(1, tiles + 1) * tile, n) - 1
        np.testing.assert_array_equal((words & np.uint64(0xFFFFFFFF)).astype(np.uint32), out[ends].view(np.uint32))


def test_a_replayed_launch_with_the_same_arguments_is_a_fresh_scan_each_time():
    """What a CUDA graph does: the captured argument tuple, launched again and again."""
    x = np.arange(10_000, dtype=np.int32)
    out = np.zeros_like(x)
    ws = _numpy_workspace(3)
    args = sp._launch_args(x, out, ws)
    for replay in range(3):
        out[:] = 0
        sp._single_pass_twin((3,), (TILE_THREADS,), args)
        np.testing.assert_array_equal(out, np.cumsum(x, dtype=np.int32))
        assert ws.state[2] == replay + 1


def test_the_twin_clears_the_status_words_when_the_epoch_wraps_and_refuses_a_dirty_state():
    ws = _numpy_workspace(4)
    ws.status[:] = 12345
    ws.state[2] = EPOCHS - 1
    x = np.ones(5, np.float32)
    sp._single_pass_twin((1,), (TILE_THREADS,), sp._launch_args(x, np.empty_like(x), ws))
    assert ws.state[:3].tolist() == [0, 0, 0] and not ws.status.any()
    ws.state[0] = 1                                                            # a ticket left over
    with pytest.raises(RuntimeError, match="clean state"):
        sp._single_pass_twin((1,), (TILE_THREADS,), sp._launch_args(x, np.empty_like(x), ws))


# ----------------------------------------------------------------------------- the host side, on the stand-in GPU

@pytest.fixture
def standin(monkeypatch):
    """single_pass_scan on the stand-in GPU (course.standin: NumPy posing as CuPy, its streams and graphs),
    each launch run by the kernel's registered twin; fresh workspaces and kernels, and none kept after."""
    from course.standin import StandinCupy

    cp = StandinCupy()
    monkeypatch.setattr(sp, "require_gpu", lambda: None)
    monkeypatch.setattr(sp, "cupy_module", lambda: cp)
    monkeypatch.setattr(sp, "_kernels", functools.cache(sp._kernels.__wrapped__))
    monkeypatch.setattr(sp, "_WORKSPACES", {})
    monkeypatch.setattr(sp, "_RETIRED", [])
    return cp


def _state(stream) -> list[int]:
    return np.asarray(sp._WORKSPACES[(0, stream.ptr)].state)[:3].tolist()


def test_each_stream_keeps_its_own_workspace_and_calls_interleave(standin):
    s1, s2 = standin.cuda.Stream(non_blocking=True), standin.cuda.Stream(non_blocking=True)
    x = np.arange(9000, dtype=np.int32)
    for k in range(3):
        for s in (s1, s2):
            with s:
                got = single_pass_scan(standin.asarray(x[: 5000 + k])).get()
            np.testing.assert_array_equal(got, np.cumsum(x[: 5000 + k], dtype=np.int32))
    assert set(sp._WORKSPACES) == {(0, s1.ptr), (0, s2.ptr)} and s1.ptr != s2.ptr
    assert _state(s1) == _state(s2) == [0, 0, 3]


def test_a_bigger_scan_retires_the_workspace_and_keeps_it_alive(standin):
    single_pass_scan(standin.ones(10, np.float32))
    small = sp._WORKSPACES[(0, standin.cuda.get_current_stream().ptr)]
    big = TILE_THREADS * TILE_ITEMS * 2000
    assert float(single_pass_scan(standin.ones(big, np.float32))[-1]) == big
    assert sp._RETIRED == [small] and sp._WORKSPACES[(0, small.stream.ptr)].status.size >= 2000


def test_a_captured_scan_replays_correctly_with_no_host_bookkeeping(standin):
    x = standin.asarray(np.arange(10_001, dtype=np.int32))
    out = standin.empty_like(x)
    want = np.cumsum(np.arange(10_001), dtype=np.int32)
    s = standin.cuda.Stream(non_blocking=True)
    with s:
        for kwargs, match in (({"out": out}, "before capturing"), ({}, "out=")):
            s.begin_capture()
            with pytest.raises(BadInputError, match=match):
                single_pass_scan(x, **kwargs)
            s.end_capture()
        single_pass_scan(x, out=out)                         # the workspace, made before the capture
        s.begin_capture()
        single_pass_scan(x, out=out)
        graph = s.end_capture()
        for replay in range(3):
            out[...] = 0
            graph.launch(s)
            np.testing.assert_array_equal(out.get(), want)
            np.testing.assert_array_equal(single_pass_scan(x[:77]).get(), want[:77])   # a call between replays
            assert _state(s) == [0, 0, 2 * replay + 3]


def test_a_refused_call_leaves_the_device_state_as_it_was(standin):
    x = standin.asarray(np.arange(100, dtype=np.float32))
    single_pass_scan(x)
    stream = standin.cuda.get_current_stream()
    before = _state(stream)
    with pytest.raises(BadInputError, match="contiguous"):
        single_pass_scan(x, out=standin.empty(99, np.float32))
    assert _state(stream) == before
    np.testing.assert_array_equal(single_pass_scan(x).get(), np.cumsum(np.arange(100, dtype=np.float32)))


def test_single_pass_scan_refuses_numpy_input_before_touching_a_gpu(monkeypatch):
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


@pytest.mark.gpu
def test_single_pass_scan_on_two_streams_and_replayed_from_a_cuda_graph():
    import cupy as cp

    x = cp.arange(3 * 4096 + 11, dtype=cp.int32)
    want = np.cumsum(np.arange(3 * 4096 + 11), dtype=np.int32)
    s1, s2 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    outs = [cp.empty_like(x), cp.empty_like(x)]
    big = cp.arange(2**24, dtype=cp.int32)               # 4,096 tiles: more than a new workspace holds
    big_out = cp.empty_like(big)
    cp.cuda.Device().synchronize()                       # made on the default stream; used on s1 and s2
    for _ in range(5):                       # the two streams' launches may overlap on the device
        for s, o in zip((s1, s2), outs):
            with s:
                single_pass_scan(x, out=o)
    s1.synchronize()
    s2.synchronize()
    for o in outs:
        np.testing.assert_array_equal(cp.asnumpy(o), want)
    out = outs[0]
    with s1:
        s1.begin_capture()
        try:
            with pytest.raises(BadInputError, match="before capturing"):
                single_pass_scan(big, out=big_out)
        finally:
            s1.end_capture()
        s1.begin_capture()
        single_pass_scan(x, out=out)
        graph = s1.end_capture()
        for _ in range(4):
            out.fill(0)
            graph.launch(s1)
            single_pass_scan(x, out=outs[1])     # direct calls between replays share the stream's state
        s1.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(out), want)
    np.testing.assert_array_equal(cp.asnumpy(outs[1]), want)


def test_the_library_scan_of_a_1d_array_is_called_without_axis(monkeypatch):
    """CuPy sends only ``cumsum(x)`` to CUB; ``cumsum(x, axis=0)`` takes its own, slower kernels."""
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
