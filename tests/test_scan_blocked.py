"""The blocked parallel CPU scan equals numpy's cumsum (exactly on integers) for every strategy and split."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.errors import BadInputError
from course.scan.algorithms import blelloch_scan
from course.scan.blocked import (
    STRATEGIES,
    block_bounds,
    blocked_scan,
    bytes_per_element,
    scan_threads,
    sequential_cumsum,
    warm_up,
)


@pytest.fixture(scope="module", autouse=True)
def _compiled():
    warm_up(("int32", "int64", "float32", "float64"))


def _exclusive(x):
    out = np.zeros_like(x)
    out[1:] = np.cumsum(x, dtype=x.dtype)[:-1]
    return out


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(0, 300), blocks=st.integers(1, 9),
       threads=st.integers(1, 2), exclusive=st.booleans(), strategy=st.sampled_from(STRATEGIES),
       dtype=st.sampled_from(["int32", "int64"]))
def test_integer_scans_equal_numpy_cumsum_exactly(seed, n, blocks, threads, exclusive, strategy, dtype):
    x = np.random.default_rng(seed).integers(-1000, 1000, n).astype(dtype)
    want = _exclusive(x) if exclusive else np.cumsum(x, dtype=x.dtype)
    got = blocked_scan(x, exclusive=exclusive, strategy=strategy, blocks=blocks, threads=threads)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(sequential_cumsum(x, exclusive=exclusive), want)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(0, 500), blocks=st.integers(1, 5),
       tile=st.one_of(st.none(), st.just("cache"), st.integers(1, 40)), exclusive=st.booleans())
def test_tiled_scan_then_add_carries_every_tile_exactly(seed, n, blocks, tile, exclusive):
    x = np.random.default_rng(seed).integers(-1000, 1000, n)
    want = _exclusive(x) if exclusive else np.cumsum(x)
    np.testing.assert_array_equal(blocked_scan(x, exclusive=exclusive, blocks=blocks, tile=tile), want)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype,rtol", [("float32", 2e-4), ("float64", 1e-10)])
def test_float_scans_agree_with_a_float64_oracle_up_to_rounding(strategy, dtype, rtol):
    x = np.random.default_rng(1).random(100_003).astype(dtype)  # positive: no cancellation
    oracle = np.cumsum(x.astype(np.float64))
    np.testing.assert_allclose(blocked_scan(x, strategy=strategy, blocks=5), oracle, rtol=rtol)
    np.testing.assert_allclose(sequential_cumsum(x), oracle, rtol=rtol)


def test_agrees_with_the_level_by_level_teaching_scan():
    x = np.random.default_rng(2).integers(-50, 50, 1000)
    np.testing.assert_array_equal(blocked_scan(x, exclusive=True, blocks=4), blelloch_scan(x))


def test_writes_into_out_and_leaves_x_alone():
    x = np.arange(10, dtype=np.int64)
    keep = x.copy()
    out = np.empty_like(x)
    assert blocked_scan(x, out=out, blocks=3) is out
    np.testing.assert_array_equal(out, np.cumsum(keep))
    np.testing.assert_array_equal(x, keep)
    assert sequential_cumsum(x, out=out) is out


def test_more_blocks_than_elements_still_scans():
    np.testing.assert_array_equal(blocked_scan(np.array([5, 6]), blocks=8), [5, 11])
    assert blocked_scan(np.array([], dtype=np.float32)).shape == (0,)


def test_block_bounds_cover_the_sequence_once():
    bounds = block_bounds(103, 7)
    assert bounds[0][0] == 0 and bounds[-1][1] == 103
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    assert max(hi - lo for lo, hi in bounds) - min(hi - lo for lo, hi in bounds) <= 1


def test_bytes_per_element_counts_the_passes():
    assert bytes_per_element("sequential", "float32") == 8
    assert bytes_per_element("scan-then-add", "float32") == 16
    assert bytes_per_element("scan-then-add, tiled", "float32") == 8
    assert bytes_per_element("reduce-then-scan", "float64") == 24
    assert 1 <= scan_threads() and scan_threads(1) == 1


@pytest.mark.parametrize("bad,match", [
    (dict(x=np.ones((2, 2))), "1-d"),
    (dict(x=np.ones(4, dtype=np.float16)), "dtypes"),
    (dict(x=np.ones(4), strategy="fast"), "strategy"),
    (dict(x=np.ones(4), blocks=0), "blocks"),
    (dict(x=np.ones(4), threads=0), "threads"),
    (dict(x=np.ones(4), tile=0), "tile"),
    (dict(x=np.ones(4), out=np.ones(3)), "out"),
])
def test_bad_input_is_named_before_any_work(bad, match):
    with pytest.raises(BadInputError, match=match):
        blocked_scan(**bad)


def test_out_overlapping_x_is_refused():
    x = np.ones(8)
    with pytest.raises(BadInputError, match="overlap"):
        blocked_scan(x, out=x)
