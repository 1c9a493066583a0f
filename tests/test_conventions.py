"""One API style across the lessons, checked: a function's name says what it returns, ``devices=None``
means every device that answers, and ``seed=`` (never ``rng=``) takes a whole number or a Generator.

The names are read from every public function of the package (imported, so annotations are the
ones a reader sees); the records are checked by calling each CPU-runnable ``time_*`` at a tiny size.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import numpy as np
import pytest

import course
from course.errors import BadInputError, random_generator
from course.results import ResultSet

#: name pattern -> the return annotation it promises
RETURNS = {"time_": "dict", "benchmark": "Timing", "_timings": "dict", "_sweep": "ResultSet"}


def _public_functions():
    out = []
    for info in pkgutil.walk_packages(course.__path__, "course."):
        if info.name.endswith(("__main__", ".worker")):     # the worker runs only under mpiexec
            continue
        mod = importlib.import_module(info.name)
        for name, f in vars(mod).items():
            if inspect.isfunction(f) and f.__module__ == mod.__name__ and not name.startswith("_"):
                out.append((f"{mod.__name__}.{name}", f))
    return out


FUNCTIONS = _public_functions()


def _promise(name: str) -> str | None:
    short = name.rsplit(".", 1)[1]
    for pattern, kind in RETURNS.items():
        if short.startswith(pattern) if not pattern.startswith("_") else short.endswith(pattern):
            return kind
    return None


def test_the_package_has_functions_of_each_kind():
    kinds = {_promise(name) for name, _ in FUNCTIONS}
    assert {"dict", "Timing", "ResultSet"} <= kinds


@pytest.mark.parametrize("name, f", [(n, f) for n, f in FUNCTIONS if _promise(n)], ids=lambda v: v
                         if isinstance(v, str) else "")
def test_a_name_says_what_the_function_returns(name, f):
    """``time_*`` -> a record (dict); ``benchmark*`` -> a Timing; ``*_timings`` -> a dict of Timings;
    ``*_sweep`` -> a ResultSet."""
    assert inspect.signature(f).return_annotation == _promise(name), (
        f"{name} returns {inspect.signature(f).return_annotation!r}; its name promises {_promise(name)}")


#: numba.cuda kernels and device functions: their arguments are typed by numba at compile time
KERNEL_MODULES = {"course.kernels.reference", "course.kernels.tuned"}
KERNEL_FUNCTIONS = {"relu_element", "sigmoid_element", "affine_relu_element"}


def test_every_public_function_is_typed():
    untyped = []
    for name, f in FUNCTIONS:
        module, short = name.rsplit(".", 1)
        if module in KERNEL_MODULES or short in KERNEL_FUNCTIONS:
            continue
        sig = inspect.signature(f)
        missing = [p for p, v in sig.parameters.items() if v.annotation is inspect.Parameter.empty
                   and v.kind not in (v.VAR_POSITIONAL, v.VAR_KEYWORD)]
        if missing or sig.return_annotation is inspect.Signature.empty:
            untyped.append(f"{name}({', '.join(missing)})" + (" -> ?" if sig.return_annotation is
                                                              inspect.Signature.empty else ""))
    assert not untyped, "public functions without type hints: " + "; ".join(untyped)


def test_no_public_function_takes_rng_and_devices_default_to_every_device():
    for name, f in FUNCTIONS:
        params = inspect.signature(f).parameters
        assert "rng" not in params, f"{name} takes rng=; the course's name for it is seed="
        if "devices" in params:
            assert params["devices"].default is None, f"{name}: devices= should default to None (every device)"


@pytest.mark.parametrize("call", [
    pytest.param(lambda: course.hardware.time_matmul(8, repeat=2, budget_s=0.05), id="time_matmul"),
    pytest.param(lambda: course.backprop.timing.time_train_step([4, 2], batch=4, repeat=2, budget_s=0.05),
                 id="time_train_step"),
    pytest.param(lambda: course.vectorize.timing.time_matmul_rung("blas", 8, repeat=2, budget_s=0.05),
                 id="time_matmul_rung"),
    pytest.param(lambda: course.throughput.ops.time_op("add", 64, repeat=2, budget_s=0.05), id="time_op"),
    pytest.param(lambda: course.scan.timing.time_scan("blelloch", 64, repeat=2, budget_s=0.05), id="time_scan"),
    pytest.param(lambda: course.recurrences.timing.time_recurrence("diagonal", "scan", 16, 2, repeat=2,
                                                                   budget_s=0.05), id="time_recurrence"),
])
def test_every_time_function_returns_a_record_a_result_set_stores_as_it_is(call):
    rec = call()
    assert isinstance(rec, dict) and rec["device"] == "cpu"
    assert 0 < rec["q25_s"] <= rec["median_s"] <= rec["q75_s"] and isinstance(rec["noisy"], bool)
    rs = ResultSet("demo")
    rs.add(**rec)
    assert rs.records[0] == rec


def test_seed_takes_a_whole_number_or_a_generator_and_nothing_else():
    a, b = random_generator(3).normal(size=4), random_generator(3).normal(size=4)
    np.testing.assert_array_equal(a, b)
    g = np.random.default_rng(0)
    assert random_generator(g) is g
    for bad in (None, -1, 2.5, "0"):
        with pytest.raises(BadInputError, match="seed"):
            random_generator(bad)
    # a Generator passed on keeps drawing: two layers from one generator differ, and match numpy's draws
    from course.backprop.layers import Linear

    g = np.random.default_rng(7)
    first, second = Linear(3, 2, dtype="float64", seed=g), Linear(3, 2, dtype="float64", seed=g)
    assert not np.allclose(first.W, second.W)
    np.testing.assert_allclose(Linear(3, 2, dtype="float64", seed=7).W, first.W)
