"""Lesson 08's kernels: the attention-tile exercise on the CUDA simulator (right values, counted sectors of K and
V, each typical slip named, adversarial answers survived) and the fused CUDA C forward through the stand-in GPU."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from numba import cuda, float32

import course.check as check
from course.attention import fused as af
from course.attention.forward import flash_attention
from course.errors import BadInputError
from course.kernels import ATT_D, ATT_TILE, EXERCISES, reference


def test_the_course_s_kernel_passes_with_its_sector_count(capsys):
    assert check.check_kernel_online_softmax(reference.online_softmax_tile) is True
    out = capsys.readouterr().out
    assert "Correct" in out and "24 global sectors" in out
    assert EXERCISES["online_softmax"].lesson == "08"


def stub(out, lse, q, k, v, n_k, scale):
    raise NotImplementedError


def test_a_stub_is_not_done_yet(capsys):
    assert check.check_kernel_online_softmax(stub) is False
    assert "Not done yet" in capsys.readouterr().out


def _kernel(load="coalesced", rescale=True, divide=True, use_scale=True, lse_log=True):
    """The exercise's kernel with one slip switched on."""
    def kernel(out, lse, q, k, v, n_k, scale):
        sk = cuda.shared.array((ATT_TILE, ATT_D), float32)
        sv = cuda.shared.array((ATT_TILE, ATT_D), float32)
        qr = cuda.local.array(ATT_D, float32)
        acc = cuda.local.array(ATT_D, float32)
        t = cuda.threadIdx.x
        row = cuda.blockIdx.x * ATT_TILE + t
        for c in range(ATT_D):
            qr[c] = q[row, c] * (scale if use_scale else 1.0)
            acc[c] = 0.0
        m, total = -math.inf, 0.0
        for k0 in range(0, n_k, ATT_TILE):
            if load == "coalesced":
                for e in range(t, ATT_TILE * ATT_D, ATT_TILE):
                    sk[e // ATT_D, e % ATT_D] = k[k0 + e // ATT_D, e % ATT_D]
                    sv[e // ATT_D, e % ATT_D] = v[k0 + e // ATT_D, e % ATT_D]
            else:                                     # a row of K and of V per thread: a column per load
                for c in range(ATT_D):
                    sk[t, c] = k[k0 + t, c]
                    sv[t, c] = v[k0 + t, c]
            cuda.syncthreads()
            for j in range(ATT_TILE):
                dot = 0.0
                for c in range(ATT_D):
                    dot += qr[c] * (k[k0 + j, c] if load == "global" else sk[j, c])
                new_m = max(m, dot)
                f = math.exp(m - new_m)
                p = math.exp(dot - new_m)
                total = total * f + p
                for c in range(ATT_D):
                    acc[c] = (acc[c] * f if rescale else acc[c]) + p * sv[j, c]
                m = new_m
            cuda.syncthreads()
        for c in range(ATT_D):
            out[row, c] = acc[c] / total if divide else acc[c]
        lse[row] = m + math.log(total) if lse_log else m
    return kernel


def test_a_per_key_online_softmax_with_coalesced_tiles_passes(capsys):
    assert check.check_kernel_online_softmax(_kernel()) is True, capsys.readouterr().out


@pytest.mark.parametrize("slip, message", [
    ({"load": "rows"}, "not coalesced"),
    ({"load": "global"}, "too many global reads"),
    ({"use_scale": False}, "not multiplied by scale"),
    ({"divide": False}, "divide by it at the end"),
    ({"lse_log": False}, "not the maximum alone"),
])
def test_each_typical_slip_fails_with_its_own_message(slip, message, capsys):
    assert check.check_kernel_online_softmax(_kernel(**slip)) is False
    assert message in capsys.readouterr().out


def test_an_accumulator_not_rescaled_is_named(capsys):
    # only wrong when a later key raises the maximum: the check's inputs do
    assert check.check_kernel_online_softmax(_kernel(rescale=False)) is False
    assert "rescaled" in capsys.readouterr().out


def _exits(out, lse, q, k, v, n_k, scale):
    sys.exit(3)


def _writes_nan(out, lse, q, k, v, n_k, scale):
    row = cuda.grid(1)
    for c in range(ATT_D):
        out[row, c] = math.nan
    lse[row] = math.nan


def _writes_inputs(out, lse, q, k, v, n_k, scale):
    row = cuda.grid(1)
    for c in range(ATT_D):
        q[row, c] = 0.0
        out[row, c] = 0.0
    lse[row] = 0.0


@pytest.mark.parametrize("kernel, message", [(_exits, "raised"), (_writes_nan, "expected"),
                                             (_writes_inputs, "expected"), (None, "Not yet"), (42, "Not yet")])
def test_adversarial_kernels_fail_with_a_message_and_never_raise(kernel, message, capsys):
    assert check.check_kernel_online_softmax(kernel) is False
    assert message in capsys.readouterr().out


def test_the_fused_kernel_runs_through_the_stand_in_with_its_launch(standin_gpu):
    cp = standin_gpu
    rng = np.random.default_rng(4)
    q, k, v = (cp.asarray(a.astype(np.float32)) for a in rng.normal(size=(3, 2, 3, 70, 64)))
    for causal in (False, True):
        out, lse = af.fused_attention(q, k, v, causal)
        want, lse_want = flash_attention(q.get(), k.get(), v.get(), causal)
        np.testing.assert_allclose(out.get(), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(lse.get(), lse_want, rtol=1e-5, atol=1e-5)
    assert af.fused_plan(70, 6) == {"grid": (3, 6), "threads": 128, "rows_per_block": 32, "keys_per_tile": 32}
    with pytest.raises(BadInputError, match="float32"):
        af.fused_attention(q.astype(np.float64), k, v)
    with pytest.raises(BadInputError, match="head sizes"):
        af.fused_attention(q[..., :48], k[..., :48], v[..., :48])


def test_the_fused_kernel_needs_a_gpu_here():
    from course.errors import GPUUnavailableError

    if af.cupy_module() is None:
        with pytest.raises(GPUUnavailableError):
            af.fused_attention(np.ones((2, 32), np.float32), np.ones((2, 32), np.float32), np.ones((2, 32), np.float32))


def test_the_host_passes_the_arguments_of_the_kernel_s_c_signature(standin_gpu):
    import re

    sig = re.search(r"course_flash_forward_d32\(([^)]*)\)", af.FUSED_FORWARD_SOURCE).group(1)
    kinds = [" ".join(p.split()).rsplit(" ", 1)[0] for p in sig.split(",")]
    assert kinds == ["const float*"] * 3 + ["float*"] * 2 + ["int", "int", "float", "int"]
    from course.standin import kernel_twin, register_kernel

    seen = []
    real = kernel_twin("course_flash_forward_d32")

    def spy(grid, block, args):
        seen.append(args)
        return real(grid, block, args)

    register_kernel("course_flash_forward_d32", spy)
    try:
        q = standin_gpu.asarray(np.ones((1, 5, 32), np.float32))
        af.fused_attention(q, q, q)
    finally:
        register_kernel("course_flash_forward_d32", real)
    args = seen[0]
    assert [np.asarray(a).dtype for a in args[:5]] == [np.float32] * 5
    assert [type(a) for a in args[5:]] == [np.int32, np.int32, np.float32, np.int32]
