"""The in-notebook CUDA simulator and its trace: runs after the real numba.cuda is imported,
records every access with its thread and barrier phase, and finds races, out-of-bounds accesses
and barriers in branches."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import cuda, float32

from course.errors import BadInputError
from course.kernels import EXERCISES, KernelFailed, KernelIndexError, Trace, TracedArray, simulate

TPB = 4


def copy_kernel(out, a, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = a[i]


def unguarded(out, a):
    i = cuda.grid(1)
    out[i] = a[i]


def shifted_without_barrier(out, a):
    cache = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    cache[t] = a[t]
    out[t] = cache[(t + 1) % TPB]       # reads a neighbour's slot with no barrier in between


def shifted_with_barrier(out, a):
    cache = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    cache[t] = a[t]
    cuda.syncthreads()
    out[t] = cache[(t + 1) % TPB]


def test_runs_in_process_after_the_real_numba_cuda_was_imported():
    """No environment variable, no restart: the real numba.cuda is imported (this module did), and
    a kernel decorated with the real @cuda.jit runs on the simulator all the same."""
    assert "numba.cuda" in sys.modules
    jitted = cuda.jit(copy_kernel)
    res, _ = simulate(jitted, 2, 4, out=np.zeros(6), a=np.arange(6.0), n=6)
    np.testing.assert_array_equal(res["out"], np.arange(6.0))
    assert copy_kernel.__globals__["cuda"] is cuda          # the kernel's global is put back


@pytest.mark.slow
def test_runs_in_a_fresh_process_that_imported_numba_cuda_first():
    code = ("from numba import cuda; import numpy as np\n"
            "from course.kernels import simulate, reference\n"
            "r, _ = simulate(reference.relu_map, 1, 8, out=np.zeros(8), a=np.arange(-4.0, 4.0))\n"
            "print(r['out'].tolist())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str([0.0] * 5 + [1.0, 2.0, 3.0])


def test_the_callers_arrays_are_not_changed():
    a, out = np.arange(4.0), np.zeros(4)
    simulate(copy_kernel, 1, 4, out=out, a=a, n=4)
    assert not out.any()


def test_out_of_bounds_is_caught_and_recorded():
    with pytest.raises(KernelFailed) as info:
        simulate(unguarded, 2, 4, out=np.zeros(6), a=np.arange(6.0))
    assert isinstance(info.value.cause, KernelIndexError)
    assert "out of bounds" in str(info.value) and "shape (6,)" in str(info.value)
    assert info.value.trace.out_of_bounds()


def test_a_read_before_the_barrier_is_a_race_and_the_barrier_removes_it():
    _, tr = simulate(shifted_without_barrier, 1, TPB, out=np.zeros(TPB, np.float32), a=np.ones(TPB, np.float32))
    assert any("read before the barrier" in r for r in tr.races())
    res, tr = simulate(shifted_with_barrier, 1, TPB, out=np.zeros(TPB, np.float32),
                       a=np.arange(TPB, dtype=np.float32))
    assert tr.races() == []
    np.testing.assert_array_equal(res["out"], np.roll(np.arange(TPB), -1))


def test_accesses_carry_their_barrier_phase_and_shared_arrays_their_variable_name():
    _, tr = simulate(shifted_with_barrier, 1, TPB, out=np.zeros(TPB, np.float32), a=np.ones(TPB, np.float32))
    assert {a.phase for a in tr.accesses if a.space == "shared" and a.kind == "W"} == {0}
    assert {a.phase for a in tr.accesses if a.space == "shared" and a.kind == "R"} == {1}
    assert tr.shapes["cache"] == ((TPB,), "shared")


def test_shared_memory_is_fresh_in_every_block():
    def leaks(out):
        cache = cuda.shared.array(1, float32)
        if cuda.blockIdx.x == 0:
            cache[0] = 5.0
        cuda.syncthreads()
        out[cuda.blockIdx.x] = cache[0]
    res, _ = simulate(leaks, 2, 1, out=np.zeros(2, np.float32))
    assert res["out"][0] == 5 and np.isnan(res["out"][1])


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 20), threads=st.integers(1, 8))
def test_every_element_is_read_and_written_once_by_a_guarded_copy(n, threads):
    blocks = -(-n // threads)
    res, tr = simulate(copy_kernel, blocks, threads, out=np.zeros(n), a=np.arange(n, dtype=float), n=n)
    np.testing.assert_array_equal(res["out"], np.arange(n))
    writes = sorted(a.index[0] for a in tr.accesses if a.kind == "W")
    assert writes == list(range(n)) and tr.races() == [] and not tr.out_of_bounds()


@settings(max_examples=15, deadline=None)
@given(n=st.integers(2, 12), target=st.integers(0, 11))
def test_two_threads_writing_one_element_is_always_reported(n, target):
    target %= n

    def collide(out):
        i = cuda.grid(1)
        out[target if i < 2 else i] = i
    _, tr = simulate(collide, 1, n, out=np.zeros(n))
    assert any(f"write out[{target}]" in r for r in tr.races())


def test_a_barrier_inside_a_branch_is_reported():
    def divergent(out):
        if cuda.threadIdx.x == 0:
            cuda.syncthreads()
        out[cuda.threadIdx.x] = 1
    _, tr = simulate(divergent, 1, 4, out=np.zeros(4))
    assert tr.divergent_barriers() and "branch" in tr.divergent_barriers()[0]


def test_traced_array_refuses_slices_and_counts_accesses():
    tr = Trace()
    tr.phase_of = lambda: ((0, 0, 0), (0, 0, 0), 0)
    a = TracedArray("a", np.zeros((2, 3)), "global", tr)
    a[1, 2] = a[0, 0] + 1
    assert tr.counts()[((0, 0, 0), (0, 0, 0))]["global_reads"] == 1
    with pytest.raises(TypeError, match="index a with 2"):
        a[0]


@pytest.mark.parametrize("blocks, threads", [(0, 4), (1, (2, 0)), (1, 1000), ("x", 2)])
def test_bad_launch_shapes_are_refused_before_running(blocks, threads):
    with pytest.raises(BadInputError):
        simulate(copy_kernel, blocks, threads, out=np.zeros(1), a=np.zeros(1), n=1)


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_every_reference_kernel_matches_its_numpy_oracle_without_races(name):
    ex = EXERCISES[name]
    for seed in (0, 1):
        args = ex.inputs(seed)
        res, tr = simulate(ex.reference, ex.blocks, ex.threads, **args)
        for k, want in ex.oracle(args).items():
            np.testing.assert_allclose(res[k], want, rtol=1e-5, atol=1e-7)   # float32 kernels; grading allows 1e-5
        assert tr.races() == [] and tr.divergent_barriers() == [] and not tr.out_of_bounds()


@pytest.mark.slow
def test_an_endless_loop_stops_with_a_clear_error():
    def endless(out, a):
        d = 1
        while d < 8:            # the learner forgot d *= 2
            out[0] = a[0]
    # stopped by whichever budget runs out first: its memory accesses, or (on a busy machine) its deadline
    with pytest.raises(KernelFailed, match="never end|condition never changes"):
        simulate(endless, 1, 2, out=np.zeros(1), a=np.ones(1))
