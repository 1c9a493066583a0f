"""course.arguments: rules declared above a function run once, before its body, and say what was wrong."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from course.arguments import Devices, Dtype, Given, OneOf, Optional, Real, Seed, Whole, Wholes, arguments
from course.errors import BadInputError, CourseError


def _shard_rule(batch, p):
    if batch < p:
        raise BadInputError(f"batch {batch} < p {p}")


@arguments(p=Whole(), batch=Whole(hint="samples per step"), rank=Whole(lo=0, hi="p - 1"), then=_shard_rule)
def shard(batch, p, rank=0):
    """Rows of rank ``rank``."""
    return batch, p, rank


def test_the_body_receives_the_normalised_values():
    out = shard(np.int64(8), p=np.int32(4), rank=np.int16(3))
    assert out == (8, 4, 3) and all(type(v) is int for v in out)


def test_the_function_keeps_its_name_docstring_and_signature():
    assert shard.__name__ == "shard" and shard.__doc__ == "Rows of rank ``rank``."
    assert list(inspect.signature(shard).parameters) == ["batch", "p", "rank"]
    assert set(shard.rules) == {"p", "batch", "rank"}


@pytest.mark.parametrize("kwargs, message", [
    (dict(batch=2.5, p=2), r"batch must be a whole number >= 1, got 2.5; samples per step"),
    (dict(batch=8, p=True), r"p must be a whole number >= 1, got True"),
    (dict(batch=8, p=4, rank=4), r"rank must be a whole number from 0 to 3, got 4"),
    (dict(batch=2, p=4), r"batch 2 < p 4"),
])
def test_each_rule_names_the_bad_argument(kwargs, message):
    with pytest.raises(BadInputError, match=message):
        shard(**kwargs)


def test_the_body_never_runs_on_bad_input():
    ran = []

    @arguments(n=Whole())
    def f(n):
        ran.append(n)

    with pytest.raises(CourseError):
        f(0)
    assert ran == []


def test_a_missing_argument_is_pythons_own_type_error():
    with pytest.raises(TypeError):
        shard(8)                                      # p missing: signature binding, as without the rules


@given(st.integers(-5, 50), st.integers(1, 20))
def test_a_bound_read_off_an_earlier_argument(k, n):
    @arguments(n=Whole(), k=Whole(lo=0, hi="n"))
    def f(n, k):
        return k

    if 0 <= k <= n:
        assert f(n, k) == k
    else:
        with pytest.raises(BadInputError, match="k must be a whole number from 0 to"):
            f(n, k)


def test_wholes_real_one_of_seed_optional():
    @arguments(sizes=Wholes(min_len=2), lr=Real(above=0, hi=10), act=OneOf("relu", "tanh"), seed=Seed(),
               limit=Optional(Whole()))
    def f(sizes, lr, act, seed=0, limit=None):
        return sizes, lr, act, seed, limit

    sizes, lr, act, seed, limit = f(np.array([4, 8]), 1, "ReLU")
    assert sizes == [4, 8] and lr == 1.0 and act == "relu" and isinstance(seed, np.random.Generator)
    assert limit is None and f([4, 8], 1, "tanh", limit=3)[4] == 3
    for bad, message in [(dict(sizes="48"), "sizes must be a list of whole numbers"),
                         (dict(sizes=[4]), "at least 2 whole numbers"),
                         (dict(lr=0), "lr must be a finite number > 0"),
                         (dict(lr=float("nan")), "lr must be a finite number"),
                         (dict(act="gelu"), "act must be one of 'relu', 'tanh'"),
                         (dict(seed=-1), "seed must be a whole number >= 0"),
                         (dict(limit=0), "limit must be a whole number >= 1")]:
        with pytest.raises(BadInputError, match=message):
            f(**({"sizes": [4, 8], "lr": 0.1, "act": "relu"} | bad))


def test_dtype_devices_and_a_lesson_validator():
    def validate_even(v, what="n"):
        if v % 2:
            raise BadInputError(f"{what} must be even, got {v}")
        return v

    @arguments(device=OneOf("cpu", "gpu"), dtype=Dtype(device="device"), devices=Devices(),
               n=Given(validate_even, what="the size"))
    def f(n, dtype="float32", device="cpu", devices=("cpu",)):
        return n, dtype, devices

    assert f(4) == (4, np.dtype("float32"), ["cpu"])
    with pytest.raises(BadInputError, match="the size must be even, got 3"):
        f(3)
    with pytest.raises(CourseError, match="bfloat16"):
        f(4, dtype="bfloat16")


def test_a_rule_for_an_argument_the_function_lacks_fails_when_declared():
    with pytest.raises(TypeError, match="does not take"):
        @arguments(m=Whole())
        def f(n):
            return n
    with pytest.raises(TypeError, match="declared before it"):
        @arguments(k=Whole(hi="n"), n=Whole())
        def g(n, k):
            return k
