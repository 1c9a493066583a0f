"""The kernel checks say precisely what is wrong: not done, out of bounds, a race, a barrier in a
branch, the wrong operand order, an element never written, too many global reads."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, float32

import course.check as check
from course.kernels import EXERCISES, TPB, grade, reference

REFERENCES = {"map": reference.relu_map, "guard": reference.relu_guard, "zip": reference.fma_zip,
              "scale_rows": reference.scale_rows, "block_sum": reference.block_sum,
              "matmul_tiled": reference.matmul_tiled,
              "hillis_steele": reference.hillis_steele, "blelloch": reference.blelloch}


def test_every_exercise_has_a_check_in_course_check():
    for name in EXERCISES:
        assert callable(getattr(check, f"check_kernel_{name}"))


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_the_course_answers_pass(name, capsys):
    assert getattr(check, f"check_kernel_{name}")(REFERENCES[name]) is True
    assert "Correct" in capsys.readouterr().out


def stub(out, a):
    raise NotImplementedError


def test_a_stub_is_not_done_yet(capsys):
    assert check.check_kernel_map(stub) is False
    assert "Not done yet" in capsys.readouterr().out


def test_a_missing_guard_is_out_of_bounds_with_the_thread_named(capsys):
    def no_guard(out, a, n):
        i = cuda.grid(1)
        out[i] = max(a[i], 0.0)
    assert check.check_kernel_guard(no_guard) is False
    out = capsys.readouterr().out
    assert "out of bounds" in out and "a[1" in out and "thread" in out and "i < n" in out
    # one access, one thread: the element named is the one the named thread reads (4 threads a block)
    import re

    index = int(re.search(r"of a\[(\d+)\]", out).group(1))
    block, thread = map(int, re.search(r"block (\d+) thread (\d+)", out).groups())
    assert index == 4 * block + thread and "tid=" not in out


def test_the_wrong_operand_order_is_named():
    def swapped(out, w, x, b, n):
        i = cuda.grid(1)
        if i < n:
            out[i] = w[i] * b[i] + x[i]
    g = grade("zip", swapped, on_gpu=False)
    assert not g.ok and "operand order" in g.problems[0] and "w * b + x" in g.problems[0]


def test_a_transposed_product_is_named():
    def transposed(c, a, b, n):
        row, col = cuda.grid(2)
        acc = 0.0
        for k in range(n):
            acc += b[row, k] * a[k, col]
        c[row, col] = acc
    g = grade("matmul_tiled", transposed, on_gpu=False)
    assert any("b @ a" in p for p in g.problems)


def test_the_untiled_product_reads_too_much_global_memory():
    def naive(c, a, b, n):
        row, col = cuda.grid(2)
        acc = 0.0
        for k in range(n):
            acc += a[row, k] * b[k, col]
        c[row, col] = acc
    g = grade("matmul_tiled", naive, on_gpu=False)
    assert g.problems == ["too many global reads: block (0, 0) thread (0, 0) made 8, the budget is 4 per thread."]


def test_the_row_scaling_is_graded_on_its_memory_sectors(capsys):
    """With threadIdx.x on the row the values are right, but each warp touches a sector per row: 272 against 72."""
    def x_on_row(out, a, s):
        row, col = cuda.grid(2)
        out[row, col] = a[row, col] * s[row]
    assert check.check_kernel_scale_rows(x_on_row) is False
    out = capsys.readouterr().out
    assert "global sectors" in out and "272" in out and "at most 72" in out and "threadIdx.x" in out

    def by_column(out, a, s):
        col, row = cuda.grid(2)
        out[row, col] = a[row, col] * s[col]
    g = grade("scale_rows", by_column, on_gpu=False)
    assert not g.ok and "belongs to the row" in g.problems[0]


TILE = 2      # the notebook's module constant; the coalescing count rebinds it to 16


def _tiled(x_on_column):
    """The tiled product with threadIdx.x on the column (coalesced) or on the row (the old reference)."""
    def kernel(c, a, b, n):
        sa = cuda.shared.array((TILE, TILE), float32)
        sb = cuda.shared.array((TILE, TILE), float32)
        if x_on_column:
            col, row = cuda.grid(2)
            tc, tr = cuda.threadIdx.x, cuda.threadIdx.y
        else:
            row, col = cuda.grid(2)
            tr, tc = cuda.threadIdx.x, cuda.threadIdx.y
        acc = 0.0
        for k0 in range(0, n, TILE):
            sa[tr, tc] = a[row, k0 + tc]
            sb[tr, tc] = b[k0 + tr, col]
            cuda.syncthreads()
            for k in range(TILE):
                acc += sa[tr, k] * sb[k, tc]
            cuda.syncthreads()
        c[row, col] = acc
    return kernel


@pytest.mark.slow
def test_the_tiled_product_is_graded_on_coalescing_and_bank_conflicts():
    """threadIdx.x on the row of row-major arrays gives the right values and the right per-thread reads, but
    at a 16 x 16 tile 4x the global sectors and 1,008 bank conflicts: the check counts both."""
    from course.kernels.warps import scale_counts

    good, bad = scale_counts("matmul_tiled", _tiled(True)), scale_counts("matmul_tiled", _tiled(False))
    assert good[0]["global_sectors"] == 96 and good[0]["bank_conflicts"] == 0 and good[1] == []
    assert bad[0]["global_sectors"] == 384 and bad[0]["bank_conflicts"] == 1008
    g = grade("matmul_tiled", _tiled(False), on_gpu=False)
    assert not g.ok and len(g.problems) == 2, g.problems
    assert "global sectors" in g.problems[0] and "threadIdx.x" in g.problems[0]
    assert "bank conflicts" in g.problems[1]
    assert grade("matmul_tiled", _tiled(True), on_gpu=False).ok


def test_the_tiled_product_must_use_the_tile_constant():
    def hard_coded(c, a, b, n):           # right at TILE = 2, wrong once the tile is 16
        sa = cuda.shared.array((2, 2), float32)
        sb = cuda.shared.array((2, 2), float32)
        col, row = cuda.grid(2)
        tc, tr = cuda.threadIdx.x, cuda.threadIdx.y
        acc = 0.0
        for k0 in range(0, n, 2):
            sa[tr, tc] = a[row, k0 + tc]
            sb[tr, tc] = b[k0 + tr, col]
            cuda.syncthreads()
            for k in range(2):
                acc += sa[tr, k] * sb[k, tc]
            cuda.syncthreads()
        c[row, col] = acc
    g = grade("matmul_tiled", hard_coded, on_gpu=False)
    assert not g.ok and ("TILE" in g.problems[0]), g.problems


def test_a_scan_without_the_barrier_between_read_and_write_is_a_race():
    def racy(out, a):
        cache = cuda.shared.array(TPB, float32)
        t = cuda.threadIdx.x
        cache[t] = a[t]
        cuda.syncthreads()
        d = 1
        while d < TPB:
            if t >= d:
                cache[t] = cache[t] + cache[t - d]
            cuda.syncthreads()
            d *= 2
        out[t] = cache[t]
    g = grade("hillis_steele", racy, on_gpu=False)
    assert not g.ok and "read before the barrier" in g.problems[0]


def test_the_exclusive_scan_given_for_the_inclusive_one_is_named():
    def exclusive(out, a):
        t = cuda.threadIdx.x
        acc = 0.0
        for k in range(t):
            acc += a[k]
        out[t] = acc
    g = grade("hillis_steele", exclusive, on_gpu=False)
    assert any("exclusive scan" in p for p in g.problems)
    assert any("global reads" in p for p in g.problems)


def test_a_barrier_in_a_branch_is_named():
    def divergent(out, a, n):
        cache = cuda.shared.array(TPB, float32)
        i, t = cuda.grid(1), cuda.threadIdx.x
        cache[t] = a[i] if i < n else 0.0
        cuda.syncthreads()
        s = TPB // 2
        while s > 0:
            if t < s:
                cache[t] += cache[t + s]
                cuda.syncthreads()
            s //= 2
        if t == 0:
            out[cuda.blockIdx.x] = cache[0]
    g = grade("block_sum", divergent, on_gpu=False)
    assert "branch" in g.problems[0]


def test_an_element_never_written_is_named():
    def half(out, a):
        i = cuda.grid(1)
        if i < 4:
            out[i] = max(a[i], 0.0)
    g = grade("map", half, on_gpu=False)
    assert "out[4] was never written" in g.problems[0]


def test_the_learners_arrays_are_fresh_each_time():
    ex = EXERCISES["map"]
    a = ex.inputs(1)
    grade("map", reference.relu_map, on_gpu=False)
    np.testing.assert_array_equal(ex.inputs(1)["a"], a["a"])
