"""The numba.cuda diagonal-scan kernels: on the CUDA simulator (CI) and on a real GPU (gpu marker).

The simulator must be switched on before numba.cuda is first imported, and other tests in this
process may import it for real; so the simulator runs in a subprocess, once for all cases.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from course.errors import BadInputError, GPUUnavailableError
from course.recurrences.kernels import chunk_plan
from course.recurrences.linear import recurrence_loop

# (name, T, n, dtype, chunk, threads, with h0)
CASES = [
    ("one step, one channel", 1, 1, "float64", 4, 4, False),
    ("one chunk: a thread per channel", 9, 3, "float64", 16, 4, True),
    ("chunks and a partial chunk", 37, 5, "float32", 8, 4, True),
    ("channels over several blocks", 20, 11, "float64", 3, 4, False),
    ("chunk of one step", 7, 2, "float64", 1, 2, True),
]

SCRIPT = r"""
import json, sys
import numpy as np
from course.recurrences.kernels import diagonal_scan, kernels_available
assert kernels_available()
out = {}
for name, T, n, dtype, chunk, threads, with_h0 in json.loads(sys.argv[1]):
    rng = np.random.default_rng(T * 100 + n)
    a = rng.uniform(-1, 1, (T, n)).astype(dtype)
    b = rng.normal(size=(T, n)).astype(dtype)
    h0 = rng.normal(size=n).astype(dtype) if with_h0 else None
    got = diagonal_scan(a, b, h0, chunk=chunk, threads=threads)
    out[name] = {"a": a.tolist(), "b": b.tolist(), "h0": None if h0 is None else h0.tolist(),
                 "got": got.tolist(), "dtype": str(got.dtype)}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def simulated():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    run = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(CASES)], env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_diagonal_scan_on_simulator_equals_the_loop(simulated, case):
    name, T, n, dtype, *_ = case
    res = simulated[name]
    assert res["dtype"] == dtype
    want = recurrence_loop(np.array(res["a"]), np.array(res["b"]), res["h0"])
    np.testing.assert_allclose(np.array(res["got"]), want, atol=1e-5 if dtype == "float32" else 1e-12)


def test_unavailable_kernels_say_what_to_do(monkeypatch):
    from course.recurrences import kernels

    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    if kernels.kernels_unavailable_reason() is None:
        pytest.skip("a CUDA GPU answers numba here")
    assert "NUMBA_ENABLE_CUDASIM=1" in kernels.kernels_unavailable_reason()
    with pytest.raises(GPUUnavailableError, match="diagonal_scan cannot run"):
        kernels.diagonal_scan(np.ones((4, 2), np.float32), np.ones((4, 2), np.float32))


@pytest.mark.parametrize("kwargs, match", [
    (dict(a=np.ones((4, 2, 2))), r"shape \(T, n\)"),
    (dict(a=np.ones((4, 2), np.float16), b=np.ones((4, 2), np.float16)), "dtype"),
    (dict(chunk=0), "chunk"),
    (dict(threads=2048), "threads"),
    (dict(h0=np.ones(3)), "h0 must have shape"),
])
def test_bad_arguments_are_rejected_before_any_launch(kwargs, match):
    from course.recurrences.kernels import diagonal_scan

    args = dict(a=np.ones((4, 2)), b=np.ones((4, 2))) | kwargs
    if args["a"].shape != args["b"].shape and "b" not in kwargs:
        args["b"] = np.ones(args["a"].shape)
    with pytest.raises(BadInputError, match=match):
        diagonal_scan(**args)


def test_chunk_plan_trades_a_long_chain_for_more_threads():
    one = chunk_plan(T=4096, n=16, chunk=4096)
    many = chunk_plan(T=4096, n=16, chunk=64)
    assert one["threads"] == 16 and one["dependent_steps"] == 4096 and one["chunks"] == 1
    assert many["threads"] == 16 * 64 and many["dependent_steps"] == 2 * 64 + 64
    assert many["reads"] == 2 * one["reads"]
    with pytest.raises(BadInputError, match="chunk"):
        chunk_plan(T=4, n=2, chunk=0)


@pytest.mark.gpu
@pytest.mark.parametrize("T, n, chunk", [(1, 1, 64), (1000, 16, 64), (4096, 3, 4096), (5000, 300, 37)])
def test_diagonal_scan_on_gpu_equals_the_loop(T, n, chunk):
    import cupy

    from course.recurrences.kernels import diagonal_scan

    rng = np.random.default_rng(T)
    a, b = rng.uniform(0.5, 1, (T, n)), rng.normal(size=(T, n))
    got = diagonal_scan(cupy.asarray(a), cupy.asarray(b), chunk=chunk)
    assert isinstance(got, cupy.ndarray)
    np.testing.assert_allclose(cupy.asnumpy(got), recurrence_loop(a, b), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(diagonal_scan(a, b, chunk=chunk), recurrence_loop(a, b), atol=1e-9)
