"""The hardware counts of the kernel simulator, on tiny kernels whose counts are computed by hand, and
the optimisation exercises graded by them (the slow starting kernel fails, the course's answer passes)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import cuda, float32

import course.check as check
from course.errors import BadInputError
from course.kernels import count, tuned
from course.kernels.tuning import TUNINGS, grade_tuning

F32 = np.float32


def copy_coalesced(out, a):
    i = cuda.grid(1)
    out[i] = a[i]


def copy_strided(out, a):            # lane i reads a[i, 0]: one float per 256-byte row
    i = cuda.grid(1)
    out[i] = a[i, 0]


def test_a_coalesced_float32_copy_touches_four_sectors_per_warp_request():
    # 64 threads = 2 warps; each warp reads 32 x 4 B = 128 B = 4 sectors and writes 4 more.
    c = count(copy_coalesced, 1, 64, out=np.zeros(64, F32), a=np.ones(64, F32))
    assert (c.global_requests, c.global_sectors, c.global_ideal_sectors) == (4, 16, 16)


def test_a_strided_read_touches_one_sector_per_lane():
    # the read: 2 warps x 32 rows = 64 sectors; the coalesced write: 2 x 4 = 8.
    c = count(copy_strided, 1, 64, out=np.zeros(64, F32), a=np.ones((64, 64), F32))
    assert (c.global_requests, c.global_sectors) == (4, 72)


def test_float64_doubles_the_sectors_of_a_coalesced_request():
    c = count(copy_coalesced, 1, 32, out=np.zeros(32), a=np.ones(32))
    assert c.global_sectors == 8 + 8


def column_of_shared(out, a):
    tile = cuda.shared.array((32, 32), float32)
    t = cuda.threadIdx.x
    for r in range(32):
        tile[r, t] = 1.0             # a row: 32 banks, conflict-free
    cuda.syncthreads()
    out[t] = tile[t, 0]              # a column: every word in bank 0


def column_of_padded(out, a):
    tile = cuda.shared.array((32, 33), float32)
    t = cuda.threadIdx.x
    for r in range(32):
        tile[r, t] = 1.0
    cuda.syncthreads()
    out[t] = tile[t, 0]              # word 33 t: banks t, all different


def broadcast(out, a):
    cache = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    cache[t] = 2.0
    cuda.syncthreads()
    out[t] = cache[0]                # one word for every lane: free


def test_a_column_of_a_32_wide_tile_is_a_32_way_conflict_and_padding_removes_it():
    args = {"out": np.zeros(32, F32), "a": np.zeros(1, F32)}
    plain, padded = count(column_of_shared, 1, 32, **args), count(column_of_padded, 1, 32, **args)
    # 32 row writes (1 wavefront each) + 1 column read (32 wavefronts)
    assert (plain.shared_requests, plain.shared_wavefronts, plain.bank_conflicts, plain.worst_conflict) == \
        (33, 64, 31, 32)
    assert (padded.shared_requests, padded.bank_conflicts, padded.worst_conflict) == (33, 0, 1)
    assert plain.barriers == padded.barriers == 1


def test_a_broadcast_is_free():
    c = count(broadcast, 1, 32, out=np.zeros(32, F32), a=np.zeros(1, F32))
    assert (c.shared_requests, c.bank_conflicts) == (2, 0)


def branch_on_parity(out, a):
    t = cuda.threadIdx.x
    if t % 2 == 0:                   # every warp split in two
        out[t] = a[t]


def branch_on_warp(out, a):
    t = cuda.threadIdx.x
    if t < 32:                       # warp 0 all in, warp 1 all out
        out[t] = a[t]


def test_a_branch_inside_a_warp_diverges_and_one_along_warps_does_not():
    args = {"out": np.zeros(64, F32), "a": np.ones(64, F32)}
    parity, warp = count(branch_on_parity, 1, 64, **args), count(branch_on_warp, 1, 64, **args)
    assert (parity.divergent_warps, parity.warp_phases) == (2, 2)
    assert (warp.divergent_warps, warp.warp_phases) == (0, 2)
    assert parity.global_requests == 4 and warp.global_requests == 2


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 8))
def test_a_2d_block_numbers_its_warps_x_fastest(rows):
    # blocks of 32 x rows: each row of threads is one warp reading one row of a: 4 sectors each.
    def rows_copy(out, a):
        x, y = cuda.grid(2)
        out[y, x] = a[y, x]
    c = count(rows_copy, 1, (32, rows), out=np.zeros((rows, 32), F32), a=np.ones((rows, 32), F32))
    assert (c.global_requests, c.global_sectors, c.divergent_warps) == (2 * rows, 8 * rows, 0)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TUNINGS))
def test_the_slow_starting_kernel_misses_its_target_and_the_answer_meets_it(name):
    t = TUNINGS[name]
    slow, good = grade_tuning(name, t.slow), grade_tuning(name, t.answer)
    assert not slow.ok and any("the target is at most" in p for p in slow.problems)
    assert not any("expected" in p for p in slow.problems)          # slow, but correct
    assert good.ok, good.problems


@pytest.mark.parametrize("name, half_way, still_over", [
    ("transpose", tuned.transpose_tiled, "bank conflicts: 1984"),
    ("reduction", tuned.reduce_strided_index, "bank conflicts: 90")])
def test_half_an_optimisation_is_told_what_is_still_over_target(name, half_way, still_over):
    g = grade_tuning(name, half_way)
    assert not g.ok and len(g.problems) == 1 and g.problems[0].startswith(still_over)


def test_a_fast_but_wrong_kernel_fails_on_its_values():
    def skips_the_last_column(out, a):
        x, y = cuda.grid(2)
        for j in range(0, 32, 4):
            if x < 63:
                out[x, y + j] = a[y + j, x]
    g = grade_tuning("transpose", skips_the_last_column)
    assert not g.ok and any("expected" in p for p in g.problems)


@pytest.mark.slow
def test_the_checks_print_the_counts_beside_the_start_and_return_the_verdict(capsys):
    assert check.check_kernel_reduction_fast(tuned.reduce_interleaved) is False
    out = capsys.readouterr().out
    assert "divergent warps: 48, the target is at most 12 (4.0x the target" in out
    assert check.check_kernel_scan_fast(tuned.scan_padded) is True
    assert "On target" in capsys.readouterr().out


def test_a_stub_is_not_done_yet_and_an_unknown_exercise_is_refused(capsys):
    def stub(out, a):
        raise NotImplementedError
    assert check.check_kernel_transpose_fast(stub) is False
    assert "Not done yet" in capsys.readouterr().out
    with pytest.raises(BadInputError, match="transpose"):
        grade_tuning("sort", stub)


@pytest.mark.slow
def test_the_warp_demonstrations_count_the_bad_variant_higher():
    from course.kernels import warps
    c = warps.coalescing(2)
    assert (c["coalesced"].global_sectors, c["strided"].global_sectors) == (2 * 8, 2 * (32 + 4))
    d = warps.divergence()
    assert d["interleaved"].divergent_warps > d["sequential"].divergent_warps
    b = warps.bank_conflicts()
    assert b["32 x 32 tile"].worst_conflict == 32 and b["32 x 33 tile"].bank_conflicts == 0


@pytest.mark.parametrize("threads, regs, smem, blocks, limit", [
    (256, 32, 0, 8, "warps"),              # 64 warps / 8
    (256, 64, 0, 4, "registers"),          # 65536 / (64 x 256)
    (128, 32, 100 * 1024, 2, "shared memory"),   # 228 KiB / (100 KiB + 1 KiB reserved)
    (32, 16, 0, 32, "blocks")])
def test_occupancy_against_h100_data_sheet_limits(threads, regs, smem, blocks, limit):
    from course.kernels.warps import occupancy
    o = occupancy(threads, regs, smem)
    assert (o["blocks_per_sm"], o["limited_by"]) == (blocks, limit)
    with pytest.raises(BadInputError):
        occupancy(2048)


def test_padding_the_tile_scan_removes_its_conflicts_and_saves_more_with_longer_runs():
    from course.kernels.plots import scan_padding_report
    from course.kernels.warps import scan_padding_rows
    rows = scan_padding_rows(((32, 4), (32, 8)))
    assert all(r["padded_wavefronts_per_element"] < r["plain_wavefronts_per_element"] for r in rows)
    saved = [r["plain_wavefronts_per_element"] - r["padded_wavefronts_per_element"] for r in rows]
    assert saved[1] > saved[0] and rows[0]["worst_conflict_plain"] == 4
    assert "not recorded" in scan_padding_report(rows)      # the references hold other tile shapes


@pytest.mark.slow
def test_the_padding_report_gives_each_recorded_gpu_its_own_times(tmp_path, monkeypatch):
    import json

    import course.results as results
    from course.kernels.plots import scan_padding_report
    from course.kernels.warps import scan_padding_rows

    (src,) = sorted(results.REFERENCE_DIR.glob("scan_kernel_variants__*.json"))
    d = json.loads(src.read_text())
    (tmp_path / src.name).write_text(json.dumps(d))
    d["provenance"]["gpus"][0]["name"] = "Fake GPU X200"
    plain = {(r.get("strategy"), r.get("threads"), r.get("items")): r["median_s"] for r in d["records"]
             if not r.get("conflict_free")}
    for r in d["records"]:                       # on this device, padding doubles the time
        if r.get("conflict_free"):
            r["median_s"] = 2 * plain[(r.get("strategy"), r.get("threads"), r.get("items"))]
    (tmp_path / "scan_kernel_variants__fake.json").write_text(json.dumps(d))
    monkeypatch.setattr(results, "REFERENCE_DIR", tmp_path)
    text = scan_padding_report(scan_padding_rows(((128, 4), (128, 16))))
    first = results.ResultSet.load(src).gpu_name
    assert f"Recorded on {first}" in text and "Recorded on Fake GPU X200" in text
    assert "On Fake GPU X200, at 128x" in text and "took 2.00x the plain one's time" in text
    (second,) = [part for part in text.split("\nRecorded on ") if part.startswith("Fake GPU X200")]
    assert first not in second and "H100" not in second
    monkeypatch.setattr(results, "REFERENCE_DIR", tmp_path / "none")
    assert "No GPU has recorded" in scan_padding_report(scan_padding_rows(((128, 4),)))


def test_the_gpu_timing_refuses_without_a_gpu_and_estimates_nothing(monkeypatch):
    from course.errors import GPUUnavailableError
    from course.kernels import tuning
    monkeypatch.setattr(tuning, "gpu_kernels_available", lambda: False)
    with pytest.raises(GPUUnavailableError, match="counts"):
        tuning.time_tuning("scan", tuned.scan_padded)


@pytest.mark.parametrize("kernel, dims", [(tuned.transpose_naive, 2), (tuned.transpose_tiled_padded, 2),
                                          (tuned.reduce_interleaved, 1), (tuned.reduce_sequential, 1),
                                          (tuned.scan_plain, 1), (tuned.scan_padded, 1)])
def test_the_exercise_kernels_compile_for_an_h100_without_a_gpu(kernel, dims):
    # numba.cuda.jit needs every shared array's size as one constant: a sum such as TR_TILE + 1 does not compile.
    array = float32[:, ::1] if dims == 2 else float32[::1]
    try:
        ptx, _ = cuda.compile_ptx(kernel, (array, array), cc=(9, 0))
    except Exception as exc:          # noqa: BLE001 - no libNVVM here: nothing to compile with
        if "NVVM" in str(exc) or "nvvm" in str(exc) or "libdevice" in str(exc):
            pytest.skip(f"numba finds no libNVVM here: {exc}")
        raise
    assert ".entry" in ptx


def gather(out, a, idx):
    i = cuda.grid(1)
    out[i] = a[idx[i]]


def shared_gather(out, a, idx):
    cache = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    cache[idx[t]] = 1.0
    cuda.syncthreads()
    out[t] = cache[idx[t]]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 255), min_size=32, max_size=32))
def test_sectors_of_a_gather_match_an_independent_count(idx):
    # one warp: reads idx (int32, 128 B = 4 sectors), reads a[idx] (distinct 32-byte blocks of 4-byte
    # elements), writes out (4 sectors).
    idx = np.array(idx, dtype=np.int32)
    c = count(gather, 1, 32, out=np.zeros(32, F32), a=np.ones(256, F32), idx=idx)
    assert c.global_sectors == 4 + len({int(i) // 8 for i in idx}) + 4
    assert c.global_requests == 3


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 255), min_size=32, max_size=32))
def test_bank_conflicts_of_a_shared_gather_match_an_independent_count(idx):
    # the busiest bank's number of distinct words, counted with a dict of sets
    from collections import defaultdict
    banks = defaultdict(set)
    for w in idx:
        banks[w % 32].add(w)
    degree = max(len(v) for v in banks.values())
    c = count(shared_gather, 1, 32, out=np.zeros(32, F32), a=np.ones(1, F32), idx=np.array(idx, dtype=np.int32))
    assert (c.shared_requests, c.worst_conflict, c.bank_conflicts) == (2, degree, 2 * (degree - 1))


def test_counts_and_the_padding_table_refuse_bad_input_before_running():
    from course.kernels import Trace, hardware_counts
    from course.kernels.warps import scan_padding_rows
    with pytest.raises(BadInputError, match="Trace"):
        hardware_counts([], 32)
    with pytest.raises(BadInputError, match="threads"):
        count(copy_coalesced, 1, 0, out=np.zeros(1, F32), a=np.zeros(1, F32))
    with pytest.raises(BadInputError, match="block shape"):
        hardware_counts(Trace(), (32, 0))
    with pytest.raises(BadInputError, match="power of two"):
        scan_padding_rows(((100, 4),))
    with pytest.raises(BadInputError, match="items"):
        scan_padding_rows(((64, 0),))
