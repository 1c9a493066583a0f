"""On a real GPU, the same kernels the learner writes compile with numba.cuda.jit and give the oracle's
answer (skipped where no GPU answers)."""

from __future__ import annotations

import numpy as np
import pytest

from course.kernels import EXERCISES, gpu_kernels_available, grade, run_on_gpu

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_reference_kernels_run_on_the_gpu(name):
    if not gpu_kernels_available():
        pytest.skip("numba.cuda has no GPU here")
    ex = EXERCISES[name]
    args = ex.inputs(3)
    out = run_on_gpu(ex.reference, ex.blocks, ex.threads, **args)
    for k, want in ex.oracle(args).items():
        np.testing.assert_allclose(out[k], want, rtol=1e-5)


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_the_check_runs_the_kernel_on_the_gpu_too(name):
    if not gpu_kernels_available():
        pytest.skip("numba.cuda has no GPU here")
    g = grade(name, EXERCISES[name].reference, on_gpu=True)
    assert g.ok and any("GPU" in n for n in g.notes)


@pytest.mark.parametrize("name", ["transpose", "reduction", "scan"])
def test_the_optimisation_exercises_are_timed_against_the_device_copy(name):
    from course.kernels.tuning import TUNINGS, time_tuning
    if not gpu_kernels_available():
        pytest.skip("no GPU answers numba.cuda here")
    r = time_tuning(name, TUNINGS[name].answer, repeat=3)
    assert r["exercise"] == name and r["bytes_read"] > 2**20
    assert all(r[k] > 0 for k in ("yours_s", "start_s", "copy_s"))
