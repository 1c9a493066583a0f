"""Lesson 02: numpy's own report of its SIMD loops, the operand probe, and the report experiments."""

from __future__ import annotations

import numpy as np
import pytest

from course.errors import BadInputError
from course.vectorize import simd as vs
from course.vectorize import timing as vt


def test_dispatch_lists_every_ufunc_an_op_calls():
    info = vs.ufunc_dispatch("sigmoid", "float32")
    if not info:
        pytest.skip("numpy < 2.0 cannot report its dispatch")
    assert list(info) == ["negative", "exp", "add", "reciprocal"]
    assert all(d["current"] for d in info.values())


def test_dispatch_targets_are_among_those_numpy_was_built_for():
    info = vs.ufunc_dispatch("relu", "float64")
    if not info:
        pytest.skip("numpy < 2.0 cannot report its dispatch")
    d = info["maximum"]
    if d["available"]:
        assert d["current"] in d["available"]


def test_unknown_op_is_named():
    with pytest.raises(BadInputError, match="'gelu'"):
        vs.ufunc_dispatch("gelu")


def test_dispatch_table_has_a_row_per_ufunc():
    table = vs.dispatch_table_html("float32")
    if "cannot report" in table:
        pytest.skip("numpy < 2.0")
    assert table.count("<tr>") == 1 + sum(len(u) for u in vs.OP_UFUNCS.values())


def test_operand_probe_reports_three_rates_and_refuses_huge_sizes():
    r = vt.operand_probe(n=4096, calls=20)
    assert r["array_over_scalar"] == pytest.approx(
        (r["array_gb_per_s"] / r["scalar_gb_per_s"]), rel=1e-9)
    with pytest.raises(BadInputError, match="cache-sized"):
        vt.operand_probe(n=2**30)


def test_scalar_and_array_operands_give_the_same_relu():
    x = np.random.default_rng(0).standard_normal(999).astype(np.float32)
    np.testing.assert_array_equal(np.maximum(x, np.float32(0)), np.maximum(x, np.zeros_like(x)))


def test_lesson_02_experiments_are_registered_with_plots():
    from course.report import discover

    exps = discover()
    for name in ("vectorize_ladder", "vectorize_bandwidth", "vectorize_matmul"):
        assert exps[name].lesson == "02" and exps[name].plotter is not None


def test_bandwidth_experiment_plots_a_quick_run():
    from course.report import discover

    exp = discover()["vectorize_bandwidth"]
    rs = exp.run(devices=["cpu"], quick=True, progress=None)
    assert {r["kind"] for r in rs.records} == {"copy", "out", "new", "threads"}
    fig = exp.plotter(rs, [])
    assert fig.axes
