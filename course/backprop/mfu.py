"""Lesson 01, how much of the GPU a training step uses: MFU, and the roofs it is measured against.

MFU (model FLOPs utilisation) is a step's counted FLOPs per second divided by a roof.  Two roofs, each named:

* **measured**: the same run's matrix-product rate at the same precision, through the same cuBLAS handle and
  compute type the step multiplies with (:func:`course.capture.matmul_into` at that precision; the float32
  step's own ``cublasSgemm``, under the TF32 setting it runs with), on square products of side ``gemm_n``;
* **data sheet**: the GPU's dense tensor-core (or FP32) peak from NVIDIA's data sheet
  (:data:`DATA_SHEET_PEAKS`, each with its source; not a measurement, and None for a GPU not listed).

:func:`course.backprop.bench.precision_sweep` times each precision at rungs (c) and (d) over widths and batches,
with the GEMM rate of each precision measured in the same run (:func:`course.backprop.bench.time_gemm_rate`), and
records both MFUs.

>>> model_flops_utilisation(flops=1e12, seconds=0.01, roof_flops_per_s=2e14)
0.5
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..arguments import Given, OneOf, Real, arguments
from ..errors import BadInputError
from .fast_step import STEP_PRECISIONS

__all__ = ["DATA_SHEET_PEAKS", "GEMM_PRECISION", "data_sheet_peak", "model_flops_utilisation",
           "validate_step_precisions"]

#: A step's precision -> the precision of its products (None: ``matmul_into``'s default, float32 by the dtype).
GEMM_PRECISION = {"float32": None, "tf32": "tf32", "bfloat16": "bfloat16", "float16": "float16",
                  "float16 scaled": "float16"}
#: Dense peaks in TFLOP/s from NVIDIA's data sheets (the sheets' headline tensor figures are "with sparsity", twice
#: these): GPU name fragment -> ({precision: TFLOP/s}, source).  Data-sheet figures, not measurements.
DATA_SHEET_PEAKS = {
    "H200": ({"float32": 67.0, "tf32": 494.7, "bfloat16": 989.4, "float16": 989.4},
             "data sheet: NVIDIA H200 Tensor Core GPU (SXM), dense"),
    "H100 PCIe": ({"float32": 51.0, "tf32": 378.0, "bfloat16": 756.0, "float16": 756.0},
                  "data sheet: NVIDIA H100 Tensor Core GPU (PCIe), dense"),
    "H100": ({"float32": 67.0, "tf32": 494.7, "bfloat16": 989.4, "float16": 989.4},
             "data sheet: NVIDIA H100 Tensor Core GPU (SXM5), dense"),
    "A100": ({"float32": 19.5, "tf32": 156.0, "bfloat16": 312.0, "float16": 312.0},
             "data sheet: NVIDIA A100 Tensor Core GPU, dense"),
    "T4": ({"float32": 8.1, "float16": 65.0}, "data sheet: NVIDIA T4 (no TF32 or bfloat16 tensor cores)"),
}


def _gemm_of(precision: str) -> str:
    g = GEMM_PRECISION[precision]
    return "float32" if g is None else g


@arguments(gpu_name=Given(str), precision=OneOf(*STEP_PRECISIONS))
def data_sheet_peak(gpu_name: str, precision: str) -> tuple[float, str] | None:
    """``(FLOP/s, source)``: the data sheet's dense peak of ``gpu_name`` for the products of ``precision`` (the
    float32 step's are strict float32: the FP32 peak); None for a GPU (or a precision) the table does not hold."""
    name = str(gpu_name)
    for fragment, (peaks, source) in DATA_SHEET_PEAKS.items():
        if fragment in name:
            tflops = peaks.get(_gemm_of(precision))
            return None if tflops is None else (tflops * 1e12, source)
    return None


@arguments(flops=Real(lo=0, hint="the step's counted FLOPs"), seconds=Real(above=0, hint="the step's time"),
           roof_flops_per_s=Real(above=0, hint="the roof: a measured GEMM rate or a data-sheet peak"))
def model_flops_utilisation(flops: float, seconds: float, roof_flops_per_s: float) -> float:
    """``flops / seconds / roof``: the share of a roof (a measured product rate or a data-sheet peak) a step uses."""
    return flops / seconds / roof_flops_per_s


def validate_step_precisions(precisions: Any, allowed: Sequence[str] = STEP_PRECISIONS) -> list[str]:
    """``precisions`` as a list of names of ``allowed`` (at least one, each once)."""
    if isinstance(precisions, (str, bytes)) or not isinstance(precisions, (list, tuple)) \
            or not 1 <= len(precisions) <= len(allowed):
        raise BadInputError(f"precisions must be a list of names from {list(allowed)}, got {precisions!r:.60}")
    out = list(precisions)
    bad = [p for p in out if p not in allowed]
    if bad or not out or len(set(out)) != len(out):
        raise BadInputError(f"precisions must be distinct names from {list(allowed)} (at least one), got {out!r:.80}")
    return out
