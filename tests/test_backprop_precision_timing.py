"""MFU of the fast step at each precision (lesson 01, issue 45): the counted FLOPs over the same run's matrix-product
rate at that precision and over a labelled data-sheet peak; rehearsed on the stand-in GPU, nothing asserted of a
speed."""

from __future__ import annotations

import pytest

from course.backprop.bench import precision_sweep, time_gemm_rate
from course.backprop.counting import mlp_flops
from course.backprop.fast_step import STEP_PRECISIONS
from course.backprop.mfu import data_sheet_peak
from course.errors import BadInputError


def test_the_data_sheet_peak_is_labelled_with_its_source_and_absent_where_the_sheet_has_none():
    flops, source = data_sheet_peak("NVIDIA H200", "bfloat16")
    assert flops == 989.4e12 and source.startswith("data sheet") and "dense" in source
    assert data_sheet_peak("NVIDIA H100 80GB HBM3", "float16 scaled")[0] == 989.4e12   # float16's products
    assert data_sheet_peak("NVIDIA H100 PCIe", "tf32")[0] == 378e12
    assert data_sheet_peak("Tesla T4", "bfloat16") is None                          # no bfloat16 tensor cores
    assert data_sheet_peak("Stand-in GPU (NumPy on the CPU; not a GPU measurement)", "float32") is None
    with pytest.raises(BadInputError):
        data_sheet_peak("NVIDIA H200", "int8")


def test_the_precision_sweep_records_each_precision_s_mfu_against_the_same_run_s_gemm_rate(standin_gpu):
    rs = precision_sweep(widths=(16,), batches=(8,), gemm_n=32, repeat=3, budget_s=0.05, per_event=1)
    recs = rs.records
    assert sorted({(r["precision"], r["rung"]) for r in recs}) == sorted(
        (p, rung) for p in STEP_PRECISIONS for rung in ("fused", "graph"))
    flops = mlp_flops([784, 16, 16, 10], 8)
    for r in recs:
        assert r["flops"] == flops and r["capture_failed"] is None
        assert r["mfu_measured"] == pytest.approx(flops / r["median_s"] / r["gemm_rate"])
        assert r["mfu_peak"] is None and r["peak_source"] is None         # the stand-in has no data sheet
        assert r["reads"] == 0 and (r["launches"] == 1) == (r["rung"] == "graph")
        assert ("cublasSgemm" if r["precision"] == "float32" else "cublasGemmEx") in r["gemm_how"]
        assert r["precision"] == "float32" or r["precision"] in r["title"]


def test_the_gemm_rate_is_measured_at_the_step_s_product_precision(standin_gpu):
    rec = time_gemm_rate("float16 scaled", 32, repeat=2)
    assert rec["gemm"] == "float16" and rec["flops_per_s"] == pytest.approx(2 * 32 ** 3 / rec["median_s"])
    assert time_gemm_rate("float32", 32, repeat=2)["how"].endswith("cublasSgemm")


def test_without_a_gpu_the_sweep_records_nothing_and_says_why(monkeypatch):
    monkeypatch.setenv("COURSE_DISABLE_GPU", "1")
    import importlib

    importlib.import_module("course.devices")._probe.cache_clear()
    try:
        rs = precision_sweep(widths=(16,), batches=(8,))
    finally:
        importlib.import_module("course.devices")._probe.cache_clear()
    assert rs.records == [] and "no GPU here" in rs.notes[0]


def test_bad_sweep_arguments_are_refused_at_the_door():
    for kwargs in ({"precisions": ["float32", "fp8"]}, {"precisions": "float32"}, {"rungs": ["eager"]},
                   {"widths": []}, {"gemm_n": 0}, {"budget_s": -1}):
        with pytest.raises(BadInputError):
            precision_sweep(**kwargs)


def test_the_peer_sweep_on_the_stand_in_times_the_course_s_steps_and_says_the_pytorch_peers_were_skipped(
        standin_gpu, capsys):
    from course.backprop.bench import COURSE_PRECISION_STEPS, precision_peer_sweep

    rs = precision_peer_sweep(widths=(16,), batch=8, repeat=3, budget_s=0.05, per_event=1)
    assert sorted((r["precision"], r["rung"]) for r in rs.records) == sorted(COURSE_PRECISION_STEPS)
    assert all(r["peer"] == "course" and r["capture_failed"] is None for r in rs.records)
    assert any("PyTorch precision peers skipped" in n for n in rs.notes)
    assert "PyTorch precision peers skipped" in capsys.readouterr().out


def test_each_pytorch_peer_names_its_precision_and_the_course_rung_it_is_set_against():
    from course.backprop.fast_step import PRECISION_RUNGS
    from course.backprop.precision_peers import PEER_PRECISION, torch_precision_peers

    for name, (precision, rung) in PEER_PRECISION.items():
        assert rung in PRECISION_RUNGS[precision] and name.startswith("torch")
        assert ("bf16" in name) == (precision == "bfloat16")
    with pytest.raises(BadInputError, match="new_step"):
        torch_precision_peers(None)


@pytest.mark.gpu
def test_the_pytorch_precision_peers_train_like_the_course_s_bfloat16_step_on_the_gpu():
    import torch

    from course.backprop import MLP
    from course.backprop.bench import torch_mlp_step
    from course.backprop.precision_peers import torch_precision_peers
    from course.backprop.trace import random_batch
    from course.torch_peer import torch_cuda_available

    if not torch_cuda_available():
        pytest.skip("PyTorch with CUDA is not here")
    model = MLP([784, 64, 64, 10], device="gpu", seed=0)
    x, y = random_batch(model, 32)
    peers = torch_precision_peers(lambda: torch_mlp_step(model, x, y)[0], compile_peers=False)
    for name, step in peers.items():
        step()
        torch.cuda.synchronize()
        loss = (step.amp if hasattr(step, "amp") else step).loss
        assert loss is not None and bool(torch.isfinite(loss.float())), name
