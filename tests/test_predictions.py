"""Checked predictions: a recorded guess is compared with the measurement, with the error and the lesson's why."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from course import predictions
from course.errors import BadInputError


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.setattr(predictions, "_GUESSES", {})


def test_a_low_guess_is_reported_as_a_factor_and_a_percentage_with_the_lessons_why(capsys):
    predictions.predict("launch_overhead_us", 10, unit=" µs")
    predictions.reveal("launch_overhead_us", 40.0, why="a launch costs more than a small kernel's work.")
    out = capsys.readouterr().out
    assert "Your prediction: launch_overhead_us = 10 µs" in out
    assert "measured 40 µs: 4× too low (75 % under the measurement)" in out
    assert "Why it matters: a launch costs more than a small kernel's work." in out


def test_a_high_guess_an_exact_one_and_a_close_one(capsys):
    predictions.predict("steps", 1000)
    predictions.reveal("steps", 40)
    assert "25× too high (2,400 % over the measurement)" in capsys.readouterr().out
    predictions.predict("steps", 40)
    predictions.reveal("steps", 40)
    assert "exactly right" in capsys.readouterr().out
    predictions.predict("steps", 42)
    predictions.reveal("steps", 40)
    assert "within 5 % of the measurement, well predicted" in capsys.readouterr().out


def test_a_measurement_without_a_prediction_says_to_run_the_predict_cell(capsys):
    predictions.reveal("never_predicted", 3.0)
    out = capsys.readouterr().out
    assert "No prediction was recorded" in out and "3" in out


def test_a_quantity_that_cannot_be_measured_here_keeps_the_guess(capsys):
    predictions.predict("crossover_n", 10_000)
    predictions.reveal("crossover_n", None, unmeasured="no GPU here")
    out = capsys.readouterr().out
    assert "could not be measured here (no GPU here)" in out and "keep your prediction of 10,000" in out


def test_a_later_guess_replaces_the_earlier_one():
    predictions.predict("x", 1)
    predictions.predict("x", 2)
    assert predictions.recorded("x") == 2
    assert predictions.recorded("y") is None


@pytest.mark.parametrize("bad", ["ten", None, float("nan"), float("inf"), True])
def test_a_guess_that_is_not_a_number_is_refused_with_a_clear_message(bad):
    with pytest.raises(BadInputError, match="must be a finite number"):
        predictions.predict("x", bad)


def test_an_empty_name_is_refused():
    with pytest.raises(BadInputError, match="non-empty string"):
        predictions.predict("", 1)


@given(st.floats(1e-6, 1e9), st.floats(1e-6, 1e9))
def test_the_error_factor_is_symmetric_and_at_least_one(guess, measured):
    e = predictions.prediction_error(guess, measured)
    back = predictions.prediction_error(measured, guess)
    assert e["factor"] >= 1 and e["factor"] == pytest.approx(back["factor"])
    assert e["percent"] == pytest.approx(100 * (guess - measured) / measured)
    assert e["direction"] == ("exact" if guess == measured else "low" if guess < measured else "high")


def test_a_zero_or_negative_measurement_has_no_factor():
    assert predictions.prediction_error(1, 0) == {"factor": None, "percent": None, "direction": "high"}
    assert predictions.prediction_error(-2, -1)["factor"] is None


def test_a_counted_number_from_a_reference_says_so(capsys):
    predictions.predict("steps", 20)
    predictions.reveal("steps", 40, verb="counted", source="reference: H100")
    assert "You predicted 20; counted 40 (reference: H100): 2× too low" in capsys.readouterr().out
