"""Reference results that are partly bad: a record without a field a figure needs, or with NaN or None
where a number is needed, is left out of the figures with a note; it never breaks a figure or an app
(a KeyError or TypeError in a notebook).  The shipped references lose nothing to this."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

import course
import course.results as results
from course.report import discover
from course.results import REFERENCE_DIR, ResultSet, load_reference

SHIPPED = sorted(REFERENCE_DIR.glob("*.json"))


def _damaged(path: Path, how: str) -> tuple[dict, int]:
    """The file's set with every fifth record damaged in one field (a different field each time)."""
    d = json.loads(path.read_text())
    damaged = 0
    for i, r in enumerate(d["records"]):
        keys = [k for k in sorted(r) if k != "device"]
        if i % 5 != 2 or not keys:
            continue
        k = keys[(i // 5) % len(keys)]
        if how == "missing":
            del r[k]
        else:
            r[k] = "NaN" if how == "nan" else None
        damaged += 1
    return d, damaged


def _plotters_that_draw_references_alone():
    """Experiments whose report figure draws its shipped references beside an empty live set."""
    out = []
    for name, exp in discover().items():
        refs = load_reference(name)
        if not refs or exp.plotter is None:
            continue
        try:
            plt.close(exp.plotter(ResultSet(name), refs))
        except Exception:       # needs live records (the report always has them): not this test's concern
            continue
        out.append(name)
    return out


@pytest.mark.slow
def test_no_shipped_reference_record_is_judged_incomplete():
    assert SHIPPED, "no reference results ship in this checkout"
    for path in SHIPPED:
        assert ResultSet.load(path).incomplete_records() == [], path.name


def test_a_record_lacking_a_field_or_a_number_is_left_out_with_a_note(tmp_path, monkeypatch):
    rs = ResultSet("demo", provenance=results.provenance() | {"gpus": [{"name": "Test GPU"}]})
    for n in (1, 2, 4, 8):
        rs.add(device="gpu", method="scan", n=n, median_s=1e-3 * n)
    rs.records[1].pop("median_s")
    rs.records[2]["n"] = float("nan")
    rs.save(tmp_path / "demo__test-gpu.json")
    monkeypatch.setattr(results, "REFERENCE_DIR", tmp_path)
    (ref,) = load_reference("demo")
    assert [r["n"] for r in ref.records] == [1, 8]
    assert "2 record(s)" in ref.notes[-1] and "record 1 lacks 'median_s'" in ref.notes[-1]
    assert "record 2 has nan in 'n'" in ref.notes[-1]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["missing", "nan", "none"])
def test_every_report_figure_draws_damaged_references(tmp_path, monkeypatch, how):
    names = _plotters_that_draw_references_alone()
    assert len(names) >= 10
    monkeypatch.setattr(results, "REFERENCE_DIR", tmp_path)
    exps = discover()
    for path in SHIPPED:
        name = path.name.split("__")[0]
        if name not in names:
            continue
        d, damaged = _damaged(path, how)
        for old in tmp_path.glob("*.json"):
            old.unlink()
        (tmp_path / path.name).write_text(json.dumps(d))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            refs = load_reference(name)
            kept = sum(len(r.records) for r in refs)
            assert kept >= len(d["records"]) - 2 * damaged      # a damaged record can hide a peer's kind
            assert kept == len(d["records"]) or any("left out" in note for r in refs for note in r.notes)
            plt.close(exps[name].plotter(ResultSet(name), refs))


@pytest.mark.slow
@pytest.mark.widgets
@pytest.mark.parametrize("how", ["missing", "nan", "none"])
def test_apps_that_show_references_without_a_gpu_draw_damaged_ones(tmp_path, monkeypatch, how):
    if course.gpu_available():
        pytest.skip("a GPU answers here: the apps measure it instead of drawing references")
    from course.bppsa import widgets as bppsa_widgets
    from course.recurrences import widgets as rec_widgets
    from course.scan import widgets as scan_widgets
    from course.throughput import widgets as tp_widgets

    for path in SHIPPED:
        d, _ = _damaged(path, how)
        (tmp_path / path.name).write_text(json.dumps(d))
    monkeypatch.setattr(results, "REFERENCE_DIR", tmp_path)
    apps = [scan_widgets.timing_app(n=2**6), bppsa_widgets.timing_app(T=10, hidden=4, batch=1),
            rec_widgets.timing_app(T=64), tp_widgets.latency_app(), tp_widgets.memory_app(),
            tp_widgets.roofline_app()]
    for app in apps:
        if "device" not in app.controls:
            continue
        app.controls["device"].value = "gpu"
        assert app.last_error is None, (app, app.last_error)
        assert app.image.value
