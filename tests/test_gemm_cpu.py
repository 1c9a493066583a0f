"""Lesson 09's CPU rungs: each one equals a float64 product at any size (edge tiles included), the first three
round alike, bad input is refused at the door, and the counted bytes per FMA match counts made by hand."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from course.errors import BadInputError, UnsupportedDtypeError
from course.gemm import cpu
from course.gemm.cpu import BLOCK, CPU_RUNGS, KC, MC, MR, NR, cpu_matmul, cpu_traffic

#: Sizes on both sides of every tile edge: the register tile (MR, NR), the blocked rung's tiles and the packed
#: panels' KC, MC (NC = 2048 is reached by test_a_product_wider_than_one_packed_panel_of_b).
EDGES_M = sorted({1, 2, MR - 1, MR, MR + 1, BLOCK[0] - 1, BLOCK[0], BLOCK[0] + 1, MC - 1, MC, MC + 1})
EDGES_K = sorted({1, 2, 5, BLOCK[1] - 1, BLOCK[1], BLOCK[1] + 1, KC - 1, KC + 1})
EDGES_N = sorted({1, 2, NR - 1, NR, NR + 1, 17, BLOCK[2] - 1, BLOCK[2] + 1})


def _operands(m: int, k: int, n: int, dtype: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (m, k)).astype(dtype), rng.uniform(-1, 1, (k, n)).astype(dtype)


def assert_is_the_product(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """``c`` within the classic rounding bound of a k-term sum of the float64 product: |c - ab| <= 2 k eps |a| |b|."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    bound = 2 * a.shape[1] * np.finfo(a.dtype).eps * (np.abs(a64) @ np.abs(b64)) + np.finfo(a.dtype).tiny
    assert c.shape == (a.shape[0], b.shape[1]) and c.dtype == a.dtype
    assert np.all(np.abs(c.astype(np.float64) - a64 @ b64) <= bound)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("rung", CPU_RUNGS)
@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 13, 5), (65, 33, 17)])
def test_every_rung_is_the_product_at_odd_sizes(rung, dtype, shape):
    a, b = _operands(*shape, dtype)
    assert_is_the_product(cpu_matmul(a, b, rung), a, b)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rung=st.sampled_from(CPU_RUNGS[1:]), dtype=st.sampled_from(["float32", "float64"]),
       m=st.sampled_from(EDGES_M), k=st.sampled_from(EDGES_K), n=st.sampled_from(EDGES_N),
       seed=st.integers(0, 2**16))
def test_every_rung_is_the_product_at_sizes_straddling_each_tile_edge(rung, dtype, m, k, n, seed):
    a, b = _operands(m, k, n, dtype, seed)
    assert_is_the_product(cpu_matmul(a, b, rung), a, b)


@settings(max_examples=10, deadline=None)
@given(m=st.sampled_from([1, MR + 1, 40]), k=st.sampled_from([1, 5, BLOCK[1] + 1]), n=st.sampled_from([1, NR + 1, 33]),
       dtype=st.sampled_from(["float32", "float64"]))
def test_the_textbook_loops_are_the_product_too(m, k, n, dtype):
    a, b = _operands(m, k, n, dtype)
    assert_is_the_product(cpu_matmul(a, b, "loops"), a, b)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_first_three_rungs_add_in_the_same_order_so_they_round_alike(dtype):
    a, b = _operands(37, BLOCK[1] + 3, 45, dtype, seed=3)
    loops = cpu_matmul(a, b, "loops")
    assert np.array_equal(loops, cpu_matmul(a, b, "reordered"))
    assert np.array_equal(loops, cpu_matmul(a, b, "blocked"))


def test_a_product_wider_than_one_packed_panel_of_b():
    a, b = _operands(MR + 2, 9, cpu.NC + NR + 1, "float32", seed=5)
    for rung in ("microkernel", "parallel"):
        assert_is_the_product(cpu_matmul(a, b, rung), a, b)


def test_transposed_views_and_thread_counts_give_the_same_product():
    a, b = _operands(20, 30, 11, "float64", seed=7)
    want = cpu_matmul(a, b, "microkernel")
    assert np.allclose(cpu_matmul(np.asfortranarray(a), b.T.copy().T, "microkernel"), want)
    for threads in (1, 2):
        assert np.allclose(cpu_matmul(a, b, "parallel", threads=threads), want)


@pytest.mark.parametrize("a,b,error,words", [
    ([[1.0]], np.ones((1, 1), np.float32), BadInputError, "numpy arrays"),
    (np.ones(3, np.float32), np.ones((3, 1), np.float32), BadInputError, "2-D"),
    (np.ones((2, 3), np.int64), np.ones((3, 2), np.int64), UnsupportedDtypeError, "float32 or float64"),
    (np.ones((2, 3), np.float32), np.ones((3, 2), np.float64), UnsupportedDtypeError, "one dtype"),
    (np.ones((2, 3), np.float32), np.ones((4, 2), np.float32), BadInputError, "must equal b's rows"),
    (np.ones((0, 3), np.float32), np.ones((3, 2), np.float32), BadInputError, "empty side"),
])
def test_bad_operands_are_refused_at_the_door(a, b, error, words):
    with pytest.raises(error, match=words):
        cpu_matmul(a, b, "reordered")


def test_a_bad_rung_or_thread_count_is_refused_and_names_the_choices():
    a = np.ones((2, 2), np.float32)
    with pytest.raises(BadInputError, match="microkernel"):
        cpu_matmul(a, a, "goto")
    with pytest.raises(BadInputError, match="threads"):
        cpu_matmul(a, a, "parallel", threads=0)


def test_a_product_too_big_for_memory_is_refused_before_anything_is_allocated():
    a = np.lib.stride_tricks.as_strided(np.ones(1, np.float32), (2**20, 1), (0, 0))
    b = np.lib.stride_tricks.as_strided(np.ones(1, np.float32), (1, 2**20), (0, 0))
    with pytest.raises(course_memory_error(), match="GiB"):
        cpu_matmul(a, b, "blocked")


def course_memory_error():
    from course.errors import DeviceMemoryError

    return DeviceMemoryError


# ----------------------------------------------------------------- counted traffic, against counts by hand

def _count_loops(m: int, n: int, k: int) -> float:
    """Loads and stores the i, j, k loop nest makes, walked in Python: per output k of A and k of B, one store."""
    moves = 0
    for _i in range(m):
        for _j in range(n):
            for _p in range(k):
                moves += 2          # a[i, p], b[p, j]
            moves += 1              # c[i, j] = s
    return moves / (m * n * k)


def _count_reordered(m: int, n: int, k: int) -> float:
    moves = 0
    for _i in range(m):
        for _p in range(k):
            moves += 1              # a[i, p] into a register
            for _j in range(n):
                moves += 3          # load b[p, j], load and store c[i, j]
    return moves / (m * n * k)


def _count_microkernel(m: int, n: int, k: int) -> float:
    """One register tile per MR × NR block of C: MR + NR loads per k, then C's tile loaded and stored once."""
    moves = 0
    for _ir in range(0, m, MR):
        for _jr in range(0, n, NR):
            for _p in range(k):
                moves += MR + NR
            moves += 2 * MR * NR
    return moves / (m * n * k)


@pytest.mark.parametrize("m,n,k", [(3, 4, 8), (6, 8, 5), (3, 8, 16)])
def test_register_traffic_matches_the_loop_nests_counted_by_hand(m, n, k):
    assert cpu_traffic("loops", m, n, k, 4)["registers"] == pytest.approx(4 * _count_loops(m, n, k))
    assert cpu_traffic("reordered", m, n, k, 8)["registers"] == pytest.approx(8 * _count_reordered(m, n, k))
    assert cpu_traffic("microkernel", m, n, k, 4)["registers"] == pytest.approx(4 * _count_microkernel(m, n, k))


def test_traffic_of_tiny_products_by_hand():
    t = cpu_traffic("loops", 4, 4, 4, 4)              # E = 4 bytes, a 64-byte line per value of B's column
    assert t == {"registers": 4 * 2.25, "l1_fill": 64 + 4 * 0.5, "memory": 4 * 1.5}
    t = cpu_traffic("microkernel", 4, 4, 4, 4)        # kc = mc = nc = 4
    assert t["registers"] == pytest.approx(4 * (7 / 12 + 2 / 4))
    assert t["l1_fill"] == pytest.approx(4 * (1 / 4 + 1 / 4 + 2 / 4))
    assert cpu_traffic("parallel", 4, 4, 4, 4) == t
    big = cpu_traffic("microkernel", 10**6, 10**6, 10**6, 4)
    assert big["registers"] == pytest.approx(4 * (MR + NR) / (MR * NR) + 8 / KC)


def test_each_rung_drags_fewer_bytes_into_l1_per_fma_than_the_one_before():
    fills = [cpu_traffic(r, 1024, 1024, 1024, 4)["l1_fill"] for r in ("loops", "reordered", "microkernel")]
    assert fills == sorted(fills, reverse=True)
    memory = {r: cpu_traffic(r, 1024, 1024, 1024, 4)["memory"] for r in ("reordered", "blocked")}
    assert memory["blocked"] < memory["reordered"]


def test_traffic_refuses_an_unknown_rung_or_item_size():
    with pytest.raises(BadInputError, match="rung"):
        cpu_traffic("blas", 4, 4, 4)
    with pytest.raises(BadInputError, match="itemsize"):
        cpu_traffic("loops", 4, 4, 4, 2)
