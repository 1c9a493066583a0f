"""The mma.sync fragment tables hold what the PTX ISA says, every element exactly once, and the warp-level
product computed from the lanes' registers equals a float64 product within TF32 / bf16 rounding."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.errors import BadInputError, UnsupportedDtypeError
from course.gemm.fragments import (
    MMA_SHAPES,
    OPERANDS,
    fragment_layout,
    fragment_owners,
    from_lane_registers,
    lane_registers,
    mma_by_lanes,
    mma_dims,
    operand_shape,
    round_inputs,
    round_to_tf32,
)


def _isa(shape: str, operand: str, lane: int) -> list[tuple[int, int]]:
    """The PTX ISA's rules (section 9.7.14.5.7 / .8), written out register by register, one lane at a time."""
    group, tig = lane >> 2, lane % 4
    if operand == "c":
        return [(group + (8 if i >= 2 else 0), tig * 2 + (i & 1)) for i in range(4)]
    if shape == "m16n8k8.tf32":
        if operand == "a":
            return [(group + (8 if i in (1, 3) else 0), tig + (4 if i in (2, 3) else 0)) for i in range(4)]
        return [(tig + (4 if i == 1 else 0), group) for i in range(2)]
    if operand == "a":
        return [(group + (0 if i in (0, 1, 4, 5) else 8), tig * 2 + (i & 1) + (8 if i >= 4 else 0)) for i in range(8)]
    return [(tig * 2 + (i & 1) + (8 if i >= 2 else 0), group) for i in range(4)]


CASES = [(s, o) for s in MMA_SHAPES for o in OPERANDS]


@pytest.mark.parametrize("shape, operand", CASES)
def test_the_layout_is_the_isas_table_lane_by_lane(shape, operand):
    layout = fragment_layout(shape, operand)
    assert layout.dtype.kind == "i"
    for lane in range(32):
        assert [tuple(map(int, rc)) for rc in layout[lane]] == _isa(shape, operand, lane), lane


@pytest.mark.parametrize("shape, operand", CASES)
def test_every_element_is_held_by_exactly_one_register_of_one_lane(shape, operand):
    rows, cols = operand_shape(shape, operand)
    layout = fragment_layout(shape, operand)
    held = np.zeros((rows, cols), int)
    np.add.at(held, (layout[..., 0].ravel(), layout[..., 1].ravel()), 1)
    assert (held == 1).all()
    assert layout.shape[1] * 32 == rows * cols
    owners = fragment_owners(shape, operand)
    for r in range(rows):
        for c in range(cols):
            lane, reg = owners[r, c]
            assert tuple(layout[lane, reg]) == (r, c)


def test_the_register_counts_are_the_isas():
    assert [fragment_layout(s, o).shape[1] for s in MMA_SHAPES for o in OPERANDS] == [4, 2, 4, 8, 4, 4]
    assert mma_dims("m16n8k8.tf32") == (16, 8, 8) and mma_dims("m16n8k16.bf16") == (16, 8, 16)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(CASES), st.integers(0, 2**32 - 1))
def test_lane_registers_and_back_is_the_identity(case, seed):
    shape, operand = case
    m = np.random.default_rng(seed).standard_normal(operand_shape(shape, operand)).astype(np.float32)
    regs = lane_registers(m, shape, operand)
    assert regs.shape == (32, fragment_layout(shape, operand).shape[1])
    np.testing.assert_array_equal(from_lane_registers(regs, shape, operand), m)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(MMA_SHAPES), st.integers(0, 2**32 - 1), st.floats(1e-3, 1e3))
def test_mma_by_lanes_is_a_float64_product_within_the_rounding(shape, seed, scale):
    m, n, k = mma_dims(shape)
    rng = np.random.default_rng(seed)
    a, b, c = (rng.standard_normal(s) * scale for s in ((m, k), (k, n), (m, n)))
    d = mma_by_lanes(a, b, c, shape)
    assert d.dtype == np.float32 and d.shape == (m, n)
    ar, br = round_inputs(a, shape).astype(np.float64), round_inputs(b, shape).astype(np.float64)
    exact = ar @ br + c.astype(np.float32)
    mag = np.abs(ar) @ np.abs(br) + np.abs(c)
    assert np.all(np.abs(d - exact) <= (k + 1) * 2.0**-23 * mag + 1e-30)      # float32 accumulation only
    unit = 2.0**-11 if shape.endswith("tf32") else 2.0**-8                     # half an ulp of the inputs
    assert np.all(np.abs(d - (a @ b + c)) <= (2 * unit + (k + 1) * 2.0**-23) * mag + 1e-30)


def test_tf32_rounds_to_nearest_with_ties_away_from_zero():
    one = np.float32(1.0)
    ulp = 2.0**-10
    x = np.array([1 + ulp / 2, -(1 + ulp / 2), 1 + ulp / 2 - 2**-23, 1 + 3 * ulp / 2, np.inf, -np.inf], np.float32)
    got = round_to_tf32(x)
    np.testing.assert_array_equal(got[:4], [1 + ulp, -(1 + ulp), one, 1 + 2 * ulp])
    assert np.isinf(got[4:]).all() and np.isnan(round_to_tf32(np.float32(np.nan)))
    bits = round_to_tf32(np.random.default_rng(0).standard_normal(1000).astype(np.float32)).view(np.uint32)
    assert not (bits & 0x1FFF).any()                                            # 13 low bits dropped


def test_bfloat16_inputs_keep_seven_mantissa_bits():
    x = np.array([1 + 2**-8, 1 + 2**-7, 3.0], np.float32)
    np.testing.assert_array_equal(round_inputs(x, "m16n8k16.bf16"), [1.0, 1 + 2**-7, 3.0])


def test_the_product_uses_the_other_lanes_registers():
    """D[r, c] needs A's row r and B's column c: most of those elements sit in other lanes."""
    own_a, own_b = fragment_owners("m16n8k8.tf32", "a"), fragment_owners("m16n8k8.tf32", "b")
    layout_c = fragment_layout("m16n8k8.tf32", "c")
    for lane in range(32):
        r, c = layout_c[lane, 0]
        row_lanes, col_lanes = set(own_a[r, :, 0].tolist()), set(own_b[:, c, 0].tolist())
        assert row_lanes == {4 * (lane // 4) + t for t in range(4)}        # the 4 lanes of its group
        assert col_lanes == {4 * int(c) + t for t in range(4)}             # the 4 lanes whose groupID is c


@pytest.mark.parametrize("call, error, words", [
    (lambda: fragment_layout("m16n8k4.tf32", "a"), BadInputError, "shape must be one of"),
    (lambda: fragment_layout("m16n8k8.tf32", "d"), BadInputError, "operand must be one of"),
    (lambda: lane_registers(np.zeros((8, 16)), "m16n8k8.tf32", "a"), BadInputError, "16 x 8"),
    (lambda: lane_registers(np.zeros((16, 8), complex), "m16n8k8.tf32", "a"), UnsupportedDtypeError, "real"),
    (lambda: from_lane_registers(np.zeros((32, 3)), "m16n8k8.tf32", "a"), BadInputError, "32 x 4"),
    (lambda: mma_by_lanes(np.zeros((16, 8)), np.zeros((8, 8)), np.zeros((8, 8))), BadInputError, "c must be"),
    (lambda: mma_by_lanes(np.zeros((16, 8)), "b", np.zeros((16, 8))), UnsupportedDtypeError, "b must hold"),
    (lambda: round_to_tf32(np.array(["1.0"])), UnsupportedDtypeError, "real numbers"),
])
def test_bad_arguments_are_refused_at_the_door(call, error, words):
    with pytest.raises(error, match=words):
        call()
