"""The numba.cuda block-scan kernel: on the CUDA simulator (CI) and on a real GPU (gpu marker).

The simulator must be switched on before numba.cuda is first imported, and other tests in this
process may import it for real; so the simulator runs in a subprocess, once for all cases, and
each test reads its own case from the shared result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from course.errors import BadInputError, GPUUnavailableError

# (name, n, dtype, op, exclusive, threads, items, conflict_free, strategy)
CASES = [
    ("empty", 0, "int32", "add", True, 4, 2, True, "scan-then-add"),
    ("one element", 1, "float64", "add", True, 4, 2, True, "scan-then-add"),
    ("one partial tile", 7, "int64", "add", False, 4, 2, True, "reduce-then-scan"),
    ("three tile levels", 150, "int32", "add", True, 4, 2, True, "scan-then-add"),
    ("three tile levels inclusive", 150, "float64", "add", False, 4, 2, True, "scan-then-add"),
    ("reduce then scan, three levels", 150, "int32", "add", True, 4, 2, True, "reduce-then-scan"),
    ("reduce then scan, inclusive", 131, "int64", "add", False, 4, 4, False, "reduce-then-scan"),
    ("bank-conflicted layout", 300, "int32", "add", False, 8, 4, False, "scan-then-add"),
    ("padded layout, 32+ threads", 700, "int64", "add", True, 64, 2, True, "scan-then-add"),
    ("maximum", 200, "float32", "max", False, 8, 3, True, "scan-then-add"),
    ("maximum exclusive", 90, "int32", "max", True, 4, 4, True, "reduce-then-scan"),
]

SCRIPT = r"""
import json, sys
import numpy as np
from course.scan.kernels import block_scan, simulator_enabled, kernels_available
assert simulator_enabled() and kernels_available()
out = {}
for name, n, dtype, op, exclusive, threads, items, cf, strategy in json.loads(sys.argv[1]):
    x = np.random.default_rng(n).integers(-50, 50, n).astype(dtype)
    got = block_scan(x, exclusive=exclusive, op=op, threads=threads, items=items, conflict_free=cf,
                     strategy=strategy)
    out[name] = {"x": x.tolist(), "got": got.tolist(), "dtype": str(got.dtype)}
print(json.dumps(out))
"""


def _oracle(x, op, exclusive):
    inc = np.cumsum(x, dtype=x.dtype) if op == "add" else np.maximum.accumulate(x)
    if not exclusive or len(x) == 0:
        return inc
    ident = 0 if op == "add" else (-np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min)
    return np.concatenate([np.array([ident], dtype=x.dtype), inc[:-1]])


@pytest.fixture(scope="module")
def simulated():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    run = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(CASES)], env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_block_scan_on_simulator_equals_numpy(simulated, case):
    name, n, dtype, op, exclusive, *_ = case
    res = simulated[name]
    x = np.array(res["x"], dtype=dtype)
    assert res["dtype"] == dtype
    np.testing.assert_array_equal(np.array(res["got"], dtype=dtype), _oracle(x, op, exclusive))


def test_kernels_unavailable_reason_says_what_to_do(monkeypatch):
    from course.scan import kernels as sk

    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    reason = sk.kernels_unavailable_reason()
    if reason is None:
        pytest.skip("a CUDA GPU answers numba here")
    assert "NUMBA_ENABLE_CUDASIM=1" in reason and "GPU" in reason and "never from a running notebook" in reason
    with pytest.raises(GPUUnavailableError, match="block_scan cannot run"):
        sk.block_scan(np.arange(4, dtype=np.int32))


@pytest.mark.parametrize("kwargs, match", [
    (dict(dtype="float16"), "compiled for"),
    (dict(op="mul"), "knows the operators"),
    (dict(threads=48), "power of two"),
    (dict(items=0), "at least 1"),
])
def test_kernel_factory_rejects_bad_settings(kwargs, match):
    from course.scan.kernels import block_scan_kernels

    args = dict(dtype="float32", op="add", threads=32, items=2) | kwargs
    with pytest.raises(BadInputError, match=match):
        block_scan_kernels(**args)


def test_unknown_strategy_is_rejected():
    from course.scan.kernels import block_scan

    with pytest.raises(BadInputError, match="strategy must be one of"):
        block_scan(np.arange(4, dtype=np.int32), strategy="single-pass")


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 1000, 2**11, 2**11 + 1, 2**20 + 7])
@pytest.mark.parametrize("conflict_free", [True, False])
@pytest.mark.parametrize("strategy", ["scan-then-add", "reduce-then-scan"])
def test_block_scan_on_gpu_equals_numpy(n, conflict_free, strategy):
    import cupy

    from course.scan.kernels import block_scan

    x = np.random.default_rng(n).integers(-50, 50, n).astype(np.int32)
    got = block_scan(cupy.asarray(x), exclusive=False, conflict_free=conflict_free, strategy=strategy)
    assert isinstance(got, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(got), np.cumsum(x, dtype=np.int32))
    np.testing.assert_array_equal(block_scan(x, exclusive=True)[1:], np.cumsum(x, dtype=np.int32)[:-1])


@pytest.mark.gpu
def test_block_scan_float32_on_gpu_is_close_to_float64_running_sum():
    import cupy

    from course.scan.kernels import block_scan

    x = np.random.default_rng(0).random(2**22).astype(np.float32)
    got = cupy.asnumpy(block_scan(cupy.asarray(x), exclusive=False))
    np.testing.assert_allclose(got, np.cumsum(x.astype(np.float64)), rtol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [0, 1, 1000, 2**16 + 3])
def test_level_by_level_blelloch_on_cupy_equals_numpy(n):
    import cupy

    from course.scan.algorithms import affine, blelloch_scan, matmul

    rng = np.random.default_rng(n)
    x = rng.integers(-9, 9, n).astype(np.float64)
    np.testing.assert_allclose(cupy.asnumpy(blelloch_scan(cupy.asarray(x))), blelloch_scan(x))
    m = rng.normal(size=(n, 2, 2))
    np.testing.assert_allclose(cupy.asnumpy(blelloch_scan(cupy.asarray(m), op=matmul, exclusive=False)),
                               blelloch_scan(m, op=matmul, exclusive=False), atol=1e-9)
    f = np.stack([rng.uniform(-1, 1, n), rng.normal(size=n)], -1)
    np.testing.assert_allclose(cupy.asnumpy(blelloch_scan(cupy.asarray(f), op=affine)),
                               blelloch_scan(f, op=affine), atol=1e-9)


def test_conflict_degree_counts_distinct_words_in_busiest_bank():
    from course.scan.kernels import conflict_degree

    assert conflict_degree(range(32)) == 1
    assert conflict_degree([5] * 32) == 1                     # one word: a broadcast
    assert conflict_degree([0, 32, 64, 96]) == 4
    assert conflict_degree(range(0, 64, 2)) == 2


def test_padding_removes_the_bank_conflicts_of_the_per_thread_runs_and_the_tree():
    from course.scan.kernels import kernel_bank_conflicts

    plain = {r["step"]: r["degree"] for r in kernel_bank_conflicts(256, 8, conflict_free=False)}
    padded = {r["step"]: r["degree"] for r in kernel_bank_conflicts(256, 8, conflict_free=True)}
    assert plain["own run (j = 0)"] == 8 and padded["own run (j = 0)"] == 1
    assert plain["up-sweep, stride 1 (left reads)"] == 2
    assert max(plain.values()) == 8 and max(padded.values()) == 1
    assert plain["load tile (k = 0)"] == padded["load tile (k = 0)"] == 1
