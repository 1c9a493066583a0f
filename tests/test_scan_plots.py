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
    live_only = timing_figure(_rs(), [])
    fig = timing_figure(_rs(), [_rs("reference")])
    ref_lines = fig.axes[0].lines[len(live_only.axes[0].lines):]
    assert ref_lines and all(ln.get_linestyle() == "--" for ln in ref_lines if len(ln.get_xdata()) > 2)
    # the device and date are said once, in the caption, not in every legend entry
    assert not any("Test GPU" in ln.get_label() for ln in fig.axes[0].lines)
    assert "Dashed: reference results recorded on NVIDIA Test GPU" in fig.texts[-1].get_text()


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


def _single_pass_sets():
    variants = ResultSet("scan_kernel_variants", source="reference")
    variants.provenance["gpus"] = [{"name": "NVIDIA Test GPU"}]
    for variant, gb, extra in (("copy", 3000.0, {}), ("cupy.cumsum", 1000.0, {}),
                               ("single-pass (look-back)", 2700.0, {}), ("torch.cumsum", 2000.0, {}),
                               ("scan-then-add 256x8 padded", 700.0, {"strategy": "scan-then-add"}),
                               ("scan-then-add 128x4 plain", 400.0, {"strategy": "scan-then-add"}),
                               ("reduce-then-scan 512x8 plain", 600.0, {"strategy": "reduce-then-scan"})):
        variants.add(device="gpu", variant=variant, n=2**26, gb_per_s=gb, of_copy=gb / 3000, median_s=1e-3, **extra)
    sweep = ResultSet("scan_sweep", source="reference")
    sweep.provenance["gpus"] = [{"name": "NVIDIA Test GPU"}]
    for alg, shares in (("single-pass", (0.01, 0.3, 0.6, 0.9)), ("cupy", (0.01, 0.2, 0.3, 0.34)),
                        ("torch", (0.01, 0.55, 0.45, 0.7))):
        for k, share in enumerate(shares):
            sweep.add(device="gpu", algorithm=alg, n=2**(10 + 4 * k), median_s=6e-6 * (1 + k), of_copy=share,
                      gb_per_s=3000 * share)
    return variants, sweep


def test_single_pass_standing_reads_the_copy_the_libraries_and_n_off_the_records():
    from course.scan.timing import single_pass_standing

    text = "\n".join(single_pass_standing(*_single_pass_sets()))
    assert "recorded on NVIDIA Test GPU" in text and "90% of the copy" in text
    assert "torch.cumsum (PyTorch's wrapper of CUB)" in text and "the single pass runs at 1.35× its rate" in text
    assert "best numba block scan: scan-then-add 256x8 padded" in text and "128x4 plain" not in text
    # torch dips under half the copy after passing it once: it keeps above only from the last size on
    assert "the single pass from n = 262,144 on" in text and "torch.cumsum from n = 4,194,304 on" in text
    assert "cupy.cumsum never (34% at best" in text
    assert single_pass_standing(None, None) == []


def test_single_pass_figure_is_readable_with_records_and_without():
    from _figure_checks import figure_problems

    from course.plots import figure_takeaway
    from course.scan.plots import single_pass_figure

    fig = single_pass_figure(*_single_pass_sets())
    assert figure_problems(fig) == [] and "90% of the device copy" in figure_takeaway(fig)
    assert {ln.get_label() for ln in fig.axes[0].lines} >= {"single-pass (look-back)", "torch.cumsum", "device copy"}
    empty = single_pass_figure(None, None)
    assert figure_problems(empty) == [] and "no reference GPU results" in empty.texts[-1].get_text()
