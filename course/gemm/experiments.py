"""Lesson 09's experiments for ``python -m course report``: the CPU ladder against NumPy's BLAS, the GPU ladder
against cuBLAS at each precision, and the three products of one MLP layer's training step."""

from __future__ import annotations

from ..report import by_size, experiment
from ..results import ResultSet, load_reference
from .plots import backprop_products_figure, gpu_ladder_figure, ladder_figure
from .timing import backprop_products_sweep, cpu_ladder_sweep, gpu_ladder_sweep


@experiment("gemm_cpu_ladder", title="The matrix product on this CPU, rung by rung, against NumPy's BLAS",
            lesson="09")
def cpu_ladder(devices, quick, progress):
    """n × n products on the CPU (float32) at every rung of lesson 09 -- the i, j, k loops, the i, k, j order,
    cache blocks, a 3×4 register micro-kernel on packed panels, and that micro-kernel on every core -- and NumPy's
    BLAS, in alternating rounds on the same inputs, on one thread and on all cores; each rung as GFLOP/s, as a
    share of BLAS in the same rounds and of the FMA peak measured on as many cores, with its counted bytes per
    FMA.  The slow loops are skipped at sizes where one product would take seconds."""
    ns = by_size(quick, [256, 1024, 2048], [256], [64])
    return cpu_ladder_sweep(ns, repeat=by_size(quick, 7, 3, 2), budget_s=by_size(quick, 240.0, 20.0, 5.0),
                            progress=progress)


@cpu_ladder.plot
def _(rs, references):
    return ladder_figure(rs, load_reference("gemm_gpu_ladder"))


@experiment("gemm_gpu_ladder", title="The CUDA C ladder against cuBLAS at each precision", lesson="09")
def gpu_ladder(devices, quick, progress):
    """n × n products on the GPU at every rung of the CUDA C ladder (one thread per output, coalesced, shared-memory
    tiles, 1-D and 2-D register blocking, float4 loads, warp tiles, TF32 and bfloat16 mma.sync), each against
    cuBLAS at the rung's own precision (float32 strict, TF32, bfloat16 with float32 accumulation) in alternating
    rounds, with its error against a float64 product of the same inputs.  GPU only."""
    if "gpu" not in devices:
        rs = ResultSet("gemm_gpu_ladder", params={"ns": []})
        rs.notes.append("No GPU here: the GPU ladder is shown from reference results recorded on a GPU, if any.")
        return rs
    ns = by_size(quick, [1024, 4096], [1024], [128])
    return gpu_ladder_sweep(ns, repeat=by_size(quick, 7, 3, 2), progress=progress)


@gpu_ladder.plot
def _(rs, references):
    return gpu_ladder_figure(rs, references)


@experiment("gemm_backprop_products", title="One MLP layer's three products: forward, dX and dW", lesson="09")
def backprop_products(devices, quick, progress):
    """The forward product X @ W, the input gradient dY @ W.T and the weight gradient X.T @ dY of one square
    float32 layer (lesson 01's Linear), at the course's best rung and with the library (NumPy's BLAS; on a GPU
    the best float32 CUDA C rung and cuBLAS), all in alternating rounds: the same FMAs, shaped differently."""
    widths = by_size(quick, [256, 1024, 4096], [512], [64])
    return backprop_products_sweep(widths, batch=by_size(quick, 256, 128, 32), devices=devices,
                                   repeat=by_size(quick, 7, 3, 2), progress=progress)


@backprop_products.plot
def _(rs, references):
    return backprop_products_figure(rs, references)
