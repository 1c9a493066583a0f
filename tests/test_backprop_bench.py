"""Lesson 01's benchmark: the PyTorch peer computes the same step, and the script writes its results."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from course.backprop.bench import compare_with_torch, torch_mlp_step
from course.backprop.layers import MLP, softmax_cross_entropy
from course.backprop.trace import random_batch
from course.errors import BadInputError

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.parametrize("activation", ["relu", "tanh", "sigmoid"])
def test_torch_peer_runs_the_same_network_and_the_same_update(activation):
    torch = pytest.importorskip("torch")
    m = MLP([12, 9, 7, 4], activation=activation, dtype="float64", seed=2)
    x, y = random_batch(m, 6)
    step, net = torch_mlp_step(m, x, y, lr=0.1)
    with torch.no_grad():
        theirs = net(torch.from_numpy(x)).numpy()
    assert np.allclose(theirs, m.forward(x), rtol=1e-12, atol=1e-12)
    loss = float(softmax_cross_entropy(m.forward(x), y)[0])
    assert loss == pytest.approx(torch.nn.functional.cross_entropy(torch.from_numpy(theirs),
                                                                   torch.from_numpy(y)).item(), rel=1e-12)
    step()
    m.train_step(x, y, 0.1)
    ours = [p for p in m.parameters()]
    mods = [t for t in net if isinstance(t, torch.nn.Linear)]
    for i, t in enumerate(mods):
        assert np.allclose(t.weight.detach().numpy().T, ours[2 * i], rtol=1e-10, atol=1e-12)
        assert np.allclose(t.bias.detach().numpy(), ours[2 * i + 1], rtol=1e-10, atol=1e-12)


@pytest.mark.slow
def test_compare_with_torch_reports_a_ratio_or_says_why_not():
    r = compare_with_torch((20, 16, 4), batch=8, rounds=2, repeat=2)
    assert r["ours_s"] > 0 and r["target"] == 0.95
    if r["torch_s"] is None:
        assert "PyTorch" in r["note"] and r["ratio"] is None
    else:
        assert r["ratio"] == pytest.approx(r["ours_s"] / r["torch_s"])
    with pytest.raises(BadInputError, match="rounds"):
        compare_with_torch((4, 2), rounds=0)


def test_benchmark_script_prints_the_target_and_writes_json(tmp_path, monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("bench_backprop", ROOT / "benchmarks" / "bench_backprop.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(bench, "SIZES", (20, 16, 4))
    monkeypatch.setattr(bench, "BATCH", 8)
    out = tmp_path / "b.json"
    assert bench.main(["--quick", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "MLP 20-16-4, batch 8" in text and ("target <= 0.95" in text or "not installed" in text)
    doc = json.loads(out.read_text())
    assert doc["experiment"] == "bench_backprop" and doc["records"][0]["device"] == "cpu"
    assert doc["provenance"]["cpu"]["model"]


@pytest.mark.gpu
def test_gpu_comparison_runs():
    r = compare_with_torch((64, 32, 4), batch=16, device="gpu", rounds=1, repeat=2)
    assert r["ours_s"] > 0 and r["target"] == 1.2


def test_naive_step_does_the_same_arithmetic_as_the_course_step():
    from course.backprop.bench import naive_train_step

    a, b = MLP([12, 9, 4], dtype="float64", seed=1), MLP([12, 9, 4], dtype="float64", seed=1)
    x, y = random_batch(a, 5)
    assert naive_train_step(a, x, y, 0.1) == pytest.approx(b.train_step(x, y, 0.1), rel=1e-14)
    assert all(np.allclose(p, q, rtol=1e-13) for p, q in zip(a.parameters(), b.parameters()))


def test_speed_ablation_times_three_versions_and_draws_them():
    from course.backprop.bench import speed_ablation
    from course.backprop.ladder_plots import ablation_figure

    t = speed_ablation((20, 16, 4), batch=8, rounds=2, repeat=1)
    assert set(t) == {"course", "allocating", "float64 data"} and all(v > 0 for v in t.values())
    labels = [lbl.get_text() for lbl in ablation_figure(t).axes[0].get_yticklabels()]
    assert labels[0].startswith("course") and "(1.00×)" in labels[0]
