"""Widgets within their bound: a setting whose estimate is over the limit is refused before it starts,
and the estimate of a big scan counts what a big n costs per element (measured past the caches)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from course.scan import widgets as sw
from course.widgets import WIDGET_LIMIT_S


def test_a_big_scans_estimate_uses_the_rate_measured_past_the_caches(monkeypatch):
    asked = []

    def rate(key, work, fn):
        asked.append(key)
        return 1e6 if key[0] == "scan past the caches" else 1e9   # per element: a thousand times slower

    monkeypatch.setattr(sw, "measured_rate", rate)
    monkeypatch.setattr(sw, "scan_rate", lambda algorithm, op: 1e9)
    small = sw.scan_cost_s("blelloch", 2**16, "affine")
    big = sw.scan_cost_s("blelloch", 2**24, "affine")
    assert ("scan past the caches", "blelloch", "affine") in asked
    work = sw.operation_counts("blelloch", 2**24)["work"]
    assert big == pytest.approx(sw.SCAN_CALLS * work / 1e6)
    assert small == pytest.approx(sw.SCAN_CALLS * sw.operation_counts("blelloch", 2**16)["work"] / 1e9)


def test_timing_app_refuses_scans_over_the_limit_before_making_any_input(monkeypatch):
    monkeypatch.setattr(sw, "scan_cost_s", lambda algorithm, n, op: 2 * WIDGET_LIMIT_S)
    monkeypatch.setattr(sw, "input_cost_s", lambda n, op: 0.5)

    def no_input(*a, **k):
        raise AssertionError("the input was made although no scan fits")

    monkeypatch.setattr(sw, "make_input", no_input)
    rs, skipped = sw._time_all(2**24, "affine", "cpu", 0.25)
    assert rs.records == []
    assert any("blelloch (about 20 s" in s and "choose a smaller n" in s for s in skipped)
    assert any(s.startswith("hillis-steele (about") for s in skipped)


def test_timing_app_stops_when_the_scans_before_took_longer_than_estimated(monkeypatch):
    monkeypatch.setattr(sw, "scan_cost_s", lambda algorithm, n, op: 1.0)
    monkeypatch.setattr(sw, "input_cost_s", lambda n, op: 0.0)
    now = [0.0]

    def time_scan(alg, n, op, *a, **k):
        now[0] += 9.5                      # the machine is much slower than estimated
        return {"device": "cpu", "algorithm": alg, "median_s": 1.0}

    monkeypatch.setattr(sw, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr(sw, "time_scan", time_scan)
    rs, skipped = sw._time_all(2**10, "add", "cpu", 0.25)
    assert [r["algorithm"] for r in rs.records] == ["numpy"]
    assert any("the scans before it took 10 s" in s for s in skipped)
