"""Every GPU path, run on a GPU and compared with the CPU (all `gpu`: they skip where none answers).

One test per experiment of the report, the report itself (``--quick``), every scan algorithm
with every operator, every widget app with the GPU selected, and the GPU-only fixes that a
CPU cannot show (shared memory, performance warnings, float32 kernels, PyTorch's events,
the checkpointing pool peak, the CUDA 13 clock).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

import course
from course.errors import BadInputError
from course.report import discover
from course.scan.algorithms import OPERATORS, sequential_scan
from course.scan.timing import ALGORITHMS, make_input, scan_function

EXPERIMENTS = sorted(discover())


# ---------------------------------------------------------------- the report and its experiments

@pytest.mark.gpu
@pytest.mark.slow
def test_report_quick_on_the_gpu_has_no_failed_experiment(tmp_path):
    res = subprocess.run([sys.executable, "-m", "course", "report", "--quick", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=3000)
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["failures"] == [], res.stderr[-4000:]
    assert res.returncode == 0, res.stderr[-4000:]
    assert "gpu" in doc["devices"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_runs_on_the_gpu_beside_the_cpu(name):
    exp = discover()[name]
    rs = exp.run(devices=["cpu", "gpu"], quick=True, progress=None)
    gpu, cpu = rs.select(device="gpu"), rs.select(device="cpu")
    assert gpu or any("gpu" in n.lower() for n in rs.notes), f"{name}: no GPU record and no note saying why"
    if gpu and cpu:   # the same measurement on both: the GPU's records carry the CPU's fields
        cpu_keys = set().union(*(r.keys() for r in cpu))
        assert any(set(r.keys()) & cpu_keys >= {"device"} for r in gpu)
    if exp.plotter is not None:
        import matplotlib.pyplot as plt

        plt.close(exp.plotter(rs, []))


# ---------------------------------------------------------------- scans: every algorithm x operator

@pytest.mark.gpu
@pytest.mark.parametrize("op", sorted(OPERATORS))
@pytest.mark.parametrize("algorithm", ALGORITHMS["gpu"])
def test_every_gpu_scan_runs_and_equals_the_cpu_loop_or_is_refused_up_front(algorithm, op):
    try:
        f = scan_function(algorithm, op, "gpu")
    except BadInputError as exc:
        assert "instead" in str(exc) or "choose" in str(exc)
        return
    n = 3000
    x_cpu = make_input(n, op, "float64", "cpu")
    want = sequential_scan(x_cpu, op=OPERATORS[op], exclusive=False)
    try:
        got = course.to_numpy(f(course.to_device(x_cpu, "gpu")))
    except BadInputError as exc:           # e.g. a kernel that takes 1-d arrays only, said so
        assert (algorithm.startswith("numba") and "1-d" in str(exc)
                or algorithm in ("single-pass", "torch") and ("float32" in str(exc) or "PyTorch" in str(exc)))
        return
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-9, atol=1e-9)


@pytest.mark.gpu
@pytest.mark.parametrize("strategy", ["scan-then-add", "reduce-then-scan"])
def test_numba_scan_on_tiny_grids_shows_no_performance_warning(strategy):
    from course.scan.kernels import block_scan

    x = course.to_device(np.arange(100, dtype=np.float32), "gpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = block_scan(x, exclusive=False, strategy=strategy)
    np.testing.assert_allclose(course.to_numpy(got), np.cumsum(np.arange(100, dtype=np.float32)))


@pytest.mark.gpu
def test_largest_float64_tile_that_fits_runs_on_the_gpu():
    from course.scan.kernels import block_scan, require_shared_memory

    require_shared_memory("float64", 1024, 4)
    x = np.random.default_rng(0).random(50_000)
    got = course.to_numpy(block_scan(course.to_device(x, "gpu"), exclusive=False, threads=1024, items=4))
    np.testing.assert_allclose(got, np.cumsum(x), rtol=1e-10)


@pytest.mark.gpu
def test_scan_sweep_with_max_on_the_gpu_keeps_its_records_and_notes_the_refusal():
    from course.scan.timing import scan_sweep

    rs = scan_sweep([2**12], op="max", devices=["cpu", "gpu"], repeat=2, copy_nbytes=2**20)
    assert rs.select(device="gpu", algorithm="numba kernel") and rs.select(device="cpu", algorithm="numpy")
    assert any("cupy" in n and "max" in n for n in rs.notes)


# ---------------------------------------------------------------- widget apps with the GPU selected

def _apps():
    out = []
    for mod in ("backprop.widgets", "bppsa.widgets", "scan.widgets", "throughput.widgets", "vectorize.widgets",
                "hardware.widgets"):
        m = importlib.import_module(f"course.{mod}")
        out += [f"{mod}.{n}" for n in dir(m)
                if n.endswith("_app") and not n.startswith("_") and callable(getattr(m, n))]
    return sorted(out)


def _select_gpu(w) -> bool:
    for opt in getattr(w, "options", ()) or ():
        label, value = opt if isinstance(opt, tuple) else (opt, opt)
        if "gpu" in str(label).lower() or "gpu" in str(value).lower():
            w.value = value
            return True
    if type(w).__name__ in ("Checkbox", "ToggleButton") and "gpu" in str(getattr(w, "description", "")).lower():
        w.value = True
        return True
    return False


@pytest.mark.gpu
@pytest.mark.widgets
@pytest.mark.parametrize("app_name", _apps() if importlib.util.find_spec("ipywidgets") else [])
def test_every_widget_app_runs_its_callback_with_the_gpu_selected(app_name):
    mod, fn = app_name.rsplit(".", 1)
    app = getattr(importlib.import_module(f"course.{mod}"), fn)()
    assert app.last_error is None, f"{app_name} on the CPU: {app.last_error!r}"
    switched = [k for k, w in app.controls.items() if _select_gpu(w)]
    app.refresh()
    assert app.last_error is None, f"{app_name} with {switched} on the GPU: {app.last_error!r}"


# ---------------------------------------------------------------- the other GPU-only fixes

@pytest.mark.gpu
@pytest.mark.parametrize("op", ["relu", "sigmoid", "affine_relu"])
def test_numba_elementwise_on_the_gpu_keeps_float32_and_equals_numpy(op):
    from course.vectorize.gpu import numba_elementwise
    from course.vectorize.rungs import numpy_elementwise

    x = np.random.default_rng(1).standard_normal(10_001).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = numba_elementwise(op, course.to_device(x, "gpu"))
    assert y.dtype == np.float32
    np.testing.assert_allclose(course.to_numpy(y), numpy_elementwise(op, x), rtol=2e-6, atol=1e-7)


@pytest.mark.gpu
def test_torch_events_time_torch_work_and_the_product_equals_numpy():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this PyTorch has no CUDA")
    from course.torch_peer import benchmark_torch

    a = torch.rand(1024, 1024, device="cuda")
    t = benchmark_torch(torch.matmul, a, a, device="gpu", repeat=5)
    assert t.device == "gpu" and t.repeat == 5
    assert np.all(t.samples > 0) and np.all(t.samples <= t.host_samples * 1.05 + 1e-4)
    got = torch.matmul(a, a).cpu().numpy()
    np.testing.assert_allclose(got, a.cpu().numpy().astype(np.float64) @ a.cpu().numpy(), rtol=1e-3)


@pytest.mark.gpu
def test_checkpointing_gpu_peak_sees_the_backward_temporaries():
    from course.backprop.checkpointing import checkpointed_backward
    from course.backprop.layers import MLP
    from course.backprop.trace import random_batch

    model = MLP((784,) + (256,) * 8 + (10,), device="gpu", seed=0)
    x, y = random_batch(model, 128)
    full = checkpointed_backward(model, x, y, every=1)
    # the pool must have held at least the activations plus one gradient of the widest layer
    assert full.device_peak_bytes >= full.peak_activation_bytes + 128 * 256 * 4
    some = checkpointed_backward(model, x, y, every=3)
    assert some.device_peak_bytes < full.device_peak_bytes


@pytest.mark.gpu
def test_gpu_clock_is_read_on_every_cuda_version():
    g = course.gpu_info()[0]
    assert g["clock_mhz"] and 100 < g["clock_mhz"] < 5000


@pytest.mark.gpu
def test_bppsa_on_the_gpu_gives_the_cpu_gradients_and_sweeps_past_a_refused_size():
    from course.bppsa.timing import rnn_sweep, rnn_timings

    gpu = rnn_timings(200, 8, 4, device="gpu", repeat=1)
    cpu = rnn_timings(200, 8, 4, device="cpu", repeat=1)
    assert gpu["max_grad_diff"] < 1e-4 and cpu["max_grad_diff"] < 1e-4
    rs = rnn_sweep([10, 100], hidden_size=8, batch=4, devices=["gpu"], repeat=1, budget_s=None)
    assert {r["T"] for r in rs.select(device="gpu", method="scan")} == {10, 100}


@pytest.mark.gpu
def test_gpu_check_writes_a_summary_naming_the_gpu(tmp_path):
    from course.gpu_machine import run_gpu_check

    status = run_gpu_check(tmp_path, quick=True, skip=("tests", "benchmarks", "targets", "report"),
                           progress=lambda s: None)
    summary = (tmp_path / "summary.md").read_text()
    assert course.gpu_info()[0]["name"] in summary and "NO GPU" not in summary
    assert status == 0
