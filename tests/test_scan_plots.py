"""Lesson 04 pictures: the frames of the tree, the figures' labels and their bad-input messages."""

from __future__ import annotations

import numpy as np
import pytest

from course.errors import BadInputError
from course.results import ResultSet
from course.scan.algorithms import matmul
from course.scan.plots import MAX_DRAWN, blelloch_frames, counts_figure, timing_figure, tree_figure


@pytest.mark.parametrize("n, frames", [(1, 2), (2, 4), (5, 8), (8, 8), (9, 10), (32, 12)])
def test_frames_are_input_levels_root_and_down_levels(n, frames):
    fr = blelloch_frames(np.arange(n))
    assert len(fr) == frames
    assert fr[0].phase == "input"
    assert [f.phase for f in fr].count("root") == 1


def test_last_frame_holds_the_exclusive_scan_and_ranges():
    x = np.array([3, 1, 7, 0, 4, 1])
    last = blelloch_frames(x)[-1]
    np.testing.assert_array_equal(last.values[:6], [0, 3, 4, 11, 11, 15])
    np.testing.assert_array_equal(last.ranges[:6], [[0, 0], [0, 1], [0, 2], [0, 3], [0, 4], [0, 5]])


def test_root_frame_holds_the_identity_of_the_operator():
    fr = blelloch_frames(np.random.default_rng(0).normal(size=(4, 2, 2)), op=matmul)
    root = next(f for f in fr if f.phase == "root")
    np.testing.assert_array_equal(root.values[-1], np.eye(2))


def test_tree_figure_names_step_and_work():
    fig = tree_figure(np.arange(1, 9), step=3)
    title = fig.axes[0].get_title()
    assert "step 3 of 7" in title and "operator applications so far 7 of 14" in title


@pytest.mark.parametrize("x, step, match", [
    (np.arange(MAX_DRAWN + 1), None, f"draws 1 to {MAX_DRAWN} elements"),
    (np.arange(8), 8, "step must be between 0 and 7"),
    (np.zeros(0), None, "empty input"),
])
def test_tree_figure_rejects_what_it_cannot_draw(x, step, match):
    with pytest.raises(BadInputError, match=match):
        tree_figure(x, step=step)


def test_counts_figure_draws_three_scans_and_guides():
    fig = counts_figure(2**12, highlight=64)
    labels = [line.get_label() for line in fig.axes[0].lines]
    assert {"sequential", "hillis-steele", "blelloch", "n log2 n", "n"} <= set(labels)


def _rs(source="live"):
    rs = ResultSet("scan_sweep", source=source)
    if source == "reference":
        rs.provenance["gpus"] = [{"name": "NVIDIA Test GPU"}]
    for n in (2**10, 2**12):
        rs.add(device="gpu" if source == "reference" else "cpu", algorithm="blelloch", n=n,
               median_s=n * 1e-9, gb_per_s=8.0)
    rs.add(device="gpu" if source == "reference" else "cpu", algorithm="copy", n=2**20,
           median_s=1e-3, gb_per_s=20.0)
    return rs


def test_timing_figure_without_gpu_says_no_reference_yet():
    fig = timing_figure(_rs(), [])
    assert "no reference GPU results recorded yet" in fig.texts[-1].get_text()
    assert "CPU copy limit 20 GB/s" in [t.get_text().strip() for t in fig.axes[1].texts][0]


def test_timing_figure_draws_references_dashed_and_labelled():
    fig = timing_figure(_rs(), [_rs("reference")])
    ref_lines = [ln for ln in fig.axes[0].lines if "recorded on NVIDIA Test GPU" in ln.get_label()]
    assert ref_lines and all(ln.get_linestyle() == "--" for ln in ref_lines)
    assert "reference results recorded on NVIDIA Test GPU" in fig.texts[-1].get_text()


def test_hillis_steele_frames_end_with_the_inclusive_scan():
    from course.scan.plots import hillis_steele_frames

    fr = hillis_steele_frames(np.array([3, 1, 7, 0, 4]))
    assert len(fr) == 4
    np.testing.assert_array_equal(fr[-1].values, [3, 4, 11, 11, 15])
    np.testing.assert_array_equal(fr[-1].ranges[:, 0], 0)


def test_tree_figure_rejects_unknown_algorithm():
    with pytest.raises(BadInputError, match="tree_figure draws"):
        tree_figure(np.arange(4), algorithm="bogus")


def test_timing_figure_draws_noisy_measurements_hollow():
    from course.plots import NOISY_LABEL

    rs = ResultSet("scan_sweep")
    for n, noisy in ((1024, False), (4096, True)):
        rs.add(device="cpu", algorithm="blelloch", n=n, median_s=1e-4 * n / 1024, gb_per_s=1.0, noisy=noisy)
    fig = timing_figure(rs)
    hollow = [ln for ax in fig.axes for ln in ax.lines if ln.get_label() == NOISY_LABEL]
    assert hollow and all(list(ln.get_xdata()) == [4096.0] for ln in hollow)
