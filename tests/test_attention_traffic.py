"""The bytes attention moves, counted by walking each algorithm's loops, equal their closed forms for every N,
d and M, follow the paper's Θ(N d + N²) and Θ(N² d² / M); the memory measured with tracemalloc grows with n² for
the naive pass and with n for the tiled one."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.attention import timing as at
from course.attention import traffic as tr
from course.errors import BadInputError


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.sampled_from(tr.TRAFFIC_ALGORITHMS), st.integers(1, 700), st.integers(1, 80), st.integers(1, 40_000))
def test_the_count_walked_equals_the_closed_form(algorithm, n, d, sram):
    assert tr.count_traffic(algorithm, n, d, sram)["numbers"] == tr.traffic_formula(algorithm, n, d, sram)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 200), st.integers(1, 200), st.integers(1, 16), st.integers(1, 16), st.integers(1, 40),
       st.integers(1, 40))
def test_the_tiles_read_k_and_v_once_per_query_tile(n, n_k, d, d_v, bq, bk):
    t = tr.tile_traffic(n, n_k, d, d_v, bq, bk)
    tiles = math.ceil(n / bq)
    assert (t["Q"], t["O"], t["lse"]) == (n * d, n * d_v, n)
    assert (t["K"], t["V"]) == (tiles * n_k * d, tiles * n_k * d_v)
    causal = tr.tile_traffic(n, n, d, d_v, bq, bk, causal=True)
    assert causal["K"] <= tiles * n * d


def test_the_paper_s_tiles_come_from_m():
    assert tr.paper_blocks("flash, K/V outer", 64, 100_000) == (64, math.ceil(100_000 / 256))
    assert tr.paper_blocks("flash, K/V outer", 64, 1_000) == (4, 4)               # B_r = min(B_c, d)
    assert tr.paper_blocks("flash, Q outer", 32, 58_368) == (456, 32)


@pytest.mark.parametrize("d, sram", [(32, 16_384), (64, 58_368), (128, 100_000)])
def test_the_counts_grow_as_the_paper_s_theta_says(d, sram):
    """count / Θ levels off at a constant as N grows: 4 for the naive algorithm; with the paper's tiles (M >= 4d²)
    about 12 (K/V outer) and 8 (Q outer): the constants the closed forms give."""
    for alg, const in (("naive", 4.0), ("flash, K/V outer", 12.0), ("flash, Q outer", 8.0)):
        ratios = [tr.traffic_formula(alg, n, d, sram) / tr.traffic_bound(alg, n, d, sram)
                  for n in (2**14, 2**16, 2**18)]
        assert ratios[-1] == pytest.approx(const, rel=0.15), (alg, ratios)
        assert abs(ratios[-1] - ratios[-2]) <= abs(ratios[1] - ratios[0]) + 1e-9          # it settles
    naive, tiled = (tr.count_traffic(a, 4096, d, sram)["numbers"] for a in ("naive", "flash, Q outer"))
    assert tiled < naive


def test_the_reads_and_writes_are_those_of_the_algorithm_s_lines():
    r = tr.count_traffic("naive", 10, 3)
    assert r["reads"] == {"Q": 30, "K": 30, "S": 100, "P": 100, "V": 30}
    assert r["writes"] == {"S": 100, "P": 100, "O": 30}
    r = tr.count_traffic("flash, Q outer", 100, 4, 160)          # tiles of 10 queries x 4 keys
    assert (r["block_q"], r["block_k"]) == (10, 4)
    assert r["reads"] == {"Q": 400, "K": 4000, "V": 4000} and r["writes"] == {"O": 400, "lse": 100}
    assert r["bytes"] == 4 * r["numbers"]


@pytest.mark.parametrize("call, match", [(lambda: tr.count_traffic("nope", 4, 2), "one of"),
                                         (lambda: tr.count_traffic("naive", 0, 2), "n"),
                                         (lambda: tr.traffic_formula("naive", 4, 2, sram=0), "sram"),
                                         (lambda: tr.tile_traffic(4, 4, 2, 2, 0, 1), "block_q")])
def test_bad_sizes_are_refused(call, match):
    with pytest.raises(BadInputError, match=match):
        call()


def test_peak_memory_grows_with_n_squared_for_the_naive_pass_and_with_n_for_the_tiles():
    rs = at.memory_sweep([512, 1024], d=16)
    peak = {(r["method"], r["n"]): r["peak_bytes"] for r in rs.records}
    square = {r["n"]: r["square_bytes"] for r in rs.records}
    for n in (512, 1024):
        assert peak[("naive", n)] >= square[n]                   # it holds the n × n scores
        assert peak[("flash", n)] < square[n] / 4
    assert peak[("naive", 1024)] / peak[("naive", 512)] > 3      # ~4: n²
    assert peak[("flash", 1024)] / peak[("flash", 512)] < 2.5    # ~2 or less: n


def test_the_timing_records_carry_flops_and_counted_bytes():
    r = at.time_attention("naive", 64, 8, repeat=2)
    assert r["flops"] == 4 * 64 * 64 * 8 and r["counted_bytes"] == 4 * (4 * 64 * 8 + 4 * 64 * 64)
    assert r["tf32"] is False and r["median_s"] > 0
    with pytest.raises(BadInputError, match="tiles"):
        at.time_attention("flash", 64 * 200, 8)
    assert at.counted_bytes("torch sdpa", 64, 8) is None
    assert np.isclose(at.attention_flops(4, 1, causal=True), 4 * 10)
