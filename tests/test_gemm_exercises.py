"""Lesson 09's exercise checks accept the course's answers and refuse each typical wrong one with the message
meant for it: the mma fragment (all 32 lanes against the PTX ISA's table) and the register-blocked kernel
(shared loads per FMA, sectors and bank conflicts at full warps, a race, an index out of bounds); and the
lesson's pictures pass the figure rules."""

from __future__ import annotations

import numpy as np
import pytest
from _figure_checks import figure_problems
from numba import cuda, float32

import course.check as check
from course.gemm.checks import tf32_a_fragment
from course.kernels import EXERCISES, reference, show
from course.kernels.gemm_exercises import BK, BM, BN, TM, TN

# ------------------------------------------------------------------------------------------- the fragment


def test_the_worked_fragment_answer_passes(capsys):
    assert check.check_mma_fragment(tf32_a_fragment) is True
    assert "right" in capsys.readouterr().out


def _g(lane):
    return lane >> 2, lane % 4


WRONG_FRAGMENTS = {
    "rows and columns are swapped": lambda lane: [(c, r) for r, c in tf32_a_fragment(lane)],
    "groupID and threadID_in_group are swapped": lambda lane: [(_g(lane)[1] + 8 * (i % 2), _g(lane)[0] + 4 * (i // 2))
                                                               for i in range(4)],
    "the +8 row offset is on the wrong registers": lambda lane: [tf32_a_fragment(lane)[i] for i in (0, 2, 1, 3)],
    "off by one lane": lambda lane: tf32_a_fragment((lane + 1) % 32),
    "rows 8..15 are never held": lambda lane: [(_g(lane)[0], _g(lane)[1] + 4 * (i // 2)) for i in range(4)],
    "16-bit layouts": lambda lane: [(_g(lane)[0] + 8 * (i % 2), 2 * _g(lane)[1] + i // 2) for i in range(4)],
    "wrong register order": lambda lane: tf32_a_fragment(lane)[::-1] if lane == 7 else tf32_a_fragment(lane),
    "held 2 times": lambda lane: [(0, 0)] + tf32_a_fragment(lane)[1:] if lane == 3 else tf32_a_fragment(lane),
    "shape (3, 2)": lambda lane: tf32_a_fragment(lane)[:3],
    "whole numbers": lambda lane: [(r + 0.5, c) for r, c in tf32_a_fragment(lane)],
    "rows are 0..15": lambda lane: [(r + 16 * (lane == 9), c) for r, c in tf32_a_fragment(lane)],
    "returned a dict": lambda lane: {"a0": tf32_a_fragment(lane)[0]},
    "returned None": lambda lane: None,
    "raised ValueError": lambda lane: int("x"),
}


@pytest.mark.parametrize("words", sorted(WRONG_FRAGMENTS))
def test_a_wrong_fragment_is_refused_saying_what_is_wrong(words, capsys):
    assert check.check_mma_fragment(WRONG_FRAGMENTS[words]) is False
    assert words in capsys.readouterr().out


def test_a_fragment_stub_is_not_done_and_an_endless_loop_is_stopped(capsys):
    def stub(lane):
        raise NotImplementedError

    def forever(lane):
        while True:
            pass
    assert check.check_mma_fragment(stub) is False
    assert "Not done yet" in capsys.readouterr().out
    assert check.check_mma_fragment(forever) is False
    assert "never ends" in capsys.readouterr().out


def test_a_fragment_answer_as_a_numpy_array_passes(capsys):
    assert check.check_mma_fragment(lambda lane: np.array(tf32_a_fragment(lane))) is True


# ------------------------------------------------------------------------------------ the register tile


def plain_tile(c, a, b, n):
    """Right numbers, but lesson 03's inner loop for each output: 2 shared loads per FMA."""
    sa = cuda.shared.array((BM, BK), float32)
    sb = cuda.shared.array((BK, BN), float32)
    acc = cuda.local.array((TM, TN), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    t, nt = ty * cuda.blockDim.x + tx, cuda.blockDim.x * cuda.blockDim.y
    row0, col0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN
    for i in range(TM):
        for j in range(TN):
            acc[i, j] = 0.0
    for k0 in range(0, n, BK):
        for e in range(t, BM * BK, nt):
            sa[e // BK, e % BK] = a[row0 + e // BK, k0 + e % BK]
        for e in range(t, BK * BN, nt):
            sb[e // BN, e % BN] = b[k0 + e // BN, col0 + e % BN]
        cuda.syncthreads()
        for i in range(TM):
            for j in range(TN):
                for k in range(BK):
                    acc[i, j] += sa[ty * TM + i, k] * sb[k, tx * TN + j]
        cuda.syncthreads()
    for i in range(TM):
        for j in range(TN):
            c[row0 + ty * TM + i, col0 + tx * TN + j] = acc[i, j]


def _tile(x_on_row=False, barrier=True, overrun=0):
    """The register-blocked kernel, with one mistake switched on."""
    def kernel(c, a, b, n):
        sa = cuda.shared.array((BM, BK), float32)
        sb = cuda.shared.array((BK, BN), float32)
        acc = cuda.local.array((TM, TN), float32)
        ra = cuda.local.array(TM, float32)
        rb = cuda.local.array(TN, float32)
        tx, ty = (cuda.threadIdx.y, cuda.threadIdx.x) if x_on_row else (cuda.threadIdx.x, cuda.threadIdx.y)
        t, nt = ty * cuda.blockDim.x + tx, cuda.blockDim.x * cuda.blockDim.y
        bx, by = (cuda.blockIdx.y, cuda.blockIdx.x) if x_on_row else (cuda.blockIdx.x, cuda.blockIdx.y)
        row0, col0 = by * BM, bx * BN
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = 0.0
        for k0 in range(0, n, BK):
            for e in range(t, BM * BK, nt):
                if x_on_row:
                    sa[e % BM, e // BM] = a[row0 + e % BM, k0 + e // BM]
                else:
                    sa[e // BK, e % BK] = a[row0 + e // BK, k0 + e % BK]
            for e in range(t, BK * BN, nt):
                sb[e // BN, e % BN] = b[k0 + e // BN, col0 + e % BN]
            if barrier:
                cuda.syncthreads()
            for k in range(BK):
                for i in range(TM):
                    ra[i] = sa[ty * TM + i, k]
                for j in range(TN):
                    rb[j] = sb[k, tx * TN + j]
                for i in range(TM):
                    for j in range(TN):
                        acc[i, j] += ra[i] * rb[j]
            if barrier:
                cuda.syncthreads()
        for i in range(TM + overrun):
            for j in range(TN):
                c[row0 + ty * TM + i, col0 + tx * TN + j] = acc[i % TM, j]
    return kernel


def test_the_register_tile_exercise_is_lesson_09s():
    ex = EXERCISES["register_tile"]
    assert ex.lesson == "09" and ex.reference is reference.matmul_register_tile
    assert ex.budget["shared_reads"] == 8 * (TM + TN)                 # (TM + TN) per k: one load per value


def test_the_course_register_tile_passes_with_its_counts_on_target(capsys):
    assert check.check_kernel_register_tile(reference.matmul_register_tile) is True
    out = capsys.readouterr().out
    assert "Correct" in out and "1.00 per FMA" in out and "on target" in out


@pytest.mark.parametrize("kernel, words", [
    (plain_tile, ["shared-memory loads per FMA", "2.00 per FMA", "at most (TM + TN) / (TM * TN) = 1.00",
                  "cuda.local.array"]),
    (_tile(x_on_row=True), ["global sectors", "bank conflicts", "threadIdx.x on the column"]),
    (_tile(barrier=False), ["reads sa[", "barrier"]),
    (_tile(overrun=1), ["out of bounds", "write of c["]),
], ids=["lesson-03-inner-loop", "x-on-the-row", "no-barrier", "out-of-bounds"])
def test_a_wrong_register_tile_fails_saying_what_to_change(kernel, words, capsys):
    assert check.check_kernel_register_tile(kernel) is False
    out = capsys.readouterr().out
    for w in words:
        assert w in out, (w, out)


def test_a_register_tile_stub_is_not_done_yet(capsys):
    def stub(c, a, b, n):
        raise NotImplementedError
    assert check.check_kernel_register_tile(stub) is False
    assert "Not done yet" in capsys.readouterr().out


# ----------------------------------------------------------------------------------------------- pictures


@pytest.mark.slow
def test_the_fragment_and_tile_pictures_are_readable():
    from course.gemm.fragments import MMA_SHAPES, OPERANDS
    from course.gemm.plots import fragment_figure, tile_hierarchy_figure
    figs = [fragment_figure(s, o) for s in MMA_SHAPES for o in OPERANDS]
    figs += [fragment_figure("m16n8k8.tf32", "a", highlight_lane=31), tile_hierarchy_figure()]
    for fig in figs:
        assert figure_problems(fig) == []
    assert show("register_tile", reference.matmul_register_tile) is not None


def test_a_fragment_figure_labels_every_element_with_its_lane():
    from course.gemm.plots import fragment_figure
    texts = [t.get_text() for t in fragment_figure("m16n8k8.tf32", "b").axes[0].texts]
    assert len(texts) == 64 and "T5\nb1" in texts                      # B[5, 1] is b1 of lane 5
