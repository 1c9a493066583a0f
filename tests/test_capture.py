"""CUDA graph capture without a GPU: CuPy's capture rules held on the CPU, the captured paths that keep
them, the old captured paths that broke them, and the course's own cuBLAS call checked against a
column-major GEMM written out in NumPy."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course.capture import capture_graph, dot_kernel_nodes, gemm_plan, graph_kernels, matmul_into
from course.counting import CountingNumpy, StreamCaptureError
from course.errors import BadInputError

# ----------------------------------------------------------------------------- the rules, on the counting namespace

def test_a_capture_records_instead_of_running_and_the_graph_replays_in_order():
    ns = CountingNumpy()
    a, b = ns.ones(4, dtype="float32"), ns.zeros(4, dtype="float32")
    with ns.capturing() as graph:
        np.multiply(a, 3, out=a)
        np.add(a, 1, out=b)
    assert a.tolist() == [1.0] * 4 and b.tolist() == [0.0] * 4          # nothing ran
    ns.counter.reset()
    graph.launch()
    assert b.tolist() == [4.0] * 4
    assert ns.counter.launches == 1 and ns.counter.graph_kernels == 2 == graph.kernels
    graph.launch()
    assert a.tolist() == [9.0] * 4 and b.tolist() == [10.0] * 4


@pytest.mark.parametrize("what, exc, word", [
    (lambda a, out: np.matmul(a, a, out=out), NotImplementedError, "cuBLAS"),
    (lambda a, out: a.sum(), NotImplementedError, "CUB"),
    (lambda a, out: np.sum(a, axis=0, out=out[0]), NotImplementedError, "CUB"),
    (lambda a, out: np.cumsum(a), NotImplementedError, "CUB"),
    (lambda a, out: a + 1, StreamCaptureError, "allocat"),
    (lambda a, out: a.copy(), StreamCaptureError, "allocat"),
    (lambda a, out: a[[0, 1]], StreamCaptureError, "allocat"),
    (lambda a, out: float(a[0, 0]), RuntimeError, "device-to-host"),
    (lambda a, out: bool(a[0, 0]), RuntimeError, "device-to-host"),
    (lambda a, out: a.tolist(), RuntimeError, "device-to-host"),
    (lambda a, out: out.__setitem__(..., np.ones((2, 2))), RuntimeError, "host-to-device"),
    (lambda a, out: np.dot(a, a), NotImplementedError, "cuBLAS"),
])
def test_what_cupy_refuses_while_capturing_is_refused_with_the_reason(what, exc, word):
    ns = CountingNumpy()
    a, out = ns.ones((2, 2), dtype="float32"), ns.zeros((2, 2), dtype="float32")
    with pytest.raises(exc, match=word):
        with ns.capturing():
            what(a, out)


def test_what_a_capture_may_hold_is_allowed_views_copies_into_buffers_fills_and_own_kernels():
    ns = CountingNumpy()
    a, out, res = ns.ones((2, 3), dtype="float32"), ns.zeros((3, 2), dtype="float32"), ns.zeros((2, 2), "float32")
    with ns.capturing() as graph:
        v = np.swapaxes(a, 0, 1)                     # a view: no kernel
        np.copyto(out, v)
        out[0] = 5.0
        np.maximum(out, 2, out=out)
        matmul_into(a, out, res)                     # the course's own cuBLAS handle: allowed
    assert graph.kernels == 4 and res.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    graph.launch()
    assert out.tolist() == [[5.0, 5.0], [2.0, 2.0], [2.0, 2.0]] and res.tolist() == [[9.0, 9.0], [9.0, 9.0]]


def test_synchronising_while_capturing_invalidates_the_capture_as_cuda_does():
    from course.standin import StandinCupy

    cp = StandinCupy()
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        with pytest.raises(StreamCaptureError, match="synchronis"):
            s.synchronize()
        with pytest.raises(StreamCaptureError, match="invalidated"):
            s.end_capture()
    assert not s.is_capturing()
    with pytest.raises(RuntimeError, match="default"):
        cp.cuda.Stream.null.begin_capture()


def test_work_on_another_stream_runs_while_one_stream_captures():
    from course.standin import StandinCupy

    cp = StandinCupy()
    x = cp.zeros(3, dtype="float32")
    s, other = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        with other:
            x += 1                                   # not the capturing stream: it runs
        x += 10                                      # captured
        g = s.end_capture()
    assert x.tolist() == [1.0] * 3 and g.kernels == 1


# ----------------------------------------------------------------------------- the captured paths, old and new

def _old_fused_step(fast):
    """Rung (c) as it was: CuPy's own matmul between the kernels (what CuPy refuses to capture)."""
    xp, k, lin, last = fast.xp, fast.kernels, fast.linears, len(fast.linears) - 1
    h = fast._x
    for j, layer in enumerate(lin):
        xp.matmul(h, layer.W, out=fast._z[j])
        if j < last:
            k["bias_relu"](fast._z[j], layer.b)
        h = fast._z[j]


def test_the_old_graph_rung_fails_the_capture_rules_and_the_new_one_keeps_them(standin_gpu):
    import course
    from course.backprop import MLP
    from course.backprop.fast_step import FastStep

    sizes = [12, 9, 7, 4]
    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal((6, 12)).astype(np.float32), rng.integers(0, 4, 6)) for _ in range(3)]
    fast = FastStep(MLP(sizes, device="gpu", seed=1), "fused", batch=6, lr=0.1)
    fast.load(course.to_device(batches[0][0], "gpu"), course.to_device(batches[0][1], "gpu"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        old = capture_graph(lambda: _old_fused_step(fast), what="the old rung (d)")
    assert old.graph is None and "cuBLAS" in old.reason

    teacher = MLP(sizes, seed=1)
    graph = FastStep(MLP(sizes, device="gpu", seed=1), "graph", batch=6, lr=0.1)
    for x, y in batches:
        want = teacher.train_step(x, y, 0.1)
        graph.load(course.to_device(x, "gpu"), course.to_device(y, "gpu"))
        graph.step()
        assert graph.capture_failed is None and graph.graph is not None
        assert abs(graph.loss() - want) < 1e-5
    for p, q in zip(graph.parameters(), teacher.parameters()):
        np.testing.assert_allclose(course.to_numpy(p), q, rtol=1e-5, atol=1e-6)
    assert graph_kernels(graph.graph)["kernels"] == 5 * 3 + 1


def test_a_graph_rung_that_cannot_capture_says_why_once_and_runs_as_the_fused_rung(standin_gpu, monkeypatch):
    import course
    from course.backprop import MLP
    from course.backprop.fast_step import FastStep

    monkeypatch.setattr(FastStep, "_fused_step", lambda self: _old_fused_step(self) or None)
    fast = FastStep(MLP([5, 4, 3], device="gpu", seed=0), "graph", batch=2, lr=0.1)
    with pytest.warns(RuntimeWarning, match="could not be captured"):
        fast.load(course.to_device(np.ones((2, 5), np.float32), "gpu"), course.to_device(np.zeros(2, int), "gpu"))
    assert fast.graph is None and "cuBLAS" in fast.capture_failed and "NOT captured" in fast.title
    fast.load(course.to_device(np.ones((2, 5), np.float32), "gpu"), course.to_device(np.zeros(2, int), "gpu"))


def test_bppsa_s_captured_backward_equals_the_sequential_one_and_the_old_capture_fails(standin_gpu):
    from course.bppsa.algorithm import backprop_sequential
    from course.bppsa.fast import RNNBackwardPlan
    from course.devices import to_device, to_numpy

    rng = np.random.default_rng(3)
    T, B, n = 23, 2, 4
    d, W, g = rng.uniform(0, 1, (T, B, n)), rng.standard_normal((n, n)) / 2, rng.standard_normal((B, n))
    plan = RNNBackwardPlan(T, B, n, to_device(W, "gpu"), chunk=4, graph=True)
    assert plan.graph is not None and plan.capture_failed is None
    got = to_numpy(plan(to_device(d, "gpu"), to_device(g, "gpu")))
    np.testing.assert_allclose(got, backprop_sequential(d[..., :, None] * W, g), rtol=1e-12, atol=1e-12)
    again = to_numpy(plan(to_device(2 * d, "gpu"), to_device(g, "gpu")))   # a replay sees new inputs
    np.testing.assert_allclose(again, backprop_sequential(2 * d[..., :, None] * W, g), rtol=1e-12, atol=1e-12)

    xp = plan.xp

    def old_run():                                   # the plan's products as they were: CuPy's matmul
        xp.matmul(plan.M.reshape(-1, n), plan.W, out=plan.spare.reshape(-1, n))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert capture_graph(old_run, what="the old plan").graph is None


def test_a_failed_capture_ends_the_capture_and_keeps_no_partial_graph(standin_gpu):
    from course.devices import cupy_module

    cp = cupy_module()
    x = cp.zeros(2, dtype="float32")

    def half():
        np.add(x, 1, out=x)
        float(x[0])                                  # a read back: refused

    with pytest.warns(RuntimeWarning, match="could not be captured"):
        c = capture_graph(half, what="a half-capturable function")
    assert c.graph is None and "device-to-host" in c.reason and not c.stream.is_capturing()
    assert x.tolist() == [0.0, 0.0]
    x += 1                                          # the stream works again
    assert x.tolist() == [1.0, 1.0]


# ----------------------------------------------------------------------------- counting a graph's kernels

def test_kernel_nodes_are_counted_from_dot_text_whatever_line_the_name_is_on():
    plain = ('digraph dot {\nsubgraph cluster_1 {\n"graph_1_node_0"[style="solid" shape="rectangle" label="0\n'
             'sm90_xmma_gemm_f32f32\n\\<\\<\\<(8,2,1),(256,1,1),0\\>\\>\\>"];\n"graph_1_node_1"[label="1\nMEMSET\n"];\n'
             '"graph_1_node_2"[label="2\nbias_relu\n\\<\\<\\<(4,1,1),(256,1,1),0\\>\\>\\>"];\n'
             '"graph_1_node_0" -> "graph_1_node_2";\n}\n}\n')
    verbose = ('"graph_0_node_0"[style="solid" shape="record" label="{\nKERNEL\n| {ID | 0 | gemm}\n}"];\n'
               '"graph_0_node_1"[shape="record" label="{MEMCPY\n| {ID | 1}}"];\n'
               '"graph_0_node_2"[shape="record"\n label="{KERNEL\n| {ID | 2}}"];\n')
    assert dot_kernel_nodes(plain) == 2
    assert dot_kernel_nodes(verbose) == 2
    assert dot_kernel_nodes("") == 0


def test_the_stand_in_s_graph_prints_dot_text_that_the_parser_reads(standin_gpu):
    from course.devices import cupy_module

    cp = cupy_module()
    x = cp.zeros(3, dtype="float32")
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        for _ in range(5):
            x += 1
        g = s.end_capture()
    assert graph_kernels(g) == {"kernels": 5, "how": "recorded by the stand-in GPU"}
    assert dot_kernel_nodes(g.debug_dot_str()) == 5


# ----------------------------------------------------------------------------- the course's own GEMM

def _cublas_emulated(plan, a, b, out):
    """What cuBLAS computes from ``plan`` on the raw memory of b (its A), a (its B) and out (its C):
    column-major matrices read with their leading dimensions and batch strides, as cublas<t>gemm
    StridedBatched defines them.  An oracle for the plan written from cuBLAS's definition, not NumPy's."""
    def buffer(x):
        base = x.__array_interface__["data"][0]
        assert all(s >= 0 for s in x.strides)
        span = max(1, sum((n - 1) * s for s, n in zip(x.strides, x.shape)) // x.itemsize + 1)
        return np.ctypeslib.as_array((np.ctypeslib.ctypes.c_char * (span * x.itemsize)).from_address(base)).view(
            x.dtype)[:span]

    A, B, C = buffer(b), buffer(a), buffer(out)
    for i in range(plan.batch):
        def mat(buf, off, rows, cols, ld):                        # column-major rows x cols
            return np.array([[buf[off + r + c * ld] for c in range(cols)] for r in range(rows)])
        ra, ca = (plan.m, plan.k) if plan.transa == 0 else (plan.k, plan.m)
        rb, cb = (plan.k, plan.n) if plan.transb == 0 else (plan.n, plan.k)
        opa = mat(A, i * plan.stride_a, ra, ca, plan.lda)
        opb = mat(B, i * plan.stride_b, rb, cb, plan.ldb)
        opa, opb = (opa if plan.transa == 0 else opa.T), (opb if plan.transb == 0 else opb.T)
        res = opa @ opb                                           # m x n, column-major into C
        for c in range(plan.n):
            for r in range(plan.m):
                C[i * plan.stride_c + r + c * plan.ldc] = res[r, c]


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 5), k=st.integers(1, 5), n=st.integers(1, 5), batch=st.sampled_from([(), (3,), (2, 2)]),
       ta=st.booleans(), tb=st.booleans(), shared_b=st.booleans(), dtype=st.sampled_from(["float32", "float64"]),
       seed=st.integers(0, 2**16))
def test_the_cublas_call_planned_for_any_layout_computes_a_at_b(m, k, n, batch, ta, tb, shared_b, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(batch + ((k, m) if ta else (m, k))).astype(dtype)
    a = np.swapaxes(a, -1, -2) if ta else a
    b_batch = () if shared_b else batch
    b = rng.standard_normal(b_batch + ((n, k) if tb else (k, n))).astype(dtype)
    b = np.swapaxes(b, -1, -2) if tb else b
    out = np.full(batch + (m, n), np.nan, dtype=dtype)
    plan = gemm_plan(a, b, out)
    _cublas_emulated(plan, a, b, out)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(out, a @ b, rtol=tol, atol=tol)
    np.testing.assert_allclose(matmul_into(a, b, np.empty_like(out)), a @ b, rtol=tol, atol=tol)


@pytest.mark.parametrize("a, b, out, word", [
    (np.ones((2, 3)), np.ones((4, 2)), np.empty((2, 2)), "do not multiply"),
    (np.ones((2, 3), np.float32), np.ones((3, 2)), np.empty((2, 2)), "one dtype"),
    (np.ones((2, 3), int), np.ones((3, 2), int), np.empty((2, 2), int), "float32 or float64"),
    (np.ones(3), np.ones((3, 2)), np.empty(2), "at least 2 axes"),
    (np.ones((2, 3)), np.ones((3, 2)), np.empty((2, 2)).T, "row-major"),
    (np.ones((2, 6))[:, ::2], np.ones((3, 2)), np.empty((2, 2)), "neither"),
    (np.ones((3, 2, 3)), np.ones((2, 3, 2)), np.empty((3, 2, 2)), "batch"),
])
def test_a_product_the_course_cannot_hand_to_cublas_is_refused_before_any_call(a, b, out, word):
    with pytest.raises(BadInputError, match=word):
        matmul_into(a, b, out)


def test_every_cublas_entry_point_gets_its_declared_argument_types():
    from course import capture

    class FakeLib:
        def __getattr__(self, name):
            fn = type("Fn", (), {})()
            self.__dict__[name] = fn
            return fn

    lib = capture._bind(FakeLib())
    for name in ("cublasCreate_v2", "cublasSetStream_v2", "cublasSetWorkspace_v2", "cublasSetMathMode",
                 "cublasSgemm_v2", "cublasDgemm_v2", "cublasSgemmStridedBatched", "cublasDgemmStridedBatched"):
        fn = getattr(lib, name)
        assert fn.restype is not None and fn.argtypes
    assert len(lib.cublasSgemm_v2.argtypes) == 14 and len(lib.cublasSgemmStridedBatched.argtypes) == 18


# ----------------------------------------------------------------------------- on a real GPU

@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_course_s_cublas_handle_equals_cupy_s_matmul_for_every_layout(dtype):
    from course.devices import cupy_module

    cp = cupy_module()
    rng = np.random.default_rng(0)
    for m, k, n, batch in [(1, 1, 1, ()), (7, 5, 3, ()), (256, 784, 64, ()), (3, 4, 5, (6,)), (1, 20, 20, (4, 3))]:
        for ta in (False, True):
            for tb in (False, True):
                a = cp.asarray(rng.standard_normal(batch + ((k, m) if ta else (m, k))).astype(dtype))
                b = cp.asarray(rng.standard_normal(batch + ((n, k) if tb else (k, n))).astype(dtype))
                a, b = (cp.swapaxes(a, -1, -2) if ta else a), (cp.swapaxes(b, -1, -2) if tb else b)
                out = matmul_into(a, b, cp.full(batch + (m, n), cp.nan, dtype=dtype))
                want = np.asarray(a.get(), np.float64) @ np.asarray(b.get(), np.float64)
                tol = 1e-4 if dtype == "float32" else 1e-11
                np.testing.assert_allclose(out.get(), want, rtol=tol, atol=tol * max(1, k))


@pytest.mark.gpu
def test_a_cuda_graph_captures_the_course_s_gemm_and_replays_it_on_new_inputs():
    from course.devices import cupy_module

    cp = cupy_module()
    a, b, out = cp.ones((64, 32), cp.float32), cp.ones((32, 16), cp.float32), cp.zeros((64, 16), cp.float32)
    c = capture_graph(lambda: (matmul_into(a, b, out), cp.multiply(out, 2, out=out)), what="a test product",
                      warmup=lambda: matmul_into(a, b, out))
    assert c.ok, c.reason
    assert graph_kernels(c.graph)["kernels"] >= 2
    a.fill(3)
    c.graph.launch(cp.cuda.get_current_stream())
    assert float(out[0, 0].get()) == 2 * 3 * 32


@pytest.mark.gpu
def test_capturing_cupy_s_own_matmul_fails_cleanly_or_works_and_never_leaves_the_stream_capturing():
    from course.devices import cupy_module

    cp = cupy_module()
    a = cp.ones((8, 8), cp.float32)
    out = cp.empty_like(a)
    cp.matmul(a, a, out=out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        c = capture_graph(lambda: cp.matmul(a, a, out=out), what="CuPy's matmul under capture")
    assert not c.stream.is_capturing()
    assert (c.graph is None and "cuBLAS" in c.reason) or (c.ok and graph_kernels(c.graph)["kernels"] >= 1)
    cp.matmul(a, a, out=out)                        # CuPy works as before afterwards
    assert float(out[0, 0].get()) == 8.0


def test_without_the_course_s_cublas_handle_products_fall_back_to_cupy_s_matmul_and_say_so(standin_gpu, monkeypatch):
    from course import capture

    monkeypatch.setattr(capture, "_FAILED", [])
    monkeypatch.setattr(capture, "_LOCAL", type(capture._LOCAL)())
    monkeypatch.setattr(capture, "cublas_library_path", lambda: (_ for _ in ()).throw(OSError("no libcublas here")))

    class DeviceArray(np.ndarray):          # a GPU array that no counting namespace answers for
        __course_device__ = "gpu"

    a, b = np.arange(6.0).reshape(2, 3).view(DeviceArray), np.ones((3, 2)).view(DeviceArray)
    with pytest.warns(RuntimeWarning, match="could not be made"):
        out = matmul_into(a, b, np.empty((2, 2)).view(DeviceArray))
    assert np.asarray(out).tolist() == [[3.0, 3.0], [12.0, 12.0]]
    assert "CuPy's matmul" in capture.cublas_status() and "no libcublas" in capture.cublas_status()
    with warnings.catch_warnings():
        warnings.simplefilter("error")                         # said once, not at every product
        matmul_into(a, b, np.empty((2, 2)).view(DeviceArray))


# ----------------------------------------------------------------------------- a product at a named precision

def test_matmul_into_at_a_named_precision_rounds_its_inputs_as_the_compute_type_does():
    from course.capture import GEMM_PRECISIONS, emulated_product

    a, b = np.full((1, 3), 1 + 2.0 ** -12, np.float32), np.ones((3, 1), np.float32)
    assert matmul_into(a, b, np.empty((1, 1), np.float32))[0, 0] == pytest.approx(3 * (1 + 2.0 ** -12))
    assert matmul_into(a, b, np.empty((1, 1), np.float32), "float32")[0, 0] == pytest.approx(3 * (1 + 2.0 ** -12))
    assert matmul_into(a, b, np.empty((1, 1), np.float32), "tf32")[0, 0] == 3.0        # 2^-12 lies below TF32's ulp
    bits = np.array([[0x3F80, 0x4000]], np.uint16)                                   # bfloat16 1.0 and 2.0
    out = matmul_into(bits, bits.T, np.empty((1, 1), np.uint16), "bfloat16")
    assert out[0, 0] == 0x40A0                                                       # 5.0 in bfloat16
    h = np.array([[300.0, 300.0]], np.float16)
    assert np.isinf(matmul_into(h, h.T, np.empty((1, 1), np.float16), "float16")[0, 0])   # 180,000 > 65,504
    assert matmul_into(h, h.T, np.empty((1, 1), np.float32), "float16")[0, 0] == 180000.0
    assert set(GEMM_PRECISIONS) == {"float32", "tf32", "bfloat16", "float16"}
    with pytest.raises(BadInputError, match="precision must be None"):
        matmul_into(a, b, np.empty((1, 1), np.float32), "fp8")
    with pytest.raises(BadInputError, match="uint16 bit patterns"):
        matmul_into(a, b, np.empty((1, 1), np.float32), "bfloat16")
    with pytest.raises(BadInputError, match="one matrix at a time"):
        matmul_into(np.ones((2, 1, 3), np.float32), b, np.empty((2, 1, 1), np.float32), "tf32")
    with pytest.raises(BadInputError):
        emulated_product(a, b, np.empty((1, 1), np.float64), "float32")


def test_a_product_at_a_named_precision_is_one_counted_launch_and_can_be_captured():
    ns = CountingNumpy()
    a, b, out = ns.ones((4, 3), dtype=np.float16), ns.ones((3, 2), dtype=np.float16), ns.zeros((4, 2), dtype=np.float16)
    ns.counter.reset()
    matmul_into(a, b, out, "float16")
    assert (ns.counter.launches, ns.counter.library_calls, ns.counter.allocations) == (1, 0, 0)
    assert ns.counter.names["gemm_ex float16"] == 1
    out.fill(0)
    with ns.capturing() as graph:
        matmul_into(a.T.T, b, out, "float16")
    assert graph.kernels == 1 and float(out.sum()) == 0      # recorded, not run
    graph.launch()
    assert out.tolist() == [[3.0, 3.0]] * 4
