"""The STREAM kernels compute what STREAM's loops compute, count STREAM's bytes, and refuse bad input."""

import numpy as np
import pytest

from course.errors import BadInputError
from course.memory_bandwidth import (
    KERNELS,
    WORDS,
    stream_add,
    stream_bandwidth,
    stream_copy,
    stream_scale,
    stream_threads,
    stream_triad,
)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_kernels_equal_their_numpy_formulas(dtype):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(1001).astype(dtype) for _ in range(2))
    c = np.empty_like(a)
    np.testing.assert_array_equal(stream_copy(a, c), a)
    np.testing.assert_allclose(stream_scale(a, c, 3.0), 3 * a, rtol=1e-6)
    np.testing.assert_allclose(stream_add(a, b, c), a + b, rtol=1e-6)
    out = np.empty_like(a)
    np.testing.assert_allclose(stream_triad(a, b, out, 3.0), a + 3 * b, rtol=1e-6)


def test_bandwidth_counts_stream_words_per_element():
    r = stream_bandwidth(n=2**12, repeat=2, kernels=KERNELS, threads=1, budget_s=None)
    assert r["threads"] == 1 and r["n"] == 2**12
    for k in KERNELS:
        t = r[k]["timing"]
        assert r[k]["bytes_per_s"] == pytest.approx(WORDS[k] * 2**12 * 8 / t.min)
        assert r[k]["median_bytes_per_s"] <= r[k]["bytes_per_s"] * (1 + 1e-12)


def test_threads_default_and_cap():
    assert stream_threads(1) == 1
    assert stream_threads() >= 1


@pytest.mark.parametrize("kwargs,match", [
    (dict(n=0), "n must"),
    (dict(dtype="int32"), "dtype"),
    (dict(kernels=("copy", "memset")), "kernels"),
    (dict(threads=0), "threads"),
])
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(BadInputError, match=match):
        stream_bandwidth(**{"n": 2**10, **kwargs})


def test_mismatched_arrays_are_refused():
    with pytest.raises(BadInputError, match="same shape"):
        stream_copy(np.ones(3), np.ones(4))
    with pytest.raises(BadInputError, match="contiguous 1-d"):
        stream_copy(np.ones((2, 2)), np.ones((2, 2)))
