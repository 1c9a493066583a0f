"""Lesson 08's PyTorch peers (issue 46): each SDPA backend forced alone on 4-D inputs, named with its backend and
precision; a backend that refuses its inputs is recorded as refused with its reason, not as a timing.

Without a CUDA build of PyTorch here, the stand-in GPU runs the course's side and PyTorch runs on the CPU (its
memory-efficient backend refuses CPU inputs there, its flash backend runs them): the same code paths the GPU run
takes, with the device swapped."""

from __future__ import annotations

import numpy as np
import pytest

from course.attention import timing as at

torch = pytest.importorskip("torch")


@pytest.fixture
def torch_on_the_cpu(standin_gpu, monkeypatch):
    """The GPU methods on the stand-in, PyTorch's tensors on the CPU (timed with the CPU's clock)."""
    from course import torch_peer

    monkeypatch.setattr(at, "torch_device", lambda dev: "cpu")
    monkeypatch.setattr(at, "benchmark_torch",
                        lambda fn, *a, device="gpu", **kw: torch_peer.benchmark_torch(fn, *a, device="cpu", **kw))
    return standin_gpu


def test_every_backend_is_named_with_its_precision():
    assert at.torch_backend_precision("torch efficient") == (
        "EFFICIENT_ATTENTION", "float32: CUTLASS kernels, float32-accurate, ignoring the TF32 flags")
    assert at.torch_backend_precision("torch flash (bfloat16)")[0] == "FLASH_ATTENTION"
    assert "bfloat16" in at.torch_backend_precision("torch flash (bfloat16)")[1]
    assert {m for m in at.METHODS["gpu"] if m.startswith("torch")} == {"torch sdpa", *at.TORCH_BACKENDS}
    with pytest.raises(at.BadInputError, match="not a PyTorch method"):
        at.torch_backend_precision("fused")


def test_a_backend_that_refuses_raises_with_pytorchs_reason(torch_on_the_cpu):
    inputs = at.attention_input(64, 16, heads=2, device="cpu")
    with pytest.raises(at.BackendRefusedError) as info:
        at.attention_function("torch efficient", inputs, "gpu")
    assert info.value.method == "torch efficient" and info.value.reason


def test_the_flash_backend_runs_4d_inputs_in_bfloat16_and_equals_numpy(torch_on_the_cpu):
    q, k, v = at.attention_input(64, 16, heads=2, device="cpu", seed=3)
    out = at.attention_function("torch flash (bfloat16)", (q, k, v), "gpu")()
    assert out.dtype == torch.bfloat16 and tuple(out.shape) == (1, 2, 64, 16)
    s = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 2, 1) / np.sqrt(16)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)
    np.testing.assert_allclose(out.float().numpy()[0], want, atol=5e-2)


def test_the_sweep_records_a_refusal_and_names_backend_and_precision_of_each_timing(torch_on_the_cpu):
    rs = at.attention_sweep([64], d=16, heads=2, methods=["torch efficient", "torch flash (bfloat16)",
                                                          "torch flash (float16)"],
                            devices=["gpu"], repeat=2, budget_s=0.2, copy=False)
    refused = rs.select(kind="refused")
    assert [r["method"] for r in refused] == ["torch efficient"]
    assert refused[0]["backend"] == "EFFICIENT_ATTENTION" and refused[0]["reason"] and "median_s" not in refused[0]
    timed = {r["method"]: r for r in rs.select(kind="time")}
    assert set(timed) == {"torch flash (bfloat16)", "torch flash (float16)"}
    assert timed["torch flash (bfloat16)"]["dtype"] == "bfloat16"
    assert timed["torch flash (float16)"]["dtype"] == "float16"
    assert all(r["backend"] == "FLASH_ATTENTION" and r["precision"] for r in timed.values())


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["torch efficient", "torch flash (bfloat16)", "torch flash (float16)"])
def test_each_forced_backend_runs_or_says_why_on_the_gpu(method):
    from course.torch_peer import torch_cuda_available

    if not torch_cuda_available():
        pytest.skip("PyTorch here has no CUDA device")
    try:
        r = at.time_attention(method, 1024, 64, heads=4, device="gpu", repeat=2)
    except at.BackendRefusedError as exc:
        pytest.skip(f"refused on this GPU, with its reason: {exc.reason}")
    assert r["backend"] == at.TORCH_BACKENDS[method][0] and r["dtype"] == at.TORCH_BACKENDS[method][1]
    assert r["median_s"] > 0 and r["precision"]


@pytest.mark.gpu
def test_the_efficient_backend_in_float32_equals_numpy_to_float32_accuracy():
    from course.devices import to_numpy
    from course.torch_peer import torch_cuda_available

    if not torch_cuda_available():
        pytest.skip("PyTorch here has no CUDA device")
    q, k, v = at.attention_input(300, 64, heads=2, device="gpu", seed=5)
    out = at.attention_function("torch efficient", (q, k, v), "gpu")().float().cpu().numpy()[0]
    qh, kh, vh = (to_numpy(a).astype(np.float64) for a in (q, k, v))
    s = qh @ kh.transpose(0, 2, 1) / 8.0
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(out, (p / p.sum(-1, keepdims=True)) @ vh, rtol=1e-4, atol=1e-5)
