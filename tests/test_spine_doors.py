"""The spine's figures, apps, results, stand-in and stopwatch refuse at their door what used to give a silently
wrong answer (issue 49's debt of course.plots, course.widgets, course.results, course.standin and course.timing)."""

from __future__ import annotations

import math

import pytest

from course.errors import BadInputError, CourseError, ResultsError
from course.plots import add_footer, live_device_text, mark_noisy, new_figure, series_style, source_tag
from course.results import ResultSet, load_reference


def _reference() -> ResultSet:
    rs = ResultSet("demo", source="reference")
    rs.provenance["gpus"] = [{"name": "Test GPU"}]
    return rs


def test_a_bare_device_name_is_not_read_letter_by_letter():
    # "cpu" was read as the devices "c", "p" and "u": the footer then named no device at all
    with pytest.raises(BadInputError, match="devices must be a list"):
        live_device_text("cpu")
    fig, _ = new_figure()
    with pytest.raises(BadInputError, match="devices must be a list"):
        add_footer(fig, devices="gpu")
    assert live_device_text(["CPU"]) == live_device_text(["cpu"])


def test_a_reference_cpu_curve_is_named_as_its_host_whatever_the_case_of_its_device():
    # "CPU" was not "cpu": a reference's CPU curve then read as a CPU recorded on the GPU
    assert source_tag(_reference(), "CPU") == source_tag(_reference(), "cpu")
    assert "host of the Test GPU reference machine" in source_tag(_reference(), "CPU")
    with pytest.raises(BadInputError, match="device"):
        source_tag(_reference(), "tpu")


def test_noisy_points_need_one_flag_each():
    fig, (ax,) = new_figure()
    with pytest.raises(BadInputError, match="noisy"):         # was: no point marked, and False returned
        mark_noisy(ax, [1, 2], [1.0, 2.0], None)
    with pytest.raises(BadInputError, match="one entry per point"):
        mark_noisy(ax, [1, 2, 3], [1.0, 2.0, 3.0], [True, False])
    assert mark_noisy(ax, [1, 2], [1.0, 2.0], [False, True]) is True


def test_a_series_number_is_not_counted_from_the_end():
    with pytest.raises(BadInputError, match="i must be a whole number"):
        series_style(-1)                                     # was: the last style, silently


def test_a_result_set_says_whether_it_is_a_reference_in_one_spelling():
    # source="Reference" made a reference that every figure labelled "measured live"
    with pytest.raises(ResultsError, match="source must be 'live' or 'reference'"):
        ResultSet("demo", source="Reference")
    with pytest.raises(ResultsError, match="params"):
        ResultSet("demo", params=[1, 2])
    assert ResultSet("").experiment == ""                  # an empty placeholder is still allowed


def test_a_reference_name_is_a_name_not_a_pattern(tmp_path):
    for bad in ("", "../demo", "*", None, 3):
        with pytest.raises(BadInputError, match="experiment"):
            load_reference(bad, tmp_path)
    assert load_reference("demo", tmp_path) == []


def test_a_sweep_budget_that_is_not_a_number_of_seconds_is_refused_before_the_first_job():
    from course.timing import sweep_within_budget

    rs = ResultSet("demo")
    for bad in (math.nan, 0, -1.0, "10"):                    # NaN was never spent: the sweep never stopped
        with pytest.raises(BadInputError, match="total_budget_s"):
            sweep_within_budget([1, 2], rs, total_budget_s=bad)
    with pytest.raises(BadInputError, match="rs must be"):
        sweep_within_budget([1, 2], None)
    assert list(sweep_within_budget([1, 2], rs, total_budget_s=math.inf)) == [1, 2]


def test_noisy_note_takes_timings_or_records_only():
    from course.timing import noisy_note

    for bad in ("noisy", None, {"noisy": True}, [3]):
        with pytest.raises(BadInputError, match="timings"):
            noisy_note(bad)


@pytest.mark.widgets
def test_slider_and_button_values_are_refused_in_words():
    from course.widgets import device_buttons, dtype_dropdown, log2_slider, size_slider

    with pytest.raises(BadInputError, match="value must be one of the slider's sizes"):
        size_slider([1, 2, 4], value=3)                      # was: a TraitError from ipywidgets
    with pytest.raises(BadInputError, match="value must be one of the slider's sizes"):
        log2_slider(4, 8, 100)
    with pytest.raises(BadInputError, match="hi must be a whole number"):
        log2_slider(8, 4)
    with pytest.raises(BadInputError, match="include_both"):
        device_buttons("both")
    assert device_buttons("CPU").value == "cpu"
    with pytest.raises(BadInputError, match="dtypes"):
        dtype_dropdown("float32")                            # a string is not a list of dtypes
    with pytest.raises(BadInputError, match="value must be one of the dropdown's dtypes"):
        dtype_dropdown(("float32", "float64"), "float16")


def test_the_stand_in_registers_a_twin_only_under_a_name_and_as_a_function():
    from course.standin import kernel_twin, register_kernel
    from course.standin_cuda import StandinCuda, StandinGraph

    with pytest.raises(BadInputError, match="name"):
        register_kernel("", lambda grid, block, args: None)
    with pytest.raises(BadInputError, match="twin"):
        register_kernel("course_test_kernel", 5)
    with pytest.raises(BadInputError, match="name"):
        kernel_twin(None)
    with pytest.raises(NotImplementedError, match="register one"):
        kernel_twin("course_no_such_kernel")
    for bad in ((None, "x"), ("counter", 5)):
        with pytest.raises(CourseError):
            StandinCuda(*bad)
    with pytest.raises(CourseError):
        StandinGraph(None)
