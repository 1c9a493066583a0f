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


def test_a_measurement_without_a_prediction_says_to_make_one_first(capsys):
    predictions.reveal("never_predicted", 3.0)
    out = capsys.readouterr().out
    assert "Make your prediction first" in out and "3" in out and "You predicted" not in out


def test_a_predict_cell_left_at_none_records_nothing_and_asks_for_a_number(capsys):
    """Run All on a lesson notebook must not record a prediction the learner never made."""
    predictions.predict("asked", 4)
    predictions.predict("asked", None)              # the cell as it ships: forgets, records nothing
    assert predictions.recorded("asked") is None
    assert "write your guess" in capsys.readouterr().out
    predictions.reveal("asked", 5.0)
    assert "Make your prediction first" in capsys.readouterr().out


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


@pytest.mark.parametrize("bad", ["ten", float("nan"), float("inf"), True])
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


def test_no_lesson_notebook_ships_a_prediction_already_made():
    """A prediction is the learner's to make: every predict cell of every notebook ships with None in the
    guess's place, so Run All (and the executed book) never records a number the learner did not write."""
    import ast
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "notebooks"
    filled = []
    for path in sorted(root.glob("*.ipynb")) + sorted(root.glob("solutions/*.ipynb")):
        for k, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
            source = "".join(cell["source"])
            if cell["cell_type"] != "code" or "predict(" not in source:
                continue
            code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
            for node in ast.walk(ast.parse(code)):
                if (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "predict"
                        and len(node.args) > 1 and not (isinstance(node.args[1], ast.Constant)
                                                        and node.args[1].value is None)):
                    filled.append(f"{path.relative_to(root)} cell {k}: {ast.unparse(node)}")
    assert not filled, ("these predict cells ship a guess the learner did not make; put None in its place: "
                        + "; ".join(filled))
