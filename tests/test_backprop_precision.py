"""The fast step's precisions (lesson 01, issue 45): TF32, bfloat16 and float16 (scaled) at rungs (c) and (d) equal
:mod:`course.backprop.mixed`'s NumPy step; the graph rung captures under the capture rules with no read back; the
float16 loss scale's skip-and-halve is decided on the device; bad combinations are refused at the door."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from course.backprop import MLP
from course.backprop.fast_step import PRECISION_RUNGS, STEP_PRECISIONS, FastStep, declared_counts
from course.backprop.mixed import LossScaler, mixed_precision_train
from course.errors import BadInputError

SIZES, BATCH, LR = [12, 16, 16, 5], 8, 0.1
#: FastStep's precision -> mixed_precision_train's (TF32 is float32's numerics with its inputs rounded to 10 bits)
ORACLE = {"float32": "float32", "tf32": "float32", "bfloat16": "bfloat16", "float16": "float16",
          "float16 scaled": "float16 scaled"}
#: how far a step may lie from the NumPy oracle: the 16-bit steps run the same roundings (a different order of
#: float32 sums moves a value by an ulp of float32, rarely one of the 16-bit type); TF32 rounds the products'
#: inputs to 2^-11 relative, which the float32 oracle does not
TOL = {"float32": 1e-5, "tf32": 2e-3, "bfloat16": 1e-2, "float16": 2e-3, "float16 scaled": 2e-3}


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((BATCH, SIZES[0])).astype(np.float32), rng.integers(0, SIZES[-1], BATCH)


def _steps(fast, x, y, n, gpu=False):
    import course

    if gpu:
        x, y = course.to_device(x, "gpu"), course.to_device(y, "gpu")
    fast.load(x, y)
    losses = []
    for _ in range(n):
        fast.step()
        losses.append(fast.loss())
    return losses


@pytest.mark.parametrize("precision", STEP_PRECISIONS)
def test_each_precision_s_fused_step_equals_the_numpy_mixed_precision_step(precision):
    x, y = _data()
    model = MLP(SIZES, seed=1)
    fast = FastStep(model, "fused", batch=BATCH, lr=LR, precision=precision)
    losses = _steps(fast, x, y, 3)
    want = mixed_precision_train(model, x, y, steps=3, lr=LR, precision=ORACLE[precision], batch=BATCH)
    np.testing.assert_allclose(losses, want["losses"], rtol=TOL[precision], atol=TOL[precision])
    for p, q in zip(fast.parameters(), want["params"]):
        np.testing.assert_allclose(np.asarray(p), q, rtol=TOL[precision], atol=TOL[precision])


@pytest.mark.parametrize("precision", STEP_PRECISIONS)
def test_each_precision_s_graph_step_on_the_stand_in_captures_replays_once_and_reads_nothing(standin_gpu, precision):
    from course.capture import graph_kernels

    x, y = _data(1)
    fast = FastStep(MLP(SIZES, device="gpu", seed=2), "graph", batch=BATCH, lr=LR, precision=precision)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)          # a failed capture would warn
        _steps(fast, x, y, 1, gpu=True)
    assert fast.capture_failed is None and fast.graph is not None
    declared = declared_counts("graph", len(SIZES) - 1, precision)
    assert graph_kernels(fast.graph)["kernels"] == declared["kernels"]
    counter = standin_gpu.counter
    counter.reset()
    fast.step()
    fast.step()
    assert (counter.launches, counter.reads) == (2, 0)          # one graph launch a step, nothing read back
    got = [fast.loss()]
    want = mixed_precision_train(MLP(SIZES, seed=2), x, y, steps=3, lr=LR, precision=ORACLE[precision], batch=BATCH)
    np.testing.assert_allclose(got, want["losses"][2:], rtol=TOL[precision], atol=TOL[precision])
    assert precision == "float32" or precision in fast.title


@pytest.mark.parametrize("precision", STEP_PRECISIONS)
def test_the_fused_step_on_the_stand_in_launches_what_it_declares_at_each_precision(standin_gpu, precision):
    x, y = _data(2)
    fast = FastStep(MLP(SIZES, device="gpu", seed=0), "fused", batch=BATCH, lr=LR, precision=precision)
    _steps(fast, x, y, 1, gpu=True)
    standin_gpu.counter.reset()
    fast.step()
    c = standin_gpu.counter
    assert {"launches": c.launches, "reads": c.reads} == declared_counts("fused", len(SIZES) - 1, precision)
    assert c.allocations == 0
    gemms = sum(n for name, n in c.names.items() if name.startswith("gemm"))
    assert gemms == 3 * (len(SIZES) - 1) - 1
    if precision != "float32":
        assert c.names[f"gemm_ex {'float16' if precision.startswith('float16') else precision}"] == gemms


def test_a_float16_scaled_step_that_overflows_skips_and_halves_on_the_device(standin_gpu):
    x, y = _data(3)
    model = MLP(SIZES, device="gpu", seed=4)
    fast = FastStep(model, "graph", batch=BATCH, lr=LR, precision="float16 scaled", loss_scale=2.0 ** 40,
                    growth_interval=3)
    _steps(fast, x, y, 1, gpu=True)                 # 2^40 times a gradient of ~1e-2 is past float16's 65504
    assert fast.graph is not None
    before = [np.array(p) for p in fast.parameters()]
    standin_gpu.counter.reset()
    fast.step()
    assert standin_gpu.counter.reads == 0           # the decision was made on the device
    state = fast.loss_scaling()                     # read only now, by the test
    assert state["skipped_last"] and state["skipped"] == 2 and state["scale"] == 2.0 ** 38
    for p, q in zip(fast.parameters(), before):
        np.testing.assert_array_equal(np.asarray(p), q)            # skipped: the masters did not move
    host = MLP(SIZES, seed=4)
    want = mixed_precision_train(host, x, y, steps=2, lr=LR, precision="float16 scaled", batch=BATCH,
                                 scaler=LossScaler(2.0 ** 40, growth_interval=3))
    assert want["skipped"] == 2 and want["scales"] == [2.0 ** 40, 2.0 ** 39]


def test_the_float16_loss_scale_grows_after_a_run_of_clean_steps_as_the_numpy_scaler_does():
    x, y = _data(4)
    model = MLP(SIZES, seed=5)
    fast = FastStep(model, "fused", batch=BATCH, lr=LR, precision="float16 scaled", loss_scale=2.0 ** 8,
                    growth_interval=2)
    fast.load(x, y)
    scales = []
    for _ in range(5):
        scales.append(fast.loss_scaling()["scale"])
        fast.step()
    want = mixed_precision_train(model, x, y, steps=5, lr=LR, precision="float16 scaled", batch=BATCH,
                                 scaler=LossScaler(2.0 ** 8, growth_interval=2))
    assert scales == want["scales"] == [256.0, 256.0, 512.0, 512.0, 1024.0]
    assert fast.loss_scaling()["skipped"] == 0


def test_bad_precisions_and_rungs_are_refused_at_the_door():
    model = MLP(SIZES, seed=0)
    for rung in ("eager", "no_readback"):
        for precision in STEP_PRECISIONS[1:]:
            assert rung not in PRECISION_RUNGS[precision]
            with pytest.raises(BadInputError, match="teaching layers' own float32"):
                FastStep(model, rung, batch=4, precision=precision)
    with pytest.raises(BadInputError, match="precision must be one of"):
        FastStep(model, "fused", batch=4, precision="bf16")
    with pytest.raises(BadInputError, match="float32 master weights"):
        FastStep(MLP(SIZES, dtype="float64", seed=0), "fused", batch=4, precision="bfloat16")
    with pytest.raises(BadInputError, match="loss_scale"):
        FastStep(model, "fused", batch=4, precision="float16 scaled", loss_scale=0)
    with pytest.raises(BadInputError, match="growth_interval"):
        FastStep(model, "fused", batch=4, precision="float16 scaled", growth_interval=0)
    with pytest.raises(BadInputError, match="does not scale"):
        FastStep(model, "fused", batch=4, precision="bfloat16").loss_scaling()
    with pytest.raises(BadInputError):
        declared_counts("fused", 3, "float64")


@pytest.mark.slow
def test_the_16_bit_kernels_compile_for_every_architecture_without_spills():
    import shutil

    from course.backprop.mixed_kernels import MIXED_KERNEL_NAMES, MIXED_SOURCE
    from course.cuda_c import ARCHS, ptxas_rows

    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc here")
    for arch in ARCHS:
        rows = ptxas_rows(MIXED_SOURCE, arch)
        assert sorted(r["kernel"] for r in rows) == sorted(MIXED_KERNEL_NAMES), arch
        assert all(r["spill_stores"] == 0 and r["spill_loads"] == 0 for r in rows), arch


def test_each_16_bit_kernel_launch_passes_the_arguments_its_cuda_c_signature_declares(monkeypatch):
    import importlib
    import re

    from course.backprop.mixed_kernels import MIXED_SOURCE, mixed_cupy_kernels

    kinds = {"float*": np.ndarray, "unsigned short*": np.ndarray, "long long*": np.ndarray, "int*": np.ndarray,
             "long long": np.int64, "int": np.int32, "float": np.float32}
    signatures = {}
    for name, params in re.findall(r'extern "C" __global__ void (\w+)_bf16\(([^)]*)\)', MIXED_SOURCE):
        types = [" ".join(re.sub(r"\b(const|__restrict__)\b", "", p).split()[:-1]) for p in params.split(",")]
        signatures[name] = [t.replace(" *", "*") for t in types]
    calls = []

    class FakeModule:
        def __init__(self, code, options=()):
            assert code == MIXED_SOURCE

        def get_function(self, name):
            return lambda grid, block, args: calls.append((name, args))

    class FakeCupy:
        RawModule = FakeModule

    monkeypatch.setattr(importlib.import_module("course.devices"), "cupy_module", lambda: FakeCupy)
    k = mixed_cupy_kernels("bfloat16")
    h, b, f = np.ones((4, 40), np.uint16), np.ones(40, np.uint16), np.ones(1, np.float32)
    flag = np.zeros(1, np.int32)
    k["cast_to"](np.ones(3, np.float32), np.ones(3, np.uint16))
    k["bias_relu"](h, b)
    k["softmax_xent"](h, b, np.zeros(4, np.int64), h, np.ones(4, np.float32), flag, f)
    k["mask_bias_grad"](h, h, b, True)
    k["find_inf"](b, f, flag)
    k["sgd_masters"](np.ones(40, np.float32), b, 0.1, f, flag)
    k["scale_update"](f, flag, flag, np.zeros(2, np.int32), 2.0, 0.5, 200)
    assert len(signatures) == 6
    for name, args in calls[:-1]:
        want = signatures[name.rsplit("_", 1)[0]]
        assert len(args) == len(want), name
        for a, t in zip(args, want):
            assert isinstance(a, kinds[t]) and (t.endswith("*") or type(a) is kinds[t]), (name, t, type(a))
    assert calls[-1][0] == "scale_update" and [type(a) for a in calls[-1][1][4:]] == [np.float32, np.float32, np.int32]


# ----------------------------------------------------------------------------- on a GPU

@pytest.mark.gpu
@pytest.mark.parametrize("precision", STEP_PRECISIONS)
@pytest.mark.parametrize("rung", ["fused", "graph"])
def test_every_precision_trains_on_the_gpu_like_the_numpy_mixed_step(rung, precision):
    x, y = _data(5)
    fast = FastStep(MLP(SIZES, device="gpu", seed=3), rung, batch=BATCH, lr=LR, precision=precision)
    losses = _steps(fast, x, y, 3, gpu=True)
    assert fast.capture_failed is None
    want = mixed_precision_train(MLP(SIZES, seed=3), x, y, steps=3, lr=LR, precision=ORACLE[precision], batch=BATCH)
    np.testing.assert_allclose(losses, want["losses"], rtol=TOL[precision], atol=TOL[precision])
    for p, q in zip(fast.parameters(), want["params"]):
        np.testing.assert_allclose(p.get(), q, rtol=TOL[precision], atol=TOL[precision])


@pytest.mark.gpu
def test_a_float16_scaled_graph_step_skips_and_halves_on_the_gpu():
    x, y = _data(3)
    fast = FastStep(MLP(SIZES, device="gpu", seed=4), "graph", batch=BATCH, lr=LR, precision="float16 scaled",
                    loss_scale=2.0 ** 40)
    _steps(fast, x, y, 2, gpu=True)
    state = fast.loss_scaling()
    assert fast.graph is not None and state["skipped"] == 2 and state["scale"] == 2.0 ** 38


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["float32", "tf32", "bfloat16", "float16"])
def test_matmul_into_at_a_named_precision_equals_its_numpy_emulation_on_the_gpu(precision):
    import cupy as cp

    from course.capture import GEMM_PRECISIONS, emulated_product, matmul_into

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((65, 33)).astype(np.float32), rng.standard_normal((65, 47)).astype(np.float32)
    dtype = GEMM_PRECISIONS[precision][0]
    if precision == "bfloat16":
        import ml_dtypes

        a, b = (v.astype(ml_dtypes.bfloat16).view(np.uint16) for v in (a, b))
    a, b = a.astype(dtype), b.astype(dtype)
    for out_dtype in GEMM_PRECISIONS[precision][1]:
        want = emulated_product(a.T, b, np.empty((33, 47), out_dtype), precision)
        got = matmul_into(cp.asarray(a).T, cp.asarray(b), cp.empty((33, 47), out_dtype), precision).get()
        wide = (lambda v: (v.astype(np.uint32) << 16).view(np.float32)) if out_dtype == "uint16" else np.float32
        np.testing.assert_allclose(wide(got), wide(want), rtol=1e-2 if "16" in out_dtype else 1e-5, atol=1e-4)


def test_the_16_bit_kernels_compile_with_nvrtc_as_cupy_compiles_them():
    from _nvrtc import compile_cuda

    from course.backprop.mixed_kernels import MIXED_KERNEL_NAMES, MIXED_SOURCE

    ok, log = compile_cuda(MIXED_SOURCE, "mixed_kernels.cu", ("--std=c++14", "--gpu-architecture=compute_90"))
    assert ok, log
    assert all(f"void {name}(" in MIXED_SOURCE for name in MIXED_KERNEL_NAMES)
