"""The per-thread emulation of the GPU ladder (course.gemm.emulate, course.gemm.machine): every rung equals a float64
product with no race, no out-of-range access and every output written once; one changed formula makes it fail;
its formulas are the CUDA C's; mma and ldmatrix follow the PTX ISA's fragment tables (course.gemm.fragments);
bank conflicts and races are counted where they are."""

from __future__ import annotations

import inspect
import re
import textwrap

import numpy as np
import pytest

import course.gemm.emulate as em
from course.gemm import fragments
from course.gemm.ladder import GPU_RUNG_SPECS, GPU_RUNGS, kernel_source
from course.gemm.machine import Launch


def _size(rung: str, blocks=(2, 2), tiles=3):
    s = GPU_RUNG_SPECS[rung]
    if s.bounds_checked:
        return 45, 37, 13
    return blocks[0] * s.bm, blocks[1] * s.bn, tiles * s.bk


def _run(rung, arch=80, blocks=(2, 2), tiles=3, seed=0):
    m, n, k = _size(rung, blocks, tiles)
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    return em.emulate_launch(rung, a, b, arch)


@pytest.mark.parametrize("rung", GPU_RUNGS)
def test_every_rung_s_threads_compute_the_product_without_a_race(rung):
    e = _run(rung)
    assert not any(e.problems.values()), e.problems
    assert e.max_rel_error < 1e-12 and e.ok


@pytest.mark.parametrize("rung", ["warptile", "mma_tf32"])
def test_the_plain_copies_below_sm80_are_race_free_too(rung):
    e = _run(rung, arch=75, blocks=(1, 1), tiles=3)
    assert e.ok, e.problems


#: (rung, a formula of its emulation, the slip) -- each must be caught
MUTATIONS = [
    ("naive", "row = bx * BM + e.tx", "row = bx * BM + e.ty"),
    ("coalesced", "e.gload(\"B\", i * N + col", "e.gload(\"B\", i * N + row"),
    ("shared", "acc += e.sload(As, As.at(ty, kk))", "acc += e.sload(As, As.at(kk, ty))"),
    ("shared", "            e.sync()\n        e.gstore", "        e.gstore"),            # the second barrier
    ("blocktile_1d", "tr, tc = t // BN, t % BN", "tr, tc = t % BN, t // BN"),
    ("blocktile_2d", "rn = np.stack([e.sload(Bs, Bs.at(kk * BN + tc * TN + j))",
     "rn = np.stack([e.sload(Bs, Bs.at(kk * BN + tr * TN + j))"),
    ("vectorized", "As.at((4 * ac + q) * BM + ar)", "As.at((4 * ac + q) + ar * BK)"),     # A not transposed
    ("warptile", "e.wait(1)", "e.wait(2)"),                                               # the stage not waited for
    ("warptile", "lr, lc = lane // (COL_STEP // 4), lane % (COL_STEP // 4)",
     "lr, lc = lane // (COL_STEP // 4), lane % (COL_STEP // 2)"),
    ("mma_tf32", "As.at(st, r, kk + q + 4)", "As.at(st, r, kk + q)"),
    ("mma_tf32", "r, c = row0 + wm + 16 * mi + g, col0 + wn + 8 * ni + 2 * q",
     "r, c = row0 + wm + 16 * mi + q, col0 + wn + 8 * ni + 2 * g"),
    ("mma_bf16", "trans=True", "trans=False"),
    ("mma_bf16", "st = tile & 1", "st = 0"),
]


@pytest.mark.parametrize("rung, old, new", MUTATIONS, ids=[f"{r}-{i}" for i, (r, _, _) in enumerate(MUTATIONS)])
def test_one_changed_formula_in_the_emulation_is_caught(rung, old, new, monkeypatch):
    src = textwrap.dedent(inspect.getsource(em.RUNG_EMULATIONS[rung]))
    assert old in src, f"the emulation of {rung} no longer reads {old!r}"
    namespace = dict(vars(em))
    exec(compile(src.replace(old, new, 1), f"<{rung} mutant>", "exec"), namespace)
    monkeypatch.setitem(em.RUNG_EMULATIONS, rung, namespace[rung])
    e = _run(rung, blocks=(2, 1), tiles=2)
    assert not e.ok


#: (CUDA C, the emulation's line): each rung's index arithmetic as both spell it, both required word for word
SHARED_FORMULAS = {
    "naive": [("row = blockIdx.x * 32 + threadIdx.x", "row = bx * BM + e.tx"),
              ("A[row * K + i] * B[i * N + col]", 'e.gload("A", row * K + i, mask=inside) * e.gload("B", i * N + col')],
    "coalesced": [("col = blockIdx.x * 32 + threadIdx.x", "col = bx * BN + e.tx")],
    "shared": [("As[ty][tx] = A[row * K + k0 + tx]", 'e.sstore(As, As.at(ty, tx), e.gload("A", row * K + k0 + tx))'),
               ("Bs[ty][tx] = B[(k0 + ty) * N + col]",
                'e.sstore(Bs, Bs.at(ty, tx), e.gload("B", (k0 + ty) * N + col))'),
               ("As[ty][kk] * Bs[kk][tx]", "e.sload(As, As.at(ty, kk)) * e.sload(Bs, Bs.at(kk, tx))")],
    "blocktile_1d": [("tr = t / BN, tc = t % BN", "tr, tc = t // BN, t % BN"),
                     ("As[(tr * TM + i) * BK + kk] * b", "e.sload(As, As.at((tr * TM + i) * BK + kk)) * b")],
    "blocktile_2d": [("tr = t / (BN / TN), tc = t % (BN / TN)", "tr, tc = t // (BN // TN), t % (BN // TN)"),
                     ("Bs[kk * BN + tc * TN + j]", "Bs.at(kk * BN + tc * TN + j)"),
                     ("As[(ar + r) * BK + ac] = A[(row0 + ar + r) * K + k0 + ac]",
                      'As.at((ar + r) * BK + ac), e.gload("A", (row0 + ar + r) * K + k0 + ac)')],
    "vectorized": [("ar = t / (BK / 4), ac = t % (BK / 4)", "ar, ac = t // (BK // 4), t % (BK // 4)"),
                   ("As[(4 * ac + 0) * BM + ar] = a.x", "As.at((4 * ac + q) * BM + ar)"),
                   ("&As[kk * BM + tr * TM + i]", "As.at(kk * BM + tr * TM + i)")],
    "warptile": [("wm = (warp / (BN / WN)) * WM", "wm, wn = (warp // (BN // WN)) * WM"),
                 ("As[s][wm + lr + ROW_STEP * i][kk]", "As.at(st, wm + lr + ROW_STEP * i, kk)"),
                 ("&Bs[s][kk][wn + COL_STEP * j + 4 * lc]", "Bs.at(st, kk, wn + COL_STEP * j + 4 * lc)"),
                 ("copy16(&As[s][r][4 * q], &A[(row0 + r) * K + k0 + 4 * q])",
                  'e.cp_async(As, As.at(st, r, per * q), "A", (row0 + r) * K + k0 + per * q)')],
    "mma_tf32": [("const int r = wm + 16 * mi + g;", "r = wm + 16 * mi + g"),
                 ("tf32(As[s][r + 8][kk + q + 4])", "tf32(e.sload(As, As.at(st, r + 8, kk + q + 4)))"),
                 ("tf32(Bs[s][kk + q + 4][c])", "tf32(e.sload(Bs, Bs.at(st, kk + q + 4, c)))")],
    "mma_bf16": [("&As[s][wm + 16 * mi + lane % 16][kk + 8 * (lane / 16)], false",
                  "As.at(st, wm + 16 * mi + lane % 16, kk + 8 * (lane // 16)), trans=False"),
                 ("&Bs[s][kk + lane % 16][wn + 8 * ni + 8 * (lane / 16)], true",
                  "Bs.at(st, kk + lane % 16, wn + 8 * ni + 8 * (lane // 16)), trans=True")],
}


@pytest.mark.parametrize("rung", GPU_RUNGS)
def test_the_emulation_and_the_cuda_c_share_their_index_formulas(rung):
    cuda = re.sub(r"\s+", " ", kernel_source(rung))
    python = re.sub(r"\s+", " ", textwrap.dedent(inspect.getsource(em.RUNG_EMULATIONS[rung])) +
                    inspect.getsource(em._load_tiles))
    for c_form, py_form in SHARED_FORMULAS[rung]:
        assert c_form in cuda, f"{rung}: the CUDA C no longer reads {c_form!r}"
        assert py_form in python, f"{rung}: the emulation no longer reads {py_form!r}"


def test_the_emulated_mma_places_registers_by_the_fragment_tables():
    rng = np.random.default_rng(2)
    for shape, (m, n, k) in (("m16n8k8.tf32", (16, 8, 8)), ("m16n8k16.bf16", (16, 8, 16))):
        A = fragments.round_inputs(rng.standard_normal((m, k)).astype(np.float32), shape)
        B = fragments.round_inputs(rng.standard_normal((k, n)).astype(np.float32), shape)
        C = rng.standard_normal((m, n)).astype(np.float32)
        e = Launch(GPU_RUNG_SPECS["mma_tf32"], np.zeros((128, 16)), np.zeros((16, 128)), 128, 128, 16)
        regs = [np.tile(fragments.lane_registers(x, shape, op), (8, 1)) for x, op in ((A, "a"), (B, "b"), (C, "c"))]
        d = e.mma(shape, regs[2], regs[0], regs[1])[:32]
        got = fragments.from_lane_registers(d.astype(np.float32), shape, "c")
        np.testing.assert_allclose(got, fragments.mma_by_lanes(A, B, C, shape), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got, A.astype(np.float64) @ B + C, rtol=1e-5, atol=1e-5)


def test_ldmatrix_with_the_kernel_s_lane_addresses_hands_out_the_isa_s_bf16_fragments():
    """lane l points at row l % 16, column 8 (l / 16) of A's 16x16 tile (and of B's 16x16, transposed): the
    registers that arrive are the PTX ISA's m16n8k16 A fragment, and the B fragments of two n8 tiles."""
    spec = GPU_RUNG_SPECS["mma_bf16"]
    e = Launch(spec, np.zeros((128, 32)), np.zeros((32, 128)), 128, 128, 32)
    next(e.blocks())
    tile = np.arange(16 * 24, dtype=np.float64).reshape(16, 24)
    S = e.smem("S", (16, 24), esize=2)
    S.data[...] = tile.ravel()
    a = e.ldmatrix(S, S.at(e.lane % 16, 8 * (e.lane // 16)), trans=False).reshape(-1, 8)[:32]
    assert np.array_equal(a, fragments.lane_registers(tile[:, :16], "m16n8k16.bf16", "a"))
    b = e.ldmatrix(S, S.at(e.lane % 16, 8 * (e.lane // 16)), trans=True)[:32]
    assert np.array_equal(b[:, 0:2].reshape(32, 4), fragments.lane_registers(tile[:, 0:8], "m16n8k16.bf16", "b"))
    assert np.array_equal(b[:, 2:4].reshape(32, 4), fragments.lane_registers(tile[:, 8:16], "m16n8k16.bf16", "b"))
    assert e.wavefronts == e.ideal                      # the 48-byte rows put each matrix's 8 rows on 32 banks


def test_bank_conflicts_are_counted_where_the_addresses_collide():
    e = Launch(GPU_RUNG_SPECS["blocktile_2d"], np.zeros((128, 8)), np.zeros((8, 128)), 128, 128, 8)
    cases = [(np.arange(256) * 4, 4, 8, 8), (np.arange(256) * 4 * 32, 4, 8 * 32, 8),   # stride 1 word, 32 words
             (np.zeros(256, np.int64), 4, 8, 8),                                        # one word: a broadcast
             (np.arange(256) * 16, 16, 32, 32), (np.arange(256) * 32, 16, 64, 32)]       # float4: 4 / 8 wavefronts
    for addr, nbytes, wavefronts, ideal in cases:
        e.wavefronts = e.ideal = 0
        e._banks(addr, nbytes)
        assert (e.wavefronts, e.ideal) == (wavefronts, ideal), (addr[:3], nbytes)
    assert _run("blocktile_2d", blocks=(1, 1), tiles=1).bank_conflict_factor > 1.5     # its 8-float strides
    assert _run("warptile", blocks=(1, 1), tiles=1).bank_conflict_factor == 1.0


def test_a_missing_barrier_and_a_copy_never_waited_for_are_races():
    spec = GPU_RUNG_SPECS["warptile"]
    e = Launch(spec, np.ones(16), np.ones(16), 128, 128, 16)
    for _ in e.blocks():
        S = e.smem("S", (256,))
        e.sstore(S, S.at(e.t), e.t)
        e.sload(S, S.at((e.t + 1) % 256))                 # a neighbour's cell, no barrier between
    assert e.problems["races"]
    e = Launch(spec, np.ones(4096), np.ones(16), 128, 128, 16)
    for _ in e.blocks():
        S = e.smem("S", (1024,))
        e.cp_async(S, S.at(4 * e.t), "A", 4 * e.t)
        e.commit()
    assert any("never waited" in p for p in e.problems["races"])
