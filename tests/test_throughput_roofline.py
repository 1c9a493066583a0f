"""Lesson 03: the roofline model, measured peaks and points, figures, report registration."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course import throughput as T
from course.errors import BadInputError, DeviceMemoryError
from course.results import ResultSet
from course.throughput import plots as P


@settings(max_examples=60, deadline=None)
@given(st.floats(1e-4, 1e5), st.floats(1e8, 1e16), st.floats(1e8, 1e13))
def test_attainable_is_the_lower_roof_and_classify_agrees(i, pf, pb):
    a = T.attainable(i, pf, pb)
    assert a == pytest.approx(min(pf, i * pb))
    kind = T.classify(i, pf, pb)
    assert kind == ("memory-bound" if i * pb < pf * (1 - 1e-12) else kind)
    if kind == "memory-bound":
        assert a == pytest.approx(i * pb)
    else:
        assert a == pytest.approx(pf)


def test_ridge_point_splits_memory_from_compute():
    r = T.ridge_point(1e12, 1e11)
    assert r == 10
    assert T.classify(9.99, 1e12, 1e11) == "memory-bound" and T.classify(10, 1e12, 1e11) == "compute-bound"


@pytest.mark.parametrize("args, words", [((0, 1e9, 1e9), "intensity"), ((1, 0, 1e9), "peaks"),
                                         ((1, 1e9, -1), "peaks")])
def test_roofline_bad_input(args, words):
    with pytest.raises(BadInputError, match=words):
        T.attainable(*args)
    with pytest.raises(BadInputError, match=words):
        T.classify(*args)


def test_measured_peaks_use_the_spine_copy_and_the_best_matmul():
    rs = T.measure_peaks("cpu", quick=True, copy_nbytes=2 ** 22, repeat=2, budget_s=0.2)
    pk = T.peaks_of(rs, "cpu")
    assert pk["bandwidth"] > 0 and pk["flops"]["float32"] > 0
    tried = rs.select(kind="matmul", dtype="float32")
    assert pk["flops"]["float32"] == max(r["flops_per_s"] for r in tried)
    assert "copy_bandwidth" in rs.select(kind="peak_bandwidth")[0]["source"]


@pytest.mark.parametrize("op, n", [("add", 4096), ("matmul", 32), ("scan", 1024), ("mlp step", 4)])
def test_roofline_points_have_counted_intensity_and_measured_rate(op, n):
    r = T.roofline_point(op, n, repeat=2)
    assert r["kind"] == "point" and r["op"] == op and r["n"] == n
    assert r["intensity"] == pytest.approx(r["flops"] / r["bytes"])
    assert r["flops_per_s"] == pytest.approx(r["flops"] / r["median_s"])


def test_roofline_point_intensities_are_ordered_as_the_lesson_says():
    add = T.roofline_point("add", 1024, repeat=1)["intensity"]
    scan = T.roofline_point("scan", 1024, repeat=1)["intensity"]
    mm = T.roofline_point("matmul", 256, repeat=1)["intensity"]
    assert add < scan < 1 < mm


@pytest.mark.parametrize("op, n, exc, words", [("fft", 8, BadInputError, "fft"), ("add", 0, BadInputError, ">= 1"),
                                               ("scan", 2 ** 42, DeviceMemoryError, "smaller"),
                                               ("mlp step", 2 ** 40, DeviceMemoryError, "smaller")])
def test_roofline_point_bad_input(op, n, exc, words):
    with pytest.raises(exc, match=words):
        T.roofline_point(op, n)


def test_measure_roofline_quick_with_a_tiny_budget_stops_early():
    rs = T.measure_roofline(points=(("add", 1024),), total_budget_s=1e-6)
    assert rs.params["stopped_early"] and "Stopped early" in rs.notes[-1]
    assert rs.select(kind="peak_bandwidth")


def test_roofline_figure_draws_roofs_points_and_the_highlight():
    rs = ResultSet("roofline")
    rs.add(device="cpu", kind="peak_bandwidth", bytes_per_s=1e10)
    rs.add(device="cpu", kind="peak_flops", dtype="float32", flops_per_s=1e11, n=512)
    rs.add(device="cpu", kind="point", name="add n=1", op="add", intensity=1 / 12, flops_per_s=5e8)
    hl = {"device": "cpu", "name": "matmul n=64", "intensity": 10.0, "flops_per_s": 5e10}
    fig = P.roofline_figure(rs, highlight=hl)
    ax = fig.axes[0]
    labels = [" ".join(t.get_text().split()) for t in fig.legends[0].get_texts()]   # one legend, above the axes;
    # a label may wrap where the CPU's name is long
    assert any("roof 100 GFLOP/s" in t for t in labels) and any("your choice" in t for t in labels)
    assert "ridge at 10 FLOP/byte" in ax.get_title()
    assert "No GPU" in fig.texts[-1].get_text()


@pytest.mark.slow
def test_every_lesson_figure_names_its_device():
    from course.plots import figure_to_png

    figs = [P.sweep_plot(T.throughput_sweep("sum", [4, 16], repeat=1)),
            P.latency_figure(T.smallest_op_latency("cpu", repeat=5)),
            P.async_figure([T.async_chain("cpu", n=64, chain=2, repeat=2)]),
            P.batch_figure(T.batch_sweep([1, 2], sizes=(4, 2), repeat=1, stream_steps=1)),
            P.fusion_figure(T.fusion_compare(n=256, steps=2, repeat=1, modes=("unfused",))),
            P.precision_figure(T.precision_sweep([8], dtypes=("float32",), repeat=1)),
            P.transfer_figure(None)]
    for fig in figs:
        assert any("Measured live on" in t.get_text() for t in fig.texts)
        assert figure_to_png(fig)[:4] == b"\x89PNG"


def test_fusion_bars_a_thousandfold_apart_go_on_a_log_axis_so_the_small_ones_show():
    rs = ResultSet("fusion", params={"steps": 2, "chain": ["a", "b"], "n": 1024, "dtype": "float32"})
    for dev, t in (("cpu", 4e-3), ("gpu", 4e-6)):
        rs.add(device=dev, mode="fused", median_s=t, kernels=1, bytes=8e3, gb_per_s=8e3 / t / 1e9)
    ax = P.fusion_figure(rs).axes[0]
    assert ax.get_xscale() == "log" and "log scale" in ax.get_xlabel()
    assert ax.get_xlim()[0] < 4e-3                     # the GPU's 0.004 ms bar starts inside the axes
    rs.records[1]["median_s"] = 2e-3                   # two close times: a plain linear axis
    assert P.fusion_figure(rs).axes[0].get_xscale() == "linear"


def test_transfer_figure_without_data_says_why():
    fig = P.transfer_figure(None)
    assert any("need a GPU" in t.get_text() for t in fig.axes[0].texts)


def test_lesson_experiments_are_registered_for_the_report():
    from course.report import discover

    exps = discover()
    for name in ("launch_latency", "throughput_add", "throughput_sum", "throughput_matmul", "async_chain",
                 "batching", "fusion", "transfer_bandwidth", "mixed_precision", "roofline", "memory_latency"):
        assert exps[name].lesson == "03" and exps[name].plotter is not None


@pytest.mark.slow
def test_quick_experiment_runs_and_plots(tmp_path):
    from course.report import run_report

    index = run_report(tmp_path, quick=True, only=["throughput_sum", "transfer_bandwidth"], devices=["cpu"],
                       show_progress=False)
    import json

    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["failures"] == []
    names = {s["experiment"] for s in doc["result_sets"]}
    assert {"throughput_sum", "transfer_bandwidth"} <= names
    assert (tmp_path / "throughput_sum.png").exists() and index.exists()


@pytest.mark.gpu
def test_gpu_roofline_and_crossover():
    rs = T.measure_roofline(["cpu", "gpu"], dtypes=("float32", "float16"), points=(("add", 2 ** 22),))
    pk = T.peaks_of(rs, "gpu")
    assert pk["bandwidth"] > 0 and set(pk["flops"]) == {"float32", "float16"}
    sweep = T.throughput_sweep("add", [2 ** k for k in range(0, 25, 4)], devices=["cpu", "gpu"])
    # From one element (a kernel launch against a numpy call: the CPU wins) to 2^24 elements
    # (memory bandwidth: the GPU wins), the curves must cross inside the sweep, measured live.
    cross = T.find_crossover(sweep, [])
    assert cross.status == "crossed" and cross.source == "live", cross.message
    assert 1 < cross.n < 2 ** 24


def test_a_faster_matmul_point_raises_the_peak_and_says_so():
    from course.throughput.roofline import _raise_peaks_to_matmul_points

    rs = ResultSet("roofline")
    rs.add(device="cpu", kind="peak_flops", dtype="float32", flops_per_s=1e9, n=512, source="sweep")
    rs.add(device="cpu", kind="point", op="matmul", dtype="float32", n=256, flops=2 * 256 ** 3,
           min_s=2 * 256 ** 3 / 5e9)
    _raise_peaks_to_matmul_points(rs)
    assert T.peaks_of(rs, "cpu")["flops"]["float32"] == pytest.approx(5e9)
    assert "raised" in rs.notes[0]


def test_bandwidth_sweep_draws_the_copy_bandwidth_line():
    rs = T.throughput_sweep("add", [16, 4096], repeat=1)
    fig = P.sweep_plot(rs, y="gb_per_s", bandwidth={"cpu": 2e10})
    labels = [t.get_text().replace("\n", " ") for t in fig.legends[0].get_texts()]
    assert any("copy bandwidth" in t and "20.0 GB/s" in t for t in labels)


# ------------------------------------------------------------------ the theoretical peak, from the machine's parts

def test_theoretical_peak_is_the_product_of_its_labelled_factors():
    import numpy as np

    from course.throughput.roofline import theoretical_peak

    p = theoretical_peak("float32", fma_units=2)
    names = [f[0] for f in p["factors"]]
    assert names == ["cores", "SIMD lanes", "FMA units per core", "flops per FMA", "clock (Hz)"]
    values = [f[1] for f in p["factors"]]
    if all(values):
        assert p["flops_per_s"] == pytest.approx(float(np.prod([float(v) for v in values])))
    assert all(f[2] for f in p["factors"])          # every factor says where it came from


def test_the_fma_units_are_labelled_an_assumption_unless_given():
    from course.throughput.roofline import theoretical_peak

    units = {f[0]: f for f in theoretical_peak("float64")["factors"]}["FMA units per core"]
    assert "ASSUMPTION" in units[2]
    given = {f[0]: f for f in theoretical_peak("float64", fma_units=1)["factors"]}["FMA units per core"]
    assert given[1] == 1 and given[2] == "given"


def test_float64_has_half_the_lanes_of_float32():
    from course.throughput.roofline import theoretical_peak

    lanes = [{f[0]: f[1] for f in theoretical_peak(d)["factors"]}["SIMD lanes"] for d in ("float32", "float64")]
    if lanes[0]:
        assert lanes[0] == 2 * lanes[1]


def test_theoretical_peak_refuses_other_dtypes():
    from course.throughput.roofline import theoretical_peak

    with pytest.raises(BadInputError, match="float32 or float64"):
        theoretical_peak("int8")


def test_clock_is_read_with_its_source():
    from course.throughput.roofline import cpu_clock_hz

    hz, source = cpu_clock_hz()
    assert isinstance(source, str) and source
    assert hz is None or 1e8 < hz < 1e10


def test_the_fusion_figure_shows_a_gpu_reference_recorded_at_another_size_with_its_size():
    ref = ResultSet("fusion", params={"steps": 4, "n": 2**26}, source="reference")
    ref.provenance["gpus"] = [{"name": "Test GPU"}]
    for mode in ("unfused", "fused"):
        ref.add(device="gpu", mode=mode, n=2**26, steps=4, median_s=1e-3, kernels=1, bytes=1e9, gb_per_s=1e3)
    live = T.fusion_compare(n=256, steps=2, repeat=1, modes=("unfused",))
    labels = [t.get_text() for t in P.fusion_figure(live, [ref]).axes[0].get_yticklabels()]
    assert labels[-1] == "GPU: fused\n(recorded on Test GPU, n = 67,108,864, 4 steps)" and len(labels) == 3
    assert len(P.fusion_figure(live).axes[0].get_yticklabels()) == 1


def test_peak_matmul_sizes_reads_any_name_of_the_gpu():
    """'cuda' (or 'GPU') is the GPU: its sizes, not the CPU's, which it was given before the door normalised it."""
    from course.throughput.roofline import peak_matmul_sizes

    assert peak_matmul_sizes("cuda", "float32") == peak_matmul_sizes("gpu", "float32") == [1024, 2048, 4096]
    with pytest.raises(BadInputError, match="tpu"):
        peak_matmul_sizes("tpu", "float32")
