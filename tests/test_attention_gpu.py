"""On a GPU: the fused CUDA C attention forward against the naive CuPy pass and PyTorch's
scaled_dot_product_attention (TF32 off), causal and not; and one timing record of each method.  Skipped where
no GPU answers (the stand-in GPU runs the host side in tests/test_attention_kernels.py)."""

from __future__ import annotations

import numpy as np
import pytest

from course import attention as att
from course.attention import fused as af
from course.attention import timing as at
from course.devices import to_numpy

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("d", af.FUSED_HEAD_DIMS)
@pytest.mark.parametrize("causal", [False, True])
def test_the_fused_kernel_equals_the_naive_cupy_pass(d, causal):
    q, k, v = at.attention_input(300, d, heads=3, device="gpu", seed=d)
    out, lse = af.fused_attention(q, k, v, causal)
    want = att.naive_attention(q.astype("float64"), k.astype("float64"), v.astype("float64"), causal)
    _, lse_want = att.flash_attention(q.astype("float64"), k.astype("float64"), v.astype("float64"), causal)
    np.testing.assert_allclose(to_numpy(out), to_numpy(want), rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(to_numpy(lse), to_numpy(lse_want), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_the_fused_kernel_equals_pytorch_with_tf32_off(causal):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch here has no CUDA device")
    from course.torch_peer import torch_tf32

    q, k, v = at.attention_input(257, 64, heads=4, device="gpu", seed=1)
    out, _ = af.fused_attention(q, k, v, causal)
    with torch_tf32(False):
        want = torch.nn.functional.scaled_dot_product_attention(
            *(torch.as_tensor(to_numpy(a), device="cuda") for a in (q, k, v)), is_causal=causal)
    np.testing.assert_allclose(to_numpy(out), want.cpu().numpy(), rtol=2e-4, atol=2e-5)


def test_each_method_gives_a_timing_record_on_the_gpu():
    for method in ("naive", "flash", "fused"):
        r = at.time_attention(method, 512, 64, heads=2, device="gpu", repeat=2, budget_s=1.0)
        assert r["device"] == "gpu" and r["median_s"] > 0 and r["counted_bytes"] > 0
