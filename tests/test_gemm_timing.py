"""Lesson 09's measurements: the CPU ladder's records hold the contract's fields, their shares of BLAS come from
the same run, the slow loops are skipped with a note where they would take seconds, the GPU ladder and the
backprop products run on the stand-in GPU, and each experiment's figure draws.  No test asserts a speed."""

from __future__ import annotations

import numpy as np
import pytest
from _figure_checks import figure_problems

from course.errors import BadInputError, GPUUnavailableError
from course.gemm import timing as gt
from course.gemm.cpu import CPU_RUNGS
from course.plots import figure_takeaway
from course.report import discover
from course.results import ResultSet

CPU_FIELDS = ("device", "rung", "n", "dtype", "threads", "gflops", "of_blas", "of_roof", "max_rel_error", "median_s",
              "q25_s", "q75_s", "noisy")
GPU_FIELDS = ("device", "rung", "precision", "n", "tflops", "of_cublas", "max_rel_error", "median_s", "noisy")


@pytest.fixture(scope="module")
def ladder() -> ResultSet:
    return gt.cpu_ladder_sweep([16, 37], threads=(1, 2), repeat=2, budget_s=30)


def test_the_cpu_ladder_has_every_rung_and_blas_with_the_contracts_fields(ladder):
    assert ladder.experiment == "gemm_cpu_ladder"
    one = {r["rung"] for r in ladder.select(threads=1, n=37)}
    assert one == set(CPU_RUNGS) - {"parallel"} | {"blas"}
    assert {r["rung"] for r in ladder.select(threads=2, n=37)} == {"parallel", "blas"}
    for r in ladder.records:
        assert all(f in r for f in CPU_FIELDS), r
        assert r["device"] == "cpu" and r["gflops"] > 0 and r["max_rel_error"] < 1e-5
        assert ("bytes_per_fma" in r) == (r["rung"] != "blas")
    assert ladder.incomplete_records() == []


def test_of_blas_is_the_share_of_blas_measured_in_the_same_run(ladder):
    for r in ladder.records:
        blas = ladder.select(rung="blas", n=r["n"], threads=r["threads"])
        assert len(blas) == 1
        assert r["of_blas"] == pytest.approx(r["gflops"] / blas[0]["gflops"])
        assert r["of_roof"] == pytest.approx(r["gflops"] / r["roof_gflops"])
        assert r["roof_gflops"] <= ladder.params["peak_gflops"][str(r["threads"])]


def test_the_loops_are_skipped_with_a_note_where_they_would_take_too_long(monkeypatch):
    monkeypatch.setattr(gt, "LOOPS_COST_LIMIT_S", 1e-9)
    rs = gt.cpu_ladder_sweep([24], rungs=("loops", "reordered"), threads=(1,), repeat=1)
    assert {r["rung"] for r in rs.records} == {"reordered", "blas"}
    assert any(n.startswith("loops: skipped at n = 24") for n in rs.notes)


def test_one_rung_timed_alone_is_a_record():
    r = gt.time_cpu_rung("microkernel", 20, "float64", repeat=2)
    assert r["rung"] == "microkernel" and r["dtype"] == "float64" and r["max_rel_error"] < 1e-13
    assert r["bytes_per_fma"] > 0 and r["threads"] == 1


def test_the_fma_peak_is_a_positive_rate_and_refuses_other_dtypes():
    assert gt.fma_rate("float32", threads=1, repeat=2) > 0
    with pytest.raises(Exception, match="float32 or float64"):
        gt.fma_rate("float16", threads=1)


@pytest.mark.parametrize("kwargs,words", [
    ({"ns": []}, "at least 1"), ({"ns": [8], "rungs": ["goto"]}, "rung must be one of"),
    ({"ns": [8], "threads": "two"}, "threads"), ({"ns": [8], "dtype": "int32"}, "float"),
])
def test_the_ladder_refuses_bad_arguments(kwargs, words):
    with pytest.raises(BadInputError, match=words):
        gt.cpu_ladder_sweep(**kwargs)


def test_the_gpu_ladder_needs_a_gpu():
    from course.devices import gpu_available

    if gpu_available():
        pytest.skip("a GPU answers here")
    with pytest.raises(GPUUnavailableError):
        gt.gpu_ladder_sweep([32])


def test_the_gpu_ladder_runs_every_rung_against_cublas_at_its_precision_on_the_standin(standin_gpu):
    from course.gemm.ladder import GPU_RUNG_SPECS, GPU_RUNGS

    rs = gt.gpu_ladder_sweep([40], repeat=2)
    assert rs.experiment == "gemm_gpu_ladder"
    for r in rs.records:
        assert all(f in r for f in GPU_FIELDS), r
        assert r["device"] == "gpu" and r["error_rows"] == 40
    assert {r["rung"] for r in rs.records} == set(GPU_RUNGS) | {"cublas"}
    for r in rs.records:
        if r["rung"] != "cublas":
            assert r["precision"] == GPU_RUNG_SPECS[r["rung"]].precision and r["bytes_per_fma"] > 0
        lib = rs.select(rung="cublas", precision=r["precision"], n=r["n"])[0]
        assert r["of_cublas"] == pytest.approx(r["tflops"] / lib["tflops"])
        assert r["max_rel_error"] < {"float32": 1e-5, "tf32": 2e-3, "bfloat16": 2e-2}[r["precision"]]


def test_the_backprop_products_have_the_shapes_of_lesson_01s_layer():
    rs = gt.backprop_products_sweep([24], batch=8, devices=["cpu"], threads=1, repeat=2)
    shapes = {(r["product"], r["method"]): (r["m"], r["k"], r["n"], r["transposed"]) for r in rs.records}
    assert shapes == {("forward", "microkernel"): (8, 24, 24, ""), ("forward", "blas"): (8, 24, 24, ""),
                      ("input_grad", "microkernel"): (8, 24, 24, "W"), ("input_grad", "blas"): (8, 24, 24, "W"),
                      ("weight_grad", "microkernel"): (24, 8, 24, "X"), ("weight_grad", "blas"): (24, 8, 24, "X")}
    for r in rs.records:
        lib = rs.select(product=r["product"], method="blas")[0]
        assert r["of_library"] == pytest.approx(r["gflops"] / lib["gflops"])


def test_the_backprop_products_run_on_the_standin_gpu(standin_gpu):
    rs = gt.backprop_products_sweep([32], batch=16, devices=["gpu"], repeat=2)
    assert {r["method"] for r in rs.records} == {"warptile", "cublas"}
    assert all(r["device"] == "gpu" for r in rs.records)


# ----------------------------------------------------------------- the experiments and their figures

def _drawn(name: str, rs: ResultSet, references=()):
    fig = discover()[name].plotter(rs, list(references))
    assert figure_problems(fig) == [], name
    return fig


def test_the_cpu_ladder_experiment_draws_with_a_takeaway_read_off_its_numbers(ladder):
    fig = _drawn("gemm_cpu_ladder", ladder)
    assert "of NumPy's BLAS at n = 37" in figure_takeaway(fig)
    assert "no reference" in fig.axes[1].get_title() or fig.axes[1].patches


def test_the_gpu_figures_draw_from_a_recorded_set(standin_gpu):
    gpu = gt.gpu_ladder_sweep([32], rungs=("naive", "warptile", "mma_tf32"), repeat=1)
    recorded = ResultSet.from_dict(gpu.to_dict(), source="reference")
    fig = _drawn("gemm_gpu_ladder", ResultSet("gemm_gpu_ladder"), [recorded])
    assert "of cuBLAS" in figure_takeaway(fig)
    products = gt.backprop_products_sweep([32], batch=16, devices=["gpu"], repeat=1)
    cpu = gt.backprop_products_sweep([32], batch=16, devices=["cpu"], threads=1, repeat=1)
    fig = _drawn("gemm_backprop_products", cpu, [ResultSet.from_dict(products.to_dict(), source="reference")])
    assert "GPU" in figure_takeaway(fig) and "CPU" in figure_takeaway(fig)


def test_the_gpu_experiment_says_so_on_a_cpu_only_machine():
    rs = discover()["gemm_gpu_ladder"].run(devices=["cpu"], quick=True, progress=None)
    assert rs.records == [] and "No GPU here" in rs.notes[0]
    fig = _drawn("gemm_gpu_ladder", rs)
    assert "no GPU ladder recorded yet" in figure_takeaway(fig)


def test_the_records_survive_a_round_trip_through_json(ladder, tmp_path):
    back = ResultSet.load(ladder.save(tmp_path / "ladder.json"))
    assert back.records == ladder.records and np.isfinite([r["gflops"] for r in back.records]).all()
