"""The fast step's rungs (lesson 01): the same numbers as the teaching MLP, and the launches and reads
back each rung is built to make, counted on the CPU; the CUDA C kernels against their NumPy versions
on a GPU, and compiled for sm_90 without one."""

from __future__ import annotations

import numpy as np
import pytest
from _nvrtc import compile_cuda
from hypothesis import given, settings
from hypothesis import strategies as st

from course.backprop import MLP
from course.backprop.counting import CountingNumpy
from course.backprop.fast_step import RUNGS, FastStep, declared_counts
from course.backprop.step_kernels import KERNEL_NAMES, KERNEL_SOURCE, REFERENCE, ptxas_report
from course.errors import BadInputError


def _batch(sizes, batch, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((batch, sizes[0])).astype(dtype), rng.integers(0, sizes[-1], size=batch)


@pytest.mark.parametrize("rung", ["eager", "no_readback", "fused"])
@pytest.mark.parametrize("dtype, tol", [("float64", 1e-12), ("float32", 1e-5)])
def test_every_cpu_rung_trains_like_the_teaching_mlp(rung, dtype, tol):
    sizes, batch, lr, k = [12, 9, 7, 4], 16, 0.2, 5
    teacher = MLP(sizes, dtype=dtype, seed=3)
    fast = FastStep(teacher, rung, batch=batch, lr=lr)
    for s in range(k):
        x, y = _batch(sizes, batch, dtype, seed=s)
        want = teacher.train_step(x, y, lr)
        fast.load(x, y)
        fast.step()
        assert abs(fast.loss() - want) <= tol * max(1.0, abs(want))
    for p, q in zip(fast.parameters(), teacher.parameters()):
        np.testing.assert_allclose(p, q, rtol=tol, atol=tol)


def test_the_fast_step_leaves_the_given_model_alone_and_keeps_one_flat_buffer():
    teacher = MLP([5, 4, 3], dtype="float64", seed=0)
    before = [p.copy() for p in teacher.parameters()]
    fast = FastStep(teacher, "fused", batch=2, lr=0.5)
    fast.load(*_batch([5, 4, 3], 2, "float64"))
    fast.step()
    for p, q in zip(teacher.parameters(), before):
        np.testing.assert_array_equal(p, q)
    for p in fast.parameters():
        assert np.shares_memory(p, fast.params)
    assert fast.params.size == teacher.n_parameters()


def _counts(rung, sizes=(784, 64, 64, 10), batch=8):
    ns = CountingNumpy()
    fast = FastStep(MLP(list(sizes), seed=0), rung, batch=batch, lr=1e-3, namespace=ns)
    fast.load(*_batch(sizes, batch, "float32"))
    fast.step()                        # the teaching MLP makes its buffers on its first step
    ns.counter.reset()
    fast.step()
    return ns.counter


def test_the_eager_step_reads_back_five_times_and_the_other_rungs_never():
    eager = _counts("eager")
    assert eager.reads == 5            # two label checks (min and max each) and float(loss)
    for rung in ("no_readback", "fused"):
        c = _counts(rung)
        assert c.reads == 0, (rung, c.names)


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_the_fused_step_launches_what_it_declares(depth):
    sizes = [20] + [16] * depth + [5]
    c = _counts("fused", sizes)
    assert c.launches == declared_counts("fused", depth + 1)["launches"]
    assert c.names["gemm"] == 3 * (depth + 1) - 1 and c.names["sgd_flat"] == 1 and c.names["mean_loss"] == 1


def test_each_rung_launches_fewer_calls_than_the_one_before():
    counts = [_counts(r).launches for r in ("eager", "no_readback", "fused")]
    assert counts[0] > counts[1] > counts[2], counts


def test_loading_checks_labels_once_and_an_unchecked_bad_label_is_caught_when_the_loss_is_read():
    sizes = [6, 4, 3]
    fast = FastStep(MLP(sizes, seed=0), "fused", batch=2)
    x = np.ones((2, 6), np.float32)
    with pytest.raises(BadInputError, match="out of range"):
        fast.load(x, np.array([0, 3]))
    fast.load(x, np.array([0, 3]), check=False)
    fast.step()
    with pytest.raises(BadInputError, match="out of range"):
        fast.loss()


def test_the_loss_is_read_only_after_a_step_and_a_bad_batch_does_not_poison_the_next():
    sizes = [6, 4, 3]
    x = np.ones((2, 6), np.float32)
    for rung in ("eager", "no_readback", "fused"):
        fast = FastStep(MLP(sizes, seed=0), rung, batch=2)
        fast.load(x, np.array([0, 1]))
        with pytest.raises(BadInputError, match="no step"):
            fast.loss()
        fast.step()
        assert np.isfinite(fast.loss())
    fast = FastStep(MLP(sizes, seed=0), "fused", batch=2)
    fast.load(x, np.array([0, 7]), check=False)
    fast.step()
    with pytest.raises(BadInputError, match="out of range"):
        fast.loss()
    fast.load(x, np.array([0, 2]), check=False)                 # a good batch: the flag speaks of it alone
    fast.step()
    assert np.isfinite(fast.loss())


def test_bad_arguments_get_a_clear_error():
    with pytest.raises(BadInputError, match="rung"):
        FastStep(MLP([4, 3]), "turbo")
    with pytest.raises(BadInputError, match="ReLU"):
        FastStep(MLP([4, 3, 2], activation="tanh"), "fused")
    with pytest.raises(BadInputError, match="GPU"):
        FastStep(MLP([4, 3]), "graph")
    with pytest.raises(BadInputError, match="lr"):
        FastStep(MLP([4, 3]), "fused", lr=-1)
    fast = FastStep(MLP([4, 3]), "fused", batch=2)
    with pytest.raises(BadInputError, match="load"):
        fast.step()
    with pytest.raises(BadInputError, match="batch"):
        fast.load(np.ones((3, 4), np.float32), np.zeros(3, int))
    assert set(RUNGS) == {"eager", "no_readback", "fused", "graph"}


# ----------------------------------------------------------------------------- the kernels' NumPy versions

@settings(max_examples=30, deadline=None)
@given(rows=st.integers(1, 9), cols=st.integers(1, 70), seed=st.integers(0, 2**16))
def test_softmax_xent_reference_matches_the_teaching_loss(rows, cols, seed):
    from course.backprop import softmax_cross_entropy, softmax_cross_entropy_backward

    rng = np.random.default_rng(seed)
    z, b = rng.standard_normal((rows, cols)) * 5, rng.standard_normal(cols)
    y = rng.integers(0, cols, rows)
    g, loss, bad = np.empty((rows, cols)), np.empty(rows), np.zeros(1, np.int32)
    REFERENCE["softmax_xent"](z, b, y, g, loss, bad)
    want, cache = softmax_cross_entropy(z + b, y)
    assert abs(loss.mean() - float(want)) < 1e-12 and bad[0] == 0
    np.testing.assert_allclose(g, softmax_cross_entropy_backward(cache), atol=1e-14)


def test_mask_bias_grad_reference_masks_and_sums_columns():
    dz, h = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[0.0, 1.0], [1.0, 0.0]])
    db = np.empty(2)
    REFERENCE["mask_bias_grad"](dz, h, db, True)
    assert dz.tolist() == [[0.0, 2.0], [3.0, 0.0]] and db.tolist() == [3.0, 2.0]


# ----------------------------------------------------------------------------- CUDA C, without a GPU

def test_the_step_kernels_compile_for_sm_90_with_nvrtc():
    ok, log = compile_cuda(KERNEL_SOURCE, "step_kernels.cu", ("--std=c++14", "--gpu-architecture=compute_90"))
    assert ok, log
    for name in KERNEL_NAMES:
        assert f'void {name}(' in KERNEL_SOURCE


def test_a_typo_in_the_source_fails_to_compile():
    ok, log = compile_cuda(KERNEL_SOURCE.replace("fmaxf(m,", "fmaxf(m;", 1), "bad.cu",
                           ("--gpu-architecture=compute_90",))
    assert not ok and "error" in log


def test_ptxas_report_names_every_kernel_or_says_why_not():
    report = ptxas_report()
    if report.startswith("no ptxas report"):
        pytest.skip(report)
    for name in KERNEL_NAMES:
        assert f"'{name}'" in report
    assert "registers" in report and "spill" in report


# ----------------------------------------------------------------------------- on a GPU

@pytest.mark.gpu
@pytest.mark.parametrize("rung", ["no_readback", "fused", "graph"])
def test_every_gpu_rung_trains_like_numpy(rung):
    sizes, batch, lr = [784, 64, 64, 10], 32, 0.1
    host = MLP(sizes, seed=2)
    fast = FastStep(MLP(sizes, device="gpu", seed=2), rung, batch=batch, lr=lr)
    for s in range(4):
        x, y = _batch(sizes, batch, "float32", seed=s)
        want = host.train_step(x, y, lr)
        import cupy as cp

        fast.load(cp.asarray(x), cp.asarray(y))
        fast.step()
        assert abs(fast.loss() - want) < 1e-4
    for p, q in zip(fast.parameters(), host.parameters()):
        np.testing.assert_allclose(p.get(), q, rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
def test_each_cuda_kernel_matches_its_numpy_version():
    import cupy as cp

    from course.backprop.step_kernels import cupy_kernels

    k, rng = cupy_kernels(), np.random.default_rng(0)
    rows, cols = 37, 45
    h, b = rng.standard_normal((rows, cols)).astype(np.float32), rng.standard_normal(cols).astype(np.float32)
    want, got = h.copy(), cp.asarray(h)
    REFERENCE["bias_relu"](want, b)
    k["bias_relu"](got, cp.asarray(b))
    np.testing.assert_allclose(got.get(), want, rtol=1e-6)
    dz, db = rng.standard_normal((rows, cols)).astype(np.float32), np.empty(cols, np.float32)
    gdz, gdb = cp.asarray(dz), cp.empty(cols, cp.float32)
    REFERENCE["mask_bias_grad"](dz, want, db, True)
    k["mask_bias_grad"](gdz, cp.asarray(want), gdb, True)
    np.testing.assert_allclose(gdz.get(), dz, rtol=1e-6)
    np.testing.assert_allclose(gdb.get(), db, rtol=1e-5, atol=1e-5)
    y = rng.integers(0, cols, rows)
    g, loss, bad = np.empty_like(h), np.empty(rows, np.float32), np.zeros(1, np.int32)
    gg, gl, gbad = cp.empty_like(cp.asarray(h)), cp.empty(rows, cp.float32), cp.zeros(1, cp.int32)
    REFERENCE["softmax_xent"](h, b, y, g, loss, bad)
    k["softmax_xent"](cp.asarray(h), cp.asarray(b), cp.asarray(y), gg, gl, gbad)
    np.testing.assert_allclose(gg.get(), g, atol=1e-6)
    np.testing.assert_allclose(gl.get(), loss, rtol=1e-5)
    p, gr = rng.standard_normal(1000).astype(np.float32), rng.standard_normal(1000).astype(np.float32)
    gp = cp.asarray(p)
    REFERENCE["sgd_flat"](p, gr, 0.3)
    k["sgd_flat"](gp, cp.asarray(gr), 0.3)
    # the GPU contracts p - lr*g into one fused multiply-add (one rounding where NumPy rounds twice): seen on an
    # H100, 2026-11-27, 1.6e-6 relative on an element near zero; |p| and |lr*g| are about 1, so 1e-6 is a few
    # float32 ulps
    np.testing.assert_allclose(gp.get(), p, rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------------------------- the ladder, timed and counted

def test_the_cpu_ladder_records_rungs_a_and_b_with_their_counts_and_no_dtype_field():
    from course.backprop.ladder_plots import ladder_figure
    from course.backprop.readers import ladder_table
    from course.backprop.timing import ladder_sweep
    from course.results import ResultSet

    rs = ladder_sweep(widths=(8, 16), batch=4, devices=["cpu"], repeat=3, budget_s=0.05)
    assert {(r["width"], r["rung"]) for r in rs.records} == {(w, r) for w in (8, 16) for r in ("eager", "no_readback")}
    for r in rs.records:
        assert "dtype" not in r and r["median_s"] > 0       # the plain train-step curves select on dtype
        assert r["reads"] == (5 if r["rung"] == "eager" else 0)
    table = ladder_table(rs, 16, "cpu")
    assert "(a) eager" in table and "(b) no read back" in table
    assert "no GPU ladder" in ladder_table(rs, 16, "gpu")
    old = ResultSet("backprop_train_step", records=[{"device": "gpu", "width": 8, "median_s": 1e-3}])
    old.source = "reference"
    fig = ladder_figure(rs, [old])
    series = [line.get_label() for line in fig.axes[0].lines if line.get_label().startswith(("CPU", "GPU"))]
    assert len(series) == 2 and all("(live)" in s for s in series)      # hollow noisy markers are not series
    assert any("No ladder" in t.get_text() for t in fig.texts)


def _made_up_ladders():
    """A live CPU ladder at width 512 and a recorded GPU one at 64, 512 and 4,096 with PyTorch beside it, plus
    one record of the plain step's curve (no rung) that shares the reference file (made-up times)."""
    from course.results import ResultSet

    cpu = ResultSet("backprop_train_step")
    for rung, t in (("eager", 12e-3), ("no_readback", 10e-3)):
        cpu.add(device="cpu", width=512, rung=rung, title=f"({'ab'[rung != 'eager']}) {rung}", median_s=t, threads=2,
                launches=51, reads=5 if rung == "eager" else 0, flops=8e8, tf32=False)
    gpu = ResultSet("backprop_train_step", params={"batch": 256})
    gpu.source = "reference"
    gpu.add(device="gpu", width=512, median_s=2e-3, dtype="float32")              # the plain curve: no rung
    times = {"eager": 2e-3, "no_readback": 1e-3, "fused": 5e-4, "graph": 1e-4, "torch eager": 1.25e-3,
             "torch graph": 2e-4, "torch graph tf32": 5e-5}
    for w, flops, grow in ((64, 1e8, 1.0), (512, 8e8, 1.0), (4096, 3e10, 4.0)):
        for k, (rung, t) in enumerate(times.items()):
            gpu.add(device="gpu", width=w, rung=rung, title=f"({'abcd'[k]}) {rung}" if k < 4 else rung,
                    median_s=t * (grow if rung == "graph" else 1.0), flops=flops, tf32=rung.endswith("tf32"),
                    launches={"eager": 51, "graph": 1}.get(rung), reads={"eager": 5, "graph": 0}.get(rung))
    return cpu, gpu


def test_the_ladder_lines_give_the_speed_up_from_the_fastest_rung_beside_the_teaching_steps():
    from course.backprop.readers import ladder_lines, ladder_table, ladder_widths_table

    cpu, gpu = _made_up_ladders()
    text = "\n".join(ladder_lines(cpu, gpu, 512, gemm_gflops=100_000.0, gemm_label="of a made-up product"))
    assert "fastest step at width 512, (b) no_readback: 10.000 ms" in text and "2 BLAS thread(s)" in text
    assert "(d) graph: 100.0× (0.100 ms, float32, TF32 off" in text          # 10 ms / 0.1 ms, the graph rung
    assert "2.000 ms, 5.0× this CPU" in text and "20.0×" in text              # the teaching step, the same baseline
    assert "51 launches and 5 reads back per step in (a), 1 launch and 0 reads back" in text
    assert "0.50× PyTorch's graph step's time" in text and "0.40× PyTorch eager's" in text   # (c) 0.5 / 1.25
    assert "TF32 ON" in text and "0.050 ms" in text                           # printed apart, not compared
    assert "4.0× the time for 300× the FLOPs" in text and "1.00×" in text     # graph grows, (a) does not
    assert "75.0 TFLOP/s: 75 % of the float32 matrix-product rate of a made-up product" in text   # 3e10 / 0.4 ms
    assert "No CPU step" in ladder_lines(None, gpu)[0]
    assert "No share" in "\n".join(ladder_lines(cpu, gpu, 512, None, "none recorded on this GPU"))
    assert len(ladder_table(gpu, 512, "gpu").splitlines()) == 2 + len(gpu.select(width=512)) - 1   # no rung: out
    widths = ladder_widths_table(gpu)
    assert [line.split()[0] for line in widths.splitlines()[2:]] == ["64", "512", "4,096"] and "0.400" in widths


def test_the_ladder_figure_draws_each_rung_once_with_the_gemm_bound_and_says_the_fastest_steps():
    from _figure_checks import figure_problems

    from course.backprop.ladder_plots import ladder_figure
    from course.plots import figure_takeaway

    cpu, gpu = _made_up_ladders()
    fig = ladder_figure(cpu, [gpu], gemm_gflops=100_000.0, gemm_label="made up")
    # three panels on one time axis: the CPU's rungs, the GPU's rungs, the GPU's best rung beside PyTorch's steps
    assert [ax.get_title() for ax in fig.axes] == ["CPU: the rungs", "GPU: each rung removes a host cost",
                                                   "GPU: the best rung (d) beside PyTorch"]
    labels = [[line.get_label() for line in ax.lines if not line.get_label().startswith("_")] for ax in fig.axes]
    assert [sum(lab.startswith(d) for lab in labels[k]) for k, d in enumerate(("CPU", "GPU", "GPU"))] == [2, 4, 4]
    assert sum(lab.startswith("GPU (d)") for lab in labels[2]) == 1          # the best rung, beside the peers
    assert all(any("GEMM rate" in lab for lab in labels[k]) for k in (1, 2))
    said = figure_takeaway(fig)
    assert "100 µs at width 64 (rung d), 400 µs at width 4,096 (rung d)" in said, said
    assert "fastest step 10 ms at width 512 (rung b);" in said, said          # one width: said once
    assert figure_problems(fig) == []


def test_the_graph_rung_declares_one_launch_and_the_fused_step_kernels():
    from course.backprop.timing import step_counts

    c = step_counts("graph", (784, 64, 64, 10))
    assert c["launches"] == 1 and c["kernels"] == step_counts("fused", (784, 64, 64, 10))["launches"] == 16


def _bench():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_gpu_step.py"
    spec = importlib.util.spec_from_file_location("bench_gpu_step", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_gpu_step_benchmark_without_a_gpu_prints_the_counts_and_says_nothing_was_timed(capsys):
    from course.devices import gpu_available

    if gpu_available():
        pytest.skip("a GPU answers here: the benchmark times it (python -m course gpu-check)")
    assert _bench().main([]) == 0
    out = capsys.readouterr().out
    assert "eager        launches  51  reads back 5" in out and "graph        launches   1" in out
    assert "No GPU answered" in out and "ptxas" in out


def test_the_four_targets_are_computed_from_the_named_records():
    from course.results import ResultSet

    rs = ResultSet("backprop_step_ladder", provenance={"date": "", "cpu": {}, "libraries": {}, "gpus": [{}]})
    times = {("graph", 512): 1e-4, ("torch graph", 512): 1e-4, ("fused", 512): 2e-4, ("no_readback", 512): 3e-4,
             ("torch eager", 512): 5e-4, ("fused", 4096): 4e-3, ("graph", 4096): 3e-3, ("graph", 64): 5e-5,
             ("fused", 64): 6e-5}
    for (rung, w), t in times.items():
        rs.add(device="gpu", width=w, rung=rung, median_s=t, flops=3e10 if w == 4096 else 1e9)
    vals = [(v, met) for _, v, _, met in _bench().targets(rs, gemm_gflops=20_000.0)]
    assert vals[0] == (1.0, True)                                   # 0.1 ms, ratio 1.0
    assert vals[1] == (pytest.approx(0.4), True)                    # best eager 0.2 ms / 0.5 ms
    assert vals[2][0] == pytest.approx(3e10 / 3e-3 / 1e9 / 20_000)  # 10 TFLOP/s of 20: 0.5
    assert vals[3] == (pytest.approx(60.0), True)                   # 3 ms / 50 µs


def test_each_launch_passes_the_arguments_its_cuda_c_signature_declares(monkeypatch):
    """The Python side of each launch against the C parameter list: a pointer gets an array, ``long long``
    an int64, ``int`` an int32, ``float`` a float32 (a wrong width reads garbage on a GPU, silently)."""
    import importlib
    import re

    from course.backprop.step_kernels import cupy_kernels

    kinds = {"float*": np.ndarray, "long long*": np.ndarray, "int*": np.ndarray, "long long": np.int64,
             "int": np.int32, "float": np.float32}
    signatures = {}
    for name, params in re.findall(r"void (\w+)\(([^)]*)\)", KERNEL_SOURCE):
        types = ["".join(re.sub(r"\b(const|__restrict__)\b", "", p).split()[:-1]) for p in params.split(",")]
        signatures[name] = [t.replace("longlong", "long long") for t in types]
    calls = []

    class FakeModule:
        def __init__(self, code, options=()):
            assert code == KERNEL_SOURCE

        def get_function(self, name):
            return lambda grid, block, args: calls.append((name, grid, block, args))

    class FakeCupy:
        RawModule = FakeModule

    monkeypatch.setattr(importlib.import_module("course.devices"), "cupy_module", lambda: FakeCupy)
    k = cupy_kernels()
    h, b = np.ones((4, 40), np.float32), np.ones(40, np.float32)
    k["bias_relu"](h, b)
    k["mask_bias_grad"](h, h, b, True)
    k["softmax_xent"](h, b, np.zeros(4, np.int64), h, np.ones(4, np.float32), np.zeros(1, np.int32))
    k["mean_loss"](np.ones(4, np.float32), np.zeros(1, np.float32))
    k["sgd_flat"](b, b, 0.1)
    assert [c[0] for c in calls] == list(KERNEL_NAMES)
    for name, grid, block, args in calls:
        want = signatures[name]
        assert len(args) == len(want), (name, args)
        for a, t in zip(args, want):
            assert isinstance(a, kinds[t]) and (t.endswith("*") or type(a) is kinds[t]), (name, t, type(a))
        assert all(g >= 1 for g in grid) and np.prod(block) <= 1024
    assert calls[1][1:3] == ((2,), (32, 8)) and calls[2][1:3] == ((4,), (32,))   # 40 columns; one block per row
