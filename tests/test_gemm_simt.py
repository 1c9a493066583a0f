"""The SIMT ladder's first rungs, run on the CUDA simulator, compute c = a @ b, and their counted loads agree
with the closed form of :mod:`course.gemm.counts` at the same (tiny) tiles."""

from __future__ import annotations

import dataclasses

import pytest

from course.errors import BadInputError
from course.gemm.simt import SIMT_RUNGS, SIMT_SPECS, simt_rung_counts


@pytest.fixture(scope="module")
def rows():
    return {r["rung"]: r for r in simt_rung_counts()}


@pytest.mark.slow
def test_every_rung_computes_the_product(rows):
    assert list(rows) == list(SIMT_RUNGS)
    assert all(r["correct"] for r in rows.values())


@pytest.mark.slow
def test_the_counts_show_each_rungs_one_idea(rows):
    # naive: a warp reads 32 rows of a (32 sectors) and one float of b; coalesced: a broadcast and 4 sectors
    assert rows["naive"]["read_sector_bytes_per_fma"] == 33.0
    assert rows["coalesced"]["read_sector_bytes_per_fma"] == 5.0
    assert [rows[r]["shared_loads_per_fma"] for r in SIMT_RUNGS] == [0.0, 0.0, 2.0, (1 + 4) / 4, (4 + 4) / 16]
    assert rows["shared"]["bank_conflicts"] == 0 and rows["blocktile_1d"]["bank_conflicts"] == 0
    # the 2-D patch's reads of sa: 4 rows of one warp, TM * BK = 16 words apart, fall on 2 banks
    assert rows["blocktile_2d"]["worst_conflict"] == 2
    sectors = [rows[r]["sectors_per_fma"] for r in SIMT_RUNGS]
    assert sectors[0] > sectors[1] > sectors[2]


@pytest.mark.slow
def test_the_simulated_counts_agree_with_the_closed_form_at_the_same_tiles(rows, monkeypatch):
    from course.gemm import counts, ladder
    for rung in SIMT_RUNGS:
        s = SIMT_SPECS[rung]
        threads = s["threads"][0] * s["threads"][1] if isinstance(s["threads"], tuple) else s["threads"]
        tiny = dataclasses.replace(ladder.GPU_RUNG_SPECS[rung], threads=threads, bm=s["bm"], bn=s["bn"],
                                   bk=s["bk"], tm=s["tm"], tn=s["tn"])
        monkeypatch.setitem(counts.GPU_RUNG_SPECS, rung, tiny)
        closed = counts.rung_counts(rung, s["m"], s["n"], s["k"])
        assert closed["fma"] * threads == s["m"] * s["n"] * s["k"], rung
        assert closed["shared_loads_per_fma"] == pytest.approx(rows[rung]["shared_loads_per_fma"]), rung
        # bytes the loads ask for; on the two rungs without tiles, the sectors a warp's loads touch
        simulated = rows[rung]["read_sector_bytes_per_fma" if rung in ("naive", "coalesced") else "read_bytes_per_fma"]
        assert closed["sector_bytes_per_fma"] == pytest.approx(simulated), rung


def test_bad_rungs_are_refused():
    with pytest.raises(BadInputError, match="rungs must be"):
        simt_rung_counts(["warp"])
    with pytest.raises(BadInputError, match="rungs must be"):
        simt_rung_counts("naive")
