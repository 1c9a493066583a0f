"""Attention three ways (naive, online, FlashAttention's tiles) and by the Blelloch scan, against an independent
NumPy float64 oracle and PyTorch's scaled_dot_product_attention, with and without the causal mask; and the
backward passes against the naive one, PyTorch's autograd and centred finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course import attention as att
from course.errors import BadInputError, DeviceMemoryError


def oracle(q, k, v, causal=False, scale=None):
    """softmax(q kᵀ · scale) v and its log-sum-exp, written out in float64 (shares no code with the course)."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = np.einsum("...id,...jd->...ij", q, k) * scale
    if causal:
        s = np.where(np.arange(k.shape[-2])[None, :] <= np.arange(q.shape[-2])[:, None], s, -np.inf)
    top = s.max(axis=-1, keepdims=True)
    w = np.exp(s - top)
    total = w.sum(axis=-1, keepdims=True)
    return np.einsum("...ij,...jd->...id", w / total, v), (top + np.log(total))[..., 0]


@st.composite
def problems(draw):
    lead = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    causal = draw(st.booleans())
    n = draw(st.integers(1, 23))
    n_k = n if causal else draw(st.integers(1, 23))
    d, d_v = draw(st.integers(1, 6)), draw(st.integers(1, 5))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    big = draw(st.sampled_from([1.0, 30.0]))                # large scores: exp must never see them raw
    q = rng.normal(0, big, lead + (n, d))
    k, v = rng.normal(size=lead + (n_k, d)), rng.normal(size=lead + (n_k, d_v))
    return q, k, v, causal, draw(st.integers(1, 9)), draw(st.integers(1, 9))


@settings(max_examples=80, deadline=None)
@given(problems())
def test_every_way_equals_the_float64_oracle_to_1e_12(problem):
    q, k, v, causal, bq, bk = problem
    want, lse_want = oracle(q, k, v, causal)
    np.testing.assert_allclose(att.naive_attention(q, k, v, causal), want, rtol=1e-12, atol=1e-12)
    out, lse = att.online_attention(q, k, v, causal, block_k=bk)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lse, lse_want, rtol=1e-12, atol=1e-12)
    out, lse = att.flash_attention(q, k, v, causal, block_q=bq, block_k=bk)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lse, lse_want, rtol=1e-12, atol=1e-12)
    assert lse.shape == q.shape[:-1] and out.shape == q.shape[:-1] + v.shape[-1:]
    np.testing.assert_allclose(att.attention_by_scan(q, k, v, causal), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_the_tiles_equal_pytorch_s_scaled_dot_product_attention(causal):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    q, k, v = rng.normal(size=(3, 2, 3, 45, 16))
    for scale in (None, 0.3):
        want = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)),
                                                                is_causal=causal, scale=scale).numpy()
        for got in (att.naive_attention(q, k, v, causal, scale),
                    att.flash_attention(q, k, v, causal, scale, block_q=7, block_k=10)[0]):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_float32_stays_float32_and_integers_become_float64():
    q = np.ones((4, 2), dtype=np.float32)
    out, lse = att.flash_attention(q, q, q)
    assert out.dtype == lse.dtype == np.float32
    ints = np.ones((2, 2), dtype=int)
    assert att.naive_attention(ints, ints, ints[:, :1]).dtype == np.float64


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("order", ["query", "key"])
def test_the_tile_schedule_visits_every_unmasked_score_once(causal, order):
    n, bq, bk = 13, 4, 3
    seen = np.zeros((n, n), dtype=int)
    for i0, i1, j0, j1 in att.tile_schedule(n, n, bq, bk, causal, order):
        seen[i0:i1, j0:j1] += 1
    visible = np.tri(n, dtype=bool) if causal else np.ones((n, n), dtype=bool)
    assert (seen[visible] == 1).all() and (seen <= 1).all()
    assert causal or (seen == 1).all()


@st.composite
def backward_problems(draw):
    q, k, v, causal, bq, bk = draw(problems())
    return q, k, v, causal, bq, bk, np.random.default_rng(draw(st.integers(0, 99))).normal(size=q.shape[:-1]
                                                                                            + v.shape[-1:])


@settings(max_examples=60, deadline=None)
@given(backward_problems())
def test_the_tiled_backward_equals_the_naive_one(problem):
    q, k, v, causal, bq, bk, dout = problem
    out, lse = att.flash_attention(q, k, v, causal, block_q=bq, block_k=bk)
    tiled = att.flash_attention_backward(q, k, v, out, lse, dout, causal, block_q=bq, block_k=bk)
    naive = att.naive_attention_backward(q, k, v, att.attention_probabilities(q, k, causal), dout)
    for a, b in zip(tiled, naive):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-11)


@pytest.mark.parametrize("causal", [False, True])
def test_the_backward_passes_equal_centred_finite_differences(causal):
    rng = np.random.default_rng(11)
    q, k, dout = rng.normal(size=(3, 6, 3))
    v = rng.normal(size=(6, 2))
    dout = dout[:, :2]
    out, lse = att.flash_attention(q, k, v, causal, block_q=4, block_k=4)
    grads = att.flash_attention_backward(q, k, v, out, lse, dout, causal, block_q=4, block_k=4)
    h = 1e-6
    for which, g in enumerate(grads):
        args = [q, k, v]
        fd = np.zeros_like(args[which])
        for ix in np.ndindex(fd.shape):
            up, down = [a.copy() for a in args], [a.copy() for a in args]
            up[which][ix] += h
            down[which][ix] -= h
            fd[ix] = (np.sum(oracle(*up, causal)[0] * dout) - np.sum(oracle(*down, causal)[0] * dout)) / (2 * h)
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_the_backward_equals_pytorch_s_autograd():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    q, k, v, dout = rng.normal(size=(4, 2, 2, 33, 8))
    for causal in (False, True):
        out, lse = att.flash_attention(q, k, v, causal, block_q=8, block_k=5)
        got = att.flash_attention_backward(q, k, v, out, lse, dout, causal, block_q=8, block_k=5)
        t = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
        out_t = torch.nn.functional.scaled_dot_product_attention(*t, is_causal=causal)
        (out_t * torch.from_numpy(dout)).sum().backward()
        for a, b in zip(got, t):
            np.testing.assert_allclose(a, b.grad.numpy(), rtol=1e-10, atol=1e-11)


@pytest.mark.parametrize("call, match", [
    (lambda: att.naive_attention(np.ones((2, 3)), np.ones((2, 4)), np.ones((2, 1))), "same size d"),
    (lambda: att.naive_attention(np.ones((2, 3)), np.ones((2, 3)), np.ones((3, 1))), "one value"),
    (lambda: att.flash_attention(np.ones((2, 3)), np.ones((4, 3)), np.ones((4, 1)), causal=True), "as many queries"),
    (lambda: att.flash_attention(np.ones((1, 2, 3)), np.ones((2, 2, 3)), np.ones((2, 2, 1))), "leading"),
    (lambda: att.flash_attention(np.ones(3), np.ones(3), np.ones(3)), "rows"),
    (lambda: att.flash_attention(np.ones((2, 3)), np.ones((2, 3)), np.ones((2, 1)), block_q=0), "block_q"),
    (lambda: att.flash_attention(np.ones((2, 3)), np.ones((2, 3)), np.ones((2, 1)), block_k=2.5), "block_k"),
    (lambda: att.flash_attention(np.ones((2, 3)), np.ones((2, 3)), np.ones((2, 1)), causal=1), "True or False"),
    (lambda: att.naive_attention(np.ones((2, 3)), np.ones((2, 3)), np.ones((2, 1)), scale=np.inf), "scale"),
    (lambda: att.naive_attention(np.array([["a"]]), np.ones((1, 1)), np.ones((1, 1))), "real numbers"),
    (lambda: att.flash_attention_backward(np.ones((2, 3)), np.ones((2, 3)), np.ones((2, 1)), np.ones((2, 1)),
                                          np.ones(3), np.ones((2, 1))), "lse must have shape"),
    (lambda: att.naive_attention_backward(np.ones((2, 3)), np.ones((2, 3)), np.ones((2, 1)), np.ones((2, 3)),
                                          np.ones((2, 1))), "probs must have shape"),
])
def test_bad_input_is_refused_at_the_door_with_what_to_do(call, match):
    with pytest.raises(BadInputError, match=match):
        call()


def test_a_naive_pass_too_big_for_memory_is_refused_before_anything_is_allocated():
    q = np.broadcast_to(np.zeros(1, dtype=np.float32), (400_000, 1))        # a view: 4 bytes
    with pytest.raises(DeviceMemoryError, match="naive"):
        att.naive_attention(q, q, q)
    out, _ = att.flash_attention(q[:1000], q[:1000], q[:1000], block_q=512, block_k=512)   # tiles: fine
    assert out.shape == (1000, 1)


def test_every_way_runs_on_the_stand_in_gpu(standin_gpu):
    cp = standin_gpu
    rng = np.random.default_rng(3)
    q, k, v = (cp.asarray(a) for a in rng.normal(size=(3, 2, 9, 4)))
    want = oracle(q.get(), k.get(), v.get(), True)[0]
    for got in (att.naive_attention(q, k, v, True), att.flash_attention(q, k, v, True, block_q=4, block_k=3)[0],
                att.online_attention(q, k, v, True, block_k=2)[0]):
        assert type(got).__name__ == "StandinArray"
        np.testing.assert_allclose(got.get(), want, rtol=1e-12)
