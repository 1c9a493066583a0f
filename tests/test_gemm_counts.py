"""The counted reasons each GPU rung is faster (course.gemm.counts): the loads and FMAs per thread predicted from the
tile sizes equal those the per-thread emulation counts, the ladder's ratios move the way the lesson says, and every
hardware ratio is a labelled data-sheet figure."""

from __future__ import annotations

import numpy as np
import pytest

from course.errors import BadInputError
from course.gemm.counts import DATA_SHEET, counts_table, limiter, rung_counts
from course.gemm.emulate import emulate_launch
from course.gemm.ladder import GPU_RUNG_SPECS, GPU_RUNGS

KEYS = ("fma", "global_loads", "global_load_bytes", "shared_loads", "shared_load_bytes")


@pytest.mark.parametrize("rung", GPU_RUNGS)
def test_the_counts_equal_what_the_emulated_threads_did(rung):
    s = GPU_RUNG_SPECS[rung]
    m, n, k = (64, 32, 9) if s.bounds_checked else (s.bm, 2 * s.bn, 2 * s.bk)
    rng = np.random.default_rng(1)
    e = emulate_launch(rung, rng.standard_normal((m, k)).astype(np.float32),
                       rng.standard_normal((k, n)).astype(np.float32))
    c = rung_counts(rung, m, n, k)
    assert {key: e.counts[key] for key in KEYS} == {key: c[key] for key in KEYS}
    if rung.startswith("mma"):
        assert e.counts["mma_per_warp"] == c["fma"] * 32 / np.prod(s.mma)


def test_each_rung_feeds_more_fmas_per_shared_load_or_per_dram_byte_than_the_one_before_it():
    rows = {r["rung"]: r for r in counts_table(4096, 4096, 4096)}
    assert rows["naive"]["sector_bytes_per_fma"] > 6 * rows["coalesced"]["sector_bytes_per_fma"]
    assert rows["shared"]["global_load_bytes"] * 32 == rows["coalesced"]["global_load_bytes"]
    per_fma = [rows[r]["shared_loads_per_fma"] for r in ("shared", "blocktile_1d", "blocktile_2d", "vectorized")]
    assert per_fma == sorted(per_fma, reverse=True) and per_fma[0] == 2.0 and per_fma[2] == 0.25
    assert rows["blocktile_2d"]["intensity"] > 3.9 * rows["shared"]["intensity"]
    assert rows["mma_bf16"]["intensity"] > 1.9 * rows["mma_tf32"]["intensity"]      # half the bytes per element
    assert {r["limiter"] for r in rows.values()} <= {"DRAM (no L2 reuse)", "L1/L2 traffic", "shared-memory issue",
                                                     "FMA issue", "tensor-core issue"}
    assert rows["naive"]["limiter"] == "L1/L2 traffic" and rows["warptile"]["limiter"] == "FMA issue"


def test_every_hardware_ratio_is_a_labelled_data_sheet_figure():
    for key, (value, source) in DATA_SHEET.items():
        assert value > 0 and source.startswith("data sheet:"), key
    assert set(limiter("warptile", 512, 512, 512)["sources"]) == set(DATA_SHEET)


def test_sizes_are_rounded_up_to_the_tile_as_gpu_matmul_pads_them():
    assert rung_counts("blocktile_2d", 100, 130, 20)["m"] == 128 and rung_counts("naive", 100, 130, 20)["m"] == 128
    assert rung_counts("naive", 100, 130, 21)["k"] == 21


@pytest.mark.parametrize("args, message", [(("fastest", 64, 64, 64), "rung must be one of"),
                                           (("naive", 0, 64, 64), "m must be a whole number"),
                                           (("naive", 64, 2.5, 64), "n must be a whole number")])
def test_bad_arguments_are_refused(args, message):
    with pytest.raises(BadInputError, match=message):
        rung_counts(*args)
